"""Per-device quality of service: priority scheduling and resource budgets.

Executions take a slot from the device's :class:`PriorityScheduler` before they run. At
most ``max_concurrent`` run at once; when slots are busy, waiters are served highest
priority first (FIFO within a priority), so a HIGH execution overtakes queued LOW ones.
Budgets give the HAL 1.3 statuses: RESOURCE_EXHAUSTED_PERSISTENT when a request could
never fit (its memory exceeds the whole budget), RESOURCE_EXHAUSTED_TRANSIENT when waiting
could help (the queue is full, or memory is in use by others), MISSED_DEADLINE_TRANSIENT
when the deadline passes while queued.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass

from driver.hal.types import ErrorStatus, HalError

ORDER_LOG_SIZE = 1024
"""Grants :attr:`PriorityScheduler.order_log` remembers."""


@dataclass(frozen=True)
class Budget:
    max_concurrent: int = 4  # executions running at once
    max_queued: int = 256  # executions waiting for a slot
    memory_bytes: int = 1 << 30  # request + output bytes in flight at once


_MAX_WAIT = threading.TIMEOUT_MAX


class PriorityScheduler:
    def __init__(self, budget: Budget | None = None):
        self.budget = budget or Budget()
        self._cond = threading.Condition()
        self._running = 0
        self._memory_in_use = 0
        self._waiters: list[tuple[int, int]] = []  # heap of (-priority, ticket)
        self._tickets = itertools.count()
        # Priorities in the order slots were granted, the latest ORDER_LOG_SIZE (tests read
        # it; bounded, as a device may run for days).
        self.order_log: deque[int] = deque(maxlen=ORDER_LOG_SIZE)

    @contextmanager
    def slot(self, priority: int, deadline_ns: int | None = None, memory_bytes: int = 0):
        """Hold an execution slot (and ``memory_bytes`` of budget) for the block."""
        self._acquire(priority, deadline_ns, memory_bytes)
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._memory_in_use -= memory_bytes
                self._cond.notify_all()

    def _acquire(self, priority: int, deadline_ns: int | None, memory_bytes: int) -> None:
        b = self.budget
        if memory_bytes > b.memory_bytes:
            raise HalError(
                ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT,
                f"execution needs {memory_bytes} bytes; the device budget is {b.memory_bytes}",
            )
        with self._cond:
            if len(self._waiters) >= b.max_queued:
                raise HalError(
                    ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
                    f"{len(self._waiters)} executions already queued",
                )
            ticket = (-int(priority), next(self._tickets))
            heapq.heappush(self._waiters, ticket)
            try:
                while not (
                    self._waiters[0] == ticket
                    and self._running < b.max_concurrent
                    and self._memory_in_use + memory_bytes <= b.memory_bytes
                ):
                    timeout = None
                    if deadline_ns is not None:
                        timeout = (deadline_ns - time.monotonic_ns()) / 1e9
                        if timeout <= 0:
                            raise HalError(
                                ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                                "deadline passed while waiting for the device",
                            )
                    # (A far deadline, up to 2^64 ns, exceeds what a wait can take.)
                    self._cond.wait(None if timeout is None else min(timeout, _MAX_WAIT))
            except BaseException:
                self._waiters.remove(ticket)
                heapq.heapify(self._waiters)
                self._cond.notify_all()
                raise
            heapq.heappop(self._waiters)
            self._running += 1
            self._memory_in_use += memory_bytes
            self.order_log.append(int(priority))
            self._cond.notify_all()
