"""``nnfuzz random`` and its campaign directory under misuse: two campaigns in one --out,
too many workers, a year-long timeout, a file that is not a journal, ranks the generator
does not make; and a long campaign's memory, which must not grow with its tests."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from driver.isolated import MAX_TIMEOUT
from fuzz.cli import main as nnfuzz
from fuzz.commands.arguments import duration
from randomgraph import campaign
from randomgraph.campaign import (
    JOURNAL,
    CampaignSettings,
    CampaignState,
    FinishedTests,
    Journal,
    Runs,
    Timeline,
    max_jobs,
    outcome_table,
    preset_groups,
    run_campaign,
)
from randomgraph.generator import GenerationError, generate
from randomgraph.generator.core import PRIMARY_RANKS, GeneratorConfig

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "corpus" / "specs" / "V1_0" / "mul_broadcast.mod.py"
QUICK = ["random", "--ops", "1", "--op", "ADD", "--jobs", "0", "--no-minimize"]


def exit_status(argv: list[str]) -> int:
    try:
        return nnfuzz(argv)
    except SystemExit as e:  # argparse usage errors
        return e.code


def journal_tests(out: Path) -> list[dict]:
    return [r for r in Journal(out / JOURNAL).load() if r.get("kind") == "test"]


# ---------------------------------------------------------------------------------------
# Bad option values: exit 2 and a line naming the option
# ---------------------------------------------------------------------------------------

YEAR = f"must be at most {MAX_TIMEOUT:.0f} (a year), got 1e300"
USAGE_ERRORS = [
    # A timeout the isolated driver refuses made every test a false crash (random,
    # replay) or an OverflowError traceback (minimize).
    (["random", "--timeout", "1e300"], f"argument --timeout: {YEAR}"),
    (["replay", str(SPEC), "--timeout", "1e300"], f"argument --timeout: {YEAR}"),
    (["minimize", str(SPEC), "--timeout", "1e300"], f"argument --timeout: {YEAR}"),
    (["specs", "run", str(SPEC), "--timeout", "1e300"], f"argument --timeout: {YEAR}"),
    (["random", "--minimize-seconds", "1e300"], f"argument --minimize-seconds: {YEAR}"),
    (["minimize", str(SPEC), "--seconds", "1e300"], f"argument --seconds: {YEAR}"),
    (
        ["random", "--minutes", "1e300"],
        f"argument --minutes: must be at most {MAX_TIMEOUT / 60:.0f} (a year), got 1e300",
    ),
    # A duration is finite and > 0: --minutes 0 stopped before the first test.
    (["random", "--minutes", "0"], "argument --minutes: must be a finite number > 0, got 0"),
    (["random", "--timeout", "-1"], "argument --timeout: must be a finite number > 0, got -1"),
    (["random", "--timeout", "nan"], "argument --timeout: must be a finite number > 0, got nan"),
    (["minimize", str(SPEC), "--seconds", "inf"], "argument --seconds: must be a finite number"),
    # --jobs 1000 started ~450 worker processes (+5.4 GB).
    (["random", "--jobs", "1000"], f"argument --jobs: must be <= {max_jobs()}, got 1000"),
    (["random", "--jobs", str(max_jobs() + 1)], f"argument --jobs: must be <= {max_jobs()}"),
    # Ranks the generator does not make: random ran "1 passed, 115 skipped" and exited 0,
    # generate exited 1.
    *[
        ([command, "--rank", text], f"argument --rank: rank {bad} is not one the generator makes")
        for command in ("random", "generate")
        for text, bad in (("-1", -1), ("0", 0), ("6", 6), ("9", 9))
    ],
    (["random", "--rank", "2,9"], "argument --rank: rank 9 is not one the generator makes (1..5)"),
    (["random", "--rank", "2", "--rank", "0"], "argument --rank: rank 0 is not one"),
    (["generate", "--rank", "x"], "argument --rank: not an integer: 'x'"),
    # Sizes generate bounds bound random too (an endless run or a huge allocation).
    (["random", "--ops", "201"], "argument --ops: must be <= 200, got 201"),
    (["random", "--dims", "100001"], "argument --dims: must be <= 100000, got 100001"),
    (["random", "--out", ""], "argument --out: an empty path names no directory"),
    (["random", "--ops", "1", "--preset", "single"], "--ops makes a custom campaign"),
    # libFuzzer: --jobs forks that many fuzzers; --max-len sizes its buffers (a huge one
    # ran out of memory at once and reported it as a finding).
    (["fuzz", "model", "--jobs", "1000"], f"argument --jobs: must be <= {max_jobs()}, got 1000"),
    (["fuzz", "model", "--max-len", "2000000"], "argument --max-len: must be <= 1048576"),
    (["fuzz", "model", "--timeout", "1" + "0" * 12], "argument --timeout: must be <= 31536000"),
]


@pytest.mark.parametrize(
    ("argv", "message"), USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS]
)
def test_bad_option_value_is_a_usage_error(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    # Should a random command be accepted, it runs one test, not a whole campaign.
    bounded = [*argv, "--max-tests", "1"] if argv[0] == "random" else argv
    assert exit_status(bounded) == 2
    err = capsys.readouterr().err
    assert message in err.splitlines()[-1]
    assert not list(tmp_path.iterdir()), "a rejected command left files behind"


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (duration(), str(MAX_TIMEOUT), MAX_TIMEOUT),  # a year is still allowed
        (duration(unit_seconds=60), str(MAX_TIMEOUT / 60), MAX_TIMEOUT / 60),
        (duration(zero_allowed=True), "0", 0.0),
    ],
)
def test_duration_accepts_up_to_a_year(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize(
    ("option", "text", "value"),
    [
        (["fuzz", "model", "--seed"], "4294967295", 4294967295),  # libFuzzer's largest
        (["fuzz", "model", "--jobs"], str(max_jobs()), max_jobs()),
        (["random", "--ops"], "200", 200),
        (["generate", "--seed"], "0", 0),
    ],
)
def test_an_integer_option_takes_its_bounds(option, text, value):
    from fuzz.cli import build_parser

    args = build_parser().parse_args([*option, text])
    assert getattr(args, option[-1].lstrip("-")) == value


def test_every_valid_rank_is_generated_and_accepted(capsys):
    # The ranks --rank accepts are exactly those some graph's primary input has.
    for rank in PRIMARY_RANKS:
        config = GeneratorConfig(num_ops=1, ranks=frozenset({rank}))
        made = set()
        for seed in range(40):
            with contextlib.suppress(GenerationError):  # a seed with no rank-5 operation
                made |= {r.rank for r in generate(seed, config).operations}
        assert rank in made, rank
        assert exit_status(["generate", "--rank", str(rank), "-q"]) == 0
    capsys.readouterr()


def test_workers_are_no_more_than_the_tasks(tmp_path, monkeypatch):
    started = []
    real = campaign._Proc.__init__

    def counting(self, *args, **kw):
        started.append(1)
        real(self, *args, **kw)

    monkeypatch.setattr(campaign._Proc, "__init__", counting)
    groups = preset_groups("custom", campaign.Filters(operations=("ADD",)), num_ops=1)
    s = CampaignSettings(
        groups=groups, out=tmp_path, seeds=range(2), jobs=max_jobs(), minimize=False
    )
    run_campaign(s, report=False)
    assert len(started) == 2
    assert len(journal_tests(tmp_path)) == 2


# ---------------------------------------------------------------------------------------
# One campaign per directory
# ---------------------------------------------------------------------------------------


def test_a_second_campaign_in_the_same_out_is_refused(tmp_path, capsys):
    out = tmp_path / "c"
    argv = [*QUICK, "--seeds", "0:3", "--out", str(out)]
    refused = []

    def on_event(kind, info):
        if kind == "test" and not refused:
            lines = (out / JOURNAL).read_bytes()
            refused.append(exit_status([*QUICK, "--seeds", "3:6", "--out", str(out)]))
            refused.append(capsys.readouterr().err.splitlines()[-1])
            assert (out / JOURNAL).read_bytes() == lines  # the refused run wrote nothing

    groups = preset_groups("custom", campaign.Filters(operations=("ADD",)), num_ops=1)
    s = CampaignSettings(groups=groups, out=out, seeds=range(3), minimize=False)
    run_campaign(s, on_event=on_event, report=False)
    assert refused == [
        2,
        f"nnfuzz: {out} is in use by another campaign (pid {os.getpid()}): wait for it "
        "to end, or use another --out",
    ]
    # Once the first has ended, the directory is free again.
    assert exit_status(argv) == 0
    assert len(journal_tests(out)) == 3


def test_a_campaign_killed_with_sigkill_leaves_no_lock(tmp_path, capsys):
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "fuzz", *QUICK, "--seeds", "0:100000", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(journal_tests(out)) < 2:
            time.sleep(0.05)
        assert exit_status([*QUICK, "--seeds", "0:2", "--out", str(out)]) == 2
        assert f"(pid {proc.pid})" in capsys.readouterr().err
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert exit_status([*QUICK, "--seeds", "0:2", "--out", str(out)]) == 0


# ---------------------------------------------------------------------------------------
# A file that is not a journal
# ---------------------------------------------------------------------------------------

GOOD = b'{"kind":"start","identity":null}\n'
NOT_JOURNALS = [
    # (journal bytes, what the message says after "(line ")
    (bytes(range(255, -1, -1)) * 4, "1: not UTF-8 text)"),  # random bytes
    (GOOD + b"\x80\xff\n" + GOOD, "2: not UTF-8 text)"),
    (GOOD + b"hello\n" + GOOD, "2: not JSON: Expecting value at column 1)"),
    (b"[1, 2]\n", "1: a JSON value that is not a journal record)"),
    (b'{"id": "x"}\n', "1: a JSON value that is not a journal record)"),
    (b'{"kind":"test","id":"custom/1op#0"}\n', "1: a bad 'test' record: KeyError"),
    (b'{"kind":"test","group":"g","seed":0,"outcome":"odd"}\n', "1: a bad 'test' record"),
    (b'{"kind":"failure","id":"F001"}\n', "1: a bad 'failure' record: TypeError"),
    # No newline anywhere, and not the start of a record: not a torn last line, so it is
    # not truncated away (that emptied a file nnfuzz had not written).
    (b"\x00" * 5000, "1: not a journal record, and no newline)"),
    (GOOD + b"PK\x03\x04 zip", "2: not a journal record, and no newline)"),
]


@pytest.mark.parametrize(("data", "message"), NOT_JOURNALS, ids=range(len(NOT_JOURNALS)))
def test_a_file_that_is_not_a_journal_is_a_usage_error(tmp_path, capsys, data, message):
    out = tmp_path / "c"
    out.mkdir()
    (out / JOURNAL).write_bytes(data)
    assert exit_status([*QUICK, "--seeds", "0:1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(
        f"nnfuzz: {out / JOURNAL} is not a campaign journal (line {message}"
    ), err
    assert (out / JOURNAL).read_bytes() == data  # untouched
    assert not (out / "report.html").exists()


@pytest.mark.parametrize("torn", [b"{", b'{"ki', b'{"kind":"test","id":"custom/1op#9","outc'])
def test_a_torn_last_line_is_still_dropped(tmp_path, torn):
    journal = tmp_path / JOURNAL
    journal.write_bytes(GOOD + torn)
    assert Journal(journal).load() == [{"kind": "start", "identity": None}]
    assert journal.read_bytes() == GOOD


# ---------------------------------------------------------------------------------------
# Memory: bounded however many tests a campaign runs
# ---------------------------------------------------------------------------------------


def _test_record(groups: list[str], n: int, outcome: str = "pass") -> dict:
    seed, g = divmod(n, len(groups))
    return {
        "kind": "test",
        "id": f"{groups[g]}#{seed}",
        "group": groups[g],
        "seed": seed,
        "outcome": outcome,
        "seconds": 0.01,
        "elapsed": n * 0.01,
        "ops": [["ADD", "TENSOR_FLOAT32"], ["MUL", "TENSOR_QUANT8_ASYMM"]],
        "n_ops": 2,
        "cov": [["ADD", "TENSOR_FLOAT32", 2, "V1_0"], ["MUL", "TENSOR_QUANT8_ASYMM", 4, "V1_2"]],
    }


def _state_after(tests: int, shards: int = 1) -> CampaignState:
    groups = [f"g{k}" for k in range(7)]
    identity = {"groups": [{"name": g} for g in groups], "shard": [0, shards]}
    state = CampaignState.from_records([{"kind": "start", "identity": identity}])
    # Out of order, as several workers finish them.
    order = [n + (1 if n % 2 == 0 else -1) for n in range(tests)]
    for n in order:
        state.apply(_test_record(groups, n * shards, "pass" if n % 5 else "wrong-result"))
    return state


def _traced_size(build):
    """Bytes that what ``build()`` returns holds on to."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()  # garbage of the build (cycles) is not what it keeps
        return kept, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_campaign_state_does_not_grow_with_the_tests():
    # It kept every test's journal line (~3 KB each in a real campaign, ~8 MB a minute).
    _, size = _traced_size(lambda: _state_after(10_000))
    large, large_size = _traced_size(lambda: _state_after(40_000))
    # The old state grew ~26 MB here; caches elsewhere in the process may move a few KB.
    assert large_size - size < 200_000, f"{large_size - size} bytes for 30000 more tests"
    # ... and still knows what the report shows.
    assert large.tests_run == 40_000 and large.outcome_counts()["wrong-result"] == 8_000
    assert large.failed
    header, rows = outcome_table(large)
    assert rows[0][:3] == ["ADD", "TENSOR_FLOAT32", "40000"] and "8000" in rows[0]
    assert large.coverage().graphs == 40_000
    assert sum(large.coverage().counts.values()) == 80_000
    assert large.timeline.counts == large.counts
    assert max(len(p) for p in large.timeline.series.values()) <= Timeline.MAX_POINTS


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_finished_tests_are_kept_as_a_few_runs(shards):
    state = _state_after(5_000, shards)
    assert state.finished.runs <= 2
    groups = [f"g{k}" for k in range(7)]
    for n in range(0, 5_000 * shards, shards):
        seed, g = divmod(n, 7)
        assert (groups[g], seed) in state.finished
    assert ("g0", 10**9) not in state.finished
    # A test recorded twice (two runs in one directory, before the lock) counts once.
    state.apply(_test_record(groups, 0))
    assert state.tests_run == 5_000


def test_runs_are_a_set():
    runs = Runs()
    values = [5, 3, 4, 9, 1, 2, 7, 8, 6, 0, 4]
    assert [runs.add(v) for v in values] == [True] * 10 + [False]
    assert len(runs) == 10 and runs.runs == 1
    assert all(v in runs for v in range(10)) and -1 not in runs and 10 not in runs


def test_finished_tests_of_unknown_groups():
    finished = FinishedTests()
    assert finished.add("a", 3) and finished.add("b", 3) and not finished.add("a", 3)
    assert ("a", 3) in finished and ("a", 4) not in finished and len(finished) == 2


def test_the_report_of_a_resumed_campaign_matches_its_journal(tmp_path):
    groups = preset_groups("custom", campaign.Filters(operations=("SUB",)), num_ops=1)
    s = dict(groups=groups, out=tmp_path, driver="planted-activation", minimize=False)
    run_campaign(CampaignSettings(seeds=range(10), max_tests=4, **s), report=False)
    summary = run_campaign(CampaignSettings(seeds=range(10), **s))
    tests = journal_tests(tmp_path)
    assert len(tests) == 10 and summary.state.tests_run == 10
    wrong = sum(r["outcome"] == "wrong-result" for r in tests)
    assert wrong and summary.state.outcome_counts()["wrong-result"] == wrong
    md = summary.markdown.read_text()
    assert f"10 tests, {wrong} failed" in md and f"| wrong result | {wrong} |" in md
    assert f"wrong result ({wrong})" in summary.report.read_text()  # the timeline legend
    # Rebuilt from the journal alone, the report says the same.
    from randomgraph.report import write_reports

    def undated(path: Path) -> str:
        return re.sub(r"written [0-9-]+ [0-9:]+", "", path.read_text())

    html = undated(summary.report)
    write_reports(tmp_path)
    assert undated(summary.report) == html


# ---------------------------------------------------------------------------------------
# What the journal's state says: copies, bugs, outcomes, the timeline
# ---------------------------------------------------------------------------------------

MINIMIZED = ["wrong-result", "ADD+MUL", "TENSOR_FLOAT32", "ADD"]


def _failure_state() -> CampaignState:
    """F001 minimized to an ADD and a MUL in float32; F002 minimized to the same bug."""
    state = CampaignState()
    for fid in ("F001", "F002"):
        pre_key = ["wrong-result", f"ADD+MUL+SUB{fid}", "TENSOR_FLOAT32", "ADD"]
        state.apply(
            {
                "kind": "failure",
                **dict(id=fid, test=f"g#{fid}", name=fid, group="g", outcome="wrong-result"),
                **dict(signature="S", detail="", pre_key=pre_key, spec=f"failures/{fid}.mod.py"),
            }
        )
    state.apply({"kind": "minimized", "id": "F001", "status": "minimized", "key": MINIMIZED})
    state.apply({"kind": "minimized", "id": "F002", "key": MINIMIZED, "duplicate_of": "F001"})
    return state


COPIES = [
    # (key, outcome, signature, operations of the new failing test, the known failure)
    (MINIMIZED, "wrong-result", "S", {"ADD", "MUL"}, "F001"),
    # The same key is the same bug, whatever the failing test's signature.
    (MINIMIZED, "wrong-result", "T", {"ADD", "MUL"}, "F001"),
    (
        ["wrong-result", "ADD+MUL+SUBF002", "TENSOR_FLOAT32", "ADD"],
        "wrong-result",
        "S",
        {"ADD"},
        "F001",
    ),
    # Another key: a copy only if it holds the whole minimized graph, failing the same way.
    (
        ["wrong-result", "ADD+MUL+SUB", "TENSOR_FLOAT32", "ADD"],
        "wrong-result",
        "S",
        {"ADD", "MUL", "SUB"},
        "F001",
    ),
    (
        ["wrong-result", "ADD+SUB", "TENSOR_FLOAT32", "ADD"],
        "wrong-result",
        "S",
        {"ADD", "SUB"},
        None,
    ),
    (["wrong-result", "ADD", "TENSOR_FLOAT32", "ADD"], "wrong-result", "S", {"ADD"}, None),
    (
        ["wrong-result", "ADD+MUL+SUB", "TENSOR_FLOAT16", "ADD"],
        "wrong-result",
        "S",
        {"ADD", "MUL", "SUB"},
        None,
    ),
    (
        ["wrong-result", "ADD+MUL+SUB", "TENSOR_FLOAT32", "ADD"],
        "wrong-result",
        "T",
        {"ADD", "MUL", "SUB"},
        None,
    ),
    (["crash", "ADD+MUL+SUB", "TENSOR_FLOAT32", "-"], "crash", "S", {"ADD", "MUL", "SUB"}, None),
]


@pytest.mark.parametrize(("key", "outcome", "signature", "ops", "known"), COPIES)
def test_a_failing_test_is_a_copy_of_the_bug_it_contains(key, outcome, signature, ops, known):
    found = _failure_state().copy_of(key, outcome, signature, ops)
    assert (found.id if found else None) == known


def test_a_resume_minimizes_only_the_failures_waiting_for_it():
    # Not a flaky one again, nor one whose minimization killed its worker twice (error),
    # nor the crash of a lost worker (not-minimized: candidates would kill workers too).
    state = CampaignState()
    statuses = ["found", "minimized", "flaky", "error", "not-minimized", "found"]
    for n, status in enumerate(statuses, 1):
        state.apply(
            {
                "kind": "failure",
                **dict(id=f"F{n:03d}", test=f"g#{n}", name=f"g_{n}", group="g"),
                **dict(outcome="crash", signature="", detail="", pre_key=["crash", "", "-", "-"]),
                **dict(spec=f"failures/g_{n}.mod.py", status=status),
            }
        )
    assert [f.id for f in state.pending_minimization()] == ["F001", "F006"]


def test_a_bug_counts_the_copies_of_every_failure_that_is_the_same_bug():
    state = _failure_state()
    groups = ["g"]
    for n, copy_of in enumerate(["F001", "F002", "F002", "F002"]):
        state.apply({**_test_record(groups, n, "wrong-result"), "copy_of": copy_of})
    (bug,) = state.bugs()
    assert (bug.id, bug.copies) == ("F001", 1 + 1 + 1 + 3)


def test_a_campaign_of_skipped_tests_has_not_failed_and_they_get_no_coverage_cell():
    from randomgraph.report import svg_coverage

    state = CampaignState()
    groups = ["g"]
    skipped = {**_test_record(groups, 0, "skipped"), "ops": [], "cov": []}
    state.apply(skipped)
    assert not state.failed and state.outcome_counts() == {"skipped": 1}
    assert svg_coverage(state) == "<p>No tests yet.</p>"  # no "(none)" row
    state.apply({**_test_record(groups, 1, "pass"), "ops": [["ADD", "TENSOR_FLOAT32"]]})
    state.apply({**_test_record(groups, 2, "crash"), "ops": [["MUL", "TENSOR_FLOAT32"]]})
    assert state.failed
    svg = svg_coverage(state)
    assert "(none)" not in svg
    cells = {
        title: fill for fill, title in re.findall(r"fill='(#[0-9a-f]{6})'><title>([^<]*)<", svg)
    }
    assert cells["MUL / TENSOR_FLOAT32: 1 tests, 1 failed"] == "#e53935"  # red: it failed
    assert cells["ADD / TENSOR_FLOAT32: 1 tests"] != "#e53935"


def test_the_timeline_never_goes_back_and_keeps_each_outcomes_count():
    timeline = Timeline()
    for elapsed in (5.0, 3.0):  # journal order is time order, whatever the clock says
        timeline.add("pass", elapsed)
    assert timeline.series["pass"] == [(0.0, 0), (5.0, 1), (5.0, 2)]
    # Thinned past MAX_POINTS, a series still ends at the outcome's count (the legend's).
    last_points = []
    for k in range(3 * Timeline.MAX_POINTS):
        timeline.add("pass", 6.0 + k)
        last_points.append(timeline.series["pass"][-1])
    assert last_points == [(6.0 + k, 3 + k) for k in range(3 * Timeline.MAX_POINTS)]
    assert len(timeline.series["pass"]) <= Timeline.MAX_POINTS


def test_the_summary_counts_distinct_bugs_and_replays_the_minimized_spec():
    from randomgraph.report import render_markdown

    state = _failure_state()
    state.apply({**_test_record(["g"], 0, "wrong-result"), "copy_of": "F001"})
    state.apply(_test_record(["g"], 1, "pass"))
    state.failures["F001"].minimized = "failures/F001_min.mod.py"
    md = render_markdown(state, "planted-x", out="c")
    assert "2 tests, 1 failed, 1 distinct failures" in md
    assert "- replay: `nnfuzz replay c/failures/F001_min.mod.py --driver planted-x`" in md


REPLAYS = [
    # (outcome, driver, the replay command of failures/x.mod.py)
    ("wrong-result", "planted-x", "nnfuzz replay failures/x.mod.py --driver planted-x"),
    ("crash", "planted-x", "nnfuzz replay failures/x.mod.py --driver planted-x@isolated:timeout=5"),
    (
        "hang",
        "d@isolated:timeout=2",
        "nnfuzz replay failures/x.mod.py --driver d@isolated:timeout=2",
    ),
    (
        "inconsistent",
        "planted-x",
        "nnfuzz minimize failures/x.mod.py --driver planted-x --check --metamorphic",
    ),
    ("reference-error", "planted-x", "nnfuzz replay failures/x.mod.py --driver reference"),
]


@pytest.mark.parametrize(("outcome", "driver", "command"), REPLAYS)
def test_each_outcome_replays_with_its_own_command(outcome, driver, command):
    assert campaign.replay_command("failures/x.mod.py", driver, outcome, 5.0) == command


def test_the_regenerate_command_names_the_group_and_exactly_its_seed():
    group = campaign.Group(
        "single/ADD", 1, 1000, ("ADD",), ("TENSOR_FLOAT32",), (2,), ("V1_2",), "strict"
    )
    assert campaign.regenerate_command(group, 7) == (
        "nnfuzz random --ops 1 --dims 1000 --op ADD --type TENSOR_FLOAT32 --rank 2 "
        "--version V1_2 --criteria strict --seeds 7:8"
    )


def test_a_test_records_its_distinct_pairs_and_an_impossible_one_is_skipped(tmp_path):
    worker = campaign.CampaignWorker(CampaignSettings(groups=[], out=tmp_path, golden="float32"))
    adds = campaign.Group("adds", 4, 10, ("ADD",), ("TENSOR_FLOAT32",))
    record = next(r for r in (worker.run_test(adds, seed) for seed in range(5)) if r.n_ops >= 2)
    assert record.outcome == "pass" and record.ops == [["ADD", "TENSOR_FLOAT32"]]
    assert worker.checker.options.golden == "float32"  # the campaign's golden mode
    # The rounding preset's groups hold their operations to the exact reference.
    (rounding,) = preset_groups(
        "rounding",
        campaign.Filters(operations=("ADD",), data_types=("TENSOR_QUANT8_ASYMM",)),
    )
    assert worker.run_test(rounding, 0).outcome == "pass"
    assert worker.checker.options.golden == "exact"
    # CONV_2D has no rank-1 input: the generator cannot make it, no driver is at fault.
    impossible = campaign.Group("conv", 1, 10, ("CONV_2D",), None, (1,))
    record = worker.run_test(impossible, 0)
    assert record.outcome == "skipped" and record.detail.startswith("generator: ")


def test_minutes_stop_the_tests(tmp_path):
    groups = preset_groups("custom", campaign.Filters(operations=("ADD",)), num_ops=1)
    s = CampaignSettings(groups=groups, out=tmp_path, seeds=range(3), minutes=1e-9)
    assert run_campaign(s, report=False).ran == 0


# ---------------------------------------------------------------------------------------
# What the options make of the campaign, and its exit status
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        ([], "seeds", range(50)),  # Android's count
        (["--minutes", "1"], "seeds", None),  # until the time is up
        (["--seeds", "7:9"], "seeds", range(7, 9)),
        ([], "driver", "reference"),
        (["--partition"], "driver", "partitioned:reference"),
        ([], "out", "nnfuzz-random-reference"),
        (["--driver", "reference-1.2"], "out", "nnfuzz-random-reference-1.2"),
    ],
)
def test_the_options_reach_the_campaign(tmp_path, monkeypatch, capsys, extra, field, value):
    monkeypatch.chdir(tmp_path)
    settings = []

    def stop(s, **kwargs):
        settings.append(s)
        raise campaign.CampaignError("stopped by the test")

    monkeypatch.setattr(campaign, "run_campaign", stop)
    assert exit_status(["random", *extra]) == 2
    assert getattr(settings[0], field) == value


@pytest.mark.parametrize(
    ("outcome", "interrupted", "status"),
    [
        ("pass", False, 0),
        ("wrong-result", False, 1),
        ("pass", True, 130),
        # Exit status 1 iff some test failed: an interruption does not hide a failure.
        ("wrong-result", True, 1),
    ],
)
def test_the_exit_status_says_whether_a_test_failed(
    tmp_path, monkeypatch, capsys, outcome, interrupted, status
):
    monkeypatch.chdir(tmp_path)

    def run(s, **kwargs):
        state = CampaignState()
        state.counts[outcome] = 1
        return campaign.CampaignSummary(Path(s.out), state, 1, interrupted=interrupted)

    monkeypatch.setattr(campaign, "run_campaign", run)
    assert exit_status([*QUICK, "-q"]) == status
    resume = "interrupted: rerun with --out nnfuzz-random-reference to resume"
    assert (capsys.readouterr().err.splitlines()[-1:] == [resume]) == interrupted


def test_the_report_says_of_each_failure_only_what_is_known():
    """A crash (no first diverging operation) that was not minimized, and a second crash
    minimized into a copy of it: one distinct failure of two failing tests of three."""
    from randomgraph.report import render_html, render_markdown

    state = CampaignState()
    crash_key = ["crash", "ADD", "TENSOR_FLOAT32", "-"]
    for fid, n in (("F001", 0), ("F002", 1)):
        state.apply(
            {
                "kind": "failure",
                **dict(id=fid, test=f"g#{n}", name=fid, group="g", outcome="crash", n_ops=3),
                **dict(signature="IndexError", detail="boom", pre_key=crash_key),
                "spec": f"failures/{fid}.mod.py",
            }
        )
        state.apply({**_test_record(["g"], n, "crash"), "failure": fid})
    state.apply(
        {"kind": "minimized", "id": "F002", "status": "minimized", "key": crash_key}
        | {"spec": "failures/F002_min.mod.py", "n_ops": 1, "duplicate_of": "F001"}
    )
    state.apply(_test_record(["g"], 2, "pass"))
    md = render_markdown(state, "planted-x", out="c")
    assert "3 tests, 2 failed, 1 distinct failures;" in md
    assert "### F001: crash — ADD (TENSOR_FLOAT32)\n" in md  # no first diverging operation
    assert "; 3 operations, found\n" in md  # not minimized: no minimized size
    html = render_html(state, "planted-x", out="c")
    assert "3 tests, <span class='fail'>2 failed</span>, 1 distinct failures;" in html
    assert "<td>TENSOR_FLOAT32</td><td></td>" in html and "(3 ops)<br>found" in html
