"""Kernel, shape-inference and validation tests for the shape family
(RESHAPE ... CHANNEL_SHUFFLE). Expected values are worked out by hand in the comments, or
by an element-by-element transliteration of Android's loops."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import (
    assert_example,
    assert_rejected,
    omitted,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
)
from driver.validation import validate_model
from tests.operations.examples_shape import assert_signed_twin, quant8_examples

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
V = HalVersion


def f32(values, dims=None, **kw):
    return tensor(F32, np.asarray(values, dtype=np.float32), dims, **kw)


def i32(values, **kw):
    kw.setdefault("const", True)
    return tensor(I32, values, **kw)


def i(v):
    return scalar(T.INT32, v)


def run1(op, inputs, out_type=F32, dims=(), **kw):
    (result,) = run_op(op, inputs, [output(out_type, dims, **kw)])
    return result


def rejects(op, inputs, outputs, match: str, version=V.V1_3):
    """Validation of the one-operation model fails with INVALID_ARGUMENT naming ``match``."""
    model, _ = single_op_model(op, inputs, outputs)
    with pytest.raises(HalError) as err:
        validate_model(model, version)
    assert err.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(match, err.value.message), err.value.message


def accepts(op, inputs, outputs, version):
    model, _ = single_op_model(op, inputs, outputs)
    validate_model(model, version)


def fails_at_run_time(op, inputs, outputs, match: str):
    with pytest.raises(HalError) as err:
        run_op(op, inputs, outputs)
    assert err.value.status == ErrorStatus.GENERAL_FAILURE, err.value
    assert re.search(match, err.value.message), err.value.message


X23 = np.arange(1, 7, dtype=np.float32).reshape(2, 3)  # [[1, 2, 3], [4, 5, 6]]
X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# --- RESHAPE -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, shape",
    [([3, -1], (3, 2)), ([-1], (6,)), ([1, 6, 1], (1, 6, 1)), ([-1, 1, 2], (3, 1, 2))],
)
def test_reshape_infers_minus_one(target, shape):
    got = run1(O.RESHAPE, [f32(X23), i32(target)])
    assert got.shape == shape
    np.testing.assert_array_equal(got.ravel(), [1, 2, 3, 4, 5, 6])


def test_reshape_shape_given_at_run_time():
    got = run1(O.RESHAPE, [f32(X23), i32([-1, 3], const=False)])
    np.testing.assert_array_equal(got, [[1, 2, 3], [4, 5, 6]])


def test_reshape_zero_sized_input():
    got = run1(O.RESHAPE, [f32(np.zeros((0, 4))), i32([2, 0, 2])])
    assert got.shape == (2, 0, 2)


@pytest.mark.parametrize(
    "target, match",
    [
        ([-1, -1], "at most one dimension"),
        ([4, 2], "has 8 elements"),
        ([-1, 4], "cannot hold"),
        ([-2, -3], "non-negative or -1"),
        ([0, -1], "cannot hold"),  # no -1 makes 0 elements hold 6
    ],
)
def test_reshape_rejects_bad_shapes(target, match):
    rejects(O.RESHAPE, [f32(X23), i32(target)], [output(F32)], match)


def test_reshape_rejects_rank_5_and_requantization():
    rejects(O.RESHAPE, [f32(np.zeros((1,) * 5)), i32([1])], [output(F32)], "rank 0..4")
    q = tensor(Q8, [1, 2], scale=0.5, zero_point=3)
    rejects(O.RESHAPE, [q, i32([2])], [output(Q8, (2,), scale=0.5, zero_point=4)], "zero point")


# --- SQUEEZE / EXPAND_DIMS -------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, dims, expected",
    [
        ((1, 2, 1, 3), None, (2, 3)),  # omitted: every size-1 dimension
        ((1, 2, 1, 3), [2], (1, 2, 3)),
        ((1, 2, 1, 3), [-4, -2], (2, 3)),
        ((1, 2, 1, 3), [0, 0], (2, 1, 3)),  # repeated dims squeeze once
        ((1, 1, 1), None, (1,)),  # everything squeezed leaves [1]
        ((2, 3), None, (2, 3)),
    ],
)
def test_squeeze(shape, dims, expected):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    arg = omitted(I32) if dims is None else i32(dims)
    got = run1(O.SQUEEZE, [f32(x), arg])
    assert got.shape == expected
    np.testing.assert_array_equal(got.ravel(), x.ravel())


def test_squeeze_empty_dims_list_squeezes_nothing():
    # A present but empty list names no dimension (Android squeezes only listed ones).
    x = np.ones((1, 2, 1), np.float32)
    got = run1(O.SQUEEZE, [f32(x), tensor(I32, np.zeros(0, np.int32))])
    assert got.shape == (1, 2, 1)


@pytest.mark.parametrize(
    "dims, match", [([1], "cannot squeeze dimension 1 of size 2"), ([3], "out of range")]
)
def test_squeeze_rejects(dims, match):
    rejects(O.SQUEEZE, [f32(np.ones((1, 2, 1))), i32(dims)], [output(F32)], match)


@pytest.mark.parametrize(
    "axis, expected",
    [(0, (1, 2, 3)), (1, (2, 1, 3)), (2, (2, 3, 1)), (-1, (2, 3, 1)), (-3, (1, 2, 3))],
)
def test_expand_dims(axis, expected):
    got = run1(O.EXPAND_DIMS, [f32(X23), i(axis)])
    assert got.shape == expected
    np.testing.assert_array_equal(got.ravel(), X23.ravel())


@pytest.mark.parametrize("axis", [3, -4])
def test_expand_dims_rejects_axis(axis):
    rejects(O.EXPAND_DIMS, [f32(X23), i(axis)], [output(F32)], "out of range for rank 3")


# --- TRANSPOSE -------------------------------------------------------------------------


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_transpose_every_permutation_of_rank_3(perm):
    got = run1(O.TRANSPOSE, [f32(X234), i32(list(perm))])
    assert got.shape == tuple(X234.shape[p] for p in perm)
    # out[idx] = in[idx moved back]: in index k along dim perm[d] is out index k along d.
    for idx in itertools.product(*(range(n) for n in got.shape)):
        src = [0, 0, 0]
        for d, p in enumerate(perm):
            src[p] = idx[d]
        assert got[idx] == X234[tuple(src)]


def test_transpose_omitted_perm_reverses():
    got = run1(O.TRANSPOSE, [f32(X234), omitted(I32)])
    assert got.shape == (4, 3, 2)
    assert got[3, 1, 0] == X234[0, 1, 3] == 7


@pytest.mark.parametrize(
    "perm, match",
    [
        ([0, 0, 1], "not a permutation"),
        ([1, 2, 3], "not a permutation"),
        ([1, 0], "has 2 entries"),
        ([0, 1, 2, 3], "has 4 entries"),
    ],
)
def test_transpose_rejects(perm, match):
    rejects(O.TRANSPOSE, [f32(X234), i32(perm)], [output(F32)], match)


def test_transpose_checks_a_run_time_permutation():
    fails_at_run_time(
        O.TRANSPOSE, [f32(X23), i32([1, 1], const=False)], [output(F32)], "not a permutation"
    )


# --- CONCATENATION -------------------------------------------------------------------


def test_concatenation_axes_and_zero_sized_inputs():
    a, b = np.ones((2, 1, 2), np.float32), np.full((2, 3, 2), 2, np.float32)
    got = run1(O.CONCATENATION, [f32(a), f32(b), f32(np.zeros((2, 0, 2))), i(1)])
    assert got.shape == (2, 4, 2)
    np.testing.assert_array_equal(got[:, 0], 1)
    np.testing.assert_array_equal(got[:, 1:], 2)
    got = run1(O.CONCATENATION, [f32(a), f32(a), f32(a), i(2)])
    assert got.shape == (2, 1, 6)


@pytest.mark.parametrize(
    "second, axis, match",
    [
        (np.ones((2, 2)), -1, "must be >= 0"),
        (np.ones((2, 2)), 2, "out of range"),
        (np.ones((3, 3)), 1, r"does not match input 0 \[2, 1\] outside axis 1"),
        (np.ones((2, 2, 1)), 1, "does not match"),
    ],
)
def test_concatenation_rejects(second, axis, match):
    rejects(O.CONCATENATION, [f32(np.ones((2, 1))), f32(second), i(axis)], [output(F32)], match)


def _concat_q8(a, qa, b, qb, qo, t=Q8):
    return run_op(
        O.CONCATENATION,
        [
            tensor(t, a, scale=qa[0], zero_point=qa[1]),
            tensor(t, b, scale=qb[0], zero_point=qb[1]),
            i(0),
        ],
        [output(t, (len(a) + len(b),), scale=qo[0], zero_point=qo[1])],
    )[0]


def test_concatenation_requantizes_with_round_half_away():
    # Input 1: scale 0.5, zero point 10 -> output scale 1.0, zero point 5:
    # q -> round((q - 10) * 0.5) + 5; 11 -> round(0.5) = 1 -> 6; 9 -> round(-0.5) = -1 -> 4
    # (half away from zero); 13 -> round(1.5) = 2 -> 7; 0 -> -5 -> 0; 255 -> 123 + 5 = 128.
    got = _concat_q8([5, 250], (1.0, 5), [11, 9, 13, 0, 255], (0.5, 10), (1.0, 5))
    np.testing.assert_array_equal(got, [5, 250, 6, 4, 7, 0, 128])
    # Saturation: scale 4 -> 1 multiplies by 4: (100 - 0) * 4 = 400 -> 255.
    got = _concat_q8([1], (1.0, 0), [100, 0], (4.0, 0), (1.0, 0))
    np.testing.assert_array_equal(got, [1, 255, 0])


def test_concatenation_mixed_quantization_needs_hal_1_2():
    args = [
        tensor(Q8, [1], scale=0.5, zero_point=0),
        tensor(Q8, [2], scale=1.0, zero_point=0),
        i(0),
    ]
    outs = [output(Q8, (2,), scale=0.5, zero_point=0)]
    rejects(O.CONCATENATION, args, outs, "needs HAL 1.2", version=V.V1_1)
    accepts(O.CONCATENATION, args, outs, V.V1_2)
    same = [tensor(Q8, [1], scale=0.5), tensor(Q8, [2], scale=0.5), i(0)]
    accepts(O.CONCATENATION, same, outs, V.V1_0)
    # A zero point of its own is mixed quantization too.
    shifted = [tensor(Q8, [1], scale=0.5), tensor(Q8, [2], scale=0.5, zero_point=3), i(0)]
    rejects(O.CONCATENATION, shifted, outs, "needs HAL 1.2", version=V.V1_1)


def _concat_reference(q, s_in, z_in, s_out, z_out):
    """tflite ConcatenationWithScaling, one element at a time in float32."""
    if np.float32(s_in) == np.float32(s_out) and z_in == z_out:
        return int(q)
    scale = np.float32(s_in) * (np.float32(1) / np.float32(s_out))
    bias = np.float32(-z_in) * scale
    v = float(np.float32(np.float32(q) * scale) + bias)
    r = int(np.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)  # std::round
    return min(255, max(0, r + z_out))


@given(
    st.lists(st.integers(0, 255), min_size=1, max_size=8),
    st.floats(0.0625, 4.0, width=32),
    st.integers(0, 255),
    st.floats(0.0625, 4.0, width=32),
    st.integers(0, 255),
)
def test_concatenation_requantization_matches_tflite_and_signed(values, s_in, z_in, s_out, z_out):
    got = _concat_q8([z_out], (s_out, z_out), values, (s_in, z_in), (s_out, z_out))
    want = [_concat_reference(q, s_in, z_in, s_out, z_out) for q in values]
    assert got[0] == z_out
    assert got[1:].tolist() == want
    signed = _concat_q8(
        [z_out - 128],
        (s_out, z_out - 128),
        np.array(values) - 128,
        (s_in, z_in - 128),
        (s_out, z_out - 128),
        t=Q8S,
    )
    np.testing.assert_array_equal(signed.astype(int), got.astype(int) - 128)


# --- SPLIT / SLICE -------------------------------------------------------------------


def test_split_three_ways_on_a_negative_axis():
    outs = run_op(O.SPLIT, [f32(X234), i(-1), i(2)], [output(F32)] * 2)
    np.testing.assert_array_equal(outs[0], X234[..., :2])
    np.testing.assert_array_equal(outs[1], X234[..., 2:])
    outs = run_op(O.SPLIT, [f32(X234), i(1), i(3)], [output(F32)] * 3)
    for k in range(3):
        np.testing.assert_array_equal(outs[k], X234[:, k : k + 1])


@pytest.mark.parametrize(
    "axis, n, outs, match",
    [
        (0, 3, 3, "does not split into 3"),
        (2, 3, 3, "does not split into 3"),  # 4 elements are not 3 equal parts
        (0, 2, 3, "differs from the number of outputs"),
        (3, 1, 1, "out of range"),
    ],
)
def test_split_rejects(axis, n, outs, match):
    rejects(O.SPLIT, [f32(X234), i(axis), i(n)], [output(F32)] * outs, match)


@pytest.mark.parametrize(
    "begin, size, expected",
    [
        ([0, 1], [-1, 2], [[2, 3], [5, 6]]),
        ([1, 0], [1, -1], [[4, 5, 6]]),
        ([0, 3], [2, 0], np.zeros((2, 0))),  # zero-sized result
        ([2, 3], [-1, -1], np.zeros((0, 0))),
    ],
)
def test_slice(begin, size, expected):
    got = run1(O.SLICE, [f32(X23), i32(begin), i32(size)])
    np.testing.assert_array_equal(got, np.asarray(expected, np.float32))


@pytest.mark.parametrize(
    "begin, size, match",
    [
        ([0, 4], [1, -1], "begin 4"),
        ([-1, 0], [1, 1], "begin -1"),
        ([1, 1], [2, 1], "size 2"),
        ([0, 0], [1, -2], "size -2"),
        ([0], [1], "2 elements"),
    ],
)
def test_slice_rejects(begin, size, match):
    rejects(O.SLICE, [f32(X23), i32(begin), i32(size)], [output(F32)], match)


@pytest.mark.parametrize(
    "shape, begin, size",
    [
        ((2, 1, 3, 1, 2), [1, 0, 1, 0, 0], [1, -1, 2, 1, 1]),
        ((1, 2, 1, 2, 1, 2), [0, 1, 0, 0, 0, 1], [-1, 1, 1, 2, 1, 1]),
    ],
)
def test_slice_takes_any_rank(shape, begin, size):
    # SLICE's documented rank is "from 1"; Android's Slice.cpp validate has no rank limit
    # and its evalGeneric walks an n-D index.
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    args = [f32(x), i32(begin), i32(size)]
    accepts(O.SLICE, args, [output(F32)], V.V1_2)
    want = x[tuple(slice(b, dim if s == -1 else b + s) for b, s, dim in zip(begin, size, shape))]
    np.testing.assert_array_equal(run1(O.SLICE, args), want)


# --- STRIDED_SLICE ---------------------------------------------------------------------

X10 = np.arange(10, dtype=np.float32)


@pytest.mark.parametrize(
    "begin, end, stride, masks, expected",
    [
        (2, 7, 2, (0, 0, 0), [2, 4, 6]),
        (-3, 10, 1, (0, 0, 0), [7, 8, 9]),  # negative begin counts from the end
        (-20, 3, 1, (0, 0, 0), [0, 1, 2]),  # clamped to the start
        (8, 100, 1, (0, 0, 0), [8, 9]),  # clamped to the end
        (7, 2, -2, (0, 0, 0), [7, 5, 3]),  # negative stride
        (5, 0, -1, (1, 0, 0), [9, 8, 7, 6, 5, 4, 3, 2, 1]),  # begin mask: from the last
        (5, 0, -1, (0, 1, 0), [5, 4, 3, 2, 1, 0]),  # end mask: through the first
        (0, 0, -3, (1, 1, 0), [9, 6, 3, 0]),
        (-1, -11, -1, (0, 0, 0), list(range(9, -1, -1))),  # end before index 0
        (-10, -11, -1, (0, 0, 0), [0]),  # begin -10 is index 0, not before it
        (-11, -12, -1, (0, 0, 0), []),  # begin before index 0 clamps to -1: nothing
        (20, 0, -4, (0, 0, 0), [9, 5, 1]),  # begin past the end clamps to the last
        (3, 3, 1, (0, 0, 0), []),
        (7, 2, 1, (0, 0, 0), []),
        (4, 5, 1, (0, 0, 1), 4),  # shrink: the single element 4
        (-1, 10, 1, (0, 0, 1), 9),
        (-1, 0, 3, (0, 1, 1), 9),  # end mask: 9 to the end is one element too
    ],
)
def test_strided_slice_1d(begin, end, stride, masks, expected):
    got = run1(O.STRIDED_SLICE, [f32(X10), i32([begin]), i32([end]), i32([stride]), *map(i, masks)])
    # A fully shrunk result is [1] (Android's prepare never produces rank 0).
    want = np.asarray(expected, np.float32).reshape(-1 if np.ndim(expected) else 1)
    np.testing.assert_array_equal(got, want, strict=True)  # strict: the shapes too


def test_strided_slice_masks_per_dimension():
    # Rows 1..2 (begin mask on dim 1 = all columns reversed), dim 0 shrunk at index 1.
    x = X234
    got = run1(
        O.STRIDED_SLICE,
        [f32(x), i32([1, 0, 3]), i32([2, 0, 0]), i32([1, 1, -1]), i(0b010), i(0b010), i(0b001)],
    )
    np.testing.assert_array_equal(got, x[1, :, 3:0:-1])
    assert got.shape == (3, 3)


@pytest.mark.parametrize(
    "begin, end, stride, shrink, match",
    [
        (0, 3, 0, 0, "strides must be non-zero"),
        (2, 0, -1, 1, "stride must be > 0"),
        (0, 3, 1, 1, "select 3 elements"),
        (5, 10, 1, 1, "select 5 elements"),
        # Unlike TensorFlow, Android does not ignore the end of a shrunk dimension.
        (4, 0, 1, 1, "select 0 elements"),
    ],
)
def test_strided_slice_rejects(begin, end, stride, shrink, match):
    args = [f32(X10), i32([begin]), i32([end]), i32([stride]), i(0), i(0), i(shrink)]
    rejects(O.STRIDED_SLICE, args, [output(F32)], match)


def test_strided_slice_needs_one_stride_per_dimension():
    args = [f32(X10), i32([0]), i32([3]), i32([1, 1]), i(0), i(0), i(0)]
    rejects(O.STRIDED_SLICE, args, [output(F32)], "strides must have 1 elements")


# --- PAD / PAD_V2 --------------------------------------------------------------------


def test_pad_float_and_zero_sized():
    got = run1(O.PAD, [f32([[1, 2]]), i32([[0, 1], [2, 0]])])
    np.testing.assert_array_equal(got, [[0, 0, 1, 2], [0, 0, 0, 0]])
    got = run1(O.PAD, [f32(np.zeros((0, 2))), i32([[1, 1], [0, 0]])])
    np.testing.assert_array_equal(got, np.zeros((2, 2)))


def test_pad_quantized_pads_with_the_zero_point():
    got = run1(
        O.PAD,
        [tensor(Q8, [7], scale=0.5, zero_point=42), i32([[2, 1]])],
        Q8,
        (4,),
        scale=0.5,
        zero_point=42,
    )
    np.testing.assert_array_equal(got, [42, 42, 7, 42])


def test_pad_quant8_with_nonzero_zero_point_needs_hal_1_2():
    def args(zp):
        return [tensor(Q8, [7], scale=0.5, zero_point=zp), i32([[1, 1]])]

    def outs(zp):
        return [output(Q8, (3,), scale=0.5, zero_point=zp)]

    rejects(O.PAD, args(42), outs(42), "needs HAL 1.2", version=V.V1_1)
    accepts(O.PAD, args(42), outs(42), V.V1_2)
    accepts(O.PAD, args(0), outs(0), V.V1_1)
    rejects(
        O.PAD, [f32([1.0]), i32([[1, 0]])], [output(F32, (2,))], "needs HAL 1.1", version=V.V1_0
    )


@pytest.mark.parametrize(
    "paddings, match",
    [([[-1, 0], [0, 0]], "must be >= 0"), ([[1, 1]], r"shape \[2, 2\]"), ([1, 1], "shape")],
)
def test_pad_rejects(paddings, match):
    rejects(O.PAD, [f32(X23), i32(paddings)], [output(F32)], match)


def test_pad_v2_values():
    got = run1(O.PAD_V2, [f32([1]), i32([[1, 2]]), scalar(T.FLOAT32, -2.5)])
    np.testing.assert_array_equal(got, [-2.5, 1, -2.5, -2.5])
    got = run1(O.PAD_V2, [tensor(F16, [1]), i32([[1, 0]]), scalar(T.FLOAT16, 0.5)], F16)
    np.testing.assert_array_equal(got, np.float16([0.5, 1]))


@pytest.mark.parametrize(
    "t, value, stored", [(Q8, 9, 9), (Q8, 300, 44), (Q8, -1, 255), (Q8S, -5, -5), (Q8S, 200, -56)]
)
def test_pad_v2_quantized_value_is_the_low_byte(t, value, stored):
    # Android reads the INT32 pad value as a uint8_t/int8_t: its low byte (300 = 0x12C).
    got = run1(
        O.PAD_V2,
        [tensor(t, [3], scale=1.0, zero_point=0), i32([[1, 0]]), i(value)],
        t,
        (2,),
        scale=1.0,
    )
    np.testing.assert_array_equal(got.astype(int), [stored, 3])


# --- TILE / GATHER ---------------------------------------------------------------------


def test_tile():
    got = run1(O.TILE, [f32(X23), i32([2, 1])])
    np.testing.assert_array_equal(got, [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]])
    got = run1(O.TILE, [tensor(I32, [[1], [2]]), i32([1, 3])], I32)
    np.testing.assert_array_equal(got, [[1, 1, 1], [2, 2, 2]])
    assert run1(O.TILE, [f32(X23), i32([0, 2])]).shape == (0, 6)


@pytest.mark.parametrize("multiples, match", [([2], "2 elements"), ([1, -1], ">= 0")])
def test_tile_rejects(multiples, match):
    rejects(O.TILE, [f32(X23), i32(multiples)], [output(F32)], match)


def test_gather_axes_and_index_ranks():
    got = run1(O.GATHER, [f32(X234), i(1), i32([[2, 0], [1, 1]])])
    assert got.shape == (2, 2, 2, 4)
    np.testing.assert_array_equal(got[1, 0, 1], X234[1, 0])
    np.testing.assert_array_equal(got[0, 1, 0], X234[0, 1])
    got = run1(O.GATHER, [f32(X234), i(-1), i32([3])])
    np.testing.assert_array_equal(got[..., 0], X234[..., 3])


def test_gather_index_out_of_range():
    rejects(O.GATHER, [f32(X23), i(0), i32([0, 2])], [output(F32)], "index 2 is out of range")
    rejects(O.GATHER, [f32(X23), i(2), i32([0])], [output(F32)], "out of range for rank 2")
    fails_at_run_time(O.GATHER, [f32(X23), i(1), i32([-1], const=False)], [output(F32)], "index -1")


# --- FILL / RANK -----------------------------------------------------------------------


def test_fill_with_run_time_shape():
    got = run1(O.FILL, [i32([2, 1, 3], const=False), scalar(T.INT32, 4)], I32)
    np.testing.assert_array_equal(got, np.full((2, 1, 3), 4))
    got = run1(O.FILL, [i32([2]), scalar(T.FLOAT16, 1.5)], F16)
    assert got.dtype == np.float16 and got.tolist() == [1.5, 1.5]
    rejects(O.FILL, [i32([2, -1]), scalar(T.FLOAT32, 0.0)], [output(F32)], ">= 0")


def test_rank_of_run_time_tensors():
    for shape in [(3,), (1, 2), (2, 1, 1, 1, 2)]:
        got = run1(O.RANK, [f32(np.ones(shape))], T.INT32)
        assert got.dtype == np.int32 and got.shape == () and int(got) == len(shape)


# --- BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND / DEPTH_TO_SPACE / SPACE_TO_DEPTH ------------


def _batch_to_space_loops(x, bh, bw):
    """tflite BatchToSpaceND, element by element (NHWC)."""
    b, h, w, c = x.shape
    ob = b // (bh * bw)
    out = np.zeros((ob, h * bh, w * bw, c), x.dtype)
    for ib in range(b):
        n, spatial = ib % ob, ib // ob
        oh, ow = spatial // bw, spatial % bw
        for y, z in itertools.product(range(h), range(w)):
            out[n, y * bh + oh, z * bw + ow] = x[ib, y, z]
    return out


def _nchw(a):
    return np.ascontiguousarray(np.transpose(a, (0, 3, 1, 2)))


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("block", [(2, 2), (3, 1), (1, 2)])
def test_batch_to_space_against_loops(block, nchw):
    bh, bw = block
    x = np.arange(bh * bw * 2 * 2 * 3 * 2, dtype=np.float32).reshape(bh * bw * 2, 2, 3, 2)
    want = _batch_to_space_loops(x, bh, bw)
    layout = [scalar(T.BOOL, nchw)]
    got = run1(O.BATCH_TO_SPACE_ND, [f32(_nchw(x) if nchw else x), i32([bh, bw]), *layout])
    np.testing.assert_array_equal(got, _nchw(want) if nchw else want)


@pytest.mark.parametrize("nchw", [False, True])
def test_space_to_batch_pads_then_inverts_batch_to_space(nchw):
    x = np.arange(1, 2 * 3 * 3 * 2 + 1, dtype=np.float32).reshape(2, 3, 3, 2)
    # Padded to 4 x 6 (top 1, left 2, right 1), then 2 x 3 blocks.
    pads = [[1, 0], [2, 1]]
    padded = np.pad(x, [[0, 0], *pads, [0, 0]])
    got = run1(
        O.SPACE_TO_BATCH_ND,
        [f32(_nchw(x) if nchw else x), i32([2, 3]), i32(pads), scalar(T.BOOL, nchw)],
    )
    got = np.transpose(got, (0, 2, 3, 1)) if nchw else got
    assert got.shape == (12, 2, 2, 2)
    np.testing.assert_array_equal(_batch_to_space_loops(got, 2, 3), padded)


def test_space_to_batch_quantized_pads_with_zero_point():
    x = tensor(Q8, np.full((1, 1, 1, 1), 9), scale=1.0, zero_point=5)
    got = run1(
        O.SPACE_TO_BATCH_ND, [x, i32([2, 1]), i32([[1, 0], [0, 0]])], Q8, scale=1.0, zero_point=5
    )
    np.testing.assert_array_equal(got.ravel(), [5, 9])
    rejects(
        O.SPACE_TO_BATCH_ND,
        [x, i32([2, 1]), i32([[1, 0], [0, 0]])],
        [output(Q8, (2, 1, 1, 1), scale=1.0, zero_point=5)],
        "needs HAL 1.2",
        version=V.V1_1,
    )


@pytest.mark.parametrize(
    "op, args, outs",
    [
        # Mixed quantization (HAL 1.2) and a negative axis (left to execution).
        (
            O.CONCATENATION,
            [tensor(Q8, [1], scale=0.5), tensor(Q8, [2], scale=1.0), i(-1)],
            [output(Q8, (2,), scale=0.5)],
        ),
        # A non-zero quant8 zero point (HAL 1.2) and a negative padding (execution).
        (
            O.PAD,
            [tensor(Q8, [7, 8], scale=0.5, zero_point=3), i32([[0, -1]])],
            [output(Q8, (1,), scale=0.5, zero_point=3)],
        ),
        (
            O.SPACE_TO_BATCH_ND,
            [
                tensor(Q8, np.zeros((1, 2, 2, 1)), scale=0.5, zero_point=3),
                i32([0, 2]),
                i32([[0, 0], [0, 0]]),
            ],
            [output(Q8, (0, 2, 1, 1), scale=0.5, zero_point=3)],
        ),
    ],
    ids=["CONCATENATION", "PAD", "SPACE_TO_BATCH_ND"],
)
def test_a_version_rule_wins_over_a_rejection_left_to_execution(op, args, outs):
    # Android's validate checks the HAL version; the parameter values only its prepare()
    # does. Validating as HAL 1.1 must therefore fail on the version, not defer.
    model, _ = single_op_model(op, args, outs)
    assert_rejected(model, deferrable=False, match="needs HAL 1\\.2", version=V.V1_1)
    assert_rejected(model, deferrable=True, match="must be|>= ", version=V.V1_2)


def test_depth_to_space_and_back():
    # Depth (i * 2 + j) * 2 + d goes to row y * 2 + i, column x * 2 + j.
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 2, 8)
    got = run1(O.DEPTH_TO_SPACE, [f32(x), i(2)])
    assert got.shape == (1, 2, 4, 2)
    np.testing.assert_array_equal(got[0, 1, 3], x[0, 0, 1, 6:8])  # i = 1, j = 1, pixel 1
    np.testing.assert_array_equal(got[0, 0, 1], x[0, 0, 0, 2:4])  # i = 0, j = 1, pixel 0
    back = run1(O.SPACE_TO_DEPTH, [f32(got), i(2)])
    np.testing.assert_array_equal(back, x)
    got_nchw = run1(O.DEPTH_TO_SPACE, [f32(_nchw(x)), i(2), scalar(T.BOOL, True)])
    np.testing.assert_array_equal(got_nchw, _nchw(got))


@pytest.mark.parametrize(
    "op, x_shape, block, match",
    [
        (O.BATCH_TO_SPACE_ND, (3, 1, 1, 1), [2, 2], "not divisible"),
        (O.BATCH_TO_SPACE_ND, (2, 1, 1, 1), [2, 2], "not divisible"),  # by 2 * 2
        (O.BATCH_TO_SPACE_ND, (4, 1, 1, 1), [0, 2], ">= 1"),
        (O.BATCH_TO_SPACE_ND, (4, 1, 1), [2, 2], "rank 4"),
        (O.DEPTH_TO_SPACE, (1, 1, 1, 6), 2, "not divisible"),
        (O.DEPTH_TO_SPACE, (1, 1, 1, 4), 0, ">= 1"),
        (O.SPACE_TO_DEPTH, (1, 3, 2, 1), 2, "multiples of the block size"),
        (O.SPACE_TO_DEPTH, (1, 2, 3, 1), 2, "multiples of the block size"),
    ],
)
def test_block_operations_reject(op, x_shape, block, match):
    param = i32(block) if isinstance(block, list) else i(block)
    rejects(op, [f32(np.ones(x_shape)), param], [output(F32)], match)


def test_space_to_batch_rejects_indivisible_padding():
    args = [f32(np.ones((1, 3, 2, 1))), i32([2, 2]), i32([[0, 0], [0, 0]])]
    rejects(O.SPACE_TO_BATCH_ND, args, [output(F32)], "multiples of the block shape")
    args = [f32(np.ones((1, 2, 2, 1))), i32([2, 2]), i32([[0, 0], [0, 1]])]  # width 3
    rejects(O.SPACE_TO_BATCH_ND, args, [output(F32)], "multiples of the block shape")


def test_space_to_batch_paddings_are_2_by_2_even_before_the_input_shape_is_known():
    x = f32(np.ones((1, 2, 2, 1)), declared_dims=(0, 0, 0, 0))
    for paddings in ([[0, 0], [0, 0], [0, 0]], [[0, 0]]):
        rejects(O.SPACE_TO_BATCH_ND, [x, i32([1, 1]), i32(paddings)], [output(F32)], r"\[2, 2\]")


def test_nchw_layout_needs_hal_1_2():
    args = [f32(np.ones((1, 4, 1, 1))), i(2), scalar(T.BOOL, True)]
    outs = [output(F32, (1, 1, 2, 2))]
    rejects(O.DEPTH_TO_SPACE, args, outs, "BOOL|needs HAL 1.2", version=V.V1_1)
    accepts(O.DEPTH_TO_SPACE, args, outs, V.V1_2)
    nhwc = [f32(np.ones((1, 1, 1, 4))), i(2)]
    accepts(O.DEPTH_TO_SPACE, nhwc, [output(F32, (1, 2, 2, 1))], V.V1_0)


# --- CHANNEL_SHUFFLE -------------------------------------------------------------------


@pytest.mark.parametrize("axis", [1, -2])
def test_channel_shuffle(axis):
    x = np.arange(2 * 6 * 2, dtype=np.float32).reshape(2, 6, 2)
    got = run1(O.CHANNEL_SHUFFLE, [f32(x), i(3), i(axis)])
    # 3 groups of 2: channel g * 2 + j moves to j * 3 + g.
    for g, j in itertools.product(range(3), range(2)):
        np.testing.assert_array_equal(got[:, j * 3 + g], x[:, g * 2 + j])


@pytest.mark.parametrize(
    "groups, axis, match", [(4, 1, "does not divide"), (0, 1, "> 0"), (2, 3, "out of range")]
)
def test_channel_shuffle_rejects(groups, axis, match):
    rejects(O.CHANNEL_SHUFFLE, [f32(np.ones((2, 6, 2))), i(groups), i(axis)], [output(F32)], match)


def test_channel_shuffle_checks_run_time_groups():
    model, _ = single_op_model(
        O.CHANNEL_SHUFFLE,
        [f32(np.ones((2, 6, 2))), scalar(T.INT32, 0, as_input=True), i(1)],
        [output(F32)],
    )
    validate_model(model)  # the groups are not known yet
    with pytest.raises(HalError, match="groups must be > 0"):
        run_op(
            O.CHANNEL_SHUFFLE,
            [f32(np.ones((2, 6, 2))), scalar(T.INT32, 0, as_input=True), i(1)],
            [output(F32)],
        )


# --- rank limits --------------------------------------------------------------------------

X5 = np.zeros((1, 2, 1, 2, 3), np.float32)
R5_PARTIAL = (0, 2, 1, 2, 3)  # rank 5 known, dimension 0 not
R4_PARTIAL = (0, 2, 1, 3)


def _rank_limited_cases(dims):
    """One use of each operation documented "up to 4" on an input declared ``dims``."""
    x = f32(np.zeros(tuple(d or 1 for d in dims), np.float32), declared_dims=dims)
    r = len(dims)
    return [
        (O.RESHAPE, [x, i32([-1])]),
        (O.SQUEEZE, [x, i32([2])]),
        (O.TRANSPOSE, [x, i32(list(range(r)))]),
        (O.CONCATENATION, [x, x, i(1)]),
        (O.STRIDED_SLICE, [x, i32([0] * r), i32([1] * r), i32([1] * r), i(0), i(0), i(0)]),
        (O.PAD, [x, i32([[0, 1]] * r)]),
        (O.PAD_V2, [x, i32([[0, 1]] * r), scalar(T.FLOAT32, 0.0)]),
        (O.CHANNEL_SHUFFLE, [x, i(2), i(1)]),
    ]


@pytest.mark.parametrize(
    "op, inputs", _rank_limited_cases(R5_PARTIAL), ids=lambda c: getattr(c, "name", None)
)
def test_rank_limit_applies_when_only_the_rank_is_known(op, inputs):
    # Android's validation checks the rank whenever it is known (Utils.cpp's
    # "inputRank > 4"; hasKnownRank in Squeeze/Transpose/Concatenation/StridedSlice/Pad),
    # even if a dimension is unspecified.
    rejects(op, inputs, [output(F32)], r"input 0 must have rank 0\.\.4")


@pytest.mark.parametrize(
    "op, inputs", _rank_limited_cases(R4_PARTIAL), ids=lambda c: getattr(c, "name", None)
)
def test_rank_4_with_an_unspecified_dimension_is_accepted(op, inputs):
    accepts(op, inputs, [output(F32)], V.V1_2)


# --- what Android's validation leaves to execution -----------------------------------

X1111 = np.ones((1, 1, 1, 1), np.float32)
X4111 = np.ones((4, 1, 1, 1), np.float32)


def _android_validation_cases():
    """(op, inputs, outputs, deferrable, message): Android 11's Utils.cpp validateOperation
    and the R OperationResolver validate() functions check these operations' operand counts,
    types, HAL versions and (RESHAPE ... CHANNEL_SHUFFLE's "up to 4") ranks; parameter
    values are checked in prepare(), at execution."""
    out = [output(F32)]
    q = tensor(Q8, [1, 2], scale=0.5, zero_point=3)
    pad2 = i32([[0, 0], [0, 0]])
    return [
        # reshapePrepare: the shape tensor and its values
        (O.RESHAPE, [f32(X23), i32([-1, -1])], out, True, "at most one dimension"),
        (O.RESHAPE, [f32(X23), i32([-2, -3])], out, True, "non-negative or -1"),
        (O.RESHAPE, [f32(X23), i32([[2, 3]])], out, True, "must be a 1-D tensor"),
        # expand_dims::prepare, gather::prepare (handleNegativeAxis)
        (O.EXPAND_DIMS, [f32(X23), i(3)], out, True, "out of range for rank 3"),
        (O.GATHER, [f32(X23), i(2), i32([0])], out, True, "out of range for rank 2"),
        # the gather kernel checks indices (a constant one is rejected up front by policy)
        (O.GATHER, [f32(X23), i(0), i32([0, 2])], out, True, "index 2 is out of range"),
        # transposePrepare
        (O.TRANSPOSE, [f32(X234), i32([0, 0, 1])], out, True, "not a permutation"),
        # Concatenation.cpp prepare
        (O.CONCATENATION, [f32(X23), f32(X23), i(-1)], out, True, "must be >= 0"),
        # CpuExecutor's SPLIT case: numOutputs != outs.size()
        (O.SPLIT, [f32(X234), i(0), i(2)], out * 3, True, "differs from the number"),
        # StridedSlice.cpp prepare
        (
            O.STRIDED_SLICE,
            [f32(X23), i32([0, 0]), i32([2, 3]), i32([1, 0]), i(0), i(0), i(0)],
            out,
            True,
            "strides must be non-zero",
        ),
        # padPrepare
        (O.PAD, [f32(X23), i32([[0, 1], [-1, 0]])], out, True, "paddings must be >= 0"),
        (O.PAD, [f32(X23), i32([[0, 1, 2], [0, 0, 0]])], out, True, "paddings must have shape"),
        (
            O.PAD_V2,
            [f32(X23), i32([[0, 1], [-1, 0]]), scalar(T.FLOAT32, 0.0)],
            out,
            True,
            "paddings must be >= 0",
        ),
        # tile::prepare
        (O.TILE, [f32(X23), i32([1, -1])], out, True, "multiples must be >= 0"),
        # Fill.cpp prepare
        (O.FILL, [i32([2, -1]), scalar(T.FLOAT32, 0.0)], out, True, "dimensions must be >= 0"),
        # batchToSpacePrepare, spaceToBatchPrepare, depthToSpacePrepare, spaceToDepthPrepare
        (O.BATCH_TO_SPACE_ND, [f32(X4111), i32([0, 2])], out, True, "block sizes must be >= 1"),
        (O.BATCH_TO_SPACE_ND, [f32(X4111), i32([1, 1, 1])], out, True, "must have 2 elements"),
        (O.SPACE_TO_BATCH_ND, [f32(X1111), i32([1, 0]), pad2], out, True, "block sizes"),
        (
            O.SPACE_TO_BATCH_ND,
            [f32(X1111), i32([1, 1]), i32([[0, -1], [0, 0]])],
            out,
            True,
            "paddings must be >= 0",
        ),
        (O.DEPTH_TO_SPACE, [f32(X1111), i(0)], out, True, "block size must be >= 1"),
        (O.SPACE_TO_DEPTH, [f32(X1111), i(0)], out, True, "block size must be >= 1"),
        # ChannelShuffle.cpp prepare
        (O.CHANNEL_SHUFFLE, [f32(X23), i(0), i(1)], out, True, "groups must be > 0"),
        # already deferrable: a quantization the output does not keep (96f6447)
        (O.RESHAPE, [q, i32([2])], [output(Q8, scale=0.5, zero_point=4)], True, "zero point"),
        # strict: Utils.cpp "inputRank > 4", hasKnownRank checks in validate()
        (O.RESHAPE, [f32(np.zeros((1,) * 5)), i32([1])], out, False, r"rank 0\.\.4"),
        (O.CONCATENATION, [f32(np.zeros((1,) * 5)), i(-1)], out, False, r"rank 0\.\.4"),
        (O.BATCH_TO_SPACE_ND, [f32(np.ones((4, 1, 1))), i32([0, 2])], out, False, "rank 4"),
        # strict: operand types (validateOperationOperandTypes)
        (O.TILE, [f32(X23), tensor(F32, [1.0, 1.0])], out, False, "TENSOR_FLOAT32"),
    ]


@pytest.mark.parametrize(
    "op, inputs, outputs, deferrable, match",
    _android_validation_cases(),
    ids=lambda c: getattr(c, "name", None) if isinstance(c, O) else None,
)
def test_rejections_android_validation_leaves_to_execution(op, inputs, outputs, deferrable, match):
    model, _ = single_op_model(op, inputs, outputs)
    assert_rejected(model, deferrable=deferrable, match=match)


# --- quantization is carried, and signed = unsigned - 128 ------------------------------


def test_data_movement_requires_the_input_quantization():
    q = tensor(Q8S, [[1, 2]], scale=0.25, zero_point=-3)
    rejects(O.TRANSPOSE, [q, i32([1, 0])], [output(Q8S, scale=0.5, zero_point=-3)], "scale")
    rejects(
        O.SPLIT,
        [q, i(1), i(2)],
        [output(Q8S, scale=0.25, zero_point=-3), output(Q8S, scale=0.25, zero_point=0)],
        "output 1",
    )


SHAPE_OPS = [
    O.RESHAPE, O.SQUEEZE, O.EXPAND_DIMS, O.TRANSPOSE, O.CONCATENATION, O.SPLIT, O.SLICE,
    O.STRIDED_SLICE, O.PAD, O.TILE, O.GATHER, O.BATCH_TO_SPACE_ND, O.SPACE_TO_BATCH_ND,
    O.DEPTH_TO_SPACE, O.SPACE_TO_DEPTH, O.CHANNEL_SHUFFLE,
]  # fmt: skip
# PAD_V2 is exempt (its INT32 pad value is read as a byte, not shifted).


def test_every_quantized_shape_operation_has_a_twin_case():
    covered = {e.op for e in quant8_examples(SHAPE_OPS)}
    assert covered == set(SHAPE_OPS)


@pytest.mark.parametrize("ex", quant8_examples(SHAPE_OPS), ids=lambda e: e.name)
@pytest.mark.parametrize("seed", range(3))
def test_signed_equals_unsigned_minus_128(ex, seed):
    assert_signed_twin(ex, seed)


# --- dynamic shapes --------------------------------------------------------------------


def _my_examples():
    from tests.operations import examples_lookup, examples_reduction, examples_shape

    return examples_shape.EXAMPLES + examples_reduction.EXAMPLES + examples_lookup.EXAMPLES


@pytest.mark.parametrize("ex", _my_examples(), ids=lambda e: e.name)
def test_example_with_dims_known_only_at_run_time(ex):
    """The same case with every model input and output declared with unknown dims (rank
    kept), so shape inference runs on the real shapes at execution."""
    inputs = [
        replace(a, declared_dims=(0,) * a.values.ndim)
        # (per-channel quantization needs its channel dimension declared)
        if hasattr(a, "values") and not a.const and a.channel_quant is None
        else a
        for a in ex.inputs
    ]
    outputs = [
        replace(o, dims=(0,) * len(want.shape)) if want.ndim else o
        for o, want in zip(ex.outputs, ex.expected)
    ]
    assert_example(replace(ex, inputs=tuple(inputs), outputs=tuple(outputs)))
