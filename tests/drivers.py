"""Deliberately misbehaving drivers for the out-of-process tests (``tests.drivers:NAME``).

Each is the reference driver, except that an execution whose first input starts with
:data:`TRIGGER` misbehaves in its own way; every other call behaves, so the same driver
shows both that a failure is caught and that the harness carries on afterwards.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from driver.device import ReferenceDevice
from driver.hal.types import BufferToken, Memory, Request
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


def _exit() -> None:
    os._exit(3)


def _raise() -> None:
    raise RuntimeError("a deliberate driver bug")


def _hang() -> None:
    threading.Event().wait()  # never set


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
            # Misbehave once the fences have signalled, as the real work would.
            def later() -> None:
                for fence in wait_for:
                    fence.wait(None)
                self._action()

            threading.Thread(target=later, daemon=True).start()
        return self._inner.execute_fenced(
            request, wait_for, measure, deadline, loop_timeout, timeout_after_fence
        )

    def configure_execution_burst(self):
        return self._inner.configure_execution_burst()


class MisbehavingDevice(ReferenceDevice):
    def __init__(self, action):
        super().__init__()
        self._action = action

    def prepare_model(self, model, *args, **kwargs):
        status, prepared = super().prepare_model(model, *args, **kwargs)
        return status, (_Misbehaving(prepared, self._action) if prepared is not None else None)


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


def pid_stamping() -> PidStampingDevice:
    return PidStampingDevice()


def unloadable() -> Any:
    raise RuntimeError("this driver cannot be constructed")
