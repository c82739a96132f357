"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (Android 11 ``ResizeImageOps.cpp``).

Inputs: the 4-D image, output width then height (INT32) or width then height scales
(FLOAT32, FLOAT16 for float16 images: size = floor(in * scale)), then optional layout,
align_corners and half_pixel_centers flags.

Source coordinates are computed in float32 as tflite does: scale = in / out (or
(in - 1) / (out - 1) with align_corners and out > 1); bilinear samples at
``y * scale`` (half-pixel: ``(y + 0.5) * scale - 0.5``) between floor (clamped at 0) and
ceil (clamped at in - 1) with weights in float32, evaluated in tflite's term order.
Quantized bilinear results are truncated to integers, as tflite's ``static_cast``
does for non-negative uint8 values; signed inputs are offset to unsigned first so they
give exactly the unsigned result minus 128. Nearest neighbour takes
``min(floor(coordinate), in - 1)`` (``round`` with align_corners; half-pixel coordinates
``(y + 0.5) * scale``, clamped at 0). Quantized outputs keep the input's scale and zero
point.
"""

from __future__ import annotations

import contextlib

import numpy as np

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
    from_nhwc,
    layout_shape,
    spatial_dims,
    to_nhwc,
)

V = HalVersion
_B = _T.BOOL


def _flag(ctx: OperationContext, i: int) -> bool:
    return i < ctx.num_inputs and bool(ctx.scalar(i))


def _output_size(ctx: OperationContext, in_h: int, in_w: int) -> tuple[int, int]:
    if ctx.input_type(1) == _T.INT32:
        w, h = ctx.scalar(1), ctx.scalar(2)
    else:  # floor(float(in) * scale) in float32
        with np.errstate(over="ignore", invalid="ignore"):
            fw = np.floor(np.float32(in_w) * np.float32(ctx.scalar(1)))
            fh = np.floor(np.float32(in_h) * np.float32(ctx.scalar(2)))
        # NaN or infinity: Android's int cast is undefined there; no size to give.
        ctx.check(np.isfinite(fw), f"input 1 (width scale) gives width {fw}; it must be finite")
        ctx.check(np.isfinite(fh), f"input 2 (height scale) gives height {fh}; it must be finite")
        w, h = int(fw), int(fh)
    ctx.check(w > 0, f"input 1 (output width) gives width {w}; it must be > 0")
    ctx.check(h > 0, f"input 2 (output height) gives height {h}; it must be > 0")
    return h, w


def _flags(ctx: OperationContext) -> tuple[bool, bool, bool]:
    nchw, align, half = _flag(ctx, 3), _flag(ctx, 4), _flag(ctx, 5)
    # Deferrable: ResizeImageOps.cpp validate checks the flags' types, prepare() their values.
    ctx.check(
        not (align and half),
        "inputs 4 (align_corners) and 5 (half_pixel_centers) cannot both be true",
        deferrable=True,
    )
    return nchw, align, half


def _validate(ctx: OperationContext) -> None:
    # Strict: the rank when known (ResizeImageOps.cpp validate, hasKnownRank); the rest is
    # deferrable (prepare() and the kernel).
    ctx.check_rank(0, exact=4)
    if ctx.input_type(0) in QUANT8:
        ctx.check(
            np.float32(ctx.output_scale(0)) == np.float32(ctx.input_scale(0))
            and ctx.output_zero_point(0) == ctx.input_zero_point(0),
            "output 0 must have the scale and zero point of input 0: "
            f"({ctx.output_scale(0)}, {ctx.output_zero_point(0)}) vs "
            f"({ctx.input_scale(0)}, {ctx.input_zero_point(0)})",
            deferrable=True,
        )
    with contextlib.suppress(Unknown):
        _flags(ctx)


def _infer(ctx: OperationContext) -> list[Shape]:
    ctx.check_rank(0, exact=4)
    nchw, _, _ = _flags(ctx)
    n, h, w, c = spatial_dims(ctx.shape(0), nchw)
    ctx.check(
        h > 0 and w > 0 and c > 0,
        f"input 0 must have non-zero height, width and depth, got shape {list(ctx.shape(0))}",
    )
    oh, ow = _output_size(ctx, h, w)
    return [layout_shape(n, oh, ow, c, nchw)]


def _scale(in_size: int, out_size: int, align: bool) -> np.float32:
    if align and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _bilinear_axis(in_size: int, out_size: int, align: bool, half: bool, positions: range):
    """(source coordinate - lower, lower index, upper index) for the output ``positions``
    along one axis, in float32 (elementwise: any sub-range gives the whole's values)."""
    scale = _scale(in_size, out_size, align)
    pos = np.arange(positions.start, positions.stop).astype(np.float32)
    if half:
        coord = (pos + np.float32(0.5)) * scale - np.float32(0.5)
    else:
        coord = pos * scale
    # tflite clamps lower >= 0 and upper <= in - 1. Past 2**24 output positions, float32
    # rounding can put a coordinate at in_size, where its lower index would read out of
    # bounds: clamp it too.
    lower = np.clip(np.floor(coord).astype(np.int64), 0, in_size - 1)
    upper = np.minimum(np.ceil(coord).astype(np.int64), in_size - 1)
    return coord - lower.astype(np.float32), lower, upper


_BLOCK_ELEMENTS = 1 << 20
"""Output elements per block (rows x columns): bilinear's temporaries (the coordinates,
the four gathered corners and weighted terms) stay a few MB however large the output (a
scale factor can make a 256 MiB output from a tiny input)."""


_NARROW = 16
"""Output rows of fewer values (columns x channels) are computed rows-innermost: numpy's
loops over such short rows cost more than the arithmetic."""


def _bilinear(x: np.ndarray, oh: int, ow: int, align: bool, half: bool, finish, dtype):
    """NHWC float32 -> ``finish``(float32 result) in the output ``dtype``, per block of
    output rows and columns. tflite ``reference_ops::ResizeBilinear``'s expression,
    ``tl * (1 - dy) * (1 - dx) + bl * dy * (1 - dx) + tr * (1 - dy) * dx + br * dy * dx``,
    in float32 and in that order; each corner's row weight multiplies the input rows a
    block reads before their columns are gathered (the same products, on fewer values)."""
    n, h, w, c = x.shape
    one = np.float32(1)
    out = np.empty((n, oh, ow, c), dtype=dtype)
    if ow * c < _NARROW < oh:
        # (c, n, w, h), rows innermost: every multiply then runs down whole columns.
        src, row_axis, row_weight, to_nhwc = x.transpose(3, 0, 2, 1).copy(), 3, (-1,), (1, 3, 2, 0)
    else:
        src, row_axis, row_weight, to_nhwc = x, 1, (-1, 1, 1), (0, 1, 2, 3)
    per_pixel = max(1, n * c)  # a zero batch still makes one (empty) block
    block_w = min(ow, max(1, _BLOCK_ELEMENTS // per_pixel))
    for c0 in range(0, ow, block_w):
        cols = range(c0, min(ow, c0 + block_w))
        dx, x0, x1 = _bilinear_axis(w, ow, align, half, cols)
        # The input columns this block reads: x0 and x1 never decrease along the output.
        first, last = int(x0[0]), int(x1[-1]) + 1
        x0, x1 = x0 - first, x1 - first
        read = src[:, :, first:last]
        left, right = (one - dx)[:, None], dx[:, None]
        block_h = max(1, _BLOCK_ELEMENTS // (max(len(cols), last - first) * per_pixel))
        for r0 in range(0, oh, block_h):
            rows = range(r0, min(oh, r0 + block_h))
            dy, y0, y1 = _bilinear_axis(h, oh, align, half, rows)
            top = np.take(read, y0, axis=row_axis)
            top *= (one - dy).reshape(row_weight)
            bottom = np.take(read, y1, axis=row_axis)
            bottom *= dy.reshape(row_weight)
            acc = np.take(top, x0, axis=2)
            acc *= left
            term = np.take(bottom, x0, axis=2)
            term *= left
            acc += term
            # mode="clip": with the default, take() copies through a buffer to fill ``out``
            # (the indexes are in range: clipping changes nothing).
            np.take(top, x1, axis=2, out=term, mode="clip")
            term *= right
            acc += term
            np.take(bottom, x1, axis=2, out=term, mode="clip")
            term *= right
            acc += term
            out[:, rows.start : rows.stop, cols.start : cols.stop] = finish(acc).transpose(to_nhwc)
    return out


def _nearest_axis(in_size: int, out_size: int, align: bool, half: bool, positions: range):
    """Source index of each output position in ``positions`` along one axis (elementwise:
    any sub-range gives the whole's values)."""
    scale = _scale(in_size, out_size, align)
    pos = np.arange(positions.start, positions.stop).astype(np.float32)
    coord = (pos + np.float32(0.5)) * scale if half else pos * scale
    idx = np.floor(coord)
    if align:  # std::round: halves away from zero (coordinates are >= 0 here)
        idx = idx + (coord - idx >= np.float32(0.5))
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half else idx


def _nearest(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    """NHWC -> NHWC, per block of output rows and columns: a gather of rows, then of
    columns. (One gather of both axes at once has numpy broadcast its two index arrays
    to (oh, ow) int64 pairs: 16 bytes per output pixel.)"""
    n, h, w, c = x.shape
    out = np.empty((n, oh, ow, c), dtype=x.dtype)
    per_pixel = max(1, n * c)  # a zero batch still makes one (empty) block
    block_w = min(ow, max(1, _BLOCK_ELEMENTS // per_pixel))
    for c0 in range(0, ow, block_w):
        cols = range(c0, min(ow, c0 + block_w))
        source_cols = _nearest_axis(w, ow, align, half, cols)
        # The input columns this block reads: the indexes never decrease.
        first, last = int(source_cols[0]), int(source_cols[-1]) + 1
        read, source_cols = x[:, :, first:last], source_cols - first
        block_h = max(1, _BLOCK_ELEMENTS // (max(len(cols), last - first) * per_pixel))
        for r0 in range(0, oh, block_h):
            rows = range(r0, min(oh, r0 + block_h))
            source_rows = _nearest_axis(h, oh, align, half, rows)
            out[:, rows.start : rows.stop, cols.start : cols.stop] = np.take(
                np.take(read, source_rows, axis=1), source_cols, axis=2
            )
    return out


def _execute(ctx: OperationContext, bilinear: bool) -> list[np.ndarray]:
    nchw, align, half = _flags(ctx)
    x = to_nhwc(ctx.value(0), nchw)
    _, h, w, _ = x.shape
    oh, ow = _output_size(ctx, h, w)
    t = ctx.input_type(0)
    dtype = dtype_of(ctx)
    if not bilinear:
        out = _nearest(x, oh, ow, align, half)
    elif t in QUANT8:
        offset = 128 if t == _T.TENSOR_QUANT8_ASYMM_SIGNED else 0
        x = x.astype(np.float32) + np.float32(offset)
        out = _bilinear(
            x, oh, ow, align, half, lambda v: (np.trunc(v) - offset).astype(dtype), dtype
        )
    else:
        out = _bilinear(x.astype(np.float32), oh, ow, align, half, lambda v: v, dtype)
    return [from_nhwc(np.ascontiguousarray(out), nchw)]


def _signatures(first_version: HalVersion) -> tuple[Signature, ...]:
    """Size (INT32) and scale (FLOAT32/FLOAT16) forms, each with 0..3 trailing flags."""
    sigs = []
    for t, tv in (
        (_T.TENSOR_FLOAT32, V.V1_0),
        (_T.TENSOR_QUANT8_ASYMM, V.V1_2),
        (_T.TENSOR_FLOAT16, V.V1_2),
        (_T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3),
    ):
        scale_type = _T.FLOAT16 if t == _T.TENSOR_FLOAT16 else _T.FLOAT32
        for st, sv in ((_T.INT32, V.V1_0), (scale_type, V.V1_2)):
            for flags, fv in (
                ((), V.V1_0),
                ((_B,), V.V1_2),
                ((_B, _B), V.V1_3),
                ((_B,) * 3, V.V1_3),
            ):
                v = max(tv, sv, fv, first_version)
                if first_version == V.V1_2 and not flags:
                    continue  # RESIZE_NEAREST_NEIGHBOR always has the layout flag
                sigs.append(Signature((t, st, st, *flags), (t,), v))
    return tuple(sigs)


RESIZE_BILINEAR = OperationDeclaration(
    OperationType.RESIZE_BILINEAR,
    _signatures(V.V1_0),
    infer_shapes=_infer,
    execute=lambda ctx: _execute(ctx, bilinear=True),
    validate=_validate,
    summary="Resize images with bilinear interpolation to a size or by a scale; "
    "align_corners and half_pixel_centers options.",
)

RESIZE_NEAREST_NEIGHBOR = OperationDeclaration(
    OperationType.RESIZE_NEAREST_NEIGHBOR,
    _signatures(V.V1_2),
    infer_shapes=_infer,
    execute=lambda ctx: _execute(ctx, bilinear=False),
    validate=_validate,
    summary="Resize images by nearest-neighbour sampling to a size or by a scale; "
    "align_corners and half_pixel_centers options.",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR)
