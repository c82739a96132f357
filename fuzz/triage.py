"""Replaying inputs, crash signatures, deduplication and the reproducer store.

Replay runs a target's ``test_one_input`` on files in a *worker* process
(``python -m fuzz.triage replay TARGET FILE...``) that prints one JSON line per input.
The worker enforces the campaign's limits itself, so a hang or a runaway allocation kills
only the worker (the parent restarts it after the culprit): a per-input timer
(``faulthandler`` dumps every thread's stack, then exits) and an RSS watchdog thread
(dumps the stacks, then exits). The parent reads which file was running and the stack.

A finding's **signature** is its kind (crash, timeout, oom), the exception type and the
innermost frames in the project's packages (``module:function``, no line numbers, so an
unrelated edit does not split a known crash); a :class:`~fuzz.harness.ContractViolation`
adds its message with numbers and quoted values blanked, since the oracle raises every
violation from the same few lines. Reproducers are stored as
``corpus/crashes/<target>/<kind>-<signature hash>`` with a ``.json`` record beside them.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

PROJECT_PACKAGES = ("driver", "randomgraph", "fuzz")
SKIPPED_MODULES = ("fuzz.harness", "fuzz.triage")
"""Frames of the oracle's helpers and of the replay worker are left out of signatures:
the target line that called them says more."""
SIGNATURE_FRAMES = 3
METADATA_SUFFIXES = (".json", ".md", ".txt")
ROOT = Path(__file__).resolve().parent.parent

_RUNNING = "NNFUZZ-RUNNING "
_RESULT = "NNFUZZ-RESULT "


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What replaying one input gave."""

    path: str
    kind: str  # "ok", "crash", "timeout", "oom"
    exception: str = ""
    message: str = ""
    frames: tuple[str, ...] = ()
    trace: str = ""
    note: str = ""  # e.g. the input was longer than the target reads

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    def signature(self) -> str:
        parts = [self.kind, self.exception, *self.frames]
        if self.exception == "ContractViolation":
            parts.append(normalize_message(self.message))
        return " | ".join(p for p in parts if p)

    def signature_id(self) -> str:
        return hashlib.sha1(self.signature().encode()).hexdigest()[:12]


def normalize_message(message: str) -> str:
    """The message with numbers and quoted or bracketed values blanked."""
    text = message.split(" (the driver said:")[0]
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\([^)]*\)", "_", text)
    return re.sub(r"\d+", "N", text)[:120]


TARGET_MODULES: dict[str, str] = {}
"""File -> module name of a target module of one's own (:func:`count_as_project`): its
frames are project frames, or every bug in it had the signature "(no project frame)"."""


def count_as_project(target: str) -> None:
    """Let the frames of ``target``'s module count in signatures when it is a module of
    one's own (the registered targets are in the project already)."""
    from fuzz.targets import TARGETS, load

    if target in TARGETS:
        return
    filename = getattr(load(target), "__file__", None)
    if filename:
        TARGET_MODULES[str(Path(filename).resolve())] = target


def _module_of(filename: str) -> str | None:
    """``driver.validation`` for ``.../driver/validation.py`` when inside the project (or
    the module name of a target of one's own, :data:`TARGET_MODULES`)."""
    if TARGET_MODULES:
        own = TARGET_MODULES.get(str(Path(filename).resolve()))
        if own is not None:
            return own
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if rel.parts[0] not in PROJECT_PACKAGES or rel.suffix != ".py":
        return None
    return ".".join(rel.with_suffix("").parts)


def project_frames(frames: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """Innermost project frames (``module:function``) of (filename, function) pairs
    listed outermost first."""
    out = []
    for filename, function in frames:
        module = _module_of(filename)
        if module is None or module in SKIPPED_MODULES:
            continue
        out.append(f"{module}:{function}")
    return tuple(out[-SIGNATURE_FRAMES:])


_STACK_LINE = re.compile(r'File "([^"]+)", line \d+ in (\S+)')


def frames_from_dump(text: str) -> tuple[str, ...]:
    """Project frames of the thread running the target in a ``faulthandler`` dump
    (threads are blocks of "File ..." lines, most recent call first)."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text)
    running = [b for b in blocks if "test_one_input" in b] or blocks[-1:]
    pairs = [(m.group(1), m.group(2)) for m in _STACK_LINE.finditer(running[0])]
    return project_frames(reversed(pairs))


# ---------------------------------------------------------------------------------------
# The worker
# ---------------------------------------------------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _watch_rss(limit_mb: int) -> None:
    while True:
        time.sleep(0.05)
        if _rss_mb() > limit_mb:
            sys.stderr.write(f"NNFUZZ-OOM rss above {limit_mb} MB\n")
            faulthandler.dump_traceback(all_threads=True)
            sys.stderr.flush()
            os._exit(3)


def read_input(path: str | Path, max_len: int) -> tuple[bytes, str]:
    """At most ``max_len`` bytes of the file (libFuzzer never passes a target more), and a
    note if it had more: a huge file is not read whole."""
    with open(path, "rb") as f:
        data = f.read(max_len + 1)
    if len(data) > max_len:
        return data[:max_len], f"longer than {max_len} bytes: replayed its first {max_len}"
    return data, ""


def _worker(
    target: str,
    paths: Sequence[str],
    timeout: float,
    rss_limit_mb: int,
    max_len: int | None = None,
) -> int:
    import warnings

    from fuzz.targets import load

    warnings.simplefilter("ignore")
    module = load(target)
    count_as_project(target)
    limit = max_len or getattr(module, "MAX_LEN", 4096)
    if rss_limit_mb > 0:
        threading.Thread(target=_watch_rss, args=(rss_limit_mb,), daemon=True).start()
    for path in paths:
        data, note = read_input(path, limit)
        print(_RUNNING + path, flush=True)
        if timeout > 0:
            faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            module.test_one_input(data)
        except Exception as e:
            tb = traceback.extract_tb(e.__traceback__)
            outcome = Outcome(
                path,
                "crash",
                type(e).__name__,
                str(e)[:500],
                project_frames((f.filename, f.name) for f in tb),
                "".join(traceback.format_exception(e))[-4000:],
                note,
            )
        else:
            outcome = Outcome(path, "ok", note=note)
        finally:
            if timeout > 0:
                faulthandler.cancel_dump_traceback_later()
        print(_RESULT + json.dumps(dataclasses.asdict(outcome)), flush=True)
    return 0


def replay(
    target: str,
    paths: Sequence[str | Path],
    *,
    timeout: float = 5.0,
    rss_limit_mb: int = 2048,
    env: dict[str, str] | None = None,
    max_len: int | None = None,
) -> list[Outcome]:
    """Replay ``paths`` on ``target`` in worker processes; one outcome per path (absolute:
    the workers run in the project root, not in the caller's directory)."""
    outcomes = list(
        replay_iter(
            target, paths, timeout=timeout, rss_limit_mb=rss_limit_mb, env=env, max_len=max_len
        )
    )
    order = {str(Path(p).resolve()): k for k, p in enumerate(paths)}
    return sorted(outcomes, key=lambda o: order.get(o.path, 0))


def replay_iter(
    target: str,
    paths: Sequence[str | Path],
    *,
    timeout: float = 5.0,
    rss_limit_mb: int = 2048,
    env: dict[str, str] | None = None,
    max_len: int | None = None,
) -> Iterator[Outcome]:
    """The outcomes of :func:`replay` as each worker run ends (in no particular order), so
    that a caller interrupted midway keeps what finished. The paths go to the worker on
    its standard input: any number of them (30,000 on its command line exceeded the
    system's argument size)."""
    pending = [str(Path(p).resolve()) for p in paths]
    if pending:
        count_as_project(target)  # for the stacks of hangs read here
    while pending:
        cmd = [
            sys.executable,
            "-m",
            "fuzz.triage",
            "replay",
            target,
            f"--timeout={timeout}",
            f"--rss-limit-mb={rss_limit_mb}",
            "--stdin",
        ]
        if max_len:
            cmd.append(f"--max-len={max_len}")
        proc = subprocess.run(
            cmd,
            input="\0".join(pending),
            capture_output=True,
            text=True,
            errors="replace",
            env={**os.environ, **(env or {})},
            cwd=ROOT,
        )
        running = None
        done = set()
        for line in proc.stdout.splitlines():
            if line.startswith(_RUNNING):
                running = line[len(_RUNNING) :]
            elif line.startswith(_RESULT):
                record = json.loads(line[len(_RESULT) :])
                o = Outcome(**{**record, "frames": tuple(record["frames"])})
                yield o
                done.add(o.path)
                running = None
        if running is None:
            if proc.returncode != 0 and not done:
                raise RuntimeError(f"replay worker failed:\n{proc.stderr[-3000:]}")
            pending = [p for p in pending if p not in done]
            if pending and proc.returncode == 0:
                raise RuntimeError(f"replay worker skipped inputs:\n{proc.stderr[-3000:]}")
            continue
        # The worker died on ``running``: a timeout, the RSS watchdog, or a hard crash.
        kind = "oom" if "NNFUZZ-OOM" in proc.stderr else "timeout"
        if "Timeout (" not in proc.stderr and kind != "oom":
            kind = "crash"  # killed by a signal (a segfault in an extension, say)
        yield Outcome(
            running,
            kind,
            "" if kind != "crash" else f"exit status {proc.returncode}",
            "",
            frames_from_dump(proc.stderr),
            proc.stderr[-4000:],
        )
        done.add(running)
        pending = [p for p in pending if p not in done]


def input_files(locations: Iterable[str | Path]) -> list[Path]:
    """Every input file under ``locations`` (files or directories, not recursive),
    skipping metadata (``.json``/``.md``/``.txt``) and hidden files."""
    files: list[Path] = []
    for loc in locations:
        p = Path(loc)
        if p.is_dir():
            candidates = sorted(q for q in p.iterdir() if q.is_file())
        elif p.is_file():
            candidates = [p]
        else:
            continue
        files += [
            q
            for q in candidates
            if not q.name.startswith(".") and q.suffix not in METADATA_SUFFIXES
        ]
    return files


# ---------------------------------------------------------------------------------------
# The reproducer store
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Stored:
    path: Path
    outcome: Outcome
    new: bool
    minimized_from: int | None = None


_WARNED: set[str] = set()


def _warn_once(meta: Path, why: str) -> None:
    key = f"{meta}: {why}"
    if key not in _WARNED:
        _WARNED.add(key)
        print(f"nnfuzz fuzz: warning: skipping record {meta}: {why}", file=sys.stderr)


def known_signatures(store: Path) -> dict[str, Path]:
    """Signature -> reproducer of every record in ``store``. A damaged record (not a JSON
    object with a signature, or whose reproducer is gone) is skipped with a warning, so a
    finding with its signature is stored anew rather than reported as known."""
    known: dict[str, Path] = {}
    for meta in sorted(store.glob("*.json")):
        try:
            record = json.loads(meta.read_text())
        except (OSError, ValueError) as e:
            _warn_once(meta, f"not readable as JSON ({e})")
            continue
        sig = record.get("signature") if isinstance(record, dict) else None
        if not isinstance(sig, str):
            _warn_once(meta, "not a record (no signature)")
            continue
        reproducer = meta.with_suffix("")
        if not reproducer.is_file():
            _warn_once(meta, f"its reproducer {reproducer.name} is missing")
            continue
        known[sig] = reproducer
    return known


def store(outcome: Outcome, data: bytes, store_dir: Path, target: str, **extra) -> Stored:
    """Keep ``data`` as the reproducer of ``outcome``'s signature unless one is stored."""
    store_dir.mkdir(parents=True, exist_ok=True)
    sig = outcome.signature()
    existing = known_signatures(store_dir).get(sig)
    if existing is not None:
        return Stored(existing, outcome, new=False)
    path = store_dir / f"{outcome.kind}-{outcome.signature_id()}"
    path.write_bytes(data)
    record = {
        "target": target,
        "kind": outcome.kind,
        "signature": sig,
        "exception": outcome.exception,
        "message": outcome.message,
        "frames": list(outcome.frames),
        "size": len(data),
        "sha1": hashlib.sha1(data).hexdigest(),
        "found": time.strftime("%Y-%m-%d"),
        **extra,
        "trace": outcome.trace,
    }
    path.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return Stored(path, outcome, new=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuzz.triage")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser(
        "replay", help="replay files (directories: every input in them), one JSON line each"
    )
    r.add_argument("target")
    r.add_argument("paths", nargs="*")
    r.add_argument("--timeout", type=float, default=5.0)
    r.add_argument("--rss-limit-mb", type=int, default=2048)
    r.add_argument("--max-len", type=int, help="bytes of an input to read (default MAX_LEN)")
    r.add_argument(
        "--stdin", action="store_true", help="also read NUL-separated paths from standard input"
    )
    args = p.parse_args(argv)
    named = list(args.paths)
    if args.stdin:
        named += [q for q in sys.stdin.read().split("\0") if q]
    if not named:
        p.error("name files or directories to replay (or use --stdin)")
    paths = [str(p) for p in input_files(named)]
    return _worker(args.target, paths, args.timeout, args.rss_limit_mb, args.max_len)


if __name__ == "__main__":
    sys.exit(main())
