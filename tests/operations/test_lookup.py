"""Kernel, shape-inference and validation tests for EMBEDDING_LOOKUP and HASHTABLE_LOOKUP."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations.lookup import bionic_bsearch, hashtable_positions
from driver.testing import output, run_op, single_op_model, tensor
from driver.validation import validate_model
from tests.operations.examples_shape import assert_signed_twin, quant8_examples

F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
V = HalVersion
HITS = output(Q8, (), scale=1.0, zero_point=0)


def i32(values, **kw):
    kw.setdefault("const", True)
    return tensor(I32, values, **kw)


def rejects(op, inputs, outputs, match: str, version=V.V1_3) -> HalError:
    model, _ = single_op_model(op, inputs, outputs)
    with pytest.raises(HalError) as err:
        validate_model(model, version)
    assert err.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(match, err.value.message), err.value.message
    return err.value


TABLE = np.arange(3 * 2 * 2, dtype=np.float32).reshape(3, 2, 2)


# --- EMBEDDING_LOOKUP ----------------------------------------------------------------------


def test_embedding_lookup_rows_of_a_3d_table():
    (got,) = run_op(
        O.EMBEDDING_LOOKUP, [i32([1, 1, 0, 2], const=False), tensor(F32, TABLE)], [output(F32)]
    )
    assert got.shape == (4, 2, 2)
    for k, row in enumerate([1, 1, 0, 2]):
        np.testing.assert_array_equal(got[k], TABLE[row])


def test_embedding_lookup_index_out_of_range():
    rejects(O.EMBEDDING_LOOKUP, [i32([0, 3]), tensor(F32, TABLE)], [output(F32)], "lookup 3 is out")
    with pytest.raises(HalError) as err:
        run_op(O.EMBEDDING_LOOKUP, [i32([-1], const=False), tensor(F32, TABLE)], [output(F32)])
    assert err.value.status == ErrorStatus.GENERAL_FAILURE
    assert "lookup -1" in err.value.message


def test_embedding_lookup_rejects_shapes_and_versions():
    rejects(O.EMBEDDING_LOOKUP, [i32([0]), tensor(F32, [1, 2])], [output(F32)], "rank 2")
    rejects(O.EMBEDDING_LOOKUP, [i32([[0]]), tensor(F32, TABLE)], [output(F32)], "1-D")
    q = tensor(Q8, [[1, 2]], scale=0.5, zero_point=0)
    rejects(O.EMBEDDING_LOOKUP, [i32([0]), q], [output(Q8, (1, 2), scale=0.5)], "1.2", V.V1_1)
    rejects(
        O.EMBEDDING_LOOKUP,
        [i32([0]), q],
        [output(Q8, (1, 2), scale=0.5, zero_point=1)],
        "zero point",
    )
    rejects(
        O.EMBEDDING_LOOKUP,
        [i32([0]), tensor(F16, [[1, 2]])],
        [output(F16, (1, 2))],
        "1.3",
        V.V1_2,
    )


# --- HASHTABLE_LOOKUP -----------------------------------------------------------------------


def test_hashtable_lookup_hits_and_misses():
    keys = [-50, 3, 8, 1000]
    values = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.int32)
    out, hits = run_op(
        O.HASHTABLE_LOOKUP,
        [i32([8, 9, -50, 1000, 3], const=False), i32(keys), tensor(I32, values)],
        [output(I32), HITS],
    )
    np.testing.assert_array_equal(out, [[5, 6], [0, 0], [1, 2], [7, 8], [3, 4]])
    np.testing.assert_array_equal(hits, [1, 0, 1, 1, 1])
    assert hits.dtype == np.uint8


def test_hashtable_lookup_miss_is_zero_bytes_not_the_zero_point():
    table = tensor(Q8S, [[5], [6]], scale=0.5, zero_point=-7)
    out, hits = run_op(
        O.HASHTABLE_LOOKUP,
        [i32([2, 4]), i32([1, 2]), table],
        [output(Q8S, scale=0.5, zero_point=-7), HITS],
    )
    np.testing.assert_array_equal(out, [[6], [0]])
    np.testing.assert_array_equal(hits, [1, 0])


def test_hashtable_lookup_rejects():
    good = [i32([1]), i32([1, 2]), tensor(F32, [[1.0], [2.0]])]
    rejects(
        O.HASHTABLE_LOOKUP,
        good,
        [output(F32), output(Q8, scale=0.5, zero_point=0)],
        "hits.*scale 1.0",
    )
    rejects(
        O.HASHTABLE_LOOKUP,
        [i32([1]), i32([2, 1]), tensor(F32, [[1.0], [2.0]])],
        [output(F32), HITS],
        "sorted in ascending order",
    )
    rejects(
        O.HASHTABLE_LOOKUP,
        good,
        [output(F32), output(Q8, scale=1.0, zero_point=1)],
        "hits.*zero point 0",
    )
    # One value row per key: fewer rows and more rows are both rejected.
    rejects(
        O.HASHTABLE_LOOKUP,
        [i32([1]), i32([1, 2, 3]), tensor(F32, [[1.0], [2.0]])],
        [output(F32), HITS],
        "differs from the 3 keys",
    )
    rejects(
        O.HASHTABLE_LOOKUP,
        [i32([1]), i32([1]), tensor(F32, [[1.0], [2.0]])],
        [output(F32), HITS],
        "differs from the 1 keys",
    )
    rejects(
        O.HASHTABLE_LOOKUP,
        [i32([1]), i32([1, 2]), tensor(F16, [[1.0], [2.0]])],
        [output(F16), HITS],
        "no signature",
    )


def test_hashtable_lookup_takes_repeated_constant_keys():
    # "Sorted" is non-decreasing: a repeated key is valid, and bionic's bsearch finds the
    # repeat its halving reaches first (position 2 of 4 here).
    out, hits = run_op(
        O.HASHTABLE_LOOKUP,
        [i32([2, 5]), i32([1, 2, 2, 5]), tensor(F32, [[1.0], [2.0], [3.0], [4.0]])],
        [output(F32), HITS],
    )
    np.testing.assert_array_equal(out, [[3.0], [4.0]])
    np.testing.assert_array_equal(hits, [1, 1])


_Q8_TABLE = tensor(Q8, [[1, 2]], scale=0.5, zero_point=0)
_F_TABLE = tensor(F32, [[1.0], [2.0]])


@pytest.mark.parametrize(
    "op, inputs, outputs, version, deferrable, match",
    [
        # Utils.cpp's validateOperation checks counts, types and versions...
        (O.EMBEDDING_LOOKUP, [i32([0]), tensor(F16, [[1, 2]])], [output(F16, (1, 2))], V.V1_2,
         False, "1.3"),
        (O.HASHTABLE_LOOKUP, [i32([1]), i32([1, 2]), tensor(F16, [[1.0], [2.0]])],
         [output(F16), HITS], V.V1_3, False, "no signature"),
        # ...embeddingLookupPrepare the ranks and quantization, EmbeddingLookup::Eval the
        # indexes (project policy rejects constant ones up front).
        (O.EMBEDDING_LOOKUP, [i32([[0]]), tensor(F32, TABLE)], [output(F32)], V.V1_3,
         True, "input 0: lookups must be a 1-D tensor"),
        (O.EMBEDDING_LOOKUP, [i32([0]), tensor(F32, [1, 2])], [output(F32)], V.V1_3,
         True, "input 1 must have rank 2"),
        (O.EMBEDDING_LOOKUP, [i32([0]), _Q8_TABLE], [output(Q8, (1, 2), scale=0.5, zero_point=1)],
         V.V1_3, True, "zero point"),
        (O.EMBEDDING_LOOKUP, [i32([0, 3]), tensor(F32, TABLE)], [output(F32)], V.V1_3,
         True, "lookup 3 is out of range"),
        # ...hashtableLookupPrepare the ranks and the outputs' quantization; keys are
        # searched sorted or not (project policy rejects unsorted constant ones).
        (O.HASHTABLE_LOOKUP, [i32([1]), i32([[1, 2]]), _F_TABLE], [output(F32), HITS], V.V1_3,
         True, "input 1: keys must be a 1-D tensor"),
        (O.HASHTABLE_LOOKUP, [i32([1]), i32([2, 1]), _F_TABLE], [output(F32), HITS], V.V1_3,
         True, "sorted in ascending order"),
        (O.HASHTABLE_LOOKUP, [i32([1]), i32([1, 2]), _F_TABLE],
         [output(F32), output(Q8, scale=0.5)], V.V1_3, True, "hits.*scale 1.0"),
        (O.HASHTABLE_LOOKUP, [i32([1]), i32([1, 2, 3]), _F_TABLE], [output(F32), HITS], V.V1_3,
         True, "differs from the 3 keys"),
    ],
    ids=["embedding-version", "hashtable-types", "lookups-rank", "values-rank",
         "embedding-quant", "index-range", "keys-rank", "keys-sorted", "hits-quant",
         "rows-vs-keys"],
)  # fmt: skip
def test_rejections_android_validation_leaves_to_execution(
    op, inputs, outputs, version, deferrable, match
):
    err = rejects(op, inputs, outputs, match, version)
    assert err.deferrable is deferrable, err.message


def _bionic_bsearch_scalar(keys, key):
    """bionic's bsearch.c (OpenBSD), line by line, with HashtableLookup's comparator."""
    base, lim = 0, len(keys)
    while lim != 0:
        p = base + (lim >> 1)
        cmp = (key - keys[p] + 2**31) % 2**32 - 2**31  # int32 subtraction, wrapping
        if cmp == 0:
            return p
        if cmp > 0:
            base = p + 1
            lim -= 1
        lim >>= 1
    return -1


@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20),
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=20),
    st.booleans(),
)
def test_bsearch_matches_bionic_on_any_keys(keys, lookups, sort):
    # Unsorted, duplicate and extreme keys included: the run-time answer is Android's.
    if sort:
        keys = sorted(keys)
    lookups = lookups + keys[:3]
    want = [_bionic_bsearch_scalar(keys, k) for k in lookups]
    k32, l32 = np.array(keys, np.int32), np.array(lookups, np.int32)
    assert bionic_bsearch(k32, l32).tolist() == want
    # The kernel's searchsorted shortcut (sorted unique keys, no overflow) agrees too.
    assert hashtable_positions(k32, l32).tolist() == want


@given(st.sets(st.integers(-1000, 1000), max_size=40), st.lists(st.integers(-1100, 1100)))
def test_hashtable_shortcut_matches_bionic_on_sorted_unique_keys(keys, lookups):
    k32, l32 = np.array(sorted(keys), np.int32), np.array(lookups, np.int32)
    assert hashtable_positions(k32, l32).tolist() == bionic_bsearch(k32, l32).tolist()


def test_bsearch_on_sorted_keys_finds_every_key():
    keys = np.array(sorted(set(np.random.default_rng(3).integers(-1000, 1000, 300))), np.int32)
    got = bionic_bsearch(keys, keys)
    np.testing.assert_array_equal(got, np.arange(len(keys)))
    assert (bionic_bsearch(keys, np.array([1001, -1001], np.int32)) == -1).all()


def test_hashtable_lookup_overflowing_comparator_is_android_s():
    # Keys [-2**31, 2**31 - 1]: looking up 2**31 - 1 first compares with index 1 (a hit);
    # looking up 0 compares 0 - (2**31 - 1) < 0, moves left, 0 - (-2**31) wraps to
    # -2**31 < 0 and misses.
    out, hits = run_op(
        O.HASHTABLE_LOOKUP,
        [i32([2**31 - 1, 0], const=False), i32([-(2**31), 2**31 - 1]), tensor(I32, [[1], [2]])],
        [output(I32), HITS],
    )
    np.testing.assert_array_equal(hits, [1, 0])
    np.testing.assert_array_equal(out, [[2], [0]])


# --- signed = unsigned - 128 (EMBEDDING_LOOKUP; HASHTABLE_LOOKUP is exempt) ---------------


@pytest.mark.parametrize("ex", quant8_examples([O.EMBEDDING_LOOKUP]), ids=lambda e: e.name)
@pytest.mark.parametrize("seed", range(3))
def test_signed_equals_unsigned_minus_128(ex, seed):
    assert_signed_twin(ex, seed)
