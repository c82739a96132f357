"""nnfuzz's test suite."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py``, a developer script outside the package, imported by path and
    registered under ``name`` (its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def drawn(strategy, n: int) -> list:
    """``n`` deterministic examples of a Hypothesis ``strategy`` (no shrinking, no
    database): for tests of what a strategy draws, rather than of a property."""
    from hypothesis import HealthCheck, Phase, given, settings

    found = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example) -> None:
        found.append(example)

    collect()
    return found
