"""IF and WHILE (HAL 1.3): semantics, nesting, loop timeouts, deadlines and validation.

Branch and body subgraphs use ADD and LESS; the builders live in examples_control_flow.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.builder import ModelBuilder
from driver.executor import MAX_NESTING_DEPTH, Executor, RunStats
from driver.hal.types import ErrorStatus, HalError, HalVersion, OperandLifeTime
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations.base import storage_dtype
from driver.operations.control_flow import operand_incompatibility
from driver.testing import assert_example, assert_rejected
from driver.validation import validate_model
from tests.operations.examples_control_flow import (
    EXAMPLES,
    add_const_subgraph,
    counting_while_model,
    if_model,
    nested_if_model,
    while_feeds,
)

F32 = np.float32


def run(model, feeds, **kw):
    validate_model(model)
    return Executor(model).run(feeds, **kw)


def hal_error(fn) -> HalError:
    with pytest.raises(HalError) as info:
        fn()
    return info.value


def invalid(model, version=HalVersion.V1_3) -> str:
    err = hal_error(lambda: validate_model(model, version))
    assert err.status == ErrorStatus.INVALID_ARGUMENT
    return err.message


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: e.name)
def test_examples(ex):
    assert_example(ex)


# --- IF ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("cond", "want"), [(True, [2.0, 3.0]), (False, [101.0, 102.0])])
def test_if_runs_the_branch_the_condition_picks(cond, want):
    stats = RunStats()
    (out,) = run(if_model(), [np.array([cond]), np.array([1, 2], F32)], stats=stats)
    np.testing.assert_array_equal(out, want)
    assert stats.operations_run == 2  # the IF and one branch's ADD, never both branches
    assert stats.max_depth == 1


def test_if_branch_with_unknown_shapes_takes_the_run_time_shape():
    model = if_model(dims=(0,), branch_dims=(), out_dims=(0,))
    validate_model(model)
    ex = Executor(model)
    for n in (1, 4):
        (out,) = ex.run([np.array([True]), np.arange(n, dtype=F32)])
        np.testing.assert_array_equal(out, np.arange(n) + 1)


def test_if_branch_producing_a_shape_the_outer_output_forbids_is_general_failure():
    # Outer output declared [2]; unknown-size input of 3 elements goes through a branch
    # declared [0]: valid statically, impossible at run time.
    model = if_model(dims=(0,), branch_dims=(0,), out_dims=(2,))
    validate_model(model)
    ex = Executor(model)
    (out,) = ex.run([np.array([False]), np.zeros(2, F32)])
    np.testing.assert_array_equal(out, [100, 100])
    err = hal_error(lambda: ex.run([np.array([False]), np.zeros(3, F32)]))
    assert err.status == ErrorStatus.GENERAL_FAILURE
    assert "declares [2]" in err.message


def test_if_input_contradicting_the_branch_declaration_is_general_failure():
    model = if_model(dims=(0,), branch_dims=(2,), out_dims=(0,))
    validate_model(model)
    err = hal_error(lambda: Executor(model).run([np.array([True]), np.zeros(3, F32)]))
    assert err.status == ErrorStatus.GENERAL_FAILURE
    assert "subgraph 0 input 0" in err.message and "[3]" in err.message


def test_if_with_omitted_condition_is_general_failure():
    ex = Executor(if_model())
    err = hal_error(lambda: ex.run([None, np.zeros(2, F32)]))
    assert err.status == ErrorStatus.GENERAL_FAILURE


@pytest.mark.parametrize(
    ("cond", "want_a", "want_b"), [(True, [3, -2], [14]), (False, [2.5, 0], [12])]
)
def test_if_with_several_inputs_and_outputs_maps_them_in_order(cond, want_a, want_b):
    # then: (a + a, b + b); else: (a + 1, b + 5), over a float and an int32 operand.
    mb = ModelBuilder()
    c = mb.add_input(T.TENSOR_BOOL8, (1,))
    a = mb.add_input(T.TENSOR_FLOAT32, (2,))
    b = mb.add_input(T.TENSOR_INT32, (1,))
    branches = []
    for double in (True, False):
        sg = mb.new_subgraph()
        xa = sg.add_input(T.TENSOR_FLOAT32, (2,))
        xb = sg.add_input(T.TENSOR_INT32, (1,))
        ya = sg.add_output(T.TENSOR_FLOAT32, (2,))
        yb = sg.add_output(T.TENSOR_INT32, (1,))
        none = sg.add_scalar(T.INT32, 0)
        ka = xa if double else sg.add_constant(T.TENSOR_FLOAT32, (1,), [1.0])
        kb = xb if double else sg.add_constant(T.TENSOR_INT32, (1,), [5])
        sg.add_operation(O.ADD, [xa, ka, none], [ya])
        sg.add_operation(O.ADD, [xb, kb, none], [yb])
        branches.append(sg)
    ya = mb.add_output(T.TENSOR_FLOAT32, (2,))
    yb = mb.add_output(T.TENSOR_INT32, (1,))
    refs = [mb.add_subgraph_operand(sg) for sg in branches]
    mb.add_operation(O.IF, [c, *refs, a, b], [ya, yb])
    feeds = [np.array([cond]), np.array([1.5, -1], F32), np.array([7], np.int32)]
    outs = run(mb.build(), feeds)
    np.testing.assert_array_equal(outs[0], want_a)
    np.testing.assert_array_equal(outs[1], want_b)
    assert outs[0].dtype == F32 and outs[1].dtype == np.int32


# --- WHILE -------------------------------------------------------------------------------


def test_while_counting_loop():
    stats = RunStats()
    (acc,) = run(counting_while_model(), while_feeds([0, 1], 0, 4, [0.5, -1]), stats=stats)
    np.testing.assert_array_equal(acc, [2.0, -3.0])
    assert stats.while_iterations == 4
    # 1 WHILE + 5 condition runs (LESS) + 4 bodies of 2 ADDs.
    assert stats.operations_run == 1 + 5 + 4 * 2


def test_while_with_zero_iterations_returns_its_inputs():
    stats = RunStats()
    (acc,) = run(counting_while_model(), while_feeds([3, 4], 5, 2, [1, 1]), stats=stats)
    np.testing.assert_array_equal(acc, [3, 4])
    assert stats.while_iterations == 0
    assert stats.operations_run == 2  # the WHILE and one condition


def test_while_with_nested_if_switches_branch_per_iteration():
    # Adds x for i < 2 and y for i = 2, 3, 4: 2 * 1 + 3 * 10.
    model = counting_while_model(nested_if=True)
    (acc,) = run(model, while_feeds([0, 0], 0, 5, [1, 1], half=2, y=[10, 100]))
    np.testing.assert_array_equal(acc, [32, 302])


def test_while_loop_carried_shape_may_change_between_iterations():
    model = counting_while_model((3,), acc_dims=(0,))
    (acc,) = run(model, while_feeds([1.0], 0, 2, [1, 2, 3]))
    np.testing.assert_array_equal(acc, [3, 5, 7])
    (acc,) = run(model, while_feeds([1.0], 0, 0, [1, 2, 3]))
    np.testing.assert_array_equal(acc, [1.0])  # zero iterations: the initial [1] shape


def test_runaway_while_ends_with_the_loop_timeout_status():
    model = counting_while_model(step=0)
    ex = Executor(model)
    stats = RunStats()
    timeout = 0.2
    start = time.monotonic()
    err = hal_error(
        lambda: ex.run(while_feeds([0, 0], 0, 1, [1, 1]), loop_timeout=timeout, stats=stats)
    )
    elapsed = time.monotonic() - start
    assert err.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert "loop timeout" in err.message
    assert timeout <= elapsed < timeout + 1.0
    assert stats.while_iterations > 0


def test_runaway_while_stops_at_the_execution_deadline():
    ex = Executor(counting_while_model(step=0))
    start = time.monotonic()
    err = hal_error(
        lambda: ex.run(while_feeds([0, 0], 0, 1, [1, 1]), deadline=start + 0.2, loop_timeout=15.0)
    )
    assert err.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert "deadline" in err.message
    assert time.monotonic() - start < 1.2


def test_while_nested_in_a_while_body_runs_to_completion():
    # Outer body: acc = WHILE(inner: acc += x, i from 0 to n) -> n additions per outer
    # iteration; outer runs 3 times.
    mb = ModelBuilder()
    i32 = T.TENSOR_INT32

    def values(sg):
        return [
            sg.add_input(T.TENSOR_FLOAT32, (2,)),
            sg.add_input(i32, (1,)),
            sg.add_input(i32, (1,)),
            sg.add_input(T.TENSOR_FLOAT32, (2,)),
        ]

    def cond_sg():
        sg = mb.new_subgraph()
        _, i, n, _ = values(sg)
        out = sg.add_output(T.TENSOR_BOOL8, (1,))
        sg.add_operation(O.LESS, [i, n], [out])
        return sg

    inner_cond, inner_body = cond_sg(), mb.new_subgraph()
    acc, i, n, x = values(inner_body)
    none = inner_body.add_scalar(T.INT32, 0)
    acc2, i2 = inner_body.add_output(T.TENSOR_FLOAT32, (2,)), inner_body.add_output(i32, (1,))
    inner_body.add_operation(O.ADD, [acc, x, none], [acc2])
    inner_body.add_operation(O.ADD, [i, inner_body.add_constant(i32, (1,), [1]), none], [i2])

    outer_cond, outer_body = cond_sg(), mb.new_subgraph()
    acc, i, n, x = values(outer_body)
    none = outer_body.add_scalar(T.INT32, 0)
    acc2, i2 = outer_body.add_output(T.TENSOR_FLOAT32, (2,)), outer_body.add_output(i32, (1,))
    zero = outer_body.add_constant(i32, (1,), [0])
    outer_body.add_operation(
        O.WHILE,
        [
            outer_body.add_subgraph_operand(inner_cond),
            outer_body.add_subgraph_operand(inner_body),
            acc,
            zero,
            n,
            x,
        ],
        [acc2],
    )
    outer_body.add_operation(O.ADD, [i, outer_body.add_constant(i32, (1,), [1]), none], [i2])

    outer = values(mb)
    result = mb.add_output(T.TENSOR_FLOAT32, (2,))
    refs = [mb.add_subgraph_operand(outer_cond), mb.add_subgraph_operand(outer_body)]
    mb.add_operation(O.WHILE, [*refs, *outer], [result])
    stats = RunStats()
    (acc,) = run(mb.build(), while_feeds([0, 0], 0, 3, [1, 2]), stats=stats)
    np.testing.assert_array_equal(acc, [9, 18])  # 3 outer x 3 inner additions
    assert stats.while_iterations == 3 + 3 * 3
    assert stats.max_depth == 2


@given(
    st.lists(st.integers(0, 255), min_size=3, max_size=3),
    st.lists(st.integers(0, 255), min_size=3, max_size=3),
    st.integers(0, 4),
    st.booleans(),
)
def test_signed_and_unsigned_quant8_agree_up_to_the_offset(acc, x, n, cond):
    u8, s8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
    results = []
    for t, zp, shift in ((u8, 120, 0), (s8, -8, 128)):
        a = np.array(acc) - shift
        b = np.array(x) - shift
        model = counting_while_model((3,), type=t, scale=0.25, zero_point=zp)
        (w,) = run(model, while_feeds(a, 0, n, b, type=t))
        model = if_model(t, (3,), [130 - shift], [90 - shift], scale=0.25, zero_point=zp)
        (f,) = run(model, [np.array([cond]), np.asarray(a, storage_dtype(t))])
        results.append((w.astype(np.int32) + shift, f.astype(np.int32) + shift))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


# --- nesting bound -----------------------------------------------------------------------


def test_nesting_up_to_the_bound_runs():
    stats = RunStats()
    (out,) = run(nested_if_model(MAX_NESTING_DEPTH), [np.array([1, 2], F32)], stats=stats)
    np.testing.assert_array_equal(out, [2, 3])
    assert stats.max_depth == MAX_NESTING_DEPTH


def test_nesting_beyond_the_bound_is_a_hal_error_not_a_recursion_error():
    model = nested_if_model(MAX_NESTING_DEPTH + 1)
    validate_model(model)
    err = hal_error(lambda: Executor(model).run([np.zeros(2, F32)]))
    assert err.status == ErrorStatus.GENERAL_FAILURE
    assert f"deeper than {MAX_NESTING_DEPTH}" in err.message


def test_very_deep_nesting_validates_and_fails_cleanly():
    # Far past both the bound and Python's recursion limit: validation, the cycle check
    # and prepare are iterative, and the run stops at the bound.
    depth = sys.getrecursionlimit() + 500
    model = nested_if_model(depth)
    validate_model(model)
    err = hal_error(lambda: Executor(model).run([np.zeros(2, F32)]))
    assert err.status == ErrorStatus.GENERAL_FAILURE


def test_nesting_bound_leaves_room_on_a_busy_stack():
    # The deepest allowed model still runs when the caller already uses a third of the
    # recursion limit.
    model = nested_if_model(MAX_NESTING_DEPTH)
    ex = Executor(model)

    def descend(n: int):
        if n == 0:
            return ex.run([np.zeros(2, F32)])
        return descend(n - 1)

    (out,) = descend(sys.getrecursionlimit() // 3)
    np.testing.assert_array_equal(out, [1, 1])


# --- validation --------------------------------------------------------------------------


def if_builder(*, cond_type=T.TENSOR_BOOL8, cond_dims=(1,), branch_in=T.TENSOR_FLOAT32):
    """An IF model built step by step so tests can break one rule at a time."""
    mb = ModelBuilder()
    cond = mb.add_input(cond_type, cond_dims)
    x = mb.add_input(T.TENSOR_FLOAT32, (2,))
    then_sg = add_const_subgraph(mb, T.TENSOR_FLOAT32, (2,), [1.0])
    else_sg = mb.new_subgraph()
    xi = else_sg.add_input(branch_in, (2,))
    yi = else_sg.add_output(T.TENSOR_FLOAT32, (2,))
    if branch_in == T.TENSOR_FLOAT32:
        else_sg.add_operation(O.ADD, [xi, xi, else_sg.add_scalar(T.INT32, 0)], [yi])
    else:
        c = else_sg.add_constant(T.TENSOR_FLOAT32, (2,), [0, 0])
        else_sg.add_operation(O.ADD, [c, c, else_sg.add_scalar(T.INT32, 0)], [yi])
    y = mb.add_output(T.TENSOR_FLOAT32, (2,))
    return mb, cond, x, y, then_sg, else_sg


def test_valid_if_passes_and_needs_hal_1_3():
    model = if_model()
    validate_model(model)
    assert "1.3" in invalid(model, HalVersion.V1_2)


@pytest.mark.parametrize(
    ("cond_type", "cond_dims"),
    [(T.TENSOR_INT32, (1,)), (T.TENSOR_BOOL8, (2,)), (T.TENSOR_BOOL8, (1, 1))],
)
def test_if_condition_must_be_bool8_of_shape_1(cond_type, cond_dims):
    mb, cond, x, y, then_sg, else_sg = if_builder(cond_type=cond_type, cond_dims=cond_dims)
    refs = [mb.add_subgraph_operand(then_sg), mb.add_subgraph_operand(else_sg)]
    mb.add_operation(O.IF, [cond, *refs, x], [y])
    assert "condition" in invalid(mb.build())


def test_if_branch_input_count_must_match():
    mb, cond, x, y, then_sg, else_sg = if_builder()
    extra = mb.add_input(T.TENSOR_FLOAT32, (2,))
    refs = [mb.add_subgraph_operand(then_sg), mb.add_subgraph_operand(else_sg)]
    mb.add_operation(O.IF, [cond, *refs, x, extra], [y])
    assert "has 1 inputs, but the IF passes 2" in invalid(mb.build())


def test_if_branch_output_count_must_match():
    mb, cond, x, y, then_sg, else_sg = if_builder()
    y2 = mb.add_output(T.TENSOR_FLOAT32, (2,))
    refs = [mb.add_subgraph_operand(then_sg), mb.add_subgraph_operand(else_sg)]
    mb.add_operation(O.IF, [cond, *refs, x], [y, y2])
    assert "outputs" in invalid(mb.build())


def test_if_needs_three_inputs_and_an_output():
    mb, cond, x, y, then_sg, _ = if_builder()
    mb.add_operation(O.IF, [cond, mb.add_subgraph_operand(then_sg)], [y])
    assert "at least 3 inputs" in invalid(mb.build())


def test_if_branch_operand_types_must_match():
    mb, cond, x, y, then_sg, else_sg = if_builder(branch_in=T.TENSOR_INT32)
    refs = [mb.add_subgraph_operand(then_sg), mb.add_subgraph_operand(else_sg)]
    mb.add_operation(O.IF, [cond, *refs, x], [y])
    msg = invalid(mb.build())
    assert "else branch subgraph 1 input 0" in msg and "TENSOR_INT32" in msg


@pytest.mark.parametrize(
    ("outer", "inner", "reason"),
    [
        (dict(scale=0.5, zero_point=10), dict(scale=0.25, zero_point=10), "scale"),
        (dict(scale=0.5, zero_point=10), dict(scale=0.5, zero_point=11), "zeroPoint"),
    ],
)
def test_if_quantized_operands_must_agree(outer, inner, reason):
    mb = ModelBuilder()
    q8 = T.TENSOR_QUANT8_ASYMM
    cond = mb.add_input(T.TENSOR_BOOL8, (1,))
    x = mb.add_input(q8, (2,), **outer)
    good = add_const_subgraph(mb, q8, (2,), [12], **outer)
    bad = mb.new_subgraph()
    xi = bad.add_input(q8, (2,), **inner)
    yi = bad.add_output(q8, (2,), **outer)
    c = bad.add_constant(q8, (2,), [1, 1], **outer)
    bad.add_operation(O.ADD, [c, c, bad.add_scalar(T.INT32, 0)], [yi])
    del xi
    y = mb.add_output(q8, (2,), **outer)
    mb.add_operation(
        O.IF, [cond, mb.add_subgraph_operand(good), mb.add_subgraph_operand(bad), x], [y]
    )
    assert reason in invalid(mb.build())


@pytest.mark.parametrize(
    ("outer_dims", "branch_dims", "ok"),
    [
        ((2,), (2,), True),
        ((2,), (0,), True),
        ((0,), (2,), True),
        ((2,), (), True),
        ((2,), (3,), False),
        ((2,), (2, 1), False),
    ],
)
def test_if_dims_must_agree_where_known(outer_dims, branch_dims, ok):
    model = if_model(dims=outer_dims, branch_dims=branch_dims, out_dims=outer_dims)
    if ok:
        validate_model(model)
    else:
        assert "incompatible" in invalid(model)


def test_if_branch_must_be_a_subgraph_operand_in_range():
    mb, cond, x, y, then_sg, _ = if_builder()
    not_a_ref = mb.add_constant(T.TENSOR_INT32, (1,), [1])
    mb.add_operation(O.IF, [cond, mb.add_subgraph_operand(then_sg), not_a_ref, x], [y])
    assert "must be a SUBGRAPH operand" in invalid(mb.build())

    model = if_model()
    operands = list(model.main.operands)
    k = next(i for i, o in enumerate(operands) if o.lifetime == OperandLifeTime.SUBGRAPH)
    operands[k] = replace(operands[k], location=replace(operands[k].location, offset=7))
    bad = replace(model, main=replace(model.main, operands=tuple(operands)))
    assert "7" in invalid(bad)


def test_subgraphs_referring_to_themselves_are_rejected():
    mb = ModelBuilder()
    loop = mb.new_subgraph()
    xi = loop.add_input(T.TENSOR_FLOAT32, (2,))
    ci = loop.add_constant(T.TENSOR_BOOL8, (1,), [True])
    yi = loop.add_output(T.TENSOR_FLOAT32, (2,))
    ref = loop.add_subgraph_operand(loop)
    loop.add_operation(O.IF, [ci, ref, ref, xi], [yi])
    cond = mb.add_input(T.TENSOR_BOOL8, (1,))
    x = mb.add_input(T.TENSOR_FLOAT32, (2,))
    y = mb.add_output(T.TENSOR_FLOAT32, (2,))
    outer_ref = mb.add_subgraph_operand(loop)
    mb.add_operation(O.IF, [cond, outer_ref, outer_ref, x], [y])
    model = mb.build()
    assert "cycle" in invalid(model)
    # Unvalidated, the executor still ends it with a HAL error at the nesting bound.
    cond_true = [np.array([True]), np.zeros(2, F32)]
    assert hal_error(lambda: Executor(model).run(cond_true)).status == (ErrorStatus.GENERAL_FAILURE)


def test_operand_compatibility_rules():
    from driver.hal.types import Operand, SymmPerChannelQuantParams

    a = Operand(T.TENSOR_FLOAT32, (2, 0))
    assert operand_incompatibility(a, Operand(T.TENSOR_FLOAT32, (2, 5))) is None
    assert operand_incompatibility(a, Operand(T.TENSOR_FLOAT32, ())) is None
    assert "rank" in operand_incompatibility(a, Operand(T.TENSOR_FLOAT32, (2,)))
    assert "dimension 0" in operand_incompatibility(a, Operand(T.TENSOR_FLOAT32, (3, 5)))
    assert "type" in operand_incompatibility(a, Operand(T.TENSOR_FLOAT16, (2, 0)))
    pc = T.TENSOR_QUANT8_SYMM_PER_CHANNEL
    p1 = Operand(pc, (2,), extra_params=SymmPerChannelQuantParams(0, (0.5, 0.25)))
    p2 = Operand(pc, (2,), extra_params=SymmPerChannelQuantParams(0, (0.5, 0.5)))
    assert "extra params" in operand_incompatibility(p1, p2)
    assert operand_incompatibility(p1, replace(p2, extra_params=p1.extra_params)) is None


def while_parts(
    *,
    cond_outputs=((T.TENSOR_BOOL8, (1,)),),
    body_out_types=None,
    outer_outputs=1,
    passed=2,
):
    """A WHILE over values (acc: float [2], i: int [1]) with configurable mistakes."""
    mb = ModelBuilder()
    i32 = T.TENSOR_INT32
    cond = mb.new_subgraph()
    ca = cond.add_input(T.TENSOR_FLOAT32, (2,))
    ci = cond.add_input(i32, (1,))
    del ca
    for t, d in cond_outputs:
        o = cond.add_output(t, d)
        if t == T.TENSOR_BOOL8:
            cond.add_operation(O.LESS, [ci, ci], [o])
        else:
            cond.add_operation(O.ADD, [ci, ci, cond.add_scalar(T.INT32, 0)], [o])
    body = mb.new_subgraph()
    ba = body.add_input(T.TENSOR_FLOAT32, (2,))
    bi = body.add_input(i32, (1,))
    for t in body_out_types or (T.TENSOR_FLOAT32, i32):
        o = body.add_output(t, (2,) if t == T.TENSOR_FLOAT32 else (1,))
        src = ba if t == T.TENSOR_FLOAT32 else bi
        body.add_operation(O.ADD, [src, src, body.add_scalar(T.INT32, 0)], [o])
    kinds = [(T.TENSOR_FLOAT32, (2,)), (i32, (1,))][:passed]
    values = [mb.add_input(t, d) for t, d in kinds]
    outs = [mb.add_output(T.TENSOR_FLOAT32, (2,)) for _ in range(outer_outputs)]
    refs = [mb.add_subgraph_operand(cond), mb.add_subgraph_operand(body)]
    mb.add_operation(O.WHILE, [*refs, *values], outs)
    return mb.build()


def test_valid_while_passes():
    validate_model(while_parts())
    validate_model(counting_while_model(nested_if=True))


def test_while_condition_needs_exactly_one_bool8_output():
    two = while_parts(cond_outputs=((T.TENSOR_BOOL8, (1,)), (T.TENSOR_BOOL8, (1,))))
    assert "exactly 1 output" in invalid(two)
    wrong_type = while_parts(cond_outputs=((T.TENSOR_INT32, (1,)),))
    assert "TENSOR_BOOL8 of shape [1]" in invalid(wrong_type)


def test_while_body_outputs_must_line_up():
    fewer = while_parts(body_out_types=(T.TENSOR_FLOAT32,), outer_outputs=2)
    assert "fewer than the WHILE's 2" in invalid(fewer)
    swapped = while_parts(body_out_types=(T.TENSOR_INT32, T.TENSOR_FLOAT32))
    assert "incompatible" in invalid(swapped)


def test_while_body_state_outputs_must_feed_back_compatibly():
    # Output 1 is state-only (the WHILE has one output): it is fed back as input 1 (int32
    # [1]), so a float32 [2] there is rejected though no WHILE output matches it.
    state = while_parts(body_out_types=(T.TENSOR_FLOAT32, T.TENSOR_FLOAT32))
    assert "fed back" in invalid(state)
    more = while_parts(body_out_types=(T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_INT32))
    assert "more outputs (3) than inputs (2)" in invalid(more)


def test_while_outputs_cannot_outnumber_body_outputs():
    assert "fewer than the WHILE's 3" in invalid(while_parts(outer_outputs=3))


def test_while_input_count_must_match_the_subgraphs():
    assert "inputs, but the WHILE passes 1" in invalid(while_parts(passed=1))


# --- what Android 11's validation checks (HalError.deferrable) ---------------------------


def _if_with(*, cond_type=T.TENSOR_BOOL8, extra_input=False, extra_output=False, branch_in=None):
    mb, cond, x, y, then_sg, else_sg = if_builder(
        cond_type=cond_type, branch_in=branch_in or T.TENSOR_FLOAT32
    )
    ins = [cond, mb.add_subgraph_operand(then_sg), mb.add_subgraph_operand(else_sg), x]
    if extra_input:
        ins.append(mb.add_input(T.TENSOR_FLOAT32, (2,)))
    outs = [y, mb.add_output(T.TENSOR_FLOAT32, (2,))] if extra_output else [y]
    mb.add_operation(O.IF, ins, outs)
    return mb.build()


def _if_two_inputs():
    mb, cond, x, y, then_sg, _ = if_builder()
    mb.add_operation(O.IF, [cond, mb.add_subgraph_operand(then_sg)], [y])
    return mb.build()


def _if_branch_not_a_subgraph():
    mb, cond, x, y, then_sg, _ = if_builder()
    not_a_ref = mb.add_constant(T.TENSOR_INT32, (1,), [1])
    mb.add_operation(O.IF, [cond, mb.add_subgraph_operand(then_sg), not_a_ref, x], [y])
    return mb.build()


@pytest.mark.parametrize(
    "build, deferrable, match",
    [
        # validateIfOperation / validateWhileOperation (Utils.cpp, run by Android's model
        # validation): counts, subgraph references, operand compatibility, the condition.
        (lambda: _if_with(cond_type=T.TENSOR_INT32), False, "condition"),
        (lambda: _if_with(extra_input=True), False, "IF passes 2"),
        (lambda: _if_with(extra_output=True), False, "IF has 2"),
        (_if_two_inputs, False, "at least 3 inputs"),
        (lambda: _if_with(branch_in=T.TENSOR_INT32), False, "incompatible"),
        (lambda: if_model(dims=(2,), branch_dims=(3,)), False, "incompatible"),
        (_if_branch_not_a_subgraph, False, "must be a SUBGRAPH operand"),
        (
            lambda: while_parts(cond_outputs=((T.TENSOR_BOOL8, (1,)),) * 2),
            False,
            "exactly 1 output",
        ),
        (lambda: while_parts(cond_outputs=((T.TENSOR_INT32, (1,)),)), False, "TENSOR_BOOL8"),
        (lambda: while_parts(outer_outputs=3), False, "fewer than the WHILE's 3"),
        (lambda: while_parts(passed=1), False, "WHILE passes 1"),
        (
            lambda: while_parts(body_out_types=(T.TENSOR_INT32, T.TENSOR_FLOAT32)),
            False,
            "incompatible",
        ),
        # A shape an operation inside a branch computes is left to execution (prepare())...
        (lambda: if_model(then_const=(1, 2, 3)), True, "subgraph 0.*broadcast"),
        # ...and a compatibility rule wins over it.
        (lambda: if_model(then_const=(1, 2, 3), out_dims=(3,)), False, "incompatible"),
    ],
)
def test_rejections_android_validation_makes_or_leaves_to_execution(build, deferrable, match):
    assert_rejected(build(), deferrable=deferrable, match=match)
