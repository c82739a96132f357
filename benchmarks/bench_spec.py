#!/usr/bin/env python3
"""Spec load+expand throughput: test models per second for a spec with many variations.

    python benchmarks/bench_spec.py

The spec below is a CONV_2D model with layout (2) x data type (4: float32, relaxed,
float16, quant8) x activation (4) variations, and the automatic lifetime variations (4):
128 test models per load. Also times the bundled corpus (corpus/specs).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from randomgraph.spec.loader import find_specs, load_spec

SPEC = """
model = Model()
i = Input("input", "TENSOR_FLOAT32", "{1, 4, 4, 2}")
f = Parameter("filter", "TENSOR_FLOAT32", "{3, 2, 2, 2}", [0.25 * k for k in range(24)])
b = Parameter("bias", "TENSOR_FLOAT32", "{3}", [0.5, -0.5, 1.0])
act = Int32Scalar("act", 0)
layout = BoolScalar("layout", False)
o = Output("output", "TENSOR_FLOAT32", "{1, 3, 3, 3}")
model.Operation("CONV_2D", i, f, b, 0, 0, 0, 0, 1, 1, act, layout).To(o)
quant8 = DataTypeConverter().Identify({
    i: ("TENSOR_QUANT8_ASYMM", 0.5, 128),
    f: ("TENSOR_QUANT8_ASYMM", 0.25, 128),
    b: ("TENSOR_INT32", 0.125, 0),
    o: ("TENSOR_QUANT8_ASYMM", 1.0, 100),
})
Example({i: [0.5 * k for k in range(32)], o: [float(k) for k in range(27)]}).AddNchw(i, o, layout).AddVariations(
    "relaxed", "float16", quant8).AddAllActivations(o, act)
"""


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "V1_2" / "conv_many.mod.py"
        p.parent.mkdir()
        p.write_text(SPEC)
        n = len(load_spec(p))
        times = []
        for _ in range(7):
            t = time.perf_counter()
            load_spec(p)
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        print(f"{'spec':34} {'test models':>11} {'median s':>9} {'models/s':>9}")
        print(f"{'conv_many (2x4x4 variations)':34} {n:11} {med:9.4f} {n / med:9.0f}")
    corpus = find_specs([Path(__file__).resolve().parents[1] / "corpus" / "specs"])
    t = time.perf_counter()
    total = sum(len(load_spec(s)) for s in corpus)
    dt = time.perf_counter() - t
    print(
        f"{'corpus/specs (' + str(len(corpus)) + ' files)':34} {total:11} {dt:9.4f} {total / dt:9.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
