"""Memory pools (driver/memory.py) and sync fences (driver/sync.py) on their own; the
device's use of them is in test_device.py."""

from __future__ import annotations

import threading

import pytest

from driver.hal.types import ErrorStatus, HalError, Memory
from driver.memory import (
    MAX_POOL_SIZE,
    SUPPORTED_MEMORY_NAMES,
    BytesHandle,
    allocate_shared_memory,
    pool_buffer,
)
from driver.sync import SyncFence
from driver.testing import status_of

# --- pools -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SUPPORTED_MEMORY_NAMES)
def test_every_supported_pool_maps_its_declared_bytes(name):
    mem = allocate_shared_memory(24, name)
    buf = pool_buffer(mem)
    assert len(buf) == 24 and bytes(buf) == b"\0" * 24
    buf[:3] = b"abc"
    assert bytes(pool_buffer(mem)[:3]) == b"abc"


def test_a_pool_the_driver_cannot_map_is_general_failure():
    # A non-BLOB hardware_buffer (optional in the HAL, unsupported here), a pool without
    # a handle, and a handle mapping fewer bytes than the pool declares.
    unsupported = Memory("hardware_buffer", 16, BytesHandle(16))
    assert status_of(lambda: pool_buffer(unsupported)) == ErrorStatus.GENERAL_FAILURE
    assert status_of(lambda: pool_buffer(Memory("ashmem", 16, None))) == (
        ErrorStatus.GENERAL_FAILURE
    )
    short = Memory("ashmem", 17, BytesHandle(16))
    with pytest.raises(HalError, match="declares 17 bytes but maps 16") as info:
        pool_buffer(short)
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    assert len(pool_buffer(Memory("ashmem", 16, BytesHandle(16)))) == 16


def test_an_empty_pool_maps_no_bytes():
    mem = allocate_shared_memory(0)
    assert mem.size == 0 and len(pool_buffer(mem)) == 0


def test_pools_up_to_2_gib_map_and_larger_ones_are_refused_before_allocating():
    # The file is sparse and the mapping untouched: 2 GiB costs nothing until written.
    assert MAX_POOL_SIZE == 2**31
    largest = allocate_shared_memory(MAX_POOL_SIZE)
    assert largest.size == MAX_POOL_SIZE
    largest.handle.close()
    with pytest.raises(HalError, match="pool size") as info:
        allocate_shared_memory(MAX_POOL_SIZE + 1)
    assert info.value.status == ErrorStatus.INVALID_ARGUMENT


# --- fences ------------------------------------------------------------------------------


def test_a_fence_wakes_its_waiters_and_its_file_descriptor():
    fence = SyncFence()
    assert not fence.is_signalled and not fence.poll_fd(0)
    assert fence.wait(0) == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(fence.wait(5)))
    waiter.start()
    fence.signal()
    waiter.join(5)
    assert waited == [ErrorStatus.NONE]
    assert fence.poll_fd(0) and fence.signalled_at_ns is not None


def test_a_fence_is_signalled_once():
    # A later signal, with or without an error, changes neither the result nor the time.
    ok = SyncFence()
    ok.signal()
    at = ok.signalled_at_ns
    ok.signal(error=True)
    assert ok.wait(0) == ErrorStatus.NONE and ok.signalled_at_ns == at
    failed = SyncFence()
    failed.signal(error=True)
    failed.signal()
    assert failed.wait(0) == ErrorStatus.GENERAL_FAILURE


def test_a_fence_closed_by_its_holder_can_still_be_signalled():
    # The driver signals the fence it returned from executeFenced when the execution
    # ends; the client may have closed its descriptor by then.
    fence = SyncFence()
    fence.close()
    fence.signal(error=True)
    assert fence.wait(0) == ErrorStatus.GENERAL_FAILURE
    fence.close()  # twice is harmless


def test_a_negative_fence_timeout_just_looks():
    # poll() takes a negative timeout as "forever": the fence must not pass it on.
    fence = SyncFence()
    looked = []
    waiter = threading.Thread(target=lambda: looked.append(fence.poll_fd(-1)), daemon=True)
    waiter.start()
    waiter.join(2)
    fence.signal()  # frees a waiter that did block
    waiter.join(2)
    assert looked == [False]
    assert SyncFence().wait(-1) == ErrorStatus.MISSED_DEADLINE_TRANSIENT
