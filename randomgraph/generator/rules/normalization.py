"""SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION,
INSTANCE_NORMALIZATION (``normalization.py``)."""

from __future__ import annotations

import math

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, is_quant, rule, scalar_of
from randomgraph.generator.values import Domain

RULES: dict = {}


def _ranks(g: OpGen, has_axis: bool, legacy: tuple[int, ...]) -> tuple[int, int]:
    """Rank range: 1..4 with the axis parameter; the legacy form (no axis) before HAL 1.2
    takes only ``legacy`` ranks."""
    if has_axis or g.version >= 12:
        return (1, 4)
    r = g.src.choice(legacy)
    return (r, r)


@rule(RULES, O.SOFTMAX, O.LOG_SOFTMAX)
def softmax(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    has_axis = len(sig.inputs) > 2
    x = g.data(t, ranks=_ranks(g, has_axis, (2, 4)), primary=True)
    beta = g.src.choice((1.0, 0.5, 2.0, 0.125))
    if is_quant(t):
        beta = max(beta, 1.0)
    ins = [x, g.scalar(sig.inputs[1], beta)]
    if has_axis:
        r = len(x.dims)
        ins.append(g.scalar(T.INT32, g.src.integer(-r, r - 1)))
    if g.op == O.LOG_SOFTMAX:
        span = (x.hi - x.lo) * beta + math.log(max(x.elements, 1))
        return ins, [g.output(t, lo=-span, hi=0.0)]
    quant = None
    if is_quant(t):
        quant = (1.0 / 256, -128 if t == T.TENSOR_QUANT8_ASYMM_SIGNED else 0)
    return ins, [g.output(t, quant=quant, lo=0.0, hi=1.0)]


@rule(RULES, O.L2_NORMALIZATION)
def l2_normalization(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    has_axis = len(sig.inputs) > 1
    # Away from the all-zero vector, whose normalization is a 0/0.
    domain = Domain(0.25, 2.0, accept_lo=0.25) if not is_quant(t) else Domain()
    x = g.data(t, ranks=_ranks(g, has_axis, (4,)), primary=True, domain=domain)
    ins = [x]
    if has_axis:
        r = len(x.dims)
        ins.append(g.scalar(T.INT32, g.src.integer(-r, r - 1)))
    quant = None
    if is_quant(t):
        quant = (1.0 / 128, 0 if t == T.TENSOR_QUANT8_ASYMM_SIGNED else 128)
    # Not fed onward, as Android (a near-zero vector divides by almost nothing).
    return ins, [g.output(t, quant=quant, lo=-1.0, hi=1.0, chainable=False)]


@rule(RULES, O.LOCAL_RESPONSE_NORMALIZATION)
def lrn(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    has_axis = len(sig.inputs) > 5
    x = g.data(t, ranks=_ranks(g, has_axis, (4,)), primary=True)
    st = scalar_of(t)
    radius = g.src.integer(0, 3)
    bias = g.src.choice((1.0, 0.5, 2.0))
    alpha = g.src.choice((1.0, 0.5, 0.125))
    beta = g.src.choice((0.5, 0.75, 1.0))
    ins = [x, g.scalar(T.INT32, radius), g.scalar(st, bias), g.scalar(st, alpha)]
    ins.append(g.scalar(st, beta))
    if has_axis:
        r = len(x.dims)
        ins.append(g.scalar(T.INT32, g.src.integer(-r, r - 1)))
    m = max(abs(x.lo), abs(x.hi)) / bias**beta
    return ins, [g.output(t, lo=-m, hi=m)]


@rule(RULES, O.INSTANCE_NORMALIZATION)
def instance_normalization(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    st = scalar_of(t)
    nchw = g.src.boolean(0.5)
    x = g.data(t, rank=4, primary=True)
    gamma = g.src.choice((1.0, 0.5, 2.0))
    beta = g.src.choice((0.0, 0.5, -1.0))
    epsilon = g.src.choice((1e-3, 1e-2, 0.1))
    ins = [
        x,
        g.scalar(st, gamma),
        g.scalar(st, beta),
        g.scalar(st, epsilon),
        g.scalar(T.BOOL, nchw),
    ]
    # |normalized| <= sqrt(count) for any instance.
    m = abs(gamma) * math.sqrt(max(x.elements, 1)) + abs(beta)
    return ins, [g.output(t, lo=-m, hi=m)]
