"""Valid one-operation examples for the elementwise family (see examples.py).

One or more per operation and data type. Quantized rows use scales that make the exact
real result representable, so the expected values are plain arithmetic on the reals
(quantized with :func:`q8`), independent of the fixed-point kernels.
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, output, scalar, tensor

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


def q8(reals, scale: float, zero_point: int, type_code: int = U8) -> np.ndarray:
    """Quantize exactly representable reals (round half away, saturate)."""
    lo, hi = (0, 255) if type_code == U8 else (-128, 127)
    r = np.asarray(reals, dtype=np.float64) / scale
    q = np.sign(r) * np.floor(np.abs(r) + 0.5) + zero_point
    return np.clip(q, lo, hi).astype(np.uint8 if type_code == U8 else np.int8)


def zp(type_code: int, unsigned_zero_point: int) -> int:
    """The zero point of ``type_code`` that encodes what ``unsigned_zero_point`` does in
    TENSOR_QUANT8_ASYMM (signed = unsigned - 128)."""
    return unsigned_zero_point - (128 if type_code == S8 else 0)


def qtensor(type_code: int, reals, scale: float, unsigned_zero_point: int, dims=None):
    z = zp(type_code, unsigned_zero_point)
    return tensor(type_code, q8(reals, scale, z, type_code), dims, scale=scale, zero_point=z)


def qout(type_code: int, dims, scale: float, unsigned_zero_point: int):
    return output(type_code, dims, scale=scale, zero_point=zp(type_code, unsigned_zero_point))


def act(code: int = 0):
    return scalar(T.INT32, code)


A = [[1.0, -2.0], [3.5, 0.5]]
B = [0.5, 4.0]  # broadcast over rows

EXAMPLES = [
    example(
        "add_float32_broadcast",
        O.ADD,
        [tensor(F32, [[1, 2], [3, 4]]), tensor(F32, [10, 20]), act()],
        [output(F32, (2, 2))],
        expected=[[[11, 22], [13, 24]]],
    ),
    example(
        "add_float16_relu",
        O.ADD,
        [tensor(F16, A), tensor(F16, B), act(1)],
        [output(F16, (2, 2))],
        expected=[[[1.5, 2.0], [4.0, 4.5]]],
    ),
    example(
        "add_int32",
        O.ADD,
        [tensor(I32, [1, -7, 2**31 - 1]), tensor(I32, [2, 3, 1]), act()],
        [output(I32, (3,))],
        expected=[[3, -4, -(2**31)]],  # int32 wraps
    ),
    example(
        "sub_float32_broadcast",
        O.SUB,
        [tensor(F32, A), tensor(F32, B), act()],
        [output(F32, (2, 2))],
        expected=[[[0.5, -6.0], [3.0, -3.5]]],
    ),
    example(
        "sub_float16_relu6",
        O.SUB,
        [tensor(F16, [10.0, 1.0, -3.0]), tensor(F16, [1.0, 2.0, 3.0]), act(3)],
        [output(F16, (3,))],
        expected=[[6.0, 0.0, 0.0]],
    ),
    example(
        "sub_int32",
        O.SUB,
        [tensor(I32, [5, -5, -(2**31)]), tensor(I32, [7, -5, 1]), act()],
        [output(I32, (3,))],
        expected=[[-2, 0, 2**31 - 1]],
    ),
    example(
        "mul_float32_relu1",
        O.MUL,
        [tensor(F32, A), tensor(F32, B), act(2)],
        [output(F32, (2, 2))],
        expected=[[[0.5, -1.0], [1.0, 1.0]]],
    ),
    example(
        "mul_float16",
        O.MUL,
        [tensor(F16, [1.5, -2.0, 0.25]), tensor(F16, [2.0, 3.0, -4.0]), act()],
        [output(F16, (3,))],
        expected=[[3.0, -6.0, -1.0]],
    ),
    example(
        "mul_int32",
        O.MUL,
        [tensor(I32, [3, -4, 65536]), tensor(I32, [5, 6, 65536]), act()],
        [output(I32, (3,))],
        expected=[[15, -24, 0]],  # 2^32 wraps to 0
    ),
    example(
        "div_float32_broadcast",
        O.DIV,
        [tensor(F32, A), tensor(F32, B), act()],
        [output(F32, (2, 2))],
        expected=[[[2.0, -0.5], [7.0, 0.125]]],
    ),
    example(
        "div_float16",
        O.DIV,
        [tensor(F16, [3.0, -1.0]), tensor(F16, [2.0, 4.0]), act(1)],
        [output(F16, (2,))],
        expected=[[1.5, 0.0]],
    ),
    example(
        "div_int32_floor",
        O.DIV,
        [tensor(I32, [7, -7, 7, -7, 5]), tensor(I32, [2, 2, -2, -2, 0]), act()],
        [output(I32, (5,))],
        expected=[[3, -4, -4, 3, 0]],  # floor division; x / 0 gives 0
    ),
    example(
        "maximum_float32_broadcast",
        O.MAXIMUM,
        [tensor(F32, A), tensor(F32, B)],
        [output(F32, (2, 2))],
        expected=[[[1.0, 4.0], [3.5, 4.0]]],
    ),
    example(
        "maximum_float16",
        O.MAXIMUM,
        [tensor(F16, [1.0, -2.0]), tensor(F16, [0.5, -1.0])],
        [output(F16, (2,))],
        expected=[[1.0, -1.0]],
    ),
    example(
        "maximum_int32",
        O.MAXIMUM,
        [tensor(I32, [1, -2, 7]), tensor(I32, [0, -1, 9])],
        [output(I32, (3,))],
        expected=[[1, -1, 9]],
    ),
    example(
        "minimum_float32",
        O.MINIMUM,
        [tensor(F32, A), tensor(F32, B)],
        [output(F32, (2, 2))],
        expected=[[[0.5, -2.0], [0.5, 0.5]]],
    ),
    example(
        "minimum_float16",
        O.MINIMUM,
        [tensor(F16, [1.0, -2.0]), tensor(F16, [0.5, -1.0])],
        [output(F16, (2,))],
        expected=[[0.5, -2.0]],
    ),
    example(
        "minimum_int32",
        O.MINIMUM,
        [tensor(I32, [1, -2, 7]), tensor(I32, [0, -1, 9])],
        [output(I32, (3,))],
        expected=[[0, -2, 7]],
    ),
    example(
        "pow_float32",
        O.POW,
        [tensor(F32, [[2.0, 9.0], [4.0, 0.5]]), tensor(F32, [3.0, 0.5])],
        [output(F32, (2, 2))],
        expected=[[[8.0, 3.0], [64.0, 0.70710677]]],
    ),
    example(
        "pow_float16",
        O.POW,
        [tensor(F16, [2.0, 4.0]), tensor(F16, [2.0, -0.5])],
        [output(F16, (2,))],
        expected=[[4.0, 0.5]],
    ),
    example(
        "prelu_float32_channel_alpha",
        O.PRELU,
        [tensor(F32, [[[1.0, -2.0]], [[-4.0, 3.0]]]), tensor(F32, [0.5, 0.25])],
        [output(F32, (2, 1, 2))],
        expected=[[[[1.0, -0.5]], [[-2.0, 3.0]]]],
    ),
    example(
        "prelu_float16",
        O.PRELU,
        [tensor(F16, [-1.0, 2.0]), tensor(F16, [0.5])],
        [output(F16, (2,))],
        expected=[[-0.5, 2.0]],
    ),
]

# Quantized rows, unsigned and signed: inputs with scale 0.5, the output with scale 0.5
# (ADD/SUB/MAX/MIN) or 1.0 (MUL, whose output scale must exceed 0.5 * 0.5).
for _t, _tag in ((U8, "quant8"), (S8, "quant8_signed")):
    EXAMPLES += [
        example(
            f"add_{_tag}_broadcast_relu",
            O.ADD,
            [qtensor(_t, A, 0.5, 128), qtensor(_t, B, 0.5, 128), act(1)],
            [qout(_t, (2, 2), 0.5, 128)],
            expected=[q8([[1.5, 2.0], [4.0, 4.5]], 0.5, zp(_t, 128), _t)],
        ),
        example(
            f"sub_{_tag}",
            O.SUB,
            [qtensor(_t, A, 0.5, 128), qtensor(_t, B, 0.5, 128), act()],
            [qout(_t, (2, 2), 0.5, 128)],
            expected=[q8([[0.5, -6.0], [3.0, -3.5]], 0.5, zp(_t, 128), _t)],
        ),
        example(
            f"mul_{_tag}",
            O.MUL,
            [qtensor(_t, A, 0.5, 128), qtensor(_t, B, 0.5, 128), act()],
            [qout(_t, (2, 2), 1.0, 128)],
            expected=[q8([[0.5, -8.0], [1.75, 2.0]], 1.0, zp(_t, 128), _t)],  # 0.5 rounds to 1
        ),
        example(
            f"maximum_{_tag}_requantized",
            O.MAXIMUM,
            [qtensor(_t, A, 0.5, 128), qtensor(_t, B, 0.25, 100)],
            [qout(_t, (2, 2), 0.5, 120)],
            expected=[q8([[1.0, 4.0], [3.5, 4.0]], 0.5, zp(_t, 120), _t)],
        ),
        example(
            f"minimum_{_tag}_requantized",
            O.MINIMUM,
            [qtensor(_t, A, 0.5, 128), qtensor(_t, B, 0.25, 100)],
            [qout(_t, (2, 2), 0.5, 120)],
            expected=[q8([[0.5, -2.0], [0.5, 0.5]], 0.5, zp(_t, 120), _t)],
        ),
        example(
            f"prelu_{_tag}",
            O.PRELU,
            [
                qtensor(_t, [[-4.0, 2.0], [-1.0, 0.0]], 0.5, 128),
                qtensor(_t, [0.5, 0.25], 0.25, 128),
            ],
            [qout(_t, (2, 2), 0.25, 128)],
            expected=[q8([[-2.0, 2.0], [-0.5, 0.0]], 0.25, zp(_t, 128), _t)],
        ),
    ]
