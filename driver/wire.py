"""The wire format: a versioned binary encoding of HAL models, requests and results.

This is what crosses the process boundary between the harness and an out-of-process
driver, and what the atheris fuzz targets feed to ``decode → validate``. The full byte
layout, the versioning rules and the reasons behind them are in ``docs/wire-format.md``;
this docstring is the summary a maintainer needs at hand.

Messages
    A 12-byte header (magic ``b"NNFW"``, u16 format version, u16 :class:`MessageKind`,
    u32 body length) and a body whose layout the kind selects. Everything is
    little-endian and unaligned; counts precede what they count; variable-length columns
    (ranks, dimensions, operation operand indexes) are stored as whole arrays so that
    decoding is a few bulk ``struct`` unpacks instead of one call per field.

Versioning
    :data:`FORMAT_VERSION` names the layout of every kind. Any change to an existing
    layout bumps it; a decoder reads exactly the versions in
    :data:`SUPPORTED_FORMAT_VERSIONS` and rejects others with
    ``DecodeFailure.UNSUPPORTED_VERSION``. New message kinds may be added without a
    bump: an older decoder rejects an unknown kind with ``DecodeFailure.UNKNOWN_KIND``.

Decoding contract
    Any byte string decodes to an object or raises exactly one :class:`WireDecodeError`
    (a ``ValueError`` carrying the byte offset and the reason) — never another
    exception. Every count and length is checked against an explicit limit (below) and
    against the bytes that remain *before* anything is allocated or looped over, so the
    work done is bounded by the actual input size, never by a declared size. The decoder
    checks the encoding, not the HAL rules: an operand of unknown type or a pool of
    unknown name decodes fine, and :mod:`driver.validation` rejects it, as a driver
    receiving the same HIDL structure would. Enum fields (lifetime, status) decode to the
    enum member when the code is known and to the plain int otherwise, since HIDL
    delivers any 32-bit value for an enum.

Floats
    ``scale``, per-channel scales, performance ratios and buffer-role frequencies are
    float32, as in the HAL. Encoding rounds a Python float to the nearest float32 (what
    the NDK does with a double the app passes), so encode → decode is the identity for
    every value the HAL can carry, NaN payloads included. One caveat: a float32
    *signaling* NaN becomes quiet when it is turned into a Python float (the CPU's
    float → double conversion does that), so such bytes re-encode with the quiet bit set.

Pools
    A :class:`Memory` carries an OS handle, which is not bytes. On the wire a pool is
    ``(handle index, size, name)``; :func:`encode_model` / :func:`encode_request`
    return the handles out of band (``Encoded.handles``, one entry per distinct handle;
    in the out-of-process case their file descriptors travel over SCM_RIGHTS). A pool
    without a handle is encoded with :data:`NO_HANDLE`. Decoding asks a *resolver*
    ``(handle_index, name, size) -> Memory`` for each pool, after the whole message has
    been parsed. The default resolver, for fuzzing, returns ``Memory(name, size,
    handle=None)``, which validation rejects (no valid handle) — so no input can make
    the decoder map or allocate a declared pool size. :func:`handles_resolver` maps
    indexes to in-process handles; :func:`fd_resolver` maps received file descriptors
    after checking that each file really holds the declared size.

Limits (decoding rejects more with ``DecodeFailure.LIMIT_EXCEEDED``; encoding refuses
to produce such a message): see the ``MAX_*`` constants below.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import stat
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

from driver.hal.types import (
    NO_LOCATION,
    NO_TIMING,
    BufferDesc,
    BufferRole,
    BufferToken,
    Capabilities,
    DataLocation,
    ErrorStatus,
    ExtensionNameAndPrefix,
    Memory,
    Model,
    Operand,
    OperandLifeTime,
    OperandPerformance,
    Operation,
    OutputShape,
    PerformanceInfo,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    Timing,
)

# ---------------------------------------------------------------------------------------
# Format constants and limits
# ---------------------------------------------------------------------------------------

MAGIC = b"NNFW"
FORMAT_VERSION = 1
"""The layout version this module writes."""
SUPPORTED_FORMAT_VERSIONS = frozenset({1})
"""The layout versions this module reads."""
HEADER_SIZE = 12

NO_HANDLE = 0xFFFFFFFF
"""Handle index of a pool that has no handle (``Memory.handle is None``)."""

MAX_MESSAGE_BYTES = 1 << 28
"""Largest message (header included): 256 MiB."""
MAX_SUBGRAPHS = 1 << 12
"""Subgraphs per model, the main one included."""
MAX_OPERANDS = 1 << 18
"""Operands per model, summed over all subgraphs; also the input indexes, and the output
indexes, of one subgraph."""
MAX_OPERATIONS = 1 << 18
"""Operations per model, summed over all subgraphs."""
MAX_OPERATION_ARGUMENTS = 1 << 16
"""Inputs of one operation, and separately outputs of one operation (variadic
CONCATENATION and control flow need many; nothing needs more)."""
MAX_RANK = 32
"""Dimensions per operand, request argument, output shape or buffer descriptor."""
MAX_CHANNEL_SCALES = 1 << 20
"""Per-channel quantization scales of one operand."""
MAX_EXTENSION_PARAMS_BYTES = 1 << 20
"""Extension ``extraParams`` blob of one operand."""
MAX_OPERAND_VALUES_BYTES = 1 << 27
"""``Model.operandValues`` (CONSTANT_COPY data): 128 MiB. Large weights belong in pools."""
MAX_POOLS = 1 << 12
"""Pools of a model or request."""
MAX_EXTENSION_NAMES = 1 << 12
"""``Model.extensionNameToPrefix`` entries."""
MAX_STRING_BYTES = 1 << 10
"""A memory or extension name, in UTF-8 bytes."""
MAX_STATUS_MESSAGE_BYTES = 1 << 16
"""The human-readable message of an execution result, in UTF-8 bytes."""
MAX_REQUEST_ARGUMENTS = 1 << 16
"""Request inputs plus outputs."""
MAX_OPERAND_PERFORMANCE = 1 << 16
"""``Capabilities.operandPerformance`` entries."""
MAX_OUTPUT_SHAPES = 1 << 16
"""Output shapes of an execution result."""
MAX_BUFFER_ROLES = 1 << 16
"""Input roles, and separately output roles, of a buffer allocation."""

LIMITS: dict[str, int] = {
    name: value
    for name, value in globals().items()
    if name.startswith("MAX_") and isinstance(value, int)
}
"""Every limit by name (for docs and the CLI)."""


class MessageKind(enum.IntEnum):
    """The body layouts a message header can select."""

    MODEL = 1
    REQUEST = 2
    CAPABILITIES = 3
    EXECUTION_RESULT = 4
    BUFFER_ALLOCATION = 5


class DecodeFailure(enum.Enum):
    """What kind of problem a :class:`WireDecodeError` reports."""

    TRUNCATED = "truncated"  # a count, length or field runs past the end of the message
    LIMIT_EXCEEDED = "limit exceeded"  # a count or length above one of the MAX_* limits
    BAD_MAGIC = "bad magic"  # not a wire message at all
    UNSUPPORTED_VERSION = "unsupported version"  # a format version this decoder cannot read
    UNKNOWN_KIND = "unknown kind"  # a message kind this decoder does not know
    WRONG_KIND = "wrong kind"  # e.g. decode_model given a request
    BAD_VALUE = "bad value"  # a field outside its encoding's domain (flag bits, bools, tags, UTF-8)
    TRAILING_BYTES = "trailing bytes"  # bytes after the end of the body
    BAD_HANDLE = "bad handle"  # the resolver could not turn a handle index into a pool


class WireDecodeError(ValueError):
    """The single error decoding raises: ``offset`` is the byte offset of the offending
    field (from the start of the message), ``reason`` says what was wrong, ``failure``
    classifies it."""

    def __init__(self, offset: int, reason: str, failure: DecodeFailure = DecodeFailure.BAD_VALUE):
        super().__init__(f"wire decode error at byte {offset} ({failure.value}): {reason}")
        self.offset = offset
        self.reason = reason
        self.failure = failure

    def __reduce__(self):  # picklable, for fuzzing jobs that report across processes
        return type(self), (self.offset, self.reason, self.failure)


class WireEncodeError(ValueError):
    """The object holds a value the wire (and the HAL) cannot carry: a count above a
    limit, a negative dimension, an index above 2³²−1, a float beyond float32 range, a
    name that is not valid Unicode, an unknown extraParams kind."""


# ---------------------------------------------------------------------------------------
# Messages that are not HAL structures
# ---------------------------------------------------------------------------------------


_EMPTY_DESC = BufferDesc()


@dataclass(frozen=True, slots=True)
class ExecutionResultMessage:
    """An execution's completion: ``(status, outputShapes, timing)`` as
    ``IExecutionCallback::notify_1_3`` reports it, plus the driver's message (the HAL
    has none; the harness shows it)."""

    status: ErrorStatus | int = ErrorStatus.NONE
    output_shapes: tuple[OutputShape, ...] = ()
    timing: Timing = NO_TIMING
    message: str = ""


@dataclass(frozen=True, slots=True)
class BufferAllocationMessage:
    """The arguments of ``IDevice::allocate`` that are data: the buffer descriptor and
    the roles. ``BufferRole.model_index`` indexes the prepared models the two sides
    already share (prepared models themselves do not travel)."""

    desc: BufferDesc = _EMPTY_DESC
    input_roles: tuple[BufferRole, ...] = ()
    output_roles: tuple[BufferRole, ...] = ()


class Encoded(NamedTuple):
    """An encoded message and its out-of-band handles (``handles[i]`` is the
    ``Memory.handle`` of every pool whose handle index is ``i``)."""

    data: bytes
    handles: tuple[Any, ...] = ()


Resolver = Callable[[int, str, int], Memory]
"""``resolver(handle_index, name, size) -> Memory``; signals failure by raising
:class:`WireDecodeError` (the decoder fills in the offset)."""


def default_resolver(handle_index: int, name: str, size: int) -> Memory:
    """The fuzzing resolver: a pool without a handle. Validation rejects it, so nothing
    is ever mapped or allocated for a declared size."""
    return Memory(name, size, None)


def handles_resolver(handles: Sequence[Any]) -> Resolver:
    """A resolver for handles passed in-process (e.g. ``Encoded.handles``)."""

    def resolve(handle_index: int, name: str, size: int) -> Memory:
        if handle_index >= len(handles):
            raise WireDecodeError(
                0,
                f"handle index {handle_index} but only {len(handles)} handles were passed",
                DecodeFailure.BAD_HANDLE,
            )
        return Memory(name, size, handles[handle_index])

    return resolve


def fd_resolver(fds: Sequence[int], *, max_pool_size: int | None = None) -> Resolver:
    """A resolver for file descriptors received from another process: maps each pool
    with :class:`driver.memory.SharedMemory` (which duplicates the fd) after checking
    that the fd is a regular file (memfd, tmpfs) holding at least the declared size —
    mapping past the end of a file would turn the first access into SIGBUS."""
    from driver.memory import MAX_POOL_SIZE, SharedMemory

    limit = MAX_POOL_SIZE if max_pool_size is None else max_pool_size

    def fail(reason: str) -> WireDecodeError:
        return WireDecodeError(0, reason, DecodeFailure.BAD_HANDLE)

    def resolve(handle_index: int, name: str, size: int) -> Memory:
        if handle_index >= len(fds):
            raise fail(f"handle index {handle_index} but only {len(fds)} descriptors were passed")
        if size > limit:
            raise fail(f"pool size {size} exceeds the {limit}-byte limit")
        fd = fds[handle_index]
        try:
            st = os.fstat(fd)
        except OSError as e:
            raise fail(f"descriptor {fd}: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise fail(f"descriptor {fd} is not a mappable file")
        if st.st_size < size:
            raise fail(f"pool declares {size} bytes but descriptor {fd} holds {st.st_size}")
        if size == 0:
            # No bytes to share, and mmap refuses an empty file: a fresh empty memfd
            # stands in (not a process-private buffer: it must cross to a child again).
            return Memory(name, 0, SharedMemory(0))
        try:
            return Memory(name, size, SharedMemory.from_fd(fd, size))
        except (OSError, ValueError) as e:
            raise fail(f"cannot map descriptor {fd}: {e}") from None

    return resolve


# ---------------------------------------------------------------------------------------
# Precompiled formats
# ---------------------------------------------------------------------------------------

# ``Struct.iter_unpack`` is always given a ``bytes`` slice, never a memoryview: in CPython
# 3.11 an unpack iterator over a memoryview that ends up in a garbage cycle (e.g. kept
# alive by a WireDecodeError's traceback) crashes the garbage collector.
_HEADER = struct.Struct("<4sHHI")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U32x2 = struct.Struct("<II")
_U32x3 = struct.Struct("<III")
_U32x4 = struct.Struct("<IIII")
_F32x8 = struct.Struct("<8f")
# Operand record: type, numberOfConsumers, scale, zeroPoint, lifetime, poolIndex, offset, length.
_OPERAND = struct.Struct("<IIfiIIII")
_OPERAND_MIN = 2 + _OPERAND.size  # + rank byte + extra-kind byte
_OPERATION = struct.Struct("<III")
_ARGUMENT = struct.Struct("<IIII")  # hasNoValue, poolIndex, offset, length
_MEMORY_POOL = struct.Struct("<IQ")  # handle index, size (then the name)
_MEMORY_POOL_MIN = _MEMORY_POOL.size + 4
_EXTENSION_NAME = struct.Struct("<HI")  # prefix, name length
_OPERAND_PERF = struct.Struct("<Iff")
_ROLE = struct.Struct("<IIf")
_RESULT_HEAD = struct.Struct("<IQQI")  # status, timeOnDevice, timeInDriver, shape count

_EXTRA_NONE, _EXTRA_CHANNEL_QUANT, _EXTRA_EXTENSION = 0, 1, 2
_POOL_MEMORY, _POOL_TOKEN = 0, 1

_KINDS: dict[int, MessageKind] = {int(k): k for k in MessageKind}
_LIFETIME: dict[int, OperandLifeTime] = {int(v): v for v in OperandLifeTime}
_STATUS: dict[int, ErrorStatus] = {int(v): v for v in ErrorStatus}
_EXTRA_KIND_OK = bytes(range(3))  # bytes.translate deletes valid kinds; leftovers are bad
_BOOL_OK = bytes(range(2))


def _fast_constructor(cls: type) -> Callable[..., Any]:
    """A positional constructor for a frozen slotted HAL dataclass that sets the slots
    directly: about twice as fast as the generated ``__init__``, which goes through
    ``object.__setattr__`` once per field, and operands dominate decoding time. Falls
    back to the class itself if the class is not the plain frozen slotted dataclass
    this relies on (``tests/test_wire.py`` checks both give equal objects)."""
    names = tuple(f.name for f in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__"):
        return cls
    new = object.__new__
    setters = tuple(getattr(cls, n).__set__ for n in names)
    if len(names) == 3:
        s0, s1, s2 = setters

        def make3(a: Any, b: Any, c: Any) -> Any:
            o = new(cls)
            s0(o, a)
            s1(o, b)
            s2(o, c)
            return o

        return make3
    if len(names) == 8:
        s0, s1, s2, s3, s4, s5, s6, s7 = setters

        def make8(a: Any, b: Any, c: Any, d: Any, e: Any, f: Any, g: Any, h: Any) -> Any:
            o = new(cls)
            s0(o, a)
            s1(o, b)
            s2(o, c)
            s3(o, d)
            s4(o, e)
            s5(o, f)
            s6(o, g)
            s7(o, h)
            return o

        return make8
    return cls


_new_operand = _fast_constructor(Operand)
_new_operation = _fast_constructor(Operation)
_new_location = _fast_constructor(DataLocation)
_new_argument = _fast_constructor(RequestArgument)


# ---------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------

_T = DecodeFailure.TRUNCATED
_L = DecodeFailure.LIMIT_EXCEEDED
_B = DecodeFailure.BAD_VALUE


def _truncated(pos: int, need: int, end: int, what: str) -> WireDecodeError:
    return WireDecodeError(pos, f"{what} needs {need} bytes but {end - pos} remain", _T)


def _count(buf: bytes, pos: int, end: int, limit: int, unit: int, what: str) -> int:
    """Read a u32 count at ``pos`` and check it against ``limit`` and against the
    remaining bytes (each counted item takes at least ``unit`` bytes)."""
    if end - pos < 4:
        raise _truncated(pos, 4, end, f"{what} count")
    n = _U32.unpack_from(buf, pos)[0]
    if n > limit:
        raise WireDecodeError(pos, f"{what} count {n} exceeds the limit of {limit}", _L)
    if n * unit > end - pos - 4:
        raise WireDecodeError(
            pos,
            f"{what} count {n} needs at least {n * unit} bytes but {end - pos - 4} remain",
            _T,
        )
    return n


def _string(buf: bytes, pos: int, end: int, limit: int, what: str) -> tuple[str, int]:
    n = _count(buf, pos, end, limit, 1, f"{what} byte")
    start = pos + 4
    try:
        return buf[start : start + n].decode("utf-8"), start + n
    except UnicodeDecodeError as e:
        raise WireDecodeError(start + e.start, f"{what} is not valid UTF-8", _B) from None


def _check_counts(
    pos: int, counts: Sequence[int], limits: Sequence[int], names: Sequence[str]
) -> None:
    """Raise for the first of consecutive u32 counts (starting at ``pos``) above its limit."""
    for k, (n, limit, name) in enumerate(zip(counts, limits, names)):
        if n > limit:
            raise WireDecodeError(pos + 4 * k, f"{name} count {n} exceeds the limit of {limit}", _L)


def _ranks(buf: bytes, pos: int, end: int, count: int, what: str) -> bytes:
    if count > end - pos:
        raise _truncated(pos, count, end, f"{what} ranks")
    ranks = buf[pos : pos + count]
    if count and max(ranks) > MAX_RANK:
        k = next(i for i, r in enumerate(ranks) if r > MAX_RANK)
        raise WireDecodeError(
            pos + k, f"{what} {k} has rank {ranks[k]}, above the limit of {MAX_RANK}", _L
        )
    return ranks


def _flags(column: bytes, allowed: bytes, pos: int, what: str) -> None:
    """Every byte of ``column`` must be one of ``allowed``."""
    if column.translate(None, allowed):
        k = next(i for i, c in enumerate(column) if c not in allowed)
        raise WireDecodeError(pos + k, f"{what} {k}: invalid code {column[k]}", _B)


def _u32_array(
    buf: bytes, pos: int, end: int, count: int, what: str, declared_at: int | None = None
) -> tuple[int, ...]:
    """``count`` u32 values at ``pos``; a shortfall is reported at ``declared_at``, where
    the counts that add up to ``count`` were read (the rank column, the operation records)."""
    if 4 * count > end - pos:
        if declared_at is None:
            raise _truncated(pos, 4 * count, end, what)
        raise WireDecodeError(
            declared_at,
            f"{count} {what} declared here need {4 * count} bytes at byte {pos} but "
            f"{end - pos} remain",
            _T,
        )
    if not count:
        return ()
    return struct.unpack_from(f"<{count}I", buf, pos)  # struct caches compiled formats


def _decode_subgraph(buf: bytes, pos: int, end: int, budget: list[int]) -> tuple[Subgraph, int]:
    """``budget`` = [operands left, operations left] for the whole model."""
    if end - pos < 16:
        raise _truncated(pos, 16, end, "subgraph header")
    n_opnd, n_oper, n_in, n_out = _U32x4.unpack_from(buf, pos)
    if n_opnd > budget[0] or n_oper > budget[1] or n_in > MAX_OPERANDS or n_out > MAX_OPERANDS:
        _check_counts(
            pos,
            (n_opnd, n_oper, n_in, n_out),
            (budget[0], budget[1], MAX_OPERANDS, MAX_OPERANDS),
            (
                "operand (in the whole model)",
                "operation (in the whole model)",
                "subgraph input",
                "subgraph output",
            ),
        )
    budget[0] -= n_opnd
    budget[1] -= n_oper
    pos += 16
    least = n_opnd * _OPERAND_MIN + n_oper * _OPERATION.size + 4 * (n_in + n_out)
    if least > end - pos:
        raise WireDecodeError(
            pos - 16,
            f"subgraph of {n_opnd} operands, {n_oper} operations, {n_in} inputs and "
            f"{n_out} outputs needs at least {least} bytes but {end - pos} remain",
            _T,
        )

    # Operands: rank column, extra-kind column, fixed records, dims, extra params.
    ranks_at = pos
    ranks = _ranks(buf, pos, end, n_opnd, "operand")
    pos += n_opnd
    kinds = buf[pos : pos + n_opnd]
    _flags(kinds, _EXTRA_KIND_OK, pos, "operand extraParams kind of operand")
    pos += n_opnd
    rec_pos = pos
    pos += n_opnd * _OPERAND.size
    dims_all = _u32_array(buf, pos, end, sum(ranks), "operand dimensions", ranks_at)
    pos += 4 * len(dims_all)
    extras: list[Any] = []
    if kinds.count(0) != n_opnd:
        for kind in kinds:
            if kind == _EXTRA_NONE:
                extras.append(None)
            elif kind == _EXTRA_CHANNEL_QUANT:
                if end - pos < 8:
                    raise _truncated(pos, 8, end, "per-channel quantization header")
                channel_dim = _U32.unpack_from(buf, pos)[0]
                n = _count(buf, pos + 4, end, MAX_CHANNEL_SCALES, 4, "per-channel scale")
                pos += 8
                scales = struct.unpack_from(f"<{n}f", buf, pos) if n else ()
                pos += 4 * n
                extras.append(SymmPerChannelQuantParams(channel_dim, scales))
            else:
                n = _count(buf, pos, end, MAX_EXTENSION_PARAMS_BYTES, 1, "extension params byte")
                pos += 4
                extras.append(buf[pos : pos + n])
                pos += n

    operands: list[Operand] = []
    append = operands.append
    lifetimes = _LIFETIME
    new_operand = _new_operand
    new_location = _new_location
    if not extras:
        extras = [None] * n_opnd
    d = 0
    records = _OPERAND.iter_unpack(buf[rec_pos : rec_pos + n_opnd * _OPERAND.size])
    for r, extra, (t, cons, scale, zp, lt, pi, off, ln) in zip(ranks, extras, records):
        if r:
            dims = dims_all[d : d + r]
            d += r
        else:
            dims = ()
        append(
            new_operand(
                t,
                dims,
                cons,
                scale,
                zp,
                lifetimes.get(lt, lt),
                new_location(pi, off, ln) if pi or off or ln else NO_LOCATION,
                extra,
            )
        )

    # Operations: fixed records (type, input count, output count), then all indexes.
    operations: list[Operation] = []
    if n_oper:
        if n_oper * 12 > end - pos:
            raise _truncated(pos, n_oper * 12, end, "operation records")
        flat = struct.unpack_from(f"<{3 * n_oper}I", buf, pos)
        n_ins, n_outs = flat[1::3], flat[2::3]
        worst = max(max(n_ins), max(n_outs))
        if worst > MAX_OPERATION_ARGUMENTS:
            k = next(i for i in range(n_oper) if max(n_ins[i], n_outs[i]) == worst)
            raise WireDecodeError(
                pos + 12 * k,
                f"operation {k} has {worst} inputs or outputs, above the limit of "
                f"{MAX_OPERATION_ARGUMENTS}",
                _L,
            )
        records_at = pos
        pos += 12 * n_oper
        indexes = _u32_array(
            buf, pos, end, sum(n_ins) + sum(n_outs), "operation operand indexes", records_at
        )
        pos += 4 * len(indexes)
        k = 0
        op_append = operations.append
        new_operation = _new_operation
        for t, a, b in zip(flat[0::3], n_ins, n_outs):
            m = k + a
            op_append(new_operation(t, indexes[k:m], indexes[m : m + b]))
            k = m + b

    inputs = _u32_array(buf, pos, end, n_in, "subgraph input indexes")
    pos += 4 * n_in
    outputs = _u32_array(buf, pos, end, n_out, "subgraph output indexes")
    pos += 4 * n_out
    return Subgraph(tuple(operands), tuple(operations), inputs, outputs), pos


class _PendingPool(NamedTuple):
    offset: int  # where the pool's record starts, for error messages
    handle_index: int
    size: int
    name: str


def _memory_pool(buf: bytes, pos: int, end: int) -> tuple[_PendingPool, int]:
    if end - pos < _MEMORY_POOL_MIN:
        raise _truncated(pos, _MEMORY_POOL_MIN, end, "memory pool")
    handle_index, size = _MEMORY_POOL.unpack_from(buf, pos)
    name, after = _string(buf, pos + _MEMORY_POOL.size, end, MAX_STRING_BYTES, "memory name")
    return _PendingPool(pos, handle_index, size, name), after


def _resolve(pending: _PendingPool, resolver: Resolver) -> Memory:
    if pending.handle_index == NO_HANDLE:
        return Memory(pending.name, pending.size, None)
    try:
        return resolver(pending.handle_index, pending.name, pending.size)
    except WireDecodeError as e:
        raise WireDecodeError(pending.offset, e.reason, e.failure) from None


def _decode_model_body(buf: bytes, pos: int, end: int, resolver: Resolver) -> tuple[Model, int]:
    if end - pos < 8:
        raise _truncated(pos, 8, end, "model header")
    flags, n_ref = _U32x2.unpack_from(buf, pos)
    if flags & ~1:
        raise WireDecodeError(pos, f"unknown model flag bits {flags:#x}", _B)
    if n_ref > MAX_SUBGRAPHS - 1:
        raise WireDecodeError(
            pos + 4,
            f"referenced subgraph count {n_ref} exceeds the limit of {MAX_SUBGRAPHS - 1}",
            _L,
        )
    pos += 8
    if 16 * n_ref > end - pos:
        raise WireDecodeError(
            pos - 4,
            f"{n_ref} referenced subgraphs need at least {16 * n_ref} bytes but {end - pos} remain",
            _T,
        )
    budget = [MAX_OPERANDS, MAX_OPERATIONS]
    main, pos = _decode_subgraph(buf, pos, end, budget)
    referenced = []
    for _ in range(n_ref):
        sg, pos = _decode_subgraph(buf, pos, end, budget)
        referenced.append(sg)

    n = _count(buf, pos, end, MAX_OPERAND_VALUES_BYTES, 1, "operand values byte")
    pos += 4
    values = buf[pos : pos + n]
    pos += n

    n_pools = _count(buf, pos, end, MAX_POOLS, _MEMORY_POOL_MIN, "pool")
    pos += 4
    pending = []
    for _ in range(n_pools):
        p, pos = _memory_pool(buf, pos, end)
        pending.append(p)

    n_ext = _count(buf, pos, end, MAX_EXTENSION_NAMES, _EXTENSION_NAME.size, "extension name")
    pos += 4
    extensions = []
    for _ in range(n_ext):
        if end - pos < 6:
            raise _truncated(pos, 6, end, "extension name entry")
        prefix = _U16.unpack_from(buf, pos)[0]
        name, pos = _string(buf, pos + 2, end, MAX_STRING_BYTES, "extension name")
        extensions.append(ExtensionNameAndPrefix(name, prefix))

    pools = tuple(_resolve(p, resolver) for p in pending)
    model = Model(main, tuple(referenced), values, pools, bool(flags & 1), tuple(extensions))
    return model, pos


def _decode_request_body(buf: bytes, pos: int, end: int, resolver: Resolver) -> tuple[Request, int]:
    if end - pos < 12:
        raise _truncated(pos, 12, end, "request header")
    n_in, n_out, n_pools = _U32x3.unpack_from(buf, pos)
    if n_in + n_out > MAX_REQUEST_ARGUMENTS:
        raise WireDecodeError(
            pos,
            f"request argument count {n_in} + {n_out} exceeds the limit of {MAX_REQUEST_ARGUMENTS}",
            _L,
        )
    if n_pools > MAX_POOLS:
        raise WireDecodeError(pos + 8, f"pool count {n_pools} exceeds the limit of {MAX_POOLS}", _L)
    pos += 12
    n_args = n_in + n_out
    least = n_args * (1 + _ARGUMENT.size) + n_pools * 8
    if least > end - pos:
        raise WireDecodeError(
            pos - 12,
            f"request of {n_args} arguments and {n_pools} pools needs at least {least} bytes "
            f"but {end - pos} remain",
            _T,
        )
    ranks_at = pos
    ranks = _ranks(buf, pos, end, n_args, "request argument")
    pos += n_args
    rec_pos = pos
    pos += n_args * _ARGUMENT.size
    dims_all = _u32_array(buf, pos, end, sum(ranks), "request argument dimensions", ranks_at)
    pos += 4 * len(dims_all)
    args = []
    d = 0
    records = _ARGUMENT.iter_unpack(buf[rec_pos : rec_pos + n_args * _ARGUMENT.size])
    for k, (r, (no_value, pi, off, ln)) in enumerate(zip(ranks, records)):
        if no_value > 1:
            raise WireDecodeError(
                rec_pos + k * _ARGUMENT.size, f"argument {k}: hasNoValue is {no_value}", _B
            )
        args.append(
            _new_argument(
                no_value == 1,
                _new_location(pi, off, ln) if pi or off or ln else NO_LOCATION,
                dims_all[d : d + r],
            )
        )
        d += r

    pending: list[_PendingPool | BufferToken] = []
    for _ in range(n_pools):
        if end - pos < 8:
            raise _truncated(pos, 8, end, "request pool")
        tag = _U32.unpack_from(buf, pos)[0]
        if tag == _POOL_MEMORY:
            p, pos = _memory_pool(buf, pos + 4, end)
            pending.append(p)
        elif tag == _POOL_TOKEN:
            pending.append(BufferToken(_U32.unpack_from(buf, pos + 4)[0]))
            pos += 8
        else:
            raise WireDecodeError(pos, f"unknown request pool tag {tag}", _B)
    pools = tuple(p if isinstance(p, BufferToken) else _resolve(p, resolver) for p in pending)
    return Request(tuple(args[:n_in]), tuple(args[n_in:]), pools), pos


def _performance(values: Sequence[float]) -> PerformanceInfo:
    return PerformanceInfo(values[0], values[1])


def _decode_capabilities_body(
    buf: bytes, pos: int, end: int, resolver: Resolver
) -> tuple[Capabilities, int]:
    if end - pos < 32:
        raise _truncated(pos, 32, end, "capabilities")
    f = _F32x8.unpack_from(buf, pos)
    pos += 32
    n = _count(buf, pos, end, MAX_OPERAND_PERFORMANCE, _OPERAND_PERF.size, "operand performance")
    pos += 4
    size = n * _OPERAND_PERF.size
    perf = tuple(
        OperandPerformance(t, PerformanceInfo(e, p))
        for t, e, p in _OPERAND_PERF.iter_unpack(buf[pos : pos + size])
    )
    pos += size
    caps = Capabilities(
        _performance(f[0:2]), _performance(f[2:4]), perf, _performance(f[4:6]), _performance(f[6:8])
    )
    return caps, pos


def _decode_result_body(
    buf: bytes, pos: int, end: int, resolver: Resolver
) -> tuple[ExecutionResultMessage, int]:
    if end - pos < _RESULT_HEAD.size:
        raise _truncated(pos, _RESULT_HEAD.size, end, "execution result header")
    status, on_device, in_driver, n = _RESULT_HEAD.unpack_from(buf, pos)
    if n > MAX_OUTPUT_SHAPES:
        raise WireDecodeError(
            pos + 20, f"output shape count {n} exceeds the limit of {MAX_OUTPUT_SHAPES}", _L
        )
    pos += _RESULT_HEAD.size
    if 2 * n + 4 > end - pos:  # rank and isSufficient columns, message length
        raise WireDecodeError(
            pos - 4,
            f"output shape count {n} needs at least {2 * n + 4} bytes but {end - pos} remain",
            _T,
        )
    ranks_at = pos
    ranks = _ranks(buf, pos, end, n, "output shape")
    pos += n
    sufficient = buf[pos : pos + n]
    _flags(sufficient, _BOOL_OK, pos, "isSufficient of output shape")
    pos += n
    dims_all = _u32_array(buf, pos, end, sum(ranks), "output shape dimensions", ranks_at)
    pos += 4 * len(dims_all)
    shapes = []
    d = 0
    for r, s in zip(ranks, sufficient):
        shapes.append(OutputShape(dims_all[d : d + r], s == 1))
        d += r
    message, pos = _string(buf, pos, end, MAX_STATUS_MESSAGE_BYTES, "status message")
    result = ExecutionResultMessage(
        _STATUS.get(status, status), tuple(shapes), Timing(on_device, in_driver), message
    )
    return result, pos


def _roles(buf: bytes, pos: int, end: int, what: str) -> tuple[tuple[BufferRole, ...], int]:
    n = _count(buf, pos, end, MAX_BUFFER_ROLES, _ROLE.size, what)
    pos += 4
    size = n * _ROLE.size
    roles = tuple(BufferRole(m, i, f) for m, i, f in _ROLE.iter_unpack(buf[pos : pos + size]))
    return roles, pos + size


def _decode_allocation_body(
    buf: bytes, pos: int, end: int, resolver: Resolver
) -> tuple[BufferAllocationMessage, int]:
    rank = _count(buf, pos, end, MAX_RANK, 4, "buffer descriptor dimension")
    pos += 4
    dims = _u32_array(buf, pos, end, rank, "buffer descriptor dimensions")
    pos += 4 * rank
    inputs, pos = _roles(buf, pos, end, "input role")
    outputs, pos = _roles(buf, pos, end, "output role")
    return BufferAllocationMessage(BufferDesc(dims), inputs, outputs), pos


_BODY_DECODERS: dict[int, Callable[[bytes, int, int, Resolver], tuple[Any, int]]] = {
    MessageKind.MODEL: _decode_model_body,
    MessageKind.REQUEST: _decode_request_body,
    MessageKind.CAPABILITIES: _decode_capabilities_body,
    MessageKind.EXECUTION_RESULT: _decode_result_body,
    MessageKind.BUFFER_ALLOCATION: _decode_allocation_body,
}


def read_header(data: bytes | bytearray | memoryview) -> tuple[int, MessageKind, int]:
    """Check a message's header: ``(format version, kind, body length)``. Raises
    :class:`WireDecodeError` for a bad magic, an unsupported version, an unknown kind,
    a message over :data:`MAX_MESSAGE_BYTES` or a body length that disagrees with the
    data (truncated or trailing bytes)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    size = len(data)
    if size > MAX_MESSAGE_BYTES:
        raise WireDecodeError(
            0, f"message of {size} bytes exceeds the limit of {MAX_MESSAGE_BYTES}", _L
        )
    if size < 4 or data[:4] != MAGIC:
        if size < 4 and MAGIC.startswith(data):
            raise _truncated(0, HEADER_SIZE, size, "message header")
        raise WireDecodeError(
            0,
            f"not a wire message: magic {data[:4]!r}, expected {MAGIC!r}",
            DecodeFailure.BAD_MAGIC,
        )
    if size < HEADER_SIZE:
        raise _truncated(0, HEADER_SIZE, size, "message header")
    _, version, kind, length = _HEADER.unpack_from(data, 0)
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise WireDecodeError(
            4,
            f"wire format version {version} is not supported (this decoder reads "
            f"{', '.join(map(str, sorted(SUPPORTED_FORMAT_VERSIONS)))})",
            DecodeFailure.UNSUPPORTED_VERSION,
        )
    message_kind = _KINDS.get(kind)
    if message_kind is None:
        raise WireDecodeError(6, f"unknown message kind {kind}", DecodeFailure.UNKNOWN_KIND)
    body = size - HEADER_SIZE
    if length > body:
        raise WireDecodeError(
            8, f"header declares a {length}-byte body but {body} bytes follow", _T
        )
    if length < body:
        raise WireDecodeError(
            HEADER_SIZE + length,
            f"{body - length} bytes follow the {length}-byte body",
            DecodeFailure.TRAILING_BYTES,
        )
    return version, message_kind, length


def read_message(stream: BinaryIO, *, already: bytes = b"", then: int = 1) -> bytes:
    """The bytes of one message read from ``stream`` (``already``: its first bytes, read
    before): the header, then no more than the body length it declares plus ``then``
    bytes (1: enough for :func:`read_header` to report trailing bytes). Whatever does not
    start like a message is returned after its first :data:`HEADER_SIZE` bytes, and a
    declared length over :data:`MAX_MESSAGE_BYTES` reads no body: the decoder says what is
    wrong, and ``/dev/zero`` or an endless pipe cannot fill memory."""
    head = already + stream.read(max(0, HEADER_SIZE - len(already)))
    if len(head) < HEADER_SIZE or head[:4] != MAGIC:
        return head
    (length,) = struct.unpack_from("<I", head, 8)
    if length > MAX_MESSAGE_BYTES - HEADER_SIZE:
        return head
    return head + stream.read(max(0, HEADER_SIZE + length + then - len(head)))


def decode(
    data: bytes | bytearray | memoryview,
    resolver: Resolver | None = None,
    *,
    expected: MessageKind | None = None,
) -> Any:
    """Decode any message: a :class:`Model`, :class:`Request`, :class:`Capabilities`,
    :class:`ExecutionResultMessage` or :class:`BufferAllocationMessage`. With
    ``expected``, a message of another kind is a ``WRONG_KIND`` error."""
    if not isinstance(data, bytes):
        if not isinstance(data, (bytearray, memoryview)):
            raise TypeError(f"decode takes bytes, not {type(data).__name__}")
        data = bytes(data)
    _, kind, _ = read_header(data)
    if expected is not None and kind != expected:
        raise WireDecodeError(
            6,
            f"expected a {expected.name} message, got {kind.name}",
            DecodeFailure.WRONG_KIND,
        )
    end = len(data)
    obj, pos = _BODY_DECODERS[kind](data, HEADER_SIZE, end, resolver or default_resolver)
    if pos != end:
        raise WireDecodeError(
            pos,
            f"{end - pos} bytes follow the end of the {kind.name} body",
            DecodeFailure.TRAILING_BYTES,
        )
    return obj


def decode_model(data: bytes | bytearray | memoryview, resolver: Resolver | None = None) -> Model:
    """Decode a MODEL message; pools come from ``resolver`` (default: no handles)."""
    return decode(data, resolver, expected=MessageKind.MODEL)


def decode_request(
    data: bytes | bytearray | memoryview, resolver: Resolver | None = None
) -> Request:
    """Decode a REQUEST message; memory pools come from ``resolver`` (default: no
    handles); token pools become :class:`BufferToken`."""
    return decode(data, resolver, expected=MessageKind.REQUEST)


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def _limit(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise WireEncodeError(f"{what}: {n} exceeds the wire limit of {limit}")


def _pack_u32s(values: Sequence[int], what: str) -> bytes:
    if not values:
        return b""
    try:
        return struct.pack(f"<{len(values)}I", *values)
    except struct.error:
        bad = next(v for v in values if not (isinstance(v, int) and 0 <= v <= 0xFFFFFFFF))
        raise WireEncodeError(f"{what}: {bad!r} is not a uint32") from None


def _pack_string(text: str, limit: int, what: str) -> bytes:
    try:
        raw = text.encode("utf-8")
    except (UnicodeEncodeError, AttributeError) as e:
        raise WireEncodeError(f"{what}: {text!r} cannot be encoded as UTF-8 ({e})") from None
    _limit(len(raw), limit, f"{what} length")
    return _U32.pack(len(raw)) + raw


def _ranks_column(dims_list: Sequence[Sequence[int]], what: str) -> bytes:
    ranks = [len(d) for d in dims_list]
    if ranks and max(ranks) > MAX_RANK:
        k = next(i for i, r in enumerate(ranks) if r > MAX_RANK)
        raise WireEncodeError(f"{what} {k}: rank {ranks[k]} exceeds the wire limit of {MAX_RANK}")
    return bytes(ranks)


class _Handles:
    """Out-of-band handle table: one index per distinct handle object."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self._index: dict[int, int] = {}

    def index(self, handle: Any) -> int:
        if handle is None:
            return NO_HANDLE
        key = id(handle)
        k = self._index.get(key)
        if k is None:
            k = self._index[key] = len(self.handles)
            self.handles.append(handle)
        return k


def _pack_memory(mem: Memory, handles: _Handles, what: str) -> bytes:
    name = _pack_string(mem.name, MAX_STRING_BYTES, f"{what} name")
    try:
        return _MEMORY_POOL.pack(handles.index(mem.handle), mem.size) + name
    except (struct.error, TypeError):
        raise WireEncodeError(f"{what}: size {mem.size!r} is not a uint64") from None


def _encode_subgraph(sg: Subgraph, out: list[bytes], where: str) -> None:
    operands = sg.operands
    operations = sg.operations
    # The decoder bounds the index lists by MAX_OPERANDS (each names an operand).
    _limit(len(sg.input_indexes), MAX_OPERANDS, f"{where}, input indexes")
    _limit(len(sg.output_indexes), MAX_OPERANDS, f"{where}, output indexes")
    out.append(
        _U32x4.pack(len(operands), len(operations), len(sg.input_indexes), len(sg.output_indexes))
    )
    out.append(_ranks_column([o.dimensions for o in operands], f"{where}, operand"))
    kinds = bytearray(len(operands))
    extras: list[bytes] = []
    dims: list[int] = []
    records: list[bytes] = []
    pack = _OPERAND.pack
    i = 0
    try:
        for i, o in enumerate(operands):
            loc = o.location
            records.append(
                pack(
                    o.type,
                    o.number_of_consumers,
                    o.scale,
                    o.zero_point,
                    o.lifetime,
                    loc.pool_index,
                    loc.offset,
                    loc.length,
                )
            )
            dims += o.dimensions
            extra = o.extra_params
            if extra is None:
                continue
            if isinstance(extra, SymmPerChannelQuantParams):
                kinds[i] = _EXTRA_CHANNEL_QUANT
                n = len(extra.scales)
                _limit(n, MAX_CHANNEL_SCALES, f"{where}, operand {i}: per-channel scales")
                extras.append(_U32x2.pack(extra.channel_dim, n))
                extras.append(struct.pack(f"<{n}f", *extra.scales))
            elif isinstance(extra, (bytes, bytearray, memoryview)):
                kinds[i] = _EXTRA_EXTENSION
                blob = bytes(extra)
                _limit(len(blob), MAX_EXTENSION_PARAMS_BYTES, f"{where}, operand {i}: extraParams")
                extras.append(_U32.pack(len(blob)))
                extras.append(blob)
            else:
                raise WireEncodeError(
                    f"{where}, operand {i}: extraParams of type {type(extra).__name__} "
                    "cannot be encoded"
                )
    except (struct.error, TypeError, OverflowError) as e:
        raise WireEncodeError(f"{where}, operand {i}: {e}") from None
    out.append(bytes(kinds))
    out += records
    out.append(_pack_u32s(dims, f"{where}, operand dimensions"))
    out += extras

    if operations:
        heads: list[int] = []
        indexes: list[int] = []
        for k, op in enumerate(operations):
            _limit(len(op.inputs), MAX_OPERATION_ARGUMENTS, f"{where}, operation {k} inputs")
            _limit(len(op.outputs), MAX_OPERATION_ARGUMENTS, f"{where}, operation {k} outputs")
            heads += (op.type, len(op.inputs), len(op.outputs))
            indexes += op.inputs
            indexes += op.outputs
        out.append(_pack_u32s(heads, f"{where}, operation types"))
        out.append(_pack_u32s(indexes, f"{where}, operation operand indexes"))
    out.append(_pack_u32s(sg.input_indexes, f"{where}, input indexes"))
    out.append(_pack_u32s(sg.output_indexes, f"{where}, output indexes"))


def _frame(kind: MessageKind, parts: list[bytes]) -> bytes:
    body = b"".join(parts)
    _limit(HEADER_SIZE + len(body), MAX_MESSAGE_BYTES, "message size")
    return _HEADER.pack(MAGIC, FORMAT_VERSION, kind, len(body)) + body


def encode_model(model: Model) -> Encoded:
    """Encode a model; ``Encoded.handles`` lists its pools' handles (out of band)."""
    n_sub = 1 + len(model.referenced)
    _limit(n_sub, MAX_SUBGRAPHS, "subgraphs")
    subgraphs = (model.main, *model.referenced)
    _limit(sum(len(sg.operands) for sg in subgraphs), MAX_OPERANDS, "operands in the model")
    _limit(sum(len(sg.operations) for sg in subgraphs), MAX_OPERATIONS, "operations in the model")
    parts = [_U32x2.pack(1 if model.relax_computation_float32_to_float16 else 0, n_sub - 1)]
    _encode_subgraph(model.main, parts, "main subgraph")
    for k, sg in enumerate(model.referenced):
        _encode_subgraph(sg, parts, f"subgraph {k}")
    values = bytes(model.operand_values)
    _limit(len(values), MAX_OPERAND_VALUES_BYTES, "operandValues bytes")
    parts += (_U32.pack(len(values)), values)
    _limit(len(model.pools), MAX_POOLS, "pools")
    handles = _Handles()
    parts.append(_U32.pack(len(model.pools)))
    for k, mem in enumerate(model.pools):
        if not isinstance(mem, Memory):
            raise WireEncodeError(f"pool {k}: a model pool must be a Memory, not {mem!r}")
        parts.append(_pack_memory(mem, handles, f"pool {k}"))
    _limit(len(model.extension_name_to_prefix), MAX_EXTENSION_NAMES, "extension names")
    parts.append(_U32.pack(len(model.extension_name_to_prefix)))
    for k, ext in enumerate(model.extension_name_to_prefix):
        try:
            parts.append(_U16.pack(ext.prefix))
        except struct.error:
            raise WireEncodeError(f"extension {k}: prefix {ext.prefix!r} is not a uint16") from None
        parts.append(_pack_string(ext.name, MAX_STRING_BYTES, f"extension {k} name"))
    return Encoded(_frame(MessageKind.MODEL, parts), tuple(handles.handles))


def encode_request(request: Request) -> Encoded:
    """Encode a request; ``Encoded.handles`` lists its memory pools' handles."""
    args = (*request.inputs, *request.outputs)
    _limit(len(args), MAX_REQUEST_ARGUMENTS, "request arguments")
    _limit(len(request.pools), MAX_POOLS, "pools")
    parts = [
        _U32x3.pack(len(request.inputs), len(request.outputs), len(request.pools)),
        _ranks_column([a.dimensions for a in args], "request argument"),
    ]
    dims: list[int] = []
    for k, a in enumerate(args):
        loc = a.location
        try:
            parts.append(
                _ARGUMENT.pack(1 if a.has_no_value else 0, loc.pool_index, loc.offset, loc.length)
            )
        except (struct.error, TypeError) as e:
            raise WireEncodeError(f"request argument {k}: {e}") from None
        dims += a.dimensions
    parts.append(_pack_u32s(dims, "request argument dimensions"))
    handles = _Handles()
    for k, pool in enumerate(request.pools):
        if isinstance(pool, BufferToken):
            try:
                parts.append(_U32x2.pack(_POOL_TOKEN, pool.token))
            except struct.error:
                raise WireEncodeError(f"pool {k}: token {pool.token!r} is not a uint32") from None
        elif isinstance(pool, Memory):
            parts.append(_U32.pack(_POOL_MEMORY))
            parts.append(_pack_memory(pool, handles, f"pool {k}"))
        else:
            raise WireEncodeError(f"pool {k}: {pool!r} is neither a Memory nor a BufferToken")
    return Encoded(_frame(MessageKind.REQUEST, parts), tuple(handles.handles))


def _encode_capabilities(caps: Capabilities) -> list[bytes]:
    perf = caps.operand_performance
    _limit(len(perf), MAX_OPERAND_PERFORMANCE, "operand performance entries")
    try:
        parts = [
            _F32x8.pack(
                caps.relaxed_float32_to_float16_performance_scalar.exec_time,
                caps.relaxed_float32_to_float16_performance_scalar.power_usage,
                caps.relaxed_float32_to_float16_performance_tensor.exec_time,
                caps.relaxed_float32_to_float16_performance_tensor.power_usage,
                caps.if_performance.exec_time,
                caps.if_performance.power_usage,
                caps.while_performance.exec_time,
                caps.while_performance.power_usage,
            ),
            _U32.pack(len(perf)),
        ]
        parts += (_OPERAND_PERF.pack(p.type, p.info.exec_time, p.info.power_usage) for p in perf)
    except (struct.error, TypeError, OverflowError) as e:
        raise WireEncodeError(f"capabilities: {e}") from None
    return parts


def _encode_result(result: ExecutionResultMessage) -> list[bytes]:
    shapes = result.output_shapes
    _limit(len(shapes), MAX_OUTPUT_SHAPES, "output shapes")
    try:
        parts = [
            _RESULT_HEAD.pack(
                result.status,
                result.timing.time_on_device,
                result.timing.time_in_driver,
                len(shapes),
            ),
            _ranks_column([s.dimensions for s in shapes], "output shape"),
            bytes(1 if s.is_sufficient else 0 for s in shapes),
        ]
    except (struct.error, TypeError) as e:
        raise WireEncodeError(f"execution result: {e}") from None
    dims = [d for s in shapes for d in s.dimensions]
    parts.append(_pack_u32s(dims, "output shape dimensions"))
    parts.append(_pack_string(result.message, MAX_STATUS_MESSAGE_BYTES, "status message"))
    return parts


def _encode_roles(roles: Sequence[BufferRole], what: str) -> list[bytes]:
    _limit(len(roles), MAX_BUFFER_ROLES, what)
    try:
        return [_U32.pack(len(roles))] + [
            _ROLE.pack(r.model_index, r.io_index, r.frequency) for r in roles
        ]
    except (struct.error, TypeError, OverflowError) as e:  # a frequency beyond float32
        raise WireEncodeError(f"{what}: {e}") from None


def _encode_allocation(msg: BufferAllocationMessage) -> list[bytes]:
    dims = msg.desc.dimensions
    _limit(len(dims), MAX_RANK, "buffer descriptor rank")
    return [
        _U32.pack(len(dims)),
        _pack_u32s(dims, "buffer descriptor dimensions"),
        *_encode_roles(msg.input_roles, "input roles"),
        *_encode_roles(msg.output_roles, "output roles"),
    ]


def encode(
    obj: Model | Request | Capabilities | ExecutionResultMessage | BufferAllocationMessage,
) -> Encoded:
    """Encode any message object (the kind follows from its type)."""
    if isinstance(obj, Model):
        return encode_model(obj)
    if isinstance(obj, Request):
        return encode_request(obj)
    if isinstance(obj, Capabilities):
        return Encoded(_frame(MessageKind.CAPABILITIES, _encode_capabilities(obj)))
    if isinstance(obj, ExecutionResultMessage):
        return Encoded(_frame(MessageKind.EXECUTION_RESULT, _encode_result(obj)))
    if isinstance(obj, BufferAllocationMessage):
        return Encoded(_frame(MessageKind.BUFFER_ALLOCATION, _encode_allocation(obj)))
    raise TypeError(f"no wire encoding for {type(obj).__name__}")


__all__ = [
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "LIMITS",
    "MAGIC",
    "MAX_BUFFER_ROLES",
    "MAX_CHANNEL_SCALES",
    "MAX_EXTENSION_NAMES",
    "MAX_EXTENSION_PARAMS_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_OPERANDS",
    "MAX_OPERAND_PERFORMANCE",
    "MAX_OPERAND_VALUES_BYTES",
    "MAX_OPERATIONS",
    "MAX_OPERATION_ARGUMENTS",
    "MAX_OUTPUT_SHAPES",
    "MAX_POOLS",
    "MAX_RANK",
    "MAX_REQUEST_ARGUMENTS",
    "MAX_STATUS_MESSAGE_BYTES",
    "MAX_STRING_BYTES",
    "MAX_SUBGRAPHS",
    "NO_HANDLE",
    "SUPPORTED_FORMAT_VERSIONS",
    "BufferAllocationMessage",
    "DecodeFailure",
    "Encoded",
    "ExecutionResultMessage",
    "MessageKind",
    "Resolver",
    "WireDecodeError",
    "WireEncodeError",
    "decode",
    "decode_model",
    "decode_request",
    "default_resolver",
    "encode",
    "encode_model",
    "encode_request",
    "fd_resolver",
    "handles_resolver",
    "read_header",
]
