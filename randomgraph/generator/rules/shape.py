"""Shape and data-movement operations (``shape.py``): RESHAPE, SQUEEZE, EXPAND_DIMS,
TRANSPOSE, CONCATENATION, SPLIT, SLICE, STRIDED_SLICE, PAD, PAD_V2, TILE, GATHER, FILL,
RANK, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
CHANNEL_SHUFFLE.

They move values, so outputs keep their input's quantization (the declarations demand
it) and are exact whenever their input is."""

from __future__ import annotations

from driver.hal.types import HalVersion
from randomgraph.generator.core import OpGen, Tensor
from randomgraph.generator.rules.base import (
    O,
    T,
    axis_value,
    is_quant,
    quant_range,
    require,
    rule,
    scalar_of,
)
from randomgraph.generator.values import Domain

RULES: dict = {}

I32 = T.TENSOR_INT32


def _moved(g: OpGen, t: int, x: Tensor, *, lo: float | None = None, hi: float | None = None):
    """An output carrying ``x``'s values (and quantization)."""
    return g.output(
        t,
        quant=(x.scale, x.zero_point),
        lo=x.lo if lo is None else lo,
        hi=x.hi if hi is None else hi,
        exact=x.exact,
    )


def _layout(g: OpGen, sig, position: int) -> tuple[list[Tensor], bool]:
    """The optional trailing BOOL layout input (NCHW when true)."""
    if len(sig.inputs) > position and sig.inputs[position] == T.BOOL:
        nchw = g.src.boolean(0.5)
        return [g.scalar(T.BOOL, nchw)], nchw
    return [], False


def factorize(g: OpGen, n: int, rank: int) -> list[int]:
    """``n`` split into ``rank`` factors (prime factors dealt to random positions)."""
    dims = [1] * rank
    p = 2
    m = n
    while m > 1 and p * p <= m:
        while m % p == 0:
            dims[g.src.integer(0, rank - 1)] *= p
            m //= p
        p += 1
    if m > 1:
        dims[g.src.integer(0, rank - 1)] *= m
    return dims


@rule(RULES, O.RESHAPE)
def reshape(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    target = factorize(g, x.elements, g.src.integer(1, 4))
    if g.src.boolean(0.3):
        target[g.src.integer(0, len(target) - 1)] = -1
    shape = g.const(I32, (len(target),), target)
    return [x, shape], [_moved(g, t, x)]


@rule(RULES, O.SQUEEZE)
def squeeze(g: OpGen):
    t = g.signature().inputs[0]
    if g.src.boolean(0.5):
        r = g.rank(1, 4)
        pattern = [1 if g.src.boolean(0.4) else None for _ in range(r)]
        x = g.data(t, dims=pattern, primary=True)
    else:
        x = g.data(t, ranks=(1, 4), primary=True)
    ones = [k for k, d in enumerate(x.dims) if d == 1]
    if g.src.boolean(0.3) and len(ones) < len(x.dims):
        axes = g.omitted(I32)  # squeeze every size-1 dimension
    else:
        chosen = [k for k in ones if g.src.boolean(0.6)]
        if len(chosen) == len(x.dims):
            chosen = chosen[:-1]
        require(bool(chosen), "nothing to squeeze")
        values = [k - len(x.dims) if g.src.boolean(0.2) else k for k in chosen]
        axes = g.const(I32, (len(values),), values)
    return [x, axes], [_moved(g, t, x)]


@rule(RULES, O.EXPAND_DIMS)
def expand_dims(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    r = len(x.dims)
    axis = g.src.integer(-(r + 1), r)
    return [x, g.scalar(T.INT32, axis)], [_moved(g, t, x)]


@rule(RULES, O.TRANSPOSE)
def transpose(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    r = len(x.dims)
    # An omitted perm only on a matrix: Android's Transpose.cpp reads it as the 2-D
    # transpose and fails other ranks at run time, while the reference (like numpy)
    # reverses any rank; drivers may follow either.
    if g.src.boolean(0.2) and r == 2:
        perm = g.omitted(I32)
    else:
        order = list(range(r))
        g.src.shuffle(order)
        perm = g.const(I32, (r,), order)
    return [x, perm], [_moved(g, t, x)]


@rule(RULES, O.CONCATENATION)
def concatenation(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    r = len(x.dims)
    axis = g.src.integer(0, r - 1)
    same = is_quant(t) and (g.version < 12 or g.src.boolean(0.5))
    quant = (x.scale, x.zero_point) if same else None
    parts = [x]
    for _ in range(g.src.integer(0, 2)):
        pattern = [None if k == axis else d for k, d in enumerate(x.dims)]
        parts.append(g.data(t, dims=pattern, quant=quant))
    if len(parts) > 1 and g.src.boolean(0.3):
        g.src.shuffle(parts)
    lo, hi = g.bounds(*parts)
    out_quant = quant if quant is not None else g.qparams(t)
    if is_quant(t) and quant is None and g.src.boolean(0.3):
        out_quant = (x.scale, x.zero_point)
    out = g.output(t, quant=out_quant, lo=lo, hi=hi, exact=same and g.all_exact(*parts))
    return [*parts, g.scalar(T.INT32, axis)], [out]


@rule(RULES, O.SPLIT)
def split(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    r = len(x.dims)
    axis = axis_value(g, r)
    d = x.dims[axis % r]
    count = g.src.choice([k for k in range(1, min(d, 4) + 1) if d % k == 0])
    outs = [_moved(g, t, x) for _ in range(count)]
    return [x, g.scalar(T.INT32, axis), g.scalar(T.INT32, count)], outs


@rule(RULES, O.SLICE)
def slice_(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    begin, size = [], []
    for d in x.dims:
        b = g.src.integer(0, d - 1)
        n = g.src.integer(1, d - b)
        begin.append(b)
        size.append(-1 if n == d - b and g.src.boolean(0.3) else n)
    r = len(x.dims)
    return [x, g.const(I32, (r,), begin), g.const(I32, (r,), size)], [_moved(g, t, x)]


@rule(RULES, O.STRIDED_SLICE)
def strided_slice(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    begin, end, strides = [], [], []
    begin_mask = end_mask = shrink = 0
    for k, d in enumerate(x.dims):
        if g.src.boolean(0.2):
            # Backwards: begin at or after end, negative stride.
            s = -g.src.integer(1, 2)
            b = g.src.integer(0, d - 1)
            e = g.src.integer(-1, b - 1) if b > 0 else -1
            if e == -1:
                end_mask |= 1 << k  # "to the start" (an end of -1 would mean the last)
                e = 0
        else:
            s = g.src.integer(1, 3)
            b = g.src.integer(0, d - 1)
            e = g.src.integer(b + 1, d)
            if (e - b + s - 1) // s == 1 and g.src.boolean(0.3):
                shrink |= 1 << k
        if g.src.boolean(0.15):
            begin_mask |= 1 << k
        if b and g.src.boolean(0.2):
            b -= d  # negative index form
        begin.append(b)
        end.append(e)
        strides.append(s)
    r = len(x.dims)
    ins = [
        x,
        g.const(I32, (r,), begin),
        g.const(I32, (r,), end),
        g.const(I32, (r,), strides),
        g.scalar(T.INT32, begin_mask),
        g.scalar(T.INT32, end_mask),
        g.scalar(T.INT32, shrink),
    ]
    return ins, [_moved(g, t, x)]


def _zero_padding_quant(g: OpGen, t: int) -> tuple[float, int] | None:
    """Quantization for an input that PAD/SPACE_TO_BATCH_ND pad with its logical zero:
    before HAL 1.2 a QUANT8_ASYMM one must have zero point 0 (the byte they pad with)."""
    if t == T.TENSOR_QUANT8_ASYMM and g.version < HalVersion.V1_2:
        return g.qparams(t)[0], 0
    return None


@rule(RULES, O.PAD, O.PAD_V2)
def pad(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    quant = _zero_padding_quant(g, t) if g.op == O.PAD else None
    x = g.data(t, ranks=(1, 4), primary=True, quant=quant)
    r = len(x.dims)
    pads = [g.src.integer(0, 2) for _ in range(2 * r)]
    paddings = g.const(I32, (r, 2), pads)
    ins = [x, paddings]
    if g.op == O.PAD_V2:
        if is_quant(t):
            lo, hi = quant_range(t)
            v = g.src.integer(lo, hi)
            real = (v - x.zero_point) * x.scale
        else:
            v = real = g.src.choice((0.0, 1.0, -1.5, 0.25))
        ins.append(g.scalar(sig.inputs[2] if len(sig.inputs) > 2 else scalar_of(t), v))
    else:
        real = 0.0
        if is_quant(t):
            real = 0.0  # pads with the logical zero (the zero point)
    return ins, [_moved(g, t, x, lo=min(x.lo, real), hi=max(x.hi, real))]


@rule(RULES, O.TILE)
def tile(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    budget = g.max_elements // max(x.elements, 1)
    multiples = []
    for _ in x.dims:
        m = g.src.integer(1, max(1, min(3, budget)))
        budget //= m
        multiples.append(m)
    return [x, g.const(I32, (len(multiples),), multiples)], [_moved(g, t, x)]


@rule(RULES, O.GATHER)
def gather(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 4), primary=True)
    r = len(x.dims)
    axis = axis_value(g, r)
    d = x.dims[axis % r]
    # The output replaces the axis with the index shape: keep it within the bound.
    rest = max(1, x.elements // d)
    budget = max(1, g.max_elements // rest)
    s = g.solver()
    idx = s.tensor(g.src.integer(1, 2), hi=min(g.max_dim, budget))
    s.prod_le(idx, budget)
    s.solve()
    idx_dims = tuple(v.value for v in idx)
    indices = g.fresh(I32, idx_dims, domain=Domain(0, d - 1))
    return [x, g.scalar(T.INT32, axis), indices], [_moved(g, t, x)]


@rule(RULES, O.FILL)
def fill(g: OpGen):
    sig = g.signature()
    t, st = sig.outputs[0], sig.inputs[1]
    dims = g.dims(g.rank(1, 4))
    if st == T.INT32:
        v = g.src.integer(-10, 10)
    else:
        v = g.src.choice((0.0, 1.0, -2.5, 0.125, 3.0))
    ins = [g.const(I32, (len(dims),), list(dims)), g.scalar(st, v)]
    return ins, [g.output(t, lo=v, hi=v, exact=True)]


@rule(RULES, O.RANK)
def rank(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, ranks=(1, 5), primary=True)
    r = float(len(x.dims))
    return [x], [g.output(T.INT32, lo=r, hi=r, chainable=False, exact=True)]


# --- NHWC/NCHW block operations -----------------------------------------------------


def _nhwc(dims, nchw: bool) -> tuple[int, int, int, int]:
    return (dims[0], dims[2], dims[3], dims[1]) if nchw else tuple(dims)


def _layout_dims(n: int, h: int, w: int, c: int, nchw: bool) -> tuple[int, ...]:
    return (n, c, h, w) if nchw else (n, h, w, c)


def _block_input(g: OpGen, t: int, nchw: bool, ok, make) -> Tensor:
    """A rank-4 input whose NHWC view satisfies ``ok``; fresh ones from ``make``."""
    return g.data(
        t,
        rank=4,
        primary=True,
        accept=lambda c: ok(*_nhwc(c.dims, nchw)),
        make=lambda: _layout_dims(*make(), nchw),
    )


def _nhwc_dims(g: OpGen, *, h_mul: int = 1, w_mul: int = 1, c_mul: int = 1, n_mul: int = 1):
    """NHWC dims with each dim a multiple of the given factor, within the bounds."""
    s = g.solver()
    n, h, w, c = (s.var() for _ in range(4))
    dims = []
    for v, k in ((n, n_mul), (h, h_mul), (w, w_mul), (c, c_mul)):
        if k > 1:
            q = s.var()
            s.mul(v, k, q)
        dims.append(v)
    s.prod_le(dims)
    s.solve()
    return tuple(v.value for v in dims)


@rule(RULES, O.DEPTH_TO_SPACE, O.SPACE_TO_DEPTH)
def depth_space(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    layout, nchw = _layout(g, sig, 2)
    bs = g.src.integer(1, 3)
    if g.op == O.DEPTH_TO_SPACE:
        x = _block_input(
            g,
            t,
            nchw,
            lambda n, h, w, c: c % (bs * bs) == 0,
            lambda: _nhwc_dims(g, c_mul=bs * bs),
        )
    else:
        x = _block_input(
            g,
            t,
            nchw,
            lambda n, h, w, c: h % bs == 0 and w % bs == 0,
            lambda: _nhwc_dims(g, h_mul=bs, w_mul=bs),
        )
    return [x, g.scalar(T.INT32, bs), *layout], [_moved(g, t, x)]


@rule(RULES, O.BATCH_TO_SPACE_ND)
def batch_to_space(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    layout, nchw = _layout(g, sig, 2)
    bh, bw = g.src.integer(1, 3), g.src.integer(1, 3)
    x = _block_input(
        g,
        t,
        nchw,
        lambda n, h, w, c: n % (bh * bw) == 0,
        lambda: _nhwc_dims(g, n_mul=bh * bw),
    )
    return [x, g.const(I32, (2,), [bh, bw]), *layout], [_moved(g, t, x)]


@rule(RULES, O.SPACE_TO_BATCH_ND)
def space_to_batch(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    layout, nchw = _layout(g, sig, 3)
    bh, bw = g.src.integer(1, 3), g.src.integer(1, 3)
    x = g.data(t, rank=4, primary=True, quant=_zero_padding_quant(g, t))
    _, h, w, _ = _nhwc(x.dims, nchw)
    # Paddings that make the padded height and width multiples of the block.
    top = g.src.integer(0, 2)
    bottom = (-(h + top)) % bh + bh * g.src.integer(0, 1)
    left = g.src.integer(0, 2)
    right = (-(w + left)) % bw
    pads = g.const(I32, (2, 2), [top, bottom, left, right])
    lo, hi = min(x.lo, 0.0), max(x.hi, 0.0)
    return [x, g.const(I32, (2,), [bh, bw]), pads, *layout], [_moved(g, t, x, lo=lo, hi=hi)]


@rule(RULES, O.CHANNEL_SHUFFLE)
def channel_shuffle(g: OpGen):
    t = g.signature().inputs[0]
    groups = g.src.integer(1, 4)
    x = g.data(t, ranks=(1, 4), primary=True, accept=lambda c: any(d % groups == 0 for d in c.dims))
    r = len(x.dims)
    axes = [k for k, d in enumerate(x.dims) if d % groups == 0]
    require(bool(axes), "no axis divisible by the group count")
    axis = g.src.choice(axes)
    if g.src.boolean(0.3):
        axis -= r
    return [x, g.scalar(T.INT32, groups), g.scalar(T.INT32, axis)], [_moved(g, t, x)]
