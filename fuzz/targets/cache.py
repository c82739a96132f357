#!/usr/bin/env python3
"""cache: prepare a model from fuzzed compilation-cache files and token.

Input layout: ``flags (1) | token (32) | files``, each file a ``u32`` length then that
many bytes (a length past the end takes what remains).

- flags bits 0-1: number of model-cache files (0-3); bits 2-3: data-cache files (0-3);
  bit 4: forged mode (below); bit 5: a deadline that has already passed.
- files are written to fresh memfds, passed as descriptors, and closed afterwards.

Raw mode hands the files to ``prepare_model_from_cache``: allowed are GENERAL_FAILURE
(anything that is not exactly what the driver wrote for this token), INVALID_ARGUMENT /
MISSED_DEADLINE_PERSISTENT for the deadline, and NONE. A restored model must then be one
the driver could have written — it validates — and it must execute (zero inputs, the
harness's pools) to a status that follows the HAL's rules. Seeds are genuine caches of
the fixture models, so the fuzzer starts from files that verify.

Forged mode takes the two file bodies and seals them the way the reference does, with
its key for this token (the default secret is public, see ``driver/cache.py``), so the
bytes reach the parser behind the checksum: ``decode_cache`` must return an entry or
raise ``CacheError``, nothing else. (A forged cache is not executed: with the public
secret the reference trusts what verifies, by design.)
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import time

from driver import cache as compilation_cache
from driver.hal.types import (
    DataLocation,
    ErrorStatus,
    HalError,
    HalVersion,
    Memory,
    Request,
    RequestArgument,
    is_scalar_type,
    non_extension_size_of_data,
)
from driver.validation import validate_model
from fuzz import harness
from fuzz.fixtures import SharedPools
from fuzz.harness import ContractViolation, check_execution, check_status

MAX_LEN = 16384
TOKEN_SIZE = compilation_cache.TOKEN_SIZE
FORGED = 0x10
DEADLINE_PASSED = 0x20

_POOLS = SharedPools(count=2)
_RESTORE_OUTCOMES = frozenset(
    {
        ErrorStatus.NONE,
        ErrorStatus.GENERAL_FAILURE,
        ErrorStatus.INVALID_ARGUMENT,
        ErrorStatus.MISSED_DEADLINE_PERSISTENT,
    }
)


def parse(data: bytes) -> tuple[int, bytes, list[bytes], list[bytes]]:
    """(flags, token, model-cache files, data-cache files) of an input."""
    flags = data[0] if data else 0
    token = data[1 : 1 + TOKEN_SIZE].ljust(TOKEN_SIZE, b"\0")
    pos = 1 + TOKEN_SIZE
    files = []
    for _ in range((flags & 3) + ((flags >> 2) & 3)):
        (n,) = struct.unpack("<I", data[pos : pos + 4].ljust(4, b"\0"))
        pos += 4
        files.append(data[pos : pos + n])
        pos += n
    n_model = flags & 3
    return flags, token, files[:n_model], files[n_model:]


def build(flags: int, token: bytes, model_files: list[bytes], data_files: list[bytes]) -> bytes:
    """The input that :func:`parse` reads back (the flags' file counts are set here)."""
    flags = (flags & ~0x0F) | len(model_files) | len(data_files) << 2
    parts = [bytes([flags]), token.ljust(TOKEN_SIZE, b"\0")[:TOKEN_SIZE]]
    for f in (*model_files, *data_files):
        parts += [struct.pack("<I", len(f)), f]
    return b"".join(parts)


@contextlib.contextmanager
def _descriptors(files: list[bytes]):
    fds: list[int] = []
    try:
        for content in files:
            fd = os.memfd_create("nnfuzz-cache", os.MFD_CLOEXEC)
            fds.append(fd)
            if content:
                os.pwrite(fd, content, 0)
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


def forge(token: bytes, model_body: bytes, data_body: bytes, identity: str) -> tuple[bytes, bytes]:
    """Cache files with valid checksums around arbitrary bodies, made the way
    ``driver.cache.encode_cache`` seals them (its sealing helpers are internal)."""
    c = compilation_cache
    key = c.cache_key(c.DEFAULT_SECRET, identity, token)
    data_file = c._seal(key, c.ROLE_DATA, token, data_body, bytes(c._TAG_SIZE), identity)
    bound = data_file[c._TAG_OFFSET : c._TAG_OFFSET + c._TAG_SIZE]
    model_file = c._seal(key, c.ROLE_MODEL, token, model_body, bound, identity)
    return model_file, data_file


def _zero_request(model) -> Request | None:
    """All-zero inputs (dims as declared, unknown ones 1) in pool 0, outputs in pool 1."""
    main = model.main
    args, offset = [], 0
    for idx in main.input_indexes:
        o = main.operands[idx]
        dims = () if is_scalar_type(o.type) else tuple(d or 1 for d in (o.dimensions or (1,)))
        size = non_extension_size_of_data(o.type, dims)
        given = dims if dims != o.dimensions else ()
        args.append(RequestArgument(False, DataLocation(0, offset, size), given))
        offset += size
    outs, out_offset = [], 0
    for idx in main.output_indexes:
        o = main.operands[idx]
        size = non_extension_size_of_data(o.type, o.dimensions) or 1024
        outs.append(RequestArgument(False, DataLocation(1, out_offset, size), ()))
        out_offset += size
    if offset > _POOLS.capacity or out_offset > _POOLS.capacity:
        return None
    _POOLS.fill(b"")
    pools = (
        Memory("ashmem", offset, _POOLS.handles[0]),
        Memory("ashmem", out_offset, _POOLS.handles[1]),
    )
    return Request(tuple(args), tuple(outs), pools)


def test_one_input(data: bytes) -> None:
    flags, token, model_files, data_files = parse(data)
    dev = harness.device()
    identity = getattr(dev, "cache_identity", None)
    if flags & FORGED:
        if identity is None:
            return  # forging needs the reference's sealing
        model_body = model_files[0] if model_files else b""
        data_body = data_files[0] if data_files else b""
        model_file, data_file = forge(token, model_body, data_body, identity)
        # The documented rejection is CacheError; anything else escapes as a finding.
        with contextlib.suppress(compilation_cache.CacheError):
            compilation_cache.decode_cache(model_file, data_file, token=token, identity=identity)
        return
    deadline = time.monotonic_ns() - 1 if flags & DEADLINE_PASSED else None
    with _descriptors(model_files) as model_fds, _descriptors(data_files) as data_fds:
        status, prepared = dev.prepare_model_from_cache(deadline, model_fds, data_fds, token)
    check_status(status, _RESTORE_OUTCOMES, "prepare_model_from_cache", dev)
    if (prepared is None) != (status != ErrorStatus.NONE):
        raise ContractViolation(f"prepare_model_from_cache returned {status.name} and {prepared!r}")
    if prepared is None:
        return
    model = getattr(prepared, "model", None)
    if model is not None:
        try:
            validate_model(model, getattr(dev, "version", HalVersion.V1_3))
        except HalError as e:
            raise ContractViolation(f"a cache restored a model the driver never wrote: {e}") from e
        request = _zero_request(model)
        if request is not None:
            result = prepared.execute_synchronously(request, 0, None, 2_000_000)
            check_execution(result, len(model.main.output_indexes), "execution of a restored model")


def main(argv: list[str] | None = None) -> None:
    harness.fuzz_main(test_one_input, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
