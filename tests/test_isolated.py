"""Out-of-process drivers: every method crosses the process boundary, pools are shared,
and a driver that crashes or hangs is an outcome (CRASH, HANG) within a bounded time,
after which the harness carries on with a restarted child."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import replace

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
from driver.isolated import OUTCOME_STATUS, IsolatedDevice, IsolatedPreparedModel, Outcome
from driver.memory import BytesHandle, allocate_shared_memory, memory_from_bytes
from driver.partition import PartitionedDevice
from driver.registry import DriverLoadError, load_device
from driver.sync import SyncFence
from tests.drivers import EXIT_WORDS, TRIGGER, UNKNOWN_STATUS

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


def test_supported_operations_cross_one_flag_per_operation(isolated):
    # An OEM operation is valid but has no kernel in the reference: unsupported.
    b = ModelBuilder()
    x, y = b.add_input(F32, (2, 3)), b.add_input(F32, (2, 3))
    total = b.add_operand(F32, (2, 3))
    b.add_operation(Op.ADD, [x, y, b.add_scalar(T.INT32, 0)], [total])
    b.add_operation(Op.OEM_OPERATION, [total], [b.add_output(F32, (2, 3))])
    assert isolated.get_supported_operations(b.build()) == (E.NONE, [True, False])


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
    assert pm.execute(rb.request, MeasureTiming.YES, None, None, cb) == E.NONE
    status, shapes, timing = cb.wait(10)
    assert status == E.NONE and rb.output_bytes(0) == expected(2)
    assert [s.dimensions for s in shapes] == [(2, 3)]  # the callback gets what the driver said
    assert timing.time_on_device <= timing.time_in_driver < 10**7

    rb = build_request(model, feeds(3))
    fence = SyncFence()
    status, done, info = pm.execute_fenced(rb.request, [fence], MeasureTiming.YES)
    assert status == E.NONE
    time.sleep(0.05)
    assert not done.is_signalled  # the child waits for our fence
    fence.signal()
    assert done.wait(10) == E.NONE and done.poll_fd(1)
    status, launched, fenced = info.get_execution_info()
    assert status == E.NONE
    # Each timing crosses whole and apart: the launch's counts the 50 ms before the fence.
    assert fenced.time_on_device <= fenced.time_in_driver < launched.time_in_driver < 10**7
    assert launched.time_on_device <= 50_000 <= launched.time_in_driver
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


def test_a_completion_after_the_launch_brings_its_shapes_and_timing():
    """A completion that comes once ``execute`` has returned is notified on a thread of
    its own: with what the driver notified, shapes and timing included."""
    model = add_model()
    with IsolatedDevice("tests.drivers:late_completing", timeout=20) as device:
        pm = prepare(device, model)
        cb = CollectingCallback()
        rb = build_request(model, feeds(2))
        assert pm.execute(rb.request, MeasureTiming.YES, None, None, cb) == E.NONE
        assert cb.result is None  # not yet
        status, shapes, timing = cb.wait(BOUND)
        assert status == E.NONE and [s.dimensions for s in shapes] == [(2, 3)]
        assert timing.time_on_device <= timing.time_in_driver < 10**7
        assert rb.output_bytes(0) == expected(2)


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


def test_prepare_options_reach_the_driver_in_their_roles(isolated):
    """The preference and priority a compilation was prepared with are in its cache:
    restored here, the child's compilation shows which value took which role."""
    from driver.hal.types import ExecutionPreference, Priority

    caches = [os.memfd_create("nnfuzz-test-cache") for _ in range(2)]
    try:
        token = bytes(range(1, 33))
        status, _ = isolated.prepare_model(
            add_model(),
            preference=ExecutionPreference.LOW_POWER,
            priority=Priority.HIGH,
            model_cache=caches[:1],
            data_cache=caches[1:],
            token=token,
        )
        assert status == E.NONE
        status, pm = ReferenceDevice().prepare_model_from_cache(None, caches[:1], caches[1:], token)
        assert status == E.NONE
        assert (pm.preference, pm.priority) == (ExecutionPreference.LOW_POWER, Priority.HIGH)
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
        ("segfaulting", ["SIGSEGV"]),
        # What the driver printed to its stdout is in the tail of its output too.
        ("exiting", ["exited with status 3", EXIT_WORDS]),
        ("raising", ["RuntimeError: a deliberate driver bug"]),
        ("thread_raising", ["ValueError: a deliberate bug in a driver thread"]),
    ],
    ids=["segfaulting", "exiting", "raising", "thread_raising"],
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
        assert all(text in device.last_error for text in evidence), device.last_error
        assert "DriverCrash" not in device.last_error  # the driver's exception, not its wrapper
        # The prepared model died with its process.
        assert pm.execute_synchronously(build_request(model, feeds()).request)[0] == (
            E.DEVICE_UNAVAILABLE
        )
        assert device.last_outcome == Outcome.FAILURE
        # The harness carries on: a new child serves the next test.
        dead, pm = pm, prepare(device, model)
        rb = build_request(model, feeds())
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
        assert rb.output_bytes(0) == expected() and device.last_outcome == Outcome.SUCCESS
        assert device.restarts == 1 and device.pid not in (None, first_pid)
        assert device.outcomes[Outcome.CRASH] == 1
        # A buffer for a dead prepared model is not made on the new child (whose objects
        # reuse the dead one's numbers).
        roles = [BufferRole(0, 0), BufferRole(1, 0)]
        assert device.allocate(BufferDesc(), [pm, dead], roles, [])[0] == E.DEVICE_UNAVAILABLE


def test_a_driver_thread_ended_by_system_exit_is_no_crash():
    """SystemExit ends only its thread, in the child as in any Python program."""
    with IsolatedDevice("tests.drivers:thread_exiting", timeout=20) as device:
        model = add_model()
        pm = prepare(device, model)
        rb = build_request(model, feeds(TRIGGER))
        assert pm.execute_synchronously(rb.request)[0] == E.NONE, device.last_error
        assert rb.output_bytes(0) == expected(TRIGGER) and device.outcomes[Outcome.CRASH] == 0


_ORPHANING_PARENT = """
import sys
from driver.builder import build_request
from driver.isolated import IsolatedDevice
from tests.drivers import TRIGGER
from tests.test_isolated import add_model, feeds, prepare

device = IsolatedDevice("tests.drivers:hanging", timeout=60)
model = add_model()
pm = prepare(device, model)
print(device.pid, flush=True)
pm.execute_synchronously(build_request(model, feeds(TRIGGER)).request)  # hangs
"""


def test_the_child_dies_with_its_parent_even_while_its_driver_hangs():
    """A hung driver never reads the end of its socket: only the parent-death signal
    ends the child of an nnfuzz that was killed, instead of leaving it behind."""
    import signal
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHANING_PARENT], cwd=root, env=env, stdout=subprocess.PIPE
    )
    child = None
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.2)  # the call is in the hung driver
        parent.kill()
        parent.wait()

        def alive(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except FileNotFoundError:
                return False

        deadline = time.monotonic() + BOUND
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(child)
    finally:
        parent.kill()
        parent.wait()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_a_hang_is_reported_within_the_timeout_and_the_child_restarted():
    timeout = 1.0
    with IsolatedDevice("tests.drivers:hanging", timeout=timeout) as device:
        model = add_model()
        pm = prepare(device, model)
        hung_pid = device.pid
        start = time.monotonic()
        status, _, _ = pm.execute_synchronously(build_request(model, feeds(TRIGGER)).request)
        elapsed = time.monotonic() - start
        assert timeout <= elapsed < 1.8 * timeout  # the user's limit, not a multiple of it
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
    # The driver notifies the completion, then dies before its launch returns: the
    # launch fails, and the callback keeps the one notification it had.
    with IsolatedDevice("tests.drivers:notifying_then_exiting", timeout=20) as device:
        pm = prepare(device, model)
        notified: list = []

        class Recording:
            def notify(self, status, shapes, timing):
                notified.append(status)

        request = build_request(model, feeds(TRIGGER)).request
        assert pm.execute(request, 0, None, None, Recording()) == E.DEVICE_UNAVAILABLE
        time.sleep(0.1)
        assert notified == [E.NONE] and device.last_outcome == Outcome.CRASH
        assert device.last_outcome == Outcome.CRASH


def test_a_fenced_executions_hang_clock_runs_once_its_fences_have_signalled():
    """Waiting for the caller's fences is not the driver's time: a fence signalled after
    the timeout is no hang, and a driver that hangs once they have signalled is one."""
    timeout = 0.3
    model = add_model()
    with IsolatedDevice("tests.drivers:hanging", timeout=timeout) as device:
        pm = prepare(device, model)
        fence = SyncFence()
        rb = build_request(model, feeds(6))
        status, done, _ = pm.execute_fenced(rb.request, [fence])
        assert status == E.NONE
        time.sleep(timeout + 0.1)
        fence.signal()
        assert done.wait(BOUND) == E.NONE, device.last_error
        assert rb.output_bytes(0) == expected(6) and device.outcomes[Outcome.HANG] == 0
        fence = SyncFence()
        status, done, info = pm.execute_fenced(
            build_request(model, feeds(TRIGGER)).request, [fence]
        )
        assert status == E.NONE
        fence.signal()  # the child's driver now runs, and hangs
        assert done.wait(timeout + BOUND) == E.GENERAL_FAILURE
        assert info.get_execution_info()[0] == OUTCOME_STATUS[Outcome.HANG]
        assert device.last_outcome == Outcome.HANG


def test_calls_that_are_over_stop_their_hang_clocks():
    """A completed launch, a call the child refused and launches the driver refused are
    over: a hang clock left running for one made the idle, healthy child a HANG a timeout
    later (killed, with every object it served). The timeout leaves a loaded machine
    time for each real call."""
    timeout = 1.0
    model = add_model()
    with IsolatedDevice("reference", timeout=timeout) as device:
        pm = prepare(device, model)
        ghost = IsolatedPreparedModel(device, pm._child, 999_999)  # unknown to the child
        rb = build_request(model, feeds())
        short = replace(rb.request, inputs=rb.request.inputs[:1])
        assert _async(pm, rb.request) == E.NONE
        assert _async(ghost, rb.request) == E.GENERAL_FAILURE
        assert _async(pm, short) == E.INVALID_ARGUMENT
        assert pm.execute_fenced(short, [])[0] == E.INVALID_ARGUMENT
        time.sleep(timeout + 0.2)
        assert device.outcomes[Outcome.HANG] == 0, device.last_error
        assert pm.execute_synchronously(rb.request)[0] == E.NONE and device.restarts == 0


def test_closing_the_device_wakes_its_callers_and_reaps_the_child():
    """``close`` while a call waits for a hung driver: the caller gets its answer at once
    (not after the call's timeout), and the child is gone, not left a zombie."""
    model = add_model()
    with IsolatedDevice("tests.drivers:hanging", timeout=20) as device:
        pm = prepare(device, model)
        pid = device.pid
        request = build_request(model, feeds(TRIGGER)).request
        results: list = []
        caller = threading.Thread(
            target=lambda: results.append(pm.execute_synchronously(request)[0]), daemon=True
        )
        caller.start()
        time.sleep(0.2)  # the call is in the hung driver
        device.close()
        caller.join(BOUND)
        assert results == [OUTCOME_STATUS[Outcome.CRASH]]
        assert device.last_outcome == Outcome.CRASH and "closed" in device.last_error
        assert not os.path.exists(f"/proc/{pid}")  # reaped: not even a zombie


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


def test_a_status_that_is_not_a_uint32_is_a_crash():
    """The child reports a driver's non-status as a crash (as it does a malformed
    result), rather than packing -1 as another code (0xFFFFFFFF). A uint32 the HAL does
    not know crosses unchanged, for the harness to report."""
    with IsolatedDevice("tests.drivers:bad_status", timeout=20) as device:
        assert device.get_type()[0] == UNKNOWN_STATUS
        assert device.last_outcome == Outcome.FAILURE
        assert device.get_version_string() == (OUTCOME_STATUS[Outcome.CRASH], "")
        assert device.last_outcome == Outcome.CRASH
        assert "the driver returned -1 as a status" in device.last_error
        model = add_model()
        pm = prepare(device, model)
        rb = build_request(model, feeds())
        assert pm.execute_synchronously(rb.request)[0] == OUTCOME_STATUS[Outcome.CRASH]
        assert device.last_outcome == Outcome.CRASH


def test_a_call_the_child_cannot_decode_is_a_general_failure_and_the_child_goes_on(isolated):
    """The service answers a call it cannot decode (an unknown op, a malformed payload, an
    object it does not have) with GENERAL_FAILURE and carries on. That answer has none of
    the values or the result the call's reply carries, and was taken for a malformed
    reply: a CRASH, and the healthy child killed."""
    from driver.isolated import IsolatedPreparedModel
    from driver.service import Op as Call

    pm = prepare(isolated, add_model())
    pid, restarts = isolated.pid, isolated.restarts
    ghost = IsolatedPreparedModel(isolated, pm._child, 999_999)  # unknown to the child

    def raw(op, payload):
        return isolated._rpc(None, op, 0, payload, (), lambda u: (u.u32(),), (0,))[0]

    calls = {
        "unknown op": lambda: raw(999, b""),
        "truncated prepare_model": lambda: raw(Call.PREPARE_MODEL, b"\1"),
        "execute_synchronously": lambda: ghost.execute_synchronously(_req())[0],
        "execute": lambda: _async(ghost, _req()),
        "execute_fenced": lambda: ghost.execute_fenced(_req(), [])[0],
        "configure_execution_burst": lambda: ghost.configure_execution_burst()[0],
    }
    for name, call in calls.items():
        assert call() == E.GENERAL_FAILURE, name
        assert isolated.last_outcome == Outcome.FAILURE, name
        assert "nnfuzz service" in isolated.last_error, name
    assert (isolated.pid, isolated.restarts) == (pid, restarts)
    assert pm.execute_synchronously(_req())[0] == E.NONE


def test_a_pool_the_child_cannot_map_is_the_drivers_to_reject(isolated):
    """A descriptor the child cannot map (a memfd shorter than its pool says) becomes a
    pool without a handle: the driver judges it as any invalid pool, INVALID_ARGUMENT for
    the reference, in a request as in a buffer copy; the service does not refuse it."""
    from driver.memory import SharedMemory

    model = add_model()
    pm = prepare(isolated, model)
    rb = build_request(model, feeds())
    short = Memory("ashmem", rb.input_pool.size, SharedMemory(8))
    request = replace(rb.request, pools=(short, rb.output_pool))
    assert pm.execute_synchronously(request)[0] == E.INVALID_ARGUMENT
    assert "nnfuzz service" not in isolated.last_error
    status, buffer, _ = isolated.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    assert status == E.NONE
    assert buffer.copy_from(Memory("ashmem", 24, SharedMemory(8)), (2, 3)) == E.INVALID_ARGUMENT
    assert "nnfuzz service" not in isolated.last_error


def test_a_pool_whose_descriptor_is_not_open_is_an_invalid_argument(isolated):
    """The descriptor cannot be sent (EBADF): the caller's bad argument, refused here,
    not taken for the child's death (a CRASH, and the healthy child killed)."""
    model = add_model()
    pm = prepare(isolated, model)
    pid, restarts = isolated.pid, isolated.restarts
    rb = build_request(model, feeds())
    closed = BytesHandle(rb.input_pool.size)
    closed.fd = os.open("/dev/null", os.O_RDONLY)
    os.close(closed.fd)
    request = replace(
        rb.request, pools=(Memory("ashmem", rb.input_pool.size, closed), rb.output_pool)
    )
    assert pm.execute_synchronously(request)[0] == E.INVALID_ARGUMENT
    assert isolated.last_outcome == Outcome.FAILURE and "not open" in isolated.last_error
    assert (isolated.pid, isolated.restarts) == (pid, restarts)
    assert pm.execute_synchronously(rb.request)[0] == E.NONE


def test_a_call_passes_up_to_max_fds_descriptors(isolated):
    """SCM_RIGHTS carries at most MAX_FDS descriptors: that many pools cross, one more
    is refused here (INVALID_ARGUMENT) instead of breaking the connection."""
    from dataclasses import replace

    from driver.service import MAX_FDS

    model = add_model()
    spare = [memory_from_bytes(b"\0" * 8) for _ in range(MAX_FDS + 1)]
    assert isolated.get_supported_operations(replace(model, pools=tuple(spare[:MAX_FDS]))) == (
        E.NONE,
        [True],
    )
    assert isolated.get_supported_operations(replace(model, pools=tuple(spare)))[0] == (
        E.INVALID_ARGUMENT
    )
    assert f"exceed the {MAX_FDS}" in isolated.last_error
    pm = prepare(isolated, model)
    rb = build_request(model, feeds())
    used = len(rb.request.pools)
    for extra, status in ((MAX_FDS - used, E.NONE), (MAX_FDS - used + 1, E.INVALID_ARGUMENT)):
        request = replace(rb.request, pools=(*rb.request.pools, *spare[:extra]))
        assert pm.execute_synchronously(request)[0] == status, extra
    assert rb.output_bytes(0) == expected()


# --- the caller's callbacks ----------------------------------------------------------------


def test_a_callback_that_raises_or_is_missing_does_not_break_the_device(caplog):
    """The caller's ``notify`` ran on the socket-reader thread: one that raised ended it,
    so the device looked hung (HANG, child killed, every object dead), and the loss then
    notified the callback a second time."""
    model = add_model()
    with IsolatedDevice("reference", timeout=5) as device:
        pm = prepare(device, model)
        calls = []

        class Raising:
            def notify(self, status, shapes, timing):
                calls.append(status)
                raise RuntimeError("the caller's callback failed")

        start = time.monotonic()
        assert pm.execute(build_request(model, feeds()).request, 0, None, None, Raising()) == (
            E.NONE
        )
        assert pm.execute(build_request(model, feeds()).request, 0, None, None, None) == E.NONE
        while not calls and time.monotonic() - start < BOUND:
            time.sleep(0.01)
        rb = build_request(model, feeds())
        assert pm.execute_synchronously(rb.request)[0] == E.NONE
        assert time.monotonic() - start < BOUND and rb.output_bytes(0) == expected()
        assert device.last_outcome == Outcome.SUCCESS and device.restarts == 0
        time.sleep(0.2)
        assert calls == [E.NONE]  # exactly once
        assert "an execution callback raised" in caplog.text


def test_a_callback_may_call_back_into_the_device():
    """A callback that chains the next execution (synchronous, or asynchronous and
    waited for) works as in-process, instead of deadlocking the reader thread."""
    model = add_model()
    with IsolatedDevice("reference", timeout=5) as device:
        pm = prepare(device, model)
        results: list = []
        done = CollectingCallback()

        class Chain:
            def notify(self, status, shapes, timing):
                results.append(status)
                results.append(pm.execute_synchronously(build_request(model, feeds()).request)[0])
                inner = CollectingCallback()
                results.append(
                    pm.execute(build_request(model, feeds(2)).request, 0, None, None, inner)
                )
                results.append(inner.wait(BOUND)[0])  # queued behind this very callback
                done.notify(E.NONE, [], None)

        start = time.monotonic()
        assert pm.execute(build_request(model, feeds()).request, 0, None, None, Chain()) == E.NONE
        done.wait(2 * BOUND)
        assert results == [E.NONE] * 4 and time.monotonic() - start < BOUND
        assert device.outcomes[Outcome.HANG] == 0 and device.restarts == 0
        # A launch that fails (here, or in the driver) is notified before ``execute``
        # returns, as in-process.
        from dataclasses import replace

        rb = build_request(model, feeds())
        for request in (None, replace(rb.request, inputs=rb.request.inputs[:1])):
            cb = CollectingCallback()
            assert pm.execute(request, 0, None, None, cb) == E.INVALID_ARGUMENT
            assert cb.result is not None and cb.result[0] == E.INVALID_ARGUMENT


# --- arguments the reference answers with a status -------------------------------------------


FEATURE_LEVELS = {
    "reference": HalVersion.V1_3,
    "reference-1.2": HalVersion.V1_2,
    "reference-1.0": HalVersion.V1_0,
}
"""The driver at 1.3 and below: methods a version lacks are GENERAL_FAILURE whatever
their arguments, in the wrapper as in the driver."""


@pytest.fixture(scope="module")
def both(request, isolated):
    """For each device: (device, prepared model, an uninitialized buffer or None when
    the version has no memory domains, a burst). The driver's name is the test's
    indirect parameter (default: the reference at 1.3)."""
    name = getattr(request, "param", "reference")
    if name == "reference":
        devices = (("reference", ReferenceDevice()), ("isolated", isolated))
    else:
        devices = (("reference", load_device(name)), ("isolated", IsolatedDevice(name)))
    out = {}
    for role, device in devices:
        pm = prepare(device, add_model())
        status, buffer, _ = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
        assert (status == E.NONE) == (device.version >= HalVersion.V1_3)
        out[role] = (device, pm, buffer, pm.configure_execution_burst()[1])
    yield out
    if name != "reference":
        out["isolated"][0].close()


def _final_status(launched):
    """An asynchronous call's status: its launch's, or (launched) its completion's."""
    if isinstance(launched, tuple):  # execute_fenced: (status, fence, callback)
        status, _, info = launched
        return status if status != E.NONE or info is None else info.get_execution_info()[0]
    return launched


def _async(pm, request, measure=0, deadline=None, loop_timeout=None):
    cb = CollectingCallback()
    status = pm.execute(request, measure, deadline, loop_timeout, cb)
    assert cb.wait(BOUND)[0] == status or status == E.NONE  # notified once, consistently
    return status if status != E.NONE else cb.result[0]


def _req():
    return build_request(add_model(), feeds()).request


def _closed_fd() -> int:
    """A descriptor number that is not open (just closed)."""
    fd = os.open("/dev/null", os.O_RDONLY)
    os.close(fd)
    return fd


_FAR = 2**63  # deadlines from here to 2**64 - 1 are valid (and far in the future)
_ARGUMENT_CASES = {
    # item 5: shapes the isolated wrapper raised on, or silently changed
    "prepare_model(None)": lambda d, pm, buf, burst: d.prepare_model(None)[0],
    "get_supported_operations(None)": lambda d, pm, buf, burst: d.get_supported_operations(None)[0],
    "allocate(dims=(-1,))": lambda d, pm, buf, burst: d.allocate(
        BufferDesc((-1,)), [pm], [BufferRole(0, 0)], []
    )[0],
    "allocate(model_index=-1)": lambda d, pm, buf, burst: d.allocate(
        BufferDesc(), [pm], [BufferRole(-1, 0)], []
    )[0],
    "allocate(desc=None)": lambda d, pm, buf, burst: d.allocate(None, [pm], [BufferRole(0, 0)], [])[
        0
    ],
    "allocate(prepared_models=None)": lambda d, pm, buf, burst: d.allocate(
        BufferDesc(), None, [BufferRole(0, 0)], []
    )[0],
    "execute_synchronously(measure=None)": lambda d, pm, buf, burst: pm.execute_synchronously(
        _req(), None
    )[0],
    "execute_synchronously(measure=True)": lambda d, pm, buf, burst: pm.execute_synchronously(
        _req(), True
    )[0],
    "execute_synchronously(None)": lambda d, pm, buf, burst: pm.execute_synchronously(None)[0],
    "execute(measure=None)": lambda d, pm, buf, burst: _async(pm, _req(), None),
    "copy_from(dims=[-1])": lambda d, pm, buf, burst: buf.copy_from(
        allocate_shared_memory(24), [-1]
    ),
    "copy_from(dims=[2.9, 3])": lambda d, pm, buf, burst: buf.copy_from(
        allocate_shared_memory(24), [2.9, 3]
    ),
    "copy_from(dims=None)": lambda d, pm, buf, burst: buf.copy_from(
        allocate_shared_memory(24), None
    ),
    "copy_from(src=None)": lambda d, pm, buf, burst: buf.copy_from(None, [2, 3]),
    "copy_to(None) uninitialized": lambda d, pm, buf, burst: buf.copy_to(None),
    "prepare_model_from_cache(token=None)": lambda d, pm, buf, burst: d.prepare_model_from_cache(
        None, [], [], None
    )[0],
    "prepare_model_from_cache(token=1<<40)": lambda d, pm, buf, burst: d.prepare_model_from_cache(
        None, [], [], 1 << 40
    )[0],
    "prepare_model(token=1<<40)": lambda d, pm, buf, burst: d.prepare_model(
        add_model(), token=1 << 40
    )[0],
    "prepare_model(closed cache files)": lambda d, pm, buf, burst: d.prepare_model(
        add_model(), model_cache=[_closed_fd()], data_cache=[_closed_fd()], token=bytes(32)
    )[0],
    "prepare_model_from_cache(closed cache files)": (
        lambda d, pm, buf, burst: d.prepare_model_from_cache(
            None, [_closed_fd()], [_closed_fd()], bytes(32)
        )[0]
    ),
    "execute_fenced(wait_for=None)": lambda d, pm, buf, burst: pm.execute_fenced(_req(), None)[0],
    "burst.execute(None)": lambda d, pm, buf, burst: burst.execute(None)[0],
    # item 6: deadlines and durations over [0, 2**64), and what lies outside
    **{
        f"prepare_model(deadline={dl!r})": (
            lambda d, pm, buf, burst, dl=dl: d.prepare_model(add_model(), deadline=dl)[0]
        )
        for dl in (_FAR, 2**64 - 1, 2**64, -1, 1.5, float("nan"), True)
    },
    **{
        f"prepare_model_from_cache(deadline={dl!r})": (
            lambda d, pm, buf, burst, dl=dl: d.prepare_model_from_cache(dl, [], [], bytes(32))[0]
        )
        for dl in (2**64 - 1, 2**64, float("inf"))
    },
    **{
        f"execute_synchronously(deadline={dl!r})": (
            lambda d, pm, buf, burst, dl=dl: pm.execute_synchronously(_req(), 0, dl)[0]
        )
        for dl in (0, _FAR, 2**64 - 1, 2**64, -1, float("nan"), "soon")
    },
    **{
        f"execute_synchronously(loop_timeout={lt!r})": (
            lambda d, pm, buf, burst, lt=lt: pm.execute_synchronously(_req(), 0, None, lt)[0]
        )
        for lt in (0, _FAR, 2**64 - 1, 2**64, -1, 1.5)
    },
    **{
        f"execute(deadline={dl!r})": (lambda d, pm, buf, burst, dl=dl: _async(pm, _req(), 0, dl))
        for dl in (2**64 - 1, float("nan"))
    },
    **{
        f"execute_fenced(deadline={dl!r}, timeout_after_fence={taf!r})": (
            lambda d, pm, buf, burst, dl=dl, taf=taf: _final_status(
                pm.execute_fenced(_req(), [], 0, dl, None, taf)
            )
        )
        for dl, taf in ((_FAR, None), (2**64 - 1, 2**64 - 1), (None, -1), (None, 2**64), (-1, 0))
    },
    **{
        f"burst.execute(deadline={dl!r})": (
            lambda d, pm, buf, burst, dl=dl: burst.execute(_req(), 0, dl)[0]
        )
        for dl in (2**64 - 1, float("nan"))
    },
}


@pytest.mark.parametrize(
    "both, case",
    [
        (level, case)
        for level, version in FEATURE_LEVELS.items()
        for case in _ARGUMENT_CASES
        # No buffer to copy with before 1.3 (allocate is GENERAL_FAILURE), no burst to
        # execute on before 1.2: those cases have no object to call.
        if not (case.startswith("copy_") and version < HalVersion.V1_3)
        and not (case.startswith("burst.") and version < HalVersion.V1_2)
    ],
    indirect=["both"],
    scope="module",
)
def test_the_isolated_device_answers_arguments_as_the_reference(both, case):
    """Every argument gets the status the in-process reference gives it: no exception
    (AttributeError, WireEncodeError, struct.error, TypeError), no silently changed
    argument (dims truncated to ints, a deadline past 2**63 packed as -1); and below 1.3
    a method the version lacks is GENERAL_FAILURE whatever its arguments."""
    statuses = {name: _ARGUMENT_CASES[case](*objects) for name, objects in both.items()}
    assert statuses["isolated"] == statuses["reference"], case
    assert both["isolated"][0].outcomes[Outcome.CRASH] == 0
    assert both["isolated"][0].outcomes[Outcome.HANG] == 0


def test_a_token_the_reference_would_not_cache_is_not_cached_nor_sent(both):
    """The token crossed as ``bytes(token)``: an int allocated that many bytes, a
    token past the frame limit broke the connection (a CRASH), and a 32-byte bytearray,
    which the reference does not cache under, was cached in the child."""
    _, n_model, n_data = both["reference"][0].get_number_of_cache_files_needed()
    for token in (bytearray(32), bytes(33), "x" * 32, 1 << 40, memoryview(bytes(32))):
        statuses = {}
        for name, (device, *_) in both.items():
            caches = [os.memfd_create("nnfuzz-test-cache") for _ in range(n_model + n_data)]
            try:
                model_cache, data_cache = caches[:n_model], caches[n_model:]
                status, _ = device.prepare_model(
                    add_model(), model_cache=model_cache, data_cache=data_cache, token=token
                )
                restored = device.prepare_model_from_cache(None, model_cache, data_cache, token)
                statuses[name] = (status, restored[0], os.fstat(caches[0]).st_size)
            finally:
                for fd in caches:
                    os.close(fd)
        assert statuses["isolated"] == statuses["reference"], token
    assert both["isolated"][0].outcomes[Outcome.CRASH] == 0


# --- fences, timeouts, bursts ----------------------------------------------------------------


def test_more_fences_than_descriptors_are_relayed_and_a_failed_pipe_leaks_nothing(isolated):
    """One pipe per fence exceeded the descriptors one call can pass (INVALID_ARGUMENT
    where the reference runs); the pipes were made before that check, and leaked when
    ``os.pipe`` failed part way (the OSError escaped)."""
    import resource

    model = add_model()
    pm = prepare(isolated, model)
    fences = [SyncFence.signalled() for _ in range(300)]
    rb = build_request(model, feeds(5))
    status, done, info = pm.execute_fenced(rb.request, fences)
    assert status == E.NONE and done.wait(BOUND) == E.NONE, isolated.last_error
    assert rb.output_bytes(0) == expected(5)
    failed = SyncFence()
    failed.signal(error=True)
    status, done, _ = pm.execute_fenced(_req(), [*fences, failed, SyncFence()])  # last: never
    assert status == E.NONE and done.wait(BOUND) == E.GENERAL_FAILURE

    def open_fds():
        return len(os.listdir("/proc/self/fd"))

    request = _req()
    before = open_fds()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (before + 8, hard))
    try:
        status, done, info = pm.execute_fenced(request, fences)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (status, done, info) == (E.GENERAL_FAILURE, None, None)
    assert "pipes" in isolated.last_error and open_fds() <= before
    assert pm.execute_synchronously(_req())[0] == E.NONE


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": "5"}, "timeout"),
        ({"start_timeout": float("nan")}, "start_timeout"),
    ],
)
def test_a_timeout_must_be_finite_and_positive(kw, name):
    """NaN made every call a HANG; infinity overflowed the watchdog's wait (a traceback
    in its thread, then no hang detection at all)."""
    with pytest.raises(ValueError, match=f"^{name} must be a finite number of seconds"):
        IsolatedDevice("reference", **kw)
    value = kw[name]
    if not isinstance(value, str):  # in a spec, "5" is 5 seconds
        with pytest.raises(DriverLoadError, match=f"{name} must be a finite number of seconds"):
            load_device(f"reference@isolated:{name}={value}")


def test_a_timeout_may_be_as_long_as_max_timeout():
    import math

    from driver.isolated import MAX_TIMEOUT, check_timeout

    assert check_timeout("timeout", MAX_TIMEOUT) == MAX_TIMEOUT
    with pytest.raises(ValueError, match=r"^timeout must be"):
        check_timeout("timeout", math.nextafter(MAX_TIMEOUT, math.inf))


def test_a_burst_lets_go_of_pools_the_caller_dropped(isolated):
    """The burst's slot cache held every pool it had seen until ``free_memory``, so a
    burst over fresh pools kept two descriptors and mappings per execution open, here
    and in the child, until EMFILE. A collected memory now frees its slot there too, and
    a slot is never mistaken for a new memory that reuses a dropped one's id."""
    model = add_model()
    pm = prepare(isolated, model)
    status, burst = pm.configure_execution_burst()
    assert status == E.NONE

    def fds(pid):
        return len(os.listdir(f"/proc/{pid}/fd"))

    counts = []
    for i in range(40):
        rb = build_request(model, feeds(i))
        assert burst.execute(rb.request)[0] == E.NONE and rb.output_bytes(0) == expected(i)
        assert burst.cached_slots == 2
        del rb
        assert burst.cached_slots == 0
        counts.append((fds(os.getpid()), fds(isolated.pid)))
    assert counts[-1][0] <= counts[4][0] and counts[-1][1] <= counts[4][1] + 2, counts
    kept = build_request(model, feeds(7))
    for _ in range(3):  # a pool the caller keeps stays cached: its descriptor crosses once
        assert burst.execute(kept.request)[0] == E.NONE
    assert burst.cached_slots == 2 and kept.output_bytes(0) == expected(7)
    before = fds(isolated.pid)
    for _ in range(10):  # free_memory lets go of the pools in the child too
        for pool in kept.request.pools:
            burst.free_memory(pool)
        assert burst.cached_slots == 0
        assert burst.execute(kept.request)[0] == E.NONE and burst.cached_slots == 2
    assert fds(isolated.pid) <= before + 2 and kept.output_bytes(0) == expected(7)


# --- the service's side of the protocol, without a child -----------------------------------


def test_the_service_forwards_one_notify_per_execution():
    """HAL: a callback is notified exactly once. A driver that notifies twice has its
    second result dropped in the child, not sent as a second completion of the call."""
    import socket

    from driver.hal.types import NO_TIMING
    from driver.isolated import _decode_result
    from driver.service import Op as Call
    from driver.service import Service, _RemoteCallback, recv_frame

    parent, child = socket.socketpair()
    with parent, child:
        callback = _RemoteCallback(Service(child), 7)
        callback.notify(E.NONE, [], NO_TIMING)
        callback.notify(E.GENERAL_FAILURE, [], NO_TIMING)
        child.shutdown(socket.SHUT_WR)
        frames = []
        while (frame := recv_frame(parent)) is not None:
            frames.append(frame)
    assert [(f.op, f.call_id) for f in frames] == [(Call.NOTIFY, 7)]
    assert _decode_result(frames[0].payload)[0][0] == E.NONE


def test_valid_answers_the_reference_never_gives_cross_unchanged():
    """The cache files a driver needs cross in their order (model cache, data cache); a
    fenced execution may return no sync fence (it is over) or a sync fence without a
    callback, whose status is then the execution's."""
    model = add_model()
    with IsolatedDevice("tests.drivers:uncommon_answers", timeout=20) as device:
        assert device.get_number_of_cache_files_needed() == (E.NONE, 2, 1)
        pm = prepare(device, model)
        rb = build_request(model, feeds())
        status, fence, info = pm.execute_fenced(rb.request, [])
        assert (status, fence) == (E.NONE, None)
        assert info.get_execution_info()[0] == E.NONE and rb.output_bytes(0) == expected()
        for failed, final in [(False, E.NONE), (True, E.GENERAL_FAILURE)]:
            wait_for = SyncFence()
            rb = build_request(model, feeds())
            status, fence, _ = pm.execute_fenced(rb.request, [wait_for])
            assert status == E.NONE and fence is not None
            wait_for.signal(error=failed)
            assert fence.wait(10) == final, failed


def test_a_prepared_model_dropped_here_is_released_in_the_child(isolated):
    """Dropping a prepared model releases the child's: a call on its id is then a call
    on an object the child does not have (the driver's prepared model is not kept)."""
    import gc

    pm = prepare(isolated, add_model())
    child, obj = pm._child, pm._obj
    assert pm.execute_synchronously(_req())[0] == E.NONE
    del pm
    gc.collect()
    ghost = IsolatedPreparedModel(isolated, child, obj)
    assert ghost.execute_synchronously(_req())[0] == E.GENERAL_FAILURE
    assert f"no object {obj}" in isolated.last_error


def test_the_service_frees_a_burst_slot_in_the_driver_too():
    """BURST_FREE reaches the driver's ``free_memory`` with the memory of the slot (a
    driver whose burst holds its pools would otherwise keep them until the burst goes)."""
    from driver.service import Frame, Packer, Service
    from driver.service import Op as Call

    freed: list[Memory] = []

    class Burst:
        def free_memory(self, memory: Memory) -> None:
            freed.append(memory)

    service = Service(None)
    kept, dropped = Memory("ashmem", 8), Memory("ashmem", 16)
    service.objects[5] = Burst()
    service.bursts[5] = {2: kept, 3: dropped}
    service.burst_free(Frame(Call.BURST_FREE, 0, 5, Packer().u32(3).data()))
    assert freed == [dropped] and service.bursts[5] == {2: kept}


def test_a_payload_flag_other_than_0_or_1_is_a_protocol_error():
    from driver.service import ProtocolError, Unpacker, _bool_flag

    assert Unpacker(b"\0").opt_u64() is None
    assert Unpacker(b"\1" + (7).to_bytes(8, "little")).opt_u64() == 7
    with pytest.raises(ProtocolError, match="bad optional flag 2"):
        Unpacker(b"\2" + (7).to_bytes(8, "little")).opt_u64()
    assert (_bool_flag(0), _bool_flag(1)) == (False, True)
    with pytest.raises(ProtocolError, match="bad flag 2"):
        _bool_flag(2)


def test_a_frame_with_flags_is_a_protocol_error():
    """The header's flags are reserved (0): a frame that sets them is not understood."""
    import socket

    from driver.service import HEADER, ProtocolError, recv_frame

    sender, receiver = socket.socketpair()
    with sender, receiver:
        sender.sendall(HEADER.pack(1, 0, 7, 0, 2, 0) + b"hi")
        frame = recv_frame(receiver)
        assert frame is not None and (frame.call_id, frame.payload) == (7, b"hi")
        sender.sendall(HEADER.pack(1, 1, 7, 0, 2, 0) + b"hi")
        with pytest.raises(ProtocolError, match="flags 1"):
            recv_frame(receiver)
