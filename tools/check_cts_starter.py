#!/usr/bin/env python3
"""Check a driver's numerics against Android's expanded CTS test models.

    python tools/check_cts_starter.py [DIR] [-k SUBSTRING] [-v] [--driver NAME]

DIR defaults to ../shared/cts-starter (a local folder, never part of the project or CI).
Each test model goes through the same path as ``nnfuzz specs run``: supported operations,
prepare and execute on the driver, then the generated-test criteria. Prints one line per
failure, a per-operation table and ``N passed, N failed, N skipped``; a test is skipped
when the driver does not support one of its operations (e.g. no kernel yet).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.registry import load_device
from randomgraph.spec.runner import FAIL, PASS, SKIP, run_test_model
from randomgraph.testmodel import TestModel


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "dir",
        nargs="?",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "cts-starter"),
    )
    p.add_argument("-k", default="", help="only files/tests whose name contains this")
    p.add_argument("-v", action="store_true", help="print passing tests too")
    p.add_argument("--driver", default="reference")
    a = p.parse_args(argv)
    files = sorted(Path(a.dir).glob("*.json.gz"))
    if not files:  # "0 passed, 0 failed" would read as a clean run
        p.error(f"no *.json.gz test files in {a.dir} (give the cts-starter folder as DIR)")
    device = load_device(a.driver)
    counts = {PASS: 0, FAIL: 0, SKIP: 0}
    per_op: dict[str, dict[str, int]] = defaultdict(lambda: {PASS: 0, FAIL: 0, SKIP: 0})
    for f in files:
        with gzip.open(f) as fh:
            tests = json.load(fh)
        for t in tests:
            if a.k and a.k not in f.name and a.k not in t["test"]:
                continue
            test = TestModel.from_json(t)
            r = run_test_model(device, test)
            counts[r.outcome] += 1
            for op in {o.name for o in test.operation_types()}:
                per_op[op][r.outcome] += 1
            if r.outcome == FAIL or a.v:
                print(f"{r.outcome.upper():7} {f.name[:-8]}::{r.name}  {r.reason}")
    print("\nper operation (passed/failed/skipped):")
    for op, c in sorted(per_op.items()):
        print(f"  {op:32} {c[PASS]:4} {c[FAIL]:4} {c[SKIP]:4}")
    print(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return 1 if counts[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
