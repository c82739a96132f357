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
#   2**31) = floor((ab + 2**30) / 2**31). So it is one add and one arithmetic shift. The
#   int16 form is the same with 2**15 and 2**14.
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


def saturating_rounding_doubling_high_mul(a, b, bits: int = 32) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 (or, with ``bits=16``,
    int16) values held as int64: ``(a*b + nudge) / 2**(bits-1)`` truncated, the type's
    maximum for minimum * minimum."""
    a = _int64(a)
    b = _int64(b)
    lowest = -(1 << (bits - 1))
    ab = np.asarray(a * b)
    # The one overflow, a == b == lowest, is the only pair whose product is 2**(2*bits-2)
    # (a scalar operand other than lowest rules it out).
    overflow = None
    if not (a.ndim == 0 and a != lowest) and not (b.ndim == 0 and b != lowest):
        overflow = ab == (1 << (2 * bits - 2))
        if not overflow.any():
            overflow = None
    ab += 1 << (bits - 2)  # in place: a second large temporary would cost page faults
    ab >>= bits - 1
    if overflow is not None:
        ab = np.where(overflow & (a == lowest) & (b == lowest), -lowest - 1, ab)
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
# gemmlowp fixed point (fixedpoint.h): FixedPoint<int16_t|int32_t, IntegerBits> on raw
# values held in int64 arrays. A raw value r of FixedPoint<intB, k> stands for
# r / 2**(B - 1 - k).
# ---------------------------------------------------------------------------------------


def count_leading_zeros32(x) -> np.ndarray:
    """``CountLeadingZeros`` of values in [0, 2**32) (32 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    _, exp = np.frexp(x.astype(np.float64))  # exact for integers below 2**53
    return np.where(x == 0, 32, 32 - exp).astype(np.int64)


def saturating_rounding_multiply_by_pot(x, exponent: int, bits: int = 32) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<exponent>`` on int32 (or int16) raws.
    An exponent of ``bits - 1`` or more saturates every non-zero value (gemmlowp's
    threshold is 0 at ``bits - 1``; beyond it the C++ shift is undefined)."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    # gemmlowp saturates beyond +-threshold = +-(2**(bits-1-e) - 1). Clamping to
    # +-(threshold + 1) first saturates exactly: those shift to +-2**(bits-1), and the one
    # out-of-range result, +2**(bits-1), becomes the maximum.
    shift = min(exponent, bits - 1)
    limit = 1 << (bits - 1 - shift)
    y = np.asarray(np.clip(x, -limit, limit))
    y <<= shift
    return np.minimum(y, (1 << (bits - 1)) - 1, out=y)


def rounding_half_sum(a, b) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum``: (a + b + sign) / 2 in the wider type, truncated, which
    is ``(s + 1) >> 1`` for s = a + b >= 0 and ``s >> 1`` for s < 0."""
    s = np.asarray(np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64))
    t = np.asarray((s >> 63) + s)
    t += 1
    t >>= 1
    return t


class FixedPoint:
    """gemmlowp's ``FixedPoint<int16_t|int32_t, IntegerBits>`` arithmetic on raw values:
    ``FX16`` for the quantized LSTM cells, ``FX32`` for LOGISTIC, TANH and SOFTMAX.

    A value is a raw integer array (int64); integer bits are passed explicitly where an
    operation depends on them. Raw arithmetic wraps as the C++ raw type does."""

    def __init__(self, bits: int):
        self.bits = bits
        self.min = -(1 << (bits - 1))
        self.max = (1 << (bits - 1)) - 1
        self._raw_dtype = {16: np.int16, 32: np.int32}[bits]

    # --- raw integer helpers ------------------------------------------------------
    def wrap(self, x) -> np.ndarray:
        """The C++ cast back to the raw type (two's complement wrap)."""
        return np.asarray(x, dtype=np.int64).astype(self._raw_dtype).astype(np.int64)

    def add(self, a, b) -> np.ndarray:
        return self.wrap(np.asarray(a, dtype=np.int64) + b)

    def sub(self, a, b) -> np.ndarray:
        return self.wrap(np.asarray(a, dtype=np.int64) - b)

    def neg(self, a) -> np.ndarray:
        return self.wrap(-np.asarray(a, dtype=np.int64))

    def saturating_add(self, a, b) -> np.ndarray:
        return np.clip(np.asarray(a, dtype=np.int64) + b, self.min, self.max)

    def add_saturating_if_16bit(self, a, b) -> np.ndarray:
        return self.saturating_add(a, b) if self.bits == 16 else self.add(a, b)

    def mul(self, a, b) -> np.ndarray:
        """``SaturatingRoundingDoublingHighMul`` (the product of two FixedPoints)."""
        return saturating_rounding_doubling_high_mul(a, b, self.bits)

    def multiply_by_pot(self, x, exponent: int) -> np.ndarray:
        """``SaturatingRoundingMultiplyByPOT<exponent>``."""
        return saturating_rounding_multiply_by_pot(x, exponent, self.bits)

    def rescale(self, x, src_bits: int, dst_bits: int) -> np.ndarray:
        """``Rescale<dst_bits>`` of a value with ``src_bits`` integer bits."""
        return self.multiply_by_pot(x, src_bits - dst_bits)

    def constant(self, int32_raw: int) -> int:
        """``GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT``: an int32 raw value, rescaled to the
        raw type by ``RoundingDivideByPOT(value, 32 - bits)``."""
        return int(rounding_divide_by_pot(np.int64(int32_raw), 32 - self.bits))

    def one(self, integer_bits: int) -> int:
        """``FixedPoint::One()`` (saturated to the maximum with 0 integer bits)."""
        return self.max if integer_bits == 0 else 1 << (self.bits - 1 - integer_bits)

    # --- transcendental functions -------------------------------------------------
    def exp_on_interval_between_negative_one_quarter_and_0_excl(self, a) -> np.ndarray:
        """F0 raws in [-1/4, 0) -> exp() as F0 raws (Taylor expansion at -1/8)."""
        constant_term = self.constant(1895147668)  # exp(-1/8)
        constant_1_over_3 = self.constant(715827883)
        x = self.add(a, 1 << (self.bits - 4))  # + 1/8 (ConstantPOT<-3> of F0)
        x2 = self.mul(x, x)
        x3 = self.mul(x2, x)
        x4 = self.mul(x2, x2)
        x4_over_4 = self.multiply_by_pot(x4, -2)
        poly = self.multiply_by_pot(
            self.add(self.mul(self.add(x4_over_4, x3), constant_1_over_3), x2), -1
        )
        return self.add_saturating_if_16bit(
            constant_term, self.mul(constant_term, self.add(x, poly))
        )

    # exp(-2**exponent) as Q0.31 raws: the barrel shifter's factors.
    _EXP_BARREL = (
        (-2, 1672461947),
        (-1, 1302514674),
        (0, 790015084),
        (1, 290630308),
        (2, 39332535),
        (3, 720401),
        (4, 242),
    )

    def exp_on_negative_values(self, a, integer_bits: int) -> np.ndarray:
        """Raws <= 0 with ``integer_bits`` integer bits -> exp() as F0 raws."""
        frac = self.bits - 1 - integer_bits
        a = np.asarray(a, dtype=np.int64)
        one_quarter = 1 << (frac - 2)
        # Neither subtraction can wrap for min <= a <= 0: the first is in [-1/4, 0), the
        # second in [0, max]. (SOFTMAX runs this on every element: the wraps would cost.)
        a_mod_quarter_minus_one_quarter = (a & (one_quarter - 1)) - one_quarter
        result = self.exp_on_interval_between_negative_one_quarter_and_0_excl(
            self.rescale(a_mod_quarter_minus_one_quarter, integer_bits, 0)
        )
        remainder = a_mod_quarter_minus_one_quarter - a
        for exponent, multiplier in self._EXP_BARREL:
            if integer_bits > exponent:
                bit = np.int64(1) << (frac + exponent)
                result = np.where(
                    (remainder & bit) != 0, self.mul(result, self.constant(multiplier)), result
                )
        if integer_bits > 5:
            clamp = self.constant(-(1 << (36 - integer_bits)))
            result = np.where(a < clamp, 0, result)
        return np.where(a == 0, self.one(0), result)

    def _newton_reciprocal(self, a) -> np.ndarray:
        """1 / (1 + a) for F0 raws a in [0, 1), as F2 raws: three Newton-Raphson steps
        from 48/17 - 32/17 d on the half denominator d. The two divisions share it."""
        half_denominator = rounding_half_sum(a, self.one(0))
        c48_17 = self.constant(1515870810)
        cneg32_17 = self.constant(-1010580540)
        x = self.add(c48_17, self.mul(half_denominator, cneg32_17))
        one_f2 = self.one(2)
        for _ in range(3):
            half_denominator_times_x = self.mul(half_denominator, x)
            one_minus = self.sub(one_f2, half_denominator_times_x)
            x = self.add(x, self.rescale(self.mul(x, one_minus), 4, 2))
        return x

    def one_over_one_plus_x_for_x_in_0_1(self, a) -> np.ndarray:
        # Rescale<0>(ExactMulByPot<-1>(x)): the raw value reinterpreted with 1 integer bit.
        return self.rescale(self._newton_reciprocal(a), 1, 0)

    def one_minus_x_over_one_plus_x_for_x_in_0_1(self, a) -> np.ndarray:
        return self.rescale(self.sub(self._newton_reciprocal(a), self.one(2)), 2, 0)

    def logistic(self, a, integer_bits: int) -> np.ndarray:
        """Raws with ``integer_bits`` integer bits -> logistic() as F0 raws."""
        a = np.asarray(a, dtype=np.int64)
        positive = a > 0
        abs_input = np.where(positive, a, self.neg(a))
        result_if_positive = self.one_over_one_plus_x_for_x_in_0_1(
            self.exp_on_negative_values(self.neg(abs_input), integer_bits)
        )
        result_if_negative = self.sub(self.one(0), result_if_positive)
        one_half = self.constant(1 << 30)
        return np.where(
            a == 0, one_half, np.where(positive, result_if_positive, result_if_negative)
        )

    def tanh(self, a, integer_bits: int) -> np.ndarray:
        """Raws with ``integer_bits`` integer bits -> tanh() as F0 raws."""
        a = np.asarray(a, dtype=np.int64)
        negative = a < 0
        n = np.where(negative, a, self.neg(a))
        # neg_tanh_on_negative_values: exp of ExactMulByPot<1>(n) (one more integer bit).
        t = self.one_minus_x_over_one_plus_x_for_x_in_0_1(
            self.exp_on_negative_values(n, integer_bits + 1)
        )
        return np.where(a == 0, 0, np.where(negative, self.neg(t), t))


FX16 = FixedPoint(16)
FX32 = FixedPoint(32)


def inv_sqrt_quantized_multiplier_exp(x, reverse_shift: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """tflite ``GetInvSqrtQuantizedMultiplierExp`` (with its special case for inputs <= 1):
    (multiplier, shift) such that multiplying by them divides by sqrt(x)."""
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
    half_input = FX32.multiply_by_pot(fx, -1)
    half_three = (1 << 28) + (1 << 27)
    r = np.full_like(x, 1 << 28)  # F3 one
    for _ in range(5):
        r3 = FX32.rescale(FX32.mul(FX32.mul(r, r), r), 9, 3)
        r = FX32.rescale(FX32.sub(FX32.mul(half_three, r), FX32.mul(half_input, r3)), 6, 3)
    r = FX32.mul(r, 1518500250)  # * sqrt(2) / 2
    neg = shift < 0
    r = np.where(neg, FX32.wrap(r << np.where(neg, -shift, 0)), r)
    shift = np.where(neg, 0, shift)
    r = np.where(special, INT32_MAX, r)
    shift = np.where(special, 0, shift)
    return r, shift * reverse_shift
