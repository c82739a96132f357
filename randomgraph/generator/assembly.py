"""From generated graphs to a HAL model (``driver.builder.ModelBuilder``) and its inputs.

Orders are chosen so that a dumped spec (:func:`randomgraph.spec.dumper.dump_spec`)
loads back to the identical model:

* operands of every subgraph in first-use order (walking the operations, inputs before
  outputs), subgraph inputs no operation reads last, in their positional order;
* model inputs and outputs in operand order (the spec format lists them so);
* referenced subgraphs in first-reference order, depth first, as Android's test
  generator numbers them (each SUBGRAPH operand, in operand order, names the next
  unnumbered subgraph, whose own references are numbered before its siblings').
"""

from __future__ import annotations

from driver.builder import ModelBuilder, SubgraphBuilder
from driver.hal.types import Model, OperandType, is_scalar_type
from randomgraph.generator.core import Graph, Kind, Tensor

T = OperandType


def operand_order(graph: Graph) -> list[Tensor]:
    """The graph's tensors in first-use order (then unused subgraph inputs/outputs)."""
    seen: dict[int, Tensor] = {}
    for op in graph.ops:
        for t in op.inputs:
            seen.setdefault(id(t), t)
        for t in op.outputs:
            seen.setdefault(id(t), t)
    for t in graph.inputs:
        seen.setdefault(id(t), t)
    for t in graph.outputs:
        seen.setdefault(id(t), t)
    return list(seen.values())


def referenced_order(main: Graph) -> list[Graph]:
    order: list[Graph] = []
    known: set[int] = set()

    def visit(graph: Graph) -> None:
        for t in operand_order(graph):
            if t.kind == Kind.SUBGRAPH and t.subgraph is not None and id(t.subgraph) not in known:
                known.add(id(t.subgraph))
                order.append(t.subgraph)
                visit(t.subgraph)

    visit(main)
    return order


def choose_main_outputs(main: Graph, src, output_p: float) -> None:
    """Unconsumed results (and those that may not feed anything) become model outputs;
    a consumed result also does with probability ``output_p``."""
    for t in main.produced():
        t.output = t.consumers == 0 or not t.chainable or (output_p > 0 and src.boolean(output_p))
    main.outputs = [t for t in operand_order(main) if t.output and t.kind == Kind.TEMP]


def build_model(main: Graph, relaxed: bool) -> tuple[Model, list, list[int]]:
    """The HAL model, the example inputs of its main subgraph (model input order) and
    the operand indexes of main outputs whose values are unspecified (not compared)."""
    b = ModelBuilder(relaxed=relaxed)
    graphs = [main, *referenced_order(main)]
    builders: list[SubgraphBuilder] = [b] + [b.new_subgraph() for _ in graphs[1:]]
    sub_index = {id(g): k for k, g in enumerate(graphs[1:])}
    main_inputs: list = []
    ignored: list[int] = []
    for graph, sb in zip(graphs, builders):
        index: dict[int, int] = {}
        order = operand_order(graph)
        in_ids = {id(t) for t in graph.inputs} if graph.is_subgraph else set()
        for t in order:
            if t.kind == Kind.CONST:
                if is_scalar_type(t.type):
                    i = sb.add_scalar(t.type, t.value)
                else:
                    i = sb.add_constant(
                        t.type,
                        t.dims,
                        t.value,
                        by_reference=t.by_reference,
                        scale=t.scale,
                        zero_point=t.zero_point,
                        channel_quant=t.channel_quant,
                    )
            elif t.kind == Kind.OMITTED:
                i = sb.add_omitted(t.type, t.declared_dims, scale=t.scale, zero_point=t.zero_point)
            elif t.kind == Kind.SUBGRAPH:
                i = sb.add_subgraph_operand(builders[1 + sub_index[id(t.subgraph)]])
            else:
                dims = t.declared_dims
                if id(t) in in_ids:
                    dims = t.declared_dims
                i = sb.add_operand(
                    t.type,
                    dims,
                    scale=t.scale,
                    zero_point=t.zero_point,
                    channel_quant=t.channel_quant,
                )
            index[id(t)] = i
        for op in graph.ops:
            sb.add_operation(
                op.type, [index[id(t)] for t in op.inputs], [index[id(t)] for t in op.outputs]
            )
        if graph.is_subgraph:
            ins = [index[id(t)] for t in graph.inputs]
        else:
            model_inputs = [t for t in order if t.kind == Kind.INPUT]
            ins = [index[id(t)] for t in model_inputs]
            main_inputs = [t.value for t in model_inputs]
            ignored = [index[id(t)] for t in graph.outputs if t.ignored]
        outs = [index[id(t)] for t in graph.outputs]
        sb.identify_inputs_and_outputs(ins, outs)
    return b.build(), main_inputs, ignored
