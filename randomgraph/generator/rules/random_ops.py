"""LSH_PROJECTION, RANDOM_MULTINOMIAL (``random_ops.py``).

Both hash or sample from their inputs, so inputs are exactly reproducible values (fresh,
or exact producers): a one-ulp difference upstream would flip a sign bit or a sample."""

from __future__ import annotations

import math

from randomgraph.generator.core import OpGen
from randomgraph.generator.rules.base import O, T, rule
from randomgraph.generator.values import STABLE, Domain

RULES: dict = {}

_DENSE, _SPARSE_DEPRECATED, _SPARSE = 2, 1, 3


@rule(RULES, O.LSH_PROJECTION)
def lsh_projection(g: OpGen):
    sig = g.signature()
    th, tin, tw = sig.inputs[0], sig.inputs[1], sig.inputs[2]
    kind = g.src.choice((_DENSE, _SPARSE_DEPRECATED) + ((_SPARSE,) if g.version >= 12 else ()))
    functions = g.src.integer(1, 4)
    bits = g.src.integer(1, 8 if kind != _SPARSE else 32 - math.ceil(math.log2(max(functions, 1))))
    bits = min(bits, 12)
    hash_t = g.fresh(th, (functions, bits), domain=Domain(-1.0, 1.0))
    domain = STABLE if tin != T.TENSOR_INT32 else Domain(-50, 50, stable=True)
    x = g.data(tin, ranks=(1, 3), primary=True, domain=domain)
    if g.src.boolean(0.3):
        weight = g.omitted(tw)
    else:
        weight = g.fresh(tw, (x.dims[0],), domain=Domain(0.25, 2.0))
    ins = [hash_t, x, weight, g.scalar(T.INT32, kind)]
    return ins, [g.output(T.TENSOR_INT32, chainable=False, exact=True)]


@rule(RULES, O.RANDOM_MULTINOMIAL)
def random_multinomial(g: OpGen):
    t = g.signature().inputs[0]
    logits = g.data(t, rank=2, primary=True, domain=STABLE)
    samples = g.src.integer(1, 8)
    seeds = g.fresh(T.TENSOR_INT32, (2,), domain=Domain(0, 1 << 20))
    ins = [logits, g.scalar(T.INT32, samples), seeds]
    hi = logits.dims[1]
    return ins, [g.output(T.TENSOR_INT32, lo=0, hi=hi, chainable=False, exact=True)]
