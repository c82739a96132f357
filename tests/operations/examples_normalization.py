"""Valid one-operation examples for the normalization family (see examples.py).

Softmax of (0, ln 3) is (1/4, 3/4); a uniform quantized row of 4 gives 1/4 = 64/256.
L2 normalization of (3, 4) is (0.6, 0.8): at scale 1/128 that is 76.8 and 102.4 around
the zero point (the integer algorithm may land on either neighbour: atol 1).
LRN of (1, 2, 3), radius 1, bias = alpha = beta = 1: (1/6, 2/15, 3/14).
Instance normalization of channels (1, 10) and (3, 10), gamma 2, beta 0.5: each becomes
(-1, 1) * 2 + 0.5.
"""

from __future__ import annotations

import math

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

F = ((T.TENSOR_FLOAT32, T.FLOAT32, "float32", 1e-5), (T.TENSOR_FLOAT16, T.FLOAT16, "float16", 0.01))
Q = ((T.TENSOR_QUANT8_ASYMM, 0, "quant8"), (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, "quant8_signed"))
LN3 = math.log(3.0)

EXAMPLES = [
    *[
        example(
            f"softmax_{label}",
            O.SOFTMAX,
            [tensor(t, [[0.0, LN3]]), scalar(st, 1.0)],
            [output(t, (1, 2))],
            expected=[[[0.25, 0.75]]],
            atol=tol,
        )
        for t, st, label, tol in F
    ],
    *[
        example(
            f"softmax_{label}",
            O.SOFTMAX,
            [
                tensor(t, np.full((1, 4), 77 + off), scale=0.5, zero_point=3 + off),
                scalar(T.FLOAT32, 1.0),
            ],
            [output(t, (1, 4), scale=1 / 256, zero_point=off)],
            expected=[np.full((1, 4), 64 + off)],
        )
        for t, off, label in Q
    ],
    # axis 0 of a 3-D tensor (HAL 1.2 form): columns (0, ln 3) -> (1/4, 3/4)
    example(
        "softmax_axis0_rank3_float32",
        O.SOFTMAX,
        [tensor(T.TENSOR_FLOAT32, [[[0.0]], [[LN3]]]), scalar(T.FLOAT32, 1.0), scalar(T.INT32, 0)],
        [output(T.TENSOR_FLOAT32, (2, 1, 1))],
        expected=[[[[0.25]], [[0.75]]]],
    ),
    *[
        example(
            f"log_softmax_{label}",
            O.LOG_SOFTMAX,
            [tensor(t, [0.0, LN3]), scalar(st, 1.0), scalar(T.INT32, -1)],
            [output(t, (2,))],
            expected=[[math.log(0.25), math.log(0.75)]],
            atol=tol,
        )
        for t, st, label, tol in F
    ],
    *[
        example(
            f"l2_normalization_{label}",
            O.L2_NORMALIZATION,
            [tensor(t, [[[[3.0, 4.0]]]])],
            [output(t, (1, 1, 1, 2))],
            expected=[[[[[0.6, 0.8]]]]],
            atol=tol,
        )
        for t, _, label, tol in F
    ],
    *[
        example(
            f"l2_normalization_{label}",
            O.L2_NORMALIZATION,
            [tensor(t, [[13 + off, 15 + off]], scale=0.5, zero_point=7 + off), scalar(T.INT32, 1)],
            [output(t, (1, 2), scale=1 / 128, zero_point=128 + off)],
            expected=[[[205 + off, 230 + off]]],
            atol=1,
        )
        for t, off, label in Q
    ],
    *[
        example(
            f"local_response_normalization_{label}",
            O.LOCAL_RESPONSE_NORMALIZATION,
            [tensor(t, [[[[1.0, 2.0, 3.0]]]]), scalar(T.INT32, 1), *[scalar(st, 1.0)] * 3],
            [output(t, (1, 1, 1, 3))],
            expected=[[[[[1 / 6, 2 / 15, 3 / 14]]]]],
            atol=tol,
        )
        for t, st, label, tol in F
    ],
    *[
        example(
            f"instance_normalization_{label}",
            O.INSTANCE_NORMALIZATION,
            [
                tensor(t, np.array([1, 3, 10, 10]).reshape(1, 2, 1, 2)),
                scalar(st, 2.0),
                scalar(st, 0.5),
                scalar(st, 0.0),
                scalar(T.BOOL, False),
            ],
            [output(t, (1, 2, 1, 2))],
            expected=[np.array([-1.5, -1.5, 2.5, 2.5]).reshape(1, 2, 1, 2)],
            atol=tol,
        )
        for t, st, label, tol in F
    ],
]
