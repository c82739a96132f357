"""Valid one-operation examples for the activation family (see examples.py).

Float expectations come from the functions' definitions; quantized LOGISTIC/TANH/
HARD_SWISH expectations are the real function quantized to the fixed output scale, with
a tolerance of one step (the fixed-point kernels are accurate to about half a step).
"""

from __future__ import annotations

import math

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor
from tests.operations.examples_elementwise import q8, qout, qtensor, zp

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def hard_swish(x: float) -> float:
    return x * min(6.0, max(0.0, x + 3.0)) / 6.0


XS = [-1.0, 0.0, 1.0, 2.5]
RELU_IN = [-2.0, -0.5, 0.5, 7.0]
RELU_OUT = {
    O.RELU: [0.0, 0.0, 0.5, 7.0],
    O.RELU1: [-1.0, -0.5, 0.5, 1.0],
    O.RELU6: [0.0, 0.0, 0.5, 6.0],
}

EXAMPLES = []
for _op, _want in RELU_OUT.items():
    name = _op.name.lower()
    EXAMPLES += [
        example(f"{name}_float32", _op, [tensor(F32, RELU_IN)], [output(F32, (4,))], [_want]),
        example(
            f"{name}_float16",
            _op,
            [tensor(F16, [RELU_IN])],
            [output(F16, (1, 4))],
            [[_want]],
            atol=1e-3,
        ),
    ]
    for _t, _tag in ((U8, "quant8"), (S8, "quant8_signed")):
        EXAMPLES.append(
            example(
                f"{name}_{_tag}",
                _op,
                [qtensor(_t, RELU_IN, 0.5, 100)],
                [qout(_t, (4,), 0.5, 100)],
                [q8(_want, 0.5, zp(_t, 100), _t)],
            )
        )

EXAMPLES += [
    example(
        "logistic_float32",
        O.LOGISTIC,
        [tensor(F32, XS)],
        [output(F32, (4,))],
        [[sigmoid(x) for x in XS]],
    ),
    example(
        "logistic_float16",
        O.LOGISTIC,
        [tensor(F16, XS)],
        [output(F16, (4,))],
        [[sigmoid(x) for x in XS]],
        atol=1e-3,
    ),
    example(
        "tanh_float32", O.TANH, [tensor(F32, XS)], [output(F32, (4,))], [[math.tanh(x) for x in XS]]
    ),
    example(
        "tanh_float16",
        O.TANH,
        [tensor(F16, XS)],
        [output(F16, (4,))],
        [[math.tanh(x) for x in XS]],
        atol=1e-3,
    ),
    example(
        "elu_float32",
        O.ELU,
        [tensor(F32, XS), scalar(T.FLOAT32, 1.0)],
        [output(F32, (4,))],
        [[math.expm1(x) if x < 0 else x for x in XS]],
    ),
    example(
        "elu_float16_alpha",
        O.ELU,
        [tensor(F16, XS), scalar(T.FLOAT16, 0.5)],
        [output(F16, (4,))],
        [[0.5 * math.expm1(x) if x < 0 else x for x in XS]],
        atol=1e-3,
    ),
    example(
        "hard_swish_float32",
        O.HARD_SWISH,
        [tensor(F32, [-4.0, -1.5, 0.0, 1.0, 3.5])],
        [output(F32, (5,))],
        [[hard_swish(x) for x in (-4.0, -1.5, 0.0, 1.0, 3.5)]],
    ),
    example(
        "hard_swish_float16",
        O.HARD_SWISH,
        [tensor(F16, [-4.0, -1.5, 0.0, 1.0, 3.5])],
        [output(F16, (5,))],
        [[hard_swish(x) for x in (-4.0, -1.5, 0.0, 1.0, 3.5)]],
        atol=1e-3,
    ),
]

# Quantized: LOGISTIC and TANH on inputs of scale 1/16 (values up to +-8 around zp 128);
# their output parameters are fixed by NNAPI. HARD_SWISH with output scale 1/16, zp 40.
QX = [-8.0, -1.0, 0.0, 1.0, 2.0, 7.9375]
for _t, _tag in ((U8, "quant8"), (S8, "quant8_signed")):
    EXAMPLES += [
        example(
            f"logistic_{_tag}",
            O.LOGISTIC,
            [qtensor(_t, QX, 1 / 16, 128)],
            [qout(_t, (6,), 1 / 256, 0)],
            [q8([min(sigmoid(x), 255 / 256) for x in QX], 1 / 256, zp(_t, 0), _t)],
            atol=1,
        ),
        example(
            f"tanh_{_tag}",
            O.TANH,
            [qtensor(_t, QX, 1 / 16, 128)],
            [qout(_t, (6,), 1 / 128, 128)],
            [q8([math.tanh(x) for x in QX], 1 / 128, zp(_t, 128), _t)],
            atol=1,
        ),
        example(
            f"hard_swish_{_tag}",
            O.HARD_SWISH,
            [qtensor(_t, QX, 1 / 16, 128)],
            [qout(_t, (6,), 1 / 16, 40)],
            [q8([hard_swish(x) for x in QX], 1 / 16, zp(_t, 40), _t)],
            atol=1,
        ),
    ]
