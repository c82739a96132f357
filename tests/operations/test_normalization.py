"""SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION,
INSTANCE_NORMALIZATION: float64 references, hand-derivable quantized cases, and the
cross-type properties. (The integer SOFTMAX / L2_NORMALIZATION algorithms were also
checked bit for bit against Android's CTS expectations while developing.)"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import normalization as norm_ops
from driver.testing import (
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)

RELAXED_TOL = 5 * 2.0**-10
F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
Q8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


def _scalar_for(t):
    return T.FLOAT16 if t == F16 else T.FLOAT32


def ref_softmax(x, beta, axis):
    z = (x - x.max(axis=axis, keepdims=True)) * beta
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax(x, beta=1.0, axis=None, t=F32, scale=0.0, zp=0, version=None):
    ins = [tensor(t, x, scale=scale, zero_point=zp), scalar(_scalar_for(t), beta)]
    if axis is not None:
        ins.append(scalar(T.INT32, axis))
    out_q = {}
    if t in (Q8, S8):
        out_q = {"scale": 1 / 256, "zero_point": 0 if t == Q8 else -128}
    (y,) = run_op(O.SOFTMAX, ins, [output(t, np.shape(x), **out_q)], version=version)
    return y


def l2norm(x, axis=None, t=F32, scale=0.0, zp=0):
    ins = [tensor(t, x, scale=scale, zero_point=zp)]
    if axis is not None:
        ins.append(scalar(T.INT32, axis))
    out_q = {}
    if t in (Q8, S8):
        out_q = {"scale": 1 / 128, "zero_point": 128 if t == Q8 else 0}
    (y,) = run_op(O.L2_NORMALIZATION, ins, [output(t, np.shape(x), **out_q)])
    return y


def _rejected(fn):
    with pytest.raises(HalError) as e:
        fn()
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    return e.value.message


shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


@st.composite
def float_tensors(draw):
    shape = draw(shapes)
    seed = draw(st.integers(0, 2**16))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(np.float32), axis


@st.composite
def quant_tensors(draw):
    shape = draw(shapes)
    seed = draw(st.integers(0, 2**16))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    scale = draw(st.sampled_from([0.02, 0.1, 0.25, 1.0]))
    zp = draw(st.integers(0, 255))
    return np.random.default_rng(seed).integers(0, 256, shape), axis, scale, zp


# ---------------------------------------------------------------------------------------
# SOFTMAX
# ---------------------------------------------------------------------------------------


def test_softmax_by_hand():
    y = softmax(np.array([[0.0, np.log(3.0)]], dtype=np.float32))
    np.testing.assert_allclose(y, [[0.25, 0.75]], rtol=1e-6)


def test_softmax_beta_and_axis():
    x = np.array([[0.0, 1.0], [np.log(3.0), 2.0]], dtype=np.float32)
    y = softmax(x, beta=1.0, axis=0)
    np.testing.assert_allclose(y[:, 0], [0.25, 0.75], rtol=1e-6)
    y2 = softmax(x, beta=2.0)  # exp(2 * (x - max)) along the last axis
    np.testing.assert_allclose(y2, ref_softmax(x.astype(np.float64), 2.0, -1), rtol=1e-6)


@given(float_tensors(), st.sampled_from([0.5, 1.0, 1.7]))
def test_softmax_float32_matches_reference(case, beta):
    x, axis = case
    got = softmax(x, beta, axis)
    np.testing.assert_allclose(
        got, ref_softmax(x.astype(np.float64), beta, axis), rtol=1e-5, atol=1e-7
    )


@given(float_tensors())
def test_softmax_float16_close_to_float32(case):
    x, axis = case
    x16 = x.astype(np.float16)
    f32 = softmax(x16.astype(np.float32), 1.0, axis)
    f16 = softmax(x16, 1.0, axis, t=F16).astype(np.float32)
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL)


def test_softmax_quant8_dominant_value_takes_everything():
    # differences of -255 are beyond the kernel's input radius: only exp(0) survives,
    # 1.0 saturates to 255/256.
    y = softmax(np.array([[0, 255, 0]]), t=Q8, scale=1.0, zp=0)
    np.testing.assert_array_equal(y, [[0, 255, 0]])


@pytest.mark.parametrize(
    "kernel, length, want",
    [
        # SOFTMAX: 8193 * exp(0) = 8193 * 2**19 in Q12.19 wraps to 2**19 = 1.0, so each
        # value gets 1.0 (255 saturated) instead of 1/8193 (0).
        ("softmax", 8192 + 1, 255),
        # L2_NORMALIZATION: 33026 * 255**2 wraps the int32 sum negative, whose inverse
        # square root saturates; one element fewer still fits (255 / sqrt(sum) -> 129).
        ("l2", 33025 + 1, 255),
        ("l2", 33025, 129),
    ],
)
def test_quantized_sums_wrap_like_the_cpp_int32_accumulators(kernel, length, want):
    q = np.full((1, length), 255, np.uint8)
    y = softmax(q, t=Q8, scale=1.0, zp=0) if kernel == "softmax" else l2norm(q, t=Q8, scale=1.0)
    np.testing.assert_array_equal(y, np.full((1, length), want))


def test_softmax_quant8_uniform_row():
    y = softmax(np.full((1, 4), 77), t=Q8, scale=0.5, zp=3)
    np.testing.assert_array_equal(y, np.full((1, 4), 64))  # 1/4 = 64/256


@given(quant_tensors())
def test_softmax_quantized_within_one_of_requantized_float(case):
    q, axis, scale, zp = case
    real = ref_softmax((q - zp) * np.float64(scale), 1.0, axis)
    want = np.clip(np.floor(real * 256 + 0.5), 0, 255)
    got = softmax(q, 1.0, axis, t=Q8, scale=scale, zp=zp)
    assert np.abs(got.astype(np.int64) - want).max() <= 1


@given(quant_tensors())
def test_softmax_signed_equals_unsigned_minus_128(case):
    q, axis, scale, zp = case
    u = softmax(q, 1.0, axis, t=Q8, scale=scale, zp=zp).astype(np.int64)
    s = softmax(q - 128, 1.0, axis, t=S8, scale=scale, zp=zp - 128).astype(np.int64)
    np.testing.assert_array_equal(s, u - 128)


def test_softmax_validation():
    x = np.zeros((1, 2), dtype=np.float32)
    _rejected(lambda: softmax(x, beta=0.0))
    _rejected(lambda: softmax(x, axis=2))
    ins = [tensor(Q8, [[1, 2]], scale=0.5), scalar(T.FLOAT32, 1.0)]
    msg = _rejected(lambda: run_op(O.SOFTMAX, ins, [output(Q8, (1, 2), scale=1 / 128)]))
    assert "1/256" in msg
    # rank 3 without an axis needs HAL 1.2; rank 2 is fine in 1.0
    softmax(x, version=HalVersion.V1_0)
    _rejected(lambda: softmax(np.zeros((1, 1, 2), np.float32), version=HalVersion.V1_1))
    softmax(np.zeros((1, 1, 2), np.float32), version=HalVersion.V1_2)


# ---------------------------------------------------------------------------------------
# LOG_SOFTMAX
# ---------------------------------------------------------------------------------------


def _log_softmax(x, beta, axis, t=F32):
    ins = [tensor(t, x), scalar(_scalar_for(t), beta), scalar(T.INT32, axis)]
    (y,) = run_op(O.LOG_SOFTMAX, ins, [output(t, x.shape)])
    return y


def test_log_softmax_by_hand():
    y = _log_softmax(np.array([0.0, np.log(3.0)], dtype=np.float32), 1.0, 0)
    np.testing.assert_allclose(y, np.log([0.25, 0.75]), rtol=1e-6)


@given(float_tensors(), st.sampled_from([0.5, 1.0, 2.0]))
def test_log_softmax_matches_reference(case, beta):
    x, axis = case
    want = np.log(ref_softmax(x.astype(np.float64), beta, axis))
    np.testing.assert_allclose(_log_softmax(x, beta, axis), want, rtol=1e-5, atol=1e-5)
    x16 = x.astype(np.float16)
    f16 = _log_softmax(x16, beta, axis, t=F16).astype(np.float64)
    f32 = _log_softmax(x16.astype(np.float32), beta, axis).astype(np.float64)
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL)


# ---------------------------------------------------------------------------------------
# L2_NORMALIZATION
# ---------------------------------------------------------------------------------------


def test_l2_normalization_by_hand_tiny_and_zero_vectors():
    # A norm below 1e-6 divides by 1e-6 (tflite's epsilon): 5e-7 is not scaled up to 1.
    y = l2norm(np.array([[3, 4], [3e-7, 4e-7], [0, 0]], dtype=np.float32))
    np.testing.assert_allclose(y, [[0.6, 0.8], [0.3, 0.4], [0, 0]], rtol=1e-6)


@given(float_tensors())
def test_l2_normalization_matches_reference(case):
    x, axis = case
    x64 = x.astype(np.float64)
    want = x64 / np.maximum(np.sqrt((x64**2).sum(axis=axis, keepdims=True)), 1e-6)
    np.testing.assert_allclose(l2norm(x, axis), want, rtol=1e-5, atol=1e-6)
    x16 = x.astype(np.float16)
    f16 = l2norm(x16, axis, t=F16).astype(np.float64)
    np.testing.assert_allclose(
        f16, l2norm(x16.astype(np.float32), axis), rtol=RELAXED_TOL, atol=RELAXED_TOL
    )


def test_l2_normalization_quant8_by_hand():
    # offsets (6, 8) -> (0.6, 0.8) at scale 1/128 around 128: 204.8 and 230.4
    y = l2norm(np.array([[13, 15]]), t=Q8, scale=0.5, zp=7)
    assert np.abs(y.astype(np.int64) - [[205, 230]]).max() <= 1


@given(quant_tensors())
def test_l2_normalization_quantized_within_one_of_requantized_float(case):
    q, axis, scale, zp = case
    d = (q - zp).astype(np.float64)
    norm = np.sqrt((d**2).sum(axis=axis, keepdims=True))
    real = np.divide(d, norm, out=np.zeros_like(d), where=norm > 0)
    want = np.clip(np.sign(real) * np.floor(np.abs(real) * 128 + 0.5) + 128, 0, 255)
    got = l2norm(q, axis, t=Q8, scale=scale, zp=zp).astype(np.int64)
    assert np.abs(got - want).max() <= 1


@given(quant_tensors())
def test_l2_normalization_signed_equals_unsigned_minus_128(case):
    q, axis, scale, zp = case
    u = l2norm(q, axis, t=Q8, scale=scale, zp=zp).astype(np.int64)
    s = l2norm(q - 128, axis, t=S8, scale=scale, zp=zp - 128).astype(np.int64)
    np.testing.assert_array_equal(s, u - 128)


def _quant_kernels(q, axis, scale, zp):
    """SOFTMAX and L2_NORMALIZATION of ``q`` (unsigned and signed) along ``axis``."""
    return [
        softmax(q, 1.0, axis, t=Q8, scale=scale, zp=zp),
        softmax(q - 128, 0.5, axis, t=S8, scale=scale, zp=zp - 128),
        l2norm(q, axis, t=Q8, scale=scale, zp=zp),
        l2norm(q - 128, axis, t=S8, scale=scale, zp=zp - 128),
    ]


@given(quant_tensors(), st.sampled_from([1, 2, 5]))
def test_quantized_blocks_of_a_few_elements_give_the_one_block_result(case, block):
    # The integer kernels run blocks of rows, and long rows in segments (their sums are
    # exact in any order); tiny blocks must give exactly the one-block result.
    whole = _quant_kernels(*case)
    with mock.patch.object(norm_ops, "_BLOCK_ELEMENTS", block):
        blocked = _quant_kernels(*case)
    for got, want in zip(blocked, whole):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("zp", [0, 255, 100])
def test_l2_normalization_short_rows_look_the_inverse_square_root_up_exactly(zp):
    # More rows than possible sums of squares: the kernel tabulates the inverse square
    # roots of all the sums instead of running Newton's iterations per row.
    q = np.random.default_rng(zp).integers(0, 256, (70000, 1))
    q[:100] = zp  # zero vectors
    table = l2norm(q, t=Q8, scale=0.1, zp=zp)
    per_row = norm_ops.inv_sqrt_quantized_multiplier_exp
    with mock.patch.object(norm_ops, "_inv_sqrt_by_sum_of_squares", lambda *_: per_row):
        np.testing.assert_array_equal(table, l2norm(q, t=Q8, scale=0.1, zp=zp))


@pytest.mark.parametrize("shape", [(1 << 20, 4), (1, 1 << 22)])
@pytest.mark.parametrize("kernel", [softmax, l2norm])
def test_quantized_kernels_on_a_huge_input_need_little_more_than_it(kernel, shape):
    # A 4 MB input, in short rows or in one long row: whole-tensor int64 temporaries
    # would take 8 bytes an element, several times over; the kernels work by blocks.
    q = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    got, peak = traced_peak(lambda: kernel(q, axis=-1, t=Q8, scale=0.1, zp=100))
    assert got.shape == shape
    assert peak < 4 * q.nbytes + (16 << 20), f"peak {peak >> 20} MB"


def test_l2_normalization_validation():
    msg = _rejected(
        lambda: run_op(
            O.L2_NORMALIZATION,
            [tensor(Q8, [[1, 2]], scale=0.5)],
            [output(Q8, (1, 2), scale=1 / 128, zero_point=0)],
        )
    )
    assert "1/128" in msg
    _rejected(lambda: l2norm(np.ones((2, 2), np.float32), axis=-3))
    x = tensor(F32, np.ones((1, 2), np.float32))
    run_op(O.L2_NORMALIZATION, [x], [output(F32, (1, 2))], version=HalVersion.V1_2)
    _rejected(
        lambda: run_op(O.L2_NORMALIZATION, [x], [output(F32, (1, 2))], version=HalVersion.V1_1)
    )


# ---------------------------------------------------------------------------------------
# LOCAL_RESPONSE_NORMALIZATION
# ---------------------------------------------------------------------------------------


def ref_lrn(x, radius, bias, alpha, beta, axis):
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.empty_like(x)
    n = x.shape[-1]
    for i in range(n):
        window = x[..., max(0, i - radius) : min(n, i + radius + 1)]
        out[..., i] = x[..., i] / (bias + alpha * (window**2).sum(axis=-1)) ** beta
    return np.moveaxis(out, -1, axis)


def _lrn(x, radius, bias, alpha, beta, axis=None, t=F32):
    st_ = _scalar_for(t)
    ins = [
        tensor(t, x),
        scalar(T.INT32, radius),
        scalar(st_, bias),
        scalar(st_, alpha),
        scalar(st_, beta),
    ]
    if axis is not None:
        ins.append(scalar(T.INT32, axis))
    (y,) = run_op(O.LOCAL_RESPONSE_NORMALIZATION, ins, [output(t, x.shape)])
    return y


def test_lrn_by_hand():
    x = np.array([1, 2, 3], dtype=np.float32).reshape(1, 1, 1, 3)
    y = _lrn(x, 1, 1.0, 1.0, 1.0)
    # windows: (1,2) -> 1/(1+5); (1,2,3) -> 2/(1+14); (2,3) -> 3/(1+13)
    np.testing.assert_allclose(y.reshape(3), [1 / 6, 2 / 15, 3 / 14], rtol=1e-6)


@given(
    float_tensors(),
    st.integers(0, 6),
    st.sampled_from([(1.0, 1.0, 0.5), (2.0, 0.1, 0.75), (0.5, 2.0, 1.0)]),
)
def test_lrn_matches_reference(case, radius, params):
    x, axis = case
    bias, alpha, beta = params
    want = ref_lrn(x, radius, bias, alpha, beta, axis)
    np.testing.assert_allclose(_lrn(x, radius, bias, alpha, beta, axis), want, rtol=1e-5, atol=1e-6)
    x16 = x.astype(np.float16)
    f16 = _lrn(x16, radius, bias, alpha, beta, axis, t=F16).astype(np.float64)
    f32 = _lrn(x16.astype(np.float32), radius, bias, alpha, beta, axis)
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL)


def test_lrn_validation():
    x = np.ones((1, 1, 1, 2), np.float32)
    _rejected(lambda: _lrn(x, -1, 1.0, 1.0, 1.0))
    # Radius 0 is valid: each window is the element alone, 1 / (1 + 1 * 1**2) ** 1.
    np.testing.assert_array_equal(_lrn(x, 0, 1.0, 1.0, 1.0), np.full(x.shape, 0.5))
    _rejected(lambda: _lrn(x, 1, 1.0, 1.0, 1.0, axis=4))
    ins = [tensor(F32, np.ones((1, 2), np.float32)), scalar(T.INT32, 1)] + [
        scalar(T.FLOAT32, 1.0)
    ] * 3
    run_op(O.LOCAL_RESPONSE_NORMALIZATION, ins, [output(F32, (1, 2))], version=HalVersion.V1_2)
    _rejected(
        lambda: run_op(
            O.LOCAL_RESPONSE_NORMALIZATION, ins, [output(F32, (1, 2))], version=HalVersion.V1_1
        )
    )


_HAL_1_0_RANKS = {
    # Without the axis input (the HAL 1.0 form), the ranks HAL 1.0/1.1 took.
    O.SOFTMAX: (2, 4),
    O.L2_NORMALIZATION: (4,),
    O.LOCAL_RESPONSE_NORMALIZATION: (4,),
}
_HAL_1_0_SCALARS = {
    O.SOFTMAX: [scalar(T.FLOAT32, 1.0)],
    O.L2_NORMALIZATION: [],
    O.LOCAL_RESPONSE_NORMALIZATION: [scalar(T.INT32, 1)] + [scalar(T.FLOAT32, 1.0)] * 3,
}


@pytest.mark.parametrize("rank", [1, 2, 3, 4])
@pytest.mark.parametrize("op", list(_HAL_1_0_RANKS), ids=lambda o: o.name)
def test_other_ranks_without_an_axis_need_hal_1_2(op, rank):
    shape = (2,) * rank
    ins = [tensor(F32, np.ones(shape, np.float32)), *_HAL_1_0_SCALARS[op]]
    outs = [output(F32, shape)]
    run_op(op, ins, outs, version=HalVersion.V1_2)
    if rank in _HAL_1_0_RANKS[op]:
        run_op(op, ins, outs, version=HalVersion.V1_0)
    else:
        assert "HAL" in _rejected(lambda: run_op(op, ins, outs, version=HalVersion.V1_1))


# ---------------------------------------------------------------------------------------
# INSTANCE_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _instance(x, gamma, beta, eps, nchw=False, t=F32):
    st_ = _scalar_for(t)
    ins = [
        tensor(t, x),
        scalar(st_, gamma),
        scalar(st_, beta),
        scalar(st_, eps),
        scalar(T.BOOL, nchw),
    ]
    (y,) = run_op(O.INSTANCE_NORMALIZATION, ins, [output(t, x.shape)])
    return y


def test_instance_normalization_by_hand():
    x = np.array([1, 3, 10, 10], dtype=np.float32).reshape(1, 2, 1, 2)  # 2 channels
    y = _instance(x, 2.0, 0.5, 0.0)
    # channel 0: (1, 10) mean 5.5, std 4.5 -> (-1, 1); channel 1: (3, 10) -> (-1, 1)
    np.testing.assert_allclose(y.reshape(2, 2), [[-1.5, -1.5], [2.5, 2.5]], rtol=1e-6)


@given(hnp.array_shapes(min_dims=4, max_dims=4, min_side=1, max_side=4), st.integers(0, 2**16))
def test_instance_normalization_properties(shape, seed):
    x = np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(1, 2), keepdims=True)
    want = (x64 - mean) * 1.5 / np.sqrt(x64.var(axis=(1, 2), keepdims=True) + 0.01) - 0.25
    nhwc = _instance(x, 1.5, -0.25, 0.01)
    np.testing.assert_allclose(nhwc, want, rtol=1e-4, atol=1e-5)
    nchw = _instance(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), 1.5, -0.25, 0.01, nchw=True)
    np.testing.assert_allclose(nchw, nhwc.transpose(0, 3, 1, 2), rtol=1e-6, atol=1e-6)
    x16 = x.astype(np.float16)
    f16 = _instance(x16, 1.5, -0.25, 0.01, t=F16).astype(np.float64)
    f32 = _instance(x16.astype(np.float32), 1.5, -0.25, 0.01)
    scale = max(1.0, float(np.abs(f32).max()))
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL * scale)


def _float_kernels(x, axis, radius):
    """The float kernels (float32 and float16) along ``axis`` of ``x``, and
    INSTANCE_NORMALIZATION (NHWC and NCHW) of ``x`` made 4-D."""
    x4 = x.reshape((1,) * (4 - x.ndim) + x.shape)
    return [
        f(x.astype(dt), t)
        for t, dt in ((F32, np.float32), (F16, np.float16))
        for f in (
            lambda v, t: softmax(v, 1.7, axis, t=t),
            lambda v, t: _log_softmax(v, 0.5, axis, t=t),
            lambda v, t: l2norm(v, axis, t=t),
            lambda v, t: _lrn(v, radius, 1.0, 0.5, 0.75, axis, t=t),
            lambda v, t: _instance(v.reshape(x4.shape), 1.5, -0.25, 0.01, t=t),
            lambda v, t: _instance(v.reshape(x4.shape), 1.5, -0.25, 0.01, nchw=True, t=t),
        )
    ]


@given(float_tensors(), st.integers(0, 6), st.sampled_from([1, 2, 5]))
def test_float_blocks_of_a_few_elements_give_the_one_block_result(case, radius, block):
    # The float kernels run slabs of whole lines along the axis, laid out as in the
    # whole tensor (numpy's float sums follow the layout); tiny blocks must give the
    # one-block result bit for bit.
    whole = _float_kernels(*case, radius)
    with mock.patch.object(norm_ops, "_BLOCK_ELEMENTS", block):
        blocked = _float_kernels(*case, radius)
    for got, want in zip(blocked, whole):
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize(
    "kernel",
    [
        lambda x: softmax(x, 1.0, 0, t=F16),
        lambda x: _log_softmax(x, 1.0, 1, t=F16),
        lambda x: _lrn(x, 2, 1.0, 0.5, 0.75, t=F16),
        lambda x: _instance(x, 1.5, -0.25, 0.01, t=F16),
        lambda x: _instance(x, 1.5, -0.25, 0.01, nchw=True, t=F16),
    ],
    ids=["softmax_axis0", "log_softmax_axis1", "lrn", "instance_nhwc", "instance_nchw"],
)
def test_float_kernels_on_a_huge_input_need_little_more_than_it(kernel):
    # A 4 MB float16 input: whole-tensor float32 temporaries would take 4 bytes an
    # element, several times over; the kernels work by slabs of whole lines.
    x = np.random.default_rng(0).uniform(-3, 3, (16, 128, 128, 8)).astype(np.float16)
    got, peak = traced_peak(lambda: kernel(x))
    assert got.shape == x.shape
    assert peak < 3 * x.nbytes + (8 << 20), f"peak {peak >> 20} MB"


def test_instance_normalization_needs_rank_4():
    _rejected(lambda: _instance(np.ones((2, 2), np.float32), 1.0, 0.0, 0.1))


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android 11's validate leaves to prepare(), at execution
# ---------------------------------------------------------------------------------------


def _norm_model(op, shape, params=(), t=F32, out_quant=(0.0, 0)):
    """A one-operation model: input 0 of ``shape`` and type ``t`` (quant8: scale 0.5),
    then ``params``; the output has ``shape`` and ``out_quant`` (scale, zero point)."""
    x = tensor(t, np.zeros(shape), scale=0.5 if t == Q8 else 0.0)
    s, z = out_quant
    model, _ = single_op_model(op, [x, *params], [output(t, shape, scale=s, zero_point=z)])
    return model


def _f(v):
    return scalar(T.FLOAT32, v)


def _i(v):
    return scalar(T.INT32, v)


_LRN = (_i(1), _f(1.0), _f(1.0), _f(0.5))
V10, V13 = HalVersion.V1_0, HalVersion.V1_3


@pytest.mark.parametrize(
    "model, version, deferrable, match",
    [
        # The axis range: handleNegativeAxis in prepare().
        (_norm_model(O.SOFTMAX, (2, 3), (_f(1.0), _i(2))), V13, True, "axis"),
        (_norm_model(O.LOG_SOFTMAX, (2, 3), (_f(1.0), _i(-3))), V13, True, "axis"),
        (_norm_model(O.L2_NORMALIZATION, (2, 3), (_i(5),)), V13, True, "axis"),
        (
            _norm_model(O.LOCAL_RESPONSE_NORMALIZATION, (1, 2, 2, 3), (*_LRN, _i(4))),
            V13,
            True,
            "axis",
        ),
        # LRN's radius: prepare().
        (
            _norm_model(O.LOCAL_RESPONSE_NORMALIZATION, (1, 2, 2, 3), (_i(-1), *_LRN[1:])),
            V13,
            True,
            "radius",
        ),
        # InstanceNormalization.cpp validate checks no rank (prepare() does).
        (
            _norm_model(
                O.INSTANCE_NORMALIZATION, (2, 2, 3), (_f(1.0), _f(0.0), _f(1e-3), scalar(T.BOOL, 0))
            ),
            V13,
            True,
            "input 0 must have rank 4",
        ),
        # The fixed output quantization (the kernel)...
        (_norm_model(O.SOFTMAX, (2, 3), (_f(1.0),), Q8, (0.5, 0)), V10, True, "scale 1/256"),
        # ...unless the model's HAL version lacks the rank the operation uses
        # (validateHalVersion rejects that model, and says so).
        (_norm_model(O.SOFTMAX, (1, 2, 3), (_f(1.0),), Q8, (0.5, 0)), V10, False, "needs HAL 1.2"),
        # Android's validate: the rank limit when the rank is known.
        (_norm_model(O.SOFTMAX, (1, 1, 1, 2, 3), (_f(1.0),)), V13, False, "rank 0..4"),
        (_norm_model(O.L2_NORMALIZATION, (1, 1, 1, 2, 3)), V13, False, "rank 0..4"),
        (_norm_model(O.LOCAL_RESPONSE_NORMALIZATION, (1, 1, 1, 2, 3), _LRN), V13, False, "rank"),
        # A strict rule wins over a deferrable one.
        (_norm_model(O.L2_NORMALIZATION, (1, 1, 1, 2, 3), (_i(9),)), V13, False, "rank 0..4"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(model, version, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match, version=version)
