"""``nnfuzz generate``: make random valid models, report coverage, dump them as specs.

nnfuzz generate --seed 7                        # one graph, summarized
nnfuzz generate --seeds 0:1000 --preset single --coverage
nnfuzz generate --seed 7 --dump out/            # out/random_small_7.mod.py
nnfuzz generate --seeds 0:50 --op CONV_2D --type TENSOR_QUANT8_ASYMM --version 1.2

Sizes are bounded (randomgraph.generator.core: MAX_OPS, MAX_ELEMENTS, MAX_GRAPH_ELEMENTS) so that a graph stays
quick to generate and run on the reference, and its spec dump loads again
(randomgraph.spec.loader.MAX_SPEC_BYTES).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from driver.hal.types import HalVersion, OperandType, OperationType
from fuzz.commands.arguments import add_graph_size_options, at_least, rank, usage_error
from fuzz.commands.outputs import writable_directory, writable_file, write_output
from fuzz.progress import Progress
from randomgraph.generator.core import MAX_ELEMENTS, MAX_GRAPH_ELEMENTS


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
    where.add_argument("--seeds", help="a range of seeds A:B (B excluded), or N")
    p.add_argument(
        "--preset",
        default="small",
        help="single (1 op, dims <= 1000), small (5 ops, dims <= 1000), medium (10 ops, "
        "dims <= 100), large (40 ops, dims <= 10); default small",
    )
    add_graph_size_options(p, "overrides the preset", "overrides the preset")
    p.add_argument(
        "--elements",
        type=at_least(1, maximum=MAX_ELEMENTS),
        help=f"largest element count per operand, at most {MAX_ELEMENTS} (default 10000), "
        f"and --ops x --elements at most {MAX_GRAPH_ELEMENTS}",
    )
    p.add_argument(
        "--op", action="append", metavar="NAME", help="only these operations (NAME,NAME,...)"
    )
    p.add_argument(
        "--type", action="append", metavar="TYPE", help="only these data types (TYPE,TYPE,...)"
    )
    p.add_argument("--rank", action="append", type=rank, help="only these primary input ranks")
    p.add_argument(
        "--version", action="append", metavar="V", help="only these HAL versions (V,V,...)"
    )
    p.add_argument("--coverage", action="store_true", help="print the coverage table")
    p.add_argument(
        "--dump",
        metavar="DIR",
        type=writable_directory,
        help="write each graph as DIR/<name>.mod.py",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        type=writable_file,
        help="write per-graph summaries as JSON ('-': standard output)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no per-graph lines")
    p.set_defaults(func=run)


def _seeds(args: argparse.Namespace) -> range:
    from randomgraph.campaign import parse_seeds, unbounded

    if args.seeds is None:
        return range(args.seed or 0, (args.seed or 0) + 1)
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError:
        seeds = None
    if unbounded(seeds):  # also a bad range; 'A:' is for campaigns, not generate
        raise _usage_error(f"--seeds {args.seeds!r}: use A:B (A < B, B excluded) or N")
    return seeds


def _usage_error(message: str) -> SystemExit:
    return usage_error(f"nnfuzz generate: {message}")


def _enum_set(values, enum, what: str, option: str):
    if not values:
        return None
    out = set()
    for v in _items(values, option):
        key = v.upper()
        if what == "type" and not key.startswith("TENSOR_") and "TENSOR_" + key in enum.__members__:
            key = "TENSOR_" + key
        if key not in enum.__members__:
            raise _usage_error(f"unknown {what} {v!r}")
        out.add(enum[key])
    return frozenset(out)


def _items(values: list[str], option: str) -> list[str]:
    """The items of a repeated, comma-separated option (``--op ADD,MUL --op ABS``)."""
    items = [item.strip() for value in values for item in value.split(",")]
    if not all(items):
        raise _usage_error(f"{option}: expected a comma-separated list, got {','.join(values)!r}")
    return items


def _check_graph_size(config) -> None:
    """--ops and --elements (each bounded by argparse) together within MAX_GRAPH_ELEMENTS."""
    if config.num_ops * config.max_elements > MAX_GRAPH_ELEMENTS:
        raise _usage_error(
            f"--ops x --elements must be <= {MAX_GRAPH_ELEMENTS} (a graph's memory and spec "
            f"size), got {config.num_ops} x {config.max_elements}"
        )


def run(args: argparse.Namespace) -> int:
    from randomgraph.coverage import Coverage
    from randomgraph.generator import resolve_config

    versions = None
    if args.version:
        try:
            versions = tuple(
                sorted({HalVersion.parse(v) for v in _items(args.version, "--version")})
            )
        except ValueError as e:
            raise _usage_error(str(e)) from None
    try:
        config = resolve_config(
            args.preset,
            num_ops=args.ops,
            max_dim=args.dims,
            max_elements=args.elements,
            operations=_enum_set(args.op, OperationType, "operation", "--op"),
            data_types=_enum_set(args.type, OperandType, "type", "--type"),
            ranks=frozenset(args.rank) if args.rank else None,
            versions=versions,
        )
    except ValueError as e:
        raise _usage_error(str(e)) from None
    _check_graph_size(config)
    seeds = _seeds(args)
    out_dir = Path(args.dump) if args.dump is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    coverage = Coverage()
    summaries = []
    failed = 0
    start = time.perf_counter()
    # Per-graph lines are off with --coverage or -q: show a live count instead.
    progress = Progress("generate", total=len(seeds), stream=sys.stderr)
    interrupted = False
    try:
        for seed in seeds:
            failed += not _generate_one(seed, config, args, out_dir, coverage, summaries, progress)
    except KeyboardInterrupt:
        interrupted = True  # report and write the graphs that finished
    progress.close()
    elapsed = time.perf_counter() - start
    if args.coverage:
        print(coverage.table())
    n = len(summaries)
    print(
        f"{n} graphs generated, {failed} failed, {n / elapsed if elapsed else 0:.0f} graphs/s"
        + (f", specs in {out_dir}" if out_dir is not None else "")
        + (" (interrupted)" if interrupted else ""),
        file=sys.stderr if args.coverage or args.json == "-" else sys.stdout,
    )
    if args.json:
        text = json.dumps({"graphs": summaries, "coverage": coverage.summary()}, indent=1)
        if args.json == "-":
            print(text)
        else:
            write_output(args.json, text)
    return 130 if interrupted else 1 if failed else 0


def _generate_one(seed: int, config, args, out_dir, coverage, summaries, progress) -> bool:
    """Generate, record and show the graph of ``seed``; False if it cannot be generated."""
    from randomgraph.generator import GenerationError, generate

    try:
        graph = generate(seed, config)
    except GenerationError as e:
        progress.close()  # clears the live line; the next count redraws it
        print(f"seed {seed}: {e}", file=sys.stderr)
        progress.advance("failed")
        return False
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
        write_output(path, graph.dump())
        summary["spec"] = str(path)
    if not args.quiet and not args.coverage:
        shown = " ".join(ops[:12]) + (" ..." if len(ops) > 12 else "")
        progress.print(
            f"seed {seed:6}  HAL {graph.version.label}{' relaxed' if graph.relaxed else ''}"
            f"  {len(ops)} ops: {shown}"
        )
    return True
