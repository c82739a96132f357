"""EMBEDDING_LOOKUP, HASHTABLE_LOOKUP (``lookup.py``).

Lookup indices are fresh (never computed), so they stay in range; hashtable keys are a
sorted constant and the lookups hit some of them and miss others."""

from __future__ import annotations

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, is_quant, rule
from randomgraph.generator.values import Domain

RULES: dict = {}

I32 = T.TENSOR_INT32


@rule(RULES, O.EMBEDDING_LOOKUP)
def embedding_lookup(g: OpGen):
    t = g.signature().inputs[1]
    values = g.data(t, ranks=(2, 4), primary=True)
    n = g.src.integer(1, 8)
    lookups = g.fresh(I32, (n,), domain=Domain(0, values.dims[0] - 1))
    quant = (values.scale, values.zero_point) if is_quant(t) else None
    out = g.output(t, quant=quant, lo=values.lo, hi=values.hi, exact=values.exact)
    return [lookups, values], [out]


@rule(RULES, O.HASHTABLE_LOOKUP)
def hashtable_lookup(g: OpGen):
    sig = g.signature()
    t = sig.inputs[2]
    values = g.data(t, ranks=(1, 4), primary=True)
    n_keys = values.dims[0]
    keys = sorted({g.src.integer(-20, 20) for _ in range(n_keys * 3)})[:n_keys]
    while len(keys) < n_keys:
        keys.append(keys[-1] + 1 if keys else 0)
    n = g.src.integer(1, 8)
    pool = keys + [g.src.integer(-25, 25) for _ in range(2)]
    wanted = [g.src.choice(pool) for _ in range(n)]
    quant = (values.scale, values.zero_point) if is_quant(t) else None
    out = g.output(t, quant=quant, lo=min(values.lo, 0.0), hi=max(values.hi, 0.0))
    hits = g.output(T.TENSOR_QUANT8_ASYMM, quant=(1.0, 0), lo=0, hi=1, exact=True)
    ins = [g.fresh(I32, (n,), values=wanted), g.const(I32, (n_keys,), keys), values]
    return ins, [out, hits]
