"""RELU, RELU1, RELU6, LOGISTIC, TANH, ELU, HARD_SWISH (``activations.py``)."""

from __future__ import annotations

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import QUANT8_ASYMM, O, T, is_quant, rule, scalar_of

RULES: dict = {}

# Fixed output quantization of the quantized LOGISTIC and TANH (validated by the hook):
# (scale, zero point unsigned, zero point signed).
_FIXED = {O.LOGISTIC: (1.0 / 256, 0, -128), O.TANH: (1.0 / 128, 128, 0)}


@rule(RULES, O.RELU, O.RELU1, O.RELU6, O.LOGISTIC, O.TANH)
def activation(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    op = g.op
    quant = None
    exact = False
    if op == O.RELU:
        lo, hi = max(x.lo, 0.0), max(x.hi, 0.0)
        exact = True
    elif op == O.RELU1:
        lo, hi = min(max(x.lo, -1.0), 1.0), max(min(x.hi, 1.0), -1.0)
        exact = True
    elif op == O.RELU6:
        lo, hi = min(max(x.lo, 0.0), 6.0), max(min(x.hi, 6.0), 0.0)
        exact = True
    elif op == O.LOGISTIC:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = -1.0, 1.0
    if t in QUANT8_ASYMM:
        if op in _FIXED:
            scale, zu, zs = _FIXED[op]
            quant = (scale, zs if t == T.TENSOR_QUANT8_ASYMM_SIGNED else zu)
        else:
            quant = (x.scale, x.zero_point)
    out = g.output(t, quant=quant, lo=lo, hi=hi, exact=exact and x.exact)
    return [x], [out]


@rule(RULES, O.ELU)
def elu(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    x = g.data(t, ranks=(1, 5), primary=True)
    alpha = g.src.choice((1.0, 0.5, 2.0, 0.25))
    ins = [x, g.scalar(scalar_of(t), alpha)]
    lo = -alpha if x.lo < 0 else x.lo
    return ins, [g.output(t, lo=lo, hi=max(x.hi, 0.0))]


@rule(RULES, O.HARD_SWISH)
def hard_swish(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 5), primary=True)
    quant = None
    if is_quant(t):
        # hardSwishQuant needs input scale / (128 * output scale) < 1.
        scale = x.scale * g.src.real(0.05, 2.0)
        quant = (max(scale, x.scale / 100.0), g.qparams(t)[1])
    hi = max(x.hi, 0.0)
    # hard_swish(x) = x * relu6(x + 3) / 6 >= -0.375
    return [x], [g.output(t, quant=quant, lo=-0.375, hi=hi)]
