"""ABS, EXP, FLOOR, LOG, NEG, RSQRT, SIN, SQRT (``unary.py``)."""

from __future__ import annotations

import math

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, magnitude, rule
from randomgraph.generator.values import NONNEGATIVE, POSITIVE, ROUNDING, SMALL, Domain

RULES: dict = {}

_DOMAINS = {
    O.LOG: POSITIVE,
    O.RSQRT: POSITIVE,
    O.SQRT: NONNEGATIVE,
    O.EXP: SMALL,
    O.FLOOR: ROUNDING,
    O.SIN: Domain(-4.0, 4.0, accept_lo=-8.0, accept_hi=8.0),
}


@rule(RULES, O.ABS, O.EXP, O.FLOOR, O.LOG, O.NEG, O.RSQRT, O.SIN, O.SQRT)
def unary(g: OpGen):
    t = g.signature().inputs[0]
    op = g.op
    domain = _DOMAINS.get(op, Domain())
    if t == T.TENSOR_INT32:
        domain = Domain(-100, 100)
    x = g.data(t, ranks=(1, 4 if op == O.FLOOR else 5), primary=True, domain=domain)
    exact = op in (O.ABS, O.NEG, O.FLOOR) and x.exact
    if op == O.ABS:
        lo, hi = (0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))), magnitude(x)
    elif op == O.NEG:
        lo, hi = -x.hi, -x.lo
    elif op == O.EXP:
        lo, hi = math.exp(x.lo), math.exp(x.hi)
    elif op == O.FLOOR:
        lo, hi = math.floor(x.lo), math.floor(x.hi)
    elif op == O.LOG:
        lo, hi = math.log(x.lo), math.log(x.hi)
    elif op == O.RSQRT:
        lo, hi = 1 / math.sqrt(x.hi), 1 / math.sqrt(x.lo)
    elif op == O.SQRT:
        lo, hi = math.sqrt(x.lo), math.sqrt(x.hi)
    else:
        lo, hi = -1.0, 1.0
    return [x], [g.output(t, lo=lo, hi=hi, exact=exact)]
