"""Valid one-operation examples for the detection family (see examples.py).

Expected values are derived by hand in the comments: the feature map ``RAMP`` holds
f(y, x) = 4y + x, which bilinear sampling reproduces exactly away from the clamped last
row/column; boxes are chosen so that IoUs are simple fractions.
"""

import math

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
Q16A, Q16S = T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM
I32 = T.TENSOR_INT32

RAMP = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)  # f(y, x) = 4y + x


def _fscalar(t, v):
    return scalar(T.FLOAT16 if t == F16 else T.FLOAT32, v)


def _q8(t, values, scale, zp_unsigned):
    """Quantized tensor of real ``values`` for type ``t``; the signed variant uses the
    unsigned zero point - 128, so its integers are the unsigned ones - 128."""
    zp = zp_unsigned - (128 if t == Q8S else 0)
    q = np.round(np.asarray(values, dtype=np.float64) / scale) + zp
    return tensor(t, q, scale=scale, zero_point=zp)


def _q8_out(t, dims, scale, zp_unsigned):
    return output(t, dims, scale=scale, zero_point=zp_unsigned - (128 if t == Q8S else 0))


def _shift(t, values):
    return np.asarray(values) - (128 if t == Q8S else 0)


EXAMPLES = []

# --- ROI_ALIGN -----------------------------------------------------------------------
# Box [0, 0, 4, 4] on RAMP, 2x2 output, 2x2 samples per bin: sample coordinates 0.5, 1.5
# (bin 0) and 2.5, 3.5 -> 3 (clamped to the last column, weight 0 for the outside
# neighbour) (bin 1). Means: x = 1 and 2.75, y likewise -> 4y + x.
ALIGN = [[5.0, 6.75], [12.0, 13.75]]


def _align_args(x, rois, roi_type, **roi_kw):
    return [
        x,
        tensor(roi_type, rois, **roi_kw),
        tensor(I32, [0]),
        scalar(T.INT32, 2),
        scalar(T.INT32, 2),
        *(_fscalar(x.type if x.type == F16 else F32, 1.0) for _ in range(2)),
        scalar(T.INT32, 2),
        scalar(T.INT32, 2),
        scalar(T.BOOL, False),
    ]


for t in (F32, F16):
    EXAMPLES.append(
        example(
            f"roi_align_{'float32' if t == F32 else 'float16'}",
            O.ROI_ALIGN,
            _align_args(tensor(t, RAMP), [[0, 0, 4, 4]], t),
            [output(t, (1, 2, 2, 1))],
            expected=[np.array(ALIGN).reshape(1, 2, 2, 1)],
            atol=1e-2 if t == F16 else 0.0,
        )
    )
# Quantized: input scale 1 (zero point 10), output scale 0.25. Bilinear weights are
# integers in 1/255 steps (0.25 -> 64, 0.5 -> 128, 1 -> 255), so each bin's sum is
# (sum of weighted samples) / 255 / 4 / 0.25, e.g. bin (0, 0): 64 * (10 + 14 + 26 + 30)
# = 5120 -> 5120 / 255 = 20.08 -> 20; the others give 6912, 12288, 14065 -> 27, 48, 55.
for t in (Q8, Q8S):
    EXAMPLES.append(
        example(
            f"roi_align_{'quant8' if t == Q8 else 'quant8_signed'}",
            O.ROI_ALIGN,
            _align_args(_q8(t, RAMP, 1.0, 10), [[0, 0, 32, 32]], Q16A, scale=0.125),
            [_q8_out(t, (1, 2, 2, 1), 0.25, 0)],
            expected=[_shift(t, [20, 27, 48, 55]).reshape(1, 2, 2, 1)],
        )
    )

# --- ROI_POOLING ---------------------------------------------------------------------
# Box [0, 0, 3, 3] covers 4x4 cells (end inclusive); 2x2 bins of 2x2 cells: the max of
# each block of RAMP is its bottom-right cell.
POOL = [5.0, 7.0, 13.0, 15.0]


def _pool_args(x, rois, roi_type, stride_type, **roi_kw):
    return [
        x,
        tensor(roi_type, rois, **roi_kw),
        tensor(I32, [0]),
        scalar(T.INT32, 2),
        scalar(T.INT32, 2),
        _fscalar(stride_type, 1.0),
        _fscalar(stride_type, 1.0),
        scalar(T.BOOL, False),
    ]


for t in (F32, F16):
    EXAMPLES.append(
        example(
            f"roi_pooling_{'float32' if t == F32 else 'float16'}",
            O.ROI_POOLING,
            _pool_args(tensor(t, RAMP), [[0, 0, 3, 3]], t, t),
            [output(t, (1, 2, 2, 1))],
            expected=[np.array(POOL).reshape(1, 2, 2, 1)],
        )
    )
for t in (Q8, Q8S):
    EXAMPLES.append(
        example(
            f"roi_pooling_{'quant8' if t == Q8 else 'quant8_signed'}",
            O.ROI_POOLING,
            _pool_args(_q8(t, RAMP, 1.0, 10), [[0, 0, 24, 24]], Q16A, F32, scale=0.125),
            [_q8_out(t, (1, 2, 2, 1), 1.0, 10)],
            expected=[_shift(t, [15, 17, 23, 25]).reshape(1, 2, 2, 1)],
        )
    )

# --- HEATMAP_MAX_KEYPOINT ------------------------------------------------------------
# 3x3 heatmap with its maximum 2 at the centre, 1 to the right: the parabola through
# (-1, 0), (0, 2), (1, 1) peaks at t = 1/6 with value 2 + 1/12 - 1/24 = 2.0416667;
# vertically it is symmetric. Box [1, 2, 7, 5]: x = (1 + 1/6 + 0.5) / 3 * 6 + 1,
# y = (1 + 0.5) / 3 * 3 + 2.
HEAT = np.array([[0, 0, 0], [0, 2, 1], [0, 0, 0]], dtype=np.float32).reshape(1, 3, 3, 1)
HEAT_SCORE = 2.0 + 1 / 12 - 1 / 24
HEAT_XY = [(1 + 1 / 6 + 0.5) / 3 * 6 + 1, 3.5]

for t in (F32, F16):
    EXAMPLES.append(
        example(
            f"heatmap_max_keypoint_{'float32' if t == F32 else 'float16'}",
            O.HEATMAP_MAX_KEYPOINT,
            [tensor(t, HEAT), tensor(t, [[1, 2, 7, 5]]), scalar(T.BOOL, False)],
            [output(t, (1, 1)), output(t, (1, 1, 2))],
            expected=[[[HEAT_SCORE]], [[HEAT_XY]]],
            atol=1e-2 if t == F16 else 0.0,
        )
    )
# A nearly flat peak: 1/64 at the centre, 1/128 to the right, 0 elsewhere. Hessian
# a00 = 0 - 2/64 + 1/128 = -3/128, a11 = -2/64 = -1/32, a01 = 0: det = 3/4096 = 7.3e-4.
# Android's solveForDelta calls it singular when |det| < atol + rtol * a00 * a11, with
# atol = rtol = 1e-5 for float32 but 1e-3 for float16 (HeatmapMaxKeypoint.cpp execute).
# Float32: b0 = -(1/128) / 2 = -1/256, delta x = a11 * b0 / det = 1/6, score
# 1/64 + 1/(256 * 6) - (3/128) / 36 / 2 = 1/64 + 1/3072; box [0, 0, 3, 3] of a 3x3 map:
# x = 1 + 1/6 + 0.5, y = 1.5. Float16: 7.3e-4 < 1e-3, no correction: 1/64 at (1.5, 1.5).
FLAT_HEAT = np.array([[0, 0, 0], [0, 1 / 64, 1 / 128], [0, 0, 0]], np.float32).reshape(1, 3, 3, 1)
for t, score, xy in (
    (F32, 1 / 64 + 1 / 3072, [1 + 1 / 6 + 0.5, 1.5]),
    (F16, 1 / 64, [1.5, 1.5]),
):
    EXAMPLES.append(
        example(
            f"heatmap_max_keypoint_near_singular_{'float32' if t == F32 else 'float16'}",
            O.HEATMAP_MAX_KEYPOINT,
            [tensor(t, FLAT_HEAT), tensor(t, [[0, 0, 3, 3]]), scalar(T.BOOL, False)],
            [output(t, (1, 1)), output(t, (1, 1, 2))],
            expected=[[[score]], [[xy]]],
            atol=1e-4 if t == F16 else 0.0,
        )
    )
# Quantized: heatmap scale 0.5 (zero point 100); score scale 0.01 -> 204.17 -> 204;
# keypoints in 1/8: 4.3333 / 0.125 = 34.67 -> 35, 3.5 / 0.125 = 28.
for t in (Q8, Q8S):
    EXAMPLES.append(
        example(
            f"heatmap_max_keypoint_{'quant8' if t == Q8 else 'quant8_signed'}",
            O.HEATMAP_MAX_KEYPOINT,
            [
                _q8(t, HEAT, 0.5, 100),
                tensor(Q16A, [[8, 16, 56, 40]], scale=0.125),
                scalar(T.BOOL, False),
            ],
            [_q8_out(t, (1, 1), 0.01, 0), output(Q16A, (1, 1, 2), scale=0.125)],
            expected=[_shift(t, [[204]]), [[[35, 28]]]],
        )
    )

# --- AXIS_ALIGNED_BBOX_TRANSFORM ------------------------------------------------------
# Box [0, 0, 4, 4] (centre (2, 2), size 4) in an image of height 10, width 6. Class 0
# deltas 0 keep it; class 1 deltas (0.5, -0.25, 0, 0.25): centre (4, 1), width 4,
# height 4 e^0.25 = 5.1361 -> [2, -1.568, 6, 3.568] -> clipped y1 = 0.
H1 = 4 * math.exp(0.25) / 2
BBOX = [[0, 0, 4, 4, 2, 0, 6, 1 + H1]]
for t in (F32, F16):
    EXAMPLES.append(
        example(
            f"axis_aligned_bbox_transform_{'float32' if t == F32 else 'float16'}",
            O.AXIS_ALIGNED_BBOX_TRANSFORM,
            [
                tensor(t, [[0, 0, 4, 4]]),
                tensor(t, [[0, 0, 0, 0, 0.5, -0.25, 0, 0.25]]),
                tensor(I32, [0]),
                tensor(t, [[10, 6]]),
            ],
            [output(t, (1, 8))],
            expected=[BBOX],
            atol=1e-2 if t == F16 else 0.0,
        )
    )
# Quantized: deltas scale 0.25 (zero point 128); boxes in 1/8: 3.568 / 0.125 = 28.5 -> 29.
for t in (Q8, Q8S):
    EXAMPLES.append(
        example(
            f"axis_aligned_bbox_transform_{'quant8' if t == Q8 else 'quant8_signed'}",
            O.AXIS_ALIGNED_BBOX_TRANSFORM,
            [
                tensor(Q16A, [[0, 0, 32, 32]], scale=0.125),
                _q8(t, [[0, 0, 0, 0, 0.5, -0.25, 0, 0.25]], 0.25, 128),
                tensor(I32, [0]),
                tensor(Q16A, [[80, 48]], scale=0.125),
            ],
            [output(Q16A, (1, 8), scale=0.125)],
            expected=[[[0, 0, 32, 32, 16, 0, 48, 29]]],
        )
    )

# --- BOX_WITH_NMS_LIMIT ----------------------------------------------------------------
# Class 1 boxes A [0,0,10,10] (0.9), B [1,1,11,11] (0.8), C [20,20,30,30] (0.3);
# IoU(A, B) = 81 / 119, the others 0. Class 0 (background) is ignored.
NMS_SCORES = [[0.1, 0.9], [0.1, 0.8], [0.1, 0.3]]
NMS_BOXES = [
    [0, 0, 1, 1, 0, 0, 10, 10],
    [0, 0, 1, 1, 1, 1, 11, 11],
    [0, 0, 1, 1, 20, 20, 30, 30],
]
A, B, C = (row[4:] for row in NMS_BOXES)
IOU_AB = 81 / 119


def _nms_args(scores, boxes, kernel, sigma, *, score_t=F32, box_t=F32, s_type=F32, box_kw=None):
    if isinstance(scores, tuple | list):
        scores = tensor(score_t, scores)
    return [
        scores,
        tensor(box_t, boxes, **(box_kw or {})),
        tensor(I32, [0, 0, 0]),
        _fscalar(s_type, 0.2),  # score threshold
        scalar(T.INT32, -1),  # no detection limit
        scalar(T.INT32, kernel),
        _fscalar(s_type, 0.5),  # IoU threshold
        _fscalar(s_type, sigma),
        _fscalar(s_type, 0.1),  # NMS score threshold
    ]


def _nms_outputs(t, box_t, n, **kw):
    return [
        output(t, (n,), **kw),
        output(box_t, (n, 4), scale=0.125 if box_t == Q16A else 0.0),
        output(I32, (n,)),
        output(I32, (n,)),
    ]


# Hard: B is suppressed by A; C survives.
# Linear: B decays to 0.8 (1 - IoU) = 0.2555, picked after C (0.3).
# Gaussian (sigma 0.5): B decays to 0.8 exp(-IoU^2 / 0.5) = 0.3167, picked before C.
B_LINEAR = 0.8 * (1 - IOU_AB)
B_GAUSS = 0.8 * math.exp(-(IOU_AB**2) / 0.5)
NMS_CASES = {
    "hard": (0, [0.9, 0.3], [A, C]),
    "linear": (1, [0.9, 0.3, B_LINEAR], [A, C, B]),
    "gaussian": (2, [0.9, B_GAUSS, 0.3], [A, B, C]),
}
for kname, (kernel, scores, boxes) in NMS_CASES.items():
    n = len(scores)
    EXAMPLES.append(
        example(
            f"box_with_nms_limit_{kname}_float32",
            O.BOX_WITH_NMS_LIMIT,
            _nms_args(NMS_SCORES, NMS_BOXES, kernel, 0.5),
            _nms_outputs(F32, F32, n),
            expected=[scores, boxes, [1] * n, [0] * n],
        )
    )
EXAMPLES.append(
    example(
        "box_with_nms_limit_gaussian_float16",
        O.BOX_WITH_NMS_LIMIT,
        _nms_args(NMS_SCORES, NMS_BOXES, 2, 0.5, score_t=F16, box_t=F16, s_type=F16),
        _nms_outputs(F16, F16, 3),
        expected=[[0.9, B_GAUSS, 0.3], [A, B, C], [1] * 3, [0] * 3],
        atol=1e-2,
    )
)
# Quantized scores in 1/100 (unsigned zero point 0); boxes in 1/8.
for t in (Q8, Q8S):
    EXAMPLES.append(
        example(
            f"box_with_nms_limit_hard_{'quant8' if t == Q8 else 'quant8_signed'}",
            O.BOX_WITH_NMS_LIMIT,
            _nms_args(
                _q8(t, NMS_SCORES, 0.01, 0),
                np.asarray(NMS_BOXES) * 8,
                0,
                0.5,
                box_t=Q16A,
                box_kw={"scale": 0.125},
            ),
            [_q8_out(t, (2,), 0.01, 0), *_nms_outputs(t, Q16A, 2)[1:]],
            expected=[_shift(t, [90, 30]), np.asarray([A, C]) * 8, [1, 1], [0, 0]],
        )
    )

# --- DETECTION_POSTPROCESSING -----------------------------------------------------------
# Anchors (ctr_y, ctr_x, h, w): a0 [5,5,10,10], a1 [5,6,10,10], a2 [20,20,4,4]. Box
# encodings are zero except a2's y (1, scale 10 -> + 4 * 1 / 10), so the boxes (y1, x1,
# y2, x2) are [0,0,10,10], [0,1,10,11] (IoU 90/110 with the first: suppressed) and
# [18.4,18,22.4,22]. Labels drop the background (class 1 -> label 0).
DET_ANCHORS = [[5, 5, 10, 10], [5, 6, 10, 10], [20, 20, 4, 4]]
DET_DELTAS = [[[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]]
DET_SCORES = [[[0.0, 0.9], [0.0, 0.8], [0.0, 0.7]]]
DET_BOXES = [[[0, 0, 10, 10], [18.4, 18, 22.4, 22], [0, 0, 0, 0]]]
for t, regular in ((F32, True), (F32, False), (F16, True), (F16, False)):
    kind = "regular" if regular else "fast"
    EXAMPLES.append(
        example(
            f"detection_postprocessing_{kind}_{'float32' if t == F32 else 'float16'}",
            O.DETECTION_POSTPROCESSING,
            [
                tensor(t, DET_SCORES),
                tensor(t, DET_DELTAS),
                tensor(t, DET_ANCHORS),
                *(_fscalar(t, s) for s in (10.0, 10.0, 5.0, 5.0)),
                scalar(T.BOOL, regular),
                scalar(T.INT32, 3),  # max detections
                scalar(T.INT32, 1),  # max classes per detection
                scalar(T.INT32, 3),  # max detections per class
                _fscalar(t, 0.0),  # score threshold
                _fscalar(t, 0.5),  # IoU threshold
                scalar(T.BOOL, False),  # background not in the labels
            ],
            [output(t, (1, 3)), output(t, (1, 3, 4)), output(I32, (1, 3)), output(I32, (1,))],
            expected=[[[0.9, 0.7, 0.0]], DET_BOXES, [[0, 0, 0]], [2]],
            atol=2e-2 if t == F16 else 0.0,
        )
    )

# --- GENERATE_PROPOSALS ---------------------------------------------------------------
# One anchor [0,0,4,4] tiled over a 2x2 map with stride 4: boxes [0,0,4,4], [4,0,8,4],
# [0,4,4,8], [4,4,8,8] (x1, y1, x2, y2), scores 0.9, 0.8, 0.7, 0.6. The second box's dx
# of -1 moves it onto the first (IoU 1): NMS drops it. Image 8x8, min size 1.
PROP_SCORES = np.array([0.9, 0.8, 0.7, 0.6], dtype=np.float32).reshape(1, 2, 2, 1)
PROP_DELTAS = np.array(
    [[0, 0, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=np.float32
).reshape(1, 2, 2, 4)
PROP_BOXES = [[0, 0, 4, 4], [0, 4, 4, 8], [4, 4, 8, 8]]


def _proposal_args(scores, deltas, anchors, info, s_type):
    return [
        scores,
        deltas,
        anchors,
        info,
        _fscalar(s_type, 4.0),
        _fscalar(s_type, 4.0),
        scalar(T.INT32, -1),  # pre-NMS: all
        scalar(T.INT32, -1),  # post-NMS: all
        _fscalar(s_type, 0.5),
        _fscalar(s_type, 1.0),
        scalar(T.BOOL, False),
    ]


for t in (F32, F16):
    EXAMPLES.append(
        example(
            f"generate_proposals_{'float32' if t == F32 else 'float16'}",
            O.GENERATE_PROPOSALS,
            _proposal_args(
                tensor(t, PROP_SCORES),
                tensor(t, PROP_DELTAS),
                tensor(t, [[0, 0, 4, 4]]),
                tensor(t, [[8, 8]]),
                t,
            ),
            [output(t, (3,)), output(t, (3, 4)), output(I32, (3,))],
            expected=[[0.9, 0.7, 0.6], PROP_BOXES, [0, 0, 0]],
            atol=1e-2 if t == F16 else 0.0,
        )
    )
for t in (Q8, Q8S):
    EXAMPLES.append(
        example(
            f"generate_proposals_{'quant8' if t == Q8 else 'quant8_signed'}",
            O.GENERATE_PROPOSALS,
            _proposal_args(
                _q8(t, PROP_SCORES, 0.01, 0),
                _q8(t, PROP_DELTAS, 0.25, 128),
                tensor(Q16S, [[0, 0, 32, 32]], scale=0.125),
                tensor(Q16A, [[64, 64]], scale=0.125),
                F32,
            ),
            [_q8_out(t, (3,), 0.01, 0), output(Q16A, (3, 4), scale=0.125), output(I32, (3,))],
            expected=[_shift(t, [90, 70, 60]), np.asarray(PROP_BOXES) * 8, [0, 0, 0]],
        )
    )
