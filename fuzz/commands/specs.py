"""``nnfuzz specs run|expand`` and ``nnfuzz replay``: NNAPI test-generator spec files."""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from driver.registry import DriverLoadError, driver_names, load_device
from fuzz.commands.arguments import at_least, duration, usage_error
from fuzz.commands.outputs import writable_file, write_output
from fuzz.progress import Progress
from randomgraph.differential import DriverSession
from randomgraph.spec.dsl import SpecError
from randomgraph.spec.loader import find_specs, load_spec, load_specs
from randomgraph.spec.runner import (
    FAIL,
    SKIP,
    RunSummary,
    TestResult,
    matches,
    run_specs,
    runs_of_test,
)
from randomgraph.testmodel import TestModel

DRIVER_HELP = (
    "driver to test: a registered name ({names}) or module:callable returning a device "
    "(default: reference)"
)


def add_driver_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--driver", default="reference", help=DRIVER_HELP.format(names=", ".join(driver_names()))
    )


def open_device(spec: str):
    try:
        return load_device(spec)
    except DriverLoadError as e:
        raise usage_error(f"nnfuzz: {e}") from None


def open_session(spec: str, timeout: float) -> DriverSession:
    """The driver under a watchdog: a test it does not finish within ``timeout`` seconds
    fails as a hang, and the next test gets a fresh device."""
    device = open_device(spec)
    return DriverSession(lambda: load_device(spec), name=spec, timeout=timeout, device=device)


def add_timeout_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=duration(),
        default=60.0,
        help="seconds one test may take on the driver before it fails as a hang (default 60)",
    )


def register(sub) -> None:
    specs = sub.add_parser(
        "specs",
        help="run or expand NNAPI test-generator spec files (.mod.py)",
        description="Spec files are trusted Python programs in Android's test-generator "
        "format; they are executed, not sandboxed.",
    )
    ssub = specs.add_subparsers(dest="specs_command", metavar="ACTION")
    run = ssub.add_parser(
        "run",
        help="expand specs and check every test model on a driver",
        description="Expand every spec (all variations) and check each test model on the "
        "driver with the generated-test criteria. Also runs each test with unspecified "
        "output dims on HAL 1.2+ drivers, as Android does. A spec that cannot be loaded or "
        "defines no test (no Example) counts as a failed test. Exit status 0 iff nothing "
        "failed, 1 if a test failed, 2 for a path that does not exist or when no test model "
        "is found (matching -k), as replay; 130 when interrupted. The last line is "
        "'N passed, N failed, N skipped'; with --json - standard output is the JSON "
        "document alone and the other lines go to standard error.",
    )
    run.add_argument("paths", nargs="+", metavar="PATH", help="spec files or directories")
    add_driver_option(run)
    add_timeout_option(run)
    run.add_argument(
        "-k", dest="pattern", help="only tests whose name contains PATTERN (or matches a glob)"
    )
    run.add_argument(
        "--json",
        dest="json_file",
        type=writable_file,
        help="write per-test results to this JSON file ('-': standard output)",
    )
    run.add_argument("--no-dynamic", action="store_true", help="skip the dynamic-output-shape runs")
    run.add_argument(
        "-v", "--verbose", action="store_true", help="print every test, not only failures"
    )
    run.set_defaults(func=cmd_run)

    exp = ssub.add_parser(
        "expand",
        help="write the expanded test models as JSON",
        description="Write every expanded test model in the JSON layout of Android's "
        "expanded CTS test models: {spec path: [test model, ...]}. Spec files are trusted "
        "Python programs: they are executed. Exit status 2 when a spec cannot be loaded or "
        "defines no test (no Example) (the specs that loaded are still written), when a "
        "path does not exist, or when no test model is found (matching -k; nothing is "
        "written), as replay; 130 when interrupted (what was expanded is written). With "
        "--json - standard output is the JSON document alone; the summary goes to standard "
        "error.",
    )
    exp.add_argument("paths", nargs="+", metavar="PATH")
    exp.add_argument(
        "--json",
        dest="json_file",
        type=writable_file,
        required=True,
        help="output file ('-' for stdout)",
    )
    exp.add_argument("-k", dest="pattern", help="only tests whose name contains PATTERN")
    exp.set_defaults(func=cmd_expand)
    specs.set_defaults(func=lambda a: specs.print_help() or 2)

    rep = sub.add_parser(
        "replay",
        help="run one spec and show expected vs actual outputs",
        description="Run every test model of one spec file on the driver and show, per "
        "output, the expected and actual values and where they differ. Like specs run, it "
        "also runs each test with unspecified output dims on HAL 1.2+ drivers (a failure "
        "found only there replays too). The spec file is a Python program and is executed "
        "(not sandboxed): replay only specs you trust. Exit status 0 when every test "
        "passes, 1 when one fails, 2 when the spec cannot be loaded or has no test "
        "(matching -k).",
    )
    rep.add_argument("spec", help="a .mod.py spec file (trusted Python: it is executed)")
    add_driver_option(rep)
    add_timeout_option(rep)
    rep.add_argument("-k", dest="pattern", help="only tests whose name contains PATTERN")
    rep.add_argument("--no-dynamic", action="store_true", help="skip the dynamic-output-shape runs")
    rep.add_argument(
        "--max-elements",
        type=at_least(1),
        default=16,
        help="elements shown per output (default 16)",
    )
    rep.set_defaults(func=cmd_replay)


def _check_paths(paths: list[str], command: str) -> None:
    """A path that does not exist is a usage error (exit 2), as for ``fuzz --regress``,
    not a failed test."""
    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:
        raise usage_error(f"nnfuzz {command}: no such file or directory: {', '.join(missing)}")


def cmd_run(args: argparse.Namespace) -> int:
    _check_paths(args.paths, "specs run")
    device = open_session(args.driver, args.timeout)
    # With the JSON on standard output, everything else goes to standard error.
    json_stdout = args.json_file == "-"
    text = sys.stderr if json_stdout else sys.stdout
    progress = Progress("specs", stream=sys.stderr, output=text)

    def on_result(r):
        progress.advance(r.outcome)
        if r.outcome == FAIL:
            progress.print(
                f"FAILED {r.display_name}: {r.reason}" + (f"  [{r.source}]" if r.source else "")
            )
        elif args.verbose:
            extra = f": {r.reason}" if r.reason else ""
            progress.print(f"{r.outcome.upper()} {r.display_name}{extra}")

    summary = RunSummary()
    interrupted = False
    try:
        run_specs(
            args.paths,
            device,
            pattern=args.pattern,
            dynamic=not args.no_dynamic,
            on_result=on_result,
            into=summary,
        )
    except KeyboardInterrupt:
        interrupted = True  # report (and write) what finished
    progress.close()
    if not summary.results and not interrupted:
        # Nothing ran: a wrong path or -k must not pass as a green run (as replay).
        print(f"nnfuzz: {_no_tests(' '.join(args.paths), args.pattern)}", file=sys.stderr)
        return 2
    skipped = [r for r in summary.results if r.outcome == SKIP]
    if skipped and not args.verbose:
        reasons: dict[str, int] = {}
        for r in skipped:
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
        for reason, n in sorted(reasons.items()):
            print(f"skipped {n}: {reason}", file=text)
    results = json.dumps([r.to_json() for r in summary.results], indent=1)
    if json_stdout:
        print(results, flush=True)
    elif args.json_file:
        write_output(args.json_file, results)
    if interrupted:
        print("interrupted: the counts below are the tests that finished", file=sys.stderr)
    print(summary.line, file=text)
    return 1 if summary.count(FAIL) else (130 if interrupted else 0)


def cmd_expand(args: argparse.Namespace) -> int:
    _check_paths(args.paths, "specs expand")
    out: dict[str, list] = {}
    failed = 0
    interrupted = False
    try:
        for path, loaded in load_specs(args.paths):
            if isinstance(loaded, SpecError):
                print(f"nnfuzz: {loaded}", file=sys.stderr)
                failed += 1
                continue
            out[str(path)] = [t.to_json() for t in loaded if matches(t.name, args.pattern)]
    except KeyboardInterrupt:
        interrupted = True  # write (and count) what was expanded
    n_tests = sum(len(v) for v in out.values())
    if not n_tests:
        if interrupted:
            print("interrupted: nothing was expanded", file=sys.stderr)
            return 130
        if not failed:
            # Nothing to write, as replay's "no test model": exit 2, no empty JSON.
            print(f"nnfuzz: {_no_tests(' '.join(args.paths), args.pattern)}", file=sys.stderr)
        return 2  # nothing to write: no empty JSON that looks like a result
    text = json.dumps(out, indent=1)
    if args.json_file == "-":
        print(text, flush=True)
    else:
        write_output(args.json_file, text)
    if interrupted:
        print("interrupted: the count below is what was expanded", file=sys.stderr)
    print(
        f"{n_tests} test models from {len(out)} spec files -> {args.json_file}"
        + (f" ({failed} spec files could not be loaded)" if failed else ""),
        file=sys.stderr if args.json_file == "-" else sys.stdout,
    )
    return 130 if interrupted else (2 if failed else 0)


def _fmt(values: np.ndarray, n: int) -> str:
    flat = values.reshape(-1)
    shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in flat[:n].tolist())
    return f"[{shown}{', ...' if flat.size > n else ''}]"


def cmd_replay(args: argparse.Namespace) -> int:
    device = open_session(args.driver, args.timeout)
    paths = find_specs([args.spec])
    if not paths:
        print(f"nnfuzz: no spec at {args.spec}", file=sys.stderr)
        return 2
    summary = RunSummary()
    try:
        for path in paths:
            try:
                tests = load_spec(path)
            except SpecError as e:
                print(f"nnfuzz: {e}", file=sys.stderr)
                return 2
            for test in tests:
                if not matches(test.name, args.pattern):
                    continue
                for result in runs_of_test(device, test, dynamic=not args.no_dynamic):
                    summary.results.append(result)
                    _show(test, result, args.max_elements)
    except KeyboardInterrupt:
        # Keep what ran: the counts of the tests that finished, as specs run does.
        print("interrupted: the counts below are the tests that finished", file=sys.stderr)
        print(summary.line)
        return 130
    if not summary.results:
        print(f"nnfuzz: {_no_tests(args.spec, args.pattern)}", file=sys.stderr)
        return 2
    print(summary.line)
    return 1 if summary.count(FAIL) else 0


def _show(test: TestModel, result: TestResult, max_elements: int) -> None:
    """Print ``result``, a run of ``test``: per output, expected and actual values and where
    they differ."""
    print(
        f"== {result.display_name}: {result.outcome.upper()}"
        + (f" ({result.reason})" if result.reason and result.outcome != FAIL else "")
    )
    if result.outcome == FAIL and not result.actual:
        print(f"   {result.reason}")
    try:
        _, _, expected = test.to_hal()
    except Exception:
        return  # a spec error: the reason above says why
    for k, want in enumerate(expected):
        print(f"   output {k} {list(want.shape)}")
        print(f"     expected {_fmt(want, max_elements)}")
        if result.actual and k < len(result.actual):
            print(f"     actual   {_fmt(result.actual[k], max_elements)}")
        for m in result.mismatches:
            if m.output == k:
                print(f"     DIFFERS: {m}")


def _no_tests(where: str, pattern: str | None) -> str:
    """Why nothing ran: a wrong path or -k must not pass as a green run."""
    return f"no test model in {where}" + (f" matches -k {pattern!r}" if pattern else "")
