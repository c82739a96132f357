"""Feature levels: a device behind the interface of an older NN HAL version.

:class:`FeatureLevelDevice` wraps a 1.3-shaped device so that the harness talks to it as
a driver of HAL 1.0, 1.1 or 1.2 would be talked to: only what that version's interfaces
can carry reaches the device, and the rest is refused the way that version refuses it.
``reference-1.0``, ``reference-1.1`` and ``reference-1.2`` are the reference validating at
that version (models, requests, capabilities: :class:`driver.device.ReferenceDevice` with
``version=``) behind this wrapper (interfaces and options).

What each version lacks, and what the wrapper does about it:

=====================================  =======  =======================================
feature                                 since    before that
=====================================  =======  =======================================
priority, prepare deadline               1.3     prepare: INVALID_ARGUMENT
execution deadline, loop timeout         1.3     execution: INVALID_ARGUMENT
memory domains (``allocate``)            1.3     GENERAL_FAILURE (tokens in a request are
                                                 INVALID_ARGUMENT: request validation)
``executeFenced``                        1.3     GENERAL_FAILURE (the method does not exist)
MISSED_DEADLINE_*, RESOURCE_EXHAUSTED_*  1.3     reported as GENERAL_FAILURE (Android's
                                                 ``convertToV1_0(ErrorStatus)``)
burst (``configureExecutionBurst``)      1.2     GENERAL_FAILURE (the method does not exist)
``executeSynchronously``                 1.2     emulated: the device only ever receives
                                                 ``execute`` and is waited for, as Android's
                                                 runtime does for 1.0/1.1 drivers
timing measurement                       1.2     the execution runs unmeasured; timing is
                                                 "not available" (UINT64_MAX)
output shapes in results                 1.2     none are reported (1.0's ``notify`` has
                                                 only a status)
unspecified output dimensions            1.2     request validation: INVALID_ARGUMENT
compilation caching, extensions          1.2     no cache files, no extensions;
                                                 ``prepareModelFromCache``: GENERAL_FAILURE
=====================================  =======  =======================================

Android's runtime silently drops a priority or deadline it cannot pass to an old driver.
The harness refuses them instead, so a test that depends on them learns that this
feature level cannot honour them rather than passing for the wrong reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from driver.hal.device import Device, ExecutionCallback, ExecutionResult, SyncFenceLike
from driver.hal.types import (
    NO_TIMING,
    BufferDesc,
    BufferRole,
    Capabilities,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Extension,
    HalVersion,
    MeasureTiming,
    Model,
    OutputShape,
    Priority,
    Request,
    Timing,
)

V = HalVersion

_STATUSES_SINCE_1_3 = frozenset(
    {
        ErrorStatus.MISSED_DEADLINE_TRANSIENT,
        ErrorStatus.MISSED_DEADLINE_PERSISTENT,
        ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
        ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT,
    }
)


def legacy_status(status: Any, version: HalVersion) -> Any:
    """``status`` as a driver of ``version`` can report it: the 1.3 statuses become
    GENERAL_FAILURE before 1.3."""
    if version < V.V1_3 and status in _STATUSES_SINCE_1_3:
        return ErrorStatus.GENERAL_FAILURE
    return status


class FeatureLevelDevice:
    """``device`` as a driver of HAL ``version`` (1.0, 1.1 or 1.2) is seen by the harness.

    The wrapped device is expected to validate models and requests at ``version`` itself
    (the reference does, given ``version=``); this class gates the interface: methods
    and arguments the version does not have."""

    def __init__(self, device: Device, version: HalVersion):
        if version >= V.V1_3:
            raise ValueError("a 1.3 device needs no feature-level wrapper")
        self.inner = device
        self._version = HalVersion(version)
        self.last_error = ""

    @property
    def version(self) -> HalVersion:
        return self._version

    @property
    def name(self) -> str:
        return getattr(self.inner, "name", f"device-{self._version.label}")

    @property
    def config(self) -> Any:
        return getattr(self.inner, "config", None)

    def _refuse(self, status: ErrorStatus, message: str) -> ErrorStatus:
        self.last_error = f"HAL {self._version.label}: {message}"
        return status

    def _relay(self, status: Any) -> Any:
        """The inner device's status as this version reports it (and its message)."""
        if status != ErrorStatus.NONE:
            self.last_error = getattr(self.inner, "last_error", "") or ""
        return legacy_status(status, self._version)

    # --- queries --------------------------------------------------------------------
    def get_capabilities(self) -> tuple[ErrorStatus, Capabilities]:
        """``getCapabilities`` (the wrapped device reports this version's types)."""
        status, caps = self.inner.get_capabilities()
        return self._relay(status), caps

    def get_version_string(self) -> tuple[ErrorStatus, str]:
        status, text = self.inner.get_version_string()
        return self._relay(status), text

    def get_type(self) -> tuple[ErrorStatus, DeviceType]:
        status, device_type = self.inner.get_type()
        return self._relay(status), device_type

    def get_supported_extensions(self) -> tuple[ErrorStatus, list[Extension]]:
        if self._version < V.V1_2:
            return ErrorStatus.NONE, []
        status, extensions = self.inner.get_supported_extensions()
        return self._relay(status), extensions

    def get_number_of_cache_files_needed(self) -> tuple[ErrorStatus, int, int]:
        if self._version < V.V1_2:
            return ErrorStatus.NONE, 0, 0
        status, n_model, n_data = self.inner.get_number_of_cache_files_needed()
        return self._relay(status), n_model, n_data

    def get_supported_operations(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        status, supported = self.inner.get_supported_operations(model)
        return self._relay(status), supported

    # --- preparation ----------------------------------------------------------------
    def prepare_model(
        self,
        model: Model,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline: int | None = None,
        model_cache: Sequence[int] = (),
        data_cache: Sequence[int] = (),
        token: bytes | None = None,
    ) -> tuple[ErrorStatus, FeatureLevelPreparedModel | None]:
        """``prepareModel`` of this version: no priority or deadline before 1.3, no
        caching arguments before 1.2 (they are dropped: caching is only a hint)."""
        if priority != Priority.MEDIUM:
            return self._refuse(ErrorStatus.INVALID_ARGUMENT, "priority needs HAL 1.3"), None
        if deadline is not None:
            return self._refuse(
                ErrorStatus.INVALID_ARGUMENT, "a preparation deadline needs HAL 1.3"
            ), None
        if self._version < V.V1_2:
            model_cache, data_cache, token = (), (), None
        status, prepared = self.inner.prepare_model(
            model, preference, Priority.MEDIUM, None, model_cache, data_cache, token
        )
        status = self._relay(status)
        if status != ErrorStatus.NONE or prepared is None:
            return status, None
        return status, FeatureLevelPreparedModel(self, prepared)

    def prepare_model_from_cache(
        self,
        deadline: int | None,
        model_cache: Sequence[int],
        data_cache: Sequence[int],
        token: bytes,
    ) -> tuple[ErrorStatus, FeatureLevelPreparedModel | None]:
        if self._version < V.V1_2:
            return self._refuse(ErrorStatus.GENERAL_FAILURE, "compilation caching needs 1.2"), None
        if deadline is not None:
            return self._refuse(
                ErrorStatus.INVALID_ARGUMENT, "a preparation deadline needs HAL 1.3"
            ), None
        status, prepared = self.inner.prepare_model_from_cache(None, model_cache, data_cache, token)
        status = self._relay(status)
        if status != ErrorStatus.NONE or prepared is None:
            return status, None
        return status, FeatureLevelPreparedModel(self, prepared)

    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[Any],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[ErrorStatus, None, int]:
        """Memory domains are HAL 1.3: GENERAL_FAILURE, as a device that offers none."""
        return self._refuse(ErrorStatus.GENERAL_FAILURE, "memory domains need HAL 1.3"), None, 0


class _LegacyCallback:
    """Forwards a completion to the caller's callback as this version reports it."""

    def __init__(self, device: FeatureLevelDevice, callback: ExecutionCallback, measure: bool):
        self.device = device
        self.callback = callback
        self.measure = measure

    def notify(self, status: Any, output_shapes: list[OutputShape], timing: Timing) -> None:
        status, shapes, timing = self.device_result(status, output_shapes, timing)
        self.callback.notify(status, shapes, timing)

    def device_result(self, status, output_shapes, timing) -> ExecutionResult:
        version = self.device.version
        if status != ErrorStatus.NONE:
            self.device.last_error = getattr(self.device.inner, "last_error", "") or ""
        shapes = list(output_shapes) if version >= V.V1_2 else []
        if not self.measure or status != ErrorStatus.NONE:
            timing = NO_TIMING
        return legacy_status(status, version), shapes, timing


class FeatureLevelPreparedModel:
    """``IPreparedModel`` of HAL 1.0–1.2 (see the module docstring for each path)."""

    def __init__(self, device: FeatureLevelDevice, prepared: Any):
        self.device = device
        self.inner = prepared

    def _check_options(self, deadline: int | None, loop_timeout: int | None) -> ErrorStatus:
        if deadline is not None:
            return self.device._refuse(
                ErrorStatus.INVALID_ARGUMENT, "an execution deadline needs HAL 1.3"
            )
        if loop_timeout is not None:
            return self.device._refuse(ErrorStatus.INVALID_ARGUMENT, "a loop timeout needs HAL 1.3")
        return ErrorStatus.NONE

    def _measure(self, measure: int) -> tuple[int, bool]:
        """What to pass down, and whether timing is reported back."""
        if self.device.version < V.V1_2:
            return MeasureTiming.NO, False  # 1.0/1.1 cannot measure: the field is absent
        return measure, measure == MeasureTiming.YES

    def execute_synchronously(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        status = self._check_options(deadline, loop_timeout)
        if status != ErrorStatus.NONE:
            return status, [], NO_TIMING
        measure, report = self._measure(measure)
        relay = _LegacyCallback(self.device, _NullCallback(), report)
        if self.device.version >= V.V1_2:
            return relay.device_result(*self.inner.execute_synchronously(request, measure))
        # 1.0/1.1 have only the asynchronous execute: launch it and wait, as the runtime does.
        from driver.device import CollectingCallback

        waiter = CollectingCallback()
        launch = self.inner.execute(request, measure, None, None, waiter)
        if launch != ErrorStatus.NONE:
            # A failed launch is the result (the HAL also notifies; do not wait on a
            # driver that forgot to).
            with contextlib.suppress(TimeoutError):
                waiter.wait(1.0)
            return relay.device_result(launch, [], NO_TIMING)
        return relay.device_result(*waiter.wait(None))

    def execute(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        callback: ExecutionCallback,
    ) -> ErrorStatus:
        status = self._check_options(deadline, loop_timeout)
        if status != ErrorStatus.NONE:
            callback.notify(status, [], NO_TIMING)
            return status
        measure, report = self._measure(measure)
        relay = _LegacyCallback(self.device, callback, report)
        return legacy_status(
            self.inner.execute(request, measure, None, None, relay), self.device.version
        )

    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[SyncFenceLike],
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
        timeout_after_fence: int | None = None,
    ) -> tuple[ErrorStatus, None, None]:
        """``executeFenced`` is HAL 1.3."""
        return (
            self.device._refuse(ErrorStatus.GENERAL_FAILURE, "executeFenced needs 1.3"),
            None,
            None,
        )

    def configure_execution_burst(self) -> tuple[ErrorStatus, Any]:
        """Bursts are HAL 1.2; a 1.2 burst has no deadline or loop timeout."""
        if self.device.version < V.V1_2:
            return self.device._refuse(ErrorStatus.GENERAL_FAILURE, "bursts need HAL 1.2"), None
        status, burst = self.inner.configure_execution_burst()
        status = self.device._relay(status)
        if status != ErrorStatus.NONE or burst is None:
            return status, None
        return status, _LegacyBurst(self, burst)


class _LegacyBurst:
    def __init__(self, prepared: FeatureLevelPreparedModel, burst: Any):
        self.prepared = prepared
        self.inner = burst

    def execute(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        status = self.prepared._check_options(deadline, loop_timeout)
        if status != ErrorStatus.NONE:
            return status, [], NO_TIMING
        measure, report = self.prepared._measure(measure)
        relay = _LegacyCallback(self.prepared.device, _NullCallback(), report)
        return relay.device_result(*self.inner.execute(request, measure))

    def free_memory(self, memory: Any) -> None:
        self.inner.free_memory(memory)


class _NullCallback:
    def notify(self, status, output_shapes, timing) -> None:
        pass


def feature_level_reference(version: HalVersion, name: str | None = None) -> Device:
    """The reference driver at HAL ``version``: itself for 1.3, else behind
    :class:`FeatureLevelDevice`."""
    from driver.device import DeviceConfig, ReferenceDevice

    name = name or f"reference-{HalVersion(version).label}"
    reference = ReferenceDevice(DeviceConfig(name=name, version=version))
    if version >= V.V1_3:
        return reference
    return FeatureLevelDevice(reference, version)
