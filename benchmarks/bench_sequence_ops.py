#!/usr/bin/env python3
"""Sequence-operation timings (LSTM, RNN, SVDF families) on the reference executor.

    python benchmarks/bench_sequence_ops.py [--repeat N]

1. Headline (goal: each under 20 ms):
   - UNIDIRECTIONAL_SEQUENCE_LSTM over 8 time steps, batch 1, 32 inputs, 64 units;
   - one LSTM step, batch 8, 32 inputs, 64 units.
   Both with peephole, projection (64 -> 64) and layer normalization off and on.
2. A table for every operation of the two families at the same sizes (batch 8 where the
   operation is a single step, 8 steps of batch 1 for sequences), float32 and float16.

Each sample is one ``Executor.run`` of a validated, prepared one-operation model (weights
constant); times are medians of ``--repeat`` runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.executor import Executor
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import output, single_op_model
from driver.validation import validate_model
from tests.operations.examples_lstm import (
    bi_lstm_inputs,
    grid_values,
    lstm_inputs,
    lstm_outputs,
    make_cell,
    make_qlstm_case,
    q16_case,
    q16_inputs,
    q16_outputs,
    qlstm_outputs,
    uni_lstm_inputs,
)
from tests.operations.examples_rnn import (
    bi_rnn_inputs,
    rnn_inputs,
    rnn_weights,
    svdf_inputs,
    uni_rnn_inputs,
)

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
N_IN, N_UNITS, N_TIME, N_BATCH = 32, 64, 8, 8
GOAL_MS = 20.0


def median_time(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def prepared(op, inputs, outputs):
    model, feeds = single_op_model(op, inputs, outputs)
    validate_model(model)
    ex = Executor(model)
    return lambda: ex.run(feeds)


def _cell(full: bool):
    rng = np.random.default_rng(0)
    return make_cell(
        rng,
        N_IN,
        N_UNITS,
        N_UNITS,
        peephole=full,
        projection=full,
        projection_bias=full,
        layer_norm=full,
    )


def uni_lstm(tt=F32, full=False, n_batch=1):
    w = _cell(full)
    rng = np.random.default_rng(1)
    xs = grid_values(rng, (N_TIME, n_batch, N_IN))
    h, c = np.zeros((n_batch, N_UNITS)), np.zeros((n_batch, N_UNITS))
    return prepared(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, xs, h, c, tt=tt),
        [output(tt, (N_TIME, n_batch, N_UNITS))],
    )


def lstm_step(tt=F32, full=False):
    w = _cell(full)
    rng = np.random.default_rng(2)
    x = grid_values(rng, (N_BATCH, N_IN))
    h, c = np.zeros((N_BATCH, N_UNITS)), np.zeros((N_BATCH, N_UNITS))
    return prepared(O.LSTM, lstm_inputs(w, x, h, c, tt=tt), lstm_outputs(w, N_BATCH, tt))


def bi_lstm(tt=F32):
    fw, bw = _cell(False), _cell(False)
    xs = grid_values(np.random.default_rng(3), (N_TIME, 1, N_IN))
    z = np.zeros((1, N_UNITS))
    return prepared(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, xs, (z, z, z, z), merge=True, tt=tt),
        [output(tt, (N_TIME, 1, 2 * N_UNITS))],
    )


def q16_lstm():
    q = q16_case(0, N_BATCH, N_IN, N_UNITS)
    return prepared(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), q16_outputs(N_BATCH, N_UNITS))


def qlstm(layer_norm: bool):
    case = make_qlstm_case(
        0,
        N_BATCH,
        N_IN,
        N_UNITS,
        N_UNITS,
        peephole=True,
        projection=True,
        layer_norm=layer_norm,
    )
    return prepared(O.QUANTIZED_LSTM, case.args, qlstm_outputs(case))


def rnn(tt=F32):
    w, r, b = rnn_weights(0, N_IN, N_UNITS)
    x = grid_values(np.random.default_rng(4), (N_BATCH, N_IN))
    h = np.zeros((N_BATCH, N_UNITS))
    return prepared(O.RNN, rnn_inputs(w, r, b, x, h, tt=tt), [output(tt, (N_BATCH, N_UNITS))] * 2)


def uni_rnn(tt=F32):
    w, r, b = rnn_weights(0, N_IN, N_UNITS)
    xs = grid_values(np.random.default_rng(5), (N_TIME, 1, N_IN))
    return prepared(
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
        uni_rnn_inputs(w, r, b, xs, np.zeros((1, N_UNITS)), tt=tt),
        [output(tt, (N_TIME, 1, N_UNITS))],
    )


def bi_rnn(tt=F32):
    fw, bw = rnn_weights(0, N_IN, N_UNITS), rnn_weights(1, N_IN, N_UNITS)
    xs = grid_values(np.random.default_rng(6), (N_TIME, 1, N_IN))
    z = np.zeros((1, N_UNITS))
    return prepared(
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        bi_rnn_inputs(fw, bw, xs, z, z, merge=True, tt=tt),
        [output(tt, (N_TIME, 1, 2 * N_UNITS))],
    )


def svdf(tt=F32, rank=2, memory=10):
    rng = np.random.default_rng(7)
    n_filters = rank * N_UNITS
    wf, wt = grid_values(rng, (n_filters, N_IN)), grid_values(rng, (n_filters, memory))
    x = grid_values(rng, (N_BATCH, N_IN))
    state = np.zeros((N_BATCH, memory * n_filters))
    return prepared(
        O.SVDF,
        svdf_inputs(x, wf, wt, grid_values(rng, (N_UNITS,)), state, rank, tt=tt),
        [output(tt, (N_BATCH, memory * n_filters)), output(tt, (N_BATCH, N_UNITS))],
    )


def headline(repeat: int) -> None:
    print(f"Headline (goal: < {GOAL_MS:.0f} ms each)")
    for name, make in (
        (f"UNIDIRECTIONAL_SEQUENCE_LSTM {N_TIME} steps, 1x{N_IN} -> {N_UNITS}", uni_lstm),
        (f"LSTM one step, {N_BATCH}x{N_IN} -> {N_UNITS}", lstm_step),
    ):
        for full in (False, True):
            t = median_time(make(F32, full), repeat) * 1e3
            tag = "peephole+projection+layer norm" if full else "basic"
            verdict = "ok" if t < GOAL_MS else "OVER"
            print(f"  {name:50s} {tag:31s} {t:7.2f} ms  {verdict}")
    print()


def table(repeat: int) -> None:
    rows = [
        ("LSTM", f"{N_BATCH}x{N_IN} -> {N_UNITS}", lambda tt: lstm_step(tt)),
        ("UNIDIRECTIONAL_SEQUENCE_LSTM", f"{N_TIME} steps 1x{N_IN}", lambda tt: uni_lstm(tt)),
        (
            "UNIDIRECTIONAL_SEQUENCE_LSTM",
            f"{N_TIME} steps {N_BATCH}x{N_IN}",
            lambda tt: uni_lstm(tt, n_batch=N_BATCH),
        ),
        ("BIDIRECTIONAL_SEQUENCE_LSTM", f"{N_TIME} steps 1x{N_IN}, merged", bi_lstm),
        ("QUANTIZED_16BIT_LSTM", f"{N_BATCH}x{N_IN} -> {N_UNITS}", None),
        ("QUANTIZED_LSTM (peephole, proj)", f"{N_BATCH}x{N_IN} -> {N_UNITS}", None),
        ("QUANTIZED_LSTM (+ layer norm)", f"{N_BATCH}x{N_IN} -> {N_UNITS}", None),
        ("RNN", f"{N_BATCH}x{N_IN} -> {N_UNITS}", rnn),
        ("UNIDIRECTIONAL_SEQUENCE_RNN", f"{N_TIME} steps 1x{N_IN}", uni_rnn),
        ("BIDIRECTIONAL_SEQUENCE_RNN", f"{N_TIME} steps 1x{N_IN}, merged", bi_rnn),
        ("SVDF", f"{N_BATCH}x{N_IN}, rank 2, memory 10", svdf),
    ]
    quantized = {
        "QUANTIZED_16BIT_LSTM": q16_lstm,
        "QUANTIZED_LSTM (peephole, proj)": lambda: qlstm(False),
        "QUANTIZED_LSTM (+ layer norm)": lambda: qlstm(True),
    }
    print(f"{'operation':34s} {'shape':30s} {'float32':>10s} {'float16':>10s} {'quant':>10s}")
    for name, shape, make in rows:
        cells = []
        if make is None:
            cells = ["", "", f"{median_time(quantized[name](), repeat) * 1e3:8.2f}ms"]
        else:
            for tt in (F32, F16):
                cells.append(f"{median_time(make(tt), repeat) * 1e3:8.2f}ms")
            cells.append("")
        print(f"{name:34s} {shape:30s} {cells[0]:>10s} {cells[1]:>10s} {cells[2]:>10s}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args(argv)
    headline(a.repeat)
    table(a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
