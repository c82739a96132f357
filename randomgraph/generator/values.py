"""Values: quantization parameters, value domains and the bulk values of fresh tensors.

Every fresh tensor's values come from one 64-bit choice expanded with
:func:`randomgraph.choices.bulk_unit` (explicit arithmetic, identical everywhere).

A :class:`Domain` says what an operation input needs:

* where fresh values are drawn (``lo``..``hi``, in real units; quantized tensors use
  their whole range, as Android's generator does, unless the domain narrows it);
* which producers may feed the input instead (their known value bounds must lie in
  ``accept_lo``..``accept_hi``, exclude zero when ``nonzero``, and be exactly
  reproducible when ``stable``);
* ``grid``: fresh values are multiples of it (plus ``offset``), so comparisons, CAST and
  FLOOR never sit on a rounding boundary and float16 holds them exactly.

Bounds (:attr:`Tensor.lo`/``hi`` in :mod:`core`) are conservative real-valued limits that
rules propagate from inputs to outputs; they keep float16 and relaxed graphs away from
overflow and keep log/sqrt/divisor inputs in range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from driver.hal.types import QUANT_RANGE, OperandType
from driver.operations.base import storage_dtype
from randomgraph.choices import ChoiceSource, bulk_integers, bulk_unit

T = OperandType

FLOAT_TENSORS = frozenset({T.TENSOR_FLOAT32, T.TENSOR_FLOAT16})
QUANT_TENSORS = frozenset(QUANT_RANGE)
INT_TENSORS = frozenset({T.TENSOR_INT32})
BOOL_TENSORS = frozenset({T.TENSOR_BOOL8})

ACCEPT_LIMIT = {T.TENSOR_FLOAT32: 1e6, T.TENSOR_FLOAT16: 1e3, T.TENSOR_INT32: 1e6}
"""Largest producer bound an input accepts by default (float16 leaves room below 65504
for one more operation's growth)."""
OUTPUT_LIMIT = {T.TENSOR_FLOAT32: 1e30, T.TENSOR_FLOAT16: 3e4, T.TENSOR_INT32: 2.0**31 - 1}
"""An operation whose output bound exceeds this is not generated (it could overflow)."""
RELAXED_ACCEPT = 1e3
RELAXED_OUTPUT = 3e4


@dataclass(frozen=True, slots=True)
class Domain:
    lo: float = -2.0
    hi: float = 2.0
    accept_lo: float = -math.inf
    accept_hi: float = math.inf
    nonzero: bool = False
    stable: bool = False
    grid: float | None = None
    offset: float = 0.0
    quant_full: bool = True  # quantized fresh values over the whole range

    def narrowed(self, **kw) -> Domain:
        return replace(self, **kw)


DEFAULT = Domain()
POSITIVE = Domain(0.125, 4.0, accept_lo=0.01, quant_full=False)
NONNEGATIVE = Domain(0.0, 4.0, accept_lo=0.0, quant_full=False)
NONZERO = Domain(0.5, 2.0, nonzero=True, quant_full=False)  # sign drawn separately
SMALL = Domain(-2.0, 2.0, accept_lo=-6.0, accept_hi=6.0)  # EXP and friends
UNIT = Domain(-1.0, 1.0, accept_lo=-1.0, accept_hi=1.0)
STABLE = Domain(-2.0, 2.0, stable=True, grid=0.25)  # comparisons, ARGMAX, TOPK
ROUNDING = Domain(-4.0, 4.0, stable=True, grid=0.5, offset=0.25)  # FLOOR, CAST to int


def quant_params(src: ChoiceSource, type_code: int) -> tuple[float, int]:
    """A random scale and zero point for a quantized type (Android: scale U(0.1, 2),
    zero point uniform over the range; symmetric types have zero point 0)."""
    if type_code not in QUANT_TENSORS:
        return 0.0, 0
    scale = float(np.float32(src.real(0.1, 2.0)))
    if type_code in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT16_ASYMM):
        lo, hi = QUANT_RANGE[T(type_code)]
        if type_code == T.TENSOR_QUANT16_ASYMM:
            zp = src.integer(0, 65535)
        else:
            zp = src.integer(lo, hi)
        return scale, zp
    return scale, 0


def quant_bounds(type_code: int, scale: float, zero_point: int) -> tuple[float, float]:
    lo, hi = QUANT_RANGE[T(type_code)]
    return (lo - zero_point) * scale, (hi - zero_point) * scale


def fresh_values(
    src: ChoiceSource,
    type_code: int,
    dims: tuple[int, ...],
    domain: Domain,
    scale: float = 0.0,
    zero_point: int = 0,
) -> tuple[np.ndarray, float, float]:
    """Values for a new tensor (storage dtype, shaped ``dims``) and their real bounds."""
    n = 1
    for d in dims:
        n *= d
    seed = src.word()
    dt = storage_dtype(type_code)
    if type_code in BOOL_TENSORS or type_code == T.BOOL:
        arr = bulk_integers(seed, n, 0, 1).astype(np.bool_)
        return arr.reshape(dims), 0.0, 1.0
    if type_code in QUANT_TENSORS:
        qlo, qhi = QUANT_RANGE[T(type_code)]
        if type_code == T.TENSOR_QUANT8_SYMM_PER_CHANNEL or type_code == T.TENSOR_QUANT8_SYMM:
            qlo = -127  # symmetric weights avoid -128 (tflite's quantizer never makes it)
        if not domain.quant_full and scale > 0:
            rlo = max(qlo, math.ceil(domain.lo / scale + zero_point))
            rhi = min(qhi, math.floor(domain.hi / scale + zero_point))
            if rlo <= rhi:
                qlo, qhi = rlo, rhi
        arr = bulk_integers(seed, n, qlo, qhi).astype(dt)
        return arr.reshape(dims), (qlo - zero_point) * scale, (qhi - zero_point) * scale
    if type_code in INT_TENSORS or type_code == T.INT32:
        lo, hi = math.ceil(domain.lo), math.floor(domain.hi)
        arr = bulk_integers(seed, n, lo, hi)
        if domain.nonzero:
            # Values in [lo, hi] away from 0, with a sign per element.
            mag = np.maximum(np.abs(arr), 1)
            sign = np.where(bulk_integers(seed ^ 0x5DEECE66D, n, 0, 1) == 1, 1, -1)
            arr = mag * sign
            b = max(abs(lo), abs(hi), 1)
            return arr.astype(dt).reshape(dims), -b, b
        return arr.astype(dt).reshape(dims), lo, hi
    # Floats.
    u = bulk_unit(seed, n)
    lo, hi = domain.lo, domain.hi
    if domain.grid:
        steps = max(0, math.floor((hi - lo - domain.offset) / domain.grid))
        k = np.floor(u * (steps + 1))
        x = lo + domain.offset + k * domain.grid
    else:
        x = lo + (hi - lo) * u
    if domain.nonzero:
        sign = np.where(bulk_integers(seed ^ 0x5DEECE66D, n, 0, 1) == 1, 1.0, -1.0)
        x = x * sign
        b = max(abs(lo), abs(hi))
        arr = x.astype(dt)
        return arr.reshape(dims), -b, b
    arr = x.astype(dt)
    if arr.size:
        a = arr.astype(np.float64)
        return arr.reshape(dims), float(a.min()), float(a.max())
    return arr.reshape(dims), lo, hi


def type_accept_limit(type_code: int, relaxed: bool) -> float:
    if relaxed and type_code == T.TENSOR_FLOAT32:
        return RELAXED_ACCEPT
    return ACCEPT_LIMIT.get(type_code, math.inf)


def type_output_limit(type_code: int, relaxed: bool) -> float:
    if relaxed and type_code == T.TENSOR_FLOAT32:
        return RELAXED_OUTPUT
    return OUTPUT_LIMIT.get(type_code, math.inf)
