"""Valid one-operation examples for the shape family (see examples.py).

Most examples are written once on small *logical* integers and instantiated for every
data type the operation takes (:func:`per_type`): floats and INT32 hold the numbers as
they are, quantized tensors hold ``number + zero point`` (so a quantized 0 is the logical
zero that PAD and SPACE_TO_BATCH_ND pad with). Data movement commutes with that mapping, so
one hand-written expectation serves every type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.hal.types import SymmPerChannelQuantParams
from driver.operations.base import storage_dtype
from driver.testing import OpExample, example, omitted, output, scalar, tensor

QUANT_PARAMS = {T.TENSOR_QUANT8_ASYMM: (0.5, 100), T.TENSOR_QUANT8_ASYMM_SIGNED: (0.5, -20)}
"""(scale, zero point) the examples give quantized tensors of each type."""

SHORT = {
    T.TENSOR_FLOAT32: "float32",
    T.TENSOR_FLOAT16: "float16",
    T.TENSOR_INT32: "int32",
    T.TENSOR_QUANT8_ASYMM: "quant8",
    T.TENSOR_QUANT8_ASYMM_SIGNED: "quant8_signed",
    T.TENSOR_BOOL8: "bool8",
}

ALL5 = (
    T.TENSOR_FLOAT32,
    T.TENSOR_FLOAT16,
    T.TENSOR_INT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)
NO_INT = tuple(t for t in ALL5 if t != T.TENSOR_INT32)


def raw(t: int, logical) -> np.ndarray:
    """Stored values of logical numbers in type ``t`` (number + zero point if quantized)."""
    a = np.asarray(logical)
    if t in QUANT_PARAMS:
        a = a + QUANT_PARAMS[t][1]
    return a.astype(storage_dtype(t))


def data(t: int, logical, dims: Sequence[int] | None = None, **kw):
    """A tensor argument of type ``t`` holding ``logical``."""
    scale, zp = QUANT_PARAMS.get(t, (0.0, 0))
    return tensor(t, raw(t, logical), dims, scale=scale, zero_point=zp, **kw)


def out(t: int, dims: Sequence[int] = ()):
    scale, zp = QUANT_PARAMS.get(t, (0.0, 0))
    return output(t, dims, scale=scale, zero_point=zp)


def i32(values, **kw):
    """A TENSOR_INT32 parameter tensor (a constant by default)."""
    kw.setdefault("const", True)
    return tensor(T.TENSOR_INT32, values, **kw)


def per_type(
    name: str,
    op: int,
    types: Sequence[int],
    build: Callable[[int], tuple[list, list, list]],
    **kw,
) -> list[OpExample]:
    """One example per type: ``build(t)`` gives (inputs, outputs, expected logical
    outputs); expectations are mapped to stored values like the inputs."""
    found = []
    for t in types:
        inputs, outputs, expected = build(t)
        exp = [raw(o.type, e) if o.type == t else np.asarray(e) for o, e in zip(outputs, expected)]
        found.append(example(f"{name}_{SHORT[t]}", op, inputs, outputs, exp, **kw))
    return found


MOVE = (
    T.TENSOR_FLOAT32,
    T.TENSOR_QUANT8_ASYMM,
    T.TENSOR_FLOAT16,
    T.TENSOR_QUANT8_ASYMM_SIGNED,
)

EXAMPLES: list[OpExample] = []
E = EXAMPLES.extend

M23 = [[1, 2, 3], [4, 5, 6]]

E(
    per_type(
        "reshape_minus_one",
        O.RESHAPE,
        MOVE,
        lambda t: ([data(t, M23), i32([3, -1])], [out(t, (3, 2))], [[[1, 2], [3, 4], [5, 6]]]),
    )
)
E(
    per_type(
        "squeeze_negative_dims",
        O.SQUEEZE,
        MOVE,
        lambda t: (
            [data(t, [[[1], [2]]]), i32([0, -1])],
            [out(t, (2,))],
            [[1, 2]],
        ),
    )
)
E(
    per_type(
        "squeeze_omitted_dims",
        O.SQUEEZE,
        (T.TENSOR_FLOAT32,),
        lambda t: (
            [data(t, [[[1], [2]]]), omitted(T.TENSOR_INT32)],
            [out(t, (2,))],
            [[1, 2]],
        ),
    )
)
E(
    per_type(
        "expand_dims_last",
        O.EXPAND_DIMS,
        ALL5,
        lambda t: ([data(t, [1, 2, 3]), scalar(T.INT32, -1)], [out(t, (3, 1))], [[[1], [2], [3]]]),
    )
)
E(
    per_type(
        "transpose_2d",
        O.TRANSPOSE,
        MOVE,
        lambda t: ([data(t, M23), i32([1, 0])], [out(t, (3, 2))], [[[1, 4], [2, 5], [3, 6]]]),
    )
)
E(
    per_type(
        "transpose_omitted_perm",
        O.TRANSPOSE,
        (T.TENSOR_FLOAT32,),
        lambda t: (
            [data(t, [[[1, 2]], [[3, 4]]]), omitted(T.TENSOR_INT32)],
            [out(t, (2, 1, 2))],
            [[[[1, 3]], [[2, 4]]]],
        ),
    )
)
E(
    per_type(
        "concatenation_axis0",
        O.CONCATENATION,
        MOVE,
        lambda t: (
            [data(t, [[1, 2]]), data(t, [[3, 4], [5, 6]]), scalar(T.INT32, 0)],
            [out(t, (3, 2))],
            [[[1, 2], [3, 4], [5, 6]]],
        ),
    )
)
# Mixed input scales (HAL 1.2+): input 1 (scale 1.0, zero point 10) is requantized to the
# output's scale 0.5, zero point 100: 12 -> (12 - 10) * 2 + 100 = 104.
EXAMPLES.append(
    example(
        "concatenation_quant8_requantized",
        O.CONCATENATION,
        [
            tensor(T.TENSOR_QUANT8_ASYMM, [101, 102], scale=0.5, zero_point=100),
            tensor(T.TENSOR_QUANT8_ASYMM, [12, 9], scale=1.0, zero_point=10),
            scalar(T.INT32, 0),
        ],
        [output(T.TENSOR_QUANT8_ASYMM, (4,), scale=0.5, zero_point=100)],
        [[101, 102, 104, 98]],
    )
)
E(
    per_type(
        "split_two",
        O.SPLIT,
        ALL5,
        lambda t: (
            [data(t, [[1, 2, 3, 4]]), scalar(T.INT32, -1), scalar(T.INT32, 2)],
            [out(t, (1, 2)), out(t, (1, 2))],
            [[[1, 2]], [[3, 4]]],
        ),
    )
)
E(
    per_type(
        "slice_size_minus_one",
        O.SLICE,
        ALL5,
        lambda t: (
            [data(t, M23), i32([0, 1]), i32([-1, 2])],
            [out(t, (2, 2))],
            [[[2, 3], [5, 6]]],
        ),
    )
)
E(
    per_type(
        "strided_slice_end_mask",
        O.STRIDED_SLICE,
        MOVE,
        lambda t: (
            [
                data(t, [1, 2, 3, 4, 5]),
                i32([0]),
                i32([0]),
                i32([2]),
                scalar(T.INT32, 0),
                scalar(T.INT32, 1),
                scalar(T.INT32, 0),
            ],
            [out(t, (3,))],
            [[1, 3, 5]],
        ),
    )
)
E(
    per_type(
        "pad_2d",
        O.PAD,
        MOVE,
        lambda t: (
            [data(t, [[1, 2]]), i32([[1, 0], [0, 1]])],
            [out(t, (2, 3))],
            [[[0, 0, 0], [1, 2, 0]]],
        ),
    )
)
_PAD_V2_VALUE = {
    T.TENSOR_FLOAT32: scalar(T.FLOAT32, 9.0),
    T.TENSOR_FLOAT16: scalar(T.FLOAT16, 9.0),
    # Quantized pad values are stored integers: 109 is logical 9 at zero point 100.
    T.TENSOR_QUANT8_ASYMM: scalar(T.INT32, 109),
    T.TENSOR_QUANT8_ASYMM_SIGNED: scalar(T.INT32, -11),
}
E(
    per_type(
        "pad_v2_value",
        O.PAD_V2,
        (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED),
        lambda t: (
            [data(t, [1, 2]), i32([[1, 2]]), _PAD_V2_VALUE[t]],
            [out(t, (5,))],
            [[9, 1, 2, 9, 9]],
        ),
    )
)
E(
    per_type(
        "tile_2d",
        O.TILE,
        ALL5,
        lambda t: ([data(t, [[1, 2]]), i32([2, 2])], [out(t, (2, 4))], [[[1, 2, 1, 2]] * 2]),
    )
)
E(
    per_type(
        "gather_axis0",
        O.GATHER,
        ALL5,
        lambda t: (
            [data(t, [[1, 2], [3, 4], [5, 6]]), scalar(T.INT32, 0), i32([2, 0])],
            [out(t, (2, 2))],
            [[[5, 6], [1, 2]]],
        ),
    )
)
_FILL_VALUE = {
    T.TENSOR_FLOAT32: scalar(T.FLOAT32, 3.5),
    T.TENSOR_FLOAT16: scalar(T.FLOAT16, 3.5),
    T.TENSOR_INT32: scalar(T.INT32, -7),
}
for _t, _v in _FILL_VALUE.items():
    EXAMPLES.append(
        example(
            f"fill_{SHORT[_t]}",
            O.FILL,
            [i32([2, 3]), _v],
            [output(_t, (2, 3))],
            [np.full((2, 3), _v.value)],
        )
    )

_RANK_ARGS = [
    tensor(T.TENSOR_BOOL8, np.ones((2, 1, 3), bool)),
    tensor(T.TENSOR_FLOAT16, np.ones((2, 1, 3))),
    tensor(T.TENSOR_FLOAT32, np.ones((2, 1, 3))),
    tensor(T.TENSOR_INT32, np.ones((2, 1, 3))),
    tensor(T.TENSOR_QUANT8_ASYMM, np.ones((2, 1, 3)), scale=0.5, zero_point=3),
    tensor(T.TENSOR_QUANT16_SYMM, np.ones((2, 1, 3)), scale=0.5),
    tensor(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
        np.ones((2, 1, 3)),
        channel_quant=SymmPerChannelQuantParams(0, (0.5, 0.25)),
    ),
    tensor(T.TENSOR_QUANT16_ASYMM, np.ones((2, 1, 3)), scale=0.5, zero_point=7),
    tensor(T.TENSOR_QUANT8_SYMM, np.ones((2, 1, 3)), scale=0.5),
    tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, np.ones((2, 1, 3)), scale=0.5, zero_point=-3),
]
for _arg in _RANK_ARGS:
    EXAMPLES.append(
        example(
            f"rank_{T(_arg.type).name.lower()}",
            O.RANK,
            [_arg],
            [output(T.INT32)],
            [np.int32(3)],
        )
    )

E(
    per_type(
        "batch_to_space_nhwc",
        O.BATCH_TO_SPACE_ND,
        MOVE,
        lambda t: (
            [data(t, [1, 2, 3, 4], (4, 1, 1, 1)), i32([2, 2])],
            [out(t, (1, 2, 2, 1))],
            [np.reshape([1, 2, 3, 4], (1, 2, 2, 1))],
        ),
    )
)
E(
    per_type(
        "space_to_batch_nhwc",
        O.SPACE_TO_BATCH_ND,
        MOVE,
        lambda t: (
            [data(t, [1, 2, 3, 4], (1, 2, 2, 1)), i32([2, 2]), i32([[0, 0], [0, 0]])],
            [out(t, (4, 1, 1, 1))],
            [np.reshape([1, 2, 3, 4], (4, 1, 1, 1))],
        ),
    )
)
E(
    per_type(
        "depth_to_space_nhwc",
        O.DEPTH_TO_SPACE,
        MOVE,
        lambda t: (
            [data(t, [1, 2, 3, 4], (1, 1, 1, 4)), scalar(T.INT32, 2)],
            [out(t, (1, 2, 2, 1))],
            [np.reshape([1, 2, 3, 4], (1, 2, 2, 1))],
        ),
    )
)
E(
    per_type(
        "space_to_depth_nhwc",
        O.SPACE_TO_DEPTH,
        MOVE,
        lambda t: (
            [data(t, [1, 2, 3, 4], (1, 2, 2, 1)), scalar(T.INT32, 2)],
            [out(t, (1, 1, 1, 4))],
            [np.reshape([1, 2, 3, 4], (1, 1, 1, 4))],
        ),
    )
)
# NCHW (HAL 1.2): two channels; channel c of the input holds c*10 + position.
_NCHW = T.TENSOR_FLOAT32
EXAMPLES += [
    example(
        "batch_to_space_nchw_float32",
        O.BATCH_TO_SPACE_ND,
        [
            data(_NCHW, [1, 11, 2, 12, 3, 13, 4, 14], (4, 2, 1, 1)),
            i32([2, 2]),
            scalar(T.BOOL, True),
        ],
        [out(_NCHW, (1, 2, 2, 2))],
        [np.reshape([1, 2, 3, 4, 11, 12, 13, 14], (1, 2, 2, 2))],
    ),
    example(
        "space_to_batch_nchw_float32",
        O.SPACE_TO_BATCH_ND,
        [
            data(_NCHW, [1, 2, 3, 4, 11, 12, 13, 14], (1, 2, 2, 2)),
            i32([2, 2]),
            i32([[0, 0], [0, 0]]),
            scalar(T.BOOL, True),
        ],
        [out(_NCHW, (4, 2, 1, 1))],
        [np.reshape([1, 11, 2, 12, 3, 13, 4, 14], (4, 2, 1, 1))],
    ),
    example(
        "depth_to_space_nchw_float32",
        O.DEPTH_TO_SPACE,
        [data(_NCHW, [1, 2, 3, 4], (1, 4, 1, 1)), scalar(T.INT32, 2), scalar(T.BOOL, True)],
        [out(_NCHW, (1, 1, 2, 2))],
        [np.reshape([1, 2, 3, 4], (1, 1, 2, 2))],
    ),
    example(
        "space_to_depth_nchw_float32",
        O.SPACE_TO_DEPTH,
        [data(_NCHW, [1, 2, 3, 4], (1, 1, 2, 2)), scalar(T.INT32, 2), scalar(T.BOOL, True)],
        [out(_NCHW, (1, 4, 1, 1))],
        [np.reshape([1, 2, 3, 4], (1, 4, 1, 1))],
    ),
]
E(
    per_type(
        "channel_shuffle_two_groups",
        O.CHANNEL_SHUFFLE,
        NO_INT,
        lambda t: (
            [data(t, [[1, 2, 3, 4, 5, 6]]), scalar(T.INT32, 2), scalar(T.INT32, -1)],
            [out(t, (1, 6))],
            [[[1, 4, 2, 5, 3, 6]]],
        ),
    )
)


def signed_twin(ex: OpExample, rng: np.random.Generator) -> tuple[OpExample, OpExample]:
    """``ex`` (a QUANT8_ASYMM example) with random stored values in its QUANT8_ASYMM
    tensors, and its QUANT8_ASYMM_SIGNED twin: the same values and zero points minus 128.
    Expected outputs are dropped; the two must agree up to the 128 offset."""
    q8, q8s = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
    unsigned_in, signed_in = [], []
    for a in ex.inputs:
        if getattr(a, "type", None) == q8 and hasattr(a, "values"):
            values = rng.integers(0, 256, a.values.shape).astype(np.uint8)
            unsigned_in.append(replace(a, values=values))
            signed_in.append(
                replace(
                    a,
                    type=q8s,
                    values=(values.astype(np.int16) - 128).astype(np.int8),
                    zero_point=a.zero_point - 128,
                )
            )
        else:
            unsigned_in.append(a)
            signed_in.append(a)
    signed_out = [
        replace(o, type=q8s, zero_point=o.zero_point - 128) if o.type == q8 else o
        for o in ex.outputs
    ]
    return (
        replace(ex, inputs=tuple(unsigned_in), expected=None),
        replace(
            ex,
            name=ex.name + "_signed_twin",
            inputs=tuple(signed_in),
            outputs=tuple(signed_out),
            expected=None,
        ),
    )


def assert_signed_twin(ex: OpExample, seed: int) -> None:
    """Run ``ex``'s unsigned and signed twins on the same random data and check every
    output: signed = unsigned - 128 for quantized outputs, equal otherwise."""
    unsigned, signed = signed_twin(ex, np.random.default_rng(seed))
    for k, (u, s) in enumerate(zip(unsigned.run(), signed.run())):
        if signed.outputs[k].type == T.TENSOR_QUANT8_ASYMM_SIGNED:
            np.testing.assert_array_equal(s.astype(np.int16), u.astype(np.int16) - 128)
        else:
            np.testing.assert_array_equal(s, u)


def quant8_examples(ops) -> list[OpExample]:
    """The examples of ``ops`` that have a QUANT8_ASYMM input (twin candidates)."""
    from tests.operations.examples import all_examples

    return [
        e
        for e in all_examples()
        if e.op in ops and any(getattr(a, "type", None) == T.TENSOR_QUANT8_ASYMM for a in e.inputs)
    ]
