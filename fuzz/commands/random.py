"""``nnfuzz random`` (differential random-graph campaigns) and ``nnfuzz minimize``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from driver.hal.types import OperandType, OperationType
from fuzz.commands.arguments import (
    add_graph_size_options,
    at_least,
    duration,
    flattened,
    hal_versions,
    names_of,
    ranks,
)
from fuzz.commands.specs import add_driver_option, open_device
from fuzz.progress import Progress

PRESET_HELP = (
    "Android's TestRandomGraph matrix: 'single' (every operation alone, dims <= 1000), "
    "'small' (5-operation graphs, dims <= 1000) and 'large' (40-operation graphs, "
    "dims <= 10) per data type and rank, 'android' (those three); 'rounding' (quantized "
    "requantizing operations under the strict criteria); 'all' (android + rounding; the "
    "default unless --ops is given)"
)


def register(sub) -> None:
    from fuzz.commands.outputs import writable_directory
    from randomgraph.campaign import JOBS_PER_CPU, PRESET_NAMES, max_jobs
    from randomgraph.differential import CRITERIA_NAMES, GOLDEN_MODES
    from randomgraph.generator.core import PRIMARY_RANKS
    from randomgraph.metamorphic import RELATIONS

    p = sub.add_parser(
        "random",
        help="differential random-graph campaign against the reference",
        description="Generate random valid models, run each on the driver and on the "
        "reference, compare with Android's random-graph criteria, and write every distinct "
        "failure to OUT/failures as a .mod.py spec, original and minimized, with a report "
        "(OUT/report.html, OUT/summary.md). The campaign is resumable: rerun with the same "
        "--out after an interruption. Exit status 1 iff some test failed. See "
        "docs/campaigns.md.",
    )
    p.add_argument("--preset", choices=PRESET_NAMES, help=PRESET_HELP)
    p.add_argument(
        "--seeds",
        help="seed range A:B (B excluded; 'A:' unbounded). Default: 0:50 (Android's count), "
        "or unbounded with --minutes",
    )
    add_graph_size_options(p, "a custom campaign", "default: the preset's")
    p.add_argument(
        "--minutes", type=duration(unit_seconds=60), help="stop starting tests after M minutes"
    )
    # Comma-separated or repeated; an unknown name is a usage error naming the option.
    p.add_argument(
        "--op",
        action="append",
        type=names_of(OperationType, "operation"),
        metavar="NAMES",
        help="only these operations",
    )
    p.add_argument(
        "--type",
        action="append",
        type=names_of(OperandType, "data type"),
        metavar="NAMES",
        help="only signatures using these data types",
    )
    p.add_argument(
        "--rank",
        action="append",
        type=ranks,
        metavar="N",
        help=f"only these primary input ranks ({PRIMARY_RANKS.start}..{PRIMARY_RANKS.stop - 1})",
    )
    p.add_argument(
        "--version",
        action="append",
        type=hal_versions,
        metavar="V",
        help="only these HAL versions (V1_0..V1_3)",
    )
    add_driver_option(p)
    p.add_argument(
        "--partition",
        action="store_true",
        help="run what the driver does not support on the reference (partitioned:DRIVER) "
        "instead of skipping the graph",
    )
    p.add_argument(
        "--jobs",
        type=at_least(0, maximum=max_jobs()),
        default=1,
        help=f"worker processes (default 1; 0 runs in this process, for debugging); at "
        f"most {JOBS_PER_CPU} per CPU ({max_jobs()} here), and no more than there are "
        "tests to run",
    )
    p.add_argument("--shard", default="0/1", help="run shard i of n (i/n), for many machines")
    p.add_argument(
        "--out",
        type=writable_directory,
        help="campaign directory (default: nnfuzz-random-DRIVER)",
    )
    p.add_argument(
        "--golden",
        choices=GOLDEN_MODES,
        default="auto",
        help="golden results: 'auto' (Android's: a single quantized operation runs in "
        "float32, requantized), 'float32' (float16 graphs of any size too) or 'exact' (the "
        "reference on the model as it is)",
    )
    p.add_argument(
        "--criteria",
        choices=[c for c in CRITERIA_NAMES if c != "generated"],
        help="criteria set for a custom campaign (default: per operation, or by graph size)",
    )
    p.add_argument(
        "--timeout",
        type=duration(),
        default=10.0,
        help="watchdog per driver run, seconds (default 10)",
    )
    m = p.add_mutually_exclusive_group()
    m.add_argument(
        "--metamorphic",
        action="store_true",
        default=None,
        help=f"check the metamorphic relations ({', '.join(RELATIONS)}; on for presets)",
    )
    m.add_argument("--no-metamorphic", dest="metamorphic", action="store_false")
    p.add_argument("--no-minimize", action="store_true", help="keep failures as found")
    p.add_argument(
        "--minimize-seconds",
        type=duration(),
        default=30.0,
        help="time budget to minimize one failure (default 30)",
    )
    p.add_argument("--max-tests", type=at_least(1), help=argparse.SUPPRESS)
    p.add_argument("-q", "--quiet", action="store_true", help="no table at the end")
    p.set_defaults(func=cmd_random)

    from fuzz.commands.outputs import writable_file_or_directory

    mz = sub.add_parser(
        "minimize",
        help="reduce a failing spec to the smallest graph that fails the same way",
        description="Check every test of SPEC differentially on the driver (golden from the "
        "reference), then reduce each failing one — drop operations (cut edges become inputs "
        "fed with the reference's values), shrink dims, simplify values — keeping the same "
        "outcome, and write SPEC_STEM_min.mod.py. The spec file is a Python program and is "
        "executed (not sandboxed): minimize only specs you trust. Exit 0 when a minimized "
        "spec was written, 2 when nothing failed (nothing to minimize; as replay, when no "
        "test matches), the spec cannot be loaded, a test of it is an invalid model (a spec "
        "error) or the output cannot be written.",
    )
    mz.add_argument("spec", help="a .mod.py spec file (trusted Python: it is executed)")
    add_driver_option(mz)
    mz.add_argument(
        "--out",
        type=writable_file_or_directory,
        help="file (one test) or directory (an existing one, or ending in '/') for the "
        "minimized spec(s); a symbolic link to a file is written through, a device or FIFO "
        "refused (default: next to SPEC)",
    )
    mz.add_argument(
        "--golden",
        choices=GOLDEN_MODES,
        default="auto",
        help="golden results, as for nnfuzz random (default auto: a single quantized "
        "operation runs in float32, requantized)",
    )
    mz.add_argument(
        "--criteria",
        choices=(*CRITERIA_NAMES, "auto"),
        help="criteria (default: the spec's '# nnfuzz-criteria:' line, else the spec-file "
        "criteria 'generated'; 'auto' picks per operation or by graph size)",
    )
    mz.add_argument(
        "--timeout", type=duration(), default=10.0, help="watchdog per driver run, s (default 10)"
    )
    mz.add_argument("--seconds", type=duration(), default=60.0, help="budget per test (default 60)")
    mz.add_argument(
        "--check", action="store_true", help="only check: exit 1 if a test fails, else 0"
    )
    mz.add_argument(
        "--metamorphic", action="store_true", help="also check the metamorphic relations"
    )
    mz.add_argument("-k", dest="pattern", help="only tests whose name contains PATTERN")
    mz.set_defaults(func=cmd_minimize)


# ---------------------------------------------------------------------------------------
# nnfuzz random
# ---------------------------------------------------------------------------------------


def cmd_random(args: argparse.Namespace) -> int:
    from randomgraph.campaign import (
        CampaignError,
        CampaignSettings,
        Filters,
        format_table,
        outcome_table,
        parse_seeds,
        parse_shard,
        preset_groups,
        replay_command,
        run_campaign,
        seeds_label,
    )
    from randomgraph.differential import Outcome
    from randomgraph.metamorphic import RELATIONS

    driver = f"partitioned:{args.driver}" if args.partition else args.driver
    open_device(driver)  # a bad --driver fails here, with the registry's message
    filters = Filters(
        operations=flattened(args.op),
        data_types=flattened(args.type),
        ranks=tuple(sorted(flattened(args.rank))) if args.rank else None,
        versions=flattened(args.version),
    )
    preset = "custom" if args.ops else (args.preset or "all")
    if args.ops and args.preset:
        print("nnfuzz: --ops makes a custom campaign; drop --preset or --ops", file=sys.stderr)
        return 2
    try:
        groups = preset_groups(preset, filters, max_dim=args.dims, num_ops=args.ops)
        if args.criteria:
            groups = [g.__class__(**{**g.__dict__, "criteria": args.criteria}) for g in groups]
        seeds = parse_seeds(args.seeds) if args.seeds else (None if args.minutes else range(50))
        shard = parse_shard(args.shard)
    except (CampaignError, ValueError) as e:
        print(f"nnfuzz: {e}", file=sys.stderr)
        return 2
    metamorphic = args.metamorphic if args.metamorphic is not None else preset != "custom"
    out = args.out or f"nnfuzz-random-{_slug(args.driver)}"
    settings = CampaignSettings(
        groups=groups,
        out=out,
        seeds=seeds,
        driver=driver,
        minutes=args.minutes,
        jobs=args.jobs,
        shard=shard,
        golden=args.golden,
        timeout=args.timeout,
        metamorphic=RELATIONS if metamorphic else (),
        minimize=not args.no_minimize,
        minimize_seconds=args.minimize_seconds,
        max_tests=args.max_tests,
    )
    print(
        f"nnfuzz random: {driver}, {len(groups)} group(s) ({preset}), seeds {seeds_label(seeds)}, "
        f"golden {args.golden}, metamorphic {'on' if metamorphic else 'off'}, "
        f"jobs {args.jobs} -> {out}",
        flush=True,
    )
    progress = Progress("random", stream=sys.stderr)
    try:
        summary = run_campaign(settings, progress=progress)
    except CampaignError as e:
        print(f"nnfuzz: {e}", file=sys.stderr)
        return 2
    state = summary.state
    counts = state.outcome_counts()
    if not args.quiet:
        header, rows = outcome_table(state)
        print(format_table(header, rows))
    bugs = sorted(state.bugs(), key=lambda f: f.id)
    if bugs:
        print(f"\n{len(bugs)} distinct failure(s):")
        for f in bugs:
            spec = f.minimized or f.spec
            key = f.final_key
            first = f", first diverging {key[3]}" if key[3] != "-" else ""
            print(
                f"  {f.id} {Outcome(f.outcome).label}: {key[1] or '-'} [{key[2]}]{first}, "
                f"{f.copies} test(s)\n      {Path(out) / spec}\n"
                f"      {replay_command(Path(out) / spec, driver, f.outcome, args.timeout)}"
            )
    failed = sum(n for o, n in counts.items() if Outcome(o).failed)
    print(f"\nreport: {summary.report}  summary: {summary.markdown}")
    print(
        f"{sum(counts.values())} tests: {counts.get('pass', 0)} passed, {failed} failed, "
        f"{counts.get('skipped', 0)} skipped; {len(bugs)} distinct failures",
        flush=True,  # before the hint on stderr, which must stay the last line
    )
    if summary.interrupted:
        print(f"interrupted: rerun with --out {out} to resume", file=sys.stderr)
    code = 1 if summary.failed else (130 if summary.interrupted else 0)
    if args.jobs == 0 and counts.get(Outcome.HANG.value):
        # A hung in-process driver call is abandoned on a thread that may keep the
        # interpreter from exiting (driver-owned non-daemon threads): leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


# ---------------------------------------------------------------------------------------
# nnfuzz minimize
# ---------------------------------------------------------------------------------------


def _minimize_live(checker, test, result, seconds: float):
    """:func:`randomgraph.minimize.minimize`, printing each accepted reduction as it
    happens and the number of checks on the live status line."""
    from randomgraph.minimize import MinimizeOptions, minimize

    progress = Progress("   checks", stream=sys.stderr)

    def show(step: str | None) -> None:
        if step is None:
            progress.advance("run")
        else:
            progress.print(f"     {step}")

    try:
        return minimize(
            checker, test, result, options=MinimizeOptions(seconds=seconds), on_progress=show
        )
    finally:
        progress.close()


def cmd_minimize(args: argparse.Namespace) -> int:
    from fuzz.commands.arguments import usage_error
    from fuzz.commands.outputs import output_target, unwritable_directory, write_output
    from randomgraph.campaign import replay_command, spec_text
    from randomgraph.differential import (
        CheckOptions,
        DifferentialChecker,
        check_with_dynamic_variant,
        criteria_for,
        with_outputs,
    )
    from randomgraph.metamorphic import RELATIONS
    from randomgraph.spec.dsl import SpecError
    from randomgraph.spec.loader import load_spec
    from randomgraph.spec.runner import matches, spec_problem

    open_device(args.driver)
    try:
        tests = [t for t in load_spec(args.spec) if matches(t.name, args.pattern)]
    except SpecError as e:
        print(f"nnfuzz: {e}", file=sys.stderr)
        return 2
    checker = DifferentialChecker(
        args.driver,
        CheckOptions(
            golden=args.golden,
            timeout=args.timeout,
            metamorphic=RELATIONS if args.metamorphic else (),
        ),
    )
    spec_path = Path(args.spec)
    # Where the minimized specs go, checked before any work: minimizing takes minutes.
    several = len(tests) > 1
    if (
        args.out is not None
        and several
        and os.path.lexists(args.out)
        and not Path(args.out).is_dir()
    ):
        raise usage_error(
            f"nnfuzz minimize: --out {args.out}: {args.spec} has {len(tests)} tests, "
            "so --out must be a directory"
        )
    if args.out is None and not args.check:
        problem = unwritable_directory(spec_path.parent)
        if problem:
            raise usage_error(f"nnfuzz minimize: {problem} (choose another with --out)")
    stem = (
        spec_path.name[: -len(".mod.py")] if spec_path.name.endswith(".mod.py") else spec_path.stem
    )
    failed = written = spec_errors = 0
    for test in tests:
        if test.expect_failure:
            print(f"== {test.name}: skipped (an ExpectFailure test)")
            continue
        problem = spec_problem(test)
        if problem is not None:
            # The spec is wrong, not the driver: nothing to minimize.
            print(f"== {test.name}: {problem}  [{test.source}]")
            spec_errors += 1
            continue
        if args.criteria == "auto":
            test.criteria = ""
            test.criteria = criteria_for(test)
        elif args.criteria:
            test.criteria = args.criteria
        elif not test.criteria:
            test.criteria = "generated"
        form, result = check_with_dynamic_variant(checker, test)
        print(
            f"== {test.name}{' (output dims unspecified)' if form is not test else ''}: "
            + result.outcome.label
            + (f": {result.detail}" if result.detail else "")
        )
        if not result.failed:
            continue
        failed += 1
        if args.check:
            continue
        print(f"   reducing (budget {args.seconds:g} s):")
        m = _minimize_live(checker, form, result, args.seconds)
        name = f"{stem}_min" if len(tests) == 1 else f"{test.name}_min"
        if args.out is not None:
            target = output_target(args.out, f"{name}.mod.py", into_directory=several)
        else:
            target = spec_path.with_name(f"{name}.mod.py")
        target.parent.mkdir(parents=True, exist_ok=True)
        mt = with_outputs(m.test, m.result.expected) if m.result.expected else m.test
        mt.name = name
        lines = [
            f"nnfuzz minimize: {m.result.outcome.label}",
            f"driver: {args.driver}; golden: {m.result.golden_mode or '-'}; criteria: {m.result.criteria}",
            f"detail: {' '.join(m.result.detail.split())}",
            f"minimized from {spec_path.name} ({len(test.main.operations)} -> "
            f"{m.operations} operations, {m.checks} checks, {m.seconds:.1f} s"
            f"{', interrupted' if m.interrupted else ''})",
            f"replay: {replay_command(target, args.driver, m.result.outcome.value, args.timeout)}",
        ]
        # Written whole, or saved elsewhere and the error says where: never lost.
        write_output(
            target,
            spec_text(
                mt,
                driver=args.driver,
                actual=m.result.actual,
                lines=lines,
                criteria=m.result.criteria,
            ),
        )
        written += 1
        print(
            f"   minimized: {len(test.main.operations)} -> {m.operations} operations "
            f"({m.checks} checks, {m.seconds:.1f} s) -> {target}"
        )
        print(
            f"   replay: {replay_command(target, args.driver, m.result.outcome.value, args.timeout)}"
        )
        if m.interrupted:
            print(
                "interrupted: that spec is the smallest failing graph found so far", file=sys.stderr
            )
            return 130
    if spec_errors:
        print(
            f"nnfuzz: {spec_errors} tests of {args.spec} are invalid models (spec errors above)",
            file=sys.stderr,
        )
        return 2
    if args.check:
        return 1 if failed else 0
    if not failed:
        # As replay: a spec with nothing to work on is a usage error, not a result.
        print(
            f"nnfuzz: nothing to minimize: no test of {args.spec} fails on {args.driver}"
            + (f" (or matches -k {args.pattern!r})" if args.pattern else ""),
            file=sys.stderr,
        )
        return 2
    return 0
