"""Hypothesis strategies: valid models for a HAL version, their requests, invalid mutations.

    from nnfuzz_pytest.strategies import valid_models, model_mutations, request_mutations

    @given(case=valid_models(HalVersion.V1_2))
    def test_my_driver(case): ...

A :class:`Case` is a valid model plus the input values of one request. Until the
random-graph generator's public strategy (``randomgraph.strategies.valid_models``) is in
the tree, :func:`valid_models` draws one-operation models over the families below, built
for the asked HAL version (types, layouts and parameters that version has), with values
that keep every result finite. Everything shrinks towards rank 1, size-1 dimensions, the
first listed operation and type, and zeros.

================  ======================================================================
elementwise       ADD, MUL (1.0), SUB, DIV (1.1): float32, quant8, float16 (1.2),
                  quant8 signed (1.3); broadcasting (size-1 and missing dims); every
                  fused activation
activation        RELU, RELU1, RELU6, LOGISTIC, TANH
conv              CONV_2D with explicit padding and strides (optionally the 1.2 layout)
pooling           AVERAGE_POOL_2D, MAX_POOL_2D with explicit padding (and layout)
fully_connected   FULLY_CONNECTED
reshape           RESHAPE (a constant target shape, possibly with -1)
softmax           SOFTMAX
concatenation     CONCATENATION of two or three tensors
================  ======================================================================
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from driver.builder import ModelBuilder
from driver.hal.types import (
    HalError,
    HalVersion,
    Model,
    OperandLifeTime,
    Request,
    is_scalar_type,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations.base import storage_dtype

V = HalVersion
L = OperandLifeTime
F32, F16, Q8, S8, I32 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
    T.TENSOR_INT32,
)
QUANT8 = (Q8, S8)
MAX_ELEMENTS = 64


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Case:
    """A valid model and the inputs of one request (storage dtypes; None = omitted)."""

    model: Model
    inputs: tuple[np.ndarray | None, ...]
    ignored: frozenset[int] = frozenset()  # output positions whose values are not compared
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def operation_types(self) -> list[int]:
        return [op.type for op in self.model.main.operations]

    def expected(self) -> list[np.ndarray]:
        """The reference's outputs (computed once)."""
        if "expected" not in self._cache:
            from driver.executor import Executor

            self._cache["expected"] = Executor(self.model).run(list(self.inputs))
        return self._cache["expected"]

    def __repr__(self) -> str:
        return describe(self.model, self.inputs)

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's "Falsifying example"
        printer.text(repr(self))


def _type_label(o) -> str:
    try:
        name = T(o.type).name
    except ValueError:
        name = str(o.type)
    text = f"{name}{list(o.dimensions)}" if not is_scalar_type(o.type) else name
    if o.scale or o.zero_point:
        text += f" scale={float(np.float32(o.scale))!r} zp={o.zero_point}"
    return text


def _values_text(arr: np.ndarray | None, limit: int = 16) -> str:
    if arr is None:
        return "omitted"
    flat = np.asarray(arr).reshape(-1)
    items = [repr(v.item()) for v in flat[:limit]]
    more = f", ... ({flat.size} values)" if flat.size > limit else ""
    return ("[" + ", ".join(items) + more + "]") if np.ndim(arr) else items[0] if items else "[]"


def describe(model: Model, inputs: Sequence[np.ndarray | None] = ()) -> str:
    """A readable one-model summary: operations with their operands and values (what a
    failing example prints)."""
    from driver.validation import read_constant

    main = model.main
    feeds = dict(zip(main.input_indexes, inputs))
    lines = []
    for op in main.operations:
        args = []
        for i in op.inputs:
            o = main.operands[i]
            if o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                try:
                    value = _values_text(read_constant(model, o))
                except Exception:  # a mutated model: show what we can
                    value = "?"
                args.append(f"#{i} const {_type_label(o)} = {value}")
            elif o.lifetime == L.SUBGRAPH_INPUT:
                args.append(f"#{i} input {_type_label(o)} = {_values_text(feeds.get(i))}")
            elif o.lifetime == L.NO_VALUE:
                args.append(f"#{i} omitted")
            else:
                args.append(f"#{i} {_type_label(o)}")
        outs = ", ".join(f"#{i} {_type_label(main.operands[i])}" for i in op.outputs)
        try:
            name = O(op.type).name
        except ValueError:
            name = str(op.type)
        lines.append(f"{name}({', '.join(args)}) -> {outs}")
    relaxed = " relaxed" if model.relaxed else ""
    return f"<model{relaxed}: " + "; ".join(lines) + ">"


# ---------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------

# (operand type, HAL version that introduced it for most operations)
TYPE_VERSIONS = {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3}


def _types(draw, version: HalVersion, allowed: Sequence[int], only: Collection[int] | None):
    choices = [t for t in allowed if TYPE_VERSIONS[t] <= version and (only is None or t in only)]
    assume(choices)
    return draw(st.sampled_from(choices))


def _shape(
    draw, min_rank: int = 1, max_rank: int = 4, max_dim: int = 6, max_elements: int = MAX_ELEMENTS
) -> tuple[int, ...]:
    """A shape of at most ``max_elements`` elements (each dimension bounded by what the
    earlier ones leave)."""
    rank = draw(st.integers(min_rank, max_rank))
    dims: list[int] = []
    left = max_elements
    for _ in range(rank):
        d = draw(st.integers(1, max(1, min(max_dim, left))))
        dims.append(d)
        left //= d
    return tuple(dims)


def _values(draw, type_code: int, shape: Sequence[int], *, lo=-2.0, hi=2.0, nonzero=False):
    n = math.prod(shape)
    if type_code in (F32, F16):
        width = 16 if type_code == F16 else 32
        if nonzero:
            mag = st.floats(0.25, hi, width=width)
            elem = st.tuples(st.booleans(), mag).map(lambda a: -a[1] if a[0] else a[1])
        else:
            elem = st.floats(lo, hi, width=width)
    elif type_code == Q8:
        elem = st.integers(0, 255)
    elif type_code == S8:
        elem = st.integers(-128, 127)
    elif type_code == I32:
        elem = st.integers(-100, 100)
    else:  # pragma: no cover - not generated
        raise ValueError(type_code)
    vals = draw(st.lists(elem, min_size=n, max_size=n))
    return np.asarray(vals, dtype=storage_dtype(type_code)).reshape(tuple(shape))


_SCALES = st.sampled_from([0.5, 0.25, 1.0, 0.1, 0.0625, 2.0, 0.0078125, 0.3])


def _quant(draw, type_code: int) -> dict:
    if type_code == Q8:
        return {"scale": draw(_SCALES), "zero_point": draw(st.integers(0, 255))}
    if type_code == S8:
        return {"scale": draw(_SCALES), "zero_point": draw(st.integers(-128, 127))}
    return {}


def _finish(b: ModelBuilder, feeds: list, version: HalVersion) -> Case:
    from driver.validation import validate_model

    model = b.build()
    try:
        validate_model(model, version)
    except HalError:
        assume(False)
    return Case(model, tuple(feeds))


def _tensor_in(draw, b, type_code, shape, q, *, const_p: float = 0.0, **vkw):
    """A tensor operand with values: a model input, or (with probability ``const_p``) a
    constant. Returns (index, value or None if constant)."""
    value = _values(draw, type_code, shape, **vkw)
    if const_p and draw(st.booleans()):
        return b.add_constant(type_code, shape, value, **q), None
    return b.add_input(type_code, shape, **q), value


# ---------------------------------------------------------------------------------------
# Families
# ---------------------------------------------------------------------------------------


def _broadcast_partner(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with ``shape``: a suffix, some dims replaced by 1."""
    keep = draw(st.integers(1, len(shape)))
    partner = list(shape[len(shape) - keep :])
    for k in range(len(partner)):
        if draw(st.integers(0, 3)) == 0:
            partner[k] = 1
    return tuple(partner)


ELEMENTWISE = {  # op -> {type: minimum HAL version}
    O.ADD: {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3},
    O.MUL: {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3},
    O.SUB: {F32: V.V1_1, Q8: V.V1_2, F16: V.V1_2, S8: V.V1_3},
    O.DIV: {F32: V.V1_1, F16: V.V1_2},
}


def _elementwise(draw, version, ops, only):
    op = draw(st.sampled_from([o for o in ELEMENTWISE if o in ops]))
    allowed = [t for t, v in ELEMENTWISE[op].items() if v <= version]
    t = _types(draw, version, allowed, only)
    a_shape = _shape(draw)
    b_shape = a_shape if draw(st.booleans()) else _broadcast_partner(draw, a_shape)
    if draw(st.booleans()):
        a_shape, b_shape = b_shape, a_shape
    out_shape = tuple(np.broadcast_shapes(a_shape, b_shape))
    assume(math.prod(out_shape) <= MAX_ELEMENTS)
    b = ModelBuilder()
    qa, qb, qo = _quant(draw, t), _quant(draw, t), _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, a_shape, qa)
    y, yv = _tensor_in(draw, b, t, b_shape, qb, const_p=0.5, nonzero=op == O.DIV)
    act = b.add_scalar(T.INT32, draw(st.integers(0, 3)))
    out = b.add_output(t, out_shape, **qo)
    b.add_operation(op, [x, y, act], [out])
    return _finish(b, [v for v in (xv, yv) if v is not None], version)


ACTIVATIONS = {
    O.RELU: {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3},
    O.RELU1: {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3},
    O.RELU6: {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3},
    O.LOGISTIC: {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3},
    O.TANH: {F32: V.V1_0, Q8: V.V1_2, F16: V.V1_2, S8: V.V1_3},
}
_FIXED_OUTPUT_QUANT = {  # Android requires these output parameters
    (O.LOGISTIC, Q8): (1 / 256, 0),
    (O.LOGISTIC, S8): (1 / 256, -128),
    (O.TANH, Q8): (1 / 128, 128),
    (O.TANH, S8): (1 / 128, 0),
}


def _activation(draw, version, ops, only):
    op = draw(st.sampled_from([o for o in ACTIVATIONS if o in ops]))
    allowed = [t for t, v in ACTIVATIONS[op].items() if v <= version]
    t = _types(draw, version, allowed, only)
    shape = _shape(draw)
    b = ModelBuilder()
    q = _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, shape, q, lo=-4.0, hi=4.0)
    fixed = _FIXED_OUTPUT_QUANT.get((op, t))
    qo = {"scale": fixed[0], "zero_point": fixed[1]} if fixed else q
    out = b.add_output(t, shape, **qo)
    b.add_operation(op, [x], [out])
    return _finish(b, [xv], version)


def _bias_quant(t: int, q_in: dict, q_filter: dict) -> dict:
    if t in QUANT8:
        return {"scale": q_in["scale"] * q_filter["scale"], "zero_point": 0}
    return {}


def _bias_values(draw, t: int, n: int) -> np.ndarray:
    if t in QUANT8:
        return np.asarray(draw(st.lists(st.integers(-64, 64), min_size=n, max_size=n)), np.int32)
    return _values(draw, t, (n,), lo=-1.0, hi=1.0)


def _layout_flag(draw, b: ModelBuilder, version: HalVersion, layout: bool | None) -> list[int]:
    """The optional NHWC layout scalar (HAL 1.2): always with ``layout=True``, never
    before 1.2, else drawn."""
    if version < V.V1_2 or layout is False:
        return []
    if layout or draw(st.booleans()):
        return [b.add_scalar(T.BOOL, False)]
    return []


CONV_TYPES = {F32: V.V1_0, Q8: V.V1_0, F16: V.V1_2, S8: V.V1_3}


def _spatial(draw, max_hw: int = 6):
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))
    c = draw(st.integers(1, 3))
    return n, h, w, c


def _padding_and_strides(draw, h, w, kh, kw):
    pads = [draw(st.integers(0, 2)) for _ in range(4)]  # left, right, top, bottom
    sw, sh = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    oh = (h + pads[2] + pads[3] - kh) // sh + 1
    ow = (w + pads[0] + pads[1] - kw) // sw + 1
    assume(oh >= 1 and ow >= 1)
    return pads, sw, sh, oh, ow


def _conv(draw, version, ops, only, layout):
    t = _types(draw, version, list(CONV_TYPES), only)
    n, h, w, c = _spatial(draw)
    d = draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pads, sw, sh, oh, ow = _padding_and_strides(draw, h, w, kh, kw)
    assume(n * h * w * c <= MAX_ELEMENTS and n * oh * ow * d <= MAX_ELEMENTS)
    b = ModelBuilder()
    q_in, q_f, q_out = _quant(draw, t), _quant(draw, t), _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, (n, h, w, c), q_in)
    filt = b.add_constant(t, (d, kh, kw, c), _values(draw, t, (d, kh, kw, c), lo=-1, hi=1), **q_f)
    bias_t = I32 if t in QUANT8 else t
    bias = b.add_constant(bias_t, (d,), _bias_values(draw, t, d), **_bias_quant(t, q_in, q_f))
    scalars = [b.add_scalar(T.INT32, v) for v in (*pads, sw, sh, draw(st.integers(0, 3)))]
    extra = _layout_flag(draw, b, version, layout)
    out = b.add_output(t, (n, oh, ow, d), **q_out)
    b.add_operation(O.CONV_2D, [x, filt, bias, *scalars, *extra], [out])
    return _finish(b, [xv], version)


def _pool(draw, version, ops, only, layout):
    op = draw(st.sampled_from([o for o in (O.AVERAGE_POOL_2D, O.MAX_POOL_2D) if o in ops]))
    t = _types(draw, version, list(CONV_TYPES), only)
    n, h, w, c = _spatial(draw)
    fh, fw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pads, sw, sh, oh, ow = _padding_and_strides(draw, h, w, fh, fw)
    assume(all(p < f for p, f in zip(pads, (fw, fw, fh, fh))))  # no all-padding windows
    assume(n * h * w * c <= MAX_ELEMENTS)
    b = ModelBuilder()
    q = _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, (n, h, w, c), q)
    scalars = [b.add_scalar(T.INT32, v) for v in (*pads, sw, sh, fw, fh, draw(st.integers(0, 3)))]
    extra = _layout_flag(draw, b, version, layout)
    out = b.add_output(t, (n, oh, ow, c), **q)
    b.add_operation(op, [x, *scalars, *extra], [out])
    return _finish(b, [xv], version)


def _fully_connected(draw, version, ops, only):
    t = _types(draw, version, list(CONV_TYPES), only)
    batch, n_in, units = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 4))
    b = ModelBuilder()
    q_in, q_w, q_out = _quant(draw, t), _quant(draw, t), _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, (batch, n_in), q_in)
    weights = b.add_constant(t, (units, n_in), _values(draw, t, (units, n_in), lo=-1, hi=1), **q_w)
    bias_t = I32 if t in QUANT8 else t
    bias = b.add_constant(
        bias_t, (units,), _bias_values(draw, t, units), **_bias_quant(t, q_in, q_w)
    )
    act = b.add_scalar(T.INT32, draw(st.integers(0, 3)))
    out = b.add_output(t, (batch, units), **q_out)
    b.add_operation(O.FULLY_CONNECTED, [x, weights, bias, act], [out])
    return _finish(b, [xv], version)


def _factor(draw, total: int) -> tuple[int, ...]:
    dims = []
    rest = total
    for _ in range(draw(st.integers(0, 3))):
        divisors = [k for k in range(1, rest + 1) if rest % k == 0]
        k = draw(st.sampled_from(divisors))
        dims.append(k)
        rest //= k
    dims.append(rest)
    return tuple(dims)


def _reshape(draw, version, ops, only):
    t = _types(draw, version, list(CONV_TYPES), only)
    shape = _shape(draw)
    assume(math.prod(shape) <= MAX_ELEMENTS)
    target = _factor(draw, math.prod(shape))
    spec = list(target)
    if draw(st.booleans()):
        spec[draw(st.integers(0, len(spec) - 1))] = -1
    b = ModelBuilder()
    q = _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, shape, q)
    s = b.add_constant(I32, (len(spec),), spec)
    out = b.add_output(t, target, **q)
    b.add_operation(O.RESHAPE, [x, s], [out])
    return _finish(b, [xv], version)


def _softmax(draw, version, ops, only):
    t = _types(draw, version, list(CONV_TYPES), only)
    shape = _shape(draw, 2, 2) if version < V.V1_2 else _shape(draw, 1, 4)
    assume(math.prod(shape) <= MAX_ELEMENTS)
    b = ModelBuilder()
    q = _quant(draw, t)
    x, xv = _tensor_in(draw, b, t, shape, q)
    beta_type = T.FLOAT16 if t == F16 else T.FLOAT32
    beta = b.add_scalar(beta_type, draw(st.sampled_from([1.0, 0.5, 2.0, 0.1])))
    qo = {Q8: {"scale": 1 / 256, "zero_point": 0}, S8: {"scale": 1 / 256, "zero_point": -128}}
    out = b.add_output(t, shape, **qo.get(t, {}))
    b.add_operation(O.SOFTMAX, [x, beta], [out])
    return _finish(b, [xv], version)


def _concatenation(draw, version, ops, only):
    t = _types(draw, version, list(CONV_TYPES), only)
    base = _shape(draw, 1, 4, 4)
    axis = draw(st.integers(0, len(base) - 1))
    count = draw(st.integers(2, 3))
    shapes = []
    for _ in range(count):
        s = list(base)
        s[axis] = draw(st.integers(1, 3))
        shapes.append(tuple(s))
    out_shape = list(base)
    out_shape[axis] = sum(s[axis] for s in shapes)
    assume(math.prod(out_shape) <= MAX_ELEMENTS)
    b = ModelBuilder()
    q = _quant(draw, t)
    idx, feeds = [], []
    for s in shapes:
        i, v = _tensor_in(draw, b, t, s, q, const_p=0.5)
        idx.append(i)
        if v is not None:
            feeds.append(v)
    assume(feeds)
    ax = b.add_scalar(T.INT32, axis)
    out = b.add_output(t, tuple(out_shape), **q)
    b.add_operation(O.CONCATENATION, [*idx, ax], [out])
    return _finish(b, feeds, version)


FAMILIES = {
    "elementwise": (tuple(ELEMENTWISE), _elementwise),
    "activation": (tuple(ACTIVATIONS), _activation),
    "conv": ((O.CONV_2D,), _conv),
    "pooling": ((O.AVERAGE_POOL_2D, O.MAX_POOL_2D), _pool),
    "fully_connected": ((O.FULLY_CONNECTED,), _fully_connected),
    "reshape": ((O.RESHAPE,), _reshape),
    "softmax": ((O.SOFTMAX,), _softmax),
    "concatenation": ((O.CONCATENATION,), _concatenation),
}
LAYOUT_OPERATIONS = frozenset({O.CONV_2D, O.AVERAGE_POOL_2D, O.MAX_POOL_2D})
OPERATIONS = frozenset(op for ops, _ in FAMILIES.values() for op in ops)


def operation_types(op: int, version: HalVersion) -> list[int]:
    """The main tensor types the families may generate ``op`` with at ``version`` (a
    type the operation turns out not to take there gives no valid case)."""
    table = ELEMENTWISE.get(op) or ACTIVATIONS.get(op) or CONV_TYPES
    return [t for t, since in table.items() if since <= version and TYPE_VERSIONS[t] <= version]


def one_operation_models(
    version: HalVersion = V.V1_3,
    *,
    operations: Collection[int] | None = None,
    types: Collection[int] | None = None,
    layout: bool | None = None,
) -> st.SearchStrategy[Case]:
    """Valid one-operation :class:`Case` s for a driver of HAL ``version``.

    ``operations`` restricts the operation types, ``types`` the main tensor type
    (e.g. ``{TENSOR_QUANT8_ASYMM}``); ``layout=True`` gives only layout-capable
    operations with an explicit NHWC layout flag (HAL 1.2+)."""
    ops = set(OPERATIONS if operations is None else operations) & OPERATIONS
    if layout:
        ops &= LAYOUT_OPERATIONS
    only = None if types is None else set(types)
    if not ops:
        raise ValueError("no generated operation matches the restriction")
    choices = []
    for family_ops, make in FAMILIES.values():
        if not ops & set(family_ops):
            continue
        if make in (_conv, _pool):
            choices.append(st.composite(lambda draw, m=make: m(draw, version, ops, only, layout))())
        else:
            choices.append(st.composite(lambda draw, m=make: m(draw, version, ops, only))())
    return st.one_of(choices)


def generated_models(
    version: HalVersion = V.V1_3,
    *,
    operations: Collection[int] | None = None,
    max_operations: int = 3,
) -> st.SearchStrategy[Case] | None:
    """Graphs of the random-graph generator (``randomgraph.strategies.valid_models``:
    every operation and signature, 1 to ``max_operations`` operations, control flow)
    valid at ``version``, as :class:`Case` s; None when the generator is not available."""
    try:
        from randomgraph.strategies import valid_models as generator_models
    except ImportError:  # pragma: no cover - an older tree
        return None
    graphs = generator_models(
        max_operations=max_operations,
        operations=None if operations is None else sorted(operations),
        versions=[v for v in HalVersion if v <= version],
    )
    return graphs.map(case_of_graph)


def case_of_graph(graph) -> Case:
    """A :class:`Case` of a ``randomgraph.generator.GeneratedGraph``."""
    outputs = graph.model.main.output_indexes
    ignored = frozenset(k for k, i in enumerate(outputs) if i in set(graph.ignored_outputs))
    return Case(graph.model, tuple(graph.inputs), ignored)


def valid_models(
    version: HalVersion = V.V1_3, *, generator: bool = True, **kw
) -> st.SearchStrategy[Case]:
    """Valid models for a driver of HAL ``version``: the one-operation families of
    :func:`one_operation_models` (which take the keyword arguments) and, when
    ``generator`` and no ``types``/``layout`` restriction is asked, the random-graph
    generator's multi-operation graphs over all operations."""
    own = one_operation_models(version, **kw)
    if not generator or kw.get("types") is not None or kw.get("layout"):
        return own
    graphs = generated_models(version, operations=kw.get("operations"))
    return own if graphs is None else st.one_of(own, graphs)


# ---------------------------------------------------------------------------------------
# Requests and mutations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ModelMutation:
    """A model broken one way (``randomgraph.mutations``)."""

    family: str
    description: str
    model: Model
    preference: int
    priority: int

    def __repr__(self) -> str:
        return f"<{self.family}: {self.description}>"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


@dataclass(frozen=True, eq=False)
class RequestMutation:
    """A valid request broken one way, with the pools it refers to."""

    description: str
    request: Request
    bundle: object  # the RequestBundle holding the pools alive

    def __repr__(self) -> str:
        return f"<request: {self.description}>"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))


def model_mutations(case: Case, version: HalVersion = V.V1_3) -> st.SearchStrategy:
    """One VTS-style mutation of ``case.model`` that a driver of ``version`` must reject
    with INVALID_ARGUMENT (a :class:`ModelMutation`)."""
    from randomgraph.mutations import model_mutations as all_mutations

    found = [ModelMutation(*m) for m in all_mutations(case.model, version)]
    assume(found)
    return st.sampled_from(found)


def request_mutations(case: Case, version: HalVersion = V.V1_3) -> st.SearchStrategy:
    """One invalid request for ``case`` (a :class:`RequestMutation`); every execution
    path must reject it with INVALID_ARGUMENT."""
    from driver.builder import build_request
    from randomgraph.mutations import request_mutations as all_mutations

    bundle = build_request(case.model, list(case.inputs))
    found = [
        RequestMutation(what, req, bundle)
        for what, req in all_mutations(case.model, bundle.request)
    ]
    assume(found)
    return st.sampled_from(found)


def requests(case: Case) -> st.SearchStrategy:
    """Valid request bundles for ``case``: the case's inputs, with the output buffers
    exactly sized or oversized (builder ``RequestBundle``)."""
    from driver.builder import build_request
    from nnfuzz_pytest.harness import output_sizes_for

    exact = output_sizes_for(case.model, case.expected())
    return st.lists(st.integers(0, 64), min_size=len(exact), max_size=len(exact)).map(
        lambda extra: build_request(
            case.model, list(case.inputs), output_sizes=[n + e for n, e in zip(exact, extra)]
        )
    )


__all__ = [
    "FAMILIES",
    "OPERATIONS",
    "Case",
    "ModelMutation",
    "RequestMutation",
    "case_of_graph",
    "describe",
    "generated_models",
    "model_mutations",
    "one_operation_models",
    "operation_types",
    "request_mutations",
    "requests",
    "valid_models",
]
