#!/usr/bin/env python3
"""What TOPK_V2 on short rows costs in numpy's building blocks, against one np.add.

    python benchmarks/bench_topk_floor.py [--repeat N] [--number N]

TOPK_V2 on a 1x64x64x32 float32 tensor (k = 4 of each row of 32) is the one operation of
the issue-3 table above 10x np.add (bench_shape_ops.py). This prints the kernel's own time
and the steps any numpy top-k of such rows needs, each as a multiple of np.add over the
same data, then the floor they add up to: a transposed copy (numpy's per-row cost makes
row-wise sorts and reductions slow, so the reduced axis must become the leading one), five
full passes to turn float32 bits into ordered int32 keys that carry their index (three to
order the negative values, two to put the index in the low bits), and per element chosen
one max-reduce and the removal of the chosen key (a scatter) -- even before decoding the
keys and repairing the rows whose truncated values tie. The row-wise numpy alternatives
(sort, partition, argsort) are shown too: a sort alone costs about as much, before any
index is known.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_shape_ops import SHAPE, X, Y, best_time

from driver.operations.reduction import _topk_columns, _transposed

K = 4


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--number", type=int, default=50)
    a = p.parse_args(argv)

    rows = X.reshape(-1, SHAPE[-1])  # 4096 rows of 32
    int_rows = rows.view(np.int32).copy()
    columns = _transposed(int_rows)
    work = columns.copy()
    wide = columns.astype(np.int64)
    n, r = columns.shape
    flat = work.reshape(-1)
    every_column = np.arange(r, dtype=np.intp)
    chosen = np.maximum.reduce(columns, axis=0)

    def remove_chosen() -> None:  # as driver.operations.reduction._topk_select does
        position = (chosen & (n - 1)).astype(np.intp)
        position *= r
        position += every_column
        flat[position] = np.iinfo(np.int32).min

    base = best_time(lambda: np.add(X, Y), a.repeat, a.number * 4)

    steps = [
        ("TOPK_V2 kernel (k = 4)", lambda: _topk_columns(rows, K)),
        ("transposed copy (blocked)", lambda: _transposed(rows)),
        ("one in-place int32 pass", lambda: np.bitwise_and(work, 7, out=work)),
        ("column max-reduce, int32", lambda: np.maximum.reduce(columns, axis=0)),
        ("column max-reduce, int64", lambda: np.maximum.reduce(wide, axis=0)),
        ("removal of a chosen key", remove_chosen),
        ("row sort, float32", lambda: np.sort(rows, axis=1)),
        ("row sort, int32", lambda: np.sort(int_rows, axis=1)),
        ("row partition, float32", lambda: np.partition(rows, SHAPE[-1] - K, axis=1)),
        ("row argsort, float32", lambda: np.argsort(rows, axis=1)),
    ]
    print(f"numpy np.add(x, y) on float32 {SHAPE}: {base * 1e6:.1f} us\n")
    print(f"{'step':<28} {'time (us)':>10} {'x np.add':>9}")
    ratio = {}
    for name, fn in steps:
        t = best_time(fn, a.repeat, a.number)
        ratio[name] = t / base
        print(f"{name:<28} {t * 1e6:>10.1f} {t / base:>9.1f}")
    floor = (
        ratio["transposed copy (blocked)"]
        + 5 * ratio["one in-place int32 pass"]
        + K * (ratio["column max-reduce, int32"] + ratio["removal of a chosen key"])
    )
    print(
        f"\nfloor of a numpy top-{K}: a transposed copy, 5 key passes and {K} rounds of a "
        f"max-reduce and a removal = {floor:.1f}x np.add, before decoding and repairing "
        f"ties (the kernel: {ratio['TOPK_V2 kernel (k = 4)']:.1f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
