"""Decode and validation speed of wire-encoded models: what each fuzz input costs.

    python benchmarks/bench_decode_validate.py [--repeat N]

Builds a realistic 5-operation and 40-operation float32 model (a chain over a [1, 8, 8, 8]
activation mixing CONV_2D, DEPTHWISE_CONV_2D, ADD, MUL, AVERAGE_POOL_2D and RELU with
constant weights and scalar parameters, like a small vision network; only the operations
the registry declares *and* that validate are used, falling back to an ADD chain),
encodes them with :mod:`driver.wire`, and prints the median time of ``decode_model``,
of ``validation.validate_model`` and of both together (what the fuzz target does).
Budgets: decode + validate ≤ 150 µs (5 operations) and ≤ 1 ms (40 operations).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver import wire
from driver.builder import ModelBuilder
from driver.hal.types import HalError, Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import REGISTRY
from driver.validation import validate_model

SHAPE = (1, 8, 8, 8)
C = SHAPE[-1]
F32 = T.TENSOR_FLOAT32
rng = np.random.default_rng(0)

# Each step appends one operation consuming ``x`` (an operand of SHAPE) and returns
# its output operand, created by ``out()`` (a temporary, or the model output).
Step = Callable[[ModelBuilder, int, Callable[[], int]], int]


def _weights(*dims: int) -> np.ndarray:
    return rng.uniform(-1, 1, dims).astype(np.float32)


def conv(b: ModelBuilder, x: int, out: Callable[[], int]) -> int:
    """3x3 explicit-padding convolution (10 inputs, as CTS models write them)."""
    w = b.add_constant(F32, (C, 3, 3, C), _weights(C, 3, 3, C))
    bias = b.add_constant(F32, (C,), _weights(C))
    params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 1, 1, 1, 0)]
    y = out()
    b.add_operation(O.CONV_2D, [x, w, bias, *params], [y])
    return y


def depthwise(b: ModelBuilder, x: int, out: Callable[[], int]) -> int:
    """3x3 SAME depthwise convolution, multiplier 1 (implicit padding, 8 inputs)."""
    w = b.add_constant(F32, (1, 3, 3, C), _weights(1, 3, 3, C))
    bias = b.add_constant(F32, (C,), _weights(C))
    params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 1, 0)]
    y = out()
    b.add_operation(O.DEPTHWISE_CONV_2D, [x, w, bias, *params], [y])
    return y


def _binary(op: O) -> Step:
    def step(b: ModelBuilder, x: int, out: Callable[[], int]) -> int:
        k = b.add_constant(F32, (C,), _weights(C))
        act = b.add_scalar(T.INT32, 0)
        y = out()
        b.add_operation(op, [x, k, act], [y])
        return y

    step.__name__ = op.name.lower()
    return step


def avg_pool(b: ModelBuilder, x: int, out: Callable[[], int]) -> int:
    """3x3 SAME average pooling, stride 1 (implicit padding, 7 inputs)."""
    params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 3, 3, 0)]
    y = out()
    b.add_operation(O.AVERAGE_POOL_2D, [x, *params], [y])
    return y


def relu(b: ModelBuilder, x: int, out: Callable[[], int]) -> int:
    y = out()
    b.add_operation(O.RELU, [x], [y])
    return y


CANDIDATES: list[tuple[O, Step]] = [
    (O.CONV_2D, conv),
    (O.ADD, _binary(O.ADD)),
    (O.DEPTHWISE_CONV_2D, depthwise),
    (O.MUL, _binary(O.MUL)),
    (O.AVERAGE_POOL_2D, avg_pool),
    (O.RELU, relu),
]


def chain(steps: list[Step], n_ops: int) -> Model:
    b = ModelBuilder()
    x = b.add_input(F32, SHAPE)
    for k in range(n_ops):
        last = k == n_ops - 1
        x = steps[k % len(steps)](
            b,
            x,
            (lambda: b.add_output(F32, SHAPE)) if last else (lambda: b.add_operand(F32, SHAPE)),
        )
    return b.build()


def usable_steps() -> tuple[list[Step], list[str]]:
    """The candidate steps whose operation is declared and validates in a chain."""
    steps, skipped = [], []
    for op, step in CANDIDATES:
        if op not in REGISTRY:
            skipped.append(f"{op.name} (not declared)")
            continue
        try:
            validate_model(chain([step], 2))
        except Exception as e:  # an operation under construction: leave it out
            skipped.append(f"{op.name} ({type(e).__name__}: {e})"[:100])
            continue
        steps.append(step)
    return steps, skipped


def median_us(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(min(50, repeat)):  # warm up caches and the allocator
        fn()
    times = []
    clock = time.perf_counter_ns
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) / 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2000, help="timed runs per figure")
    args = parser.parse_args(argv)

    steps, skipped = usable_steps()
    if not steps:
        steps = [_binary(O.ADD)]
    print("operations used:", ", ".join(s.__name__ for s in steps))
    if skipped:
        print("left out:", "; ".join(skipped))
    print()
    header = (
        f"{'model':<8}{'operands':>9}{'bytes':>8}{'decode µs':>11}{'validate µs':>13}"
        f"{'both µs':>10}{'budget µs':>11}{'encode µs':>11}  within budget"
    )
    print(header)
    print("-" * len(header))
    for n_ops, budget in ((5, 150), (40, 1000)):
        model = chain(steps, n_ops)
        data = wire.encode_model(model).data
        decoded = wire.decode_model(data)
        try:
            validate_model(decoded)
        except HalError as e:
            print(f"{n_ops}-op model does not validate: {e}")
            return 1
        repeat = args.repeat if n_ops <= 5 else max(1, args.repeat // 4)
        gc.collect()
        t_dec = median_us(lambda d=data: wire.decode_model(d), repeat)
        t_val = median_us(lambda m=decoded: validate_model(m), repeat)
        t_both = median_us(lambda d=data: validate_model(wire.decode_model(d)), repeat)
        t_enc = median_us(lambda m=model: wire.encode_model(m), repeat)
        n_operands = len(model.main.operands)
        print(
            f"{n_ops:>2} ops   {n_operands:>9}{len(data):>8}{t_dec:>11.1f}{t_val:>13.1f}"
            f"{t_both:>10.1f}{budget:>11}{t_enc:>11.1f}  {'yes' if t_both <= budget else 'NO'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
