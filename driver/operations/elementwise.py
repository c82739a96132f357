"""Broadcasting binary arithmetic: ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU.

Also the helpers the other elementwise families (activations, unary, comparisons,
quantization) share: broadcasting, fused activations with C++ ``std::min``/``std::max``
semantics, a branch-free select, Android's ``requantize``, and lookup tables for quantized
kernels.

Why lookup tables: a quant8 elementwise kernel is a function of one byte (unary) or two
bytes (binary), so evaluating the exact fixed-point recipe once per possible input (256
or 65536 evaluations) and gathering is both bit-identical to evaluating it per element
and an order of magnitude faster on large tensors. Tables are keyed by everything the
recipe depends on (operation, types, scales, zero points, activation) and cached.
Gathers cost per element gathered, so a unary lookup on a large tensor gathers byte
*pairs* through a 65536-entry table of entry pairs (half the gathers).
"""

from __future__ import annotations

import math
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from driver.hal.types import FusedActivation, HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    dtype_of,
    storage_dtype,
)
from driver.operations.base import T as _T
from driver.operations.quant import (
    activation_range_quantized,
    multiply_by_quantized_multiplier,
    quant_range,
    quantize_multiplier,
)

V = HalVersion

FLT_MAX = float(np.finfo(np.float32).max)
QUANT8_ASYMM_TYPES = (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED)


# ---------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------


_FLOAT32 = struct.Struct("<f")


def f32(x: float) -> float:
    """``x`` rounded to float32: operand scales are C++ floats, and Android's multiplier
    arithmetic starts from them. (``float(np.float32(x))`` through ``struct``, several
    times cheaper: validation rounds scales for every quantized operation.)"""
    try:
        return _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    except OverflowError:  # beyond float32's range: numpy's conversion gives inf
        return math.copysign(math.inf, x)


def broadcast_shapes(sa: Shape, sb: Shape) -> Shape | None:
    """``np.broadcast_shapes(sa, sb)`` on tuples of ints (trailing dims aligned, a dim
    of 1 stretches), or None if they are incompatible. Plain Python: numpy's costs
    microseconds per call, and validation broadcasts every binary operation."""
    if sa == sb:
        return tuple(sa)
    if len(sa) < len(sb):
        sa, sb = sb, sa
    k = len(sa) - len(sb)
    out = list(sa)
    for j, y in enumerate(sb):
        x = sa[k + j]
        if x != y:
            if x == 1:
                out[k + j] = y
            elif y != 1:
                return None
    return tuple(out)


def broadcast_shape(ctx: OperationContext, a: int = 0, b: int = 1) -> Shape:
    """NNAPI broadcasting (numpy rules, trailing dims aligned); invalid if incompatible."""
    sa, sb = ctx.shape(a), ctx.shape(b)
    out = broadcast_shapes(sa, sb)
    if out is None:
        raise ctx.invalid(f"inputs {a} and {b} cannot be broadcast: {list(sa)} vs {list(sb)}")
    return out


def same_shape(
    ctx: OperationContext, indexes: tuple[int, ...], *, deferrable: bool = False
) -> Shape:
    """The common shape of inputs ``indexes``; invalid if they differ (``deferrable``:
    for a ``validate`` hook, where Android checks it only in ``prepare()``)."""
    first = ctx.shape(indexes[0])
    for i in indexes[1:]:
        s = ctx.shape(i)
        if s != first:
            raise ctx.invalid(
                f"inputs {indexes[0]} and {i} must have the same shape: {list(first)} vs {list(s)}",
                deferrable=deferrable,
            )
    return first


def reject_zero_sized(ctx: OperationContext, *inputs: int) -> None:
    """Android runs most operations only on non-empty tensors: those registered without
    ``allowZeroSizedInput`` fail on a zero-sized input (known only at run time)."""
    for i in inputs:
        s = ctx.shapes[i]
        if s is not None and 0 in s:
            raise ctx.invalid(f"input {i} is zero-sized {list(s)}; this operation needs elements")


def activation_code(ctx: OperationContext, i: int) -> int:
    """The fused activation scalar at input ``i``, checked to be a FuseCode (deferrable:
    Android's validation checks only its type; the kernels' activation switch fails on
    another value, at execution)."""
    act = ctx.scalar(i)
    if act not in (0, 1, 2, 3):  # the message only on failure: this runs per operation
        raise ctx.invalid(
            f"input {i}: fused activation must be 0..3 (NONE..RELU6), got {act}", deferrable=True
        )
    return act


_FLOAT_BOUNDS = {
    FusedActivation.NONE: (-FLT_MAX, FLT_MAX),
    FusedActivation.RELU: (0.0, FLT_MAX),
    FusedActivation.RELU1: (-1.0, 1.0),
    FusedActivation.RELU6: (0.0, 6.0),
}


def apply_fused_float(x: np.ndarray, activation: int) -> np.ndarray:
    """``std::min(std::max(x, lo), hi)`` with ``CalculateActivationRangeFloat``'s bounds,
    in place. NaN propagates; even with NONE, float32 ±inf clamps to ±FLT_MAX as Android's
    kernels do. Float16 kernels run in float32 and convert back, where FLT_MAX becomes inf
    again, so for float16 only finite bounds matter."""
    lo, hi = _FLOAT_BOUNDS[FusedActivation(activation)]
    if x.dtype == np.float16:
        if activation == FusedActivation.NONE:
            return x
        if hi == FLT_MAX:
            return np.maximum(x, np.float16(lo), out=x)
    return np.clip(x, x.dtype.type(lo), x.dtype.type(hi), out=x)


def float_kernel(x: np.ndarray) -> np.ndarray:
    """The float32 view of a float input: Android's float16 kernels convert to float32,
    compute, and round the result back (see :func:`float_result`)."""
    return x.astype(np.float32, copy=False)


def float_result(x: np.ndarray, ctx: OperationContext) -> np.ndarray:
    """A float32 result in the output's type (float16 overflows to inf, as in C++)."""
    with np.errstate(over="ignore"):
        return x.astype(dtype_of(ctx), copy=False)


def bitwise_select(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``cond ? a : b`` elementwise (broadcasting), bit-exact for any dtype (NaN payloads,
    signed zeros) and branch-free: ``np.where`` is several times slower on random masks."""
    dt = np.result_type(a, b)
    a = np.asarray(a, dtype=dt)
    b = np.asarray(b, dtype=dt)
    if dt == np.bool_:
        return (cond & a) | (~cond & b)
    ui = np.dtype(f"u{dt.itemsize}")
    shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    mask = np.broadcast_to(cond, shape).astype(ui)
    np.negative(mask, out=mask)  # 0 or all ones
    bi = b.view(ui)
    out = np.bitwise_and(np.bitwise_xor(a.view(ui), bi), mask)
    out ^= bi
    return out.view(dt)


def byte_values(type_code: int) -> np.ndarray:
    """All 256 values of a quant8 type as int64, in the order of their byte pattern (the
    order :func:`lookup_unary`/:func:`lookup_binary` index tables by)."""
    raw = np.arange(256, dtype=np.uint8)
    if storage_dtype(type_code) == np.int8:
        return raw.view(np.int8).astype(np.int64)
    return raw.astype(np.int64)


_TABLE_CACHE: OrderedDict[Hashable, np.ndarray] = OrderedDict()
_TABLE_LOCK = threading.Lock()
_TABLE_CACHE_SIZE = 256  # 64 KiB per binary table: at most 16 MiB


def cached_table(key: Hashable, build: Callable[[], np.ndarray]) -> np.ndarray:
    """The table for ``key`` (built with ``build()`` on first use), LRU-cached."""
    with _TABLE_LOCK:
        table = _TABLE_CACHE.get(key)
        if table is not None:
            _TABLE_CACHE.move_to_end(key)
            return table
    table = build()
    table.setflags(write=False)
    with _TABLE_LOCK:
        _TABLE_CACHE[key] = table
        while len(_TABLE_CACHE) > _TABLE_CACHE_SIZE:
            _TABLE_CACHE.popitem(last=False)
    return table


PAIR_LOOKUP_MIN_ELEMENTS = 16384
"""Tensor size from which a unary lookup with one-byte results gathers byte pairs: the
pair table (65536 entries) is built once per table and then halves every gather."""

_PAIR = np.dtype("<u2")  # explicit byte order: pair value = first byte | second byte << 8


def _pair_table(table: np.ndarray) -> np.ndarray:
    """The 65536-entry table mapping a pair of input bytes to the pair of their entries."""
    raw = table.view(np.uint8).astype(_PAIR)
    return raw[np.arange(65536) & 255] | (raw[np.arange(65536) >> 8] << 8)


def lookup_unary(
    key: Hashable, fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray, in_type: int
) -> np.ndarray:
    """``fn`` (an exact recipe on int64 input values) applied to quant8 tensor ``x``
    through a cached 256-entry table."""
    table = cached_table(("unary", in_type, key), lambda: fn(byte_values(in_type)))
    raw = x.view(np.uint8)
    if (
        table.dtype.itemsize == 1
        and x.size >= PAIR_LOOKUP_MIN_ELEMENTS
        and x.size % 2 == 0
        and x.flags.c_contiguous
    ):
        pairs = cached_table(("pairs", in_type, key), lambda: _pair_table(table))
        out = np.take(pairs, raw.reshape(-1).view(_PAIR))
        return out.view(table.dtype).reshape(x.shape)
    return np.take(table, raw)


BINARY_TABLE_MIN_ELEMENTS = 65536
"""Output size from which a binary quant8 kernel gathers from a 256x256 table instead of
evaluating its recipe per element: building the table costs one evaluation on 65536
pairs, so from here on it never costs more than evaluating directly."""


def lookup_binary(
    key: Hashable,
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    a: np.ndarray,
    b: np.ndarray,
    a_type: int,
    b_type: int,
) -> np.ndarray:
    """``fn(a, b)`` (an exact recipe on broadcastable int64 values) for quant8 tensors,
    direct on small outputs and through a cached 256x256 table on large ones."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    if int(np.prod(shape, dtype=np.int64)) < BINARY_TABLE_MIN_ELEMENTS:
        return fn(a.astype(np.int64), b.astype(np.int64))

    def build() -> np.ndarray:
        grid_a = byte_values(a_type)[:, None]
        grid_b = byte_values(b_type)[None, :]
        return np.ascontiguousarray(fn(grid_a, grid_b)).reshape(-1)

    table = cached_table(("binary", a_type, b_type, key), build)
    index = a.view(np.uint8).astype(np.uint16)
    index <<= 8
    if index.shape == shape:
        index |= b.view(np.uint8)
    else:
        index = index | b.view(np.uint8)
    return np.take(table, index)


def quant_params(ctx: OperationContext, i: int, *, output: bool = False) -> tuple[float, int]:
    """(scale as float32, zero point) of input or output ``i``."""
    if output:
        return f32(ctx.output_scale(i)), int(ctx.output_zero_point(i))
    return f32(ctx.input_scale(i)), int(ctx.input_zero_point(i))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """``std::round`` on float64 values (exact: no ``x + 0.5`` rounding)."""
    t = np.trunc(x)
    return t + np.trunc((x - t) * 2.0)


def requantize(
    values: np.ndarray,
    in_scale: float,
    in_zero_point: int,
    out_scale: float,
    out_zero_point: int,
    out_type: int,
) -> np.ndarray:
    """Android's ``requantize`` (OperationsUtils.h): ``(v - zp) * scale`` in float, divided
    by the new scale in double, offset, rounded half away from zero and saturated.

    For TENSOR_QUANT8_ASYMM_SIGNED the rounding happens with the zero point shifted by
    +128, so that the signed kernel is the unsigned one shifted by 128 exactly, as the
    HAL requires. (Android's int8 instance rounds after adding the signed zero point and
    so differs by one at negative exact ties, e.g. -3.5.)"""
    real = (
        (values.astype(np.int64) - in_zero_point).astype(np.float32) * np.float32(in_scale)
    ).astype(np.float64)
    shift = 128 if out_type == _T.TENSOR_QUANT8_ASYMM_SIGNED else 0
    q = round_half_away(real / out_scale + (out_zero_point + shift)) - shift
    lo, hi = quant_range(out_type)
    return np.clip(q, lo, hi).astype(storage_dtype(out_type))


def requantize_tensor(
    x: np.ndarray, in_type: int, in_scale: float, in_zero_point: int, out_scale: float,
    out_zero_point: int, out_type: int,
) -> np.ndarray:  # fmt: skip
    """:func:`requantize` of a quant8 tensor, through a 256-entry table."""
    if (in_scale, in_zero_point, in_type) == (out_scale, out_zero_point, out_type):
        return x.copy()

    def recipe(v: np.ndarray) -> np.ndarray:
        return requantize(v, in_scale, in_zero_point, out_scale, out_zero_point, out_type)

    key = ("requantize", in_scale, in_zero_point, out_scale, out_zero_point, out_type)
    return lookup_unary(key, recipe, x, in_type)


def clamp_float(x: np.ndarray, lo: float, hi: float, nan: float | None = None) -> np.ndarray:
    """``np.clip`` (fast, NaN-propagating) into a new array; with ``nan`` set, NaNs become
    ``nan`` instead, as ``std::max(lo, x)`` (lo first) makes them ``lo``."""
    out = np.clip(x, x.dtype.type(lo), x.dtype.type(hi))
    if nan is not None:
        replace_nan(out, nan)
    return out


def replace_nan(x: np.ndarray, value: float) -> np.ndarray:
    """Set NaNs of ``x`` to ``value`` in place (checked first: NaNs are rare)."""
    if x.dtype.kind == "f" and np.isnan(x).any():
        x[np.isnan(x)] = value
    return x


def _float_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``std::max(a, b)`` = ``a < b ? b : a``: NaN only from ``a``."""
    return np.maximum(a, np.fmax(b, a))


def _float_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``std::min(a, b)`` = ``b < a ? b : a``: NaN only from ``a``."""
    return np.minimum(a, np.fmin(b, a))


# ---------------------------------------------------------------------------------------
# ADD, SUB, MUL, DIV: broadcasting arithmetic with a fused activation
# ---------------------------------------------------------------------------------------


def _binary_with_activation(types_by_version) -> tuple[Signature, ...]:
    sigs = []
    for version, types in types_by_version:
        for t in types:
            sigs.append(Signature((t, t, _T.INT32), (t,), version))
    return tuple(sigs)


def _validate_binary(ctx: OperationContext) -> None:
    # Android 11's BroadcastOps validate checks the ranks (when both are known) and, for a
    # TENSOR_QUANT8_ASYMM MUL, output.scale > input1.scale * input2.scale. The other rules
    # here are its prepare()'s and kernels' (deferrable), so they come after those.
    both_ranks_known = ctx.known_rank(0) is not None and ctx.known_rank(1) is not None
    if both_ranks_known:
        ctx.check_rank(0, max_rank=4)
        ctx.check_rank(1, max_rank=4)
    t = ctx.input_type(0)
    op = ctx.operation_type
    if t in QUANT8_ASYMM_TYPES:
        s1, s2, so = f32(ctx.input_scale(0)), f32(ctx.input_scale(1)), f32(ctx.output_scale(0))
        if op == OperationType.MUL:
            # mulQuant8 needs a multiplier below one (QuantizeMultiplierSmallerThanOneExp).
            # The float32 product: the double product of float32s is exact, rounded once.
            product = f32(s1 * s2)
            if not so > product:
                raise ctx.invalid(
                    f"output scale {so} must be greater than input scales' product "
                    f"{s1} * {s2} = {product}",
                    deferrable=t != _T.TENSOR_QUANT8_ASYMM,  # validate checks unsigned only
                )
    if not both_ranks_known:  # prepare() checks the ranks
        ctx.check_rank(0, max_rank=4, deferrable=True)
        ctx.check_rank(1, max_rank=4, deferrable=True)
    if t in QUANT8_ASYMM_TYPES and op != OperationType.MUL:
        m = 2.0 * max(s1, s2) / ((1 << 20) * so)
        if not m < 1.0:
            raise ctx.invalid(
                f"output scale {so} is too small for input scales {s1}, {s2} "
                f"(output multiplier {m} must be below 1)",
                deferrable=True,
            )
    act = activation_code(ctx, 2)
    if t == _T.TENSOR_INT32 and act != 0:  # executeInt32's NN_RET_CHECK, at execution
        raise ctx.invalid(
            f"TENSOR_INT32 arithmetic takes no fused activation, got {act}", deferrable=True
        )


def _infer_binary(ctx: OperationContext) -> list[Shape]:
    return [broadcast_shape(ctx)]


def _add_sub_recipe(ctx: OperationContext, subtract: bool):
    """Android's ``addQuant8``/``subQuant8`` (tflite ``AddElementwise``): both inputs
    rescaled to 2*max(scale) with a 20-bit left shift, summed, requantized to the output
    scale. SUB negates the second input's *multiplier*, as Android does (negating the
    rescaled value instead would round ties differently)."""
    (s1, z1), (s2, z2) = quant_params(ctx, 0), quant_params(ctx, 1)
    so, zo = quant_params(ctx, 0, output=True)
    act, out_type = activation_code(ctx, 2), ctx.output_type(0)
    out_dtype = dtype_of(ctx)

    def recipe(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # The multipliers are derived here, not per run: a cached table skips them.
        left_shift = 20
        twice_max = 2.0 * max(s1, s2)
        m1, sh1 = quantize_multiplier(s1 / twice_max)
        m2, sh2 = quantize_multiplier(s2 / twice_max)
        if subtract:
            m2 = -m2
        mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * so))
        lo, hi = activation_range_quantized(act, so, zo, out_type)
        y1 = multiply_by_quantized_multiplier((a - z1) << left_shift, m1, sh1)
        y2 = multiply_by_quantized_multiplier((b - z2) << left_shift, m2, sh2)
        raw = multiply_by_quantized_multiplier(y1 + y2, mo, sho) + zo
        return np.clip(raw, lo, hi).astype(out_dtype)

    key = ("sub" if subtract else "add", s1, z1, s2, z2, so, zo, act, out_type)
    return key, recipe


def _mul_recipe(ctx: OperationContext):
    """Android's ``mulQuant8`` (tflite ``MulElementwise``): the product of the centered
    inputs times one multiplier (input scales' float product / output scale)."""
    (s1, z1), (s2, z2) = quant_params(ctx, 0), quant_params(ctx, 1)
    so, zo = quant_params(ctx, 0, output=True)
    act, out_type = activation_code(ctx, 2), ctx.output_type(0)
    out_dtype = dtype_of(ctx)

    def recipe(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        product = float(np.float32(s1) * np.float32(s2))  # float * float in the C++
        m, sh = quantize_multiplier(product / so)
        lo, hi = activation_range_quantized(act, so, zo, out_type)
        raw = multiply_by_quantized_multiplier((a - z1) * (b - z2), m, sh) + zo
        return np.clip(raw, lo, hi).astype(out_dtype)

    return ("mul", s1, z1, s2, z2, so, zo, act, out_type), recipe


def _binary_quantized(ctx: OperationContext, key, recipe) -> np.ndarray:
    return lookup_binary(
        key, recipe, ctx.value(0), ctx.value(1), ctx.input_type(0), ctx.input_type(1)
    )


def _int32_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Android's int32 DIV: floor division; division by zero gives 0 (Android logs an
    error and writes 0), INT32_MIN / -1 wraps."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out = np.floor_divide(a.astype(np.int64), b.astype(np.int64))
    out = np.where(np.broadcast_to(b, out.shape) == 0, 0, out) if (b == 0).any() else out
    return out.astype(np.int32)


_FLOAT_OPS = {
    OperationType.ADD: np.add,
    OperationType.SUB: np.subtract,
    OperationType.MUL: np.multiply,
    OperationType.DIV: np.divide,
}
_INT32_OPS = {
    OperationType.ADD: np.add,  # numpy int32 arithmetic wraps, as the C++ does in practice
    OperationType.SUB: np.subtract,
    OperationType.MUL: np.multiply,
    OperationType.DIV: _int32_div,
}


def _execute_binary(ctx: OperationContext) -> list[np.ndarray]:
    a, b = ctx.value(0), ctx.value(1)
    t = ctx.input_type(0)
    op = OperationType(ctx.operation_type)
    if t in QUANT8_ASYMM_TYPES:
        if op == OperationType.MUL:
            key, recipe = _mul_recipe(ctx)
        else:
            key, recipe = _add_sub_recipe(ctx, subtract=op == OperationType.SUB)
        return [_binary_quantized(ctx, key, recipe)]
    if t == _T.TENSOR_INT32:
        activation_code(ctx, 2)
        return [_INT32_OPS[op](a, b).astype(np.int32, copy=False)]
    # Float16 results of one IEEE operation computed in float32 and rounded back equal
    # numpy's float16 arithmetic (double rounding is innocuous at 24 vs 11 bits).
    with np.errstate(all="ignore"):
        out = _FLOAT_OPS[op](a, b)
        return [apply_fused_float(out.astype(a.dtype, copy=False), activation_code(ctx, 2))]


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
    execute=_execute_binary,
    validate=_validate_binary,
    summary="Elementwise sum of two broadcastable tensors, with fused activation.",
)

SUB = OperationDeclaration(
    OperationType.SUB,
    _binary_with_activation(
        [
            (V.V1_1, (_T.TENSOR_FLOAT32,)),
            (V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_QUANT8_ASYMM)),
            (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_INT32)),
        ]
    ),
    infer_shapes=_infer_binary,
    execute=_execute_binary,
    validate=_validate_binary,
    summary="Elementwise difference input0 - input1 of broadcastable tensors, with fused activation.",
)

MUL = OperationDeclaration(
    OperationType.MUL,
    _binary_with_activation(
        [
            (V.V1_0, (_T.TENSOR_FLOAT32, _T.TENSOR_QUANT8_ASYMM)),
            (V.V1_2, (_T.TENSOR_FLOAT16,)),
            (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_INT32)),
        ]
    ),
    infer_shapes=_infer_binary,
    execute=_execute_binary,
    validate=_validate_binary,
    summary="Elementwise product of two broadcastable tensors, with fused activation; "
    "quantized output scale must exceed the input scales' product.",
)

DIV = OperationDeclaration(
    OperationType.DIV,
    _binary_with_activation(
        [
            (V.V1_1, (_T.TENSOR_FLOAT32,)),
            (V.V1_2, (_T.TENSOR_FLOAT16,)),
            (V.V1_3, (_T.TENSOR_INT32,)),
        ]
    ),
    infer_shapes=_infer_binary,
    execute=_execute_binary,
    validate=_validate_binary,
    summary="Elementwise quotient input0 / input1 of broadcastable tensors, with fused "
    "activation; int32 division floors and gives 0 for a zero divisor.",
)


# ---------------------------------------------------------------------------------------
# MAXIMUM, MINIMUM, POW, PRELU: broadcasting, no activation
# ---------------------------------------------------------------------------------------


def _same_type_sigs(types_by_version, arity: int = 2) -> tuple[Signature, ...]:
    return tuple(
        Signature((t,) * arity, (t,), version) for version, types in types_by_version for t in types
    )


def _validate_plain_binary(ctx: OperationContext) -> None:
    """Nothing beyond what the signatures check."""


def _infer_plain_binary(ctx: OperationContext) -> list[Shape]:
    reject_zero_sized(ctx, 0, 1)
    return [broadcast_shape(ctx)]


def _execute_max_min(ctx: OperationContext) -> list[np.ndarray]:
    a, b = ctx.value(0), ctx.value(1)
    t = ctx.input_type(0)
    is_max = ctx.operation_type == OperationType.MAXIMUM
    if t in QUANT8_ASYMM_TYPES:
        # Android's MAXIMUM/MINIMUM requantize both inputs to the output's scale first.
        (s1, z1), (s2, z2) = quant_params(ctx, 0), quant_params(ctx, 1)
        so, zo = quant_params(ctx, 0, output=True)
        ot = ctx.output_type(0)

        def recipe(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            qx = requantize(x, s1, z1, so, zo, ot)
            qy = requantize(y, s2, z2, so, zo, ot)
            return np.maximum(qx, qy) if is_max else np.minimum(qx, qy)

        key = ("max" if is_max else "min", s1, z1, s2, z2, so, zo)
        return [lookup_binary(key, recipe, a, b, t, ctx.input_type(1))]
    if t == _T.TENSOR_INT32:
        return [np.maximum(a, b) if is_max else np.minimum(a, b)]
    return [_float_max(a, b) if is_max else _float_min(a, b)]


_MAX_MIN_TYPES = [
    (V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_ASYMM)),
    (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED,)),
]

MAXIMUM = OperationDeclaration(
    OperationType.MAXIMUM,
    _same_type_sigs(_MAX_MIN_TYPES),
    infer_shapes=_infer_plain_binary,
    execute=_execute_max_min,
    validate=_validate_plain_binary,
    summary="Elementwise maximum of two broadcastable tensors; quantized inputs are "
    "requantized to the output's scale and zero point.",
)

MINIMUM = OperationDeclaration(
    OperationType.MINIMUM,
    _same_type_sigs(_MAX_MIN_TYPES),
    infer_shapes=_infer_plain_binary,
    execute=_execute_max_min,
    validate=_validate_plain_binary,
    summary="Elementwise minimum of two broadcastable tensors; quantized inputs are "
    "requantized to the output's scale and zero point.",
)


def _execute_pow(ctx: OperationContext) -> list[np.ndarray]:
    a, b = ctx.value(0), ctx.value(1)
    with np.errstate(all="ignore"):
        out = np.power(float_kernel(a), float_kernel(b))
    return [float_result(out, ctx)]


POW = OperationDeclaration(
    OperationType.POW,
    _same_type_sigs([(V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32))]),
    infer_shapes=_infer_plain_binary,
    execute=_execute_pow,
    validate=_validate_plain_binary,
    summary="Elementwise base ** exponent of two broadcastable float tensors.",
)


def _prelu_recipe(ctx: OperationContext):
    """Android's PRELU quant8 kernel: non-negative inputs rescaled by in/out scale, negative
    ones multiplied by the centered alpha and rescaled by in*alpha/out scale."""
    (s1, z1), (s2, z2) = quant_params(ctx, 0), quant_params(ctx, 1)
    so, zo = quant_params(ctx, 0, output=True)
    out_type = ctx.output_type(0)
    out_dtype = dtype_of(ctx)

    def recipe(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        # real_multiplier_pos is float / float in the C++; the negative one float product
        # / float. Extreme scales overflow to inf, as in the C++ (QuantizeMultiplier fails).
        with np.errstate(over="ignore"):
            real_pos = float(np.float32(s1) / np.float32(so))
            real_neg = float(np.float32(s1) * np.float32(s2)) / so
        m_pos, sh_pos = quantize_multiplier(real_pos)
        m_neg, sh_neg = quantize_multiplier(real_neg)
        lo, hi = quant_range(out_type)
        centered = x - z1
        pos = multiply_by_quantized_multiplier(centered, m_pos, sh_pos)
        neg = multiply_by_quantized_multiplier(centered * (alpha - z2), m_neg, sh_neg)
        raw = np.where(centered >= 0, pos, neg) + zo
        return np.clip(raw, lo, hi).astype(out_dtype)

    return ("prelu", s1, z1, s2, z2, so, zo, out_type), recipe


def _execute_prelu(ctx: OperationContext) -> list[np.ndarray]:
    x, alpha = ctx.value(0), ctx.value(1)
    t = ctx.input_type(0)
    if t in QUANT8_ASYMM_TYPES:
        key, recipe = _prelu_recipe(ctx)
        return [lookup_binary(key, recipe, x, alpha, t, ctx.input_type(1))]
    # x >= 0 ? x : x * alpha, branch-free: max(x, 0) + min(x, 0) * alpha is exact (up to
    # the sign of zero) whenever alpha is finite; otherwise select explicitly.
    with np.errstate(all="ignore"):
        if np.isfinite(alpha).all():
            full = x.shape == np.broadcast_shapes(x.shape, alpha.shape)
            neg = np.clip(x, -np.inf, 0)
            neg = np.multiply(neg, alpha, out=neg if full else None)
            out = np.clip(x, 0, np.inf)
            out = np.add(out, neg, out=out if full else None)
        else:
            out = bitwise_select(x >= 0, x, x * alpha)
    return [out.astype(x.dtype, copy=False)]


PRELU = OperationDeclaration(
    OperationType.PRELU,
    _same_type_sigs(
        [
            (V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_QUANT8_ASYMM)),
            (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED,)),
        ]
    ),
    infer_shapes=_infer_plain_binary,
    execute=_execute_prelu,
    validate=_validate_plain_binary,
    summary="Parametric ReLU: x if x >= 0 else alpha * x, alpha broadcast against x.",
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    ADD,
    SUB,
    MUL,
    DIV,
    MAXIMUM,
    MINIMUM,
    POW,
    PRELU,
)
