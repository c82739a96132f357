"""The vectorized fixed-point primitives of ``driver/operations/quant.py`` against a
scalar transcription of gemmlowp's / tflite's definitions.

The kernels use branch-free identities (one add and one shift for the rounding doubling
high multiply, the two roundings of ``MultiplyByQuantizedMultiplier`` folded into one
shift, the output zero point folded in too). The references below are the C++ as
written, on Python integers: ``nudge``, truncating division, mask/remainder/threshold,
int32 wrap. Inputs: every pair from a grid of edge values (the int32 limits, +-2**30,
exact rounding ties) plus seeded random values of every magnitude.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from driver.hal.types import ErrorStatus, FusedActivation, HalError
from driver.hal.types import OperandType as T
from driver.operations import quant

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# --- scalar references (the C++ as written) ----------------------------------------------


def c_div(a: int, b: int) -> int:
    """C++ integer division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def wrap(v: int, bits: int = 32) -> int:
    """The C++ cast of ``v`` to intB (two's complement)."""
    half = 1 << (bits - 1)
    return (v + half) % (2 * half) - half


def ref_srdhm(a: int, b: int, bits: int = 32) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul(intB, intB)."""
    lo = -(1 << (bits - 1))
    if a == b == lo:
        return -lo - 1
    ab = a * b
    nudge = (1 << (bits - 2)) if ab >= 0 else 1 - (1 << (bits - 2))
    return c_div(ab + nudge, 1 << (bits - 1))


def ref_rdbpot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT (Python's & and >> are two's complement on ints)."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def ref_mbqm(x: int, multiplier: int, shift: int) -> int:
    """tflite MultiplyByQuantizedMultiplier: int32 ``x * (1 << left)`` (wrapping), then
    the high multiply, then the rounding right shift."""
    left, right = max(shift, 0), max(-shift, 0)
    return ref_rdbpot(ref_srdhm(wrap(x * (1 << left)), multiplier), right)


def ref_sat_mul_pot(x: int, exponent: int, bits: int = 32) -> int:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> on intB (exponent <= bits - 1)."""
    if exponent == 0:
        return x
    if exponent < 0:
        return ref_rdbpot(x, -exponent)
    threshold = (1 << (bits - 1 - exponent)) - 1
    if x > threshold:
        return (1 << (bits - 1)) - 1
    if x < -threshold:
        return -(1 << (bits - 1))
    return x << exponent


def ref_half_sum(a: int, b: int) -> int:
    """gemmlowp RoundingHalfSum for int32: (a + b + sign) / 2 in int64, truncated."""
    s = a + b
    return c_div(s + (1 if s >= 0 else -1), 2)


# --- inputs ----------------------------------------------------------------------------

EDGES = sorted(
    {
        INT32_MIN,
        INT32_MIN + 1,
        -(2**30) - 1,
        -(2**30),
        -(2**30) + 1,
        -(2**29),
        -12345,
        -3,
        -2,
        -1,
        0,
        1,
        2,
        3,
        255,
        12345,
        2**29,
        2**30 - 1,
        2**30,
        2**30 + 1,
        INT32_MAX - 1,
        INT32_MAX,
        # odd values: times 2**30 they are exact rounding ties of the high multiply
        -5,
        (1 << 20) + 1,
        -((1 << 20) + 1),
        1518500250,
        -1010580540,
        1073741825,
    }
)

RNG_SEED = 20240611


def random_int32(rng: np.random.Generator, n: int) -> np.ndarray:
    """int32 values of every magnitude: full range, small, powers of two and their
    neighbours, so that both rounding branches and the ties occur."""
    full = rng.integers(INT32_MIN, INT32_MAX + 1, n, dtype=np.int64)
    small = rng.integers(-70000, 70000, n)
    powers = (np.int64(1) << rng.integers(0, 31, n)) * rng.choice([-1, 1], n) + rng.integers(
        -1, 2, n
    )
    pick = rng.integers(0, 3, n)
    out = np.where(pick == 0, full, np.where(pick == 1, small, powers))
    return np.clip(out, INT32_MIN, INT32_MAX)


def q31_multipliers(rng: np.random.Generator, n: int) -> list[int]:
    """Multipliers as QuantizeMultiplier makes them, plus the edge ones."""
    reals = np.exp(rng.uniform(np.log(1e-9), np.log(4.0), n))
    made = [quant.quantize_multiplier(float(r))[0] for r in reals]
    return [*made, 0, 1 << 30, INT32_MAX, INT32_MIN, -(1 << 30), -INT32_MAX, 1]


def check(actual, expected, what: str) -> None:
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=np.int64)
    assert actual.shape == expected.shape, what
    bad = np.flatnonzero(actual.ravel() != expected.ravel())
    assert bad.size == 0, (
        f"{what}: first mismatches at {bad[:5]}: {actual.ravel()[bad[:5]]} vs {expected.ravel()[bad[:5]]}"
    )


# --- SaturatingRoundingDoublingHighMul ----------------------------------------------------


def test_srdhm_every_pair_of_edge_values():
    a, b = np.meshgrid(np.array(EDGES, dtype=np.int64), np.array(EDGES, dtype=np.int64))
    expected = [ref_srdhm(int(x), int(y)) for x, y in zip(a.ravel(), b.ravel())]
    check(quant.saturating_rounding_doubling_high_mul(a, b).ravel(), expected, "srdhm edges")


def test_srdhm_random_pairs_and_scalar_operands():
    rng = np.random.default_rng(RNG_SEED)
    a, b = random_int32(rng, 20000), random_int32(rng, 20000)
    expected = [ref_srdhm(int(x), int(y)) for x, y in zip(a, b)]
    check(quant.saturating_rounding_doubling_high_mul(a, b), expected, "srdhm random")
    for s in (INT32_MIN, INT32_MAX, 1 << 30, -1010580540, 0):
        check(
            quant.saturating_rounding_doubling_high_mul(a, s),
            [ref_srdhm(int(x), s) for x in a],
            f"srdhm(a, {s})",
        )
        check(
            quant.saturating_rounding_doubling_high_mul(s, a),
            [ref_srdhm(s, int(x)) for x in a],
            f"srdhm({s}, a)",
        )
    assert int(quant.saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN)) == INT32_MAX


def test_srdhm_exact_ties_round_as_gemmlowp():
    # a * b = k * 2**31 + 2**30: exactly half way. Positive halves round up, negative
    # halves toward zero (nudge 1 - 2**30 and truncation).
    a = np.array([1, -1, 3, -3, 5, -5, 2**20 + 1], dtype=np.int64)
    b = np.full_like(a, 1 << 30)
    expected = [ref_srdhm(int(x), 1 << 30) for x in a]
    assert expected[:2] == [1, 0]
    check(quant.saturating_rounding_doubling_high_mul(a, b), expected, "ties")


# --- RoundingDivideByPOT -------------------------------------------------------------------


@pytest.mark.parametrize("exponent", range(0, 32))
def test_rounding_divide_by_pot(exponent):
    rng = np.random.default_rng(RNG_SEED + exponent)
    x = np.concatenate([np.array(EDGES, dtype=np.int64), random_int32(rng, 3000)])
    if exponent:
        half = 1 << (exponent - 1)
        ties = np.array([half, -half, 3 * half, -3 * half, 5 * half, -5 * half])
        x = np.concatenate([x, np.clip(ties, INT32_MIN, INT32_MAX)])
    check(
        quant.rounding_divide_by_pot(x, exponent),
        [ref_rdbpot(int(v), exponent) for v in x],
        f"rdbpot {exponent}",
    )


def test_rounding_divide_by_pot_per_element_exponents_and_wide_values():
    rng = np.random.default_rng(RNG_SEED)
    x = random_int32(rng, 5000)
    e = rng.integers(0, 32, 5000)
    check(
        quant.rounding_divide_by_pot(x, e),
        [ref_rdbpot(int(v), int(k)) for v, k in zip(x, e)],
        "rdbpot per element",
    )
    # Callers also divide int64 products (LSTM: int16 x int16 >> 30 + shift).
    wide = rng.integers(-(2**45), 2**45, 5000)
    for exponent in (0, 15, 30, 40):
        check(
            quant.rounding_divide_by_pot(wide, exponent),
            [ref_rdbpot(int(v), exponent) for v in wide],
            f"rdbpot wide {exponent}",
        )


# --- MultiplyByQuantizedMultiplier and its output stage -----------------------------------


def test_multiply_by_quantized_multiplier_scalar_parameters():
    rng = np.random.default_rng(RNG_SEED)
    x = np.concatenate([np.array(EDGES, dtype=np.int64), random_int32(rng, 600)])
    for m in q31_multipliers(rng, 6):
        for shift in (-31, -24, -17, -9, -6, -2, -1, 0, 1, 3, 10, 20):
            check(
                quant.multiply_by_quantized_multiplier(x, m, shift),
                [ref_mbqm(int(v), m, shift) for v in x],
                f"mbqm m={m} shift={shift}",
            )
    # int32 input (the accumulator dtype) takes the same path without conversion.
    check(
        quant.multiply_by_quantized_multiplier(x.astype(np.int32), 1 << 30, -3),
        [ref_mbqm(int(v), 1 << 30, -3) for v in x],
        "mbqm int32 input",
    )


def test_multiply_by_quantized_multiplier_per_channel():
    rng = np.random.default_rng(RNG_SEED + 1)
    channels = 24
    x = random_int32(rng, 250 * channels).reshape(250, channels)
    mult = np.array(q31_multipliers(rng, channels)[:channels], dtype=np.int64)
    shift = rng.integers(-31, 4, channels)
    shift[:3] = (0, -1, 2)
    expected = [
        [ref_mbqm(int(v), int(m), int(s)) for v, m, s in zip(row, mult, shift)] for row in x
    ]
    check(quant.multiply_by_quantized_multiplier(x, mult, shift), expected, "per channel")
    mult[5] = INT32_MIN  # the saturating pair must still be handled
    expected = [
        [ref_mbqm(int(v), int(m), int(s)) for v, m, s in zip(row, mult, shift)] for row in x
    ]
    check(quant.multiply_by_quantized_multiplier(x, mult, shift), expected, "INT32_MIN")


@pytest.mark.parametrize("out_dtype, lo, hi", [(np.uint8, 0, 255), (np.int8, -128, 127)])
def test_requantize_int32_is_clamped_multiply_plus_zero_point(out_dtype, lo, hi):
    rng = np.random.default_rng(RNG_SEED + 2)
    acc = random_int32(rng, 3000).astype(np.int32)
    acc[: len(EDGES)] = EDGES
    for m in q31_multipliers(rng, 3):
        # Right shifts up to 31 and zero points up to 1000 cross the bound where the
        # zero point can be folded into the shift.
        for shift in (-31, -28, -20, -7, -1, 0, 2):
            for zp in (0, 120, -128, 255, 1000):
                expected = [min(max(ref_mbqm(int(v), m, shift) + zp, lo), hi) for v in acc]
                out = quant.requantize_int32(acc, m, shift, zp, lo, hi, out_dtype)
                assert out.dtype == out_dtype
                check(out, expected, f"requantize m={m} shift={shift} zp={zp}")
    mult = np.array([1 << 30, 1518500250, 1073741825], dtype=np.int64)
    shift = np.array([-5, 0, 1])
    acc3 = acc[: 3 * 900].reshape(900, 3)
    expected = [
        [min(max(ref_mbqm(int(v), int(m), int(s)) + 7, lo), hi) for v, m, s in zip(r, mult, shift)]
        for r in acc3
    ]
    check(quant.requantize_int32(acc3, mult, shift, 7, lo, hi, out_dtype), expected, "per ch")


def test_legacy_multiplier_forms():
    rng = np.random.default_rng(RNG_SEED + 3)
    x = np.concatenate([np.array(EDGES, dtype=np.int64), random_int32(rng, 1500)])
    for m in q31_multipliers(rng, 3):
        for right in (0, 1, 7, 31):
            check(
                quant.multiply_by_quantized_multiplier_smaller_than_one(x, m, right),
                [ref_rdbpot(ref_srdhm(int(v), m), right) for v in x],
                f"smaller than one m={m} right={right}",
            )
        for left in (0, 1, 5, 12):
            check(
                quant.multiply_by_quantized_multiplier_greater_than_one(x, m, left),
                [ref_srdhm(wrap(int(v) << left), m) for v in x],
                f"greater than one m={m} left={left}",
            )


@pytest.mark.parametrize(
    "real, want",
    [
        (0.75, (3 << 29, 0)),  # 0.75 = 0.75 * 2**0: 0.75 * 2**31
        (0.1, (1717986918, -3)),  # 0.8 * 2**-3: round(0.8 * 2**31)
        # q * 2**31 rounds up to 2**31: QuantizeMultiplier halves it and adds one to the shift.
        (1 - 2.0**-33, (1 << 30, 1)),
        (4 * (1 - 2.0**-33), (1 << 30, 3)),
        # Below 2**-32 the shift would pass -31: the multiplier is 0 (every result 0).
        (2.0**-32, (1 << 30, -31)),
        (2.0**-33, (0, 0)),
        (2.0**-40, (0, 0)),
    ],
)
def test_quantize_multiplier_carries_and_flushes_like_android(real, want):
    assert quant.quantize_multiplier(real) == want


@pytest.mark.parametrize(
    "helper",
    [quant.quantize_multiplier, quant.quantize_multiplier_greater_than_one],
)
@pytest.mark.parametrize("real", [math.inf, math.nan])
def test_a_nonfinite_multiplier_fails_the_operation(helper, real):
    # Extreme valid scales overflow the float32 arithmetic that derives a multiplier.
    with pytest.raises(HalError) as e:
        helper(real)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE
    assert "multiplier is" in e.value.message


@pytest.mark.parametrize(
    "activation, zero_point, want",
    [(FusedActivation.RELU, 10, (10, 255)), (FusedActivation.RELU1, 10, (0, 255)),
     (FusedActivation.RELU6, 10, (10, 255))],
)  # fmt: skip
@pytest.mark.parametrize("scale", [1e-20, 1.4e-45])  # 1 / 1.4e-45 is inf in float32
def test_activation_range_saturates_for_tiny_scales(activation, zero_point, want, scale):
    # CalculateActivationRangeUint8's static_cast<int32_t> of a huge (or infinite)
    # quotient saturates on ARM: the clamp is the whole quantized range.
    got = quant.activation_range_quantized(activation, scale, zero_point, T.TENSOR_QUANT8_ASYMM)
    assert got == want


# --- helpers of the transcendental functions ----------------------------------------------


@pytest.mark.parametrize("exponent", [-31, -5, -1, 0, 1, 2, 7, 20, 30, 31])
def test_saturating_rounding_multiply_by_pot(exponent):
    rng = np.random.default_rng(RNG_SEED + 4)
    x = np.concatenate([np.array(EDGES, dtype=np.int64), random_int32(rng, 2000)])
    check(
        quant.saturating_rounding_multiply_by_pot(x, exponent),
        [ref_sat_mul_pot(int(v), exponent) for v in x],
        f"sat mul pot {exponent}",
    )


def test_rounding_half_sum():
    rng = np.random.default_rng(RNG_SEED + 5)
    a = np.concatenate([np.array(EDGES, dtype=np.int64), random_int32(rng, 3000)])
    b = np.concatenate([np.array(EDGES[::-1], dtype=np.int64), random_int32(rng, 3000)])
    check(
        quant.rounding_half_sum(a, b),
        [ref_half_sum(int(x), int(y)) for x, y in zip(a, b)],
        "rounding half sum",
    )
    check(
        quant.rounding_half_sum(a, INT32_MAX),
        [ref_half_sum(int(x), INT32_MAX) for x in a],
        "rounding half sum with INT32_MAX",
    )


# --- FixedPoint<int16|int32> (fixedpoint.h): exp, reciprocals, logistic, tanh ---------------


def ref_const(v: int, bits: int) -> int:
    """GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT: an int32 raw rescaled to intB."""
    return ref_rdbpot(v, 32 - bits)


def ref_exp_on_negative_values(a: int, integer_bits: int, bits: int) -> int:
    hi = (1 << (bits - 1)) - 1
    frac = bits - 1 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = wrap((a & (quarter - 1)) - quarter, bits)
    # exp on [-1/4, 0): Taylor at -1/8
    ct, c13 = ref_const(1895147668, bits), ref_const(715827883, bits)
    x = wrap(ref_sat_mul_pot(a_mod, integer_bits, bits) + (1 << (bits - 4)), bits)
    x2 = ref_srdhm(x, x, bits)
    x3 = ref_srdhm(x2, x, bits)
    x4 = ref_srdhm(x2, x2, bits)
    inner = wrap(ref_srdhm(wrap(ref_rdbpot(x4, 2) + x3, bits), c13, bits) + x2, bits)
    poly = ref_rdbpot(inner, 1)
    t = ref_srdhm(ct, wrap(x + poly, bits), bits)
    result = max(-hi - 1, min(hi, ct + t)) if bits == 16 else wrap(ct + t, bits)
    remainder = wrap(a_mod - a, bits)
    barrel = [
        (-2, 1672461947),
        (-1, 1302514674),
        (0, 790015084),
        (1, 290630308),
        (2, 39332535),
        (3, 720401),
        (4, 242),
    ]
    for e, m in barrel:
        if integer_bits > e and remainder & (1 << (frac + e)):
            result = ref_srdhm(result, ref_const(m, bits), bits)
    if integer_bits > 5 and a < ref_const(-(1 << (36 - integer_bits)), bits):
        result = 0
    return hi if a == 0 else result


def ref_newton_reciprocal(a: int, bits: int) -> int:
    """1 / (1 + a) in F2 (three Newton-Raphson steps on the half denominator)."""
    half_denominator = ref_half_sum(a, (1 << (bits - 1)) - 1)
    x = wrap(
        ref_const(1515870810, bits)
        + ref_srdhm(half_denominator, ref_const(-1010580540, bits), bits),
        bits,
    )
    one_f2 = 1 << (bits - 3)
    for _ in range(3):
        one_minus = wrap(one_f2 - ref_srdhm(half_denominator, x, bits), bits)
        x = wrap(x + ref_sat_mul_pot(ref_srdhm(x, one_minus, bits), 2, bits), bits)
    return x


def ref_logistic(a: int, integer_bits: int, bits: int) -> int:
    hi = (1 << (bits - 1)) - 1
    if a == 0:
        return ref_const(1 << 30, bits)
    abs_a = a if a > 0 else wrap(-a, bits)
    exp = ref_exp_on_negative_values(wrap(-abs_a, bits), integer_bits, bits)
    positive = ref_sat_mul_pot(ref_newton_reciprocal(exp, bits), 1, bits)
    return positive if a > 0 else wrap(hi - positive, bits)


def ref_tanh(a: int, integer_bits: int, bits: int) -> int:
    if a == 0:
        return 0
    n = a if a < 0 else wrap(-a, bits)
    x = ref_newton_reciprocal(ref_exp_on_negative_values(n, integer_bits + 1, bits), bits)
    t = ref_sat_mul_pot(wrap(x - (1 << (bits - 3)), bits), 2, bits)
    return wrap(-t, bits) if a < 0 else t


FIXED_POINTS = {16: quant.FX16, 32: quant.FX32}


def raws(bits: int) -> np.ndarray:
    """Raw values of FixedPoint<intB> (but the minimum, which the callers never pass:
    see the kernels' input radii): every int16; for int32 the edges and random values."""
    lo, hi = -(1 << (bits - 1)) + 1, (1 << (bits - 1)) - 1
    if bits == 16:
        return np.arange(lo, hi + 1, dtype=np.int64)
    rng = np.random.default_rng(RNG_SEED + 6)
    values = np.concatenate([np.array(EDGES, dtype=np.int64), random_int32(rng, 3000)])
    return np.clip(values, lo, hi)


def sample(values: np.ndarray) -> np.ndarray:
    """Few enough for the scalar port: the ends, a stride through, and around 0."""
    if values.size <= 4000:
        return values
    return np.concatenate([values[:40], values[-40:], values[::97], [-1, 0, 1]])


@pytest.mark.parametrize("bits", [16, 32])
def test_srdhm_and_saturating_multiply_by_pot_of_either_width(bits):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = np.array(sorted({lo, lo + 1, -(hi // 2), -3, -1, 0, 1, 3, hi // 2, hi - 1, hi}))
    a, b = np.meshgrid(edges, edges)
    check(
        quant.saturating_rounding_doubling_high_mul(a, b, bits).ravel(),
        [ref_srdhm(int(x), int(y), bits) for x, y in zip(a.ravel(), b.ravel())],
        f"srdhm int{bits}",
    )
    for exponent in (1, 2, bits // 2, bits - 2, bits - 1):
        check(
            quant.saturating_rounding_multiply_by_pot(edges, exponent, bits),
            [ref_sat_mul_pot(int(v), exponent, bits) for v in edges],
            f"sat mul pot {exponent} int{bits}",
        )
    # Beyond bits - 1 (undefined in the C++) every non-zero value saturates.
    got = quant.saturating_rounding_multiply_by_pot(edges, bits + 3, bits)
    check(got, np.where(edges > 0, hi, np.where(edges < 0, lo, 0)), "beyond bits - 1")
    # A scalar is a 0-d result, not an error.
    assert int(quant.saturating_rounding_multiply_by_pot(np.int64(3), 2, bits)) == 12


@pytest.mark.parametrize("bits", [16, 32])
@pytest.mark.parametrize("integer_bits", [0, 1, 3, 5, 6, 12])
def test_exp_on_negative_values_matches_the_scalar_port(bits, integer_bits):
    a = -np.abs(sample(raws(bits)))
    got = FIXED_POINTS[bits].exp_on_negative_values(a, integer_bits)
    check(got, [ref_exp_on_negative_values(int(v), integer_bits, bits) for v in a], "exp")
    # ...and exp() to within the algorithm's precision (a few raw steps of int16; 2.3e-7,
    # the Taylor step's, for int32).
    real = a / 2.0 ** (bits - 1 - integer_bits)
    tolerance = {16: 1e-4, 32: 3e-7}[bits]
    assert np.abs(got / 2.0 ** (bits - 1) - np.exp(real)).max() < tolerance


@pytest.mark.parametrize("bits", [16, 32])
def test_reciprocals_match_the_scalar_port(bits):
    fp = FIXED_POINTS[bits]
    x = np.abs(sample(raws(bits)))  # F0 in [0, 1)
    check(
        fp.one_over_one_plus_x_for_x_in_0_1(x),
        [ref_sat_mul_pot(ref_newton_reciprocal(int(v), bits), 1, bits) for v in x],
        "1 / (1 + x)",
    )
    check(
        fp.one_minus_x_over_one_plus_x_for_x_in_0_1(x),
        [
            ref_sat_mul_pot(
                wrap(ref_newton_reciprocal(int(v), bits) - (1 << (bits - 3)), bits), 2, bits
            )
            for v in x
        ],
        "(1 - x) / (1 + x)",
    )


@pytest.mark.parametrize("bits", [16, 32])
@pytest.mark.parametrize("integer_bits", [3, 4, 6])
def test_logistic_and_tanh_match_scalar_port_and_float(bits, integer_bits):
    fp = FIXED_POINTS[bits]
    raw = raws(bits)
    real = raw / 2.0 ** (bits - 1 - integer_bits)
    lg = fp.logistic(raw, integer_bits)
    th = fp.tanh(raw, integer_bits)
    # Close to the real functions (F0 results)...
    tolerance = {16: (2e-4, 4e-4), 32: (1e-6, 2e-6)}[bits]
    assert np.abs(lg / 2.0 ** (bits - 1) - 1 / (1 + np.exp(-real))).max() < tolerance[0]
    assert np.abs(th / 2.0 ** (bits - 1) - np.tanh(real)).max() < tolerance[1]
    # ...and bit-identical to the straightforward scalar port.
    picked = sample(raw)
    index = np.searchsorted(raw, picked) if bits == 16 else np.arange(raw.size)
    check(lg[index], [ref_logistic(int(a), integer_bits, bits) for a in picked], "logistic")
    check(th[index], [ref_tanh(int(a), integer_bits, bits) for a in picked], "tanh")


def test_fixed_point_special_values():
    fx16, fx32 = quant.FX16, quant.FX32
    assert fx16.logistic(np.int64(0), 3) == 16384  # exactly 0.5
    assert fx16.tanh(np.int64(0), 3) == 0
    assert fx16.logistic(np.int64(32767), 3) == 32767 - fx16.logistic(np.int64(-32767), 3)
    assert fx32.logistic(np.int64(0), 4) == 1 << 30
    assert fx32.exp_on_negative_values(np.int64(0), 5) == INT32_MAX  # exp(0) saturates
    assert fx16.multiply_by_pot(np.int64(20000), 1) == 32767
    assert fx16.multiply_by_pot(np.int64(-20000), 1) == -32768
    assert fx16.multiply_by_pot(np.int64(-3), -1) == -2  # -1.5 -> -2
    assert fx16.wrap(np.int64(32768)) == -32768 and fx32.wrap(np.int64(2**31)) == INT32_MIN


def test_inverse_sqrt_multiplier():
    xs = np.array([2, 3, 17, 1000, 65535, 2**20 + 7, 2**29 + 5, 2**31 - 1], dtype=np.int64)
    mult, shift = quant.inv_sqrt_quantized_multiplier_exp(xs, -1)
    # 1/sqrt(x) = mult * 2^(shift - 31)  (the shift is reversed to a left shift)
    approx = mult / 2.0**31 * 2.0**shift
    np.testing.assert_allclose(approx, 1 / np.sqrt(xs), rtol=3e-6)  # 5 Newton steps
    m1, s1 = quant.inv_sqrt_quantized_multiplier_exp(np.array([0, 1]), -1)
    assert m1.tolist() == [2**31 - 1] * 2 and s1.tolist() == [0, 0]


@pytest.mark.parametrize(
    "type",
    [
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_QUANT8_SYMM,
        T.TENSOR_QUANT16_SYMM,
        T.TENSOR_QUANT16_ASYMM,
    ],
)
def test_quantize_saturates_at_the_limits_of_the_storage_type(type):
    got = quant.quantize(np.array([-1e9, 1e9]), 0.125, 0, type)
    limits = np.iinfo(got.dtype)
    assert got.tolist() == [limits.min, limits.max]
