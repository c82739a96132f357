"""Valid one-operation examples for the unary math family (see examples.py).

Expected values come from Python's ``math`` module on the same inputs."""

from __future__ import annotations

import math

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, tensor

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32

SIGNED = [[-2.5, -0.5], [0.0, 1.75]]
POSITIVE = [[0.25, 1.0], [2.0, 16.0]]

_FLOAT_CASES = [
    (O.ABS, SIGNED, abs),
    (O.EXP, SIGNED, math.exp),
    (O.LOG, POSITIVE, math.log),
    (O.SIN, SIGNED, math.sin),
    (O.SQRT, POSITIVE, math.sqrt),
    (O.RSQRT, POSITIVE, lambda x: 1 / math.sqrt(x)),
    (O.NEG, SIGNED, lambda x: -x),
    (O.FLOOR, SIGNED, math.floor),
]

EXAMPLES = []
for _op, _x, _fn in _FLOAT_CASES:
    _want = [[_fn(v) for v in row] for row in _x]
    EXAMPLES += [
        example(
            f"{_op.name.lower()}_float32", _op, [tensor(F32, _x)], [output(F32, (2, 2))], [_want]
        ),
        example(
            f"{_op.name.lower()}_float16",
            _op,
            [tensor(F16, _x)],
            [output(F16, (2, 2))],
            [_want],
            atol=1e-2,
        ),
    ]

EXAMPLES += [
    example(
        "abs_int32",
        O.ABS,
        [tensor(I32, [-3, 0, 7, -(2**31)])],
        [output(I32, (4,))],
        [[3, 0, 7, -(2**31)]],  # abs(INT32_MIN) wraps
    ),
    example(
        "neg_int32",
        O.NEG,
        [tensor(I32, [[-3, 0], [7, -(2**31)]])],
        [output(I32, (2, 2))],
        [[[3, 0], [-7, -(2**31)]]],
    ),
]
