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
    operand_type_name,
    tensor_has_unspecified_dimensions,
)
from driver.memory import pool_buffer
from driver.operations.base import array_from_bytes, array_to_bytes


def _invalid(msg: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, msg)


def merge_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """Combine two partial shapes (0 = unknown dim, () = unknown rank); None if they
    contradict."""
    if not a:
        return b
    if not b:
        return a
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x and y and x != y:
            return None
        out.append(x or y)
    return tuple(out)


class DriverBuffer:
    """``IBuffer``: the device-side tensor behind a memory-domain token."""

    def __init__(self, operand: Operand, dims: tuple[int, ...], roles: set[tuple[int, int, bool]]):
        self.operand = operand
        self.dims = dims  # declared (possibly partial) dims
        self.roles = roles  # {(id(prepared model), io_index, is_output)}
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
        if request_dims and merge_dims(request_dims, dims) is None:
            raise _invalid(
                f"buffer token {self.token} holds dims {list(dims)}, request says {list(request_dims)}"
            )
        return array_from_bytes(type_code, dims, data)

    def fits(self, shape: tuple[int, ...]) -> bool:
        return merge_dims(self.dims, tuple(shape)) is not None

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
            if not isinstance(dst, Memory):
                raise _invalid("copy_to destination is not a memory pool")
            if dst.size != len(data):
                raise _invalid(
                    f"copy_to: buffer holds {len(data)} bytes, destination has {dst.size}"
                )
            pool_buffer(dst)[: len(data)] = data
        except HalError as e:
            return e.status
        return ErrorStatus.NONE

    def copy_from(self, src: Memory, dimensions: Sequence[int]) -> ErrorStatus:
        """``IBuffer::copyFrom``: sets dims, marks the buffer initialized."""
        try:
            if not isinstance(src, Memory):
                raise _invalid("copy_from source is not a memory pool")
            dims = merge_dims(self.dims, tuple(int(d) for d in dimensions))
            if dims is None:
                raise _invalid(f"copy_from dims {list(dimensions)} contradict {list(self.dims)}")
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

    def allocate(
        self,
        device,
        desc: BufferDesc,
        prepared_models: Sequence[object],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[DriverBuffer, int]:
        if not input_roles and not output_roles:
            raise _invalid("allocate needs at least one role")
        operand: Operand | None = None
        dims: tuple[int, ...] | None = tuple(desc.dimensions)
        roles: set[tuple[int, int, bool]] = set()
        for is_output, role_list in ((False, input_roles), (True, output_roles)):
            for n, role in enumerate(role_list):
                kind = "output" if is_output else "input"
                if not 0 <= role.model_index < len(prepared_models):
                    raise _invalid(f"{kind} role {n}: model index {role.model_index} out of range")
                pm = prepared_models[role.model_index]
                if getattr(pm, "device", None) is not device:
                    raise _invalid(f"{kind} role {n}: prepared model is not from this device")
                main = pm.model.main
                io = main.output_indexes if is_output else main.input_indexes
                if not 0 <= role.io_index < len(io):
                    raise _invalid(f"{kind} role {n}: {kind} index {role.io_index} out of range")
                if not (0.0 < role.frequency <= 1.0):
                    raise _invalid(f"{kind} role {n}: frequency {role.frequency} not in (0, 1]")
                key = (id(pm), role.io_index, is_output)
                if key in roles:
                    raise _invalid(f"{kind} role {n} is listed twice")
                roles.add(key)
                this = main.operands[io[role.io_index]]
                if operand is None:
                    operand = this
                elif (this.type, this.scale, this.zero_point, this.extra_params) != (
                    operand.type,
                    operand.scale,
                    operand.zero_point,
                    operand.extra_params,
                ):
                    raise _invalid(
                        f"{kind} role {n}: operand {operand_type_name(this.type)} "
                        f"scale {this.scale} zp {this.zero_point} differs from the other roles"
                    )
                dims = merge_dims(dims, this.dimensions) if dims is not None else None
                if dims is None:
                    raise _invalid(
                        f"{kind} role {n}: dims {list(this.dimensions)} contradict other roles"
                    )
        assert operand is not None
        buf = DriverBuffer(operand, dims or (), roles)
        with self._lock:
            token = next(self._tokens)
            buf.token = token
            self._live[token] = buf
        return buf, token

    def lookup(self, token: int, prepared, io_index: int, *, is_output: bool) -> DriverBuffer:
        buf = self._live.get(token)
        if buf is None:
            raise _invalid(f"unknown or freed buffer token {token}")
        if (id(prepared), io_index, is_output) not in buf.roles:
            kind = "output" if is_output else "input"
            raise _invalid(
                f"buffer token {token} was not allocated for {kind} {io_index} of this model"
            )
        return buf
