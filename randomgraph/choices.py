"""Choice sources: every random decision the generator makes goes through one of these.

The generator never calls ``random`` or a numpy distribution. It asks a
:class:`ChoiceSource` for small integers, and everything else (booleans, picks, reals,
shuffles, dimensions, bulk tensor values) is derived from those integers with explicit
arithmetic. One primitive, :meth:`ChoiceSource.draw` (an integer in ``[0, n)``), is all
a source implements, and **0 is always the simplest choice**: the lowest integer, False,
the first item of a sequence, the low end of a real range, the identity shuffle. That
gives every source the same meaning for the same integers, so:

* :class:`PrngSource` — seed N gives the same graph on any machine and any Python or
  numpy version: xoshiro256** (Blackman and Vigna) seeded through splitmix64, all in
  Python integers masked to 64 bits, with unbiased rejection for ranges.
* :class:`HypothesisSource` — each draw is a Hypothesis ``integers(0, n - 1)``, so
  Hypothesis shrinks a graph by shrinking its choices towards 0 (see
  :mod:`randomgraph.strategies`).
* :class:`ByteSource` — consumes a byte string (an atheris input); an exhausted input
  gives 0s, never an error.
* :class:`ReplaySource` — replays a recorded choice sequence. Every source records the
  integers it returned (:attr:`ChoiceSource.record`), so a graph is regenerated from its
  record, and a reducer can shrink a failing graph by editing the record (delete or
  lower values) and replaying: whatever the integers, the generator makes a valid graph.

Draws with ``n == 1`` are neither consumed nor recorded (there is nothing to choose).

Bulk tensor values are one recorded 64-bit draw (:meth:`ChoiceSource.word`) expanded by
:func:`bulk_words`, a vectorized splitmix64 over a counter written in numpy ``uint64``
arithmetic (wrapping, bit-exact everywhere), so a 10,000-element tensor costs one choice.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, MutableSequence, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

MASK64 = (1 << 64) - 1
PROBABILITY_RESOLUTION = 1 << 10
"""Booleans are drawn as an integer in [0, 1024): ``p`` is honoured to 1/1024."""
REAL_RESOLUTION = 1 << 53
"""Reals are drawn as an integer in [0, 2^53) and scaled (every float64 mantissa)."""


def splitmix64(state: int) -> tuple[int, int]:
    """One splitmix64 step: (new state, output). Used to seed xoshiro256**."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class ChoiceSource(abc.ABC):
    """The interface the generator draws from. Subclasses implement :meth:`_draw`."""

    def __init__(self) -> None:
        self.record: list[int] = []
        self._forced: list[int] = []

    # --- the primitive --------------------------------------------------------------
    @abc.abstractmethod
    def _draw(self, n: int) -> int:
        """A raw draw in ``[0, n)`` from the underlying source."""

    def draw(self, n: int) -> int:
        """An integer in ``[0, n)``; 0 is the simplest. ``n`` may be as large as 2^64."""
        if n <= 1:
            return 0
        if self._forced:
            v = self._forced.pop(0) % n
        else:
            v = self._draw(n)
        self.record.append(v)
        return v

    def span(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (which draws from this source) as one unit of choices. Sources that
        shrink (Hypothesis) can then delete or move the unit as a whole, e.g. drop one
        operation of a graph; for the others it is just ``fn()``."""
        return fn()

    def force(self, *values: int) -> None:
        """Make the next draws return ``values`` (each reduced modulo its range) instead
        of drawing; they are recorded like any draw, so a replay needs nothing special.
        Seed sweeps use it to spread the first operation evenly over the seeds."""
        self._forced.extend(int(v) for v in values)

    # --- derived choices ------------------------------------------------------------
    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (``lo`` is the simplest); ``hi < lo`` gives ``lo``."""
        if hi <= lo:
            return lo
        return lo + self.draw(hi - lo + 1)

    def small(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` biased towards ``lo``: a bit length first, then a
        value of that length (log-uniform), so large ranges still give small values
        often. Used for dimensions."""
        if hi <= lo:
            return lo
        span = hi - lo
        bits = self.draw(span.bit_length() + 1)  # 0 -> lo itself
        if bits == 0:
            return lo
        base = 1 << (bits - 1)
        top = min(span, (1 << bits) - 1)
        return lo + base + self.draw(top - base + 1)

    def boolean(self, p: float = 0.5) -> bool:
        """True with probability ``p`` (False is the simplest)."""
        if p <= 0.0:
            return False
        if p >= 1.0:
            return True
        k = max(1, min(PROBABILITY_RESOLUTION - 1, round(p * PROBABILITY_RESOLUTION)))
        return self.draw(PROBABILITY_RESOLUTION) >= PROBABILITY_RESOLUTION - k

    def choice(self, seq: Sequence[T]) -> T:
        """One item (the first is the simplest)."""
        if not seq:
            raise ValueError("choice from an empty sequence")
        return seq[self.draw(len(seq))]

    def weighted(self, seq: Sequence[T], weights: Sequence[int]) -> T:
        """One item with integer weights (the first item is the simplest)."""
        total = sum(weights)
        if not seq or total <= 0:
            raise ValueError("weighted choice needs items with positive total weight")
        v = self.draw(total)
        for item, w in zip(seq, weights):
            if v < w:
                return item
            v -= w
        return seq[-1]  # pragma: no cover - unreachable

    def real(self, lo: float, hi: float) -> float:
        """A float in ``[lo, hi)`` (``lo`` is the simplest)."""
        if not hi > lo:
            return lo
        return lo + (hi - lo) * (self.draw(REAL_RESOLUTION) / REAL_RESOLUTION)

    def shuffle(self, items: MutableSequence[Any]) -> None:
        """Fisher-Yates in place (all-zero draws keep the order)."""
        for i in range(len(items) - 1):
            j = i + self.draw(len(items) - i)
            items[i], items[j] = items[j], items[i]

    def subset(self, seq: Sequence[T], p: float = 0.5) -> list[T]:
        """Each item kept with probability ``p`` (the empty list is the simplest)."""
        return [x for x in seq if self.boolean(p)]

    def word(self) -> int:
        """A 64-bit integer (seeds bulk values; 0 is the simplest)."""
        return self.draw(1 << 64)

    @property
    def choices(self) -> tuple[int, ...]:
        """The integers drawn so far, in order (what :class:`ReplaySource` replays)."""
        return tuple(self.record)


class PrngSource(ChoiceSource):
    """Seeded xoshiro256** (reference algorithm, Python integers masked to 64 bits).

    Ranges are unbiased: a power of two takes the low bits, any other ``n`` rejects
    words at or above the largest multiple of ``n`` below 2^64."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = int(seed)
        st = self.seed & MASK64
        s = []
        for _ in range(4):
            st, out = splitmix64(st)
            s.append(out)
        if not any(s):  # pragma: no cover - splitmix64 never gives four zeros
            s[0] = 1
        self._s = tuple(s)

    def next64(self) -> int:
        """The next output word (xoshiro256**: rotl(s1 * 5, 7) * 9, then the state
        update; rotations written out for speed)."""
        s0, s1, s2, s3 = self._s
        x = (s1 * 5) & MASK64
        result = ((((x << 7) | (x >> 57)) & MASK64) * 9) & MASK64
        t = (s1 << 17) & MASK64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & MASK64
        self._s = (s0, s1, s2, s3)
        return result

    def _draw(self, n: int) -> int:
        x = self.next64()
        if n & (n - 1) == 0:
            return x & (n - 1)
        limit = _LIMIT_CACHE.get(n)
        if limit is None:
            limit = _LIMIT_CACHE[n] = (1 << 64) - ((1 << 64) % n)
        while x >= limit:
            x = self.next64()
        return x % n


_LIMIT_CACHE: dict[int, int] = {}


class ReplaySource(ChoiceSource):
    """Replays recorded integers. A recorded value too large for the range asked is
    reduced modulo the range; past the end every draw is 0 (the simplest)."""

    def __init__(self, choices: Sequence[int]) -> None:
        super().__init__()
        self._choices = [int(c) for c in choices]
        self._pos = 0

    def _draw(self, n: int) -> int:
        if self._pos >= len(self._choices):
            return 0
        v = self._choices[self._pos]
        self._pos += 1
        return v if 0 <= v < n else abs(v) % n

    @property
    def exhausted(self) -> bool:
        return self._pos >= len(self._choices)


class ByteSource(ChoiceSource):
    """Draws from a byte string (coverage-guided fuzzing: atheris's input).

    Each draw takes as many bytes as ``n - 1`` needs (big-endian) and reduces them
    modulo ``n``; missing bytes read as 0, so an exhausted input gives the simplest
    choices and never fails."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = bytes(data)
        self._pos = 0

    def _draw(self, n: int) -> int:
        width = ((n - 1).bit_length() + 7) // 8
        chunk = self._data[self._pos : self._pos + width]
        self._pos += width
        if not chunk:
            return 0
        v = int.from_bytes(chunk.ljust(width, b"\0"), "big")
        return v % n

    @property
    def remaining(self) -> int:
        return max(0, len(self._data) - self._pos)


class HypothesisSource(ChoiceSource):
    """Draws through Hypothesis (``data`` is what ``st.data()`` gives, or a
    ``ConjectureData``): each draw is ``integers(0, n - 1)``, which shrinks to 0."""

    def __init__(self, data: Any) -> None:
        super().__init__()
        self._data = data
        self._strategies: dict[int, Any] = {}

    def _draw(self, n: int) -> int:
        from hypothesis import strategies as st

        strategy = self._strategies.get(n)
        if strategy is None:
            strategy = self._strategies[n] = st.integers(0, n - 1)
        return int(self._data.draw(strategy))

    def span(self, fn: Callable[[], T]) -> T:
        from hypothesis import strategies as st

        def run():
            # An exception must not cross Hypothesis's draw (it would leave the span
            # open): carry it out as a value and raise it afterwards.
            try:
                return True, fn()
            except Exception as e:
                return False, e

        ok, value = self._data.draw(st.builds(run))
        if not ok:
            raise value
        return value


# ---------------------------------------------------------------------------------------
# Bulk values
# ---------------------------------------------------------------------------------------

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def bulk_words(seed: int, n: int) -> np.ndarray:
    """``n`` pseudo-random uint64 words: splitmix64 of ``seed + k * golden`` for
    k = 1..n, vectorized. Array arithmetic in ``uint64`` wraps modulo 2^64 in every numpy
    version, so the words are the same everywhere."""
    k = np.arange(1, n + 1, dtype=np.uint64)
    z = k * _GOLDEN + np.uint64(seed & MASK64)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def bulk_unit(seed: int, n: int) -> np.ndarray:
    """``n`` float64 values in [0, 1): the top 53 bits of each word, scaled exactly."""
    return (bulk_words(seed, n) >> np.uint64(11)).astype(np.float64) * (1.0 / REAL_RESOLUTION)


def bulk_integers(seed: int, n: int, lo: int, hi: int) -> np.ndarray:
    """``n`` int64 values in [lo, hi] (word modulo the range: a bias below 2^-40 for the
    small ranges used here)."""
    span = np.uint64(hi - lo + 1)
    return (bulk_words(seed, n) % span).astype(np.int64) + np.int64(lo)


__all__ = [
    "ByteSource",
    "ChoiceSource",
    "HypothesisSource",
    "PrngSource",
    "ReplaySource",
    "bulk_integers",
    "bulk_unit",
    "bulk_words",
    "splitmix64",
]
