"""FULLY_CONNECTED: hand-computed cases, the rank > 2 flattening, integer requantization
checked against the independent scalar reference, and the cross-type properties."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import fully_connected
from driver.testing import (
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)
from tests.operations.test_conv import RELAXED_TOL, act_float, ref_requantize

QI, QW, QO = (0.5, 127), (0.25, 120), (1.0, 130)


def _run(x, w, b, act, kind, out_shape):
    """FULLY_CONNECTED on uint8 values x/w (reals via QI/QW) and int32 bias b."""
    if kind in ("f32", "f16"):
        t = T.TENSOR_FLOAT32 if kind == "f32" else T.TENSOR_FLOAT16
        ins = [
            tensor(t, (x - QI[1]) * QI[0]),
            tensor(t, (w - QW[1]) * QW[0], const=True),
            tensor(t, b * QI[0] * QW[0], const=True),
            scalar(T.INT32, act),
        ]
        (y,) = run_op(O.FULLY_CONNECTED, ins, [output(t, out_shape)])
        return y.astype(np.float64)
    t = T.TENSOR_QUANT8_ASYMM if kind == "q8" else T.TENSOR_QUANT8_ASYMM_SIGNED
    off = 0 if kind == "q8" else -128
    ins = [
        tensor(t, x + off, scale=QI[0], zero_point=QI[1] + off),
        tensor(t, w + off, scale=QW[0], zero_point=QW[1] + off, const=True),
        tensor(T.TENSOR_INT32, b, scale=QI[0] * QW[0], const=True),
        scalar(T.INT32, act),
    ]
    outs = [output(t, out_shape, scale=QO[0], zero_point=QO[1] + off)]
    (y,) = run_op(O.FULLY_CONNECTED, ins, outs)
    return y.astype(np.int64) - off


def test_by_hand():
    ins = [
        tensor(T.TENSOR_FLOAT32, [[1, 2, 3], [-1, 0, 1]]),
        tensor(T.TENSOR_FLOAT32, [[1, 0, 1], [0, 2, 0]], const=True),
        tensor(T.TENSOR_FLOAT32, [0.5, -1], const=True),
        scalar(T.INT32, 0),
    ]
    (y,) = run_op(O.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, (2, 2))])
    np.testing.assert_array_equal(y, [[4.5, 3], [0.5, -1]])


def test_rank_4_input_is_flattened_to_rows_of_input_size():
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 3, 2)  # 12 elements, input_size 4
    w = np.array([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=np.float32)
    ins = [
        tensor(T.TENSOR_FLOAT32, x),
        tensor(T.TENSOR_FLOAT32, w, const=True),
        tensor(T.TENSOR_FLOAT32, [0, 0], const=True),
        scalar(T.INT32, 1),
    ]
    (y,) = run_op(O.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, (3, 2))])
    np.testing.assert_array_equal(y, [[6, 0], [22, 4], [38, 8]])


def test_quant8_by_hand():
    # reals: x (1, -1), w (2, 4), bias 0.5 -> -1.5 -> round half away -2 -> zp 10 -> 8
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, [[12, 8]], scale=0.5, zero_point=10),
        tensor(T.TENSOR_QUANT8_ASYMM, [[4, 8]], scale=0.5, zero_point=0, const=True),
        tensor(T.TENSOR_INT32, [2], scale=0.25, const=True),
        scalar(T.INT32, 0),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 1), scale=1.0, zero_point=10)]
    (y,) = run_op(O.FULLY_CONNECTED, ins, outs)
    assert y.item() == 8


@st.composite
def cases(draw):
    batch, size, units = draw(st.integers(1, 4)), draw(st.integers(1, 8)), draw(st.integers(1, 5))
    rank = draw(st.integers(2, 4))
    shape = (batch, size) if rank == 2 else (1,) * (rank - 2) + (batch, size)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.integers(0, 256, shape)
    w = rng.integers(0, 256, (units, size))
    b = rng.integers(-500, 500, units)
    return x, w, b, draw(st.integers(0, 3)), (batch, units)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["q8", "s8"])
def test_quantized_matches_integer_reference(seed, kind):
    rng = np.random.default_rng(seed)
    x, w, b = rng.integers(0, 256, (3, 7)), rng.integers(0, 256, (4, 7)), rng.integers(-900, 900, 4)
    act = seed % 4
    acc = (x - QI[1]) @ (w - QW[1]).T + b
    want = ref_requantize(acc, QI[0], QW[0], QO[0], QO[1], act, T.TENSOR_QUANT8_ASYMM)
    np.testing.assert_array_equal(_run(x, w, b, act, kind, (3, 4)), want)


@pytest.mark.parametrize("kind", ["q8", "s8"])
@pytest.mark.parametrize("size", [7, 5000])  # float32 and float64 accumulators
def test_quantized_blocks_of_one_row_give_the_one_block_result(kind, size):
    rng = np.random.default_rng(size)
    x, w = rng.integers(0, 256, (5, size)), rng.integers(0, 256, (3, size))
    b = rng.integers(-9, 9, 3)
    whole = _run(x, w, b, 0, kind, (5, 3))
    with mock.patch.object(fully_connected, "_BLOCK_ELEMENTS", 1):
        np.testing.assert_array_equal(_run(x, w, b, 0, kind, (5, 3)), whole)


def test_a_large_quantized_batch_needs_little_more_memory_than_its_input():
    # A 16 MB quant8 input of 2M rows of 8: a float copy of it all would take 64-128 MB,
    # the int64 requantization of the whole output 32 MB; the kernel works by row blocks.
    x = np.random.default_rng(0).integers(0, 256, (1 << 21, 8), dtype=np.uint8)
    w = np.arange(16).reshape(2, 8) + 120
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, x, scale=QI[0], zero_point=QI[1]),
        tensor(T.TENSOR_QUANT8_ASYMM, w, scale=QW[0], zero_point=QW[1], const=True),
        tensor(T.TENSOR_INT32, [5, -5], scale=QI[0] * QW[0], const=True),
        scalar(T.INT32, 0),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1 << 21, 2), scale=QO[0], zero_point=QO[1])]
    (y,), peak = traced_peak(lambda: run_op(O.FULLY_CONNECTED, ins, outs))
    assert peak < 2 * x.nbytes + (32 << 20), f"peak {peak >> 20} MB"
    acc = (x[-3:].astype(np.int64) - QI[1]) @ (w - QW[1]).T + [5, -5]
    want = ref_requantize(acc, QI[0], QW[0], QO[0], QO[1], 0, T.TENSOR_QUANT8_ASYMM)
    np.testing.assert_array_equal(y[-3:], want)


@given(cases())
def test_float32_matches_matrix_product(case):
    x, w, b, act, out_shape = case
    xr = ((x - QI[1]) * QI[0]).reshape(out_shape[0], -1)
    want = act_float(xr @ ((w - QW[1]) * QW[0]).T + b * QI[0] * QW[0], act)
    np.testing.assert_allclose(_run(x, w, b, act, "f32", out_shape), want, rtol=1e-5, atol=1e-4)


@given(cases())
def test_signed_equals_unsigned_minus_128(case):
    x, w, b, act, out_shape = case
    np.testing.assert_array_equal(
        _run(x, w, b, act, "s8", out_shape), _run(x, w, b, act, "q8", out_shape)
    )


@given(cases())
def test_quantized_within_one_of_requantized_float(case):
    x, w, b, act, out_shape = case
    real = _run(x, w, b, act, "f32", out_shape)
    want = np.clip(np.sign(real) * np.floor(np.abs(real) / QO[0] + 0.5) + QO[1], 0, 255)
    assert np.abs(_run(x, w, b, act, "q8", out_shape) - want).max() <= 1


@given(cases())
def test_float16_close_to_float32(case):
    x, w, b, act, out_shape = case
    x, w = x // 4 + 96, w // 4 + 96  # keep sums well inside float16's range
    f32 = _run(x, w, b, act, "f32", out_shape)
    f16 = _run(x, w, b, act, "f16", out_shape)
    scale = max(1.0, float(np.abs(f32).max()))
    np.testing.assert_allclose(f16, f32, rtol=RELAXED_TOL, atol=RELAXED_TOL * scale)


def _rejected(fn):
    with pytest.raises(HalError) as e:
        fn()
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    return e.value.message


def test_rejects_elements_not_a_multiple_of_input_size():
    ins = [
        tensor(T.TENSOR_FLOAT32, np.zeros((1, 5))),
        tensor(T.TENSOR_FLOAT32, np.zeros((2, 2)), const=True),
        tensor(T.TENSOR_FLOAT32, [0, 0], const=True),
        scalar(T.INT32, 0),
    ]
    assert "multiple" in _rejected(
        lambda: run_op(O.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, (2, 2))])
    )


def test_rejects_rank_1_input_and_bad_bias():
    w = tensor(T.TENSOR_FLOAT32, np.zeros((2, 2)), const=True)
    act = scalar(T.INT32, 0)
    out = [output(T.TENSOR_FLOAT32, (1, 2))]
    _rejected(
        lambda: run_op(
            O.FULLY_CONNECTED,
            [
                tensor(T.TENSOR_FLOAT32, [1, 2]),
                w,
                tensor(T.TENSOR_FLOAT32, [0, 0], const=True),
                act,
            ],
            out,
        )
    )
    _rejected(
        lambda: run_op(
            O.FULLY_CONNECTED,
            [
                tensor(T.TENSOR_FLOAT32, [[1, 2]]),
                w,
                tensor(T.TENSOR_FLOAT32, [0, 0, 0], const=True),
                act,
            ],
            out,
        )
    )


def test_quant8_output_scale_rule_before_hal_1_2():
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, [[1, 2]], scale=1.0),
        tensor(T.TENSOR_QUANT8_ASYMM, [[1, 2]], scale=1.0, const=True),
        tensor(T.TENSOR_INT32, [0], scale=1.0, const=True),
        scalar(T.INT32, 0),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 1), scale=1.0)]  # not > 1.0 * 1.0
    run_op(O.FULLY_CONNECTED, ins, outs, version=HalVersion.V1_2)
    _rejected(lambda: run_op(O.FULLY_CONNECTED, ins, outs, version=HalVersion.V1_1))


@pytest.mark.parametrize(
    "out_scale, bias_scale, version, rule",
    [
        (1.0, 1.0, HalVersion.V1_1, "needs HAL 1.2"),  # output scale not > 1.0 * 1.0
        (2.0, 0.5, HalVersion.V1_3, "bias"),  # bias scale != input * weights scale
    ],
)
def test_scale_rules_hold_when_the_activation_is_a_model_input(
    out_scale, bias_scale, version, rule
):
    # The activation is not a constant, so validation cannot read it; the scale rules
    # (and the HAL 1.2 requirement FullyConnected.cpp's validate derives from them)
    # do not depend on it and still apply.
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, [[1, 2]], scale=1.0),
        tensor(T.TENSOR_QUANT8_ASYMM, [[1, 2]], scale=1.0, const=True),
        tensor(T.TENSOR_INT32, [0], scale=bias_scale, const=True),
        scalar(T.INT32, 0, as_input=True),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 1), scale=out_scale)]
    assert rule in _rejected(lambda: run_op(O.FULLY_CONNECTED, ins, outs, version=version))


@pytest.mark.parametrize(
    "relative_error, valid",
    [(0.0, True), (5e-7, True), (-5e-7, True), (5e-6, False), (-5e-6, False)],
)
def test_bias_scale_must_equal_the_product_within_one_millionth(relative_error, valid):
    # Android: |inputScale * weightsScale - biasScale| <= 1e-6 * min(both).
    bias_scale = 0.125 * (1 + relative_error)  # 0.5 * 0.25 = 0.125
    ins = [
        tensor(T.TENSOR_QUANT8_ASYMM, [[1, 2]], scale=0.5),
        tensor(T.TENSOR_QUANT8_ASYMM, [[1, 2]], scale=0.25, const=True),
        tensor(T.TENSOR_INT32, [0], scale=bias_scale, const=True),
        scalar(T.INT32, 0),
    ]
    outs = [output(T.TENSOR_QUANT8_ASYMM, (1, 1), scale=1.0)]
    if valid:
        run_op(O.FULLY_CONNECTED, ins, outs)
    else:
        assert "bias" in _rejected(lambda: run_op(O.FULLY_CONNECTED, ins, outs))


def test_activation_given_at_run_time_is_checked():
    ins = [
        tensor(T.TENSOR_FLOAT32, [[1, 2]]),
        tensor(T.TENSOR_FLOAT32, [[1, 2]], const=True),
        tensor(T.TENSOR_FLOAT32, [0], const=True),
        scalar(T.INT32, 4, as_input=True),
    ]
    with pytest.raises(HalError) as e:
        run_op(O.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, (1, 1))])
    assert "fused activation" in e.value.message


@pytest.mark.parametrize(
    "bias_len, valid",
    [(2, True), (3, False)],
)
def test_bias_length_checked_when_the_batch_size_is_unknown(bias_len, valid):
    # FullyConnected.cpp's validate runs validateShapes whenever every rank is known:
    # bias length != num_units is rejected though the input's batch dim is unknown.
    F = T.TENSOR_FLOAT32
    ins = [
        tensor(F, np.zeros((1, 3)), declared_dims=(0, 3)),
        tensor(F, np.zeros((2, 3)), const=True),
        tensor(F, np.zeros(bias_len), const=True),
        scalar(T.INT32, 0),
    ]
    outs = [output(F, (0, 2))]
    if valid:
        (y,) = run_op(O.FULLY_CONNECTED, ins, outs)
        assert y.shape == (1, 2)
    else:
        assert "bias" in _rejected(lambda: run_op(O.FULLY_CONNECTED, ins, outs))


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android 11's validate leaves to prepare(), at execution
# ---------------------------------------------------------------------------------------


V10, V13 = HalVersion.V1_0, HalVersion.V1_3


def _fc_model(x=(1, 2), w=(2, 2), b=(2,), act=0, x_dims=None, b_dims=None, quant=None):
    """A one-operation FULLY_CONNECTED model (``*_dims``: declared dims of a model input
    instead of a constant). ``quant``: (bias scale, output scale) with quant8 operands of
    scale 1.0."""
    F = T.TENSOR_FLOAT32
    t, s, bt, bs, os_ = F, 0.0, F, 0.0, 0.0
    if quant is not None:
        t, s, bt = T.TENSOR_QUANT8_ASYMM, 1.0, T.TENSOR_INT32
        bs, os_ = quant
    ins = [
        tensor(t, np.zeros(x), scale=s, declared_dims=x_dims),
        tensor(t, np.zeros(w), scale=s, const=True),
        tensor(bt, np.zeros(b), scale=bs, const=b_dims is None, declared_dims=b_dims),
        scalar(T.INT32, act),
    ]
    model, _ = single_op_model(O.FULLY_CONNECTED, ins, [output(t, (1, 2), scale=os_)])
    return model


@pytest.mark.parametrize(
    "model, version, deferrable, match",
    [
        # The fused activation: only the kernel checks it.
        (_fc_model(act=9), V13, True, "fused activation"),
        # validateShapes runs in validate only when every rank is known (strict), else in
        # prepare() (deferrable).
        (_fc_model(x=(1, 1, 1, 1, 2)), V13, False, "input 0 must have rank 2..4"),
        (_fc_model(x=(1, 1, 1, 1, 2), b_dims=()), V13, True, "input 0 must have rank 2..4"),
        (_fc_model(b=(3,)), V13, False, "bias\\) has 3 elements"),
        (_fc_model(b=(3,), x_dims=(0, 2)), V13, False, "bias\\) has 3 elements"),
        (_fc_model(b=(3,), x_dims=()), V13, True, "bias\\) has 3 elements"),
        (_fc_model(x=(1, 5)), V13, False, "not a multiple"),
        # ...and skips the element count when it gives a zero batch size.
        (_fc_model(x=(1, 1)), V13, True, "not a multiple"),
        # The bias scale: checked by the kernel, unless the model's HAL version lacks the
        # relaxed output scale rule it relies on (validateHalVersion rejects that).
        (_fc_model(quant=(0.5, 2.0)), V13, True, "bias\\) scale"),
        (_fc_model(quant=(0.5, 1.0)), V10, False, "FULLY_CONNECTED needs HAL 1.2"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(model, version, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match, version=version)
