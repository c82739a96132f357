"""Valid RNN-family examples (see examples.py), plus the float64 references the RNN tests
share.

* :func:`reference_rnn_step`: ``h' = act(W x + W_aux aux + R h + b)``.
* :func:`reference_svdf`: SVDF written as the convolution it is, not as a shift register:
  with ``a_s = W_feature x_s`` (one value per filter), unit ``u``'s output at step ``t`` is
  ``b_u + sum over its rank filters f of sum_k W_time[f, M-1-k] * a_{t-k}[f]``, the
  activations before the sequence start coming from the initial state.

Values are multiples of 1/64 so float16 and float32 runs see the same numbers.
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, omitted, output, scalar, tensor
from tests.operations.examples_lstm import FP16_TOL, grid_values

FUSE = {
    0: lambda x: x,
    1: lambda x: np.maximum(x, 0),
    2: lambda x: np.clip(x, -1, 1),
    3: lambda x: np.clip(x, 0, 6),
}


def reference_rnn_step(w, r, b, x, h, activation=1, aux=None, w_aux=None):
    z = x @ np.asarray(w).T + h @ np.asarray(r).T + b
    if aux is not None:
        z = z + aux @ np.asarray(w_aux).T
    return FUSE[activation](z)


def reference_rnn_sequence(w, r, b, xs, h, activation=1, *, reverse=False, aux=None, w_aux=None):
    """Time-major xs [time, batch, input]: (outputs [time, batch, units], final h)."""
    outs = [None] * len(xs)
    for t in reversed(range(len(xs))) if reverse else range(len(xs)):
        h = reference_rnn_step(
            w, r, b, xs[t], h, activation, None if aux is None else aux[t], w_aux
        )
        outs[t] = h
    return np.stack(outs), h


def rnn_weights(seed: int, n_input: int, n_units: int):
    rng = np.random.default_rng(seed)
    return (
        grid_values(rng, (n_units, n_input)),
        grid_values(rng, (n_units, n_units)),
        grid_values(rng, (n_units,)),
    )


def reference_svdf(xs, wf, wt, bias, rank, activation=0, past=None):
    """SVDF outputs for a sequence xs [time, batch, input] as a convolution over time.
    ``past`` [batch, filters, memory-1] holds the activations before the first step
    (oldest first); zeros if None."""
    n_filters, memory = wt.shape
    n_time, n_batch = xs.shape[:2]
    acts = np.einsum("tbi,fi->tbf", xs, wf)  # a_t per filter
    if past is None:
        past = np.zeros((n_batch, n_filters, memory - 1))
    history = np.concatenate([past.transpose(2, 0, 1), acts])  # [memory-1 + time, b, f]
    outs = []
    for t in range(n_time):
        window = history[t : t + memory]  # oldest .. newest, aligned with wt's columns
        per_filter = np.einsum("mbf,fm->bf", window, wt)
        per_unit = per_filter.reshape(n_batch, n_filters // rank, rank).sum(axis=2)
        outs.append(FUSE[activation](per_unit + (0 if bias is None else bias)))
    return np.stack(outs)


def svdf_inputs(x, wf, wt, bias, state, rank, activation=0, *, tt=T.TENSOR_FLOAT32):
    return [
        tensor(tt, x),
        tensor(tt, wf, const=True),
        tensor(tt, wt, const=True),
        omitted(tt, (wf.shape[0] // rank,)) if bias is None else tensor(tt, bias, const=True),
        tensor(tt, state),
        scalar(T.INT32, rank),
        scalar(T.INT32, activation),
    ]


def rnn_inputs(w, r, b, x, h, activation=1, *, tt=T.TENSOR_FLOAT32):
    return [
        tensor(tt, x),
        tensor(tt, w, const=True),
        tensor(tt, r, const=True),
        tensor(tt, b, const=True),
        tensor(tt, h),
        scalar(T.INT32, activation),
    ]


def uni_rnn_inputs(w, r, b, xs, h, activation=1, *, time_major=True, tt=T.TENSOR_FLOAT32):
    return [*rnn_inputs(w, r, b, xs, h, activation, tt=tt), scalar(T.INT32, int(time_major))]


def bi_rnn_inputs(
    fw,
    bw,
    xs,
    h_fw,
    h_bw,
    activation=1,
    *,
    aux=None,
    aux_w=None,
    merge=False,
    time_major=True,
    tt=T.TENSOR_FLOAT32,
):
    """Inputs of BIDIRECTIONAL_SEQUENCE_RNN; ``fw``/``bw`` are (W, R, b) triples and
    ``aux_w`` the (forward, backward) auxiliary weights or None."""
    args = [tensor(tt, xs)]
    for (w, r, b), h in ((fw, h_fw), (bw, h_bw)):
        args += [tensor(tt, w, const=True), tensor(tt, r, const=True), tensor(tt, b, const=True)]
        args.append(tensor(tt, h))
    args.append(omitted(tt, np.shape(xs)) if aux is None else tensor(tt, aux))
    for k, units in enumerate((len(fw[2]), len(bw[2]))):
        if aux_w is None:
            args.append(omitted(tt, (units, np.shape(xs)[2])))
        else:
            args.append(tensor(tt, aux_w[k], const=True))
    args += [scalar(T.INT32, activation), scalar(T.BOOL, time_major), scalar(T.BOOL, merge)]
    return args


def _examples() -> list:
    found = []
    rng = np.random.default_rng(5)
    w, r, b = rnn_weights(1, 2, 3)
    x, h = grid_values(rng, (2, 2)), grid_values(rng, (2, 3))
    xs = grid_values(rng, (3, 1, 2))
    h1 = grid_values(rng, (1, 3))
    bw = rnn_weights(2, 2, 2)
    hb = grid_values(rng, (1, 2))
    wf, wt = grid_values(rng, (4, 2)), grid_values(rng, (4, 3))
    bias = grid_values(rng, (2,))
    state = grid_values(rng, (2, 12))
    for tt, tag, tol in (
        (T.TENSOR_FLOAT32, "float32", 1e-5),
        (T.TENSOR_FLOAT16, "float16", FP16_TOL),
    ):
        ref = reference_rnn_step(w, r, b, x, h, 1)
        found.append(
            example(
                f"rnn_relu_{tag}",
                O.RNN,
                rnn_inputs(w, r, b, x, h, 1, tt=tt),
                [output(tt, (2, 3)), output(tt, (2, 3))],
                expected=[ref, ref],
                atol=tol,
            )
        )
        outs, h_last = reference_rnn_sequence(w, r, b, xs, h1, 3)
        found.append(
            example(
                f"unidirectional_sequence_rnn_batch_major_{tag}",
                O.UNIDIRECTIONAL_SEQUENCE_RNN,
                uni_rnn_inputs(w, r, b, xs.transpose(1, 0, 2), h1, 3, time_major=False, tt=tt),
                [output(tt, (1, 3, 3)), output(tt, (1, 3))],
                expected=[outs.transpose(1, 0, 2), h_last],
                atol=tol,
            )
        )
        bw_outs, _ = reference_rnn_sequence(*bw, xs, hb, 3, reverse=True)
        found.append(
            example(
                f"bidirectional_sequence_rnn_{tag}",
                O.BIDIRECTIONAL_SEQUENCE_RNN,
                bi_rnn_inputs((w, r, b), bw, xs, h1, hb, 3, tt=tt),
                [output(tt, (3, 1, 3)), output(tt, (3, 1, 2))],
                expected=[outs, bw_outs],
                atol=tol,
            )
        )
        past = state.reshape(2, 4, 3)[:, :, :2]
        svdf_out = reference_svdf(x[None], wf, wt, bias, 2, 0, past)[0]
        shifted = np.zeros((2, 4, 3))
        shifted[:, :, :1] = past[:, :, 1:]
        shifted[:, :, 1] = x @ wf.T
        found.append(
            example(
                f"svdf_rank2_{tag}",
                O.SVDF,
                svdf_inputs(x, wf, wt, bias, state, 2, tt=tt),
                [output(tt, (2, 12)), output(tt, (2, 2))],
                expected=[shifted.reshape(2, 12), svdf_out],
                atol=tol,
            )
        )
    return found


EXAMPLES = _examples()
