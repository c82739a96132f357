"""Run expanded test models on a driver and check them with the generated-test criteria.

A test passes when every (non-ignored) output meets the criteria; an ``ExpectFailure``
test passes when the driver rejects the model or the execution. A test is skipped only
when the driver reports (through supported operations) that it does not support the
model; everything else that goes wrong is a failure, with the reason.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from driver.builder import build_request
from driver.hal.types import (
    ErrorStatus,
    HalVersion,
    Model,
    OperationType,
    is_scalar_type,
    non_extension_size_of_data,
)
from driver.operations.base import array_from_bytes
from randomgraph.criteria import (
    CRITERIA_SETS,
    Mismatch,
    check_generated,
    check_multinomial,
    check_random_graph_output,
)
from randomgraph.differential import DriverHang, DriverSession
from randomgraph.spec.dsl import SpecError
from randomgraph.spec.loader import load_specs
from randomgraph.testmodel import TestModel

PASS, FAIL, SKIP = "passed", "failed", "skipped"
SPEC_ERROR = "spec error: "  # starts the reason of a test the spec got wrong


@dataclass
class TestResult:
    name: str
    outcome: str  # PASS / FAIL / SKIP
    reason: str = ""
    source: str = ""
    dynamic: bool = False
    mismatches: list[Mismatch] = field(default_factory=list)
    seconds: float = 0.0
    actual: list[np.ndarray] | None = None  # outputs read back (for replay)

    @property
    def display_name(self) -> str:
        return self.name + (" [dynamic output shape]" if self.dynamic else "")

    def to_json(self) -> dict:
        return {
            "test": self.name,
            "dynamicOutputShape": self.dynamic,
            "outcome": self.outcome,
            "reason": self.reason,
            "source": self.source,
            "mismatches": [str(m) for m in self.mismatches],
            "seconds": round(self.seconds, 6),
        }


def _status_name(status) -> str:
    try:
        return ErrorStatus(status).name
    except ValueError:
        return f"status {status}"


def _with_unknown_output_dims(model: Model) -> Model:
    main = model.main
    ops = list(main.operands)
    for i in main.output_indexes:
        o = ops[i]
        if not is_scalar_type(o.type):
            ops[i] = dataclasses.replace(o, dimensions=(0,) * len(o.dimensions))
    return dataclasses.replace(model, main=dataclasses.replace(main, operands=tuple(ops)))


def _valid_at(model: Model, version: HalVersion) -> bool:
    from driver.hal.types import HalError
    from driver.validation import validate_model

    try:
        validate_model(model, version)
    except HalError:
        return False
    return True


def _driver_message(device) -> str:
    msg = getattr(device, "last_error", "")
    return f" ({msg})" if msg else ""


def spec_problem(test: TestModel) -> str | None:
    """Why ``test`` cannot be run on any driver, in a line, or None for a runnable test:
    its model cannot be built, or the reference's validation rejects it although the
    spec does not expect a failure (an Operation without outputs, a wrong operand count,
    two writers of one operand...). Such a test is the spec's fault, not the driver's."""
    built = _built(test)
    return built if isinstance(built, str) else None


def _built(test: TestModel) -> tuple[Model, list, list[np.ndarray]] | str:
    """:meth:`TestModel.to_hal` of a valid test, else the spec error (a line)."""
    try:
        built = test.to_hal()
    except Exception as e:
        return f"{SPEC_ERROR}cannot build the test model: {type(e).__name__}: {e}"
    if test.expect_failure:
        return built
    from driver.hal.types import HalError
    from driver.validation import validate_model

    try:
        validate_model(built[0], HalVersion.V1_3)
    except HalError as e:
        return f"{SPEC_ERROR}the model is invalid: {e.message or e}"
    except RecursionError:
        return f"{SPEC_ERROR}the model is invalid: subgraphs nested too deeply to validate"
    return built


def run_test_model(device, test: TestModel, *, dynamic: bool = False) -> TestResult:
    """Prepare and execute one test model on ``device``; never raises for driver errors
    (a Python exception from the driver is reported as a failure, "crash"). A test the
    spec got wrong (:func:`spec_problem`) fails as a "spec error" without reaching the
    driver. ``device`` may be a :class:`DriverSession`: the test then runs under its
    watchdog, a driver that does not return in time is a failure ("hang"), and the
    session starts a fresh device for the next test."""
    start = time.perf_counter()
    result = TestResult(test.name, FAIL, source=test.source, dynamic=dynamic)
    built = _built(test)
    if isinstance(built, str):
        result.reason = built
        result.seconds = time.perf_counter() - start
        return result
    session = DriverSession.around(device)
    try:
        session.run(lambda call: _run(session.device, test, built, dynamic, result))
    except DriverHang as e:
        # A fresh result: the abandoned run may still write into the other one.
        result = TestResult(test.name, FAIL, f"hang: {e}", source=test.source, dynamic=dynamic)
    except Exception as e:  # a driver that raises is a driver bug: report, carry on
        result.outcome = FAIL
        result.reason = f"crash: {type(e).__name__}: {e}"
    result.seconds = time.perf_counter() - start
    return result


def _run(device, test: TestModel, built, dynamic: bool, result: TestResult) -> None:
    device_version = getattr(device, "version", HalVersion.V1_3)
    needed = test.min_supported_version
    if needed is not None and device_version < needed:
        result.outcome = SKIP
        result.reason = (
            f"test needs HAL {needed.label}; the driver is HAL {HalVersion(device_version).label}"
        )
        return None
    model, inputs, expected = built
    if needed is None and device_version < HalVersion.V1_3 and not _valid_at(model, device_version):
        # UNKNOWN minimum version (relaxed tests): run only where the model is expressible.
        result.outcome = SKIP
        result.reason = f"the model needs a newer HAL than {HalVersion(device_version).label}"
        return None
    if dynamic:
        model = _with_unknown_output_dims(model)

    def rejected(stage: str, status) -> None:
        if test.expect_failure:
            result.outcome, result.reason = (
                PASS,
                f"rejected at {stage} as expected ({_status_name(status)})",
            )
        else:
            result.outcome = FAIL
            result.reason = f"{stage} returned {_status_name(status)}{_driver_message(device)}"

    status, supported = device.get_supported_operations(model)
    if status != ErrorStatus.NONE:
        return rejected("getSupportedOperations", status)
    if not all(supported):
        names = sorted(
            {
                OperationType(model.main.operations[i].type).name
                for i, s in enumerate(supported)
                if not s
            }
        )
        result.outcome, result.reason = SKIP, f"driver does not support {', '.join(names)}"
        return None
    status, prepared = device.prepare_model(model)
    if status != ErrorStatus.NONE:
        return rejected("prepareModel", status)
    main = model.main
    out_operands = [main.operands[i] for i in main.output_indexes]
    sizes = [max(1, e.nbytes if e.dtype != np.bool_ else e.size) for e in expected]
    bundle = build_request(model, inputs, output_sizes=sizes)
    status, shapes, _timing = prepared.execute_synchronously(bundle.request)
    if status != ErrorStatus.NONE:
        return rejected("execute", status)
    if test.expect_failure:
        result.outcome, result.reason = (
            FAIL,
            "expected a failure, but the model was prepared and executed",
        )
        return None
    fp16_model = test.is_relaxed or test.has_float16()
    mobilenet_q = "mobilenet_quantized" in test.name
    multinomial = test.multinomial_tolerance > 0
    actual_all = []
    # From 1.2 a driver reports every output's shape; before, only the data comes back.
    must_report = device_version >= HalVersion.V1_2
    if must_report and len(shapes) != len(out_operands):
        result.outcome = FAIL
        result.reason = (
            f"the driver reports {len(shapes)} output shapes for {len(out_operands)} outputs"
        )
        return None
    for k, (operand, want) in enumerate(zip(out_operands, expected)):
        dims = (
            tuple(shapes[k].dimensions)
            if must_report or (k < len(shapes) and shapes[k].dimensions)
            else tuple(want.shape)
        )
        if (must_report or dynamic) and tuple(dims) != tuple(want.shape):
            result.mismatches.append(
                Mismatch(
                    k,
                    -1,
                    want.size,
                    [],
                    f"reported shape {list(dims)}, expected {list(want.shape)}",
                )
            )
            continue
        size = non_extension_size_of_data(operand.type, dims) if dims else want.nbytes
        data = bundle.output_bytes(k)[:size]
        got = array_from_bytes(operand.type, dims if not is_scalar_type(operand.type) else (), data)
        actual_all.append(got)
        if test.main.operands[main.output_indexes[k]].is_ignored:
            continue
        if multinomial:
            m = check_multinomial(k, got, want, test.multinomial_tolerance)
        elif test.criteria:  # a differential spec: the random-graph set it names
            m = check_random_graph_output(
                k, operand.type, got, want, CRITERIA_SETS[test.criteria], relaxed=test.is_relaxed
            )
        else:
            m = check_generated(
                k, operand.type, got, want, fp16_model=fp16_model, mobilenet_quantized=mobilenet_q
            )
        if m is not None:
            result.mismatches.append(m)
    result.actual = actual_all
    if result.mismatches:
        result.outcome = FAIL
        result.reason = "; ".join(str(m) for m in result.mismatches[:3])
    else:
        result.outcome = PASS
    return None


def wants_dynamic_variant(test: TestModel, device) -> bool:
    """The test's unspecified-output-dims variant, on a HAL 1.2+ driver."""
    version = getattr(device, "version", HalVersion.V1_3)
    return version >= HalVersion.V1_2 and test.has_dynamic_output_variant()


def runs_of_test(session, test: TestModel, *, dynamic: bool = True) -> Iterator[TestResult]:
    """Run ``test``, then (with ``dynamic``) its unspecified-output-dims variant where
    the driver takes one (:func:`wants_dynamic_variant`), yielding each result as it
    comes; a test the spec got wrong gets no variant (it would fail the same way). What
    ``specs run`` and ``replay`` both run for one test."""
    result = run_test_model(session, test)
    yield result
    spec_error = result.reason.startswith(SPEC_ERROR)
    if dynamic and not spec_error and wants_dynamic_variant(test, session):
        yield run_test_model(session, test, dynamic=True)


@dataclass
class RunSummary:
    results: list[TestResult] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def line(self) -> str:
        return f"{self.count(PASS)} passed, {self.count(FAIL)} failed, {self.count(SKIP)} skipped"


def matches(name: str, pattern: str | None) -> bool:
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatch(name, pattern)
    return pattern in name


def run_specs(
    paths: Iterable[str | Path],
    device,
    *,
    pattern: str | None = None,
    dynamic: bool = True,
    on_result: Callable[[TestResult], None] | None = None,
    into: RunSummary | None = None,
) -> RunSummary:
    """Load, expand and run every spec under ``paths``. A spec that cannot be loaded
    counts as one failed test named after the file. Results go to ``into`` (a new
    summary by default) as they come, so an interrupted run keeps what it finished."""
    summary = into if into is not None else RunSummary()
    session = DriverSession.around(device)

    def record(r: TestResult) -> None:
        summary.results.append(r)
        if on_result is not None:
            on_result(r)

    for path, loaded in load_specs(paths):
        if isinstance(loaded, SpecError):
            record(
                TestResult(path.name, FAIL, reason=f"cannot load spec: {loaded}", source=str(path))
            )
            continue
        for test in loaded:
            if not matches(test.name, pattern):
                continue
            for result in runs_of_test(session, test, dynamic=dynamic):
                record(result)
    return summary
