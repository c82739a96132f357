"""Convolutions: CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D.

Also the spatial helpers the other windowed families (pooling, resize) share: implicit
padding codes turned into explicit padding exactly as Android's
``calculateExplicitPadding``, output sizes as ``computeOutSize``, NCHW <-> NHWC.

Numerics follow Android 11's CPU kernels (``Conv2D.cpp``, ``DepthwiseConv2D.cpp``,
``GroupedConv2D.cpp``, ``TransposeConv2D.cpp``):

* float32 sums in float32; float16 converts to float32, runs the float32 kernel and rounds
  the result to float16 (as ``convFloat16`` does).
* Quantized: int32 accumulation of ``(input - inputZeroPoint) * (filter - filterZeroPoint)``
  (padding contributes zero: it is the real value 0), plus the int32 bias, requantized by
  ``MultiplyByQuantizedMultiplier`` with the multiplier/shift from ``QuantizeMultiplier`` of
  ``double(inputScale * filterScale) / outputScale`` (``GetQuantizedConvolutionMultipler``;
  the product is a float32 product, as in C++), per output channel for
  TENSOR_QUANT8_SYMM_PER_CHANNEL filters, then the output zero point, the fused activation
  clamp in the quantized domain and saturation. For multipliers below one (the only ones
  HAL 1.0/1.1 allow) this is bit-identical to the legacy ``QuantizeMultiplierSmallerThanOne``
  right-shift path. Signed inputs give exactly the unsigned result minus 128 (Android runs
  them through the unsigned kernel).

Integer dot products run as float matrix products (BLAS), exact in any summation order:
every partial sum is a sum of some of the integer products, so its magnitude is at most
``max|x - zx| * sum|w - zw|`` over one output's terms. When that bound is below 2**24
(:func:`exact_float_dtype`; 3x3x32 filters of typical weights are ~100x below it) the
products run in float32, as fast as the float kernels; otherwise in float64 (exact below
2**53, i.e. any realistic size). The int32 accumulator then goes through the fused
fixed-point output stage :func:`~driver.operations.quant.requantize_int32`.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from driver.hal.types import FusedActivation, HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
    dtype_of,
    item_blocks,
)
from driver.operations.base import T as _T
from driver.operations.quant import (
    activation_range_quantized,
    apply_activation_float,
    quant_range,
    quantize_multiplier,
    requantize_int32,
)

V = HalVersion

PADDING_SAME = 1
PADDING_VALID = 2

QUANT8 = (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED)


# ---------------------------------------------------------------------------------------
# Spatial helpers shared with pooling and resize
# ---------------------------------------------------------------------------------------


def explicit_padding(
    in_size: int,
    stride: int,
    filter_size: int,
    padding_code: int,
    dilation: int = 1,
    *,
    tight_tail: bool = False,
) -> tuple[int, int]:
    """Android's ``calculateExplicitPaddingImpl``: (head, tail) for an implicit padding
    code. SAME pads so that ``ceil(in / stride)`` outputs exist, the odd pixel at the
    tail; VALID (and any other code) pads nothing. ``tight_tail`` (Android's
    ``isTransposeConv``) makes the tail ``total - head`` even when the total is negative
    ("make padding tail fit tightly to the end of the last stride")."""
    if padding_code != PADDING_SAME:
        return 0, 0
    effective = (filter_size - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = (out - 1) * stride + effective - in_size
    head = total // 2 if total > 0 else 0
    if total <= 0 and not tight_tail:
        return 0, 0
    return head, total - head


def explicit_padding_transpose(
    out_size: int, stride: int, filter_size: int, padding_code: int
) -> tuple[int, int]:
    """``calculateExplicitPaddingTransposeConv`` for TRANSPOSE_CONV_2D's output-shape
    form: SAME pads as a forward convolution over the requested output size would, the
    tail negative when the filter is shorter than the stride's last step (stride 2,
    filter 1, 4 outputs: (0, -1)). The computed output size then is the requested one,
    its last positions reached by no filter tap (they get only the bias)."""
    return explicit_padding(out_size, stride, filter_size, padding_code, tight_tail=True)


def out_size(
    in_size: int, filter_size: int, stride: int, head: int, tail: int, dilation: int = 1
) -> int:
    """``computeOutSize``: outputs of a strided, dilated window over a padded axis."""
    effective = (filter_size - 1) * dilation + 1
    return (in_size - effective + stride + head + tail) // stride


def transpose_out_size(in_size: int, filter_size: int, stride: int, head: int, tail: int) -> int:
    """``computeOutSizeTransposeConv``."""
    return in_size * stride + filter_size - stride - head - tail


def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if nchw else x


def from_nhwc(y: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2)) if nchw else y


def spatial_dims(shape: Shape, nchw: bool) -> tuple[int, int, int, int]:
    """(batches, height, width, channels) of a rank-4 shape in either layout."""
    if nchw:
        return shape[0], shape[2], shape[3], shape[1]
    return shape[0], shape[1], shape[2], shape[3]


def layout_shape(n: int, h: int, w: int, c: int, nchw: bool) -> Shape:
    return (n, c, h, w) if nchw else (n, h, w, c)


def check_activation(ctx: OperationContext, i: int) -> int:
    """The fused activation code (deferrable: Android's validate checks only its type; the
    kernels reject an unknown code when they run)."""
    act = ctx.scalar(i)
    if not _ACTIVATION_NONE <= act <= _ACTIVATION_RELU6:
        raise ctx.invalid(f"input {i} (fused activation) must be 0..3, got {act}", deferrable=True)
    return act


# Plain ints: enum attribute lookups and comparisons cost in the validation hot path.
_ACTIVATION_NONE, _ACTIVATION_RELU6 = int(FusedActivation.NONE), int(FusedActivation.RELU6)


_FLOAT32 = struct.Struct("<f")


def f32(x: float) -> float:
    """A scale as the float32 Android stores it (``float(np.float32(x))``, through
    ``struct``: a numpy scalar round trip costs microseconds in validation)."""
    try:
        return _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    except OverflowError:  # beyond float32's range: numpy's conversion gives inf
        return math.copysign(math.inf, x)


# ---------------------------------------------------------------------------------------
# Parameters: the positions of each input form, read and checked once
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamForm:
    """Positions of the scalar parameters in one input form of a windowed operation."""

    padding: tuple[int, ...]  # (code,) implicit, or (left, right, top, bottom)
    stride: tuple[int, int]  # (width, height)
    activation: int
    layout: int | None = None
    dilation: tuple[int, int] | None = None  # (width, height)
    extra: int | None = None  # depth multiplier / number of groups
    output_shape: int | None = None  # TRANSPOSE_CONV_2D's implicit form
    # TRANSPOSE_CONV_2D: right and bottom padding may be negative (Android's
    # TransposeConv2dParam::initialize checks only left and top >= 0).
    negative_tail: bool = False

    @property
    def implicit(self) -> bool:
        return len(self.padding) == 1


class ConvParams(NamedTuple):
    """Scalar parameters of a convolution, padding still possibly implicit (a named
    tuple: built for every operation validated, and a frozen dataclass costs several
    times more to construct)."""

    padding_code: int | None  # implicit scheme, or None when explicit
    pads: tuple[int, int, int, int]  # left, right, top, bottom (explicit form)
    stride_w: int
    stride_h: int
    dilation_w: int
    dilation_h: int
    activation: int
    nchw: bool
    extra: int  # depth multiplier / groups (1 when not applicable)

    def resolve(
        self, in_h: int, in_w: int, filter_h: int, filter_w: int
    ) -> tuple[int, int, int, int]:
        """Explicit (left, right, top, bottom) padding for these sizes."""
        if self.padding_code is None:
            return self.pads
        left, right = explicit_padding(
            in_w, self.stride_w, filter_w, self.padding_code, self.dilation_w
        )
        top, bottom = explicit_padding(
            in_h, self.stride_h, filter_h, self.padding_code, self.dilation_h
        )
        return left, right, top, bottom


def read_params(ctx: OperationContext, form: ParamForm, what: str = "") -> ConvParams:
    """Read and range-check the scalar parameters of ``form`` (raises Unknown when one is
    not a known constant yet). Error messages are built only on failure: validation runs
    this for every windowed operation. Every rule here is deferrable: Android 11's
    ``validate`` (Conv2D, DepthwiseConv2D, TransposeConv2D, Pooling; ``validateOperation``
    for GROUPED_CONV_2D) checks the parameters' types only, their values are checked by
    ``prepare()`` (``Conv2dParam::initialize`` and the like) or the kernels, at execution."""
    scalar = ctx.scalar
    if form.implicit:
        i = form.padding[0]
        code = scalar(i)
        if code != PADDING_SAME and code != PADDING_VALID:
            raise ctx.invalid(
                f"input {i} (implicit padding) must be 1 (SAME) or 2 (VALID), got {code}",
                deferrable=True,
            )
        pads = (0, 0, 0, 0)
    else:
        code = None
        pads = tuple([scalar(i) for i in form.padding])
        for k, (i, p) in enumerate(zip(form.padding, pads)):
            if p < 0 and not (form.negative_tail and k % 2):  # k odd: right, bottom
                raise ctx.invalid(f"input {i} (padding) must be >= 0, got {p}", deferrable=True)
    iw, ih = form.stride
    sw, sh = scalar(iw), scalar(ih)
    if sw <= 0:
        raise ctx.invalid(f"input {iw} (stride width) must be > 0, got {sw}", deferrable=True)
    if sh <= 0:
        raise ctx.invalid(f"input {ih} (stride height) must be > 0, got {sh}", deferrable=True)
    dw = dh = 1
    if form.dilation is not None:
        iw, ih = form.dilation
        dw, dh = scalar(iw), scalar(ih)
        if dw <= 0:
            raise ctx.invalid(f"input {iw} (dilation width) must be > 0, got {dw}", deferrable=True)
        if dh <= 0:
            raise ctx.invalid(
                f"input {ih} (dilation height) must be > 0, got {dh}", deferrable=True
            )
    extra = 1
    if form.extra is not None:
        extra = scalar(form.extra)
        if extra <= 0:
            raise ctx.invalid(
                f"input {form.extra} ({what}) must be > 0, got {extra}", deferrable=True
            )
    act = check_activation(ctx, form.activation)
    nchw = bool(scalar(form.layout)) if form.layout is not None else False
    return ConvParams(code, pads, sw, sh, dw, dh, act, nchw, extra)


# The forms depend only on the input count and whether the layout position holds a BOOL;
# built once (a frozen dataclass costs microseconds to construct, per operation).
@functools.lru_cache(maxsize=64)
def _conv_form_for(n: int, implicit: bool) -> ParamForm:
    if implicit:
        return ParamForm((3,), (4, 5), 6, 7 if n >= 8 else None, (8, 9) if n == 10 else None)
    return ParamForm(
        (3, 4, 5, 6), (7, 8), 9, 10 if n >= 11 else None, (11, 12) if n == 13 else None
    )


def _conv_form(ctx: OperationContext) -> ParamForm:
    """CONV_2D: 7/8/10 inputs implicit (+layout, +dilation), 10/11/13 explicit."""
    n = ctx.num_inputs
    return _conv_form_for(n, n == 7 or (n >= 8 and ctx.input_type(7) == _T.BOOL))


@functools.lru_cache(maxsize=64)
def _depthwise_form_for(n: int, implicit: bool) -> ParamForm:
    if implicit:
        return ParamForm(
            (3,), (4, 5), 7, 8 if n >= 9 else None, (9, 10) if n == 11 else None, extra=6
        )
    return ParamForm(
        (3, 4, 5, 6),
        (7, 8),
        10,
        11 if n >= 12 else None,
        (12, 13) if n == 14 else None,
        extra=9,
    )


def _depthwise_form(ctx: OperationContext) -> ParamForm:
    """DEPTHWISE_CONV_2D: 8/9/11 implicit, 11/12/14 explicit (depth multiplier before
    the activation)."""
    n = ctx.num_inputs
    return _depthwise_form_for(n, n == 8 or (n >= 9 and ctx.input_type(8) == _T.BOOL))


_GROUPED_IMPLICIT = ParamForm((3,), (4, 5), 7, 8, extra=6)
_GROUPED_EXPLICIT = ParamForm((3, 4, 5, 6), (7, 8), 10, 11, extra=9)
_TRANSPOSE_IMPLICIT = ParamForm((4,), (5, 6), 7, 8, output_shape=3)
_TRANSPOSE_EXPLICIT = ParamForm((3, 4, 5, 6), (7, 8), 9, 10, negative_tail=True)


def _grouped_form(ctx: OperationContext) -> ParamForm:
    return _GROUPED_IMPLICIT if ctx.num_inputs == 9 else _GROUPED_EXPLICIT


def _transpose_form(ctx: OperationContext) -> ParamForm:
    return _TRANSPOSE_IMPLICIT if ctx.num_inputs == 9 else _TRANSPOSE_EXPLICIT


# Each operation's checked parameters, for ``ctx.once``: ``validate`` and ``infer_shapes``
# read them from one context during validation, so they are parsed once.
def _conv_params(ctx: OperationContext) -> ConvParams:
    return read_params(ctx, _conv_form(ctx))


def _depthwise_params(ctx: OperationContext) -> ConvParams:
    return read_params(ctx, _depthwise_form(ctx), "depth multiplier")


def _grouped_params(ctx: OperationContext) -> ConvParams:
    return read_params(ctx, _grouped_form(ctx), "number of groups")


# ---------------------------------------------------------------------------------------
# Signatures
# ---------------------------------------------------------------------------------------

_I, _B = _T.INT32, _T.BOOL

# (input, filter, bias) type triples and the HAL version that introduced each.
_CONV_TYPES: tuple[tuple[tuple[int, int, int], HalVersion], ...] = (
    ((_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT32, _T.TENSOR_FLOAT32), V.V1_0),
    ((_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM, _T.TENSOR_INT32), V.V1_0),
    ((_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT16, _T.TENSOR_FLOAT16), V.V1_2),
    ((_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL, _T.TENSOR_INT32), V.V1_2),
    ((_T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_INT32), V.V1_3),
    ((_T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL, _T.TENSOR_INT32), V.V1_3),
)


def _sigs(forms: tuple[tuple[tuple[int, ...], HalVersion], ...]) -> tuple[Signature, ...]:
    """Signatures for every (tensor types) x (parameter form) combination; a form's
    version and the types' version combine by max."""
    out = []
    for (tin, tf, tb), tv in _CONV_TYPES:
        for params, fv in forms:
            out.append(Signature((tin, tf, tb, *params), (tin,), max(tv, fv)))
    return tuple(out)


_CONV_FORMS = (
    ((_I, _I, _I, _I), V.V1_0),  # implicit
    ((_I,) * 7, V.V1_0),  # explicit
    ((_I, _I, _I, _I, _B), V.V1_2),  # implicit + layout
    ((_I,) * 7 + (_B,), V.V1_2),  # explicit + layout
    ((_I, _I, _I, _I, _B, _I, _I), V.V1_2),  # implicit + layout + dilation
    ((_I,) * 7 + (_B, _I, _I), V.V1_2),  # explicit + layout + dilation
)

_DEPTHWISE_FORMS = (
    ((_I,) * 5, V.V1_0),  # implicit: padding, stride w/h, multiplier, activation
    ((_I,) * 8, V.V1_0),  # explicit
    ((_I,) * 5 + (_B,), V.V1_2),
    ((_I,) * 8 + (_B,), V.V1_2),
    ((_I,) * 5 + (_B, _I, _I), V.V1_2),
    ((_I,) * 8 + (_B, _I, _I), V.V1_2),
)

_GROUPED_FORMS = (
    ((_I,) * 5 + (_B,), V.V1_2),  # implicit: padding, stride w/h, groups, activation, layout
    ((_I,) * 8 + (_B,), V.V1_2),  # explicit
)

_TRANSPOSE_FORMS = (
    ((_T.TENSOR_INT32, _I, _I, _I, _I, _B), V.V1_2),  # output shape, padding code, ...
    ((_I,) * 7 + (_B,), V.V1_2),  # explicit
)


# ---------------------------------------------------------------------------------------
# Validation shared by the convolutions
# ---------------------------------------------------------------------------------------


def _validate_quant(ctx: OperationContext, channel_dim: int) -> HalVersion | None:
    """Filter quantization rules Android's ``validate`` checks (the per-channel filter's
    channelDim); returns V1_2 when a QUANT8_ASYMM model relies on the relaxed (HAL 1.2)
    rule that outputScale may be <= inputScale * filterScale."""
    tin, tf = ctx.input_type(0), ctx.input_type(1)
    if tin not in QUANT8:
        return None
    if tf == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = ctx.channel_quant(1)
        if cq is None:
            raise ctx.invalid("input 1 (per-channel filter) has no channel quantization")
        if cq.channel_dim != channel_dim:
            raise ctx.invalid(
                f"input 1 (per-channel filter) must be quantized along dimension {channel_dim}, "
                f"got channelDim {cq.channel_dim}"
            )
        return None
    if tin == _T.TENSOR_QUANT8_ASYMM and not (f32(ctx.output_scale(0)) > _scale_product(ctx)):
        return V.V1_2
    return None


def _scale_product(ctx: OperationContext) -> float:
    # The float32 product of two float32 scales: their double product is exact (48
    # significant bits), so rounding it once to float32 is what float * float gives.
    return f32(f32(ctx.input_scale(0)) * f32(ctx.input_scale(1)))


def _check_bias_scale(ctx: OperationContext) -> None:
    """GetQuantizedConvolutionMultipler's rule, with its tolerance (deferrable: Android
    checks it in prepare() / the kernel, at execution)."""
    if ctx.input_type(0) not in QUANT8 or ctx.input_type(1) == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        return
    product = _scale_product(ctx)
    bias_scale = f32(ctx.input_scale(2))
    if not abs(product - bias_scale) <= 1e-6 * min(product, bias_scale):
        raise ctx.invalid(
            f"input 2 (bias) scale must equal input scale * filter scale = {product!r}, "
            f"got {bias_scale!r}",
            deferrable=True,
        )


def _validate_common(
    ctx: OperationContext,
    params: Callable[[OperationContext], ConvParams],
    channel_dim: int,
    *,
    strict_ranks: bool = True,
) -> None:
    """Ranks, quantization and parameter ranges (the parameter-form versions are in the
    signatures). ``params`` reads the parameters, once per context.

    Strict (Android 11's ``validate``: Conv2D.cpp, DepthwiseConv2D.cpp, TransposeConv2D.cpp
    check the input and filter ranks when known — ``strict_ranks``; every one checks a
    per-channel filter's channelDim and the HAL version) before deferrable (only their
    ``prepare()`` or kernels check them, at execution: the bias rank, the bias scale, every
    parameter value; GROUPED_CONV_2D's ``validateOperation`` checks no rank at all)."""
    if strict_ranks:
        ctx.check_rank(0, exact=4)
        ctx.check_rank(1, exact=4)
    ctx.require_version(_validate_quant(ctx, channel_dim))
    try:
        if not strict_ranks:
            ctx.check_rank(0, exact=4, deferrable=True)
            ctx.check_rank(1, exact=4, deferrable=True)
        ctx.check_rank(2, exact=1, deferrable=True)
        _check_bias_scale(ctx)
        ctx.once(params)
    except Unknown:
        pass


# ---------------------------------------------------------------------------------------
# Kernels: the shared core
# ---------------------------------------------------------------------------------------


_IM2COL_BLOCK = 1 << 22
"""im2col elements per block of output positions. Padding and strides are bounded only by
int32, so a tiny input can ask for a 256 MiB output whose patches are fh*fw*C times
larger still; blocks keep the temporaries at a few tens of MB whatever the output. The
batch is split too (:func:`_by_batch`): a block holds at least one position of every
batch item it covers."""

_OUTPUT_BLOCK = 1 << 20
"""Output elements per block: the accumulators and the requantization's int64
temporaries (8 bytes each, for a 1-byte quant8 output element) are per block."""


@dataclass(frozen=True)
class _Input:
    """A convolution's input as stored (NHWC, not converted: a quant8 input in float64
    would be 8 times its size) and how a gathered block of it becomes exact compute
    values (:meth:`exact`)."""

    raw: np.ndarray  # NHWC, the operand's own type
    zero: int  # the stored value of the real 0: the zero point (0 for floats)
    dtype: type  # compute type: float32, or float64 when float32 sums could round

    def exact(self, block: np.ndarray) -> np.ndarray:
        """``block`` of stored values minus the zero point, in the compute type."""
        if self.zero:
            return np.subtract(block, self.zero, dtype=self.dtype)
        return block.astype(self.dtype, copy=False)

    def part(self, batch: slice) -> _Input:
        return _Input(self.raw[batch], self.zero, self.dtype)


@dataclass(frozen=True)
class _Output:
    """What a kernel writes: its geometry (the parameters' strides and dilations, the
    explicit paddings, OH x OW), how the accumulated sums become output values
    (``finish``) and the output's dtype."""

    p: ConvParams
    pads: tuple[int, int, int, int]
    oh: int
    ow: int
    finish: Callable[[np.ndarray], np.ndarray]
    dtype: np.dtype


def _by_batch(
    src: _Input,
    out: _Output,
    cout: int,
    per_item: int,
    kernel: Callable[[_Input], np.ndarray],
) -> np.ndarray:
    """``kernel`` on slices of the batch of at most ``_IM2COL_BLOCK // per_item`` items
    (at least one), written into one (N, OH, OW, C) output: the kernels' blocks of
    positions span the batch, so a huge batch of tiny images must be split first."""
    batches = list(item_blocks(src.raw.shape[0], per_item, _IM2COL_BLOCK))
    if len(batches) <= 1:
        return kernel(src)
    result = np.empty((src.raw.shape[0], out.oh, out.ow, cout), dtype=out.dtype)
    for batch in batches:
        result[batch] = kernel(src.part(batch))
    return result


def _tap_indices(
    in_size: int, positions: np.ndarray, stride: int, pad_head: int, taps: int, dilation: int
) -> np.ndarray:
    """For output ``positions`` along one axis: the input index under each filter tap
    (len(positions), taps), or ``in_size`` where the tap falls in the padding (the zero
    row/column :func:`_zero_extended` appends). No padded copy of the input is made, so
    memory follows the output however large the padding."""
    index = (positions.astype(np.int64) * stride - pad_head)[:, None]
    index = index + np.arange(taps, dtype=np.int64) * dilation
    index[(index < 0) | (index >= in_size)] = in_size
    return index


def _zero_extended(src: _Input) -> np.ndarray:
    """The stored NHWC input with one row and one column of real zeros (the zero point)
    appended, flattened to (N, (H+1)*(W+1), C): every tap in the padding reads that
    pixel."""
    n, h, w, c = src.raw.shape
    padded = np.pad(src.raw, ((0, 0), (0, 1), (0, 1), (0, 0)), constant_values=src.zero)
    return padded.reshape(n, (h + 1) * (w + 1), c)


def _patches(x_ext: np.ndarray, in_w: int, iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
    """(N, rows*cols*fh*fw, C): the input under each filter tap of a block of output rows
    and columns, from :func:`_zero_extended` ``x_ext`` in one gather, given the blocks' tap
    rows ``iy`` (rows, fh) and columns ``ix`` (cols, fw) from :func:`_tap_indices`."""
    flat = (iy * (in_w + 1))[:, None, :, None] + ix[None, :, None, :]  # (rows, cols, fh, fw)
    return np.take(x_ext, flat.reshape(-1), axis=1)


def _conv_blocks(src: _Input, w: np.ndarray, out: _Output, groups: int = 1) -> np.ndarray:
    """``finish`` of the sum over each window of x * w: NHWC input, filter
    [Cout, fh, fw, Cin/groups] -> (N, OH, OW, Cout) NHWC in the output dtype; im2col
    of the stored input, its conversion to exact compute values, one matrix product and
    ``finish`` per block of output rows and columns (the tap indexes of a column block are
    computed once, for all its rows)."""
    n, _, _, c = src.raw.shape
    cout, fh, fw, _ = w.shape
    oh, ow = out.oh, out.ow
    if n == 0 or oh * ow == 0:
        return out.finish(np.zeros((n, oh, ow, cout), dtype=src.dtype))
    per_item = oh * ow * max(fh * fw * c, cout)
    blocks = _pointwise_blocks if fh == fw == 1 and not any(out.pads) else _im2col_blocks
    return _by_batch(src, out, cout, per_item, lambda part: blocks(part, w, out, groups))


def _pointwise_blocks(src: _Input, w: np.ndarray, out: _Output, groups: int) -> np.ndarray:
    """:func:`_conv_blocks` for an unpadded 1x1 filter: no patches to gather, each block
    of output rows is a strided view of the input, converted and multiplied."""
    n, _, _, c = src.raw.shape
    cout = w.shape[0]
    sh, sw = out.p.stride_h, out.p.stride_w
    oh, ow = out.oh, out.ow
    result = np.empty((n, oh, ow, cout), dtype=out.dtype)
    step = max(1, min(_IM2COL_BLOCK // (n * ow * c), _OUTPUT_BLOCK // (n * ow * cout)))
    for r0 in range(0, oh, step):
        r1 = min(oh, r0 + step)
        view = src.raw[:, r0 * sh : (r1 - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw]
        block = _conv_product(src.exact(view).reshape(-1, c), w, groups)
        result[:, r0:r1] = out.finish(block.reshape(n, r1 - r0, ow, cout))
    return result


def _im2col_blocks(src: _Input, w: np.ndarray, out: _Output, groups: int) -> np.ndarray:
    """:func:`_conv_blocks` by im2col, gathered from the input with a zero pixel appended
    (no padded copy)."""
    n, h, in_w, c = src.raw.shape
    cout, fh, fw, _ = w.shape
    p, oh, ow = out.p, out.oh, out.ow
    left, _, top, _ = out.pads
    x_ext = _zero_extended(src)
    result = np.empty((n, oh, ow, cout), dtype=out.dtype)
    # Each tap of a position also has an int64 index: as large as two float32 elements,
    # it outweighs the patch when N*C is 1.
    per_tap = max(n * c, 2)
    positions = max(1, min(_IM2COL_BLOCK // (fh * fw * per_tap), _OUTPUT_BLOCK // (n * cout)))
    block_w = min(ow, positions)
    block_h = max(1, positions // block_w)
    for c0 in range(0, ow, block_w):
        columns = np.arange(c0, min(ow, c0 + block_w))
        ix = _tap_indices(in_w, columns, p.stride_w, left, fw, p.dilation_w)
        for r0 in range(0, oh, block_h):
            rows = np.arange(r0, min(oh, r0 + block_h))
            iy = _tap_indices(h, rows, p.stride_h, top, fh, p.dilation_h)
            cols = src.exact(_patches(x_ext, in_w, iy, ix))
            block = _conv_product(cols.reshape(-1, fh * fw * c), w, groups)
            del cols  # before finish allocates: lets the allocator reuse the block's memory
            result[:, r0 : r0 + rows.size, c0 : c0 + columns.size] = out.finish(
                block.reshape(n, rows.size, columns.size, cout)
            )
    return result


def _conv_product(cols: np.ndarray, w: np.ndarray, groups: int) -> np.ndarray:
    """(M, fh*fw*Cin) patches times the [Cout, fh, fw, Cin/groups] filter: (M, Cout)."""
    cout, fh, fw, cg = w.shape
    if groups == 1:
        return cols @ w.reshape(cout, -1).T
    og = cout // groups
    # (G, M, fh*fw*Cg) @ (G, fh*fw*Cg, Cout/G): one batched product over the groups.
    g_cols = cols.reshape(-1, fh * fw, groups, cg).transpose(2, 0, 1, 3)
    g_cols = g_cols.reshape(groups, -1, fh * fw * cg)
    # Contiguous operands: numpy only hands stacked products to BLAS when they are.
    g_w = np.ascontiguousarray(w.reshape(groups, og, fh * fw * cg).transpose(0, 2, 1))
    out = np.matmul(g_cols, g_w)  # (G, M, og)
    return out.transpose(1, 0, 2).reshape(-1, cout)


def _depthwise_blocks(src: _Input, w: np.ndarray, out: _Output) -> np.ndarray:
    """Depthwise: NHWC input [N,H,W,C], filter [fh, fw, C*M] -> ``finish`` of the sums,
    (N, OH, OW, C*M) NHWC in the output dtype. One vectorized multiply-add per filter
    tap and block of output positions, each tap gathered from the stored input (the zero
    pixel where it falls in the padding) and converted."""
    _, h, in_w, c = src.raw.shape
    fh, fw, cout = w.shape
    p, oh, ow = out.p, out.oh, out.ow
    left, _, top, _ = out.pads
    wt = w.reshape(fh, fw, c, cout // c)

    def batch_part(part: _Input) -> np.ndarray:
        n = part.raw.shape[0]
        x_ext = _zero_extended(part)
        result = np.empty((n, oh * ow, cout), dtype=out.dtype)
        per_position = max(1, n * cout)  # a zero batch still makes one (empty) block
        step = max(1, min(_IM2COL_BLOCK // (per_position * fh * fw), _OUTPUT_BLOCK // per_position))
        for start in range(0, max(oh * ow, 1), step):
            rows, columns = np.divmod(np.arange(start, min(oh * ow, start + step)), ow)
            iy = _tap_indices(h, rows, p.stride_h, top, fh, p.dilation_h)
            ix = _tap_indices(in_w, columns, p.stride_w, left, fw, p.dilation_w)
            acc = np.zeros((n, len(rows), c, wt.shape[3]), dtype=part.dtype)
            for i in range(fh):
                for j in range(fw):
                    tap = part.exact(np.take(x_ext, iy[:, i] * (in_w + 1) + ix[:, j], axis=1))
                    acc += tap[..., None] * wt[i, j]
            result[:, start : start + len(rows)] = out.finish(acc.reshape(n, len(rows), cout))
        return result.reshape(n, oh, ow, cout)

    per_item = oh * ow * cout * fh * fw  # as the blocks count: products of every tap
    return _by_batch(src, out, cout, per_item, batch_part)


def _filter_scales(ctx: OperationContext) -> np.ndarray | float:
    cq = ctx.channel_quant(1)
    if ctx.input_type(1) == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL and cq is not None:
        return np.asarray(cq.scales, dtype=np.float32)
    return np.float32(ctx.input_scale(1))


def conv_multipliers(
    input_scale: float, filter_scales, output_scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """``GetQuantizedConvolutionMultipler`` + ``QuantizeMultiplier`` per output channel:
    (multipliers, shifts) with shift > 0 meaning a left shift. ``filter_scales`` is a
    scalar or a per-channel array."""
    prods = np.atleast_1d(np.float32(input_scale) * np.asarray(filter_scales, dtype=np.float32))
    out = float(np.float32(output_scale))
    pairs = [quantize_multiplier(float(pr) / out) for pr in prods]
    return (
        np.array([m for m, _ in pairs], dtype=np.int64),
        np.array([s for _, s in pairs], dtype=np.int64),
    )


def requantizer(
    ctx: OperationContext, bias: np.ndarray, filter_scales, activation: int
) -> Callable[[np.ndarray], np.ndarray]:
    """Accumulator (+ bias) -> output quantized values, per channel (last axis), for any
    block of accumulators (the multipliers are derived once). ``acc`` holds exact
    integers: int32, float32 (below 2**24) or float64."""
    mult, shift = conv_multipliers(ctx.input_scale(0), filter_scales, ctx.output_scale(0))
    if mult.size == 1:
        mult, shift = mult[0], shift[0]
    zo = ctx.output_zero_point(0)
    lo, hi = activation_range_quantized(activation, ctx.output_scale(0), zo, ctx.output_type(0))
    dtype = dtype_of(ctx)

    def requantize_block(acc: np.ndarray) -> np.ndarray:
        if acc.dtype == np.int32 or acc.dtype == np.float32:
            acc32 = acc.astype(np.int32)  # float32 accumulators are exact integers < 2**24
            acc32 += bias.astype(np.int32, copy=False)  # wraps, as the C++ int32 sum
        else:
            acc64 = acc.astype(np.int64)
            acc64 += bias.astype(np.int64)
            acc32 = acc64.astype(np.int32)  # the C++ accumulator is int32: wrap
        return requantize_int32(acc32, mult, shift, zo, lo, hi, dtype)

    return requantize_block


def requantize(
    ctx: OperationContext, acc: np.ndarray, bias: np.ndarray, filter_scales, activation: int
) -> np.ndarray:
    """:func:`requantizer` on one accumulator array."""
    return requantizer(ctx, bias, filter_scales, activation)(acc)


def exact_float_dtype(max_abs_input: int, weights: np.ndarray, out_axis: int) -> type:
    """float32 when every partial sum of an integer dot product is below 2**24 in
    magnitude (so float32 arithmetic on it is exact in any order), else float64. The
    bound: ``max_abs_input`` times the largest per-output sum of |weights| (the sum over
    every axis but ``out_axis``)."""
    per_output = np.abs(weights).sum(axis=tuple(a for a in range(weights.ndim) if a != out_axis))
    worst = max_abs_input * (float(per_output.max()) if per_output.size else 0.0)
    return np.float32 if worst < 2**24 else np.float64


def _operands(ctx: OperationContext, nchw: bool, out_axis: int = 0):
    """(x, w, bias, quantized): x the stored NHWC input with its zero point and compute
    type (:class:`_Input`, converted a block at a time by the kernels), w offset by its
    zero point; when quantized, both in the float type whose products and sums are exact
    (:func:`exact_float_dtype`; ``out_axis`` is the filter's output-channel axis),
    float32 otherwise."""
    x = to_nhwc(ctx.value(0), nchw)
    w = ctx.value(1)
    b = ctx.value(2)
    if ctx.input_type(0) in QUANT8:
        zx = ctx.input_zero_point(0)
        qmin, qmax = quant_range(ctx.input_type(0))
        wz = (
            0 if ctx.input_type(1) == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL else ctx.input_zero_point(1)
        )
        wq = np.subtract(w, wz, dtype=np.float64)  # small (a filter): the exact bound in float64
        dt = exact_float_dtype(max(zx - qmin, qmax - zx), wq, out_axis)
        return _Input(x, zx, dt), wq.astype(dt, copy=False), b, True
    return _Input(x, 0, np.float32), w.astype(np.float32, copy=False), b, False


def _finisher(
    ctx: OperationContext, b: np.ndarray, quantized: bool, p: ConvParams
) -> Callable[[np.ndarray], np.ndarray]:
    """Bias, activation and output type for a block of NHWC accumulators (the kernels
    finish block by block: requantization works in int64, 8 times a quant8 output)."""
    if quantized:
        return requantizer(ctx, b, _filter_scales(ctx), p.activation)
    bias, dtype = b.astype(np.float32), dtype_of(ctx)

    def finish(acc: np.ndarray) -> np.ndarray:
        out = acc.astype(np.float32, copy=False) + bias
        return apply_activation_float(out, p.activation).astype(dtype, copy=False)

    return finish


# ---------------------------------------------------------------------------------------
# CONV_2D
# ---------------------------------------------------------------------------------------


def _check_conv_shapes(ctx: OperationContext, nchw: bool) -> tuple[int, int, int, int]:
    """Common rank/size rules; returns (N, H, W, Cin)."""
    ctx.check_rank(0, exact=4)
    ctx.check_rank(1, exact=4)
    ctx.check_rank(2, exact=1)
    n, h, w, c = spatial_dims(ctx.shape(0), nchw)
    if h <= 0 or w <= 0 or c <= 0:
        raise ctx.invalid(
            f"input 0 must have non-zero height, width and depth, got shape {list(ctx.shape(0))}"
        )
    return n, h, w, c


def _check_bias(ctx: OperationContext, cout: int) -> None:
    if ctx.shape(2)[0] != cout:
        raise ctx.invalid(
            f"input 2 (bias) has {ctx.shape(2)[0]} elements, the filter has {cout} outputs"
        )


def _output_hw(
    ctx: OperationContext, p: ConvParams, h: int, w: int, fh: int, fw: int
) -> tuple[tuple[int, int, int, int], int, int]:
    pads = p.resolve(h, w, fh, fw)
    oh = out_size(h, fh, p.stride_h, pads[2], pads[3], p.dilation_h)
    ow = out_size(w, fw, p.stride_w, pads[0], pads[1], p.dilation_w)
    if oh <= 0 or ow <= 0:
        raise ctx.invalid(
            f"filter {fh}x{fw} (dilation {p.dilation_h}x{p.dilation_w}) does not fit the "
            f"{h}x{w} input with padding {list(pads)}: output would be {oh}x{ow}"
        )
    return pads, oh, ow


def _output(
    ctx: OperationContext, p: ConvParams, src: _Input, w: np.ndarray, b, quantized: bool
) -> _Output:
    """The :class:`_Output` of a CONV_2D, DEPTHWISE_CONV_2D or GROUPED_CONV_2D (filter
    [*, fh, fw, *]) on ``src``."""
    _, h, wd, _ = src.raw.shape
    _, fh, fw, _ = w.shape
    pads, oh, ow = _output_hw(ctx, p, h, wd, fh, fw)
    return _Output(p, pads, oh, ow, _finisher(ctx, b, quantized, p), dtype_of(ctx))


def _validate_conv(ctx: OperationContext) -> None:
    _validate_common(ctx, _conv_params, channel_dim=0)


def _infer_conv(ctx: OperationContext) -> list[Shape]:
    p = ctx.once(_conv_params)
    n, h, w, c = _check_conv_shapes(ctx, p.nchw)
    cout, fh, fw, fc = ctx.shape(1)
    if fc != c:
        raise ctx.invalid(f"input 1 (filter) depth {fc} must equal the input depth {c}")
    _check_bias(ctx, cout)
    if cout <= 0 or fh <= 0 or fw <= 0:
        raise ctx.invalid(f"input 1 (filter) is empty: {list(ctx.shape(1))}")
    _, oh, ow = _output_hw(ctx, p, h, w, fh, fw)
    return [layout_shape(n, oh, ow, cout, p.nchw)]


def _execute_conv(ctx: OperationContext) -> list[np.ndarray]:
    p = read_params(ctx, _conv_form(ctx))
    src, w, b, quantized = _operands(ctx, p.nchw)
    out = _conv_blocks(src, w, _output(ctx, p, src, w, b, quantized))
    return [from_nhwc(out, p.nchw)]


CONV_2D = OperationDeclaration(
    OperationType.CONV_2D,
    _sigs(_CONV_FORMS),
    infer_shapes=_infer_conv,
    execute=_execute_conv,
    validate=_validate_conv,
    summary="2-D convolution with bias and fused activation; explicit or implicit "
    "padding, strides, dilation, NHWC/NCHW, per-channel quantized filters.",
)


# ---------------------------------------------------------------------------------------
# DEPTHWISE_CONV_2D
# ---------------------------------------------------------------------------------------


def _validate_depthwise(ctx: OperationContext) -> None:
    _validate_common(ctx, _depthwise_params, channel_dim=3)


def _infer_depthwise(ctx: OperationContext) -> list[Shape]:
    p = ctx.once(_depthwise_params)
    n, h, w, c = _check_conv_shapes(ctx, p.nchw)
    one, fh, fw, cout = ctx.shape(1)
    if one != 1:
        raise ctx.invalid(
            f"input 1 (filter) must have shape [1, h, w, depth_out], got {list(ctx.shape(1))}"
        )
    if cout != c * p.extra:
        raise ctx.invalid(
            f"input 1 (filter) depth {cout} must equal input depth {c} x depth multiplier {p.extra}"
        )
    _check_bias(ctx, cout)
    if fh <= 0 or fw <= 0:
        raise ctx.invalid(f"input 1 (filter) is empty: {list(ctx.shape(1))}")
    _, oh, ow = _output_hw(ctx, p, h, w, fh, fw)
    return [layout_shape(n, oh, ow, cout, p.nchw)]


def _execute_depthwise(ctx: OperationContext) -> list[np.ndarray]:
    p = read_params(ctx, _depthwise_form(ctx), "depth multiplier")
    src, w, b, quantized = _operands(ctx, p.nchw, out_axis=3)
    out = _depthwise_blocks(src, w[0], _output(ctx, p, src, w, b, quantized))
    return [from_nhwc(out, p.nchw)]


DEPTHWISE_CONV_2D = OperationDeclaration(
    OperationType.DEPTHWISE_CONV_2D,
    _sigs(_DEPTHWISE_FORMS),
    infer_shapes=_infer_depthwise,
    execute=_execute_depthwise,
    validate=_validate_depthwise,
    summary="Depthwise 2-D convolution (each input channel convolved with its own "
    "depth-multiplier filters), with bias and fused activation.",
)


# ---------------------------------------------------------------------------------------
# GROUPED_CONV_2D
# ---------------------------------------------------------------------------------------


def _validate_grouped(ctx: OperationContext) -> None:
    # HAL 1.2 (signed: 1.3) whatever the scales: the signatures say so.
    _validate_common(ctx, _grouped_params, channel_dim=0, strict_ranks=False)


def _infer_grouped(ctx: OperationContext) -> list[Shape]:
    p = ctx.once(_grouped_params)
    n, h, w, c = _check_conv_shapes(ctx, p.nchw)
    cout, fh, fw, cg = ctx.shape(1)
    g = p.extra
    ctx.check(
        cg * g == c,
        f"input 1 (filter) depth {cg} x {g} groups must equal the input depth {c}",
    )
    ctx.check(cout % g == 0, f"input 1 (filter) outputs {cout} must be a multiple of {g} groups")
    ctx.check(
        ctx.shape(2)[0] == cout,
        f"input 2 (bias) has {ctx.shape(2)[0]} elements, the filter has {cout} outputs",
    )
    ctx.check(cout > 0 and fh > 0 and fw > 0, f"input 1 (filter) is empty: {list(ctx.shape(1))}")
    pads = p.resolve(h, w, fh, fw)
    # groupedConvPrepare: no padding as large as the filter.
    ctx.check(
        fw > pads[0] and fw > pads[1] and fh > pads[2] and fh > pads[3],
        f"padding {list(pads)} must be smaller than the {fh}x{fw} filter",
    )
    _, oh, ow = _output_hw(ctx, p, h, w, fh, fw)
    return [layout_shape(n, oh, ow, cout, p.nchw)]


def _execute_grouped(ctx: OperationContext) -> list[np.ndarray]:
    p = read_params(ctx, _grouped_form(ctx), "number of groups")
    src, w, b, quantized = _operands(ctx, p.nchw)
    out = _conv_blocks(src, w, _output(ctx, p, src, w, b, quantized), groups=p.extra)
    return [from_nhwc(out, p.nchw)]


GROUPED_CONV_2D = OperationDeclaration(
    OperationType.GROUPED_CONV_2D,
    _sigs(_GROUPED_FORMS),
    infer_shapes=_infer_grouped,
    execute=_execute_grouped,
    validate=_validate_grouped,
    summary="Grouped 2-D convolution: input channels split into groups, each convolved "
    "with its own filters; bias and fused activation.",
)


# ---------------------------------------------------------------------------------------
# TRANSPOSE_CONV_2D
# ---------------------------------------------------------------------------------------


def _transpose_params(ctx: OperationContext) -> tuple[ConvParams, ParamForm]:
    form = _transpose_form(ctx)
    return read_params(ctx, form), form


def _transpose_checked_params(ctx: OperationContext) -> ConvParams:
    return read_params(ctx, _transpose_form(ctx))


def _transpose_pads(
    ctx: OperationContext, p: ConvParams, form: ParamForm, fh: int, fw: int
) -> tuple[int, int, int, int]:
    """Explicit padding; the implicit form pads as a forward convolution over the
    requested output size would, the tail possibly negative
    (:func:`explicit_padding_transpose`)."""
    if not form.implicit:
        return p.pads
    i = form.output_shape
    shape = ctx.shape(i)
    ctx.check(
        len(shape) == 1 and shape[0] == 4,
        f"input {i} (output shape) must be a 1-D tensor of 4 values, got shape {list(shape)}",
    )
    dims = [int(d) for d in ctx.value(i)]
    oh, ow = (dims[2], dims[3]) if p.nchw else (dims[1], dims[2])
    left, right = explicit_padding_transpose(ow, p.stride_w, fw, p.padding_code)
    top, bottom = explicit_padding_transpose(oh, p.stride_h, fh, p.padding_code)
    return left, right, top, bottom


def _validate_transpose(ctx: OperationContext) -> None:
    _validate_common(ctx, _transpose_checked_params, channel_dim=0)


def _transpose_geometry(ctx: OperationContext):
    p, form = _transpose_params(ctx)
    n, h, w, c = _check_conv_shapes(ctx, p.nchw)
    cout, fh, fw, fc = ctx.shape(1)
    ctx.check(fc == c, f"input 1 (filter) depth {fc} must equal the input depth {c}")
    ctx.check(
        ctx.shape(2)[0] == cout,
        f"input 2 (bias) has {ctx.shape(2)[0]} elements, the filter has {cout} outputs",
    )
    ctx.check(cout > 0 and fh > 0 and fw > 0, f"input 1 (filter) is empty: {list(ctx.shape(1))}")
    pads = _transpose_pads(ctx, p, form, fh, fw)
    oh = transpose_out_size(h, fh, p.stride_h, pads[2], pads[3])
    ow = transpose_out_size(w, fw, p.stride_w, pads[0], pads[1])
    ctx.check(
        oh > 0 and ow > 0,
        f"padding {list(pads)} leaves no output for a {h}x{w} input and {fh}x{fw} filter",
    )
    return p, pads, n, oh, ow, cout


def _infer_transpose(ctx: OperationContext) -> list[Shape]:
    p, _, n, oh, ow, cout = _transpose_geometry(ctx)
    return [layout_shape(n, oh, ow, cout, p.nchw)]


def _execute_transpose(ctx: OperationContext) -> list[np.ndarray]:
    p, pads, n, oh, ow, cout = _transpose_geometry(ctx)
    src, w, b, quantized = _operands(ctx, p.nchw)
    out = _Output(p, pads, oh, ow, _finisher(ctx, b, quantized, p), dtype_of(ctx))
    _, fh, fw, _ = w.shape
    per_item = oh * ow * _transpose_cost(cout, fh, fw, p)
    result = _by_batch(src, out, cout, per_item, lambda part: _transpose_part(part, w, out))
    return [from_nhwc(result, p.nchw)]


def _transpose_part(src: _Input, w: np.ndarray, out: _Output) -> np.ndarray:
    """TRANSPOSE_CONV_2D on NHWC ``src``: each input pixel scatters input .
    filter[:, i, j, :] to output (y*s + i, x*s + j). Per block of the output, the input
    pixels whose taps land inside it are converted and multiplied by every tap at once
    (one product: for an output of one block, the whole input in one product), then one
    strided add per tap. Only taps inside the block are added (a tiny output can crop a
    huge padded one: strides and paddings are bounded only by int32); positions no tap
    reaches (a negative tail, implicit SAME) get only the bias."""
    n, h, wd, c = src.raw.shape
    cout, fh, fw, _ = w.shape
    p, oh, ow = out.p, out.oh, out.ow
    sh, sw = p.stride_h, p.stride_w
    left, _, top, _ = out.pads
    all_taps = w.transpose(3, 1, 2, 0).reshape(c, fh * fw * cout)
    result = np.empty((n, oh, ow, cout), dtype=out.dtype)
    per_position = n * _transpose_cost(cout, fh, fw, p)
    positions = max(
        1, min(_OUTPUT_BLOCK // max(1, n * cout), _IM2COL_BLOCK // max(1, per_position))
    )
    block_w = min(ow, positions)
    block_h = max(1, positions // block_w)
    for c0 in range(0, ow, block_w):
        bw = min(ow - c0, block_w)
        columns = [_scattered(wd, sw, j - left - c0, bw) for j in range(fw)]
        for r0 in range(0, oh, block_h):
            bh = min(oh - r0, block_h)
            rows = [_scattered(h, sh, i - top - r0, bh) for i in range(fh)]
            acc = np.zeros((n, bh, bw, cout), dtype=src.dtype)
            y0, y1 = _covered(rows)
            x0, x1 = _covered(columns)
            if y0 < y1 and x0 < x1:
                block = src.exact(src.raw[:, y0:y1, x0:x1]).reshape(-1, c) @ all_taps
                block = block.reshape(n, y1 - y0, x1 - x0, fh, fw, cout)
                for i, j in np.ndindex(fh, fw):
                    if rows[i] is None or columns[j] is None:
                        continue
                    (in_y, out_y), (in_x, out_x) = rows[i], columns[j]
                    in_y = slice(in_y.start - y0, in_y.stop - y0)
                    in_x = slice(in_x.start - x0, in_x.stop - x0)
                    acc[:, out_y, out_x] += block[:, in_y, in_x, i, j]
                del block  # before finish allocates
            result[:, r0 : r0 + bh, c0 : c0 + bw] = out.finish(acc)
    return result


def _transpose_cost(cout: int, fh: int, fw: int, p: ConvParams) -> int:
    """Product elements per output position of :func:`_transpose_part`'s blocks: about
    fh*fw / (sh*sw) input pixels land on a position, each multiplied by all fh*fw*cout
    taps."""
    return cout * max(1, (fh * fw) ** 2 // (p.stride_h * p.stride_w))


def _covered(scatters: list[tuple[slice, slice] | None]) -> tuple[int, int]:
    """The input range [start, stop) of a list of :func:`_scattered` results (empty when
    none reaches the block)."""
    spans = [inputs for inputs, _ in filter(None, scatters)]
    if not spans:
        return 0, 0
    return min(s.start for s in spans), max(s.stop for s in spans)


def _scattered(size: int, stride: int, offset: int, out_size: int):
    """The input positions k (a slice) whose tap lands at output k*stride + offset inside
    [0, out_size), and those output positions (a strided slice); None when none does."""
    first = max(0, -(offset // stride))  # ceil(-offset / stride)
    last = min(size - 1, (out_size - 1 - offset) // stride)
    if last < first:
        return None
    start = first * stride + offset
    return slice(first, last + 1), slice(start, start + (last - first) * stride + 1, stride)


TRANSPOSE_CONV_2D = OperationDeclaration(
    OperationType.TRANSPOSE_CONV_2D,
    _sigs(_TRANSPOSE_FORMS),
    infer_shapes=_infer_transpose,
    execute=_execute_transpose,
    validate=_validate_transpose,
    summary="Transposed 2-D convolution (the gradient of CONV_2D), with explicit padding "
    "or an output shape and implicit padding; bias and fused activation.",
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    CONV_2D,
    DEPTHWISE_CONV_2D,
    GROUPED_CONV_2D,
    TRANSPOSE_CONV_2D,
)
