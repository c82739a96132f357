"""Vendor extensions: declared like operations, resolved through a model's prefix map.

An extension (NN HAL 1.2+) is a named set of operand types and operations. In a model,
an extension type or operation is the 32-bit code ``(prefix << 16) | type_within``
(:func:`driver.hal.types.make_extension_type`), where the model's
``extension_name_to_prefix`` maps the prefix to the extension's name one-to-one. The
same extension may have a different prefix in every model, so nothing here is keyed by
the 32-bit code: the registry is keyed by ``(extension name, type within the
extension)`` and a model's codes are resolved through its own map
(:class:`ModelTypes`).

Each extension module (``fibonacci.py`` is the worked example) exports ``EXTENSION``, an
:class:`ExtensionDeclaration`: its operand types (tensor or scalar, bytes per element,
storage dtype, the exact size of the extra operand data it requires) and its operations,
declared with the same :class:`~driver.operations.base.OperationDeclaration` as the
standard ones (signatures, validate, infer_shapes, execute). Because an operation's
signatures name extension operand types, whose codes depend on the model's prefix, an
extension operation is declared by a function of the prefix; :func:`operation_declaration`
builds and caches the declaration for each ``(name, prefix, type)``.

Who checks what (as in Android):

- :func:`driver.validation.validate_model` checks the HAL rules every driver checks: an
  extension type needs HAL 1.2 and a prefix the model maps; its scale and zero point are
  0; its extra params are none or a blob. It does not know what an extension means.
- A device that supports an extension validates that extension's operands and
  operations (:func:`validate_extension_use`): the type exists in the extension, scalars
  have rank 0, the extra operand data has the declared size and values, a constant has
  the right length, and each operation matches a signature and passes its validate hook
  and static shape inference. A violation is INVALID_ARGUMENT from
  ``getSupportedOperations`` and ``prepareModel``, like Android's example Fibonacci
  driver. Extensions the device does not support are left alone: their operations are
  reported unsupported.
- The executor resolves extension operations and operand dtypes through
  :class:`ModelTypes` (restricted to the device's extensions), so an extension operation
  runs exactly like a standard one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from driver.hal.types import (
    ErrorStatus,
    Extension,
    ExtensionOperandTypeInformation,
    HalError,
    HalVersion,
    Model,
    Operand,
    OperandLifeTime,
    Subgraph,
    extension_prefix,
    extension_type_within,
    is_extension_type,
    is_scalar_type,
    make_extension_type,
    non_extension_size_of_data,
    operand_type_name,
    operation_type_name,
)
from driver.operations import declaration
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Unknown,
    array_from_bytes,
    array_to_bytes,
    storage_dtype,
)

L = OperandLifeTime


class ExtensionCode(int):
    """An extension operation code that knows its name (``decl.type.name`` in messages,
    like an :class:`~driver.hal.types.OperationType` member)."""

    name: str

    def __new__(cls, value: int, name: str) -> ExtensionCode:
        code = super().__new__(cls, value)
        code.name = name
        return code

    def __repr__(self) -> str:
        return f"<{self.name}: {int(self):#x}>"


@dataclass(frozen=True)
class ExtensionOperandType:
    """One operand type of an extension.

    ``byte_size`` is bytes per element (HAL ``ExtensionOperandTypeInformation.byteSize``;
    a scalar's whole size). ``extra_params_size`` is the exact size of the extension
    blob (``Operand.extraParams``) an operand of this type must carry, or None if it must
    carry none. ``check_extra_params(blob)`` returns a description of what is wrong with
    the blob's values, or None."""

    type: int
    name: str
    is_tensor: bool
    byte_size: int
    dtype: np.dtype
    extra_params_size: int | None = None
    check_extra_params: Callable[[bytes], str | None] | None = None
    summary: str = ""


@dataclass(frozen=True)
class ExtensionOperation:
    """One operation of an extension: ``declare(prefix)`` returns its
    :class:`OperationDeclaration` for a model mapping the extension to ``prefix`` (the
    declaration's ``type`` must be ``make_extension_type(prefix, type)``)."""

    type: int
    name: str
    declare: Callable[[int], OperationDeclaration]
    summary: str = ""


@dataclass(frozen=True)
class ExtensionDeclaration:
    name: str
    operand_types: tuple[ExtensionOperandType, ...]
    operations: tuple[ExtensionOperation, ...]
    min_version: HalVersion = HalVersion.V1_2
    summary: str = ""

    def operand_type(self, type_within: int) -> ExtensionOperandType | None:
        for t in self.operand_types:
            if t.type == type_within:
                return t
        return None

    def operation(self, type_within: int) -> ExtensionOperation | None:
        for op in self.operations:
            if op.type == type_within:
                return op
        return None

    def hal(self) -> Extension:
        """What ``IDevice::getSupportedExtensions`` reports for this extension."""
        return Extension(
            self.name,
            tuple(
                ExtensionOperandTypeInformation(t.type, t.is_tensor, t.byte_size)
                for t in self.operand_types
            ),
        )


# ---------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------


def _modules() -> tuple[ModuleType, ...]:
    from driver.extensions import fibonacci

    return (fibonacci,)


def _build_registry() -> dict[str, ExtensionDeclaration]:
    registry: dict[str, ExtensionDeclaration] = {}
    for module in _modules():
        ext: ExtensionDeclaration = module.EXTENSION
        if ext.name in registry:
            raise RuntimeError(f"extension {ext.name!r} declared twice")
        registry[ext.name] = ext
    return registry


EXTENSIONS: dict[str, ExtensionDeclaration] = _build_registry()
"""Every registered extension, by name."""


def extension(name: str) -> ExtensionDeclaration | None:
    return EXTENSIONS.get(name)


@functools.cache
def operation_declaration(name: str, prefix: int, type_within: int) -> OperationDeclaration | None:
    """The declaration of operation ``type_within`` of extension ``name`` in a model
    that maps the extension to ``prefix`` (built once per triple and kept, so its
    identity is stable for signature caches)."""
    ext = EXTENSIONS.get(name)
    op = ext.operation(type_within) if ext is not None else None
    if op is None:
        return None
    decl = op.declare(prefix)
    code = make_extension_type(prefix, type_within)
    if decl.type != code:
        raise RuntimeError(f"{name}:{op.name} declared type {decl.type:#x}, expected {code:#x}")
    if not isinstance(decl.type, ExtensionCode):
        from dataclasses import replace

        decl = replace(decl, type=ExtensionCode(code, f"{name}:{op.name}"))
    return decl


def extension_device(name: str = "reference-ext", **config: object):
    """The reference device supporting every registered extension (the ``--driver``
    name ``reference-ext``); ``config`` sets other :class:`~driver.device.DeviceConfig`
    fields."""
    from driver.device import DeviceConfig, ReferenceDevice

    extensions = tuple(e.hal() for e in EXTENSIONS.values())
    return ReferenceDevice(DeviceConfig(name=name, extensions=extensions, **config))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Resolving a model's codes
# ---------------------------------------------------------------------------------------


class ModelTypes:
    """A model's operand and operation type codes, extension ones resolved through its
    ``extension_name_to_prefix`` (only extensions in ``allowed``; None allows every
    registered one). What the executor and the device use instead of the
    standard-only helpers (``declaration``, ``storage_dtype``, ``is_scalar_type``).

    For a model without extensions the methods are the standard functions themselves,
    so resolving costs nothing there."""

    def __init__(self, model: Model | None = None, allowed: Iterable[str] | None = None):
        self.by_prefix: dict[int, ExtensionDeclaration] = {}
        allow = None if allowed is None else frozenset(allowed)
        for entry in model.extension_name_to_prefix if model is not None else ():
            ext = EXTENSIONS.get(getattr(entry, "name", None))  # type: ignore[arg-type]
            if ext is not None and (allow is None or ext.name in allow):
                self.by_prefix[entry.prefix] = ext
        if not self.by_prefix:
            self.operation = declaration  # type: ignore[method-assign]
            self.dtype = storage_dtype  # type: ignore[method-assign]
            self.is_scalar = is_scalar_type  # type: ignore[method-assign]
            self.decode = array_from_bytes  # type: ignore[method-assign]
            self.encode = array_to_bytes  # type: ignore[method-assign]

    # --- lookups --------------------------------------------------------------------
    def extension_of(self, code: int) -> ExtensionDeclaration | None:
        return self.by_prefix.get(extension_prefix(code)) if is_extension_type(code) else None

    def operand_type(self, code: int) -> ExtensionOperandType | None:
        """The extension operand type ``code`` names, or None (standard or unknown)."""
        ext = self.extension_of(code)
        return ext.operand_type(extension_type_within(code)) if ext is not None else None

    def operation(self, code: int) -> OperationDeclaration | None:
        """The declaration of operation ``code`` (standard or extension), or None."""
        if not is_extension_type(code):
            return declaration(code)
        ext = self.by_prefix.get(extension_prefix(code))
        if ext is None:
            return None
        return operation_declaration(ext.name, extension_prefix(code), extension_type_within(code))

    def dtype(self, code: int) -> np.dtype:
        """Storage dtype of values of type ``code``; GENERAL_FAILURE if it has none."""
        t = self.operand_type(code)
        if t is not None:
            return t.dtype
        return storage_dtype(code)

    def is_scalar(self, code: int) -> bool:
        t = self.operand_type(code)
        if t is not None:
            return not t.is_tensor
        return is_scalar_type(code)

    # --- sizes and values -----------------------------------------------------------
    def size_of(self, code: int, dims: Sequence[int]) -> int:
        """Bytes of an operand of type ``code`` and ``dims`` (0 when a tensor's dims are
        not fully specified); GENERAL_FAILURE for a type without a known size."""
        t = self.operand_type(code)
        if t is None:
            if is_extension_type(code):
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE, f"no size known for {operand_type_name(code)}"
                )
            return non_extension_size_of_data(code, tuple(dims))
        if not t.is_tensor:
            return t.byte_size
        if not dims or 0 in dims:
            return 0
        return t.byte_size * math.prod(dims)

    def decode(self, code: int, dims: tuple[int, ...], data: bytes | memoryview) -> np.ndarray:
        """An operand's bytes as an array (as :func:`array_from_bytes`)."""
        t = self.operand_type(code)
        if t is None:
            return array_from_bytes(code, dims, data)
        return np.frombuffer(data, dtype=t.dtype).copy().reshape(dims)

    def encode(self, arr: np.ndarray, code: int) -> bytes:
        t = self.operand_type(code)
        if t is None:
            return array_to_bytes(arr, code)
        return np.ascontiguousarray(arr, dtype=t.dtype).tobytes()

    # --- names ----------------------------------------------------------------------
    def operand_type_name(self, code: int) -> str:
        ext = self.extension_of(code)
        t = ext.operand_type(extension_type_within(code)) if ext is not None else None
        if ext is not None and t is not None:
            return f"{ext.name}:{t.name}"
        return operand_type_name(code)

    def operation_type_name(self, code: int) -> str:
        ext = self.extension_of(code)
        op = ext.operation(extension_type_within(code)) if ext is not None else None
        if ext is not None and op is not None:
            return f"{ext.name}:{op.name}"
        return operation_type_name(code)


STANDARD_TYPES = ModelTypes()
"""The resolver for models without extensions."""


def types_for(model: Model, allowed: Iterable[str] | None = None) -> ModelTypes:
    """The resolver for ``model``: :data:`STANDARD_TYPES` unless it maps extensions."""
    if not model.extension_name_to_prefix:
        return STANDARD_TYPES
    return ModelTypes(model, allowed)


# ---------------------------------------------------------------------------------------
# Validation of extension use (by a device that supports the extension)
# ---------------------------------------------------------------------------------------


def _invalid(message: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, message)


def validate_extension_use(
    model: Model, supported: Iterable[str], version: HalVersion = HalVersion.V1_3
) -> None:
    """INVALID_ARGUMENT unless every operand and operation of the ``supported``
    extensions is valid by that extension's declaration, as a HAL ``version`` device
    sees it. Assumes :func:`driver.validation.validate_model` passed (indexes in range,
    prefixes mapped one-to-one, locations within their pools)."""
    types = ModelTypes(model, supported)
    if not types.by_prefix:
        return
    _validate_subgraph(model, model.main, "main subgraph", types, version)
    for k, sg in enumerate(model.referenced):
        _validate_subgraph(model, sg, f"subgraph {k}", types, version)


def _constant_bytes(model: Model, operand: Operand) -> bytes | None:
    from driver.memory import pool_buffer

    loc = operand.location
    if operand.lifetime == L.CONSTANT_COPY:
        return model.operand_values[loc.offset : loc.offset + loc.length]
    if operand.lifetime == L.CONSTANT_REFERENCE:
        try:
            return bytes(
                pool_buffer(model.pools[loc.pool_index])[loc.offset : loc.offset + loc.length]
            )
        except HalError:
            return None
    return None


def _check_operand(types: ModelTypes, operand: Operand, where: str) -> None:
    ext = types.extension_of(operand.type)
    if ext is None:
        return
    within = extension_type_within(operand.type)
    t = ext.operand_type(within)
    if t is None:
        raise _invalid(f"{where}: extension {ext.name} has no operand type {within}")
    what = f"{where} ({ext.name}:{t.name})"
    dims = operand.dimensions
    if not t.is_tensor and dims:
        raise _invalid(f"{what}: a scalar type must have rank 0, got dimensions {list(dims)}")
    extra = operand.extra_params
    if t.extra_params_size is None:
        if extra is not None:
            raise _invalid(f"{what}: takes no extra operand data, got {len(extra)} bytes")
    else:
        if not isinstance(extra, bytes):
            raise _invalid(
                f"{what}: needs {t.extra_params_size} bytes of extra operand data, got none"
            )
        if len(extra) != t.extra_params_size:
            raise _invalid(
                f"{what}: extra operand data must be {t.extra_params_size} bytes, got {len(extra)}"
            )
        if t.check_extra_params is not None:
            problem = t.check_extra_params(extra)
            if problem:
                raise _invalid(f"{what}: extra operand data: {problem}")
    if operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
        if t.is_tensor and (not dims or 0 in dims):
            raise _invalid(
                f"{what}: a constant tensor needs fully specified dims, got {list(dims)}"
            )
        need = t.byte_size * (math.prod(dims) if t.is_tensor else 1)
        if operand.location.length != need:
            raise _invalid(f"{what}: constant needs length {need}, got {operand.location.length}")


def _validate_subgraph(
    model: Model, sg: Subgraph, name: str, types: ModelTypes, version: HalVersion
) -> None:
    from driver.validation import match_signature, read_constant

    operands = sg.operands
    for idx, operand in enumerate(operands):
        _check_operand(types, operand, f"{name}, operand {idx}")

    def static_shape(o: Operand) -> tuple[int, ...] | None:
        if types.is_scalar(o.type):
            return ()
        return o.dimensions if o.dimensions and 0 not in o.dimensions else None

    def constant(o: Operand) -> np.ndarray | None:
        if types.operand_type(o.type) is None:
            try:
                return read_constant(model, o)
            except HalError:
                return None
        data = _constant_bytes(model, o)
        if data is None:
            return None
        return types.decode(
            o.type, o.dimensions if types.operand_type(o.type).is_tensor else (), data
        )

    for step, op in enumerate(sg.operations):
        ext = types.extension_of(op.type)
        if ext is None:
            continue
        within = extension_type_within(op.type)
        where = f"{name}, operation {step} ({types.operation_type_name(op.type)})"
        decl = types.operation(op.type)
        if decl is None:
            raise _invalid(f"{where}: extension {ext.name} has no operation {within}")
        in_ops = [operands[i] for i in op.inputs]
        out_ops = [operands[i] for i in op.outputs]
        required = match_signature(decl, in_ops, out_ops, where)
        ctx = OperationContext(
            op.type,
            in_ops,
            out_ops,
            [None if o.lifetime == L.NO_VALUE else static_shape(o) for o in in_ops],
            [constant(o) for o in in_ops],
            version=version,
            relaxed=model.relax_computation_float32_to_float16,
            location=where,
            model=model,
        )
        try:
            decl.run_validate(ctx)  # rejects a use newer than ``version`` itself
            if required > version:
                raise _invalid(
                    f"{where}: this use needs HAL {required.label}; validating as HAL "
                    f"{version.label}"
                )
            inferred = list(decl.infer_shapes(ctx))
        except Unknown:
            continue
        except HalError as e:
            raise _invalid(
                e.message if e.message.startswith(where) else f"{where}: {e.message}"
            ) from None
        except Exception as e:  # a hook bug: a status, not an escaping exception
            raise HalError(
                ErrorStatus.GENERAL_FAILURE,
                f"{where}: internal error in a hook: {type(e).__name__}: {e}",
            ) from e
        for k, (s, o) in enumerate(zip(inferred, out_ops)):
            declared = o.dimensions
            if (
                s is not None
                and declared
                and (len(declared) != len(s) or any(d and d != a for d, a in zip(declared, s)))
            ):
                raise _invalid(
                    f"{where}: output {k} is declared {list(declared)} but the inputs give {list(s)}"
                )


__all__ = [
    "EXTENSIONS",
    "STANDARD_TYPES",
    "ExtensionCode",
    "ExtensionDeclaration",
    "ExtensionOperandType",
    "ExtensionOperation",
    "ModelTypes",
    "extension",
    "extension_device",
    "operation_declaration",
    "types_for",
    "validate_extension_use",
]
