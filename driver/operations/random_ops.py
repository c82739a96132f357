"""Hashing and sampling: LSH_PROJECTION and RANDOM_MULTINOMIAL.

Both reproduce Android 11's reference (``LSHProjection.cpp``, ``Multinomial.cpp``) bit
for bit, up to last-bit differences between libm's and numpy's ``exp``:

* LSH_PROJECTION hashes ``seed bytes + input row bytes`` with farmhash's
  ``Fingerprint64`` (:func:`fingerprint64`, vectorized over keys), sums the signed 64-bit
  hashes (weighted) as doubles in row order and keeps the sign bit. It hashes each
  distinct seed once, a block of (seed, row) pairs at a time, without building the keys.
* RANDOM_MULTINOMIAL draws from TensorFlow's ``PhiloxRandom`` (Philox4x32-10,
  :func:`philox4x32`) seeded with the two seed values, one double per sample
  (``SimplePhilox::RandDouble``), and inverts the unnormalized CDF with
  ``std::upper_bound``. One documented difference: Android seeds (0, 0) with fresh OS
  randomness (``GuardedPhiloxRandom::Init``); the reference stays deterministic and uses
  (0, 0) as given, so its results are reproducible for every seed.
"""

from __future__ import annotations

import math

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
)
from driver.operations.base import T as _T

V = HalVersion

# ---------------------------------------------------------------------------------------
# farmhash Fingerprint64 (farmhashna::Hash64), vectorized over many equal-length keys
# ---------------------------------------------------------------------------------------

_K0 = np.uint64(0xC3A5C85C97CB3127)
_K1 = np.uint64(0xB492B66FBE98F273)
_K2 = np.uint64(0x9AE16A3B2F90404F)
_U64 = np.uint64


def _rot(v: np.ndarray, shift: int) -> np.ndarray:
    """farmhash ``Rotate`` (right rotation; every call site has 0 < shift < 64)."""
    return (v >> _U64(shift)) | (v << _U64(64 - shift))


def _shift_mix(v: np.ndarray) -> np.ndarray:
    return v ^ (v >> _U64(47))


def _hash_len16(u: np.ndarray, v: np.ndarray, mul) -> np.ndarray:
    a = (u ^ v) * mul
    a ^= a >> _U64(47)
    b = (v ^ a) * mul
    b ^= b >> _U64(47)
    return b * mul


def _little_endian(data: np.ndarray, offset: int, width: int) -> np.ndarray:
    """Bytes ``offset .. offset + width`` (width <= 8) of each row of ``data`` as uint64."""
    if width in (4, 8):
        word = np.ascontiguousarray(data[:, offset : offset + width]).view(f"<u{width}")
        return word[:, 0].astype(np.uint64)
    padded = np.zeros((data.shape[0], 8), dtype=np.uint8)
    padded[:, :width] = data[:, offset : offset + width]
    return padded.view("<u8")[:, 0].astype(np.uint64)


class _KeyRows:
    """Keys given as the rows of a uint8 array: each fetch is one value per key."""

    def __init__(self, keys: np.ndarray):
        self.keys = keys
        self.shape = keys.shape[:1]
        self.length = keys.shape[1]

    def fetch(self, offset: int, width: int) -> np.ndarray:
        return _little_endian(self.keys, offset, width)


class _SeededKeys:
    """The keys ``seed bytes + row bytes`` of every (seed, row) pair, never materialized:
    a word within the row bytes is fetched once per row (shape ``(1, rows)``), one within
    the seed once per seed (``(seeds, 1)``), one across both joins the two; the hash's
    arithmetic broadcasts them to ``(seeds, rows)``."""

    def __init__(self, seeds: np.ndarray, rows: np.ndarray):
        self.seeds, self.rows = seeds, rows
        self.shape = (seeds.shape[0], rows.shape[0])
        self.length = seeds.shape[1] + rows.shape[1]

    def fetch(self, offset: int, width: int) -> np.ndarray:
        seed_len, end = self.seeds.shape[1], offset + width
        value = None
        if offset < seed_len:
            value = _little_endian(self.seeds, offset, min(end, seed_len) - offset)[:, None]
        if end > seed_len:
            start = max(offset, seed_len)
            part = _little_endian(self.rows, start - seed_len, end - start)[None, :]
            if start > offset:
                part = part << _U64(8 * (start - offset))
            value = part if value is None else value | part
        return value


_Keys = _KeyRows | _SeededKeys


def _fetch64(keys: _Keys, offset: int) -> np.ndarray:
    return keys.fetch(offset, 8)


def _fetch32(keys: _Keys, offset: int) -> np.ndarray:
    return keys.fetch(offset, 4)


def _weak_hash_len32_with_seeds(keys: _Keys, offset: int, a, b):
    w = _fetch64(keys, offset)
    x = _fetch64(keys, offset + 8)
    y = _fetch64(keys, offset + 16)
    z = _fetch64(keys, offset + 24)
    a = a + w
    b = _rot(b + a + z, 21)
    c = a
    a = a + x
    a = a + y
    b = b + _rot(a, 44)
    return a + z, b + c


def fingerprint64(keys: np.ndarray) -> np.ndarray:
    """farmhash ``Fingerprint64`` of each row of ``keys`` (uint8, shape ``(n, length)``),
    as uint64. All keys have the same length, so every branch is a vector operation."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    if keys.ndim != 2:
        raise ValueError("keys must be a 2-D uint8 array")
    return _fingerprint64(_KeyRows(keys))


def _fingerprint64(keys: _Keys) -> np.ndarray:
    """``Fingerprint64`` of every key of ``keys``, shaped ``keys.shape``."""
    length = keys.length
    with np.errstate(over="ignore"):
        if length <= 16:
            hashed = _hash_len0_to16(keys, length)
        elif length <= 32:
            hashed = _hash_len17_to32(keys, length)
        elif length <= 64:
            hashed = _hash_len33_to64(keys, length)
        else:
            hashed = _hash_long(keys, length)
    # A hash of the seed bytes alone (no row bytes) is one value per seed.
    return hashed if hashed.shape == keys.shape else np.broadcast_to(hashed, keys.shape)


def _hash_len0_to16(keys: _Keys, length: int) -> np.ndarray:
    ln = _U64(length)
    if length >= 8:
        mul = _K2 + ln * _U64(2)
        a = _fetch64(keys, 0) + _K2
        b = _fetch64(keys, length - 8)
        c = _rot(b, 37) * mul + a
        d = (_rot(a, 25) + b) * mul
        return _hash_len16(c, d, mul)
    if length >= 4:
        mul = _K2 + ln * _U64(2)
        a = _fetch32(keys, 0)
        return _hash_len16(ln + (a << _U64(3)), _fetch32(keys, length - 4), mul)
    if length > 0:
        a = keys.fetch(0, 1)
        b = keys.fetch(length >> 1, 1)
        c = keys.fetch(length - 1, 1)
        # uint32 arithmetic in C++; the values are small enough not to wrap.
        y = a + (b << _U64(8))
        z = ln + (c << _U64(2))
        return _shift_mix((y * _K2) ^ (z * _K0)) * _K2
    return np.full(keys.shape, _K2, dtype=np.uint64)


def _hash_len17_to32(keys: _Keys, length: int) -> np.ndarray:
    mul = _K2 + _U64(length) * _U64(2)
    a = _fetch64(keys, 0) * _K1
    b = _fetch64(keys, 8)
    c = _fetch64(keys, length - 8) * mul
    d = _fetch64(keys, length - 16) * _K2
    return _hash_len16(_rot(a + b, 43) + _rot(c, 30) + d, a + _rot(b + _K2, 18) + c, mul)


def _hash_len33_to64(keys: _Keys, length: int) -> np.ndarray:
    mul = _K2 + _U64(length) * _U64(2)
    a = _fetch64(keys, 0) * _K2
    b = _fetch64(keys, 8)
    c = _fetch64(keys, length - 8) * mul
    d = _fetch64(keys, length - 16) * _K2
    y = _rot(a + b, 43) + _rot(c, 30) + d
    z = _hash_len16(y, a + _rot(b + _K2, 18) + c, mul)
    e = _fetch64(keys, 16) * mul
    f = _fetch64(keys, 24)
    g = (y + _fetch64(keys, length - 32)) * mul
    h = (z + _fetch64(keys, length - 24)) * mul
    return _hash_len16(_rot(e + f, 43) + _rot(g, 30) + h, e + _rot(f + a, 18) + g, mul)


def _hash_long(keys: _Keys, length: int) -> np.ndarray:
    seed = _U64(81)
    zeros = np.zeros(keys.shape, dtype=np.uint64)
    x = np.full(keys.shape, seed, dtype=np.uint64)
    y = np.full(keys.shape, seed * _K1 + _U64(113), dtype=np.uint64)
    z = _shift_mix(y * _K2 + _U64(113)) * _K2
    v0, v1 = zeros.copy(), zeros.copy()
    w0, w1 = zeros.copy(), zeros.copy()
    x = x * _K2 + _fetch64(keys, 0)
    end = ((length - 1) // 64) * 64
    last64 = end + ((length - 1) & 63) - 63
    s = 0
    while True:  # one pass per 64-byte block: bounded by the key length
        x = _rot(x + y + v0 + _fetch64(keys, s + 8), 37) * _K1
        y = _rot(y + v1 + _fetch64(keys, s + 48), 42) * _K1
        x ^= w1
        y = y + v0 + _fetch64(keys, s + 40)
        z = _rot(z + w0, 33) * _K1
        v0, v1 = _weak_hash_len32_with_seeds(keys, s, v1 * _K1, x + w0)
        w0, w1 = _weak_hash_len32_with_seeds(keys, s + 32, z + w1, y + _fetch64(keys, s + 16))
        x, z = z, x
        s += 64
        if s == end:
            break
    mul = _K1 + ((z & _U64(0xFF)) << _U64(1))
    s = last64
    w0 = w0 + _U64((length - 1) & 63)
    v0 = v0 + w0
    w0 = w0 + v0
    x = _rot(x + y + v0 + _fetch64(keys, s + 8), 37) * mul
    y = _rot(y + v1 + _fetch64(keys, s + 48), 42) * mul
    x ^= w1 * _U64(9)
    y = y + v0 * _U64(9) + _fetch64(keys, s + 40)
    z = _rot(z + w0, 33) * mul
    v0, v1 = _weak_hash_len32_with_seeds(keys, s, v1 * mul, x + w0)
    w0, w1 = _weak_hash_len32_with_seeds(keys, s + 32, z + w1, y + _fetch64(keys, s + 16))
    x, z = z, x
    return _hash_len16(
        _hash_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z, _hash_len16(v1, w1, mul) + x, mul
    )


# ---------------------------------------------------------------------------------------
# LSH_PROJECTION
# ---------------------------------------------------------------------------------------

LSH_SPARSE_DEPRECATED = 1  # HAL 1.0 "sparse": no per-function offset
LSH_DENSE = 2
LSH_SPARSE = 3  # HAL 1.2: adds k * (1 << bits) to function k's signature

_LSH_INPUTS_V1_0 = (_T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_ASYMM)


def _lsh_signatures() -> tuple[Signature, ...]:
    sigs = []
    for hash_type, hash_version in ((_T.TENSOR_FLOAT32, V.V1_0), (_T.TENSOR_FLOAT16, V.V1_2)):
        for in_type, in_version in (
            *((t, V.V1_0) for t in _LSH_INPUTS_V1_0),
            (_T.TENSOR_FLOAT16, V.V1_2),
            (_T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3),
        ):
            sigs.append(
                Signature(
                    (hash_type, in_type, hash_type, _T.INT32),
                    (_T.TENSOR_INT32,),
                    max(hash_version, in_version),
                    optional=frozenset({2}),
                )
            )
    return tuple(sigs)


def _validate_lsh(ctx: OperationContext) -> None:
    # Android 11's validateOperation checks counts, types and versions; the projection
    # type's value is LSHProjection::Prepare's switch, at execution: deferrable.
    kind = ctx.scalar(3)
    if kind == LSH_SPARSE:
        ctx.require_version(V.V1_2)
    ctx.check(
        kind in (LSH_SPARSE_DEPRECATED, LSH_DENSE, LSH_SPARSE),
        f"input 3 (projection type) must be 1 (sparse, deprecated), 2 (dense) or 3 "
        f"(sparse), got {kind}",
        deferrable=True,
    )


def _infer_lsh(ctx: OperationContext) -> list[Shape]:
    hash_shape = ctx.shape(0)
    ctx.check(len(hash_shape) == 2, f"input 0 (hash) must have rank 2, got {list(hash_shape)}")
    num_hash, num_bits = hash_shape
    ctx.check(
        num_bits <= 32, f"input 0 (hash) may have at most 32 bits per function, got {num_bits}"
    )
    in_shape = ctx.shape(1)
    ctx.check(len(in_shape) >= 1, "input 1 (input) must have rank >= 1, got a scalar shape")
    if not ctx.is_omitted(2) and ctx.shapes[2] is not None:
        w = ctx.shapes[2]
        ctx.check(
            len(w) == 1 and w[0] == in_shape[0],
            f"input 2 (weight) must have shape [{in_shape[0]}] (input 1's first dimension), "
            f"got {list(w)}",
        )
    kind = ctx.scalar(3)
    if kind == LSH_DENSE:
        return [(num_hash * num_bits,)]
    if kind == LSH_SPARSE:
        # The per-function offset k << bits must fit in int32 (NeuralNetworks.h).
        extra = math.ceil(math.log2(num_hash)) if num_hash > 1 else 0
        ctx.check(
            num_bits + extra <= 32,
            f"input 0 (hash) shape {list(hash_shape)}: sparse projection needs "
            f"bits + ceil(log2(functions)) <= 32",
        )
    return [(num_hash,)]


def lsh_sign_bits(seeds: np.ndarray, rows: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """Android's ``runningSignBit`` for every seed at once.

    ``seeds``: the hash tensor's values (float32 or float16; their bytes start each key);
    ``rows``: the input as a uint8 array of shape ``(rows, bytes per row)``;
    ``weights``: per-row weights (the hash dtype) or None. Returns 0/1 bits shaped like
    ``seeds``. The score is the running double sum, in row order, of each key's
    ``Fingerprint64`` read as int64 (times the row's weight)."""
    flat = np.ascontiguousarray(seeds).reshape(-1)
    num_rows = rows.shape[0]
    if num_rows == 0 or flat.size == 0:  # no rows: every score is 0; no seeds: no bits
        return np.zeros(seeds.shape, dtype=np.int64)
    # Seeds with the same bytes have the same keys and scores: hash each once (a hash
    # tensor made by TILE, FILL or RESIZE repeats a few values many times).
    seed_words = flat.view(f"u{flat.itemsize}")
    unique = np.unique(seed_words)
    seed_bytes = unique.view(np.uint8).reshape(unique.size, flat.itemsize)
    w = None if weights is None else weights.astype(np.float64)
    score = np.zeros(unique.size)
    key_bytes = flat.itemsize + rows.shape[1]
    keys_per_block = max(1, _LSH_CHUNK_BYTES // max(key_bytes, _LSH_MIN_KEY_COST))
    # All the seeds in a block when they fit: each row's words are then fetched once.
    seeds_per_block = min(unique.size, keys_per_block)
    rows_per_block = max(1, keys_per_block // seeds_per_block)
    for r in range(0, num_rows, rows_per_block):
        block_rows = rows[r : r + rows_per_block]
        n = block_rows.shape[0]
        for s in range(0, unique.size, seeds_per_block):
            k = min(seeds_per_block, unique.size - s)
            keys = _SeededKeys(seed_bytes[s : s + k], block_rows)
            hashed = _fingerprint64(keys).view(np.int64).astype(np.float64)
            if w is not None:
                hashed = w[None, r : r + n] * hashed
            if r > 0:  # continue the running sum: (score + h_r) + h_r+1 ..., as the C++
                hashed[:, 0] = score[s : s + k] + hashed[:, 0]
            # np.add.accumulate sums left to right, like the C++ loop (np.sum would pair up).
            score[s : s + k] = np.add.accumulate(hashed, axis=1)[:, -1]
    # Binary search of each seed among the unique ones: cheaper than unique's inverse.
    positive = np.take(score > 0, np.searchsorted(unique, seed_words))
    return positive.astype(np.int64).reshape(seeds.shape)


_LSH_CHUNK_BYTES = 1 << 20
"""LSH hashes a block of (seed, row) keys at a time, about this many key bytes, so its
keys and their uint64 hash temporaries stay a few MB however many rows and seeds."""

_LSH_MIN_KEY_COST = 64
"""Bytes a key counts for in a block at least: short keys' temporaries (a dozen uint64
arrays per key) outweigh the key bytes."""


def _execute_lsh(ctx: OperationContext) -> list[np.ndarray]:
    seeds = ctx.value(0)
    data = np.ascontiguousarray(ctx.value(1))
    num_rows = data.shape[0]
    rows = (
        data.view(np.uint8).reshape(num_rows, -1)
        if data.size
        else (np.zeros((num_rows, 0), dtype=np.uint8))
    )
    weights = None if ctx.is_omitted(2) else ctx.value(2).astype(seeds.dtype)
    bits = lsh_sign_bits(seeds, rows, weights)
    kind = ctx.scalar(3)
    if kind == LSH_DENSE:
        return [bits.reshape(-1).astype(np.int32)]
    num_hash, num_bits = seeds.shape
    # Signature bits are shifted in most-significant first (int32 in C++; held as int64).
    powers = np.left_shift(np.int64(1), np.arange(num_bits - 1, -1, -1, dtype=np.int64))
    signature = (bits * powers).sum(axis=1)
    if kind == LSH_SPARSE:
        signature = signature + np.arange(num_hash, dtype=np.int64) * (np.int64(1) << num_bits)
    wrapped = ((signature + 2**31) & 0xFFFFFFFF) - 2**31
    return [wrapped.astype(np.int32)]


LSH_PROJECTION = OperationDeclaration(
    OperationType.LSH_PROJECTION,
    _lsh_signatures(),
    infer_shapes=_infer_lsh,
    execute=_execute_lsh,
    validate=_validate_lsh,
    summary=(
        "Locality-sensitive hashing of the input rows to a bit vector (dense) or one "
        "signature per hash function (sparse), with farmhash Fingerprint64."
    ),
    notes=(
        "Type 3 (sparse with per-function offset) needs HAL 1.2; type 1 is 1.0's sparse.",
        "Signed and unsigned quant8 inputs hash different bytes, so their results differ.",
    ),
)


# ---------------------------------------------------------------------------------------
# Philox4x32-10 (tensorflow::random::PhiloxRandom) and RANDOM_MULTINOMIAL
# ---------------------------------------------------------------------------------------

_PHILOX_M0 = np.uint64(0xD2511F53)
_PHILOX_M1 = np.uint64(0xCD9E8D57)
_PHILOX_W0 = 0x9E3779B9
_PHILOX_W1 = 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 blocks: ``counters`` is ``(n, 4)`` uint32 words (low word first);
    returns ``(n, 4)`` uint32 outputs, as TensorFlow's ``PhiloxRandom::operator()``."""
    return _philox_lanes(*(counters[:, i].astype(np.uint64) for i in range(4)), key)


def _philox_lanes(c0, c1, c2, c3, key: tuple[int, int]) -> np.ndarray:
    """:func:`philox4x32` on the counters' four words as uint64 arrays, which it
    overwrites: the rounds run in place (a stream of 2**25 draws would otherwise
    allocate hundreds of fresh arrays)."""
    p0, p1 = np.empty_like(c0), np.empty_like(c0)
    k0, k1 = key[0] & 0xFFFFFFFF, key[1] & 0xFFFFFFFF
    for round_ in range(10):
        if round_:
            k0 = (k0 + _PHILOX_W0) & 0xFFFFFFFF
            k1 = (k1 + _PHILOX_W1) & 0xFFFFFFFF
        np.multiply(c0, _PHILOX_M0, out=p0)
        np.multiply(c2, _PHILOX_M1, out=p1)
        # (c0, c1, c2, c3) <- (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))
        np.right_shift(p1, _U64(32), out=c0)
        c0 ^= c1
        c0 ^= _U64(k0)
        np.bitwise_and(p1, _MASK32, out=c1)
        np.right_shift(p0, _U64(32), out=c2)
        c2 ^= c3
        c2 ^= _U64(k1)
        np.bitwise_and(p0, _MASK32, out=c3)
    out = np.empty((c0.size, 4), dtype=np.uint32)
    for i, lane in enumerate((c0, c1, c2, c3)):
        out[:, i] = lane
    return out


def philox_uint32_stream(seed: int, seed2: int, count: int, start: int = 0) -> np.ndarray:
    """Outputs ``start .. start + count - 1`` of ``PhiloxRandom(seed, seed2)`` as consumed
    one at a time (``SingleSampleAdapter``): block ``i`` (counter ``i`` in the low 64
    bits, seed2 in the high 64) gives outputs ``4i .. 4i + 3``, in order."""
    lo = seed & 0xFFFFFFFFFFFFFFFF
    hi = seed2 & 0xFFFFFFFFFFFFFFFF
    first, skip = divmod(start, 4)
    blocks = (skip + count + 3) // 4
    idx = np.arange(first, first + blocks, dtype=np.uint64)
    # 128-bit counter: a carry into the seed2 words needs 2**64 blocks: cannot happen.
    words = _philox_lanes(
        idx & _MASK32,
        idx >> _U64(32),
        np.full(blocks, hi & 0xFFFFFFFF, dtype=np.uint64),
        np.full(blocks, hi >> 32, dtype=np.uint64),
        (lo & 0xFFFFFFFF, lo >> 32),
    ).reshape(-1)
    return words[skip : skip + count]


def philox_doubles(seed: int, seed2: int, count: int, start: int = 0) -> np.ndarray:
    """``SimplePhilox::RandDouble`` draws ``start .. start + count - 1``: two outputs
    x0, x1 make the double 1.(x0 & 0xfffff)(x1) - 1.0, uniform in [0, 1)."""
    words = philox_uint32_stream(seed, seed2, 2 * count, 2 * start).astype(np.uint64)
    words = words.reshape(count, 2)
    mantissa = ((words[:, 0] & _U64(0xFFFFF)) << _U64(32)) | words[:, 1]
    bits = (_U64(1023) << _U64(52)) | mantissa
    return bits.view(np.float64) - 1.0


def _validate_multinomial(ctx: OperationContext) -> None:
    # Android 11's validateOperation checks counts, types and the version only; the ranks
    # and the sample count are Multinomial::Prepare's, at execution: deferrable.
    ctx.check_rank(0, exact=2, deferrable=True)
    ctx.check_rank(2, exact=1, deferrable=True)
    samples = ctx.scalar(1)
    # Zero samples is valid: Android's Multinomial::Prepare takes any count (output
    # [batches, 0]) and the doc sets no minimum. A negative count becomes a huge uint32
    # dimension there, which fails at execution.
    ctx.check(
        samples >= 0,
        f"input 1 (sample count) must not be negative, got {samples}",
        deferrable=True,
    )


def _infer_multinomial(ctx: OperationContext) -> list[Shape]:
    logits = ctx.shape(0)
    ctx.check(len(logits) == 2, f"input 0 must have rank 2, got {list(logits)}")
    seeds = ctx.shape(2)
    ctx.check(seeds == (2,), f"input 2 (seeds) must have shape [2], got {list(seeds)}")
    return [(logits[0], ctx.scalar(1))]


def multinomial_samples(logits: np.ndarray, num_samples: int, seed: int, seed2: int) -> np.ndarray:
    """Android's ``Multinomial::EvalFloat32``: per row, CDF of exp(x - max) over the
    finite logits (double), then ``upper_bound(cdf, u * total)`` for each Philox double u.
    A row with no finite logit gives index ``classes`` (as Android does)."""
    logits = np.asarray(logits, dtype=np.float32)
    batches, classes = logits.shape
    finite = np.isfinite(logits)
    lowest = np.float32(np.finfo(np.float32).min)
    row_max = np.where(finite, logits, lowest).max(axis=1, initial=lowest).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.where(finite, np.exp(logits.astype(np.float64) - row_max[:, None]), 0.0)
    cdf = np.cumsum(terms, axis=1)  # sequential, as the C++ running total
    total = cdf[:, -1] if classes else np.zeros(batches)
    out = np.empty((batches, num_samples), dtype=np.int32)
    if classes <= _COUNTING_CLASSES:
        # Few classes: upper_bound = how many CDF entries are <= the target, for many rows
        # at once; chunks of rows (or of one row's samples) keep the comparisons small.
        per_draw = max(classes, 1)
        span = max(1, min(num_samples, _SAMPLE_CHUNK // per_draw))
        rows = max(1, _SAMPLE_CHUNK // (span * per_draw)) if span == num_samples else 1
        for b in range(0, batches, rows):
            k = min(rows, batches - b)
            for s in range(0, num_samples, span):
                m = min(span, num_samples - s)
                # k > 1 only when whole rows fit: their draws are then consecutive.
                u = philox_doubles(seed, seed2, k * m, b * num_samples + s).reshape(k, m)
                targets = u * total[b : b + k, None]
                # A count per class: summing a (rows, draws, classes) comparison over
                # its short last axis is several times slower.
                count = out[b : b + k, s : s + m]
                count[...] = 0
                for j in range(classes):
                    count += cdf[b : b + k, j, None] <= targets
        return out
    for b in range(batches):  # the draws run on across rows; chunks bound the memory
        for s in range(0, num_samples, _SAMPLE_CHUNK):
            k = min(_SAMPLE_CHUNK, num_samples - s)
            u = philox_doubles(seed, seed2, k, b * num_samples + s)
            out[b, s : s + k] = np.searchsorted(cdf[b], u * total[b], side="right")
    return out


_COUNTING_CLASSES = 16
_SAMPLE_CHUNK = 1 << 20


def _execute_multinomial(ctx: OperationContext) -> list[np.ndarray]:
    seeds = ctx.value(2).astype(np.int64)  # int32 -> int64 sign extension, as Init(int64)
    logits = ctx.value(0).astype(np.float32)
    return [multinomial_samples(logits, ctx.scalar(1), int(seeds[0]), int(seeds[1]))]


RANDOM_MULTINOMIAL = OperationDeclaration(
    OperationType.RANDOM_MULTINOMIAL,
    tuple(
        Signature((t, _T.INT32, _T.TENSOR_INT32), (_T.TENSOR_INT32,), V.V1_2)
        for t in (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)
    ),
    infer_shapes=_infer_multinomial,
    execute=_execute_multinomial,
    validate=_validate_multinomial,
    summary=(
        "Draws class indices from per-row categorical distributions given by logits "
        "(Philox4x32-10 seeded by the seed tensor, as Android)."
    ),
    notes=("Seeds (0, 0) are used as given; Android substitutes OS randomness for them.",),
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (LSH_PROJECTION, RANDOM_MULTINOMIAL)
