"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, SVDF (``rnn.py``).

Weights are scaled by the sizes they sum over (input weights by 1/input size, recurrent
ones by 1/(2 units)), so a hidden state stays within 2 (|bias| + |input|) over any number
of steps and results can feed other operations."""

from __future__ import annotations

from randomgraph.generator.core import OpGen, Tensor
from randomgraph.generator.rules.base import O, T, magnitude, rule
from randomgraph.generator.values import Domain

RULES: dict = {}

_BOUND_INPUT = Domain(-2.0, 2.0, accept_lo=-4.0, accept_hi=4.0)


def _weights(g: OpGen, t: int, rows: int, cols: int, scale: float) -> Tensor:
    return g.fresh(t, (rows, cols), domain=Domain(-scale, scale))


def _cell(g: OpGen, t: int, n_input: int, units: int, n_batch: int) -> list[Tensor]:
    """weights, recurrent weights, bias, hidden state."""
    return [
        _weights(g, t, units, n_input, 1.0 / n_input),
        _weights(g, t, units, units, 0.5 / units),
        g.fresh(t, (units,), domain=Domain(-1.0, 1.0)),
        g.data(t, dims=(n_batch, units), domain=Domain(-1.0, 1.0, accept_lo=-4.0, accept_hi=4.0)),
    ]


_RELU1 = 2


def _activation(g: OpGen) -> int:
    """A FuseCode for RNN/UNIDIRECTIONAL_SEQUENCE_RNN/BIDIRECTIONAL_SEQUENCE_RNN, never
    RELU1: Android's RNN::RNNStep applies ``ActivationFunctor``, whose switch has no
    kActivationRelu1 case and aborts on it (the doc allows any FuseCode). RELU1 is drawn
    as before and read as RELU6, keeping the choice stream."""
    act = g.activation()
    return 3 if act == _RELU1 else act


def _bound(act: int, x: Tensor, cell: list[Tensor]) -> float:
    m = 2 * (1.0 + magnitude(x) + magnitude(cell[3]))
    return {0: m, 1: m, 2: 1.0, 3: 6.0}[act]


@rule(RULES, O.RNN)
def rnn(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, rank=2, primary=True, domain=_BOUND_INPUT)
    n_batch, n_input = x.dims
    cell = _cell(g, t, n_input, g.src.integer(1, 8), n_batch)
    act = _activation(g)
    b = _bound(act, x, cell)
    lo = 0.0 if act in (1, 3) else -b
    outs = [g.output(t, lo=lo, hi=b), g.output(t, lo=lo, hi=b)]
    return [x, *cell, g.scalar(T.INT32, act)], outs


@rule(RULES, O.UNIDIRECTIONAL_SEQUENCE_RNN)
def uni_rnn(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    x = g.data(t, rank=3, primary=True, domain=_BOUND_INPUT)
    time_major = g.src.boolean(0.5)
    n_batch = x.dims[1] if time_major else x.dims[0]
    cell = _cell(g, t, x.dims[2], g.src.integer(1, 8), n_batch)
    act = _activation(g)
    b = _bound(act, x, cell)
    lo = 0.0 if act in (1, 3) else -b
    outs = [g.output(t, lo=lo, hi=b) for _ in sig.outputs]
    return [x, *cell, g.scalar(T.INT32, act), g.scalar(T.INT32, int(time_major))], outs


@rule(RULES, O.BIDIRECTIONAL_SEQUENCE_RNN)
def bi_rnn(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    merge = len(sig.outputs) in (1, 3)
    x = g.data(t, rank=3, primary=True, domain=_BOUND_INPUT)
    time_major = g.src.boolean(0.5)
    n_batch = x.dims[1] if time_major else x.dims[0]
    n_input = x.dims[2]
    # Auxiliary input: none, cross-linked (with aux weights) or parallel (HAL 1.3).
    linking = g.src.choice(("none", "cross", "parallel") if g.version >= 13 else ("none", "cross"))
    aux_size = n_input if linking != "cross" else g.src.integer(1, 4)
    aux = None
    if linking != "none":
        aux = g.data(t, dims=(*x.dims[:2], aux_size), domain=_BOUND_INPUT)
    fw = _cell(g, t, n_input, g.src.integer(1, 6), n_batch)
    bw_input = aux_size if linking == "parallel" else n_input
    bw = _cell(g, t, bw_input, g.src.integer(1, 6), n_batch)
    if linking == "cross":
        fw_aux = _weights(g, t, fw[0].dims[0], aux_size, 1.0 / aux_size)
        bw_aux = _weights(g, t, bw[0].dims[0], aux_size, 1.0 / aux_size)
    else:
        fw_aux, bw_aux = g.omitted(t), g.omitted(t)
    act = _activation(g)
    ins = [x, *fw, *bw, aux if aux is not None else g.omitted(t), fw_aux, bw_aux]
    ins += [g.scalar(T.INT32, act), g.scalar(T.BOOL, time_major), g.scalar(T.BOOL, merge)]
    b = max(_bound(act, x, fw), _bound(act, aux or x, bw)) * 2
    lo = 0.0 if act in (1, 3) else -b
    return ins, [g.output(t, lo=lo, hi=b) for _ in sig.outputs]


@rule(RULES, O.SVDF)
def svdf(g: OpGen):
    t = g.signature().inputs[0]
    x = g.data(t, rank=2, primary=True, domain=_BOUND_INPUT)
    n_batch, n_input = x.dims
    rank = g.src.integer(1, 3)
    units = g.src.integer(1, 4)
    filters = rank * units
    memory = g.src.integer(1, 4)
    wf = _weights(g, t, filters, n_input, 1.0 / n_input)
    wt = _weights(g, t, filters, memory, 1.0 / memory)
    bias = g.fresh(t, (units,), domain=Domain(-1.0, 1.0)) if g.src.boolean(0.7) else g.omitted(t)
    state = g.data(
        t, dims=(n_batch, memory * filters), domain=Domain(-1.0, 1.0, accept_lo=-4.0, accept_hi=4.0)
    )
    act = g.activation()
    m = (magnitude(x) + magnitude(state)) * rank + 1.0
    lo, hi = g.activation_bounds(act, -m, m)
    ins = [x, wf, wt, bias, state, g.scalar(T.INT32, rank), g.scalar(T.INT32, act)]
    sm = max(magnitude(x), magnitude(state))
    return ins, [g.output(t, lo=-sm, hi=sm), g.output(t, lo=lo, hi=hi)]
