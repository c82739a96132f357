#!/usr/bin/env python3
"""Convolution-family kernel timings on the reference executor.

    python benchmarks/bench_conv_ops.py [--repeat N]

1. CONV_2D float32, 1x64x64x32 input, 3x3x32->32 filter, SAME: the reference executor
   (validated, prepared model; one ``Executor.run`` per sample) against a plain numpy
   im2col + matmul of the same shapes measured in the same run (goal: <= 3x), and the
   quant8 form against the float32 time (goal: <= 3x).
2. A table for every operation of the family at MobileNet-like layer sizes, float32 and
   (where the operation has it) quant8.

Times are medians of ``--repeat`` runs after one warm-up run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.executor import Executor
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import output, scalar, single_op_model, tensor
from driver.validation import validate_model

RNG = np.random.default_rng(0)
F32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM


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


def I(v):  # noqa: E743
    return scalar(T.INT32, v)


def data(t, shape, scale=0.0, zp=0, const=False):
    if t == Q8:
        return tensor(t, RNG.integers(0, 256, shape), scale=scale, zero_point=zp, const=const)
    return tensor(t, RNG.uniform(-1, 1, shape).astype(np.float32), const=const)


def conv_like(op, t, x_shape, f_shape, params, out_shape, bias_n, fscale=0.02):
    q = t == Q8
    ins = [
        data(t, x_shape, 0.05, 120),
        data(t, f_shape, fscale, 128, const=True),
        tensor(T.TENSOR_INT32, RNG.integers(-500, 500, bias_n), scale=0.05 * fscale, const=True)
        if q
        else tensor(F32, RNG.uniform(-1, 1, bias_n).astype(np.float32), const=True),
        *params,
    ]
    return prepared(
        op, ins, [output(t, out_shape, scale=0.1 if q else 0.0, zero_point=128 if q else 0)]
    )


def numpy_im2col_conv(x, w, b):
    """The plain numpy baseline: SAME pad, im2col copy, one matmul."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = sliding_window_view(xp, (3, 3), axis=(1, 2)).transpose(0, 1, 2, 4, 5, 3)
    cols = np.ascontiguousarray(cols).reshape(-1, 3 * 3 * x.shape[3])
    return (cols @ w.reshape(w.shape[0], -1).T + b).reshape((*x.shape[:3], w.shape[0]))


def headline(repeat: int) -> None:
    x = RNG.uniform(-1, 1, (1, 64, 64, 32)).astype(np.float32)
    w = RNG.uniform(-1, 1, (32, 3, 3, 32)).astype(np.float32)
    b = RNG.uniform(-1, 1, 32).astype(np.float32)
    same = [I(1), I(1), I(1), I(0)]
    ref = prepared(
        O.CONV_2D,
        [tensor(F32, x), tensor(F32, w, const=True), tensor(F32, b, const=True), *same],
        [output(F32, (1, 64, 64, 32))],
    )
    t_ref = median_time(ref, repeat)
    t_np = median_time(lambda: numpy_im2col_conv(x, w, b), repeat)
    t_q = median_time(
        conv_like(O.CONV_2D, Q8, (1, 64, 64, 32), (32, 3, 3, 32), same, (1, 64, 64, 32), 32), repeat
    )
    print("CONV_2D 1x64x64x32, 3x3x32->32, SAME")
    print(f"  numpy im2col+matmul      {t_np * 1e3:8.2f} ms")
    print(
        f"  reference float32        {t_ref * 1e3:8.2f} ms   {t_ref / t_np:5.2f}x numpy (goal <= 3x)"
    )
    print(
        f"  reference quant8         {t_q * 1e3:8.2f} ms   {t_q / t_ref:5.2f}x float32 (goal <= 3x)"
    )
    print()


def table(repeat: int) -> None:
    rows = []

    def add(name, shape_desc, make):
        cells = []
        for t in (F32, Q8):
            fn = make(t)
            cells.append(None if fn is None else median_time(fn, repeat))
        rows.append((name, shape_desc, *cells))

    add(
        "CONV_2D",
        "1x112x112x32 3x3->64 s1 SAME",
        lambda t: conv_like(
            O.CONV_2D,
            t,
            (1, 112, 112, 32),
            (64, 3, 3, 32),
            [I(1), I(1), I(1), I(1)],
            (1, 112, 112, 64),
            64,
        ),
    )
    add(
        "CONV_2D (1x1)",
        "1x28x28x256 1x1->256",
        lambda t: conv_like(
            O.CONV_2D,
            t,
            (1, 28, 28, 256),
            (256, 1, 1, 256),
            [I(2), I(1), I(1), I(1)],
            (1, 28, 28, 256),
            256,
        ),
    )
    add(
        "DEPTHWISE_CONV_2D",
        "1x112x112x32 3x3 x1 s1 SAME",
        lambda t: conv_like(
            O.DEPTHWISE_CONV_2D,
            t,
            (1, 112, 112, 32),
            (1, 3, 3, 32),
            [I(1), I(1), I(1), I(1), I(1)],
            (1, 112, 112, 32),
            32,
        ),
    )
    add(
        "GROUPED_CONV_2D",
        "1x56x56x64 3x3 g4 ->64 SAME",
        lambda t: conv_like(
            O.GROUPED_CONV_2D, t, (1, 56, 56, 64), (64, 3, 3, 16),
            [I(1), I(1), I(1), I(4), I(1), scalar(T.BOOL, False)], (1, 56, 56, 64), 64,
        ),
    )  # fmt: skip
    add(
        "TRANSPOSE_CONV_2D",
        "1x28x28x64 3x3 s2 ->32",
        lambda t: conv_like(
            O.TRANSPOSE_CONV_2D, t, (1, 28, 28, 64), (32, 3, 3, 64),
            [I(0), I(1), I(0), I(1), I(2), I(2), I(1), scalar(T.BOOL, False)], (1, 56, 56, 32), 32,
        ),
    )  # fmt: skip
    add(
        "FULLY_CONNECTED",
        "1x1024 -> 1001",
        lambda t: conv_like(
            O.FULLY_CONNECTED, t, (1, 1024), (1001, 1024), [I(0)], (1, 1001), 1001, fscale=0.002
        ),
    )

    def pool(op, x_shape, params, out_shape, quant=True):
        def make(t):
            if t == Q8 and not quant:
                return None
            q = {"scale": 0.05, "zero_point": 120} if t == Q8 else {}
            return prepared(op, [data(t, x_shape, 0.05, 120), *params], [output(t, out_shape, **q)])

        return make

    add(
        "AVERAGE_POOL_2D",
        "1x7x7x1024 global",
        pool(
            O.AVERAGE_POOL_2D,
            (1, 7, 7, 1024),
            [I(2), I(1), I(1), I(7), I(7), I(0)],
            (1, 1, 1, 1024),
        ),
    )
    add(
        "MAX_POOL_2D",
        "1x112x112x64 3x3 s2 SAME",
        pool(
            O.MAX_POOL_2D, (1, 112, 112, 64), [I(1), I(2), I(2), I(3), I(3), I(0)], (1, 56, 56, 64)
        ),
    )
    add(
        "L2_POOL_2D",
        "1x56x56x64 2x2 s2",
        pool(
            O.L2_POOL_2D,
            (1, 56, 56, 64),
            [I(2), I(2), I(2), I(2), I(2), I(0)],
            (1, 28, 28, 64),
            quant=False,
        ),
    )

    def norm(op, x_shape, params, out_q, quant=True):
        def make(t):
            if t == Q8 and not quant:
                return None
            return prepared(
                op,
                [data(t, x_shape, 0.05, 120), *params],
                [output(t, x_shape, **(out_q if t == Q8 else {}))],
            )

        return make

    beta = scalar(T.FLOAT32, 1.0)
    add("SOFTMAX", "1x1001", norm(O.SOFTMAX, (1, 1001), [beta], {"scale": 1 / 256}))
    add(
        "SOFTMAX (axis)",
        "1x56x56x21 axis 3",
        norm(O.SOFTMAX, (1, 56, 56, 21), [beta], {"scale": 1 / 256}),
    )
    add("LOG_SOFTMAX", "1x1001", norm(O.LOG_SOFTMAX, (1, 1001), [beta, I(-1)], {}, quant=False))
    add(
        "L2_NORMALIZATION",
        "1x28x28x256",
        norm(O.L2_NORMALIZATION, (1, 28, 28, 256), [], {"scale": 1 / 128, "zero_point": 128}),
    )
    add(
        "LOCAL_RESPONSE_NORM",
        "1x28x28x192 radius 2",
        norm(
            O.LOCAL_RESPONSE_NORMALIZATION,
            (1, 28, 28, 192),
            [I(2), scalar(T.FLOAT32, 1.0), scalar(T.FLOAT32, 1e-4), scalar(T.FLOAT32, 0.75)],
            {},
            quant=False,
        ),
    )
    add(
        "INSTANCE_NORMALIZATION",
        "1x64x64x32",
        norm(
            O.INSTANCE_NORMALIZATION,
            (1, 64, 64, 32),
            [
                scalar(T.FLOAT32, 1.0),
                scalar(T.FLOAT32, 0.0),
                scalar(T.FLOAT32, 1e-5),
                scalar(T.BOOL, False),
            ],
            {},
            quant=False,
        ),
    )
    q_same = {"scale": 0.05, "zero_point": 120}
    add(
        "RESIZE_BILINEAR",
        "1x33x33x256 -> 65x65",
        lambda t: prepared(O.RESIZE_BILINEAR, [data(t, (1, 33, 33, 256), 0.05, 120), I(65), I(65), scalar(T.BOOL, False)],
                           [output(t, (1, 65, 65, 256), **(q_same if t == Q8 else {}))]),
    )  # fmt: skip
    add(
        "RESIZE_NEAREST_NEIGHBOR",
        "1x32x32x64 -> 64x64",
        lambda t: prepared(O.RESIZE_NEAREST_NEIGHBOR, [data(t, (1, 32, 32, 64), 0.05, 120), I(64), I(64), scalar(T.BOOL, False)],
                           [output(t, (1, 64, 64, 64), **(q_same if t == Q8 else {}))]),
    )  # fmt: skip

    def cell(v):
        return f"{'-':>10}" if v is None else f"{v * 1e3:8.2f}ms"

    print(f"{'operation':26} {'shape':30} {'float32':>10} {'quant8':>10}")
    for name, desc, f, q in rows:
        print(f"{name:26} {desc:30} {cell(f)} {cell(q)}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args(argv)
    headline(a.repeat)
    table(a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
