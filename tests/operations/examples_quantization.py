"""Valid one-operation examples for CAST, QUANTIZE and DEQUANTIZE (see examples.py).

CAST has one example per allowed (input, output) type pair; QUANTIZE and DEQUANTIZE one
per type pair, with values whose conversion is exact (or a tie, rounded away from zero).
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.hal.types import SymmPerChannelQuantParams
from driver.testing import example, output, tensor

F32, F16, I32, U8, S8 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)

# CAST: the same values in every numeric type; float -> integer truncates toward zero
# and saturates into uint8's range (quantization parameters are ignored).
_CAST_IN = {
    F32: [0.0, 1.75, 200.5, 300.0, -2.5],
    F16: [0.0, 1.75, 200.5, 300.0, -2.5],
    I32: [0, 1, 200, 300, -2],
    U8: [0, 1, 200, 255, 7],
}
_CAST_OUT = {  # (input type, output type) -> expected
    (F32, F32): [0.0, 1.75, 200.5, 300.0, -2.5],
    (F32, F16): [0.0, 1.75, 200.5, 300.0, -2.5],
    (F32, I32): [0, 1, 200, 300, -2],
    (F32, U8): [0, 1, 200, 255, 0],
    (F16, F32): [0.0, 1.75, 200.5, 300.0, -2.5],
    (F16, F16): [0.0, 1.75, 200.5, 300.0, -2.5],
    (F16, I32): [0, 1, 200, 300, -2],
    (F16, U8): [0, 1, 200, 255, 0],
    (I32, F32): [0, 1, 200, 300, -2],
    (I32, F16): [0, 1, 200, 300, -2],
    (I32, I32): [0, 1, 200, 300, -2],
    (I32, U8): [0, 1, 200, 255, 0],
    (U8, F32): [0, 1, 200, 255, 7],
    (U8, F16): [0, 1, 200, 255, 7],
    (U8, I32): [0, 1, 200, 255, 7],
    (U8, U8): [0, 1, 200, 255, 7],
}


def _q(type_code: int) -> dict:
    return {"scale": 0.5, "zero_point": 3} if type_code in (U8, S8) else {}


EXAMPLES = [
    example(
        f"cast_{T(i).name[7:].lower()}_to_{T(o).name[7:].lower()}",
        O.CAST,
        [tensor(i, _CAST_IN[i], **_q(i))],
        [output(o, (5,), **_q(o))],
        [want],
    )
    for (i, o), want in _CAST_OUT.items()
]

# HAL 1.3 identity casts: the values (and bytes) are copied unchanged.
_IDENTITY = [
    (T.TENSOR_BOOL8, [True, False, True], {}),
    (T.TENSOR_QUANT16_ASYMM, [0, 40000, 65535], {"scale": 0.25, "zero_point": 7}),
    (T.TENSOR_QUANT16_SYMM, [-32768, 5, 32767], {"scale": 0.25}),
    (S8, [-128, 0, 127], {"scale": 0.25, "zero_point": -3}),
    (T.TENSOR_QUANT8_SYMM, [-127, 0, 127], {"scale": 0.25}),
]
for _t, _vals, _kw in _IDENTITY:
    EXAMPLES.append(
        example(
            f"cast_identity_{T(_t).name[7:].lower()}",
            O.CAST,
            [tensor(_t, _vals, **_kw)],
            [output(_t, (3,), **_kw)],
            [_vals],
        )
    )

# QUANTIZE: reals -> zp + round(x / scale), ties away from zero, saturated.
_REALS = [-1.25, 0.0, 0.375, 2.0, 100.0, -100.0]
for _i in (F32, F16):
    for _o, _zp, _want in (
        (U8, 10, [5, 10, 12, 18, 255, 0]),  # 0.375 / 0.25 = 1.5 -> 2
        (S8, -118, [-123, -118, -116, -110, 127, -128]),
    ):
        EXAMPLES.append(
            example(
                f"quantize_{T(_i).name[7:].lower()}_to_{T(_o).name[7:].lower()}",
                O.QUANTIZE,
                [tensor(_i, _REALS)],
                [output(_o, (6,), scale=0.25, zero_point=_zp)],
                [_want],
            )
        )

# DEQUANTIZE: scale * (q - zp) for every quantized input type and both float outputs.
_DEQ = [
    ("quant8", U8, [0, 128, 255], {"scale": 0.5, "zero_point": 128}, [-64.0, 0.0, 63.5]),
    ("quant8_signed", S8, [-128, 0, 127], {"scale": 0.5, "zero_point": 0}, [-64.0, 0.0, 63.5]),
    ("quant8_symm", T.TENSOR_QUANT8_SYMM, [-128, 3, 127], {"scale": 0.5}, [-64.0, 1.5, 63.5]),
]
for _o, _otag in ((F32, "float32"), (F16, "float16")):
    for _tag, _t, _vals, _kw, _want in _DEQ:
        EXAMPLES.append(
            example(
                f"dequantize_{_tag}_to_{_otag}",
                O.DEQUANTIZE,
                [tensor(_t, _vals, **_kw)],
                [output(_o, (3,))],
                [_want],
            )
        )
    # Per channel along dim 1: column scales 0.5 and 2.
    EXAMPLES.append(
        example(
            f"dequantize_per_channel_to_{_otag}",
            O.DEQUANTIZE,
            [
                tensor(
                    T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                    [[2, -3], [-4, 5]],
                    channel_quant=SymmPerChannelQuantParams(1, (0.5, 2.0)),
                )
            ],
            [output(_o, (2, 2))],
            [[[1.0, -6.0], [-2.0, 10.0]]],
        )
    )

assert all(isinstance(e.expected[0], np.ndarray) for e in EXAMPLES)
