"""Elementwise unary math: ABS, EXP, LOG, SIN, SQRT, RSQRT, NEG, FLOOR.

Android 11 (``Elementwise.cpp``, ``Neg.cpp``) offers these on float tensors only, plus
TENSOR_INT32 for ABS (HAL 1.3) and NEG (HAL 1.2); none has a quantized variant in HAL 1.3.
Float16 kernels evaluate the float32 function (``std::exp(float)``, ...) and round back.
The float32 functions are numpy's SIMD loops, a few ulp from libm's correctly rounded
``expf``/``logf``/``sinf`` at worst: every comparison criterion absorbs that, while
evaluating in float64 to match libm bit for bit costs 10-20x (SIN 87x np.add).
FLOOR is the HAL 1.0 operation (rank <= 4); the others need HAL 1.2.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import OperationContext, OperationDeclaration, Shape, Signature
from driver.operations.base import T as _T
from driver.operations.elementwise import float_kernel, float_result, reject_zero_sized

V = HalVersion


def _validate_floor(ctx: OperationContext) -> None:
    ctx.check_rank(0, max_rank=4)


def _validate_none(ctx: OperationContext) -> None:
    """Nothing beyond what the signatures check."""


def _infer(ctx: OperationContext) -> list[Shape]:
    # Elementwise.cpp and Neg.cpp are registered without allowZeroSizedInput.
    reject_zero_sized(ctx, 0)
    return [ctx.shape(0)]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.float32(1) / np.sqrt(x)


def _float_math(fn: Callable[[np.ndarray], np.ndarray]):
    def execute(ctx: OperationContext) -> list[np.ndarray]:
        with np.errstate(all="ignore"):  # log(0), sqrt(-1), ... give inf/NaN as in C++
            return [float_result(fn(float_kernel(ctx.value(0))), ctx)]

    return execute


def _exact(fn: Callable[[np.ndarray], np.ndarray]):
    """Functions exact in any float type (and int32 wraps: abs/neg of INT32_MIN)."""

    def execute(ctx: OperationContext) -> list[np.ndarray]:
        x = ctx.value(0)
        with np.errstate(all="ignore"):
            return [fn(x).astype(x.dtype, copy=False)]

    return execute


def _sigs(types_by_version) -> tuple[Signature, ...]:
    return tuple(Signature((t,), (t,), v) for v, types in types_by_version for t in types)


_FLOATS_1_2 = [(V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32))]


def _declare(op, sigs, execute, summary, validate=_validate_none) -> OperationDeclaration:
    return OperationDeclaration(
        op, sigs, infer_shapes=_infer, execute=execute, validate=validate, summary=summary
    )


ABS = _declare(
    OperationType.ABS,
    _sigs([*_FLOATS_1_2, (V.V1_3, (_T.TENSOR_INT32,))]),
    _exact(np.abs),
    "Absolute value elementwise (int32 since HAL 1.3; abs(INT32_MIN) wraps).",
)
EXP = _declare(
    OperationType.EXP, _sigs(_FLOATS_1_2), _float_math(np.exp), "Natural exponential elementwise."
)
LOG = _declare(
    OperationType.LOG,
    _sigs(_FLOATS_1_2),
    _float_math(np.log),
    "Natural logarithm elementwise (-inf at 0, NaN below).",
)
SIN = _declare(OperationType.SIN, _sigs(_FLOATS_1_2), _float_math(np.sin), "Sine elementwise.")
SQRT = _declare(
    OperationType.SQRT, _sigs(_FLOATS_1_2), _float_math(np.sqrt), "Square root elementwise."
)
RSQRT = _declare(
    OperationType.RSQRT,
    _sigs(_FLOATS_1_2),
    _float_math(_rsqrt),
    "Reciprocal square root 1 / sqrt(x) elementwise.",
)
NEG = _declare(
    OperationType.NEG,
    _sigs([(V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_INT32))]),
    _exact(np.negative),
    "Negation elementwise (-INT32_MIN wraps).",
)
FLOOR = _declare(
    OperationType.FLOOR,
    _sigs([(V.V1_0, (_T.TENSOR_FLOAT32,)), (V.V1_2, (_T.TENSOR_FLOAT16,))]),
    _exact(np.floor),
    "Largest integer not greater than x, elementwise (rank <= 4).",
    validate=_validate_floor,
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (ABS, EXP, LOG, SIN, SQRT, RSQRT, NEG, FLOOR)
