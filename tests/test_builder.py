"""The model/request builder (driver/builder.py) and the test helpers on top of it
(driver/testing.py). Most tests build their models with these; a helper that silently
dropped a parameter, or a comparison helper that passed too much, would make them
vacuous, so here each is held to exactly what it promises."""

from __future__ import annotations

import numpy as np
import pytest

from driver.builder import ModelBuilder, build_request
from driver.hal.types import OperandLifeTime as L
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.hal.types import SymmPerChannelQuantParams
from driver.testing import (
    EXTREME_SCALARS,
    assert_example,
    assert_rejected,
    example,
    output,
    scalar,
    single_op_model,
    tensor,
)

F32 = T.TENSOR_FLOAT32

# --- ModelBuilder -------------------------------------------------------------------------


def test_scales_are_rounded_to_float32_as_the_hal_carries_them():
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_QUANT8_ASYMM, (2,), scale=0.1, zero_point=3)
    w = b.add_operand(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
        (2, 1),
        channel_quant=SymmPerChannelQuantParams(0, (0.1, 0.3)),
    )
    operands = b.build().main.operands
    assert operands[x].scale == float(np.float32(0.1)) != 0.1
    assert operands[x].zero_point == 3
    params = operands[w].extra_params
    assert params.channel_dim == 0
    assert params.scales == (float(np.float32(0.1)), float(np.float32(0.3)))


def test_identifying_inputs_and_outputs_makes_the_former_ones_temporaries():
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    y = b.add_input(F32, (2,))
    z = b.add_output(F32, (2,))
    w = b.add_output(F32, (2,))
    b.identify_inputs_and_outputs([y], [w])
    main = b.build().main
    assert (main.input_indexes, main.output_indexes) == ((y,), (w,))
    lifetimes = [main.operands[i].lifetime for i in (x, y, z, w)]
    assert lifetimes == [
        L.TEMPORARY_VARIABLE,
        L.SUBGRAPH_INPUT,
        L.TEMPORARY_VARIABLE,
        L.SUBGRAPH_OUTPUT,
    ]


# --- build_request --------------------------------------------------------------------------


def _two_inputs_two_outputs():
    b = ModelBuilder()
    known = b.add_input(F32, (3,))
    unknown = b.add_input(F32, (0, 2))
    act = b.add_scalar(T.INT32, 0)
    small = b.add_output(F32, (3,))
    other = b.add_output(T.TENSOR_INT32, (2,))
    b.add_operation(O.ADD, [known, known, act], [small])
    b.add_operation(O.ARGMAX, [unknown, b.add_scalar(T.INT32, 0)], [other])
    return b.build()


def test_request_input_dims_are_the_arrays_shape_only_where_the_model_leaves_them_open():
    model = _two_inputs_two_outputs()
    inputs = [np.ones(3, np.float32), np.ones((5, 2), np.float32)]
    request = build_request(model, inputs).request
    assert [a.dimensions for a in request.inputs] == [(), (5, 2)]
    asked = build_request(model, inputs, input_dims=[None, (5, 0)]).request
    assert [a.dimensions for a in asked.inputs] == [(), (5, 0)]


def test_request_outputs_lie_side_by_side_in_8_byte_aligned_slots():
    model = _two_inputs_two_outputs()
    bundle = build_request(model, [np.ones(3, np.float32), np.ones((5, 2), np.float32)])
    locations = [
        (a.location.pool_index, a.location.offset, a.location.length)
        for a in bundle.request.outputs
    ]
    assert locations == [(1, 0, 12), (1, 16, 8)]
    assert bundle.output_pool.size == 24


# --- the comparison helpers -------------------------------------------------------------------


def _add_example(want, *, type=F32, **kw):
    scale = 0.5 if type != F32 else 0.0
    ins = [
        tensor(type, [1, 2], scale=scale),
        tensor(type, [3, 4], scale=scale),
        scalar(T.INT32, 0),
    ]
    return example("add", O.ADD, ins, [output(type, (2,), scale=scale)], [want], **kw)


@pytest.mark.parametrize(
    "want, type, kw",
    [
        ([4, 6], F32, {}),
        ([4 + 5e-6, 6], F32, {}),
        ([4, 6], T.TENSOR_QUANT8_ASYMM, {}),
        ([5, 6], T.TENSOR_QUANT8_ASYMM, {"atol": 1}),
        ([4.01, 6], F32, {"atol": 0.02}),
    ],
)
def test_assert_example_accepts_outputs_within_its_tolerance(want, type, kw):
    assert_example(_add_example(want, type=type, **kw))


@pytest.mark.parametrize(
    "want, type",
    [
        ([4.001, 6], F32),  # float outputs: within 1e-5 (absolute and relative)
        ([5, 6], T.TENSOR_QUANT8_ASYMM),  # quantized outputs: exactly
    ],
)
def test_assert_example_refuses_outputs_beyond_its_tolerance(want, type):
    with pytest.raises(AssertionError):
        assert_example(_add_example(want, type=type))


@pytest.mark.parametrize("type", [F32, T.TENSOR_QUANT8_ASYMM])
def test_assert_example_compares_shapes_which_numpy_would_broadcast(type):
    # A scalar expected value broadcasts against the [1]-shaped output.
    scale = 0.5 if type != F32 else 0.0
    ins = [tensor(type, [1], scale=scale), tensor(type, [3], scale=scale), scalar(T.INT32, 0)]
    one = example("add", O.ADD, ins, [output(type, (1,), scale=scale)], [[4]])
    assert_example(one)
    scalar_want = example("add", O.ADD, ins, [output(type, (1,), scale=scale)], [4])
    with pytest.raises(AssertionError, match="shape"):
        assert_example(scalar_want)


def test_assert_rejected_checks_the_message_and_deferrability():
    # A fused activation out of range is a rejection Android 11 leaves to execution.
    model, _ = single_op_model(
        O.ADD,
        [tensor(F32, [1.0]), tensor(F32, [2.0]), scalar(T.INT32, 9)],
        [output(F32, (1,))],
    )
    assert_rejected(model, deferrable=True, match="activation")
    with pytest.raises(AssertionError, match="deferrable is True"):
        assert_rejected(model, deferrable=False, match="activation")
    with pytest.raises(AssertionError):
        assert_rejected(model, deferrable=True, match="no such message")


@pytest.mark.parametrize("type", [T.INT32, T.UINT32])
def test_extreme_scalars_include_the_limits_of_the_type(type):
    limits = np.iinfo(np.int32 if type == T.INT32 else np.uint32)
    assert {int(limits.min), int(limits.max), 0, 1} <= set(EXTREME_SCALARS[type])


def test_a_boolean_byte_is_true_when_it_is_not_zero():
    from driver.operations.base import array_from_bytes

    values = array_from_bytes(T.TENSOR_BOOL8, (4,), bytes([0, 1, 2, 255]))
    assert values.tolist() == [False, True, True, True]
