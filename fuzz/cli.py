"""The ``nnfuzz`` command line (also ``python -m fuzz``).

Each subcommand lives in its own module under :mod:`fuzz.commands` and exposes
``register(subparsers)``; :data:`COMMAND_MODULES` lists them explicitly.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from randomgraph.stopping import stop_signals_interrupt

COMMAND_MODULES = (
    "fuzz.commands.dot",
    "fuzz.commands.ops",
    "fuzz.commands.generate",
    "fuzz.commands.fuzz",
    "fuzz.commands.random",
    "fuzz.commands.specs",
    "fuzz.commands.wire",
)

DESCRIPTION = """\
nnfuzz: fuzzing and property-testing for Android NNAPI (NN HAL 1.0-1.3) drivers.

The built-in reference driver (numpy) is both a driver you can test and the oracle other
drivers are compared with. Run `nnfuzz COMMAND --help` for each command's options."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnfuzz", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with stop_signals_interrupt():
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        if e.filename is None:
            raise
        # A path the user named (an output file, a --work or --out directory) is not
        # usable: say which and why, not where in the code it was found out.
        print(f"nnfuzz: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
