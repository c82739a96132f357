"""Out-of-process round trip: what running a driver in a child process costs per call.

    python benchmarks/bench_isolated.py [--repeat N]

A one-operation model (ADD of a float32 [256] input — 1 KiB — and a constant) executes
on the reference in-process and behind :class:`driver.isolated.IsolatedDevice`, through
each execution path. Figures are the median and the 10th percentile (the least disturbed
by other work on the machine) of ``--repeat`` executions after a warm-up; the budget is
1 ms for an out-of-process synchronous execution. Also reported: starting a child
(importing the driver) and the time from a crash to the next successful execution.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driver.builder import ModelBuilder, build_request
from driver.device import CollectingCallback, ReferenceDevice
from driver.hal.types import ErrorStatus, Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.isolated import IsolatedDevice
from driver.sync import SyncFence

BUDGET_US = 1000.0


def one_op_model() -> Model:
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (256,))
    c = b.add_constant(T.TENSOR_FLOAT32, (256,), np.linspace(-1, 1, 256))
    b.add_operation(
        O.ADD, [x, c, b.add_scalar(T.INT32, 0)], [b.add_output(T.TENSOR_FLOAT32, (256,))]
    )
    return b.build()


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, 10th percentile) in microseconds."""
    for _ in range(max(10, repeat // 20)):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[len(samples) // 10]


def paths(device, model: Model) -> dict[str, Callable[[], object]]:
    status, pm = device.prepare_model(model)
    assert status == ErrorStatus.NONE, getattr(device, "last_error", "")
    rb = build_request(model, [np.ones(256, np.float32)])
    request = rb.request
    _, burst = pm.configure_execution_burst()

    def sync():
        assert pm.execute_synchronously(request)[0] == ErrorStatus.NONE

    def asynchronous():
        cb = CollectingCallback()
        pm.execute(request, 0, None, None, cb)
        assert cb.wait(10)[0] == ErrorStatus.NONE

    def fenced():
        _, done, _ = pm.execute_fenced(request, [SyncFence.signalled()])
        assert done is None or done.wait(10) == ErrorStatus.NONE

    def in_burst():
        assert burst.execute(request)[0] == ErrorStatus.NONE

    return {"sync": sync, "async": asynchronous, "fenced": fenced, "burst": in_burst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    model = one_op_model()

    t0 = time.perf_counter()
    isolated = IsolatedDevice("reference")
    start_ms = (time.perf_counter() - t0) * 1e3
    local = ReferenceDevice()

    print(f"one ADD, 1 KiB in / 1 KiB out; {args.repeat} executions per figure (µs)")
    print(f"{'path':<8} {'in-process':>18} {'out-of-process':>18} {'overhead':>10}")
    print(f"{'':<8} {'median':>9}{'p10':>9} {'median':>9}{'p10':>9} {'median':>10}")
    results = {}
    local_paths, remote_paths = paths(local, model), paths(isolated, model)
    for name in local_paths:
        lm, lp = timed(local_paths[name], args.repeat)
        rm, rp = timed(remote_paths[name], args.repeat)
        results[name] = rm
        print(f"{name:<8} {lm:>9.0f}{lp:>9.0f} {rm:>9.0f}{rp:>9.0f} {rm - lm:>10.0f}")

    crash_device = IsolatedDevice("tests.drivers:exiting")
    status, pm = crash_device.prepare_model(model)
    from tests.drivers import TRIGGER

    bad = build_request(model, [np.full(256, TRIGGER, np.float32)]).request
    good = build_request(model, [np.ones(256, np.float32)]).request
    t0 = time.perf_counter()
    assert pm.execute_synchronously(bad)[0] == ErrorStatus.DEVICE_UNAVAILABLE
    crash_ms = (time.perf_counter() - t0) * 1e3
    status, pm = crash_device.prepare_model(model)
    assert pm.execute_synchronously(good)[0] == ErrorStatus.NONE
    recover_ms = (time.perf_counter() - t0) * 1e3
    print()
    print(f"child start (import + load the driver): {start_ms:.0f} ms")
    print(
        f"crash reported after {crash_ms:.1f} ms; next execution done {recover_ms:.0f} ms after the crash"
    )
    verdict = "within" if results["sync"] <= BUDGET_US else "OVER"
    print(
        f"out-of-process sync round trip {results['sync']:.0f} µs: {verdict} the {BUDGET_US:.0f} µs budget"
    )
    isolated.close()
    crash_device.close()


if __name__ == "__main__":
    main()
