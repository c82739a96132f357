"""Android VTS's validation mutations, applied to every example model.

``hardware/interfaces/neuralnetworks/1.3/vts/functional/ValidateModel.cpp`` and
``ValidateRequest.cpp`` take each test model, break it in one way at a time and require
INVALID_ARGUMENT from ``getSupportedOperations`` and ``prepareModel`` (and from every
execution path for requests). Here every family runs over every valid example in
``tests/operations`` (one operation each) and over two-operation models spliced from
them (so execution order, writers and consumers between operations are exercised too).
The checks are: each mutation makes validation raise :class:`HalError` with
INVALID_ARGUMENT, and nothing else ever escapes.

The skips are VTS's own, each for a mutation that leaves the model valid for that
operation (see the ``*_skip`` functions); nothing is skipped because our validation
would let it through. Two deliberate differences from VTS, both making a mutation test
what its name says:

* VTS's ``removeOperand`` does not renumber the indexes above the removed operand (its
  ``v > value ? v-- : v`` returns the old value), so the mutated model is invalid for an
  unrelated reason: an index out of range. We renumber, and skip what that makes
  legitimately valid: removing an operand whose every use is an input position
  ``removeOperationInputSkip`` names (a trailing optional parameter).
* VTS's ``addOperationOutputTest`` gives the new output ``numberOfConsumers = 1``
  although nothing reads it, which fails the consumer count rather than the operation's
  output count. We give it 0.

A Hypothesis test adds random field-level corruption of the same models and requests:
whatever the values, validation returns or raises INVALID_ARGUMENT, nothing else.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driver.builder import build_request
from driver.hal.types import (
    BufferToken,
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    ExtensionNameAndPrefix,
    HalError,
    HalVersion,
    Memory,
    Model,
    Operand,
    OperandLifeTime,
    Operation,
    Priority,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    non_extension_size_of_data,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import BytesHandle
from driver.validation import (
    operation_versions,
    validate_execution_preference,
    validate_model,
    validate_priority,
    validate_request,
)
from tests.operations.examples import all_examples

V = HalVersion
L = OperandLifeTime
NO_LOCATION = DataLocation()

Mutation = tuple[str, Model, int, int]  # (description, model, preference, priority)
DEFAULT_PREFERENCE = ExecutionPreference.FAST_SINGLE_ANSWER
DEFAULT_PRIORITY = Priority.MEDIUM


# ---------------------------------------------------------------------------------------
# The models: every example, plus two-operation splices of examples
# ---------------------------------------------------------------------------------------


@functools.cache
def example_models() -> tuple[tuple[str, Model, tuple], ...]:
    """(name, model, feeds) of every example, deterministic order."""
    out = []
    for ex in all_examples():
        model, feeds = ex.model()
        out.append((ex.name, model, tuple(feeds)))
    return tuple(out)


def _signature(o: Operand) -> tuple:
    return (o.type, o.dimensions, o.scale, o.zero_point, o.extra_params)


def splice(a: Model, b: Model, b_input: int) -> Model:
    """``a`` then ``b``, with ``b``'s main input ``b_input`` replaced by ``a``'s first
    output (same type, dims and quantization), which becomes a temporary."""
    ma, mb = a.main, b.main
    shift = len(ma.operands)
    values = a.operand_values + b"\0" * (-len(a.operand_values) % 8)
    value_shift, pool_shift = len(values), len(a.pools)
    link = ma.output_indexes[0]
    replaced = mb.input_indexes[b_input]

    def moved(o: Operand) -> Operand:
        loc = o.location
        if o.lifetime == L.CONSTANT_COPY:
            loc = DataLocation(0, loc.offset + value_shift, loc.length)
        elif o.lifetime == L.CONSTANT_REFERENCE:
            loc = DataLocation(loc.pool_index + pool_shift, loc.offset, loc.length)
        return o if loc is o.location else dataclasses.replace(o, location=loc)

    def remap(i: int) -> int:  # b's operand index in the spliced model
        if i == replaced:
            return link
        return i + shift - (i > replaced)

    operations_b = tuple(
        Operation(op.type, tuple(map(remap, op.inputs)), tuple(map(remap, op.outputs)))
        for op in mb.operations
    )
    uses = sum(op.inputs.count(link) for op in operations_b)
    operands = list(ma.operands) + [moved(o) for j, o in enumerate(mb.operands) if j != replaced]
    operands[link] = dataclasses.replace(
        operands[link], lifetime=L.TEMPORARY_VARIABLE, number_of_consumers=uses
    )
    main = Subgraph(
        tuple(operands),
        ma.operations + operations_b,
        ma.input_indexes + tuple(remap(i) for i in mb.input_indexes if i != replaced),
        ma.output_indexes[1:] + tuple(map(remap, mb.output_indexes)),
    )
    return Model(
        main,
        operand_values=values + b.operand_values,
        pools=a.pools + b.pools,
        relax_computation_float32_to_float16=a.relaxed or b.relaxed,
    )


@functools.cache
def spliced_models(limit: int = 48) -> tuple[tuple[str, Model], ...]:
    """Two-operation models: each example's first output feeding the first later example
    that has a matching model input (one splice per producing operation type)."""
    plain = [(n, m) for n, m, _ in example_models() if not m.referenced]
    found: list[tuple[str, Model]] = []
    producers_seen: set[int] = set()
    for name_a, a in plain:
        op_a = a.main.operations[0].type
        if op_a in producers_seen or not a.main.output_indexes:
            continue
        want = _signature(a.main.operands[a.main.output_indexes[0]])
        for name_b, b in plain:
            match = [
                k
                for k, i in enumerate(b.main.input_indexes)
                if _signature(b.main.operands[i]) == want
            ]
            if not match:
                continue
            model = splice(a, b, match[0])
            try:
                validate_model(model)
            except HalError:
                continue  # e.g. a relaxed example spliced with a float16-only one
            found.append((f"{name_a}+{name_b}", model))
            producers_seen.add(op_a)
            break
        if len(found) >= limit:
            break
    return tuple(found)


def all_models() -> list[tuple[str, Model]]:
    return [(n, m) for n, m, _ in example_models()] + list(spliced_models())


# ---------------------------------------------------------------------------------------
# Model surgery on the main subgraph
# ---------------------------------------------------------------------------------------


def with_main(model: Model, **changes) -> Model:
    return dataclasses.replace(model, main=dataclasses.replace(model.main, **changes))


def with_operand(model: Model, k: int, **changes) -> Model:
    operands = list(model.main.operands)
    operands[k] = dataclasses.replace(operands[k], **changes)
    return with_main(model, operands=tuple(operands))


def with_operation(model: Model, k: int, **changes) -> Model:
    operations = list(model.main.operations)
    operations[k] = dataclasses.replace(operations[k], **changes)
    return with_main(model, operations=tuple(operations))


def count_consumers(sg: Subgraph) -> list[int]:
    counts = [0] * len(sg.operands)
    for op in sg.operations:
        for i in op.inputs:
            counts[i] += 1
    return counts


def size_of_data(o: Operand) -> int:
    """Bytes of an operand of a standard type (0 when its shape is not fully known)."""
    try:
        return non_extension_size_of_data(o.type, o.dimensions)
    except (KeyError, ValueError):
        return 0


def become_constant_copy(model: Model, k: int) -> Model:
    """VTS ``becomeConstantCopy``: operand ``k`` gets zero bytes of its size appended to
    operandValues."""
    o = model.main.operands[k]
    size = size_of_data(o)
    offset = len(model.operand_values)
    model = dataclasses.replace(model, operand_values=model.operand_values + b"\0" * size)
    return with_operand(model, k, lifetime=L.CONSTANT_COPY, location=DataLocation(0, offset, size))


def _remove_value(values: tuple[int, ...], value: int) -> tuple[int, ...]:
    return tuple(v for v in values if v != value)


def _remove_and_renumber(values: tuple[int, ...], value: int) -> tuple[int, ...]:
    return tuple(v - 1 if v > value else v for v in values if v != value)


# ---------------------------------------------------------------------------------------
# The VTS mutation families (ValidateModel.cpp, NN HAL 1.3)
# ---------------------------------------------------------------------------------------


def mutate_execution_order(model: Model) -> Iterator[Mutation]:
    sg = model.main
    ops = list(sg.operations)
    for k, op in enumerate(ops):
        if any(
            sg.operands[i].lifetime in (L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT) for i in op.inputs
        ):
            # A reader of some other operation's output, moved to the front.
            reordered = [op, *ops[:k], *ops[k + 1 :]]
            yield (
                f"operation {k} is a reader, moved first",
                with_main(model, operations=tuple(reordered)),
                1,
                1,
            )
        if any(sg.operands[i].number_of_consumers > 0 for i in op.outputs):
            # A writer of an operand others read, moved to the end.
            reordered = [*ops[:k], *ops[k + 1 :], op]
            yield (
                f"operation {k} is a writer, moved last",
                with_main(model, operations=tuple(reordered)),
                1,
                1,
            )


INVALID_OPERAND_TYPES = (-1, 16, 9999, 10002, 2**32)
"""``OperandTypeRange::FUNDAMENTAL_MIN - 1``, ``FUNDAMENTAL_MAX + 1``, ``OEM_MIN - 1``,
``OEM_MAX + 1`` (and one beyond uint32, which HIDL cannot carry but Python can)."""


def mutate_operand_type(model: Model) -> Iterator[Mutation]:
    for k in range(len(model.main.operands)):
        for code in INVALID_OPERAND_TYPES:
            yield f"operand {k} type {code}", with_operand(model, k, type=code), 1, 1


_SCALARS = (T.FLOAT16, T.FLOAT32, T.INT32, T.UINT32, T.BOOL)


def mutate_operand_rank(model: Model) -> Iterator[Mutation]:
    """VTS ``getInvalidRank``: a scalar given rank 1. Tensor ranks are not mutated (VTS
    does not either: rank 0 = unknown rank is valid from 1.2, and many 1.2+ operations
    accept any rank). We add one mutation VTS lacks: a constant tensor of rank 0."""
    for k, o in enumerate(model.main.operands):
        if o.type in _SCALARS:
            yield f"operand {k} (scalar) rank 1", with_operand(model, k, dimensions=(0,)), 1, 1
        elif o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE) and o.dimensions:
            yield f"constant operand {k} rank 0", with_operand(model, k, dimensions=()), 1, 1


def invalid_scale(type_code: int) -> float | None:
    """VTS ``getInvalidScale``."""
    if type_code in (T.TENSOR_INT32,):
        return -1.0
    if type_code in (
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_QUANT8_SYMM,
        T.TENSOR_QUANT16_ASYMM,
        T.TENSOR_QUANT16_SYMM,
    ):
        return 0.0
    if type_code in (T.OEM, T.TENSOR_OEM_BYTE) or type_code >> 16:
        return None  # not validated (VTS's 0.0 would be valid for them)
    return 1.0


def mutate_operand_scale(model: Model) -> Iterator[Mutation]:
    for k, o in enumerate(model.main.operands):
        scale = invalid_scale(o.type)
        if scale is not None:
            yield f"operand {k} scale {scale}", with_operand(model, k, scale=scale), 1, 1


def invalid_zero_points(type_code: int) -> tuple[int, ...]:
    """VTS ``getInvalidZeroPoints``."""
    return {
        T.TENSOR_QUANT8_ASYMM: (-1, 256),
        T.TENSOR_QUANT8_SYMM: (-128, -1, 1, 128),
        T.TENSOR_QUANT8_ASYMM_SIGNED: (-129, 128),
        T.TENSOR_QUANT16_ASYMM: (-1, 65536),
        T.TENSOR_QUANT16_SYMM: (-32769, -1, 1, 32768),
    }.get(type_code, () if type_code in (T.OEM, T.TENSOR_OEM_BYTE) or type_code >> 16 else (1,))


def mutate_operand_zero_point(model: Model) -> Iterator[Mutation]:
    for k, o in enumerate(model.main.operands):
        for zp in invalid_zero_points(o.type):
            yield f"operand {k} zeroPoint {zp}", with_operand(model, k, zero_point=zp), 1, 1


def _invalid_lifetimes(o: Operand) -> list[int]:
    """VTS ``getInvalidLifeTimes``: flip whether the operand should have a writer."""
    if o.lifetime in (L.SUBGRAPH_OUTPUT, L.TEMPORARY_VARIABLE):
        out = [L.SUBGRAPH_INPUT, L.CONSTANT_COPY]
    elif o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE, L.SUBGRAPH_INPUT):
        out = [L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT]
    else:
        return []  # NO_VALUE, SUBGRAPH: not enough information (as VTS)
    if not size_of_data(o):
        out = [lt for lt in out if lt != L.CONSTANT_COPY]
    return out


def mutate_operand_lifetime(model: Model) -> Iterator[Mutation]:
    for k, o in enumerate(model.main.operands):
        for lifetime in _invalid_lifetimes(o):
            m = model
            if o.lifetime == L.SUBGRAPH_INPUT:
                m = with_main(m, input_indexes=_remove_value(m.main.input_indexes, k))
            elif o.lifetime == L.SUBGRAPH_OUTPUT:
                m = with_main(m, output_indexes=_remove_value(m.main.output_indexes, k))
            m = with_operand(m, k, lifetime=lifetime, location=NO_LOCATION)
            if lifetime == L.CONSTANT_COPY:
                m = become_constant_copy(m, k)
            elif lifetime == L.SUBGRAPH_INPUT:
                m = with_main(m, input_indexes=(*m.main.input_indexes, k))
            elif lifetime == L.SUBGRAPH_OUTPUT:
                m = with_main(m, output_indexes=(*m.main.output_indexes, k))
            yield f"operand {k} lifetime {lifetime.name}", m, 1, 1


def mutate_operand_input_output(model: Model) -> Iterator[Mutation]:
    """VTS ``getInputOutputLifeTime``: change whether an operand is a model input, a
    model output or neither, without updating the lists."""
    for k, o in enumerate(model.main.operands):
        if o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
            new = L.SUBGRAPH_INPUT
        elif o.lifetime == L.SUBGRAPH_INPUT:
            if not size_of_data(o):
                continue
            new = L.CONSTANT_COPY
        elif o.lifetime == L.SUBGRAPH_OUTPUT:
            new = L.TEMPORARY_VARIABLE
        elif o.lifetime == L.TEMPORARY_VARIABLE:
            new = L.SUBGRAPH_OUTPUT
        else:
            continue
        m = with_operand(model, k, lifetime=new, location=NO_LOCATION)
        if new == L.CONSTANT_COPY:
            m = become_constant_copy(m, k)
        yield f"operand {k} role {L(o.lifetime).name} -> {new.name}", m, 1, 1


def mutate_number_of_consumers(model: Model) -> Iterator[Mutation]:
    for k, o in enumerate(model.main.operands):
        n = o.number_of_consumers
        for bad in (1,) if n == 0 else (n - 1, n + 1):
            yield (
                f"operand {k} numberOfConsumers {bad}",
                with_operand(model, k, number_of_consumers=bad),
                1,
                1,
            )


def mutate_add_writer(model: Model) -> Iterator[Mutation]:
    """A copy of an operation appended, writing one of its outputs a second time (its
    other outputs go to fresh temporaries)."""
    sg = model.main
    for k, op in enumerate(sg.operations):
        for bad in range(len(op.outputs)):
            operands = list(sg.operands)
            for i in op.inputs:
                operands[i] = dataclasses.replace(
                    operands[i], number_of_consumers=operands[i].number_of_consumers + 1
                )
            outputs = list(op.outputs)
            for j, i in enumerate(op.outputs):
                if j == bad:
                    continue
                fresh = dataclasses.replace(
                    operands[i], number_of_consumers=0, lifetime=L.TEMPORARY_VARIABLE
                )
                operands.append(fresh)
                outputs[j] = len(operands) - 1
            copy = Operation(op.type, op.inputs, tuple(outputs))
            m = with_main(model, operands=tuple(operands), operations=(*sg.operations, copy))
            yield f"operation {k} output {bad} written twice", m, 1, 1


def mutate_operation_operand_type_skip(operand: int, new_type: int, model: Model) -> bool:
    """VTS ``mutateOperationOperandTypeSkip``: positions where the operation accepts
    several types, so the mutation can stay valid."""
    if new_type == model.main.operands[operand].type or new_type in (T.OEM, T.TENSOR_OEM_BYTE):
        return True
    floats = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32)
    for op in model.main.operations:
        ins, outs = op.inputs, op.outputs
        t = op.type
        if t == O.LSH_PROJECTION and len(ins) > 1 and operand == ins[1]:
            return True  # its second argument may have any type
        if t in (O.CAST, O.ARGMAX, O.ARGMIN) and new_type in (
            T.TENSOR_FLOAT16,
            T.TENSOR_FLOAT32,
            T.TENSOR_INT32,
            T.TENSOR_QUANT8_ASYMM,
            T.TENSOR_QUANT8_ASYMM_SIGNED,
        ):
            return True  # any of these as input (and CAST's output)
        if t == O.QUANTIZE:
            if operand == ins[0] and new_type in floats:
                return True
            if operand == outs[0] and new_type in (
                T.TENSOR_QUANT8_ASYMM,
                T.TENSOR_QUANT8_ASYMM_SIGNED,
            ):
                return True
        if t == O.RANDOM_MULTINOMIAL and operand == ins[0] and new_type in floats:
            return True
        if t == O.DEQUANTIZE:
            if operand == ins[0] and new_type in (
                T.TENSOR_QUANT8_ASYMM,
                T.TENSOR_QUANT8_SYMM,
                T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                T.TENSOR_QUANT8_ASYMM_SIGNED,
            ):
                return True
            if operand == outs[0] and new_type in floats:
                return True
        if (
            t in (O.TRANSPOSE_CONV_2D, O.GROUPED_CONV_2D, O.DEPTHWISE_CONV_2D, O.CONV_2D)
            and len(ins) > 1
            and operand == ins[1]
            and new_type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
        ):
            return True  # the filter: per-tensor or per-channel
        if (
            t == O.AXIS_ALIGNED_BBOX_TRANSFORM
            and len(ins) > 1
            and operand == ins[1]
            and new_type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
        ):
            return True
        if t == O.RANK and operand == ins[0]:
            return True  # any tensor type
    return False


def vts_mutate_operand(o: Operand, new_type: int) -> Operand:
    """VTS ``mutateOperand``: the new type with dims, scale, zero point and extra params
    made plausible for it."""
    dims = o.dimensions or (1,)
    if new_type in _SCALARS:
        return dataclasses.replace(o, type=new_type, dimensions=(), scale=0.0, zero_point=0)
    if new_type in (T.TENSOR_BOOL8, T.TENSOR_FLOAT16, T.TENSOR_FLOAT32):
        return dataclasses.replace(o, type=new_type, dimensions=dims, scale=0.0, zero_point=0)
    if new_type == T.TENSOR_INT32:
        return dataclasses.replace(o, type=new_type, dimensions=dims, zero_point=0)
    if new_type in (
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_SYMM,
        T.TENSOR_QUANT16_ASYMM,
        T.TENSOR_QUANT16_SYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
    ):
        return dataclasses.replace(o, type=new_type, dimensions=dims, scale=o.scale or 1.0)
    if new_type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        channels = o.dimensions[0] if o.dimensions else 0
        q = SymmPerChannelQuantParams(0, (1.0,) * channels)
        return dataclasses.replace(
            o, type=new_type, dimensions=dims, scale=0.0, zero_point=0, extra_params=q
        )
    return dataclasses.replace(o, type=new_type)


ALL_OPERAND_TYPES = tuple(T)


def mutate_operation_operand_type(model: Model) -> Iterator[Mutation]:
    for k, o in enumerate(model.main.operands):
        for new_type in ALL_OPERAND_TYPES:
            if mutate_operation_operand_type_skip(k, new_type, model):
                continue
            operands = list(model.main.operands)
            operands[k] = vts_mutate_operand(o, new_type)
            yield (
                f"operand {k} type {new_type.name}",
                with_main(model, operands=tuple(operands)),
                1,
                1,
            )


INVALID_OPERATION_TYPES = (102, 9999, 10001)
"""``OperationTypeRange::FUNDAMENTAL_MAX + 1``, ``OEM_MIN - 1``, ``OEM_MAX + 1``."""


def mutate_operation_type(model: Model) -> Iterator[Mutation]:
    for k in range(len(model.main.operations)):
        for code in INVALID_OPERATION_TYPES:
            yield f"operation {k} type {code}", with_operation(model, k, type=code), 1, 1


def mutate_operation_input_index(model: Model) -> Iterator[Mutation]:
    bad = len(model.main.operands)
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.inputs)):
            inputs = list(op.inputs)
            inputs[j] = bad
            yield (
                f"operation {k} input {j} index {bad}",
                with_operation(model, k, inputs=tuple(inputs)),
                1,
                1,
            )


def mutate_operation_output_index(model: Model) -> Iterator[Mutation]:
    bad = len(model.main.operands)
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.outputs)):
            outputs = list(op.outputs)
            outputs[j] = bad
            yield (
                f"operation {k} output {j} index {bad}",
                with_operation(model, k, outputs=tuple(outputs)),
                1,
                1,
            )


def mutate_remove_writer(model: Model) -> Iterator[Mutation]:
    """An output that others read is redirected to a fresh operand: the readers' operand
    then has no writer."""
    sg = model.main
    consumers = count_consumers(sg)
    for k, op in enumerate(sg.operations):
        for j, i in enumerate(op.outputs):
            if consumers[i] == 0:
                continue
            fresh = dataclasses.replace(
                sg.operands[i], number_of_consumers=0, lifetime=L.TEMPORARY_VARIABLE
            )
            outputs = list(op.outputs)
            outputs[j] = len(sg.operands)
            m = with_main(model, operands=(*sg.operands, fresh))
            yield (
                f"operation {k} output {j} writer removed",
                with_operation(m, k, outputs=tuple(outputs)),
                1,
                1,
            )


def remove_operation_input_skip(op: Operation, j: int) -> bool:
    """VTS ``removeOperationInputSkip``: trailing optional parameters (layouts, axes,
    align_corners/half_pixel_centers) and CONCATENATION's variadic tensors."""
    n = len(op.inputs)
    t = op.type
    if t == O.CONCATENATION:
        return n > 2 and j != n - 1
    if t == O.DEPTHWISE_CONV_2D:
        return (n == 12 and j == 11) or (n == 9 and j == 8)
    if t in (O.CONV_2D, O.AVERAGE_POOL_2D, O.MAX_POOL_2D, O.L2_POOL_2D):
        return (n == 11 and j == 10) or (n == 8 and j == 7)
    if t == O.RESIZE_BILINEAR:
        return n >= 4 and j >= 3
    if t == O.RESIZE_NEAREST_NEIGHBOR:
        return n >= 5 and j >= 3
    if t in (O.SPACE_TO_DEPTH, O.DEPTH_TO_SPACE, O.BATCH_TO_SPACE_ND):
        return n == 3 and j == 2
    if t == O.SPACE_TO_BATCH_ND:
        return n == 4 and j == 3
    if t == O.L2_NORMALIZATION:
        return n == 2 and j == 1
    if t == O.LOCAL_RESPONSE_NORMALIZATION:
        return n == 6 and j == 5
    if t == O.SOFTMAX:
        return n == 3 and j == 2
    return False


VARIABLE_OUTPUT_OPERATIONS = frozenset(
    {
        O.SPLIT,  # its outputs are not checked at prepare time (VTS)
        # One to four outputs, by mergeOutputs and whether state outputs are given:
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        # One output, or more with the (1.3) state outputs:
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
    }
)
"""Operations whose output count varies (VTS ``removeOperandSkip`` and
``addOperationOutputSkip``)."""


def remove_operand_skip(k: int, model: Model) -> bool:
    """VTS ``removeOperandSkip`` (outputs of :data:`VARIABLE_OUTPUT_OPERATIONS`), plus,
    because we renumber (see the module docs), operands whose every use is an input
    position ``remove_operation_input_skip`` names, and operands nothing uses."""
    uses = []
    for op in model.main.operations:
        if op.type in VARIABLE_OUTPUT_OPERATIONS and k in op.outputs:
            return True
        uses += [(op, j) for j, i in enumerate(op.inputs) if i == k]
        if k in op.outputs:
            uses.append((op, -1))
    if not uses:
        return True
    return all(j >= 0 and remove_operation_input_skip(op, j) for op, j in uses)


def mutate_remove_operand(model: Model) -> Iterator[Mutation]:
    sg = model.main
    for k in range(len(sg.operands)):
        if remove_operand_skip(k, model):
            continue
        operations = tuple(
            Operation(
                op.type, _remove_and_renumber(op.inputs, k), _remove_and_renumber(op.outputs, k)
            )
            for op in sg.operations
        )
        m = with_main(
            model,
            operands=sg.operands[:k] + sg.operands[k + 1 :],
            operations=operations,
            input_indexes=_remove_and_renumber(sg.input_indexes, k),
            output_indexes=_remove_and_renumber(sg.output_indexes, k),
        )
        yield f"operand {k} removed", m, 1, 1


def mutate_remove_operation(model: Model) -> Iterator[Mutation]:
    sg = model.main
    for k, op in enumerate(sg.operations):
        operands = list(sg.operands)
        for i in op.inputs:
            operands[i] = dataclasses.replace(
                operands[i], number_of_consumers=operands[i].number_of_consumers - 1
            )
        m = with_main(
            model,
            operands=tuple(operands),
            operations=sg.operations[:k] + sg.operations[k + 1 :],
        )
        yield f"operation {k} removed", m, 1, 1


def mutate_remove_operation_input(model: Model) -> Iterator[Mutation]:
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.inputs)):
            if remove_operation_input_skip(op, j):
                continue
            i = op.inputs[j]
            m = with_operation(model, k, inputs=op.inputs[:j] + op.inputs[j + 1 :])
            m = with_operand(m, i, number_of_consumers=m.main.operands[i].number_of_consumers - 1)
            yield f"operation {k} input {j} removed", m, 1, 1


def mutate_remove_operation_output(model: Model) -> Iterator[Mutation]:
    for k, op in enumerate(model.main.operations):
        for j in range(len(op.outputs)):
            yield (
                f"operation {k} output {j} removed",
                with_operation(model, k, outputs=op.outputs[:j] + op.outputs[j + 1 :]),
                1,
                1,
            )


def add_operation_input_skip(op: Operation) -> bool:
    """VTS ``addOperationInputSkip``: an optional trailing INT32 axis, or RESIZE_*'s
    optional parameters, would make the added INT32 input valid."""
    n = len(op.inputs)
    return (
        (op.type == O.L2_NORMALIZATION and n == 1)
        or (op.type == O.LOCAL_RESPONSE_NORMALIZATION and n == 5)
        or (op.type == O.SOFTMAX and n == 2)
        or (op.type == O.RESIZE_BILINEAR and n < 6)
        or (op.type == O.RESIZE_NEAREST_NEIGHBOR and n < 6)
    )


def _new_int32(lifetime: OperandLifeTime, consumers: int) -> Operand:
    return Operand(T.INT32, (), consumers, 0.0, 0, lifetime)


def mutate_add_operation_input(model: Model) -> Iterator[Mutation]:
    sg = model.main
    for k, op in enumerate(sg.operations):
        if add_operation_input_skip(op):
            continue
        new = len(sg.operands)
        m = with_main(
            model,
            operands=(*sg.operands, _new_int32(L.SUBGRAPH_INPUT, 1)),
            input_indexes=(*sg.input_indexes, new),
        )
        yield (
            f"operation {k} gets an extra input",
            with_operation(m, k, inputs=(*op.inputs, new)),
            1,
            1,
        )


def mutate_add_operation_output(model: Model) -> Iterator[Mutation]:
    sg = model.main
    for k, op in enumerate(sg.operations):
        if op.type in VARIABLE_OUTPUT_OPERATIONS:
            continue  # VTS addOperationOutputSkip
        new = len(sg.operands)
        m = with_main(
            model,
            operands=(*sg.operands, _new_int32(L.SUBGRAPH_OUTPUT, 0)),
            output_indexes=(*sg.output_indexes, new),
        )
        yield (
            f"operation {k} gets an extra output",
            with_operation(m, k, outputs=(*op.outputs, new)),
            1,
            1,
        )


def mutate_execution_preference(model: Model) -> Iterator[Mutation]:
    for bad in (ExecutionPreference.LOW_POWER - 1, ExecutionPreference.SUSTAINED_SPEED + 1):
        yield f"execution preference {bad}", model, bad, DEFAULT_PRIORITY


def mutate_priority(model: Model) -> Iterator[Mutation]:
    for bad in (Priority.LOW - 1, Priority.HIGH + 1):
        yield f"priority {bad}", model, DEFAULT_PREFERENCE, bad


FAMILIES: dict[str, Callable[[Model], Iterator[Mutation]]] = {
    "execution order": mutate_execution_order,
    "operand type": mutate_operand_type,
    "operand rank": mutate_operand_rank,
    "operand scale": mutate_operand_scale,
    "operand zero point": mutate_operand_zero_point,
    "operand lifetime": mutate_operand_lifetime,
    "operand input/output role": mutate_operand_input_output,
    "number of consumers": mutate_number_of_consumers,
    "add a writer": mutate_add_writer,
    "operation operand type": mutate_operation_operand_type,
    "operation type": mutate_operation_type,
    "operation input index": mutate_operation_input_index,
    "operation output index": mutate_operation_output_index,
    "remove a writer": mutate_remove_writer,
    "remove an operand": mutate_remove_operand,
    "remove an operation": mutate_remove_operation,
    "remove an operation input": mutate_remove_operation_input,
    "remove an operation output": mutate_remove_operation_output,
    "add an operation input": mutate_add_operation_input,
    "add an operation output": mutate_add_operation_output,
    "execution preference": mutate_execution_preference,
    "priority": mutate_priority,
}


def prepare_status(model: Model, preference: int, priority: int, version: HalVersion) -> str | None:
    """What ``prepareModel`` validation says: None if it accepts; otherwise the problem
    if the rejection is anything but INVALID_ARGUMENT (a string for the report)."""
    try:
        validate_execution_preference(preference)
        validate_priority(priority)
        validate_model(model, version)
    except HalError as e:
        if e.status != ErrorStatus.INVALID_ARGUMENT:
            return f"{e.status.name}: {e.message}"
        return "rejected"
    except Exception as e:  # the bug this test exists to catch
        return f"raised {type(e).__name__}: {e}"
    return None


def check_model(name: str, model: Model) -> tuple[list[str], int]:
    """Run every family; returns (failures, number of mutations checked)."""
    failures: list[str] = []
    lowest = validate_model(model, V.V1_3)  # the base model must be valid
    checked = 0
    versions = sorted({lowest, V.V1_3})
    for family, mutate in FAMILIES.items():
        for what, mutated, preference, priority in mutate(model):
            checked += 1
            for version in versions:
                if preference == 1 and priority == 1 and version != V.V1_3:
                    continue  # model mutations: rejected at 1.3 implies at every version
                outcome = prepare_status(mutated, preference, priority, version)
                if outcome != "rejected":
                    failures.append(
                        f"{name}: {family}: {what} (HAL {version.label}): "
                        + (outcome or "accepted")
                    )
    return failures, checked


MODEL_CASES = all_models()


@pytest.mark.parametrize("name, model", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_every_vts_mutation_is_invalid_argument(name, model):
    failures, checked = check_model(name, model)
    assert checked > 0
    assert not failures, f"{len(failures)} of {checked} mutations:\n" + "\n".join(failures[:25])


def test_spliced_models_cover_multi_operation_families():
    models = spliced_models()
    assert len(models) >= 5
    counts = {f: 0 for f in ("execution order", "add a writer", "remove a writer")}
    for _, m in models:
        assert len(m.main.operations) == 2
        for family in counts:
            counts[family] += sum(1 for _ in FAMILIES[family](m))
    assert all(counts.values()), counts


def test_mutation_machinery_on_a_hand_built_chain():
    """The families really mutate: on a known model each yields what VTS yields."""
    name, model = spliced_models()[0]
    assert sum(1 for _ in mutate_execution_order(model)) == 2
    assert sum(1 for _ in mutate_remove_writer(model)) == 1
    n_operands = len(model.main.operands)
    assert sum(1 for _ in mutate_operand_type(model)) == n_operands * len(INVALID_OPERAND_TYPES)


# ---------------------------------------------------------------------------------------
# Requests: removing an input or an output, on every execution path
# ---------------------------------------------------------------------------------------

REQUEST_PATHS = [
    # (path, HAL version of the device, outputs may be unspecified)
    ("execute 1.0", V.V1_0, False),
    ("execute 1.2", V.V1_2, True),
    ("executeSynchronously/burst 1.3", V.V1_3, True),
    ("executeFenced 1.3", V.V1_3, False),
]


@functools.cache
def request_cases() -> tuple[tuple[str, Model, Request, HalVersion], ...]:
    out = []
    for name, model, feeds in example_models():
        request = build_request(model, list(feeds)).request
        lowest = validate_request(model, request, V.V1_3)
        out.append((name, model, request, max(lowest, validate_model(model))))
    return tuple(out)


def test_request_mutations_removing_an_input_or_output_are_invalid_argument():
    failures = []
    checked = 0
    for name, model, request, lowest in request_cases():
        for path, version, allow in REQUEST_PATHS:
            if version < lowest:
                continue
            mutations = [
                (
                    f"input {k} removed",
                    dataclasses.replace(
                        request, inputs=request.inputs[:k] + request.inputs[k + 1 :]
                    ),
                )
                for k in range(len(request.inputs))
            ] + [
                (
                    f"output {k} removed",
                    dataclasses.replace(
                        request, outputs=request.outputs[:k] + request.outputs[k + 1 :]
                    ),
                )
                for k in range(len(request.outputs))
            ]
            for what, bad in mutations:
                checked += 1
                try:
                    validate_request(model, bad, version, allow_unspecified_output=allow)
                    failures.append(f"{name}: {path}: {what}: accepted")
                except HalError as e:
                    if e.status != ErrorStatus.INVALID_ARGUMENT:
                        failures.append(f"{name}: {path}: {what}: {e}")
                except Exception as e:
                    failures.append(f"{name}: {path}: {what}: raised {type(e).__name__}: {e}")
    assert checked > len(request_cases())
    assert not failures, "\n".join(failures[:25])


# ---------------------------------------------------------------------------------------
# Random field-level corruption (Hypothesis)
# ---------------------------------------------------------------------------------------

_ints = st.one_of(
    st.integers(-3, 20),
    st.sampled_from([-(2**31), 2**31 - 1, 2**32 - 1, 2**32, 2**63, 10000, 10001, 65535]),
    st.integers(-(2**70), 2**70),
)
_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, -0.0])
)
_dims = st.lists(_ints, max_size=6).map(tuple)
_extra = st.one_of(
    st.none(),
    st.binary(max_size=8),
    st.builds(SymmPerChannelQuantParams, _ints, st.lists(_floats, max_size=4).map(tuple)),
)
_type_codes = st.one_of(st.sampled_from([*map(int, T), (7 << 16) | 1]), _ints)
_lifetimes = st.one_of(st.sampled_from(list(L)), _ints)


@st.composite
def corrupted_model(draw) -> tuple[Model, HalVersion]:
    cases = MODEL_CASES
    _, model = cases[draw(st.integers(0, len(cases) - 1))]
    for _ in range(draw(st.integers(1, 3))):
        model = draw(_corruption(model))
    return model, draw(st.sampled_from(list(V)))


def _corruption(model: Model):
    sg = model.main
    n_operands, n_operations = len(sg.operands), len(sg.operations)
    options = []
    if n_operands:
        k = st.integers(0, n_operands - 1)
        field_values = {
            "type": _type_codes,
            "dimensions": _dims,
            "number_of_consumers": _ints,
            "scale": _floats,
            "zero_point": _ints,
            "lifetime": _lifetimes,
            "extra_params": _extra,
            "location": st.builds(DataLocation, _ints, _ints, _ints),
        }
        options += [
            st.tuples(k, st.just(f), v).map(lambda a: with_operand(model, a[0], **{a[1]: a[2]}))
            for f, v in field_values.items()
        ]
    if n_operations:
        k = st.integers(0, n_operations - 1)
        options += [
            st.tuples(k, _type_codes).map(lambda a: with_operation(model, a[0], type=a[1])),
            st.tuples(k, _dims).map(lambda a: with_operation(model, a[0], inputs=a[1])),
            st.tuples(k, _dims).map(lambda a: with_operation(model, a[0], outputs=a[1])),
        ]
    options += [
        _dims.map(lambda d: with_main(model, input_indexes=d)),
        _dims.map(lambda d: with_main(model, output_indexes=d)),
        st.binary(max_size=64).map(lambda b: dataclasses.replace(model, operand_values=b)),
        st.booleans().map(
            lambda r: dataclasses.replace(model, relax_computation_float32_to_float16=r)
        ),
        st.lists(st.builds(ExtensionNameAndPrefix, st.text(max_size=4), _ints), max_size=3).map(
            lambda e: dataclasses.replace(model, extension_name_to_prefix=tuple(e))
        ),
        st.lists(
            st.builds(
                Memory,
                st.sampled_from(
                    ["ashmem", "mmap_fd", "hardware_buffer_blob", "hardware_buffer", "x"]
                ),
                _ints,
                st.one_of(st.none(), st.builds(BytesHandle, st.integers(0, 64))),
            ),
            max_size=2,
        ).map(lambda p: dataclasses.replace(model, pools=tuple(p))),
        st.sampled_from([(), (sg,), (Subgraph(),), (sg, sg)]).map(
            lambda r: dataclasses.replace(model, referenced=r)
        ),
    ]
    return st.one_of(options)


def _only_invalid_argument(call) -> None:
    try:
        call()
    except HalError as e:
        assert e.status == ErrorStatus.INVALID_ARGUMENT, f"{e.status.name}: {e.message}"


_RANDOM = settings(
    max_examples=max(200, settings.default.max_examples),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    deadline=None,
)


@_RANDOM
@given(corrupted_model())
def test_random_corruption_of_valid_models_only_gives_invalid_argument(case):
    model, version = case
    _only_invalid_argument(lambda: validate_model(model, version))
    _only_invalid_argument(lambda: operation_versions(model))


@st.composite
def corrupted_request(draw):
    cases = request_cases()
    _, model, request, _ = cases[draw(st.integers(0, len(cases) - 1))]
    arg = st.builds(
        RequestArgument,
        st.booleans(),
        st.builds(DataLocation, _ints, _ints, _ints),
        _dims,
    )
    which = draw(st.sampled_from(["inputs", "outputs", "pools", "arg"]))
    if which == "pools":
        pool = st.one_of(
            st.builds(
                Memory,
                st.sampled_from(["ashmem", "mmap_fd", "hardware_buffer", "y"]),
                _ints,
                st.one_of(st.none(), st.builds(BytesHandle, st.integers(0, 64))),
            ),
            st.builds(BufferToken, _ints),
        )
        request = dataclasses.replace(request, pools=tuple(draw(st.lists(pool, max_size=3))))
    elif which in ("inputs", "outputs"):
        request = dataclasses.replace(request, **{which: tuple(draw(st.lists(arg, max_size=4)))})
    else:
        args = list(request.inputs)
        if args:
            args[draw(st.integers(0, len(args) - 1))] = draw(arg)
            request = dataclasses.replace(request, inputs=tuple(args))
    return model, request, draw(st.sampled_from(list(V))), draw(st.booleans())


@_RANDOM
@given(corrupted_request())
def test_random_corruption_of_valid_requests_only_gives_invalid_argument(case):
    model, request, version, allow = case
    _only_invalid_argument(
        lambda: validate_request(model, request, version, allow_unspecified_output=allow)
    )


def test_corruption_strategies_reach_deep_rules():
    """The random corruptions are not all caught by the first check: a NaN scale on a
    float operand, a wrong consumer count and an out-of-range pool all get through to
    their own rules (guards against a strategy that only ever trips one early check)."""
    _, model = next((n, m) for n, m in MODEL_CASES if m.main.operands[0].type == T.TENSOR_FLOAT32)
    for bad, rule in (
        (with_operand(model, 0, scale=math.nan), "must have scale 0"),
        (with_operand(model, 0, number_of_consumers=99), "numberOfConsumers is 99"),
        (
            with_operand(model, 0, lifetime=L.CONSTANT_REFERENCE, location=DataLocation(5, 0, 4)),
            "poolIndex 5",
        ),
    ):
        with pytest.raises(HalError, match=rule):
            validate_model(bad)
