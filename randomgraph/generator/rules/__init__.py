"""Generation rules, one module per operation family (mirroring ``driver/operations``).

Each module keeps a ``RULES`` table (operation type -> rule); :data:`FAMILIES` lists the
modules explicitly and :data:`RULES` merges them. To add a family: write
``rules/<family>.py`` with its ``RULES`` and list it here.
"""

from __future__ import annotations

from types import ModuleType

from driver.hal.types import OperationType
from randomgraph.generator.core import Rule
from randomgraph.generator.rules import (
    activations,
    comparisons,
    control_flow,
    conv,
    detection,
    elementwise,
    fully_connected,
    lookup,
    lstm,
    normalization,
    pooling,
    quantization,
    random_ops,
    reduction,
    resize,
    rnn,
    shape,
    unary,
)

FAMILIES: tuple[ModuleType, ...] = (
    elementwise,
    activations,
    unary,
    comparisons,
    quantization,
    shape,
    reduction,
    lookup,
    conv,
    fully_connected,
    pooling,
    normalization,
    resize,
    lstm,
    rnn,
    detection,
    random_ops,
    control_flow,
)


def _merge() -> dict[int, Rule]:
    merged: dict[int, Rule] = {}
    for family in FAMILIES:
        for op, fn in family.RULES.items():
            if op in merged:
                raise RuntimeError(f"two rules for {OperationType(op).name}")
            merged[op] = fn
    return merged


RULES: dict[int, Rule] = _merge()
