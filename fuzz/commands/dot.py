"""``nnfuzz dot``: draw a model as a Graphviz graph (``driver.graphdump``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from driver import wire
from driver.graphdump import graph_dump
from driver.hal.types import Model
from fuzz.commands.outputs import writable_file, write_output

SPEC_SUFFIX = ".mod.py"  # as randomgraph.spec.loader's, imported only to draw a spec

EPILOG = """\
MODEL is a spec file (named *.mod.py) or a wire-encoded model (a fuzz reproducer, a corpus
seed; see nnfuzz decode; it starts with the bytes NNFW). A spec file is a Python program
and is executed, not sandboxed: draw only specs you trust. A spec expands to several
test models (variations); pick one with -k: an exact test name, or a substring or glob
that matches exactly one test.

examples:
  nnfuzz dot corpus/model/seed-abs_float32 -o seed.dot && dot -Tsvg seed.dot > seed.svg
  nnfuzz dot corpus/specs/V1_3/if_select_branch.mod.py -k if_select_branch_then
"""


def register(sub) -> None:
    p = sub.add_parser(
        "dot",
        help="write a model as a Graphviz .dot graph",
        description="Write the model as a Graphviz graph: operands as boxes (type, dims, "
        "lifetime), operations as ellipses, each subgraph as a cluster.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        help="spec file (*.mod.py, trusted Python: it is executed) or wire-encoded model file",
    )
    p.add_argument("-k", dest="pattern", help="the test model of a spec file to draw")
    p.add_argument(
        "-o", "--output", type=writable_file, help="write the graph here (default, '-': stdout)"
    )
    p.set_defaults(func=cmd_dot)


def _fail(message: str) -> int:
    print(f"nnfuzz dot: {message}", file=sys.stderr)
    return 2


def _spec_model(path: Path, pattern: str | None) -> tuple[Model, str] | str:
    from randomgraph.spec.dsl import SpecError
    from randomgraph.spec.loader import load_spec
    from randomgraph.spec.runner import matches

    try:
        tests = load_spec(path)
    except SpecError as e:
        return str(e)
    if not tests:
        return f"{path}: the spec defines no tests (no Example)"
    exact = [t for t in tests if t.name == pattern]
    chosen = exact or [t for t in tests if matches(t.name, pattern)]
    if len(chosen) != 1:
        names = "\n  ".join(t.name for t in (chosen or tests)[:30])
        what = "matches no test" if not chosen else f"matches {len(chosen)} tests"
        hint = f"-k {pattern!r} {what}" if pattern else f"the spec has {len(tests)} tests; use -k"
        return f"{hint}:\n  {names}"
    model, _, _ = chosen[0].to_hal()
    return model, chosen[0].name


def cmd_dot(args: argparse.Namespace) -> int:
    path = Path(args.model)
    if path.name.endswith(SPEC_SUFFIX):
        got = _spec_model(path, args.pattern)
        if isinstance(got, str):
            return _fail(got)
        model, name = got
    else:
        # Only the name says "spec": any other file is decoded, never run as Python.
        try:
            with path.open("rb") as f:
                data = wire.read_message(f)  # no further than the header says
        except OSError as e:
            return _fail(f"cannot read {path}: {e.strerror or e}")
        magic = data[: len(wire.MAGIC)]
        if magic != wire.MAGIC:
            return _fail(
                f"{path}: not a wire model (bad magic {magic!r}, expected "
                f"{wire.MAGIC!r}) nor a spec file (a spec's name ends in {SPEC_SUFFIX})"
            )
        try:
            model = wire.decode_model(data)
        except wire.WireDecodeError as e:
            return _fail(f"{path}: {e}")
        name = path.stem
    text = graph_dump(model, name)
    if args.output not in (None, "-"):
        write_output(args.output, text)
        print(
            f"{args.output}: {len(model.main.operations)} operations, "
            f"{1 + len(model.referenced)} subgraphs",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return 0
