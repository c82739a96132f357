"""HAL-version utilities: which HAL version can carry an object, and conversion.

Android's ``Utils.h`` has ``compliantWithV1_*`` and ``convertToV1_*`` for every HAL
structure; here one Python type stands for each structure at its 1.3 shape, so:

:func:`min_version`
    The oldest HAL version that can express the object without losing information.
:func:`compliant_with`
    ``min_version(obj) <= version``.
:func:`convert_to`
    The object as ``version`` carries it, in the same (1.3-shaped) Python type: what an
    older version lacks is dropped or re-derived, as Android's ``convertToV1_3(
    convertToV1_x(obj))`` round trip would give. A conversion that would lose information
    raises ``HalError(INVALID_ARGUMENT)`` naming the first loss. With ``lenient=True`` it
    instead emits a :class:`HalConversionWarning` (``warnings.warn``) and returns the best
    the version can carry: the choice is the caller's, and strict is the default because
    a silent loss is how a differential test ends up comparing different models.
:func:`noncompliant_operations`
    The main-subgraph operations an older version cannot express (for partitioning a
    model across devices of different feature levels).

What counts as a feature of which version:

Model
    Everything :func:`driver.validation.validate_model` checks per version: operand types,
    each operation's type combination and semantics (its declaration's signatures and
    ``validate`` hook), unknown-rank tensors (1.2), SUBGRAPH lifetime and control flow
    (1.3), the relaxed-float32 flag (1.1), extension types, operations and the extension
    map (1.2), ``hardware_buffer*`` pools (1.2). Android treats dropping the relaxed flag
    as lossless (a strict driver satisfies a relaxed model); here the flag itself is the
    information, so a relaxed model is not 1.0-compliant, and ``convert_to(...,
    lenient=True)`` drops it with a warning. A model must be valid (at HAL 1.3) to be
    asked about: an invalid one raises the validation error.
Request
    Buffer-token pools (1.3), ``hardware_buffer*`` pools (1.2) and, when the model is
    given, outputs with unspecified dimensions (1.2: 1.0/1.1 drivers need every output
    fully specified).
Capabilities
    Android's rules (``compliantWithV1_0/1_1`` of ``V1_3::Capabilities``): 1.0 carries one
    float32 performance (for FLOAT32, TENSOR_FLOAT32 and the relaxed figures) and one
    quantized performance (for TENSOR_QUANT8_ASYMM and the types P's drivers reported
    with it: INT32, UINT32, TENSOR_INT32, OEM, TENSOR_OEM_BYTE); 1.1 adds one relaxed
    figure; 1.2 carries everything but the 1.3 additions. Figures for types or
    operations a version does not have (TENSOR_FLOAT16 in 1.0, IF/WHILE in 1.2) are not
    a loss, since that version's drivers cannot run them anyway; a version that does not
    carry a figure reports "no performance information" (FLT_MAX) for it.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TypeVar

from driver.hal.types import (
    BufferToken,
    Capabilities,
    ErrorStatus,
    HalError,
    HalVersion,
    Memory,
    Model,
    OperandPerformance,
    OperandType,
    PerformanceInfo,
    Request,
)
from driver.validation import operation_versions, validate_model, validate_request

V = HalVersion
T = OperandType

FLT_MAX = 3.4028234663852886e38
NO_PERFORMANCE = PerformanceInfo(FLT_MAX, FLT_MAX)
"""``kNoPerformanceInfo``: what a version that does not carry a figure reports."""

QUANT8_PERFORMANCE_TYPES: tuple[OperandType, ...] = (
    T.INT32,
    T.UINT32,
    T.TENSOR_INT32,
    T.OEM,
    T.TENSOR_OEM_BYTE,
)
"""Types whose performance HAL 1.0/1.1 report as ``quantized8Performance``
(``kQuantized8PerformanceConsistentWithP``)."""

_VERSION_TYPES: dict[HalVersion, frozenset[int]] = {
    V.V1_0: frozenset({*range(0, 6), T.OEM, T.TENSOR_OEM_BYTE}),
    V.V1_1: frozenset({*range(0, 6), T.OEM, T.TENSOR_OEM_BYTE}),
    V.V1_2: frozenset({*range(0, 14), T.OEM, T.TENSOR_OEM_BYTE}),
    V.V1_3: frozenset({*range(0, 16), T.OEM, T.TENSOR_OEM_BYTE}),
}


class HalConversionWarning(UserWarning):
    """A lenient :func:`convert_to` dropped information the target version cannot carry."""


HalObject = TypeVar("HalObject", Model, Request, Capabilities)


def _loss(message: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, message)


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def min_version(obj: Model | Request | Capabilities, *, model: Model | None = None) -> HalVersion:
    """The oldest HAL version that carries ``obj`` without loss. For a :class:`Request`,
    pass the ``model`` it is for to take its outputs' dimensions into account (and to
    validate it); without one only its pools are considered."""
    if isinstance(obj, Model):
        return validate_model(obj, V.V1_3)
    if isinstance(obj, Request):
        if model is not None:
            return validate_request(model, obj, V.V1_3)
        return max((_pool_version(p) for p in obj.pools), default=V.V1_0)
    if isinstance(obj, Capabilities):
        for v in (V.V1_0, V.V1_1):
            if _capabilities_compliant(obj, v):
                return v
        return V.V1_2
    raise TypeError(f"no HAL version rules for {type(obj).__name__}")


def compliant_with(
    obj: Model | Request | Capabilities, version: HalVersion, *, model: Model | None = None
) -> bool:
    """Whether HAL ``version`` can carry ``obj`` without loss (``compliantWithV1_*``)."""
    return min_version(obj, model=model) <= version


def convert_to(
    obj: HalObject, version: HalVersion, *, lenient: bool = False, model: Model | None = None
) -> HalObject:
    """``obj`` as HAL ``version`` carries it (see the module docs). Raises
    ``HalError(INVALID_ARGUMENT)`` if that loses information, unless ``lenient``, which
    warns (:class:`HalConversionWarning`) and returns the lossy conversion; that result
    may still not be valid at ``version`` (an operation the version lacks cannot be
    dropped without changing what the model computes)."""
    version = HalVersion(version)
    if isinstance(obj, Model):
        return _convert_model(obj, version, lenient)
    if isinstance(obj, Request):
        return _convert_request(obj, version, lenient, model)
    if isinstance(obj, Capabilities):
        return _convert_capabilities(obj, version, lenient)
    raise TypeError(f"no HAL version rules for {type(obj).__name__}")


def noncompliant_operations(model: Model, version: HalVersion) -> frozenset[int]:
    """Indexes of the main subgraph's operations that HAL ``version`` cannot express
    (``compliantWith(version, model, &noncompliantOperations)``): each operation's own
    type combination and semantics and its operands' features count; model-level
    features (relaxed flag, extension map) do not."""
    return frozenset(i for i, v in enumerate(operation_versions(model)) if v > version)


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------


def _convert_model(model: Model, version: HalVersion, lenient: bool) -> Model:
    need = validate_model(model, V.V1_3)
    if need <= version:
        return model
    try:
        validate_model(model, version)
        reason = f"needs HAL {need.label}"  # pragma: no cover - validation disagrees with need
    except HalError as e:
        reason = e.message
    message = f"the model cannot be expressed in HAL {version.label} without loss: {reason}"
    if not lenient:
        raise _loss(message)
    dropped = []
    changes: dict[str, object] = {}
    if version < V.V1_1 and model.relax_computation_float32_to_float16:
        changes["relax_computation_float32_to_float16"] = False
        dropped.append("the relaxed-float32 flag")
    if version < V.V1_2 and model.extension_name_to_prefix:
        changes["extension_name_to_prefix"] = ()
        dropped.append("the extension map")
    if version < V.V1_3 and model.referenced:
        changes["referenced"] = ()
        dropped.append(f"{len(model.referenced)} referenced subgraphs")
    converted = dataclasses.replace(model, **changes) if changes else model
    detail = f"; dropped {', '.join(dropped)}" if dropped else ""
    warnings.warn(message + detail, HalConversionWarning, stacklevel=3)
    return converted


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def _pool_version(pool: object) -> HalVersion:
    if isinstance(pool, BufferToken):
        return V.V1_3
    if isinstance(pool, Memory) and pool.name in ("hardware_buffer_blob", "hardware_buffer"):
        return V.V1_2
    return V.V1_0


def _convert_request(
    request: Request, version: HalVersion, lenient: bool, model: Model | None
) -> Request:
    need = min_version(request, model=model)
    if need <= version:
        return request
    reasons = []
    for k, pool in enumerate(request.pools):
        pv = _pool_version(pool)
        if pv > version:
            what = "a buffer-token pool" if isinstance(pool, BufferToken) else f"a {pool.name} pool"
            reasons.append(f"pool {k} is {what} (HAL {pv.label})")
    if not reasons:
        reasons.append("outputs with unspecified dimensions need HAL 1.2")
    message = f"the request cannot be expressed in HAL {version.label} without loss: " + "; ".join(
        reasons
    )
    if not lenient:
        raise _loss(message)
    # Nothing can be dropped without changing what the request means: return it as is.
    warnings.warn(message, HalConversionWarning, stacklevel=3)
    return request


# ---------------------------------------------------------------------------------------
# Capabilities
# ---------------------------------------------------------------------------------------


def lookup_performance(capabilities: Capabilities, type_code: int) -> PerformanceInfo:
    """The performance ``capabilities`` report for an operand type, or
    :data:`NO_PERFORMANCE` when they report none (Android's ``lookup``)."""
    for entry in capabilities.operand_performance:
        if entry.type == type_code:
            return entry.info
    return NO_PERFORMANCE


def _capabilities_compliant(caps: Capabilities, version: HalVersion) -> bool:
    if version >= V.V1_2:
        return True
    f32 = lookup_performance(caps, T.FLOAT32)
    tf32 = lookup_performance(caps, T.TENSOR_FLOAT32)
    q8 = lookup_performance(caps, T.TENSOR_QUANT8_ASYMM)
    if f32 != tf32:
        return False
    if any(lookup_performance(caps, t) != q8 for t in QUANT8_PERFORMANCE_TYPES):
        return False
    relaxed_scalar = caps.relaxed_float32_to_float16_performance_scalar
    relaxed_tensor = caps.relaxed_float32_to_float16_performance_tensor
    if version == V.V1_1:
        return relaxed_scalar == relaxed_tensor
    return relaxed_scalar == f32 and relaxed_tensor == tf32


def _convert_capabilities(caps: Capabilities, version: HalVersion, lenient: bool) -> Capabilities:
    if not _capabilities_compliant(caps, version):
        message = (
            f"the capabilities cannot be expressed in HAL {version.label} without loss: "
            + _capabilities_loss(caps, version)
        )
        if not lenient:
            raise _loss(message)
        warnings.warn(message, HalConversionWarning, stacklevel=3)
    if version >= V.V1_3:
        return caps
    if version == V.V1_2:
        types = _VERSION_TYPES[V.V1_2]
        return dataclasses.replace(
            caps,
            operand_performance=tuple(p for p in caps.operand_performance if p.type in types),
            if_performance=NO_PERFORMANCE,
            while_performance=NO_PERFORMANCE,
        )
    # HAL 1.0/1.1: one float32 figure, one quantized figure (and 1.1's relaxed figure).
    f32 = lookup_performance(caps, T.TENSOR_FLOAT32)
    q8 = lookup_performance(caps, T.TENSOR_QUANT8_ASYMM)
    relaxed = caps.relaxed_float32_to_float16_performance_tensor if version == V.V1_1 else f32
    entries = [(T.FLOAT32, f32), (T.TENSOR_FLOAT32, f32), (T.TENSOR_QUANT8_ASYMM, q8)]
    entries += [(t, q8) for t in QUANT8_PERFORMANCE_TYPES]
    return Capabilities(
        relaxed_float32_to_float16_performance_scalar=relaxed,
        relaxed_float32_to_float16_performance_tensor=relaxed,
        operand_performance=tuple(OperandPerformance(t, p) for t, p in sorted(entries)),
        if_performance=NO_PERFORMANCE,
        while_performance=NO_PERFORMANCE,
    )


def _capabilities_loss(caps: Capabilities, version: HalVersion) -> str:
    f32 = lookup_performance(caps, T.FLOAT32)
    tf32 = lookup_performance(caps, T.TENSOR_FLOAT32)
    q8 = lookup_performance(caps, T.TENSOR_QUANT8_ASYMM)
    if f32 != tf32:
        return f"FLOAT32 {f32} and TENSOR_FLOAT32 {tf32} performance differ"
    for t in QUANT8_PERFORMANCE_TYPES:
        if lookup_performance(caps, t) != q8:
            return (
                f"{t.name} performance {lookup_performance(caps, t)} differs from "
                f"TENSOR_QUANT8_ASYMM {q8}"
            )
    scalar = caps.relaxed_float32_to_float16_performance_scalar
    tensor = caps.relaxed_float32_to_float16_performance_tensor
    if version == V.V1_1 or scalar != tensor:
        return f"relaxed scalar {scalar} and tensor {tensor} performance differ"
    return f"relaxed performance ({tensor}) differs from float32 performance {f32}"


__all__ = [
    "FLT_MAX",
    "NO_PERFORMANCE",
    "QUANT8_PERFORMANCE_TYPES",
    "HalConversionWarning",
    "compliant_with",
    "convert_to",
    "lookup_performance",
    "min_version",
    "noncompliant_operations",
]
