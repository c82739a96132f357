"""All valid one-operation examples, gathered from ``examples_<family>.py`` modules.

Each family's examples module exports ``EXAMPLES: list[driver.testing.OpExample]``. They
are kernel test rows, seeds for the VTS-style mutation tests and fuzz seed corpora.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from driver.testing import OpExample


def all_examples() -> list[OpExample]:
    found: list[OpExample] = []
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("examples_"):
            mod = importlib.import_module(f"tests.operations.{info.name}")
            found.extend(mod.EXAMPLES)
    return found
