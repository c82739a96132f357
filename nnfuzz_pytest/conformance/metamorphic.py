"""Metamorphic: equivalent models and executions give equivalent results on the driver.

Relations that hold for every correct driver, whatever its numerics: the execution paths
and repeated executions agree bit for bit (one prepared model); the signed quant8 model
is the unsigned one shifted by 128 (bit for bit); NCHW is transposed NHWC; constants fed
as inputs, inputs behind an identity ADD, dynamic output shapes and a cache round trip
change nothing beyond the criteria; relaxed float32 stays within the relaxed criteria.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus, HalVersion, Model, OperandLifeTime, is_scalar_type
from driver.hal.types import OperandType as T
from nnfuzz_pytest import transforms
from nnfuzz_pytest.checks import (
    assert_close,
    assert_ok,
    assert_same_bits,
    execute_valid,
    prepare_supported,
    status_name,
)
from nnfuzz_pytest.harness import CacheFiles, output_sizes_for, token_for
from nnfuzz_pytest.session import (
    active,
    execution_options,
    models,
    nn_property,
    require_version,
)

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_metamorphic]
V = HalVersion


def _first_path(driver) -> str:
    return "sync" if "sync" in driver.paths else driver.paths[0]


def _run(driver, case, path=None, **kw):
    prepared = prepare_supported(driver, case.model)
    assume(prepared is not None)
    path = path or _first_path(driver)
    return assert_ok(driver.run(prepared, case.inputs, path, **kw), path)


@nn_property(1.0, case=models(), data=st.data())
def test_execution_paths_agree(nn_driver, case, data):
    """sync = async = fenced = burst (those the driver's HAL version has), bit for bit,
    on one prepared model, whatever the request's pool kinds, the timing measurement
    asked for and the fences executeFenced waits for. (executeFenced of outputs the model
    leaves unspecified must be refused; it runs with the dims given when they can be.)"""
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    options = data.draw(execution_options(nn_driver), label="options")
    results = {}
    for path in nn_driver.paths:
        outputs = execute_valid(nn_driver, prepared, case, path, **options)
        if outputs is not None:
            results[path] = outputs
    first, *others = results
    for path in others:
        assert_same_bits(results[path], results[first], f"{path} vs {first}", case.ignored)


@nn_property(0.5, case=models())
def test_same_request_twice_gives_same_bits(nn_driver, case):
    """Executing the same request twice gives the same bits (executions are
    deterministic)."""
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    path = _first_path(nn_driver)
    first = assert_ok(nn_driver.run(prepared, case.inputs, path), path)
    again = assert_ok(nn_driver.run(prepared, case.inputs, path), path)
    assert_same_bits(again, first, "second execution vs first", case.ignored)


@nn_property(1.0, case=models(types={T.TENSOR_QUANT8_ASYMM}))
def test_quant8_signed_is_unsigned_minus_128(nn_driver, case):
    """Every TENSOR_QUANT8_ASYMM operand as TENSOR_QUANT8_ASYMM_SIGNED (zero points and
    values − 128) gives the unsigned outputs − 128, bit for bit (except CAST,
    HASHTABLE_LOOKUP, LSH_PROJECTION, PAD_V2, QUANTIZED_16BIT_LSTM)."""
    require_version(V.V1_3, "TENSOR_QUANT8_ASYMM_SIGNED")
    signed = transforms.to_signed(case, active().version)
    assume(signed is not None)
    unsigned_out = _run(nn_driver, case)
    signed_out = _run(nn_driver, signed)
    main = case.model.main
    shifted = []
    for k, arr in enumerate(unsigned_out):
        if main.operands[main.output_indexes[k]].type == T.TENSOR_QUANT8_ASYMM:
            arr = (arr.astype(np.int16) - 128).astype(np.int8)
        shifted.append(arr)
    assert_same_bits(signed_out, shifted, "signed vs unsigned − 128", case.ignored)


@nn_property(1.0, case=models(layout=True))
def test_nchw_is_transposed_nhwc(nn_driver, case):
    """CONV_2D and pooling with layout NCHW (input and output transposed) give the NHWC
    outputs transposed."""
    require_version(V.V1_2, "the NCHW layout")
    nchw = transforms.to_nchw(case, active().version)
    assume(nchw is not None)
    nhwc_out = _run(nn_driver, case)
    nchw_out = _run(nn_driver, nchw)
    back = [np.transpose(a, (0, 2, 3, 1)) if a.ndim == 4 else a for a in nchw_out]
    assert_close(case.model, back, nhwc_out, "NCHW (transposed back) vs NHWC", ignored=case.ignored)


CONSTANT_LIFETIMES = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)


def constant_tensors(model: Model) -> list[int]:
    """The main subgraph's constant tensor operands (copied or in a pool)."""
    return [
        i
        for i, o in enumerate(model.main.operands)
        if o.lifetime in CONSTANT_LIFETIMES and not is_scalar_type(o.type) and o.dimensions
    ]


@nn_property(1.0, case=models(), data=st.data())
def test_constants_as_inputs_change_nothing(nn_driver, case, data):
    """Constant tensors turned into model inputs fed with the same values give the same
    outputs (within the criteria)."""
    constants = constant_tensors(case.model)
    assume(constants)
    which = data.draw(
        st.lists(st.sampled_from(constants), min_size=1, unique=True), label="constants"
    )
    variant = transforms.constants_as_inputs(case, which, active().version)
    assume(variant is not None)
    assert_close(
        case.model,
        _run(nn_driver, variant),
        _run(nn_driver, case),
        "inputs vs constants",
        ignored=case.ignored,
    )


@nn_property(1.0, case=models(), data=st.data())
def test_input_behind_identity_add_changes_nothing(nn_driver, case, data):
    """A model input fed through ADD(x, 0) first gives the same outputs (within the
    criteria)."""
    assume(case.model.main.input_indexes)  # a model of constants only has no input to move
    k = data.draw(st.integers(0, len(case.model.main.input_indexes) - 1), label="input")
    variant = transforms.behind_identity_add(case, k, active().version)
    assume(variant is not None)
    assert_close(
        case.model,
        _run(nn_driver, variant),
        _run(nn_driver, case),
        "behind ADD(x, 0) vs direct",
        ignored=case.ignored,
    )


@nn_property(1.0, case=models(types={T.TENSOR_FLOAT32}))
def test_relaxed_is_within_relaxed_tolerance_of_float32(nn_driver, case):
    """The model with relaxed float32 computation agrees with float32 within the
    operation's float16 criterion (the driver may compute in float16)."""
    require_version(V.V1_1, "relaxed float32 computation")
    variant = transforms.relaxed(case, active().version)
    assume(variant is not None)
    assert_close(
        variant.model,
        _run(nn_driver, variant),
        _run(nn_driver, case),
        "relaxed vs float32",
        ignored=case.ignored,
    )


@nn_property(1.0, case=models())
def test_dynamic_output_shape_equals_static(nn_driver, case):
    """With the output dimensions unspecified the execution reports the static shapes
    and gives the same outputs (within the criteria), on every path that allows it."""
    require_version(V.V1_2, "unspecified output dimensions")
    static_out = _run(nn_driver, case)
    dynamic = transforms.dynamic_outputs(case.model)
    prepared = prepare_supported(nn_driver, dynamic)
    assume(prepared is not None)
    sizes = output_sizes_for(case.model, static_out)
    for path in nn_driver.paths:
        if path == "fenced":
            continue  # executeFenced needs fully specified outputs
        execution = nn_driver.run(prepared, case.inputs, path, output_sizes=sizes)
        outputs = assert_ok(execution, f"{path}, dynamic output shapes")
        reported = [tuple(s.dimensions) for s in execution.shapes]
        assert reported == [tuple(a.shape) for a in static_out], (
            f"{path}: reported output shapes {reported}, static "
            f"{[tuple(a.shape) for a in static_out]}"
        )
        assert_close(
            case.model, outputs, static_out, f"{path}: dynamic vs static", ignored=case.ignored
        )


@nn_property(0.5, case=models())
def test_cache_round_trip_equals_fresh_prepare(nn_driver, case):
    """prepareModel with cache files and a token, then prepareModelFromCache, gives a
    prepared model whose outputs equal the fresh one's. Drivers that need no cache files
    must answer prepareModelFromCache with GENERAL_FAILURE."""
    n_model, n_data = nn_driver.cache_files_needed()
    if (n_model, n_data) == (0, 0):
        status, prepared = nn_driver.call(
            "prepareModelFromCache",
            lambda: nn_driver.device.prepare_model_from_cache(None, [], [], token_for(b"x")),
        )
        assert status == ErrorStatus.GENERAL_FAILURE and prepared is None, (
            "a driver that needs no cache files must fail prepareModelFromCache with "
            f"GENERAL_FAILURE, got {status_name(status)}"
        )
        pytest.skip("the driver reports 0 cache files: no compilation cache to round-trip")
    fresh = _run(nn_driver, case)
    files = CacheFiles(n_model, n_data)
    token = token_for(repr(case).encode())
    try:
        model_fds, data_fds = files.open()
        try:
            nn_driver.must_prepare(
                case.model, model_cache=model_fds, data_cache=data_fds, token=token
            )
        finally:
            files.close(model_fds, data_fds)
        model_fds, data_fds = files.open()
        try:
            dev = nn_driver.device
            status, handle = nn_driver.call(
                "prepareModelFromCache",
                lambda: dev.prepare_model_from_cache(None, model_fds, data_fds, token),
            )
        finally:
            files.close(model_fds, data_fds)
    finally:
        files.cleanup()
    assert status == ErrorStatus.NONE and handle is not None, (
        f"prepareModelFromCache right after saving the cache returned {status_name(status)}"
    )
    from nnfuzz_pytest.harness import Prepared

    cached = Prepared(case.model, handle)
    path = _first_path(nn_driver)
    outputs = assert_ok(nn_driver.run(cached, case.inputs, path), f"{path} from cache")
    assert_close(case.model, outputs, fresh, "from cache vs fresh", ignored=case.ignored)
