"""Memory pools backed by real OS shared memory.

``ashmem`` and ``mmap_fd`` pools are memfd files mapped with mmap, so another process can
map the same bytes from the file descriptor; ``hardware_buffer_blob`` is emulated the same
way (an AHardwareBuffer of BLOB format is a flat byte range). The driver only ever
accesses a pool through :func:`pool_buffer`, which checks the name and the handle.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading

from driver.hal.types import ErrorStatus, HalError, Memory, MemoryHandle

SUPPORTED_MEMORY_NAMES = ("ashmem", "mmap_fd", "hardware_buffer_blob")
"""Names the reference driver maps. ``hardware_buffer`` (non-BLOB) is optional in the HAL
and not supported here: using it gives GENERAL_FAILURE, as the HAL recommends."""

MAX_POOL_SIZE = 1 << 31
"""Largest pool the reference driver maps (2 GiB); larger declared sizes are refused
before anything is allocated."""


class SharedMemory(MemoryHandle):
    """An anonymous shared-memory file (memfd) and its mapping."""

    __slots__ = ("_closed", "_lock", "_map", "fd", "size")

    def __init__(self, size: int, *, fd: int | None = None):
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_POOL_SIZE:
            raise HalError(
                ErrorStatus.INVALID_ARGUMENT,
                f"pool size {size!r} is not an int in [0, {MAX_POOL_SIZE}]",
            )
        self.size = size
        self._lock = threading.Lock()
        self._closed = False
        if fd is None:
            fd = os.memfd_create("nnfuzz-pool", os.MFD_CLOEXEC)
            # The file backs the 1-byte mapping an empty pool still gets (mmap refuses
            # to map past the end of a file).
            os.ftruncate(fd, max(size, 1))
        self.fd = fd
        # mmap of length 0 is an error; keep a 1-byte mapping for empty pools.
        self._map = mmap.mmap(fd, max(size, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    @classmethod
    def from_fd(cls, fd: int, size: int) -> SharedMemory:
        """Map a pool received from another process (the fd is duplicated)."""
        dup = os.dup(fd)
        try:
            return cls(size, fd=dup)
        except BaseException:
            os.close(dup)
            raise

    def buffer(self) -> memoryview:
        return memoryview(self._map)[: self.size]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # A live memoryview may still point into the mapping; the GC unmaps it later.
            with contextlib.suppress(BufferError):
                self._map.close()
            os.close(self.fd)

    def __del__(self):  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()


class BytesHandle(MemoryHandle):
    """A process-private pool (for tests and tools that never cross a process)."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes | bytearray | int):
        self._data = bytearray(data)
        self.fd = -1

    def buffer(self) -> memoryview:
        return memoryview(self._data)


def allocate_shared_memory(size: int, name: str = "ashmem") -> Memory:
    """A new zero-filled pool of ``size`` bytes, mappable by other processes."""
    return Memory(name=name, size=size, handle=SharedMemory(size))


def memory_from_bytes(data: bytes | bytearray | memoryview, name: str = "ashmem") -> Memory:
    mem = allocate_shared_memory(len(data), name)
    mem.handle.buffer()[:] = data
    return mem


def pool_buffer(memory: Memory) -> memoryview:
    """The bytes of a pool, or GENERAL_FAILURE if the driver cannot map it."""
    if memory.name not in SUPPORTED_MEMORY_NAMES:
        raise HalError(ErrorStatus.GENERAL_FAILURE, f"unsupported memory name {memory.name!r}")
    handle = memory.handle
    if not isinstance(handle, MemoryHandle):
        raise HalError(ErrorStatus.GENERAL_FAILURE, f"{memory.name} pool has no valid handle")
    buf = handle.buffer()
    if len(buf) < memory.size:
        raise HalError(
            ErrorStatus.GENERAL_FAILURE,
            f"{memory.name} pool declares {memory.size} bytes but maps {len(buf)}",
        )
    return buf
