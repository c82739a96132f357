"""Compilation cache (driver/cache.py) through the reference device's HAL entry points."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver import cache as compilation_cache
from driver import executor as executor_module
from driver.builder import ModelBuilder, build_request
from driver.device import DeviceConfig, ReferenceDevice
from driver.extensions import EXTENSIONS
from driver.hal.types import (
    ErrorStatus,
    ExecutionPreference,
    HalVersion,
    OperandType,
    OperationType,
    Priority,
)

T = OperandType
O = OperationType  # noqa: E741 - the project's spelling of operation references
F32 = T.TENSOR_FLOAT32
TOKEN = bytes(range(32))
OTHER_TOKEN = bytes(range(1, 33))


def conv_model(weights_by_reference: bool = True):
    """CONV_2D (weights in a shared-memory pool) -> ADD -> RELU over [1, 4, 4, 2]."""
    rng = np.random.default_rng(7)
    b = ModelBuilder()
    x = b.add_input(F32, (1, 4, 4, 2))
    w = b.add_constant(
        F32, (2, 3, 3, 2), rng.uniform(-1, 1, (2, 3, 3, 2)), by_reference=weights_by_reference
    )
    bias = b.add_constant(F32, (2,), [0.25, -0.5])
    params = [b.add_scalar(T.INT32, v) for v in (1, 1, 1, 1, 1, 1, 0)]
    c = b.add_operand(F32, (1, 4, 4, 2))
    b.add_operation(O.CONV_2D, [x, w, bias, *params], [c])
    k = b.add_constant(F32, (2,), [1.0, -3.0])
    act = b.add_scalar(T.INT32, 0)
    a = b.add_operand(F32, (1, 4, 4, 2))
    b.add_operation(O.ADD, [c, k, act], [a])
    y = b.add_output(F32, (1, 4, 4, 2))
    b.add_operation(O.RELU, [a], [y])
    return b.build()


def if_model():
    """IF(cond) then x * 2 else x + 2: referenced subgraphs, and an input of unknown dims
    (so the plan has a dynamic step)."""
    b = ModelBuilder()
    branches = []
    for op, k in ((O.MUL, 2.0), (O.ADD, 2.0)):
        sg = b.new_subgraph()
        x = sg.add_input(F32, (3,))
        c = sg.add_constant(F32, (1,), [k])
        act = sg.add_scalar(T.INT32, 0)
        y = sg.add_output(F32, (3,))
        sg.add_operation(op, [x, c, act], [y])
        branches.append(b.add_subgraph_operand(sg))
    cond = b.add_input(T.TENSOR_BOOL8, (1,))
    x = b.add_input(F32, (0,))
    y = b.add_output(F32, (0,))
    b.add_operation(O.IF, [cond, *branches, x], [y])
    return b.build()


def memfd(data: bytes = b"") -> int:
    fd = os.memfd_create("nnfuzz-cache-test", os.MFD_CLOEXEC)
    os.write(fd, data)
    return fd


@pytest.fixture
def fds():
    opened: list[int] = []

    def make(data: bytes = b"") -> int:
        fd = memfd(data)
        opened.append(fd)
        return fd

    yield make
    for fd in opened:
        os.close(fd)


def contents(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size, 0)


def save(device, model, fds, token=TOKEN, **kw):
    mc, dc = fds(), fds()
    status, prepared = device.prepare_model(
        model, model_cache=[mc], data_cache=[dc], token=token, **kw
    )
    assert status == ErrorStatus.NONE, device.last_error
    return prepared, mc, dc


def restore(device, mc, dc, token=TOKEN, deadline=None):
    return device.prepare_model_from_cache(deadline, [mc], [dc], token)


def outputs(prepared, inputs) -> list[bytes]:
    bundle = build_request(prepared.model, inputs)
    status, shapes, _ = prepared.execute_synchronously(bundle.request)
    assert status == ErrorStatus.NONE, prepared.device.last_error
    return [bundle.output_bytes(k)[: int(np.prod(s.dimensions)) * 4] for k, s in enumerate(shapes)]


# --- round trip -------------------------------------------------------------------------


def test_cache_files_needed_follow_the_hal_version():
    assert ReferenceDevice().get_number_of_cache_files_needed() == (ErrorStatus.NONE, 1, 1)
    assert ReferenceDevice(version=HalVersion.V1_2).get_number_of_cache_files_needed() == (
        ErrorStatus.NONE,
        1,
        1,
    )
    assert ReferenceDevice(version=HalVersion.V1_1).get_number_of_cache_files_needed() == (
        ErrorStatus.NONE,
        0,
        0,
    )


@pytest.mark.parametrize("by_reference", [True, False])
def test_round_trip_gives_identical_outputs(fds, by_reference):
    device = ReferenceDevice()
    model = conv_model(by_reference)
    original, mc, dc = save(device, model, fds)
    assert os.fstat(mc).st_size > 0 and os.fstat(dc).st_size > 0
    status, restored = restore(device, mc, dc)
    assert status == ErrorStatus.NONE, device.last_error
    assert restored.model.main == model.main
    x = np.random.default_rng(3).uniform(-2, 2, (1, 4, 4, 2)).astype(np.float32)
    assert outputs(restored, [x]) == outputs(original, [x])
    # A fresh device (another process, as far as the cache can tell) restores it too.
    status, again = restore(ReferenceDevice(), mc, dc)
    assert status == ErrorStatus.NONE
    assert outputs(again, [x]) == outputs(original, [x])


def test_round_trip_with_control_flow_and_dynamic_shapes(fds):
    device = ReferenceDevice()
    original, mc, dc = save(device, if_model(), fds)
    status, restored = restore(device, mc, dc)
    assert status == ErrorStatus.NONE, device.last_error
    assert restored.executor.step_facts() == original.executor.step_facts()
    assert any(f.dynamic for f in original.executor.step_facts()[None])
    x = np.array([1.0, -2.0, 3.5], np.float32)
    for cond in (True, False):
        got = outputs(restored, [np.array([cond]), x])
        assert got == outputs(original, [np.array([cond]), x])
        want = x * 2 if cond else x + 2
        assert np.frombuffer(got[0], np.float32).tolist() == want.tolist()


@pytest.mark.parametrize(
    "priority, preference",
    [
        (Priority.HIGH, ExecutionPreference.LOW_POWER),
        (Priority.LOW, ExecutionPreference.SUSTAINED_SPEED),
    ],
)
def test_priority_and_preference_are_part_of_the_cache(fds, priority, preference):
    # Unequal codes (HIGH and SUSTAINED_SPEED are both 2): the two must not be swapped.
    device = ReferenceDevice()
    _, mc, dc = save(device, conv_model(), fds, priority=priority, preference=preference)
    status, restored = restore(device, mc, dc)
    assert status == ErrorStatus.NONE
    assert (restored.priority, restored.preference) == (priority, preference)


def test_restoring_skips_validation_and_the_static_pass(fds, monkeypatch):
    device = ReferenceDevice()
    original, mc, dc = save(device, conv_model(), fds)

    def forbidden(*args, **kwargs):
        raise AssertionError("restoring from the cache must not redo this")

    monkeypatch.setattr("driver.device.validate_model", forbidden)
    monkeypatch.setattr("driver.device.validate_extension_use", forbidden)
    monkeypatch.setattr(executor_module.Executor, "_plan_step", forbidden)
    status, restored = restore(device, mc, dc)
    assert status == ErrorStatus.NONE, device.last_error
    x = np.ones((1, 4, 4, 2), np.float32)
    assert outputs(restored, [x]) == outputs(original, [x])


# --- what must be refused ---------------------------------------------------------------


def assert_refused(device, mc, dc, token=TOKEN, status=ErrorStatus.GENERAL_FAILURE):
    got, prepared = restore(device, mc, dc, token)
    assert (got, prepared) == (status, None), device.last_error


def small_cache(fds):
    """A small model's cache files, as bytes (a few hundred bytes in all)."""
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    w = b.add_constant(F32, (2,), [1.5, -1.0], by_reference=True)
    act = b.add_scalar(T.INT32, 0)
    y = b.add_output(F32, (2,))
    b.add_operation(O.ADD, [x, w, act], [y])
    _, mc, dc = save(ReferenceDevice(), b.build(), fds)
    return contents(mc), contents(dc)


@pytest.fixture(scope="module")
def small_files():
    opened: list[int] = []

    def make(data: bytes = b"") -> int:
        fd = memfd(data)
        opened.append(fd)
        return fd

    files = small_cache(make)
    yield files
    for fd in opened:
        os.close(fd)


def test_small_cache_is_accepted_as_written(small_files, fds):
    model_bytes, data_bytes = small_files
    device = ReferenceDevice()
    status, _ = restore(device, fds(model_bytes), fds(data_bytes))
    assert status == ErrorStatus.NONE, device.last_error


def test_every_truncation_is_refused(small_files, fds):
    device = ReferenceDevice()
    model_bytes, data_bytes = small_files
    mc, dc = fds(), fds()
    for which, data in (("model", model_bytes), ("data", data_bytes)):
        for n in range(len(data)):
            compilation_cache.write_file(mc, data[:n] if which == "model" else model_bytes)
            compilation_cache.write_file(dc, data[:n] if which == "data" else data_bytes)
            got, prepared = restore(device, mc, dc)
            assert (got, prepared) == (ErrorStatus.GENERAL_FAILURE, None), (which, n)


def test_every_byte_flipped_in_turn_is_refused(small_files, fds):
    device = ReferenceDevice()
    model_bytes, data_bytes = small_files
    mc, dc = fds(), fds()
    for which, data in (("model", model_bytes), ("data", data_bytes)):
        for pos in range(len(data)):
            bad = bytearray(data)
            bad[pos] ^= 0xFF
            compilation_cache.write_file(mc, bytes(bad) if which == "model" else model_bytes)
            compilation_cache.write_file(dc, bytes(bad) if which == "data" else data_bytes)
            got, prepared = restore(device, mc, dc)
            assert (got, prepared) == (ErrorStatus.GENERAL_FAILURE, None), (which, pos)


@settings(max_examples=200)
@given(data=st.data())
def test_any_single_byte_corruption_is_refused(small_files, data):
    model_bytes, data_bytes = small_files
    which = data.draw(st.sampled_from(["model", "data"]))
    original = model_bytes if which == "model" else data_bytes
    pos = data.draw(st.integers(0, len(original) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != original[pos]))
    bad = bytearray(original)
    bad[pos] = value
    files = (bytes(bad), data_bytes) if which == "model" else (model_bytes, bytes(bad))
    mc, dc = memfd(files[0]), memfd(files[1])
    try:
        device = ReferenceDevice()
        assert restore(device, mc, dc) == (ErrorStatus.GENERAL_FAILURE, None)
    finally:
        os.close(mc)
        os.close(dc)


def test_appended_bytes_are_refused(small_files, fds):
    model_bytes, data_bytes = small_files
    device = ReferenceDevice()
    assert_refused(device, fds(model_bytes + b"\0"), fds(data_bytes))
    body_length = len(compilation_cache.bodies(model_bytes, data_bytes)[0])
    assert f"body is {body_length + 1} bytes, the header says {body_length}" in device.last_error
    assert_refused(device, fds(model_bytes), fds(data_bytes + b"x"))


@pytest.mark.parametrize("extra", [1, 1 << 20, (1 << 32) - 1])
def test_a_data_file_larger_than_the_model_cache_says_is_refused_unread(
    small_files, fds, monkeypatch, extra
):
    # A sparse file costs nothing to make; reading it whole before any check cost up to
    # 4 GiB (twice over). The verified model cache says how large its data file is.
    model_bytes, data_bytes = small_files
    dc = fds(data_bytes)
    os.ftruncate(dc, len(data_bytes) + extra)
    reads = []
    real_preadv = os.preadv
    monkeypatch.setattr(os, "preadv", lambda fd, *a: reads.append(fd) or real_preadv(fd, *a))
    device = ReferenceDevice()
    assert_refused(device, fds(model_bytes), dc)
    assert f"data cache: file of {len(data_bytes) + extra} bytes exceeds" in device.last_error
    assert dc not in reads


def test_another_token_is_refused(fds):
    device = ReferenceDevice()
    _, mc, dc = save(device, conv_model(), fds)
    assert_refused(device, mc, dc, OTHER_TOKEN)
    assert "another token" in device.last_error


@pytest.mark.parametrize(
    "other, why",
    [
        (DeviceConfig(version_string="nnfuzz-reference-2"), "written by driver"),
        (DeviceConfig(version=HalVersion.V1_2), "written by driver"),
        (DeviceConfig(emulate_relaxed_float16=True), "written by driver"),
        (DeviceConfig(extensions=tuple(e.hal() for e in EXTENSIONS.values())), "written by driver"),
        (DeviceConfig(cache_secret=b"a private secret"), "checksum mismatch"),
    ],
    ids=["driver version", "HAL version", "configuration", "extensions", "secret"],
)
def test_a_cache_from_another_driver_is_refused(fds, other, why):
    # The identity is a plain header field, named when it differs; the secret is not.
    _, mc, dc = save(ReferenceDevice(), conv_model(), fds)
    device = ReferenceDevice(other)
    assert_refused(device, mc, dc)
    assert why in device.last_error


def test_a_header_of_another_role_or_format_is_refused_by_name(small_files, fds):
    model_bytes, data_bytes = small_files
    device = ReferenceDevice()
    assert_refused(device, fds(data_bytes), fds(data_bytes))
    assert "model cache: holds a data cache file" in device.last_error
    other_format = bytearray(model_bytes)
    other_format[4:6] = (compilation_cache.FORMAT_VERSION + 1).to_bytes(2, "little")
    assert_refused(device, fds(bytes(other_format)), fds(data_bytes))
    assert f"cache format {compilation_cache.FORMAT_VERSION + 1}," in device.last_error
    # The magic and the reserved byte are named too (the checksum would refuse them
    # anyway, with a message that says less).
    for at, value, why in [
        (0, b"NNFD", "not a compilation cache file"),
        (7, b"\1", "reserved header byte is 1"),
    ]:
        other_header = model_bytes[:at] + value + model_bytes[at + len(value) :]
        assert_refused(device, fds(other_header), fds(data_bytes))
        assert f"model cache: {why}" in device.last_error


def test_swapped_files_are_refused(fds):
    device = ReferenceDevice()
    _, mc, dc = save(device, conv_model(), fds)
    assert_refused(device, dc, mc)
    assert_refused(device, mc, mc)
    assert_refused(device, dc, dc)


def test_a_data_file_of_another_compilation_is_refused(fds):
    device = ReferenceDevice()
    _, mc, _ = save(device, conv_model(), fds)
    _, _, other_dc = save(device, if_model(), fds)  # same token, other model
    assert_refused(device, mc, other_dc)
    assert "another compilation" in device.last_error


def test_bad_arguments_fail_cleanly(fds):
    device = ReferenceDevice()
    _, mc, dc = save(device, conv_model(), fds)
    for model_cache, data_cache, token in [
        ([mc], [dc], TOKEN[:31]),
        ([mc], [dc], "not bytes"),
        ([mc], [dc], None),
        ([], [], TOKEN),
        ([mc, mc], [dc], TOKEN),
        ([-1], [dc], TOKEN),
        ([mc], [1 << 20], TOKEN),
        (["fd"], [dc], TOKEN),
        ([fds()], [fds()], TOKEN),  # empty files
    ]:
        got = device.prepare_model_from_cache(None, model_cache, data_cache, token)
        assert got == (ErrorStatus.GENERAL_FAILURE, None), (model_cache, data_cache, token)


def test_a_deadline_needs_hal_1_3(fds):
    device = ReferenceDevice(version=HalVersion.V1_2)
    _, mc, dc = save(device, conv_model(), fds)
    far = time.monotonic_ns() + 10**10
    assert restore(device, mc, dc, deadline=far) == (ErrorStatus.INVALID_ARGUMENT, None)
    assert restore(device, mc, dc)[0] == ErrorStatus.NONE


def test_deadlines(fds):
    device = ReferenceDevice()
    _, mc, dc = save(device, conv_model(), fds)
    assert restore(device, mc, dc, deadline=time.monotonic_ns() - 1) == (
        ErrorStatus.MISSED_DEADLINE_PERSISTENT,
        None,
    )
    assert restore(device, mc, dc, deadline=-5) == (ErrorStatus.INVALID_ARGUMENT, None)
    status, _ = restore(device, mc, dc, deadline=time.monotonic_ns() + 10**10)
    assert status == ErrorStatus.NONE


def test_saving_is_best_effort(fds):
    """Preparation succeeds when the compilation cannot be saved; restoring then fails."""
    device = ReferenceDevice()
    model = conv_model()
    mc, dc = fds(), fds()
    for model_cache, data_cache, token in [
        ([mc], [dc], None),
        ([mc], [dc], b"short"),
        ([mc, fds()], [dc], TOKEN),
        ([], [], TOKEN),
    ]:
        status, prepared = device.prepare_model(
            model, model_cache=model_cache, data_cache=data_cache, token=token
        )
        assert status == ErrorStatus.NONE and prepared is not None
        assert os.fstat(mc).st_size == 0
    # A read-only descriptor: nothing is written.
    path = f"/proc/self/fd/{mc}"
    read_only = os.open(path, os.O_RDONLY)
    try:
        status, prepared = device.prepare_model(
            model, model_cache=[read_only], data_cache=[dc], token=TOKEN
        )
        assert status == ErrorStatus.NONE and prepared is not None
        assert_refused(device, mc, dc)
    finally:
        os.close(read_only)


def test_a_feature_level_without_caching_neither_saves_nor_restores(fds):
    device = ReferenceDevice(version=HalVersion.V1_1)
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    act = b.add_scalar(T.INT32, 0)
    y = b.add_output(F32, (2,))
    b.add_operation(O.ADD, [x, x, act], [y])
    _, mc, dc = save(device, b.build(), fds)
    assert os.fstat(mc).st_size == 0
    assert_refused(device, mc, dc)


def test_a_private_secret_round_trips(fds):
    device = ReferenceDevice(DeviceConfig(cache_secret=b"driver-private"))
    original, mc, dc = save(device, conv_model(), fds)
    status, restored = restore(device, mc, dc)
    assert status == ErrorStatus.NONE
    # The default (public) secret cannot read it: forging needs the private one.
    assert_refused(ReferenceDevice(), mc, dc)


def test_decode_cache_rejects_without_exceptions_other_than_cache_error(small_files):
    model_bytes, data_bytes = small_files
    identity = ReferenceDevice().cache_identity
    entry = compilation_cache.decode_cache(model_bytes, data_bytes, token=TOKEN, identity=identity)
    assert len(entry.model.main.operations) == 1
    for bad_model, bad_data in [
        (b"", b""),
        (b"NNFC" + bytes(200), data_bytes),
        (data_bytes, model_bytes),
    ]:
        with pytest.raises(compilation_cache.CacheError):
            compilation_cache.decode_cache(bad_model, bad_data, token=TOKEN, identity=identity)


@settings(max_examples=100)
@given(
    model_bytes=st.one_of(
        st.binary(max_size=300), st.binary(max_size=64).map(lambda b: b"NNFC" + b)
    ),
    data_bytes=st.binary(max_size=64),
    token=st.binary(min_size=32, max_size=32),
)
def test_arbitrary_files_are_refused_without_exceptions(model_bytes, data_bytes, token):
    mc, dc = memfd(model_bytes), memfd(data_bytes)
    try:
        device = ReferenceDevice()
        assert restore(device, mc, dc, token) == (ErrorStatus.GENERAL_FAILURE, None)
    finally:
        os.close(mc)
        os.close(dc)


@settings(max_examples=150)
@given(data=st.data())
def test_the_parser_behind_the_checksum_raises_only_cache_error(small_files, data):
    """Bodies a forger holding the secret could seal: mutated real bodies parse to an
    entry or fail with CacheError, never another exception."""
    identity = ReferenceDevice().cache_identity
    model_body, data_body = compilation_cache.bodies(*small_files)
    body = bytearray(model_body)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(body)))
        action = data.draw(st.sampled_from(["set", "cut", "insert"]))
        if action == "set" and pos < len(body):
            body[pos] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del body[pos:]
        else:
            body[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
    files = compilation_cache.seal_bodies(bytes(body), data_body, token=TOKEN, identity=identity)
    try:
        entry = compilation_cache.decode_cache(*files, token=TOKEN, identity=identity)
    except compilation_cache.CacheError:
        return
    assert len(entry.facts) == 1 + len(entry.model.referenced)


def _plan_offset(model_body: bytes) -> int:
    """Where the plan starts in a model cache body: after the preference, priority and
    reserved field, the wire model and the pool placements."""
    model_len = int.from_bytes(model_body[4:8], "little")
    n_pools = int.from_bytes(model_body[8 + model_len : 12 + model_len], "little")
    return 12 + model_len + 16 * n_pools


def _plan_with_one_subgraph_more(model_body: bytes) -> bytes:
    at = _plan_offset(model_body)
    count = int.from_bytes(model_body[at : at + 4], "little")
    return model_body[:at] + (count + 1).to_bytes(4, "little") + model_body[at + 4 :]


def _with_u32(body: bytes, at: int, value: int) -> bytes:
    return body[:at] + value.to_bytes(4, "little") + body[at + 4 :]


def _placements_offset(model_body: bytes) -> int:
    """Where the pool count is (the placements follow it, 16 bytes each)."""
    return 8 + int.from_bytes(model_body[4:8], "little")


def _without_placements(model_body: bytes) -> bytes:
    at = _placements_offset(model_body)
    n_pools = int.from_bytes(model_body[at : at + 4], "little")
    return _with_u32(model_body, at, 0)[: at + 4] + model_body[at + 4 + 16 * n_pools :]


# The small model: one ADD in the main subgraph, one pool of 8 bytes. The plan is the
# subgraph count, then per subgraph its step count, then per step its flags ...
@pytest.mark.parametrize(
    "forge, why",
    [
        (lambda model, data: (model + b"\0", data), "1 bytes after the plan"),
        (lambda model, data: (model, data[:-1]), "a pool lies beyond the end of the file"),
        (
            lambda model, data: (_plan_with_one_subgraph_more(model), data),
            "does not match the model's subgraphs",
        ),
        (
            lambda model, data: (_with_u32(model, _plan_offset(model) + 4, 2), data),
            "does not match the model's operations",
        ),
        (
            lambda model, data: (_with_u32(model, _plan_offset(model) + 8, 4), data),
            "has bad step flags 0x4",
        ),
        (lambda model, data: (model[:2] + b"\1\0" + model[4:], data), "reserved field is not 0"),
        (
            lambda model, data: (_without_placements(model), b""),
            "pool handle 0 is not in the cache",
        ),
        (
            lambda model, data: (_with_u32(model, _placements_offset(model) + 12, 7), data[:-1]),
            "pool 0 holds 7 bytes, not 8",
        ),
    ],
    ids=[
        "a byte after the plan",
        "a pool past the data",
        "a subgraph too many",
        "a step too many",
        "unknown step flags",
        "a reserved field set",
        "a pool not placed",
        "a pool placed short",
    ],
)
def test_sealed_bodies_that_do_not_add_up_are_refused(small_files, fds, forge, why):
    """Behind a valid checksum (what a forger holding the secret could write), the
    bodies are still checked against each other and against the model: a pool lying
    past the data would be read short, and a plan must describe exactly the model's
    subgraphs and end with the body."""
    device = ReferenceDevice()
    bodies = forge(*compilation_cache.bodies(*small_files))
    files = compilation_cache.seal_bodies(*bodies, token=TOKEN, identity=device.cache_identity)
    assert_refused(device, fds(files[0]), fds(files[1]))
    assert why in device.last_error


def test_sealing_the_original_bodies_gives_the_original_files(small_files):
    identity = ReferenceDevice().cache_identity
    sealed = compilation_cache.seal_bodies(
        *compilation_cache.bodies(*small_files), token=TOKEN, identity=identity
    )
    assert sealed == small_files
