"""Differential: the driver's outputs agree with the reference's under Android's
random-graph accuracy criteria, and the regression corpus (``--nn-corpus``) passes.

The property runs once per generated operation and data type, each with its own share of
the budget, and once over the random-graph generator's multi-operation graphs. Drawn from
one mixed strategy, a few signatures took most examples and the others (quantized ADD
among them) too few to meet a truncating requantization, an ignored activation or a
wrong broadcast.
"""

from __future__ import annotations

import pytest
from hypothesis import assume
from hypothesis import strategies as st

from driver.hal.types import HalVersion, OperandType, OperationType
from nnfuzz_pytest.checks import assert_close, execute_valid, prepare_supported
from nnfuzz_pytest.session import active, current, execution_options, models, nn_property
from nnfuzz_pytest.strategies import OPERATIONS, operation_types

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_differential]

GRAPHS = "graphs"
"""The target of the random-graph generator's graphs (every operation, control flow)."""
SIGNATURE_WEIGHT = 0.15  # examples per (operation, type), as a share of the budget
GRAPHS_WEIGHT = 1.0
TYPE_LABELS = {
    OperandType.TENSOR_FLOAT32: "float32",
    OperandType.TENSOR_FLOAT16: "float16",
    OperandType.TENSOR_QUANT8_ASYMM: "quant8",
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED: "quant8_signed",
}
LABEL_TYPES = {label: t for t, label in TYPE_LABELS.items()}


def differential_targets() -> list[str]:
    """``OPERATION-type`` for each operation (those in ``--nn-ops`` when given) and data
    type the families generate at the driver's HAL version, then the graphs."""
    session = current()
    version = session.version if session is not None else HalVersion.V1_3
    wanted = session.operations if session is not None else None
    targets = [
        f"{OperationType(op).name}-{TYPE_LABELS[t]}"
        for op in sorted(OPERATIONS)
        if wanted is None or op in wanted
        for t in operation_types(op, version)
    ]
    return [*targets, GRAPHS]


def _signature(target: str) -> tuple[OperationType, OperandType]:
    op, _, label = target.partition("-")
    return OperationType[op], LABEL_TYPES[label]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function.__name__ == "test_outputs_match_reference":
        metafunc.parametrize("target", differential_targets())


def _property(target: str):
    """The Hypothesis property for ``target``, made when it runs (its settings come from
    the run's budget); named as the test, so failures print under its name."""
    if target == GRAPHS:
        weight, cases = GRAPHS_WEIGHT, st.deferred(lambda: active().graph_models())
    else:
        op, type_code = _signature(target)
        weight = SIGNATURE_WEIGHT
        cases = models(operations={op}, types={type_code}, graphs=False)

    @nn_property(weight, case=cases, data=st.data())
    def test_outputs_match_reference(nn_driver, case, data):
        prepared = prepare_supported(nn_driver, case.model)
        assume(prepared is not None)
        path = "sync" if "sync" in nn_driver.paths else nn_driver.paths[0]
        options = data.draw(execution_options(nn_driver), label="options")
        outputs = execute_valid(nn_driver, prepared, case, path, **options)
        assert_close(
            case.model, outputs, case.expected(), "driver vs reference", ignored=case.ignored
        )

    return test_outputs_match_reference


def test_outputs_match_reference(nn_driver, target):
    """Prepare and execute (synchronously where the HAL has it, from pools of every kind
    the HAL version must map): every output within the criteria of the reference's
    (strict for exact arithmetic, conv for accumulations, medium for transcendental
    functions, relaxed for relaxed/float16 models). Once per operation and data type
    the driver supports (``ADD-quant8``), and once over the generator's graphs."""
    session = active()
    if target != GRAPHS and not session.supports(*_signature(target)):
        pytest.skip(
            f"the driver does not support {target} (or HAL {session.version.label} has none)"
        )
    _property(target)(nn_driver=nn_driver)


def test_corpus_specs_pass(nn_driver):
    """Every spec file under ``--nn-corpus`` (failures saved by ``--nn-save-failures``,
    or your own) passes: the fixed bugs stay fixed."""
    from randomgraph.spec.runner import FAIL, run_specs

    session = active()
    summary = run_specs(session.corpus, nn_driver.device)
    failures = [f"{r.display_name}: {r.reason}" for r in summary.results if r.outcome == FAIL]
    assert not failures, f"{len(failures)} corpus specs fail:\n" + "\n".join(failures[:20])
