"""The precision criteria at their boundaries: every tolerance of nnapi-facts.md
("Precision criteria") lets a result just inside it pass and fails one just outside.

Android's numbers are written here again on purpose: a test that read them from
randomgraph.criteria could not catch a wrong one (a tolerance ten times too loose
passed the whole suite before this file)."""

from __future__ import annotations

import numpy as np
import pytest

from driver.hal.types import OperandType as T
from randomgraph.criteria import (
    CRITERIA_SETS,
    check_generated,
    check_random_graph,
    check_random_graph_output,
)

# --- Android's numbers ----------------------------------------------------------------

# Generated (spec, CTS) tests: float32 atol and rtol; any float16 in the model: both 5·2⁻¹⁰.
GENERATED_FP32 = (1e-5, 5 * 2.0**-23)
GENERATED_FP16 = (5 * 2.0**-10, 5 * 2.0**-10)

# Random graphs, TestRandomGraph.cpp: (bias, mse, atol, rtol) for float32 and float16,
# (bias, mse, atol) for the quantized types.
RANDOM_GRAPH = {
    "strict": ((1e-7, 1e-10, 1e-6, 1e-6), (1e-4, 1e-8, 1e-3, 1e-3), (0.1, 0.1, 1)),
    "medium": ((1e-6, 1e-8, 1e-5, 1e-5), (1e-3, 1e-5, 1e-2, 1e-2), (1.2, 1.2, 2)),
    "relaxed": ((3e-5, 1e-6, 1e-3, 1e-3), (5e-3, 1e-3, 1, 1), (1.5, 1.5, 10)),
    "conv": ((4e-4, 1e-5, 2e-2, 2e-2), (5e-2, 1e-2, 1, 1), (1.5, 1.5, 10)),
    "small_graph": ((4e-4, 1e-5, 1e-2, 1e-2), (5e-2, 1e-2, 1, 1), (2, 2, 12)),
    "large_graph": ((1e-2, 1e-4, 1e-1, 1e-1), (1e-1, 5e-2, 1, 1), (2, 2, 12)),
}

FLOAT_KINDS = {"float32": (T.TENSOR_FLOAT32, np.float32), "float16": (T.TENSOR_FLOAT16, np.float16)}


def test_every_criteria_set_is_covered_here():
    assert set(RANDOM_GRAPH) == set(CRITERIA_SETS)


# --- generated tests ------------------------------------------------------------------


def _generated_tolerance(type_code, fp16_model=False, mobilenet_quantized=False):
    """Android's (atol, rtol) for one output type of a generated test."""
    if type_code == T.TENSOR_BOOL8:
        return 0.0, 0.0
    if type_code == T.TENSOR_FLOAT16 or (type_code == T.TENSOR_FLOAT32 and fp16_model):
        return GENERATED_FP16
    if type_code == T.TENSOR_FLOAT32:
        return GENERATED_FP32
    return (3.0 if mobilenet_quantized else 1.0), 0.0


def _generated_passes(type_code, actual, expected, dtype, **flags) -> bool:
    a = np.array(actual, dtype)
    e = np.array(expected, dtype)
    return check_generated(0, type_code, a, e, **{"fp16_model": False, **flags}) is None


F32_ULP_AT_2_20 = 2.0 ** (20 - 23)  # float32 spacing in [2**20, 2**21)
F16_ULP_AT_64 = 2.0 ** (6 - 10)  # float16 spacing in [64, 128)


@pytest.mark.parametrize(
    "case, type_code, dtype, flags, expected, inside, outside",
    [
        # atol alone at 0; rtol where it dominates (5 ulps of float32 at 2**20 is rtol·e).
        ("fp32 atol", T.TENSOR_FLOAT32, np.float32, {}, 0.0, 0.9e-5, 1.1e-5),
        (
            "fp32 rtol",
            T.TENSOR_FLOAT32,
            np.float32,
            {},
            2.0**20,
            2.0**20 + 5 * F32_ULP_AT_2_20,
            2.0**20 + 6 * F32_ULP_AT_2_20,
        ),
        (
            "fp16 model, fp32 atol",
            T.TENSOR_FLOAT32,
            np.float32,
            {"fp16_model": True},
            0.0,
            0.0045,
            0.0053,
        ),
        (
            "fp16 model, fp32 rtol",
            T.TENSOR_FLOAT32,
            np.float32,
            {"fp16_model": True},
            64.0,
            64.0 + 0.30,  # tolerance 5·2⁻¹⁰ · (1 + 64) = 0.317
            64.0 + 0.34,
        ),
        ("fp16 atol", T.TENSOR_FLOAT16, np.float16, {}, 0.0, 0.0045, 0.0053),
        (
            "fp16 rtol",
            T.TENSOR_FLOAT16,
            np.float16,
            {},
            64.0,
            64.0 + 5 * F16_ULP_AT_64,  # 0.3125 <= 0.317
            64.0 + 6 * F16_ULP_AT_64,
        ),
        ("quant8 atol 1", T.TENSOR_QUANT8_ASYMM, np.uint8, {}, 100, 101, 102),
        ("quant8 signed atol 1", T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8, {}, -100, -101, -102),
        ("quant16 atol 1", T.TENSOR_QUANT16_SYMM, np.int16, {}, 1000, 999, 998),
        (
            "mobilenet quant8 atol 3",
            T.TENSOR_QUANT8_ASYMM,
            np.uint8,
            {"mobilenet_quantized": True},
            100,
            103,
            104,
        ),
        ("int32 atol 1", T.TENSOR_INT32, np.int32, {}, 70000, 70001, 70002),
        ("bool exact", T.TENSOR_BOOL8, np.bool_, {}, True, True, False),
    ],
)
def test_generated_criteria_boundaries(case, type_code, dtype, flags, expected, inside, outside):
    if dtype is not np.bool_:  # the cases sit on either side of Android's tolerance
        atol, rtol = _generated_tolerance(type_code, **flags)
        e = float(np.asarray(expected, dtype))
        tolerance = atol + rtol * abs(e)
        assert abs(float(np.asarray(inside, dtype)) - e) <= tolerance
        assert abs(float(np.asarray(outside, dtype)) - e) > tolerance
    assert _generated_passes(type_code, [expected, inside], [expected, expected], dtype, **flags)
    assert not _generated_passes(
        type_code, [expected, outside], [expected, expected], dtype, **flags
    )
    # Symmetric: below the expectation as far as above.
    if dtype is not np.bool_:
        mirror = 2 * np.float64(expected) - np.float64(outside)
        assert not _generated_passes(type_code, [mirror], [expected], dtype, **flags)


# --- random graphs --------------------------------------------------------------------


def _random_passes(set_name, type_code, actual, expected) -> bool:
    return check_random_graph(0, type_code, actual, expected, CRITERIA_SETS[set_name]) is None


def _float_cases():
    for set_name, (f32, f16, _) in RANDOM_GRAPH.items():
        for kind, criterion in (("float32", f32), ("float16", f16)):
            yield pytest.param(set_name, kind, *criterion, id=f"{set_name}-{kind}")


@pytest.mark.parametrize("set_name, kind, bias, mse, atol, rtol", list(_float_cases()))
def test_random_graph_float_boundaries(set_name, kind, bias, mse, atol, rtol):
    type_code, dtype = FLOAT_KINDS[kind]

    def passes(actual, expected):
        return _random_passes(
            set_name, type_code, np.array(actual, dtype), np.array(expected, dtype)
        )

    # atol, with fewer than 10 elements (no bias or mse) and expectations 0.
    zeros = [0.0] * 4
    assert passes([0.0, 0.0, 0.0, 0.5 * atol], zeros)
    assert not passes([0.0, 0.0, 0.0, 2 * atol], zeros)
    assert not passes([0.0, 0.0, 0.0, -2 * atol], zeros)

    # rtol: the difference is relative (divided by max(1, |e|)) and may reach atol + rtol·|e|.
    big = 1000.0 if kind == "float32" else 100.0
    allowed = atol + rtol * big
    assert passes([big] * 3 + [big + 0.9 * allowed * big], [big] * 4)
    assert not passes([big] * 3 + [big + 1.1 * allowed * big], [big] * 4)

    # bias: the same small error everywhere, inside atol, with at least 10 elements.
    offset = 1.5 * bias
    assert offset < atol
    assert not passes([offset] * 100, [0.0] * 100)
    assert not passes([-offset] * 100, [0.0] * 100)  # |bias|
    assert passes([0.5 * bias] * 100, [0.0] * 100)
    # Under 10 elements there is no bias (nor mse) to check.
    assert passes([offset] * 9, [0.0] * 9)
    assert not passes([offset] * 10, [0.0] * 10)

    # mse: errors of alternating sign (no bias), inside the per-element tolerance.
    for factor, ok in ((2.0, False), (0.5, True)):
        step = np.sqrt(factor * mse)
        center = 0.0 if step < 0.5 * atol else 1000.0  # there rtol lets the step through
        assert step < 0.5 * (atol + rtol * center)
        signs = np.where(np.arange(100) % 2 == 0, 1.0, -1.0)
        actual = center + signs * step * max(1.0, center)
        assert passes(actual, [center] * 100) == ok, (factor, step, center)


@pytest.mark.parametrize("set_name", list(RANDOM_GRAPH))
@pytest.mark.parametrize(
    "type_code, dtype, base",
    [
        (T.TENSOR_QUANT8_ASYMM, np.uint8, 100),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8, -20),
        (T.TENSOR_QUANT16_ASYMM, np.uint16, 1000),
    ],
    ids=["quant8", "quant8_signed", "quant16"],
)
def test_random_graph_quantized_boundaries(set_name, type_code, dtype, base):
    bias, mse, atol = RANDOM_GRAPH[set_name][2]

    def passes(errors):
        errors = np.asarray(errors, np.int64)
        expected = np.full(errors.shape, base, dtype)
        return _random_passes(set_name, type_code, (base + errors).astype(dtype), expected)

    # atol, with fewer than 10 elements.
    assert passes([0, 0, 0, atol])
    assert not passes([0, 0, 0, atol + 1])
    assert not passes([0, 0, 0, -(atol + 1)])

    # bias: every element off by the same integer k > bias (k <= atol).
    k = int(np.floor(bias)) + 1
    assert k <= atol
    assert not passes([k] * 100)
    assert not passes([-k] * 100)
    assert passes([k] * 9)  # under 10 elements: no bias check

    # mse: alternating +-k, no bias; mean square k*k > mse.
    signs = np.where(np.arange(100) % 2 == 0, 1, -1)
    assert not passes(signs * k)

    # Both inside: an even number of +-1 errors, as many as half the mse allows.
    count = min(100, int(0.5 * min(bias, mse) * 100)) // 2 * 2
    assert count >= 2
    errors = np.zeros(100, np.int64)
    errors[:count] = signs[:count]
    assert passes(errors)
    one_sided = np.zeros(100, np.int64)
    one_sided[: count // 2] = 1  # bias = mse = count / 200 < min(bias, mse)
    assert passes(one_sided)


@pytest.mark.parametrize("set_name", list(RANDOM_GRAPH))
def test_random_graph_int32_and_bool(set_name):
    expected = np.full(100, 7, np.int32)
    assert _random_passes(set_name, T.TENSOR_INT32, expected + 1, expected)
    assert not _random_passes(
        set_name, T.TENSOR_INT32, expected + np.eye(1, 100, 5, np.int32)[0] * 2, expected
    )
    truth = np.zeros(100, np.bool_)
    ten = truth.copy()
    ten[:10] = True  # at most 10% may differ
    assert _random_passes(set_name, T.TENSOR_BOOL8, ten, truth)
    ten[10] = True
    assert not _random_passes(set_name, T.TENSOR_BOOL8, ten, truth)


@pytest.mark.parametrize("set_name", list(RANDOM_GRAPH))
def test_relaxed_models_hold_float32_outputs_to_the_float16_criterion(set_name):
    f32_atol = RANDOM_GRAPH[set_name][0][2]
    f16_atol = RANDOM_GRAPH[set_name][1][2]
    error = min(2 * f32_atol, 0.5 * f16_atol)
    assert 1.5 * f32_atol < error  # outside float32's tolerance, inside float16's
    actual = np.array([0.0, 0.0, 0.0, error], np.float32)
    expected = np.zeros(4, np.float32)
    crit = CRITERIA_SETS[set_name]
    assert (
        check_random_graph_output(0, T.TENSOR_FLOAT32, actual, expected, crit, relaxed=True) is None
    )
    assert check_random_graph_output(0, T.TENSOR_FLOAT32, actual, expected, crit) is not None


@pytest.mark.parametrize(
    "actual, passes",
    [
        ([np.inf, -np.inf, np.nan], True),
        ([-np.inf, -np.inf, np.nan], False),  # the other infinity
        ([np.inf, np.inf, np.nan], False),
        ([np.inf, -np.inf, 0.0], False),  # finite where NaN is expected
        ([0.0, -np.inf, np.nan], False),  # finite where inf is expected
    ],
)
def test_random_graph_non_finite_values_must_agree(actual, passes):
    expected = np.array([np.inf, -np.inf, np.nan], np.float32)
    got = np.array(actual, np.float32)
    crit = CRITERIA_SETS["large_graph"]  # the loosest set
    assert (check_random_graph_output(0, T.TENSOR_FLOAT32, got, expected, crit) is None) == passes
