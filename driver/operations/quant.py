"""NNAPI's quantized arithmetic, vectorized: the exact integer recipes of Android's
reference CPU kernels (tflite's fixed-point helpers), plus fused-activation ranges.

Every function works on numpy arrays (int64 internally, so intermediate products never
wrap) and gives bit-identical results to the C++ it mirrors.
"""

from __future__ import annotations

import math

import numpy as np

from driver.hal.types import QUANT_RANGE, ErrorStatus, FusedActivation, HalError, OperandType

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


# ---------------------------------------------------------------------------------------
# Multipliers (QuantUtils.cpp)
# ---------------------------------------------------------------------------------------


def _check_finite(real_multiplier: float) -> None:
    """Extreme (valid) scales can make a multiplier's float32 arithmetic overflow. Android's
    helpers then fail their range check (``static_cast<int64_t>(inf)`` saturates on the ARM
    devices it runs on) and the operation fails: GENERAL_FAILURE at execution. The executor
    adds the operation to the message."""
    if not math.isfinite(real_multiplier):
        raise HalError(
            ErrorStatus.GENERAL_FAILURE,
            f"the requantization multiplier is {real_multiplier}: the operands' scales "
            "overflow float32 arithmetic (Android's QuantizeMultiplier fails)",
        )


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """``QuantizeMultiplier``: (quantized_multiplier Q31, shift), shift > 0 means left."""
    if real_multiplier == 0.0:
        return 0, 0
    _check_finite(real_multiplier)
    q, shift = math.frexp(real_multiplier)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return int(q_fixed), int(shift)


def quantize_multiplier_greater_than_one(real_multiplier: float) -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: (multiplier, left_shift)."""
    _check_finite(real_multiplier)
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
#
# Branch-free forms of gemmlowp's definitions. The identities they rest on (checked
# against a scalar transcription of the C++ in tests/operations/test_quant_primitives.py):
#
# * SaturatingRoundingDoublingHighMul: ``(ab + nudge) / 2**31`` with C++ truncation and
#   ``nudge = ab >= 0 ? 2**30 : 1 - 2**30`` equals ``floor((ab + 2**30) / 2**31)`` for every
#   integer ab: for ab < 0, trunc((ab + 1 - 2**30) / 2**31) = -floor((2**30 - 1 - ab) /
#   2**31) = floor((ab + 2**30) / 2**31). So it is one add and one arithmetic shift.
# * RoundingDivideByPOT(x, e), e >= 1: ``(x + 2**(e-1) - (x < 0)) >> e`` (halves away from
#   zero); e == 0 is the identity.
# * Both at once (MultiplyByQuantizedMultiplier with a right shift r >= 1): nested floors
#   fold into one, ``(ab + 2**30 + 2**(30+r) - (ab < 0) * 2**31) >> (31 + r)``. The sign
#   test may use ab instead of the high half h because the two differ only where h == 0,
#   and there both roundings give 0.
# ---------------------------------------------------------------------------------------


def _int64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _int32_wrapped(x) -> np.ndarray:
    """``x`` as int32 with two's-complement wrap (the C++ int32 arithmetic)."""
    x = np.asarray(x)
    if x.dtype == np.int32:
        return x
    return np.asarray(x, dtype=np.int64).astype(np.int32)


def _may_equal(v: np.ndarray, value: int) -> bool:
    """Whether ``v`` holds ``value`` (exact for scalars; a pass over arrays)."""
    return bool(np.any(v == value))


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values (held as int64):
    ``(a*b + nudge) / 2**31`` truncated, INT32_MAX for INT32_MIN * INT32_MIN."""
    a = _int64(a)
    b = _int64(b)
    ab = np.asarray(a * b)
    # The one overflow, a == b == INT32_MIN, is the only int32 pair whose product is 2**62
    # (a scalar operand other than INT32_MIN rules it out).
    overflow = None
    if not (a.ndim == 0 and a != INT32_MIN) and not (b.ndim == 0 and b != INT32_MIN):
        overflow = ab == (1 << 62)
        if not overflow.any():
            overflow = None
    ab += 1 << 30  # in place: a second large temporary would cost page faults
    ab >>= 31
    if overflow is not None:
        ab = np.where(overflow & (a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, ab)
    return ab


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: x / 2**exponent rounded half away from zero
    (0 <= exponent <= 62; scalar or broadcastable array)."""
    x = _int64(x)
    exponent = _int64(exponent)
    if exponent.ndim == 0:
        e = int(exponent)
        if e == 0:
            return x.copy()
        if 1 <= e <= 62:
            t = np.asarray((x >> 63) + x)  # x - 1 for negative x
            t += 1 << (e - 1)
            t >>= e
            return t
    elif bool(np.all((exponent >= 0) & (exponent <= 62))):
        # Per-element exponents: the +1 (for x >= 0) only where e >= 1, i.e. mask odd.
        mask = (np.int64(1) << exponent) - 1
        t = np.asarray(((x >> 63) + 1) & mask)
        t += mask >> 1
        t += x
        t >>= exponent
        return t
    # Out-of-range exponents: gemmlowp's formula as written (numpy's shift semantics).
    mask = (np.int64(1) << exponent) - 1
    return (x >> exponent) + ((x & mask) > (mask >> 1) + (x < 0))


def _multiply_fused(x32: np.ndarray, m: np.ndarray, right: np.ndarray, offset: int = 0):
    """``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x32, m), right) + offset``
    as int64, in one multiply, three adds and two shifts (see the identities above).
    Requires int32 ``x32``, no INT32_MIN in ``m``, 0 <= right <= 31 and
    ``|offset| << (31 + right) <= 2**60`` (so that nothing overflows int64)."""
    ab = np.asarray(np.multiply(x32, m, dtype=np.int64))
    shape = np.broadcast_shapes(ab.shape, right.shape)
    if ab.shape != shape:
        ab = np.broadcast_to(ab, shape).copy()
    if right.ndim == 0:
        r = int(right)
        if r == 0:
            ab += (1 << 30) + (offset << 31)
            ab >>= 31
            return ab
        sign = ab >> 63
        sign <<= 31  # -2**31 where ab < 0
        ab += sign
        ab += (1 << 30) + (1 << (30 + r)) + (offset << (31 + r))
        ab >>= 31 + r
        return ab
    has_right = right >= 1
    constant = (1 << 30) + np.where(has_right, np.int64(1) << (30 + right), 0)
    constant += np.int64(offset) << (31 + right)
    sign = ab >> 63
    sign &= np.where(has_right, -(1 << 31), 0)
    ab += sign
    ab += constant
    ab >>= 31 + right
    return ab


def _left_wrapped(x, left: np.ndarray) -> np.ndarray:
    """``x * (1 << left)`` wrapped to int32, as the C++ int32 product."""
    if left.ndim == 0 and int(left) == 0:
        return _int32_wrapped(x)
    return (_int64(x) << left).astype(np.int32)


def multiply_by_quantized_multiplier(x, quantized_multiplier, shift) -> np.ndarray:
    """tflite ``MultiplyByQuantizedMultiplier`` (shift > 0 is a left shift), as int64.
    ``quantized_multiplier``/``shift`` may be arrays (per-channel), broadcast against x."""
    m = _int64(quantized_multiplier)
    shift = _int64(shift)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x32 = _left_wrapped(x, left)
    if _may_equal(m, INT32_MIN) or _may_equal(right > 31, True):
        return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x32, m), right)
    return _multiply_fused(x32, m, right)


def requantize_int32(
    acc, quantized_multiplier, shift, zero_point: int, lo: int, hi: int, dtype
) -> np.ndarray:
    """The quantized kernels' output stage for int32 accumulators ``acc``:
    ``clamp(MultiplyByQuantizedMultiplier(acc, m, shift) + zero_point, lo, hi)`` as
    ``dtype``. Per-channel ``m``/``shift`` broadcast against acc's last axis."""
    m = _int64(quantized_multiplier)
    shift = _int64(shift)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    x32 = _left_wrapped(acc, left)
    zero_point = int(zero_point)
    if _may_equal(m, INT32_MIN) or _may_equal(right > 31, True):
        out = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x32, m), right)
        out = np.asarray(out + zero_point)
    elif abs(zero_point) << (31 + int(np.max(right))) <= 1 << 60:
        out = _multiply_fused(x32, m, right, zero_point)  # zero point folded into the shift
    else:
        out = _multiply_fused(x32, m, right)
        out += zero_point
    np.clip(out, lo, hi, out=out)
    return out.astype(dtype)


def multiply_by_quantized_multiplier_smaller_than_one(x, quantized_multiplier, right_shift):
    """Legacy ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` with a right shift."""
    x = np.asarray(x)
    m = _int64(quantized_multiplier)
    right = _int64(right_shift)
    in_range = x.dtype == np.int32 or (
        x.size > 0 and int(x.min()) >= INT32_MIN and int(x.max()) <= INT32_MAX
    )
    if in_range and not _may_equal(m, INT32_MIN) and bool(np.all((right >= 0) & (right <= 31))):
        return _multiply_fused(x.astype(np.int32, copy=False), m, right)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, m), right)


def multiply_by_quantized_multiplier_greater_than_one(x, quantized_multiplier, left_shift):
    x = _left_wrapped(x, _int64(left_shift))
    return saturating_rounding_doubling_high_mul(x, quantized_multiplier)


def _wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap to int32 (as int64), as the C++ int32 arithmetic does."""
    return np.asarray(x, dtype=np.int64).astype(np.int32).astype(np.int64)


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
        # float arithmetic, as the C++ (float f / float scale); a quotient beyond int32 (inf
        # for a tiny scale) saturates, as static_cast<int32_t> does on ARM. (Adding the
        # zero point to INT32_MAX then overflows in the C++; here it stays exact, so the
        # clamp is the type's whole range.)
        with np.errstate(over="ignore"):
            real = float(np.float32(f) / np.float32(scale))
        return zero_point + _round_half_away(min(max(real, -(2.0**31)), 2.0**31))

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
    if exponent > 31:
        threshold = (1 << (31 - exponent)) - 1
        return np.where(
            x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent)
        )
    # Clamping to +-2**(31-e) first saturates exactly: those shift to +-2**31, and the
    # one out-of-range result, +2**31, becomes INT32_MAX.
    limit = 1 << (31 - exponent)
    y = np.clip(x, -limit, limit)
    y <<= exponent
    return np.minimum(y, INT32_MAX, out=y)


def fixed_rescale(x, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>`` of a FixedPoint<int32, src> raw."""
    return saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)


def rounding_half_sum(a, b) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum`` for int32: (a + b + sign) / 2, truncated, which is
    ``(s + 1) >> 1`` for s = a + b >= 0 and ``s >> 1`` for s < 0."""
    s = np.asarray(np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64))
    t = np.asarray((s >> 63) + s)
    t += 1
    t >>= 1
    return t


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
