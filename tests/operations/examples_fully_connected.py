"""Valid one-operation examples for FULLY_CONNECTED (see examples.py).

Input rows (1, 2, 3) and (-1, 0, 1), weights rows (1, 0, 1) and (0, 2, 0), bias
(0.5, -1): outputs (4.5, 3) and (0.5, -1). Quantized: input and weights scale 0.5 (bias
0.25), output scale 0.5, zero points 128 (signed: 0).
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

X = np.array([[1, 2, 3], [-1, 0, 1]], dtype=np.float64)
W = np.array([[1, 0, 1], [0, 2, 0]], dtype=np.float64)
B = np.array([0.5, -1])
Y = np.array([[4.5, 3], [0.5, -1]])
NONE = scalar(T.INT32, 0)

EXAMPLES = [
    *[
        example(
            f"fully_connected_{label}",
            O.FULLY_CONNECTED,
            [tensor(t, X), tensor(t, W, const=True), tensor(t, B, const=True), NONE],
            [output(t, (2, 2))],
            expected=[Y],
        )
        for t, label in ((T.TENSOR_FLOAT32, "float32"), (T.TENSOR_FLOAT16, "float16"))
    ],
    *[
        example(
            f"fully_connected_{label}",
            O.FULLY_CONNECTED,
            [
                tensor(t, X / 0.5 + zp, scale=0.5, zero_point=zp),
                tensor(t, W / 0.5 + zp, scale=0.5, zero_point=zp, const=True),
                tensor(T.TENSOR_INT32, B / 0.25, scale=0.25, const=True),
                NONE,
            ],
            [output(t, (2, 2), scale=0.5, zero_point=zp)],
            expected=[Y / 0.5 + zp],
        )
        for t, zp, label in (
            (T.TENSOR_QUANT8_ASYMM, 128, "quant8"),
            (T.TENSOR_QUANT8_ASYMM_SIGNED, 0, "quant8_signed"),
        )
    ],
    # A 4-D input of 6 elements read as 3 rows of input size 2, relu, relaxed:
    # rows (0, 1), (2, 3), (4, 5) times weights (1, -1) -> -1, -1, -1 -> relu 0; (1, 1) -> 1, 5, 9.
    example(
        "fully_connected_rank4_relu_relaxed",
        O.FULLY_CONNECTED,
        [
            tensor(T.TENSOR_FLOAT32, np.arange(6).reshape(1, 3, 1, 2)),
            tensor(T.TENSOR_FLOAT32, [[1, -1], [1, 1]], const=True),
            tensor(T.TENSOR_FLOAT32, [0, 0], const=True),
            scalar(T.INT32, 1),
        ],
        [output(T.TENSOR_FLOAT32, (3, 2))],
        expected=[[[0, 1], [0, 5], [0, 9]]],
        relaxed=True,
    ),
]
