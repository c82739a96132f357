#!/usr/bin/env python3
"""Mutation check: the tests must fail when a fact the code guards is broken.

    python3 tools/mutants.py                  # every mutant of tools/mutants.toml
    python3 tools/mutants.py --only ID[,ID]   # some of them
    python3 tools/mutants.py --list           # what each mutant breaks

Each mutant of the catalog (tools/mutants.toml) replaces one exact text of one file (a
rounding rule, a tolerance, a bound, a comparison) and names the tests that must then
fail. The check copies the tree (tracked and untracked, unignored files, as they are in
the working tree) to a temporary folder, applies one mutant at a time there and runs its
tests with ``CI=true``. A mutant is *killed* when its tests fail (or time out, or no
longer import), *survives* when they pass, is *not run* when no test of it ran (all
skipped, say for a missing optional package, or none collected), and is *stale* when its
text is not in its file exactly once (the code moved: update the entry). First the tests
run once on the unmutated tree (``--no-baseline`` skips it): a test that fails there would
"kill" every mutant naming it, so the check stops (exit status 2). Exit status 0 iff every
mutant is killed.

Run it by hand, like the benchmarks: about 70 minutes for the whole catalog.
Every entry was a survivor once or guards a fact the tests must hold (docs/design.md,
"Testing"). ``tests/test_mutants_catalog.py`` keeps the catalog current in CI.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "tools" / "mutants.toml"


@dataclass(frozen=True)
class Mutant:
    id: str
    guards: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


def load_catalog(path: Path = CATALOG) -> list[Mutant]:
    """The catalog's mutants, in order; a malformed entry is a ValueError naming it."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    mutants = []
    for k, entry in enumerate(data.get("mutant", [])):
        try:
            mutants.append(
                Mutant(
                    entry["id"],
                    entry["guards"],
                    entry["file"],
                    entry["old"],
                    entry["new"],
                    tuple(entry["tests"]),
                )
            )
        except KeyError as e:
            raise ValueError(f"{path}: mutant {k} ({entry.get('id', '?')}) has no {e}") from None
    return mutants


def stale_reason(mutant: Mutant, root: Path = ROOT) -> str | None:
    """Why ``mutant`` cannot be applied to the tree at ``root``, or None."""
    path = root / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    count = path.read_text(encoding="utf-8").count(mutant.old)
    if count != 1:
        return f"its text occurs {count} times in {mutant.file}"
    if mutant.old == mutant.new:
        return "it changes nothing"
    missing = [t for t in mutant.tests if not (root / t.split("::")[0]).exists()]
    if missing:
        return f"no tests {', '.join(missing)}"
    return None


def _copy_tree(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        src = ROOT / os.fsdecode(name)
        if src.is_file():  # a deleted but still tracked file is not copied
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


_MARKS = {"killed": "ok", "survived": "SURVIVED", "not run": "NOT RUN", "stale": "STALE"}
"""Each verdict of :func:`run_mutant` and how a run prints it."""

_NO_TESTS_RAN = 5
"""pytest's exit status when it collected no test."""

_TESTS_FAILED = (1, 2)
"""pytest's exit statuses for failed tests (1) and for errors while collecting them (2:
the mutant broke an import)."""


def _run_tests(tests: tuple[str, ...], tree: Path, timeout: float):
    """pytest on ``tests`` in ``tree`` (its packages first on the path), stopping at the
    first failure; raises subprocess.TimeoutExpired."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    env = {**os.environ, "CI": "true", "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)


def _first_failure(done: subprocess.CompletedProcess) -> str:
    lines = done.stdout.strip().splitlines()
    summary = lines[-1] if lines else done.stderr.strip()[-200:]
    return next((ln for ln in lines if ln.startswith(("FAILED", "ERROR"))), summary)[:160]


def baseline_failure(mutants: list[Mutant], tree: Path, timeout: float) -> str | None:
    """Why the *unmutated* ``tree`` fails the tests of ``mutants``, or None when they
    pass. A test that fails anyway would count every mutant it names as killed."""
    mutants = [m for m in mutants if stale_reason(m, tree) is None]  # reported one by one
    files = {t for m in mutants for t in m.tests if "::" not in t}
    tests = {t for m in mutants for t in m.tests if t.split("::")[0] not in files} | files
    try:
        done = _run_tests(tuple(sorted(tests)), tree, timeout)
    except subprocess.TimeoutExpired:
        return f"the tests ran past {timeout:g} s"
    if done.returncode in (0, _NO_TESTS_RAN):  # nothing to kill with: reported as not run
        return None
    return f"exit status {done.returncode}: {_first_failure(done)}"


_BASELINE_TIMEOUT = 3600
"""Seconds for the baseline: for the whole catalog, the test files it names are most of the
suite (about 10 minutes)."""


def run_mutant(mutant: Mutant, tree: Path, timeout: float) -> tuple[str, str]:
    """(verdict, detail): apply ``mutant`` in ``tree``, run its tests, restore the file."""
    reason = stale_reason(mutant, tree)
    if reason is not None:
        return "stale", reason
    path = tree / mutant.file
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
    try:
        done = _run_tests(mutant.tests, tree, timeout)
    except subprocess.TimeoutExpired:
        return "killed", f"its tests ran past {timeout:g} s"
    finally:
        path.write_text(original, encoding="utf-8")
    lines = done.stdout.strip().splitlines()
    summary = lines[-1] if lines else done.stderr.strip()[-200:]
    if done.returncode in _TESTS_FAILED:
        return "killed", _first_failure(done)
    if done.returncode == 0 and re.search(r"\b\d+ passed\b", summary):
        return "survived", summary
    # All skipped (a missing optional package), none collected, or a wrong node id: the
    # mutant was not tested, which is neither a kill nor a survival.
    return "not run", f"exit status {done.returncode}: {summary[:160]}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", default="", help="comma-separated mutant ids")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument(
        "--timeout", type=float, default=600, help="seconds for one mutant's tests (default 600)"
    )
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the first run of the tests on the unmutated tree",
    )
    a = p.parse_args(argv)
    mutants = load_catalog()
    if a.only:
        wanted = {s.strip() for s in a.only.split(",") if s.strip()}
        unknown = wanted - {m.id for m in mutants}
        if unknown:
            p.error(f"unknown mutant id(s): {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.id in wanted]
    if a.list:
        for m in mutants:
            print(f"{m.id:28} {m.file:40} {m.guards}")
        return 0
    counts = dict.fromkeys(_MARKS, 0)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nnfuzz-mutants-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        if not a.no_baseline:
            print(f"baseline: the tests of {len(mutants)} mutants, unmutated ...", flush=True)
            failure = baseline_failure(mutants, tree, _BASELINE_TIMEOUT)
            if failure is not None:
                print(
                    f"the unmutated tree fails its tests ({failure}): a mutant they name "
                    "would count as killed without being tested; fix that first",
                    file=sys.stderr,
                )
                return 2
        try:
            for k, m in enumerate(mutants, 1):
                t0 = time.monotonic()
                verdict, detail = run_mutant(m, tree, a.timeout)
                counts[verdict] += 1
                print(
                    f"[{k}/{len(mutants)}] {_MARKS[verdict]:8} {m.id:28} {time.monotonic() - t0:5.1f}s  "
                    f"{detail}",
                    flush=True,
                )
                if verdict != "killed":
                    print(f"    guards: {m.guards}", flush=True)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
    print(
        f"{counts['killed']} killed, {counts['survived']} survived, "
        f"{counts['not run']} not run, {counts['stale']} stale "
        f"({len(mutants)} mutants, {time.monotonic() - started:.0f} s)"
    )
    return 0 if counts["killed"] == len(mutants) else 1


if __name__ == "__main__":
    sys.exit(main())
