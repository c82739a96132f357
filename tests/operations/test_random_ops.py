"""LSH_PROJECTION (farmhash Fingerprint64, dense/sparse, 1.2's offset) and
RANDOM_MULTINOMIAL (Philox4x32-10 sampling, tested by distribution and bit-exactly
against a scalar transcription of TensorFlow's SimplePhilox + std::upper_bound)."""

from __future__ import annotations

import bisect
import struct

import numpy as np
import pytest

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations.random_ops import (
    fingerprint64,
    lsh_sign_bits,
    multinomial_samples,
    philox4x32,
    philox_doubles,
)
from driver.testing import assert_example, omitted, output, run_op, scalar, tensor, traced_peak
from tests.operations.examples_random_ops import EXAMPLES
from tests.operations.test_elementwise import assert_rejection

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32


def hal_error(fn) -> HalError:
    with pytest.raises(HalError) as info:
        fn()
    return info.value


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_examples(ex):
    assert_example(ex)


# ---------------------------------------------------------------------------------------
# farmhash
# ---------------------------------------------------------------------------------------

# Fingerprint64 of bytes((37 i + 11) mod 256 for i < length), from the farmhash C++
# sources (via the pyfarmhash bindings): one length in each of the hash's code paths.
FINGERPRINTS = {
    0: 0x9AE16A3B2F90404F,
    1: 0x4271B80E2915C76A,
    3: 0x373A2B2A12E0C581,
    4: 0xCC1E778137AE6D69,
    7: 0x960838FBC6D9C975,
    8: 0x7D507025ED4EECFD,
    12: 0x12A0D52D6F922439,
    16: 0xD836480326A974D6,
    17: 0x5CDED6CB65C9DAC6,
    31: 0x52A467E87C92D522,
    32: 0xA03300E1B2BE6DA7,
    33: 0x839154CA67815696,
    64: 0x000F03EAC52D3535,
    65: 0xFB360C5023F60DB6,
    127: 0xD70E348FCBF64D04,
    128: 0x33EF435F17AF1739,
    200: 0x51320A19A60CBD6E,
}


@pytest.mark.parametrize("length", sorted(FINGERPRINTS))
def test_fingerprint64_known_answers(length):
    key = np.array([(37 * i + 11) % 256 for i in range(length)], dtype=np.uint8)
    # Three copies: the vectorized hash must treat rows independently.
    keys = np.stack([key, key, key])
    assert fingerprint64(keys).tolist() == [FINGERPRINTS[length]] * 3


def test_fingerprint64_rows_are_independent():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 256, (8, 12), dtype=np.uint8)
    together = fingerprint64(keys)
    alone = [int(fingerprint64(k[None])[0]) for k in keys]
    assert together.tolist() == alone
    assert len(set(alone)) == 8


# ---------------------------------------------------------------------------------------
# LSH_PROJECTION
# ---------------------------------------------------------------------------------------


def lsh(hash_values, values, weights, kind, *, hash_type=F32, in_type=I32, version=None):
    hash_values = np.asarray(hash_values)
    n, bits = hash_values.shape
    quant = in_type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
    w = omitted(hash_type) if weights is None else tensor(hash_type, weights)
    return run_op(
        O.LSH_PROJECTION,
        [
            tensor(hash_type, hash_values),
            tensor(in_type, values, scale=1.0 if quant else 0.0),
            w,
            scalar(T.INT32, kind),
        ],
        [output(I32, (n * bits,) if kind == 2 else (n,))],
        version=version,
    )[0]


def scalar_sign_bit(seed: bytes, rows: list[bytes], weights) -> int:
    """Android's runningSignBit, one key at a time."""
    score = 0.0
    for r, row in enumerate(rows):
        h = int(fingerprint64(np.frombuffer(seed + row, np.uint8)[None])[0])
        value = float(h - (1 << 64) if h >= 1 << 63 else h)
        score += value if weights is None else float(weights[r]) * value
    return int(score > 0)


def test_lsh_bits_match_key_by_key_hashing():
    rng = np.random.default_rng(3)
    seeds = rng.standard_normal((4, 3)).astype(np.float32)
    data = rng.integers(-1000, 1000, (5, 3)).astype(np.int32)
    weights = rng.standard_normal(5).astype(np.float32)
    rows = [r.tobytes() for r in data]
    for w in (None, weights):
        got = lsh_sign_bits(seeds, data.view(np.uint8).reshape(5, -1), w)
        want = [[scalar_sign_bit(s.tobytes(), rows, w) for s in row] for row in seeds]
        assert got.tolist() == want


def test_lsh_float16_seeds_hash_two_bytes():
    seeds = np.array([[1.5, -0.25]], np.float16)
    data = np.array([7, 9], np.int32)
    got = lsh(seeds, data, None, 2, hash_type=F16)
    want = [
        scalar_sign_bit(struct.pack("<e", float(s)), [b"\x07\0\0\0", b"\t\0\0\0"], None)
        for s in seeds[0]
    ]
    assert got.tolist() == want


def test_lsh_sparse_and_dense_agree_and_1_2_adds_offsets():
    rng = np.random.default_rng(5)
    hashes = rng.standard_normal((5, 4)).astype(np.float32)
    data = rng.integers(0, 100, (6, 2)).astype(np.int32)
    dense = lsh(hashes, data, None, 2).reshape(5, 4)
    sig = (dense * (1 << np.arange(3, -1, -1))).sum(axis=1)  # most significant bit first
    legacy = lsh(hashes, data, None, 1)
    assert legacy.tolist() == sig.tolist()
    sparse = lsh(hashes, data, None, 3)
    assert sparse.tolist() == (sig + np.arange(5) * 16).tolist()


def test_lsh_weights_scale_each_row():
    rng = np.random.default_rng(6)
    hashes = rng.standard_normal((6, 3)).astype(np.float32)
    data = rng.integers(0, 100, (4,)).astype(np.int32)
    ones = lsh(hashes, data, [1, 1, 1, 1], 2)
    assert ones.tolist() == lsh(hashes, data, None, 2).tolist()
    flipped = lsh(hashes, data, [-1, -1, -1, -1], 2)
    assert (flipped == 1 - ones).all()  # a score of exactly 0 is astronomically unlikely
    # Zero weights make every score exactly 0, and the bit is set only for a score > 0.
    assert lsh(hashes, data, [0, 0, 0, 0], 2).tolist() == [0] * 18


def test_lsh_takes_32_bits_per_function():
    hashes = np.random.default_rng(7).standard_normal((2, 32)).astype(np.float32)
    dense = lsh(hashes, [1, 2], None, 2)
    assert dense.shape == (64,) and set(dense.tolist()) <= {0, 1}
    # The legacy sparse signature of 32 bits fills the int32 (most significant bit first).
    legacy = lsh(hashes, [1, 2], None, 1)
    want = (dense.reshape(2, 32).astype(np.int64) << np.arange(31, -1, -1)).sum(axis=1)
    assert legacy.tolist() == (((want + 2**31) % 2**32) - 2**31).tolist()


def test_lsh_rows_hash_all_their_bytes():
    # Rank-3 input: each row (dim 0) is 2 x 3 int32 = 24 key bytes after the seed.
    data = np.arange(12, dtype=np.int32).reshape(2, 2, 3)
    hashes = np.array([[0.5, 1.5, -2.5]], np.float32)
    got = lsh(hashes, data, None, 2)
    rows = [data[0].tobytes(), data[1].tobytes()]
    want = [scalar_sign_bit(np.float32(s).tobytes(), rows, None) for s in hashes[0]]
    assert got.tolist() == want


def test_lsh_sparse_offset_needs_hal_1_2():
    # (Weights given: an omitted operand of unknown rank would itself need 1.2.)
    h, w = [[0.1, 0.2]], [1.0, 1.0]
    assert lsh(h, [1, 2], w, 1, version=HalVersion.V1_0).shape == (1,)
    err = hal_error(lambda: lsh(h, [1, 2], w, 3, version=HalVersion.V1_0))
    assert err.status == ErrorStatus.INVALID_ARGUMENT and "1.2" in err.message
    assert lsh(h, [1, 2], w, 3, version=HalVersion.V1_2).shape == (1,)


def test_lsh_signed_input_needs_hal_1_3():
    h = [[0.1, 0.2]]
    kw = dict(in_type=T.TENSOR_QUANT8_ASYMM_SIGNED)
    err = hal_error(lambda: lsh(h, [1, -2], None, 2, version=HalVersion.V1_2, **kw))
    assert err.status == ErrorStatus.INVALID_ARGUMENT
    assert lsh(h, [1, -2], None, 2, version=HalVersion.V1_3, **kw).shape == (2,)


@pytest.mark.parametrize(
    "hashes, weights, kind",
    [
        ([[0.1, 0.2]], None, 4),  # unknown projection type
        ([[0.1, 0.2]], [1.0, 2.0, 3.0], 2),  # weights must match input rows
        (np.zeros((1, 33)), None, 2),  # more than 32 bits per function
        (np.zeros((3, 31)), None, 3),  # sparse offsets overflow int32
    ],
    ids=["type", "weight-shape", "bits", "sparse-overflow"],
)
def test_lsh_rejects_bad_parameters(hashes, weights, kind):
    err = hal_error(lambda: lsh(hashes, [1, 2], weights, kind))
    assert err.status == ErrorStatus.INVALID_ARGUMENT


# ---------------------------------------------------------------------------------------
# Philox and RANDOM_MULTINOMIAL
# ---------------------------------------------------------------------------------------


def test_philox_known_answer_vectors():
    # Random123's published Philox4x32-10 known-answer tests.
    cases = [
        ([0, 0, 0, 0], (0, 0), [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        (
            [0xFFFFFFFF] * 4,
            (0xFFFFFFFF, 0xFFFFFFFF),
            [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD],
        ),
        (
            [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
            (0xA4093822, 0x299F31D0),
            [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
        ),
    ]
    for counter, key, want in cases:
        assert philox4x32(np.array([counter], np.uint32), key)[0].tolist() == want


def scalar_philox_doubles(seed: int, seed2: int, count: int) -> list[float]:
    """TensorFlow's PhiloxRandom + SingleSampleAdapter + SimplePhilox::RandDouble."""
    key = [seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF]
    counter = [0, 0, seed2 & 0xFFFFFFFF, (seed2 >> 32) & 0xFFFFFFFF]
    pending: list[int] = []

    def next_u32() -> int:
        nonlocal pending
        if not pending:
            block = philox4x32(np.array([counter], np.uint32), tuple(key))[0]
            pending = [int(v) for v in block]
            for i in range(4):  # SkipOne: 128-bit increment
                counter[i] = (counter[i] + 1) & 0xFFFFFFFF
                if counter[i]:
                    break
        return pending.pop(0)

    out = []
    for _ in range(count):
        x0, x1 = next_u32(), next_u32()
        bits = (1023 << 52) | ((x0 & 0xFFFFF) << 32) | x1
        out.append(struct.unpack("<d", struct.pack("<Q", bits))[0] - 1.0)
    return out


def test_philox_doubles_match_the_scalar_generator():
    for seed, seed2 in ((1, 2), (-5, 77), (0, 0), (2**31 - 1, -(2**31))):
        s64, s2 = seed & (2**64 - 1), seed2 & (2**64 - 1)
        assert philox_doubles(s64, s2, 9).tolist() == scalar_philox_doubles(s64, s2, 9)


def multinomial(logits, samples, seeds, t=F32):
    logits = np.asarray(logits)
    return run_op(
        O.RANDOM_MULTINOMIAL,
        [tensor(t, logits), scalar(T.INT32, samples), tensor(I32, seeds)],
        [output(I32, (logits.shape[0], samples))],
    )[0]


def test_multinomial_matches_cdf_inversion_bit_exactly():
    logits = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, np.inf, -np.inf]], np.float32)
    got = multinomial(logits, 7, [123, -456])
    u = scalar_philox_doubles(123, -456 & (2**64 - 1), 14)
    want = []
    for b, row in enumerate(logits.astype(np.float64)):
        finite = np.isfinite(row)
        terms = np.where(finite, np.exp(row - row[finite].max()), 0.0)
        cdf = list(np.cumsum(terms))
        want.append([bisect.bisect_right(cdf, x * cdf[-1]) for x in u[7 * b : 7 * b + 7]])
    assert got.tolist() == want


def test_multinomial_distribution_within_tolerance():
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]])
    n = 20000
    got = multinomial(np.log(probs), n, [42, 7])
    for b in range(2):
        freq = np.bincount(got[b], minlength=4) / n
        np.testing.assert_allclose(freq, probs[b], atol=0.015)  # ~3 sigma at n = 20000


def test_multinomial_float16_logits():
    probs = np.array([[0.25, 0.25, 0.5]])
    got = multinomial(np.log(probs).astype(np.float16), 8000, [9, 9], t=F16)
    np.testing.assert_allclose(np.bincount(got[0], minlength=3) / 8000, probs[0], atol=0.02)


def test_multinomial_is_reproducible_per_seed():
    logits = np.zeros((2, 5), np.float32)
    a = multinomial(logits, 50, [1, 2])
    assert (a == multinomial(logits, 50, [1, 2])).all()
    assert not (a == multinomial(logits, 50, [2, 1])).all()
    assert not (a[0] == a[1]).all()  # batches draw successive numbers


@pytest.mark.parametrize("classes", [3, 40])
def test_multinomial_chunking_does_not_change_the_draws(monkeypatch, classes):
    import driver.operations.random_ops as r

    logits = np.random.default_rng(8).standard_normal((5, classes)).astype(np.float32)
    whole = multinomial_samples(logits, 37, 5, 6)
    monkeypatch.setattr(r, "_SAMPLE_CHUNK", 7)
    assert (multinomial_samples(logits, 37, 5, 6) == whole).all()
    monkeypatch.setattr(r, "_SAMPLE_CHUNK", 400)  # several whole rows per chunk
    assert (multinomial_samples(logits, 37, 5, 6) == whole).all()


def test_philox_doubles_from_an_offset_continue_the_stream():
    whole = philox_doubles(3, 4, 11)
    for start in (1, 2, 5):
        assert philox_doubles(3, 4, 11 - start, start).tolist() == whole[start:].tolist()


@pytest.mark.parametrize("weighted", [False, True])
def test_lsh_chunking_does_not_change_the_bits(monkeypatch, weighted):
    import driver.operations.random_ops as r

    rng = np.random.default_rng(9)
    seeds = rng.standard_normal((7, 5)).astype(np.float32)
    seeds[3] = seeds[5]  # repeated seeds are hashed once
    rows = rng.integers(0, 256, (6, 8), dtype=np.uint8)
    weights = rng.standard_normal(6).astype(np.float32) if weighted else None
    whole = lsh_sign_bits(seeds, rows, weights)
    monkeypatch.setattr(r, "_LSH_CHUNK_BYTES", 100)  # one key a block: the sum carries over
    assert (lsh_sign_bits(seeds, rows, weights) == whole).all()


@pytest.mark.parametrize("seed_bytes", [2, 4])
def test_seeded_keys_hash_as_the_materialized_keys(seed_bytes):
    """LSH never builds its seed + row keys; every farmhash branch (0-16, 17-32, 33-64 and
    longer keys) must read the words that straddle the seed and the row bytes alike."""
    from driver.operations.random_ops import _fingerprint64, _SeededKeys

    rng = np.random.default_rng(seed_bytes)
    seeds = rng.integers(0, 256, (3, seed_bytes), dtype=np.uint8)
    for row_bytes in [*range(0, 70), 127, 128, 129, 200]:
        rows = rng.integers(0, 256, (4, row_bytes), dtype=np.uint8)
        keys = np.concatenate([np.repeat(seeds, 4, axis=0), np.tile(rows, (3, 1))], axis=1).reshape(
            3, 4, -1
        )
        want = fingerprint64(keys.reshape(12, -1)).reshape(3, 4)
        np.testing.assert_array_equal(_fingerprint64(_SeededKeys(seeds, rows)), want)


def test_lsh_of_many_rows_needs_little_more_memory_than_its_input():
    # 1M rows of 4 bytes and 6 seeds: whole-input keys and hash temporaries per seed took
    # ~15x the input; LSH now hashes a block of keys at a time.

    rng = np.random.default_rng(10)
    data = rng.integers(-(2**31), 2**31, 1 << 20).astype(np.int32)
    weights = rng.standard_normal(1 << 20).astype(np.float32)
    got, peak = traced_peak(
        lambda: lsh([[0.25, -1.5], [3.0, 0.125], [-2.0, 7.5]], data, weights, 2)
    )
    assert got.shape == (6,)
    assert peak < 3 * (data.nbytes + weights.nbytes) + (4 << 20), f"peak {peak >> 20} MB"


def test_multinomial_rows_without_finite_logits_give_class_count():
    out = multinomial_samples(np.array([[np.nan, -np.inf, np.inf]], np.float32), 3, 1, 1)
    assert out.tolist() == [[3, 3, 3]]  # Android's upper_bound over an all-zero CDF


@pytest.mark.parametrize("samples, seeds", [(-1, [1, 2]), (-3, [1, 2]), (2, [1, 2, 3])])
def test_multinomial_rejects_bad_parameters(samples, seeds):
    err = hal_error(
        lambda: run_op(
            O.RANDOM_MULTINOMIAL,
            [tensor(F32, [[0.0, 1.0]]), scalar(T.INT32, samples), tensor(I32, seeds)],
            [output(I32, (1, max(samples, 1)))],
        )
    )
    assert err.status == ErrorStatus.INVALID_ARGUMENT


_HASH = tensor(F32, [[0.1, 0.2]])
_LOGITS = tensor(F32, [[0.0, 1.0]])


@pytest.mark.parametrize(
    "case, deferrable, match",
    [
        # Utils.cpp's validateOperation checks counts, types and versions...
        ((O.LSH_PROJECTION, [tensor(I32, [[1, 2]]), tensor(I32, [1, 2]), omitted(I32),
                             scalar(T.INT32, 2)], [output(I32, (2,))]), False, "no signature"),
        ((O.RANDOM_MULTINOMIAL, [tensor(I32, [[0, 1]]), scalar(T.INT32, 1), tensor(I32, [1, 2])],
          [output(I32, (1, 1))]), False, "no signature"),
        # ...LSHProjection::Prepare the projection type and the shapes...
        ((O.LSH_PROJECTION, [_HASH, tensor(I32, [1, 2]), omitted(F32), scalar(T.INT32, 4)],
          [output(I32, (1,))]), True, "input 3 \\(projection type\\)"),
        ((O.LSH_PROJECTION, [_HASH, tensor(I32, [1, 2]), tensor(F32, [1.0, 2.0, 3.0]),
                             scalar(T.INT32, 2)], [output(I32, (2,))]),
         True, "input 2 \\(weight\\)"),
        # ...Multinomial::Prepare the ranks and the sample count.
        ((O.RANDOM_MULTINOMIAL, [tensor(F32, [0.0, 1.0]), scalar(T.INT32, 1), tensor(I32, [1, 2])],
          [output(I32, (1, 1))]), True, "input 0 must have rank 2"),
        ((O.RANDOM_MULTINOMIAL, [_LOGITS, scalar(T.INT32, 1), tensor(I32, [[1, 2]])],
          [output(I32, (1, 1))]), True, "input 2 must have rank 1"),
        ((O.RANDOM_MULTINOMIAL, [_LOGITS, scalar(T.INT32, -1), tensor(I32, [1, 2])],
          [output(I32, (1, 1))]), True, "must not be negative"),
        ((O.RANDOM_MULTINOMIAL, [_LOGITS, scalar(T.INT32, 1), tensor(I32, [1, 2, 3])],
          [output(I32, (1, 1))]), True, "seeds"),
    ],
    ids=["lsh-types", "multinomial-types", "lsh-type-value", "lsh-weight-shape",
         "logits-rank", "seeds-rank", "sample-count", "seeds-shape"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(case, deferrable, match):
    assert_rejection(case, deferrable, match)


@pytest.mark.parametrize("logits, declared", [([[0.0, 1.0]], (1, 0)), ([[0.0], [2.0]], (0, 0))])
def test_multinomial_accepts_zero_samples(logits, declared):
    """Android's Multinomial::Prepare takes any sample count (output [batches, 0] for 0)
    and the doc sets no minimum: zero samples is a valid, empty draw."""
    (out,) = run_op(
        O.RANDOM_MULTINOMIAL,
        [tensor(F32, logits), scalar(T.INT32, 0), tensor(I32, [1, 2])],
        [output(I32, declared)],
    )
    assert out.shape == (len(logits), 0)
