"""AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT, DETECTION_POSTPROCESSING,
GENERATE_PROPOSALS, HEATMAP_MAX_KEYPOINT, ROI_ALIGN, ROI_POOLING (``detection.py``).

Boxes, batch indexes and image sizes are fresh tensors built to be valid data (ordered
corners inside the image, batch indexes grouped and in range); quantized boxes use the
fixed scale 0.125 the declarations demand. Outputs whose size depends on the data
(BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS) are declared with unknown dims and are model
outputs only."""

from __future__ import annotations

from randomgraph.generator.core import OpGen, Tensor
from randomgraph.generator.rules.base import O, T, is_float, is_quant, rule, scalar_of
from randomgraph.generator.values import Domain

RULES: dict = {}

I32 = T.TENSOR_INT32
BOX_SCALE = 0.125
Q16A = T.TENSOR_QUANT16_ASYMM


def _coords(g: OpGen, type_code: int, reals: list[float], dims) -> Tensor:
    """A fresh box-like tensor with real values ``reals`` (multiples of 1/8)."""
    if is_float(type_code):
        return g.fresh(type_code, dims, values=reals, quant=(0.0, 0))
    q = [round(v / BOX_SCALE) for v in reals]
    return g.fresh(type_code, dims, values=q, quant=(BOX_SCALE, 0))


def _box(g: OpGen, width: float, height: float) -> list[float]:
    """(x1, y1, x2, y2) inside a width x height image, on the 1/8 grid."""
    x1 = g.src.integer(0, int(width * 8) - 1) / 8
    x2 = g.src.integer(int(x1 * 8), int(width * 8)) / 8
    y1 = g.src.integer(0, int(height * 8) - 1) / 8
    y2 = g.src.integer(int(y1 * 8), int(height * 8)) / 8
    return [x1, y1, x2, y2]


def _batch_ids(g: OpGen, n: int, batches: int) -> Tensor:
    ids = sorted(g.src.integer(0, batches - 1) for _ in range(n))
    return g.fresh(I32, (n,), values=ids)


def _image_size(g: OpGen) -> tuple[float, float]:
    return float(g.src.integer(4, 32)), float(g.src.integer(4, 32))


def _scores(g: OpGen, t: int, dims) -> Tensor:
    if is_quant(t):
        return g.fresh(t, dims, quant=(1.0 / 256, 0 if t == T.TENSOR_QUANT8_ASYMM else -128))
    return g.fresh(t, dims, domain=Domain(0.0, 1.0))


def _params(g: OpGen, sig, first: int, values) -> list[Tensor]:
    return [g.scalar(sig.inputs[first + k], v) for k, v in enumerate(values)]


@rule(RULES, O.AXIS_ALIGNED_BBOX_TRANSFORM)
def bbox_transform(g: OpGen):
    sig = g.signature()
    tb, td = sig.inputs[0], sig.inputs[1]
    g.primary(2)
    n = g.src.integer(1, 6)
    classes = g.src.integer(1, 3)
    batches = g.src.integer(1, 3)
    sizes = [_image_size(g) for _ in range(batches)]
    ids = sorted(g.src.integer(0, batches - 1) for _ in range(n))
    rois = [v for i in ids for v in _box(g, sizes[i][1], sizes[i][0])]
    roi = _coords(g, tb, rois, (n, 4))
    deltas = g.fresh(td, (n, 4 * classes), domain=Domain(-1.0, 1.0))
    info = _coords(g, tb, [v for s in sizes for v in s], (batches, 2))
    quant = (BOX_SCALE, 0) if tb == Q16A else None
    out = g.output(tb, quant=quant, lo=0.0, hi=32.0)
    return [roi, deltas, g.fresh(I32, (n,), values=ids), info], [out]


@rule(RULES, O.BOX_WITH_NMS_LIMIT)
def box_with_nms_limit(g: OpGen):
    sig = g.signature()
    ts, tb = sig.inputs[0], sig.inputs[1]
    g.primary(2)
    n = g.src.integer(1, 8)
    classes = g.src.integer(2, 4)
    batches = g.src.integer(1, 2)
    scores = _scores(g, ts, (n, classes))
    w, h = _image_size(g)
    boxes = [v for _ in range(n * classes) for v in _box(g, w, h)]
    roi = _coords(g, tb, boxes, (n, 4 * classes))
    ids = _batch_ids(g, n, batches)
    kernel = g.src.integer(0, 2)
    params = _params(
        g,
        sig,
        3,
        [
            g.src.choice((0.0, 0.1, 0.3)),  # score threshold
            g.src.choice((-1, 1, 3, 10)),  # max detections
            kernel,
            g.src.choice((0.3, 0.5, 0.7)),  # IoU threshold
            g.src.choice((0.5, 1.0)),  # sigma
            g.src.choice((0.0, 0.05)),  # NMS score threshold
        ],
    )
    out_quant = (scores.scale, scores.zero_point) if is_quant(ts) else None
    box_quant = (BOX_SCALE, 0) if tb == Q16A else None
    outs = [
        g.output(ts, quant=out_quant, unknown_shape=(0,)),
        g.output(tb, quant=box_quant, unknown_shape=(0, 4)),
        g.output(I32, unknown_shape=(0,)),
        g.output(I32, unknown_shape=(0,)),
    ]
    return [scores, roi, ids, *params], outs


@rule(RULES, O.DETECTION_POSTPROCESSING)
def detection_postprocessing(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    g.primary(3)
    batches = g.src.integer(1, 2)
    anchors_n = g.src.integer(1, 8)
    classes = g.src.integer(2, 4)
    scores = g.fresh(t, (batches, anchors_n, classes), domain=Domain(0.0, 1.0))
    deltas = g.fresh(t, (batches, anchors_n, 4), domain=Domain(-0.5, 0.5))
    anchor_vals = []
    for _ in range(anchors_n):
        anchor_vals += [g.src.integer(0, 16) / 2, g.src.integer(0, 16) / 2]
        anchor_vals += [g.src.integer(1, 8) / 2, g.src.integer(1, 8) / 2]
    anchors = g.fresh(t, (anchors_n, 4), values=anchor_vals)
    regular = g.src.boolean(0.5)
    max_det = g.src.integer(1, 4)
    per_det = g.src.integer(1, 2)
    st = sig.inputs[3]
    ins = [scores, deltas, anchors]
    ins += [g.scalar(st, v) for v in (10.0, 10.0, 5.0, 5.0)]
    ins.append(g.scalar(T.BOOL, regular))
    ins += [g.scalar(T.INT32, v) for v in (max_det, per_det, g.src.integer(1, 3))]
    ins += [g.scalar(st, g.src.choice((0.0, 0.2))), g.scalar(st, g.src.choice((0.5, 0.7)))]
    ins.append(g.scalar(T.BOOL, g.src.boolean(0.5)))
    outs = [
        g.output(t, lo=0.0, hi=1.0),
        g.output(t),
        g.output(I32, lo=0, hi=classes),
        g.output(I32, lo=0, hi=max_det * per_det),
    ]
    return ins, outs


@rule(RULES, O.GENERATE_PROPOSALS)
def generate_proposals(g: OpGen):
    sig = g.signature()
    ts, td, ta, ti = sig.inputs[:4]
    g.primary(4)
    nchw = g.src.boolean(0.5)
    n = g.src.integer(1, 2)
    a = g.src.integer(1, 3)
    h, w = g.src.integer(1, 4), g.src.integer(1, 4)
    stride = float(g.src.integer(1, 4))
    score_dims = (n, a, h, w) if nchw else (n, h, w, a)
    delta_dims = (n, 4 * a, h, w) if nchw else (n, h, w, 4 * a)
    scores = _scores(g, ts, score_dims)
    if is_quant(td):
        deltas = g.fresh(td, delta_dims, quant=(1.0 / 64, g.qparams(td)[1]))
    else:
        deltas = g.fresh(td, delta_dims, domain=Domain(-0.5, 0.5))
    img_h, img_w = h * stride, w * stride
    anchors = _coords(g, ta, [v for _ in range(a) for v in _box(g, img_w, img_h)], (a, 4))
    info = _coords(g, ti, [img_h, img_w] * n, (n, 2))
    st = sig.inputs[4]
    ins = [scores, deltas, anchors, info, g.scalar(st, stride), g.scalar(st, stride)]
    # Never a limit of 0: NNAPI's doc says a non-positive limit is unlimited, Android's
    # hardNmsSingleClass keeps no box for post_nms_top_n = 0; drivers may follow either.
    ins += [g.scalar(T.INT32, g.src.choice((-1, 4, 16))), g.scalar(T.INT32, g.src.choice((-1, 3)))]
    ins += [g.scalar(st, g.src.choice((0.5, 0.7))), g.scalar(st, g.src.choice((0.0, 1.0)))]
    ins.append(g.scalar(T.BOOL, nchw))
    out_quant = (scores.scale, scores.zero_point) if is_quant(ts) else None
    outs = [
        g.output(ts, quant=out_quant, unknown_shape=(0,)),
        g.output(
            T.TENSOR_QUANT16_ASYMM if is_quant(ts) else ts,
            quant=(BOX_SCALE, 0) if is_quant(ts) else None,
            unknown_shape=(0, 4),
        ),
        g.output(I32, unknown_shape=(0,)),
    ]
    return ins, outs


@rule(RULES, O.HEATMAP_MAX_KEYPOINT)
def heatmap_max_keypoint(g: OpGen):
    sig = g.signature()
    th, tb = sig.inputs[0], sig.inputs[1]
    g.primary(4)
    nchw = g.src.boolean(0.5)
    n = g.src.integer(1, 3)
    size = g.src.integer(2, 6)
    k = g.src.integer(1, 4)
    dims = (n, k, size, size) if nchw else (n, size, size, k)
    heatmap = g.fresh(th, dims, domain=Domain(-1.0, 1.0))
    w, h = _image_size(g)
    boxes = []
    for _ in range(n):
        b = _box(g, w, h)
        b[2] = max(b[2], b[0] + 1.0)  # a box at least one pixel wide and tall
        b[3] = max(b[3], b[1] + 1.0)
        boxes += b
    box_t = _coords(g, tb, boxes, (n, 4))
    box_quant = (BOX_SCALE, 0) if tb == Q16A else None
    score_quant = None
    if is_quant(th):
        score_quant = (heatmap.scale, heatmap.zero_point)
    outs = [g.output(th, quant=score_quant), g.output(tb, quant=box_quant, lo=0.0, hi=40.0)]
    return [heatmap, box_t, g.scalar(T.BOOL, nchw)], outs


@rule(RULES, O.ROI_ALIGN, O.ROI_POOLING)
def roi(g: OpGen):
    sig = g.signature()
    t, tb = sig.inputs[0], sig.inputs[1]
    nchw = g.src.boolean(0.5)
    x = g.data(t, rank=4, primary=True)
    n, h, w = (x.dims[0], x.dims[2], x.dims[3]) if nchw else x.dims[:3]
    scale = float(g.src.choice((1, 2, 4)))
    rois = g.src.integer(1, 4)
    boxes = [v for _ in range(rois) for v in _box(g, w * scale, h * scale)]
    roi_t = _coords(g, tb, boxes, (rois, 4))
    ids = _batch_ids(g, rois, n)
    out_h, out_w = g.src.integer(1, 4), g.src.integer(1, 4)
    st = scalar_of(t) if is_float(t) else T.FLOAT32
    ins = [x, roi_t, ids, g.scalar(T.INT32, out_h), g.scalar(T.INT32, out_w)]
    ins += [g.scalar(st, scale), g.scalar(st, scale)]
    if g.op == O.ROI_ALIGN:
        ins += [g.scalar(T.INT32, g.src.integer(0, 2)), g.scalar(T.INT32, g.src.integer(0, 2))]
    ins.append(g.scalar(T.BOOL, nchw))
    quant = (x.scale, x.zero_point) if is_quant(t) else None
    # 0 where a bin holds no element (ROI_POOLING) or a sample falls outside the map
    # (ROI_ALIGN), whatever the input's bounds.
    lo, hi = min(x.lo, 0.0), max(x.hi, 0.0)
    return ins, [g.output(t, quant=quant, lo=lo, hi=hi)]
