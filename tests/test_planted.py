"""The planted-bug drivers (driver/planted.py): each is exactly the bug its name says, on
exactly the inputs it says, and the reference everywhere else. The campaigns and
properties that hunt them (test_campaign.py, test_plugin.py) mean something only then:
a planted bug that fired on every input, or on none of its documented ones, would be
found, or missed, for the wrong reason."""

from __future__ import annotations

import numpy as np
import pytest

from driver import planted
from driver.builder import build_request
from driver.device import ReferenceDevice
from driver.hal.types import ErrorStatus, Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.planted import make_planted
from driver.testing import output, scalar, single_op_model, tensor

F32 = T.TENSOR_FLOAT32
U8 = T.TENSOR_QUANT8_ASYMM
S8 = T.TENSOR_QUANT8_ASYMM_SIGNED


def run(device, model: Model, feeds) -> list[np.ndarray]:
    status, prepared = device.prepare_model(model)
    assert status == ErrorStatus.NONE, device.last_error
    bundle = build_request(model, feeds)
    status, shapes, _ = prepared.execute_synchronously(bundle.request)
    assert status == ErrorStatus.NONE, device.last_error
    main = model.main
    return [
        bundle.output_array(k, main.operands[o].type, shapes[k].dimensions)
        for k, o in enumerate(main.output_indexes)
    ]


def binary(op, a, b, out_dims, *, act=0, type=F32, scales=(0.0, 0.0, 0.0), zero_points=(0, 0, 0)):
    """A one-operation ADD/SUB/MUL model and its feeds."""
    return single_op_model(
        op,
        [
            tensor(type, a, scale=scales[0], zero_point=zero_points[0]),
            tensor(type, b, scale=scales[1], zero_point=zero_points[1]),
            scalar(T.INT32, act),
        ],
        [output(type, out_dims, scale=scales[2], zero_point=zero_points[2])],
    )


def conv(x, *, nchw=False, type=F32, in_zp=0):
    """CONV_2D, 2x2 filter of ones, implicit SAME padding, stride 1; NHWC unless
    ``nchw`` (then with the layout argument)."""
    quant = type != F32
    x = np.asarray(x)
    channels = x.shape[1 if nchw else 3]
    out_dims = (1, 1, *x.shape[2:]) if nchw else (*x.shape[:3], 1)  # one output channel
    ones = np.full((1, 2, 2, channels), 2 if quant else 1.0)
    filt = tensor(type, ones, scale=0.5 if quant else 0.0, const=True)
    bias = tensor(T.TENSOR_INT32 if quant else F32, [0], scale=0.25 if quant else 0.0, const=True)
    params = [scalar(T.INT32, v) for v in (1, 1, 1, 0)]
    if nchw:
        params.append(scalar(T.BOOL, True))
    return single_op_model(
        O.CONV_2D,
        [tensor(type, x, scale=0.5 if quant else 0.0, zero_point=in_zp), filt, bias, *params],
        [output(type, out_dims, scale=1.0 if quant else 0.0, zero_point=50 if quant else 0)],
    )


def same(bug: str, case) -> bool:
    model, feeds = case
    got = run(make_planted(bug), model, feeds)
    want = run(ReferenceDevice(), model, feeds)
    return all(g.shape == w.shape and np.array_equal(g, w) for g, w in zip(got, want))


_RAMP = np.arange(256)
_QUANT_ADD = {"scales": (0.3, 0.7, 0.5), "zero_points": (10, 120, 128)}
_QUANT_ADD_SIGNED = {"scales": (0.3, 0.7, 0.5), "zero_points": (-118, -8, 0)}
_NEG = [-2.0, -1.0, 1.0, 2.0]
_NHWC = np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
_NHWC2 = np.arange(1, 19, dtype=np.float32).reshape(1, 3, 3, 2)

# (bug, the cases its bug shows on, the cases where it is the reference)
TRIGGERS = [
    (
        "rounding",
        [
            binary(O.ADD, _RAMP, _RAMP[::-1], (256,), type=U8, **_QUANT_ADD),
            binary(O.ADD, _RAMP - 128, _RAMP[::-1] - 128, (256,), type=S8, **_QUANT_ADD_SIGNED),
        ],
        [binary(O.ADD, [0.1, 0.2, -0.3], [0.7, 0.25, 0.3], (3,))],  # float ADD is exact
    ),
    (
        "activation",
        [binary(op, _NEG, [1.0, 0.5, -3.0, -3.0], (4,), act=1) for op in (O.ADD, O.SUB, O.MUL)],
        [binary(op, _NEG, [1.0, 0.5, -3.0, -3.0], (4,)) for op in (O.ADD, O.SUB, O.MUL)],
    ),
    (
        "padding",
        [conv(_NHWC), conv(_NHWC2)],
        [conv(_NHWC2.transpose(0, 3, 1, 2), nchw=True)],  # NCHW is read right
    ),
    (
        "broadcast",
        [
            binary(op, a, b, (2, 3))
            for op in (O.ADD, O.MUL)
            for a, b in (
                ([[1.0], [2.0]], [[1, 2, 3], [4, 5, 6]]),
                ([[1, 2, 3], [4, 5, 6]], [[1.0], [2.0]]),
            )
        ],
        [binary(O.ADD, [[1, 2, 3]], [[4, 5, 6]], (1, 3))],
    ),
]


@pytest.mark.parametrize(
    "bug, shows_on, reference_on", TRIGGERS, ids=[bug for bug, _, _ in TRIGGERS]
)
def test_a_wrong_result_bug_shows_on_its_inputs_and_only_there(bug, shows_on, reference_on):
    for k, case in enumerate(shows_on):
        assert not same(bug, case), f"planted-{bug} computed case {k} right"
    for k, case in enumerate(reference_on):
        assert same(bug, case), f"planted-{bug} computed case {k} wrong"


@pytest.mark.parametrize("type, zero_point", [(F32, 0), (U8, 100)], ids=["float", "quant8"])
def test_planted_padding_reads_the_input_one_pixel_up_and_left_in_real_zeros(type, zero_point):
    # Exactly a padding off by one: the reference on the input shifted by one pixel,
    # filled with real zeros (the zero point of a quantized input).
    x = _NHWC if type == F32 else (_NHWC * 10 + 30).astype(np.uint8)
    shifted = np.pad(x, ((0, 0), (1, 0), (1, 0), (0, 0)), constant_values=zero_point)
    model, feeds = conv(x, type=type, in_zp=zero_point)
    (got,) = run(make_planted("padding"), model, feeds)
    (want,) = run(ReferenceDevice(), model, [shifted[:, :-1, :-1, :]])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "a_dims, b_dims, crashes",
    [
        ((3, 2), (3, 2), True),
        ((2,), (3, 2), True),  # the second input's 3 is enough
        ((3,), (1,), True),
        ((2, 2), (2, 2), False),
        ((4,), (4,), False),  # a larger dimension is fine
        ((4, 1), (1, 2), False),
    ],
)
def test_planted_crash_raises_only_on_a_dimension_of_size_3(a_dims, b_dims, crashes):
    out_dims = np.broadcast_shapes(a_dims, b_dims)
    case = binary(O.ADD, np.ones(a_dims), np.ones(b_dims), out_dims)
    if crashes:
        with pytest.raises(IndexError, match="planted crash"):
            run(make_planted("crash"), *case)
    else:
        assert same("crash", case)


class _WouldHang(Exception):
    pass


class _Tripwire:
    def wait(self, timeout=None):
        raise _WouldHang


@pytest.mark.parametrize(
    "a_dims, b_dims, hangs",
    [
        ((6,), (6,), True),
        ((2, 3), (3,), True),
        ((3,), (2, 3), True),  # the second input's 6 elements are enough
        ((7,), (7,), False),  # more than 6 is fine
        ((5,), (5,), False),
        ((2, 4), (4,), False),
    ],
)
def test_planted_hang_waits_only_on_exactly_6_elements(monkeypatch, a_dims, b_dims, hangs):
    monkeypatch.setattr(planted, "_NEVER", _Tripwire())
    out_dims = np.broadcast_shapes(a_dims, b_dims)
    case = binary(O.MUL, np.ones(a_dims), np.ones(b_dims), out_dims)
    if hangs:
        with pytest.raises(_WouldHang):
            run(make_planted("hang"), *case)
    else:
        assert same("hang", case)


def test_planted_status_rejects_reshape_models_as_invalid_argument_and_nothing_else():
    device = make_planted("status")
    reshape, _ = single_op_model(
        O.RESHAPE,
        [tensor(F32, np.ones((2, 2))), tensor(T.TENSOR_INT32, [4], const=True)],
        [output(F32, (4,))],
    )
    assert device.get_supported_operations(reshape) == (ErrorStatus.INVALID_ARGUMENT, [])
    add, _ = binary(O.ADD, [1.0], [2.0], (1,))
    assert device.get_supported_operations(add) == (ErrorStatus.NONE, [True])
