"""NNAPI's quantized arithmetic, vectorized: the exact integer recipes of Android's
reference CPU kernels (tflite's fixed-point helpers), plus fused-activation ranges.

Every function works on numpy arrays (int64 internally, so intermediate products never
wrap) and gives bit-identical results to the C++ it mirrors.
"""

from __future__ import annotations

import math

import numpy as np

from driver.hal.types import QUANT_RANGE, FusedActivation, OperandType

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


# ---------------------------------------------------------------------------------------
# Multipliers (QuantUtils.cpp)
# ---------------------------------------------------------------------------------------


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """``QuantizeMultiplier``: (quantized_multiplier Q31, shift), shift > 0 means left."""
    if real_multiplier == 0.0:
        return 0, 0
    q, shift = math.frexp(real_multiplier)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return int(q_fixed), int(shift)


def quantize_multiplier_smaller_than_one(real_multiplier: float) -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOne`` (legacy kernels): (multiplier, right_shift)."""
    if real_multiplier == 0.0:
        return 0, 0
    q, shift = math.frexp(real_multiplier)
    right_shift = -shift
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        right_shift -= 1
    return int(q_fixed), int(right_shift)


def quantize_multiplier_greater_than_one(real_multiplier: float) -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: (multiplier, left_shift)."""
    q, shift = math.frexp(real_multiplier)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    return int(q_fixed), int(shift)


def _round_half_away(x: float) -> int:
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


# ---------------------------------------------------------------------------------------
# Fixed-point primitives (gemmlowp)
# ---------------------------------------------------------------------------------------


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values (held as int64)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    t = ab + nudge
    # C++ integer division truncates toward zero.
    high = np.where(t >= 0, t >> 31, -((-t) >> 31))
    overflow = (a == b) & (a == INT32_MIN)
    return np.where(overflow, INT32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: x / 2**exponent rounded half away from zero."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, quantized_multiplier, shift) -> np.ndarray:
    """tflite ``MultiplyByQuantizedMultiplier`` (shift > 0 is a left shift).
    ``quantized_multiplier``/``shift`` may be arrays (per-channel)."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x = np.asarray(x, dtype=np.int64) * (np.int64(1) << left)
    x = _wrap_int32(x)
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, quantized_multiplier), right
    )


def multiply_by_quantized_multiplier_smaller_than_one(x, quantized_multiplier, right_shift):
    """Legacy ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` with a right shift."""
    return rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, quantized_multiplier), right_shift
    )


def multiply_by_quantized_multiplier_greater_than_one(x, quantized_multiplier, left_shift):
    x = _wrap_int32(np.asarray(x, dtype=np.int64) * (np.int64(1) << np.int64(left_shift)))
    return saturating_rounding_doubling_high_mul(x, quantized_multiplier)


def _wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to int32, as the C++ int32 arithmetic does."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


# ---------------------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------------------


def round_half_away(x: np.ndarray) -> np.ndarray:
    """``std::round`` on floats: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quant_range(type_code: int) -> tuple[int, int]:
    return QUANT_RANGE[OperandType(type_code)]


def dequantize(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Real values (float32) of quantized integers."""
    return ((values.astype(np.int32) - np.int32(zero_point)) * np.float32(scale)).astype(np.float32)


def quantize(real: np.ndarray, scale: float, zero_point: int, type_code: int) -> np.ndarray:
    """Quantize reals with ``std::round`` and saturation, into the type's storage dtype."""
    lo, hi = quant_range(type_code)
    q = round_half_away(np.asarray(real, dtype=np.float32) / np.float32(scale)) + zero_point
    from driver.operations.base import storage_dtype

    return np.clip(q, lo, hi).astype(storage_dtype(type_code))


# ---------------------------------------------------------------------------------------
# Fused activations
# ---------------------------------------------------------------------------------------


def activation_range_float(activation: int) -> tuple[float, float]:
    if activation == FusedActivation.RELU:
        return 0.0, math.inf
    if activation == FusedActivation.RELU1:
        return -1.0, 1.0
    if activation == FusedActivation.RELU6:
        return 0.0, 6.0
    return -math.inf, math.inf


def apply_activation_float(x: np.ndarray, activation: int) -> np.ndarray:
    """Clamp float results per the fused activation (NONE leaves them untouched)."""
    if activation == FusedActivation.NONE:
        return x
    lo, hi = activation_range_float(activation)
    return np.clip(x, lo, hi).astype(x.dtype, copy=False)


def activation_range_quantized(
    activation: int, scale: float, zero_point: int, type_code: int
) -> tuple[int, int]:
    """``CalculateActivationRangeUint8``/``Int8``: the clamp range in the quantized domain."""
    qmin, qmax = quant_range(type_code)

    def q(f: float) -> int:
        # float arithmetic, as the C++ (float f / float scale).
        return zero_point + _round_half_away(float(np.float32(f) / np.float32(scale)))

    if activation == FusedActivation.RELU:
        return max(qmin, q(0.0)), qmax
    if activation == FusedActivation.RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == FusedActivation.RELU1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax
