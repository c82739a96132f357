"""Kernel and validation tests for CAST, QUANTIZE and DEQUANTIZE."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import HalVersion, SymmPerChannelQuantParams
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import quantization
from driver.testing import output, tensor, traced_peak
from tests.operations.test_elementwise import (
    accepts,
    assert_rejection,
    assert_signed_matches_unsigned,
    rejects,
    run1,
)

F32, F16, I32, B8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8
U8, S8, Q8S, QPC = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
)
Q16A, Q16S = T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM


def round_half_away(x: float) -> float:
    return math.copysign(math.floor(abs(x) + 0.5), x)


# --- QUANTIZE ----------------------------------------------------------------------------


def test_quantize_rounds_half_away_and_saturates():
    x = [-0.75, -0.25, 0.25, 0.75, 1.25, 63.0, 64.0, -64.5, -65.0]
    got = run1(O.QUANTIZE, [tensor(F32, x)], output(U8, (9,), scale=0.5, zero_point=128))
    # x / 0.5 = [-1.5, -0.5, 0.5, 1.5, 2.5, 126, 128, -129, -130]
    np.testing.assert_array_equal(got, [126, 127, 129, 130, 131, 254, 255, 0, 0])


def test_quantize_float32_rounding_is_exact_near_one_half():
    # 0.49999997f + 0.5f rounds to 1.0 in float32; std::round(0.49999997f) is 0.
    below_half = float(np.nextafter(np.float32(0.5), np.float32(0)))
    odd = 8388609.0  # 2^23 + 1: x + 0.5 is not representable in float32
    got = run1(
        O.QUANTIZE,
        [tensor(F32, [below_half, -below_half, odd])],
        output(S8, (3,), scale=1.0, zero_point=0),
    )
    np.testing.assert_array_equal(got, [0, 0, 127])
    got = run1(
        O.QUANTIZE, [tensor(F32, [below_half * 2, 2.5])], output(U8, (2,), scale=2.0, zero_point=3)
    )
    np.testing.assert_array_equal(got, [3, 4])  # 0.49999997 -> 0; 1.25 -> 1


def test_quantize_nan_and_infinity_follow_std_min_max():
    # std::max(lo, std::min(hi, zp + round(x / scale))): NaN compares false -> hi.
    x = tensor(F32, [np.nan, np.inf, -np.inf, 1.0])
    np.testing.assert_array_equal(
        run1(O.QUANTIZE, [x], output(U8, (4,), scale=1.0, zero_point=7)), [255, 255, 0, 8]
    )
    np.testing.assert_array_equal(
        run1(O.QUANTIZE, [x], output(S8, (4,), scale=1.0, zero_point=-121)), [127, 127, -128, -120]
    )


def test_quantize_blocks_of_one_element_give_the_one_block_result():
    # Blocks of finite values take the float32 path, the others the float64 one; both
    # round halves away from zero (x / 0.5 = [nan, 0.5, -2.5, inf, 2e10, 6.9999995, -0.5,
    # 2.5]).
    x = tensor(F32, [np.nan, 0.25, -1.25, np.inf, 1e10, 3.49999976, -0.25, 1.25])
    out = output(U8, (8,), scale=0.5, zero_point=7)
    whole = run1(O.QUANTIZE, [x], out)
    with mock.patch.object(quantization, "_BLOCK_ELEMENTS", 1):
        np.testing.assert_array_equal(run1(O.QUANTIZE, [x], out), whole)
    np.testing.assert_array_equal(whole, [255, 8, 4, 255, 255, 14, 6, 10])


def test_quantize_float16_needs_little_more_memory_than_its_input():
    # 16 MB of float16: whole-array float32 temporaries took 16 bytes an element.
    x = np.random.default_rng(0).normal(size=1 << 23).astype(np.float16)
    got, peak = traced_peak(
        lambda: run1(O.QUANTIZE, [tensor(F16, x)], output(U8, x.shape, scale=0.01, zero_point=128))
    )
    assert peak < x.nbytes + (24 << 20), f"peak {peak >> 20} MB"
    want = [min(255, max(0, 128 + round_half_away(float(v / np.float32(0.01))))) for v in x[:5]]
    np.testing.assert_array_equal(got[:5], want)


@given(
    xs=st.lists(st.floats(-300, 300, width=32), min_size=1, max_size=20),
    scale=st.floats(0.01, 4.0).map(lambda s: float(np.float32(s))),
    zp=st.integers(0, 255),
    half=st.booleans(),
)
def test_quantize_against_scalar_formula_and_signed_twin(xs, scale, zp, half):
    t = F16 if half else F32
    x = np.array(xs, np.float16 if half else np.float32)
    got = run1(O.QUANTIZE, [tensor(t, x)], output(U8, x.shape, scale=scale, zero_point=zp))
    want = [
        min(255, max(0, zp + round_half_away(float(np.float32(v) / np.float32(scale))))) for v in x
    ]
    np.testing.assert_array_equal(got, want)
    signed = run1(O.QUANTIZE, [tensor(t, x)], output(S8, x.shape, scale=scale, zero_point=zp - 128))
    np.testing.assert_array_equal(signed.astype(int), got.astype(int) - 128)


# --- DEQUANTIZE --------------------------------------------------------------------------


@pytest.mark.parametrize("out_type", [F32, F16])
def test_dequantize_every_input_type(out_type):
    cases = [
        (U8, [0, 100, 255], 0.25, 100, [-25.0, 0.0, 38.75]),
        (S8, [-128, -28, 127], 0.25, -28, [-25.0, 0.0, 38.75]),
        (Q8S, [-127, 0, 127], 0.5, 0, [-63.5, 0.0, 63.5]),
    ]
    for t, q, scale, zp, want in cases:
        got = run1(O.DEQUANTIZE, [tensor(t, q, scale=scale, zero_point=zp)], output(out_type, (3,)))
        assert got.dtype == (np.float16 if out_type == F16 else np.float32)
        np.testing.assert_array_equal(got, want)


def test_dequantize_per_channel_any_channel_dim():
    q = np.arange(-12, 12, dtype=np.int8).reshape(2, 3, 4)
    for dim, scales in ((0, (0.5, 2.0)), (1, (1.0, 0.25, 4.0)), (2, (1.0, 2.0, 3.0, 0.125))):
        x = tensor(QPC, q, channel_quant=SymmPerChannelQuantParams(dim, scales))
        got = run1(O.DEQUANTIZE, [x], output(F32, q.shape))
        shape = [1, 1, 1]
        shape[dim] = -1
        np.testing.assert_array_equal(got, q * np.reshape(scales, shape))


def test_dequantize_float16_rounds_the_float32_product():
    # (255 - 0) * 0.1f = 25.5f (25.500000...) -> float16 25.5; 3 * 0.001f -> nearest half.
    got = run1(O.DEQUANTIZE, [tensor(U8, [255, 3], scale=0.1, zero_point=0)], output(F16, (2,)))
    want = (np.array([255, 3], np.float32) * np.float32(0.1)).astype(np.float16)
    np.testing.assert_array_equal(got, want)


@given(
    st.lists(st.integers(0, 255), min_size=1, max_size=20),
    st.floats(0.001, 10.0),
    st.integers(0, 255),
)
def test_dequantize_signed_twin_gives_the_same_reals(q, scale, zp):
    assert_signed_matches_unsigned(
        O.DEQUANTIZE, [tensor(U8, q, scale=scale, zero_point=zp)], [output(F32, (len(q),))]
    )


def test_quantize_dequantize_zero_sized():
    x = tensor(F32, np.zeros((0, 4), np.float32), declared_dims=(0, 4))
    q = run1(O.QUANTIZE, [x], output(U8, (0, 4), scale=0.5, zero_point=3))
    assert q.shape == (0, 4) and q.dtype == np.uint8
    d = run1(
        O.DEQUANTIZE,
        [tensor(U8, np.zeros((0, 4)), scale=0.5, declared_dims=(0, 4))],
        output(F32, (0, 4)),
    )
    assert d.shape == (0, 4)


# --- CAST --------------------------------------------------------------------------------


def test_cast_float_to_integer_truncates_and_saturates():
    x = [-1e10, -2.9, -0.5, 0.0, 2.9, 255.9, 256.0, 1e10, np.nan, np.inf, -np.inf]
    to_i32 = run1(O.CAST, [tensor(F32, x)], output(I32, (11,)))
    np.testing.assert_array_equal(
        to_i32, [-(2**31), -2, 0, 0, 2, 255, 256, 2**31 - 1, 0, 2**31 - 1, -(2**31)]
    )
    to_u8 = run1(O.CAST, [tensor(F32, x)], output(U8, (11,), scale=1.0))
    np.testing.assert_array_equal(to_u8, [0, 0, 0, 0, 2, 255, 255, 255, 0, 255, 0])
    # Values all within [0, 256]: 256 still saturates (no in-range shortcut wraps it).
    to_u8 = run1(O.CAST, [tensor(F32, [0.0, 255.9, 256.0])], output(U8, (3,), scale=1.0))
    np.testing.assert_array_equal(to_u8, [0, 255, 255])


def test_cast_float_to_integer_blocks_of_one_element_give_the_one_block_result():
    x = tensor(F32, [np.nan, 3.7, -0.5, 300.0, np.inf, 254.9, -1e10, 2.0])
    for out in (output(U8, (8,), scale=1.0), output(I32, (8,))):
        whole = run1(O.CAST, [x], out)
        with mock.patch.object(quantization, "_BLOCK_ELEMENTS", 1):
            np.testing.assert_array_equal(run1(O.CAST, [x], out), whole)


def test_cast_float16_to_quant8_needs_little_more_memory_than_its_input():
    # 16 MB of float16 out of uint8's range: the saturating conversion's float64
    # temporaries took 24 bytes an element of the whole input.
    x = np.random.default_rng(0).normal(0, 300, 1 << 23).astype(np.float16)
    got, peak = traced_peak(lambda: run1(O.CAST, [tensor(F16, x)], output(U8, x.shape, scale=1.0)))
    assert peak < x.nbytes + (24 << 20), f"peak {peak >> 20} MB"
    np.testing.assert_array_equal(got[:5], np.clip(np.trunc(x[:5]), 0, 255))


def test_cast_ignores_quantization_parameters():
    x = tensor(U8, [0, 7, 255], scale=0.5, zero_point=100)
    np.testing.assert_array_equal(run1(O.CAST, [x], output(F32, (3,))), [0.0, 7.0, 255.0])
    got = run1(O.CAST, [tensor(I32, [-5, 77, 1000])], output(U8, (3,), scale=3.0, zero_point=9))
    np.testing.assert_array_equal(got, [0, 77, 255])


def test_cast_int32_to_float16_rounds_and_overflows():
    got = run1(O.CAST, [tensor(I32, [2049, 2051, 70000, -70000])], output(F16, (4,)))
    np.testing.assert_array_equal(got, np.array([2048, 2052, np.inf, -np.inf], np.float16))


def test_cast_identity_types_copy_bytes():
    for t, vals, kw in [
        (B8, [True, False], {}),
        (Q16A, [0, 65535], {"scale": 0.5, "zero_point": 3}),
        (Q16S, [-32768, 32767], {"scale": 0.5}),
        (S8, [-128, 127], {"scale": 0.5, "zero_point": 1}),
        (Q8S, [-127, 5], {"scale": 0.5}),
    ]:
        got = run1(O.CAST, [tensor(t, vals, **kw)], output(t, (2,), **kw))
        np.testing.assert_array_equal(got, vals)


def test_cast_zero_sized():
    x = tensor(F32, np.zeros((3, 0), np.float32), declared_dims=(3, 0))
    assert run1(O.CAST, [x], output(I32, (3, 0))).shape == (3, 0)


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, i, o, version, ok",
    [
        (O.DEQUANTIZE, U8, F32, HalVersion.V1_0, True),
        (O.DEQUANTIZE, U8, F16, HalVersion.V1_1, False),
        (O.DEQUANTIZE, U8, F16, HalVersion.V1_2, True),
        (O.DEQUANTIZE, Q8S, F32, HalVersion.V1_1, False),
        (O.DEQUANTIZE, Q8S, F32, HalVersion.V1_2, True),
        (O.DEQUANTIZE, S8, F32, HalVersion.V1_2, False),
        (O.DEQUANTIZE, S8, F16, HalVersion.V1_3, True),
        (O.QUANTIZE, F32, U8, HalVersion.V1_1, False),
        (O.QUANTIZE, F16, U8, HalVersion.V1_2, True),
        (O.QUANTIZE, F32, S8, HalVersion.V1_2, False),
        (O.QUANTIZE, F32, S8, HalVersion.V1_3, True),
        (O.CAST, F32, I32, HalVersion.V1_1, False),
        (O.CAST, U8, F16, HalVersion.V1_2, True),
        (O.CAST, B8, B8, HalVersion.V1_2, False),
        (O.CAST, B8, B8, HalVersion.V1_3, True),
        (O.CAST, S8, S8, HalVersion.V1_3, True),
    ],
)
def test_signature_versions(op, i, o, version, ok):
    quant = (U8, S8, Q8S)
    x = tensor(i, [1, 0], scale=0.5 if i in quant else 0.0)
    out = output(o, (2,), scale=0.5 if o in quant else 0.0)
    if ok:
        accepts(op, [x], [out], version)
    else:
        rejects(op, [x], [out], version)


@pytest.mark.parametrize(
    "op, i, o",
    [(O.DEQUANTIZE, U8, I32), (O.DEQUANTIZE, I32, F32), (O.DEQUANTIZE, Q16S, F32),
     (O.QUANTIZE, I32, U8), (O.QUANTIZE, F32, Q8S), (O.QUANTIZE, U8, U8),
     (O.CAST, B8, I32), (O.CAST, S8, U8), (O.CAST, F32, S8), (O.CAST, Q16A, Q16S)],
)  # fmt: skip
def test_rejects_unsupported_type_pairs(op, i, o):
    quant = (U8, S8, Q8S, Q16A, Q16S)
    x = tensor(i, [1, 0], scale=0.5 if i in quant else 0.0)
    rejects(op, [x], [output(o, (2,), scale=0.5 if o in quant else 0.0)], match="no signature")


def test_dequantize_rejects_rank_5():
    x = tensor(U8, np.zeros((1, 1, 1, 1, 2)), scale=0.5)
    rejects(O.DEQUANTIZE, [x], [output(F32, (1, 1, 1, 1, 2))], match="rank")


@pytest.mark.parametrize(
    "case, deferrable, match",
    [
        # Dequantize.cpp's validate checks rank <= 4 when the rank is known.
        ((O.DEQUANTIZE, [tensor(U8, np.zeros((1, 1, 1, 1, 2)), scale=0.5)],
          [output(F32, (1, 1, 1, 1, 2))]), False, "input 0 must have rank 0..4"),
        # Types and versions: validate (Quantize.cpp, Cast.cpp).
        ((O.QUANTIZE, [tensor(I32, [1, 2])], [output(U8, (2,), scale=0.5)]),
         False, "no signature"),
        ((O.CAST, [tensor(S8, [1, 2], scale=0.5)], [output(U8, (2,), scale=0.5)]),
         False, "no signature"),
        # The output shape is prepare()'s.
        ((O.QUANTIZE, [tensor(F32, [1.0, 2.0])], [output(U8, (3,), scale=0.5)]),
         True, "declared"),
    ],
    ids=["dequantize-rank", "quantize-types", "cast-types", "output-shape"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(case, deferrable, match):
    assert_rejection(case, deferrable, match)
