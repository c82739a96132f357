"""The wire format (driver/wire.py): round trips, the documented layout, and the decoding
contract — any bytes end in an object or one WireDecodeError, within bounded memory."""

from __future__ import annotations

import dataclasses
import io
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driver import wire
from driver.builder import ModelBuilder, build_request
from driver.hal.types import (
    BufferDesc,
    BufferRole,
    BufferToken,
    Capabilities,
    DataLocation,
    ErrorStatus,
    ExtensionNameAndPrefix,
    Memory,
    Model,
    Operand,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    Operation,
    OperationType,
    OutputShape,
    PerformanceInfo,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    Timing,
    make_extension_type,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import allocate_shared_memory
from driver.testing import traced_peak
from driver.wire import DecodeFailure, WireDecodeError, WireEncodeError
from tests.operations.examples import all_examples

L = OperandLifeTime

# ---------------------------------------------------------------------------------------
# Comparing structures bit-exactly (floats by their bits, so NaN == NaN; pools by handle)
# ---------------------------------------------------------------------------------------


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def canon(x, *, f32: bool = False):
    """A hashable, bit-exact image of a structure. ``f32=True`` rounds floats to float32
    first (what the wire does to a double that float32 cannot represent)."""
    if isinstance(x, float):
        return ("f", struct.pack("<d", _f32(x) if f32 else x))
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, int):
        return ("int", int(x))
    if isinstance(x, (bytes, bytearray, memoryview)):
        return ("bytes", bytes(x))
    if isinstance(x, str) or x is None:
        return x
    if isinstance(x, (tuple, list)):
        return tuple(canon(v, f32=f32) for v in x)
    if isinstance(x, Memory):
        return ("Memory", x.name, x.size, None if x.handle is None else id(x.handle))
    if dataclasses.is_dataclass(x):
        return (
            type(x).__name__,
            tuple(canon(getattr(x, f.name), f32=f32) for f in dataclasses.fields(x)),
        )
    raise TypeError(f"cannot canonicalize {type(x).__name__}")


def round_trip(obj):
    enc = wire.encode(obj)
    return wire.decode(enc.data, wire.handles_resolver(enc.handles))


def assert_round_trip(obj, *, f32: bool = False) -> None:
    enc = wire.encode(obj)
    back = wire.decode(enc.data, wire.handles_resolver(enc.handles))
    assert canon(back) == canon(obj, f32=f32)
    # Canonical encoding: re-encoding the decoded object gives the same bytes.
    assert wire.encode(back).data == enc.data


# ---------------------------------------------------------------------------------------
# Strategies over the HAL structures (any value in each field's HAL domain, valid or not)
# ---------------------------------------------------------------------------------------

u16 = st.integers(0, 0xFFFF)
u32 = st.one_of(st.integers(0, 16), st.integers(0, 0xFFFFFFFF))
u64 = st.one_of(st.integers(0, 1 << 20), st.integers(0, (1 << 64) - 1))
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
# Every float32 value, NaN payloads included, as the Python float the decoder yields.
f32 = st.one_of(
    st.floats(width=32),
    st.integers(0, 0xFFFFFFFF).map(lambda b: struct.unpack("<f", struct.pack("<I", b))[0]),
)
names = st.text(max_size=12)
dims = st.lists(st.one_of(st.integers(0, 8), u32), max_size=6).map(tuple)
operand_types = st.one_of(
    st.sampled_from(list(OperandType)),
    st.builds(make_extension_type, st.integers(1, 0xFFFF), u16),
    u32,
)
lifetimes = st.one_of(st.sampled_from(list(OperandLifeTime)), u32)
locations = st.one_of(st.just(DataLocation()), st.builds(DataLocation, u32, u32, u32))
extra_params = st.one_of(
    st.none(),
    st.builds(SymmPerChannelQuantParams, u32, st.lists(f32, max_size=5).map(tuple)),
    st.binary(max_size=16),
)
operands = st.builds(
    Operand, operand_types, dims, u32, f32, i32, lifetimes, locations, extra_params
)
index_lists = st.lists(u32, max_size=5).map(tuple)
operations = st.builds(
    Operation, st.one_of(st.sampled_from(list(OperationType)), u32), index_lists, index_lists
)
subgraphs = st.builds(
    Subgraph,
    st.lists(operands, max_size=6).map(tuple),
    st.lists(operations, max_size=4).map(tuple),
    index_lists,
    index_lists,
)


class FakeHandle:
    """Stands for an OS handle: the wire passes it by identity, out of band."""


handles = st.one_of(st.none(), st.builds(FakeHandle))
memories = st.builds(Memory, names, u64, handles)
models = st.builds(
    Model,
    subgraphs,
    st.lists(subgraphs, max_size=2).map(tuple),
    st.binary(max_size=64),
    st.lists(memories, max_size=3).map(tuple),
    st.booleans(),
    st.lists(st.builds(ExtensionNameAndPrefix, names, u16), max_size=3).map(tuple),
)
arguments = st.builds(RequestArgument, st.booleans(), locations, dims)
requests = st.builds(
    Request,
    st.lists(arguments, max_size=4).map(tuple),
    st.lists(arguments, max_size=4).map(tuple),
    st.lists(st.one_of(memories, st.builds(BufferToken, u32)), max_size=4).map(tuple),
)
perf = st.builds(PerformanceInfo, f32, f32)
capabilities = st.builds(
    Capabilities,
    perf,
    perf,
    st.lists(st.builds(OperandPerformance, u32, perf), max_size=4).map(tuple),
    perf,
    perf,
)
results = st.builds(
    wire.ExecutionResultMessage,
    st.one_of(st.sampled_from(list(ErrorStatus)), u32),
    st.lists(st.builds(OutputShape, dims, st.booleans()), max_size=4).map(tuple),
    st.builds(Timing, u64, u64),
    st.text(max_size=40),
)
allocations = st.builds(
    wire.BufferAllocationMessage,
    st.builds(BufferDesc, dims),
    st.lists(st.builds(BufferRole, u32, u32, f32), max_size=3).map(tuple),
    st.lists(st.builds(BufferRole, u32, u32, f32), max_size=3).map(tuple),
)
messages = st.one_of(models, requests, capabilities, results, allocations)


@st.composite
def built_models(draw) -> Model:
    """Models as clients build them: every lifetime, per-channel quantization, extension
    operands and operations, constants by copy and by reference, control flow."""
    b = ModelBuilder(relaxed=draw(st.booleans()))
    if draw(st.booleans()):
        b.use_extension("com.example.fuzz", 7)
    inputs: list[int] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(
            st.sampled_from(
                ["input", "const", "ref", "scalar", "omitted", "temp", "channel", "ext", "if"]
            )
        )
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
        n = int(np.prod(shape))
        if kind == "input":
            t = draw(st.sampled_from([T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_FLOAT16]))
            inputs.append(b.add_input(t, shape))
        elif kind in ("const", "ref"):
            t = draw(st.sampled_from([T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_BOOL8]))
            q = {"scale": 0.5, "zero_point": 3} if t == T.TENSOR_QUANT8_ASYMM else {}
            inputs.append(
                b.add_constant(t, shape, np.arange(n) % 2, by_reference=kind == "ref", **q)
            )
        elif kind == "scalar":
            t = draw(st.sampled_from([T.INT32, T.FLOAT32, T.BOOL, T.FLOAT16, T.UINT32]))
            inputs.append(b.add_scalar(t, 1))
        elif kind == "omitted":
            inputs.append(b.add_omitted(T.TENSOR_FLOAT32))
        elif kind == "temp":
            inputs.append(b.add_operand(T.TENSOR_FLOAT32, shape))
        elif kind == "channel":
            params = SymmPerChannelQuantParams(0, tuple(0.25 * (k + 1) for k in range(shape[0])))
            inputs.append(
                b.add_constant(
                    T.TENSOR_QUANT8_SYMM_PER_CHANNEL, shape, np.ones(n), channel_quant=params
                )
            )
        elif kind == "ext":
            i = b.add_operand(make_extension_type(7, 2), shape, extra_params=b"\x01\x02\x03")
            b.set_value_bytes(i, bytes(range(5)))
            inputs.append(i)
        else:
            branch = b.new_subgraph()
            x = branch.add_input(T.TENSOR_FLOAT32, (2,))
            y = branch.add_output(T.TENSOR_FLOAT32, (2,))
            branch.add_operation(O.ADD, [x, x, branch.add_scalar(T.INT32, 0)], [y])
            inputs.append(b.add_subgraph_operand(branch))
    out = b.add_output(T.TENSOR_FLOAT32, ())
    op_type = draw(
        st.one_of(st.sampled_from(list(OperationType)), st.just(make_extension_type(7, 1)))
    )
    b.add_operation(op_type, inputs, [out])
    return b.build()


def _example_models() -> list[tuple[str, Model, list]]:
    found = []
    for ex in all_examples():
        model, feeds = ex.model()
        found.append((ex.name, model, feeds))
    return found


EXAMPLES = _example_models()


def small_model() -> Model:
    """A model touching every section of the layout (for exhaustive corruption tests)."""
    b = ModelBuilder(relaxed=True)
    b.use_extension("com.example.ext", 3)
    x = b.add_input(T.TENSOR_QUANT8_ASYMM, (1, 2), scale=0.5, zero_point=128)
    w = b.add_constant(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
        (2, 1),
        [1, -1],
        channel_quant=SymmPerChannelQuantParams(0, (0.25, 0.125)),
    )
    r = b.add_constant(T.TENSOR_INT32, (2,), [7, 9], by_reference=True)
    e = b.add_operand(make_extension_type(3, 1), (2,), extra_params=b"xy")
    act = b.add_scalar(T.INT32, 0)
    branch = b.new_subgraph()
    bi = branch.add_input(T.TENSOR_FLOAT32, (2,))
    bo = branch.add_output(T.TENSOR_FLOAT32, (2,))
    branch.add_operation(O.RELU, [bi], [bo])
    s = b.add_subgraph_operand(branch)
    y = b.add_output(T.TENSOR_QUANT8_ASYMM, (1, 2), scale=0.5, zero_point=128)
    b.add_operation(O.ADD, [x, w, act], [y])
    b.add_operation(make_extension_type(3, 2), [r, s], [e])
    return b.build()


def small_request() -> Request:
    return Request(
        (
            RequestArgument(False, DataLocation(0, 0, 2), (1, 2)),
            RequestArgument(True),
        ),
        (RequestArgument(False, DataLocation(1, 8, 2), ()),),
        (Memory("ashmem", 16, None), BufferToken(5)),
    )


ALL_KINDS_SAMPLES = [
    small_model(),
    small_request(),
    Capabilities(
        PerformanceInfo(0.5, 0.25),
        PerformanceInfo(0.75, 1.0),
        (OperandPerformance(3, PerformanceInfo(0.125, 0.375)),),
    ),
    wire.ExecutionResultMessage(
        ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, (OutputShape((2, 3), False),), Timing(5, 9), "small"
    ),
    wire.BufferAllocationMessage(BufferDesc((2, 0)), (BufferRole(0, 1, 0.5),), ()),
]

# ---------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------


@given(messages)
def test_any_hal_structure_round_trips_bit_exactly(obj):
    assert_round_trip(obj)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(built_models())
def test_builder_models_round_trip(model):
    assert_round_trip(model)


@pytest.mark.parametrize("name, model, feeds", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_models_and_requests_round_trip(name, model, feeds):
    # Scales the examples write as Python doubles travel as float32, as in the HAL.
    assert_round_trip(model, f32=True)
    assert_round_trip(build_request(model, feeds).request)


def test_examples_were_found():
    assert EXAMPLES, "tests/operations/examples.py yielded no examples"


def test_every_message_kind_round_trips():
    for obj in ALL_KINDS_SAMPLES:
        assert_round_trip(obj)


def test_nan_payloads_and_signed_zero_survive():
    bits = [0x7FC00001, 0xFFC12345, 0x7F800001, 0x80000000, 0x00000001, 0x7F7FFFFF]
    scales = tuple(struct.unpack("<f", struct.pack("<I", b))[0] for b in bits)
    op = Operand(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (6,), extra_params=SymmPerChannelQuantParams(0, scales)
    )
    model = Model(Subgraph((op, dataclasses.replace(op, scale=scales[1], extra_params=None))))
    back = round_trip(model)
    assert canon(back) == canon(model)
    wire_bits = wire.encode(model).data
    for b in bits[:2] + bits[3:]:  # quiet NaNs and ordinary values keep their exact bits
        assert struct.pack("<I", b) in wire_bits


def test_double_scale_is_rounded_to_float32():
    model = Model(Subgraph((Operand(T.TENSOR_QUANT8_ASYMM, (1,), scale=0.1),)))
    assert round_trip(model).main.operands[0].scale == _f32(0.1) != 0.1


def test_pools_travel_out_of_band():
    model = small_model()
    shared = model.pools[0]
    req = Request(pools=(shared, BufferToken(3), shared, Memory("mmap_fd", 4, None)))
    enc = wire.encode_request(req)
    assert enc.handles == (shared.handle,)  # one entry per distinct handle
    back = wire.decode_request(enc.data, wire.handles_resolver(enc.handles))
    assert back.pools[0].handle is back.pools[2].handle is shared.handle
    assert back.pools[1] == BufferToken(3)
    assert back.pools[3].handle is None and back.pools[3].name == "mmap_fd"
    # The default (fuzzing) resolver never maps anything.
    fuzz = wire.decode_request(enc.data)
    assert all(p.handle is None for p in fuzz.pools if isinstance(p, Memory))
    assert fuzz.pools[0].size == shared.size


def test_fd_resolver_maps_received_descriptors_and_checks_their_size():
    mem = allocate_shared_memory(16)
    mem.handle.buffer()[:4] = b"abcd"
    enc = wire.encode_request(Request(pools=(mem,)))
    fds = [h.fd for h in enc.handles]
    back = wire.decode_request(enc.data, wire.fd_resolver(fds))
    assert bytes(back.pools[0].handle.buffer()[:4]) == b"abcd"
    back.pools[0].handle.close()
    # A pool claiming more bytes than the file holds would SIGBUS when touched.
    lying = wire.encode_request(Request(pools=(Memory("ashmem", 4096, mem.handle),)))
    with pytest.raises(WireDecodeError) as info:
        wire.decode_request(lying.data, wire.fd_resolver(fds))
    assert info.value.failure == DecodeFailure.BAD_HANDLE
    one_more = wire.encode_request(Request(pools=(Memory("ashmem", 17, mem.handle),)))
    with pytest.raises(WireDecodeError, match=r"declares 17 bytes but descriptor .* holds 16"):
        wire.decode_request(one_more.data, wire.fd_resolver(fds))
    with pytest.raises(WireDecodeError, match="handle index"):
        wire.decode_request(lying.data, wire.fd_resolver([]))
    r, w = os.pipe()
    try:
        with pytest.raises(WireDecodeError, match="not a mappable file"):
            wire.decode_request(
                wire.encode_request(Request(pools=(Memory("ashmem", 0, mem.handle),))).data,
                wire.fd_resolver([r]),
            )
    finally:
        os.close(r)
        os.close(w)


def test_fd_resolver_limits_the_pool_size_and_maps_an_empty_pool():
    mem = allocate_shared_memory(16)
    fds = [mem.handle.fd]
    enc = wire.encode_request(Request(pools=(mem,)))
    at_limit = wire.decode_request(enc.data, wire.fd_resolver(fds, max_pool_size=16))
    assert at_limit.pools[0].size == 16
    at_limit.pools[0].handle.close()
    with pytest.raises(WireDecodeError, match="pool size 16 exceeds the 15-byte limit") as info:
        wire.decode_request(enc.data, wire.fd_resolver(fds, max_pool_size=15))
    assert info.value.failure == DecodeFailure.BAD_HANDLE
    # mmap refuses an empty file: an empty pool gets a fresh empty memfd of its own.
    empty_file = os.memfd_create("empty")
    try:
        empty = wire.encode_request(Request(pools=(Memory("ashmem", 0, mem.handle),)))
        pool = wire.decode_request(empty.data, wire.fd_resolver([empty_file])).pools[0]
    finally:
        os.close(empty_file)
    assert pool.size == 0 and pool.handle is not None
    pool.handle.close()


def test_handles_resolver_rejects_missing_handles_with_the_pool_offset():
    enc = wire.encode_model(small_model())
    with pytest.raises(WireDecodeError) as info:
        wire.decode_model(enc.data, wire.handles_resolver(()))
    assert info.value.failure == DecodeFailure.BAD_HANDLE
    assert 0 < info.value.offset < len(enc.data)


def test_fast_constructors_build_the_same_objects():
    loc = DataLocation(1, 2, 3)
    assert wire._new_location(1, 2, 3) == loc
    args = (3, (1, 2), 4, 0.5, 7, L.CONSTANT_COPY, loc, b"x")
    assert wire._new_operand(*args) == Operand(*args)
    assert hash(wire._new_operand(*args)) == hash(Operand(*args))
    assert wire._new_operation(0, (1,), (2,)) == Operation(0, (1,), (2,))

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int
        b: int
        c: int

        def __post_init__(self):
            pass

    assert wire._fast_constructor(Checked) is Checked  # would skip __post_init__


def test_the_wire_covers_every_hal_field():
    """A new field in a HAL structure must get a place in the layout (and a version bump)."""
    encoded_fields = {
        Operand: "type dimensions number_of_consumers scale zero_point lifetime location extra_params",
        Operation: "type inputs outputs",
        Subgraph: "operands operations input_indexes output_indexes",
        DataLocation: "pool_index offset length",
        SymmPerChannelQuantParams: "channel_dim scales",
        Model: "main referenced operand_values pools relax_computation_float32_to_float16 "
        "extension_name_to_prefix",
        ExtensionNameAndPrefix: "name prefix",
        Memory: "name size handle",
        Request: "inputs outputs pools",
        RequestArgument: "has_no_value location dimensions",
        BufferToken: "token",
        Capabilities: "relaxed_float32_to_float16_performance_scalar "
        "relaxed_float32_to_float16_performance_tensor operand_performance if_performance "
        "while_performance",
        OperandPerformance: "type info",
        PerformanceInfo: "exec_time power_usage",
        OutputShape: "dimensions is_sufficient",
        Timing: "time_on_device time_in_driver",
        BufferDesc: "dimensions",
        BufferRole: "model_index io_index frequency",
    }
    for cls, expected in encoded_fields.items():
        assert tuple(f.name for f in dataclasses.fields(cls)) == tuple(expected.split()), cls


# ---------------------------------------------------------------------------------------
# The documented layout, written out independently
# ---------------------------------------------------------------------------------------


def test_layout_matches_the_documented_bytes():
    model = Model(
        Subgraph(
            operands=(
                Operand(T.TENSOR_FLOAT32, (2, 3), 1, 0.0, 0, L.SUBGRAPH_INPUT),
                Operand(T.INT32, (), 1, 0.0, 0, L.CONSTANT_COPY, DataLocation(0, 0, 4)),
                Operand(T.TENSOR_FLOAT32, (2, 3), 0, 0.0, 0, L.SUBGRAPH_OUTPUT),
            ),
            operations=(Operation(O.ADD, (0, 0, 1), (2,)),),
            input_indexes=(0,),
            output_indexes=(2,),
        ),
        operand_values=b"\0\0\0\0",
        pools=(Memory("ashmem", 64, None),),
        relax_computation_float32_to_float16=True,
        extension_name_to_prefix=(ExtensionNameAndPrefix("ab", 9),),
    )
    body = b"".join(
        [
            struct.pack("<II", 1, 0),  # flags (relaxed), referenced subgraph count
            struct.pack("<IIII", 3, 1, 1, 1),  # operands, operations, inputs, outputs
            bytes([2, 0, 2]),  # ranks
            bytes([0, 0, 0]),  # extraParams kinds
            struct.pack("<IIfiIIII", 3, 1, 0.0, 0, 1, 0, 0, 0),
            struct.pack("<IIfiIIII", 1, 1, 0.0, 0, 3, 0, 0, 4),
            struct.pack("<IIfiIIII", 3, 0, 0.0, 0, 2, 0, 0, 0),
            struct.pack("<4I", 2, 3, 2, 3),  # dims
            struct.pack("<III", 0, 3, 1),  # ADD, 3 inputs, 1 output
            struct.pack("<4I", 0, 0, 1, 2),  # its operand indexes
            struct.pack("<I", 0),  # subgraph inputs
            struct.pack("<I", 2),  # subgraph outputs
            struct.pack("<I", 4) + b"\0\0\0\0",  # operandValues
            struct.pack("<I", 1),  # one pool
            struct.pack("<IQI", 0xFFFFFFFF, 64, 6) + b"ashmem",
            struct.pack("<I", 1),  # one extension name
            struct.pack("<HI", 9, 2) + b"ab",
        ]
    )
    expected = b"NNFW" + struct.pack("<HHI", 1, 1, len(body)) + body
    assert wire.encode_model(model).data == expected
    assert canon(wire.decode_model(expected)) == canon(model)


def test_request_layout_matches_the_documented_bytes():
    req = Request(
        (RequestArgument(False, DataLocation(0, 4, 8), (2,)),),
        (RequestArgument(True),),
        (Memory("a", 12, None), BufferToken(77)),
    )
    body = b"".join(
        [
            struct.pack("<III", 1, 1, 2),
            bytes([1, 0]),
            struct.pack("<IIII", 0, 0, 4, 8),
            struct.pack("<IIII", 1, 0, 0, 0),
            struct.pack("<I", 2),
            struct.pack("<IIQI", 0, 0xFFFFFFFF, 12, 1) + b"a",
            struct.pack("<II", 1, 77),
        ]
    )
    assert wire.encode_request(req).data == b"NNFW" + struct.pack("<HHI", 1, 2, len(body)) + body


# ---------------------------------------------------------------------------------------
# Errors: header, version, kinds
# ---------------------------------------------------------------------------------------


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    raw = bytearray(data)
    struct.pack_into(fmt, raw, offset, value)
    return bytes(raw)


def test_version_mismatch_is_the_documented_error():
    data = wire.encode_model(small_model()).data
    for version in (0, 2, 0xFFFF):
        with pytest.raises(WireDecodeError) as info:
            wire.decode_model(_patched(data, 4, "<H", version))
        err = info.value
        assert err.failure == DecodeFailure.UNSUPPORTED_VERSION
        assert err.offset == 4
        assert f"version {version} is not supported" in str(err)
        assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    "data, failure, offset",
    [
        (b"", DecodeFailure.TRUNCATED, 0),
        (b"NN", DecodeFailure.TRUNCATED, 0),
        (b"PK\x03\x04" + bytes(20), DecodeFailure.BAD_MAGIC, 0),
        (b"NNFW\x01\x00", DecodeFailure.TRUNCATED, 0),
        (b"NNFW" + struct.pack("<HHI", 1, 99, 0), DecodeFailure.UNKNOWN_KIND, 6),
        (b"NNFW" + struct.pack("<HHI", 1, 1, 100), DecodeFailure.TRUNCATED, 8),
        (b"NNFW" + struct.pack("<HHI", 1, 3, 0) + b"x", DecodeFailure.TRAILING_BYTES, 12),
    ],
)
def test_header_errors(data, failure, offset):
    with pytest.raises(WireDecodeError) as info:
        wire.decode(data)
    assert info.value.failure == failure
    assert info.value.offset == offset


def test_decode_errors_pickle_with_their_fields():
    import pickle

    err = WireDecodeError(7, "why", DecodeFailure.TRUNCATED)
    back = pickle.loads(pickle.dumps(err))
    assert (back.offset, back.reason, back.failure, str(back)) == (7, "why", err.failure, str(err))


def test_wrong_kind_and_trailing_body_bytes():
    req = wire.encode_request(small_request()).data
    with pytest.raises(WireDecodeError) as info:
        wire.decode_model(req)
    assert info.value.failure == DecodeFailure.WRONG_KIND
    # A body longer than what it declares (header length adjusted): trailing bytes.
    data = wire.encode(ALL_KINDS_SAMPLES[2]).data + b"\0"
    data = _patched(data, 8, "<I", len(data) - wire.HEADER_SIZE)
    with pytest.raises(WireDecodeError) as info:
        wire.decode(data)
    assert info.value.failure == DecodeFailure.TRAILING_BYTES
    assert info.value.offset == len(data) - 1


def test_bad_values_are_rejected_where_they_are():
    data = wire.encode_model(small_model()).data
    with pytest.raises(WireDecodeError) as info:
        wire.decode_model(_patched(data, 12, "<I", 0x3))  # unknown flag bit
    assert info.value.failure == DecodeFailure.BAD_VALUE and info.value.offset == 12
    req = wire.encode_request(small_request()).data
    ranks_at = 12 + 12
    args_at = ranks_at + 3
    with pytest.raises(WireDecodeError, match="hasNoValue is 2") as info:
        wire.decode_request(_patched(req, args_at, "<I", 2))
    assert info.value.offset == args_at
    # A request pool tag other than memory (0) or token (1): 0 arguments, 1 pool.
    body = struct.pack("<III", 0, 0, 1) + struct.pack("<II", 2, 5)
    with pytest.raises(WireDecodeError, match="unknown request pool tag 2") as info:
        wire.decode_request(_with_body(wire.MessageKind.REQUEST, body))
    assert info.value.failure == DecodeFailure.BAD_VALUE and info.value.offset == 24
    # An extraParams kind other than none (0), per-channel (1) or extension (2).
    data = _model(
        struct.pack("<II", 0, 0), _subgraph_head(1), bytes([0, 3]), bytes(32), bytes(4), TAIL
    )
    with pytest.raises(WireDecodeError, match="invalid code 3") as info:
        wire.decode_model(data)
    assert info.value.failure == DecodeFailure.BAD_VALUE and info.value.offset == 37


def test_unknown_enum_codes_pass_through_for_validation_to_judge():
    model = Model(Subgraph((Operand(0xDEAD, (), lifetime=99),)))
    back = round_trip(model).main.operands[0]
    assert back.type == 0xDEAD and back.lifetime == 99
    assert round_trip(Model(Subgraph((Operand(3, lifetime=3),)))).main.operands[0].lifetime is (
        L.CONSTANT_COPY
    )


# ---------------------------------------------------------------------------------------
# Robustness: any bytes end in an object or a WireDecodeError
# ---------------------------------------------------------------------------------------


def decode_or_error(data: bytes):
    try:
        return wire.decode(data)
    except WireDecodeError as e:
        assert 0 <= e.offset <= len(data), e
        return e


def _with_body(kind: int, body: bytes) -> bytes:
    return b"NNFW" + struct.pack("<HHI", 1, kind, len(body)) + body


@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_wire_errors(data):
    decode_or_error(data)


@given(st.sampled_from(list(wire.MessageKind)), st.binary(max_size=400))
def test_random_bodies_behind_valid_headers_decode_or_raise_wire_errors(kind, body):
    decode_or_error(_with_body(kind, body))


@pytest.mark.parametrize("obj", ALL_KINDS_SAMPLES, ids=lambda o: type(o).__name__)
def test_every_truncation_fails_cleanly(obj):
    data = wire.encode(obj).data
    for n in range(len(data)):
        # As cut (the header's length disagrees) ...
        assert isinstance(decode_or_error(data[:n]), WireDecodeError)
        # ... and with the header patched to the shorter body, which reaches the body parser.
        if n >= wire.HEADER_SIZE:
            cut = _patched(data[:n], 8, "<I", n - wire.HEADER_SIZE)
            err = decode_or_error(cut)
            assert isinstance(err, WireDecodeError), n
            assert err.failure in (DecodeFailure.TRUNCATED, DecodeFailure.LIMIT_EXCEEDED), err


@pytest.mark.parametrize("obj", ALL_KINDS_SAMPLES, ids=lambda o: type(o).__name__)
def test_every_single_byte_flip_fails_cleanly(obj):
    data = wire.encode(obj).data
    for i in range(len(data)):
        for flip in (0x01, 0x80, 0xFF):
            raw = bytearray(data)
            raw[i] ^= flip
            decode_or_error(bytes(raw))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(built_models(), st.data())
def test_mutations_of_built_models_decode_or_raise_wire_errors(model, data):
    raw = bytearray(wire.encode(model).data)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    result = decode_or_error(bytes(raw))
    if not isinstance(result, WireDecodeError):
        wire.encode(result)  # whatever decodes can be encoded again


# ---------------------------------------------------------------------------------------
# Declared sizes never drive allocation
# ---------------------------------------------------------------------------------------


def _subgraph_head(n_opnd=0, n_oper=0, n_in=0, n_out=0) -> bytes:
    return struct.pack("<IIII", n_opnd, n_oper, n_in, n_out)


def _model(*parts: bytes) -> bytes:
    return _with_body(wire.MessageKind.MODEL, b"".join(parts))


def _per_channel_scales(count: int) -> bytes:
    """A model whose one operand declares ``count`` per-channel scales (and holds none)."""
    return _model(
        struct.pack("<II", 0, 0),
        _subgraph_head(1),
        bytes([0, 1]),
        bytes(32),
        struct.pack("<II", 0, count),
    )


EMPTY_SG = _subgraph_head()
TAIL = struct.pack("<III", 0, 0, 0)  # no operand values, pools or extension names
# Each declared count one past its limit (LIMIT_EXCEEDED: the boundary itself), or at
# its limit (then the bytes run out: TRUNCATED).
HUGE_DECLARATIONS = {
    "operands": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(wire.MAX_OPERANDS + 1)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operands within the limit": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(wire.MAX_OPERANDS)),
        DecodeFailure.TRUNCATED,
    ),
    "operands in the whole model": (  # main holds 1: a referenced one may hold one less
        _model(
            struct.pack("<II", 0, 1),
            _subgraph_head(1),
            bytes([0, 0]),
            bytes(32),
            _subgraph_head(wire.MAX_OPERANDS),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operations": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(0, wire.MAX_OPERATIONS + 1)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "subgraph inputs": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(0, 0, wire.MAX_OPERANDS)),
        DecodeFailure.TRUNCATED,
    ),
    "subgraph inputs over the limit": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(0, 0, wire.MAX_OPERANDS + 1)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operations in the whole model": (  # main holds 1: a referenced one may hold one less
        _model(
            struct.pack("<II", 0, 1),
            _subgraph_head(0, 1),
            struct.pack("<III", 0, 0, 0),
            _subgraph_head(0, wire.MAX_OPERATIONS),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "referenced subgraphs": (
        _model(struct.pack("<II", 0, wire.MAX_SUBGRAPHS)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "referenced subgraphs within the limit": (
        _model(struct.pack("<II", 0, wire.MAX_SUBGRAPHS - 1), EMPTY_SG),
        DecodeFailure.TRUNCATED,
    ),
    "operation inputs": (
        _model(
            struct.pack("<II", 0, 0),
            _subgraph_head(0, 1),
            struct.pack("<III", 0, wire.MAX_OPERATION_ARGUMENTS, 0),
        ),
        DecodeFailure.TRUNCATED,
    ),
    "operation outputs": (
        _model(
            struct.pack("<II", 0, 0),
            _subgraph_head(0, 1),
            struct.pack("<III", 0, 0, wire.MAX_OPERATION_ARGUMENTS + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operand rank": (
        _model(
            struct.pack("<II", 0, 0), _subgraph_head(1), bytes([wire.MAX_RANK + 1, 0]), bytes(32)
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "per-channel scales": (
        _per_channel_scales(wire.MAX_CHANNEL_SCALES),
        DecodeFailure.TRUNCATED,
    ),
    "extension params": (
        _model(
            struct.pack("<II", 0, 0),
            _subgraph_head(1),
            bytes([0, 2]),
            bytes(32),
            struct.pack("<I", wire.MAX_EXTENSION_PARAMS_BYTES + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operand values": (
        _model(
            struct.pack("<II", 0, 0), EMPTY_SG, struct.pack("<I", wire.MAX_OPERAND_VALUES_BYTES + 1)
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operand values within the limit": (
        _model(
            struct.pack("<II", 0, 0), EMPTY_SG, struct.pack("<I", wire.MAX_OPERAND_VALUES_BYTES)
        ),
        DecodeFailure.TRUNCATED,
    ),
    "pools": (
        _model(struct.pack("<II", 0, 0), EMPTY_SG, struct.pack("<II", 0, wire.MAX_POOLS + 1)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "pool name": (
        _model(
            struct.pack("<II", 0, 0),
            EMPTY_SG,
            struct.pack("<II", 0, 1),
            struct.pack("<IQI", 0, 1 << 62, wire.MAX_STRING_BYTES + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "extension names": (
        _model(
            struct.pack("<II", 0, 0),
            EMPTY_SG,
            struct.pack("<III", 0, 0, wire.MAX_EXTENSION_NAMES + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "request arguments": (
        _with_body(wire.MessageKind.REQUEST, struct.pack("<III", 1, wire.MAX_REQUEST_ARGUMENTS, 0)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "request arguments within the limit": (
        _with_body(wire.MessageKind.REQUEST, struct.pack("<III", 30000, 30000, 0)),
        DecodeFailure.TRUNCATED,
    ),
    "request pools": (
        _with_body(wire.MessageKind.REQUEST, struct.pack("<III", 0, 0, wire.MAX_POOLS)),
        DecodeFailure.TRUNCATED,
    ),
    "request pools over the limit": (
        _with_body(wire.MessageKind.REQUEST, struct.pack("<III", 0, 0, wire.MAX_POOLS + 1)),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "operand performance": (
        _with_body(
            wire.MessageKind.CAPABILITIES,
            bytes(32) + struct.pack("<I", wire.MAX_OPERAND_PERFORMANCE + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "output shapes": (
        _with_body(wire.MessageKind.EXECUTION_RESULT, struct.pack("<IQQI", 0, 0, 0, 60000)),
        DecodeFailure.TRUNCATED,
    ),
    "status message": (
        _with_body(
            wire.MessageKind.EXECUTION_RESULT,
            struct.pack("<IQQI", 0, 0, 0, 0) + struct.pack("<I", wire.MAX_STATUS_MESSAGE_BYTES + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "buffer roles": (
        _with_body(wire.MessageKind.BUFFER_ALLOCATION, struct.pack("<II", 0, 60000)),
        DecodeFailure.TRUNCATED,
    ),
    "per-channel scales over the limit": (
        _per_channel_scales(wire.MAX_CHANNEL_SCALES + 1),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "output shapes over the limit": (
        _with_body(
            wire.MessageKind.EXECUTION_RESULT,
            struct.pack("<IQQI", 0, 0, 0, wire.MAX_OUTPUT_SHAPES + 1),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
    "buffer roles over the limit": (
        _with_body(
            wire.MessageKind.BUFFER_ALLOCATION, struct.pack("<II", 0, wire.MAX_BUFFER_ROLES + 1)
        ),
        DecodeFailure.LIMIT_EXCEEDED,
    ),
}


@pytest.mark.parametrize("name", list(HUGE_DECLARATIONS))
def test_huge_declared_sizes_fail_fast_without_allocating(name):
    data, failure = HUGE_DECLARATIONS[name]
    tracemalloc.start()
    try:
        with pytest.raises(WireDecodeError) as info:
            wire.decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.failure == failure, info.value
    assert peak < 64 * 1024, f"{name}: peak allocation {peak} bytes"
    assert 0 < info.value.offset < len(data)


def test_read_message_reads_no_further_than_the_header_says():
    msg = wire.encode_model(small_model()).data
    assert wire.read_message(io.BytesIO(msg + b"next message")) == msg + b"n"
    # A declared length over MAX_MESSAGE_BYTES: the header only (the decoder says why).
    huge = _with_body(wire.MessageKind.MODEL, bytes(64))
    huge = _patched(huge, 8, "<I", wire.MAX_MESSAGE_BYTES)
    assert wire.read_message(io.BytesIO(huge)) == huge[: wire.HEADER_SIZE]
    not_a_message = b"garbage " * 8
    assert wire.read_message(io.BytesIO(not_a_message)) == not_a_message[: wire.HEADER_SIZE]


def test_oversized_message_is_refused_before_parsing(monkeypatch):
    data = wire.encode_model(small_model()).data
    monkeypatch.setattr(wire, "MAX_MESSAGE_BYTES", len(data) - 1)
    with pytest.raises(WireDecodeError) as info:
        wire.decode_model(data)
    assert info.value.failure == DecodeFailure.LIMIT_EXCEEDED and info.value.offset == 0


def test_fuzz_resolver_never_allocates_a_declared_pool_size():
    data = _model(
        struct.pack("<II", 0, 0),
        EMPTY_SG,
        struct.pack("<II", 0, 1),
        struct.pack("<IQI", 0, (1 << 64) - 1, 6) + b"ashmem",
        struct.pack("<I", 0),
    )
    model, peak = traced_peak(lambda: wire.decode_model(data))
    assert model.pools[0].size == (1 << 64) - 1 and model.pools[0].handle is None
    assert peak < 64 * 1024


# Where each error is reported: the byte offset of the offending field (docs/wire-format.md,
# "Errors"), for a shortfall the rank column that declared the missing data.
_BODY = wire.HEADER_SIZE
_MAIN = _BODY + 8  # the main subgraph's header
_MAIN_RANKS = _MAIN + 16
DECODE_ERROR_OFFSETS = {
    "invalid UTF-8 in a pool name (its third byte)": (
        _model(
            struct.pack("<II", 0, 0),
            EMPTY_SG,
            struct.pack("<II", 0, 1),
            struct.pack("<IQI", wire.NO_HANDLE, 4, 3) + b"ab\xff",
            struct.pack("<I", 0),
        ),
        DecodeFailure.BAD_VALUE,
        _MAIN + 16 + 4 + 4 + 16 + 2,
    ),
    "the rank byte of operand 2": (
        _model(
            struct.pack("<II", 0, 0),
            _subgraph_head(3),
            bytes([0, 0, wire.MAX_RANK + 1]),
            bytes(3 + 3 * 32),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
        _MAIN_RANKS + 2,
    ),
    "dimensions missing: the rank column that declared them": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(1), bytes([2, 0]), bytes(32)),
        DecodeFailure.TRUNCATED,
        _MAIN_RANKS,
    ),
    "the record of operation 1, with too many inputs": (
        _model(
            struct.pack("<II", 0, 0),
            _subgraph_head(0, 2),
            struct.pack("<III", 0, 0, 0),
            struct.pack("<III", 0, wire.MAX_OPERATION_ARGUMENTS + 1, 0),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
        _MAIN + 16 + 12,
    ),
    "the subgraph input count over the limit": (
        _model(struct.pack("<II", 0, 0), _subgraph_head(0, 0, wire.MAX_OPERANDS + 1)),
        DecodeFailure.LIMIT_EXCEEDED,
        _MAIN + 8,
    ),
    "an isSufficient byte of 2 (output shape 1)": (
        _with_body(
            wire.MessageKind.EXECUTION_RESULT,
            struct.pack("<IQQI", 0, 0, 0, 2) + bytes([0, 0, 1, 2]) + struct.pack("<I", 0),
        ),
        DecodeFailure.BAD_VALUE,
        _BODY + 24 + 2 + 1,
    ),
    # The counts check a minimum size per item; an item cut short is still TRUNCATED.
    "the second extension name entry, 1 byte of it": (
        _model(
            struct.pack("<II", 0, 0),
            EMPTY_SG,
            struct.pack("<III", 0, 0, 2),
            struct.pack("<HI", 1, 5) + b"com.a",
            b"\x02",
        ),
        DecodeFailure.TRUNCATED,
        _MAIN + 16 + 12 + 11,
    ),
    "the second request pool, after a memory pool": (
        _with_body(
            wire.MessageKind.REQUEST,
            struct.pack("<III", 0, 0, 2)
            + struct.pack("<IIQI", 0, wire.NO_HANDLE, 4, 0)
            + struct.pack("<I", 1),
        ),
        DecodeFailure.TRUNCATED,
        _BODY + 12 + 20,
    ),
    "a per-channel header after an extension blob": (
        _model(
            struct.pack("<II", 0, 0),
            _subgraph_head(2, 0, 1),
            bytes([0, 0, 2, 1]),
            bytes(64),
            struct.pack("<I", 0),
            b"\0\0",
        ),
        DecodeFailure.TRUNCATED,
        _MAIN_RANKS + 4 + 64 + 4,
    ),
    "a buffer descriptor of rank MAX_RANK + 1": (
        _with_body(
            wire.MessageKind.BUFFER_ALLOCATION,
            struct.pack("<I", wire.MAX_RANK + 1)
            + bytes(4 * (wire.MAX_RANK + 1))
            + struct.pack("<II", 0, 0),
        ),
        DecodeFailure.LIMIT_EXCEEDED,
        _BODY,
    ),
}


@pytest.mark.parametrize("name", list(DECODE_ERROR_OFFSETS))
def test_decode_errors_point_at_the_offending_field(name):
    data, failure, offset = DECODE_ERROR_OFFSETS[name]
    with pytest.raises(WireDecodeError) as info:
        wire.decode(data)
    assert (info.value.failure, info.value.offset) == (failure, offset), info.value


def test_a_buffer_descriptor_of_rank_max_rank_decodes():
    msg = wire.BufferAllocationMessage(BufferDesc((1,) * wire.MAX_RANK))
    assert round_trip(msg) == msg


# ---------------------------------------------------------------------------------------
# Encoding refuses what the HAL cannot carry
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, match",
    [
        (Model(Subgraph((Operand(3, (-1,)),))), "not a uint32"),
        (Model(Subgraph((Operand(3, (1,) * (wire.MAX_RANK + 1)),))), "rank"),
        (Model(Subgraph((Operand(1 << 32),))), "operand 0"),
        (Model(Subgraph((Operand(3, scale=1e300),))), "operand 0"),
        (Model(Subgraph((Operand(3, extra_params=[1.0]),))), "extraParams"),
        (Model(Subgraph(), pools=(BufferToken(1),)), "must be a Memory"),
        (Model(Subgraph(), pools=(Memory("\ud800", 1),)), "UTF-8"),
        (Model(Subgraph(), pools=(Memory("x" * 2000, 1),)), "limit"),
        (
            Model(Subgraph(), extension_name_to_prefix=(ExtensionNameAndPrefix("e", 1 << 16),)),
            "uint16",
        ),
    ],
)
def test_encoding_refuses_values_outside_the_hal_domains(model, match):
    with pytest.raises(WireEncodeError, match=match):
        wire.encode_model(model)


_ONE_OPERAND = Operand(T.INT32)


@pytest.mark.parametrize(
    "obj, match",
    [
        (Model(Subgraph(), (Subgraph(),) * wire.MAX_SUBGRAPHS), "subgraphs"),
        (  # each subgraph within the limit, the model over it
            Model(
                Subgraph((_ONE_OPERAND,) * (wire.MAX_OPERANDS // 2 + 1)),
                (Subgraph((_ONE_OPERAND,) * (wire.MAX_OPERANDS // 2)),),
            ),
            "operands in the model",
        ),
        (
            Model(Subgraph((), (Operation(0, (0,) * (wire.MAX_OPERATION_ARGUMENTS + 1), ()),))),
            "operation 0 inputs",
        ),
        (Model(Subgraph((), (), (0,) * (wire.MAX_OPERANDS + 1))), "main subgraph, input indexes"),
        (
            Model(Subgraph(), (Subgraph((), (), (), (0,) * (wire.MAX_OPERANDS + 1)),)),
            "subgraph 0, output indexes",
        ),
        (wire.BufferAllocationMessage(BufferDesc((1,) * (wire.MAX_RANK + 1))), "rank"),
    ],
    ids=["subgraphs", "operands", "operation inputs", "inputs", "outputs", "buffer rank"],
)
def test_encoding_refuses_counts_the_decoder_would_reject(obj, match):
    with pytest.raises(WireEncodeError, match=match):
        wire.encode(obj)


@pytest.mark.parametrize(
    "obj",
    [
        wire.BufferAllocationMessage(input_roles=(BufferRole(0, 0, 1e300),)),
        wire.BufferAllocationMessage(output_roles=(BufferRole(0, 0, -1e39),)),
        Capabilities(PerformanceInfo(1e300, 1.0), PerformanceInfo(1.0, 1.0)),
    ],
    ids=["input role", "output role", "capabilities"],
)
def test_a_float_beyond_float32_range_is_an_encode_error(obj):
    with pytest.raises(WireEncodeError, match="float"):
        wire.encode(obj)


def test_a_model_of_max_subgraphs_round_trips():
    model = Model(Subgraph(), (Subgraph(),) * (wire.MAX_SUBGRAPHS - 1))
    assert len(round_trip(model).referenced) == wire.MAX_SUBGRAPHS - 1


def test_encode_rejects_unknown_objects():
    with pytest.raises(TypeError):
        wire.encode(object())
    with pytest.raises(TypeError):
        wire.decode("NNFW")


# ---------------------------------------------------------------------------------------
# nnfuzz decode
# ---------------------------------------------------------------------------------------


def _cli(*argv: str) -> int:
    from fuzz.cli import main

    return main(["decode", *argv])


def test_cli_summarizes_and_validates_a_model(tmp_path, capsys):
    name, model, feeds = EXAMPLES[0]
    path = tmp_path / "m.nnw"
    path.write_bytes(wire.encode_model(model).data)
    assert _cli(str(path), "--validate") == 0
    out = capsys.readouterr().out
    assert "MODEL message, wire format 1" in out
    assert "main subgraph:" in out and "status NONE" in out


def test_cli_reports_invalid_models_with_their_status(tmp_path, capsys):
    model = Model(
        Subgraph(
            (Operand(T.TENSOR_FLOAT32, (2,), lifetime=L.SUBGRAPH_OUTPUT),),
            (Operation(O.ADD, (5, 6, 7), (0,)),),
            (),
            (0,),
        )
    )
    path = tmp_path / "bad.nnw"
    path.write_bytes(wire.encode_model(model).data)
    rc = _cli(str(path), "--validate", "--version", "V1_2")
    out = capsys.readouterr().out
    assert rc == 3, out  # 4 would mean validation raised instead of returning a status
    assert "validation (HAL 1.2): status INVALID_ARGUMENT" in out
    assert "operand 5" in out
    assert "deferrable" not in out  # Android's validation checks operand indexes too


def test_cli_says_when_android_would_leave_the_rejection_to_execution(tmp_path, capsys):
    name, model, feeds = EXAMPLES[0]
    out_index = model.main.output_indexes[0]
    out = model.main.operands[out_index]
    wrong = dataclasses.replace(out, dimensions=tuple(d + 1 for d in out.dimensions))
    operands = tuple(wrong if k == out_index else o for k, o in enumerate(model.main.operands))
    bad = dataclasses.replace(model, main=dataclasses.replace(model.main, operands=operands))
    path = tmp_path / "shape.nnw"
    path.write_bytes(wire.encode_model(bad).data)
    assert _cli(str(path), "--validate") == 3
    text = capsys.readouterr().out
    assert "is declared" in text and "but the inputs give" in text
    assert "deferrable: Android's own validation leaves this rule to execution" in text


def test_cli_prints_the_decode_error_and_offset(tmp_path, capsys):
    data = wire.encode_model(small_model()).data
    path = tmp_path / "cut.nnw"
    path.write_bytes(_patched(data, 4, "<H", 7))
    assert _cli(str(path)) == 1
    out = capsys.readouterr().out
    assert "decode error at byte 4 (unsupported version)" in out
    assert "[07]" in out


def test_cli_validates_requests_against_a_model(tmp_path, capsys):
    name, model, feeds = EXAMPLES[0]
    (tmp_path / "m.nnw").write_bytes(wire.encode_model(model).data)
    (tmp_path / "r.nnw").write_bytes(wire.encode_request(build_request(model, feeds).request).data)
    assert _cli(str(tmp_path / "r.nnw"), "--validate") == 2  # needs --model
    rc = _cli(str(tmp_path / "r.nnw"), "--validate", "--model", str(tmp_path / "m.nnw"))
    out = capsys.readouterr().out
    assert "REQUEST message" in out and "input 0: pool 0" in out
    # Pools decode without handles (as in the fuzz targets), which validation rejects.
    assert rc == 3, out
    assert "status INVALID_ARGUMENT" in out and "handle" in out


def test_cli_explains_a_request_fuzz_input_and_validates_it_on_its_fixture(tmp_path, capsys):
    from fuzz.fixtures import FIXTURES
    from fuzz.targets.request import split_input

    corpus = Path(__file__).resolve().parents[1] / "corpus" / "request"
    seed = corpus / "seed-while_count-fenced"
    selector = seed.read_bytes()[0]
    assert FIXTURES[selector & 0x0F][0] == "while_count" and (selector >> 4) & 3 == 3
    assert _cli(str(seed), "--validate") == 0
    out = capsys.readouterr().out
    assert f"selector 0x{selector:02x} (fixture while_count, path fenced," in out
    # The pool bytes after the message are read too, as far as the target reads them.
    pool_bytes = split_input(seed.read_bytes())[2]
    assert pool_bytes and f"{len(pool_bytes)} pool bytes after the message" in out
    assert "REQUEST message" in out and "status NONE" in out  # its pools resolved, as in the target
    # The same request with its selector byte pointing at another fixture does not fit it.
    other = tmp_path / "other"
    other.write_bytes(bytes([selector & 0xF0 | 6]) + seed.read_bytes()[1:])
    assert _cli(str(other), "--validate") == 3
    assert "fixture split_outputs" in capsys.readouterr().out


def test_cli_describes_every_kind(tmp_path, capsys):
    for k, obj in enumerate(ALL_KINDS_SAMPLES):
        path = tmp_path / f"{k}.nnw"
        path.write_bytes(wire.encode(obj).data)
        assert _cli(str(path), "--limit", "1") == 0
    out = capsys.readouterr().out
    for kind in wire.MessageKind:
        assert f"{kind.name} message" in out
    assert "... 1 more" in out  # --limit truncates long tables


def test_cli_exits_4_when_validation_raises_instead_of_returning_a_status(
    tmp_path, capsys, monkeypatch
):
    from driver import validation

    def raising(*args, **kwargs):
        raise ZeroDivisionError("in a validation hook")

    monkeypatch.setattr(validation, "validate_model", raising)
    path = tmp_path / "m.nnw"
    path.write_bytes(wire.encode_model(EXAMPLES[0][1]).data)
    assert _cli(str(path), "--validate") == 4
    out = capsys.readouterr().out
    assert "raised instead of returning a status (a bug)" in out and "ZeroDivisionError" in out


def test_describe_lists_every_row_with_limit_0_and_shows_scalar_constants():
    from fuzz.commands.wire import describe

    values = struct.pack("<fi", 2.5, 7)  # the INT32 ends operandValues
    operands = (
        Operand(T.FLOAT32, lifetime=L.CONSTANT_COPY, location=DataLocation(0, 0, 4)),
        Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(0, 4, 4)),
        Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(0, 6, 4)),  # past it
    )
    model = Model(Subgraph(operands), operand_values=values)
    lines = describe(model, limit=0)
    rows = [line for line in lines if "CONSTANT_COPY" in line]
    assert len(rows) == 3 and not any("more" in line for line in lines)
    assert rows[0].endswith("values @0+4 = 2.5  consumers=0")
    assert rows[1].endswith("values @4+4 = 7  consumers=0")
    assert rows[2].endswith("values @6+4  consumers=0")
    assert "    ... 2 more" in describe(model, limit=1)


def test_the_hex_context_brackets_the_offending_byte_or_the_end():
    from fuzz.commands.wire import _hex_context

    data = bytes(range(20))
    around_10 = "bytes 2..18: 02 03 04 05 06 07 08 09 [0a] 0b 0c 0d 0e 0f 10 11"
    assert _hex_context(data, 10) == around_10
    assert _hex_context(data[:3], 3) == "bytes 0..3: 00 01 02 [end]"


def test_cli_shows_a_shortfall_at_the_end_of_the_data(tmp_path, capsys):
    path = tmp_path / "cut.nnw"
    path.write_bytes(_model(struct.pack("<II", 0, 0)))  # no main subgraph
    assert _cli(str(path)) == 1
    out = capsys.readouterr().out
    assert "decode error at byte 20 (truncated)" in out and out.rstrip().endswith("[end]")


def test_cli_exits_1_when_the_model_of_a_request_does_not_decode(tmp_path, capsys):
    (tmp_path / "r.nnw").write_bytes(wire.encode_request(small_request()).data)
    (tmp_path / "m.nnw").write_bytes(b"NNFW")
    assert _cli(str(tmp_path / "r.nnw"), "--validate", "--model", str(tmp_path / "m.nnw")) == 1
    assert "--model" in capsys.readouterr().out


@pytest.mark.parametrize(
    "obj, shown, not_shown",
    [
        (
            wire.ExecutionResultMessage(output_shapes=(OutputShape((2,), False),)),
            "[2] INSUFFICIENT",
            "sufficient",
        ),
        (
            wire.ExecutionResultMessage(output_shapes=(OutputShape((2,), True),)),
            "[2] sufficient",
            "INSUFFICIENT",
        ),
        (  # up to 8 per-channel scales are all shown, without an ellipsis
            Operand(3, (8,), extra_params=SymmPerChannelQuantParams(0, (0.5,) * 8)),
            "scales=[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]",
            "...",
        ),
        (
            Operand(3, (9,), extra_params=SymmPerChannelQuantParams(0, (0.5,) * 9)),
            "scales=[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, ...]",
            "0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5",
        ),
    ],
    ids=["insufficient", "sufficient", "8 scales", "9 scales"],
)
def test_describe_shows_sufficiency_and_scales(obj, shown, not_shown):
    from fuzz.commands.wire import describe

    if isinstance(obj, Operand):
        obj = Model(Subgraph((obj,)))
    text = "\n".join(describe(obj))
    assert shown in text and not_shown not in text.replace(shown, ""), text


def test_cli_help_explains_the_command(capsys):
    with pytest.raises(SystemExit):
        _cli("--help")
    out = capsys.readouterr().out
    for word in ("--validate", "--version", "--model", "exit status", "byte offset"):
        assert word in out
