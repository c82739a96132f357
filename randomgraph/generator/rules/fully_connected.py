"""FULLY_CONNECTED (``fully_connected.py``)."""

from __future__ import annotations

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, is_quant, require, rule
from randomgraph.generator.rules.conv import float_parts, quant_parts

RULES: dict = {}


@rule(RULES, O.FULLY_CONNECTED)
def fully_connected(g: OpGen):
    sig = g.signature()
    tin, tw = sig.inputs[0], sig.inputs[1]
    x = g.data(tin, ranks=(2, 4), primary=True)
    n = x.elements
    sizes = [d for d in range(1, min(n, 256) + 1) if n % d == 0]
    # Usually the input's last dimension, as networks do; any divisor is valid.
    size = x.dims[-1] if g.src.boolean(0.6) else g.src.choice(sizes)
    units = g.src.integer(1, 16)
    require(units * size <= g.max_elements, "weights too large")
    act = g.activation()
    if is_quant(tin):
        w, b, quant = quant_parts(g, tin, tw, x, (units, size), 0, size)
        lo = hi = 0.0
    else:
        w, b, lo, hi = float_parts(g, tin, x, (units, size), units, size, act)
        quant = None
    out = g.output(tin, quant=quant if is_quant(tin) else None, lo=lo, hi=hi)
    return [x, w, b, g.scalar(T.INT32, act)], [out]
