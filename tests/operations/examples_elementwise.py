"""Valid one-operation examples for the elementwise family (see examples.py)."""

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

EXAMPLES = [
    example(
        "add_float32_broadcast",
        O.ADD,
        [
            tensor(T.TENSOR_FLOAT32, [[1, 2], [3, 4]]),
            tensor(T.TENSOR_FLOAT32, [10, 20]),
            scalar(T.INT32, 0),
        ],
        [output(T.TENSOR_FLOAT32, (2, 2))],
        expected=[[[11, 22], [13, 24]]],
    ),
]
