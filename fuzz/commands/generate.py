"""``nnfuzz generate``: make random valid models, report coverage, dump them as specs.

nnfuzz generate --seed 7                        # one graph, summarized
nnfuzz generate --seeds 0:1000 --preset single --coverage
nnfuzz generate --seed 7 --dump out/            # out/random_small_7.mod.py
nnfuzz generate --seeds 0:50 --op CONV_2D --type TENSOR_QUANT8_ASYMM --version 1.2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from driver.hal.types import HalVersion, OperandType, OperationType
from fuzz.commands.arguments import at_least, output_file, usage_error
from fuzz.progress import Progress


def register(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="generate random valid models (coverage table, spec dumps)",
        description="Generate random valid NNAPI models from seeds: seed N gives the same "
        "model on any machine. Prints one line per graph, or the coverage table with "
        "--coverage; --dump writes each graph as a .mod.py spec with the reference's "
        "outputs as expected values.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--seed", type=at_least(0), help="one seed (default 0)")
    where.add_argument("--seeds", help="a range of seeds A:B (B excluded)")
    p.add_argument(
        "--preset",
        default="small",
        help="single (1 op, dims <= 1000), small (5 ops, dims <= 1000), medium (10 ops, "
        "dims <= 100), large (40 ops, dims <= 10); default small",
    )
    p.add_argument("--ops", type=at_least(1), help="operations per graph (overrides the preset)")
    p.add_argument("--dims", type=at_least(1), help="largest dimension (overrides the preset)")
    p.add_argument("--elements", type=at_least(1), help="largest element count per operand")
    p.add_argument("--op", action="append", metavar="NAME", help="only these operations")
    p.add_argument("--type", action="append", metavar="TYPE", help="only these data types")
    p.add_argument("--rank", action="append", type=int, help="only these primary input ranks")
    p.add_argument("--version", action="append", metavar="V", help="only these HAL versions")
    p.add_argument("--coverage", action="store_true", help="print the coverage table")
    p.add_argument("--dump", metavar="DIR", help="write each graph as DIR/<name>.mod.py")
    p.add_argument(
        "--json", metavar="FILE", type=output_file, help="write per-graph summaries as JSON"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no per-graph lines")
    p.set_defaults(func=run)


def _seeds(args: argparse.Namespace) -> range:
    from randomgraph.campaign import parse_seeds, unbounded

    if not args.seeds:
        return range(args.seed or 0, (args.seed or 0) + 1)
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as e:
        raise _usage_error(str(e)) from None
    if unbounded(seeds):
        raise _usage_error(f"--seeds {args.seeds} has no end: use A:B")
    return seeds


def _usage_error(message: str) -> SystemExit:
    return usage_error(f"nnfuzz generate: {message}")


def _enum_set(values, enum, what: str):
    if not values:
        return None
    out = set()
    for v in values:
        key = v.upper()
        if what == "type" and not key.startswith("TENSOR_") and "TENSOR_" + key in enum.__members__:
            key = "TENSOR_" + key
        if key not in enum.__members__:
            raise _usage_error(f"unknown {what} {v!r}")
        out.add(enum[key])
    return frozenset(out)


def run(args: argparse.Namespace) -> int:
    from randomgraph.coverage import Coverage
    from randomgraph.generator import GenerationError, generate, resolve_config

    versions = None
    if args.version:
        try:
            versions = tuple(sorted({HalVersion.parse(v) for v in args.version}))
        except ValueError as e:
            raise _usage_error(str(e)) from None
    try:
        config = resolve_config(
            args.preset,
            num_ops=args.ops,
            max_dim=args.dims,
            max_elements=args.elements,
            operations=_enum_set(args.op, OperationType, "operation"),
            data_types=_enum_set(args.type, OperandType, "type"),
            ranks=frozenset(args.rank) if args.rank else None,
            versions=versions,
        )
    except ValueError as e:
        raise _usage_error(str(e)) from None
    out_dir = Path(args.dump) if args.dump else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    coverage = Coverage()
    summaries = []
    failed = 0
    start = time.perf_counter()
    seeds = _seeds(args)
    # Per-graph lines are off with --coverage or -q: show a live count instead.
    progress = Progress("generate", total=len(seeds), stream=sys.stderr)
    for seed in seeds:
        try:
            graph = generate(seed, config)
        except GenerationError as e:
            failed += 1
            progress.close()  # clears the live line; the next count redraws it
            print(f"seed {seed}: {e}", file=sys.stderr)
            progress.advance("failed")
            continue
        progress.advance("generated")
        coverage.add(graph)
        ops = [r.operation.name for r in graph.operations]
        summary = {
            "seed": seed,
            "name": graph.name,
            "version": graph.version.name,
            "relaxed": graph.relaxed,
            "operations": ops,
            "inputs": len(graph.model.main.input_indexes),
            "outputs": len(graph.model.main.output_indexes),
            "choices": len(graph.choices),
        }
        summaries.append(summary)
        if out_dir is not None:
            path = out_dir / f"{graph.name}.mod.py"
            path.write_text(graph.dump())
            summary["spec"] = str(path)
        if not args.quiet and not args.coverage:
            shown = " ".join(ops[:12]) + (" ..." if len(ops) > 12 else "")
            progress.print(
                f"seed {seed:6}  HAL {graph.version.label}{' relaxed' if graph.relaxed else ''}"
                f"  {len(ops)} ops: {shown}"
            )
    progress.close()
    elapsed = time.perf_counter() - start
    if args.coverage:
        print(coverage.table())
    n = len(summaries)
    print(
        f"{n} graphs generated, {failed} failed, {n / elapsed if elapsed else 0:.0f} graphs/s"
        + (f", specs in {out_dir}" if out_dir is not None else ""),
        file=sys.stderr if args.coverage else sys.stdout,
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"graphs": summaries, "coverage": coverage.summary()}, indent=1)
        )
    return 1 if failed else 0
