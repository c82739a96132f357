"""How a long run stops: Ctrl-C (SIGINT), a CI job's timeout or cancellation (SIGTERM)
and a closed terminal (SIGHUP) all stop it the same way — KeyboardInterrupt — so that
campaigns keep their journal, write their report and say how to resume."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that would end the process outright; made to stop it as Ctrl-C does."""
STOP_SIGNALS = (signal.SIGINT, *TERMINATION_SIGNALS)


def _handled(signals: tuple[int, ...]) -> list[int]:
    """The signals not ignored: ``nohup`` ignores SIGHUP, and that choice stands."""
    return [s for s in signals if signal.getsignal(s) is not signal.SIG_IGN]


def _interrupt(signum: int, frame) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
    raise KeyboardInterrupt


@contextlib.contextmanager
def _handling(signals: tuple[int, ...], handler) -> Iterator[None]:
    """``handler`` for the ``signals`` not ignored, within the block (main thread only:
    Python delivers signals there); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in _handled(signals)}
    try:
        yield
    finally:
        for s, before in previous.items():
            # None: a handler Python did not install; the default is the best we can do.
            signal.signal(s, signal.SIG_DFL if before is None else before)


def stop_signals_interrupt() -> contextlib.AbstractContextManager[None]:
    """Within the block, SIGTERM and SIGHUP raise KeyboardInterrupt as SIGINT does."""
    return _handling(TERMINATION_SIGNALS, _interrupt)


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """A stop signal that arrives within the block waits for its end, then goes to the
    handler it would have reached: records written together (a journal line and the
    state it updates) are written together or not at all."""
    caught: list[int] = []
    try:
        with _handling(STOP_SIGNALS, lambda signum, frame: caught.append(signum)):
            yield
    finally:
        if caught:
            signal.raise_signal(caught[0])
