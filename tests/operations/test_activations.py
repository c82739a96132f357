"""Kernel and validation tests for RELU, RELU1, RELU6, LOGISTIC, TANH, ELU, HARD_SWISH.

Quantized LOGISTIC/TANH/HARD_SWISH are compared on all 256 inputs with (1) a scalar,
line-by-line Python transcription of gemmlowp's fixed-point ``logistic``/``tanh`` and
tflite's int16 ``HardSwish`` (``ref_*`` below), and (2) the real function, within one
quantization step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import output, run_op, scalar, tensor
from tests.operations.test_elementwise import (
    accepts,
    assert_rejection,
    assert_signed_matches_unsigned,
    ref_mbqm,
    ref_quantize_multiplier,
    ref_rdbpot,
    ref_srdhm,
    rejects,
    run1,
)

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
FLT_MAX = float(np.finfo(np.float32).max)
ALL_BYTES = np.arange(256, dtype=np.uint8)
I32_MAX = 2**31 - 1


# ---------------------------------------------------------------------------------------
# Scalar transcription of gemmlowp fixed point (Python ints, one value at a time)
# ---------------------------------------------------------------------------------------


def wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def sat_mul_pot(x: int, e: int) -> int:
    """SaturatingRoundingMultiplyByPOT<e>."""
    if e > 0:
        threshold = (1 << (31 - e)) - 1
        if x > threshold:
            return I32_MAX
        if x < -threshold:
            return -(2**31)
        return wrap32(x << e)
    return ref_rdbpot(x, -e) if e < 0 else x


def exp_quarter(a: int) -> int:
    """exp_on_interval_between_negative_one_quarter_and_0_excl (F0 in, F0 out)."""
    const_term, one_third = 1895147668, 715827883
    x = a + (1 << 28)
    x2 = ref_srdhm(x, x)
    x3 = ref_srdhm(x2, x)
    x4 = ref_srdhm(x2, x2)
    x4_over_4 = sat_mul_pot(x4, -2)
    poly = sat_mul_pot(ref_srdhm(x4_over_4 + x3, one_third) + x2, -1)
    return const_term + ref_srdhm(const_term, x + poly)


def exp_negative(a: int, integer_bits: int) -> int:
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = exp_quarter(sat_mul_pot(a_mod, integer_bits))
    remainder = a_mod - a
    table = {-2: 1672461947, -1: 1302514674, 0: 790015084, 1: 290630308, 2: 39332535,
             3: 720401, 4: 242}  # fmt: skip
    for exponent in range(-2, 5):
        if integer_bits > exponent and remainder & (1 << (frac + exponent)):
            result = ref_srdhm(result, table[exponent])
    return I32_MAX if a == 0 else result


def newton(a: int, minus_one: bool) -> int:
    t = a + I32_MAX  # RoundingHalfSum(a, 1): (sum + sign) / 2, truncating
    t += 1 if t >= 0 else -1
    half = t // 2 if t >= 0 else -((-t) // 2)
    x = 1515870810 + ref_srdhm(half, -1010580540)
    for _ in range(3):
        x = x + sat_mul_pot(ref_srdhm(x, (1 << 29) - ref_srdhm(half, x)), 2)
    return sat_mul_pot(x - (1 << 29), 2) if minus_one else sat_mul_pot(x, 1)


def ref_logistic_raw(a: int) -> int:
    if a == 0:
        return 1 << 30
    pos = newton(exp_negative(-abs(a), 4), minus_one=False)
    return pos if a > 0 else I32_MAX - pos


def ref_tanh_raw(a: int) -> int:
    if a == 0:
        return 0
    t = newton(exp_negative(-abs(a), 5), minus_one=True)
    return t if a > 0 else -t


def ref_logistic_tanh_u8(value: int, scale: float, zp: int, tanh: bool) -> int:
    real = float(np.float32(scale)) * 2.0**27
    mult, shift = ref_quantize_multiplier(real)  # > 1: a left shift
    radius = math.floor(15 * 2**27 / 2**shift)
    centered = value - zp
    if centered <= -radius:
        return 0
    if centered >= radius:
        return 255
    x = ref_mbqm(centered, mult, shift)
    if tanh:
        out = ref_rdbpot(ref_tanh_raw(x), 24) + 128
    else:
        out = ref_rdbpot(ref_logistic_raw(x), 23)
    return min(out, 255)


def i16(x: int) -> int:
    return (x + 2**15) % 2**16 - 2**15


def srdhm16(a: int, b: int) -> int:
    if a == b == -(2**15):
        return 2**15 - 1
    ab = a * b
    t = ab + ((1 << 14) if ab >= 0 else 1 - (1 << 14))
    return i16(t // 2**15 if t >= 0 else -((-t) // 2**15))


def sdhm16(a: int, b: int) -> int:
    if a == b == -(2**15):
        return 2**15 - 1
    ab = a * b
    return i16(ab // 2**15 if ab >= 0 else -((-ab) // 2**15))


def rdbpot16(x: int, e: int) -> int:
    mask = i16((1 << e) - 1)
    rem = i16(x & mask)
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return i16((x >> e) + (1 if rem > threshold else 0))


def sat_shift16(x: int, n: int) -> int:
    return max(-(2**15), min(2**15 - 1, x * 2**n))


def int16_multiplier(real: float) -> tuple[int, int]:
    m, e = ref_quantize_multiplier(real)
    return (2**15 - 1 if m >= I32_MAX - 2**15 else (m + 2**15) >> 16), e


def ref_hard_swish(value: int, s_in, z_in, s_out, z_out, lo=0, hi=255) -> int:
    f = np.float32
    hires = f(1.0 / 128.0) * f(s_in)
    out_m, out_e = int16_multiplier(float(hires / f(s_out)))
    rel_m, rel_e = int16_multiplier(float(hires / (f(3.0) / f(32768.0))))
    v = (value - z_in) * 128
    pre = srdhm16(v, out_m)
    r = v
    if rel_e > 0:
        r = sat_shift16(r, rel_e - 1)
    r = srdhm16(r, rel_m)
    if rel_e > 0:
        r = sat_shift16(r, 1)
    if rel_e < 0:
        r = rdbpot16(r, -rel_e)
    r = (r + 2**15) >> 1
    out = i16(rdbpot16(sdhm16(r, pre), -out_e) + z_out)
    return max(lo, min(hi, out))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def hard_swish(x):
    return x * np.clip(x + 3, 0, 6) / 6


# ---------------------------------------------------------------------------------------
# Quantized LOGISTIC / TANH
# ---------------------------------------------------------------------------------------

INPUT_QUANT = [(1 / 16, 128), (0.1, 0), (0.02, 200), (1.0, 128), (0.0078125, 127), (0.5, 255),
               (3e-4, 128), (6.0, 100)]  # fmt: skip


def logistic_u8(scale, zp, values=ALL_BYTES):
    return run1(
        O.LOGISTIC,
        [tensor(U8, values, scale=scale, zero_point=zp)],
        output(U8, values.shape, scale=1 / 256, zero_point=0),
    )


def tanh_u8(scale, zp, values=ALL_BYTES):
    return run1(
        O.TANH,
        [tensor(U8, values, scale=scale, zero_point=zp)],
        output(U8, values.shape, scale=1 / 128, zero_point=128),
    )


@pytest.mark.parametrize("scale, zp", INPUT_QUANT)
def test_quant8_logistic_matches_scalar_fixed_point_and_float(scale, zp):
    got = logistic_u8(scale, zp)
    want = [ref_logistic_tanh_u8(v, scale, zp, tanh=False) for v in range(256)]
    np.testing.assert_array_equal(got, want)
    real = sigmoid((ALL_BYTES.astype(float) - zp) * np.float32(scale))
    assert np.abs(got - np.clip(np.round(real * 256), 0, 255)).max() <= 1


@pytest.mark.parametrize("scale, zp", INPUT_QUANT)
def test_quant8_tanh_matches_scalar_fixed_point_and_float(scale, zp):
    got = tanh_u8(scale, zp)
    want = [ref_logistic_tanh_u8(v, scale, zp, tanh=True) for v in range(256)]
    np.testing.assert_array_equal(got, want)
    real = np.tanh((ALL_BYTES.astype(float) - zp) * np.float32(scale))
    assert np.abs(got - np.clip(np.round(real * 128) + 128, 0, 255)).max() <= 1


def test_quant8_logistic_tanh_input_scale_from_16_saturates_even_zero():
    # scale >= 8 makes the input radius floor(15 * 2^27 / 2^shift) zero: Android's
    # "centered <= -radius" branch then maps the zero point itself to 0 as well.
    values = np.array([99, 100, 101], np.uint8)
    np.testing.assert_array_equal(logistic_u8(40.0, 100, values), [0, 0, 255])
    np.testing.assert_array_equal(tanh_u8(40.0, 100, values), [0, 0, 255])
    want = [ref_logistic_tanh_u8(int(v), 40.0, 100, tanh=False) for v in values]
    assert want == [0, 0, 255]


def test_quant8_logistic_tanh_hand_points():
    # zero maps to exactly 1/2 (LOGISTIC) and 0 (TANH); far inputs saturate.
    got = logistic_u8(0.5, 100, np.array([100, 0, 255], np.uint8))
    np.testing.assert_array_equal(got, [128, 0, 255])
    got = tanh_u8(0.5, 100, np.array([100, 0, 255], np.uint8))
    np.testing.assert_array_equal(got, [128, 0, 255])
    # scale 1/16, zp 128: x = 1.125, -1.125, 0.5 -> 256 * sigmoid = 193.26, 62.74, 159.36
    got = logistic_u8(1 / 16, 128, np.array([128, 146, 110, 136], np.uint8))
    np.testing.assert_array_equal(got, [128, 193, 63, 159])
    # 128 + 128 * tanh(x) = 231.62, 24.38, 187.15
    got = tanh_u8(1 / 16, 128, np.array([128, 146, 110, 136], np.uint8))
    np.testing.assert_array_equal(got, [128, 232, 24, 187])


# ---------------------------------------------------------------------------------------
# Quantized HARD_SWISH
# ---------------------------------------------------------------------------------------

HS_QUANT = [(1 / 16, 128, 1 / 16, 40), (0.05, 100, 0.03, 20), (0.2, 10, 0.1, 5),
            (0.01, 128, 0.005, 128), (2.0, 128, 1.0, 0), (0.5, 0, 0.02, 0)]  # fmt: skip


@pytest.mark.parametrize("s_in, z_in, s_out, z_out", HS_QUANT)
def test_quant8_hard_swish_matches_scalar_fixed_point_and_float(s_in, z_in, s_out, z_out):
    got = run1(
        O.HARD_SWISH,
        [tensor(U8, ALL_BYTES, scale=s_in, zero_point=z_in)],
        output(U8, (256,), scale=s_out, zero_point=z_out),
    )
    want = [ref_hard_swish(v, s_in, z_in, s_out, z_out) for v in range(256)]
    np.testing.assert_array_equal(got, want)
    real = hard_swish((ALL_BYTES.astype(float) - z_in) * s_in)
    expected = np.clip(np.round(real / s_out) + z_out, 0, 255)
    assert np.abs(got - expected).max() <= 1


# ---------------------------------------------------------------------------------------
# Signed = unsigned - 128
# ---------------------------------------------------------------------------------------

_FIXED_OUT = {O.LOGISTIC: (1 / 256, 0), O.TANH: (1 / 128, 128)}


@given(
    op=st.sampled_from([O.RELU, O.RELU1, O.RELU6, O.LOGISTIC, O.TANH, O.HARD_SWISH]),
    scale=st.floats(0.002, 3.0).map(lambda s: float(np.float32(s))),
    zp=st.integers(0, 255),
    out_scale=st.floats(0.01, 1.0).map(lambda s: float(np.float32(s))),
    out_zp=st.integers(0, 255),
)
def test_quant8_signed_is_unsigned_minus_128(op, scale, zp, out_scale, out_zp):
    if op in _FIXED_OUT:
        out_scale, out_zp = _FIXED_OUT[op]
    elif op != O.HARD_SWISH:
        out_scale, out_zp = scale, zp
    elif scale >= 100 * out_scale:  # keep hardSwishQuant's output multiplier below 1
        out_scale = scale / 64
    assert_signed_matches_unsigned(
        op,
        [tensor(U8, ALL_BYTES, scale=scale, zero_point=zp)],
        [output(U8, (256,), scale=out_scale, zero_point=out_zp)],
    )


# ---------------------------------------------------------------------------------------
# RELU family
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, want",
    [(O.RELU, [0.0, 0.0, 0.0, 0.5, 6.5, FLT_MAX, 0.0]),
     (O.RELU1, [-1.0, -1.0, -0.5, 0.5, 1.0, 1.0, -1.0]),
     (O.RELU6, [0.0, 0.0, 0.0, 0.5, 6.0, 6.0, 0.0])],
)  # fmt: skip
def test_relu_float32_including_inf_and_nan(op, want):
    # std::min(std::max(lo, x), hi): NaN gives lo; RELU's hi is FLT_MAX, so +inf -> FLT_MAX.
    x = [-np.inf, -3.0, -0.5, 0.5, 6.5, np.inf, np.nan]
    got = run1(op, [tensor(F32, np.reshape(x, (1, 7, 1, 1)))], output(F32, (1, 7, 1, 1)))
    np.testing.assert_array_equal(got.ravel(), want)


def test_relu_float16_infinity_stays_infinite():
    got = run1(O.RELU, [tensor(F16, [np.inf, -2.0, 3.0])], output(F16, (3,)))
    np.testing.assert_array_equal(got, np.array([np.inf, 0.0, 3.0], np.float16))


@pytest.mark.parametrize("t", [U8, S8])
def test_relu_quant8_clamps_in_the_quantized_domain(t):
    # scale 0.8, zp 100: RELU6's upper bound is 100 + round(6 / 0.8 = 7.5) = 108 (half away),
    # RELU1's range 100 -+ round(1.25) = [99, 101].
    shift = 128 if t == S8 else 0
    values = np.array([0, 98, 99, 100, 101, 102, 107, 108, 109, 255]) - shift
    x = tensor(t, values, scale=0.8, zero_point=100 - shift)
    out = output(t, (10,), scale=0.8, zero_point=100 - shift)
    want = {
        O.RELU: [100, 100, 100, 100, 101, 102, 107, 108, 109, 255],
        O.RELU1: [99, 99, 99, 100, 101, 101, 101, 101, 101, 101],
        O.RELU6: [100, 100, 100, 100, 101, 102, 107, 108, 108, 108],
    }
    for op, w in want.items():
        np.testing.assert_array_equal(run1(op, [x], out).astype(int), np.array(w) - shift)


@pytest.mark.parametrize("op", [O.RELU, O.RELU1, O.RELU6, O.LOGISTIC, O.TANH, O.HARD_SWISH])
def test_zero_sized_input_is_allowed(op):
    x = tensor(F32, np.zeros((0, 2), np.float32), declared_dims=(0, 2))
    assert run1(op, [x], output(F32, (0, 2))).shape == (0, 2)


# ---------------------------------------------------------------------------------------
# Float LOGISTIC, TANH, ELU, HARD_SWISH
# ---------------------------------------------------------------------------------------

XF = np.array([-20.0, -3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 3.0, 100.0], np.float32)


@pytest.mark.parametrize("t, tol", [(F32, 1e-6), (F16, 2e-3)])
def test_float_activations_against_definitions(t, tol):
    x = tensor(t, XF.reshape(3, 3))
    xd = XF.astype(float).reshape(3, 3)
    cases = [
        (O.LOGISTIC, [x], sigmoid(xd)),
        (O.TANH, [x], np.tanh(xd)),
        (O.HARD_SWISH, [x], hard_swish(xd)),
        (O.ELU, [x, scalar(T.FLOAT32 if t == F32 else T.FLOAT16, 1.5)], np.where(xd > 0, xd, 1.5 * np.expm1(xd))),
    ]  # fmt: skip
    for op, ins, want in cases:
        got = run1(op, ins, output(t, (3, 3)))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=op.name)


def test_elu_and_hard_swish_special_values():
    x = tensor(F32, [np.nan, np.inf, -np.inf])
    elu = run1(O.ELU, [x, scalar(T.FLOAT32, 2.0)], output(F32, (3,)))
    np.testing.assert_array_equal(elu, [0.0, np.inf, -2.0])  # NaN terms become 0
    hs = run1(O.HARD_SWISH, [x], output(F32, (3,)))
    assert math.isnan(hs[0]) and hs[1] == np.inf and math.isnan(hs[2])  # -inf * 0


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, t, scale, zp",
    [(O.LOGISTIC, U8, 1 / 128, 0), (O.LOGISTIC, U8, 1 / 256, 1), (O.LOGISTIC, S8, 1 / 256, 0),
     (O.TANH, U8, 1 / 128, 0), (O.TANH, S8, 1 / 128, -128), (O.TANH, U8, 1 / 256, 128)],
)  # fmt: skip
def test_rejects_wrong_fixed_output_quantization(op, t, scale, zp):
    x = tensor(t, [1, 2], scale=0.1, zero_point=0)
    rejects(op, [x], [output(t, (2,), scale=scale, zero_point=zp)], match="must have scale")


@pytest.mark.parametrize(
    "op, t, scale, zp",
    [(O.LOGISTIC, U8, 1 / 256, 0), (O.LOGISTIC, S8, 1 / 256, -128),
     (O.TANH, U8, 1 / 128, 128), (O.TANH, S8, 1 / 128, 0)],
)  # fmt: skip
def test_accepts_the_fixed_output_quantization(op, t, scale, zp):
    accepts(op, [tensor(t, [1, 2], scale=0.1)], [output(t, (2,), scale=scale, zero_point=zp)])


@pytest.mark.parametrize(
    "scale, valid", [(2.0**-28, False), (2.0**-27, False), (2.0**-27 * (1 + 2**-20), True)]
)
@pytest.mark.parametrize("op", [O.LOGISTIC, O.TANH])
def test_logistic_tanh_input_scale_times_2_to_27_must_exceed_one(op, scale, valid):
    # QuantizeMultiplierGreaterThanOne(scale * 2**27) needs a multiplier > 1: exactly 1
    # fails too.
    fixed_scale, fixed_zp = _FIXED_OUT[op]
    ins = [tensor(U8, [1, 2], scale=scale)]
    outs = [output(U8, (2,), scale=fixed_scale, zero_point=fixed_zp)]
    if valid:
        accepts(op, ins, outs)
    else:
        rejects(op, ins, outs, match="too small")


@pytest.mark.parametrize("op", [O.RELU, O.RELU1, O.RELU6])
def test_rejects_relu_output_quantization_change(op):
    x = tensor(U8, [1, 2], scale=0.5, zero_point=3)
    rejects(op, [x], [output(U8, (2,), scale=0.25, zero_point=3)], match="scale and zero point")
    rejects(op, [x], [output(U8, (2,), scale=0.5, zero_point=4)], match="scale and zero point")


@pytest.mark.parametrize(
    "out_scale, valid", [(1 / 256, False), (1 / 128, False), (1 / 127, True), (1 / 64, True)]
)
def test_rejects_hard_swish_output_scale_too_small(out_scale, valid):
    # The output multiplier input scale / (128 * output scale) must be below 1: exactly 1
    # (1/128 here) is QuantizeMultiplier's 0.5 * 2**1, a positive exponent.
    x = tensor(U8, [1, 2], scale=1.0)
    if valid:
        accepts(O.HARD_SWISH, [x], [output(U8, (2,), scale=out_scale)])
    else:
        rejects(O.HARD_SWISH, [x], [output(U8, (2,), scale=out_scale)], match="below 1")


@pytest.mark.parametrize("op", [O.RELU, O.RELU1, O.RELU6, O.LOGISTIC, O.TANH])
def test_rejects_rank_5(op):
    x5 = tensor(F32, np.zeros((1, 1, 1, 1, 2), np.float32))
    rejects(op, [x5], [output(F32, (1, 1, 1, 1, 2))], match="rank")


def test_hard_swish_and_elu_take_rank_5():
    x5 = np.linspace(-4, 4, 6, dtype=np.float32).reshape(1, 1, 1, 2, 3)
    got = run1(O.HARD_SWISH, [tensor(F32, x5)], output(F32, x5.shape))
    np.testing.assert_allclose(got, hard_swish(x5.astype(float)), rtol=1e-6)
    got = run1(O.ELU, [tensor(F32, x5), scalar(T.FLOAT32, 1.0)], output(F32, x5.shape))
    assert got.shape == x5.shape


@pytest.mark.parametrize(
    "op, t, version, ok",
    [(O.TANH, U8, HalVersion.V1_1, False), (O.TANH, U8, HalVersion.V1_2, True),
     (O.LOGISTIC, U8, HalVersion.V1_0, True), (O.RELU, F16, HalVersion.V1_1, False),
     (O.RELU6, S8, HalVersion.V1_2, False), (O.HARD_SWISH, F32, HalVersion.V1_2, False),
     (O.HARD_SWISH, F32, HalVersion.V1_3, True)],
)  # fmt: skip
def test_signature_versions(op, t, version, ok):
    quant = t in (U8, S8)
    x = tensor(t, [1, 2], scale=0.5 if quant else 0.0)
    scale, zp = {O.TANH: (1 / 128, 128), O.LOGISTIC: (1 / 256, 0)}.get(op, (0.5, 0))
    if t == S8:
        zp -= 128 if op in (O.TANH, O.LOGISTIC) else 0
    out = output(t, (2,), scale=scale if quant else 0.0, zero_point=zp if quant else 0)
    if ok:
        accepts(op, [x], [out], version)
    else:
        rejects(op, [x], [out], version)


def test_elu_alpha_type_must_match():
    rejects(
        O.ELU,
        [tensor(F32, [1.0]), scalar(T.FLOAT16, 1.0)],
        [output(F32, (1,))],
        match="no signature",
    )
    rejects(
        O.ELU, [tensor(F32, [1.0]), scalar(T.FLOAT32, 1.0)], [output(F32, (1,))], HalVersion.V1_2
    )


def test_logistic_wrong_scale_is_caught_before_running():
    with pytest.raises(HalError, match="must have scale"):
        run_op(O.LOGISTIC, [tensor(U8, [1], scale=0.5)], [output(U8, (1,), scale=0.5)])


_U8X = tensor(U8, [1, 2], scale=0.5, zero_point=3)


@pytest.mark.parametrize(
    "case, deferrable, match",
    [
        # Activation.cpp's validate checks rank <= 4 (not for HARD_SWISH) when known...
        ((O.RELU6, [tensor(F32, np.zeros((1, 1, 1, 1, 2), np.float32))],
          [output(F32, (1, 1, 1, 1, 2))]), False, "input 0 must have rank 0..4"),
        ((O.TANH, [tensor(U8, [1, 2], scale=0.1)],
          [output(U8, (2,), scale=1 / 128, zero_point=128)], HalVersion.V1_1),
         False, "needs HAL 1.2"),
        # ...while prepare() sets the output's quantization and the kernels compute
        # their multipliers, at execution.
        ((O.RELU, [_U8X], [output(U8, (2,), scale=0.25, zero_point=3)]),
         True, "must have the input's scale and zero point"),
        ((O.LOGISTIC, [tensor(S8, [1, 2], scale=0.1)], [output(S8, (2,), scale=1 / 256)]),
         True, "must have scale 0.00390625 and zero point -128"),
        ((O.TANH, [tensor(U8, [1, 2], scale=2.0**-28)],
          [output(U8, (2,), scale=1 / 128, zero_point=128)]), True, "too small"),
        ((O.HARD_SWISH, [tensor(U8, [1, 2], scale=1.0)], [output(U8, (2,), scale=1 / 256)]),
         True, "below 1"),
        # scale / 128 / (3 / 32768) overflows float32: the reluish multiplier is inf.
        ((O.HARD_SWISH, [tensor(U8, [1, 2], scale=1e37)], [output(U8, (2,), scale=1e38)]),
         True, "multiplier is inf"),
        # The rank rule Android's validation does check comes first.
        ((O.RELU1, [tensor(U8, np.zeros((1, 1, 1, 1, 2)), scale=0.5)],
          [output(U8, (1, 1, 1, 1, 2), scale=0.25)]), False, "rank 0..4"),
    ],
    ids=["rank", "version", "relu-quant", "logistic-quant", "tanh-input-scale",
         "hard-swish-multiplier", "hard-swish-overflow", "strict-first"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(case, deferrable, match):
    assert_rejection(case, deferrable, match)
