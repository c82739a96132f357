"""The differential check: one test model on a driver under test and on the reference.

    checker = DifferentialChecker("planted-rounding")
    result = checker.check(test)          # a DiffResult; result.outcome is an Outcome

**Golden results** come from the reference executor. ``golden="auto"`` (the default) does
what Android's random-graph test does for quantized models: a *single-operation* graph
with quantized operands whose float32 form is valid (the operation has a float32
signature) and is not a type-casting operation (QUANTIZE, DEQUANTIZE, CAST,
HASHTABLE_LOOKUP) runs as an equivalent float32 model, and the results are requantized
(``std::round``, saturated) to the output types; every other graph runs as it is.
Android restricts the conversion to single operations, and so do we: in a
multi-operation quantized graph every intermediate is requantized by the driver and the
reference alike, and the float model skips that rounding, so its results drift from what
any correct driver computes by more than the criteria allow. Android also widens float16
models to float32; we do not by default, because we really compare float16 outputs
(Android's checker skips them) and operations Android computes in half precision (e.g.
ROI_ALIGN) then show a bias against a float32 golden that no float16 driver avoids.
``golden="float32"`` also widens float16 graphs (Android's choice); a multi-operation
quantized graph still runs as it is there (converted, it reported saturated and rounded
intermediates of the reference itself as wrong results). ``golden="exact"`` never
converts (the reference's own arithmetic is the oracle, bit-exact with Android's CPU
path).

**The driver** is run through its whole HAL path: the minimum HAL version of the model
against the driver's version, ``getSupportedOperations`` (a graph it does not fully
support is *skipped*), ``prepareModel``, a request in shared memory, the chosen execution
path (sync, async, fenced, burst), the outputs read back with the shapes it reports. Every
driver call runs under a watchdog (:class:`DriverSession`): an in-process call runs on a
daemon worker thread that is abandoned after the timeout (*hang*); a Python exception
escaping the driver is a *crash*. After either, the device is recreated from its factory,
so one wedged driver does not poison the tests after it.

**Comparison** uses the random-graph criteria sets (nnapi-facts.md): for a single
operation the set Android's TestRandomGraph picks for it (:data:`OPERATION_CRITERIA`),
``small_graph`` for graphs of up to 10 operations and ``large_graph`` beyond; a test can
name its set (``TestModel.criteria``). float16 outputs are really compared.

Outcomes (:class:`Outcome`): pass, wrong result, rejected a valid model (an error from
getSupportedOperations, INVALID_ARGUMENT from prepareModel), failed to prepare, failed to
execute, crash, hang, inconsistent (a metamorphic relation broke, see
:mod:`randomgraph.metamorphic`), skipped, and reference error (the reference itself could
not run the model: a bug in the generator or the reference, never the driver's fault).
"""

from __future__ import annotations

import dataclasses
import enum
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from driver.builder import build_request
from driver.hal.device import EXECUTION_PATH_SINCE
from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    MeasureTiming,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    is_scalar_type,
    non_extension_size_of_data,
    tensor_has_unspecified_dimensions,
)
from driver.operations.base import array_from_bytes
from driver.validation import validate_model
from randomgraph.criteria import (
    CRITERIA_SETS,
    SAMPLING_OPERATIONS,
    Mismatch,
    check_generated,
    check_multinomial,
    check_random_graph_output,
    sampling_tolerance,
)
from randomgraph.testmodel import TestModel, TestOperand, TestOperation, TestSubgraph

L = OperandLifeTime
Op = OperationType
T = OperandType


class Outcome(enum.StrEnum):
    """How one differential test ended. Everything but PASS and SKIPPED is a failure."""

    PASS = "pass"
    WRONG = "wrong-result"
    REJECTED = "rejected"
    PREPARE_FAILED = "prepare-failed"
    EXECUTE_FAILED = "execute-failed"
    CRASH = "crash"
    HANG = "hang"
    INCONSISTENT = "inconsistent"
    SKIPPED = "skipped"
    REFERENCE_ERROR = "reference-error"

    @property
    def failed(self) -> bool:
        return self not in (Outcome.PASS, Outcome.SKIPPED)

    @property
    def label(self) -> str:
        return _LABELS[self]

    def __str__(self) -> str:
        return self.value


_LABELS = {
    Outcome.PASS: "pass",
    Outcome.WRONG: "wrong result",
    Outcome.REJECTED: "rejected a valid model",
    Outcome.PREPARE_FAILED: "failed to prepare",
    Outcome.EXECUTE_FAILED: "failed to execute",
    Outcome.CRASH: "crash",
    Outcome.HANG: "hang",
    Outcome.INCONSISTENT: "inconsistent (metamorphic)",
    Outcome.SKIPPED: "skipped",
    Outcome.REFERENCE_ERROR: "reference error",
}

# ---------------------------------------------------------------------------------------
# Criteria
# ---------------------------------------------------------------------------------------

_STRICT = (
    "DEPTH_TO_SPACE SPACE_TO_DEPTH EMBEDDING_LOOKUP HASHTABLE_LOOKUP RESHAPE BATCH_TO_SPACE_ND "
    "SPACE_TO_BATCH_ND PAD TRANSPOSE SQUEEZE STRIDED_SLICE ARGMAX ARGMIN EQUAL GREATER "
    "GREATER_EQUAL LESS LESS_EQUAL LOGICAL_AND LOGICAL_NOT LOGICAL_OR NOT_EQUAL CHANNEL_SHUFFLE "
    "PAD_V2 EXPAND_DIMS TILE GATHER SELECT TOPK_V2 SLICE FILL RANK LSH_PROJECTION"
)
_MEDIUM = (
    "ADD MUL FLOOR RELU RELU1 RELU6 CONCATENATION DEQUANTIZE SUB ABS NEG MAXIMUM MINIMUM PRELU "
    "QUANTIZE CAST SPLIT ELU HARD_SWISH"
)
_RELAXED = (
    "LOGISTIC TANH SOFTMAX L2_NORMALIZATION LOCAL_RESPONSE_NORMALIZATION AVERAGE_POOL_2D "
    "L2_POOL_2D MAX_POOL_2D RESIZE_BILINEAR FULLY_CONNECTED DIV MEAN EXP LOG RSQRT SIN SQRT POW "
    "REDUCE_ALL REDUCE_ANY REDUCE_MAX REDUCE_MIN REDUCE_PROD REDUCE_SUM INSTANCE_NORMALIZATION "
    "LOG_SOFTMAX RESIZE_NEAREST_NEIGHBOR ROI_ALIGN ROI_POOLING HEATMAP_MAX_KEYPOINT "
    "AXIS_ALIGNED_BBOX_TRANSFORM BOX_WITH_NMS_LIMIT GENERATE_PROPOSALS DETECTION_POSTPROCESSING "
    "RANDOM_MULTINOMIAL"
)
_CONV = (
    "CONV_2D DEPTHWISE_CONV_2D GROUPED_CONV_2D TRANSPOSE_CONV_2D LSTM RNN SVDF "
    "BIDIRECTIONAL_SEQUENCE_LSTM BIDIRECTIONAL_SEQUENCE_RNN UNIDIRECTIONAL_SEQUENCE_LSTM "
    "UNIDIRECTIONAL_SEQUENCE_RNN QUANTIZED_16BIT_LSTM QUANTIZED_LSTM"
)
OPERATION_CRITERIA: dict[OperationType, str] = {
    Op[name]: cname
    for cname, names in (
        ("strict", _STRICT),
        ("medium", _MEDIUM),
        ("relaxed", _RELAXED),
        ("conv", _CONV),
        ("small_graph", "IF WHILE"),
    )
    for name in names.split()
}
"""The criteria set of a single-operation test, as Android's TestRandomGraph assigns them
(strict: data movement, comparisons and selection; medium: one simple computation per
element; relaxed: transcendental functions, normalizations, pooling, reductions; conv:
convolutions). Operations Android's generator does not cover follow the same logic:
recurrent operations accumulate like convolutions, detection operations are relaxed,
control flow runs a graph (small_graph)."""

CRITERIA_NAMES = (*CRITERIA_SETS, "generated")
"""Every name a test may carry: the random-graph sets, and ``generated`` (the spec-file
criteria, for hand-written specs)."""

SMALL_GRAPH_LIMIT = 10


def criteria_for(test: TestModel) -> str:
    """The criteria set name for ``test``: its own if it names one, else by size."""
    if test.criteria:
        return test.criteria
    ops = test.main.operations
    if len(ops) == 1:
        return OPERATION_CRITERIA.get(ops[0].type, "relaxed")
    return "small_graph" if len(ops) <= SMALL_GRAPH_LIMIT else "large_graph"


def compare_output(
    test: TestModel, criteria: str, k: int, actual: np.ndarray, expected: np.ndarray
) -> Mismatch | None:
    """Check main output ``k`` of ``test`` (None when it passes or is ignored)."""
    operand = test.main.operands[test.main.output_indexes[k]]
    if operand.is_ignored:
        return None
    if tuple(np.shape(actual)) != tuple(np.shape(expected)):
        return Mismatch(
            k,
            -1,
            int(np.size(expected)),
            [],
            f"shape {list(np.shape(actual))} != {list(np.shape(expected))}",
        )
    if test.multinomial_tolerance > 0:
        return check_multinomial(k, actual, expected, test.multinomial_tolerance)
    sampler = _sampling_producer(test.main, test.main.output_indexes[k])
    if sampler is not None:
        logits = test.main.operands[sampler.inputs[0]].dimensions
        classes = logits[1] if len(logits) == 2 and logits[1] > 0 else None
        samples = int(np.shape(expected)[-1]) if np.ndim(expected) else 1
        return check_multinomial(k, actual, expected, sampling_tolerance(samples), classes)
    if criteria == "generated":
        return check_generated(
            k,
            operand.type,
            actual,
            expected,
            fp16_model=test.is_relaxed or test.has_float16(),
            mobilenet_quantized="mobilenet_quantized" in test.name,
        )
    return check_random_graph_output(
        k, operand.type, actual, expected, CRITERIA_SETS[criteria], relaxed=test.is_relaxed
    )


def _sampling_producer(graph: TestSubgraph, operand: int) -> TestOperation | None:
    """The operation of :data:`~randomgraph.criteria.SAMPLING_OPERATIONS` that writes
    ``operand`` in ``graph``, if one does."""
    for op in graph.operations:
        if operand in op.outputs:
            return op if op.type in SAMPLING_OPERATIONS else None
    return None


def compare_outputs(
    test: TestModel,
    criteria: str,
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
) -> list[Mismatch]:
    out = []
    for k, (a, e) in enumerate(zip(actual, expected)):
        m = compare_output(test, criteria, k, a, e)
        if m is not None:
            out.append(m)
    return out


# ---------------------------------------------------------------------------------------
# Test-model helpers
# ---------------------------------------------------------------------------------------


def copy_test(test: TestModel) -> TestModel:
    """A copy that can be edited freely (operand value lists are copied; the numbers in
    them and the frozen quantization parameters are immutable and shared)."""

    def sg_copy(sg: TestSubgraph) -> TestSubgraph:
        return TestSubgraph(
            [copy_operand(o) for o in sg.operands],
            [TestOperation(op.type, list(op.inputs), list(op.outputs)) for op in sg.operations],
            list(sg.input_indexes),
            list(sg.output_indexes),
            sg.name,
        )

    return dataclasses.replace(
        test, main=sg_copy(test.main), referenced=[sg_copy(s) for s in test.referenced]
    )


def copy_operand(o: TestOperand) -> TestOperand:
    return dataclasses.replace(o, dimensions=list(o.dimensions), data=list(o.data))


def with_outputs(test: TestModel, outputs: Sequence[np.ndarray]) -> TestModel:
    """A copy of ``test`` whose expected outputs are ``outputs`` (dims follow them)."""
    t = copy_test(test)
    for idx, arr in zip(t.main.output_indexes, outputs):
        o = t.main.operands[idx]
        arr = np.asarray(arr)
        o.data = arr.reshape(-1).tolist()
        if not is_scalar_type(o.type):
            o.dimensions = list(arr.shape)
    return t


def with_unknown_output_dims(test: TestModel) -> TestModel | None:
    """A copy of ``test`` whose tensor outputs have unspecified dims (Android's dynamic
    output shape variation of a spec test), or None when it has no such variation
    (:meth:`TestModel.has_dynamic_output_variant`) or no output dim is known."""
    outputs = [test.main.operands[i] for i in test.main.output_indexes]
    if not test.has_dynamic_output_variant() or all(d == 0 for o in outputs for d in o.dimensions):
        return None
    t = copy_test(test)
    for i in t.main.output_indexes:
        o = t.main.operands[i]
        o.dimensions = [0] * len(o.dimensions)
        o.data = []
    return t


def check_with_dynamic_variant(checker, test: TestModel) -> tuple[TestModel, DiffResult]:
    """``checker``'s result on ``test``, and if that passes, on its unspecified-output-dims
    variant (:func:`with_unknown_output_dims`): the test form that fails, and its result.

    A spec holds outputs with their real shapes, so a failure that needed unspecified
    output dims (the generator leaves some unspecified) shows again in this variant, as
    Android's generated tests run it."""
    result = checker.check(test)
    if result.failed:
        return test, result
    dynamic = with_unknown_output_dims(test)
    if dynamic is None:
        return test, result
    dynamic_result = checker.check(dynamic)
    return (dynamic, dynamic_result) if dynamic_result.failed else (test, result)


def expose_intermediates(test: TestModel) -> tuple[TestModel, list[int]]:
    """A copy of ``test`` whose main-subgraph temporaries are model outputs too (appended
    after the original outputs), and the operand index of every output in order. A model
    output may still feed later operations, so the graph computes the same values."""
    t = copy_test(test)
    extra = [i for i, o in enumerate(t.main.operands) if o.lifetime == L.TEMPORARY_VARIABLE]
    for i in extra:
        t.main.operands[i].lifetime = L.SUBGRAPH_OUTPUT
        t.main.operands[i].data = []
    t.main.output_indexes = [*t.main.output_indexes, *extra]
    return t, list(t.main.output_indexes)


def producers(test: TestModel) -> dict[int, int]:
    """Main-subgraph operand index -> index of the operation writing it."""
    return {i: k for k, op in enumerate(test.main.operations) for i in op.outputs}


def operation_names(test: TestModel) -> list[str]:
    return [Op(op.type).name for op in test.main.operations]


def primary_type(test: TestModel, op_index: int | None = None) -> str:
    """The data type a test is filed under: the type of input 0 of operation ``op_index``
    (default: the first operation)."""
    ops = test.main.operations
    if not ops:
        return "-"
    op = ops[op_index if op_index is not None and 0 <= op_index < len(ops) else 0]
    if not op.inputs:
        return T(test.main.operands[op.outputs[0]].type).name
    return T(test.main.operands[op.inputs[0]].type).name


# ---------------------------------------------------------------------------------------
# Golden results
# ---------------------------------------------------------------------------------------

GOLDEN_MODES = ("auto", "float32", "exact")
NO_FLOAT_GOLDEN = frozenset(
    {Op.DEQUANTIZE, Op.QUANTIZE, Op.CAST, Op.HASHTABLE_LOOKUP, Op.LSH_PROJECTION}
)
"""Never computed in float32: the type conversion is the operation itself; float
HASHTABLE_LOOKUP writes a logical zero on a key miss where the quantized one writes a
byte zero (both Android's exclusions); LSH_PROJECTION hashes the input's bytes, which
the conversion changes (Android's generator does not cover it)."""

_DEQUANTIZABLE = frozenset(
    {
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_QUANT8_SYMM,
        T.TENSOR_QUANT16_ASYMM,
        T.TENSOR_QUANT16_SYMM,
    }
)


class ReferenceError_(Exception):
    """The reference could not run a model (carries the HAL status and message)."""

    def __init__(self, status: ErrorStatus, message: str):
        super().__init__(message)
        self.status = status


def _float_operand(o: TestOperand, data: np.ndarray, scalar: bool = False) -> None:
    o.type = T.FLOAT32 if scalar else T.TENSOR_FLOAT32
    o.scale, o.zero_point = 0.0, 0
    o.data = data.astype(np.float32).reshape(-1).tolist()


def to_float32(test: TestModel) -> TestModel | None:
    """Android's ``convertToFloat32Model``: quantized operands (and TENSOR_INT32 with a
    scale, i.e. biases) dequantized to TENSOR_FLOAT32, float16 widened to float32. None
    when nothing would change or something cannot be converted (per-channel quantization,
    control flow, a type-casting operation, or a float32 model the operations do not
    accept)."""
    if test.referenced or any(op.type in NO_FLOAT_GOLDEN for op in test.main.operations):
        return None
    t = copy_test(test)
    main = t.main
    changed = False
    pad_values = {
        op.inputs[2]: op.inputs[0]
        for op in main.operations
        if op.type == Op.PAD_V2 and len(op.inputs) > 2
    }
    for i, o in enumerate(main.operands):
        src = test.main.operands[i]
        if o.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            return None
        if o.type in _DEQUANTIZABLE or (
            o.type == T.TENSOR_INT32 and (o.scale != 0.0 or o.zero_point != 0)
        ):
            values = (
                (np.asarray(src.data, np.float64) - src.zero_point) * np.float32(src.scale)
                if src.data
                else np.zeros(0)
            )
            _float_operand(o, values)
            changed = True
        elif o.type in (T.TENSOR_FLOAT16, T.FLOAT16):
            scalar = o.type == T.FLOAT16
            _float_operand(o, np.asarray(src.data, np.float32), scalar)
            changed = True
        elif o.type == T.INT32 and i in pad_values:
            # PAD_V2's pad value is in the quantized units of its input.
            ref = test.main.operands[pad_values[i]]
            if ref.type in _DEQUANTIZABLE:
                v = (np.asarray(src.data, np.float64) - ref.zero_point) * np.float32(ref.scale)
                _float_operand(o, v, scalar=True)
                changed = True
    if not changed:
        return None
    t.test_dynamic_output_shape = test.test_dynamic_output_shape
    try:
        validate_model(t.to_hal_model()[0])
    except (HalError, ValueError, TypeError, OverflowError):
        return None
    return t


def requantize(operand: TestOperand, values: np.ndarray) -> np.ndarray:
    """A float32 result in ``operand``'s own type: ``std::round(v / scale) + zeroPoint``
    saturated (Android's ``convertOutputFloat32ToQuant``), float16 by rounding."""
    from driver.operations.base import storage_dtype
    from driver.operations.quant import round_half_away

    v = np.asarray(values, dtype=np.float32)
    t = operand.type
    if t in _DEQUANTIZABLE or (t == T.TENSOR_INT32 and operand.scale != 0.0):
        dt = storage_dtype(t)
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            q = round_half_away(v / np.float32(operand.scale)) + operand.zero_point
        q = np.nan_to_num(q, nan=0.0)
        return np.clip(q, info.min, info.max).astype(dt)
    if t in (T.TENSOR_FLOAT16, T.FLOAT16):
        return v.astype(np.float16)
    return np.asarray(values).astype(storage_dtype(t))


def golden_mode_for(test: TestModel, mode: str) -> TestModel | None:
    """The float32 model to compute ``test``'s golden results from, or None for the
    model itself (see the module docstring for the rule)."""
    if mode == "exact":
        return None
    quantized = any(o.type in _DEQUANTIZABLE for o in test.main.operands)
    if quantized and len(test.main.operations) != 1:
        return None  # every correct driver requantizes the intermediates
    if mode == "auto" and not quantized:
        return None
    return to_float32(test)


def run_reference(
    model: Model, inputs: Sequence[np.ndarray | None]
) -> tuple[list[np.ndarray], HalVersion]:
    """Validate and run ``model`` on the reference executor: (outputs, minimum HAL
    version). Raises :class:`ReferenceError_` if the reference cannot."""
    from driver.executor import Executor

    try:
        need = validate_model(model)
        outputs = Executor(model).run(inputs)
    except HalError as e:
        raise ReferenceError_(e.status, e.message) from None
    return [np.asarray(a) for a in outputs], need


def compute_golden(
    test: TestModel,
    mode: str = "auto",
    hal: tuple[Model, Sequence[np.ndarray | None]] | None = None,
) -> tuple[list[np.ndarray], str]:
    """(golden outputs in the test's own output types, the mode actually used).
    ``hal`` is ``test``'s (model, inputs) when the caller has them already."""
    if mode not in GOLDEN_MODES:
        raise ValueError(f"unknown golden mode {mode!r}: one of {', '.join(GOLDEN_MODES)}")
    fp = golden_mode_for(test, mode)
    if fp is None:
        model, inputs = hal if hal is not None else test.to_hal_model()
        return run_reference(model, inputs)[0], "exact"
    model, inputs = fp.to_hal_model()
    outs, _ = run_reference(model, inputs)
    ops = [test.main.operands[i] for i in test.main.output_indexes]
    return [requantize(o, a) for o, a in zip(ops, outs)], "float32"


def reference_values(test: TestModel) -> dict[int, np.ndarray]:
    """Every main-subgraph operand's value in an exact reference run of ``test``:
    inputs, constants and all intermediates (the minimizer feeds cut edges with these)."""
    exposed, out_idx = expose_intermediates(test)
    model, inputs = exposed.to_hal_model()
    outs, _ = run_reference(model, inputs)
    values: dict[int, np.ndarray] = {}
    for i, o in enumerate(test.main.operands):
        if o.lifetime in (L.SUBGRAPH_INPUT, L.CONSTANT_COPY, L.CONSTANT_REFERENCE) and o.data:
            values[i] = o.array()
    values.update(zip(out_idx, outs))
    return values


# ---------------------------------------------------------------------------------------
# The driver under test, behind a watchdog
# ---------------------------------------------------------------------------------------


class DriverHang(Exception):
    """A driver call did not return within the session's timeout."""


class DriverCrash(Exception):
    """A driver call raised (in process) or the driver's process died (isolated)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind  # exception type name, or "died" for an isolated child


class _Job:
    __slots__ = ("args", "done", "error", "fn", "kw", "value")

    def __init__(self, fn, args, kw):
        self.fn, self.args, self.kw = fn, args, kw
        self.done = threading.Event()
        self.value = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.fn(*self.args, **self.kw)
        except BaseException as e:  # the driver's exception is the finding
            self.error = e
        self.done.set()


class _Watchdog:
    """One daemon thread running driver calls; abandoned (never joined) if one hangs, so
    a hung driver cannot keep the process alive."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True, name="nnfuzz-driver-call").start()

    def _loop(self) -> None:
        while True:
            self._jobs.get().run()

    def submit(self, job: _Job) -> None:
        self._jobs.put(job)


def _isolation_counts(device) -> tuple[int, int] | None:
    """(hangs, crashes) an isolated device (``driver.isolated``) has seen so far, or None
    for a device without isolation."""
    outcomes = getattr(device, "outcomes", None)
    if outcomes is None or not hasattr(outcomes, "items"):
        return None
    hangs = crashes = 0
    for key, n in outcomes.items():
        kind = str(getattr(key, "value", key))
        if kind == "hang":
            hangs += n
        elif kind == "crash":
            crashes += n
    return hangs, crashes


class _Raised(Exception):
    """A driver method raised ``error`` (as opposed to a bug in the harness)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class DriverSession:
    """A driver under test: a device from ``factory`` and a watchdog around its calls.

    ``run(body)`` runs ``body(call)``, where ``body`` makes every driver call through
    ``call(method, *args)``; it returns what ``body`` returns, or raises
    :class:`DriverCrash` (a driver method raised) or :class:`DriverHang` (``body`` did not
    finish within ``timeout`` seconds; None disables the watchdog). In process, ``body``
    runs on a daemon worker thread, one hand-off per run however many calls it makes;
    after a crash or a hang the device is recreated, so later tests start fresh. An
    isolated device (``D@isolated``) bounds and survives every call itself; its outcome
    counters tell a hang or a crash from an ordinary failure status."""

    def __init__(
        self,
        factory: Callable[[], object],
        *,
        name: str = "driver",
        timeout: float | None = 10,
        device: object | None = None,
    ):
        self._factory = factory
        self.name = name
        self.timeout = timeout
        self.device = factory() if device is None else device  # ``device``: already made
        self._watchdog: _Watchdog | None = None
        self.hangs = 0
        self.crashes = 0
        self.current = ""  # the driver method being called (for hang messages)

    @classmethod
    def around(cls, device: object) -> DriverSession:
        """``device`` as a session without a watchdog (its runs are plain calls); a
        session stays as it is."""
        if isinstance(device, DriverSession):
            return device
        return cls(lambda: device, timeout=None, device=device)

    @property
    def version(self) -> HalVersion:
        return HalVersion(getattr(self.device, "version", HalVersion.V1_3))

    @property
    def isolated(self) -> bool:
        return _isolation_counts(self.device) is not None

    def restart(self) -> None:
        if not self.isolated:
            self.device = self._factory()

    def call(self, fn: Callable, *args, **kw):
        """One driver call under the watchdog."""
        return self.run(lambda call: call(fn, *args, **kw))

    def run(self, body: Callable[[Callable], object]):
        if self.isolated:
            return body(self._isolated_call)
        if self.timeout is None:
            try:
                return body(self._direct_call)
            except _Raised as r:
                self._crashed(r.error)
        if self._watchdog is None:
            self._watchdog = _Watchdog()
        job = _Job(body, (self._direct_call,), {})
        self._watchdog.submit(job)
        if not job.done.wait(self.timeout):
            self._watchdog = None  # abandoned with the hung call
            self.hangs += 1
            what = self.current or "the driver"
            self.restart()
            raise DriverHang(f"no return from {what} within {self.timeout:g} s")
        if isinstance(job.error, _Raised):
            self._crashed(job.error.error)
        if job.error is not None:
            raise job.error  # a harness bug, or KeyboardInterrupt: not a finding
        return job.value

    def _direct_call(self, fn: Callable, *args, **kw):
        self.current = getattr(fn, "__name__", "the driver")
        try:
            return fn(*args, **kw)
        except Exception as e:
            raise _Raised(e) from e

    def _isolated_call(self, fn: Callable, *args, **kw):
        before = _isolation_counts(self.device) or (0, 0)
        value = fn(*args, **kw)  # the isolated device bounds every call and never raises
        after = _isolation_counts(self.device) or before
        message = getattr(self.device, "last_error", "") or ""
        if after[0] > before[0]:
            self.hangs += 1
            raise DriverHang(_crash_kind(message)[1] or "no answer from the driver")
        if after[1] > before[1]:
            self.crashes += 1
            kind, line = _crash_kind(message)
            raise DriverCrash(line or "the driver process died", kind)
        return value

    def _crashed(self, e: Exception):
        self.crashes += 1
        self.restart()
        raise DriverCrash(f"{type(e).__name__}: {e}", type(e).__name__) from None


_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))\b:?")


def _crash_kind(message: str) -> tuple[str, str]:
    """(kind, summary line) of an isolated driver's crash report: the exception type of
    the traceback's last exception line, else "died" (a signal, ``os._exit``)."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = _EXCEPTION_LINE.match(ln)
        if m:
            return m.group(1).rsplit(".", 1)[-1], ln
    return "died", lines[0] if lines else ""


# ---------------------------------------------------------------------------------------
# One run on the driver
# ---------------------------------------------------------------------------------------

PATH_SINCE = EXECUTION_PATH_SINCE
"""The execution paths, and the HAL version from which a driver has each: on an older
driver a path is skipped, not a failure (the method does not exist there)."""
EXECUTION_PATHS = tuple(PATH_SINCE)


@dataclass
class DriverRun:
    """What the driver did with one model. ``outcome`` is PASS when it returned outputs
    (they are not compared yet), SKIPPED when it does not support the model, else the
    failure."""

    outcome: Outcome
    stage: str = ""
    detail: str = ""
    outputs: list[np.ndarray] | None = None
    signature: str = ""


def _status_name(status) -> str:
    try:
        return ErrorStatus(status).name
    except ValueError:
        return f"status {status}"


def _driver_message(device) -> str:
    msg = getattr(device, "last_error", "")
    return f" ({msg})" if msg else ""


def _execute(call, prepared, request, path: str):
    """One execution on ``path``: (status, output shapes or None)."""
    if path == "sync":
        status, shapes, _ = call(prepared.execute_synchronously, request)
        return status, shapes
    if path == "async":
        from driver.device import CollectingCallback

        cb = CollectingCallback()
        status = call(prepared.execute, request, MeasureTiming.NO, None, None, cb)
        # The callback is notified exactly once, also when the launch fails.
        st, shapes, _ = call(cb.wait, None)
        if status != ErrorStatus.NONE:
            return status, []
        return st, shapes
    if path == "fenced":
        status, fence, callback = call(prepared.execute_fenced, request, [])
        if status != ErrorStatus.NONE:
            return status, []
        if fence is not None:
            call(fence.wait, None)
        st, _, _ = call(callback.get_execution_info)
        return st, None
    if path == "burst":
        status, burst = call(prepared.configure_execution_burst)
        if status != ErrorStatus.NONE:
            return status, []
        st, shapes, _ = call(burst.execute, request)
        return st, shapes
    raise ValueError(f"unknown execution path {path!r}: one of {', '.join(EXECUTION_PATHS)}")


def run_on_driver(
    session: DriverSession,
    model: Model,
    inputs: Sequence[np.ndarray | None],
    expected: Sequence[np.ndarray],
    *,
    need: HalVersion = HalVersion.V1_0,
    path: str = "sync",
) -> DriverRun:
    """Supported operations, prepare, execute on ``path``, read the outputs back."""
    version = session.version
    if version < need:
        return DriverRun(
            Outcome.SKIPPED,
            "version",
            f"the model needs HAL {need.label}; the driver is HAL {version.label}",
        )
    since = PATH_SINCE.get(path, HalVersion.V1_0)
    if version < since:
        return DriverRun(
            Outcome.SKIPPED,
            "version",
            f"{path} execution needs HAL {since.label}; the driver is HAL {version.label}",
        )
    device = session.device
    try:
        return session.run(lambda call: _run_on_driver(call, device, model, inputs, expected, path))
    except DriverHang as e:
        return DriverRun(Outcome.HANG, "watchdog", str(e), signature="hang")
    except DriverCrash as e:
        return DriverRun(Outcome.CRASH, "driver", str(e), signature=e.kind)


def _run_on_driver(call, device, model, inputs, expected, path) -> DriverRun:
    status, supported = call(device.get_supported_operations, model)
    n = len(model.main.operations)
    if status != ErrorStatus.NONE:
        name = _status_name(status)
        return DriverRun(
            Outcome.REJECTED,
            "getSupportedOperations",
            f"getSupportedOperations returned {name}{_driver_message(device)}",
            signature=f"getSupportedOperations:{name}",
        )
    if len(supported) != n:
        return DriverRun(
            Outcome.REJECTED,
            "getSupportedOperations",
            f"getSupportedOperations returned {len(supported)} flags for {n} operations",
            signature="getSupportedOperations:count",
        )
    if not all(supported):
        names = sorted(
            {Op(model.main.operations[i].type).name for i, s in enumerate(supported) if not s}
        )
        return DriverRun(
            Outcome.SKIPPED, "getSupportedOperations", f"unsupported: {', '.join(names)}"
        )
    status, prepared = call(device.prepare_model, model)
    if status != ErrorStatus.NONE or prepared is None:
        name = _status_name(status)
        outcome = (
            Outcome.REJECTED if status == ErrorStatus.INVALID_ARGUMENT else Outcome.PREPARE_FAILED
        )
        detail = f"prepareModel returned {name}{_driver_message(device)}"
        if status == ErrorStatus.NONE:
            detail = "prepareModel returned NONE but no prepared model"
        return DriverRun(outcome, "prepareModel", detail, signature=f"prepareModel:{name}")
    return execute_prepared(call, device, prepared, model, inputs, expected, path)


def execute_prepared(call, device, prepared, model, inputs, expected, path="sync") -> DriverRun:
    """Execute a prepared model on ``path`` and read the outputs back (``call`` is the
    session's driver-call wrapper)."""
    sizes = [max(1, e.nbytes) for e in expected]
    main = model.main
    output_dims = None
    version = HalVersion(getattr(device, "version", HalVersion.V1_3))
    if version < HalVersion.V1_2:
        # Before 1.2 a request must give the dims the model leaves unspecified (a driver
        # reports no output shapes): it gets the golden ones, as an app that knows them.
        output_dims = [
            tuple(e.shape)
            if tensor_has_unspecified_dimensions(main.operands[i].type, main.operands[i].dimensions)
            else None
            for i, e in zip(main.output_indexes, expected)
        ]
    bundle = build_request(model, inputs, output_sizes=sizes, output_dims=output_dims)
    status, shapes = _execute(call, prepared, bundle.request, path)
    if status != ErrorStatus.NONE:
        name = _status_name(status)
        return DriverRun(
            Outcome.EXECUTE_FAILED,
            f"execute ({path})",
            f"execution ({path}) returned {name}{_driver_message(device)}",
            signature=f"execute:{name}",
        )
    # From 1.2 a driver reports every output's shape (fenced executions report none).
    must_report = version >= HalVersion.V1_2 and shapes is not None
    if must_report and len(shapes) != len(expected):
        return DriverRun(
            Outcome.WRONG,
            "output shapes",
            f"the driver reports {len(shapes)} output shapes for {len(expected)} outputs",
            signature="shape",
        )
    outputs = []
    for k, want in enumerate(expected):
        operand = main.operands[main.output_indexes[k]]
        if is_scalar_type(operand.type):
            dims: tuple[int, ...] = ()
        elif must_report or (shapes and k < len(shapes) and shapes[k].dimensions):
            dims = tuple(int(d) for d in shapes[k].dimensions)
        else:
            dims = tuple(want.shape)
        if dims != tuple(want.shape):
            return DriverRun(
                Outcome.WRONG,
                "output shapes",
                f"output {k}: the driver reports shape {list(dims)}, expected {list(want.shape)}",
                signature="shape",
            )
        size = non_extension_size_of_data(operand.type, dims) if dims else want.nbytes
        outputs.append(array_from_bytes(operand.type, dims, bundle.output_bytes(k)[:size]).copy())
    return DriverRun(Outcome.PASS, "executed", outputs=outputs)


# ---------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------


@dataclass
class CheckOptions:
    """How :class:`DifferentialChecker` runs each test."""

    golden: str = "auto"  # auto | float32 | exact (module docstring)
    timeout: float | None = 10.0  # watchdog per driver call, seconds (None: no watchdog)
    path: str = "sync"  # execution path of the differential run
    criteria: str | None = None  # override every test's criteria set
    locate: bool = True  # find the first diverging operation of wrong results
    # Metamorphic relations (randomgraph.metamorphic.RELATIONS) checked on passing tests.
    metamorphic: tuple[str, ...] = ()


@dataclass
class DiffResult:
    outcome: Outcome
    stage: str = ""
    detail: str = ""
    criteria: str = ""
    golden_mode: str = ""
    expected: list[np.ndarray] = field(default_factory=list)
    actual: list[np.ndarray] | None = None
    mismatches: list[Mismatch] = field(default_factory=list)
    signature: str = ""  # what kind of failure, beyond the outcome (status, exception, relation)
    first_op: int | None = None  # index of the first diverging operation, when known
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    def summary(self) -> str:
        text = self.outcome.label
        if self.detail:
            text += f": {self.detail}"
        return text


def _describe(mismatches: Sequence[Mismatch], limit: int = 3) -> str:
    return "; ".join(str(m) for m in mismatches[:limit])


class DifferentialChecker:
    """Runs tests on one driver and on the reference, and classifies each outcome.

    ``driver`` is a ``--driver`` name (``driver.registry``) or a zero-argument device
    factory. The checker owns a :class:`DriverSession`; it is not thread-safe (one per
    thread or process)."""

    def __init__(
        self,
        driver: str | Callable[[], object] = "reference",
        options: CheckOptions | None = None,
        *,
        name: str | None = None,
    ):
        from driver.registry import load_device

        self.options = options or CheckOptions()
        if isinstance(driver, str):
            spec = driver
            factory: Callable[[], object] = lambda: load_device(spec)  # noqa: E731
            self.driver_name = name or driver
        else:
            factory = driver
            self.driver_name = name or getattr(driver, "__name__", "driver")
        self.session = DriverSession(factory, name=self.driver_name, timeout=self.options.timeout)

    # --- the check ----------------------------------------------------------------------
    def check(self, test: TestModel, *, path: str | None = None) -> DiffResult:
        """Golden, driver, compare (and, if enabled, the metamorphic relations)."""
        start = time.perf_counter()
        result = self._check(test, path or self.options.path)
        if (
            result.outcome == Outcome.PASS
            and self.options.metamorphic
            and result.actual is not None
        ):
            from randomgraph.metamorphic import check_relations

            violation = check_relations(self, test, result, self.options.metamorphic)
            if violation is not None:
                result.outcome = Outcome.INCONSISTENT
                result.stage = f"metamorphic: {violation.relation}"
                result.detail = violation.detail
                result.signature = violation.relation
        result.seconds = time.perf_counter() - start
        return result

    def _check(self, test: TestModel, path: str) -> DiffResult:
        criteria = self.options.criteria or criteria_for(test)
        result = DiffResult(Outcome.PASS, criteria=criteria)
        try:
            model, inputs = test.to_hal_model()
            need = validate_model(model)
            expected, result.golden_mode = compute_golden(
                test, self.options.golden, (model, inputs)
            )
        except ReferenceError_ as e:
            result.outcome, result.stage = Outcome.REFERENCE_ERROR, "golden"
            result.detail = f"the reference cannot run the model: {_status_name(e.status)}: {e}"
            result.signature = _status_name(e.status)
            return result
        except HalError as e:
            result.outcome, result.stage = Outcome.REFERENCE_ERROR, "validation"
            result.detail = f"the model is invalid: {e.message}"
            result.signature = "invalid"
            return result
        result.expected = expected
        run = run_on_driver(self.session, model, inputs, expected, need=need, path=path)
        result.outcome, result.stage, result.detail = run.outcome, run.stage, run.detail
        result.signature = run.signature
        if run.outcome != Outcome.PASS:
            if run.outcome == Outcome.WRONG and self.options.locate:
                result.first_op = self.first_diverging_operation(test, criteria, path)
            return result
        result.actual = run.outputs
        result.mismatches = compare_outputs(test, criteria, run.outputs, expected)
        if result.mismatches:
            result.outcome = Outcome.WRONG
            result.stage = "compare"
            result.detail = f"{_describe(result.mismatches)} [criteria {criteria}]"
            if self.options.locate:
                result.first_op = self.first_diverging_operation(test, criteria, path)
            if result.first_op is not None:
                result.signature = Op(test.main.operations[result.first_op].type).name
        return result

    # --- where a wrong result starts ---------------------------------------------------
    def first_diverging_operation(self, test: TestModel, criteria: str, path: str) -> int | None:
        """The first operation (in execution order) whose outputs differ from the
        reference's. Temporaries are exposed as model outputs and the graph runs once
        more on both sides; if the exposed graph does not misbehave (the driver may treat
        it differently), the earliest writer of a differing model output is returned."""
        ops = test.main.operations
        if len(ops) == 1:
            return 0
        writer = producers(test)
        exposed, out_idx = expose_intermediates(test)
        try:
            model, inputs = exposed.to_hal_model()
            expected, _ = compute_golden(exposed, "exact")
        except (ReferenceError_, HalError):
            return None
        run = run_on_driver(self.session, model, inputs, expected, path=path)
        if run.outcome == Outcome.PASS:
            bad = {
                out_idx[m.output] for m in compare_outputs(exposed, criteria, run.outputs, expected)
            }
            if bad:
                return min(writer[i] for i in bad if i in writer)
        # Fallback: the writers of the original outputs that differ.
        try:
            expected, _ = compute_golden(test, self.options.golden)
            run = run_on_driver(self.session, *test.to_hal_model(), expected, path=path)
        except (ReferenceError_, HalError):
            return None
        if run.outcome != Outcome.PASS:
            return None
        bad = {
            test.main.output_indexes[m.output]
            for m in compare_outputs(test, criteria, run.outputs, expected)
        }
        found = [writer[i] for i in bad if i in writer]
        return min(found) if found else None

    # --- a failure's identity ----------------------------------------------------------
    def failure_key(self, test: TestModel, result: DiffResult) -> tuple[str, str, str, str]:
        return failure_key(test, result)


def failure_key(test: TestModel, result: DiffResult) -> tuple[str, str, str, str]:
    """(outcome, operation set, data type, first diverging operation): failures with the
    same key are copies of one bug."""
    names = operation_names(test)
    op = result.first_op
    if op is None and len(names) == 1:
        op = 0  # a single operation is where any failure of the graph starts
    first = names[op] if op is not None else "-"
    return (
        result.outcome.value,
        "+".join(sorted(set(names))),
        primary_type(test, op),
        first,
    )


def same_failure(a: DiffResult, b: DiffResult) -> bool:
    """``b`` fails the way ``a`` does: same outcome, same signature (the first diverging
    operation's type for wrong results, the status or exception type otherwise)."""
    return a.outcome == b.outcome and (a.signature == b.signature or not a.signature)


__all__ = [
    "CRITERIA_NAMES",
    "EXECUTION_PATHS",
    "GOLDEN_MODES",
    "OPERATION_CRITERIA",
    "PATH_SINCE",
    "CheckOptions",
    "DiffResult",
    "DifferentialChecker",
    "DriverCrash",
    "DriverHang",
    "DriverRun",
    "DriverSession",
    "Outcome",
    "check_with_dynamic_variant",
    "compare_outputs",
    "compute_golden",
    "criteria_for",
    "expose_intermediates",
    "failure_key",
    "reference_values",
    "requantize",
    "run_on_driver",
    "same_failure",
    "to_float32",
    "with_outputs",
    "with_unknown_output_dims",
]
