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
import time
from collections.abc import Callable
from pathlib import Path

from fuzz import triage
from fuzz.harness import DRIVER_ENV, LAUNCHER_ENV
from fuzz.targets import load

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
DICTIONARY = Path(__file__).resolve().parent / "nnapi.dict"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


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
_FINAL = {
    "execs": re.compile(r"stat::number_of_executed_units: (\d+)"),
    "exec_per_s": re.compile(r"stat::average_exec_per_sec: (\d+)"),
    "rss_mb": re.compile(r"stat::peak_rss_mb: (\d+)"),
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


def _run_logged(
    cmd: list[str], env: dict[str, str], log: Path, on_line: Callable[[str], None]
) -> tuple[int, bool]:
    """Run ``cmd`` (its own process group), teeing its output to ``log``: (exit status,
    whether it was interrupted). Ctrl-C, SIGTERM or SIGHUP (a KeyboardInterrupt, see
    :mod:`randomgraph.stopping`) stops libFuzzer cleanly: it still prints its final stats
    and exits, and the caller gets to keep what it found."""
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
        try:
            for line in proc.stdout:
                out.write(line)
                on_line(line.rstrip("\n"))
        except KeyboardInterrupt:
            interrupted = True
            # SIGTERM, not SIGINT: Python turns SIGINT into a KeyboardInterrupt in the
            # target, while libFuzzer's SIGTERM handler prints the final stats and exits.
            with contextlib.suppress(ProcessLookupError):  # it may have just ended
                os.killpg(proc.pid, signal.SIGTERM)
            for line in proc.stdout:
                out.write(line)
                on_line(line.rstrip("\n"))  # the final stats still count
        return proc.wait(), interrupted


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
    out."""
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
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if out.is_file() and 0 < out.stat().st_size < path.stat().st_size:
        return out
    return None


def triage_artifacts(
    cfg: CampaignConfig,
    artifacts: list[Path],
    launcher: Path,
    env: dict[str, str],
    say: Callable[[str], None],
) -> tuple[list[triage.Stored], list[Path]]:
    """Replay, group by signature, minimize and store one reproducer per signature."""
    if not artifacts:
        return [], []
    extra_env = {k: env[k] for k in (DRIVER_ENV,) if k in env}
    outcomes = triage.replay(
        cfg.target, artifacts, timeout=cfg.timeout, rss_limit_mb=cfg.rss_limit_mb, env=extra_env
    )
    stored: list[triage.Stored] = []
    unreproduced: list[Path] = []
    seen: dict[str, triage.Stored] = {}
    for outcome in outcomes:
        path = Path(outcome.path)
        if not outcome.failed:
            unreproduced.append(path)
            continue
        sig = outcome.signature()
        if sig in seen:
            continue
        data = path.read_bytes()
        original = len(data)
        if cfg.minimize and sig not in triage.known_signatures(cfg.crashes):
            say(f"minimizing {path.name} ({original} bytes) ...")
            small = minimize(cfg, launcher, env, path, path.with_name(path.name + ".min"))
            if small is not None:
                (check,) = triage.replay(
                    cfg.target,
                    [small],
                    timeout=cfg.timeout,
                    rss_limit_mb=cfg.rss_limit_mb,
                    env=extra_env,
                )
                if check.signature() == sig:
                    data = small.read_bytes()
        kept = triage.store(
            outcome,
            data,
            cfg.crashes,
            cfg.target,
            original_size=original,
            driver=cfg.driver or "reference",
        )
        seen[sig] = kept
        stored.append(kept)
    return stored, unreproduced


def run_campaign(
    cfg: CampaignConfig,
    *,
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
) -> CampaignResult:
    work = cfg.work
    corpus = work / "corpus"
    artifacts = work / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    for old in collect_artifacts(artifacts):
        old.unlink()
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

    code, interrupted = _run_logged(cmd, env, log, on_line)
    with open(log, "a") as out:
        out.write(
            f"[nnfuzz] libFuzzer exited with status {code}"
            + (" (interrupted)\n" if interrupted else "\n")
        )
    seconds = time.monotonic() - started
    found = collect_artifacts(artifacts)
    stored, unreproduced = triage_artifacts(cfg, found, launcher, env, say)
    stats.corpus = max(stats.corpus, sum(1 for p in corpus.iterdir() if p.is_file()))
    return CampaignResult(stats, code, seconds, found, stored, unreproduced, log, interrupted)


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
    coverage. Returns (files before, files after)."""
    work = work or default_work_dir(target)
    launcher = write_launcher(target, work)
    cfg = CampaignConfig(target, driver=env_driver)
    env = environment(cfg, launcher)
    into.mkdir(parents=True, exist_ok=True)
    before = sum(1 for p in into.iterdir() if p.is_file())
    cmd = [
        str(launcher),
        "-merge=1",
        f"-rss_limit_mb={rss_limit_mb}",
        f"-timeout={timeout}",
        f"-merge_control_file={work / 'merge.control'}",
        str(into),
        *(str(s) for s in sources),
    ]
    _, interrupted = _run_logged(cmd, env, work / "merge.log", lambda line: None)
    if interrupted:
        # libFuzzer has stopped; the merge control file lets a rerun carry on.
        raise KeyboardInterrupt
    after = sum(1 for p in into.iterdir() if p.is_file())
    return before, after
