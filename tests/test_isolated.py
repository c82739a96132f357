"""Out-of-process drivers: every method crosses the process boundary, pools are shared,
and a driver that crashes or hangs is an outcome (CRASH, HANG) within a bounded time,
after which the harness carries on with a restarted child."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from driver.builder import ModelBuilder, build_request
from driver.device import CollectingCallback, ReferenceDevice
from driver.hal.device import Device
from driver.hal.types import (
    BufferDesc,
    BufferRole,
    BufferToken,
    DataLocation,
    ErrorStatus,
    HalVersion,
    MeasureTiming,
    Memory,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
)
from driver.isolated import OUTCOME_STATUS, IsolatedDevice, Outcome
from driver.memory import BytesHandle, allocate_shared_memory, memory_from_bytes
from driver.partition import PartitionedDevice
from driver.registry import DriverLoadError, load_device
from driver.sync import SyncFence
from tests.drivers import TRIGGER

T = OperandType
Op = OperationType
E = ErrorStatus
F32 = T.TENSOR_FLOAT32
BOUND = 5.0  # seconds within which a crash must be reported (a hang: timeout + this)


def add_model(shape=(2, 3), t=F32):
    b = ModelBuilder()
    x, y = b.add_input(t, shape), b.add_input(t, shape)
    b.add_operation(Op.ADD, [x, y, b.add_scalar(T.INT32, 0)], [b.add_output(t, shape)])
    return b.build()


def feeds(first: float = 1.0):
    return [np.full((2, 3), first, np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)]


def expected(first: float = 1.0) -> bytes:
    return (feeds(first)[0] + feeds(first)[1]).tobytes()


@pytest.fixture(scope="module")
def isolated():
    device = IsolatedDevice("reference", timeout=20)
    yield device
    device.close()


def prepare(device, model):
    status, pm = device.prepare_model(model)
    assert status == E.NONE, device.last_error
    return pm


# --- every method across the boundary --------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"preference": -1},
        {"priority": 2**40},
        {"priority": None},
        {"deadline": 2**70},
        {"deadline": "soon"},
    ],
    ids=["negative-preference", "huge-priority", "none-priority", "huge-deadline", "str-deadline"],
)
def test_bad_prepare_arguments_are_invalid_not_a_transport_crash(isolated, kw):
    status, pm = isolated.prepare_model(add_model(), **kw)
    assert status == E.INVALID_ARGUMENT and pm is None
    assert isolated.last_outcome == Outcome.FAILURE


def test_a_child_started_from_a_short_lived_thread_outlives_it():
    """The child's parent-death signal follows the thread that forked it: a restart
    triggered from a short-lived thread must not tie the new child to that thread."""
    import threading

    with IsolatedDevice("tests.drivers:exiting", timeout=20) as device:
        model = add_model()
        pm = prepare(device, model)
        assert pm.execute_synchronously(build_request(model, feeds(TRIGGER)).request)[0] == (
            E.DEVICE_UNAVAILABLE
        )
        restarted: list = []
        t = threading.Thread(target=lambda: restarted.append(device.prepare_model(model)))
        t.start()
        t.join(30)
        assert restarted and restarted[0][0] == E.NONE and device.restarts == 1
        time.sleep(0.5)  # the thread that started the new child is gone; the child is not
        rb = build_request(model, feeds())
        assert restarted[0][1].execute_synchronously(rb.request)[0] == E.NONE
        assert rb.output_bytes(0) == expected() and device.restarts == 1


def test_queries_cross_the_boundary(isolated):
    assert isinstance(isolated, Device)
    local = ReferenceDevice()
    assert isolated.pid != os.getpid()
    assert isolated.get_capabilities() == local.get_capabilities()
    assert isolated.get_version_string() == local.get_version_string()
    assert isolated.get_type() == local.get_type()
    assert isolated.get_supported_extensions() == local.get_supported_extensions()
    assert isolated.get_number_of_cache_files_needed() == local.get_number_of_cache_files_needed()
    model = add_model()
    assert isolated.get_supported_operations(model) == (E.NONE, [True])
    assert isolated.last_outcome == Outcome.SUCCESS


def test_driver_errors_come_back_as_statuses_with_messages(isolated):
    from dataclasses import replace

    model = add_model()
    bad = replace(model, main=replace(model.main, operations=()))
    assert isolated.get_supported_operations(bad) == (E.INVALID_ARGUMENT, [])
    assert isolated.last_outcome == Outcome.FAILURE and "operation" in isolated.last_error
    pm = prepare(isolated, model)
    rb = build_request(model, feeds())
    short = replace(rb.request, inputs=rb.request.inputs[:1])
    assert pm.execute_synchronously(short)[0] == E.INVALID_ARGUMENT
    assert isolated.last_outcome == Outcome.FAILURE


def test_every_execution_path_across_the_boundary(isolated):
    model = add_model()
    pm = prepare(isolated, model)

    rb = build_request(model, feeds(1))
    status, shapes, timing = pm.execute_synchronously(rb.request, MeasureTiming.YES)
    assert status == E.NONE and shapes[0].dimensions == (2, 3)
    assert timing.time_on_device <= timing.time_in_driver < 10**7
    assert rb.output_bytes(0) == expected(1)

    rb = build_request(model, feeds(2))
    cb = CollectingCallback()
    assert pm.execute(rb.request, MeasureTiming.NO, None, None, cb) == E.NONE
    assert cb.wait(10)[0] == E.NONE and rb.output_bytes(0) == expected(2)

    rb = build_request(model, feeds(3))
    fence = SyncFence()
    status, done, info = pm.execute_fenced(rb.request, [fence], MeasureTiming.YES)
    assert status == E.NONE
    time.sleep(0.05)
    assert not done.is_signalled  # the child waits for our fence
    fence.signal()
    assert done.wait(10) == E.NONE and done.poll_fd(1)
    status, launched, fenced = info.get_execution_info()
    assert status == E.NONE and fenced.time_in_driver <= launched.time_in_driver
    assert rb.output_bytes(0) == expected(3)

    failed = SyncFence()
    status, done, info = pm.execute_fenced(build_request(model, feeds()).request, [failed])
    failed.signal(error=True)  # the failure reaches the child's driver
    assert done.wait(10) == E.GENERAL_FAILURE
    assert info.get_execution_info()[0] == E.GENERAL_FAILURE

    status, burst = pm.configure_execution_burst()
    assert status == E.NONE
    rb = build_request(model, feeds(4))
    for _ in range(3):
        assert burst.execute(rb.request)[0] == E.NONE
    assert rb.output_bytes(0) == expected(4)
    assert len(burst._slots) == 2  # each pool crossed once
    burst.free_memory(rb.request.pools[0])
    assert len(burst._slots) == 1
    rb.output_pool.handle.buffer()[:] = b"\0" * rb.output_pool.size
    assert burst.execute(rb.request)[0] == E.NONE and rb.output_bytes(0) == expected(4)


def test_pools_cross_the_process_boundary():
    """The child maps our shared memory and writes the outputs into it: the driver
    stamps its own process id into output 0."""
    with IsolatedDevice("tests.drivers:pid_stamping") as device:
        model = add_model(t=T.TENSOR_INT32)
        pm = prepare(device, model)
        ints = [np.full((2, 3), 7, np.int32), np.ones((2, 3), np.int32)]
        rb = build_request(model, ints)
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
        out = np.frombuffer(rb.output_bytes(0), np.int32)
        assert out[0] == device.pid != os.getpid()
        assert out[1:].tolist() == [8] * 5  # and the rest is the driver's sum


def test_constant_pools_cross_too(isolated):
    b = ModelBuilder()
    x = b.add_input(F32, (4,))
    c = b.add_constant(F32, (4,), [1, 2, 3, 4], by_reference=True)
    b.add_operation(Op.MUL, [x, c, b.add_scalar(T.INT32, 0)], [b.add_output(F32, (4,))])
    model = b.build()
    pm = prepare(isolated, model)
    rb = build_request(model, [np.full(4, 2, np.float32)])
    assert pm.execute_synchronously(rb.request)[0] == E.NONE
    assert np.frombuffer(rb.output_bytes(0), np.float32).tolist() == [2, 4, 6, 8]


def test_a_pool_without_a_descriptor_is_the_drivers_to_reject(isolated):
    model = add_model()
    pm = prepare(isolated, model)
    rb = build_request(model, feeds())
    private = Memory(
        "ashmem", rb.input_pool.size, BytesHandle(bytes(rb.input_pool.handle.buffer()))
    )
    request = Request(rb.request.inputs, rb.request.outputs, (private, rb.output_pool))
    status = pm.execute_synchronously(request)[0]
    assert status in (E.INVALID_ARGUMENT, E.GENERAL_FAILURE)
    assert isolated.last_outcome == Outcome.FAILURE


def test_memory_domains_across_the_boundary(isolated):
    model = add_model()
    pm = prepare(isolated, model)
    status, buffer, token = isolated.allocate(
        BufferDesc(), [pm], [BufferRole(0, 0)], [BufferRole(0, 0)]
    )
    assert status == E.NONE and token > 0
    src = memory_from_bytes(np.full((2, 3), 5, np.float32).tobytes())
    assert buffer.copy_from(src, (2, 3)) == E.NONE
    rb = build_request(model, feeds())
    pools = (*rb.request.pools, BufferToken(token))
    inputs = (RequestArgument(False, DataLocation(2, 0, 0), ()), rb.request.inputs[1])
    assert pm.execute_synchronously(Request(inputs, rb.request.outputs, pools))[0] == E.NONE
    assert rb.output_bytes(0) == (np.full((2, 3), 5, np.float32) + feeds()[1]).tobytes()
    dst = allocate_shared_memory(24)
    assert buffer.copy_to(dst) == E.NONE
    assert bytes(dst.handle.buffer()) == src.handle.buffer().tobytes()
    other = prepare(ReferenceDevice(), model)
    assert isolated.allocate(BufferDesc(), [other], [BufferRole(0, 0)], [])[0] == E.INVALID_ARGUMENT


def test_compilation_cache_files_cross(isolated):
    _, n_model, n_data = isolated.get_number_of_cache_files_needed()
    assert (n_model, n_data) == (1, 1)  # the reference caches (driver/cache.py)
    model = add_model()
    caches = [os.memfd_create("nnfuzz-test-cache") for _ in range(n_model + n_data)]
    try:
        token = bytes(range(32))
        status, _ = isolated.prepare_model(
            model, model_cache=caches[:n_model], data_cache=caches[n_model:], token=token
        )
        assert status == E.NONE
        assert os.fstat(caches[0]).st_size > 0  # the child wrote our file
        status, pm = isolated.prepare_model_from_cache(
            None, caches[:n_model], caches[n_model:], token
        )
        assert status == E.NONE
        rb = build_request(model, feeds())
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
        assert rb.output_bytes(0) == expected()
    finally:
        for fd in caches:
            os.close(fd)


def test_feature_levels_and_partitions_compose_with_isolation():
    with load_device("reference-1.1@isolated") as device:
        assert device.version == HalVersion.V1_1
        pm = prepare(device, add_model())
        assert pm.configure_execution_burst()[0] == E.GENERAL_FAILURE
    device = load_device("partitioned:partial-float@isolated,partial-quant")
    assert isinstance(device, PartitionedDevice)
    model = add_model()
    pm = prepare(device, model)
    rb = build_request(model, feeds())
    assert pm.execute_synchronously(rb.request)[0] == E.NONE and rb.output_bytes(0) == expected()
    device.devices[0].close()


# --- crashes and hangs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "driver, evidence",
    [
        ("segfaulting", "SIGSEGV"),
        ("exiting", "exited with status 3"),
        ("raising", "RuntimeError: a deliberate driver bug"),
        ("thread_raising", "ValueError: a deliberate bug in a driver thread"),
    ],
)
def test_a_crash_is_reported_and_the_next_call_runs_on_a_new_child(driver, evidence):
    with IsolatedDevice(f"tests.drivers:{driver}", timeout=20) as device:
        model = add_model()
        pm = prepare(device, model)
        first_pid = device.pid
        rb = build_request(model, feeds(TRIGGER))
        start = time.monotonic()
        status, shapes, _ = pm.execute_synchronously(rb.request)
        assert time.monotonic() - start < BOUND
        assert status == OUTCOME_STATUS[Outcome.CRASH] == E.DEVICE_UNAVAILABLE
        assert device.last_outcome == Outcome.CRASH and shapes == []
        assert evidence in device.last_error
        # The prepared model died with its process.
        assert pm.execute_synchronously(build_request(model, feeds()).request)[0] == (
            E.DEVICE_UNAVAILABLE
        )
        assert device.last_outcome == Outcome.FAILURE
        # The harness carries on: a new child serves the next test.
        pm = prepare(device, model)
        rb = build_request(model, feeds())
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
        assert rb.output_bytes(0) == expected() and device.last_outcome == Outcome.SUCCESS
        assert device.restarts == 1 and device.pid not in (None, first_pid)
        assert device.outcomes[Outcome.CRASH] == 1


def test_a_hang_is_reported_within_the_timeout_and_the_child_restarted():
    timeout = 0.5
    with IsolatedDevice("tests.drivers:hanging", timeout=timeout) as device:
        model = add_model()
        pm = prepare(device, model)
        hung_pid = device.pid
        start = time.monotonic()
        status, _, _ = pm.execute_synchronously(build_request(model, feeds(TRIGGER)).request)
        elapsed = time.monotonic() - start
        assert timeout <= elapsed < timeout + BOUND
        assert status == OUTCOME_STATUS[Outcome.HANG] == E.GENERAL_FAILURE
        assert device.last_outcome == Outcome.HANG and "no answer" in device.last_error
        with pytest.raises(ProcessLookupError):  # the hung child was killed
            for _ in range(100):
                os.kill(hung_pid, 0)
                time.sleep(0.05)
        pm = prepare(device, model)
        rb = build_request(model, feeds())
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
        assert rb.output_bytes(0) == expected() and device.restarts == 1


def test_asynchronous_crash_and_hang_notify_the_callback_once():
    model = add_model()
    with IsolatedDevice("tests.drivers:hanging", timeout=0.5) as device:
        pm = prepare(device, model)
        cb = CollectingCallback()
        status = pm.execute(build_request(model, feeds(TRIGGER)).request, 0, None, None, cb)
        assert status in (E.NONE, E.GENERAL_FAILURE)
        assert cb.wait(0.5 + BOUND)[0] == E.GENERAL_FAILURE
        assert device.last_outcome == Outcome.HANG
    with IsolatedDevice("tests.drivers:exiting", timeout=20) as device:
        pm = prepare(device, model)
        fence = SyncFence()
        status, done, info = pm.execute_fenced(
            build_request(model, feeds(TRIGGER)).request, [fence]
        )
        assert status == E.NONE
        fence.signal()  # the child's driver now runs, and exits
        assert done.wait(BOUND) == E.GENERAL_FAILURE
        assert info.get_execution_info()[0] == E.DEVICE_UNAVAILABLE
        assert device.last_outcome == Outcome.CRASH


def test_loading_failures_are_driver_load_errors():
    with pytest.raises(DriverLoadError, match="cannot be constructed"):
        IsolatedDevice("tests.drivers:unloadable")
    with pytest.raises(DriverLoadError, match="unknown @isolated option"):
        load_device("reference@isolated:speed=9")
    with pytest.raises(DriverLoadError, match="needs a driver"):
        load_device("@isolated")
    device = load_device("reference@isolated:timeout=2.5:start_timeout=30")
    assert isinstance(device, IsolatedDevice) and device.timeout == 2.5
    device.close()


def test_an_empty_pool_crosses_two_process_boundaries():
    """A request without inputs still carries its (empty) input pool. A child that is
    itself isolated must pass that pool on with a descriptor: it reached the inner child
    as a pool without a handle, which the driver rejected (INVALID_ARGUMENT)."""
    b = ModelBuilder()
    c = b.add_constant(F32, (4,), [1, 2, 3, 4])
    b.add_operation(Op.ADD, [c, c, b.add_scalar(T.INT32, 0)], [b.add_output(F32, (4,))])
    model = b.build()
    rb = build_request(model, [])
    assert rb.input_pool.size == 0
    with load_device("reference@isolated@isolated") as device:
        pm = prepare(device, model)
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
    assert np.frombuffer(rb.output_bytes(0), np.float32).tolist() == [2, 4, 6, 8]
