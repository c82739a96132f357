"""Kernel and validation tests for ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, POW, PRELU.

Quantized kernels are checked three ways: hand-computed tables, a scalar pure-Python
transcription of Android's integer recipes (``ref_*`` below: a different formulation
from the vectorized kernels and their lookup tables), and the float result within one
quantization step. The signed = unsigned - 128 property is checked for every op.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.builder import ModelBuilder
from driver.executor import Executor
from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import elementwise
from driver.testing import assert_rejected, output, run_op, scalar, single_op_model, tensor
from driver.validation import validate_model

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
U8, S8, B8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_BOOL8
FLT_MAX = float(np.finfo(np.float32).max)


def run1(op, inputs, out, **kw) -> np.ndarray:
    (result,) = run_op(op, inputs, [out], **kw)
    return result


def act(code: int):
    return scalar(T.INT32, code)


def rejects(op, inputs, outputs, version=HalVersion.V1_3, match: str = "") -> str:
    """Assert that validation rejects the one-operation model; return the message."""
    model, _ = single_op_model(op, inputs, outputs)
    with pytest.raises(HalError) as info:
        validate_model(model, version)
    assert info.value.status == ErrorStatus.INVALID_ARGUMENT
    assert match in str(info.value), str(info.value)
    return str(info.value)


def assert_rejection(case, deferrable: bool, match: str) -> None:
    """``case`` = (op, inputs, outputs[, version]) is rejected, ``deferrable`` as expected (Android
    11's validation leaves the rule to execution), with a message matching ``match``."""
    op, inputs, outputs, *version = case
    model, _ = single_op_model(op, inputs, outputs)
    assert_rejected(
        model,
        deferrable=deferrable,
        match=match,
        version=version[0] if version else HalVersion.V1_3,
    )


def accepts(op, inputs, outputs, version=HalVersion.V1_3) -> None:
    model, _ = single_op_model(op, inputs, outputs)
    validate_model(model, version)


# ---------------------------------------------------------------------------------------
# Signed = unsigned - 128 (shared with the other families' tests)
# ---------------------------------------------------------------------------------------


def to_signed(arg):
    """The TENSOR_QUANT8_ASYMM_SIGNED twin of a TENSOR_QUANT8_ASYMM tensor/output spec."""
    from driver.testing import OutputSpec, TensorArg

    if isinstance(arg, TensorArg) and arg.type == U8:
        values = (arg.values.astype(np.int16) - 128).astype(np.int8)
        return tensor(S8, values, scale=arg.scale, zero_point=arg.zero_point - 128, const=arg.const)
    if isinstance(arg, OutputSpec) and arg.type == U8:
        return output(S8, arg.dims, scale=arg.scale, zero_point=arg.zero_point - 128)
    return arg


def assert_signed_matches_unsigned(op, inputs, outputs) -> None:
    """Running the signed twin of a quant8 model gives the unsigned results - 128
    (booleans and float outputs: identical)."""
    unsigned = run_op(op, inputs, outputs)
    signed = run_op(op, [to_signed(a) for a in inputs], [to_signed(o) for o in outputs])
    for u, s in zip(unsigned, signed):
        if u.dtype == np.uint8:
            assert s.dtype == np.int8
            np.testing.assert_array_equal(s.astype(np.int16), u.astype(np.int16) - 128)
        else:
            np.testing.assert_array_equal(s, u)


# ---------------------------------------------------------------------------------------
# Scalar reference of Android's integer recipes (pure Python ints)
# ---------------------------------------------------------------------------------------


def ref_quantize_multiplier(d: float) -> tuple[int, int]:
    if d == 0:
        return 0, 0
    q, shift = math.frexp(d)
    q_fixed = math.floor(q * 2**31 + 0.5)
    if q_fixed == 2**31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def ref_srdhm(a: int, b: int) -> int:
    if a == b == -(2**31):
        return 2**31 - 1
    t = a * b + ((1 << 30) if a * b >= 0 else 1 - (1 << 30))
    return t // 2**31 if t >= 0 else -((-t) // 2**31)


def ref_rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def ref_mbqm(x: int, m: int, shift: int) -> int:
    x = x * (1 << max(shift, 0))
    x = (x + 2**31) % 2**32 - 2**31
    return ref_rdbpot(ref_srdhm(x, m), max(-shift, 0))


def ref_act_range(code: int, scale: float, zp: int) -> tuple[int, int]:
    def q(f):
        r = float(np.float32(f) / np.float32(scale))
        return zp + int(math.copysign(math.floor(abs(r) + 0.5), r))

    lo, hi = {0: (0, 255), 1: (max(0, q(0)), 255), 2: (max(0, q(-1)), min(255, q(1)))}.get(
        code, (max(0, q(0)), min(255, q(6)))
    )
    return lo, hi


def ref_add(a, b, s1, z1, s2, z2, so, zo, code, subtract=False) -> int:
    twice = 2.0 * max(s1, s2)
    m1, e1 = ref_quantize_multiplier(s1 / twice)
    m2, e2 = ref_quantize_multiplier(s2 / twice)
    mo, eo = ref_quantize_multiplier(twice / ((1 << 20) * so))
    if subtract:
        m2 = -m2
    y1 = ref_mbqm((a - z1) << 20, m1, e1)
    y2 = ref_mbqm((b - z2) << 20, m2, e2)
    lo, hi = ref_act_range(code, so, zo)
    return min(hi, max(lo, ref_mbqm(y1 + y2, mo, eo) + zo))


def ref_mul(a, b, s1, z1, s2, z2, so, zo, code) -> int:
    m, e = ref_quantize_multiplier(float(np.float32(s1) * np.float32(s2)) / so)
    lo, hi = ref_act_range(code, so, zo)
    return min(hi, max(lo, ref_mbqm((a - z1) * (b - z2), m, e) + zo))


def ref_prelu(x, alpha, s1, z1, s2, z2, so, zo) -> int:
    if x - z1 >= 0:
        m, e = ref_quantize_multiplier(float(np.float32(s1) / np.float32(so)))
        raw = ref_mbqm(x - z1, m, e)
    else:
        m, e = ref_quantize_multiplier(float(np.float32(s1) * np.float32(s2)) / so)
        raw = ref_mbqm((x - z1) * (alpha - z2), m, e)
    return min(255, max(0, raw + zo))


def ref_requantize(v, s, z, so, zo) -> int:
    real = float(np.float32(v - z) * np.float32(s))
    r = real / so + zo
    if r < 0:
        return 0
    if r > 255:
        return 255
    return math.floor(r + 0.5)


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

scales = st.floats(0.01, 2.0).map(lambda s: float(np.float32(s)))
zero_points = st.integers(0, 255)
codes = st.integers(0, 3)
byte_rows = st.lists(st.integers(0, 255), min_size=1, max_size=12)


@st.composite
def quant_pair(draw):
    """Two uint8 tensors of shapes (n,) and (n,) or (1,) (broadcast)."""
    a = draw(byte_rows)
    b = draw(
        st.one_of(
            st.just([draw(st.integers(0, 255))]),
            st.lists(st.integers(0, 255), min_size=len(a), max_size=len(a)),
        )
    )
    return np.array(a, np.uint8), np.array(b, np.uint8)


@contextlib.contextmanager
def table_path(on: bool):
    """Force lookup_binary's 256x256-table path (on) or leave its size rule (off)."""
    saved = elementwise.BINARY_TABLE_MIN_ELEMENTS
    elementwise.BINARY_TABLE_MIN_ELEMENTS = 0 if on else saved
    try:
        yield
    finally:
        elementwise.BINARY_TABLE_MIN_ELEMENTS = saved


both_paths = pytest.mark.parametrize("table", [False, True], ids=["direct", "table"])


# ---------------------------------------------------------------------------------------
# Float tables
# ---------------------------------------------------------------------------------------

X4 = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) - 10.5  # rank 4, no zero
R1 = np.array([1.0, -2.0, 0.5, 4.0], dtype=np.float32)  # rank 1, broadcast on the last dim


@pytest.mark.parametrize(
    "op, fn",
    [
        (O.ADD, lambda a, b: a + b),
        (O.SUB, lambda a, b: a - b),
        (O.MUL, lambda a, b: a * b),
        (O.DIV, lambda a, b: a / b),
        (O.MAXIMUM, max),
        (O.MINIMUM, min),
        (O.PRELU, lambda x, a: x if x >= 0 else x * a),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
@pytest.mark.parametrize("order", ["rank4_rank1", "rank1_rank4"])
def test_float32_broadcast_rank1_with_rank4(op, fn, order):
    a, b = (X4, R1) if order == "rank4_rank1" else (R1, X4)
    extra = [act(0)] if op in (O.ADD, O.SUB, O.MUL, O.DIV) else []
    got = run1(op, [tensor(F32, a), tensor(F32, b), *extra], output(F32, (1, 2, 3, 4)))
    aa, bb = np.broadcast_arrays(a, b)
    want = np.array([fn(float(x), float(y)) for x, y in zip(aa.ravel(), bb.ravel())])
    np.testing.assert_allclose(got.ravel(), want, rtol=1e-6)


def test_pow_broadcast_and_special_values():
    base = np.array([[2.0, -8.0, 0.0, 9.0]], np.float32)
    exp = np.array([[3.0], [0.5]], np.float32)
    got = run1(O.POW, [tensor(F32, base), tensor(F32, exp)], output(F32, (2, 4)))
    want = [[8.0, -512.0, 0.0, 729.0], [math.sqrt(2), math.nan, 0.0, 3.0]]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_float16_computes_in_float32_and_rounds():
    # 1 + 2^-11 is a float16 tie: the exact sum rounds to even (1.0); 1 + 3*2^-11 -> up.
    a = tensor(F16, [1.0, 1.0, 60000.0, 2.0])
    b = tensor(F16, [2.0**-11, 3 * 2.0**-11, 60000.0, 3.0])
    got = run1(O.ADD, [a, b, act(0)], output(F16, (4,)))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.array([1.0, 1.0 + 2.0**-9, np.inf, 5.0], np.float16))
    got = run1(O.DIV, [tensor(F16, [1.0, 2.0]), tensor(F16, [3.0, 0.0]), act(0)], output(F16, (2,)))
    np.testing.assert_array_equal(got, np.array([1 / 3, np.inf], np.float16))


@pytest.mark.parametrize(
    "code, want",
    [
        (0, [-7.5, -1.0, -0.5, 0.0, 0.5, 2.0, 9.0]),
        (1, [0.0, 0.0, 0.0, 0.0, 0.5, 2.0, 9.0]),
        (2, [-1.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0]),
        (3, [0.0, 0.0, 0.0, 0.0, 0.5, 2.0, 6.0]),
    ],
)
@pytest.mark.parametrize("float_type", [F32, F16])
def test_fused_activation_float(code, want, float_type):
    a = tensor(float_type, [-8.0, -1.5, -1.0, 0.0, 0.25, 1.0, 4.5])
    b = tensor(float_type, [0.5, 0.5, 0.5, 0.0, 0.25, 1.0, 4.5])
    got = run1(O.ADD, [a, b, act(code)], output(float_type, (7,)))
    np.testing.assert_array_equal(got, np.array(want, got.dtype))
    # MUL/SUB/DIV share the clamp: a * 1, a - 0, a / 1 give the same rows.
    one = tensor(float_type, [1.0])
    got_mul = run1(O.MUL, [tensor(float_type, want), one, act(code)], output(float_type, (7,)))
    np.testing.assert_array_equal(got_mul, np.array(want, got.dtype))


def test_float32_activation_clamps_infinity_like_android():
    # CalculateActivationRangeFloat bounds are +-FLT_MAX even for NONE; NaN propagates.
    a = tensor(F32, [FLT_MAX, -FLT_MAX, np.nan, 1.0])
    b = tensor(F32, [FLT_MAX, -FLT_MAX, 1.0, 0.0])
    got = run1(O.ADD, [a, b, act(0)], output(F32, (4,)))
    np.testing.assert_array_equal(got[:2], [FLT_MAX, -FLT_MAX])
    assert math.isnan(got[2]) and got[3] == 1.0
    got = run1(
        O.DIV, [tensor(F32, [1.0, -1.0]), tensor(F32, [0.0, 0.0]), act(1)], output(F32, (2,))
    )
    np.testing.assert_array_equal(got, [FLT_MAX, 0.0])


def test_max_min_nan_follows_std_max_min():
    # std::max(a, b) = a < b ? b : a; std::min(a, b) = b < a ? b : a: NaN only from a.
    a = tensor(F32, [np.nan, 1.0, 2.0])
    b = tensor(F32, [1.0, np.nan, 3.0])
    mx = run1(O.MAXIMUM, [a, b], output(F32, (3,)))
    mn = run1(O.MINIMUM, [a, b], output(F32, (3,)))
    assert math.isnan(mx[0]) and mx[1] == 1.0 and mx[2] == 3.0
    assert math.isnan(mn[0]) and mn[1] == 1.0 and mn[2] == 2.0


def test_prelu_nonfinite_alpha_keeps_nonnegative_inputs():
    got = run1(
        O.PRELU,
        [tensor(F32, [2.0, 0.0, -1.0, -2.0]), tensor(F32, [np.inf, np.nan, np.inf, 0.5])],
        output(F32, (4,)),
    )
    np.testing.assert_array_equal(got, [2.0, 0.0, -np.inf, -1.0])


@pytest.mark.parametrize("op", [O.ADD, O.SUB, O.MUL, O.DIV])
def test_zero_sized_input_is_allowed_for_arithmetic(op):
    a = tensor(F32, np.zeros((2, 0, 3), np.float32), declared_dims=(2, 0, 3))
    got = run1(op, [a, tensor(F32, [1.0, 2.0, 3.0]), act(1)], output(F32, (2, 0, 3)))
    assert got.shape == (2, 0, 3) and got.dtype == np.float32


@pytest.mark.parametrize("op", [O.MAXIMUM, O.MINIMUM, O.POW, O.PRELU])
def test_zero_sized_input_is_rejected_where_android_does(op):
    a = tensor(F32, np.zeros((0, 3), np.float32), declared_dims=(0, 3))
    with pytest.raises(HalError, match="zero-sized"):
        run1(op, [a, tensor(F32, [1.0, 2.0, 3.0])], output(F32, (0, 3)))


# The rank rule (OperationContext.check_rank, shared by every family) holds for inputs
# whose dimensions are only partly known: rank 5 is known from [0, 1, 1, 1, 2], as Android's
# hasKnownRank checks see it. Only an unknown rank (no dimensions) defers it to run time.
_RANK_RULE_CASES = [  # operation, type of input 0, the inputs after it
    (O.ADD, F32, [tensor(F32, [1.0, 2.0]), act(0)]),
    (O.FLOOR, F32, []),
    (O.RELU, F32, []),
    (O.DEQUANTIZE, U8, []),
]


def _partly_known(t: int, dims: tuple[int, ...]):
    values = np.ones([d or 1 for d in dims])
    if t == U8:
        return tensor(U8, values.astype(np.uint8), scale=0.5, declared_dims=dims)
    return tensor(t, values.astype(np.float32), declared_dims=dims)


@pytest.mark.parametrize(
    "op, t, rest", _RANK_RULE_CASES, ids=[op.name for op, _, _ in _RANK_RULE_CASES]
)
@pytest.mark.parametrize("rank5", [(0, 1, 1, 1, 2), (1, 1, 0, 1, 2)])
def test_rank_rule_applies_to_partly_unknown_dimensions(op, t, rest, rank5):
    rejects(op, [_partly_known(t, rank5), *rest], [output(F32)], match="must have rank 0..4")
    accepts(op, [_partly_known(t, (0, 1, 1, 2)), *rest], [output(F32)])


# ---------------------------------------------------------------------------------------
# Int32
# ---------------------------------------------------------------------------------------

IMAX, IMIN = 2**31 - 1, -(2**31)


@pytest.mark.parametrize(
    "op, a, b, want",
    [
        (O.ADD, [IMAX, IMIN, 5], [1, -1, -7], [IMIN, IMAX, -2]),
        (O.SUB, [IMIN, 0, 3], [1, IMIN, 10], [IMAX, IMIN, -7]),
        (O.MUL, [65536, -3, 46341], [65536, 7, 46341], [0, -21, IMIN + 4633]),
        (O.DIV, [9, -9, 9, -9, 0, IMIN, 4], [4, 4, -4, -4, 3, -1, 0], [2, -3, -3, 2, 0, IMIN, 0]),
        (O.MAXIMUM, [IMIN, 3, -3], [IMAX, 2, -2], [IMAX, 3, -2]),
        (O.MINIMUM, [IMIN, 3, -3], [IMAX, 2, -2], [IMIN, 2, -3]),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_int32_wraps_and_floors(op, a, b, want):
    extra = [act(0)] if op in (O.ADD, O.SUB, O.MUL, O.DIV) else []
    got = run1(op, [tensor(I32, a), tensor(I32, b), *extra], output(I32, (len(a),)))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_int32_broadcast():
    got = run1(
        O.MUL,
        [tensor(I32, np.arange(6).reshape(1, 2, 3, 1)), tensor(I32, [2, -1]), act(0)],
        output(I32, (1, 2, 3, 2)),
    )
    np.testing.assert_array_equal(got[0, :, :, 0], np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(got[0, :, :, 1], -np.arange(6).reshape(2, 3))


# ---------------------------------------------------------------------------------------
# Quant8: hand tables, saturation, activation fusion
# ---------------------------------------------------------------------------------------


def q(values, scale, zp, t=U8):
    return tensor(t, values, scale=scale, zero_point=zp)


def test_quant8_add_different_scales_hand_computed():
    # a: scale 0.5 zp 10 -> reals [0, 1, -5, 20]; b: scale 0.25 zp 100 -> [1, -1, 0.75, -25]
    # sums [1, 0, -4.25, -5] at scale 1.0 zp 50 -> [51, 50, 45.75 -> 46, 45]
    got = run1(
        O.ADD,
        [q([10, 12, 0, 50], 0.5, 10), q([104, 96, 103, 0], 0.25, 100), act(0)],
        output(U8, (4,), scale=1.0, zero_point=50),
    )
    np.testing.assert_array_equal(got, [51, 50, 46, 45])


def test_quant8_sub_and_mul_hand_computed():
    a, b = q([130, 120, 140], 0.5, 128), q([129, 132, 120], 0.5, 128)  # [1, -4, 6], [0.5, 2, -4]
    got = run1(O.SUB, [a, b, act(0)], output(U8, (3,), scale=0.5, zero_point=128))
    np.testing.assert_array_equal(got, [129, 116, 148])  # [0.5, -6, 10]
    got = run1(O.MUL, [a, b, act(0)], output(U8, (3,), scale=0.5, zero_point=128))
    np.testing.assert_array_equal(got, [129, 112, 80])  # [0.5, -8, -24]


@pytest.mark.parametrize("t", [U8, S8])
def test_quant8_saturates_at_range_ends(t):
    lo, hi = (0, 255) if t == U8 else (-128, 127)
    zp = 128 if t == U8 else 0
    a = q([hi, lo, hi], 1.0, zp, t)
    b = q([hi, lo, lo], 1.0, zp, t)
    got = run1(O.ADD, [a, b, act(0)], output(t, (3,), scale=1.0, zero_point=zp))
    np.testing.assert_array_equal(got, [hi, lo, zp - 1])  # 127+127, -128-128, 127-128
    got = run1(O.MUL, [a, b, act(0)], output(t, (3,), scale=2.0, zero_point=zp))
    np.testing.assert_array_equal(got, [hi, hi, lo])  # 127^2/2, 128^2/2, -127*128/2
    got = run1(O.SUB, [a, b, act(0)], output(t, (3,), scale=1.0, zero_point=zp))
    np.testing.assert_array_equal(got, [zp, zp, hi])


@pytest.mark.parametrize(
    "code, want",
    [(0, [88, 118, 126, 130, 138, 160]), (1, [128, 128, 128, 130, 138, 160]),
     (2, [124, 124, 126, 130, 132, 132]), (3, [128, 128, 128, 130, 138, 152])],
)  # fmt: skip
def test_fused_activation_quant8(code, want):
    # reals a + b at output scale 0.25 zp 128: [-10, -2.5, -0.5, 0.5, 2.5, 8]
    a = q([108, 123, 127, 129, 133, 144], 0.5, 128)  # [-10, -2.5, -0.5, 0.5, 2.5, 8]
    b = q([128] * 6, 0.5, 128)
    got = run1(O.ADD, [a, b, act(code)], output(U8, (6,), scale=0.25, zero_point=128))
    np.testing.assert_array_equal(got, want)
    signed = run1(
        O.ADD,
        [to_signed(a), to_signed(b), act(code)],
        output(S8, (6,), scale=0.25, zero_point=0),
    )
    np.testing.assert_array_equal(signed.astype(int), np.array(want) - 128)


def test_quant8_max_min_requantize_hand_computed():
    # a: scale 1 zp 0 -> [3, 10]; b: scale 0.5 zp 20 -> [2.5, 12]; output scale 2 zp 1
    a, b = q([3, 10], 1.0, 0), q([25, 44], 0.5, 20)
    got = run1(O.MAXIMUM, [a, b], output(U8, (2,), scale=2.0, zero_point=1))
    np.testing.assert_array_equal(got, [3, 7])  # max [3, 12] -> 1.5 -> 2 (+1), 6 (+1)
    got = run1(O.MINIMUM, [a, b], output(U8, (2,), scale=2.0, zero_point=1))
    np.testing.assert_array_equal(got, [2, 6])  # min [2.5, 10] -> 1.25 -> 1 (+1), 5 (+1)


@pytest.mark.parametrize("op", [O.MAXIMUM, O.MINIMUM])
def test_quant8_requantize_rounds_negative_ties_like_the_unsigned_kernel(op):
    # Centered -7, -5, 9 at scale 0.5 are -3.5, -2.5, 4.5: exact ties at output scale 1.
    # Unsigned (zero point 128): 124.5, 125.5, 132.5 round up to 125, 126, 133; the signed
    # twin is those - 128 (-3, -2, 5), not std::round(-3.5) = -4 and round(-2.5) = -3.
    a = q([121, 123, 137], 0.5, 128)
    out = output(U8, (3,), scale=1.0, zero_point=128)
    np.testing.assert_array_equal(run1(op, [a, a], out), [125, 126, 133])
    assert_signed_matches_unsigned(op, [a, a], [out])


def test_quant8_prelu_hand_computed():
    # x scale 0.5 zp 100: [-10, -1, 0, 3]; alpha scale 0.125 zp 0: [0.25, 0.5, 1, 2]
    got = run1(
        O.PRELU,
        [q([80, 98, 100, 106], 0.5, 100), q([2, 4, 8, 16], 0.125, 0)],
        output(U8, (4,), scale=0.25, zero_point=50),
    )
    np.testing.assert_array_equal(got, [40, 48, 50, 62])  # [-2.5, -0.5, 0, 3]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize(
    "s1, s2, so",
    [(1e30, 1e19, 1.0),  # x scale * alpha scale overflows float32
     (1e30, 1.0, 1e-30)],  # x scale / output scale does
)  # fmt: skip
def test_quant8_prelu_scales_overflowing_a_multiplier_fail_the_run(s1, s2, so):
    # Valid scales, but Android's QuantizeMultiplier fails on the infinite multiplier: the
    # operation fails at execution. (MUL's validation already rejects such scales.)
    inputs = [q([80, 98], s1, 100), q([2, 4], s2, 0)]
    model, feeds = single_op_model(O.PRELU, inputs, [output(U8, (2,), scale=so)])
    validate_model(model)
    with pytest.raises(HalError) as e:
        Executor(model).run(feeds)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE
    assert e.value.message.startswith("main subgraph, operation 0 (PRELU): ")
    assert "multiplier is inf" in e.value.message


# ---------------------------------------------------------------------------------------
# Quant8: scalar reference, float reference, signed twin
# ---------------------------------------------------------------------------------------


@both_paths
@given(pair=quant_pair(), s1=scales, z1=zero_points, s2=scales, z2=zero_points, so=scales,
       zo=zero_points, code=codes, op=st.sampled_from([O.ADD, O.SUB]))  # fmt: skip
def test_quant8_add_sub_match_scalar_reference(table, pair, s1, z1, s2, z2, so, zo, code, op):
    with table_path(table):
        a, b = pair
        got = run1(
            op,
            [q(a, s1, z1), q(b, s2, z2), act(code)],
            output(U8, a.shape, scale=so, zero_point=zo),
        )
        bb = np.broadcast_to(b, a.shape)
        want = [
            ref_add(int(x), int(y), s1, z1, s2, z2, so, zo, code, op == O.SUB)
            for x, y in zip(a, bb)
        ]
        np.testing.assert_array_equal(got, want)
        # ... and within one step of the float result.
        real = (a.astype(float) - z1) * s1 + (1 if op == O.ADD else -1) * (
            bb.astype(float) - z2
        ) * s2
        lo, hi = ref_act_range(code, so, zo)
        approx = np.clip(np.round(real / so) + zo, lo, hi)
        assert np.abs(got.astype(int) - approx).max() <= 1


def test_sub_negates_the_multiplier_not_the_result():
    # s2 / (2 * s1) quantizes to a multiplier = 2^10 mod 2^11, so (b - z2) << 20 times it
    # is an exact SaturatingRoundingDoublingHighMul tie, where x * (-m) (Android) and
    # -(x * m) round apart. Reals: (a - 128) - (-1) * (0.5 + 2^-21) = a - 127.4999995,
    # which rounds to a - 127 (q = a + 1); negating the rescaled value would give q = a.
    s2 = 0.5 + 2.0**-21
    m, _ = ref_quantize_multiplier(s2 / 2.0)
    assert m % 2**11 == 2**10
    a = np.array([0, 1, 100, 200], np.uint8)
    got = run1(
        O.SUB,
        [q(a, 1.0, 128), q([127], s2, 128), act(0)],
        output(U8, (4,), scale=1.0, zero_point=128),
    )
    np.testing.assert_array_equal(got, a.astype(int) + 1)


@both_paths
@given(pair=quant_pair(), s1=scales, z1=zero_points, s2=scales, z2=zero_points,
       factor=st.floats(1.01, 50.0), zo=zero_points, code=codes)  # fmt: skip
def test_quant8_mul_matches_scalar_reference(table, pair, s1, z1, s2, z2, factor, zo, code):
    with table_path(table):
        a, b = pair
        so = float(np.float32(s1 * s2 * factor))
        got = run1(
            O.MUL,
            [q(a, s1, z1), q(b, s2, z2), act(code)],
            output(U8, a.shape, scale=so, zero_point=zo),
        )
        bb = np.broadcast_to(b, a.shape)
        want = [ref_mul(int(x), int(y), s1, z1, s2, z2, so, zo, code) for x, y in zip(a, bb)]
        np.testing.assert_array_equal(got, want)
        real = (a.astype(float) - z1) * s1 * (bb.astype(float) - z2) * s2
        lo, hi = ref_act_range(code, so, zo)
        assert np.abs(got.astype(int) - np.clip(np.round(real / so) + zo, lo, hi)).max() <= 1


@both_paths
@given(pair=quant_pair(), s1=scales, z1=zero_points, s2=scales, z2=zero_points, so=scales,
       zo=zero_points)  # fmt: skip
def test_quant8_prelu_max_min_match_scalar_reference(table, pair, s1, z1, s2, z2, so, zo):
    with table_path(table):
        a, b = pair
        bb = np.broadcast_to(b, a.shape)
        ins = [q(a, s1, z1), q(b, s2, z2)]
        out = output(U8, a.shape, scale=so, zero_point=zo)
        got = run1(O.PRELU, ins, out)
        want = [ref_prelu(int(x), int(y), s1, z1, s2, z2, so, zo) for x, y in zip(a, bb)]
        np.testing.assert_array_equal(got, want)
        ra = [ref_requantize(int(x), s1, z1, so, zo) for x in a]
        rb = [ref_requantize(int(y), s2, z2, so, zo) for y in bb]
        np.testing.assert_array_equal(run1(O.MAXIMUM, ins, out), np.maximum(ra, rb))
        np.testing.assert_array_equal(run1(O.MINIMUM, ins, out), np.minimum(ra, rb))


@both_paths
@given(pair=quant_pair(), s1=scales, z1=zero_points, s2=scales, z2=zero_points, zo=zero_points,
       code=codes, op=st.sampled_from([O.ADD, O.SUB, O.MUL, O.MAXIMUM, O.MINIMUM, O.PRELU]))  # fmt: skip
def test_quant8_signed_is_unsigned_minus_128(table, pair, s1, z1, s2, z2, zo, code, op):
    with table_path(table):
        a, b = pair
        so = float(np.float32(s1 * s2 * 1.5)) if op == O.MUL else 0.05
        extra = [act(code)] if op in (O.ADD, O.SUB, O.MUL) else []
        assert_signed_matches_unsigned(
            op, [q(a, s1, z1), q(b, s2, z2), *extra], [output(U8, a.shape, scale=so, zero_point=zo)]
        )


def test_large_tensors_use_the_table_and_agree_with_direct(monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (2, 128, 300), dtype=np.uint8)  # 76800 >= table threshold
    b = rng.integers(0, 256, (300,), dtype=np.uint8)
    ins = [q(a, 0.3, 7), q(b, 0.07, 200), act(1)]
    out = output(U8, a.shape, scale=0.4, zero_point=30)
    via_table = run1(O.ADD, ins, out)
    monkeypatch.setattr(elementwise, "BINARY_TABLE_MIN_ELEMENTS", 10**9)
    np.testing.assert_array_equal(run1(O.ADD, ins, out), via_table)


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------

F2 = tensor(F32, [1.0, 2.0])


@pytest.mark.parametrize("code", [-1, 4, 100])
@pytest.mark.parametrize("op", [O.ADD, O.SUB, O.MUL, O.DIV])
def test_rejects_bad_activation_code(op, code):
    rejects(op, [F2, F2, act(code)], [output(F32, (2,))], match="fused activation")


@pytest.mark.parametrize("op", [O.ADD, O.SUB, O.MUL, O.DIV])
def test_rejects_activation_on_int32(op):
    i2 = tensor(I32, [1, 2])
    rejects(op, [i2, i2, act(1)], [output(I32, (2,))], match="TENSOR_INT32")
    accepts(op, [i2, i2, act(0)], [output(I32, (2,))])


def test_rejects_bad_activation_given_at_run_time():
    model, feeds = single_op_model(
        O.ADD, [F2, F2, scalar(T.INT32, 7, as_input=True)], [output(F32, (2,))]
    )
    validate_model(model)  # the value is not known yet
    from driver.executor import Executor

    with pytest.raises(HalError, match="fused activation"):
        Executor(model).run([np.array([1, 2], np.float32)] * 2 + [np.array(7, np.int32)])


@pytest.mark.parametrize("t", [U8, S8])
def test_rejects_mul_output_scale_not_above_product(t):
    a = tensor(t, [1, 2], scale=0.5, zero_point=0)
    b = tensor(t, [1, 2], scale=0.25, zero_point=0)
    rejects(O.MUL, [a, b, act(0)], [output(t, (2,), scale=0.125)], match="greater than")
    accepts(O.MUL, [a, b, act(0)], [output(t, (2,), scale=0.1251)])


def test_rejects_add_output_scale_too_small():
    a = tensor(U8, [1, 2], scale=1.0)
    rejects(O.ADD, [a, a, act(0)], [output(U8, (2,), scale=2.0**-20)], match="too small")


@pytest.mark.parametrize("op", [O.ADD, O.SUB])
def test_add_sub_output_multiplier_is_twice_the_larger_input_scale(op):
    # The inputs are rescaled to 2 * max(1.0, 0.5) = 2.0 before the 20-bit shift, so the
    # output multiplier 2.0 / (2**20 * scale) reaches 1 (rejected) at scale 2**-19.
    a, b = tensor(U8, [1, 2], scale=1.0), tensor(U8, [1, 2], scale=0.5)
    rejects(op, [a, b, act(0)], [output(U8, (2,), scale=2.0**-19)], match="too small")
    accepts(op, [a, b, act(0)], [output(U8, (2,), scale=2.0**-19 * 1.001)])


@pytest.mark.parametrize("op", [O.ADD, O.MUL, O.SUB, O.DIV])
def test_rejects_rank_above_4(op):
    a5 = tensor(F32, np.zeros((1, 1, 1, 1, 2), np.float32))
    rejects(op, [a5, F2, act(0)], [output(F32, (1, 1, 1, 1, 2))], match="rank")


@pytest.mark.parametrize("op", [O.ADD, O.MAXIMUM, O.POW, O.PRELU])
def test_rejects_incompatible_broadcast(op):
    extra = [act(0)] if op == O.ADD else []
    a = tensor(F32, [[1.0, 2.0, 3.0]], const=True)
    rejects(op, [a, F2, *extra], [output(F32, (1, 3))], match="broadcast")


@pytest.mark.parametrize(
    "op, t, version, ok",
    [
        (O.SUB, F32, HalVersion.V1_0, False),
        (O.SUB, F32, HalVersion.V1_1, True),
        (O.SUB, U8, HalVersion.V1_1, False),
        (O.SUB, U8, HalVersion.V1_2, True),
        (O.DIV, F32, HalVersion.V1_0, False),
        (O.DIV, I32, HalVersion.V1_2, False),
        (O.DIV, I32, HalVersion.V1_3, True),
        (O.ADD, F16, HalVersion.V1_1, False),
        (O.ADD, S8, HalVersion.V1_2, False),
        (O.MUL, I32, HalVersion.V1_2, False),
        (O.MUL, U8, HalVersion.V1_0, True),
    ],
)
def test_signature_versions(op, t, version, ok):
    a = tensor(t, [1, 2], scale=0.5 if t in (U8, S8) else 0.0)
    out = output(t, (2,), scale=1.0 if t in (U8, S8) else 0.0)
    if ok:
        accepts(op, [a, a, act(0)], [out], version)
    else:
        rejects(op, [a, a, act(0)], [out], version)


@pytest.mark.parametrize(
    "op, t, version",
    [(O.MAXIMUM, F32, HalVersion.V1_1), (O.MINIMUM, S8, HalVersion.V1_2),
     (O.POW, F16, HalVersion.V1_1), (O.PRELU, U8, HalVersion.V1_1)],
)  # fmt: skip
def test_hal_1_2_ops_need_their_version(op, t, version):
    a = tensor(t, [1, 2], scale=0.5 if t in (U8, S8) else 0.0)
    out = output(t, (2,), scale=0.5 if t in (U8, S8) else 0.0)
    rejects(op, [a, a], [out], version)
    accepts(op, [a, a], [out], HalVersion.V1_3)


@pytest.mark.parametrize(
    "op, types",
    [(O.DIV, (U8, U8, U8)), (O.POW, (I32, I32, I32)), (O.PRELU, (I32, I32, I32)),
     (O.MAXIMUM, (F32, F16, F32)), (O.ADD, (B8, B8, B8))],
)  # fmt: skip
def test_rejects_unsupported_types(op, types):
    b = ModelBuilder()
    ins = [b.add_input(t, (2,), scale=0.5 if t == U8 else 0.0) for t in types[:2]]
    if op in (O.DIV, O.ADD):
        ins.append(b.add_scalar(T.INT32, 0))
    out = b.add_output(types[2], (2,), scale=0.5 if types[2] == U8 else 0.0)
    b.add_operation(op, ins, [out])
    with pytest.raises(HalError, match="no signature"):
        validate_model(b.build())


def _u8(scale: float, dims=(2,), t=U8, **kw):
    return tensor(t, np.ones(dims, np.uint8 if t == U8 else np.int8), scale=scale, **kw)


_F5 = tensor(F32, np.zeros((1, 1, 1, 1, 2), np.float32))
_F_UNKNOWN_RANK = tensor(F32, [1.0, 2.0], declared_dims=())


@pytest.mark.parametrize(
    "case, deferrable, match",
    [
        # BroadcastOps' kernels switch on the activation (fail on another value) and
        # executeInt32 checks it is NONE, at execution.
        ((O.ADD, [F2, F2, act(4)], [output(F32, (2,))]), True, "fused activation must be 0..3"),
        ((O.MUL, [tensor(I32, [1, 2]), tensor(I32, [1, 2]), act(1)], [output(I32, (2,))]),
         True, "TENSOR_INT32 arithmetic takes no fused activation"),
        # addQuant8/subQuant8's output multiplier, signed mulQuant8's: kernels.
        ((O.SUB, [_u8(1.0), _u8(1.0), act(0)], [output(U8, (2,), scale=2.0**-20)]),
         True, "output multiplier"),
        ((O.MUL, [_u8(0.5, t=S8), _u8(0.25, t=S8), act(0)], [output(S8, (2,), scale=0.125)]),
         True, "greater than input scales' product"),
        # validate: NN_RET_CHECK_GT(output.scale, input1.scale * input2.scale) for
        # TENSOR_QUANT8_ASYMM MUL.
        ((O.MUL, [_u8(0.5), _u8(0.25), act(0)], [output(U8, (2,), scale=0.125)]),
         False, "greater than input scales' product"),
        # validate checks rank <= 4 when both ranks are known; prepare() otherwise.
        ((O.ADD, [_F5, F2, act(0)], [output(F32, (1, 1, 1, 1, 2))]), False, "rank 0..4"),
        ((O.DIV, [_F5, _F_UNKNOWN_RANK, act(0)], [output(F32, (1, 1, 1, 1, 2))]),
         True, "input 0 must have rank 0..4"),
        # ...and the unsigned MUL scale rule wins over the deferred rank.
        ((O.MUL, [_u8(0.5, (1, 1, 1, 1, 2)), _u8(0.25, declared_dims=()), act(0)],
          [output(U8, (1, 1, 1, 1, 2), scale=0.125)]), False, "greater than"),
        # Types and versions stay strict; shapes are prepare()'s.
        ((O.ADD, [F2, tensor(F16, [1, 2]), act(0)], [output(F32, (2,))]), False, "signature"),
        ((O.MAXIMUM, [tensor(F32, [[1, 2, 3]]), F2], [output(F32, (1, 3))]), True, "broadcast"),
    ],
    ids=["activation", "int32-activation", "sub-multiplier", "mul-signed-scale",
         "mul-unsigned-scale", "rank", "rank-other-unknown", "strict-first", "types",
         "broadcast"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(case, deferrable, match):
    assert_rejection(case, deferrable, match)


# ---------------------------------------------------------------------------------------
# Examples cover every signature of the elementwise families
# ---------------------------------------------------------------------------------------


def test_every_signature_of_the_elementwise_families_has_an_example():
    from driver.operations import activations, comparisons, quantization, unary
    from driver.testing import OmittedArg, ScalarArg, TensorArg
    from tests.operations.examples import all_examples

    def types(ex) -> tuple:
        ins = tuple(a.type for a in ex.inputs if isinstance(a, TensorArg | ScalarArg | OmittedArg))
        return ex.op, ins, tuple(o.type for o in ex.outputs)

    covered = {types(ex) for ex in all_examples()}
    missing = [
        (d.type.name, [T(t).name for t in s.inputs], [T(t).name for t in s.outputs])
        for family in (elementwise, activations, unary, comparisons, quantization)
        for d in family.DECLARATIONS
        for s in d.signatures
        if (d.type, s.inputs, s.outputs) not in covered
    ]
    assert not missing, f"signatures without an OpExample: {missing}"
