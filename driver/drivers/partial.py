"""Partial drivers: the reference restricted to a subset of the operations.

In the spirit of Android's sample drivers (``sample-float-fast``, ``sample-quant``,
``sample-minimal``), each supports part of what a model may hold and says so in
``getSupportedOperations``; ``prepareModel`` of a model with an unsupported operation is
GENERAL_FAILURE. They exist to be partitioned with (:mod:`driver.partition`): a model
that spans them runs its supported parts on them and the rest on the reference.

Support is decided per operation from the operand types the model gives it, not from a
list of operation names (except for ``partial-minimal``, whose point is a short list):

``partial-float``
    Operations that compute in floating point: every tensor they read or write is
    TENSOR_FLOAT32 or TENSOR_FLOAT16 — or an auxiliary TENSOR_INT32 / TENSOR_BOOL8
    tensor (indices, shapes, masks, comparison results) — and at least one is a float
    tensor. Relaxed models included. QUANTIZE (float → quant) and DEQUANTIZE are not.
``partial-quant``
    The same with the quantized tensor types (TENSOR_QUANT8_ASYMM(_SIGNED),
    TENSOR_QUANT8_SYMM(_PER_CHANNEL), TENSOR_QUANT16_SYMM/ASYMM).
``partial-minimal``
    Android's sample-minimal set: ADD, CONCATENATION and CONV_2D, on TENSOR_FLOAT32
    only.

Scalars (parameters) never decide. IF and WHILE are supported when their own operands
pass the rule and so does every operation of every subgraph they reach: a control-flow
operation runs whole on one driver. Extension operations are never supported.
Capabilities report the driver's own tensor types as twice as fast as the CPU (0.5), the
rest as the CPU (1.0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from driver.device import DeviceConfig, ReferenceDevice
from driver.hal.types import (
    QUANTIZED_TYPES,
    Capabilities,
    ErrorStatus,
    HalVersion,
    Model,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    Operation,
    OperationType,
    PerformanceInfo,
    Subgraph,
    is_extension_type,
    is_scalar_type,
)
from driver.validation import reachable_subgraphs

T = OperandType
Op = OperationType

FLOAT_TENSORS = frozenset({T.TENSOR_FLOAT32, T.TENSOR_FLOAT16})
QUANT_TENSORS = frozenset(QUANTIZED_TYPES)
AUXILIARY_TENSORS = frozenset({T.TENSOR_INT32, T.TENSOR_BOOL8})
"""Tensors that carry indices, shapes, masks or booleans: any driver may handle them."""

MINIMAL_OPERATIONS = frozenset({Op.ADD, Op.CONCATENATION, Op.CONV_2D})
"""Android's sample-minimal driver supports exactly these (on TENSOR_FLOAT32)."""

_CONTROL_FLOW = frozenset({Op.IF, Op.WHILE})


@dataclass(frozen=True)
class SupportRule:
    """Which operations a partial driver supports: the tensor types it computes in
    (``compute``), optionally a fixed set of operation types, and whether relaxed models
    count."""

    compute: frozenset[int]
    operations: frozenset[int] | None = None
    relaxed: bool = True

    def supports(self, model: Model, index: int) -> bool:
        """The :data:`driver.device.SupportFilter` for main-subgraph operation ``index``:
        the operation, and for IF/WHILE every operation of every subgraph it reaches."""
        op = model.main.operations[index]
        if not self._supports_alone(model.main, op, model.relaxed):
            return False
        if op.type not in _CONTROL_FLOW:
            return True
        reachable = reachable_subgraphs(model, model.main, op)
        return reachable is not None and all(
            self._supports_alone(model.referenced[k], inner, model.relaxed)
            for k in reachable
            for inner in model.referenced[k].operations
        )

    def _supports_alone(self, sg: Subgraph, op: Operation, relaxed: bool) -> bool:
        """``op`` by itself: its type and operand types (IF/WHILE: not their subgraphs)."""
        if is_extension_type(op.type):
            return False
        if self.operations is not None and op.type not in self.operations:
            return False
        if relaxed and not self.relaxed:
            return False
        operands = sg.operands
        seen_compute = False
        for i in (*op.inputs, *op.outputs):
            if not 0 <= i < len(operands):
                return False
            operand = operands[i]
            t = operand.type
            if is_scalar_type(t) or operand.lifetime == OperandLifeTime.NO_VALUE:
                continue
            if t in self.compute:
                seen_compute = True
            elif t not in AUXILIARY_TENSORS:
                return False
        return seen_compute or op.type in _CONTROL_FLOW


FLOAT_RULE = SupportRule(FLOAT_TENSORS)
QUANT_RULE = SupportRule(QUANT_TENSORS)
MINIMAL_RULE = SupportRule(frozenset({T.TENSOR_FLOAT32}), MINIMAL_OPERATIONS, relaxed=False)

FAST = PerformanceInfo(0.5, 0.5)
CPU = PerformanceInfo(1.0, 1.0)


class PartialDevice(ReferenceDevice):
    """The reference, supporting only what ``rule`` accepts."""

    def __init__(
        self,
        name: str,
        rule: SupportRule,
        version: HalVersion = HalVersion.V1_3,
    ):
        super().__init__(
            DeviceConfig(
                name=name,
                version=version,
                version_string=f"nnfuzz-{name}-1",
                support_filter=rule.supports,
            )
        )
        self.rule = rule
        _, reference = super().get_capabilities()
        scalar_partners = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16}
        fast = set(rule.compute) | {
            scalar_partners[t] for t in rule.compute if t in scalar_partners
        }
        relaxed = FAST if rule.relaxed and T.TENSOR_FLOAT32 in rule.compute else CPU
        self._partial_capabilities = Capabilities(
            relaxed_float32_to_float16_performance_scalar=relaxed,
            relaxed_float32_to_float16_performance_tensor=relaxed,
            operand_performance=tuple(
                OperandPerformance(p.type, FAST if p.type in fast else CPU)
                for p in reference.operand_performance
            ),
            if_performance=CPU,
            while_performance=CPU,
        )

    def get_capabilities(self) -> tuple[ErrorStatus, Capabilities]:
        """``getCapabilities_1_3``: the driver's own tensor types are fast."""
        return ErrorStatus.NONE, self._partial_capabilities


PARTIAL_RULES: dict[str, SupportRule] = {
    "partial-float": FLOAT_RULE,
    "partial-quant": QUANT_RULE,
    "partial-minimal": MINIMAL_RULE,
}


def partial_factory(name: str) -> Callable[[], PartialDevice]:
    """The factory the registry uses for ``name`` (a key of :data:`PARTIAL_RULES`)."""
    rule = PARTIAL_RULES[name]

    def make() -> PartialDevice:
        return PartialDevice(name, rule)

    make.__doc__ = f"The reference restricted as {name!r} (driver/drivers/partial.py)."
    return make
