"""``com.example.fibonacci``: the worked example of a vendor extension.

It follows Android's ``example/fibonacci`` (``FibonacciExtension.h`` and the example
driver) and the vendor-extension guide's shape: one scalar type, one tensor type that
carries extra operand data, and one operation.

Operand types (type within the extension):

``EXAMPLE_INT64`` (0)
    A signed 64-bit scalar (``byteSize`` 8).
``EXAMPLE_TENSOR_QUANT64_ASYMM`` (1)
    A tensor of unsigned 64-bit quantized values (``byteSize`` 8 per element). Every
    operand of this type carries :data:`PARAMS` as extra operand data
    (``ANeuralNetworksModel_setOperandExtensionData``): ``{double scale; int64_t
    zeroPoint}``, 16 bytes little-endian — the guide's ``ExampleTensorParams``, called
    ``ExampleQuant64AsymmParams`` in the example. A real value ``r`` is stored as
    ``r / scale + zeroPoint``.

Operation (type within the extension):

``EXAMPLE_FIBONACCI`` (0)
    Input 0: ``n``, an ``EXAMPLE_INT64`` scalar or a ``TENSOR_FLOAT32`` of exactly one
    element (truncated to an integer, as ``static_cast<int64_t>`` does).
    Output 0: a 1-D tensor of ``n`` elements, ``EXAMPLE_TENSOR_QUANT64_ASYMM`` or
    ``TENSOR_FLOAT32``: the first ``n`` Fibonacci numbers ``1, 1, 2, 3, 5, ...``
    (output ``[i] = F(i + 1)``), quantized with the output's params. ``n >= 1``.

Numerics, as the example driver computes them: the float output runs the recurrence in
float32 (so it rounds like the C++ loop, and overflows to +inf from F(187) on); the
quantized output runs it in uint64, wrapping modulo 2^64 like C++ unsigned arithmetic,
then computes ``double(F) / scale + double(zeroPoint)`` and converts back to uint64 by
truncation. That last conversion is undefined behaviour in C++ outside ``[0, 2^64)``;
here it saturates (NaN gives 0). This project additionally requires a finite, positive
``scale`` (the example divides by it unchecked).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from driver.extensions import ExtensionDeclaration, ExtensionOperandType, ExtensionOperation
from driver.hal.types import HalVersion, OperandType, make_extension_type
from driver.operations.base import OperationContext, OperationDeclaration, Signature

NAME = "com.example.fibonacci"

EXAMPLE_INT64 = 0
EXAMPLE_TENSOR_QUANT64_ASYMM = 1
EXAMPLE_FIBONACCI = 0

PARAMS = struct.Struct("<dq")
"""``ExampleQuant64AsymmParams {double scale; int64_t zeroPoint;}`` (16 bytes)."""

F32 = OperandType.TENSOR_FLOAT32
_UINT64_MAX = 2**64 - 1


def pack_params(scale: float, zero_point: int) -> bytes:
    """The extra operand data of an ``EXAMPLE_TENSOR_QUANT64_ASYMM`` operand."""
    return PARAMS.pack(scale, zero_point)


def _check_params(blob: bytes) -> str | None:
    scale, _ = PARAMS.unpack(blob)
    if not (math.isfinite(scale) and scale > 0):
        return f"scale must be finite and > 0, got {scale!r}"
    return None


# ---------------------------------------------------------------------------------------
# Kernel
# ---------------------------------------------------------------------------------------


def fibonacci_float32(n: int) -> np.ndarray:
    """``F(1..n)`` by the float32 recurrence (each sum rounded to float32)."""
    out = np.full(n, np.inf, dtype=np.float32)
    a = b = np.float32(1)
    # The loop is bounded: float32 overflows to inf at F(187), and inf stays inf.
    for i in range(n):
        out[i] = a
        if math.isinf(a):
            break
        with np.errstate(over="ignore"):
            a, b = b, np.float32(a + b)
    return out


def fibonacci_uint64(n: int) -> np.ndarray:
    """``F(1..n)`` modulo 2^64, vectorized by fast doubling over the bits of the index:
    F(2m) = F(m)(2F(m+1) - F(m)) and F(2m+1) = F(m)^2 + F(m+1)^2 hold modulo 2^64,
    which numpy's wrapping uint64 arithmetic gives."""
    k = np.arange(1, n + 1, dtype=np.uint64)
    a = np.zeros(n, dtype=np.uint64)  # F(m)
    b = np.ones(n, dtype=np.uint64)  # F(m + 1)
    two = np.uint64(2)
    for bit in reversed(range(int(n).bit_length())):
        c = a * (two * b - a)
        d = a * a + b * b
        odd = ((k >> np.uint64(bit)) & np.uint64(1)).astype(bool)
        a, b = np.where(odd, d, c), np.where(odd, c + d, d)
    return a


def quantize_uint64(fib: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """``(uint64)(double(F) / scale + double(zeroPoint))``, saturating."""
    with np.errstate(all="ignore"):
        real = fib.astype(np.float64) / scale + float(zero_point)
    real = np.nan_to_num(np.trunc(real), nan=0.0, posinf=np.inf, neginf=0.0)
    out = np.zeros(real.shape, dtype=np.uint64)
    big = real >= 2.0**64
    mid = (real > 0) & ~big
    out[mid] = real[mid].astype(np.uint64)
    out[big] = _UINT64_MAX
    return out


# ---------------------------------------------------------------------------------------
# Declaration
# ---------------------------------------------------------------------------------------


def _n(ctx: OperationContext, float_input: bool) -> int:
    v = ctx.value(0)
    if float_input:
        if v.size != 1:
            raise ctx.invalid(f"input 0 must hold exactly one element, got shape {list(v.shape)}")
        x = float(v.reshape(-1)[0])
        if not math.isfinite(x) or abs(x) >= 2.0**63:
            raise ctx.invalid(f"input 0 (n) must be a finite int64, got {x!r}")
        n = int(x)  # truncation toward zero, as static_cast<int64_t>
    else:
        n = int(v)
    if n < 1:
        raise ctx.invalid(f"n must be >= 1, got {n}")
    return n


def _declare(prefix: int) -> OperationDeclaration:
    int64 = make_extension_type(prefix, EXAMPLE_INT64)
    quant64 = make_extension_type(prefix, EXAMPLE_TENSOR_QUANT64_ASYMM)
    v = HalVersion.V1_2

    def validate(ctx: OperationContext) -> None:
        if ctx.input_type(0) == F32:
            ctx.check_rank(0, min_rank=1, max_rank=4)
            s = ctx.shapes[0]
            if s is not None and math.prod(s) != 1:
                raise ctx.invalid(f"input 0 must hold exactly one element, got shape {list(s)}")

    def infer_shapes(ctx: OperationContext):
        return [(_n(ctx, ctx.input_type(0) == F32),)]

    def execute(ctx: OperationContext):
        n = _n(ctx, ctx.input_type(0) == F32)
        if ctx.output_type(0) == F32:
            return [fibonacci_float32(n)]
        params = ctx.output_operand(0).extra_params
        if not isinstance(params, bytes) or len(params) != PARAMS.size:
            raise ctx.invalid(f"output 0 needs {PARAMS.size} bytes of extra operand data")
        scale, zero_point = PARAMS.unpack(params)
        return [quantize_uint64(fibonacci_uint64(n), scale, zero_point)]

    return OperationDeclaration(
        type=make_extension_type(prefix, EXAMPLE_FIBONACCI),
        signatures=(
            Signature((int64,), (quant64,), v),
            Signature((int64,), (F32,), v),
            Signature((F32,), (quant64,), v),
            Signature((F32,), (F32,), v),
        ),
        infer_shapes=infer_shapes,
        execute=execute,
        validate=validate,
        summary="the first n Fibonacci numbers, 1, 1, 2, 3, 5, ...",
    )


EXTENSION = ExtensionDeclaration(
    name=NAME,
    operand_types=(
        ExtensionOperandType(
            EXAMPLE_INT64,
            "EXAMPLE_INT64",
            is_tensor=False,
            byte_size=8,
            dtype=np.dtype("<i8"),
            summary="a signed 64-bit scalar",
        ),
        ExtensionOperandType(
            EXAMPLE_TENSOR_QUANT64_ASYMM,
            "EXAMPLE_TENSOR_QUANT64_ASYMM",
            is_tensor=True,
            byte_size=8,
            dtype=np.dtype("<u8"),
            extra_params_size=PARAMS.size,
            check_extra_params=_check_params,
            summary="uint64 quantized tensor; extra data {double scale; int64 zeroPoint}",
        ),
    ),
    operations=(
        ExtensionOperation(
            EXAMPLE_FIBONACCI,
            "EXAMPLE_FIBONACCI",
            _declare,
            summary="the first n Fibonacci numbers",
        ),
    ),
    summary="Android's example extension: Fibonacci numbers in a custom quantized type",
)
