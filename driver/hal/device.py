"""The device protocol: what any driver plugged into nnfuzz implements.

These are ``typing.Protocol`` classes mirroring the NN HAL 1.3 interfaces (``IDevice``,
``IPreparedModel``, ``IBurstContext``, ``IBuffer``, the callbacks). Names are snake_case;
each docstring names the HAL method it stands for. Results come back as HAL does: an
``ErrorStatus`` first, then the values (meaningful only when the status is NONE). A driver
must never raise: a Python exception escaping one of these methods is a driver bug, and
the harness reports it as a crash.

Time arguments: ``deadline`` is an absolute ``time.monotonic_ns()`` instant or ``None``
(HAL ``OptionalTimePoint``); ``loop_timeout`` is a duration in nanoseconds or ``None``
(HAL ``OptionalTimeoutDuration``; default 2 s, at most 15 s).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from driver.hal.types import (
    BufferDesc,
    BufferRole,
    Capabilities,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Extension,
    HalVersion,
    MeasureTiming,
    Memory,
    Model,
    OutputShape,
    Priority,
    Request,
    Timing,
)

ExecutionResult = tuple[ErrorStatus, list[OutputShape], Timing]
"""(status, output shapes, timing) as ``IExecutionCallback::notify_1_3`` reports them."""

EXECUTION_PATH_SINCE: dict[str, HalVersion] = {
    "sync": HalVersion.V1_0,  # executeSynchronously is 1.2; the runtime emulates it before
    "async": HalVersion.V1_0,
    "fenced": HalVersion.V1_3,
    "burst": HalVersion.V1_2,
}
"""The execution paths, and the HAL version from which a driver has each (an older
driver does not have the method at all)."""

DEFAULT_LOOP_TIMEOUT_NS = 2_000_000_000
MAX_LOOP_TIMEOUT_NS = 15_000_000_000


class SyncFenceLike(Protocol):
    """A waitable sync fence (``hidl_handle`` of a sync_fence fd)."""

    def fileno(self) -> int: ...
    def wait(self, timeout: float | None = None) -> ErrorStatus: ...


class ExecutionCallback(Protocol):
    """``IExecutionCallback``: receives the completion of an asynchronous execution."""

    def notify(
        self, status: ErrorStatus, output_shapes: list[OutputShape], timing: Timing
    ) -> None: ...


class FencedExecutionCallback(Protocol):
    """``IFencedExecutionCallback``."""

    def get_execution_info(self) -> tuple[ErrorStatus, Timing, Timing]:
        """``getExecutionInfo``: (status, timingLaunched, timingFenced)."""
        ...


@runtime_checkable
class Burst(Protocol):
    """``IBurstContext`` with the client-side controller folded in: pools are cached in
    memory slots across executions until freed."""

    def execute(
        self,
        request: Request,
        measure: MeasureTiming = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        """One burst execution (FMQ request → result)."""
        ...

    def free_memory(self, memory: Memory) -> None:
        """``IBurstContext::freeMemory``: forget the slot caching ``memory``."""
        ...


@runtime_checkable
class PreparedModel(Protocol):
    """``IPreparedModel`` (1.3)."""

    def execute_synchronously(
        self,
        request: Request,
        measure: MeasureTiming = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        """``executeSynchronously_1_3``."""
        ...

    def execute(
        self,
        request: Request,
        measure: MeasureTiming,
        deadline: int | None,
        loop_timeout: int | None,
        callback: ExecutionCallback,
    ) -> ErrorStatus:
        """``execute_1_3``: returns the launch status; ``callback.notify`` is called
        exactly once with the completion status (also when launch fails)."""
        ...

    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[SyncFenceLike],
        measure: MeasureTiming = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
        timeout_after_fence: int | None = None,
    ) -> tuple[ErrorStatus, SyncFenceLike | None, FencedExecutionCallback | None]:
        """``executeFenced``: waits for ``wait_for`` then runs; returns a fence signalled
        at completion (or None if already done) and a callback for status and timing."""
        ...

    def configure_execution_burst(self) -> tuple[ErrorStatus, Burst | None]:
        """``configureExecutionBurst``."""
        ...


@runtime_checkable
class Buffer(Protocol):
    """``IBuffer``: a driver-managed buffer from a memory domain."""

    def copy_to(self, dst: Memory) -> ErrorStatus:
        """``IBuffer::copyTo``."""
        ...

    def copy_from(self, src: Memory, dimensions: Sequence[int]) -> ErrorStatus:
        """``IBuffer::copyFrom``: sets the dimensions and marks the buffer initialized."""
        ...


@runtime_checkable
class Device(Protocol):
    """``IDevice`` (1.3). Queries must report the same values every time."""

    def get_capabilities(self) -> tuple[ErrorStatus, Capabilities]:
        """``getCapabilities_1_3``."""
        ...

    def get_version_string(self) -> tuple[ErrorStatus, str]:
        """``getVersionString``."""
        ...

    def get_type(self) -> tuple[ErrorStatus, DeviceType]:
        """``getType``."""
        ...

    def get_supported_extensions(self) -> tuple[ErrorStatus, list[Extension]]:
        """``getSupportedExtensions``."""
        ...

    def get_number_of_cache_files_needed(self) -> tuple[ErrorStatus, int, int]:
        """``getNumberOfCacheFilesNeeded``: (status, model cache files, data cache files)."""
        ...

    def get_supported_operations(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        """``getSupportedOperations_1_3``: one bool per main-subgraph operation;
        INVALID_ARGUMENT for an invalid model."""
        ...

    def prepare_model(
        self,
        model: Model,
        preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: Priority = Priority.MEDIUM,
        deadline: int | None = None,
        model_cache: Sequence[int] = (),
        data_cache: Sequence[int] = (),
        token: bytes | None = None,
    ) -> tuple[ErrorStatus, PreparedModel | None]:
        """``prepareModel_1_3`` (the callback's notify folded into the return value).
        ``model_cache``/``data_cache`` are file descriptors; ``token`` is 32 bytes."""
        ...

    def prepare_model_from_cache(
        self,
        deadline: int | None,
        model_cache: Sequence[int],
        data_cache: Sequence[int],
        token: bytes,
    ) -> tuple[ErrorStatus, PreparedModel | None]:
        """``prepareModelFromCache_1_3``."""
        ...

    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[PreparedModel],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[ErrorStatus, Buffer | None, int]:
        """``allocate``: (status, buffer, token > 0)."""
        ...


DeviceFactory = Callable[[], Device]
