"""Feature-level drivers (``reference-1.0`` … ``reference-1.2``) report, accept and execute
only what their HAL version had, and refuse the rest as that version would."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from driver.builder import ModelBuilder, build_request
from driver.device import CollectingCallback, DeviceConfig, ReferenceDevice
from driver.drivers.feature_level import FeatureLevelDevice
from driver.extensions import extension_device
from driver.hal.types import (
    UINT64_MAX,
    BufferDesc,
    BufferRole,
    BufferToken,
    DataLocation,
    ErrorStatus,
    HalVersion,
    MeasureTiming,
    Memory,
    OperandType,
    OperationType,
    Priority,
    Request,
    RequestArgument,
)
from driver.operations.base import array_from_bytes
from driver.registry import load_device
from driver.scheduler import Budget
from driver.validation import validate_model
from tests.operations.examples import all_examples

T = OperandType
Op = OperationType
V = HalVersion
E = ErrorStatus
LEVELS = {"reference-1.0": V.V1_0, "reference-1.1": V.V1_1, "reference-1.2": V.V1_2}


def one_op(op, in_type=T.TENSOR_FLOAT32, *, act=True, relaxed=False, out_dims=(2,), **q):
    """x (op) y, or (op) x for unary operations; ``act`` adds the fused activation."""
    b = ModelBuilder(relaxed=relaxed)
    x = b.add_input(in_type, (2,), **q)
    ins = [x]
    if act:
        ins += [b.add_input(in_type, (2,), **q), b.add_scalar(T.INT32, 0)]
    o = b.add_output(in_type, out_dims, **q)
    b.add_operation(op, ins, [o])
    return b.build()


def run(device, model, inputs, **kw):
    status, pm = device.prepare_model(model)
    assert status == E.NONE, device.last_error
    rb = build_request(model, inputs, **kw)
    return pm, rb, pm.execute_synchronously(rb.request)


F2 = [np.array([1.5, -2.0], np.float32), np.array([0.5, 4.0], np.float32)]


# --- capabilities ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, types",
    [
        ("reference-1.0", set(range(0, 6))),
        ("reference-1.1", set(range(0, 6))),
        ("reference-1.2", set(range(0, 14))),
    ],
)
def test_capabilities_report_exactly_the_version_types(name, types):
    status, caps = load_device(name).get_capabilities()
    assert status == E.NONE
    assert {p.type for p in caps.operand_performance} == types


def test_hal_1_3_reports_the_signed_quant_type():
    _, caps = load_device("reference").get_capabilities()
    assert T.TENSOR_QUANT8_ASYMM_SIGNED in {p.type for p in caps.operand_performance}


# --- models: operations, types and flags newer than the level ------------------------------


@pytest.mark.parametrize(
    "model_factory, first_level, what",
    [
        (lambda: one_op(Op.SUB), V.V1_1, "SUB (1.1)"),
        (lambda: one_op(Op.ABS, act=False), V.V1_2, "ABS (1.2)"),
        (lambda: one_op(Op.ADD, T.TENSOR_FLOAT16), V.V1_2, "TENSOR_FLOAT16 (1.2)"),
        (lambda: one_op(Op.HARD_SWISH, act=False), V.V1_3, "HARD_SWISH (1.3)"),
        (lambda: one_op(Op.ADD, T.TENSOR_INT32), V.V1_3, "ADD on TENSOR_INT32 (1.3)"),
        (
            lambda: one_op(Op.ADD, T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zero_point=-3),
            V.V1_3,
            "TENSOR_QUANT8_ASYMM_SIGNED (1.3)",
        ),
        (lambda: one_op(Op.ADD, relaxed=True), V.V1_1, "the relaxed flag (1.1)"),
    ],
)
def test_newer_models_are_invalid_below_their_version(model_factory, first_level, what):
    model = model_factory()
    assert validate_model(model) == first_level, what
    for name, level in LEVELS.items():
        device = load_device(name)
        status, supported = device.get_supported_operations(model)
        prepared_status, pm = device.prepare_model(model)
        if level < first_level:
            assert status == E.INVALID_ARGUMENT and supported == [], (name, what)
            assert prepared_status == E.INVALID_ARGUMENT and pm is None, (name, what)
            assert device.last_error, (name, what)
        else:
            assert (status, supported) == (E.NONE, [True]), (name, what)
            assert prepared_status == E.NONE, (name, what)


def test_a_1_2_operation_is_rejected_by_1_1_and_runs_on_1_2():
    model = one_op(Op.ABS, act=False)
    assert load_device("reference-1.1").get_supported_operations(model)[0] == E.INVALID_ARGUMENT
    _, rb, (status, _, _) = run(load_device("reference-1.2"), model, [F2[0]])
    assert status == E.NONE
    assert rb.output_array(0, T.TENSOR_FLOAT32, (2,)).tolist() == [1.5, 2.0]


def test_examples_are_accepted_exactly_from_their_version_and_agree_with_1_3():
    """Every registered one-operation example: a feature level takes it iff the model's
    features all exist there, and then computes what HAL 1.3 computes."""
    reference = ReferenceDevice()
    devices = {level: load_device(name) for name, level in LEVELS.items()}
    checked = 0
    for ex in all_examples():
        model, feeds = ex.model()
        need = validate_model(model)
        if need > V.V1_2:
            continue
        rb = build_request(model, feeds)
        status, pm = reference.prepare_model(model)
        if status != E.NONE or pm.execute_synchronously(rb.request)[0] != E.NONE:
            continue  # examples that fail at run time are other tests' business
        want = [rb.output_bytes(k) for k in range(len(model.main.output_indexes))]
        for level, device in devices.items():
            status, _ = device.get_supported_operations(model)
            assert (status == E.NONE) == (level >= need), (ex.name, level)
            if level < need:
                continue
            got_rb = build_request(model, feeds)
            status, pm = device.prepare_model(model)
            assert status == E.NONE, (ex.name, level, device.last_error)
            assert pm.execute_synchronously(got_rb.request)[0] == E.NONE, (ex.name, level)
            got = [got_rb.output_bytes(k) for k in range(len(want))]
            assert got == want, (ex.name, level)
            checked += 1
    assert checked > 100


# --- preparation and execution options -----------------------------------------------------


@pytest.mark.parametrize("name", list(LEVELS))
def test_priority_and_prepare_deadline_need_1_3(name):
    device = load_device(name)
    model = one_op(Op.ADD)
    assert device.prepare_model(model, priority=Priority.HIGH)[0] == E.INVALID_ARGUMENT
    future = time.monotonic_ns() + 60 * 10**9
    assert device.prepare_model(model, deadline=future)[0] == E.INVALID_ARGUMENT
    assert device.prepare_model(model)[0] == E.NONE
    modern = load_device("reference")
    assert modern.prepare_model(model, priority=Priority.HIGH, deadline=future)[0] == E.NONE


@pytest.mark.parametrize("name", list(LEVELS))
@pytest.mark.parametrize("inner", ["registered", "a 1.3 driver"])
def test_compilation_caching_reaches_the_driver_from_1_2(name, inner):
    # Before 1.2 prepareModel has no cache arguments: the files stay untouched, also when
    # the wrapped driver itself could cache.
    if inner == "registered":
        device = load_device(name)
    else:
        device = FeatureLevelDevice(ReferenceDevice(), LEVELS[name])
    model_cache = os.memfd_create("nnfuzz-model-cache", os.MFD_CLOEXEC)
    data_cache = os.memfd_create("nnfuzz-data-cache", os.MFD_CLOEXEC)
    try:
        status, _ = device.prepare_model(
            one_op(Op.ADD), model_cache=[model_cache], data_cache=[data_cache], token=bytes(32)
        )
        assert status == E.NONE
        written = os.fstat(model_cache).st_size > 0 and os.fstat(data_cache).st_size > 0
        assert written == (LEVELS[name] >= V.V1_2)
    finally:
        os.close(model_cache)
        os.close(data_cache)


@pytest.mark.parametrize("name", list(LEVELS))
def test_execution_deadline_and_loop_timeout_need_1_3(name):
    device = load_device(name)
    model = one_op(Op.ADD)
    pm, rb, (status, _, _) = run(device, model, F2)
    assert status == E.NONE
    future = time.monotonic_ns() + 60 * 10**9
    assert pm.execute_synchronously(rb.request, deadline=future)[0] == E.INVALID_ARGUMENT
    assert pm.execute_synchronously(rb.request, loop_timeout=10**9)[0] == E.INVALID_ARGUMENT
    cb = CollectingCallback()
    assert pm.execute(rb.request, MeasureTiming.NO, future, None, cb) == E.INVALID_ARGUMENT
    assert cb.wait(5)[0] == E.INVALID_ARGUMENT  # the callback is still notified, once
    # HAL 1.3 takes both.
    pm13, rb13, _ = run(load_device("reference"), model, F2)
    assert (
        pm13.execute_synchronously(rb13.request, deadline=future, loop_timeout=10**9)[0] == E.NONE
    )


@pytest.mark.parametrize("name", list(LEVELS))
def test_memory_domains_need_1_3(name):
    device = load_device(name)
    model = one_op(Op.ADD)
    pm, rb, _ = run(device, model, F2)
    status, buffer, token = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    assert (status, buffer, token) == (E.GENERAL_FAILURE, None, 0)
    # A request naming a driver buffer cannot even be expressed.
    pools = (*rb.request.pools, BufferToken(1))
    inputs = (RequestArgument(False, DataLocation(2, 0, 0), ()), rb.request.inputs[1])
    request = Request(inputs, rb.request.outputs, pools)
    assert pm.execute_synchronously(request)[0] == E.INVALID_ARGUMENT


@pytest.mark.parametrize("version", [V.V1_0, V.V1_1, V.V1_2])
def test_the_wrapper_hides_what_its_version_lacks_even_from_a_1_3_driver(version):
    """The feature level is the wrapper's, not the wrapped driver's: a 1.3 driver with
    extensions and caching, behind 1.0/1.1, reports neither and cannot prepare from a
    cache; behind any older level it offers no memory domains."""
    inner = extension_device()
    assert inner.get_supported_extensions()[1] and inner.get_number_of_cache_files_needed()[1]
    device = FeatureLevelDevice(inner, version)
    old = version < V.V1_2
    status, extensions = device.get_supported_extensions()
    assert status == E.NONE and (extensions == []) == old
    status, n_model, n_data = device.get_number_of_cache_files_needed()
    assert status == E.NONE and ((n_model, n_data) == (0, 0)) == old
    # A cache the 1.3 driver wrote opens behind 1.2, not behind 1.0/1.1.
    model_cache = os.memfd_create("nnfuzz-model-cache", os.MFD_CLOEXEC)
    data_cache = os.memfd_create("nnfuzz-data-cache", os.MFD_CLOEXEC)
    try:
        token = bytes(range(32))
        caches = {"model_cache": [model_cache], "data_cache": [data_cache], "token": token}
        assert inner.prepare_model(one_op(Op.ADD), **caches)[0] == E.NONE
        status, prepared = device.prepare_model_from_cache(None, [model_cache], [data_cache], token)
        assert (status, prepared is None) == ((E.GENERAL_FAILURE, True) if old else (E.NONE, False))
    finally:
        os.close(model_cache)
        os.close(data_cache)
    pm, _, _ = run(device, one_op(Op.ADD), F2)
    status, buffer, token = device.allocate(BufferDesc(), [pm], [BufferRole(0, 0)], [])
    assert (status, buffer, token) == (E.GENERAL_FAILURE, None, 0)


def test_hardware_buffer_blob_pools_need_1_2():
    model = one_op(Op.ADD)
    for name, ok in (("reference-1.1", False), ("reference-1.2", True)):
        pm, rb, _ = run(load_device(name), model, F2)
        blob = Memory("hardware_buffer_blob", rb.input_pool.size, rb.input_pool.handle)
        request = Request(rb.request.inputs, rb.request.outputs, (blob, rb.output_pool))
        status = pm.execute_synchronously(request)[0]
        assert (status == E.NONE) == ok, name
        if not ok:
            assert status == E.INVALID_ARGUMENT


def test_unspecified_output_dims_need_1_2():
    model = one_op(Op.ADD, out_dims=(0,))
    for name in ("reference-1.0", "reference-1.1"):
        pm, rb, (status, shapes, _) = run(load_device(name), model, F2)
        assert status == E.INVALID_ARGUMENT, name
        # The same execution is fine once the request specifies the dimensions.
        rb = build_request(model, F2, output_dims=[(2,)])
        assert pm.execute_synchronously(rb.request)[0] == E.NONE, name
    _, rb, (status, shapes, _) = run(load_device("reference-1.2"), model, F2)
    assert status == E.NONE and shapes[0].dimensions == (2,)
    got = array_from_bytes(T.TENSOR_FLOAT32, (2,), rb.output_bytes(0)[:8])
    assert got.tolist() == [2.0, 2.0]


# --- execution paths and results -------------------------------------------------------------


@pytest.mark.parametrize("name", list(LEVELS))
def test_fenced_execution_needs_1_3_and_bursts_1_2(name):
    pm, rb, _ = run(load_device(name), one_op(Op.ADD), F2)
    assert pm.execute_fenced(rb.request, [])[0] == E.GENERAL_FAILURE
    status, burst = pm.configure_execution_burst()
    if LEVELS[name] < V.V1_2:
        assert (status, burst) == (E.GENERAL_FAILURE, None)
    else:
        assert status == E.NONE
        assert burst.execute(rb.request)[0] == E.NONE
        future = time.monotonic_ns() + 60 * 10**9
        assert burst.execute(rb.request, deadline=future)[0] == E.INVALID_ARGUMENT


@pytest.mark.parametrize("name", list(LEVELS))
def test_timing_and_output_shapes_only_from_1_2(name):
    pm, rb, _ = run(load_device(name), one_op(Op.ADD), F2)
    status, shapes, timing = pm.execute_synchronously(rb.request, MeasureTiming.YES)
    assert status == E.NONE
    assert rb.output_array(0, T.TENSOR_FLOAT32, (2,)).tolist() == [2.0, 2.0]
    if LEVELS[name] < V.V1_2:
        assert shapes == []  # 1.0's notify carries only a status
        assert timing.time_on_device == UINT64_MAX and timing.time_in_driver == UINT64_MAX
    else:
        assert shapes[0].dimensions == (2,)
        assert timing.time_on_device != UINT64_MAX
        assert timing.time_in_driver >= timing.time_on_device


class _Recording:
    """A prepared model that records which of its methods the harness calls."""

    def __init__(self, inner, calls):
        self.inner, self.calls = inner, calls

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.inner, name)


class _RecordingDevice(ReferenceDevice):
    def __init__(self, version):
        super().__init__(DeviceConfig(version=version))
        self.calls: list[str] = []

    def prepare_model(self, model, *args, **kw):
        status, pm = super().prepare_model(model, *args, **kw)
        return status, _Recording(pm, self.calls)


@pytest.mark.parametrize("version", [V.V1_0, V.V1_1])
def test_synchronous_execution_reaches_an_old_driver_as_execute(version):
    inner = _RecordingDevice(version)
    device = FeatureLevelDevice(inner, version)
    pm, rb, (status, _, _) = run(device, one_op(Op.ADD), F2)
    assert status == E.NONE
    assert rb.output_array(0, T.TENSOR_FLOAT32, (2,)).tolist() == [2.0, 2.0]
    assert inner.calls == ["execute"]


def test_1_2_driver_gets_synchronous_calls():
    inner = _RecordingDevice(V.V1_2)
    _, _, (status, _, _) = run(FeatureLevelDevice(inner, V.V1_2), one_op(Op.ADD), F2)
    assert status == E.NONE and inner.calls == ["execute_synchronously"]


def test_1_3_statuses_become_general_failure():
    """A budget the request cannot fit gives RESOURCE_EXHAUSTED_PERSISTENT at 1.3; a 1.2
    driver has no such status and reports GENERAL_FAILURE."""
    model = one_op(Op.ADD)
    for version, expected in (
        (V.V1_3, E.RESOURCE_EXHAUSTED_PERSISTENT),
        (V.V1_2, E.GENERAL_FAILURE),
    ):
        inner = ReferenceDevice(DeviceConfig(version=version, budget=Budget(memory_bytes=1)))
        device = inner if version == V.V1_3 else FeatureLevelDevice(inner, version)
        _, _, (status, _, _) = run(device, model, F2)
        assert status == expected, version


def test_feature_level_devices_name_their_version():
    for name, level in LEVELS.items():
        device = load_device(name)
        assert device.version == level and device.name == name
    with pytest.raises(ValueError):
        FeatureLevelDevice(ReferenceDevice(), V.V1_3)


@pytest.mark.parametrize("driver", ["reference-1.0", "reference-1.1", "reference-1.2"])
def test_execute_target_corpus_replays_clean_on_older_hal_versions(monkeypatch, driver):
    # The target generates only what the driver's version expresses and passes a loop
    # timeout only to 1.3 drivers; before 1.2 an execution reports no output shapes.
    import importlib
    from pathlib import Path

    from fuzz import harness

    monkeypatch.setenv(harness.DRIVER_ENV, driver)
    target = importlib.import_module("fuzz.targets.execute")
    corpus = Path(__file__).resolve().parent.parent / "corpus"
    inputs = sorted((corpus / "execute").iterdir()) + sorted((corpus / "crashes/execute").iterdir())
    assert len(inputs) > 50
    violations = []
    for path in inputs:
        try:
            target.test_one_input(path.read_bytes())
        except harness.ContractViolation as e:
            violations.append(f"{path.name}: {e}")
    assert violations == []
