"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D (``conv.py``).

The parameter form (implicit or explicit padding, layout, dilation) is read off the
chosen signature. Quantized filters are per-tensor or per-channel; the bias scale is the
input scale times the filter scale (zero with per-channel filters, whose per-channel bias
scales follow from the filter's), and the output scale stays above that product when the
graph's HAL version predates the relaxed 1.2 rule."""

from __future__ import annotations

import math

import numpy as np

from randomgraph.generator.core import OpGen, Tensor
from randomgraph.generator.rules.base import O, T, is_quant, require, rule
from randomgraph.generator.values import Domain

RULES: dict = {}

I32 = T.TENSOR_INT32
PADDING_SAME, PADDING_VALID = 1, 2
_PER_CHANNEL = T.TENSOR_QUANT8_SYMM_PER_CHANNEL


def parse_form(params: tuple[int, ...], implicit_ints: int) -> tuple[bool, bool, bool]:
    """(explicit padding, has layout, has dilation) of a parameter list whose implicit
    form has ``implicit_ints`` INT32s before the optional BOOL layout."""
    n_int = next((k for k, p in enumerate(params) if p == T.BOOL), len(params))
    has_layout = n_int < len(params)
    has_dilation = has_layout and len(params) > n_int + 1
    return n_int != implicit_ints, has_layout, has_dilation


def nhwc(dims, nchw: bool) -> tuple[int, int, int, int]:
    return (dims[0], dims[2], dims[3], dims[1]) if nchw else tuple(dims)


def spatial_input(g: OpGen, t: int, nchw: bool, *, channels: int | None = None) -> Tensor:
    """A rank-4 input (NHWC or NCHW) with at least one element per spatial axis."""
    c_pos = 1 if nchw else 3

    def ok(c: Tensor) -> bool:
        return channels is None or c.dims[c_pos] == channels

    pattern: list = [None] * 4
    if channels is not None:
        pattern[c_pos] = channels
    return g.data(t, rank=4, dims=pattern, accept=ok, primary=True)


def window(g: OpGen, size: int, *, max_filter: int = 5, dilation: bool = False):
    """(filter, stride, dilation) along one axis of ``size`` elements; the dilated filter
    fits the axis (so VALID padding leaves an output)."""
    d = g.src.integer(1, 2) if dilation else 1
    limit = max(1, min(max_filter, (size - 1) // d + 1))
    k = g.src.integer(1, limit)
    s = g.src.integer(1, 3)
    return k, s, d


def padding_params(g: OpGen, explicit: bool, kh: int, kw: int) -> tuple[list, list[int]]:
    """Padding scalars: [code] or [left, right, top, bottom] (each below the filter)."""
    if not explicit:
        return [PADDING_SAME if g.src.boolean(0.5) else PADDING_VALID], []
    pads = [g.src.integer(0, kw - 1), g.src.integer(0, kw - 1)]
    pads += [g.src.integer(0, kh - 1), g.src.integer(0, kh - 1)]
    return pads, pads


def filter_scale(g: OpGen) -> float:
    return float(np.float32(g.src.real(0.002, 0.05)))


def quant_parts(
    g: OpGen, tin: int, tf: int, x: Tensor, filter_dims, channel_axis: int, k: int
) -> tuple[Tensor, Tensor, tuple[float, int]]:
    """Filter, bias and output quantization for a quantized convolution with ``k``
    products per output."""
    out_channels = filter_dims[channel_axis]
    if tf == _PER_CHANNEL:
        cq = g.channel_quant(filter_dims, channel_axis, base=filter_scale(g))
        w = g.fresh(tf, filter_dims, channel_quant=cq, const=None)
        bias_scale = 0.0
        product = x.scale * max(cq.scales)
    else:
        fs = filter_scale(g)
        w = g.fresh(tf, filter_dims, quant=(fs, g.qparams(tf)[1]))
        bias_scale = float(np.float32(np.float32(x.scale) * np.float32(w.scale)))
        product = bias_scale
    bias = g.fresh(I32, (out_channels,), quant=(bias_scale, 0), domain=Domain(-2000, 2000))
    # Typical accumulations span about sqrt(k) * 128 * 128 products.
    factor = g.src.real(1.05, 8.0) * max(1.0, math.sqrt(k) * 16)
    if g.version >= 12 and g.src.boolean(0.2):
        factor = g.src.real(0.5, 1.0)  # a multiplier >= 1 (HAL 1.2+)
    scale = product * factor
    if tin == T.TENSOR_QUANT8_ASYMM and g.version < 12:
        scale = max(scale, product * 1.01)
    return w, bias, (scale, g.qparams(tin)[1])


def float_parts(
    g: OpGen, t: int, x: Tensor, filter_dims, out_channels: int, k: int, act: int
) -> tuple[Tensor, Tensor, float, float]:
    w = g.fresh(t, filter_dims, domain=Domain(-1.0, 1.0))
    b = g.fresh(t, (out_channels,), domain=Domain(-1.0, 1.0))
    m = max(abs(x.lo), abs(x.hi)) * max(abs(w.lo), abs(w.hi)) * k + max(abs(b.lo), abs(b.hi))
    lo, hi = g.activation_bounds(act, -m, m)
    return w, b, lo, hi


def _output(g: OpGen, t: int, quant, lo: float, hi: float) -> Tensor:
    return g.output(t, quant=quant if is_quant(t) else None, lo=lo, hi=hi)


@rule(RULES, O.CONV_2D, O.DEPTHWISE_CONV_2D, O.GROUPED_CONV_2D)
def conv(g: OpGen):
    sig = g.signature()
    tin, tf = sig.inputs[0], sig.inputs[1]
    op = g.op
    implicit_ints = 4 if op == O.CONV_2D else 5
    explicit, has_layout, has_dilation = parse_form(sig.inputs[3:], implicit_ints)
    nchw = has_layout and g.src.boolean(0.5)
    x = spatial_input(g, tin, nchw)
    n, h, w, c = nhwc(x.dims, nchw)
    kh, sh, dh = window(g, h, dilation=has_dilation)
    kw, sw, dw = window(g, w, dilation=has_dilation)
    act = g.activation()
    extra: list[int] = []
    if op == O.CONV_2D:
        cout = g.src.integer(1, 8)
        filter_dims = (cout, kh, kw, c)
        k, channel_axis = kh * kw * c, 0
    elif op == O.DEPTHWISE_CONV_2D:
        mult = g.src.integer(1, 3)
        cout = c * mult
        filter_dims = (1, kh, kw, cout)
        k, channel_axis = kh * kw, 3
        extra = [mult]
    else:
        groups = g.src.choice([d for d in range(1, min(c, 4) + 1) if c % d == 0])
        cout = groups * g.src.integer(1, 3)
        filter_dims = (cout, kh, kw, c // groups)
        k, channel_axis = kh * kw * (c // groups), 0
        extra = [groups]
    require(math.prod(filter_dims) <= g.max_elements, "filter too large")
    if is_quant(tin):
        wt, bias, quant = quant_parts(g, tin, tf, x, filter_dims, channel_axis, k)
        lo = hi = 0.0
    else:
        wt, bias, lo, hi = float_parts(g, tin, x, filter_dims, cout, k, act)
        quant = None
    pad_scalars, _ = padding_params(g, explicit, kh, kw)
    params = [*pad_scalars, sw, sh, *extra, act]
    ins = [x, wt, bias] + [g.scalar(T.INT32, v) for v in params]
    if has_layout:
        ins.append(g.scalar(T.BOOL, nchw))
    if has_dilation:
        ins += [g.scalar(T.INT32, dw), g.scalar(T.INT32, dh)]
    return ins, [_output(g, tin, quant, lo, hi)]


@rule(RULES, O.TRANSPOSE_CONV_2D)
def transpose_conv(g: OpGen):
    sig = g.signature()
    tin, tf = sig.inputs[0], sig.inputs[1]
    explicit = sig.inputs[3] != I32  # implicit form starts with the output-shape tensor
    nchw = g.src.boolean(0.5)
    x = spatial_input(g, tin, nchw)
    n, h, w, c = nhwc(x.dims, nchw)
    kh, kw = g.src.integer(1, 4), g.src.integer(1, 4)
    sh, sw = g.src.integer(1, 3), g.src.integer(1, 3)
    cout = g.src.integer(1, 6)
    filter_dims = (cout, kh, kw, c)
    require(math.prod(filter_dims) <= g.max_elements, "filter too large")
    act = g.activation()
    # Each output gathers about ceil(k / stride) taps per axis.
    k = -(-kh // sh) * -(-kw // sw) * c
    if is_quant(tin):
        wt, bias, quant = quant_parts(g, tin, tf, x, filter_dims, 0, k)
        lo = hi = 0.0
    else:
        wt, bias, lo, hi = float_parts(g, tin, x, filter_dims, cout, k, act)
        quant = None
    ins = [x, wt, bias]
    if explicit:
        pads, _ = padding_params(g, True, kh, kw)
        ins += [g.scalar(T.INT32, v) for v in (*pads, sw, sh, act)]
    else:
        code = PADDING_SAME if g.src.boolean(0.5) else PADDING_VALID
        # Request the shape the operation produces: Android's TransposeConv2D.cpp reads
        # only the padding from this tensor and outputs computeOutSizeTransposeConv,
        # (in - 1) * stride + filter with VALID (no padding) and in * stride with SAME.
        # With VALID and a filter shorter than the stride, in * stride (a shape TF also
        # accepts) would declare an output other than the one requested: a driver that
        # sizes its output from this tensor, as the doc says it specifies the output
        # shape, would then be reported failing.
        oh = h * sh if code == PADDING_SAME else (h - 1) * sh + kh
        ow = w * sw if code == PADDING_SAME else (w - 1) * sw + kw
        shape = (n, cout, oh, ow) if nchw else (n, oh, ow, cout)
        ins.append(g.const(I32, (4,), list(shape)))
        ins += [g.scalar(T.INT32, v) for v in (code, sw, sh, act)]
    ins.append(g.scalar(T.BOOL, nchw))
    return ins, [_output(g, tin, quant, lo, hi)]
