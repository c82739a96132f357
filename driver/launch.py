"""The asynchronous launches every prepared model shares (``execute`` and ``executeFenced``).

Both run the execution on a worker thread after the launch has returned NONE, so the
caller learns the outcome only through its callback or fence. Each therefore reports
exactly once, *whatever* the work does: an exception escaping a worker thread would
otherwise vanish into a Future nobody reads, and the caller would wait forever. Such an
exception is a bug of the driver (validation ran at launch); it is reported as
GENERAL_FAILURE, its text kept as the device's ``last_error`` (its traceback goes to the
``execution`` verbose log, see :mod:`driver.log`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

from driver.hal.device import ExecutionCallback, ExecutionResult, SyncFenceLike
from driver.hal.types import (
    NO_TIMING,
    UINT64_MAX,
    ErrorStatus,
    HalError,
    MeasureTiming,
    Request,
    Timing,
)
from driver.log import VLOG, vlog
from driver.sync import SyncFence

logger = logging.getLogger("nnfuzz.launch")

FencedRun = Callable[[int | None], ExecutionResult]
"""Runs the execution under the given deadline (fully specified outputs)."""


class FencedCallback:
    """``IFencedExecutionCallback``: status and timings, once the execution finished."""

    def __init__(self):
        self._done = threading.Event()
        self._info = (ErrorStatus.GENERAL_FAILURE, NO_TIMING, NO_TIMING)

    def set(self, status: ErrorStatus, launched: Timing, fenced: Timing) -> None:
        self._info = (status, launched, fenced)
        self._done.set()

    def get_execution_info(self) -> tuple[ErrorStatus, Timing, Timing]:
        """``getExecutionInfo``: waits for completion, then (status, timingLaunched,
        timingFenced)."""
        self._done.wait()
        return self._info


def check_fences(wait_for: Any) -> None:
    """``executeFenced``'s ``waitFor``: a sequence of sync fences with open file
    descriptors (INVALID_ARGUMENT otherwise)."""
    if isinstance(wait_for, (str, bytes)) or not isinstance(wait_for, Sequence):
        raise HalError(
            ErrorStatus.INVALID_ARGUMENT,
            f"wait_for must be a sequence of sync fences, got {wait_for!r}",
        )
    for k, fence in enumerate(wait_for):
        if not callable(getattr(fence, "wait", None)) or not _open_fd(fence):
            raise HalError(ErrorStatus.INVALID_ARGUMENT, f"wait_for[{k}] is not a sync fence")


def _open_fd(fence: Any) -> bool:
    try:
        os.fstat(fence.fileno())
    except (AttributeError, OSError, TypeError, ValueError, OverflowError):
        return False
    return True


def internal_failure(device: Any, error: Exception, during: str) -> ExecutionResult:
    """The result reported for ``error`` raised by the work of a launched execution."""
    device.last_error = f"internal error {during}: {type(error).__name__}: {error}"
    if VLOG.execution:
        trace = "".join(traceback.format_exception(error))
        vlog("execution", "%s: %s\n%s", getattr(device, "name", "driver"), device.last_error, trace)
    return ErrorStatus.GENERAL_FAILURE, [], NO_TIMING


def notify(callback: ExecutionCallback, result: ExecutionResult, name: str) -> None:
    """``callback.notify(*result)``. An exception escaping it is the caller's bug; it is
    logged rather than lost in a worker nobody reads (or ending a thread the driver
    needs)."""
    try:
        callback.notify(*result)
    except Exception:
        logger.exception("%s: an execution callback raised", name)


def launch_async(
    device: Any,
    workers: Executor,
    run: Callable[[], ExecutionResult],
    callback: ExecutionCallback,
) -> None:
    """``execute``'s work: ``run()`` on a worker, its result to ``callback`` (once)."""

    def work() -> None:
        try:
            result = run()
        except Exception as error:
            result = internal_failure(device, error, "in an asynchronous execution")
        notify(callback, result, getattr(device, "name", "driver"))

    workers.submit(work)


def launch_fenced(
    device: Any,
    workers: Executor,
    wait_for: Sequence[SyncFenceLike],
    measure: int,
    deadline: int | None,
    timeout_after_fence: int | None,
    run: FencedRun,
) -> tuple[SyncFence, FencedCallback]:
    """``executeFenced``'s work: wait for ``wait_for``, then ``run`` under ``deadline``
    tightened by ``timeout_after_fence`` (ns after the fences). Returns the fence that
    signals the end (with an error unless NONE) and the callback holding the outcome."""
    launched_us = now_us()
    done = SyncFence()
    callback = FencedCallback()

    def outcome() -> tuple[ErrorStatus, Timing, Timing]:
        for fence in wait_for:
            if fence.wait(None) != ErrorStatus.NONE:
                return ErrorStatus.GENERAL_FAILURE, NO_TIMING, NO_TIMING
        fenced_at = time.monotonic_ns()
        limit = deadline
        if timeout_after_fence is not None:
            after = fenced_at + timeout_after_fence
            limit = after if limit is None else min(limit, after)
        status, _, timing = run(limit)
        if status != ErrorStatus.NONE or measure != MeasureTiming.YES:
            return status, NO_TIMING, NO_TIMING
        on_device = timing.time_on_device
        if on_device == UINT64_MAX:  # a step that did not measure: nothing to report
            return status, NO_TIMING, NO_TIMING
        end_us = now_us()
        return (
            status,
            Timing(on_device, max(end_us - launched_us, on_device)),
            Timing(on_device, max(end_us - fenced_at // 1000, on_device)),
        )

    def work() -> None:
        try:
            status, launched, fenced = outcome()
        except Exception as error:
            status = internal_failure(device, error, "in a fenced execution")[0]
            launched = fenced = NO_TIMING
        callback.set(status, launched, fenced)
        done.signal(error=status != ErrorStatus.NONE)

    workers.submit(work)
    return done, callback


def now_us() -> int:
    """The monotonic clock in microseconds, the unit of HAL timings."""
    return time.monotonic_ns() // 1000


class LaunchedExecutions:
    """``execute_1_3`` and ``executeFenced`` of a prepared model that runs its executions
    itself, given two methods:

    - ``_check(request, measure, deadline, loop_timeout, fenced)`` validates at launch;
      the status of a :class:`HalError` it raises is the launch's (INVALID_ARGUMENT for a
      bad request), with nothing started;
    - ``_run(request, measure, deadline, loop_timeout, *, fenced, started_us)`` executes
      synchronously; ``started_us`` is when the launch began (an asynchronous execution's
      time in the driver counts from there).

    The reference and the partitioned prepared models share these paths, so a launch is
    validated and reported the same way on both."""

    device: Any

    def execute(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        callback: ExecutionCallback,
    ) -> ErrorStatus:
        """``execute_1_3``: validates and launches; ``callback.notify`` reports completion."""
        start = now_us()
        try:
            self._check(request, measure, deadline, loop_timeout, False)
        except HalError as e:
            self.device.last_error = str(e)
            callback.notify(e.status, [], NO_TIMING)
            return e.status
        launch_async(
            self.device,
            self.device._workers(),
            lambda: self._run(request, measure, deadline, loop_timeout, started_us=start),
            callback,
        )
        return ErrorStatus.NONE

    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[SyncFenceLike],
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
        timeout_after_fence: int | None = None,
    ) -> tuple[ErrorStatus, SyncFence | None, FencedCallback | None]:
        """``executeFenced``: validates, then waits for ``wait_for`` on a worker and runs;
        the returned fence signals the end."""
        from driver.validation import validate_duration

        try:
            check_fences(wait_for)
            validate_duration(timeout_after_fence, "timeout after the fences")
            self._check(request, measure, deadline, loop_timeout, True)
        except HalError as e:
            self.device.last_error = str(e)
            return e.status, None, None
        done, callback = launch_fenced(
            self.device,
            self.device._workers(),
            wait_for,
            measure,
            deadline,
            timeout_after_fence,
            lambda limit: self._run(request, measure, limit, loop_timeout, fenced=True),
        )
        return ErrorStatus.NONE, done, callback
