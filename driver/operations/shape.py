"""Shape and data-movement operations.

RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, SPLIT, SLICE, STRIDED_SLICE, PAD,
PAD_V2, TILE, GATHER, FILL, RANK, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, DEPTH_TO_SPACE,
SPACE_TO_DEPTH, CHANNEL_SHUFFLE.

Except CONCATENATION (which requantizes inputs whose scale differs from the output's) these
operations only move values, so every kernel works on the storage arrays directly and the
quantized variants need no arithmetic. Where NNAPI's documentation says a quantized output
"must have the same scale and zeroPoint as input0", validation enforces it: Android's CPU
executor gives such an output the input's quantization (and fails a model output that
declares another), so a model that breaks the rule has no defined result.

Conventions shared with :mod:`driver.operations.reduction` and
:mod:`driver.operations.lookup`: value-only rules (a permutation, block sizes >= 1) are
checked by helpers that both ``validate`` and ``infer_shapes`` call, so they hold for
constants at validation and for run-time inputs alike. Android 11's validation checks only
these operations' operand counts, types, versions and (some) ranks; it checks such
parameter values (axes, shape and permutation vectors, split counts, strides, paddings,
multiples, block sizes, groups, k) in ``prepare()``, at execution, so their rejections are
``deferrable`` (see :class:`driver.hal.types.HalError`). Rules that depend on input *data*
(an index out of range) are checked by the kernel and fail with GENERAL_FAILURE, as
Android's ``CpuExecutor`` reports ``ANEURALNETWORKS_OP_FAILED`` (a constant GATHER index
out of range is also rejected at validation, deferrable).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from driver.hal.types import ErrorStatus, HalError, HalVersion, OperandLifeTime, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
    dtype_of,
)
from driver.operations.base import T as _T
from driver.operations.elementwise import lookup_unary
from driver.operations.quant import round_half_away

V = HalVersion
OP = OperationType

F16 = _T.TENSOR_FLOAT16
F32 = _T.TENSOR_FLOAT32
I32 = _T.TENSOR_INT32
Q8 = _T.TENSOR_QUANT8_ASYMM
Q8S = _T.TENSOR_QUANT8_ASYMM_SIGNED
BOOL8 = _T.TENSOR_BOOL8
QUANT8 = frozenset({Q8, Q8S})

# ---------------------------------------------------------------------------------------
# Helpers shared by the shape, reduction and lookup families
# ---------------------------------------------------------------------------------------

when_known = contextlib.suppress(Unknown)
"""``with when_known: ...`` runs checks that need values or shapes only when they are
known; otherwise the hook goes on past them to its remaining checks."""


def family_signatures(
    types_by_version: Iterable[tuple[HalVersion, Sequence[int]]],
    inputs: Callable[[int], Sequence[int]],
    outputs: Callable[[int], Sequence[int]] = lambda t: (t,),
    **kw,
) -> tuple[Signature, ...]:
    """One signature per (version, type): ``inputs(t)``/``outputs(t)`` give the operand
    types for data type ``t``; ``kw`` (optional, variadic_*) applies to all."""
    opt = frozenset(kw.pop("optional", ()))
    return tuple(
        Signature(tuple(inputs(t)), tuple(outputs(t)), version, opt, **kw)
        for version, types in types_by_version
        for t in types
    )


def run_failure(ctx: OperationContext, message: str) -> HalError:
    """A failure only the input data reveals (an index out of range at run time):
    GENERAL_FAILURE, as Android's executor reports a failed operation."""
    where = f"{ctx.location}: " if ctx.location else ""
    return HalError(ErrorStatus.GENERAL_FAILURE, where + message)


def is_constant(ctx: OperationContext, i: int) -> bool:
    return ctx.input_operand(i).lifetime in (
        OperandLifeTime.CONSTANT_COPY,
        OperandLifeTime.CONSTANT_REFERENCE,
    )


def normalize_axis(ctx: OperationContext, i: int, axis: int, rank: int, what: str = "axis") -> int:
    """``handleNegativeAxis``: ``axis`` in [-rank, rank) made non-negative."""
    ctx.check(
        -rank <= axis < rank,
        f"input {i}: {what} {axis} is out of range for rank {rank} (must be in [{-rank}, {rank}))",
        deferrable=True,
    )
    return axis % rank


def int_vector(ctx: OperationContext, i: int, what: str, length: int | None = None) -> list[int]:
    """The values of 1-D TENSOR_INT32 input ``i`` (``length`` elements if given)."""
    v = ctx.value(i)
    ctx.check(
        v.ndim == 1,
        f"input {i}: {what} must be a 1-D tensor, got shape {list(v.shape)}",
        deferrable=True,
    )
    if length is not None:
        ctx.check(
            v.shape[0] == length,
            f"input {i}: {what} must have {length} elements, got {v.shape[0]}",
            deferrable=True,
        )
    return [int(x) for x in v]


def require_same_quant(ctx: OperationContext, inp: int = 0, out: int = 0) -> None:
    """A quantized output that only moves values keeps its input's scale and zero point
    (deferrable: Android's prepare copies the input's, and only a model output declaring
    another fails, at execution)."""
    if ctx.output_type(out) not in QUANT8:
        return
    ctx.check(
        ctx.output_scale(out) == ctx.input_scale(inp)
        and ctx.output_zero_point(out) == ctx.input_zero_point(inp),
        f"output {out} must have the scale and zero point of input {inp} "
        f"({ctx.input_scale(inp)}, {ctx.input_zero_point(inp)}), got "
        f"({ctx.output_scale(out)}, {ctx.output_zero_point(out)})",
        deferrable=True,
    )


def layout_is_nchw(ctx: OperationContext, i: int) -> bool:
    """The optional trailing BOOL layout input (HAL 1.2): true means NCHW."""
    return i < ctx.num_inputs and not ctx.is_omitted(i) and bool(ctx.scalar(i))


def to_unsigned(x: np.ndarray) -> np.ndarray:
    """QUANT8_ASYMM_SIGNED values as the QUANT8_ASYMM values 128 above them."""
    return (x.astype(np.int16) + 128).astype(np.uint8)


def to_signed(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.int16) - 128).astype(np.int8)


def _prod(dims: Iterable[int]) -> int:
    return math.prod(dims)


# ---------------------------------------------------------------------------------------
# RESHAPE
# ---------------------------------------------------------------------------------------


def _reshape_target(ctx: OperationContext) -> list[int]:
    target = int_vector(ctx, 1, "the shape")
    ctx.check(
        sum(d == -1 for d in target) <= 1,
        f"input 1: at most one dimension of the shape may be -1, got {target}",
        deferrable=True,
    )
    ctx.check(
        all(d >= 0 or d == -1 for d in target),
        f"input 1: shape dimensions must be non-negative or -1, got {target}",
        deferrable=True,
    )
    return target


def _validate_reshape(ctx: OperationContext) -> None:
    ctx.check_rank(0)
    require_same_quant(ctx)
    with when_known:
        _reshape_target(ctx)


def _infer_reshape(ctx: OperationContext) -> list[Shape]:
    target = _reshape_target(ctx)
    shape = ctx.shape(0)
    ctx.check_rank(0)
    count = _prod(shape)
    if -1 in target:
        known = _prod(d for d in target if d != -1)
        ctx.check(
            known > 0 and count % known == 0,
            f"input 1: shape {target} cannot hold the {count} elements of input 0 {list(shape)}",
        )
        target = [count // known if d == -1 else d for d in target]
    ctx.check(
        _prod(target) == count,
        f"input 1: shape {target} has {_prod(target)} elements, input 0 {list(shape)} has {count}",
    )
    return [tuple(target)]


def _execute_reshape(ctx: OperationContext) -> list[np.ndarray]:
    return [ctx.value(0).reshape(ctx.output_shape(0))]


_MOVE_TYPES_1_0 = [(V.V1_0, (F32, Q8)), (V.V1_2, (F16,)), (V.V1_3, (Q8S,))]
_MOVE_TYPES_1_1 = [(V.V1_1, (F32, Q8)), (V.V1_2, (F16,)), (V.V1_3, (Q8S,))]
_MOVE_TYPES_1_2 = [(V.V1_2, (F16, F32, I32, Q8)), (V.V1_3, (Q8S,))]

RESHAPE = OperationDeclaration(
    OP.RESHAPE,
    family_signatures(_MOVE_TYPES_1_0, lambda t: (t, I32)),
    infer_shapes=_infer_reshape,
    execute=_execute_reshape,
    validate=_validate_reshape,
    summary="Reshapes a tensor to the shape given by a 1-D INT32 tensor (one -1 is inferred).",
)


# ---------------------------------------------------------------------------------------
# SQUEEZE
# ---------------------------------------------------------------------------------------


def _validate_squeeze(ctx: OperationContext) -> None:
    ctx.check_rank(0)
    require_same_quant(ctx)


def _infer_squeeze(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check_rank(0)
    rank = len(shape)
    if ctx.is_omitted(1):
        drop = {k for k, d in enumerate(shape) if d == 1}
    else:
        drop = set()
        for d in int_vector(ctx, 1, "the squeeze dims"):
            a = normalize_axis(ctx, 1, d, rank, "squeeze dim")
            ctx.check(
                shape[a] == 1,
                f"input 1: cannot squeeze dimension {d} of size {shape[a]} (input 0 is "
                f"{list(shape)})",
            )
            drop.add(a)
    out = tuple(d for k, d in enumerate(shape) if k not in drop)
    # Squeezing every dimension leaves [1], as Android's Squeeze prepare does.
    return [out or (1,)]


SQUEEZE = OperationDeclaration(
    OP.SQUEEZE,
    family_signatures(_MOVE_TYPES_1_1, lambda t: (t, I32), optional=(1,)),
    infer_shapes=_infer_squeeze,
    execute=_execute_reshape,
    validate=_validate_squeeze,
    summary="Removes size-1 dimensions (the listed ones, or all when the list is omitted).",
)


# ---------------------------------------------------------------------------------------
# EXPAND_DIMS
# ---------------------------------------------------------------------------------------


def _validate_expand_dims(ctx: OperationContext) -> None:
    require_same_quant(ctx)
    with when_known:
        _infer_expand_dims(ctx)


def _infer_expand_dims(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    axis = normalize_axis(ctx, 1, ctx.scalar(1), len(shape) + 1)
    return [(*shape[:axis], 1, *shape[axis:])]


EXPAND_DIMS = OperationDeclaration(
    OP.EXPAND_DIMS,
    family_signatures(_MOVE_TYPES_1_2, lambda t: (t, _T.INT32)),
    infer_shapes=_infer_expand_dims,
    execute=_execute_reshape,
    validate=_validate_expand_dims,
    summary="Inserts a size-1 dimension at the given axis (negative counts from the end).",
)


# ---------------------------------------------------------------------------------------
# TRANSPOSE
# ---------------------------------------------------------------------------------------


def _perm(ctx: OperationContext) -> list[int] | None:
    if ctx.is_omitted(1):
        return None
    perm = int_vector(ctx, 1, "the permutation")
    ctx.check(
        sorted(perm) == list(range(len(perm))),
        f"input 1: {perm} is not a permutation of 0..{len(perm) - 1}",
        deferrable=True,
    )
    return perm


def _validate_transpose(ctx: OperationContext) -> None:
    ctx.check_rank(0)
    require_same_quant(ctx)
    with when_known:
        _perm(ctx)


def _full_perm(ctx: OperationContext, rank: int) -> list[int]:
    perm = _perm(ctx)
    if perm is None:  # omitted: reverse the dimensions
        return list(range(rank - 1, -1, -1))
    ctx.check(
        len(perm) == rank,
        f"input 1: permutation {perm} has {len(perm)} entries, input 0 has rank {rank}",
    )
    return perm


def _infer_transpose(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check_rank(0)
    return [tuple(shape[p] for p in _full_perm(ctx, len(shape)))]


def _execute_transpose(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    return [np.ascontiguousarray(np.transpose(x, _full_perm(ctx, x.ndim)))]


TRANSPOSE = OperationDeclaration(
    OP.TRANSPOSE,
    family_signatures(_MOVE_TYPES_1_1, lambda t: (t, I32), optional=(1,)),
    infer_shapes=_infer_transpose,
    execute=_execute_transpose,
    validate=_validate_transpose,
    summary="Permutes the dimensions (an omitted permutation reverses them).",
    notes=(
        "An omitted permutation reverses the dimensions at any rank; Android's "
        "Transpose.cpp takes it as the 2-D transpose and fails other ranks at run time "
        "(the generator omits it only at rank 2).",
    ),
)


# ---------------------------------------------------------------------------------------
# CONCATENATION
# ---------------------------------------------------------------------------------------


def _validate_concatenation(ctx: OperationContext) -> None:
    n = ctx.num_inputs - 1
    if ctx.input_type(0) == Q8:
        # Before 1.2 every QUANT8_ASYMM input must share the output's quantization.
        so, zo = ctx.output_scale(0), ctx.output_zero_point(0)
        if any(ctx.input_scale(i) != so or ctx.input_zero_point(i) != zo for i in range(n)):
            ctx.require_version(V.V1_2)
    for i in range(n):
        ctx.check_rank(i)
    with when_known:
        axis = ctx.scalar(n)
        ctx.check(
            axis >= 0,
            f"input {n}: the concatenation axis must be >= 0, got {axis}",
            deferrable=True,
        )


def _infer_concatenation(ctx: OperationContext) -> list[Shape]:
    n = ctx.num_inputs - 1
    shapes = [ctx.shape(i) for i in range(n)]
    first = shapes[0]
    rank = len(first)
    ctx.check(rank <= 4, f"input 0 must have rank <= 4, got shape {list(first)}")
    axis = ctx.scalar(n)
    ctx.check(
        0 <= axis < rank, f"input {n}: axis {axis} is out of range for rank {rank} (0..{rank - 1})"
    )
    for i, s in enumerate(shapes[1:], 1):
        ctx.check(
            len(s) == rank and all(s[d] == first[d] for d in range(rank) if d != axis),
            f"input {i}: shape {list(s)} does not match input 0 {list(first)} outside axis {axis}",
        )
    out = list(first)
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def requantize_like_concat(
    x: np.ndarray, in_scale: float, in_zero: int, out_scale: float, out_zero: int
) -> np.ndarray:
    """tflite ``ConcatenationWithScaling`` for one QUANT8_ASYMM input: a copy when the
    quantization matches, else ``round(q * s + b) + zo`` in float32 with
    ``s = scale_in * (1 / scale_out)``, ``b = -zero_in * s`` and ``std::round``, clamped
    to [0, 255]. Applied through a cached 256-entry table (the map depends on q alone)."""
    if np.float32(in_scale) == np.float32(out_scale) and in_zero == out_zero:
        return x
    scale = np.float32(in_scale) * (np.float32(1.0) / np.float32(out_scale))
    bias = np.float32(-in_zero) * scale

    def recipe(q: np.ndarray) -> np.ndarray:
        real = q.astype(np.float32) * scale + bias
        # float64 for the rounding itself: |v| + 0.5 is exact there for any float32 v.
        rounded = round_half_away(real.astype(np.float64)) + out_zero
        return np.clip(rounded, 0, 255).astype(np.uint8)

    key = ("concatenation", float(scale), float(bias), out_zero)
    return lookup_unary(key, recipe, x, Q8)


def _execute_concatenation(ctx: OperationContext) -> list[np.ndarray]:
    n = ctx.num_inputs - 1
    axis = ctx.scalar(n)
    t = ctx.output_type(0)
    arrays = [ctx.value(i) for i in range(n)]
    if t in QUANT8:
        # Android runs the signed variant through the uint8 kernel (values and zero
        # points +128), which keeps the two variants exactly 128 apart.
        off = 128 if t == Q8S else 0
        so, zo = ctx.output_scale(0), ctx.output_zero_point(0) + off
        arrays = [
            requantize_like_concat(
                to_unsigned(a) if off else a,
                ctx.input_scale(i),
                ctx.input_zero_point(i) + off,
                so,
                zo,
            )
            for i, a in enumerate(arrays)
        ]
        out = np.concatenate(arrays, axis=axis)
        return [to_signed(out) if off else out]
    return [np.concatenate(arrays, axis=axis)]


CONCATENATION = OperationDeclaration(
    OP.CONCATENATION,
    family_signatures(_MOVE_TYPES_1_0, lambda t: (t, _T.INT32), variadic_input=0),
    infer_shapes=_infer_concatenation,
    execute=_execute_concatenation,
    validate=_validate_concatenation,
    summary="Joins tensors along an axis; quantized inputs are requantized to the output's "
    "scale (HAL 1.2+ allows differing input scales).",
)


# ---------------------------------------------------------------------------------------
# SPLIT
# ---------------------------------------------------------------------------------------


def _split_count(ctx: OperationContext) -> int:
    n = ctx.scalar(2)
    ctx.check(
        n == ctx.num_outputs,
        f"input 2: number of splits {n} differs from the number of outputs {ctx.num_outputs}",
        deferrable=True,
    )
    return n


def _validate_split(ctx: OperationContext) -> None:
    for k in range(ctx.num_outputs):
        require_same_quant(ctx, 0, k)
    with when_known:
        _split_count(ctx)


def _infer_split(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    axis = normalize_axis(ctx, 1, ctx.scalar(1), len(shape))
    n = _split_count(ctx)
    ctx.check(
        shape[axis] % n == 0,
        f"input 0: dimension {axis} of {list(shape)} does not split into {n} equal parts",
    )
    out = list(shape)
    out[axis] = shape[axis] // n
    return [tuple(out)] * n


def _execute_split(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    axis = ctx.scalar(1) % x.ndim
    return [np.ascontiguousarray(p) for p in np.split(x, ctx.num_outputs, axis=axis)]


SPLIT = OperationDeclaration(
    OP.SPLIT,
    family_signatures(
        _MOVE_TYPES_1_2, lambda t: (t, _T.INT32, _T.INT32), lambda t: (t,), variadic_output=0
    ),
    infer_shapes=_infer_split,
    execute=_execute_split,
    validate=_validate_split,
    summary="Splits a tensor along an axis into equal parts, one per output.",
)


# ---------------------------------------------------------------------------------------
# SLICE
# ---------------------------------------------------------------------------------------


def _slice_bounds(ctx: OperationContext) -> list[tuple[int, int]]:
    shape = ctx.shape(0)
    rank = len(shape)
    # Any rank from 1 (the doc's "from 1"; Android's Slice.cpp has no upper limit).
    ctx.check(rank >= 1, f"input 0 must have rank >= 1, got shape {list(shape)}")
    begin = int_vector(ctx, 1, "begin", rank)
    size = int_vector(ctx, 2, "size", rank)
    bounds = []
    for d, (b, s, dim) in enumerate(zip(begin, size, shape)):
        ctx.check(0 <= b <= dim, f"input 1: begin {b} of dimension {d} is outside [0, {dim}]")
        if s == -1:
            s = dim - b
        ctx.check(
            s >= 0 and b + s <= dim,
            f"input 2: size {size[d]} from begin {b} does not fit dimension {d} of size {dim}",
        )
        bounds.append((b, b + s))
    return bounds


def _validate_slice(ctx: OperationContext) -> None:
    require_same_quant(ctx)


def _infer_slice(ctx: OperationContext) -> list[Shape]:
    return [tuple(e - b for b, e in _slice_bounds(ctx))]


def _execute_slice(ctx: OperationContext) -> list[np.ndarray]:
    index = tuple(slice(b, e) for b, e in _slice_bounds(ctx))
    return [np.ascontiguousarray(ctx.value(0)[index])]


SLICE = OperationDeclaration(
    OP.SLICE,
    family_signatures(_MOVE_TYPES_1_2, lambda t: (t, I32, I32)),
    infer_shapes=_infer_slice,
    execute=_execute_slice,
    validate=_validate_slice,
    summary="Extracts a block given its begin and size per dimension (size -1: to the end).",
)


# ---------------------------------------------------------------------------------------
# STRIDED_SLICE
# ---------------------------------------------------------------------------------------


def _clamped_index(index: int, dim: int, positive_stride: bool) -> int:
    """Android's ``ClampedIndex`` (StridedSlice.cpp)."""
    if dim == 0:
        return 0
    if positive_stride:
        return dim if index >= dim else min(max(index, -dim), dim) % dim
    return -1 if index < -dim else min(max(index, -dim), dim - 1) % dim


def _strides(ctx: OperationContext) -> list[int]:
    strides = int_vector(ctx, 3, "strides")
    ctx.check(
        all(s != 0 for s in strides),
        f"input 3: strides must be non-zero, got {strides}",
        deferrable=True,
    )
    return strides


def _strided_slice_plan(ctx: OperationContext) -> tuple[tuple[slice, ...], Shape]:
    """Per-dimension slices and the output shape, exactly as Android's prepare computes
    them (its kernel agrees on every shape prepare accepts)."""
    shape = ctx.shape(0)
    rank = len(shape)
    ctx.check(rank <= 4, f"input 0 must have rank <= 4, got shape {list(shape)}")
    begin = int_vector(ctx, 1, "begin", rank)
    end = int_vector(ctx, 2, "end", rank)
    strides = _strides(ctx)
    ctx.check(len(strides) == rank, f"input 3: strides must have {rank} elements")
    begin_mask, end_mask, shrink_mask = ctx.scalar(4), ctx.scalar(5), ctx.scalar(6)
    slices = []
    out = []
    for d, dim in enumerate(shape):
        s = strides[d]
        pos = s > 0
        b = (0 if pos else dim - 1) if begin_mask & (1 << d) else _clamped_index(begin[d], dim, pos)
        e = (dim if pos else -1) if end_mask & (1 << d) else _clamped_index(end[d], dim, pos)
        n = max(0, -((b - e) // s))  # ceil((e - b) / s), exactly
        if shrink_mask & (1 << d):
            ctx.check(pos, f"input 3: dimension {d} is shrunk, so its stride must be > 0")
            ctx.check(
                n == 1,
                f"dimension {d} is shrunk but begin {begin[d]}, end {end[d]}, stride {s} "
                f"select {n} elements of {dim}",
            )
        else:
            out.append(n)
        # e == -1 (before the first element, negative stride) is numpy's None.
        slices.append(slice(b, e if e >= 0 else None, s) if n else slice(0, 0))
    # Shrinking every dimension leaves [1], as Android's prepare does.
    return tuple(slices), tuple(out) or (1,)


def _validate_strided_slice(ctx: OperationContext) -> None:
    ctx.check_rank(0)
    require_same_quant(ctx)
    with when_known:
        _strides(ctx)


def _infer_strided_slice(ctx: OperationContext) -> list[Shape]:
    return [_strided_slice_plan(ctx)[1]]


def _execute_strided_slice(ctx: OperationContext) -> list[np.ndarray]:
    slices, shape = _strided_slice_plan(ctx)
    return [np.ascontiguousarray(ctx.value(0)[slices]).reshape(shape)]


STRIDED_SLICE = OperationDeclaration(
    OP.STRIDED_SLICE,
    family_signatures(_MOVE_TYPES_1_1, lambda t: (t, I32, I32, I32, _T.INT32, _T.INT32, _T.INT32)),
    infer_shapes=_infer_strided_slice,
    execute=_execute_strided_slice,
    validate=_validate_strided_slice,
    summary="Strided slice with begin/end/shrink-axis masks and negative strides.",
)


# ---------------------------------------------------------------------------------------
# PAD, PAD_V2
# ---------------------------------------------------------------------------------------


def _paddings(ctx: OperationContext, i: int, rows: int | None) -> np.ndarray:
    """Paddings input ``i``: a [rows, 2] TENSOR_INT32 of non-negative values."""
    p = ctx.value(i)
    ctx.check(
        p.ndim == 2 and p.shape[1] == 2 and (rows is None or p.shape[0] == rows),
        f"input {i}: paddings must have shape [{rows if rows is not None else 'rank'}, 2], "
        f"got {list(p.shape)}",
        deferrable=True,
    )
    ctx.check(
        bool((p >= 0).all()),
        f"input {i}: paddings must be >= 0, got {p.tolist()}",
        deferrable=True,
    )
    return p


def _validate_pad(ctx: OperationContext) -> None:
    # PAD on QUANT8_ASYMM is 1.1 only when the logical zero is the byte 0: before 1.2 the
    # pad value of quantized tensors was undefined.
    if ctx.operation_type == OP.PAD and ctx.input_type(0) == Q8 and ctx.input_zero_point(0):
        ctx.require_version(V.V1_2)
    ctx.check_rank(0)
    require_same_quant(ctx)
    with when_known:
        _paddings(ctx, 1, None)


def _infer_pad(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check_rank(0)
    p = _paddings(ctx, 1, len(shape))
    return [tuple(int(p[d, 0]) + dim + int(p[d, 1]) for d, dim in enumerate(shape))]


def pad_constant(x: np.ndarray, paddings: np.ndarray, value, out_shape: Shape) -> np.ndarray:
    out = np.full(out_shape, value, dtype=x.dtype)
    out[tuple(slice(int(b), int(b) + n) for (b, _), n in zip(paddings, x.shape))] = x
    return out


def _pad_value(ctx: OperationContext):
    t = ctx.input_type(0)
    if ctx.operation_type == OP.PAD:
        # The logical zero: the zero point for quantized tensors.
        return ctx.input_zero_point(0) if t in QUANT8 else 0
    v = ctx.value(2)
    if t in QUANT8:
        # Android reads the INT32 pad value's first byte (getScalarData<uint8_t/int8_t>),
        # i.e. its low byte: 300 pads with 44.
        return v.astype(np.int32).astype(dtype_of(ctx))
    return v


def _execute_pad(ctx: OperationContext) -> list[np.ndarray]:
    return [pad_constant(ctx.value(0), ctx.value(1), _pad_value(ctx), ctx.output_shape(0))]


PAD = OperationDeclaration(
    OP.PAD,
    family_signatures(
        [(V.V1_1, (F32, Q8)), (V.V1_2, (F16,)), (V.V1_3, (Q8S,))], lambda t: (t, I32)
    ),
    infer_shapes=_infer_pad,
    execute=_execute_pad,
    validate=_validate_pad,
    summary="Pads with the logical zero (the zero point for quantized tensors).",
)

_PAD_V2_VALUE = {F32: _T.FLOAT32, F16: _T.FLOAT16, Q8: _T.INT32, Q8S: _T.INT32}

PAD_V2 = OperationDeclaration(
    OP.PAD_V2,
    family_signatures(
        [(V.V1_2, (F32, F16, Q8)), (V.V1_3, (Q8S,))], lambda t: (t, I32, _PAD_V2_VALUE[t])
    ),
    infer_shapes=_infer_pad,
    execute=_execute_pad,
    validate=_validate_pad,
    summary="Pads with a given value (an INT32 in the quantized domain for quantized "
    "tensors, of which Android uses the low byte).",
)


# ---------------------------------------------------------------------------------------
# TILE
# ---------------------------------------------------------------------------------------


def _multiples(ctx: OperationContext, rank: int | None) -> list[int]:
    m = int_vector(ctx, 1, "multiples", rank)
    ctx.check(all(k >= 0 for k in m), f"input 1: multiples must be >= 0, got {m}", deferrable=True)
    return m


def _validate_tile(ctx: OperationContext) -> None:
    require_same_quant(ctx)
    with when_known:
        _multiples(ctx, None)


def _infer_tile(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    m = _multiples(ctx, len(shape))
    return [tuple(d * k for d, k in zip(shape, m))]


def _execute_tile(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    return [np.tile(x, _multiples(ctx, x.ndim))]


TILE = OperationDeclaration(
    OP.TILE,
    family_signatures(_MOVE_TYPES_1_2, lambda t: (t, I32)),
    infer_shapes=_infer_tile,
    execute=_execute_tile,
    validate=_validate_tile,
    summary="Repeats a tensor the given number of times along each dimension.",
)


# ---------------------------------------------------------------------------------------
# GATHER
# ---------------------------------------------------------------------------------------


def _check_gather_indices(ctx: OperationContext, indices: np.ndarray, size: int, fail) -> None:
    if indices.size and not ((indices >= 0).all() and (indices < size).all()):
        bad = indices[(indices < 0) | (indices >= size)]
        raise fail(
            ctx, f"input 2: index {int(bad.flat[0])} is out of range for an axis of size {size}"
        )


def _deferred_invalid(ctx: OperationContext, message: str) -> HalError:
    """A constant index out of range: Android's gather checks its indices only when it
    runs (project policy: rejected up front, deferrable)."""
    return ctx.invalid(message, deferrable=True)


def _validate_gather(ctx: OperationContext) -> None:
    require_same_quant(ctx)
    with when_known:
        shape = ctx.shape(0)
        axis = normalize_axis(ctx, 1, ctx.scalar(1), len(shape))
        if is_constant(ctx, 2):
            _check_gather_indices(ctx, ctx.value(2), shape[axis], _deferred_invalid)


def _infer_gather(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    axis = normalize_axis(ctx, 1, ctx.scalar(1), len(shape))
    return [(*shape[:axis], *ctx.shape(2), *shape[axis + 1 :])]


def _execute_gather(ctx: OperationContext) -> list[np.ndarray]:
    x, indices = ctx.value(0), ctx.value(2)
    axis = ctx.scalar(1) % x.ndim
    _check_gather_indices(ctx, indices, x.shape[axis], run_failure)
    return [np.take(x, indices, axis=axis)]


GATHER = OperationDeclaration(
    OP.GATHER,
    family_signatures(_MOVE_TYPES_1_2, lambda t: (t, _T.INT32, I32)),
    infer_shapes=_infer_gather,
    execute=_execute_gather,
    validate=_validate_gather,
    summary="Gathers slices along an axis at the given indices.",
)


# ---------------------------------------------------------------------------------------
# FILL, RANK
# ---------------------------------------------------------------------------------------


def _fill_dims(ctx: OperationContext) -> list[int]:
    dims = int_vector(ctx, 0, "the output shape")
    ctx.check(
        all(d >= 0 for d in dims),
        f"input 0: output dimensions must be >= 0, got {dims}",
        deferrable=True,
    )
    return dims


def _validate_fill(ctx: OperationContext) -> None:
    with when_known:
        _fill_dims(ctx)


def _infer_fill(ctx: OperationContext) -> list[Shape]:
    return [tuple(_fill_dims(ctx))]


def _execute_fill(ctx: OperationContext) -> list[np.ndarray]:
    return [np.full(ctx.output_shape(0), ctx.value(1), dtype=dtype_of(ctx))]


FILL = OperationDeclaration(
    OP.FILL,
    (
        Signature((I32, _T.FLOAT16), (F16,), V.V1_3),
        Signature((I32, _T.FLOAT32), (F32,), V.V1_3),
        Signature((I32, _T.INT32), (I32,), V.V1_3),
    ),
    infer_shapes=_infer_fill,
    execute=_execute_fill,
    validate=_validate_fill,
    summary="Creates a tensor of the given shape filled with a scalar value.",
)


def _validate_rank(ctx: OperationContext) -> None:
    """Nothing beyond what the signatures check."""


def _infer_rank(ctx: OperationContext) -> list[Shape]:
    return [()]


def _execute_rank(ctx: OperationContext) -> list[np.ndarray]:
    return [np.array(ctx.value(0).ndim, dtype=np.int32)]


_RANK_TYPES = (
    BOOL8,
    F16,
    F32,
    I32,
    Q8,
    _T.TENSOR_QUANT16_SYMM,
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
    _T.TENSOR_QUANT16_ASYMM,
    _T.TENSOR_QUANT8_SYMM,
    Q8S,
)

RANK = OperationDeclaration(
    OP.RANK,
    family_signatures([(V.V1_3, _RANK_TYPES)], lambda t: (t,), lambda t: (_T.INT32,)),
    infer_shapes=_infer_rank,
    execute=_execute_rank,
    validate=_validate_rank,
    summary="The rank of a tensor, as an INT32 scalar.",
    allows_unknown_rank=True,
)


# ---------------------------------------------------------------------------------------
# BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH (NHWC / NCHW)
# ---------------------------------------------------------------------------------------


def _nhwc_shape(ctx: OperationContext, nchw: bool) -> Shape:
    shape = ctx.shape(0)
    ctx.check(len(shape) == 4, f"input 0 must have rank 4, got shape {list(shape)}")
    return (shape[0], shape[2], shape[3], shape[1]) if nchw else shape


def _from_nhwc(shape: Shape, nchw: bool) -> Shape:
    return (shape[0], shape[3], shape[1], shape[2]) if nchw else shape


def _nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if nchw else x


def _back(y: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2) if nchw else y)


def _block_shape(ctx: OperationContext) -> tuple[int, int]:
    bh, bw = int_vector(ctx, 1, "the block shape", 2)
    ctx.check(
        bh >= 1 and bw >= 1, f"input 1: block sizes must be >= 1, got {[bh, bw]}", deferrable=True
    )
    return bh, bw


def _layout_signatures(types: list, base_inputs) -> tuple[Signature, ...]:
    """Signatures without the layout input (from the type's version) and with the
    trailing BOOL layout input (from 1.2)."""
    plain = family_signatures(types, base_inputs)
    with_layout = family_signatures(
        [(max(v, V.V1_2), ts) for v, ts in types], lambda t: (*base_inputs(t), _T.BOOL)
    )
    return plain + with_layout


def _validate_space_op(ctx: OperationContext) -> None:
    # As PAD: quantized padding with a non-zero logical zero is defined from 1.2.
    s2b = ctx.operation_type == OP.SPACE_TO_BATCH_ND
    if s2b and ctx.input_type(0) == Q8 and ctx.input_zero_point(0):
        ctx.require_version(V.V1_2)
    ctx.check_rank(0, exact=4)
    require_same_quant(ctx)
    with when_known:
        if ctx.operation_type in (OP.BATCH_TO_SPACE_ND, OP.SPACE_TO_BATCH_ND):
            _block_shape(ctx)
        else:
            _block_size(ctx)
        if ctx.operation_type == OP.SPACE_TO_BATCH_ND:
            _paddings(ctx, 2, 2)


def _infer_batch_to_space(ctx: OperationContext) -> list[Shape]:
    nchw = layout_is_nchw(ctx, 2)
    b, h, w, c = _nhwc_shape(ctx, nchw)
    bh, bw = _block_shape(ctx)
    ctx.check(
        b % (bh * bw) == 0,
        f"input 0: batch {b} is not divisible by the block size product {bh} * {bw}",
    )
    return [_from_nhwc((b // (bh * bw), h * bh, w * bw, c), nchw)]


def _execute_batch_to_space(ctx: OperationContext) -> list[np.ndarray]:
    nchw = layout_is_nchw(ctx, 2)
    x = _nhwc(ctx.value(0), nchw)
    bh, bw = _block_shape(ctx)
    b, h, w, c = x.shape
    ob = b // (bh * bw)
    # Input batch (i * bw + j) * ob + n holds output rows h * bh + i, columns w * bw + j.
    y = x.reshape(bh, bw, ob, h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(ob, h * bh, w * bw, c)
    return [_back(y, nchw)]


_SPACE_1_1 = [(V.V1_1, (F32, Q8)), (V.V1_2, (F16,)), (V.V1_3, (Q8S,))]

BATCH_TO_SPACE_ND = OperationDeclaration(
    OP.BATCH_TO_SPACE_ND,
    _layout_signatures(_SPACE_1_1, lambda t: (t, I32)),
    infer_shapes=_infer_batch_to_space,
    execute=_execute_batch_to_space,
    validate=_validate_space_op,
    summary="Moves blocks of the batch dimension into height and width (NHWC or NCHW).",
)


def _infer_space_to_batch(ctx: OperationContext) -> list[Shape]:
    nchw = layout_is_nchw(ctx, 3)
    b, h, w, c = _nhwc_shape(ctx, nchw)
    bh, bw = _block_shape(ctx)
    p = _paddings(ctx, 2, 2)
    ph = int(p[0, 0]) + h + int(p[0, 1])
    pw = int(p[1, 0]) + w + int(p[1, 1])
    ctx.check(
        ph % bh == 0 and pw % bw == 0,
        f"padded height {ph} and width {pw} must be multiples of the block shape {[bh, bw]}",
    )
    return [_from_nhwc((b * bh * bw, ph // bh, pw // bw, c), nchw)]


def _execute_space_to_batch(ctx: OperationContext) -> list[np.ndarray]:
    nchw = layout_is_nchw(ctx, 3)
    x = _nhwc(ctx.value(0), nchw)
    bh, bw = _block_shape(ctx)
    p = ctx.value(2)
    b, h, w, c = x.shape
    zero = ctx.input_zero_point(0) if ctx.input_type(0) in QUANT8 else 0
    ph, pw = int(p[0, 0]) + h + int(p[0, 1]), int(p[1, 0]) + w + int(p[1, 1])
    padded = pad_constant(x, np.array([[0, 0], p[0], p[1], [0, 0]]), zero, (b, ph, pw, c))
    oh, ow = ph // bh, pw // bw
    # Output batch (i * bw + j) * b + n takes padded rows oh * bh + i, columns ow * bw + j.
    y = padded.reshape(b, oh, bh, ow, bw, c).transpose(2, 4, 0, 1, 3, 5)
    return [_back(y.reshape(b * bh * bw, oh, ow, c), nchw)]


SPACE_TO_BATCH_ND = OperationDeclaration(
    OP.SPACE_TO_BATCH_ND,
    _layout_signatures(_SPACE_1_1, lambda t: (t, I32, I32)),
    infer_shapes=_infer_space_to_batch,
    execute=_execute_space_to_batch,
    validate=_validate_space_op,
    summary="Pads height and width with the logical zero, then moves spatial blocks into "
    "the batch dimension (NHWC or NCHW).",
)


def _block_size(ctx: OperationContext) -> int:
    bs = ctx.scalar(1)
    ctx.check(bs >= 1, f"input 1: block size must be >= 1, got {bs}", deferrable=True)
    return bs


def _infer_depth_to_space(ctx: OperationContext) -> list[Shape]:
    nchw = layout_is_nchw(ctx, 2)
    b, h, w, c = _nhwc_shape(ctx, nchw)
    bs = _block_size(ctx)
    ctx.check(
        c % (bs * bs) == 0,
        f"input 0: depth {c} is not divisible by block size squared ({bs} * {bs})",
    )
    return [_from_nhwc((b, h * bs, w * bs, c // (bs * bs)), nchw)]


def _execute_depth_to_space(ctx: OperationContext) -> list[np.ndarray]:
    nchw = layout_is_nchw(ctx, 2)
    x = _nhwc(ctx.value(0), nchw)
    bs = _block_size(ctx)
    b, h, w, c = x.shape
    oc = c // (bs * bs)
    # Depth (i * bs + j) * oc + d goes to row h * bs + i, column w * bs + j.
    y = x.reshape(b, h, w, bs, bs, oc).transpose(0, 1, 3, 2, 4, 5).reshape(b, h * bs, w * bs, oc)
    return [_back(y, nchw)]


_SPACE_1_0 = [(V.V1_0, (F32, Q8)), (V.V1_2, (F16,)), (V.V1_3, (Q8S,))]

DEPTH_TO_SPACE = OperationDeclaration(
    OP.DEPTH_TO_SPACE,
    _layout_signatures(_SPACE_1_0, lambda t: (t, _T.INT32)),
    infer_shapes=_infer_depth_to_space,
    execute=_execute_depth_to_space,
    validate=_validate_space_op,
    summary="Moves depth blocks into height and width (NHWC or NCHW).",
)


def _infer_space_to_depth(ctx: OperationContext) -> list[Shape]:
    nchw = layout_is_nchw(ctx, 2)
    b, h, w, c = _nhwc_shape(ctx, nchw)
    bs = _block_size(ctx)
    ctx.check(
        h % bs == 0 and w % bs == 0,
        f"input 0: height {h} and width {w} must be multiples of the block size {bs}",
    )
    return [_from_nhwc((b, h // bs, w // bs, c * bs * bs), nchw)]


def _execute_space_to_depth(ctx: OperationContext) -> list[np.ndarray]:
    nchw = layout_is_nchw(ctx, 2)
    x = _nhwc(ctx.value(0), nchw)
    bs = _block_size(ctx)
    b, h, w, c = x.shape
    oh, ow = h // bs, w // bs
    y = x.reshape(b, oh, bs, ow, bs, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, oh, ow, bs * bs * c)
    return [_back(y, nchw)]


SPACE_TO_DEPTH = OperationDeclaration(
    OP.SPACE_TO_DEPTH,
    _layout_signatures(_SPACE_1_0, lambda t: (t, _T.INT32)),
    infer_shapes=_infer_space_to_depth,
    execute=_execute_space_to_depth,
    validate=_validate_space_op,
    summary="Moves height and width blocks into depth (NHWC or NCHW).",
)


# ---------------------------------------------------------------------------------------
# CHANNEL_SHUFFLE
# ---------------------------------------------------------------------------------------


def _shuffle_params(ctx: OperationContext) -> tuple[int, int]:
    shape = ctx.shape(0)
    ctx.check_rank(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    axis = normalize_axis(ctx, 2, ctx.scalar(2), len(shape))
    groups = ctx.scalar(1)
    ctx.check(groups > 0, f"input 1: number of groups must be > 0, got {groups}")
    ctx.check(
        shape[axis] % groups == 0,
        f"input 1: dimension {axis} of {list(shape)} does not divide into {groups} groups",
    )
    return axis, groups


def _validate_channel_shuffle(ctx: OperationContext) -> None:
    ctx.check_rank(0)
    require_same_quant(ctx)
    with when_known:
        groups = ctx.scalar(1)
        ctx.check(
            groups > 0, f"input 1: number of groups must be > 0, got {groups}", deferrable=True
        )


def _infer_channel_shuffle(ctx: OperationContext) -> list[Shape]:
    _shuffle_params(ctx)
    return [ctx.shape(0)]


def _execute_channel_shuffle(ctx: OperationContext) -> list[np.ndarray]:
    axis, groups = _shuffle_params(ctx)
    x = ctx.value(0)
    size = x.shape[axis]
    # Output channel j * groups + i is input channel i * group_size + j.
    source = np.arange(size).reshape(groups, size // groups).T.ravel()
    return [np.take(x, source, axis=axis)]


CHANNEL_SHUFFLE = OperationDeclaration(
    OP.CHANNEL_SHUFFLE,
    family_signatures(
        [(V.V1_2, (F16, F32, Q8)), (V.V1_3, (Q8S,))], lambda t: (t, _T.INT32, _T.INT32)
    ),
    infer_shapes=_infer_channel_shuffle,
    execute=_execute_channel_shuffle,
    validate=_validate_channel_shuffle,
    summary="Splits an axis into groups and interleaves them (ShuffleNet).",
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    RESHAPE,
    SQUEEZE,
    EXPAND_DIMS,
    TRANSPOSE,
    CONCATENATION,
    SPLIT,
    SLICE,
    STRIDED_SLICE,
    PAD,
    PAD_V2,
    TILE,
    GATHER,
    FILL,
    RANK,
    BATCH_TO_SPACE_ND,
    SPACE_TO_BATCH_ND,
    DEPTH_TO_SPACE,
    SPACE_TO_DEPTH,
    CHANNEL_SHUFFLE,
)
