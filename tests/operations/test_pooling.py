"""AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D: hand-computed cases, a direct per-window
formulation in every form, and the cross-type properties."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.executor import Executor
from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import pooling
from driver.operations.conv import explicit_padding, out_size
from driver.testing import (
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)
from driver.validation import validate_model

RELAXED_TOL = 5 * 2.0**-10
SCALE, ZP = 0.25, 100


def I(v):  # noqa: E743 - a terse INT32 scalar
    return scalar(T.INT32, v)


@dataclass(frozen=True)
class Case:
    op: int
    n: int
    h: int
    w: int
    c: int
    fh: int
    fw: int
    stride: tuple[int, int] = (1, 1)  # (h, w)
    padding: object = "valid"  # "same", "valid" or (left, right, top, bottom)
    act: int = 0
    nchw: bool = False
    seed: int = 0

    def pads(self):
        if isinstance(self.padding, tuple):
            return self.padding
        code = 1 if self.padding == "same" else 2
        left, right = explicit_padding(self.w, self.stride[1], self.fw, code)
        top, bottom = explicit_padding(self.h, self.stride[0], self.fh, code)
        return left, right, top, bottom

    def out_hw(self):
        left, right, top, bottom = self.pads()
        return (
            out_size(self.h, self.fh, self.stride[0], top, bottom),
            out_size(self.w, self.fw, self.stride[1], left, right),
        )

    def out_shape(self):
        oh, ow = self.out_hw()
        return (self.n, self.c, oh, ow) if self.nchw else (self.n, oh, ow, self.c)

    def params(self):
        if isinstance(self.padding, tuple):
            pad = [I(p) for p in self.padding]
        else:
            pad = [I(1 if self.padding == "same" else 2)]
        tail = [scalar(T.BOOL, True)] if self.nchw else []
        return [
            *pad,
            I(self.stride[1]),
            I(self.stride[0]),
            I(self.fw),
            I(self.fh),
            I(self.act),
            *tail,
        ]


def layout(a, nchw):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2)) if nchw else a


def values(case: Case) -> np.ndarray:
    """uint8 values (NHWC); reals are (q - ZP) * SCALE."""
    return np.random.default_rng(case.seed).integers(0, 256, (case.n, case.h, case.w, case.c))


def run(case: Case, kind: str, q: np.ndarray) -> np.ndarray:
    """Run with data type kind (f32, f16, q8, s8); quantized results as unsigned ints."""
    if kind in ("f32", "f16"):
        t = T.TENSOR_FLOAT32 if kind == "f32" else T.TENSOR_FLOAT16
        x = layout((q - ZP) * SCALE, case.nchw)
        (y,) = run_op(case.op, [tensor(t, x), *case.params()], [output(t, case.out_shape())])
        return y.astype(np.float64)
    t = T.TENSOR_QUANT8_ASYMM if kind == "q8" else T.TENSOR_QUANT8_ASYMM_SIGNED
    off = 0 if kind == "q8" else -128
    x = tensor(t, layout(q + off, case.nchw), scale=SCALE, zero_point=ZP + off)
    outs = [output(t, case.out_shape(), scale=SCALE, zero_point=ZP + off)]
    (y,) = run_op(case.op, [x, *case.params()], outs)
    return y.astype(np.int64) - off


def direct(case: Case, x: np.ndarray, quantized: bool) -> np.ndarray:
    """Per output pixel: the real pixels under the window (NHWC in, case's layout out)."""
    left, _, top, _ = case.pads()
    oh, ow = case.out_hw()
    out = np.zeros((case.n, oh, ow, case.c))
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * case.stride[0] - top, ox * case.stride[1] - left
            win = x[:, max(y0, 0) : y0 + case.fh, max(x0, 0) : x0 + case.fw]
            count = win.shape[1] * win.shape[2]
            if case.op == O.MAX_POOL_2D:
                out[:, oy, ox] = win.max(axis=(1, 2))
            elif case.op == O.L2_POOL_2D:
                out[:, oy, ox] = np.sqrt((win**2).sum(axis=(1, 2)) / count)
            elif quantized:
                s = win.sum(axis=(1, 2)).astype(np.int64)
                out[:, oy, ox] = (s + count // 2) // count
            else:
                out[:, oy, ox] = win.sum(axis=(1, 2)) / count
    return layout(out, case.nchw)


def act_float(y, act):
    return {0: y, 1: np.maximum(y, 0), 2: np.clip(y, -1, 1), 3: np.clip(y, 0, 6)}[act]


def act_quant(y, act):
    lo, hi = {
        0: (0, 255),
        1: (ZP, 255),
        2: (ZP - 4, ZP + 4),  # -1 and 1 at scale 1/4
        3: (ZP, ZP + 24),
    }[act]
    return np.clip(y, lo, hi)


# ---------------------------------------------------------------------------------------
# Hand-computed cases
# ---------------------------------------------------------------------------------------

X44 = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)


def _pool(op, x, params, out_shape, t=T.TENSOR_FLOAT32, **q):
    (y,) = run_op(op, [tensor(t, x, **q), *params], [output(t, out_shape, **q)])
    return y


def test_average_pool_same_excludes_padding_from_the_count():
    # 3x3 windows stride 2 over 4x4 with SAME: padding (0, 1) on each axis.
    y = _pool(O.AVERAGE_POOL_2D, X44, [I(1), I(2), I(2), I(3), I(3), I(0)], (1, 2, 2, 1))
    # window at (0,0): rows 0-2, cols 0-2 -> mean 5; at (0,2): rows 0-2, cols 2-3 -> 6.5
    # at (2,0): rows 2-3, cols 0-2 -> 11; at (2,2): rows 2-3, cols 2-3 -> 12.5
    np.testing.assert_array_equal(y.reshape(2, 2), [[5, 6.5], [11, 12.5]])


def test_max_pool_explicit_padding_relu6():
    params = [I(1), I(0), I(1), I(0), I(2), I(2), I(2), I(2), I(3)]
    y = _pool(O.MAX_POOL_2D, X44, params, (1, 2, 2, 1))
    # windows rows {-1,0}, {1,2} x cols {-1,0}, {1,2}: maxima 0, 2, 8, 10 -> relu6
    np.testing.assert_array_equal(y.reshape(2, 2), [[0, 2], [6, 6]])


def test_l2_pool_by_hand():
    x = np.array([3, 4, 0, 0], dtype=np.float32).reshape(1, 2, 2, 1)
    y = _pool(O.L2_POOL_2D, x, [I(2), I(1), I(1), I(2), I(2), I(0)], (1, 1, 1, 1))
    np.testing.assert_allclose(y.reshape(()), math.sqrt(25 / 4))


def test_average_pool_quant8_signed_is_coupled_to_unsigned():
    # -1, -2 average to -1.5: Android 11's int8 kernel (reference_integer_ops::
    # AveragePool, halves away from zero) gives -2, but HAL 1.3 requires signed results
    # to be the unsigned ones - 128, and the uint8 kernel rounds 126.5 up to 127 -> -1.
    x = np.array([-1, -2, 3, 4], dtype=np.int8).reshape(1, 1, 4, 1)
    q = {"scale": 0.5, "zero_point": 0}
    y = _pool(
        O.AVERAGE_POOL_2D,
        x,
        [I(2), I(2), I(1), I(2), I(1), I(0)],
        (1, 1, 2, 1),
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        **q,
    )
    np.testing.assert_array_equal(y.reshape(2), [-1, 4])


def test_average_pool_quant8_rounds_half_up():
    # 2 and 3 average to 2.5 -> 3; 1, 2 -> 1.5 -> 2
    x = np.array([2, 3, 1, 2], dtype=np.uint8).reshape(1, 2, 2, 1)
    q = {"scale": 1.0, "zero_point": 0}
    y = _pool(
        O.AVERAGE_POOL_2D,
        x,
        [I(2), I(1), I(1), I(2), I(1), I(0)],
        (1, 2, 1, 1),
        T.TENSOR_QUANT8_ASYMM,
        **q,
    )
    np.testing.assert_array_equal(y.reshape(2), [3, 2])


def test_global_pool_one_by_one_output_batch():
    x = np.stack([X44[0], -X44[0]])
    y = _pool(O.AVERAGE_POOL_2D, x, [I(2), I(1), I(1), I(4), I(4), I(0)], (2, 1, 1, 1))
    np.testing.assert_array_equal(y.reshape(2), [7.5, -7.5])


# ---------------------------------------------------------------------------------------
# Against the direct formulation, every form
# ---------------------------------------------------------------------------------------

_SHAPES = [
    Case(0, 1, 4, 5, 2, 3, 2, (2, 1), "same"),
    Case(0, 2, 5, 5, 3, 2, 2, (2, 2), "valid", act=1),
    Case(0, 1, 6, 4, 1, 3, 3, (1, 2), (1, 2, 2, 0), act=3, nchw=True),
    Case(0, 1, 3, 3, 2, 3, 3, (1, 1), "valid", act=2),  # 1x1 output
    Case(0, 1, 2, 3, 1, 4, 4, (1, 1), "same"),  # filter larger than input
]
CASES = [
    replace(c, op=op, seed=k)
    for op in (O.AVERAGE_POOL_2D, O.MAX_POOL_2D, O.L2_POOL_2D)
    for k, c in enumerate(_SHAPES)
]


def _id(c):
    return f"{O(c.op).name}-{c.n}x{c.h}x{c.w}x{c.c}-f{c.fh}x{c.fw}-s{c.stride}-{c.padding}-a{c.act}-{c.nchw}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_float32_matches_direct(case):
    q = values(case)
    want = act_float(direct(case, (q - ZP) * SCALE, False), case.act)
    np.testing.assert_allclose(run(case, "f32", q), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["q8", "s8"])
@pytest.mark.parametrize("case", [c for c in CASES if c.op != O.L2_POOL_2D], ids=_id)
def test_quantized_matches_direct(case, kind):
    q = values(case)
    want = act_quant(direct(case, q, True), case.act)
    np.testing.assert_array_equal(run(case, kind, q), want)


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------


@st.composite
def cases(draw, ops=(O.AVERAGE_POOL_2D, O.MAX_POOL_2D, O.L2_POOL_2D)):
    op = draw(st.sampled_from(ops))
    fh, fw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    c = Case(
        op, draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6)),
        draw(st.integers(1, 3)), fh, fw, (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
        draw(st.one_of(st.sampled_from(["same", "valid"]), st.tuples(
            st.integers(0, fw - 1), st.integers(0, fw - 1), st.integers(0, fh - 1), st.integers(0, fh - 1)))),
        act=draw(st.integers(0, 3)), nchw=draw(st.booleans()), seed=draw(st.integers(0, 2**16)),
    )  # fmt: skip
    oh, ow = c.out_hw()
    if oh <= 0 or ow <= 0:
        c = replace(c, padding="same")
    left, right, top, bottom = c.pads()
    if not (fw > max(left, right) and fh > max(top, bottom)):
        c = replace(c, padding="valid", fh=min(fh, c.h), fw=min(fw, c.w))
    return c


@given(cases())
def test_nchw_is_the_transpose_of_nhwc(case):
    q = values(case)
    kinds = ("f32",) if case.op == O.L2_POOL_2D else ("f32", "q8")
    for kind in kinds:
        nhwc = run(replace(case, nchw=False), kind, q)
        np.testing.assert_array_equal(
            run(replace(case, nchw=True), kind, q), nhwc.transpose(0, 3, 1, 2)
        )


@given(cases(ops=(O.AVERAGE_POOL_2D, O.MAX_POOL_2D)))
def test_signed_equals_unsigned_minus_128(case):
    q = values(case)
    np.testing.assert_array_equal(run(case, "s8", q), run(case, "q8", q))


@given(cases(ops=(O.AVERAGE_POOL_2D, O.MAX_POOL_2D)))
def test_quantized_within_one_of_requantized_float(case):
    q = values(case)
    real = run(case, "f32", q)
    want = np.clip(np.sign(real) * np.floor(np.abs(real) / SCALE + 0.5) + ZP, 0, 255)
    assert np.abs(run(case, "q8", q) - want).max(initial=0) <= 1


@given(cases())
def test_blocks_of_one_row_give_the_one_block_result(case):
    # Large inputs are pooled a block of output rows (and of the batch) at a time, each
    # block converting only the input rows its windows cover; one-row blocks must give
    # exactly the one-block result.
    q = values(case)
    kinds = ("f32", "f16") if case.op == O.L2_POOL_2D else ("f32", "f16", "q8", "s8")
    for kind in kinds:
        whole = run(case, kind, q)
        with mock.patch.object(pooling, "_POOL_BLOCK", 1):
            by_rows = run(case, kind, q)
        np.testing.assert_array_equal(by_rows, whole)


@pytest.mark.parametrize("shape", [(1, 2048, 2048, 2), (1 << 20, 2, 2, 4)], ids=["image", "batch"])
def test_quantized_average_memory_follows_the_input_not_an_int64_copy(shape):
    # 8 MB of uint8, 2x2 windows, stride 2: the kernel used to sum an int64 copy of the
    # whole input (8 times it); blocks of output rows convert only their own rows.
    x = np.random.default_rng(0).integers(0, 256, shape).astype(np.uint8)
    n, h, w, c = shape
    params = [I(2), I(2), I(2), I(2), I(2), I(0)]
    q = {"scale": 0.5, "zero_point": 7}
    model, feeds = single_op_model(
        O.AVERAGE_POOL_2D,
        [tensor(T.TENSOR_QUANT8_ASYMM, x, **q), *params],
        [output(T.TENSOR_QUANT8_ASYMM, (n, h // 2, w // 2, c), **q)],
    )
    validate_model(model)
    (got,), peak = traced_peak(lambda: Executor(model).run(feeds))
    sums = x.reshape(n, h // 2, 2, w // 2, 2, c).sum(axis=(2, 4), dtype=np.int64)
    np.testing.assert_array_equal(got, (sums + 2) // 4)
    assert peak < 2 * (x.nbytes + got.nbytes) + (48 << 20), f"peak {peak >> 20} MB"


@given(cases())
def test_float16_close_to_float32(case):
    q = values(case)
    f32, f16 = run(case, "f32", q), run(case, "f16", q)
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL)


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------


def _rejected(fn):
    with pytest.raises(HalError) as e:
        fn()
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    return e.value.message


def test_rejects_padding_as_large_as_the_filter():
    params = [I(2), I(0), I(0), I(0), I(1), I(1), I(2), I(2), I(0)]
    assert "smaller than" in _rejected(lambda: _pool(O.MAX_POOL_2D, X44, params, (1, 3, 4, 1)))


@pytest.mark.parametrize(
    "bad", [[I(1), I(0), I(1), I(2), I(2), I(0)], [I(1), I(1), I(1), I(0), I(2), I(0)]]
)
def test_rejects_zero_stride_or_filter(bad):
    _rejected(lambda: _pool(O.AVERAGE_POOL_2D, X44, bad, (1, 2, 2, 1)))


@pytest.mark.parametrize(
    "out_scale, out_zero_point, valid", [(0.5, 3, True), (0.25, 3, False), (0.5, 4, False)]
)
def test_quantized_output_must_keep_the_input_quantization(out_scale, out_zero_point, valid):
    x = tensor(T.TENSOR_QUANT8_ASYMM, np.full((1, 2, 2, 1), 5), scale=0.5, zero_point=3)
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 1, 1, 1), scale=out_scale, zero_point=out_zero_point)]
    ins = [x, I(2), I(1), I(1), I(2), I(2), I(0)]
    if valid:
        (y,) = run_op(O.MAX_POOL_2D, ins, outs)
        assert y.ravel().tolist() == [5]
    else:
        assert "scale and zero point" in _rejected(lambda: run_op(O.MAX_POOL_2D, ins, outs))


def test_layout_needs_hal_1_2():
    params = [I(2), I(1), I(1), I(2), I(2), I(0), scalar(T.BOOL, False)]
    x = tensor(T.TENSOR_FLOAT32, X44)
    outs = [output(T.TENSOR_FLOAT32, (1, 3, 3, 1))]
    run_op(O.MAX_POOL_2D, [x, *params], outs, version=HalVersion.V1_2)
    _rejected(lambda: run_op(O.MAX_POOL_2D, [x, *params], outs, version=HalVersion.V1_1))


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android 11's validate leaves to prepare(), at execution
# ---------------------------------------------------------------------------------------


def _pool_model(params, op=O.MAX_POOL_2D, x_shape=(1, 4, 4, 1), out=(1, 2, 2, 1), out_t=None):
    t = T.TENSOR_FLOAT32
    ins = [tensor(t, np.zeros(x_shape)), *params]
    model, _ = single_op_model(op, ins, [output(out_t or t, out)])
    return model


@pytest.mark.parametrize(
    "model, deferrable, match",
    [
        # Pooling.cpp prepare() (PoolingParam::initialize) checks every parameter value.
        (_pool_model([I(0), I(2), I(2), I(2), I(2), I(0)]), True, "implicit padding"),
        (_pool_model([I(-1), I(0), I(0), I(0), I(2), I(2), I(2), I(2), I(0)]), True, "padding"),
        (_pool_model([I(2), I(0), I(2), I(2), I(2), I(0)]), True, "stride width"),
        (_pool_model([I(2), I(2), I(0), I(2), I(2), I(0)]), True, "stride height"),
        (_pool_model([I(2), I(2), I(2), I(0), I(2), I(0)], O.L2_POOL_2D), True, "filter width"),
        (
            _pool_model([I(2), I(2), I(2), I(2), I(0), I(0)], O.AVERAGE_POOL_2D),
            True,
            "filter height",
        ),
        (_pool_model([I(2), I(2), I(2), I(2), I(2), I(5)]), True, "fused activation"),
        # Android's validate: the operand types and the input rank.
        (_pool_model([I(2), I(2), I(2), I(2), I(2), I(0)], x_shape=(4, 4, 1)), False, "rank 4"),
        (
            _pool_model([I(2), I(2), I(2), I(2), I(2), I(0)], out_t=T.TENSOR_FLOAT16),
            False,
            "TENSOR_FLOAT16",
        ),
        (_pool_model([I(2), I(0), I(2), I(2), I(2), I(0)], x_shape=(4, 4, 1)), False, "rank 4"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(model, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match)
