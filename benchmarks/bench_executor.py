"""Reference executor overhead: what one operation and one WHILE iteration cost.

    python benchmarks/bench_executor.py [--repeat N]

Measures, as the best of ``--repeat`` timed runs after a warm-up (the minimum is the
figure least disturbed by other work on the machine):

- a chain of N tiny ADDs (float32 [2] + [1]) with static shapes, per operation, next to
  the cost of the ADD kernel alone (its declaration's ``execute`` on a prepared context)
  so the executor's own share is visible;
- the same chain with unknown dims (shapes inferred and hooks re-validated at run time);
- ``Executor(model)`` (prepare: constants, static pass, plan) per operation;
- a counting WHILE loop (condition LESS, body two ADDs) per iteration, and per operation
  run inside it;
- an IF per execution (one branch of one ADD).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver.builder import ModelBuilder
from driver.executor import Executor, RunStats
from driver.hal.types import Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import declaration
from driver.operations.base import OperationContext
from tests.operations.examples_control_flow import counting_while_model, if_model, while_feeds

F32 = np.float32


def add_chain(n: int, dims: tuple[int, ...]) -> Model:
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, dims)
    c = b.add_constant(T.TENSOR_FLOAT32, (1,), [1.0])
    act = b.add_scalar(T.INT32, 0)
    prev = x
    for k in range(n):
        nxt = (b.add_output if k == n - 1 else b.add_operand)(T.TENSOR_FLOAT32, dims)
        b.add_operation(O.ADD, [prev, c, act], [nxt])
        prev = nxt
    return b.build()


def best_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def kernel_only_us(repeat: int) -> float:
    """The ADD kernel on a ready context, per call (what any executor must pay)."""
    sg = add_chain(1, (2,)).main
    op = sg.operations[0]
    decl = declaration(op.type)
    x = np.zeros(2, F32)
    c = np.ones(1, F32)
    act = np.array(0, np.int32)
    ctx = OperationContext(
        op.type,
        [sg.operands[i] for i in op.inputs],
        [sg.operands[i] for i in op.outputs],
        [(2,), (1,), ()],
        [x, c, act],
    )
    ctx.output_shapes = [(2,)]
    calls = 1000

    def loop() -> None:
        for _ in range(calls):
            decl.execute(ctx)

    return best_seconds(loop, repeat) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per figure")
    args = parser.parse_args()
    r = args.repeat
    rows: list[tuple[str, str, float, str]] = []

    kernel = kernel_only_us(r)
    rows.append(("ADD kernel alone", "per call", kernel, "baseline"))

    for n in (10, 100, 1000):
        ex = Executor(add_chain(n, (2,)))
        x = [np.zeros(2, F32)]
        per_op = best_seconds(lambda ex=ex, x=x: ex.run(x), r) / n * 1e6
        rows.append(
            (f"ADD chain, static, N={n}", "per op", per_op, f"{per_op - kernel:+.1f} vs kernel")
        )

    for n in (100, 1000):
        ex = Executor(add_chain(n, (0,)))
        x = [np.zeros(2, F32)]
        per_op = best_seconds(lambda ex=ex, x=x: ex.run(x), r) / n * 1e6
        rows.append(
            (f"ADD chain, dynamic, N={n}", "per op", per_op, f"{per_op - kernel:+.1f} vs kernel")
        )

    model = add_chain(1000, (2,))
    prep = best_seconds(lambda: Executor(model), max(3, r // 2)) / 1000 * 1e6
    rows.append(("prepare, ADD chain N=1000", "per op", prep, "Executor(model)"))

    ex = Executor(counting_while_model())
    for iters in (100, 1000):
        feeds = while_feeds([0, 0], 0, iters, [1, 1])
        stats = RunStats()
        ex.run(feeds, stats=stats)
        ops_per_iter = (stats.operations_run - 2) / iters
        t = best_seconds(lambda feeds=feeds: ex.run(feeds), r)
        rows.append(
            (
                f"WHILE counting loop, {iters} iterations",
                "per iteration",
                t / iters * 1e6,
                f"{t / stats.operations_run * 1e6:.1f} us/op, {ops_per_iter:.0f} ops/iteration",
            )
        )

    ex = Executor(if_model())
    feeds = [np.array([True]), np.zeros(2, F32)]
    t = best_seconds(lambda: [ex.run(feeds) for _ in range(100)], r) / 100
    rows.append(("IF, one ADD in the branch", "per run", t * 1e6, "whole execution"))

    width = max(len(name) for name, *_ in rows)
    print(f"{'case':<{width}}  {'unit':<14} {'µs':>9}  note")
    for name, unit, us, note in rows:
        print(f"{name:<{width}}  {unit:<14} {us:9.2f}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
