#!/usr/bin/env python3
"""Peak memory of each operation when its size parameters, or its inputs, grow.

    python benchmarks/bench_memory.py [--match NAME] [--per-op N] [--seconds S]
    python benchmarks/bench_memory.py --inputs [MIB] [--match NAME] [--per-op N]

A valid model may ask a kernel for enormous work from a tiny input: an INT32 scalar (an
output size, a padding, a stride, a sampling ratio), a float scalar (a resize scale) or an
int32 constant tensor (FILL dims, TILE multiples, paddings). For every example of
``tests/operations/examples_*.py`` (``--per-op`` per operation, default 2) and each such
argument, this doubles the value, with the outputs' dims left unknown, until the model no
longer runs (the executor caps an output at 256 MiB) or a run takes ``--seconds``. It
prints the largest value that ran, the peak memory numpy allocated during validation and
execution (tracemalloc), the bytes of the model's inputs and outputs, and their ratio.

Goals: peak <= 4 x (inputs + outputs) + 64 MB for every row, so that any valid model runs
within the fuzzers' default 2 GB limit; and every run within their default per-input
timeout (5 s), so that a slow kernel is not reported as a hang. Rows over either are
marked (a loaded machine stretches times: a marked time is a prompt to look). Runs
without a size argument or whose outputs stay tiny are not listed. ``--pairs`` also sets
every pair of INT32 scalars to extremes together (a stride with a padding, an output size
with an adaptive ratio) and reports crashes, slow runs and runs over either goal (~10
minutes; ``--per-op 8``, which reaches every data type's examples, ~25 minutes).

``--inputs MIB`` (default 64) grows the inputs instead: the example's non-constant tensor
inputs repeated along axis 0 until the largest is about MIB MiB. An operation gets such
inputs from one upstream, when a RESIZE, TILE, PAD or FILL asked for 256 MiB (the
executor's output cap) from a tiny input: its kernel must then keep within the same goal.
A row's time is projected linearly to 256 MiB inputs and marked when that is over the
fuzz timeout. Examples whose inputs do not share their first dimension are skipped.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import itertools
import signal
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.executor import Executor
from driver.hal.types import HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.testing import ScalarArg, TensorArg, single_op_model
from driver.validation import validate_model
from fuzz.campaign import CampaignConfig
from tests.operations.examples import all_examples

GOAL_FACTOR = 4
GOAL_SLACK = 64 << 20
LARGEST_INPUT = 256 << 20  # MAX_OUTPUT_BYTES: the largest tensor an upstream can make
LISTED_BYTES = 1 << 20  # rows whose largest run moved less than this are not listed
FUZZ_TIMEOUT = CampaignConfig(target="").timeout  # `nnfuzz fuzz --timeout`'s default


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout


def _grown(arg, value: int):
    """``arg`` with its size-like value(s) set to ``value``, or None when it has none."""
    if isinstance(arg, ScalarArg) and not isinstance(arg.value, bool):
        if arg.type == T.INT32:
            return dataclasses.replace(arg, value=value)
        if arg.type in (T.FLOAT32, T.FLOAT16) and (arg.type == T.FLOAT32 or value < 65504):
            return dataclasses.replace(arg, value=float(value))
    if isinstance(arg, TensorArg) and arg.type == T.TENSOR_INT32 and arg.const and arg.values.size:
        grown = np.where(arg.values > 0, np.int32(min(value, 2**31 - 1)), arg.values)
        return dataclasses.replace(arg, values=grown.astype(np.int32))
    return None


def _tiled(ex, target_bytes: int) -> tuple[list, int] | None:
    """``ex``'s inputs with every non-constant tensor input repeated along axis 0 until
    the largest is about ``target_bytes``, and the number of repeats; None when the
    inputs do not share axis 0's size (repeating them apart would not be a valid model)."""
    tensors = [
        k
        for k, a in enumerate(ex.inputs)
        if isinstance(a, TensorArg) and not a.const and a.values.ndim and a.values.shape[0]
    ]
    if not tensors or len({ex.inputs[k].values.shape[0] for k in tensors}) != 1:
        return None
    repeats = target_bytes // max(ex.inputs[k].values.nbytes for k in tensors)
    if repeats < 2:
        return None
    inputs = list(ex.inputs)
    for k in tensors:
        values = inputs[k].values
        tiled = np.tile(values, (repeats,) + (1,) * (values.ndim - 1))
        inputs[k] = dataclasses.replace(inputs[k], values=tiled, declared_dims=None)
    return inputs, repeats


def _run(ex, inputs, seconds: float) -> tuple[str, int, int]:
    """(outcome, peak bytes, input + output bytes) of one run."""
    outputs = [dataclasses.replace(o, dims=tuple(0 for _ in o.dims)) for o in ex.outputs]
    tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    io_bytes = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            model, feeds = single_op_model(ex.op, inputs, outputs, relaxed=ex.relaxed)
            validate_model(model, HalVersion.V1_3)
            results = Executor(model).run(feeds)
        io_bytes = sum(r.nbytes for r in results) + sum(np.asarray(f).nbytes for f in feeds)
        outcome = "ran"
    except HalError:
        outcome = "refused"
    except _Timeout:
        outcome = "slow"
    except Exception as e:  # a crash is a finding to print, not to hide
        outcome = f"crash {type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return outcome, peak, io_bytes


_PAIR_VALUES = (2**16, 2**20, 2**30, 2**31 - 1, -1, 0)


def _pair_findings(ex, seconds: float) -> list[str]:
    """Crashes, slow runs and runs over the memory goal with two INT32 scalars of ``ex``
    set to extremes at once."""
    ints = [
        k
        for k, a in enumerate(ex.inputs)
        if isinstance(a, ScalarArg) and a.type == T.INT32 and not isinstance(a.value, bool)
    ]
    found = []
    for k1, k2 in itertools.combinations(ints, 2):
        for v1, v2 in itertools.product(_PAIR_VALUES, repeat=2):
            inputs = list(ex.inputs)
            inputs[k1] = _grown(inputs[k1], v1)
            inputs[k2] = _grown(inputs[k2], v2)
            start = time.perf_counter()
            outcome, peak, io_bytes = _run(ex, inputs, seconds)
            took = time.perf_counter() - start
            where = f"{ex.name} inputs {k1} = {v1}, {k2} = {v2}"
            if outcome not in ("ran", "refused"):
                found.append(f"{where}: {outcome}")
            elif outcome == "ran" and peak > GOAL_FACTOR * io_bytes + GOAL_SLACK:
                found.append(f"{where}: peak {peak >> 20} MB for {io_bytes >> 20} MB in+out")
            elif took > FUZZ_TIMEOUT:
                found.append(f"{where}: {outcome} in {took:.1f} s (fuzz timeout {FUZZ_TIMEOUT} s)")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--match", default="", help="only examples whose name contains this")
    parser.add_argument("--per-op", type=int, default=2, help="examples per operation (2)")
    parser.add_argument("--seconds", type=float, default=30.0, help="time limit per run (30)")
    parser.add_argument(
        "--pairs",
        action="store_true",
        help="also set every pair of INT32 scalars to extremes (2**16, 2**20, 2**30, "
        "2**31-1, -1, 0): parameters that only blow up together, such as a stride and a "
        "padding (crashes, slow runs and runs over the goal are findings)",
    )
    parser.add_argument(
        "--inputs",
        type=int,
        nargs="?",
        const=64,
        metavar="MIB",
        help="grow the tensor inputs to about MIB MiB (64) instead of the size parameters",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _on_alarm)
    # A row's time is judged at LARGEST_INPUT: linear in the inputs from --inputs MIB.
    time_scale = LARGEST_INPUT / (args.inputs << 20) if args.inputs else 1.0

    rows, findings = [], []
    per_op = collections.Counter()
    for ex in all_examples():
        if args.match not in ex.name or per_op[ex.op] >= args.per_op:
            continue
        per_op[ex.op] += 1
        if args.inputs:
            tiled = _tiled(ex, args.inputs << 20)
            if tiled is not None:
                start = time.perf_counter()
                outcome, peak, io_bytes = _run(ex, tiled[0], args.seconds)
                seconds = time.perf_counter() - start
                if outcome == "ran":
                    rows.append((ex.name, "all", tiled[1], peak, io_bytes, seconds))
                elif outcome != "refused":
                    findings.append(f"{ex.name} inputs x {tiled[1]}: {outcome}")
            print(f"\r{ex.name[:50]:50s}", end="", file=sys.stderr, flush=True)
            continue
        for k, arg in enumerate(ex.inputs):
            if _grown(arg, 1) is None:
                continue
            best = None
            for exponent in range(3, 31):
                inputs = list(ex.inputs)
                inputs[k] = _grown(arg, 2**exponent)
                if inputs[k] is None:  # beyond the scalar's type (float16)
                    break
                start = time.perf_counter()
                outcome, peak, io_bytes = _run(ex, inputs, args.seconds)
                seconds = time.perf_counter() - start
                if outcome == "ran":
                    best = (2**exponent, peak, io_bytes, seconds)
                elif outcome != "refused":
                    findings.append(f"{ex.name} input {k} = 2**{exponent}: {outcome}")
                    break
                if outcome == "refused" and best is not None and exponent > 20:
                    break
            if best is not None and best[1] >= LISTED_BYTES:
                rows.append((ex.name, k, *best))
            print(f"\r{ex.name[:50]:50s} input {k}", end="", file=sys.stderr, flush=True)
        if args.pairs:
            findings += _pair_findings(ex, args.seconds)
    print(file=sys.stderr)

    print(
        f"{'example':48s} {'input':>5s} {'value' if not args.inputs else 'repeats':>11s} {'peak MB':>8s} {'io MB':>7s} "
        f"{'ratio':>6s} {'s':>5s}"
    )
    over = slow = 0
    for name, k, value, peak, io_bytes, seconds in sorted(rows, key=lambda r: -r[3]):
        flag = ""
        if peak > GOAL_FACTOR * io_bytes + GOAL_SLACK:
            flag, over = "  > goal", over + 1
        if seconds * time_scale > FUZZ_TIMEOUT:
            flag, slow = flag + "  > time", slow + 1
        print(
            f"{name[:48]:48s} {k!s:>5s} {value:11d} {peak / 2**20:8.0f} {io_bytes / 2**20:7.0f} "
            f"{peak / max(io_bytes, 1):6.1f} {seconds:5.1f}{flag}"
        )
    for finding in findings:
        print(f"FINDING {finding}")
    print(
        f"{len(rows)} rows; {over} over the goal (peak <= {GOAL_FACTOR} x io + 64 MB), "
        f"{slow} over the fuzz timeout ({FUZZ_TIMEOUT} s"
        + (f" at {LARGEST_INPUT >> 20} MiB inputs" if args.inputs else "")
        + f"); {len(findings)} crashes or slow runs"
    )
    return 1 if over or slow or findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
