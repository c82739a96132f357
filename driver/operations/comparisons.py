"""Comparisons and logic: EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL,
LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT, SELECT.

Comparisons broadcast and give TENSOR_BOOL8. Quantized inputs are compared on their real
values, computed as Android's ``Comparisons.cpp`` does: ``(q - zeroPoint) * scale`` in
float, so two tensors with different scales compare correctly (and float rounding of
those products decides near-ties exactly as on Android). That recipe is a few float32
vector passes, cheaper than gathering from a 256x256 table, so it runs directly.
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import OperationContext, OperationDeclaration, Shape, Signature
from driver.operations.base import T as _T
from driver.operations.elementwise import (
    QUANT8_ASYMM_TYPES,
    bitwise_select,
    broadcast_shape,
    quant_params,
    reject_zero_sized,
    requantize_tensor,
    same_shape,
)

V = HalVersion

_COMPARE = {
    OperationType.EQUAL: np.equal,
    OperationType.NOT_EQUAL: np.not_equal,
    OperationType.GREATER: np.greater,
    OperationType.GREATER_EQUAL: np.greater_equal,
    OperationType.LESS: np.less,
    OperationType.LESS_EQUAL: np.less_equal,
}


def _validate_none(ctx: OperationContext) -> None:
    """Nothing beyond what the signatures check."""


def _infer_broadcast(ctx: OperationContext) -> list[Shape]:
    # Comparisons.cpp and Logical.cpp are registered without allowZeroSizedInput.
    reject_zero_sized(ctx, 0, 1)
    return [broadcast_shape(ctx)]


def _real(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """``(q - zeroPoint) * scale``: the C++ int32 difference is an integer below 2**9 in
    magnitude, exact in float32, so the float32 subtraction gives it; then the float
    product, in place."""
    real = np.subtract(values, np.float32(zero_point), dtype=np.float32)
    real *= np.float32(scale)
    return real


def _execute_compare(ctx: OperationContext) -> list[np.ndarray]:
    a, b = ctx.value(0), ctx.value(1)
    fn = _COMPARE[OperationType(ctx.operation_type)]
    t = ctx.input_type(0)
    if t in QUANT8_ASYMM_TYPES:
        (s1, z1), (s2, z2) = quant_params(ctx, 0), quant_params(ctx, 1)
        return [fn(_real(a, s1, z1), _real(b, s2, z2))]
    return [fn(a, b)]


_COMPARE_TYPES = [
    (
        V.V1_2,
        (
            _T.TENSOR_BOOL8,
            _T.TENSOR_FLOAT16,
            _T.TENSOR_FLOAT32,
            _T.TENSOR_INT32,
            _T.TENSOR_QUANT8_ASYMM,
        ),
    ),
    (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED,)),
]


def _compare(op: OperationType, relation: str) -> OperationDeclaration:
    return OperationDeclaration(
        op,
        tuple(
            Signature((t, t), (_T.TENSOR_BOOL8,), v) for v, types in _COMPARE_TYPES for t in types
        ),
        infer_shapes=_infer_broadcast,
        execute=_execute_compare,
        validate=_validate_none,
        summary=f"Elementwise input0 {relation} input1 of broadcastable tensors, as TENSOR_BOOL8; "
        "quantized inputs compare real values.",
    )


EQUAL = _compare(OperationType.EQUAL, "==")
NOT_EQUAL = _compare(OperationType.NOT_EQUAL, "!=")
GREATER = _compare(OperationType.GREATER, ">")
GREATER_EQUAL = _compare(OperationType.GREATER_EQUAL, ">=")
LESS = _compare(OperationType.LESS, "<")
LESS_EQUAL = _compare(OperationType.LESS_EQUAL, "<=")


def _execute_logical(ctx: OperationContext) -> list[np.ndarray]:
    a, b = ctx.value(0), ctx.value(1)
    if ctx.operation_type == OperationType.LOGICAL_AND:
        return [np.logical_and(a, b)]
    return [np.logical_or(a, b)]


_B = _T.TENSOR_BOOL8

LOGICAL_AND = OperationDeclaration(
    OperationType.LOGICAL_AND,
    (Signature((_B, _B), (_B,), V.V1_2),),
    infer_shapes=_infer_broadcast,
    execute=_execute_logical,
    validate=_validate_none,
    summary="Elementwise logical AND of two broadcastable TENSOR_BOOL8 tensors.",
)
LOGICAL_OR = OperationDeclaration(
    OperationType.LOGICAL_OR,
    (Signature((_B, _B), (_B,), V.V1_2),),
    infer_shapes=_infer_broadcast,
    execute=_execute_logical,
    validate=_validate_none,
    summary="Elementwise logical OR of two broadcastable TENSOR_BOOL8 tensors.",
)


def _infer_not(ctx: OperationContext) -> list[Shape]:
    reject_zero_sized(ctx, 0)
    return [ctx.shape(0)]


LOGICAL_NOT = OperationDeclaration(
    OperationType.LOGICAL_NOT,
    (Signature((_B,), (_B,), V.V1_2),),
    infer_shapes=_infer_not,
    execute=lambda ctx: [np.logical_not(ctx.value(0))],
    validate=_validate_none,
    summary="Elementwise logical NOT of a TENSOR_BOOL8 tensor.",
)


# --- SELECT ------------------------------------------------------------------------------


def _validate_select(ctx: OperationContext) -> None:
    # Android 11's Select.cpp validate checks types and versions only; its prepare()
    # compares the shapes, at execution: deferrable.
    known = [i for i in range(3) if ctx.shapes[i] is not None]
    if len(known) > 1:
        same_shape(ctx, tuple(known), deferrable=True)


def _infer_select(ctx: OperationContext) -> list[Shape]:
    reject_zero_sized(ctx, 0, 1, 2)
    return [same_shape(ctx, (0, 1, 2))]


def _execute_select(ctx: OperationContext) -> list[np.ndarray]:
    cond, a, b = ctx.value(0), ctx.value(1), ctx.value(2)
    t = ctx.input_type(1)
    if t in QUANT8_ASYMM_TYPES:
        # Inputs and output may have different scales: both are requantized to the output's
        # (an input already in the output's scale and zero point is used as it is).
        out_params = quant_params(ctx, 0, output=True)
        ot = ctx.output_type(0)
        if quant_params(ctx, 1) != out_params:
            a = requantize_tensor(a, t, *quant_params(ctx, 1), *out_params, ot)
        if quant_params(ctx, 2) != out_params:
            b = requantize_tensor(b, t, *quant_params(ctx, 2), *out_params, ot)
    return [bitwise_select(cond, a, b)]


SELECT = OperationDeclaration(
    OperationType.SELECT,
    tuple(
        Signature((_B, t, t), (t,), v)
        for v, types in [
            (
                V.V1_2,
                (_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_ASYMM),
            ),
            (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED,)),
        ]
        for t in types
    ),
    infer_shapes=_infer_select,
    execute=_execute_select,
    validate=_validate_select,
    summary="Elementwise condition ? input1 : input2 over three same-shape tensors; "
    "quantized values are requantized to the output's scale and zero point.",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (
    EQUAL,
    NOT_EQUAL,
    GREATER,
    GREATER_EQUAL,
    LESS,
    LESS_EQUAL,
    LOGICAL_AND,
    LOGICAL_OR,
    LOGICAL_NOT,
    SELECT,
)
