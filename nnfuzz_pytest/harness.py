"""Calling a driver under test safely: every call has a time limit and a verdict.

A driver must never raise and never hang (``driver/hal/device.py``). The harness calls it
on a daemon thread and waits at most ``timeout`` seconds: a call that does not return is
a :class:`DriverHang`, an exception that escapes it (or a service process that died) is a
:class:`DriverCrash`. Both are ``AssertionError``s, so a property that meets one fails
with the classification in its message, and Hypothesis shrinks towards the smallest model
that still hangs or crashes.

An in-process thread that hangs cannot be killed. :class:`DriverUnderTest` then replaces
the device with a fresh one from its factory, so the rest of the suite keeps going, and
:data:`HUNG_CALLS` remembers the hang: the plugin ends the process after its summary
(the driver's own worker threads would otherwise keep Python from exiting). Out-of-process
drivers (``NAME@isolated``) avoid both problems; the stress tests use them when available.
"""

from __future__ import annotations

import contextlib
import enum
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from driver.builder import RequestBundle, build_request
from driver.hal.types import (
    NO_TIMING,
    BufferToken,
    ErrorStatus,
    HalVersion,
    MeasureTiming,
    Memory,
    Model,
    OutputShape,
    Request,
    Timing,
    is_scalar_type,
    non_extension_size_of_data,
    tensor_has_unspecified_dimensions,
)
from driver.operations.base import array_from_bytes
from driver.sync import SyncFence

V = HalVersion

HUNG_CALLS: list[str] = []
"""Every driver call that did not return in time (the plugin reads it at exit)."""


class Verdict(enum.Enum):
    """How one driver interaction ended (Android MLTS stress-test classification)."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"  # a wrong status or wrong values
    HANG = "HANG"  # no answer within the time limit
    CRASH = "CRASH"  # an exception escaped the driver, or its process died


class DriverHang(AssertionError):
    """A driver call did not return within the time limit."""


class DriverCrash(AssertionError):
    """An exception escaped the driver (or its service process died)."""


def _status_name(status: Any) -> str:
    try:
        return ErrorStatus(status).name
    except (ValueError, TypeError):
        return repr(status)


class _Workers:
    """Long-lived daemon threads that make the driver calls.

    Long-lived, not a thread per call: a child process whose parent *thread* exits can
    be killed with it (``PR_SET_PDEATHSIG`` follows the thread that forked), so an
    out-of-process driver must be started from a thread that stays. A worker stuck in a
    hung call is abandoned; the pool grows when no worker is idle."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> tuple[threading.Event, dict]:
        with self._lock:
            worker = self._idle.pop() if self._idle else _Worker(self)
        return worker.run(fn)

    def release(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)


class _Worker:
    def __init__(self, pool: _Workers) -> None:
        import queue

        self.pool = pool
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="nnfuzz-driver-call", daemon=True).start()

    def run(self, fn: Callable[[], Any]) -> tuple[threading.Event, dict]:
        done, box = threading.Event(), {}
        self.jobs.put((fn, done, box))
        return done, box

    def _loop(self) -> None:
        while True:
            fn, done, box = self.jobs.get()
            try:
                box["value"] = fn()
            except BaseException as e:  # anything escaping the driver is the finding
                box["error"] = e
            done.set()
            self.pool.release(self)


_WORKERS = _Workers()


def call_with_timeout(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """``fn()`` on a worker thread; its result, or :class:`DriverHang` /
    :class:`DriverCrash`."""
    done, box = _WORKERS.submit(fn)
    if not done.wait(timeout):
        HUNG_CALLS.append(what)
        raise DriverHang(f"HANG: {what} did not return within {timeout:g} s")
    if "error" in box:
        e = box["error"]
        raise DriverCrash(f"CRASH: {what} raised {type(e).__name__}: {e}") from e
    return box.get("value")


# ---------------------------------------------------------------------------------------
# Execution results
# ---------------------------------------------------------------------------------------

PATHS = ("sync", "async", "fenced", "burst")


def paths_for(version: HalVersion) -> tuple[str, ...]:
    """The execution paths a driver of ``version`` has: 1.0/1.1 only ``execute`` (async);
    1.2 adds ``executeSynchronously`` and bursts; 1.3 adds ``executeFenced``."""
    if version < V.V1_2:
        return ("async",)
    if version < V.V1_3:
        return ("sync", "async", "burst")
    return PATHS


@dataclass
class Execution:
    """What one execution reported, and the outputs read back when it succeeded."""

    path: str
    status: int
    shapes: list[OutputShape]
    timing: Timing  # fenced: timingFenced
    outputs: list[np.ndarray] | None = None
    launch_status: int | None = None  # async/fenced: the status the launch returned
    measure: int = MeasureTiming.NO  # what the execution was asked to measure
    timing_launched: Timing | None = None  # fenced: timingLaunched
    fence_status: int | None = None  # fenced: waiting on the returned fence (None: none)
    # The output dims the model and request fully specify, which a successful execution
    # must report (None for an output left unspecified); None when the path reports no
    # shapes (HAL 1.0/1.1, executeFenced).
    declared_dims: list[tuple[int, ...] | None] | None = None

    @property
    def ok(self) -> bool:
        return self.status == ErrorStatus.NONE

    def describe(self, with_path: bool = True) -> str:
        """The outcome, e.g. ``sync: INVALID_ARGUMENT`` (without the path for messages
        that name it already)."""
        text = _status_name(self.status)
        if with_path:
            text = f"{self.path}: {text}"
        if self.launch_status is not None and self.launch_status != self.status:
            text += f" (launch returned {_status_name(self.launch_status)})"
        return text


MEMORY_NAME_VERSIONS = {"ashmem": V.V1_0, "mmap_fd": V.V1_0, "hardware_buffer_blob": V.V1_3}
"""Request pool kinds a driver must map, and from which HAL version (seed 004:
``hardware_buffer_blob`` exists from 1.2 but is required only from 1.3)."""


def memory_names_for(version: HalVersion) -> tuple[str, ...]:
    return tuple(name for name, since in MEMORY_NAME_VERSIONS.items() if since <= version)


def with_pool_names(bundle: RequestBundle, input_name: str, output_name: str) -> RequestBundle:
    """``bundle`` with its input and output pools presented as the named memory kinds
    (the same shared memory: every kind the harness uses is a mappable fd)."""
    renamed = {}
    for pool, name in ((bundle.input_pool, input_name), (bundle.output_pool, output_name)):
        if isinstance(pool, Memory) and pool.name != name:
            renamed[id(pool)] = Memory(name, pool.size, pool.handle)
    if not renamed:
        return bundle
    pools = [renamed.get(id(p), p) for p in bundle.request.pools]
    return replace(
        bundle,
        request=replace(bundle.request, pools=tuple(pools)),
        input_pool=renamed.get(id(bundle.input_pool), bundle.input_pool),
        output_pool=renamed.get(id(bundle.output_pool), bundle.output_pool),
    )


FENCE_STATES = ("signalled", "later", "failed", "failed later")
"""What a fence given to executeFenced does: signalled before the launch, signalled by
the harness :data:`FENCE_DELAY` seconds after it, or either with an error (a failed
producer)."""
FENCE_DELAY = 0.01  # long enough for executeFenced to return first, short for the suite


class _FenceRelease:
    """The fences of one executeFenced and the timer that signals the "later" ones; it
    notes an execution that was over before they were signalled (a driver that does not
    wait for its fences)."""

    def __init__(self, states: Sequence[str]):
        unknown = [s for s in states if s not in FENCE_STATES]
        if unknown:
            raise ValueError(f"unknown fence state(s) {unknown}: use {FENCE_STATES}")
        self.fences = [SyncFence() for _ in states]
        self._pending = []
        for fence, state in zip(self.fences, states):
            failed = state.startswith("failed")
            if state.endswith("later"):
                self._pending.append((fence, failed))
            else:
                fence.signal(error=failed)
        # A fence failed before the launch may end the execution at once.
        self._judged = bool(self._pending) and "failed" not in states
        self._lock = threading.Lock()
        self._released = not self._pending
        self._result_fence: Any = None
        self._timer: threading.Timer | None = None
        self.too_early = False

    def start(self) -> None:
        if self._pending:
            self._timer = threading.Timer(FENCE_DELAY, self._release)
            self._timer.daemon = True
            self._timer.start()

    def launched(self, result_fence: Any) -> None:
        """executeFenced returned NONE with ``result_fence`` (None: the work is done)."""
        with self._lock:
            if self._judged and not self._released:
                if result_fence is None:
                    self.too_early = True
                self._result_fence = result_fence

    def _release(self) -> None:
        with self._lock:
            fence = self._result_fence
            if fence is not None and fence.wait(0) != ErrorStatus.MISSED_DEADLINE_TRANSIENT:
                self.too_early = True  # signalled before what it waits for
            for pending, failed in self._pending:
                pending.signal(error=failed)
            self._released = True

    def join(self) -> None:
        if self._timer is not None:
            self._timer.join()


def declared_output_dims(model: Model, request: Request) -> list[tuple[int, ...] | None]:
    """Each output's dims as the model and request together fully specify them (None
    where they leave any unspecified)."""
    main = model.main
    dims: list[tuple[int, ...] | None] = []
    for k, idx in enumerate(main.output_indexes):
        operand = main.operands[idx]
        given = tuple(operand.dimensions)
        if k < len(request.outputs) and request.outputs[k].dimensions:
            given = tuple(request.outputs[k].dimensions)
        if is_scalar_type(operand.type):
            dims.append(())
        elif tensor_has_unspecified_dimensions(operand.type, given):
            dims.append(None)
        else:
            dims.append(given)
    return dims


@dataclass
class Prepared:
    """A prepared model together with the model it came from."""

    model: Model
    handle: Any
    bursts: list[Any] = field(default_factory=list)


class DriverUnderTest:
    """A device plus what the suite needs to drive it: its HAL version, a time limit per
    call, and a factory to start over after a hang or crash."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        name: str,
        version: HalVersion | None = None,
        timeout: float = 30.0,
    ):
        self.factory = factory
        self.name = name
        self.timeout = timeout
        self._device = call_with_timeout(factory, timeout, f"creating driver {name!r}")
        self.version = version or HalVersion(getattr(self._device, "version", V.V1_3))
        self.generation = 0  # bumped when the device is replaced
        self._lock = threading.Lock()

    # --- the device -------------------------------------------------------------------
    @property
    def device(self) -> Any:
        return self._device

    def restart(self) -> None:
        """A fresh device (after a hang or crash the old one may be wedged)."""
        with self._lock:
            self._device = call_with_timeout(self.factory, self.timeout, f"recreating {self.name}")
            self.generation += 1

    def call(self, what: str, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        try:
            return call_with_timeout(fn, timeout or self.timeout, what)
        except (DriverHang, DriverCrash):
            # A fresh device for what follows (a broken factory: the next call says so).
            with contextlib.suppress(DriverHang, DriverCrash):
                self.restart()
            raise

    @property
    def paths(self) -> tuple[str, ...]:
        return paths_for(self.version)

    @property
    def measure(self) -> MeasureTiming:
        return MeasureTiming.YES if self.version >= V.V1_2 else MeasureTiming.NO

    # --- queries and preparation --------------------------------------------------------
    def supported(self, model: Model) -> tuple[int, list[bool]]:
        dev = self._device
        status, supported = self.call(
            "getSupportedOperations", lambda: dev.get_supported_operations(model)
        )
        return status, list(supported or [])

    def prepare(self, model: Model, **kw) -> tuple[int, Prepared | None]:
        dev = self._device
        status, handle = self.call("prepareModel", lambda: dev.prepare_model(model, **kw))
        return status, (Prepared(model, handle) if handle is not None else None)

    def must_prepare(self, model: Model, **kw) -> Prepared:
        status, prepared = self.prepare(model, **kw)
        assert status == ErrorStatus.NONE and prepared is not None, (
            f"prepareModel of a valid, supported model returned {_status_name(status)}"
            + _last_error(self._device)
        )
        return prepared

    def cache_files_needed(self) -> tuple[int, int]:
        dev = self._device
        status, n_model, n_data = self.call(
            "getNumberOfCacheFilesNeeded", dev.get_number_of_cache_files_needed
        )
        assert status == ErrorStatus.NONE, (
            f"getNumberOfCacheFilesNeeded returned {_status_name(status)}"
        )
        return int(n_model), int(n_data)

    # --- execution --------------------------------------------------------------------
    def execute(
        self,
        prepared: Prepared,
        request: Request,
        path: str = "sync",
        *,
        measure: MeasureTiming | None = None,
        deadline: int | None = None,
        fences: Sequence[str] = (),
    ) -> Execution:
        """One execution on ``path``; waits for asynchronous completion (bounded).
        ``fences``: the states of the sync fences executeFenced waits for
        (:data:`FENCE_STATES`)."""
        measure = self.measure if measure is None else measure
        execution = self._execute(prepared, request, path, measure, deadline, fences)
        execution.measure = measure
        if self.version >= V.V1_2 and path != "fenced":
            execution.declared_dims = declared_output_dims(prepared.model, request)
        return execution

    def _execute(
        self,
        prepared: Prepared,
        request: Request,
        path: str,
        measure: MeasureTiming,
        deadline: int | None,
        fences: Sequence[str],
    ) -> Execution:
        pm = prepared.handle
        timeout = self.timeout
        if path == "sync":
            status, shapes, timing = self.call(
                "executeSynchronously",
                lambda: pm.execute_synchronously(request, measure, deadline, None),
            )
            return Execution(path, status, list(shapes or []), timing)
        if path == "burst":

            def burst_run():
                if not prepared.bursts:
                    st, burst = pm.configure_execution_burst()
                    if st != ErrorStatus.NONE or burst is None:
                        return ("configure", st)
                    prepared.bursts.append(burst)
                burst = prepared.bursts[0]
                try:
                    return burst.execute(request, measure, deadline, None)
                finally:
                    # The pools are this execution's own: free their slots, as Android's
                    # burst controller does when a memory is destroyed (a burst reused
                    # by every test would otherwise keep them all mapped).
                    for pool in request.pools:
                        if isinstance(pool, Memory):
                            burst.free_memory(pool)

            result = self.call("burst execute", burst_run)
            if result[0] == "configure":
                raise AssertionError(
                    f"configureExecutionBurst returned {_status_name(result[1])}"
                    + _last_error(self._device)
                )
            status, shapes, timing = result
            return Execution(path, status, list(shapes or []), timing)
        if path == "async":
            from driver.device import CollectingCallback

            cb = CollectingCallback()
            launch = self.call(
                "execute (launch)", lambda: pm.execute(request, measure, deadline, None, cb)
            )
            try:
                status, shapes, timing = self.call(
                    "execute (callback)", lambda: cb.wait(timeout), timeout=timeout + 1
                )
            except DriverCrash as e:
                if isinstance(e.__cause__, TimeoutError):
                    HUNG_CALLS.append("execute callback")
                    raise DriverHang(
                        f"HANG: the execute callback was not notified within {timeout:g} s "
                        f"(launch returned {_status_name(launch)}; an exception in a driver "
                        "worker thread looks like this too)"
                    ) from None
                raise
            return Execution(path, status, list(shapes or []), timing, launch_status=launch)
        if path == "fenced":
            release = _FenceRelease(fences)

            def fenced_run():
                release.start()
                st, fence, callback = pm.execute_fenced(
                    request, release.fences, measure, deadline, None, None
                )
                if st != ErrorStatus.NONE:
                    return st, None, NO_TIMING, None, None
                release.launched(fence)
                fence_status = None
                if fence is not None:
                    fence_status = fence.wait(timeout)
                    if fence_status == ErrorStatus.MISSED_DEADLINE_TRANSIENT:
                        return None, None, None, None, None  # never signalled
                release.join()
                if callback is None:
                    return st, st, NO_TIMING, None, fence_status
                info_status, launched, fenced_timing = callback.get_execution_info()
                return st, info_status, fenced_timing, launched, fence_status

            launch, status, timing, launched, fence_status = self.call(
                "executeFenced", fenced_run, timeout=timeout + 1
            )
            if release.too_early:
                raise AssertionError(
                    "executeFenced finished (no fence returned, or the returned fence "
                    "signalled) before the fences it waits for were signalled"
                )
            if launch is None:
                HUNG_CALLS.append("executeFenced fence")
                raise DriverHang(
                    f"HANG: the executeFenced fence did not signal within {timeout:g} s"
                )
            if status is None:
                return Execution(path, launch, [], NO_TIMING, launch_status=launch)
            return Execution(
                path,
                status,
                [],
                timing,
                launch_status=launch,
                timing_launched=launched,
                fence_status=fence_status,
            )
        raise ValueError(f"unknown execution path {path!r}")

    def run(
        self,
        prepared: Prepared,
        inputs: Sequence[np.ndarray | None],
        path: str = "sync",
        *,
        output_sizes: Sequence[int] | None = None,
        output_dims: Sequence[Sequence[int] | None] | None = None,
        deadline: int | None = None,
        measure: MeasureTiming | None = None,
        pools: tuple[str, str] = ("ashmem", "ashmem"),
        fences: Sequence[str] = (),
    ) -> Execution:
        """Execute with a fresh request for ``inputs`` and read the outputs back.
        ``pools``: the memory kinds of the input pool and the output pool."""
        bundle = build_request(
            prepared.model, list(inputs), output_sizes=output_sizes, output_dims=output_dims
        )
        bundle = with_pool_names(bundle, *pools)
        execution = self.execute(
            prepared, bundle.request, path, deadline=deadline, measure=measure, fences=fences
        )
        if execution.ok:
            execution.outputs = read_outputs(prepared.model, bundle, execution.shapes)
        return execution


def _last_error(device: Any) -> str:
    msg = getattr(device, "last_error", "")
    return f" ({msg})" if msg else ""


def read_outputs(model: Model, bundle: RequestBundle, shapes: Sequence[OutputShape]) -> list:
    """The output arrays of a finished execution: dims from the reported shapes, else
    from the request (which may specify what the model leaves unknown), else the
    model's."""
    main = model.main
    outs = []
    requested = bundle.request.outputs
    for k, idx in enumerate(main.output_indexes):
        operand = main.operands[idx]
        dims = tuple(operand.dimensions)
        if k < len(requested) and requested[k].dimensions:
            dims = tuple(requested[k].dimensions)
        if k < len(shapes) and shapes[k].dimensions:
            dims = tuple(shapes[k].dimensions)
        if is_scalar_type(operand.type):
            dims = ()
        size = non_extension_size_of_data(operand.type, dims)
        outs.append(array_from_bytes(operand.type, dims, bundle.output_bytes(k)[:size]))
    return outs


def output_sizes_for(model: Model, expected: Sequence[np.ndarray]) -> list[int]:
    """Request output sizes that exactly fit ``expected`` (for unknown output dims)."""
    main = model.main
    return [
        max(1, non_extension_size_of_data(main.operands[i].type, tuple(e.shape)))
        for i, e in zip(main.output_indexes, expected)
    ]


def has_unspecified_outputs(model: Model) -> bool:
    main = model.main
    return any(
        tensor_has_unspecified_dimensions(main.operands[i].type, main.operands[i].dimensions)
        for i in main.output_indexes
    )


def fenced_output_dims(
    model: Model, expected: Sequence[np.ndarray]
) -> list[tuple[int, ...] | None] | None:
    """Request output dims that fully specify the outputs ``model`` leaves unspecified,
    taken from the expected outputs (executeFenced needs fully specified outputs); None
    when one of those is zero-sized: a request dim of 0 means "unknown", so no request
    can specify it."""
    main = model.main
    dims: list[tuple[int, ...] | None] = []
    for i, value in zip(main.output_indexes, expected):
        operand = main.operands[i]
        if not tensor_has_unspecified_dimensions(operand.type, operand.dimensions):
            dims.append(None)  # the model's own dims
        elif 0 in np.shape(value) or np.ndim(value) == 0:
            return None
        else:
            dims.append(tuple(np.shape(value)))
    return dims


def with_pool_token(
    request: Request, token: int, *, input: int | None = None, output: int | None = None
) -> Request:
    """``request`` with one argument moved to a driver-managed buffer (a new pool)."""
    from driver.hal.types import DataLocation, RequestArgument

    pools = (*request.pools, BufferToken(token))
    arg = RequestArgument(False, DataLocation(len(pools) - 1, 0, 0), ())
    if input is not None:
        inputs = list(request.inputs)
        inputs[input] = arg
        request = replace(request, inputs=tuple(inputs))
    if output is not None:
        outputs = list(request.outputs)
        outputs[output] = arg
        request = replace(request, outputs=tuple(outputs))
    return replace(request, pools=pools)


class CacheFiles:
    """Temporary cache files (model and data), opened as file descriptors."""

    def __init__(self, n_model: int, n_data: int):
        self.dir = tempfile.TemporaryDirectory(prefix="nnfuzz-cache-")
        self.paths = [os.path.join(self.dir.name, f"model{i}") for i in range(n_model)] + [
            os.path.join(self.dir.name, f"data{i}") for i in range(n_data)
        ]
        self.n_model = n_model

    def open(self) -> tuple[list[int], list[int]]:
        fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) for p in self.paths]
        return fds[: self.n_model], fds[self.n_model :]

    @staticmethod
    def close(*groups: Sequence[int]) -> None:
        for group in groups:
            for fd in group:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def cleanup(self) -> None:
        self.dir.cleanup()


def token_for(seed: bytes) -> bytes:
    """A 32-byte cache token."""
    import hashlib

    return hashlib.sha256(seed).digest()


def now_ns() -> int:
    return time.monotonic_ns()
