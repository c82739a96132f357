#!/usr/bin/env python3
"""memory: memory-domain sequences — allocate, copy_from/copy_to, execute with tokens, free.

The input is a choice stream (:class:`randomgraph.choices.ByteSource`) read as up to 24
steps over the prepared fixture models (:mod:`fuzz.fixtures`) and at most four live
driver buffers:

- ``allocate``: a descriptor (dims as a role's operand, changed, or none) and input and
  output roles (model, io index, frequency — in range or not) over one or two prepared
  models;
- ``copy_from`` a harness pool (right size, off by one, or arbitrary; dims given or not);
- ``copy_to`` a harness pool (right size or not);
- ``execute`` a fixture with some arguments in driver buffers (live tokens, stale tokens
  of freed buffers, or made-up ones) and the rest in harness pools, on the synchronous
  path;
- ``free``: drop a buffer (its token must stop working).

Every call must return a HAL status, and the HAL's memory-domain rules are checked where
they are unconditional: a buffer that received ``copy_from`` data and was not written by
an execution since gives exactly those bytes back from ``copy_to``; an execution using
the token of a freed buffer fails; execution results follow the HAL's rules.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from driver.hal.types import (
    BufferDesc,
    BufferRole,
    BufferToken,
    DataLocation,
    ErrorStatus,
    Memory,
    Request,
    RequestArgument,
    is_scalar_type,
    non_extension_size_of_data,
)
from driver.memory import SUPPORTED_MEMORY_NAMES
from fuzz import harness
from fuzz.fixtures import SharedPools
from fuzz.harness import ContractViolation, check_execution, check_status
from fuzz.targets.request import prepared_fixtures
from randomgraph.choices import ByteSource, ChoiceSource

MAX_LEN = 1024
MAX_STEPS = 24
MAX_BUFFERS = 4
LOOP_TIMEOUT_NS = 2_000_000
STEPS = ("allocate", "copy_from", "copy_to", "execute", "free")
FREQUENCIES = (1.0, 0.5, 1e-6, 0.0, -1.0, 1.5, float("nan"))

_POOLS = SharedPools(count=3)
_PATTERN = bytes(range(1, 256)) * (_POOLS.capacity // 255 + 2)
"""Non-zero bytes that ``copy_from`` copies from (rotated per copy): from a pool of
zeros, a ``copy_to`` that wrote nothing gave back "the same bytes"."""
_COPY_OUTCOMES = frozenset(
    {ErrorStatus.NONE, ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE}
)


@dataclass
class _Live:
    buffer: object
    token: int
    size: int  # bytes of the role operand's fully known dims, else 0
    dims: tuple[int, ...]
    copied: bytes | None = None  # what copy_from put there, while no execution wrote it


def _role_operand(model, role_is_output: bool, io_index: int):
    main = model.main
    io = main.output_indexes if role_is_output else main.input_indexes
    return main.operands[io[io_index]] if 0 <= io_index < len(io) else None


class _Session:
    def __init__(self, source: ChoiceSource):
        self.src = source
        self.dev = harness.device()
        self.fixtures = [(m, p) for m, p in prepared_fixtures() if p is not None]
        self.live: list[_Live] = []
        self.freed: list[int] = []
        self.copies = 0

    def draw(self, n: int) -> int:
        return self.src.draw(n)

    # --- steps ------------------------------------------------------------------------
    def allocate(self) -> None:
        picked = [self.fixtures[self.draw(len(self.fixtures))] for _ in range(1 + self.draw(2))]
        models = [p for _, p in picked]
        roles: tuple[list[BufferRole], list[BufferRole]] = ([], [])
        first = None
        for _ in range(1 + self.draw(3)):
            is_output = bool(self.draw(2))
            m = self.draw(len(models) + 1)  # len(models): out of range
            model = picked[m][0] if m < len(models) else None
            n_io = (
                len(model.main.output_indexes if is_output else model.main.input_indexes)
                if model
                else 1
            )
            io = self.draw(n_io + 1)  # n_io: out of range
            roles[is_output].append(BufferRole(m, io, FREQUENCIES[self.draw(len(FREQUENCIES))]))
            if first is None and model is not None:
                first = _role_operand(model, is_output, io)
        dims: tuple[int, ...] = ()
        how = self.draw(3)
        if how and first is not None:
            dims = tuple(first.dimensions)
            if how == 2 and dims:
                k = self.draw(len(dims))
                dims = (*dims[:k], (0, 1, 2, 7, 1 << 20)[self.draw(5)], *dims[k + 1 :])
        status, buffer, token = self.dev.allocate(BufferDesc(dims), models, roles[0], roles[1])
        check_status(status, _COPY_OUTCOMES, "allocate", self.dev)
        if status != ErrorStatus.NONE:
            return
        if buffer is None or not isinstance(token, int) or token <= 0:
            raise ContractViolation(
                f"allocate returned NONE with buffer {buffer!r}, token {token!r}"
            )
        if len(self.live) >= MAX_BUFFERS:
            self.live.pop(0)
        size = 0
        if first is not None and not is_scalar_type(first.type):
            known = tuple(d for d in (dims or first.dimensions))
            if known and 0 not in known:
                size = non_extension_size_of_data(first.type, known)
        self.live.append(
            _Live(buffer, token, size, dims or tuple(first.dimensions if first else ()))
        )

    def _pool(self, k: int, size: int) -> Memory:
        # Now and then a memory type the reference does not map.
        name = "hardware_buffer" if self.draw(8) == 0 else "ashmem"
        return Memory(name, size, _POOLS.handles[k])

    def _size(self, right: int) -> int:
        return (right, right, max(0, right - 1), right + 1, 0, _POOLS.capacity + 1)[self.draw(6)]

    def copy_from(self) -> None:
        if not self.live:
            return
        b = self.live[self.draw(len(self.live))]
        size = self._size(b.size)
        dims = b.dims if self.draw(3) else tuple(self.draw(4) for _ in range(self.draw(4)))
        src = self._pool(0, size)
        # Each copy its own bytes, so a copy_to giving back an older copy's shows too.
        self.copies += 1
        start = self.copies % 255
        _POOLS.handles[0].data[:] = _PATTERN[start : start + _POOLS.capacity]
        before = bytes(_POOLS.handles[0].data[:size]) if size <= _POOLS.capacity else None
        status = b.buffer.copy_from(src, dims)
        check_status(status, _COPY_OUTCOMES, "IBuffer::copyFrom", self.dev)
        if status == ErrorStatus.NONE:
            b.copied = before

    def copy_to(self) -> None:
        if not self.live:
            return
        b = self.live[self.draw(len(self.live))]
        size = self._size(len(b.copied) if b.copied is not None else b.size)
        _POOLS.handles[1].data[: min(size, _POOLS.capacity)] = bytes(min(size, _POOLS.capacity))
        dst = self._pool(1, size)
        status = b.buffer.copy_to(dst)
        check_status(status, _COPY_OUTCOMES, "IBuffer::copyTo", self.dev)
        if b.copied is not None and size == len(b.copied) and dst.name in SUPPORTED_MEMORY_NAMES:
            if status != ErrorStatus.NONE:
                raise ContractViolation(
                    f"copy_to of {size} bytes copied in by copy_from returned {status.name}"
                )
            got = bytes(_POOLS.handles[1].data[:size])
            if got != b.copied:
                raise ContractViolation("copy_to did not give back the bytes of copy_from")

    def execute(self) -> None:
        model, prepared = self.fixtures[self.draw(len(self.fixtures))]
        main = model.main
        pools: list = [Memory("ashmem", _POOLS.capacity, _POOLS.handles[2])]
        token_pool: dict[int, int] = {}
        written: list[_Live] = []
        stale_used = False

        def argument(idx: int, is_output: bool, offset: int) -> tuple[RequestArgument, int]:
            nonlocal stale_used
            o = main.operands[idx]
            pick = self.draw(4)
            if pick == 0 and (self.live or self.freed):
                choices = [b.token for b in self.live] + self.freed + [0x7FFF]
                token = choices[self.draw(len(choices))]
                if token in self.freed:
                    stale_used = True
                if is_output:
                    written.extend(b for b in self.live if b.token == token)
                if token not in token_pool:
                    token_pool[token] = len(pools)
                    pools.append(BufferToken(token))
                return RequestArgument(False, DataLocation(token_pool[token], 0, 0), ()), offset
            dims = () if is_scalar_type(o.type) else tuple(d or 2 for d in (o.dimensions or (2,)))
            size = non_extension_size_of_data(o.type, dims) if not is_output else 512
            given = dims if dims != o.dimensions and not is_scalar_type(o.type) else ()
            return RequestArgument(False, DataLocation(0, offset, size), given), offset + size

        offset = 0
        inputs, outputs = [], []
        for idx in main.input_indexes:
            arg, offset = argument(idx, False, offset)
            inputs.append(arg)
        for idx in main.output_indexes:
            arg, offset = argument(idx, True, offset)
            outputs.append(arg)
        if offset > _POOLS.capacity:
            return
        request = Request(tuple(inputs), tuple(outputs), tuple(pools))
        result = prepared.execute_synchronously(request, 0, None, LOOP_TIMEOUT_NS)
        status = check_execution(result, len(main.output_indexes), "execution with buffers")
        for b in written:
            b.copied = None  # written (or invalidated) by the execution
        if stale_used and status == ErrorStatus.NONE:
            raise ContractViolation("an execution using a freed buffer's token succeeded")

    def free(self) -> None:
        if self.live:
            b = self.live.pop(self.draw(len(self.live)))
            self.freed.append(b.token)
            del b


def test_one_input(data: bytes) -> None:
    run(ByteSource(data))


def run(source: ChoiceSource) -> None:
    """One session of steps, every decision drawn from ``source`` (a byte source ends
    the session when its bytes run out)."""
    session = _Session(source)
    if not session.fixtures:
        return
    for _ in range(MAX_STEPS):
        if getattr(source, "remaining", 1) == 0:
            break
        getattr(session, STEPS[session.draw(len(STEPS))])()


def main(argv: list[str] | None = None) -> None:
    harness.fuzz_main(test_one_input, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
