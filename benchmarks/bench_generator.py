"""Random-graph generation speed: graphs per second, one process.

    python benchmarks/bench_generator.py [--seconds S]

"graph" = a valid HAL model with its example inputs (what ``generate`` returns); the
"+ TestModel" column also converts it to a ``randomgraph.testmodel.TestModel`` (what a
spec dump or the differential checker reads). Reference points: NNSmith makes about 70
graphs/s on this machine; the target is >= 100 10-operation graphs/s.
"""

from __future__ import annotations

import argparse
import time

from randomgraph.generator import generate


def rate(preset: str, seconds: float, test_model: bool, **overrides) -> tuple[float, float]:
    """(graphs per second, mean main operations per graph)."""
    n = ops = 0
    seed = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or n < 5:
        g = generate(seed, preset, **overrides)
        if test_model:
            g.test_model  # noqa: B018 - the conversion is what is timed
        ops += len(g.model.main.operations)
        n += 1
        seed += 1
    return n / (time.perf_counter() - start), ops / n


CASES = [
    ("1 op, dims <= 1000 (Android single)", "single", {}),
    ("5 ops, dims <= 1000 (Android small)", "small", {}),
    ("10 ops, dims <= 1000", "small", {"num_ops": 10}),
    ("10 ops, dims <= 100", "medium", {}),
    ("10 ops, dims <= 10", "large", {"num_ops": 10}),
    ("40 ops, dims <= 10 (Android large)", "large", {}),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    args = p.parse_args()
    generate(0, "small")  # warm up the per-filter tables
    print(f"{'graphs':40} {'ops/graph':>9} {'graphs/s':>9} {'+ TestModel':>12}")
    print("-" * 74)
    for label, preset, kw in CASES:
        r, ops = rate(preset, args.seconds, False, **kw)
        r2, _ = rate(preset, args.seconds, True, **kw)
        print(f"{label:40} {ops:9.1f} {r:9.1f} {r2:12.1f}")


if __name__ == "__main__":
    main()
