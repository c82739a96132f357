#!/usr/bin/env python3
"""Time the shape, reduction and lookup operations on the reference executor against one
numpy pass.

    python benchmarks/bench_shape_ops.py [--repeat N] [--number N] [--ops RESHAPE,MEAN,...]

Each operation runs as a one-operation model through ``Executor.run`` on a 1x64x64x32
tensor or its natural equivalent (CONCATENATION joins two 1x64x64x16 halves, TILE doubles
a 1x32x64x32, BATCH_TO_SPACE_ND starts from 4x32x32x32, the lookups use a 4096x32 table
and 4096 lookups), in float32 and in its quant8 form (TENSOR_QUANT8_ASYMM; bool8 for
REDUCE_ANY/ALL, int32 for FILL) where the operation takes one. TOPK_V2 takes k = 4 of
each row of 32, and also k = 5 of each row of a 128x1024 tensor (a classifier's top 5:
the long-row path). The reference time is one ``np.add(x, y)`` over the float32
1x64x64x32 data. The table prints the best of
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
from driver.testing import omitted, output, scalar, single_op_model, tensor
from driver.validation import validate_model

SHAPE = (1, 64, 64, 32)
F32, Q8, I32, B8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, T.TENSOR_BOOL8

rng = np.random.default_rng(0)
X = rng.uniform(-3, 3, SHAPE).astype(np.float32)
Y = rng.uniform(-3, 3, SHAPE).astype(np.float32)
QX = rng.integers(0, 256, SHAPE, dtype=np.uint8)


def i32(values):
    return tensor(I32, values, const=True)


def i(v):
    return scalar(T.INT32, v)


def data(form: str, shape=SHAPE, scale=0.05, zero_point=128):
    """A model input of ``shape`` (at most SHAPE's size) in ``form`` (float32 or quant8)."""
    n = int(np.prod(shape))
    if form == "float32":
        return tensor(F32, X.ravel()[:n].reshape(shape))
    return tensor(Q8, QX.ravel()[:n].reshape(shape), scale=scale, zero_point=zero_point)


def out(form: str, dims=(), scale=0.05, zero_point=128):
    if form == "float32":
        return output(F32, dims)
    return output(Q8, dims, scale=scale, zero_point=zero_point)


def cases() -> list[tuple[str, str, int, list, list]]:
    rows = []

    def add(name, forms, build):
        for form in forms:
            op, inputs, outputs = build(form)
            rows.append((name, form, op, inputs, outputs))

    both = ("float32", "quant8")
    add("RESHAPE", both, lambda f: (O.RESHAPE, [data(f), i32([64, -1])], [out(f)]))
    add("SQUEEZE", both, lambda f: (O.SQUEEZE, [data(f), omitted(I32)], [out(f)]))
    add("EXPAND_DIMS", both, lambda f: (O.EXPAND_DIMS, [data(f), i(-1)], [out(f)]))
    add("TRANSPOSE", both, lambda f: (O.TRANSPOSE, [data(f), i32([0, 3, 1, 2])], [out(f)]))
    half = (1, 64, 64, 16)
    add(
        "CONCATENATION",
        both,
        lambda f: (O.CONCATENATION, [data(f, half), data(f, half), i(3)], [out(f)]),
    )
    add(
        "CONCATENATION",
        ("quant8 requant",),
        lambda f: (
            O.CONCATENATION,
            [data("q", half), data("q", half, 0.1, 100), i(3)],
            [out("q", (), 0.07, 120)],
        ),
    )
    add("SPLIT", both, lambda f: (O.SPLIT, [data(f), i(3), i(2)], [out(f), out(f)]))
    add(
        "SLICE",
        both,
        lambda f: (O.SLICE, [data(f), i32([0, 8, 8, 0]), i32([-1, 48, 48, -1])], [out(f)]),
    )
    add(
        "STRIDED_SLICE",
        both,
        lambda f: (
            O.STRIDED_SLICE,
            [data(f), i32([0, 0, 0, 0]), i32([0, 0, 0, 0]), i32([1, 1, -1, 1]), i(15), i(15), i(0)],
            [out(f)],
        ),
    )
    pads = [[0, 0], [1, 1], [1, 1], [0, 0]]
    add("PAD", both, lambda f: (O.PAD, [data(f), i32(pads)], [out(f)]))
    add(
        "PAD_V2",
        both,
        lambda f: (
            O.PAD_V2,
            [data(f), i32(pads), scalar(T.FLOAT32, 1.0) if f == "float32" else i(3)],
            [out(f)],
        ),
    )
    add("TILE", both, lambda f: (O.TILE, [data(f, (1, 32, 64, 32)), i32([1, 2, 1, 1])], [out(f)]))
    add(
        "GATHER",
        both,
        lambda f: (O.GATHER, [data(f), i(1), i32(np.arange(63, -1, -1))], [out(f)]),
    )
    add("FILL", ("float32",), lambda f: (O.FILL, [i32(SHAPE), scalar(T.FLOAT32, 1.0)], [out(f)]))
    add("FILL", ("int32",), lambda f: (O.FILL, [i32(SHAPE), i(1)], [output(I32)]))
    add("RANK", both, lambda f: (O.RANK, [data(f)], [output(T.INT32)]))
    add(
        "BATCH_TO_SPACE_ND",
        both,
        lambda f: (O.BATCH_TO_SPACE_ND, [data(f, (4, 32, 32, 32)), i32([2, 2])], [out(f)]),
    )
    add(
        "SPACE_TO_BATCH_ND",
        both,
        lambda f: (O.SPACE_TO_BATCH_ND, [data(f), i32([2, 2]), i32([[0, 0], [0, 0]])], [out(f)]),
    )
    add("DEPTH_TO_SPACE", both, lambda f: (O.DEPTH_TO_SPACE, [data(f), i(2)], [out(f)]))
    add("SPACE_TO_DEPTH", both, lambda f: (O.SPACE_TO_DEPTH, [data(f), i(2)], [out(f)]))
    add("CHANNEL_SHUFFLE", both, lambda f: (O.CHANNEL_SHUFFLE, [data(f), i(4), i(-1)], [out(f)]))
    add("MEAN", both, lambda f: (O.MEAN, [data(f), i32([1, 2]), i(0)], [out(f)]))
    add(
        "MEAN",
        ("float32 axis 3",),
        lambda f: (O.MEAN, [data("float32"), i32([3]), i(0)], [out("float32")]),
    )
    keep = scalar(T.BOOL, False)
    for op, forms in [
        (O.REDUCE_SUM, ("float32",)),
        (O.REDUCE_PROD, ("float32",)),
        (O.REDUCE_MAX, both),
        (O.REDUCE_MIN, both),
    ]:
        add(op.name, forms, lambda f, op=op: (op, [data(f), i32([1, 2]), keep], [out(f)]))
    bools = tensor(B8, X > 0)
    for op in (O.REDUCE_ANY, O.REDUCE_ALL):
        add(op.name, ("bool8",), lambda f, op=op: (op, [bools, i32([1, 2]), keep], [output(B8)]))
    for op in (O.ARGMAX, O.ARGMIN):
        add(op.name, both, lambda f, op=op: (op, [data(f), i(-1)], [output(I32)]))
    add("TOPK_V2", both, lambda f: (O.TOPK_V2, [data(f), i(4)], [out(f), output(I32)]))
    logits = (128, 1024)  # top-5 of a classifier's scores: the long-row path
    for form in both:
        add(
            "TOPK_V2",
            (f"{form} 128x1024 k 5",),
            lambda f, form=form: (
                O.TOPK_V2,
                [data(form, logits), i(5)],
                [out(form), output(I32)],
            ),
        )
    table = (4096, 32)
    lookups = rng.integers(0, 4096, 4096).astype(np.int32)
    add(
        "EMBEDDING_LOOKUP",
        both,
        lambda f: (O.EMBEDDING_LOOKUP, [tensor(I32, lookups), data(f, table)], [out(f)]),
    )
    keys = np.arange(0, 2 * 4096, 2, dtype=np.int32)  # every other lookup misses
    add(
        "HASHTABLE_LOOKUP",
        both,
        lambda f: (
            O.HASHTABLE_LOOKUP,
            [tensor(I32, lookups), i32(keys), data(f, table)],
            [out(f), output(Q8, (), scale=1.0, zero_point=0)],
        ),
    )
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
    print(f"{'operation':<18} {'form':<16} {'time (us)':>10} {'x np.add':>9}")
    worst = 0.0
    for name, form, op, inputs, outputs in cases():
        if wanted and name not in wanted:
            continue
        model, feeds = single_op_model(op, inputs, outputs)
        validate_model(model)
        ex = Executor(model)
        ex.run(feeds)  # warm up
        t = best_time(lambda ex=ex, feeds=feeds: ex.run(feeds), a.repeat, a.number)
        ratio = t / base
        worst = max(worst, ratio)
        flag = "" if ratio <= 10 else "  > 10x"
        print(f"{name:<18} {form:<16} {t * 1e6:>10.1f} {ratio:>9.1f}{flag}")
    print(f"\nworst ratio {worst:.1f}x (goal <= 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
