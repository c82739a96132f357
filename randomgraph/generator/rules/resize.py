"""RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR (``resize.py``)."""

from __future__ import annotations

import math

import numpy as np

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, is_quant, require, rule
from randomgraph.generator.rules.conv import nhwc

RULES: dict = {}


@rule(RULES, O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR)
def resize(g: OpGen):
    sig = g.signature()
    t, size_type = sig.inputs[0], sig.inputs[1]
    flags = len(sig.inputs) - 3  # layout, align_corners, half_pixel_centers
    nchw = flags >= 1 and g.src.boolean(0.5)
    x = g.data(t, rank=4, primary=True)
    n, h, w, c = nhwc(x.dims, nchw)
    budget = g.max_elements // max(n * c, 1)
    if size_type == T.INT32:
        oh = g.src.integer(1, max(1, min(2 * h + 1, g.max_dim)))
        ow = g.src.integer(1, max(1, min(2 * w + 1, g.max_dim)))
        require(oh * ow <= budget, "output too large")
        sizes = [g.scalar(T.INT32, ow), g.scalar(T.INT32, oh)]
    else:
        scales = []
        for d in (w, h):
            s = g.src.choice((0.5, 1.0, 1.5, 2.0, 0.75, 3.0))
            require(math.floor(np.float32(d) * np.float32(s)) >= 1, "empty output")
            scales.append(s)
        sizes = [g.scalar(size_type, scales[0]), g.scalar(size_type, scales[1])]
    ins = [x, *sizes]
    if flags >= 1:
        ins.append(g.scalar(T.BOOL, nchw))
    if flags >= 2:
        mode = g.src.integer(0, 2)  # neither, align_corners, half_pixel_centers
        ins.append(g.scalar(T.BOOL, mode == 1))
        if flags >= 3:
            ins.append(g.scalar(T.BOOL, mode == 2))
    quant = (x.scale, x.zero_point) if is_quant(t) else None
    exact = g.op == O.RESIZE_NEAREST_NEIGHBOR and x.exact
    return ins, [g.output(t, quant=quant, lo=x.lo, hi=x.hi, exact=exact)]
