"""Valid one-operation examples for the reduction family (see examples.py and the
logical-number convention of examples_shape.py)."""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import OpExample, example, output, scalar, tensor
from tests.operations.examples_shape import ALL5, MOVE, data, i32, out, per_type

FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
ORDERED = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)

M23 = [[1, 5, 3], [4, 2, 6]]

EXAMPLES: list[OpExample] = []
E = EXAMPLES.extend

# Means chosen integral so that every type holds them exactly: rows average 3 and 4.
E(
    per_type(
        "mean_last_axis",
        O.MEAN,
        MOVE,
        lambda t: ([data(t, M23), i32([-1]), scalar(T.INT32, 0)], [out(t, (2,))], [[3, 4]]),
    )
)
E(
    per_type(
        "mean_keep_dims",
        O.MEAN,
        (T.TENSOR_FLOAT32,),
        lambda t: (
            [data(t, M23), i32([0]), scalar(T.INT32, 1)],
            [out(t, (1, 3))],
            [[[2.5, 3.5, 4.5]]],
        ),
    )
)
E(
    per_type(
        "reduce_sum_axis0",
        O.REDUCE_SUM,
        FLOATS,
        lambda t: (
            [data(t, M23), i32([0]), scalar(T.BOOL, False)],
            [out(t, (3,))],
            [[5, 7, 9]],
        ),
    )
)
E(
    per_type(
        "reduce_prod_all_keep",
        O.REDUCE_PROD,
        FLOATS,
        lambda t: (
            [data(t, M23), i32([0, 1]), scalar(T.BOOL, True)],
            [out(t, (1, 1))],
            [[[720]]],
        ),
    )
)
E(
    per_type(
        "reduce_max_axis1",
        O.REDUCE_MAX,
        ORDERED,
        lambda t: (
            [data(t, M23), i32([1]), scalar(T.BOOL, False)],
            [out(t, (2,))],
            [[5, 6]],
        ),
    )
)
E(
    per_type(
        "reduce_min_axis0",
        O.REDUCE_MIN,
        ORDERED,
        lambda t: (
            [data(t, M23), i32([-2]), scalar(T.BOOL, True)],
            [out(t, (1, 3))],
            [[[1, 2, 3]]],
        ),
    )
)
_B = [[True, False, False], [True, True, False]]
EXAMPLES += [
    example(
        "reduce_any_bool8",
        O.REDUCE_ANY,
        [tensor(T.TENSOR_BOOL8, _B), i32([0]), scalar(T.BOOL, False)],
        [output(T.TENSOR_BOOL8, (3,))],
        [[True, True, False]],
    ),
    example(
        "reduce_all_bool8",
        O.REDUCE_ALL,
        [tensor(T.TENSOR_BOOL8, _B), i32([1]), scalar(T.BOOL, False)],
        [output(T.TENSOR_BOOL8, (2,))],
        [[False, False]],
    ),
]
E(
    per_type(
        "argmax_axis1",
        O.ARGMAX,
        ALL5,
        lambda t: (
            [data(t, M23), scalar(T.INT32, 1)],
            [output(T.TENSOR_INT32, (2,))],
            [[1, 2]],
        ),
    )
)
E(
    per_type(
        "argmin_axis0",
        O.ARGMIN,
        ALL5,
        lambda t: (
            [data(t, M23), scalar(T.INT32, 0)],
            [output(T.TENSOR_INT32, (3,))],
            [[0, 1, 0]],
        ),
    )
)
# Equal values come out larger index first (Android reverses an ascending pair sort).
E(
    per_type(
        "topk_v2_ties",
        O.TOPK_V2,
        ALL5,
        lambda t: (
            [data(t, [[3, 7, 3, 1]]), scalar(T.INT32, 3)],
            [out(t, (1, 3)), output(T.TENSOR_INT32, (1, 3))],
            [[[7, 3, 3]], np.array([[1, 2, 0]])],
        ),
    )
)
