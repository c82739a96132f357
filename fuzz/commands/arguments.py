"""argparse value types the subcommands share: an out-of-range number or an unknown name
is a usage error that names the option (exit status 2), not a traceback, a run that
silently does nothing (``--minutes -1``) or something else (``--ops -3``), nor exit
status 1, which means a test failed."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable

from driver.hal.types import HalVersion


def usage_error(message: str) -> SystemExit:
    """Print ``message`` (already prefixed with the command) and return the exit (status
    2) to raise: a usage error found after parsing, worded like argparse's own."""
    print(message, file=sys.stderr)
    return SystemExit(2)


def at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An integer >= ``minimum`` (and <= ``maximum``, if given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    return parse


def duration(*, zero_allowed: bool = False, unit_seconds: float = 1.0) -> Callable[[str], float]:
    """A finite duration > 0 (>= 0 when ``zero_allowed``) of at most a year, counted in
    units of ``unit_seconds`` (60 for an option in minutes). A year is the isolated
    driver's longest timeout (:data:`driver.isolated.MAX_TIMEOUT`): beyond it a watchdog's
    wait overflows, so a huge ``--timeout`` made every test a false crash or a traceback."""

    def parse(text: str) -> float:
        # Imported here: the driver package is heavy, and most commands never need it.
        from driver.isolated import MAX_TIMEOUT

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value < float("inf") or value < 0 or (value == 0 and not zero_allowed):
            bound = ">= 0" if zero_allowed else "> 0"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text}")
        longest = MAX_TIMEOUT / unit_seconds
        if value > longest:
            raise argparse.ArgumentTypeError(f"must be at most {longest:.0f} (a year), got {text}")
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


def _items(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def names_of(enum: type, what: str) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated list of ``enum`` member names (any case), e.g. ``ADD,mul``."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(item.upper() for item in _items(text))
        for name in names:
            if name not in enum.__members__:
                raise argparse.ArgumentTypeError(f"unknown {what} {name!r}")
        return names

    return parse


def hal_version(text: str) -> HalVersion:
    """A HAL version: ``V1_2``, ``1.2`` or ``12``."""
    try:
        return HalVersion.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def hal_versions(text: str) -> tuple[str, ...]:
    """A comma-separated list of HAL versions (``V1_2``, ``1.2`` or ``12``), as names."""
    return tuple(hal_version(item).name for item in _items(text))


def integers(text: str) -> tuple[int, ...]:
    """A comma-separated list of integers."""
    try:
        return tuple(int(item) for item in _items(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None


def rank(text: str) -> int:
    """A primary input rank the generator makes
    (:data:`randomgraph.generator.core.PRIMARY_RANKS`): any other filters out every
    operation that has one, so a campaign silently skipped almost every test."""
    from randomgraph.generator.core import PRIMARY_RANKS  # here: it loads numpy

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value not in PRIMARY_RANKS:
        raise argparse.ArgumentTypeError(
            f"rank {value} is not one the generator makes "
            f"({PRIMARY_RANKS.start}..{PRIMARY_RANKS.stop - 1})"
        )
    return value


def ranks(text: str) -> tuple[int, ...]:
    """A comma-separated list of primary input ranks (see :func:`rank`)."""
    return tuple(rank(str(value)) for value in integers(text))


def flattened(lists: Iterable[tuple] | None) -> tuple | None:
    """The values of a repeated list option (``action="append"``), in order, without
    repeats; None when the option was not given."""
    if not lists:
        return None
    return tuple(dict.fromkeys(v for values in lists for v in values))


def add_graph_size_options(parser: argparse.ArgumentParser, ops_note: str, dims_note: str) -> None:
    """``--ops`` and ``--dims`` of the commands that generate graphs, bounded by the
    generator's limits (``randomgraph.generator.core``); the notes say what each does to
    the command's preset."""
    from randomgraph.generator.core import MAX_ELEMENTS, MAX_OPS

    parser.add_argument(
        "--ops",
        type=at_least(1, maximum=MAX_OPS),
        help=f"operations per graph, at most {MAX_OPS} ({ops_note})",
    )
    parser.add_argument(
        "--dims",
        type=at_least(1, maximum=MAX_ELEMENTS),
        help=f"largest dimension, at most {MAX_ELEMENTS} ({dims_note})",
    )
