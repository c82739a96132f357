"""Fuzz campaigns: libFuzzer (through atheris) in a child process, then triage.

    result = run_campaign(CampaignConfig("model", seconds=600, jobs=2))

A campaign writes a launcher (``<work>/launch``: the target under this interpreter, so
libFuzzer can re-run it for ``-fork``/``-jobs`` and minimization), runs libFuzzer on a
working corpus (``<work>/corpus``, written) plus the checked-in seeds
(``corpus/<target>``, read only), streams its status lines to a one-line progress
display and to ``<work>/fuzz.log``, and at the end replays every artifact (crash,
timeout, OOM) in a replay worker, groups them by signature (:mod:`fuzz.triage`),
minimizes one reproducer per new signature with libFuzzer's ``-minimize_crash`` (kept
only if it still has the same signature) and stores it in ``corpus/crashes/<target>``.

With ``jobs == 1`` libFuzzer runs in-process and stops at its first finding (its usual
behaviour); with ``jobs > 1`` it runs in fork mode (``-fork=N``) and ignores crashes,
timeouts and OOMs so a campaign collects all of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from driver import SINGLE_THREADED_BLAS
from fuzz import triage
from fuzz.harness import DRIVER_ENV, LAUNCHER_ENV
from fuzz.targets import load

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
DICTIONARY = Path(__file__).resolve().parent / "nnapi.dict"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


WATCHDOG_GRACE = 120.0
"""Seconds past ``--time`` (plus twice the per-input timeout) after which a libFuzzer
child that has not ended is killed: a child that failed inside ``atheris.Fuzz()`` used to
hang the campaign forever."""

TRIAGED = ".triaged"
"""``<work>/artifacts/.triaged``: names of the artifacts already triaged (stored, known or
not reproduced). The next run deletes only those; any other artifact (a run interrupted
before triage ended) is triaged again, never lost."""

MAX_INPUT_LEN = 1 << 20
"""Largest ``--max-len``: 64 times the largest target's MAX_LEN. libFuzzer sizes its
buffers by it, so a huge value runs out of memory at once and reports that as a finding."""


def default_work_dir(target: str) -> Path:
    """Outside the checkout, so a campaign's corpus never lands in a commit by accident."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nnfuzz" / "fuzz" / target.replace("/", "_")


@dataclasses.dataclass
class CampaignConfig:
    target: str
    seconds: float | None = 60.0  # None: until interrupted
    jobs: int = 1
    rss_limit_mb: int = 2048
    timeout: int = 5
    max_len: int | None = None  # default: the target's MAX_LEN
    work_dir: Path | None = None
    seed_dirs: list[Path] | None = None  # default: corpus/<target>
    crash_dir: Path | None = None  # default: corpus/crashes/<target>
    dictionary: Path | None = DICTIONARY
    driver: str | None = None
    seed: int | None = None
    minimize: bool = True
    minimize_seconds: int = 30
    extra: list[str] = dataclasses.field(default_factory=list)

    @property
    def work(self) -> Path:
        return self.work_dir or default_work_dir(self.target)

    @property
    def seeds(self) -> list[Path]:
        if self.seed_dirs is not None:
            return self.seed_dirs
        return [CORPUS / self.target] if (CORPUS / self.target).is_dir() else []

    @property
    def crashes(self) -> Path:
        return self.crash_dir or CORPUS / "crashes" / self.target


@dataclasses.dataclass
class Stats:
    """The latest libFuzzer status line's numbers, and the final ones."""

    execs: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    exec_per_s: int = 0
    rss_mb: int = 0
    crashes: int = 0
    timeouts: int = 0
    ooms: int = 0

    def line(self) -> str:
        found = ""
        if self.crashes or self.timeouts or self.ooms:
            found = f" crash/timeout/oom {self.crashes}/{self.timeouts}/{self.ooms}"
        return (
            f"#{self.execs} cov {self.cov} ft {self.ft} corpus {self.corpus} "
            f"exec/s {self.exec_per_s} rss {self.rss_mb}MB{found}"
        )


_NUM = {
    "execs": re.compile(r"^#(\d+)"),
    "cov": re.compile(r"\bcov: (\d+)"),
    "ft": re.compile(r"\bft: (\d+)"),
    "corpus": re.compile(r"\bcorp: (\d+)"),
    "exec_per_s": re.compile(r"exec/s:? (\d+)"),
    "rss_mb": re.compile(r"\brss: (\d+)Mb"),
}
_FORK_FOUND = re.compile(r"oom/timeout/crash: (\d+)/(\d+)/(\d+)")
_FINAL = {  # libFuzzer aligns the values with spaces ("stat::peak_rss_mb:              40")
    "execs": re.compile(r"stat::number_of_executed_units:\s+(\d+)"),
    "exec_per_s": re.compile(r"stat::average_exec_per_sec:\s+(\d+)"),
    "rss_mb": re.compile(r"stat::peak_rss_mb:\s+(\d+)"),
}


def parse_line(line: str, stats: Stats) -> bool:
    """Update ``stats`` from one libFuzzer output line; True if it was a status line."""
    for name, rx in _FINAL.items():
        m = rx.search(line)
        if m:
            # In fork mode the parent's own final stats are zeros: keep the status lines'.
            if int(m.group(1)) or not getattr(stats, name):
                setattr(stats, name, int(m.group(1)))
            return True
    if not line.startswith("#") or "cov:" not in line:
        return False
    for name, rx in _NUM.items():
        m = rx.search(line)
        if m:
            setattr(stats, name, int(m.group(1)))
    m = _FORK_FOUND.search(line)
    if m:
        stats.ooms, stats.timeouts, stats.crashes = (int(g) for g in m.groups())
    return True


@dataclasses.dataclass
class CampaignResult:
    stats: Stats
    returncode: int
    seconds: float
    artifacts: list[Path]
    stored: list[triage.Stored]
    unreproduced: list[Path]
    log: Path
    interrupted: bool = False  # stopped by Ctrl-C, SIGTERM or SIGHUP before its time
    untriaged: list[Path] = dataclasses.field(default_factory=list)  # interrupted triage
    killed: bool = False  # did not end after its time: the watchdog killed it

    @property
    def found(self) -> bool:
        return bool(self.stored)


# ---------------------------------------------------------------------------------------
# Running libFuzzer
# ---------------------------------------------------------------------------------------


def write_launcher(target: str, work: Path) -> Path:
    """``<work>/launch``: runs the target under this interpreter with libFuzzer's
    arguments (what libFuzzer re-executes for fork mode and minimization)."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "launch"
    cmd = [sys.executable, "-m", "fuzz.harness", target]
    path.write_text(
        "#!/bin/sh\n"
        "# Written by nnfuzz fuzz: runs the fuzz target under libFuzzer (atheris).\n"
        f"cd {shlex.quote(str(ROOT))} || exit 1\n"
        f'exec {" ".join(shlex.quote(c) for c in cmd)} "$@"\n'
    )
    path.chmod(0o755)
    return path


def environment(cfg: CampaignConfig, launcher: Path) -> dict[str, str]:
    env = {**os.environ, LAUNCHER_ENV: str(launcher)}
    if cfg.jobs > 1:  # libFuzzer's -fork=N: N children at once (a user's setting wins)
        env = {**SINGLE_THREADED_BLAS, **env}
    if cfg.driver:
        env[DRIVER_ENV] = cfg.driver
    # The checkout first, so the launcher runs this tree's code even if another
    # nnfuzz is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


def libfuzzer_args(cfg: CampaignConfig, artifacts: Path, corpus: Path) -> list[str]:
    max_len = cfg.max_len or getattr(load(cfg.target), "MAX_LEN", 4096)
    args = [
        f"-rss_limit_mb={cfg.rss_limit_mb}",
        f"-timeout={cfg.timeout}",
        f"-max_len={max_len}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
    ]
    if cfg.seconds is not None:
        args.append(f"-max_total_time={max(1, int(cfg.seconds))}")
    if cfg.dictionary is not None and cfg.dictionary.is_file():
        args.append(f"-dict={cfg.dictionary}")
    if cfg.seed is not None:
        args.append(f"-seed={cfg.seed}")
    if cfg.jobs > 1:
        args += [f"-fork={cfg.jobs}", "-ignore_crashes=1", "-ignore_timeouts=1", "-ignore_ooms=1"]
    args += cfg.extra
    return [*args, str(corpus), *(str(d) for d in cfg.seeds)]


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # it may have ended
        os.killpg(pid, sig)


def _run_logged(
    cmd: list[str],
    env: dict[str, str],
    log: Path,
    on_line: Callable[[str], None],
    deadline: float | None = None,
) -> tuple[int, bool, bool]:
    """Run ``cmd`` (its own process group), teeing its output to ``log``: (exit status,
    whether it was interrupted, whether the watchdog killed it). Ctrl-C, SIGTERM or
    SIGHUP (a KeyboardInterrupt, see :mod:`randomgraph.stopping`) stops libFuzzer
    cleanly: it still prints its final stats and exits, and the caller gets to keep what
    it found. A child still running ``deadline`` seconds after it started is killed (its
    whole process group): a campaign always ends."""
    with open(log, "a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        assert proc.stdout is not None
        interrupted = False
        killed = threading.Event()

        def watchdog() -> None:
            killed.set()
            _kill_group(proc.pid, signal.SIGTERM)
            time.sleep(5)
            _kill_group(proc.pid, signal.SIGKILL)

        timer = None
        if deadline is not None:
            timer = threading.Timer(deadline, watchdog)
            timer.daemon = True
            timer.start()
        try:
            for line in proc.stdout:
                out.write(line)
                on_line(line.rstrip("\n"))
        except KeyboardInterrupt:
            interrupted = True
            # SIGTERM, not SIGINT: Python turns SIGINT into a KeyboardInterrupt in the
            # target, while libFuzzer's SIGTERM handler prints the final stats and exits.
            _kill_group(proc.pid, signal.SIGTERM)
            for line in proc.stdout:
                out.write(line)
                on_line(line.rstrip("\n"))  # the final stats still count
        finally:
            code = proc.wait()
            if timer is not None:
                timer.cancel()
        if killed.is_set():
            out.write(f"[nnfuzz] killed: still running {deadline:.0f}s after it started\n")
        return code, interrupted, killed.is_set()


def collect_artifacts(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith(ARTIFACT_PREFIXES))


def minimize(
    cfg: CampaignConfig, launcher: Path, env: dict[str, str], path: Path, out: Path
) -> Path | None:
    """libFuzzer's ``-minimize_crash`` on ``path`` into ``out``, for at most
    ``cfg.minimize_seconds`` of wall-clock time (libFuzzer's own loop re-runs the target
    until nothing smaller crashes, which can take long). None if nothing smaller came
    out. Interrupted, it kills the minimizer (its own process group, so Ctrl-C does not
    reach it) before the KeyboardInterrupt goes on."""
    budget = max(1, cfg.minimize_seconds)
    cmd = [
        str(launcher),
        "-minimize_crash=1",
        f"-max_total_time={budget}",
        f"-timeout={cfg.timeout}",
        f"-rss_limit_mb={cfg.rss_limit_mb}",
        f"-exact_artifact_path={out}",
        str(path),
    ]
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
    except BaseException:  # Ctrl-C, SIGTERM: no orphaned minimizer
        _kill_group(proc.pid)
        proc.wait()
        raise
    if out.is_file() and 0 < out.stat().st_size < path.stat().st_size:
        return out
    return None


@dataclasses.dataclass
class Triage:
    stored: list[triage.Stored] = dataclasses.field(default_factory=list)
    unreproduced: list[Path] = dataclasses.field(default_factory=list)
    done: list[Path] = dataclasses.field(default_factory=list)  # triaged artifacts
    interrupted: bool = False


def triage_artifacts(
    cfg: CampaignConfig,
    artifacts: list[Path],
    launcher: Path,
    env: dict[str, str],
    say: Callable[[str], None],
) -> Triage:
    """Replay, group by signature, minimize and store one reproducer per signature.
    Interrupted while minimizing, the input is stored as found, and so is every other
    replayed one; interrupted while replaying, nothing is triaged (the artifacts stay
    for the next run). Either way it returns what it has, with ``interrupted`` set."""
    result = Triage()
    if not artifacts:
        return result
    extra_env = {k: env[k] for k in (DRIVER_ENV,) if k in env}
    limits = {"timeout": cfg.timeout, "rss_limit_mb": cfg.rss_limit_mb, "max_len": cfg.max_len}
    try:
        outcomes = triage.replay(cfg.target, artifacts, env=extra_env, **limits)
    except KeyboardInterrupt:
        result.interrupted = True
        return result
    seen: dict[str, triage.Stored] = {}
    minimizing = cfg.minimize and cfg.minimize_seconds > 0
    for outcome in outcomes:
        path = Path(outcome.path)
        if not outcome.failed:
            result.unreproduced.append(path)
            result.done.append(path)
            continue
        sig = outcome.signature()
        if sig in seen:
            result.done.append(path)
            continue
        data = path.read_bytes()
        original = len(data)
        if minimizing and sig not in triage.known_signatures(cfg.crashes):
            say(f"minimizing {path.name} ({original} bytes) ...")
            try:
                small = minimize(cfg, launcher, env, path, path.with_name(path.name + ".min"))
                if small is not None:
                    (check,) = triage.replay(cfg.target, [small], env=extra_env, **limits)
                    if check.signature() == sig:
                        data = small.read_bytes()
            except KeyboardInterrupt:
                # Keep the finding as found; store the rest without minimizing.
                result.interrupted = True
                minimizing = False
                say("interrupted: storing the reproducers as found")
        kept = triage.store(
            outcome,
            data,
            cfg.crashes,
            cfg.target,
            original_size=original,
            driver=cfg.driver or "reference",
        )
        seen[sig] = kept
        result.stored.append(kept)
        result.done.append(path)
    return result


def _clear_triaged(artifacts: Path) -> None:
    """Delete the artifacts an earlier run triaged; keep any other (see :data:`TRIAGED`)."""
    marker = artifacts / TRIAGED
    try:
        done = set(marker.read_text().split("\n"))
    except OSError:
        done = set()
    for old in collect_artifacts(artifacts):
        if old.name in done or old.name.endswith(".min"):
            old.unlink()
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()


def run_campaign(
    cfg: CampaignConfig,
    *,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
) -> CampaignResult:
    """Run a campaign in ``cfg.work``, which it holds locked
    (:func:`randomgraph.campaign.campaign_lock`: another campaign there raises
    :class:`~randomgraph.campaign.CampaignError`)."""
    from randomgraph.campaign import campaign_lock

    (cfg.work / "corpus").mkdir(parents=True, exist_ok=True)  # an OSError names the path
    with campaign_lock(cfg.work, "--work"):
        return _run_campaign(cfg, say, progress)


def _run_campaign(
    cfg: CampaignConfig,
    say: Callable[[str], None],
    progress: Callable[[str], None] | None,
) -> CampaignResult:
    work = cfg.work
    corpus = work / "corpus"
    artifacts = work / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    _clear_triaged(artifacts)
    leftover = collect_artifacts(artifacts)
    if leftover:
        say(f"{len(leftover)} artifact(s) of an earlier run not triaged yet: triaging them too")
    launcher = write_launcher(cfg.target, work)
    env = environment(cfg, launcher)
    log = work / "fuzz.log"
    stats = Stats()
    cmd = [str(launcher), *libfuzzer_args(cfg, artifacts, corpus)]
    say(f"fuzzing {cfg.target}: {shlex.join(cmd)}")
    say(f"log: {log}")
    started = time.monotonic()
    last = 0.0

    def on_line(line: str) -> None:
        nonlocal last
        if parse_line(line, stats) and progress is not None:
            now = time.monotonic()
            if now - last > 0.5:
                last = now
                progress(f"{cfg.target} {now - started:5.0f}s {stats.line()}")
        elif "Uncaught Python exception" in line or "ERROR: libFuzzer" in line:
            say(line.strip())

    deadline = None
    if cfg.seconds is not None:
        deadline = cfg.seconds + 2 * cfg.timeout + WATCHDOG_GRACE
    code, interrupted, killed = _run_logged(cmd, env, log, on_line, deadline)
    with open(log, "a") as out:
        out.write(
            f"[nnfuzz] libFuzzer exited with status {code}"
            + (" (interrupted)\n" if interrupted else "\n")
        )
    seconds = time.monotonic() - started
    found = collect_artifacts(artifacts)
    found = [p for p in found if not p.name.endswith(".min")]
    t = triage_artifacts(cfg, found, launcher, env, say)
    with open(artifacts / TRIAGED, "a") as marker:
        marker.writelines(f"{p.name}\n" for p in t.done)
    done = set(t.done)
    untriaged = [p for p in found if p not in done]
    stats.corpus = max(stats.corpus, sum(1 for p in corpus.iterdir() if p.is_file()))
    return CampaignResult(
        stats,
        code,
        seconds,
        found,
        t.stored,
        t.unreproduced,
        log,
        interrupted or t.interrupted,
        untriaged,
        killed,
    )


class MergeError(Exception):
    """libFuzzer's merge failed."""


def merge(
    target: str,
    into: Path,
    sources: list[Path],
    *,
    env_driver: str | None = None,
    rss_limit_mb: int = 2048,
    timeout: int = 5,
    work: Path | None = None,
) -> tuple[int, int]:
    """libFuzzer ``-merge=1``: add to ``into`` the inputs of ``sources`` that add
    coverage. Returns (files before, files after). Raises :class:`MergeError` (with the end
    of libFuzzer's log) if libFuzzer fails: a failed merge passed as one that added
    nothing."""
    from randomgraph.campaign import campaign_lock

    work = work or default_work_dir(target)
    with campaign_lock(work, "--work"):
        launcher = write_launcher(target, work)
        cfg = CampaignConfig(target, driver=env_driver)
        env = environment(cfg, launcher)
        into.mkdir(parents=True, exist_ok=True)
        before = sum(1 for p in into.iterdir() if p.is_file())
        # A fresh control file every time: libFuzzer resumes from an existing one, so a
        # stale one (an earlier merge of other sources) copied duplicates into ``into``.
        fd, control = tempfile.mkstemp(prefix="merge-", suffix=".control", dir=work)
        os.close(fd)
        os.unlink(control)  # libFuzzer creates it; an empty one is not "fresh" to it
        cmd = [
            str(launcher),
            "-merge=1",
            f"-rss_limit_mb={rss_limit_mb}",
            f"-timeout={timeout}",
            f"-merge_control_file={control}",
            # Absolute: libFuzzer runs in the project root, not in the caller's directory.
            os.path.abspath(into),
            *(os.path.abspath(s) for s in sources),
        ]
        try:
            tail: list[str] = []

            def keep(line: str) -> None:
                tail.append(line)
                del tail[:-12]

            code, interrupted, _ = _run_logged(cmd, env, work / "merge.log", keep)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(control)
        if interrupted:
            raise KeyboardInterrupt
        if code != 0:
            lines = "\n".join(f"  {line}" for line in tail)
            raise MergeError(
                f"libFuzzer's merge failed (exit status {code}); the end of "
                f"{work / 'merge.log'}:\n{lines}"
            )
        after = sum(1 for p in into.iterdir() if p.is_file())
        return before, after
