"""Detection and region operations: hand-computed cases, literal transcriptions of
Android's C++ loops on random data, degenerate boxes, quantized variants (signed =
unsigned - 128) and validation.

The ``cxx_*`` helpers are scalar, loop-by-loop transcriptions of the Android reference
kernels (float32 scalars, the C++ operation order); the kernels under test are vectorized
differently, so agreement is an independent check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import detection
from driver.operations.detection import (
    GAUSSIAN,
    HARD,
    LINEAR,
    iou_matrix,
    nms_single_class,
    range_max,
)
from driver.testing import (
    assert_example,
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)
from tests.operations.examples_detection import EXAMPLES

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
Q16A, Q16S = T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM
I32 = T.TENSOR_INT32
f32 = np.float32


def hal_error(fn) -> HalError:
    with pytest.raises(HalError) as info:
        fn()
    return info.value


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_examples(ex):
    assert_example(ex)


def test_examples_cover_every_operation_and_type():
    seen = {(ex.op, ex.inputs[0].type) for ex in EXAMPLES}
    for op in (
        O.ROI_ALIGN,
        O.ROI_POOLING,
        O.HEATMAP_MAX_KEYPOINT,
        O.BOX_WITH_NMS_LIMIT,
        O.GENERATE_PROPOSALS,
    ):
        for t in (F32, F16, Q8, Q8S):
            assert (op, t) in seen, (op.name, t.name)
    for t in (F32, F16):
        assert (O.DETECTION_POSTPROCESSING, t) in seen
    for t in (F32, F16, Q16A):
        assert (O.AXIS_ALIGNED_BBOX_TRANSFORM, t) in seen
    bbox_delta_types = {
        ex.inputs[1].type for ex in EXAMPLES if ex.op == O.AXIS_ALIGNED_BBOX_TRANSFORM
    }
    assert {Q8, Q8S} <= bbox_delta_types


# ---------------------------------------------------------------------------------------
# Literal transcriptions of Android's loops
# ---------------------------------------------------------------------------------------


def cxx_iou(r1, r2) -> f32:
    with np.errstate(invalid="ignore", divide="ignore"):
        area1 = (f32(r1[2]) - f32(r1[0])) * (f32(r1[3]) - f32(r1[1]))
        area2 = (f32(r2[2]) - f32(r2[0])) * (f32(r2[3]) - f32(r2[1]))
        x1, x2 = max(f32(r1[0]), f32(r2[0])), min(f32(r1[2]), f32(r2[2]))
        y1, y2 = max(f32(r1[1]), f32(r2[1])), min(f32(r1[3]), f32(r2[3]))
        w, h = max(x2 - x1, f32(0)), max(y2 - y1, f32(0))
        inter = w * h
        return f32(inter / (area1 + area2 - inter))


def cxx_nms(scores, boxes, max_det, iou_thr, kernel=None, sigma=1.0, score_thr=0.0):
    """hardNmsSingleClass / softNmsSingleClass, one swap at a time."""
    scores = [f32(s) for s in scores]
    n = len(scores)
    sel = list(range(n))
    start, end, done = 0, n, 0
    max_det = n if max_det < 0 else max_det
    while start < end and done < max_det:
        m = start
        for k in range(start + 1, end):
            if scores[sel[m]] < scores[sel[k]]:
                m = k
        sel[m], sel[start] = sel[start], sel[m]
        i = start + 1
        while i < end:
            iou = cxx_iou(boxes[sel[i]], boxes[sel[start]])
            if kernel is None:
                drop = iou >= f32(iou_thr)
            else:
                if kernel == HARD:
                    factor = f32(1) if iou < f32(iou_thr) else f32(0)
                else:
                    iou = f32(1) if math.isnan(iou) else iou  # documented NaN rule
                    if kernel == LINEAR:
                        factor = f32(1) if iou < f32(iou_thr) else f32(1) - iou
                    else:
                        factor = f32(np.exp(f32(-1) * iou * iou / f32(sigma)))
                scores[sel[i]] = f32(scores[sel[i]] * factor)
                drop = scores[sel[i]] < f32(score_thr)
            if drop:
                end -= 1
                sel[i], sel[end] = sel[end], sel[i]
            else:
                i += 1
        start += 1
        done += 1
    return sel[:start], scores


def random_boxes(rng, n, grid=6, size=4):
    xy = rng.integers(0, grid, (n, 2))
    wh = rng.integers(0, size, (n, 2))  # zero-size boxes included on purpose
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32)


@pytest.mark.parametrize("kernel", [None, HARD, LINEAR, GAUSSIAN])
def test_nms_matches_cxx_swap_loop_with_ties(kernel):
    rng = np.random.default_rng(7)
    for trial in range(25):
        n = int(rng.integers(1, 24))
        boxes = random_boxes(rng, n)
        scores = rng.choice(np.float32([0.2, 0.4, 0.6, 0.8]), n)  # many ties
        max_det = int(rng.integers(-1, n + 1))
        thr = float(rng.choice([0.0, 0.3, 0.5, 1.0, 1.5]))
        got_scores = scores.copy()
        got = nms_single_class(
            got_scores, boxes, max_det, thr, kernel=kernel, sigma=0.5, score_threshold=0.3
        )
        want, want_scores = cxx_nms(scores, boxes, max_det, thr, kernel, 0.5, 0.3)
        assert got.tolist() == want, (trial, kernel)
        np.testing.assert_array_equal(got_scores[got], np.float32(want_scores)[want])


def test_nms_uses_row_iou_beyond_the_matrix_limit(monkeypatch):
    import driver.operations.detection as det

    rng = np.random.default_rng(3)
    boxes = random_boxes(rng, 40, grid=10)
    scores = rng.random(40).astype(np.float32)
    full = nms_single_class(scores.copy(), boxes, -1, 0.4)
    monkeypatch.setattr(det, "_IOU_MATRIX_LIMIT", 4)
    assert nms_single_class(scores.copy(), boxes, -1, 0.4).tolist() == full.tolist()


def test_iou_matrix_matches_scalar_iou():
    rng = np.random.default_rng(5)
    boxes = random_boxes(rng, 12)
    m = iou_matrix(boxes)
    for i in range(12):
        for j in range(12):
            want = cxx_iou(boxes[j], boxes[i])
            if math.isnan(want):
                assert math.isnan(m[i, j])
            else:
                assert m[i, j] == want


# ---------------------------------------------------------------------------------------
# ROI_ALIGN
# ---------------------------------------------------------------------------------------


def roi_align(x, rois, ids, out_hw, strides=(1.0, 1.0), ratios=(2, 2), nchw=False, **kw):
    t = kw.pop("type", F32)
    roi_t = Q16A if t in (Q8, Q8S) else t
    s_t = T.FLOAT16 if t == F16 else T.FLOAT32
    n = len(ids)
    c = x.shape[1] if nchw else x.shape[3]
    dims = (n, c, *out_hw) if nchw else (n, *out_hw, c)
    return run_op(
        O.ROI_ALIGN,
        [
            tensor(t, x, scale=kw.get("in_scale", 0.0), zero_point=kw.get("in_zp", 0)),
            tensor(roi_t, rois, dims=(n, 4), scale=0.125 if roi_t == Q16A else 0.0),
            tensor(I32, ids, dims=(n,)),
            scalar(T.INT32, out_hw[0]),
            scalar(T.INT32, out_hw[1]),
            scalar(s_t, strides[0]),
            scalar(s_t, strides[1]),
            scalar(T.INT32, ratios[0]),
            scalar(T.INT32, ratios[1]),
            scalar(T.BOOL, nchw),
        ],
        [output(t, dims, scale=kw.get("out_scale", 0.0), zero_point=kw.get("out_zp", 0))],
        version=kw.get("version"),
    )[0]


def cxx_roi_align(x, rois, ids, out_h, out_w, h_stride, w_stride, rh_in, rw_in):
    """roiAlignNhwc<float, float>, loop by loop."""
    _, in_h, in_w, depth = x.shape
    hs, ws = f32(1.0) / f32(h_stride), f32(1.0) / f32(w_stride)
    out = np.zeros((len(rois), out_h, out_w, depth), np.float32)
    for r, roi in enumerate(rois):
        w0, h0, w1, h1 = f32(roi[0]) * ws, f32(roi[1]) * hs, f32(roi[2]) * ws, f32(roi[3]) * hs
        roi_w, roi_h = max(w1 - w0, f32(1)), max(h1 - h0, f32(1))
        step_w, step_h = roi_w / f32(out_w), roi_h / f32(out_h)
        rw = rw_in if rw_in > 0 else math.ceil(step_w)
        rh = rh_in if rh_in > 0 else math.ceil(step_h)
        bin_w, bin_h = step_w / f32(rw), step_h / f32(rh)
        img = x[ids[r]]
        for i in range(out_h):
            for j in range(out_w):
                acc = np.zeros(depth, np.float32)
                for yi in range(rh):
                    y = step_h * f32(i) + h0 + bin_h / f32(2) + bin_h * f32(yi)
                    for xi in range(rw):
                        xx = step_w * f32(j) + w0 + bin_w / f32(2) + bin_w * f32(xi)
                        x1, y1 = math.floor(xx), math.floor(y)
                        x2, y2 = x1 + 1, y1 + 1
                        dx1, dy1 = xx - f32(x1), y - f32(y1)
                        if x1 >= in_w - 1:
                            x1 = x2 = in_w - 1
                            dx1 = f32(0)
                        if y1 >= in_h - 1:
                            y1 = y2 = in_h - 1
                            dy1 = f32(0)
                        dx2, dy2 = f32(1) - dx1, f32(1) - dy1
                        acc += (
                            dx2 * dy2 * img[y1, x1]
                            + dx1 * dy2 * img[y1, x2]
                            + dx2 * dy1 * img[y2, x1]
                            + dx1 * dy1 * img[y2, x2]
                        )
                out[r, i, j] = acc / f32(rh * rw)
    return out


def random_rois(rng, n, h, w, stride=1.0):
    x1 = rng.uniform(0, w * stride, n)
    y1 = rng.uniform(0, h * stride, n)
    x2 = rng.uniform(x1, w * stride)
    y2 = rng.uniform(y1, h * stride)
    return np.stack([x1, y1, x2, y2], axis=1).astype(np.float32)


def test_roi_align_matches_cxx_loops_on_random_boxes():
    rng = np.random.default_rng(11)
    for ratios in ((2, 2), (0, 0), (1, 3)):
        x = rng.standard_normal((2, 6, 7, 3)).astype(np.float32)
        rois = random_rois(rng, 5, 6, 7, stride=2.0)
        ids = rng.integers(0, 2, 5).astype(np.int32)
        got = roi_align(x, rois, ids, (2, 3), strides=(2.0, 2.0), ratios=ratios)
        want = cxx_roi_align(x, rois, ids, 2, 3, 2.0, 2.0, *ratios)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_adaptive_ratio_by_hand():
    # Box [0, 0, 4, 2] with a 1x1 output: adaptive ratios ceil(4/1) = 4 and ceil(2/1) = 2;
    # samples x = 0.5, 1.5, 2.5, 3.5 -> 3 (clamped), y = 0.5, 1.5 -> mean x 1.875, mean y 1.
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    got = roi_align(x, [[0, 0, 4, 2]], [0], (1, 1), ratios=(0, 0))
    assert got.reshape(-1).tolist() == [pytest.approx(4 * 1 + 1.875)]


def test_roi_align_nchw_is_nhwc_transposed():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    rois = random_rois(rng, 3, 5, 5)
    nhwc = roi_align(x, rois, [0, 0, 0], (2, 2))
    nchw = roi_align(np.transpose(x, (0, 3, 1, 2)).copy(), rois, [0, 0, 0], (2, 2), nchw=True)
    np.testing.assert_array_equal(np.transpose(nchw, (0, 2, 3, 1)), nhwc)


def test_roi_align_degenerate_and_edge_boxes_stay_finite():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    # Zero-area box at the far corner: width/height forced to 1, samples clamp to 15.
    got = roi_align(x, [[4, 4, 4, 4], [2, 1, 2, 1]], [0, 0], (2, 2))
    assert np.isfinite(got).all()
    assert (got[0] == 15).all()


def test_roi_align_float16_sample_index_beyond_float16_gives_nan():
    # 65536 sampling points: the bin size is step / half(65536) = step / inf = 0, and from
    # sample 65520 on, half(index) is inf, so y = start + 0 * inf is NaN. Android's
    # uint32_t y1 = std::floor(NaN) is 0 on ARM; the NaN weights reach every output.
    x = np.arange(16, dtype=np.float16).reshape(1, 4, 4, 1)
    got = roi_align(x, [[0, 0, 4, 4]], [0], (1, 1), ratios=(65536, 1), type=F16)
    assert got.shape == (1, 1, 1, 1) and np.isnan(got).all()


@pytest.mark.parametrize("out_hw, ratios", [((65536, 1), (0, 2)), ((1, 65536), (2, 0))])
def test_roi_align_float16_without_sampling_points_gives_nan(out_hw, ratios):
    # An output size over 65504 is inf in float16: the adaptive step is 0, so is the
    # number of samples, and the C++ divides the empty sums by 0.
    x = np.arange(16, dtype=np.float16).reshape(1, 4, 4, 1)
    got = roi_align(x, [[0, 0, 4, 4]], [0], out_hw, ratios=ratios, type=F16)
    assert got.shape == (1, *out_hw, 1) and np.isnan(got).all()


def test_roi_align_zero_rois_gives_zero_sized_output():
    x = np.ones((1, 3, 3, 2), np.float32)
    got = roi_align(x, np.zeros((0, 4), np.float32), np.zeros(0, np.int32), (2, 2))
    assert got.shape == (0, 2, 2, 2)


@pytest.mark.parametrize(
    "rois, ids",
    [([[0, 0, 5, 2]], [0]), ([[3, 0, 1, 2]], [0]), ([[-1, 0, 1, 2]], [0]), ([[0, 0, 1, 1]], [1])],
    ids=["outside", "inverted", "negative", "bad-batch"],
)
def test_roi_align_malformed_boxes_fail_the_execution(rois, ids):
    x = np.ones((1, 4, 4, 1), np.float32)
    err = hal_error(lambda: roi_align(x, rois, ids, (1, 1)))
    assert err.status == ErrorStatus.GENERAL_FAILURE


def test_roi_align_quant_signed_is_unsigned_minus_128():
    rng = np.random.default_rng(4)
    q = rng.integers(0, 256, (2, 5, 6, 2)).astype(np.uint8)
    rois = (random_rois(rng, 4, 5, 6) * 8).round().astype(np.uint16)
    rois = np.concatenate([np.minimum(rois[:, :2], rois[:, 2:]), rois[:, 2:]], axis=1)
    ids = rng.integers(0, 2, 4).astype(np.int32)
    kw = dict(in_scale=0.1, out_scale=0.11)  # output range covers the input's
    u = roi_align(q, rois, ids, (2, 2), type=Q8, in_zp=130, out_zp=128, **kw)
    s = roi_align(
        (q.astype(np.int16) - 128).astype(np.int8),
        rois,
        ids,
        (2, 2),
        type=Q8S,
        in_zp=2,
        out_zp=0,
        **kw,
    )
    np.testing.assert_array_equal(s.astype(np.int16), u.astype(np.int16) - 128)
    # And the quantized kernel tracks the float one (weights are 1/255-step integers).
    real = (q.astype(np.float32) - 130) * f32(0.1)
    ref = roi_align(real, rois.astype(np.float32) / 8, ids, (2, 2))
    # Error bound: half an output step plus four weights off by up to 0.5/255 each.
    np.testing.assert_allclose((u.astype(np.float32) - 128) * 0.11, ref, atol=0.055 + 2 / 255 * 13)


def test_roi_align_quant_boxes_need_scale_one_eighth():
    x = np.ones((1, 2, 2, 1), np.uint8)
    err = hal_error(
        lambda: run_op(
            O.ROI_ALIGN,
            [
                tensor(Q8, x, scale=1.0),
                tensor(Q16A, [[0, 0, 8, 8]], scale=0.25),
                tensor(I32, [0]),
                scalar(T.INT32, 1),
                scalar(T.INT32, 1),
                scalar(T.FLOAT32, 1.0),
                scalar(T.FLOAT32, 1.0),
                scalar(T.INT32, 0),
                scalar(T.INT32, 0),
                scalar(T.BOOL, False),
            ],
            [output(Q8, (1, 1, 1, 1), scale=1.0)],
        )
    )
    assert err.status == ErrorStatus.INVALID_ARGUMENT and "0.125" in err.message


def test_roi_align_signed_needs_hal_1_3():
    q = np.zeros((1, 2, 2, 1), np.int8)
    kw = dict(type=Q8S, in_scale=1.0, out_scale=1.0)
    assert roi_align(q, [[0, 0, 8, 8]], [0], (1, 1), version=HalVersion.V1_3, **kw).shape
    err = hal_error(
        lambda: roi_align(q, [[0, 0, 8, 8]], [0], (1, 1), version=HalVersion.V1_2, **kw)
    )
    assert err.status == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("bad", ["out_h", "stride", "ratio"])
def test_roi_align_rejects_bad_parameters(bad):
    x = np.ones((1, 2, 2, 1), np.float32)
    out_hw = (0, 1) if bad == "out_h" else (1, 1)
    strides = (0.0, 1.0) if bad == "stride" else (1.0, 1.0)
    ratios = (-1, 0) if bad == "ratio" else (0, 0)
    err = hal_error(lambda: roi_align(x, [[0, 0, 1, 1]], [0], out_hw, strides, ratios))
    assert err.status == ErrorStatus.INVALID_ARGUMENT


# ---------------------------------------------------------------------------------------
# ROI_POOLING
# ---------------------------------------------------------------------------------------


def roi_pool(x, rois, ids, out_hw, strides=(1.0, 1.0), nchw=False, **kw):
    t = kw.pop("type", F32)
    roi_t = Q16A if t in (Q8, Q8S) else t
    s_t = T.FLOAT16 if t == F16 else T.FLOAT32
    n = len(ids)
    c = x.shape[1] if nchw else x.shape[3]
    dims = (n, c, *out_hw) if nchw else (n, *out_hw, c)
    qs, zp = kw.get("scale", 0.0), kw.get("zp", 0)
    return run_op(
        O.ROI_POOLING,
        [
            tensor(t, x, scale=qs, zero_point=zp),
            tensor(roi_t, rois, dims=(n, 4), scale=0.125 if roi_t == Q16A else 0.0),
            tensor(I32, ids, dims=(n,)),
            scalar(T.INT32, out_hw[0]),
            scalar(T.INT32, out_hw[1]),
            scalar(s_t, strides[0]),
            scalar(s_t, strides[1]),
            scalar(T.BOOL, nchw),
        ],
        [output(t, dims, scale=kw.get("out_scale", qs), zero_point=kw.get("out_zp", zp))],
    )[0]


def cxx_roi_pool(x, rois, ids, out_h, out_w, h_stride, w_stride, empty=0):
    _, in_h, in_w, depth = x.shape
    hs, ws = f32(1.0) / f32(h_stride), f32(1.0) / f32(w_stride)
    out = np.zeros((len(rois), out_h, out_w, depth), x.dtype)
    for r, roi in enumerate(rois):

        def rnd(v):
            return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)

        w0, h0 = rnd(f32(roi[0]) * ws), rnd(f32(roi[1]) * hs)
        w1, h1 = rnd(f32(roi[2]) * ws), rnd(f32(roi[3]) * hs)
        step_w = f32(max(w1 - w0 + 1, 1)) / f32(out_w)
        step_h = f32(max(h1 - h0 + 1, 1)) / f32(out_h)
        for i in range(out_h):
            for j in range(out_w):
                ws_ = min(math.floor(step_w * f32(j) + f32(w0)), in_w)
                we_ = min(math.ceil(step_w * f32(j + 1) + f32(w0)), in_w)
                hs_ = min(math.floor(step_h * f32(i) + f32(h0)), in_h)
                he_ = min(math.ceil(step_h * f32(i + 1) + f32(h0)), in_h)
                for k in range(depth):
                    best, first = empty, True
                    for hh in range(hs_, he_):
                        for ww in range(ws_, we_):
                            v = x[ids[r], hh, ww, k]
                            if first or v > best:
                                best, first = v, False
                    out[r, i, j, k] = best
    return out


def test_roi_pooling_matches_cxx_loops_on_random_boxes():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    rois = random_rois(rng, 6, 7, 6, stride=0.5)
    ids = rng.integers(0, 2, 6).astype(np.int32)
    got = roi_pool(x, rois, ids, (3, 2), strides=(0.5, 0.5))
    np.testing.assert_array_equal(got, cxx_roi_pool(x, rois, ids, 3, 2, 0.5, 0.5))


def test_roi_pooling_more_bins_than_cells_matches_cxx_loops():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((1, 5, 4, 2)).astype(np.float32)
    rois = random_rois(rng, 4, 5, 4)
    got = roi_pool(x, rois, [0] * 4, (7, 9))
    np.testing.assert_array_equal(got, cxx_roi_pool(x, rois, [0] * 4, 7, 9, 1.0, 1.0))


@given(
    n=st.integers(1, 40),
    count=st.integers(0, 50),
    width=st.integers(1, 4),
    axis=st.integers(0, 1),
    seed=st.integers(0, 2**16),
)
def test_range_max_matches_slices(n, count, width, axis, seed):
    # Ranges of every window level, mixed: grouped by level, then put back in order.
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (n, width)).astype(np.uint8)
    a = a.T if axis else a
    lo = rng.integers(0, n, count)
    hi = np.minimum(lo + rng.integers(1, n + 1, count), n)
    got = range_max(a, lo, hi, axis)
    slices = [np.take(a, range(i, j), axis=axis).max(axis=axis) for i, j in zip(lo, hi)]
    want = np.stack(slices, axis=axis) if count else np.take(a, [], axis=axis)
    np.testing.assert_array_equal(got, want)


def test_roi_align_refuses_absurd_sampling_work():
    x = np.ones((1, 4, 4, 1), np.float32)
    err = hal_error(lambda: roi_align(x, [[0, 0, 4, 4]], [0], (8, 8), ratios=(10**5, 10**5)))
    assert err.status == ErrorStatus.GENERAL_FAILURE and "intermediate" in err.message


@pytest.mark.parametrize(
    "op, strides, expected",
    [
        # Image box [0, 0, 8, 4] / (height stride 1, width stride 2) = map box [0, 0, 4, 4].
        # ROI_ALIGN, 1x1 output, one sample at the box centre (x 2, y 2): 10 * 2 + 2.
        ("align", (1.0, 2.0), 22.0),
        # ROI_POOLING: one bin [0, 4] x [0, 4] (x2 - x1 + 1 cells, clamped): the max, 33.
        ("pool", (1.0, 2.0), 33.0),
        # Swapped strides: map box [0, 0, 8, 2] is outside the 4x4 map (width 8 > 4).
        ("align", (2.0, 1.0), None),
        ("pool", (2.0, 1.0), None),
    ],
)
def test_roi_height_and_width_strides_scale_their_own_axis(op, strides, expected):
    """Input 5 is the height stride (image height / feature map height) and scales y,
    input 6 the width stride and scales x. Worked by hand on a 4x4 map whose value is
    10 * row + column."""
    x = (10 * np.arange(4)[:, None] + np.arange(4)).astype(np.float32).reshape(1, 4, 4, 1)
    box = [[0.0, 0.0, 8.0, 4.0]]
    if op == "align":
        run = lambda: roi_align(x, box, [0], (1, 1), strides=strides, ratios=(1, 1))  # noqa: E731
    else:
        run = lambda: roi_pool(x, box, [0], (1, 1), strides=strides)  # noqa: E731
    if expected is None:
        with pytest.raises(HalError, match="outside the 4x4 feature map"):
            run()
    else:
        assert run().reshape(-1).tolist() == [expected]


def test_roi_pooling_empty_bins_give_zero_or_zero_point():
    # A box on the last column: the bins past the map are empty.
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4, 1)
    got = roi_pool(x, [[4, 0, 4, 3]], [0], (2, 2))
    assert got.reshape(2, 2).tolist() == [[0, 0], [0, 0]]
    q = roi_pool(x.astype(np.uint8), [[32, 0, 32, 24]], [0], (2, 2), type=Q8, scale=1.0, zp=7)
    assert q.reshape(-1).tolist() == [7, 7, 7, 7]


def test_roi_pooling_nchw_is_nhwc_transposed():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 6, 6, 2)).astype(np.float32)
    rois = random_rois(rng, 3, 6, 6)
    nhwc = roi_pool(x, rois, [0, 0, 0], (2, 3))
    nchw = roi_pool(np.transpose(x, (0, 3, 1, 2)).copy(), rois, [0, 0, 0], (2, 3), nchw=True)
    np.testing.assert_array_equal(np.transpose(nchw, (0, 2, 3, 1)), nhwc)


def test_roi_pooling_quant_signed_is_unsigned_minus_128():
    rng = np.random.default_rng(9)
    q = rng.integers(0, 256, (1, 6, 6, 2)).astype(np.uint8)
    rois = (random_rois(rng, 4, 6, 6) * 8).astype(np.uint16)
    u = roi_pool(q, rois, [0] * 4, (2, 2), type=Q8, scale=0.5, zp=100)
    s = roi_pool(
        (q.astype(np.int16) - 128).astype(np.int8),
        rois,
        [0] * 4,
        (2, 2),
        type=Q8S,
        scale=0.5,
        zp=-28,
    )
    np.testing.assert_array_equal(s.astype(np.int16), u.astype(np.int16) - 128)
    want = cxx_roi_pool(q, rois.astype(np.float32) / 8, [0] * 4, 2, 2, 1.0, 1.0, empty=100)
    np.testing.assert_array_equal(u, want)


def test_roi_pooling_output_keeps_input_quantization():
    q = np.zeros((1, 2, 2, 1), np.uint8)
    err = hal_error(
        lambda: roi_pool(q, [[0, 0, 8, 8]], [0], (1, 1), type=Q8, scale=1.0, zp=3, out_zp=4)
    )
    assert err.status == ErrorStatus.INVALID_ARGUMENT


def test_roi_pooling_box_outside_fails():
    x = np.ones((1, 4, 4, 1), np.float32)
    err = hal_error(lambda: roi_pool(x, [[0, 0, 1, 9]], [0], (1, 1)))
    assert err.status == ErrorStatus.GENERAL_FAILURE


# ---------------------------------------------------------------------------------------
# ROI_ALIGN / ROI_POOLING blocks (bounded temporaries for huge outputs and ratios)
# ---------------------------------------------------------------------------------------


def _as_type(rng, t, x: np.ndarray, rois: np.ndarray):
    """A float feature map and boxes (in input pixels, >= 0) as type ``t`` stores them
    (quantized: a random map and boxes in QUANT16_ASYMM 1/8 units), with the ROI_ALIGN
    and ROI_POOLING quantization arguments: (x, rois, align kwargs, pool kwargs)."""
    if t in (Q8, Q8S):
        q = rng.integers(0, 256, x.shape)
        x = (q - (128 if t == Q8S else 0)).astype(np.int8 if t == Q8S else np.uint8)
        rois = np.floor(rois * 8).astype(np.uint16)
        akw = dict(type=t, in_scale=0.1, out_scale=0.03, in_zp=3, out_zp=5)
        return x, rois, akw, dict(type=t, scale=0.1, zp=3)
    float_type = np.float32 if t == F32 else np.float16
    return x.astype(float_type), rois.astype(float_type), dict(type=t), dict(type=t)


def _roi_case(rng, t, depth, out_hw, ratios):
    """Random feature map (values over several magnitudes, so that the float32 sums
    depend on their order) and boxes for ``t``; returns (align, pool) results."""
    x = rng.standard_normal((2, 6, 7, depth)) * 10.0 ** rng.integers(-3, 4, (2, 6, 7, depth))
    rois = random_rois(rng, 4, 6, 7, stride=2.0)
    ids = rng.integers(0, 2, 4).astype(np.int32)
    args = dict(strides=(2.0, 2.0))
    x, rois, akw, pkw = _as_type(rng, t, x, rois)
    align = roi_align(x, rois, ids, out_hw, ratios=ratios, **args, **akw)
    pool = roi_pool(x, rois, ids, out_hw, **args, **pkw)
    return align, pool


@pytest.mark.parametrize("t", [F32, F16, Q8, Q8S], ids=lambda t: t.name)
@pytest.mark.parametrize("block", [1, 5, 64])
def test_roi_blocks_give_the_one_block_result(monkeypatch, t, block):
    # Tiny blocks split boxes into output rows, spans of columns and depths and runs of
    # sample rows (running sums carried on); every element must keep its float32
    # summation order, bit for bit. Depth 1 with width 1 is the documented exception
    # (numpy sums that whole box pairwise), so float cases there keep at least one bin.
    import driver.operations.detection as detection

    cases = [(5, (2, 5), (3, 4)), (1, (3, 5), (5, 2)), (1, (2, 4), (0, 0)), (4, (2, 1), (2, 3))]
    if t in (Q8, Q8S):
        cases.append((1, (2, 1), (4, 4)))  # integer sums: exact whatever the blocks
    for seed, (depth, out_hw, ratios) in enumerate(cases):
        whole = _roi_case(np.random.default_rng(seed), t, depth, out_hw, ratios)
        monkeypatch.setattr(detection, "_BLOCK_ELEMENTS", block)
        blocked = _roi_case(np.random.default_rng(seed), t, depth, out_hw, ratios)
        monkeypatch.undo()
        for w, b in zip(whole, blocked):
            assert w.dtype == b.dtype and w.shape == b.shape
            np.testing.assert_array_equal(w.view(np.uint8), b.view(np.uint8))


def test_roi_huge_outputs_and_ratios_keep_temporaries_small():
    # Found by growing INT32 parameters: ROI_POOLING sized by its output height / width
    # from a 4x4 map held ~11x its output in bin edges and maxima; ROI_ALIGN with a large
    # output or sampling ratio held all of one box's bilinear samples (~50x its output).

    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    q = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1)
    qkw = dict(type=Q8, in_scale=1.0, out_scale=1.0)
    runs = [
        lambda: roi_pool(x, [[0, 0, 3, 3]], [0], (1 << 21, 2)),
        lambda: roi_pool(x, [[0, 0, 3, 3]], [0], (2, 1 << 21)),
        lambda: roi_align(x, [[0, 0, 4, 4]], [0], (1 << 17, 2)),
        lambda: roi_align(q, [[0, 0, 32, 32]], [0], (2, 1 << 17), **qkw),
        lambda: roi_align(x, [[0, 0, 4, 4]], [0], (2, 2), ratios=(1 << 18, 2)),
    ]
    for k, run in enumerate(runs):
        out, peak = traced_peak(run)
        assert peak < 2 * out.nbytes + (24 << 20), (k, peak >> 20, out.nbytes >> 20)


def _many_rois(rng, t, nchw, count=90):
    """A feature map (magnitudes from 1e-3 to 1e3, signed zeros) and ``count`` boxes for
    type ``t``: random ones, whole-map ones, ones on the map's far edges, zero-size ones
    and runs of identical boxes, some of them on another map; returns (x, rois, ids,
    align kwargs, pool kwargs)."""
    n, h, w, depth = 2, 7, 9, 3
    x = rng.standard_normal((n, h, w, depth)) * 10.0 ** rng.integers(-3, 4, (n, h, w, depth))
    zeros = rng.random(x.shape)
    x[zeros < 0.2] = 0.0
    x[zeros < 0.1] = -0.0  # a max over both zeros depends on its order
    rois = random_rois(rng, count, h, w, stride=2.0)
    kind = rng.integers(0, 5, count)
    rois[kind == 0] = [0, 0, 2 * w, 2 * h]
    rois[kind == 1, 2:] = [2 * w, 2 * h]
    rois[kind == 2, 2:] = rois[kind == 2, :2]
    ids = rng.integers(0, n, count)
    runs = rng.integers(1, 6, count)
    rois, ids = np.repeat(rois, runs, axis=0)[:count], np.repeat(ids, runs)[:count]
    ids[rng.random(count) < 0.1] ^= 1
    x, rois, akw, pkw = _as_type(rng, t, x, rois)
    if nchw:
        x = np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))
    return x, rois, ids.astype(np.int32), akw, pkw


@pytest.mark.parametrize("t", [F32, F16, Q8, Q8S], ids=lambda t: t.name)
@pytest.mark.parametrize("nchw", [False, True])
def test_roi_box_runs_give_the_one_box_results(monkeypatch, t, nchw):
    # Boxes that fit a block are computed in runs of boxes (ROI_ALIGN grouped by samples
    # per bin, so ratio 0 makes several groups; ROI_POOLING by window sizes and order),
    # boxes a chunk at a time, identical consecutive boxes once. Every box must get the
    # bits of the one-box path: runs off and chunks of one box, as the kernels were.
    import driver.operations.detection as detection

    x, rois, ids, akw, pkw = _many_rois(np.random.default_rng(len(t.name) + nchw), t, nchw)

    def run():
        aligned = [
            roi_align(x, rois, ids, out_hw, strides=(2.0, 2.0), ratios=ratios, nchw=nchw, **akw)
            for out_hw, ratios in (((2, 3), (0, 0)), ((3, 1), (2, 0)), ((1, 2), (1, 3)))
        ]
        pooled = [
            roi_pool(x, rois, ids, out_hw, strides=(2.0, 2.0), nchw=nchw, **pkw)
            for out_hw in ((2, 3), (4, 1), (1, 1))
        ]
        return aligned + pooled

    monkeypatch.setattr(detection, "_BATCH_ELEMENTS", 0)
    monkeypatch.setattr(detection, "_BOXES_PER_STEP", 1)
    one_box = run()
    for settings in ({}, {"_BATCH_ELEMENTS": 100}, {"_BOXES_PER_STEP": 7}):
        monkeypatch.undo()
        for name, value in settings.items():
            monkeypatch.setattr(detection, name, value)
        for want, got in zip(one_box, run()):
            assert want.dtype == got.dtype and want.shape == got.shape
            np.testing.assert_array_equal(want.view(np.uint8), got.view(np.uint8))


def test_roi_many_boxes_keep_temporaries_small():
    # A fuzzer's TILE of one box gives 10^5 boxes, which the kernels looped over at
    # ~300 us a box (minutes). Runs of boxes and chunks of boxes keep the per-box
    # geometry and the gathers to a few MB besides the inputs and the output.

    rng = np.random.default_rng(0)
    count = 1 << 17
    q = rng.integers(0, 256, (2, 8, 8, 1)).astype(np.uint8)
    rois = rng.integers(0, 64, (count // 8, 4)).astype(np.uint16)
    rois[:, 2:] = np.maximum(rois[:, 2:], rois[:, :2])
    rois = np.repeat(rois, 8, axis=0)  # runs of 8 identical boxes
    ids = rng.integers(0, 2, count).astype(np.int32)
    runs = [
        lambda: roi_align(q, rois, ids, (2, 2), type=Q8, in_scale=0.1, out_scale=0.1),
        lambda: roi_pool(q, rois, ids, (2, 2), type=Q8, scale=0.1),
    ]
    for k, run in enumerate(runs):
        out, peak = traced_peak(run)
        io = q.nbytes + rois.nbytes + ids.nbytes + out.nbytes
        assert peak < 3 * io + (32 << 20), (k, peak >> 20, io >> 20)


def test_roi_align_refuses_a_huge_width_sampling_ratio():
    # The smallest block is one sample row of two columns and two depths.
    x = np.ones((1, 4, 4, 2), np.float32)
    err = hal_error(lambda: roi_align(x, [[0, 0, 4, 4]], [0], (1, 2), ratios=(1, 1 << 17)))
    assert err.status == ErrorStatus.GENERAL_FAILURE
    assert "ROI_ALIGN" in err.message and "sampling ratio" in err.message
    assert roi_align(x, [[0, 0, 4, 4]], [0], (1, 2), ratios=(1, 1 << 16)).shape == (1, 1, 2, 2)


def test_float16_indexes_beyond_its_range_convert_as_numpy_does():
    from driver.operations.detection import _arange

    for start, stop in ((0, 70000), (65500, 65530), (65519, 65521), (100000, 100003)):
        with np.errstate(over="ignore"):  # numpy's own conversion warns past 65504
            want = np.arange(start, stop).astype(np.float16)
        got = _arange(start, stop, np.float16)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


# ---------------------------------------------------------------------------------------
# HEATMAP_MAX_KEYPOINT
# ---------------------------------------------------------------------------------------


def heatmap(hm, boxes, nchw=False, t=F32, **kw):
    n = hm.shape[0]
    k = hm.shape[1] if nchw else hm.shape[3]
    box_t = Q16A if t in (Q8, Q8S) else t
    return run_op(
        O.HEATMAP_MAX_KEYPOINT,
        [
            tensor(t, hm, scale=kw.get("scale", 0.0), zero_point=kw.get("zp", 0)),
            tensor(box_t, boxes, dims=(n, 4), scale=0.125 if box_t == Q16A else 0.0),
            scalar(T.BOOL, nchw),
        ],
        [
            output(t, (n, k), scale=kw.get("out_scale", 0.0), zero_point=kw.get("out_zp", 0)),
            output(box_t, (n, k, 2), scale=0.125 if box_t == Q16A else 0.0),
        ],
    )


def cxx_heatmap(hm, boxes):
    n, size, _, nk = hm.shape
    scores = np.zeros((n, nk), np.float32)
    kps = np.zeros((n, nk, 2), np.float32)
    two = f32(2)
    for b in range(n):
        for j in range(nk):
            best, idx = f32(-np.finfo(np.float32).max), 0
            for k in range(size * size):
                v = hm[b, k // size, k % size, j]
                if best < v:
                    best, idx = v, k
            mh, mw = idx // size, idx % size
            g = np.zeros((3, 3), np.float32)
            for dh in (-1, 0, 1):
                for dw in (-1, 0, 1):
                    h, w = mh + dh, mw + dw
                    h = 1 if h < 0 else (size - 2 if h >= size else h)
                    w = 1 if w < 0 else (size - 2 if w >= size else w)
                    g[dh + 1, dw + 1] = hm[b, h, w, j]
            d0 = d1 = f32(0)
            score = best
            b0, b1 = -(g[1, 2] - g[1, 0]) / two, -(g[2, 1] - g[0, 1]) / two
            a00 = g[1, 0] - two * g[1, 1] + g[1, 2]
            a01 = (g[2, 2] - g[2, 0] - g[0, 2] + g[0, 0]) / f32(4)
            a11 = g[0, 1] - two * g[1, 1] + g[2, 1]
            det = a00 * a11 - a01 * a01
            if not abs(det) < f32(1e-5) + f32(1e-5) * (a00 * a11):
                d0 = (a11 * b0 - a01 * b1) / det
                d1 = (a00 * b1 - a01 * b0) / det
                if abs(d0) > 1.5 or abs(d1) > 1.5:
                    sc = f32(1.5) / max(abs(d0), abs(d1))
                    d0, d1 = d0 * sc, d1 * sc
                score = (
                    g[1, 1]
                    - b0 * d0
                    - b1 * d1
                    + ((d0 * a00 + d1 * a01) * d0 + (d0 * a01 + d1 * a11) * d1) / two
                )
            x1, y1, x2, y2 = (f32(v) for v in boxes[b])
            scores[b, j] = score
            kps[b, j, 0] = (f32(mw) + d0 + f32(0.5)) / f32(size) * (x2 - x1) + x1
            kps[b, j, 1] = (f32(mh) + d1 + f32(0.5)) / f32(size) * (y2 - y1) + y1
    return scores, kps


def test_heatmap_matches_cxx_loops_including_edge_maxima():
    rng = np.random.default_rng(13)
    hm = rng.standard_normal((4, 5, 5, 3)).astype(np.float32)
    hm[0, 0, 0, 0] = 9  # a maximum in a corner: the patch mirrors to row/column 1
    hm[1, 4, 2, 1] = 9  # on the last row
    boxes = random_rois(rng, 4, 20, 20)
    got_s, got_k = heatmap(hm, boxes)
    want_s, want_k = cxx_heatmap(hm, boxes)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_k, want_k, rtol=1e-5, atol=1e-5)


def test_heatmap_flat_map_keeps_the_cell_centre():
    # A constant heatmap has a singular Hessian: no correction, first cell wins.
    got_s, got_k = heatmap(np.full((1, 4, 4, 1), 3.0, np.float32), [[0, 0, 8, 4]])
    assert got_s.tolist() == [[3.0]]
    assert got_k.tolist() == [[[1.0, 0.5]]]  # (0 + 0.5) / 4 * 8, (0 + 0.5) / 4 * 4


def test_heatmap_moves_the_maximum_at_most_one_and_a_half_cells():
    """solveForDelta caps the step to the quadratic's vertex at 1.5 cells (scaling both
    components). Worked by hand on the 3x3 map [[8, 7, 1], [7, 9, 8], [4, 8, 8]] (maximum
    9 at the centre): b = (-(8 - 7) / 2, -(8 - 7) / 2) = (-0.5, -0.5), a00 = a11 =
    7 - 18 + 8 = -3, a01 = (8 - 4 - 1 + 8) / 4 = 2.75, det = 9 - 7.5625 = 1.4375, so the
    vertex is d = (2.875 / 1.4375, 2.875 / 1.4375) = (2, 2), capped to (1.5, 1.5). The
    keypoint is (1 + 1.5 + 0.5) / 3 * 3 = 3 on both axes of the box [0, 0, 3, 3]; the
    score 9 + 0.75 + 0.75 + ((-4.5 + 4.125) * 1.5 * 2) / 2 = 9.9375."""
    hm = np.array([[8, 7, 1], [7, 9, 8], [4, 8, 8]], np.float32).reshape(1, 3, 3, 1)
    score, keypoint = heatmap(hm, [[0, 0, 3, 3]])
    assert score.tolist() == [[9.9375]]
    assert keypoint.tolist() == [[[3.0, 3.0]]]


def test_heatmap_zero_area_box_is_finite():
    hm = np.random.default_rng(1).standard_normal((1, 3, 3, 2)).astype(np.float32)
    s, k = heatmap(hm, [[5, 5, 5, 5]])
    assert np.isfinite(s).all() and (k == 5).all()


def test_heatmap_nchw_is_nhwc_transposed():
    hm = np.random.default_rng(6).standard_normal((2, 4, 4, 3)).astype(np.float32)
    boxes = [[0, 0, 4, 4], [1, 2, 3, 5]]
    a = heatmap(hm, boxes)
    b = heatmap(np.transpose(hm, (0, 3, 1, 2)).copy(), boxes, nchw=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_heatmap_quant_signed_is_unsigned_minus_128():
    rng = np.random.default_rng(10)
    q = rng.integers(0, 256, (2, 4, 4, 2)).astype(np.uint8)
    boxes = np.array([[0, 8, 40, 64], [16, 16, 48, 24]], np.uint16)
    us, uk = heatmap(q, boxes, t=Q8, scale=0.1, zp=128, out_scale=0.07, out_zp=100)
    ss, sk = heatmap(
        (q.astype(np.int16) - 128).astype(np.int8),
        boxes,
        t=Q8S,
        scale=0.1,
        zp=0,
        out_scale=0.07,
        out_zp=-28,
    )
    np.testing.assert_array_equal(ss.astype(np.int16), us.astype(np.int16) - 128)
    np.testing.assert_array_equal(sk, uk)


def test_heatmap_rejects_small_or_non_square_maps():
    for shape in ((1, 1, 1, 1), (1, 3, 4, 1)):
        err = hal_error(lambda s=shape: heatmap(np.zeros(s, np.float32), [[0, 0, 1, 1]]))
        assert err.status == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("t", [F32, Q8])
def test_heatmap_blocks_of_one_box_give_the_one_block_result(monkeypatch, t):
    rng = np.random.default_rng(21)
    hm = rng.integers(0, 256, (5, 3, 4, 4)).astype(np.uint8 if t == Q8 else np.float32)
    boxes = np.array([[0, 8, 40, 64], [16, 16, 48, 24]] * 2 + [[1, 2, 3, 4]])
    kw = dict(scale=0.1, zp=128, out_scale=0.07, out_zp=100) if t == Q8 else {}
    whole = heatmap(hm, boxes, nchw=True, t=t, **kw)
    monkeypatch.setattr(detection, "_BOX_BLOCK_ELEMENTS", 1)
    for got, want in zip(heatmap(hm, boxes, nchw=True, t=t, **kw), whole):
        np.testing.assert_array_equal(got, want)


def test_heatmap_many_boxes_need_little_more_memory_than_their_input():
    # 512K quant8 3x3 maps of 2 keypoints (9 MB) and their boxes (4 MB): dequantizing the
    # whole heatmap took 12 bytes per element and every float temporary 4 more.
    n = 1 << 19
    hm = np.random.default_rng(0).integers(0, 256, (n, 3, 3, 2), dtype=np.uint8)
    boxes = np.tile(np.array([[0, 8, 40, 64]], np.uint16), (n, 1))
    (score, _), peak = traced_peak(
        lambda: heatmap(hm, boxes, t=Q8, scale=0.1, zp=128, out_scale=0.07, out_zp=100)
    )
    assert peak < 3 * (hm.nbytes + boxes.nbytes) + (32 << 20), f"peak {peak >> 20} MB"
    np.testing.assert_array_equal(
        score[-1],
        heatmap(hm[-1:], boxes[-1:], t=Q8, scale=0.1, zp=128, out_scale=0.07, out_zp=100)[0][0],
    )


# ---------------------------------------------------------------------------------------
# AXIS_ALIGNED_BBOX_TRANSFORM
# ---------------------------------------------------------------------------------------


def bbox(rois, deltas, ids, info, t=F32, delta_t=None, **kw):
    n = len(ids)
    delta_t = delta_t or t
    deltas = np.asarray(deltas, dtype=np.float64)
    q = t == Q16A
    return run_op(
        O.AXIS_ALIGNED_BBOX_TRANSFORM,
        [
            tensor(t, rois, dims=(n, 4), scale=0.125 if q else 0.0),
            tensor(delta_t, deltas, scale=kw.get("scale", 0.0), zero_point=kw.get("zp", 0)),
            tensor(I32, ids, dims=(n,)),
            tensor(t, info, scale=0.125 if q else 0.0),
        ],
        [output(t, deltas.shape, scale=0.125 if q else 0.0)],
    )[0]


def test_bbox_transform_per_batch_image_and_clipping():
    # Box [2, 2, 6, 4]: centre (4, 3), size 4x2. dx = 1 -> centre x 8; dw = ln 2 -> width 8.
    rois = [[2, 2, 6, 4], [2, 2, 6, 4]]
    deltas = [[1, 0, math.log(2), 0], [1, 0, math.log(2), 0]]
    got = bbox(rois, deltas, [0, 1], [[100, 100], [100, 9]])
    np.testing.assert_allclose(got, [[4, 2, 12, 4], [4, 2, 9, 4]], rtol=1e-6)


def test_bbox_transform_degenerate_boxes_never_nan():
    rois = [[3, 3, 3, 3], [1, 1, 2, 2], [0, 0, 0, 5]]
    deltas = [[0, 0, 200, 200], [0, 0, 200, -200], [5, 5, 100, 1]]
    got = bbox(rois, deltas, [0, 0, 0], [[10, 10]])
    assert np.isfinite(got).all()
    assert got[0].tolist() == [3, 3, 3, 3]
    assert got[1].tolist() == [0, 1.5, 10, 1.5]  # width overflows to the whole image


def test_bbox_transform_zero_rois_and_bad_data():
    assert bbox(np.zeros((0, 4)), np.zeros((0, 8)), [], [[4, 4]]).shape == (0, 8)
    for rois, ids in (([[2, 0, 1, 1]], [0]), ([[0, 0, 1, 1]], [1])):
        err = hal_error(lambda r=rois, i=ids: bbox(r, [[0, 0, 0, 0]], i, [[4, 4]]))
        assert err.status == ErrorStatus.GENERAL_FAILURE


def test_bbox_transform_quant_signed_is_unsigned_minus_128_and_tracks_float():
    rng = np.random.default_rng(14)
    rois = np.sort(rng.integers(0, 200, (6, 2, 2)), axis=1).transpose(0, 2, 1).reshape(6, 4)
    rois = rois[:, [0, 2, 1, 3]].astype(np.uint16)  # x1 <= x2, y1 <= y2
    q = rng.integers(0, 256, (6, 12)).astype(np.uint8)
    info = np.array([[240, 200]], np.uint16)
    u = bbox(rois, q, [0] * 6, info, t=Q16A, delta_t=Q8, scale=0.05, zp=128)
    s = bbox(
        rois,
        (q.astype(np.int16) - 128).astype(np.int8),
        [0] * 6,
        info,
        t=Q16A,
        delta_t=Q8S,
        scale=0.05,
        zp=0,
    )
    np.testing.assert_array_equal(s, u)
    real = bbox(rois / 8.0, (q.astype(np.float32) - 128) * f32(0.05), [0] * 6, info / 8.0)
    np.testing.assert_allclose(u / 8.0, real, atol=0.0626)


@pytest.mark.parametrize("t", [F32, Q16A])
def test_bbox_transform_blocks_of_one_box_give_the_one_block_result(monkeypatch, t):
    rng = np.random.default_rng(22)
    rois = np.array([[0, 0, 32, 32], [8, 16, 8, 40], [1, 2, 3, 4]] * 2)
    deltas = rng.integers(0, 256, (6, 8))
    kw = dict(t=Q16A, delta_t=Q8, scale=0.05, zp=128) if t == Q16A else {}
    args = (
        rois,
        deltas if t == Q16A else deltas / 64.0,
        [0, 1, 1, 0, 1, 0],
        [[240, 200], [99, 80]],
    )
    whole = bbox(*args, **kw)
    monkeypatch.setattr(detection, "_BOX_BLOCK_ELEMENTS", 1)
    np.testing.assert_array_equal(bbox(*args, **kw), whole)


def test_bbox_transform_many_boxes_need_little_more_memory_than_their_input():
    # 1M boxes (8 MB), quant8 deltas of one class (4 MB), batch ids (4 MB), a 8 MB output:
    # dequantizing and transforming all of them at once took about 20 times the deltas.
    n = 1 << 20
    rois = np.tile(np.array([[0, 0, 32, 32]], np.uint16), (n, 1))
    deltas = np.random.default_rng(0).integers(0, 256, (n, 4), dtype=np.uint8)
    ins = [
        tensor(Q16A, rois, scale=0.125),
        tensor(Q8, deltas, scale=0.05, zero_point=128),
        tensor(I32, np.zeros(n, np.int32)),
        tensor(Q16A, [[240, 200]], scale=0.125),
    ]
    (got,), peak = traced_peak(
        lambda: run_op(O.AXIS_ALIGNED_BBOX_TRANSFORM, ins, [output(Q16A, (n, 4), scale=0.125)])
    )
    io = rois.nbytes + deltas.nbytes + 4 * n + got.nbytes
    assert peak < 3 * io, f"peak {peak >> 20} MB"
    want = bbox(rois[-1:], deltas[-1:], [0], [[240, 200]], t=Q16A, delta_t=Q8, scale=0.05, zp=128)
    np.testing.assert_array_equal(got[-1:], want)


# ---------------------------------------------------------------------------------------
# BOX_WITH_NMS_LIMIT
# ---------------------------------------------------------------------------------------


def box_nms(
    scores,
    rois,
    ids,
    *,
    thr=0.0,
    max_det=-1,
    kernel=HARD,
    iou=0.5,
    sigma=0.5,
    nms_thr=0.01,
    t=F32,
    **kw,
):
    scores = np.asarray(scores)
    n = scores.shape[0]
    s_t = T.FLOAT16 if t == F16 else T.FLOAT32
    box_t = Q16A if t in (Q8, Q8S) else t
    qs, zp = kw.get("scale", 0.0), kw.get("zp", 0)
    return run_op(
        O.BOX_WITH_NMS_LIMIT,
        [
            tensor(t, scores, scale=qs, zero_point=zp),
            tensor(
                box_t, rois, dims=(n, 4 * scores.shape[1]), scale=0.125 if box_t == Q16A else 0.0
            ),
            tensor(I32, ids, dims=(n,)),
            scalar(s_t, thr),
            scalar(T.INT32, max_det),
            scalar(T.INT32, kernel),
            scalar(s_t, iou),
            scalar(s_t, sigma),
            scalar(s_t, nms_thr),
        ],
        [
            output(t, (0,), scale=qs, zero_point=zp),
            output(box_t, (0, 4), scale=0.125 if box_t == Q16A else 0.0),
            output(I32, (0,)),
            output(I32, (0,)),
        ],
    )


def test_box_nms_orders_by_batch_then_class_then_score():
    # Two batches; three classes (0 = background). Boxes are far apart: nothing suppressed.
    scores = [
        [0.9, 0.2, 0.7],  # batch 0
        [0.0, 0.6, 0.8],
        [0.0, 0.5, 0.1],  # batch 1
    ]
    rois = np.zeros((3, 12), np.float32)
    for i in range(3):
        for c in range(3):
            rois[i, 4 * c : 4 * c + 4] = [10 * i, 10 * c, 10 * i + 5, 10 * c + 5]
    s, b, c, batch = box_nms(scores, rois, [0, 0, 1], thr=0.15)
    assert s.tolist() == pytest.approx([0.6, 0.2, 0.8, 0.7, 0.5])
    assert c.tolist() == [1, 1, 2, 2, 1]
    assert batch.tolist() == [0, 0, 0, 0, 1]
    assert b[0].tolist() == [10, 10, 15, 15]  # roi 1, class 1


def test_box_nms_score_threshold_is_strict():
    # A score equal to the threshold is dropped before NMS.
    rois = np.array([[0, 0, 1, 1, 0, 0, 5, 5], [0, 0, 1, 1, 10, 10, 15, 15]], np.float32)
    s, _, _, _ = box_nms([[0, 0.25], [0, 0.5]], rois, [0, 0], thr=0.25)
    assert s.tolist() == [0.5]


def test_box_nms_limit_keeps_the_best_per_batch():
    scores = [[0, 0.3, 0.9], [0, 0.8, 0.1], [0, 0.5, 0.6]]
    rois = np.array(
        [[0, 0, 1, 1, 10 * i, 0, 10 * i + 5, 5, 10 * i, 20, 10 * i + 5, 25] for i in range(3)],
        np.float32,
    )
    s, _, c, _ = box_nms(scores, rois, [0, 0, 0], thr=0.05, max_det=3)
    # Best three: 0.9 (class 2), 0.8 (class 1), 0.6 (class 2); then by class.
    assert s.tolist() == pytest.approx([0.8, 0.9, 0.6])
    assert c.tolist() == [1, 2, 2]


def test_box_nms_no_detections_give_zero_sized_outputs():
    scores = [[0.5, 0.1], [0.5, 0.05]]
    rois = np.tile(np.float32([0, 0, 1, 1]), (2, 2))
    outs = box_nms(scores, rois, [0, 0], thr=0.2)  # all class-1 scores below threshold
    assert [o.shape for o in outs] == [(0,), (0, 4), (0,), (0,)]
    outs = box_nms(np.zeros((0, 3)), np.zeros((0, 12)), [])  # no boxes at all
    assert [o.shape for o in outs] == [(0,), (0, 4), (0,), (0,)]


@pytest.mark.parametrize("kernel", [HARD, LINEAR, GAUSSIAN])
def test_box_nms_zero_area_boxes_never_nan(kernel):
    # Identical points: Android's IoU is 0/0. Hard NMS suppresses (as Android); soft
    # kernels treat them as fully overlapping instead of producing NaN scores.
    scores = [[0, 0.9], [0, 0.8], [0, 0.7]]
    rois = np.array([[0, 0, 0, 0, 2, 2, 2, 2]] * 2 + [[0, 0, 0, 0, 5, 5, 5, 5]], np.float32)
    s, b, _, _ = box_nms(scores, rois, [0, 0, 0], kernel=kernel, iou=0.5, sigma=0.5)
    assert np.isfinite(s).all() and np.isfinite(b).all()
    if kernel == HARD:
        # 0/0 is never below the threshold: every other point is suppressed.
        assert s.tolist() == pytest.approx([0.9])
    elif kernel == LINEAR:
        assert s.tolist() == pytest.approx([0.9])  # decays to 0.8 * (1 - 1) = 0
    else:
        g = math.exp(-1 / 0.5)
        assert s.tolist() == pytest.approx([0.9, 0.8 * g, 0.7 * g * g])


def test_box_nms_hard_kernel_with_zero_nms_threshold_keeps_zeroed_boxes():
    # Android multiplies a suppressed score by 0; with an NMS score threshold of 0 the
    # box is not "below" it and comes back with score 0.
    scores = [[0, 0.9], [0, 0.8]]
    rois = np.array([[0, 0, 0, 0, 0, 0, 4, 4], [0, 0, 0, 0, 0, 0, 4, 4]], np.float32)
    s, *_ = box_nms(scores, rois, [0, 0], nms_thr=0.0)
    assert s.tolist() == pytest.approx([0.9, 0.0])
    s, *_ = box_nms(scores, rois, [0, 0], nms_thr=0.01)
    assert s.tolist() == pytest.approx([0.9])


@pytest.mark.parametrize("kernel", [HARD, LINEAR, GAUSSIAN])
def test_box_nms_quant_signed_is_unsigned_minus_128(kernel):
    rng = np.random.default_rng(15 + kernel)
    n, classes = 12, 3
    q = rng.integers(0, 256, (n, classes)).astype(np.uint8)
    boxes = random_boxes(rng, n * classes, grid=12, size=6).reshape(n, classes * 4)
    boxes = (boxes * 8).astype(np.uint16)
    ids = np.repeat([0, 1], n // 2).astype(np.int32)
    kw = dict(thr=0.3, kernel=kernel, iou=0.4, sigma=0.5, nms_thr=0.2, scale=0.005)
    u = box_nms(q, boxes, ids, t=Q8, zp=10, **kw)
    s = box_nms((q.astype(np.int16) - 128).astype(np.int8), boxes, ids, t=Q8S, zp=-118, **kw)
    assert u[0].size > 0
    np.testing.assert_array_equal(s[0].astype(np.int16), u[0].astype(np.int16) - 128)
    for a, b in zip(u[1:], s[1:]):
        np.testing.assert_array_equal(a, b)


def test_box_nms_float16_matches_float32_on_exact_values():
    scores = np.array([[0, 0.75], [0, 0.5], [0, 0.25]], np.float32)
    rois = np.array(
        [[0, 0, 1, 1, 0, 0, 4, 4], [0, 0, 1, 1, 0, 0, 4, 2], [0, 0, 1, 1, 8, 8, 9, 9]], np.float32
    )
    a = box_nms(scores, rois, [0, 0, 0], kernel=LINEAR, iou=0.3)
    b = box_nms(
        scores.astype(np.float16), rois.astype(np.float16), [0, 0, 0], kernel=LINEAR, iou=0.3, t=F16
    )
    np.testing.assert_allclose(b[0], a[0], atol=1e-3)
    np.testing.assert_array_equal(b[2], a[2])


@pytest.mark.parametrize("kernel, sigma", [(3, 1.0), (-1, 1.0), (GAUSSIAN, 0.0)])
def test_box_nms_rejects_bad_kernel_parameters(kernel, sigma):
    rois = np.zeros((1, 8), np.float32)
    err = hal_error(lambda: box_nms([[0, 1]], rois, [0], kernel=kernel, sigma=sigma))
    assert err.status == ErrorStatus.INVALID_ARGUMENT


def test_box_nms_output_scores_keep_input_quantization():
    q = np.array([[0, 200]], np.uint8)
    err = hal_error(
        lambda: run_op(
            O.BOX_WITH_NMS_LIMIT,
            [
                tensor(Q8, q, scale=0.01),
                tensor(Q16A, np.zeros((1, 8)), scale=0.125),
                tensor(I32, [0]),
                *(scalar(T.FLOAT32, 0.1) for _ in range(1)),
                scalar(T.INT32, -1),
                scalar(T.INT32, 0),
                *(scalar(T.FLOAT32, v) for v in (0.5, 1.0, 0.1)),
            ],
            [
                output(Q8, (0,), scale=0.02),
                output(Q16A, (0, 4), scale=0.125),
                output(I32, (0,)),
                output(I32, (0,)),
            ],
        )
    )
    assert err.status == ErrorStatus.INVALID_ARGUMENT and "scale" in err.message


def test_box_nms_inverted_box_fails():
    rois = np.array([[0, 0, 1, 1, 5, 0, 1, 1]], np.float32)
    err = hal_error(lambda: box_nms([[0, 0.9]], rois, [0]))
    assert err.status == ErrorStatus.GENERAL_FAILURE


def test_box_nms_many_candidates_need_little_more_memory_than_their_input():
    # 1M quant8 scores of 2 classes (2 MB), their quant16 boxes (16 MB) and batch ids
    # (4 MB): dequantizing every box and copying the candidates' coordinates took 6 times.
    n = 1 << 20
    scores = np.tile(np.array([[0, 200], [0, 190], [0, 100]], np.uint8), (n // 3 + 1, 1))[:n]
    rois = np.tile(np.array([[0, 0, 8, 8, 0, 0, 80, 80]], np.uint16), (n, 1))
    ids = np.zeros(n, np.int32)
    got, peak = traced_peak(lambda: box_nms(scores, rois, ids, thr=0.5, t=Q8, scale=0.005, zp=0))
    assert peak < 4 * (scores.nbytes + rois.nbytes + ids.nbytes), f"peak {peak >> 20} MB"
    np.testing.assert_array_equal(got[1], [[0, 0, 80, 80]])  # one box survives hard NMS


# ---------------------------------------------------------------------------------------
# DETECTION_POSTPROCESSING
# ---------------------------------------------------------------------------------------


def detect(
    scores,
    deltas,
    anchors,
    *,
    regular,
    max_det=3,
    max_cls=1,
    per_cls=3,
    thr=0.0,
    iou=0.5,
    bg_in_label=False,
    scales=(10.0, 10.0, 5.0, 5.0),
    t=F32,
):
    scores = np.asarray(scores)
    s_t = T.FLOAT16 if t == F16 else T.FLOAT32
    b = scores.shape[0]
    slots = max_det if regular else max_det * max_cls
    return run_op(
        O.DETECTION_POSTPROCESSING,
        [
            tensor(t, scores),
            tensor(t, deltas),
            tensor(t, anchors),
            *(scalar(s_t, v) for v in scales),
            scalar(T.BOOL, regular),
            scalar(T.INT32, max_det),
            scalar(T.INT32, max_cls),
            scalar(T.INT32, per_cls),
            scalar(s_t, thr),
            scalar(s_t, iou),
            scalar(T.BOOL, bg_in_label),
        ],
        [
            output(t, (b, slots)),
            output(t, (b, slots, 4)),
            output(I32, (b, slots)),
            output(I32, (b,)),
        ],
    )


ANCH = np.array([[5, 5, 10, 10], [5, 6, 10, 10], [20, 20, 4, 4]], np.float32)


def test_detection_decodes_with_scales():
    # Anchor (10, 20, 4, 8); encoding (1, -2, ln 4 * 5, 0): y = 10 + 4 * 1/10,
    # x = 20 + 8 * (-2)/10, h = 4 * 4, w = 8.
    deltas = np.array([[[1, -2, 5 * math.log(4), 0]]], np.float32)
    _, boxes, _, n = detect([[[0, 1]]], deltas, [[10, 20, 4, 8]], regular=True, max_det=1)
    np.testing.assert_allclose(boxes[0, 0], [10.4 - 8, 18.4 - 4, 10.4 + 8, 18.4 + 4], rtol=1e-5)
    assert n.tolist() == [1]


@pytest.mark.parametrize(
    "scales, encoding, box",
    [
        # Anchor (ctr y 10, ctr x 20, h 4, w 8), one scale per coordinate:
        # y = 10 + 4 * 1 / 2 = 12, x = 20 + 8 * 2 / 4 = 24, h = 4 * exp(ln 2 / 1) = 8,
        # w = 8 * exp((ln 0.5 / 2) / 0.5) = 4 -> (y1, x1, y2, x2) = (8, 22, 16, 26).
        ((2.0, 4.0, 1.0, 0.5), (1.0, 2.0, math.log(2), math.log(0.5) / 2), (8, 22, 16, 26)),
        # The same box from scales (4, 2, 0.5, 1).
        ((4.0, 2.0, 0.5, 1.0), (2.0, 1.0, math.log(2) / 2, math.log(0.5)), (8, 22, 16, 26)),
    ],
)
def test_detection_decodes_each_coordinate_with_its_own_scale(scales, encoding, box):
    """Inputs 3..6 are the y, x, h and w scales, in that order."""
    deltas = np.array([[encoding]], np.float32)
    _, boxes, _, n = detect(
        [[[0, 1]]], deltas, [[10, 20, 4, 8]], regular=True, max_det=1, scales=scales
    )
    np.testing.assert_allclose(boxes[0, 0], box, rtol=1e-6)
    assert n.tolist() == [1]


def test_detection_regular_nms_is_per_class():
    # Anchors 0 and 1 overlap (IoU 9/11). Class 1 prefers anchor 0, class 2 anchor 1:
    # regular NMS keeps both (different classes) and anchor 2 for class 1.
    scores = np.array([[[0, 0.9, 0.1], [0, 0.8, 0.85], [0, 0.3, 0.0]]], np.float32)
    deltas = np.zeros((1, 3, 4), np.float32)
    s, _, c, n = detect(scores, deltas, ANCH, regular=True, max_det=4, bg_in_label=True)
    assert s.tolist() == [pytest.approx([0.9, 0.85, 0.3, 0.0])]
    assert c.tolist() == [[1, 2, 1, 0]]  # labels include the background class
    assert n.tolist() == [3]


def test_detection_fast_nms_reports_top_classes_per_box():
    scores = np.array([[[0, 0.9, 0.1, 0.5], [0, 0.8, 0.85, 0.2], [0, 0.3, 0.0, 0.4]]], np.float32)
    deltas = np.zeros((1, 3, 4), np.float32)
    s, b, c, n = detect(scores, deltas, ANCH, regular=False, max_det=2, max_cls=2)
    # Best class scores 0.9, 0.85, 0.4: anchor 1 overlaps anchor 0 and goes.
    assert s.shape == (1, 4)
    assert s.tolist() == [pytest.approx([0.9, 0.5, 0.4, 0.3])]
    assert c.tolist() == [[0, 2, 2, 0]]  # class index - 1
    assert n.tolist() == [4]
    assert b[0, 2].tolist() == [18, 18, 22, 22]


@pytest.mark.parametrize("regular", [True, False], ids=["regular", "fast"])
def test_detection_score_threshold_is_strict(regular):
    """A box scoring exactly the score threshold (0.5) is not a candidate, in regular
    (per class) and fast (best class) NMS alike, and the background class (0.9 for
    anchor 1) never makes a box a candidate: only anchor 2 (0.75) is reported."""
    scores = np.array([[[0, 0.5], [0.9, 0.25], [0, 0.75]]], np.float32)
    deltas = np.zeros((1, 3, 4), np.float32)
    s, b, c, n = detect(scores, deltas, ANCH, regular=regular, max_det=3, thr=0.5)
    assert n.tolist() == [1]
    assert s.tolist() == [[0.75, 0.0, 0.0]]
    assert b[0, 0].tolist() == [18, 18, 22, 22]


def test_detection_fast_nms_classes_per_box_capped_by_the_classes():
    # 3 classes per detection asked, only 2 besides the background: 2 slots of 3 used.
    scores = np.array([[[0, 0.9, 0.1], [0, 0.2, 0.3], [0, 0.3, 0.4]]], np.float32)
    s, _, c, n = detect(
        scores, np.zeros((1, 3, 4), np.float32), ANCH, regular=False, max_det=1, max_cls=3
    )
    assert s.tolist() == [pytest.approx([0.9, 0.1, 0.0])]
    assert c.tolist() == [[0, 1, 0]]
    assert n.tolist() == [2]


def test_detection_batches_and_empty_results():
    scores = np.zeros((2, 3, 2), np.float32)
    scores[1, 2, 1] = 0.6
    s, b, c, n = detect(scores, np.zeros((2, 3, 4), np.float32), ANCH, regular=True, thr=0.1)
    assert n.tolist() == [0, 1]
    assert s[0].tolist() == [0, 0, 0] and (b[0] == 0).all() and (c[0] == 0).all()
    assert s[1, 0] == pytest.approx(0.6)


def test_detection_zero_size_anchors_stay_finite():
    anchors = np.zeros((3, 4), np.float32)
    scores = np.array([[[0, 0.9], [0, 0.8], [0, 0.7]]], np.float32)
    s, b, _, n = detect(scores, np.zeros((1, 3, 4), np.float32), anchors, regular=True)
    # 0/0 IoU is never >= the threshold: nothing is suppressed.
    assert n.tolist() == [3] and np.isfinite(s).all() and np.isfinite(b).all()


@pytest.mark.parametrize(
    "regular, field, valid",
    [
        (True, "max_det", False),
        (False, "max_det", False),
        (True, "per_cls", False),
        (False, "max_cls", False),
        # The limit the other NMS uses is ignored: Android's prepare checks only the one
        # in use, and the doc says input 9/10 is "only used when input7 is false/true".
        (True, "max_cls", True),
        (False, "per_cls", True),
    ],
)
def test_detection_non_positive_limits(regular, field, valid):
    def run():
        return detect(
            [[[0, 1]]], np.zeros((1, 1, 4)), [[1, 1, 1, 1]], regular=regular, **{field: 0}
        )

    if valid:
        _, _, _, n = run()
        assert n.tolist() == [1]
        return
    err = hal_error(run)
    assert err.status == ErrorStatus.INVALID_ARGUMENT
    assert "must be positive" in err.message


# ---------------------------------------------------------------------------------------
# GENERATE_PROPOSALS
# ---------------------------------------------------------------------------------------


def proposals(
    scores,
    deltas,
    anchors,
    info,
    *,
    pre=-1,
    post=-1,
    iou=0.5,
    min_size=0.0,
    stride=4.0,
    strides=None,
    nchw=False,
    t=F32,
    **kw,
):
    s_t = T.FLOAT16 if t == F16 else T.FLOAT32
    q = t in (Q8, Q8S)
    stride_h, stride_w = strides or (stride, stride)
    return run_op(
        O.GENERATE_PROPOSALS,
        [
            tensor(t, scores, scale=kw.get("scale", 0.0), zero_point=kw.get("zp", 0)),
            tensor(t, deltas, scale=kw.get("dscale", 0.0), zero_point=kw.get("dzp", 0)),
            tensor(Q16S if q else t, anchors, scale=0.125 if q else 0.0),
            tensor(Q16A if q else t, info, scale=0.125 if q else 0.0),
            scalar(s_t, stride_h),
            scalar(s_t, stride_w),
            scalar(T.INT32, pre),
            scalar(T.INT32, post),
            scalar(s_t, iou),
            scalar(s_t, min_size),
            scalar(T.BOOL, nchw),
        ],
        [
            output(t, (0,), scale=kw.get("scale", 0.0), zero_point=kw.get("zp", 0)),
            output(Q16A if q else t, (0, 4), scale=0.125 if q else 0.0),
            output(I32, (0,)),
        ],
    )


SC = np.array([0.9, 0.8, 0.7, 0.6], np.float32).reshape(1, 2, 2, 1)
ZERO_DELTAS = np.zeros((1, 2, 2, 4), np.float32)


def test_proposals_pre_and_post_nms_limits():
    s, _, _ = proposals(SC, ZERO_DELTAS, [[0, 0, 4, 4]], [[8, 8]], pre=2)
    assert s.tolist() == pytest.approx([0.9, 0.8])
    s, _, _ = proposals(SC, ZERO_DELTAS, [[0, 0, 4, 4]], [[8, 8]], post=3)
    assert s.tolist() == pytest.approx([0.9, 0.8, 0.7])


def test_proposals_zero_limits_keep_every_box():
    # pre- and post-NMS top N of 0 (like negative ones) mean no limit
    s, _, _ = proposals(SC, ZERO_DELTAS, [[0, 0, 4, 4]], [[8, 8]], pre=0, post=0)
    assert s.tolist() == pytest.approx([0.9, 0.8, 0.7, 0.6])


def test_proposals_filter_small_and_outside_boxes():
    # min_size 4: boxes exactly 4 wide are dropped (strictly larger needed).
    s, _, _ = proposals(SC, ZERO_DELTAS, [[0, 0, 4, 4]], [[8, 8]], min_size=4.0)
    assert s.size == 0
    # An 8 (high) x 4 (wide) image: the boxes at x 4..8 clip to zero width at x = 4;
    # with a negative min size only their centre (4, not < 4) rules them out.
    s, b, _ = proposals(SC, ZERO_DELTAS, [[0, 0, 4, 4]], [[8, 4]], min_size=-1.0)
    assert s.tolist() == pytest.approx([0.9, 0.7])
    assert b.tolist() == [[0, 0, 4, 4], [0, 4, 4, 8]]


def test_proposals_multiple_batches_and_anchors():
    rng = np.random.default_rng(21)
    scores = rng.random((2, 3, 3, 2)).astype(np.float32)
    deltas = (rng.standard_normal((2, 3, 3, 8)) * 0.3).astype(np.float32)
    anchors = [[0, 0, 6, 6], [0, 0, 12, 4]]
    s, b, batch = proposals(scores, deltas, anchors, [[12, 12], [10, 14]], iou=0.6)
    assert set(batch.tolist()) <= {0, 1} and (np.diff(batch) >= 0).all()
    for k in (0, 1):  # within a batch: scores descending, boxes inside the image
        sk = s[batch == k]
        assert (np.diff(sk) <= 0).all()
        bk = b[batch == k]
        limit = np.array([[14, 10, 14, 10][i] if k else 12 for i in range(4)])
        assert (bk >= 0).all() and (bk <= limit).all()
        # no two kept boxes of one batch overlap beyond the threshold
        m = iou_matrix(bk)
        np.fill_diagonal(m, 0)
        assert (np.nan_to_num(m) < 0.6).all()
    nchw = proposals(
        np.transpose(scores, (0, 3, 1, 2)).copy(),
        np.transpose(deltas, (0, 3, 1, 2)).copy(),
        anchors,
        [[12, 12], [10, 14]],
        iou=0.6,
        nchw=True,
    )
    for x, y in zip((s, b, batch), nchw):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("pre_nms_top_n, kept", [(-1, 4), (4, 4), (2, 2), (1, 1)])
def test_proposals_shift_anchors_by_the_height_and_width_strides(pre_nms_top_n, kept):
    """Input 4 (height stride) shifts the anchors down the feature map's rows, input 5
    (width stride) across its columns. Worked by hand: a 2x2 map, one anchor [0, 0, 2, 2],
    zero deltas, strides 10 (height) and 3 (width): the cell at row i, column j proposes
    [3 j, 10 i, 3 j + 2, 10 i + 2]; no two overlap, so they come out by score, and a
    pre-NMS top N keeps the N best (not the first N cells, whose scores are lowest)."""
    scores = np.array([[[[0.1], [0.4]], [[0.3], [0.2]]]], np.float32)
    deltas = np.zeros((1, 2, 2, 4), np.float32)
    s, b, batch = proposals(
        scores, deltas, [[0, 0, 2, 2]], [[100, 100]], pre=pre_nms_top_n, strides=(10.0, 3.0)
    )
    assert s.tolist() == pytest.approx([0.4, 0.3, 0.2, 0.1][:kept])
    assert b.tolist() == [[3, 0, 5, 2], [0, 10, 2, 12], [3, 10, 5, 12], [0, 0, 2, 2]][:kept]
    assert batch.tolist() == [0] * kept


def test_proposals_quant_signed_is_unsigned_minus_128():
    rng = np.random.default_rng(22)
    q = rng.integers(0, 256, (1, 3, 3, 2)).astype(np.uint8)
    d = rng.integers(100, 156, (1, 3, 3, 8)).astype(np.uint8)
    anchors = np.array([[0, 0, 40, 40], [0, 0, 80, 24]], np.int16)
    info = np.array([[96, 96]], np.uint16)
    kw = dict(stride=3.0, iou=0.5, scale=0.004, dscale=0.02)
    u = proposals(q, d, anchors, info, t=Q8, zp=0, dzp=128, **kw)
    s = proposals(
        (q.astype(np.int16) - 128).astype(np.int8),
        (d.astype(np.int16) - 128).astype(np.int8),
        anchors,
        info,
        t=Q8S,
        zp=-128,
        dzp=0,
        **kw,
    )
    assert u[0].size > 1
    np.testing.assert_array_equal(s[0].astype(np.int16), u[0].astype(np.int16) - 128)
    for a, b in zip(u[1:], s[1:]):
        np.testing.assert_array_equal(a, b)


def test_proposals_inverted_anchor_fails():
    err = hal_error(lambda: proposals(SC, ZERO_DELTAS, [[4, 0, 0, 4]], [[8, 8]]))
    assert err.status == ErrorStatus.GENERAL_FAILURE


def test_proposals_shape_mismatch_is_invalid():
    err = hal_error(
        lambda: proposals(SC, np.zeros((1, 2, 2, 8), np.float32), [[0, 0, 4, 4]], [[8, 8]])
    )
    assert err.status == ErrorStatus.INVALID_ARGUMENT


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android 11's validate leaves to prepare(), at execution
# ---------------------------------------------------------------------------------------


def _example_with(name: str, **changed):
    """The example ``name``'s model with scalar inputs replaced: ``i3=value`` sets input
    3's value, ``i3=(type, value)`` its type too."""
    (ex,) = [e for e in EXAMPLES if e.name == name]
    ins = list(ex.inputs)
    for key, v in changed.items():
        i = int(key[1:])
        t, v = v if isinstance(v, tuple) else (ins[i].type, v)
        ins[i] = scalar(t, v)
    model, _ = single_op_model(ex.op, ins, ex.outputs)
    return model


_ALIGN, _POOL = "roi_align_float32", "roi_pooling_float32"
_NMS, _DET = "box_with_nms_limit_hard_float32", "detection_postprocessing_regular_float32"


@pytest.mark.parametrize(
    "model, deferrable, match",
    [
        # Their prepare() functions check every parameter value.
        (_example_with(_ALIGN, i3=0), True, "output height"),
        (_example_with(_ALIGN, i6=0.0), True, "width stride"),
        (_example_with(_ALIGN, i7=-1), True, "height sampling ratio"),
        (_example_with(_POOL, i4=0), True, "output width"),
        (_example_with(_POOL, i5=-1.0), True, "height stride"),
        (_example_with(_NMS, i5=3), True, "NMS kernel"),
        (_example_with(_NMS, i5=2, i7=0.0), True, "gaussian sigma"),
        (_example_with(_DET, i3=0.0), True, "y scale"),
        (_example_with(_DET, i8=0), True, "max number of detections"),
        (_example_with(_DET, i10=0), True, "max detections per class"),
        (_example_with(_DET, i12=-1.0), True, "IoU threshold"),
        (_example_with("generate_proposals_float32", i5=0.0), True, "width stride"),
        # Their validate checks the operand types (and counts, HAL versions).
        (_example_with(_ALIGN, i3=(T.FLOAT32, 2.0)), False, "FLOAT32"),
        (_example_with(_NMS, i5=(T.FLOAT32, 0.0), i7=0.0), False, "FLOAT32"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(model, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match)
