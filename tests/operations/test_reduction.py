"""Kernel, shape-inference and validation tests for MEAN, REDUCE_*, ARGMAX/ARGMIN and
TOPK_V2. Expected values are hand-derived (see comments) or come from scalar loops that
transliterate Android's kernels."""

from __future__ import annotations

import re
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import reduction
from driver.operations.reduction import sequential_fold
from driver.testing import (
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)
from driver.validation import validate_model
from tests.operations.examples_shape import assert_signed_twin, quant8_examples

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S, B8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_BOOL8
V = HalVersion


def i32(values, **kw):
    kw.setdefault("const", True)
    return tensor(I32, values, **kw)


def i(v):
    return scalar(T.INT32, v)


def b(v):
    return scalar(T.BOOL, v)


def run1(op, inputs, out_type=F32, dims=(), **kw):
    (result,) = run_op(op, inputs, [output(out_type, dims, **kw)])
    return result


def rejects(op, inputs, outputs, match: str, version=V.V1_3):
    model, _ = single_op_model(op, inputs, outputs)
    with pytest.raises(HalError) as err:
        validate_model(model, version)
    assert err.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(match, err.value.message), err.value.message


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# --- MEAN ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "axes, keep, shape, check",
    [
        ([1], 0, (2, 4), lambda g: g[1, 2] == (14 + 18 + 22) / 3),
        ([-1, 0], 0, (3,), lambda g: g[0] == (0 + 1 + 2 + 3 + 12 + 13 + 14 + 15) / 8),
        ([0, 0, -3], 1, (1, 3, 4), lambda g: g[0, 2, 3] == (11 + 23) / 2),  # duplicates
        ([0, 1, 2], 0, (1,), lambda g: g[0] == 11.5),  # everything: [1]
        ([2, 1, 0], 1, (1, 1, 1), lambda g: g[0, 0, 0] == 11.5),
    ],
)
def test_mean_float(axes, keep, shape, check):
    got = run1(O.MEAN, [tensor(F32, X), i32(axes), i(keep)])
    assert got.shape == shape
    assert check(got)


def test_mean_keep_dims_is_any_positive_int():
    assert run1(O.MEAN, [tensor(F32, X), i32([1]), i(7)]).shape == (2, 1, 4)
    # ...and any other value drops the reduced dimensions, a negative one too.
    assert run1(O.MEAN, [tensor(F32, X), i32([1]), i(-1)]).shape == (2, 4)


def test_mean_float32_sums_sequentially():
    # Android folds in row-major order: 2**24 + 1 rounds back to 2**24 every time, so the
    # eight ones vanish; a pairwise sum would keep them (2**24 + 8).
    x = np.array([2.0**24] + [1.0] * 8, np.float32)
    got = run1(O.MEAN, [tensor(F32, x), i32([0]), i(0)])
    assert got[0] == np.float32(2.0**24) / np.float32(9)


def test_mean_float16_computes_in_float32():
    # In float16, 2048 + 1 rounds back to 2048 (a float16 sum would be 2048, mean 409.6 ->
    # 409.5); in float32 the sum is 2052 and 2052 / 5 = 410.4 -> float16 410.5.
    x = np.array([2048, 1, 1, 1, 1], np.float16)
    got = run1(O.MEAN, [tensor(F16, x), i32([0]), i(0)], F16)
    assert got.dtype == np.float16 and got[0] == 410.5


def test_mean_quantized_divides_stored_values_with_truncation():
    # Stored values [[10, 11, 11], [200, 255, 0]]: sums 32 and 455 over 3 -> 10 and 151
    # (10.67 and 151.67 truncated), whatever the zero point.
    x = np.array([[10, 11, 11], [200, 255, 0]], np.uint8)
    got = run1(
        O.MEAN,
        [tensor(Q8, x, scale=0.5, zero_point=77), i32([1]), i(0)],
        Q8,
        scale=0.5,
        zero_point=77,
    )
    np.testing.assert_array_equal(got, [10, 151])
    signed = run1(
        O.MEAN,
        [tensor(Q8S, x.astype(int) - 128, scale=0.5, zero_point=-51), i32([1]), i(0)],
        Q8S,
        scale=0.5,
        zero_point=-51,
    )
    np.testing.assert_array_equal(signed, [10 - 128, 151 - 128])


def test_mean_quantized_needs_little_more_memory_than_its_input():
    # 4M pairs of int8 (8 MB) to 4M means: the int64 sums and their quotient took 8 bytes
    # an output each, the signed-to-unsigned copy 3 bytes an input element.
    x = np.tile(np.array([[-128, 127], [5, 6]], np.int8), (1 << 21, 1))
    ins = [tensor(Q8S, x, scale=0.5, zero_point=3), i32([1]), i(0)]
    got, peak = traced_peak(lambda: run1(O.MEAN, ins, Q8S, scale=0.5, zero_point=3))
    assert peak < 2 * x.nbytes + (8 << 20), f"peak {peak >> 20} MB"
    np.testing.assert_array_equal(got[:4], [-1, 5, -1, 5])  # floor((0 + 255) / 2) - 128


def test_mean_rejects():
    q = tensor(Q8, [[1, 2]], scale=0.5, zero_point=1)
    rejects(O.MEAN, [q, i32([1]), i(0)], [output(Q8, scale=0.25, zero_point=1)], "scale")
    rejects(O.MEAN, [tensor(F32, X), i32([3]), i(0)], [output(F32)], "out of range for rank 3")
    rejects(O.MEAN, [tensor(F32, X), i32([[0]]), i(0)], [output(F32)], "1-D")
    rejects(O.MEAN, [tensor(F32, np.ones((1,) * 5)), i32([0]), i(0)], [output(F32)], "rank 0..4")
    rejects(
        O.MEAN, [tensor(F32, X), i32([0]), i(0)], [output(F32, (3, 4))], "MEAN.*HAL 1.1|1.1", V.V1_0
    )


# --- sequential folding ------------------------------------------------------------------


def _scalar_fold(rows, op):
    acc = rows[0].copy()
    for r in rows[1:]:
        acc = op(acc, r).astype(rows.dtype)
    return acc


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n_out", [1, 2, 3, 32])
@pytest.mark.parametrize("ufunc", [np.add, np.multiply])
def test_sequential_fold_matches_a_scalar_loop(dtype, n_out, ufunc):
    rng = np.random.default_rng(n_out)
    big = 1e7 if dtype == np.float32 else 1000.0
    rows = rng.standard_normal((257, n_out)) * (1.0 if ufunc is np.multiply else big / 1e3)
    rows[0] = big if ufunc is np.add else 1.0
    if ufunc is np.multiply:
        rows = 1 + rows * 0.01
    rows = np.ascontiguousarray(rows.astype(dtype))
    got = sequential_fold(rows, ufunc, 0 if ufunc is np.add else 1)
    np.testing.assert_array_equal(got, _scalar_fold(rows, ufunc))


def test_reduce_sum_float16_rounds_every_step():
    # _Float16 arithmetic: 2048 + 1 = 2049 is not a float16 (spacing 2) and rounds to even
    # 2048, four times over; a float32 sum would give 2052.
    x = np.array([2048, 1, 1, 1, 1], np.float16)
    got = run1(O.REDUCE_SUM, [tensor(F16, x), i32([0]), b(False)], F16)
    assert got.tolist() == [2048.0]


def test_reduce_sum_prod_axes():
    got = run1(O.REDUCE_SUM, [tensor(F32, X), i32([0, 2]), b(True)])
    np.testing.assert_array_equal(got.ravel(), [0 + 1 + 2 + 3 + 12 + 13 + 14 + 15, 92, 124])
    assert got.shape == (1, 3, 1)
    got = run1(O.REDUCE_PROD, [tensor(F32, X[:, :, :2] + 1), i32([-1]), b(False)])
    np.testing.assert_array_equal(got, [[2, 30, 90], [182, 306, 462]])


def test_reduce_over_zero_sized_axes_gives_android_initial_values():
    x = np.zeros((2, 0), np.float32)
    for op, want in [
        (O.REDUCE_SUM, 0.0),
        (O.REDUCE_PROD, 1.0),
        (O.REDUCE_MAX, np.finfo(np.float32).min),  # std::numeric_limits<float>::lowest()
        (O.REDUCE_MIN, np.finfo(np.float32).max),
    ]:
        got = run1(op, [tensor(F32, x), i32([1]), b(False)])
        np.testing.assert_array_equal(got, [want, want])
    got = run1(O.REDUCE_MAX, [tensor(F16, np.zeros((0, 3))), i32([0]), b(False)], F16)
    np.testing.assert_array_equal(got, [-65504] * 3)  # kFloat16Lowest
    got = run1(O.REDUCE_ALL, [tensor(B8, np.zeros((0, 1), bool)), i32([0]), b(False)], B8)
    assert got.tolist() == [True]


def test_reduce_max_min_skip_nan_and_carry_quantization():
    # acc = std::max(acc, x) never takes a NaN (the comparison is false).
    x = np.array([[np.nan, 1.0, -3.0], [2.0, np.nan, np.nan]], np.float32)
    got = run1(O.REDUCE_MAX, [tensor(F32, x), i32([1]), b(False)])
    np.testing.assert_array_equal(got, [1.0, 2.0])
    got = run1(O.REDUCE_MIN, [tensor(F32, x), i32([1]), b(False)])
    np.testing.assert_array_equal(got, [-3.0, 2.0])
    q = np.array([[3, 250, 7]], np.uint8)
    got = run1(
        O.REDUCE_MIN,
        [tensor(Q8, q, scale=2.0, zero_point=9), i32([1]), b(False)],
        Q8,
        scale=2.0,
        zero_point=9,
    )
    np.testing.assert_array_equal(got, [3])


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize(
    "op, values, negative",
    [
        # acc = std::max(acc, x) is (acc < x) ? x : acc: on a tie it keeps acc, so the
        # first of -0.0 and 0.0 in row-major order is the result.
        (O.REDUCE_MAX, [-1.0, -0.0, 0.0, -1.0], True),
        (O.REDUCE_MAX, [-1.0, 0.0, -0.0, -1.0], False),
        (O.REDUCE_MAX, [0.0, 0.0, 0.0, -0.0, -0.0, -0.0], False),
        (O.REDUCE_MIN, [1.0, -0.0, 0.0, 1.0], True),
        (O.REDUCE_MIN, [1.0, 0.0, -0.0, 2.0], False),
        # The sum starts from 0.0f: 0.0 + -0.0 is +0.0, so no sum (or mean) is -0.0.
        (O.REDUCE_SUM, [-0.0, -0.0, -0.0], False),
        (O.MEAN, [-0.0, -0.0], False),
        # The product starts from 1: 1 * -0.0 = -0.0, (-0.0) * (-0.0) = +0.0.
        (O.REDUCE_PROD, [-0.0], True),
        (O.REDUCE_PROD, [-0.0, -0.0], False),
    ],
)
def test_zero_results_keep_androids_sign(t, op, values, negative):
    keep = i(0) if op == O.MEAN else b(False)
    got = run1(op, [tensor(t, values), i32([0]), keep], t)
    assert got.tolist() == [0.0] and bool(np.signbit(got[0])) == negative


@pytest.mark.parametrize("t, lowest", [(F32, -np.finfo(np.float32).max), (F16, -65504.0)])
def test_reduce_max_min_start_from_the_types_extremes(t, lowest):
    # acc starts at lowest() (MAX) or max() (MIN), and std::max(lowest, -inf) is lowest:
    # infinities and NaNs alone never reach the result.
    x = np.array([[-np.inf, -np.inf], [np.nan, np.nan]])
    got = run1(O.REDUCE_MAX, [tensor(t, x), i32([1]), b(False)], t)
    np.testing.assert_array_equal(got, [lowest, lowest])
    got = run1(O.REDUCE_MIN, [tensor(t, -x), i32([1]), b(False)], t)
    np.testing.assert_array_equal(got, [-lowest, -lowest])


def test_reduce_max_zero_sign_per_column():
    # Columns [-0, 0], [0, -0], [-1, 0], [-0, -1] (reduced over axis 0): MAX keeps the
    # first zero of each column; MIN gives -0, 0, -1, -1.
    x = np.array([[-0.0, 0.0, -1.0, -0.0], [0.0, -0.0, 0.0, -1.0]], np.float32)
    got = run1(O.REDUCE_MAX, [tensor(F32, x), i32([0]), b(False)])
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert np.signbit(got).tolist() == [True, False, False, True]
    got = run1(O.REDUCE_MIN, [tensor(F32, x), i32([0]), b(False)])
    assert got.tolist() == [0.0, 0.0, -1.0, -1.0]
    assert np.signbit(got).tolist() == [True, False, True, True]


def test_reduce_any_all():
    x = np.array([[[True, False], [False, False]], [[True, True], [True, False]]])
    got = run1(O.REDUCE_ANY, [tensor(B8, x), i32([1, 2]), b(False)], B8)
    assert got.tolist() == [True, True]
    got = run1(O.REDUCE_ALL, [tensor(B8, x), i32([-1]), b(True)], B8)
    assert got.tolist() == [[[False], [False]], [[True], [False]]]


def test_reduce_rejects():
    rejects(O.REDUCE_SUM, [tensor(F32, X), i32([-4]), b(False)], [output(F32)], "out of range")
    rejects(
        O.REDUCE_MAX,
        [tensor(Q8S, [[1]], scale=1.0, zero_point=0), i32([0]), b(False)],
        [output(Q8S, scale=1.0, zero_point=1)],
        "zero point",
    )
    rejects(
        O.REDUCE_SUM,
        [tensor(F32, X), i32([0]), b(False)],
        [output(F32, (3, 4))],
        "HAL 1.2|REDUCE_SUM",
        V.V1_1,
    )


@pytest.mark.parametrize(
    "op, keep",
    [
        (O.MEAN, i(0)),
        (O.REDUCE_SUM, b(False)),
        (O.REDUCE_PROD, b(False)),
        (O.REDUCE_MAX, b(False)),
        (O.REDUCE_MIN, b(False)),
    ],
    ids=lambda c: getattr(c, "name", None),
)
def test_rank_limit_applies_when_only_the_rank_is_known(op, keep):
    # Android's validation (Utils.cpp MEAN's "inputRank > 4", Reduce.cpp's hasKnownRank
    # check) rejects rank 5 even when a dimension is unspecified.
    x5 = tensor(F32, np.zeros((1, 2, 1, 2, 3), np.float32), declared_dims=(0, 2, 1, 2, 3))
    rejects(op, [x5, i32([1]), keep], [output(F32)], r"input 0 must have rank 0\.\.4")
    x4 = tensor(F32, np.zeros((1, 2, 1, 3), np.float32), declared_dims=(0, 2, 1, 3))
    validate_model(single_op_model(op, [x4, i32([1]), keep], [output(F32)])[0], V.V1_2)


# --- ARGMAX / ARGMIN ---------------------------------------------------------------------


def test_argmax_argmin_first_of_ties_and_axes():
    x = np.array([[1, 5, 5, 0], [7, 7, -1, -1]], np.float32)
    np.testing.assert_array_equal(run1(O.ARGMAX, [tensor(F32, x), i(1)], I32), [1, 0])
    np.testing.assert_array_equal(run1(O.ARGMIN, [tensor(F32, x), i(-1)], I32), [3, 2])
    np.testing.assert_array_equal(run1(O.ARGMAX, [tensor(F32, x), i(0)], I32), [1, 1, 0, 0])
    got = run1(O.ARGMIN, [tensor(I32, [4, 2, 9]), i(0)], I32)
    assert got.shape == (1,) and got.tolist() == [1]  # rank 1 gives [1]


def test_argmax_nan_counts_only_first():
    # Android compares value > best; a NaN never wins, but a leading NaN is never beaten.
    x = np.array([[1, np.nan, 3], [np.nan, 5, 9], [-np.inf, np.nan, -np.inf]], np.float32)
    np.testing.assert_array_equal(run1(O.ARGMAX, [tensor(F32, x), i(1)], I32), [2, 0, 0])
    np.testing.assert_array_equal(run1(O.ARGMIN, [tensor(F32, x), i(1)], I32), [0, 0, 0])


@pytest.mark.parametrize("t", [F32, Q8])
@pytest.mark.parametrize("op", [O.ARGMAX, O.ARGMIN])
def test_arg_blocks_of_one_row_give_the_one_block_result(t, op):
    # A long axis (> 256) over 40 columns: the blocked weights (a NaN-free float32 with
    # ties and quant8 with ties across blocks).
    x = np.random.default_rng(3).integers(0, 4, (600, 40)).astype(np.uint8)
    ins = [tensor(t, x, **({"scale": 0.5} if t == Q8 else {})), i(0)]
    whole = run1(op, ins, I32)
    with mock.patch.object(reduction, "_ARG_BLOCK_ELEMENTS", 1):
        np.testing.assert_array_equal(run1(op, ins, I32), whole)
    want = np.argmax(x, axis=0) if op == O.ARGMAX else np.argmin(x, axis=0)
    np.testing.assert_array_equal(whole, want)


@pytest.mark.parametrize("columns", [2, 64])  # numpy's argmin; the blocked weights
def test_arg_along_a_long_first_axis_needs_little_more_memory_than_its_input(columns):
    # 16 MB of quant8: whole-array weights took 4 bytes an element, indexes 8 a row.
    x = np.random.default_rng(4).integers(0, 256, ((1 << 24) // columns, columns), np.uint8)
    ins = [tensor(Q8, x, scale=0.5), i(0)]
    got, peak = traced_peak(lambda: run1(O.ARGMIN, ins, I32))
    assert peak < x.nbytes + (8 << 20), f"peak {peak >> 20} MB"
    np.testing.assert_array_equal(got, np.argmin(x, axis=0))


def test_argmax_rejects_axis_and_empty_axis_fails():
    rejects(O.ARGMAX, [tensor(F32, X), i(3)], [output(I32)], "out of range for rank 3")
    with pytest.raises(HalError) as err:
        run_op(O.ARGMAX, [tensor(F32, np.zeros((2, 0))), i(1)], [output(I32)])
    assert err.value.status == ErrorStatus.GENERAL_FAILURE


# --- TOPK_V2 -----------------------------------------------------------------------------


def _topk_reference(row, k):
    """Android: sort (value, index) pairs ascending, reverse, take k."""
    pairs = sorted(((v, j) for j, v in enumerate(row.tolist())), reverse=True)[:k]
    return [v for v, _ in pairs], [j for _, j in pairs]


@given(
    st.sampled_from([F32, F16, I32, Q8, Q8S]),
    st.lists(st.integers(-3, 3), min_size=1, max_size=12),
    st.integers(1, 12),
    st.integers(1, 3),
)
def test_topk_matches_pair_sort(t, values, k, rows):
    k = min(k, len(values))
    x = np.array([values] * rows)
    x[1:] = x[1:] * -1  # other rows differ
    if t == Q8:
        x = x + 10
    qp = {"scale": 1.0, "zero_point": 0} if t in (Q8, Q8S) else {}
    vals, idx = run_op(O.TOPK_V2, [tensor(t, x, **qp), i(k)], [output(t, (), **qp), output(I32)])
    for r in range(rows):
        want_v, want_i = _topk_reference(x[r], k)
        assert vals[r].tolist() == want_v and idx[r].tolist() == want_i


def test_topk_negative_zero_ties_with_zero():
    # -0.0 == 0.0 in C++: a tie, so the larger index (the -0.0 at 2) comes first.
    x = np.array([0.0, -1.0, -0.0], np.float32)
    vals, idx = run_op(O.TOPK_V2, [tensor(F32, x), i(2)], [output(F32), output(I32)])
    assert idx.tolist() == [2, 0]
    assert np.signbit(vals[0]) and not np.signbit(vals[1])


def test_topk_rejects():
    rejects(O.TOPK_V2, [tensor(F32, X), i(5)], [output(F32), output(I32)], "exceeds")
    rejects(O.TOPK_V2, [tensor(F32, X), i(0)], [output(F32), output(I32)], "k must be > 0")


# --- what Android's validation leaves to execution -----------------------------------


def _android_validation_cases():
    """(op, inputs, outputs, deferrable, message): Android 11 validates these operations'
    operand counts, types, HAL versions and (MEAN, REDUCE_*: "up to 4") ranks (Utils.cpp
    validateOperation for MEAN, ARGMAX/ARGMIN, TOPK_V2; Reduce.cpp validate()); the axes
    and k are checked in prepare(), at execution."""
    out, x5 = [output(F32)], tensor(F32, np.ones((1,) * 5, np.float32))
    topk_out = [output(F32), output(I32)]
    return [
        # meanPrepare / Reduce.cpp prepare: the axes tensor
        (O.MEAN, [tensor(F32, X), i32([[0]]), i(0)], out, True, "must be a 1-D tensor"),
        (O.REDUCE_SUM, [tensor(F32, X), i32([[0]]), b(False)], out, True, "1-D tensor"),
        (O.REDUCE_ANY, [tensor(B8, [True]), i32([[0]]), b(False)], [output(B8)], True, "1-D"),
        # already deferrable (infer_shapes): an axis out of range
        (O.MEAN, [tensor(F32, X), i32([3]), i(0)], out, True, "out of range for rank 3"),
        # argMinMaxPrepare (handleNegativeAxis)
        (O.ARGMAX, [tensor(F32, X), i(3)], [output(I32)], True, "out of range for rank 3"),
        (O.ARGMIN, [tensor(F32, X), i(-4)], [output(I32)], True, "out of range for rank 3"),
        # topk_v2::prepare
        (O.TOPK_V2, [tensor(F32, X), i(0)], topk_out, True, "k must be > 0"),
        # strict: Utils.cpp "inputRank > 4" (MEAN), hasKnownRank in Reduce.cpp validate()
        (O.MEAN, [x5, i32([0]), i(0)], out, False, r"rank 0\.\.4"),
        (O.REDUCE_MAX, [x5, i32([-9]), b(False)], out, False, r"rank 0\.\.4"),
        # strict: operand types (validateOperationOperandTypes)
        (O.ARGMAX, [tensor(F32, X), i(0)], [output(F32)], False, "TENSOR_FLOAT32"),
    ]


@pytest.mark.parametrize(
    "op, inputs, outputs, deferrable, match",
    _android_validation_cases(),
    ids=lambda c: getattr(c, "name", None) if isinstance(c, O) else None,
)
def test_rejections_android_validation_leaves_to_execution(op, inputs, outputs, deferrable, match):
    model, _ = single_op_model(op, inputs, outputs)
    assert_rejected(model, deferrable=deferrable, match=match)


# --- signed = unsigned - 128 -------------------------------------------------------------

QUANT_OPS = [O.MEAN, O.REDUCE_MAX, O.REDUCE_MIN, O.ARGMAX, O.ARGMIN, O.TOPK_V2]


def test_every_quantized_reduction_has_a_twin_case():
    assert {e.op for e in quant8_examples(QUANT_OPS)} == set(QUANT_OPS)


@pytest.mark.parametrize("ex", quant8_examples(QUANT_OPS), ids=lambda e: e.name)
@pytest.mark.parametrize("seed", range(4))
def test_signed_equals_unsigned_minus_128(ex, seed):
    assert_signed_twin(ex, seed)
