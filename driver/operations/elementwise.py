"""Broadcasting binary arithmetic: ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU."""

from __future__ import annotations

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    dtype_of,
)
from driver.operations.base import T as _T
from driver.operations.quant import (
    activation_range_quantized,
    apply_activation_float,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)

V = HalVersion


def broadcast_shape(ctx: OperationContext, a: int = 0, b: int = 1) -> Shape:
    """NNAPI broadcasting (numpy rules, trailing dims aligned); invalid if incompatible."""
    sa, sb = ctx.shape(a), ctx.shape(b)
    try:
        return tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        raise ctx.invalid(
            f"inputs {a} and {b} cannot be broadcast: {list(sa)} vs {list(sb)}"
        ) from None


def _binary_with_activation(types_by_version):
    sigs = []
    for version, types in types_by_version:
        for t in types:
            sigs.append(Signature((t, t, _T.INT32), (t,), version))
    return tuple(sigs)


# --- ADD ---------------------------------------------------------------------------------


def _validate_binary(ctx: OperationContext) -> HalVersion | None:
    ctx.check_rank(0, max_rank=4)
    ctx.check_rank(1, max_rank=4)
    act = ctx.scalar(2)
    ctx.check(0 <= act <= 3, f"fused activation must be 0..3, got {act}")
    if ctx.input_type(0) == _T.TENSOR_INT32:
        ctx.check(act == 0, "TENSOR_INT32 arithmetic takes no fused activation")
    return None


def _infer_binary(ctx: OperationContext) -> list[Shape]:
    return [broadcast_shape(ctx)]


def _add_quantized(ctx: OperationContext, a: np.ndarray, b: np.ndarray, sign: int) -> np.ndarray:
    """Android's ``addQuant8``/``subQuant8``: both inputs rescaled to 2*max(scale) with a
    20-bit left shift, summed, requantized to the output scale."""
    s1, s2, so = ctx.input_scale(0), ctx.input_scale(1), ctx.output_scale(0)
    z1, z2, zo = ctx.input_zero_point(0), ctx.input_zero_point(1), ctx.output_zero_point(0)
    left_shift = 20
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * so))
    x1 = (a.astype(np.int64) - z1) * (1 << left_shift)
    x2 = (b.astype(np.int64) - z2) * (1 << left_shift)
    y1 = multiply_by_quantized_multiplier(x1, m1, sh1)
    y2 = multiply_by_quantized_multiplier(x2, m2, sh2)
    raw = multiply_by_quantized_multiplier(y1 + sign * y2, mo, sho) + zo
    lo, hi = activation_range_quantized(ctx.scalar(2), so, zo, ctx.output_type(0))
    return np.clip(raw, lo, hi).astype(dtype_of(ctx))


def _execute_add(ctx: OperationContext) -> list[np.ndarray]:
    a, b = ctx.value(0), ctx.value(1)
    t = ctx.input_type(0)
    if t in (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED):
        return [_add_quantized(ctx, a, b, +1)]
    if t == _T.TENSOR_INT32:
        return [(a.astype(np.int64) + b).astype(np.int32)]
    out = np.add(a, b, dtype=a.dtype)
    return [apply_activation_float(out, ctx.scalar(2))]


ADD = OperationDeclaration(
    OperationType.ADD,
    _binary_with_activation(
        [
            (V.V1_0, (_T.TENSOR_FLOAT32, _T.TENSOR_QUANT8_ASYMM)),
            (V.V1_2, (_T.TENSOR_FLOAT16,)),
            (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_INT32)),
        ]
    ),
    infer_shapes=_infer_binary,
    execute=_execute_add,
    validate=_validate_binary,
    summary="Elementwise sum of two broadcastable tensors, with fused activation.",
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (ADD,)
