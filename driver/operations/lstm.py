"""Long short-term memory: LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM,
QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM.

Numerics follow Android 11's CPU kernels (``LSTM.cpp``, ``UnidirectionalSequenceLSTM.cpp``,
``BidirectionalSequenceLSTM.cpp``, ``QuantizedLSTM.cpp``, ``QLSTM.cpp``):

* Float LSTM (``LSTMCell::LSTMStep``): per gate, the bias (or zero with layer
  normalization) plus input, auxiliary-input and recurrent products, plus the peephole
  term; layer normalization (mean/stddev over the units, stddev with a 1e-8 guard), its
  weights and then the bias; sigmoid gates, the cell activation ``g`` chosen by the
  activation parameter (0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid), cell clipping,
  the output gate's peephole on the *new* cell state, projection (bias, product,
  clipping). Everything is float32; float16 operands are converted to float32, the whole
  sequence runs in float32 and the outputs are rounded to float16 once (as Android's
  ``convertFloat16ToFloat32`` wrappers do). The scratch buffer holds what Android's
  leaves in it: gate-major blocks ``[input gate, g(new cell), forget gate (1 - forget
  with CIFG), output gate * g(new cell)]``.
* QUANTIZED_16BIT_LSTM is tflite's ``LstmCell<4>`` (gemmlowp fixed point): uint8 products
  accumulated in int32 from the int32 bias, rescaled by ``QuantizeMultiplier(4096 *
  biasScale)`` to int16 with 3 integer bits, gemmlowp ``logistic``/``tanh`` on int16, the
  cell state with 4 integer bits, the output rounded by 2^8 into uint8 around 128.
* QUANTIZED_LSTM is the integer 8x8->16 LSTM of ``QLSTM.cpp`` (tflite's
  ``EvalInteger8x8_16``): int8 products with zero points folded into precomputed biases,
  ``MultiplyByQuantizedMultiplier`` into int16 gate accumulators, optional integer layer
  normalization, int16 gemmlowp sigmoid/tanh, the cell update by rounding shifts, the
  int8 hidden state and an optional int8 projection.

The gemmlowp fixed-point routines are ported below and vectorized over whole arrays;
they reproduce the scalar C++ bit for bit (wrapping and saturating exactly where it does).

Rules Android's kernels assume but do not check are checked here (see each
declaration's ``notes``), so that every accepted model has one defined result.

Every rejection these validate hooks make is deferrable (:class:`HalError`
``deferrable``): Android 11's validation of these operations (``Utils.cpp``
``validateOperation`` for LSTM, BIDIRECTIONAL_SEQUENCE_LSTM and QUANTIZED_16BIT_LSTM;
the ``validate()`` of UNIDIRECTIONAL_SEQUENCE_LSTM and QUANTIZED_LSTM) checks operand
counts, types and HAL versions only, which the signatures here check. Ranks, shapes,
required and optional tensor groups (CIFG, peephole, projection, layer norm, auxiliary
weights), merge_outputs against the output count, activation and clip values, and the
quantization conditions are checked in ``prepare()`` (``LSTMCell::Prepare`` /
``CheckInputTensorDimensions``, ``QuantizedLSTMCell::prepare``) or by the kernels, at
execution. The HAL version a use needs (parallel linking) is checked before them
(``ctx.require_version``).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from driver.hal.types import HalVersion, OperandLifeTime, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
    item_blocks,
    storage_dtype,
)
from driver.operations.base import T as _T
from driver.operations.quant import (
    FX16,
    FX32,
    inv_sqrt_quantized_multiplier_exp,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)

V = HalVersion
F32 = np.float32
FLOAT_TYPES = ((_T.TENSOR_FLOAT32, _T.FLOAT32), (_T.TENSOR_FLOAT16, _T.FLOAT16))


# ---------------------------------------------------------------------------------------
# Helpers shared by the sequence families (rnn.py uses them too)
# ---------------------------------------------------------------------------------------


def is_present(ctx: OperationContext, i: int) -> bool:
    """Whether optional input ``i`` has a value.

    Omitted means lifetime NO_VALUE or, at run time, no value (a request argument with
    ``hasNoValue``). Before run time a model input may still be omitted by the request,
    so its presence is :class:`Unknown` then."""
    if ctx.is_omitted(i):
        return False
    if ctx.values[i] is not None:
        return True
    if ctx.executor is not None:  # run time: every present input has its value
        return False
    if ctx.input_operand(i).lifetime == OperandLifeTime.SUBGRAPH_INPUT:
        raise Unknown(f"whether input {i} is given")
    return True


def require_inputs(ctx: OperationContext, positions: Sequence[int], names: Sequence[str]) -> None:
    """Reject an omitted required tensor. A model input counts as given until run time
    shows otherwise (the run-time pass checks again)."""
    for i, name in zip(positions, names):
        try:
            present = is_present(ctx, i)
        except Unknown:
            continue
        ctx.check(present, f"input {i} ({name}) is required but omitted", deferrable=True)


def check_shape(ctx: OperationContext, i: int, name: str, expected: Sequence[int]) -> None:
    s = ctx.shape(i)
    ctx.check(
        tuple(s) == tuple(expected),
        f"input {i} ({name}) must have shape {list(expected)}, got {list(s)}",
        deferrable=True,
    )


def check_rank(ctx: OperationContext, i: int, name: str, rank: int) -> Shape:
    s = ctx.shape(i)
    ctx.check(
        len(s) == rank,
        f"input {i} ({name}) must have rank {rank}, got shape {list(s)}",
        deferrable=True,
    )
    return s


def as_float32(ctx: OperationContext, i: int) -> np.ndarray:
    return np.asarray(ctx.value(i), dtype=F32)


def float_scalar(ctx: OperationContext, i: int) -> float:
    """A FLOAT32/FLOAT16 scalar as the float32 the C++ kernels use."""
    return float(F32(ctx.scalar(i)))


def ieee_quiet(kernel: Callable[[OperationContext], list[np.ndarray]]):
    """Run a float kernel without numpy's floating-point warnings: infinities and NaNs in
    the inputs propagate silently, as in the C++ kernels (fuzzers feed them)."""

    def run(ctx: OperationContext) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return kernel(ctx)

    run.__name__ = kernel.__name__
    run.__doc__ = kernel.__doc__
    return run


BATCH_BLOCK_ELEMENTS = 1 << 16
"""Batch rows are independent in every cell, so the integer cells compute a block of rows
at a time: their int64 temporaries (a few dozen per row and unit) stay about this many
elements each, whatever the batch, instead of many times the input and state tensors."""


@functools.cache
def _int16_activation_table(function: str, integer_bits: int) -> np.ndarray:
    """``FX16.<function>`` (logistic or tanh) of every int16 raw, indexed by raw + 32768."""
    table = getattr(FX16, function)(np.arange(-32768, 32768, dtype=np.int64), integer_bits)
    table.flags.writeable = False
    return table


def int16_activation(function: str, raw: np.ndarray, integer_bits: int) -> np.ndarray:
    """``FX16.logistic``/``FX16.tanh`` of int16-range raws by table lookup: the gemmlowp
    evaluation is elementwise and takes some fifty numpy passes, which made the integer
    cells' time grow with the batch at ~100 ns per unit; a lookup gives the same bits."""
    return np.take(_int16_activation_table(function, integer_bits), np.asarray(raw) + 32768)


def to_time_major(x: np.ndarray, time_major: bool) -> np.ndarray:
    return x if time_major else x.transpose(1, 0, 2)


def sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (F32(1) / (F32(1) + np.exp(-x))).astype(F32, copy=False)


# tflite's ActivationFunctor (TfLiteFusedActivation codes) for the LSTM family: the
# documented values only; Android's functor aborts on the others.
def relu6(x: np.ndarray) -> np.ndarray:
    """``std::max(0.f, std::min(a, 6.f))`` as tflite's/Android's activation functors
    write it: NaN gives 0 (std::min keeps the NaN, std::max(0, NaN) returns 0)."""
    return np.fmax(np.minimum(x, F32(6)), F32(0))


LSTM_ACTIVATIONS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    0: lambda x: x,
    1: lambda x: np.maximum(x, F32(0)),
    3: relu6,
    4: np.tanh,
    6: sigmoid,
}


def check_lstm_activation(ctx: OperationContext, i: int) -> int:
    act = ctx.scalar(i)
    ctx.check(
        act in LSTM_ACTIVATIONS,
        f"input {i} (activation) must be 0 (none), 1 (relu), 3 (relu6), 4 (tanh) or "
        f"6 (sigmoid), got {act}",
        deferrable=True,
    )
    return act


# ---------------------------------------------------------------------------------------
# The float LSTM cell
# ---------------------------------------------------------------------------------------

GATES = ("input", "forget", "cell", "output")


@dataclass(frozen=True)
class CellInputs:
    """Input positions of one LSTM cell's tensors (one direction of an operation)."""

    input_weights: tuple[int, int, int, int]  # input-to-{input, forget, cell, output}
    recurrent_weights: tuple[int, int, int, int]
    peephole: tuple[int, int, int]  # cell-to-{input, forget, output}
    bias: tuple[int, int, int, int]
    projection_weights: int
    projection_bias: int
    output_state: int
    cell_state: int
    layer_norm: tuple[int, int, int, int] | None = None
    aux_weights: tuple[int, int, int, int] | None = None

    @staticmethod
    def at(
        first: int,
        output_state: int,
        cell_state: int,
        layer_norm: int | None = None,
        aux: int | None = None,
    ) -> CellInputs:
        """The standard layout: 17 consecutive tensors from ``first`` (weights, peephole,
        biases, projection), then states, layer norm and aux weights where given."""
        r = lambda k, n: tuple(range(first + k, first + k + n))  # noqa: E731
        return CellInputs(
            r(0, 4),
            r(4, 4),
            r(8, 3),
            r(11, 4),
            first + 15,
            first + 16,
            output_state,
            cell_state,
            None if layer_norm is None else tuple(range(layer_norm, layer_norm + 4)),
            None if aux is None else tuple(range(aux, aux + 4)),
        )

    @property
    def optional(self) -> frozenset[int]:
        opt = {
            self.input_weights[0],
            self.recurrent_weights[0],
            *self.peephole,
            self.bias[0],
            self.projection_weights,
            self.projection_bias,
        }
        if self.layer_norm:
            opt |= set(self.layer_norm)
        if self.aux_weights:
            opt |= set(self.aux_weights)
        return frozenset(opt)


@dataclass(frozen=True)
class CellConfig:
    """What an LSTM cell's present tensors select (``LSTMParams``), and its sizes."""

    n_cell: int
    n_output: int
    cifg: bool
    peephole: bool
    layer_norm: bool
    projection: bool
    projection_bias: bool
    aux: bool = False

    @property
    def features(self) -> tuple[bool, ...]:
        return (self.cifg, self.peephole, self.layer_norm, self.projection, self.projection_bias)


def check_cell(
    ctx: OperationContext,
    cell: CellInputs,
    n_batch: int,
    n_input: int,
    *,
    what: str = "",
    n_aux_input: int | None = None,
) -> CellConfig:
    """``LSTMCell::CheckInputTensorDimensions`` plus the state shapes: returns the cell's
    configuration or raises INVALID_ARGUMENT (Unknown while shapes are unknown)."""
    has = lambda i: is_present(ctx, i)  # noqa: E731
    iw, rw, pw, b = cell.input_weights, cell.recurrent_weights, cell.peephole, cell.bias
    names = [f"{what}input-to-{g} weights" for g in GATES]
    rnames = [f"{what}recurrent-to-{g} weights" for g in GATES]
    bnames = [f"{what}{g} gate bias" for g in GATES]
    require_inputs(
        ctx,
        (*iw[1:], *rw[1:], *b[1:], cell.output_state, cell.cell_state),
        (*names[1:], *rnames[1:], *bnames[1:], f"{what}output state", f"{what}cell state"),
    )
    s = check_rank(ctx, iw[3], names[3], 2)
    n_cell = s[0]
    ctx.check(
        n_cell > 0, f"input {iw[3]} ({names[3]}) must have at least one row (unit)", deferrable=True
    )
    ctx.check(
        s[1] == n_input,
        f"input {iw[3]} ({names[3]}) must have {n_input} columns (the input size), "
        f"got shape {list(s)}",
        deferrable=True,
    )
    s = check_rank(ctx, rw[3], rnames[3], 2)
    ctx.check(
        s[0] == n_cell,
        f"input {rw[3]} ({rnames[3]}) must have {n_cell} rows (the number of units), "
        f"got shape {list(s)}",
        deferrable=True,
    )
    n_output = s[1]

    cifg = not has(iw[0])
    ctx.check(
        has(iw[0]) == has(rw[0]),
        f"inputs {iw[0]} and {rw[0]} ({what}input-to-input and recurrent-to-input weights) "
        "must both be given or both be omitted (CIFG)",
        deferrable=True,
    )
    for k in range(4):
        if k or not cifg:
            check_shape(ctx, iw[k], names[k], (n_cell, n_input))
            check_shape(ctx, rw[k], rnames[k], (n_cell, n_output))

    p = [has(i) for i in pw]
    peephole = p[1] and p[2] and (p[0] or cifg)
    ctx.check(
        peephole or not any(p),
        f"inputs {list(pw)} ({what}peephole weights) must be all given (the cell-to-input "
        "weights may be omitted with CIFG) or all omitted",
        deferrable=True,
    )
    for k, i in enumerate(pw):
        if p[k]:
            gate = ("input", "forget", "output")[k]
            check_shape(ctx, i, f"{what}cell-to-{gate} weights", (n_cell,))

    if cifg:
        ctx.check(
            not has(b[0]), f"input {b[0]} ({bnames[0]}) must be omitted with CIFG", deferrable=True
        )
    else:
        ctx.check(
            has(b[0]), f"input {b[0]} ({bnames[0]}) is required without CIFG", deferrable=True
        )
    for k in range(4):
        if k or not cifg:
            check_shape(ctx, b[k], bnames[k], (n_cell,))

    projection = has(cell.projection_weights)
    projection_bias = has(cell.projection_bias)
    if projection:
        check_shape(ctx, cell.projection_weights, f"{what}projection weights", (n_output, n_cell))
    else:
        ctx.check(
            not projection_bias,
            f"input {cell.projection_bias} ({what}projection bias) is given without "
            "projection weights",
            deferrable=True,
        )
        # Android copies the cell output straight to the output (n_output values).
        ctx.check(
            n_output == n_cell,
            f"without projection the output size ({n_output}, from input {rw[3]}) must "
            f"equal the number of units ({n_cell})",
            deferrable=True,
        )
    if projection_bias:
        check_shape(ctx, cell.projection_bias, f"{what}projection bias", (n_output,))

    layer_norm = False
    if cell.layer_norm is not None:
        ln = cell.layer_norm
        q = [has(i) for i in ln]
        for k, i in enumerate(ln):
            if q[k]:
                check_shape(ctx, i, f"{what}{GATES[k]} layer norm weights", (n_cell,))
        if cifg:
            ctx.check(
                not q[0],
                f"input {ln[0]} ({what}input layer norm weights) must be omitted with CIFG",
                deferrable=True,
            )
            q = q[1:]
        ctx.check(
            all(q) or not any(q),
            f"inputs {list(ln)} ({what}layer norm weights) must be all given or all omitted",
            deferrable=True,
        )
        layer_norm = all(q)

    aux = False
    if cell.aux_weights is not None:
        a = cell.aux_weights
        q = [has(i) for i in a]
        if cifg:
            ctx.check(
                not q[0],
                f"input {a[0]} ({what}aux-input-to-input weights) must be omitted with CIFG",
                deferrable=True,
            )
        aux = q[1] and q[2] and q[3]
        ctx.check(
            (aux and (q[0] or cifg)) or not any(q),
            f"inputs {list(a)} ({what}auxiliary weights) must be all given (without the "
            "input gate's with CIFG) or all omitted",
            deferrable=True,
        )
        if aux:
            ctx.check(
                n_aux_input is not None,
                f"{what}auxiliary weights need an auxiliary input",
                deferrable=True,
            )
            for k in range(4):
                if k or not cifg:
                    name = f"{what}aux-input-to-{GATES[k]} weights"
                    check_shape(ctx, a[k], name, (n_cell, n_aux_input))

    check_shape(ctx, cell.output_state, f"{what}output state", (n_batch, n_output))
    check_shape(ctx, cell.cell_state, f"{what}cell state", (n_batch, n_cell))
    return CellConfig(
        n_cell, n_output, cifg, peephole, layer_norm, projection, projection_bias, aux
    )


@dataclass
class FloatCell:
    """One direction's weights as float32 arrays (None where the feature is off)."""

    config: CellConfig
    input_weights: list[np.ndarray | None]  # per gate, [n_cell, n_input]
    recurrent_weights: list[np.ndarray | None]
    aux_weights: list[np.ndarray | None]
    peephole: list[np.ndarray | None]  # per gate (None for the cell gate)
    bias: list[np.ndarray | None]
    layer_norm: list[np.ndarray | None]
    projection_weights: np.ndarray | None
    projection_bias: np.ndarray | None

    @staticmethod
    def load(ctx: OperationContext, cell: CellInputs, cfg: CellConfig) -> FloatCell:
        def get(i: int | None, on: bool = True) -> np.ndarray | None:
            return as_float32(ctx, i) if (i is not None and on) else None

        skip_input = [cfg.cifg, False, False, False]
        pw = cell.peephole
        peep = [pw[0], pw[1], None, pw[2]]
        ln = cell.layer_norm or (None,) * 4
        aux = cell.aux_weights or (None,) * 4
        return FloatCell(
            cfg,
            [get(i, not s) for i, s in zip(cell.input_weights, skip_input)],
            [get(i, not s) for i, s in zip(cell.recurrent_weights, skip_input)],
            [get(i, cfg.aux and not s) for i, s in zip(aux, skip_input)],
            [get(i, cfg.peephole and not s) for i, s in zip(peep, skip_input)],
            [get(i, not s) for i, s in zip(cell.bias, skip_input)],
            [get(i, cfg.layer_norm and not s) for i, s in zip(ln, skip_input)],
            get(cell.projection_weights, cfg.projection),
            get(cell.projection_bias, cfg.projection_bias),
        )


@dataclass(frozen=True)
class LstmParams:
    activation: int
    cell_clip: float
    proj_clip: float


def mean_stddev_normalization(v: np.ndarray) -> np.ndarray:
    """tflite ``MeanStddevNormalization`` over the last axis (float32, 1e-8 guard)."""
    n = F32(v.shape[-1])
    mean = v.sum(axis=-1, keepdims=True, dtype=F32) / n
    diff = v - mean
    variance = (diff * diff).sum(axis=-1, keepdims=True, dtype=F32) / n
    inv = F32(1) / np.sqrt(variance + F32(1e-8))
    return (diff * inv).astype(F32, copy=False)


def lstm_step(
    w: FloatCell,
    p: LstmParams,
    x: np.ndarray,
    aux: np.ndarray | None,
    h: np.ndarray,
    c: np.ndarray,
    *,
    want_scratch: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One time step of ``LSTMCell::LSTMStep`` on float32 [batch, ...] arrays.
    Returns (output = new output state, new cell state, scratch buffer or None)."""
    cfg = w.config
    g_act = LSTM_ACTIVATIONS[p.activation]

    def pre_activation(k: int) -> np.ndarray:
        # Bias first (zeros with layer norm), then the products, as Android accumulates.
        acc = x @ w.input_weights[k].T
        if not cfg.layer_norm:
            acc = w.bias[k] + acc
        if aux is not None and w.aux_weights[k] is not None:
            acc = acc + aux @ w.aux_weights[k].T
        return acc + h @ w.recurrent_weights[k].T

    def finish(k: int, acc: np.ndarray, state: np.ndarray) -> np.ndarray:
        if w.peephole[k] is not None:
            acc = acc + w.peephole[k] * state
        if cfg.layer_norm:
            acc = mean_stddev_normalization(acc) * w.layer_norm[k] + w.bias[k]
        return acc

    with np.errstate(over="ignore", invalid="ignore"):
        f = sigmoid(finish(1, pre_activation(1), c))
        if cfg.cifg:
            i = None
        else:
            i = sigmoid(finish(0, pre_activation(0), c))
        o_acc = pre_activation(3)
        g = g_act(finish(2, pre_activation(2), c))
        if cfg.cifg:
            f_or_1mf = F32(1) - f
            c_new = f * c + g * f_or_1mf
        else:
            f_or_1mf = f
            c_new = f * c + g * i
        if p.cell_clip > 0:
            c_new = np.clip(c_new, -p.cell_clip, p.cell_clip)
        o = sigmoid(finish(3, o_acc, c_new))
        g_c = g_act(c_new)
        hidden = o * g_c
        if cfg.projection:
            out = hidden @ w.projection_weights.T
            if w.projection_bias is not None:
                out = w.projection_bias + out
            if p.proj_clip > 0:
                out = np.clip(out, -p.proj_clip, p.proj_clip)
        else:
            out = hidden
    out = out.astype(F32, copy=False)
    c_new = c_new.astype(F32, copy=False)
    scratch = None
    if want_scratch:
        blocks = [g_c, f_or_1mf, hidden] if i is None else [i, g_c, f_or_1mf, hidden]
        n_batch = x.shape[0]
        scratch = np.concatenate([b.astype(F32).ravel() for b in blocks])
        scratch = scratch.reshape(n_batch, len(blocks) * cfg.n_cell)
    return out, c_new, scratch


def lstm_sequence(
    w: FloatCell,
    p: LstmParams,
    x: np.ndarray,
    aux: np.ndarray | None,
    h: np.ndarray,
    c: np.ndarray,
    *,
    forward: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``LSTMEvalFloat32`` on time-major input [time, batch, ...]: (outputs, h, c)."""
    n_time, n_batch = x.shape[0], x.shape[1]
    out = np.empty((n_time, n_batch, w.config.n_output), dtype=F32)
    steps = range(n_time) if forward else range(n_time - 1, -1, -1)
    for t in steps:
        h, c, _ = lstm_step(w, p, x[t], None if aux is None else aux[t], h, c)
        out[t] = h
    return out, h, c


def float_outputs(ctx: OperationContext, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Round float32 results to each output's storage dtype (float16 at the end; values
    beyond its range become infinities, as the C++ conversion gives)."""
    with np.errstate(over="ignore"):
        return [
            np.asarray(a).astype(storage_dtype(ctx.output_type(k)), copy=False)
            for k, a in enumerate(arrays)
        ]


def _check_clips(ctx: OperationContext, cell_clip: int, proj_clip: int) -> None:
    for i, name in ((cell_clip, "cell clip"), (proj_clip, "projection clip")):
        v = ctx.scalar(i)
        ctx.check(
            v >= 0,
            f"input {i} ({name}) must be >= 0 (0 disables clipping), got {v}",
            deferrable=True,
        )


def _lstm_params(ctx: OperationContext, act: int, cell_clip: int, proj_clip: int) -> LstmParams:
    return LstmParams(ctx.scalar(act), float_scalar(ctx, cell_clip), float_scalar(ctx, proj_clip))


# ---------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------

LSTM_CELL = CellInputs.at(1, 18, 19)
LSTM_CELL_LN = CellInputs.at(1, 18, 19, layer_norm=23)


def _lstm_signatures() -> tuple[Signature, ...]:
    sigs = []
    for (t, s), v in zip(FLOAT_TYPES, (V.V1_0, V.V1_2)):
        base = (t,) * 20 + (_T.INT32, s, s)
        sigs.append(Signature(base, (t,) * 4, v, LSTM_CELL.optional))
        sigs.append(Signature(base + (t,) * 4, (t,) * 4, V.V1_2, LSTM_CELL_LN.optional))
    return tuple(sigs)


def _lstm_cell_of(ctx: OperationContext) -> CellInputs:
    return LSTM_CELL_LN if ctx.num_inputs == 27 else LSTM_CELL


def _lstm_config(ctx: OperationContext) -> tuple[int, CellConfig]:
    require_inputs(ctx, (0,), ("input",))
    s = check_rank(ctx, 0, "input", 2)
    return s[0], check_cell(ctx, _lstm_cell_of(ctx), s[0], s[1])


def _validate_lstm(ctx: OperationContext) -> None:
    check_lstm_activation(ctx, 20)
    _check_clips(ctx, 21, 22)
    _lstm_config(ctx)


def _infer_lstm(ctx: OperationContext) -> list[Shape]:
    n_batch, cfg = _lstm_config(ctx)
    gates = 3 if cfg.cifg else 4
    return [
        (n_batch, cfg.n_cell * gates),
        (n_batch, cfg.n_output),
        (n_batch, cfg.n_cell),
        (n_batch, cfg.n_output),
    ]


@ieee_quiet
def _execute_lstm(ctx: OperationContext) -> list[np.ndarray]:
    _, cfg = _lstm_config(ctx)
    cell = _lstm_cell_of(ctx)
    w = FloatCell.load(ctx, cell, cfg)
    p = _lstm_params(ctx, 20, 21, 22)
    h = as_float32(ctx, cell.output_state)
    c = as_float32(ctx, cell.cell_state)
    out, c_new, scratch = lstm_step(w, p, as_float32(ctx, 0), None, h, c, want_scratch=True)
    return float_outputs(ctx, [scratch, out, c_new, out])


LSTM = OperationDeclaration(
    OperationType.LSTM,
    _lstm_signatures(),
    infer_shapes=_infer_lstm,
    execute=_execute_lstm,
    validate=_validate_lstm,
    summary="One LSTM time step (optional CIFG, peephole, projection, layer normalization).",
    notes=(
        "Checked beyond Android: input rank exactly 2, the state inputs' shapes, and "
        "output size == number of units when there is no projection.",
    ),
)


# ---------------------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------------------

UNI_CELL = CellInputs.at(1, 18, 19, layer_norm=24)


def _uni_lstm_signatures() -> tuple[Signature, ...]:
    sigs = []
    for t, s in FLOAT_TYPES:
        ins = (t,) * 20 + (_T.INT32, s, s, _T.BOOL) + (t,) * 4
        sigs.append(Signature(ins, (t,), V.V1_2, UNI_CELL.optional))
        sigs.append(Signature(ins, (t,) * 3, V.V1_3, UNI_CELL.optional))
    return tuple(sigs)


def _uni_lstm_config(ctx: OperationContext) -> tuple[int, int, CellConfig]:
    require_inputs(ctx, (0,), ("input",))
    s = check_rank(ctx, 0, "input", 3)
    time_major = bool(ctx.scalar(23))
    n_time, n_batch = (s[0], s[1]) if time_major else (s[1], s[0])
    return n_time, n_batch, check_cell(ctx, UNI_CELL, n_batch, s[2])


def _validate_uni_lstm(ctx: OperationContext) -> None:
    check_lstm_activation(ctx, 20)
    _check_clips(ctx, 21, 22)
    _uni_lstm_config(ctx)


def _infer_uni_lstm(ctx: OperationContext) -> list[Shape]:
    n_time, n_batch, cfg = _uni_lstm_config(ctx)
    time_major = bool(ctx.scalar(23))
    out = (n_time, n_batch, cfg.n_output) if time_major else (n_batch, n_time, cfg.n_output)
    shapes: list[Shape] = [out]
    if ctx.num_outputs == 3:
        shapes += [(n_batch, cfg.n_output), (n_batch, cfg.n_cell)]
    return shapes


@ieee_quiet
def _execute_uni_lstm(ctx: OperationContext) -> list[np.ndarray]:
    _, _, cfg = _uni_lstm_config(ctx)
    time_major = bool(ctx.scalar(23))
    w = FloatCell.load(ctx, UNI_CELL, cfg)
    p = _lstm_params(ctx, 20, 21, 22)
    x = to_time_major(as_float32(ctx, 0), time_major)
    h, c = as_float32(ctx, 18), as_float32(ctx, 19)
    out, h, c = lstm_sequence(w, p, x, None, h, c)
    results = [to_time_major(out, time_major)]
    if ctx.num_outputs == 3:
        results += [h, c]
    return float_outputs(ctx, results)


UNIDIRECTIONAL_SEQUENCE_LSTM = OperationDeclaration(
    OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM,
    _uni_lstm_signatures(),
    infer_shapes=_infer_uni_lstm,
    execute=_execute_uni_lstm,
    validate=_validate_uni_lstm,
    summary="An LSTM over a whole sequence (time-major or batch-major); 1.3 adds the "
    "final output and cell states as outputs.",
    notes=("Checked beyond Android: output size == number of units without projection.",),
)


# ---------------------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------------------

BI_FW = CellInputs.at(1, 35, 36, layer_norm=53, aux=40)
BI_BW = CellInputs.at(18, 37, 38, layer_norm=57, aux=44)
BI_AUX_INPUT = 39


def _bi_lstm_signatures() -> tuple[Signature, ...]:
    opt = BI_FW.optional | BI_BW.optional | {BI_AUX_INPUT}
    sigs = []
    for t, s in FLOAT_TYPES:
        ins = (t,) * 48 + (_T.INT32, s, s, _T.BOOL, _T.BOOL) + (t,) * 8
        for n_out, version in ((1, V.V1_2), (2, V.V1_2), (5, V.V1_3), (6, V.V1_3)):
            sigs.append(Signature(ins, (t,) * n_out, version, frozenset(opt)))
    return tuple(sigs)


@dataclass(frozen=True)
class _BiLayout:
    n_time: int
    n_batch: int
    fw: CellConfig
    bw: CellConfig
    parallel: bool  # aux input feeds the backward cell (parallel linking, HAL 1.3)


def _bi_lstm_config(ctx: OperationContext) -> _BiLayout:
    require_inputs(ctx, (0,), ("input",))
    s = check_rank(ctx, 0, "input", 3)
    time_major = bool(ctx.scalar(52))
    n_time, n_batch = (s[0], s[1]) if time_major else (s[1], s[0])
    merge = bool(ctx.scalar(51))
    allowed = (1, 5) if merge else (2, 6)
    ctx.check(
        ctx.num_outputs in allowed,
        f"with merge_outputs={merge} the operation has {' or '.join(map(str, allowed))} "
        f"outputs, got {ctx.num_outputs}",
        deferrable=True,
    )
    has_aux = is_present(ctx, BI_AUX_INPUT)
    n_aux = None
    if has_aux:
        a = check_rank(ctx, BI_AUX_INPUT, "auxiliary input", 3)
        ctx.check(
            a[:2] == s[:2],
            f"input {BI_AUX_INPUT} (auxiliary input) must match the input's first two "
            f"dimensions: {list(a)} vs {list(s)}",
            deferrable=True,
        )
        # Android's kernel walks the auxiliary input with the input's stride.
        ctx.check(
            a[2] == s[2],
            f"input {BI_AUX_INPUT} (auxiliary input) must have the input size {s[2]} as its "
            f"last dimension, got {list(a)}",
            deferrable=True,
        )
        n_aux = a[2]
    fw = check_cell(ctx, BI_FW, n_batch, s[2], what="forward ", n_aux_input=n_aux)
    bw = check_cell(ctx, BI_BW, n_batch, s[2], what="backward ", n_aux_input=n_aux)
    # Android keeps one LSTMParams for both directions.
    ctx.check(
        fw.features == bw.features,
        "the forward and backward cells must use the same options (CIFG, peephole, "
        f"layer norm, projection, projection bias): {fw.features} vs {bw.features}",
        deferrable=True,
    )
    ctx.check(
        fw.aux == bw.aux,
        "auxiliary weights must be given for both directions or for neither",
        deferrable=True,
    )
    return _BiLayout(n_time, n_batch, fw, bw, has_aux and not fw.aux)


def parallel_linking_declared(ctx: OperationContext, aux_input: int, aux_weights) -> bool:
    """An auxiliary input operand with every auxiliary weight omitted (NO_VALUE): the
    model asks for parallel linking, a HAL 1.3 feature. Decided from lifetimes, as a
    version must be known at validation even when the request may still omit the input."""
    return not ctx.is_omitted(aux_input) and all(ctx.is_omitted(i) for i in aux_weights)


def _validate_bi_lstm(ctx: OperationContext) -> None:
    aux_weights = (*BI_FW.aux_weights, *BI_BW.aux_weights)
    parallel = parallel_linking_declared(ctx, BI_AUX_INPUT, aux_weights)
    ctx.require_version(V.V1_3 if parallel else None)
    check_lstm_activation(ctx, 48)
    _check_clips(ctx, 49, 50)
    # Shape inference and the kernel check again with what the run gives.
    with contextlib.suppress(Unknown):
        _bi_lstm_config(ctx)


def _infer_bi_lstm(ctx: OperationContext) -> list[Shape]:
    lay = _bi_lstm_config(ctx)
    time_major = bool(ctx.scalar(52))
    merge = bool(ctx.scalar(51))
    lead = (lay.n_time, lay.n_batch) if time_major else (lay.n_batch, lay.n_time)
    if merge:
        shapes: list[Shape] = [(*lead, lay.fw.n_output + lay.bw.n_output)]
    else:
        shapes = [(*lead, lay.fw.n_output), (*lead, lay.bw.n_output)]
    if ctx.num_outputs > 2:
        b = lay.n_batch
        shapes += [
            (b, lay.fw.n_output),
            (b, lay.fw.n_cell),
            (b, lay.bw.n_output),
            (b, lay.bw.n_cell),
        ]
    return shapes


@ieee_quiet
def _execute_bi_lstm(ctx: OperationContext) -> list[np.ndarray]:
    lay = _bi_lstm_config(ctx)
    time_major = bool(ctx.scalar(52))
    merge = bool(ctx.scalar(51))
    p = _lstm_params(ctx, 48, 49, 50)
    x = to_time_major(as_float32(ctx, 0), time_major)
    aux = None
    if is_present(ctx, BI_AUX_INPUT):
        aux = to_time_major(as_float32(ctx, BI_AUX_INPUT), time_major)
    bw_x, cell_aux = x, aux
    if lay.parallel:
        bw_x, cell_aux = aux, None
    fw = FloatCell.load(ctx, BI_FW, lay.fw)
    bw = FloatCell.load(ctx, BI_BW, lay.bw)
    fw_out, fw_h, fw_c = lstm_sequence(fw, p, x, cell_aux, as_float32(ctx, 35), as_float32(ctx, 36))
    bw_out, bw_h, bw_c = lstm_sequence(
        bw, p, bw_x, cell_aux, as_float32(ctx, 37), as_float32(ctx, 38), forward=False
    )
    if merge:
        results = [to_time_major(np.concatenate([fw_out, bw_out], axis=2), time_major)]
    else:
        results = [to_time_major(fw_out, time_major), to_time_major(bw_out, time_major)]
    if ctx.num_outputs > 2:
        results += [fw_h, fw_c, bw_h, bw_c]
    return float_outputs(ctx, results)


BIDIRECTIONAL_SEQUENCE_LSTM = OperationDeclaration(
    OperationType.BIDIRECTIONAL_SEQUENCE_LSTM,
    _bi_lstm_signatures(),
    infer_shapes=_infer_bi_lstm,
    execute=_execute_bi_lstm,
    validate=_validate_bi_lstm,
    summary="Forward and backward LSTMs over a sequence, outputs merged or separate, with "
    "an optional auxiliary input (cross- or parallel-linked); 1.3 adds the final states.",
    notes=(
        "Auxiliary input without auxiliary weights (parallel linking: it is the backward "
        "cell's input) needs HAL 1.3.",
        "Checked beyond Android: both directions use the same options (Android keeps one "
        "LSTMParams), the auxiliary input has the input's size (Android walks it with the "
        "input's stride), output size == number of units without projection.",
    ),
)


def checked_log2(x: float) -> tuple[bool, int]:
    """tflite ``CheckedLog2`` in float32: (is a power of two within 1e-3, rounded log2)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log(F32(x)) * (F32(1) / np.log(F32(2)))
    if not np.isfinite(lg):
        return False, 0
    rounded = float(np.sign(lg) * np.floor(abs(lg) + F32(0.5)))
    return abs(float(F32(lg) - F32(rounded))) < 1e-3, int(rounded)


def _mbqm(x, multiplier_shift: tuple[int, int]):
    m, s = multiplier_shift
    return multiply_by_quantized_multiplier(x, m, s)


def _int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer ``a @ b`` (int64); BLAS float64 is exact for these small integers."""
    return np.rint(a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)


# ---------------------------------------------------------------------------------------
# QUANTIZED_16BIT_LSTM
# ---------------------------------------------------------------------------------------

_Q16_NAMES = (
    "input",
    *(f"input-to-{g} weights" for g in GATES),
    *(f"recurrent-to-{g} weights" for g in GATES),
    *(f"{g} gate bias" for g in GATES),
    "previous cell state",
    "previous output",
)


def _q16_signatures() -> tuple[Signature, ...]:
    q8, i32, q16 = _T.TENSOR_QUANT8_ASYMM, _T.TENSOR_INT32, _T.TENSOR_QUANT16_SYMM
    ins = (q8,) * 9 + (i32,) * 4 + (q16, q8)
    return (Signature(ins, (q16, q8), V.V1_2),)


def _f32_eq(a: float, b: float) -> bool:
    return bool(F32(a) == F32(b))


def _validate_q16(ctx: OperationContext) -> None:
    for i in (0, 14):
        ctx.check(
            _f32_eq(ctx.input_scale(i), 1 / 128) and ctx.input_zero_point(i) == 128,
            f"input {i} ({_Q16_NAMES[i]}) must have scale 1/128 and zero point 128, got "
            f"scale {ctx.input_scale(i)}, zero point {ctx.input_zero_point(i)}",
            deferrable=True,
        )
    ws, wz = ctx.input_scale(1), ctx.input_zero_point(1)
    for i in range(2, 9):
        ctx.check(
            _f32_eq(ctx.input_scale(i), ws) and ctx.input_zero_point(i) == wz,
            f"input {i} ({_Q16_NAMES[i]}) must have the input-to-input weights' scale {ws} "
            f"and zero point {wz}, got {ctx.input_scale(i)}, {ctx.input_zero_point(i)}",
            deferrable=True,
        )
    for i in range(9, 13):
        # Android compares the float bias scale, widened, with weightsScale / 128.0.
        ok = float(F32(ctx.input_scale(i))) == float(F32(ws)) / 128.0
        ctx.check(
            ok and ctx.input_zero_point(i) == 0,
            f"input {i} ({_Q16_NAMES[i]}) must have scale weightsScale/128 = {ws / 128} and "
            f"zero point 0, got {ctx.input_scale(i)}, {ctx.input_zero_point(i)}",
            deferrable=True,
        )
    ok, log2 = checked_log2(ctx.input_scale(13))
    ctx.check(
        ok and log2 == -11 and ctx.input_zero_point(13) == 0,
        f"input 13 (previous cell state) must have scale 2^-11 (4 integer bits) and zero "
        f"point 0, got scale {ctx.input_scale(13)}, zero point {ctx.input_zero_point(13)}",
        deferrable=True,
    )
    # NeuralNetworks.h fixes the outputs' quantization; Android's QuantizedLSTMCell::prepare
    # copies the previous cell state's and previous output's, and CpuExecutor fails a
    # model output that declares another (a temporary silently takes the copied one).
    for k, i in ((0, 13), (1, 14)):
        ctx.check(
            _f32_eq(ctx.output_scale(k), ctx.input_scale(i))
            and ctx.output_zero_point(k) == ctx.input_zero_point(i),
            f"output {k} must have the scale and zero point of input {i} ({_Q16_NAMES[i]}): "
            f"({ctx.output_scale(k)}, {ctx.output_zero_point(k)}) vs "
            f"({ctx.input_scale(i)}, {ctx.input_zero_point(i)})",
            deferrable=True,
        )
    _q16_sizes(ctx)


def _q16_sizes(ctx: OperationContext) -> tuple[int, int, int]:
    require_inputs(ctx, range(15), _Q16_NAMES)
    s = check_rank(ctx, 0, "input", 2)
    n_batch, n_input = s
    po = check_rank(ctx, 14, "previous output", 2)
    ctx.check(
        po[0] == n_batch,
        f"input 14 (previous output) must have {n_batch} rows, got {list(po)}",
        deferrable=True,
    )
    n_output = po[1]
    for k in range(4):
        check_shape(ctx, 1 + k, _Q16_NAMES[1 + k], (n_output, n_input))
        check_shape(ctx, 5 + k, _Q16_NAMES[5 + k], (n_output, n_output))
        check_shape(ctx, 9 + k, _Q16_NAMES[9 + k], (n_output,))
    check_shape(ctx, 13, "previous cell state", (n_batch, n_output))
    return n_batch, n_input, n_output


def _infer_q16(ctx: OperationContext) -> list[Shape]:
    n_batch, _, n_output = _q16_sizes(ctx)
    return [(n_batch, n_output), (n_batch, n_output)]


def quantized_lstm_cell(
    x: np.ndarray,
    prev_output: np.ndarray,
    weights: Sequence[np.ndarray],
    biases: Sequence[np.ndarray],
    bias_scale: float,
    prev_cell: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """tflite ``LstmCell<4>`` (uint8 activations, int16 state). ``weights`` are the four
    gates' [n_output, n_input + n_output] blocks (input gate, cell, forget, output) minus
    their zero point, as int64,
    ``biases`` their int32 biases. Returns (new cell state int16, output uint8)."""
    concat = np.concatenate([x, prev_output], axis=1).astype(np.int64) - 128
    accum_mult = quantize_multiplier(4096.0 * float(F32(bias_scale)))  # validated scales
    fx = FX16
    acts = []
    for w, b in zip(weights, biases):
        acc = FX32.wrap(_int_matmul(concat, w.T) + b)
        acc = _mbqm(acc, accum_mult)
        acts.append(np.clip(acc, -32768, 32767))
    input_gate = int16_activation("logistic", acts[0], 3)
    input_modulation = int16_activation("tanh", acts[1], 3)
    forget_gate = int16_activation("logistic", acts[2], 3)
    output_gate = int16_activation("logistic", acts[3], 3)
    input_times_modulation = fx.mul(input_gate, input_modulation)  # F0
    prev_state = prev_cell.astype(np.int64)  # F4
    prev_times_forget = fx.mul(forget_gate, prev_state)  # F0 * F4 = F4
    new_state = fx.saturating_add(fx.rescale(input_times_modulation, 0, 4), prev_times_forget)
    new_state_f3 = fx.rescale(new_state, 4, 3)
    output_activ = fx.mul(output_gate, int16_activation("tanh", new_state_f3, 3))  # F0
    rescaled = rounding_divide_by_pot(output_activ, 8)
    out = 128 + np.clip(rescaled, -128, 127)
    return new_state.astype(np.int16), out.astype(np.uint8)


def _execute_q16(ctx: OperationContext) -> list[np.ndarray]:
    _q16_sizes(ctx)
    n_batch, n_input, n_output = _q16_sizes(ctx)
    x, prev_output, prev_cell = ctx.value(0), ctx.value(14), ctx.value(13)
    # Gate order of tflite's LstmCell: input, cell (input modulation), forget, output.
    order = (0, 2, 1, 3)
    zero_point = ctx.input_zero_point(1)
    weights = [
        np.concatenate([ctx.value(1 + g), ctx.value(5 + g)], axis=1).astype(np.int64) - zero_point
        for g in order
    ]
    biases = [ctx.value(9 + g).astype(np.int64) for g in order]
    bias_scale = ctx.input_scale(9)
    state = np.empty((n_batch, n_output), dtype=np.int16)
    out = np.empty((n_batch, n_output), dtype=np.uint8)
    for rows in item_blocks(n_batch, n_input + n_output, BATCH_BLOCK_ELEMENTS):
        state[rows], out[rows] = quantized_lstm_cell(
            x[rows], prev_output[rows], weights, biases, bias_scale, prev_cell[rows]
        )
    return [state, out]


QUANTIZED_16BIT_LSTM = OperationDeclaration(
    OperationType.QUANTIZED_16BIT_LSTM,
    _q16_signatures(),
    infer_shapes=_infer_q16,
    execute=_execute_q16,
    validate=_validate_q16,
    summary="One quantized LSTM step: uint8 input/output (scale 1/128, zero point 128), "
    "uint8 weights, int32 biases, int16 cell state with 4 integer bits.",
    notes=(
        "The outputs have the previous cell state's and previous output's quantization "
        "(as NeuralNetworks.h says; Android's executor gives them those and fails a model "
        "output declaring another).",
    ),
)


# ---------------------------------------------------------------------------------------
# QUANTIZED_LSTM (QLSTM.cpp)
# ---------------------------------------------------------------------------------------

QLSTM_CELL = CellInputs.at(1, 18, 19, layer_norm=20)
_QLSTM_INTERMEDIATE = (26, 27, 28, 29)  # input, forget, cell, output intermediate scales


def _qlstm_signatures() -> tuple[Signature, ...]:
    s8, w8, q16, i32 = (
        _T.TENSOR_QUANT8_ASYMM_SIGNED,
        _T.TENSOR_QUANT8_SYMM,
        _T.TENSOR_QUANT16_SYMM,
        _T.TENSOR_INT32,
    )
    f = _T.FLOAT32
    ins = (
        (s8,)
        + (w8,) * 8
        + (q16,) * 3
        + (i32,) * 4
        + (w8, i32, s8, q16)
        + (q16,) * 4
        + (f,) * 6
        + (_T.INT32, f)
    )
    return (Signature(ins, (s8, q16, s8), V.V1_3, QLSTM_CELL.optional),)


def _qlstm_config(ctx: OperationContext) -> tuple[int, int, CellConfig]:
    require_inputs(ctx, (0,), ("input",))
    s = check_rank(ctx, 0, "input", 2)
    return s[0], s[1], check_cell(ctx, QLSTM_CELL, s[0], s[1])


def _cell_shift(ctx: OperationContext) -> int:
    ok, shift = checked_log2(ctx.input_scale(19))
    ctx.check(
        ok and -15 <= shift <= -9,
        f"input 19 (cell state) must have a power-of-two scale between 2^-15 and 2^-9, "
        f"got {ctx.input_scale(19)}",
        deferrable=True,
    )
    return shift


def _validate_qlstm(ctx: OperationContext) -> None:
    _cell_shift(ctx)
    try:
        gated_input = is_present(ctx, 1)
    except Unknown:
        gated_input = False  # decided at run time
    for k, i in enumerate(_QLSTM_INTERMEDIATE):
        if k == 0 and not gated_input:
            continue  # unused with CIFG
        v = ctx.scalar(i)
        ctx.check(
            math.isfinite(v) and v > 0,
            f"input {i} ({GATES[k]} intermediate scale) must be positive, got {v}",
            deferrable=True,
        )
    hs = ctx.scalar(31)
    ctx.check(
        math.isfinite(hs) and hs > 0,
        f"input 31 (hidden state scale) must be positive, got {hs}",
        deferrable=True,
    )
    _, _, cfg = _qlstm_config(ctx)
    _qlstm_scales(ctx, cfg, _cell_shift(ctx))


def _infer_qlstm(ctx: OperationContext) -> list[Shape]:
    n_batch, _, cfg = _qlstm_config(ctx)
    return [(n_batch, cfg.n_output), (n_batch, cfg.n_cell), (n_batch, cfg.n_output)]


def _f32(x: float) -> float:
    return float(F32(x))


def _matmul_accumulate(x, bias, w, mult, acc, lo: int, hi: int, zero_point: int = 0):
    """``MatrixBatchVectorMultiplyAccumulate`` (int8 x int8 -> int16/int8 accumulators):
    ``acc + MultiplyByQuantizedMultiplier(bias + x . w) + zero_point``, saturated."""
    dot = FX32.wrap(_int_matmul(x.astype(np.int64), w.astype(np.int64).T) + bias)
    return np.clip(_mbqm(dot, mult) + zero_point + acc, lo, hi)


def _layer_norm_int(v, weights, bias, mult: tuple[int, int], variance_limit: int):
    """``ApplyLayerNorm`` (int16 in and out, per batch row)."""
    n = v.shape[-1]
    v = v.astype(np.int64)
    total = v.sum(axis=-1, keepdims=True)
    sum_sq = (v * v).sum(axis=-1, keepdims=True)
    t = total * 1024
    mean = np.where(t >= 0, t // n, -((-t) // n))  # C++ division truncates
    temp = (1 << 20) // n
    variance = sum_sq * temp - mean * mean
    variance2 = np.where(variance >= 0, variance // (1 << 20), -((-variance) // (1 << 20)))
    variance2 = FX32.wrap(variance2)
    variance2 = np.where(variance2 < 1, variance_limit, variance2)
    inv_a, inv_b = inv_sqrt_quantized_multiplier_exp(variance2, -1)
    shifted = FX32.wrap(1024 * v - mean)
    rescaled = multiply_by_quantized_multiplier(shifted, inv_a, inv_b)
    val3 = FX32.wrap(rescaled * weights.astype(np.int64) + bias)  # int32 arithmetic in C++
    biased = np.where(val3 > 0, val3 + 512, val3 - 512)
    val4 = np.where(biased >= 0, biased // 1024, -((-biased) // 1024))
    val5 = multiply_by_quantized_multiplier(val4, mult[0], mult[1] + 12)
    return np.clip(val5, -32768, 32767)


_MAX_MULTIPLIER = 2.0**31  # beyond it tflite's left shift overflows int32


@dataclass(frozen=True)
class _QlstmScales:
    """The fixed-point multipliers (QuantizeMultiplier pairs) of one QUANTIZED_LSTM."""

    input_products: list[tuple[int, int] | None]  # per gate
    recurrent_products: list[tuple[int, int] | None]
    peephole: list[tuple[int, int] | None]  # per gate (None for the cell gate)
    layer_norm: list[tuple[int, int] | None]
    hidden: tuple[int, int]
    projection: tuple[int, int] | None


def _qlstm_scales(ctx: OperationContext, cfg: CellConfig, cell_shift: int) -> _QlstmScales:
    """Effective scales as QLSTM.cpp computes them (float32 products and quotients; the
    peephole and hidden ones in double), each checked finite and representable."""
    cell = QLSTM_CELL
    inter = [float_scalar(ctx, i) for i in _QLSTM_INTERMEDIATE]
    hidden_scale = float_scalar(ctx, 31)

    def multiplier(real: float, what: str) -> tuple[int, int]:
        ctx.check(
            math.isfinite(real) and 0 <= real < _MAX_MULTIPLIER,
            f"the {what} effective scale {real} is out of range (must be finite, < 2^31)",
            deferrable=True,
        )
        return quantize_multiplier(real)

    def product(w: int, other: float, k: int, what: str) -> tuple[int, int]:
        real = _f32(F32(ctx.input_scale(w)) * F32(other) / F32(inter[k]))
        return multiplier(real, what)

    gates = [k for k in range(4) if not (k == 0 and cfg.cifg)]
    in_prod: list = [None] * 4
    rec_prod: list = [None] * 4
    peep: list = [None] * 4
    ln: list = [None] * 4
    out_scale = ctx.input_scale(18)
    for k in gates:
        g = GATES[k]
        in_prod[k] = product(cell.input_weights[k], ctx.input_scale(0), k, f"input-to-{g}")
        rec_prod[k] = product(cell.recurrent_weights[k], out_scale, k, f"recurrent-to-{g}")
        if cfg.peephole and k != 2:
            pw = cell.peephole[(0, 1, None, 2)[k]]
            real = _f32(2.0**cell_shift * _f32(ctx.input_scale(pw)) / inter[k])
            peep[k] = multiplier(real, f"cell-to-{g}")
        if cfg.layer_norm:
            ln[k] = multiplier(_f32(ctx.input_scale(cell.layer_norm[k])), f"{g} layer norm")
    hidden = multiplier(_f32(2.0**-15 / hidden_scale * 2.0**-15), "hidden state")
    projection = None
    if cfg.projection:
        real = _f32(
            F32(ctx.input_scale(cell.projection_weights)) * F32(hidden_scale) / F32(out_scale)
        )
        projection = multiplier(real, "projection")
    return _QlstmScales(in_prod, rec_prod, peep, ln, hidden, projection)


def _quantized_clip(clip: float, scale: float, limit: int) -> int:
    """QLSTM.cpp's quantized clip: 0 unless ``clip > 0``, else ``clip / scale`` (float32)
    clamped to the storage range and truncated by the integer cast."""
    if not clip > 0:
        return 0
    return int(min(max(F32(clip) / F32(scale), F32(-limit - 1)), F32(limit)))


def _execute_qlstm(ctx: OperationContext) -> list[np.ndarray]:
    n_batch, n_input, cfg = _qlstm_config(ctx)
    cell_shift = _cell_shift(ctx)
    scales = _qlstm_scales(ctx, cfg, cell_shift)
    n_cell, n_output = cfg.n_cell, cfg.n_output
    cell = QLSTM_CELL
    input_zp, out_zp = ctx.input_zero_point(0), ctx.input_zero_point(18)
    hidden_zp = ctx.scalar(30)
    # QLSTM.cpp (as tflite's integer LSTM) clips only when the *quantized* clip is
    # positive: a clip below one cell-state step truncates to 0 and disables clipping.
    # It quantizes the projection clip with the projection weights' scale.
    cell_clip = _quantized_clip(float_scalar(ctx, 24), ctx.input_scale(19), 32767)
    proj_clip = (
        _quantized_clip(float_scalar(ctx, 25), ctx.input_scale(cell.projection_weights), 127)
        if cfg.projection
        else 0
    )

    def zp_bias(zero_point: int, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """``PrecomputeZeroPointTimesWeightWithBias``: bias + zero_point * row sums."""
        b = np.zeros(w.shape[0], dtype=np.int64) if bias is None else bias.astype(np.int64)
        return FX32.wrap(b + zero_point * w.astype(np.int64).sum(axis=1))

    # Per gate: (input weights, their zero-point bias, recurrent weights, theirs). Without
    # layer norm the gate bias rides in the input product's precomputed bias (tflite);
    # with it, layer normalization adds it.
    products: list[tuple | None] = [None] * 4
    for k in range(4):
        if k == 0 and cfg.cifg:
            continue
        wi = ctx.value(cell.input_weights[k])
        wr = ctx.value(cell.recurrent_weights[k])
        bias = None if cfg.layer_norm else ctx.value(cell.bias[k])
        products[k] = (wi, zp_bias(-input_zp, wi, bias), wr, zp_bias(-out_zp, wr, None))
    if cfg.projection:
        pw = ctx.value(cell.projection_weights)
        pb = ctx.value(cell.projection_bias) if cfg.projection_bias else None
        projection = (pw, zp_bias(hidden_zp, pw, pb))

    def rows(x: np.ndarray, h_prev: np.ndarray, c_prev: np.ndarray) -> tuple:
        """The cell on a block of batch rows (int64 arrays): (output, new cell state)."""
        gates: list[np.ndarray | None] = [None] * 4
        for k, product in enumerate(products):
            if product is None:
                continue
            wi, wi_bias, wr, wr_bias = product
            acc = np.zeros((x.shape[0], n_cell), dtype=np.int64)
            acc = _matmul_accumulate(x, wi_bias, wi, scales.input_products[k], acc, -32768, 32767)
            gates[k] = _matmul_accumulate(
                h_prev, wr_bias, wr, scales.recurrent_products[k], acc, -32768, 32767
            )

        def peephole(k: int, state: np.ndarray) -> None:
            if scales.peephole[k] is None:
                return
            pw = cell.peephole[(0, 1, None, 2)[k]]
            prod = _mbqm(ctx.value(pw).astype(np.int64) * state, scales.peephole[k])
            gates[k] = np.clip(prod + gates[k], -32768, 32767)

        def normalize(k: int) -> None:
            if not cfg.layer_norm:
                return
            li = cell.layer_norm[k]
            # QLSTM.cpp's variance guard ("InvLargeValue"): min(1, int(10000 * scale)).
            limit = min(1, int(F32(10000) * F32(ctx.input_scale(li))))
            gates[k] = _layer_norm_int(
                gates[k],
                ctx.value(li),
                ctx.value(cell.bias[k]).astype(np.int64),
                scales.layer_norm[k],
                limit,
            )

        # Forget gate.
        peephole(1, c_prev)
        normalize(1)
        forget = int16_activation("logistic", gates[1], 3)
        # Cell (modulation) gate.
        normalize(2)
        cell_gate = int16_activation("tanh", gates[2], 3)
        # Input gate.
        if cfg.cifg:
            input_gate = 32767 - forget  # Sub1Vector
        else:
            peephole(0, c_prev)
            normalize(0)
            input_gate = int16_activation("logistic", gates[0], 3)
        # Cell update: CwiseMul with rounding shifts (results cast to int16), CwiseAdd.
        kept = FX16.wrap(rounding_divide_by_pot(forget * c_prev, 15))
        added = FX16.wrap(rounding_divide_by_pot(input_gate * cell_gate, 30 + cell_shift))
        c_new = np.clip(kept + added, -32768, 32767)
        if cell_clip > 0:
            c_new = np.clip(c_new, -cell_clip, cell_clip)
        # Output gate (peephole on the new cell state).
        peephole(3, c_new)
        normalize(3)
        output_gate = int16_activation("logistic", gates[3], 3)
        # Hidden state: output gate * tanh(cell) in the hidden scale. tflite's CwiseMul
        # subtracts the zero point and the projection's precomputed bias adds it back.
        tanh_c = int16_activation("tanh", c_new, 15 + cell_shift)
        hidden = np.clip(_mbqm(output_gate * tanh_c, scales.hidden) - hidden_zp, -128, 127)
        if not cfg.projection:
            return hidden, c_new
        pw, pw_bias = projection
        zeros = np.zeros((x.shape[0], n_output), dtype=np.int64)
        out = _matmul_accumulate(hidden, pw_bias, pw, scales.projection, zeros, -128, 127, out_zp)
        if proj_clip > 0:
            out = np.clip(out, -proj_clip, proj_clip)
        return out, c_new

    x, h_prev, c_prev = ctx.value(0), ctx.value(18), ctx.value(19)
    out8 = np.empty((n_batch, n_output), dtype=np.int8)
    c_out = np.empty((n_batch, n_cell), dtype=np.int16)
    for block in item_blocks(n_batch, max(n_input, n_cell, n_output), BATCH_BLOCK_ELEMENTS):
        wide = [v[block].astype(np.int64) for v in (x, h_prev, c_prev)]
        out8[block], c_out[block] = rows(*wide)
    return [out8, c_out, out8.copy()]


QUANTIZED_LSTM = OperationDeclaration(
    OperationType.QUANTIZED_LSTM,
    _qlstm_signatures(),
    infer_shapes=_infer_qlstm,
    execute=_execute_qlstm,
    validate=_validate_qlstm,
    summary="One integer LSTM step: int8 input and output state, int8 weights, int16 "
    "cell state and gates; optional CIFG, peephole, projection, layer normalization.",
    notes=(
        "The cell state scale must be a power of two between 2^-15 and 2^-9 (Android "
        "fails below 2^-9 at run time and has no tanh for the others).",
        "Without layer normalization the gate biases are added with the input products, "
        "as tflite's integer LSTM does.",
        "The projection clip is quantized with the projection weights' scale, as QLSTM.cpp "
        "does; a clip that quantizes to 0 disables clipping (QLSTM.cpp tests the quantized "
        "value); the hidden state is stored as value - hiddenStateZeroPoint (tflite's "
        "CwiseMul) and the projection's precomputed bias adds the zero point back.",
        "Checked beyond Android: positive intermediate and hidden state scales, output "
        "size == number of units without projection.",
    ),
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    LSTM,
    UNIDIRECTIONAL_SEQUENCE_LSTM,
    BIDIRECTIONAL_SEQUENCE_LSTM,
    QUANTIZED_16BIT_LSTM,
    QUANTIZED_LSTM,
)
