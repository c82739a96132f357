"""LSH_PROJECTION, RANDOM_MULTINOMIAL (``random_ops.py``).

Both hash or sample from their inputs, so inputs are exactly reproducible values (fresh,
or exact producers): a one-ulp difference upstream would flip a sign bit or a sample."""

from __future__ import annotations

import math

from randomgraph.generator.core import OpGen, Tensor
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
    # DENSE always has its weight: Android's LSHProjection::Prepare checks
    # NN_CHECK_EQ(NumInputsWithValues, 4) for DENSE (only SPARSE may omit it), though the
    # doc calls the weight optional. The choice is still drawn, keeping the stream.
    if g.src.boolean(0.3) and kind != _DENSE:
        weight = g.omitted(tw)
    else:
        weight = g.fresh(tw, (x.dims[0],), domain=Domain(0.25, 2.0))
    ins = [hash_t, x, weight, g.scalar(T.INT32, kind)]
    return ins, [g.output(T.TENSOR_INT32, chainable=False, exact=True)]


MULTINOMIAL_ROWS = 4
"""Most batch rows of a RANDOM_MULTINOMIAL: the samples of each row fill the rest of the
element budget, since its output is compared as class frequencies
(:func:`randomgraph.criteria.sampling_tolerance` shrinks with the samples per row)."""


@rule(RULES, O.RANDOM_MULTINOMIAL)
def random_multinomial(g: OpGen):
    t = g.signature().inputs[0]
    logits = g.data(
        t, rank=2, primary=True, domain=STABLE, accept=_few_rows, make=_multinomial_dims(g)
    )
    samples = max(1, g.max_elements // logits.dims[0])
    seeds = g.fresh(T.TENSOR_INT32, (2,), domain=Domain(0, 1 << 20))
    ins = [logits, g.scalar(T.INT32, samples), seeds]
    hi = logits.dims[1]
    # Not exact: a correct driver may draw other samples (see SAMPLING_OPERATIONS).
    return ins, [g.output(T.TENSOR_INT32, lo=0, hi=hi, chainable=False)]


def _few_rows(t: Tensor) -> bool:
    return t.dims[0] <= MULTINOMIAL_ROWS


def _multinomial_dims(g: OpGen):
    def make() -> tuple[int, int]:
        return g.src.integer(1, MULTINOMIAL_ROWS), g.src.integer(1, min(32, g.config.max_dim))

    return make
