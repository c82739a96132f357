"""EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL, LOGICAL_AND, LOGICAL_OR,
LOGICAL_NOT, SELECT (``comparisons.py``).

Compared values come from a coarse grid (exact in float16, equal values common) and
only from exactly reproducible producers, so no comparison sits on a rounding edge."""

from __future__ import annotations

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import (
    O,
    T,
    broadcasts_into,
    is_quant,
    partner_dims,
    rule,
)
from randomgraph.generator.values import STABLE, Domain

RULES: dict = {}


@rule(RULES, O.EQUAL, O.NOT_EQUAL, O.GREATER, O.GREATER_EQUAL, O.LESS, O.LESS_EQUAL)
def compare(g: OpGen):
    t = g.signature().inputs[0]
    domain = STABLE
    if t == T.TENSOR_INT32:
        domain = Domain(-4, 4, stable=True)
    a = g.data(t, ranks=(1, 4), primary=True, domain=domain)
    quant = None
    if is_quant(t) and g.src.boolean(0.5):
        quant = (a.scale, a.zero_point)  # same parameters: equality happens
    b = g.data(
        t, dims=partner_dims(g, a.dims), accept=broadcasts_into(a.dims), domain=domain, quant=quant
    )
    if g.src.boolean(0.3):
        a, b = b, a
    return [a, b], [g.output(T.TENSOR_BOOL8, exact=g.all_exact(a, b))]


@rule(RULES, O.LOGICAL_AND, O.LOGICAL_OR)
def logical(g: OpGen):
    g.signature()
    a = g.data(T.TENSOR_BOOL8, ranks=(1, 4), primary=True)
    b = g.data(T.TENSOR_BOOL8, dims=partner_dims(g, a.dims), accept=broadcasts_into(a.dims))
    if g.src.boolean(0.3):
        a, b = b, a
    return [a, b], [g.output(T.TENSOR_BOOL8, exact=g.all_exact(a, b))]


@rule(RULES, O.LOGICAL_NOT)
def logical_not(g: OpGen):
    g.signature()
    a = g.data(T.TENSOR_BOOL8, ranks=(1, 5), primary=True)
    return [a], [g.output(T.TENSOR_BOOL8, exact=a.exact)]


@rule(RULES, O.SELECT)
def select(g: OpGen):
    t = g.signature().inputs[1]
    x = g.data(t, ranks=(1, 4), primary=True)
    cond = g.data(T.TENSOR_BOOL8, dims=x.dims, domain=STABLE)
    y = g.data(t, dims=x.dims)
    if g.src.boolean(0.5):
        x, y = y, x
    lo, hi = g.bounds(x, y)
    return [cond, x, y], [g.output(t, lo=lo, hi=hi, exact=g.all_exact(cond, x, y))]
