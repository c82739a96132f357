"""The out-of-process driver service: a device in a child process, behind the wire format.

``python -m driver.service FD`` serves one device over the Unix stream socket ``FD``
(inherited from the parent, :class:`driver.isolated.IsolatedDevice`). The parent names
the driver in its first message (any ``--driver`` value); every device, prepared-model,
burst and buffer method then travels as a frame:

    u16 op | u16 flags (0) | u32 call id | u32 object id | u32 payload length | u32 fd count
    payload (length bytes)

with the frame's file descriptors (``SCM_RIGHTS``) on its first byte. Models, requests,
capabilities, execution results and buffer allocations inside payloads are wire messages
(``docs/wire-format.md``); their pools travel as the descriptors, so the child maps the
parent's shared memory and writes outputs straight into it. Everything else is a few
little-endian integers (:class:`Packer` / :class:`Unpacker`). Nothing is pickled: the
parent decodes the child's replies with the same bounded decoders the fuzzer hammers, so
a misbehaving driver can at worst produce a reply the parent rejects.

Every reply starts with the HAL status and the driver's message (``last_error``) for it.
A call the child cannot decode (an unknown op or object, a malformed payload) is answered
by a REFUSED frame instead: that head alone, GENERAL_FAILURE, without the values the
call's reply carries and with no completion to follow; the parent reports it as the
call's FAILURE, and the child carries on.
Asynchronous completions come back as NOTIFY (``execute``) and FENCED_DONE
(``executeFenced``) frames carrying the call id of the launch. A Python exception that
escapes the driver is a crash: the child reports it (CRASHED, with the traceback) and
exits, as a native HAL service would abort. A segfault or ``os._exit`` is seen by the
parent as the socket closing; a hang, as no reply in time.
"""

from __future__ import annotations

import array
import contextlib
import enum
import os
import select
import socket
import struct
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from driver import wire
from driver.hal.types import (
    NO_TIMING,
    DeviceType,
    ErrorStatus,
    Extension,
    ExtensionOperandTypeInformation,
    HalVersion,
    Memory,
    OutputShape,
    Timing,
)

HEADER = struct.Struct("<HHIIII")
MAX_PAYLOAD = wire.MAX_MESSAGE_BYTES + (1 << 20)
MAX_FDS = 253
"""``SCM_MAX_FD``: descriptors one frame can carry (so at most this many pools a call)."""
CRASH_EXIT_CODE = 70
MAX_COPY_DIMS = 1 << 16
"""Dimensions one ``copyFrom`` can carry (a buffer of unknown rank takes any rank)."""


class Op(enum.IntEnum):
    # parent -> child
    HELLO = 1
    GET_CAPABILITIES = 2
    GET_VERSION_STRING = 3
    GET_TYPE = 4
    GET_SUPPORTED_EXTENSIONS = 5
    GET_NUMBER_OF_CACHE_FILES = 6
    GET_SUPPORTED_OPERATIONS = 7
    PREPARE_MODEL = 8
    PREPARE_FROM_CACHE = 9
    ALLOCATE = 10
    EXECUTE_SYNC = 11
    EXECUTE_ASYNC = 12
    EXECUTE_FENCED = 13
    CONFIGURE_BURST = 14
    BURST_EXECUTE = 15
    BURST_FREE = 16  # one-way
    BUFFER_COPY_TO = 17
    BUFFER_COPY_FROM = 18
    RELEASE = 19  # one-way
    # child -> parent
    REPLY = 100
    NOTIFY = 101
    FENCED_DONE = 102
    CRASHED = 103
    REFUSED = 104  # the answer to a call the child could not decode (a reply head alone)


class ProtocolError(Exception):
    """A frame or payload that does not follow the protocol."""


# ---------------------------------------------------------------------------------------
# Payloads
# ---------------------------------------------------------------------------------------

_U8, _U32, _U64 = (struct.Struct(f) for f in ("<B", "<I", "<Q"))


class Packer:
    """Builds a payload."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> Packer:
        self.parts.append(_U8.pack(v))
        return self

    def u32(self, v: int) -> Packer:
        """A uint32. A caller's out-of-range or non-int argument (a bad enum such as a
        priority of -1) crosses as 0xFFFFFFFF, which the child rejects as the driver
        would: an invalid argument stays invalid instead of breaking the transport."""
        try:
            self.parts.append(_U32.pack(v))
        except (struct.error, TypeError):
            self.parts.append(_U32.pack(0xFFFFFFFF))
        return self

    def u64(self, v: int) -> Packer:
        self.parts.append(_U64.pack(v))
        return self

    def opt_u64(self, v: int | None) -> Packer:
        """None, or a uint64: a deadline or a duration in nanoseconds, HAL 1.3's
        ``OptionalTimePoint`` / ``OptionalTimeoutDuration``. The whole ``[0, 2**64)``
        range crosses unchanged; the sender validates first (anything else raises)."""
        if v is None:
            self.parts.append(b"\0")
        else:
            self.parts.append(b"\1" + _U64.pack(v))
        return self

    def blob(self, data: bytes) -> Packer:
        self.parts.append(_U32.pack(len(data)))
        self.parts.append(data)
        return self

    def str(self, text: str) -> Packer:
        return self.blob(text.encode("utf-8", "replace"))

    def u32s(self, values: Sequence[int]) -> Packer:
        self.parts.append(_U32.pack(len(values)))
        self.parts.append(struct.pack(f"<{len(values)}I", *values))
        return self

    def data(self) -> bytes:
        return b"".join(self.parts)


class Unpacker:
    """Reads a payload; any shortfall or bad value is a :class:`ProtocolError`."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise ProtocolError(f"payload truncated at byte {self.pos}")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def u8(self) -> int:
        return self._take(_U8)

    def u32(self) -> int:
        return self._take(_U32)

    def u64(self) -> int:
        return self._take(_U64)

    def opt_u64(self) -> int | None:
        flag = self.u8()
        if flag > 1:
            raise ProtocolError(f"bad optional flag {flag}")
        return self._take(_U64) if flag else None

    def blob(self) -> bytes:
        n = self.u32()
        if self.pos + n > len(self.data):
            raise ProtocolError(f"blob of {n} bytes runs past the payload")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def str(self) -> str:
        return self.blob().decode("utf-8", "replace")

    def u32s(self, limit: int = 1 << 20) -> list[int]:
        n = self.u32()
        if n > limit or self.pos + 4 * n > len(self.data):
            raise ProtocolError(f"bad count {n}")
        out = list(struct.unpack_from(f"<{n}I", self.data, self.pos))
        self.pos += 4 * n
        return out

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ProtocolError(f"{len(self.data) - self.pos} bytes after the payload")


def pack_extensions(p: Packer, extensions: Sequence[Extension]) -> None:
    p.u32(len(extensions))
    for ext in extensions:
        p.str(ext.name)
        p.u32(len(ext.operand_types))
        for info in ext.operand_types:
            p.u32(info.type).u8(1 if info.is_tensor else 0).u32(info.byte_size)


def unpack_extensions(u: Unpacker) -> list[Extension]:
    out = []
    for _ in range(_bounded(u.u32(), 4096)):
        name = u.str()
        types = []
        for _ in range(_bounded(u.u32(), 65536)):
            t, is_tensor, size = u.u32(), u.u8(), u.u32()
            types.append(ExtensionOperandTypeInformation(t, bool(is_tensor), size))
        out.append(Extension(name, tuple(types)))
    return out


def _bounded(n: int, limit: int) -> int:
    if n > limit:
        raise ProtocolError(f"count {n} exceeds {limit}")
    return n


def pack_result(status: Any, shapes: Sequence[OutputShape], timing: Timing, message: str) -> bytes:
    """An execution result as a wire EXECUTION_RESULT message."""
    return wire.encode(
        wire.ExecutionResultMessage(int(status), tuple(shapes), timing, message[:60000])
    ).data


# ---------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------


@dataclass
class Frame:
    op: int
    call_id: int
    obj_id: int
    payload: bytes
    fds: list[int] = field(default_factory=list)

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def send_frame(
    sock: socket.socket,
    op: int,
    call_id: int,
    obj_id: int,
    payload: bytes = b"",
    fds: Sequence[int] = (),
) -> None:
    """Send one frame (the caller serializes senders)."""
    if len(fds) > MAX_FDS:
        raise ProtocolError(f"{len(fds)} descriptors exceed the {MAX_FDS} one frame can carry")
    head = HEADER.pack(op, 0, call_id, obj_id, len(payload), len(fds))
    if not fds:
        sock.sendall(head + payload if len(payload) < 65536 else head)
        if len(payload) >= 65536:
            sock.sendall(payload)
        return
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
    sent = sock.sendmsg([head, payload], rights)
    if sent < len(head):
        sock.sendall(head[sent:])
        sock.sendall(payload)
    elif sent < len(head) + len(payload):
        sock.sendall(memoryview(payload)[sent - len(head) :])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ProtocolError(f"connection closed inside a frame ({got} of {n} bytes)")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket) -> Frame | None:
    """The next frame, or None at a clean end of stream."""
    head = b""
    fds: list[int] = []
    try:
        while len(head) < HEADER.size:
            data, got, flags, _ = socket.recv_fds(sock, HEADER.size - len(head), MAX_FDS)
            fds.extend(got)
            if flags & socket.MSG_CTRUNC:
                raise ProtocolError("descriptors were truncated")
            if not data:
                if head:
                    raise ProtocolError("connection closed inside a frame header")
                return None
            head += data
        op, flags, call_id, obj_id, length, nfds = HEADER.unpack(head)
        if flags or length > MAX_PAYLOAD or nfds != len(fds):
            raise ProtocolError(
                f"bad frame header (op {op}, flags {flags}, length {length}, "
                f"{nfds} descriptors announced, {len(fds)} received)"
            )
        payload = _recv_exact(sock, length) if length else b""
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    return Frame(op, call_id, obj_id, payload, fds)


def reply_head(status: Any, message: str = "") -> Packer:
    return Packer().u32(int(status)).str(message)


# ---------------------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------------------


class DriverCrash(Exception):
    """A Python exception escaped the driver (or the driver broke the protocol)."""


class _PipeFence:
    """A ``wait_for`` fence relayed by the parent over a pipe: one byte, 0 when the
    parent's fence signalled, 1 when it failed; end of file (the parent died) fails."""

    def __init__(self, fd: int):
        self._fd = fd
        self._status: ErrorStatus | None = None
        self._lock = threading.Lock()

    def fileno(self) -> int:
        return self._fd

    def wait(self, timeout: float | None = None) -> ErrorStatus:
        with self._lock:
            if self._status is not None:
                return self._status
            poller = select.poll()
            poller.register(self._fd, select.POLLIN | select.POLLHUP)
            if not poller.poll(None if timeout is None else max(0, int(timeout * 1000))):
                return ErrorStatus.MISSED_DEADLINE_TRANSIENT
            try:
                data = os.read(self._fd, 1)
            except OSError:
                data = b""
            self._status = ErrorStatus.NONE if data == b"\0" else ErrorStatus.GENERAL_FAILURE
            return self._status

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class _RemoteCallback:
    """The ``IExecutionCallback`` the driver gets: forwards ``notify`` as a NOTIFY frame."""

    def __init__(self, service: Service, call_id: int):
        self.service = service
        self.call_id = call_id
        self._done = False

    def notify(self, status: Any, output_shapes: Sequence[OutputShape], timing: Timing) -> None:
        if self._done:  # HAL: exactly once; later calls are ignored
            return
        self._done = True
        try:
            message = self.service.message(status)
            payload = pack_result(status, output_shapes, timing, message)
        except Exception:
            self.service.crash(self.call_id, "the driver notified a malformed result:\n")
            return
        self.service.send(Op.NOTIFY, self.call_id, 0, payload)


def _bool_flag(value: int) -> bool:
    if value > 1:
        raise ProtocolError(f"bad flag {value}")
    return bool(value)


class Service:
    """Serves one device over ``sock`` until the parent closes it."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._send_lock = threading.Lock()
        self.device: Any = None
        self.objects: dict[int, Any] = {}
        self.bursts: dict[int, dict[int, Memory]] = {}  # burst id -> slot -> memory
        self._next_id = 1

    # --- plumbing -------------------------------------------------------------------
    def send(self, op: int, call_id: int, obj_id: int, payload: bytes = b"") -> None:
        with self._send_lock:
            try:
                send_frame(self.sock, op, call_id, obj_id, payload)
            except OSError:
                os._exit(0)  # the parent is gone

    def crash(self, call_id: int, prefix: str = "") -> None:
        """Report the exception being handled as a crash, then die as a native service
        would (whatever thread we are on)."""
        error = sys.exc_info()[1]
        if isinstance(error, DriverCrash) and error.__cause__ is not None:
            error = error.__cause__  # the driver's own exception, not the service's wrapper
        if error is not None:
            text = prefix + "".join(traceback.format_exception(error))
        else:
            text = prefix + "(no exception)"
        with contextlib.suppress(Exception):
            self.send(Op.CRASHED, call_id, 0, Packer().str(text[-60000:]).data())
        with contextlib.suppress(Exception):
            sys.stderr.write(text)
            sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)

    def thread_crash(self, args: threading.ExceptHookArgs) -> None:
        """``threading.excepthook``: an exception that ends a thread of the driver's is a
        crash of the service, as it would abort a native one."""
        if args.exc_type is SystemExit:
            return
        text = "".join(traceback.format_exception(args.exc_value)) if args.exc_value else ""
        with contextlib.suppress(Exception):
            self.send(Op.CRASHED, 0, 0, Packer().str(text[-60000:]).data())
        with contextlib.suppress(Exception):
            sys.stderr.write(text)
            sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)

    def message(self, status: Any) -> str:
        if status == ErrorStatus.NONE:
            return ""
        text = getattr(self.device, "last_error", "")
        return text if isinstance(text, str) else ""

    def drive(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call into the driver: any exception is the driver's crash."""
        try:
            return fn(*args)
        except Exception as e:
            raise DriverCrash() from e

    def new_id(self, obj: Any) -> int:
        i = self._next_id
        self._next_id += 1
        self.objects[i] = obj
        return i

    def get(self, obj_id: int) -> Any:
        obj = self.objects.get(obj_id)
        if obj is None:
            raise ProtocolError(f"no object {obj_id}")
        return obj

    @staticmethod
    def decode(data: bytes, fds: Sequence[int], kind: wire.MessageKind) -> Any:
        """Decode a model or request whose pools are ``fds``. A descriptor that cannot
        be mapped becomes a pool without a handle, so the driver judges it as it would
        judge any invalid pool."""
        try:
            return wire.decode(data, wire.fd_resolver(fds), expected=kind)
        except wire.WireDecodeError as e:
            if e.failure != wire.DecodeFailure.BAD_HANDLE:
                raise ProtocolError(str(e)) from None
            return wire.decode(data, expected=kind)

    # --- the loop -------------------------------------------------------------------
    def serve(self) -> None:
        handlers = _HANDLERS
        while True:
            try:
                frame = recv_frame(self.sock)
            except (OSError, ProtocolError):
                os._exit(0)
            if frame is None:
                os._exit(0)
            handler = handlers.get(frame.op)
            try:
                if handler is None:
                    raise ProtocolError(f"unknown op {frame.op}")
                result = handler(self, frame)
                if result is not None:
                    self.send(Op.REPLY, frame.call_id, frame.obj_id, result)
            except DriverCrash:
                self.crash(frame.call_id)
            except (ProtocolError, wire.WireDecodeError, wire.WireEncodeError) as e:
                self.send(
                    Op.REFUSED,
                    frame.call_id,
                    frame.obj_id,
                    reply_head(ErrorStatus.GENERAL_FAILURE, f"nnfuzz service: {e}").data(),
                )
            finally:
                frame.close_fds()

    # --- handlers -----------------------------------------------------------------------
    def hello(self, f: Frame) -> bytes:
        spec = Unpacker(f.payload).str()
        from driver.registry import DriverLoadError, load_device

        try:
            self.device = load_device(spec)
        except DriverLoadError as e:
            return reply_head(ErrorStatus.GENERAL_FAILURE, str(e)).u32(0).data()
        try:
            version = int(HalVersion(getattr(self.device, "version", HalVersion.V1_3)))
        except (ValueError, TypeError):
            version = int(HalVersion.V1_3)
        return reply_head(ErrorStatus.NONE).u32(version).data()

    def _status(self, status: Any) -> Packer:
        try:
            code = int(status)
        except (TypeError, ValueError):
            raise DriverCrash(f"the driver returned {status!r} as a status") from None
        if not 0 <= code < 1 << 32:
            raise DriverCrash(f"the driver returned {status!r} as a status")
        return reply_head(code, self.message(status))

    def get_capabilities(self, f: Frame) -> bytes:
        status, caps = self.drive(self.device.get_capabilities)
        return self._status(status).blob(self.drive(lambda: wire.encode(caps).data)).data()

    def get_version_string(self, f: Frame) -> bytes:
        status, text = self.drive(self.device.get_version_string)
        return self._status(status).str(self.drive(str, text)).data()

    def get_type(self, f: Frame) -> bytes:
        status, device_type = self.drive(self.device.get_type)
        return self._status(status).u32(self.drive(int, device_type)).data()

    def get_supported_extensions(self, f: Frame) -> bytes:
        status, extensions = self.drive(self.device.get_supported_extensions)
        p = self._status(status)
        self.drive(pack_extensions, p, extensions)
        return p.data()

    def get_number_of_cache_files(self, f: Frame) -> bytes:
        status, n_model, n_data = self.drive(self.device.get_number_of_cache_files_needed)
        return self._status(status).u32(int(n_model)).u32(int(n_data)).data()

    def get_supported_operations(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        model = self.decode(u.blob(), f.fds, wire.MessageKind.MODEL)
        u.end()
        status, supported = self.drive(self.device.get_supported_operations, model)
        flags = self.drive(lambda: bytes(1 if s else 0 for s in supported))
        return self._status(status).blob(flags).data()

    def _prepared(self, status: Any, prepared: Any) -> bytes:
        obj = self.new_id(prepared) if status == ErrorStatus.NONE and prepared is not None else 0
        return self._status(status).u32(obj).data()

    def prepare_model(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        data = u.blob()
        preference, priority, deadline = u.u32(), u.u32(), u.opt_u64()
        n_handles, n_model_cache, n_data_cache = u.u32(), u.u32(), u.u32()
        token = u.blob() if _bool_flag(u.u8()) else None
        u.end()
        if n_handles + n_model_cache + n_data_cache != len(f.fds):
            raise ProtocolError("descriptor counts disagree")
        model = self.decode(data, f.fds[:n_handles], wire.MessageKind.MODEL)
        model_cache = f.fds[n_handles : n_handles + n_model_cache]
        data_cache = f.fds[n_handles + n_model_cache :]
        status, prepared = self.drive(
            self.device.prepare_model,
            model,
            preference,
            priority,
            deadline,
            model_cache,
            data_cache,
            token,
        )
        return self._prepared(status, prepared)

    def prepare_from_cache(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        deadline, n_model_cache = u.opt_u64(), u.u32()
        token = u.blob()
        u.end()
        status, prepared = self.drive(
            self.device.prepare_model_from_cache,
            deadline,
            f.fds[:n_model_cache],
            f.fds[n_model_cache:],
            token,
        )
        return self._prepared(status, prepared)

    def allocate(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        msg = wire.decode(u.blob(), expected=wire.MessageKind.BUFFER_ALLOCATION)
        prepared = [self.get(i) for i in u.u32s()]
        u.end()
        status, buffer, token = self.drive(
            self.device.allocate, msg.desc, prepared, msg.input_roles, msg.output_roles
        )
        ok = status == ErrorStatus.NONE and buffer is not None
        obj = self.new_id(buffer) if ok else 0
        return self._status(status).u32(obj).u32(int(token) if ok else 0).data()

    def _execution_args(self, u: Unpacker) -> tuple[int, int | None, int | None]:
        return u.u32(), u.opt_u64(), u.opt_u64()

    def _result(self, result: Any) -> bytes:
        try:
            status, shapes, timing = result
            return pack_result(status, shapes, timing, self.message(status))
        except Exception as e:
            raise DriverCrash("the driver returned a malformed execution result") from e

    def execute_sync(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        request = self.decode(u.blob(), f.fds, wire.MessageKind.REQUEST)
        measure, deadline, loop_timeout = self._execution_args(u)
        u.end()
        pm = self.get(f.obj_id)
        result = self.drive(pm.execute_synchronously, request, measure, deadline, loop_timeout)
        return self._result(result)

    def execute_async(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        request = self.decode(u.blob(), f.fds, wire.MessageKind.REQUEST)
        measure, deadline, loop_timeout = self._execution_args(u)
        u.end()
        pm = self.get(f.obj_id)
        callback = _RemoteCallback(self, f.call_id)
        status = self.drive(pm.execute, request, measure, deadline, loop_timeout, callback)
        return self._status(status).data()

    def execute_fenced(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        data = u.blob()
        n_fences = u.u32()
        measure, deadline, loop_timeout = self._execution_args(u)
        timeout_after_fence = u.opt_u64()
        u.end()
        if n_fences > len(f.fds):
            raise ProtocolError("descriptor counts disagree")
        split = len(f.fds) - n_fences
        request = self.decode(data, f.fds[:split], wire.MessageKind.REQUEST)
        # The fences outlive this frame: take their descriptors out of it.
        fences = [_PipeFence(fd) for fd in f.fds[split:]]
        f.fds = f.fds[:split]
        pm = self.get(f.obj_id)
        status, fence, callback = self.drive(
            pm.execute_fenced,
            request,
            fences,
            measure,
            deadline,
            loop_timeout,
            timeout_after_fence,
        )
        head = self._status(status)
        if status != ErrorStatus.NONE:
            for fence_in in fences:
                fence_in.close()
            return head.u8(0).data()
        threading.Thread(
            target=self._await_fenced,
            args=(f.call_id, fence, callback, fences),
            daemon=True,
            name="nnfuzz-service-fenced",
        ).start()
        return head.u8(1 if fence is not None else 0).data()

    def _await_fenced(self, call_id: int, fence: Any, callback: Any, fences: list) -> None:
        try:
            try:
                fence_status = fence.wait(None) if fence is not None else ErrorStatus.NONE
                if callback is not None:
                    status, launched, fenced = callback.get_execution_info()
                else:
                    status, launched, fenced = fence_status, NO_TIMING, NO_TIMING
                p = reply_head(status, self.message(status))
                for t in (launched, fenced):
                    p.u64(t.time_on_device).u64(t.time_in_driver)
                payload = p.data()
            except Exception:
                self.crash(call_id, "the driver's fenced execution failed:\n")
                return
            self.send(Op.FENCED_DONE, call_id, 0, payload)
        finally:
            for fence_in in fences:
                fence_in.close()

    def configure_burst(self, f: Frame) -> bytes:
        Unpacker(f.payload).end()
        status, burst = self.drive(self.get(f.obj_id).configure_execution_burst)
        ok = status == ErrorStatus.NONE and burst is not None
        obj = self.new_id(burst) if ok else 0
        if ok:
            self.bursts[obj] = {}
        return self._status(status).u32(obj).data()

    def burst_execute(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        data = u.blob()
        slots = u.u32s(MAX_FDS * 64)
        has_fd = u.blob()
        measure, deadline, loop_timeout = self._execution_args(u)
        u.end()
        if len(has_fd) != len(slots) or any(h > 1 for h in has_fd) or sum(has_fd) != len(f.fds):
            raise ProtocolError("slot table disagrees with the descriptors")
        burst = self.get(f.obj_id)
        cache = self.bursts.setdefault(f.obj_id, {})
        fd_index: dict[int, int] = {}
        for i, h in enumerate(has_fd):
            if h:
                fd_index[i] = len(fd_index)
        resolve_fd = wire.fd_resolver(f.fds)

        def resolve(handle_index: int, name: str, size: int) -> Memory:
            # A slot keeps the same Memory across executions, so the driver's own burst
            # cache (keyed by the memory object) sees the same pool every time.
            if handle_index >= len(slots):
                raise wire.WireDecodeError(0, "no slot", wire.DecodeFailure.BAD_HANDLE)
            slot = slots[handle_index]
            cached = cache.get(slot)
            if cached is not None and cached.name == name and cached.size == size:
                return cached
            if handle_index in fd_index and (cached is None or cached.size < size):
                memory = resolve_fd(fd_index[handle_index], name, size)
            elif cached is not None:
                memory = Memory(name, size, cached.handle)
            else:
                raise wire.WireDecodeError(
                    0, f"slot {slot} is empty", wire.DecodeFailure.BAD_HANDLE
                )
            cache[slot] = memory
            return memory

        try:
            request = wire.decode(data, resolve, expected=wire.MessageKind.REQUEST)
        except wire.WireDecodeError as e:
            if e.failure != wire.DecodeFailure.BAD_HANDLE:
                raise ProtocolError(str(e)) from None
            request = wire.decode(data, expected=wire.MessageKind.REQUEST)
        result = self.drive(burst.execute, request, measure, deadline, loop_timeout)
        return self._result(result)

    def burst_free(self, f: Frame) -> None:
        u = Unpacker(f.payload)
        slot = u.u32()
        u.end()
        memory = self.bursts.get(f.obj_id, {}).pop(slot, None)
        burst = self.objects.get(f.obj_id)
        if memory is not None and burst is not None:
            self.drive(burst.free_memory, memory)
        return None

    def _memory(self, u: Unpacker, fds: Sequence[int]) -> Memory | None:
        """A buffer copy's memory: its descriptor, or None when the caller passed
        something that is not a memory (the driver judges that argument)."""
        size, name = u.u64(), u.str()
        if len(fds) > 1:
            raise ProtocolError("a buffer copy carries at most one descriptor")
        if not fds:
            return None
        try:
            return wire.fd_resolver(fds)(0, name, size)
        except wire.WireDecodeError:
            return Memory(name, size, None)

    def buffer_copy_to(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        memory = self._memory(u, f.fds)
        u.end()
        status = self.drive(self.get(f.obj_id).copy_to, memory)
        return self._status(status).data()

    def buffer_copy_from(self, f: Frame) -> bytes:
        u = Unpacker(f.payload)
        memory = self._memory(u, f.fds)
        dims = u.u32s(MAX_COPY_DIMS)
        u.end()
        status = self.drive(self.get(f.obj_id).copy_from, memory, tuple(dims))
        return self._status(status).data()

    def release(self, f: Frame) -> None:
        self.objects.pop(f.obj_id, None)
        self.bursts.pop(f.obj_id, None)
        return None


_HANDLERS: dict[int, Callable[[Service, Frame], bytes | None]] = {
    Op.HELLO: Service.hello,
    Op.GET_CAPABILITIES: Service.get_capabilities,
    Op.GET_VERSION_STRING: Service.get_version_string,
    Op.GET_TYPE: Service.get_type,
    Op.GET_SUPPORTED_EXTENSIONS: Service.get_supported_extensions,
    Op.GET_NUMBER_OF_CACHE_FILES: Service.get_number_of_cache_files,
    Op.GET_SUPPORTED_OPERATIONS: Service.get_supported_operations,
    Op.PREPARE_MODEL: Service.prepare_model,
    Op.PREPARE_FROM_CACHE: Service.prepare_from_cache,
    Op.ALLOCATE: Service.allocate,
    Op.EXECUTE_SYNC: Service.execute_sync,
    Op.EXECUTE_ASYNC: Service.execute_async,
    Op.EXECUTE_FENCED: Service.execute_fenced,
    Op.CONFIGURE_BURST: Service.configure_burst,
    Op.BURST_EXECUTE: Service.burst_execute,
    Op.BURST_FREE: Service.burst_free,
    Op.BUFFER_COPY_TO: Service.buffer_copy_to,
    Op.BUFFER_COPY_FROM: Service.buffer_copy_from,
    Op.RELEASE: Service.release,
}


def _die_with_parent() -> None:
    """Ask the kernel to kill this process when the parent dies (a hung driver never
    reads the end of the socket). Best effort: Linux only."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m driver.service FD``: serve on the inherited socket ``FD``."""
    import faulthandler

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit():
        sys.stderr.write("usage: python -m driver.service FD (started by driver.isolated)\n")
        raise SystemExit(2)
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)
    faulthandler.enable()  # a segfault prints the Python stack to stderr for the parent
    # The driver's prints join its stderr, whose tail the parent shows after a crash.
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    service = Service(socket.socket(fileno=int(args[0])))
    threading.excepthook = service.thread_crash
    service.serve()


# DeviceType is re-exported for the parent's decoding of GET_TYPE replies.
__all__ = ["HEADER", "DeviceType", "Frame", "Op", "Packer", "ProtocolError", "Unpacker", "main"]

if __name__ == "__main__":
    main()
