"""Test models: a model together with its example inputs and expected outputs.

This is the exchange form between spec files (loaded or dumped), the random-graph
generator, the runner and the differential checker. Its JSON layout is the one Android's
expanded CTS test models use (``nnfuzz specs expand --json`` writes it): per operand ``data`` holds the
constant value, the example input (SUBGRAPH_INPUT of the main subgraph) or the expected
output (SUBGRAPH_OUTPUT), as a flat row-major list in the operand's own type. An ignored
output loaded from a spec has no data (Android writes zeros that nothing reads).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from driver.builder import ModelBuilder
from driver.hal.types import (
    HalVersion,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
    is_scalar_type,
)
from driver.operations.base import storage_dtype

L = OperandLifeTime


@dataclass
class TestOperand:
    __test__ = False  # not a pytest test class

    name: str
    type: OperandType
    dimensions: list[int]
    scale: float = 0.0
    zero_point: int = 0
    lifetime: OperandLifeTime = L.TEMPORARY_VARIABLE
    number_of_consumers: int = 0
    channel_quant: SymmPerChannelQuantParams | None = None
    is_ignored: bool = False
    data: list = field(default_factory=list)

    def array(self) -> np.ndarray:
        """``data`` in the operand's storage dtype and shape; zeros for an ignored output
        given no data (a spec's ignored outputs carry none: nothing compares them)."""
        dims = () if is_scalar_type(self.type) else tuple(self.dimensions)
        if self.is_ignored and not self.data:
            return np.zeros(dims, dtype=storage_dtype(self.type))  # lazily zeroed pages
        return np.asarray(self.data, dtype=storage_dtype(self.type)).reshape(dims)


@dataclass
class TestOperation:
    __test__ = False  # not a pytest test class

    type: OperationType
    inputs: list[int]
    outputs: list[int]


@dataclass
class TestSubgraph:
    __test__ = False  # not a pytest test class

    operands: list[TestOperand] = field(default_factory=list)
    operations: list[TestOperation] = field(default_factory=list)
    input_indexes: list[int] = field(default_factory=list)
    output_indexes: list[int] = field(default_factory=list)
    name: str = "None"  # the spec model's name (Android writes str(None) for unnamed)

    def fill_consumers(self) -> None:
        counts = [0] * len(self.operands)
        for op in self.operations:
            for i in op.inputs:
                counts[i] += 1
        for operand, c in zip(self.operands, counts):
            operand.number_of_consumers = c


@dataclass
class TestModel:
    __test__ = False  # not a pytest test class

    name: str
    main: TestSubgraph
    referenced: list[TestSubgraph] = field(default_factory=list)
    is_relaxed: bool = False
    expect_failure: bool = False
    multinomial_tolerance: float = 0.0
    min_supported_version: HalVersion | None = HalVersion.V1_0  # None: UNKNOWN
    test_dynamic_output_shape: bool = True
    source: str = ""  # spec file (and line) it came from, for messages
    # Random-graph criteria set (randomgraph.criteria.CRITERIA_SETS) the outputs are
    # checked with; empty: the generated-test criteria. Differential specs carry it.
    criteria: str = ""

    # --- HAL view -------------------------------------------------------------------
    def to_hal(self) -> tuple[Model, list[np.ndarray | None], list[np.ndarray]]:
        """(HAL model, request inputs, expected outputs)."""
        model, inputs = self.to_hal_model()
        expected = [self.main.operands[i].array() for i in self.main.output_indexes]
        return model, inputs, expected

    def to_hal_model(self) -> tuple[Model, list[np.ndarray | None]]:
        """(HAL model, request inputs): :meth:`to_hal` for a test whose expected outputs
        are not known yet (the differential checker computes them)."""
        b = ModelBuilder(relaxed=self.is_relaxed)
        builders = [b] + [b.new_subgraph() for _ in self.referenced]
        for sb, sg in zip(builders, [self.main, *self.referenced]):
            for o in sg.operands:
                dims = () if is_scalar_type(o.type) else o.dimensions
                i = sb.add_operand(
                    o.type,
                    dims,
                    scale=o.scale,
                    zero_point=o.zero_point,
                    channel_quant=o.channel_quant,
                )
                if o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                    sb.set_value(i, o.array(), by_reference=o.lifetime == L.CONSTANT_REFERENCE)
                elif o.lifetime == L.NO_VALUE:
                    sb.operands[i].lifetime = L.NO_VALUE
                elif o.lifetime == L.SUBGRAPH:
                    sb.operands[i].lifetime = L.SUBGRAPH
                    sb.operands[i].subgraph_index = int(o.data[0])
            for op in sg.operations:
                sb.add_operation(op.type, op.inputs, op.outputs)
            sb.identify_inputs_and_outputs(sg.input_indexes, sg.output_indexes)
        # An input with no data is omitted (Android's CTS harness: hasNoValue when the
        # operand's data is empty).
        inputs = [
            None if not o.data else o.array()
            for o in (self.main.operands[i] for i in self.main.input_indexes)
        ]
        return b.build(), inputs

    @classmethod
    def from_hal(
        cls,
        name: str,
        model: Model,
        inputs: Sequence[np.ndarray | None] = (),
        expected: Sequence[np.ndarray] = (),
        **kw,
    ) -> TestModel:
        """The test model of a HAL model plus example inputs and expected outputs
        (missing ones are left empty)."""
        from driver.validation import read_constant

        subgraphs = []
        for s, sg in enumerate([model.main, *model.referenced]):
            feeds: dict[int, np.ndarray | None] = {}
            if s == 0:
                feeds.update(zip(sg.input_indexes, inputs))
                feeds.update(zip(sg.output_indexes, expected))
            operands = []
            for i, o in enumerate(sg.operands):
                if o.lifetime == L.SUBGRAPH:
                    data = [int(o.location.offset)]
                elif o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                    data = np.asarray(read_constant(model, o)).reshape(-1).tolist()
                elif feeds.get(i) is not None:
                    data = np.asarray(feeds[i]).reshape(-1).tolist()
                else:
                    data = []
                cq = (
                    o.extra_params
                    if isinstance(o.extra_params, SymmPerChannelQuantParams)
                    else None
                )
                operands.append(
                    TestOperand(
                        name=f"op{i}",
                        type=OperandType(o.type),
                        dimensions=list(o.dimensions),
                        scale=float(o.scale),
                        zero_point=int(o.zero_point),
                        lifetime=OperandLifeTime(o.lifetime),
                        number_of_consumers=o.number_of_consumers,
                        channel_quant=cq,
                        data=data,
                    )
                )
            subgraphs.append(
                TestSubgraph(
                    operands,
                    [
                        TestOperation(OperationType(op.type), list(op.inputs), list(op.outputs))
                        for op in sg.operations
                    ],
                    list(sg.input_indexes),
                    list(sg.output_indexes),
                    "None" if s == 0 else f"sub{s - 1}",
                )
            )
        return cls(
            name=name,
            main=subgraphs[0],
            referenced=subgraphs[1:],
            is_relaxed=model.relax_computation_float32_to_float16,
            **kw,
        )

    def has_dynamic_output_variant(self) -> bool:
        """Android also runs a test with its outputs' dims unspecified (on HAL 1.2+
        drivers), except an expect-failure test, one that opts out, and one with a scalar
        output."""
        if self.expect_failure or not self.test_dynamic_output_shape:
            return False
        return not any(is_scalar_type(self.main.operands[i].type) for i in self.main.output_indexes)

    def has_float16(self) -> bool:
        return any(
            o.type in (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16)
            for sg in [self.main, *self.referenced]
            for o in sg.operands
        )

    def operation_types(self) -> list[OperationType]:
        return [op.type for sg in [self.main, *self.referenced] for op in sg.operations]

    # --- JSON -------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.name,
            "main": _subgraph_json(self.main),
            "referenced": [_subgraph_json(s) for s in self.referenced],
            "isRelaxed": self.is_relaxed,
            "expectFailure": self.expect_failure,
            "expectedMultinomialDistributionTolerance": self.multinomial_tolerance,
            "minSupportedVersion": "UNKNOWN"
            if self.min_supported_version is None
            else self.min_supported_version.name,
            **({"criteria": self.criteria} if self.criteria else {}),
            # Only a spec's opt-out is written (a generated test always has the variant).
            **({} if self.test_dynamic_output_shape else {"testDynamicOutputShape": False}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TestModel:
        return cls(
            name=d["test"],
            main=_subgraph_from_json(d["main"]),
            referenced=[_subgraph_from_json(s) for s in d.get("referenced", [])],
            is_relaxed=bool(d.get("isRelaxed", False)),
            expect_failure=bool(d.get("expectFailure", False)),
            multinomial_tolerance=float(d.get("expectedMultinomialDistributionTolerance", 0)),
            min_supported_version=None
            if d.get("minSupportedVersion", "V1_0") == "UNKNOWN"
            else HalVersion[d.get("minSupportedVersion", "V1_0")],
            criteria=str(d.get("criteria", "")),
            test_dynamic_output_shape=bool(d.get("testDynamicOutputShape", True)),
        )


def _json_number(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    f = float(v)
    return f if math.isfinite(f) else repr(f)


def _subgraph_json(sg: TestSubgraph) -> dict[str, Any]:
    return {
        "name": sg.name,
        "operands": [
            {
                "name": o.name,
                "type": o.type.name,
                "dimensions": list(o.dimensions),
                "scale": float(o.scale),
                "zeroPoint": int(o.zero_point),
                "numberOfConsumers": o.number_of_consumers,
                "lifetime": o.lifetime.name,
                "channelQuant": None
                if o.channel_quant is None
                else {
                    "scales": list(o.channel_quant.scales),
                    "channelDim": o.channel_quant.channel_dim,
                },
                "isIgnored": o.is_ignored,
                "data": [_json_number(v) for v in o.data],
            }
            for o in sg.operands
        ],
        "operations": [
            {"type": op.type.name, "inputs": list(op.inputs), "outputs": list(op.outputs)}
            for op in sg.operations
        ],
        "inputIndexes": list(sg.input_indexes),
        "outputIndexes": list(sg.output_indexes),
    }


def _subgraph_from_json(d: dict[str, Any]) -> TestSubgraph:
    operands = []
    for o in d["operands"]:
        cq = o.get("channelQuant")
        operands.append(
            TestOperand(
                name=o.get("name", ""),
                type=OperandType[o["type"]],
                dimensions=list(o["dimensions"]),
                scale=float(o.get("scale", 0.0)),
                zero_point=int(o.get("zeroPoint", 0)),
                lifetime=OperandLifeTime[o["lifetime"]],
                number_of_consumers=int(o.get("numberOfConsumers", 0)),
                channel_quant=None
                if not cq
                else SymmPerChannelQuantParams(
                    int(cq["channelDim"]), tuple(float(s) for s in cq["scales"])
                ),
                is_ignored=bool(o.get("isIgnored", False)),
                data=[float(v) if isinstance(v, str) else v for v in o.get("data", [])],
            )
        )
    return TestSubgraph(
        operands,
        [
            TestOperation(OperationType[op["type"]], list(op["inputs"]), list(op["outputs"]))
            for op in d["operations"]
        ],
        list(d["inputIndexes"]),
        list(d["outputIndexes"]),
        str(d.get("name", "None")),
    )
