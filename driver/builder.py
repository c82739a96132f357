"""Build HAL models and requests the Pythonic way.

    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (1, 2, 2, 1))
    w = b.add_constant(T.TENSOR_FLOAT32, (1, 2, 2, 1), [1, 2, 3, 4])
    act = b.add_scalar(T.INT32, 0)
    y = b.add_output(T.TENSOR_FLOAT32, (1, 2, 2, 1))
    b.add_operation(OperationType.ADD, [x, w, act], [y])
    model = b.build()

The builder fills in what the HAL leaves to the client: lifetimes, locations, the
``operandValues`` blob, reference pools and ``numberOfConsumers``. It does not validate;
``driver.validation.validate_model`` does. Models it builds may therefore be invalid on
purpose (tests mutate them), but every operand it writes is self-consistent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from driver.hal.types import (
    DataLocation,
    ExtensionNameAndPrefix,
    Memory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    is_scalar_type,
    tensor_has_unspecified_dimensions,
)
from driver.memory import allocate_shared_memory
from driver.operations.base import array_to_bytes, storage_dtype

L = OperandLifeTime


@dataclass
class _OperandDraft:
    type: int
    dimensions: tuple[int, ...]
    scale: float = 0.0
    zero_point: int = 0
    lifetime: OperandLifeTime = L.TEMPORARY_VARIABLE
    extra_params: object = None
    value: bytes | None = None  # constants
    by_reference: bool = False
    subgraph_index: int | None = None  # SUBGRAPH operands


@dataclass
class SubgraphBuilder:
    """Operands and operations of one subgraph; created by :class:`ModelBuilder`."""

    owner: ModelBuilder
    index: int | None  # None for main, else the referenced-subgraph index
    operands: list[_OperandDraft] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    # --- operands -------------------------------------------------------------------
    def add_operand(
        self,
        type: int,
        dimensions: Sequence[int] = (),
        *,
        scale: float = 0.0,
        zero_point: int = 0,
        channel_quant: SymmPerChannelQuantParams | None = None,
        extra_params: object = None,
    ) -> int:
        """A temporary operand (lifetime TEMPORARY_VARIABLE). Scales are rounded to
        float32, as the HAL carries them."""
        if channel_quant is not None:
            channel_quant = SymmPerChannelQuantParams(
                channel_quant.channel_dim, tuple(float(np.float32(x)) for x in channel_quant.scales)
            )
        self.operands.append(
            _OperandDraft(
                int(type),
                tuple(int(d) for d in dimensions),
                float(np.float32(scale)),
                int(zero_point),
                extra_params=channel_quant if channel_quant is not None else extra_params,
            )
        )
        return len(self.operands) - 1

    def add_input(self, type: int, dimensions: Sequence[int] = (), **kw) -> int:
        i = self.add_operand(type, dimensions, **kw)
        self.operands[i].lifetime = L.SUBGRAPH_INPUT
        self.inputs.append(i)
        return i

    def add_output(self, type: int, dimensions: Sequence[int] = (), **kw) -> int:
        i = self.add_operand(type, dimensions, **kw)
        self.operands[i].lifetime = L.SUBGRAPH_OUTPUT
        self.outputs.append(i)
        return i

    def add_constant(
        self,
        type: int,
        dimensions: Sequence[int],
        values,
        *,
        by_reference: bool = False,
        **kw,
    ) -> int:
        """A constant tensor. ``values`` are in the operand's storage type (quantized
        integers for quantized types); they are reshaped to ``dimensions``."""
        i = self.add_operand(type, dimensions, **kw)
        arr = np.asarray(values, dtype=storage_dtype(type)).reshape(self.operands[i].dimensions)
        self.set_value(i, arr, by_reference=by_reference)
        return i

    def add_scalar(self, type: int, value) -> int:
        """A constant scalar (INT32, FLOAT32, BOOL, FLOAT16, UINT32)."""
        i = self.add_operand(type)
        self.set_value(i, np.asarray(value, dtype=storage_dtype(type)))
        return i

    def add_omitted(self, type: int, dimensions: Sequence[int] = (), **kw) -> int:
        """An omitted optional operand (lifetime NO_VALUE)."""
        i = self.add_operand(type, dimensions, **kw)
        self.operands[i].lifetime = L.NO_VALUE
        return i

    def add_subgraph_operand(self, subgraph: SubgraphBuilder) -> int:
        """A SUBGRAPH operand referring to ``subgraph`` (for IF/WHILE)."""
        if subgraph.index is None:
            raise ValueError("the main subgraph cannot be referenced")
        i = self.add_operand(OperandType.SUBGRAPH)
        d = self.operands[i]
        d.lifetime = L.SUBGRAPH
        d.subgraph_index = subgraph.index
        return i

    def set_value(self, index: int, value, *, by_reference: bool = False) -> None:
        d = self.operands[index]
        d.value = array_to_bytes(np.asarray(value), d.type)
        d.lifetime = L.CONSTANT_REFERENCE if by_reference else L.CONSTANT_COPY
        d.by_reference = by_reference

    def set_value_bytes(self, index: int, data: bytes, *, by_reference: bool = False) -> None:
        """Raw bytes as the value (any length: tests use this to make bad models)."""
        d = self.operands[index]
        d.value = bytes(data)
        d.lifetime = L.CONSTANT_REFERENCE if by_reference else L.CONSTANT_COPY
        d.by_reference = by_reference

    # --- operations -----------------------------------------------------------------
    def add_operation(self, type: int, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        self.operations.append(Operation(int(type), tuple(inputs), tuple(outputs)))
        return len(self.operations) - 1

    def identify_inputs_and_outputs(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Fix the input/output order, setting their lifetimes (like
        ``ANeuralNetworksModel_identifyInputsAndOutputs``)."""
        for i in self.inputs:
            if self.operands[i].lifetime == L.SUBGRAPH_INPUT:
                self.operands[i].lifetime = L.TEMPORARY_VARIABLE
        for i in self.outputs:
            if self.operands[i].lifetime == L.SUBGRAPH_OUTPUT:
                self.operands[i].lifetime = L.TEMPORARY_VARIABLE
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        for i in self.inputs:
            self.operands[i].lifetime = L.SUBGRAPH_INPUT
        for i in self.outputs:
            self.operands[i].lifetime = L.SUBGRAPH_OUTPUT

    # --- assembly -------------------------------------------------------------------
    def _build(self, values: bytearray, pool: bytearray) -> Subgraph:
        consumers = [0] * len(self.operands)
        for op in self.operations:
            for i in op.inputs:
                if 0 <= i < len(consumers):
                    consumers[i] += 1
        operands = []
        for n, d in enumerate(self.operands):
            loc = DataLocation()
            if d.lifetime == L.CONSTANT_COPY and d.value is not None:
                loc = DataLocation(0, len(values), len(d.value))
                values += d.value
                values += b"\0" * (-len(values) % 4)  # keep later values 4-byte aligned
            elif d.lifetime == L.CONSTANT_REFERENCE and d.value is not None:
                loc = DataLocation(0, len(pool), len(d.value))
                pool += d.value
                pool += b"\0" * (-len(pool) % 8)
            elif d.lifetime == L.SUBGRAPH:
                loc = DataLocation(0, d.subgraph_index or 0, 0)
            operands.append(
                Operand(
                    type=d.type,
                    dimensions=() if is_scalar_type(d.type) else d.dimensions,
                    number_of_consumers=consumers[n],
                    scale=d.scale,
                    zero_point=d.zero_point,
                    lifetime=d.lifetime,
                    location=loc,
                    extra_params=d.extra_params,
                )
            )
        return Subgraph(
            tuple(operands), tuple(self.operations), tuple(self.inputs), tuple(self.outputs)
        )


class ModelBuilder(SubgraphBuilder):
    """Builds a :class:`Model`; its own operand/operation methods act on the main subgraph."""

    def __init__(self, *, relaxed: bool = False):
        super().__init__(owner=self, index=None)
        self.relaxed = relaxed
        self.referenced: list[SubgraphBuilder] = []
        self.extension_name_to_prefix: list[ExtensionNameAndPrefix] = []

    def new_subgraph(self) -> SubgraphBuilder:
        """A referenced subgraph (for IF branches and WHILE condition/body)."""
        sg = SubgraphBuilder(owner=self, index=len(self.referenced))
        self.referenced.append(sg)
        return sg

    def use_extension(self, name: str, prefix: int) -> None:
        self.extension_name_to_prefix.append(ExtensionNameAndPrefix(name, prefix))

    def build(self) -> Model:
        values = bytearray()
        pool = bytearray()
        main = self._build(values, pool)
        referenced = tuple(sg._build(values, pool) for sg in self.referenced)
        pools: tuple[Memory, ...] = ()
        if pool:
            mem = allocate_shared_memory(len(pool))
            mem.handle.buffer()[:] = pool
            pools = (mem,)
        return Model(
            main=main,
            referenced=referenced,
            operand_values=bytes(values),
            pools=pools,
            relax_computation_float32_to_float16=self.relaxed,
            extension_name_to_prefix=tuple(self.extension_name_to_prefix),
        )


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


@dataclass
class RequestBundle:
    """A request plus the pools behind it, and a way to read the outputs back."""

    request: Request
    input_pool: Memory | None
    output_pool: Memory | None
    output_locations: list[DataLocation]

    def output_bytes(self, i: int) -> bytes:
        loc = self.output_locations[i]
        return bytes(self.output_pool.handle.buffer()[loc.offset : loc.offset + loc.length])

    def output_array(self, i: int, type: int, dims: Sequence[int]) -> np.ndarray:
        from driver.operations.base import array_from_bytes

        return array_from_bytes(type, tuple(dims), self.output_bytes(i))


def build_request(
    model: Model,
    inputs: Sequence[np.ndarray | None],
    *,
    output_sizes: Sequence[int] | None = None,
    input_dims: Sequence[Sequence[int] | None] | None = None,
    output_dims: Sequence[Sequence[int] | None] | None = None,
) -> RequestBundle:
    """A request for ``model``'s main subgraph: input values (storage dtypes; ``None``
    = omitted) in one shared pool, outputs in another.

    ``output_sizes`` defaults to each output's declared byte size (or 64 KiB when its
    dims are not fully specified). Input dims default to the arrays' shapes where the
    model leaves them unspecified."""
    main = model.main
    in_bytes = bytearray()
    in_args = []
    for k, idx in enumerate(main.input_indexes):
        operand = main.operands[idx]
        value = inputs[k]
        if value is None:
            in_args.append(RequestArgument(has_no_value=True))
            continue
        data = array_to_bytes(np.asarray(value), operand.type)
        offset = len(in_bytes)
        in_bytes += data
        in_bytes += b"\0" * (-len(in_bytes) % 8)
        dims: tuple[int, ...] = ()
        if input_dims is not None and input_dims[k] is not None:
            dims = tuple(input_dims[k])
        elif tensor_has_unspecified_dimensions(operand.type, operand.dimensions):
            dims = tuple(np.shape(value))
        in_args.append(RequestArgument(False, DataLocation(0, offset, len(data)), dims))
    out_args = []
    out_locs = []
    out_size_total = 0
    for k, idx in enumerate(main.output_indexes):
        operand = main.operands[idx]
        if output_sizes is not None:
            size = output_sizes[k]
        else:
            from driver.hal.types import non_extension_size_of_data

            size = non_extension_size_of_data(operand.type, operand.dimensions) or 65536
        loc = DataLocation(1, out_size_total, size)
        out_size_total += size + (-size % 8)
        dims = tuple(output_dims[k]) if output_dims and output_dims[k] is not None else ()
        out_args.append(RequestArgument(False, loc, dims))
        out_locs.append(loc)
    in_pool = allocate_shared_memory(len(in_bytes))
    in_pool.handle.buffer()[:] = in_bytes
    out_pool = allocate_shared_memory(out_size_total)
    request = Request(tuple(in_args), tuple(out_args), (in_pool, out_pool))
    return RequestBundle(request, in_pool, out_pool, out_locs)
