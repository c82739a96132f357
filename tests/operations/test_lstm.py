"""Kernel tests for the LSTM family: O.LSTM, O.UNIDIRECTIONAL_SEQUENCE_LSTM,
O.BIDIRECTIONAL_SEQUENCE_LSTM, O.QUANTIZED_16BIT_LSTM and O.QUANTIZED_LSTM.

Float expectations come from the float64 transcription of the LSTM equations in
examples_lstm.py; quantized ones from the real-valued cell the quantized operands encode
(within a few fixed-point LSBs), plus exact checks of the gemmlowp fixed-point primitives
against a scalar, integer-only port written here.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from driver.builder import ModelBuilder
from driver.executor import Executor
from driver.hal.types import HalError, HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations import lstm as lstm_ops
from driver.operations.lstm import checked_log2
from driver.operations.quant import FX16
from driver.testing import (
    OmittedArg,
    ScalarArg,
    assert_rejected,
    omitted,
    output,
    run_op,
    scalar,
    single_op_model,
    tensor,
    traced_peak,
)
from driver.validation import validate_model
from tests.operations.examples_lstm import (
    FP16_TOL,
    GATES,
    Q16_WEIGHT_ZP,
    QlstmCase,
    bi_lstm_inputs,
    grid_values,
    lstm_inputs,
    lstm_outputs,
    make_cell,
    make_qlstm_case,
    q16_case,
    q16_inputs,
    q16_outputs,
    q16_reference,
    qlstm_outputs,
    quantize,
    reference_lstm_sequence,
    reference_lstm_step,
    uni_lstm_inputs,
)

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
V = HalVersion
FEATURES = list(itertools.product([False, True], repeat=4))  # cifg, peephole, projection, LN


def _ids(f):
    names = ("cifg", "peephole", "projection", "layer_norm")
    return "+".join(n for n, on in zip(names, f) if on) or "plain"


def _cell(
    seed=0,
    n_input=3,
    n_cell=4,
    *,
    cifg=False,
    peephole=False,
    projection=False,
    layer_norm=False,
    projection_bias=None,
    n_aux=None,
):
    rng = np.random.default_rng(seed)
    return make_cell(
        rng,
        n_input,
        n_cell,
        3 if projection else n_cell,
        cifg=cifg,
        peephole=peephole,
        projection=projection,
        projection_bias=projection if projection_bias is None else projection_bias,
        layer_norm=layer_norm,
        n_aux=n_aux,
    )


def _state(seed, n_batch, w):
    rng = np.random.default_rng(seed + 100)
    return (
        grid_values(rng, (n_batch, w.n_input)),
        grid_values(rng, (n_batch, w.n_output)),
        grid_values(rng, (n_batch, w.n_cell)),
    )


def _rejects(op, inputs, outputs, match, *, version=HalVersion.V1_3):
    model, _ = single_op_model(op, inputs, outputs)
    with pytest.raises(HalError, match=match) as e:
        validate_model(model, version)
    assert e.value.status.name == "INVALID_ARGUMENT"


# ---------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("features", FEATURES, ids=_ids)
def test_lstm_matches_float64_reference(features):
    cifg, peephole, projection, layer_norm = features
    w = _cell(1, cifg=cifg, peephole=peephole, projection=projection, layer_norm=layer_norm)
    x, h, c = _state(1, 2, w)
    scratch, h_out, c_out, y = run_op(O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 2))
    ref_y, ref_c = reference_lstm_step(w, x, h, c)
    np.testing.assert_allclose(y, ref_y, atol=1e-5)
    np.testing.assert_allclose(h_out, ref_y, atol=1e-5)
    np.testing.assert_allclose(c_out, ref_c, atol=1e-5)
    # Scratch: gate-major blocks, 3 with CIFG (no input gate), else 4.
    assert scratch.shape == (2, (3 if cifg else 4) * w.n_cell)
    blocks = scratch.reshape(-1).reshape(3 if cifg else 4, 2, w.n_cell)
    np.testing.assert_allclose(blocks[-3 if cifg else 1], np.tanh(ref_c), atol=1e-5)


def test_lstm_projection_without_bias():
    w = _cell(2, projection=True, projection_bias=False)
    x, h, c = _state(2, 2, w)
    _, _, c_out, y = run_op(O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 2))
    ref_y, ref_c = reference_lstm_step(w, x, h, c)
    np.testing.assert_allclose(y, ref_y, atol=1e-5)
    np.testing.assert_allclose(c_out, ref_c, atol=1e-5)


def test_lstm_27_inputs_without_layer_norm_equal_23_inputs():
    w = _cell(3, peephole=True)
    x, h, c = _state(3, 1, w)
    short = run_op(O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 1))
    long = run_op(O.LSTM, lstm_inputs(w, x, h, c, layer_norm_inputs=True), lstm_outputs(w, 1))
    for a, b in zip(short, long):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("activation", [0, 1, 3, 4, 6])
def test_lstm_activation_functions(activation):
    w = _cell(4, peephole=True)
    x, h, c = _state(4, 2, w)
    out = run_op(O.LSTM, lstm_inputs(w, x, h, c, activation=activation), lstm_outputs(w, 2))
    ref_y, ref_c = reference_lstm_step(w, x, h, c, activation=activation)
    np.testing.assert_allclose(out[3], ref_y, atol=1e-5)
    np.testing.assert_allclose(out[2], ref_c, atol=1e-5)


def test_lstm_cell_and_projection_clipping():
    w = _cell(5, projection=True)
    for d in (w.input_weights, w.recurrent_weights):  # large pre-activations
        for g in GATES:
            d[g] = d[g] * 8
    w.projection = w.projection * 8
    x, h, c = _state(5, 2, w)
    _, _, c_free, y_free = run_op(O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 2))
    assert np.abs(c_free).max() > 0.5 and np.abs(y_free).max() > 0.3  # clipping will bite
    ins = lstm_inputs(w, x, h, c, cell_clip=0.5, proj_clip=0.3)
    _, _, c_out, y = run_op(O.LSTM, ins, lstm_outputs(w, 2))
    ref_y, ref_c = reference_lstm_step(w, x, h, c, cell_clip=0.5, proj_clip=0.3)
    assert np.abs(c_out).max() <= 0.5 and np.abs(y).max() <= 0.3
    np.testing.assert_allclose(c_out, ref_c, atol=1e-5)
    np.testing.assert_allclose(y, ref_y, atol=1e-5)


def test_lstm_relu6_activation_maps_nan_to_zero():
    """tflite's relu6 is ``std::max(0.f, std::min(a, 6.f))``: a NaN cell-gate input gives
    g = 0, so the cell and output stay finite. Worked by hand: every weight 0, gate biases
    0 except the cell gate's NaN, c = 2: i = f = o = sigmoid(0) = 0.5, g = relu6(NaN) = 0,
    c' = 0.5 * 2 + 0.5 * 0 = 1, h = 0.5 * relu6(1) = 0.5."""
    w = make_cell(np.random.default_rng(0), 1, 1)
    for d in (w.input_weights, w.recurrent_weights, w.bias):
        for g in GATES:
            d[g] = np.zeros_like(d[g])
    w.bias["cell"] = np.array([np.nan])
    x, h, c = np.array([[0.25]]), np.array([[0.5]]), np.array([[2.0]])
    for tt in (F32, F16):
        scratch, h_out, c_out, y = run_op(
            O.LSTM, lstm_inputs(w, x, h, c, activation=3, tt=tt), lstm_outputs(w, 1, tt)
        )
        assert c_out.tolist() == [[1.0]] and h_out.tolist() == [[0.5]] and y.tolist() == [[0.5]]
        # [i, relu6(c'), f, o * relu6(c')]
        assert scratch.tolist() == [[0.5, 1.0, 0.5, 0.5]]


@pytest.mark.parametrize(
    "cifg, cell, output_state, scratch",
    [
        # i = 0.5, f = 0.75, g = 0.5, o = 0.25: c' = 0.75 * 2 + 0.5 * 0.5 = 1.75,
        # h = 0.25 * 1.75 = 0.4375; blocks [i, g(c'), f, o * g(c')].
        (False, 1.75, 0.4375, [0.5, 1.75, 0.75, 0.4375]),
        # CIFG: the input gate is 1 - f = 0.25: c' = 0.75 * 2 + 0.25 * 0.5 = 1.625,
        # h = 0.25 * 1.625 = 0.40625; blocks [g(c'), 1 - f, o * g(c')].
        (True, 1.625, 0.40625, [1.625, 0.25, 0.40625]),
    ],
    ids=["plain", "cifg"],
)
def test_lstm_scratch_buffer_holds_androids_gate_blocks(cifg, cell, output_state, scratch):
    """Android's LSTM leaves [input gate, g(new cell), forget gate (1 - forget with CIFG),
    output gate * g(new cell)] in the scratch buffer. Worked by hand with every weight 0,
    activation none (g(x) = x), c = 2 and gate biases 0 (input), ln 3 (forget: 0.75),
    0.5 (cell) and -ln 3 (output: 0.25), so that every block differs."""
    w = make_cell(np.random.default_rng(0), 1, 1, cifg=cifg)
    for d in (w.input_weights, w.recurrent_weights):
        for g in GATES:
            if d[g] is not None:
                d[g] = np.zeros_like(d[g])
    w.bias.update(forget=np.array([math.log(3)]), cell=np.array([0.5]))
    w.bias["output"] = np.array([-math.log(3)])
    if not cifg:
        w.bias["input"] = np.array([0.0])
    x, h, c = np.array([[0.25]]), np.array([[0.5]]), np.array([[2.0]])
    got_scratch, h_out, c_out, y = run_op(
        O.LSTM, lstm_inputs(w, x, h, c, activation=0), lstm_outputs(w, 1)
    )
    np.testing.assert_allclose(c_out, [[cell]], atol=1e-6)
    np.testing.assert_allclose(h_out, [[output_state]], atol=1e-6)
    np.testing.assert_allclose(y, [[output_state]], atol=1e-6)
    np.testing.assert_allclose(got_scratch, [scratch], atol=1e-6)


@pytest.mark.parametrize(
    "features", [FEATURES[0], FEATURES[-1], (True, True, False, False)], ids=_ids
)
def test_lstm_float16_within_relaxed_tolerance_of_float32(features):
    cifg, peephole, projection, layer_norm = features
    w = _cell(6, cifg=cifg, peephole=peephole, projection=projection, layer_norm=layer_norm)
    x, h, c = _state(6, 2, w)
    f32 = run_op(O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 2))
    f16 = run_op(O.LSTM, lstm_inputs(w, x, h, c, tt=F16), lstm_outputs(w, 2, F16))
    for a, b in zip(f32, f16):
        assert b.dtype == np.float16
        np.testing.assert_allclose(b.astype(np.float32), a, atol=FP16_TOL, rtol=FP16_TOL)


def test_lstm_relaxed_model_computes_in_float32():
    w = _cell(7)
    x, h, c = _state(7, 1, w)
    model, feeds = single_op_model(
        O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 1), relaxed=True
    )
    validate_model(model)
    out = Executor(model).run(feeds)
    np.testing.assert_allclose(out[3], reference_lstm_step(w, x, h, c)[0], atol=1e-5)


def test_lstm_state_round_trip_reproduces_the_sequence():
    """Feeding each step's state outputs back as inputs is the sequence operation."""
    w = _cell(8, peephole=True, projection=True)
    rng = np.random.default_rng(8)
    xs = grid_values(rng, (4, 2, w.n_input))
    h0, c0 = grid_values(rng, (2, w.n_output)), grid_values(rng, (2, w.n_cell))
    h, c, ys = h0, c0, []
    for t in range(4):
        _, h, c, y = run_op(O.LSTM, lstm_inputs(w, xs[t], h, c), lstm_outputs(w, 2))
        ys.append(y)
    seq, h_seq, c_seq = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, xs, h0, c0),
        [output(F32, (4, 2, w.n_output)), output(F32, (2, w.n_output)), output(F32, (2, w.n_cell))],
    )
    np.testing.assert_allclose(seq, np.stack(ys), atol=1e-6)
    np.testing.assert_allclose(h_seq, h, atol=1e-6)
    np.testing.assert_allclose(c_seq, c, atol=1e-6)


def test_lstm_optional_weights_omitted_by_the_request():
    """CIFG weights given as model inputs but left out by the request (hasNoValue), as
    Android's CTS models do: the static pass cannot know, the run decides."""
    w = _cell(9, cifg=True, peephole=True)
    x, h, c = _state(9, 1, w)
    b = ModelBuilder()
    idx, feeds = [], []
    for k, arg in enumerate(lstm_inputs(w, x, h, c)):
        if k in (1, 5, 9, 12):  # input-gate tensors: declared inputs, fed no value
            dims = {1: (w.n_cell, w.n_input), 5: (w.n_cell, w.n_output)}.get(k, (w.n_cell,))
            idx.append(b.add_input(F32, dims))
            feeds.append(None)
        elif isinstance(arg, OmittedArg):
            idx.append(b.add_omitted(arg.type))
        elif hasattr(arg, "values"):
            idx.append(b.add_input(arg.type, arg.values.shape))
            feeds.append(arg.values)
        else:
            idx.append(b.add_scalar(arg.type, arg.value))
    outs = [b.add_output(o.type, o.dims) for o in lstm_outputs(w, 1)]
    b.add_operation(O.LSTM, idx, outs)
    model = b.build()
    validate_model(model)
    scratch, _, c_out, y = Executor(model).run(feeds)
    ref_y, ref_c = reference_lstm_step(w, x, h, c)
    assert scratch.shape == (1, 3 * w.n_cell)
    np.testing.assert_allclose(y, ref_y, atol=1e-5)
    np.testing.assert_allclose(c_out, ref_c, atol=1e-5)


def _mutated(w, x, h, c, k, new):
    ins = lstm_inputs(w, x, h, c)
    ins[k] = new
    return ins


def test_lstm_validation_rejections():
    w = _cell(10)
    x, h, c = _state(10, 1, w)
    outs = lstm_outputs(w, 1)
    n, i = w.n_cell, w.n_input
    cases = [
        (1, omitted(F32), "CIFG"),  # input-to-input omitted, recurrent-to-input given
        (9, tensor(F32, np.zeros(n), const=True), "peephole"),  # only cell-to-input
        (17, tensor(F32, np.zeros(n), const=True), "projection bias"),
        (20, scalar(T.INT32, 2), "activation"),  # relu1 is not an LSTM activation
        (20, scalar(T.INT32, 5), "activation"),
        (21, scalar(T.FLOAT32, -1.0), "cell clip"),
        (22, scalar(T.FLOAT32, float("nan")), "projection clip"),
        (2, tensor(F32, np.zeros((n, i + 1)), const=True), "input-to-forget"),
        (13, tensor(F32, np.zeros(n + 1), const=True), "forget gate bias"),
        (18, tensor(F32, np.zeros((2, n))), "output state"),
        (19, tensor(F32, np.zeros((1, n + 1))), "cell state"),
    ]
    for k, new, match in cases:
        _rejects(O.LSTM, _mutated(w, x, h, c, k, new), outs, match)

    wc = _cell(10, cifg=True)
    ins = lstm_inputs(wc, x, h, c)
    ins[12] = tensor(F32, np.zeros(n), const=True)
    _rejects(O.LSTM, ins, lstm_outputs(wc, 1), "input gate bias.*CIFG")

    # Layer norm weights: all or none; no input-gate one with CIFG.
    wl = _cell(10, layer_norm=True)
    ins = lstm_inputs(wl, x, h, c)
    ins[24] = omitted(F32)
    _rejects(O.LSTM, ins, lstm_outputs(wl, 1), "layer norm")
    wcl = _cell(10, cifg=True, layer_norm=True)
    ins = lstm_inputs(wcl, x, h, c)
    ins[23] = tensor(F32, np.ones(n), const=True)
    _rejects(O.LSTM, ins, lstm_outputs(wcl, 1), "input layer norm.*CIFG")

    # Without projection the output size must be the number of units.
    rng = np.random.default_rng(10)
    wo = make_cell(rng, i, n, n + 1)
    xo, ho, co = _state(11, 1, wo)
    _rejects(O.LSTM, lstm_inputs(wo, xo, ho, co), lstm_outputs(wo, 1), "without projection")
    # A wrong declared scratch size (the CIFG-dependent shape) is caught statically.
    bad = lstm_outputs(w, 1)
    bad[0] = output(F32, (1, 3 * n))
    _rejects(O.LSTM, lstm_inputs(w, x, h, c), bad, "declared")


def test_lstm_hal_versions():
    w = _cell(12, layer_norm=True)
    x, h, c = _state(12, 1, w)
    wp = _cell(12)
    for ins, outs, need in (
        (lstm_inputs(wp, x, h, c), lstm_outputs(wp, 1), HalVersion.V1_0),
        (lstm_inputs(wp, x, h, c, tt=F16), lstm_outputs(wp, 1, F16), HalVersion.V1_2),
        (lstm_inputs(w, x, h, c), lstm_outputs(w, 1), HalVersion.V1_2),
    ):
        model, _ = single_op_model(O.LSTM, ins, outs)
        assert validate_model(model, need) == need
        if need > HalVersion.V1_0:
            with pytest.raises(HalError):
                validate_model(model, HalVersion(need - 1))


# ---------------------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------------------


def _uni_outputs(w, n_time, n_batch, *, time_major=True, states=False, tt=F32):
    lead = (n_time, n_batch) if time_major else (n_batch, n_time)
    outs = [output(tt, (*lead, w.n_output))]
    if states:
        outs += [output(tt, (n_batch, w.n_output)), output(tt, (n_batch, w.n_cell))]
    return outs


@pytest.mark.parametrize("features", FEATURES[::3], ids=_ids)
@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
def test_unidirectional_lstm_matches_reference(features, time_major):
    cifg, peephole, projection, layer_norm = features
    w = _cell(20, cifg=cifg, peephole=peephole, projection=projection, layer_norm=layer_norm)
    rng = np.random.default_rng(20)
    xs = grid_values(rng, (5, 2, w.n_input))
    h0, c0 = grid_values(rng, (2, w.n_output)), grid_values(rng, (2, w.n_cell))
    ref, ref_h, ref_c = reference_lstm_sequence(w, xs, h0, c0, cell_clip=0.8)
    given = xs if time_major else xs.transpose(1, 0, 2)
    out, h, c = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, given, h0, c0, time_major=time_major, cell_clip=0.8),
        _uni_outputs(w, 5, 2, time_major=time_major, states=True),
    )
    np.testing.assert_allclose(out, ref if time_major else ref.transpose(1, 0, 2), atol=1e-5)
    np.testing.assert_allclose(h, ref_h, atol=1e-5)
    np.testing.assert_allclose(c, ref_c, atol=1e-5)


def test_unidirectional_lstm_split_sequence_via_state_outputs():
    w = _cell(21, peephole=True, layer_norm=True)
    rng = np.random.default_rng(21)
    xs = grid_values(rng, (5, 1, w.n_input))
    h0, c0 = grid_values(rng, (1, w.n_output)), grid_values(rng, (1, w.n_cell))
    whole = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM, uni_lstm_inputs(w, xs, h0, c0), _uni_outputs(w, 5, 1)
    )[0]
    first, h, c = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, xs[:3], h0, c0),
        _uni_outputs(w, 3, 1, states=True),
    )
    second = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM, uni_lstm_inputs(w, xs[3:], h, c), _uni_outputs(w, 2, 1)
    )[0]
    np.testing.assert_array_equal(np.concatenate([first, second]), whole)


def test_unidirectional_lstm_float16_and_versions():
    w = _cell(22, cifg=True, projection=True)
    rng = np.random.default_rng(22)
    xs = grid_values(rng, (3, 2, w.n_input))
    h0, c0 = grid_values(rng, (2, w.n_output)), grid_values(rng, (2, w.n_cell))
    a = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM, uni_lstm_inputs(w, xs, h0, c0), _uni_outputs(w, 3, 2)
    )
    b = run_op(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, xs, h0, c0, tt=F16),
        _uni_outputs(w, 3, 2, tt=F16),
    )
    np.testing.assert_allclose(b[0].astype(np.float32), a[0], atol=FP16_TOL, rtol=FP16_TOL)
    one, _ = single_op_model(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM, uni_lstm_inputs(w, xs, h0, c0), _uni_outputs(w, 3, 2)
    )
    three, _ = single_op_model(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, xs, h0, c0),
        _uni_outputs(w, 3, 2, states=True),
    )
    assert validate_model(one, HalVersion.V1_2) == HalVersion.V1_2
    with pytest.raises(HalError):
        validate_model(three, HalVersion.V1_2)  # state outputs are 1.3
    _rejects(
        O.UNIDIRECTIONAL_SEQUENCE_LSTM,
        uni_lstm_inputs(w, xs[0], h0, c0),  # rank-2 input
        [output(F32, ())],
        "rank 3",
    )


# ---------------------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------------------


def _bi_case(seed, *, n_time=4, n_batch=2, n_aux=None, **features):
    fw = _cell(seed, n_aux=n_aux, **features)
    bw = _cell(seed + 1, n_aux=n_aux, **features)
    rng = np.random.default_rng(seed)
    xs = grid_values(rng, (n_time, n_batch, fw.n_input))
    states = (
        grid_values(rng, (n_batch, fw.n_output)),
        grid_values(rng, (n_batch, fw.n_cell)),
        grid_values(rng, (n_batch, bw.n_output)),
        grid_values(rng, (n_batch, bw.n_cell)),
    )
    return fw, bw, xs, states


def _bi_outputs(fw, bw, n_time, n_batch, *, merge, states=False, time_major=True, tt=F32):
    lead = (n_time, n_batch) if time_major else (n_batch, n_time)
    if merge:
        outs = [output(tt, (*lead, fw.n_output + bw.n_output))]
    else:
        outs = [output(tt, (*lead, fw.n_output)), output(tt, (*lead, bw.n_output))]
    if states:
        outs += [
            output(tt, (n_batch, fw.n_output)),
            output(tt, (n_batch, fw.n_cell)),
            output(tt, (n_batch, bw.n_output)),
            output(tt, (n_batch, bw.n_cell)),
        ]
    return outs


@pytest.mark.parametrize("features", [FEATURES[0], FEATURES[5], FEATURES[-1]], ids=_ids)
@pytest.mark.parametrize("time_major", [True, False], ids=["time_major", "batch_major"])
def test_bidirectional_lstm_merged_and_unmerged(features, time_major):
    cifg, peephole, projection, layer_norm = features
    fw, bw, xs, st = _bi_case(
        30, cifg=cifg, peephole=peephole, projection=projection, layer_norm=layer_norm
    )
    fw_ref, fw_h, fw_c = reference_lstm_sequence(fw, xs, st[0], st[1])
    bw_ref, bw_h, bw_c = reference_lstm_sequence(bw, xs, st[2], st[3], reverse=True)
    given = xs if time_major else xs.transpose(1, 0, 2)
    layout = (lambda a: a) if time_major else (lambda a: a.transpose(1, 0, 2))
    outs = run_op(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, given, st, time_major=time_major),
        _bi_outputs(fw, bw, 4, 2, merge=False, states=True, time_major=time_major),
    )
    for got, want in zip(outs, [layout(fw_ref), layout(bw_ref), fw_h, fw_c, bw_h, bw_c]):
        np.testing.assert_allclose(got, want, atol=1e-5)
    merged = run_op(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, given, st, merge=True, time_major=time_major),
        _bi_outputs(fw, bw, 4, 2, merge=True, time_major=time_major),
    )[0]
    np.testing.assert_array_equal(merged, np.concatenate(outs[:2], axis=2))


def test_bidirectional_lstm_cross_linked_aux_input():
    fw, bw, xs, st = _bi_case(31, n_aux=3, peephole=True)
    aux = grid_values(np.random.default_rng(310), xs.shape)  # not the input's draws
    assert not np.array_equal(aux, xs)
    fw_ref, _, _ = reference_lstm_sequence(fw, xs, st[0], st[1], aux=aux)
    bw_ref, _, _ = reference_lstm_sequence(bw, xs, st[2], st[3], aux=aux, reverse=True)
    fw_out, bw_out = run_op(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, xs, st, aux=aux),
        _bi_outputs(fw, bw, 4, 2, merge=False),
    )
    np.testing.assert_allclose(fw_out, fw_ref, atol=1e-5)
    np.testing.assert_allclose(bw_out, bw_ref, atol=1e-5)


def test_bidirectional_lstm_parallel_linked_aux_input_is_hal_1_3():
    fw, bw, xs, st = _bi_case(32)
    aux = grid_values(np.random.default_rng(320), xs.shape)  # not the input's draws
    assert not np.array_equal(aux, xs)
    ins = bi_lstm_inputs(fw, bw, xs, st, aux=aux)
    outs = _bi_outputs(fw, bw, 4, 2, merge=False)
    fw_out, bw_out = run_op(O.BIDIRECTIONAL_SEQUENCE_LSTM, ins, outs)
    # Forward reads the input; backward reads the auxiliary input, reversed.
    np.testing.assert_allclose(fw_out, reference_lstm_sequence(fw, xs, st[0], st[1])[0], atol=1e-5)
    bw_ref = reference_lstm_sequence(bw, aux, st[2], st[3], reverse=True)[0]
    np.testing.assert_allclose(bw_out, bw_ref, atol=1e-5)
    model, _ = single_op_model(O.BIDIRECTIONAL_SEQUENCE_LSTM, ins, outs)
    assert validate_model(model) == HalVersion.V1_3
    with pytest.raises(HalError, match=r"1\.3"):
        validate_model(model, HalVersion.V1_2)
    # Still 1.3 when the hook stops early at a parameter only the request gives (the
    # model fuzz target found it reported 1.2, a version that rejects the model).
    unknown = [replace(a, as_input=True) if isinstance(a, ScalarArg) else a for a in ins]
    model, _ = single_op_model(O.BIDIRECTIONAL_SEQUENCE_LSTM, unknown, outs)
    assert validate_model(model) == HalVersion.V1_3


def test_bidirectional_lstm_rejections():
    fw, bw, xs, st = _bi_case(33)
    # Output count must agree with merge_outputs.
    _rejects(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, xs, st, merge=True),
        _bi_outputs(fw, bw, 4, 2, merge=False),
        "merge_outputs",
    )
    # Both directions must use the same options (Android keeps one LSTMParams).
    fwp, _, _, _ = _bi_case(33, peephole=True)
    _rejects(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fwp, bw, xs, st),
        _bi_outputs(fwp, bw, 4, 2, merge=False),
        "same options",
    )
    # Auxiliary weights without an auxiliary input.
    fwa, bwa, _, _ = _bi_case(33, n_aux=3)
    _rejects(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fwa, bwa, xs, st),
        _bi_outputs(fwa, bwa, 4, 2, merge=False),
        "auxiliary input",
    )


def test_bidirectional_lstm_float16():
    fw, bw, xs, st = _bi_case(34, cifg=True, layer_norm=True)
    a = run_op(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, xs, st, merge=True),
        _bi_outputs(fw, bw, 4, 2, merge=True),
    )[0]
    b = run_op(
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        bi_lstm_inputs(fw, bw, xs, st, merge=True, tt=F16),
        _bi_outputs(fw, bw, 4, 2, merge=True, tt=F16),
    )[0]
    np.testing.assert_allclose(b.astype(np.float32), a, atol=FP16_TOL, rtol=FP16_TOL)


def test_checked_log2():
    assert checked_log2(2.0**-11) == (True, -11)
    assert checked_log2(1 / 2048 * 1.0001)[0]
    assert not checked_log2(1 / 2000)[0]
    assert not checked_log2(0.0)[0]


# ---------------------------------------------------------------------------------------
# QUANTIZED_16BIT_LSTM
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seed,n_batch,n_input,n_output", [(0, 1, 2, 4), (1, 3, 5, 2), (2, 2, 8, 8)]
)
def test_quantized_16bit_lstm_tracks_the_real_valued_cell(seed, n_batch, n_input, n_output):
    q = q16_case(seed, n_batch, n_input, n_output)
    cell, out = run_op(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), q16_outputs(n_batch, n_output))
    ref_cell, ref_out = q16_reference(q)
    assert cell.dtype == np.int16 and out.dtype == np.uint8
    assert np.abs(cell.astype(int) - ref_cell).max() <= 2
    assert np.abs(out.astype(int) - ref_out).max() <= 1


def test_quantized_16bit_lstm_saturates_the_cell_state():
    q = q16_case(5, 2, 3, 3)
    q["prev_cell"][:] = 32000  # ~15.6: forget * state alone nearly saturates 4 integer bits
    for g in GATES:
        q[f"b_{g}"][:] = 2**20  # every gate pushed to ~1
    cell, out = run_op(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), q16_outputs(2, 3))
    assert (cell.astype(int) >= 32000).all() and (cell <= 32767).all()
    assert (out == 128 + 127).all()  # tanh(8) ~ 1 -> 127 after the clamp


@pytest.mark.parametrize(
    "prev_cell, cell, out",
    [
        (0, 0, 128),
        (48, 24, 129),  # 0.75 rounds to 1 (a floor shift gives 0)
        (-16, -8, 128),  # -0.25 rounds to 0 (a floor shift gives -1)
        (-48, -24, 127),  # -0.75 rounds to -1
        (640, 320, 138),  # 9.92 rounds to 10
    ],
)
def test_quantized_16bit_lstm_rounds_the_output_by_hand(prev_cell, cell, out):
    """Worked by hand: every weight at its zero point and every bias 0 make each gate
    accumulator 0, so i = f = o = logistic(0) = 1/2 (16384 in Q0.15) and the modulation
    tanh(0) = 0. The new cell state (Q4.11) is prev_cell / 2; tanh reads it in Q3.12
    (twice the raw), tanh(r / 4096) ~ 8 r / 32768 for small r, so o * tanh is about
    4 * prev_cell in Q0.15 and the output is 128 + RoundingDivideByPOT(that, 8) =
    128 + round(prev_cell / 64), halves away from zero."""
    q = q16_case(0, 1, 1, 1)
    for g in GATES:
        q[f"w_{g}"][:] = Q16_WEIGHT_ZP
        q[f"r_{g}"][:] = Q16_WEIGHT_ZP
        q[f"b_{g}"][:] = 0
    q["prev_cell"] = np.array([[prev_cell]])
    got_cell, got_out = run_op(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), q16_outputs(1, 1))
    assert got_cell.tolist() == [[cell]] and got_out.tolist() == [[out]]


def test_quantized_16bit_lstm_state_round_trip():
    q = q16_case(6, 2, 3, 3)
    steps = []
    for _ in range(3):
        cell, out = run_op(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), q16_outputs(2, 3))
        ref_cell, ref_out = q16_reference(q)
        assert np.abs(cell.astype(int) - ref_cell).max() <= 2
        steps.append(out)
        q = {**q, "prev_cell": cell.astype(np.int64), "prev_output": out.astype(np.int64)}
    assert not np.array_equal(steps[0], steps[2])  # the state carries forward


def test_quantized_16bit_lstm_quantization_rules():
    q = q16_case(7, 1, 2, 2)
    outs = q16_outputs(1, 2)
    bad_input = q16_inputs(q)
    bad_input[0] = tensor(T.TENSOR_QUANT8_ASYMM, q["input"], scale=1 / 100, zero_point=128)
    _rejects(O.QUANTIZED_16BIT_LSTM, bad_input, outs, "1/128")
    bad_weights = q16_inputs(q)
    bad_weights[6] = tensor(T.TENSOR_QUANT8_ASYMM, q["r_forget"], scale=1 / 256, zero_point=127)
    _rejects(O.QUANTIZED_16BIT_LSTM, bad_weights, outs, "zero point")
    bad_bias = q16_inputs(q)
    bad_bias[10] = tensor(T.TENSOR_INT32, q["b_forget"], scale=1 / 256 / 100)
    _rejects(O.QUANTIZED_16BIT_LSTM, bad_bias, outs, "weightsScale/128")
    bad_cell = q16_inputs(q)
    bad_cell[13] = tensor(T.TENSOR_QUANT16_SYMM, q["prev_cell"], scale=1 / 1024)
    _rejects(O.QUANTIZED_16BIT_LSTM, bad_cell, outs, "2\\^-11")
    # 2^-12, with an output cell state of that scale too (the rule that output follows).
    bad_cell[13] = tensor(T.TENSOR_QUANT16_SYMM, q["prev_cell"], scale=1 / 4096)
    finer_outs = [output(T.TENSOR_QUANT16_SYMM, (1, 2), scale=1 / 4096), outs[1]]
    _rejects(O.QUANTIZED_16BIT_LSTM, bad_cell, finer_outs, "2\\^-11")
    model, _ = single_op_model(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), outs)
    assert validate_model(model) == HalVersion.V1_2
    with pytest.raises(HalError):
        validate_model(model, HalVersion.V1_1)


@pytest.mark.parametrize(
    "k, spec, match",
    [
        (0, output(T.TENSOR_QUANT16_SYMM, (1, 2), scale=1 / 1024), "output 0.*cell state"),
        (1, output(T.TENSOR_QUANT8_ASYMM, (1, 2), scale=1 / 128, zero_point=127), "output 1"),
        (1, output(T.TENSOR_QUANT8_ASYMM, (1, 2), scale=1 / 64, zero_point=128), "output 1"),
    ],
)
def test_quantized_16bit_lstm_outputs_take_the_state_quantization(k, spec, match):
    """NeuralNetworks.h fixes the outputs' quantization (cell state 2^-11, output 1/128 and
    128); Android's QuantizedLSTMCell::prepare gives them the previous cell state's and
    previous output's, and CpuExecutor fails a model output that declares another."""
    q = q16_case(7, 1, 2, 2)
    outs = q16_outputs(1, 2)
    outs[k] = spec
    _rejects(O.QUANTIZED_16BIT_LSTM, q16_inputs(q), outs, match)


# ---------------------------------------------------------------------------------------
# QUANTIZED_LSTM
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("features", FEATURES, ids=_ids)
def test_quantized_lstm_tracks_the_real_valued_cell(features):
    cifg, peephole, projection, layer_norm = features
    for seed in (0, 1):
        case = make_qlstm_case(
            seed,
            2,
            3,
            4,
            3 if projection else None,
            cifg=cifg,
            peephole=peephole,
            projection=projection,
            layer_norm=layer_norm,
        )
        out, cell, out_state = run_op(O.QUANTIZED_LSTM, case.args, qlstm_outputs(case))
        y, c = reference_lstm_step(case.float_cell, case.x, case.h, case.c)
        np.testing.assert_array_equal(out, out_state)
        assert (
            np.abs(out.astype(int) - quantize(y, case.out_scale, case.out_zp, -128, 127)).max() <= 2
        )
        # Integer layer norm and fixed-point gates: within 0.005 of the real cell state.
        assert np.abs(cell * case.cell_scale - c).max() <= 0.005


def test_quantized_lstm_clipping():
    case = make_qlstm_case(
        3, 2, 3, 4, 3, projection=True, layer_norm=False, cell_clip=0.25, proj_clip=0.05
    )
    out, cell, _ = run_op(O.QUANTIZED_LSTM, case.args, qlstm_outputs(case))
    assert np.abs(cell).max() <= math.floor(0.25 * 2048)
    # The projection clip is quantized with the projection weights' scale (1/200).
    assert np.abs(out.astype(int)).max() <= math.floor(0.05 * 200)
    free = make_qlstm_case(3, 2, 3, 4, 3, projection=True, layer_norm=False)
    out_free, cell_free, _ = run_op(O.QUANTIZED_LSTM, free.args, qlstm_outputs(free))
    assert np.abs(cell_free).max() > 0.25 * 2048 and np.abs(out_free.astype(int)).max() > 10


def test_quantized_lstm_cifg_input_gate_is_32767_minus_the_forget_gate():
    """With CIFG the input gate is tflite's Sub1Vector, 32767 - forget (not 32768 - forget:
    a fraction of a last bit, visible only in exact cell states). Both rows share one
    forget gate f (zero weights, a bias that saturates the gate's accumulator low). Row 0
    keeps a full cell (32767) and adds nothing (cell gate tanh(0) = 0): its new cell is
    round(f * 32767 / 2^15) = f. Row 1 starts empty, and a large input saturates its cell
    gate at 32767: its new cell is round((32767 - f) * 32767 / 2^15) = 32766 - f, where
    32768 - f would give 32767 - f. So the two new cells add up to 32766 exactly."""
    case = make_qlstm_case(0, 2, 1, 1, cifg=True, layer_norm=False)
    args = list(case.args)
    cell_scale = 2.0**-15  # so a cell state is the cell gates' product shifted by 15
    args[0] = tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, [[0], [127]], scale=1 / 64)
    w_scale = args[2].scale
    for k in (2, 6, 7):  # input-to-forget, recurrent-to-forget, recurrent-to-cell
        args[k] = tensor(T.TENSOR_QUANT8_SYMM, [[0]], scale=w_scale, const=True)
    args[3] = tensor(T.TENSOR_QUANT8_SYMM, [[127]], scale=w_scale, const=True)
    args[13] = tensor(T.TENSOR_INT32, [-(2**31)], scale=args[13].scale, const=True)
    args[14] = tensor(T.TENSOR_INT32, [0], scale=args[14].scale, const=True)
    args[19] = tensor(T.TENSOR_QUANT16_SYMM, [[32767], [0]], scale=cell_scale)
    args[28] = scalar(T.FLOAT32, 2.0**-20)  # the cell gate's accumulator saturates high
    case = replace(case, args=args, cell_scale=cell_scale)
    _, cell, _ = run_op(O.QUANTIZED_LSTM, case.args, qlstm_outputs(case))
    forget = int(cell[0, 0])
    assert 0 < forget < 100  # logistic(-8) in Q0.15 is about 11
    assert int(cell[1, 0]) == 32766 - forget


def _silent_qlstm(n_batch: int, **features) -> QlstmCase:
    """A QUANTIZED_LSTM case whose weights and biases are all 0, its input's zero point 0
    and its cell state scale 2^-11: every gate accumulator is 0, so the input, forget
    and output gates are logistic(0) = 16384 (1/2 in Q0.15) and the cell gate tanh(0) = 0,
    until a test gives some weight a value."""
    case = make_qlstm_case(0, n_batch, 1, 1, **features)
    args = list(case.args)
    args[0] = tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, np.zeros((n_batch, 1)), scale=1 / 64)
    for k in range(1, 9):  # input and recurrent weights
        if not isinstance(args[k], OmittedArg):
            args[k] = replace(args[k], values=np.zeros_like(args[k].values))
    for k in range(12, 16):  # gate biases
        if not isinstance(args[k], OmittedArg):
            args[k] = replace(args[k], values=np.zeros_like(args[k].values))
    return replace(case, args=args)


@pytest.mark.parametrize(
    "x, prev_cell, cell",
    [
        (0, 1, 1),  # f * c = 0.5 rounds to 1 (a floor shift gives 0)
        (0, 6, 3),
        (0, -3, -2),  # -1.5: halves away from zero
        (127, 0, 1024),  # i * g = 16384 * 32767 / 2^19 = 1023.97 rounds to 1024
        (127, 2, 1025),
    ],
)
def test_quantized_lstm_cell_update_rounds_by_hand(x, prev_cell, cell):
    """QLSTM.cpp's cell update: new cell = RoundingDivideByPOT(forget * cell, 15) +
    RoundingDivideByPOT(input_gate * cell_gate, 30 + cell_shift), cell_shift = -11.
    Worked by hand with every gate accumulator 0 (forget = input gate = 16384) except
    the cell gate's, which an input of 127 (weight 127, an intermediate scale of 2^-20)
    saturates at tanh = 32767."""
    case = _silent_qlstm(1, layer_norm=False)
    args = list(case.args)
    args[0] = tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, [[x]], scale=1 / 64)
    args[3] = replace(args[3], values=np.array([[127]]))  # input-to-cell weights
    args[19] = tensor(T.TENSOR_QUANT16_SYMM, [[prev_cell]], scale=2.0**-11)
    args[28] = scalar(T.FLOAT32, 2.0**-20)  # the cell gate's intermediate scale
    _, got, _ = run_op(O.QUANTIZED_LSTM, args, qlstm_outputs(case))
    assert got.tolist() == [[cell]]


@pytest.mark.parametrize("hidden_zp", [0, 5, -7])
@pytest.mark.parametrize("projection", [False, True], ids=["no_projection", "projection"])
def test_quantized_lstm_hidden_state_zero_point_by_hand(hidden_zp, projection):
    """tflite's CwiseMul stores the hidden state as value - hiddenStateZeroPoint and the
    projection's precomputed bias adds hiddenStateZeroPoint * row sums back. With every
    accumulator and the cell state 0 the hidden value is o * tanh(0) = 0: without
    projection the output is -hiddenStateZeroPoint; with it (weight 100, bias 0) the zero
    point cancels and the output is the output zero point, -2."""
    case = _silent_qlstm(1, projection=projection, layer_norm=False)
    args = list(case.args)
    args[19] = tensor(T.TENSOR_QUANT16_SYMM, [[0]], scale=2.0**-11)
    args[30] = scalar(T.INT32, hidden_zp)
    if projection:
        args[16] = replace(args[16], values=np.array([[100]]))
        args[17] = replace(args[17], values=np.array([0]))
    out, cell, out_state = run_op(O.QUANTIZED_LSTM, args, qlstm_outputs(case))
    expected = case.out_zp if projection else -hidden_zp
    assert cell.tolist() == [[0]]
    assert out.tolist() == out_state.tolist() == [[expected]]


def test_quantized_lstm_projection_clip_uses_the_projection_weights_scale():
    """The projection clip 0.05 quantizes with the projection weights' scale 1/200 to 10
    (not with the output's 1/128, which would give 6): the clipped output is the free
    one clamped to [-10, 10]."""
    kw = dict(projection=True, layer_norm=False)
    free = make_qlstm_case(3, 2, 3, 4, 3, **kw)
    out_free, cell_free, _ = run_op(O.QUANTIZED_LSTM, free.args, qlstm_outputs(free))
    assert np.abs(out_free.astype(int)).max() > 10
    clipped = make_qlstm_case(3, 2, 3, 4, 3, proj_clip=0.05, **kw)
    out, cell, _ = run_op(O.QUANTIZED_LSTM, clipped.args, qlstm_outputs(clipped))
    np.testing.assert_array_equal(cell, cell_free)
    np.testing.assert_array_equal(out, np.clip(out_free, -10, 10))


def test_quantized_lstm_layer_norm_variance_guard_is_one():
    """QLSTM.cpp replaces a row variance below one step by min(1, int(10000 * layer norm
    scale)), which is 1 for every scale from 1e-4 up: layer norm weights of 1.0 in scale
    2^-12 (int(2.44) = 2) or 2^-13 (int(1.22) = 1) give the same bits. Rows of gate
    accumulators [0, 0, 0, 1] (variance (1/4 - 1/16) < 1 step) need the guard; the
    layer norm itself is exact for these powers of two (weights 4096 or 8192, bias 0)."""
    results = []
    for exponent in (12, 13):
        case = make_qlstm_case(0, 2, 1, 4, layer_norm=True)
        args = list(case.args)
        args[0] = tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, [[1], [2]], scale=1 / 64)
        for k in range(1, 5):  # input weights: 13 * 0.08 (the product scale) ~ 1 a unit
            args[k] = replace(args[k], values=np.array([[0], [0], [0], [13]]))
        for k in range(5, 9):
            args[k] = replace(args[k], values=np.zeros_like(args[k].values))
        for k in range(12, 16):
            args[k] = replace(args[k], values=np.zeros_like(args[k].values))
        ln_scale = 2.0**-exponent
        for k in range(20, 24):
            args[k] = tensor(T.TENSOR_QUANT16_SYMM, [2**exponent] * 4, scale=ln_scale, const=True)
        results.append(run_op(O.QUANTIZED_LSTM, args, qlstm_outputs(case)))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_quantized_lstm_clip_quantized_to_zero_disables_clipping():
    """QLSTM.cpp quantizes the clips (cell: / cell state scale, projection: / projection
    weights scale, float, truncated to int) and clips only when the quantized value is
    > 0. Clips below one step (1e-4 < 2^-11; 1e-3 < 1/200) are therefore no clipping at
    all, and a clip of exactly one cell step bounds the cell state to +-1."""
    kw = dict(projection=True, layer_norm=False)
    free = make_qlstm_case(3, 2, 3, 4, 3, **kw)
    out_free, cell_free, _ = run_op(O.QUANTIZED_LSTM, free.args, qlstm_outputs(free))
    assert np.abs(cell_free).max() > 1 and np.abs(out_free.astype(int)).max() > 1
    tiny = make_qlstm_case(3, 2, 3, 4, 3, cell_clip=1e-4, proj_clip=1e-3, **kw)
    out, cell, _ = run_op(O.QUANTIZED_LSTM, tiny.args, qlstm_outputs(tiny))
    np.testing.assert_array_equal(cell, cell_free)
    np.testing.assert_array_equal(out, out_free)
    one_step = make_qlstm_case(3, 2, 3, 4, 3, cell_clip=2.0**-11, **kw)
    _, cell, _ = run_op(O.QUANTIZED_LSTM, one_step.args, qlstm_outputs(one_step))
    np.testing.assert_array_equal(cell, np.clip(cell_free, -1, 1))
    # 1.75 steps truncates to 1 (the integer cast), not 2.
    almost_two = make_qlstm_case(3, 2, 3, 4, 3, cell_clip=1.75 * 2.0**-11, **kw)
    _, cell, _ = run_op(O.QUANTIZED_LSTM, almost_two.args, qlstm_outputs(almost_two))
    np.testing.assert_array_equal(cell, np.clip(cell_free, -1, 1))


def test_quantized_lstm_rules():
    case = make_qlstm_case(4)
    outs = qlstm_outputs(case)
    args = list(case.args)
    args[19] = tensor(T.TENSOR_QUANT16_SYMM, np.zeros((2, 4)), scale=1 / 2000)
    _rejects(O.QUANTIZED_LSTM, args, outs, "power-of-two")
    args[19] = tensor(T.TENSOR_QUANT16_SYMM, np.zeros((2, 4)), scale=2.0**-8)
    _rejects(O.QUANTIZED_LSTM, args, outs, "2\\^-9")
    args = list(case.args)
    args[27] = scalar(T.FLOAT32, 0.0)
    _rejects(O.QUANTIZED_LSTM, args, outs, "forget intermediate scale")
    args = list(case.args)
    args[31] = scalar(T.FLOAT32, 1e-30)  # hidden multiplier 2^-30 / 1e-30: out of range
    _rejects(O.QUANTIZED_LSTM, args, outs, "hidden state effective scale")
    model, _ = single_op_model(O.QUANTIZED_LSTM, case.args, outs)
    with pytest.raises(HalError):
        validate_model(model, HalVersion.V1_2)


def _big_batch_qlstm(n_batch: int, **features) -> tuple[list, list]:
    """A QUANTIZED_LSTM case with ``n_batch`` rows of full-range random input and state."""
    case = make_qlstm_case(5, n_batch, 2, 2, 2 if features.get("projection") else None, **features)
    rng = np.random.default_rng(n_batch)
    args = list(case.args)
    for k, dtype in ((0, np.int8), (18, np.int8), (19, np.int16)):
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max + 1, args[k].values.shape).astype(dtype)
        args[k] = replace(args[k], values=values)
    return args, qlstm_outputs(case)


def _big_batch_q16(n_batch: int) -> tuple[list, list]:
    q = q16_case(8, n_batch, 2, 2)
    rng = np.random.default_rng(n_batch)
    q["input"] = rng.integers(0, 256, q["input"].shape)
    q["prev_output"] = rng.integers(0, 256, q["prev_output"].shape)
    q["prev_cell"] = rng.integers(-32768, 32768, q["prev_cell"].shape)
    return q16_inputs(q), q16_outputs(n_batch, 2)


@pytest.mark.parametrize("features", [(), ("cifg", "peephole", "projection"), ("layer_norm",)])
def test_quantized_lstm_row_blocks_give_the_one_block_result(monkeypatch, features):
    args, outs = _big_batch_qlstm(9, **dict.fromkeys(features, True))
    whole = run_op(O.QUANTIZED_LSTM, args, outs)
    monkeypatch.setattr(lstm_ops, "BATCH_BLOCK_ELEMENTS", 1)
    for got, want in zip(run_op(O.QUANTIZED_LSTM, args, outs), whole):
        np.testing.assert_array_equal(got, want)
    q_args, q_outs = _big_batch_q16(9)
    monkeypatch.undo()
    q_whole = run_op(O.QUANTIZED_16BIT_LSTM, q_args, q_outs)
    monkeypatch.setattr(lstm_ops, "BATCH_BLOCK_ELEMENTS", 1)
    for got, want in zip(run_op(O.QUANTIZED_16BIT_LSTM, q_args, q_outs), q_whole):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("function", ["logistic", "tanh"])
@pytest.mark.parametrize("integer_bits", [0, 3, 6])
def test_int16_activation_lookup_is_the_fixed_point_evaluation(function, integer_bits):
    raws = np.arange(-32768, 32768, dtype=np.int64).reshape(256, 256)
    np.testing.assert_array_equal(
        lstm_ops.int16_activation(function, raws, integer_bits),
        getattr(FX16, function)(raws, integer_bits),
    )


@pytest.mark.parametrize("op", [O.QUANTIZED_LSTM, O.QUANTIZED_16BIT_LSTM])
def test_quantized_lstm_cells_of_a_huge_batch_need_little_more_memory_than_their_io(op):
    # 256K rows of 2 units: int64 gate temporaries for the whole batch took ~25x the
    # input and output bytes; the cells now work a block of rows at a time.
    args, outs = _big_batch_qlstm(1 << 18) if op == O.QUANTIZED_LSTM else _big_batch_q16(1 << 18)
    model, feeds = single_op_model(op, args, outs)
    validate_model(model, HalVersion.V1_3)
    executor = Executor(model)
    results, peak = traced_peak(lambda: executor.run(feeds))
    io = sum(r.nbytes for r in results) + sum(np.asarray(f).nbytes for f in feeds)
    assert peak < 2 * io + (8 << 20), f"peak {peak >> 20} MB for {io >> 20} MB of io"


# ---------------------------------------------------------------------------------------
# What Android 11's validation leaves to execution (HalError.deferrable)
# ---------------------------------------------------------------------------------------


def _lstm_with(k, new, **cell):
    w = _cell(10, **cell)
    x, h, c = _state(10, 1, w)
    ins = lstm_inputs(w, x, h, c)
    if k is not None:
        ins[k] = new
    return O.LSTM, ins, lstm_outputs(w, 1)


def _lstm_no_projection_wider_output():
    w = make_cell(np.random.default_rng(10), 3, 4, 5)
    x, h, c = _state(11, 1, w)
    return O.LSTM, lstm_inputs(w, x, h, c), lstm_outputs(w, 1)


def _uni_lstm_rank2_input():
    w = _cell(22)
    rng = np.random.default_rng(22)
    xs = grid_values(rng, (3, 2, w.n_input))
    h0, c0 = grid_values(rng, (2, w.n_output)), grid_values(rng, (2, w.n_cell))
    return O.UNIDIRECTIONAL_SEQUENCE_LSTM, uni_lstm_inputs(w, xs[0], h0, c0), [output(F32, ())]


def _bi_lstm(*, merge=False, out_merge=None, fw_features=None, n_aux=None, aux=None):
    fw, bw, xs, st = _bi_case(33, n_aux=n_aux)
    if fw_features:
        fw = _bi_case(33, **fw_features)[0]
    ins = bi_lstm_inputs(fw, bw, xs, st, merge=merge)
    if aux is not None:  # a constant: a model input may still be omitted by the request
        ins[39] = tensor(F32, grid_values(np.random.default_rng(33), aux), const=True)
    merged = merge if out_merge is None else out_merge
    return O.BIDIRECTIONAL_SEQUENCE_LSTM, ins, _bi_outputs(fw, bw, 4, 2, merge=merged)


def _q16_with(k, new):
    q = q16_case(7, 1, 2, 2)
    ins = q16_inputs(q)
    ins[k] = new(q) if callable(new) else new
    return O.QUANTIZED_16BIT_LSTM, ins, q16_outputs(1, 2)


def _qlstm_with(k, new):
    case = make_qlstm_case(4)
    args = list(case.args)
    args[k] = new
    return O.QUANTIZED_LSTM, args, qlstm_outputs(case)


_Q8, _Q16 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT16_SYMM


@pytest.mark.parametrize(
    "build, version, deferrable, match",
    [
        # LSTM: Utils.cpp validateOperation checks counts, types and versions; values and
        # shapes are LSTMCell::Prepare / CheckInputTensorDimensions (execution).
        (lambda: _lstm_with(20, scalar(T.INT32, 2)), None, True, "activation"),
        (lambda: _lstm_with(21, scalar(T.FLOAT32, -1.0)), None, True, "cell clip"),
        (lambda: _lstm_with(1, omitted(F32)), None, True, "CIFG"),
        (lambda: _lstm_with(9, tensor(F32, np.zeros(4), const=True)), None, True, "peephole"),
        (lambda: _lstm_with(17, tensor(F32, np.zeros(4), const=True)), None, True, "proj.*bias"),
        (lambda: _lstm_with(2, tensor(F32, np.zeros((4, 4)))), None, True, "input-to-forget"),
        (lambda: _lstm_with(0, tensor(F32, np.zeros((1, 1, 3)))), None, True, "rank 2"),
        (lambda: _lstm_with(19, tensor(F32, np.zeros((1, 5)))), None, True, "cell state"),
        (
            lambda: _lstm_with(12, tensor(F32, np.zeros(4), const=True), cifg=True),
            None,
            True,
            "input gate bias.*CIFG",
        ),
        (lambda: _lstm_with(24, omitted(F32), layer_norm=True), None, True, "layer norm"),
        (_lstm_no_projection_wider_output, None, True, "without projection"),
        (_uni_lstm_rank2_input, None, True, "rank 3"),
        # BIDIRECTIONAL_SEQUENCE_LSTM: the output count is checked against merge_outputs,
        # and the cells against each other, only at execution.
        (lambda: _bi_lstm(merge=True, out_merge=False), None, True, "merge_outputs"),
        (lambda: _bi_lstm(fw_features=dict(peephole=True)), None, True, "same options"),
        (lambda: _bi_lstm(n_aux=3), None, True, "auxiliary input"),
        (lambda: _bi_lstm(n_aux=3, aux=(4, 2, 5)), None, True, "input size 3"),
        # QUANTIZED_16BIT_LSTM: QuantizedLSTMCell::prepare checks the quantization.
        (
            lambda: _q16_with(0, lambda q: tensor(_Q8, q["input"], scale=0.01, zero_point=128)),
            None,
            True,
            "1/128",
        ),
        (
            lambda: _q16_with(6, lambda q: tensor(_Q8, q["r_forget"], scale=1 / 256)),
            None,
            True,
            "zero point",
        ),
        (
            lambda: _q16_with(10, lambda q: tensor(T.TENSOR_INT32, q["b_forget"], scale=1e-5)),
            None,
            True,
            "weightsScale/128",
        ),
        (
            lambda: _q16_with(13, lambda q: tensor(_Q16, q["prev_cell"], scale=1 / 1024)),
            None,
            True,
            "2\\^-11",
        ),
        (
            lambda: _q16_with(14, tensor(_Q8, np.zeros((2, 2)), scale=1 / 128, zero_point=128)),
            None,
            True,
            "previous output.*rows",
        ),
        # QUANTIZED_LSTM: QLSTM.cpp validate() checks types and the version only.
        (
            lambda: _qlstm_with(19, tensor(_Q16, np.zeros((2, 4)), scale=1 / 2000)),
            None,
            True,
            "power-of-two",
        ),
        (lambda: _qlstm_with(27, scalar(T.FLOAT32, 0.0)), None, True, "forget intermediate"),
        (lambda: _qlstm_with(31, scalar(T.FLOAT32, -1.0)), None, True, "hidden state scale"),
        (lambda: _qlstm_with(31, scalar(T.FLOAT32, 1e-30)), None, True, "effective scale"),
        (
            lambda: _qlstm_with(19, tensor(_Q16, np.zeros((3, 4)), scale=2.0**-11)),
            None,
            True,
            "cell state",
        ),
        # Strict: operand types, counts and HAL versions are Android's validation.
        (lambda: _lstm_with(20, scalar(T.FLOAT32, 4.0)), None, False, "no signature"),
        (lambda: _lstm_with(None, None, layer_norm=True), V.V1_1, False, "1\\.2"),
        (
            lambda: _q16_with(
                0, lambda q: tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, q["input"] - 128, scale=1 / 128)
            ),
            None,
            False,
            "no signature",
        ),
        # A version rule comes before the hook's deferrable rejections: parallel linking
        # (aux input, no aux weights) is HAL 1.3 even when merge_outputs disagrees too.
        (
            lambda: _bi_lstm(merge=True, out_merge=False, aux=(4, 2, 3)),
            V.V1_2,
            False,
            "needs HAL 1\\.3",
        ),
        (lambda: _bi_lstm(merge=True, out_merge=False, aux=(4, 2, 3)), None, True, "merge"),
    ],
)
def test_rejections_android_validation_leaves_to_execution(build, version, deferrable, match):
    op, ins, outs = build()
    model, _ = single_op_model(op, ins, outs)
    assert_rejected(model, deferrable=deferrable, match=match, version=version or HalVersion.V1_3)
