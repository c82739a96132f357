"""MEAN, REDUCE_ALL/ANY/MAX/MIN/PROD/SUM, ARGMAX, ARGMIN, TOPK_V2 (``reduction.py``)."""

from __future__ import annotations

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, axis_value, is_quant, rule
from randomgraph.generator.values import STABLE, Domain

RULES: dict = {}


def _axes(g: OpGen, rank: int) -> list[int]:
    """Distinct axes (sometimes negative, sometimes repeated as -k and k)."""
    axes = [k for k in range(rank) if g.src.boolean(0.5)] or [g.src.integer(0, rank - 1)]
    axes = [a - rank if g.src.boolean(0.2) else a for a in axes]
    if g.src.boolean(0.1):
        axes.append(axes[0] % rank)  # a duplicate (Android ignores repeats)
    return axes


@rule(
    RULES,
    O.MEAN,
    O.REDUCE_ALL,
    O.REDUCE_ANY,
    O.REDUCE_MAX,
    O.REDUCE_MIN,
    O.REDUCE_PROD,
    O.REDUCE_SUM,
)
def reduce(g: OpGen):
    t = g.signature().inputs[0]
    op = g.op
    domain = Domain(-1.5, 1.5, accept_lo=-1.5, accept_hi=1.5) if op == O.REDUCE_PROD else Domain()
    x = g.data(t, ranks=(1, 4), primary=True, domain=domain)
    r = len(x.dims)
    axes = _axes(g, r)
    keep = g.src.boolean(0.5)
    keep_scalar = g.scalar(T.INT32, int(keep)) if op == O.MEAN else g.scalar(T.BOOL, keep)
    ins = [x, g.const(T.TENSOR_INT32, (len(axes),), axes), keep_scalar]
    quant = (x.scale, x.zero_point) if is_quant(t) else None
    lo, hi = x.lo, x.hi
    exact = op in (O.REDUCE_ALL, O.REDUCE_ANY, O.REDUCE_MAX, O.REDUCE_MIN) and x.exact
    chainable = True
    if op == O.REDUCE_SUM:
        n = x.elements
        lo, hi = min(lo * n, lo), max(hi * n, hi)
    elif op == O.REDUCE_PROD:
        chainable = False  # can overflow; not fed onward (as Android)
    return ins, [g.output(t, quant=quant, lo=lo, hi=hi, exact=exact, chainable=chainable)]


@rule(RULES, O.ARGMAX, O.ARGMIN)
def arg(g: OpGen):
    t = g.signature().inputs[0]
    domain = Domain(-8, 8, stable=True) if t == T.TENSOR_INT32 else STABLE
    x = g.data(t, ranks=(1, 4), primary=True, domain=domain)
    axis = axis_value(g, len(x.dims))
    hi = max(x.dims) - 1
    return [x, g.scalar(T.INT32, axis)], [g.output(T.TENSOR_INT32, lo=0, hi=hi, exact=x.exact)]


@rule(RULES, O.TOPK_V2)
def topk(g: OpGen):
    t = g.signature().inputs[0]
    domain = Domain(-8, 8, stable=True) if t == T.TENSOR_INT32 else STABLE
    x = g.data(t, ranks=(1, 4), primary=True, domain=domain)
    k = g.src.integer(1, x.dims[-1])
    quant = (x.scale, x.zero_point) if is_quant(t) else None
    values = g.output(t, quant=quant, lo=x.lo, hi=x.hi, exact=x.exact)
    indices = g.output(T.TENSOR_INT32, lo=0, hi=x.dims[-1] - 1, exact=x.exact)
    return [x, g.scalar(T.INT32, k)], [values, indices]
