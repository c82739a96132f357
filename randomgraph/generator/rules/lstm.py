"""LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, QUANTIZED_16BIT_LSTM,
QUANTIZED_LSTM (``lstm.py``).

Operand positions come from the declarations' own cell layouts (``LSTM_CELL``,
``UNI_CELL``, ``BI_FW``/``BI_BW``, ``QLSTM_CELL``); the rule chooses the features (CIFG,
peephole, projection with or without bias, layer normalization, auxiliary inputs) and
omits the inputs a feature does not use, so every optional-operand combination the
declarations accept comes up. Weights are small (|w| <= 0.6), so with a bounded cell
activation (tanh, sigmoid) outputs stay bounded and can feed other operations; the
scratch buffer's contents are unspecified and it is marked ignored."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from driver.operations.lstm import (
    BI_AUX_INPUT,
    BI_BW,
    BI_FW,
    LSTM_CELL,
    LSTM_CELL_LN,
    QLSTM_CELL,
    UNI_CELL,
    CellInputs,
)
from randomgraph.generator.core import OpGen, Tensor
from randomgraph.generator.rules.base import O, T, magnitude, rule
from randomgraph.generator.values import Domain

RULES: dict = {}

_W = Domain(-0.6, 0.6)
_STATE = Domain(-1.0, 1.0, accept_lo=-2.0, accept_hi=2.0)
_INPUT = Domain(-1.0, 1.0, accept_lo=-4.0, accept_hi=4.0)
_BOUNDED_ACTIVATIONS = (4, 6)


@dataclass(frozen=True)
class Features:
    cifg: bool
    peephole: bool
    projection: bool
    projection_bias: bool
    layer_norm: bool
    aux_weights: bool = False


def choose_features(g: OpGen, *, layer_norm_allowed: bool, aux_allowed: bool = False) -> Features:
    projection = g.src.boolean(0.4)
    return Features(
        cifg=g.src.boolean(0.4),
        peephole=g.src.boolean(0.4),
        projection=projection,
        projection_bias=projection and g.src.boolean(0.5),
        layer_norm=layer_norm_allowed and g.src.boolean(0.5),
        aux_weights=aux_allowed and g.src.boolean(0.5),
    )


def float_cell(
    g: OpGen,
    cell: CellInputs,
    t: int,
    f: Features,
    slots: dict[int, Tensor],
    n_batch: int,
    n_input: int,
    n_cell: int,
    n_output: int,
    aux_size: int | None = None,
) -> None:
    """Fill ``slots`` (input position -> tensor) with one direction's cell operands."""

    def present(shape) -> Tensor:
        return g.fresh(t, shape, domain=_W)

    for k in range(4):
        skip = k == 0 and f.cifg
        slots[cell.input_weights[k]] = g.omitted(t) if skip else present((n_cell, n_input))
        slots[cell.recurrent_weights[k]] = g.omitted(t) if skip else present((n_cell, n_output))
        slots[cell.bias[k]] = g.omitted(t) if skip else present((n_cell,))
    for k, pos in enumerate(cell.peephole):
        use = f.peephole and not (k == 0 and f.cifg)
        slots[pos] = present((n_cell,)) if use else g.omitted(t)
    slots[cell.projection_weights] = present((n_output, n_cell)) if f.projection else g.omitted(t)
    slots[cell.projection_bias] = present((n_output,)) if f.projection_bias else g.omitted(t)
    slots[cell.output_state] = g.data(t, dims=(n_batch, n_output), domain=_STATE)
    slots[cell.cell_state] = g.data(t, dims=(n_batch, n_cell), domain=_STATE)
    if cell.layer_norm is not None:
        for k, pos in enumerate(cell.layer_norm):
            use = f.layer_norm and not (k == 0 and f.cifg)
            slots[pos] = g.fresh(t, (n_cell,), domain=Domain(0.5, 1.5)) if use else g.omitted(t)
    if cell.aux_weights is not None:
        for k, pos in enumerate(cell.aux_weights):
            use = f.aux_weights and not (k == 0 and f.cifg) and aux_size is not None
            slots[pos] = present((n_cell, aux_size)) if use else g.omitted(t)


def sizes(g: OpGen, f: Features) -> tuple[int, int]:
    n_cell = g.src.integer(1, 6)
    n_output = g.src.integer(1, 6) if f.projection else n_cell
    return n_cell, n_output


def output_bound(f: Features, n_cell: int, act: int, clip: float) -> float | None:
    """Bound of the cell output (None: not bounded for this activation)."""
    if act not in _BOUNDED_ACTIVATIONS:
        return None
    b = n_cell * 0.6 + 0.6 if f.projection else 1.0
    return min(b, clip) if clip > 0 else b


def common_params(g: OpGen, t: int) -> tuple[list[Tensor], int, float]:
    st = T.FLOAT16 if t == T.TENSOR_FLOAT16 else T.FLOAT32
    act = g.src.choice((4, 6, 0, 1, 3))
    cell_clip = g.src.choice((0.0, 0.0, 3.0))
    proj_clip = g.src.choice((0.0, 0.0, 2.0))
    return (
        [g.scalar(T.INT32, act), g.scalar(st, cell_clip), g.scalar(st, proj_clip)],
        act,
        proj_clip,
    )


def _out(g: OpGen, t: int, bound: float | None, *, ignored: bool = False) -> Tensor:
    if bound is None:
        o = g.output(t, chainable=False)
    else:
        o = g.output(t, lo=-bound, hi=bound)
    o.ignored = ignored
    return o


def _cell_state_out(g: OpGen, t: int, c: Tensor, steps: int, act: int) -> Tensor:
    if act not in _BOUNDED_ACTIVATIONS:
        return g.output(t, chainable=False)
    b = magnitude(c) + steps  # |c'| <= |c| + |i * g| per step
    return g.output(t, lo=-b, hi=b)


@rule(RULES, O.LSTM)
def lstm(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    with_ln = len(sig.inputs) == 27
    cell = LSTM_CELL_LN if with_ln else LSTM_CELL
    f = choose_features(g, layer_norm_allowed=with_ln)
    x = g.data(t, rank=2, primary=True, domain=_INPUT)
    n_batch, n_input = x.dims
    n_cell, n_output = sizes(g, f)
    slots: dict[int, Tensor] = {0: x}
    float_cell(g, cell, t, f, slots, n_batch, n_input, n_cell, n_output)
    params, act, proj_clip = common_params(g, t)
    for k, p in enumerate(params):
        slots[20 + k] = p
    ins = [slots[k] for k in range(len(sig.inputs))]
    bound = output_bound(f, n_cell, act, proj_clip)
    outs = [
        _out(g, t, None, ignored=True),  # scratch buffer: contents unspecified
        _out(g, t, bound),
        _cell_state_out(g, t, slots[cell.cell_state], 1, act),
        _out(g, t, bound),
    ]
    outs[0].chainable = False
    return ins, outs


@rule(RULES, O.UNIDIRECTIONAL_SEQUENCE_LSTM)
def uni_lstm(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    f = choose_features(g, layer_norm_allowed=True)
    x = g.data(t, rank=3, primary=True, domain=_INPUT)
    time_major = g.src.boolean(0.5)
    n_time, n_batch = (x.dims[0], x.dims[1]) if time_major else (x.dims[1], x.dims[0])
    n_cell, n_output = sizes(g, f)
    slots: dict[int, Tensor] = {0: x}
    float_cell(g, UNI_CELL, t, f, slots, n_batch, x.dims[2], n_cell, n_output)
    params, act, proj_clip = common_params(g, t)
    for k, p in enumerate(params):
        slots[20 + k] = p
    slots[23] = g.scalar(T.BOOL, time_major)
    ins = [slots[k] for k in range(len(sig.inputs))]
    bound = output_bound(f, n_cell, act, proj_clip)
    outs = [_out(g, t, bound)]
    if len(sig.outputs) == 3:
        outs += [_out(g, t, bound), _cell_state_out(g, t, slots[19], n_time, act)]
    return ins, outs


@rule(RULES, O.BIDIRECTIONAL_SEQUENCE_LSTM)
def bi_lstm(g: OpGen):
    sig = g.signature()
    t = sig.inputs[0]
    n_out = len(sig.outputs)
    merge = n_out in (1, 5)
    x = g.data(t, rank=3, primary=True, domain=_INPUT)
    time_major = g.src.boolean(0.5)
    n_time, n_batch = (x.dims[0], x.dims[1]) if time_major else (x.dims[1], x.dims[0])
    n_input = x.dims[2]
    # Auxiliary input: none, with aux weights (cross-linked), or alone (parallel, 1.3).
    modes = ("none", "cross", "parallel") if g.version >= 13 else ("none", "cross")
    mode = g.src.choice(modes)
    f = choose_features(g, layer_norm_allowed=True, aux_allowed=mode == "cross")
    if mode == "cross" and not f.aux_weights:
        mode = "none"
    slots: dict[int, Tensor] = {0: x}
    aux_size = n_input if mode != "none" else None
    fw_cell, fw_out = sizes(g, f)
    bw_cell, bw_out = sizes(g, f)
    float_cell(g, BI_FW, t, f, slots, n_batch, n_input, fw_cell, fw_out, aux_size)
    float_cell(g, BI_BW, t, f, slots, n_batch, n_input, bw_cell, bw_out, aux_size)
    slots[BI_AUX_INPUT] = g.data(t, dims=x.dims, domain=_INPUT) if mode != "none" else g.omitted(t)
    params, act, proj_clip = common_params(g, t)
    for k, p in enumerate(params):
        slots[48 + k] = p
    slots[51] = g.scalar(T.BOOL, merge)
    slots[52] = g.scalar(T.BOOL, time_major)
    ins = [slots[k] for k in range(len(sig.inputs))]
    bound = output_bound(f, max(fw_cell, bw_cell), act, proj_clip)
    outs = [_out(g, t, bound) for _ in range(1 if merge else 2)]
    if n_out > 2:
        outs += [
            _out(g, t, bound),
            _cell_state_out(g, t, slots[36], n_time, act),
            _out(g, t, bound),
            _cell_state_out(g, t, slots[38], n_time, act),
        ]
    return ins, outs


@rule(RULES, O.QUANTIZED_16BIT_LSTM)
def quantized_16bit_lstm(g: OpGen):
    g.signature()
    q8, q16, i32 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT16_SYMM, T.TENSOR_INT32
    act_quant = (1.0 / 128, 128)
    x = g.data(q8, rank=2, primary=True, quant=act_quant)
    n_batch, n_input = x.dims
    n_output = g.src.integer(1, 6)
    ws = float(np.float32(g.src.choice((1.0 / 256, 1.0 / 128, 0.00408, 1.0 / 512))))
    wz = g.src.integer(100, 156)
    w = [g.fresh(q8, (n_output, n_input), quant=(ws, wz)) for _ in range(4)]
    r = [g.fresh(q8, (n_output, n_output), quant=(ws, wz)) for _ in range(4)]
    b = [
        g.fresh(i32, (n_output,), quant=(ws / 128, 0), domain=Domain(-20000, 20000))
        for _ in range(4)
    ]
    cell = g.data(q16, dims=(n_batch, n_output), quant=(2.0**-11, 0))
    prev = g.data(q8, dims=(n_batch, n_output), quant=act_quant)
    outs = [g.output(q16, quant=(2.0**-11, 0)), g.output(q8, quant=act_quant)]
    return [x, *w, *r, *b, cell, prev], outs


@rule(RULES, O.QUANTIZED_LSTM)
def quantized_lstm(g: OpGen):
    sig = g.signature()
    s8, w8, q16, i32 = (
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_QUANT8_SYMM,
        T.TENSOR_QUANT16_SYMM,
        T.TENSOR_INT32,
    )
    f = choose_features(g, layer_norm_allowed=True)
    x = g.data(s8, rank=2, primary=True)
    n_batch, n_input = x.dims
    n_cell, n_output = sizes(g, f)
    state = g.data(s8, dims=(n_batch, n_output))
    out_scale, out_zp = state.scale, state.zero_point
    hidden_scale = out_scale if not f.projection else float(np.float32(1.0 / 128))
    w_scale = float(np.float32(g.src.choice((1 / 200, 1 / 128, 1 / 300))))
    p_scale = ln_scale = 1 / 4096
    inter = 2.0**-10 if f.layer_norm else 2.0**-12
    bias_scale = ln_scale / 1024 if f.layer_norm else w_scale * x.scale
    cell_shift = g.src.integer(-15, -9)
    cell = QLSTM_CELL
    slots: dict[int, Tensor] = {0: x, 18: state}

    def weights(shape) -> Tensor:
        return g.fresh(w8, shape, quant=(w_scale, 0))

    def omitted(t: int, scale: float) -> Tensor:
        return g.omitted(t, quant=(scale, 0))

    for k in range(4):
        skip = k == 0 and f.cifg
        iw, rw, b = cell.input_weights[k], cell.recurrent_weights[k], cell.bias[k]
        slots[iw] = omitted(w8, w_scale) if skip else weights((n_cell, n_input))
        slots[rw] = omitted(w8, w_scale) if skip else weights((n_cell, n_output))
        slots[b] = (
            omitted(i32, bias_scale)
            if skip
            else g.fresh(i32, (n_cell,), quant=(bias_scale, 0), domain=Domain(-3000, 3000))
        )
    for k, pos in enumerate(cell.peephole):
        use = f.peephole and not (k == 0 and f.cifg)
        slots[pos] = g.fresh(q16, (n_cell,), quant=(p_scale, 0)) if use else omitted(q16, p_scale)
    slots[cell.projection_weights] = (
        weights((n_output, n_cell)) if f.projection else omitted(w8, w_scale)
    )
    pb_scale = w_scale * hidden_scale
    slots[cell.projection_bias] = (
        g.fresh(i32, (n_output,), quant=(pb_scale, 0), domain=Domain(-500, 500))
        if f.projection_bias
        else omitted(i32, pb_scale)
    )
    slots[cell.cell_state] = g.data(q16, dims=(n_batch, n_cell), quant=(2.0**cell_shift, 0))
    for k, pos in enumerate(cell.layer_norm):
        use = f.layer_norm and not (k == 0 and f.cifg)
        slots[pos] = (
            g.fresh(q16, (n_cell,), quant=(ln_scale, 0), domain=Domain(2048, 6144), const=True)
            if use
            else omitted(q16, ln_scale)
        )
    floats = [g.src.choice((0.0, 0.0, 2.0)), g.src.choice((0.0, 0.0, 1.5))] + [inter] * 4
    for k, v in enumerate(floats):
        slots[24 + k] = g.scalar(T.FLOAT32, v)
    slots[30] = g.scalar(T.INT32, 0)
    slots[31] = g.scalar(T.FLOAT32, hidden_scale)
    ins = [slots[k] for k in range(len(sig.inputs))]
    outs = [
        g.output(s8, quant=(out_scale, out_zp)),
        g.output(q16, quant=(2.0**cell_shift, 0)),
        g.output(s8, quant=(out_scale, out_zp)),
    ]
    return ins, outs
