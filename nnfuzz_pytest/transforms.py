"""Equivalence-preserving model transformations (the metamorphic relations).

Each takes a :class:`~nnfuzz_pytest.strategies.Case` and returns an equivalent case (or
None when the relation does not apply to that model): the driver must give the same
results for both, up to the stated relation. They work on any model, not only on the
generated one-operation models, except :func:`to_nchw`, which needs to know where the
layout flag is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from driver.hal.types import (
    HalError,
    HalVersion,
    Model,
    OperandLifeTime,
    is_scalar_type,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations.base import storage_dtype
from nnfuzz_pytest.strategies import LAYOUT_OPERATIONS, Case
from randomgraph.testmodel import TestModel, TestOperand, TestOperation

L = OperandLifeTime
V = HalVersion

SIGNED_EXCEPTIONS = frozenset(
    {O.CAST, O.HASHTABLE_LOOKUP, O.LSH_PROJECTION, O.PAD_V2, O.QUANTIZED_16BIT_LSTM}
)
"""Operations whose signed and unsigned quant8 variants legitimately differ (seed 000)."""


def _test_model(case: Case) -> TestModel:
    main = case.model.main
    placeholders = [
        np.zeros(tuple(main.operands[i].dimensions), dtype=storage_dtype(main.operands[i].type))
        for i in main.output_indexes
    ]
    return TestModel.from_hal("case", case.model, list(case.inputs), placeholders)


def _case(test: TestModel, version: HalVersion, like: Case) -> Case | None:
    from driver.validation import validate_model

    model, inputs, _ = test.to_hal()
    try:
        validate_model(model, version)
    except HalError:
        return None
    return Case(model, tuple(inputs), like.ignored)


def to_signed(case: Case, version: HalVersion = V.V1_3) -> Case | None:
    """Every TENSOR_QUANT8_ASYMM operand as TENSOR_QUANT8_ASYMM_SIGNED (zero point and
    values minus 128). Outputs must be the unsigned ones minus 128."""
    main = case.model.main
    if not any(o.type == T.TENSOR_QUANT8_ASYMM for o in main.operands):
        return None
    if any(op.type in SIGNED_EXCEPTIONS for op in main.operations):
        return None
    test = _test_model(case)
    for o in test.main.operands:
        if o.type == T.TENSOR_QUANT8_ASYMM:
            o.type = T.TENSOR_QUANT8_ASYMM_SIGNED
            o.zero_point -= 128
            o.data = [int(v) - 128 for v in o.data]
    return _case(test, version, case)


def _layout_operand(op, operands) -> int | None:
    bools = [i for i in op.inputs if operands[i].type == T.BOOL]
    return bools[0] if len(bools) == 1 else None


def to_nchw(case: Case, version: HalVersion = V.V1_3) -> Case | None:
    """A one-operation NHWC model with an explicit layout flag, as NCHW: the flag set,
    the data input and the output transposed. Outputs must be the NHWC ones transposed
    (NHWC = NCHW.transpose(0, 2, 3, 1))."""
    main = case.model.main
    if len(main.operations) != 1 or version < V.V1_2:
        return None
    op = main.operations[0]
    if op.type not in LAYOUT_OPERATIONS:
        return None
    flag = _layout_operand(op, main.operands)
    data, out = op.inputs[0], op.outputs[0]
    if (
        flag is None
        or main.operands[data].lifetime != L.SUBGRAPH_INPUT
        or len(main.operands[data].dimensions) != 4
        or len(main.operands[out].dimensions) != 4
    ):
        return None
    test = _test_model(case)
    ops = test.main.operands
    if ops[flag].data != [False]:
        return None
    ops[flag].data = [True]
    for i in (data, out):
        o = ops[i]
        n, h, w, c = o.dimensions
        o.dimensions = [n, c, h, w]
        if o.data:
            arr = np.asarray(o.data).reshape(n, h, w, c).transpose(0, 3, 1, 2)
            o.data = arr.reshape(-1).tolist()
    return _case(test, version, case)


def constants_as_inputs(case: Case, which: Sequence[int], version: HalVersion) -> Case | None:
    """The constant tensors at operand indexes ``which`` turned into model inputs fed
    with the same values. Outputs must not change (beyond the criteria)."""
    test = _test_model(case)
    ops = test.main.operands
    chosen = [
        i
        for i in which
        if ops[i].lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
        and not is_scalar_type(ops[i].type)
    ]
    if not chosen:
        return None
    for i in chosen:
        ops[i].lifetime = L.SUBGRAPH_INPUT
        test.main.input_indexes.append(i)
    return _case(test, version, case)


ADD_TYPES = {
    T.TENSOR_FLOAT32: V.V1_0,
    T.TENSOR_QUANT8_ASYMM: V.V1_0,
    T.TENSOR_FLOAT16: V.V1_2,
    T.TENSOR_QUANT8_ASYMM_SIGNED: V.V1_3,
}


def behind_identity_add(case: Case, k: int, version: HalVersion) -> Case | None:
    """Model input ``k`` fed through ``ADD(x, 0)`` (same type and quantization, no
    activation) first. Outputs must not change (beyond the criteria)."""
    main = case.model.main
    if not 0 <= k < len(main.input_indexes):
        return None
    idx = main.input_indexes[k]
    operand = main.operands[idx]
    if (
        ADD_TYPES.get(operand.type, V.V1_3 + 1) > version
        or not operand.dimensions
        or 0 in operand.dimensions
        or len(operand.dimensions) > 4
        or case.inputs[k] is None
    ):
        return None
    test = _test_model(case)
    ops = test.main.operands
    old = ops[idx]
    fresh = dataclasses.replace(old, name=f"{old.name}_direct", number_of_consumers=1)
    zero = float(old.zero_point) if old.type not in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16) else 0.0
    count = int(np.prod(old.dimensions))
    zeros = TestOperand(
        "zeros",
        old.type,
        list(old.dimensions),
        old.scale,
        old.zero_point,
        L.CONSTANT_COPY,
        data=[zero] * count,
    )
    act = TestOperand("identity_act", T.INT32, [], lifetime=L.CONSTANT_COPY, data=[0])
    old.lifetime = L.TEMPORARY_VARIABLE
    old.data = []
    base = len(ops)
    ops += [fresh, zeros, act]
    test.main.input_indexes[k] = base
    test.main.operations.insert(0, TestOperation(O.ADD, [base, base + 1, base + 2], [idx]))
    return _case(test, version, case)


def relaxed(case: Case, version: HalVersion) -> Case | None:
    """The same model allowed to compute float32 in float16 range and precision
    (HAL 1.1). Outputs must agree with float32's under the relaxed criteria."""
    main = case.model.main
    if version < V.V1_1 or case.model.relaxed:
        return None
    if not any(o.type in (T.TENSOR_FLOAT32, T.FLOAT32) for o in main.operands):
        return None
    model = dataclasses.replace(case.model, relax_computation_float32_to_float16=True)
    return Case(model, case.inputs, case.ignored)


def dynamic_outputs(model: Model) -> Model:
    """Every tensor output's dimensions unspecified (0): the execution reports them."""
    main = model.main
    operands = list(main.operands)
    for i in main.output_indexes:
        o = operands[i]
        if not is_scalar_type(o.type):
            operands[i] = dataclasses.replace(o, dimensions=(0,) * len(o.dimensions))
    return dataclasses.replace(model, main=dataclasses.replace(main, operands=tuple(operands)))
