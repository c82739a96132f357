"""Hypothesis strategies for valid NNAPI models.

    from hypothesis import given
    from randomgraph.strategies import valid_models

    @given(valid_models(max_operations=3))
    def test_driver_agrees(graph):
        ...  # graph is a randomgraph.generator.GeneratedGraph

Every decision the generator makes is a Hypothesis ``integers(0, n - 1)`` draw
(:class:`randomgraph.choices.HypothesisSource`), and 0 is the simplest choice everywhere
(the first operation, the newest HAL version, one operation, the smallest dims, no
optional feature, the first signature). So Hypothesis shrinks a failing graph towards
fewer and simpler operations, and every shrunk graph is still valid. The number of
operations is itself a choice in ``[1, max_operations]``.

Tensor values are one 64-bit draw per tensor (expanded by a counter-based generator),
which keeps graphs inside Hypothesis's buffer; they shrink to the values of seed 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st

from driver.hal.types import HalVersion, OperandType, OperationType
from randomgraph.choices import HypothesisSource
from randomgraph.generator import GeneratedGraph, GeneratorConfig, generate_with, resolve_config


class _Draws:
    """Adapts a composite strategy's ``draw`` to what HypothesisSource expects."""

    __slots__ = ("draw",)

    def __init__(self, draw):
        self.draw = draw


def _names(values, enum) -> frozenset | None:
    if values is None:
        return None
    out = set()
    for v in values:
        out.add(enum[v] if isinstance(v, str) else enum(v))
    return frozenset(out)


def valid_models(
    preset: str | GeneratorConfig = "small",
    *,
    max_operations: int = 3,
    max_dim: int | None = None,
    operations: Iterable[OperationType | str] | None = None,
    data_types: Iterable[OperandType | str] | None = None,
    ranks: Iterable[int] | None = None,
    versions: Iterable[HalVersion | str] | None = None,
    **overrides,
) -> st.SearchStrategy[GeneratedGraph]:
    """Valid generated models (:class:`GeneratedGraph`), 1 to ``max_operations``
    operations in the main graph, optionally filtered by operation, data type, rank of
    the primary input and HAL version. Dims default to at most 10 (small graphs keep
    Hypothesis fast); ``max_dim`` or a preset's fields (``overrides``) change that."""
    vs = None
    if versions is not None:
        vs = tuple(
            sorted(v if isinstance(v, HalVersion) else HalVersion.parse(v) for v in versions)
        )
    config = resolve_config(
        preset,
        num_ops=max_operations,
        min_ops=1,
        max_dim=max_dim if max_dim is not None else 10,
        operations=_names(operations, OperationType),
        data_types=_names(data_types, OperandType),
        ranks=None if ranks is None else frozenset(ranks),
        versions=vs,
        sweep=False,
        **overrides,
    )

    @st.composite
    def _graphs(draw) -> GeneratedGraph:
        return generate_with(HypothesisSource(_Draws(draw)), config, name="hypothesis")

    return _graphs()


__all__ = ["valid_models"]
