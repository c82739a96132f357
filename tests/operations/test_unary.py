"""Kernel and validation tests for ABS, EXP, LOG, SIN, SQRT, RSQRT, NEG, FLOOR.

None of these has a quantized variant in HAL 1.3 (so no signed/unsigned property here);
the tests check values against Python's ``math`` (float64) within float32/float16
precision, special values, int32 wrapping, types per HAL version and zero-sized inputs.
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
from driver.testing import output, tensor
from tests.operations.test_elementwise import accepts, assert_rejection, rejects, run1

F32, F16, I32, U8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM

MATH = {
    O.ABS: abs,
    O.EXP: math.exp,
    O.LOG: math.log,
    O.SIN: math.sin,
    O.SQRT: math.sqrt,
    O.RSQRT: lambda x: 1 / math.sqrt(x),
    O.NEG: lambda x: -x,
    O.FLOOR: math.floor,
}
POSITIVE_ONLY = {O.LOG, O.SQRT, O.RSQRT}


def _values(op) -> np.ndarray:
    if op in POSITIVE_ONLY:
        return np.array([1e-3, 0.25, 1.0, 2.0, 3.5, 1e4], np.float32)
    return np.array([-7.25, -1.5, -0.5, 0.0, 0.75, 2.0, 10.5], np.float32)


@pytest.mark.parametrize("t, rtol", [(F32, 2e-7), (F16, 1e-3)], ids=["float32", "float16"])
@pytest.mark.parametrize("op", list(MATH), ids=lambda o: o.name)
def test_float_values_match_math(op, t, rtol):
    x = _values(op).astype(np.float16 if t == F16 else np.float32)
    got = run1(op, [tensor(t, x.reshape(1, 1, -1, 1))], output(t, (1, 1, x.size, 1)))
    assert got.dtype == x.dtype
    want = [MATH[op](float(v)) for v in x]
    np.testing.assert_allclose(got.ravel().astype(float), want, rtol=rtol, atol=1e-30)


@given(st.lists(st.floats(-80, 80, width=32), min_size=1, max_size=16))
def test_exp_sin_within_float32_ulps(xs):
    x = np.array(xs, np.float32)
    for op, fn in ((O.EXP, math.exp), (O.SIN, math.sin)):
        got = run1(op, [tensor(F32, x)], output(F32, x.shape)).astype(float)
        want = np.array([fn(float(v)) for v in x])
        # a few ulps of the result (sin near zero: absolute float32 epsilon scale)
        np.testing.assert_allclose(got, want, rtol=4 * 2**-23, atol=2**-24)


def test_special_values():
    x = tensor(F32, [0.0, -1.0, np.inf, np.nan])
    log = run1(O.LOG, [x], output(F32, (4,)))
    assert log[0] == -np.inf and math.isnan(log[1]) and log[2] == np.inf and math.isnan(log[3])
    sqrt = run1(O.SQRT, [x], output(F32, (4,)))
    assert sqrt[0] == 0.0 and math.isnan(sqrt[1]) and sqrt[2] == np.inf
    rsqrt = run1(O.RSQRT, [x], output(F32, (4,)))
    assert rsqrt[0] == np.inf and math.isnan(rsqrt[1]) and rsqrt[2] == 0.0
    exp = run1(O.EXP, [tensor(F32, [-np.inf, 89.0, 100.0])], output(F32, (3,)))
    np.testing.assert_array_equal(exp, [0.0, np.inf, np.inf])
    # float16: exp(12) = 162755 overflows the float16 range after the float32 result.
    exp16 = run1(O.EXP, [tensor(F16, [12.0, -20.0])], output(F16, (2,)))
    assert exp16[0] == np.inf and exp16[1] == np.float16(math.exp(-20))


def test_rsqrt_is_one_over_sqrt():
    # sqrt(-0.0) is -0.0 (IEEE), so 1.f / std::sqrt(x) gives -inf there.
    got = run1(O.RSQRT, [tensor(F32, [-0.0, 0.0, 4.0])], output(F32, (3,)))
    np.testing.assert_array_equal(got, [-np.inf, np.inf, 0.5])


def test_float16_math_rounds_once_from_float32():
    # RSQRT(1 + 2**-10) = 0.99951208 is 1 - 2**-11 in float16. Rounding sqrt to float16
    # first (1.00048828 is a tie between 1 and 1 + 2**-10, to even: 1) would give 1.0.
    x = np.float16(1 + 2**-10)
    got = run1(O.RSQRT, [tensor(F16, [x])], output(F16, (1,)))
    assert got[0] == np.float16(1 - 2**-11)


def test_floor_rounds_toward_negative_infinity():
    got = run1(
        O.FLOOR, [tensor(F32, [-2.5, -0.0, -1e-8, 1e-8, 3.999, 16777216.0])], output(F32, (6,))
    )
    np.testing.assert_array_equal(got, [-3.0, -0.0, -1.0, 0.0, 3.0, 16777216.0])


def test_int32_abs_and_neg_wrap():
    x = tensor(I32, [-(2**31), -5, 0, 2**31 - 1])
    np.testing.assert_array_equal(run1(O.ABS, [x], output(I32, (4,))), [-(2**31), 5, 0, 2**31 - 1])
    np.testing.assert_array_equal(run1(O.NEG, [x], output(I32, (4,))), [-(2**31), 5, 0, 1 - 2**31])


@pytest.mark.parametrize("op", list(MATH), ids=lambda o: o.name)
def test_zero_sized_input_is_rejected(op):
    x = tensor(F32, np.zeros((2, 0), np.float32), declared_dims=(2, 0))
    with pytest.raises(HalError, match="zero-sized"):
        run1(op, [x], output(F32, (2, 0)))


@pytest.mark.parametrize(
    "op, t, version, ok",
    [
        (O.FLOOR, F32, HalVersion.V1_0, True),
        (O.FLOOR, F16, HalVersion.V1_1, False),
        (O.FLOOR, F16, HalVersion.V1_2, True),
        (O.ABS, F32, HalVersion.V1_1, False),
        (O.ABS, F32, HalVersion.V1_2, True),
        (O.ABS, I32, HalVersion.V1_2, False),
        (O.ABS, I32, HalVersion.V1_3, True),
        (O.NEG, I32, HalVersion.V1_2, True),
        (O.EXP, F16, HalVersion.V1_1, False),
        (O.RSQRT, F32, HalVersion.V1_2, True),
    ],
)
def test_signature_versions(op, t, version, ok):
    x = tensor(t, [1, 2])
    if ok:
        accepts(op, [x], [output(t, (2,))], version)
    else:
        rejects(op, [x], [output(t, (2,))], version)


@pytest.mark.parametrize(
    "op, t",
    [(O.EXP, I32), (O.LOG, I32), (O.SIN, U8), (O.SQRT, I32), (O.RSQRT, U8), (O.FLOOR, I32),
     (O.ABS, U8), (O.NEG, U8)],
)  # fmt: skip
def test_rejects_unsupported_types(op, t):
    x = tensor(t, [1, 2], scale=0.5 if t == U8 else 0.0)
    rejects(op, [x], [output(t, (2,), scale=0.5 if t == U8 else 0.0)], match="no signature")


def test_floor_rank_limit_only_on_floor():
    x5 = tensor(F32, np.full((1, 1, 1, 1, 2), -1.5, np.float32))
    rejects(O.FLOOR, [x5], [output(F32, (1, 1, 1, 1, 2))], match="rank")
    got = run1(O.ABS, [x5], output(F32, (1, 1, 1, 1, 2)))
    np.testing.assert_array_equal(got.ravel(), [1.5, 1.5])


def test_rejects_output_type_mismatch():
    rejects(O.NEG, [tensor(F32, [1.0])], [output(F16, (1,))], match="no signature")


_X5 = tensor(F32, np.zeros((1, 1, 1, 1, 2), np.float32))


@pytest.mark.parametrize(
    "case, deferrable, match",
    [
        # Elementwise.cpp's validateFloor checks rank <= 4 when the rank is known.
        ((O.FLOOR, [_X5], [output(F32, (1, 1, 1, 1, 2))]), False, "input 0 must have rank 0..4"),
        # Types and versions: validate.
        ((O.SQRT, [tensor(I32, [1, 2])], [output(I32, (2,))]), False, "no signature"),
        ((O.NEG, [tensor(F32, [1.0])], [output(F16, (1,))]), False, "no signature"),
        # The output shape is prepare()'s.
        ((O.EXP, [tensor(F32, [1.0, 2.0])], [output(F32, (3,))]), True, "declared"),
    ],
    ids=["floor-rank", "types", "output-type", "output-shape"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(case, deferrable, match):
    assert_rejection(case, deferrable, match)
