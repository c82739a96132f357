"""Accuracy criteria: when is an actual output close enough to the expected one?

Two families, both from Android (see nnapi-facts.md, "Precision criteria"):

* **Generated tests** (spec files, CTS/VTS): elementwise ``|a - e| <= atol + rtol*|e|``.
  float32: atol 1e-5, rtol 5·2⁻²³; when the model is relaxed or has any float16 operand,
  float32 and float16 use atol = rtol = 5·2⁻¹⁰; integer and quantized types atol 1 (3 for
  mobilenet-quantized tests); bools exact.
* **Random graphs**: per data type a bias / MSE / atol / rtol set (strict, medium, relaxed,
  conv, small graph, large graph). Float differences are divided by ``max(1, |e|)``; bias
  and MSE are checked only with at least 10 elements; bools may mismatch in ≤ 10 % of
  elements. Unlike Android's checker, float16 elements are really compared.

Sampling operations (:data:`SAMPLING_OPERATIONS`) specify no generator, so their outputs
are compared as class frequencies (:func:`check_multinomial`), never value by value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from driver.hal.types import OperandType, OperationType

T = OperandType

SAMPLING_OPERATIONS = frozenset({OperationType.RANDOM_MULTINOMIAL})
"""Operations whose outputs are random samples. NNAPI names no generator ("draws samples
from a multinomial distribution"; Android's CTS checks only the class frequencies), so a
correct driver need not reproduce the reference's Philox stream: random graphs compare
these outputs with :func:`check_multinomial` at :func:`sampling_tolerance`."""

FLOAT_TYPES = {T.TENSOR_FLOAT32, T.FLOAT32, T.TENSOR_FLOAT16, T.FLOAT16}
BOOL_TYPES = {T.TENSOR_BOOL8, T.BOOL}
FP16_TOLERANCE = 5.0 * 0.0009765625


@dataclass(frozen=True)
class Mismatch:
    """Why an output failed: counts and the first few differing elements."""

    output: int
    count: int
    total: int
    first: list[tuple[int, float, float]]  # (flat index, actual, expected)
    rule: str

    def __str__(self) -> str:
        if self.count < 0:  # not about elements (a shape): the rule says it all
            return f"output {self.output}: {self.rule}"
        shown = ", ".join(f"[{i}] got {a!r} expected {e!r}" for i, a, e in self.first)
        return f"output {self.output}: {self.count}/{self.total} elements differ ({self.rule}); {shown}"


def _first(bad: np.ndarray, actual: np.ndarray, expected: np.ndarray, n: int = 5):
    idx = np.flatnonzero(bad)[:n]
    return [(int(i), actual.flat[i].item(), expected.flat[i].item()) for i in idx]


# ---------------------------------------------------------------------------------------
# Generated-test criteria
# ---------------------------------------------------------------------------------------


def generated_tolerance(type_code: int, *, fp16_model: bool, mobilenet_quantized: bool = False):
    """(atol, rtol) of the generated-test criteria for one output type."""
    if type_code in FLOAT_TYPES:
        if fp16_model or type_code in (T.TENSOR_FLOAT16, T.FLOAT16):
            return FP16_TOLERANCE, FP16_TOLERANCE
        return 1e-5, 5.0 * 1.1920928955078125e-7
    if type_code in BOOL_TYPES:
        return 0.0, 0.0
    return (3.0 if mobilenet_quantized else 1.0), 0.0


def non_finite_agree(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where both are NaN or both the same infinity (no tolerance makes inf - inf, a
    NaN, small)."""
    return (np.isnan(actual) & np.isnan(expected)) | (np.isinf(actual) & (actual == expected))


def check_generated(
    output: int,
    type_code: int,
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    fp16_model: bool,
    mobilenet_quantized: bool = False,
) -> Mismatch | None:
    """None if ``actual`` passes the generated-test criteria against ``expected``
    (non-finite values must agree exactly: both NaN, or the same infinity)."""
    if tuple(actual.shape) != tuple(expected.shape) and actual.size != expected.size:
        return Mismatch(
            output, -1, expected.size, [], f"shape {list(actual.shape)} != {list(expected.shape)}"
        )
    a = np.asarray(actual).reshape(-1)
    e = np.asarray(expected).reshape(-1)
    atol, rtol = generated_tolerance(
        type_code, fp16_model=fp16_model, mobilenet_quantized=mobilenet_quantized
    )
    if type_code in BOOL_TYPES:
        bad = a.astype(bool) != e.astype(bool)
        rule = "bool exact"
    else:
        af = a.astype(np.float64)
        ef = e.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(af - ef) <= atol + rtol * np.abs(ef))
        # An infinite expectation makes the relative tolerance infinite: anything would
        # pass (as in Android's EXPECT_NEAR). Non-finite values must agree exactly.
        bad |= ~np.isfinite(ef)
        bad &= ~non_finite_agree(af, ef)
        rule = f"atol {atol:g}, rtol {rtol:g}"
    if not bad.any():
        return None
    return Mismatch(output, int(bad.sum()), bad.size, _first(bad, a, e), rule)


def sampling_tolerance(samples: int) -> float:
    """Class-frequency tolerance for comparing two independent draws of ``samples`` per
    row: seven standard deviations of the difference of two frequencies (at most
    ``sqrt(0.5 / samples)``), so a correct driver fails less than once in 10^11 classes."""
    return 7.0 * math.sqrt(0.5 / max(1, samples))


def check_multinomial(
    output: int,
    actual: np.ndarray,
    expected: np.ndarray,
    tolerance: float,
    classes: int | None = None,
) -> Mismatch | None:
    """RANDOM_MULTINOMIAL: per batch row, the class frequencies of the samples must agree
    within ``tolerance`` (Android's expectedMultinomialDistributionTolerance). With
    ``classes`` known, every sample must also be a class index, 0 .. classes - 1, or
    ``classes`` itself (what Android returns for a row without a finite logit)."""
    a = np.asarray(actual).reshape(actual.shape[0], -1) if actual.ndim else actual.reshape(1, -1)
    e = np.asarray(expected).reshape(a.shape)
    if classes is not None:
        outside = (a < 0) | (a > classes)
        if outside.any():
            rule = f"samples must be class indexes 0..{classes - 1} (or {classes}: no finite logit)"
            return Mismatch(output, int(outside.sum()), outside.size, _first(outside, a, e), rule)
    bins = int(max(a.max(initial=0), e.max(initial=0))) + 1
    worst = 0.0
    for row_a, row_e in zip(a, e):
        fa = np.bincount(row_a.astype(np.int64), minlength=bins) / max(1, row_a.size)
        fe = np.bincount(row_e.astype(np.int64), minlength=bins) / max(1, row_e.size)
        worst = max(worst, float(np.abs(fa - fe).max()))
    if worst <= tolerance:
        return None
    return Mismatch(output, 1, 1, [], f"class frequencies differ by {worst:.4f} > {tolerance:.4f}")


# ---------------------------------------------------------------------------------------
# Random-graph criteria
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Criterion:
    bias: float
    mse: float
    atol: float
    rtol: float


@dataclass(frozen=True)
class CriteriaSet:
    name: str
    float32: Criterion
    float16: Criterion
    quant: Criterion  # rtol unused


def _set(name, f32, f16, q):
    return CriteriaSet(name, Criterion(*f32), Criterion(*f16), Criterion(q[0], q[1], q[2], 0.0))


STRICT = _set("strict", (1e-7, 1e-10, 1e-6, 1e-6), (1e-4, 1e-8, 1e-3, 1e-3), (0.1, 0.1, 1))
MEDIUM = _set("medium", (1e-6, 1e-8, 1e-5, 1e-5), (1e-3, 1e-5, 1e-2, 1e-2), (1.2, 1.2, 2))
RELAXED = _set("relaxed", (3e-5, 1e-6, 1e-3, 1e-3), (5e-3, 1e-3, 1, 1), (1.5, 1.5, 10))
CONV = _set("conv", (4e-4, 1e-5, 2e-2, 2e-2), (5e-2, 1e-2, 1, 1), (1.5, 1.5, 10))
SMALL_GRAPH = _set("small_graph", (4e-4, 1e-5, 1e-2, 1e-2), (5e-2, 1e-2, 1, 1), (2, 2, 12))
LARGE_GRAPH = _set("large_graph", (1e-2, 1e-4, 1e-1, 1e-1), (1e-1, 5e-2, 1, 1), (2, 2, 12))
CRITERIA_SETS = {c.name: c for c in (STRICT, MEDIUM, RELAXED, CONV, SMALL_GRAPH, LARGE_GRAPH)}


def check_random_graph(
    output: int, type_code: int, actual: np.ndarray, expected: np.ndarray, criteria: CriteriaSet
) -> Mismatch | None:
    """Android's random-graph accuracy check, with float16 really checked."""
    if actual.size != expected.size:
        return Mismatch(
            output, -1, expected.size, [], f"shape {list(actual.shape)} != {list(expected.shape)}"
        )
    a = np.asarray(actual).reshape(-1)
    e = np.asarray(expected).reshape(-1)
    n = a.size
    if n == 0:
        return None
    if type_code in BOOL_TYPES:
        bad = a.astype(bool) != e.astype(bool)
        if bad.sum() <= 0.1 * n:
            return None
        return Mismatch(output, int(bad.sum()), n, _first(bad, a, e), "bool: more than 10% differ")
    if type_code == T.TENSOR_INT32:
        bad = np.abs(a.astype(np.int64) - e.astype(np.int64)) > 1
        return (
            None
            if not bad.any()
            else Mismatch(output, int(bad.sum()), n, _first(bad, a, e), "int32 atol 1")
        )
    if type_code in FLOAT_TYPES:
        c = criteria.float16 if type_code in (T.TENSOR_FLOAT16, T.FLOAT16) else criteria.float32
        af, ef = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = (af - ef) / np.maximum(1.0, np.abs(ef))
            bad = ~(np.abs(diff) <= c.atol + c.rtol * np.abs(ef))
        if bad.any():
            return Mismatch(
                output, int(bad.sum()), n, _first(bad, a, e), f"atol {c.atol:g}, rtol {c.rtol:g}"
            )
    else:
        c = criteria.quant
        diff = a.astype(np.float64) - e.astype(np.float64)
        bad = np.abs(diff) > c.atol
        if bad.any():
            return Mismatch(output, int(bad.sum()), n, _first(bad, a, e), f"atol {c.atol:g}")
    if n >= 10:
        bias = float(np.mean(diff))
        mse = float(np.mean(diff * diff))
        if abs(bias) > c.bias:
            return Mismatch(output, n, n, [], f"bias {bias:.3g} > {c.bias:g}")
        if mse > c.mse:
            return Mismatch(output, n, n, [], f"mse {mse:.3g} > {c.mse:g}")
    return None


def check_random_graph_output(
    output: int,
    type_code: int,
    actual: np.ndarray,
    expected: np.ndarray,
    criteria: CriteriaSet,
    *,
    relaxed: bool = False,
) -> Mismatch | None:
    """:func:`check_random_graph` for one output of a whole test: non-finite elements
    that agree (both NaN, or the same infinity) count as equal, and in a relaxed model
    float32 outputs are held to the set's float16 criterion (the driver may compute them
    in float16). The differential checker and the spec runner both use this."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.size == e.size and type_code in FLOAT_TYPES and a.size:
        af = a.astype(np.float64).reshape(-1)
        ef = e.astype(np.float64).reshape(-1)
        agree = non_finite_agree(af, ef)
        if agree.any():
            af, ef = af.copy(), ef.copy()
            af[agree] = ef[agree] = 0.0
            a, e = af.reshape(a.shape), ef.reshape(e.shape)
    if relaxed and type_code in (T.TENSOR_FLOAT32, T.FLOAT32):
        criteria = CriteriaSet(criteria.name, criteria.float16, criteria.float16, criteria.quant)
    return check_random_graph(output, type_code, a, e, criteria)
