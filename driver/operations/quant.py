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
    """``std::round`` on floats: halves away from zero. Computed in float64 so that adding
    0.5 is exact for every float32 input (0.49999997 stays 0; odd values >= 2**23 stay)."""
    x = np.asarray(x, dtype=np.float64)
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


_FLT_MAX = float(np.finfo(np.float32).max)


def apply_activation_float(x: np.ndarray, activation: int) -> np.ndarray:
    """Clamp float results per the fused activation. Like tflite's
    ``ActivationFunctionWithMinMax`` with ``CalculateActivationRangeFloat``, float32
    results are also clamped to ±FLT_MAX (so an overflow gives FLT_MAX, not inf) even
    with NONE; NaN passes through."""
    lo, hi = activation_range_float(activation)
    if x.dtype == np.float32:
        lo, hi = max(lo, -_FLT_MAX), min(hi, _FLT_MAX)
    elif activation == FusedActivation.NONE:
        return x
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


# ---------------------------------------------------------------------------------------
# gemmlowp fixed-point transcendental helpers (fixedpoint.h), on raw int32 values held as
# int64 arrays. A raw value r of FixedPoint<int32, k> stands for r / 2**(31 - k).
# ---------------------------------------------------------------------------------------


def count_leading_zeros32(x) -> np.ndarray:
    """``CountLeadingZeros`` of values in [0, 2**32) (32 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    _, exp = np.frexp(x.astype(np.float64))  # exact for integers below 2**53
    return np.where(x == 0, 32, 32 - exp).astype(np.int64)


def saturating_rounding_multiply_by_pot(x, exponent: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<exponent>`` on int32 raws."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def fixed_rescale(x, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>`` of a FixedPoint<int32, src> raw."""
    return saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)


def rounding_half_sum(a, b) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum`` for int32: (a + b + sign) / 2, truncated."""
    s = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """FixedPoint<0> raw in [-1/4, 0) -> exp(a) as a FixedPoint<0> raw (Taylor at -1/8)."""
    srdhm = saturating_rounding_doubling_high_mul
    constant_term = 1895147668  # exp(-1/8)
    constant_1_over_3 = 715827883
    x = _wrap_int32(np.asarray(a, dtype=np.int64) + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    inner = _wrap_int32(srdhm(_wrap_int32(x4_over_4 + x3), constant_1_over_3) + x2)
    x4_over_24_plus = saturating_rounding_multiply_by_pot(inner, -1)
    return _wrap_int32(constant_term + srdhm(constant_term, _wrap_int32(x + x4_over_24_plus)))


_EXP_BARREL = (
    (-2, 1672461947),
    (-1, 1302514674),
    (0, 790015084),
    (1, 290630308),
    (2, 39332535),
    (3, 720401),
    (4, 242),
)


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values``: FixedPoint<int32, integer_bits> raws <= 0 ->
    exp() as FixedPoint<int32, 0> raws."""
    a = np.asarray(a, dtype=np.int64)
    frac = 31 - integer_bits
    one_quarter = 1 << (frac - 2)
    a_mod = (a & (one_quarter - 1)) - one_quarter
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        fixed_rescale(a_mod, integer_bits, 0)
    )
    remainder = a_mod - a
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = np.int64(1) << (frac + exponent)
            result = np.where(
                (remainder & bit) != 0,
                saturating_rounding_doubling_high_mul(result, multiplier),
                result,
            )
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1``: FixedPoint<0> raw a in [0, 1) ->
    1 / (1 + a) as a FixedPoint<0> raw (Newton-Raphson, 3 iterations)."""
    srdhm = saturating_rounding_doubling_high_mul
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = _wrap_int32(1515870810 + srdhm(half_denominator, -1010580540))  # F2: 48/17 - 32/17 d
    for _ in range(3):
        one_minus = _wrap_int32((1 << 29) - srdhm(half_denominator, x))
        x = _wrap_int32(x + fixed_rescale(srdhm(x, one_minus), 4, 2))
    return fixed_rescale(x, 1, 0)  # ExactMulByPot<-1> (F2 -> F1), then Rescale<0>


def inv_sqrt_quantized_multiplier_exp(x, reverse_shift: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """tflite ``GetInvSqrtQuantizedMultiplierExp`` (with its special case for inputs <= 1):
    (multiplier, shift) such that multiplying by them divides by sqrt(x)."""
    srdhm = saturating_rounding_doubling_high_mul
    x = np.asarray(x, dtype=np.int64)
    special = x <= 1
    x = np.where(special, 2**28, x)
    big = x >= (1 << 29)
    shift = np.where(big, 12, 11).astype(np.int64)
    x = np.where(big, x // 4, x)  # int32 inputs need at most one step
    left_pairs = (count_leading_zeros32(x) - 1) // 2 - 1
    shift = shift - left_pairs
    x = x << (2 * left_pairs)
    fx = x >> 1  # F3
    half_input = saturating_rounding_multiply_by_pot(fx, -1)
    half_three = (1 << 28) + (1 << 27)
    r = np.full_like(x, 1 << 28)  # F3 one
    for _ in range(5):
        r3 = fixed_rescale(srdhm(srdhm(r, r), r), 9, 3)
        r = fixed_rescale(_wrap_int32(srdhm(half_three, r) - srdhm(half_input, r3)), 6, 3)
    r = srdhm(r, 1518500250)  # * sqrt(2) / 2
    neg = shift < 0
    r = np.where(neg, _wrap_int32(r << np.where(neg, -shift, 0)), r)
    shift = np.where(neg, 0, shift)
    r = np.where(special, INT32_MAX, r)
    shift = np.where(special, 0, shift)
    return r, shift * reverse_shift
