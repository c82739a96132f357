"""Android VTS's validation mutations: ways to break a valid model or request.

``hardware/interfaces/neuralnetworks/1.3/vts/functional/ValidateModel.cpp`` and
``ValidateRequest.cpp`` take a valid model, break it one way at a time and require
INVALID_ARGUMENT from ``getSupportedOperations`` and ``prepareModel`` (and from every
execution path for requests). Each family here is a function ``model -> mutations``
yielding ``(description, model, execution preference, priority)``; :data:`FAMILIES` names
them as VTS does. The skips are VTS's own, each for a mutation that would leave the model
valid for that operation (see the ``*_skip`` functions). Two deliberate differences from
VTS make a mutation test what its name says:

* VTS's ``removeOperand`` does not renumber the indexes above the removed operand, so the
  mutated model is invalid for an unrelated reason (an index out of range). We renumber,
  and skip what that makes legitimately valid: removing an operand whose every use is an
  input position ``remove_operation_input_skip`` names (a trailing optional parameter).
* VTS's ``addOperationOutputTest`` gives the new output ``numberOfConsumers = 1`` although
  nothing reads it, which fails the consumer count rather than the operation's output
  count. We give it 0.

Request mutations (:func:`request_mutations`): removing an input or an output (VTS), plus
wrong dimensions and locations outside their pool.

Used by the project's VTS-mutation tests and by the pytest plugin's conformance suite
(``nnfuzz_pytest``), which applies them to generated models on any driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from driver.hal.types import (
    DataLocation,
    ExecutionPreference,
    HalVersion,
    Model,
    Operand,
    OperandLifeTime,
    Operation,
    Priority,
    Request,
    Subgraph,
    SymmPerChannelQuantParams,
    is_scalar_type,
    non_extension_size_of_data,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O

V = HalVersion
L = OperandLifeTime
NO_LOCATION = DataLocation()

Mutation = tuple[str, Model, int, int]  # (description, model, preference, priority)
DEFAULT_PREFERENCE = ExecutionPreference.FAST_SINGLE_ANSWER
DEFAULT_PRIORITY = Priority.MEDIUM


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


# ---------------------------------------------------------------------------------------
# For a driver of a given HAL version
# ---------------------------------------------------------------------------------------


def model_mutations(
    model: Model, version: HalVersion = V.V1_3
) -> Iterator[tuple[str, str, Model, int, int]]:
    """Every mutation of ``model`` (valid at ``version``) as ``(family, description,
    model, preference, priority)``. Model mutations rejected at 1.3 are rejected at every
    version (older versions only forbid more); the preference mutations need
    ``prepareModel_1_1`` and the priority ones ``prepareModel_1_3``, so they are left out
    for older drivers."""
    for family, mutate in FAMILIES.items():
        if family == "execution preference" and version < V.V1_1:
            continue
        if family == "priority" and version < V.V1_3:
            continue
        for what, mutated, preference, priority in mutate(model):
            yield family, what, mutated, preference, priority


def _without(items: tuple, k: int) -> tuple:
    return items[:k] + items[k + 1 :]


def _replace_arg(request: Request, kind: str, k: int, **changes) -> Request:
    args = list(getattr(request, kind))
    args[k] = dataclasses.replace(args[k], **changes)
    return dataclasses.replace(request, **{kind: tuple(args)})


def request_mutations(model: Model, request: Request) -> Iterator[tuple[str, Request]]:
    """Invalid variants of a valid ``request`` for ``model``: ``(description, request)``.

    Every one must be rejected with INVALID_ARGUMENT on every execution path: an input or
    output removed (VTS ``removeInputTest``/``removeOutputTest``); dimensions that
    contradict the model's (wrong rank, a wrong known dimension, dimensions on a
    scalar); a location outside its pool (offset past the end, length past the end, a
    pool index beyond the pools)."""
    main = model.main
    for k in range(len(request.inputs)):
        yield f"input {k} removed", dataclasses.replace(request, inputs=_without(request.inputs, k))
    for k in range(len(request.outputs)):
        yield (
            f"output {k} removed",
            dataclasses.replace(request, outputs=_without(request.outputs, k)),
        )
    for kind, indexes in (("inputs", main.input_indexes), ("outputs", main.output_indexes)):
        what = kind[:-1]
        for k, arg in enumerate(getattr(request, kind)):
            if arg.has_no_value:
                continue
            operand = main.operands[indexes[k]]
            dims = tuple(operand.dimensions)
            if is_scalar_type(operand.type):
                yield (
                    f"{what} {k} (a scalar) given dimensions [1]",
                    _replace_arg(request, kind, k, dimensions=(1,)),
                )
            elif dims:
                yield (
                    f"{what} {k} given rank {len(dims) + 1}",
                    _replace_arg(request, kind, k, dimensions=(*dims, 1)),
                )
                known = [j for j, d in enumerate(dims) if d]
                if known:
                    j = known[-1]
                    wrong = list(dims)
                    wrong[j] = dims[j] + 1
                    yield (
                        f"{what} {k} dimension {j} given as {wrong[j]} (model: {dims[j]})",
                        _replace_arg(request, kind, k, dimensions=tuple(wrong)),
                    )
            loc = arg.location
            if not 0 <= loc.pool_index < len(request.pools):
                continue
            size = getattr(request.pools[loc.pool_index], "size", None)
            if size is None:
                continue  # a driver-managed buffer: no byte range
            yield (
                f"{what} {k} offset {size} (pool {loc.pool_index} has {size} bytes)",
                _replace_arg(
                    request,
                    kind,
                    k,
                    location=DataLocation(loc.pool_index, size, max(1, loc.length)),
                ),
            )
            yield (
                f"{what} {k} length {size - loc.offset + 1} runs past pool {loc.pool_index}",
                _replace_arg(
                    request,
                    kind,
                    k,
                    location=DataLocation(loc.pool_index, loc.offset, size - loc.offset + 1),
                ),
            )
            yield (
                f"{what} {k} pool index {len(request.pools)} (there are {len(request.pools)})",
                _replace_arg(
                    request,
                    kind,
                    k,
                    location=DataLocation(len(request.pools), loc.offset, loc.length),
                ),
            )


__all__ = [
    "FAMILIES",
    "become_constant_copy",
    "count_consumers",
    "model_mutations",
    "request_mutations",
    "size_of_data",
    "with_main",
    "with_operand",
    "with_operation",
]
