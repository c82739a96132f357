"""Kernel and validation tests for the comparisons, LOGICAL_AND/OR/NOT and SELECT."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import output, tensor
from tests.operations.test_elementwise import (
    accepts,
    assert_rejection,
    assert_signed_matches_unsigned,
    both_paths,
    rejects,
    run1,
    table_path,
)

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
U8, S8, B8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_BOOL8

RELATIONS = {
    O.EQUAL: operator.eq,
    O.NOT_EQUAL: operator.ne,
    O.GREATER: operator.gt,
    O.GREATER_EQUAL: operator.ge,
    O.LESS: operator.lt,
    O.LESS_EQUAL: operator.le,
}
by_name = {"ids": lambda o: o.name}


@pytest.mark.parametrize("op", list(RELATIONS), **by_name)
@pytest.mark.parametrize("t", [F32, F16, I32])
def test_compare_broadcast_rank1_with_rank4(op, t):
    a = np.arange(-6, 6).reshape(1, 3, 2, 2)
    b = np.array([-1, 2])
    got = run1(op, [tensor(t, a), tensor(t, b)], output(B8, (1, 3, 2, 2)))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, RELATIONS[op](a, b))
    got = run1(op, [tensor(t, b), tensor(t, a)], output(B8, (1, 3, 2, 2)))
    np.testing.assert_array_equal(got, RELATIONS[op](b, a))


def test_float_compare_nan_and_signed_zero():
    a = tensor(F32, [np.nan, 0.0, np.inf])
    b = tensor(F32, [np.nan, -0.0, np.inf])
    want = {
        O.EQUAL: [0, 1, 1],
        O.NOT_EQUAL: [1, 0, 0],
        O.LESS: [0, 0, 0],
        O.GREATER_EQUAL: [0, 1, 1],
    }
    for op, w in want.items():
        np.testing.assert_array_equal(run1(op, [a, b], output(B8, (3,))), np.array(w, bool))


def test_quant8_compares_real_values_across_scales():
    # a: scale 0.5 zp 10 -> [-1, 0, 2.5, 7]; b: scale 0.25 zp 100 -> [-1, 0.25, 2.5, 10]
    a = tensor(U8, [8, 10, 15, 24], scale=0.5, zero_point=10)
    b = tensor(U8, [96, 101, 110, 140], scale=0.25, zero_point=100)
    np.testing.assert_array_equal(run1(O.EQUAL, [a, b], output(B8, (4,))), [1, 0, 1, 0])
    np.testing.assert_array_equal(run1(O.LESS, [a, b], output(B8, (4,))), [0, 1, 0, 1])
    # Raw values would say otherwise: 8 < 96 everywhere.
    np.testing.assert_array_equal(run1(O.GREATER_EQUAL, [a, b], output(B8, (4,))), [1, 0, 1, 0])


def test_quant8_real_values_are_float_products():
    # (q - zp) * scale in float32: 3 * 0.7f = 2.1 but 7 * 0.3f = 2.1000001, so Android
    # finds a < b although 3 * 0.7 == 7 * 0.3 in reals.
    a = tensor(U8, [3], scale=0.7, zero_point=0)
    b = tensor(U8, [7], scale=0.3, zero_point=0)
    assert np.float32(3) * np.float32(0.7) < np.float32(7) * np.float32(0.3)
    assert not run1(O.EQUAL, [a, b], output(B8, (1,)))[0]
    assert run1(O.LESS, [a, b], output(B8, (1,)))[0]


def test_quant8_real_values_round_to_float32_before_comparing():
    # 3 * 0.1f = 0.30000000447 in reals, which float32 rounds to 0.3f = 1 * 0.3f: Android
    # finds them equal (a float64 product would not).
    a = tensor(U8, [3, 3], scale=0.1, zero_point=0)
    b = tensor(U8, [1, 2], scale=0.3, zero_point=0)
    assert 3 * float(np.float32(0.1)) != float(np.float32(0.3))
    np.testing.assert_array_equal(run1(O.EQUAL, [a, b], output(B8, (2,))), [True, False])
    np.testing.assert_array_equal(run1(O.LESS, [a, b], output(B8, (2,))), [False, True])


@both_paths
@given(
    a=st.lists(st.integers(0, 255), min_size=1, max_size=10),
    b=st.integers(0, 255),
    s1=st.floats(0.01, 2.0),
    s2=st.floats(0.01, 2.0),
    z1=st.integers(0, 255),
    z2=st.integers(0, 255),
    op=st.sampled_from(list(RELATIONS)),
)
def test_quant8_compare_against_float_and_signed_twin(table, a, b, s1, z1, s2, z2, op):
    s1, s2 = float(np.float32(s1)), float(np.float32(s2))
    a = np.array(a, np.uint8)
    ins = [tensor(U8, a, scale=s1, zero_point=z1), tensor(U8, [b], scale=s2, zero_point=z2)]
    with table_path(table):
        got = run1(op, ins, output(B8, a.shape))
        ra = (a.astype(np.int32) - z1).astype(np.float32) * np.float32(s1)
        rb = np.float32(b - z2) * np.float32(s2)
        np.testing.assert_array_equal(got, RELATIONS[op](ra, rb))
        assert_signed_matches_unsigned(op, ins, [output(B8, a.shape)])


@pytest.mark.parametrize("op", list(RELATIONS), **by_name)
def test_bool8_compare_false_below_true(op):
    a = tensor(B8, [False, False, True, True])
    b = tensor(B8, [False, True, False, True])
    got = run1(op, [a, b], output(B8, (4,)))
    np.testing.assert_array_equal(
        got, RELATIONS[op](np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))
    )


def test_logical_ops_broadcast_rank1_with_rank4():
    p = np.array([True, False, True, False, True, True]).reshape(1, 3, 1, 2)
    q = np.array([True, False])
    np.testing.assert_array_equal(
        run1(O.LOGICAL_AND, [tensor(B8, p), tensor(B8, q)], output(B8, (1, 3, 1, 2))), p & q
    )
    np.testing.assert_array_equal(
        run1(O.LOGICAL_OR, [tensor(B8, q), tensor(B8, p)], output(B8, (1, 3, 1, 2))), p | q
    )
    np.testing.assert_array_equal(run1(O.LOGICAL_NOT, [tensor(B8, p)], output(B8, p.shape)), ~p)


@pytest.mark.parametrize("t", [F32, F16, I32])
def test_select_rank4(t):
    cond = np.array([1, 0, 0, 1, 1, 0], bool).reshape(1, 1, 2, 3)
    a = np.arange(6).reshape(1, 1, 2, 3)
    b = -np.arange(6).reshape(1, 1, 2, 3) - 10
    got = run1(O.SELECT, [tensor(B8, cond), tensor(t, a), tensor(t, b)], output(t, a.shape))
    np.testing.assert_array_equal(got, np.where(cond, a, b))


def test_select_keeps_nan_payloads_and_signed_zero():
    nan = np.array([0x7FC00123], np.uint32).view(np.float32)[0]
    got = run1(
        O.SELECT,
        [tensor(B8, [True, False]), tensor(F32, [nan, 1.0]), tensor(F32, [2.0, -0.0])],
        output(F32, (2,)),
    )
    assert got.view(np.uint32)[0] == 0x7FC00123 and got.view(np.uint32)[1] == 0x80000000


def test_select_quant8_requantizes_to_output_hand_computed():
    # a: scale 1 zp 0 [3, 200]; b: scale 0.5 zp 10 [9 -> -0.5, 255 -> 122.5]; out 2.0 zp 5
    cond = tensor(B8, [True, True, False, False])
    a = tensor(U8, [3, 200, 0, 0], scale=1.0, zero_point=0)
    b = tensor(U8, [0, 0, 9, 255], scale=0.5, zero_point=10)
    got = run1(O.SELECT, [cond, a, b], output(U8, (4,), scale=2.0, zero_point=5))
    # 3/2 = 1.5 -> 2 (+5); 200/2 = 100 (+5); -0.25 -> 0 (+5); 61.25 -> 61 (+5)
    np.testing.assert_array_equal(got, [7, 105, 5, 66])


@given(
    cond=st.lists(st.booleans(), min_size=1, max_size=8),
    s1=st.floats(0.01, 2.0),
    s2=st.floats(0.01, 2.0),
    so=st.floats(0.01, 2.0),
    z=st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
    data=st.data(),
)
def test_select_quant8_signed_is_unsigned_minus_128(cond, s1, s2, so, z, data):
    n = len(cond)
    a = data.draw(st.lists(st.integers(0, 255), min_size=n, max_size=n))
    b = data.draw(st.lists(st.integers(0, 255), min_size=n, max_size=n))
    assert_signed_matches_unsigned(
        O.SELECT,
        [
            tensor(B8, cond),
            tensor(U8, a, scale=s1, zero_point=z[0]),
            tensor(U8, b, scale=s2, zero_point=z[1]),
        ],
        [output(U8, (n,), scale=so, zero_point=z[2])],
    )


# --- zero-sized, validation ------------------------------------------------------------


@pytest.mark.parametrize("op", [*RELATIONS, O.LOGICAL_AND, O.LOGICAL_OR], **by_name)
def test_zero_sized_input_is_rejected(op):
    t = B8 if op in (O.LOGICAL_AND, O.LOGICAL_OR) else F32
    x = tensor(t, np.zeros((0, 2)), declared_dims=(0, 2))
    with pytest.raises(HalError, match="zero-sized"):
        run1(op, [x, tensor(t, [1, 0])], output(B8, (0, 2)))


def test_select_rejects_zero_sized_inputs():
    # Select.cpp is registered without allowZeroSizedInput: three empty inputs of the same
    # shape are still rejected.
    empty = [tensor(t, np.zeros((0, 2)), declared_dims=(0, 2)) for t in (B8, F32, F32)]
    with pytest.raises(HalError, match="zero-sized"):
        run1(O.SELECT, empty, output(F32, (0, 2)))


def test_logical_not_rejects_a_zero_sized_input():
    x = tensor(B8, np.zeros((0, 2), bool), declared_dims=(0, 2))
    with pytest.raises(HalError, match="zero-sized"):
        run1(O.LOGICAL_NOT, [x], output(B8, (0, 2)))


def test_select_rejects_different_shapes():
    c = tensor(B8, [True, False])
    rejects(
        O.SELECT,
        [c, tensor(F32, [1.0, 2.0]), tensor(F32, [[1.0, 2.0]], const=True)],
        [output(F32, (2,))],
        match="same shape",
    )
    rejects(
        O.SELECT,
        [
            tensor(B8, [True], const=True),
            tensor(F32, [1.0, 2.0], const=True),
            tensor(F32, [3.0, 4.0]),
        ],
        [output(F32, (2,))],
        match="same shape",
    )


@pytest.mark.parametrize("op", [O.EQUAL, O.LESS])
def test_compare_rejects_incompatible_broadcast_and_non_bool_output(op):
    rejects(
        op,
        [tensor(F32, [1.0, 2.0, 3.0], const=True), tensor(F32, [1.0, 2.0])],
        [output(B8, (3,))],
        match="broadcast",
    )
    rejects(op, [tensor(F32, [1.0]), tensor(F32, [1.0])], [output(F32, (1,))], match="no signature")
    rejects(op, [tensor(F32, [1.0]), tensor(I32, [1])], [output(B8, (1,))], match="no signature")


@pytest.mark.parametrize(
    "op, ins, version, ok",
    [
        (O.EQUAL, (F32, F32), HalVersion.V1_1, False),
        (O.EQUAL, (B8, B8), HalVersion.V1_2, True),
        (O.GREATER, (U8, U8), HalVersion.V1_2, True),
        (O.GREATER, (S8, S8), HalVersion.V1_2, False),
        (O.LESS_EQUAL, (S8, S8), HalVersion.V1_3, True),
        (O.LOGICAL_AND, (B8, B8), HalVersion.V1_1, False),
        (O.LOGICAL_OR, (B8, B8), HalVersion.V1_2, True),
        (O.LOGICAL_NOT, (B8,), HalVersion.V1_2, True),
        (O.LOGICAL_NOT, (B8,), HalVersion.V1_1, False),
    ],
)
def test_signature_versions(op, ins, version, ok):
    args = [tensor(t, [1, 0], scale=0.5 if t in (U8, S8) else 0.0) for t in ins]
    if ok:
        accepts(op, args, [output(B8, (2,))], version)
    else:
        rejects(op, args, [output(B8, (2,))], version)


def test_logical_ops_take_only_bool8():
    rejects(
        O.LOGICAL_AND,
        [tensor(I32, [1]), tensor(I32, [1])],
        [output(B8, (1,))],
        match="no signature",
    )
    rejects(O.LOGICAL_NOT, [tensor(F32, [1.0])], [output(B8, (1,))], match="no signature")


@pytest.mark.parametrize(
    "t, version, ok",
    [(F32, HalVersion.V1_1, False), (F32, HalVersion.V1_2, True), (U8, HalVersion.V1_2, True),
     (S8, HalVersion.V1_2, False), (S8, HalVersion.V1_3, True), (B8, HalVersion.V1_3, False)],
)  # fmt: skip
def test_select_signature_versions(t, version, ok):
    x = tensor(t, [1, 0], scale=0.5 if t in (U8, S8) else 0.0)
    args = [tensor(B8, [True, False]), x, x]
    out = [output(t, (2,), scale=0.5 if t in (U8, S8) else 0.0)]
    if ok:
        accepts(O.SELECT, args, out, version)
    else:
        rejects(O.SELECT, args, out, version)


@pytest.mark.parametrize(
    "case, deferrable, match",
    [
        # Select.cpp's validate checks types and versions; prepare() the shapes.
        ((O.SELECT, [tensor(B8, [True, False]), tensor(F32, [1.0, 2.0]),
                     tensor(F32, [[1.0, 2.0]], const=True)], [output(F32, (2,))]),
         True, "inputs 0 and 2 must have the same shape"),
        ((O.SELECT, [tensor(B8, [True]), tensor(F32, [1.0, 2.0]), tensor(F32, [3.0, 4.0])],
          [output(F32, (2,))]), True, "inputs 0 and 1 must have the same shape"),
        ((O.SELECT, [tensor(F32, [1.0, 2.0]), tensor(F32, [1.0, 2.0]), tensor(F32, [3.0, 4.0])],
          [output(F32, (2,))]), False, "no signature"),
        # Comparisons.cpp: broadcasting is prepare()'s; types are validate's.
        ((O.LESS, [tensor(F32, [1.0, 2.0, 3.0], const=True), tensor(F32, [1.0, 2.0])],
          [output(B8, (3,))]), True, "broadcast"),
        ((O.EQUAL, [tensor(F32, [1.0]), tensor(I32, [1])], [output(B8, (1,))]),
         False, "no signature"),
    ],
    ids=["select-shapes", "select-cond-shape", "select-types", "broadcast", "compare-types"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(case, deferrable, match):
    assert_rejection(case, deferrable, match)
