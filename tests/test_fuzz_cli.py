"""``nnfuzz fuzz`` on bad input and in bad moments: a usage error is one line and exit
status 2 before any fuzzing; an interrupted campaign or replay keeps what it found; a
campaign always ends; merging adds only new coverage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import ClassVar

import pytest

from fuzz import campaign as fuzz_campaign
from fuzz import triage
from fuzz.cli import main as nnfuzz

# A target of one's own that crashes at once on inputs starting with "X" (seeded into the
# working corpus, so libFuzzer finds it on its first pass) and raises ValueError from
# two different functions of its own for "XA..." and "XB...".
CRASHY = textwrap.dedent(
    '''
    """A target that crashes on inputs starting with X."""
    MAX_LEN = 256


    def first_bug(data):
        raise ValueError("bad input")


    def second_bug(data):
        raise ValueError("bad input")


    def test_one_input(data):
        if data[:2] == b"XB":
            second_bug(data)
        if data[:1] == b"X":
            first_bug(data)
    '''
)


# A target of one's own that dies of a segfault on "S..." and hangs on "H...".
DYING = textwrap.dedent(
    """
    import os
    import signal
    import time

    MAX_LEN = 16


    def test_one_input(data):
        if data[:1] == b"S":
            os.kill(os.getpid(), signal.SIGSEGV)
        if data[:1] == b"H":
            time.sleep(30)
    """
)


def exit_status(argv: list[str]) -> int:
    try:
        return nnfuzz(argv)
    except SystemExit as e:  # argparse usage errors
        return e.code


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory with target modules of one's own importable (here and in the
    child processes) and fast atheris start-up."""
    monkeypatch.chdir(tmp_path)
    mods = tmp_path / "mods"
    (mods / "mine").mkdir(parents=True)
    (mods / "mine" / "__init__.py").write_text("")
    (mods / "mine" / "crashy.py").write_text(CRASHY)
    (mods / "mine" / "dying.py").write_text(DYING)
    (mods / "mine" / "raising.py").write_text("raise RuntimeError('no device here')\n")
    (mods / "mine" / "syntax.py").write_text("def test_one_input(data)\n")
    (mods / "mine" / "exiting.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(mods))
    path = os.pathsep.join(filter(None, [str(mods), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("NNFUZZ_INSTRUMENT", "driver.wire")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # default --work here
    Path("afile").write_text("not a directory\n")
    Path("empty").mkdir()
    os.mkfifo("fifo")
    return tmp_path


USAGE_ERRORS = [
    # (command line, what stderr must say)
    (["--seed", "99999999999999999999"], "--seed: must be <= 4294967295"),
    (["--seed", "-1"], "--seed: must be >= 0"),
    (["--libfuzzer=-seed=abc"], "-seed is set by nnfuzz: use --seed"),
    (["--libfuzzer=notaflag"], "'notaflag' is not a libFuzzer flag"),
    (["--libfuzzer=-use_value_profile"], "'-use_value_profile' is not a libFuzzer flag"),
    (["--libfuzzer=--seed=1"], "--seed is set by nnfuzz: use --seed"),
    (["--libfuzzer=-max_total_time=2000"], "-max_total_time is set by nnfuzz: use --time"),
    (["--libfuzzer=-artifact_prefix=/elsewhere/"], "-artifact_prefix is set by nnfuzz"),
    (["--libfuzzer=-jobs=4"], "-jobs is set by nnfuzz: use --jobs"),
    (["--libfuzzer=-timeout=9"], "-timeout is set by nnfuzz: use --timeout"),
    (["--libfuzzer=-fork=2"], "-fork is set by nnfuzz: use --jobs"),
    (["--rss-limit-mb", "0"], "--rss-limit-mb: must be >= 1"),  # libFuzzer: 0 is no limit
    (["--minimize-time", "-1"], "--minimize-time: must be >= 0"),
    (["--driver", "nosuchdriver"], "--driver: unknown driver 'nosuchdriver'"),
    (["--driver", "nomod:make"], "--driver: cannot import driver module 'nomod'"),
    (["--driver", ""], "--driver: an empty name names no driver"),
    (["--work", ""], "--work: an empty path names no directory"),
    (["--crash-dir", ""], "--crash-dir: an empty path names no directory"),
    (["--crash-dir", "afile"], "--crash-dir: afile is not a directory"),
    (["--regress", "fifo"], "--regress: not a regular file or directory: fifo"),
    (["--regress", "empty", "--crash-dir", "nonexistent"], "no such directory"),
    (["--regress", "empty", "--driver", "nosuchdriver"], "unknown driver 'nosuchdriver'"),
]


@pytest.mark.parametrize(("extra", "message"), USAGE_ERRORS)
def test_bad_options_are_refused_before_fuzzing(here, capsys, extra, message):
    started = time.monotonic()
    assert exit_status(["fuzz", "model", "--time", "1", "--work", "w", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not Path("w").exists(), "a refused campaign started"
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mine.raising", "cannot import target mine.raising: RuntimeError: no device here"),
        ("mine.syntax", "cannot import target mine.syntax: SyntaxError"),
        ("mine.exiting", "cannot import target mine.exiting: SystemExit: 3"),
        # A name without a dot is a registered target, never imported as a module.
        ("modle", "unknown fuzz target 'modle': use one of model, request, execute, cache"),
        ("json.decoder", "'json.decoder' has no test_one_input(data)"),
        ("mine.absent", "cannot import fuzz target module 'mine.absent'"),
    ],
)
def test_a_target_that_fails_on_import_is_a_usage_error(here, capsys, target, message):
    assert exit_status(["fuzz", target, "--time", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_crash_dir_without_a_target_is_refused(here, capsys):
    assert exit_status(["fuzz", "--regress", "empty", "--crash-dir", "empty"]) == 2
    assert "--crash-dir needs a TARGET" in capsys.readouterr().err


def test_the_libfuzzer_child_is_killed_when_it_outlives_its_time(tmp_path):
    started = time.monotonic()
    code, interrupted, killed = fuzz_campaign._run_logged(
        [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"],
        dict(os.environ),
        tmp_path / "log",
        lambda line: None,
        deadline=1.0,
    )
    assert killed and not interrupted and code != 0
    assert time.monotonic() - started < 15
    assert "killed: still running" in (tmp_path / "log").read_text()


def test_a_failing_libfuzzer_with_no_artifact_is_an_error(here, capsys, monkeypatch):
    # libFuzzer exiting 1 with nothing found ("required directory does not exist", a bad
    # flag it rejects) passed as "triage: nothing found", exit status 0.
    monkeypatch.setattr(
        fuzz_campaign, "libfuzzer_args", lambda cfg, artifacts, corpus: ["/no/such/dir"]
    )
    assert exit_status(["fuzz", "model", "--time", "2", "--work", str(here / "w")]) == 2
    err = capsys.readouterr().err
    assert "libFuzzer failed (exit status 1) without finding anything" in err
    assert "/no/such/dir" in err  # the tail of its log


def _crash_campaign(work: Path, crashes: Path, *extra: str) -> list[str]:
    (work / "corpus").mkdir(parents=True, exist_ok=True)
    (work / "corpus" / "crasher").write_bytes(b"X" + b"y" * 143)
    argv = ["fuzz", "mine.crashy", "--time", "5", "--work", str(work)]
    return [*argv, "--crash-dir", str(crashes), *extra]


def test_a_relative_work_directory_works(here, capsys):
    assert exit_status(_crash_campaign(Path("wrel"), Path("cr"), "--no-minimize")) == 1
    out = capsys.readouterr().out
    assert "NEW   crash   ValueError" in out
    assert len(list(Path("cr").glob("crash-*.json"))) == 1


class _InterruptedMinimizer(subprocess.Popen):
    """The minimizer's wait is where Ctrl-C arrives (it runs in its own session)."""

    pids: ClassVar[list[int]] = []

    def wait(self, timeout=None):
        if timeout is not None:  # the minimizer's wait; libFuzzer's own has none
            _InterruptedMinimizer.pids.append(self.pid)
            time.sleep(1)
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_interrupted_minimization_stores_the_crash_and_kills_the_minimizer(
    here, capsys, monkeypatch
):
    class Subprocess:
        Popen = _InterruptedMinimizer
        DEVNULL = subprocess.DEVNULL
        PIPE = subprocess.PIPE
        STDOUT = subprocess.STDOUT
        TimeoutExpired = subprocess.TimeoutExpired

    monkeypatch.setattr(fuzz_campaign, "subprocess", Subprocess)
    assert exit_status(_crash_campaign(Path("w"), Path("cr"), "--minimize-time", "30")) == 1
    out, err = capsys.readouterr()
    assert "NEW   crash   ValueError" in out and "triage: 1 artifact(s)" in out
    (record,) = Path("cr").glob("crash-*.json")
    assert json.loads(record.read_text())["size"] == 144  # stored as found
    assert err.splitlines()[-1].startswith("interrupted")
    (pid,) = _InterruptedMinimizer.pids
    assert not _group_alive(pid), "the minimizer was left running"


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (not a zombie), a few seconds
    after it was killed."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        states = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid:
                states.append(fields[0])
        if all(state == "Z" for state in states):
            return False
        time.sleep(0.1)
    return True


def test_untriaged_artifacts_survive_to_the_next_run(here, capsys, monkeypatch):
    work, crashes = Path("w"), Path("cr")

    def interrupted_replay(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(triage, "replay", interrupted_replay)
        assert exit_status(_crash_campaign(work, crashes, "--no-minimize")) == 1
    out = capsys.readouterr().out
    assert "1 artifact(s) not triaged" in out
    (artifact,) = (work / "artifacts").glob("crash-*")
    # The next run (the crashing input gone from the corpus) triages it.
    (work / "corpus" / "crasher").unlink()
    code = exit_status(
        [
            "fuzz",
            "mine.crashy",
            "--time",
            "2",
            "--work",
            str(work),
            "--crash-dir",
            str(crashes),
            "--no-minimize",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "NEW   crash   ValueError" in out
    assert len(list(crashes.glob("crash-*.json"))) == 1


def test_minimize_time_zero_stores_as_found(here, capsys, monkeypatch):
    def no_minimizing(*args, **kwargs):
        raise AssertionError("minimized with --minimize-time 0")

    monkeypatch.setattr(fuzz_campaign, "minimize", no_minimizing)
    assert exit_status(_crash_campaign(Path("w"), Path("cr"), "--minimize-time", "0")) == 1
    (record,) = Path("cr").glob("crash-*.json")
    assert json.loads(record.read_text())["size"] == 144


@pytest.mark.parametrize(
    ("damage", "warning"),
    [
        ("[]", "not a record"),
        ("{not json", "not readable as JSON"),
        ("reproducer gone", "is missing"),
    ],
)
def test_a_damaged_record_in_the_store_does_not_lose_the_finding(here, capsys, damage, warning):
    crashes = Path("cr")
    assert exit_status(_crash_campaign(Path("w"), crashes, "--no-minimize")) == 1
    capsys.readouterr()
    (record,) = crashes.glob("crash-*.json")
    if damage == "reproducer gone":
        record.with_suffix("").unlink()
    else:
        record.write_text(damage)
    triage._WARNED.clear()
    assert exit_status(_crash_campaign(Path("w"), crashes, "--no-minimize")) == 1
    out, err = capsys.readouterr()
    assert "NEW   crash" in out and warning in err and "Traceback" not in err
    assert json.loads(record.read_text())["exception"] == "ValueError"
    assert record.with_suffix("").read_bytes().startswith(b"X")


def test_a_second_campaign_in_the_same_work_directory_is_refused(here, capsys):
    from randomgraph.campaign import campaign_lock

    with campaign_lock(here / "w", "--work"):
        assert exit_status(["fuzz", "model", "--time", "1", "--work", "w"]) == 2
    err = capsys.readouterr().err
    assert f"{here / 'w'} is in use by another campaign (pid {os.getpid()})" in err
    assert "--work" in err
    assert not (here / "w" / "launch").exists()


def test_regress_passes_any_number_of_paths(here, capsys, monkeypatch):
    many = Path("many")
    many.mkdir()
    name = "n" * 200
    for k in range(12000):  # 2.4 MB of paths: more than one command line holds
        (many / f"{name}{k}").write_bytes(b"")
    assert exit_status(["fuzz", "mine.crashy", "--regress", "many"]) == 0
    assert "12000 inputs replayed, 0 failed" in capsys.readouterr().out


def test_regress_reads_no_more_than_the_target_does(here, capsys):
    big = Path("big")
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # 300 MB of zeros (sparse)
    assert exit_status(["fuzz", "mine.crashy", "--regress", "big"]) == 0
    out = capsys.readouterr().out
    assert "1 inputs replayed, 0 failed" in out
    assert "longer than 256 bytes: replayed its first 256" in out


def test_an_interrupted_regress_prints_what_finished(here, capsys, monkeypatch):
    Path("inputs").mkdir()
    Path("inputs/a").write_bytes(b"ok")
    Path("inputs/b").write_bytes(b"Xcrash")
    real = triage.replay_iter

    def interrupted(*args, **kwargs):
        for k, outcome in enumerate(real(*args, **kwargs)):
            if k == 2:
                raise KeyboardInterrupt
            yield outcome

    monkeypatch.setattr(triage, "replay_iter", interrupted)
    Path("inputs/c").write_bytes(b"fine")
    assert exit_status(["fuzz", "mine.crashy", "--regress", "inputs"]) == 1
    out, err = capsys.readouterr()
    assert "2 of 3 inputs replayed, 1 failed" in out
    assert out.splitlines()[-1] == "1 passed, 1 failed" and "interrupted" in err


def test_distinct_bugs_in_a_target_of_ones_own_have_distinct_signatures(here):
    Path("xa").write_bytes(b"XA")
    Path("xb").write_bytes(b"XB")
    a, b = triage.replay("mine.crashy", ["xa", "xb"])
    assert a.frames and a.frames[-1] == "mine.crashy:first_bug"
    assert b.frames[-1] == "mine.crashy:second_bug"
    assert a.signature() != b.signature()


def test_merge_uses_a_fresh_control_file_in_its_work_directory(here, monkeypatch):
    corpus = here / "corpus"
    into = corpus / "model"
    into.mkdir(parents=True)
    seeds = sorted((fuzz_campaign.CORPUS / "model").iterdir())[:20]
    for seed in seeds:
        (into / seed.name).write_bytes(seed.read_bytes())
    monkeypatch.setattr(fuzz_campaign, "CORPUS", corpus)
    a, b = Path("a"), Path("b")
    a.mkdir()
    b.mkdir()
    for k in range(10):
        (a / f"r{k}").write_bytes(os.urandom(64))
    for k, seed in enumerate(seeds):
        (b / f"copy{k}").write_bytes(seed.read_bytes())  # nothing new
    assert exit_status(["fuzz", "model", "--merge", "a", "--work", "w"]) == 0
    after_a = sorted(into.iterdir())
    assert exit_status(["fuzz", "model", "--merge", "b", "--work", "w"]) == 0
    assert sorted(into.iterdir()) == after_a, "copies of existing inputs were merged"
    assert (here / "w" / "launch").is_file() and (here / "w" / "merge.log").is_file()
    assert not list((here / "w").glob("*.control"))


def test_a_failed_merge_is_an_error(here, capsys, monkeypatch):
    # libFuzzer's merge exiting 1 ("No such file or directory: a" for a relative DIR: it
    # runs in the project root) was reported as a merge that added nothing.
    monkeypatch.setattr(fuzz_campaign, "CORPUS", here / "corpus")
    monkeypatch.setattr(fuzz_campaign, "_run_logged", lambda *args, **kwargs: (1, False, False))
    assert exit_status(["fuzz", "model", "--merge", "empty", "--work", "w"]) == 2
    assert "libFuzzer's merge failed (exit status 1)" in capsys.readouterr().err


def test_a_campaign_whose_libfuzzer_outlives_its_time_ends_with_an_error(here, capsys, monkeypatch):
    # The child hung inside atheris.Fuzz() (a bad -seed): the campaign never ended.
    monkeypatch.setattr(fuzz_campaign, "WATCHDOG_GRACE", -2.5)  # deadline: 0.5 s
    monkeypatch.setattr(fuzz_campaign, "write_launcher", lambda target, work: Path("/bin/sleep"))
    monkeypatch.setattr(fuzz_campaign, "libfuzzer_args", lambda cfg, artifacts, corpus: ["60"])
    started = time.monotonic()
    argv = ["fuzz", "model", "--time", "1", "--timeout", "1", "--work", str(here / "w")]
    assert exit_status(argv) == 2
    assert "libFuzzer did not end after --time: killed" in capsys.readouterr().err
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("jobs, threads", [(1, None), (2, "1")])
def test_parallel_fuzzing_children_get_one_blas_thread_each(monkeypatch, tmp_path, jobs, threads):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    cfg = fuzz_campaign.CampaignConfig(target="model", jobs=jobs)
    env = fuzz_campaign.environment(cfg, tmp_path / "launch")
    assert env.get("OPENBLAS_NUM_THREADS") == threads
    # A user's own setting wins.
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    assert fuzz_campaign.environment(cfg, tmp_path / "launch")["OPENBLAS_NUM_THREADS"] == "3"


def test_libfuzzer_status_lines_fill_the_campaign_stats():
    stats = fuzz_campaign.Stats()
    lines = [
        "INFO: Seed: 1234",
        "#2048\tpulse  cov: 310 ft: 900 corp: 40/2Kb exec/s: 512 rss: 180Mb",
        "#9000: cov: 420 ft: 1300 corp: 77 exec/s: 300 oom/timeout/crash: 1/2/3 time: 30s",
        # In fork mode the parent's own final stats are zeros.
        "stat::number_of_executed_units: 0",
        "stat::average_exec_per_sec:     0",
        "stat::peak_rss_mb:              0",
    ]
    status = [fuzz_campaign.parse_line(line, stats) for line in lines]
    assert status == [False, True, True, True, True, True]
    assert (stats.execs, stats.cov, stats.ft, stats.corpus) == (9000, 420, 1300, 77)
    assert (stats.exec_per_s, stats.rss_mb) == (300, 180)
    assert (stats.ooms, stats.timeouts, stats.crashes) == (1, 2, 3)
    assert stats.line().endswith("crash/timeout/oom 3/2/1")
    # In-process, the final stats are the numbers (libFuzzer aligns them with spaces).
    for line in ("stat::number_of_executed_units: 9500", "stat::peak_rss_mb:              240"):
        assert fuzz_campaign.parse_line(line, stats)
    assert (stats.execs, stats.rss_mb) == (9500, 240)


@pytest.mark.parametrize("jobs", [1, 3])
def test_several_jobs_fuzz_in_fork_mode_and_collect_every_finding(tmp_path, jobs):
    seeds = tmp_path / "seeds"
    cfg = fuzz_campaign.CampaignConfig(
        "model", jobs=jobs, max_len=512, seed_dirs=[seeds], seconds=30
    )
    args = fuzz_campaign.libfuzzer_args(cfg, tmp_path / "artifacts", tmp_path / "corpus")
    # libFuzzer writes new inputs into its first corpus: the working one, not the seeds.
    assert args[-2:] == [str(tmp_path / "corpus"), str(seeds)]
    assert "-max_len=512" in args and "-max_total_time=30" in args
    # The summary reads the final stats; the dictionary guides the mutations.
    assert {"-print_final_stats=1", f"-dict={fuzz_campaign.DICTIONARY}"} <= set(args)
    assert f"-artifact_prefix={tmp_path / 'artifacts'}/" in args
    collect = {"-fork=3", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"}
    if jobs == 1:  # in-process: libFuzzer stops at its first finding
        assert not collect & set(args)
    else:
        assert collect <= set(args)


def test_a_new_run_deletes_only_the_artifacts_already_triaged(tmp_path):
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    for name in ("crash-done", "crash-done.min", "timeout-new", "oom-new", "crash-new"):
        (artifacts / name).write_bytes(b"X")
    (artifacts / fuzz_campaign.TRIAGED).write_text("crash-done\n")
    fuzz_campaign._clear_triaged(artifacts)
    # An interrupted run's findings that were never triaged wait for this run's triage.
    kept = [p.name for p in fuzz_campaign.collect_artifacts(artifacts)]
    assert kept == ["crash-new", "oom-new", "timeout-new"]
    assert not (artifacts / fuzz_campaign.TRIAGED).exists()


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        ([], "seconds", 60.0),
        (["--time", "0"], "seconds", None),  # no limit
        (["--time", "2.5"], "seconds", 2.5),
        (["--seed", "0"], "seed", 0),
        (["--no-minimize"], "minimize", False),
        (["--minimize-time", "0"], "minimize", False),
        (["--minimize-time", "7"], "minimize_seconds", 7),
        (["--driver", "reference-1.2"], "driver", "reference-1.2"),
        (["--jobs", "2"], "jobs", 2),
        (["--rss-limit-mb", "300"], "rss_limit_mb", 300),
        (["--timeout", "9"], "timeout", 9),
        (["--max-len", "512"], "max_len", 512),
        (["--libfuzzer=-use_value_profile=1"], "extra", ["-use_value_profile=1"]),
    ],
)
def test_the_options_reach_the_campaign(here, monkeypatch, extra, field, value):
    from randomgraph.campaign import CampaignError

    configs = []

    def run_campaign(cfg, **kwargs):
        configs.append(cfg)
        raise CampaignError("stopped by the test")

    monkeypatch.setattr(fuzz_campaign, "run_campaign", run_campaign)
    assert exit_status(["fuzz", "model", "--work", "w", *extra]) == 2
    (cfg,) = configs
    assert getattr(cfg, field) == value


@pytest.mark.parametrize(
    ("seconds", "seed", "flags", "absent"),
    [
        (0.4, 0, ["-max_total_time=1", "-seed=0"], []),  # -max_total_time=0: no limit
        (90.7, None, ["-max_total_time=90"], ["-seed"]),
        (None, 4294967295, ["-seed=4294967295"], ["-max_total_time"]),
    ],
)
def test_libfuzzer_gets_the_time_limit_and_seed(tmp_path, seconds, seed, flags, absent):
    cfg = fuzz_campaign.CampaignConfig("model", seconds=seconds, seed=seed, seed_dirs=[])
    args = fuzz_campaign.libfuzzer_args(cfg, tmp_path / "artifacts", tmp_path / "corpus")
    assert set(flags) <= set(args)
    assert not [a for a in args for name in absent if a.startswith(name + "=")]


def test_the_fuzzing_children_run_this_checkout_on_the_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere/site")
    monkeypatch.delenv("NNFUZZ_DRIVER", raising=False)
    cfg = fuzz_campaign.CampaignConfig("model", driver="reference-1.2")
    env = fuzz_campaign.environment(cfg, tmp_path / "launch")
    assert env["NNFUZZ_DRIVER"] == "reference-1.2"
    assert env["NNFUZZ_LAUNCHER"] == str(tmp_path / "launch")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(fuzz_campaign.ROOT), "/elsewhere/site"]
    plain = fuzz_campaign.environment(fuzz_campaign.CampaignConfig("model"), tmp_path / "launch")
    assert "NNFUZZ_DRIVER" not in plain


def test_replay_skips_records_and_hidden_files(tmp_path):
    for name in ("crash-1", "crash-1.json", "notes.md", "log.txt", ".hidden", "seed"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep").write_bytes(b"x")
    assert [p.name for p in triage.input_files([tmp_path])] == ["crash-1", "seed"]
    assert triage.input_files([tmp_path / "seed", tmp_path / "missing"]) == [tmp_path / "seed"]


def test_a_known_signature_keeps_its_stored_reproducer(tmp_path):
    outcome = triage.Outcome("x", "crash", "ValueError", "bad input", ("mine.crashy:first_bug",))
    first = triage.store(outcome, b"first", tmp_path, "mine.crashy")
    again = triage.store(outcome, b"second, longer", tmp_path, "mine.crashy")
    assert first.new and not again.new
    assert again.path == first.path and first.path.read_bytes() == b"first"
    assert len(list(tmp_path.iterdir())) == 2  # the reproducer and its record


def test_replay_tells_a_crash_from_a_hang_and_goes_on_after_them(here):
    for name, data in (("segv", b"S"), ("hang", b"H"), ("fine", b"ok")):
        Path(name).write_bytes(data)
    segv, hang, fine = triage.replay("mine.dying", ["segv", "hang", "fine"], timeout=0.2)
    assert (segv.kind, segv.exception) == ("crash", f"exit status {-signal.SIGSEGV}")
    assert hang.kind == "timeout" and "Timeout (" in hang.trace
    assert fine.kind == "ok"


def test_replay_reads_at_most_max_len_bytes(here):
    Path("xb").write_bytes(b"XB")
    (full,) = triage.replay("mine.crashy", ["xb"])
    (cut,) = triage.replay("mine.crashy", ["xb"], max_len=1)
    assert full.frames[-1] == "mine.crashy:second_bug"
    assert cut.frames[-1] == "mine.crashy:first_bug"
    assert cut.note == "longer than 1 bytes: replayed its first 1"


@pytest.mark.parametrize(
    ("minimized_raises", "stored"),
    [("ValueError", b"X"), ("IndexError", b"X" + b"y" * 99)],
)
def test_triage_keeps_one_reproducer_per_signature_minimized_only_if_alike(
    tmp_path, monkeypatch, minimized_raises, stored
):
    """Two artifacts with one signature are one finding; a minimized reproducer replaces
    the found one only if it fails the same way."""
    artifacts = []
    for k, size in enumerate((100, 60)):
        artifacts.append(tmp_path / f"crash-{k}")
        artifacts[-1].write_bytes(b"X" + b"y" * (size - 1))

    def replay(target, paths, **kwargs):
        return [
            triage.Outcome(
                str(p),
                "crash",
                minimized_raises if p.name.endswith(".min") else "ValueError",
                "bad input",
                ("mine.crashy:first_bug",),
            )
            for p in map(Path, paths)
        ]

    def minimize(cfg, launcher, env, path, out):
        out.write_bytes(b"X")
        return out

    monkeypatch.setattr(triage, "replay", replay)
    monkeypatch.setattr(fuzz_campaign, "minimize", minimize)
    cfg = fuzz_campaign.CampaignConfig("mine.crashy", crash_dir=tmp_path / "crashes")
    result = fuzz_campaign.triage_artifacts(cfg, artifacts, Path("launch"), {}, lambda text: None)
    (kept,) = result.stored
    assert kept.new and kept.path.read_bytes() == stored
    assert result.done == artifacts


def _fake_replay(kinds: dict[str, str], envs: list[dict]):
    """A stand-in for triage.replay: an input (or its minimized ``.min``) crashes in the
    function ``kinds[its name]`` names ("ok": it replays cleanly); the environment each
    replay was given goes to ``envs``."""

    def replay(target, paths, env=None, **kwargs):
        envs.append(env)
        outcomes = []
        for p in map(Path, paths):
            bug = kinds[p.name.removesuffix(".min")]
            frames = (f"mine.crashy:{bug}",)
            outcomes.append(
                triage.Outcome(str(p), "ok" if bug == "ok" else "crash", "E", "", frames)
            )
        return outcomes

    return replay


@pytest.mark.parametrize(
    ("known", "interrupt", "minimized", "stored"),
    [
        # A new signature is minimized; one already in the store is not (it keeps its
        # stored reproducer).
        ((), False, ["crash-a"], {"a": b"a"}),
        (("a",), False, [], {"a": b"stored a"}),
        # Ctrl-C while minimizing: that finding and every later one stored as found.
        ((), True, ["crash-a"], {"a": b"found a", "b": b"found b"}),
    ],
)
def test_triage_minimizes_new_signatures_until_interrupted(
    tmp_path, monkeypatch, known, interrupt, minimized, stored
):
    crashes = tmp_path / "crashes"
    for bug in known:
        outcome = triage.Outcome("x", "crash", "E", "", (f"mine.crashy:{bug}",))
        triage.store(outcome, f"stored {bug}".encode(), crashes, "mine.crashy")
    artifacts = []
    for bug in ("a", "ok", "b") if interrupt else ("a", "ok"):
        artifacts.append(tmp_path / f"crash-{bug}")
        artifacts[-1].write_bytes(f"found {bug}".encode())
    kinds = {f"crash-{bug}": bug for bug in ("a", "b", "ok")}
    envs: list[dict] = []
    calls = []

    def minimize(cfg, launcher, env, path, out):
        calls.append(path.name)
        if interrupt:
            raise KeyboardInterrupt
        out.write_bytes(path.name[-1:].encode())
        return out

    monkeypatch.setattr(triage, "replay", _fake_replay(kinds, envs))
    monkeypatch.setattr(fuzz_campaign, "minimize", minimize)
    cfg = fuzz_campaign.CampaignConfig("mine.crashy", crash_dir=crashes, driver="reference-1.2")
    env = {"NNFUZZ_DRIVER": "reference-1.2", "PATH": os.environ["PATH"]}
    result = fuzz_campaign.triage_artifacts(cfg, artifacts, Path("launch"), env, lambda t: None)
    assert calls == minimized
    assert {k.outcome.frames[0][-1]: k.path.read_bytes() for k in result.stored} == stored
    assert result.interrupted == interrupt
    # Every artifact is triaged, the one that did not reproduce too (the next run deletes
    # them); the replays ran on the campaign's driver.
    assert result.done == artifacts and result.unreproduced == [tmp_path / "crash-ok"]
    assert envs and all(e == {"NNFUZZ_DRIVER": "reference-1.2"} for e in envs)


MINIMIZER = """#!/bin/sh
# libFuzzer's -minimize_crash stand-in: writes $MINIMIZED to -exact_artifact_path.
for arg; do
    case $arg in -exact_artifact_path=*) printf %s "$MINIMIZED" > "${arg#*=}" ;; esac
done
"""


@pytest.mark.parametrize(
    ("minimized", "kept"), [("X", True), ("", False), ("XYZ", False), ("XYZW", False)]
)
def test_a_minimized_reproducer_counts_only_if_smaller_and_not_empty(tmp_path, minimized, kept):
    launcher = tmp_path / "launch"
    launcher.write_text(MINIMIZER)
    launcher.chmod(0o755)
    found = tmp_path / "crash-1"
    found.write_bytes(b"XYZ")
    out = tmp_path / "crash-1.min"
    cfg = fuzz_campaign.CampaignConfig("mine.crashy", minimize_seconds=5)
    env = {**os.environ, "MINIMIZED": minimized}
    assert fuzz_campaign.minimize(cfg, launcher, env, found, out) == (out if kept else None)
    assert out.read_text() == minimized


@pytest.mark.parametrize(("seconds", "deadline"), [(10.0, 10 + 2 * 3 + 120), (None, None)])
def test_the_watchdog_gives_libfuzzer_its_time_and_two_input_timeouts(
    tmp_path, monkeypatch, seconds, deadline
):
    given = []

    def run_logged(cmd, env, log, on_line, deadline=None):
        given.append(deadline)
        return 0, False, False

    monkeypatch.setattr(fuzz_campaign, "_run_logged", run_logged)
    monkeypatch.setattr(fuzz_campaign, "WATCHDOG_GRACE", 120.0)
    cfg = fuzz_campaign.CampaignConfig("model", seconds=seconds, timeout=3, work_dir=tmp_path)
    result = fuzz_campaign.run_campaign(cfg, say=lambda text: None)
    assert given == [deadline] and not result.artifacts


@pytest.mark.parametrize(
    ("returncode", "artifacts", "interrupted", "killed", "failure"),
    [
        (0, False, False, False, None),
        (1, False, False, False, "libFuzzer failed (exit status 1) without finding anything"),
        (0, False, False, True, "libFuzzer did not end after --time: killed"),
        # A crash ends an in-process libFuzzer with a non-zero status: that is a finding,
        # even one that does not reproduce, and so is a run stopped by Ctrl-C.
        (1, True, False, False, None),
        (1, False, True, False, None),
    ],
)
def test_a_libfuzzer_failure_is_a_non_zero_exit_without_artifacts(
    tmp_path, returncode, artifacts, interrupted, killed, failure
):
    from fuzz.commands.fuzz import _libfuzzer_failed

    log = tmp_path / "fuzz.log"
    log.write_text("INFO: Seed: 1\nthe last line of the log\n")
    found = [tmp_path / "crash-1"] if artifacts else []
    result = fuzz_campaign.CampaignResult(
        fuzz_campaign.Stats(), returncode, 1.0, found, [], found, log, interrupted, [], killed
    )
    why = _libfuzzer_failed(result)
    if failure is None:
        assert why is None
    else:
        assert why.startswith(failure) and why.endswith("  the last line of the log")


def test_regress_replays_the_stored_reproducers_on_the_driver(here, capsys, monkeypatch):
    Path("inputs").mkdir()
    Path("inputs/fine").write_bytes(b"ok")
    Path("cr").mkdir()
    Path("cr/crash-1").write_bytes(b"Xstored")
    envs = []
    real = triage.replay_iter

    def replay_iter(target, files, env=None, **kwargs):
        envs.append(env)
        yield from real(target, files, env=env, **kwargs)

    monkeypatch.setattr(triage, "replay_iter", replay_iter)
    argv = ["fuzz", "mine.crashy", "--regress", "inputs", "--crash-dir", "cr"]
    assert exit_status([*argv, "--driver", "reference-1.2"]) == 1
    out = capsys.readouterr().out
    assert "mine.crashy: 2 inputs replayed, 1 failed" in out
    assert f"FAILED {here / 'cr' / 'crash-1'}: crash ValueError" in out
    assert envs == [{"NNFUZZ_DRIVER": "reference-1.2"}]
