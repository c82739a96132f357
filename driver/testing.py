"""Run one operation on the reference with a few lines: the tool for kernel tests.

    out, = run_op(OperationType.ADD,
                  [tensor(T.TENSOR_FLOAT32, [1, 2]), tensor(T.TENSOR_FLOAT32, [3, 4]), scalar(T.INT32, 0)],
                  [output(T.TENSOR_FLOAT32, (2,))])

Tensors are model inputs by default (``const=True`` makes them constants); scalars are
constants. Values are given in the operand's storage type (quantized integers for
quantized types); use :func:`driver.operations.quant.quantize` to make them from reals.
"""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from driver.builder import ModelBuilder
from driver.executor import Executor
from driver.hal.types import ErrorStatus, HalError, HalVersion, Model, SymmPerChannelQuantParams
from driver.hal.types import OperandType as T
from driver.operations.base import storage_dtype

_R = TypeVar("_R")


def traced_peak(run: Callable[[], _R]) -> tuple[_R, int]:
    """``run()``'s result and the peak bytes allocated while it ran (tracemalloc traces
    numpy's buffers): what the memory tests bound."""
    tracemalloc.start()
    try:
        result = run()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def status_of(call: Callable[[], object]) -> ErrorStatus:
    """The status of the :class:`HalError` ``call()`` raises; an AssertionError when it
    raises none."""
    try:
        call()
    except HalError as e:
        return e.status
    raise AssertionError(f"{call} raised no HalError")


@dataclass
class TensorArg:
    type: int
    values: np.ndarray
    scale: float = 0.0
    zero_point: int = 0
    const: bool = False
    channel_quant: SymmPerChannelQuantParams | None = None
    declared_dims: tuple[int, ...] | None = None  # model dims; default: the values' shape


@dataclass
class ScalarArg:
    type: int
    value: object
    as_input: bool = False


@dataclass
class OmittedArg:
    type: int
    scale: float = 0.0  # quantized types need valid parameters even when omitted
    zero_point: int = 0
    dims: tuple[int, ...] = ()  # HAL 1.0/1.1 tensors need a rank even when omitted


_NAN, _INF = float("nan"), float("inf")
EXTREME_SCALARS: dict[int, tuple] = {
    T.FLOAT32: (_NAN, _INF, -_INF, 3.4e38, -3.4e38, 1.4e-45, -1.4e-45, 0.0, -0.0, 1e10),
    T.FLOAT16: (_NAN, _INF, -_INF, 65504.0, -65504.0, 6e-8, 0.0, -0.0, 1e10),
    T.INT32: (2**31 - 1, -(2**31), -1, 0, 1, 2**16, 2**24),
    T.UINT32: (2**32 - 1, 0, 1, 2**16),
    T.BOOL: (True, False),
}
"""Values of each scalar operand type at and around its limits (NaN, infinities, the
type's extremes, zero and minus zero, -1): what robustness and validation-order tests set
a parameter to."""


@dataclass
class OutputSpec:
    type: int
    dims: tuple[int, ...] = ()
    scale: float = 0.0
    zero_point: int = 0


def tensor(
    type: int,
    values,
    dims: Sequence[int] | None = None,
    *,
    scale=0.0,
    zero_point=0,
    const=False,
    channel_quant=None,
    declared_dims=None,
) -> TensorArg:
    arr = np.asarray(values, dtype=storage_dtype(type))
    if dims is not None:
        arr = arr.reshape(tuple(dims))
    return TensorArg(
        type,
        arr,
        scale,
        zero_point,
        const,
        channel_quant,
        None if declared_dims is None else tuple(declared_dims),
    )


def scalar(type: int, value, *, as_input: bool = False) -> ScalarArg:
    return ScalarArg(type, value, as_input)


def omitted(
    type: int, dims: Sequence[int] = (), *, scale: float = 0.0, zero_point: int = 0
) -> OmittedArg:
    return OmittedArg(type, scale, zero_point, tuple(dims))


def output(type: int, dims: Sequence[int] = (), *, scale=0.0, zero_point=0) -> OutputSpec:
    return OutputSpec(type, tuple(dims), scale, zero_point)


def single_op_model(
    op_type: int, inputs: Sequence, outputs: Sequence[OutputSpec], *, relaxed: bool = False
) -> tuple[Model, list[np.ndarray]]:
    """The one-operation model and the input values its request needs."""
    b = ModelBuilder(relaxed=relaxed)
    idx = []
    feeds = []
    for a in inputs:
        if isinstance(a, TensorArg):
            dims = a.declared_dims if a.declared_dims is not None else a.values.shape
            kw = dict(scale=a.scale, zero_point=a.zero_point, channel_quant=a.channel_quant)
            if a.const:
                idx.append(b.add_constant(a.type, a.values.shape, a.values, **kw))
            else:
                idx.append(b.add_input(a.type, dims, **kw))
                feeds.append(a.values)
        elif isinstance(a, ScalarArg):
            if a.as_input:
                idx.append(b.add_input(a.type))
                feeds.append(np.asarray(a.value, dtype=storage_dtype(a.type)))
            else:
                idx.append(b.add_scalar(a.type, a.value))
        elif isinstance(a, OmittedArg):
            idx.append(b.add_omitted(a.type, a.dims, scale=a.scale, zero_point=a.zero_point))
        else:
            raise TypeError(f"not an operation argument: {a!r}")
    outs = [b.add_output(o.type, o.dims, scale=o.scale, zero_point=o.zero_point) for o in outputs]
    b.add_operation(op_type, idx, outs)
    return b.build(), feeds


def run_op(
    op_type: int,
    inputs: Sequence,
    outputs: Sequence[OutputSpec],
    *,
    relaxed: bool = False,
    version: HalVersion | None = None,
) -> list[np.ndarray]:
    """Validate and run a one-operation model on the reference executor."""
    from driver.validation import validate_model

    model, feeds = single_op_model(op_type, inputs, outputs, relaxed=relaxed)
    validate_model(model, version or HalVersion.V1_3)
    return Executor(model).run(feeds)


@dataclass(frozen=True)
class OpExample:
    """A valid one-operation case: a kernel test row, a VTS-mutation seed and a fuzz seed.

    ``expected`` holds the expected outputs (storage dtypes) when the case checks
    numerics, ``None`` when it only needs to be valid and run."""

    name: str
    op: int
    inputs: tuple
    outputs: tuple
    expected: tuple | None = None
    relaxed: bool = False
    atol: float = 0.0  # for float outputs; quantized outputs compare exactly unless set

    def model(self) -> tuple[Model, list[np.ndarray]]:
        return single_op_model(self.op, self.inputs, self.outputs, relaxed=self.relaxed)

    def run(self) -> list[np.ndarray]:
        return run_op(self.op, self.inputs, self.outputs, relaxed=self.relaxed)


def example(name: str, op: int, inputs, outputs, expected=None, **kw) -> OpExample:
    exp = None
    if expected is not None:
        exp = tuple(np.asarray(e) for e in expected)
    return OpExample(name, op, tuple(inputs), tuple(outputs), exp, **kw)


def assert_example(ex: OpExample) -> None:
    """Run ``ex`` and compare with its expected outputs (shape, dtype and values)."""
    outs = ex.run()
    if ex.expected is None:
        return
    assert len(outs) == len(ex.expected), f"{ex.name}: {len(outs)} outputs"
    for k, (got, want) in enumerate(zip(outs, ex.expected)):
        spec = ex.outputs[k]
        want = np.asarray(want, dtype=storage_dtype(spec.type)).reshape(want.shape)
        assert got.shape == want.shape, f"{ex.name} output {k}: shape {got.shape} != {want.shape}"
        if np.issubdtype(got.dtype, np.floating):
            np.testing.assert_allclose(
                got, want, atol=ex.atol or 1e-5, rtol=1e-5, err_msg=f"{ex.name} output {k}"
            )
        else:
            diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
            assert (diff <= ex.atol).all(), f"{ex.name} output {k}: got {got}, want {want}"


def assert_rejected(
    model: Model, *, deferrable: bool, match: str, version: HalVersion = HalVersion.V1_3
) -> HalError:
    """Validation rejects ``model`` (as HAL ``version``) with INVALID_ARGUMENT, a message
    matching the regular expression ``match``, and says whether Android 11's validation
    makes that rejection too (``deferrable`` False) or leaves it to execution (True)."""
    from driver.validation import validate_model

    try:
        validate_model(model, version)
    except HalError as e:
        assert e.status == ErrorStatus.INVALID_ARGUMENT, e
        assert re.search(match, e.message), e.message
        assert e.deferrable is deferrable, f"deferrable is {e.deferrable}: {e.message}"
        return e
    raise AssertionError(f"validation accepted the model (expected a rejection: {match!r})")
