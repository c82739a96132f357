"""IF and WHILE (``control_flow.py``), with generated subgraphs.

IF
    The then-branch is grown by the generator itself from the IF's data inputs (any
    operation, control flow included while the nesting bound allows); the else-branch
    has the same structure with its drawn constants permuted, so the branches compute
    different values of the same types. The condition is a TENSOR_BOOL8 [1] from the
    graph or fresh.
WHILE
    A counter (TENSOR_INT32 [1], starting in [0, 2]) is compared with a constant bound,
    so the loop runs at most a few times; the body adds one to the counter and maps each
    carried tensor to a tensor of exactly its type, shape and quantization through a
    short chain of shape-preserving operations (sometimes an IF inside the body, whose
    condition compares the counter: nested control flow). Without carried tensors the
    bound is passed in as an input-only operand.

Subgraph operands are ordered so that a dumped spec reloads identically: inputs are
first used in their positional order (unused ones last), outputs are produced in order.

Every IF/WHILE operand, outer or inner, input or output, is declared with its full shape:
Android 11 rejects a control-flow operand of unknown size in a driver's model
(``validateControlFlowOperandUnknownSize`` in ``Utils.cpp``'s ``validateIfOperation`` /
``validateWhileOperation``; ``ValidateHal.cpp`` allows it only in RUNTIME mode: "1.3 HAL
does not support CF operations with operands of unknown size"), though the doc allows
it. So the rules pick only fully declared tensors as outer inputs, make no branch output
whose size only the kernel knows, and undo the random unknown-dims declaration
(``Generator.finish``) on subgraph outputs and on the operations' own outputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from randomgraph.choices import bulk_words
from randomgraph.generator.core import Graph, Kind, OpGen, Tensor
from randomgraph.generator.rules.base import O, T, is_quant, require, rule
from randomgraph.generator.values import Domain

RULES: dict = {}

_CARRIED_TYPES = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
_IF_TYPES = (*_CARRIED_TYPES, T.TENSOR_BOOL8)


def _inner(t: Tensor) -> Tensor:
    """The subgraph input standing for outer tensor ``t``."""
    return Tensor(
        t.type,
        t.dims,
        Kind.INPUT,
        t.scale,
        t.zero_point,
        t.channel_quant,
        lo=t.lo,
        hi=t.hi,
        exact=t.exact,
    )


def _outer(inner: Tensor) -> Tensor:
    """An outer output with ``inner``'s type, shape and quantization."""
    t = Tensor(
        inner.type,
        inner.dims,
        Kind.TEMP,
        inner.scale,
        inner.zero_point,
        inner.channel_quant,
        lo=inner.lo,
        hi=inner.hi,
        chainable=inner.chainable and inner.dims is not None,
        exact=False,
    )
    if inner.dims is None:
        t.declared = inner.declared
    return t


def _fully_declared(t: Tensor) -> bool:
    """Whether ``t`` is declared with its whole shape (a valid control-flow operand)."""
    return t.declared is None


def _declare_sized(ts) -> None:
    """Declare each tensor with its true (known) dims: it becomes a control-flow operand,
    which Android needs fully sized (module docstring)."""
    for t in ts:
        if t.dims is not None:
            t.declared = None


def _pick_type(g: OpGen, choices) -> int:
    """A data type for a control-flow operand (within the data-type filter), often one
    the graph already has (so the operation connects)."""
    if g.config.data_types is not None:
        choices = [t for t in choices if t in g.config.data_types]
        require(bool(choices), "data-type filter")
    present = [t for t in choices if g.graph.candidates(t)]
    if present and g.src.boolean(0.7):
        return g.src.choice(present)
    return g.src.choice(choices)


def _order_inputs(sub: Graph) -> None:
    """Subgraph inputs in first-use order, unused ones last."""
    used: list[Tensor] = []
    for op in sub.ops:
        for t in op.inputs:
            if t.kind == Kind.INPUT and t not in used:
                used.append(t)
    sub.inputs = used + [t for t in sub.inputs if t not in used]


def _first_use_outputs(sub: Graph) -> list[Tensor]:
    return [t for op in sub.ops for t in op.outputs if t.consumers == 0 or not t.chainable]


def _clone(sub: Graph, src, depth: int) -> Graph:
    """The same structure with every drawn constant's values permuted (bulk, one choice
    per tensor) and nested subgraphs cloned likewise."""
    mapping: dict[int, Tensor] = {}

    def copy(t: Tensor) -> Tensor:
        c = mapping.get(id(t))
        if c is not None:
            return c
        c = Tensor(
            t.type,
            t.dims,
            t.kind,
            t.scale,
            t.zero_point,
            t.channel_quant,
            t.value,
            t.by_reference,
            t.declared,
            t.lo,
            t.hi,
            t.chainable,
            t.exact,
            None if t.subgraph is None else _clone(t.subgraph, src, depth + 1),
            t.consumers,
            t.output,
            t.ignored,
            t.drawn,
        )
        if t.kind == Kind.CONST and t.drawn and t.value is not None and t.value.size > 1:
            flat = t.value.reshape(-1)
            order = np.argsort(bulk_words(src.word(), flat.size), kind="stable")
            c.value = flat[order].reshape(t.value.shape)
        mapping[id(t)] = c
        return c

    new = Graph(depth=depth, inputs=[copy(t) for t in sub.inputs])
    for op in sub.ops:
        new.ops.append(
            type(op)(
                op.type,
                [copy(t) for t in op.inputs],
                [copy(t) for t in op.outputs],
                op.dtype_key,
                op.rank,
            )
        )
    new.outputs = [copy(t) for t in sub.outputs]
    return new


@rule(RULES, O.IF)
def if_(g: OpGen):
    gen = g.gen
    depth = g.graph.depth + 1
    require(depth <= g.config.control_flow_depth, "nesting bound")
    outer_ins = []
    for k in range(g.src.integer(1, 3)):
        t = _pick_type(g, _IF_TYPES)
        outer_ins.append(g.data(t, ranks=(1, 4), primary=k == 0, accept=_fully_declared))
    then = Graph(depth=depth, inputs=[_inner(t) for t in outer_ins])
    pairs = dict(zip(map(id, then.inputs), outer_ins))
    gen.grow(then, gen.subgraph_operations(depth), g.src.integer(1, g.config.subgraph_ops))
    require(bool(then.ops), "empty branch")
    _order_inputs(then)
    then.outputs = _first_use_outputs(then)
    require(bool(then.outputs), "branch without outputs")
    require(all(t.dims is not None for t in then.outputs), "branch output of unknown size")
    _declare_sized(then.outputs)
    else_ = _clone(then, g.src, depth)
    cond = g.data(T.TENSOR_BOOL8, dims=(1,), accept=_fully_declared)
    g.primary_type = outer_ins[0].type
    ins = [cond, g.subgraph(then), g.subgraph(else_)] + [pairs[id(t)] for t in then.inputs]
    outs = [_outer(t) for t in then.outputs]
    for o, a, b in zip(outs, then.outputs, else_.outputs):
        o.lo, o.hi = min(a.lo, b.lo), max(a.hi, b.hi)
    return _control_flow(g, ins, outs)


def _control_flow(g: OpGen, ins, outs) -> None:
    """IF/WHILE skip the declaration hooks here (they need the finished model); the
    subgraphs are valid by construction and the whole model is validated by tests."""
    g.gen.finish(g, list(ins), list(outs))
    _declare_sized(outs)  # finish may have declared them of unknown size


# ---------------------------------------------------------------------------------------
# WHILE
# ---------------------------------------------------------------------------------------

Bounds = tuple[float, float]
Step = Callable[[OpGen, Graph, Tensor], tuple[Tensor, Callable[[Bounds], Bounds]]]


def _op(g: OpGen, graph: Graph, op_type: int, make) -> list[Tensor]:
    """Make one operation in ``graph`` with ``make(opgen) -> (ins, outs)``, checked by
    its declaration's hooks."""
    sub = OpGen(g.gen, graph, op_type)
    ins, outs = make(sub)
    g.gen.commit(sub, list(ins), list(outs))
    return outs


def _same_spec_output(h: OpGen, x: Tensor, lo: float, hi: float) -> Tensor:
    out = h.output(x.type, quant=(x.scale, x.zero_point), lo=lo, hi=hi)
    out.dims = x.dims
    return out


def _step_add(g: OpGen, graph: Graph, x: Tensor):
    """x + c (c small, broadcast), no activation."""
    op = g.src.choice((O.ADD, O.SUB))
    t = x.type
    c_dom = Domain(-1.0, 1.0) if t != T.TENSOR_INT32 else Domain(-2, 2)

    def make(h: OpGen):
        c_dims = x.dims if h.src.boolean(0.5) else (1,)
        c = h.fresh(t, c_dims, domain=c_dom, const=True)
        m = max(abs(c.lo), abs(c.hi))
        return [x, c, h.scalar(T.INT32, 0)], [_same_spec_output(h, x, x.lo - m, x.hi + m)]

    (out,) = _op(g, graph, op, make)
    m = out.hi - x.hi
    return out, lambda b: (b[0] - m, b[1] + m)


def _step_scale(g: OpGen, graph: Graph, x: Tensor):
    """x * c with |c| <= 1 (quantized: the output scale exceeds the product, as
    mulQuant8 needs)."""
    t = x.type

    def make(h: OpGen):
        if is_quant(t):
            c = h.fresh(t, (1,), quant=(h.src.real(0.1, 0.9), h.qparams(t)[1]), const=True)
        elif t == T.TENSOR_INT32:
            c = h.fresh(t, (1,), domain=Domain(-1, 1), const=True)
        else:
            c = h.fresh(t, (1,), domain=Domain(-1.0, 1.0), const=True)
        m = max(abs(x.lo), abs(x.hi))
        return [x, c, h.scalar(T.INT32, 0)], [_same_spec_output(h, x, -m, m)]

    (out,) = _op(g, graph, O.MUL, make)
    return out, lambda b: (-max(abs(b[0]), abs(b[1])), max(abs(b[0]), abs(b[1])))


def _step_clamp(g: OpGen, graph: Graph, x: Tensor):
    """MAXIMUM/MINIMUM with a constant, or RELU1 (float and quantized)."""
    t = x.type
    if t != T.TENSOR_INT32 and g.src.boolean(0.3):

        def make_relu(h: OpGen):
            return [x], [_same_spec_output(h, x, max(x.lo, -1.0), min(x.hi, 1.0))]

        (out,) = _op(g, graph, O.RELU1, make_relu)
        return out, lambda b: (max(min(b[0], 1.0), -1.0), min(max(b[1], -1.0), 1.0))
    op = g.src.choice((O.MAXIMUM, O.MINIMUM))

    def make(h: OpGen):
        quant = (x.scale, x.zero_point) if is_quant(t) else None
        dom = Domain(-1.0, 1.0) if t != T.TENSOR_INT32 else Domain(-3, 3)
        c = h.fresh(t, (1,), quant=quant, domain=dom, const=True)
        lo, hi = (
            (max(x.lo, c.lo), max(x.hi, c.hi))
            if op == O.MAXIMUM
            else (
                min(x.lo, c.lo),
                min(x.hi, c.hi),
            )
        )
        return [x, c], [_same_spec_output(h, x, lo, hi)]

    (out,) = _op(g, graph, op, make)
    return out, lambda b: (min(b[0], out.lo), max(b[1], out.hi))


def _chain(g: OpGen, graph: Graph, x: Tensor, counter: Tensor | None, allow_if: bool):
    """A short chain of shape-preserving steps from ``x``: (result, bounds function)."""
    fns = []
    cur = x
    for _ in range(g.src.integer(1, 2)):
        if allow_if and counter is not None and g.src.boolean(0.25):
            cur, fn = _nested_if(g, graph, cur, counter)
        else:
            step = g.src.choice((_step_add, _step_scale, _step_clamp))
            cur, fn = step(g, graph, cur)
        fns.append(fn)

    def bounds(b: Bounds) -> Bounds:
        for fn in fns:
            b = fn(b)
        return b

    return cur, bounds


def _nested_if(g: OpGen, graph: Graph, x: Tensor, counter: Tensor):
    """IF (counter < k) then chain(x) else chain'(x), inside a WHILE body."""
    depth = graph.depth + 1
    if depth > g.config.control_flow_depth:
        return _step_clamp(g, graph, x)

    def make_cond(h: OpGen):
        k = h.fresh(T.TENSOR_INT32, (1,), values=[h.src.integer(0, 3)], const=True)
        return [counter, k], [h.output(T.TENSOR_BOOL8, dims=(1,), exact=True)]

    (cond,) = _op(g, graph, O.LESS, make_cond)
    _declare_sized([x])  # an earlier step's output, now an IF input
    then = Graph(depth=depth, inputs=[_inner(x)])
    inner_out, fn_then = _chain(g, then, then.inputs[0], None, False)
    _declare_sized([inner_out])
    then.outputs = [inner_out]
    else_ = _clone(then, g.src, depth)
    h = OpGen(g.gen, graph, O.IF)
    out = _outer(inner_out)
    out.dims, out.declared = x.dims, None
    ins = [cond, h.subgraph(then), h.subgraph(else_), x]
    lo, hi = fn_then((x.lo, x.hi))
    out.lo, out.hi = min(lo, x.lo), max(hi, x.hi)
    h.primary_type = x.type
    g.gen.finish(h, ins, [out])
    _declare_sized([out])
    return out, lambda b: (min(fn_then(b)[0], b[0]), max(fn_then(b)[1], b[1]))


@rule(RULES, O.WHILE)
def while_(g: OpGen):
    depth = g.graph.depth + 1
    require(depth <= g.config.control_flow_depth, "nesting bound")
    start = g.data(
        T.TENSOR_INT32,
        dims=(1,),
        domain=Domain(0, 2, accept_lo=0, accept_hi=2, stable=True),
        primary=False,
        accept=_fully_declared,
    )
    require(math.isfinite(start.lo) and start.lo >= 0, "counter start")
    trips = g.src.integer(0, 3)
    bound_value = int(start.hi) + trips
    carried = []
    # With a data-type filter a carried tensor of that type is what the loop is about.
    least = 0 if g.config.data_types is None else 1
    for k in range(g.src.integer(least, 2)):
        t = _pick_type(g, _CARRIED_TYPES)
        carried.append(g.data(t, ranks=(1, 4), primary=k == 0, accept=_fully_declared))
    input_only = not carried
    bound_outer = None
    if input_only:
        bound_outer = g.fresh(T.TENSOR_INT32, (1,), values=[bound_value], const=True)
    outer_vals = [start, *carried] + ([bound_outer] if bound_outer is not None else [])

    # Condition: counter < bound.
    cond = Graph(depth=depth, inputs=[_inner(t) for t in outer_vals])
    c_counter = cond.inputs[0]
    cmp = g.src.choice((O.LESS, O.GREATER, O.LESS_EQUAL))

    def make_cmp(h: OpGen):
        if bound_outer is not None and cmp == O.LESS:
            b = cond.inputs[-1]
        else:
            v = bound_value - 1 if cmp == O.LESS_EQUAL else bound_value
            b = h.fresh(T.TENSOR_INT32, (1,), values=[v], const=True)
        pair = [b, c_counter] if cmp == O.GREATER else [c_counter, b]
        return pair, [h.output(T.TENSOR_BOOL8, dims=(1,), exact=True)]

    (flag,) = _op(g, cond, cmp, make_cmp)
    cond.outputs = [flag]

    # Body: counter + 1, then each carried tensor through a shape-preserving chain.
    body = Graph(depth=depth, inputs=[_inner(t) for t in outer_vals])
    b_counter = body.inputs[0]

    def make_inc(h: OpGen):
        one = h.fresh(T.TENSOR_INT32, (1,), values=[1], const=True)
        nxt = h.output(T.TENSOR_INT32, dims=(1,), lo=b_counter.lo + 1, hi=b_counter.hi + 1)
        return [b_counter, one, h.scalar(T.INT32, 0)], [nxt]

    (counter_next,) = _op(g, body, O.ADD, make_inc)
    outs_inner = [counter_next]
    bound_fns = []
    for x in body.inputs[1 : 1 + len(carried)]:
        y, fn = _chain(g, body, x, b_counter, allow_if=True)
        outs_inner.append(y)
        bound_fns.append(fn)
    _declare_sized(outs_inner)
    body.outputs = outs_inner

    outs = [_outer(start)]
    outs[0].lo, outs[0].hi = start.lo, float(bound_value)
    max_trips = bound_value - int(start.lo)
    for x, fn in zip(carried, bound_fns):
        o = _outer(x)
        lo, hi = x.lo, x.hi
        b = (x.lo, x.hi)
        for _ in range(max(max_trips, 0)):
            b = fn(b)
            lo, hi = min(lo, b[0]), max(hi, b[1])
        o.lo, o.hi = lo, hi
        o.dims, o.declared = x.dims, None
        outs.append(o)
    g.primary_type = (carried[0] if carried else start).type
    ins = [g.subgraph(cond), g.subgraph(body), *outer_vals]
    return _control_flow(g, ins, outs)
