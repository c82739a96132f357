"""Android VTS's validation mutations, applied to every example model.

``hardware/interfaces/neuralnetworks/1.3/vts/functional/ValidateModel.cpp`` and
``ValidateRequest.cpp`` take each test model, break it in one way at a time and require
INVALID_ARGUMENT from ``getSupportedOperations`` and ``prepareModel`` (and from every
execution path for requests). Here every family runs over every valid example in
``tests/operations`` (one operation each) and over two-operation models spliced from
them (so execution order, writers and consumers between operations are exercised too).
The checks are: each mutation makes validation raise :class:`HalError` with
INVALID_ARGUMENT, not deferrable (VTS requires the rejection of every driver, so Android's
own validation makes it: a deferrable one would misclassify the rule), and nothing else
ever escapes.

The families and their skips live in :mod:`randomgraph.mutations` (the pytest plugin's
conformance suite applies them to generated models on any driver). The skips are VTS's
own, each for a mutation that leaves the model valid for that operation (see the
``*_skip`` functions); nothing is skipped because our validation
would let it through. Two deliberate differences from VTS, both making a mutation test
what its name says:

* VTS's ``removeOperand`` does not renumber the indexes above the removed operand (its
  ``v > value ? v-- : v`` returns the old value), so the mutated model is invalid for an
  unrelated reason: an index out of range. We renumber, and skip what that makes
  legitimately valid: removing an operand whose every use is an input position
  ``removeOperationInputSkip`` names (a trailing optional parameter).
* VTS's ``addOperationOutputTest`` gives the new output ``numberOfConsumers = 1``
  although nothing reads it, which fails the consumer count rather than the operation's
  output count. We give it 0.

A Hypothesis test adds random field-level corruption of the same models and requests:
whatever the values, validation returns or raises INVALID_ARGUMENT, nothing else.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driver.builder import build_request
from driver.hal.types import (
    QUANT_RANGE,
    BufferToken,
    DataLocation,
    ErrorStatus,
    ExtensionNameAndPrefix,
    HalError,
    HalVersion,
    Memory,
    Model,
    Operand,
    OperandLifeTime,
    Operation,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
)
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import BytesHandle
from driver.validation import (
    operation_versions,
    validate_execution_preference,
    validate_model,
    validate_priority,
    validate_request,
)
from randomgraph.mutations import (
    FAMILIES,
    INVALID_OPERAND_TYPES,
    INVALID_OPERATION_TYPES,
    add_operation_input_skip,
    count_consumers,
    invalid_zero_points,
    model_mutations,
    mutate_execution_order,
    mutate_operand_type,
    mutate_remove_writer,
    remove_operand_skip,
    remove_operation_input_skip,
    request_mutations,
    with_main,
    with_operand,
    with_operation,
)
from tests.operations.examples import all_examples

V = HalVersion
L = OperandLifeTime


# ---------------------------------------------------------------------------------------
# The models: every example, plus two-operation splices of examples
# ---------------------------------------------------------------------------------------


@functools.cache
def example_models() -> tuple[tuple[str, Model, tuple], ...]:
    """(name, model, feeds) of every example, deterministic order."""
    out = []
    for ex in all_examples():
        model, feeds = ex.model()
        out.append((ex.name, model, tuple(feeds)))
    return tuple(out)


def _signature(o: Operand) -> tuple:
    return (o.type, o.dimensions, o.scale, o.zero_point, o.extra_params)


def splice(a: Model, b: Model, b_input: int) -> Model:
    """``a`` then ``b``, with ``b``'s main input ``b_input`` replaced by ``a``'s first
    output (same type, dims and quantization), which becomes a temporary."""
    ma, mb = a.main, b.main
    shift = len(ma.operands)
    values = a.operand_values + b"\0" * (-len(a.operand_values) % 8)
    value_shift, pool_shift = len(values), len(a.pools)
    link = ma.output_indexes[0]
    replaced = mb.input_indexes[b_input]

    def moved(o: Operand) -> Operand:
        loc = o.location
        if o.lifetime == L.CONSTANT_COPY:
            loc = DataLocation(0, loc.offset + value_shift, loc.length)
        elif o.lifetime == L.CONSTANT_REFERENCE:
            loc = DataLocation(loc.pool_index + pool_shift, loc.offset, loc.length)
        return o if loc is o.location else dataclasses.replace(o, location=loc)

    def remap(i: int) -> int:  # b's operand index in the spliced model
        if i == replaced:
            return link
        return i + shift - (i > replaced)

    operations_b = tuple(
        Operation(op.type, tuple(map(remap, op.inputs)), tuple(map(remap, op.outputs)))
        for op in mb.operations
    )
    uses = sum(op.inputs.count(link) for op in operations_b)
    operands = list(ma.operands) + [moved(o) for j, o in enumerate(mb.operands) if j != replaced]
    operands[link] = dataclasses.replace(
        operands[link], lifetime=L.TEMPORARY_VARIABLE, number_of_consumers=uses
    )
    main = Subgraph(
        tuple(operands),
        ma.operations + operations_b,
        ma.input_indexes + tuple(remap(i) for i in mb.input_indexes if i != replaced),
        ma.output_indexes[1:] + tuple(map(remap, mb.output_indexes)),
    )
    return Model(
        main,
        operand_values=values + b.operand_values,
        pools=a.pools + b.pools,
        relax_computation_float32_to_float16=a.relaxed or b.relaxed,
    )


@functools.cache
def spliced_models(limit: int = 48) -> tuple[tuple[str, Model], ...]:
    """Two-operation models: each example's first output feeding the first later example
    that has a matching model input (one splice per producing operation type)."""
    plain = [(n, m) for n, m, _ in example_models() if not m.referenced]
    found: list[tuple[str, Model]] = []
    producers_seen: set[int] = set()
    for name_a, a in plain:
        op_a = a.main.operations[0].type
        if op_a in producers_seen or not a.main.output_indexes:
            continue
        want = _signature(a.main.operands[a.main.output_indexes[0]])
        for name_b, b in plain:
            match = [
                k
                for k, i in enumerate(b.main.input_indexes)
                if _signature(b.main.operands[i]) == want
            ]
            if not match:
                continue
            model = splice(a, b, match[0])
            try:
                validate_model(model)
            except HalError:
                continue  # e.g. a relaxed example spliced with a float16-only one
            found.append((f"{name_a}+{name_b}", model))
            producers_seen.add(op_a)
            break
        if len(found) >= limit:
            break
    return tuple(found)


def all_models() -> list[tuple[str, Model]]:
    return [(n, m) for n, m, _ in example_models()] + list(spliced_models())


# ---------------------------------------------------------------------------------------
# The VTS mutation families live in randomgraph/mutations.py (the pytest plugin's
# conformance suite applies them to generated models on any driver)
# ---------------------------------------------------------------------------------------


def prepare_status(model: Model, preference: int, priority: int, version: HalVersion) -> str | None:
    """What ``prepareModel`` validation says: None if it accepts; otherwise the problem
    if the rejection is anything but a strict INVALID_ARGUMENT (a string for the report).
    VTS requires these rejections of every driver, so Android's validation makes them:
    one marked deferrable (left to execution, see ``HalError``) would be misclassified."""
    try:
        validate_execution_preference(preference)
        validate_priority(priority)
        validate_model(model, version)
    except HalError as e:
        if e.status != ErrorStatus.INVALID_ARGUMENT:
            return f"{e.status.name}: {e.message}"
        if e.deferrable:
            return f"deferrable: {e.message}"
        return "rejected"
    except Exception as e:  # the bug this test exists to catch
        return f"raised {type(e).__name__}: {e}"
    return None


def check_model(name: str, model: Model) -> tuple[list[str], int]:
    """Run every family; returns (failures, number of mutations checked)."""
    failures: list[str] = []
    lowest = validate_model(model, V.V1_3)  # the base model must be valid
    checked = 0
    versions = sorted({lowest, V.V1_3})
    for family, mutate in FAMILIES.items():
        for what, mutated, preference, priority in mutate(model):
            checked += 1
            for version in versions:
                if preference == 1 and priority == 1 and version != V.V1_3:
                    continue  # model mutations: rejected at 1.3 implies at every version
                outcome = prepare_status(mutated, preference, priority, version)
                if outcome != "rejected":
                    failures.append(
                        f"{name}: {family}: {what} (HAL {version.label}): "
                        + (outcome or "accepted")
                    )
    return failures, checked


MODEL_CASES = all_models()


@pytest.mark.parametrize("name, model", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_every_vts_mutation_is_invalid_argument(name, model):
    failures, checked = check_model(name, model)
    assert checked > 0
    assert not failures, f"{len(failures)} of {checked} mutations:\n" + "\n".join(failures[:25])


def test_spliced_models_cover_multi_operation_families():
    models = spliced_models()
    assert len(models) >= 5
    counts = {f: 0 for f in ("execution order", "add a writer", "remove a writer")}
    for _, m in models:
        assert len(m.main.operations) == 2
        for family in counts:
            counts[family] += sum(1 for _ in FAMILIES[family](m))
    assert all(counts.values()), counts


def test_mutation_machinery_on_a_hand_built_chain():
    """The families really mutate: on a known model each yields what VTS yields."""
    name, model = spliced_models()[0]
    assert sum(1 for _ in mutate_execution_order(model)) == 2
    assert sum(1 for _ in mutate_remove_writer(model)) == 1
    n_operands = len(model.main.operands)
    assert sum(1 for _ in mutate_operand_type(model)) == n_operands * len(INVALID_OPERAND_TYPES)
    # One consumer fewer and one more (an operand nothing reads: one consumer).
    operands = model.main.operands
    changed = sorted(
        (k, mutated.main.operands[k].number_of_consumers)
        for _, mutated, *_ in FAMILIES["number of consumers"](model)
        for k, o in enumerate(operands)
        if mutated.main.operands[k] != o
    )
    expected = []
    for k, o in enumerate(operands):
        n = o.number_of_consumers
        expected += [(k, 1)] if n == 0 else [(k, n - 1), (k, n + 1)]
    assert changed == sorted(expected)
    # prepareModel_1_1 takes a preference, prepareModel_1_3 a priority: older drivers get
    # neither mutation.
    families = {v: {f for f, *_ in model_mutations(model, v)} for v in V}
    assert "priority" in families[V.V1_3] and "priority" not in families[V.V1_2]
    assert "execution preference" in families[V.V1_1]
    assert "execution preference" not in families[V.V1_0]


# ---------------------------------------------------------------------------------------
# Requests: removing an input or an output, on every execution path
# ---------------------------------------------------------------------------------------

REQUEST_PATHS = [
    # (path, HAL version of the device, outputs may be unspecified)
    ("execute 1.0", V.V1_0, False),
    ("execute 1.2", V.V1_2, True),
    ("executeSynchronously/burst 1.3", V.V1_3, True),
    ("executeFenced 1.3", V.V1_3, False),
]


@functools.cache
def request_cases() -> tuple[tuple[str, Model, Request, HalVersion], ...]:
    out = []
    for name, model, feeds in example_models():
        request = build_request(model, list(feeds)).request
        lowest = validate_request(model, request, V.V1_3)
        out.append((name, model, request, max(lowest, validate_model(model))))
    return tuple(out)


def test_request_mutations_removing_an_input_or_output_are_invalid_argument():
    failures = []
    checked = 0
    for name, model, request, lowest in request_cases():
        for path, version, allow in REQUEST_PATHS:
            if version < lowest:
                continue
            mutations = [
                (
                    f"input {k} removed",
                    dataclasses.replace(
                        request, inputs=request.inputs[:k] + request.inputs[k + 1 :]
                    ),
                )
                for k in range(len(request.inputs))
            ] + [
                (
                    f"output {k} removed",
                    dataclasses.replace(
                        request, outputs=request.outputs[:k] + request.outputs[k + 1 :]
                    ),
                )
                for k in range(len(request.outputs))
            ]
            for what, bad in mutations:
                checked += 1
                try:
                    validate_request(model, bad, version, allow_unspecified_output=allow)
                    failures.append(f"{name}: {path}: {what}: accepted")
                except HalError as e:
                    if e.status != ErrorStatus.INVALID_ARGUMENT:
                        failures.append(f"{name}: {path}: {what}: {e}")
                except Exception as e:
                    failures.append(f"{name}: {path}: {what}: raised {type(e).__name__}: {e}")
    assert checked > len(request_cases())
    assert not failures, "\n".join(failures[:25])


# ---------------------------------------------------------------------------------------
# Random field-level corruption (Hypothesis)
# ---------------------------------------------------------------------------------------

_ints = st.one_of(
    st.integers(-3, 20),
    st.sampled_from([-(2**31), 2**31 - 1, 2**32 - 1, 2**32, 2**63, 10000, 10001, 65535]),
    st.integers(-(2**70), 2**70),
)
_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, -0.0])
)
_dims = st.lists(_ints, max_size=6).map(tuple)
_extra = st.one_of(
    st.none(),
    st.binary(max_size=8),
    st.builds(SymmPerChannelQuantParams, _ints, st.lists(_floats, max_size=4).map(tuple)),
)
_type_codes = st.one_of(st.sampled_from([*map(int, T), (7 << 16) | 1]), _ints)
_lifetimes = st.one_of(st.sampled_from(list(L)), _ints)


@st.composite
def corrupted_model(draw) -> tuple[Model, HalVersion]:
    cases = MODEL_CASES
    _, model = cases[draw(st.integers(0, len(cases) - 1))]
    for _ in range(draw(st.integers(1, 3))):
        model = draw(_corruption(model))
    return model, draw(st.sampled_from(list(V)))


def _corruption(model: Model):
    sg = model.main
    n_operands, n_operations = len(sg.operands), len(sg.operations)
    options = []
    if n_operands:
        k = st.integers(0, n_operands - 1)
        field_values = {
            "type": _type_codes,
            "dimensions": _dims,
            "number_of_consumers": _ints,
            "scale": _floats,
            "zero_point": _ints,
            "lifetime": _lifetimes,
            "extra_params": _extra,
            "location": st.builds(DataLocation, _ints, _ints, _ints),
        }
        options += [
            st.tuples(k, st.just(f), v).map(lambda a: with_operand(model, a[0], **{a[1]: a[2]}))
            for f, v in field_values.items()
        ]
    if n_operations:
        k = st.integers(0, n_operations - 1)
        options += [
            st.tuples(k, _type_codes).map(lambda a: with_operation(model, a[0], type=a[1])),
            st.tuples(k, _dims).map(lambda a: with_operation(model, a[0], inputs=a[1])),
            st.tuples(k, _dims).map(lambda a: with_operation(model, a[0], outputs=a[1])),
        ]
    options += [
        _dims.map(lambda d: with_main(model, input_indexes=d)),
        _dims.map(lambda d: with_main(model, output_indexes=d)),
        st.binary(max_size=64).map(lambda b: dataclasses.replace(model, operand_values=b)),
        st.booleans().map(
            lambda r: dataclasses.replace(model, relax_computation_float32_to_float16=r)
        ),
        st.lists(st.builds(ExtensionNameAndPrefix, st.text(max_size=4), _ints), max_size=3).map(
            lambda e: dataclasses.replace(model, extension_name_to_prefix=tuple(e))
        ),
        st.lists(
            st.builds(
                Memory,
                st.sampled_from(
                    ["ashmem", "mmap_fd", "hardware_buffer_blob", "hardware_buffer", "x"]
                ),
                _ints,
                st.one_of(st.none(), st.builds(BytesHandle, st.integers(0, 64))),
            ),
            max_size=2,
        ).map(lambda p: dataclasses.replace(model, pools=tuple(p))),
        st.sampled_from([(), (sg,), (Subgraph(),), (sg, sg)]).map(
            lambda r: dataclasses.replace(model, referenced=r)
        ),
    ]
    return st.one_of(options)


def _only_invalid_argument(call) -> None:
    try:
        call()
    except HalError as e:
        assert e.status == ErrorStatus.INVALID_ARGUMENT, f"{e.status.name}: {e.message}"


_RANDOM = settings(
    max_examples=max(200, settings.default.max_examples),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    deadline=None,
)


@_RANDOM
@given(corrupted_model())
def test_random_corruption_of_valid_models_only_gives_invalid_argument(case):
    model, version = case
    _only_invalid_argument(lambda: validate_model(model, version))
    _only_invalid_argument(lambda: operation_versions(model))


@st.composite
def corrupted_request(draw):
    cases = request_cases()
    _, model, request, _ = cases[draw(st.integers(0, len(cases) - 1))]
    arg = st.builds(
        RequestArgument,
        st.booleans(),
        st.builds(DataLocation, _ints, _ints, _ints),
        _dims,
    )
    which = draw(st.sampled_from(["inputs", "outputs", "pools", "arg"]))
    if which == "pools":
        pool = st.one_of(
            st.builds(
                Memory,
                st.sampled_from(["ashmem", "mmap_fd", "hardware_buffer", "y"]),
                _ints,
                st.one_of(st.none(), st.builds(BytesHandle, st.integers(0, 64))),
            ),
            st.builds(BufferToken, _ints),
        )
        request = dataclasses.replace(request, pools=tuple(draw(st.lists(pool, max_size=3))))
    elif which in ("inputs", "outputs"):
        request = dataclasses.replace(request, **{which: tuple(draw(st.lists(arg, max_size=4)))})
    else:
        args = list(request.inputs)
        if args:
            args[draw(st.integers(0, len(args) - 1))] = draw(arg)
            request = dataclasses.replace(request, inputs=tuple(args))
    return model, request, draw(st.sampled_from(list(V))), draw(st.booleans())


@_RANDOM
@given(corrupted_request())
def test_random_corruption_of_valid_requests_only_gives_invalid_argument(case):
    model, request, version, allow = case
    _only_invalid_argument(
        lambda: validate_request(model, request, version, allow_unspecified_output=allow)
    )


def test_corruption_strategies_reach_deep_rules():
    """The random corruptions are not all caught by the first check: a NaN scale on a
    float operand, a wrong consumer count and an out-of-range pool all get through to
    their own rules (guards against a strategy that only ever trips one early check)."""
    _, model = next((n, m) for n, m in MODEL_CASES if m.main.operands[0].type == T.TENSOR_FLOAT32)
    for bad, rule in (
        (with_operand(model, 0, scale=math.nan), "must have scale 0"),
        (with_operand(model, 0, number_of_consumers=99), "numberOfConsumers is 99"),
        (
            with_operand(model, 0, lifetime=L.CONSTANT_REFERENCE, location=DataLocation(5, 0, 4)),
            "poolIndex 5",
        ),
    ):
        with pytest.raises(HalError, match=rule):
            validate_model(bad)


# ---------------------------------------------------------------------------------------
# The families break exactly what they name, with VTS's skips and values
# ---------------------------------------------------------------------------------------

DELIBERATELY_OUT_OF_RANGE = {"operation input index", "operation output index"}


def test_each_mutation_breaks_only_what_its_family_names():
    """Indexes stay in range (we renumber after removing an operand, unlike VTS), every
    consumer count stays right (an added output has none, unlike VTS), and the model's
    input and output lists hold exactly its operands of those lifetimes (an added input is
    listed, a lifetime mutation updates the lists), but in the families that break those
    on purpose: a model is then invalid for the mutation itself."""
    checked = set()
    for name, model in spliced_models():
        for family, mutate in FAMILIES.items():
            if family in DELIBERATELY_OUT_OF_RANGE or family == "number of consumers":
                continue
            for what, mutated, *_ in mutate(model):
                main = mutated.main
                indexes = [i for op in main.operations for i in (*op.inputs, *op.outputs)]
                indexes += [*main.input_indexes, *main.output_indexes]
                assert all(0 <= i < len(main.operands) for i in indexes), (name, what)
                declared = [o.number_of_consumers for o in main.operands]
                assert declared == count_consumers(main), (name, what)
                if family != "operand input/output role":  # VTS leaves the lists as they are
                    for lifetime, listed in (
                        (L.SUBGRAPH_INPUT, main.input_indexes),
                        (L.SUBGRAPH_OUTPUT, main.output_indexes),
                    ):
                        with_lifetime = [
                            k for k, o in enumerate(main.operands) if o.lifetime == lifetime
                        ]
                        assert sorted(listed) == with_lifetime, (name, what, lifetime.name)
                checked.add(family)
    assert {"remove an operand", "add an operation output", "add a writer"} <= checked


RULES = {
    # family: the rule validation names for each of its mutations of a RELU chain
    "execution order": r"is read before it is written",
    "operand type": r"invalid operand type",
    "operand scale": r"TENSOR_FLOAT32 must have scale 0",
    "operand zero point": r"TENSOR_FLOAT32 zeroPoint must be 0",
    "operand lifetime": r"is read before it is written|has lifetime \w+; output",
    "operand input/output role": r"list entry 0: operand \d has lifetime|is not in the output list",
    "number of consumers": r"numberOfConsumers is \d but \d operation inputs read it",
    "add a writer": r"has already been written",
    "operation operand type": r"no signature of RELU|operand type \w+ cannot have lifetime",
    "operation type": r"invalid operation type",
    "operation input index": r"input 0 is operand 3, out of range",
    "operation output index": r"output 0 is operand 3, out of range",
    "remove a writer": r"is read before it is written",
    "remove an operand": r"no signature of RELU",
    "remove an operation": r"is never written|is read before it is written",
    "remove an operation input": r"no signature of RELU takes inputs \(\)",
    "remove an operation output": r"is never written|is read before it is written",
    "add an operation input": r"no signature of RELU takes inputs \(TENSOR_FLOAT32, INT32\)",
    "add an operation output": r"no signature of RELU takes .* outputs \(TENSOR_FLOAT32, INT32\)",
    "execution preference": r"invalid execution preference",
    "priority": r"invalid priority",
}


def test_each_mutation_is_rejected_by_the_rule_its_family_breaks():
    """On two RELUs in a chain, every mutation is reported by its own rule, not by one it
    broke on the way (a model input left off the input list, a consumer count)."""
    model = next(m for name, m in spliced_models() if name == "relu_float32+relu_float32")
    assert set(RULES) == set(FAMILIES) - {"operand rank"}  # the chain has no scalar, no constant
    for family in RULES:
        mutations = list(FAMILIES[family](model))
        assert mutations, family
        for _, mutated, preference, priority in mutations:
            with pytest.raises(HalError, match=RULES[family]):
                validate_execution_preference(preference)
                validate_priority(priority)
                validate_model(mutated)


SKIPS = [
    # (operation, number of inputs, input position, VTS removeOperationInputSkip)
    (O.CONCATENATION, 2, 0, False),  # the only tensor
    (O.CONCATENATION, 2, 1, False),  # the axis
    (O.CONCATENATION, 3, 0, True),  # one of several tensors
    (O.CONCATENATION, 3, 2, False),
    (O.CONV_2D, 11, 10, True),  # the trailing layout
    (O.CONV_2D, 10, 9, False),
    (O.RESIZE_BILINEAR, 4, 3, True),
    (O.RESIZE_NEAREST_NEIGHBOR, 4, 3, False),
    (O.RESIZE_NEAREST_NEIGHBOR, 5, 3, True),
    (O.SOFTMAX, 3, 2, True),
    (O.SOFTMAX, 3, 1, False),
]


@pytest.mark.parametrize(("op", "n", "j", "skipped"), SKIPS)
def test_removing_an_input_skips_what_vts_skips(op, n, j, skipped):
    operation = Operation(op, tuple(range(n)), (n,))
    assert remove_operation_input_skip(operation, j) is skipped


def test_removing_an_operand_skips_only_what_renumbering_makes_valid():
    # CONCATENATION's leading tensors are variadic (VTS skips removing them); its axis and
    # its output are not, and an operand nothing uses is left alone.
    concat = Operation(O.CONCATENATION, (0, 1, 2), (3,))
    model = Model(Subgraph((), (concat,), (0, 1, 2), (3,)))
    assert [remove_operand_skip(k, model) for k in range(5)] == [True, True, False, False, True]


@pytest.mark.parametrize(
    ("op", "n", "skipped"),
    [
        (O.RESIZE_BILINEAR, 3, True),
        (O.RESIZE_BILINEAR, 5, True),
        (O.RESIZE_BILINEAR, 6, False),  # all six inputs: a seventh is invalid
        (O.RESIZE_NEAREST_NEIGHBOR, 6, False),
        (O.SOFTMAX, 2, True),  # an optional axis
        (O.SOFTMAX, 3, False),
        (O.ADD, 3, False),
    ],
)
def test_adding_an_input_skips_what_vts_skips(op, n, skipped):
    assert add_operation_input_skip(Operation(op, tuple(range(n)), (n,))) is skipped


def test_invalid_codes_sit_just_past_each_valid_range():
    fundamental = [t for t in T if t < T.OEM]
    assert INVALID_OPERAND_TYPES[:4] == (
        min(fundamental) - 1,
        max(fundamental) + 1,
        T.OEM - 1,
        T.TENSOR_OEM_BYTE + 1,
    )
    standard = [o for o in O if o != O.OEM_OPERATION]
    assert (
        max(standard) + 1,
        O.OEM_OPERATION - 1,
        O.OEM_OPERATION + 1,
    ) == INVALID_OPERATION_TYPES
    # VTS's invalid zero points: just outside an asymmetric type's range; for a symmetric
    # one, anything but 0 (and its range's ends).
    for t in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT16_ASYMM):
        lo, hi = QUANT_RANGE[t]
        assert invalid_zero_points(t) == (lo - 1, hi + 1), t
    assert invalid_zero_points(T.TENSOR_QUANT8_SYMM) == (-128, -1, 1, 128)
    assert invalid_zero_points(T.TENSOR_QUANT16_SYMM) == (-32769, -1, 1, 32768)
    assert invalid_zero_points(T.TENSOR_FLOAT32) == (1,)
    assert invalid_zero_points(T.OEM) == ()


def test_every_request_mutation_is_invalid_argument():
    """Wrong dimensions and locations outside their pool too (the conformance suite's
    request mutations), on the paths that take outputs of unspecified dims and not."""
    failures = []
    kinds = dict.fromkeys(REQUEST_MUTATION_KINDS, 0)
    for name, model, request, _ in request_cases()[::4]:
        for what, bad in request_mutations(model, request):
            for kind in kinds:
                kinds[kind] += kind in what
            for allow in (False, True):
                try:
                    validate_request(model, bad, V.V1_3, allow_unspecified_output=allow)
                    failures.append(f"{name}: {what}: accepted")
                except HalError as e:
                    if e.status != ErrorStatus.INVALID_ARGUMENT:
                        failures.append(f"{name}: {what}: {e}")
    assert not failures, "\n".join(failures[:25])
    assert all(kinds.values()), kinds


REQUEST_MUTATION_KINDS = (
    "removed",
    "given rank",
    "dimension",
    "(a scalar) given dimensions",
    "offset",
    "runs past pool",
    "pool index",
)
