"""Small valid models the request and memory targets execute against, and the pools the
targets give the device.

Each exercises a different part of request handling: unknown dimensions given by the
request (and dynamic output shapes), a scalar input, quantized data with a constant in a
model pool (CONSTANT_REFERENCE), unknown rank, control flow (IF, and a WHILE whose trip
count comes from the request's data), several outputs. They are built in code, not read
from the test suite, so the targets carry no dependency on tests.
"""

from __future__ import annotations

from collections.abc import Callable

from driver.builder import ModelBuilder
from driver.hal.types import Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import SharedMemory
from fuzz.harness import HarnessPools


def _add_dynamic() -> Model:
    """``y = x + b``: x has an unknown leading dim, so the request sizes it and the
    output shape is reported by the execution."""
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (0, 3))
    y_in = b.add_input(T.TENSOR_FLOAT32, (1, 3))
    out = b.add_output(T.TENSOR_FLOAT32, (0, 3))
    b.add_operation(O.ADD, [x, y_in, b.add_scalar(T.INT32, 0)], [out])
    return b.build()


def _mul_scalar_activation() -> Model:
    """``MUL`` whose fused activation is a model input (a scalar request argument)."""
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (2, 2))
    w = b.add_input(T.TENSOR_FLOAT32, (2,))
    act = b.add_input(T.INT32)
    out = b.add_output(T.TENSOR_FLOAT32, (2, 2))
    b.add_operation(O.MUL, [x, w, act], [out])
    return b.build()


def _quant8_reference_constant() -> Model:
    """Quantized ADD with the second operand a constant in a model pool, then RELU6
    (two operations, one temporary), and both results as outputs."""
    b = ModelBuilder()
    q = dict(scale=0.5, zero_point=128)
    x = b.add_input(T.TENSOR_QUANT8_ASYMM, (1, 4), **q)
    c = b.add_constant(T.TENSOR_QUANT8_ASYMM, (1, 4), [128, 130, 140, 255], by_reference=True, **q)
    s = b.add_output(T.TENSOR_QUANT8_ASYMM, (1, 4), **q)
    r = b.add_output(T.TENSOR_QUANT8_ASYMM, (1, 4), **q)
    b.add_operation(O.ADD, [x, c, b.add_scalar(T.INT32, 0)], [s])
    b.add_operation(O.RELU6, [s], [r])
    return b.build()


def _unknown_rank() -> Model:
    """``LOGISTIC`` over a float16 tensor of unknown rank (HAL 1.2): the request gives
    the rank and every dimension."""
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT16, ())
    out = b.add_output(T.TENSOR_FLOAT16, ())
    b.add_operation(O.LOGISTIC, [x], [out])
    return b.build()


def _if_select() -> Model:
    """``IF(cond, x + 1, x * 2)`` with inputs (cond, x)."""
    mb = ModelBuilder()
    branches = []
    for op in (O.ADD, O.MUL):
        sg = mb.new_subgraph()
        xi = sg.add_input(T.TENSOR_INT32, (2,))
        k = sg.add_constant(T.TENSOR_INT32, (1,), [1 if op == O.ADD else 2])
        yo = sg.add_output(T.TENSOR_INT32, (2,))
        sg.add_operation(op, [xi, k, sg.add_scalar(T.INT32, 0)], [yo])
        branches.append(sg)
    cond = mb.add_input(T.TENSOR_BOOL8, (1,))
    x = mb.add_input(T.TENSOR_INT32, (2,))
    y = mb.add_output(T.TENSOR_INT32, (2,))
    mb.add_operation(
        O.IF,
        [cond, mb.add_subgraph_operand(branches[0]), mb.add_subgraph_operand(branches[1]), x],
        [y],
    )
    return mb.build()


def _while_count() -> Model:
    """``while i < n: i += 1`` with inputs (i, n): the trip count is request data, so the
    loop timeout decides long runs."""
    mb = ModelBuilder()
    cond = mb.new_subgraph()
    ci = cond.add_input(T.TENSOR_INT32, (1,))
    cn = cond.add_input(T.TENSOR_INT32, (1,))
    flag = cond.add_output(T.TENSOR_BOOL8, (1,))
    cond.add_operation(O.LESS, [ci, cn], [flag])
    body = mb.new_subgraph()
    bi = body.add_input(T.TENSOR_INT32, (1,))
    bn = body.add_input(T.TENSOR_INT32, (1,))
    bo = body.add_output(T.TENSOR_INT32, (1,))
    one = body.add_constant(T.TENSOR_INT32, (1,), [1])
    body.add_operation(O.ADD, [bi, one, body.add_scalar(T.INT32, 0)], [bo])
    body.identify_inputs_and_outputs([bi, bn], [bo])
    i = mb.add_input(T.TENSOR_INT32, (1,))
    n = mb.add_input(T.TENSOR_INT32, (1,))
    out = mb.add_output(T.TENSOR_INT32, (1,))
    mb.add_operation(
        O.WHILE, [mb.add_subgraph_operand(cond), mb.add_subgraph_operand(body), i, n], [out]
    )
    return mb.build()


def _split_outputs() -> Model:
    """``SPLIT`` of a signed-quant tensor into two outputs (one per half)."""
    b = ModelBuilder()
    q = dict(scale=0.25, zero_point=-3)
    x = b.add_input(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 4), **q)
    o1 = b.add_output(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 2), **q)
    o2 = b.add_output(T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 2), **q)
    b.add_operation(O.SPLIT, [x, b.add_scalar(T.INT32, 1), b.add_scalar(T.INT32, 2)], [o1, o2])
    return b.build()


FIXTURES: tuple[tuple[str, Callable[[], Model]], ...] = (
    ("add_dynamic", _add_dynamic),
    ("mul_scalar_activation", _mul_scalar_activation),
    ("quant8_reference_constant", _quant8_reference_constant),
    ("unknown_rank", _unknown_rank),
    ("if_select", _if_select),
    ("while_count", _while_count),
    ("split_outputs", _split_outputs),
)
"""(name, builder) in a fixed order: a fuzz input selects a fixture by index, so
appending keeps old corpora meaningful; reordering does not."""


def fixture_models() -> list[tuple[str, Model]]:
    return [(name, build()) for name, build in FIXTURES]


class SharedPoolHandle(SharedMemory):
    """A harness pool backed by a memfd, so a driver in another process (``D@isolated``)
    maps the same bytes, as a real HAL service maps the caller's ashmem. ``data`` is the
    writable mapping (same length as the pool; slicing reads bytes, slice assignment
    writes in place), as :class:`fuzz.harness.PoolHandle`'s bytearray is for a
    process-private pool."""

    __slots__ = ()

    @property
    def data(self):
        return self._map


class SharedPools(HarnessPools):
    """:class:`fuzz.harness.HarnessPools` whose pools are shareable (memfd): a pool
    without a descriptor cannot cross a process, and a driver out of process rightly
    judges it invalid, which the harness would blame on the driver. Filling a pool costs
    the same as for a bytearray (a copy of ``capacity`` bytes)."""

    def __init__(self, count: int = 4, capacity: int = 1 << 16):
        self.capacity = capacity
        self.handles = [SharedPoolHandle(capacity) for _ in range(count)]
