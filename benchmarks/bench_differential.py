"""End-to-end differential tests per second, in one process.

    python benchmarks/bench_differential.py [--tests N] [--driver D]

One test is everything a campaign does for a seed: generate the graph (the generator's
seed sweep, Android's sizes), compute the golden results on the reference (float32 for
single quantized operations, as Android does), run the driver through its whole HAL path
(supported operations, prepare, a shared-memory request, execute, read back) under the
watchdog, and compare with the criteria. Rows:

- single operation (dims <= 1000), 5-operation graphs (dims <= 1000), 40-operation
  graphs (dims <= 10), each without and with the metamorphic relations;
- the campaign machinery around the check (journal with fsync per test, dedup), in
  process (``jobs=0``).

For scale: NNSmith's fuzz loop does about 12.6 tests/s on this machine; the targets are
30/s for single operations and 15/s for 5-operation graphs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from randomgraph.campaign import CampaignSettings, preset_groups, run_campaign
from randomgraph.differential import CheckOptions, DifferentialChecker, Outcome
from randomgraph.generator import PRESETS, generate
from randomgraph.metamorphic import RELATIONS


def rate(preset: str, n: int, driver: str, metamorphic: bool) -> tuple[float, float, dict]:
    """(tests/s, share of time in generation, outcome counts) over seeds 0..n-1."""
    checker = DifferentialChecker(
        driver, CheckOptions(metamorphic=RELATIONS if metamorphic else ())
    )
    config = PRESETS[preset]
    checker.check(generate(10_000, config).test_model)  # warm-up (imports, caches)
    counts: dict[str, int] = {}
    gen_time = 0.0
    t0 = time.perf_counter()
    for seed in range(n):
        g0 = time.perf_counter()
        test = generate(seed, config).test_model
        gen_time += time.perf_counter() - g0
        r = checker.check(test)
        counts[r.outcome.value] = counts.get(r.outcome.value, 0) + 1
    elapsed = time.perf_counter() - t0
    return n / elapsed, gen_time / elapsed, counts


def campaign_rate(n: int, driver: str) -> float:
    groups = preset_groups("single")
    seeds = range(max(1, n // len(groups)))
    with tempfile.TemporaryDirectory() as out:
        s = CampaignSettings(groups=groups, out=out, seeds=seeds, driver=driver, jobs=0)
        t0 = time.perf_counter()
        summary = run_campaign(s, report=False)
        return summary.ran / (time.perf_counter() - t0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=300, help="tests per row (default 300)")
    p.add_argument("--driver", default="reference")
    args = p.parse_args()
    n = args.tests
    rows = []
    for preset, label, count in (
        ("single", "single operation", n),
        ("small", "5-operation graphs", n),
        ("large", "40-operation graphs", max(20, n // 5)),
    ):
        for meta in (False, True):
            r, gen_share, counts = rate(preset, count, args.driver, meta)
            failed = sum(v for k, v in counts.items() if Outcome(k).failed)
            rows.append(
                (
                    label + (" + metamorphic" if meta else ""),
                    count,
                    f"{r:.1f}",
                    f"{100 * gen_share:.0f}%",
                    f"{counts.get('pass', 0)}/{counts.get('skipped', 0)}/{failed}",
                )
            )
    rows.append(
        (
            "campaign, single preset (journal, dedup)",
            n,
            f"{campaign_rate(n, args.driver):.1f}",
            "",
            "",
        )
    )
    header = ("differential tests", "tests", "tests/s", "generation", "pass/skip/fail")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print(f"driver: {args.driver}; one process; NNSmith's fuzz loop: ~12.6 tests/s")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
