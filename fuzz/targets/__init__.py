"""The fuzz targets, one module each; ``nnfuzz fuzz TARGET`` runs them under libFuzzer.

Every target module defines ``test_one_input(data: bytes) -> None`` (returns for any input
that ends in a defined HAL status; anything else propagates as a finding), ``MAX_LEN``
(the default libFuzzer ``-max_len``), optionally ``custom_mutator(data, max_size, seed)``,
and ``main(argv)``; it is also an executable script (libFuzzer's fork mode re-runs it).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

TARGETS: tuple[str, ...] = ("model", "request", "execute", "cache", "memory")
"""Registered target names, in the order campaigns and tests run them."""

HERE = Path(__file__).resolve().parent


class UnknownTarget(ValueError):
    pass


def load(name: str) -> ModuleType:
    """The target module named ``name``: a registered target, or the dotted path of a
    module of your own that follows the same protocol (e.g. ``mypkg.fuzz_my_driver``)."""
    if name in TARGETS:
        return importlib.import_module(f"fuzz.targets.{name}")
    if "." in name:
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            raise UnknownTarget(f"cannot import fuzz target module {name!r}: {e}") from e
        if callable(getattr(module, "test_one_input", None)):
            return module
        raise UnknownTarget(f"{name!r} has no test_one_input(data)")
    raise UnknownTarget(
        f"unknown fuzz target {name!r}: use one of {', '.join(TARGETS)} or a module path"
    )


def script(name: str) -> Path:
    """The script that runs target ``name`` under libFuzzer."""
    if name in TARGETS:
        return HERE / f"{name}.py"
    return Path(load(name).__file__)


def summary(name: str) -> str:
    """The first line of the target's docstring."""
    doc = (load(name).__doc__ or "").strip()
    first = doc.splitlines()[0] if doc else ""
    return first.removeprefix(f"{name}: ")
