"""The bundled spec files pass on the reference driver and on its feature levels."""

from pathlib import Path

import pytest

from driver.registry import load_device
from randomgraph.spec.runner import FAIL, PASS, run_specs

SPECS = Path(__file__).resolve().parents[1] / "corpus" / "specs"


@pytest.mark.parametrize("driver", ["reference", "reference-1.2", "reference-1.0"])
def test_bundled_specs_pass(driver):
    summary = run_specs([SPECS], load_device(driver))
    failures = [f"{r.display_name}: {r.reason}" for r in summary.results if r.outcome == FAIL]
    assert not failures, "\n".join(failures)
    assert summary.count(PASS) > 0
