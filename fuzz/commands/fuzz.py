"""``nnfuzz fuzz``: coverage-guided fuzz campaigns, regression replay and corpus merging."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from pathlib import Path

from driver.isolated import MAX_TIMEOUT
from fuzz.campaign import MAX_INPUT_LEN
from fuzz.commands.arguments import at_least, duration, usage_error
from fuzz.commands.outputs import writable_directory
from fuzz.progress import HEARTBEAT_SECONDS
from randomgraph.campaign import JOBS_PER_CPU, max_jobs

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP, as every nnfuzz command

MAX_SEED = 2**32 - 1  # libFuzzer's -seed is an unsigned int

MANAGED_FLAGS = {
    "artifact_prefix": "--work (artifacts go to WORK/artifacts, reproducers to --crash-dir)",
    "exact_artifact_path": "--work (artifacts go to WORK/artifacts, reproducers to --crash-dir)",
    "max_total_time": "--time",
    "seed": "--seed",
    "fork": "--jobs",
    "jobs": "--jobs",
    "workers": "--jobs",
    "rss_limit_mb": "--rss-limit-mb",
    "malloc_limit_mb": "--rss-limit-mb",
    "timeout": "--timeout",
    "max_len": "--max-len",
    "dict": "nothing: nnfuzz passes fuzz/nnapi.dict",
    "merge": "--merge",
    "set_cover_merge": "--merge",
    "merge_control_file": "--merge",
    "minimize_crash": "--minimize-time",
    "cleanse_crash": "--minimize-time",
    "minimize_crash_internal_step": "--minimize-time",
    "print_final_stats": "nothing: nnfuzz reads the final stats",
    "close_fd_mask": "nothing: nnfuzz reads libFuzzer's output",
}
"""libFuzzer flags nnfuzz sets itself: given with --libfuzzer they overrode its own
(``-max_total_time`` outlived ``--time``, ``-artifact_prefix`` hid findings from triage)
or made libFuzzer fail (``-seed=abc`` hung it inside atheris)."""

EPILOG = """\
targets (fuzz/targets/, docs/fuzzing.md):
  model     wire bytes -> decode -> validate (-> supported operations, prepare)
  request   a prepared fixture model + wire request bytes -> validate -> execute
  execute   bytes -> valid random graph -> one mutation -> validate/prepare/execute
  cache     prepare from fuzzed compilation-cache files and token
  memory    memory-domain sequences: allocate, copy_to/copy_from, execute with tokens
  (or the dotted path of a target module of your own)

A campaign runs libFuzzer (atheris) in a child process on a working corpus
(~/.cache/nnfuzz/fuzz/TARGET/corpus unless --work) plus the seeds in corpus/TARGET,
then replays every crash/timeout/OOM, deduplicates by signature (kind, exception,
innermost project frames), minimizes and stores one reproducer per new signature in
corpus/crashes/TARGET/ (with a .json record), and prints a triage summary.

exit status:
  0    nothing found (--regress: every input replays cleanly)
  1    findings (--regress: some input crashes, hangs or runs out of memory)
  2    bad arguments (checked before fuzzing: --driver must load, --crash-dir be
       writable, --libfuzzer flags not be ones nnfuzz sets itself), a --work in use by
       another campaign, or libFuzzer failing without finding anything (the end of its
       log is shown; a child that outlives --time is killed)
  130  stopped by Ctrl-C, SIGTERM or SIGHUP before finding anything (the summary,
       triage and corpus are kept)

examples:
  nnfuzz fuzz model --time 600 --rss-limit-mb 2048 --timeout 5
  nnfuzz fuzz execute --time 3600 --jobs 2
  nnfuzz fuzz --regress                    # every target: seeds + stored reproducers
  nnfuzz fuzz model --regress my_corpus/   # a directory, plus stored reproducers
  nnfuzz fuzz model --merge                # campaign corpus -> corpus/model (new coverage)
  nnfuzz fuzz model --time 60 --libfuzzer=-use_value_profile=1"""


def register(sub) -> None:
    p = sub.add_parser(
        "fuzz",
        help="run a coverage-guided fuzz campaign (atheris/libFuzzer), replay or merge corpora",
        description="Run a fuzz target under libFuzzer (through atheris) in a child process, "
        "show progress, triage what it finds; or replay corpora and stored reproducers "
        "(--regress), or merge corpora (--merge).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="?", help="a target name (default with --regress/--merge: all)")
    p.add_argument(
        "--time",
        type=duration(zero_allowed=True),
        default=60.0,
        help="seconds to fuzz (default 60; 0: no limit)",
    )
    p.add_argument(
        "--jobs",
        type=at_least(1, maximum=max_jobs()),
        default=1,
        help="parallel fuzzing processes (libFuzzer -fork when > 1; default 1; at most "
        f"{JOBS_PER_CPU} per CPU, {max_jobs()} here)",
    )
    p.add_argument(
        "--rss-limit-mb",
        type=at_least(1),
        default=2048,
        help="memory limit per input, MB (default 2048)",
    )
    p.add_argument(
        "--timeout",
        type=at_least(1, maximum=int(MAX_TIMEOUT)),
        default=5,
        help="seconds per input before it is a hang (default 5)",
    )
    p.add_argument(
        "--max-len",
        type=at_least(1, maximum=MAX_INPUT_LEN),
        help=f"largest input, at most {MAX_INPUT_LEN} (default: the target's MAX_LEN)",
    )
    p.add_argument("--driver", help="device to fuzz: a registered name or module:callable")
    p.add_argument(
        "--work", type=work_directory, help="campaign directory (corpus, artifacts, log)"
    )
    p.add_argument(
        "--crash-dir",
        type=crash_directory,
        help="reproducer store (default corpus/crashes/TARGET)",
    )
    p.add_argument(
        "--seed", type=at_least(0, maximum=MAX_SEED), help=f"libFuzzer random seed (0..{MAX_SEED})"
    )
    p.add_argument("--no-minimize", action="store_true", help="store reproducers as found")
    p.add_argument(
        "--minimize-time",
        type=at_least(0),
        default=30,
        help="seconds to minimize each new reproducer (default 30; 0: store as found)",
    )
    p.add_argument(
        "--regress",
        nargs="*",
        metavar="DIR",
        help="replay DIRs (default: the seed corpus) and every stored reproducer; no fuzzing",
    )
    p.add_argument(
        "--merge",
        nargs="*",
        metavar="DIR",
        help="merge DIRs (default: the campaign corpus) into corpus/TARGET (new coverage only)",
    )
    p.add_argument("--list", action="store_true", help="list the targets")
    p.add_argument(
        "--libfuzzer",
        type=libfuzzer_flag,
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra libFuzzer flag, e.g. --libfuzzer=-use_value_profile=1 (repeatable)",
    )
    p.set_defaults(func=run)


def work_directory(text: str) -> Path:
    """argparse type for --work: an absolute path (libFuzzer runs in the project root, so
    a relative one named nothing there); '' is refused (it wrote into the current
    directory)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no directory")
    return Path(os.path.abspath(os.path.expanduser(text)))


def crash_directory(text: str) -> Path:
    """argparse type for --crash-dir: a directory nnfuzz can write reproducers into,
    checked before fuzzing (a regular file there lost the finding after the run)."""
    return Path(os.path.abspath(writable_directory(text)))


def libfuzzer_flag(text: str) -> str:
    """argparse type for --libfuzzer: a ``-NAME=VALUE`` flag that nnfuzz does not set
    itself (:data:`MANAGED_FLAGS`)."""
    name, eq, _ = text.partition("=")
    if not (name.startswith("-") and eq and name.strip("-")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a libFuzzer flag (-NAME=VALUE); corpus directories are "
            "--work or --merge/--regress DIRs"
        )
    managed = MANAGED_FLAGS.get(name.lstrip("-"))
    if managed is not None:
        raise argparse.ArgumentTypeError(f"{name} is set by nnfuzz: use {managed}")
    return text


def _check_driver(spec: str | None) -> None:
    """The --driver spec loads (exit status 2 with the registry's message if not), before
    any fuzzing: a driver that does not load was reported as a crash of every input."""
    if spec is None:
        return
    if not spec.strip():
        raise usage_error("nnfuzz fuzz: --driver: an empty name names no driver")
    from driver.registry import DriverLoadError, load_device

    try:
        device = load_device(spec)
    except DriverLoadError as e:
        raise usage_error(f"nnfuzz fuzz: --driver: {e}") from None
    close = getattr(device, "close", None)
    if callable(close):  # e.g. an isolated driver's process: the fuzzer loads its own
        close()


def _targets(args) -> list[str]:
    from fuzz.targets import TARGETS

    return [args.target] if args.target else list(TARGETS)


def run(args: argparse.Namespace) -> int:
    from fuzz.targets import TARGETS, UnknownTarget, load, summary

    if args.list:
        for name in TARGETS:
            print(f"{name:8} {summary(name)}")
        return EXIT_OK
    for name in _targets(args):
        try:
            load(name)
        except UnknownTarget as e:
            print(f"nnfuzz fuzz: {e}", file=sys.stderr)
            return EXIT_USAGE
        except (Exception, SystemExit) as e:  # a target module of one's own
            what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            print(f"nnfuzz fuzz: cannot import target {name}: {what}", file=sys.stderr)
            return EXIT_USAGE
    # A mistyped corpus path must not pass as "nothing to replay" in CI.
    if args.regress and (missing := [d for d in args.regress if not Path(d).exists()]):
        print(f"nnfuzz fuzz: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    if args.regress and (odd := [d for d in args.regress if not _file_or_directory(d)]):
        print(
            f"nnfuzz fuzz: --regress: not a regular file or directory: {', '.join(odd)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.crash_dir is not None and not args.target:
        print(
            "nnfuzz fuzz: --crash-dir needs a TARGET (it holds one target's reproducers)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.regress is not None and args.crash_dir is not None and not args.crash_dir.is_dir():
        print(f"nnfuzz fuzz: --crash-dir: no such directory: {args.crash_dir}", file=sys.stderr)
        return EXIT_USAGE
    _check_driver(args.driver)
    if args.merge and (missing := [d for d in args.merge if not Path(d).is_dir()]):
        print(f"nnfuzz fuzz: not a corpus directory: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    if args.regress is not None:
        return regress(args)
    if args.merge is not None:
        return merge(args)
    if not args.target:
        print("nnfuzz fuzz: name a target (or use --list, --regress, --merge)", file=sys.stderr)
        return EXIT_USAGE
    return campaign(args)


def _file_or_directory(path: str) -> bool:
    """A regular file or a directory (a FIFO would block the replay worker, a device feed
    it forever)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def _crash_dir(args, target: str) -> Path:
    from fuzz.campaign import CORPUS

    if args.crash_dir is not None and args.target:
        return args.crash_dir
    return CORPUS / "crashes" / target


def campaign(args) -> int:
    from fuzz.campaign import CampaignConfig, run_campaign
    from randomgraph.campaign import CampaignError

    extra = list(args.libfuzzer)
    cfg = CampaignConfig(
        args.target,
        seconds=args.time or None,
        jobs=args.jobs,
        rss_limit_mb=args.rss_limit_mb,
        timeout=args.timeout,
        max_len=args.max_len,
        work_dir=args.work,
        crash_dir=_crash_dir(args, args.target),
        driver=args.driver,
        seed=args.seed,
        minimize=not args.no_minimize and args.minimize_time > 0,
        minimize_seconds=args.minimize_time,
        extra=extra,
    )
    live = _StatusLine()
    try:
        result = run_campaign(cfg, say=live.say, progress=live.show)
    except CampaignError as e:
        live.clear()
        print(f"nnfuzz fuzz: {e}", file=sys.stderr)
        return EXIT_USAGE
    live.clear()
    s = result.stats
    print(
        f"{args.target}: {s.execs} runs in {result.seconds:.0f}s ({s.exec_per_s} exec/s), "
        f"cov {s.cov}, ft {s.ft}, corpus {s.corpus} inputs, peak rss {s.rss_mb} MB"
    )
    print(f"corpus: {cfg.work / 'corpus'} (merge into corpus/{args.target} with --merge)")
    code = print_triage(result, cfg)
    failed = _libfuzzer_failed(result)
    if failed and code == EXIT_OK:
        print(f"nnfuzz fuzz: {failed}", file=sys.stderr)
        return EXIT_USAGE
    if result.interrupted:
        sys.stdout.flush()  # the hint on stderr stays the last line
        print(
            "interrupted: the corpus is kept; a rerun with the same --work starts from it",
            file=sys.stderr,
        )
        # Findings outrank the interruption, as in `nnfuzz random`.
        return code if code == EXIT_FOUND else EXIT_INTERRUPTED
    return code


def _libfuzzer_failed(result) -> str | None:
    """Why libFuzzer ended without a result, with the tail of its log; None if it did not
    (it ran its course, found something, or was interrupted)."""
    if result.interrupted or result.artifacts:
        return None
    if result.killed:
        why = "libFuzzer did not end after --time: killed"
    elif result.returncode != 0:
        why = f"libFuzzer failed (exit status {result.returncode}) without finding anything"
    else:
        return None
    try:
        lines = result.log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    tail = "\n".join(f"  {line}" for line in lines[-12:])
    return f"{why}; the end of {result.log}:\n{tail}"


class _StatusLine:
    """libFuzzer's latest numbers on one rewritten line on a terminal (other messages
    print above it); elsewhere as a plain line once a minute (:mod:`fuzz.progress`)."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self.shown = False
        self.last = time.monotonic()

    def show(self, line: str) -> None:
        if self.live:
            sys.stderr.write("\r\033[K" + line[:200])
            sys.stderr.flush()
            self.shown = True
        elif time.monotonic() - self.last >= HEARTBEAT_SECONDS:
            self.last = time.monotonic()
            print(line[:200], file=sys.stderr, flush=True)

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False

    def say(self, message: str) -> None:
        self.clear()
        print(message, flush=True)


def print_triage(result, cfg) -> int:
    if not result.artifacts:
        print("triage: nothing found")
        return EXIT_OK
    if result.untriaged:
        print(
            f"triage: interrupted; {len(result.untriaged)} artifact(s) not triaged, kept in "
            f"{result.untriaged[0].parent} (a rerun with the same --work triages them)"
        )
        for path in result.untriaged:
            print(f"  untriaged: {path}")
    print(f"triage: {len(result.artifacts)} artifact(s), {len(result.stored)} signature(s)")
    for kept in result.stored:
        o = kept.outcome
        state = "NEW  " if kept.new else "known"
        where = " <- ".join(reversed(o.frames)) or "(no project frame)"
        print(f"  {state} {o.kind:7} {o.exception or '-':24} {where}")
        if o.message:
            print(f"        {o.message.splitlines()[0][:160]}")
        print(f"        reproducer: {kept.path} ({kept.path.stat().st_size} bytes)")
    for path in result.unreproduced:
        print(f"  (did not reproduce in the replay worker: {path})")
    return EXIT_FOUND if result.stored or result.untriaged else EXIT_OK


def regress(args) -> int:
    from fuzz.campaign import CORPUS
    from fuzz.triage import input_files, replay_iter

    failed = 0
    total = 0
    interrupted = False
    for target in _targets(args):
        dirs = [Path(d) for d in args.regress] if args.regress else [CORPUS / target]
        files = input_files([*dirs, _crash_dir(args, target)])
        if not files:
            print(f"{target}: no inputs")
            continue
        env = {"NNFUZZ_DRIVER": args.driver} if args.driver else None
        outcomes = []
        try:
            for o in replay_iter(
                target,
                files,
                timeout=args.timeout,
                rss_limit_mb=args.rss_limit_mb,
                env=env,
                max_len=args.max_len,
            ):
                outcomes.append(o)
        except KeyboardInterrupt:
            interrupted = True
        order = {str(p.resolve()): k for k, p in enumerate(files)}
        outcomes.sort(key=lambda o: order.get(o.path, 0))
        bad = [o for o in outcomes if o.failed]
        total += len(outcomes)
        failed += len(bad)
        of = f" of {len(files)}" if interrupted else ""
        print(f"{target}: {len(outcomes)}{of} inputs replayed, {len(bad)} failed")
        for o in bad:
            where = " <- ".join(reversed(o.frames)) or "(no project frame)"
            print(f"  FAILED {o.path}: {o.kind} {o.exception} at {where}")
            if o.message:
                print(f"         {o.message.splitlines()[0][:160]}")
        for o in outcomes:
            if o.note:
                print(f"  note: {o.path}: {o.note}")
        if interrupted:
            break
    print(f"{total - failed} passed, {failed} failed")
    if interrupted:
        sys.stdout.flush()
        print("interrupted", file=sys.stderr)
        return EXIT_FOUND if failed else EXIT_INTERRUPTED
    return EXIT_FOUND if failed else EXIT_OK


def merge(args) -> int:
    from fuzz.campaign import CORPUS, MergeError, default_work_dir
    from fuzz.campaign import merge as merge_corpora
    from randomgraph.campaign import CampaignError

    for target in _targets(args):
        work = args.work or default_work_dir(target)
        sources = [Path(d) for d in args.merge] or [work / "corpus"]
        sources = [s for s in sources if s.is_dir()]
        if not sources:
            print(f"{target}: nothing to merge")
            continue
        try:
            before, after = merge_corpora(
                target,
                CORPUS / target,
                sources,
                env_driver=args.driver,
                rss_limit_mb=args.rss_limit_mb,
                timeout=args.timeout,
                work=work,
            )
        except (CampaignError, MergeError) as e:
            print(f"nnfuzz fuzz: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{target}: corpus/{target} {before} -> {after} inputs")
    return EXIT_OK
