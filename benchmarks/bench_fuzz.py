#!/usr/bin/env python3
"""Fuzz-target throughput: executions per second under atheris, against an empty target.

    python benchmarks/bench_fuzz.py                     # model target, 30 s
    python benchmarks/bench_fuzz.py --targets model request --seconds 60
    python benchmarks/bench_fuzz.py --profile model     # where an input's time goes

Each target runs as a campaign would (full instrumentation of ``driver`` and
``randomgraph``, its custom mutator, the dictionary, its seed corpus, a fresh working
corpus) for ``--seconds``; libFuzzer's ``stat::average_exec_per_sec`` is reported with
coverage (cov/ft) and corpus size, and the ratio to an empty atheris target measured in
the same run (so a loaded machine shows as a lower baseline, not as a slower target).
The budget: the model target at >= 5,000 exec/s on the 2-core CI machine.

``--profile`` runs the target in-process (not instrumented) over its seed corpus plus
inputs its custom mutator makes, under cProfile, and prints the functions that take the
most cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

EMPTY_TARGET = """\
import sys
import atheris

def test_one_input(data):
    pass

atheris.Setup(sys.argv, test_one_input)
atheris.Fuzz()
"""


def _stats(output: str) -> dict[str, int]:
    out = {}
    for key, rx in {
        "exec/s": r"stat::average_exec_per_sec:\s+(\d+)",
        "runs": r"stat::number_of_executed_units:\s+(\d+)",
        "rss": r"stat::peak_rss_mb:\s+(\d+)",
    }.items():
        m = re.search(rx, output)
        out[key] = int(m.group(1)) if m else 0
    status = [ln for ln in output.splitlines() if ln.startswith("#") and "cov:" in ln]
    for key in ("cov", "ft", "corp"):
        m = re.search(rf"\b{key}: (\d+)", status[-1]) if status else None
        out[key] = int(m.group(1)) if m else 0
    return out


def run_libfuzzer(
    cmd: list[str], seconds: int, work: Path, env: dict[str, str], seeds: list[Path] = ()
) -> dict:
    """Run ``cmd`` (libFuzzer flags follow) on a fresh corpus plus ``seeds``."""
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    flags = [f"-max_total_time={seconds}", "-print_final_stats=1", f"-artifact_prefix={work}/"]
    proc = subprocess.run(
        [*cmd, *flags, str(corpus), *map(str, seeds)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=seconds + 600,
    )
    stats = _stats(proc.stdout + proc.stderr)
    stats["crashed"] = int(any(work.glob("crash-*")))
    return stats


def bench(targets: list[str], seconds: int) -> None:
    from fuzz.campaign import DICTIONARY
    from fuzz.targets import load

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        empty = tmpdir / "empty.py"
        empty.write_text(EMPTY_TARGET)
        base = run_libfuzzer([sys.executable, str(empty)], seconds, tmpdir / "empty", env)
        rows.append(("(empty atheris target)", base, 1.0))
        for target in targets:
            max_len = getattr(load(target), "MAX_LEN", 4096)
            work = tmpdir / target
            cmd = [
                sys.executable,
                "-m",
                "fuzz.harness",
                target,
                f"-dict={DICTIONARY}",
                f"-max_len={max_len}",
                "-rss_limit_mb=2048",
                "-timeout=5",
            ]
            s = run_libfuzzer(cmd, seconds, work, env, [ROOT / "corpus" / target])
            rows.append((target, s, s["exec/s"] / base["exec/s"] if base["exec/s"] else 0.0))
    print(f"\nfuzz target throughput ({seconds} s each, load average {os.getloadavg()[0]:.1f})")
    print(f"{'target':24} {'exec/s':>8} {'of empty':>9} {'runs':>9} {'cov':>6} {'ft':>6} "
          f"{'corpus':>7} {'rss MB':>7}")  # fmt: skip
    for name, s, ratio in rows:
        print(
            f"{name:24} {s['exec/s']:8d} {ratio:9.4f} {s['runs']:9d} {s['cov']:6d} "
            f"{s['ft']:6d} {s['corp']:7d} {s['rss']:7d}" + ("  CRASHED" if s.get("crashed") else "")
        )
    model = next((s for n, s, _ in rows if n == "model"), None)
    if model is not None:
        verdict = "meets" if model["exec/s"] >= 5000 else "BELOW"
        print(f"model target: {model['exec/s']} exec/s, {verdict} the 5,000 exec/s budget")


def profile(target: str, n_mutated: int = 2000) -> None:
    import warnings

    from fuzz.targets import load
    from fuzz.triage import input_files

    warnings.simplefilter("ignore")
    module = load(target)
    seeds = [p.read_bytes() for p in input_files([ROOT / "corpus" / target])]
    inputs = list(seeds)
    mutate = getattr(module, "custom_mutator", None)
    rng = random.Random(0)
    if mutate is not None:
        inputs += [mutate(rng.choice(seeds), 8192, rng.getrandbits(32)) for _ in range(n_mutated)]
    for data in inputs[:50]:  # warm caches (signature matching, fixtures)
        module.test_one_input(data)
    prof = cProfile.Profile()
    prof.enable()
    for data in inputs:
        module.test_one_input(data)
    prof.disable()
    text = io.StringIO()
    st = pstats.Stats(prof, stream=text)
    total = st.total_tt  # type: ignore[attr-defined]
    print(f"{target}: {len(inputs)} inputs, {total / len(inputs) * 1e6:.0f} us each (profiled)")
    st.sort_stats("cumulative").print_stats(25)
    print(text.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", nargs="+", default=["model"])
    p.add_argument("--seconds", type=int, default=30)
    p.add_argument("--profile", metavar="TARGET", help="profile TARGET in-process instead")
    args = p.parse_args(argv)
    if args.profile:
        profile(args.profile)
    else:
        bench(args.targets, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
