"""Differential: the driver's outputs agree with the reference's under Android's
random-graph accuracy criteria, and the regression corpus (``--nn-corpus``) passes."""

from __future__ import annotations

import pytest
from hypothesis import assume

from nnfuzz_pytest.checks import assert_close, assert_ok, prepare_supported
from nnfuzz_pytest.session import active, models, nn_property

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_differential]


@nn_property(2.0, case=models())
def test_outputs_match_reference(nn_driver, case):
    """Prepare and execute (synchronously where the HAL has it): every output within the
    criteria of the reference's (strict for exact arithmetic, conv for accumulations,
    medium for transcendental functions, relaxed for relaxed/float16 models)."""
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    path = "sync" if "sync" in nn_driver.paths else nn_driver.paths[0]
    outputs = assert_ok(nn_driver.run(prepared, case.inputs, path), path)
    assert_close(case.model, outputs, case.expected(), "driver vs reference", ignored=case.ignored)


def test_corpus_specs_pass(nn_driver):
    """Every spec file under ``--nn-corpus`` (failures saved by ``--nn-save-failures``,
    or your own) passes: the fixed bugs stay fixed."""
    from randomgraph.spec.runner import FAIL, run_specs

    session = active()
    summary = run_specs(session.corpus, nn_driver.device)
    failures = [f"{r.display_name}: {r.reason}" for r in summary.results if r.outcome == FAIL]
    assert not failures, f"{len(failures)} corpus specs fail:\n" + "\n".join(failures[:20])
