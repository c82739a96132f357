"""FULLY_CONNECTED (Android 11 ``FullyConnected.cpp``).

The input (rank 2..4) is read as a [batch_size, input_size] matrix, input_size being the
weights' second dimension and batch_size = elements / input_size; the output is
[batch_size, num_units]. Quantized arithmetic is the convolutions' (see ``conv.py``):
int32 accumulation of zero-point-offset products plus bias, ``QuantizeMultiplier`` of
``double(inputScale * weightsScale) / outputScale``, activation clamp, saturation.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
    dtype_of,
    item_blocks,
)
from driver.operations.base import T as _T
from driver.operations.conv import (
    QUANT8,
    check_activation,
    exact_float_dtype,
    f32,
    requantizer,
)
from driver.operations.quant import apply_activation_float, quant_range

V = HalVersion


def _validate(ctx: OperationContext) -> None:
    """Android 11's FullyConnected.cpp ``validate`` checks the HAL version (the quant8
    output scale rule below) and, when every rank is known, ``validateShapes``: the ranks,
    the bias length against num_units and the input's element count against input_size.
    Those rules are strict then, deferrable (``prepare()``, at execution) while a rank is
    unknown; so are the fused activation and the bias scale, which only the kernel
    checks. Strict rules come first."""
    # Messages are built only on failure: validation runs these hooks per operation.
    quantized = ctx.input_type(0) in QUANT8
    if quantized:
        # The float32 product of float32 scales (their double product is exact, rounded once).
        product = f32(f32(ctx.input_scale(0)) * f32(ctx.input_scale(1)))
        # Before HAL 1.2 the output scale had to exceed inputScale * weightsScale.
        if ctx.input_type(0) == _T.TENSOR_QUANT8_ASYMM and not (f32(ctx.output_scale(0)) > product):
            ctx.require_version(V.V1_2)
    all_known = None not in (ctx.known_rank(0), ctx.known_rank(1), ctx.known_rank(2))
    ctx.check_rank(0, min_rank=2, max_rank=4, deferrable=not all_known)
    ctx.check_rank(1, exact=2, deferrable=not all_known)
    ctx.check_rank(2, exact=1, deferrable=not all_known)
    if all_known:
        _validate_shapes(ctx)
    # An activation that is not a constant raises Unknown: it must not skip the bias
    # scale rule below.
    with contextlib.suppress(Unknown):
        check_activation(ctx, 3)
    if not quantized:
        return
    bias_scale = f32(ctx.input_scale(2))
    if not abs(product - bias_scale) <= 1e-6 * min(product, bias_scale):
        raise ctx.invalid(
            f"input 2 (bias) scale must equal input scale * weights scale = {product!r}, "
            f"got {bias_scale!r}",
            deferrable=True,
        )


def _validate_shapes(ctx: OperationContext) -> None:
    """The part of ``validateShapes`` (strict: every rank is known and right) that
    :func:`_infer` checks too, when the shapes it needs are known: the bias length, and
    the element count when it gives a non-zero batch size (Android skips it otherwise)."""
    weights = ctx.shapes[1]
    if weights is None:
        return
    num_units, input_size = weights
    if num_units <= 0 or input_size <= 0:
        return  # _infer's "must be non-empty" (deferrable) comes first
    _check_sizes(ctx, num_units, input_size, zero_batch_allowed=True)


def _check_sizes(
    ctx: OperationContext, num_units: int, input_size: int, *, zero_batch_allowed: bool
) -> None:
    """The bias length against num_units and the input's element count against
    input_size, each once its own shapes are known (Android's validate rejects a bias
    that does not match the weights even when the input's batch size is unknown)."""
    bias = ctx.shapes[2]
    if bias is not None and bias[0] != num_units:
        raise ctx.invalid(
            f"input 2 (bias) has {bias[0]} elements, the weights have {num_units} units"
        )
    shape = ctx.shapes[0]
    if shape is None:
        return
    elements = math.prod(shape)  # Python ints: no int64 wrap, no numpy call cost
    if elements % input_size != 0 and not (zero_batch_allowed and elements < input_size):
        raise ctx.invalid(
            f"input 0 has {elements} elements (shape {list(shape)}), not a multiple of "
            f"the weights' input size {input_size}"
        )


def _infer(ctx: OperationContext) -> list[Shape]:
    ctx.check_rank(0, min_rank=2, max_rank=4)
    ctx.check_rank(1, exact=2)
    ctx.check_rank(2, exact=1)
    num_units, input_size = ctx.shape(1)
    if num_units <= 0 or input_size <= 0:
        raise ctx.invalid(f"input 1 (weights) must be non-empty, got shape {list(ctx.shape(1))}")
    _check_sizes(ctx, num_units, input_size, zero_batch_allowed=False)
    elements = math.prod(ctx.shape(0))
    ctx.shape(2)  # an unknown bias shape: the output shape waits for it (run time)
    return [(elements // input_size, num_units)]


_BLOCK_ELEMENTS = 1 << 20
"""Input plus output elements per block of batch rows of the quantized kernel: its
zero-point-offset float copy of the input, accumulators and int64 requantization
temporaries are per block, so they stay a few MB however large the batch."""


def _execute_quantized(ctx: OperationContext, x: np.ndarray, act: int) -> np.ndarray:
    """The quant8 kernel on the [batch_size, input_size] input ``x``, a block of rows at
    a time. Zero-point-offset operands are exact integers in the float type
    (:func:`exact_float_dtype`) whose products and sums are exact, so the result does not
    depend on the order of the matrix product or on the blocking."""
    w, b = ctx.value(1), ctx.value(2)
    zx = ctx.input_zero_point(0)
    qmin, qmax = quant_range(ctx.input_type(0))
    wq = np.subtract(w, ctx.input_zero_point(1), dtype=np.float64)  # small: the exact bound
    dtype = exact_float_dtype(max(zx - qmin, qmax - zx), wq, out_axis=0)
    wq_t = wq.astype(dtype).T
    finish = requantizer(ctx, b, np.float32(ctx.input_scale(1)), act)
    batch, input_size = x.shape
    out = np.empty((batch, w.shape[0]), dtype=dtype_of(ctx))
    for rows in item_blocks(batch, input_size + w.shape[0], _BLOCK_ELEMENTS):
        out[rows] = finish(np.subtract(x[rows], zx, dtype=dtype) @ wq_t)
    return out


def _execute(ctx: OperationContext) -> list[np.ndarray]:
    (out_shape,) = _infer(ctx)
    x, w, b = ctx.value(0), ctx.value(1), ctx.value(2)
    act = check_activation(ctx, 3)  # validation may not have known it (a model input)
    x = x.reshape(out_shape[0], w.shape[1])
    if ctx.input_type(0) in QUANT8:
        return [_execute_quantized(ctx, x, act)]
    out = x.astype(np.float32) @ w.astype(np.float32).T + b.astype(np.float32)
    return [apply_activation_float(out, act).astype(dtype_of(ctx), copy=False)]


def _sig(t: int, bias: int, version: HalVersion) -> Signature:
    return Signature((t, t, bias, _T.INT32), (t,), version)


FULLY_CONNECTED = OperationDeclaration(
    OperationType.FULLY_CONNECTED,
    (
        _sig(_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT32, V.V1_0),
        _sig(_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_INT32, V.V1_0),
        _sig(_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT16, V.V1_2),
        _sig(_T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_INT32, V.V1_3),
    ),
    infer_shapes=_infer,
    execute=_execute,
    validate=_validate,
    summary="Fully connected layer: input rows times transposed weights, plus bias, with "
    "fused activation; inputs of rank > 2 are flattened to [batch, input_size].",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (FULLY_CONNECTED,)
