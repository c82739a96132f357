"""The differential check: golden results, driver outcomes, criteria, metamorphic relations."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from driver.builder import ModelBuilder
from driver.device import ReferenceDevice
from driver.hal.types import ErrorStatus, HalVersion, OperationType, SymmPerChannelQuantParams
from driver.hal.types import OperandType as T
from driver.operations.quant import quantize
from randomgraph import metamorphic
from randomgraph.differential import (
    OPERATION_CRITERIA,
    PATH_SINCE,
    SMALL_GRAPH_LIMIT,
    CheckOptions,
    DifferentialChecker,
    DriverCrash,
    DriverHang,
    DriverSession,
    Outcome,
    _crash_kind,
    compare_outputs,
    compute_golden,
    criteria_for,
    expose_intermediates,
    failure_key,
    reference_values,
    requantize,
    run_on_driver,
    run_reference,
    to_float32,
    with_outputs,
    with_unknown_output_dims,
)
from randomgraph.metamorphic import RELATIONS, check_relations, layout_variant, variants
from randomgraph.testmodel import TestModel

O = OperationType  # noqa: E741 - the project's spelling of operation references


def add_test(
    type_=T.TENSOR_FLOAT32,
    dims=(2, 3),
    a=None,
    b=None,
    act=0,
    scale=0.0,
    zp=0,
    out_scale=None,
    name="add",
) -> TestModel:
    """ADD of two inputs, as a test model without expected outputs."""
    n = int(np.prod(dims))
    a = np.arange(n).reshape(dims) if a is None else np.asarray(a).reshape(dims)
    b = np.full(dims, 2) if b is None else np.asarray(b).reshape(dims)
    q = dict(scale=scale, zero_point=zp) if scale else {}
    qo = dict(scale=out_scale or scale, zero_point=zp) if scale else {}
    m = ModelBuilder()
    x = m.add_input(type_, dims, **q)
    y = m.add_input(type_, dims, **q)
    z = m.add_output(type_, dims, **qo)
    m.add_operation(O.ADD, [x, y, m.add_scalar(T.INT32, act)], [z])
    dt = {T.TENSOR_FLOAT32: np.float32, T.TENSOR_FLOAT16: np.float16}.get(type_, np.uint8)
    if type_ == T.TENSOR_QUANT8_ASYMM_SIGNED:
        dt = np.int8
    return TestModel.from_hal(name, m.build(), [a.astype(dt), b.astype(dt)])


def chain_test(act=0) -> TestModel:
    """x -> ADD(x, c, act) -> MUL(., c2) -> TANH: three operations, float32."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (2, 2))
    c = m.add_constant(T.TENSOR_FLOAT32, (2, 2), [-3.0, 1.0, -0.5, 2.0])
    t1 = m.add_operand(T.TENSOR_FLOAT32, (2, 2))
    m.add_operation(O.ADD, [x, c, m.add_scalar(T.INT32, act)], [t1])
    t2 = m.add_operand(T.TENSOR_FLOAT32, (2, 2))
    c2 = m.add_constant(T.TENSOR_FLOAT32, (2, 2), [2.0, 2.0, 2.0, 2.0])
    m.add_operation(O.MUL, [t1, c2, m.add_scalar(T.INT32, 0)], [t2])
    y = m.add_output(T.TENSOR_FLOAT32, (2, 2))
    m.add_operation(O.TANH, [t2], [y])
    return TestModel.from_hal(
        "chain", m.build(), [np.array([[1.0, -2.0], [0.25, 1.0]], np.float32)]
    )


def checker(driver="reference", **kw) -> DifferentialChecker:
    kw.setdefault("timeout", 5.0)
    return DifferentialChecker(driver, CheckOptions(**kw))


# ---------------------------------------------------------------------------------------
# Golden results
# ---------------------------------------------------------------------------------------


def test_float32_conversion_dequantizes_and_requantizes():
    scale, zp = 0.5, 10
    t = add_test(T.TENSOR_QUANT8_ASYMM, (4,), [10, 11, 12, 250], [10, 13, 10, 200], 0, scale, zp)
    fp = to_float32(t)
    assert fp is not None
    x = fp.main.operands[fp.main.input_indexes[0]]
    assert x.type == T.TENSOR_FLOAT32 and x.scale == 0.0
    assert x.data == [0.0, 0.5, 1.0, 120.0]
    golden, mode = compute_golden(t, "auto")
    assert mode == "float32"
    # (q1 - zp + q2 - zp) * 0.5 / 0.5 + zp, saturated at 255.
    assert golden[0].tolist() == [10, 14, 12, 255]
    exact, mode = compute_golden(t, "exact")
    assert mode == "exact" and exact[0].tolist() == [10, 14, 12, 255]


def test_requantize_rounds_half_away_and_saturates():
    t = add_test(T.TENSOR_QUANT8_ASYMM, (4,), scale=0.5, zp=100)
    out = t.main.operands[t.main.output_indexes[0]]
    got = requantize(out, np.array([0.25, -0.25, 1000.0, -1000.0], np.float32))
    # 0.25 / 0.5 = 0.5 rounds away from zero -> 1; -0.5 -> -1.
    assert got.tolist() == [101, 99, 255, 0]


def test_auto_golden_is_exact_for_graphs_and_casts():
    assert compute_golden(chain_test(), "auto")[1] == "exact"
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (3,))
    y = m.add_output(T.TENSOR_QUANT8_ASYMM, (3,), scale=0.1, zero_point=0)
    m.add_operation(O.QUANTIZE, [x], [y])
    t = TestModel.from_hal("q", m.build(), [np.array([0.05, 0.15, 0.3], np.float32)])
    assert to_float32(t) is None  # the cast is the operation itself
    assert compute_golden(t, "auto")[1] == "exact"


def test_float16_models_are_computed_in_float32_on_request():
    t = add_test(T.TENSOR_FLOAT16, (2,), [1.0, 2048.0], [0.5, 1.0])
    assert compute_golden(t, "auto")[1] == "exact"  # float16 outputs are really compared
    golden, mode = compute_golden(t, "float32")
    assert mode == "float32" and golden[0].dtype == np.float16
    # 2048 + 1 is computed in float32, then rounded once to float16.
    assert golden[0].tolist() == [1.5, float(np.float16(2049.0))]


def quant_conv_test() -> TestModel:
    """A quant8 CONV_2D with its int32 bias (scale = input scale x filter scale)."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=0.5, zero_point=0)
    w = m.add_constant(T.TENSOR_QUANT8_ASYMM, (1, 1, 1, 1), [4], scale=0.5, zero_point=0)
    b = m.add_constant(T.TENSOR_INT32, (1,), [3], scale=0.25, zero_point=0)
    ints = [m.add_scalar(T.INT32, v) for v in (1, 1, 1, 0)]  # SAME, strides, no act
    y = m.add_output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=1.0, zero_point=0)
    m.add_operation(O.CONV_2D, [x, w, b, *ints], [y])
    return TestModel.from_hal("conv_q", m.build(), [np.arange(1, 5, dtype=np.uint8)])


def lsh_test() -> TestModel:
    """A dense LSH_PROJECTION of a quant8 input: it hashes the input's bytes."""
    m = ModelBuilder()
    hashes = m.add_constant(
        T.TENSOR_FLOAT32, (4, 2), [0.12, -0.34, 0.56, -0.78, 0.9, 0.1, -0.2, 0.3]
    )
    x = m.add_input(T.TENSOR_QUANT8_ASYMM, (3, 2), scale=0.5, zero_point=10)
    weight = m.add_constant(T.TENSOR_FLOAT32, (3,), [1.0, 1.0, 1.0])
    y = m.add_output(T.TENSOR_INT32, (8,))
    m.add_operation(O.LSH_PROJECTION, [hashes, x, weight, m.add_scalar(T.INT32, 2)], [y])
    data = np.array([[3, 200], [17, 9], [250, 4]], np.uint8)
    return TestModel.from_hal("lsh_q", m.build(), [data])


def test_float32_golden_dequantizes_the_bias_and_skips_byte_hashing():
    # The bias is dequantized with the rest (left int32, the float model is invalid and
    # the golden silently falls back to the exact one).
    golden, mode = compute_golden(quant_conv_test(), "auto")
    assert mode == "float32"
    # (q * 0.5) * 2.0 + 3 * 0.25, rounded: 1.75, 2.75, 3.75, 4.75.
    assert golden[0].reshape(-1).tolist() == [2, 3, 4, 5]
    # LSH_PROJECTION hashes the bytes of its input, which the conversion changes.
    t = lsh_test()
    exact, _ = compute_golden(t, "exact")
    for requested in ("auto", "float32"):
        golden, mode = compute_golden(t, requested)
        assert mode == "exact" and golden[0].tolist() == exact[0].tolist()


def test_float32_golden_of_pad_v2_pads_with_the_dequantized_value():
    # The pad value is in the input's quantized units: 3 with zero point 128 is -62.5.
    t = pad_v2_test()
    exact, _ = compute_golden(t, "exact")
    golden, mode = compute_golden(t, "auto")
    assert mode == "float32"
    assert golden[0].tolist() == exact[0].tolist() == [[3, 100, 200, 3]]


def test_reference_values_cover_every_intermediate():
    t = chain_test()
    values = reference_values(t)
    x = np.array([[1.0, -2.0], [0.25, 1.0]], np.float32)
    t1 = x + np.array([[-3.0, 1.0], [-0.5, 2.0]], np.float32)
    np.testing.assert_array_equal(values[t.main.operations[0].outputs[0]], t1)
    np.testing.assert_array_equal(values[t.main.operations[1].outputs[0]], t1 * 2)
    exposed, outs = expose_intermediates(t)
    assert len(outs) == 3 and exposed.main.operations == t.main.operations


def _relaxed_pool_test() -> TestModel:
    """Relaxed ADD of a fed input (non-finite values) and an input fed nothing, then a
    pool constant added and a TRANSPOSE whose permutation is omitted."""
    m = ModelBuilder(relaxed=True)
    x = m.add_input(T.TENSOR_FLOAT32, (2, 3))
    y = m.add_input(T.TENSOR_FLOAT32, (2, 3))
    s = m.add_operand(T.TENSOR_FLOAT32, (2, 3))
    m.add_operation(O.ADD, [x, y, m.add_scalar(T.INT32, 0)], [s])
    c = m.add_constant(T.TENSOR_FLOAT32, (2, 3), np.arange(6) / 4, by_reference=True)
    u = m.add_operand(T.TENSOR_FLOAT32, (2, 3))
    m.add_operation(O.ADD, [s, c, m.add_scalar(T.INT32, 0)], [u])
    z = m.add_output(T.TENSOR_FLOAT32, (3, 2))
    m.add_operation(O.TRANSPOSE, [u, m.add_omitted(T.TENSOR_INT32, (2,))], [z])
    fed = np.array([[np.nan, np.inf, -np.inf], [1.0, -0.0, 2.5]], np.float32)
    t = TestModel.from_hal(
        "pool", m.build(), [fed, None], [np.zeros((3, 2))], min_supported_version=None
    )
    t.criteria = "conv"
    t.test_dynamic_output_shape = False  # a spec's opt-out
    return t


def _per_channel_test() -> TestModel:
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=0.5, zero_point=3)
    scales = SymmPerChannelQuantParams(0, (0.5, 0.25))
    w = m.add_constant(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (2, 1, 1, 1), [2, -4], channel_quant=scales
    )
    b = m.add_constant(T.TENSOR_INT32, (2,), [1, -1])
    ints = [m.add_scalar(T.INT32, v) for v in (1, 1, 1, 0)]
    y = m.add_output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 2), scale=0.25, zero_point=100)
    m.add_operation(O.CONV_2D, [x, w, b, *ints], [y])
    t = TestModel.from_hal("per_channel", m.build(), [np.arange(4, dtype=np.uint8)])
    return with_outputs(t, compute_golden(t, "exact")[0])


def _if_test() -> TestModel:
    """IF(cond) then x * 2 else x + 3: two different referenced subgraphs."""
    m = ModelBuilder()
    branches = []
    for op, k in ((O.MUL, 2.0), (O.ADD, 3.0)):
        sg = m.new_subgraph()
        x = sg.add_input(T.TENSOR_FLOAT32, (3,))
        y = sg.add_output(T.TENSOR_FLOAT32, (3,))
        sg.add_operation(
            op, [x, sg.add_constant(T.TENSOR_FLOAT32, (1,), [k]), sg.add_scalar(T.INT32, 0)], [y]
        )
        branches.append(m.add_subgraph_operand(sg))
    cond = m.add_input(T.TENSOR_BOOL8, (1,))
    x = m.add_input(T.TENSOR_FLOAT32, (3,))
    y = m.add_output(T.TENSOR_FLOAT32, (3,))
    m.add_operation(O.IF, [cond, *branches, x], [y])
    feeds = [np.array([False]), np.array([1.0, 2.0, 3.0], np.float32)]
    return TestModel.from_hal("if", m.build(), feeds, [np.array([4.0, 5.0, 6.0], np.float32)])


@pytest.mark.parametrize("make", [_relaxed_pool_test, _per_channel_test, _if_test])
def test_test_models_round_trip_through_hal_and_json(make):
    """Every field survives to_hal -> from_hal and to_json -> from_json: the relaxed
    flag, lifetimes (pool constants, omitted operands, subgraph references), quantization
    (per-channel too), inputs fed nothing, non-finite values, the criteria set and a spec's
    opt-out of the dynamic-output-shape variant (JSON only: the HAL model has neither)."""
    import json

    t = make()
    model, inputs, expected = t.to_hal()
    back = TestModel.from_hal(
        t.name, model, inputs, expected, min_supported_version=t.min_supported_version
    )
    back.criteria = t.criteria  # test fields the HAL model does not carry
    back.test_dynamic_output_shape = t.test_dynamic_output_shape
    assert t.is_relaxed == back.is_relaxed == (make is _relaxed_pool_test)
    assert back.to_json() == t.to_json()
    loaded = TestModel.from_json(json.loads(json.dumps(t.to_json())))
    assert loaded.to_json() == t.to_json()
    assert loaded.test_dynamic_output_shape == t.test_dynamic_output_shape
    for a, b in zip(loaded.main.operands, t.main.operands):
        # Non-finite values come back as numbers, not as the strings JSON holds them in.
        assert all(isinstance(v, (bool, int, float)) for v in a.data)
        np.testing.assert_array_equal(a.data, b.data)
    if any(i is None for i in inputs):
        return  # not a request the reference can run
    # The model is the same model: the reference computes the same from the copy.
    golden = run_reference(*t.to_hal_model())[0]
    for a, b in zip(run_reference(*back.to_hal_model())[0], golden):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# Outcomes
# ---------------------------------------------------------------------------------------


def test_reference_passes_its_own_check():
    for t in (add_test(), chain_test(1), add_test(T.TENSOR_QUANT8_ASYMM, scale=0.25, zp=3)):
        r = checker().check(t)
        assert r.outcome == Outcome.PASS, r.detail
        assert r.actual is not None and len(r.actual) == len(r.expected)


def test_wrong_result_is_located_at_the_first_diverging_operation():
    r = checker("planted-activation").check(chain_test(act=1))
    assert r.outcome == Outcome.WRONG
    assert r.first_op == 0 and r.signature == "ADD"
    assert failure_key(chain_test(act=1), r) == (
        "wrong-result",
        "ADD+MUL+TANH",
        "TENSOR_FLOAT32",
        "ADD",
    )


def test_wrong_result_is_not_located_when_locate_is_off():
    r = checker("planted-activation", locate=False).check(chain_test(act=1))
    assert r.outcome == Outcome.WRONG
    assert r.first_op is None and r.signature == ""


def test_the_criteria_option_overrides_every_tests_set():
    assert checker().check(add_test()).criteria == "medium"
    assert checker(criteria="large_graph").check(add_test()).criteria == "large_graph"
    r = checker("planted-activation", criteria="large_graph").check(chain_test(act=1))
    assert r.outcome == Outcome.WRONG and r.detail.endswith("[criteria large_graph]")


def test_a_single_operation_failure_is_filed_under_its_operation():
    r = checker("planted-crash").check(add_test(dims=(3, 2)))
    assert r.outcome == Outcome.CRASH and r.first_op is None
    assert failure_key(add_test(dims=(3, 2)), r) == ("crash", "ADD", "TENSOR_FLOAT32", "ADD")


def test_without_a_watchdog_a_raising_driver_is_still_a_crash():
    c = checker("planted-crash", timeout=None)
    r = c.check(add_test(dims=(3, 2)))
    assert (r.outcome, r.signature) == (Outcome.CRASH, "IndexError"), r.detail
    assert c.check(add_test(dims=(2, 2))).outcome == Outcome.PASS


def test_rejected_valid_model():
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (2, 2))
    shape = m.add_constant(T.TENSOR_INT32, (1,), [4])
    y = m.add_output(T.TENSOR_FLOAT32, (4,))
    m.add_operation(O.RESHAPE, [x, shape], [y])
    t = TestModel.from_hal("r", m.build(), [np.ones((2, 2), np.float32)])
    r = checker("planted-status").check(t)
    assert r.outcome == Outcome.REJECTED
    assert r.signature == "getSupportedOperations:INVALID_ARGUMENT"


def test_crash_and_hang_are_caught_and_the_device_recreated():
    c = checker("planted-crash")
    first = c.session.device
    r = c.check(add_test(dims=(3, 2)))
    assert r.outcome == Outcome.CRASH and r.signature == "IndexError"
    assert c.session.device is not first
    assert c.check(add_test(dims=(2, 2))).outcome == Outcome.PASS

    h = checker("planted-hang", timeout=0.3)
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (6,))
    y = m.add_output(T.TENSOR_FLOAT32, (6,))
    m.add_operation(O.MUL, [x, x, m.add_scalar(T.INT32, 0)], [y])
    t = TestModel.from_hal("h", m.build(), [np.ones(6, np.float32)])
    r = h.check(t)
    assert r.outcome == Outcome.HANG and "execute_synchronously" in r.detail
    assert h.check(add_test()).outcome == Outcome.PASS  # a fresh device after the hang


class _Misbehaving(ReferenceDevice):
    def __init__(self, mode, version=HalVersion.V1_3):
        super().__init__(version=version)
        self.mode = mode

    def prepare_model(self, model, *args, **kw):
        if self.mode == "prepare-raises":
            raise RuntimeError("boom")
        if self.mode == "prepare-fails":
            return ErrorStatus.GENERAL_FAILURE, None
        if self.mode == "prepare-none":
            return ErrorStatus.NONE, None
        status, prepared = super().prepare_model(model, *args, **kw)
        if self.mode == "execute-fails":
            prepared.execute_synchronously = lambda *a, **k: (ErrorStatus.GENERAL_FAILURE, [], None)
        if self.mode in ("wrong-shape", "no-shapes", "extra-shape"):
            original = prepared.execute_synchronously

            def execute(*a, **k):
                st, shapes, timing = original(*a, **k)
                from driver.hal.types import OutputShape

                if self.mode == "extra-shape":
                    return st, [*shapes, OutputShape((1,), True)], timing
                return st, [OutputShape((1,), True)] if self.mode == "wrong-shape" else [], timing

            prepared.execute_synchronously = execute
        return status, prepared

    def get_supported_operations(self, model):
        if self.mode == "unsupported":
            return ErrorStatus.NONE, [False] * len(model.main.operations)
        if self.mode == "support-count":  # one flag more than there are operations
            return ErrorStatus.NONE, [True] * (len(model.main.operations) + 1)
        return super().get_supported_operations(model)


@pytest.mark.parametrize(
    "mode, outcome",
    [
        ("prepare-raises", Outcome.CRASH),
        ("prepare-fails", Outcome.PREPARE_FAILED),
        ("execute-fails", Outcome.EXECUTE_FAILED),
        ("wrong-shape", Outcome.WRONG),
        ("no-shapes", Outcome.WRONG),  # a 1.2+ driver must report every output's shape
        ("extra-shape", Outcome.WRONG),  # ... and one per output, no more
        ("unsupported", Outcome.SKIPPED),
        ("support-count", Outcome.REJECTED),
        ("prepare-none", Outcome.PREPARE_FAILED),  # NONE, but no prepared model
    ],
)
@pytest.mark.parametrize("version", [HalVersion.V1_2, HalVersion.V1_3])
def test_outcome_classes(mode, outcome, version):
    c = DifferentialChecker(lambda: _Misbehaving(mode, version), CheckOptions(timeout=5))
    assert c.check(add_test()).outcome == outcome


def test_a_wrongly_reported_shape_is_a_shape_failure_not_a_compare_one():
    c = DifferentialChecker(lambda: _Misbehaving("wrong-shape"), CheckOptions(timeout=5))
    r = c.check(add_test())
    assert (r.outcome, r.stage, r.signature) == (Outcome.WRONG, "output shapes", "shape"), r.detail
    assert "reports shape [1], expected [2, 3]" in r.detail


def test_old_driver_skips_newer_models():
    t = add_test(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zp=0)
    r = checker("reference-1.2").check(t)
    assert r.outcome == Outcome.SKIPPED and "1.3" in r.detail


def test_reference_error_is_not_the_drivers_fault():
    t = add_test()
    t.main.operands[t.main.output_indexes[0]].dimensions = [5, 5]  # contradicts inference
    r = checker().check(t)
    assert r.outcome == Outcome.REFERENCE_ERROR


def _rank_and_relu_test() -> TestModel:
    """RANK (an INT32 scalar output) and RELU of one input."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (2,))
    rank = m.add_output(T.INT32)
    m.add_operation(O.RANK, [x], [rank])
    y = m.add_output(T.TENSOR_FLOAT32, (2,))
    m.add_operation(O.RELU, [x], [y])
    return TestModel.from_hal("rank_relu", m.build(), [np.array([-1.0, 2.0], np.float32)])


@pytest.mark.parametrize(
    "change, has_variant",
    [
        (lambda t: None, True),
        (lambda t: setattr(t, "test_dynamic_output_shape", False), False),  # opted out
        (lambda t: setattr(t, "expect_failure", True), False),
    ],
    ids=["plain", "opted-out", "expect-failure"],
)
def test_which_tests_have_a_dynamic_output_shape_variant(change, has_variant):
    t = add_test()
    change(t)
    dynamic = with_unknown_output_dims(t)
    assert (dynamic is not None) == has_variant
    if dynamic is not None:
        assert dynamic.main.operands[dynamic.main.output_indexes[0]].dimensions == [0, 0]
    # A scalar output has no dims to leave unspecified: no variant, even for its tensors.
    assert not _rank_and_relu_test().has_dynamic_output_variant()
    assert with_unknown_output_dims(_rank_and_relu_test()) is None


def test_an_isolated_crash_is_named_by_the_last_exception_of_its_traceback():
    report = (
        "Traceback (most recent call last):\n"
        '  File "d.py", line 3, in execute\n'
        "KeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "d.py", line 5, in execute\n'
        "numpy.core._exceptions.MemoryError: cannot allocate\n"
    )
    assert _crash_kind(report) == (
        "MemoryError",
        "numpy.core._exceptions.MemoryError: cannot allocate",
    )
    assert _crash_kind("killed by signal 11\n") == ("died", "killed by signal 11")


class _FakeIsolated:
    """What DriverSession reads of an isolated device: outcome counters and the last
    error; ``event`` says which counter a call raises ("hang", "crash" or none)."""

    def __init__(self, event: str):
        self.outcomes = {"hang": 0, "crash": 0}
        self.last_error = "Traceback (most recent call last):\nValueError: bad pool\n"
        self.event = event

    def call(self) -> str:
        if self.event:
            self.outcomes[self.event] += 1
        return "value"


@pytest.mark.parametrize(
    "event, raised, kind",
    [("", None, None), ("hang", DriverHang, None), ("crash", DriverCrash, "ValueError")],
)
def test_an_isolated_drivers_counters_tell_a_hang_from_a_crash(event, raised, kind):
    device = _FakeIsolated(event)
    session = DriverSession(lambda: device, timeout=None)
    assert session.isolated
    if raised is None:
        assert session.call(device.call) == "value"
        return
    with pytest.raises(raised) as info:
        session.call(device.call)
    if kind is not None:
        assert info.value.kind == kind
    assert (session.hangs, session.crashes) == ((1, 0) if event == "hang" else (0, 1))


def test_isolated_driver_crash_is_classified():
    c = checker("planted-crash@isolated:timeout=5")
    try:
        r = c.check(add_test(dims=(3, 1)))
        assert r.outcome == Outcome.CRASH and r.signature == "IndexError", r.detail
        assert c.check(add_test(dims=(2, 1))).outcome == Outcome.PASS
    finally:
        c.session.device.close()


# ---------------------------------------------------------------------------------------
# Criteria
# ---------------------------------------------------------------------------------------


def test_criteria_follow_android_per_operation_and_graph_size():
    assert OPERATION_CRITERIA[O.ADD] == "medium"
    assert OPERATION_CRITERIA[O.RESHAPE] == "strict"
    assert OPERATION_CRITERIA[O.SOFTMAX] == "relaxed"
    assert OPERATION_CRITERIA[O.CONV_2D] == "conv"
    assert criteria_for(add_test()) == "medium"
    assert criteria_for(chain_test()) == "small_graph"
    long = chain_test()
    long.main.operations = (long.main.operations * 4)[:SMALL_GRAPH_LIMIT]
    assert criteria_for(long) == "small_graph"
    long.main.operations = (long.main.operations * 2)[: SMALL_GRAPH_LIMIT + 1]
    assert criteria_for(long) == "large_graph"
    t = add_test()
    t.criteria = "strict"
    assert criteria_for(t) == "strict"


def test_an_ignored_output_is_not_compared():
    t = add_test(dims=(2,))
    want = [np.array([1.0, 2.0], np.float32)]
    wrong = [np.array([1.0, 7.0], np.float32)]
    assert compare_outputs(t, "strict", wrong, want)
    t.main.operands[t.main.output_indexes[0]].is_ignored = True
    assert compare_outputs(t, "strict", wrong, want) == []


def test_an_output_of_the_right_size_but_another_shape_is_a_mismatch():
    t = add_test(dims=(2, 3))
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    (m,) = compare_outputs(t, "large_graph", [want.reshape(3, 2)], [want])
    assert m.count == -1 and m.rule == "shape [3, 2] != [2, 3]"


def _compared_test(type_, *, relaxed=False, name="add") -> TestModel:
    t = add_test(type_, (2,), scale=0.5 if type_ == T.TENSOR_QUANT8_ASYMM else 0.0, name=name)
    t.is_relaxed = relaxed
    return t


F32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM


@pytest.mark.parametrize(
    "criteria, type_, relaxed, name, actual, passes",
    [
        # Generated tests: float32 atol 1e-5, but 5 * 2^-10 in a relaxed model.
        ("generated", F32, False, "add", [1.0, 2.001], False),
        ("generated", F32, True, "add", [1.0, 2.001], True),
        ("generated", F32, True, "add", [1.0, 2.02], False),
        # Quantized atol 1, but 3 for mobilenet-quantized tests.
        ("generated", Q8, False, "add", [10, 22], False),
        ("generated", Q8, False, "mobilenet_quantized_add", [10, 23], True),
        ("generated", Q8, False, "mobilenet_quantized_add", [10, 24], False),
        # Random graphs: a relaxed model's float32 outputs get the float16 criterion.
        ("strict", F32, False, "add", [1.0, 2.0001], False),
        ("strict", F32, True, "add", [1.0, 2.0001], True),
        ("strict", F32, True, "add", [1.0, 2.01], False),
    ],
)
def test_whole_test_comparison_applies_the_tests_own_flags(
    criteria, type_, relaxed, name, actual, passes
):
    t = _compared_test(type_, relaxed=relaxed, name=name)
    dtype = np.float32 if type_ == F32 else np.uint8
    want = np.array([1.0, 2.0] if type_ == F32 else [10, 20], dtype)
    got = np.array(actual, dtype)
    assert (compare_outputs(t, criteria, [got], [want]) == []) == passes


def test_float16_outputs_are_really_compared():
    t = add_test(T.TENSOR_FLOAT16, (2,))
    good = [np.array([1.0, 2.0], np.float16)]
    assert compare_outputs(t, "strict", good, good) == []
    bad = [np.array([1.0, 2.015625], np.float16)]
    # Android's checker skips float16 elements; ours does not.
    assert compare_outputs(t, "strict", bad, good)


def test_non_finite_values_that_agree_pass():
    t = add_test(dims=(3,))
    e = [np.array([np.nan, np.inf, 1.0], np.float32)]
    assert compare_outputs(t, "strict", [e[0].copy()], e) == []
    assert compare_outputs(t, "strict", [np.array([0.0, np.inf, 1.0], np.float32)], e)


@pytest.mark.parametrize(
    "actual, passes",
    [
        ([np.inf, -np.inf, np.nan, 1.0], True),  # the same non-finite values
        ([-np.inf, -np.inf, np.nan, 1.0], False),  # the other infinity
        ([0.0, -np.inf, np.nan, 1.0], False),  # finite where inf is expected
        ([np.inf, -np.inf, 0.0, 1.0], False),  # finite where NaN is expected
        ([np.inf, -np.inf, np.nan, np.inf], False),  # inf where 1 is expected
    ],
)
@pytest.mark.parametrize("type_code", [T.TENSOR_FLOAT32, T.TENSOR_FLOAT16])
def test_generated_criteria_hold_non_finite_values_to_exact_agreement(actual, passes, type_code):
    # With an infinite expectation the relative tolerance is infinite too: any value
    # passed (an inf - inf NaN failed instead).
    from randomgraph.criteria import check_generated

    expected = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    got = np.array(actual, np.float32)
    fp16 = type_code == T.TENSOR_FLOAT16
    assert (check_generated(0, type_code, got, expected, fp16_model=fp16) is None) == passes


def test_bias_catches_systematic_rounding_in_strict_only():
    rng = np.random.default_rng(1)
    q = rng.integers(0, 255, 100).astype(np.uint8)
    t = add_test(T.TENSOR_QUANT8_ASYMM, (100,), scale=0.5, zp=0)
    lower = (q.astype(int) - (np.arange(100) % 2)).clip(0, 255).astype(np.uint8)
    assert compare_outputs(t, "strict", [lower], [q])  # bias ~ -0.5
    assert not compare_outputs(t, "medium", [lower], [q])  # Android lets it through


# ---------------------------------------------------------------------------------------
# Metamorphic relations
# ---------------------------------------------------------------------------------------


def test_metamorphic_variants_apply_where_they_should():
    q = add_test(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128)
    names = {v.relation for v in variants(q)}
    assert {"signedness", "paths", "dynamic-shapes", "cache"} <= names
    assert "layout" not in names
    signed = next(v for v in variants(q) if v.relation == "signedness").test
    x = signed.main.operands[signed.main.input_indexes[0]]
    assert x.type == T.TENSOR_QUANT8_ASYMM_SIGNED and x.zero_point == 0


def test_reference_satisfies_every_relation():
    c = checker(metamorphic=RELATIONS)
    for t in (
        add_test(T.TENSOR_QUANT8_ASYMM, scale=0.5, zp=128),
        chain_test(1),
        conv_test(),
    ):
        r = c.check(t)
        assert r.outcome == Outcome.PASS, r.detail


def conv_test(nchw: bool = False) -> TestModel:
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (1, 3, 3, 2))
    w = m.add_constant(T.TENSOR_FLOAT32, (1, 2, 2, 2), np.arange(8) / 8.0)
    b = m.add_constant(T.TENSOR_FLOAT32, (1,), [0.5])
    ints = [m.add_scalar(T.INT32, v) for v in (1, 1, 1, 0)]  # SAME, strides, no act
    layout = m.add_scalar(T.BOOL, nchw)
    y = m.add_output(T.TENSOR_FLOAT32, (1, 3, 3, 1))
    m.add_operation(O.CONV_2D, [x, w, b, *ints, layout], [y])
    return TestModel.from_hal(
        "conv", m.build(), [np.arange(18, dtype=np.float32).reshape(1, 3, 3, 2)]
    )


class _NchwOnlyBug(ReferenceDevice):
    """Answers the NCHW form of a CONV_2D with zeros (a layout-specific bug)."""

    def prepare_model(self, model, *args, **kw):
        status, prepared = super().prepare_model(model, *args, **kw)
        layouts = [o for o in model.main.operands if o.type == T.BOOL and model.operand_values]
        nchw = bool(layouts) and model.operand_values[layouts[0].location.offset] == 1
        if nchw:
            original = prepared.execute_synchronously

            def execute(request, *a, **k):
                st, shapes, timing = original(request, *a, **k)
                from driver.memory import pool_buffer

                buf = pool_buffer(request.pools[1])
                buf[:] = bytes(len(buf))
                return st, shapes, timing

            prepared.execute_synchronously = execute
        return status, prepared


def transpose_conv_test(nchw: bool, output_dims_known: bool) -> TestModel:
    """TRANSPOSE_CONV_2D in its implicit form: the output shape is an input vector in the
    op's layout, so the layout relation must permute it with the data."""
    m = ModelBuilder()
    shape_in = (1, 1, 4, 1) if nchw else (1, 4, 1, 1)
    shape_out = (1, 1, 4, 3) if nchw else (1, 4, 3, 1)
    x = m.add_input(T.TENSOR_FLOAT32, shape_in)
    w = m.add_constant(T.TENSOR_FLOAT32, (1, 3, 3, 1), np.arange(9) / 9.0)
    b = m.add_constant(T.TENSOR_FLOAT32, (1,), [0.25])
    out_shape = m.add_constant(T.TENSOR_INT32, (4,), list(shape_out))
    ints = [m.add_scalar(T.INT32, v) for v in (1, 3, 1, 0)]  # SAME, stride w 3, h 1, no act
    layout = m.add_scalar(T.BOOL, nchw)
    y = m.add_output(T.TENSOR_FLOAT32, shape_out if output_dims_known else (0, 0, 0, 0))
    m.add_operation(O.TRANSPOSE_CONV_2D, [x, w, b, out_shape, *ints, layout], [y])
    data = np.arange(4, dtype=np.float32).reshape(shape_in) - 1.5
    return TestModel.from_hal("transpose_conv", m.build(), [data])


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("output_dims_known", [True, False])
def test_layout_relation_moves_transpose_conv_output_shape(nchw, output_dims_known):
    # Found by a campaign: the flipped layout kept the output-shape vector as it was, so
    # the variant asked for another output size (its dims unknown, the reference "broke"
    # the relation; dims known, the variant was not even valid).
    t = transpose_conv_test(nchw, output_dims_known)
    v = layout_variant(t)
    want = [1, 4, 3, 1] if nchw else [1, 1, 4, 3]
    assert v is not None and v.test.main.operands[3].data == want
    r = checker(metamorphic=("layout",)).check(t)
    assert r.outcome == Outcome.PASS, r.detail


def test_layout_relation_catches_a_layout_specific_bug():
    c = DifferentialChecker(lambda: _NchwOnlyBug(), CheckOptions(metamorphic=("layout",)))
    r = c.check(conv_test())
    assert r.outcome == Outcome.INCONSISTENT and r.signature == "layout", r.detail


def test_path_relation_catches_a_path_specific_bug():
    class AsyncBug(ReferenceDevice):
        def prepare_model(self, model, *args, **kw):
            status, prepared = super().prepare_model(model, *args, **kw)
            original = prepared.execute

            def execute(request, measure, deadline, loop_timeout, callback):
                return original(
                    request, measure, deadline, loop_timeout, _Zeroing(request, callback)
                )

            prepared.execute = execute
            return status, prepared

    c = DifferentialChecker(lambda: AsyncBug(), CheckOptions(metamorphic=("paths",)))
    r = c.check(add_test())
    assert r.outcome == Outcome.INCONSISTENT and "async" in r.detail


@pytest.mark.parametrize("driver", ["reference-1.0", "reference-1.1", "reference-1.2"])
def test_paths_a_driver_version_lacks_are_skipped_not_failed(driver):
    # Found by a campaign on reference-1.2: every passing test became "inconsistent"
    # because the paths relation asked a 1.2 driver for executeFenced (1.3); on 1.0/1.1
    # the dynamic-shapes relation asked for output shapes (1.2).
    c = DifferentialChecker(driver, CheckOptions(metamorphic=RELATIONS))
    assert c.check(add_test()).outcome == Outcome.PASS
    for t in (chain_test(1), conv_test()):  # CONV_2D's layout flag is HAL 1.2: skipped before
        r = c.check(t)
        assert not r.failed, r.detail
    # Outputs the model leaves unspecified (the generator makes some): a driver before
    # HAL 1.2 gets their dims in the request.
    dynamic = add_test()
    dynamic.main.operands[dynamic.main.output_indexes[0]].dimensions = [0, 0]
    r = c.check(dynamic)
    assert r.outcome == Outcome.PASS, r.detail
    session = c.session
    test = add_test()
    model, inputs = test.to_hal_model()
    expected, _ = compute_golden(test)
    ran = set()
    for path, since in PATH_SINCE.items():
        run = run_on_driver(session, model, inputs, expected, path=path)
        if session.version < since:
            assert run.outcome == Outcome.SKIPPED and f"needs HAL {since.label}" in run.detail
        else:
            assert run.outcome == Outcome.PASS, (path, run.detail)
            ran.add(path)
    # Bursts are HAL 1.2 (IPreparedModel::configureExecutionBurst), fenced execution 1.3.
    assert ran == ({"sync", "async", "burst"} if driver == "reference-1.2" else {"sync", "async"})


def _dequantize_test() -> TestModel:
    """DEQUANTIZE: a quant8 input, a float32 output the signedness relation keeps."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_QUANT8_ASYMM, (4,), scale=0.5, zero_point=128)
    y = m.add_output(T.TENSOR_FLOAT32, (4,))
    m.add_operation(O.DEQUANTIZE, [x], [y])
    return TestModel.from_hal("dq", m.build(), [np.array([0, 100, 128, 255], np.uint8)])


class _RefusingCache(ReferenceDevice):
    """Prepares with cache files, then refuses to restore from them (the HAL allows it)."""

    def prepare_model_from_cache(self, *args, **kw):
        return ErrorStatus.GENERAL_FAILURE, None


class _BrokenBurst(ReferenceDevice):
    """Fails every burst execution (the other paths work)."""

    def prepare_model(self, model, *args, **kw):
        status, prepared = super().prepare_model(model, *args, **kw)
        prepared.configure_execution_burst = lambda: (ErrorStatus.GENERAL_FAILURE, None)
        return status, prepared


def _unknown_output_dims(test: TestModel) -> TestModel:
    test.main.operands[test.main.output_indexes[0]].dimensions = [0, 0]
    return test


@pytest.mark.parametrize(
    "device, relation, test, outcome, detail",
    [
        # Only the quant8 outputs move by 128: a float32 output stays as it is.
        (ReferenceDevice, "signedness", _dequantize_test, Outcome.PASS, ""),
        # A driver may refuse to restore a model from its cache.
        (_RefusingCache, "cache", add_test, Outcome.PASS, ""),
        # executeFenced needs fully specified output dims: that path is not checked.
        (ReferenceDevice, "paths", lambda: _unknown_output_dims(add_test()), Outcome.PASS, ""),
        # A variant the driver fails on is a violation.
        (_BrokenBurst, "paths", add_test, Outcome.INCONSISTENT, "burst execution: failed to"),
    ],
    ids=["signedness-float-output", "cache-refused", "fenced-unknown-dims", "burst-fails"],
)
def test_what_breaks_a_relation_and_what_does_not(device, relation, test, outcome, detail):
    c = DifferentialChecker(device, CheckOptions(metamorphic=(relation,), timeout=5))
    r = c.check(test())
    assert r.outcome == outcome, r.detail
    assert detail in r.detail


class _Zeroing:
    def __init__(self, request, callback):
        self.request, self.callback = request, callback

    def notify(self, status, shapes, timing):
        from driver.memory import pool_buffer

        buf = pool_buffer(self.request.pools[1])
        buf[:] = bytes(len(buf))
        self.callback.notify(status, shapes, timing)


def test_signedness_relation_is_exact():
    base = add_test(T.TENSOR_QUANT8_ASYMM, (4,), [0, 100, 200, 255], [3, 3, 3, 3], 0, 0.5, 128)
    c = checker(metamorphic=("signedness",))
    r = c.check(base)
    assert r.outcome == Outcome.PASS
    # Perturbing the base result by one unit breaks the exact relation.
    r.actual = [r.actual[0].copy()]
    r.actual[0][0] += 1
    v = check_relations(c, base, r, ("signedness",))
    assert v is not None and v.relation == "signedness"


def pad_v2_test() -> TestModel:
    """PAD_V2 of a quant8 tensor with the pad value 3 (stored units, not shifted by 128)."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_QUANT8_ASYMM, (1, 2), scale=0.5, zero_point=128)
    pads = m.add_constant(T.TENSOR_INT32, (2, 2), [0, 0, 1, 1])
    y = m.add_output(T.TENSOR_QUANT8_ASYMM, (1, 4), scale=0.5, zero_point=128)
    m.add_operation(O.PAD_V2, [x, pads, m.add_scalar(T.INT32, 3)], [y])
    return TestModel.from_hal("pad_v2", m.build(), [np.array([[100, 200]], np.uint8)])


def test_signedness_relation_skips_the_operations_whose_signed_form_differs(monkeypatch):
    # nnapi-facts.md: signed and unsigned quant8 agree up to the 128 offset, except these.
    assert {
        O.CAST,
        O.HASHTABLE_LOOKUP,
        O.LSH_PROJECTION,
        O.PAD_V2,
        O.QUANTIZED_16BIT_LSTM,
    } == metamorphic.SIGNEDNESS_EXCEPTIONS
    c = checker(metamorphic=("signedness",))
    assert c.check(pad_v2_test()).outcome == Outcome.PASS
    # Why PAD_V2 is one: its pad value is not shifted, so the relation would fail.
    monkeypatch.setattr(metamorphic, "SIGNEDNESS_EXCEPTIONS", frozenset())
    r = c.check(pad_v2_test())
    assert r.outcome == Outcome.INCONSISTENT and r.signature == "signedness", r.detail


def test_watchdog_thread_is_a_daemon():
    c = checker("planted-hang", timeout=0.2)
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (6,))
    y = m.add_output(T.TENSOR_FLOAT32, (6,))
    m.add_operation(O.MUL, [x, x, m.add_scalar(T.INT32, 0)], [y])
    c.check(TestModel.from_hal("h", m.build(), [np.ones(6, np.float32)]))
    stuck = [t for t in threading.enumerate() if t.name == "nnfuzz-driver-call"]
    assert stuck and all(t.daemon for t in stuck)


def test_quantize_helper_roundtrip_sanity():
    # The float32 golden of a quantized ADD agrees with the exact reference within 1.
    rng = np.random.default_rng(0)
    a = quantize(rng.uniform(-2, 2, 50), 0.03, 7, T.TENSOR_QUANT8_ASYMM)
    b = quantize(rng.uniform(-2, 2, 50), 0.03, 7, T.TENSOR_QUANT8_ASYMM)
    t = add_test(T.TENSOR_QUANT8_ASYMM, (50,), a, b, 0, 0.03, 7, out_scale=0.05)
    fp, _ = compute_golden(t, "float32")
    ex, _ = compute_golden(t, "exact")
    assert np.abs(fp[0].astype(int) - ex[0].astype(int)).max() <= 1


def quantized_chain_test() -> TestModel:
    """HARD_SWISH then L2_NORMALIZATION on quant8 (a campaign's minimized finding): the
    quantized intermediate rounds to 0, so L2_NORMALIZATION gives 0 where the float32
    model, which keeps 0.0517, gives 1.0 (127)."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 1), scale=0.1, zero_point=-128)
    h = m.add_operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 1), scale=0.178, zero_point=-128)
    m.add_operation(O.HARD_SWISH, [x], [h])
    y = m.add_output(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 1), scale=1 / 128, zero_point=0)
    m.add_operation(O.L2_NORMALIZATION, [h], [y])
    return TestModel.from_hal("hs_l2", m.build(), [np.array([[-127], [-127]], np.int8)])


def test_float32_golden_leaves_multi_operation_quantized_graphs_as_they_are():
    t = quantized_chain_test()
    float_model = to_float32(t)
    assert float_model is not None  # convertible, but its drift is not a driver's bug
    assert requantize(
        t.main.operands[t.main.output_indexes[0]],
        run_reference(*float_model.to_hal_model())[0][0],
    ).tolist() == [[127], [127]]
    for mode in ("auto", "float32"):
        golden, used = compute_golden(t, mode)
        assert used == "exact" and golden[0].tolist() == [[0], [0]]
    result = checker(golden="float32").check(t)
    assert result.outcome == Outcome.PASS, result.detail
    # A float16 chain is still widened on request.
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT16, (2,))
    h = m.add_operand(T.TENSOR_FLOAT16, (2,))
    m.add_operation(O.RELU, [x], [h])
    y = m.add_output(T.TENSOR_FLOAT16, (2,))
    m.add_operation(O.TANH, [h], [y])
    f16 = TestModel.from_hal("f16", m.build(), [np.array([0.5, -1.0], np.float16)])
    assert compute_golden(f16, "auto")[1] == "exact"
    assert compute_golden(f16, "float32")[1] == "float32"


# --- sampling operations: compared as class frequencies, not values ---------------------


def _multinomial_tests(count: int = 6):
    """Generated single-operation RANDOM_MULTINOMIAL tests with the reference's samples."""
    from randomgraph.generator import generate

    found = []
    for seed in range(200):
        g = generate(seed, "single", operations=frozenset({int(O.RANDOM_MULTINOMIAL)}))
        test = g.with_expected()
        if test.main.operations[0].type != O.RANDOM_MULTINOMIAL:
            continue
        out = test.main.operands[test.main.output_indexes[0]]
        found.append((test, np.array(out.data, dtype=np.int32).reshape(out.dimensions)))
        if len(found) == count:
            return found
    raise AssertionError("the generator made too few RANDOM_MULTINOMIAL tests")


def _softmax_draw(test: TestModel, samples: np.ndarray, seed: int) -> np.ndarray:
    """Samples of the same distribution from another generator (numpy's), as a correct
    driver with its own RNG would draw them."""
    logits_operand = test.main.operands[test.main.operations[0].inputs[0]]
    logits = np.asarray(logits_operand.data, dtype=np.float64).reshape(logits_operand.dimensions)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    rows = [rng.choice(p.shape[1], size=samples.shape[1], p=row) for row in p]
    return np.array(rows, dtype=np.int32)


def test_a_driver_with_another_random_generator_passes_random_multinomial():
    """NNAPI names no generator: the reference's samples reordered, and independent
    draws from the same distribution, are as correct as the reference's own."""
    for k, (test, samples) in enumerate(_multinomial_tests()):
        criteria = criteria_for(test)
        assert samples.shape[1] >= 1000  # enough samples for frequencies to mean something
        assert compare_outputs(test, criteria, [samples[:, ::-1].copy()], [samples]) == []
        other = _softmax_draw(test, samples, seed=k)
        assert compare_outputs(test, criteria, [other], [samples]) == [], test.name


def test_a_wrong_random_multinomial_distribution_or_class_index_fails():
    for test, samples in _multinomial_tests(3):
        criteria = criteria_for(test)
        classes = test.main.operands[test.main.operations[0].inputs[0]].dimensions[1]
        shifted = (samples + 1) % classes  # every sample one class off
        if classes > 1:
            (m,) = compare_outputs(test, criteria, [shifted], [samples])
            assert "class frequencies differ" in m.rule
        outside = samples.copy()
        outside[0, 0] = classes + 1
        (m,) = compare_outputs(test, criteria, [outside], [samples])
        assert m.count == 1 and f"class indexes 0..{classes - 1}" in m.rule


def test_sampling_operations_stay_out_of_control_flow_subgraphs():
    """A sample inside IF/WHILE would reach the outputs as plain values, compared exactly."""
    from randomgraph.choices import PrngSource
    from randomgraph.criteria import SAMPLING_OPERATIONS
    from randomgraph.generator.core import PRESETS, Generator

    gen = Generator(PRESETS["small"], PrngSource(0))
    inside = set(gen.subgraph_operations(1))
    assert inside and not inside & SAMPLING_OPERATIONS
