"""Model, request and option validation: one row per rule, per HAL version.

Each rule row takes a small valid model, applies one mutation that breaks exactly that
rule, and checks the status (INVALID_ARGUMENT) and that the message names the right
subgraph and operand/operation index. The valid-model rows check the same models pass
at the lowest HAL version that can express them and fail just below it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from driver.builder import ModelBuilder, build_request
from driver.hal.types import (
    BufferDesc,
    BufferRole,
    BufferToken,
    DataLocation,
    ErrorStatus,
    ExtensionNameAndPrefix,
    HalError,
    HalVersion,
    Memory,
    Model,
    OperandLifeTime,
    Operation,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    make_extension_type,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import BytesHandle, SharedMemory, allocate_shared_memory
from driver.operations import family_of
from driver.testing import assert_rejected
from driver.validation import (
    FLT_MAX,
    FLT_TRUE_MIN,
    MAX_OPERAND_BYTES,
    combine_dimensions,
    operation_versions,
    validate_buffer_desc_and_roles,
    validate_deadline,
    validate_execution,
    validate_execution_preference,
    validate_measure,
    validate_model,
    validate_priority,
    validate_request,
)
from tests.operations.examples import all_examples

V = HalVersion
L = OperandLifeTime
F32 = T.TENSOR_FLOAT32
EXT_TYPE = make_extension_type(7, 1)
EXT_OP = make_extension_type(7, 3)

# ---------------------------------------------------------------------------------------
# Model surgery (models are frozen: every helper returns a new one)
# ---------------------------------------------------------------------------------------


def sub(model: Model, sg: int | None = None) -> Subgraph:
    return model.subgraph(sg)


def with_subgraph(model: Model, sg: int | None = None, **changes) -> Model:
    new = dataclasses.replace(sub(model, sg), **changes)
    if sg is None:
        return dataclasses.replace(model, main=new)
    referenced = list(model.referenced)
    referenced[sg] = new
    return dataclasses.replace(model, referenced=tuple(referenced))


def with_operand(model: Model, k: int, sg: int | None = None, **changes) -> Model:
    operands = list(sub(model, sg).operands)
    operands[k] = dataclasses.replace(operands[k], **changes)
    return with_subgraph(model, sg, operands=tuple(operands))


def with_location(model: Model, k: int, sg: int | None = None, **changes) -> Model:
    loc = dataclasses.replace(sub(model, sg).operands[k].location, **changes)
    return with_operand(model, k, sg, location=loc)


def with_operation(model: Model, k: int, sg: int | None = None, **changes) -> Model:
    operations = list(sub(model, sg).operations)
    operations[k] = dataclasses.replace(operations[k], **changes)
    return with_subgraph(model, sg, operations=tuple(operations))


def with_pool(model: Model, k: int, **changes) -> Model:
    pools = list(model.pools)
    pools[k] = dataclasses.replace(pools[k], **changes)
    return dataclasses.replace(model, pools=tuple(pools))


# ---------------------------------------------------------------------------------------
# Base models (operand indexes are part of each builder's contract: rows name them)
# ---------------------------------------------------------------------------------------


def two_adds(
    type: int = F32, *, relaxed: bool = False, input_dims=(2, 2), act: int = 0, **quant
) -> Model:
    """0 x (input) + 1 c (CONSTANT_COPY) -> 3 t; 3 t + 4 r (CONSTANT_REFERENCE) -> 5 y
    (output); 2 is the shared activation scalar (CONSTANT_COPY)."""
    b = ModelBuilder(relaxed=relaxed)
    x = b.add_input(type, input_dims, **quant)
    c = b.add_constant(type, (2, 2), [1, 2, 3, 4], **quant)
    act = b.add_scalar(T.INT32, act)
    t = b.add_operand(type, (2, 2), **quant)
    r = b.add_constant(type, (2, 2), [4, 3, 2, 1], by_reference=True, **quant)
    y = b.add_output(type, (2, 2), **quant)
    b.add_operation(O.ADD, [x, c, act], [t])
    b.add_operation(O.ADD, [t, r, act], [y])
    return b.build()


def quant_add(type: int = T.TENSOR_QUANT8_ASYMM, zero_point: int = 3) -> Model:
    return two_adds(type, scale=0.5, zero_point=zero_point)


def oem(type: int, dims=(2,), *, const=None, omitted: bool = False, **kw) -> Model:
    """OEM_OPERATION(0 operand under test) -> 1 output: the OEM operation takes any
    operands, so the operand rules are tested without any operation's own rules."""
    b = ModelBuilder()
    if omitted:
        i = b.add_omitted(type, dims, **kw)
    elif const is not None:
        i = b.add_operand(type, dims, **kw)
        b.set_value_bytes(i, const)
    else:
        i = b.add_input(type, dims, **kw)
    out = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [i], [out])
    model = b.build()
    if type >> 16:
        model = dataclasses.replace(
            model, extension_name_to_prefix=(ExtensionNameAndPrefix("com.example.ext", 7),)
        )
    return model


def per_channel(dims=(2, 1), scales=(0.5, 0.25), channel_dim=0) -> Model:
    """A per-channel constant (operand 0) fed to an OEM operation."""
    b = ModelBuilder()
    q = SymmPerChannelQuantParams(channel_dim, tuple(scales))
    w = b.add_constant(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL, dims, [1] * math.prod(dims), channel_quant=q
    )
    out = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [w], [out])
    return b.build()


def subgraph_refs(*edges: tuple[int, int], n: int = 2) -> Model:
    """Main: OEM_OPERATION(0 x, 1 SUBGRAPH -> subgraph 0) -> 2. Referenced subgraph k:
    0 a + 1 c -> 3 out (ADD; 2 is the activation), plus, per edge (k, j), an OEM
    operation consuming a SUBGRAPH operand that names subgraph j."""
    b = ModelBuilder()
    subs = [b.new_subgraph() for _ in range(n)]
    for k, sg in enumerate(subs):
        a = sg.add_input(F32, (2,))
        c = sg.add_constant(F32, (2,), [1, 2])
        act = sg.add_scalar(T.INT32, 0)
        out = sg.add_output(F32, (2,))
        sg.add_operation(O.ADD, [a, c, act], [out])
        for src, dst in edges:
            if src == k:
                ref = sg.add_subgraph_operand(subs[dst])
                extra = sg.add_output(F32, (1,))
                sg.add_operation(O.OEM_OPERATION, [ref], [extra])
    x = b.add_input(F32, (2,))
    s0 = b.add_subgraph_operand(subs[0])
    y = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [x, s0], [y])
    return b.build()


def if_model() -> Model:
    """IF(0 cond, 1 then, 2 else, 3 x) -> 4 y; both branches are one ADD."""
    b = ModelBuilder()
    branches = []
    for const in ([1.0, 1.0], [-1.0, -1.0]):
        sg = b.new_subgraph()
        a = sg.add_input(F32, (2,))
        c = sg.add_constant(F32, (2,), const)
        act = sg.add_scalar(T.INT32, 0)
        out = sg.add_output(F32, (2,))
        sg.add_operation(O.ADD, [a, c, act], [out])
        branches.append(sg)
    cond = b.add_input(T.TENSOR_BOOL8, (1,))
    then_ = b.add_subgraph_operand(branches[0])
    else_ = b.add_subgraph_operand(branches[1])
    x = b.add_input(F32, (2,))
    y = b.add_output(F32, (2,))
    b.add_operation(O.IF, [cond, then_, else_, x], [y])
    return b.build()


def softmax_3d() -> Model:
    """SOFTMAX of a rank-3 input: its types match a 1.0 signature, but HAL 1.0/1.1 take
    2-D and 4-D inputs only (the hook requires 1.2 through ``ctx.require_version``)."""
    b = ModelBuilder()
    x = b.add_input(F32, (2, 3, 4))
    y = b.add_output(F32, (2, 3, 4))
    b.add_operation(O.SOFTMAX, [x, b.add_scalar(T.FLOAT32, 1.0)], [y])
    return b.build()


def blob_pool(model: Model) -> Model:
    return with_pool(model, 0, name="hardware_buffer_blob")


def extension_model(type: int = EXT_TYPE) -> Model:
    """An extension operand (0, with an extension blob) into an extension operation
    (or, with ``type``, a standard operand)."""
    b = ModelBuilder()
    x = b.add_input(type, (3,), extra_params=b"\x01\x02" if type == EXT_TYPE else None)
    y = b.add_output(F32, (3,))
    b.add_operation(EXT_OP, [x], [y])
    b.use_extension("com.example.ext", 7)
    return b.build()


# ---------------------------------------------------------------------------------------
# Valid models: pass at their lowest version, fail just below it
# ---------------------------------------------------------------------------------------

VALID: list[tuple[str, Callable[[], Model], HalVersion]] = [
    ("float32 adds", two_adds, V.V1_0),
    ("quant8 adds", quant_add, V.V1_0),
    ("relaxed float32", lambda: two_adds(relaxed=True), V.V1_1),
    ("float16 adds", lambda: two_adds(T.TENSOR_FLOAT16), V.V1_2),
    ("unknown-rank input", lambda: two_adds(input_dims=()), V.V1_2),
    ("unknown input dims", lambda: two_adds(input_dims=(0, 2)), V.V1_0),
    ("hardware_buffer_blob pool", lambda: blob_pool(two_adds()), V.V1_2),
    ("signed quant8 adds", lambda: quant_add(T.TENSOR_QUANT8_ASYMM_SIGNED, -3), V.V1_3),
    ("TENSOR_INT32 add", lambda: two_adds(T.TENSOR_INT32), V.V1_3),
    ("OEM byte tensor", lambda: oem(T.TENSOR_OEM_BYTE, (4,), scale=3.0, zero_point=9), V.V1_0),
    ("OEM scalar", lambda: oem(T.OEM, ()), V.V1_0),
    # Unknown rank (1.2) does not lower a newer type's version (a fuzz finding: 1.2).
    (
        "signed quant8 of unknown rank",
        lambda: oem(T.TENSOR_QUANT8_ASYMM_SIGNED, (), scale=0.5),
        V.V1_3,
    ),
    ("omitted operand", lambda: oem(F32, omitted=True), V.V1_0),
    ("per-channel constant", per_channel, V.V1_2),
    ("extension operand and operation", extension_model, V.V1_2),
    ("subgraph references", lambda: subgraph_refs((0, 1)), V.V1_3),
    ("IF", if_model, V.V1_3),
    ("SOFTMAX of rank 3 (a version the hook requires)", softmax_3d, V.V1_2),
    # The map is a 1.2 field, used or not (and 65535 is a valid prefix).
    (
        "an extension map alone",
        lambda: _ext_map(("com.example.ext", 0xFFFF))(two_adds()),
        V.V1_2,
    ),
    # Declared output dims 0 are unknown: any inferred size agrees with them.
    ("unknown output dims", lambda: unspecified_output_model((0, 0)), V.V1_0),
    # The inclusive ends of every range a rule allows.
    ("quant8 zeroPoint 255", lambda: oem(T.TENSOR_QUANT8_ASYMM, scale=1.0, zero_point=255), V.V1_0),
    *[
        (
            f"signed quant8 zeroPoint {zp}",
            lambda zp=zp: oem(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=1.0, zero_point=zp),
            V.V1_3,
        )
        for zp in (-128, 127)
    ],
    (
        "quant16 zeroPoint 65535",
        lambda: oem(T.TENSOR_QUANT16_ASYMM, scale=1.0, zero_point=65535),
        V.V1_2,
    ),
    *[
        (f"quant8 scale {s}", lambda s=s: oem(T.TENSOR_QUANT8_ASYMM, scale=s), V.V1_0)
        for s in (FLT_TRUE_MIN, FLT_MAX)
    ],
    ("TENSOR_INT32 scale FLT_MAX", lambda: oem(T.TENSOR_INT32, scale=FLT_MAX), V.V1_0),
    (
        "per-channel scales at the float32 ends",
        lambda: per_channel(scales=(FLT_TRUE_MIN, FLT_MAX)),
        V.V1_2,
    ),
    # 2^32 - 1 bytes, one dim or several (3 * 5 * 17 * 257 * 65537 = 2^32 - 1).
    *[
        (
            f"tensor of exactly {MAX_OPERAND_BYTES} bytes {list(dims)}",
            lambda dims=dims: oem(T.TENSOR_QUANT8_ASYMM, dims, scale=1.0),
            V.V1_0,
        )
        for dims in ((MAX_OPERAND_BYTES,), (3, 5, 17, 257, 65537))
    ],
]


@pytest.mark.parametrize("name, build, lowest", VALID, ids=[v[0] for v in VALID])
def test_valid_model_passes_from_its_lowest_version(name, build, lowest):
    model = build()
    assert validate_model(model, V.V1_3) == lowest
    for version in V:
        if version >= lowest:
            assert validate_model(model, version) == lowest
        else:
            with pytest.raises(HalError) as e:
                validate_model(model, version)
            assert e.value.status == ErrorStatus.INVALID_ARGUMENT
            assert f"HAL {lowest.label}" in e.value.message or "needs HAL" in e.value.message


def _adds(*, inputs: int = 1, outputs: int = 1, chain_output: bool = False) -> Model:
    """ADD(x, x) -> t, read by nobody unless ``chain_output``; ``inputs`` model inputs
    (only the first one read), ``outputs`` model outputs (ADDs of x), an unused constant."""
    b = ModelBuilder()
    xs = [b.add_input(F32, (2,)) for _ in range(inputs)]
    x = xs[0] if xs else b.add_constant(F32, (2,), [1, 2])
    b.add_constant(F32, (2,), [3, 4])  # nobody reads it
    act = b.add_scalar(T.INT32, 0)
    t = b.add_operand(F32, (2,))
    b.add_operation(O.ADD, [x, x, act], [t])  # the same operand twice: 2 consumers
    prev = x
    for _ in range(outputs):
        y = b.add_output(F32, (2,))
        b.add_operation(O.ADD, [prev, x, act], [y])
        prev = y if chain_output else prev
    return b.build()


def _empty_referenced_subgraph() -> Model:
    m = subgraph_refs((0, 1))
    return dataclasses.replace(m, referenced=(m.referenced[0], Subgraph()))


# Android 11's validateModel (ValidateHal.cpp: validateOperands, validateGraph,
# validateModelInputOutputs) accepts these: nothing requires an operand to be consumed,
# a model to have inputs or outputs, or a referenced subgraph to hold operations.
# Pinned so that no rule of ours rejects them.
ODD_BUT_VALID: list[tuple[str, Callable[[], Model], HalVersion]] = [
    ("no model output", lambda: _adds(outputs=0), V.V1_0),
    ("no model input", lambda: _adds(inputs=0), V.V1_0),
    ("an input nobody reads", lambda: _adds(inputs=2), V.V1_0),
    (
        "a model output read by a later operation",
        lambda: _adds(outputs=2, chain_output=True),
        V.V1_0,
    ),
    ("an empty referenced subgraph", _empty_referenced_subgraph, V.V1_3),
]


@pytest.mark.parametrize("name, build, lowest", ODD_BUT_VALID, ids=[v[0] for v in ODD_BUT_VALID])
def test_models_android_accepts_though_they_look_odd(name, build, lowest):
    model = build()
    assert validate_model(model, V.V1_3) == lowest
    assert validate_model(model, lowest) == lowest


def _one_example_per_family():
    seen: dict[str, object] = {}
    for ex in all_examples():
        seen.setdefault(family_of(ex.op) or "unknown", ex)
    return sorted(seen.items())


@pytest.mark.parametrize(
    "family, ex", _one_example_per_family(), ids=lambda x: getattr(x, "name", x)
)
def test_one_example_per_operation_family_is_valid(family, ex):
    model = ex.model()[0]
    lowest = validate_model(model, V.V1_3)
    assert validate_model(model, lowest) == lowest
    assert operation_versions(model) and max(operation_versions(model)) <= lowest


# ---------------------------------------------------------------------------------------
# Rules: one mutation each
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    name: str
    build: Callable[[], Model]
    mutate: Callable[[Model], Model]
    where: str  # regex the message must match (names subgraph and index)
    version: HalVersion = V.V1_3


def _no_ops(m: Model) -> Model:
    return with_subgraph(m, operations=())


def _swap_ops(m: Model) -> Model:
    return with_subgraph(m, operations=tuple(reversed(m.main.operations)))


def _second_writer(m: Model) -> Model:
    m = with_subgraph(m, operations=(*m.main.operations, m.main.operations[0]))
    for i in set(m.main.operations[0].inputs):  # keep the consumer counts right
        count = sum(op.inputs.count(i) for op in m.main.operations)
        m = with_operand(m, i, number_of_consumers=count)
    return m


def _drop_consumers(m: Model) -> Subgraph:
    """Main subgraph with exact numberOfConsumers for its (edited) operations."""
    counts = [0] * len(m.main.operands)
    for op in m.main.operations:
        for i in op.inputs:
            counts[i] += 1
    operands = tuple(
        dataclasses.replace(o, number_of_consumers=c) for o, c in zip(m.main.operands, counts)
    )
    return dataclasses.replace(m.main, operands=operands)


def _recount(m: Model) -> Model:
    return dataclasses.replace(m, main=_drop_consumers(m))


def _ext_map(*entries) -> Callable[[Model], Model]:
    return lambda m: dataclasses.replace(
        m, extension_name_to_prefix=tuple(ExtensionNameAndPrefix(n, p) for n, p in entries)
    )


def _closed_pool(m: Model) -> Model:
    handle = SharedMemory(16)
    handle.close()
    return with_pool(m, 0, handle=handle)


OPERAND = r"main subgraph, operand"
OPERATION = r"main subgraph, operation"

RULES: list[Rule] = [
    # --- subgraph structure ---------------------------------------------------------------
    Rule("main has no operation", two_adds, _no_ops, r"main subgraph: .*at least one operation"),
    Rule(
        "main has no operand",
        two_adds,
        lambda m: with_subgraph(m, operands=()),
        r"main subgraph: .*at least one operand",
    ),
    Rule(
        "referenced subgraphs need 1.3",
        lambda: subgraph_refs((0, 1)),
        lambda m: m,
        r"referenced subgraphs .*needs HAL 1\.3",
        V.V1_2,
    ),
    Rule(
        "subgraph references itself",
        lambda: subgraph_refs((0, 0)),
        lambda m: m,
        r"cycle: subgraph 0 -> subgraph 0",
    ),
    Rule(
        "two subgraphs reference each other",
        lambda: subgraph_refs((0, 1), (1, 0)),
        lambda m: m,
        r"cycle: subgraph 0 -> subgraph 1 -> subgraph 0",
    ),
    Rule(
        "a referenced subgraph is validated",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_operand(m, 1, 1, scale=2.0),
        r"^subgraph 1, operand 1: TENSOR_FLOAT32 must have scale 0",
    ),
    Rule(
        "a referenced subgraph's graph is validated",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_operand(m, 0, 0, number_of_consumers=3),
        r"^subgraph 0, operand 0: numberOfConsumers is 3 but 1",
    ),
    # --- operand types --------------------------------------------------------------------
    *[
        Rule(
            f"operand type code {code}",
            two_adds,
            lambda m, code=code: with_operand(m, 1, type=code),
            rf"{OPERAND} 1: invalid operand type {code}",
        )
        for code in (-1, 16, 9999, 10002, 2**32, 2**40)
    ],
    Rule(
        "float16 needs 1.2",
        lambda: two_adds(T.TENSOR_FLOAT16),
        lambda m: m,
        rf"{OPERAND} 0: operand type TENSOR_FLOAT16 needs HAL 1\.2",
        V.V1_1,
    ),
    Rule(
        "signed quant8 needs 1.3",
        lambda: quant_add(T.TENSOR_QUANT8_ASYMM_SIGNED, 0),
        lambda m: m,
        rf"{OPERAND} 0: operand type TENSOR_QUANT8_ASYMM_SIGNED needs HAL 1\.3",
        V.V1_2,
    ),
    Rule(
        "extension operand needs 1.2",
        extension_model,
        lambda m: m,
        r"extensionNameToPrefix needs HAL 1\.2",
        V.V1_1,
    ),
    Rule(
        "extension operand type with an unmapped prefix",
        extension_model,
        lambda m: with_operand(m, 0, type=make_extension_type(8, 1)),
        rf"{OPERAND} 0: extension operand type 0x80001 has prefix 8",
    ),
    Rule(
        "extension operand with a scale",
        extension_model,
        lambda m: with_operand(m, 0, scale=1.0),
        rf"{OPERAND} 0: EXTENSION.* must have scale 0",
    ),
    Rule(
        "extension operand with a zero point",
        extension_model,
        lambda m: with_operand(m, 0, zero_point=1),
        rf"{OPERAND} 0: EXTENSION.* zeroPoint must be 0",
    ),
    Rule(
        "extension operand with per-channel params",
        extension_model,
        lambda m: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(0, (1.0,) * 3)),
        rf"{OPERAND} 0: an extension operand's extraParams must be none or an extension blob",
    ),
    # --- ranks and dimensions -------------------------------------------------------------
    Rule(
        "scalar with dimensions",
        two_adds,
        lambda m: with_operand(m, 2, dimensions=(1,)),
        rf"{OPERAND} 2: scalar type INT32 must have rank 0",
    ),
    Rule(
        "OEM scalar with dimensions",
        lambda: oem(T.OEM, ()),
        lambda m: with_operand(m, 0, dimensions=(1,)),
        rf"{OPERAND} 0: scalar type OEM must have rank 0",
    ),
    Rule(
        "unknown rank needs 1.2",
        lambda: two_adds(input_dims=()),
        lambda m: m,
        rf"{OPERAND} 0: a tensor of unknown rank needs HAL 1\.2",
        V.V1_1,
    ),
    Rule(
        "constant of unknown rank",
        two_adds,
        lambda m: with_operand(m, 1, dimensions=()),
        rf"{OPERAND} 1: a constant tensor must have a rank",
    ),
    Rule(
        "negative dimension",
        two_adds,
        lambda m: with_operand(m, 0, dimensions=(2, -2)),
        rf"{OPERAND} 0: dimensions \[2, -2\] are not all uint32",
    ),
    Rule(
        "dimension beyond uint32",
        two_adds,
        lambda m: with_operand(m, 3, dimensions=(2**32, 2)),
        rf"{OPERAND} 3: dimensions .* are not all uint32",
    ),
    # Only a Python caller can send these (HIDL carries vec<uint32_t>): None passed as
    # "unknown rank" and failed in prepare, 2.0 passed as 2.
    Rule(
        "dimensions None",
        two_adds,
        lambda m: with_operand(m, 0, dimensions=None),
        rf"{OPERAND} 0: dimensions None are not a uint32 list",
    ),
    Rule(
        "float dimensions",
        two_adds,
        lambda m: with_operand(m, 0, dimensions=(2.0, 2.0)),
        rf"{OPERAND} 0: dimensions \[2.0, 2.0\] are not all uint32",
    ),
    Rule(
        "string dimension",
        two_adds,
        lambda m: with_operand(m, 3, dimensions=("2", 2)),
        rf"{OPERAND} 3: dimensions \['2', 2\] are not all uint32",
    ),
    Rule(
        "tensor larger than uint32 bytes",
        two_adds,
        lambda m: with_operand(m, 3, dimensions=(65536, 65536)),
        rf"{OPERAND} 3: TENSOR_FLOAT32 \[65536, 65536\] is larger than {MAX_OPERAND_BYTES} bytes",
    ),
    Rule(
        "known dims of a partly unknown tensor larger than uint32 bytes",
        two_adds,
        lambda m: with_operand(m, 3, dimensions=(0, 2**31, 4)),
        rf"{OPERAND} 3: .* is larger than",
    ),
    # --- scale ----------------------------------------------------------------------------
    *[
        Rule(
            f"float tensor scale {s}",
            two_adds,
            lambda m, s=s: with_operand(m, 0, scale=s),
            rf"{OPERAND} 0: TENSOR_FLOAT32 must have scale 0",
        )
        for s in (0.5, -1.0, math.nan, math.inf)
    ],
    Rule(
        "scalar with a scale",
        two_adds,
        lambda m: with_operand(m, 2, scale=1.0),
        rf"{OPERAND} 2: INT32 must have scale 0",
    ),
    *[
        Rule(
            f"TENSOR_INT32 scale {s}",
            lambda: oem(T.TENSOR_INT32),
            lambda m, s=s: with_operand(m, 0, scale=s),
            rf"{OPERAND} 0: TENSOR_INT32 needs a finite scale >= 0",
        )
        for s in (-1.0, math.nan, math.inf, 1e39)
    ],
    *[
        Rule(
            f"{t.name} scale {s}",
            lambda t=t: oem(t, scale=1.0),
            lambda m, s=s: with_operand(m, 0, scale=s),
            rf"{OPERAND} 0: {t.name} needs a finite scale > 0",
        )
        for t in (
            T.TENSOR_QUANT8_ASYMM,
            T.TENSOR_QUANT8_ASYMM_SIGNED,
            T.TENSOR_QUANT8_SYMM,
            T.TENSOR_QUANT16_ASYMM,
            T.TENSOR_QUANT16_SYMM,
        )
        for s in (0.0, -0.5, math.nan, math.inf, 1e-50, 1e39)  # last two: not float32
    ],
    # --- zero point -----------------------------------------------------------------------
    *[
        Rule(
            f"{t.name} zeroPoint {zp}",
            lambda t=t: oem(t, scale=1.0 if t != F32 else 0.0),
            lambda m, zp=zp: with_operand(m, 0, zero_point=zp),
            rf"{OPERAND} 0: {t.name} zeroPoint must be",
        )
        for t, zps in (
            (T.TENSOR_QUANT8_ASYMM, (-1, 256)),
            (T.TENSOR_QUANT8_ASYMM_SIGNED, (-129, 128)),
            (T.TENSOR_QUANT16_ASYMM, (-1, 65536)),
            (T.TENSOR_QUANT8_SYMM, (-1, 1)),
            (T.TENSOR_QUANT16_SYMM, (-1, 1)),
            (F32, (1,)),
        )
        for zp in zps
    ],
    # --- extra params ---------------------------------------------------------------------
    Rule(
        "per-channel type without params",
        per_channel,
        lambda m: with_operand(m, 0, extra_params=None),
        rf"{OPERAND} 0: TENSOR_QUANT8_SYMM_PER_CHANNEL needs per-channel quantization params",
    ),
    Rule(
        "per-channel channelDim beyond the rank",
        per_channel,
        lambda m: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(2, (0.5, 0.25))),
        rf"{OPERAND} 0: .* channelDim 2 is not a dimension",
    ),
    Rule(
        "per-channel scale count",
        per_channel,
        lambda m: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(0, (0.5,))),
        rf"{OPERAND} 0: .* has 1 scales for 2 channels",
    ),
    Rule(
        "per-channel scales beyond the channels",
        per_channel,
        lambda m: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(0, (0.5, 0.25, 0.5))),
        rf"{OPERAND} 0: .* has 3 scales for 2 channels",
    ),
    *[
        Rule(
            f"per-channel scale {s}",
            per_channel,
            lambda m, s=s: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(0, (0.5, s))),
            rf"{OPERAND} 0: .* scales\[1\] must be finite and > 0",
        )
        for s in (0.0, -1.0, math.nan, math.inf, 1e-50, 1e39)
    ],
    Rule(
        "per-channel operand with an unknown channel dimension",
        lambda: oem(
            T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
            (0, 2),
            channel_quant=SymmPerChannelQuantParams(1, (0.5, 0.5)),
        ),
        lambda m: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(0, ())),
        rf"{OPERAND} 0: .* channel dimension 0 must be specified",
    ),
    Rule(
        "per-channel params on a quant8 tensor",
        lambda: oem(T.TENSOR_QUANT8_ASYMM, scale=1.0),
        lambda m: with_operand(m, 0, extra_params=SymmPerChannelQuantParams(0, (1.0, 1.0))),
        rf"{OPERAND} 0: TENSOR_QUANT8_ASYMM takes no extraParams",
    ),
    Rule(
        "extension blob on a float tensor",
        two_adds,
        lambda m: with_operand(m, 0, extra_params=b"x"),
        rf"{OPERAND} 0: TENSOR_FLOAT32 takes no extraParams",
    ),
    # --- extension map --------------------------------------------------------------------
    Rule(
        "extension name mapped twice",
        extension_model,
        _ext_map(("com.example.ext", 7), ("com.example.ext", 8)),
        r"extensionNameToPrefix\[1\]: extension 'com.example.ext' is mapped twice",
    ),
    Rule(
        "prefix mapped twice",
        extension_model,
        _ext_map(("com.example.ext", 7), ("com.example.other", 7)),
        r"extensionNameToPrefix\[1\]: prefix 7 is mapped twice",
    ),
    *[
        Rule(
            f"prefix {p}",
            extension_model,
            _ext_map(("com.example.ext", p)),
            r"extensionNameToPrefix\[0\]: prefix must be in \[1, 65535\]",
        )
        for p in (0, -1, 65536)
    ],
    Rule(
        "empty extension name",
        extension_model,
        _ext_map(("", 7)),
        r"extensionNameToPrefix\[0\]: extension name must be a non-empty string",
    ),
    # --- lifetimes and locations ----------------------------------------------------------
    Rule(
        "CONSTANT_COPY in another pool",
        two_adds,
        lambda m: with_location(m, 1, pool_index=1),
        rf"{OPERAND} 1: CONSTANT_COPY needs poolIndex 0, got 1",
    ),
    Rule(
        "CONSTANT_COPY beyond operandValues",
        two_adds,
        lambda m: with_location(m, 2, offset=len(m.operand_values) - 2),
        rf"{OPERAND} 2: CONSTANT_COPY offset \d+ \+ length 4 is beyond operandValues",
    ),
    Rule(
        "CONSTANT_COPY one byte beyond operandValues",
        two_adds,
        lambda m: with_location(m, 2, offset=len(m.operand_values) - 3),
        rf"{OPERAND} 2: CONSTANT_COPY offset \d+ \+ length 4 is beyond operandValues",
    ),
    Rule(
        "CONSTANT_COPY offset near 2^32 (no wrap-around)",
        two_adds,
        lambda m: with_location(m, 1, offset=2**32 - 8),
        rf"{OPERAND} 1: CONSTANT_COPY offset 4294967288 \+ length 16 is beyond",
    ),
    Rule(
        "CONSTANT_COPY offset beyond uint32",
        two_adds,
        lambda m: with_location(m, 1, offset=2**32),
        rf"{OPERAND} 1: location .* is not all uint32",
    ),
    Rule(
        "negative length",
        two_adds,
        lambda m: with_location(m, 1, length=-16),
        rf"{OPERAND} 1: location .* is not all uint32",
    ),
    Rule(
        "constant length differs from its size",
        two_adds,
        lambda m: with_location(m, 1, length=12),
        rf"{OPERAND} 1: constant TENSOR_FLOAT32 \[2, 2\] needs length 16, got 12",
    ),
    Rule(
        "constant longer than its size (within operandValues)",
        two_adds,
        lambda m: with_location(m, 1, offset=0, length=20),
        rf"{OPERAND} 1: constant TENSOR_FLOAT32 \[2, 2\] needs length 16, got 20",
    ),
    Rule(
        "constant scalar length",
        two_adds,
        lambda m: with_location(m, 2, length=2),
        rf"{OPERAND} 2: constant INT32 \[\] needs length 4, got 2",
    ),
    Rule(
        "constant with an unknown dimension",
        two_adds,
        lambda m: with_operand(m, 1, dimensions=(4, 0)),
        rf"{OPERAND} 1: a constant tensor needs fully specified dimensions",
    ),
    Rule(
        "CONSTANT_REFERENCE pool out of range",
        two_adds,
        lambda m: with_location(m, 4, pool_index=3),
        rf"{OPERAND} 4: CONSTANT_REFERENCE poolIndex 3 is out of range \(1 pools\)",
    ),
    Rule(
        "CONSTANT_REFERENCE poolIndex -1 (not the last pool)",
        two_adds,
        lambda m: with_location(m, 4, pool_index=-1),
        rf"{OPERAND} 4: location \(poolIndex -1, offset 0, length 16\) is not all uint32",
    ),
    Rule(
        "CONSTANT_REFERENCE beyond its pool",
        two_adds,
        lambda m: with_location(m, 4, offset=8),
        rf"{OPERAND} 4: CONSTANT_REFERENCE offset 8 \+ length 16 is beyond pool 0",
    ),
    Rule(
        "CONSTANT_REFERENCE one byte beyond its pool",
        two_adds,
        lambda m: with_location(m, 4, offset=1),
        rf"{OPERAND} 4: CONSTANT_REFERENCE offset 1 \+ length 16 is beyond pool 0",
    ),
    *[
        Rule(
            f"{lt} operand with a location",
            build,
            lambda m, k=k: with_location(m, k, length=4),
            rf"{OPERAND} {k}: lifetime {lt} needs an all-zero location",
        )
        for lt, build, k in (
            ("TEMPORARY_VARIABLE", two_adds, 3),
            ("SUBGRAPH_INPUT", two_adds, 0),
            ("SUBGRAPH_OUTPUT", two_adds, 5),
            ("NO_VALUE", lambda: oem(F32, omitted=True), 0),
        )
    ],
    *[
        Rule(
            f"lifetime code {code}",
            two_adds,
            lambda m, code=code: with_operand(m, 3, lifetime=code),
            rf"{OPERAND} 3: invalid lifetime {code}",
        )
        for code in (-1, 7, 2**32)
    ],
    Rule(
        "SUBGRAPH operand in a pool",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_location(m, 1, pool_index=1),
        rf"{OPERAND} 1: a SUBGRAPH operand needs poolIndex 0 and length 0",
    ),
    Rule(
        "SUBGRAPH operand with a length",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_location(m, 1, length=4),
        rf"{OPERAND} 1: a SUBGRAPH operand needs poolIndex 0 and length 0",
    ),
    Rule(
        "SUBGRAPH operand naming no subgraph",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_location(m, 1, offset=2),
        rf"{OPERAND} 1: SUBGRAPH offset 2 names no referenced subgraph \(2 exist\)",
    ),
    Rule(
        "SUBGRAPH offset -1 (not the last subgraph)",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_location(m, 1, offset=-1),
        rf"{OPERAND} 1: SUBGRAPH offset -1 names no referenced subgraph",
    ),
    Rule(
        "type SUBGRAPH without lifetime SUBGRAPH",
        two_adds,
        lambda m: with_operand(m, 2, type=T.SUBGRAPH),
        rf"{OPERAND} 2: operand type SUBGRAPH cannot have lifetime CONSTANT_COPY",
    ),
    Rule(
        "lifetime SUBGRAPH without type SUBGRAPH",
        lambda: subgraph_refs((0, 1)),
        lambda m: with_operand(m, 1, type=T.INT32),
        rf"{OPERAND} 1: operand type INT32 cannot have lifetime SUBGRAPH",
    ),
    # --- operations -----------------------------------------------------------------------
    *[
        Rule(
            f"operation type code {code}",
            two_adds,
            lambda m, code=code: with_operation(m, 1, type=code),
            rf"{OPERATION} 1: invalid operation type {code}",
        )
        for code in (-1, 102, 9999, 10001, 2**32)
    ],
    Rule(
        "extension operand type without the map before 1.2",
        extension_model,
        lambda m: dataclasses.replace(m, extension_name_to_prefix=()),
        rf"{OPERAND} 0: an extension operand type needs HAL 1\.2",
        V.V1_1,
    ),
    Rule(
        "extension operation needs 1.2",
        lambda: extension_model(F32),
        lambda m: dataclasses.replace(m, extension_name_to_prefix=()),
        rf"{OPERATION} 0 \(EXTENSION_OP\(prefix=7, type=3\)\): an extension operation needs HAL 1\.2",
        V.V1_1,
    ),
    Rule(
        "extension operation with an unmapped prefix",
        extension_model,
        lambda m: with_operation(m, 0, type=make_extension_type(9, 3)),
        rf"{OPERATION} 0 \(EXTENSION_OP\(prefix=9, type=3\)\): prefix 9 is not mapped",
    ),
    Rule(
        "operation input index out of range",
        two_adds,
        lambda m: with_operation(m, 1, inputs=(3, 99, 2)),
        rf"{OPERATION} 1 \(ADD\): input 1 is operand 99, out of range \(6 operands\)",
    ),
    Rule(
        "negative operation input index",
        two_adds,
        lambda m: with_operation(m, 0, inputs=(-1, 1, 2)),
        rf"{OPERATION} 0 \(ADD\): input 0 is operand -1, out of range",
    ),
    Rule(
        "operation output index out of range",
        two_adds,
        lambda m: with_operation(m, 1, outputs=(6,)),
        rf"{OPERATION} 1 \(ADD\): output 0 is operand 6, out of range",
    ),
    Rule(
        "negative operation output index (not the last operand)",
        two_adds,
        lambda m: with_operation(m, 1, outputs=(-1,)),
        rf"{OPERATION} 1 \(ADD\): output 0 is operand -1, out of range",
    ),
    Rule(
        "operation writes a constant",
        two_adds,
        lambda m: with_operation(m, 0, outputs=(1,)),
        rf"{OPERATION} 0 \(ADD\): output 0 \(operand 1\) has lifetime CONSTANT_COPY",
    ),
    Rule(
        "operation writes a model input",
        two_adds,
        lambda m: with_operation(m, 0, outputs=(0,)),
        rf"{OPERATION} 0 \(ADD\): output 0 \(operand 0\) has lifetime SUBGRAPH_INPUT",
    ),
    Rule(
        "operation needs a newer version than its operand types",
        lambda: two_adds(T.TENSOR_INT32),
        lambda m: m,
        rf"{OPERATION} 0 \(ADD\): this use of ADD needs HAL 1\.3",
        V.V1_2,
    ),
    Rule(
        "no signature matches",
        two_adds,
        lambda m: with_operand(m, 3, type=T.TENSOR_INT32),
        rf"{OPERATION} 0 \(ADD\): no signature of ADD takes inputs \(TENSOR_FLOAT32, TENSOR_FLOAT32, INT32\) and outputs \(TENSOR_INT32\)",
    ),
    Rule(
        "operation's own validate hook",
        lambda: two_adds(act=7),
        lambda m: m,
        rf"{OPERATION} 0 \(ADD\): .*fused activation",
    ),
    Rule(
        "declared output shape contradicts the inputs",
        two_adds,
        lambda m: with_operand(m, 5, dimensions=(3, 2)),
        rf"{OPERATION} 1 \(ADD\): output 0 \(operand 5\) is declared \[3, 2\] but the inputs give \[2, 2\]",
    ),
    Rule(
        "declared output of another rank than the inputs give",
        two_adds,
        lambda m: with_operand(m, 5, dimensions=(2,)),
        rf"{OPERATION} 1 \(ADD\): output 0 \(operand 5\) is declared \[2\] but the inputs give \[2, 2\]",
    ),
    # --- graph ----------------------------------------------------------------------------
    Rule(
        "operations out of execution order",
        two_adds,
        _swap_ops,
        rf"{OPERATION} 0 \(ADD\): input 0 \(operand 3\) is read before it is written",
    ),
    Rule(
        "a second writer",
        two_adds,
        _second_writer,
        rf"{OPERATION} 2 \(ADD\): output 0 \(operand 3\) has already been written",
    ),
    Rule(
        "an operand nobody writes",
        two_adds,
        lambda m: _recount(with_subgraph(m, operations=m.main.operations[:1])),
        rf"{OPERAND} 5: is never written",
    ),
    *[
        Rule(
            f"numberOfConsumers {n}",
            two_adds,
            lambda m, n=n: with_operand(m, 2, number_of_consumers=n),
            rf"{OPERAND} 2: numberOfConsumers is {n} but 2 operation inputs read it",
        )
        for n in (0, 1, 3, -1, 2**40)
    ],
    # --- input and output lists -----------------------------------------------------------
    Rule(
        "input list index out of range",
        two_adds,
        lambda m: with_subgraph(m, input_indexes=(0, 6)),
        r"main subgraph, input list entry 1: operand 6 is out of range",
    ),
    *[
        Rule(
            f"{what} list entry -1 (not the last operand)",
            two_adds,
            lambda m, what=what: with_subgraph(m, **{f"{what}_indexes": (-1,)}),
            rf"main subgraph, {what} list entry 0: operand -1 is out of range",
        )
        for what in ("input", "output")
    ],
    Rule(
        "input list names a constant",
        two_adds,
        lambda m: with_subgraph(m, input_indexes=(0, 1)),
        r"main subgraph, input list entry 1: operand 1 has lifetime CONSTANT_COPY, expected SUBGRAPH_INPUT",
    ),
    Rule(
        "input listed twice",
        two_adds,
        lambda m: with_subgraph(m, input_indexes=(0, 0)),
        r"main subgraph, input list entry 1: operand 0 is listed twice",
    ),
    Rule(
        "an input missing from the input list",
        two_adds,
        lambda m: with_subgraph(m, input_indexes=()),
        rf"{OPERAND} 0: has lifetime SUBGRAPH_INPUT but is not in the input list",
    ),
    Rule(
        "output list names a temporary",
        two_adds,
        lambda m: with_subgraph(m, output_indexes=(5, 3)),
        r"main subgraph, output list entry 1: operand 3 has lifetime TEMPORARY_VARIABLE",
    ),
    Rule(
        "output listed twice",
        two_adds,
        lambda m: with_subgraph(m, output_indexes=(5, 5)),
        r"main subgraph, output list entry 1: operand 5 is listed twice",
    ),
    Rule(
        "an output missing from the output list",
        two_adds,
        lambda m: with_subgraph(m, output_indexes=()),
        rf"{OPERAND} 5: has lifetime SUBGRAPH_OUTPUT but is not in the output list",
    ),
    # --- pools ----------------------------------------------------------------------------
    Rule(
        "unknown memory name",
        two_adds,
        lambda m: with_pool(m, 0, name="gralloc"),
        r"model pool 0: unknown memory name 'gralloc'",
    ),
    Rule(
        "pool without a handle",
        two_adds,
        lambda m: with_pool(m, 0, handle=None),
        r"model pool 0: ashmem pool has no valid handle",
    ),
    Rule(
        "pool whose handle cannot be mapped",
        two_adds,
        _closed_pool,
        r"model pool 0: ashmem handle cannot be mapped",
    ),
    Rule(
        "pool larger than its mapping",
        two_adds,
        lambda m: with_pool(m, 0, size=2**62),
        r"model pool 0: declares 4611686018427387904 bytes but its handle maps 16",
    ),
    Rule(
        "pool one byte larger than its mapping",
        two_adds,
        lambda m: with_pool(m, 0, size=17),
        r"model pool 0: declares 17 bytes but its handle maps 16",
    ),
    Rule(
        "negative pool size",
        two_adds,
        lambda m: with_pool(m, 0, size=-1),
        r"model pool 0: size -1 is not in \[0, 2\^64\)",
    ),
    Rule(
        "hardware_buffer_blob needs 1.2",
        lambda: blob_pool(two_adds()),
        lambda m: m,
        r"model pool 0: memory of type 'hardware_buffer_blob' needs HAL 1\.2",
        V.V1_1,
    ),
    Rule(
        "token pool in a model",
        two_adds,
        lambda m: dataclasses.replace(m, pools=(BufferToken(1),)),
        r"model pool 0: a model pool cannot be a buffer token",
    ),
    # --- model-level fields ---------------------------------------------------------------
    Rule(
        "relaxed flag needs 1.1",
        lambda: two_adds(relaxed=True),
        lambda m: m,
        r"relaxComputationFloat32toFloat16 needs HAL 1\.1",
        V.V1_0,
    ),
]


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_violation_is_invalid_argument_naming_the_place(rule):
    base = rule.build()
    bad = rule.mutate(base)
    if bad is not base:  # a mutation of a valid model (else the row's model is the bad one)
        validate_model(base, V.V1_3)
    with pytest.raises(HalError) as e:
        validate_model(bad, rule.version)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT, e.value
    assert re.search(rule.where, e.value.message), e.value.message


def _replace_in(obj, path: str, value):
    """``obj`` with the field at dotted ``path`` (``main.operations[0].inputs``) replaced."""
    head, _, rest = path.partition(".")
    name, _, index = head.partition("[")
    current = getattr(obj, name)
    if index:
        k = int(index.rstrip("]"))
        item = _replace_in(current[k], rest, value) if rest else value
        return dataclasses.replace(obj, **{name: (*current[:k], item, *current[k + 1 :])})
    return dataclasses.replace(obj, **{name: _replace_in(current, rest, value) if rest else value})


# Fields holding what no HIDL caller could send (only Python can): (path, value, message).
MALFORMED_MODELS = [
    ("main.operations[0]", None, r"model\.main\.operations\[0\] is NoneType"),
    ("main.operations[0].inputs", None, r"operations\[0\]\.inputs is NoneType, not a sequence"),
    ("main.operations[0].inputs", (0, "1", 2), r"operations\[0\]\.inputs\[1\] is str '1'"),
    ("main.input_indexes", None, r"model\.main\.input_indexes is NoneType, not a sequence"),
    ("main.operands[0].location", None, r"operands\[0\]\.location is NoneType"),
    ("pools", None, r"model\.pools is NoneType, not a sequence"),
    ("operand_values", None, r"model\.operand_values is NoneType"),
    ("main.operands", (None,), r"model\.main\.operands\[0\] is NoneType"),
]


@pytest.mark.parametrize(
    "path, value, message", MALFORMED_MODELS, ids=[f"{p}={v!r}" for p, v, _ in MALFORMED_MODELS]
)
def test_a_malformed_model_object_is_invalid_argument_naming_the_field(path, value, message):
    with pytest.raises(HalError) as e:
        validate_model(_replace_in(two_adds(), path, value))
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(message, e.value.message), e.value.message


MALFORMED_REQUESTS = [
    ("inputs", None, r"request\.inputs is NoneType, not a sequence"),
    ("inputs[0]", None, r"request\.inputs\[0\] is NoneType"),
    ("inputs[0].location", None, r"request\.inputs\[0\]\.location is NoneType"),
    ("outputs[0].location.offset", "0", r"outputs\[0\]\.location\.offset is str '0'"),
    ("pools", None, r"request\.pools is NoneType, not a sequence"),
]


@pytest.mark.parametrize(
    "path, value, message",
    MALFORMED_REQUESTS,
    ids=[f"{p}={v!r}" for p, v, _ in MALFORMED_REQUESTS],
)
def test_a_malformed_request_object_is_invalid_argument_naming_the_field(path, value, message):
    model, request = simple_request()
    with pytest.raises(HalError) as e:
        validate_request(model, _replace_in(request, path, value))
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(message, e.value.message), e.value.message


def test_a_type_error_on_a_well_formed_model_is_a_bug_and_surfaces(monkeypatch):
    # Only malformed objects become INVALID_ARGUMENT; validation's own bugs must not
    # hide behind a status (the fuzzers would never see them).
    import driver.validation as validation

    def broken(*args, **kw):
        raise TypeError("a validation bug")

    monkeypatch.setattr(validation, "_check_pools", broken)
    with pytest.raises(TypeError, match="a validation bug"):
        validate_model(two_adds())
    with pytest.raises(TypeError, match="a validation bug"):
        validate_request(*simple_request())


def test_rule_names_are_unique():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))


def test_validation_never_materializes_a_declared_size():
    # A constant declaring 2^31 x 2^31 elements and a pool declaring 2^62 bytes are
    # rejected from their numbers alone.
    m = with_operand(two_adds(), 1, dimensions=(2**31, 2**31))
    with pytest.raises(HalError, match="larger than"):
        validate_model(m)
    m = dataclasses.replace(two_adds(), pools=(Memory("ashmem", 2**62, BytesHandle(16)),))
    with pytest.raises(HalError, match="declares 4611686018427387904 bytes"):
        validate_model(m)


def test_huge_rank_is_handled_without_huge_integers():
    dims = (2**32 - 1,) * 5000
    m = with_operand(two_adds(), 3, dimensions=dims)
    with pytest.raises(HalError, match=r"operand 3: .* is larger than"):
        validate_model(m)


def test_operation_hook_bug_is_general_failure_with_cause(monkeypatch):
    """A hook raising a plain Python exception is reported as GENERAL_FAILURE, the
    original exception chained, never escaping as itself."""
    from driver.operations import REGISTRY

    decl = REGISTRY[O.ADD]

    def broken(ctx):
        raise ZeroDivisionError("oops")

    monkeypatch.setitem(REGISTRY, O.ADD, dataclasses.replace(decl, validate=broken))
    with pytest.raises(HalError) as e:
        validate_model(two_adds())
    assert e.value.status == ErrorStatus.GENERAL_FAILURE
    assert "operation 0 (ADD): internal error in the validate hook: ZeroDivisionError" in str(
        e.value
    )
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_a_hook_returning_a_version_is_a_hook_bug(monkeypatch):
    """Hooks report versions only through ctx.require_version: a returned one would be
    silently lost, so validation reports it as the hook's bug."""
    from driver.operations import REGISTRY

    monkeypatch.setitem(
        REGISTRY, O.ADD, dataclasses.replace(REGISTRY[O.ADD], validate=lambda ctx: V.V1_3)
    )
    with pytest.raises(HalError) as e:
        validate_model(two_adds(), V.V1_0)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE
    assert "ADD returned a value" in str(e.value) and "require_version" in str(e.value)


def test_constant_in_an_unmappable_pool_is_statically_unknown_not_an_error():
    # hardware_buffer (non-BLOB) is a valid pool name from 1.2 that the reference cannot
    # map; its constants are simply unknown to the static checks.
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    c = b.add_operand(F32, (2,))
    b.set_value_bytes(c, np.zeros(2, np.float32).tobytes(), by_reference=True)
    act = b.add_scalar(T.INT32, 0)
    y = b.add_output(F32, (2,))
    b.add_operation(O.ADD, [x, c, act], [y])
    m = with_pool(b.build(), 0, name="hardware_buffer")
    assert validate_model(m) == V.V1_2


def test_operation_versions_attribute_operand_features_to_operations():
    m = two_adds()
    assert operation_versions(m) == [V.V1_0, V.V1_0]
    m16 = two_adds(T.TENSOR_FLOAT16)
    assert operation_versions(m16) == [V.V1_2, V.V1_2]
    # An unknown-rank input needs 1.2 only where it is used.
    assert operation_versions(two_adds(input_dims=())) == [V.V1_2, V.V1_0]
    # Model-level features are not attributed to operations.
    assert operation_versions(two_adds(relaxed=True)) == [V.V1_0, V.V1_0]
    # ... but the pool a constant lives in is: operation 1 reads the one in the blob pool.
    assert operation_versions(blob_pool(two_adds())) == [V.V1_0, V.V1_2]
    # An OEM operation with no operands at all.
    b = ModelBuilder()
    x = b.add_input(F32, (1,))
    y = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [x], [y])
    b.add_operation(O.OEM_OPERATION, [], [])
    assert operation_versions(b.build()) == [V.V1_0, V.V1_0]


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def simple_request(model: Model | None = None, **kw):
    model = model or two_adds()
    return model, build_request(model, [np.ones((2, 2), np.float32)], **kw).request


def with_argument(request: Request, what: str, k: int, **changes) -> Request:
    args = list(getattr(request, what))
    args[k] = dataclasses.replace(args[k], **changes)
    return dataclasses.replace(request, **{what: tuple(args)})


def unspecified_output_model(dims=(0, 2)) -> Model:
    b = ModelBuilder()
    x = b.add_input(F32, (2, 2))
    c = b.add_constant(F32, (2, 2), [1, 2, 3, 4])
    act = b.add_scalar(T.INT32, 0)
    y = b.add_output(F32, dims)
    b.add_operation(O.ADD, [x, c, act], [y])
    return b.build()


def scalar_input_model() -> Model:
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    c = b.add_constant(F32, (2,), [1, 2])
    act = b.add_input(T.INT32)
    y = b.add_output(F32, (2,))
    b.add_operation(O.ADD, [x, c, act], [y])
    return b.build()


REQUEST_RULES: list[tuple[str, Callable[[], tuple[Model, Request]], str, HalVersion]] = []


def request_rule(name, version=V.V1_3):
    def register(fn):
        REQUEST_RULES.append((name, fn, fn.__doc__, version))
        return fn

    return register


@request_rule("an input removed")
def _r_remove_input():
    r"""request: 0 inputs given, the model has 1"""
    m, r = simple_request()
    return m, dataclasses.replace(r, inputs=())


@request_rule("an output added")
def _r_add_output():
    r"""request: 2 outputs given, the model has 1"""
    m, r = simple_request()
    return m, dataclasses.replace(r, outputs=r.outputs * 2)


@request_rule("no value but a location")
def _r_no_value_location():
    r"""request input 0: has no value but gives a location"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, has_no_value=True)


@request_rule("no value but a pool index")
def _r_no_value_pool_index():
    r"""request input 0: has no value but gives a location \(poolIndex 1, offset 0, length 0\)"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, has_no_value=True, location=DataLocation(1, 0, 0))


@request_rule("no value but an offset")
def _r_no_value_offset():
    r"""request output 0: has no value but gives a location \(poolIndex 0, offset 4, length 0\)"""
    m, r = simple_request()
    return m, with_argument(r, "outputs", 0, has_no_value=True, location=DataLocation(0, 4, 0))


@request_rule("no value but dimensions")
def _r_no_value_dims():
    r"""request output 0: has no value but gives .* dimensions \[2, 2\]"""
    m, r = simple_request()
    return m, with_argument(
        r, "outputs", 0, has_no_value=True, location=DataLocation(), dimensions=(2, 2)
    )


@request_rule("pool index out of range")
def _r_pool_index():
    r"""request input 0: poolIndex 5 is out of range \(2 pools\)"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, location=DataLocation(5, 0, 16))


@request_rule("pool index one past the last pool")
def _r_pool_index_one_past():
    r"""request input 0: poolIndex 2 is out of range \(2 pools\)"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, location=DataLocation(2, 0, 16))


@request_rule("pool index -1 (not the last pool)")
def _r_pool_index_negative():
    r"""request input 0: location \(poolIndex -1, offset 0, length 16\) is not all uint32"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, location=DataLocation(-1, 0, 16))


@request_rule("beyond the pool")
def _r_beyond_pool():
    r"""request output 0: offset 8 \+ length 16 is beyond pool 1 \(16 bytes\)"""
    m, r = simple_request()
    return m, with_argument(r, "outputs", 0, location=DataLocation(1, 8, 16))


@request_rule("one byte beyond the pool")
def _r_one_byte_beyond_pool():
    r"""request output 0: offset 1 \+ length 16 is beyond pool 1 \(16 bytes\)"""
    m, r = simple_request()
    return m, with_argument(r, "outputs", 0, location=DataLocation(1, 1, 16))


@request_rule("negative offset")
def _r_negative_offset():
    r"""request input 0: location .* is not all uint32"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, location=DataLocation(0, -4, 16))


@request_rule("dimensions of another rank")
def _r_rank():
    r"""request input 0: dimensions \[4\] have rank 1, the model's operand 0 has rank 2"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, dimensions=(4,))


@request_rule("dimensions contradict the model")
def _r_dims():
    r"""request input 0: dimension 1 is 3, the model's operand 0 says 2"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, dimensions=(2, 3))


@request_rule("a dimension smaller than the model's")
def _r_smaller_dims():
    r"""request input 0: dimension 0 is 1, the model's operand 0 says 2"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, dimensions=(1, 2))


@request_rule("input with an unspecified dimension")
def _r_input_zero_dim():
    r"""request input 0: dimensions \[0, 2\] leave a dimension unspecified"""
    m, r = simple_request(two_adds(input_dims=(0, 2)))
    return m, with_argument(r, "inputs", 0, dimensions=(0, 2))


@request_rule("input dims of floats")
def _r_input_float_dims():
    r"""request input 0: dimensions \(2.0, 2.0\) are not all uint32"""
    m, r = simple_request()
    return m, with_argument(r, "inputs", 0, dimensions=(2.0, 2.0))


@request_rule("output dims None")
def _r_output_dims_none():
    r"""request output 0: dimensions None are not all uint32"""
    m, r = simple_request()
    return m, with_argument(r, "outputs", 0, dimensions=None)


@request_rule("dims filling in unknown model dims beyond uint32 bytes")
def _r_dims_too_large():
    r"""request input 0: dimensions \[2147483648, 2\] exceed 4294967295 bytes"""
    m, r = simple_request(two_adds(input_dims=(0, 2)))
    return m, with_argument(r, "inputs", 0, dimensions=(2**31, 2))


@request_rule("input whose model dims are unspecified and the request's missing")
def _r_input_unspecified():
    r"""request input 0: operand 0 has dimensions \[0, 2\] and the request does not specify"""
    m, r = simple_request(two_adds(input_dims=(0, 2)))
    return m, with_argument(r, "inputs", 0, dimensions=())


@request_rule("input of unknown rank, request without dims")
def _r_input_unknown_rank():
    r"""request input 0: operand 0 has dimensions \[\] and the request does not specify"""
    m, r = simple_request(two_adds(input_dims=()))
    return m, with_argument(r, "inputs", 0, dimensions=())


@request_rule("unspecified output dims before 1.2", V.V1_1)
def _r_output_unspecified_1_1():
    r"""request output 0: operand 3 has dimensions \[0, 2\] and the request does not specify"""
    m = unspecified_output_model()
    return m, build_request(m, [np.ones((2, 2), np.float32)], output_sizes=[16]).request


@request_rule("output dims with a zero before 1.2", V.V1_1)
def _r_output_zero_1_1():
    r"""request output 0: dimensions \[0, 2\] leave a dimension unspecified"""
    m = unspecified_output_model((0, 0))
    rb = build_request(m, [np.ones((2, 2), np.float32)], output_sizes=[16], output_dims=[(0, 2)])
    return m, rb.request


@request_rule("scalar input given dimensions")
def _r_scalar_dims():
    r"""request input 1: operand 2 is a scalar \(INT32\) but the request gives dimensions \[1\]"""
    m = scalar_input_model()
    r = build_request(m, [np.ones(2, np.float32), np.int32(0)]).request
    return m, with_argument(r, "inputs", 1, dimensions=(1,))


def _with_token(token=3, location=None):
    location = location or DataLocation(2, 0, 0)
    m, r = simple_request()
    r = dataclasses.replace(r, pools=(*r.pools, BufferToken(token)))
    return m, with_argument(r, "outputs", 0, location=location)


@request_rule("buffer token needs 1.3", V.V1_2)
def _r_token_version():
    r"""request pool 2: a driver-managed buffer token pool needs HAL 1\.3"""
    return _with_token()


@request_rule("buffer token beyond uint32")
def _r_token_too_large():
    r"""request pool 2: buffer token must be in \[1, 2\^32\), got 4294967296"""
    return _with_token(token=2**32)


@request_rule("buffer token 0")
def _r_token_zero():
    r"""request pool 2: buffer token must be in \[1, 2\^32\), got 0"""
    return _with_token(token=0)


@request_rule("location inside a buffer token")
def _r_token_location():
    r"""request output 0: offset 0 \+ length 16 is beyond pool 2 \(0 bytes\)"""
    return _with_token(location=DataLocation(2, 0, 16))


@request_rule("request pool of an unknown memory name")
def _r_pool_name():
    r"""request pool 1: unknown memory name 'dmabuf'"""
    m, r = simple_request()
    pools = (r.pools[0], dataclasses.replace(r.pools[1], name="dmabuf"))
    return m, dataclasses.replace(r, pools=pools)


@request_rule("request pool without a handle")
def _r_pool_handle():
    r"""request pool 0: ashmem pool has no valid handle"""
    m, r = simple_request()
    return m, dataclasses.replace(r, pools=(Memory("ashmem", 16), r.pools[1]))


@request_rule("request pool that is not a pool")
def _r_pool_type():
    r"""request pool 0: not a memory pool \(str\)"""
    m, r = simple_request()
    return m, dataclasses.replace(r, pools=("ashmem", r.pools[1]))


def oem_scalar_input_model() -> Model:
    b = ModelBuilder()
    x = b.add_input(T.OEM)
    y = b.add_output(T.TENSOR_OEM_BYTE, (4,))
    b.add_operation(O.OEM_OPERATION, [x], [y])
    return b.build()


def oem_scalar_request(dimensions=()) -> Request:
    pool = allocate_shared_memory(8)
    return Request(
        (RequestArgument(False, DataLocation(0, 0, 4), tuple(dimensions)),),
        (RequestArgument(False, DataLocation(0, 4, 4)),),
        (pool,),
    )


@request_rule("OEM scalar input given dimensions")
def _r_oem_scalar_dims():
    r"""request input 0: operand 0 is a scalar \(OEM\) but the request gives dimensions \[1\]"""
    return oem_scalar_input_model(), oem_scalar_request((1,))


@pytest.mark.parametrize(
    "name, make, where, version", REQUEST_RULES, ids=[r[0] for r in REQUEST_RULES]
)
def test_request_rule_violation_is_invalid_argument(name, make, where, version):
    model, request = make()
    with pytest.raises(HalError) as e:
        validate_request(model, request, version)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(where, e.value.message), e.value.message


def test_valid_requests_and_the_version_they_need():
    m, r = simple_request()
    for version in V:
        assert validate_request(m, r, version) == V.V1_0
    # Omitted optional input: no location, no dims.
    m2, r2 = simple_request()
    assert validate_request(m2, r2, V.V1_0) == V.V1_0
    # Unspecified output dims: fine from 1.2, reported as a 1.2 feature.
    m3 = unspecified_output_model()
    r3 = build_request(m3, [np.ones((2, 2), np.float32)], output_sizes=[16]).request
    assert validate_request(m3, r3, V.V1_2) == V.V1_2
    # ... but not where the path needs them (executeFenced).
    with pytest.raises(HalError, match="request output 0: operand 3"):
        validate_request(m3, r3, V.V1_3, allow_unspecified_output=False)
    # Fully specified by the request: fine everywhere.
    r4 = with_argument(r3, "outputs", 0, dimensions=(2, 2))
    assert validate_request(m3, r4, V.V1_0) == V.V1_0
    # A model dimension left unknown may take any value from the request.
    m5 = two_adds(input_dims=(0, 2))
    _, r5 = simple_request(m5)
    assert r5.inputs[0].dimensions == (2, 2)
    assert validate_request(m5, r5, V.V1_0) == V.V1_0
    # An operand of unknown rank takes dimensions of any rank.
    m5 = two_adds(input_dims=())
    for dims in ((4,), (2, 2), (1, 2, 2)):
        r5 = with_argument(simple_request(m5)[1], "inputs", 0, dimensions=dims)
        assert validate_request(m5, r5, V.V1_2) == V.V1_0
    # Buffer-token pools: a 1.3 feature (the largest uint32 token is valid).
    m6, r6 = _with_token()
    assert validate_request(m6, r6, V.V1_3) == V.V1_3
    m6, r6 = _with_token(token=2**32 - 1)
    assert validate_request(m6, r6, V.V1_3) == V.V1_3
    # An OEM scalar is a scalar: the request gives it no dimensions.
    assert validate_request(oem_scalar_input_model(), oem_scalar_request(), V.V1_0) == V.V1_0


def test_fenced_execution_needs_every_output_dimension():
    m = unspecified_output_model()
    r = build_request(m, [np.ones((2, 2), np.float32)], output_sizes=[16]).request
    assert validate_execution(m, r, V.V1_3, 0, None, None) == (0, None, None)
    with pytest.raises(HalError) as e:
        validate_execution(m, r, V.V1_3, 0, None, None, fenced=True)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    assert "request output 0: operand 3 has dimensions [0, 2]" in e.value.message


def test_omitted_request_argument_is_valid():
    m, r = simple_request()
    r = with_argument(r, "inputs", 0, has_no_value=True, location=DataLocation(), dimensions=())
    assert validate_request(m, r) == V.V1_0


# ---------------------------------------------------------------------------------------
# Execution options
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 2])
def test_valid_priority_and_preference(value):
    assert validate_priority(value) == value
    assert validate_execution_preference(value) == value


@pytest.mark.parametrize("value", [-1, 3, 2**31, True, 1.0, "1", None])
def test_invalid_priority_and_preference(value):
    for check in (validate_priority, validate_execution_preference):
        with pytest.raises(HalError) as e:
            check(value)
        assert e.value.status == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("value", [0, 1])
def test_valid_measure_timing(value):
    assert validate_measure(value) == value


@pytest.mark.parametrize("value", [-1, 2, True, False, None, 1.0, "1"])
def test_invalid_measure_timing(value):
    with pytest.raises(HalError) as e:
        validate_measure(value)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT and "MeasureTiming" in e.value.message


@pytest.mark.parametrize("deadline", [None, 0, 123_456_789, 2**64 - 1])
def test_valid_deadline(deadline):
    assert validate_deadline(deadline) == deadline


@pytest.mark.parametrize("deadline", [-1, 2**64, 1.5, True, "soon"])
def test_invalid_deadline(deadline):
    with pytest.raises(HalError) as e:
        validate_deadline(deadline)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT and "deadline" in e.value.message


# ---------------------------------------------------------------------------------------
# Memory domains: BufferDesc and roles
# ---------------------------------------------------------------------------------------


class Prepared:
    """Stands for a prepared model: any object with a ``model`` attribute."""

    def __init__(self, model: Model):
        self.model = model


def test_buffer_roles_combine_dims_and_agree_on_the_operand():
    a = two_adds(input_dims=(0, 2))  # input [0, 2], output [2, 2]
    got = validate_buffer_desc_and_roles(
        BufferDesc(), [BufferRole(0, 0)], [BufferRole(1, 0)], [a, Prepared(two_adds())]
    )
    assert got.operand.type == F32 and got.operand.dimensions == (2, 2)
    assert got.roles == {(0, "input", 0), (1, "output", 0)}
    # The descriptor's dims join in.
    got = validate_buffer_desc_and_roles(BufferDesc((3, 0)), [BufferRole(0, 0)], [], [a])
    assert got.operand.dimensions == (3, 2)
    # Two prepared models of the same Model are different roles.
    p, q = Prepared(a), Prepared(a)
    got = validate_buffer_desc_and_roles(
        BufferDesc(), [BufferRole(0, 0), BufferRole(1, 0)], [], [p, q]
    )
    assert len(got.roles) == 2


def per_channel_input(scales) -> Model:
    b = ModelBuilder()
    q = SymmPerChannelQuantParams(0, tuple(scales))
    x = b.add_input(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (len(scales), 1), channel_quant=q)
    y = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [x], [y])
    return b.build()


_PREPARED = Prepared(two_adds())

BUFFER_RULES = [
    ("no prepared models", BufferDesc(), [BufferRole(0, 0)], [], [], r"no prepared models"),
    ("no roles", BufferDesc(), [], [], [two_adds()], r"at least one input or output role"),
    (
        "model index",
        BufferDesc(),
        [BufferRole(1, 0)],
        [],
        [two_adds()],
        r"input role 0: model index 1 out of range",
    ),
    (
        "io index",
        BufferDesc(),
        [],
        [BufferRole(0, 1)],
        [two_adds()],
        r"output role 0: output index 1 out of range",
    ),
    (
        "not a prepared model",
        BufferDesc(),
        [BufferRole(0, 0)],
        [],
        [None],
        r"model 0 is not a prepared model",
    ),
    (
        "frequency 0",
        BufferDesc(),
        [BufferRole(0, 0, 0.0)],
        [],
        [two_adds()],
        r"frequency 0\.0 is not in \(0, 1\]",
    ),
    (
        "frequency above 1",
        BufferDesc(),
        [BufferRole(0, 0, 1.5)],
        [],
        [two_adds()],
        r"frequency 1\.5",
    ),
    (
        "frequency NaN",
        BufferDesc(),
        [BufferRole(0, 0, math.nan)],
        [],
        [two_adds()],
        r"frequency nan",
    ),
    (
        "role twice",
        BufferDesc(),
        [BufferRole(0, 0), BufferRole(0, 0)],
        [],
        [two_adds()],
        r"input role 1: input 0 of model 0 is listed twice",
    ),
    (
        "types differ",
        BufferDesc(),
        [BufferRole(0, 0), BufferRole(1, 0)],
        [],
        [two_adds(), two_adds(T.TENSOR_FLOAT16)],
        r"input role 1: operand TENSOR_FLOAT16 .* differs",
    ),
    (
        "quantization differs",
        BufferDesc(),
        [BufferRole(0, 0), BufferRole(1, 0)],
        [],
        [quant_add(), quant_add(zero_point=4)],
        r"input role 1: .*zeroPoint 4",
    ),
    (
        "dims differ",
        BufferDesc(),
        [BufferRole(0, 0), BufferRole(1, 0)],
        [],
        [two_adds(), two_adds(input_dims=(4, 1))],
        r"input role 1: dimensions \[4, 1\] contradict \[2, 2\]",
    ),
    (
        "one prepared model under two indexes",
        BufferDesc(),
        [BufferRole(0, 0), BufferRole(1, 0)],
        [],
        [_PREPARED, _PREPARED],
        r"input role 1: input 0 of model 1 is listed twice",
    ),
    (
        "per-channel scales differ",
        BufferDesc(),
        [BufferRole(0, 0), BufferRole(1, 0)],
        [],
        [per_channel_input((0.5, 0.25)), per_channel_input((0.5, 0.5))],
        r"input role 1: operand TENSOR_QUANT8_SYMM_PER_CHANNEL .* differs",
    ),
    (
        "descriptor dims differ",
        BufferDesc((3, 3)),
        [BufferRole(0, 0)],
        [],
        [two_adds()],
        r"input role 0: dimensions \[2, 2\] contradict \[3, 3\]",
    ),
    (
        "descriptor dims negative",
        BufferDesc((-1,)),
        [BufferRole(0, 0)],
        [],
        [two_adds()],
        r"BufferDesc dimensions",
    ),
    (
        "scalar with dims",
        BufferDesc((1,)),
        [BufferRole(0, 1)],
        [],
        [scalar_input_model()],
        r"scalar type INT32 cannot have dimensions \[1\]",
    ),
]


@pytest.mark.parametrize(
    "name, desc, ins, outs, models, where", BUFFER_RULES, ids=[b[0] for b in BUFFER_RULES]
)
def test_buffer_desc_and_roles_rules(name, desc, ins, outs, models, where):
    with pytest.raises(HalError) as e:
        validate_buffer_desc_and_roles(desc, ins, outs, models)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    assert re.search(where, e.value.message), e.value.message


def test_combine_dimensions():
    assert combine_dimensions((), (2, 0)) == (2, 0)
    assert combine_dimensions((0, 3), (2, 0)) == (2, 3)
    assert combine_dimensions((2,), (2, 1)) is None
    assert combine_dimensions((2, 3), (2, 4)) is None


def test_buffer_roles_reject_an_unexpected_role_object():
    with pytest.raises(HalError, match="not a BufferRole"):
        validate_buffer_desc_and_roles(BufferDesc(), [(0, 0)], [], [two_adds()])


def test_request_args_of_the_declared_type_only_raise_hal_errors():
    # A model argument list pointing nowhere (an invalid model) still gives a HalError.
    m, r = simple_request()
    bad_model = with_subgraph(m, input_indexes=(42,))
    with pytest.raises(HalError, match="names no operand"):
        validate_request(bad_model, r)
    with pytest.raises(HalError, match="not a Request"):
        validate_request(m, RequestArgument())  # type: ignore[arg-type]


def test_shared_memory_pool_request_is_valid():
    m, r = simple_request()
    pools = (r.pools[0], allocate_shared_memory(64, "mmap_fd"))
    assert validate_request(m, dataclasses.replace(r, pools=pools), V.V1_0) == V.V1_0
    blob = (r.pools[0], allocate_shared_memory(64, "hardware_buffer_blob"))
    assert validate_request(m, dataclasses.replace(r, pools=blob)) == V.V1_2


def test_operand_type_of_unknown_class_in_extra_params():
    m = with_operand(two_adds(), 0, extra_params=Operation(0))
    with pytest.raises(HalError, match="takes no extraParams, got Operation"):
        validate_model(m)


# ---------------------------------------------------------------------------------------
# Deferrable rejections: what Android's validation leaves to execution
# ---------------------------------------------------------------------------------------


def _add_chain(first_out=(2,), second_in=(2,), second_type=F32, pool_out_scale=None) -> Model:
    """ADD(x, x) -> t; ADD(t, y) -> out, y of ``second_type`` and dims ``second_in``; with
    ``pool_out_scale``, a quant8 MAX_POOL_2D whose output has that scale instead of its
    input's (0.5)."""
    b = ModelBuilder()
    if pool_out_scale is not None:
        q = dict(scale=0.5, zero_point=0)
        x = b.add_input(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), **q)
        out = b.add_output(T.TENSOR_QUANT8_ASYMM, (1, 1, 1, 1), scale=pool_out_scale)
        params = [b.add_scalar(T.INT32, v) for v in (2, 2, 2, 2, 2, 0)]  # VALID 2x2, stride 2
        b.add_operation(O.MAX_POOL_2D, [x, params[0], *params[1:]], [out])
        b.identify_inputs_and_outputs([x], [out])
        return b.build()
    x = b.add_input(F32, (2,))
    y = b.add_input(second_type, second_in)
    t = b.add_operand(F32, first_out)
    out = b.add_output(F32, (0,))
    b.add_operation(O.ADD, [x, x, b.add_scalar(T.INT32, 0)], [t])
    b.add_operation(O.ADD, [t, y, b.add_scalar(T.INT32, 0)], [out])
    b.identify_inputs_and_outputs([x, y], [out])
    return b.build()


def _deferrable_main_strict_referenced() -> Model:
    """Main: ADD declaring output [3] for [2] inputs (deferrable); referenced subgraph 0
    (referenced by nothing): an ADD whose activation is a FLOAT32 (no signature)."""
    b = ModelBuilder()
    sg = b.new_subgraph()
    a = sg.add_input(F32, (2,))
    out = sg.add_output(F32, (2,))
    sg.add_operation(
        O.ADD, [a, sg.add_constant(F32, (2,), [1, 1]), sg.add_scalar(T.FLOAT32, 0)], [out]
    )
    x = b.add_input(F32, (2,))
    y = b.add_output(F32, (3,))
    b.add_operation(O.ADD, [x, x, b.add_scalar(T.INT32, 0)], [y])
    return b.build()


@pytest.mark.parametrize(
    "model, deferrable, match",
    [
        # Android computes output shapes in prepare(), when it executes.
        (
            _add_chain(first_out=(3,)),
            True,
            "operation 0 .*declared \\[3\\] but the inputs give \\[2\\]",
        ),
        # (Named once: the hook's message already starts with the place.)
        (
            _add_chain(second_in=(3,)),
            True,
            r"^main subgraph, operation 1 \(ADD\): inputs 0 and 1 cannot be broadcast",
        ),
        # A shape inferred for an output declared [0] is what the next operation sees.
        (_add_chain(first_out=(0,), second_in=(3,)), True, r"operation 1 .*\[2\] vs \[3\]"),
        # A quantization condition Android's kernels check when they run.
        (_add_chain(pool_out_scale=0.25), True, "must have the scale and zero point of input 0"),
        # Android's ADD validate checks the operand types and the rank.
        (_add_chain(second_type=T.TENSOR_INT32), False, "operation 1 .*TENSOR_INT32"),
        (_add_chain(second_in=(1, 1, 1, 1, 2)), False, "operation 1 .*must have rank 0..4"),
        # A rule Android's validation checks wins over an earlier deferrable one.
        (_add_chain(first_out=(3,), second_in=(1, 1, 1, 1, 2)), False, "operation 1 .*rank"),
        # ... also when the deferrable one is in main and the other in a referenced subgraph.
        (_deferrable_main_strict_referenced(), False, "subgraph 0, operation 0 .*no signature"),
    ],
    ids=[
        "shape",
        "broadcast",
        "broadcast-inferred",
        "pool-quant",
        "types",
        "rank",
        "strict-wins",
        "strict-wins-across",
    ],
)
def test_rejections_say_whether_android_validation_makes_them(model, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match)


def _with_omitted_input(op: int, omitted_type: int, dims=(2,)) -> Model:
    """``op``(x, omitted operand of ``omitted_type``[, activation NONE]) -> out: input 1
    omitted (NO_VALUE) where the operation requires a value."""
    b = ModelBuilder()
    x = b.add_input(F32, dims)
    gone = b.add_omitted(omitted_type, dims)
    out = b.add_output(F32, dims)
    extra = [b.add_scalar(T.INT32, 0)] if op in (O.ADD, O.MUL) else []
    b.add_operation(op, [x, gone, *extra], [out])
    b.identify_inputs_and_outputs([x], [out])
    return b.build()


@pytest.mark.parametrize(
    "model, version, deferrable, match",
    [
        # Android's validation checks the operand types only; its executor fails the
        # omission (allParametersPresent / allowOmittedOperand) when the model runs.
        (
            _with_omitted_input(O.ADD, F32),
            V.V1_3,
            True,
            "ADD needs a value at input\\(s\\) \\[1\\]",
        ),
        (_with_omitted_input(O.MUL, F32), V.V1_0, True, "omitted \\(lifetime NO_VALUE\\)"),
        # Types no signature takes: strict, as before.
        (_with_omitted_input(O.ADD, T.TENSOR_INT32), V.V1_0, False, "no signature of ADD"),
        # A signature newer than the version validated: the version rule is strict.
        (_with_omitted_input(O.MAXIMUM, F32), V.V1_1, False, "MAXIMUM needs HAL 1.2"),
    ],
    ids=["add", "mul-1.0", "types", "version"],
)
def test_an_omitted_required_input_is_left_to_execution(model, version, deferrable, match):
    assert_rejected(model, deferrable=deferrable, match=match, version=version)


# --- operation declarations (driver/operations/base.py) -----------------------------------


def test_a_variadic_operation_needs_at_least_one_of_its_repeated_inputs():
    b = ModelBuilder()
    axis = b.add_input(T.INT32)
    y = b.add_output(F32, (2,))
    b.add_operation(O.CONCATENATION, [axis], [y])
    assert_rejected(b.build(), deferrable=False, match="CONCATENATION")


def test_a_rank_rule_applies_to_declared_dims_before_the_shape_is_known():
    # Android's hasKnownRank: dims (0, 0, 0, 0, 0) say rank 5, which ADD never takes.
    b = ModelBuilder()
    x = b.add_input(F32, (0, 0, 0, 0, 0))
    y = b.add_output(F32, (0, 0, 0, 0, 0))
    b.add_operation(O.ADD, [x, x, b.add_scalar(T.INT32, 0)], [y])
    assert_rejected(b.build(), deferrable=False, match="rank 0..4")


def test_the_required_version_is_the_highest_a_feature_needs():
    from driver.operations.base import OperationContext

    ctx = OperationContext(O.ADD, [], [], [], [])
    for need in (HalVersion.V1_2, HalVersion.V1_3, HalVersion.V1_1, None):
        ctx.require_version(need)
    assert ctx.required_version == HalVersion.V1_3
