"""Execution speed of the detection, hashing and sampling kernels on the reference.

    python benchmarks/bench_detection_ops.py [--repeat N]

Each case is a one-operation model built and prepared once; the table shows the median
wall time of ``Executor.run`` (validation excluded), which is what a differential test
pays per execution. Budget: BOX_WITH_NMS_LIMIT on 300 boxes x 4 classes (plus
background), hard and soft NMS, under 20 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver.executor import Executor
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import output, scalar, single_op_model, tensor
from driver.validation import validate_model

F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32
rng = np.random.default_rng(0)
NMS_BUDGET_MS = 20.0


def clustered_boxes(n: int, classes: int, size: float = 512.0) -> np.ndarray:
    """Detector-like boxes: jittered copies around a few dozen objects."""
    centres = rng.uniform(0, size, (24, 2))
    pick = centres[rng.integers(0, 24, n * classes)] + rng.normal(0, 8, (n * classes, 2))
    wh = rng.uniform(20, 80, (n * classes, 2))
    boxes = np.concatenate([pick - wh / 2, pick + wh / 2], axis=1).clip(0, size)
    return boxes.astype(np.float32).reshape(n, classes * 4)


def box_nms_case(kernel: int, n: int = 300, classes: int = 5):
    scores = rng.uniform(0, 1, (n, classes)).astype(np.float32)
    return (
        O.BOX_WITH_NMS_LIMIT,
        [
            tensor(F32, scores),
            tensor(F32, clustered_boxes(n, classes)),
            tensor(I32, np.zeros(n, np.int32)),
            scalar(T.FLOAT32, 0.05),  # score threshold
            scalar(T.INT32, 100),  # max detections
            scalar(T.INT32, kernel),
            scalar(T.FLOAT32, 0.5),  # IoU threshold
            scalar(T.FLOAT32, 0.5),  # sigma
            scalar(T.FLOAT32, 0.05),  # NMS score threshold
        ],
        [output(F32, (0,)), output(F32, (0, 4)), output(I32, (0,)), output(I32, (0,))],
    )


def _roi_align(x: np.ndarray, boxes: np.ndarray, out_hw: int, scale: float):
    """ROI_ALIGN of every box on map 0: ``out_hw`` square bins, sampling ratio 2, NHWC."""
    n = boxes.shape[0]
    return (
        O.ROI_ALIGN,
        [
            tensor(F32, x),
            tensor(F32, boxes.astype(np.float32)),
            tensor(I32, np.zeros(n, np.int32)),
            scalar(T.INT32, out_hw),
            scalar(T.INT32, out_hw),
            scalar(T.FLOAT32, scale),
            scalar(T.FLOAT32, scale),
            scalar(T.INT32, 2),
            scalar(T.INT32, 2),
            scalar(T.BOOL, False),
        ],
        [output(F32, (n, out_hw, out_hw, x.shape[3]))],
    )


def roi_align_case():
    x = rng.standard_normal((1, 32, 32, 64)).astype(np.float32)
    return _roi_align(x, clustered_boxes(64, 1, size=128.0), 7, 4.0)


def roi_pooling_case():
    _, inputs, _ = roi_align_case()
    return O.ROI_POOLING, [*inputs[:7], inputs[-1]], [output(F32, (64, 7, 7, 64))]


def many_rois_case(n: int = 100_000):
    """A fuzzer's many small boxes (e.g. TILE of one box), here all distinct."""
    x = rng.standard_normal((1, 16, 16, 4)).astype(np.float32)
    corner = rng.uniform(0, 14, (n, 2))
    boxes = np.concatenate([corner, corner + rng.uniform(0, 2, (n, 2))], axis=1)
    return _roi_align(x, boxes, 2, 1.0)


def many_rois_pooling_case():
    _, inputs, outputs = many_rois_case()
    return O.ROI_POOLING, [*inputs[:7], inputs[-1]], outputs


def heatmap_case():
    hm = rng.standard_normal((100, 56, 56, 17)).astype(np.float32)
    return (
        O.HEATMAP_MAX_KEYPOINT,
        [
            tensor(F32, hm),
            tensor(F32, clustered_boxes(100, 1)),
            scalar(T.BOOL, False),
        ],
        [output(F32, (100, 17)), output(F32, (100, 17, 2))],
    )


def bbox_case():
    return (
        O.AXIS_ALIGNED_BBOX_TRANSFORM,
        [
            tensor(F32, clustered_boxes(1000, 1)),
            tensor(F32, rng.normal(0, 0.2, (1000, 4 * 81)).astype(np.float32)),
            tensor(I32, np.zeros(1000, np.int32)),
            tensor(F32, [[512.0, 512.0]]),
        ],
        [output(F32, (1000, 4 * 81))],
    )


def detection_case(regular: bool):
    anchors = np.concatenate(
        [rng.uniform(0, 1, (1917, 2)), rng.uniform(0.05, 0.4, (1917, 2))], axis=1
    ).astype(np.float32)
    return (
        O.DETECTION_POSTPROCESSING,
        [
            tensor(F32, rng.uniform(0, 1, (1, 1917, 91)).astype(np.float32) ** 4),
            tensor(F32, rng.normal(0, 1, (1, 1917, 4)).astype(np.float32)),
            tensor(F32, anchors),
            *(scalar(T.FLOAT32, v) for v in (10.0, 10.0, 5.0, 5.0)),
            scalar(T.BOOL, regular),
            scalar(T.INT32, 10),
            scalar(T.INT32, 1),
            scalar(T.INT32, 100),
            scalar(T.FLOAT32, 0.3),
            scalar(T.FLOAT32, 0.6),
            scalar(T.BOOL, False),
        ],
        [output(F32, (1, 10)), output(F32, (1, 10, 4)), output(I32, (1, 10)), output(I32, (1,))],
    )


def proposals_case():
    h = w = 16
    a = 9
    anchors = np.concatenate([-rng.uniform(8, 64, (a, 2)), rng.uniform(8, 64, (a, 2))], axis=1)
    return (
        O.GENERATE_PROPOSALS,
        [
            tensor(F32, rng.uniform(0, 1, (1, h, w, a)).astype(np.float32)),
            tensor(F32, rng.normal(0, 0.3, (1, h, w, 4 * a)).astype(np.float32)),
            tensor(F32, anchors.astype(np.float32)),
            tensor(F32, [[256.0, 256.0]]),
            scalar(T.FLOAT32, 16.0),
            scalar(T.FLOAT32, 16.0),
            scalar(T.INT32, 1000),
            scalar(T.INT32, 300),
            scalar(T.FLOAT32, 0.7),
            scalar(T.FLOAT32, 2.0),
            scalar(T.BOOL, False),
        ],
        [output(F32, (0,)), output(F32, (0, 4)), output(I32, (0,))],
    )


def lsh_case():
    return (
        O.LSH_PROJECTION,
        [
            tensor(F32, rng.standard_normal((16, 8)).astype(np.float32)),
            tensor(I32, rng.integers(0, 10000, (64, 4)).astype(np.int32)),
            tensor(F32, rng.uniform(0, 1, 64).astype(np.float32)),
            scalar(T.INT32, 2),
        ],
        [output(I32, (128,))],
    )


def multinomial_case():
    return (
        O.RANDOM_MULTINOMIAL,
        [
            tensor(F32, rng.standard_normal((8, 1000)).astype(np.float32)),
            scalar(T.INT32, 1000),
            tensor(I32, [17, 29]),
        ],
        [output(I32, (8, 1000))],
    )


CASES = [
    ("BOX_WITH_NMS_LIMIT hard, 300 boxes x 5 classes", lambda: box_nms_case(0), True),
    ("BOX_WITH_NMS_LIMIT linear, 300 x 5", lambda: box_nms_case(1), True),
    ("BOX_WITH_NMS_LIMIT gaussian, 300 x 5", lambda: box_nms_case(2), True),
    ("ROI_ALIGN 64 boxes -> 7x7x64 (32x32 map)", roi_align_case, False),
    ("ROI_POOLING 64 boxes -> 7x7x64 (32x32 map)", roi_pooling_case, False),
    ("ROI_ALIGN 100K distinct boxes -> 2x2x4 (16x16 map)", many_rois_case, False),
    ("ROI_POOLING 100K distinct boxes -> 2x2x4 (16x16 map)", many_rois_pooling_case, False),
    ("HEATMAP_MAX_KEYPOINT 100 x 56x56 x 17", heatmap_case, False),
    ("AXIS_ALIGNED_BBOX_TRANSFORM 1000 x 81 classes", bbox_case, False),
    ("DETECTION_POSTPROCESSING regular, SSD 1917x91", lambda: detection_case(True), False),
    ("DETECTION_POSTPROCESSING fast, SSD 1917x91", lambda: detection_case(False), False),
    ("GENERATE_PROPOSALS 16x16x9 anchors, top 1000/300", proposals_case, False),
    ("LSH_PROJECTION dense 16x8 bits, 64 rows", lsh_case, False),
    ("RANDOM_MULTINOMIAL 8 x 1000 classes, 1000 samples", multinomial_case, False),
]


def time_case(build, repeat: int) -> tuple[float, list[np.ndarray]]:
    op, inputs, outputs = build()
    model, feeds = single_op_model(op, inputs, outputs)
    validate_model(model)
    ex = Executor(model)
    outs = ex.run(feeds)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ex.run(feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, outs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args(argv)
    print(f"{'case':52} {'median ms':>10}  notes")
    over = False
    for name, build, budgeted in CASES:
        ms, outs = time_case(build, args.repeat)
        note = ""
        if budgeted:
            ok = ms < NMS_BUDGET_MS
            over |= not ok
            note = f"{outs[0].size} kept; budget {NMS_BUDGET_MS:.0f} ms {'ok' if ok else 'OVER'}"
        print(f"{name:52} {ms:10.2f}  {note}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
