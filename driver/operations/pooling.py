"""2-D pooling: AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D (Android 11 ``Pooling.cpp``).

Windows only cover real pixels: padded positions are excluded from the max and from the
count an average divides by. Quantized AVERAGE_POOL_2D rounds the integer mean as
tflite's uint8 kernel, ``(sum + count / 2) / count``; signed inputs give exactly the
unsigned result minus 128. (Deliberately: Android 11 runs int8 averages through
``reference_integer_ops::AveragePool``, which rounds halves away from zero, -1.5 -> -2
where the unsigned kernel gives -1; the HAL 1.3 rule that signed and unsigned results
agree up to the 128 offset wins, see docs/design.md "Numerics".) Quantized outputs keep
the input's scale and zero point (the kernels do not rescale), and the fused activation
clamps in that quantized domain.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
    dtype_of,
)
from driver.operations.base import T as _T
from driver.operations.conv import (
    QUANT8,
    ConvParams,
    ParamForm,
    f32,
    from_nhwc,
    layout_shape,
    out_size,
    read_params,
    spatial_dims,
    to_nhwc,
)
from driver.operations.quant import activation_range_quantized, apply_activation_float

V = HalVersion
_I, _B = _T.INT32, _T.BOOL


# Explicit: 10 inputs (+ layout); implicit: 7 (+ layout). Built once: a frozen dataclass
# costs microseconds to construct, and validation reads the form of every pooling.
_EXPLICIT = ParamForm((1, 2, 3, 4), (5, 6), 9, None)
_EXPLICIT_LAYOUT = ParamForm((1, 2, 3, 4), (5, 6), 9, 10)
_IMPLICIT = ParamForm((1,), (2, 3), 6, None)
_IMPLICIT_LAYOUT = ParamForm((1,), (2, 3), 6, 7)


def _form(ctx: OperationContext) -> ParamForm:
    n = ctx.num_inputs
    if n >= 10:
        return _EXPLICIT_LAYOUT if n == 11 else _EXPLICIT
    return _IMPLICIT_LAYOUT if n == 8 else _IMPLICIT


def _filter_positions(ctx: OperationContext) -> tuple[int, int]:
    return (7, 8) if ctx.num_inputs >= 10 else (4, 5)


def _params(ctx: OperationContext) -> tuple[ConvParams, int, int]:
    """The checked scalar parameters and the filter height and width (``validate`` and
    ``infer_shapes`` read them through ``ctx.once``). Deferrable, like every rule of
    :func:`read_params`: Android 11's Pooling.cpp ``validate`` checks the parameters'
    types only; ``prepare()`` (``PoolingParam::initialize``) checks their values."""
    p = read_params(ctx, _form(ctx))
    iw, ih = _filter_positions(ctx)
    fw, fh = ctx.scalar(iw), ctx.scalar(ih)
    if fw <= 0:
        raise ctx.invalid(f"input {iw} (filter width) must be > 0, got {fw}", deferrable=True)
    if fh <= 0:
        raise ctx.invalid(f"input {ih} (filter height) must be > 0, got {fh}", deferrable=True)
    return p, fh, fw


def _geometry(ctx: OperationContext, params: tuple[ConvParams, int, int] | None = None):
    p, fh, fw = _params(ctx) if params is None else params
    ctx.check_rank(0, exact=4)
    n, h, w, c = spatial_dims(ctx.shape(0), p.nchw)
    if h <= 0 or w <= 0 or c <= 0:
        raise ctx.invalid(
            f"input 0 must have non-zero height, width and depth, got shape {list(ctx.shape(0))}"
        )
    pads = p.resolve(h, w, fh, fw)
    # PoolingParam::initialize: a window never lies entirely in the padding.
    if not (fw > pads[0] and fw > pads[1] and fh > pads[2] and fh > pads[3]):
        raise ctx.invalid(
            f"padding {list(pads)} (left, right, top, bottom) must be smaller than the "
            f"{fh}x{fw} filter"
        )
    oh = out_size(h, fh, p.stride_h, pads[2], pads[3])
    ow = out_size(w, fw, p.stride_w, pads[0], pads[1])
    if oh <= 0 or ow <= 0:
        raise ctx.invalid(
            f"the {fh}x{fw} filter does not fit the {h}x{w} input with padding {list(pads)}"
        )
    return p, fh, fw, pads, n, oh, ow, c


def _validate(ctx: OperationContext) -> None:
    ctx.check_rank(0, exact=4)
    if ctx.input_type(0) in QUANT8 and not (
        f32(ctx.output_scale(0)) == f32(ctx.input_scale(0))
        and ctx.output_zero_point(0) == ctx.input_zero_point(0)
    ):
        raise ctx.invalid(
            "output 0 must have the scale and zero point of input 0: "
            f"({ctx.output_scale(0)}, {ctx.output_zero_point(0)}) vs "
            f"({ctx.input_scale(0)}, {ctx.input_zero_point(0)})",
            deferrable=True,
        )
    try:  # noqa: SIM105 - contextlib.suppress costs more than this whole check
        ctx.once(_params)
    except Unknown:
        pass


def _infer(ctx: OperationContext) -> list[Shape]:
    p, _, _, _, n, oh, ow, c = _geometry(ctx, ctx.once(_params))
    return [layout_shape(n, oh, ow, c, p.nchw)]


def _windows(x: np.ndarray, fh: int, fw: int, p: ConvParams, pads, oh: int, ow: int, fill):
    """(N, OH, OW, C, fh, fw) view of the NHWC input padded with ``fill``."""
    left, right, top, bottom = pads
    if any(pads):
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    win = sliding_window_view(x, (fh, fw), axis=(1, 2))
    return win[
        :, : (oh - 1) * p.stride_h + 1 : p.stride_h, : (ow - 1) * p.stride_w + 1 : p.stride_w
    ]


def _fits(h: int, w: int, fh: int, fw: int, pads) -> bool:
    """Whether the filter and padding are no larger than the input: sliding windows over
    a padded copy then cost about the input and output (see :func:`_reduce_windows`)."""
    left, right, top, bottom = pads
    return fh <= h and fw <= w and top + bottom <= h and left + right <= w


def _reduce_windows(
    x: np.ndarray, fh, fw, p: ConvParams, pads, oh, ow, fill, op: str, dtype=None, *, fits: bool
) -> np.ndarray:
    """``op`` ("max" or "sum") over each window: (N, OH, OW, C). Unless the filter and
    padding of the whole input ``fits`` it (:func:`_fits`; ``x`` may be a slab of its
    rows), the filter or padding is larger than the input (their declared sizes are
    bounded only by int32): each window is reduced over the part of the input it covers,
    as Android's kernels clip windows, so memory and time follow the input and output,
    not the declared sizes."""
    left, right, top, bottom = pads
    if fits:
        win = _windows(x, fh, fw, p, pads, oh, ow, fill)
        return win.max(axis=(-2, -1)) if op == "max" else win.sum(axis=(-2, -1), dtype=dtype)

    def clipped(a: np.ndarray, axis: int, n_out: int, stride: int, head: int, f: int):
        parts = []
        for o in range(n_out):  # output rows/columns: bounded by the output size
            lo, hi = max(o * stride - head, 0), min(o * stride - head + f, a.shape[axis])
            if hi > lo:
                part = np.take(a, np.arange(lo, hi), axis=axis)
                parts.append(
                    part.max(axis=axis) if op == "max" else part.sum(axis=axis, dtype=dtype)
                )
            else:  # a window entirely in the padding
                shape = a.shape[:axis] + a.shape[axis + 1 :]
                parts.append(np.full(shape, fill, dtype=dtype or a.dtype))
        return np.stack(parts, axis=axis)

    return clipped(clipped(x, 1, oh, p.stride_h, top, fh), 2, ow, p.stride_w, left, fw)


def _counts(h: int, w: int, fh: int, fw: int, p: ConvParams, pads, oh: int, ow: int) -> np.ndarray:
    """Number of real (unpadded) pixels under each window: (OH, OW, 1)."""
    left, _, top, _ = pads

    def axis(size, f, s, head, n_out):
        start = np.arange(n_out) * s - head
        return np.minimum(start + f, size) - np.maximum(start, 0)

    return (axis(h, fh, p.stride_h, top, oh)[:, None] * axis(w, fw, p.stride_w, left, ow)[None, :])[
        ..., None
    ]


_POOL_BLOCK = 1 << 21
"""Input elements per block of output rows (and of the batch): a block's input is
converted (to int64 for quantized averages, float32 for float16) and reduced on its own,
so those temporaries are a few tens of MB whatever the input."""


def _pool(ctx: OperationContext, kind: str) -> list[np.ndarray]:
    p, fh, fw, pads, n, oh, ow, c = _geometry(ctx)
    x = to_nhwc(ctx.value(0), p.nchw)
    h, w = x.shape[1], x.shape[2]
    left, right, top, _ = pads
    t = ctx.input_type(0)
    if t in QUANT8:
        lo, hi = activation_range_quantized(
            p.activation, ctx.input_scale(0), ctx.input_zero_point(0), ctx.output_type(0)
        )
    fits = _fits(h, w, fh, fw, pads)
    out = np.empty((n, oh, ow, c), dtype=dtype_of(ctx))
    # Input elements a block reads per output row: a window's rows or a stride's, at most
    # the input's (a filter taller than the input is clipped to it).
    per_row = w * c * min(h, max(fh, p.stride_h))
    rows_step = max(1, _POOL_BLOCK // max(1, per_row))
    batch_step = max(1, _POOL_BLOCK // max(1, per_row * oh)) if rows_step >= oh else 1
    for b0 in range(0, n, batch_step):
        batch = slice(b0, min(n, b0 + batch_step))
        for r0 in range(0, oh, rows_step):
            r1 = min(oh, r0 + rows_step)
            # The input rows the windows of output rows r0..r1 cover, and the padding that
            # places those windows on the slab as on the whole input.
            y0 = max(0, r0 * p.stride_h - top)
            y1 = min(h, (r1 - 1) * p.stride_h - top + fh)
            slab_top = top + y0 - r0 * p.stride_h
            slab_bottom = max(0, (r1 - r0 - 1) * p.stride_h + fh - slab_top - (y1 - y0))
            slab_pads = (left, right, slab_top, slab_bottom)
            block = _pool_block(
                x[batch, y0:y1], kind, t, fh, fw, p, slab_pads, r1 - r0, ow, fits=fits
            )
            if t in QUANT8:
                block = np.clip(block, lo, hi)
            else:
                block = apply_activation_float(block.astype(np.float32, copy=False), p.activation)
            out[batch, r0:r1] = block
    return [from_nhwc(out, p.nchw)]


def _pool_block(
    x: np.ndarray,
    kind: str,
    t: int,
    fh: int,
    fw: int,
    p: ConvParams,
    pads,
    oh: int,
    ow: int,
    *,
    fits: bool,
) -> np.ndarray:
    """``kind`` ("avg", "max", "l2") pooling of NHWC ``x`` with explicit ``pads``, before
    the activation: (N, OH, OW, C), quantized results as integers in a wide type."""
    quantized = t in QUANT8
    h, w = x.shape[1], x.shape[2]
    if kind == "max":
        if quantized:
            return _reduce_windows(
                x, fh, fw, p, pads, oh, ow, np.iinfo(x.dtype).min, "max", fits=fits
            )
        xf = x.astype(np.float32, copy=False)
        return _reduce_windows(xf, fh, fw, p, pads, oh, ow, -np.inf, "max", fits=fits)
    count = _counts(h, w, fh, fw, p, pads, oh, ow)
    if quantized:
        # Offset signed values to unsigned so both round identically (the HAL 1.3
        # coupling rule, not Android's int8 kernel: see the module docstring).
        offset = 128 if t == _T.TENSOR_QUANT8_ASYMM_SIGNED else 0
        xi = x.astype(np.int64) + offset
        s = _reduce_windows(xi, fh, fw, p, pads, oh, ow, 0, "sum", fits=fits)
        return (s + count // 2) // count - offset
    xf = x.astype(np.float32, copy=False)
    if kind == "l2":
        xf = xf * xf
    s = _reduce_windows(xf, fh, fw, p, pads, oh, ow, 0.0, "sum", np.float32, fits=fits)
    out = s / count.astype(np.float32)
    return np.sqrt(out) if kind == "l2" else out


def _signatures(types: tuple[tuple[int, HalVersion], ...]) -> tuple[Signature, ...]:
    forms = (
        ((_I,) * 6, V.V1_0),  # implicit: padding, stride w/h, filter w/h, activation
        ((_I,) * 9, V.V1_0),  # explicit
        ((_I,) * 6 + (_B,), V.V1_2),
        ((_I,) * 9 + (_B,), V.V1_2),
    )
    return tuple(
        Signature((t, *params), (t,), max(tv, fv)) for t, tv in types for params, fv in forms
    )


_ALL_TYPES = (
    (_T.TENSOR_FLOAT32, V.V1_0),
    (_T.TENSOR_QUANT8_ASYMM, V.V1_0),
    (_T.TENSOR_FLOAT16, V.V1_2),
    (_T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3),
)

AVERAGE_POOL_2D = OperationDeclaration(
    OperationType.AVERAGE_POOL_2D,
    _signatures(_ALL_TYPES),
    infer_shapes=_infer,
    execute=lambda ctx: _pool(ctx, "avg"),
    validate=_validate,
    summary="Average over each 2-D window (padding excluded from the count), with fused "
    "activation.",
)

MAX_POOL_2D = OperationDeclaration(
    OperationType.MAX_POOL_2D,
    _signatures(_ALL_TYPES),
    infer_shapes=_infer,
    execute=lambda ctx: _pool(ctx, "max"),
    validate=_validate,
    summary="Maximum over each 2-D window, with fused activation.",
)

L2_POOL_2D = OperationDeclaration(
    OperationType.L2_POOL_2D,
    _signatures(((_T.TENSOR_FLOAT32, V.V1_0), (_T.TENSOR_FLOAT16, V.V1_2))),
    infer_shapes=_infer,
    execute=lambda ctx: _pool(ctx, "l2"),
    validate=_validate,
    summary="Square root of the mean of squares over each 2-D window, with fused activation.",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D)
