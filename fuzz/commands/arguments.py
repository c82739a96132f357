"""argparse value types the subcommands share: an out-of-range number is a usage error
that names the option (exit status 2), not a traceback or a run that silently does
nothing (``--minutes -1``) or something else (``--ops -3``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable


def usage_error(message: str) -> SystemExit:
    """Print ``message`` (already prefixed with the command) and return the exit (status
    2) to raise: a usage error found after parsing, worded like argparse's own."""
    print(message, file=sys.stderr)
    return SystemExit(2)


def at_least(minimum: int) -> Callable[[str], int]:
    """An integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def duration(*, zero_allowed: bool = False) -> Callable[[str], float]:
    """A finite duration (seconds or minutes, as the option says) > 0, or >= 0 when
    ``zero_allowed``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value < float("inf") or value < 0 or (value == 0 and not zero_allowed):
            bound = ">= 0" if zero_allowed else "> 0"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text}")
        return value

    return parse


def output_file(text: str) -> str:
    """A file to write at the end of a run: its directory must exist now, so a typo does
    not cost the run's results ('-' is standard output)."""
    if text != "-":
        parent = os.path.dirname(text) or "."
        if not os.path.isdir(parent):
            raise argparse.ArgumentTypeError(f"{parent} is not a directory (to write {text})")
    return text
