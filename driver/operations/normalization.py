"""Normalizations: SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION,
INSTANCE_NORMALIZATION (Android 11 ``Softmax.cpp``, ``LogSoftmax.cpp``,
``L2Normalization.cpp``, ``LocalResponseNormalization.cpp``,
``InstanceNormalization.cpp``).

Float kernels compute in float32 (float16 operands are widened and the result rounded to
float16). Quantized SOFTMAX is tflite's integer algorithm bit for bit: the input
differences to the row maximum scaled to Q5.26 by ``PreprocessSoftmaxScaling``, gemmlowp's
fixed-point ``exp_on_negative_values`` summed in Q12.19, the reciprocal by
``one_over_one_plus_x_for_x_in_0_1``, output scale 1/256. Quantized L2_NORMALIZATION is
tflite's: the int32 sum of squared zero-point-offset inputs, its inverse square root from
``GetInvSqrtQuantizedMultiplierExp``, ``128 * (x - zp)`` multiplied by it, output scale
1/128. Signed inputs run the same integer algorithms, so their results are exactly the
unsigned ones minus 128.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
    dtype_of,
)
from driver.operations.base import T as _T
from driver.operations.conv import QUANT8, from_nhwc, to_nhwc
from driver.operations.quant import (
    FX32,
    count_leading_zeros32,
    inv_sqrt_quantized_multiplier_exp,
    multiply_by_quantized_multiplier_greater_than_one,
    multiply_by_quantized_multiplier_smaller_than_one,
    quantize_multiplier_greater_than_one,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)

V = HalVersion
_F32, _F16, _I = _T.FLOAT32, _T.FLOAT16, _T.INT32


def _scalar_type(tensor_type: int) -> int:
    return _F16 if tensor_type == _T.TENSOR_FLOAT16 else _F32


def _axis(ctx: OperationContext, i: int | None, rank: int) -> int:
    """The (non-negative) axis given by scalar input ``i`` (default -1 when absent).
    Deferrable: Android 11 checks the axis range in ``prepare()`` (handleNegativeAxis)."""
    if i is None or i >= ctx.num_inputs:
        return rank - 1
    axis = ctx.scalar(i)
    if not -rank <= axis < rank:  # messages only on failure: validation runs these often
        raise ctx.invalid(
            f"input {i} (axis) must be in [{-rank}, {rank}) for rank {rank}, got {axis}",
            deferrable=True,
        )
    return axis % rank


def _check_max_rank(ctx: OperationContext) -> int | None:
    """Input 0's known rank, at most 4 (strict: the ``hasKnownRank`` / ``inputRank != 0``
    checks of Android 11's Softmax, L2Normalization and LocalResponseNormalization
    ``validate``)."""
    ctx.check_rank(0)
    return ctx.known_rank(0)


def _check_not_scalar(ctx: OperationContext, r: int | None) -> None:
    """Deferrable: Android's validate reads rank 0 as an unknown rank; prepare() fails it."""
    if r is not None:
        ctx.check(r >= 1, "input 0 must have rank >= 1, got a scalar", deferrable=True)


def _same_shape(ctx: OperationContext) -> list[Shape]:
    ctx.check(len(ctx.shape(0)) >= 1, "input 0 must have rank >= 1, got a scalar")
    return [ctx.shape(0)]


def _float_out(ctx: OperationContext, y: np.ndarray) -> np.ndarray:
    return y.astype(dtype_of(ctx), copy=False)


# ---------------------------------------------------------------------------------------
# SOFTMAX
# ---------------------------------------------------------------------------------------

_SCALED_DIFF_INTEGER_BITS = 5
_ACCUMULATION_INTEGER_BITS = 12


def _softmax_input_scaling(beta: float, input_scale: float) -> tuple[int, int] | None:
    """``PreprocessSoftmaxScaling``: (multiplier, left shift) for input differences, or
    None where Android's ``QuantizeMultiplierGreaterThanOne`` rejects the product."""
    real = min(
        float(np.float32(beta))
        * float(np.float32(input_scale))
        * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)),
        (1 << 31) - 1.0,
    )
    if not real > 1.0:
        return None
    return quantize_multiplier_greater_than_one(real)


def _softmax_params(ctx: OperationContext) -> float:
    """The checked beta (the hooks read it through ``ctx.once``)."""
    beta = float(ctx.scalar(1))
    if not beta > 0:
        raise ctx.invalid(f"input 1 (beta) must be > 0, got {beta}", deferrable=True)
    if ctx.input_type(0) in QUANT8 and _softmax_input_scaling(beta, ctx.input_scale(0)) is None:
        raise ctx.invalid(
            f"input 1 (beta) {beta} times the input scale {ctx.input_scale(0)} is too small "
            "for the quantized kernel (beta * scale * 2**26 must exceed 1)",
            deferrable=True,
        )
    return beta


def _validate_softmax(ctx: OperationContext) -> None:
    """Strict: the rank limit and the HAL version (Softmax.cpp validate); deferrable, after
    them: the rest (prepare() and the kernel)."""
    r = _check_max_rank(ctx)
    if ctx.num_inputs == 2 and r and r not in (2, 4):
        ctx.require_version(V.V1_2)  # HAL 1.0/1.1 softmax takes 2-D or 4-D inputs only
    _check_not_scalar(ctx, r)
    t = ctx.input_type(0)
    if t in QUANT8:
        zp = 0 if t == _T.TENSOR_QUANT8_ASYMM else -128
        ctx.check(
            np.float32(ctx.output_scale(0)) == np.float32(1.0 / 256)
            and ctx.output_zero_point(0) == zp,
            f"output 0 must have scale 1/256 and zero point {zp}, got "
            f"({ctx.output_scale(0)}, {ctx.output_zero_point(0)})",
            deferrable=True,
        )
    with contextlib.suppress(Unknown):
        ctx.once(_softmax_params)
    with contextlib.suppress(Unknown):
        if r is not None:
            _axis(ctx, 2, r)


def _infer_softmax(ctx: OperationContext) -> list[Shape]:
    ctx.check_rank(0, min_rank=1, max_rank=4)
    ctx.once(_softmax_params)
    _axis(ctx, 2, len(ctx.shape(0)))
    return [ctx.shape(0)]


def _softmax_quant(x: np.ndarray, beta: float, input_scale: float) -> np.ndarray:
    """tflite's quantized softmax along the last axis of int values ``x``; returns the
    unsigned result in [0, 255]."""
    mult, left_shift = _softmax_input_scaling(beta, input_scale)
    diff_min = -math.floor(
        ((1 << _SCALED_DIFF_INTEGER_BITS) - 1)
        * (1 << (31 - _SCALED_DIFF_INTEGER_BITS))
        / (1 << left_shift)
    )  # CalculateInputRadius
    x = x.astype(np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    live = diff >= diff_min
    scaled = multiply_by_quantized_multiplier_greater_than_one(
        np.where(live, diff, 0), mult, left_shift
    )
    exps = FX32.exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS)  # Q0.31
    acc = FX32.rescale(exps, 0, _ACCUMULATION_INTEGER_BITS)
    sum_of_exps = np.where(live, acc, 0).sum(axis=-1, keepdims=True)
    sum_of_exps = sum_of_exps & 0xFFFFFFFF  # the C++ sum is an int32 read as uint32
    headroom_plus_one = count_leading_zeros32(sum_of_exps)
    num_bits_over_unit = _ACCUMULATION_INTEGER_BITS - headroom_plus_one
    shifted_sum_minus_one = ((sum_of_exps << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
    shifted_scale = FX32.one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one)
    unsat = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(shifted_scale, exps), num_bits_over_unit + 31 - 8
    )
    return np.where(live, np.clip(unsat, 0, 255), 0)


def _empty_like_input(ctx: OperationContext) -> np.ndarray:
    """The output of a normalization over a zero-sized input: nothing to normalize (a
    reduction over an empty axis would have no identity)."""
    return np.zeros(ctx.value(0).shape, dtype=dtype_of(ctx))


def _execute_softmax(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    if x.size == 0:
        return [_empty_like_input(ctx)]
    beta = _softmax_params(ctx)
    axis = _axis(ctx, 2, x.ndim)
    xm = np.moveaxis(x, axis, -1)
    t = ctx.input_type(0)
    if t in QUANT8:
        signed = t == _T.TENSOR_QUANT8_ASYMM_SIGNED
        out = _softmax_quant(xm, beta, ctx.input_scale(0)) - (128 if signed else 0)
        out = out.astype(dtype_of(ctx))
    else:
        xf = xm.astype(np.float32)
        e = np.exp((xf - xf.max(axis=-1, keepdims=True)) * np.float32(beta))
        out = _float_out(ctx, e / e.sum(axis=-1, keepdims=True))
    return [np.ascontiguousarray(np.moveaxis(out, -1, axis))]


def _softmax_signatures() -> tuple[Signature, ...]:
    sigs = []
    for t, v in (
        (_T.TENSOR_FLOAT32, V.V1_0),
        (_T.TENSOR_QUANT8_ASYMM, V.V1_0),
        (_T.TENSOR_FLOAT16, V.V1_2),
        (_T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3),
    ):
        sigs.append(Signature((t, _scalar_type(t)), (t,), v))
        sigs.append(Signature((t, _scalar_type(t), _I), (t,), max(v, V.V1_2)))
    return tuple(sigs)


SOFTMAX = OperationDeclaration(
    OperationType.SOFTMAX,
    _softmax_signatures(),
    infer_shapes=_infer_softmax,
    execute=_execute_softmax,
    validate=_validate_softmax,
    summary="exp(beta * x) normalized to sum 1 along an axis (default the last); "
    "quantized outputs have scale 1/256.",
)


# ---------------------------------------------------------------------------------------
# LOG_SOFTMAX
# ---------------------------------------------------------------------------------------


def _validate_log_softmax(ctx: OperationContext) -> None:
    # LogSoftmax.cpp validate checks types and the version only.
    r = ctx.known_rank(0)
    _check_not_scalar(ctx, r)
    with contextlib.suppress(Unknown):
        if r is not None:
            _axis(ctx, 2, r)


def _infer_log_softmax(ctx: OperationContext) -> list[Shape]:
    out = _same_shape(ctx)
    _axis(ctx, 2, len(ctx.shape(0)))
    return out


def _execute_log_softmax(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0).astype(np.float32)
    if x.size == 0:
        return [_empty_like_input(ctx)]
    axis = _axis(ctx, 2, x.ndim)
    beta = np.float32(ctx.scalar(1))
    z = (x - x.max(axis=axis, keepdims=True)) * beta
    out = z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return [_float_out(ctx, out)]


LOG_SOFTMAX = OperationDeclaration(
    OperationType.LOG_SOFTMAX,
    tuple(
        Signature((t, _scalar_type(t), _I), (t,), V.V1_2)
        for t in (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)
    ),
    infer_shapes=_infer_log_softmax,
    execute=_execute_log_softmax,
    validate=_validate_log_softmax,
    summary="log(softmax(beta * x)) along an axis, computed as beta*(x - max) - log(sum exp).",
)


# ---------------------------------------------------------------------------------------
# L2_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _validate_l2(ctx: OperationContext) -> None:
    """Strict: the rank limit and the HAL version (L2Normalization.cpp validate);
    deferrable, after them: the rest (prepare() and the kernel)."""
    r = _check_max_rank(ctx)
    if ctx.num_inputs == 1 and r != 4:
        ctx.require_version(V.V1_2)  # HAL 1.0/1.1: 4-D only
    _check_not_scalar(ctx, r)
    t = ctx.input_type(0)
    if t in QUANT8:
        zp = 128 if t == _T.TENSOR_QUANT8_ASYMM else 0
        ctx.check(
            np.float32(ctx.output_scale(0)) == np.float32(1.0 / 128)
            and ctx.output_zero_point(0) == zp,
            f"output 0 must have scale 1/128 and zero point {zp}, got "
            f"({ctx.output_scale(0)}, {ctx.output_zero_point(0)})",
            deferrable=True,
        )
    with contextlib.suppress(Unknown):
        if r is not None:
            _axis(ctx, 1, r)


def _infer_l2(ctx: OperationContext) -> list[Shape]:
    ctx.check_rank(0, min_rank=1, max_rank=4)
    _axis(ctx, 1, len(ctx.shape(0)))
    return [ctx.shape(0)]


def _execute_l2(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    axis = _axis(ctx, 1, x.ndim)
    t = ctx.input_type(0)
    if t in QUANT8:
        d = x.astype(np.int64) - ctx.input_zero_point(0)
        sq = (d * d).sum(axis=axis, keepdims=True)
        sq = ((sq + 2**31) & 0xFFFFFFFF) - 2**31  # int32 accumulator
        mult, shift = inv_sqrt_quantized_multiplier_exp(sq, -1)
        # MultiplyByQuantizedMultiplierSmallerThanOneExp(128 * d, mult, shift), shift <= 0
        scaled = multiply_by_quantized_multiplier_smaller_than_one(128 * d, mult, -shift)
        if t == _T.TENSOR_QUANT8_ASYMM:
            out = np.clip(scaled + 128, 0, 255)
        else:
            out = np.clip(scaled, -128, 127)
        return [out.astype(dtype_of(ctx))]
    xf = x.astype(np.float32)
    norm = np.sqrt((xf * xf).sum(axis=axis, keepdims=True, dtype=np.float32))
    return [_float_out(ctx, xf / np.maximum(norm, np.float32(1e-6)))]


L2_NORMALIZATION = OperationDeclaration(
    OperationType.L2_NORMALIZATION,
    tuple(
        Signature(ins, (t,), v)
        for t, v0 in (
            (_T.TENSOR_FLOAT32, V.V1_0),
            (_T.TENSOR_FLOAT16, V.V1_2),
            (_T.TENSOR_QUANT8_ASYMM, V.V1_2),
            (_T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3),
        )
        for ins, v in (((t,), v0), ((t, _I), max(v0, V.V1_2)))
    ),
    infer_shapes=_infer_l2,
    execute=_execute_l2,
    validate=_validate_l2,
    summary="x / max(sqrt(sum(x^2)), 1e-6) along an axis (default the last); quantized "
    "outputs have scale 1/128.",
)


# ---------------------------------------------------------------------------------------
# LOCAL_RESPONSE_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _validate_lrn(ctx: OperationContext) -> None:
    """Strict: the rank limit and the HAL version (LocalResponseNormalization.cpp
    validate); deferrable, after them: the radius and the axis (prepare())."""
    r = _check_max_rank(ctx)
    if ctx.num_inputs == 5 and r != 4:
        ctx.require_version(V.V1_2)
    _check_not_scalar(ctx, r)
    with contextlib.suppress(Unknown):
        radius = ctx.scalar(1)
        ctx.check(radius >= 0, f"input 1 (radius) must be >= 0, got {radius}", deferrable=True)
    with contextlib.suppress(Unknown):
        if r is not None:
            _axis(ctx, 5, r)


def _infer_lrn(ctx: OperationContext) -> list[Shape]:
    ctx.check_rank(0, min_rank=1, max_rank=4)
    radius = ctx.scalar(1)
    ctx.check(radius >= 0, f"input 1 (radius) must be >= 0, got {radius}")
    _axis(ctx, 5, len(ctx.shape(0)))
    return [ctx.shape(0)]


def _execute_lrn(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    if x.size == 0:
        return [_empty_like_input(ctx)]
    axis = _axis(ctx, 5, x.ndim)
    xf = np.moveaxis(x.astype(np.float32), axis, -1)
    radius = min(ctx.scalar(1), xf.shape[-1])  # Android clamps the radius to the axis
    bias, alpha, beta = (np.float32(ctx.scalar(i)) for i in (2, 3, 4))
    sq = np.pad(xf * xf, [(0, 0)] * (xf.ndim - 1) + [(radius, radius)])
    window = sliding_window_view(sq, 2 * radius + 1, axis=-1).sum(axis=-1, dtype=np.float32)
    out = xf * np.power(bias + alpha * window, -beta)
    return [_float_out(ctx, np.ascontiguousarray(np.moveaxis(out, -1, axis)))]


LOCAL_RESPONSE_NORMALIZATION = OperationDeclaration(
    OperationType.LOCAL_RESPONSE_NORMALIZATION,
    tuple(
        Signature(ins, (t,), v)
        for t, v0 in ((_T.TENSOR_FLOAT32, V.V1_0), (_T.TENSOR_FLOAT16, V.V1_2))
        for ins, v in (
            ((t, _I) + (_scalar_type(t),) * 3, v0),
            ((t, _I) + (_scalar_type(t),) * 3 + (_I,), V.V1_2),
        )
    ),
    infer_shapes=_infer_lrn,
    execute=_execute_lrn,
    validate=_validate_lrn,
    summary="x / (bias + alpha * sum of squares over a window of 2*radius+1 along an "
    "axis) ** beta.",
)


# ---------------------------------------------------------------------------------------
# INSTANCE_NORMALIZATION
# ---------------------------------------------------------------------------------------


def _validate_instance(ctx: OperationContext) -> None:
    # Deferrable: InstanceNormalization.cpp validate checks types and the version only;
    # prepare() checks the rank.
    ctx.check_rank(0, exact=4, deferrable=True)


def _infer_instance(ctx: OperationContext) -> list[Shape]:
    ctx.check_rank(0, exact=4)
    return [ctx.shape(0)]


def _execute_instance(ctx: OperationContext) -> list[np.ndarray]:
    if ctx.value(0).size == 0:  # (a mean over an empty slice is NaN, with a warning)
        return [_empty_like_input(ctx)]
    nchw = bool(ctx.scalar(4))
    x = to_nhwc(ctx.value(0), nchw).astype(np.float32)
    gamma, beta, eps = (np.float32(ctx.scalar(i)) for i in (1, 2, 3))
    mean = x.mean(axis=(1, 2), keepdims=True, dtype=np.float32)
    var = np.square(x - mean).mean(axis=(1, 2), keepdims=True, dtype=np.float32)
    out = (x - mean) * gamma / np.sqrt(var + eps) + beta
    return [from_nhwc(_float_out(ctx, out), nchw)]


INSTANCE_NORMALIZATION = OperationDeclaration(
    OperationType.INSTANCE_NORMALIZATION,
    tuple(
        Signature((t,) + (_scalar_type(t),) * 3 + (_T.BOOL,), (t,), V.V1_2)
        for t in (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)
    ),
    infer_shapes=_infer_instance,
    execute=_execute_instance,
    validate=_validate_instance,
    summary="(x - mean) * gamma / sqrt(variance + epsilon) + beta, statistics over each "
    "batch and channel's spatial plane; NHWC or NCHW.",
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    SOFTMAX,
    LOG_SOFTMAX,
    L2_NORMALIZATION,
    LOCAL_RESPONSE_NORMALIZATION,
    INSTANCE_NORMALIZATION,
)
