"""The reference device as a HAL service: execution paths, timing, memory, QoS."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from driver import operations
from driver.builder import ModelBuilder, build_request
from driver.device import CollectingCallback, DeviceConfig, ReferenceDevice
from driver.hal.device import Buffer, Device, PreparedModel
from driver.hal.types import (
    NO_TIMING,
    UINT64_MAX,
    BufferDesc,
    BufferRole,
    BufferToken,
    DataLocation,
    ErrorStatus,
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
)
from driver.memory import SharedMemory, allocate_shared_memory, memory_from_bytes
from driver.registry import DriverLoadError, load_device
from driver.scheduler import ORDER_LOG_SIZE, Budget, PriorityScheduler
from driver.sync import SyncFence

T = OperandType
F32 = T.TENSOR_FLOAT32


def add_model(shape=(2, 3), chain: int = 1, out_dims=None):
    """x + y, then (chain - 1) more additions of y."""
    b = ModelBuilder()
    x = b.add_input(F32, shape)
    y = b.add_input(F32, shape)
    act = b.add_scalar(T.INT32, 0)
    cur = x
    for k in range(chain):
        last = k == chain - 1
        out = (
            b.add_output(F32, out_dims if out_dims is not None else shape)
            if last
            else b.add_operand(F32, shape)
        )
        b.add_operation(OperationType.ADD, [cur, y, act], [out])
        cur = out
    return b.build()


def feeds(shape=(2, 3)):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    return [x, np.full(shape, 0.5, np.float32)]


@pytest.fixture
def device():
    return ReferenceDevice()


def prepare(device, model, **kw):
    status, pm = device.prepare_model(model, **kw)
    assert status == ErrorStatus.NONE, device.last_error
    return pm


# --- protocol and queries ---------------------------------------------------------------


def test_reference_device_implements_the_protocol(device):
    assert isinstance(device, Device)
    pm = prepare(device, add_model())
    assert isinstance(pm, PreparedModel)


def test_queries_report_the_same_values_every_time(device):
    first = (
        device.get_capabilities(),
        device.get_version_string(),
        device.get_type(),
        device.get_supported_extensions(),
        device.get_number_of_cache_files_needed(),
    )
    for _ in range(3):
        again = (
            device.get_capabilities(),
            device.get_version_string(),
            device.get_type(),
            device.get_supported_extensions(),
            device.get_number_of_cache_files_needed(),
        )
        assert again == first
    status, caps = first[0]
    assert status == ErrorStatus.NONE
    types = [p.type for p in caps.operand_performance]
    assert types == sorted(types) and T.TENSOR_QUANT8_ASYMM_SIGNED in types
    assert T.SUBGRAPH not in types  # HAL 1.3: performance does not apply to it


@pytest.mark.parametrize(
    "version, newest",
    [
        (HalVersion.V1_0, T.TENSOR_QUANT8_ASYMM),
        (HalVersion.V1_1, T.TENSOR_QUANT8_ASYMM),
        (HalVersion.V1_2, T.TENSOR_QUANT8_SYMM),
        (HalVersion.V1_3, T.TENSOR_QUANT8_ASYMM_SIGNED),
    ],
)
def test_feature_level_capabilities_cover_exactly_the_types_of_their_version(version, newest):
    # Each HAL version's OperandType ends at its newest type (OEM and SUBGRAPH aside).
    status, caps = ReferenceDevice(version=version).get_capabilities()
    assert [p.type for p in caps.operand_performance] == list(range(newest + 1))


def test_supported_operations_one_bool_per_operation(device):
    status, supported = device.get_supported_operations(add_model(chain=3))
    assert status == ErrorStatus.NONE and supported == [True, True, True]


def test_supported_operations_of_an_invalid_model_is_invalid_argument(device):
    m = add_model()
    bad = dataclasses.replace(m, main=dataclasses.replace(m.main, operations=()))
    status, supported = device.get_supported_operations(bad)
    assert status == ErrorStatus.INVALID_ARGUMENT and supported == []


def test_partial_driver_support_filter_reported_and_prepare_refused():
    dev = ReferenceDevice(support_filter=lambda model, i: i != 1)
    m = add_model(chain=3)
    assert dev.get_supported_operations(m) == (ErrorStatus.NONE, [True, False, True])
    status, pm = dev.prepare_model(m)
    assert status == ErrorStatus.GENERAL_FAILURE and pm is None


@pytest.mark.parametrize(
    "kw, status",
    [
        (dict(preference=7), ErrorStatus.INVALID_ARGUMENT),
        (dict(priority=-1), ErrorStatus.INVALID_ARGUMENT),
        (dict(priority=3), ErrorStatus.INVALID_ARGUMENT),
        (dict(deadline=1), ErrorStatus.MISSED_DEADLINE_PERSISTENT),
        # A malformed deadline is INVALID_ARGUMENT, not one that has passed (nor a crash).
        (dict(deadline=-1), ErrorStatus.INVALID_ARGUMENT),
        (dict(deadline=2**64), ErrorStatus.INVALID_ARGUMENT),
        (dict(deadline="soon"), ErrorStatus.INVALID_ARGUMENT),
    ],
)
def test_prepare_option_rules(device, kw, status):
    assert device.prepare_model(add_model(), **kw)[0] == status


def test_priority_needs_hal_1_3():
    dev = ReferenceDevice(version=HalVersion.V1_2)
    assert dev.prepare_model(add_model(), priority=Priority.HIGH)[0] == ErrorStatus.INVALID_ARGUMENT
    far = time.monotonic_ns() + 10**10  # a deadline is 1.3 too, even one never reached
    assert dev.prepare_model(add_model(), deadline=far)[0] == ErrorStatus.INVALID_ARGUMENT
    assert dev.prepare_model(add_model())[0] == ErrorStatus.NONE


# --- execution paths -------------------------------------------------------------------


def run_all_paths(pm, model, inputs):
    """Outputs of every execution path for the same request (fresh pools each)."""
    results = {}

    rb = build_request(model, inputs)
    status, shapes, _ = pm.execute_synchronously(rb.request)
    results["sync"] = (status, shapes, rb.output_bytes(0))

    rb = build_request(model, inputs)
    cb = CollectingCallback()
    assert pm.execute(rb.request, MeasureTiming.NO, None, None, cb) == ErrorStatus.NONE
    status, shapes, _ = cb.wait(10)
    results["async"] = (status, shapes, rb.output_bytes(0))

    rb = build_request(model, inputs)
    fence = SyncFence()
    status, done, fcb = pm.execute_fenced(rb.request, [fence])
    assert status == ErrorStatus.NONE
    assert not done.is_signalled  # waits for the fence
    fence.signal()
    assert done.wait(10) == ErrorStatus.NONE and done.poll_fd(1)
    st, _, _ = fcb.get_execution_info()
    results["fenced"] = (st, shapes, rb.output_bytes(0))

    rb = build_request(model, inputs)
    _, burst = pm.configure_execution_burst()
    status, shapes, _ = burst.execute(rb.request)
    results["burst"] = (status, shapes, rb.output_bytes(0))
    return results


def test_every_execution_path_gives_identical_outputs(device):
    m = add_model(chain=4)
    pm = prepare(device, m)
    results = run_all_paths(pm, m, feeds())
    expected = (feeds()[0] + 4 * 0.5).astype(np.float32).tobytes()
    for path, (status, _, out) in results.items():
        assert status == ErrorStatus.NONE, path
        assert out == expected, path


def test_timing_rules(device):
    m = add_model(chain=3)
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    status, _, timing = pm.execute_synchronously(rb.request, MeasureTiming.NO)
    assert timing.time_on_device == UINT64_MAX and timing.time_in_driver == UINT64_MAX
    status, _, timing = pm.execute_synchronously(rb.request, MeasureTiming.YES)
    assert status == ErrorStatus.NONE
    assert 0 <= timing.time_on_device <= timing.time_in_driver < UINT64_MAX
    # On error: no timing even when measured.
    bad = dataclasses.replace(rb.request, inputs=rb.request.inputs[:1])
    status, shapes, timing = pm.execute_synchronously(bad, MeasureTiming.YES)
    assert status == ErrorStatus.INVALID_ARGUMENT
    assert shapes == [] and timing.time_in_driver == UINT64_MAX


@pytest.mark.parametrize(
    "loop_timeout, seconds", [(None, 2.0), (10**9, 1.0), (15 * 10**9, 15.0), (20 * 10**9, 15.0)]
)
def test_a_loop_timeout_defaults_to_2_s_and_is_at_most_15_s(
    device, monkeypatch, loop_timeout, seconds
):
    """HAL ``OptionalTimeoutDuration``: the loops of an execution given no loop timeout
    get 2 s, and one given more than 15 s gets 15 s."""
    m = add_model()
    pm = prepare(device, m)
    seen = []
    run = pm.executor.run

    def recording_run(*args, **kwargs):
        seen.append(kwargs["loop_timeout"])
        return run(*args, **kwargs)

    monkeypatch.setattr(pm.executor, "run", recording_run)
    request = build_request(m, feeds()).request
    assert pm.execute_synchronously(request, loop_timeout=loop_timeout)[0] == ErrorStatus.NONE
    assert seen == [seconds]


def test_fenced_timing_and_failed_fence(device):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    fence = SyncFence()
    status, done, cb = pm.execute_fenced(rb.request, [fence], MeasureTiming.YES)
    time.sleep(0.02)
    fence.signal()
    status, launched, fenced = cb.get_execution_info()
    assert status == ErrorStatus.NONE
    assert launched.time_in_driver >= fenced.time_in_driver >= fenced.time_on_device
    # Launched timing counts from the launch, fenced timing from the fence's signal.
    assert launched.time_in_driver - fenced.time_in_driver >= 15_000
    # Unmeasured: no timing at all.
    status, done, cb = pm.execute_fenced(rb.request, [SyncFence.signalled()], MeasureTiming.NO)
    assert cb.get_execution_info() == (ErrorStatus.NONE, NO_TIMING, NO_TIMING)
    bad = SyncFence()
    status, done, cb = pm.execute_fenced(rb.request, [bad])
    bad.signal(error=True)
    assert cb.get_execution_info()[0] == ErrorStatus.GENERAL_FAILURE
    assert done.wait(5) == ErrorStatus.GENERAL_FAILURE


def test_fenced_rejects_a_non_fence_and_unknown_output_dims(device):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    assert pm.execute_fenced(rb.request, [object()])[0] == ErrorStatus.INVALID_ARGUMENT
    closed = SyncFence()
    closed.close()
    assert pm.execute_fenced(rb.request, [closed])[0] == ErrorStatus.INVALID_ARGUMENT
    assert pm.execute_fenced(rb.request, None)[0] == ErrorStatus.INVALID_ARGUMENT
    # Unknown output dims are refused at launch (no fence), not reported after it.
    dyn = add_model(out_dims=(0, 3))
    pm2 = prepare(device, dyn)
    rb2 = build_request(dyn, feeds())
    assert pm2.execute_fenced(rb2.request, []) == (ErrorStatus.INVALID_ARGUMENT, None, None)
    assert "unspecified" in device.last_error or "does not specify" in device.last_error


def test_fence_timeouts_never_wait_forever_unless_asked():
    fence = SyncFence()
    # A negative timeout just looks (poll() would take a negative one as "forever").
    assert fence.wait(-1) == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    looked = []
    waiter = threading.Thread(target=lambda: looked.append(fence.poll_fd(-1)), daemon=True)
    waiter.start()
    waiter.join(5)
    assert looked == [False]
    for bad in (float("nan"), "1", None.__class__, True):
        with pytest.raises(ValueError, match="fence timeout"):
            fence.wait(bad)
        with pytest.raises(ValueError, match="fence timeout"):
            fence.poll_fd(bad)
    # Beyond what the platform can wait: no limit (threading would raise OverflowError).
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(fence.wait(1e30)), daemon=True)
    waiter.start()
    time.sleep(0.02)
    fence.signal()
    waiter.join(5)
    assert waited == [ErrorStatus.NONE]
    assert fence.wait(float("inf")) == ErrorStatus.NONE and fence.poll_fd(1e30)


def execute_on(pm, request, path, measure=MeasureTiming.NO, deadline=None, loop_timeout=None):
    """(status, output shapes) of one execution on ``path``; asynchronous paths are waited
    for (bounded: a launched execution that never reports fails the test)."""
    if path == "sync":
        return pm.execute_synchronously(request, measure, deadline, loop_timeout)[:2]
    if path == "async":
        cb = CollectingCallback()
        launch = pm.execute(request, measure, deadline, loop_timeout, cb)
        status, shapes, _ = cb.wait(10)
        assert launch in (ErrorStatus.NONE, status)
        return status, shapes
    if path == "fenced":
        status, done, fcb = pm.execute_fenced(request, [], measure, deadline, loop_timeout)
        if status != ErrorStatus.NONE:
            assert done is None and fcb is None
            return status, []
        assert done.wait(10) != ErrorStatus.MISSED_DEADLINE_TRANSIENT, "never signalled"
        return fcb.get_execution_info()[0], []
    _, burst = pm.configure_execution_burst()
    return burst.execute(request, measure, deadline, loop_timeout)[:2]


PATHS = ["sync", "async", "fenced", "burst"]

# Execution arguments beside the request: (what, measure, deadline, loop timeout, status).
# HAL 1.3 carries them as MeasureTiming, OptionalTimePoint and OptionalTimeoutDuration
# (uint64 nanoseconds); anything a HIDL caller could not send is INVALID_ARGUMENT.
EXECUTION_ARGUMENTS = [
    ("measure None", None, None, None, ErrorStatus.INVALID_ARGUMENT),
    ("measure 2", 2, None, None, ErrorStatus.INVALID_ARGUMENT),
    ("measure True", True, None, None, ErrorStatus.INVALID_ARGUMENT),
    ("measure '1'", "1", None, None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline nan", 0, float("nan"), None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline inf", 0, float("inf"), None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline -1", 0, -1, None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline 1.5", 0, 1.5, None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline 'soon'", 0, "soon", None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline 2^64", 0, 2**64, None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline 10^400", 0, 10**400, None, ErrorStatus.INVALID_ARGUMENT),
    ("deadline 2^64-1", 0, 2**64 - 1, None, ErrorStatus.NONE),
    ("deadline 0 (passed)", 0, 0, None, ErrorStatus.MISSED_DEADLINE_PERSISTENT),
    ("loop timeout -1", 0, None, -1, ErrorStatus.INVALID_ARGUMENT),
    ("loop timeout 1.5", 0, None, 1.5, ErrorStatus.INVALID_ARGUMENT),
    ("loop timeout '2s'", 0, None, "2s", ErrorStatus.INVALID_ARGUMENT),
    ("loop timeout 2^64", 0, None, 2**64, ErrorStatus.INVALID_ARGUMENT),
    ("loop timeout 2^64-1 (clamped)", 0, None, 2**64 - 1, ErrorStatus.NONE),
    ("measure YES", 1, None, 0, ErrorStatus.NONE),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "measure, deadline, loop_timeout, expected",
    [case[1:] for case in EXECUTION_ARGUMENTS],
    ids=[case[0] for case in EXECUTION_ARGUMENTS],
)
# Both prepared models that run their executions themselves (launch.LaunchedExecutions).
@pytest.mark.parametrize("driver_name", ["reference", "partitioned:partial-float"])
def test_execution_arguments_get_the_same_status_on_every_path(
    driver_name, path, measure, deadline, loop_timeout, expected
):
    device = load_device(driver_name)
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    status, _ = execute_on(pm, rb.request, path, measure, deadline, loop_timeout)
    assert status == expected, device.last_error
    if expected == ErrorStatus.NONE:
        assert rb.output_bytes(0) == (feeds()[0] + 0.5).tobytes()


@pytest.mark.parametrize("timeout", [-1, 1.5, "1s", 2**64], ids=repr)
def test_fenced_timeout_after_the_fences_must_be_uint64_nanoseconds(device, timeout):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    launch = pm.execute_fenced(rb.request, [], MeasureTiming.NO, None, None, timeout)
    assert launch == (ErrorStatus.INVALID_ARGUMENT, None, None)


def test_fenced_timeout_after_the_fences_bounds_the_run_from_their_signal(device, slow_add):
    m = add_model(chain=2)  # two 50 ms additions
    pm = prepare(device, m)
    far = time.monotonic_ns() + 10**10
    for deadline in (None, far):  # the earlier of the deadline and the timeout counts
        rb = build_request(m, feeds())
        status, _, cb = pm.execute_fenced(
            rb.request, [], MeasureTiming.NO, deadline, None, 20_000_000
        )
        assert status == ErrorStatus.NONE
        assert cb.get_execution_info()[0] == ErrorStatus.MISSED_DEADLINE_TRANSIENT, deadline
    # It counts from the fences' signal, not from the launch: waiting for a fence longer
    # than the timeout leaves the whole timeout to the (one 50 ms addition) run.
    one = add_model()
    fence = SyncFence()
    rb = build_request(one, feeds())
    status, _, cb = prepare(device, one).execute_fenced(
        rb.request, [fence], MeasureTiming.NO, None, None, 150_000_000
    )
    time.sleep(0.2)
    fence.signal()
    assert cb.get_execution_info()[0] == ErrorStatus.NONE, device.last_error


@pytest.fixture
def broken_add(monkeypatch):
    """Make ADD's kernel raise, as a driver bug would (validation has passed by then)."""
    decl = operations.REGISTRY[OperationType.ADD]

    def broken(ctx):
        raise RuntimeError("kernel bug")

    monkeypatch.setitem(
        operations.REGISTRY, OperationType.ADD, dataclasses.replace(decl, execute=broken)
    )


@pytest.mark.parametrize("path", ["async", "fenced"])
def test_an_internal_error_after_the_launch_is_reported_not_lost(device, broken_add, path):
    # The launch has already returned NONE: the callback and the fence are the only way
    # the caller learns the outcome, so an exception in the worker must reach them.
    m = add_model()
    pm = prepare(device, m)
    status, _ = execute_on(pm, build_request(m, feeds()).request, path)
    assert status == ErrorStatus.GENERAL_FAILURE
    assert "internal error" in device.last_error and "RuntimeError: kernel bug" in device.last_error
    # The synchronous path lets the bug surface to its caller (a harness reports a crash).
    with pytest.raises(RuntimeError, match="kernel bug"):
        pm.execute_synchronously(build_request(m, feeds()).request)


def test_a_callback_that_raises_is_logged_and_the_device_goes_on(device, caplog):
    # The caller's own notify() runs on the driver's worker: its exception went into a
    # Future nobody reads, silently.
    m = add_model()
    pm = prepare(device, m)
    raised = threading.Event()

    class Raising:
        def notify(self, status, shapes, timing):
            raised.set()
            raise RuntimeError("the caller's callback failed")

    with caplog.at_level("ERROR", logger="nnfuzz.launch"):
        assert pm.execute(build_request(m, feeds()).request, 0, None, None, Raising()) == (
            ErrorStatus.NONE
        )
        assert raised.wait(10)
        for _ in range(100):  # the log record follows the raise on the worker
            if "an execution callback raised" in caplog.text:
                break
            time.sleep(0.01)
    assert "an execution callback raised" in caplog.text
    assert "the caller's callback failed" in caplog.text
    rb = build_request(m, feeds())
    assert execute_on(pm, rb.request, "async")[0] == ErrorStatus.NONE
    assert rb.output_bytes(0) == (feeds()[0] + 0.5).tobytes()


def test_dynamic_output_shape_reported(device):
    m = add_model(out_dims=(0, 0))
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    status, shapes, _ = pm.execute_synchronously(rb.request)
    assert status == ErrorStatus.NONE
    assert shapes[0].dimensions == (2, 3) and shapes[0].is_sufficient


def test_output_insufficient_size_reports_the_shape(device):
    m = add_model(out_dims=(0, 3))
    pm = prepare(device, m)
    rb = build_request(m, feeds(), output_sizes=[8])
    status, shapes, timing = pm.execute_synchronously(rb.request, MeasureTiming.YES)
    assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert shapes[0].dimensions == (2, 3) and not shapes[0].is_sufficient
    assert timing.time_on_device == UINT64_MAX


def test_burst_caches_pools_in_slots_and_frees_them(device):
    m = add_model()
    pm = prepare(device, m)
    _, burst = pm.configure_execution_burst()
    rb = build_request(m, feeds())
    for _ in range(3):
        assert burst.execute(rb.request)[0] == ErrorStatus.NONE
    assert burst.cached_slots == 2
    burst.free_memory(rb.input_pool)
    assert burst.cached_slots == 1


def test_a_burst_gives_a_new_pool_a_free_slot_not_one_in_use(device):
    # Freeing slot 0 of two leaves slot 1: the next pool must take slot 0 or 2, not slot
    # 1 (len(slots) of the moment), which would evict the pool cached there.
    m = add_model()
    pm = prepare(device, m)
    _, burst = pm.configure_execution_burst()
    first, second = build_request(m, feeds()), build_request(m, feeds())
    assert burst.execute(first.request)[0] == ErrorStatus.NONE
    burst.free_memory(first.input_pool)
    assert burst.execute(second.request)[0] == ErrorStatus.NONE
    assert burst.cached_slots == 3  # first's output pool and both of second's


def test_a_burst_lets_go_of_pools_its_caller_dropped(device):
    # A burst that kept every pool it had seen mapped ran out of file descriptors after
    # ~250 executions on fresh pools; a dropped pool frees its slot, as in Android.
    m = add_model()
    pm = prepare(device, m)
    _, burst = pm.configure_execution_burst()
    kept = build_request(m, feeds())
    assert burst.execute(kept.request)[0] == ErrorStatus.NONE
    for _ in range(20):
        rb = build_request(m, feeds())
        assert burst.execute(rb.request)[0] == ErrorStatus.NONE
        assert rb.output_bytes(0) == (feeds()[0] + 0.5).tobytes()
        del rb
    assert burst.cached_slots == 2  # the kept request's pools
    del kept
    assert burst.cached_slots == 0
    rb = build_request(m, feeds())
    assert burst.execute(rb.request)[0] == ErrorStatus.NONE
    assert burst.cached_slots == 2


def test_a_burst_executes_while_another_thread_frees_its_pools(device):
    m = add_model()
    pm = prepare(device, m)
    _, burst = pm.configure_execution_burst()
    rb = build_request(m, feeds())
    stop = threading.Event()

    def free_again_and_again():
        while not stop.is_set():
            for pool in rb.request.pools:
                burst.free_memory(pool)

    freer = threading.Thread(target=free_again_and_again)
    freer.start()
    try:
        statuses = {burst.execute(rb.request)[0] for _ in range(2000)}
    finally:
        stop.set()
        freer.join()
    assert statuses == {ErrorStatus.NONE}


def test_many_threads_on_one_prepared_model_match_one_thread():
    dev = ReferenceDevice(budget=Budget(max_concurrent=4))
    m = add_model(shape=(8, 8), chain=5)
    pm = prepare(dev, m)
    rng = np.random.default_rng(1)
    cases = [[rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2)] for _ in range(24)]
    expected = []
    for inp in cases:
        rb = build_request(m, inp)
        assert pm.execute_synchronously(rb.request)[0] == ErrorStatus.NONE
        expected.append(rb.output_bytes(0))
    got = [None] * len(cases)

    def work(i):
        rb = build_request(m, cases[i])
        assert pm.execute_synchronously(rb.request)[0] == ErrorStatus.NONE
        got[i] = rb.output_bytes(0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == expected


def test_several_prepared_models_alive_at_once(device):
    m1, m2 = add_model(chain=1), add_model(chain=2)
    p1, p2 = prepare(device, m1), prepare(device, m2)
    for pm, m, n in ((p1, m1, 1), (p2, m2, 2), (p1, m1, 1), (p2, m2, 2)):
        rb = build_request(m, feeds())
        assert pm.execute_synchronously(rb.request)[0] == ErrorStatus.NONE
        assert np.array_equal(rb.output_array(0, F32, (2, 3)), feeds()[0] + 0.5 * n)


# --- request validation on every path ----------------------------------------------------


@pytest.mark.parametrize("drop", ["input", "output"])
def test_removing_an_argument_is_rejected_on_every_path(device, drop):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    r = rb.request
    bad = (
        dataclasses.replace(r, inputs=r.inputs[1:])
        if drop == "input"
        else dataclasses.replace(r, outputs=())
    )
    assert pm.execute_synchronously(bad)[0] == ErrorStatus.INVALID_ARGUMENT
    cb = CollectingCallback()
    assert pm.execute(bad, MeasureTiming.NO, None, None, cb) == ErrorStatus.INVALID_ARGUMENT
    assert cb.wait(5)[0] == ErrorStatus.INVALID_ARGUMENT
    assert pm.execute_fenced(bad, [])[0] == ErrorStatus.INVALID_ARGUMENT
    _, burst = pm.configure_execution_burst()
    status, shapes, timing = burst.execute(bad, MeasureTiming.YES)
    assert (
        status == ErrorStatus.INVALID_ARGUMENT
        and shapes == []
        and timing.time_in_driver == UINT64_MAX
    )


# --- memory: shared pools --------------------------------------------------------------


def test_pools_are_shared_with_a_child_process():
    mem = memory_from_bytes(b"\0" * 16)
    fd = mem.handle.fd
    code = (
        "import sys, mmap\n"
        f"m = mmap.mmap({fd}, 16)\n"
        "assert m[:4] == b'\\0\\0\\0\\0'\n"
        "m[:5] = b'hello'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, pass_fds=(fd,), timeout=60)
    assert bytes(mem.handle.buffer()[:5]) == b"hello"
    # And the other way: a second mapping of the same fd sees our writes.
    other = SharedMemory.from_fd(fd, 16)
    mem.handle.buffer()[8:10] = b"ok"
    assert bytes(other.buffer()[8:10]) == b"ok"


def test_unsupported_memory_name_is_general_failure(device):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    weird = dataclasses.replace(rb.input_pool, name="hardware_buffer")
    req = dataclasses.replace(rb.request, pools=(weird, rb.output_pool))
    status = pm.execute_synchronously(req)[0]
    assert status in (ErrorStatus.GENERAL_FAILURE, ErrorStatus.INVALID_ARGUMENT)


def test_an_operation_whose_constant_lives_in_an_unmappable_pool_is_unsupported(device):
    # getSupportedOperations must tell what preparation will refuse: a constant in a
    # (non-BLOB) hardware_buffer, which the reference does not map.
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    w = b.add_constant(F32, (2,), [1.5, -1.0], by_reference=True)
    out = b.add_output(F32, (2,))
    b.add_operation(OperationType.ADD, [x, w, b.add_scalar(T.INT32, 0)], [out])
    out2 = b.add_output(F32, (2,))
    b.add_operation(OperationType.ADD, [x, x, b.add_scalar(T.INT32, 0)], [out2])
    mappable = b.build()
    assert device.get_supported_operations(mappable) == (ErrorStatus.NONE, [True, True])
    pool = mappable.pools[0]
    unmappable = dataclasses.replace(
        mappable, pools=(dataclasses.replace(pool, name="hardware_buffer"),)
    )
    assert device.get_supported_operations(unmappable) == (ErrorStatus.NONE, [False, True])
    assert device.prepare_model(unmappable) == (ErrorStatus.GENERAL_FAILURE, None)


def nested_if_model(levels: int) -> Model:
    """``levels`` IF operations nested in each other's branches (both branches of each
    name the next subgraph; the innermost holds an ABS): a model of a few KB whose paths
    through the branches number 2**levels."""
    L = OperandLifeTime
    cond = Operand(T.TENSOR_BOOL8, (1,), 2, lifetime=L.SUBGRAPH_INPUT)
    x = Operand(F32, (2,), 1, lifetime=L.SUBGRAPH_INPUT)
    out = Operand(F32, (2,), 0, lifetime=L.SUBGRAPH_OUTPUT)
    subgraphs = []
    for k in range(levels):
        branch = Operand(T.SUBGRAPH, (), 1, lifetime=L.SUBGRAPH, location=DataLocation(0, k, 0))
        operands = (cond, branch, dataclasses.replace(branch), x, out)
        subgraphs.append(
            Subgraph(operands, (Operation(OperationType.IF, (0, 1, 2, 0, 3), (4,)),), (0, 3), (4,))
        )
    innermost = (dataclasses.replace(cond, number_of_consumers=0), x, out)
    subgraphs.append(Subgraph(innermost, (Operation(OperationType.ABS, (1,), (2,)),), (0, 1), (2,)))
    return Model(main=subgraphs[0], referenced=tuple(subgraphs[1:]))


def test_control_flow_nesting_is_supported_exactly_as_deep_as_it_runs(device):
    # Deeper than the executor's bound: unsupported up front (not a GENERAL_FAILURE after
    # "supported"); thousands deep or 2**levels paths: answered at once, no recursion.
    from driver.executor import MAX_NESTING_DEPTH

    deepest = nested_if_model(MAX_NESTING_DEPTH)
    assert device.get_supported_operations(deepest) == (ErrorStatus.NONE, [True])
    pm = prepare(device, deepest)
    inputs = [np.array([True]), np.array([-1.5, 2.0], np.float32)]
    rb = build_request(deepest, inputs)
    assert pm.execute_synchronously(rb.request)[0] == ErrorStatus.NONE
    assert rb.output_bytes(0) == np.array([1.5, 2.0], np.float32).tobytes()
    for levels in (MAX_NESTING_DEPTH + 1, 3000):
        too_deep = nested_if_model(levels)
        started = time.monotonic()
        assert device.get_supported_operations(too_deep) == (ErrorStatus.NONE, [False])
        assert device.prepare_model(too_deep) == (ErrorStatus.GENERAL_FAILURE, None)
        assert time.monotonic() - started < 5


# --- memory domains ----------------------------------------------------------------------


def _token_request(m, token_in=None, token_out=None, inputs=None):
    """A request whose input 0 and/or output 0 live in driver buffers."""
    rb = build_request(m, inputs or feeds())
    pools = list(rb.request.pools)
    ins = list(rb.request.inputs)
    outs = list(rb.request.outputs)
    if token_in is not None:
        pools.append(BufferToken(token_in))
        ins[0] = RequestArgument(False, DataLocation(len(pools) - 1, 0, 0), ())
    if token_out is not None:
        pools.append(BufferToken(token_out))
        outs[0] = RequestArgument(False, DataLocation(len(pools) - 1, 0, 0), ())
    return rb, Request(tuple(ins), tuple(outs), tuple(pools))


def test_memory_domain_round_trip(device):
    m = add_model()
    pm = prepare(device, m)
    status, buf, token = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [BufferRole(0, 0)])
    assert status == ErrorStatus.NONE and token > 0 and isinstance(buf, Buffer)
    src = memory_from_bytes(feeds()[0].tobytes())
    assert buf.copy_from(src, (2, 3)) == ErrorStatus.NONE
    _, req = _token_request(m, token_in=token)
    rb_out = allocate_shared_memory(24)
    req = dataclasses.replace(req, pools=(*req.pools[:1], rb_out, *req.pools[2:]))
    assert pm.execute_synchronously(req)[0] == ErrorStatus.NONE
    # Write the result into the buffer, then copy it out.
    _, req2 = _token_request(m, token_out=token)
    assert pm.execute_synchronously(req2)[0] == ErrorStatus.NONE
    dst = allocate_shared_memory(24)
    assert buf.copy_to(dst) == ErrorStatus.NONE
    assert np.array_equal(
        np.frombuffer(bytes(dst.handle.buffer()), np.float32), (feeds()[0] + 0.5).ravel()
    )


MEMORY_DOMAIN_RULES = [
    # (name, action, expected status)
    ("uninitialized input", "uninit_input", ErrorStatus.GENERAL_FAILURE),
    ("same buffer as input and output", "in_and_out", ErrorStatus.INVALID_ARGUMENT),
    (
        "role violation: input-only buffer used as output",
        "role_violation",
        ErrorStatus.INVALID_ARGUMENT,
    ),
    ("copy_from a smaller memory", "copy_size", ErrorStatus.INVALID_ARGUMENT),
    ("copy_from a larger memory", "copy_from_larger", ErrorStatus.INVALID_ARGUMENT),
    ("copy_to a smaller memory", "copy_to_size", ErrorStatus.INVALID_ARGUMENT),
    ("copy_to a larger memory", "copy_to_larger", ErrorStatus.INVALID_ARGUMENT),
    ("copy_to of an uninitialized buffer", "copy_to_uninit", ErrorStatus.GENERAL_FAILURE),
    ("unknown token", "bad_token", ErrorStatus.INVALID_ARGUMENT),
]


@pytest.mark.parametrize(
    "name, action, expected", MEMORY_DOMAIN_RULES, ids=[r[0] for r in MEMORY_DOMAIN_RULES]
)
def test_memory_domain_rules(device, name, action, expected):
    m = add_model()
    pm = prepare(device, m)
    status, buf, token = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    assert status == ErrorStatus.NONE
    if action == "uninit_input":
        _, req = _token_request(m, token_in=token)
        got = pm.execute_synchronously(req)[0]
    elif action == "in_and_out":
        _, _, tok2 = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [BufferRole(0, 0)])
        _, req = _token_request(m, token_in=tok2, token_out=tok2)
        got = pm.execute_synchronously(req)[0]
    elif action == "role_violation":
        _, req = _token_request(m, token_out=token)
        got = pm.execute_synchronously(req)[0]
    elif action == "copy_size":
        got = buf.copy_from(memory_from_bytes(b"\0" * 20), (2, 3))
    elif action == "copy_from_larger":  # the sizes must be equal, as IBuffer says
        got = buf.copy_from(memory_from_bytes(b"\0" * 28), (2, 3))
    elif action in ("copy_to_size", "copy_to_larger"):
        assert buf.copy_from(memory_from_bytes(b"\0" * 24), (2, 3)) == ErrorStatus.NONE
        got = buf.copy_to(allocate_shared_memory(16 if action == "copy_to_size" else 32))
    elif action == "copy_to_uninit":
        got = buf.copy_to(allocate_shared_memory(24))
    elif action == "bad_token":
        _, req = _token_request(m, token_in=token + 1000)
        got = pm.execute_synchronously(req)[0]
    assert got == expected


def test_allocate_role_rules(device):
    m = add_model()
    pm = prepare(device, m)
    other = prepare(ReferenceDevice(), m)
    assert device.allocate(BufferDesc(), [pm], [], [])[0] == ErrorStatus.INVALID_ARGUMENT
    assert (
        device.allocate(BufferDesc(), [pm], [BufferRole(1, 0)], [])[0]
        == ErrorStatus.INVALID_ARGUMENT
    )
    assert (
        device.allocate(BufferDesc(), [pm], [BufferRole(0, 5)], [])[0]
        == ErrorStatus.INVALID_ARGUMENT
    )
    assert (
        device.allocate(BufferDesc(), [pm], [BufferRole(0, 0, 0.0)], [])[0]
        == ErrorStatus.INVALID_ARGUMENT
    )
    assert (
        device.allocate(BufferDesc(), [other], [BufferRole(0, 0)], [])[0]
        == ErrorStatus.INVALID_ARGUMENT
    )
    assert (
        device.allocate(BufferDesc((4, 4)), [pm], [BufferRole(0, 0)], [])[0]
        == ErrorStatus.INVALID_ARGUMENT
    )
    assert (
        ReferenceDevice(version=HalVersion.V1_2).allocate(
            BufferDesc(), [pm], [BufferRole(0, 0)], []
        )[0]
        != ErrorStatus.NONE
    )


@pytest.mark.parametrize(
    "config",
    [dict(supports_memory_domains=False), dict(version=HalVersion.V1_2)],
    ids=["configured-without", "hal-1.2"],
)
def test_a_device_without_memory_domains_allocates_nothing(config):
    # Memory domains are HAL 1.3: a 1.2 device has none, whatever its configuration says.
    dev = ReferenceDevice(**config)
    pm = prepare(dev, add_model())
    got = dev.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    assert got == (ErrorStatus.GENERAL_FAILURE, None, 0)


def test_a_failed_execution_leaves_its_output_buffer_uninitialized():
    # As Android marks a failed execution's output memories: the buffer's contents are
    # not what a successful execution would have written, so reading them is an error.
    dev = ReferenceDevice(budget=Budget(memory_bytes=16))  # the 48 input bytes exceed it
    m = add_model()
    pm = prepare(dev, m)
    _, buf, token = dev.allocate(BufferDesc(), [pm], [], [BufferRole(0, 0)])
    assert buf.copy_from(memory_from_bytes(b"\0" * 24), (2, 3)) == ErrorStatus.NONE
    assert buf.copy_to(allocate_shared_memory(24)) == ErrorStatus.NONE
    _, req = _token_request(m, token_out=token)
    assert pm.execute_synchronously(req)[0] == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    assert buf.copy_to(allocate_shared_memory(24)) == ErrorStatus.GENERAL_FAILURE


def test_one_buffer_as_two_outputs_of_an_execution_is_invalid_argument(device):
    b = ModelBuilder()
    x, y = b.add_input(F32, (2, 3)), b.add_input(F32, (2, 3))
    outs = [b.add_output(F32, (2, 3)) for _ in range(2)]
    for out in outs:
        b.add_operation(OperationType.ADD, [x, y, b.add_scalar(T.INT32, 0)], [out])
    m = b.build()
    pm = prepare(device, m)
    roles = [BufferRole(0, 0), BufferRole(0, 1)]
    buffers = [device.allocate(BufferDesc(), [pm], [], roles) for _ in range(2)]  # kept: alive
    rb = build_request(m, feeds())
    pools = (*rb.request.pools, *(BufferToken(token) for _, _, token in buffers))
    n = len(rb.request.pools)

    def request(first_pool: int, second_pool: int) -> Request:
        outs = tuple(
            RequestArgument(False, DataLocation(p, 0, 0), ()) for p in (first_pool, second_pool)
        )
        return Request(rb.request.inputs, outs, pools)

    assert pm.execute_synchronously(request(n, n + 1))[0] == ErrorStatus.NONE
    assert pm.execute_synchronously(request(n, n))[0] == ErrorStatus.INVALID_ARGUMENT
    assert "used twice" in device.last_error


def test_an_input_shorter_than_its_dimensions_need_is_invalid_argument(device):
    # Validation checks that a location lies within its pool; that it holds the whole
    # operand is the driver's check when it reads the input.
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    first = rb.request.inputs[0]
    short = dataclasses.replace(
        first, location=dataclasses.replace(first.location, length=first.location.length - 4)
    )
    request = dataclasses.replace(rb.request, inputs=(short, *rb.request.inputs[1:]))
    assert pm.execute_synchronously(request)[0] == ErrorStatus.INVALID_ARGUMENT
    assert "input 0: 20 bytes given" in device.last_error


def test_a_role_does_not_pass_to_a_model_that_gets_a_freed_models_address():
    # Roles named prepared models by id(): one prepared after the role's model was freed
    # can get its address and used that model's buffers. The registry alone, with stand-in
    # prepared models, makes the reuse certain: objects of one size are allocated (and
    # kept) until the allocator hands out the freed one's block.
    from driver.buffers import BufferRegistry

    device, model = object(), add_model()

    class Prepared:
        def __init__(self):
            self.device, self.model = device, model

    registry = BufferRegistry()
    first = Prepared()
    buf, token = registry.allocate(device, BufferDesc(), [first], [BufferRole(0, 0)], [])
    registry.lookup(token, first, 0, is_output=False)  # its own model may use it
    address = id(first)
    del first
    kept = []
    while id(second := Prepared()) != address and len(kept) < 100_000:
        kept.append(second)
    assert id(second) == address  # the premise: the freed address is reused
    with pytest.raises(HalError, match="was not allocated for input 0 of this model"):
        registry.lookup(token, second, 0, is_output=False)
    assert buf.token == token


@pytest.mark.parametrize("dims", [("x", 3), None, 6, (2.5, 3), (-2, -3), (2**32, 1)], ids=repr)
def test_copy_from_rejects_malformed_dimensions(device, dims):
    # HIDL's vec<uint32_t>: anything else is INVALID_ARGUMENT, never a Python exception
    # and never silently truncated (2.5 used to pass as 2).
    pm = prepare(device, add_model())
    _, buf, _ = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    src = memory_from_bytes(b"\0" * 24)
    assert buf.copy_from(src, dims) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copy_from(src, (np.int64(2), 3)) == ErrorStatus.NONE


def test_copies_to_or_from_a_pool_that_cannot_be_used_are_invalid_argument(device):
    pm = prepare(device, add_model())
    _, buf, _ = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    assert buf.copy_from(memory_from_bytes(b"\0" * 24), (2, 3)) == ErrorStatus.NONE
    freed = allocate_shared_memory(24)
    freed.handle.close()
    read_only = Memory("ashmem", 24, ReadOnlyHandle(24))
    assert buf.copy_to(freed) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copy_from(freed, (2, 3)) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copy_to(read_only) == ErrorStatus.INVALID_ARGUMENT
    assert buf.copy_to(None) == ErrorStatus.INVALID_ARGUMENT


class ReadOnlyHandle(MemoryHandle):
    """A pool the driver can map but not write (only a Python caller can make one)."""

    def __init__(self, size: int):
        self._data = bytes(size)

    def buffer(self) -> memoryview:
        return memoryview(self._data)


def test_a_read_only_output_pool_is_invalid_argument(device):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    out = rb.request.pools[-1]
    pools = (*rb.request.pools[:-1], Memory(out.name, out.size, ReadOnlyHandle(out.size)))
    request = dataclasses.replace(rb.request, pools=pools)
    assert pm.execute_synchronously(request)[0] == ErrorStatus.INVALID_ARGUMENT
    assert "read-only" in device.last_error


@pytest.mark.parametrize("size", [24.0, float("nan"), True, -1, "24"], ids=repr)
def test_a_pool_size_that_is_not_an_int_is_refused_without_leaking(size):
    import os

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(HalError, match="pool size"):
            allocate_shared_memory(size)
    assert len(os.listdir("/proc/self/fd")) == before


def test_concurrent_buffer_writers_never_crash_or_block(device):
    m = add_model()
    pm = prepare(device, m)
    _, buf, token = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [BufferRole(0, 0)])
    srcs = [memory_from_bytes(np.full(6, k, np.float32).tobytes()) for k in range(8)]
    errors = []

    def writer(k):
        for _ in range(50):
            if buf.copy_from(srcs[k], (2, 3)) != ErrorStatus.NONE:
                errors.append(k)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert not errors
    dst = allocate_shared_memory(24)
    assert buf.copy_to(dst) == ErrorStatus.NONE
    vals = np.frombuffer(bytes(dst.handle.buffer()), np.float32)
    assert len(set(vals.tolist())) == 1  # one writer's full contents, never a mix


# --- QoS ---------------------------------------------------------------------------------


@pytest.fixture
def slow_add(monkeypatch):
    """Make ADD take 50 ms (the executor reads declarations at prepare time)."""
    decl = operations.REGISTRY[OperationType.ADD]

    def slow(ctx):
        time.sleep(0.05)
        return decl.execute(ctx)

    monkeypatch.setitem(
        operations.REGISTRY, OperationType.ADD, dataclasses.replace(decl, execute=slow)
    )


def test_deadline_in_the_past_is_persistent(device):
    m = add_model()
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    status, shapes, timing = pm.execute_synchronously(
        rb.request, MeasureTiming.YES, deadline=time.monotonic_ns() - 1
    )
    assert status == ErrorStatus.MISSED_DEADLINE_PERSISTENT and timing.time_in_driver == UINT64_MAX


def test_deadline_passing_during_the_run_is_transient(device, slow_add):
    m = add_model(chain=4)
    pm = prepare(device, m)
    rb = build_request(m, feeds())
    status, _, _ = pm.execute_synchronously(rb.request, deadline=time.monotonic_ns() + 20_000_000)
    assert status == ErrorStatus.MISSED_DEADLINE_TRANSIENT


@contextmanager
def _one_slot_held(sched: PriorityScheduler) -> Iterator[None]:
    """A LOW execution holds a slot of ``sched`` (on a thread) until the block ends."""
    release = threading.Event()

    def hold():
        with sched.slot(Priority.LOW):
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        while sched._running == 0:
            time.sleep(0.001)
        yield
    finally:
        release.set()
        holder.join(5)


def _queued(sched: PriorityScheduler, count: int) -> bool:
    """Whether ``count`` executions wait in ``sched``'s queue within 5 s (a scheduler
    that runs them at once fails a test instead of hanging it)."""
    until = time.monotonic() + 5
    while len(sched._waiters) < count and time.monotonic() < until:
        time.sleep(0.001)
    return len(sched._waiters) == count


def test_priority_scheduler_serves_high_before_low():
    sched = PriorityScheduler(Budget(max_concurrent=1))
    order = []

    def job(priority, name):
        with sched.slot(priority):
            order.append(name)

    jobs = []
    queued = [
        (Priority.LOW, "low 1"),
        (Priority.MEDIUM, "medium 1"),
        (Priority.LOW, "low 2"),
        (Priority.HIGH, "high"),
        (Priority.MEDIUM, "medium 2"),
    ]
    with _one_slot_held(sched):
        for p, name in queued:
            jobs.append(threading.Thread(target=job, args=(p, name)))
            jobs[-1].start()
            assert _queued(sched, len(jobs))
    for t in jobs:
        t.join(5)
    # By priority, and first come first served within one.
    assert order == ["high", "medium 1", "medium 2", "low 1", "low 2"]


def test_a_deadline_passing_in_the_queue_is_transient_and_frees_the_place():
    """A HIGH waiter whose deadline passes while a LOW execution runs gets
    MISSED_DEADLINE_TRANSIENT, and leaves the queue: the LOW waiter behind it runs."""
    sched = PriorityScheduler(Budget(max_concurrent=1))
    outcome = []

    def behind():
        try:
            with sched.slot(Priority.LOW, time.monotonic_ns() + 3_000_000_000):
                outcome.append("ran")
        except HalError as e:
            outcome.append(e.status)

    waiter = threading.Thread(target=behind)
    with _one_slot_held(sched):
        waiter.start()
        assert _queued(sched, 1) and sched._running == 1
        with (
            pytest.raises(HalError) as e,
            sched.slot(Priority.HIGH, time.monotonic_ns() + 50_000_000),
        ):
            pass
        assert e.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    waiter.join(5)
    assert outcome == ["ran"]


def test_an_execution_may_use_the_whole_memory_budget():
    sched = PriorityScheduler(Budget(max_concurrent=2, memory_bytes=100))
    soon = time.monotonic_ns() + 2_000_000_000  # a wrongly refused slot fails, not hangs
    with sched.slot(Priority.MEDIUM, soon, memory_bytes=100):
        pass
    with (
        sched.slot(Priority.MEDIUM, soon, memory_bytes=60),
        sched.slot(Priority.MEDIUM, soon, memory_bytes=40),
    ):
        assert sched._running == 2


def test_priority_ordering_under_load_through_the_device(slow_add):
    dev = ReferenceDevice(budget=Budget(max_concurrent=1))
    m = add_model()
    low = prepare(dev, m, priority=Priority.LOW)
    high = prepare(dev, m, priority=Priority.HIGH)
    callbacks = []
    for pm in (low, low, low, high):
        cb = CollectingCallback()
        assert (
            pm.execute(build_request(m, feeds()).request, MeasureTiming.NO, None, None, cb)
            == ErrorStatus.NONE
        )
        callbacks.append(cb)
        time.sleep(0.005)
    for cb in callbacks:
        assert cb.wait(10)[0] == ErrorStatus.NONE
    log = dev.scheduler.order_log
    # The first LOW was already running; HIGH overtakes the two LOWs still queued.
    assert log.index(Priority.HIGH) < len(log) - 1


def test_the_grant_log_stays_bounded():
    # A device runs for days (fuzz campaigns, services): per-execution records are capped.
    sched = PriorityScheduler()
    for n in range(ORDER_LOG_SIZE + 10):
        with sched.slot(Priority.LOW if n % 2 else Priority.HIGH):
            pass
    assert len(sched.order_log) == ORDER_LOG_SIZE
    assert sched.order_log[-1] == Priority.LOW  # the latest grants are the ones kept


def test_budgets_give_resource_exhausted(slow_add):
    dev = ReferenceDevice(budget=Budget(max_concurrent=1, max_queued=1, memory_bytes=1 << 20))
    m = add_model()
    pm = prepare(dev, m)
    big = add_model(shape=(512, 1024))
    pm_big = prepare(dev, big)
    rb = build_request(big, [np.zeros((512, 1024), np.float32)] * 2)
    assert pm_big.execute_synchronously(rb.request)[0] == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    cbs = []
    for _ in range(2):
        cb = CollectingCallback()
        pm.execute(build_request(m, feeds()).request, MeasureTiming.NO, None, None, cb)
        cbs.append(cb)
    time.sleep(0.01)
    status = pm.execute_synchronously(build_request(m, feeds()).request)[0]
    assert status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    for cb in cbs:
        assert cb.wait(10)[0] == ErrorStatus.NONE


# --- --driver --------------------------------------------------------------------------


def test_driver_names_and_module_callable():
    assert load_device("reference").version == HalVersion.V1_3
    assert load_device("reference-1.0").version == HalVersion.V1_0
    assert isinstance(load_device("driver.device:ReferenceDevice"), Device)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no-such-driver", "unknown driver 'no-such-driver': use one of"),
        ("builtins:object", "returned object, which does not implement the device protocol"),
        ("no_such_module_xyz:make", "cannot import driver module 'no_such_module_xyz'"),
        ("driver.registry:DRIVERS.nope", "'driver.registry' has no attribute 'DRIVERS.nope'"),
        (
            "driver.registry:PARTITIONED_PREFIX",
            "'driver.registry:PARTITIONED_PREFIX' is not callable",
        ),
        # A factory that raises: its exception, named, as a load error (not a traceback).
        (
            "driver.registry:load_device",
            "driver factory 'driver.registry:load_device' failed: TypeError",
        ),
        ("@isolated", "'@isolated': @isolated needs a driver before it"),
        # Only "isolated" itself, or with ":options", is the isolation suffix.
        ("reference@isolatedly", "unknown driver 'reference@isolatedly'"),
    ],
)
def test_a_bad_driver_value_is_a_load_error_that_says_why(spec, message):
    with pytest.raises(DriverLoadError) as e:
        load_device(spec)
    assert message in str(e.value)


def test_dropping_a_prepared_model_releases_it(device):
    import gc
    import weakref

    pm = prepare(device, add_model())
    ref = weakref.ref(pm)
    del pm
    gc.collect()
    assert ref() is None


def test_reference_at_feature_level_rejects_newer_operations():
    cfg = DeviceConfig(version=HalVersion.V1_0)
    dev = ReferenceDevice(cfg)
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_QUANT8_ASYMM_SIGNED, (2,), scale=1.0)
    y = b.add_input(T.TENSOR_QUANT8_ASYMM_SIGNED, (2,), scale=1.0)
    o = b.add_output(T.TENSOR_QUANT8_ASYMM_SIGNED, (2,), scale=1.0)
    b.add_operation(OperationType.ADD, [x, y, b.add_scalar(T.INT32, 0)], [o])
    assert dev.get_supported_operations(b.build())[0] == ErrorStatus.INVALID_ARGUMENT
