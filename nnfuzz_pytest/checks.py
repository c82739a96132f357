"""Assertions the properties share: statuses, output comparisons, criteria choice."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from driver.hal.types import (
    NO_TIMING,
    UINT64_MAX,
    Capabilities,
    DeviceType,
    ErrorStatus,
    Extension,
    HalVersion,
    MeasureTiming,
    Model,
    OperandType,
    PerformanceInfo,
    Timing,
)
from driver.hal.types import OperationType as O
from nnfuzz_pytest.harness import (
    DriverUnderTest,
    Execution,
    Prepared,
    fenced_output_dims,
    has_unspecified_outputs,
    output_sizes_for,
)
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


def _timings(execution: Execution) -> list[tuple[str, Timing]]:
    if execution.timing_launched is not None:
        return [("timingLaunched", execution.timing_launched), ("timingFenced", execution.timing)]
    return [("timing", execution.timing)]


def _available(microseconds: int) -> bool:
    return microseconds != UINT64_MAX


def assert_timing_follows_rules(execution: Execution, what: str) -> None:
    """The Timing rules (seed 000, "Timing"): "not available" (UINT64_MAX) unless the
    execution succeeded with measurement requested; then either figure may still be
    UINT64_MAX, but when both are given time in driver >= time on device. A fenced
    execution's timingLaunched covers its timingFenced (launch to signal vs fences
    signalled to signal), so neither figure of timingFenced exceeds timingLaunched's."""
    timings = _timings(execution)
    for name, t in timings:
        for field in ("time_on_device", "time_in_driver"):
            value = getattr(t, field)
            assert isinstance(value, int) and 0 <= value <= UINT64_MAX, (
                f"{what}: {name}.{field} {value!r} is not a uint64 of microseconds"
            )
    if not execution.ok or execution.measure != MeasureTiming.YES:
        why = "on failure" if not execution.ok else "without measurement requested"
        for name, t in timings:
            assert t == NO_TIMING, f"{what}: {name} {t} reported {why} (must be UINT64_MAX)"
        return
    for name, t in timings:
        if _available(t.time_on_device) and _available(t.time_in_driver):
            assert t.time_in_driver >= t.time_on_device, (
                f"{what}: {name} has time in driver {t.time_in_driver} us < time on "
                f"device {t.time_on_device} us"
            )
    if execution.timing_launched is not None:
        launched, fenced = execution.timing_launched, execution.timing
        for field in ("time_on_device", "time_in_driver"):
            a, b = getattr(launched, field), getattr(fenced, field)
            if _available(a) and _available(b):
                assert a >= b, (
                    f"{what}: timingFenced.{field} {b} us exceeds timingLaunched.{field} "
                    f"{a} us (the fenced interval is part of the launched one)"
                )


def assert_shapes_reported(execution: Execution, what: str) -> None:
    """A HAL 1.2+ execution that succeeded (other than executeFenced, which has no
    shapes) reports one sufficient shape per output, equal to the dims the model and
    request fully specify (VTS checks them on every execution, not only dynamic ones)."""
    declared = execution.declared_dims
    if declared is None:
        return
    shapes = execution.shapes
    assert len(shapes) == len(declared), (
        f"{what}: {len(shapes)} output shapes reported for {len(declared)} outputs"
    )
    for k, (shape, dims) in enumerate(zip(shapes, declared)):
        assert shape.is_sufficient, f"{what}: output {k} reported insufficient on success"
        if dims is not None:
            assert tuple(shape.dimensions) == dims, (
                f"{what}: output {k} reported with dims {list(shape.dimensions)}, the "
                f"model and request specify {list(dims)}"
            )


def assert_ok(execution: Execution, what: str) -> list[np.ndarray]:
    """Success, with what success must report: the output shapes, timing by the rules,
    and the fence of a fenced execution signalled without error."""
    outcome = execution.describe(with_path=not what.startswith(execution.path))
    assert execution.ok, f"{what}: {outcome} for a valid request"
    assert execution.outputs is not None
    assert_timing_follows_rules(execution, what)
    assert_shapes_reported(execution, what)
    assert execution.fence_status in (None, ErrorStatus.NONE), (
        f"{what}: the execution succeeded but its fence signalled "
        f"{status_name(execution.fence_status)}"
    )
    return execution.outputs


def assert_failed_cleanly(execution: Execution, status: ErrorStatus, what: str) -> None:
    """``status``, and nothing else reported: no output shapes, no timing; the launch
    status of an asynchronous path agrees when it is not NONE; the fence of a fenced
    execution signals an error."""
    assert execution.status == status, (
        f"{what}: {execution.describe(with_path=not what.startswith(execution.path))}, "
        f"expected {status_name(status)}"
    )
    if execution.launch_status is not None:
        assert execution.launch_status in (ErrorStatus.NONE, status), (
            f"{what}: launch returned {status_name(execution.launch_status)}, completion "
            f"{status_name(execution.status)}"
        )
    assert not execution.shapes, f"{what}: output shapes {execution.shapes} reported on failure"
    for name, t in _timings(execution):
        assert t == NO_TIMING, f"{what}: {name} {t} reported on failure"
    assert execution.fence_status != ErrorStatus.NONE, (
        f"{what}: the execution failed with {status_name(execution.status)} but its fence "
        "signalled success"
    )


def execute_valid(
    driver: DriverUnderTest, prepared: Prepared, case, path: str, what: str = "", **kw
) -> list[np.ndarray] | None:
    """Execute ``case`` (a valid request) on ``path`` and check the answer; its outputs.

    executeFenced needs fully specified outputs: when the model leaves some unspecified,
    the plain request must be refused with INVALID_ARGUMENT at launch, and the request
    is then given the dims of the expected outputs. When an expected output is
    zero-sized no request can specify it (0 means "unknown"): None, after the refusal."""
    what = what or path
    if path == "fenced" and has_unspecified_outputs(prepared.model):
        refused = driver.run(prepared, case.inputs, path, **kw)
        unspecified = f"{what}, output dims left unspecified"
        assert_failed_cleanly(refused, ErrorStatus.INVALID_ARGUMENT, unspecified)
        assert refused.launch_status == ErrorStatus.INVALID_ARGUMENT, (
            f"{unspecified}: executeFenced must refuse at launch, not with {refused.describe()}"
        )
        expected = case.expected()
        dims = fenced_output_dims(prepared.model, expected)
        if dims is None:
            return None
        kw = {**kw, "output_dims": dims, "output_sizes": output_sizes_for(prepared.model, expected)}
        return assert_ok(driver.run(prepared, case.inputs, path, **kw), f"{what}, dims given")
    return assert_ok(driver.run(prepared, case.inputs, path, **kw), what)


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


# ---------------------------------------------------------------------------------------
# Device queries
# ---------------------------------------------------------------------------------------

FLT_MAX = float(np.finfo(np.float32).max)
MAX_NUMBER_OF_CACHE_FILES = 32  # HAL Constant::MAX_NUMBER_OF_CACHE_FILES
EXTENSION_NAME = re.compile(r"[a-z0-9_.]+")  # VTS: lowercase, digits, '_' and '.'


def query_answers(driver: DriverUnderTest) -> dict[str, Any]:
    """The answer of each device query the driver's HAL version has (getCapabilities;
    from 1.2 getVersionString, getType, getSupportedExtensions,
    getNumberOfCacheFilesNeeded), each asserted to have status NONE."""
    dev = driver.device
    queries = {"getCapabilities": dev.get_capabilities}
    if driver.version >= HalVersion.V1_2:
        queries.update(
            getVersionString=dev.get_version_string,
            getType=dev.get_type,
            getSupportedExtensions=dev.get_supported_extensions,
            getNumberOfCacheFilesNeeded=dev.get_number_of_cache_files_needed,
        )
    answers = {}
    for name, query in queries.items():
        status, *values = driver.call(name, query)
        assert status == ErrorStatus.NONE, f"{name} returned {status_name(status)}"
        answers[name] = values[0] if len(values) == 1 else tuple(values)
    return answers


def _performance_problems(where: str, info: Any) -> list[str]:
    if not isinstance(info, PerformanceInfo):
        return [f"{where} is {info!r}, not a PerformanceInfo"]
    problems = []
    for field in ("exec_time", "power_usage"):
        value = getattr(info, field)
        ok = isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= FLT_MAX
        if not ok:
            problems.append(f"{where}.{field} is {value!r}: must be a positive finite float")
    return problems


def capabilities_problems(caps: Any) -> list[str]:
    """VTS getCapabilities rules: every performance figure positive (and a finite float);
    operandPerformance sorted by type without duplicates, naming only operand types and
    not SUBGRAPH (performance does not apply to it)."""
    if not isinstance(caps, Capabilities):
        return [f"getCapabilities gave {caps!r}, not Capabilities"]
    problems = []
    for field in (
        "relaxed_float32_to_float16_performance_scalar",
        "relaxed_float32_to_float16_performance_tensor",
        "if_performance",
        "while_performance",
    ):
        problems += _performance_problems(field, getattr(caps, field))
    types = []
    for k, entry in enumerate(caps.operand_performance):
        types.append(entry.type)
        problems += _performance_problems(f"operand_performance[{k}] ({entry.type})", entry.info)
        if not isinstance(entry.type, int) or entry.type not in OperandType._value2member_map_:
            problems.append(
                f"operand_performance[{k}] names type {entry.type}: not an operand type"
            )
        elif entry.type == OperandType.SUBGRAPH:
            problems.append(
                f"operand_performance[{k}] names SUBGRAPH: HAL 1.3 says a driver must not "
                "report performance for it"
            )
    for k in range(1, len(types)):
        if not types[k - 1] < types[k]:
            problems.append(
                f"operand_performance is not sorted by type without duplicates: type "
                f"{types[k]} at {k} after {types[k - 1]}"
            )
            break
    return problems


def extensions_problems(extensions: Any) -> list[str]:
    """VTS getSupportedExtensions rules: each name non-empty, of lowercase letters, digits,
    '_' and '.', starting with the vendor's reverse domain (so it has a '.'); names
    unique; each operand type's code fits the low 16 bits, is unique in its extension,
    and has a byte size > 0."""
    problems = []
    names = []
    for k, ext in enumerate(extensions or []):
        if not isinstance(ext, Extension):
            problems.append(f"extension {k} is {ext!r}, not an Extension")
            continue
        names.append(ext.name)
        if not isinstance(ext.name, str) or not EXTENSION_NAME.fullmatch(ext.name):
            problems.append(f"extension name {ext.name!r} has characters outside [a-z0-9_.]")
        elif "." not in ext.name:
            problems.append(f"extension name {ext.name!r} does not start with a reverse domain")
        codes = []
        for info in ext.operand_types:
            codes.append(info.type)
            if not (isinstance(info.type, int) and 0 <= info.type <= 0xFFFF):
                problems.append(f"{ext.name}: operand type {info.type!r} is not in [0, 65535]")
            if not (isinstance(info.byte_size, int) and info.byte_size > 0):
                problems.append(
                    f"{ext.name}: operand type {info.type} has byte size {info.byte_size}"
                )
        if len(set(codes)) != len(codes):
            problems.append(f"{ext.name}: operand types listed twice: {codes}")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"extensions listed twice: {duplicates}")
    return problems


def query_problems(answers: dict[str, Any]) -> list[str]:
    """What is wrong with the answers of :func:`query_answers`."""
    problems = capabilities_problems(answers["getCapabilities"])
    if "getVersionString" in answers:
        text = answers["getVersionString"]
        if not isinstance(text, str) or not text:
            problems.append(f"getVersionString gave {text!r}: must be a non-empty string")
        device_type = answers["getType"]
        if not isinstance(device_type, int) or device_type not in DeviceType._value2member_map_:
            problems.append(f"getType gave {device_type!r}: not a DeviceType")
        problems += extensions_problems(answers["getSupportedExtensions"])
        for kind, n in zip(("model", "data"), answers["getNumberOfCacheFilesNeeded"]):
            if not (isinstance(n, int) and 0 <= n <= MAX_NUMBER_OF_CACHE_FILES):
                problems.append(
                    f"getNumberOfCacheFilesNeeded: {n!r} {kind} cache files "
                    f"(must be 0..{MAX_NUMBER_OF_CACHE_FILES})"
                )
    return problems
