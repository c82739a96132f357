"""Vendor extensions (driver/extensions/), OEM operations and the extension allowlist."""

from __future__ import annotations

import dataclasses
import os
import struct

import numpy as np
import pytest

from driver.builder import ModelBuilder
from driver.device import DeviceConfig, ReferenceDevice
from driver.executor import Executor
from driver.extensions import (
    EXTENSIONS,
    ModelTypes,
    extension_device,
    operation_declaration,
    validate_extension_use,
)
from driver.extensions import fibonacci as fib
from driver.hal.types import (
    DataLocation,
    ErrorStatus,
    ExtensionNameAndPrefix,
    ExtensionOperandTypeInformation,
    HalError,
    HalVersion,
    Model,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    make_extension_type,
)
from driver.memory import allocate_shared_memory, memory_from_bytes
from driver.registry import load_device
from driver.runtime import (
    ClientDevice,
    client_allowed,
    extension_use_allowed,
    parse_allowlist,
    read_allowlist,
    uses_extensions,
)
from driver.validation import validate_model

T = OperandType
O = OperationType  # noqa: E741 - the project's spelling of operation references
F32 = T.TENSOR_FLOAT32
INVALID = ErrorStatus.INVALID_ARGUMENT
UINT64 = 2**64


def fib_exact(n: int) -> list[int]:
    """F(1..n) with Python integers (no wrapping), by the textbook recurrence."""
    out, a, b = [], 1, 1
    for _ in range(n):
        out.append(a)
        a, b = b, a + b
    return out


def fib_model(
    prefix: int = 5,
    *,
    n_const: int | None = None,
    float_input: bool = False,
    float_output: bool = False,
    params: bytes | None = fib.pack_params(0.5, 10),
    out_dims=(0,),
    extra_entries=(),
) -> Model:
    """EXAMPLE_FIBONACCI(n) -> y, n a model input unless ``n_const`` is given."""
    int64 = make_extension_type(prefix, fib.EXAMPLE_INT64)
    quant64 = make_extension_type(prefix, fib.EXAMPLE_TENSOR_QUANT64_ASYMM)
    b = ModelBuilder()
    b.use_extension(fib.NAME, prefix)
    for name, p in extra_entries:
        b.use_extension(name, p)
    if float_input:
        n = b.add_input(F32, (1,)) if n_const is None else b.add_constant(F32, (1,), [n_const])
    elif n_const is None:
        n = b.add_input(int64)
    else:
        n = b.add_operand(int64)
        b.set_value_bytes(n, struct.pack("<q", n_const))
    if float_output:
        y = b.add_output(F32, out_dims)
    else:
        y = b.add_output(quant64, out_dims, extra_params=params)
    b.add_operation(make_extension_type(prefix, fib.EXAMPLE_FIBONACCI), [n], [y])
    return b.build()


@pytest.fixture
def ext_device():
    return load_device("reference-ext")


def run(device, model, n_bytes: bytes | None, out_size: int = 8 * 64):
    status, prepared = device.prepare_model(model)
    assert status == ErrorStatus.NONE, device.last_error
    pools = []
    inputs = ()
    if n_bytes is not None:
        pools.append(memory_from_bytes(n_bytes))
        inputs = (RequestArgument(False, DataLocation(0, 0, len(n_bytes))),)
    out = allocate_shared_memory(out_size)
    request = Request(
        inputs, (RequestArgument(False, DataLocation(len(pools), 0, out_size)),), (*pools, out)
    )
    status, shapes, _ = prepared.execute_synchronously(request)
    return status, shapes, out


def quant64_output(device, model, n: int) -> list[int]:
    status, shapes, out = run(device, model, struct.pack("<q", n), out_size=8 * n)
    assert status == ErrorStatus.NONE, device.last_error
    assert shapes[0].dimensions == (n,)
    return np.frombuffer(out.handle.buffer()[: 8 * n], dtype="<u8").tolist()


# --- the example extension --------------------------------------------------------------


def test_the_registry_declares_the_example():
    ext = EXTENSIONS[fib.NAME]
    assert ext.hal().operand_types == (
        ExtensionOperandTypeInformation(fib.EXAMPLE_INT64, False, 8),
        ExtensionOperandTypeInformation(fib.EXAMPLE_TENSOR_QUANT64_ASYMM, True, 8),
    )
    decl = operation_declaration(fib.NAME, 9, fib.EXAMPLE_FIBONACCI)
    assert decl is operation_declaration(fib.NAME, 9, fib.EXAMPLE_FIBONACCI)  # cached
    assert decl.type == make_extension_type(9, fib.EXAMPLE_FIBONACCI)
    assert decl.type.name == "com.example.fibonacci:EXAMPLE_FIBONACCI"
    assert all(decl.execute and decl.infer_shapes and decl.validate for _ in [0])
    assert operation_declaration(fib.NAME, 9, 1) is None
    assert operation_declaration("com.example.unknown", 9, 0) is None


def test_the_extension_device_reports_its_extension(ext_device):
    status, extensions = ext_device.get_supported_extensions()
    assert status == ErrorStatus.NONE
    assert [e.name for e in extensions] == [fib.NAME]
    assert ReferenceDevice().get_supported_extensions() == (ErrorStatus.NONE, [])


@pytest.mark.parametrize("prefix", [1, 5, 0xFFFF])
def test_fibonacci_validates_and_runs(ext_device, prefix):
    model = fib_model(prefix)
    assert validate_model(model) == HalVersion.V1_2
    assert ext_device.get_supported_operations(model) == (ErrorStatus.NONE, [True])
    # F = 1 1 2 3 5 8 13 21 34 55; stored as F / 0.5 + 10.
    assert quant64_output(ext_device, model, 10) == [12, 12, 14, 16, 20, 26, 36, 52, 78, 120]


def test_fibonacci_wraps_modulo_2_to_64(ext_device):
    model = fib_model(params=fib.pack_params(1.0, 0))
    got = quant64_output(ext_device, model, 100)
    want = [f % UINT64 for f in fib_exact(100)]
    # Exact up to 2^53 (double conversion in the quantization step); the wrapped tail
    # goes through double too, so compare it within a double's rounding.
    assert got[:78] == want[:78]
    assert all(abs(g - w) <= w * 2**-52 for g, w in zip(got[78:], want[78:]))
    assert fib.fibonacci_uint64(100).tolist() == want


def test_quantization_truncates_and_saturates():
    fibs = np.array([1, 2, 3, 2**63], dtype=np.uint64)
    # 1/4 + 0.9 -> 1.15 -> 1; 2/4 + 0.9 -> 1.4 -> 1; 3/4 + 0.9 -> 1.65 -> 1.
    assert fib.quantize_uint64(fibs[:3], 4.0, 0).tolist() == [0, 0, 0]
    assert fib.quantize_uint64(fibs, 0.25, -10).tolist()[:3] == [0, 0, 2]
    assert fib.quantize_uint64(fibs, 1e-10, 0).tolist()[3] == UINT64 - 1
    # Exactly 2^64 (2^63 / 0.5) is already out of range: saturated, not wrapped to 0.
    assert fib.quantize_uint64(fibs[3:], 0.5, 0).tolist() == [UINT64 - 1]
    assert fib.quantize_uint64(fibs, 1.0, -100).tolist()[:3] == [0, 0, 0]


def test_fibonacci_float_paths(ext_device):
    model = fib_model(float_input=True, float_output=True)
    status, shapes, out = run(ext_device, model, struct.pack("<f", 7.9))
    assert status == ErrorStatus.NONE, ext_device.last_error
    assert shapes[0].dimensions == (7,)  # 7.9 truncates to 7
    assert np.frombuffer(out.handle.buffer()[:28], np.float32).tolist() == fib_exact(7)


def test_float32_recurrence_overflows_to_inf():
    got = fib.fibonacci_float32(190)
    exact = fib_exact(190)
    assert got[:30].tolist() == exact[:30]  # below 2^24 every value is exact
    assert np.isfinite(got[185]) and float(got[185]) == pytest.approx(exact[185], rel=1e-5)
    assert np.isinf(got[186:]).all()  # F(187) > FLT_MAX


def test_constant_n_gives_a_static_shape(ext_device):
    model = fib_model(n_const=4, out_dims=(4,))
    assert ext_device.get_supported_operations(model) == (ErrorStatus.NONE, [True])
    status, shapes, out = run(ext_device, model, None)
    assert status == ErrorStatus.NONE, ext_device.last_error
    assert np.frombuffer(out.handle.buffer()[:32], "<u8").tolist() == [12, 12, 14, 16]


def test_run_time_failures_are_statuses(ext_device):
    model = fib_model()
    for n in (0, -3, 2**40):  # n < 1; an output far beyond what the reference allocates
        status, shapes, _ = run(ext_device, model, struct.pack("<q", n))
        assert (status, shapes) == (ErrorStatus.GENERAL_FAILURE, []), n
    status, shapes, out = run(ext_device, model, struct.pack("<q", 20), out_size=16)
    assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert shapes[0].dimensions == (20,) and not shapes[0].is_sufficient


@pytest.mark.parametrize("n", [float("nan"), float("inf"), -float("inf"), 2.0**63])
def test_a_float_n_that_is_no_valid_int64_is_a_status(n):
    # The executor raises only HalError for bad run-time values (int(nan) or int(inf)
    # would escape as ValueError or OverflowError).
    ex = Executor(fib_model(float_input=True, float_output=True))
    with pytest.raises(HalError) as info:
        ex.run([np.array([n], np.float32)])
    assert info.value.status == ErrorStatus.GENERAL_FAILURE


def test_the_extension_round_trips_through_the_cache(ext_device):
    model = fib_model()
    mc = os.memfd_create("m")
    dc = os.memfd_create("d")
    try:
        token = b"\x07" * 32
        status, _ = ext_device.prepare_model(model, model_cache=[mc], data_cache=[dc], token=token)
        assert status == ErrorStatus.NONE
        status, restored = ext_device.prepare_model_from_cache(None, [mc], [dc], token)
        assert status == ErrorStatus.NONE, ext_device.last_error
        # The plain reference (no extension) is another driver configuration: refused.
        plain = ReferenceDevice()
        assert plain.prepare_model_from_cache(None, [mc], [dc], token)[0] == (
            ErrorStatus.GENERAL_FAILURE
        )
    finally:
        os.close(mc)
        os.close(dc)


# --- devices without the extension, and other extensions --------------------------------


def test_a_device_without_the_extension_reports_it_unsupported():
    device = ReferenceDevice()
    model = fib_model()
    assert device.get_supported_operations(model) == (ErrorStatus.NONE, [False])
    assert device.prepare_model(model) == (ErrorStatus.GENERAL_FAILURE, None)
    # Configured with an extension that is not registered: still unsupported.
    other = ReferenceDevice(
        DeviceConfig(extensions=(dataclasses.replace(EXTENSIONS[fib.NAME].hal(), name="x.y"),))
    )
    assert other.get_supported_operations(model) == (ErrorStatus.NONE, [False])


def test_operations_of_an_unknown_extension_are_valid_but_unsupported(ext_device):
    b = ModelBuilder()
    b.use_extension("com.vendor.unknown", 3)
    x = b.add_input(F32, (2,))
    y = b.add_output(make_extension_type(3, 1), (2,), extra_params=b"\x01\x02")
    b.add_operation(make_extension_type(3, 0), [x], [y])
    model = b.build()
    assert validate_model(model) == HalVersion.V1_2
    assert ext_device.get_supported_operations(model) == (ErrorStatus.NONE, [False])
    assert ext_device.prepare_model(model)[0] == ErrorStatus.GENERAL_FAILURE


def test_model_types_resolve_through_each_models_prefix():
    a, b = fib_model(prefix=2), fib_model(prefix=40)
    ta, tb = ModelTypes(a), ModelTypes(b)
    code_a = make_extension_type(2, fib.EXAMPLE_TENSOR_QUANT64_ASYMM)
    assert ta.dtype(code_a) == np.dtype("<u8") and not ta.is_scalar(code_a)
    assert ta.is_scalar(make_extension_type(2, fib.EXAMPLE_INT64))
    assert tb.operand_type(code_a) is None  # prefix 2 means nothing in model b
    with pytest.raises(HalError):
        tb.dtype(code_a)
    assert ta.size_of(code_a, (3,)) == 24 and ta.size_of(code_a, (0,)) == 0
    assert ModelTypes(a, allowed=()).operation(a.main.operations[0].type) is None


# --- malformed extension use ------------------------------------------------------------


def statuses(model: Model, version: HalVersion = HalVersion.V1_3):
    device = extension_device(version=version)
    return device.get_supported_operations(model)[0], device.prepare_model(model)[0]


def with_main_operand(model: Model, index: int, **changes) -> Model:
    operands = list(model.main.operands)
    operands[index] = dataclasses.replace(operands[index], **changes)
    return dataclasses.replace(
        model, main=dataclasses.replace(model.main, operands=tuple(operands))
    )


@pytest.mark.parametrize(
    "name, make",
    [
        ("extra data too short", lambda: fib_model(params=fib.pack_params(0.5, 1)[:15])),
        ("extra data too long", lambda: fib_model(params=fib.pack_params(0.5, 1) + b"\0")),
        ("extra data missing", lambda: fib_model(params=None)),
        ("zero scale", lambda: fib_model(params=fib.pack_params(0.0, 0))),
        ("NaN scale", lambda: fib_model(params=fib.pack_params(float("nan"), 0))),
        ("infinite scale", lambda: fib_model(params=fib.pack_params(float("inf"), 0))),
        (
            "extra data on the scalar type",
            lambda: with_main_operand(fib_model(), 0, extra_params=b"\0" * 8),
        ),
        ("scalar type with dims", lambda: with_main_operand(fib_model(), 0, dimensions=(1,))),
        (
            "unknown type within the extension",
            lambda: with_main_operand(fib_model(), 0, type=make_extension_type(5, 7)),
        ),
        (
            "unknown operation within the extension",
            lambda: _with_op_type(fib_model(), make_extension_type(5, 3)),
        ),
        (
            "no signature (TENSOR_INT32 output)",
            lambda: with_main_operand(fib_model(), 1, type=T.TENSOR_INT32, extra_params=None),
        ),
        ("constant n < 1", lambda: fib_model(n_const=0)),
        ("declared output dims contradict n", lambda: fib_model(n_const=4, out_dims=(5,))),
        ("declared output of rank 2", lambda: fib_model(n_const=4, out_dims=(4, 1))),
        ("float n with two elements", lambda: _two_element_n()),
        ("constant of the wrong length", lambda: _short_constant()),
        ("constant longer than its type", lambda: _long_constant()),
        ("unknown type read only by an OEM operation", lambda: _unknown_type_into_oem()),
        ("extension use in a referenced subgraph", lambda: _fibonacci_in_referenced_subgraph()),
        ("constant tensor with an unknown dim", lambda: _unknown_dim_constant()),
    ],
)
def test_malformed_extension_use_is_invalid_argument(name, make):
    model = make()
    validate_model(model)  # the HAL-level rules pass: the extension's own rules do not
    assert statuses(model) == (INVALID, INVALID)
    with pytest.raises(HalError) as info:
        validate_extension_use(model, {fib.NAME})
    assert info.value.status == INVALID
    # A device without the extension does not judge it: unsupported, not invalid.
    plain = ReferenceDevice()
    assert plain.get_supported_operations(model)[0] == ErrorStatus.NONE


def _with_op_type(model: Model, op_type: int) -> Model:
    op = dataclasses.replace(model.main.operations[0], type=op_type)
    return dataclasses.replace(model, main=dataclasses.replace(model.main, operations=(op,)))


def _two_element_n() -> Model:
    model = fib_model(float_input=True)
    return with_main_operand(model, 0, dimensions=(2,))


def _unknown_dim_constant() -> Model:
    # A quant64 constant declared [0] with no bytes: its length agrees with its dims, so
    # only the rule that a constant's dims are fully specified refuses it.
    b = ModelBuilder()
    b.use_extension(fib.NAME, 5)
    quant64 = make_extension_type(5, fib.EXAMPLE_TENSOR_QUANT64_ASYMM)
    n = b.add_input(make_extension_type(5, fib.EXAMPLE_INT64))
    y = b.add_output(quant64, (0,), extra_params=fib.pack_params(0.5, 10))
    unused = b.add_operand(quant64, (0,), extra_params=fib.pack_params(0.5, 10))
    b.set_value_bytes(unused, b"")
    b.add_operation(make_extension_type(5, fib.EXAMPLE_FIBONACCI), [n], [y])
    return b.build()


def _short_constant() -> Model:
    model = fib_model(n_const=4)
    loc = model.main.operands[0].location
    return with_main_operand(model, 0, location=DataLocation(loc.pool_index, loc.offset, 4))


def _long_constant() -> Model:
    # n (EXAMPLE_INT64, 8 bytes) given 16 bytes of operandValues: the HAL-level rules
    # leave an extension constant's length to the extension.
    model = fib_model(n_const=4)
    loc = model.main.operands[0].location
    model = dataclasses.replace(model, operand_values=bytes(model.operand_values) + bytes(16))
    return with_main_operand(model, 0, location=DataLocation(loc.pool_index, loc.offset, 16))


def _unknown_type_into_oem() -> Model:
    # No extension operation reads it, so only the operand rule can refuse it.
    b = ModelBuilder()
    b.use_extension(fib.NAME, 5)
    x = b.add_input(make_extension_type(5, 7), (2,))
    y = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [x], [y])
    return b.build()


def _fibonacci_in_referenced_subgraph() -> Model:
    # Subgraph 0: EXAMPLE_FIBONACCI with an output scale of 0; main hands it to an OEM
    # operation.
    b = ModelBuilder()
    b.use_extension(fib.NAME, 5)
    sg = b.new_subgraph()
    n = sg.add_input(make_extension_type(5, fib.EXAMPLE_INT64))
    out = sg.add_output(
        make_extension_type(5, fib.EXAMPLE_TENSOR_QUANT64_ASYMM),
        (0,),
        extra_params=fib.pack_params(0.0, 0),
    )
    sg.add_operation(make_extension_type(5, fib.EXAMPLE_FIBONACCI), [n], [out])
    x = b.add_input(F32, (2,))
    y = b.add_output(F32, (1,))
    b.add_operation(O.OEM_OPERATION, [x, b.add_subgraph_operand(sg)], [y])
    return b.build()


@pytest.mark.parametrize(
    "name, make, version",
    [
        (
            "unknown prefix",
            lambda: with_main_operand(fib_model(), 0, type=make_extension_type(6, 0)),
            HalVersion.V1_3,
        ),
        (
            "prefix mapped twice",
            lambda: fib_model(extra_entries=[("com.example.other", 5)]),
            HalVersion.V1_3,
        ),
        (
            "name mapped twice",
            lambda: fib_model(extra_entries=[(fib.NAME, 6)]),
            HalVersion.V1_3,
        ),
        ("extension type in a 1.1 model", fib_model, HalVersion.V1_1),
    ],
)
def test_hal_level_extension_errors_are_invalid_argument(name, make, version):
    model = make()
    with pytest.raises(HalError) as info:
        validate_model(model, version)
    assert info.value.status == INVALID
    assert statuses(model, version) == (INVALID, INVALID)


def test_extension_operands_need_hal_1_2_even_on_extension_devices():
    model = fib_model()
    assert validate_model(model, HalVersion.V1_2) == HalVersion.V1_2
    assert statuses(model, HalVersion.V1_2)[0] == ErrorStatus.NONE


# --- OEM --------------------------------------------------------------------------------


def oem_model(with_add: bool = True) -> Model:
    b = ModelBuilder()
    x = b.add_input(T.TENSOR_OEM_BYTE, (4,))
    y = b.add_output(T.TENSOR_OEM_BYTE, (4,))
    b.add_operation(O.OEM_OPERATION, [x], [y])
    if with_add:
        p = b.add_input(F32, (2,))
        act = b.add_scalar(T.INT32, 0)
        q = b.add_output(F32, (2,))
        b.add_operation(O.ADD, [p, p, act], [q])
    return b.build()


@pytest.mark.parametrize("version", [HalVersion.V1_0, HalVersion.V1_3])
def test_oem_operations_are_valid_but_not_supported(version):
    model = oem_model()
    assert validate_model(model, version) == HalVersion.V1_0
    device = ReferenceDevice(version=version)
    assert device.get_supported_operations(model) == (ErrorStatus.NONE, [False, True])
    assert device.prepare_model(model) == (ErrorStatus.GENERAL_FAILURE, None)
    assert "not supported" in device.last_error


def test_oem_scalar_operands_are_valid():
    b = ModelBuilder()
    x = b.add_input(T.OEM)
    y = b.add_output(T.TENSOR_OEM_BYTE, (3,), scale=7.0, zero_point=-4)  # the OEM's business
    b.add_operation(O.OEM_OPERATION, [x], [y])
    model = b.build()
    assert validate_model(model) == HalVersion.V1_0
    assert extension_device().get_supported_operations(model) == (ErrorStatus.NONE, [False])


# --- the allowlist ----------------------------------------------------------------------

ALLOWLIST = """\
# apps and binaries allowed to use vendor extensions

com.example.camera
  /data/local/bin/benchmark \t\x20
/system/bin/listed_but_on_system
/vendor/bin/nn_tool
"""


def test_allowlist_parsing():
    assert parse_allowlist(ALLOWLIST) == {
        "com.example.camera",
        "/data/local/bin/benchmark",
        "/system/bin/listed_but_on_system",
        "/vendor/bin/nn_tool",
    }
    assert parse_allowlist("") == frozenset()
    assert parse_allowlist("\n\n  # only a comment\n") == frozenset()


@pytest.mark.parametrize(
    "client, allowed",
    [
        ("com.example.camera", True),
        ("com.example.cam", False),  # exact entries, not prefixes
        ("/data/local/bin/benchmark", True),
        ("/vendor/bin/nn_tool", True),
        ("/system/bin/listed_but_on_system", False),  # /system never may
        ("/odm/bin/not_listed", False),
        ("", False),
        ("# apps and binaries allowed to use vendor extensions", False),
    ],
)
def test_extension_use_allowed(tmp_path, client, allowed):
    path = tmp_path / "nnapi_extensions_app_allowlist"
    path.write_text(ALLOWLIST)
    assert extension_use_allowed(client, path) is allowed
    assert client_allowed(client, parse_allowlist(ALLOWLIST)) is allowed


def test_a_client_with_no_name_is_never_allowed():
    assert not client_allowed("", {"", "com.example.camera"})


def test_a_missing_allowlist_allows_nobody(tmp_path):
    assert read_allowlist(tmp_path / "absent") == frozenset()
    assert not extension_use_allowed("com.example.camera", tmp_path / "absent")


def test_the_runtime_layer_enforces_the_allowlist(tmp_path):
    path = tmp_path / "allowlist"
    path.write_text(ALLOWLIST)
    model = fib_model()
    plain = oem_model(with_add=False)
    assert uses_extensions(model) and not uses_extensions(plain)
    # Mapping an extension's prefix is using it, even before any type of it appears.
    mapped = dataclasses.replace(plain, extension_name_to_prefix=model.extension_name_to_prefix)
    assert uses_extensions(mapped)
    # So is an extension type anywhere: in a referenced subgraph, or an operation type
    # alone (on standard operands, with no map entry).
    assert uses_extensions(dataclasses.replace(plain, referenced=(model.main,)))
    float_fib = fib_model(float_input=True, float_output=True)
    assert uses_extensions(dataclasses.replace(float_fib, extension_name_to_prefix=()))

    denied = ClientDevice(extension_device(), "com.other.app", path)
    assert denied.get_supported_operations(model) == (INVALID, [])
    assert denied.prepare_model(model) == (INVALID, None)
    assert "not allowed to use vendor extensions" in denied.last_error
    assert denied.get_supported_operations(plain)[0] == ErrorStatus.NONE  # no extension
    assert denied.get_supported_operations(mapped) == (INVALID, [])

    allowed = ClientDevice(extension_device(), "com.example.camera", path)
    assert allowed.get_supported_operations(model) == (ErrorStatus.NONE, [True])
    status, prepared = allowed.prepare_model(model)
    assert status == ErrorStatus.NONE and prepared is not None

    # A cache written for an allowed client does not let another client in.
    mc, dc = os.memfd_create("m"), os.memfd_create("d")
    try:
        token = b"\x01" * 32
        assert allowed.prepare_model(model, model_cache=[mc], data_cache=[dc], token=token)[0] == (
            ErrorStatus.NONE
        )
        assert allowed.prepare_model_from_cache(None, [mc], [dc], token)[0] == ErrorStatus.NONE
        assert denied.prepare_model_from_cache(None, [mc], [dc], token) == (INVALID, None)
    finally:
        os.close(mc)
        os.close(dc)


def test_extension_entries_resolve_by_name_not_prefix():
    entry = ExtensionNameAndPrefix(fib.NAME, 77)
    model = dataclasses.replace(fib_model(prefix=77), extension_name_to_prefix=(entry,))
    assert ModelTypes(model).by_prefix[77].name == fib.NAME
