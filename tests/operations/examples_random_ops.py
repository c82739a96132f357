"""Valid one-operation examples for LSH_PROJECTION and RANDOM_MULTINOMIAL (see examples.py).

LSH expectations were computed with a scalar transcription of Android's
``runningSignBit`` over an independent farmhash implementation (the pyfarmhash C++
bindings), not with the project's vectorized hash. Multinomial expectations use
distributions whose every mass sits on one class, so any correct sampler agrees.
"""

import numpy as np

from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.testing import example, omitted, output, scalar, tensor

# Three hash functions of two bits each (the seeds are the values' float bytes).
HASH = [[0.25, -1.5], [3.0, 0.125], [-2.0, 7.5]]


def _lsh(name, hash_type, in_type, values, weights, kind, out_dims, expected, weight_type=None):
    weight_type = weight_type or hash_type
    w = omitted(weight_type) if weights is None else tensor(weight_type, weights)
    quant = in_type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
    return example(
        name,
        O.LSH_PROJECTION,
        [
            tensor(hash_type, HASH),
            tensor(in_type, values, scale=0.5 if quant else 0.0),
            w,
            scalar(T.INT32, kind),
        ],
        [output(T.TENSOR_INT32, out_dims)],
        expected=[expected],
    )


EXAMPLES = [
    _lsh(
        "lsh_dense_float32_hash_int32_input",
        T.TENSOR_FLOAT32,
        T.TENSOR_INT32,
        [[7, -3], [100, 42], [-5, 9]],
        [1.0, 0.5, -2.0],
        2,
        (6,),
        [1, 0, 1, 0, 1, 0],
    ),
    _lsh(
        "lsh_sparse_float32_input",
        T.TENSOR_FLOAT32,
        T.TENSOR_FLOAT32,
        [1.5, -2.25, 8.0, 0.0],
        None,
        3,
        (3,),
        [3, 4, 8],
    ),
    _lsh(
        "lsh_sparse_deprecated_quant8_input",
        T.TENSOR_FLOAT32,
        T.TENSOR_QUANT8_ASYMM,
        [[1, 200], [17, 3]],
        None,
        1,
        (3,),
        [3, 3, 0],
    ),
    _lsh(
        "lsh_dense_quant8_signed_input",
        T.TENSOR_FLOAT32,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        [[1, -56], [17, 3]],
        [2.0, 1.0],
        2,
        (6,),
        [1, 0, 1, 1, 1, 0],
    ),
    _lsh(
        "lsh_dense_float16_hash_float16_input",
        T.TENSOR_FLOAT16,
        T.TENSOR_FLOAT16,
        [[0.5, 1.0], [-3.0, 2.0]],
        [1.0, 1.0],
        2,
        (6,),
        [0, 1, 1, 1, 0, 0],
    ),
    _lsh(
        "lsh_sparse_float16_hash_int32_input",
        T.TENSOR_FLOAT16,
        T.TENSOR_INT32,
        [11, 22, 33],
        None,
        3,
        (3,),
        [1, 5, 9],
    ),
    _lsh(
        "lsh_dense_float32_hash_float16_input",
        T.TENSOR_FLOAT32,
        T.TENSOR_FLOAT16,
        [0.5, -1.0, 4.0],
        None,
        2,
        (6,),
        [0, 1, 1, 1, 0, 1],
    ),
]

# exp(-1000) is exactly 0 in double precision: all mass on one class per row.
_ONE_HOT_LOGITS = [[0.0, -1000.0, -1000.0], [-1000.0, -1000.0, 0.0]]

EXAMPLES += [
    example(
        f"multinomial_one_hot_{name}",
        O.RANDOM_MULTINOMIAL,
        [
            tensor(t, _ONE_HOT_LOGITS),
            scalar(T.INT32, 4),
            tensor(T.TENSOR_INT32, [37, 11]),
        ],
        [output(T.TENSOR_INT32, (2, 4))],
        expected=[np.array([[0, 0, 0, 0], [2, 2, 2, 2]])],
    )
    for name, t in (("float32", T.TENSOR_FLOAT32), ("float16", T.TENSOR_FLOAT16))
]
