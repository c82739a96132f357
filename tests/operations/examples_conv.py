"""Valid one-operation examples for the convolution family (see examples.py).

Each operation has a tiny case whose real-valued result is worked out by hand in the
comments; every data type runs it with scales chosen so that inputs, filters, bias and
results are exactly representable, so the quantized expectations are the real results
divided by the output scale plus the zero point.
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.hal.types import SymmPerChannelQuantParams
from driver.testing import OpExample, example, output, scalar, tensor


def I(v):  # noqa: E743 - a terse INT32 scalar
    return scalar(T.INT32, v)


NHWC = scalar(T.BOOL, False)

# (input scale, zero point), (filter scale, zero point), (output scale, zero point)
Q = ((0.5, 128), (0.5, 128), (0.5, 128))


def variants(
    name: str,
    op: int,
    x,
    w,
    b,
    params: list,
    expected,
    channel_dim: int,
    q=Q,
) -> list[OpExample]:
    """The case in float32, float16, quant8 (asymm and per-channel filter) and signed
    quant8 (both filters)."""
    x, w, b, expected = (np.asarray(a, dtype=np.float64) for a in (x, w, b, expected))
    out_shape = expected.shape
    found = []
    for t in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        suffix = "float32" if t == T.TENSOR_FLOAT32 else "float16"
        found.append(
            example(
                f"{name}_{suffix}",
                op,
                [tensor(t, x), tensor(t, w, const=True), tensor(t, b, const=True), *params],
                [output(t, out_shape)],
                expected=[expected],
            )
        )
    (si, zi), (sf, zf), (so, zo) = q
    n_out = w.shape[channel_dim]
    for t, off in ((T.TENSOR_QUANT8_ASYMM, 0), (T.TENSOR_QUANT8_ASYMM_SIGNED, -128)):
        label = "quant8" if off == 0 else "quant8_signed"
        qx = tensor(t, x / si + zi + off, scale=si, zero_point=zi + off)
        want = expected / so + zo + off
        qo = output(t, out_shape, scale=so, zero_point=zo + off)
        qw = tensor(t, w / sf + zf + off, scale=sf, zero_point=zf + off, const=True)
        qb = tensor(T.TENSOR_INT32, b / (si * sf), scale=si * sf, const=True)
        found.append(example(f"{name}_{label}", op, [qx, qw, qb, *params], [qo], expected=[want]))
        # Per-channel: channel k's filter scale is sf / 2**(k % 2).
        scales = np.array([sf / 2 ** (k % 2) for k in range(n_out)])
        shape = [1] * w.ndim
        shape[channel_dim] = n_out
        pw = w / scales.reshape(shape)
        bias_scale = np.broadcast_to(si * scales, b.shape)
        cq = SymmPerChannelQuantParams(channel_dim, tuple(float(s) for s in scales))
        found.append(
            example(
                f"{name}_{label}_per_channel",
                op,
                [
                    qx,
                    tensor(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, pw, channel_quant=cq, const=True),
                    tensor(T.TENSOR_INT32, b / bias_scale, const=True),
                    *params,
                ],
                [qo],
                expected=[want],
            )
        )
    return found


EXAMPLES: list[OpExample] = [
    # CONV_2D, VALID 2x2 over 2x2: 1*1 + 2*(-1) + 3*2 + 4*0 + 0.5 = 5.5
    *variants(
        "conv2d_valid",
        O.CONV_2D,
        [[[[1], [2]], [[3], [4]]]],
        [[[[1], [-1]], [[2], [0]]]],
        [0.5],
        [I(2), I(1), I(1), I(0)],
        [[[[5.5]]]],
        channel_dim=0,
    ),
    # DEPTHWISE_CONV_2D, 1x2 image of 2 channels, 1x2 filter, multiplier 1:
    # c0 = 1*1 + 2*3 = 7; c1 = 10*2 + 20*4 + 0.5 = 100.5
    *variants(
        "depthwise_conv2d",
        O.DEPTHWISE_CONV_2D,
        [[[[1, 10], [2, 20]]]],
        [[[[1, 2], [3, 4]]]],
        [0, 0.5],
        [I(2), I(1), I(1), I(1), I(0)],
        [[[[7, 100.5]]]],
        channel_dim=3,
        q=((0.5, 128), (0.5, 128), (0.5, 0)),
    ),
    # GROUPED_CONV_2D, 4 channels in 2 groups of 2, two 1x1 filters per group:
    # g0: (1,2).(1,1) = 3, (1,2).(1,-1) = -1; g1: (3,4).(2,0) = 6, (3,4).(0,3) = 12
    *variants(
        "grouped_conv2d",
        O.GROUPED_CONV_2D,
        [[[[1, 2, 3, 4]]]],
        [[[[1, 1]]], [[[1, -1]]], [[[2, 0]]], [[[0, 3]]]],
        [0, 0, 0, 0],
        [I(2), I(1), I(1), I(2), I(0), NHWC],
        [[[[3, -1, 6, 12]]]],
        channel_dim=0,
    ),
    # TRANSPOSE_CONV_2D, 1x2 input (1, 2), 1x3 filter (1, 2, -1), stride 2 across:
    # 1 scatters (1, 2, -1) at 0..2, 2 scatters (2, 4, -2) at 2..4 -> 1, 2, 1, 4, -2
    *variants(
        "transpose_conv2d",
        O.TRANSPOSE_CONV_2D,
        [[[[1], [2]]]],
        [[[[1], [2], [-1]]]],
        [0],
        [I(0), I(0), I(0), I(0), I(2), I(1), I(0), NHWC],
        [[[[1], [2], [1], [4], [-2]]]],
        channel_dim=0,
    ),
    # TRANSPOSE_CONV_2D output-shape form [1, 1, 4, 1], SAME, stride 2, 1x1 filter (3):
    # Android pads (0, -1) ("padding tail fit tightly to the end of the last stride"), so
    # the output is the requested 4 wide: 1 -> 3 at 0, 2 -> 6 at 2, nothing reaches 1
    # and 3; plus bias 0.5 -> 3.5, 0.5, 6.5, 0.5.
    *variants(
        "transpose_conv2d_same_negative_tail",
        O.TRANSPOSE_CONV_2D,
        [[[[1], [2]]]],
        [[[[3]]]],
        [0.5],
        [tensor(T.TENSOR_INT32, [1, 1, 4, 1], const=True), I(1), I(2), I(1), I(0), NHWC],
        [[[[3.5], [0.5], [6.5], [0.5]]]],
        channel_dim=0,
    ),
    # CONV_2D SAME over a 3x3 image 1..9 with filter (1 2; 3 4), NCHW: the last row and
    # column see padding, e.g. out[0, 2] = 3*1 + 6*3 = 21.
    example(
        "conv2d_same_nchw_float32",
        O.CONV_2D,
        [
            tensor(T.TENSOR_FLOAT32, np.arange(1, 10).reshape(1, 1, 3, 3)),
            tensor(T.TENSOR_FLOAT32, [1, 2, 3, 4], (1, 2, 2, 1), const=True),
            tensor(T.TENSOR_FLOAT32, [0], const=True),
            I(1),
            I(1),
            I(1),
            I(0),
            scalar(T.BOOL, True),
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 3, 3))],
        expected=[[[[[37, 47, 21], [67, 77, 33], [23, 26, 9]]]]],
    ),
    # CONV_2D explicit padding 1 everywhere, stride 2, dilation 1, relu, relaxed:
    # corner 2x2 sums 12, 16, 24, 28 minus 20.
    example(
        "conv2d_explicit_stride_relu_relaxed",
        O.CONV_2D,
        [
            tensor(T.TENSOR_FLOAT32, np.arange(1, 10).reshape(1, 3, 3, 1)),
            tensor(T.TENSOR_FLOAT32, np.ones((1, 3, 3, 1)), const=True),
            tensor(T.TENSOR_FLOAT32, [-20], const=True),
            *[I(v) for v in (1, 1, 1, 1, 2, 2, 1)],
            NHWC,
            I(1),
            I(1),
        ],
        [output(T.TENSOR_FLOAT32, (1, 2, 2, 1))],
        expected=[[[[[0], [0]], [[4], [8]]]]],
        relaxed=True,
    ),
    # DEPTHWISE_CONV_2D explicit padding with dilation 2 and multiplier 2: taps (0,0),
    # (0,2) of a 1x3 row (1, 2, 3) -> 1 + 3 = 4 per filter of ones, times (1, 2).
    example(
        "depthwise_conv2d_dilation_multiplier_float32",
        O.DEPTHWISE_CONV_2D,
        [
            tensor(T.TENSOR_FLOAT32, [1, 2, 3], (1, 1, 3, 1)),
            tensor(T.TENSOR_FLOAT32, [1, 2, 1, 2], (1, 1, 2, 2), const=True),
            tensor(T.TENSOR_FLOAT32, [0, 0], const=True),
            *[I(v) for v in (0, 0, 0, 0, 1, 1, 2, 0)],
            NHWC,
            I(2),
            I(1),
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 1, 2))],
        expected=[[[[[4, 8]]]]],
    ),
    # TRANSPOSE_CONV_2D output-shape form, SAME: total padding 1 crops the tail.
    example(
        "transpose_conv2d_output_shape_float32",
        O.TRANSPOSE_CONV_2D,
        [
            tensor(T.TENSOR_FLOAT32, [1, 2], (1, 1, 2, 1)),
            tensor(T.TENSOR_FLOAT32, [1, 2, -1], (1, 1, 3, 1), const=True),
            tensor(T.TENSOR_FLOAT32, [0], const=True),
            tensor(T.TENSOR_INT32, [1, 1, 4, 1], const=True),
            I(1),
            I(2),
            I(1),
            I(0),
            NHWC,
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 4, 1))],
        expected=[[[[[1], [2], [1], [4]]]]],
    ),
]
