"""Validation of models, requests and execution options, per HAL version.

This is Android's ``ValidateHal.cpp`` (plus each operation's ``validate``) for the
reference driver. Every violation raises :class:`HalError` with INVALID_ARGUMENT and a
message naming where (``main subgraph``/``subgraph K``, ``operand I``/``operation I``,
``request input K``, ``model pool K``, ...) and the rule. Nothing else escapes: for any
:class:`Model` or :class:`Request` whose fields have their declared Python types, however
nonsensical the values (negative or huge dims and indexes, NaN scales, unknown enum
codes), validation returns or raises :class:`HalError`. Sizes are computed with early
bounds and never materialized, so a declared size costs nothing.

``validate_model`` and ``validate_request`` also return the lowest HAL version that can
express what they validated: every version-dependent rule here is a feature of the
version that introduced it, which is what :mod:`driver.versions` builds on.

Order of checks (so that later checks may assume earlier ones):

1. model-level: main subgraph non-empty; fields that do not exist in the version
   (relaxed flag 1.1+, extension map 1.2+, referenced subgraphs 1.3+); extension map
   one-to-one; pools.
2. every subgraph (main, then each referenced one): operands (type exists in the
   version, rank, scale, zeroPoint, extra params, location by lifetime, constant
   length), operations (type, operand indexes, output lifetimes), the graph (execution
   order, single writer, every operand written, numberOfConsumers), input/output lists.
3. no cycle among referenced subgraphs.
4. every operation's signature, its ``validate`` hook and the static shape pass.

Where this is stricter than Android 11 (documented choices):

- A NaN or infinite scale is rejected for every standard type (Android's ``scale <= 0``
  test lets NaN through), and so is one outside float32's positive finite values
  [2^-149, FLT_MAX] (one that a float32 could not carry; a Python float just outside,
  which the conversion would round onto a bound, is refused too). Per-channel scales
  likewise.
- Extra params must be absent on every standard type but the per-channel one (Android's
  list of such types misses a few, e.g. FLOAT16).
- A constant tensor must have fully specified dimensions (no 0 = unknown dim), and any
  tensor's byte size (over its known dims) must fit in uint32, as the NDK's
  ``ANeuralNetworksModel_addOperand`` demands; uint32 fields (dims, indexes, offsets,
  lengths) must be in ``[0, 2**32)``.
- An extension type's prefix must be listed in ``extension_name_to_prefix`` (one-to-one,
  prefixes in ``[1, 0xFFFF]``); Android leaves that to the runtime.
- Any cycle among referenced subgraphs is rejected, reachable from main or not.
- A request must not give dimensions for a scalar operand.
- A pool's declared size must be mappable through its handle (checked for the memory
  names the reference maps).

Deferrable rejections (``HalError.deferrable``): Android 11's validation checks operand
counts, types, HAL versions and some ranks; output shapes, parameter values and
quantization conditions are checked by each operation's ``prepare()`` or kernel, at
execution. Such a rejection (anything ``infer_shapes`` raises here, a declared output
shape the inputs contradict, an omitted operand where a value is required
(:class:`OmittedRequiredInput`), a hook's ``ctx.invalid(..., deferrable=True)``) is kept while
the remaining operations and subgraphs are checked, and raised only if no other rule
fails, so a model with both kinds of problem reports the one Android's validation makes.
A hook runs its strict checks first and checks the HAL version it needs before its
deferrable ones (``ctx.require_version``): a deferrable rejection ends the hook.

An exception other than :class:`HalError` raised inside an operation's ``validate`` or
``infer_shapes`` hook is a bug in that hook: it is reported as GENERAL_FAILURE (the
original exception chained as ``__cause__``) rather than escaping the HAL boundary, and
the tests treat any GENERAL_FAILURE from validation as a failure.

Deadlines (:func:`validate_deadline`) are absolute ``time.monotonic_ns()`` instants (int
nanoseconds, HAL ``OptionalTimePoint`` on the steady clock) or ``None`` for none, as in
:mod:`driver.hal.device`.
"""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from driver.hal.types import (
    NO_LOCATION,
    UINT64_MAX,
    BufferDesc,
    BufferRole,
    BufferToken,
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    ExtensionNameAndPrefix,
    HalError,
    HalVersion,
    MeasureTiming,
    Memory,
    MemoryHandle,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Priority,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    is_extension_type,
    is_scalar_type,
    located,
    operand_type_name,
    operation_type_name,
)
from driver.memory import SUPPORTED_MEMORY_NAMES, pool_buffer
from driver.operations import declaration
from driver.operations.base import OperationContext, Unknown, array_from_bytes

L = OperandLifeTime
T = OperandType
V = HalVersion

UINT32_MAX = 2**32 - 1
MAX_OPERAND_BYTES = UINT32_MAX
"""Largest byte size an operand may declare (what ``uint32_t`` lengths can address)."""

_OEM_OPERATION = int(OperationType.OEM_OPERATION)
_NUM_STANDARD_OPERATIONS = 102


def _invalid(message: str, *, deferrable: bool = False) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, message, deferrable=deferrable)


def subgraph_name(index: int | None) -> str:
    return "main subgraph" if index is None else f"subgraph {index}"


def referenced_by(sg: Subgraph, op: Operation) -> list[int]:
    """The referenced subgraphs ``op`` of ``sg`` names directly (IF branches, WHILE
    condition and body): the offsets of its SUBGRAPH operands."""
    return [
        sg.operands[i].location.offset
        for i in op.inputs
        if sg.operands[i].lifetime == OperandLifeTime.SUBGRAPH
    ]


def reachable_subgraphs(model: Model, sg: Subgraph, op: Operation) -> list[int] | None:
    """Every referenced subgraph ``op`` reaches, directly or through the control flow
    they hold, each once (a worklist: subgraphs may nest thousands deep, and share
    branches, so that following every path would take exponential time); None if one
    of them names no referenced subgraph."""
    found: list[int] = []
    seen: set[int] = set()
    work = [(sg, op)]
    while work:
        sg, op = work.pop()
        for k in referenced_by(sg, op):
            if not 0 <= k < len(model.referenced):
                return None
            if k not in seen:
                seen.add(k)
                found.append(k)
                body = model.referenced[k]
                work.extend((body, inner) for inner in body.operations)
    return found


def nesting_depth(model: Model, sg: Subgraph, op: Operation) -> int:
    """How many control-flow levels running ``op`` enters at most (0 for an operation
    without subgraphs; an IF whose branch holds a WHILE: 2). ``model`` is valid, so the
    subgraphs form no cycle."""
    height: dict[int, int] = {}  # subgraph -> the levels below it (memoized: a DAG)
    stack = [(k, False) for k in referenced_by(sg, op)]
    while stack:
        k, expanded = stack.pop()
        if k in height:
            continue
        body = model.referenced[k]
        below = [r for inner in body.operations for r in referenced_by(body, inner)]
        if expanded or not below:
            height[k] = max((1 + height.get(r, 0) for r in below), default=0)
        else:
            stack.append((k, True))
            stack.extend((r, False) for r in below if r not in height)
    return max((1 + height[k] for k in referenced_by(sg, op)), default=0)


# ---------------------------------------------------------------------------------------
# Per-type rules (one table, read by the operand loop)
# ---------------------------------------------------------------------------------------

# The hot loops compare plain ints: an enum attribute lookup (``L.NO_VALUE``) costs
# several times a local int comparison, and validation runs on every fuzz input.
_V10, _V11, _V12, _V13 = 10, 11, 12, 13
_LT_TEMPORARY, _LT_INPUT, _LT_OUTPUT, _LT_COPY, _LT_REFERENCE, _LT_NO_VALUE, _LT_SUBGRAPH = range(7)
_TYPE_SUBGRAPH = 15
_INF = math.inf
FLT_MAX = 3.4028234663852886e38
FLT_TRUE_MIN = 2.0**-149
"""Scales are float32 in the HAL: a positive scale must lie in [FLT_TRUE_MIN, FLT_MAX], the
positive finite float32 values (so it cannot overflow to inf nor underflow to 0)."""

_SCALAR, _TENSOR, _EXTENSION = 0, 1, 2
_S_ZERO, _S_NONNEG, _S_POSITIVE, _S_ANY = 0, 1, 2, 3
_X_NONE, _X_CHANNEL, _X_BLOB, _X_ANY = 0, 1, 2, 3

_TypeRule = tuple[int, int, int, int, float, float, int, bool]
"""(version that introduced the type, kind, bytes per element, scale rule, lowest and
highest zeroPoint, extra-params rule, whether a constant's length must be exactly
element size × product(dims)). A tuple so the operand loop unpacks it in one step."""


def _rule(version, kind, size, scale=_S_ZERO, zp=(0, 0), extra=_X_NONE, length=True):
    return (int(version), kind, size, scale, zp[0], zp[1], extra, length)


_TYPE_RULES: dict[int, _TypeRule] = {
    T.FLOAT32: _rule(V.V1_0, _SCALAR, 4),
    T.INT32: _rule(V.V1_0, _SCALAR, 4),
    T.UINT32: _rule(V.V1_0, _SCALAR, 4),
    T.TENSOR_FLOAT32: _rule(V.V1_0, _TENSOR, 4),
    T.TENSOR_INT32: _rule(V.V1_0, _TENSOR, 4, _S_NONNEG),
    T.TENSOR_QUANT8_ASYMM: _rule(V.V1_0, _TENSOR, 1, _S_POSITIVE, (0, 255)),
    T.BOOL: _rule(V.V1_2, _SCALAR, 1),
    T.TENSOR_QUANT16_SYMM: _rule(V.V1_2, _TENSOR, 2, _S_POSITIVE),
    T.TENSOR_FLOAT16: _rule(V.V1_2, _TENSOR, 2),
    T.TENSOR_BOOL8: _rule(V.V1_2, _TENSOR, 1),
    T.FLOAT16: _rule(V.V1_2, _SCALAR, 2),
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL: _rule(V.V1_2, _TENSOR, 1, extra=_X_CHANNEL),
    T.TENSOR_QUANT16_ASYMM: _rule(V.V1_2, _TENSOR, 2, _S_POSITIVE, (0, 65535)),
    T.TENSOR_QUANT8_SYMM: _rule(V.V1_2, _TENSOR, 1, _S_POSITIVE),
    T.TENSOR_QUANT8_ASYMM_SIGNED: _rule(V.V1_3, _TENSOR, 1, _S_POSITIVE, (-128, 127)),
    T.SUBGRAPH: _rule(V.V1_3, _SCALAR, 0),
    # OEM types: shape rules only; their scale, zero point, extra params and constant
    # length are the OEM's business (Android does not validate them either).
    T.OEM: _rule(V.V1_0, _SCALAR, 0, _S_ANY, (-_INF, _INF), _X_ANY, False),
    T.TENSOR_OEM_BYTE: _rule(V.V1_0, _TENSOR, 1, _S_ANY, (-_INF, _INF), _X_ANY, False),
}
_EXTENSION_RULE: _TypeRule = _rule(V.V1_2, _EXTENSION, 0, extra=_X_BLOB, length=False)

_SCALAR_TYPE_CODES = frozenset(t for t, rule in _TYPE_RULES.items() if rule[1] == _SCALAR)
_ZERO_LOCATION_LIFETIMES = frozenset({_LT_TEMPORARY, _LT_INPUT, _LT_OUTPUT, _LT_NO_VALUE})
_CONSTANT_LIFETIMES = frozenset({_LT_COPY, _LT_REFERENCE})
_WRITABLE_LIFETIMES = frozenset({_LT_TEMPORARY, _LT_OUTPUT})

_MEMORY_NAME_VERSIONS: dict[str, HalVersion] = {
    "ashmem": V.V1_0,
    "mmap_fd": V.V1_0,
    "hardware_buffer_blob": V.V1_2,
    "hardware_buffer": V.V1_2,
}


def _type_name(t: int) -> str:
    try:
        return operand_type_name(t)
    except Exception:  # pragma: no cover - operand_type_name handles every int
        return f"type {t!r}"


def _lifetime_name(lifetime: int) -> str:
    try:
        return OperandLifeTime(lifetime).name
    except ValueError:
        return f"UNKNOWN_LIFETIME({lifetime})"


_OP_NAMES: dict[int, str] = {int(t): t.name for t in OperationType}


def _op_name(t: int) -> str:
    name = _OP_NAMES.get(t)
    return name if name is not None else operation_type_name(t)


def _is_u32(x: int) -> bool:  # uint32 fields (not used in the operand loop: call cost)
    return 0 <= x <= UINT32_MAX


def uint32_dims(dimensions: Any) -> tuple[int, ...] | None:
    """``dimensions`` as HIDL's ``vec<uint32_t>``: a sequence of integers (numpy integers
    welcome) each in [0, 2^32), as a tuple of ints; None for anything else (None, floats,
    strings, out-of-range values)."""
    if isinstance(dimensions, (str, bytes)) or not isinstance(dimensions, (Sequence, np.ndarray)):
        return None
    try:
        dims = tuple(map(operator.index, dimensions))
    except TypeError:
        return None
    if not all(0 <= d <= UINT32_MAX for d in dims):
        return None
    return dims


def _known_size(element_size: int, dims: tuple[int, ...]) -> int:
    """Bytes over the known (non-zero) dims, capped just above :data:`MAX_OPERAND_BYTES`
    so that nonsense dims never build a huge integer."""
    size = element_size
    for d in dims:
        if d:
            size *= d
            if size > MAX_OPERAND_BYTES:
                return MAX_OPERAND_BYTES + 1
    return size


class _Limits:
    """What operand locations are checked against, shared by all subgraphs."""

    __slots__ = ("n_referenced", "operand_values_size", "pool_sizes", "pool_versions", "prefixes")

    def __init__(self, operand_values_size, pool_sizes, pool_versions, n_referenced, prefixes):
        self.operand_values_size = operand_values_size
        self.pool_sizes = pool_sizes
        self.pool_versions = pool_versions
        self.n_referenced = n_referenced
        self.prefixes = prefixes


# ---------------------------------------------------------------------------------------
# Model validation
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Field types
#
# The checks below read fields as their declared types (a tuple of ints, a DataLocation),
# which is all HIDL or the wire format can carry. A Python caller can put anything in a
# field; rather than pay for a type check of every field on every call, a TypeError or
# AttributeError raised by validation is explained after the fact by :func:`_malformed`:
# INVALID_ARGUMENT naming the field when the object is malformed, and the error itself
# (a bug of the validation) when it is not.
# ---------------------------------------------------------------------------------------

_INT = "int"
_NUMBER = "number"
_BYTES = "bytes"
_ANY = "any"

_FIELD_TYPES: dict[type, dict[str, Any]] = {
    Model: {
        "main": Subgraph,
        "referenced": (Subgraph,),
        "operand_values": _BYTES,
        "pools": (_ANY,),
        "extension_name_to_prefix": (ExtensionNameAndPrefix,),
    },
    Subgraph: {
        "operands": (Operand,),
        "operations": (Operation,),
        "input_indexes": (_INT,),
        "output_indexes": (_INT,),
    },
    Operand: {
        "type": _INT,
        "dimensions": (_INT,),
        "scale": _NUMBER,
        "zero_point": _INT,
        "lifetime": _INT,
        "location": DataLocation,
    },
    Operation: {"type": _INT, "inputs": (_INT,), "outputs": (_INT,)},
    DataLocation: {"pool_index": _INT, "offset": _INT, "length": _INT},
    ExtensionNameAndPrefix: {"name": str, "prefix": _INT},
    Request: {"inputs": (RequestArgument,), "outputs": (RequestArgument,), "pools": (_ANY,)},
    RequestArgument: {"location": DataLocation, "dimensions": (_INT,)},
}


def _malformed(value: Any, kind: Any, where: str) -> str | None:
    """The first place in ``value`` that is not of ``kind`` (a type, a field-type name, or
    a one-element tuple: a sequence of that kind), described; None if none is."""
    if isinstance(kind, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
            return f"{where} is {type(value).__name__}, not a sequence"
        for k, item in enumerate(value):
            if (problem := _malformed(item, kind[0], f"{where}[{k}]")) is not None:
                return problem
        return None
    if kind == _ANY:
        return None
    ok = (
        isinstance(value, (int, np.integer))
        if kind == _INT
        else isinstance(value, (int, float, np.number))
        if kind == _NUMBER
        else isinstance(value, (bytes, bytearray, memoryview))
        if kind == _BYTES
        else isinstance(value, kind)
    )
    if not ok:
        return f"{where} is {type(value).__name__} {value!r:.60}"
    for name, field_kind in _FIELD_TYPES.get(type(value), {}).items():
        if (problem := _malformed(getattr(value, name), field_kind, f"{where}.{name}")) is not None:
            return problem
    return None


def _explained(error: Exception, value: Any, kind: type, what: str) -> Exception:
    """What a TypeError/AttributeError raised while validating ``value`` means."""
    problem = _malformed(value, kind, what)
    if problem is None:
        return error  # well-formed: a bug here, not the caller's
    return _invalid(f"malformed {what}: {problem}")


def validate_model(model: Model, version: HalVersion = HalVersion.V1_3) -> HalVersion:
    """Raise INVALID_ARGUMENT (naming subgraph, index and rule) unless ``model`` is a
    valid model of HAL ``version``. Returns the lowest HAL version that can express the
    model (every feature it uses exists there), which is at most ``version``."""
    try:
        return _validate_model(model, version, None)
    except (TypeError, AttributeError) as e:
        raise _explained(e, model, Model, "model") from None


def operation_versions(model: Model) -> list[HalVersion]:
    """The lowest HAL version able to express each operation of the main subgraph: its
    type combination and semantics (signature and ``validate`` hook) and the features of
    its operands (types, unknown rank, lifetimes, the pools its constants live in).
    Model-level features (relaxed flag, extension map, referenced subgraphs) are not
    attributed to operations. Validates the model as HAL 1.3 first."""
    per_op: list[int] = []
    _validate_model(model, V.V1_3, per_op)
    return [HalVersion(v) for v in per_op]


def _validate_model(model: Model, version: HalVersion, per_op: list | None) -> HalVersion:
    if not isinstance(model, Model) or not isinstance(model.main, Subgraph):
        raise _invalid("not a Model")
    main = model.main
    if not main.operations:
        raise _invalid("main subgraph: a model needs at least one operation")
    if not main.operands:
        raise _invalid("main subgraph: a model needs at least one operand")
    need = V.V1_0
    referenced = model.referenced
    if referenced:
        _require(V.V1_3, version, "model: referenced subgraphs (control flow)")
        need = V.V1_3
    if model.relax_computation_float32_to_float16:
        _require(V.V1_1, version, "model: relaxComputationFloat32toFloat16")
        need = max(need, V.V1_1)
    prefixes: frozenset[int] = frozenset()
    if model.extension_name_to_prefix:
        _require(V.V1_2, version, "model: extensionNameToPrefix")
        need = max(need, V.V1_2)
        prefixes = _check_extension_map(model)
    pool_sizes, pool_versions = _check_pools(model.pools, version, "model pool", False)
    if pool_versions:
        need = max(need, max(pool_versions))
    limits = _Limits(
        len(model.operand_values), pool_sizes, pool_versions, len(referenced), prefixes
    )

    operand_needs = _check_subgraph(main, None, version, limits)
    need = max(need, max(operand_needs))
    for k, sg in enumerate(referenced):
        if not isinstance(sg, Subgraph):
            raise _invalid(f"subgraph {k}: not a Subgraph")
        need = max(need, max(_check_subgraph(sg, k, version, limits), default=_V10))
    if referenced:
        _check_no_cycles(model)

    deferred: HalError | None = None  # raised once every subgraph is checked
    main_and_referenced = [(None, per_op, operand_needs)]
    main_and_referenced += [(k, None, None) for k in range(len(referenced))]
    for k, op_versions, needs in main_and_referenced:
        try:
            need = max(need, _check_operations(model, k, version, op_versions, needs))
        except HalError as e:
            if not e.deferrable:
                raise
            deferred = deferred or e
    if deferred is not None:
        raise deferred
    return HalVersion(need)


def _require(feature: HalVersion, version: HalVersion, what: str) -> None:
    if feature > version:
        raise _invalid(f"{what} needs HAL {feature.label}; validating as HAL {version.label}")


def _check_extension_map(model: Model) -> frozenset[int]:
    names: set[str] = set()
    prefixes: set[int] = set()
    for k, entry in enumerate(model.extension_name_to_prefix):
        where = f"model: extensionNameToPrefix[{k}]"
        name = getattr(entry, "name", None)
        prefix = getattr(entry, "prefix", None)
        if not isinstance(name, str) or not name:
            raise _invalid(f"{where}: extension name must be a non-empty string, got {name!r}")
        if not isinstance(prefix, int) or not 1 <= prefix <= 0xFFFF:
            raise _invalid(f"{where}: prefix must be in [1, 65535], got {prefix!r}")
        if name in names:
            raise _invalid(f"{where}: extension {name!r} is mapped twice (must be one-to-one)")
        if prefix in prefixes:
            raise _invalid(f"{where}: prefix {prefix} is mapped twice (must be one-to-one)")
        names.add(name)
        prefixes.add(prefix)
    return frozenset(prefixes)


def _check_pools(
    pools: Sequence[Any], version: HalVersion, what: str, allow_tokens: bool
) -> tuple[list[int], list[HalVersion]]:
    """Pool sizes (0 for token pools, so only an empty location fits) and the HAL version
    each pool needs."""
    sizes: list[int] = []
    versions: list[HalVersion] = []
    for k, pool in enumerate(pools):
        where = f"{what} {k}"
        if isinstance(pool, BufferToken):
            if not allow_tokens:
                raise _invalid(f"{where}: a model pool cannot be a buffer token")
            _require(V.V1_3, version, f"{where}: a driver-managed buffer token pool")
            token = pool.token
            if not isinstance(token, int) or not 0 < token <= UINT32_MAX:
                raise _invalid(f"{where}: buffer token must be in [1, 2^32), got {token!r}")
            sizes.append(0)
            versions.append(V.V1_3)
            continue
        if not isinstance(pool, Memory):
            raise _invalid(f"{where}: not a memory pool ({type(pool).__name__})")
        name = pool.name
        pool_version = _MEMORY_NAME_VERSIONS.get(name) if isinstance(name, str) else None
        if pool_version is None:
            raise _invalid(f"{where}: unknown memory name {name!r}")
        _require(pool_version, version, f"{where}: memory of type {name!r}")
        size = pool.size
        if not isinstance(size, int) or not 0 <= size <= UINT64_MAX:
            raise _invalid(f"{where}: size {size!r} is not in [0, 2^64)")
        handle = pool.handle
        if not isinstance(handle, MemoryHandle):
            raise _invalid(f"{where}: {name} pool has no valid handle")
        if name in SUPPORTED_MEMORY_NAMES:
            try:
                with handle.buffer() as mapped:
                    mapped_size = len(mapped)
            except Exception as e:
                raise _invalid(f"{where}: {name} handle cannot be mapped ({e})") from None
            if mapped_size < size:
                raise _invalid(f"{where}: declares {size} bytes but its handle maps {mapped_size}")
        sizes.append(size)
        versions.append(pool_version)
    return sizes, versions


def validate_memory(pool: Any, what: str) -> int:
    """``pool`` is a memory the driver can map (INVALID_ARGUMENT naming ``what``
    otherwise, e.g. a pool already freed); returns its size."""
    return _check_pools([pool], V.V1_3, what, False)[0][0]


# dims tuple -> product of its non-zero dims (capped just above MAX_OPERAND_BYTES), or
# -1 when a dim is not a uint32. Shapes repeat within and across models, and this is
# several times cheaper than recomputing; bounded, since fuzzing makes endless shapes.
_DIMS_INFO: dict[tuple[int, ...], int] = {}
_DIMS_INFO_LIMIT = 1 << 13


def _dims_info(dims: tuple[int, ...]) -> int:
    checked = uint32_dims(dims)
    if checked is None:
        return -1  # (not cached: (2.0, 2.0) would then answer for (2, 2), which equals it)
    info = _known_size(1, checked)
    if len(_DIMS_INFO) >= _DIMS_INFO_LIMIT:
        _DIMS_INFO.clear()
    _DIMS_INFO[checked] = info
    return info


def _check_subgraph(
    sg: Subgraph, sg_index: int | None, version: HalVersion, limits: _Limits
) -> list[int]:
    """Operands, operations' structure, graph and input/output lists of one subgraph.
    Returns, per operand, the HAL version (as an int) its features need."""
    name = subgraph_name(sg_index)
    operands = sg.operands
    n = len(operands)
    needs: list[int] = []
    known = bytearray(n)  # value available before any operation runs
    n_inputs = n_outputs = 0
    rules = _TYPE_RULES
    dims_get = _DIMS_INFO.get
    ver = int(version)
    values_size = limits.operand_values_size
    pool_sizes = limits.pool_sizes
    zero_location = _ZERO_LOCATION_LIFETIMES
    constant_lifetimes = _CONSTANT_LIFETIMES
    no_location = NO_LOCATION
    for idx, o in enumerate(operands):
        t = o.type
        rule = rules.get(t)
        if rule is None:
            rule = _extension_rule(t, f"{name}, operand {idx}", version, limits)
        tver, kind, esize, scale_rule, zp_lo, zp_hi, extra_rule, check_length = rule
        if tver > ver:
            raise _invalid(
                f"{name}, operand {idx}: operand type {_type_name(t)} needs HAL "
                f"{HalVersion(tver).label}; validating as HAL {version.label}"
            )
        operand_need = tver
        lifetime = o.lifetime
        if (t == _TYPE_SUBGRAPH or lifetime == _LT_SUBGRAPH) and (t == _TYPE_SUBGRAPH) != (
            lifetime == _LT_SUBGRAPH
        ):
            raise _invalid(
                f"{name}, operand {idx}: operand type {_type_name(t)} cannot have lifetime "
                f"{_lifetime_name(lifetime)} (type SUBGRAPH and lifetime SUBGRAPH go together)"
            )
        dims = o.dimensions
        size = esize
        if dims.__class__ is not tuple and uint32_dims(dims) is None:
            raise _invalid(f"{name}, operand {idx}: dimensions {dims!r} are not a uint32 list")
        if dims:
            # The cache holds int tuples only; a tuple of floats equals and hashes like
            # one, so only one whose sum is an int may use it (sum is cheap, and raises
            # for what is not numbers).
            try:
                known_elements = dims_get(dims) if type(sum(dims)) is int else None
            except TypeError:
                known_elements = None
            if known_elements is None:
                known_elements = _dims_info(dims)
            if known_elements < 0:
                raise _invalid(f"{name}, operand {idx}: dimensions {list(dims)} are not all uint32")
            if kind == _SCALAR:
                raise _invalid(
                    f"{name}, operand {idx}: scalar type {_type_name(t)} must have rank 0, "
                    f"got dimensions {list(dims)}"
                )
            size = esize * known_elements
            if size > MAX_OPERAND_BYTES and kind == _TENSOR:
                raise _invalid(
                    f"{name}, operand {idx}: {_type_name(t)} {list(dims)} is larger than "
                    f"{MAX_OPERAND_BYTES} bytes"
                )
        elif kind == _TENSOR:
            if lifetime in constant_lifetimes:
                raise _invalid(
                    f"{name}, operand {idx}: a constant tensor must have a rank "
                    "(its dimensions are empty)"
                )
            if ver < _V12:
                raise _invalid(
                    f"{name}, operand {idx}: a tensor of unknown rank needs HAL 1.2; "
                    f"validating as HAL {version.label}"
                )
            operand_need = max(operand_need, _V12)  # not below its type's version

        # Scale and zero point.
        scale = o.scale
        if scale_rule == _S_ZERO:
            if scale != 0.0:
                raise _invalid(
                    f"{name}, operand {idx}: {_type_name(t)} must have scale 0, got {scale!r}"
                )
        elif scale_rule == _S_POSITIVE:
            if not FLT_TRUE_MIN <= scale <= FLT_MAX:
                raise _invalid(
                    f"{name}, operand {idx}: {_type_name(t)} needs a finite scale > 0 "
                    f"(as a float32), got {scale!r}"
                )
        elif scale_rule == _S_NONNEG and not 0.0 <= scale <= FLT_MAX:
            raise _invalid(
                f"{name}, operand {idx}: {_type_name(t)} needs a finite scale >= 0 "
                f"(as a float32), got {scale!r}"
            )
        zp = o.zero_point
        if not zp_lo <= zp <= zp_hi:
            allowed = "0" if zp_lo == zp_hi == 0 else f"in [{zp_lo}, {zp_hi}]"
            raise _invalid(
                f"{name}, operand {idx}: {_type_name(t)} zeroPoint must be {allowed}, got {zp!r}"
            )

        # Extra params.
        extra = o.extra_params
        if extra is not None or extra_rule == _X_CHANNEL:
            if extra_rule == _X_NONE:
                raise _invalid(
                    f"{name}, operand {idx}: {_type_name(t)} takes no extraParams, got "
                    f"{type(extra).__name__}"
                )
            if extra_rule == _X_CHANNEL:
                _check_channel_quant(name, idx, extra, dims)
            elif extra_rule == _X_BLOB and not isinstance(extra, bytes):
                raise _invalid(
                    f"{name}, operand {idx}: an extension operand's extraParams must be none "
                    f"or an extension blob, got {type(extra).__name__}"
                )

        # Lifetime and location.
        loc = o.location
        if lifetime in zero_location:
            if loc is not no_location and (loc.pool_index or loc.offset or loc.length):
                raise _invalid(
                    f"{name}, operand {idx}: lifetime {_lifetime_name(lifetime)} needs an "
                    f"all-zero location, got poolIndex {loc.pool_index}, offset {loc.offset}, "
                    f"length {loc.length}"
                )
            if lifetime == _LT_INPUT:
                n_inputs += 1
                known[idx] = 1
            elif lifetime == _LT_OUTPUT:
                n_outputs += 1
            elif lifetime == _LT_NO_VALUE:
                known[idx] = 1
        elif lifetime in constant_lifetimes:
            known[idx] = 1
            pool_index, offset, length = loc.pool_index, loc.offset, loc.length
            if not (
                0 <= pool_index <= UINT32_MAX
                and 0 <= offset <= UINT32_MAX
                and 0 <= length <= UINT32_MAX
            ):
                raise _invalid(
                    f"{name}, operand {idx}: location (poolIndex {pool_index}, offset "
                    f"{offset}, length {length}) is not all uint32"
                )
            if lifetime == _LT_COPY:
                if pool_index != 0:
                    raise _invalid(
                        f"{name}, operand {idx}: CONSTANT_COPY needs poolIndex 0, got {pool_index}"
                    )
                if offset + length > values_size:
                    raise _invalid(
                        f"{name}, operand {idx}: CONSTANT_COPY offset {offset} + length "
                        f"{length} is beyond operandValues ({values_size} bytes)"
                    )
            else:
                if pool_index >= len(pool_sizes):
                    raise _invalid(
                        f"{name}, operand {idx}: CONSTANT_REFERENCE poolIndex {pool_index} is "
                        f"out of range ({len(pool_sizes)} pools)"
                    )
                if offset + length > pool_sizes[pool_index]:
                    raise _invalid(
                        f"{name}, operand {idx}: CONSTANT_REFERENCE offset {offset} + length "
                        f"{length} is beyond pool {pool_index} ({pool_sizes[pool_index]} bytes)"
                    )
                operand_need = max(operand_need, limits.pool_versions[pool_index])
            if check_length:
                if kind == _TENSOR and 0 in dims:
                    raise _invalid(
                        f"{name}, operand {idx}: a constant tensor needs fully specified "
                        f"dimensions, got {list(dims)}"
                    )
                if length != size:
                    raise _invalid(
                        f"{name}, operand {idx}: constant {_type_name(t)} {list(dims)} needs "
                        f"length {size}, got {length}"
                    )
        elif lifetime == _LT_SUBGRAPH:
            known[idx] = 1
            if ver < _V13:
                raise _invalid(
                    f"{name}, operand {idx}: lifetime SUBGRAPH needs HAL 1.3; validating as "
                    f"HAL {version.label}"
                )
            if loc.pool_index != 0 or loc.length != 0:
                raise _invalid(
                    f"{name}, operand {idx}: a SUBGRAPH operand needs poolIndex 0 and length 0, "
                    f"got poolIndex {loc.pool_index}, length {loc.length}"
                )
            if not 0 <= loc.offset < limits.n_referenced:
                raise _invalid(
                    f"{name}, operand {idx}: SUBGRAPH offset {loc.offset} names no referenced "
                    f"subgraph ({limits.n_referenced} exist)"
                )
        else:
            raise _invalid(f"{name}, operand {idx}: invalid lifetime {lifetime!r}")
        needs.append(operand_need)

    _check_graph(sg, name, version, limits, known)
    _check_io_list(sg.input_indexes, operands, _LT_INPUT, n_inputs, name, "input")
    _check_io_list(sg.output_indexes, operands, _LT_OUTPUT, n_outputs, name, "output")
    return needs


def _extension_rule(t: int, where: str, version: HalVersion, limits: _Limits) -> _TypeRule:
    """The rule for an extension operand type, or INVALID_ARGUMENT for an unknown code."""
    if not (isinstance(t, int) and 0 < t <= UINT32_MAX and t >> 16):
        raise _invalid(f"{where}: invalid operand type {t!r}")
    _require(V.V1_2, version, f"{where}: an extension operand type")
    if (t >> 16) not in limits.prefixes:
        raise _invalid(
            f"{where}: extension operand type {t:#x} has prefix {t >> 16}, which "
            "extensionNameToPrefix does not map"
        )
    return _EXTENSION_RULE


def _check_channel_quant(name: str, idx: int, extra: Any, dims: tuple[int, ...]) -> None:
    where = f"{name}, operand {idx}: TENSOR_QUANT8_SYMM_PER_CHANNEL"
    if not isinstance(extra, SymmPerChannelQuantParams):
        raise _invalid(f"{where} needs per-channel quantization params, got {extra!r:.60}")
    cd = extra.channel_dim
    if not isinstance(cd, int) or not 0 <= cd < len(dims):
        raise _invalid(f"{where} channelDim {cd!r} is not a dimension of {list(dims)}")
    channels = dims[cd]
    if channels == 0:
        raise _invalid(f"{where} channel dimension {cd} must be specified (not 0)")
    scales = extra.scales
    if len(scales) != channels:
        raise _invalid(f"{where} has {len(scales)} scales for {channels} channels (dim {cd})")
    for k, s in enumerate(scales):
        if not FLT_TRUE_MIN <= s <= FLT_MAX:
            raise _invalid(f"{where} scales[{k}] must be finite and > 0 (as a float32), got {s!r}")


def _check_graph(
    sg: Subgraph, name: str, version: HalVersion, limits: _Limits, known: bytearray
) -> None:
    """Operation structure and ``validateGraph``: indexes in range, outputs writable,
    each input available before use, a single writer, every operand written, and exact
    numberOfConsumers."""
    operands = sg.operands
    n = len(operands)
    consumers = [0] * n
    for step, op in enumerate(sg.operations):
        t = op.type
        if not (0 <= t < _NUM_STANDARD_OPERATIONS or t == _OEM_OPERATION):
            if isinstance(t, int) and 0 < t <= UINT32_MAX and t >> 16:
                where = f"{name}, operation {step} ({operation_type_name(t)})"
                _require(V.V1_2, version, f"{where}: an extension operation")
                if (t >> 16) not in limits.prefixes:
                    raise _invalid(
                        f"{where}: prefix {t >> 16} is not mapped by extensionNameToPrefix"
                    )
            else:
                raise _invalid(f"{name}, operation {step}: invalid operation type {t!r}")
        for j, i in enumerate(op.inputs):
            if not 0 <= i < n:
                raise _invalid(
                    f"{name}, operation {step} ({_op_name(t)}): input {j} is operand {i}, out "
                    f"of range ({n} operands)"
                )
            if not known[i]:
                raise _invalid(
                    f"{name}, operation {step} ({_op_name(t)}): input {j} (operand {i}) is read "
                    "before it is written (operations must be in execution order)"
                )
            consumers[i] += 1
        for j, i in enumerate(op.outputs):
            if not 0 <= i < n:
                raise _invalid(
                    f"{name}, operation {step} ({_op_name(t)}): output {j} is operand {i}, out "
                    f"of range ({n} operands)"
                )
            lifetime = operands[i].lifetime
            if lifetime not in _WRITABLE_LIFETIMES:
                raise _invalid(
                    f"{name}, operation {step} ({_op_name(t)}): output {j} (operand {i}) has "
                    f"lifetime {_lifetime_name(lifetime)}; outputs must be TEMPORARY_VARIABLE "
                    "or SUBGRAPH_OUTPUT"
                )
            if known[i]:
                raise _invalid(
                    f"{name}, operation {step} ({_op_name(t)}): output {j} (operand {i}) has "
                    "already been written (each operand has one writer)"
                )
            known[i] = 1
    for i, o in enumerate(operands):
        if o.number_of_consumers != consumers[i]:
            raise _invalid(
                f"{name}, operand {i}: numberOfConsumers is {o.number_of_consumers!r} but "
                f"{consumers[i]} operation inputs read it"
            )
    if not all(known):
        i = known.index(0)
        raise _invalid(f"{name}, operand {i}: is never written (no operation outputs it)")


def _check_io_list(
    indexes: Sequence[int],
    operands: Sequence[Operand],
    lifetime: int,
    expected_count: int,
    name: str,
    what: str,
) -> None:
    n = len(operands)
    for k, i in enumerate(indexes):
        if not 0 <= i < n:
            raise _invalid(f"{name}, {what} list entry {k}: operand {i} is out of range ({n})")
        if operands[i].lifetime != lifetime:
            raise _invalid(
                f"{name}, {what} list entry {k}: operand {i} has lifetime "
                f"{_lifetime_name(operands[i].lifetime)}, expected {_lifetime_name(lifetime)}"
            )
    if len(set(indexes)) != len(indexes):
        seen: set[int] = set()
        for k, i in enumerate(indexes):
            if i in seen:
                raise _invalid(f"{name}, {what} list entry {k}: operand {i} is listed twice")
            seen.add(i)
    if len(indexes) != expected_count:
        listed = set(indexes)
        for i, o in enumerate(operands):
            if o.lifetime == lifetime and i not in listed:
                raise _invalid(
                    f"{name}, operand {i}: has lifetime {_lifetime_name(lifetime)} but is not "
                    f"in the {what} list"
                )


def _check_no_cycles(model: Model) -> None:
    referenced = model.referenced
    edges = [
        sorted({o.location.offset for o in sg.operands if o.lifetime == _LT_SUBGRAPH})
        for sg in referenced
    ]
    state = [0] * len(referenced)  # 0 unvisited, 1 on the current path, 2 done
    for root in range(len(referenced)):
        if state[root]:
            continue
        path = [root]
        stack = [iter(edges[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                raise _invalid(
                    "model: referenced subgraphs form a cycle: "
                    + " -> ".join(f"subgraph {k}" for k in cycle)
                )
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges[nxt]))


# ---------------------------------------------------------------------------------------
# Operations: signatures, semantic validation, static shape inference
# ---------------------------------------------------------------------------------------


class _ConstantValues:
    """Lazily decoded constant values of one operation's inputs (static analysis):
    what ``OperationContext.values`` holds during validation."""

    __slots__ = ("_cache", "_indexes", "_known", "_model", "_sg")

    def __init__(self, model: Model, sg: Subgraph, indexes, known: dict[int, np.ndarray | None]):
        self._model = model
        self._sg = sg
        self._indexes = indexes
        self._known = known  # operand index -> value, shared by a subgraph's operations
        self._cache: dict[int, np.ndarray | None] = {}

    def __len__(self) -> int:
        return len(self._indexes)

    def __getitem__(self, k: int) -> np.ndarray | None:
        try:
            return self._cache[k]
        except KeyError:
            pass
        idx = self._indexes[k]  # IndexError past the end, so iteration works
        known = self._known
        if idx in known:
            v = known[idx]
        else:
            try:
                v = read_constant(self._model, self._sg.operands[idx])
            except HalError:
                v = None  # a pool the reference cannot map: value unknown statically
            known[idx] = v
        self._cache[k] = v
        return v


# Scalars are most of the constants an operation reads (its parameters): a struct unpack
# is several times cheaper than a numpy buffer round trip.
_SCALAR_DECODERS: dict[int, tuple[struct.Struct, np.dtype]] = {
    T.FLOAT32: (struct.Struct("<f"), np.dtype(np.float32)),
    T.INT32: (struct.Struct("<i"), np.dtype(np.int32)),
    T.UINT32: (struct.Struct("<I"), np.dtype(np.uint32)),
    T.BOOL: (struct.Struct("<B"), np.dtype(np.bool_)),
    T.FLOAT16: (struct.Struct("<e"), np.dtype(np.float16)),
}


def read_constant(model: Model, operand) -> np.ndarray | None:
    """The value of a constant operand (a fresh array; 0-d for scalars; a SUBGRAPH
    operand's value is its subgraph index), or None if it is not a decodable constant.
    Assumes the location was validated."""
    lifetime = operand.lifetime
    if lifetime == _LT_SUBGRAPH:
        return np.array(operand.location.offset, dtype=np.int64)
    if lifetime != _LT_COPY and lifetime != _LT_REFERENCE:
        return None
    t = operand.type
    rule = _TYPE_RULES.get(t)
    if rule is None or not rule[7] or t == _TYPE_SUBGRAPH:
        return None  # extension and OEM values are opaque
    loc = operand.location
    if lifetime == _LT_COPY:
        data = model.operand_values
    else:
        data = pool_buffer(model.pools[loc.pool_index])
    decoder = _SCALAR_DECODERS.get(t)
    if decoder is not None and loc.length == decoder[0].size:
        return np.array(decoder[0].unpack_from(data, loc.offset)[0], dtype=decoder[1])
    view = memoryview(data)[loc.offset : loc.offset + loc.length]
    return array_from_bytes(t, operand.dimensions, view)  # copies out of the pool


def validate_operations(model: Model, sg_index: int | None, version: HalVersion) -> HalVersion:
    """Signature, semantic and static-shape checks for every operation of a subgraph.
    Assumes operand-level and index checks already passed. Returns the lowest HAL
    version these operations need."""
    return HalVersion(_check_operations(model, sg_index, version, None, None))


def _hook_failure(where: str, hook: str, e: Exception) -> HalError:
    return HalError(
        ErrorStatus.GENERAL_FAILURE,
        f"{where}: internal error in the {hook} hook: {type(e).__name__}: {e}",
    )


class _StaticContext(OperationContext):
    """The :class:`OperationContext` hooks get during validation. Same interface; it
    only makes ``scalar`` cheap, since hooks read their scalar parameters many times
    (once in ``validate``, again in ``infer_shapes``): the Python value of each constant
    scalar is decoded once per subgraph, straight from ``operandValues``."""

    __slots__ = ("_indexes", "_scalars")

    def scalar(self, i: int) -> Any:
        key = self._indexes[i]
        cache = self._scalars
        if key in cache:
            return cache[key]
        o = self._input_operands[i]
        decoder = _SCALAR_UNPACKERS.get(o.type) if o.lifetime == _LT_COPY else None
        loc = o.location
        if decoder is not None and loc.length == decoder[1]:
            value = decoder[0](self.model.operand_values, loc.offset)[0]
            if decoder[2]:
                value = value != 0
        else:
            value = OperationContext.scalar(self, i)  # raises Unknown if not a constant
        cache[key] = value
        return value


# type -> (unpack_from, byte size, is BOOL): what _StaticContext.scalar needs in one lookup.
_SCALAR_UNPACKERS: dict[int, tuple[Any, int, bool]] = {
    int(t): (st.unpack_from, st.size, t == T.BOOL) for t, (st, _) in _SCALAR_DECODERS.items()
}


def _context_by_init(t, in_ops, out_ops, shapes, values, version, relaxed, where, model):
    return _StaticContext(
        t,
        in_ops,
        out_ops,
        shapes,
        values,
        version=version,
        relaxed=relaxed,
        location=where,
        model=model,
    )


def _context_by_slots(t, in_ops, out_ops, shapes, values, version, relaxed, where, model):
    """What ``OperationContext.__init__`` does, without the keyword-call overhead (about
    a microsecond per operation). Used only while it provably agrees with ``__init__``
    (checked at import, see :func:`_choose_context_factory`)."""
    ctx = _new_object(_StaticContext)
    ctx.operation_type = t
    ctx._input_operands = in_ops
    ctx._output_operands = out_ops
    ctx.shapes = shapes
    ctx.values = values
    ctx.output_shapes = [None] * len(out_ops)
    ctx.version = version
    ctx.relaxed = relaxed
    ctx.location = where
    ctx.executor = None
    ctx.model = model
    ctx.run_state = None
    ctx.required_version = None
    ctx._memo = None
    return ctx


_new_object = object.__new__


def _choose_context_factory():
    """The fast factory if it sets exactly what ``OperationContext.__init__`` sets (the
    base class may gain fields; then the keyword call is used)."""
    args = (7, [1], [2, 3], [(4,)], [None], V.V1_2, True, "here", "model")
    try:
        a, b = _context_by_slots(*args), _context_by_init(*args)
        same = all(
            getattr(a, name, a) == getattr(b, name, b) for name in OperationContext.__slots__
        )
    except Exception:  # pragma: no cover - a changed base class
        same = False
    return _context_by_slots if same else _context_by_init


def _check_operations(
    model: Model,
    sg_index: int | None,
    version: HalVersion,
    per_op: list | None,
    operand_needs: list | None,
) -> int:
    """Signatures, ``validate`` hooks and the static shape pass of one subgraph; the
    lowest HAL version (an int) the operations need. ``per_op`` collects each main
    operation's version including its operands' (``operand_needs``)."""
    sg = model.subgraph(sg_index)
    name = subgraph_name(sg_index)
    operands = sg.operands
    # Static shapes: () for scalars, the dims when fully specified, else None (unknown,
    # and for omitted inputs, which hooks see as None; an output is never NO_VALUE).
    scalar_types = _SCALAR_TYPE_CODES
    shapes: list[tuple[int, ...] | None] = [
        None
        if o.lifetime == _LT_NO_VALUE
        else ()
        if o.type in scalar_types
        else o.dimensions
        if o.dimensions and 0 not in o.dimensions
        else None
        for o in operands
    ]
    known_values: dict[int, np.ndarray | None] = {}
    scalars: dict[int, Any] = {}
    relaxed = model.relax_computation_float32_to_float16
    make_context = _make_context
    op_names = _OP_NAMES
    need = _V10
    deferred: HalError | None = None  # the first deferrable rejection (see below)
    for step, op in enumerate(sg.operations):
        t = op.type
        op_name = op_names.get(t)
        if op_name is None:
            op_name = operation_type_name(t)
        where = f"{name}, operation {step} ({op_name})"
        required = _V10
        decl = None
        if t == _OEM_OPERATION:
            pass  # OEM: any operands, the OEM's business
        elif t >> 16:
            required = _V12  # extension: validated by its vendor, not here
        else:
            decl = declaration(t)
            if decl is None:
                raise _invalid(f"{where}: operation type {t} is not supported by this driver")
        if decl is not None:
            inputs = op.inputs
            in_ops = [operands[i] for i in inputs]
            out_ops = [operands[i] for i in op.outputs]
            if not decl.custom_signature_check:
                try:
                    required = match_signature(decl, in_ops, out_ops, where)
                except OmittedRequiredInput as e:
                    _require(e.version, version, f"{where}: this use of {_op_name(t)}")
                    deferred = deferred or e
                    continue  # the hooks rely on every required input being there
            ctx = make_context(
                t,
                in_ops,
                out_ops,
                [shapes[i] for i in inputs],
                _ConstantValues(model, sg, inputs, known_values),
                version,
                relaxed,
                where,
                model,
            )
            ctx._indexes = inputs
            ctx._scalars = scalars
            checked = True  # False: validate raised a deferrable rejection
            try:
                decl.run_validate(ctx)
            except Unknown:
                pass
            except HalError as e:
                if not e.deferrable:
                    raise
                deferred = deferred or e
                checked = False
            except Exception as e:
                raise _hook_failure(where, "validate", e) from e
            recorded = ctx.required_version  # kept when the hook stopped early
            if recorded is not None and recorded > required:
                required = recorded
            if required > version:  # (the message is built only on failure)
                _require(HalVersion(required), version, f"{where}: this use of {_op_name(t)}")
            if not checked:
                continue  # infer_shapes may rely on what validate did not get to check
            # Static shape inference: only when every present input's shape is known.
            # Android computes shapes in prepare(), at execution: what it finds here is a
            # deferrable rejection, and the pass goes on (the outputs' shapes stay as
            # declared) so that a later rule Android does check takes precedence.
            inferred: Sequence = ()
            try:
                inferred = decl.infer_shapes(ctx)
            except Unknown:
                pass
            except HalError as e:
                deferred = deferred or _invalid(located(where, e.message), deferrable=True)
            except Exception as e:
                raise _hook_failure(where, "infer_shapes", e) from e
            for k, s in enumerate(inferred):
                if s is None or k >= len(out_ops):
                    continue
                oi = op.outputs[k]
                declared = out_ops[k].dimensions
                s = tuple(s)
                if (
                    declared
                    and declared != s
                    and (len(declared) != len(s) or any(d and d != a for d, a in zip(declared, s)))
                ):
                    deferred = deferred or _invalid(
                        f"{where}: output {k} (operand {oi}) is declared {list(declared)} "
                        f"but the inputs give {list(s)}",
                        deferrable=True,
                    )
                    continue
                shapes[oi] = s
        elif required > version:
            raise _invalid(
                f"{where}: an extension operation needs HAL 1.2; validating as HAL {version.label}"
            )
        if per_op is not None:
            op_need = required
            if operand_needs is not None:
                op_need = max([operand_needs[i] for i in op.inputs + op.outputs], default=op_need)
                op_need = max(op_need, required)
            per_op.append(op_need)
        if required > need:
            need = required
    if deferred is not None:
        raise deferred
    return need


_make_context = _choose_context_factory()

# Per declaration (held, so its id stays unique): (input types, an omitted one as -1 - type;
# output types) -> the lowest matching signature version, or None.
_SIGNATURE_CACHES: dict[int, tuple[Any, dict[tuple, HalVersion | None]]] = {}
_SIGNATURE_CACHE_LIMIT = 1 << 12


def match_signature(decl, in_ops, out_ops, where: str) -> HalVersion:
    """The lowest HAL version among the declaration's signatures that these operand
    types match; INVALID_ARGUMENT if none does."""
    entry = _SIGNATURE_CACHES.get(id(decl))
    if entry is None or entry[0] is not decl:
        entry = (decl, {})
        _SIGNATURE_CACHES[id(decl)] = entry
    cache = entry[1]
    # One pass builds the key: an omitted input's type code is stored as -1 - code
    # (type codes are non-negative), so types and omitted positions are both in it.
    key = (
        tuple([~o.type if o.lifetime == _LT_NO_VALUE else o.type for o in in_ops]),
        tuple([o.type for o in out_ops]),
    )
    best = cache.get(key, False)
    in_types = out_types = omitted = ()
    if best is False or best is None:
        in_types = tuple([o.type for o in in_ops])
        out_types = key[1]
        omitted = tuple([k for k, o in enumerate(in_ops) if o.lifetime == _LT_NO_VALUE])
    if best is False:
        best = None
        for sig in decl.signatures:
            exp_in = sig.expand_inputs(len(in_types))
            if exp_in is None or exp_in != in_types:
                continue
            exp_out = sig.expand_outputs(len(out_types))
            if exp_out is None or exp_out != out_types:
                continue
            if omitted:
                optional = sig.optional_positions(len(in_types))
                if any(k not in optional for k in omitted):
                    continue
            if best is None or sig.version < best:
                best = sig.version
        if len(cache) >= _SIGNATURE_CACHE_LIMIT:
            cache.clear()  # bounded: fuzzing makes endless type combinations
        cache[key] = best
    if best is None:
        if omitted:
            _check_omissions(decl, in_types, out_types, omitted, where)
        given_in = ", ".join(_type_name(t) for t in in_types)
        given_out = ", ".join(_type_name(t) for t in out_types)
        extra = f"; omitted inputs {list(omitted)}" if omitted else ""
        raise _invalid(
            f"{where}: no signature of {decl.type.name} takes inputs ({given_in}) and "
            f"outputs ({given_out}){extra}"
        )
    return best


class OmittedRequiredInput(HalError):
    """A NO_VALUE operand where the operation requires a value, in a model whose operand
    types match a signature of HAL ``version``: deferrable, as Android 11's validation
    checks the types only and its executor fails the omission when the model runs."""

    def __init__(self, message: str, version: HalVersion):
        super().__init__(ErrorStatus.INVALID_ARGUMENT, message, deferrable=True)
        self.version = version


def _check_omissions(decl, in_types, out_types, omitted, where: str) -> None:
    """Raise :class:`OmittedRequiredInput` if the operand types match a signature, which
    then requires a value at some omitted position (else it would have matched)."""
    matching = [
        sig
        for sig in decl.signatures
        if sig.expand_inputs(len(in_types)) == in_types
        and sig.expand_outputs(len(out_types)) == out_types
    ]
    if not matching:
        return
    sig = min(matching, key=lambda m: m.version)
    optional = sig.optional_positions(len(in_types))
    required = [k for k in omitted if k not in optional]
    raise OmittedRequiredInput(
        f"{where}: {decl.type.name} needs a value at input(s) {required}, which are "
        "omitted (lifetime NO_VALUE)",
        sig.version,
    )


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def validate_request(
    model: Model,
    request: Request,
    version: HalVersion = HalVersion.V1_3,
    *,
    allow_unspecified_output: bool = True,
) -> HalVersion:
    """Raise INVALID_ARGUMENT unless ``request`` is a valid request of HAL ``version`` for
    ``model`` (assumed valid). Returns the lowest HAL version able to carry the request.

    Outputs may leave dimensions unspecified (the execution reports the shapes) from HAL
    1.2 on; pass ``allow_unspecified_output=False`` for paths that need them fully
    specified (``executeFenced``). Inputs must always be fully specified."""
    if not isinstance(request, Request):
        raise _invalid("not a Request")
    try:
        sizes, pool_versions = _check_pools(request.pools, version, "request pool", True)
        need = max(pool_versions, default=V.V1_0)
        main = model.main
        _check_arguments(request.inputs, main, main.input_indexes, sizes, False, "input")
        allow = allow_unspecified_output and version >= V.V1_2
        if _check_arguments(request.outputs, main, main.output_indexes, sizes, allow, "output"):
            need = max(need, V.V1_2)
    except (TypeError, AttributeError) as e:
        raise _explained(e, request, Request, "request") from None
    return need


def _check_arguments(
    arguments: Sequence[Any],
    sg: Subgraph,
    indexes: Sequence[int],
    pool_sizes: list[int],
    allow_unspecified: bool,
    what: str,
) -> bool:
    """Checks one argument list; True if some argument leaves dimensions unspecified."""
    if len(arguments) != len(indexes):
        raise _invalid(f"request: {len(arguments)} {what}s given, the model has {len(indexes)}")
    operands = sg.operands
    any_unspecified = False
    for k, (arg, oi) in enumerate(zip(arguments, indexes)):
        where = f"request {what} {k}"
        if not 0 <= oi < len(operands):
            raise _invalid(f"{where}: the model's {what} list names no operand ({oi})")
        operand = operands[oi]
        loc = arg.location
        dims = arg.dimensions
        if arg.has_no_value:
            if loc.pool_index or loc.offset or loc.length or dims:
                raise _invalid(
                    f"{where}: has no value but gives a location (poolIndex {loc.pool_index}, "
                    f"offset {loc.offset}, length {loc.length}) or dimensions {list(dims)}"
                )
            continue
        pi, off, ln = loc.pool_index, loc.offset, loc.length
        if not (_is_u32(pi) and _is_u32(off) and _is_u32(ln)):
            raise _invalid(
                f"{where}: location (poolIndex {pi}, offset {off}, length {ln}) is not all uint32"
            )
        if pi >= len(pool_sizes):
            raise _invalid(f"{where}: poolIndex {pi} is out of range ({len(pool_sizes)} pools)")
        if off + ln > pool_sizes[pi]:
            raise _invalid(
                f"{where}: offset {off} + length {ln} is beyond pool {pi} ({pool_sizes[pi]} bytes)"
            )
        if uint32_dims(dims) is None:
            raise _invalid(f"{where}: dimensions {dims!r} are not all uint32")
        t = operand.type
        model_dims = operand.dimensions
        model_rank = len(model_dims)
        rank = len(dims)
        if is_scalar_type(t):
            if rank:
                raise _invalid(
                    f"{where}: operand {oi} is a scalar ({_type_name(t)}) but the request gives "
                    f"dimensions {list(dims)}"
                )
            continue
        extension = is_extension_type(t)
        if rank == 0:
            unspecified = (not model_rank and not extension) or 0 in model_dims
            if unspecified:
                if not allow_unspecified:
                    raise _invalid(
                        f"{where}: operand {oi} has dimensions {list(model_dims)} and the "
                        "request does not specify them"
                    )
                any_unspecified = True
            continue
        if model_rank and rank != model_rank:
            raise _invalid(
                f"{where}: dimensions {list(dims)} have rank {rank}, the model's operand {oi} "
                f"has rank {model_rank} ({list(model_dims)})"
            )
        for j, d in enumerate(dims):
            if model_rank and model_dims[j] and d != model_dims[j]:
                raise _invalid(
                    f"{where}: dimension {j} is {d}, the model's operand {oi} says "
                    f"{model_dims[j]} ({list(model_dims)})"
                )
        if 0 in dims:
            if not allow_unspecified:
                raise _invalid(f"{where}: dimensions {list(dims)} leave a dimension unspecified")
            any_unspecified = True
        elif not extension and _known_size(_element_size(t), dims) > MAX_OPERAND_BYTES:
            raise _invalid(f"{where}: dimensions {list(dims)} exceed {MAX_OPERAND_BYTES} bytes")
    return any_unspecified


def _element_size(t: int) -> int:
    rule = _TYPE_RULES.get(t)
    return (rule[2] or 1) if rule is not None else 1


# ---------------------------------------------------------------------------------------
# Execution options
# ---------------------------------------------------------------------------------------


def _enum_value(value: Any, enum_type: type, what: str):
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{what} must be an integer code, got {value!r}")
    try:
        return enum_type(value)
    except ValueError:
        codes = ", ".join(f"{m.name} {m.value}" for m in enum_type)
        raise _invalid(f"invalid {what} {value} (expected one of {codes})") from None


def validate_priority(priority: Any) -> Priority:
    """``Priority`` LOW/MEDIUM/HIGH (HAL 1.3); anything else is INVALID_ARGUMENT."""
    return _enum_value(priority, Priority, "priority")


def validate_execution_preference(preference: Any) -> ExecutionPreference:
    """``ExecutionPreference`` LOW_POWER/FAST_SINGLE_ANSWER/SUSTAINED_SPEED (HAL 1.1)."""
    return _enum_value(preference, ExecutionPreference, "execution preference")


def validate_deadline(deadline: Any) -> int | None:
    """A deadline is ``None`` (none) or an absolute ``time.monotonic_ns()`` instant: an
    int in ``[0, 2**64)`` nanoseconds, like HAL 1.3's ``OptionalTimePoint`` on the steady
    clock. Whether it has already passed is the caller's business (that is
    MISSED_DEADLINE_PERSISTENT, not a malformed argument)."""
    return validate_duration(deadline, "deadline")


def validate_duration(duration: Any, what: str) -> int | None:
    """A duration (``what``: the loop timeout, the timeout after the fences) is ``None``
    (the default) or int nanoseconds in ``[0, 2**64)``, like HAL 1.3's
    ``OptionalTimeoutDuration`` (and a deadline's time point, see
    :func:`validate_deadline`)."""
    if duration is None:
        return None
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise _invalid(f"{what} must be None or int nanoseconds, got {duration!r}")
    if not 0 <= duration <= UINT64_MAX:
        raise _invalid(f"{what} {duration} is not in [0, 2^64) nanoseconds")
    return duration


def validate_measure(measure: Any) -> MeasureTiming:
    """``MeasureTiming``: NO (0) or YES (1), an integer code like the other enums."""
    return _enum_value(measure, MeasureTiming, "MeasureTiming")


def validate_execution(
    model: Model,
    request: Request,
    version: HalVersion,
    measure: Any,
    deadline: Any,
    loop_timeout: Any,
    *,
    fenced: bool = False,
) -> tuple[MeasureTiming, int | None, int | None]:
    """Raise INVALID_ARGUMENT unless an execution of ``model`` (valid) with these
    arguments is valid at HAL ``version`` (``fenced``: ``executeFenced``, which needs every
    output's dimensions); returns (measure, deadline, loop timeout) checked."""
    checked = (
        validate_measure(measure),
        validate_deadline(deadline),
        validate_duration(loop_timeout, "loop timeout"),
    )
    validate_request(model, request, version, allow_unspecified_output=not fenced)
    return checked


# ---------------------------------------------------------------------------------------
# Memory domains
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BufferAllocation:
    """What a valid ``allocate`` request describes: the operand every role agrees on
    (type, scale, zero point, extra params) with the dims of the descriptor and all roles
    combined, and the roles as ``(model index, "input" | "output", io index)``."""

    operand: Operand
    roles: frozenset[tuple[int, str, int]]


def combine_dimensions(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """Merge two partial shapes (0 = unknown dim, () = unknown rank); None if they
    contradict (``combineDimensions``)."""
    if not a:
        return tuple(b)
    if not b:
        return tuple(a)
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x and y and x != y:
            return None
        out.append(x or y)
    return tuple(out)


def validate_buffer_desc_and_roles(
    desc: BufferDesc,
    input_roles: Sequence[BufferRole],
    output_roles: Sequence[BufferRole],
    models: Sequence[Any],
) -> BufferAllocation:
    """``validateMemoryDesc`` for ``IDevice::allocate``. ``models[i]`` is the prepared
    model ``BufferRole.model_index == i`` names: a :class:`Model`, or any object with a
    ``model`` attribute holding one (a prepared model); ``None`` is not a prepared model
    of this driver. A role is identified by that object's identity, like Android does by
    prepared-model pointer, so the same role listed twice is rejected."""
    if not models:
        raise _invalid("allocate: no prepared models given")
    if not input_roles and not output_roles:
        raise _invalid("allocate: at least one input or output role is needed")
    dims_in = getattr(desc, "dimensions", None)
    dims = uint32_dims(dims_in)
    if dims is None:
        raise _invalid(f"allocate: BufferDesc dimensions {dims_in!r} are not all uint32")
    seen: set[tuple[int, str, int]] = set()
    roles: set[tuple[int, str, int]] = set()
    first: Operand | None = None
    for kind, role_list in (("input", input_roles), ("output", output_roles)):
        for n, role in enumerate(role_list):
            where = f"allocate: {kind} role {n}"
            if not isinstance(role, BufferRole):
                raise _invalid(f"{where}: not a BufferRole")
            mi, io = role.model_index, role.io_index
            if not isinstance(mi, int) or not 0 <= mi < len(models):
                raise _invalid(f"{where}: model index {mi!r} out of range ({len(models)} models)")
            holder = models[mi]
            model = holder if isinstance(holder, Model) else getattr(holder, "model", None)
            if not isinstance(model, Model):
                raise _invalid(f"{where}: model {mi} is not a prepared model of this driver")
            io_list = model.main.input_indexes if kind == "input" else model.main.output_indexes
            if not isinstance(io, int) or not 0 <= io < len(io_list):
                raise _invalid(f"{where}: {kind} index {io!r} out of range ({len(io_list)})")
            freq = role.frequency
            if not isinstance(freq, (int, float)) or not 0.0 < freq <= 1.0:
                raise _invalid(f"{where}: frequency {freq!r} is not in (0, 1]")
            key = (id(holder), kind, io)
            if key in seen:
                raise _invalid(f"{where}: {kind} {io} of model {mi} is listed twice")
            seen.add(key)
            roles.add((mi, kind, io))
            operand = model.main.operands[io_list[io]]
            if first is None:
                first = operand
            elif (operand.type, operand.scale, operand.zero_point) != (
                first.type,
                first.scale,
                first.zero_point,
            ) or (not is_extension_type(first.type) and operand.extra_params != first.extra_params):
                raise _invalid(
                    f"{where}: operand {_type_name(operand.type)} (scale {operand.scale}, "
                    f"zeroPoint {operand.zero_point}) differs from the first role's "
                    f"{_type_name(first.type)} (scale {first.scale}, zeroPoint {first.zero_point})"
                )
            combined = combine_dimensions(dims, operand.dimensions)
            if combined is None:
                raise _invalid(
                    f"{where}: dimensions {list(operand.dimensions)} contradict {list(dims)}"
                )
            dims = combined
    assert first is not None  # at least one role, and every role sets it
    if not is_extension_type(first.type) and is_scalar_type(first.type) and dims:
        raise _invalid(
            f"allocate: scalar type {_type_name(first.type)} cannot have dimensions {list(dims)}"
        )
    return BufferAllocation(replace(first, dimensions=dims), frozenset(roles))


__all__ = [
    "MAX_OPERAND_BYTES",
    "UINT32_MAX",
    "BufferAllocation",
    "combine_dimensions",
    "match_signature",
    "nesting_depth",
    "operation_versions",
    "reachable_subgraphs",
    "read_constant",
    "referenced_by",
    "subgraph_name",
    "uint32_dims",
    "validate_buffer_desc_and_roles",
    "validate_deadline",
    "validate_duration",
    "validate_execution",
    "validate_execution_preference",
    "validate_measure",
    "validate_memory",
    "validate_model",
    "validate_operations",
    "validate_priority",
    "validate_request",
]
