"""Differential campaigns: planted bugs found and minimized, the reference clean, resuming
after interruptions, deduplication, sharding, reports."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz.cli import main as nnfuzz
from randomgraph import campaign
from randomgraph.campaign import (
    JOURNAL,
    CampaignError,
    CampaignSettings,
    CampaignState,
    CampaignWorker,
    Filters,
    Journal,
    case_id,
    enumerate_tests,
    parse_seeds,
    parse_shard,
    preset_groups,
    run_campaign,
    unbounded,
)
from randomgraph.differential import Outcome
from randomgraph.spec.loader import load_spec
from randomgraph.stopping import STOP_SIGNALS, stop_signals_deferred, stop_signals_interrupt

ROOT = Path(__file__).resolve().parents[1]


def settings(out, driver, groups, seeds, **kw) -> CampaignSettings:
    kw.setdefault("timeout", 5.0)
    kw.setdefault("minimize_seconds", 4.0)
    return CampaignSettings(groups=groups, out=out, seeds=seeds, driver=driver, **kw)


def single(*ops: str, **kw) -> list:
    return preset_groups("custom", Filters(operations=ops), num_ops=1, **kw)


def journal_tests(out: Path) -> list[dict]:
    return [r for r in Journal(out / JOURNAL).load() if r.get("kind") == "test"]


# ---------------------------------------------------------------------------------------
# Every planted bug is found, minimized, and replays
# ---------------------------------------------------------------------------------------

PLANTED = {
    # driver: (groups, seeds, options)
    "planted-rounding": (lambda: preset_groups("rounding", Filters(operations=("ADD",))), 12, {}),
    "planted-activation": (lambda: single("ADD", "SUB", "MUL"), 10, {}),
    "planted-padding": (lambda: single("CONV_2D"), 12, {}),
    "planted-broadcast": (lambda: single("ADD", "MUL"), 60, {}),
    "planted-crash": (lambda: single("ADD"), 12, {}),
    "planted-hang": (lambda: single("MUL", max_dim=6), 12, {"timeout": 0.5}),
    "planted-status": (lambda: single("RESHAPE"), 3, {}),
}
EXPECTED = {
    "planted-rounding": Outcome.WRONG,
    "planted-activation": Outcome.WRONG,
    "planted-padding": Outcome.WRONG,
    "planted-broadcast": Outcome.WRONG,
    "planted-crash": Outcome.CRASH,
    "planted-hang": Outcome.HANG,
    "planted-status": Outcome.REJECTED,
}


@pytest.mark.parametrize("driver", sorted(PLANTED))
def test_planted_bug_is_found_minimized_and_replays(driver, tmp_path, capsys):
    make_groups, n, options = PLANTED[driver]
    summary = run_campaign(settings(tmp_path, driver, make_groups(), range(n), **options))
    assert summary.failed
    bugs = summary.state.bugs()
    assert bugs and {b.outcome for b in bugs} == {EXPECTED[driver].value}, [
        (b.outcome, b.detail) for b in bugs
    ]
    bug = bugs[0]
    assert bug.status == "minimized" and bug.minimized, bug
    spec = tmp_path / bug.minimized
    (test,) = load_spec(spec)
    assert 1 <= len(test.main.operations) <= 3
    assert (tmp_path / bug.spec).exists()  # the original is kept too
    # The spec says how to replay it (a hang replays isolated, so that it ends).
    (command,) = [ln for ln in spec.read_text().splitlines() if ln.startswith("# replay: ")]
    replay_driver = command.split("--driver ")[1].strip()
    isolated = {"planted-hang": "@isolated:timeout=0.5", "planted-crash": "@isolated:timeout=5"}
    assert replay_driver == driver + isolated.get(driver, "")
    assert nnfuzz(["replay", str(spec), "--driver", replay_driver]) == 1
    assert nnfuzz(["replay", str(spec), "--driver", "reference"]) == 0
    capsys.readouterr()


def test_reference_passes_a_short_campaign(tmp_path):
    groups = preset_groups("android")
    summary = run_campaign(settings(tmp_path, "reference", groups, range(1)))
    counts = summary.state.outcome_counts()
    assert not summary.failed, [
        (r["id"], r.get("detail")) for r in journal_tests(tmp_path) if r["outcome"] != "pass"
    ]
    assert counts["pass"] >= len(groups) * 0.9


def test_reference_passes_the_metamorphic_relations(tmp_path):
    groups = preset_groups(
        "single", Filters(operations=("CONV_2D", "ADD", "AVERAGE_POOL_2D", "RESHAPE", "SOFTMAX"))
    )
    groups += preset_groups("rounding", Filters(operations=("MUL", "QUANTIZE")))
    from randomgraph.metamorphic import RELATIONS

    s = settings(tmp_path, "reference", groups, range(3), metamorphic=RELATIONS)
    summary = run_campaign(s, report=False)
    assert not summary.failed, [r.get("detail") for r in journal_tests(tmp_path)]


# ---------------------------------------------------------------------------------------
# Interruptions lose nothing and repeat nothing
# ---------------------------------------------------------------------------------------


def _ids(out: Path) -> list[str]:
    return [r["id"] for r in journal_tests(out)]


def test_stop_and_resume(tmp_path):
    groups = single("ADD", "SUB", "MUL")
    full = [case_id(g, s) for _, g, s in enumerate_tests(groups, range(16))]
    s = dict(minimize=False)
    wall = time.monotonic()
    first = run_campaign(
        settings(tmp_path, "planted-activation", groups, range(16), max_tests=5, **s)
    )
    assert first.ran == 5 and len(_ids(tmp_path)) == 5
    failures_before = dict(first.state.failures)
    second = run_campaign(settings(tmp_path, "planted-activation", groups, range(16), **s))
    ids = _ids(tmp_path)
    assert sorted(ids) == sorted(full) and len(ids) == len(set(ids))
    assert second.ran == len(full) - 5
    # Campaign time carries over sessions and is never more than the time spent.
    times = [r["elapsed"] for r in journal_tests(tmp_path)]
    assert times == sorted(times) and times[-1] <= time.monotonic() - wall
    # Failures found before the interruption are still there, with their specs.
    for fid, f in failures_before.items():
        assert fid in second.state.failures and (tmp_path / f.spec).exists()
    # A third run has nothing left to do.
    third = run_campaign(settings(tmp_path, "planted-activation", groups, range(16), **s))
    assert third.ran == 0 and _ids(tmp_path) == ids


@pytest.mark.parametrize("jobs", [0, 1], ids=["in-process", "workers"])
def test_minimization_interrupted_is_resumed(tmp_path, jobs):
    groups = single("ADD")
    s = settings(tmp_path, "planted-crash", groups, range(12), minimize=False, jobs=jobs)
    run_campaign(s, report=False)
    state = CampaignState.from_records(Journal(tmp_path / JOURNAL).load())
    assert state.failures and all(f.status == "not-minimized" for f in state.failures.values())
    # As if killed before minimizing: the journal says "found" and nothing else.
    lines = (tmp_path / JOURNAL).read_text().replace('"not-minimized"', '"found"')
    (tmp_path / JOURNAL).write_text(lines)
    again = run_campaign(
        settings(tmp_path, "planted-crash", groups, range(12), jobs=jobs), report=False
    )
    assert again.ran == 0
    assert all(f.status == "minimized" for f in again.state.failures.values())


def test_a_minimization_stopped_by_ctrl_c_stays_pending_and_resumes(tmp_path, monkeypatch):
    groups = single("ADD")
    real_minimize = campaign.minimize

    def ctrl_c_at_the_first_candidate(checker, *args, **kw):
        def interrupt(test, **_):
            raise KeyboardInterrupt

        checker.check = interrupt  # the minimizer catches it and returns what it has
        try:
            return real_minimize(checker, *args, **kw)
        finally:
            del checker.check

    monkeypatch.setattr(campaign, "minimize", ctrl_c_at_the_first_candidate)
    first = run_campaign(settings(tmp_path, "planted-crash", groups, range(12)), report=False)
    assert first.interrupted
    assert [f.status for f in first.state.failures.values()] == ["found"]
    monkeypatch.undo()
    again = run_campaign(settings(tmp_path, "planted-crash", groups, range(12)), report=False)
    assert [f.status for f in again.state.failures.values()][:1] == ["minimized"]
    assert again.state.tests_run == 12


def test_minimize_seconds_bound_the_minimization(tmp_path):
    s = settings(tmp_path, "planted-crash", single("ADD"), range(12), minimize_seconds=1e-6)
    run_campaign(s, report=False)
    minimized = [r for r in Journal(tmp_path / JOURNAL).load() if r["kind"] == "minimized"]
    assert minimized and all(r["status"] == "minimized" for r in minimized)
    assert [r["checks"] for r in minimized] == [0] * len(minimized)  # out of time at once


def test_a_failure_that_does_not_fail_again_is_flaky(tmp_path):
    (group,) = single("ADD")
    worker = CampaignWorker(settings(tmp_path, "reference", [group], range(1)))
    test, choices, _ = CampaignWorker.make_test(group, 0)
    payload = {"test": test.to_json(), "outcome": "wrong-result", "group": group.name}
    record = worker.minimize("F001", {**payload, "choices": choices})
    assert record.status == "flaky" and record.test is None
    assert record.detail.startswith("did not fail the same way again (pass"), record.detail


def test_a_cut_journal_line_is_dropped(tmp_path):
    groups = single("ADD")
    run_campaign(settings(tmp_path, "reference", groups, range(4)), report=False)
    journal = tmp_path / JOURNAL
    data = journal.read_bytes()
    journal.write_bytes(data + b'{"kind":"test","id":"custom/1op#9","outc')
    summary = run_campaign(settings(tmp_path, "reference", groups, range(6)), report=False)
    assert summary.ran == 2
    assert all(json.loads(line) for line in journal.read_text().splitlines())


def test_a_killed_worker_loses_and_repeats_nothing(tmp_path):
    groups = single("ADD", "MUL")
    killed = []

    def on_event(kind, info):
        started = kind == "dispatched" and info["task"][0] == "test"
        if started and not killed and len(journal_tests(tmp_path)) >= 3:
            killed.append(info["task"])
            os.kill(info["pid"], signal.SIGKILL)

    s = settings(tmp_path, "reference", groups, range(10), jobs=2)
    summary = run_campaign(s, on_event=on_event, report=False)
    assert killed
    ids = _ids(tmp_path)
    assert len(ids) == 10 and len(set(ids)) == 10
    assert not summary.failed  # retried in a fresh worker, not counted as a crash


def test_a_worker_killed_while_idle_is_replaced_and_costs_no_test(tmp_path):
    # The OOM killer picks an idle worker as readily as a busy one. The parent's next
    # send to it fails; the campaign used to end there with a BrokenPipeError.
    groups = single("ADD", "MUL")
    killed = []

    def on_event(kind, info):
        if kind == "ready" and not killed:
            killed.append(info["pid"])
            os.kill(info["pid"], signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # gone, so the send must fail
                try:
                    os.kill(info["pid"], 0)
                except ProcessLookupError:
                    break
                time.sleep(0.01)

    s = settings(tmp_path, "reference", groups, range(6), jobs=2)
    summary = run_campaign(s, on_event=on_event, report=False)
    assert killed
    ids = _ids(tmp_path)
    assert len(ids) == 6 and len(set(ids)) == 6
    assert not summary.failed


def test_a_killed_campaign_resumes(tmp_path):
    out = tmp_path / "c"
    cmd = [
        sys.executable,
        "-m",
        "fuzz",
        "random",
        "--ops",
        "1",
        "--op",
        "ADD,MUL,SUB",
        "--seeds",
        "0:400",
        "--jobs",
        "0",
        "--no-minimize",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out / JOURNAL).exists() and len(journal_tests(out)) >= 8:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _ids(out)
    assert 8 <= len(before) < 400
    # Resume over a smaller range: what was done stays done, the rest runs once.
    code = subprocess.call(
        [*cmd[:9], "0:40", *cmd[10:]], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    assert code == 0
    ids = _ids(out)
    groups = single("ADD", "MUL", "SUB")
    wanted = {case_id(g, s) for _, g, s in enumerate_tests(groups, range(40))}
    assert len(ids) == len(set(ids)) and wanted <= set(ids)
    assert set(before) <= set(ids)


@pytest.mark.parametrize("stop", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_waits_for_the_records_being_written(stop):
    # Not ignored to begin with: a run under nohup inherits SIGHUP ignored, which stays
    # ignored (test_an_ignored_stop_signal_stays_ignored).
    default = signal.default_int_handler if stop == signal.SIGINT else signal.SIG_DFL
    previous = signal.signal(stop, default)
    try:
        before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
        steps = []
        with pytest.raises(KeyboardInterrupt), stop_signals_interrupt():
            with stop_signals_deferred():
                signal.raise_signal(stop)
                steps.append("journal line and state, both")
            steps.append("after the records")
        assert steps == ["journal line and state, both"]
        assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before
    finally:
        signal.signal(stop, previous)


def test_a_second_stop_signal_ends_the_process_at_once():
    # The first SIGTERM stops the run as Ctrl-C does; should stopping hang, a second one
    # takes the default action (the process ends) instead of another KeyboardInterrupt.
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with stop_signals_interrupt():
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGTERM)
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_ignored_stop_signal_stays_ignored():
    # nohup ignores SIGHUP: closing the terminal must not stop the campaign.
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals_interrupt(), stop_signals_deferred():
            signal.raise_signal(signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize(
    ("stop", "group"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["SIGTERM", "SIGINT-to-the-process-group"],
)
def test_a_stopped_campaign_writes_its_report_and_says_how_to_resume(tmp_path, stop, group):
    # A CI timeout sends SIGTERM: it must stop the campaign as Ctrl-C does. Ctrl-C on a
    # terminal sends SIGINT to the whole process group, workers included: they leave the
    # stopping to the campaign (a worker's KeyboardInterrupt printed a traceback).
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "fuzz", "random", "--ops", "1", "--op", "ADD,MUL"]
    cmd += ["--seeds", "0:100000", "--jobs", "1", "--no-minimize", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # One stream, as on a terminal or in a CI log, to see the order of the lines.
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's job
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(journal_tests(out)) < 4:
        time.sleep(0.05)
    if group:
        os.killpg(proc.pid, stop)
    else:
        proc.send_signal(stop)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    lines = output.splitlines()
    assert lines[-1] == f"interrupted: rerun with --out {out} to resume"  # the last line
    assert (out / "report.html").exists() and (out / "summary.md").exists()
    ran = len(journal_tests(out))
    assert 4 <= ran < 200000 and lines[-2].startswith(f"{ran} tests: {ran} passed")


# ---------------------------------------------------------------------------------------
# Deduplication, shards, settings, reports
# ---------------------------------------------------------------------------------------


def test_dedup_groups_copies_of_one_bug(tmp_path):
    groups = single("SUB")
    # Copies of other data types merge once minimization has turned them into float32
    # (about 1 s each); the 4 s budget of the other tests ran out on a loaded machine.
    slow_ok = {"minimize_seconds": 30.0}
    summary = run_campaign(settings(tmp_path, "planted-activation", groups, range(40), **slow_ok))
    failing = [r for r in journal_tests(tmp_path) if r["outcome"] == "wrong-result"]
    bugs = summary.state.bugs()
    assert len(failing) >= 8
    assert len(bugs) <= 2, [(b.id, b.final_key) for b in bugs]
    assert sum(b.copies for b in bugs) == len(failing)
    written = list((tmp_path / "failures").glob("*.mod.py"))
    assert len(written) < len(failing)  # copies are counted, not written


def test_shards_partition_the_tests():
    groups = single("ADD", "MUL")
    everything = [(g.name, s) for _, g, s in enumerate_tests(groups, range(7))]
    shards = [
        [(g.name, s) for _, g, s in enumerate_tests(groups, range(7), (i, 3))] for i in range(3)
    ]
    assert sorted(x for shard in shards for x in shard) == sorted(everything)
    assert not set(shards[0]) & set(shards[1])


def test_tests_run_seed_major_so_every_group_comes_early():
    groups = preset_groups("single", Filters(operations=("ADD", "MUL", "SUB")))
    assert len(groups) == 3
    for seeds in (range(4), None):
        first = list(itertools.islice(enumerate_tests(groups, seeds), 6))
        assert [(p, g.name, s) for p, g, s in first] == [
            (position, groups[position % 3].name, position // 3) for position in range(6)
        ]


def test_seed_and_shard_parsing():
    assert parse_seeds("3:7") == range(3, 7)
    assert parse_seeds("5") == range(5, 6)
    assert parse_seeds("0:") is None
    assert parse_seeds("7:").start == 7 and unbounded(parse_seeds("7:"))  # not from 0 again
    assert parse_shard("1/4") == (1, 4)
    for bad in ("7:3", "3:3", "x"):  # no seed at all is a mistake, not an empty campaign
        with pytest.raises(ValueError):
            parse_seeds(bad)
    with pytest.raises(ValueError):
        parse_shard("4/4")


def test_presets_follow_androids_matrix():
    single_groups = preset_groups("single")
    assert len(single_groups) >= 80 and all(
        g.num_ops == 1 and g.max_dim == 1000 for g in single_groups
    )
    small = preset_groups("small")
    large = preset_groups("large")
    assert {g.num_ops for g in small} == {5} and {g.max_dim for g in small} == {1000}
    assert {g.num_ops for g in large} == {40} and {g.max_dim for g in large} == {10}
    assert {g.criteria for g in small} == {"small_graph"}
    assert any(g.data_types == ("TENSOR_FLOAT32",) and g.ranks == (4,) for g in large)
    with pytest.raises(CampaignError):
        preset_groups("custom", Filters(operations=("ADD",), data_types=("TENSOR_BOOL8",)))


def test_other_settings_refuse_to_resume(tmp_path):
    run_campaign(settings(tmp_path, "reference", single("ADD"), range(1)), report=False)
    with pytest.raises(CampaignError):
        run_campaign(settings(tmp_path, "planted-crash", single("ADD"), range(1)), report=False)


def test_reports_list_failures_with_replay_commands(tmp_path):
    summary = run_campaign(settings(tmp_path, "planted-status", single("RESHAPE"), range(2)))
    html = summary.report.read_text()
    md = summary.markdown.read_text()
    assert "<svg" in html and "polyline" in html and "RESHAPE" in html
    assert "nnfuzz replay" in html and "nnfuzz replay" in md
    bug = summary.state.bugs()[0]
    assert bug.minimized in md


def test_cli_exit_status_and_summary(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # --out relative to where the campaign runs
    args = ["random", "--ops", "1", "--op", "RESHAPE", "--seeds", "0:2", "--jobs", "0"]
    assert nnfuzz([*args, "--out", "a"]) == 0
    out = capsys.readouterr().out
    assert "2 tests: 2 passed, 0 failed" in out
    assert nnfuzz([*args, "--driver", "planted-status", "--out", "b"]) == 1
    out = capsys.readouterr().out
    assert "1 distinct failure" in out
    # The replay commands stdout prints are the ones the specs' headers and the report
    # carry, and they run from here.
    printed = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("nnfuzz replay")]
    assert printed
    summary = Path("b/summary.md").read_text()
    for command in printed:
        spec = Path(command.split()[2])
        assert spec.parts[:2] == ("b", "failures") and spec.is_file(), command
        assert f"# replay: {command}" in spec.read_text().splitlines()
        assert f"`{command}`" in summary
        assert nnfuzz(command.split()[1:]) == 1
    capsys.readouterr()
    # Beside each original spec, the test it holds as JSON (what minimization reads).
    for spec in Path("b/failures").glob("*.mod.py"):
        if not spec.name.endswith("_min.mod.py"):
            assert spec.with_name(spec.name.replace(".mod.py", ".json")).is_file()


def exiting_driver():
    """A driver that takes its process down on an ADD with a dimension of size 3."""
    from driver.device import ReferenceDevice

    class Exiting(ReferenceDevice):
        def prepare_model(self, model, *args, **kw):
            if any(3 in o.dimensions for o in model.main.operands):
                os._exit(3)
            return super().prepare_model(model, *args, **kw)

    return Exiting()


def test_a_driver_that_kills_its_worker_is_a_crash(tmp_path):
    groups = single("ADD")
    s = settings(tmp_path, "tests.test_campaign:exiting_driver", groups, range(12), jobs=1)
    summary = run_campaign(s, report=False)
    crashes = [r for r in journal_tests(tmp_path) if r["outcome"] == "crash"]
    assert crashes and all("died" in r["detail"] for r in crashes)
    assert summary.state.tests_run == 12  # the campaign carried on
    bug = summary.state.bugs()[0]
    assert bug.status == "not-minimized" and (tmp_path / bug.spec).exists()
    assert "@isolated" in (tmp_path / bug.spec).read_text()


def sleeping_driver():
    """A driver whose prepareModel takes 5 s: longer than the task budget the test sets."""
    from driver.device import ReferenceDevice

    class Sleeping(ReferenceDevice):
        def prepare_model(self, model, *args, **kw):
            time.sleep(5)
            return super().prepare_model(model, *args, **kw)

    return Sleeping()


def test_a_worker_that_stops_answering_is_a_hang(tmp_path, monkeypatch):
    # The driver watchdog (--timeout) is the first line; a worker stuck beyond its task
    # budget anyway is killed, its task retried once, then counted as a hang.
    monkeypatch.setattr(campaign, "_task_budget", lambda settings, task: 0.3)
    driver = "tests.test_campaign:sleeping_driver"
    s = settings(tmp_path, driver, single("ADD"), range(1), jobs=1, timeout=60.0)
    lost = []
    on_event = lambda kind, info: lost.append(info) if kind == "lost" else None  # noqa: E731
    summary = run_campaign(s, on_event=on_event, report=False)
    (test,) = journal_tests(tmp_path)
    assert test["outcome"] == "hang", test
    assert test["detail"] == "the worker process stopped answering for 0 s"
    assert len(lost) == 2 and summary.failed  # tried twice
    (bug,) = summary.state.bugs()
    assert bug.outcome == "hang" and bug.status == "not-minimized"


def test_a_minimization_is_not_taken_for_a_hang_within_its_budget():
    s = settings("unused", "reference", [], range(1), timeout=1.0, minimize_seconds=3600.0)
    assert campaign._task_budget(s, ("minimize", "F001", {})) > 3600.0
    assert campaign._task_budget(s, ("test", "custom/1op", 0)) > 4 * s.timeout


def test_parallel_workers_start_with_one_blas_thread_and_the_environment_is_restored(monkeypatch):
    from driver import SINGLE_THREADED_BLAS
    from randomgraph.campaign import _environ_defaults

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a user's setting wins
    with _environ_defaults(SINGLE_THREADED_BLAS):
        assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
        assert os.environ["OMP_NUM_THREADS"] == "3"
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    assert os.environ["OMP_NUM_THREADS"] == "3"
