"""Partial drivers and partitioned execution: a model spanning drivers runs in steps, each
on its driver, and computes exactly what the whole model computes on the reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver.builder import ModelBuilder, build_request
from driver.device import CollectingCallback, ReferenceDevice
from driver.drivers.partial import CPU, FAST, FLOAT_RULE, PartialDevice
from driver.extensions import extension_device
from driver.hal.types import (
    NO_TIMING,
    QUANTIZED_TYPES,
    Capabilities,
    ErrorStatus,
    ExecutionPreference,
    HalVersion,
    Model,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    OperationType,
    PerformanceInfo,
    Priority,
)
from driver.partition import (
    PartitionedDevice,
    assign_devices,
    execute_partitioned,
    extract_submodel,
    form_steps,
    query_support,
)
from driver.registry import DriverLoadError, load_device
from driver.sync import SyncFence
from driver.validation import validate_model
from tests.operations.examples import all_examples
from tests.test_extensions import fib_model

T = OperandType
Op = OperationType
E = ErrorStatus
L = OperandLifeTime
F32 = T.TENSOR_FLOAT32
Q8 = T.TENSOR_QUANT8_ASYMM


def none_act(b):
    return b.add_scalar(T.INT32, 0)


# --- models --------------------------------------------------------------------------------


def mixed_model() -> Model:
    """float ADD → QUANTIZE → quant ADD → DEQUANTIZE → float MUL (with x again), plus a
    RELU of the first sum whose output dims are left unspecified."""
    b = ModelBuilder()
    x = b.add_input(F32, (2, 2))
    y = b.add_input(F32, (2, 2))
    a = b.add_operand(F32, (2, 2))
    b.add_operation(Op.ADD, [x, y, none_act(b)], [a])
    q = b.add_operand(Q8, (2, 2), scale=0.5, zero_point=10)
    b.add_operation(Op.QUANTIZE, [a], [q])
    q2 = b.add_operand(Q8, (2, 2), scale=0.5, zero_point=10)
    b.add_operation(Op.ADD, [q, q, none_act(b)], [q2])
    d = b.add_operand(F32, (2, 2))
    b.add_operation(Op.DEQUANTIZE, [q2], [d])
    out = b.add_output(F32, (2, 2))
    b.add_operation(Op.MUL, [d, x, none_act(b)], [out])
    relu = b.add_output(F32, (0, 0))
    b.add_operation(Op.RELU, [a], [relu])
    return b.build()


MIXED_INPUTS = [
    np.array([[1, 2], [3, 4]], np.float32),
    np.array([[0.5, 1], [1.5, -9]], np.float32),
]


def conv_chain_model() -> Model:
    """CONV_2D (constant weights) → RELU → ADD (constant) → TANH → CONCATENATION with the
    input → AVERAGE_POOL_2D: the minimal driver takes CONV_2D, ADD and CONCATENATION."""
    rng = np.random.default_rng(5)
    b = ModelBuilder()
    x = b.add_input(F32, (1, 4, 4, 2))
    w = b.add_constant(F32, (3, 2, 2, 2), rng.uniform(-1, 1, (3, 2, 2, 2)))
    bias = b.add_constant(F32, (3,), [0.1, -0.2, 0.3])
    conv = b.add_operand(F32, (1, 4, 4, 3))
    pad = [b.add_scalar(T.INT32, v) for v in (0, 1, 0, 1)]  # explicit: left right top bottom
    ones = [b.add_scalar(T.INT32, 1) for _ in range(2)]
    b.add_operation(Op.CONV_2D, [x, w, bias, *pad, *ones, none_act(b)], [conv])
    relu = b.add_operand(F32, (1, 4, 4, 3))
    b.add_operation(Op.RELU, [conv], [relu])
    shift = b.add_constant(F32, (3,), [-0.5, 0.25, 1.0], by_reference=True)
    added = b.add_operand(F32, (1, 4, 4, 3))
    b.add_operation(Op.ADD, [relu, shift, none_act(b)], [added])
    tanh = b.add_operand(F32, (1, 4, 4, 3))
    b.add_operation(Op.TANH, [added], [tanh])
    cat = b.add_output(F32, (1, 4, 4, 5))
    b.add_operation(Op.CONCATENATION, [tanh, x, b.add_scalar(T.INT32, 3)], [cat])
    pooled = b.add_output(F32, (1, 2, 2, 5))
    pool_args = [b.add_scalar(T.INT32, v) for v in (1, 2, 2, 2, 2)]  # SAME, strides, filter
    b.add_operation(Op.AVERAGE_POOL_2D, [cat, *pool_args, none_act(b)], [pooled])
    return b.build()


def conv_inputs():
    return [np.random.default_rng(9).uniform(-2, 2, (1, 4, 4, 2)).astype(np.float32)]


def if_model(branch_op=Op.MUL) -> Model:
    """y = IF(c) then x (branch_op) 2 else x + 3, then z = SUB(y, x) outside."""
    b = ModelBuilder()
    branches = []
    for op, k in ((branch_op, 2.0), (Op.ADD, 3.0)):
        sg = b.new_subgraph()
        xi = sg.add_input(F32, (3,))
        c = sg.add_constant(F32, (1,), [k])
        yo = sg.add_output(F32, (3,))
        sg.add_operation(op, [xi, c, sg.add_scalar(T.INT32, 0)], [yo])
        branches.append(b.add_subgraph_operand(sg))
    cond = b.add_input(T.TENSOR_BOOL8, (1,))
    x = b.add_input(F32, (3,))
    y = b.add_output(F32, (3,))
    b.add_operation(Op.IF, [cond, *branches, x], [y])
    z = b.add_output(F32, (3,))
    b.add_operation(Op.SUB, [y, x, none_act(b)], [z])
    return b.build()


def if_inputs(cond: bool):
    return [np.array([cond]), np.array([1.0, -2.0, 0.5], np.float32)]


def dynamic_model(n: int = 20) -> Model:
    """A float chain whose intermediates have unspecified dims and are bigger than the
    harness's first guess (n*n float32 > 1 KiB), with a QUANTIZE in the middle."""
    b = ModelBuilder()
    x = b.add_input(F32, (n, n))
    a = b.add_operand(F32, (0, 0))
    b.add_operation(Op.ADD, [x, x, none_act(b)], [a])
    q = b.add_operand(Q8, (0, 0), scale=0.25, zero_point=128)
    b.add_operation(Op.QUANTIZE, [a], [q])
    d = b.add_operand(F32, (0, 0))
    b.add_operation(Op.DEQUANTIZE, [q], [d])
    out = b.add_output(F32, (0, 0))
    b.add_operation(Op.MUL, [d, x, none_act(b)], [out])
    return b.build()


def zero_boxes_model() -> Model:
    """BOX_WITH_NMS_LIMIT whose threshold keeps no box, then ADD on the (0, 4) boxes."""
    b = ModelBuilder()
    scores = b.add_input(F32, (2, 2))
    boxes = b.add_input(F32, (2, 8))
    split = b.add_constant(T.TENSOR_INT32, (2,), [0, 0])
    params = [
        b.add_scalar(T.FLOAT32, 0.95),  # score threshold: keeps nothing
        b.add_scalar(T.INT32, -1),
        b.add_scalar(T.INT32, 0),
        b.add_scalar(T.FLOAT32, 0.5),
        b.add_scalar(T.FLOAT32, 0.5),
        b.add_scalar(T.FLOAT32, 0.1),
    ]
    out_scores = b.add_output(F32, (0,))
    out_boxes = b.add_operand(F32, (0, 4))
    out_classes = b.add_output(T.TENSOR_INT32, (0,))
    out_split = b.add_output(T.TENSOR_INT32, (0,))
    b.add_operation(
        Op.BOX_WITH_NMS_LIMIT,
        [scores, boxes, split, *params],
        [out_scores, out_boxes, out_classes, out_split],
    )
    moved = b.add_output(F32, (0, 4))
    shift = b.add_constant(F32, (1, 4), [1, 1, 1, 1])
    b.add_operation(Op.ADD, [out_boxes, shift, none_act(b)], [moved])
    return b.build()


def zero_boxes_inputs():
    return [
        np.array([[0.1, 0.5], [0.2, 0.6]], np.float32),
        np.array([[0, 0, 1, 1, 0, 0, 10, 10], [0, 0, 1, 1, 1, 1, 11, 11]], np.float32),
    ]


# --- running -------------------------------------------------------------------------------


def outputs_of(device, model, inputs, **request_kw):
    """(status, shapes, output bytes) of one synchronous execution."""
    status, pm = device.prepare_model(model)
    assert status == E.NONE, getattr(device, "last_error", "")
    rb = build_request(model, inputs, **request_kw)
    status, shapes, _ = pm.execute_synchronously(rb.request)
    outs = [rb.output_bytes(k) for k in range(len(model.main.output_indexes))]
    return status, shapes, outs


def assert_same_as_whole(device, model, inputs, **request_kw):
    want = outputs_of(ReferenceDevice(), model, inputs, **request_kw)
    got = outputs_of(device, model, inputs, **request_kw)
    assert want[0] == E.NONE
    assert got == want


def partitioned(*names: str, **kw) -> PartitionedDevice:
    return PartitionedDevice([load_device(n) for n in names], **kw)


# --- partial drivers -----------------------------------------------------------------------


def test_partial_drivers_report_their_subsets_per_operation():
    model = mixed_model()  # ADD f32, QUANTIZE, ADD q8, DEQUANTIZE, MUL f32, RELU f32
    expected = {
        "partial-float": [True, False, False, False, True, True],
        "partial-quant": [False, False, True, False, False, False],
        "partial-minimal": [True, False, False, False, False, False],
        "reference": [True] * 6,
    }
    for name, flags in expected.items():
        assert load_device(name).get_supported_operations(model) == (E.NONE, flags), name


def test_the_same_operation_is_supported_or_not_by_its_operand_types():
    def add(t, **q):
        b = ModelBuilder()
        x, y = b.add_input(t, (2,), **q), b.add_input(t, (2,), **q)
        b.add_operation(Op.ADD, [x, y, none_act(b)], [b.add_output(t, (2,), **q)])
        return b.build()

    cases = {
        F32: ("partial-float", "partial-minimal"),
        T.TENSOR_FLOAT16: ("partial-float",),
        Q8: ("partial-quant",),
        T.TENSOR_QUANT8_ASYMM_SIGNED: ("partial-quant",),
        T.TENSOR_INT32: (),
    }
    for t, supporters in cases.items():
        q = dict(scale=0.5, zero_point=0) if t in (Q8, T.TENSOR_QUANT8_ASYMM_SIGNED) else {}
        model = add(t, **q)
        for name in ("partial-float", "partial-quant", "partial-minimal"):
            status, flags = load_device(name).get_supported_operations(model)
            assert status == E.NONE and flags == [name in supporters], (t, name)


def test_partial_drivers_are_disjoint_and_agree_with_the_reference_on_every_example():
    """Over every registered one-operation example: float and quant drivers never both
    claim an operation, and what a partial driver claims it runs like the reference."""
    reference = ReferenceDevice()
    partials = {n: load_device(n) for n in ("partial-float", "partial-quant", "partial-minimal")}
    claimed = dict.fromkeys(partials, 0)
    for ex in all_examples():
        model, feeds = ex.model()
        flags = {n: d.get_supported_operations(model)[1] == [True] for n, d in partials.items()}
        assert not (flags["partial-float"] and flags["partial-quant"]), ex.name
        if flags["partial-minimal"]:
            assert flags["partial-float"], ex.name  # minimal is a subset of float
        ref = outputs_of(reference, model, feeds)
        for name, device in partials.items():
            if not flags[name]:
                assert device.prepare_model(model)[0] == E.GENERAL_FAILURE, (ex.name, name)
                continue
            claimed[name] += 1
            assert outputs_of(device, model, feeds) == ref, (ex.name, name)
    assert claimed["partial-float"] > 50 and claimed["partial-quant"] > 50
    assert 3 <= claimed["partial-minimal"] < 20


def test_control_flow_is_supported_whole_or_not_at_all():
    float_if = if_model(Op.MUL)
    flags = load_device("partial-float").get_supported_operations(float_if)[1]
    assert flags == [True, True]
    # A branch with an operation the minimal driver lacks (MUL): IF is not supported.
    assert load_device("partial-minimal").get_supported_operations(float_if)[1] == [False, False]
    # A branch with a quantized operation: not the float driver's.
    b = ModelBuilder()
    sg = b.new_subgraph()
    xi = sg.add_input(F32, (3,))
    q = sg.add_operand(Q8, (3,), scale=0.5, zero_point=0)
    sg.add_operation(Op.QUANTIZE, [xi], [q])
    yo = sg.add_output(F32, (3,))
    sg.add_operation(Op.DEQUANTIZE, [q], [yo])
    ref = b.add_subgraph_operand(sg)
    cond, x = b.add_input(T.TENSOR_BOOL8, (1,)), b.add_input(F32, (3,))
    b.add_operation(Op.IF, [cond, ref, ref, x], [b.add_output(F32, (3,))])
    assert load_device("partial-float").get_supported_operations(b.build())[1] == [False]


def test_relaxed_models_belong_to_the_float_driver_not_the_minimal_one():
    b = ModelBuilder(relaxed=True)
    x = b.add_input(F32, (2,))
    b.add_operation(Op.ADD, [x, x, none_act(b)], [b.add_output(F32, (2,))])
    model = b.build()
    assert load_device("partial-float").get_supported_operations(model)[1] == [True]
    assert load_device("partial-minimal").get_supported_operations(model)[1] == [False]


def test_a_partial_rule_never_claims_an_extension_operation():
    """Even on a device that has the extension, and on the rule's own tensor types."""
    model = fib_model(float_input=True, float_output=True)
    with_rule = extension_device("float-ext", support_filter=FLOAT_RULE.supports)
    assert extension_device().get_supported_operations(model) == (E.NONE, [True])
    assert with_rule.get_supported_operations(model) == (E.NONE, [False])


@pytest.mark.parametrize(
    "name, fast, relaxed_fast",
    [
        # Float drivers: their tensors and the scalars of the same types.
        ("partial-float", {F32, T.TENSOR_FLOAT16, T.FLOAT32, T.FLOAT16}, True),
        ("partial-quant", set(QUANTIZED_TYPES), False),
        # Minimal computes float32 but takes no relaxed model: relaxed is not fast.
        ("partial-minimal", {F32, T.FLOAT32}, False),
    ],
)
def test_partial_capabilities_report_their_own_types_as_fast(name, fast, relaxed_fast):
    _, caps = load_device(name).get_capabilities()
    listed = {p.type for p in caps.operand_performance}
    assert {p.type for p in caps.operand_performance if p.info == FAST} == fast & listed
    assert fast & listed and listed - fast  # both fast and slow types are listed
    relaxed = caps.relaxed_float32_to_float16_performance_tensor
    assert caps.relaxed_float32_to_float16_performance_scalar == relaxed
    assert relaxed == (FAST if relaxed_fast else CPU)


# --- step models ---------------------------------------------------------------------------


def test_step_models_cut_edges_and_copy_constants():
    model = conv_chain_model()
    step, inputs, outputs = extract_submodel(model, [1, 2])  # RELU, ADD
    main = model.main
    conv_out = main.operations[0].outputs[0]
    assert inputs == (conv_out,)
    assert outputs == (main.operations[2].outputs[0],)
    validate_model(step)
    sg = step.main
    assert [sg.operands[i].lifetime for i in sg.input_indexes] == [L.SUBGRAPH_INPUT]
    assert [sg.operands[i].lifetime for i in sg.output_indexes] == [L.SUBGRAPH_OUTPUT]
    # The ADD's constant stays a reference into the model's (shared) pool.
    shift = next(o for o in sg.operands if o.lifetime == L.CONSTANT_REFERENCE)
    assert step.pools == model.pools and shift.location.pool_index == 0
    # Constants and consumers are recomputed for the step alone.
    assert sum(o.number_of_consumers for o in sg.operands) == sum(
        len(op.inputs) for op in sg.operations
    )


def test_every_step_model_is_valid_and_outputs_include_unread_results():
    model = mixed_model()
    for ops in ([0], [0, 5], [1, 2, 3], [4], [0, 1, 2, 3, 4, 5]):
        step, inputs, outputs = extract_submodel(model, ops)
        validate_model(step)
        assert len(step.main.input_indexes) == len(inputs)
    # The whole model as one step has the model's own inputs and outputs.
    _, inputs, outputs = extract_submodel(model, range(6))
    assert set(inputs) == set(model.main.input_indexes)
    assert set(outputs) == set(model.main.output_indexes)


def test_steps_follow_androids_queue_order():
    """Independent operations of one device share a step even when another device's
    operation sits between them in the model's order."""
    model = mixed_model()  # 0 f, 1 ref, 2 q, 3 ref, 4 f, 5 f(RELU of op 0)
    assignment = [0, 2, 1, 2, 0, 0]
    assert form_steps(model, assignment, 3) == [[0, 5], [1], [2], [3], [4]]
    device = partitioned("partial-float", "partial-quant")
    status, plan = device.plan(model)
    assert status == E.NONE
    assert [(plan.device_names[s.device], list(s.operations)) for s in plan.steps] == [
        ("partial-float", [0, 5]),
        ("reference", [1]),
        ("partial-quant", [2]),
        ("reference", [3]),
        ("partial-float", [4]),
    ]
    assert "step 2 on partial-quant: 2:ADD" in plan.describe()
    # Operations ready on several devices at once: the lowest-numbered device goes first.
    assert form_steps(three_relus(), [2, 1, 0], 3) == [[2], [1], [0]]


def three_relus(*, unread: bool = False) -> Model:
    """Independent RELUs of one input: three model outputs, then (``unread``) one whose
    result nothing reads."""
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    for _ in range(3):
        b.add_operation(Op.RELU, [x], [b.add_output(F32, (2,))])
    if unread:
        b.add_operation(Op.RELU, [x], [b.add_operand(F32, (2,))])
    return b.build()


def test_a_step_outputs_a_result_that_nothing_reads():
    model = three_relus(unread=True)
    unread = model.main.operations[3].outputs[0]
    step, _, outputs = extract_submodel(model, [2, 3])
    assert outputs == (model.main.operations[2].outputs[0], unread)
    validate_model(step)


class _Answering:
    """A member whose supported-operations answer is ``answer`` (status NONE)."""

    name = "answering"

    def __init__(self, answer):
        self.answer = answer

    def get_supported_operations(self, model):
        return E.NONE, list(self.answer)


@pytest.mark.parametrize("answer", [[True] * 2, [True] * 4, []], ids=["short", "long", "empty"])
def test_a_supported_operations_answer_of_the_wrong_length_supports_nothing(answer):
    assert query_support(_Answering(answer), three_relus()) == [False] * 3


def _with_prepared(device, patch):
    """``device`` whose prepared models' execute_synchronously is ``patch(original)``."""
    prepare = device.prepare_model

    def prepare_model(model, *args, **kw):
        status, pm = prepare(model, *args, **kw)
        pm.execute_synchronously = patch(pm.execute_synchronously)
        return status, pm

    device.prepare_model = prepare_model
    return device


def test_a_step_without_timing_makes_the_execution_untimed():
    untimed = _with_prepared(
        load_device("partial-quant"), lambda run: lambda *a, **k: (*run(*a, **k)[:2], NO_TIMING)
    )
    device = PartitionedDevice([load_device("partial-float"), untimed])
    status, pm = device.prepare_model(mixed_model())
    rb = build_request(mixed_model(), MIXED_INPUTS)
    status, _, timing = pm.execute_synchronously(rb.request, measure=1)
    assert (status, timing) == (E.NONE, NO_TIMING)


def test_the_deadline_is_checked_between_steps():
    import time

    def slow(run):
        def execute(request, measure=0, deadline=None, loop_timeout=None):
            time.sleep(0.1)  # past the deadline, which this member ignores
            return run(request, measure, None, loop_timeout)

        return execute

    device = PartitionedDevice([_with_prepared(load_device("partial-float"), slow)])
    status, pm = device.prepare_model(mixed_model())
    rb = build_request(mixed_model(), MIXED_INPUTS)
    deadline = time.monotonic_ns() + 50_000_000
    assert pm.execute_synchronously(rb.request, deadline=deadline)[0] == E.MISSED_DEADLINE_TRANSIENT
    assert "deadline passed at step 1" in device.last_error


def test_preparing_after_the_deadline_prepares_no_step():
    import time

    device = partitioned("partial-float", "partial-quant")
    deadline = time.monotonic_ns() - 1
    assert device.prepare_model(mixed_model(), deadline=deadline) == (
        E.MISSED_DEADLINE_PERSISTENT,
        None,
    )
    assert device.last_error == "deadline already passed"


def test_an_operation_the_fallback_declines_and_no_member_runs_fails_preparation():
    device = PartitionedDevice([], fallback=load_device("partial-quant"))
    assert device.prepare_model(three_relus()) == (E.GENERAL_FAILURE, None)
    assert "operation 0 (RELU) is supported by no device" in device.last_error


def test_capabilities_choose_between_members():
    """Both drivers support the float ADD; the one reporting it faster gets it."""
    model = mixed_model()
    status, plan = partitioned("partial-minimal", "partial-float").plan(model)
    assert status == E.NONE
    names = [plan.device_names[d] for d in plan.assignment]
    assert names[0] == "partial-minimal"  # equal figures: the earlier member
    slow = PartialDevice("slow-float", load_device("partial-float").rule)
    slow._partial_capabilities = ReferenceDevice().get_capabilities()[1]  # CPU speed
    device = PartitionedDevice([slow, load_device("partial-minimal")])
    status, plan = device.plan(model)
    assert [device.device_names[d] for d in plan.assignment][:1] == ["partial-minimal"]
    assert [device.device_names[d] for d in plan.assignment][4] == "slow-float"


def _caps(tensor, relaxed, if_, while_=(1.0, 1.0)) -> Capabilities:
    """Capabilities with the given (exec_time, power_usage) figures."""
    return Capabilities(
        relaxed_float32_to_float16_performance_tensor=PerformanceInfo(*relaxed),
        operand_performance=(
            OperandPerformance(OperandType.TENSOR_FLOAT32, PerformanceInfo(*tensor)),
        ),
        if_performance=PerformanceInfo(*if_),
        while_performance=PerformanceInfo(*while_),
    )


def test_assignment_reads_the_figure_the_operation_and_preference_call_for():
    # Member 0 is faster on float32 tensors, member 1 uses less power; member 1 is faster
    # on relaxed tensors and on IF (and, as a decoy, slower on WHILE).
    fast = _caps(tensor=(0.5, 4.0), relaxed=(4.0, 4.0), if_=(4.0, 4.0))
    frugal = _caps(tensor=(2.0, 0.25), relaxed=(0.5, 4.0), if_=(0.5, 4.0), while_=(9.0, 9.0))
    m = ModelBuilder()
    x = m.add_input(OperandType.TENSOR_FLOAT32, (2,))
    y = m.add_output(OperandType.TENSOR_FLOAT32, (2,))
    m.add_operation(OperationType.ADD, [x, x, m.add_scalar(OperandType.INT32, 0)], [y])
    add = m.build()

    def assigned(model, **kw):
        n = len(model.main.operations)
        return assign_devices(model, [[True] * n] * 2, [fast, frugal], has_fallback=False, **kw)

    assert assigned(add) == [0]
    assert assigned(add, preference=ExecutionPreference.LOW_POWER) == [1]
    relaxed = dataclasses.replace(add, relax_computation_float32_to_float16=True)
    assert assigned(relaxed) == [1]
    assert assigned(if_model()) == [1, 0]  # the IF, then a float32 SUB


# --- partitioned execution equals the whole model ------------------------------------------


@pytest.mark.parametrize(
    "members",
    [
        ("partial-float", "partial-quant"),
        ("partial-quant",),
        ("partial-minimal",),
        ("partial-minimal", "partial-quant"),
        ("reference-1.0", "reference-1.1", "reference-1.2"),
    ],
)
@pytest.mark.parametrize(
    "model_factory, inputs",
    [
        (mixed_model, MIXED_INPUTS),
        (conv_chain_model, conv_inputs()),
        (dynamic_model, [np.linspace(-3, 3, 400, dtype=np.float32).reshape(20, 20)]),
        (lambda: if_model(Op.MUL), if_inputs(True)),
        (lambda: if_model(Op.MUL), if_inputs(False)),
    ],
)
def test_partitioned_equals_whole_model(members, model_factory, inputs):
    model = model_factory()
    device = partitioned(*members)
    assert_same_as_whole(device, model, inputs)


def test_mixed_model_really_is_split_and_every_member_runs():
    device = partitioned("partial-float", "partial-quant")
    status, pm = device.prepare_model(mixed_model())
    assert status == E.NONE
    used = {pm.plan.device_names[s.device] for s in pm.plan.steps}
    assert used == {"partial-float", "partial-quant", "reference"}
    assert len(pm.plan.steps) == 5


def test_control_flow_goes_whole_to_one_driver():
    device = partitioned("partial-float")
    status, plan = device.plan(if_model(Op.MUL))
    assert status == E.NONE and len(plan.steps) == 1
    step = plan.steps[0]
    assert plan.device_names[step.device] == "partial-float"
    assert len(step.model.referenced) == 2  # both branches travel with the IF
    status, plan = partitioned("partial-minimal").plan(if_model(Op.MUL))
    assert [plan.device_names[d] for d in plan.assignment] == ["reference", "reference"]


def test_dynamic_intermediates_are_resized_from_reported_shapes():
    device = partitioned("partial-float", "partial-quant")
    model = dynamic_model(20)
    status, pm = device.prepare_model(model)
    inputs = [np.full((20, 20), 0.5, np.float32)]
    rb = build_request(model, inputs)
    status, shapes, _ = pm.execute_synchronously(rb.request)
    assert status == E.NONE and shapes[0].dimensions == (20, 20)
    # The first run learnt the sizes: later runs allocate them up front.
    assert pm._size_hints[model.main.operations[0].outputs[0]] == 20 * 20 * 4
    assert_same_as_whole(device, model, inputs)


def test_output_insufficient_size_reports_every_shape_like_the_whole_model():
    model = mixed_model()
    small = [16, 4]  # the RELU output (unspecified dims) gets 4 bytes for 16
    want = outputs_of(ReferenceDevice(), model, MIXED_INPUTS, output_sizes=small)
    got = outputs_of(
        partitioned("partial-float", "partial-quant"), model, MIXED_INPUTS, output_sizes=small
    )
    assert want[0] == got[0] == E.OUTPUT_INSUFFICIENT_SIZE
    assert got[1] == want[1]
    assert [s.is_sufficient for s in got[1]] == [True, False]


def test_a_model_output_read_by_a_later_step_can_be_too_small():
    """Op 0's sum is read by later steps; as a model output too small for it, it is
    redirected to harness memory so the rest still runs, and reported insufficient."""
    b = ModelBuilder()
    x = b.add_input(F32, (4,))
    s = b.add_output(F32, (4,))
    b.add_operation(Op.ADD, [x, x, none_act(b)], [s])
    q = b.add_operand(Q8, (4,), scale=0.5, zero_point=0)
    b.add_operation(Op.QUANTIZE, [s], [q])
    out = b.add_output(Q8, (4,), scale=0.5, zero_point=0)
    b.add_operation(Op.ADD, [q, q, none_act(b)], [out])
    model = b.build()
    inputs = [np.array([1, 2, 3, 4], np.float32)]
    want = outputs_of(ReferenceDevice(), model, inputs, output_sizes=[8, 4])
    got = outputs_of(
        partitioned("partial-float", "partial-quant"), model, inputs, output_sizes=[8, 4]
    )
    assert want[0] == got[0] == E.OUTPUT_INSUFFICIENT_SIZE
    # Every shape is reported, the later output's too (its contents are undefined on
    # OUTPUT_INSUFFICIENT_SIZE, as the HAL says).
    assert got[1] == want[1] and got[1][1].is_sufficient


def test_a_zero_sized_boundary_runs_the_whole_model_on_the_fallback():
    model = zero_boxes_model()
    device = partitioned("partial-minimal")
    status, pm = device.prepare_model(model)
    assert status == E.NONE and len(pm.plan.steps) == 2  # NMS on the reference, ADD on minimal
    want = outputs_of(ReferenceDevice(), model, zero_boxes_inputs())
    assert want[0] == E.NONE and want[1][3].dimensions == (0, 4)
    rb = build_request(model, zero_boxes_inputs())
    got = pm.execute_synchronously(rb.request)
    assert got[0] == E.NONE and got[1] == want[1]
    assert pm.full_fallbacks == 1
    without = partitioned("partial-minimal", fallback=None)
    assert without.prepare_model(model)[0] == E.GENERAL_FAILURE  # NMS: nobody runs it


def test_every_execution_path_gives_the_same_outputs():
    model = mixed_model()
    device = partitioned("partial-float", "partial-quant")
    status, pm = device.prepare_model(model)
    want = outputs_of(ReferenceDevice(), model, MIXED_INPUTS)[2]

    rb = build_request(model, MIXED_INPUTS)
    cb = CollectingCallback()
    assert pm.execute(rb.request, 0, None, None, cb) == E.NONE
    assert cb.wait(10)[0] == E.NONE
    assert [rb.output_bytes(k) for k in range(2)] == want

    rb = build_request(model, MIXED_INPUTS, output_dims=[None, (2, 2)])
    fence = SyncFence()
    status, done, info = pm.execute_fenced(rb.request, [fence])
    assert status == E.NONE and not done.is_signalled
    fence.signal()
    assert done.wait(10) == E.NONE and info.get_execution_info()[0] == E.NONE
    assert [rb.output_bytes(k) for k in range(2)] == want

    failed = SyncFence()
    status, done, info = pm.execute_fenced(
        build_request(model, MIXED_INPUTS, output_dims=[None, (2, 2)]).request, [failed]
    )
    failed.signal(error=True)
    assert done.wait(10) == E.GENERAL_FAILURE

    rb = build_request(model, MIXED_INPUTS)
    status, burst = pm.configure_execution_burst()
    assert burst.execute(rb.request)[0] == E.NONE
    assert [rb.output_bytes(k) for k in range(2)] == want


def test_timing_adds_up_the_steps():
    model = mixed_model()
    status, pm = partitioned("partial-float", "partial-quant").prepare_model(model)
    rb = build_request(model, MIXED_INPUTS)
    status, _, timing = pm.execute_synchronously(rb.request, measure=1)
    assert status == E.NONE
    assert 0 < timing.time_on_device <= timing.time_in_driver < 10**7


def test_a_failing_step_fails_the_execution_and_names_it():
    class Failing(PartialDevice):
        def prepare_model(self, model, *args, **kw):
            status, pm = super().prepare_model(model, *args, **kw)
            pm.execute_synchronously = lambda *a, **k: (E.GENERAL_FAILURE, [], None)
            return status, pm

    quant = Failing("broken-quant", load_device("partial-quant").rule)
    device = PartitionedDevice([load_device("partial-float"), quant])
    status, pm = device.prepare_model(mixed_model())
    rb = build_request(mixed_model(), MIXED_INPUTS)
    assert pm.execute_synchronously(rb.request)[0] == E.GENERAL_FAILURE
    assert "step 2 on broken-quant" in device.last_error


@pytest.mark.parametrize("name", ["partial-float", "partitioned:partial-float,partial-quant"])
def test_shared_branches_are_checked_once_not_once_per_path(name):
    # 30 nested IFs whose two branches share the next subgraph: 2**30 paths. Following
    # each (as the partial drivers did) took 28 s at 24 levels, and recursion ended in a
    # RecursionError past a few hundred.
    import time

    from tests.test_device import nested_if_model

    for levels, supported in ((30, True), (3000, False)):
        started = time.monotonic()
        status, flags = load_device(name).get_supported_operations(nested_if_model(levels))
        assert (status, flags) == (E.NONE, [supported])
        assert time.monotonic() - started < 5


def test_a_member_that_raises_fails_a_launched_execution_instead_of_losing_it():
    # The launch returned NONE before the step ran: its callback and fence must still
    # report (GENERAL_FAILURE), or the caller waits forever.
    from tests.drivers import TRIGGER, raising

    model = mixed_model()
    device = PartitionedDevice([raising()])
    status, pm = device.prepare_model(model)
    assert status == E.NONE
    feeds = [np.full((2, 2), TRIGGER, np.float32), MIXED_INPUTS[1]]
    cb = CollectingCallback()
    assert pm.execute(build_request(model, feeds).request, 0, None, None, cb) == E.NONE
    assert cb.wait(10)[0] == E.GENERAL_FAILURE
    assert "a deliberate driver bug" in device.last_error
    rb = build_request(model, feeds, output_dims=[None, (2, 2)])
    status, done, info = pm.execute_fenced(rb.request, [])
    assert status == E.NONE
    assert done.wait(10) == E.GENERAL_FAILURE
    assert info.get_execution_info()[0] == E.GENERAL_FAILURE


def test_supported_operations_and_preparation_without_fallback():
    model = mixed_model()
    device = partitioned("partial-float", "partial-quant", fallback=None)
    assert device.get_supported_operations(model) == (
        E.NONE,
        [True, False, True, False, True, True],
    )
    assert device.prepare_model(model)[0] == E.GENERAL_FAILURE
    assert "operation 1 (QUANTIZE)" in device.last_error
    with_fallback = partitioned("partial-float", "partial-quant")
    assert with_fallback.get_supported_operations(model) == (E.NONE, [True] * 6)


def test_invalid_models_and_requests_are_invalid_argument():
    model = mixed_model()
    device = partitioned("partial-float", "partial-quant")
    from dataclasses import replace

    bad = replace(model, main=replace(model.main, operations=()))
    assert device.get_supported_operations(bad)[0] == E.INVALID_ARGUMENT
    assert device.prepare_model(bad)[0] == E.INVALID_ARGUMENT
    status, pm = device.prepare_model(model)
    rb = build_request(model, MIXED_INPUTS)
    short = replace(rb.request, inputs=rb.request.inputs[:1])
    assert pm.execute_synchronously(short)[0] == E.INVALID_ARGUMENT
    assert device.prepare_model(model, priority=7)[0] == E.INVALID_ARGUMENT


def test_priority_and_deadline_reach_only_1_3_members():
    import time

    device = partitioned("reference-1.0", "partial-quant")
    model = mixed_model()
    future = time.monotonic_ns() + 60 * 10**9
    status, pm = device.prepare_model(model, priority=Priority.HIGH, deadline=future)
    assert status == E.NONE, device.last_error
    rb = build_request(model, MIXED_INPUTS)
    assert pm.execute_synchronously(rb.request, deadline=future)[0] == E.NONE
    assert pm.execute_synchronously(rb.request, deadline=1)[0] == E.MISSED_DEADLINE_PERSISTENT


def test_feature_levels_take_what_their_version_expresses():
    """Android's synthetic 1.0/1.1/1.2 devices: each operation goes to the first level
    that can express it; newer ones to the reference."""
    model = mixed_model()  # QUANTIZE is 1.2 (the others 1.0); RELU's output dims are unknown
    device = partitioned("reference-1.0", "reference-1.2")
    status, plan = device.plan(model)
    names = [plan.device_names[d] for d in plan.assignment]
    assert names == [
        "reference-1.0",
        "reference-1.2",
        "reference-1.0",
        "reference-1.0",
        "reference-1.0",
        "reference-1.2",  # a 1.0 driver cannot produce an output of unknown shape
    ]
    assert_same_as_whole(device, model, MIXED_INPUTS)


def test_execute_partitioned_and_the_driver_name():
    outs = execute_partitioned(mixed_model(), MIXED_INPUTS, [load_device("partial-quant")])
    ref = outputs_of(ReferenceDevice(), mixed_model(), MIXED_INPUTS)
    assert outs[0].tobytes() == ref[2][0] and outs[1].shape == (2, 2)
    device = load_device("partitioned:partial-float, partial-quant")
    assert isinstance(device, PartitionedDevice)
    assert device.device_names == ("partial-float", "partial-quant", "reference")
    assert device.version == HalVersion.V1_3
    with pytest.raises(DriverLoadError, match="unknown driver"):
        load_device("partitioned:partial-float,no-such-driver")
    with pytest.raises(DriverLoadError, match="comma-separated"):
        load_device("partitioned:partial-float,,")


# --- random graphs -------------------------------------------------------------------------


COMBINATIONS = [
    ("partial-float", "partial-quant"),
    ("partial-minimal",),
    ("reference-1.0", "reference-1.1", "reference-1.2"),
    ("partial-quant", "partial-minimal", "reference-1.1"),
]
_DEVICES: dict[tuple[str, ...], PartitionedDevice] = {}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), combo=st.sampled_from(COMBINATIONS))
def test_partitioned_equals_whole_on_generated_graphs(seed, combo):
    from randomgraph.generator import generate

    graph = generate(seed, "small")
    model = graph.model
    reference = ReferenceDevice()
    status, pm = reference.prepare_model(model)
    assert status == E.NONE
    rb = build_request(model, graph.inputs)
    want = pm.execute_synchronously(rb.request)
    device = _DEVICES.setdefault(combo, partitioned(*combo))
    status, ppm = device.prepare_model(model)
    assert status == E.NONE, device.last_error
    rb2 = build_request(model, graph.inputs)
    got = ppm.execute_synchronously(rb2.request)
    assert got[0] == want[0], device.last_error
    if want[0] == E.NONE:
        assert got[1] == want[1]
        for k in range(len(model.main.output_indexes)):
            assert rb2.output_bytes(k) == rb.output_bytes(k), (k, ppm.plan.describe())


@pytest.mark.parametrize(
    "kw",
    [
        {"preference": -1},
        {"priority": True},
        {"priority": 5},
        {"deadline": "soon"},
        {"deadline": 2**70},
    ],
    ids=["preference", "bool-priority", "priority", "str-deadline", "huge-deadline"],
)
def test_partitioned_prepare_rejects_bad_options_with_a_status(kw):
    b = ModelBuilder()
    x, y = b.add_input(T.TENSOR_FLOAT32, (2,)), b.add_input(T.TENSOR_FLOAT32, (2,))
    b.add_operation(
        OperationType.ADD, [x, y, b.add_scalar(T.INT32, 0)], [b.add_output(T.TENSOR_FLOAT32, (2,))]
    )
    device = load_device("partitioned:partial-float")
    status, prepared = device.prepare_model(b.build(), **kw)
    assert status == ErrorStatus.INVALID_ARGUMENT and prepared is None
