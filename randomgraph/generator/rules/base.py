"""Helpers shared by the rule modules.

A rule is a function ``rule(g: OpGen) -> (inputs, outputs)``: it picks a signature from
the operation's declaration (``g.signature()``), makes each input position with the
:class:`~randomgraph.generator.core.OpGen` makers (``g.data``, ``g.const``,
``g.scalar``, ``g.omitted``) and describes each output with ``g.output`` (dims are
inferred by the declaration when not given; value bounds and exactness are the rule's
to say). Each family module keeps a ``RULES`` table filled with :func:`rule`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from driver.hal.types import QUANT_RANGE, OperandType, OperationType
from driver.hal.types import OperationType as O
from randomgraph.generator.core import OpGen, Reject, Rule, Tensor
from randomgraph.generator.values import FLOAT_TENSORS, QUANT_TENSORS

T = OperandType
INF = math.inf

QUANT8_ASYMM = frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED})


def rule(table: dict[int, Rule], *ops: int) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of ``ops`` in ``table``."""

    def register(fn: Rule) -> Rule:
        for op in ops:
            if op in table:
                raise RuntimeError(f"two rules for {OperationType(op).name}")
            table[op] = fn
        return fn

    return register


def is_float(t: int) -> bool:
    return t in FLOAT_TENSORS


def is_quant(t: int) -> bool:
    return t in QUANT_TENSORS


def scalar_of(tensor_type: int) -> int:
    """The scalar type float parameters take next to a tensor of ``tensor_type``."""
    return T.FLOAT16 if tensor_type == T.TENSOR_FLOAT16 else T.FLOAT32


def broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """NNAPI (numpy) broadcasting of two shapes, or None."""
    out = []
    for k in range(1, max(len(a), len(b)) + 1):
        x = a[-k] if k <= len(a) else 1
        y = b[-k] if k <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def partner_dims(g: OpGen, dims: Sequence[int]) -> tuple[int, ...]:
    """Dims that broadcast against ``dims`` without growing it: the same shape, or a
    suffix of it with some dims set to 1."""
    rank = len(dims)
    if g.src.boolean(0.6):
        return tuple(dims)
    r = g.src.integer(1, rank) if rank else 0
    suffix = list(dims[rank - r :])
    for k in range(len(suffix)):
        if g.src.boolean(0.3):
            suffix[k] = 1
    return tuple(suffix)


def broadcasts_into(dims: Sequence[int]) -> Callable[[Tensor], bool]:
    target = tuple(dims)
    return lambda t: broadcast(target, t.dims) == target


def mul_bounds(alo: float, ahi: float, blo: float, bhi: float) -> tuple[float, float]:
    with np.errstate(all="ignore"):
        c = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
    c = [0.0 if math.isnan(x) else x for x in c]
    return min(c), max(c)


def same_quant(t: Tensor) -> tuple[float, int]:
    return (t.scale, t.zero_point)


def output_quant_like(g: OpGen, t: Tensor) -> tuple[float, int]:
    """Quantization for an output whose values are like ``t``'s: often the same
    parameters (so the result chains onward cleanly), otherwise random."""
    if t.type in QUANT_TENSORS and g.src.boolean(0.5):
        return (t.scale, t.zero_point)
    return g.qparams(t.type)


def scaled_quant(g: OpGen, type_code: int, scale: float) -> tuple[float, int]:
    """Quantization of ``type_code`` with ``scale`` and a random zero point."""
    if type_code not in QUANT_TENSORS:
        return (0.0, 0)
    _, zp = g.qparams(type_code)
    return (scale, zp)


def axis_value(g: OpGen, rank: int, *, negative: bool = True) -> int:
    """An axis in [0, rank) or, sometimes, its negative form."""
    a = g.src.integer(0, rank - 1)
    if negative and g.src.boolean(0.3):
        a -= rank
    return a


def require(condition: bool, why: str = "") -> None:
    if not condition:
        raise Reject(why)


def quant_range(type_code: int) -> tuple[int, int]:
    return QUANT_RANGE[T(type_code)]


def magnitude(t: Tensor) -> float:
    return max(abs(t.lo), abs(t.hi))


__all__ = [
    "INF",
    "QUANT8_ASYMM",
    "O",
    "T",
    "axis_value",
    "broadcast",
    "broadcasts_into",
    "is_float",
    "is_quant",
    "magnitude",
    "mul_bounds",
    "output_quant_like",
    "partner_dims",
    "quant_range",
    "require",
    "rule",
    "same_quant",
    "scalar_of",
    "scaled_quant",
]
