"""Compilation cache: what ``prepareModel`` saves and ``prepareModelFromCache`` restores.

The HAL (1.2+) lets a driver cache a compilation in files the runtime owns: the driver
reports how many model-cache and data-cache files it needs
(``getNumberOfCacheFilesNeeded``); ``prepareModel`` receives that many open file
descriptors and a 32-byte token naming the compilation, and may write them;
``prepareModelFromCache`` receives the same descriptors and token later, perhaps in
another process, and must either return a prepared model that computes exactly what the
original did or fail with GENERAL_FAILURE — never a wrong model, never a crash, whatever
the files hold.

The reference uses one file of each kind:

* the **model cache** holds the model, wire-encoded (:mod:`driver.wire`, constants of
  ``operandValues`` included), the execution preference and priority the compilation
  was made with (``prepareModelFromCache`` has no priority argument: it is part of the
  cache), and the executor's static plan (:class:`driver.executor.StepFacts` per step:
  which steps need run-time shape inference and re-validation, the shapes inferred
  ahead of time, the optional inputs);
* the **data cache** holds the bytes of the model's memory pools (``CONSTANT_REFERENCE``
  weights), which the wire format carries as handles only.

Restoring skips what the first preparation proved: model validation and the
executor's static validate/infer pass over every operation (see
``benchmarks/bench_cache.py`` for the gain). That is sound only for bytes this driver
wrote, so every file starts with a header that binds it to one compilation:

=========  =====  ======================================================================
offset     type   field
=========  =====  ======================================================================
0          4      magic ``b"NNFC"``
4          u16    format version (:data:`FORMAT_VERSION`)
6          u8     role: 1 model cache, 2 data cache (swapped files are refused)
7          u8     reserved, 0
8          32     the token
40         u64    body length (exactly the bytes after the header)
48         32     model cache: HMAC of the data cache file (binds the pair); data: zeros
80         32     HMAC-SHA256 over the header (this field zeroed) and the body
112        u16    length of the driver identity, then that many bytes of UTF-8
=========  =====  ======================================================================

The HMAC key is derived from a device secret, the driver identity (version string, HAL
version and the configuration that changes results) and the token, so a file written
for another token, by another driver version or configuration, or corrupted, truncated
or extended in any byte, fails verification; a mismatch in a plain header field is
reported by name first. Only verified bytes are parsed, and parsing still checks every
count against the bytes that remain.

Trust: with the default secret (public, so caches survive process restarts and work
across processes) verification proves integrity — the bytes are exactly what this
driver wrote for this token — but not authorship: someone who knows the default secret
can forge a cache. A device that must resist deliberate forgery (Android's threat: a
malicious app rewriting its own cache files to attack a driver running elsewhere)
configures a private secret (``DeviceConfig(cache_secret=...)``), the analogue of the
driver-private checksum store Android recommends.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from driver import wire
from driver.executor import StepFacts
from driver.hal.types import Memory, MemoryHandle, Model

MAGIC = b"NNFC"
FORMAT_VERSION = 1
TOKEN_SIZE = 32
NUM_MODEL_CACHE_FILES = 1
NUM_DATA_CACHE_FILES = 1

ROLE_MODEL = 1
ROLE_DATA = 2

DEFAULT_SECRET = b"nnfuzz reference driver: public compilation-cache secret"
"""Used when a device configures none (see the module docstring on trust)."""

MAX_IDENTITY_BYTES = 1024
MAX_MODEL_CACHE_BYTES = wire.MAX_MESSAGE_BYTES + (1 << 26)
"""A wire model plus its plan; a larger file is refused before it is read."""
MAX_DATA_CACHE_BYTES = 1 << 32
"""The pools of one model (each at most :data:`driver.memory.MAX_POOL_SIZE`)."""

_FIXED = struct.Struct("<4sHBB32sQ32s32sH")
_TAG_OFFSET = 4 + 2 + 1 + 1 + 32 + 8 + 32
_TAG_SIZE = 32
_NO_SHAPE = 0xFFFFFFFF
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class CacheError(Exception):
    """A cache file that cannot be used (the device returns GENERAL_FAILURE)."""


@dataclass(frozen=True)
class CacheEntry:
    """What one compilation's cache holds."""

    model: Model
    facts: dict[int | None, tuple[StepFacts, ...]]
    preference: int
    priority: int


# ---------------------------------------------------------------------------------------
# Keys and headers
# ---------------------------------------------------------------------------------------


def cache_key(secret: bytes, identity: str, token: bytes) -> bytes:
    """The HMAC key of one compilation's files."""
    material = b"nnfuzz compilation cache\0" + identity.encode() + b"\0" + bytes(token)
    return hmac.new(secret, material, hashlib.sha256).digest()


def _header(role: int, token: bytes, body_len: int, bound: bytes, identity: bytes) -> bytes:
    return (
        _FIXED.pack(
            MAGIC, FORMAT_VERSION, role, 0, token, body_len, bound, b"\0" * _TAG_SIZE, len(identity)
        )
        + identity
    )


def _seal(key: bytes, role: int, token: bytes, body: bytes, bound: bytes, identity: str) -> bytes:
    ident = identity.encode()
    if len(ident) > MAX_IDENTITY_BYTES:
        raise ValueError(f"driver identity longer than {MAX_IDENTITY_BYTES} bytes")
    header = bytearray(_header(role, token, len(body), bound, ident))
    mac = hmac.new(key, header, hashlib.sha256)
    mac.update(body)
    header[_TAG_OFFSET : _TAG_OFFSET + _TAG_SIZE] = mac.digest()
    return bytes(header) + body


def _open(
    data: bytes, key: bytes, role: int, token: bytes, identity: str, what: str
) -> tuple[memoryview, bytes, bytes]:
    """Check one file's header and HMAC; returns (body, bound tag, own tag)."""
    if len(data) < _FIXED.size:
        raise CacheError(f"{what}: {len(data)} bytes, shorter than a header")
    magic, version, got_role, reserved, got_token, body_len, bound, tag, ident_len = (
        _FIXED.unpack_from(data)
    )
    if magic != MAGIC:
        raise CacheError(f"{what}: not a compilation cache file (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise CacheError(f"{what}: cache format {version}, this driver reads {FORMAT_VERSION}")
    if got_role != role:
        names = {ROLE_MODEL: "model cache", ROLE_DATA: "data cache"}
        raise CacheError(f"{what}: holds a {names.get(got_role, f'role {got_role}')} file")
    if reserved:
        raise CacheError(f"{what}: reserved header byte is {reserved}")
    if not hmac.compare_digest(got_token, token):
        raise CacheError(f"{what}: written for another token")
    start = _FIXED.size + ident_len
    if len(data) < start:
        raise CacheError(f"{what}: truncated in the driver identity")
    ident = bytes(data[_FIXED.size : start])
    if ident != identity.encode():
        shown = ident.decode("utf-8", "replace")
        raise CacheError(f"{what}: written by driver {shown!r}, this is {identity!r}")
    if len(data) - start != body_len:
        raise CacheError(f"{what}: body is {len(data) - start} bytes, the header says {body_len}")
    header = bytearray(data[:start])
    header[_TAG_OFFSET : _TAG_OFFSET + _TAG_SIZE] = bytes(_TAG_SIZE)
    mac = hmac.new(key, header, hashlib.sha256)
    body = memoryview(data)[start:]
    mac.update(body)
    if not hmac.compare_digest(mac.digest(), tag):
        raise CacheError(f"{what}: checksum mismatch (corrupted, or not written by this driver)")
    return body, bound, tag


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def _encode_facts(facts: dict[int | None, tuple[StepFacts, ...]], n_referenced: int) -> bytes:
    out = [_U32.pack(n_referenced + 1)]
    for key in (None, *range(n_referenced)):
        steps = facts[key]
        out.append(_U32.pack(len(steps)))
        for f in steps:
            out.append(_U32.pack(int(f.dynamic) | int(f.revalidate) << 1))
            optional = sorted(f.optional)
            out.append(struct.pack(f"<I{len(optional)}I", len(optional), *optional))
            out.append(_U32.pack(len(f.static_shapes)))
            for s in f.static_shapes:
                if s is None:
                    out.append(_U32.pack(_NO_SHAPE))
                else:
                    out.append(struct.pack(f"<I{len(s)}Q", len(s), *s))
    return b"".join(out)


def encode_cache(
    entry: CacheEntry, *, token: bytes, identity: str, secret: bytes = DEFAULT_SECRET
) -> tuple[bytes, bytes]:
    """The (model cache, data cache) file contents for ``entry``."""
    from driver.memory import pool_buffer

    if len(token) != TOKEN_SIZE:
        raise ValueError(f"a cache token is {TOKEN_SIZE} bytes, got {len(token)}")
    encoded = wire.encode_model(entry.model)
    data_parts: list[bytes] = []
    placements: list[tuple[int, int]] = []
    offset = 0
    for handle in encoded.handles:
        pool = next(p for p in entry.model.pools if p.handle is handle)
        chunk = bytes(pool_buffer(pool)[: pool.size])
        placements.append((offset, len(chunk)))
        data_parts.append(chunk)
        offset += len(chunk)
    data_body = b"".join(data_parts)
    model_body = b"".join(
        [
            struct.pack("<BBH", entry.preference, entry.priority, 0),
            _U32.pack(len(encoded.data)),
            encoded.data,
            _U32.pack(len(placements)),
            *(struct.pack("<QQ", o, n) for o, n in placements),
            _encode_facts(entry.facts, len(entry.model.referenced)),
        ]
    )
    return seal_bodies(model_body, data_body, token=token, identity=identity, secret=secret)


def seal_bodies(
    model_body: bytes,
    data_body: bytes,
    *,
    token: bytes,
    identity: str,
    secret: bytes = DEFAULT_SECRET,
) -> tuple[bytes, bytes]:
    """Cache files with valid headers and checksums around arbitrary bodies, sealed
    exactly as :func:`encode_cache` seals its own: for fuzzing the body parser behind
    the checksum (what a forger holding the secret could feed the driver)."""
    key = cache_key(secret, identity, token)
    data_file = _seal(key, ROLE_DATA, token, data_body, bytes(_TAG_SIZE), identity)
    bound = data_file[_TAG_OFFSET : _TAG_OFFSET + _TAG_SIZE]
    return _seal(key, ROLE_MODEL, token, model_body, bound, identity), data_file


def bodies(model_file: bytes, data_file: bytes) -> tuple[bytes, bytes]:
    """The bodies of two cache files (no checks: for tests and fuzz seeds)."""
    out = []
    for f in (model_file, data_file):
        ident_len = _FIXED.unpack_from(f)[-1]
        out.append(bytes(f[_FIXED.size + ident_len :]))
    return out[0], out[1]


# ---------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview):
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise CacheError(f"model cache: truncated at body offset {self.pos} (need {n} bytes)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: struct.Struct) -> tuple:
        return fmt.unpack(self.take(fmt.size))

    def u32(self) -> int:
        return self.unpack(_U32)[0]

    def u32s(self, n: int) -> tuple[int, ...]:
        if n > (len(self.buf) - self.pos) // 4:
            raise CacheError(f"model cache: count {n} at body offset {self.pos} is too large")
        return struct.unpack(f"<{n}I", self.take(4 * n))


class _CachedPool(MemoryHandle):
    """A model pool restored from the data cache: a read-only view of its bytes."""

    __slots__ = ("_view",)

    def __init__(self, view: memoryview):
        self._view = view.toreadonly()
        self.fd = -1

    def buffer(self) -> memoryview:
        return self._view


def _decode_facts(r: _Reader, model: Model) -> dict[int | None, tuple[StepFacts, ...]]:
    # One unpack per field straight from the buffer: this loop is most of what restoring
    # a plan costs.
    buf, pos, end = r.buf, r.pos, len(r.buf)
    unpack_u32 = _U32.unpack_from

    def fail(what: str) -> CacheError:
        return CacheError(f"model cache: the plan {what} (body offset {pos})")

    def u32() -> int:
        nonlocal pos
        if pos + 4 > end:
            raise fail("is truncated")
        pos += 4
        return unpack_u32(buf, pos - 4)[0]

    def array(code: str, size: int, n: int) -> tuple[int, ...]:
        nonlocal pos
        if n > (end - pos) // size:
            raise fail("is truncated")
        pos += size * n
        return struct.unpack_from(f"<{n}{code}", buf, pos - size * n)

    subgraphs = (model.main, *model.referenced)
    if u32() != len(subgraphs):
        raise fail("does not match the model's subgraphs")
    facts: dict[int | None, tuple[StepFacts, ...]] = {}
    for key, sg in zip((None, *range(len(model.referenced))), subgraphs):
        if u32() != len(sg.operations):
            raise fail("does not match the model's operations")
        steps = []
        for op in sg.operations:
            flags = u32()
            if flags & ~3:
                raise fail(f"has bad step flags {flags:#x}")
            optional = frozenset(array("I", 4, u32()))
            if u32() != len(op.outputs):
                raise fail("does not match an operation's outputs")
            shapes: list[tuple[int, ...] | None] = []
            for _ in op.outputs:
                rank = u32()
                if rank == _NO_SHAPE:
                    shapes.append(None)
                elif rank > wire.MAX_RANK:
                    raise fail(f"has a shape of rank {rank}")
                else:
                    shapes.append(array("Q", 8, rank))
            steps.append(StepFacts(bool(flags & 1), bool(flags & 2), tuple(shapes), optional))
        facts[key] = tuple(steps)
    r.pos = pos
    return facts


class _OpenedModelCache:
    """A model cache file whose header and checksum verified: what it says about the
    compilation, and the data cache file it is bound to (checked by :meth:`entry`)."""

    def __init__(self, model_file: bytes, *, token: bytes, identity: str, secret: bytes):
        if not isinstance(token, (bytes, bytearray)) or len(token) != TOKEN_SIZE:
            raise CacheError(f"the token must be {TOKEN_SIZE} bytes")
        self.token = bytes(token)
        self.identity = identity
        self.key = cache_key(secret, identity, self.token)
        body, self.data_tag, _ = _open(
            model_file, self.key, ROLE_MODEL, self.token, identity, "model cache"
        )
        self.reader = r = _Reader(body)
        self.preference, self.priority, reserved = r.unpack(struct.Struct("<BBH"))
        if reserved:
            raise CacheError("model cache: reserved field is not 0")
        self.model_bytes = r.take(r.u32())
        n_pools = r.u32()
        if n_pools > (len(body) - r.pos) // 16:
            raise CacheError(f"model cache: {n_pools} pools do not fit")
        self.placements = [r.unpack(struct.Struct("<QQ")) for _ in range(n_pools)]

    @property
    def data_file_size(self) -> int:
        """The size of the data cache file this model cache was written with (its header,
        then the pools back to back): a larger file is refused unread."""
        body = max((offset + size for offset, size in self.placements), default=0)
        return _FIXED.size + len(self.identity.encode()) + body

    def entry(self, data_file: bytes) -> CacheEntry:
        """The entry, given the bound data cache file (:class:`CacheError` if not)."""
        data_body, _, own_tag = _open(
            data_file, self.key, ROLE_DATA, self.token, self.identity, "data cache"
        )
        if not hmac.compare_digest(self.data_tag, own_tag):
            raise CacheError("data cache: belongs to another compilation than the model cache")
        placements = self.placements
        for offset, size in placements:
            if offset + size > len(data_body):
                raise CacheError("data cache: a pool lies beyond the end of the file")

        def resolve(handle_index: int, name: str, size: int) -> Memory:
            if handle_index >= len(placements):
                raise wire.WireDecodeError(0, f"pool handle {handle_index} is not in the cache")
            offset, length = placements[handle_index]
            if length != size:
                raise wire.WireDecodeError(
                    0, f"pool {handle_index} holds {length} bytes, not {size}"
                )
            return Memory(name, size, _CachedPool(data_body[offset : offset + length]))

        try:
            model = wire.decode_model(bytes(self.model_bytes), resolve)
        except wire.WireDecodeError as e:
            raise CacheError(f"model cache: the model does not decode: {e}") from None
        r = self.reader
        facts = _decode_facts(r, model)
        if r.pos != len(r.buf):
            raise CacheError(f"model cache: {len(r.buf) - r.pos} bytes after the plan")
        return CacheEntry(model, facts, self.preference, self.priority)


def decode_cache(
    model_file: bytes,
    data_file: bytes,
    *,
    token: bytes,
    identity: str,
    secret: bytes = DEFAULT_SECRET,
) -> CacheEntry:
    """The entry the two files hold, or :class:`CacheError` saying why not."""
    opened = _OpenedModelCache(model_file, token=token, identity=identity, secret=secret)
    return opened.entry(data_file)


# ---------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------


def write_file(fd: int, data: bytes) -> None:
    """Replace the contents of the open file ``fd`` by ``data`` (positional writes, so
    the descriptor's offset, which the runtime may share, is left alone)."""
    os.ftruncate(fd, 0)
    view = memoryview(data)
    done = 0
    while done < len(view):
        n = os.pwrite(fd, view[done:], done)
        if n <= 0:
            raise OSError(f"short write to cache file descriptor {fd}")
        done += n


def read_file(fd: int, limit: int, what: str = "cache file") -> bytes | bytearray:
    """The whole contents of the open file ``fd`` (``what``, for messages), refusing more
    than ``limit`` bytes before reading them."""
    if isinstance(fd, bool) or not isinstance(fd, int):
        raise CacheError(f"cache file descriptor {fd!r} is not an int")
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise CacheError(f"{what}: file of {size} bytes exceeds the {limit}-byte limit")
        data = bytearray(size)  # read in place: no second copy of a large file
        view = memoryview(data)
        done = 0
        while done < size:
            n = os.preadv(fd, [view[done : done + (1 << 24)]], done)
            if not n:
                break  # the file shrank: the header checks will notice
            done += n
    except OSError as e:
        raise CacheError(f"{what}: cannot read file descriptor {fd}: {e.strerror or e}") from None
    view.release()
    del data[done:]
    return data


def check_fds(model_cache: Sequence[int], data_cache: Sequence[int]) -> None:
    if len(model_cache) != NUM_MODEL_CACHE_FILES or len(data_cache) != NUM_DATA_CACHE_FILES:
        raise CacheError(
            f"{len(model_cache)} model and {len(data_cache)} data cache files given; this "
            f"driver uses {NUM_MODEL_CACHE_FILES} and {NUM_DATA_CACHE_FILES}"
        )


def save(
    entry: CacheEntry,
    model_cache: Sequence[int],
    data_cache: Sequence[int],
    *,
    token: bytes,
    identity: str,
    secret: bytes = DEFAULT_SECRET,
) -> None:
    """Write ``entry`` to the cache files (OSError/ValueError/CacheError on failure)."""
    check_fds(model_cache, data_cache)
    model_file, data_file = encode_cache(entry, token=token, identity=identity, secret=secret)
    # Data first: a reader that races with this write sees a model file whose binding
    # does not match the data file (refused), never a half-written model file that
    # verifies.
    write_file(data_cache[0], data_file)
    write_file(model_cache[0], model_file)


def load(
    model_cache: Sequence[int],
    data_cache: Sequence[int],
    *,
    token: bytes,
    identity: str,
    secret: bytes = DEFAULT_SECRET,
) -> CacheEntry:
    """Read and verify the cache files; :class:`CacheError` says why they cannot be used."""
    check_fds(model_cache, data_cache)
    model_file = read_file(model_cache[0], MAX_MODEL_CACHE_BYTES, "model cache")
    opened = _OpenedModelCache(model_file, token=token, identity=identity, secret=secret)
    # The verified model cache says how large its data file is: a larger one (a forged
    # or sparse file) is refused before a byte of it is read.
    limit = min(opened.data_file_size, MAX_DATA_CACHE_BYTES)
    return opened.entry(read_file(data_cache[0], limit, "data cache"))


__all__ = [
    "DEFAULT_SECRET",
    "FORMAT_VERSION",
    "MAGIC",
    "NUM_DATA_CACHE_FILES",
    "NUM_MODEL_CACHE_FILES",
    "TOKEN_SIZE",
    "CacheEntry",
    "CacheError",
    "bodies",
    "cache_key",
    "check_fds",
    "decode_cache",
    "encode_cache",
    "load",
    "read_file",
    "save",
    "seal_bodies",
    "write_file",
]
