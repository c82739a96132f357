"""A model as a Graphviz graph, like Android's ``graphDump`` (``GraphDump.h``).

    dot_text = graph_dump(model, "my_model")      # then: dot -Tsvg model.dot > model.svg

Operands are boxes labelled with their index, lifetime (``input[k]``, ``output[k]``,
``COPY``, ``REF``, ``NO`` value, ``SUBGRAPH`` reference; temporaries say nothing), type
(Android's short names such as ``TF32`` or ``TQ8A``, the enum name otherwise, and
``extension:NAME`` for extension types the model maps), dimensions (``?`` for an unknown
dimension), quantization parameters, and the value of scalar constants. Model inputs
and outputs are filled black, as Android draws them. Operations are ellipses labelled
with their index and type; an edge into an operation is labelled with the input
position, an edge out of it with the output position, when there is more than one.
Every subgraph is a cluster (``main``, ``subgraph 0``, ...) and a SUBGRAPH operand has a
dashed edge to the cluster it names (IF branches, WHILE condition and body).

It dumps *any* model, valid or not: an index out of range becomes an edge to a node
that is not declared (Graphviz draws it with its bare name), an unknown code is shown
as a number. Nothing is validated and nothing raises for a model whose fields have
their declared Python types.
"""

from __future__ import annotations

import struct

from driver.extensions import ModelTypes
from driver.hal.types import (
    Model,
    OperandLifeTime,
    OperandType,
    Subgraph,
    SymmPerChannelQuantParams,
    is_extension_type,
)

T = OperandType
L = OperandLifeTime

SHORT_TYPE_NAMES = {
    T.FLOAT32: "F32",
    T.INT32: "I32",
    T.UINT32: "U32",
    T.TENSOR_FLOAT32: "TF32",
    T.TENSOR_INT32: "TI32",
    T.TENSOR_QUANT8_ASYMM: "TQ8A",
    T.OEM: "OEM",
    T.TENSOR_OEM_BYTE: "TOEMB",
}
"""Android's ``translate(OperandType)`` abbreviations; other types show their name."""

_SCALAR_FORMATS = {T.FLOAT32: "<f", T.INT32: "<i", T.UINT32: "<I", T.BOOL: "<B", T.FLOAT16: "<e"}
_QUANT_TYPES = {
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_QUANT8_SYMM,
    T.TENSOR_QUANT16_ASYMM,
    T.TENSOR_QUANT16_SYMM,
}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _type_label(types: ModelTypes, code: int) -> str:
    if code in SHORT_TYPE_NAMES:
        return SHORT_TYPE_NAMES[code]
    if is_extension_type(code):
        name = types.operand_type_name(code)
        return f"extension:{name}" if ":" in name else name
    try:
        return OperandType(code).name
    except ValueError:
        return f"type {code}"


def _dims_label(dims: tuple[int, ...]) -> str:
    if not dims:
        return ""
    return "(" + "x".join(str(d) if d else "?" for d in dims) + ")"


def _scalar_value(model: Model, operand) -> str | None:
    """The value of a CONSTANT_COPY scalar of a standard type, as text."""
    fmt = _SCALAR_FORMATS.get(operand.type)
    loc = operand.location
    if fmt is None or operand.lifetime != L.CONSTANT_COPY:
        return None
    size = struct.calcsize(fmt)
    if loc.length != size or not 0 <= loc.offset <= len(model.operand_values) - size:
        return None
    (value,) = struct.unpack_from(fmt, model.operand_values, loc.offset)
    if operand.type == T.BOOL:
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _operand_label(model: Model, sg: Subgraph, types: ModelTypes, index: int) -> str:
    o = sg.operands[index]
    lifetime = o.lifetime
    head = str(index)
    if lifetime == L.SUBGRAPH_INPUT:
        head += f": input[{_position(sg.input_indexes, index)}]"
    elif lifetime == L.SUBGRAPH_OUTPUT:
        head += f": output[{_position(sg.output_indexes, index)}]"
    elif lifetime == L.CONSTANT_COPY:
        head += ": COPY"
    elif lifetime == L.CONSTANT_REFERENCE:
        head += ": REF"
    elif lifetime == L.NO_VALUE:
        head += ": NO"
    elif lifetime == L.SUBGRAPH:
        head += f": SUBGRAPH {o.location.offset}"
    elif lifetime != L.TEMPORARY_VARIABLE:
        head += f": lifetime {int(lifetime)}"
    lines = [head, _type_label(types, o.type) + _dims_label(tuple(o.dimensions))]
    if o.type in _QUANT_TYPES or o.scale or o.zero_point:
        lines.append(f"scale {o.scale:g}, zeroPoint {o.zero_point}")
    extra = o.extra_params
    if isinstance(extra, SymmPerChannelQuantParams):
        lines.append(f"per-channel dim {extra.channel_dim}, {len(extra.scales)} scales")
    elif isinstance(extra, bytes):
        lines.append(f"extension data {len(extra)} bytes")
    value = _scalar_value(model, o)
    if value is not None:
        lines[1] += f" = {value}"
    return "\n".join(lines)


def _position(indexes: tuple[int, ...], index: int) -> str:
    return ",".join(str(k) for k, i in enumerate(indexes) if i == index) or "?"


def _subgraph_lines(
    model: Model, sg: Subgraph, prefix: str, title: str, types: ModelTypes
) -> tuple[list[str], list[str]]:
    """The cluster's lines, and the cross-cluster edges (drawn after every cluster)."""
    out = [f"    subgraph cluster_{prefix} {{", f'        label="{_escape(title)}";']
    cross: list[str] = []
    io = set(sg.input_indexes) | set(sg.output_indexes)
    for i, o in enumerate(sg.operands):
        style = " style=filled fillcolor=black fontcolor=white" if i in io else ""
        label = _escape(_operand_label(model, sg, types, i))
        out.append(f'        {prefix}_d{i} [shape=box{style} label="{label}"];')
        if o.lifetime == L.SUBGRAPH and 0 <= o.location.offset < len(model.referenced):
            k = o.location.offset
            cross.append(
                f"    {prefix}_d{i} -> s{k}_anchor [lhead=cluster_s{k} style=dashed arrowhead=empty];"
            )
    for j, op in enumerate(sg.operations):
        arity = max(len(op.inputs), len(op.outputs))
        ordering = ""
        if arity > 1:
            ordering = " ordering=in" if arity == len(op.inputs) else " ordering=out"
        name = _escape(types.operation_type_name(op.type))
        out.append(f'        {prefix}_n{j} [shape=ellipse{ordering} label="{j}: {name}"];')
        for k, i in enumerate(op.inputs):
            label = f" [label={k}]" if len(op.inputs) > 1 else ""
            out.append(f"        {prefix}_d{i} -> {prefix}_n{j}{label};")
        for k, i in enumerate(op.outputs):
            label = f" [label={k}]" if len(op.outputs) > 1 else ""
            out.append(f"        {prefix}_n{j} -> {prefix}_d{i}{label};")
    # The target of edges into this cluster (lhead clips them at its border).
    out.append(f"        {prefix}_anchor [shape=point style=invis];")
    out.append("    }")
    return out, cross


def graph_dump(model: Model, name: str = "model", *, types: ModelTypes | None = None) -> str:
    """The Graphviz (dot) text of ``model``."""
    types = types if types is not None else ModelTypes(model)
    lines = [
        f"// nnfuzz graph dump: {_escape(name)}",  # a newline in it would end the comment
        f'digraph "{_escape(name)}" {{',
        "    compound=true;",
        '    node [fontname="Helvetica"];',
    ]
    if model.relax_computation_float32_to_float16:
        lines.append('    label="relaxComputationFloat32toFloat16";')
    cross: list[str] = []
    main_lines, main_cross = _subgraph_lines(model, model.main, "m", "main", types)
    lines += main_lines
    cross += main_cross
    for k, sg in enumerate(model.referenced):
        sg_lines, sg_cross = _subgraph_lines(model, sg, f"s{k}", f"subgraph {k}", types)
        lines += sg_lines
        cross += sg_cross
    lines += cross
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["SHORT_TYPE_NAMES", "graph_dump"]
