"""Validation speed: ``driver.validation.validate_model`` on 5- and 40-operation models.

    python benchmarks/bench_validate.py [--repeat N] [--per-op]

Two model families, both chains over one activation (every operation's output feeds the
next, constants and scalar parameters as a client would write them):

``vision``
    [1, 8, 8, 8] float32 through CONV_2D (explicit padding), ADD, DEPTHWISE_CONV_2D,
    MUL, AVERAGE_POOL_2D, RELU: parameter-heavy operations (7-10 inputs each). The same
    shape as ``bench_decode_validate.py``'s models, so the figures compare.
``mixed``
    [1, 8, 8, 8] float32 through a rotation of cheaper operations (binary arithmetic,
    activations, unary math, pooling, SOFTMAX), like Android's random-graph sizes.

For each model it prints the median of ``validate_model`` (the whole thing) and of the
structural part alone (operands, locations, graph, input/output lists: what
:mod:`driver.validation` does itself), the rest being the operations' own ``validate``
and ``infer_shapes`` hooks and signature matching. When :mod:`driver.wire` is present it
also prints decode and decode + validate against the budget (≤ 150 µs for 5 operations,
≤ 1 ms for 40). ``--per-op`` adds the validation cost of one operation of each kind.
Operations not declared yet are left out (the chain falls back to ADD).
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

from driver.builder import ModelBuilder
from driver.hal.types import HalError, HalVersion, Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import REGISTRY
from driver.validation import _check_pools, _check_subgraph, _Limits, validate_model

SHAPE = (1, 8, 8, 8)
C = SHAPE[-1]
F32 = T.TENSOR_FLOAT32
Out = Callable[[], int]
Step = Callable[[ModelBuilder, int, Out], int]
_rng = np.random.default_rng(0)


def _w(*dims: int) -> np.ndarray:
    return _rng.uniform(-1, 1, dims).astype(np.float32)


def conv(b: ModelBuilder, x: int, out: Out) -> int:
    w = b.add_constant(F32, (C, 3, 3, C), _w(C, 3, 3, C))
    bias = b.add_constant(F32, (C,), _w(C))
    params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 1, 1, 1, 0)]
    y = out()
    b.add_operation(O.CONV_2D, [x, w, bias, *params], [y])
    return y


def depthwise(b: ModelBuilder, x: int, out: Out) -> int:
    w = b.add_constant(F32, (1, 3, 3, C), _w(1, 3, 3, C))
    bias = b.add_constant(F32, (C,), _w(C))
    params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 1, 0)]
    y = out()
    b.add_operation(O.DEPTHWISE_CONV_2D, [x, w, bias, *params], [y])
    return y


def binary(op: O) -> Step:
    def step(b: ModelBuilder, x: int, out: Out) -> int:
        k = b.add_constant(F32, (C,), _w(C) + 2.0)  # positive: valid for DIV too
        act = b.add_scalar(T.INT32, 0)
        y = out()
        b.add_operation(op, [x, k, act], [y])
        return y

    step.__name__ = op.name.lower()
    return step


def unary(op: O) -> Step:
    def step(b: ModelBuilder, x: int, out: Out) -> int:
        y = out()
        b.add_operation(op, [x], [y])
        return y

    step.__name__ = op.name.lower()
    return step


def pool(op: O) -> Step:
    def step(b: ModelBuilder, x: int, out: Out) -> int:
        params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 3, 3, 0)]  # SAME 3x3 stride 1
        y = out()
        b.add_operation(op, [x, *params], [y])
        return y

    step.__name__ = op.name.lower()
    return step


def softmax(b: ModelBuilder, x: int, out: Out) -> int:
    beta = b.add_scalar(T.FLOAT32, 1.0)
    y = out()
    b.add_operation(O.SOFTMAX, [x, beta], [y])
    return y


FAMILIES: dict[str, list[tuple[O, Step]]] = {
    "vision": [
        (O.CONV_2D, conv),
        (O.ADD, binary(O.ADD)),
        (O.DEPTHWISE_CONV_2D, depthwise),
        (O.MUL, binary(O.MUL)),
        (O.AVERAGE_POOL_2D, pool(O.AVERAGE_POOL_2D)),
        (O.RELU, unary(O.RELU)),
    ],
    "mixed": [
        (O.ADD, binary(O.ADD)),
        (O.LOGISTIC, unary(O.LOGISTIC)),
        (O.MUL, binary(O.MUL)),
        (O.TANH, unary(O.TANH)),
        (O.SUB, binary(O.SUB)),
        (O.MAX_POOL_2D, pool(O.MAX_POOL_2D)),
        (O.RELU6, unary(O.RELU6)),
        (O.DIV, binary(O.DIV)),
        (O.ABS, unary(O.ABS)),
        (O.SOFTMAX, softmax),
    ],
}


def chain(steps: list[Step], n_ops: int) -> Model:
    b = ModelBuilder()
    x = b.add_input(F32, SHAPE)
    for k in range(n_ops):
        last = k == n_ops - 1
        out = (lambda: b.add_output(F32, SHAPE)) if last else (lambda: b.add_operand(F32, SHAPE))
        x = steps[k % len(steps)](b, x, out)
    return b.build()


def usable(candidates: list[tuple[O, Step]]) -> tuple[list[Step], list[str]]:
    steps, skipped = [], []
    for op, step in candidates:
        if op not in REGISTRY:
            skipped.append(f"{op.name} (not declared)")
            continue
        try:
            validate_model(chain([step], 2))
        except Exception as e:  # an operation under construction: leave it out
            skipped.append(f"{op.name} ({type(e).__name__})")
            continue
        steps.append(step)
    return steps or [binary(O.ADD)], skipped


def median_us(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(min(50, repeat)):
        fn()
    clock = time.perf_counter_ns
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) / 1000.0


def structural(model: Model) -> None:
    """Operands, locations, graph and input/output lists of the main subgraph."""
    sizes, versions = _check_pools(model.pools, HalVersion.V1_3, "model pool", False)
    limits = _Limits(len(model.operand_values), sizes, versions, 0, frozenset())
    _check_subgraph(model.main, None, HalVersion.V1_3, limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2000, help="timed runs per figure")
    parser.add_argument("--per-op", action="store_true", help="also time each operation kind")
    args = parser.parse_args(argv)
    try:
        from driver import wire
    except ImportError:  # pragma: no cover - the wire format is optional here
        wire = None

    header = f"{'model':<10}{'ops':>4}{'operands':>9}{'validate µs':>13}{'structural µs':>15}"
    if wire is not None:
        header += f"{'decode µs':>11}{'decode+validate µs':>20}{'budget µs':>11}"
    print(header)
    print("-" * len(header))
    notes = []
    for family, candidates in FAMILIES.items():
        steps, skipped = usable(candidates)
        if skipped:
            notes.append(f"{family}: left out {', '.join(skipped)}")
        for n_ops, budget in ((5, 150), (40, 1000)):
            model = chain(steps, n_ops)
            try:
                validate_model(model)
            except HalError as e:
                print(f"{family} {n_ops}-op model does not validate: {e}")
                return 1
            repeat = args.repeat if n_ops <= 5 else max(1, args.repeat // 4)
            gc.collect()
            t_val = median_us(lambda m=model: validate_model(m), repeat)
            t_struct = median_us(lambda m=model: structural(m), repeat)
            row = f"{family:<10}{n_ops:>4}{len(model.main.operands):>9}{t_val:>13.1f}{t_struct:>15.1f}"
            if wire is not None:
                data = wire.encode_model(model).data
                t_dec = median_us(lambda d=data: wire.decode_model(d), repeat)
                t_both = median_us(lambda d=data: validate_model(wire.decode_model(d)), repeat)
                row += f"{t_dec:>11.1f}{t_both:>20.1f}{budget:>11}"
            print(row)
    for note in notes:
        print(note)

    if args.per_op:
        print()
        print(f"{'operation':<20}{'µs per operation':>18}")
        seen: set[int] = set()
        for candidates in FAMILIES.values():
            for op, step in candidates:
                if op not in REGISTRY or op in seen:
                    continue
                seen.add(op)
                if op not in REGISTRY:
                    continue
                try:
                    one, eleven = chain([step], 1), chain([step], 11)
                    validate_model(eleven)
                except Exception:
                    continue
                t1 = median_us(lambda m=one: validate_model(m), args.repeat // 4)
                t11 = median_us(lambda m=eleven: validate_model(m), args.repeat // 4)
                print(f"{op.name:<20}{(t11 - t1) / 10:>18.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
