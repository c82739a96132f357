"""Activation functions: RELU, RELU1, RELU6, LOGISTIC, TANH, ELU, HARD_SWISH.

Quantized LOGISTIC and TANH follow Android's ``logisticQuant8``/``tanhQuant8``: the input
is rescaled to a Q4.27 fixed-point value and gemmlowp's fixed-point ``logistic``/``tanh``
(exp by barrel shifter, Newton-Raphson reciprocal) give a Q0.31 result that is rounded to
the fixed output scale (1/256 for LOGISTIC, 1/128 for TANH). Quantized HARD_SWISH is
tflite's ``reference_ops::HardSwish`` (int16 fixed point). All three are evaluated on the
256 possible input bytes and gathered (see :func:`elementwise.lookup_unary`).
"""

from __future__ import annotations

import math

import numpy as np

from driver.hal.types import FusedActivation, HalError, HalVersion, OperationType
from driver.operations.base import OperationContext, OperationDeclaration, Shape, Signature
from driver.operations.base import T as _T
from driver.operations.elementwise import (
    QUANT8_ASYMM_TYPES,
    clamp_float,
    f32,
    float_kernel,
    float_result,
    lookup_unary,
    quant_params,
    replace_nan,
)
from driver.operations.quant import (
    FX16,
    FX32,
    INT32_MAX,
    activation_range_quantized,
    quant_range,
    quantize_multiplier,
    rounding_divide_by_pot,
)

V = HalVersion

# ---------------------------------------------------------------------------------------
# Quantized recipes (on int64 input values; see lookup_unary)
# ---------------------------------------------------------------------------------------

_INPUT_INTEGER_BITS = 4


def _input_rescale(scale: float) -> tuple[int, int, int] | None:
    """(multiplier, left_shift, radius) for LOGISTIC/TANH: ``QuantizeMultiplierGreaterThanOne``
    of scale * 2^27 and ``CalculateInputRadius``; None when Android's kernel fails."""
    real = scale * float(1 << (31 - _INPUT_INTEGER_BITS))
    if not real > 1.0:
        return None
    q, shift = math.frexp(real)
    q_fixed = math.floor(q * (1 << 31) + 0.5)
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    max_rescaled = (
        1.0 * ((1 << _INPUT_INTEGER_BITS) - 1) * (1 << (31 - _INPUT_INTEGER_BITS)) / (1 << shift)
    )
    return int(q_fixed), int(shift), math.floor(max_rescaled)


def _logistic_tanh_recipe(ctx: OperationContext, is_tanh: bool):
    scale, zp = quant_params(ctx, 0)
    multiplier, left_shift, radius = _input_rescale(scale)  # validated
    signed = ctx.input_type(0) == _T.TENSOR_QUANT8_ASYMM_SIGNED
    dt = np.int8 if signed else np.uint8

    def recipe(x: np.ndarray) -> np.ndarray:
        centered = x - zp
        # |centered| < radius keeps the shifted value within int32 (Android's guarantee).
        inside = np.abs(centered) < radius
        shifted = FX32.wrap(np.where(inside, centered, 0) << left_shift)
        rescaled = FX32.mul(shifted, multiplier)
        if is_tanh:  # Q0.31 -> Q24.7, offset 128
            out = rounding_divide_by_pot(FX32.tanh(rescaled, _INPUT_INTEGER_BITS), 24) + 128
        else:  # Q0.31 -> Q23.8
            out = rounding_divide_by_pot(FX32.logistic(rescaled, _INPUT_INTEGER_BITS), 23)
        out = np.minimum(out, 255)  # 1.0 (256) saturates
        out = np.where(centered <= -radius, 0, np.where(centered >= radius, 255, out))
        # The signed kernels (reference_integer_ops) are the same recipe shifted by -128.
        return (out - 128 if signed else out).astype(dt)

    return ("tanh" if is_tanh else "logistic", scale, zp), recipe


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """tflite ``SaturatingDoublingHighMul`` on int16: ``FX16.mul`` without the rounding."""
    ab = a * b
    high = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == b) & (a == -(2**15)), 2**15 - 1, FX16.wrap(high))


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT`` on int16 (the mask is truncated to int16)."""
    mask = int(FX16.wrap(np.int64((1 << exponent) - 1)))
    remainder = FX16.wrap(x & mask)
    threshold = (mask >> 1) + (x < 0)
    return FX16.wrap((x >> min(exponent, 62)) + (remainder > threshold))


def _sat_left_shift16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x * (1 << min(amount, 40)), -(2**15), 2**15 - 1)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """``QuantizeMultiplier`` then ``DownScaleInt32ToInt16Multiplier``."""
    m32, exponent = quantize_multiplier(real)
    if m32 >= INT32_MAX - (1 << 15):
        return 2**15 - 1, exponent
    return (m32 + (1 << 15)) >> 16, exponent


def _hard_swish_params(in_scale: float, out_scale: float) -> tuple[int, int, int, int]:
    """(output multiplier, output exponent, reluish multiplier, reluish exponent) as
    Android's ``hardSwishQuant`` computes them, in float arithmetic."""
    hires_input_scale = np.float32(1.0 / 128.0) * np.float32(in_scale)
    reluish_scale = np.float32(3.0) / np.float32(32768.0)
    with np.errstate(over="ignore"):  # inf, as in the C++: QuantizeMultiplier then fails
        out_real = float(hires_input_scale / np.float32(out_scale))
        reluish_real = float(hires_input_scale / reluish_scale)
    out_m, out_e = _int16_multiplier(out_real)
    rel_m, rel_e = _int16_multiplier(reluish_real)
    return out_m, out_e, rel_m, rel_e


def _hard_swish_recipe(ctx: OperationContext):
    in_scale, in_zp = quant_params(ctx, 0)
    out_scale, out_zp = quant_params(ctx, 0, output=True)
    out_m, out_e, rel_m, rel_e = _hard_swish_params(in_scale, out_scale)
    lo, hi = quant_range(ctx.output_type(0))
    dt = np.int8 if ctx.output_type(0) == _T.TENSOR_QUANT8_ASYMM_SIGNED else np.uint8

    def recipe(x: np.ndarray) -> np.ndarray:
        hires = (x - in_zp) * 128
        preshift = FX16.mul(hires, out_m)
        reluish = hires
        if rel_e > 0:
            reluish = _sat_left_shift16(reluish, rel_e - 1)
        reluish = FX16.mul(reluish, rel_m)
        if rel_e > 0:
            reluish = _sat_left_shift16(reluish, 1)
        if rel_e < 0:
            reluish = _rdbpot16(reluish, -rel_e)
        reluish = (reluish + (1 << 15)) >> 1  # [-1, 1] -> [0, 1]
        out = _rdbpot16(_sdhm16(reluish, preshift), -out_e)
        out = FX16.wrap(out + out_zp)  # int16 arithmetic in the C++
        return np.clip(out, lo, hi).astype(dt)

    return ("hard_swish", in_scale, in_zp, out_scale, out_zp), recipe


# ---------------------------------------------------------------------------------------
# Validation and shapes
# ---------------------------------------------------------------------------------------

_FIXED_OUTPUT = {
    # (scale, zero point unsigned, zero point signed) that logisticQuant8/tanhQuant8 require.
    OperationType.LOGISTIC: (1.0 / 256, 0, -128),
    OperationType.TANH: (1.0 / 128, 128, 0),
}


# Plain int sets: validation runs this per operation, and enum attribute lookups cost.
_ANY_RANK = frozenset({int(OperationType.HARD_SWISH), int(OperationType.ELU)})
_RELUS = frozenset({int(OperationType.RELU), int(OperationType.RELU1), int(OperationType.RELU6)})


def _validate_activation(ctx: OperationContext) -> None:
    op = ctx.operation_type
    if op not in _ANY_RANK:
        ctx.check_rank(0, max_rank=4)
    t = ctx.input_type(0)
    if t not in QUANT8_ASYMM_TYPES:
        return None
    (si, zi), (so, zo) = quant_params(ctx, 0), quant_params(ctx, 0, output=True)
    # Messages are built only on failure.
    if op in _RELUS:
        if (so, zo) != (si, zi):
            raise ctx.invalid(
                f"output 0 must have the input's scale and zero point ({si}, {zi}), "
                f"got ({so}, {zo})",
                deferrable=True,
            )
    elif op in _FIXED_OUTPUT:
        scale, zp_u, zp_s = _FIXED_OUTPUT[op]
        zp = zp_s if t == _T.TENSOR_QUANT8_ASYMM_SIGNED else zp_u
        if not (so == f32(scale) and zo == zp):
            raise ctx.invalid(
                f"output 0 of {OperationType(op).name} must have scale {scale} and zero point "
                f"{zp}, got ({so}, {zo})",
                deferrable=True,
            )
        if _input_rescale(si) is None:
            raise ctx.invalid(
                f"input 0 scale {si} is too small (scale * 2^27 must exceed 1)", deferrable=True
            )
    elif op == OperationType.HARD_SWISH:
        try:
            _, out_e, _, _ = _hard_swish_params(si, so)
        except HalError as e:  # a multiplier overflowed float32: hardSwishQuant fails
            raise ctx.invalid(
                f"input 0 scale {si}, output scale {so}: {e.message}", deferrable=True
            ) from None
        if out_e > 0:
            raise ctx.invalid(
                f"input 0 scale {si} / (128 * output scale {so}) must be below 1 "
                "(hardSwishQuant's output multiplier)",
                deferrable=True,
            )


def _infer_same(ctx: OperationContext) -> list[Shape]:
    return [ctx.shape(0)]


# ---------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------

_RELU_BOUNDS = {
    OperationType.RELU: (0.0, float(np.finfo(np.float32).max)),
    OperationType.RELU1: (-1.0, 1.0),
    OperationType.RELU6: (0.0, 6.0),
}
_RELU_ACT = {
    OperationType.RELU: FusedActivation.RELU,
    OperationType.RELU1: FusedActivation.RELU1,
    OperationType.RELU6: FusedActivation.RELU6,
}


def _execute_relu(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    op = OperationType(ctx.operation_type)
    t = ctx.input_type(0)
    if t in QUANT8_ASYMM_TYPES:
        scale, zp = quant_params(ctx, 0)
        lo, hi = activation_range_quantized(_RELU_ACT[op], scale, zp, t)
        return [np.clip(x, lo, hi).astype(x.dtype, copy=False)]
    lo, hi = _RELU_BOUNDS[op]
    # std::min(std::max(lo, x), hi) in float: NaN gives lo, +inf gives FLT_MAX (RELU).
    out = clamp_float(float_kernel(x), lo, hi, nan=lo)
    return [float_result(out, ctx)]


def _execute_logistic_tanh(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    t = ctx.input_type(0)
    is_tanh = ctx.operation_type == OperationType.TANH
    if t in QUANT8_ASYMM_TYPES:
        key, recipe = _logistic_tanh_recipe(ctx, is_tanh)
        return [lookup_unary(key, recipe, x, t)]
    xf = float_kernel(x)
    if is_tanh:
        return [float_result(np.tanh(xf), ctx)]
    with np.errstate(over="ignore", invalid="ignore"):  # (a signaling NaN input: NaN out)
        out = np.negative(xf)  # 1.f / (1.f + std::exp(-x)), in place after the first op
        np.exp(out, out=out)
        out += np.float32(1)
        np.divide(np.float32(1), out, out=out)
    return [float_result(out, ctx)]


def _execute_hard_swish(ctx: OperationContext) -> list[np.ndarray]:
    x = ctx.value(0)
    t = ctx.input_type(0)
    if t in QUANT8_ASYMM_TYPES:
        key, recipe = _hard_swish_recipe(ctx)
        return [lookup_unary(key, recipe, x, t)]
    xf = float_kernel(x)
    # in * std::min(6, std::max(0, in + 3)) / 6: the clamp turns a NaN into 0, but then
    # in is NaN and so is the product, so np.clip's NaN propagation gives the same.
    with np.errstate(invalid="ignore"):  # -inf * 0
        relu6 = xf + np.float32(3)
        np.clip(relu6, np.float32(0), np.float32(6), out=relu6)
        relu6 *= xf
        relu6 /= np.float32(6)
    return [float_result(relu6, ctx)]


def _execute_elu(ctx: OperationContext) -> list[np.ndarray]:
    xf = float_kernel(ctx.value(0))
    alpha = np.float32(ctx.scalar(1))
    with np.errstate(over="ignore", invalid="ignore"):
        # std::max(0.f, x) + std::min(0.f, alpha * (std::exp(x) - 1)): each NaN term is 0.
        neg = np.exp(xf)
        neg -= np.float32(1)
        neg *= alpha
        np.clip(neg, -np.inf, np.float32(0), out=neg)
        replace_nan(neg, 0.0)
        out = clamp_float(xf, 0.0, np.inf, nan=0.0)
        out += neg
    return [float_result(out, ctx)]


def _unary_sigs(types_by_version) -> tuple[Signature, ...]:
    return tuple(Signature((t,), (t,), v) for v, types in types_by_version for t in types)


_RELU_TYPES = [
    (V.V1_0, (_T.TENSOR_FLOAT32, _T.TENSOR_QUANT8_ASYMM)),
    (V.V1_2, (_T.TENSOR_FLOAT16,)),
    (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED,)),
]


def _declare(op, sigs, execute, summary) -> OperationDeclaration:
    return OperationDeclaration(
        op,
        sigs,
        infer_shapes=_infer_same,
        execute=execute,
        validate=_validate_activation,
        summary=summary,
    )


RELU = _declare(
    OperationType.RELU,
    _unary_sigs(_RELU_TYPES),
    _execute_relu,
    "max(0, x) elementwise; quantized output keeps the input's scale and zero point.",
)
RELU1 = _declare(
    OperationType.RELU1,
    _unary_sigs(_RELU_TYPES),
    _execute_relu,
    "min(1, max(-1, x)) elementwise; quantized output keeps the input's scale and zero point.",
)
RELU6 = _declare(
    OperationType.RELU6,
    _unary_sigs(_RELU_TYPES),
    _execute_relu,
    "min(6, max(0, x)) elementwise; quantized output keeps the input's scale and zero point.",
)
LOGISTIC = _declare(
    OperationType.LOGISTIC,
    _unary_sigs(_RELU_TYPES),
    _execute_logistic_tanh,
    "1 / (1 + exp(-x)) elementwise; quant8 output scale is 1/256 with zero point 0 "
    "(-128 signed), computed in gemmlowp fixed point.",
)
TANH = _declare(
    OperationType.TANH,
    _unary_sigs(
        [
            (V.V1_0, (_T.TENSOR_FLOAT32,)),
            (V.V1_2, (_T.TENSOR_FLOAT16, _T.TENSOR_QUANT8_ASYMM)),
            (V.V1_3, (_T.TENSOR_QUANT8_ASYMM_SIGNED,)),
        ]
    ),
    _execute_logistic_tanh,
    "tanh(x) elementwise; quant8 output scale is 1/128 with zero point 128 (0 signed), "
    "computed in gemmlowp fixed point.",
)
ELU = _declare(
    OperationType.ELU,
    (
        Signature((_T.TENSOR_FLOAT16, _T.FLOAT16), (_T.TENSOR_FLOAT16,), V.V1_3),
        Signature((_T.TENSOR_FLOAT32, _T.FLOAT32), (_T.TENSOR_FLOAT32,), V.V1_3),
    ),
    _execute_elu,
    "Exponential linear unit: max(0, x) + min(0, alpha * (exp(x) - 1)).",
)
HARD_SWISH = _declare(
    OperationType.HARD_SWISH,
    _unary_sigs(
        [
            (
                V.V1_3,
                (
                    _T.TENSOR_FLOAT16,
                    _T.TENSOR_FLOAT32,
                    _T.TENSOR_QUANT8_ASYMM,
                    _T.TENSOR_QUANT8_ASYMM_SIGNED,
                ),
            )
        ]
    ),
    _execute_hard_swish,
    "x * relu6(x + 3) / 6 elementwise; quantized in tflite's int16 fixed point.",
)

DECLARATIONS: tuple[OperationDeclaration, ...] = (
    RELU,
    RELU1,
    RELU6,
    LOGISTIC,
    TANH,
    ELU,
    HARD_SWISH,
)
