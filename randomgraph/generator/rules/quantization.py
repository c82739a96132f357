"""DEQUANTIZE, QUANTIZE, CAST (``quantization.py``)."""

from __future__ import annotations

import math

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, is_float, is_quant, quant_range, rule
from randomgraph.generator.values import ROUNDING, Domain

RULES: dict = {}


@rule(RULES, O.DEQUANTIZE)
def dequantize(g: OpGen):
    sig = g.signature()
    t, o = sig.inputs[0], sig.outputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    if t == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        b = max(x.channel_quant.scales) * 128
        lo, hi = -b, b
    else:
        lo, hi = x.lo, x.hi
    return [x], [g.output(o, lo=lo, hi=hi)]


@rule(RULES, O.QUANTIZE)
def quantize(g: OpGen):
    sig = g.signature()
    t, o = sig.inputs[0], sig.outputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    quant = g.qparams(o)
    if g.src.boolean(0.5) and math.isfinite(x.lo) and math.isfinite(x.hi):
        # A scale that spans the input's range (most values land inside it).
        span = max(x.hi - x.lo, 1e-3)
        lo_q, hi_q = quant_range(o)
        scale = span / (hi_q - lo_q) * g.src.real(0.8, 1.5)
        zp = max(lo_q, min(hi_q, round(lo_q - x.lo / scale)))
        quant = (scale, zp)
    return [x], [g.output(o, quant=quant)]


@rule(RULES, O.CAST)
def cast(g: OpGen):
    sig = g.signature()
    t, o = sig.inputs[0], sig.outputs[0]
    domain = Domain()
    if is_float(t) and not is_float(o):
        # Truncation to integers: values off the .0 boundaries, some past uint8's range.
        domain = ROUNDING.narrowed(lo=-4.0, hi=260.0 if o == T.TENSOR_QUANT8_ASYMM else 8.0)
    elif t == T.TENSOR_INT32:
        domain = Domain(-20, 300 if o == T.TENSOR_QUANT8_ASYMM else 100)
    x = g.data(t, ranks=(1, 5), primary=True, domain=domain)
    quant = None
    if t == o and is_quant(t):
        quant = (x.scale, x.zero_point)
    if is_quant(t):
        lo, hi = quant_range(t)  # CAST reads the raw (storage) values
    else:
        lo, hi = x.lo, x.hi
        if not is_float(o):
            lo, hi = math.trunc(lo), math.trunc(hi)
    if o == T.TENSOR_QUANT8_ASYMM:
        lo, hi = max(0, min(lo, 255)), max(0, min(hi, 255))
    exact = x.exact and (t == o or not is_float(o) or not is_float(t) or o == T.TENSOR_FLOAT32)
    return [x], [g.output(o, quant=quant, lo=lo, hi=hi, exact=exact)]
