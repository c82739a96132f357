"""Stress, like Android's MLTS stress tests: many concurrent executions and preparations
on one device, memory pressure and a long run. Every interaction is classified SUCCESS,
FAILURE (wrong status or values), HANG (no answer within the time limit) or CRASH (an
exception escaped the driver, or its process died); the test fails unless all succeed,
and says how many of each it saw.

The driver runs out of process (``NAME@isolated``) when ``--nn-isolate`` allows it
(default ``auto``: whenever the driver is not isolated already), so a crash or a hang is
a verdict, not the end of the run. Sizes and durations come from the budget: short for
``quick`` and ``ci``, long for ``nightly``.
"""

from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from driver.hal.types import BufferDesc, BufferRole, ErrorStatus, HalVersion
from driver.memory import allocate_shared_memory
from nnfuzz_pytest.checks import prepare_supported, status_name
from nnfuzz_pytest.harness import DriverCrash, DriverHang, DriverUnderTest, Verdict
from nnfuzz_pytest.session import active, models, nn_property

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_stress]


def out_of_resources_statuses(version: HalVersion) -> tuple[ErrorStatus, ...]:
    """How a driver of ``version`` says it ran out of resources: RESOURCE_EXHAUSTED_*
    from HAL 1.3; before, GENERAL_FAILURE is the only failure it has (seed 003)."""
    if version >= HalVersion.V1_3:
        return (ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT, ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT)
    return (ErrorStatus.GENERAL_FAILURE,)


_ISOLATED: dict[str, DriverUnderTest] = {}


def stress_driver() -> DriverUnderTest:
    """The driver the stress tests use: out of process when possible."""
    session = active()
    spec = session.spec
    if session.isolate == "never" or "@isolated" in spec:
        return session.driver
    if spec not in _ISOLATED:
        from driver.registry import load_device

        timeout = session.driver.timeout
        try:
            driver = DriverUnderTest(
                lambda: load_device(f"{spec}@isolated:timeout={timeout:g}"),
                name=f"{spec}@isolated",
                version=session.version,
                timeout=timeout + 5,  # the child's own watchdog answers first
            )
        except (DriverHang, DriverCrash, ImportError) as e:
            if session.isolate == "always":
                raise AssertionError(f"cannot run {spec} out of process: {e}") from e
            return session.driver
        _ISOLATED[spec] = driver
    return _ISOLATED[spec]


class Tally:
    """Verdicts of many interactions (thread-safe), with the first few failures."""

    def __init__(self) -> None:
        self.counts: collections.Counter[Verdict] = collections.Counter()
        self.examples: list[str] = []
        self._lock = threading.Lock()

    def add(self, verdict: Verdict, what: str = "") -> None:
        with self._lock:
            self.counts[verdict] += 1
            if verdict != Verdict.SUCCESS and len(self.examples) < 5:
                self.examples.append(f"{verdict.value}: {what}")

    def run(self, fn, *args) -> None:
        """Classify one interaction ``fn(*args)`` (returns None or a failure text)."""
        try:
            problem = fn(*args)
        except DriverHang as e:
            self.add(Verdict.HANG, str(e))
        except DriverCrash as e:
            self.add(Verdict.CRASH, str(e))
        except AssertionError as e:
            self.add(Verdict.FAILURE, str(e))
        else:
            self.add(Verdict.SUCCESS if problem is None else Verdict.FAILURE, problem or "")

    def check(self, what: str) -> None:
        summary = ", ".join(f"{n} {v.value}" for v, n in sorted(self.counts.items(), key=str))
        if any(n for v, n in self.counts.items() if v != Verdict.SUCCESS):
            # Raised, not asserted: pytest rewrites a plugin's asserts and would append
            # its own introspection to the summary.
            raise AssertionError(f"{what}: {summary}\n" + "\n".join(self.examples))


def _classify_status(driver: DriverUnderTest, status) -> Verdict:
    """An isolated driver answers with DEVICE_UNAVAILABLE when its process died (and for
    the objects that died with it), and with GENERAL_FAILURE when it was killed for
    hanging (``last_outcome`` HANG)."""
    if status == ErrorStatus.DEVICE_UNAVAILABLE:
        return Verdict.CRASH
    outcome = getattr(getattr(driver.device, "last_outcome", None), "name", None)
    if outcome == "HANG":
        return Verdict.HANG
    return Verdict.FAILURE


def _execute_once(driver, prepared, case, expected, path):
    execution = driver.run(prepared, case.inputs, path)
    if not execution.ok:
        verdict = _classify_status(driver, execution.status)
        if verdict != Verdict.FAILURE:
            raise (DriverHang if verdict == Verdict.HANG else DriverCrash)(
                f"{verdict.value}: {execution.describe()} ({getattr(driver.device, 'last_error', '')})"
            )
        return execution.describe()
    for k, (a, e) in enumerate(zip(execution.outputs, expected)):
        if k in case.ignored:
            continue
        if np.asarray(a).tobytes() != np.asarray(e).tobytes():
            return f"{path}: output {k} differs from the single-threaded result"
    return None


@nn_property(examples="stress_models", shrink=False, case=models(), data=st.data())
def test_stress_concurrent_executions(nn_driver, case, data):
    """Many threads executing one prepared model on random paths at once: every
    execution succeeds with the single-threaded result, bit for bit."""
    budget = active().budget
    driver = stress_driver()
    prepared = prepare_supported(driver, case.model)
    assume(prepared is not None)
    first = driver.run(prepared, case.inputs, driver.paths[0])
    assert first.ok, f"single execution: {first.describe()}"
    expected = first.outputs
    plan = data.draw(
        st.lists(
            st.sampled_from(driver.paths),
            min_size=budget.stress_threads * budget.stress_executions,
            max_size=budget.stress_threads * budget.stress_executions,
        ),
        label="paths",
    )
    tally = Tally()
    with ThreadPoolExecutor(budget.stress_threads) as pool:
        for path in plan:
            pool.submit(tally.run, _execute_once, driver, prepared, case, expected, path)
    tally.check(f"{len(plan)} concurrent executions on {budget.stress_threads} threads")


@nn_property(
    examples="stress_models", shrink=False, cases=st.lists(models(), min_size=2, max_size=8)
)
def test_stress_concurrent_preparations(nn_driver, cases):
    """Several models prepared and executed at once on one device: every preparation
    and execution succeeds and matches the reference."""
    from nnfuzz_pytest.checks import assert_close

    budget = active().budget
    driver = stress_driver()
    tally = Tally()

    def one(case):
        status, supported = driver.supported(case.model)
        if status != ErrorStatus.NONE:
            return f"getSupportedOperations: {status_name(status)}"
        if not all(supported):
            return None
        prepared = driver.must_prepare(case.model)
        execution = driver.run(prepared, case.inputs, driver.paths[0])
        if not execution.ok:
            return execution.describe()
        assert_close(
            case.model, execution.outputs, case.expected(), "vs reference", ignored=case.ignored
        )
        return None

    rounds = max(1, budget.stress_executions // 4)
    with ThreadPoolExecutor(budget.stress_threads) as pool:
        for _ in range(rounds):
            for case in cases:
                pool.submit(tally.run, one, case)
    tally.check(f"{rounds * len(cases)} concurrent preparations")


@nn_property(examples="stress_models", shrink=False, case=models())
def test_stress_memory_pressure(nn_driver, case):
    """Executions whose request pools together hold the budget's memory (each padded to
    1 MiB), many prepared models and buffers alive at once: every call answers NONE or
    that it is out of resources (RESOURCE_EXHAUSTED_* from HAL 1.3, GENERAL_FAILURE
    before: the only failure status older drivers have), and afterwards a plain
    execution still succeeds."""
    from driver.builder import build_request

    budget = active().budget
    driver = stress_driver()
    prepared = prepare_supported(driver, case.model)
    assume(prepared is not None)
    exhausted = out_of_resources_statuses(driver.version)
    tally = Tally()
    held = []
    mib = 1 << 20

    def padded_execution():
        bundle = build_request(case.model, list(case.inputs))
        pad = allocate_shared_memory(mib)
        held.append(pad)
        request = bundle.request
        from dataclasses import replace

        request = replace(request, pools=(*request.pools, pad))
        execution = driver.execute(prepared, request, driver.paths[0])
        if execution.ok or execution.status in exhausted:
            return None
        return (
            f"{execution.describe()} (HAL {driver.version.label}: out of resources is "
            f"{', '.join(status_name(s) for s in exhausted)})"
        )

    def another_prepared_model():
        status, p = driver.prepare(case.model)
        if status == ErrorStatus.NONE:
            held.append(p)
            return None
        return None if status in exhausted else f"prepareModel: {status_name(status)}"

    def a_buffer():
        dev = driver.device
        status, buffer, _ = driver.call(
            "allocate",
            lambda: dev.allocate(BufferDesc(), [prepared.handle], [], [BufferRole(0, 0, 1.0)]),
        )
        if status == ErrorStatus.NONE:
            held.append(buffer)
        ok = (ErrorStatus.NONE, ErrorStatus.GENERAL_FAILURE, *exhausted)
        return None if status in ok else f"allocate: {status_name(status)}"

    with ThreadPoolExecutor(budget.stress_threads) as pool:
        for n in range(budget.pressure_mib):
            pool.submit(tally.run, padded_execution)
            if n % 4 == 0:
                pool.submit(tally.run, another_prepared_model)
            if n % 4 == 2 and driver.version >= HalVersion.V1_3:
                pool.submit(tally.run, a_buffer)
    tally.check(f"memory pressure ({budget.pressure_mib} MiB of request pools)")
    held.clear()
    after = driver.run(prepared, case.inputs, driver.paths[0])
    assert after.ok, f"after the pressure: {after.describe()}"


@nn_property(examples="stress_models", shrink=False, case=models())
def test_stress_long_run(nn_driver, case):
    """Executions back to back for the budget's duration (seconds in ci, minutes
    nightly), all paths in turn: all succeed with the same bits."""
    budget = active().budget
    driver = stress_driver()
    prepared = prepare_supported(driver, case.model)
    assume(prepared is not None)
    first = driver.run(prepared, case.inputs, driver.paths[0])
    assert first.ok, f"single execution: {first.describe()}"
    tally = Tally()
    end = time.monotonic() + budget.stress_seconds
    n = 0
    while time.monotonic() < end or n == 0:
        path = driver.paths[n % len(driver.paths)]
        tally.run(_execute_once, driver, prepared, case, first.outputs, path)
        n += 1
        if tally.counts[Verdict.HANG] or tally.counts[Verdict.CRASH]:
            break
    tally.check(f"long run ({n} executions in {budget.stress_seconds:g} s)")
