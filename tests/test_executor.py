"""The reference executor: planning, freeing, dynamic shapes, deadlines, relaxed
emulation and the HAL statuses of bad runtime input."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import driver.executor as executor_module
from driver.builder import ModelBuilder
from driver.executor import (
    DEFAULT_LOOP_TIMEOUT_S,
    MAX_LOOP_TIMEOUT_S,
    MAX_OUTPUT_BYTES,
    Executor,
    RunStats,
    run_model,
)
from driver.hal.types import ErrorStatus, HalError, OperandLifeTime
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import declaration
from driver.testing import status_of, traced_peak
from driver.validation import validate_model

F32 = np.float32


def add_chain(n: int, dims=(2,), *, declared=None, out_declared=None, relaxed=False, by_ref=False):
    """x + c + c + ... (n ADDs, c = 1.0 broadcast) as a model; temporaries in between."""
    b = ModelBuilder(relaxed=relaxed)
    x = b.add_input(T.TENSOR_FLOAT32, dims if declared is None else declared)
    c = b.add_constant(T.TENSOR_FLOAT32, (1,), [1.0], by_reference=by_ref)
    act = b.add_scalar(T.INT32, 0)
    prev = x
    for k in range(n):
        last = k == n - 1
        if last:
            nxt = b.add_output(T.TENSOR_FLOAT32, dims if out_declared is None else out_declared)
        else:
            nxt = b.add_operand(T.TENSOR_FLOAT32, dims if out_declared is None else out_declared)
        b.add_operation(O.ADD, [prev, c, act], [nxt])
        prev = nxt
    return b.build()


def binary_add_model(da, db, dout, *, type=T.TENSOR_FLOAT32, **kw):
    b = ModelBuilder()
    a = b.add_input(type, da, **kw)
    c = b.add_input(type, db, **kw)
    y = b.add_output(type, dout, **kw)
    b.add_operation(O.ADD, [a, c, b.add_scalar(T.INT32, 0)], [y])
    return b.build()


# --- basics ------------------------------------------------------------------------------


def test_chain_computes_and_reports_read_only_outputs():
    model = add_chain(5)
    validate_model(model)
    (out,) = Executor(model).run([np.array([1.5, -2.0], F32)])
    np.testing.assert_array_equal(out, [6.5, 3.0])
    assert out.dtype == F32
    assert not out.flags.writeable


@pytest.mark.parametrize("by_ref", [False, True], ids=["operandValues", "pool"])
def test_constants_come_from_operand_values_and_pools(by_ref):
    model = add_chain(3, by_ref=by_ref)
    assert bool(model.pools) == by_ref
    ex = Executor(model)
    for _ in range(2):  # constants are decoded once and never changed by a run
        (out,) = ex.run([np.zeros(2, F32)])
        np.testing.assert_array_equal(out, [3.0, 3.0])


def test_inputs_of_another_dtype_of_the_same_kind_are_cast():
    (out,) = Executor(add_chain(1)).run([np.array([1.0, 2.0])])  # float64 in
    assert out.dtype == F32
    np.testing.assert_array_equal(out, [2.0, 3.0])


def test_concurrent_runs_do_not_interfere():
    ex = Executor(add_chain(20))
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        for _ in range(20):
            (results[k],) = ex.run([np.full(2, k, F32)])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        np.testing.assert_array_equal(results[k], [k + 20, k + 20])


def in_place_add(ctx):
    """A buggy ADD kernel that accumulates into its first input."""
    a = ctx.value(0)
    a += ctx.value(1)
    return [a]


@pytest.mark.parametrize("constant_first", [False, True], ids=["input", "constant"])
def test_a_kernel_cannot_write_into_inputs_or_constants(constant_first):
    # Inputs and constants reach kernels read-only: a kernel writing into one fails
    # loudly instead of changing the caller's array or the next run's constant.
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (2,))
    c = b.add_constant(T.TENSOR_FLOAT32, (2,), [1.0, 2.0])
    y = b.add_output(T.TENSOR_FLOAT32, (2,))
    b.add_operation(
        O.ADD,
        [c, x, b.add_scalar(T.INT32, 0)] if constant_first else [x, c, b.add_scalar(T.INT32, 0)],
        [y],
    )
    ex = Executor(b.build(), overrides={O.ADD: replace(declaration(O.ADD), execute=in_place_add)})
    fed = np.array([10.0, 20.0], F32)
    for _ in range(2):
        with pytest.raises(ValueError, match="read-only"):
            ex.run([fed])
    np.testing.assert_array_equal(fed, [10.0, 20.0])
    (out,) = Executor(ex.model).run([fed])
    np.testing.assert_array_equal(out, [11.0, 22.0])


# --- freeing temporaries -----------------------------------------------------------------


def test_chain_holds_one_temporary_at_a_time():
    stats = RunStats()
    Executor(add_chain(12)).run([np.zeros(2, F32)], stats=stats)
    assert stats.operations_run == 12
    assert stats.peak_live_temporaries == 1
    assert stats.peak_live_bytes == 2 * 4
    assert stats.live_temporaries == 0 and stats.live_bytes == 0


def test_temporary_lives_until_its_last_consumer():
    # t0 = x+c; t1 = t0+c; t2 = t1+c; y = t2+t0: t0 must survive until the last step,
    # t1 dies after step 2, so at most two temporaries are ever held.
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (3,))
    c = b.add_constant(T.TENSOR_FLOAT32, (1,), [1.0])
    act = b.add_scalar(T.INT32, 0)
    t0, t1, t2 = (b.add_operand(T.TENSOR_FLOAT32, (3,)) for _ in range(3))
    y = b.add_output(T.TENSOR_FLOAT32, (3,))
    b.add_operation(O.ADD, [x, c, act], [t0])
    b.add_operation(O.ADD, [t0, c, act], [t1])
    b.add_operation(O.ADD, [t1, c, act], [t2])
    b.add_operation(O.ADD, [t2, t0, act], [y])
    model = b.build()
    validate_model(model)
    stats = RunStats()
    (out,) = Executor(model).run([np.array([0, 1, 2], F32)], stats=stats)
    np.testing.assert_array_equal(out, [4, 6, 8])  # (x+3) + (x+1)
    assert stats.peak_live_temporaries == 2
    assert stats.live_temporaries == 0


def test_unread_temporary_is_dropped_right_away():
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (2,))
    c = b.add_constant(T.TENSOR_FLOAT32, (1,), [1.0])
    act = b.add_scalar(T.INT32, 0)
    dead = b.add_operand(T.TENSOR_FLOAT32, (2,))
    y = b.add_output(T.TENSOR_FLOAT32, (2,))
    b.add_operation(O.ADD, [x, c, act], [dead])
    b.add_operation(O.ADD, [x, c, act], [y])
    stats = RunStats()
    Executor(b.build()).run([np.zeros(2, F32)], stats=stats)
    assert stats.peak_live_temporaries == 0


def test_freed_temporaries_release_their_memory():
    # Chained ADDs on a 1 MiB tensor: with temporaries freed after their last use the
    # peak does not grow with the chain's length (kept, 16 steps would hold 12 MiB more).
    size = 1 << 18
    x = np.zeros(size, F32)

    def peak_bytes(n: int) -> int:
        ex = Executor(add_chain(n, dims=(size,)))
        (out,), peak = traced_peak(lambda: ex.run([x]))
        assert out[0] == n
        return peak

    short, long = peak_bytes(4), peak_bytes(16)
    assert long < short + size * 4, f"peak {short / 2**20:.1f} -> {long / 2**20:.1f} MiB"


# --- dynamic output shapes ---------------------------------------------------------------


def test_unknown_dims_are_resolved_at_run_time():
    model = add_chain(3, declared=(0, 0), out_declared=(0, 0))
    validate_model(model)
    ex = Executor(model)
    assert ex.prepared_output_shapes == [(0, 0)]
    assert ex.has_dynamic_output_shapes
    for shape in [(2, 3), (4, 1), (1, 5)]:
        (out,) = ex.run([np.ones(shape, F32)])
        assert out.shape == shape
        np.testing.assert_array_equal(out, np.full(shape, 4.0))


def test_unknown_rank_is_resolved_at_run_time():
    model = add_chain(2, declared=(), out_declared=())
    validate_model(model)
    ex = Executor(model)
    assert ex.prepared_output_shapes == [()]
    (out,) = ex.run([np.zeros((2, 1, 3), F32)])
    assert out.shape == (2, 1, 3)
    np.testing.assert_array_equal(out, np.full((2, 1, 3), 2.0))


def test_broadcast_of_unknown_dims_gives_the_run_time_shape():
    model = binary_add_model((0, 1), (0,), (0, 0))
    validate_model(model)
    (out,) = Executor(model).run([np.array([[1], [2]], F32), np.array([10, 20, 30], F32)])
    np.testing.assert_array_equal(out, [[11, 21, 31], [12, 22, 32]])


def test_static_shapes_are_inferred_at_prepare_time():
    # The output is declared with unknown dims but the inputs are fully known.
    ex = Executor(binary_add_model((2, 1), (3,), (0, 0)))
    assert ex.prepared_output_shapes == [(2, 3)]
    assert not ex.has_dynamic_output_shapes


def test_output_shapes_report_sufficiency():
    ex = Executor(add_chain(1, declared=(0,), out_declared=(0,)))
    outs = ex.run([np.zeros(5, F32)])
    shapes = ex.output_shapes(outs, [20])
    assert shapes[0].dimensions == (5,) and shapes[0].is_sufficient
    shapes = ex.output_shapes(outs, [16])
    assert shapes[0].dimensions == (5,) and not shapes[0].is_sufficient
    assert ex.output_shapes(outs)[0].is_sufficient


# --- impossible runtime shapes and bad runtime input -------------------------------------


def test_inputs_that_cannot_broadcast_fail_with_general_failure():
    ex = Executor(binary_add_model((0,), (0,), (0,)))
    with pytest.raises(HalError) as info:
        ex.run([np.zeros(2, F32), np.zeros(3, F32)])
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    assert "operation 0 (ADD)" in info.value.message
    assert "[2] vs [3]" in info.value.message


def test_result_contradicting_the_declared_output_fails_with_general_failure():
    # The output is declared [2]; unknown-size inputs of 3 elements make [3].
    model = binary_add_model((0,), (0,), (2,))
    validate_model(model)
    ex = Executor(model)
    (out,) = ex.run([np.zeros(2, F32), np.ones(2, F32)])
    np.testing.assert_array_equal(out, [1, 1])
    with pytest.raises(HalError) as info:
        ex.run([np.zeros(3, F32), np.ones(3, F32)])
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    assert "declares [2]" in info.value.message


def test_rank_rules_are_checked_again_at_run_time():
    # ADD takes rank <= 4; an unknown-rank input of rank 5 passes validation but not run.
    ex = Executor(add_chain(1, declared=(), out_declared=()))
    (out,) = ex.run([np.zeros((1, 1, 1, 2), F32)])
    assert out.shape == (1, 1, 1, 2)
    assert status_of(lambda: ex.run([np.zeros((1, 1, 1, 1, 2), F32)])) == (
        ErrorStatus.GENERAL_FAILURE
    )


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_output_larger_than_the_allocation_bound_fails_before_allocating(static):
    side = math.isqrt(MAX_OUTPUT_BYTES // 4) + 1
    if static:
        model = binary_add_model((side, 1), (1, side), (side, side))
        validate_model(model)
    else:
        model = binary_add_model((0, 0), (0, 0), (0, 0))
    ex = Executor(model)
    with pytest.raises(HalError) as info:
        ex.run([np.zeros((side, 1), F32), np.zeros((1, side), F32)])
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    assert "bytes" in info.value.message


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("n, fits", [(16, True), (17, False)])
def test_an_output_of_exactly_the_allocation_bound_is_allocated(static, n, fits, monkeypatch):
    # The bound is inclusive: with it lowered to 64 bytes, 16 float32 values run and 17
    # fail (on the static path too: a static shape over the bound is re-checked at run).
    monkeypatch.setattr(executor_module, "MAX_OUTPUT_BYTES", 64)
    declared = (n,) if static else (0,)
    ex = Executor(binary_add_model(declared, declared, declared))
    feeds = [np.zeros(n, F32), np.ones(n, F32)]
    if fits:
        (out,) = ex.run(feeds)
        assert out.nbytes == 64
    else:
        assert status_of(lambda: ex.run(feeds)) == ErrorStatus.GENERAL_FAILURE


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param([], id="too-few"),
        pytest.param([np.zeros(2, F32)] * 2, id="too-many"),
        pytest.param([np.zeros(3, F32)], id="wrong-dim"),
        pytest.param([np.zeros((2, 1), F32)], id="wrong-rank"),
        pytest.param([np.array(["a", "b"])], id="strings"),
        pytest.param([[[1.0], [1.0, 2.0]]], id="ragged"),
        pytest.param([np.zeros(2, np.complex64)], id="complex"),
    ],
)
def test_bad_inputs_are_invalid_argument(inputs):
    ex = Executor(add_chain(1))
    assert status_of(lambda: ex.run(inputs)) == ErrorStatus.INVALID_ARGUMENT


def test_quantized_input_checks_dtype_and_range():
    ex = Executor(binary_add_model((2,), (2,), (2,), type=T.TENSOR_QUANT8_ASYMM, scale=1.0))
    (out,) = ex.run([np.array([1, 2]), np.array([3, 4])])  # int64 values that fit
    np.testing.assert_array_equal(out, [4, 6])
    bad_kind = [np.array([1.0, 2.0]), np.zeros(2, np.uint8)]
    assert status_of(lambda: ex.run(bad_kind)) == ErrorStatus.INVALID_ARGUMENT
    out_of_range = [np.array([1, 256]), np.zeros(2, np.uint8)]
    assert status_of(lambda: ex.run(out_of_range)) == ErrorStatus.INVALID_ARGUMENT


def test_rank_zero_tensor_input_is_invalid_argument():
    ex = Executor(add_chain(1, declared=(), out_declared=()))
    assert status_of(lambda: ex.run([np.float32(1.0)])) == ErrorStatus.INVALID_ARGUMENT


def test_omitted_input_at_a_required_position_is_general_failure():
    ex = Executor(add_chain(1))
    with pytest.raises(HalError) as info:
        ex.run([None])
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    # Said as such, not as a value missing somewhere inside the kernel.
    assert "input 0 (operand 0) has no value and is not optional" in info.value.message


@pytest.mark.parametrize("timeout", [-1.0, float("nan"), "soon"])
def test_bad_loop_timeout_is_invalid_argument(timeout):
    ex = Executor(add_chain(1))
    assert status_of(lambda: ex.run([np.zeros(2, F32)], loop_timeout=timeout)) == (
        ErrorStatus.INVALID_ARGUMENT
    )


def test_loop_timeout_defaults_and_maximum():
    seen = []

    class Spy(executor_module.RunState):
        def __init__(self, deadline, loop_timeout, stats):
            seen.append(loop_timeout)
            super().__init__(deadline, loop_timeout, stats)

    ex = Executor(add_chain(1))
    original = executor_module.RunState
    executor_module.RunState = Spy
    try:
        for t in (None, 0.25, 0, 60.0):  # 0 is a valid duration, like any non-negative one
            ex.run([np.zeros(2, F32)], loop_timeout=t)
    finally:
        executor_module.RunState = original
    assert seen == [DEFAULT_LOOP_TIMEOUT_S, 0.25, 0.0, MAX_LOOP_TIMEOUT_S]
    assert (DEFAULT_LOOP_TIMEOUT_S, MAX_LOOP_TIMEOUT_S) == (2.0, 15.0)


def test_operation_without_a_kernel_fails_at_prepare():
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (2,))
    y = b.add_output(T.TENSOR_FLOAT32, (2,))
    b.add_operation(O.OEM_OPERATION, [x], [y])
    with pytest.raises(HalError) as info:
        Executor(b.build())
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    assert "OEM_OPERATION" in info.value.message


def test_constant_with_a_short_location_is_rejected_at_prepare():
    model = add_chain(1)
    operands = list(model.main.operands)
    k = next(i for i, o in enumerate(operands) if o.lifetime == OperandLifeTime.CONSTANT_COPY)
    loc = operands[k].location
    operands[k] = replace(operands[k], location=replace(loc, length=loc.length - 1))
    bad = replace(model, main=replace(model.main, operands=tuple(operands)))
    assert status_of(lambda: Executor(bad)) == ErrorStatus.INVALID_ARGUMENT


# --- deadlines ---------------------------------------------------------------------------


def test_deadline_passing_mid_run_stops_before_the_next_operation(monkeypatch):
    ticks = iter(range(1, 1000))
    monkeypatch.setattr(executor_module, "monotonic", lambda: float(next(ticks)))
    stats = RunStats()
    ex = Executor(add_chain(20))
    with pytest.raises(HalError) as info:
        ex.run([np.zeros(2, F32)], deadline=5.0, stats=stats)
    assert info.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    # The clock reads 1, 2, ... before operations 0, 1, ...: 5 of them start in time,
    # the fifth exactly at the deadline (passed means past it: Android's now > deadline).
    assert stats.operations_run == 5
    assert "before main subgraph, operation 5 (ADD)" in info.value.message


def test_deadline_already_passed_runs_nothing():
    stats = RunStats()
    ex = Executor(add_chain(3))
    with pytest.raises(HalError) as info:
        ex.run([np.zeros(2, F32)], deadline=time.monotonic() - 1.0, stats=stats)
    assert info.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert stats.operations_run == 0


def test_future_deadline_does_not_interfere():
    (out,) = Executor(add_chain(3)).run([np.zeros(2, F32)], deadline=time.monotonic() + 60)
    np.testing.assert_array_equal(out, [3, 3])


# --- relaxed float32 -> float16 emulation -------------------------------------------------


def relaxed_chain(n: int, relaxed: bool, const: float):
    b = ModelBuilder(relaxed=relaxed)
    x = b.add_input(T.TENSOR_FLOAT32, (2,))
    c = b.add_constant(T.TENSOR_FLOAT32, (1,), [const])
    act = b.add_scalar(T.INT32, 0)
    prev = x
    for k in range(n):
        nxt = (b.add_output if k == n - 1 else b.add_operand)(T.TENSOR_FLOAT32, (2,))
        b.add_operation(O.ADD, [prev, c, act], [nxt])
        prev = nxt
    return b.build()


def test_relaxed_emulation_rounds_every_intermediate_to_float16():
    # 1 + 2^-11 lies halfway between the float16 neighbours 1 and 1 + 2^-10 and rounds to
    # even (1), so with float16 storage adding 2^-11 four times never moves 1; float32
    # holds each step exactly.
    x = [np.array([1.0, 2.0], F32)]
    model = relaxed_chain(4, True, 2.0**-11)
    (exact,) = Executor(model).run(x)
    (emulated,) = Executor(model, emulate_relaxed_float16=True).run(x)
    np.testing.assert_array_equal(exact, [1 + 4 * 2.0**-11, 2 + 4 * 2.0**-11])
    np.testing.assert_array_equal(emulated, [1.0, 2.0])
    assert emulated.dtype == F32


def test_relaxed_emulation_rounds_inputs_and_constants_with_float16_range():
    model = relaxed_chain(1, True, 1.0001)  # the constant rounds to 1.0 in float16
    ex = Executor(model, emulate_relaxed_float16=True)
    (out,) = ex.run([np.array([0.0, 70000.0], F32)])  # 70000 > 65504: inf in float16
    assert out[0] == 1.0
    assert np.isposinf(out[1])
    (exact,) = Executor(model).run([np.array([0.0, 70000.0], F32)])
    np.testing.assert_array_equal(exact, np.array([1.0001, 70001.0001], F32))


@pytest.mark.parametrize("rounded", ["input", "constant"])
def test_relaxed_emulation_rounds_values_before_the_first_operation(rounded):
    # 1.0003 is 1.0 in float16. Rounded first, 2048 + 1 = 2049 lies halfway between the
    # float16 neighbours 2048 and 2050 and rounds to even (2048); added unrounded, the
    # float32 sum 2049.0002 rounds up to 2050 when the result is stored.
    small, large = 1.0003, 2048.0
    assert np.float16(small) == 1.0
    x, const = (small, large) if rounded == "input" else (large, small)
    model = relaxed_chain(1, True, const)
    (out,) = Executor(model, emulate_relaxed_float16=True).run([np.full(2, x, F32)])
    np.testing.assert_array_equal(out, [2048.0, 2048.0])
    (exact,) = Executor(model).run([np.full(2, x, F32)])
    assert exact[0] > 2049.0


def test_relaxed_emulation_leaves_models_without_the_relaxed_flag_alone():
    model = relaxed_chain(4, False, 2.0**-11)
    ex = Executor(model, emulate_relaxed_float16=True)
    assert not ex.emulate_relaxed_float16
    (out,) = ex.run([np.array([1.0, 2.0], F32)])
    np.testing.assert_array_equal(out, [1 + 4 * 2.0**-11, 2 + 4 * 2.0**-11])


# --- properties --------------------------------------------------------------------------


@st.composite
def add_dags(draw):
    """A random DAG of float32 ADDs over two inputs, with the numpy evaluation of it."""
    n_ops = draw(st.integers(1, 8))
    b = ModelBuilder()
    inputs = [b.add_input(T.TENSOR_FLOAT32, (3,)) for _ in range(2)]
    act = b.add_scalar(T.INT32, 0)
    pending = list(inputs)  # every operand that must still be read
    available = list(inputs)
    recipe = []
    for _ in range(n_ops):
        a = draw(st.sampled_from(available))
        c = draw(st.sampled_from(available))
        out = b.add_operand(T.TENSOR_FLOAT32, (3,))
        b.add_operation(O.ADD, [a, c, act], [out])
        recipe.append((a, c, out))
        available.append(out)
        pending.append(out)
    # Outputs: every operand nobody reads (so none is left dangling).
    read = {i for a, c, _ in recipe for i in (a, c)}
    outs = [i for i in pending if i not in read and i not in inputs]
    unread_inputs = [i for i in inputs if i not in read]
    b.identify_inputs_and_outputs(inputs, outs)
    values = draw(st.lists(st.floats(-100, 100, width=32), min_size=6, max_size=6))
    feeds = [np.array(values[:3], F32), np.array(values[3:], F32)]
    return b.build(), feeds, recipe, outs, unread_inputs


@given(add_dags())
def test_random_add_dags_match_numpy(case):
    model, feeds, recipe, outs, unread_inputs = case
    env = dict(zip(model.main.input_indexes, feeds))
    for a, c, out in recipe:
        env[out] = np.add(env[a], env[c], dtype=F32)
    stats = RunStats()
    got = Executor(model).run(feeds, stats=stats)
    for g, i in zip(got, outs):
        np.testing.assert_array_equal(g, env[i])
    assert stats.live_temporaries == 0
    assert stats.operations_run == len(recipe)


@given(
    st.lists(st.integers(0, 4), min_size=0, max_size=5),
    st.lists(st.integers(0, 4), min_size=0, max_size=5),
    st.sampled_from([np.float32, np.float64, np.int32, np.uint8, np.bool_]),
)
def test_arbitrary_runtime_shapes_end_in_outputs_or_hal_errors(sa, sb, dtype):
    ex = Executor(binary_add_model((), (), ()))
    try:
        (out,) = ex.run([np.zeros(sa, dtype), np.ones(sb, dtype)])
    except HalError as e:
        assert e.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
        return
    assert out.shape == np.broadcast_shapes(tuple(sa), tuple(sb))
    np.testing.assert_array_equal(out, np.ones(out.shape, F32))


def test_run_model_validates_and_runs():
    (out,) = run_model(add_chain(2), [np.zeros(2, F32)])
    np.testing.assert_array_equal(out, [2, 2])
