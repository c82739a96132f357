"""Choice sources: the PRNG against an independent transcription of the reference
algorithms, the replay/byte/Hypothesis sources, and the derived choices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from randomgraph.choices import (
    ByteSource,
    HypothesisSource,
    PrngSource,
    ReplaySource,
    bulk_integers,
    bulk_unit,
    bulk_words,
    splitmix64,
)

M = 2**64


# --- reference algorithms, transcribed from the published C code ------------------------


def ref_splitmix64(x: int):
    """splitmix64.c (Vigna): yields outputs from state ``x``."""
    while True:
        x = (x + 0x9E3779B97F4A7C15) % M
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % M
        yield z ^ (z >> 31)


def ref_xoshiro256ss(seed: int):
    """xoshiro256starstar.c (Blackman, Vigna), state seeded by four splitmix64 outputs."""
    sm = ref_splitmix64(seed % M)
    s = [next(sm) for _ in range(4)]

    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) % M

    while True:
        result = (rotl((s[1] * 5) % M, 7) * 9) % M
        t = (s[1] << 17) % M
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        yield result


def test_splitmix64_matches_published_vector():
    # First outputs of splitmix64 from state 0 (the widely published test vector).
    gen = ref_splitmix64(0)
    expected = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]
    assert [next(gen) for _ in range(4)] == expected
    state, out = splitmix64(0)
    assert out == expected[0] and state == 0x9E3779B97F4A7C15


@pytest.mark.parametrize("seed", [0, 1, 42, 2**63 + 5, 2**64 - 1])
def test_prng_is_xoshiro256starstar(seed):
    src = PrngSource(seed)
    ref = ref_xoshiro256ss(seed)
    assert [src.next64() for _ in range(50)] == [next(ref) for _ in range(50)]


def test_prng_ranges_use_rejection_and_low_bits():
    # Power of two: the low bits of one word; otherwise rejection above the largest
    # multiple of n (an independent computation from the reference stream).
    for n in (2, 8, 3, 10, 1000, 2**53, 2**64, 3 * 2**62):
        src, ref = PrngSource(9), ref_xoshiro256ss(9)
        for _ in range(20):
            got = src.draw(n)
            x = next(ref)
            if n & (n - 1) == 0:
                assert got == x & (n - 1)
            else:
                while x >= M - M % n:
                    x = next(ref)
                assert got == x % n
            assert 0 <= got < n


def test_same_seed_same_choices_different_seed_different():
    a, b, c = PrngSource(5), PrngSource(5), PrngSource(6)
    seq = [a.integer(0, 10**6) for _ in range(20)]
    assert seq == [b.integer(0, 10**6) for _ in range(20)]
    assert seq != [c.integer(0, 10**6) for _ in range(20)]


def test_zero_is_the_simplest_choice_everywhere():
    src = ReplaySource([])
    assert src.integer(3, 9) == 3
    assert src.small(2, 1000) == 2
    assert src.boolean(0.99) is False
    assert src.choice("xyz") == "x"
    assert src.real(0.5, 2.0) == 0.5
    items = [1, 2, 3, 4]
    src.shuffle(items)
    assert items == [1, 2, 3, 4]
    assert src.subset([1, 2, 3], 0.9) == []
    assert src.word() == 0
    assert src.boolean(1.0) is True and src.boolean(0.0) is False


def test_boolean_probability_is_honoured():
    src = PrngSource(1)
    hits = sum(src.boolean(0.25) for _ in range(4000))
    assert 850 < hits < 1150


def test_small_is_within_bounds_and_favours_small_values():
    src = PrngSource(3)
    values = [src.small(1, 1000) for _ in range(2000)]
    assert min(values) >= 1 and max(values) <= 1000
    assert sum(v <= 31 for v in values) > sum(v > 500 for v in values)


def test_small_covers_its_whole_range():
    # Dimensions are drawn with small(): a bias towards lo, but hi stays reachable.
    for hi in (1, 2, 3, 7, 8, 1000):
        src = PrngSource(hi)
        values = {src.small(0, hi) for _ in range(200 * hi.bit_length() + 400)}
        assert min(values) == 0 and max(values) == hi, hi
    # The top bit length (10 for a span of 999), then the top value of that length.
    assert ReplaySource([10, 487]).small(1, 1000) == 1000


def test_replay_reproduces_and_tolerates_edits():
    src = PrngSource(11)
    first = [src.integer(0, 50) for _ in range(10)] + [src.real(0, 1)]
    replay = ReplaySource(src.choices)
    assert [replay.integer(0, 50) for _ in range(10)] + [replay.real(0, 1)] == first
    assert replay.exhausted
    assert replay.integer(5, 9) == 5  # past the end: the simplest
    edited = ReplaySource([7, 123])
    assert edited.integer(0, 9) == 7
    assert edited.integer(0, 9) == 3  # out of range: reduced modulo the range


def test_draws_of_one_value_are_not_recorded():
    src = PrngSource(2)
    assert src.integer(4, 4) == 4
    assert src.choice(["only"]) == "only"
    assert src.choices == ()


def test_forced_values_are_recorded_and_replay():
    src = PrngSource(3)
    src.force(1007)
    assert src.draw(10) == 7
    rest = src.draw(100)
    assert src.choices == (7, rest)
    replay = ReplaySource(src.choices)
    assert (replay.draw(10), replay.draw(100)) == (7, rest)
    several = ReplaySource([])
    several.force(3, 1, 2)
    assert [several.draw(10) for _ in range(4)] == [3, 1, 2, 0]  # in order, then the source


def test_byte_source_reads_big_endian_and_ends_in_zeros():
    src = ByteSource(bytes([0x01, 0x02, 0xFF]))
    assert src.draw(1 << 16) == 0x0102
    assert src.draw(10) == 0xFF % 10
    assert src.remaining == 0
    assert src.draw(1 << 40) == 0
    assert src.boolean(0.9) is False
    partial = ByteSource(b"\x05")
    assert partial.draw(1 << 16) == 0x0500  # missing bytes read as zero


@given(st.data())
def test_hypothesis_source_records_what_it_draws(data):
    src = HypothesisSource(data)
    values = [src.integer(0, 7), src.boolean(), src.choice("abc"), src.word()]
    replay = ReplaySource(src.choices)
    assert [replay.integer(0, 7), replay.boolean(), replay.choice("abc"), replay.word()] == values


@given(st.data())
def test_hypothesis_span_carries_exceptions_out(data):
    src = HypothesisSource(data)

    def boom():
        src.integer(0, 3)
        raise KeyError("inside")

    with pytest.raises(KeyError):
        src.span(boom)
    assert src.span(lambda: src.integer(0, 3) + 10) >= 10


def test_bulk_words_are_splitmix64_of_a_counter():
    seed = 0x1234_5678_9ABC_DEF0
    words = bulk_words(seed, 5)
    for k, w in enumerate(words, start=1):
        z = (seed + k * 0x9E3779B97F4A7C15) % M
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % M
        assert int(w) == z ^ (z >> 31)


def test_bulk_values_are_in_range():
    u = bulk_unit(7, 10000)
    assert u.dtype == np.float64 and (u >= 0).all() and (u < 1).all()
    assert 0.45 < u.mean() < 0.55
    ints = bulk_integers(7, 10000, -3, 4)
    assert ints.min() == -3 and ints.max() == 4
    assert np.array_equal(bulk_integers(7, 50, 0, 9), bulk_integers(7, 50, 0, 9))


def test_shuffle_reaches_every_order():
    # Fisher-Yates draws j in [i, n): every item can land anywhere, so every order comes up.
    orders = set()
    for first in range(3):
        for second in range(2):
            items = ["a", "b", "c"]
            ReplaySource([first, second]).shuffle(items)
            orders.add("".join(items))
    assert orders == {"abc", "acb", "bac", "bca", "cab", "cba"}


def test_a_tiny_positive_probability_can_still_come_true():
    # p is honoured to 1/1024, but a positive p never rounds to "never".
    assert ReplaySource([1023]).boolean(1e-6) is True
    assert ReplaySource([1022]).boolean(1e-6) is False
    assert ReplaySource([0]).boolean(1 - 1e-6) is False  # nor a p below 1 to "always"


def test_a_weighted_choice_gives_each_item_its_weight():
    # Draws 0..5 over weights 1, 2, 3: one "a", two "b", three "c" (v < w picks).
    picks = [ReplaySource([v]).weighted("abc", [1, 2, 3]) for v in range(6)]
    assert picks == ["a", "b", "b", "c", "c", "c"]
