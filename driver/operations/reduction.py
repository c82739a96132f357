"""Reductions: MEAN, REDUCE_SUM, REDUCE_PROD, REDUCE_MAX, REDUCE_MIN, REDUCE_ANY,
REDUCE_ALL, ARGMAX, ARGMIN, TOPK_V2.

Android's kernels (tflite ``reference_ops::Mean``/``ReduceGeneric``) visit the input in
row-major order and fold each element into its output, so every output is a *sequential*
fold over its reduced elements. Floating-point sums and products depend on that order;
:func:`sequential_fold` reproduces it (numpy's own ``sum`` would use pairwise summation).
REDUCE_SUM/PROD on float16 fold in float16 (``_Float16`` arithmetic, each step rounded);
MEAN on float16 computes in float32, as ``meanFloat16`` does.

Quantized MEAN is tflite's generic mean on the stored integers: an exact integer sum,
divided by the element count with C++ integer division, with the output sharing the input's
scale and zero point. Android's int8 path divides signed sums (truncating toward zero), which
can differ by one from the uint8 result; the signed variant here runs through the uint8
kernel (values +128), so that signed and unsigned results stay exactly 128 apart as the
NNAPI driver contract requires (the difference is within every quantized tolerance).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import OperationContext, OperationDeclaration, Shape, dtype_of
from driver.operations.base import T as _T
from driver.operations.shape import (
    BOOL8,
    F16,
    F32,
    I32,
    Q8,
    Q8S,
    QUANT8,
    family_signatures,
    int_vector,
    normalize_axis,
    require_same_quant,
    run_failure,
    when_known,
)

V = HalVersion
OP = OperationType


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _axes(ctx: OperationContext, rank: int) -> tuple[int, ...]:
    """Input 1's axes, normalized, without duplicates, in increasing order."""
    axes = int_vector(ctx, 1, "the axes")
    return tuple(sorted({normalize_axis(ctx, 1, a, rank) for a in axes}))


def _reduced_shape(shape: Shape, axes: tuple[int, ...], keep_dims: bool) -> Shape:
    out = tuple(1 if d in axes else n for d, n in enumerate(shape) if keep_dims or d not in axes)
    # Reducing every dimension without keeping them leaves [1] (Android's prepare).
    return out or (1,)


def _rows(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``x`` as a C-contiguous [reduced elements, outputs] matrix: row r holds the r-th
    reduced element (row-major order of the reduced axes) of every output."""
    kept = tuple(d for d in range(x.ndim) if d not in axes)
    n_red = math.prod(x.shape[d] for d in axes)
    n_out = math.prod(x.shape[d] for d in kept)
    return np.ascontiguousarray(np.transpose(x, axes + kept)).reshape(n_red, n_out)


def sequential_fold(rows: np.ndarray, ufunc: np.ufunc, identity) -> np.ndarray:
    """``identity ∘ rows[0] ∘ rows[1] ∘ ...`` column by column, in row order, in the rows'
    dtype (each step rounded to it). ``rows`` is C-contiguous [n_red, n_out]."""
    n_red, n_out = rows.shape
    if n_red == 0:
        return np.full(n_out, identity, dtype=rows.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are results too
        if n_out == 1:
            # A 1-D ufunc.reduce may reassociate (pairwise sums); accumulate never does.
            folded = ufunc.accumulate(rows[:, 0])[-1:]
        else:
            # Reducing axis 0 of a C-contiguous matrix applies the ufunc row after row to
            # whole rows (the inner loop runs along a row), i.e. sequentially per column.
            # tests/operations/test_reduction.py checks this against a scalar loop.
            folded = ufunc.reduce(rows, axis=0)
        # Android starts from the identity, numpy from rows[0]; the two folds differ only
        # by the sign of an all -0.0 sum (0.0 + -0.0 is +0.0), which one more step of the
        # identity restores (x + 0.0 and x * 1 are x for every other x).
        return ufunc(folded, rows.dtype.type(identity), out=folded)


def tree_fold(rows: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """An order-insensitive fold (max, min, or, and) of the rows of a non-empty
    [n_red, n_out] matrix, by halving: log2(n_red) whole-vector steps instead of n_red
    short ones."""
    while rows.shape[0] > 1:
        h = rows.shape[0] // 2
        folded = ufunc(rows[:h], rows[h : 2 * h])
        if rows.shape[0] % 2:
            folded[0] = ufunc(folded[0], rows[2 * h])
        rows = folded
    return rows[0]


def _keep_dims(ctx: OperationContext) -> bool:
    if ctx.operation_type == OP.MEAN:
        return ctx.scalar(2) > 0  # INT32: positive means keep
    return bool(ctx.scalar(2))


def _validate_reduce(ctx: OperationContext) -> None:
    ctx.check_rank(0)
    require_same_quant(ctx)
    with when_known:
        int_vector(ctx, 1, "the axes")


def _infer_reduce(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check_rank(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    return [_reduced_shape(shape, _axes(ctx, len(shape)), _keep_dims(ctx))]


# ---------------------------------------------------------------------------------------
# MEAN
# ---------------------------------------------------------------------------------------


def _execute_mean(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    axes = _axes(ctx, x.ndim)
    out_shape = ctx.output_shape(0)
    count = math.prod(x.shape[d] for d in axes)
    t = ctx.input_type(0)
    if t in QUANT8:
        # Android sums the unsigned values (signed ones 128 above them): the sum of the
        # stored values plus 128 per element, exact in int32 below 2**23 elements.
        sums = x.sum(axis=axes, dtype=np.int32 if count < 1 << 23 else np.int64)
        if t == Q8S:
            sums += 128 * count
        # Non-negative sums: C++ integer division is floor division. No element: T().
        if count:
            sums //= count
        if t == Q8S:
            sums -= 128  # the unsigned mean's signed value
        return [sums.astype(dtype_of(ctx)).reshape(out_shape)]
    sums = sequential_fold(_rows(x.astype(np.float32, copy=False), axes), np.add, 0)
    if count:
        mean = sums / np.float32(count)
    else:
        mean = np.zeros_like(sums)
    return [mean.astype(dtype_of(ctx)).reshape(out_shape)]


MEAN = OperationDeclaration(
    OP.MEAN,
    family_signatures(
        [(V.V1_1, (F32, Q8)), (V.V1_2, (F16,)), (V.V1_3, (Q8S,))], lambda t: (t, I32, _T.INT32)
    ),
    infer_shapes=_infer_reduce,
    execute=_execute_mean,
    validate=_validate_reduce,
    summary="Mean over the given axes (keep_dims > 0 keeps them as size 1); quantized "
    "tensors average the stored integers (same scale and zero point).",
)


# ---------------------------------------------------------------------------------------
# REDUCE_*
# ---------------------------------------------------------------------------------------


def _fold_execute(ufunc: np.ufunc, identity):
    def execute(ctx: OperationContext) -> list[np.ndarray]:
        x = ctx.value(0)
        rows = _rows(x, _axes(ctx, x.ndim))
        return [sequential_fold(rows, ufunc, identity).reshape(ctx.output_shape(0))]

    return execute


def _extreme_execute(is_max: bool):
    """REDUCE_MAX/MIN: ``acc = std::max(acc, x)`` from the type's lowest (highest) value.
    A NaN never replaces the accumulator (the comparison is false), so NaNs are skipped
    (``fmax``/``fmin``), and the start value also bounds the result: all -inf gives
    ``lowest()``, all NaN too."""

    def execute(ctx: OperationContext) -> list[np.ndarray]:
        x = ctx.value(0)
        rows = _rows(x, _axes(ctx, x.ndim))
        if x.dtype.kind == "f":
            info = np.finfo(x.dtype)
            ufunc, start = (np.fmax, info.min) if is_max else (np.fmin, info.max)
        else:
            info = np.iinfo(x.dtype)
            ufunc, start = (np.maximum, info.min) if is_max else (np.minimum, info.max)
        start = x.dtype.type(start)
        if rows.shape[0] == 0:
            out = np.full(rows.shape[1], start, dtype=x.dtype)
        else:
            out = ufunc(tree_fold(rows, ufunc), start)
            if x.dtype.kind == "f":
                _first_zero_sign(rows, out)
        return [out.reshape(ctx.output_shape(0))]

    return execute


def _first_zero_sign(rows: np.ndarray, out: np.ndarray) -> None:
    """In place: a zero extreme takes the sign of the first zero of its column.
    ``std::max(acc, x)`` keeps ``acc`` on a tie, so Android's fold returns the first of
    -0.0 and 0.0 it meets; the tree fold pairs elements out of order."""
    columns = np.flatnonzero(out == 0)
    if columns.size:
        zeros = rows[:, columns] == 0
        out[columns] = rows[zeros.argmax(axis=0), columns]


def _bool_execute(is_any: bool):
    def execute(ctx: OperationContext) -> list[np.ndarray]:
        x = ctx.value(0)
        rows = _rows(x, _axes(ctx, x.ndim))
        if rows.shape[0] == 0:
            out = np.full(rows.shape[1], not is_any)
        else:
            out = tree_fold(rows, np.logical_or if is_any else np.logical_and)
        return [out.reshape(ctx.output_shape(0))]

    return execute


def _reduce_declaration(op, types, execute, summary: str) -> OperationDeclaration:
    return OperationDeclaration(
        op,
        family_signatures(types, lambda t: (t, I32, _T.BOOL)),
        infer_shapes=_infer_reduce,
        execute=execute,
        validate=_validate_reduce,
        summary=summary,
    )


_FLOATS_1_2 = [(V.V1_2, (F16, F32))]
_ORDERED_1_2 = [(V.V1_2, (F16, F32, Q8)), (V.V1_3, (Q8S,))]

REDUCE_SUM = _reduce_declaration(
    OP.REDUCE_SUM,
    _FLOATS_1_2,
    _fold_execute(np.add, 0),
    "Sum over the given axes (a sequential fold in the input's type).",
)
REDUCE_PROD = _reduce_declaration(
    OP.REDUCE_PROD,
    _FLOATS_1_2,
    _fold_execute(np.multiply, 1),
    "Product over the given axes (a sequential fold in the input's type).",
)
REDUCE_MAX = _reduce_declaration(
    OP.REDUCE_MAX, _ORDERED_1_2, _extreme_execute(True), "Maximum over the given axes."
)
REDUCE_MIN = _reduce_declaration(
    OP.REDUCE_MIN, _ORDERED_1_2, _extreme_execute(False), "Minimum over the given axes."
)
REDUCE_ANY = _reduce_declaration(
    OP.REDUCE_ANY, [(V.V1_2, (BOOL8,))], _bool_execute(True), "Logical OR over the given axes."
)
REDUCE_ALL = _reduce_declaration(
    OP.REDUCE_ALL, [(V.V1_2, (BOOL8,))], _bool_execute(False), "Logical AND over the given axes."
)


# ---------------------------------------------------------------------------------------
# Column layout for short reduced axes
#
# numpy's argmax/partition/sort along an axis pay a fixed cost per row (tens of ns), which
# dominates when the reduced axis is short (a 1x64x64x32 tensor has 4096 rows of 32). So
# ARGMAX/ARGMIN/TOPK_V2 work on the reduced axis as the *middle* axis of an (A, n, B)
# view, where every step is one vectorized operation across all rows; a last axis is
# first transposed (in cache-sized blocks) to put it there.
# ---------------------------------------------------------------------------------------

_SHORT_AXIS = 256
"""Reduced-axis length up to which the column layout is used for a last axis (longer
rows amortize numpy's per-row cost, and the byte-sized index tricks below need n <= 256)."""

_TRANSPOSE_BLOCK = 256
"""Rows per block when transposing elements of 4 bytes or more: a block of short rows stays
in L1 (numpy's whole-array strided copy misses the cache on every read). Byte-sized rows
transpose fastest in one copy."""


def _transposed(rows: np.ndarray) -> np.ndarray:
    """``rows.T`` as a C-contiguous array."""
    if rows.dtype.itemsize < 4:
        return np.ascontiguousarray(rows.T)
    out = np.empty(rows.shape[::-1], dtype=rows.dtype)
    for r in range(0, rows.shape[0], _TRANSPOSE_BLOCK):
        out[:, r : r + _TRANSPOSE_BLOCK] = rows[r : r + _TRANSPOSE_BLOCK].T
    return out


def _as_columns(x: np.ndarray, axis: int) -> np.ndarray | None:
    """``x`` as an (A, n, B) array with the reduced axis in the middle, or None when the
    axis is last and too long for the column layout to pay."""
    n = x.shape[axis]
    a = math.prod(x.shape[:axis])
    b = math.prod(x.shape[axis + 1 :])
    if b > 1:
        return x.reshape(a, n, b)
    if n > _SHORT_AXIS:
        return None
    return _transposed(x.reshape(a, n)).reshape(1, n, a)


def _ordered_bytes_key(v: np.ndarray) -> np.ndarray:
    """uint16 keys whose high byte orders like the quant8 values of ``v`` (int8 shifted by
    128) and whose low byte is free for an index."""
    key = np.left_shift(v.view(np.uint8), 8, dtype=np.uint16)
    if v.dtype == np.int8:
        key ^= np.uint16(0x8000)
    return key


_ARG_BLOCK_ELEMENTS = 1 << 20
"""Elements per block of a long (> 256) reduced axis in :func:`_first_extreme_columns`:
its comparison and weight temporaries (up to 5 bytes an element) are per block."""

_NARROW_COLUMNS = 32
"""Below this many columns B, numpy's own argmin/argmax of a long middle axis is faster
than the weights (its transposed copy of a narrow array is cheap) and needs one copy of
the input; wider, that copy misses the cache and the blocked weights win."""


def _first_extreme_columns(v: np.ndarray, is_min: bool) -> np.ndarray:
    """Index (along axis 1 of the (A, n, B) array ``v``, NaN-free) of the first maximum
    (minimum): the first index among the elements equal to the extreme, as a strict
    sequential comparison keeps it. A long axis goes by blocks, a later block's extreme
    replacing the running one only when strictly better."""
    a, n, b = v.shape
    if n <= 256:
        return _first_extreme_short(v, is_min)
    if b < _NARROW_COLUMNS:
        return (np.argmin if is_min else np.argmax)(v, axis=1)
    step = max(1, _ARG_BLOCK_ELEMENTS // (a * b))
    best, index = None, None
    for r0 in range(0, n, step):
        block = v[:, r0 : r0 + step]
        extreme = block.min(axis=1) if is_min else block.max(axis=1)
        first = _first_extreme_short(block, is_min, extreme).astype(np.int64)
        first += r0
        if best is None:
            best, index = extreme, first
            continue
        better = extreme < best if is_min else extreme > best
        np.copyto(best, extreme, where=better)
        np.copyto(index, first, where=better)
    return index


def _first_extreme_short(
    v: np.ndarray, is_min: bool, extreme: np.ndarray | None = None
) -> np.ndarray:
    """:func:`_first_extreme_columns` in one block; ``extreme`` is ``v``'s minimum
    (maximum) along axis 1 when already known."""
    n = v.shape[1]
    if v.dtype.itemsize == 1 and v.dtype.kind in "iu" and n <= 256:
        # One reduction over (value, index) keys: ties resolve to the first index.
        key = _ordered_bytes_key(v)
        j = np.arange(n, dtype=np.uint16)[:, None]
        if is_min:
            key |= j
            return key.min(axis=1) & 0xFF
        key |= 255 - j
        return 255 - (key.max(axis=1) & 0xFF)
    if extreme is None:
        extreme = v.min(axis=1) if is_min else v.max(axis=1)
    extreme = extreme[:, None]
    # Weight each match by (n - 1 - index): the largest weight is the first match.
    weight_type = np.uint8 if n <= 256 else np.uint32
    reverse = np.arange(n - 1, -1, -1, dtype=weight_type)[:, None]
    weights = np.multiply(v == extreme, reverse, dtype=weight_type)
    return (n - 1) - weights.max(axis=1).astype(np.int64)


# ---------------------------------------------------------------------------------------
# ARGMAX, ARGMIN
# ---------------------------------------------------------------------------------------


def _validate_arg(ctx: OperationContext) -> None:
    with when_known:
        shape = ctx.shape(0)
        normalize_axis(ctx, 1, ctx.scalar(1), len(shape))


def _infer_arg(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    axis = normalize_axis(ctx, 1, ctx.scalar(1), len(shape))
    return [shape[:axis] + shape[axis + 1 :] or (1,)]


def _arg_execute(is_min: bool):
    """Android keeps the first extreme (a strict comparison), like numpy; a NaN never
    wins a comparison, so it counts only when it is the first element."""

    def execute(ctx: OperationContext) -> list[np.ndarray]:
        x = ctx.value(0)
        axis = ctx.scalar(1) % x.ndim
        if x.shape[axis] == 0:
            raise run_failure(
                ctx,
                f"input 0: cannot take ARG{'MIN' if is_min else 'MAX'} over an empty axis {axis}",
            )
        if x.size == 0:
            return [np.zeros(ctx.output_shape(0), dtype=np.int32)]
        nan = np.isnan(x) if x.dtype.kind == "f" and np.isnan(x.max()) else None
        if nan is not None:
            x = np.where(nan, np.inf if is_min else -np.inf, x)
        columns = _as_columns(x, axis)
        if columns is None:
            idx = (np.argmin if is_min else np.argmax)(x, axis=axis)
        else:
            idx = _first_extreme_columns(columns, is_min)
        idx = np.asarray(idx).reshape(ctx.output_shape(0))
        if nan is not None:
            idx = np.where(np.take(nan, 0, axis=axis).reshape(idx.shape), 0, idx)
        return [idx.astype(np.int32)]

    return execute


_ARG_TYPES = [(V.V1_2, (F16, F32, I32, Q8)), (V.V1_3, (Q8S,))]


def _arg_declaration(op, is_min: bool) -> OperationDeclaration:
    return OperationDeclaration(
        op,
        family_signatures(_ARG_TYPES, lambda t: (t, _T.INT32), lambda t: (I32,)),
        infer_shapes=_infer_arg,
        execute=_arg_execute(is_min),
        validate=_validate_arg,
        summary=f"Index of the first {'minimum' if is_min else 'maximum'} along an axis.",
    )


ARGMAX = _arg_declaration(OP.ARGMAX, False)
ARGMIN = _arg_declaration(OP.ARGMIN, True)


# ---------------------------------------------------------------------------------------
# TOPK_V2
# ---------------------------------------------------------------------------------------


def _topk_k(ctx: OperationContext) -> int:
    k = ctx.scalar(1)
    ctx.check(k > 0, f"input 1: k must be > 0, got {k}", deferrable=True)
    return k


def _validate_topk(ctx: OperationContext) -> None:
    require_same_quant(ctx)
    with when_known:
        _topk_k(ctx)


def _infer_topk(ctx: OperationContext) -> list[Shape]:
    shape = ctx.shape(0)
    ctx.check(len(shape) >= 1, "input 0 must have rank >= 1")
    k = _topk_k(ctx)
    ctx.check(k <= shape[-1], f"input 1: k = {k} exceeds the last dimension of {list(shape)}")
    out = (*shape[:-1], k)
    return [out, out]


def _flip_negative(bits: np.ndarray) -> np.ndarray:
    """In place: int32 float bits with the magnitude bits of negative values flipped, so
    that they order as the floats do (bits >> 31 is -1 for those, 0 otherwise). The flip
    is its own inverse: it also turns such keys back into float bits."""
    flip = np.right_shift(bits, 31)
    flip &= np.int32(0x7FFFFFFF)
    bits ^= flip
    return bits


def _as_order_bits(f: np.ndarray) -> np.ndarray:
    """``f`` (float32, overwritten) as int32 integers that order as the values compare in
    C++ (-0.0 == 0.0; NaNs by their bits, above infinity when positive)."""
    f += np.float32(0.0)  # -0.0 + 0.0 is +0.0
    return _flip_negative(f.view(np.int32))


def _order_bits(rows: np.ndarray) -> np.ndarray:
    """Integers that order as the elements of ``rows`` compare in C++: integers as they
    are, floats through :func:`_as_order_bits` (on a copy)."""
    if rows.dtype.kind != "f":
        return rows
    return _as_order_bits(rows.astype(np.float32))


def _order_key(rows: np.ndarray) -> np.ndarray:
    """int64 keys ordered as the values compare in C++ (-0.0 == 0.0)."""
    return _order_bits(rows).astype(np.int64)


def _column_order_bits(rows: np.ndarray) -> np.ndarray:
    """:func:`_order_bits` of ``rows.T`` (C-contiguous, int32), transforming the
    transposed copy in place (large temporaries cost page faults)."""
    if rows.dtype.kind != "f":
        return _transposed(rows.astype(np.int32, copy=False))
    return _as_order_bits(_transposed(rows.astype(np.float32, copy=False)))


_TOPK_ROUNDS = 8
"""Largest k found by k selection rounds in the column layout (each round one vectorized
pass); a larger k, or rows longer than the column layout takes, go through
:func:`_topk_prefiltered`, or else partition and sort each row."""


def _topk_select(key: np.ndarray, k: int, removed: int) -> np.ndarray:
    """The k largest keys of each column of ``key`` (n, R), largest first, as (k, R):
    k rounds of one max across the rows, each round overwriting the key it chose with
    ``removed`` (below every key but possibly equal to one not yet chosen, which is then
    the only candidate left of its value). Keys must be unique per column and hold their
    row index in the low bits, as :func:`_topk_columns` packs them."""
    n, r = key.shape
    chosen = np.empty((k, r), dtype=key.dtype)
    flat_key = key.reshape(-1)
    columns = np.arange(r, dtype=np.intp)
    index_mask = (1 << max(1, (n - 1).bit_length())) - 1  # n-1 fits; higher bits are value
    for i in range(k):
        np.maximum.reduce(key, axis=0, out=chosen[i])
        if i + 1 < k:  # take it out: (index, column) is at index * r + column
            position = (chosen[i] & index_mask).astype(np.intp)
            position *= r
            position += columns
            flat_key[position] = removed
    return chosen


def _topk_columns(rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Values and indices (R, k) of the k largest (value, index) pairs of each row of
    ``rows`` (R, n), largest first, for rows of at most 256, in the column layout. Each
    key packs an element's ordered value above its index, so the chosen keys decode to
    both outputs without another look at the input."""
    r, n = rows.shape
    if rows.dtype.itemsize == 1 and rows.dtype.kind in "iu":
        key = _ordered_bytes_key(_transposed(rows))  # value << 8 | index, uint16
        key |= np.arange(n, dtype=np.uint16)[:, None]
        # 0 is (lowest value, index 0): below every other key.
        chosen = _topk_select(key, k, 0)
        if rows.dtype == np.int8:
            chosen ^= np.uint16(0x8000)
        # The key's high byte is the value, its low byte the index.
        halves = chosen.view(np.uint8).reshape(k, r, 2)
        high = 1 if sys.byteorder == "little" else 0
        chosen_values = halves[:, :, high].view(rows.dtype)
        chosen_index = halves[:, :, 1 - high]
    else:
        key = _column_order_bits(rows).astype(np.int64)  # value << 32 | index
        key <<= 32
        key |= np.arange(n, dtype=np.int64)[:, None]
        chosen = _topk_select(key, k, np.iinfo(np.int64).min)
        order = np.right_shift(chosen, 32).astype(np.int32)
        chosen_index = chosen & 0xFFFFFFFF
        if rows.dtype.kind == "f":
            chosen_values = _flip_negative(order).view(np.float32)
        else:
            chosen_values = order
    # (k, R) to (R, k) one slot at a time: k strided copies beat numpy's transpose here.
    values = np.empty((r, k), dtype=rows.dtype)
    index = np.empty((r, k), dtype=np.int32)
    for slot in range(k):
        values[:, slot] = chosen_values[slot]
        index[:, slot] = chosen_index[slot]
    if rows.dtype.kind == "f" and not chosen_values.all():
        # The keys turned -0.0 into 0.0, and the element itself is returned: zeros (the
        # only values whose bits the keys do not keep) come from the input.
        zero_row, zero_slot = np.nonzero(values == 0)
        values[zero_row, zero_slot] = rows[zero_row, index[zero_row, zero_slot]]
    return values, index


def _topk_prefiltered(rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Values and indices (R, k) of the k largest (value, index) pairs of each row, for
    rows much longer than k; None when a NaN or many ties defeat the filter.

    Of the maxima of 2k contiguous chunks of a row, the k-th largest is a lower bound of
    the row's k-th largest value (those k maxima are k elements at least as large), so
    only elements at or above it can be chosen: typically about k per row, which one sort
    of packed (row, value, index) keys orders."""
    r, n = rows.shape
    chunks = min(n, 2 * k)
    chunk_max = np.maximum.reduceat(rows, np.arange(chunks) * (n // chunks), axis=1)
    if chunk_max.dtype.kind == "f" and np.isnan(chunk_max).any():
        return None  # NaN orders by its bits (see _as_order_bits); the filter compares values
    bound = np.partition(chunk_max, chunks - k, axis=1)[:, chunks - k]
    flat = np.flatnonzero(rows >= bound[:, None])
    column_bits = max(1, (n - 1).bit_length())
    shift = 32 + column_bits  # the row's place in a packed key
    if 2 * flat.size > rows.size or (r - 1).bit_length() + shift > 63:
        return None  # mostly ties (or too large a shape to pack): sort whole rows instead
    row, column = np.divmod(flat, n)
    # One int64 per candidate: the row, then (value, index) *descending* within the row,
    # as the complement of the ascending (value, index) bits.
    rank = _order_bits(rows.reshape(-1)[flat]).astype(np.int64)
    rank -= np.iinfo(np.int32).min  # 0 .. 2**32 - 1, ascending with the value
    rank <<= column_bits
    rank |= column
    rank ^= (1 << shift) - 1
    rank |= row << shift
    ranked = np.sort(rank)
    first = np.searchsorted(ranked, np.arange(r, dtype=np.int64) << shift)
    chosen = ranked[first[:, None] + np.arange(k)]  # every row has >= k candidates
    index = (~chosen & ((1 << column_bits) - 1)).astype(np.int32)
    return np.take_along_axis(rows, index, axis=1), index


def _execute_topk(ctx: OperationContext) -> list[np.ndarray]:
    """Android sorts (value, index) pairs ascending and reverses them: the k largest
    values, largest first, ties broken by the *larger* index first."""
    x = ctx.value(0)
    k = ctx.scalar(1)
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    shape = (*x.shape[:-1], k)
    if rows.size == 0:
        return [np.zeros(shape, x.dtype), np.zeros(shape, np.int32)]
    if k <= _TOPK_ROUNDS and n <= _SHORT_AXIS:
        values, index = _topk_columns(rows, k)
        return [values.reshape(shape), index.reshape(shape)]
    if 4 * k <= n and (found := _topk_prefiltered(rows, k)) is not None:
        values, index = found
        return [values.reshape(shape), index.reshape(shape)]
    bits = max(1, (n - 1).bit_length())
    # One unique key per element: (value, index) in lexicographic order.
    keys = _order_key(rows)
    keys <<= bits
    keys += np.arange(n, dtype=np.int64)
    if k < n:
        keys = np.partition(keys, n - k, axis=1)[:, n - k :]
    top = np.sort(keys, axis=1)[:, ::-1]
    index = top & ((1 << bits) - 1)
    values = np.take_along_axis(rows, index, axis=1)
    return [values.reshape(shape), index.astype(np.int32).reshape(shape)]


TOPK_V2 = OperationDeclaration(
    OP.TOPK_V2,
    family_signatures(_ARG_TYPES, lambda t: (t, _T.INT32), lambda t: (t, I32)),
    infer_shapes=_infer_topk,
    execute=_execute_topk,
    validate=_validate_topk,
    summary="The k largest values along the last dimension and their indices (largest "
    "first; equal values: larger index first).",
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    MEAN,
    REDUCE_SUM,
    REDUCE_PROD,
    REDUCE_MAX,
    REDUCE_MIN,
    REDUCE_ANY,
    REDUCE_ALL,
    ARGMAX,
    ARGMIN,
    TOPK_V2,
)
