"""Valid one-operation examples for the pooling family (see examples.py).

A 2x3 single-channel image (1 2 3 / 4 5 6) pooled with 2x2 windows, stride 1, VALID:
two windows, (1 2 4 5) and (2 3 5 6). Average 3 and 4, maximum 5 and 6,
L2 sqrt(46/4) and sqrt(74/4). Quantized: scale 0.5, zero point 100 (signed: -28).
"""

from __future__ import annotations

import math

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

IMAGE = np.array([1, 2, 3, 4, 5, 6], dtype=np.float64).reshape(1, 2, 3, 1)
VALID_2x2 = [scalar(T.INT32, v) for v in (2, 1, 1, 2, 2, 0)]
RESULTS = {
    O.AVERAGE_POOL_2D: [3.0, 4.0],
    O.MAX_POOL_2D: [5.0, 6.0],
    O.L2_POOL_2D: [math.sqrt(46 / 4), math.sqrt(74 / 4)],
}
NAMES = {O.AVERAGE_POOL_2D: "avg_pool", O.MAX_POOL_2D: "max_pool", O.L2_POOL_2D: "l2_pool"}


def _examples():
    found = []
    for op, result in RESULTS.items():
        want = np.array(result).reshape(1, 1, 2, 1)
        for t, label in ((T.TENSOR_FLOAT32, "float32"), (T.TENSOR_FLOAT16, "float16")):
            found.append(
                example(
                    f"{NAMES[op]}_{label}",
                    op,
                    [tensor(t, IMAGE), *VALID_2x2],
                    [output(t, (1, 1, 2, 1))],
                    expected=[want],
                    atol=0.01 if t == T.TENSOR_FLOAT16 else 0.0,
                )
            )
        if op == O.L2_POOL_2D:
            continue  # float only
        for t, zp in ((T.TENSOR_QUANT8_ASYMM, 100), (T.TENSOR_QUANT8_ASYMM_SIGNED, -28)):
            label = "quant8" if zp == 100 else "quant8_signed"
            q = {"scale": 0.5, "zero_point": zp}
            found.append(
                example(
                    f"{NAMES[op]}_{label}",
                    op,
                    [tensor(t, IMAGE / 0.5 + zp, **q), *VALID_2x2],
                    [output(t, (1, 1, 2, 1), **q)],
                    expected=[want / 0.5 + zp],
                )
            )
    return found


EXAMPLES = [
    *_examples(),
    # SAME padding, stride 2, NCHW, relu1 on (-3 -2 -1 / 0 1 2): windows cover columns
    # (0, 1) and (2, padding); averages of real pixels only: -4/4 = -1 and 1/2.
    example(
        "avg_pool_same_nchw_relu1_float32",
        O.AVERAGE_POOL_2D,
        [
            tensor(T.TENSOR_FLOAT32, IMAGE.reshape(1, 1, 2, 3) - 4),
            *[scalar(T.INT32, v) for v in (1, 2, 2, 2, 2, 2)],
            scalar(T.BOOL, True),
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 1, 2))],
        expected=[[[[[-1.0, 0.5]]]]],
    ),
    # Explicit padding (left 1), relaxed: max over (pad, 1, pad, 4) = 4 and (2 3 5 6) = 6.
    example(
        "max_pool_explicit_relaxed",
        O.MAX_POOL_2D,
        [
            tensor(T.TENSOR_FLOAT32, IMAGE),
            *[scalar(T.INT32, v) for v in (1, 0, 0, 0, 2, 1, 2, 2, 0)],
        ],
        [output(T.TENSOR_FLOAT32, (1, 1, 2, 1))],
        expected=[[[[[4.0], [6.0]]]]],
        relaxed=True,
    ),
]
