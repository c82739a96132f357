"""QoS and execution reports: deadlines and priorities, timing, fences, memory domains
(driver-managed buffers) and output buffers that are too small."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from driver.builder import build_request
from driver.hal.types import (
    NO_TIMING,
    UINT64_MAX,
    BufferDesc,
    BufferRole,
    ErrorStatus,
    HalVersion,
    MeasureTiming,
    Priority,
    is_scalar_type,
)
from driver.memory import allocate_shared_memory, pool_buffer
from driver.operations.base import array_to_bytes
from nnfuzz_pytest import transforms
from nnfuzz_pytest.checks import (
    assert_close,
    assert_failed_cleanly,
    assert_ok,
    assert_same_bits,
    execute_valid,
    prepare_supported,
    status_name,
)
from nnfuzz_pytest.harness import (
    FENCE_STATES,
    fenced_output_dims,
    has_unspecified_outputs,
    now_ns,
    output_sizes_for,
    read_outputs,
    with_pool_token,
)
from nnfuzz_pytest.session import active, models, nn_property, require_version

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_qos]
V = HalVersion
PAST = 1_000_000_000  # a deadline one second ago
HOUR = 3600 * 1_000_000_000
FAR_DEADLINES = {  # deadlines a valid execution always meets
    "an hour away": lambda: now_ns() + HOUR,
    "the end of time": lambda: UINT64_MAX,  # VTS's "unlimited" deadline
}


def fully_specified_request(case):
    """A request for ``case`` that specifies every output's dims (executeFenced takes no
    other): the model's, or the expected outputs' where the model leaves them unknown;
    None when one of those is zero-sized (0 means "unknown")."""
    if not has_unspecified_outputs(case.model):
        return build_request(case.model, list(case.inputs))
    expected = case.expected()
    dims = fenced_output_dims(case.model, expected)
    if dims is None:
        return None
    sizes = output_sizes_for(case.model, expected)
    return build_request(case.model, list(case.inputs), output_dims=dims, output_sizes=sizes)


@nn_property(0.5, case=models())
def test_past_deadline_is_missed_deadline_persistent(nn_driver, case):
    """A deadline already passed: prepareModel and every execution path answer
    MISSED_DEADLINE_PERSISTENT, with no output shapes and no timing."""
    require_version(V.V1_3, "deadlines")
    status, prepared = nn_driver.prepare(case.model, deadline=now_ns() - PAST)
    assert status == ErrorStatus.MISSED_DEADLINE_PERSISTENT and prepared is None, (
        f"prepareModel past its deadline returned {status_name(status)}"
    )
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    bundle = fully_specified_request(case)
    for path in nn_driver.paths:
        if path == "fenced" and bundle is None:
            continue  # no request executeFenced may take (a zero-sized output)
        request = (bundle or build_request(case.model, list(case.inputs))).request
        execution = nn_driver.execute(prepared, request, path, deadline=now_ns() - PAST)
        assert_failed_cleanly(execution, ErrorStatus.MISSED_DEADLINE_PERSISTENT, path)


@nn_property(0.5, case=models(), data=st.data())
def test_far_deadline_and_every_priority_succeed(nn_driver, case, data):
    """VTS QualityOfServiceTests: prepareModel with each priority (LOW, MEDIUM, HIGH) and
    a deadline far away succeeds, and so does every execution path with such a
    deadline (the paths take turns with the priorities); the outputs agree with the
    reference."""
    require_version(V.V1_3, "priorities and deadlines")
    deadline = data.draw(st.sampled_from(sorted(FAR_DEADLINES)), label="deadline")
    status, supported = nn_driver.supported(case.model)
    assume(status == ErrorStatus.NONE and all(supported))
    expected = case.expected()
    prepared = {}
    for priority in Priority:
        status, prepared[priority] = nn_driver.prepare(
            case.model, priority=priority, deadline=FAR_DEADLINES[deadline]()
        )
        assert status == ErrorStatus.NONE and prepared[priority] is not None, (
            f"prepareModel with priority {priority.name} and a deadline {deadline}: "
            f"{status_name(status)}"
        )
    for k, path in enumerate(nn_driver.paths):
        priority = list(Priority)[k % len(Priority)]
        what = f"{path} with a deadline {deadline} (prepared with priority {priority.name})"
        far = FAR_DEADLINES[deadline]()
        outputs = execute_valid(nn_driver, prepared[priority], case, path, what=what, deadline=far)
        if outputs is not None:
            assert_close(case.model, outputs, expected, what, ignored=case.ignored)


@nn_property(0.5, case=models())
def test_timing_is_reported_by_the_rules(nn_driver, case):
    """On every path, measured and not: no timing (UINT64_MAX) unless measurement was
    requested; measured, time in driver >= time on device where both are given; a
    fenced execution's timingFenced within its timingLaunched."""
    require_version(V.V1_2, "timing measurement")
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    for path in nn_driver.paths:
        for measure in MeasureTiming:
            # A fence signalled after the launch makes timingFenced differ from
            # timingLaunched.
            fences = ("later",) if path == "fenced" else ()
            execute_valid(nn_driver, prepared, case, path, measure=measure, fences=fences)


@nn_property(0.5, case=models(), data=st.data())
def test_fenced_execution_waits_for_its_fences(nn_driver, case, data):
    """executeFenced waits for every fence it is given (signalled before the launch or
    after it): the execution does not finish before the last one signals, and gives the
    outputs of an execution without fences. When one of them fails (signalled with an
    error), the execution fails with GENERAL_FAILURE: on the callback (or at launch),
    with its own fence signalled with an error and no timing."""
    require_version(V.V1_3, "executeFenced")
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    expected = case.expected()
    bundle_dims = {}
    if has_unspecified_outputs(case.model):
        dims = fenced_output_dims(case.model, expected)
        assume(dims is not None)
        bundle_dims = {"output_dims": dims, "output_sizes": output_sizes_for(case.model, expected)}
    fences = data.draw(
        st.lists(st.sampled_from(FENCE_STATES), min_size=1, max_size=4).map(tuple), label="fences"
    )
    execution = nn_driver.run(prepared, case.inputs, "fenced", fences=fences, **bundle_dims)
    what = f"fenced, waiting for fences {list(fences)}"
    if any(state.startswith("failed") for state in fences):
        assert_failed_cleanly(execution, ErrorStatus.GENERAL_FAILURE, what)
        assert execution.fence_status in (None, ErrorStatus.GENERAL_FAILURE), (
            f"{what}: its fence signalled {status_name(execution.fence_status)}, expected an error"
        )
        return
    without = assert_ok(nn_driver.run(prepared, case.inputs, "fenced", **bundle_dims), "fenced")
    assert_same_bits(assert_ok(execution, what), without, f"{what} vs none", case.ignored)


@nn_property(1.0, case=models(), data=st.data())
def test_output_insufficient_size_reports_the_shape(nn_driver, case, data):
    """An output buffer one byte too small (output dims left unspecified): status
    OUTPUT_INSUFFICIENT_SIZE, the output's real shape reported and marked insufficient,
    the other outputs sufficient, no timing; on every path that reports shapes."""
    require_version(V.V1_2, "OUTPUT_INSUFFICIENT_SIZE")
    expected = case.expected()
    sizes = output_sizes_for(case.model, expected)
    k = data.draw(st.integers(0, len(sizes) - 1), label="output")
    main = case.model.main
    assume(not is_scalar_type(main.operands[main.output_indexes[k]].type))
    assume(expected[k].size > 0)  # an empty output fits any buffer: nothing to be short of
    sizes[k] -= 1
    model = transforms.dynamic_outputs(case.model)
    prepared = prepare_supported(nn_driver, model)
    assume(prepared is not None)
    for path in nn_driver.paths:
        if path == "fenced":
            continue  # needs fully specified outputs: no shapes to report
        bundle = build_request(model, list(case.inputs), output_sizes=sizes)
        execution = nn_driver.execute(prepared, bundle.request, path)
        assert execution.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, (
            f"{path}: {execution.describe(with_path=False)} for output {k} one byte too small"
        )
        assert len(execution.shapes) == len(sizes), f"{path}: shapes {execution.shapes}"
        got = execution.shapes[k]
        assert tuple(got.dimensions) == tuple(expected[k].shape) and not got.is_sufficient, (
            f"{path}: output {k} reported as {got}, expected dims "
            f"{list(expected[k].shape)}, insufficient"
        )
        for j, s in enumerate(execution.shapes):
            if j != k:
                assert s.is_sufficient, f"{path}: output {j} (large enough) marked insufficient"
        assert execution.timing == NO_TIMING, f"{path}: timing reported on failure"


# --- memory domains ------------------------------------------------------------------

SCENARIOS = (
    "input from buffer",
    "uninitialized input",
    "output to buffer",
    "buffer of another prepared model",
    "input buffer used as output",
    "copy size mismatch",
    "invalid roles",
)


def _domains_offered(driver, prepared) -> bool:
    session = active()
    if "domains" not in session._support:
        roles = [BufferRole(0, 0, 1.0)] if prepared.model.main.input_indexes else []
        outs = [] if roles else [BufferRole(0, 0, 1.0)]
        dev = driver.device
        status, buffer, _token = driver.call(
            "allocate", lambda: dev.allocate(BufferDesc(), [prepared.handle], roles, outs)
        )
        session._support["domains"] = status == ErrorStatus.NONE and buffer is not None
    return session._support["domains"]


def _memory_of(data: bytes, size: int | None = None):
    mem = allocate_shared_memory(len(data) if size is None else size)
    n = min(len(data), mem.size)
    pool_buffer(mem)[:n] = data[:n]
    return mem


@nn_property(1.5, case=models(), data=st.data())
def test_memory_domain_rules(nn_driver, case, data):
    """Driver-managed buffers (IDevice::allocate, IBuffer): an initialized input buffer
    gives the same outputs as shared memory; an uninitialized one GENERAL_FAILURE; an
    output written to a buffer copies out the same bytes; a buffer used by another
    prepared model, in another role, with a copy of the wrong size, or allocated with
    invalid roles: INVALID_ARGUMENT."""
    require_version(V.V1_3, "memory domains")
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    if not _domains_offered(nn_driver, prepared):
        pytest.skip("the driver offers no memory domains (allocate fails): optional in 1.3")
    scenario = data.draw(st.sampled_from(SCENARIOS), label="scenario")
    main = case.model.main
    tensor_inputs = [
        k
        for k, i in enumerate(main.input_indexes)
        if not is_scalar_type(main.operands[i].type) and case.inputs[k] is not None
    ]
    dev = nn_driver.device
    direct = assert_ok(nn_driver.run(prepared, case.inputs), "shared-memory execution")
    # Output dims fully specified where they can be, so that every path takes it.
    specified = fully_specified_request(case)
    bundle = specified or build_request(case.model, list(case.inputs))

    def allocate(ins, outs, models=None):
        pms = models or [prepared.handle]
        return nn_driver.call("allocate", lambda: dev.allocate(BufferDesc(), pms, ins, outs))

    if scenario == "invalid roles":
        bad = data.draw(
            st.sampled_from(["input index out of range", "no roles", "frequency 0"]), label="roles"
        )
        n_in = len(main.input_indexes)
        ins = {
            "input index out of range": [BufferRole(0, n_in, 1.0)],
            "no roles": [],
            "frequency 0": [BufferRole(0, 0, 0.0)] if n_in else [BufferRole(0, n_in, 1.0)],
        }[bad]
        status, buffer, _ = allocate(ins, [])
        assert status == ErrorStatus.INVALID_ARGUMENT and buffer is None, (
            f"allocate with {bad}: {status_name(status)}"
        )
        return
    if scenario == "output to buffer" or not tensor_inputs:
        k = data.draw(st.integers(0, len(main.output_indexes) - 1), label="output")
        out_type = main.operands[main.output_indexes[k]].type
        status, buffer, token = allocate([], [BufferRole(0, k, 1.0)])
        assert status == ErrorStatus.NONE, f"allocate (output role {k}): {status_name(status)}"
        request = with_pool_token(bundle.request, token, output=k)
        execution = nn_driver.execute(prepared, request, "sync")
        assert execution.ok, f"execution into a buffer: {execution.describe()}"
        want = array_to_bytes(direct[k], out_type)
        dst = allocate_shared_memory(len(want))  # the buffer's exact size, even 0 bytes
        status = nn_driver.call("copyTo", lambda: buffer.copy_to(dst))
        assert status == ErrorStatus.NONE, f"IBuffer::copyTo: {status_name(status)}"
        assert bytes(pool_buffer(dst)[: len(want)]) == want, (
            "the buffer holds other bytes than the shared-memory output"
        )
        return
    k = data.draw(st.sampled_from(tensor_inputs), label="input")
    operand = main.operands[main.input_indexes[k]]
    value = array_to_bytes(np.asarray(case.inputs[k]), operand.type)
    status, buffer, token = allocate([BufferRole(0, k, 1.0)], [])
    assert status == ErrorStatus.NONE and buffer is not None and token > 0, (
        f"allocate (input role {k}): {status_name(status)}, token {token}"
    )
    dims = tuple(np.shape(case.inputs[k]))
    if scenario == "copy size mismatch":
        src = _memory_of(value, len(value) + 1)
        status = nn_driver.call("copyFrom", lambda: buffer.copy_from(src, dims))
        assert status == ErrorStatus.INVALID_ARGUMENT, (
            f"copyFrom of {len(value) + 1} bytes into a {len(value)}-byte buffer: "
            f"{status_name(status)}"
        )
        return
    if scenario != "uninitialized input":
        src = _memory_of(value)
        status = nn_driver.call("copyFrom", lambda: buffer.copy_from(src, dims))
        assert status == ErrorStatus.NONE, f"IBuffer::copyFrom: {status_name(status)}"
    request = with_pool_token(bundle.request, token, input=k)
    if scenario == "input from buffer":
        for path in nn_driver.paths:
            if path == "fenced" and specified is None:
                continue  # a zero-sized output: executeFenced takes no such request
            execution = nn_driver.execute(prepared, request, path)
            assert execution.ok, (
                f"{path}: execution from an input buffer: {execution.describe(with_path=False)}"
            )
            got = read_outputs(case.model, bundle, execution.shapes)
            assert_same_bits(got, direct, f"{path}: buffer input vs shared memory", case.ignored)
    elif scenario == "uninitialized input":
        execution = nn_driver.execute(prepared, request, "sync")
        assert_failed_cleanly(execution, ErrorStatus.GENERAL_FAILURE, "uninitialized input buffer")
    elif scenario == "buffer of another prepared model":
        other = nn_driver.must_prepare(case.model)
        execution = nn_driver.execute(other, request, "sync")
        assert_failed_cleanly(
            execution, ErrorStatus.INVALID_ARGUMENT, "a buffer allocated for another prepared model"
        )
    elif scenario == "input buffer used as output":
        request = with_pool_token(bundle.request, token, output=0)
        execution = nn_driver.execute(prepared, request, "sync")
        assert_failed_cleanly(
            execution, ErrorStatus.INVALID_ARGUMENT, "an input-role buffer used as an output"
        )
