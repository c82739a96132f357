"""The ``nnfuzz`` command line (also ``python -m fuzz``).

Each subcommand lives in its own module under :mod:`fuzz.commands` and exposes
``register(subparsers)``; :data:`COMMAND_MODULES` lists them explicitly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TextIO

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


STANDARD_OUTPUT = "standard output"


class _NamedStandardOutput:
    """``sys.stdout`` whose write errors name it (``OSError.filename``), so that a full
    disk or device behind it is reported as one line, like any output path."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            e.filename = e.filename or STANDARD_OUTPUT
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            e.filename = e.filename or STANDARD_OUTPUT
            raise

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _discard_standard_output() -> None:
    """Point file descriptor 1 at /dev/null: what is still buffered for a standard output
    that failed would fail again at exit, with Python's 'Exception ignored' and status 120."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return  # not a file (captured): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    stdout = sys.stdout
    sys.stdout = _NamedStandardOutput(stdout)
    try:
        with stop_signals_interrupt():
            status = int(args.func(args) or 0)
        sys.stdout.flush()  # a write error shows here, not after main returned
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _discard_standard_output()  # the reader is gone: that is no error
        return 0
    except OSError as e:
        if e.filename is None:
            raise
        if e.filename == STANDARD_OUTPUT:
            _discard_standard_output()
        # A path the user named (an output file, a --work or --out directory, standard
        # output) is not usable: say which and why, not where in the code it was found out.
        print(f"nnfuzz: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
