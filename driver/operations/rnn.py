"""Simple recurrent cells: RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, SVDF.

Numerics follow Android 11's CPU kernels (``RNN.cpp``, ``UnidirectionalSequenceRNN.cpp``,
``BidirectionalSequenceRNN.cpp``, ``SVDF.cpp``):

* RNN step (``RNN::RNNStep``): ``h = activation(bias + W x [+ W_aux aux] + R h_prev)``,
  the output equal to the new hidden state. Float32 throughout. Android's float16 RNN
  kernels compute in ``_Float16``; here each step computes in float32 and rounds the
  step's result to float16, so the hidden state carried between steps is float16 as on
  Android (individual products may differ by float16 rounding, well within the float16
  criteria).
* SVDF (``SVDF::EvalFloat32``): the state holds ``memory_size`` values per filter (rank x
  units filters); the newest activation ``W_feature x`` enters the last column, each
  filter's memory is dotted with ``weights_time``, ``rank`` consecutive filters are summed
  per unit, the bias and activation applied, and the state shifted left one column.
  Note the state is ``memory_size * num_filters`` wide, as Android's kernel and CTS use
  (NeuralNetworks.h says ``memory_size - 1``). Float16 runs in float32 and rounds once.

Activations are FuseCode values (0 none, 1 relu, 2 relu1, 3 relu6) as documented.

Every rejection these validate hooks make is deferrable (:class:`HalError`
``deferrable``): Android 11 validates RNN and SVDF in ``Utils.cpp`` ``validateOperation``
and the sequence RNNs in their ``validate()``, on operand counts, types and HAL versions
only (BIDIRECTIONAL_SEQUENCE_RNN's: "Exact number [of outputs] is dependent on the
mergeOutputs parameter and checked during preparation"). Ranks, shapes, the
activation, time-major, rank (SVDF) values and the auxiliary input/weights grouping are
checked in ``prepare()`` (``RNN::Prepare``, ``SVDF::Prepare``, the sequence RNNs'
``prepare``), at execution. The parallel-linking HAL version is checked first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from driver.hal.types import HalVersion, OperationType
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Signature,
    Unknown,
)
from driver.operations.base import T as _T
from driver.operations.lstm import (
    F32,
    as_float32,
    check_rank,
    check_shape,
    float_outputs,
    ieee_quiet,
    is_present,
    parallel_linking_declared,
    relu6,
    require_inputs,
    to_time_major,
)

V = HalVersion
TENSOR_FLOAT_TYPES = (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)

FUSE_ACTIVATIONS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    0: lambda x: x,
    1: lambda x: np.maximum(x, F32(0)),
    2: lambda x: np.clip(x, F32(-1), F32(1)),
    3: relu6,  # NaN gives 0, as Android's ActivationFunctor / tflite's ApplyRelu6ToVector
}


def check_fuse_code(ctx: OperationContext, i: int) -> int:
    act = ctx.scalar(i)
    ctx.check(
        act in FUSE_ACTIVATIONS,
        f"input {i} (fused activation) must be a FuseCode 0..3, got {act}",
        deferrable=True,
    )
    return act


def _round_like_output(ctx: OperationContext, x: np.ndarray) -> np.ndarray:
    """A float16 operation's per-step result, rounded to float16 (and back to compute)."""
    if ctx.output_type(0) == _T.TENSOR_FLOAT16:
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(F32)
    return x


@dataclass
class RnnWeights:
    weights: np.ndarray  # [units, input]
    recurrent: np.ndarray  # [units, units]
    bias: np.ndarray  # [units]
    aux: np.ndarray | None = None  # [units, aux input]


def rnn_step(
    w: RnnWeights,
    activation: int,
    x: np.ndarray,
    aux: np.ndarray | None,
    h: np.ndarray,
) -> np.ndarray:
    """``RNN::RNNStep``: the new hidden state (= the step's output), float32."""
    acc = w.bias + x @ w.weights.T
    if aux is not None and w.aux is not None:
        acc = acc + aux @ w.aux.T
    acc = acc + h @ w.recurrent.T
    return FUSE_ACTIVATIONS[activation](acc).astype(F32, copy=False)


def rnn_sequence(
    ctx: OperationContext,
    w: RnnWeights,
    activation: int,
    x: np.ndarray,
    aux: np.ndarray | None,
    h: np.ndarray,
    *,
    forward: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Run over time-major ``x`` [time, batch, input]: (outputs [time, batch, units], h)."""
    n_time, n_batch = x.shape[0], x.shape[1]
    out = np.empty((n_time, n_batch, w.weights.shape[0]), dtype=F32)
    steps = range(n_time) if forward else range(n_time - 1, -1, -1)
    for t in steps:
        h = _round_like_output(
            ctx, rnn_step(w, activation, x[t], None if aux is None else aux[t], h)
        )
        out[t] = h
    return out, h


def _check_rnn_weights(
    ctx: OperationContext, first: int, hidden: int, n_batch: int, n_input: int, what: str = ""
) -> int:
    """Weights, recurrent weights, bias and hidden state at ``first``..: the unit count."""
    s = check_rank(ctx, first, f"{what}weights", 2)
    n_units = s[0]
    ctx.check(
        s[1] == n_input,
        f"input {first} ({what}weights) must have {n_input} columns (the input size), "
        f"got shape {list(s)}",
        deferrable=True,
    )
    check_shape(ctx, first + 1, f"{what}recurrent weights", (n_units, n_units))
    check_shape(ctx, first + 2, f"{what}bias", (n_units,))
    check_shape(ctx, hidden, f"{what}hidden state", (n_batch, n_units))
    return n_units


def _load_rnn(ctx: OperationContext, first: int, aux: int | None = None) -> RnnWeights:
    return RnnWeights(
        as_float32(ctx, first),
        as_float32(ctx, first + 1),
        as_float32(ctx, first + 2),
        None if aux is None else as_float32(ctx, aux),
    )


# ---------------------------------------------------------------------------------------
# RNN
# ---------------------------------------------------------------------------------------


def _rnn_sizes(ctx: OperationContext) -> tuple[int, int]:
    s = check_rank(ctx, 0, "input", 2)
    return s[0], _check_rnn_weights(ctx, 1, 4, s[0], s[1])


def _validate_rnn(ctx: OperationContext) -> None:
    check_fuse_code(ctx, 5)
    _rnn_sizes(ctx)


def _infer_rnn(ctx: OperationContext) -> list[Shape]:
    n_batch, n_units = _rnn_sizes(ctx)
    return [(n_batch, n_units), (n_batch, n_units)]


@ieee_quiet
def _execute_rnn(ctx: OperationContext) -> list[np.ndarray]:
    h = rnn_step(_load_rnn(ctx, 1), ctx.scalar(5), as_float32(ctx, 0), None, as_float32(ctx, 4))
    return float_outputs(ctx, [h, h])


RNN = OperationDeclaration(
    OperationType.RNN,
    tuple(
        Signature((t,) * 5 + (_T.INT32,), (t, t), v)
        for t, v in zip(TENSOR_FLOAT_TYPES, (V.V1_0, V.V1_2))
    ),
    infer_shapes=_infer_rnn,
    execute=_execute_rnn,
    validate=_validate_rnn,
    summary="One step of a fully connected recurrent cell; outputs the new hidden state "
    "twice (state and output).",
)


# ---------------------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------------------


def _uni_rnn_sizes(ctx: OperationContext) -> tuple[int, int, int, bool]:
    time_major = ctx.scalar(6)
    ctx.check(
        time_major in (0, 1),
        f"input 6 (time major) must be 0 or 1, got {time_major}",
        deferrable=True,
    )
    s = check_rank(ctx, 0, "input", 3)
    n_time, n_batch = (s[0], s[1]) if time_major else (s[1], s[0])
    return n_time, n_batch, _check_rnn_weights(ctx, 1, 4, n_batch, s[2]), bool(time_major)


def _validate_uni_rnn(ctx: OperationContext) -> None:
    check_fuse_code(ctx, 5)
    _uni_rnn_sizes(ctx)


def _infer_uni_rnn(ctx: OperationContext) -> list[Shape]:
    n_time, n_batch, n_units, time_major = _uni_rnn_sizes(ctx)
    shapes: list[Shape] = [(n_time, n_batch, n_units) if time_major else (n_batch, n_time, n_units)]
    if ctx.num_outputs == 2:
        shapes.append((n_batch, n_units))
    return shapes


@ieee_quiet
def _execute_uni_rnn(ctx: OperationContext) -> list[np.ndarray]:
    _, _, _, time_major = _uni_rnn_sizes(ctx)
    x = to_time_major(as_float32(ctx, 0), time_major)
    out, h = rnn_sequence(ctx, _load_rnn(ctx, 1), ctx.scalar(5), x, None, as_float32(ctx, 4))
    results = [to_time_major(out, time_major)]
    if ctx.num_outputs == 2:
        results.append(h)
    return float_outputs(ctx, results)


UNIDIRECTIONAL_SEQUENCE_RNN = OperationDeclaration(
    OperationType.UNIDIRECTIONAL_SEQUENCE_RNN,
    tuple(
        Signature((t,) * 5 + (_T.INT32, _T.INT32), (t,) * n, v)
        for t in TENSOR_FLOAT_TYPES
        for n, v in ((1, V.V1_2), (2, V.V1_3))
    ),
    infer_shapes=_infer_uni_rnn,
    execute=_execute_uni_rnn,
    validate=_validate_uni_rnn,
    summary="A recurrent cell over a whole sequence (time-major flag is an INT32 0/1); "
    "1.3 adds the final hidden state as an output.",
)


# ---------------------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------------------

_AUX_INPUT, _FW_AUX, _BW_AUX = 9, 10, 11


@dataclass(frozen=True)
class _BiRnnLayout:
    n_time: int
    n_batch: int
    fw_units: int
    bw_units: int
    time_major: bool
    merge: bool
    linking: str  # "none", "parallel" (aux input feeds the backward cell), "cross"


def _bi_rnn_layout(ctx: OperationContext) -> _BiRnnLayout:
    merge = bool(ctx.scalar(14))
    allowed = (1, 3) if merge else (2, 4)
    ctx.check(
        ctx.num_outputs in allowed,
        f"with merge_outputs={merge} the operation has {' or '.join(map(str, allowed))} "
        f"outputs, got {ctx.num_outputs}",
        deferrable=True,
    )
    require_inputs(
        ctx,
        (0, 1, 2, 3, 4, 5, 6, 7, 8),
        (
            "input",
            "forward weights",
            "forward recurrent weights",
            "forward bias",
            "forward hidden state",
            "backward weights",
            "backward recurrent weights",
            "backward bias",
            "backward hidden state",
        ),
    )
    has_aux = is_present(ctx, _AUX_INPUT)
    fw_aux, bw_aux = is_present(ctx, _FW_AUX), is_present(ctx, _BW_AUX)
    if not has_aux and not fw_aux and not bw_aux:
        linking = "none"
    elif has_aux and not fw_aux and not bw_aux:
        linking = "parallel"
    elif has_aux and fw_aux and bw_aux:
        linking = "cross"
    else:
        raise ctx.invalid(
            "auxiliary input (9) and auxiliary weights (10, 11) must be all omitted, the "
            "input alone (parallel linking) or all given (cross linking); got "
            f"{[has_aux, fw_aux, bw_aux]}",
            deferrable=True,
        )
    time_major = bool(ctx.scalar(13))
    s = check_rank(ctx, 0, "input", 3)
    n_time, n_batch = (s[0], s[1]) if time_major else (s[1], s[0])
    bw_input_size = s[2]
    if linking != "none":
        a = check_rank(ctx, _AUX_INPUT, "auxiliary input", 3)
        ctx.check(
            a[:2] == s[:2],
            f"input {_AUX_INPUT} (auxiliary input) must match the input's first two "
            f"dimensions: {list(a)} vs {list(s)}",
            deferrable=True,
        )
        if linking == "parallel":
            bw_input_size = a[2]
    fw_units = _check_rnn_weights(ctx, 1, 4, n_batch, s[2], "forward ")
    bw_units = _check_rnn_weights(ctx, 5, 8, n_batch, bw_input_size, "backward ")
    if linking == "cross":
        a = ctx.shape(_AUX_INPUT)
        check_shape(ctx, _FW_AUX, "forward auxiliary weights", (fw_units, a[2]))
        check_shape(ctx, _BW_AUX, "backward auxiliary weights", (bw_units, a[2]))
    return _BiRnnLayout(n_time, n_batch, fw_units, bw_units, time_major, merge, linking)


def _validate_bi_rnn(ctx: OperationContext) -> None:
    # Parallel linking is documented "since API level 30" (HAL 1.3); checked before the
    # deferrable rejections below.
    parallel = parallel_linking_declared(ctx, _AUX_INPUT, (_FW_AUX, _BW_AUX))
    ctx.require_version(V.V1_3 if parallel else None)
    check_fuse_code(ctx, 12)
    # Shape inference and the kernel check again with what the run gives.
    with contextlib.suppress(Unknown):
        _bi_rnn_layout(ctx)


def _infer_bi_rnn(ctx: OperationContext) -> list[Shape]:
    lay = _bi_rnn_layout(ctx)
    lead = (lay.n_time, lay.n_batch) if lay.time_major else (lay.n_batch, lay.n_time)
    if lay.merge:
        shapes: list[Shape] = [(*lead, lay.fw_units + lay.bw_units)]
    else:
        shapes = [(*lead, lay.fw_units), (*lead, lay.bw_units)]
    if ctx.num_outputs > len(shapes):  # 1.3: the final hidden states follow
        shapes += [(lay.n_batch, lay.fw_units), (lay.n_batch, lay.bw_units)]
    return shapes


@ieee_quiet
def _execute_bi_rnn(ctx: OperationContext) -> list[np.ndarray]:
    lay = _bi_rnn_layout(ctx)
    act = ctx.scalar(12)
    x = to_time_major(as_float32(ctx, 0), lay.time_major)
    aux = None
    if lay.linking != "none":
        aux = to_time_major(as_float32(ctx, _AUX_INPUT), lay.time_major)
    cross = lay.linking == "cross"
    fw = _load_rnn(ctx, 1, _FW_AUX if cross else None)
    bw = _load_rnn(ctx, 5, _BW_AUX if cross else None)
    bw_x = aux if lay.linking == "parallel" else x
    cell_aux = aux if cross else None
    fw_out, fw_h = rnn_sequence(ctx, fw, act, x, cell_aux, as_float32(ctx, 4))
    bw_out, bw_h = rnn_sequence(ctx, bw, act, bw_x, cell_aux, as_float32(ctx, 8), forward=False)
    if lay.merge:
        results = [to_time_major(np.concatenate([fw_out, bw_out], axis=2), lay.time_major)]
    else:
        results = [to_time_major(fw_out, lay.time_major), to_time_major(bw_out, lay.time_major)]
    if len(results) < ctx.num_outputs:
        results += [fw_h, bw_h]
    return float_outputs(ctx, results)


def _bi_rnn_signatures() -> tuple[Signature, ...]:
    sigs = []
    for t in TENSOR_FLOAT_TYPES:
        ins = (t,) * 12 + (_T.INT32, _T.BOOL, _T.BOOL)
        for n, v in ((1, V.V1_2), (2, V.V1_2), (3, V.V1_3), (4, V.V1_3)):
            sigs.append(Signature(ins, (t,) * n, v, frozenset({_AUX_INPUT, _FW_AUX, _BW_AUX})))
    return tuple(sigs)


BIDIRECTIONAL_SEQUENCE_RNN = OperationDeclaration(
    OperationType.BIDIRECTIONAL_SEQUENCE_RNN,
    _bi_rnn_signatures(),
    infer_shapes=_infer_bi_rnn,
    execute=_execute_bi_rnn,
    validate=_validate_bi_rnn,
    summary="Forward and backward recurrent cells over a sequence, outputs merged or "
    "separate, with an optional auxiliary input; 1.3 adds the final hidden states.",
    notes=(
        "Auxiliary input without auxiliary weights (parallel linking: it is the backward "
        "cell's input) needs HAL 1.3.",
    ),
)


# ---------------------------------------------------------------------------------------
# SVDF
# ---------------------------------------------------------------------------------------


def _svdf_sizes(ctx: OperationContext) -> tuple[int, int, int, int]:
    """(batch, filters, units, memory size)."""
    rank = ctx.scalar(5)
    ctx.check(rank > 0, f"input 5 (rank) must be positive, got {rank}", deferrable=True)
    s = check_rank(ctx, 0, "input", 2)
    n_batch, n_input = s
    wf = check_rank(ctx, 1, "weights_feature", 2)
    n_filters = wf[0]
    ctx.check(
        wf[1] == n_input,
        f"input 1 (weights_feature) must have {n_input} columns (the input size), got {list(wf)}",
        deferrable=True,
    )
    ctx.check(
        n_filters % rank == 0,
        f"input 1 (weights_feature) has {n_filters} filters, not a multiple of rank {rank}",
        deferrable=True,
    )
    wt = check_rank(ctx, 2, "weights_time", 2)
    ctx.check(
        wt[0] == n_filters,
        f"input 2 (weights_time) must have {n_filters} rows (the filters), got {list(wt)}",
        deferrable=True,
    )
    memory = wt[1]
    ctx.check(
        memory >= 1,
        f"input 2 (weights_time) must have a memory size >= 1, got {list(wt)}",
        deferrable=True,
    )
    n_units = n_filters // rank
    if is_present(ctx, 3):
        check_shape(ctx, 3, "bias", (n_units,))
    check_shape(ctx, 4, "state", (n_batch, memory * n_filters))
    return n_batch, n_filters, n_units, memory


def _validate_svdf(ctx: OperationContext) -> None:
    check_fuse_code(ctx, 6)
    _svdf_sizes(ctx)


def _infer_svdf(ctx: OperationContext) -> list[Shape]:
    n_batch, n_filters, n_units, memory = _svdf_sizes(ctx)
    return [(n_batch, memory * n_filters), (n_batch, n_units)]


def svdf_step(
    x: np.ndarray,
    weights_feature: np.ndarray,
    weights_time: np.ndarray,
    bias: np.ndarray | None,
    state: np.ndarray,
    rank: int,
    activation: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``SVDF::EvalFloat32`` (float32): (new state [batch, memory*filters], output)."""
    n_batch = x.shape[0]
    n_filters, memory = weights_time.shape
    mem = state.reshape(n_batch, n_filters, memory).copy()
    mem[:, :, -1] = x @ weights_feature.T  # the newest activation enters the last column
    scratch = np.einsum("bfm,fm->bf", mem, weights_time, dtype=F32)
    out = scratch.reshape(n_batch, n_filters // rank, rank).sum(axis=2, dtype=F32)
    if bias is not None:
        out = bias + out
    out = FUSE_ACTIVATIONS[activation](out).astype(F32, copy=False)
    shifted = np.zeros_like(mem)
    shifted[:, :, :-1] = mem[:, :, 1:]
    return shifted.reshape(n_batch, memory * n_filters), out


@ieee_quiet
def _execute_svdf(ctx: OperationContext) -> list[np.ndarray]:
    _svdf_sizes(ctx)
    bias = as_float32(ctx, 3) if is_present(ctx, 3) else None
    state, out = svdf_step(
        as_float32(ctx, 0),
        as_float32(ctx, 1),
        as_float32(ctx, 2),
        bias,
        as_float32(ctx, 4),
        ctx.scalar(5),
        ctx.scalar(6),
    )
    return float_outputs(ctx, [state, out])


SVDF = OperationDeclaration(
    OperationType.SVDF,
    tuple(
        Signature((t,) * 5 + (_T.INT32, _T.INT32), (t, t), v, frozenset({3}))
        for t, v in zip(TENSOR_FLOAT_TYPES, (V.V1_0, V.V1_2))
    ),
    infer_shapes=_infer_svdf,
    execute=_execute_svdf,
    validate=_validate_svdf,
    summary="Singular value decomposition filter: a rank-limited time-delay layer with a "
    "memory of past activations in its state.",
    notes=(
        "The state is [batch, memory_size * num_filters] as Android's kernel and CTS use "
        "(NeuralNetworks.h documents memory_size - 1).",
    ),
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (
    RNN,
    UNIDIRECTIONAL_SEQUENCE_RNN,
    BIDIRECTIONAL_SEQUENCE_RNN,
    SVDF,
)
