"""Kernel tests for O.RNN, O.UNIDIRECTIONAL_SEQUENCE_RNN, O.BIDIRECTIONAL_SEQUENCE_RNN and
O.SVDF against the float64 references in examples_rnn.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from driver.hal.types import HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import (
    ScalarArg,
    assert_rejected,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
)
from driver.validation import validate_model
from tests.operations.examples_lstm import FP16_TOL, grid_values
from tests.operations.examples_rnn import (
    bi_rnn_inputs,
    reference_rnn_sequence,
    reference_rnn_step,
    reference_svdf,
    rnn_inputs,
    rnn_weights,
    svdf_inputs,
    uni_rnn_inputs,
)

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16


def _rejects(op, inputs, outputs, match, version=HalVersion.V1_3):
    model, _ = single_op_model(op, inputs, outputs)
    with pytest.raises(HalError, match=match) as e:
        validate_model(model, version)
    assert e.value.status.name == "INVALID_ARGUMENT"


def _seq(seed, n_time, n_batch, n_input):
    return grid_values(np.random.default_rng(seed), (n_time, n_batch, n_input))


# ---------------------------------------------------------------------------------------
# RNN
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("activation", [0, 1, 2, 3])
def test_rnn_matches_reference(activation):
    w, r, b = rnn_weights(activation, 3, 4)
    rng = np.random.default_rng(activation)
    x, h = grid_values(rng, (2, 3), -2, 2), grid_values(rng, (2, 4), -2, 2)
    state, out = run_op(
        O.RNN, rnn_inputs(w, r, b, x, h, activation), [output(F32, (2, 4)), output(F32, (2, 4))]
    )
    np.testing.assert_allclose(out, reference_rnn_step(w, r, b, x, h, activation), atol=1e-5)
    np.testing.assert_array_equal(state, out)


def test_relu6_maps_nan_to_zero():
    """Android's ActivationFunctor (RNN.cpp) and tflite's ApplyActivationToVector (SVDF.cpp)
    compute relu6 as ``std::max(0.f, std::min(a, 6.f))``, which turns NaN into 0. By hand:
    RNN with W = [[1], [2]], R = 0, b = [0, 1]: x = NaN gives [NaN, NaN] -> [0, 0];
    x = 2.5 gives [2.5, 6] -> [2.5, 6]."""
    w, r, b = np.array([[1.0], [2.0]]), np.zeros((2, 2)), np.array([0.0, 1.0])
    x, h = np.array([[np.nan], [2.5]]), np.zeros((2, 2))
    for tt in (F32, F16):
        h_out, y = run_op(O.RNN, rnn_inputs(w, r, b, x, h, 3, tt=tt), [output(tt, (2, 2))] * 2)
        assert h_out.tolist() == [[0.0, 0.0], [2.5, 6.0]] and y.tolist() == h_out.tolist()
        # SVDF, one filter, memory 2, rank 1: state [0, NaN] . [1, 1] = NaN -> relu6 -> 0.
        one = np.array([[1.0]])
        state, out = run_op(
            O.SVDF,
            svdf_inputs(x[:1], one, np.array([[1.0, 1.0]]), None, np.zeros((1, 2)), 1, 3, tt=tt),
            [output(tt, (1, 2)), output(tt, (1, 1))],
        )
        assert out.tolist() == [[0.0]]
        assert np.isnan(state[0, 0]) and state[0, 1] == 0  # shifted: NaN, then the new 0


def test_rnn_float16_within_relaxed_tolerance_and_versions():
    w, r, b = rnn_weights(9, 3, 4)
    rng = np.random.default_rng(9)
    x, h = grid_values(rng, (2, 3)), grid_values(rng, (2, 4))
    a = run_op(O.RNN, rnn_inputs(w, r, b, x, h), [output(F32, (2, 4))] * 2)[1]
    b16 = run_op(O.RNN, rnn_inputs(w, r, b, x, h, tt=F16), [output(F16, (2, 4))] * 2)[1]
    assert b16.dtype == np.float16
    np.testing.assert_allclose(b16.astype(np.float32), a, atol=FP16_TOL, rtol=FP16_TOL)
    m32, _ = single_op_model(O.RNN, rnn_inputs(w, r, b, x, h), [output(F32, (2, 4))] * 2)
    m16, _ = single_op_model(O.RNN, rnn_inputs(w, r, b, x, h, tt=F16), [output(F16, (2, 4))] * 2)
    assert validate_model(m32, HalVersion.V1_0) == HalVersion.V1_0
    assert validate_model(m16) == HalVersion.V1_2


def test_rnn_rejections():
    w, r, b = rnn_weights(1, 3, 4)
    x, h = np.zeros((2, 3)), np.zeros((2, 4))
    outs = [output(F32, (2, 4))] * 2
    _rejects(O.RNN, rnn_inputs(w, r, b, x, h, 4), outs, "FuseCode")  # tanh is not a FuseCode
    _rejects(O.RNN, rnn_inputs(w, r[:, :3], b, x, h), outs, "recurrent weights")
    _rejects(O.RNN, rnn_inputs(w, r, b, x, np.zeros((3, 4))), outs, "hidden state")
    _rejects(O.RNN, rnn_inputs(w, r, b, np.zeros((2, 5)), h), outs, "columns")


def test_rnn_steps_chained_through_the_state_equal_the_sequence_op():
    w, r, b = rnn_weights(3, 2, 3)
    xs = _seq(3, 4, 2, 2)
    h0 = grid_values(np.random.default_rng(30), (2, 3))
    h, steps = h0, []
    for t in range(4):
        h, y = run_op(O.RNN, rnn_inputs(w, r, b, xs[t], h), [output(F32, (2, 3))] * 2)
        steps.append(y)
    seq, h_seq = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
        uni_rnn_inputs(w, r, b, xs, h0),
        [output(F32, (4, 2, 3)), output(F32, (2, 3))],
    )
    np.testing.assert_allclose(seq, np.stack(steps), atol=1e-6)
    np.testing.assert_allclose(h_seq, h, atol=1e-6)


# ---------------------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
@pytest.mark.parametrize("tt", [F32, F16], ids=["float32", "float16"])
def test_unidirectional_rnn_matches_reference(time_major, tt):
    w, r, b = rnn_weights(4, 3, 4)
    xs = _seq(4, 5, 2, 3)
    h0 = grid_values(np.random.default_rng(40), (2, 4))
    ref, ref_h = reference_rnn_sequence(w, r, b, xs, h0, 2)
    given = xs if time_major else xs.transpose(1, 0, 2)
    lead = (5, 2) if time_major else (2, 5)
    out, h = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
        uni_rnn_inputs(w, r, b, given, h0, 2, time_major=time_major, tt=tt),
        [output(tt, (*lead, 4)), output(tt, (2, 4))],
    )
    tol = 1e-5 if tt == F32 else FP16_TOL
    want = ref if time_major else ref.transpose(1, 0, 2)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=tol, rtol=tol)
    np.testing.assert_allclose(h.astype(np.float64), ref_h, atol=tol, rtol=tol)


def test_float16_sequence_keeps_a_float16_hidden_state_between_steps():
    # One unit, bias -1, no activation. Step 1: -1 + (1 + 2**-9) * (2 + 2**-9) =
    # 1 + 3 * 2**-9 + 2**-18, stored as float16 1 + 3 * 2**-9 (Android's hidden state
    # buffer is float16). Step 2 (input 0): -1 + that state = 3 * 2**-9 exactly; a float32
    # state would carry the 2**-18 on, which float16 represents at that magnitude.
    w, r, b = np.array([[2 + 2**-9]]), np.array([[1.0]]), np.array([-1.0])
    xs = np.array([1 + 2**-9, 0.0]).reshape(2, 1, 1)
    out, h = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
        uni_rnn_inputs(w, r, b, xs, np.zeros((1, 1)), 0, tt=F16),
        [output(F16, (2, 1, 1)), output(F16, (1, 1))],
    )
    np.testing.assert_array_equal(out.ravel(), np.array([1 + 3 * 2**-9, 3 * 2**-9], np.float16))
    assert h[0, 0] == np.float16(3 * 2**-9)


def test_unidirectional_rnn_split_sequence_and_versions():
    w, r, b = rnn_weights(5, 2, 3)
    xs = _seq(5, 5, 1, 2)
    h0 = np.zeros((1, 3))
    whole = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_RNN, uni_rnn_inputs(w, r, b, xs, h0), [output(F32, (5, 1, 3))]
    )[0]
    first, h = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
        uni_rnn_inputs(w, r, b, xs[:2], h0),
        [output(F32, (2, 1, 3)), output(F32, (1, 3))],
    )
    second = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_RNN, uni_rnn_inputs(w, r, b, xs[2:], h), [output(F32, (3, 1, 3))]
    )[0]
    np.testing.assert_array_equal(np.concatenate([first, second]), whole)
    one, _ = single_op_model(
        O.UNIDIRECTIONAL_SEQUENCE_RNN, uni_rnn_inputs(w, r, b, xs, h0), [output(F32, (5, 1, 3))]
    )
    two, _ = single_op_model(
        O.UNIDIRECTIONAL_SEQUENCE_RNN,
        uni_rnn_inputs(w, r, b, xs, h0),
        [output(F32, (5, 1, 3)), output(F32, (1, 3))],
    )
    assert validate_model(one, HalVersion.V1_2) == HalVersion.V1_2
    assert validate_model(two) == HalVersion.V1_3
    bad = uni_rnn_inputs(w, r, b, xs, h0)
    bad[6] = scalar(T.INT32, 2)
    _rejects(O.UNIDIRECTIONAL_SEQUENCE_RNN, bad, [output(F32, (5, 1, 3))], "time major")


# ---------------------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------------------


def _bi(seed, n_input=3, fw_units=4, bw_units=2):
    fw, bw = rnn_weights(seed, n_input, fw_units), rnn_weights(seed + 1, n_input, bw_units)
    rng = np.random.default_rng(seed)
    return fw, bw, grid_values(rng, (2, fw_units)), grid_values(rng, (2, bw_units))


@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
def test_bidirectional_rnn_merged_unmerged_and_states(time_major):
    fw, bw, hf, hb = _bi(6)
    xs = _seq(6, 4, 2, 3)
    fw_ref, fw_h = reference_rnn_sequence(*fw, xs, hf)
    bw_ref, bw_h = reference_rnn_sequence(*bw, xs, hb, reverse=True)
    given = xs if time_major else xs.transpose(1, 0, 2)
    lay = (lambda a: a) if time_major else (lambda a: a.transpose(1, 0, 2))
    lead = (4, 2) if time_major else (2, 4)
    outs = run_op(
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        bi_rnn_inputs(fw, bw, given, hf, hb, time_major=time_major),
        [
            output(F32, (*lead, 4)),
            output(F32, (*lead, 2)),
            output(F32, (2, 4)),
            output(F32, (2, 2)),
        ],
    )
    for got, want in zip(outs, [lay(fw_ref), lay(bw_ref), fw_h, bw_h]):
        np.testing.assert_allclose(got, want, atol=1e-5)
    merged, mfh, mbh = run_op(
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        bi_rnn_inputs(fw, bw, given, hf, hb, merge=True, time_major=time_major),
        [output(F32, (*lead, 6)), output(F32, (2, 4)), output(F32, (2, 2))],
    )
    np.testing.assert_array_equal(merged, np.concatenate(outs[:2], axis=2))
    np.testing.assert_array_equal(mfh, outs[2])
    np.testing.assert_array_equal(mbh, outs[3])


def test_bidirectional_rnn_cross_linking():
    fw, bw, hf, hb = _bi(7)
    xs, aux = _seq(7, 3, 2, 3), _seq(70, 3, 2, 5)  # the auxiliary input has its own size
    rng = np.random.default_rng(7)
    aw = (grid_values(rng, (4, 5)), grid_values(rng, (2, 5)))
    fw_out, bw_out = run_op(
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        bi_rnn_inputs(fw, bw, xs, hf, hb, aux=aux, aux_w=aw),
        [output(F32, (3, 2, 4)), output(F32, (3, 2, 2))],
    )
    np.testing.assert_allclose(
        fw_out, reference_rnn_sequence(*fw, xs, hf, aux=aux, w_aux=aw[0])[0], atol=1e-5
    )
    np.testing.assert_allclose(
        bw_out,
        reference_rnn_sequence(*bw, xs, hb, reverse=True, aux=aux, w_aux=aw[1])[0],
        atol=1e-5,
    )


def test_bidirectional_rnn_parallel_linking_is_hal_1_3():
    fw = rnn_weights(8, 3, 4)
    bw = rnn_weights(9, 5, 2)  # the backward cell reads the 5-wide auxiliary input
    rng = np.random.default_rng(8)
    hf, hb = grid_values(rng, (2, 4)), grid_values(rng, (2, 2))
    xs, aux = _seq(8, 3, 2, 3), _seq(80, 3, 2, 5)
    ins = bi_rnn_inputs(fw, bw, xs, hf, hb, aux=aux)
    outs = [output(F32, (3, 2, 4)), output(F32, (3, 2, 2))]
    fw_out, bw_out = run_op(O.BIDIRECTIONAL_SEQUENCE_RNN, ins, outs)
    np.testing.assert_allclose(fw_out, reference_rnn_sequence(*fw, xs, hf)[0], atol=1e-5)
    np.testing.assert_allclose(
        bw_out, reference_rnn_sequence(*bw, aux, hb, reverse=True)[0], atol=1e-5
    )
    model, _ = single_op_model(O.BIDIRECTIONAL_SEQUENCE_RNN, ins, outs)
    assert validate_model(model) == HalVersion.V1_3
    with pytest.raises(HalError, match=r"1\.3"):
        validate_model(model, HalVersion.V1_2)
    # Still 1.3 when the hook stops early at a parameter only the request gives (the
    # model fuzz target found it reported 1.2, a version that rejects the model).
    unknown = [replace(a, as_input=True) if isinstance(a, ScalarArg) else a for a in ins]
    model, _ = single_op_model(O.BIDIRECTIONAL_SEQUENCE_RNN, unknown, outs)
    assert validate_model(model) == HalVersion.V1_3


def test_bidirectional_rnn_rejections_and_float16():
    fw, bw, hf, hb = _bi(10)
    xs = _seq(10, 3, 2, 3)
    two = [output(F32, (3, 2, 4)), output(F32, (3, 2, 2))]
    _rejects(
        O.BIDIRECTIONAL_SEQUENCE_RNN, bi_rnn_inputs(fw, bw, xs, hf, hb, merge=True), two, "merge"
    )
    # Auxiliary weights without the auxiliary input.
    aw = (np.zeros((4, 3)), np.zeros((2, 3)))
    _rejects(
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        bi_rnn_inputs(fw, bw, xs, hf, hb, aux_w=aw),
        two,
        "auxiliary",
    )
    a = run_op(O.BIDIRECTIONAL_SEQUENCE_RNN, bi_rnn_inputs(fw, bw, xs, hf, hb), two)
    b = run_op(
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        bi_rnn_inputs(fw, bw, xs, hf, hb, tt=F16),
        [output(F16, (3, 2, 4)), output(F16, (3, 2, 2))],
    )
    for x32, x16 in zip(a, b):
        np.testing.assert_allclose(x16.astype(np.float32), x32, atol=FP16_TOL, rtol=FP16_TOL)


# ---------------------------------------------------------------------------------------
# SVDF
# ---------------------------------------------------------------------------------------


def _svdf_case(seed, n_input=3, rank=2, units=3, memory=4):
    rng = np.random.default_rng(seed)
    n_filters = rank * units
    return (
        grid_values(rng, (n_filters, n_input)),
        grid_values(rng, (n_filters, memory)),
        grid_values(rng, (units,)),
    )


@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("activation", [0, 1, 3])
def test_svdf_over_a_sequence_is_the_time_convolution(rank, with_bias, activation):
    """Steps chained through the state output equal the convolution view."""
    wf, wt, bias = _svdf_case(rank * 10 + activation, rank=rank)
    bias = bias if with_bias else None
    xs = _seq(rank, 6, 2, 3)
    memory, n_filters = wt.shape[1], wf.shape[0]
    state = np.zeros((2, memory * n_filters))
    outs = []
    for t in range(6):
        state, y = run_op(
            O.SVDF,
            svdf_inputs(xs[t], wf, wt, bias, state, rank, activation),
            [output(F32, (2, memory * n_filters)), output(F32, (2, n_filters // rank))],
        )
        outs.append(y)
        # The state's newest column is cleared for the next activation.
        assert (state.reshape(2, n_filters, memory)[:, :, -1] == 0).all()
    ref = reference_svdf(xs, wf, wt, bias, rank, activation)
    np.testing.assert_allclose(np.stack(outs), ref, atol=1e-5)


def test_svdf_initial_state_and_ignored_last_column():
    wf, wt, bias = _svdf_case(20)
    x = _seq(20, 1, 2, 3)
    past = grid_values(np.random.default_rng(21), (2, 6, 3))  # memory - 1 past activations
    state = np.concatenate([past, np.zeros((2, 6, 1))], axis=2).reshape(2, 24)
    outs = [output(F32, (2, 24)), output(F32, (2, 3))]
    new_state, y = run_op(O.SVDF, svdf_inputs(x[0], wf, wt, bias, state, 2), outs)
    np.testing.assert_allclose(y, reference_svdf(x, wf, wt, bias, 2, 0, past)[0], atol=1e-5)
    expect = np.concatenate([past[:, :, 1:], (x[0] @ wf.T)[:, :, None], np.zeros((2, 6, 1))], 2)
    np.testing.assert_allclose(new_state, expect.reshape(2, 24), atol=1e-6)
    # The state's last column is overwritten before use: its input value is irrelevant.
    noisy = state.copy().reshape(2, 6, 4)
    noisy[:, :, -1] = 9.0
    _, y2 = run_op(O.SVDF, svdf_inputs(x[0], wf, wt, bias, noisy.reshape(2, 24), 2), outs)
    np.testing.assert_array_equal(y2, y)


def test_svdf_float16_versions_and_rejections():
    wf, wt, bias = _svdf_case(30)
    x = _seq(30, 1, 2, 3)[0]
    state = grid_values(np.random.default_rng(31), (2, 24))
    outs = [output(F32, (2, 24)), output(F32, (2, 3))]
    a = run_op(O.SVDF, svdf_inputs(x, wf, wt, bias, state, 2), outs)
    b = run_op(
        O.SVDF,
        svdf_inputs(x, wf, wt, bias, state, 2, tt=F16),
        [output(F16, (2, 24)), output(F16, (2, 3))],
    )
    for x32, x16 in zip(a, b):
        np.testing.assert_allclose(x16.astype(np.float32), x32, atol=FP16_TOL, rtol=FP16_TOL)
    m, _ = single_op_model(O.SVDF, svdf_inputs(x, wf, wt, bias, state, 2), outs)
    assert validate_model(m, HalVersion.V1_0) == HalVersion.V1_0
    _rejects(O.SVDF, svdf_inputs(x, wf, wt, bias, state, 4), outs, "multiple of rank")
    _rejects(O.SVDF, svdf_inputs(x, wf, wt, bias, state, 0), outs, "rank")
    _rejects(O.SVDF, svdf_inputs(x, wf, wt, bias, state[:, :20], 2), outs, "state")
    _rejects(O.SVDF, svdf_inputs(x, wf, wt, bias, state, 2, 6), outs, "FuseCode")
    ins = svdf_inputs(x, wf, wt, bias, state, 2)
    ins[3] = tensor(F32, np.zeros(4), const=True)
    _rejects(O.SVDF, ins, outs, "bias")


# ---------------------------------------------------------------------------------------
# What Android 11's validation leaves to execution (HalError.deferrable)
# ---------------------------------------------------------------------------------------


def _rnn(*, x=(2, 3), h=(2, 4), r_cols=4, activation=1, tt=F32):
    w, r, b = rnn_weights(1, 3, 4)
    ins = rnn_inputs(w, r[:, :r_cols], b, np.zeros(x), np.zeros(h), activation, tt=tt)
    return O.RNN, ins, [output(tt, (2, 4))] * 2


def _uni_rnn(*, xs=(5, 1, 2), time_major=1, states=False):
    w, r, b = rnn_weights(5, 2, 3)
    ins = uni_rnn_inputs(w, r, b, np.zeros(xs), np.zeros((1, 3)))
    ins[6] = scalar(T.INT32, time_major)
    outs = [output(F32, (5, 1, 3))] + ([output(F32, (1, 3))] if states else [])
    return O.UNIDIRECTIONAL_SEQUENCE_RNN, ins, outs


def _bi_rnn(*, merge=False, aux=None, aux_w=None):
    fw, bw, hf, hb = _bi(10)
    xs = _seq(10, 3, 2, 3)
    ins = bi_rnn_inputs(fw, bw, xs, hf, hb, merge=merge, aux_w=aux_w)
    if aux is not None:  # a constant: a model input may still be omitted by the request
        ins[9] = tensor(F32, np.zeros(aux), const=True)
    return O.BIDIRECTIONAL_SEQUENCE_RNN, ins, [output(F32, (3, 2, 4)), output(F32, (3, 2, 2))]


def _svdf(*, rank=2, activation=0, state_cols=24, bias=None):
    wf, wt, b = _svdf_case(30)
    ins = svdf_inputs(np.zeros((2, 3)), wf, wt, b, np.zeros((2, state_cols)), rank, activation)
    if bias is not None:
        ins[3] = tensor(F32, np.zeros(bias), const=True)
    return O.SVDF, ins, [output(F32, (2, 24)), output(F32, (2, 3))]


@pytest.mark.parametrize(
    "build, version, deferrable, match",
    [
        # RNN and SVDF: Utils.cpp validateOperation checks counts, types and versions;
        # RNN::Prepare and SVDF::Prepare check shapes and values (execution).
        (lambda: _rnn(activation=4), None, True, "FuseCode"),
        (lambda: _rnn(r_cols=3), None, True, "recurrent weights"),
        (lambda: _rnn(h=(3, 4)), None, True, "hidden state"),
        (lambda: _rnn(x=(2, 5)), None, True, "columns"),
        (lambda: _rnn(x=(1, 2, 3)), None, True, "rank 2"),
        (lambda: _svdf(rank=0), None, True, "rank\\) must be positive"),
        (lambda: _svdf(rank=4), None, True, "multiple of rank"),
        (lambda: _svdf(state_cols=20), None, True, "state"),
        (lambda: _svdf(activation=6), None, True, "FuseCode"),
        (lambda: _svdf(bias=(4,)), None, True, "bias"),
        # The sequence RNNs' validate() checks counts, types and versions; prepare() the rest.
        (lambda: _uni_rnn(time_major=2), None, True, "time major"),
        (lambda: _uni_rnn(xs=(5, 2)), None, True, "rank 3"),
        # BIDIRECTIONAL_SEQUENCE_RNN validate(): "Exact number is dependent on the
        # mergeOutputs parameter and checked during preparation".
        (lambda: _bi_rnn(merge=True), None, True, "merge_outputs"),
        (
            lambda: _bi_rnn(aux_w=(np.zeros((4, 3)), np.zeros((2, 3)))),
            None,
            True,
            "auxiliary input \\(9\\)",
        ),
        (lambda: _bi_rnn(aux=(3, 3, 3)), None, True, "first two"),
        (
            lambda: _bi_rnn(aux=(3, 2, 5), aux_w=(np.zeros((4, 3)), np.zeros((2, 3)))),
            None,
            True,
            "forward auxiliary weights",
        ),
        # Strict: operand types, counts and HAL versions are Android's validation.
        (lambda: _rnn(tt=F16), HalVersion.V1_1, False, "1\\.2"),
        (lambda: _uni_rnn(states=True), HalVersion.V1_2, False, "1\\.3"),
        # Parallel linking (the auxiliary input without auxiliary weights) is HAL 1.3: the
        # version rule comes before the hook's deferrable rejections.
        (lambda: _bi_rnn(merge=True, aux=(3, 2, 3)), HalVersion.V1_2, False, "needs HAL 1\\.3"),
        (lambda: _bi_rnn(merge=True, aux=(3, 2, 3)), None, True, "merge_outputs"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(build, version, deferrable, match):
    op, ins, outs = build()
    model, _ = single_op_model(op, ins, outs)
    assert_rejected(model, deferrable=deferrable, match=match, version=version or HalVersion.V1_3)
