"""Valid one-operation examples for the resize family (see examples.py).

The 2x2 image (0 1 / 2 3) upsampled to 4x4 with the legacy coordinates (scale 1/2):
bilinear samples each axis at 0, 0.5, 1, 1.5 (the last clamped), giving (a, (a+b)/2, b, b);
nearest neighbour takes (a, a, b, b). All results are multiples of 1/2, exact at scale 1/4.
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

IMAGE = np.array([0, 1, 2, 3], dtype=np.float64).reshape(1, 2, 2, 1)
_B = np.array([[1, 0], [0.5, 0.5], [0, 1], [0, 1]])  # bilinear weights per axis
_N = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
BILINEAR = (_B @ IMAGE[0, :, :, 0] @ _B.T).reshape(1, 4, 4, 1)
NEAREST = (_N @ IMAGE[0, :, :, 0] @ _N.T).reshape(1, 4, 4, 1)
SIZE = [scalar(T.INT32, 4), scalar(T.INT32, 4)]
NHWC = scalar(T.BOOL, False)


def _examples():
    found = []
    for op, name, want, flags in (
        (O.RESIZE_BILINEAR, "resize_bilinear", BILINEAR, []),
        (O.RESIZE_NEAREST_NEIGHBOR, "resize_nearest_neighbor", NEAREST, [NHWC]),
    ):
        for t, label in ((T.TENSOR_FLOAT32, "float32"), (T.TENSOR_FLOAT16, "float16")):
            found.append(
                example(
                    f"{name}_{label}",
                    op,
                    [tensor(t, IMAGE), *SIZE, *flags],
                    [output(t, (1, 4, 4, 1))],
                    expected=[want],
                )
            )
        for t, zp, label in (
            (T.TENSOR_QUANT8_ASYMM, 10, "quant8"),
            (T.TENSOR_QUANT8_ASYMM_SIGNED, -10, "quant8_signed"),
        ):
            q = {"scale": 0.25, "zero_point": zp}
            found.append(
                example(
                    f"{name}_{label}",
                    op,
                    [tensor(t, IMAGE / 0.25 + zp, **q), *SIZE, *(flags or [NHWC])],
                    [output(t, (1, 4, 4, 1), **q)],
                    expected=[want / 0.25 + zp],
                )
            )
    return found


EXAMPLES = [
    *_examples(),
    # align_corners, NCHW, 2x2 -> 3x3: samples at 0, 0.5, 1 on each axis.
    example(
        "resize_bilinear_align_corners_nchw_float32",
        O.RESIZE_BILINEAR,
        [
            tensor(T.TENSOR_FLOAT32, IMAGE.reshape(1, 1, 2, 2)),
            scalar(T.INT32, 3),
            scalar(T.INT32, 3),
            scalar(T.BOOL, True),
            scalar(T.BOOL, True),
            scalar(T.BOOL, False),
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 3, 3))],
        expected=[[[[[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]]]]],
    ),
    # scale form with half-pixel centres: 1x2 -> 1x4 (scale 2): (a, 3a/4 + b/4, a/4 + 3b/4, b)
    example(
        "resize_bilinear_scale_half_pixel_float32",
        O.RESIZE_BILINEAR,
        [
            tensor(T.TENSOR_FLOAT32, [0.0, 4.0], (1, 1, 2, 1)),
            scalar(T.FLOAT32, 2.0),
            scalar(T.FLOAT32, 1.0),
            NHWC,
            scalar(T.BOOL, False),
            scalar(T.BOOL, True),
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 4, 1))],
        expected=[[[[[0.0], [1.0], [3.0], [4.0]]]]],
    ),
    # nearest neighbour, scale form, half-pixel centres, relaxed: 1x2 -> 1x3 at 1/3, 1, 5/3
    example(
        "resize_nearest_neighbor_scale_half_pixel_relaxed",
        O.RESIZE_NEAREST_NEIGHBOR,
        [
            tensor(T.TENSOR_FLOAT32, [10.0, 20.0], (1, 1, 2, 1)),
            scalar(T.FLOAT32, 1.5),
            scalar(T.FLOAT32, 1.0),
            NHWC,
            scalar(T.BOOL, False),
            scalar(T.BOOL, True),
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 3, 1))],
        expected=[[[[[10.0], [20.0], [20.0]]]]],
        relaxed=True,
    ),
]
