"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D: hand-computed cases,
comparison with direct (per output pixel) formulations, integer requantization checked
against an independent scalar implementation, and the cross-type properties."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.executor import Executor
from driver.hal.types import ErrorStatus, HalError, HalVersion, SymmPerChannelQuantParams
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import conv
from driver.operations.conv import explicit_padding, explicit_padding_transpose, out_size
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

# ---------------------------------------------------------------------------------------
# Independent scalar references (pure Python integers, C semantics)
# ---------------------------------------------------------------------------------------


def _round_away(x: float) -> int:
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def ref_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, written out again: (Q31 multiplier, exponent)."""
    if real == 0:
        return 0, 0
    q, e = math.frexp(real)
    qf = _round_away(q * 2**31)
    if qf == 2**31:
        qf //= 2
        e += 1
    if e < -31:
        return 0, 0
    return qf, e


def ref_scale(acc: int, real: float) -> int:
    """MultiplyByQuantizedMultiplier(acc, QuantizeMultiplier(real)) on Python ints."""
    m, e = ref_multiplier(real)
    x = acc << max(e, 0)
    x = (x + 2**31) % 2**32 - 2**31
    if x == m == -(2**31):
        high = 2**31 - 1
    else:
        ab = x * m
        high = _trunc_div(ab + (2**30 if ab >= 0 else 1 - 2**30), 2**31)
    shift = max(-e, 0)
    mask = (1 << shift) - 1
    rem = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> shift) + (1 if rem > threshold else 0)


def ref_act_range(act: int, scale: float, zp: int, lo: int, hi: int) -> tuple[int, int]:
    def q(f):
        return zp + _round_away(float(np.float32(f) / np.float32(scale)))

    if act == 1:
        return max(lo, q(0.0)), hi
    if act == 2:
        return max(lo, q(-1.0)), min(hi, q(1.0))
    if act == 3:
        return max(lo, q(0.0)), min(hi, q(6.0))
    return lo, hi


def ref_requantize(acc, in_scale, filter_scales, out_scale, zo, act, out_type):
    """Per element: acc (int, last axis = channel) -> quantized outputs."""
    lo, hi = (0, 255) if out_type == T.TENSOR_QUANT8_ASYMM else (-128, 127)
    lo, hi = ref_act_range(act, out_scale, zo, lo, hi)
    acc = np.asarray(acc, dtype=np.int64)
    scales = np.broadcast_to(np.asarray(filter_scales, dtype=np.float32), (acc.shape[-1],))
    out = np.empty(acc.shape, dtype=np.int64)
    for idx in np.ndindex(acc.shape):
        real = float(np.float32(in_scale) * scales[idx[-1]]) / float(np.float32(out_scale))
        out[idx] = min(hi, max(lo, ref_scale(int(acc[idx]), real) + zo))
    return out


def act_float(y, act):
    return {
        0: y,
        1: np.maximum(y, 0),
        2: np.clip(y, -1, 1),
        3: np.clip(y, 0, 6),
    }[act]


# ---------------------------------------------------------------------------------------
# Direct formulations (a loop per output pixel and filter tap), NHWC, float64 or int
# ---------------------------------------------------------------------------------------


def direct_conv(x, w, pads, stride, dil, groups=1):
    n, h, wd, c = x.shape
    co, fh, fw, cg = w.shape
    left, right, top, bottom = pads
    (sh, sw), (dh, dw) = stride, dil
    oh = (h + top + bottom - (fh - 1) * dh - 1) // sh + 1
    ow = (wd + left + right - (fw - 1) * dw - 1) // sw + 1
    og = co // groups
    out = np.zeros((n, oh, ow, co), dtype=x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            for i in range(fh):
                for j in range(fw):
                    y, xx = oy * sh - top + i * dh, ox * sw - left + j * dw
                    if 0 <= y < h and 0 <= xx < wd:
                        for g in range(groups):
                            out[:, oy, ox, g * og : (g + 1) * og] += (
                                x[:, y, xx, g * cg : (g + 1) * cg]
                                @ w[g * og : (g + 1) * og, i, j].T
                            )
    return out


def direct_depthwise(x, w, pads, stride, dil, mult):
    n, h, wd, c = x.shape
    _, fh, fw, co = w.shape
    left, right, top, bottom = pads
    (sh, sw), (dh, dw) = stride, dil
    oh = (h + top + bottom - (fh - 1) * dh - 1) // sh + 1
    ow = (wd + left + right - (fw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, oh, ow, co), dtype=x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            for i in range(fh):
                for j in range(fw):
                    y, xx = oy * sh - top + i * dh, ox * sw - left + j * dw
                    if 0 <= y < h and 0 <= xx < wd:
                        out[:, oy, ox] += np.repeat(x[:, y, xx], mult, axis=-1) * w[0, i, j]
    return out


def direct_transpose(x, w, pads, stride, out_hw):
    n, h, wd, c = x.shape
    co, fh, fw, _ = w.shape
    left, _, top, _ = pads
    sh, sw = stride
    oh, ow = out_hw
    out = np.zeros((n, oh, ow, co), dtype=x.dtype)
    for y in range(h):
        for xx in range(wd):
            for i in range(fh):
                for j in range(fw):
                    oy, ox = y * sh + i - top, xx * sw + j - left
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox] += x[:, y, xx] @ w[:, i, j].T
    return out


def transpose_same_pads(out: int, stride: int, filt: int, code: int) -> tuple[int, int]:
    """calculateExplicitPaddingTransposeConv written out again: the forward SAME split
    over the requested output size, then tail = total - head even when total < 0."""
    if code != 1:
        return 0, 0
    total = (math.ceil(out / stride) - 1) * stride + filt - out
    head = max(total, 0) // 2
    return head, total - head


# ---------------------------------------------------------------------------------------
# Cases and how to run them in every data type
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    op: int
    n: int
    h: int
    w: int
    cin: int
    cout: int
    fh: int
    fw: int
    stride: tuple[int, int] = (1, 1)  # (h, w)
    dil: tuple[int, int] = (1, 1)
    padding: object = "valid"  # "same", "valid" or (left, right, top, bottom)
    act: int = 0
    nchw: bool = False
    extra: int = 1  # depth multiplier / groups
    seed: int = 0

    def pads(self) -> tuple[int, int, int, int]:
        if isinstance(self.padding, tuple):
            return self.padding
        code = 1 if self.padding == "same" else 2
        if self.op == O.TRANSPOSE_CONV_2D:
            oh, ow = self.transpose_out_hw_requested()
            l_, r_ = transpose_same_pads(ow, self.stride[1], self.fw, code)
            t_, b_ = transpose_same_pads(oh, self.stride[0], self.fh, code)
            return l_, r_, t_, b_
        l_, r_ = explicit_padding(self.w, self.stride[1], self.fw, code, self.dil[1])
        t_, b_ = explicit_padding(self.h, self.stride[0], self.fh, code, self.dil[0])
        return l_, r_, t_, b_

    def transpose_out_hw_requested(self) -> tuple[int, int]:
        return self.h * self.stride[0], self.w * self.stride[1]

    def filter_shape(self) -> tuple[int, ...]:
        if self.op == O.DEPTHWISE_CONV_2D:
            return (1, self.fh, self.fw, self.cin * self.extra)
        if self.op == O.GROUPED_CONV_2D:
            return (self.cout, self.fh, self.fw, self.cin // self.extra)
        return (self.cout, self.fh, self.fw, self.cin)

    def n_out(self) -> int:
        return self.filter_shape()[3] if self.op == O.DEPTHWISE_CONV_2D else self.cout

    def out_hw(self) -> tuple[int, int]:
        left, right, top, bottom = self.pads()
        if self.op == O.TRANSPOSE_CONV_2D:
            sh, sw = self.stride
            return (
                self.h * sh + self.fh - sh - top - bottom,
                self.w * sw + self.fw - sw - left - right,
            )
        return (
            out_size(self.h, self.fh, self.stride[0], top, bottom, self.dil[0]),
            out_size(self.w, self.fw, self.stride[1], left, right, self.dil[1]),
        )

    def out_shape(self) -> tuple[int, ...]:
        oh, ow = self.out_hw()
        c = self.n_out()
        return (self.n, c, oh, ow) if self.nchw else (self.n, oh, ow, c)


def _params(case: Case) -> list:
    """The scalar inputs after (input, filter, bias), in the op's positional order."""
    implicit = not isinstance(case.padding, tuple)
    pad = (
        [scalar(T.INT32, 1 if case.padding == "same" else 2)]
        if implicit
        else [scalar(T.INT32, p) for p in case.padding]
    )
    stride = [scalar(T.INT32, case.stride[1]), scalar(T.INT32, case.stride[0])]
    act = [scalar(T.INT32, case.act)]
    layout = [scalar(T.BOOL, case.nchw)]
    dil = [scalar(T.INT32, case.dil[1]), scalar(T.INT32, case.dil[0])]
    need_dil = case.dil != (1, 1)
    if case.op == O.CONV_2D:
        tail = (layout if case.nchw or need_dil else []) + (dil if need_dil else [])
        return pad + stride + act + tail
    if case.op == O.DEPTHWISE_CONV_2D:
        tail = (layout if case.nchw or need_dil else []) + (dil if need_dil else [])
        return pad + stride + [scalar(T.INT32, case.extra)] + act + tail
    if case.op == O.GROUPED_CONV_2D:
        return pad + stride + [scalar(T.INT32, case.extra)] + act + layout
    # TRANSPOSE_CONV_2D
    if implicit:
        oh, ow = case.transpose_out_hw_requested()
        dims = [case.n, case.cout, oh, ow] if case.nchw else [case.n, oh, ow, case.cout]
        return [tensor(T.TENSOR_INT32, dims, const=True), *pad, *stride, *act, *layout]
    return pad + stride + act + layout


# Quantization of each kind: (input scale, zp), (filter scale, zp), (output scale, zp).
Q_IN, Q_FILTER, Q_OUT = (0.5, 120), (0.25, 130), (0.75, 125)
SIGNED = {"s8": "q8", "s8pc": "q8pc"}


@dataclass
class Values:
    """Real-valued operands of a case and their quantized forms."""

    x: np.ndarray  # NHWC
    w: np.ndarray
    b: np.ndarray
    qx: np.ndarray  # uint8 NHWC
    qw: np.ndarray  # uint8 (asymm filter)
    pcw: np.ndarray  # int8 per-channel filter
    pc_scales: np.ndarray
    qb: np.ndarray  # int32 bias for the asymm filter
    pcb: np.ndarray  # int32 bias for the per-channel filter


def make_values(case: Case) -> Values:
    rng = np.random.default_rng(case.seed)
    xs = (case.n, case.h, case.w, case.cin)
    fs = case.filter_shape()
    nb = case.n_out()
    qx = rng.integers(0, 256, xs).astype(np.uint8)
    qw = rng.integers(0, 256, fs).astype(np.uint8)
    pcw = rng.integers(-127, 128, fs).astype(np.int8)
    channel_dim = 3 if case.op == O.DEPTHWISE_CONV_2D else 0
    pc_scales = np.array([0.125 * (1 + k % 4) for k in range(fs[channel_dim])], dtype=np.float32)
    qb = rng.integers(-2000, 2000, nb).astype(np.int32)
    pcb = rng.integers(-2000, 2000, nb).astype(np.int32)
    x = (qx.astype(np.float64) - Q_IN[1]) * Q_IN[0]
    w = (qw.astype(np.float64) - Q_FILTER[1]) * Q_FILTER[0]
    b = qb * (Q_IN[0] * Q_FILTER[0])
    return Values(x, w, b, qx, qw, pcw, pc_scales, qb, pcb)


def to_layout(a: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2)) if nchw else a


def run_case(case: Case, kind: str, vals: Values | None = None) -> np.ndarray:
    """Run ``case`` with data type ``kind`` (f32, f16, q8, s8, q8pc, s8pc); quantized
    results come back as int64 in the unsigned domain (signed + 128)."""
    v = vals or make_values(case)
    params = _params(case)
    signed = kind in SIGNED
    base = SIGNED.get(kind, kind)
    if base in ("f32", "f16"):
        tt = T.TENSOR_FLOAT32 if base == "f32" else T.TENSOR_FLOAT16
        ins = [
            tensor(tt, to_layout(v.x, case.nchw)),
            tensor(tt, v.w, const=True),
            tensor(tt, v.b, const=True),
        ]
        (y,) = run_op(case.op, ins + params, [output(tt, case.out_shape())])
        return y.astype(np.float64)
    tt = T.TENSOR_QUANT8_ASYMM_SIGNED if signed else T.TENSOR_QUANT8_ASYMM
    off = -128 if signed else 0
    qx = to_layout(v.qx.astype(np.int64) + off, case.nchw)
    ins = [tensor(tt, qx, scale=Q_IN[0], zero_point=Q_IN[1] + off)]
    if base == "q8":
        ins.append(
            tensor(
                tt,
                v.qw.astype(np.int64) + off,
                scale=Q_FILTER[0],
                zero_point=Q_FILTER[1] + off,
                const=True,
            )
        )
        ins.append(tensor(T.TENSOR_INT32, v.qb, scale=Q_IN[0] * Q_FILTER[0], const=True))
    else:
        channel_dim = 3 if case.op == O.DEPTHWISE_CONV_2D else 0
        cq = SymmPerChannelQuantParams(channel_dim, tuple(float(s) for s in v.pc_scales))
        ins.append(tensor(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, v.pcw, channel_quant=cq, const=True))
        ins.append(tensor(T.TENSOR_INT32, v.pcb, const=True))
    outs = [output(tt, case.out_shape(), scale=Q_OUT[0], zero_point=Q_OUT[1] + off)]
    (y,) = run_op(case.op, ins + params, outs)
    return y.astype(np.int64) - off


def direct_float(case: Case, x, w, b) -> np.ndarray:
    """The direct formulation of ``case`` on NHWC float64/int arrays, in case's layout."""
    pads = case.pads()
    if case.op == O.DEPTHWISE_CONV_2D:
        y = direct_depthwise(x, w, pads, case.stride, case.dil, case.extra)
    elif case.op == O.TRANSPOSE_CONV_2D:
        y = direct_transpose(x, w, pads, case.stride, case.out_hw())
    else:
        groups = case.extra if case.op == O.GROUPED_CONV_2D else 1
        y = direct_conv(x, w, pads, case.stride, case.dil, groups)
    return to_layout(y + b, case.nchw)


def expected_quant(case: Case, kind: str, v: Values) -> np.ndarray:
    """Integer accumulation by the direct formulation + the scalar requantization."""
    base = SIGNED.get(kind, kind)
    xi = v.qx.astype(np.int64) - Q_IN[1]
    if base == "q8":
        wi, bias, fscales = v.qw.astype(np.int64) - Q_FILTER[1], v.qb, Q_FILTER[0]
    else:
        wi, bias, fscales = v.pcw.astype(np.int64), v.pcb, v.pc_scales
    acc = direct_float(replace(case, nchw=False), xi, wi, bias.astype(np.int64))
    q = ref_requantize(acc, Q_IN[0], fscales, Q_OUT[0], Q_OUT[1], case.act, T.TENSOR_QUANT8_ASYMM)
    return to_layout(q, case.nchw)


# ---------------------------------------------------------------------------------------
# Padding helpers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "in_size, stride, filt, code, dil, expected",
    [
        (5, 2, 3, 1, 1, (1, 1)),  # SAME: 3 outputs need 7 pixels
        (4, 2, 3, 1, 1, (0, 1)),  # the odd pixel goes to the tail
        (4, 1, 2, 1, 1, (0, 1)),
        (5, 1, 3, 1, 2, (2, 2)),  # dilation 2: effective filter 5
        (1, 1, 5, 1, 1, (2, 2)),  # filter larger than the input
        (6, 3, 1, 1, 1, (0, 0)),
        (5, 2, 3, 2, 1, (0, 0)),  # VALID pads nothing
    ],
)
def test_explicit_padding(in_size, stride, filt, code, dil, expected):
    assert explicit_padding(in_size, stride, filt, code, dil) == expected


def test_out_size():
    assert out_size(5, 3, 2, 1, 1) == 3
    assert out_size(5, 3, 1, 0, 0, dilation=2) == 1
    assert out_size(4, 3, 2, 0, 0) == 1


# ---------------------------------------------------------------------------------------
# Hand-computed cases
# ---------------------------------------------------------------------------------------

X33 = np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
F22 = np.array([1, 2, 3, 4], dtype=np.float32).reshape(1, 2, 2, 1)


def _conv_f32(x, f, b, params, out_shape, op=O.CONV_2D, version=None):
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, b, const=True),
    ]
    (y,) = run_op(op, ins + params, [output(T.TENSOR_FLOAT32, out_shape)], version=version)
    return y


def I(v):  # noqa: E743 - a terse INT32 scalar for parameter lists
    return scalar(T.INT32, v)


def test_conv_valid_by_hand():
    y = _conv_f32(X33, F22, [0.0], [I(2), I(1), I(1), I(0)], (1, 2, 2, 1))
    # 1*1 + 2*2 + 4*3 + 5*4 = 37, ...
    np.testing.assert_array_equal(y.reshape(2, 2), [[37, 47], [67, 77]])


def test_conv_same_by_hand_pads_the_tail():
    y = _conv_f32(X33, F22, [0.0], [I(1), I(1), I(1), I(0)], (1, 3, 3, 1), version=HalVersion.V1_0)
    np.testing.assert_array_equal(y.reshape(3, 3), [[37, 47, 21], [67, 77, 33], [23, 26, 9]])


def test_conv_explicit_padding_stride_bias_relu():
    # pad 1 on every side, stride 2: windows centred at (0,0), (0,2), (2,0), (2,2)
    ones = np.ones((1, 3, 3, 1), dtype=np.float32)
    y = _conv_f32(X33, ones, [-20.0], [I(1), I(1), I(1), I(1), I(2), I(2), I(1)], (1, 2, 2, 1))
    # sums of the 2x2 corner blocks: 12, 16, 24, 28; minus 20, relu
    np.testing.assert_array_equal(y.reshape(2, 2), [[0, 0], [4, 8]])


def test_conv_dilation_by_hand():
    x = np.arange(25, dtype=np.float32).reshape(1, 5, 5, 1)
    f = np.array([1, 0, 0, 1], dtype=np.float32).reshape(1, 2, 2, 1)
    # VALID, dilation 2: taps (0,0) and (2,2) -> x[y, x] + x[y+2, x+2]
    params = [I(2), I(1), I(1), I(0), scalar(T.BOOL, False), I(2), I(2)]
    y = _conv_f32(x, f, [0.0], params, (1, 3, 3, 1))
    want = x[0, :3, :3, 0] + x[0, 2:, 2:, 0]
    np.testing.assert_array_equal(y.reshape(3, 3), want)


def test_conv_filter_larger_than_input_with_same_padding():
    x = np.array([1, 2, 3, 4], dtype=np.float32).reshape(1, 2, 2, 1)
    f = np.ones((1, 5, 5, 1), dtype=np.float32)
    y = _conv_f32(x, f, [0.5], [I(1), I(1), I(1), I(0)], (1, 2, 2, 1))
    np.testing.assert_array_equal(y.reshape(2, 2), np.full((2, 2), 10.5))


def test_conv_one_by_one_output_batch_and_channels():
    x = np.stack([np.ones((2, 2, 2)), 2 * np.ones((2, 2, 2))]).astype(np.float32)
    f = np.stack([np.ones((2, 2, 2)), -np.ones((2, 2, 2))]).astype(np.float32)
    y = _conv_f32(x, f, [1.0, 0.0], [I(2), I(1), I(1), I(0)], (2, 1, 1, 2))
    np.testing.assert_array_equal(y.reshape(2, 2), [[9, -8], [17, -16]])


def test_depthwise_multiplier_by_hand():
    x = np.array([1, 10, 2, 20], dtype=np.float32).reshape(1, 1, 2, 2)  # 2 channels
    f = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.float32).reshape(1, 1, 2, 4)
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, [0, 0, 0, 100], const=True),
    ]
    (y,) = run_op(
        O.DEPTHWISE_CONV_2D,
        [*ins, I(2), I(1), I(1), I(2), I(0)],
        [output(T.TENSOR_FLOAT32, (1, 1, 1, 4))],
    )
    # out channel c*2+m: x[.,.,0,c]*f[0,0,0,c*2+m] + x[.,.,1,c]*f[0,0,1,c*2+m]
    np.testing.assert_array_equal(y.reshape(4), [1 + 10, 2 + 12, 30 + 140, 40 + 160 + 100])


def test_grouped_conv_by_hand():
    x = np.array([1, 2, 3, 4], dtype=np.float32).reshape(1, 1, 1, 4)
    f = np.array([[1, 1], [1, -1], [2, 0], [0, 3]], dtype=np.float32).reshape(4, 1, 1, 2)
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, [0, 0, 0, 0], const=True),
    ]
    (y,) = run_op(
        O.GROUPED_CONV_2D,
        [*ins, I(2), I(1), I(1), I(2), I(0), scalar(T.BOOL, False)],
        [output(T.TENSOR_FLOAT32, (1, 1, 1, 4))],
    )
    # group 0 sees channels (1, 2), group 1 sees (3, 4)
    np.testing.assert_array_equal(y.reshape(4), [3, -1, 6, 12])


def _transpose_conv_1x2_inputs() -> list:
    """Input [1, 2] (1x1x2x1), filter [1, 10, 100] (1x1x3x1), bias 0."""
    x = np.array([1, 2], dtype=np.float32).reshape(1, 1, 2, 1)
    f = np.array([1, 10, 100], dtype=np.float32).reshape(1, 1, 3, 1)
    return [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, [0.0], const=True),
    ]


def test_transpose_conv_by_hand():
    ins = _transpose_conv_1x2_inputs()
    params = [I(0), I(0), I(0), I(0), I(2), I(1), I(0), scalar(T.BOOL, False)]
    (y,) = run_op(O.TRANSPOSE_CONV_2D, ins + params, [output(T.TENSOR_FLOAT32, (1, 1, 5, 1))])
    # 1 scatters (1, 10, 100) at 0; 2 scatters (2, 20, 200) at 2
    np.testing.assert_array_equal(y.reshape(5), [1, 10, 102, 20, 200])


def test_transpose_conv_output_shape_form_crops_same_padding():
    x = np.array([1, 2], dtype=np.float32).reshape(1, 1, 2, 1)
    f = np.array([1, 10, 100], dtype=np.float32).reshape(1, 1, 3, 1)
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, [0.0], const=True),
        tensor(T.TENSOR_INT32, [1, 1, 4, 1], const=True),
    ]
    params = [I(1), I(2), I(1), I(0), scalar(T.BOOL, False)]
    (y,) = run_op(O.TRANSPOSE_CONV_2D, ins + params, [output(T.TENSOR_FLOAT32, (1, 1, 4, 1))])
    # SAME for 4 outputs, stride 2, filter 3: total padding 1 -> (0, 1): crop the last
    np.testing.assert_array_equal(y.reshape(4), [1, 10, 102, 20])


@pytest.mark.parametrize(
    "out, stride, filt, code, expected",
    [
        (4, 2, 3, 1, (0, 1)),  # the forward split: total 1, the odd pixel at the tail
        (4, 3, 3, 1, (1, 1)),
        (4, 2, 1, 1, (0, -1)),  # taps at 0 and 2 only: a negative tail reaches 4
        (6, 3, 2, 1, (0, -1)),
        (7, 4, 1, 1, (0, -2)),  # taps at 0 and 4: 7 = 2 * 4 + 1 - 4 + 2
        (4, 2, 1, 2, (0, 0)),  # VALID pads nothing
    ],
)
def test_transpose_explicit_padding(out, stride, filt, code, expected):
    assert explicit_padding_transpose(out, stride, filt, code) == expected
    assert transpose_same_pads(out, stride, filt, code) == expected


def test_transpose_conv_same_negative_tail_keeps_the_requested_shape():
    # Output shape [1, 2, 6, 1], stride 3 (both axes), 2x2 filter: Android pads (0, -1)
    # on each axis (total (2 - 1) * 3 + 2 - 6 = -1), so the output is 6x6 as requested,
    # input (i, j) scattering its 2x2 product block at (3i, 3j); rows/columns 2 and 5
    # are reached by no tap and hold the bias alone.
    x = np.array([1, 2, 3, 4], dtype=np.float32).reshape(1, 2, 2, 1)
    f = np.array([1, 10, 100, 1000], dtype=np.float32).reshape(1, 2, 2, 1)
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, [-1.0], const=True),
        tensor(T.TENSOR_INT32, [1, 6, 6, 1], const=True),
    ]
    params = [I(1), I(3), I(3), I(0), scalar(T.BOOL, False)]
    (y,) = run_op(O.TRANSPOSE_CONV_2D, ins + params, [output(T.TENSOR_FLOAT32, (1, 6, 6, 1))])
    want = np.full((6, 6), -1.0)
    for i, j, v in ((0, 0, 1), (0, 1, 2), (1, 0, 3), (1, 1, 4)):
        want[3 * i : 3 * i + 2, 3 * j : 3 * j + 2] += v * np.array([[1, 10], [100, 1000]])
    np.testing.assert_array_equal(y.reshape(6, 6), want)


@pytest.mark.parametrize(
    "pads, out_w, valid",
    [
        # (left, right, top, bottom); width 2 * 2 + 3 - 2 - left - right
        ((0, -1, 0, 0), 6, True),  # a negative tail widens the output: Android allows it
        ((0, -2, 0, -1), 7, True),
        ((-1, 0, 0, 0), 6, False),  # the head must be >= 0
        ((0, 0, -1, 0), 5, False),
    ],
)
def test_transpose_conv_explicit_padding_tail_may_be_negative(pads, out_w, valid):
    # TransposeConv2dParam::initialize checks only paddingLeft/paddingTop >= 0 (its
    # comment: the tail may be negative); CONV_2D's explicit pads are all >= 0.
    ins = _transpose_conv_1x2_inputs()
    left, right, top, bottom = pads
    out_h = 1 - top - bottom
    params = [I(left), I(right), I(top), I(bottom), I(2), I(1), I(0), scalar(T.BOOL, False)]
    outs = [output(T.TENSOR_FLOAT32, (1, out_h, out_w, 1))]
    if not valid:
        assert "padding" in _rejects(lambda: run_op(O.TRANSPOSE_CONV_2D, ins + params, outs))
        return
    (y,) = run_op(O.TRANSPOSE_CONV_2D, ins + params, outs)
    # [1, 10, 102, 20, 200] then positions no tap reaches (bias only)
    full = np.zeros((out_h, out_w), dtype=np.float32)
    full[0, :5] = [1, 10, 102, 20, 200]
    np.testing.assert_array_equal(y.reshape(out_h, out_w), full)


def test_conv_quant8_by_hand():
    # input scale 0.5 zp 10; filter scale 0.5 zp 3; bias scale 0.25; output scale 1 zp 5
    x = np.array([12, 14, 16, 18], dtype=np.uint8).reshape(1, 2, 2, 1)  # reals 1, 2, 3, 4
    f = np.array([5, 1, 3, 7], dtype=np.uint8).reshape(1, 2, 2, 1)  # reals 1, -1, 0, 2
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, x, scale=0.5, zero_point=10),
        tensor(T.TENSOR_QUANT8_ASYMM, f, scale=0.5, zero_point=3, const=True),
        tensor(T.TENSOR_INT32, [6], scale=0.25, const=True),  # 1.5
    ]
    (y,) = run_op(
        O.CONV_2D,
        [*ins, I(2), I(1), I(1), I(0)],
        [output(T.TENSOR_QUANT8_ASYMM, (1, 1, 1, 1), scale=1.0, zero_point=5)],
    )
    # real: 1 - 2 + 0 + 8 + 1.5 = 8.5 -> round half away: 9, + zp 5
    assert y.reshape(()) == 14


# ---------------------------------------------------------------------------------------
# Kernels against the direct formulations, every form
# ---------------------------------------------------------------------------------------

CASES = [
    Case(O.CONV_2D, 1, 5, 4, 3, 2, 3, 3, padding="same"),
    Case(O.CONV_2D, 2, 5, 6, 2, 3, 3, 2, stride=(2, 1), padding="valid", act=1),
    Case(O.CONV_2D, 1, 6, 6, 2, 2, 2, 3, stride=(2, 3), padding=(1, 0, 2, 1), act=3),
    Case(O.CONV_2D, 1, 7, 6, 2, 2, 3, 2, dil=(2, 3), padding="same", nchw=True),
    Case(O.CONV_2D, 1, 7, 7, 1, 2, 2, 2, dil=(3, 2), stride=(2, 2), padding=(1, 1, 0, 2), act=2),
    Case(O.CONV_2D, 1, 2, 2, 1, 1, 4, 3, padding="same"),  # filter larger than input
    Case(O.CONV_2D, 3, 3, 3, 2, 2, 3, 3, padding="valid", nchw=True),  # 1x1 outputs, batch 3
    Case(O.CONV_2D, 2, 4, 4, 3, 4, 1, 1, stride=(2, 2), padding="valid"),  # 1x1 filter
    Case(O.DEPTHWISE_CONV_2D, 1, 5, 5, 2, 0, 3, 3, padding="same", extra=2),
    Case(O.DEPTHWISE_CONV_2D, 2, 6, 5, 3, 0, 2, 3, stride=(2, 2), padding="valid", act=1),
    Case(
        O.DEPTHWISE_CONV_2D,
        1,
        7,
        6,
        2,
        0,
        2,
        2,
        dil=(2, 2),
        padding=(1, 0, 0, 1),
        extra=3,
        nchw=True,
    ),
    Case(O.DEPTHWISE_CONV_2D, 1, 3, 3, 1, 0, 3, 3, padding="valid", extra=4, act=3),
    Case(O.GROUPED_CONV_2D, 1, 5, 5, 4, 6, 3, 3, padding="same", extra=2),
    Case(
        O.GROUPED_CONV_2D,
        2,
        5,
        4,
        6,
        3,
        2,
        2,
        stride=(2, 1),
        padding=(1, 1, 0, 1),
        extra=3,
        act=1,
        nchw=True,
    ),
    Case(O.GROUPED_CONV_2D, 1, 4, 4, 4, 4, 1, 1, padding="valid", extra=4),
    Case(O.TRANSPOSE_CONV_2D, 1, 3, 2, 2, 3, 3, 3, stride=(2, 2), padding=(1, 0, 0, 1)),
    Case(O.TRANSPOSE_CONV_2D, 2, 2, 3, 3, 2, 2, 3, stride=(1, 2), padding="same", act=1),
    Case(O.TRANSPOSE_CONV_2D, 1, 3, 3, 2, 2, 3, 2, stride=(2, 1), padding="valid", nchw=True),
    Case(O.TRANSPOSE_CONV_2D, 1, 2, 2, 1, 1, 1, 1, stride=(3, 3), padding=(0, 0, 0, 0)),
    # SAME with filters shorter than the strides: negative tails (-1 on both axes).
    Case(O.TRANSPOSE_CONV_2D, 1, 2, 3, 2, 2, 2, 1, stride=(3, 2), padding="same", nchw=True),
]
# Fill in depthwise output counts and seeds.
CASES = [
    replace(c, seed=k, cout=c.cin * c.extra if c.op == O.DEPTHWISE_CONV_2D else c.cout)
    for k, c in enumerate(CASES)
]


def _id(c: Case) -> str:
    return (
        f"{O(c.op).name}-{c.n}x{c.h}x{c.w}x{c.cin}-f{c.fh}x{c.fw}-s{c.stride}-d{c.dil}"
        f"-{c.padding}-a{c.act}{'-nchw' if c.nchw else ''}-x{c.extra}"
    )


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_float32_matches_direct_formulation(case):
    v = make_values(case)
    got = run_case(case, "f32", v)
    want = act_float(direct_float(case, v.x, v.w, v.b), case.act)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", ["q8", "q8pc", "s8", "s8pc"])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_quantized_matches_integer_reference(case, kind):
    v = make_values(case)
    got = run_case(case, kind, v)
    np.testing.assert_array_equal(got, expected_quant(case, kind, v))


def _fp16_representable(v: Values) -> None:
    """Scale the reals down by powers of two (exact) so sums stay far below float16's
    65504: both types then run on identical values."""
    v.x, v.w, v.b = v.x / 8, v.w / 8, v.b / 64


@pytest.mark.parametrize("case", CASES[:4] + CASES[8:10] + CASES[12:13] + CASES[15:16], ids=_id)
def test_float16_within_relaxed_tolerance_of_float32(case):
    v = make_values(case)
    _fp16_representable(v)
    f32 = run_case(case, "f32", v)
    f16 = run_case(case, "f16", v)
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL * np.abs(f32).max())


# ---------------------------------------------------------------------------------------
# Properties over random cases
# ---------------------------------------------------------------------------------------


@st.composite
def cases(draw) -> Case:
    op = draw(
        st.sampled_from([O.CONV_2D, O.DEPTHWISE_CONV_2D, O.GROUPED_CONV_2D, O.TRANSPOSE_CONV_2D])
    )
    fh, fw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (1, 1)
    if op in (O.CONV_2D, O.DEPTHWISE_CONV_2D) and draw(st.booleans()):
        dil = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    extra = draw(st.integers(1, 3))
    cin = draw(st.integers(1, 3)) * (extra if op == O.GROUPED_CONV_2D else 1)
    cout = draw(st.integers(1, 3)) * (extra if op == O.GROUPED_CONV_2D else 1)
    if op == O.DEPTHWISE_CONV_2D:
        cout = cin * extra
    padding = draw(
        st.one_of(
            st.sampled_from(["same", "valid"]),
            st.tuples(*[st.integers(0, 2)] * 4),
        )
    )
    case = Case(
        op, draw(st.integers(1, 2)), h, w, cin, cout, fh, fw, stride, dil, padding,
        act=draw(st.integers(0, 3)), nchw=draw(st.booleans()), extra=extra,
        seed=draw(st.integers(0, 2**16)),
    )  # fmt: skip
    if op == O.GROUPED_CONV_2D:
        left, right, top, bottom = case.pads()
        if not (fw > max(left, right) and fh > max(top, bottom)):
            case = replace(case, padding="valid")
    oh, ow = case.out_hw()
    if oh <= 0 or ow <= 0:
        case = replace(case, padding="same" if op != O.TRANSPOSE_CONV_2D else (0, 0, 0, 0))
    return case


@given(cases())
def test_nchw_is_the_transpose_of_nhwc(case):
    v = make_values(case)
    for kind in ("f32", "q8pc"):
        nhwc = run_case(replace(case, nchw=False), kind, v)
        nchw = run_case(replace(case, nchw=True), kind, v)
        np.testing.assert_array_equal(nchw, nhwc.transpose(0, 3, 1, 2))


@given(cases())
def test_signed_equals_unsigned_minus_128(case):
    # run_case maps signed results back to the unsigned domain (+128)
    v = make_values(case)
    np.testing.assert_array_equal(run_case(case, "s8", v), run_case(case, "q8", v))
    np.testing.assert_array_equal(run_case(case, "s8pc", v), run_case(case, "q8pc", v))


@given(cases())
def test_quantized_within_one_of_requantized_float(case):
    v = make_values(case)
    real = act_float(run_case(case, "f32", v), case.act)  # f32 on the dequantized values
    want = np.clip(np.vectorize(_round_away)(real / Q_OUT[0]) + Q_OUT[1], 0, 255)
    got = run_case(case, "q8", v)
    assert np.abs(got - want).max(initial=0) <= 1


@given(cases())
def test_float16_close_to_float32(case):
    v = make_values(case)
    _fp16_representable(v)
    f32 = run_case(case, "f32", v)
    f16 = run_case(case, "f16", v)
    scale = max(1.0, float(np.abs(f32).max(initial=0)))
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL * scale)


# ---------------------------------------------------------------------------------------
# Validation: what the declarations reject
# ---------------------------------------------------------------------------------------


def _rejects(fn) -> str:
    with pytest.raises(HalError) as e:
        fn()
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    return e.value.message


def test_rejects_channel_mismatch():
    f = np.ones((1, 2, 2, 2), dtype=np.float32)
    msg = _rejects(lambda: _conv_f32(X33, f, [0.0], [I(2), I(1), I(1), I(0)], (1, 2, 2, 1)))
    assert "depth" in msg


@pytest.mark.parametrize(
    "params, what",
    [
        ([I(3), I(1), I(1), I(0)], "implicit padding"),
        ([I(2), I(0), I(1), I(0)], "stride"),
        ([I(2), I(1), I(1), I(4)], "activation"),
        ([I(-1), I(0), I(0), I(0), I(1), I(1), I(0)], "padding"),
        ([I(2), I(1), I(1), I(0), scalar(T.BOOL, False), I(0), I(1)], "dilation"),
    ],
)
def test_rejects_bad_parameters(params, what):
    msg = _rejects(lambda: _conv_f32(X33, F22, [0.0], params, (1, 2, 2, 1)))
    assert what in msg


def test_rejects_filter_that_does_not_fit():
    f = np.ones((1, 4, 4, 1), dtype=np.float32)
    msg = _rejects(lambda: _conv_f32(X33, f, [0.0], [I(2), I(1), I(1), I(0)], (1, 1, 1, 1)))
    assert "does not fit" in msg


def test_rejects_bias_scale_mismatch():
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 2, 2, 1)), scale=0.5, zero_point=0),
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 1, 1, 1)), scale=0.5, const=True),
        tensor(T.TENSOR_INT32, [0], scale=0.3, const=True),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=1.0)]
    msg = _rejects(lambda: run_op(O.CONV_2D, [*ins, I(2), I(1), I(1), I(0)], outs))
    assert "bias" in msg


def test_per_channel_filter_needs_the_right_channel_dim():
    cq = SymmPerChannelQuantParams(3, (0.5,))  # conv wants channelDim 0
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 2, 2, 1)), scale=0.5),
        tensor(
            T.TENSOR_QUANT8_SYMM_PER_CHANNEL, np.zeros((1, 1, 1, 1)), channel_quant=cq, const=True
        ),
        tensor(T.TENSOR_INT32, [0], const=True),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=1.0)]
    msg = _rejects(lambda: run_op(O.CONV_2D, [*ins, I(2), I(1), I(1), I(0)], outs))
    assert "channelDim" in msg


def test_hal_versions():
    args = [I(2), I(1), I(1), I(0)]
    _conv_f32(X33, F22, [0.0], args, (1, 2, 2, 1), version=HalVersion.V1_0)
    # the layout flag needs HAL 1.2
    _rejects(
        lambda: _conv_f32(
            X33, F22, [0.0], [*args, scalar(T.BOOL, False)], (1, 2, 2, 1), version=HalVersion.V1_1
        )
    )
    # a quant8 output scale <= input * filter scale needs HAL 1.2
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 2, 2, 1)), scale=1.0),
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 1, 1, 1)), scale=1.0, const=True),
        tensor(T.TENSOR_INT32, [0], scale=1.0, const=True),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=0.5)]
    run_op(O.CONV_2D, ins + args, outs, version=HalVersion.V1_2)
    msg = _rejects(lambda: run_op(O.CONV_2D, ins + args, outs, version=HalVersion.V1_1))
    assert "1.2" in msg


def test_grouped_conv_rejects_indivisible_groups():
    x = np.ones((1, 1, 1, 3), dtype=np.float32)
    f = np.ones((2, 1, 1, 1), dtype=np.float32)
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, f, const=True),
        tensor(T.TENSOR_FLOAT32, [0, 0], const=True),
    ]
    params = [I(2), I(1), I(1), I(2), I(0), scalar(T.BOOL, False)]
    _rejects(
        lambda: run_op(O.GROUPED_CONV_2D, ins + params, [output(T.TENSOR_FLOAT32, (1, 1, 1, 2))])
    )


def test_zero_sized_batch_runs():
    x = np.zeros((0, 3, 3, 1), dtype=np.float32)
    ins = [
        tensor(T.TENSOR_FLOAT32, x, declared_dims=(0, 3, 3, 1)),
        tensor(T.TENSOR_FLOAT32, F22, const=True),
        tensor(T.TENSOR_FLOAT32, [0.0], const=True),
    ]
    (y,) = run_op(
        O.CONV_2D, [*ins, I(2), I(1), I(1), I(0)], [output(T.TENSOR_FLOAT32, (0, 2, 2, 1))]
    )
    assert y.shape == (0, 2, 2, 1)


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android 11's validate leaves to prepare(), at execution
# ---------------------------------------------------------------------------------------

_F = T.TENSOR_FLOAT32
_Q = T.TENSOR_QUANT8_ASYMM
_PC = T.TENSOR_QUANT8_SYMM_PER_CHANNEL


def _conv_model(
    op=O.CONV_2D,
    params=None,
    x_shape=(1, 3, 3, 1),
    f_shape=(1, 2, 2, 1),
    b_shape=(1,),
    out=(1, 2, 2, 1),
    quant=None,
):
    """A one-operation convolution model. ``quant``: (filter type, filter channel quant,
    bias scale, output scale) for a QUANT8_ASYMM input of scale 0.5."""
    if params is None:
        params = (I(2), I(1), I(1), I(0))
    if quant is None:
        ins = [
            tensor(_F, np.zeros(x_shape)),
            tensor(_F, np.zeros(f_shape), const=True),
            tensor(_F, np.zeros(b_shape), const=True),
        ]
        outs = [output(_F, out)]
    else:
        tf, cq, bias_scale, out_scale = quant
        ins = [
            tensor(_Q, np.zeros(x_shape), scale=0.5),
            tensor(tf, np.zeros(f_shape), scale=0.0 if cq else 0.5, channel_quant=cq, const=True),
            tensor(T.TENSOR_INT32, np.zeros(b_shape), scale=bias_scale, const=True),
        ]
        outs = [output(_Q, out, scale=out_scale)]
    model, _ = single_op_model(op, [*ins, *params], outs)
    return model


_NO_LAYOUT = scalar(T.BOOL, False)
V10, V13 = HalVersion.V1_0, HalVersion.V1_3
_BAD_CHANNEL_DIM = SymmPerChannelQuantParams(3, (0.5,))


@pytest.mark.parametrize(
    "model, version, deferrable, match",
    [
        # Conv2dParam::initialize / the kernels check every parameter value (prepare()).
        (_conv_model(params=(I(3), I(1), I(1), I(0))), V13, True, "implicit padding"),
        (_conv_model(params=(I(-1), I(0), I(0), I(0), I(1), I(1), I(0))), V13, True, "padding"),
        (_conv_model(params=(I(2), I(0), I(1), I(0))), V13, True, "stride width"),
        (_conv_model(params=(I(2), I(1), I(0), I(0))), V13, True, "stride height"),
        (
            _conv_model(params=(I(2), I(1), I(1), I(0), _NO_LAYOUT, I(0), I(1))),
            V13,
            True,
            "dilation width",
        ),
        (_conv_model(params=(I(2), I(1), I(1), I(4))), V13, True, "fused activation"),
        (
            _conv_model(O.DEPTHWISE_CONV_2D, (I(2), I(1), I(1), I(0), I(0)), f_shape=(1, 2, 2, 1)),
            V13,
            True,
            "depth multiplier",
        ),
        (
            _conv_model(O.GROUPED_CONV_2D, (I(2), I(1), I(1), I(0), I(0), _NO_LAYOUT)),
            V13,
            True,
            "number of groups",
        ),
        (
            _conv_model(
                O.TRANSPOSE_CONV_2D,
                (I(0), I(0), I(0), I(0), I(0), I(1), I(0), _NO_LAYOUT),
                out=(1, 4, 4, 1),
            ),
            V13,
            True,
            "stride width",
        ),
        # The bias rank: only prepare() checks it.
        (_conv_model(b_shape=(1, 1)), V13, True, "input 2 must have rank 1"),
        # GROUPED_CONV_2D's validateOperation checks no rank.
        (
            _conv_model(
                O.GROUPED_CONV_2D, (I(2), I(1), I(1), I(1), I(0), _NO_LAYOUT), x_shape=(3, 3, 1)
            ),
            V13,
            True,
            "input 0 must have rank 4",
        ),
        # The bias scale (GetQuantizedConvolutionMultipler, at execution)...
        (_conv_model(quant=(_Q, None, 0.3, 1.0)), V13, True, "bias\\) scale"),
        # ...unless the model's HAL version lacks the relaxed output scale rule it
        # relies on: Android's validateHalVersion rejects that model, and says so.
        (_conv_model(quant=(_Q, None, 0.3, 0.1)), V10, False, "CONV_2D needs HAL 1.2"),
        # Android's Conv2D/DepthwiseConv2D validate: input and filter ranks, channelDim.
        (_conv_model(x_shape=(3, 3, 1)), V13, False, "input 0 must have rank 4"),
        (_conv_model(f_shape=(2, 2, 1)), V13, False, "input 1 must have rank 4"),
        (_conv_model(quant=(_PC, _BAD_CHANNEL_DIM, 0.0, 1.0)), V13, False, "channelDim"),
        # A strict rule wins over an earlier deferrable one of the same operation.
        (
            _conv_model(b_shape=(1, 1), quant=(_PC, _BAD_CHANNEL_DIM, 0.0, 1.0)),
            V13,
            False,
            "channelDim",
        ),
    ],
)
def test_rejections_android_validation_leaves_to_execution(model, version, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match, version=version)


@given(cases())
def test_blocks_of_one_output_position_give_the_one_block_result(case):
    # Large outputs are computed, and requantized, a block of output positions (rows for
    # TRANSPOSE_CONV_2D) at a time, converting each block of the input (the batch split
    # too); one-element blocks must give exactly the one-block result.
    v = make_values(case)
    for kind in ("f32", "f16", "q8", "s8pc"):
        whole = run_case(case, kind, v)
        with mock.patch.multiple(conv, _IM2COL_BLOCK=1, _OUTPUT_BLOCK=1):
            by_rows = run_case(case, kind, v)
        np.testing.assert_array_equal(by_rows, whole)


@pytest.mark.parametrize("op", [O.CONV_2D, O.DEPTHWISE_CONV_2D])
def test_huge_padding_memory_follows_the_output_not_the_padding(op):
    # One 64-channel pixel padded by 300 on each side, 3x3 filter of ones: a 599x599
    # output. A padded copy of the input would hold 601*601*64 floats (92 MB) and its
    # im2col 9 times that; the kernels gather from the unpadded input, a block at a time.
    out_c = 1 if op == O.CONV_2D else 64
    multiplier = [] if op == O.CONV_2D else [I(1)]
    model, feeds = single_op_model(
        op,
        [
            tensor(T.TENSOR_FLOAT32, np.ones((1, 1, 1, 64), np.float32)),
            tensor(T.TENSOR_FLOAT32, np.ones((out_c if op == O.CONV_2D else 1, 3, 3, 64),
                                            np.float32), const=True),
            tensor(T.TENSOR_FLOAT32, np.zeros(out_c, np.float32), const=True),
            *[I(300)] * 4, I(1), I(1), *multiplier, I(0),
        ],
        [output(T.TENSOR_FLOAT32, (1, 599, 599, out_c))],
    )  # fmt: skip
    validate_model(model)
    (got,), peak = traced_peak(lambda: Executor(model).run(feeds))
    # The real pixel lies under every tap of the 3x3 windows at rows/columns 298..300.
    want = np.zeros_like(got)
    want[0, 298:301, 298:301] = 64.0 if op == O.CONV_2D else 1.0
    np.testing.assert_array_equal(got, want)
    assert peak < 3 * got.nbytes + (64 << 20), f"peak {peak >> 20} MB"


# (filter shape, parameters after the bias, output spatial shape) per operation, for a
# 2x2x2 input: small products, so memory, not arithmetic, dominates.
_BIG_BATCH_CASES = {
    O.CONV_2D: ((2, 2, 2, 2), [I(2), I(1), I(1), I(0)], (1, 1)),
    O.DEPTHWISE_CONV_2D: ((1, 2, 2, 2), [I(2), I(1), I(1), I(1), I(0)], (1, 1)),
    O.GROUPED_CONV_2D: ((2, 2, 2, 1), [I(2), I(1), I(1), I(2), I(0), scalar(T.BOOL, False)], (1, 1)),
    O.TRANSPOSE_CONV_2D: (
        (2, 2, 2, 2), [*[I(0)] * 4, I(1), I(1), I(0), scalar(T.BOOL, False)], (3, 3)
    ),
}  # fmt: skip


@pytest.mark.parametrize("op", list(_BIG_BATCH_CASES))
@pytest.mark.parametrize("t", [T.TENSOR_QUANT8_ASYMM, T.TENSOR_FLOAT16])
def test_memory_follows_the_input_not_its_exact_float_copy(op, t):
    # A million 2x2x2 images (8 MB quant8): the kernels used to convert the whole input
    # to float32/float64 (4-8 times it) before their blocks, and take blocks of one
    # position across the whole batch; they now convert each gathered block and split
    # the batch.
    quantized = t == T.TENSOR_QUANT8_ASYMM
    q = {"scale": 0.5, "zero_point": 3} if quantized else {}
    f_shape, params, (oh, ow) = _BIG_BATCH_CASES[op]

    def run(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.full((n, 2, 2, 2), 5, np.uint8 if quantized else np.float16)
        bias = (
            tensor(T.TENSOR_INT32, [4, -2], scale=0.25, const=True)
            if quantized
            else tensor(t, [4, -2], const=True)
        )
        model, feeds = single_op_model(
            op,
            [tensor(t, x, **q), tensor(t, np.full(f_shape, 4), const=True, **q), bias, *params],
            [output(t, (n, oh, ow, 2), **({"scale": 1.0, "zero_point": 0} if quantized else {}))],
        )
        validate_model(model)
        return x, Executor(model).run(feeds)[0]

    _, one = run(1)
    (x, got), peak = traced_peak(lambda: run(1 << 20))
    np.testing.assert_array_equal(got, np.broadcast_to(one, got.shape))
    assert peak < 2 * (x.nbytes + got.nbytes) + (48 << 20), f"peak {peak >> 20} MB"


def test_transpose_conv_huge_stride_crops_without_building_the_padded_output():
    # Stride 2**20 and padding 2**20 at the top and left: the 2x2 input spreads over a
    # (2**20 + 1)^2 output of which the model keeps the last position, where only the
    # bottom-right pixel (3) lands. The kernel adds just the taps inside the kept window
    # (it used to allocate the whole padded output: a MemoryError here).
    x = np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1)
    big = 1 << 20
    params = [I(big), I(0), I(big), I(0), I(big), I(big), I(0), scalar(T.BOOL, False)]
    w = np.ones((1, 1, 1, 1), np.float32)
    got = _conv_f32(x, w, [0.0], params, (1, 1, 1, 1), op=O.TRANSPOSE_CONV_2D)
    assert got.ravel().tolist() == [3.0]


def test_zero_batch_gives_an_empty_output_for_every_kernel():
    # Block sizes divide by the batch: a zero batch must still give the (empty) output.
    for op in (O.CONV_2D, O.DEPTHWISE_CONV_2D, O.GROUPED_CONV_2D, O.TRANSPOSE_CONV_2D):
        case = Case(
            op,
            0,
            3,
            3,
            2,
            2,
            2,
            2,
            (1, 1),
            (1, 1),
            "valid",
            extra=1 if op != O.GROUPED_CONV_2D else 2,
        )
        for kind in ("f32", "q8"):
            got = run_case(case, kind, make_values(case))
            assert got.shape[0] == 0


# ---------------------------------------------------------------------------------------
# Shape and quantization rules each operation's prepare() checks
# ---------------------------------------------------------------------------------------


def _float_conv(op, x_shape, f_shape, b_len, params, out_shape):
    ins = [
        tensor(T.TENSOR_FLOAT32, np.zeros(x_shape), declared_dims=x_shape),
        # a model input: a constant cannot have a zero-sized dimension
        tensor(T.TENSOR_FLOAT32, np.zeros(f_shape), declared_dims=f_shape),
        tensor(T.TENSOR_FLOAT32, np.zeros(b_len), const=True),
    ]
    return lambda: run_op(op, ins + params, [output(T.TENSOR_FLOAT32, out_shape)])


_VALID_1 = [I(2), I(1), I(1), I(0)]  # VALID, stride 1, no activation
_DEPTHWISE_1 = [*_VALID_1[:3], I(1), I(0)]  # the same, depth multiplier 1
_GROUPED_2 = [I(2), I(1), I(1), I(2), I(0), scalar(T.BOOL, False)]  # VALID, 2 groups


@pytest.mark.parametrize(
    "op, x_shape, f_shape, b_len, params, out_shape, what",
    [
        # one bias element per output channel: more is as wrong as fewer
        (O.CONV_2D, (1, 3, 3, 1), (1, 2, 2, 1), 2, _VALID_1, (1, 2, 2, 1), "bias"),
        (O.DEPTHWISE_CONV_2D, (1, 3, 3, 1), (1, 2, 2, 1), 2, _DEPTHWISE_1, (1, 2, 2, 1), "bias"),
        # depthwise filter depth is exactly input depth x multiplier (2 x 1, not 3)
        (
            O.DEPTHWISE_CONV_2D,
            (1, 3, 3, 2),
            (1, 2, 2, 3),
            3,
            _DEPTHWISE_1,
            (1, 2, 2, 3),
            "depth multiplier",
        ),
        # grouped: 3 outputs do not split into 2 groups
        (O.GROUPED_CONV_2D, (1, 3, 3, 2), (3, 2, 2, 1), 3, _GROUPED_2, (1, 2, 2, 3), "groups"),
        # grouped: a padding as large as the filter (bottom 2, filter 2x2)
        (
            O.GROUPED_CONV_2D,
            (1, 3, 3, 2),
            (2, 2, 2, 1),
            2,
            [I(0), I(0), I(0), I(2), *_GROUPED_2[1:]],
            (1, 4, 2, 2),
            "smaller than",
        ),
        # transpose: the filter's depth must be the input's (2, not 3)
        (
            O.TRANSPOSE_CONV_2D,
            (1, 2, 2, 2),
            (1, 1, 1, 3),
            1,
            [I(0)] * 4 + [I(1), I(1), I(0), scalar(T.BOOL, False)],
            (1, 2, 2, 1),
            "depth",
        ),
    ],
)
def test_rejects_mismatched_shapes(op, x_shape, f_shape, b_len, params, out_shape, what):
    assert what in _rejects(_float_conv(op, x_shape, f_shape, b_len, params, out_shape))


def test_input_of_depth_zero_fails_the_execution():
    # Only known at run time (a model input sized by the request): prepare() fails.
    run = _float_conv(O.CONV_2D, (1, 3, 3, 0), (1, 2, 2, 0), 1, _VALID_1, (1, 2, 2, 1))
    with pytest.raises(HalError) as e:
        run()
    assert e.value.status == ErrorStatus.GENERAL_FAILURE
    assert "non-zero height, width and depth" in e.value.message


@pytest.mark.parametrize("shape, ok", [([1, 1, 4, 1], True), ([1, 1, 4, 1, 1], False)])
def test_transpose_output_shape_operand_holds_four_values(shape, ok):
    ins = [
        tensor(T.TENSOR_FLOAT32, np.ones((1, 1, 2, 1))),
        tensor(T.TENSOR_FLOAT32, np.ones((1, 1, 3, 1)), const=True),
        tensor(T.TENSOR_FLOAT32, [0.0], const=True),
        tensor(T.TENSOR_INT32, shape, const=True),
    ]
    params = [I(1), I(2), I(1), I(0), scalar(T.BOOL, False)]

    def run():
        return run_op(O.TRANSPOSE_CONV_2D, ins + params, [output(T.TENSOR_FLOAT32, (1, 1, 4, 1))])

    if ok:
        run()
    else:
        assert "output shape" in _rejects(run)


def _quant8_conv(bias_scale: float, out_scale: float, version=None):
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 2, 2, 1)), scale=0.5),
        tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 1, 1, 1)), scale=0.25, const=True),
        tensor(T.TENSOR_INT32, [0], scale=bias_scale, const=True),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=out_scale)]
    return lambda: run_op(O.CONV_2D, [*ins, *_VALID_1], outs, version=version)


def test_bias_scale_tolerance_is_one_in_a_million():
    _quant8_conv(0.125 * (1 + 5e-7), 1.0)()
    assert "bias" in _rejects(_quant8_conv(0.125 * (1 + 1e-5), 1.0))


def test_output_scale_equal_to_input_times_filter_scale_needs_hal_1_2():
    # HAL 1.0/1.1 want outputScale strictly above inputScale * filterScale (0.125).
    _quant8_conv(0.125, 0.125, version=HalVersion.V1_2)()
    _quant8_conv(0.125, 0.126, version=HalVersion.V1_0)()
    assert "1.2" in _rejects(_quant8_conv(0.125, 0.125, version=HalVersion.V1_1))


def test_multiplier_uses_the_float32_product_of_the_scales():
    # 0.1f * 0.3f is 0.030000001192... in float32, 0.030000001639... in double: the
    # Q31 multipliers differ, and Android's is the float32 one.
    product = float(np.float32(0.1) * np.float32(0.3))
    assert product != float(np.float32(0.1)) * float(np.float32(0.3))
    mult, shift = conv.conv_multipliers(0.1, 0.3, 1.0)
    assert (int(mult[0]), int(shift[0])) == ref_multiplier(product)
