"""Table lookups: EMBEDDING_LOOKUP and HASHTABLE_LOOKUP."""

from __future__ import annotations

import numpy as np

from driver.hal.types import HalError, HalVersion, OperationType
from driver.operations.base import OperationContext, OperationDeclaration, Shape, Signature
from driver.operations.quant import INT32_MIN
from driver.operations.shape import (
    F16,
    F32,
    I32,
    Q8,
    Q8S,
    family_signatures,
    is_constant,
    require_same_quant,
    run_failure,
    when_known,
)

V = HalVersion
OP = OperationType


# Android 11 validates EMBEDDING_LOOKUP and HASHTABLE_LOOKUP in Utils.cpp's
# validateOperation: operand counts, types and HAL versions only. Every rank, shape and
# value rule is embeddingLookupPrepare's/hashtableLookupPrepare's or the kernel's, at
# execution, so each rejection the validate hooks raise is deferrable.


def _check_vector(ctx: OperationContext, i: int, what: str) -> None:
    s = ctx.shapes[i]
    if s is not None:
        ctx.check(
            len(s) == 1,
            f"input {i}: {what} must be a 1-D tensor, got shape {list(s)}",
            deferrable=True,
        )


def _deferrable_invalid(ctx: OperationContext, message: str) -> HalError:
    return ctx.invalid(message, deferrable=True)


# ---------------------------------------------------------------------------------------
# EMBEDDING_LOOKUP
# ---------------------------------------------------------------------------------------


def _check_rows(ctx: OperationContext, lookups: np.ndarray, rows: int, fail) -> None:
    bad = lookups[(lookups < 0) | (lookups >= rows)]
    if bad.size:
        raise fail(ctx, f"input 0: lookup {int(bad[0])} is out of range for {rows} rows")


def _validate_embedding_lookup(ctx: OperationContext) -> None:
    _check_vector(ctx, 0, "lookups")
    ctx.check_rank(1, min_rank=2, max_rank=2**31, deferrable=True)
    require_same_quant(ctx, 1, 0)
    with when_known:
        if is_constant(ctx, 0):  # Android: EmbeddingLookup::Eval fails, at execution
            _check_rows(ctx, ctx.value(0), ctx.shape(1)[0], _deferrable_invalid)


def _infer_embedding_lookup(ctx: OperationContext) -> list[Shape]:
    lookups, values = ctx.shape(0), ctx.shape(1)
    _check_vector(ctx, 0, "lookups")
    ctx.check(len(values) >= 2, f"input 1 must have rank >= 2, got shape {list(values)}")
    return [(lookups[0], *values[1:])]


def _execute_embedding_lookup(ctx: OperationContext) -> list[np.ndarray]:
    lookups, values = ctx.value(0), ctx.value(1)
    # Android fails the operation on an index out of range.
    _check_rows(ctx, lookups, values.shape[0], run_failure)
    return [np.take(values, lookups, axis=0)]


EMBEDDING_LOOKUP = OperationDeclaration(
    OP.EMBEDDING_LOOKUP,
    family_signatures(
        [(V.V1_0, (F32,)), (V.V1_2, (I32, Q8)), (V.V1_3, (F16, Q8S))], lambda t: (I32, t)
    ),
    infer_shapes=_infer_embedding_lookup,
    execute=_execute_embedding_lookup,
    validate=_validate_embedding_lookup,
    summary="Selects rows (first-dimension slices) of a table by index.",
)


# ---------------------------------------------------------------------------------------
# HASHTABLE_LOOKUP
# ---------------------------------------------------------------------------------------


def bionic_bsearch(keys: np.ndarray, lookups: np.ndarray) -> np.ndarray:
    """Android's lookup, vectorized over ``lookups``: bionic's ``bsearch`` (the OpenBSD
    one: halve ``lim``, step right past ``p`` when the key is greater) with Android's
    comparator ``*a - *b`` on int32, which wraps on overflow. Returns the position found
    or -1: Android's exact answer for any keys (unsorted or duplicate run-time keys)."""
    n = keys.shape[0]
    wanted = lookups.astype(np.int64)
    table = keys.astype(np.int64)
    base = np.zeros(wanted.shape[0], dtype=np.int64)
    lim = np.full(wanted.shape[0], n, dtype=np.int64)
    found = np.full(wanted.shape[0], -1, dtype=np.int64)
    active = lim != 0
    # Masks select by multiplication: np.where is slow on irregular masks.
    while active.any():  # at most bit_length(n) rounds
        p = base + (lim >> 1)  # < n wherever active
        diff = wanted - table[p * active]
        cmp = (diff - INT32_MIN) % 2**32 + INT32_MIN  # int32 wrap-around
        hit = active & (cmp == 0)
        found[hit] = p[hit]
        right = active & (cmp > 0)
        base += right * (p + 1 - base)
        lim += active * (((lim - right) >> 1) - lim)
        active &= ~hit & (lim != 0)
    return found


def hashtable_positions(keys: np.ndarray, lookups: np.ndarray) -> np.ndarray:
    """Row of each lookup in ``keys`` (-1 for a miss), as Android finds it. Strictly
    ascending keys whose differences with every lookup fit in int32 make Android's
    search a plain binary search (``searchsorted``); anything else takes the exact
    emulation."""
    n = keys.shape[0]
    table = keys.astype(np.int64)
    wanted = lookups.astype(np.int64)
    if n and wanted.size and (n == 1 or bool((table[1:] > table[:-1]).all())):
        lo, hi = min(table[0], wanted.min()), max(table[-1], wanted.max())
        if hi - lo < 2**31:
            pos = np.minimum(np.searchsorted(table, wanted), n - 1)
            pos[table[pos] != wanted] = -1
            return pos
    return bionic_bsearch(keys, lookups)


def _validate_hashtable_lookup(ctx: OperationContext) -> None:
    _check_vector(ctx, 0, "lookups")
    _check_vector(ctx, 1, "keys")
    ctx.check_rank(2, min_rank=1, max_rank=2**31, deferrable=True)
    require_same_quant(ctx, 2, 0)
    ctx.check(
        ctx.output_scale(1) == 1.0 and ctx.output_zero_point(1) == 0,
        f"output 1 (hits) must have scale 1.0 and zero point 0, got "
        f"({ctx.output_scale(1)}, {ctx.output_zero_point(1)})",
        deferrable=True,
    )
    with when_known:
        if is_constant(ctx, 1):  # project policy: Android searches unsorted keys anyway
            keys = ctx.value(1)
            ctx.check(
                bool((np.diff(keys.astype(np.int64)) >= 0).all()),
                f"input 1: keys must be sorted in ascending order, got {keys.tolist()}",
                deferrable=True,
            )


def _infer_hashtable_lookup(ctx: OperationContext) -> list[Shape]:
    lookups, keys, values = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    _check_vector(ctx, 0, "lookups")
    _check_vector(ctx, 1, "keys")
    ctx.check(len(values) >= 1, "input 2 must have rank >= 1")
    ctx.check(
        values[0] == keys[0],
        f"input 2: first dimension of {list(values)} differs from the {keys[0]} keys",
    )
    return [(lookups[0], *values[1:]), (lookups[0],)]


def _execute_hashtable_lookup(ctx: OperationContext) -> list[np.ndarray]:
    lookups, keys, values = ctx.value(0), ctx.value(1), ctx.value(2)
    found = hashtable_positions(keys, lookups)
    hits = found >= 0
    out = np.take(values, np.maximum(found, 0), axis=0) if values.shape[0] else None
    if out is None:
        out = np.zeros(ctx.output_shape(0), dtype=values.dtype)
    else:
        # A miss writes zero bytes (memset), whatever the type and zero point.
        out[~hits] = 0
    return [out, hits.astype(np.uint8)]


HASHTABLE_LOOKUP = OperationDeclaration(
    OP.HASHTABLE_LOOKUP,
    tuple(
        Signature((I32, I32, t), (t, Q8), v)
        for v, ts in [(V.V1_0, (F32, I32, Q8)), (V.V1_3, (Q8S,))]
        for t in ts
    ),
    infer_shapes=_infer_hashtable_lookup,
    execute=_execute_hashtable_lookup,
    validate=_validate_hashtable_lookup,
    summary="Looks keys up in a sorted key table: the matching value rows (zeros on a "
    "miss) and a QUANT8_ASYMM hit mask.",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (EMBEDDING_LOOKUP, HASHTABLE_LOOKUP)
