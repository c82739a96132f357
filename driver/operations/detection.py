"""Detection and region operations: ROI_ALIGN, ROI_POOLING, HEATMAP_MAX_KEYPOINT,
AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT, DETECTION_POSTPROCESSING and
GENERATE_PROPOSALS.

The kernels follow Android 11's reference (``RoiAlign.cpp``, ``RoiPooling.cpp``,
``HeatmapMaxKeypoint.cpp``, ``GenerateProposals.cpp``, ``DetectionPostprocessing.cpp``):

* Boxes are (x1, y1, x2, y2) corners, except DETECTION_POSTPROCESSING's (y, x, h, w)
  anchors and (y1, x1, y2, x2) outputs. Quantized boxes are TENSOR_QUANT16_ASYMM with
  scale 0.125 and zero point 0 (GENERATE_PROPOSALS' anchors: TENSOR_QUANT16_SYMM, 0.125).
* Quantized variants dequantize (``convertQuantToFloat32``), run the float32 kernel and
  requantize with ``std::round(x / scale + zeroPoint)``, except ROI_ALIGN (integer
  bilinear weights in 1/255 steps) and ROI_POOLING (max of the raw quantized values).
  Float16 variants compute in float32, except that ROI_ALIGN and ROI_POOLING do their
  coordinate arithmetic in float16 as Android's ``_Float16`` template does, and
  HEATMAP_MAX_KEYPOINT's singular-Hessian test uses Android's float16 tolerances (1e-3).
* NMS (:func:`nms_single_class`) reproduces ``std::max_element`` + swap-to-end selection
  exactly, ties included. Android's later ``std::sort`` calls are not stable for more
  than 30 elements; the reference sorts stably, so the order of equal scores can differ
  from Android's only in those long lists.
* Malformed data Android rejects at run time (batch index out of range, x2 < x1, a box
  outside the feature map) fails the execution with GENERAL_FAILURE, as Android's
  ``NN_RET_CHECK`` (OP_FAILED) does.
* Degenerate boxes never produce NaN: an intersection-over-union with a zero union (two
  zero-area boxes) is NaN in Android; the hard kernels keep Android's comparison result
  (NaN is "not below" a threshold), soft kernels use IoU 1 for it (Android returns NaN
  scores there). AXIS_ALIGNED_BBOX_TRANSFORM keeps a zero-size box zero-size even when
  exp(delta) overflows (Android: 0 * inf = NaN).
* Bounded resources: ROI_ALIGN and ROI_POOLING compute each box in blocks of about
  2**18 elements (output rows, column and depth spans, runs of sample rows), so their
  temporaries stay a few MB however large the output sizes or sampling ratios; results
  are those of the one-block computation. Boxes that fit a block are computed in runs of
  boxes (one vectorized step per ~2**18 elements), boxes a chunk at a time and runs of
  identical consecutive boxes once, so 10^5 boxes (a fuzzer's TILE of one) take well
  under a second; every box gets the one-box computation's bits (NaN signs aside, which
  numpy's SIMD and scalar loops pick by position).
* Every rule the ``validate`` hooks check is deferrable (``HalError.deferrable``): Android
  11's validate functions for these operations check operand counts, types and HAL
  versions only; parameter values (sizes, strides, ratios, NMS kernel and thresholds,
  scales) and box quantizations are checked by their ``prepare()``, at execution.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from driver.hal.types import ErrorStatus, HalError, HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    dtype_of,
    item_blocks,
    storage_dtype,
)
from driver.operations.base import T as _T
from driver.operations.quant import (
    multiply_by_quantized_multiplier,
    quant_range,
    quantize_multiplier,
    round_half_away,
)

V = HalVersion
F32 = np.float32
BOX_SCALE = 0.125  # the only scale Android accepts for quantized boxes

_Q8 = (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED)
_FLOAT_TENSORS = (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)


def _quant_version(t: int) -> HalVersion:
    return V.V1_3 if t == _T.TENSOR_QUANT8_ASYMM_SIGNED else V.V1_2


def _float_scalar(t: int) -> int:
    """The scalar type that goes with a float tensor type (FLOAT16 with TENSOR_FLOAT16)."""
    return _T.FLOAT16 if t == _T.TENSOR_FLOAT16 else _T.FLOAT32


def _op_failed(ctx: OperationContext, message: str) -> HalError:
    """A run-time data error: Android's kernel returns false (OP_FAILED)."""
    where = f"{ctx.location}: " if ctx.location else ""
    return HalError(ErrorStatus.GENERAL_FAILURE, where + message)


def _is_quant(ctx: OperationContext, i: int) -> bool:
    return ctx.input_type(i) in (*_Q8, _T.TENSOR_QUANT16_ASYMM, _T.TENSOR_QUANT16_SYMM)


# ---------------------------------------------------------------------------------------
# Conversions (OperationsUtils.h) and shared checks
# ---------------------------------------------------------------------------------------


def dequantize_float32(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """``convertQuantToFloat32``: ``float(scale * (q - zeroPoint))``. The difference of
    8/16-bit values and their zero point is exact in float32: no integer temporary."""
    out = np.subtract(q, zero_point, dtype=F32)
    out *= F32(scale)
    return out


def requantize(x: np.ndarray, scale: float, zero_point: int, type_code: int) -> np.ndarray:
    """``convertFloat32ToQuant``: ``std::round(x / scale + zeroPoint)``, saturated."""
    lo, hi = quant_range(type_code)
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.asarray(x, dtype=F32) / F32(scale) + F32(zero_point)
        r = np.clip(np.nan_to_num(round_half_away(v), nan=float(zero_point)), lo, hi)
    return r.astype(storage_dtype(type_code))


def _float_input(ctx: OperationContext, i: int, rows: slice = slice(None)) -> np.ndarray:
    """Input ``i`` (its ``rows`` along axis 0) as float32 (dequantized if quantized)."""
    return _float_converter(ctx, i)(ctx.value(i)[rows])


def _float_converter(ctx: OperationContext, i: int) -> Callable[[np.ndarray], np.ndarray]:
    """Stored values of input ``i`` -> float32 (dequantized if quantized), for kernels
    that convert only the parts of an input they use."""
    if _is_quant(ctx, i):
        scale, zero_point = ctx.input_scale(i), ctx.input_zero_point(i)
        return lambda v: dequantize_float32(v, scale, zero_point)
    return lambda v: np.asarray(v, dtype=F32)


def _float_output(ctx: OperationContext, k: int, x: np.ndarray) -> np.ndarray:
    """A float32 result in output ``k``'s type (requantized if quantized)."""
    t = ctx.output_type(k)
    if t in (*_Q8, _T.TENSOR_QUANT16_ASYMM, _T.TENSOR_QUANT16_SYMM):
        return requantize(x, ctx.output_scale(k), ctx.output_zero_point(k), t)
    return np.asarray(x, dtype=F32).astype(dtype_of(ctx, k))


def _check_box_input(ctx: OperationContext, i: int, what: str) -> None:
    """Quantized boxes use scale 0.125 and zero point 0 (Android's prepare checks)."""
    t = ctx.input_type(i)
    if t in (_T.TENSOR_QUANT16_ASYMM, _T.TENSOR_QUANT16_SYMM):
        s, z = ctx.input_scale(i), ctx.input_zero_point(i)
        ctx.check(
            s == BOX_SCALE and z == 0,
            f"input {i} ({what}) of type {_T(t).name} must have scale 0.125 and zero "
            f"point 0, got scale {s} and zero point {z}",
            deferrable=True,
        )


def _check_box_output(ctx: OperationContext, k: int, what: str) -> None:
    if ctx.output_type(k) == _T.TENSOR_QUANT16_ASYMM:
        s, z = ctx.output_scale(k), ctx.output_zero_point(k)
        ctx.check(
            s == BOX_SCALE and z == 0,
            f"output {k} ({what}) of type TENSOR_QUANT16_ASYMM must have scale 0.125 and "
            f"zero point 0, got scale {s} and zero point {z}",
            deferrable=True,
        )


def _check_same_quant(ctx: OperationContext, i: int, k: int, what: str) -> None:
    """Output ``k`` keeps input ``i``'s quantization (Android's prepare copies it)."""
    if ctx.output_type(k) in _Q8:
        si, zi = ctx.input_scale(i), ctx.input_zero_point(i)
        so, zo = ctx.output_scale(k), ctx.output_zero_point(k)
        ctx.check(
            si == so and zi == zo,
            f"output {k} ({what}) must have input {i}'s scale {si} and zero point {zi}, "
            f"got scale {so} and zero point {zo}",
            deferrable=True,
        )


def _layout(ctx: OperationContext, i: int) -> bool:
    """The NCHW flag (a BOOL scalar): True means [batches, channels, height, width]."""
    return bool(ctx.scalar(i))


def _to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.transpose(x, (0, 2, 3, 1)) if nchw else x


def _from_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2))) if nchw else x


def _check_rank(ctx: OperationContext, i: int, rank: int, what: str) -> Shape:
    s = ctx.shape(i)
    ctx.check(len(s) == rank, f"input {i} ({what}) must have rank {rank}, got shape {list(s)}")
    return s


def _check_batch_ids(ctx: OperationContext, ids: np.ndarray, num_batches: int, what: str):
    bad = (ids < 0) | (ids >= num_batches)
    if bad.any():
        k = int(np.argmax(bad))
        raise _op_failed(
            ctx, f"{what}[{k}] = {int(ids[k])} is not a batch index in [0, {num_batches})"
        )


_BOX_BLOCK_ELEMENTS = 1 << 20
"""Input elements per block of boxes for the kernels that work box by box
(AXIS_ALIGNED_BBOX_TRANSFORM, HEATMAP_MAX_KEYPOINT): their float32 copies and
(de)quantization temporaries, several times the input, are per block."""


# ---------------------------------------------------------------------------------------
# Box geometry and NMS (GenerateProposals.cpp: getIoUAxisAligned, *NmsSingleClass)
# ---------------------------------------------------------------------------------------


def _areas(boxes: np.ndarray) -> np.ndarray:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def iou_matrix(boxes: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``getIoUAxisAligned`` in float32 between ``boxes[rows]`` and every box, with
    Android's operation order (NaN where the union is zero). Symmetric in its arguments,
    as the float operations are commutative."""
    b = np.asarray(boxes, dtype=F32)
    a = b if rows is None else b[rows]
    area_b, area_a = _areas(b), _areas(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        x1 = np.maximum(a[:, None, 0], b[None, :, 0])
        x2 = np.minimum(a[:, None, 2], b[None, :, 2])
        y1 = np.maximum(a[:, None, 1], b[None, :, 1])
        y2 = np.minimum(a[:, None, 3], b[None, :, 3])
        w = np.maximum(x2 - x1, F32(0))
        h = np.maximum(y2 - y1, F32(0))
        inter = w * h
        union = (area_a[:, None] + area_b[None, :]) - inter
        return inter / union


HARD, LINEAR, GAUSSIAN = 0, 1, 2  # BOX_WITH_NMS_LIMIT's soft NMS kernel codes
_IOU_MATRIX_LIMIT = 128  # up to this many candidates, all IoUs are computed up front


class _IouRows:
    """``f(IoU)`` of one candidate with every candidate (IoU as ``iou_matrix`` computes
    it): from a matrix computed up front for few candidates, else one row per NMS round
    (rounds are bounded by the detection limit, so rows beat an n x n matrix for many
    boxes). ``f`` is elementwise, so both give identical values."""

    def __init__(self, boxes: np.ndarray, f: Callable[[np.ndarray], np.ndarray]):
        b = np.asarray(boxes, dtype=F32)
        self.f = f
        self.matrix = f(iou_matrix(b)) if b.shape[0] <= _IOU_MATRIX_LIMIT else None
        self.x1, self.y1, self.x2, self.y2 = (np.ascontiguousarray(b[:, k]) for k in range(4))
        self.area = _areas(b)

    def row(self, i: int) -> np.ndarray:
        if self.matrix is not None:
            return self.matrix[i]
        # iou_matrix's float32 operations in place: two temporaries the size of a row.
        w = np.minimum(self.x2[i], self.x2)
        t = np.maximum(self.x1[i], self.x1)
        w -= t
        np.maximum(w, F32(0), out=w)
        h = np.minimum(self.y2[i], self.y2, out=t)
        h -= np.maximum(self.y1[i], self.y1)
        np.maximum(h, F32(0), out=h)
        inter = np.multiply(w, h, out=w)
        union = np.add(self.area[i], self.area, out=h)
        union -= inter
        return self.f(np.divide(inter, union, out=inter))


def _nms_row_function(
    kernel: int | None, iou_threshold: float, sigma: float
) -> Callable[[np.ndarray], np.ndarray]:
    """IoU -> "discard" (bool, hard NMS) or -> score factor (float32, soft kernels)."""
    thr = F32(iou_threshold)
    if kernel is None:
        return lambda iou: iou >= thr  # NaN (zero union) is never >= : kept, as Android
    if kernel == HARD:
        return lambda iou: np.where(iou < thr, F32(1), F32(0))  # NaN: factor 0, as Android
    if kernel == LINEAR:

        def linear(iou: np.ndarray) -> np.ndarray:
            iou = np.where(np.isnan(iou), F32(1), iou)  # zero union: fully overlapping
            return np.where(iou < thr, F32(1), F32(1) - iou).astype(F32)

        return linear
    sig = F32(sigma)

    def gaussian(iou: np.ndarray) -> np.ndarray:
        iou = np.where(np.isnan(iou), F32(1), iou)  # zero union: fully overlapping
        return np.exp((F32(-1) * iou * iou) / sig).astype(F32)

    return gaussian


def nms_single_class(
    scores: np.ndarray,
    boxes: np.ndarray,
    max_detections: int,
    iou_threshold: float,
    *,
    kernel: int | None = None,
    sigma: float = 1.0,
    score_threshold: float = 0.0,
) -> np.ndarray:
    """Greedy NMS over candidates ``0..n-1`` (in that initial order), exactly as Android's
    in-place ``hardNmsSingleClass`` / ``softNmsSingleClass``.

    Each round picks the first highest score among the live candidates
    (``std::max_element``), swaps it to the front, then discards each remaining box
    whose IoU with it is >= ``iou_threshold`` (``kernel=None``: DETECTION_POSTPROCESSING,
    GENERATE_PROPOSALS) or whose score, multiplied by the soft kernel of the IoU, falls
    below ``score_threshold`` (``kernel`` HARD/LINEAR/GAUSSIAN: BOX_WITH_NMS_LIMIT).
    Discarded boxes are swapped with the last live one, which is what decides ties later.
    ``scores`` (float32) is updated in place with the decayed scores. Returns the kept
    candidates in selection order; at most ``max_detections`` unless it is negative."""
    n = scores.shape[0]
    limit = n if max_detections < 0 else min(max_detections, n)
    order = np.arange(n)
    if n == 0 or limit == 0:
        return order[:0]
    with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
        rows = _IouRows(boxes, _nms_row_function(kernel, iou_threshold, sigma))
        sthr = F32(score_threshold)
        start, end = 0, n
        while start < end and start < limit:
            j = int(np.argmax(scores[order[start:end]]))
            if j:
                order[start], order[start + j] = order[start + j], order[start]
            rest = order[start + 1 : end]
            value = rows.row(order[start])[rest]
            start += 1
            if rest.size == 0:
                break
            if kernel is None:
                drop = value
            else:
                decayed = scores[rest] * value
                scores[rest] = decayed
                drop = decayed < sthr
            if drop.any():
                end = start + _discard(order, start, end, drop)
    return order[:start]


def _discard(order: np.ndarray, start: int, end: int, drop: np.ndarray) -> int:
    """The C++ loop ``if (drop) std::swap(*i--, *(--selectEnd))`` over ``order[start:end]``,
    in one step: each discarded slot among the first ``kept`` positions is refilled with
    the kept boxes from the tail, last first. Returns ``kept``."""
    kept = int(drop.size - np.count_nonzero(drop))
    holes = np.flatnonzero(drop[:kept])
    if holes.size:
        seg = order[start:end]
        fills = (np.flatnonzero(~drop[kept:]) + kept)[::-1]
        left = seg[:kept].copy()
        left[holes] = seg[fills]
        order[start : start + kept] = left
    return kept


def _stable_desc(scores: np.ndarray) -> np.ndarray:
    """Indices that sort ``scores`` descending, ties in their current order (see the
    module notes on ``std::sort``)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


# ---------------------------------------------------------------------------------------
# AXIS_ALIGNED_BBOX_TRANSFORM
# ---------------------------------------------------------------------------------------


def bbox_transform(rois: np.ndarray, deltas: np.ndarray, image_hw: np.ndarray) -> np.ndarray:
    """``bboxTransformFloat32`` for rois (n, 4) x1y1x2y2, deltas (n, classes*4) dx dy dw dh
    and each roi's image (height, width) (n, 2); float32 throughout, as the C++."""
    rois = np.asarray(rois, dtype=F32)
    n = rois.shape[0]
    d = np.asarray(deltas, dtype=F32)
    d = d.reshape(n, d.shape[-1] // 4, 4)
    w = rois[:, 2] - rois[:, 0]
    h = rois[:, 3] - rois[:, 1]
    cx = (rois[:, 0] + rois[:, 2]) / F32(2)
    cy = (rois[:, 1] + rois[:, 3]) / F32(2)
    with np.errstate(over="ignore", invalid="ignore"):
        new_w = np.exp(d[..., 2]) * w[:, None]
        new_h = np.exp(d[..., 3]) * h[:, None]
        # 0 * inf is NaN in Android; a zero-size box stays zero-size here.
        new_w = np.where(w[:, None] == 0, F32(0), new_w)
        new_h = np.where(h[:, None] == 0, F32(0), new_h)
        x = cx[:, None] + d[..., 0] * w[:, None]
        y = cy[:, None] + d[..., 1] * h[:, None]
        half_w, half_h = new_w / F32(2), new_h / F32(2)
        corners = np.stack([x - half_w, y - half_h, x + half_w, y + half_h], axis=-1)
    img_h = np.asarray(image_hw[:, 0], dtype=F32)[:, None]
    img_w = np.asarray(image_hw[:, 1], dtype=F32)[:, None]
    limits = np.stack([img_w, img_h, img_w, img_h], axis=-1)
    # std::min(std::max(v, 0.0f), limit)
    clipped = np.minimum(np.maximum(corners, F32(0)), limits)
    return clipped.reshape(n, d.shape[1] * 4).astype(F32)


def _check_rois_ordered(
    ctx: OperationContext,
    boxes: np.ndarray,
    what: str,
    to_float32: Callable[[np.ndarray], np.ndarray] | None = None,
) -> None:
    """Android's "invalid region" check: x1 <= x2 and y1 <= y2 for every box. ``boxes``
    may be stored values that ``to_float32`` converts (for the message): the order of
    float16 or quantized boxes (positive scale) is their float32 values' order."""
    b = np.asarray(boxes).reshape(-1, 4)
    bad = ~((b[:, 0] <= b[:, 2]) & (b[:, 1] <= b[:, 3]))
    if bad.any():
        k = int(np.argmax(bad))
        box = b[k] if to_float32 is None else to_float32(b[k])
        raise _op_failed(ctx, f"{what} box {k} {box.tolist()} has x2 < x1 or y2 < y1")


def _validate_bbox_transform(ctx: OperationContext) -> None:
    _check_box_input(ctx, 0, "roi")
    _check_box_input(ctx, 3, "image info")
    _check_box_output(ctx, 0, "output boxes")


def _infer_bbox_transform(ctx: OperationContext) -> list[Shape]:
    roi = _check_rank(ctx, 0, 2, "roi")
    deltas = _check_rank(ctx, 1, 2, "bounding box deltas")
    batches = _check_rank(ctx, 2, 1, "batch indexes")
    info = _check_rank(ctx, 3, 2, "image info")
    ctx.check(roi[1] == 4, f"input 0 (roi) must have shape [num_rois, 4], got {list(roi)}")
    ctx.check(
        deltas[1] > 0 and deltas[1] % 4 == 0 and deltas[0] == roi[0],
        f"input 1 (deltas) must have shape [{roi[0]}, num_classes * 4] with num_classes > 0, "
        f"got {list(deltas)}",
    )
    ctx.check(batches[0] == roi[0], f"input 2 must have shape [{roi[0]}], got {list(batches)}")
    ctx.check(
        info[1] == 2 and info[0] > 0,
        f"input 3 (image info) must have shape [batches > 0, 2], got {list(info)}",
    )
    return [(roi[0], deltas[1])]


def _execute_bbox_transform(ctx: OperationContext) -> list[np.ndarray]:
    rois = _float_input(ctx, 0)
    ids = ctx.value(2)
    info = _float_input(ctx, 3)
    _check_batch_ids(ctx, ids, info.shape[0], "input 2 (batch index)")
    _check_rois_ordered(ctx, rois, "input 0 (roi)")
    num_rois, row = ctx.value(1).shape
    out = np.empty((num_rois, row), dtype=dtype_of(ctx))
    for block in item_blocks(
        num_rois, row, _BOX_BLOCK_ELEMENTS
    ):  # box by box: any blocking gives the same
        boxes = bbox_transform(rois[block], _float_input(ctx, 1, block), info[ids[block]])
        out[block] = _float_output(ctx, 0, boxes)
    return [out]


def _bbox_signatures() -> tuple[Signature, ...]:
    sigs = [Signature((t, t, _T.TENSOR_INT32, t), (t,), V.V1_2) for t in _FLOAT_TENSORS]
    for q in _Q8:
        q16 = _T.TENSOR_QUANT16_ASYMM
        sigs.append(Signature((q16, q, _T.TENSOR_INT32, q16), (q16,), _quant_version(q)))
    return tuple(sigs)


AXIS_ALIGNED_BBOX_TRANSFORM = OperationDeclaration(
    OperationType.AXIS_ALIGNED_BBOX_TRANSFORM,
    _bbox_signatures(),
    infer_shapes=_infer_bbox_transform,
    execute=_execute_bbox_transform,
    validate=_validate_bbox_transform,
    summary=(
        "Applies per-class (dx, dy, dw, dh) deltas to axis-aligned boxes and clips them "
        "to their image."
    ),
    notes=("A zero-size box stays zero-size when exp(delta) overflows (Android: NaN).",),
)


# ---------------------------------------------------------------------------------------
# ROI_ALIGN
# ---------------------------------------------------------------------------------------

_ROI_WEIGHT_SCALE = F32(1.0) / F32(255.0)  # RoiAlign quant: bilinear weights in 1/255


def _validate_roi_common(ctx: OperationContext, stride_h: int, stride_w: int) -> None:
    _check_box_input(ctx, 1, "roi")
    out_h, out_w = ctx.scalar(3), ctx.scalar(4)
    ctx.check(out_h > 0, f"input 3 (output height) must be positive, got {out_h}", deferrable=True)
    ctx.check(out_w > 0, f"input 4 (output width) must be positive, got {out_w}", deferrable=True)
    sh, sw = ctx.scalar(stride_h), ctx.scalar(stride_w)
    ctx.check(
        sh > 0, f"input {stride_h} (height stride) must be positive, got {sh}", deferrable=True
    )
    ctx.check(
        sw > 0, f"input {stride_w} (width stride) must be positive, got {sw}", deferrable=True
    )


def _validate_roi_align(ctx: OperationContext) -> None:
    _validate_roi_common(ctx, 5, 6)
    rh, rw = ctx.scalar(7), ctx.scalar(8)
    ctx.check(rh >= 0, f"input 7 (height sampling ratio) must be >= 0, got {rh}", deferrable=True)
    ctx.check(rw >= 0, f"input 8 (width sampling ratio) must be >= 0, got {rw}", deferrable=True)


def _infer_roi(ctx: OperationContext, layout_index: int) -> list[Shape]:
    x = _check_rank(ctx, 0, 4, "input")
    roi = _check_rank(ctx, 1, 2, "roi")
    batches = _check_rank(ctx, 2, 1, "batch indexes")
    nchw = _layout(ctx, layout_index)
    n, h, w, c = (x[0], x[2], x[3], x[1]) if nchw else x
    ctx.check(
        min(n, h, w, c) > 0,
        f"input 0 must have positive batch, height, width and depth, got {list(x)}",
    )
    ctx.check(roi[1] == 4, f"input 1 (roi) must have shape [num_rois, 4], got {list(roi)}")
    ctx.check(batches[0] == roi[0], f"input 2 must have shape [{roi[0]}], got {list(batches)}")
    out_h, out_w = ctx.scalar(3), ctx.scalar(4)
    ctx.check(out_h > 0 and out_w > 0, f"output size must be positive, got {out_h}x{out_w}")
    return [(roi[0], c, out_h, out_w) if nchw else (roi[0], out_h, out_w, c)]


def _roi_dtype(ctx: OperationContext) -> type:
    """T_Roi: Android's float16 kernels do box arithmetic in _Float16."""
    return np.float16 if ctx.input_type(0) == _T.TENSOR_FLOAT16 else F32


def _rois_in_feature_map(
    ctx: OperationContext, rt: type, h: int, w: int
) -> tuple[np.ndarray, object, object]:
    """Boxes scaled to the feature map (x1, y1, x2, y2 in ``rt``), checked as Android
    does: non-negative, inside the map, x1 <= x2 and y1 <= y2."""
    h_scale = rt(F32(1.0) / F32(ctx.scalar(5)))
    w_scale = rt(F32(1.0) / F32(ctx.scalar(6)))
    raw = ctx.value(1)
    scales = np.array([w_scale, h_scale, w_scale, h_scale], dtype=rt)
    if ctx.input_type(1) == _T.TENSOR_QUANT16_ASYMM:
        # Quant kernels: float(q) * scale * 0.125 (exact power-of-two step).
        scaled = raw.astype(F32) * scales
        scaled *= F32(BOX_SCALE)
        base = scaled
    else:
        base = raw.astype(rt)
        scaled = base * scales
    # Whole-array checks first (boxes are many, per-box reductions over 4 are slow).
    if not (
        (base >= 0).all()
        and (scaled[:, 0::2] <= w).all()
        and (scaled[:, 1::2] <= h).all()
        and (base[:, :2] <= base[:, 2:]).all()
    ):
        ok = (
            (base >= 0).all(axis=1)
            & (scaled[:, 0] <= w)
            & (scaled[:, 2] <= w)
            & (scaled[:, 1] <= h)
            & (scaled[:, 3] <= h)
            & (base[:, 0] <= base[:, 2])
            & (base[:, 1] <= base[:, 3])
        )
        k = int(np.argmax(~ok))
        raise _op_failed(
            ctx,
            f"input 1 (roi) box {k} {raw[k].tolist()} is malformed or outside the "
            f"{h}x{w} feature map",
        )
    return scaled, h_scale, w_scale


_BLOCK_ELEMENTS = 1 << 18
"""Elements per block: ROI_ALIGN's bilinear samples (sample x depth) and ROI_POOLING's
output bins (bin x depth). Temporaries stay tens of MB however large the output or the
sampling ratios a fuzzer asks for from tiny inputs; realistic boxes (7x7 bins, 2..4
samples per axis, depth 256..1024) fit one block."""


_BATCH_ELEMENTS = 1 << 18
"""ROI_ALIGN and ROI_POOLING compute the boxes whose work fits in a block together, runs
of boxes of about this many elements per vectorized step: a Python loop costs ~300 us a
box, and a fuzzer's TILE of one box makes 10^5 of them. Larger boxes take the one-box
path (blocked, the same operations per element); 0 sends every box there."""


_SAMPLE_ROW_LIMIT = 1 << 18
"""ROI_ALIGN's smallest block is one sample row of two output columns and two depths; a
width sampling ratio that makes it larger than this fails (realistic ratios are < 100)."""


def _batch_limit() -> int:
    """Largest work (elements) of a box computed in a run of boxes."""
    return min(_BATCH_ELEMENTS, _BLOCK_ELEMENTS)


def _box_runs(boxes: np.ndarray, cost: np.ndarray) -> Iterator[np.ndarray]:
    """Consecutive runs of ``boxes`` (indexes) whose ``cost`` (indexed by box) sums to at
    most :data:`_BATCH_ELEMENTS`, or single boxes."""
    total = np.cumsum(cost[boxes])
    start = 0
    while start < boxes.size:
        before = total[start - 1] if start else 0
        end = int(np.searchsorted(total, before + _BATCH_ELEMENTS, side="right"))
        end = max(end, start + 1)
        yield boxes[start:end]
        start = end


_BOXES_PER_STEP = 1 << 16
"""ROI_ALIGN and ROI_POOLING take boxes this many at a time (fewer when their outputs are
large), so that per-box geometry and plans stay a few MB however many boxes there are."""


def _each_box_chunk(
    boxes: np.ndarray,
    ids: np.ndarray,
    out: np.ndarray,
    compute: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> np.ndarray:
    """``out`` (one row per box) filled with ``compute(boxes, ids)``, a chunk of boxes at
    a time; each run of identical consecutive boxes (the same coordinates, bit for bit,
    and map) is computed once: a fuzzer's TILE of one box makes 10^5 of them."""
    per_box = max(1, math.prod(out.shape[1:]))
    step = max(1, min(_BOXES_PER_STEP, _BOXES_PER_STEP * 16 // per_box))
    # Each box's 4 coordinates as one or two 64-bit words (float16, float32).
    words = np.ascontiguousarray(boxes).view(np.uint64)
    for s in range(0, len(ids), step):
        e = min(s + step, len(ids))
        starts = np.empty(e - s, dtype=bool)
        starts[0] = True
        np.not_equal(ids[s + 1 : e], ids[s : e - 1], out=starts[1:])
        for k in range(words.shape[1]):
            starts[1:] |= words[s + 1 : e, k] != words[s : e - 1, k]
        if starts.all():
            out[s:e] = compute(boxes[s:e], ids[s:e])
        else:
            first = np.flatnonzero(starts) + s
            runs = np.diff(first, append=e)
            out[s:e] = np.repeat(compute(boxes[first], ids[first]), runs, axis=0)
    return out


def _pair_spans(n: int, size: int) -> list[tuple[int, int]]:
    """[start, end) spans of ``size`` covering ``range(n)``, none of length 1 unless
    ``n`` is 1 (a short last span joins the one before). A ROI_ALIGN block one output
    column wide and one deep is summed in another order (numpy coalesces its sample axes
    and sums them pairwise) than the wider whole, which would change float32 results."""
    size = max(size, min(n, 2))
    starts = list(range(0, n, size))
    if len(starts) > 1 and n - starts[-1] == 1:
        starts.pop()
    return list(zip(starts, [*starts[1:], n]))


_F16_OVERFLOW = 65520  # the smallest integer that rounds to float16 infinity


def _arange(start: int, stop: int, rt: type) -> np.ndarray:
    """``np.arange(start, stop).astype(rt)`` for non-negative indexes; numpy's conversion
    of integers beyond float16's range to inf is ~10x slower than the rest, and a fuzzer's
    huge output sizes make most of them so."""
    j = np.arange(start, stop)
    if rt is not np.float16 or stop <= _F16_OVERFLOW:
        return j.astype(rt)
    f = np.minimum(j, _F16_OVERFLOW - 1).astype(F32)
    return np.where(j >= _F16_OVERFLOW, F32(np.inf), f).astype(np.float16)


class _AlignBoxes(NamedTuple):
    """Every box's ``roiAlignNhwc`` geometry: corner, bin size (step) and sample spacing
    (bin) in T_Roi, and the sampling points per bin along each axis."""

    w0: np.ndarray
    h0: np.ndarray
    step_w: np.ndarray
    step_h: np.ndarray
    bin_w: np.ndarray
    bin_h: np.ndarray
    samples_w: np.ndarray
    samples_h: np.ndarray

    def take(self, index) -> _AlignBoxes:
        return _AlignBoxes(*(a[index] for a in self))


def _align_boxes(
    boxes: np.ndarray, out_h: int, out_w: int, ratio_h: int, ratio_w: int, rt: type
) -> _AlignBoxes:
    """:class:`_AlignBoxes` of boxes (x1, y1, x2, y2 in ``rt``), elementwise in ``rt`` as
    the C++'s scalars; a sampling ratio of 0 is adaptive (ceil(step) samples per bin)."""
    w0, h0, w1, h1 = (boxes[:, k] for k in range(4))
    one = F32(1.0)
    roi_w = np.maximum((w1 - w0).astype(F32), one).astype(rt)
    roi_h = np.maximum((h1 - h0).astype(F32), one).astype(rt)
    with np.errstate(over="ignore"):  # a float16 output size over 65504 is inf: steps of 0
        step_w = (roi_w / rt(out_w)).astype(rt)
        step_h = (roi_h / rt(out_h)).astype(rt)

    def samples(ratio: int, step: np.ndarray) -> np.ndarray:
        if ratio > 0:
            return np.full(step.shape, ratio, np.int64)
        return np.ceil(step.astype(F32)).astype(np.int64)

    rw, rh = samples(ratio_w, step_w), samples(ratio_h, step_h)
    # A float16 ratio over 65504 is inf: bins of 0. No samples: 0 / 0, never used.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        bin_w = (step_w / rw.astype(rt)).astype(rt)
        bin_h = (step_h / rh.astype(rt)).astype(rt)
    return _AlignBoxes(w0, h0, step_w, step_h, bin_w, bin_h, rw, rh)


def _sample_axis(step, bin_, start, outs: range, samples: range, size: int, rt: type):
    """Bilinear sample indexes and weights along one axis, shape (boxes, len(outs) *
    len(samples)), for boxes with ``step``, ``bin_`` and ``start`` (arrays in ``rt``) at
    output positions ``outs`` and sample indexes ``samples`` within each bin
    (``roiAlignNhwc``'s expressions in ``rt``; elementwise, so any sub-range or subset of
    the boxes gives the values of the whole)."""
    step, bin_, start = (np.asarray(v)[:, None] for v in (step, bin_, start))
    starts = (step * _arange(outs.start, outs.stop, rt) + start).astype(rt)
    ks = _arange(samples.start, samples.stop, rt)
    with np.errstate(invalid="ignore"):  # 0 * inf (float16, see below) is NaN, as in C++
        half = (bin_ / rt(2)).astype(rt)[:, :, None]
        pos = (starts[:, :, None] + half) + bin_[:, :, None] * ks
    pos = pos.astype(rt).reshape(len(starts), -1)
    # uint32_t x1 = std::floor(x): a sample index beyond float16 (a sampling ratio
    # over 65504) makes x inf or NaN, and ARM's conversion saturates (NaN gives 0).
    lo = np.floor(np.clip(np.nan_to_num(pos.astype(F32), nan=0.0), 0, size)).astype(np.int64)
    frac = (pos - lo.astype(rt)).astype(rt)
    edge = lo >= size - 1
    lo = np.where(edge, size - 1, lo)
    hi = np.where(edge, size - 1, lo + 1)
    frac = np.where(edge, rt(0), frac).astype(rt)
    return lo, hi, frac, (rt(F32(1.0)) - frac).astype(rt)


class _Maps(NamedTuple):
    """Feature maps as rows of depth values, (batches * height * width, depth), gathered
    with ``np.take`` (numpy's fancy indexing with three index arrays is several times
    slower)."""

    flat: np.ndarray
    height: int
    width: int

    @staticmethod
    def of(x: np.ndarray) -> _Maps:
        """``x`` (batches, height, width, depth); a copy only if not contiguous (NCHW)."""
        return _Maps(x.reshape(-1, x.shape[3]), x.shape[1], x.shape[2])

    def rows(self, ids: np.ndarray, ys: np.ndarray) -> np.ndarray:
        """Flat indexes of column 0 of rows ``ys`` (boxes, n) of maps ``ids`` (boxes,)."""
        return (ids[:, None] * self.height + ys) * self.width

    def take(self, index: np.ndarray) -> np.ndarray:
        return np.take(self.flat, index, axis=0)

    def depths(self, d0: int, d1: int) -> _Maps:
        return self._replace(flat=self.flat[:, d0:d1])


def _bilinear_terms(maps: _Maps, ids, ys, xs, rt: type, zero_point: int | None) -> np.ndarray:
    """Sum of the four weighted corners at every box's (y sample, x sample), shape
    (boxes, len(y), len(x), depth) from maps ``ids``: float32, or integers with the
    1/255-step weights for quant. Corners are gathered one at a time (one block-sized
    gather alive at once)."""
    y1, y2, dy1, dy2 = ys
    x1, x2, dx1, dx2 = xs
    rows1, rows2 = maps.rows(ids, y1), maps.rows(ids, y2)
    parts = (
        (dy2, dx2, rows1, x1),
        (dy2, dx1, rows1, x2),
        (dy1, dx2, rows2, x1),
        (dy1, dx1, rows2, x2),
    )
    total = 0  # Python's sum(): 0 + the first term turns -0.0 into 0.0, as before
    for wy, wx, rows, cols in parts:
        # np.outer per box in rt: a float16 product is exact in float32, then rounded.
        weight = (wy.astype(F32)[:, :, None] * wx.astype(F32)[:, None, :]).astype(rt, copy=False)
        weight = weight.astype(F32, copy=False)
        corner = maps.take(rows[:, :, None] + cols[:, None, :])
        if zero_point is None:
            term = weight[..., None] * corner.astype(F32, copy=False)
        else:
            # |sum of the 4 terms| <= 4 * 255 * 255: int32 is exact, sums are in int64.
            weight = round_half_away(weight / _ROI_WEIGHT_SCALE).astype(np.int32)
            term = weight[..., None] * (corner.astype(np.int32) - np.int32(zero_point))
        if isinstance(total, int):
            total = total + term
        else:
            total += term
    return total


def _sample_sums(acc: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    """Sums over the sampling points (float32 in numpy's order, integers in int64)."""
    return acc.sum(axis=axis, dtype=np.int64 if acc.dtype.kind == "i" else None)


def _align_samples(
    maps: _Maps,
    ids,
    boxes: _AlignBoxes,
    rows: range,
    row_samples: range,
    cols: range,
    rt,
    zero_point,
) -> np.ndarray:
    """Bilinear samples of boxes with the same samples per bin, at output ``rows`` (their
    sample rows ``row_samples``) and ``cols`` (all their samples) and every depth of
    ``maps``: shape (boxes, rows, row samples, cols, column samples, depth)."""
    rw = int(boxes.samples_w[0])
    xs = _sample_axis(boxes.step_w, boxes.bin_w, boxes.w0, cols, range(rw), maps.width, rt)
    ys = _sample_axis(boxes.step_h, boxes.bin_h, boxes.h0, rows, row_samples, maps.height, rt)
    terms = _bilinear_terms(maps, ids, ys, xs, rt, zero_point)
    return terms.reshape(len(ids), len(rows), len(row_samples), len(cols), rw, -1)


def _roi_align_one(
    ctx: OperationContext,
    maps: _Maps,
    image: int,
    box: _AlignBoxes,
    out_h: int,
    out_w: int,
    rt: type,
    zero_point: int | None,
) -> tuple[int, Iterator[tuple[tuple[slice, slice, slice], np.ndarray]]]:
    """One box (``box`` holds one, on map ``image``) of ``roiAlignNhwc`` (``zero_point``
    None) or ``roiAlignQuantNhwc``: the number of sampling points per bin, and blocks
    ``((rows, columns, depths), total)`` of the sums over the sampling points of the
    bilinear samples (float32, or int64 for quant) that together cover (out_h, out_w,
    depth).

    Blocks hold about :data:`_BLOCK_ELEMENTS` samples x depth: whole boxes when they fit,
    else runs of output rows, then spans of at least two columns or depths, then runs of
    a bin's sample rows, the running sums carried into the next run as its first sample.
    Every output element's sum has the operation order of one numpy reduction over the
    whole box (the order only depends on whether the column and depth axes have length 1,
    which the spans keep), so results do not depend on the block size; the exception is
    a float sum over more than a block of samples of a depth-1, width-1 output, which
    numpy would sum pairwise and the runs sum in a different (still float32) order."""
    depth = maps.flat.shape[1]
    rh, rw = int(box.samples_h[0]), int(box.samples_w[0])
    if rh == 0 or rw == 0:
        # float16: an output size over 65504 is inf, so the adaptive step is 0 and so is
        # its number of samples. The sums are empty; the C++ divides them by 0.
        empty = np.zeros((out_h, out_w, depth), F32 if zero_point is None else np.int64)
        return 0, iter([((slice(None), slice(None), slice(None)), empty)])
    _check_work(ctx, 4 * out_h * rh * out_w * rw * depth)
    # The smallest block: one sample row of (up to) two output columns and two depths.
    pair_w, pair_d = min(out_w, 2), min(depth, 2)
    if rw * pair_w * pair_d > _SAMPLE_ROW_LIMIT:
        raise _op_failed(
            ctx,
            f"a width sampling ratio of {rw} needs {rw * pair_w * pair_d} elements per "
            f"sample row, more than the reference driver allows ({_SAMPLE_ROW_LIMIT})",
        )
    limit = _BLOCK_ELEMENTS
    bd = depth if rw * pair_w * depth <= limit else max(pair_d, limit // (rw * pair_w))
    row = rw * bd  # one sample row of one output element
    bw = out_w if out_w * rh * row <= limit else max(pair_w, limit // (rh * row))
    kc = rh if bw * rh * row <= limit else max(1, limit // (bw * row))
    bh = max(1, limit // (bw * rh * row)) if kc == rh else 1
    ids = np.array([image])

    def blocks() -> Iterator[tuple[tuple[slice, slice, slice], np.ndarray]]:
        for j0, j1 in _pair_spans(out_w, bw):
            for i0 in range(0, out_h, bh):
                i1 = min(i0 + bh, out_h)
                for d0, d1 in _pair_spans(depth, bd):
                    part = maps.depths(d0, d1)
                    total = None
                    for k0 in range(0, rh, kc):
                        k1 = min(k0 + kc, rh)
                        acc = _align_samples(
                            part,
                            ids,
                            box,
                            range(i0, i1),
                            range(k0, k1),
                            range(j0, j1),
                            rt,
                            zero_point,
                        )[0]
                        if total is not None:
                            # Carry on the running sums: they come first in an extra
                            # sample row padded with -0.0 (x + -0.0 is x, even for -0.0).
                            carry = np.zeros((i1 - i0, 1, j1 - j0, rw, d1 - d0), total.dtype)
                            if total.dtype == F32:
                                carry.fill(-0.0)
                            carry[:, 0, :, 0] = total
                            acc = np.concatenate([carry, acc], axis=1)
                        total = _sample_sums(acc, (1, 3))
                    yield (slice(i0, i1), slice(j0, j1), slice(d0, d1)), total

    return rh * rw, blocks()


def _execute_roi_align(ctx: OperationContext) -> list[np.ndarray]:
    nchw = _layout(ctx, 9)
    x = _to_nhwc(ctx.value(0), nchw)
    n, h, w, c = x.shape
    out_h, out_w = ctx.scalar(3), ctx.scalar(4)
    ids = ctx.value(2).astype(np.int64)
    _check_batch_ids(ctx, ids, n, "input 2 (batch index)")
    rt = _roi_dtype(ctx)
    scaled, _, _ = _rois_in_feature_map(ctx, rt, h, w)
    maps = _Maps.of(x)
    quant = ctx.input_type(0) in _Q8
    out_dtype = dtype_of(ctx)
    zi = ctx.input_zero_point(0) if quant else None

    def averages(total: np.ndarray, points: int) -> np.ndarray:
        """Sums over ``points`` sampling points -> output values."""
        if not quant:
            with np.errstate(invalid="ignore"):  # 0 / 0 without sampling points: NaN
                return (total / F32(points)).astype(out_dtype)
        real = F32(F32(ctx.input_scale(0)) * _ROI_WEIGHT_SCALE) / F32(ctx.output_scale(0))
        with np.errstate(divide="ignore"):  # no sampling points: inf, the C++'s too
            real = F32(real / F32(points))
        mult, shift = quantize_multiplier(float(real))
        raw = multiply_by_quantized_multiplier(total, mult, shift) + ctx.output_zero_point(0)
        return np.clip(raw, *quant_range(ctx.output_type(0))).astype(out_dtype)

    def align(scaled: np.ndarray, ids: np.ndarray) -> np.ndarray:
        boxes = _align_boxes(scaled, out_h, out_w, ctx.scalar(7), ctx.scalar(8), rt)
        out = np.empty((len(ids), out_h, out_w, c), dtype=out_dtype)
        # Boxes whose samples fit a block run together, grouped by their samples per
        # bin (the shapes of their sums); the others (and failing ones) one at a time.
        points = boxes.samples_h * boxes.samples_w
        work = points.astype(np.float64) * (out_h * out_w * c)
        batched = (points > 0) & (work <= _batch_limit())
        for r in np.flatnonzero(~batched).tolist():
            box = boxes.take([r])
            count, blocks = _roi_align_one(ctx, maps, ids[r], box, out_h, out_w, rt, zi)
            for (rows, cols, depths), total in blocks:
                out[r, rows, cols, depths] = averages(total, count)
        group_of = boxes.samples_h * (boxes.samples_w.max(initial=0) + 1) + boxes.samples_w
        order = np.flatnonzero(batched)
        order = order[np.argsort(group_of[order], kind="stable")]
        for group in np.split(order, np.flatnonzero(np.diff(group_of[order])) + 1):
            for run in _box_runs(group, work):
                run_boxes = boxes.take(run)
                rh = int(run_boxes.samples_h[0])
                acc = _align_samples(
                    maps, ids[run], run_boxes, range(out_h), range(rh), range(out_w), rt, zi
                )
                out[run] = averages(_sample_sums(acc, (2, 4)), int(points[run[0]]))
        return out

    out = np.empty((len(ids), out_h, out_w, c), dtype=out_dtype)
    return [_from_nhwc(_each_box_chunk(scaled, ids, out, align), nchw)]


def _roi_align_signatures() -> tuple[Signature, ...]:
    i32, f32 = _T.INT32, _T.FLOAT32
    sigs = []
    for t in _FLOAT_TENSORS:
        s = _float_scalar(t)
        sigs.append(
            Signature((t, t, _T.TENSOR_INT32, i32, i32, s, s, i32, i32, _T.BOOL), (t,), V.V1_2)
        )
    for q in _Q8:
        sigs.append(
            Signature(
                (
                    q,
                    _T.TENSOR_QUANT16_ASYMM,
                    _T.TENSOR_INT32,
                    i32,
                    i32,
                    f32,
                    f32,
                    i32,
                    i32,
                    _T.BOOL,
                ),
                (q,),
                _quant_version(q),
            )
        )
    return tuple(sigs)


ROI_ALIGN = OperationDeclaration(
    OperationType.ROI_ALIGN,
    _roi_align_signatures(),
    infer_shapes=lambda ctx: _infer_roi(ctx, 9),
    execute=_execute_roi_align,
    validate=_validate_roi_align,
    summary=(
        "Crops each region of interest from its batch's feature map and resizes it to a "
        "fixed size by averaging bilinear samples (Mask R-CNN's RoIAlign)."
    ),
    notes=(
        "Float16 interpolation sums are accumulated in float32 (Android: _Float16).",
        "The quantized output multiplier uses QuantizeMultiplier, so a real multiplier "
        ">= 1 works (Android's QuantizeMultiplierSmallerThanOne would fail).",
        "Bounded resources: a box needing more than 2**26 corner samples x depth, or a "
        "width sampling ratio whose sample row of two bins and two depths exceeds 2**18 "
        "elements (a ratio over 2**16), fails with GENERAL_FAILURE.",
    ),
)


# ---------------------------------------------------------------------------------------
# ROI_POOLING
# ---------------------------------------------------------------------------------------


def _validate_roi_pooling(ctx: OperationContext) -> None:
    _check_same_quant(ctx, 0, 0, "output")
    _validate_roi_common(ctx, 5, 6)


def _pool_edges(step, start, j: np.ndarray, rt: type) -> np.ndarray:
    """Bin edges ``step * j + start`` of ROI_POOLING (in ``rt``, as float32)."""
    return (step * j + np.asarray(start).astype(rt)).astype(rt).astype(F32)


def _pool_bins(step, start, bins: range, size: int, rt: type) -> tuple[np.ndarray, np.ndarray]:
    """[floor(step*j + start), ceil(step*(j+1) + start)) for each bin j of ``bins``,
    clamped to ``size``; ``step`` (in ``rt``) and ``start`` (integers) are scalars or
    columns (boxes, 1) (elementwise: any sub-range gives the values of the whole)."""
    edges = _pool_edges(step, start, _arange(bins.start, bins.stop + 1, rt), rt)
    lo = np.minimum(np.floor(edges[..., :-1]).astype(np.int64), size)
    hi = np.minimum(np.ceil(edges[..., 1:]).astype(np.int64), size)
    return lo, hi


def range_max(a: np.ndarray, lo: np.ndarray, hi: np.ndarray, axis: int) -> np.ndarray:
    """``max(a[lo_j:hi_j])`` along ``axis`` for every j, with a sparse table of maxima
    over power-of-two windows (memory ~ ``a.size * log2(n)``, however many and however
    wide the ranges). Empty ranges give an arbitrary element; callers mask them.

    Gathers are ``np.take`` and the ranges are grouped by window level, then put back in
    order with one more take: numpy's fancy indexing copies one slice per index, which
    for the narrow slices of a tall output costs ten times as much."""
    a = np.moveaxis(a, axis, 0)
    n = a.shape[0]
    lo = np.minimum(lo, n - 1)
    hi = np.maximum(hi, lo + 1)
    level_of = np.frexp((hi - lo).astype(np.float64))[1] - 1  # floor(log2(length))
    if lo.size == 0:
        return np.moveaxis(np.empty((0, *a.shape[1:]), dtype=a.dtype), 0, axis)
    counts = np.bincount(level_of)
    one_level = np.count_nonzero(counts) == 1  # then the order is already grouped
    order = None if one_level else np.argsort(level_of.astype(np.int8), kind="stable")
    ends = np.cumsum(counts)
    grouped = np.empty((lo.size, *a.shape[1:]), dtype=a.dtype)
    table, span, start = a, 1, 0
    for level, end in enumerate(ends.tolist()):
        if level:
            table = np.maximum(table[:-span], table[span:])
            span *= 2
        if end > start:
            group = slice(start, end) if order is None else order[start:end]
            window = grouped[start:end]
            window[...] = np.take(table, lo[group], axis=0)
            np.maximum(window, np.take(table, hi[group] - span, axis=0), out=window)
        start = end
    if order is not None:
        position = np.empty_like(order)
        position[order] = np.arange(order.size)
        grouped = np.take(grouped, position, axis=0)
    return np.moveaxis(grouped, 0, axis)


_WORK_LIMIT = 1 << 26
"""ROI_ALIGN's bound on one box's work (4 corners x samples x depth elements): blocks keep
its memory small, this keeps its time to about a second."""


def _execute_roi_pooling(ctx: OperationContext) -> list[np.ndarray]:
    nchw = _layout(ctx, 7)
    x = _to_nhwc(ctx.value(0), nchw)
    n, h, w, c = x.shape
    out_h, out_w = ctx.scalar(3), ctx.scalar(4)
    ids = ctx.value(2).astype(np.int64)
    _check_batch_ids(ctx, ids, n, "input 2 (batch index)")
    rt = _roi_dtype(ctx)
    boxes, _, _ = _rois_in_feature_map(ctx, rt, h, w)
    empty_value = ctx.input_zero_point(0) if ctx.input_type(0) in _Q8 else 0
    # Tiles of about _BLOCK_ELEMENTS output elements: the bin edges and the pooled
    # intermediates are per tile (a tiny box can have hundreds of millions of bins).
    bw = out_w if out_w * c <= _BLOCK_ELEMENTS else max(1, _BLOCK_ELEMENTS // c)
    bh = max(1, _BLOCK_ELEMENTS // (bw * c))
    maps = _Maps.of(x)

    def pool(boxes: np.ndarray, ids: np.ndarray) -> np.ndarray:
        out = np.empty((len(ids), out_h, out_w, c), dtype=x.dtype)
        w0, h0, w1, h1 = round_half_away(boxes.astype(F32)).astype(np.int64).T
        with np.errstate(over="ignore"):  # a float16 output size over 65504 is inf
            step_w = (np.maximum(w1 - w0 + 1, 1).astype(rt) / rt(out_w)).astype(rt)
            step_h = (np.maximum(h1 - h0 + 1, 1).astype(rt) / rt(out_h)).astype(rt)
        plan, work = _pool_plan((step_h, h0, out_h, h), (step_w, w0, out_w, w), c, rt)
        for r in np.flatnonzero(plan == _ONE_BOX).tolist():
            for j0 in range(0, out_w, bw):
                cols = range(j0, min(j0 + bw, out_w))
                ws, we = _pool_bins(step_w[r], w0[r], cols, w, rt)
                for i0 in range(0, out_h, bh):
                    rows = range(i0, min(i0 + bh, out_h))
                    hs, he = _pool_bins(step_h[r], h0[r], rows, h, rt)
                    tile = out[r, i0 : rows.stop, j0 : cols.stop]
                    tile[...] = _pool_tile(x[ids[r]], hs, he, ws, we, empty_value)
        for run in _box_runs(np.flatnonzero(plan != _ONE_BOX), work):
            rows = _pool_bins(step_h[run, None], h0[run, None], range(out_h), h, rt)
            cols = _pool_bins(step_w[run, None], w0[run, None], range(out_w), w, rt)
            by_columns = plan[run] == _COLUMNS_FIRST
            out[run] = _pool_run(maps, ids[run], rows, cols, by_columns, empty_value)
        return out

    out = np.empty((len(ids), out_h, out_w, c), dtype=x.dtype)
    return [_from_nhwc(_each_box_chunk(boxes, ids, out, pool), nchw)]


_ONE_BOX, _ROWS_FIRST, _COLUMNS_FIRST = -1, 0, 1  # _pool_plan's choices

_POOL_RUN_WORK = 1 << 15
"""ROI_POOLING computes the boxes whose window gathers (:func:`_pool_run`: two windows
per bin and axis, which overlap) are at most this many elements in runs of boxes; larger
boxes are faster one at a time, with range_max's sparse tables over their crops."""


def _pool_plan(rows: tuple, cols: tuple, depth: int, rt: type) -> tuple[np.ndarray, np.ndarray]:
    """How ROI_POOLING computes each box, and the box's work (elements) in a run: in runs
    of boxes reducing along columns or rows first (the axis :func:`_pool_tile` would
    pick), or one at a time (``_ONE_BOX``): boxes with more than one tile, non-finite
    bin edges (float16) or more work than a block. ``rows`` and ``cols`` are (steps,
    starts, bins, map size) along each axis. Bin edges grow with the bin index, so the
    first and the last give the crop."""
    crops, bins = [], []
    finite = True
    for step, start, count, size in (rows, cols):
        ends = np.concatenate([_arange(0, 1, rt), _arange(count, count + 1, rt)])
        edges = _pool_edges(step[:, None], start[:, None], ends, rt)
        ok = np.isfinite(edges).all(axis=1)
        edges = np.where(ok[:, None], edges, 0)
        first = np.minimum(np.floor(edges[:, 0]).astype(np.int64), size)
        last = np.minimum(np.ceil(edges[:, 1]).astype(np.int64), size)
        finite &= ok
        crops.append(last - first)
        bins.append(count)
    (crop_h, crop_w), (out_h, out_w) = crops, bins
    # _pool_run's gathers: two windows per bin and axis, none longer than its bin (or 1
    # for an empty bin); consecutive bins share at most one element.
    work = 4.0 * (crop_h + 2 * out_h) * (crop_w + 2 * out_w) * depth
    small = work <= min(_batch_limit(), _POOL_RUN_WORK)
    runs = finite & small & (out_h * out_w * depth <= _BLOCK_ELEMENTS)
    first = np.where(crop_h * out_w <= out_h * crop_w, _COLUMNS_FIRST, _ROWS_FIRST)
    return np.where(runs, first, _ONE_BOX), work


def _pool_run(
    maps: _Maps, ids, rows: tuple, cols: tuple, by_columns: np.ndarray, empty_value
) -> np.ndarray:
    """:func:`_pool_tile` for a run of boxes on maps ``ids``: ``rows`` and ``cols`` are
    each box's (lo, hi) bins, shape (boxes, bins), and ``by_columns`` whether it reduces
    along columns first. Result (boxes, row bins, column bins, depth).

    Every bin's max is range_max's, bit for bit (NaNs and signed zeros included): along
    one axis, the max of the two power-of-two windows covering the bin, each reduced as
    the sparse table is built (max of adjacent pairs, then of pairs of those...); along
    two, that of the first axis at each row (column) of the second axis's windows, then
    along the second. Bins are gathered in groups of equal window sizes and order."""
    (r_lo, r_hi), (c_lo, c_hi) = rows, cols
    boxes, n_rows, n_cols = len(ids), r_lo.shape[1], c_lo.shape[1]
    empty_rows, empty_cols = r_hi <= r_lo, c_hi <= c_lo
    # Empty bins read element 0 (masked below).
    r_lo, r_hi = np.where(empty_rows, 0, r_lo), np.where(empty_rows, 1, r_hi)
    c_lo, c_hi = np.where(empty_cols, 0, c_lo), np.where(empty_cols, 1, c_hi)
    r_level = np.frexp((r_hi - r_lo).astype(np.float64))[1] - 1  # floor(log2(length))
    c_level = np.frexp((c_hi - c_lo).astype(np.float64))[1] - 1
    # Per bin (box, row bin, column bin), flat: the windows' first rows (flat indexes in
    # the maps) and columns, (bins, 2) each, and the group (window sizes and order).
    row_starts = maps.rows(ids, np.stack([r_lo, r_hi - (1 << r_level)], axis=2).reshape(boxes, -1))
    row_starts = row_starts.reshape(boxes, n_rows, 1, 2)
    col_starts = np.stack([c_lo, c_hi - (1 << c_level)], axis=2).reshape(boxes, 1, n_cols, 2)
    shape = (boxes, n_rows, n_cols, 2)
    row_starts = np.broadcast_to(row_starts, shape).reshape(-1, 2)
    col_starts = np.broadcast_to(col_starts, shape).reshape(-1, 2)
    # With one-element windows along either axis both orders give the same max.
    group = r_level[:, :, None] * 64 + c_level[:, None, :]
    group = (group * 2 + (by_columns[:, None, None] & (group % 64 > 0) & (group >= 64))).ravel()
    pooled = np.empty((group.size, maps.flat.shape[1]), maps.flat.dtype)
    keys = np.unique(group).tolist()
    for key in keys:
        sel = slice(None) if len(keys) == 1 else np.flatnonzero(group == key)
        r_width, c_width = 1 << (key >> 7), 1 << ((key >> 1) & 63)
        offsets = np.arange(r_width)[:, None, None] * maps.width + np.arange(c_width)
        starts = row_starts[sel][:, :, None, None, None] + col_starts[sel][:, None, None, :, None]
        v = maps.take(starts + offsets)  # (bins, row window, row, column window, column, depth)
        if key & 1:
            pooled[sel] = _windows_max(_windows_max(v, 4), 2)
        else:
            pooled[sel] = _windows_max(_windows_max(v, 2), 2)
    pooled = pooled.reshape(boxes, n_rows, n_cols, -1)
    pooled[empty_rows] = empty_value
    pooled.swapaxes(1, 2)[empty_cols] = empty_value
    return pooled


def _windows_max(v: np.ndarray, axis: int) -> np.ndarray:
    """range_max of ranges whose two windows are along ``axis - 1`` (left, right) and
    their elements along ``axis`` (a power of two long): each window's max as a sparse
    table builds it, then the max of the two. Both axes are removed."""
    lead = (slice(None),) * axis
    while v.shape[axis] > 1:
        v = np.maximum(v[(*lead, slice(0, None, 2))], v[(*lead, slice(1, None, 2))])
    v = v[(*lead, 0)]
    return np.maximum(v[(*lead[1:], 0)], v[(*lead[1:], 1)])


def _pool_tile(img, hs, he, ws, we, empty_value) -> np.ndarray:
    """Max of ``img`` over each bin [hs, he) x [ws, we) (empty bins: ``empty_value``).
    Intermediates: the crop's sparse tables (at most twice the crop, a view of the input)
    and the first reduction, which holds at most max(input, tile) elements."""
    empty_rows, empty_cols = he <= hs, we <= ws
    if empty_rows.all() or empty_cols.all():
        return np.full((hs.size, ws.size, img.shape[2]), empty_value, dtype=img.dtype)
    r0, r1 = int(hs.min()), int(he.max())
    c0, c1 = int(ws.min()), int(we.max())
    crop = img[r0:r1, c0:c1]
    # Reduce first along the axis that leaves the smaller intermediate.
    if crop.shape[0] * ws.size <= hs.size * crop.shape[1]:
        pooled = range_max(range_max(crop, ws - c0, we - c0, 1), hs - r0, he - r0, 0)
    else:
        pooled = range_max(range_max(crop, hs - r0, he - r0, 0), ws - c0, we - c0, 1)
    pooled[empty_rows] = empty_value
    pooled[:, empty_cols] = empty_value
    return pooled


def _check_work(ctx: OperationContext, elements: int) -> None:
    """Bounded resources: refuse per-box work beyond :data:`_WORK_LIMIT`."""
    if elements > _WORK_LIMIT:
        raise _op_failed(
            ctx,
            f"one box needs {elements} intermediate elements, more than the reference "
            f"driver allows ({_WORK_LIMIT})",
        )


def _roi_pooling_signatures() -> tuple[Signature, ...]:
    i32, f32 = _T.INT32, _T.FLOAT32
    sigs = []
    for t in _FLOAT_TENSORS:
        s = _float_scalar(t)
        sigs.append(Signature((t, t, _T.TENSOR_INT32, i32, i32, s, s, _T.BOOL), (t,), V.V1_2))
    for q in _Q8:
        sigs.append(
            Signature(
                (q, _T.TENSOR_QUANT16_ASYMM, _T.TENSOR_INT32, i32, i32, f32, f32, _T.BOOL),
                (q,),
                _quant_version(q),
            )
        )
    return tuple(sigs)


ROI_POOLING = OperationDeclaration(
    OperationType.ROI_POOLING,
    _roi_pooling_signatures(),
    infer_shapes=lambda ctx: _infer_roi(ctx, 7),
    execute=_execute_roi_pooling,
    validate=_validate_roi_pooling,
    summary=(
        "Max-pools each region of interest of its batch's feature map into a fixed-size "
        "grid of bins (Fast R-CNN's RoIPool)."
    ),
    notes=("An empty bin gives 0 (the zero point when quantized), as Android.",),
)


# ---------------------------------------------------------------------------------------
# HEATMAP_MAX_KEYPOINT
# ---------------------------------------------------------------------------------------


def _validate_heatmap(ctx: OperationContext) -> None:
    _check_box_input(ctx, 1, "boxes")
    _check_box_output(ctx, 1, "keypoints")


def _infer_heatmap(ctx: OperationContext) -> list[Shape]:
    hm = _check_rank(ctx, 0, 4, "heatmap")
    boxes = _check_rank(ctx, 1, 2, "boxes")
    nchw = _layout(ctx, 2)
    num_boxes, size = hm[0], hm[2]
    keypoints = hm[1] if nchw else hm[3]
    other = hm[3] if nchw else hm[1]
    ctx.check(
        other == size and size >= 2,
        f"input 0 (heatmap) must be square with size >= 2, got {list(hm)}",
    )
    ctx.check(
        boxes == (num_boxes, 4),
        f"input 1 (boxes) must have shape [{num_boxes}, 4], got {list(boxes)}",
    )
    return [(num_boxes, keypoints), (num_boxes, keypoints, 2)]


# solveForDelta's singularity tolerances (atol, rtol): Android's execute passes 1e-3 for
# TENSOR_FLOAT16 heatmaps and 1e-5 for float32 and quantized ones.
HEATMAP_TOLERANCE_FLOAT32 = (1e-5, 1e-5)
HEATMAP_TOLERANCE_FLOAT16 = (1e-3, 1e-3)


def heatmap_max_keypoints(
    heatmap: np.ndarray,
    boxes: np.ndarray,
    tolerance: tuple[float, float] = HEATMAP_TOLERANCE_FLOAT32,
) -> tuple[np.ndarray, np.ndarray]:
    """``heatmapMaxKeypointFloat32Nhwc`` for heatmap (boxes, size, size, keypoints) and
    boxes (boxes, 4): the quadratic-fit score (boxes, keypoints) and the (x, y) keypoint
    (boxes, keypoints, 2) per box and keypoint, all in float32. ``tolerance`` is the
    (fpAtol, fpRtol) pair below which the Hessian counts as singular."""
    hm = np.asarray(heatmap, dtype=F32)
    nb, size, _, nk = hm.shape
    flat = np.transpose(hm, (0, 3, 1, 2)).reshape(nb, nk, size * size)
    # First strictly-greater maximum above -FLT_MAX (NaN never wins), else index 0.
    lowest = F32(-np.finfo(F32).max)
    clean = np.where(np.isnan(flat), F32(-np.inf), flat)
    idx = np.argmax(clean, axis=2)
    best = np.take_along_axis(clean, idx[..., None], axis=2)[..., 0]
    found = best > lowest
    idx = np.where(found, idx, 0)
    max_score = np.where(found, best, lowest).astype(F32)
    mh, mw = idx // size, idx % size
    # The 3x3 patch around each maximum, mirrored at the edges (row -1 reads row 1, row
    # size reads row size - 2), gathered from the flat heatmap with one 1-D take per cell.
    neighbours = (np.where(mh == 0, 1, mh - 1), mh, np.where(mh == size - 1, size - 2, mh + 1))
    rows = [(r * size).astype(np.intp) for r in neighbours]
    cols = (np.where(mw == 0, 1, mw - 1), mw, np.where(mw == size - 1, size - 2, mw + 1))
    first = np.arange(nb * nk, dtype=np.intp).reshape(nb, nk) * (size * size)
    values = flat.reshape(-1)
    grid = np.empty((3, 3, nb, nk), dtype=F32)
    for i, row in enumerate(rows):
        row += first
        for j, col in enumerate(cols):
            grid[i, j] = np.take(values, row + col)
    delta_x, delta_y, score = _solve_for_delta(grid, max_score, *tolerance)
    bx = np.asarray(boxes, dtype=F32)
    w0, h0 = bx[:, 0:1], bx[:, 1:2]
    roi_w, roi_h = bx[:, 2:3] - w0, bx[:, 3:4] - h0
    fsize = F32(size)
    w_rel = (mw.astype(F32) + delta_x + F32(0.5)) / fsize
    h_rel = (mh.astype(F32) + delta_y + F32(0.5)) / fsize
    keypoints = np.stack([w_rel * roi_w + w0, h_rel * roi_h + h0], axis=-1).astype(F32)
    return score.astype(F32), keypoints


def _solve_for_delta(grid: np.ndarray, max_score: np.ndarray, atol: float, rtol: float):
    """``solveForDelta``: fit a quadratic to the 3x3 patch (Taylor expansion at the
    centre) and move the maximum to its vertex (at most 1.5 cells away). A singular
    Hessian (``|det| < atol + rtol * a00 * a11``) leaves the maximum where it is."""
    g = grid
    two, four, half_cell = F32(2), F32(4), F32(1.5)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        b0 = -(g[1, 2] - g[1, 0]) / two
        b1 = -(g[2, 1] - g[0, 1]) / two
        a00 = g[1, 0] - two * g[1, 1] + g[1, 2]
        a01 = (g[2, 2] - g[2, 0] - g[0, 2] + g[0, 0]) / four
        a11 = g[0, 1] - two * g[1, 1] + g[2, 1]
        cross1, cross2 = a00 * a11, a01 * a01
        det = cross1 - cross2
        singular = np.abs(det) < (F32(atol) + F32(rtol) * cross1)
        d0 = (a11 * b0 - a01 * b1) / det
        d1 = (a00 * b1 - a01 * b0) / det
        far = (np.abs(d0) > half_cell) | (np.abs(d1) > half_cell)
        scale = half_cell / np.maximum(np.abs(d0), np.abs(d1))
        d0 = np.where(far, d0 * scale, d0)
        d1 = np.where(far, d1 * scale, d1)
        fitted = (
            g[1, 1]
            - b0 * d0
            - b1 * d1
            + ((d0 * a00 + d1 * a01) * d0 + (d0 * a01 + d1 * a11) * d1) / two
        )
    d0 = np.where(singular, F32(0), d0).astype(F32)
    d1 = np.where(singular, F32(0), d1).astype(F32)
    score = np.where(singular, max_score, fitted).astype(F32)
    return d0, d1, score


def _execute_heatmap(ctx: OperationContext) -> list[np.ndarray]:
    nchw = _layout(ctx, 2)
    boxes = _float_input(ctx, 1)
    _check_rois_ordered(ctx, boxes, "input 1 (boxes)")
    # Float16 heatmaps get a looser singularity test (Android: fpAtol = fpRtol = 1e-3f).
    tolerance = (
        HEATMAP_TOLERANCE_FLOAT16
        if ctx.input_type(0) == _T.TENSOR_FLOAT16
        else HEATMAP_TOLERANCE_FLOAT32
    )
    num_boxes, c, h, w = ctx.value(0).shape
    keypoints = c if nchw else w
    score = np.empty((num_boxes, keypoints), dtype=dtype_of(ctx, 0))
    location = np.empty((num_boxes, keypoints, 2), dtype=dtype_of(ctx, 1))
    for block in item_blocks(
        num_boxes, c * h * w, _BOX_BLOCK_ELEMENTS
    ):  # box by box: any blocking gives the same
        hm = _float_input(ctx, 0, block)
        if nchw:
            hm = np.transpose(hm, (0, 2, 3, 1))
        block_score, block_location = heatmap_max_keypoints(hm, boxes[block], tolerance)
        score[block] = _float_output(ctx, 0, block_score)
        location[block] = _float_output(ctx, 1, block_location)
    return [score, location]


def _heatmap_signatures() -> tuple[Signature, ...]:
    sigs = [Signature((t, t, _T.BOOL), (t, t), V.V1_2) for t in _FLOAT_TENSORS]
    q16 = _T.TENSOR_QUANT16_ASYMM
    sigs += [Signature((q, q16, _T.BOOL), (q, q16), _quant_version(q)) for q in _Q8]
    return tuple(sigs)


HEATMAP_MAX_KEYPOINT = OperationDeclaration(
    OperationType.HEATMAP_MAX_KEYPOINT,
    _heatmap_signatures(),
    infer_shapes=_infer_heatmap,
    execute=_execute_heatmap,
    validate=_validate_heatmap,
    summary=(
        "Locates the maximum of each keypoint heatmap with sub-cell precision "
        "(quadratic fit) and maps it into its box."
    ),
)


# ---------------------------------------------------------------------------------------
# BOX_WITH_NMS_LIMIT
# ---------------------------------------------------------------------------------------


def _validate_box_nms(ctx: OperationContext) -> None:
    _check_box_input(ctx, 1, "roi")
    _check_box_output(ctx, 1, "output boxes")
    _check_same_quant(ctx, 0, 0, "output scores")
    kernel = ctx.scalar(5)
    ctx.check(
        kernel in (HARD, LINEAR, GAUSSIAN),
        f"input 5 (NMS kernel) must be 0 (hard), 1 (linear) or 2 (gaussian), got {kernel}",
        deferrable=True,
    )
    if kernel == GAUSSIAN:
        sigma = ctx.scalar(7)
        ctx.check(
            sigma > 0, f"input 7 (gaussian sigma) must be positive, got {sigma}", deferrable=True
        )


def _infer_box_nms(ctx: OperationContext) -> list[Shape | None]:
    scores = _check_rank(ctx, 0, 2, "scores")
    roi = _check_rank(ctx, 1, 2, "roi")
    batches = _check_rank(ctx, 2, 1, "batch indexes")
    num_rois, num_classes = scores
    ctx.check(num_classes > 1, f"input 0 (scores) needs more than one class, got {list(scores)}")
    ctx.check(
        roi == (num_rois, num_classes * 4),
        f"input 1 (roi) must have shape [{num_rois}, {num_classes * 4}], got {list(roi)}",
    )
    ctx.check(batches[0] == num_rois, f"input 2 must have shape [{num_rois}], got {list(batches)}")
    return [None, None, None, None]  # the number of kept boxes depends on the data


def box_with_nms_limit(
    scores: np.ndarray,
    rois: np.ndarray,
    batch_ids: np.ndarray,
    score_threshold: float,
    max_detections: int,
    kernel: int,
    iou_threshold: float,
    sigma: float,
    nms_score_threshold: float,
    boxes_to_float32: Callable[[np.ndarray], np.ndarray] = lambda v: np.asarray(v, dtype=F32),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``boxWithNmsLimitFloat32Compute`` plus output assembly, on float32 data. ``rois``
    may be stored values that ``boxes_to_float32`` converts: only the boxes of each
    class's candidates are converted, not all of them at once.

    Per run of equal batch ids (boxes of a batch are grouped), per class except class 0,
    boxes scoring above ``score_threshold`` go through soft/hard NMS (at most
    ``max_detections`` per class, negative = unlimited); the batch's survivors are cut to
    the best ``max_detections`` and ordered by class, then score. Returns (scores, boxes
    (n, 4), classes, batch ids) of the kept boxes."""
    scores = np.array(scores, dtype=F32)  # decayed in place by soft NMS
    num_rois, num_classes = scores.shape
    boxes = np.asarray(rois).reshape(num_rois, num_classes, 4)
    ids = np.asarray(batch_ids)
    run_starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if num_rois else []
    run_ends = [*run_starts[1:], num_rois]
    out_rows, out_classes, out_batches = [], [], []
    for s, e in zip(run_starts, run_ends):  # one pass per batch
        kept_rows, kept_cls = [], []
        for c in range(1, num_classes):  # class 0 is the background
            cand = np.flatnonzero(scores[s:e, c] > F32(score_threshold))
            cand += s
            if cand.size == 0:
                continue
            cls_scores = scores[cand, c].copy()
            # Coordinate by coordinate into rows of one coordinate: NMS reads the
            # columns of the transposed view without copying them, and no float (n, 4)
            # copy of all the candidates' boxes lives beside them.
            coords = np.empty((4, cand.size), dtype=F32)
            for k in range(4):
                coords[k] = boxes_to_float32(boxes[cand, c, k])
            keep = nms_single_class(
                cls_scores,
                coords.T,
                max_detections,
                iou_threshold,
                kernel=kernel,
                sigma=sigma,
                score_threshold=nms_score_threshold,
            )
            scores[cand, c] = cls_scores
            kept_rows.append(cand[keep])
            kept_cls.append(np.full(keep.size, c))
        if not kept_rows:
            continue
        rows = np.concatenate(kept_rows)
        cls = np.concatenate(kept_cls)
        order = _stable_desc(scores[rows, cls])
        if 0 <= max_detections < order.size:
            order = order[:max_detections]
        rows, cls = rows[order], cls[order]
        final = np.lexsort((-scores[rows, cls].astype(np.float64), cls))
        out_rows.append(rows[final])
        out_classes.append(cls[final])
        out_batches.append(np.full(final.size, ids[s]))
    if not out_rows:
        return (
            np.zeros(0, F32),
            np.zeros((0, 4), F32),
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
        )
    rows = np.concatenate(out_rows)
    cls = np.concatenate(out_classes)
    return (
        scores[rows, cls],
        boxes_to_float32(boxes[rows, cls]),
        cls.astype(np.int32),
        np.concatenate(out_batches).astype(np.int32),
    )


def _execute_box_nms(ctx: OperationContext) -> list[np.ndarray]:
    scores = _float_input(ctx, 0)
    rois, rois_to_float32 = ctx.value(1), _float_converter(ctx, 1)
    ids = ctx.value(2)
    _check_rois_ordered(ctx, rois, "input 1 (roi)", rois_to_float32)
    out_scores, out_boxes, classes, batches = box_with_nms_limit(
        scores,
        rois,
        ids,
        ctx.scalar(3),
        ctx.scalar(4),
        ctx.scalar(5),
        ctx.scalar(6),
        ctx.scalar(7),
        ctx.scalar(8),
        rois_to_float32,
    )
    return [
        _float_output(ctx, 0, out_scores),
        _float_output(ctx, 1, out_boxes),
        classes,
        batches,
    ]


def _box_nms_signatures() -> tuple[Signature, ...]:
    i32, ti32 = _T.INT32, _T.TENSOR_INT32
    sigs = []
    for t in _FLOAT_TENSORS:
        s = _float_scalar(t)
        sigs.append(Signature((t, t, ti32, s, i32, i32, s, s, s), (t, t, ti32, ti32), V.V1_2))
    q16, f = _T.TENSOR_QUANT16_ASYMM, _T.FLOAT32
    for q in _Q8:
        sigs.append(
            Signature((q, q16, ti32, f, i32, i32, f, f, f), (q, q16, ti32, ti32), _quant_version(q))
        )
    return tuple(sigs)


BOX_WITH_NMS_LIMIT = OperationDeclaration(
    OperationType.BOX_WITH_NMS_LIMIT,
    _box_nms_signatures(),
    infer_shapes=_infer_box_nms,
    execute=_execute_box_nms,
    validate=_validate_box_nms,
    summary=(
        "Per-class hard, linear or gaussian (soft) non-maximum suppression with a score "
        "threshold and a per-batch detection limit; the output count depends on the data."
    ),
    notes=(
        "Outputs are sized by the kernel; no detections give zero-sized outputs.",
        "Gaussian sigma must be positive (Android divides by it unchecked).",
        "Ties in the final sorts are stable (Android's std::sort is not beyond 30 boxes).",
    ),
)


# ---------------------------------------------------------------------------------------
# DETECTION_POSTPROCESSING
# ---------------------------------------------------------------------------------------


def _validate_detection(ctx: OperationContext) -> None:
    for i, what in ((3, "y scale"), (4, "x scale"), (5, "h scale"), (6, "w scale")):
        v = ctx.scalar(i)
        ctx.check(v > 0, f"input {i} ({what}) must be positive, got {v}", deferrable=True)
    # Android's prepare (and the doc: "only used when input7 is ...") checks only the
    # limit the chosen NMS uses: per class when regular, classes per box when fast.
    used = (10, "max detections per class") if ctx.scalar(7) else (9, "max classes per detection")
    for i, what in ((8, "max number of detections"), used):
        v = ctx.scalar(i)
        ctx.check(v > 0, f"input {i} ({what}) must be positive, got {v}", deferrable=True)
    for i, what in ((11, "score threshold"), (12, "IoU threshold")):
        v = ctx.scalar(i)
        ctx.check(v >= 0, f"input {i} ({what}) must be >= 0, got {v}", deferrable=True)


def _infer_detection(ctx: OperationContext) -> list[Shape]:
    scores = _check_rank(ctx, 0, 3, "class scores")
    deltas = _check_rank(ctx, 1, 3, "box encodings")
    anchors = _check_rank(ctx, 2, 2, "anchors")
    batches, num_anchors, num_classes = scores
    ctx.check(num_classes > 1, f"input 0 needs a background and a class, got {list(scores)}")
    ctx.check(
        deltas[:2] == (batches, num_anchors) and deltas[2] >= 4,
        f"input 1 (box encodings) must have shape [{batches}, {num_anchors}, >= 4], "
        f"got {list(deltas)}",
    )
    ctx.check(
        anchors == (num_anchors, 4),
        f"input 2 (anchors) must have shape [{num_anchors}, 4], got {list(anchors)}",
    )
    detections = ctx.scalar(8)
    if not ctx.scalar(7):  # fast NMS reports up to max_classes_per_detection per box
        detections *= ctx.scalar(9)
    return [(batches, detections), (batches, detections, 4), (batches, detections), (batches,)]


def decode_center_size(
    deltas: np.ndarray, anchors: np.ndarray, scales: tuple[float, float, float, float]
) -> np.ndarray:
    """Box encodings (y, x, h, w) relative to anchors (ctr_y, ctr_x, h, w) to corner
    boxes (y1, x1, y2, x2), in float32 with Android's operation order."""
    sy, sx, sh, sw = (F32(s) for s in scales)
    d = np.asarray(deltas, dtype=F32)
    a = np.asarray(anchors, dtype=F32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = a[:, 0] + a[:, 2] * d[..., 0] / sy
        x = a[:, 1] + a[:, 3] * d[..., 1] / sx
        h_half = a[:, 2] * np.exp(d[..., 2] / sh) * F32(0.5)
        w_half = a[:, 3] * np.exp(d[..., 3] / sw) * F32(0.5)
    return np.stack([y - h_half, x - w_half, y + h_half, x + w_half], axis=-1).astype(F32)


def _execute_detection(ctx: OperationContext) -> list[np.ndarray]:
    scores = np.asarray(ctx.value(0), dtype=F32)
    deltas = np.asarray(ctx.value(1), dtype=F32)
    anchors = np.asarray(ctx.value(2), dtype=F32)
    batches, num_anchors, num_classes = scores.shape
    regular = bool(ctx.scalar(7))
    max_det, max_cls, max_per_cls = ctx.scalar(8), ctx.scalar(9), ctx.scalar(10)
    score_thr, iou_thr = F32(ctx.scalar(11)), ctx.scalar(12)
    label_offset = 0 if ctx.scalar(13) else 1
    slots = ctx.output_shapes[0][1]
    out_scores = np.zeros((batches, slots), F32)
    out_boxes = np.zeros((batches, slots, 4), F32)
    out_classes = np.zeros((batches, slots), np.int32)
    out_count = np.zeros(batches, np.int32)
    boxes = decode_center_size(deltas[..., :4], anchors, tuple(ctx.scalar(i) for i in (3, 4, 5, 6)))
    for b in range(batches):
        sc = scores[b]
        if regular:
            anchors_kept, classes_kept = [], []
            for c in range(1, num_classes):  # class 0 is the background
                cand = np.flatnonzero(sc[:, c] > score_thr)
                keep = nms_single_class(sc[cand, c].copy(), boxes[b, cand], max_per_cls, iou_thr)
                anchors_kept.append(cand[keep])
                classes_kept.append(np.full(keep.size, c))
            rows = np.concatenate(anchors_kept)
            cls = np.concatenate(classes_kept)
            order = _stable_desc(sc[rows, cls])[:max_det]
            rows, cls = rows[order], cls[order]
            k = rows.size
            out_scores[b, :k] = sc[rows, cls]
            out_boxes[b, :k] = boxes[b, rows]
            out_classes[b, :k] = cls - label_offset
            out_count[b] = k
        else:
            per_box = min(num_classes - 1, max_cls)
            best = sc[:, 1:].max(axis=1) if num_anchors else np.zeros(0, F32)
            cand = np.flatnonzero(best > score_thr)
            keep = cand[nms_single_class(best[cand].copy(), boxes[b, cand], max_det, iou_thr)]
            # Classes of each kept box, best first (stable: lower class wins a tie).
            ranked = np.argsort(-sc[keep, 1:].astype(np.float64), axis=1, kind="stable")
            top = ranked[:, :per_box] + 1
            k = keep.size * per_box
            out_scores[b, :k] = np.take_along_axis(sc[keep], top, axis=1).reshape(-1)
            out_boxes[b, :k] = np.repeat(boxes[b, keep], per_box, axis=0)
            out_classes[b, :k] = (top - label_offset).reshape(-1)
            out_count[b] = k
    dt = dtype_of(ctx, 0)
    return [out_scores.astype(dt), out_boxes.astype(dt), out_classes, out_count]


def _detection_signatures() -> tuple[Signature, ...]:
    i32, b = _T.INT32, _T.BOOL
    sigs = []
    for t in _FLOAT_TENSORS:
        s = _float_scalar(t)
        sigs.append(
            Signature(
                (t, t, t, s, s, s, s, b, i32, i32, i32, s, s, b),
                (t, t, _T.TENSOR_INT32, _T.TENSOR_INT32),
                V.V1_2,
            )
        )
    return tuple(sigs)


DETECTION_POSTPROCESSING = OperationDeclaration(
    OperationType.DETECTION_POSTPROCESSING,
    _detection_signatures(),
    infer_shapes=_infer_detection,
    execute=_execute_detection,
    validate=_validate_detection,
    summary=(
        "SSD post-processing: decodes box encodings against anchors, then regular "
        "(per-class) or fast (best-class) hard NMS into fixed-size, zero-padded outputs."
    ),
)


# ---------------------------------------------------------------------------------------
# GENERATE_PROPOSALS
# ---------------------------------------------------------------------------------------


def _validate_proposals(ctx: OperationContext) -> None:
    _check_box_input(ctx, 2, "anchors")
    _check_box_input(ctx, 3, "image info")
    _check_box_output(ctx, 1, "output boxes")
    _check_same_quant(ctx, 0, 0, "output scores")
    for i, what in ((4, "height stride"), (5, "width stride")):
        v = ctx.scalar(i)
        ctx.check(v > 0, f"input {i} ({what}) must be positive, got {v}", deferrable=True)


def _infer_proposals(ctx: OperationContext) -> list[Shape | None]:
    scores = _check_rank(ctx, 0, 4, "scores")
    deltas = _check_rank(ctx, 1, 4, "bounding box deltas")
    anchors = _check_rank(ctx, 2, 2, "anchors")
    info = _check_rank(ctx, 3, 2, "image info")
    nchw = _layout(ctx, 10)
    n, a, h, w = scores if nchw else (scores[0], scores[3], scores[1], scores[2])
    expect = (n, 4 * a, h, w) if nchw else (n, h, w, 4 * a)
    ctx.check(
        deltas == expect, f"input 1 (deltas) must have shape {list(expect)}, got {list(deltas)}"
    )
    ctx.check(anchors == (a, 4), f"input 2 (anchors) must have shape [{a}, 4], got {list(anchors)}")
    ctx.check(info == (n, 2), f"input 3 (image info) must have shape [{n}, 2], got {list(info)}")
    return [None, None, None]  # the number of proposals depends on the data


def generate_proposals(
    scores: np.ndarray,
    deltas: np.ndarray,
    anchors: np.ndarray,
    image_info: np.ndarray,
    stride_h: float,
    stride_w: float,
    pre_nms_top_n: int,
    post_nms_top_n: int,
    iou_threshold: float,
    min_size: float,
    check: Callable[[np.ndarray], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``generateProposalsNhwcFloat32Compute`` on float32 NHWC data: anchors tiled over
    the feature map, transformed by the deltas and clipped to the image, the best
    ``pre_nms_top_n`` kept (non-positive: all), boxes not wider/taller than ``min_size``
    or centred outside the image dropped, then hard NMS keeps at most
    ``post_nms_top_n`` (non-positive: all). Returns (scores, boxes, batch indexes)."""
    n, h, w, a = scores.shape
    anchors = np.asarray(anchors, dtype=F32)
    h_shift = np.arange(h).astype(F32) * F32(stride_h)
    w_shift = np.arange(w).astype(F32) * F32(stride_w)
    shift = np.stack(
        np.broadcast_arrays(
            w_shift[None, :, None],
            h_shift[:, None, None],
            w_shift[None, :, None],
            h_shift[:, None, None],
        ),
        axis=-1,
    )  # (h, w, 1, 4)
    base = (anchors[None, None, :, :] + shift).reshape(-1, 4).astype(F32)
    if check is not None:
        check(base)
    count = h * w * a
    out_s, out_b, out_i = [], [], []
    for b in range(n):  # one pass per batch
        sc = np.asarray(scores[b], dtype=F32).reshape(count)
        info = np.broadcast_to(np.asarray(image_info[b], dtype=F32), (count, 2))
        boxes = bbox_transform(base, np.asarray(deltas[b], dtype=F32).reshape(count, 4), info)
        select = np.arange(count)
        if 0 < pre_nms_top_n < count:
            select = _stable_desc(sc)[:pre_nms_top_n]
        bx = boxes[select]
        bw = bx[:, 2] - bx[:, 0]
        bh = bx[:, 3] - bx[:, 1]
        cx = bx[:, 0] + bw / F32(2)
        cy = bx[:, 1] + bh / F32(2)
        img_h, img_w = F32(image_info[b][0]), F32(image_info[b][1])
        ms = F32(min_size)
        select = select[(bw > ms) & (bh > ms) & (cx < img_w) & (cy < img_h)]
        limit = post_nms_top_n if post_nms_top_n > 0 else -1
        keep = select[nms_single_class(sc[select].copy(), boxes[select], limit, iou_threshold)]
        out_s.append(sc[keep])
        out_b.append(boxes[keep])
        out_i.append(np.full(keep.size, b, dtype=np.int32))
    if not out_s:
        return np.zeros(0, F32), np.zeros((0, 4), F32), np.zeros(0, np.int32)
    return np.concatenate(out_s), np.concatenate(out_b), np.concatenate(out_i)


def _execute_proposals(ctx: OperationContext) -> list[np.ndarray]:
    nchw = _layout(ctx, 10)
    scores = _to_nhwc(_float_input(ctx, 0), nchw)
    deltas = _to_nhwc(_float_input(ctx, 1), nchw)
    out_s, out_b, out_i = generate_proposals(
        scores,
        deltas,
        _float_input(ctx, 2),
        _float_input(ctx, 3),
        ctx.scalar(4),
        ctx.scalar(5),
        ctx.scalar(6),
        ctx.scalar(7),
        ctx.scalar(8),
        ctx.scalar(9),
        check=lambda boxes: _check_rois_ordered(ctx, boxes, "input 2 (anchors)"),
    )
    return [_float_output(ctx, 0, out_s), _float_output(ctx, 1, out_b), out_i]


def _proposal_signatures() -> tuple[Signature, ...]:
    i32, b = _T.INT32, _T.BOOL
    sigs = []
    for t in _FLOAT_TENSORS:
        s = _float_scalar(t)
        sigs.append(
            Signature((t, t, t, t, s, s, i32, i32, s, s, b), (t, t, _T.TENSOR_INT32), V.V1_2)
        )
    f, q16a = _T.FLOAT32, _T.TENSOR_QUANT16_ASYMM
    for q in _Q8:
        sigs.append(
            Signature(
                (q, q, _T.TENSOR_QUANT16_SYMM, q16a, f, f, i32, i32, f, f, b),
                (q, q16a, _T.TENSOR_INT32),
                _quant_version(q),
            )
        )
    return tuple(sigs)


GENERATE_PROPOSALS = OperationDeclaration(
    OperationType.GENERATE_PROPOSALS,
    _proposal_signatures(),
    infer_shapes=_infer_proposals,
    execute=_execute_proposals,
    validate=_validate_proposals,
    summary=(
        "Region proposal network post-processing: anchors tiled over the feature map, "
        "moved by the predicted deltas, clipped, filtered and thinned by hard NMS."
    ),
    notes=(
        "Outputs are sized by the kernel; no proposals give zero-sized outputs.",
        "Boxes are kept when width and height exceed min_size (strictly), as Android.",
    ),
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    ROI_ALIGN,
    ROI_POOLING,
    HEATMAP_MAX_KEYPOINT,
    AXIS_ALIGNED_BBOX_TRANSFORM,
    BOX_WITH_NMS_LIMIT,
    DETECTION_POSTPROCESSING,
    GENERATE_PROPOSALS,
)
