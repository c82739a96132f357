"""The plain-Python fast paths validation hooks use agree with what they replace.

``OperationContext.once`` (parameters parsed once per context), the tuple broadcasting of
the binary operations and the ``struct`` float32 rounding of scales stand in for slower
numpy calls; these tests check them against the numpy originals, and that a parse shared
by ``validate`` and ``infer_shapes`` still rejects what it should.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from driver.builder import ModelBuilder
from driver.hal.types import ErrorStatus, HalError
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import conv, elementwise
from driver.operations.base import OperationContext, Unknown
from driver.validation import validate_model


def _context() -> OperationContext:
    return OperationContext(O.ADD, [], [], [], [])


def test_once_computes_once_per_context_and_key():
    calls = []

    def parse(ctx: OperationContext) -> int:
        calls.append(ctx)
        return len(calls)

    def other(ctx: OperationContext) -> str:
        return "other"

    a, b = _context(), _context()
    assert a.once(parse) == 1
    assert a.once(parse) == 1  # remembered
    assert a.once(other) == "other"  # keyed by the function
    assert b.once(parse) == 2  # per context
    assert calls == [a, b]


def test_once_does_not_remember_exceptions():
    attempts = []

    def parse(ctx: OperationContext) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise Unknown("not yet")
        return "known"

    ctx = _context()
    with pytest.raises(Unknown):
        ctx.once(parse)
    assert ctx.once(parse) == "known"
    assert len(attempts) == 2


def test_broadcast_shapes_matches_numpy():
    dims = (0, 1, 2, 3)
    shapes = [()] + [s for r in range(1, 4) for s in itertools.product(dims, repeat=r)]
    for a, b in itertools.product(shapes, repeat=2):
        try:
            expected = tuple(np.broadcast_shapes(a, b))
        except ValueError:
            expected = None
        got = elementwise.broadcast_shapes(a, b)
        assert got == expected, (a, b)
        assert got is None or all(type(d) is int for d in got)


@pytest.mark.parametrize("f32", [conv.f32, elementwise.f32])
def test_struct_float32_rounding_matches_numpy(f32):
    rng = np.random.default_rng(5)
    values = [
        0.0,
        -0.0,
        0.1,
        1 / 3,
        2.0**-149,
        2.0**-150,
        1.5 * 2.0**-149,
        1e-46,
        3.4028234663852886e38,
    ]
    values += [3.4028235e38, 3.4028236e38, 1e39, -1e39, math.inf, -math.inf]
    values += list(rng.uniform(-1, 1, 2000) * 10.0 ** rng.integers(-46, 40, 2000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns on float32 overflow
        for v in values:
            assert f32(v) == float(np.float32(v)), v
    assert math.isnan(f32(math.nan))


def _conv_model(stride: int, activation: int = 0):
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (1, 4, 4, 2))
    w = b.add_constant(T.TENSOR_FLOAT32, (3, 2, 2, 2), np.ones((3, 2, 2, 2), np.float32))
    bias = b.add_constant(T.TENSOR_FLOAT32, (3,), np.zeros(3, np.float32))
    params = [b.add_scalar(T.INT32, v) for v in (1, stride, stride, activation)]  # SAME
    side = 4 // max(stride, 1)  # SAME: ceil(4 / stride) outputs per axis
    y = b.add_output(T.TENSOR_FLOAT32, (1, side, side, 3))
    b.add_operation(O.CONV_2D, [x, w, bias, *params], [y])
    return b.build()


def test_shared_parameter_parse_still_validates():
    validate_model(_conv_model(stride=1))
    validate_model(_conv_model(stride=2))  # the output shape follows the parsed stride
    for bad in (_conv_model(stride=0), _conv_model(stride=1, activation=4)):
        with pytest.raises(HalError) as e:
            validate_model(bad)
        assert e.value.status == ErrorStatus.INVALID_ARGUMENT
