"""AVERAGE_POOL_2D, L2_POOL_2D, MAX_POOL_2D (``pooling.py``)."""

from __future__ import annotations

import math

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, is_quant, rule
from randomgraph.generator.rules.conv import nhwc, padding_params, parse_form, spatial_input

RULES: dict = {}


@rule(RULES, O.AVERAGE_POOL_2D, O.L2_POOL_2D, O.MAX_POOL_2D)
def pool(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    explicit, has_layout, _ = parse_form(sig.inputs[1:], 6)
    nchw = has_layout and g.src.boolean(0.5)
    x = spatial_input(g, t, nchw)
    _, h, w, _ = nhwc(x.dims, nchw)
    fh = g.src.integer(1, min(h, 4) if g.src.boolean(0.8) else h)
    fw = g.src.integer(1, min(w, 4) if g.src.boolean(0.8) else w)
    sh, sw = g.src.integer(1, 3), g.src.integer(1, 3)
    act = g.activation()
    pads, _ = padding_params(g, explicit, fh, fw)
    params = [*pads, sw, sh, fw, fh, act]
    ins = [x] + [g.scalar(T.INT32, v) for v in params]
    if has_layout:
        ins.append(g.scalar(T.BOOL, nchw))
    lo, hi = x.lo, x.hi
    if g.op == O.L2_POOL_2D:
        lo, hi = 0.0, max(abs(lo), abs(hi))
    lo, hi = g.activation_bounds(act, lo, hi)
    quant = (x.scale, x.zero_point) if is_quant(t) else None
    exact = g.op == O.MAX_POOL_2D and x.exact
    if not math.isfinite(lo) or not math.isfinite(hi):
        lo, hi = -math.inf, math.inf
    return ins, [g.output(t, quant=quant, lo=lo, hi=hi, exact=exact)]
