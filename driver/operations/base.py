"""How an operation is declared: signatures, validation, shape inference and kernel together.

Each operation family module (``elementwise.py``, ``conv.py``, ...) declares its operations
once, as :class:`OperationDeclaration` objects listed in the module's ``DECLARATIONS``.
Validation, supported-operations, the executor, the random-graph generator and the docs
all read these declarations; nothing else restates an operation's rules.

The three behaviour hooks receive one :class:`OperationContext`:

``validate(ctx) -> None``
    Semantic checks the signature table cannot express (ranks, parameter ranges, scale
    relations, layouts). Raise ``ctx.invalid(...)`` to reject; report the minimum HAL
    version these features need with ``ctx.require_version(v)``, before any deferrable
    rejection (see there). Runs at validation time, when tensor shapes and constant
    values may be unknown: ``ctx.shape(i)``/``ctx.value(i)`` then raise
    :class:`Unknown`, which the caller treats as "cannot check yet".
``infer_shapes(ctx) -> list[shape | None]``
    Output shapes from input shapes (and constant values such as RESHAPE's shape).
    ``None`` for an output whose shape only the kernel can know (data-dependent, e.g.
    BOX_WITH_NMS_LIMIT). Raise ``ctx.invalid(...)`` for impossible shapes. Runs statically
    (all inputs known) during validation and again at run time with real shapes.
``execute(ctx) -> list[np.ndarray]``
    The kernel: numpy arrays in the outputs' storage dtypes (see :func:`storage_dtype`),
    shaped as inferred. Never sees malformed inputs: validation and shape inference ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    Operand,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
    operand_type_name,
    operation_type_name,
)

T = OperandType
Shape = tuple[int, ...]
R = TypeVar("R")


class Unknown(Exception):
    """Raised by an :class:`OperationContext` accessor when the shape or value asked for
    is not known yet (static analysis). Hooks let it propagate."""


# ---------------------------------------------------------------------------------------
# Signatures
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Signature:
    """One allowed combination of operand types, and the HAL version that introduced it.

    ``inputs``/``outputs`` are operand types position by position. ``optional`` lists input
    positions that may be omitted (lifetime NO_VALUE). ``variadic_input`` (an index into
    ``inputs``) marks a position that repeats one or more times (CONCATENATION's tensors);
    ``variadic_output`` likewise (SPLIT's outputs).
    """

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    version: HalVersion
    optional: frozenset[int] = frozenset()
    variadic_input: int | None = None
    variadic_output: int | None = None

    def expand_inputs(self, count: int) -> tuple[int, ...] | None:
        return _expand(self.inputs, self.variadic_input, count)

    def expand_outputs(self, count: int) -> tuple[int, ...] | None:
        return _expand(self.outputs, self.variadic_output, count)

    def optional_positions(self, count: int) -> frozenset[int]:
        """Optional positions in an expanded input list of ``count`` entries."""
        if self.variadic_input is None or not self.optional:
            return self.optional
        extra = count - len(self.inputs)
        v = self.variadic_input
        return frozenset(p if p < v else p + extra for p in self.optional)


def _expand(types: tuple[int, ...], variadic: int | None, count: int) -> tuple[int, ...] | None:
    if variadic is None:
        return types if count == len(types) else None
    repeats = count - (len(types) - 1)
    if repeats < 1:
        return None
    return types[:variadic] + (types[variadic],) * repeats + types[variadic + 1 :]


def signatures(
    version: HalVersion,
    type_sets: Iterable[tuple[Sequence[int], Sequence[int]]],
    *,
    optional: Iterable[int] = (),
    variadic_input: int | None = None,
    variadic_output: int | None = None,
) -> tuple[Signature, ...]:
    """Build several signatures that share a version and shape."""
    opt = frozenset(optional)
    return tuple(
        Signature(tuple(i), tuple(o), version, opt, variadic_input, variadic_output)
        for i, o in type_sets
    )


# ---------------------------------------------------------------------------------------
# Declarations and registry
# ---------------------------------------------------------------------------------------

ValidateFn = Callable[["OperationContext"], None]
InferFn = Callable[["OperationContext"], Sequence[Shape | None]]
ExecuteFn = Callable[["OperationContext"], Sequence[np.ndarray]]


@dataclass(frozen=True)
class OperationDeclaration:
    type: OperationType
    signatures: tuple[Signature, ...]
    infer_shapes: InferFn
    execute: ExecuteFn
    validate: ValidateFn | None = None
    summary: str = ""
    # Facts the generator and docs read; kernels do not.
    allows_unknown_rank: bool = False  # inputs may have unknown rank at run time
    custom_signature_check: bool = False  # IF/WHILE: types come from subgraphs, not a table
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def min_version(self) -> HalVersion:
        return min((s.version for s in self.signatures), default=HalVersion.V1_3)

    def run_validate(self, ctx: OperationContext) -> None:
        """Run the validate hook, if there is one. A hook reports the HAL version it needs
        only through ``ctx.require_version``: a value it returned would be lost, so
        returning one is a bug in the hook (TypeError)."""
        if self.validate is not None and self.validate(ctx) is not None:
            raise TypeError(
                f"the validate hook of {operation_type_name(self.type)} returned a value; "
                "a hook reports a HAL version with ctx.require_version"
            )


# ---------------------------------------------------------------------------------------
# Storage dtypes and value conversion
# ---------------------------------------------------------------------------------------

_DTYPES: dict[int, np.dtype] = {
    T.FLOAT32: np.dtype(np.float32),
    T.INT32: np.dtype(np.int32),
    T.UINT32: np.dtype(np.uint32),
    T.TENSOR_FLOAT32: np.dtype(np.float32),
    T.TENSOR_INT32: np.dtype(np.int32),
    T.TENSOR_QUANT8_ASYMM: np.dtype(np.uint8),
    T.BOOL: np.dtype(np.bool_),
    T.TENSOR_QUANT16_SYMM: np.dtype(np.int16),
    T.TENSOR_FLOAT16: np.dtype(np.float16),
    T.TENSOR_BOOL8: np.dtype(np.bool_),
    T.FLOAT16: np.dtype(np.float16),
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL: np.dtype(np.int8),
    T.TENSOR_QUANT16_ASYMM: np.dtype(np.uint16),
    T.TENSOR_QUANT8_SYMM: np.dtype(np.int8),
    T.TENSOR_QUANT8_ASYMM_SIGNED: np.dtype(np.int8),
    T.TENSOR_OEM_BYTE: np.dtype(np.uint8),
}


def storage_dtype(type_code: int) -> np.dtype:
    """The numpy dtype an operand's values are held in (bool types as ``np.bool_``)."""
    try:
        return _DTYPES[type_code]
    except KeyError:
        raise HalError(
            ErrorStatus.GENERAL_FAILURE, f"no storage dtype for {operand_type_name(type_code)}"
        ) from None


def array_from_bytes(type_code: int, dims: Shape, data: bytes | memoryview) -> np.ndarray:
    """Decode an operand's bytes (row-major, native little-endian) to an array.
    Booleans: any non-zero byte is true."""
    dt = storage_dtype(type_code)
    if dt == np.bool_:
        arr = np.frombuffer(data, dtype=np.uint8) != 0
    else:
        arr = np.frombuffer(data, dtype=dt).copy()
    return arr.reshape(dims)


def array_to_bytes(arr: np.ndarray, type_code: int) -> bytes:
    dt = storage_dtype(type_code)
    if dt == np.bool_:
        return np.ascontiguousarray(arr, dtype=np.uint8).tobytes()
    return np.ascontiguousarray(arr, dtype=dt).tobytes()


# ---------------------------------------------------------------------------------------
# The context handed to hooks
# ---------------------------------------------------------------------------------------


class OperationContext:
    """The view of one operation that hooks work with.

    ``shapes[k]``/``values[k]`` are per input operand position ``k`` of the operation:
    a shape is a tuple (dims may be 0 only at run time for zero-sized tensors) or ``None``
    when unknown; a value is an ndarray (0-d for scalars) or ``None`` when unknown or
    omitted. ``output_shapes`` is filled once shapes are inferred.
    """

    __slots__ = (
        "_input_operands",
        "_memo",
        "_output_operands",
        "executor",
        "location",
        "model",
        "operation_type",
        "output_shapes",
        "relaxed",
        "required_version",
        "run_state",
        "shapes",
        "values",
        "version",
    )

    def __init__(
        self,
        operation_type: int,
        input_operands: Sequence[Operand],
        output_operands: Sequence[Operand],
        shapes: list[Shape | None],
        values: list[np.ndarray | None],
        *,
        version: HalVersion = HalVersion.V1_3,
        relaxed: bool = False,
        location: str = "",
        executor: Any = None,
        model: Any = None,
    ):
        self.operation_type = operation_type
        self._input_operands = input_operands
        self._output_operands = output_operands
        self.shapes = shapes
        self.values = values
        self.output_shapes: list[Shape | None] = [None] * len(output_operands)
        self.version = version
        self.relaxed = relaxed
        self.location = location  # "subgraph 0, operation 3 (CONV_2D)" for messages
        self.executor = executor  # set at run time; control flow uses it to run subgraphs
        self.model = model  # the whole Model (control flow reads referenced subgraphs)
        self.run_state: Any = None  # driver.executor.RunState at run time (deadline, loops)
        self.required_version: HalVersion | None = None  # see require_version()
        self._memo: dict[Any, Any] | None = None  # see once()

    # --- counts and operands --------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self._input_operands)

    @property
    def num_outputs(self) -> int:
        return len(self._output_operands)

    def input_operand(self, i: int) -> Operand:
        return self._input_operands[i]

    def output_operand(self, i: int) -> Operand:
        return self._output_operands[i]

    def input_type(self, i: int) -> int:
        return self._input_operands[i].type

    def output_type(self, i: int) -> int:
        return self._output_operands[i].type

    def input_scale(self, i: int) -> float:
        return self._input_operands[i].scale

    def input_zero_point(self, i: int) -> int:
        return self._input_operands[i].zero_point

    def output_scale(self, i: int) -> float:
        return self._output_operands[i].scale

    def output_zero_point(self, i: int) -> int:
        return self._output_operands[i].zero_point

    def channel_quant(self, i: int) -> SymmPerChannelQuantParams | None:
        p = self._input_operands[i].extra_params
        return p if isinstance(p, SymmPerChannelQuantParams) else None

    # --- shapes and values ----------------------------------------------------------
    def is_omitted(self, i: int) -> bool:
        """True when optional input ``i`` is absent (lifetime NO_VALUE) or past the end."""
        from driver.hal.types import OperandLifeTime

        return i >= len(self._input_operands) or (
            self._input_operands[i].lifetime == OperandLifeTime.NO_VALUE
        )

    def shape(self, i: int) -> Shape:
        s = self.shapes[i]
        if s is None:
            raise Unknown(f"shape of input {i}")
        return s

    def rank(self, i: int) -> int:
        return len(self.shape(i))

    def value(self, i: int) -> np.ndarray:
        v = self.values[i]
        if v is None:
            raise Unknown(f"value of input {i}")
        return v

    def scalar(self, i: int) -> Any:
        """A scalar input as a Python int/float/bool."""
        return self.value(i).item()

    def output_shape(self, i: int) -> Shape:
        s = self.output_shapes[i]
        if s is None:
            raise Unknown(f"shape of output {i}")
        return s

    def once(self, compute: Callable[[OperationContext], R]) -> R:
        """``compute(self)``, computed once per context (keyed by ``compute``; a raised
        exception is not remembered). For what ``validate`` and ``infer_shapes`` both
        derive from the inputs, such as an operation's checked scalar parameters: the
        validator calls both hooks on one context. Kernels should not rely on it (a test
        double may swap ``values`` before calling ``execute``)."""
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        elif compute in memo:
            return memo[compute]
        result = memo[compute] = compute(self)
        return result

    # --- errors ---------------------------------------------------------------------
    def invalid(self, message: str, *, deferrable: bool = False) -> HalError:
        """INVALID_ARGUMENT naming this operation. ``deferrable``: Android's ``validate``
        accepts the model and its execution fails instead (see :class:`HalError`);
        everything ``infer_shapes`` raises is treated so at validation time."""
        where = f"{self.location}: " if self.location else ""
        return HalError(ErrorStatus.INVALID_ARGUMENT, where + message, deferrable=deferrable)

    def check(self, condition: bool, message: str, *, deferrable: bool = False) -> None:
        if not condition:
            raise self.invalid(message, deferrable=deferrable)

    def known_rank(self, i: int) -> int | None:
        """Rank of input ``i``: from its shape or, while that is unknown, from its declared
        dims (a rank is known even when some dims are not, as Android's ``hasKnownRank``
        sees it); None when the rank is unknown."""
        s = self.shapes[i]
        if s is not None:
            return len(s)
        dims = self._input_operands[i].dimensions
        return len(dims) if dims else None

    def check_rank(
        self,
        i: int,
        *,
        min_rank: int = 0,
        max_rank: int = 4,
        exact: int | None = None,
        deferrable: bool = False,
    ) -> None:
        """Rank rule for input ``i`` whenever its rank is known (:meth:`known_rank`);
        ``deferrable`` for a rank only Android's ``prepare()`` checks."""
        r = self.known_rank(i)
        if r is None or (r == exact if exact is not None else min_rank <= r <= max_rank):
            return
        # The message only on failure: validation runs this for most operations.
        want = exact if exact is not None else f"{min_rank}..{max_rank}"
        s = self.shapes[i] or self._input_operands[i].dimensions
        raise self.invalid(
            f"input {i} must have rank {want}, got shape {list(s)}", deferrable=deferrable
        )

    def require_version(self, need: HalVersion | None) -> None:
        """This use of the operation needs HAL ``need`` (None: any): rejected at once when
        validating as an older version, and recorded in ``required_version`` otherwise.

        The only way a validate hook reports a version. Call it before the hook's
        deferrable rejections: Android's ``validateHalVersion`` rejects such a model
        whatever else is wrong with it, and the record survives the hook raising Unknown
        (a value only the request gives) or a deferrable rejection afterwards."""
        if need is None:
            return
        if need > self.version:
            raise self.invalid(
                f"this use of {operation_type_name(self.operation_type)} needs HAL "
                f"{HalVersion(need).label}; validating as HAL {HalVersion(self.version).label}"
            )
        if self.required_version is None or need > self.required_version:
            self.required_version = need


def dtype_of(ctx: OperationContext, output: int = 0) -> np.dtype:
    return storage_dtype(ctx.output_type(output))


def item_blocks(count: int, elements_per_item: int, block_elements: int) -> Iterator[slice]:
    """Slices covering ``range(count)`` in order, each of about ``block_elements`` /
    ``elements_per_item`` items (at least one): how a kernel walks a leading axis of
    independent items (batch rows, boxes, elements) so that its wide temporaries are per
    block, whatever the input's size."""
    step = max(1, block_elements // max(1, elements_per_item))
    for start in range(0, count, step):
        yield slice(start, min(start + step, count))
