"""Deliberately misbehaving drivers for the out-of-process tests (``tests.drivers:NAME``).

Each is the reference driver, except that an execution whose first input starts with
:data:`TRIGGER` misbehaves in its own way; every other call behaves, so the same driver
shows both that a failure is caught and that the harness carries on afterwards.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from typing import Any

import numpy as np

from driver.device import ReferenceDevice
from driver.hal.types import (
    NO_TIMING,
    BufferToken,
    DeviceType,
    ErrorStatus,
    Extension,
    ExtensionOperandTypeInformation,
    HalVersion,
    Memory,
    OutputShape,
    Priority,
    Request,
    Timing,
)
from driver.memory import pool_buffer

TRIGGER = 13.0


def _triggered(request: Request) -> bool:
    if not request.inputs or request.inputs[0].has_no_value:
        return False
    loc = request.inputs[0].location
    pool = request.pools[loc.pool_index]
    if isinstance(pool, BufferToken) or not isinstance(pool, Memory) or loc.length < 4:
        return False
    first = np.frombuffer(bytes(pool_buffer(pool)[loc.offset : loc.offset + 4]), np.float32)
    return bool(first[0] == TRIGGER)


def _segfault() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


EXIT_WORDS = "the driver printed this to stdout before exiting"


def _exit() -> None:
    print(EXIT_WORDS, flush=True)
    os._exit(3)


def _raise() -> None:
    raise RuntimeError("a deliberate driver bug")


def _hang() -> None:
    threading.Event().wait()  # never set


def _end_a_thread_by_system_exit() -> None:
    # As in any Python program, SystemExit ends only its thread: the call carries on.
    worker = threading.Thread(target=sys.exit)
    worker.start()
    worker.join()


def _raise_in_thread() -> None:
    def worker() -> None:
        raise ValueError("a deliberate bug in a driver thread")

    threading.Thread(target=worker).start()
    _hang()  # the call never returns: only the thread's exception can end it


class _Misbehaving:
    """A prepared model that runs ``action`` before executing a triggering request."""

    def __init__(self, inner: Any, action):
        self._inner = inner
        self._action = action

    def _check(self, request: Request) -> None:
        if _triggered(request):
            self._action()

    def execute_synchronously(self, request, measure=0, deadline=None, loop_timeout=None):
        self._check(request)
        return self._inner.execute_synchronously(request, measure, deadline, loop_timeout)

    def execute(self, request, measure, deadline, loop_timeout, callback):
        self._check(request)
        return self._inner.execute(request, measure, deadline, loop_timeout, callback)

    def execute_fenced(self, request, wait_for, measure=0, deadline=None, loop_timeout=None, timeout_after_fence=None):  # fmt: skip
        if _triggered(request):
            # Misbehave once the fences have signalled, as the real work would; the work
            # never finishes, so the fence returned is never signalled.
            from driver.launch import FencedCallback
            from driver.sync import SyncFence

            def later() -> None:
                for fence in wait_for:
                    fence.wait(None)
                self._action()

            threading.Thread(target=later, daemon=True).start()
            return ErrorStatus.NONE, SyncFence(), FencedCallback()
        return self._inner.execute_fenced(
            request, wait_for, measure, deadline, loop_timeout, timeout_after_fence
        )

    def configure_execution_burst(self):
        return self._inner.configure_execution_burst()


class _NotifyingThenMisbehaving(_Misbehaving):
    """Notifies a triggering asynchronous execution's completion, then misbehaves before
    its launch returns."""

    def execute(self, request, measure, deadline, loop_timeout, callback):
        if _triggered(request):
            callback.notify(ErrorStatus.NONE, [], NO_TIMING)
            self._action()
        return self._inner.execute(request, measure, deadline, loop_timeout, callback)


class MisbehavingDevice(ReferenceDevice):
    def __init__(self, action, prepared=_Misbehaving):
        super().__init__()
        self._action = action
        self._prepared = prepared

    def prepare_model(self, model, *args, **kwargs):
        status, prepared = super().prepare_model(model, *args, **kwargs)
        return status, (self._prepared(prepared, self._action) if prepared is not None else None)


def segfaulting() -> MisbehavingDevice:
    return MisbehavingDevice(_segfault)


def exiting() -> MisbehavingDevice:
    return MisbehavingDevice(_exit)


def raising() -> MisbehavingDevice:
    return MisbehavingDevice(_raise)


def hanging() -> MisbehavingDevice:
    return MisbehavingDevice(_hang)


class _PidStamping:
    """Writes the process id into the first 4 bytes of output 0 after executing."""

    def __init__(self, inner: Any):
        self._inner = inner

    def execute_synchronously(self, request, measure=0, deadline=None, loop_timeout=None):
        result = self._inner.execute_synchronously(request, measure, deadline, loop_timeout)
        loc = request.outputs[0].location
        out = pool_buffer(request.pools[loc.pool_index])
        out[loc.offset : loc.offset + 4] = np.int32(os.getpid()).tobytes()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class PidStampingDevice(ReferenceDevice):
    def prepare_model(self, model, *args, **kwargs):
        status, prepared = super().prepare_model(model, *args, **kwargs)
        return status, (_PidStamping(prepared) if prepared is not None else None)


def thread_raising() -> MisbehavingDevice:
    return MisbehavingDevice(_raise_in_thread)


def notifying_then_exiting() -> MisbehavingDevice:
    return MisbehavingDevice(_exit, _NotifyingThenMisbehaving)


def thread_exiting() -> MisbehavingDevice:
    return MisbehavingDevice(_end_a_thread_by_system_exit)


def pid_stamping() -> PidStampingDevice:
    return PidStampingDevice()


def unloadable() -> Any:
    raise RuntimeError("this driver cannot be constructed")


# ---------------------------------------------------------------------------------------
# Drivers that break one HAL reporting rule on every execution path (the pytest plugin's
# tests: tests/test_plugin.py). Each wraps the reference; ``refuse`` answers a request
# before the reference sees it, ``rewrite`` changes what a finished execution reports.
# ---------------------------------------------------------------------------------------


class _Relay:
    def __init__(self, notify):
        self.notify = notify


class _FencedInfo:
    def __init__(self, inner: Any, rewrite):
        self._inner, self._rewrite = inner, rewrite

    def get_execution_info(self):
        return self._rewrite(*self._inner.get_execution_info())


class _Reporting:
    """A prepared model whose executions pass through ``refuse(request, deadline)`` (a
    status ends the execution there) and ``rewrite(model, measure, status, shapes,
    timing)``."""

    def __init__(self, inner: Any, refuse, rewrite):
        self.inner, self._refuse, self._rewrite = inner, refuse, rewrite
        self._model = getattr(inner, "model", None)  # the reference's prepared models have it

    def _run(self, request, measure, deadline, run):
        status = self._refuse(request, deadline)
        if status is not None:
            return status, [], NO_TIMING
        return self._rewrite(self._model, measure, *run())

    def execute_synchronously(self, request, measure=0, deadline=None, loop_timeout=None):
        return self._run(
            request,
            measure,
            deadline,
            lambda: self.inner.execute_synchronously(request, measure, deadline, loop_timeout),
        )

    def execute(self, request, measure, deadline, loop_timeout, callback):
        status = self._refuse(request, deadline)
        if status is not None:
            callback.notify(status, [], NO_TIMING)
            return status
        model = self._model
        relay = _Relay(lambda *result: callback.notify(*self._rewrite(model, measure, *result)))
        return self.inner.execute(request, measure, deadline, loop_timeout, relay)

    def execute_fenced(self, request, wait_for, measure=0, deadline=None, loop_timeout=None, timeout_after_fence=None):  # fmt: skip
        status = self._refuse(request, deadline)
        if status is not None:
            return status, None, None
        status, fence, info = self.inner.execute_fenced(
            request, wait_for, measure, deadline, loop_timeout, timeout_after_fence
        )
        if info is None:
            return status, fence, info

        def rewrite(st, launched, fenced):
            timings = (self._rewrite(self._model, measure, st, [], t)[2] for t in (launched, fenced))  # fmt: skip
            return st, *timings

        return status, fence, _FencedInfo(info, rewrite)

    def configure_execution_burst(self):
        status, burst = self.inner.configure_execution_burst()
        return status, (_ReportingBurst(self, burst) if burst is not None else None)


class _ReportingBurst:
    def __init__(self, prepared: _Reporting, inner: Any):
        self._prepared, self._inner = prepared, inner

    def execute(self, request, measure=0, deadline=None, loop_timeout=None):
        return self._prepared._run(
            request,
            measure,
            deadline,
            lambda: self._inner.execute(request, measure, deadline, loop_timeout),
        )

    def free_memory(self, memory) -> None:
        self._inner.free_memory(memory)


def _never(request, deadline):
    return None


def _unchanged(model, measure, status, shapes, timing):
    return status, shapes, timing


class ReportingDevice:
    """The reference device (``inner``) with :class:`_Reporting` prepared models (or
    those of the ``prepared`` subclass, a misbehaving path of its own)."""

    def __init__(self, inner: Any = None, *, refuse=_never, rewrite=_unchanged, prepared=None):
        self.inner = inner if inner is not None else ReferenceDevice()
        self._refuse, self._rewrite = refuse, rewrite
        self._prepared = prepared or _Reporting

    def _wrap(self, result):
        status, prepared = result
        if prepared is None:
            return status, None
        return status, self._prepared(prepared, self._refuse, self._rewrite)

    def prepare_model(self, model, *args, **kwargs):
        return self._wrap(self.inner.prepare_model(model, *args, **kwargs))

    def prepare_model_from_cache(self, *args, **kwargs):
        return self._wrap(self.inner.prepare_model_from_cache(*args, **kwargs))

    def allocate(self, desc, prepared_models, input_roles, output_roles):
        inner = [getattr(p, "inner", p) for p in prepared_models]
        return self.inner.allocate(desc, inner, input_roles, output_roles)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _timing_always(model, measure, status, shapes, timing):
    # Reported even unmeasured, and time on device (500 us) above time in driver (5 us).
    return status, shapes, (Timing(500, 5) if status == ErrorStatus.NONE else timing)


def timing_always_reported() -> ReportingDevice:
    return ReportingDevice(rewrite=_timing_always)


def _non_ashmem_pool(request, deadline):
    names = {pool.name for pool in request.pools if isinstance(pool, Memory)}
    return ErrorStatus.GENERAL_FAILURE if names - {"ashmem"} else None


def _late(model, measure, status, shapes, timing):
    time.sleep(0.2)
    return status, shapes, timing


def late_completing() -> ReportingDevice:
    """Completes every execution 0.2 s late: an asynchronous one after its launch has
    returned."""
    return ReportingDevice(rewrite=_late)


def ashmem_only() -> ReportingDevice:
    """Maps only ``ashmem`` pools (``mmap_fd`` must be mapped too; from HAL 1.3 also
    ``hardware_buffer_blob``)."""
    return ReportingDevice(refuse=_non_ashmem_pool)


def reversed_shapes() -> ReportingDevice:
    return ReportingDevice(
        rewrite=lambda model, measure, status, shapes, timing: (
            status,
            [OutputShape(tuple(reversed(s.dimensions)), s.is_sufficient) for s in shapes],
            timing,
        )
    )


def _no_static_shapes(model, measure, status, shapes, timing):
    main = model.main
    static = all(
        main.operands[i].dimensions and 0 not in main.operands[i].dimensions
        for i in main.output_indexes
    )
    return status, ([] if status == ErrorStatus.NONE and static else shapes), timing


def no_shapes() -> ReportingDevice:
    """Reports no output shapes on success when the model specifies them all (a 1.2+
    driver must report one per output all the same)."""
    return ReportingDevice(rewrite=_no_static_shapes)


class _RefusingQos(ReportingDevice):
    """Refuses every priority but MEDIUM and every deadline, even one far away."""

    def prepare_model(
        self, model, preference=1, priority=Priority.MEDIUM, deadline=None, *args, **kwargs
    ):
        if priority != Priority.MEDIUM:
            return ErrorStatus.INVALID_ARGUMENT, None
        if deadline is not None:
            return ErrorStatus.MISSED_DEADLINE_PERSISTENT, None
        return super().prepare_model(model, preference, priority, deadline, *args, **kwargs)


def refusing_qos() -> ReportingDevice:
    return _RefusingQos(
        refuse=lambda request, deadline: (
            None if deadline is None else ErrorStatus.MISSED_DEADLINE_PERSISTENT
        )
    )


def _passed(deadline) -> bool:
    return deadline is not None and time.monotonic_ns() > deadline


class _TransientDeadlines(ReportingDevice):
    """Says MISSED_DEADLINE_TRANSIENT for a deadline already passed (it stays passed:
    MISSED_DEADLINE_PERSISTENT), preparing and executing."""

    def prepare_model(
        self, model, preference=1, priority=Priority.MEDIUM, deadline=None, *args, **kwargs
    ):
        if _passed(deadline):
            return ErrorStatus.MISSED_DEADLINE_TRANSIENT, None
        return super().prepare_model(model, preference, priority, deadline, *args, **kwargs)


def transient_deadlines() -> ReportingDevice:
    return _TransientDeadlines(
        refuse=lambda request, deadline: (
            ErrorStatus.MISSED_DEADLINE_TRANSIENT if _passed(deadline) else None
        )
    )


def _all_sufficient(model, measure, status, shapes, timing):
    return status, [OutputShape(s.dimensions, True) for s in shapes], timing


def short_outputs_sufficient() -> ReportingDevice:
    """Reports the output that is too small (OUTPUT_INSUFFICIENT_SIZE) as sufficient."""
    return ReportingDevice(rewrite=_all_sufficient)


def _invalid_as_general_failure(model, measure, status, shapes, timing):
    wrong = ErrorStatus.GENERAL_FAILURE if status == ErrorStatus.INVALID_ARGUMENT else status
    return wrong, shapes, timing


def _burst_only(rewrite) -> type[_Reporting]:
    """Prepared models whose bursts (the last path) report through ``rewrite``; the
    other paths report what the reference does (a property must try every path)."""

    class _BurstRewrites(_Reporting):
        def configure_execution_burst(self):
            status, burst = self.inner.configure_execution_burst()
            if burst is None:
                return status, None
            return status, _ReportingBurst(_Reporting(self.inner, _never, rewrite), burst)

    return _BurstRewrites


def burst_misreports_invalid() -> ReportingDevice:
    """Bursts (the last path) answer an invalid request with GENERAL_FAILURE; the other
    paths rightly say INVALID_ARGUMENT."""
    return ReportingDevice(prepared=_burst_only(_invalid_as_general_failure))


def _persistent_as_transient(model, measure, status, shapes, timing):
    if status == ErrorStatus.MISSED_DEADLINE_PERSISTENT:
        status = ErrorStatus.MISSED_DEADLINE_TRANSIENT
    return status, shapes, timing


def burst_transient_deadlines() -> ReportingDevice:
    """Bursts answer an execution past its deadline MISSED_DEADLINE_TRANSIENT; prepareModel
    and the other paths rightly say MISSED_DEADLINE_PERSISTENT."""
    return ReportingDevice(prepared=_burst_only(_persistent_as_transient))


def burst_short_outputs_sufficient() -> ReportingDevice:
    """Bursts report an output that is too small as sufficient; the other paths do not."""
    return ReportingDevice(prepared=_burst_only(_all_sufficient))


def refusing_execution_deadlines() -> ReportingDevice:
    """Prepares with every priority and deadline, but refuses every execution given a
    deadline, even one an hour away."""
    return ReportingDevice(
        refuse=lambda request, deadline: (
            None if deadline is None else ErrorStatus.MISSED_DEADLINE_PERSISTENT
        )
    )


def _every_output_insufficient(model, measure, status, shapes, timing):
    if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        shapes = [OutputShape(s.dimensions, False) for s in shapes]
    return status, shapes, timing


def every_output_insufficient() -> ReportingDevice:
    """With one output buffer too small, reports every output insufficient."""
    return ReportingDevice(rewrite=_every_output_insufficient)


def _timed_insufficient(model, measure, status, shapes, timing):
    if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        timing = Timing(5, 10)
    return status, shapes, timing


def timing_when_insufficient() -> ReportingDevice:
    """Reports timing for an execution that failed with OUTPUT_INSUFFICIENT_SIZE."""
    return ReportingDevice(rewrite=_timed_insufficient)


class _OneFlagShort(ReportingDevice):
    def get_supported_operations(self, model):
        status, supported = self.inner.get_supported_operations(model)
        return status, list(supported)[:-1]


def one_flag_short() -> ReportingDevice:
    """getSupportedOperations leaves out the last operation's flag."""
    return _OneFlagShort()


class _SupportingInvalidModels(ReportingDevice):
    def get_supported_operations(self, model):
        return ErrorStatus.NONE, [True] * len(model.main.operations)


def supporting_invalid_models() -> ReportingDevice:
    """getSupportedOperations says NONE, every operation supported, for any model (invalid
    ones too); prepareModel rightly refuses an invalid one."""
    return _SupportingInvalidModels()


class _PreparingInvalidModels(ReportingDevice):
    def prepare_model(self, model, *args, **kwargs):
        status, prepared = super().prepare_model(model, *args, **kwargs)
        if status == ErrorStatus.INVALID_ARGUMENT:
            prepared = _Reporting(None, _never, _unchanged)
        return status, prepared


def preparing_invalid_models() -> ReportingDevice:
    """prepareModel of an invalid model says INVALID_ARGUMENT but returns a prepared model
    all the same."""
    return _PreparingInvalidModels()


class _ZeroingBuffer:
    def __init__(self, inner: Any):
        self._inner = inner

    def copy_to(self, dst):
        status = self._inner.copy_to(dst)
        view = pool_buffer(dst)
        view[:] = bytes(len(view))
        return status

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _BuffersCopyOutZeros(ReportingDevice):
    def allocate(self, desc, prepared_models, input_roles, output_roles):
        status, buffer, token = super().allocate(desc, prepared_models, input_roles, output_roles)
        return status, (_ZeroingBuffer(buffer) if buffer is not None else None), token


def buffers_copy_out_zeros() -> ReportingDevice:
    """Driver-managed buffers whose copyTo answers NONE but writes zeros."""
    return _BuffersCopyOutZeros()


class _CachelessInvalid(ReportingDevice):
    def get_number_of_cache_files_needed(self):
        return ErrorStatus.NONE, 0, 0

    def prepare_model_from_cache(self, *args, **kwargs):
        return ErrorStatus.INVALID_ARGUMENT, None


def cacheless_invalid() -> ReportingDevice:
    """Needs no cache files (no caching), yet answers prepareModelFromCache with
    INVALID_ARGUMENT instead of GENERAL_FAILURE."""
    return _CachelessInvalid()


def _more_than_two_pools(status):
    # The memory-pressure stress test pads its requests with a third pool.
    return lambda request, deadline: status if len(request.pools) > 2 else None


def pressed_1_2_general_failure() -> ReportingDevice:
    """A HAL 1.2 driver out of memory for padded requests: GENERAL_FAILURE, the only
    failure status 1.2 has."""
    from driver.drivers.feature_level import feature_level_reference

    inner = feature_level_reference(HalVersion.V1_2)
    return ReportingDevice(inner, refuse=_more_than_two_pools(ErrorStatus.GENERAL_FAILURE))


def pressed_1_2_resource_exhausted() -> ReportingDevice:
    """The same, answering RESOURCE_EXHAUSTED_TRANSIENT: a 1.3 status a 1.2 driver
    cannot report."""
    from driver.drivers.feature_level import feature_level_reference

    inner = feature_level_reference(HalVersion.V1_2)
    status = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    return ReportingDevice(inner, refuse=_more_than_two_pools(status))


class _IgnoringFences(_Reporting):
    def execute_fenced(self, request, wait_for, measure=0, deadline=None, loop_timeout=None, timeout_after_fence=None):  # fmt: skip
        return self.inner.execute_fenced(
            request, [], measure, deadline, loop_timeout, timeout_after_fence
        )


def ignoring_fences() -> ReportingDevice:
    """executeFenced runs at once, without waiting for (or looking at) its fences."""
    return ReportingDevice(prepared=_IgnoringFences)


class _IgnoringFencesWithoutFence(_Reporting):
    def execute_fenced(self, request, wait_for, measure=0, deadline=None, loop_timeout=None, timeout_after_fence=None):  # fmt: skip
        status, fence, info = self.inner.execute_fenced(
            request, [], measure, deadline, loop_timeout, timeout_after_fence
        )
        if fence is not None:
            fence.wait(None)
        return status, None, info


def ignoring_fences_without_fence() -> ReportingDevice:
    """executeFenced runs to the end without waiting for its fences, and returns no fence
    (the HAL's way to say the work is done)."""
    return ReportingDevice(prepared=_IgnoringFencesWithoutFence)


class _FencedWithoutDims(_Reporting):
    """executeFenced of outputs with unspecified dims runs instead of being refused."""

    def execute_fenced(self, request, wait_for, measure=0, deadline=None, loop_timeout=None, timeout_after_fence=None):  # fmt: skip
        status, fence, info = self.inner.execute_fenced(
            request, wait_for, measure, deadline, loop_timeout, timeout_after_fence
        )
        if status != ErrorStatus.INVALID_ARGUMENT:
            return status, fence, info
        from driver.launch import FencedCallback
        from driver.sync import SyncFence

        status, _, timing = self.inner.execute_synchronously(request, measure, deadline, None)
        info = FencedCallback()
        info.set(status, timing, timing)
        return ErrorStatus.NONE, SyncFence.signalled(), info


def fenced_without_dims() -> ReportingDevice:
    return ReportingDevice(prepared=_FencedWithoutDims)


class _InconsistentQueries(ReportingDevice):
    """Queries that change between calls and say invalid things."""

    def __init__(self):
        super().__init__()
        self._calls = 0

    def get_version_string(self):
        self._calls += 1
        return ErrorStatus.NONE, f"build {self._calls}"

    def get_type(self):
        return ErrorStatus.NONE, DeviceType.GPU if self._calls % 2 else DeviceType.CPU

    def get_supported_extensions(self):
        bad = Extension("Fibonacci", (ExtensionOperandTypeInformation(0, False, 0),))
        return ErrorStatus.NONE, [bad, bad]

    def get_capabilities(self):
        from dataclasses import replace

        status, caps = self.inner.get_capabilities()
        return status, replace(caps, operand_performance=tuple(reversed(caps.operand_performance)))


def inconsistent_queries() -> ReportingDevice:
    return _InconsistentQueries()


UNKNOWN_STATUS = 9999
"""A uint32 status code that is no HAL ``ErrorStatus``."""


class _ShapelessResults:
    """A prepared model whose synchronous executions report output shapes that are not
    shapes (a malformed result)."""

    def __init__(self, inner: Any):
        self._inner = inner

    def execute_synchronously(self, request, measure=0, deadline=None, loop_timeout=None):
        status, _, timing = self._inner.execute_synchronously(
            request, measure, deadline, loop_timeout
        )
        return status, ["not a shape"], timing


class _BadStatusQueries(ReferenceDevice):
    """Answers ``getVersionString`` with a status no HAL status code can carry, and
    ``getType`` with a code the HAL does not know (:data:`UNKNOWN_STATUS`); its
    synchronous executions return malformed results (:class:`_ShapelessResults`)."""

    def get_version_string(self):
        return -1, self.config.version_string

    def get_type(self):
        return UNKNOWN_STATUS, DeviceType.CPU

    def prepare_model(self, model, *args, **kwargs):
        status, prepared = super().prepare_model(model, *args, **kwargs)
        return status, (_ShapelessResults(prepared) if prepared is not None else None)


def bad_status() -> ReferenceDevice:
    return _BadStatusQueries()


def _wrong_dynamic_shapes(model, measure, status, shapes, timing):
    main = model.main
    dynamic = any(0 in main.operands[i].dimensions for i in main.output_indexes)
    if status != ErrorStatus.NONE or not dynamic:
        return status, shapes, timing
    return status, [OutputShape((*s.dimensions, 1), s.is_sufficient) for s in shapes], timing


def wrong_dynamic_shapes() -> ReportingDevice:
    """Reports a trailing extra dimension of 1 for every output when the model leaves an
    output's dims unspecified (right values, wrong shapes: only the dynamic-output-shape
    run of a spec fails)."""
    return ReportingDevice(rewrite=_wrong_dynamic_shapes)


def relaxed_in_float16() -> ReferenceDevice:
    """The reference computing relaxed models in float16 range and precision, as the HAL
    allows (a correct driver whose relaxed results differ from float32's)."""
    from driver.device import DeviceConfig

    return ReferenceDevice(DeviceConfig(name="relaxed-in-float16", emulate_relaxed_float16=True))


class _UncommonFencedAnswers(_Reporting):
    """executeFenced answered as the HAL allows but the reference never does: with no
    fences to wait for, the execution is over before it returns, so no sync fence comes
    back; with fences, the sync fence comes back without a callback, so it alone says
    how the execution ended."""

    def execute_fenced(self, request, wait_for, measure=0, deadline=None, loop_timeout=None, timeout_after_fence=None):  # fmt: skip
        status, fence, info = self.inner.execute_fenced(
            request, wait_for, measure, deadline, loop_timeout, timeout_after_fence
        )
        if wait_for or fence is None:
            return status, fence, None
        fence.wait()
        return status, None, info


class _UncommonAnswers(ReportingDevice):
    def get_number_of_cache_files_needed(self):
        return ErrorStatus.NONE, 2, 1  # the reference needs one of each


def uncommon_answers() -> ReportingDevice:
    """Valid answers the reference never gives (two model-cache files and one data-cache
    file; the fenced executions of :class:`_UncommonFencedAnswers`)."""
    return _UncommonAnswers(prepared=_UncommonFencedAnswers)
