"""Memory domains: driver-managed buffers (``IDevice::allocate``, ``IBuffer``).

A :class:`DriverBuffer` is allocated for a set of roles (input or output ``io_index`` of
prepared models of this device). Every use is checked: the token must be live, the use
must be one of the declared roles (else INVALID_ARGUMENT), an uninitialized buffer cannot
be read (GENERAL_FAILURE), and a copy must match the buffer's size (INVALID_ARGUMENT).
Buffers whose dims are not fully known are dynamic: an output execution or ``copy_from``
fixes their dims. Concurrent readers share a snapshot; writers replace the contents under
a short lock, so concurrent writers never crash or block forever.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Sequence

import numpy as np

from driver.hal.types import (
    BufferDesc,
    BufferRole,
    ErrorStatus,
    HalError,
    Memory,
    Operand,
    non_extension_size_of_data,
    tensor_has_unspecified_dimensions,
)
from driver.memory import pool_buffer
from driver.operations.base import array_from_bytes, array_to_bytes
from driver.validation import (
    combine_dimensions,
    uint32_dims,
    validate_buffer_desc_and_roles,
    validate_memory,
)


def _invalid(msg: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, msg)


def _uint32_dims(dimensions: Sequence[int]) -> tuple[int, ...]:
    """``dimensions`` as HIDL's ``vec<uint32_t>``; anything else, floats and strings
    included, is INVALID_ARGUMENT rather than a Python exception."""
    dims = uint32_dims(dimensions)
    if dims is None:
        raise _invalid(f"copy_from dimensions {dimensions!r} are not all uint32")
    return dims


class DriverBuffer:
    """``IBuffer``: the device-side tensor behind a memory-domain token."""

    def __init__(self, operand: Operand, roles: set[tuple[int, int, bool]]):
        self.operand = operand  # what every role agrees on, their dims combined
        self.dims = dims = operand.dimensions  # declared (possibly partial) dims
        self.roles = roles  # {(prepared model's serial, io_index, is_output)}
        self.token = 0
        self._lock = threading.Lock()
        self._data: bytes | None = None  # None = uninitialized
        self._data_dims: tuple[int, ...] = dims

    @property
    def initialized(self) -> bool:
        return self._data is not None

    def invalidate(self) -> None:
        with self._lock:
            self._data = None

    # --- execution-side access ------------------------------------------------------
    def read(self, type_code: int, request_dims: tuple[int, ...]) -> np.ndarray:
        with self._lock:
            data, dims = self._data, self._data_dims
        if data is None:
            raise HalError(
                ErrorStatus.GENERAL_FAILURE, f"buffer token {self.token} is uninitialized"
            )
        if request_dims and combine_dimensions(request_dims, dims) is None:
            raise _invalid(
                f"buffer token {self.token} holds dims {list(dims)}, request says {list(request_dims)}"
            )
        return array_from_bytes(type_code, dims, data)

    def fits(self, shape: tuple[int, ...]) -> bool:
        return combine_dimensions(self.dims, tuple(shape)) is not None

    def write(self, arr: np.ndarray, type_code: int) -> None:
        data = array_to_bytes(arr, type_code)
        with self._lock:
            self._data = data
            self._data_dims = tuple(int(d) for d in arr.shape)

    # --- IBuffer ----------------------------------------------------------------------
    def copy_to(self, dst: Memory) -> ErrorStatus:
        """``IBuffer::copyTo``."""
        try:
            with self._lock:
                data = self._data
            if data is None:
                raise HalError(ErrorStatus.GENERAL_FAILURE, "copy_to from an uninitialized buffer")
            validate_memory(dst, "copy_to destination")
            if dst.size != len(data):
                raise _invalid(
                    f"copy_to: buffer holds {len(data)} bytes, destination has {dst.size}"
                )
            mapped = pool_buffer(dst)
            if mapped.readonly:
                raise _invalid("copy_to destination is mapped read-only")
            mapped[: len(data)] = data
        except HalError as e:
            return e.status
        return ErrorStatus.NONE

    def copy_from(self, src: Memory, dimensions: Sequence[int]) -> ErrorStatus:
        """``IBuffer::copyFrom``: sets dims, marks the buffer initialized."""
        try:
            validate_memory(src, "copy_from source")
            requested = _uint32_dims(dimensions)
            dims = combine_dimensions(self.dims, requested)
            if dims is None:
                raise _invalid(f"copy_from dims {list(requested)} contradict {list(self.dims)}")
            if tensor_has_unspecified_dimensions(self.operand.type, dims):
                raise _invalid(f"copy_from leaves dims unspecified: {list(dims)}")
            size = non_extension_size_of_data(self.operand.type, dims)
            if src.size != size:
                raise _invalid(
                    f"copy_from: source has {src.size} bytes, dims {list(dims)} need {size}"
                )
            data = bytes(pool_buffer(src)[:size])
            with self._lock:
                self._data = data
                self._data_dims = dims
        except HalError as e:
            return e.status
        return ErrorStatus.NONE


class BufferRegistry:
    """The device's live buffers by token (tokens of dropped buffers become invalid)."""

    def __init__(self):
        self._tokens = itertools.count(1)
        self._live: weakref.WeakValueDictionary[int, DriverBuffer] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        # Roles name prepared models by a serial number, not id(): a model prepared after
        # another was freed may get its id, and must not inherit its buffers.
        self._serials: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        self._next_serial = itertools.count(1)

    def _serial(self, prepared: object) -> int:
        with self._lock:
            serial = self._serials.get(prepared)
            if serial is None:
                serial = self._serials[prepared] = next(self._next_serial)
            return serial

    def allocate(
        self,
        device,
        desc: BufferDesc,
        prepared_models: Sequence[object],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[DriverBuffer, int]:
        # The descriptor and roles are checked by the one ``validateMemoryDesc``; what it
        # cannot know is which device a prepared model belongs to.
        alloc = validate_buffer_desc_and_roles(desc, input_roles, output_roles, prepared_models)
        for mi in sorted({mi for mi, _, _ in alloc.roles}):
            if getattr(prepared_models[mi], "device", None) is not device:
                raise _invalid(f"allocate: model {mi} is not a prepared model of this device")
        roles = {
            (self._serial(prepared_models[mi]), io, kind == "output")
            for mi, kind, io in alloc.roles
        }
        buf = DriverBuffer(alloc.operand, roles)
        with self._lock:
            token = next(self._tokens)
            buf.token = token
            self._live[token] = buf
        return buf, token

    def lookup(self, token: int, prepared, io_index: int, *, is_output: bool) -> DriverBuffer:
        buf = self._live.get(token)
        if buf is None:
            raise _invalid(f"unknown or freed buffer token {token}")
        if (self._serial(prepared), io_index, is_output) not in buf.roles:
            kind = "output" if is_output else "input"
            raise _invalid(
                f"buffer token {token} was not allocated for {kind} {io_index} of this model"
            )
        return buf
