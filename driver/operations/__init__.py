"""The operation registry: every operation family module, listed explicitly.

Each family module declares its operations (signatures, validation, shape inference and
kernel side by side) in a module-level ``DECLARATIONS`` tuple. This module gathers them
into :data:`REGISTRY`; everything else looks operations up here.
"""

from __future__ import annotations

from types import ModuleType

from driver.hal.types import OperationType
from driver.operations import (
    activations,
    comparisons,
    control_flow,
    conv,
    detection,
    elementwise,
    fully_connected,
    lookup,
    lstm,
    normalization,
    pooling,
    quantization,
    random_ops,
    reduction,
    resize,
    rnn,
    shape,
    unary,
)
from driver.operations.base import OperationDeclaration

FAMILIES: tuple[ModuleType, ...] = (
    elementwise,
    activations,
    unary,
    comparisons,
    quantization,
    shape,
    reduction,
    lookup,
    conv,
    fully_connected,
    pooling,
    normalization,
    resize,
    lstm,
    rnn,
    detection,
    random_ops,
    control_flow,
)


def _build_registry() -> dict[int, OperationDeclaration]:
    registry: dict[int, OperationDeclaration] = {}
    for family in FAMILIES:
        for decl in family.DECLARATIONS:
            if decl.type in registry:
                raise RuntimeError(f"{OperationType(decl.type).name} declared twice")
            registry[decl.type] = decl
    return registry


REGISTRY: dict[int, OperationDeclaration] = _build_registry()


def declaration(operation_type: int) -> OperationDeclaration | None:
    """The declaration of a standard operation, or None if none is registered."""
    return REGISTRY.get(operation_type)


def family_of(operation_type: int) -> str | None:
    for family in FAMILIES:
        if any(d.type == operation_type for d in family.DECLARATIONS):
            return family.__name__.rsplit(".", 1)[-1]
    return None
