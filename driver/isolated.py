"""Out-of-process drivers: any device in a child process, so that its crashes and hangs
are outcomes, not the end of the harness.

    device = IsolatedDevice("mypkg.drivers:make", timeout=5.0)   # or --driver D@isolated
    status, prepared = device.prepare_model(model)
    status, shapes, timing = prepared.execute_synchronously(request)
    device.last_outcome   # Outcome.SUCCESS / FAILURE / HANG / CRASH

:class:`IsolatedDevice` implements the device protocol by forwarding every call of the
device, its prepared models, bursts and buffers to a child process running
:mod:`driver.service` (the protocol is described there). Request and model pools cross as
file descriptors, so the child maps the caller's shared memory and writes the outputs into
it directly; nothing is copied back.

Each call ends in one of the four outcomes of Android's NNAPI crash tests:

========  ======================================================  ====================
outcome   what happened                                           status returned
========  ======================================================  ====================
SUCCESS   the driver answered NONE                                NONE
FAILURE   the driver answered another status (or the harness      that status
          refused the call before it reached the driver)
HANG      no answer within ``timeout`` seconds: the child is      GENERAL_FAILURE
          killed
CRASH     the child died (signal, ``os._exit``, an exception      DEVICE_UNAVAILABLE
          escaping the driver) or broke the protocol
========  ======================================================  ====================

CRASH maps to DEVICE_UNAVAILABLE because that is what a caller of a dead HAL service sees
(Android's runtime reports a dead binder object so). HANG maps to GENERAL_FAILURE: the
driver did not fail to be reachable, it failed to finish, and the HAL has no status for
that — a deadline miss (MISSED_DEADLINE_*) would wrongly suggest the caller set one.
Callers that only read statuses therefore still see a failure; ``device.last_outcome``
(and ``device.outcomes``, a counter) tell the four apart, and ``device.last_error`` says
what happened (the traceback, the signal and the tail of the child's stderr for a crash).

After a crash or a hang the next call starts a new child, so the harness carries on.
Prepared models, bursts and buffers belong to the child that made them: used after their
child died they give DEVICE_UNAVAILABLE (outcome FAILURE), as a dead HAL object would.
Asynchronous and fenced executions that were in flight when the child died or hung are
completed with the same status (their callback is notified, their fence signalled with an
error). Hang detection covers every call, including asynchronous completions; a fenced
execution's clock starts when the fences it waits for have signalled.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import enum
import errno
import math
import numbers
import operator
import os
import reprlib
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from driver import wire
from driver.hal.device import (
    EXECUTION_PATH_SINCE,
    ExecutionCallback,
    ExecutionResult,
    SyncFenceLike,
)
from driver.hal.types import (
    NO_TIMING,
    UINT64_MAX,
    BufferDesc,
    BufferRole,
    CacheToken,
    Capabilities,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Extension,
    HalError,
    HalVersion,
    MeasureTiming,
    Memory,
    Model,
    Priority,
    Request,
    Timing,
)
from driver.launch import FencedCallback, check_fences, notify
from driver.service import (
    MAX_COPY_DIMS,
    MAX_FDS,
    Frame,
    Op,
    Packer,
    ProtocolError,
    Unpacker,
    recv_frame,
    send_frame,
    unpack_extensions,
)
from driver.validation import uint32_dims, validate_deadline, validate_duration


class Outcome(enum.Enum):
    """How a call to an isolated driver ended (Android's crash-test outcomes)."""

    SUCCESS = "success"
    FAILURE = "failure"
    HANG = "hang"
    CRASH = "crash"


OUTCOME_STATUS: dict[Outcome, ErrorStatus] = {
    Outcome.CRASH: ErrorStatus.DEVICE_UNAVAILABLE,
    Outcome.HANG: ErrorStatus.GENERAL_FAILURE,
}
"""The HAL status a call returns when the driver crashed or hung."""

DEFAULT_TIMEOUT = 10.0
DEFAULT_START_TIMEOUT = 60.0
MAX_TIMEOUT = 365 * 86400.0
"""Longest ``timeout`` / ``start_timeout`` (seconds): a year is "never" in practice, and
the thread waits behind the hang watchdog overflow far beyond it."""
_STDERR_TAIL_BYTES = 8192


def check_timeout(name: str, value: Any) -> float:
    """``value`` as a timeout in seconds: a finite number in ``(0, MAX_TIMEOUT]``;
    ValueError naming ``name`` otherwise (NaN would make every call a hang, infinity
    overflows the watchdog's waits)."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    seconds = float(value) if real else math.nan
    if not 0 < seconds <= MAX_TIMEOUT:  # also false for NaN
        raise ValueError(
            f"{name} must be a finite number of seconds in (0, {MAX_TIMEOUT:.0f}], got {value!r}"
        )
    return seconds


class _Lost(Exception):
    """The child is gone (crashed, hung, or never started)."""

    def __init__(self, outcome: Outcome, message: str):
        super().__init__(message)
        self.outcome = outcome
        self.message = message


class _Refused(Exception):
    """The child could not decode the call (a REFUSED frame): the call's failure, not the
    child's."""

    def __init__(self, status: Any, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class _Pending:
    """A call waiting for its reply (and, for executions, its completion)."""

    __slots__ = (
        "deadline",
        "event",
        "fds",
        "lost",
        "on_complete",
        "on_lost",
        "payload",
        "refused",
        "replied",
        "settled",
    )

    def __init__(self, deadline: float | None, on_complete=None, on_lost=None):
        self.event = threading.Event()
        self.payload = b""
        self.refused: _Refused | None = None
        self.fds: list[int] = []
        self.lost: _Lost | None = None
        self.deadline = deadline
        self.on_complete: Callable[[bytes], None] | None = on_complete
        self.on_lost: Callable[[_Lost], None] | None = on_lost
        self.replied = False
        self.settled = on_complete is None  # completion delivered (or none expected)


class _Notifier:
    """Delivers one execution's result to the caller's callback exactly once, however
    the completion, a failed launch and the loss of the child race. A completion is
    delivered on a thread of its own: never on the socket reader (a callback that raised
    would end it, and every call would then look like a hang; one that called back into
    the device would wait for a reply only the reader could read)."""

    def __init__(self, callback: Any, name: str):
        self._callback = callback
        self._name = name
        self._lock = threading.Lock()
        self._done = False

    def _claim(self) -> bool:
        with self._lock:
            done, self._done = self._done, True
        return not done

    def now(self, *result: Any) -> None:
        """Notify on this thread (the caller's, for a launch that failed)."""
        if self._claim():
            notify(self._callback, result, self._name)

    def later(self, *result: Any) -> None:
        """Notify on a new thread (called from the reader or the watchdog thread)."""
        if self._claim():
            threading.Thread(
                target=notify,
                args=(self._callback, result, self._name),
                daemon=True,
                name=f"nnfuzz-isolated-callback-{self._name}",
            ).start()


# ---------------------------------------------------------------------------------------
# One child process
# ---------------------------------------------------------------------------------------


_SPAWNER: concurrent.futures.ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """The one thread that starts every child (it lives as long as the process)."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nnfuzz-spawner")
        return _SPAWNER


class _Child:
    """A child process serving the driver, its socket, reader and watchdog threads."""

    def __init__(self, spec: str, timeout: float, start_timeout: float):
        self.spec = spec
        self.timeout = timeout
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._next_call = 1
        # (op, object, payload) one-way messages; a deque, so that ``post`` takes no
        # lock: it runs from finalizers, which may fire while this thread holds one.
        self._releases: collections.deque[tuple[int, int, bytes]] = collections.deque()
        self.lost: _Lost | None = None
        self._gone = threading.Event()  # set once ``lost`` is
        self._stderr: collections.deque[bytes] = collections.deque(maxlen=64)
        self.version = HalVersion.V1_3

        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        # The child must import what the parent can (tests.drivers, module:callable specs).
        paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        try:
            # Started from one long-lived thread: the child's parent-death signal
            # (PR_SET_PDEATHSIG) fires when the *thread* that forked it ends, so a first
            # call from a short-lived thread must not be the one that forks.
            self.proc = (
                _spawner()
                .submit(
                    subprocess.Popen,
                    [sys.executable, "-m", "driver.service", str(child_sock.fileno())],
                    pass_fds=(child_sock.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=env,
                    close_fds=True,
                )
                .result()
            )
        finally:
            child_sock.close()
        self.sock = parent_sock
        self.pid = self.proc.pid
        self._stderr_reader = threading.Thread(
            target=self._read_stderr, daemon=True, name="nnfuzz-isolated-stderr"
        )
        self._stderr_reader.start()
        threading.Thread(target=self._read_loop, daemon=True, name="nnfuzz-isolated-reader").start()
        threading.Thread(
            target=self._watchdog, daemon=True, name="nnfuzz-isolated-watchdog"
        ).start()
        self._start(start_timeout)

    def _start(self, start_timeout: float) -> None:
        payload = Packer().str(self.spec).data()
        reply = self.call(Op.HELLO, 0, payload, (), timeout=start_timeout)
        u = Unpacker(reply.payload)
        status, message = u.u32(), u.str()
        version = u.u32()
        if status != ErrorStatus.NONE:
            self.shutdown()
            raise _Lost(Outcome.CRASH, f"the driver could not be loaded: {message}")
        with contextlib.suppress(ValueError):
            self.version = HalVersion(version)

    # --- sending ----------------------------------------------------------------------
    def call(
        self,
        op: int,
        obj_id: int,
        payload: bytes,
        fds: Sequence[int],
        *,
        timeout: float | None = None,
        on_complete: Callable[[bytes], None] | None = None,
        on_lost: Callable[[_Lost], None] | None = None,
        wait: bool = True,
        arm: bool = True,
    ) -> _Pending:
        """Send a call; with ``wait``, block until its reply (raising :class:`_Lost`, or
        :class:`_Refused` when the child could not decode it).
        ``on_complete`` receives a later NOTIFY/FENCED_DONE payload; ``arm=False`` leaves
        the hang clock stopped (see :meth:`arm`)."""
        limit = self.timeout if timeout is None else timeout
        pending = _Pending(
            time.monotonic() + limit if arm else None, on_complete=on_complete, on_lost=on_lost
        )
        with self._lock:
            if self.lost is not None:
                raise self.lost
            call_id = self._next_call
            self._next_call = (self._next_call % 0xFFFFFFFF) + 1
            self._pending[call_id] = pending
        try:
            with self._send_lock:
                while self._releases:
                    r_op, r_obj, r_payload = self._releases.popleft()
                    send_frame(self.sock, r_op, 0, r_obj, r_payload)
                send_frame(self.sock, op, call_id, obj_id, payload, fds)
        except OSError as e:
            with self._lock:
                self._pending.pop(call_id, None)
            if e.errno == errno.EBADF:  # a pool's descriptor is not open (the caller's)
                raise BadDescriptor(str(e)) from None
            # The child died: give the reader a moment to report how (status, stderr).
            if not self._gone.wait(2.0):
                self.lose(Outcome.CRASH, f"the driver process is gone ({e})")
            raise self.lost or _Lost(Outcome.CRASH, str(e)) from None
        if wait:
            self.wait(pending, limit)
        return pending

    def wait(self, pending: _Pending, limit: float) -> None:
        # The watchdog enforces the deadline; the extra second only guards against a
        # watchdog that could not run.
        if not pending.event.wait(limit + 5.0):
            self.lose(Outcome.HANG, f"no answer from the driver in {limit:g} s")
        if pending.lost is not None:
            raise pending.lost
        if pending.refused is not None:
            raise pending.refused

    def arm(self, pending: _Pending) -> None:
        """Start the hang clock of a call whose driver work starts now."""
        pending.deadline = time.monotonic() + self.timeout

    def disarm(self, pending: _Pending) -> None:
        """Stop the hang clock while the driver waits for the caller (fences)."""
        pending.deadline = None

    def post(self, op: int, obj_id: int, payload: bytes = b"") -> None:
        """A one-way message (release, burst free), sent before the next call. Takes
        no lock (see ``_releases``)."""
        if self.lost is None:
            self._releases.append((op, obj_id, payload))

    # --- receiving --------------------------------------------------------------------
    def _read_loop(self) -> None:
        while True:
            try:
                frame = recv_frame(self.sock)
            except (OSError, ProtocolError) as e:
                if self.lost is None:
                    self.lose(Outcome.CRASH, f"the driver process broke the connection: {e}")
                return
            if frame is None:
                self._on_exit()
                return
            try:
                self._dispatch(frame)
            except ProtocolError as e:
                self.lose(Outcome.CRASH, f"the driver process broke the protocol: {e}")
                return
            finally:
                frame.close_fds()

    def _dispatch(self, frame: Frame) -> None:
        if frame.op == Op.CRASHED:
            text = Unpacker(frame.payload).str()
            self.lose(Outcome.CRASH, f"an exception escaped the driver:\n{text.rstrip()}")
            return
        with self._lock:
            pending = self._pending.get(frame.call_id)
        if frame.op in (Op.REPLY, Op.REFUSED):
            if pending is None or pending.replied:
                raise ProtocolError(f"a reply to call {frame.call_id}, which is not waiting")
            refused = None
            if frame.op == Op.REFUSED:
                u = Unpacker(frame.payload)
                refused = _Refused(_status_of(u.u32()), u.str())
                u.end()
            with self._lock:
                pending.replied = True
                pending.payload = frame.payload
                if refused is not None:  # no completion follows a refused call
                    pending.refused, pending.settled = refused, True
                if pending.settled:
                    self._pending.pop(frame.call_id, None)
            pending.event.set()
        elif frame.op in (Op.NOTIFY, Op.FENCED_DONE):
            if pending is None:
                return  # completion of a launch the parent already settled
            if not self.settle(frame.call_id, pending):
                return
            if pending.on_complete is not None:
                pending.on_complete(frame.payload)
        else:
            raise ProtocolError(f"unexpected op {frame.op} from the child")

    def settle(self, call_id: int | None, pending: _Pending) -> bool:
        """Claim the delivery of ``pending``'s completion (True once only)."""
        with self._lock:
            if pending.settled:
                return False
            pending.settled = True
            if call_id is not None and (pending.replied or pending.lost is not None):
                self._pending.pop(call_id, None)
            return True

    def call_id_of(self, pending: _Pending) -> int | None:
        with self._lock:
            for k, p in self._pending.items():
                if p is pending:
                    return k
        return None

    def _watchdog(self) -> None:
        # Every deadline is "registered + timeout", so sleeping until the earliest known
        # deadline (or a full timeout) never misses a later-registered earlier one.
        while self.lost is None:
            now = time.monotonic()
            with self._lock:
                deadlines = [p.deadline for p in self._pending.values() if p.deadline is not None]
            expired = [d for d in deadlines if d <= now]
            if expired:
                self.lose(Outcome.HANG, f"no answer from the driver in {self.timeout:g} s")
                return
            wake = min(deadlines, default=now + self.timeout)
            time.sleep(max(0.001, min(wake - now, self.timeout)))

    def _read_stderr(self) -> None:
        stream = self.proc.stderr
        if stream is None:
            return
        for line in iter(stream.readline, b""):
            self._stderr.append(line)
        with contextlib.suppress(OSError):
            stream.close()

    def stderr_tail(self) -> str:
        text = b"".join(self._stderr).decode("utf-8", "replace")
        return text[-_STDERR_TAIL_BYTES:]

    def _on_exit(self) -> None:
        try:
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            how = "closed the connection but did not exit"
        elif code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        self._stderr_reader.join(1.0)  # let it catch the last lines
        tail = self.stderr_tail().strip()
        self.lose(
            Outcome.CRASH,
            f"the driver process {how}" + (f"; its stderr ends with:\n{tail}" if tail else ""),
        )

    # --- losing the child -------------------------------------------------------------
    def lose(self, outcome: Outcome, message: str) -> None:
        """The child is no use any more: kill it and fail every waiting call."""
        with self._lock:
            if self.lost is not None:
                return
            self.lost = _Lost(outcome, message)
            pending = list(self._pending.items())
            self._pending.clear()
        self._gone.set()
        self._kill()
        for _, p in pending:
            p.lost = self.lost
            p.event.set()
            # A call still waiting for its reply learns of the loss from ``wait``; one
            # that was launched and awaits its completion is completed here.
            if p.on_lost is not None and p.replied and self.settle(None, p):
                with contextlib.suppress(Exception):
                    p.on_lost(self.lost)

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def shutdown(self) -> None:
        """Stop the child and fail whatever still waits for it."""
        with self._lock:
            if self.lost is None:
                self.lost = _Lost(Outcome.CRASH, "the isolated device was closed")
            pending = list(self._pending.values())
            self._pending.clear()
        self._gone.set()
        for p in pending:
            p.lost = self.lost
            p.event.set()
        self._kill()
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5.0)


class BadDescriptor(Exception):
    """A pool's descriptor could not be sent (it is not open)."""


def _shutdown(holder: list) -> None:
    child = holder[0]
    if child is not None:
        child.shutdown()


# ---------------------------------------------------------------------------------------
# Encoding helpers
# ---------------------------------------------------------------------------------------


def _portable_pools(pools: Sequence[Any]) -> tuple[Any, ...]:
    """Pools as they can cross: a memory without a descriptor travels without a handle
    (the driver then judges it invalid, as any driver would a handle it cannot map)."""
    out = []
    for pool in pools:
        if isinstance(pool, Memory) and pool.handle is not None:
            fd = getattr(pool.handle, "fd", -1)
            if not isinstance(fd, int) or fd < 0:
                pool = Memory(pool.name, pool.size, None)
        out.append(pool)
    return tuple(out)


def _encode_model(model: Model) -> wire.Encoded:
    return wire.encode_model(replace(model, pools=_portable_pools(model.pools)))


def _encode_request(request: Request) -> wire.Encoded:
    return wire.encode_request(replace(request, pools=_portable_pools(request.pools)))


def _fds(handles: Sequence[Any]) -> list[int]:
    return [h.fd for h in handles]


def _time_error(deadline: Any = None, **durations: Any) -> str | None:
    """What is wrong with the deadline and the durations (None: nothing), by the rules
    the reference answers INVALID_ARGUMENT by (:mod:`driver.validation`). Checked before
    packing, so that every value that crosses does so unchanged, as a uint64."""
    try:
        validate_deadline(deadline)
        for name, duration in durations.items():
            validate_duration(duration, name.replace("_", " "))
    except HalError as e:
        return e.message
    return None


def _measure_code(measure: Any) -> int:
    """``measure`` as it crosses: NO / YES as 0 / 1; anything else (a bool included,
    which the reference refuses) as 0xFFFFFFFF, left to the driver to judge (a HAL 1.1
    driver has no timing to measure and ignores it)."""
    if not isinstance(measure, bool):
        with contextlib.suppress(Exception):  # a caller's object may fail to compare
            if measure in (MeasureTiming.NO, MeasureTiming.YES):
                return int(measure)
    return 0xFFFFFFFF


def _execution_args(p: Packer, measure: Any, deadline: int | None, loop_timeout: int | None):
    """Packs the timing arguments (``_time_error`` has passed them)."""
    p.u32(_measure_code(measure)).opt_u64(deadline).opt_u64(loop_timeout)


def _token_bytes(token: Any, types: tuple[type, ...]) -> bytes:
    """A compilation-cache token as it crosses. The HAL token is exactly
    ``CacheToken.BYTE_SIZE`` bytes; one the reference would refuse (another length, or
    not of ``types``) crosses as an empty token, which the driver refuses likewise (not
    cached; no cache hit) — so that the caller's object itself (an int, a 300 MiB
    string) is neither converted nor sent."""
    if isinstance(token, types) and len(token) == CacheToken.BYTE_SIZE:
        return bytes(token)
    return b""


def _cache_fds(files: Any) -> list[int]:
    """Cache files as they cross: open descriptors. Anything else (None, a closed
    descriptor, not an int) crosses as no files, which the driver takes for the wrong
    number of files it is (the reference: not cached; no cache hit) instead of failing
    the transport."""
    try:
        fds = [operator.index(f) for f in files]
        for fd in fds:
            os.fstat(fd)
    except (TypeError, ValueError, OverflowError, OSError):
        return []
    return fds


def _status_of(value: int) -> Any:
    try:
        return ErrorStatus(value)
    except ValueError:
        return value  # an unknown code stays an int: the harness reports it


def _decode_result(payload: bytes) -> tuple[ExecutionResult, str]:
    msg = wire.decode(payload, expected=wire.MessageKind.EXECUTION_RESULT)
    return (_status_of(int(msg.status)), list(msg.output_shapes), msg.timing), msg.message


# ---------------------------------------------------------------------------------------
# The device
# ---------------------------------------------------------------------------------------


class IsolatedDevice:
    """The device ``spec`` (any ``--driver`` value) in a child process.

    ``timeout`` bounds every call (seconds) before it is a HANG; ``start_timeout`` bounds
    starting a child (importing the driver). Both must be finite and positive (at most
    :data:`MAX_TIMEOUT`); ValueError otherwise."""

    def __init__(
        self,
        spec: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        name: str | None = None,
    ):
        self.timeout = check_timeout("timeout", timeout)
        self.start_timeout = check_timeout("start_timeout", start_timeout)
        self.spec = spec
        self._name = name or f"{spec}@isolated"
        self._lock = threading.Lock()
        self._holder: list[_Child | None] = [None]
        self.restarts = 0
        self.last_outcome: Outcome | None = None
        self.outcomes: collections.Counter[Outcome] = collections.Counter()
        self.last_error = ""
        self._version = HalVersion.V1_3
        self._finalizer = weakref.finalize(self, _shutdown, self._holder)
        try:
            self._ensure()  # a driver that cannot even be loaded fails here
        except _Lost as e:
            from driver.registry import DriverLoadError

            raise DriverLoadError(f"isolated driver {spec!r}: {e.message}") from None

    # --- the child --------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> HalVersion:
        """The HAL version the driver reports (its ``version`` attribute), else 1.3."""
        return self._version

    @property
    def pid(self) -> int | None:
        child = self._holder[0]
        return child.pid if child is not None and child.lost is None else None

    def _ensure(self) -> _Child:
        with self._lock:
            child = self._holder[0]
            if child is not None and child.lost is None:
                return child
            if child is not None:
                self.restarts += 1
            self._holder[0] = None
            try:
                child = _Child(self.spec, self.timeout, self.start_timeout)
            except _Lost as e:
                raise _Lost(e.outcome, f"the driver process did not start: {e.message}") from None
            except OSError as e:
                raise _Lost(Outcome.CRASH, f"the driver process did not start: {e}") from None
            self._holder[0] = child
            self._version = child.version
            return child

    def close(self) -> None:
        """Stop the child process (a later call starts a new one)."""
        with self._lock:
            child, self._holder[0] = self._holder[0], None
        if child is not None:
            child.shutdown()

    def __enter__(self) -> IsolatedDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- outcomes ---------------------------------------------------------------------
    def _record(self, outcome: Outcome, message: str = "") -> None:
        self.last_outcome = outcome
        self.outcomes[outcome] += 1
        if outcome != Outcome.SUCCESS:
            self.last_error = message

    def _done(self, status: Any, message: str) -> Any:
        self._record(Outcome.SUCCESS if status == ErrorStatus.NONE else Outcome.FAILURE, message)
        return status

    def _lost(self, e: _Lost) -> ErrorStatus:
        self._record(e.outcome, e.message)
        return OUTCOME_STATUS[e.outcome]

    def _refuse(self, status: ErrorStatus, message: str) -> ErrorStatus:
        self._record(Outcome.FAILURE, message)
        return status

    def _lacks(self, method: str, since: HalVersion) -> ErrorStatus | None:
        """GENERAL_FAILURE when the driver's HAL version has no ``method`` (as the driver
        itself answers), before any argument check here could answer otherwise."""
        if self._version >= since:
            return None
        return self._refuse(ErrorStatus.GENERAL_FAILURE, f"{method} needs HAL {since.label}")

    def _rpc(
        self,
        child: _Child | None,
        op: int,
        obj_id: int,
        payload: bytes,
        fds: Sequence[int],
        parse: Callable[[Unpacker], tuple],
        default: tuple,
    ) -> tuple:
        """One call: ``(status, *parse(reply))``, or ``(status, *default)`` when the
        call did not complete; records the outcome."""
        try:
            if child is None:
                child = self._ensure()
            elif child.lost is not None:
                return (
                    self._refuse(
                        ErrorStatus.DEVICE_UNAVAILABLE,
                        "this object died with its driver process "
                        f"({child.lost.outcome.value}: {(child.lost.message.splitlines() or [''])[0]})",
                    ),
                    *default,
                )
            if len(fds) > MAX_FDS:
                return (
                    self._refuse(
                        ErrorStatus.INVALID_ARGUMENT,
                        f"{len(fds)} pools exceed the {MAX_FDS} one call can pass",
                    ),
                    *default,
                )
            pending = child.call(op, obj_id, payload, fds)
        except BadDescriptor as e:
            return self._refuse(ErrorStatus.INVALID_ARGUMENT, f"a pool is not open: {e}"), *default
        except _Lost as e:
            return (self._lost(e), *default)
        except _Refused as e:
            return (self._done(e.status, e.message), *default)
        try:
            u = Unpacker(pending.payload)
            status, message = _status_of(u.u32()), u.str()
            values = parse(u)
            u.end()
        except (ProtocolError, wire.WireDecodeError) as e:
            child.lose(Outcome.CRASH, f"the driver process sent a malformed reply: {e}")
            return (self._lost(child.lost or _Lost(Outcome.CRASH, str(e))), *default)
        return (self._done(status, message), *values)

    # --- queries --------------------------------------------------------------------
    def get_capabilities(self) -> tuple[ErrorStatus, Capabilities]:
        def parse(u: Unpacker) -> tuple:
            return (wire.decode(u.blob(), expected=wire.MessageKind.CAPABILITIES),)

        return self._rpc(None, Op.GET_CAPABILITIES, 0, b"", (), parse, (Capabilities(),))

    def get_version_string(self) -> tuple[ErrorStatus, str]:
        return self._rpc(None, Op.GET_VERSION_STRING, 0, b"", (), lambda u: (u.str(),), ("",))

    def get_type(self) -> tuple[ErrorStatus, DeviceType]:
        def parse(u: Unpacker) -> tuple:
            code = u.u32()
            try:
                return (DeviceType(code),)
            except ValueError:
                return (code,)

        return self._rpc(None, Op.GET_TYPE, 0, b"", (), parse, (DeviceType.OTHER,))

    def get_supported_extensions(self) -> tuple[ErrorStatus, list[Extension]]:
        return self._rpc(
            None, Op.GET_SUPPORTED_EXTENSIONS, 0, b"", (), lambda u: (unpack_extensions(u),), ([],)
        )

    def get_number_of_cache_files_needed(self) -> tuple[ErrorStatus, int, int]:
        return self._rpc(
            None, Op.GET_NUMBER_OF_CACHE_FILES, 0, b"", (), lambda u: (u.u32(), u.u32()), (0, 0)
        )

    def _model(self, model: Model) -> wire.Encoded | None:
        if not isinstance(model, Model):
            self._refuse(
                ErrorStatus.INVALID_ARGUMENT, f"model must be a Model, got {type(model).__name__}"
            )
            return None
        try:
            return _encode_model(model)
        except Exception as e:  # any malformed field (None, a float count): INVALID_ARGUMENT
            self._refuse(
                ErrorStatus.INVALID_ARGUMENT, f"the model cannot cross the process boundary: {e}"
            )
            return None

    def get_supported_operations(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        enc = self._model(model)
        if enc is None:
            return ErrorStatus.INVALID_ARGUMENT, []
        payload = Packer().blob(enc.data).data()

        def parse(u: Unpacker) -> tuple:
            return ([bool(b) for b in u.blob()],)

        return self._rpc(
            None, Op.GET_SUPPORTED_OPERATIONS, 0, payload, _fds(enc.handles), parse, ([],)
        )

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
    ) -> tuple[ErrorStatus, IsolatedPreparedModel | None]:
        bad = _time_error(deadline=deadline)
        if bad is not None:
            return self._refuse(ErrorStatus.INVALID_ARGUMENT, bad), None
        enc = self._model(model)
        if enc is None:
            return ErrorStatus.INVALID_ARGUMENT, None
        model_fds, data_fds = _cache_fds(model_cache), _cache_fds(data_cache)
        p = Packer().blob(enc.data).u32(preference).u32(priority).opt_u64(deadline)
        p.u32(len(enc.handles)).u32(len(model_fds)).u32(len(data_fds))
        if token is None:
            p.u8(0)
        else:
            # The reference caches under a ``bytes`` token only (else: not cached, NONE).
            p.u8(1).blob(_token_bytes(token, (bytes,)))
        fds = [*_fds(enc.handles), *model_fds, *data_fds]
        return self._prepared(Op.PREPARE_MODEL, p.data(), fds)

    def _prepared(
        self, op: int, payload: bytes, fds: Sequence[int]
    ) -> tuple[ErrorStatus, IsolatedPreparedModel | None]:
        try:
            child = self._ensure()
        except _Lost as e:
            return self._lost(e), None
        status, obj = self._rpc(child, op, 0, payload, fds, lambda u: (u.u32(),), (0,))
        if status != ErrorStatus.NONE or not obj:
            return status, None
        return status, IsolatedPreparedModel(self, child, obj)

    def prepare_model_from_cache(
        self,
        deadline: int | None,
        model_cache: Sequence[int],
        data_cache: Sequence[int],
        token: bytes,
    ) -> tuple[ErrorStatus, IsolatedPreparedModel | None]:
        if (absent := self._lacks("prepareModelFromCache", HalVersion.V1_2)) is not None:
            return absent, None
        bad = _time_error(deadline=deadline)
        if bad is not None:
            return self._refuse(ErrorStatus.INVALID_ARGUMENT, bad), None
        model_fds, data_fds = _cache_fds(model_cache), _cache_fds(data_cache)
        # The reference's cache opens under ``bytes`` or ``bytearray`` tokens.
        p = Packer().opt_u64(deadline).u32(len(model_fds))
        p.blob(_token_bytes(token, (bytes, bytearray)))
        return self._prepared(Op.PREPARE_FROM_CACHE, p.data(), [*model_fds, *data_fds])

    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[Any],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[ErrorStatus, IsolatedBuffer | None, int]:
        if (absent := self._lacks("allocate", HalVersion.V1_3)) is not None:
            return absent, None, 0
        # The roles' prepared models live in one child (a stale one makes _rpc report
        # DEVICE_UNAVAILABLE); with none, the current child allocates.
        child: _Child | None = None
        ids = []
        if isinstance(prepared_models, (str, bytes)) or not isinstance(prepared_models, Sequence):
            return (
                self._refuse(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"prepared_models must be a sequence, got {type(prepared_models).__name__}",
                ),
                None,
                0,
            )
        for k, pm in enumerate(prepared_models):
            if not isinstance(pm, IsolatedPreparedModel) or pm._device is not self:
                return (
                    self._refuse(
                        ErrorStatus.INVALID_ARGUMENT,
                        f"prepared model {k} was not prepared by this device",
                    ),
                    None,
                    0,
                )
            if child is None or pm._child.lost is not None:
                child = pm._child
            ids.append(pm._obj)
        try:
            msg = wire.BufferAllocationMessage(desc, tuple(input_roles), tuple(output_roles))
            payload = Packer().blob(wire.encode(msg).data).u32s(ids).data()
        except Exception as e:  # a malformed descriptor or role (None, -1, 2**40)
            return (
                self._refuse(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"the buffer description cannot cross the process boundary: {e}",
                ),
                None,
                0,
            )
        if child is None:
            try:
                child = self._ensure()
            except _Lost as e:
                return self._lost(e), None, 0
        status, obj, token = self._rpc(
            child, Op.ALLOCATE, 0, payload, (), lambda u: (u.u32(), u.u32()), (0, 0)
        )
        if status != ErrorStatus.NONE or not obj:
            return status, None, 0
        return status, IsolatedBuffer(self, child, obj), token


class _Remote:
    """An object living in a child: released there when dropped here."""

    def __init__(self, device: IsolatedDevice, child: _Child, obj: int):
        self._device = device
        self._child = child
        self._obj = obj
        weakref.finalize(self, child.post, Op.RELEASE, obj)


class IsolatedPreparedModel(_Remote):
    """``IPreparedModel`` in the child."""

    def _request(self, request: Request) -> tuple[wire.Encoded | None, Any]:
        if not isinstance(request, Request):
            return None, self._device._refuse(
                ErrorStatus.INVALID_ARGUMENT,
                f"request must be a Request, got {type(request).__name__}",
            )
        try:
            return _encode_request(request), None
        except Exception as e:  # any malformed field: INVALID_ARGUMENT, as the reference
            return None, self._device._refuse(
                ErrorStatus.INVALID_ARGUMENT, f"the request cannot cross the process boundary: {e}"
            )

    def _checked(
        self, request: Request, deadline: Any, loop_timeout: Any, **durations: Any
    ) -> wire.Encoded | ErrorStatus:
        """The encoded request, once the request, the deadline and the durations are
        known to cross; otherwise INVALID_ARGUMENT (recorded), without a round trip."""
        bad = _time_error(deadline=deadline, loop_timeout=loop_timeout, **durations)
        if bad is not None:
            return self._device._refuse(ErrorStatus.INVALID_ARGUMENT, bad)
        enc, failed = self._request(request)
        return failed if enc is None else enc

    def _launch(
        self, op: int, payload: bytes, fds: list[int], obj: int | None = None, **kw: Any
    ) -> _Pending | ErrorStatus:
        """Send an execution (to this prepared model, or the burst ``obj``); a status
        instead when it could not be sent."""
        device, child = self._device, self._child
        obj = self._obj if obj is None else obj
        if child.lost is not None:
            return device._rpc(child, op, self._obj, b"", (), lambda u: (), ())[0]
        if len(fds) > MAX_FDS:
            return device._refuse(
                ErrorStatus.INVALID_ARGUMENT,
                f"{len(fds)} pools exceed the {MAX_FDS} one call can pass",
            )
        try:
            return child.call(op, obj, payload, fds, **kw)
        except BadDescriptor as e:
            return device._refuse(ErrorStatus.INVALID_ARGUMENT, f"a pool is not open: {e}")
        except _Lost as e:
            return device._lost(e)
        except _Refused as e:
            return device._done(e.status, e.message)

    def _launch_status(self, pending: _Pending) -> tuple[Any, str, Unpacker] | ErrorStatus:
        try:
            u = Unpacker(pending.payload)
            return _status_of(u.u32()), u.str(), u
        except ProtocolError as e:
            self._child.lose(Outcome.CRASH, f"the driver process sent a malformed reply: {e}")
            return self._device._lost(self._child.lost)

    def _decoded(self, payload: bytes) -> ExecutionResult:
        """A result from the child, recorded as this call's outcome."""
        device = self._device
        try:
            (status, shapes, timing), message = _decode_result(payload)
        except wire.WireDecodeError as e:
            self._child.lose(Outcome.CRASH, f"the driver process sent a malformed result: {e}")
            return device._lost(self._child.lost), [], NO_TIMING
        return device._done(status, message), shapes, timing

    def _execution(self, op: int, obj: int, payload: bytes, fds: list[int]) -> ExecutionResult:
        pending = self._launch(op, payload, fds, obj)
        if not isinstance(pending, _Pending):
            return pending, [], NO_TIMING
        return self._decoded(pending.payload)

    def execute_synchronously(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        """``executeSynchronously_1_3`` in the child."""
        enc = self._checked(request, deadline, loop_timeout)
        if not isinstance(enc, wire.Encoded):
            return enc, [], NO_TIMING
        p = Packer().blob(enc.data)
        _execution_args(p, measure, deadline, loop_timeout)
        return self._execution(Op.EXECUTE_SYNC, self._obj, p.data(), _fds(enc.handles))

    def execute(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        callback: ExecutionCallback,
    ) -> ErrorStatus:
        """``execute_1_3`` in the child: its ``notify`` comes back to ``callback``, which
        is notified exactly once (with the crash/hang status if the child is lost). A
        launch that fails notifies before this returns, on the caller's thread; a later
        completion is notified on the device's callback thread, never on the thread
        that reads the child's replies, so ``callback`` may call back into the device.
        An exception escaping ``callback.notify`` is logged."""
        device = self._device
        notifier = _Notifier(callback, device.name)
        enc = self._checked(request, deadline, loop_timeout)
        if not isinstance(enc, wire.Encoded):
            notifier.now(enc, [], NO_TIMING)
            return enc
        p = Packer().blob(enc.data)
        _execution_args(p, measure, deadline, loop_timeout)
        # A completion read before this thread has seen the launch's reply (the driver
        # notifies a failed launch before answering it) is delivered here, after it.
        lock = threading.Lock()
        early: list[ExecutionResult] = []
        launched = False

        def complete(payload: bytes) -> None:
            result = self._decoded(payload)
            with lock:
                if not launched:
                    early.append(result)
                    return
            notifier.later(*result)

        def lost(e: _Lost) -> None:
            notifier.later(device._lost(e), [], NO_TIMING)

        pending = self._launch(
            Op.EXECUTE_ASYNC, p.data(), _fds(enc.handles), on_complete=complete, on_lost=lost
        )
        with lock:
            launched = True
        for result in early:
            notifier.now(*result)
        if not isinstance(pending, _Pending):
            notifier.now(pending, [], NO_TIMING)
            return pending
        launch = self._launch_status(pending)
        if not isinstance(launch, tuple):
            notifier.now(launch, [], NO_TIMING)
            return launch
        status, message, _ = launch
        if status != ErrorStatus.NONE:
            # A failed launch: the driver has notified already, or never will.
            if self._child.settle(self._child.call_id_of(pending), pending):
                notifier.now(status, [], NO_TIMING)
            return device._done(status, message)
        if pending.lost is not None and self._child.settle(None, pending):
            # Lost between the reply and now, too late for ``lose`` to see the launch.
            notifier.now(device._lost(pending.lost), [], NO_TIMING)
        return ErrorStatus.NONE

    def execute_fenced(
        self,
        request: Request,
        wait_for: Sequence[SyncFenceLike],
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
        timeout_after_fence: int | None = None,
    ) -> tuple[ErrorStatus, Any, Any]:
        """``executeFenced`` in the child. The caller's fences are waited for here and
        relayed to the child over pipes (one byte: signalled or failed); the returned
        fence is this process's own, signalled when the child reports completion."""
        from driver.sync import SyncFence

        device, child = self._device, self._child
        if (absent := device._lacks("executeFenced", EXECUTION_PATH_SINCE["fenced"])) is not None:
            return absent, None, None
        try:
            check_fences(wait_for)
        except HalError as e:
            return device._refuse(e.status, e.message), None, None
        enc = self._checked(
            request, deadline, loop_timeout, timeout_after_fence=timeout_after_fence
        )
        if not isinstance(enc, wire.Encoded):
            return enc, None, None
        # Checked before any pipe is made: past the descriptors one call can pass, the
        # last pipe relays all the remaining fences.
        groups = _fence_groups(list(wait_for), MAX_FDS - len(enc.handles))
        if groups is None:
            return (
                device._refuse(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"{len(enc.handles)} pools and {len(wait_for)} fences exceed the "
                    f"{MAX_FDS} descriptors one call can pass",
                ),
                None,
                None,
            )
        pipes: list[tuple[int, int]] = []
        try:
            for _ in groups:
                pipes.append(os.pipe())
        except OSError as e:  # out of descriptors: close what was made
            _close_all([fd for pipe in pipes for fd in pipe])
            return (
                device._refuse(
                    ErrorStatus.GENERAL_FAILURE, f"cannot make the pipes relaying the fences: {e}"
                ),
                None,
                None,
            )
        p = Packer().blob(enc.data).u32(len(pipes))
        _execution_args(p, measure, deadline, loop_timeout)
        p.opt_u64(timeout_after_fence)
        done = SyncFence()
        info = FencedCallback()

        def complete(payload: bytes) -> None:
            try:
                u = Unpacker(payload)
                status, message = _status_of(u.u32()), u.str()
                launched = Timing(u.u64(), u.u64())
                fenced = Timing(u.u64(), u.u64())
                u.end()
            except ProtocolError as e:
                child.lose(Outcome.CRASH, f"the driver process sent a malformed result: {e}")
                status, launched, fenced = device._lost(child.lost), NO_TIMING, NO_TIMING
            else:
                status = device._done(status, message)
            info.set(status, launched, fenced)
            done.signal(error=status != ErrorStatus.NONE)

        def lost(e: _Lost) -> None:
            info.set(device._lost(e), NO_TIMING, NO_TIMING)
            done.signal(error=True)

        try:
            pending = self._launch(
                Op.EXECUTE_FENCED,
                p.data(),
                [*_fds(enc.handles), *(r for r, _ in pipes)],
                on_complete=complete,
                on_lost=lost,
            )
        finally:
            for r, _ in pipes:
                os.close(r)
        writers = [w for _, w in pipes]
        if not isinstance(pending, _Pending):
            _close_all(writers)
            return pending, None, None
        launch = self._launch_status(pending)
        if not isinstance(launch, tuple):
            _close_all(writers)
            return launch, None, None
        status, message, u = launch
        try:
            has_fence = u.u8()
            u.end()
        except ProtocolError as e:
            _close_all(writers)
            child.lose(Outcome.CRASH, f"the driver process sent a malformed reply: {e}")
            return device._lost(child.lost), None, None
        if status != ErrorStatus.NONE:
            child.settle(child.call_id_of(pending), pending)
            _close_all(writers)
            return device._done(status, message), None, None
        if groups:
            # The driver now waits for the caller's fences: no hang clock until they
            # have signalled (the relay restarts it).
            child.disarm(pending)
            threading.Thread(
                target=_relay_fences,
                args=(groups, writers, child, pending),
                daemon=True,
                name="nnfuzz-isolated-fence-relay",
            ).start()
        if not has_fence:
            # The driver says the work is done: wait for its report, return no fence.
            return info.get_execution_info()[0], None, info
        return ErrorStatus.NONE, done, info

    def configure_execution_burst(self) -> tuple[ErrorStatus, IsolatedBurst | None]:
        """``configureExecutionBurst`` in the child."""
        status, obj = self._device._rpc(
            self._child, Op.CONFIGURE_BURST, self._obj, b"", (), lambda u: (u.u32(),), (0,)
        )
        if status != ErrorStatus.NONE or not obj:
            return status, None
        return status, IsolatedBurst(self._device, self._child, obj, self)


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _fence_groups(fences: list[SyncFenceLike], room: int) -> list[list[SyncFenceLike]] | None:
    """The fences each pipe relays: one each while ``room`` descriptors allow, the rest
    all over the last pipe (the driver sees them as one fence: signalled once all are,
    failed as soon as one fails). None when there is no room for a pipe."""
    if not fences:
        return []
    if room < 1:
        return None
    if len(fences) <= room:
        return [[f] for f in fences]
    return [[f] for f in fences[: room - 1]] + [fences[room - 1 :]]


def _relay_fences(
    groups: list[list[SyncFenceLike]], writers: list[int], child: _Child, pending: _Pending
) -> None:
    """Wait for the caller's fences here and tell the child (one byte per pipe), then
    start the execution's hang clock. After a failed fence the rest are not waited
    for: the driver fails at the first failed fence, as the reference does."""
    failed = False
    for group, w in zip(groups, writers):
        for fence in group:
            if failed:
                break
            try:
                failed = fence.wait(None) != ErrorStatus.NONE
            except Exception:
                failed = True
        with contextlib.suppress(OSError):
            os.write(w, b"\1" if failed else b"\0")
        with contextlib.suppress(OSError):
            os.close(w)
    child.arm(pending)


class _Slot:
    """A burst slot: its number, and (weakly, if it can) what keeps its handle: the
    memory that brought it, or the handle itself."""

    __slots__ = ("number", "owner")

    def __init__(self, number: int):
        self.number = number
        self.owner: Callable[[], Any] = lambda: None  # a weakref.ref, or a strong stand-in

    def holds(self, handle: Any) -> bool:
        owner = self.owner()
        return owner is not None and (owner is handle or getattr(owner, "handle", None) is handle)


class IsolatedBurst(_Remote):
    """A burst in the child. Pools are cached in slots by their handle, as the burst
    controller caches them by memory: each pool's descriptor crosses once. A slot lasts
    until ``free_memory``, or until the caller drops the memory that brought its
    handle: as Android's burst controller frees a slot when its memory object is
    destroyed, the child is then told to free it (a long burst over fresh pools must not
    keep every one of them open and mapped, here or in the child)."""

    def __init__(
        self, device: IsolatedDevice, child: _Child, obj: int, prepared: IsolatedPreparedModel
    ):
        super().__init__(device, child, obj)
        self.prepared = prepared  # keep the prepared model alive as long as its burst
        # Reentrant: a memory's collection frees its slot on whatever thread the garbage
        # collector runs, possibly one inside ``execute`` holding this lock.
        self._lock = threading.RLock()
        self._slots: dict[int, _Slot] = {}  # id(handle) -> slot
        self._next_slot = 0

    @property
    def cached_slots(self) -> int:
        """Pools cached in slots (here and in the child)."""
        return len(self._slots)

    def _new_slot(self, handle: Any, memory: Memory | None) -> _Slot:
        key = id(handle)
        slot = _Slot(self._next_slot)
        self._next_slot += 1
        for owner in (memory, handle):
            if owner is None:
                continue
            try:
                slot.owner = weakref.ref(owner, self._on_collected(key, slot))
            except TypeError:  # not weakly referenceable
                continue
            break
        else:  # nothing to watch: held until free_memory
            slot.owner = lambda: handle
        old = self._slots.get(key)
        self._slots[key] = slot
        if old is not None:  # its owner is gone and its handle's id reused
            self._free(old)
        return slot

    def _on_collected(self, key: int, slot: _Slot) -> Callable[[Any], None]:
        """The weakref callback freeing ``slot`` when its owner is collected. It holds
        the burst weakly: a collected burst is released in the child, slots and all."""
        burst = weakref.ref(self)

        def collected(_ref: Any) -> None:
            owner = burst()
            if owner is None:
                return
            with owner._lock:
                if owner._slots.get(key) is not slot:
                    return  # freed already
                del owner._slots[key]
            owner._free(slot)

        return collected

    def _free(self, slot: _Slot) -> None:
        self._child.post(Op.BURST_FREE, self._obj, Packer().u32(slot.number).data())

    def execute(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        enc = self.prepared._checked(request, deadline, loop_timeout)
        if not isinstance(enc, wire.Encoded):
            return enc, [], NO_TIMING
        memories: dict[int, Memory] = {}  # id(handle) -> a memory of the request holding it
        for pool in request.pools:
            if isinstance(pool, Memory) and pool.handle is not None:
                memories.setdefault(id(pool.handle), pool)
        slots, has_fd, fds = [], bytearray(), []
        with self._lock:
            for handle in enc.handles:
                slot = self._slots.get(id(handle))
                if slot is None or not slot.holds(handle):  # new, or an id reused
                    slot = self._new_slot(handle, memories.get(id(handle)))
                    has_fd.append(1)
                    fds.append(handle.fd)
                else:
                    has_fd.append(0)
                slots.append(slot.number)
        p = Packer().blob(enc.data).u32s(slots).blob(bytes(has_fd))
        _execution_args(p, measure, deadline, loop_timeout)
        return self.prepared._execution(Op.BURST_EXECUTE, self._obj, p.data(), fds)

    def free_memory(self, memory: Memory) -> None:
        handle = getattr(memory, "handle", None)
        with self._lock:
            slot = self._slots.get(id(handle))
            if slot is None or not slot.holds(handle):
                return
            del self._slots[id(handle)]
        self._free(slot)


class IsolatedBuffer(_Remote):
    """``IBuffer`` in the child."""

    def _copy(self, op: int, memory: Any, dims: tuple[int, ...] | None) -> ErrorStatus:
        device = self._device
        p, fds = Packer(), []
        if isinstance(memory, Memory):
            (pool,) = _portable_pools([memory])
            if pool.handle is None:
                return device._refuse(
                    ErrorStatus.INVALID_ARGUMENT, "the memory has no descriptor to pass"
                )
            size, name = pool.size, pool.name
            if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= UINT64_MAX:
                return device._refuse(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"memory size {reprlib.repr(size)} is not a uint64",
                )
            if not isinstance(name, str):
                return device._refuse(
                    ErrorStatus.INVALID_ARGUMENT, f"memory name {reprlib.repr(name)} is not a str"
                )
            p.u64(size).str(name)
            fds.append(pool.handle.fd)
        else:
            p.u64(0).str("")  # no descriptor: the driver gets None, and judges it
        if dims is not None:
            p.u32s(list(dims))
        return device._rpc(self._child, op, self._obj, p.data(), fds, lambda u: (), ())[0]

    def copy_to(self, dst: Memory) -> ErrorStatus:
        return self._copy(Op.BUFFER_COPY_TO, dst, None)

    def copy_from(self, src: Memory, dimensions: Sequence[int]) -> ErrorStatus:
        dims = uint32_dims(dimensions)
        if dims is None or len(dims) > MAX_COPY_DIMS:
            return self._device._refuse(
                ErrorStatus.INVALID_ARGUMENT,
                f"copy_from dimensions {reprlib.repr(dimensions)} are not all uint32",
            )
        return self._copy(Op.BUFFER_COPY_FROM, src, dims)


__all__ = [
    "DEFAULT_START_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "OUTCOME_STATUS",
    "IsolatedBuffer",
    "IsolatedBurst",
    "IsolatedDevice",
    "IsolatedPreparedModel",
    "Outcome",
    "check_timeout",
]
