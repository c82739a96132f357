"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR: hand-computed cases for each coordinate
mode, a direct per-pixel float64 formulation, and the cross-type properties."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import resize as resize_ops
from driver.testing import (
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)

RELAXED_TOL = 5 * 2.0**-10
Q8, S8, F32, F16 = (
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
)
SCALE, ZP = 0.5, 100


def resize(
    op, x, out_hw, t=F32, nchw=None, align=None, half=None, scales=None, q=None, version=None
):
    """Run a resize; x in the layout ``nchw`` says (NHWC when None)."""
    q = q or {}
    if scales is None:
        size = [scalar(T.INT32, out_hw[1]), scalar(T.INT32, out_hw[0])]
    else:
        st_ = T.FLOAT16 if t == F16 else T.FLOAT32
        size = [scalar(st_, scales[1]), scalar(st_, scales[0])]
    flags = [f for f in (nchw, align, half)]
    while flags and flags[-1] is None:
        flags.pop()
    ins = [tensor(t, x, **q), *size, *[scalar(T.BOOL, bool(f)) for f in flags]]
    n, h, w, c = (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) if nchw else x.shape
    oh, ow = out_hw
    shape = (n, c, oh, ow) if nchw else (n, oh, ow, c)
    (y,) = run_op(op, ins, [output(t, shape, **q)], version=version)
    return y


def direct_bilinear(x, oh, ow, align, half):
    """Per output pixel, float64: tflite's coordinate rules written out."""
    n, h, w, c = x.shape

    def scale(i, o):
        return (i - 1) / (o - 1) if align and o > 1 else i / o

    sy, sx = scale(h, oh), scale(w, ow)
    out = np.zeros((n, oh, ow, c))
    for oy in range(oh):
        fy = (oy + 0.5) * sy - 0.5 if half else oy * sy
        y0, y1 = max(math.floor(fy), 0), min(math.ceil(fy), h - 1)
        for ox in range(ow):
            fx = (ox + 0.5) * sx - 0.5 if half else ox * sx
            x0, x1 = max(math.floor(fx), 0), min(math.ceil(fx), w - 1)
            dy, dx = fy - y0, fx - x0
            out[:, oy, ox] = (
                x[:, y0, x0] * (1 - dy) * (1 - dx)
                + x[:, y1, x0] * dy * (1 - dx)
                + x[:, y0, x1] * (1 - dy) * dx
                + x[:, y1, x1] * dy * dx
            )
    return out


def tflite_bilinear_float32(x, oh, ow, align, half):
    """Per output pixel in float32 scalars: tflite's ResizeBilinear expression, evaluated
    in its order. The kernel must give exactly these bits, however it blocks and orders
    its passes."""
    f = np.float32
    n, h, w, c = x.shape

    def scale(i, o):
        return f(i - 1) / f(o - 1) if align and o > 1 else f(i) / f(o)

    def corners(o, size, s):
        coord = (f(o) + f(0.5)) * s - f(0.5) if half else f(o) * s
        low, high = max(math.floor(coord), 0), min(math.ceil(coord), size - 1)
        return low, high, coord - f(low)

    sy, sx = scale(h, oh), scale(w, ow)
    out = np.zeros((n, oh, ow, c), np.float32)
    for oy in range(oh):
        y0, y1, dy = corners(oy, h, sy)
        for ox in range(ow):
            x0, x1, dx = corners(ox, w, sx)
            out[:, oy, ox] = (
                x[:, y0, x0] * (f(1) - dy) * (f(1) - dx)
                + x[:, y1, x0] * dy * (f(1) - dx)
                + x[:, y0, x1] * (f(1) - dy) * dx
                + x[:, y1, x1] * dy * dx
            )
    return out


def direct_nearest(x, oh, ow, align, half):
    n, h, w, c = x.shape

    def index(o, size, osize):
        s = (size - 1) / (osize - 1) if align and osize > 1 else size / osize
        f = (o + 0.5) * s if half else o * s
        i = math.floor(f + 0.5) if align else math.floor(f)
        i = min(i, size - 1)
        return max(i, 0) if half else i

    ys = [index(o, h, oh) for o in range(oh)]
    xs = [index(o, w, ow) for o in range(ow)]
    return x[:, ys][:, :, xs]


X22 = np.array([0, 1, 2, 3], dtype=np.float32).reshape(1, 2, 2, 1)


def test_bilinear_legacy_by_hand():
    y = resize(O.RESIZE_BILINEAR, X22, (3, 3), version=HalVersion.V1_0)
    want = [[0, 2 / 3, 1], [4 / 3, 2, 7 / 3], [2, 8 / 3, 3]]
    np.testing.assert_allclose(y.reshape(3, 3), want, rtol=1e-6)


def test_bilinear_align_corners_by_hand():
    y = resize(O.RESIZE_BILINEAR, X22, (3, 3), nchw=False, align=True)
    np.testing.assert_allclose(y.reshape(3, 3), [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])


def test_bilinear_half_pixel_by_hand():
    y = resize(O.RESIZE_BILINEAR, X22, (4, 4), nchw=False, align=False, half=True)
    row = np.array([0, 0.25, 0.75, 1.0])  # weights of the second sample per axis
    want = 2 * row[:, None] + row[None, :]
    np.testing.assert_allclose(y.reshape(4, 4), want, rtol=1e-6)


@pytest.mark.parametrize(
    "half, want",
    [
        # legacy: samples at 0, 0.5, 1, 1.5 (clamped) -> 0, 1.5, 3, 3
        (False, [0, 1, 3, 3]),
        # half-pixel: samples at -0.25 (weights 1.25 and -0.25 on pixel 0), 0.25, 0.75,
        # 1.25 (clamped) -> 0, 0.75, 2.25, 3
        (True, [0, 0, 2, 3]),
    ],
)
def test_quantized_bilinear_truncates(half, want):
    """tflite's ResizeBilinear ends in ``static_cast<uint8_t>(float)``: fractions are
    truncated, not rounded (1.5 -> 1, 0.75 -> 0, 2.25 -> 2). Signed inputs give the
    unsigned result minus 128 (HAL 1.3: signed and unsigned agree up to the offset), so
    -126.5 becomes -127, not the -126 a cast toward zero would give."""
    q = {"scale": 1.0, "zero_point": 0}
    x = np.array([0, 3], dtype=np.uint8).reshape(1, 1, 2, 1)
    y = resize(O.RESIZE_BILINEAR, x, (1, 4), t=Q8, nchw=False, align=False, half=half, q=q)
    np.testing.assert_array_equal(y.reshape(4), want)
    qs = {"scale": 1.0, "zero_point": -128}
    xs = np.array([-128, -125], dtype=np.int8).reshape(1, 1, 2, 1)
    ys = resize(O.RESIZE_BILINEAR, xs, (1, 4), t=S8, nchw=False, align=False, half=half, q=qs)
    np.testing.assert_array_equal(ys.reshape(4), np.array(want) - 128)


@pytest.mark.parametrize(
    "align, half, out, want_idx",
    [
        (False, False, 4, [0, 0, 1, 1]),
        (True, False, 3, [0, 1, 1]),  # 0.5 rounds away from zero
        (False, True, 3, [0, 1, 1]),  # centres 1/3, 1, 5/3
        (False, False, 1, [0]),
    ],
)
def test_nearest_by_hand(align, half, out, want_idx):
    x = np.array([10, 20], dtype=np.float32).reshape(1, 1, 2, 1)
    y = resize(O.RESIZE_NEAREST_NEIGHBOR, x, (1, out), nchw=False, align=align, half=half)
    np.testing.assert_array_equal(y.reshape(out), np.array([10, 20])[want_idx])


@pytest.mark.parametrize(
    "in_hw, scales, out_hw",
    [
        ((3, 2), (1.5, 1.6), (4, 3)),  # 4.5, 3.2
        ((3, 2), (1.9, 1.75), (5, 3)),  # 5.7, 3.5: floored, not rounded
        # float32(10) * 0.7f = 6.99999988 rounds to 7.0f before the floor (float64: 6).
        ((10, 10), (0.7, 0.7), (7, 7)),
    ],
)
@pytest.mark.parametrize("op", [O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR])
def test_scale_form_floors_the_float32_size(op, in_hw, scales, out_hw):
    x = np.zeros((1, *in_hw, 1), dtype=np.float32)
    y = resize(op, x, out_hw, nchw=False, scales=scales)
    assert y.shape == (1, *out_hw, 1)


@st.composite
def cases(draw):
    shape = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 5)),
        draw(st.integers(1, 5)),
        draw(st.integers(1, 3)),
    )
    # Taller than _NARROW rows with few values per row take the rows-innermost path.
    oh, ow = draw(st.integers(1, 8) | st.integers(17, 40)), draw(st.integers(1, 8))
    mode = draw(st.sampled_from(["legacy", "align", "half"]))
    seed = draw(st.integers(0, 2**16))
    return (
        np.random.default_rng(seed).integers(0, 256, shape),
        (oh, ow),
        mode == "align",
        mode == "half",
    )


def _layout(a, nchw):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2)) if nchw else a


@given(cases(), st.sampled_from([O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR]))
def test_float32_matches_direct(case, op):
    q, (oh, ow), align, half = case
    x = ((q - ZP) * SCALE).astype(np.float32)
    ref = direct_bilinear if op == O.RESIZE_BILINEAR else direct_nearest
    got = resize(op, x, (oh, ow), nchw=False, align=align, half=half)
    # The kernel interpolates in float32 (as Android does): its error scales with the
    # input magnitude, not with the (possibly cancelling) result.
    atol = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(x).max()))
    np.testing.assert_allclose(
        got, ref(x.astype(np.float64), oh, ow, align, half), rtol=1e-5, atol=atol
    )


@given(cases())
def test_float32_bilinear_is_tflites_float_expression_exactly(case):
    q, (oh, ow), align, half = case
    x = ((q - ZP) * SCALE).astype(np.float32)
    got = resize(O.RESIZE_BILINEAR, x, (oh, ow), nchw=False, align=align, half=half)
    np.testing.assert_array_equal(got, tflite_bilinear_float32(x, oh, ow, align, half))


@given(cases(), st.sampled_from([O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR]))
def test_nchw_is_the_transpose_of_nhwc(case, op):
    q, out, align, half = case
    for t, x, kw in (
        (F32, q.astype(np.float32), {}),
        (Q8, q, {"q": {"scale": SCALE, "zero_point": ZP}}),
    ):
        nhwc = resize(op, x, out, t=t, nchw=False, align=align, half=half, **kw)
        nchw = resize(op, _layout(x, True), out, t=t, nchw=True, align=align, half=half, **kw)
        np.testing.assert_array_equal(nchw, _layout(nhwc, True))


@given(cases(), st.sampled_from([O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR]))
def test_blocks_of_one_output_pixel_give_the_one_block_result(case, op):
    # Large outputs are computed a block of rows and columns at a time (bounded
    # temporaries); one-pixel blocks must give exactly what one block gives.
    q, out, align, half = case
    for t, x, kw in (
        (F32, q.astype(np.float32), {}),
        (Q8, q, {"q": {"scale": SCALE, "zero_point": ZP}}),
    ):
        args = (op, x, out)
        whole = resize(*args, t=t, nchw=False, align=align, half=half, **kw)
        with mock.patch.object(resize_ops, "_BLOCK_ELEMENTS", 1):
            by_rows = resize(*args, t=t, nchw=False, align=align, half=half, **kw)
        np.testing.assert_array_equal(by_rows, whole)


@pytest.mark.parametrize("op", [O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR])
def test_a_huge_output_needs_little_more_memory_than_itself(op):
    # A 64 MB quant8 output 16M pixels wide. Per-pixel coordinates or index arrays for
    # the whole output would take 8-16 bytes a pixel; the kernels make them per block.
    x = np.arange(4, dtype=np.uint8).reshape(1, 2, 2, 1)
    got, peak = traced_peak(
        lambda: resize(op, x, (4, 1 << 24), t=Q8, nchw=False, q={"scale": 1.0, "zero_point": 0})
    )
    assert got.shape == (1, 4, 1 << 24, 1)
    np.testing.assert_array_equal(got[0, [0, -1], [0, -1], 0], [0, 3])
    assert peak < 2 * got.nbytes + (32 << 20), f"peak {peak >> 20} MB"


@pytest.mark.parametrize("op", [O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR])
@pytest.mark.parametrize("t", [F32, Q8])
def test_zero_batch_gives_an_empty_output(op, t):
    # Block sizes divide by the batch: a zero batch must still give the (empty) output.
    x = np.zeros((0, 2, 2, 1), dtype=np.float32 if t == F32 else np.uint8)
    q = None if t == F32 else {"scale": SCALE, "zero_point": ZP}
    assert resize(op, x, (3, 4), t=t, nchw=False, q=q).shape == (0, 3, 4, 1)


@given(cases(), st.sampled_from([O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR]))
def test_signed_equals_unsigned_minus_128(case, op):
    q, out, align, half = case
    u = resize(
        op, q, out, t=Q8, nchw=False, align=align, half=half, q={"scale": SCALE, "zero_point": ZP}
    )
    s = resize(
        op,
        q - 128,
        out,
        t=S8,
        nchw=False,
        align=align,
        half=half,
        q={"scale": SCALE, "zero_point": ZP - 128},
    )
    np.testing.assert_array_equal(s.astype(np.int64), u.astype(np.int64) - 128)


@given(cases(), st.sampled_from([O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR]))
def test_quantized_within_one_of_requantized_float(case, op):
    q, out, align, half = case
    real = resize(
        op, ((q - ZP) * SCALE).astype(np.float32), out, nchw=False, align=align, half=half
    )
    want = np.clip(np.sign(real) * np.floor(np.abs(real) / SCALE + 0.5) + ZP, 0, 255)
    got = resize(
        op, q, out, t=Q8, nchw=False, align=align, half=half, q={"scale": SCALE, "zero_point": ZP}
    )
    assert np.abs(got.astype(np.int64) - want).max() <= 1


@given(cases(), st.sampled_from([O.RESIZE_BILINEAR, O.RESIZE_NEAREST_NEIGHBOR]))
def test_float16_close_to_float32(case, op):
    q, out, align, half = case
    x = ((q - ZP) * SCALE).astype(np.float16)
    f16 = resize(op, x, out, t=F16, nchw=False, align=align, half=half).astype(np.float64)
    f32 = resize(op, x.astype(np.float32), out, nchw=False, align=align, half=half)
    np.testing.assert_allclose(
        f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL * max(1.0, np.abs(f32).max())
    )


def _rejected(fn):
    with pytest.raises(HalError) as e:
        fn()
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    return e.value.message


def test_validation():
    _rejected(lambda: resize(O.RESIZE_BILINEAR, X22, (3, 3), nchw=False, align=True, half=True))
    _rejected(lambda: resize(O.RESIZE_BILINEAR, X22, (0, 3)))
    _rejected(lambda: resize(O.RESIZE_BILINEAR, X22, (0, 0), nchw=False, scales=(0.2, 0.2)))
    # A scale that makes no size (NaN, infinity, or a product past float32): rejected, not
    # a ValueError/OverflowError out of int() (found by the execute fuzz target).
    for scales in [(np.nan, 1.0), (1.0, np.inf), (3e38, 1.0), (1.0, -np.inf)]:
        msg = _rejected(lambda s=scales: resize(O.RESIZE_BILINEAR, X22, (1, 1), scales=s))
        assert "must be finite" in msg, msg
    msg = _rejected(
        lambda: run_op(
            O.RESIZE_NEAREST_NEIGHBOR,
            [
                tensor(Q8, X22, scale=0.5),
                scalar(T.INT32, 2),
                scalar(T.INT32, 2),
                scalar(T.BOOL, False),
            ],
            [output(Q8, (1, 2, 2, 1), scale=0.25)],
        )
    )
    assert "scale and zero point" in msg
    for out_q in ({"scale": 0.5, "zero_point": 1}, {"scale": 0.25, "zero_point": 0}):
        msg = _rejected(
            lambda q=out_q: run_op(
                O.RESIZE_BILINEAR,
                [tensor(Q8, X22, scale=0.5), scalar(T.INT32, 2), scalar(T.INT32, 2)],
                [output(Q8, (1, 2, 2, 1), **q)],
            )
        )
        assert "scale and zero point" in msg


def test_hal_versions():
    resize(O.RESIZE_BILINEAR, X22, (3, 3), version=HalVersion.V1_0)
    _rejected(lambda: resize(O.RESIZE_BILINEAR, X22, (3, 3), nchw=False, version=HalVersion.V1_1))
    resize(O.RESIZE_BILINEAR, X22, (3, 3), nchw=False, version=HalVersion.V1_2)
    _rejected(
        lambda: resize(
            O.RESIZE_BILINEAR, X22, (3, 3), nchw=False, align=True, version=HalVersion.V1_2
        )
    )
    _rejected(
        lambda: resize(O.RESIZE_NEAREST_NEIGHBOR, X22, (3, 3), nchw=False, version=HalVersion.V1_1)
    )
    # RESIZE_NEAREST_NEIGHBOR came with HAL 1.2's layout flag: it has no form without it.
    msg = _rejected(lambda: resize(O.RESIZE_NEAREST_NEIGHBOR, X22, (3, 3)))
    assert "no signature" in msg, msg


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android 11's validate leaves to prepare(), at execution
# ---------------------------------------------------------------------------------------


def _resize_model(op=O.RESIZE_BILINEAR, shape=(1, 2, 2, 1), size=(3, 3), flags=(), out_t=F32):
    ins = [
        tensor(F32, np.zeros(shape)),
        scalar(T.INT32, size[1]),
        scalar(T.INT32, size[0]),
        *[scalar(T.BOOL, f) for f in flags],
    ]
    model, _ = single_op_model(op, ins, [output(out_t, (1, *size, 1))])
    return model


@pytest.mark.parametrize(
    "model, deferrable, match",
    [
        # ResizeImageOps.cpp prepare() checks the flags and the output size.
        (_resize_model(flags=(False, True, True)), True, "cannot both be true"),
        (
            _resize_model(O.RESIZE_NEAREST_NEIGHBOR, flags=(False, True, True)),
            True,
            "cannot both be true",
        ),
        (_resize_model(size=(0, 3)), True, "must be > 0"),
        # Its validate: the rank when known, and the operand types.
        (_resize_model(shape=(2, 2, 1)), False, "must have rank 4"),
        (_resize_model(out_t=F16), False, "TENSOR_FLOAT16"),
        (_resize_model(shape=(2, 2, 1), flags=(False, True, True)), False, "must have rank 4"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(model, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match)
