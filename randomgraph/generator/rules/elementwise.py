"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU (``driver/operations/elementwise.py``)."""

from __future__ import annotations

import numpy as np

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import (
    QUANT8_ASYMM,
    O,
    T,
    broadcasts_into,
    is_quant,
    mul_bounds,
    partner_dims,
    rule,
)
from randomgraph.generator.values import NONZERO, POSITIVE, Domain

RULES: dict = {}

_WITH_ACTIVATION = (O.ADD, O.SUB, O.MUL, O.DIV)


@rule(RULES, O.ADD, O.SUB, O.MUL, O.DIV, O.MAXIMUM, O.MINIMUM)
def arithmetic(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    op = g.op
    a = g.data(t, ranks=(1, 4), primary=True)
    domain = NONZERO if op == O.DIV else Domain()
    if t == T.TENSOR_INT32:
        domain = domain.narrowed(lo=-8, hi=8) if op != O.DIV else domain.narrowed(lo=1, hi=8)
    b = g.data(t, dims=partner_dims(g, a.dims), accept=broadcasts_into(a.dims), domain=domain)
    if op != O.DIV and g.src.boolean(0.3):
        a, b = b, a  # the smaller (broadcast) operand first
    ins = [a, b]
    if op == O.ADD:
        lo, hi = a.lo + b.lo, a.hi + b.hi
    elif op == O.SUB:
        lo, hi = a.lo - b.hi, a.hi - b.lo
    elif op == O.MUL:
        lo, hi = mul_bounds(a.lo, a.hi, b.lo, b.hi)
    elif op == O.MAXIMUM:
        lo, hi = max(a.lo, b.lo), max(a.hi, b.hi)
    elif op == O.MINIMUM:
        lo, hi = min(a.lo, b.lo), min(a.hi, b.hi)
    else:  # DIV: unbounded in general; never fed onward (as Android)
        lo, hi = -np.inf, np.inf
    if op in _WITH_ACTIVATION:
        act = 0 if t == T.TENSOR_INT32 else g.activation()
        ins.append(g.scalar(T.INT32, act))
        lo, hi = g.activation_bounds(act, lo, hi)
    quant = None
    if t in QUANT8_ASYMM:
        if op == O.MUL:
            # mulQuant8 needs output scale > product of the input scales.
            quant = (a.scale * b.scale * g.src.real(1.05, 4.0), g.qparams(t)[1])
        elif op in (O.MAXIMUM, O.MINIMUM) and g.src.boolean(0.5):
            quant = (a.scale, a.zero_point)
    exact = t == T.TENSOR_INT32 or op in (O.MAXIMUM, O.MINIMUM)
    out = g.output(
        t,
        quant=quant,
        lo=lo,
        hi=hi,
        exact=exact and g.all_exact(a, b),
        chainable=op != O.DIV,
    )
    return ins, [out]


@rule(RULES, O.POW)
def power(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    base = g.data(t, ranks=(1, 4), primary=True, domain=POSITIVE)
    exponent = g.data(
        t,
        dims=partner_dims(g, base.dims),
        accept=broadcasts_into(base.dims),
        domain=Domain(-2.0, 2.0, accept_lo=-2.0, accept_hi=2.0),
    )
    # pow can overflow and is not fed onward (as Android).
    return [base, exponent], [g.output(t, chainable=False)]


@rule(RULES, O.PRELU)
def prelu(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    alpha = g.data(
        t,
        dims=partner_dims(g, x.dims),
        accept=broadcasts_into(x.dims),
        domain=Domain(-1.0, 1.0, accept_lo=-1.0, accept_hi=1.0),
    )
    lo, hi = mul_bounds(min(x.lo, 0.0), 0.0, alpha.lo, alpha.hi)
    quant = (x.scale, x.zero_point) if is_quant(t) and g.src.boolean(0.5) else None
    out = g.output(t, quant=quant, lo=min(lo, max(x.lo, 0.0)), hi=max(hi, x.hi))
    return [x, alpha], [out]
