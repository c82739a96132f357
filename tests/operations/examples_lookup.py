"""Valid one-operation examples for the lookup family (see examples.py and the
logical-number convention of examples_shape.py)."""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import OpExample, example, output
from tests.operations.examples_shape import ALL5, SHORT, data, i32, out, per_type

TABLE = [[1, 2], [3, 4], [5, 6]]

EXAMPLES: list[OpExample] = []
E = EXAMPLES.extend

E(
    per_type(
        "embedding_lookup_rows",
        O.EMBEDDING_LOOKUP,
        ALL5,
        lambda t: (
            [i32([2, 0, 2], const=False), data(t, TABLE)],
            [out(t, (3, 2))],
            [[[5, 6], [1, 2], [5, 6]]],
        ),
    )
)


def _hashtable(t: int) -> OpExample:
    """Keys 30 and -4 hit rows 2 and 0; key 7 misses, and its row is zero bytes (a
    stored 0, not the zero point), with hit flags 1, 0, 1."""
    table = data(t, TABLE)
    row = table.values
    return example(
        f"hashtable_lookup_hits_and_miss_{SHORT[t]}",
        O.HASHTABLE_LOOKUP,
        [i32([30, 7, -4], const=False), i32([-4, 10, 30]), table],
        [out(t, (3, 2)), output(T.TENSOR_QUANT8_ASYMM, (3,), scale=1.0, zero_point=0)],
        [np.array([row[2], np.zeros_like(row[0]), row[0]]), np.array([1, 0, 1])],
    )


EXAMPLES += [
    _hashtable(t)
    for t in (
        T.TENSOR_FLOAT32,
        T.TENSOR_INT32,
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
    )
]
