"""Valid one-operation examples for the comparison and logic family (see examples.py).

Every comparison runs in every input type on the same real values: A (2x2) against the
broadcast row B. Quantized inputs use different scales and zero points for A and B, so
the expected result holds only if the real values are compared."""

from __future__ import annotations

import operator

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, tensor
from tests.operations.examples_elementwise import q8, qout, qtensor, zp

F32, F16, I32, B8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_BOOL8
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED

A = [[1.0, -2.0], [3.0, 2.0]]
B = [1.0, 2.0]

_RELATIONS = {
    O.EQUAL: operator.eq,
    O.NOT_EQUAL: operator.ne,
    O.GREATER: operator.gt,
    O.GREATER_EQUAL: operator.ge,
    O.LESS: operator.lt,
    O.LESS_EQUAL: operator.le,
}


def _inputs(type_code: int) -> list:
    if type_code in (U8, S8):
        return [qtensor(type_code, A, 0.5, 120), qtensor(type_code, B, 0.25, 128)]
    return [tensor(type_code, A), tensor(type_code, B)]


EXAMPLES = []
for _op, _rel in _RELATIONS.items():
    _want = [[_rel(a, b) for a, b in zip(row, B)] for row in A]
    for _t, _tag in (
        (F32, "float32"),
        (F16, "float16"),
        (I32, "int32"),
        (U8, "quant8"),
        (S8, "quant8_signed"),
    ):
        EXAMPLES.append(
            example(f"{_op.name.lower()}_{_tag}", _op, _inputs(_t), [output(B8, (2, 2))], [_want])
        )
    # Booleans compare as false < true.
    _bools = ([[True, False], [False, True]], [True, False])
    EXAMPLES.append(
        example(
            f"{_op.name.lower()}_bool8",
            _op,
            [tensor(B8, _bools[0]), tensor(B8, _bools[1])],
            [output(B8, (2, 2))],
            [[[_rel(int(a), int(b)) for a, b in zip(row, _bools[1])] for row in _bools[0]]],
        )
    )

P = [[True, True], [False, False]]
Q = [True, False]
EXAMPLES += [
    example(
        "logical_and_broadcast",
        O.LOGICAL_AND,
        [tensor(B8, P), tensor(B8, Q)],
        [output(B8, (2, 2))],
        [[[True, False], [False, False]]],
    ),
    example(
        "logical_or_broadcast",
        O.LOGICAL_OR,
        [tensor(B8, P), tensor(B8, Q)],
        [output(B8, (2, 2))],
        [[[True, True], [True, False]]],
    ),
    example(
        "logical_not",
        O.LOGICAL_NOT,
        [tensor(B8, Q)],
        [output(B8, (2,))],
        [[False, True]],
    ),
]

COND = [True, False, False, True]
X = [1.5, -2.0, 3.0, 0.5]
Y = [-1.0, 4.0, 0.0, 2.5]
_picked = [x if c else y for c, x, y in zip(COND, X, Y)]
for _t, _tag in ((F32, "float32"), (F16, "float16")):
    EXAMPLES.append(
        example(
            f"select_{_tag}",
            O.SELECT,
            [tensor(B8, COND), tensor(_t, X), tensor(_t, Y)],
            [output(_t, (4,))],
            [_picked],
        )
    )
EXAMPLES.append(
    example(
        "select_int32",
        O.SELECT,
        [tensor(B8, COND), tensor(I32, [1, 2, 3, 4]), tensor(I32, [-1, -2, -3, -4])],
        [output(I32, (4,))],
        [[1, -2, -3, 4]],
    )
)
for _t, _tag in ((U8, "quant8"), (S8, "quant8_signed")):
    # Inputs in three different quantizations; the output requantizes both.
    EXAMPLES.append(
        example(
            f"select_{_tag}_requantized",
            O.SELECT,
            [tensor(B8, COND), qtensor(_t, X, 0.5, 128), qtensor(_t, Y, 0.25, 100)],
            [qout(_t, (4,), 0.5, 110)],
            [q8(_picked, 0.5, zp(_t, 110), _t)],
        )
    )

assert all(isinstance(e.expected[0], np.ndarray) for e in EXAMPLES)
