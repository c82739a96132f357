"""Write a test model as a ``.mod.py`` spec that Android's test generator also accepts.

Floats are written as ``float.fromhex(...)`` so values are exact; the example carries
``DisableLifeTimeVariation()`` (the spec is one test, not a family); each driver's actual
results can be appended as a comment block, as Android's random-graph test does.

Loading the dump gives the same test model (:func:`load_spec`), with three documented
normalizations inherent in the format: ignored outputs' expected values become zeros,
inputs and outputs are listed in operand order, and operand names are made unique across
subgraphs.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from driver.hal.types import OperandLifeTime, OperandType
from randomgraph.testmodel import TestModel, TestOperand, TestSubgraph

L = OperandLifeTime
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DUMP_NAMES = frozenset(
    {
        *keyword.kwlist,  # True, None, in, ... cannot be assigned at all
        # The names the dump's own lines call: an operand's variable must not rebind one.
        *("Model", "Input", "Output", "IgnoredOutput", "Parameter", "Internal"),
        *("SubgraphReference", "SymmPerChannelQuantParams", "Example", "float"),
    }
)


def _fresh(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first not in ``taken`` (now taken)."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def _float(v: float) -> str:
    f = float(v)
    if math.isnan(f):
        return 'float("nan")'
    if math.isinf(f):
        return 'float("inf")' if f > 0 else 'float("-inf")'
    if f == int(f) and abs(f) < 2**53:
        if f == 0 and math.copysign(1.0, f) < 0:
            return "-0.0"  # int() drops the sign, which 1 / x or RSQRT would show
        return f"{int(f)}.0"  # exact and readable
    return f'float.fromhex("{f.hex()}")'


def _values(o: TestOperand, data: Sequence) -> str:
    if o.type in (OperandType.BOOL, OperandType.TENSOR_BOOL8):
        items = ["True" if bool(v) else "False" for v in data]
    elif o.type in (
        OperandType.FLOAT32,
        OperandType.FLOAT16,
        OperandType.TENSOR_FLOAT32,
        OperandType.TENSOR_FLOAT16,
    ):
        items = [_float(v) for v in data]
    else:
        items = [str(int(v)) for v in data]
    return "[" + ", ".join(items) + "]"


def _type_tuple(o: TestOperand) -> str:
    parts = [f'"{o.type.name}"', repr(list(o.dimensions))]
    if o.scale or o.zero_point:
        parts += [_float(o.scale), str(o.zero_point)]
    return "(" + ", ".join(parts) + ")"


def _extra(o: TestOperand) -> str:
    if o.channel_quant is None:
        return ""
    scales = ", ".join(_float(s) for s in o.channel_quant.scales)
    return f", extraParams=SymmPerChannelQuantParams(channelDim={o.channel_quant.channel_dim}, scales=[{scales}])"


def _first_use_order(sg: TestSubgraph) -> list[int]:
    seen: list[int] = []
    for op in sg.operations:
        for i in [*op.inputs, *op.outputs]:
            if i not in seen:
                seen.append(i)
    seen += [i for i in range(len(sg.operands)) if i not in seen]
    return seen


def dump_spec(
    test: TestModel,
    *,
    results: Mapping[str, Sequence[np.ndarray]] | None = None,
    header: str = "",
) -> str:
    """The spec text for ``test``; name the file ``<test.name>.mod.py`` so the loaded
    test keeps its name."""
    lines: list[str] = []
    if header:
        lines += [f"# {h}" if h else "#" for h in header.splitlines()]
    lines.append(
        f"# Test model {test.name!r}; replay with: nnfuzz replay <this file> --driver <name>"
    )
    subgraphs = [test.main, *test.referenced]
    model_vars = ["model"] + [f"sub{k}" for k in range(len(test.referenced))]
    # Operand names and the Python variables holding the operands: an operand may be
    # named "model", "float" or "in" (a spec may name it so), its variable may not.
    used: set[str] = set()
    variables: set[str] = {*model_vars, *_DUMP_NAMES}
    var_names: list[list[str]] = []
    op_names: list[list[str]] = []
    for s, sg in enumerate(subgraphs):
        vn, on = [], []
        for i, o in enumerate(sg.operands):
            name = _fresh(o.name if o.name and _IDENT.match(o.name) else f"op{i}", used)
            on.append(name)
            vn.append(_fresh(f"s{s}_{name}" if s else name, variables))
        var_names.append(vn)
        op_names.append(on)
    # Every model object exists before any SubgraphReference names one; the main model
    # is created last (and the example names it explicitly anyway).
    lines.append("")
    for s in range(1, len(subgraphs)):
        lines.append(f"{model_vars[s]} = Model({subgraphs[s].name!r})")
    lines.append("model = Model()")
    for s in [*range(1, len(subgraphs)), 0]:
        sg = subgraphs[s]
        mv = model_vars[s]
        lines.append("")
        for i, o in enumerate(sg.operands):
            v, name = var_names[s][i], op_names[s][i]
            if o.lifetime == L.SUBGRAPH_INPUT:
                lines.append(f"{v} = Input({name!r}, {_type_tuple(o)}{_extra(o)})")
            elif o.lifetime == L.SUBGRAPH_OUTPUT:
                cls = "IgnoredOutput" if o.is_ignored else "Output"
                lines.append(f"{v} = {cls}({name!r}, {_type_tuple(o)}{_extra(o)})")
            elif o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                lines.append(
                    f"{v} = Parameter({name!r}, {_type_tuple(o)}, {_values(o, o.data)}{_extra(o)})"
                )
                if o.lifetime == L.CONSTANT_REFERENCE:
                    lines.append(f'{v}.lifetime = "CONSTANT_REFERENCE"')
            elif o.lifetime == L.NO_VALUE:
                lines.append(f"{v} = Parameter({name!r}, {_type_tuple(o)}, None{_extra(o)})")
            elif o.lifetime == L.SUBGRAPH:
                lines.append(f"{v} = SubgraphReference({name!r}, {model_vars[1 + int(o.data[0])]})")
            else:
                lines.append(f"{v} = Internal({name!r}, {_type_tuple(o)}{_extra(o)})")
        if _first_use_order(sg) != list(range(len(sg.operands))):
            for i in range(len(sg.operands)):
                lines.append(f"{mv}.AddOperand({var_names[s][i]})")
        for op in sg.operations:
            ins = ", ".join(var_names[s][i] for i in op.inputs)
            outs = ", ".join(var_names[s][i] for i in op.outputs)
            lines.append(f'{mv}.Operation("{op.type.name}", {ins}).To({outs})')
        if s != 0:
            ins = ", ".join(var_names[s][i] for i in sorted(sg.input_indexes))
            outs = ", ".join(var_names[s][i] for i in sorted(sg.output_indexes))
            lines.append(f"{mv}.IdentifyInputs({ins})")
            lines.append(f"{mv}.IdentifyOutputs({outs})")
    main = test.main
    if test.is_relaxed:
        lines.append("model.RelaxedExecution(True)")
    if test.min_supported_version is not None and not test.is_relaxed:
        lines.append(f'model.IntroducedIn("{test.min_supported_version.name}")')
    lines.append("")
    ins = ", ".join(
        f"{var_names[0][i]}: {_values(main.operands[i], main.operands[i].data)}"
        for i in sorted(main.input_indexes)
    )
    outs = ", ".join(
        f"{var_names[0][i]}: {_values(main.operands[i], main.operands[i].data)}"
        for i in sorted(main.output_indexes)
    )
    call = f"Example(({{{ins}}}, {{{outs}}}), model=model).DisableLifeTimeVariation()"
    if test.expect_failure:
        call += ".ExpectFailure()"
    if test.multinomial_tolerance:
        call += f".WithMultinomialDistributionTolerance({test.multinomial_tolerance!r})"
    if not test.test_dynamic_output_shape:
        call += ".DisableDynamicOutputShapeVariation()"
    lines.append(call)
    for device, outputs in (results or {}).items():
        lines.append("")
        lines.append(f"# Results from {device}:")
        for k, arr in enumerate(outputs):
            text = np.array2string(np.asarray(arr).reshape(-1), threshold=10**6, max_line_width=96)
            for j, chunk in enumerate(text.splitlines()):
                lines.append(f"#   output {k}: {chunk}" if j == 0 else f"#   {chunk}")
    return "\n".join(lines) + "\n"
