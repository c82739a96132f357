"""Compilation cache: prepare vs prepare-from-cache on the reference device.

    python benchmarks/bench_cache.py [--repeat N] [--ops N]

Builds a 40-operation float32 model (a chain over a [1, 8, 8, 8] activation repeating
CONV_2D 3x3 with weights and bias, ADD of a constant, RELU), once with the weights in
``operandValues`` (CONSTANT_COPY) and once in a shared-memory pool (CONSTANT_REFERENCE,
which the data cache file carries), and prints the median time of:

* ``prepare``: ``prepare_model`` (validation, extension checks, the executor's static
  pass and constant decoding);
* ``prepare+save``: the same with cache descriptors and a token (also writes the files);
* ``from cache``: ``prepare_model_from_cache`` (read, verify the HMACs, decode the
  model, rebuild the executor from the cached plan, no validation).

and the sizes of the two cache files. The restored model's outputs are checked to be
bit-identical to the original's before timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver.builder import ModelBuilder, build_request
from driver.device import ReferenceDevice
from driver.hal.types import ErrorStatus, Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O

SHAPE = (1, 8, 8, 8)
C = SHAPE[-1]
F32 = T.TENSOR_FLOAT32
TOKEN = bytes(range(32))


def chain(n_ops: int, by_reference: bool) -> Model:
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    x = b.add_input(F32, SHAPE)
    for k in range(n_ops):
        y = b.add_output(F32, SHAPE) if k == n_ops - 1 else b.add_operand(F32, SHAPE)
        kind = k % 3
        if kind == 0:
            w = rng.uniform(-0.2, 0.2, (C, 3, 3, C)).astype(np.float32)
            wi = b.add_constant(F32, (C, 3, 3, C), w, by_reference=by_reference)
            bias = b.add_constant(F32, (C,), rng.uniform(-1, 1, C), by_reference=by_reference)
            params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 1, 1, 1, 0)]
            b.add_operation(O.CONV_2D, [x, wi, bias, *params], [y])
        elif kind == 1:
            c = b.add_constant(F32, (C,), rng.uniform(-1, 1, C))
            act = b.add_scalar(T.INT32, 0)
            b.add_operation(O.ADD, [x, c, act], [y])
        else:
            b.add_operation(O.RELU, [x], [y])
        x = y
    return b.build()


def median_us(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(min(10, repeat)):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000.0


def check(status: ErrorStatus, device: ReferenceDevice) -> None:
    if status != ErrorStatus.NONE:
        raise SystemExit(f"unexpected {status.name}: {device.last_error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200, help="timed runs per figure")
    parser.add_argument("--ops", type=int, default=40, help="operations in the model")
    args = parser.parse_args(argv)

    device = ReferenceDevice()
    header = (
        f"{'weights':<10}{'ops':>5}{'prepare µs':>12}{'prepare+save µs':>17}"
        f"{'from cache µs':>15}{'speedup':>9}{'model file':>12}{'data file':>11}"
    )
    print(header)
    print("-" * len(header))
    x = np.random.default_rng(1).uniform(-1, 1, SHAPE).astype(np.float32)
    for by_reference in (False, True):
        model = chain(args.ops, by_reference)
        mc = os.memfd_create("bench-model-cache")
        dc = os.memfd_create("bench-data-cache")
        try:
            status, original = device.prepare_model(
                model, model_cache=[mc], data_cache=[dc], token=TOKEN
            )
            check(status, device)
            status, restored = device.prepare_model_from_cache(None, [mc], [dc], TOKEN)
            check(status, device)
            outs = []
            for prepared in (original, restored):
                bundle = build_request(prepared.model, [x])
                check(prepared.execute_synchronously(bundle.request)[0], device)
                outs.append(bundle.output_bytes(0))
            if outs[0] != outs[1]:
                raise SystemExit("the restored model computes something else")

            t_prepare = median_us(lambda m=model: device.prepare_model(m), args.repeat)
            t_save = median_us(
                lambda m=model, mc=mc, dc=dc: device.prepare_model(
                    m, model_cache=[mc], data_cache=[dc], token=TOKEN
                ),
                args.repeat,
            )
            t_restore = median_us(
                lambda mc=mc, dc=dc: device.prepare_model_from_cache(None, [mc], [dc], TOKEN),
                args.repeat,
            )
            sizes = os.fstat(mc).st_size, os.fstat(dc).st_size
        finally:
            os.close(mc)
            os.close(dc)
        print(
            f"{'pool' if by_reference else 'inline':<10}{args.ops:>5}{t_prepare:>12.0f}"
            f"{t_save:>17.0f}{t_restore:>15.0f}{t_prepare / t_restore:>8.1f}x"
            f"{sizes[0]:>12}{sizes[1]:>11}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
