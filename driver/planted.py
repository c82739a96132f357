"""Planted-bug drivers: the reference with one deliberate, realistic fault each.

They show that nnfuzz finds what driver teams get wrong, and the test suite uses them to
prove every campaign and property catches its class of bug. Each is a registered
``--driver`` name ``planted-<bug>``:

================  ======================================================================
rounding          quantized ADD requantizes with a truncating shift instead of rounding
activation        ADD, SUB and MUL ignore the fused activation
padding           CONV_2D reads its (NHWC) input shifted by one pixel: padding off by one
broadcast         ADD and MUL tile the smaller input in memory order (np.resize) instead
                  of broadcasting it
crash             ADD raises an exception when an input has a dimension of size 3
hang              MUL never returns when an input has exactly 6 elements
status            getSupportedOperations says INVALID_ARGUMENT for any model with RESHAPE
================  ======================================================================
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from driver.device import DeviceConfig, ReferenceDevice
from driver.hal.types import ErrorStatus, Model, OperandType, OperationType
from driver.operations import REGISTRY
from driver.operations.base import OperationContext, OperationDeclaration, dtype_of
from driver.operations.quant import activation_range_quantized, quantize_multiplier

O = OperationType  # noqa: E741 - the project's spelling of operation references
T = OperandType
QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _override(op: OperationType, execute) -> OperationDeclaration:
    return dataclasses.replace(REGISTRY[op], execute=execute)


def _with_input(ctx: OperationContext, index: int, value: np.ndarray) -> OperationContext:
    ctx.values = list(ctx.values)
    ctx.values[index] = value
    return ctx


# --- rounding: truncating requantization in quantized ADD -------------------------------


def _add_truncating(ctx: OperationContext):
    if ctx.input_type(0) not in QUANT8:
        return REGISTRY[O.ADD].execute(ctx)
    a, b = ctx.value(0).astype(np.int64), ctx.value(1).astype(np.int64)
    s1, s2, so = ctx.input_scale(0), ctx.input_scale(1), ctx.output_scale(0)
    z1, z2, zo = ctx.input_zero_point(0), ctx.input_zero_point(1), ctx.output_zero_point(0)
    twice_max = 2.0 * max(s1, s2)

    def scale_down(x, real):  # the bug: floor division by a power of two, no rounding
        m, shift = quantize_multiplier(real)
        return (x * m) >> (31 - shift)

    x1 = scale_down((a - z1) << 20, s1 / twice_max)
    x2 = scale_down((b - z2) << 20, s2 / twice_max)
    raw = scale_down(x1 + x2, twice_max / ((1 << 20) * so)) + zo
    lo, hi = activation_range_quantized(ctx.scalar(2), so, zo, ctx.output_type(0))
    return [np.clip(raw, lo, hi).astype(dtype_of(ctx))]


# --- activation: fused activation ignored -------------------------------------------------


def _ignoring_activation(op: OperationType):
    def execute(ctx: OperationContext):
        return REGISTRY[op].execute(_with_input(ctx, 2, np.asarray(0, dtype=np.int32)))

    return execute


# --- padding: input read one pixel off ----------------------------------------------------


def _conv_shifted(ctx: OperationContext):
    x = ctx.value(0)
    nchw = ctx.num_inputs in (8, 11, 13) and bool(ctx.scalar(7 if ctx.num_inputs == 8 else 10))
    if x.ndim == 4 and not nchw and x.shape[1] > 1 and x.shape[2] > 1:
        fill = ctx.input_zero_point(0) if ctx.input_type(0) in QUANT8 else 0
        shifted = np.pad(x, ((0, 0), (1, 0), (1, 0), (0, 0)), constant_values=fill)[:, :-1, :-1, :]
        ctx = _with_input(ctx, 0, shifted.astype(x.dtype))
    return REGISTRY[O.CONV_2D].execute(ctx)


# --- broadcast: np.resize instead of broadcasting -----------------------------------------


def _resizing(op: OperationType):
    def execute(ctx: OperationContext):
        a, b = ctx.value(0), ctx.value(1)
        if a.shape != b.shape:
            out_shape = np.broadcast_shapes(a.shape, b.shape)
            ctx = _with_input(ctx, 0, np.resize(a, out_shape).astype(a.dtype))
            ctx = _with_input(ctx, 1, np.resize(b, out_shape).astype(b.dtype))
        return REGISTRY[op].execute(ctx)

    return execute


# --- crash and hang ---------------------------------------------------------------------------


def _crash_on_three(ctx: OperationContext):
    if 3 in ctx.value(0).shape or 3 in ctx.value(1).shape:
        raise IndexError("planted crash: a dimension of size 3")
    return REGISTRY[O.ADD].execute(ctx)


_NEVER = threading.Event()


def _hang_on_six(ctx: OperationContext):
    if ctx.value(0).size == 6 or ctx.value(1).size == 6:
        _NEVER.wait()  # never set: the execution never returns
    return REGISTRY[O.MUL].execute(ctx)


# --- status: a valid model rejected -------------------------------------------------------------


class RejectsReshape(ReferenceDevice):
    def get_supported_operations(self, model: Model):
        if any(op.type == O.RESHAPE for op in model.main.operations):
            self.last_error = "planted: RESHAPE models are 'invalid'"
            return ErrorStatus.INVALID_ARGUMENT, []
        return super().get_supported_operations(model)


PLANTED: dict[str, dict[int, OperationDeclaration]] = {
    "rounding": {O.ADD: _override(O.ADD, _add_truncating)},
    "activation": {op: _override(op, _ignoring_activation(op)) for op in (O.ADD, O.SUB, O.MUL)},
    "padding": {O.CONV_2D: _override(O.CONV_2D, _conv_shifted)},
    "broadcast": {op: _override(op, _resizing(op)) for op in (O.ADD, O.MUL)},
    "crash": {O.ADD: _override(O.ADD, _crash_on_three)},
    "hang": {O.MUL: _override(O.MUL, _hang_on_six)},
    "status": {},
}


def make_planted(bug: str) -> ReferenceDevice:
    """The reference with the named planted bug (see the module docstring)."""
    if bug not in PLANTED:
        raise ValueError(f"unknown planted bug {bug!r}: one of {', '.join(PLANTED)}")
    config = DeviceConfig(name=f"planted-{bug}", operation_overrides=PLANTED[bug])
    cls = RejectsReshape if bug == "status" else ReferenceDevice
    return cls(config)
