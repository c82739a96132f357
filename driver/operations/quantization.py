"""Operation family module (declarations, shape inference and kernels together)."""

from __future__ import annotations

from driver.operations.base import OperationDeclaration

DECLARATIONS: tuple[OperationDeclaration, ...] = ()
