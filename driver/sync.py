"""Sync fences: real waitable objects (Linux eventfd), as ``executeFenced`` needs.

A :class:`SyncFence` is *active* until signalled; it can also be signalled with an error
(a failed producer), and waiting on it then reports GENERAL_FAILURE. Its file descriptor
polls readable once signalled, so it works with ``select``/``poll`` and across processes.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
import time

from driver.hal.types import ErrorStatus

_MAX_POLL_MS = 2**31 - 1
_MAX_WAIT_SECONDS = threading.TIMEOUT_MAX


def _seconds(timeout: float | None) -> float | None:
    """A fence timeout in seconds as ``Event.wait`` takes it: None (or infinity, or more
    than the platform can wait) waits without limit, a negative one is 0; NaN and
    non-numbers are refused with a clear error (``Event.wait`` and ``poll`` would raise
    obscure ones, or wait forever on a negative poll timeout)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout):
        raise ValueError(f"fence timeout must be None or seconds, got {timeout!r}")
    if timeout >= _MAX_WAIT_SECONDS:
        return None
    return max(float(timeout), 0.0)


class SyncFence:
    __slots__ = ("__weakref__", "_closed", "_error", "_event", "_fd", "signalled_at_ns")

    def __init__(self) -> None:
        self._fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self._event = threading.Event()
        self._error = False
        self._closed = False
        self.signalled_at_ns: int | None = None

    @classmethod
    def signalled(cls) -> SyncFence:
        f = cls()
        f.signal()
        return f

    def fileno(self) -> int:
        return self._fd

    @property
    def is_signalled(self) -> bool:
        return self._event.is_set()

    def signal(self, *, error: bool = False) -> None:
        """Signal the fence (once); ``error=True`` marks the producer as failed."""
        if self._event.is_set():
            return
        self._error = error
        self.signalled_at_ns = time.monotonic_ns()
        if not self._closed:
            os.eventfd_write(self._fd, 1)
        self._event.set()

    def wait(self, timeout: float | None = None) -> ErrorStatus:
        """NONE when signalled successfully; GENERAL_FAILURE when signalled with an error;
        MISSED_DEADLINE_TRANSIENT when ``timeout`` seconds pass first (None or infinity:
        no limit; 0 or less: just look)."""
        if not self._event.wait(_seconds(timeout)):
            return ErrorStatus.MISSED_DEADLINE_TRANSIENT
        return ErrorStatus.GENERAL_FAILURE if self._error else ErrorStatus.NONE

    def poll_fd(self, timeout: float | None = None) -> bool:
        """Wait on the file descriptor itself (what another process would do); the
        timeout is read as :meth:`wait` reads it."""
        seconds = _seconds(timeout)
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        # poll() takes int milliseconds, negative meaning forever.
        return bool(
            poller.poll(None if seconds is None else min(math.ceil(seconds * 1000), _MAX_POLL_MS))
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)

    def __del__(self):  # pragma: no cover - best effort
        if not getattr(self, "_closed", True):
            with contextlib.suppress(OSError):
                os.close(self._fd)
