"""Progress for long runs: a live one-line display on a terminal; elsewhere (a log file,
CI) the same status as a plain line once a minute, so that a run of hours shows it is
alive and how far it got without flooding the log.

p = Progress("specs")
p.advance("passed"); p.print("FAILED ..."); p.close()
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

HEARTBEAT_SECONDS = 60.0
"""Interval of the plain status lines written when the stream is not a terminal."""


class Progress:
    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        stream: TextIO | None = None,
        output: TextIO | None = None,
    ):
        """``stream`` shows the live status line (standard error by default), ``output``
        the lines that stay (standard output by default)."""
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.output = output or sys.stdout
        self.counts: Counter[str] = Counter()
        self.start = time.monotonic()
        self._live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0 if self._live else self.start  # the first heartbeat after a minute
        self._shown = False

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def status_line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        parts = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))
        of = f"/{self.total}" if self.total else ""
        return f"{self.label}: {self.done}{of} ({parts}) {elapsed:.0f}s {rate:.1f}/s"

    def advance(self, outcome: str, n: int = 1) -> None:
        self.counts[outcome] += n
        now = time.monotonic()
        if self._live:
            if now - self._last > 0.2:
                self._last = now
                self.stream.write("\r\033[K" + self.status_line())
                self.stream.flush()
                self._shown = True
        elif now - self._last >= HEARTBEAT_SECONDS:
            self._last = now
            self.stream.write(self.status_line() + "\n")
            self.stream.flush()

    def print(self, message: str) -> None:
        """A line that stays (failures), printed above the live status line."""
        if self._shown:
            self.stream.write("\r\033[K")
        print(message, file=self.output, flush=True)
        self._shown = False

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown = False
