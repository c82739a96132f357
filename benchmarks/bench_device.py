#!/usr/bin/env python3
"""Synchronous-execution overhead of the reference device over a direct executor call.

    python benchmarks/bench_device.py

A one-operation model (ADD of two 2x3 float32 tensors). Goal: executeSynchronously costs at
most 50 µs more than ``Executor.run`` on the same inputs (request validation, reading and
writing shared-memory pools, the scheduler slot, timing).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.builder import ModelBuilder, build_request
from driver.device import ReferenceDevice
from driver.hal.types import MeasureTiming, OperandType, OperationType


def median_us(fn, n: int = 2000) -> float:
    for _ in range(200):
        fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def main() -> int:
    b = ModelBuilder()
    x = b.add_input(OperandType.TENSOR_FLOAT32, (2, 3))
    y = b.add_input(OperandType.TENSOR_FLOAT32, (2, 3))
    out = b.add_output(OperandType.TENSOR_FLOAT32, (2, 3))
    b.add_operation(OperationType.ADD, [x, y, b.add_scalar(OperandType.INT32, 0)], [out])
    model = b.build()
    inputs = [np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)]
    device = ReferenceDevice()
    _, prepared = device.prepare_model(model)
    request = build_request(model, inputs).request
    direct = median_us(lambda: prepared.executor.run(inputs))
    sync = median_us(lambda: prepared.execute_synchronously(request))
    timed = median_us(lambda: prepared.execute_synchronously(request, MeasureTiming.YES))
    print(f"{'path':38} {'median µs':>10}")
    print(f"{'Executor.run (direct)':38} {direct:10.1f}")
    print(f"{'execute_synchronously':38} {sync:10.1f}")
    print(f"{'execute_synchronously, timing measured':38} {timed:10.1f}")
    print(f"overhead: {sync - direct:.1f} µs (goal <= 50 µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
