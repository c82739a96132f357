"""``tools/make_corpus.py`` writes the seeds the fuzz tests replay: regenerating the
request, cache and memory corpora gives the committed ``seed-*`` files, byte for byte,
and each seed is what its name says. (The ``execute`` and ``model`` seeds come from the
generator and the operation examples, which change with the code: regenerate those
after such a change, ``python3 tools/make_corpus.py execute model``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.fixtures import FIXTURES
from fuzz.targets.request import PATHS
from tests import load_tool

ROOT = Path(__file__).resolve().parents[1]
make_corpus = load_tool("make_corpus")


def committed_seeds(target: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (ROOT / "corpus" / target).glob("seed-*")}


@pytest.mark.parametrize("target", ["request", "cache", "memory"])
def test_regenerated_seeds_are_the_committed_ones(tmp_path, target):
    written = make_corpus.write_seeds(target, make_corpus.GENERATORS[target]([]), tmp_path)
    regenerated = {p.name: p.read_bytes() for p in (tmp_path / target).iterdir()}
    assert written == len(regenerated) >= 10
    assert regenerated == committed_seeds(target)


def test_a_request_seed_selects_the_fixture_and_path_its_name_says():
    # selector: bits 0-3 the fixture, 4-5 the execution path, 6 measure timing.
    seeds = dict(make_corpus.request_seeds())
    for f, (fixture, _) in enumerate(FIXTURES):
        for p, path in enumerate(PATHS):
            assert seeds[f"{fixture}-{path}"][0] == f | p << 4
        assert seeds[f"{fixture}-sync-measure"][0] == f | 1 << 6


def test_regenerating_replaces_the_old_seeds_and_keeps_merged_inputs(tmp_path):
    directory = tmp_path / "memory"
    directory.mkdir()
    (directory / "seed-gone").write_bytes(b"an old seed")
    (directory / "0123abcd").write_bytes(b"an input a campaign merged")
    seeds = [("a", b"x"), ("b", b"y"), ("copy-of-a", b"x")]
    assert make_corpus.write_seeds("memory", iter(seeds), tmp_path) == 2  # no duplicates
    assert sorted(p.name for p in directory.iterdir()) == ["0123abcd", "seed-a", "seed-b"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recorded_bytes_replay_the_same_draws_through_a_byte_source(seed):
    # The widths a ByteSource reads: the bytes of n - 1, so one byte up to n = 256 (its
    # largest value, 255, fits one), two up to 65536, eight for a 64-bit word.
    from randomgraph.choices import ByteSource, PrngSource

    ranges = (2, 255, 256, 257, 1024, 65536, 65537, 1 << 53, 1 << 64)

    def draws(source) -> list[int]:
        return [source.draw(n) for n in ranges]

    data = make_corpus.recorded_bytes(draws, seed)
    assert len(data) == 1 + 1 + 1 + 2 + 2 + 2 + 3 + 7 + 8
    replayed = ByteSource(data)
    assert draws(replayed) == draws(PrngSource(seed))
    assert replayed.remaining == 0
