"""Assertions the properties share: statuses, output comparisons, criteria choice."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from driver.hal.types import NO_TIMING, ErrorStatus, Model, OperandType
from driver.hal.types import OperationType as O
from nnfuzz_pytest.harness import DriverUnderTest, Execution, Prepared
from randomgraph.criteria import CRITERIA_SETS, CriteriaSet, check_random_graph_output

T = OperandType

# Android's random-graph criteria by operation (randomgraph.differential, after
# TestRandomGraph.cpp), with one deliberate change: operations whose quantized results
# are exact integer arithmetic or data movement (ADD, SUB, MUL, the RELUs, MAX_POOL_2D,
# CONCATENATION, ...) are held to "strict" where Android says "medium". The reference is
# bit-exact with Android's CPU path, and strict's bias bound (0.1 quantization steps over
# >= 10 elements) is what catches a systematically truncating requantization; medium's
# 1.2 lets it through.
_EXACT = {
    O.ADD,
    O.SUB,
    O.MUL,
    O.RELU,
    O.RELU1,
    O.RELU6,
    O.MAX_POOL_2D,
    O.CONCATENATION,
    O.MAXIMUM,
    O.MINIMUM,
    O.RESHAPE,
}
_FALLBACK = {
    O.CONV_2D: "conv",
    O.DEPTHWISE_CONV_2D: "conv",
    O.FULLY_CONNECTED: "relaxed",
    O.AVERAGE_POOL_2D: "relaxed",
    O.LOGISTIC: "relaxed",
    O.TANH: "relaxed",
    O.SOFTMAX: "relaxed",
    O.DIV: "relaxed",
}


def _operation_criteria() -> dict[int, str]:
    try:
        from randomgraph.differential import OPERATION_CRITERIA
    except ImportError:  # pragma: no cover - an older tree
        return dict(_FALLBACK)
    return dict(OPERATION_CRITERIA)


OPERATION_CRITERIA = _operation_criteria()


def status_name(status) -> str:
    try:
        return ErrorStatus(status).name
    except (ValueError, TypeError):
        return repr(status)


def criteria_for(model: Model) -> CriteriaSet:
    """The criteria set for comparing ``model``'s outputs with the reference's."""
    ops = [op.type for op in model.main.operations]
    if len(ops) == 1:
        if ops[0] in _EXACT:
            return CRITERIA_SETS["strict"]
        return CRITERIA_SETS[OPERATION_CRITERIA.get(ops[0], "relaxed")]
    return CRITERIA_SETS["small_graph" if len(ops) <= 10 else "large_graph"]


def assert_close(
    model: Model,
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    what: str,
    criteria: CriteriaSet | None = None,
    ignored: frozenset[int] = frozenset(),
) -> None:
    """Outputs agree under ``criteria`` (default: :func:`criteria_for`); in a relaxed
    model float32 outputs are held to the set's float16 criterion."""
    criteria = criteria or criteria_for(model)
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    main = model.main
    problems = []
    for k, (a, e) in enumerate(zip(actual, expected)):
        if k in ignored:
            continue  # a value the generator marks as not comparable
        type_code = main.operands[main.output_indexes[k]].type
        if tuple(np.shape(a)) != tuple(np.shape(e)):
            problems.append(f"output {k}: shape {list(np.shape(a))}, expected {list(np.shape(e))}")
            continue
        m = check_random_graph_output(
            k, type_code, np.asarray(a), np.asarray(e), criteria, relaxed=model.relaxed
        )
        if m is not None:
            problems.append(str(m))
    assert not problems, f"{what} ({criteria.name} criteria): " + "; ".join(problems)


def assert_same_bits(
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    what: str,
    ignored: frozenset[int] = frozenset(),
) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        if k in ignored:
            continue
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{what}: output {k} shape {list(a.shape)} vs {list(e.shape)}"
        if a.tobytes() != e.tobytes():
            bad = np.flatnonzero(a.reshape(-1).view(np.uint8) != e.reshape(-1).view(np.uint8))
            first = int(bad[0]) // max(1, a.itemsize)
            raise AssertionError(
                f"{what}: output {k} differs in its bits, first at element {first}: "
                f"{a.reshape(-1)[first]!r} vs {e.reshape(-1)[first]!r}"
            )


def assert_ok(execution: Execution, what: str) -> list[np.ndarray]:
    assert execution.ok, f"{what}: {execution.describe()} for a valid request"
    assert execution.outputs is not None
    return execution.outputs


def assert_failed_cleanly(execution: Execution, status: ErrorStatus, what: str) -> None:
    """``status``, and nothing else reported: no output shapes, no timing; the launch
    status of an asynchronous path agrees when it is not NONE."""
    assert execution.status == status, (
        f"{what}: {execution.describe()}, expected {status_name(status)}"
    )
    if execution.launch_status is not None:
        assert execution.launch_status in (ErrorStatus.NONE, status), (
            f"{what}: launch returned {status_name(execution.launch_status)}, completion "
            f"{status_name(execution.status)}"
        )
    assert not execution.shapes, f"{what}: output shapes {execution.shapes} reported on failure"
    assert execution.timing == NO_TIMING, f"{what}: timing {execution.timing} reported on failure"


def prepare_supported(driver: DriverUnderTest, model: Model, **kw) -> Prepared | None:
    """Prepare a valid model; None (the caller rejects the example) when the driver says
    it does not support every operation. A valid model must be accepted."""
    status, supported = driver.supported(model)
    assert status == ErrorStatus.NONE, (
        f"getSupportedOperations rejected a valid model: {status_name(status)}"
    )
    assert len(supported) == len(model.main.operations), (
        f"getSupportedOperations gave {len(supported)} flags for "
        f"{len(model.main.operations)} operations"
    )
    if not all(supported):
        return None
    return driver.must_prepare(model, **kw)
