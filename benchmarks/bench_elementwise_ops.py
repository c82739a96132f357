#!/usr/bin/env python3
"""Time the elementwise operations on the reference executor against one numpy pass.

    python benchmarks/bench_elementwise_ops.py [--repeat N] [--ops ADD,MUL,...]

Each operation runs as a one-operation model through ``Executor.run`` on a 1x64x64x32
tensor (every tensor input full size), in float32 and, where the operation takes it, in
its quant8 form (TENSOR_QUANT8_ASYMM; bool8 for the logical operations). The reference
time is one ``np.add(x, y)`` over the same float32 data. The table prints the best of
``--repeat`` timings and the ratio; the goal is every ratio <= 10.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.executor import Executor
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import output, scalar, single_op_model, tensor
from driver.validation import validate_model

SHAPE = (1, 64, 64, 32)
F32, Q8, B8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_BOOL8

rng = np.random.default_rng(0)
X = rng.uniform(-3, 3, SHAPE).astype(np.float32)
Y = rng.uniform(-3, 3, SHAPE).astype(np.float32)
POS = rng.uniform(0.5, 2, SHAPE).astype(np.float32)
QA = rng.integers(0, 256, SHAPE, dtype=np.uint8)
QB = rng.integers(0, 256, SHAPE, dtype=np.uint8)
BA = rng.random(SHAPE) < 0.5
BB = rng.random(SHAPE) < 0.5


def qt(values, scale=0.05, zp=128):
    return tensor(Q8, values, scale=scale, zero_point=zp)


def case(op, inputs, out_type, **out_kw):
    return op, inputs, [output(out_type, SHAPE, **out_kw)]


def cases() -> list[tuple[str, str, tuple]]:
    f, g, p = tensor(F32, X), tensor(F32, Y), tensor(F32, POS)
    act = scalar(T.INT32, 0)
    rows = []
    for op in (O.ADD, O.SUB, O.MUL, O.DIV):
        rows.append((op.name, "float32", case(op, [f, g, act], F32)))
    for op in (O.ADD, O.SUB):
        rows.append(
            (op.name, "quant8", case(op, [qt(QA), qt(QB), act], Q8, scale=0.1, zero_point=128))
        )
    rows.append(
        ("MUL", "quant8", case(O.MUL, [qt(QA), qt(QB), act], Q8, scale=0.5, zero_point=128))
    )
    for op in (O.MAXIMUM, O.MINIMUM, O.PRELU):
        rows.append((op.name, "float32", case(op, [f, g], F32)))
        rows.append(
            (
                op.name,
                "quant8",
                case(op, [qt(QA), qt(QB, 0.02, 100)], Q8, scale=0.05, zero_point=120),
            )
        )
    rows.append(("POW", "float32", case(O.POW, [p, g], F32)))
    for op in (O.RELU, O.RELU1, O.RELU6):
        rows.append((op.name, "float32", case(op, [f], F32)))
        rows.append((op.name, "quant8", case(op, [qt(QA)], Q8, scale=0.05, zero_point=128)))
    rows.append(("LOGISTIC", "float32", case(O.LOGISTIC, [f], F32)))
    rows.append(("LOGISTIC", "quant8", case(O.LOGISTIC, [qt(QA)], Q8, scale=1 / 256, zero_point=0)))
    rows.append(("TANH", "float32", case(O.TANH, [f], F32)))
    rows.append(("TANH", "quant8", case(O.TANH, [qt(QA)], Q8, scale=1 / 128, zero_point=128)))
    rows.append(("HARD_SWISH", "float32", case(O.HARD_SWISH, [f], F32)))
    rows.append(
        ("HARD_SWISH", "quant8", case(O.HARD_SWISH, [qt(QA)], Q8, scale=0.03, zero_point=20))
    )
    rows.append(("ELU", "float32", case(O.ELU, [f, scalar(T.FLOAT32, 1.0)], F32)))
    for op in (O.ABS, O.EXP, O.SIN, O.NEG, O.FLOOR):
        rows.append((op.name, "float32", case(op, [f], F32)))
    for op in (O.LOG, O.SQRT, O.RSQRT):
        rows.append((op.name, "float32", case(op, [p], F32)))
    for op in (O.EQUAL, O.NOT_EQUAL, O.GREATER, O.GREATER_EQUAL, O.LESS, O.LESS_EQUAL):
        rows.append((op.name, "float32", case(op, [f, g], B8)))
        rows.append((op.name, "quant8", case(op, [qt(QA), qt(QB, 0.02, 100)], B8)))
    for op in (O.LOGICAL_AND, O.LOGICAL_OR):
        rows.append((op.name, "bool8", case(op, [tensor(B8, BA), tensor(B8, BB)], B8)))
    rows.append(("LOGICAL_NOT", "bool8", case(O.LOGICAL_NOT, [tensor(B8, BA)], B8)))
    rows.append(("SELECT", "float32", case(O.SELECT, [tensor(B8, BA), f, g], F32)))
    rows.append(
        (
            "SELECT",
            "quant8",
            case(
                O.SELECT,
                [tensor(B8, BA), qt(QA), qt(QB, 0.02, 100)],
                Q8,
                scale=0.05,
                zero_point=128,
            ),
        )
    )
    rows.append(("CAST", "float32->int32", case(O.CAST, [f], T.TENSOR_INT32)))
    rows.append(("CAST", "quant8->float32", case(O.CAST, [qt(QA)], F32)))
    rows.append(
        ("QUANTIZE", "float32->quant8", case(O.QUANTIZE, [f], Q8, scale=0.05, zero_point=128))
    )
    rows.append(("DEQUANTIZE", "quant8->float32", case(O.DEQUANTIZE, [qt(QA)], F32)))
    return rows


def best_time(fn, repeat: int, number: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=20)
    p.add_argument("--ops", default="", help="comma-separated operation names (default: all)")
    a = p.parse_args(argv)
    wanted = {s.strip().upper() for s in a.ops.split(",") if s.strip()}
    base = best_time(lambda: np.add(X, Y), a.repeat, a.number * 10)
    print(f"numpy np.add(x, y) on float32 {SHAPE}: {base * 1e6:.1f} us\n")
    print(f"{'operation':<14} {'form':<16} {'time (us)':>10} {'x np.add':>9}")
    worst = 0.0
    for name, form, (op, inputs, outputs) in cases():
        if wanted and name not in wanted:
            continue
        model, feeds = single_op_model(op, inputs, outputs)
        validate_model(model)
        ex = Executor(model)
        ex.run(feeds)  # warm up (and fill the quant8 lookup-table cache)
        t = best_time(lambda ex=ex, feeds=feeds: ex.run(feeds), a.repeat, a.number)
        ratio = t / base
        worst = max(worst, ratio)
        flag = "" if ratio <= 10 else "  > 10x"
        print(f"{name:<14} {form:<16} {t * 1e6:>10.1f} {ratio:>9.1f}{flag}")
    print(f"\nworst ratio {worst:.1f}x (goal <= 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
