"""The performance paths of the kernels against plain formulations.

* quant8 unary lookups gather byte *pairs* on large tensors: equal to gathering bytes;
* ARGMAX/ARGMIN and TOPK_V2 reduce short axes in a column layout: equal to a sequential
  strict-comparison scan and to Android's (value, index) pair sort, on every type, for
  middle and last axes, short and long;
* TOPK_V2 on rows much longer than k sorts only the elements at or above a bound from
  chunk maxima: equal to the pair sort, and it steps aside for NaN and for mass ties;
* quantized convolutions accumulate in float32 when the exactness bound allows, else in
  float64: both equal an int64 accumulation followed by the fixed-point output stage.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import conv, elementwise, quant, reduction
from driver.testing import output, run_op, scalar, tensor

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
QP = {"scale": 0.5, "zero_point": 3}


def i(v: int):
    return scalar(T.INT32, v)


# --- pair lookups ------------------------------------------------------------------------


@pytest.mark.parametrize("in_type", [Q8, Q8S])
@pytest.mark.parametrize("size", [16384, 16386, 16385, 40000])
def test_pair_lookup_equals_byte_lookup(in_type, size):
    rng = np.random.default_rng(size)
    dtype = np.uint8 if in_type == Q8 else np.int8
    x = rng.integers(0, 256, size).astype(np.uint8).view(dtype)
    table_u8 = rng.integers(0, 256, 256).astype(np.uint8)
    for out_dtype in (np.uint8, np.int8, np.bool_):
        table = (
            (table_u8 & 1).astype(np.bool_) if out_dtype == np.bool_ else table_u8.view(out_dtype)
        )

        def recipe(v: np.ndarray, table=table) -> np.ndarray:
            return table[v.astype(np.uint8)]  # indexed by byte pattern, as the lookup is

        key = ("test_pair_lookup", in_type, size, np.dtype(out_dtype).str)
        got = elementwise.lookup_unary(key, recipe, x, in_type)
        want = np.take(table, x.view(np.uint8))
        assert got.dtype == want.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got, want)
        strided = x.reshape(-1, 5)[:, ::2] if size % 5 == 0 else x[::2]
        np.testing.assert_array_equal(
            elementwise.lookup_unary(key, recipe, strided, in_type),
            np.take(table, strided.view(np.uint8)),
        )


# --- ARGMAX / ARGMIN -----------------------------------------------------------------------


def scan_reference(x: np.ndarray, axis: int, is_min: bool) -> np.ndarray:
    """Android's loop: keep the first element, replace it only by a strictly better one
    (so NaN never wins, and a leading NaN is never beaten)."""
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    out = []
    for row in rows:
        best, best_j = row[0], 0
        for j in range(1, len(row)):
            if (row[j] < best) if is_min else (row[j] > best):
                best, best_j = row[j], j
        out.append(best_j)
    return np.array(out, dtype=np.int32).reshape(moved.shape[:-1] or (1,))


def sample(rng: np.random.Generator, t: int, shape) -> np.ndarray:
    if t in (F32, F16):
        specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5], np.float32)
        x = np.where(
            rng.random(shape) < 0.5, rng.choice(specials, shape), np.round(rng.normal(size=shape))
        ).astype(np.float32)
        return x.astype(np.float16) if t == F16 else x
    if t == I32:
        return rng.integers(-3, 4, shape).astype(np.int32)
    low, high = (0, 256) if t == Q8 else (-128, 128)
    narrow = rng.integers(low, low + 4, shape)  # many ties
    return np.where(rng.random(shape) < 0.5, narrow, rng.integers(low, high, shape)).astype(
        np.uint8 if t == Q8 else np.int8
    )


@pytest.mark.parametrize("t", [F32, F16, I32, Q8, Q8S])
@pytest.mark.parametrize(
    "shape, axis",
    [((300, 7), -1), ((3, 40, 5), 1), ((2, 300), 1), ((6, 4, 33), 2), ((9, 2, 3), 0), ((5,), 0)],
)
def test_argmax_argmin_equal_the_sequential_scan(t, shape, axis):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    x = sample(rng, t, shape)
    qp = QP if t in (Q8, Q8S) else {}
    for op, is_min in ((O.ARGMAX, False), (O.ARGMIN, True)):
        (got,) = run_op(op, [tensor(t, x, **qp), i(axis)], [output(I32)])
        np.testing.assert_array_equal(got, scan_reference(x, axis, is_min), err_msg=op.name)


# --- TOPK_V2 ---------------------------------------------------------------------------------


def topk_reference(row: np.ndarray, k: int) -> tuple[list, list]:
    """Android: sort (value, index) pairs ascending, reverse, take k (-0.0 == 0.0)."""
    pairs = sorted(((float(v), j) for j, v in enumerate(row)), reverse=True)[:k]
    return [v for v, _ in pairs], [j for _, j in pairs]


@pytest.mark.parametrize("t", [F32, F16, I32, Q8, Q8S])
@pytest.mark.parametrize("shape", [(200, 33), (3, 5, 8), (40, 256), (6, 300)])
@pytest.mark.parametrize("k", [1, 4, 8, 9])
def test_topk_equals_the_pair_sort(t, shape, k):
    rng = np.random.default_rng(shape[-1] * 10 + k)
    x = sample(rng, t, shape)
    if x.dtype.kind == "f":
        x[np.isnan(x)] = 7.0  # NaN has no place in a Python sort; tested in test_reduction
    k = min(k, shape[-1])
    qp = QP if t in (Q8, Q8S) else {}
    values, index = run_op(
        O.TOPK_V2, [tensor(t, x, **qp), i(k)], [output(t, (), **qp), output(I32)]
    )
    rows = x.reshape(-1, shape[-1])
    for r, row in enumerate(rows):
        want_v, want_i = topk_reference(row, k)
        got_i = index.reshape(-1, k)[r]
        assert got_i.tolist() == want_i
        got_v = values.reshape(-1, k)[r]
        # Bit patterns: -0.0 must come back as -0.0 (the element itself is returned).
        np.testing.assert_array_equal(got_v.view(np.uint8), row[got_i].view(np.uint8))
        assert [float(v) for v in got_v] == want_v


# --- quantized convolution: float32 and float64 accumulation ----------------------------------


def conv_reference(x, w, bias, zx, zw, scales, zo, stride=1, pad=1, raw=False):
    """CONV_2D quant8 with an int64 accumulation (one vectorized multiply-add per tap),
    the int32 wrap of the C++ accumulator, then MultiplyByQuantizedMultiplier (``raw``:
    the accumulator itself)."""
    n, h, wd, c = x.shape
    cout, fh, fw, _ = w.shape
    xp = np.pad(x.astype(np.int64) - zx, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh = (h + 2 * pad - fh) // stride + 1
    ow = (wd + 2 * pad - fw) // stride + 1
    acc = np.zeros((n, oh, ow, cout), np.int64)
    wq = w.astype(np.int64) - zw
    for a in range(fh):
        for b in range(fw):
            patch = xp[
                :, a : a + (oh - 1) * stride + 1 : stride, b : b + (ow - 1) * stride + 1 : stride
            ]
            acc += patch @ wq[:, a, b, :].T
    acc = (acc + bias + 2**31) % 2**32 - 2**31
    if raw:
        return acc
    sx, sw, so = scales
    m, s = quant.quantize_multiplier(float(np.float32(sx) * np.float32(sw)) / float(np.float32(so)))
    out = quant.multiply_by_quantized_multiplier(acc, m, s) + zo
    return np.clip(out, 0, 255).astype(np.uint8)


def test_exact_float_dtype_switches_at_two_to_the_24():
    w = np.zeros((2, 1, 1, 4))
    w[1] = [1024, -1024, 1024, 1024]  # output 1: sum |w| = 4096 = 2**12
    assert conv.exact_float_dtype(4095, w, 0) == np.float32  # 2**24 - 4096
    assert conv.exact_float_dtype(4096, w, 0) == np.float64  # 2**24
    # depthwise filters: the output channel is the last axis
    assert conv.exact_float_dtype(4095, w.transpose(3, 1, 2, 0), 3) == np.float32
    assert conv.exact_float_dtype(4096, w.transpose(3, 1, 2, 0), 3) == np.float64


@pytest.mark.parametrize("case", ["typical", "extreme"])
def test_quantized_conv_accumulation_paths_are_exact(case):
    rng = np.random.default_rng(7)
    shape_x, shape_w = (1, 9, 11, 64), (8, 3, 3, 64)
    if case == "typical":  # float32 accumulation
        x = rng.integers(0, 256, shape_x).astype(np.uint8)
        w = rng.integers(100, 157, shape_w).astype(np.uint8)
        zx, zw, scales = 120, 128, (0.05, 0.002, 0.3)
    else:
        # Sums of 255 * 255 * 576 > 2**24 need float64. Output scale = input scale x
        # filter scale makes the multiplier exactly 1, so every unit of the
        # accumulator shows in the output: a float32 accumulation would be caught.
        x = np.where(rng.random(shape_x) < 0.05, 254, 255).astype(np.uint8)
        w = np.where(rng.random(shape_w) < 0.05, 254, 255).astype(np.uint8)
        zx, zw = 0, 0
        scales = (0.5, 0.25, float(np.float32(0.5) * np.float32(0.25)))
    expect = np.float32 if case == "typical" else np.float64
    assert conv.exact_float_dtype(max(zx, 255 - zx), w.astype(np.float64) - zw, 0) == expect
    bias = rng.integers(-5000, 5000, 8).astype(np.int32)
    if case == "extreme":  # center the interior sums on the output zero point
        interior = conv_reference(x, w, np.zeros(8, np.int64), zx, zw, (1, 1, 1e9), 0, raw=True)
        bias = -np.median(interior[:, 1:-1, 1:-1], axis=(0, 1, 2)).astype(np.int32)
    (got,) = run_op(
        O.CONV_2D,
        [
            tensor(Q8, x, scale=scales[0], zero_point=zx),
            tensor(Q8, w, scale=scales[1], zero_point=zw),
            tensor(I32, bias, scale=scales[0] * scales[1]),
            i(1), i(1), i(1), i(1), i(1), i(1), i(0),
        ],
        [output(Q8, (), scale=scales[2], zero_point=128)],
    )  # fmt: skip
    want = conv_reference(x, w, bias, zx, zw, scales, 128)
    assert len(np.unique(want)) > 5  # a spread of outputs, not saturation
    np.testing.assert_array_equal(got, want)


def check_topk(x: np.ndarray, k: int, values: np.ndarray, index: np.ndarray) -> None:
    rows = x.reshape(-1, x.shape[-1])
    for r, row in enumerate(rows):
        want_v, want_i = topk_reference(row, k)
        assert index.reshape(-1, k)[r].tolist() == want_i, f"row {r}"
        got_v = values.reshape(-1, k)[r]
        np.testing.assert_array_equal(got_v.view(np.uint8), row[want_i].view(np.uint8))


@pytest.mark.parametrize("t", [F32, F16, I32, Q8, Q8S])
@pytest.mark.parametrize(
    "shape, k", [((16, 1024), 5), ((3, 2, 300), 9), ((5, 257), 1), ((2, 64), 16)]
)
def test_topk_prefilter_equals_the_pair_sort(t, shape, k):
    rng = np.random.default_rng(shape[-1] + k)
    if t in (F32, F16):
        x = rng.normal(size=shape).astype(np.float32 if t == F32 else np.float16)
        x.reshape(-1)[::7] = 0.0
        x.reshape(-1)[3::7] = -0.0  # zeros tie with negative zeros (the larger index wins)
    else:
        x = sample(rng, t, shape)
    rows = x.reshape(-1, shape[-1])
    found = reduction._topk_prefiltered(rows, k)
    assert found is not None, "the bound should filter these rows"
    check_topk(x, k, *found)
    qp = QP if t in (Q8, Q8S) else {}
    check_topk(
        x, k, *run_op(O.TOPK_V2, [tensor(t, x, **qp), i(k)], [output(t, (), **qp), output(I32)])
    )


def test_topk_prefilter_steps_aside_for_nan_and_mass_ties():
    rows = np.zeros((4, 600), np.float32)
    assert reduction._topk_prefiltered(rows, 3) is None  # every element ties with the bound
    rows = np.random.default_rng(0).normal(size=(4, 600)).astype(np.float32)
    rows[2, 17] = np.nan
    assert reduction._topk_prefiltered(rows, 3) is None


@pytest.mark.parametrize("n", [5, 600])  # the column layout and the long-row paths
def test_topk_orders_nan_by_its_bits(n):
    # Android's pair sort leaves NaN's place undefined; the reference ranks a positive NaN
    # above +inf and a negative NaN below -inf, on every path, so that drivers can be
    # compared with it.
    head = np.array([1.0, np.nan, np.inf, -np.nan, -np.inf], np.float32)
    x = np.concatenate([head, np.full(n - 5, -2.0, np.float32)])
    values, index = run_op(O.TOPK_V2, [tensor(F32, x[None]), i(5)], [output(F32), output(I32)])
    assert index[0].tolist() == [1, 2, 0, *([n - 1, n - 2] if n > 5 else [4, 3])]
    np.testing.assert_array_equal(values[0].view(np.uint32), x[index[0]].view(np.uint32))


def order_by_bits_reference(row: np.ndarray, k: int) -> list[int]:
    """The indices of the k largest (value, index) pairs, largest first, with values
    ordered as C++ compares them (-0.0 == 0.0) and NaN placed by its bits: the order every
    TOPK_V2 path keeps (a positive NaN above +inf, a negative NaN below -inf)."""
    if row.dtype.kind == "f":
        bits = (row.astype(np.float32) + np.float32(0.0)).view(np.int32).astype(np.int64)
        value = np.where(bits < 0, -(bits & 0x7FFFFFFF) - 1, bits)
    else:
        value = row.astype(np.int64)
    order = np.lexsort((np.arange(len(row)), value))  # ascending (value, index)
    return order[::-1][:k].tolist()


@given(
    st.sampled_from([F32, F16, I32, Q8, Q8S]),
    st.integers(1, 5),
    st.integers(1, 700),
    st.integers(1, 12),
    st.sampled_from(["normal", "ties", "specials"]),
    st.integers(0, 2**32 - 1),
)
def test_topk_paths_agree_with_the_order_by_bits(t, rows, n, k, kind, seed):
    # Every path (column rounds, long-row filter, partition and sort) on one property.
    rng = np.random.default_rng(seed)
    k = min(k, n)
    if t in (F32, F16):
        pool = {
            "normal": rng.normal(size=(rows, n)),
            "ties": rng.integers(-2, 3, (rows, n)).astype(np.float64),
            "specials": rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0], (rows, n)),
        }[kind]
        x = pool.astype(np.float32 if t == F32 else np.float16)
    else:
        x = sample(rng, t, (rows, n)) if kind != "normal" else None
        if x is None:
            info = np.iinfo(np.int32 if t == I32 else np.uint8 if t == Q8 else np.int8)
            x = rng.integers(info.min, info.max, (rows, n), endpoint=True, dtype=info.dtype)
    qp = QP if t in (Q8, Q8S) else {}
    values, index = run_op(
        O.TOPK_V2, [tensor(t, x, **qp), i(k)], [output(t, (), **qp), output(I32)]
    )
    for r in range(rows):
        assert index[r].tolist() == order_by_bits_reference(x[r], k), f"row {r}"
        np.testing.assert_array_equal(values[r].view(np.uint8), x[r][index[r]].view(np.uint8))
