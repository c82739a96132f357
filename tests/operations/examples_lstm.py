"""Valid LSTM-family examples (see examples.py), plus the case builders and the float64
reference the LSTM tests share.

The reference (:func:`reference_lstm_step`) is a plain float64 transcription of the LSTM
equations in NeuralNetworks.h, written independently of the kernel's float32 code:

    f = sigmoid(W_f x + R_f h + p_f . c + b_f)           (layer norm: LN(...) * l_f + b_f)
    i = 1 - f (CIFG)  or  sigmoid(W_i x + R_i h + p_i . c + b_i)
    g = act(W_c x + R_c h + b_c)
    c' = clip(f . c + i . g, cell_clip)
    o = sigmoid(W_o x + R_o h + p_o . c' + b_o)
    m = o . act(c')
    y = clip(P m + p_b, proj_clip)  or  m

Weights are multiples of 1/64 in (-0.6, 0.6) so that float16 and float32 runs use exactly
the same values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, omitted, output, scalar, tensor

GATES = ("input", "forget", "cell", "output")
FP16_TOL = 5 * 2.0**-10  # the float16 / relaxed generated-test criterion


def grid_values(rng: np.random.Generator, shape, lo: float = -0.6, hi: float = 0.6):
    """Uniform values on a 1/64 grid (exact in float16)."""
    return np.round(rng.uniform(lo, hi, size=shape) * 64) / 64


@dataclass
class CellWeights:
    """One LSTM cell's float64 weights; ``None`` where a feature is off."""

    n_input: int
    n_cell: int
    n_output: int
    input_weights: dict[str, np.ndarray | None]
    recurrent_weights: dict[str, np.ndarray | None]
    peephole: dict[str, np.ndarray | None]
    bias: dict[str, np.ndarray | None]
    layer_norm: dict[str, np.ndarray | None] | None = None
    projection: np.ndarray | None = None
    projection_bias: np.ndarray | None = None
    aux_weights: dict[str, np.ndarray | None] | None = None
    features: dict[str, bool] = field(default_factory=dict)

    @property
    def cifg(self) -> bool:
        return self.input_weights["input"] is None


def make_cell(
    rng: np.random.Generator,
    n_input: int,
    n_cell: int,
    n_output: int | None = None,
    *,
    cifg: bool = False,
    peephole: bool = False,
    projection: bool = False,
    projection_bias: bool = False,
    layer_norm: bool = False,
    n_aux: int | None = None,
) -> CellWeights:
    n_output = n_cell if n_output is None else n_output
    gates = [g for g in GATES if not (cifg and g == "input")]

    def per_gate(shape, which=GATES):
        return {g: (grid_values(rng, shape) if g in gates and g in which else None) for g in GATES}

    w = CellWeights(
        n_input,
        n_cell,
        n_output,
        per_gate((n_cell, n_input)),
        per_gate((n_cell, n_output)),
        per_gate((n_cell,), ("input", "forget", "output")) if peephole else dict.fromkeys(GATES),
        per_gate((n_cell,)),
    )
    if layer_norm:
        w.layer_norm = {
            g: (1 + grid_values(rng, (n_cell,), -0.3, 0.3)) if g in gates else None for g in GATES
        }
    if projection:
        w.projection = grid_values(rng, (n_output, n_cell))
        if projection_bias:
            w.projection_bias = grid_values(rng, (n_output,))
    if n_aux is not None:
        w.aux_weights = per_gate((n_cell, n_aux))
    w.features = dict(
        cifg=cifg,
        peephole=peephole,
        projection=projection,
        projection_bias=projection_bias,
        layer_norm=layer_norm,
    )
    return w


ACTIVATIONS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    0: lambda x: x,
    1: lambda x: np.maximum(x, 0),
    3: lambda x: np.clip(x, 0, 6),
    4: np.tanh,
    6: lambda x: 1 / (1 + np.exp(-x)),
}


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reference_gate(w: CellWeights, g: str, x, h, state, aux=None) -> np.ndarray:
    """A gate's pre-activation (after layer normalization and bias)."""
    z = x @ w.input_weights[g].T + h @ w.recurrent_weights[g].T
    if aux is not None and w.aux_weights is not None:
        z = z + aux @ w.aux_weights[g].T
    if state is not None and w.peephole.get(g) is not None:
        z = z + w.peephole[g] * state
    if w.layer_norm is not None:
        mean = z.mean(axis=1, keepdims=True)
        std = np.sqrt(z.var(axis=1, keepdims=True) + 1e-8)
        return (z - mean) / std * w.layer_norm[g] + w.bias[g]
    return z + w.bias[g]


def reference_lstm_step(
    w: CellWeights,
    x: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    *,
    activation: int = 4,
    cell_clip: float = 0.0,
    proj_clip: float = 0.0,
    aux: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step in float64 over [batch, ...] arrays: (output, new cell state)."""
    x, h, c = (np.asarray(a, dtype=np.float64) for a in (x, h, c))
    act = ACTIVATIONS[activation]

    f = _sigmoid(reference_gate(w, "forget", x, h, c, aux))
    i = 1 - f if w.cifg else _sigmoid(reference_gate(w, "input", x, h, c, aux))
    g = act(reference_gate(w, "cell", x, h, None, aux))
    c_new = f * c + i * g
    if cell_clip > 0:
        c_new = np.clip(c_new, -cell_clip, cell_clip)
    o = _sigmoid(reference_gate(w, "output", x, h, c_new, aux))
    m = o * act(c_new)
    if w.projection is not None:
        y = m @ w.projection.T
        if w.projection_bias is not None:
            y = y + w.projection_bias
        if proj_clip > 0:
            y = np.clip(y, -proj_clip, proj_clip)
    else:
        y = m
    return y, c_new


def reference_lstm_sequence(
    w: CellWeights,
    xs: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    *,
    reverse: bool = False,
    aux: np.ndarray | None = None,
    **params,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Time-major [time, batch, input] sequence: (outputs [time, batch, out], h, c)."""
    n_time = xs.shape[0]
    outs = [None] * n_time
    for t in reversed(range(n_time)) if reverse else range(n_time):
        h, c = reference_lstm_step(w, xs[t], h, c, aux=None if aux is None else aux[t], **params)
        outs[t] = h
    return np.stack(outs), h, c


# --- operand lists ------------------------------------------------------------------------


def _t(tt: int, v, const: bool, dims) -> object:
    """A weight tensor, or an omitted operand declared with the shape it would have."""
    return omitted(tt, dims) if v is None else tensor(tt, v, np.shape(v), const=const)


def cell_args(w: CellWeights, tt: int, *, const: bool = True) -> list:
    """The 17 weight operands in NNAPI order (input 1..17 of LSTM)."""
    n, i, o = w.n_cell, w.n_input, w.n_output
    args = [_t(tt, w.input_weights[g], const, (n, i)) for g in GATES]
    args += [_t(tt, w.recurrent_weights[g], const, (n, o)) for g in GATES]
    args += [_t(tt, w.peephole[g], const, (n,)) for g in ("input", "forget", "output")]
    args += [_t(tt, w.bias[g], const, (n,)) for g in GATES]
    args += [_t(tt, w.projection, const, (o, n)), _t(tt, w.projection_bias, const, (o,))]
    return args


def layer_norm_args(w: CellWeights, tt: int, *, const: bool = True) -> list:
    ln = w.layer_norm or dict.fromkeys(GATES)
    return [_t(tt, ln[g], const, (w.n_cell,)) for g in GATES]


def aux_weight_args(w: CellWeights, tt: int) -> list:
    a = w.aux_weights or dict.fromkeys(GATES)
    return [_t(tt, a[g], True, (w.n_cell, w.n_input)) for g in GATES]


def scalar_type(tt: int) -> int:
    return T.FLOAT16 if tt == T.TENSOR_FLOAT16 else T.FLOAT32


def lstm_inputs(
    w: CellWeights,
    x,
    h,
    c,
    *,
    tt: int = T.TENSOR_FLOAT32,
    activation: int = 4,
    cell_clip: float = 0.0,
    proj_clip: float = 0.0,
    layer_norm_inputs: bool | None = None,
) -> list:
    """Inputs of LSTM: 23, or 27 with the layer norm weights (default: when used)."""
    st = scalar_type(tt)
    args = [tensor(tt, x), *cell_args(w, tt)]
    args += [tensor(tt, h), tensor(tt, c)]
    args += [scalar(T.INT32, activation), scalar(st, cell_clip), scalar(st, proj_clip)]
    if layer_norm_inputs or (layer_norm_inputs is None and w.layer_norm is not None):
        args += layer_norm_args(w, tt)
    return args


def lstm_outputs(w: CellWeights, n_batch: int, tt: int = T.TENSOR_FLOAT32) -> list:
    gates = 3 if w.cifg else 4
    return [
        output(tt, (n_batch, gates * w.n_cell)),
        output(tt, (n_batch, w.n_output)),
        output(tt, (n_batch, w.n_cell)),
        output(tt, (n_batch, w.n_output)),
    ]


def uni_lstm_inputs(
    w: CellWeights,
    xs,
    h,
    c,
    *,
    time_major: bool = True,
    tt: int = T.TENSOR_FLOAT32,
    activation: int = 4,
    cell_clip: float = 0.0,
    proj_clip: float = 0.0,
) -> list:
    """Inputs of UNIDIRECTIONAL_SEQUENCE_LSTM (28); ``xs`` in the layout ``time_major`` says."""
    st = scalar_type(tt)
    args = [tensor(tt, xs), *cell_args(w, tt), tensor(tt, h), tensor(tt, c)]
    args += [scalar(T.INT32, activation), scalar(st, cell_clip), scalar(st, proj_clip)]
    args += [scalar(T.BOOL, time_major), *layer_norm_args(w, tt)]
    return args


def bi_lstm_inputs(
    fw: CellWeights,
    bw: CellWeights,
    xs,
    states,
    *,
    aux=None,
    merge: bool = False,
    time_major: bool = True,
    tt: int = T.TENSOR_FLOAT32,
    activation: int = 4,
    cell_clip: float = 0.0,
    proj_clip: float = 0.0,
) -> list:
    """Inputs of BIDIRECTIONAL_SEQUENCE_LSTM (61). ``states`` = (fw h, fw c, bw h, bw c)."""
    st = scalar_type(tt)
    args = [tensor(tt, xs), *cell_args(fw, tt), *cell_args(bw, tt)]
    args += [tensor(tt, s) for s in states]
    args += [omitted(tt, np.shape(xs)) if aux is None else tensor(tt, aux)]
    args += aux_weight_args(fw, tt) + aux_weight_args(bw, tt)
    args += [scalar(T.INT32, activation), scalar(st, cell_clip), scalar(st, proj_clip)]
    args += [scalar(T.BOOL, merge), scalar(T.BOOL, time_major)]
    args += layer_norm_args(fw, tt) + layer_norm_args(bw, tt)
    return args


# --- quantized helpers ----------------------------------------------------------------------


def quantize(real, scale: float, zero_point: int, lo: int, hi: int) -> np.ndarray:
    q = np.floor(np.asarray(real, dtype=np.float64) / scale + 0.5) + zero_point
    return np.clip(q, lo, hi).astype(np.int64)


Q16_WEIGHT_SCALE = 1 / 256
Q16_WEIGHT_ZP = 128


def q16_case(seed: int, n_batch: int, n_input: int, n_output: int):
    """Random QUANTIZED_16BIT_LSTM operands (storage integers) and their real values."""
    rng = np.random.default_rng(seed)
    q = {}
    q["input"] = rng.integers(64, 192, size=(n_batch, n_input))
    q["prev_output"] = rng.integers(64, 192, size=(n_batch, n_output))
    q["prev_cell"] = rng.integers(-3000, 3000, size=(n_batch, n_output))
    for g in GATES:
        q[f"w_{g}"] = rng.integers(0, 256, size=(n_output, n_input))
        q[f"r_{g}"] = rng.integers(0, 256, size=(n_output, n_output))
        q[f"b_{g}"] = rng.integers(-20000, 20000, size=(n_output,))
    return q


def q16_inputs(q: dict) -> list:
    w = lambda v: tensor(T.TENSOR_QUANT8_ASYMM, v, scale=Q16_WEIGHT_SCALE, zero_point=Q16_WEIGHT_ZP)  # noqa: E731
    b = lambda v: tensor(T.TENSOR_INT32, v, scale=Q16_WEIGHT_SCALE / 128)  # noqa: E731
    act = lambda v: tensor(T.TENSOR_QUANT8_ASYMM, v, scale=1 / 128, zero_point=128)  # noqa: E731
    return (
        [act(q["input"])]
        + [w(q[f"w_{g}"]) for g in GATES]
        + [w(q[f"r_{g}"]) for g in GATES]
        + [b(q[f"b_{g}"]) for g in GATES]
        + [tensor(T.TENSOR_QUANT16_SYMM, q["prev_cell"], scale=1 / 2048), act(q["prev_output"])]
    )


def q16_outputs(n_batch: int, n_output: int) -> list:
    return [
        output(T.TENSOR_QUANT16_SYMM, (n_batch, n_output), scale=1 / 2048),
        output(T.TENSOR_QUANT8_ASYMM, (n_batch, n_output), scale=1 / 128, zero_point=128),
    ]


def q16_reference(q: dict) -> tuple[np.ndarray, np.ndarray]:
    """The real-valued LSTM step the quantized operands stand for, requantized."""
    deq_w = lambda v: (np.asarray(v) - Q16_WEIGHT_ZP) * Q16_WEIGHT_SCALE  # noqa: E731
    x = (q["input"] - 128) / 128
    h = (q["prev_output"] - 128) / 128
    c = q["prev_cell"] / 2048
    pre = {
        g: x @ deq_w(q[f"w_{g}"]).T
        + h @ deq_w(q[f"r_{g}"]).T
        + q[f"b_{g}"] * Q16_WEIGHT_SCALE / 128
        for g in GATES
    }
    i, f, o = (_sigmoid(pre[g]) for g in ("input", "forget", "output"))
    c_new = f * c + i * np.tanh(pre["cell"])
    out = o * np.tanh(c_new)
    return quantize(c_new, 1 / 2048, 0, -32768, 32767), quantize(out, 1 / 128, 128, 0, 255)


# --- the examples ---------------------------------------------------------------------------


def _examples() -> list:
    rng = np.random.default_rng(7)
    found = []
    x = grid_values(rng, (1, 2))
    h0 = grid_values(rng, (1, 2))
    c0 = grid_values(rng, (1, 2))
    plain = make_cell(rng, 2, 2)
    full = make_cell(rng, 2, 2, 2, peephole=True, projection=True, projection_bias=True)
    cifg_ln = make_cell(rng, 2, 2, cifg=True, peephole=True, layer_norm=True)
    for tt, tag, tol in (
        (T.TENSOR_FLOAT32, "float32", 1e-5),
        (T.TENSOR_FLOAT16, "float16", FP16_TOL),
    ):
        for name, w in (
            ("basic", plain),
            ("peephole_projection", full),
            ("cifg_layer_norm", cifg_ln),
        ):
            y, c = reference_lstm_step(w, x, h0, c0)
            found.append(
                example(
                    f"lstm_{name}_{tag}",
                    O.LSTM,
                    lstm_inputs(w, x, h0, c0, tt=tt),
                    lstm_outputs(w, 1, tt),
                    # The scratch buffer's contents are not specified; the 1-row one here is
                    # [i, g(c'), f, o*g(c')] (CIFG drops i and holds 1 - f).
                    expected=[_scratch(w, x, h0, c0), y, c, y],
                    atol=tol,
                )
            )
        # UNIDIRECTIONAL_SEQUENCE_LSTM, batch-major [batch=1, time=3, input=2], 1.3 states.
        xs = grid_values(rng, (3, 1, 2))
        outs, hT, cT = reference_lstm_sequence(full, xs, h0, c0)
        found.append(
            example(
                f"unidirectional_sequence_lstm_{tag}",
                O.UNIDIRECTIONAL_SEQUENCE_LSTM,
                uni_lstm_inputs(full, xs.transpose(1, 0, 2), h0, c0, time_major=False, tt=tt),
                [output(tt, (1, 3, 2)), output(tt, (1, 2)), output(tt, (1, 2))],
                expected=[outs.transpose(1, 0, 2), hT, cT],
                atol=tol,
            )
        )
        # BIDIRECTIONAL_SEQUENCE_LSTM, time-major, merged outputs.
        bw = make_cell(rng, 2, 2)
        fw_out, _, _ = reference_lstm_sequence(plain, xs, h0, c0)
        bw_out, _, _ = reference_lstm_sequence(bw, xs, h0, c0, reverse=True)
        found.append(
            example(
                f"bidirectional_sequence_lstm_merged_{tag}",
                O.BIDIRECTIONAL_SEQUENCE_LSTM,
                bi_lstm_inputs(plain, bw, xs, (h0, c0, h0, c0), merge=True, tt=tt),
                [output(tt, (3, 1, 4))],
                expected=[np.concatenate([fw_out, bw_out], axis=2)],
                atol=tol,
            )
        )
    q = q16_case(3, 1, 2, 2)
    cell, out = q16_reference(q)
    found.append(
        example(
            "quantized_16bit_lstm",
            O.QUANTIZED_16BIT_LSTM,
            q16_inputs(q),
            q16_outputs(1, 2),
            expected=[cell, out],
            atol=1,  # fixed-point sigmoid/tanh against the real-valued reference
        )
    )
    found.append(qlstm_example())
    return found


def _scratch(w: CellWeights, x, h, c) -> np.ndarray:
    """The scratch buffer Android leaves (gate-major blocks; one batch row here):
    [sigmoid(i), tanh(c'), f (1 - f with CIFG), o * tanh(c')]."""
    _, c_new = reference_lstm_step(w, x, h, c)
    f = _sigmoid(reference_gate(w, "forget", x, h, c))
    o = _sigmoid(reference_gate(w, "output", x, h, c_new))
    blocks = [np.tanh(c_new), 1 - f if w.cifg else f, o * np.tanh(c_new)]
    if not w.cifg:
        blocks.insert(0, _sigmoid(reference_gate(w, "input", x, h, c)))
    return np.concatenate(blocks, axis=1)


# --- QUANTIZED_LSTM -------------------------------------------------------------------------


@dataclass
class QlstmCase:
    """A QUANTIZED_LSTM case: storage values, scales, and the float weights they encode."""

    float_cell: CellWeights
    args: list
    n_batch: int
    out_scale: float
    out_zp: int
    cell_scale: float
    x: np.ndarray  # real values of the inputs / states
    h: np.ndarray
    c: np.ndarray


def make_qlstm_case(
    seed: int,
    n_batch: int = 2,
    n_input: int = 3,
    n_cell: int = 4,
    n_output: int | None = None,
    *,
    cifg: bool = False,
    peephole: bool = False,
    projection: bool = False,
    layer_norm: bool = True,
    cell_clip: float = 0.0,
    proj_clip: float = 0.0,
) -> QlstmCase:
    """Quantize a float cell into QUANTIZED_LSTM operands (scales chosen as tflite's
    quantizer would: weights symmetric int8, biases in the product scale or, with layer
    norm, layer-norm-scale / 1024, gate intermediates 2^-12 without layer norm)."""
    rng = np.random.default_rng(seed)
    n_output = n_cell if n_output is None else n_output
    w = make_cell(
        rng,
        n_input,
        n_cell,
        n_output,
        cifg=cifg,
        peephole=peephole,
        projection=projection,
        projection_bias=projection,
        layer_norm=layer_norm,
    )
    in_scale, in_zp = 1 / 64, 3
    out_scale, out_zp = (1 / 128, -2) if projection else (1 / 128, 0)
    cell_scale = 2.0**-11
    hidden_scale = out_scale if not projection else 1 / 128
    w_scale, p_scale, ln_scale = 1 / 200, 1 / 4096, 1 / 4096
    inter = 2.0**-12 if not layer_norm else 2.0**-10
    x = (rng.integers(-80, 80, size=(n_batch, n_input)) - in_zp) * in_scale
    h = (rng.integers(-100, 100, size=(n_batch, n_output)) - out_zp) * out_scale
    c = rng.integers(-3000, 3000, size=(n_batch, n_cell)) * cell_scale
    # Snap the float weights to what the quantized operands hold.
    qw = lambda v: None if v is None else quantize(v, w_scale, 0, -127, 127)  # noqa: E731
    for d in (w.input_weights, w.recurrent_weights):
        for g in GATES:
            if d[g] is not None:
                d[g] = qw(d[g]) * w_scale
    for g in GATES:
        if w.peephole.get(g) is not None:
            w.peephole[g] = quantize(w.peephole[g], p_scale, 0, -32767, 32767) * p_scale
        if layer_norm and w.layer_norm[g] is not None:
            w.layer_norm[g] = quantize(w.layer_norm[g], ln_scale, 0, -32767, 32767) * ln_scale
    bias_scale = (ln_scale / 1024) if layer_norm else (w_scale * in_scale)
    for g in GATES:
        if w.bias[g] is not None:
            w.bias[g] = quantize(w.bias[g], bias_scale, 0, -(2**31), 2**31 - 1) * bias_scale
    if projection:
        w.projection = quantize(w.projection, w_scale, 0, -127, 127) * w_scale
        pb_scale = w_scale * hidden_scale
        w.projection_bias = quantize(w.projection_bias, pb_scale, 0, -(2**31), 2**31 - 1) * pb_scale

    def w8(v):
        if v is None:
            return omitted(T.TENSOR_QUANT8_SYMM, (1, 1), scale=w_scale)
        return tensor(T.TENSOR_QUANT8_SYMM, np.rint(v / w_scale), scale=w_scale, const=True)

    def q16(v, s):
        if v is None:
            return omitted(T.TENSOR_QUANT16_SYMM, (1,), scale=s)
        return tensor(T.TENSOR_QUANT16_SYMM, np.rint(v / s), scale=s, const=True)

    def b32(v, s):
        if v is None:
            return omitted(T.TENSOR_INT32, (1,), scale=s)
        return tensor(T.TENSOR_INT32, np.rint(v / s), scale=s, const=True)

    ln = w.layer_norm or dict.fromkeys(GATES)
    args = [
        tensor(
            T.TENSOR_QUANT8_ASYMM_SIGNED,
            np.rint(x / in_scale) + in_zp,
            scale=in_scale,
            zero_point=in_zp,
        )
    ]
    args += [w8(w.input_weights[g]) for g in GATES] + [w8(w.recurrent_weights[g]) for g in GATES]
    args += [q16(w.peephole[g], p_scale) for g in ("input", "forget", "output")]
    args += [b32(w.bias[g], bias_scale) for g in GATES]
    args += [w8(w.projection), b32(w.projection_bias, w_scale * hidden_scale)]
    args += [
        tensor(
            T.TENSOR_QUANT8_ASYMM_SIGNED,
            np.rint(h / out_scale) + out_zp,
            scale=out_scale,
            zero_point=out_zp,
        ),
        tensor(T.TENSOR_QUANT16_SYMM, np.rint(c / cell_scale), scale=cell_scale),
    ]
    args += [q16(ln[g], ln_scale) for g in GATES]
    args += [scalar(T.FLOAT32, cell_clip), scalar(T.FLOAT32, proj_clip)]
    args += [scalar(T.FLOAT32, inter) for _ in range(4)]
    args += [scalar(T.INT32, 0), scalar(T.FLOAT32, hidden_scale)]
    return QlstmCase(w, args, n_batch, out_scale, out_zp, cell_scale, x, h, c)


def qlstm_outputs(case: QlstmCase) -> list:
    s8 = T.TENSOR_QUANT8_ASYMM_SIGNED
    w = case.float_cell
    return [
        output(s8, (case.n_batch, w.n_output), scale=case.out_scale, zero_point=case.out_zp),
        output(T.TENSOR_QUANT16_SYMM, (case.n_batch, w.n_cell), scale=case.cell_scale),
        output(s8, (case.n_batch, w.n_output), scale=case.out_scale, zero_point=case.out_zp),
    ]


def qlstm_example():
    case = make_qlstm_case(11, 1, 2, 2, layer_norm=False)
    y, c = reference_lstm_step(case.float_cell, case.x, case.h, case.c)
    out_q = quantize(y, case.out_scale, case.out_zp, -128, 127)
    return example(
        "quantized_lstm",
        O.QUANTIZED_LSTM,
        case.args,
        qlstm_outputs(case),
        expected=[out_q, quantize(c, case.cell_scale, 0, -32768, 32767), out_q],
        atol=2,  # fixed-point gates: a couple of LSBs
    )


EXAMPLES = _examples()
