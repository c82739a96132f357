"""HAL-version utilities (min_version / compliant_with / convert_to) and the type-query
helpers of ``driver.hal.types``."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from driver.builder import ModelBuilder, build_request
from driver.hal.types import (
    BufferToken,
    Capabilities,
    DataLocation,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    HalError,
    HalVersion,
    MeasureTiming,
    Model,
    OperandPerformance,
    PerformanceInfo,
    Priority,
    extension_prefix,
    extension_type_within,
    is_extension_type,
    is_scalar_type,
    is_tensor_type,
    make_extension_type,
    non_extension_size_of_data,
    tensor_has_unspecified_dimensions,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import allocate_shared_memory
from driver.testing import EXTREME_SCALARS, OpExample, ScalarArg, TensorArg, single_op_model
from driver.validation import validate_model
from driver.versions import (
    NO_PERFORMANCE,
    QUANT8_PERFORMANCE_TYPES,
    HalConversionWarning,
    compliant_with,
    convert_to,
    lookup_performance,
    min_version,
    noncompliant_operations,
)
from tests.operations.examples import all_examples
from tests.test_validation import (
    VALID,
    extension_model,
    if_model,
    simple_request,
    two_adds,
    unspecified_output_model,
)

V = HalVersion
F32 = T.TENSOR_FLOAT32


# ---------------------------------------------------------------------------------------
# Version names
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, version",
    [
        ("V1_2", HalVersion.V1_2),
        ("v1_3", HalVersion.V1_3),
        ("1.1", HalVersion.V1_1),
        (" 1.2 ", HalVersion.V1_2),
        ("10", HalVersion.V1_0),
        ("12", HalVersion.V1_2),
    ],
)
def test_a_hal_version_is_spelled_as_its_name_its_label_or_two_digits(text, version):
    # The --version options take any of the three (fuzz/commands/arguments.py).
    assert HalVersion.parse(text) == version


@pytest.mark.parametrize("text", ["1.4", "14", "2", "112", "V1", ""])
def test_an_unknown_hal_version_is_a_value_error(text):
    with pytest.raises(ValueError, match="unknown HAL version"):
        HalVersion.parse(text)


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, build, lowest", VALID, ids=[v[0] for v in VALID])
def test_min_version_of_models(name, build, lowest):
    model = build()
    assert min_version(model) == lowest
    for v in V:
        assert compliant_with(model, v) == (v >= lowest)


def _valid_at(model: Model, version: HalVersion) -> bool:
    try:
        validate_model(model, version)
    except HalError as e:
        assert e.status == ErrorStatus.INVALID_ARGUMENT
        return False
    return True


def test_compliance_is_validity_at_that_version_for_every_example():
    """For every example model: valid at version v exactly when v >= min_version, so
    each version-dependent rule is reported as a feature of the version it needs."""
    checked = 0
    for ex in all_examples():
        model = ex.model()[0]
        lowest = min_version(model)
        for v in V:
            assert _valid_at(model, v) == (v >= lowest), (ex.name, v, lowest)
            assert compliant_with(model, v) == (v >= lowest)
        checked += 1
    assert checked > 0


def _bad_parameters(ex: OpExample) -> Iterator[tuple[int, object]]:
    """(input index, replacement) for each constant parameter of ``ex``, set to values
    an operation's prepare() may reject: its type's extremes, -1 and 0 for int32
    tensors."""
    for k, arg in enumerate(ex.inputs):
        if isinstance(arg, ScalarArg) and not arg.as_input:
            for value in EXTREME_SCALARS.get(arg.type, ()):
                yield k, dataclasses.replace(arg, value=value)
        elif isinstance(arg, TensorArg) and arg.const and arg.type == T.TENSOR_INT32:
            for value in (-1, 0):
                yield k, dataclasses.replace(arg, values=np.full_like(arg.values, value))


def _rejection(model: Model, version: HalVersion) -> HalError | None:
    try:
        validate_model(model, version)
    except HalError as e:
        return e
    return None


def test_a_version_rule_wins_over_a_parameter_rejection_left_to_execution():
    """Android's validation checks an operation's HAL version; parameter values only its
    prepare() does. So an example needing HAL v with a bad parameter, validated as an
    older version, is a strict rejection (the version), never a deferrable one. A hook
    that lost the version it needs to its own deferrable rejection fails this."""
    checked = 0
    for ex in all_examples():
        lowest = min_version(ex.model()[0])
        if lowest == V.V1_0:
            continue
        for k, arg in _bad_parameters(ex):
            inputs = list(ex.inputs)
            inputs[k] = arg
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # float16 1e10: overflow
                model = single_op_model(ex.op, inputs, ex.outputs, relaxed=ex.relaxed)[0]
                at_latest = _rejection(model, V.V1_3)
            if at_latest is None or not at_latest.deferrable:
                continue  # only models Android's validation accepts as HAL 1.3 test this
            for v in (v for v in V if v < lowest):
                e = _rejection(model, v)
                assert e is not None and not e.deferrable, (ex.name, k, v, e and e.message)
                checked += 1
    assert checked > 1000  # the examples hold plenty of such models


def test_example_versions_follow_their_types():
    """Spot checks against Android's version tables (the declarations' signatures)."""
    by_name = {ex.name: ex for ex in all_examples()}
    add = by_name["add_float32_broadcast"].model()[0]
    assert min_version(add) == V.V1_0
    # The same operation on float16 is a 1.2 feature, on signed quant8 a 1.3 one.
    assert min_version(two_adds(T.TENSOR_FLOAT16)) == V.V1_2
    assert min_version(two_adds(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=1.0)) == V.V1_3
    assert min_version(if_model()) == V.V1_3


def two_independent_adds() -> Model:
    """Operation 0 adds float32 tensors, operation 1 float16 ones."""
    b = ModelBuilder()
    for t in (F32, T.TENSOR_FLOAT16):
        x = b.add_input(t, (2,))
        y = b.add_input(t, (2,))
        act = b.add_scalar(T.INT32, 0)
        out = b.add_output(t, (2,))
        b.add_operation(O.ADD, [x, y, act], [out])
    return b.build()


def test_noncompliant_operations():
    m = two_independent_adds()
    assert noncompliant_operations(m, V.V1_0) == {1}
    assert noncompliant_operations(m, V.V1_1) == {1}
    assert noncompliant_operations(m, V.V1_2) == frozenset()
    assert noncompliant_operations(two_adds(), V.V1_0) == frozenset()
    # The relaxed flag is the model's, not an operation's.
    assert noncompliant_operations(two_adds(relaxed=True), V.V1_0) == frozenset()
    assert noncompliant_operations(if_model(), V.V1_2) == {0}


def test_convert_compliant_model_is_the_same_model():
    m = two_adds()
    for v in V:
        assert convert_to(m, v) is m


def test_convert_model_losing_information_raises_naming_the_loss():
    with pytest.raises(HalError) as e:
        convert_to(two_adds(T.TENSOR_FLOAT16), V.V1_1)
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    assert "HAL 1.1" in e.value.message and "TENSOR_FLOAT16 needs HAL 1.2" in e.value.message
    with pytest.raises(HalError, match="relaxComputationFloat32toFloat16"):
        convert_to(two_adds(relaxed=True), V.V1_0)


def test_lenient_model_conversion_warns_and_drops_what_it_can():
    relaxed = two_adds(relaxed=True)
    with pytest.warns(HalConversionWarning, match="relaxed-float32 flag"):
        converted = convert_to(relaxed, V.V1_0, lenient=True)
    assert not converted.relaxed and validate_model(converted, V.V1_0) == V.V1_0
    assert converted.main == relaxed.main

    ext = extension_model()
    with pytest.warns(HalConversionWarning, match="extension map"):
        converted = convert_to(ext, V.V1_1, lenient=True)
    assert converted.extension_name_to_prefix == ()
    # An extension operand cannot be dropped: the result is still not a 1.1 model.
    assert not _valid_at(converted, V.V1_1)

    cf = if_model()
    with pytest.warns(HalConversionWarning, match="2 referenced subgraphs"):
        converted = convert_to(cf, V.V1_2, lenient=True)
    assert converted.referenced == ()


def test_lenient_model_conversion_keeps_what_the_version_carries():
    """Only what the target version lacks is dropped: HAL 1.1 keeps the relaxed flag of
    a model that needs 1.2 for its float16 operands, and 1.2 the extension map of a
    model that needs 1.3 for its control flow."""
    relaxed_f16 = dataclasses.replace(
        two_adds(T.TENSOR_FLOAT16), relax_computation_float32_to_float16=True
    )
    with pytest.warns(HalConversionWarning, match="TENSOR_FLOAT16") as caught:
        converted = convert_to(relaxed_f16, V.V1_1, lenient=True)
    assert converted.relaxed
    assert "relaxed-float32 flag" not in str(caught[0].message)

    ext_map = extension_model().extension_name_to_prefix
    cf_ext = dataclasses.replace(if_model(), extension_name_to_prefix=ext_map)
    with pytest.warns(HalConversionWarning, match="referenced subgraphs") as caught:
        converted = convert_to(cf_ext, V.V1_2, lenient=True)
    assert converted.extension_name_to_prefix == ext_map
    assert "extension map" not in str(caught[0].message)


def test_version_queries_on_an_invalid_model_raise_its_validation_error():
    bad = dataclasses.replace(two_adds(), main=dataclasses.replace(two_adds().main, operations=()))
    for call in (
        lambda: min_version(bad),
        lambda: compliant_with(bad, V.V1_3),
        lambda: convert_to(bad, V.V1_3),
    ):
        with pytest.raises(HalError) as e:
            call()
        assert e.value.status == ErrorStatus.INVALID_ARGUMENT


def test_unknown_object_type_is_a_type_error():
    with pytest.raises(TypeError):
        min_version(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        convert_to(object(), V.V1_0)  # type: ignore[type-var]


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def test_request_versions():
    m, r = simple_request()
    assert min_version(r) == V.V1_0 and min_version(r, model=m) == V.V1_0
    # A buffer-token pool: 1.3.
    tok = dataclasses.replace(r, pools=(*r.pools, BufferToken(5)))
    assert min_version(tok) == V.V1_3
    # A hardware_buffer pool, BLOB or not: 1.2.
    blob_memory = allocate_shared_memory(16, "hardware_buffer_blob")
    blob = dataclasses.replace(r, pools=(r.pools[0], blob_memory))
    assert min_version(blob) == V.V1_2 and min_version(blob, model=m) == V.V1_2
    image = dataclasses.replace(blob_memory, name="hardware_buffer")
    assert min_version(dataclasses.replace(r, pools=(r.pools[0], image))) == V.V1_2
    # Unspecified output dims are a 1.2 feature, visible only with the model.
    mu = unspecified_output_model()
    ru = build_request(mu, [np.ones((2, 2), np.float32)], output_sizes=[16]).request
    assert min_version(ru) == V.V1_0
    assert min_version(ru, model=mu) == V.V1_2
    assert compliant_with(ru, V.V1_1, model=mu) is False
    assert compliant_with(ru, V.V1_2, model=mu) is True


def test_request_conversion():
    m, r = simple_request()
    assert convert_to(r, V.V1_0) is r
    tok = dataclasses.replace(r, pools=(*r.pools, BufferToken(5)))
    with pytest.raises(HalError, match=r"pool 2 is a buffer-token pool \(HAL 1\.3\)"):
        convert_to(tok, V.V1_2)
    with pytest.warns(HalConversionWarning):
        assert convert_to(tok, V.V1_2, lenient=True) is tok
    mu = unspecified_output_model()
    ru = build_request(mu, [np.ones((2, 2), np.float32)], output_sizes=[16]).request
    with pytest.raises(HalError, match="unspecified dimensions"):
        convert_to(ru, V.V1_1, model=mu)


def test_request_version_with_a_model_validates_the_request():
    m, r = simple_request()
    bad = dataclasses.replace(
        r, inputs=(dataclasses.replace(r.inputs[0], location=DataLocation(9, 0, 0)),)
    )
    with pytest.raises(HalError, match="poolIndex 9"):
        min_version(bad, model=m)


# ---------------------------------------------------------------------------------------
# Capabilities
# ---------------------------------------------------------------------------------------

ONE = PerformanceInfo(1.0, 1.0)
FAST = PerformanceInfo(0.5, 0.5)
SLOW = PerformanceInfo(2.0, 3.0)
ALL_TYPES = [t for t in T]


def caps(default=ONE, relaxed_scalar=None, relaxed_tensor=None, **per_type) -> Capabilities:
    """Uniform performance ``default`` for every operand type, with overrides by name."""
    entries = tuple(OperandPerformance(t, per_type.get(t.name, default)) for t in sorted(ALL_TYPES))
    return Capabilities(
        relaxed_float32_to_float16_performance_scalar=relaxed_scalar or default,
        relaxed_float32_to_float16_performance_tensor=relaxed_tensor or default,
        operand_performance=entries,
        if_performance=default,
        while_performance=default,
    )


CAPS_CASES = [
    ("uniform", caps(), V.V1_0),
    (
        "quant8 and its P companions differ from float",
        caps(
            TENSOR_QUANT8_ASYMM=FAST,
            INT32=FAST,
            UINT32=FAST,
            TENSOR_INT32=FAST,
            OEM=FAST,
            TENSOR_OEM_BYTE=FAST,
        ),
        V.V1_0,
    ),
    (
        "1.2+ types differ (no loss: 1.0 drivers cannot run them)",
        caps(TENSOR_FLOAT16=FAST, TENSOR_QUANT8_ASYMM_SIGNED=SLOW),
        V.V1_0,
    ),
    ("relaxed figure differs from float32", caps(relaxed_scalar=FAST, relaxed_tensor=FAST), V.V1_1),
    ("relaxed scalar and tensor differ", caps(relaxed_scalar=FAST, relaxed_tensor=SLOW), V.V1_2),
    ("FLOAT32 and TENSOR_FLOAT32 differ", caps(FLOAT32=FAST), V.V1_2),
    ("an INT32 figure apart from quant8", caps(INT32=FAST), V.V1_2),
    (
        "no OEM figures",
        dataclasses.replace(
            caps(),
            operand_performance=tuple(
                p for p in caps().operand_performance if p.type not in (T.OEM, T.TENSOR_OEM_BYTE)
            ),
        ),
        V.V1_2,
    ),
]


@pytest.mark.parametrize("name, c, lowest", CAPS_CASES, ids=[c[0] for c in CAPS_CASES])
def test_capabilities_min_version(name, c, lowest):
    assert min_version(c) == lowest
    for v in V:
        assert compliant_with(c, v) == (v >= lowest)
        if v >= lowest:
            convert_to(c, v)
        else:
            with pytest.raises(HalError) as e:
                convert_to(c, v)
            assert e.value.status == ErrorStatus.INVALID_ARGUMENT
            assert f"HAL {v.label}" in e.value.message


def test_capabilities_as_hal_1_0_carries_them():
    c = caps(
        TENSOR_QUANT8_ASYMM=FAST,
        INT32=FAST,
        UINT32=FAST,
        TENSOR_INT32=FAST,
        OEM=FAST,
        TENSOR_OEM_BYTE=FAST,
        TENSOR_FLOAT16=SLOW,
    )
    got = convert_to(c, V.V1_0)
    types = [p.type for p in got.operand_performance]
    assert types == sorted(
        [T.FLOAT32, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, *QUANT8_PERFORMANCE_TYPES]
    )
    assert lookup_performance(got, T.TENSOR_FLOAT32) == ONE
    assert lookup_performance(got, T.TENSOR_QUANT8_ASYMM) == FAST
    assert lookup_performance(got, T.TENSOR_FLOAT16) == NO_PERFORMANCE  # 1.0 has no float16
    assert got.relaxed_float32_to_float16_performance_tensor == ONE
    assert got.if_performance == got.while_performance == NO_PERFORMANCE
    # HAL 1.2 keeps every 1.2 type, drops the 1.3 ones and IF/WHILE.
    got12 = convert_to(c, V.V1_2)
    assert lookup_performance(got12, T.TENSOR_FLOAT16) == SLOW
    assert lookup_performance(got12, T.TENSOR_QUANT8_ASYMM_SIGNED) == NO_PERFORMANCE
    assert lookup_performance(got12, T.SUBGRAPH) == NO_PERFORMANCE
    assert got12.if_performance == NO_PERFORMANCE
    assert convert_to(c, V.V1_3) is c


def test_lenient_capabilities_conversion_warns():
    c = caps(relaxed_scalar=FAST, relaxed_tensor=SLOW)
    with pytest.warns(HalConversionWarning, match="relaxed scalar .* and tensor .* differ"):
        got = convert_to(c, V.V1_1, lenient=True)
    assert got.relaxed_float32_to_float16_performance_scalar == SLOW
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convert_to(caps(), V.V1_0, lenient=True)  # nothing lost: no warning


_perf = st.sampled_from([ONE, FAST, SLOW])


@st.composite
def random_caps(draw) -> Capabilities:
    per_type = {t.name: draw(_perf) for t in draw(st.sets(st.sampled_from(ALL_TYPES), max_size=6))}
    return caps(draw(_perf), draw(_perf), draw(_perf), **per_type)


_VERSION_TYPES = {
    V.V1_0: [t for t in T if t <= T.TENSOR_QUANT8_ASYMM or t >= T.OEM],
    V.V1_1: [t for t in T if t <= T.TENSOR_QUANT8_ASYMM or t >= T.OEM],
    V.V1_2: [t for t in T if t <= T.TENSOR_QUANT8_SYMM or t >= T.OEM],
}


@given(random_caps(), st.sampled_from([V.V1_0, V.V1_1, V.V1_2]))
def test_capabilities_compliance_means_the_conversion_keeps_every_figure_it_can(c, v):
    """Compliant with v exactly when converting to v keeps the figure of every operand
    type v has, and the relaxed figures (1.0 has none of its own: float32's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HalConversionWarning)
        converted = convert_to(c, v, lenient=True)
    kept = all(
        lookup_performance(converted, t) == lookup_performance(c, t) for t in _VERSION_TYPES[v]
    ) and (
        converted.relaxed_float32_to_float16_performance_scalar
        == c.relaxed_float32_to_float16_performance_scalar
        and converted.relaxed_float32_to_float16_performance_tensor
        == c.relaxed_float32_to_float16_performance_tensor
    )
    assert compliant_with(c, v) == kept


# ---------------------------------------------------------------------------------------
# Type-query helpers (Utils.h: isExtensionOperandType, nonExtensionOperandSizeOfData, ...)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, extension",
    [
        (0, False),
        (15, False),
        (10000, False),
        (10001, False),
        (65535, False),
        (1 << 16, True),
        ((7 << 16) | 3, True),
        (0xFFFFFFFF, True),
    ],
)
def test_is_extension_type(code, extension):
    assert is_extension_type(code) is extension


def test_extension_type_encoding_round_trips():
    for prefix, within in ((1, 0), (7, 3), (0xFFFF, 0xFFFF)):
        code = make_extension_type(prefix, within)
        assert is_extension_type(code)
        assert (extension_prefix(code), extension_type_within(code)) == (prefix, within)
        assert code < 2**32


SCALARS = {T.FLOAT32, T.INT32, T.UINT32, T.BOOL, T.FLOAT16, T.SUBGRAPH, T.OEM}


@pytest.mark.parametrize("t", list(T), ids=lambda t: t.name)
def test_is_scalar_type(t):
    assert is_scalar_type(t) == (t in SCALARS)


@pytest.mark.parametrize(
    "enum, codes",
    [
        (
            ErrorStatus,
            {
                "NONE": 0,
                "DEVICE_UNAVAILABLE": 1,
                "GENERAL_FAILURE": 2,
                "OUTPUT_INSUFFICIENT_SIZE": 3,
                "INVALID_ARGUMENT": 4,
                "MISSED_DEADLINE_TRANSIENT": 5,
                "MISSED_DEADLINE_PERSISTENT": 6,
                "RESOURCE_EXHAUSTED_TRANSIENT": 7,
                "RESOURCE_EXHAUSTED_PERSISTENT": 8,
            },
        ),
        (Priority, {"LOW": 0, "MEDIUM": 1, "HIGH": 2}),
        (ExecutionPreference, {"LOW_POWER": 0, "FAST_SINGLE_ANSWER": 1, "SUSTAINED_SPEED": 2}),
        (MeasureTiming, {"NO": 0, "YES": 1}),
        (DeviceType, {"OTHER": 1, "CPU": 2, "GPU": 3, "ACCELERATOR": 4}),
    ],
    ids=["ErrorStatus", "Priority", "ExecutionPreference", "MeasureTiming", "DeviceType"],
)
def test_hal_enums_have_the_hal_codes(enum, codes):
    # The codes cross to drivers and into reports as numbers: they are Android's (types.hal).
    assert {member.name: int(member) for member in enum} == codes


@pytest.mark.parametrize("t", [*T, 16, 9999, make_extension_type(1, 3)], ids=str)
def test_is_tensor_type(t):
    # Only standard and OEM types are known here: an unknown or extension code is neither.
    assert is_tensor_type(t) == (t in list(T) and t not in SCALARS)


@pytest.mark.parametrize(
    "t, dims, size",
    [
        (T.FLOAT32, (), 4),
        (T.INT32, (), 4),
        (T.BOOL, (), 1),
        (T.FLOAT16, (), 2),
        (T.SUBGRAPH, (), 0),
        (T.OEM, (), 0),
        (T.TENSOR_FLOAT32, (2, 3), 24),
        (T.TENSOR_FLOAT16, (5,), 10),
        (T.TENSOR_QUANT8_ASYMM, (2, 2, 2), 8),
        (T.TENSOR_QUANT16_SYMM, (3,), 6),
        (T.TENSOR_QUANT16_ASYMM, (1, 4), 8),
        (T.TENSOR_BOOL8, (7,), 7),
        (T.TENSOR_INT32, (4, 1), 16),
        (T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (2, 3), 6),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, (9,), 9),
        (T.TENSOR_OEM_BYTE, (11,), 11),
        (T.TENSOR_FLOAT32, (), 0),  # unknown rank: size unknown
        (T.TENSOR_FLOAT32, (2, 0), 0),  # unknown dimension
        (T.TENSOR_FLOAT32, (2**20, 2**20, 4), 2**44),  # Python ints: no overflow
    ],
)
def test_non_extension_size_of_data(t, dims, size):
    assert non_extension_size_of_data(t, dims) == size


@pytest.mark.parametrize(
    "t, dims, unspecified",
    [
        (T.TENSOR_FLOAT32, (), True),
        (T.TENSOR_FLOAT32, (2, 0), True),
        (T.TENSOR_FLOAT32, (2, 3), False),
        (T.TENSOR_INT32, (0,), True),
        (T.INT32, (), False),
        (T.FLOAT32, (), False),
        (T.OEM, (), False),
    ],
)
def test_tensor_has_unspecified_dimensions(t, dims, unspecified):
    assert tensor_has_unspecified_dimensions(t, dims) is unspecified
