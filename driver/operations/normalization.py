"""Normalizations: SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION,
INSTANCE_NORMALIZATION (Android 11 ``Softmax.cpp``, ``LogSoftmax.cpp``,
``L2Normalization.cpp``, ``LocalResponseNormalization.cpp``,
``InstanceNormalization.cpp``).

Float kernels compute in float32 (float16 operands are widened and the result rounded to
float16), a slab of whole lines along the axis at a time. Quantized SOFTMAX is tflite's
integer algorithm bit for bit: the input differences to the row maximum scaled to Q5.26 by
``PreprocessSoftmaxScaling``, gemmlowp's fixed-point ``exp_on_negative_values`` summed in
Q12.19, the reciprocal by ``one_over_one_plus_x_for_x_in_0_1``, output scale 1/256.
Quantized L2_NORMALIZATION is tflite's: the int32 sum of squared zero-point-offset inputs,
its inverse square root from ``GetInvSqrtQuantizedMultiplierExp``, ``128 * (x - zp)``
multiplied by it, output scale 1/128. Signed inputs run the same integer algorithms, so
their results are exactly the unsigned ones minus 128. The integer kernels run a block of
rows at a time (long rows in segments, their integer sums being exact in any order),
SOFTMAX's per-element stages looked up by the distance to the row maximum, so their
temporaries stay small whatever the input's size.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

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
from driver.operations.conv import QUANT8
from driver.operations.quant import (
    FX32,
    count_leading_zeros32,
    inv_sqrt_quantized_multiplier_exp,
    multiply_by_quantized_multiplier_greater_than_one,
    multiply_by_quantized_multiplier_smaller_than_one,
    quantize_multiplier_greater_than_one,
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


# ---------------------------------------------------------------------------------------
# Blocks. An input can be a 256 MiB tensor made by an upstream operation, and the kernels'
# int64 / float32 temporaries are several times it, so the kernels run a block at a time.
# ---------------------------------------------------------------------------------------

_BLOCK_ELEMENTS = 1 << 16
"""Elements per block of the integer kernels: their int64 temporaries stay a few MB
(and in cache: faster than whole-tensor passes) while numpy's per-call overhead stays
small."""


def _integer_row_blocks(rows: int, n: int) -> Iterator[tuple[slice, tuple[slice, ...]]]:
    """Blocks for the integer kernels on ``rows`` rows of ``n``: (a range of whole rows,
    the column segments to walk them in). Rows of ``_BLOCK_ELEMENTS`` or more come one at
    a time in segments of that length: their reductions are integer sums, exact in any
    order, so a row's sum is accumulated over its segments before the second pass."""
    if n >= _BLOCK_ELEMENTS:
        segments = tuple(slice(c, c + _BLOCK_ELEMENTS) for c in range(0, n, _BLOCK_ELEMENTS))
        for r in range(rows):
            yield slice(r, r + 1), segments
    else:
        step = _BLOCK_ELEMENTS // n
        for r in range(0, rows, step):
            yield slice(r, r + step), (slice(0, n),)


def _float_lines(
    x: np.ndarray, axis: int, dtype: np.dtype, kernel: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """``kernel`` over slabs of ``x`` viewed as (before, axis, after): each slab holds whole
    lines along ``axis`` (a range of ``before``, or one ``before`` and a range of at least
    two ``after``), and ``kernel(slab)`` returns the slab's result with its shape. numpy
    sums a line pairwise when it is contiguous (``after`` == 1) and in line order when not;
    slabs keep both, so the float sums and results are the whole tensor's bit for bit (a
    one-column slab of a strided line would sum it pairwise: the last range of ``after``
    overlaps the one before instead)."""
    before, n = math.prod(x.shape[:axis]), x.shape[axis]
    after = math.prod(x.shape[axis + 1 :])
    x3 = x.reshape(before, n, after)
    out = np.empty(x3.shape, dtype)
    if n * after <= _BLOCK_ELEMENTS:
        step = _BLOCK_ELEMENTS // (n * after)
        for a in range(0, before, step):
            out[a : a + step] = kernel(x3[a : a + step])
        return out.reshape(x.shape)
    width = 1 if after == 1 else max(2, _BLOCK_ELEMENTS // n)
    for a in range(before):
        for b in range(0, after, width):
            cols = slice(min(b, after - 2) if after > 1 else 0, b + width)
            out[a : a + 1, :, cols] = kernel(x3[a : a + 1, :, cols])
    return out.reshape(x.shape)


_SHORT_ROW = 64
"""Rows shorter than this are transposed to columns before the integer kernels run:
numpy reduces and broadcasts along a short innermost axis one row at a time (10-50 times
slower than along a long one)."""


def _columns(segment: np.ndarray) -> np.ndarray:
    """A segment of a block of rows as its transpose (one column per row), contiguous for
    short rows: the kernels then reduce over axis 0 and broadcast per-row values along
    the long axis."""
    if segment.shape[1] < _SHORT_ROW:
        return np.ascontiguousarray(segment.T)
    return segment.T


def _unsigned(block: np.ndarray) -> np.ndarray:
    """Quant8 values as uint8 in the same order: signed ones plus 128 (the sign bit
    flipped), so the signed types run the unsigned algorithms."""
    return block.view(np.uint8) ^ 0x80 if block.dtype == np.int8 else block


def _quant_rows(
    ctx: OperationContext, axis: int, kernel: Callable[[np.ndarray, np.ndarray], None]
) -> np.ndarray:
    """Input 0 as rows along ``axis``, ``kernel(rows, out_rows)`` writing the unsigned
    results (it reads blocks through ``_unsigned``), and the output in input 0's layout
    (signed: the results minus 128)."""
    x = ctx.value(0)
    rows = np.moveaxis(x, axis, -1)
    moved_shape = rows.shape
    rows = rows.reshape(-1, moved_shape[-1])
    out = np.empty(rows.shape, np.uint8)
    kernel(rows, out)
    if x.dtype == np.int8:
        out ^= 0x80  # v - 128 for v in [0, 255], in two's complement
    out = np.moveaxis(out.reshape(moved_shape).view(dtype_of(ctx)), -1, axis)
    return np.ascontiguousarray(out)


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


def _softmax_quant_tables(beta: float, input_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """tflite's per-element softmax stages by the distance d = row max - x in [0, 255]
    (uint8 inputs have no other): exp(-d) in Q0.31 and its Q12.19 rescaling for the sum,
    both 0 where the difference is below ``CalculateInputRadius``'s bound (tflite skips
    those: no share of the sum, output 0)."""
    mult, left_shift = _softmax_input_scaling(beta, input_scale)
    diff_min = -math.floor(
        ((1 << _SCALED_DIFF_INTEGER_BITS) - 1)
        * (1 << (31 - _SCALED_DIFF_INTEGER_BITS))
        / (1 << left_shift)
    )  # CalculateInputRadius
    diff = -np.arange(256, dtype=np.int64)
    live = diff >= diff_min
    scaled = multiply_by_quantized_multiplier_greater_than_one(
        np.where(live, diff, 0), mult, left_shift
    )
    exps = np.where(live, FX32.exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS), 0)
    acc = FX32.rescale(exps, 0, _ACCUMULATION_INTEGER_BITS)
    return exps.astype(np.int32), acc


def _softmax_quant(rows: np.ndarray, out: np.ndarray, beta: float, input_scale: float) -> None:
    """tflite's quantized softmax of each row of quant8 ``rows`` into uint8 ``out`` (the
    unsigned result, scale 1/256), a block of rows at a time."""
    exps_by_distance, acc_by_distance = _softmax_quant_tables(beta, input_scale)
    for block_rows, segments in _integer_row_blocks(*rows.shape):
        block = _unsigned(rows[block_rows])
        columns = [_columns(block[:, s]) for s in segments]
        row_max = np.max([c.max(axis=0) for c in columns], axis=0)
        sum_of_exps = sum(acc_by_distance.take(row_max - c).sum(axis=0) for c in columns)
        sum_of_exps &= 0xFFFFFFFF  # the C++ sum is an int32 read as uint32
        headroom_plus_one = count_leading_zeros32(sum_of_exps)
        num_bits_over_unit = _ACCUMULATION_INTEGER_BITS - headroom_plus_one
        shifted_sum_minus_one = ((sum_of_exps << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)
        shifted_scale = FX32.one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one)
        for s, c in zip(segments, columns):
            # RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(scale, exp), bits)
            unsat = multiply_by_quantized_multiplier_smaller_than_one(
                exps_by_distance.take(row_max - c), shifted_scale, num_bits_over_unit + 31 - 8
            )
            out[block_rows, s] = np.clip(unsat, 0, 255, out=unsat).T


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
    if ctx.input_type(0) in QUANT8:
        scale = ctx.input_scale(0)
        return [_quant_rows(ctx, axis, lambda rows, out: _softmax_quant(rows, out, beta, scale))]

    def softmax(lines: np.ndarray) -> np.ndarray:
        xf = lines.astype(np.float32)
        e = np.exp((xf - xf.max(axis=1, keepdims=True)) * np.float32(beta))
        return e / e.sum(axis=1, keepdims=True)

    return [_float_lines(x, axis, dtype_of(ctx), softmax)]


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
    x = ctx.value(0)
    if x.size == 0:
        return [_empty_like_input(ctx)]
    axis = _axis(ctx, 2, x.ndim)
    beta = np.float32(ctx.scalar(1))

    def log_softmax(lines: np.ndarray) -> np.ndarray:
        xf = lines.astype(np.float32)
        z = (xf - xf.max(axis=1, keepdims=True)) * beta
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))

    return [_float_lines(x, axis, dtype_of(ctx), log_softmax)]


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


def _inv_sqrt_by_sum_of_squares(
    rows: int, n: int, max_offset: int
) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``GetInvSqrtQuantizedMultiplierExp`` for rows' sums of squares, looked up in a table
    of all the possible sums when there are more rows than sums (short rows: the per-row
    Newton iterations would cost more than the elementwise work)."""
    max_sum = n * max_offset * max_offset
    if rows <= max_sum:
        return lambda sq: inv_sqrt_quantized_multiplier_exp(sq, -1)
    mult_by_sum, shift_by_sum = inv_sqrt_quantized_multiplier_exp(np.arange(max_sum + 1), -1)
    return lambda sq: (mult_by_sum.take(sq), shift_by_sum.take(sq))


def _l2_quant(rows: np.ndarray, out: np.ndarray, zero_point: int) -> None:
    """tflite's quantized L2 normalization of each row of quant8 ``rows`` (``zero_point``
    in their unsigned form) into uint8 ``out`` (unsigned result, scale 1/128)."""

    def offset(block: np.ndarray, s: slice) -> np.ndarray:
        return _columns(block[:, s]).astype(np.int32) - zero_point  # |x - zp| <= 255

    inv_sqrt = _inv_sqrt_by_sum_of_squares(*rows.shape, max(zero_point, 255 - zero_point))
    for block_rows, segments in _integer_row_blocks(*rows.shape):
        block = _unsigned(rows[block_rows])
        sq = sum(np.square(offset(block, s)).sum(axis=0, dtype=np.int64) for s in segments)
        sq = ((sq + 2**31) & 0xFFFFFFFF) - 2**31  # int32 accumulator
        mult, shift = inv_sqrt(sq)
        for s in segments:
            # MultiplyByQuantizedMultiplierSmallerThanOneExp(128 * d, mult, shift), shift <= 0
            d = offset(block, s)
            d *= 128
            scaled = multiply_by_quantized_multiplier_smaller_than_one(d, mult, -shift)
            scaled += 128
            out[block_rows, s] = np.clip(scaled, 0, 255, out=scaled).T


def _execute_l2(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    if x.size == 0:
        return [_empty_like_input(ctx)]
    axis = _axis(ctx, 1, x.ndim)
    if ctx.input_type(0) in QUANT8:
        zero_point = ctx.input_zero_point(0) + (128 if x.dtype == np.int8 else 0)
        return [_quant_rows(ctx, axis, lambda rows, out: _l2_quant(rows, out, zero_point))]

    def l2(lines: np.ndarray) -> np.ndarray:
        xf = lines.astype(np.float32)
        norm = np.sqrt((xf * xf).sum(axis=1, keepdims=True, dtype=np.float32))
        return xf / np.maximum(norm, np.float32(1e-6))

    return [_float_lines(x, axis, dtype_of(ctx), l2)]


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
    radius = min(ctx.scalar(1), x.shape[axis])  # Android clamps the radius to the axis
    bias, alpha, beta = (np.float32(ctx.scalar(i)) for i in (2, 3, 4))

    # The squares zero-padded along the axis, laid out as np.pad lays out the whole
    # tensor's (Fortran order where its moved view is): the window sums' order follows.
    moved = np.moveaxis(x, axis, -1)
    order = "F" if moved.flags.f_contiguous and not moved.flags.c_contiguous else "C"

    def lrn(lines: np.ndarray) -> np.ndarray:
        xf = np.moveaxis(lines.astype(np.float32), 1, -1)
        n = xf.shape[-1]
        sq = np.zeros((*xf.shape[:-1], n + 2 * radius), np.float32, order=order)
        np.multiply(xf, xf, out=sq[..., radius : radius + n])
        window = sliding_window_view(sq, 2 * radius + 1, axis=-1).sum(axis=-1, dtype=np.float32)
        return np.moveaxis(xf * np.power(bias + alpha * window, -beta), -1, 1)

    return [_float_lines(x, axis, dtype_of(ctx), lrn)]


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
    x = ctx.value(0)
    if x.size == 0:  # (a mean over an empty slice is NaN, with a warning)
        return [_empty_like_input(ctx)]
    gamma, beta, eps = (np.float32(ctx.scalar(i)) for i in (1, 2, 3))

    def instance(planes: np.ndarray) -> np.ndarray:
        xf = planes.astype(np.float32)
        mean = xf.mean(axis=1, keepdims=True, dtype=np.float32)
        var = np.square(xf - mean).mean(axis=1, keepdims=True, dtype=np.float32)
        return (xf - mean) * gamma / np.sqrt(var + eps) + beta

    # Each batch's and channel's spatial plane as a line: (N*C, H*W, 1) for NCHW, (N,
    # H*W, C) for NHWC.
    n, d1, d2, d3 = x.shape
    lines = x.reshape(n * d1, d2 * d3, 1) if ctx.scalar(4) else x.reshape(n, d1 * d2, d3)
    return [_float_lines(lines, 1, dtype_of(ctx), instance).reshape(x.shape)]


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
