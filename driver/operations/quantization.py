"""Type conversions: CAST, QUANTIZE, DEQUANTIZE.

DEQUANTIZE computes ``scale * (q - zeroPoint)`` in float (per channel for
TENSOR_QUANT8_SYMM_PER_CHANNEL) and rounds to float16 when the output is. QUANTIZE
computes ``zeroPoint + std::round(x / scale)`` in float and saturates with
``std::max(lo, std::min(hi, v))``, so NaN saturates to the type's maximum. CAST converts
values (ignoring quantization parameters); float to integer truncates toward zero,
saturating out-of-range values and giving 0 for NaN (the AArch64 conversion semantics of
Android devices: the C++ is undefined there).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    dtype_of,
    item_blocks,
    storage_dtype,
)
from driver.operations.base import T as _T
from driver.operations.elementwise import f32, quant_params
from driver.operations.quant import quant_range

V = HalVersion


def _infer_same(ctx: OperationContext) -> list[Shape]:
    return [ctx.shape(0)]


# --- DEQUANTIZE --------------------------------------------------------------------------


def _validate_dequantize(ctx: OperationContext) -> None:
    ctx.check_rank(0, max_rank=4)


def _execute_dequantize(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    centered = (x.astype(np.int32) - np.int32(ctx.input_zero_point(0))).astype(np.float32)
    channel = ctx.channel_quant(0)
    if channel is not None:
        shape = [1] * x.ndim
        shape[channel.channel_dim] = -1
        scale = np.asarray(channel.scales, dtype=np.float32).reshape(shape)
    else:
        scale = np.float32(f32(ctx.input_scale(0)))
    return [(centered * scale).astype(dtype_of(ctx), copy=False)]


_DEQUANTIZE_SIGS = (
    Signature((_T.TENSOR_QUANT8_ASYMM,), (_T.TENSOR_FLOAT32,), V.V1_0),
    Signature((_T.TENSOR_QUANT8_ASYMM,), (_T.TENSOR_FLOAT16,), V.V1_2),
    *(
        Signature((t,), (o,), V.V1_2)
        for t in (_T.TENSOR_QUANT8_SYMM, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
        for o in (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32)
    ),
    *(
        Signature((_T.TENSOR_QUANT8_ASYMM_SIGNED,), (o,), V.V1_3)
        for o in (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32)
    ),
)

DEQUANTIZE = OperationDeclaration(
    OperationType.DEQUANTIZE,
    _DEQUANTIZE_SIGS,
    infer_shapes=_infer_same,
    execute=_execute_dequantize,
    validate=_validate_dequantize,
    summary="Real values scale * (q - zeroPoint) of a quantized tensor (per channel for "
    "per-channel quantization), as float32 or float16; rank <= 4.",
)


# --- QUANTIZE ----------------------------------------------------------------------------


def _round_half_away_f32(y: np.ndarray) -> np.ndarray:
    """``std::round`` on float32 without the ``y + 0.5`` rounding error (finite ``y``)."""
    t = np.trunc(y)
    return t + np.trunc((y - t) * np.float32(2))


_BLOCK_ELEMENTS = 1 << 20
"""Elements per block of QUANTIZE and of a float-to-integer CAST: their float32 and
float64 temporaries, 16-24 bytes an element, are per block. Both are elementwise and
each block picks its own path (the paths agree where both apply), so any blocking gives
the same result."""


def _by_blocks(
    x: np.ndarray, dtype: np.dtype, convert: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """The elementwise ``convert`` of ``x`` as ``dtype``, a block of elements at a time."""
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=dtype)
    for block in item_blocks(flat.size, 1, _BLOCK_ELEMENTS):
        out[block] = convert(flat[block])
    return out.reshape(x.shape)


def quantize_float(x: np.ndarray, scale: float, zero_point: int, out_type: int) -> np.ndarray:
    """Android's ``quantizeToQuant8``: ``max(lo, min(hi, zp + round(x / scale)))`` in
    float (``std::min(hi, NaN)`` is ``hi``)."""
    return _by_blocks(
        x, storage_dtype(out_type), lambda v: _quantize_block(v, scale, zero_point, out_type)
    )


def _quantize_block(x: np.ndarray, scale: float, zero_point: int, out_type: int) -> np.ndarray:
    lo, hi = quant_range(out_type)
    with np.errstate(all="ignore"):
        y = x.astype(np.float32, copy=False) / np.float32(scale)
        if np.isfinite(y).all():
            q = _round_half_away_f32(y)
            q += np.float32(zero_point)
            np.clip(q, lo, hi, out=q)
        else:
            y64 = y.astype(np.float64)
            q = np.where(np.isfinite(y64), np.trunc(y64 + np.copysign(0.5, y64)), y64)
            q = np.float32(zero_point) + q.astype(np.float32)
            q = np.maximum(np.fmin(q, np.float32(hi)), np.float32(lo))  # NaN -> hi
    return q


def _execute_quantize(ctx: OperationContext) -> list[np.ndarray]:
    scale, zp = quant_params(ctx, 0, output=True)
    return [quantize_float(ctx.value(0), scale, zp, ctx.output_type(0))]


QUANTIZE = OperationDeclaration(
    OperationType.QUANTIZE,
    tuple(
        Signature((i,), (o,), v)
        for o, v in ((_T.TENSOR_QUANT8_ASYMM, V.V1_2), (_T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3))
        for i in (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32)
    ),
    infer_shapes=_infer_same,
    execute=_execute_quantize,
    validate=lambda ctx: None,
    summary="Quantize a float tensor: zeroPoint + round(x / scale), saturated (half away "
    "from zero; NaN saturates high).",
)


# --- CAST --------------------------------------------------------------------------------

_CAST_NUMERIC = (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_ASYMM)
_CAST_IDENTITY_1_3 = (
    _T.TENSOR_BOOL8,
    _T.TENSOR_QUANT16_ASYMM,
    _T.TENSOR_QUANT16_SYMM,
    _T.TENSOR_QUANT8_ASYMM_SIGNED,
    _T.TENSOR_QUANT8_SYMM,
)


def _float_to_int(x: np.ndarray, lo: int, hi: int, dtype: type) -> np.ndarray:
    """Truncate toward zero, saturating to [lo, hi], NaN to 0 (as ``a < 0 ? 0 : ...``
    then ``static_cast`` does for uint8, and AArch64 ``fcvtzs`` for int32), as ``dtype``."""
    return _by_blocks(x, np.dtype(dtype), lambda v: _float_to_int_block(v, lo, hi))


def _float_to_int_block(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    if x.size == 0 or (float(x.min()) >= lo and float(x.max()) < hi + 1):  # in range: fast
        return x
    with np.errstate(invalid="ignore"):
        y = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=hi, neginf=lo)
        return np.trunc(np.clip(y, lo, hi))


def _execute_cast(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    it, ot = ctx.input_type(0), ctx.output_type(0)
    out_dtype = dtype_of(ctx)
    if it == ot:
        return [x.copy()]
    if ot == _T.TENSOR_QUANT8_ASYMM:
        if x.dtype.kind == "f":
            return [_float_to_int(x, 0, 255, np.uint8)]
        return [np.clip(x, 0, 255).astype(np.uint8)]
    if ot == _T.TENSOR_INT32 and x.dtype.kind == "f":
        return [_float_to_int(x, -(2**31), 2**31 - 1, np.int32)]
    with np.errstate(over="ignore"):  # int32 -> float16 overflows to inf, as in C++
        return [x.astype(out_dtype)]


CAST = OperationDeclaration(
    OperationType.CAST,
    (
        *(Signature((i,), (o,), V.V1_2) for i in _CAST_NUMERIC for o in _CAST_NUMERIC),
        *(Signature((t,), (t,), V.V1_3) for t in _CAST_IDENTITY_1_3),
    ),
    infer_shapes=_infer_same,
    execute=_execute_cast,
    validate=lambda ctx: None,
    summary="Convert values between float16, float32, int32 and quant8 (raw values, "
    "quantization ignored; float to integer truncates and saturates); same-type copies "
    "of bool8 and the other quantized types since HAL 1.3.",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (DEQUANTIZE, QUANTIZE, CAST)
