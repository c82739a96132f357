"""The random-graph generator: validity over many seeds and every operation, bounded
time, determinism, replay, shrinking, connectivity, execution and coverage.

``NNFUZZ_GENERATOR_SEEDS`` scales the seed counts (e.g. 10 for a nightly run)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings

from driver.executor import Executor
from driver.hal.types import (
    FLOAT_TYPES,
    QUANT8_TYPES,
    STANDARD_OPERATIONS,
    HalVersion,
    is_scalar_type,
)
from driver.hal.types import OperandLifeTime as L
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.memory import pool_buffer
from driver.operations import REGISTRY
from driver.validation import validate_model
from randomgraph.choices import PrngSource, ReplaySource
from randomgraph.coverage import Coverage, allowed_data_types
from randomgraph.generator import (
    GenerationError,
    generate,
    generate_from_bytes,
    generate_with,
    regenerate,
    resolve_config,
)
from randomgraph.generator.dims import DimSolver, Unsatisfiable, draw_dims
from randomgraph.spec.loader import load_spec
from randomgraph.strategies import valid_models
from tests import drawn

SCALE = int(os.environ.get("NNFUZZ_GENERATOR_SEEDS", "1"))
PER_GRAPH_SECONDS = 5.0  # generous: graphs take milliseconds


def _check_valid(graph) -> None:
    try:
        validate_model(graph.model, graph.version)
    except Exception as e:  # pragma: no cover - the failure message is the point
        ops = [r.operation.name for r in graph.operations]
        raise AssertionError(f"{graph.name} (HAL {graph.version.label}, {ops}): {e}") from e


def _timed(seed: int, preset: str, **kw):
    start = time.perf_counter()
    graph = generate(seed, preset, **kw)
    elapsed = time.perf_counter() - start
    assert elapsed < PER_GRAPH_SECONDS, f"seed {seed} took {elapsed:.1f} s"
    return graph


# --- validity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "preset, count", [("single", 300), ("small", 300), ("medium", 150), ("large", 100)]
)
def test_every_generated_graph_validates_at_its_version(preset, count):
    config = resolve_config(preset)
    for seed in range(count * SCALE):
        graph = _timed(seed, preset)
        _check_valid(graph)
        assert graph.version in config.versions
        main_ops = len(graph.model.main.operations)
        assert 1 <= main_ops <= config.num_ops
        for sg in (graph.model.main, *graph.model.referenced):
            for o in sg.operands:
                n = int(np.prod(o.dimensions)) if o.dimensions else 1
                assert n <= config.max_elements


@pytest.mark.parametrize("op", STANDARD_OPERATIONS, ids=lambda o: o.name)
def test_every_operation_alone(op):
    seen_types = set()
    for seed in range(4 * SCALE):
        graph = _timed(seed, "small", operations=frozenset({op}), num_ops=2)
        _check_valid(graph)
        main_types = {r.operation for r in graph.operations[: len(graph.model.main.operations)]}
        assert op in main_types
        seen_types |= {r.data_type for r in graph.operations if r.operation == op}
    allowed = allowed_data_types(op)
    assert not allowed or seen_types <= allowed


def test_an_lstm_scratch_buffer_is_the_only_ignored_output():
    """Its contents are unspecified, so it is marked ignored (not compared) in the graph
    and in its test model (the spec), written as zeros, and no other output is."""
    for seed in range(3):
        graph = _timed(seed, "small", operations=frozenset({O.LSTM}), num_ops=1)
        main = graph.model.main
        (lstm,) = [op for op in main.operations if op.type == O.LSTM]
        assert graph.ignored_outputs == [lstm.outputs[0]]
        marked = [i for i in main.output_indexes if graph.test_model.main.operands[i].is_ignored]
        assert marked == [lstm.outputs[0]]
        expected = graph.with_expected()
        assert [i for i in main.output_indexes if expected.main.operands[i].is_ignored] == marked
        # A spec writes the unspecified values as zeros (the reference's are not).
        scratch = expected.main.operands[lstm.outputs[0]]
        assert len(scratch.data) == np.prod(scratch.dimensions) and not any(scratch.data)


@pytest.mark.parametrize("version", list(HalVersion), ids=lambda v: v.name)
def test_version_filter(version):
    for seed in range(30 * SCALE):
        graph = generate(seed, "small", versions=(version,))
        assert graph.version == version
        _check_valid(graph)


@pytest.mark.parametrize("op", [O.PAD, O.SPACE_TO_BATCH_ND])
def test_quant8_padding_operations_generate_at_hal_1_1(op):
    # Before HAL 1.2 these pad a QUANT8_ASYMM tensor with the byte 0, so its zero point
    # must be 0; random zero points made nearly every attempt fail.
    for seed in range(20 * SCALE):
        only = {"operations": frozenset({op}), "data_types": frozenset({T.TENSOR_QUANT8_ASYMM})}
        graph = generate(seed, "single", versions=(HalVersion.V1_1,), **only)
        _check_valid(graph)
        assert graph.operations[0].operation == op


def test_data_type_and_rank_filters():
    for seed in range(40 * SCALE):
        graph = generate(seed, "small", data_types=frozenset({T.TENSOR_QUANT8_ASYMM_SIGNED}))
        _check_valid(graph)
        main = graph.operations[: len(graph.model.main.operations)]
        assert all("Q8AS" in r.data_type for r in main)
    for seed in range(40 * SCALE):
        graph = generate(seed, "single", ranks=frozenset({3}))
        _check_valid(graph)
        assert graph.operations[0].rank == 3
    # A WHILE carries a tensor of the filtered type (not only its INT32 counter).
    for seed in range(10):
        only = {"operations": frozenset({O.WHILE}), "data_types": frozenset({T.TENSOR_FLOAT16})}
        graph = generate(seed, "single", **only)
        (loop,) = graph.model.main.operations
        assert graph.operations[0].data_type == "F16" and len(loop.outputs) > 1
    # In a graph too: an input taken from an earlier operation keeps to the filter, and
    # FILL (whose rank is its output's) is counted at the rank it was given.
    for seed in range(60):
        graph = generate(seed, "small", ranks=frozenset({3}))
        main = graph.operations[: len(graph.model.main.operations)]
        assert [r for r in main if r.rank != 3] == []


def test_a_sweep_gives_each_operation_and_data_type_pair_its_seed():
    """Seed N's first operation is pair N mod #pairs, at a HAL version that has the pair
    (not just the operation): five seeds of ADD make its five data types."""
    made = [generate(s, "single", operations=frozenset({O.ADD})).operations[0] for s in range(5)]
    assert sorted(r.data_type for r in made) == ["F16", "F32", "I32", "Q8A", "Q8AS"]


def test_control_flow_bodies_draw_fresh_tensors_as_constants():
    """An IF/WHILE fixes its subgraphs' inputs: a tensor an operation in a body draws
    fresh must be a constant there, or the graph cannot be built."""
    with_bodies = 0
    for seed in range(12):
        graph = generate(seed, "small", operations=frozenset({O.IF, O.WHILE, O.ADD, O.MUL}))
        _check_valid(graph)
        with_bodies += bool(graph.model.referenced)
    assert with_bodies >= 3  # not vacuous: IF or WHILE bodies were drawn


def test_impossible_filter_fails_cleanly():
    with pytest.raises(GenerationError):
        generate(
            0,
            "single",
            operations=frozenset({O.CONV_2D}),
            versions=(HalVersion.V1_0,),
            data_types=frozenset({T.TENSOR_FLOAT16}),
        )


# --- determinism and replay -------------------------------------------------------------


def _fingerprint(graph) -> dict:
    return graph.test_model.to_json()


@pytest.mark.parametrize("preset", ["single", "small", "large"])
def test_same_seed_same_graph_and_same_spec_bytes(preset):
    for seed in (0, 7, 123):
        a, b = generate(seed, preset), generate(seed, preset)
        assert a.choices == b.choices
        assert _fingerprint(a) == _fingerprint(b)
        assert a.dump() == b.dump()
    assert _fingerprint(generate(1, preset)) != _fingerprint(generate(2, preset))


def test_a_seed_sweep_walks_the_operation_and_data_type_pairs():
    from randomgraph.generator.core import Generator

    pairs = Generator(resolve_config("single"), PrngSource(0)).operation_pairs()
    assert len(pairs) == 398 + 2 - 2  # every declared pair; IF and WHILE count once each
    for seed in (0, 1, 57, 200, 397, 398):
        graph = generate(seed, "single")
        op, key, _ = pairs[seed % len(pairs)]
        assert graph.operations[0].operation == op
        if key is not None:
            assert graph.operations[0].data_type == key
        assert graph.choices[0] == seed % len(pairs)


def test_every_operation_has_a_rule_in_the_matching_family():
    from driver.operations import FAMILIES as DRIVER_FAMILIES
    from randomgraph.generator.rules import FAMILIES, RULES

    assert set(RULES) == set(STANDARD_OPERATIONS)
    driver_names = [f.__name__.rsplit(".", 1)[-1] for f in DRIVER_FAMILIES]
    assert [f.__name__.rsplit(".", 1)[-1] for f in FAMILIES] == driver_names
    for rules_family, driver_family in zip(FAMILIES, DRIVER_FAMILIES):
        assert set(rules_family.RULES) == {d.type for d in driver_family.DECLARATIONS}


def test_regenerating_from_the_recorded_choices_gives_the_same_graph():
    for preset in ("single", "small", "large"):
        for seed in (3, 44):
            graph = generate(seed, preset)
            again = regenerate(graph.choices, preset, name=graph.name)
            assert _fingerprint(again) == _fingerprint(graph)


def test_any_choice_sequence_gives_a_valid_graph():
    rng = np.random.default_rng(5)
    for k in range(60 * SCALE):
        choices = rng.integers(0, 2**40, size=int(rng.integers(0, 400))).tolist()
        if k % 3 == 0:
            choices = [c % 3 for c in choices]  # shrunk-looking sequences
        _check_valid(regenerate(choices, "small"))


def test_a_graph_has_an_operation_even_when_growth_makes_none():
    """The last resort tries each allowed operation in turn (here growth makes none, as
    with valid_models(max_operations=0))."""
    for seed in range(3):
        graph = generate(seed, "small", num_ops=0, operations=frozenset({O.ADD, O.RELU}))
        _check_valid(graph)
        assert [r.operation for r in graph.operations] == [O.ADD]


def test_byte_source_graphs_are_valid_even_from_no_bytes():
    _check_valid(generate_from_bytes(b""))
    rng = np.random.default_rng(8)
    for _ in range(60 * SCALE):
        data = rng.integers(0, 256, size=int(rng.integers(1, 600)), dtype=np.uint8).tobytes()
        _check_valid(generate_from_bytes(data, "small"))


# --- Hypothesis ---------------------------------------------------------------------------


def test_hypothesis_shrinks_to_a_single_operation():
    ops = [O.ADD, O.MUL, O.RELU, O.CONV_2D, O.SOFTMAX, O.RESHAPE, O.CONCATENATION, O.TANH]
    graph = find(
        valid_models(max_operations=4, operations=ops),
        lambda g: O.CONV_2D in g.operation_types,
        settings=settings(
            max_examples=150,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert [r.operation for r in graph.operations] == [O.CONV_2D]
    _check_valid(graph)


def test_valid_models_defaults_are_what_its_docstring_says():
    """1 to max_operations operations in the main graph (the count is itself a choice)
    and dims of at most 10."""
    strategy = valid_models(max_operations=2, operations=[O.ADD, O.RELU])
    graphs = drawn(strategy, 30)
    counts = {len(g.model.main.operations) for g in graphs}
    assert counts == {1, 2}
    for graph in graphs:
        for sg in (graph.model.main, *graph.model.referenced):
            assert max((d for o in sg.operands for d in o.dimensions), default=1) <= 10


def test_valid_models_takes_names_as_well_as_codes():
    graphs = drawn(
        valid_models(operations=["ADD"], data_types=["TENSOR_FLOAT16"], versions=["1.2"]), 5
    )
    for graph in graphs:
        assert graph.version == HalVersion.V1_2
        assert {(r.operation, r.data_type) for r in graph.operations} == {(O.ADD, "F16")}


HYPOTHESIS_CONFIG = resolve_config("small", num_ops=3, min_ops=1, max_dim=10, sweep=False)


@given(valid_models("small", max_operations=3))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_hypothesis_graphs_are_valid_and_replay(graph):
    _check_valid(graph)
    again = regenerate(graph.choices, HYPOTHESIS_CONFIG, name=graph.name)
    assert _fingerprint(again) == _fingerprint(graph)


# --- structure ----------------------------------------------------------------------------


def _produced_and_consumed_quant(model) -> bool:
    main = model.main
    produced = {i for op in main.operations for i in op.outputs}
    return any(
        i in produced and main.operands[i].type in QUANT8_TYPES
        for op in main.operations
        for i in op.inputs
    )


def test_quantized_multi_operation_graphs_connect():
    connected = 0
    n = 100 * SCALE
    for seed in range(n):
        graph = generate(
            seed,
            "small",
            data_types=frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED}),
        )
        connected += _produced_and_consumed_quant(graph.model)
    assert connected > n // 2, f"only {connected}/{n} quantized graphs connect"
    # Unfiltered large graphs chain quantized tensors too.
    assert any(_produced_and_consumed_quant(generate(s, "large").model) for s in range(10))


def test_lifetimes_unknown_dims_and_features_all_occur():
    seen = set()
    for seed in range(200 * SCALE):
        graph = generate(seed, "small")
        for sg in (graph.model.main, *graph.model.referenced):
            for o in sg.operands:
                seen.add(L(o.lifetime).name)
                if o.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
                    seen.add("per-channel")
                if o.lifetime in (L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT) and (
                    not o.dimensions or 0 in o.dimensions
                ):
                    seen.add("unknown dims")
        if graph.relaxed:
            seen.add("relaxed")
    for want in (
        "CONSTANT_COPY",
        "CONSTANT_REFERENCE",
        "NO_VALUE",
        "SUBGRAPH",
        "TEMPORARY_VARIABLE",
        "per-channel",
        "unknown dims",
        "relaxed",
    ):
        assert want in seen


def test_results_are_declared_of_unknown_rank_all_dims_or_some_dims_unknown():
    """From HAL 1.2 a result whose dims the rule knows (ADD's, MUL's) is sometimes
    declared without its rank, without any dim, or with only some dims: a driver must
    size it from its inputs."""
    declared = set()
    for seed in range(100):
        main = generate(seed, "small", operations=frozenset({O.ADD, O.MUL})).model.main
        for op in main.operations:
            dims = main.operands[op.outputs[0]].dimensions
            if not dims:
                declared.add("unknown rank")
            elif set(dims) == {0}:
                declared.add("no dim known")
            elif 0 in dims:
                declared.add("some dims known")
    assert declared == {"unknown rank", "no dim known", "some dims known"}


def test_control_flow_nests():
    nested = False
    for seed in range(80 * SCALE):
        graph = generate(seed, "small", operations=frozenset({O.IF, O.WHILE}))
        _check_valid(graph)
        for sg in graph.model.referenced:
            if any(op.type in (O.IF, O.WHILE) for op in sg.operations):
                nested = True
        Executor(graph.model).run(graph.inputs)
    assert nested


def _lstm_features(model):
    """(cifg, peephole, projection, projection bias, layer norm) of each LSTM (27 inputs)."""
    main = model.main
    found = set()
    for op in main.operations:
        if op.type != O.LSTM or len(op.inputs) != 27:
            continue
        omitted = [main.operands[i].lifetime == L.NO_VALUE for i in op.inputs]
        found.add((omitted[1], omitted[10], not omitted[16], not omitted[17], not omitted[24]))
    return found


def test_lstm_optional_operand_combinations():
    combos = set()
    for seed in range(400 * SCALE):
        graph = generate(
            seed, "single", operations=frozenset({O.LSTM}), versions=(HalVersion.V1_2,)
        )
        combos |= _lstm_features(graph.model)
    # Every combination the declaration accepts: CIFG x peephole x (no projection,
    # projection, projection + bias) x layer norm.
    assert len(combos) == 2 * 2 * 3 * 2


def test_lstm_activations_and_clips_take_every_form():
    """Every activation LSTM accepts (the bounded TANH and SIGMOID, and NONE, RELU,
    RELU6), and cell and projection clipping both off (0) and on."""
    activations, cell_clips, projection_clips = set(), set(), set()
    for _, main, op in _single_operations(O.LSTM, 150):
        activations.add(int(main.operands[op.inputs[20]].data[0]))
        cell_clips.add(float(main.operands[op.inputs[21]].data[0]) > 0)
        projection_clips.add(float(main.operands[op.inputs[22]].data[0]) > 0)
    assert activations == {0, 1, 3, 4, 6}
    assert cell_clips == projection_clips == {False, True}


def test_transpose_omits_its_permutation_only_on_a_matrix():
    """Android's Transpose.cpp reads an omitted perm as the 2-D transpose only: a graph
    with one on another rank would fail a driver built from Android's code."""
    ranks_omitted = set()
    for seed in range(200 * SCALE):
        main = generate(seed, "single", operations=frozenset({O.TRANSPOSE})).model.main
        for op in main.operations:
            if op.type == O.TRANSPOSE and main.operands[op.inputs[1]].lifetime == L.NO_VALUE:
                ranks_omitted.add(len(main.operands[op.inputs[0]].dimensions))
    assert ranks_omitted == {2}


def _transpose_conv_int32s(model, operand) -> np.ndarray:
    loc = operand.location
    if operand.lifetime == L.CONSTANT_COPY:
        data = bytes(model.operand_values[loc.offset : loc.offset + loc.length])
    else:
        data = bytes(pool_buffer(model.pools[loc.pool_index])[loc.offset : loc.offset + loc.length])
    return np.frombuffer(data, dtype="<i4")


def test_transpose_conv_requests_the_shape_it_outputs():
    """TRANSPOSE_CONV_2D's output-shape tensor (implicit padding) is the output's shape,
    also with VALID padding and a filter shorter than the stride, where Android's
    TransposeConv2D.cpp outputs (in - 1) * stride + filter, not in * stride: a driver
    sizing its output from the tensor, as the doc describes it, must not disagree."""
    seen = set()  # (padding code, some filter shorter than its stride)
    for seed in range(300 * SCALE):
        model = generate(seed, "single", operations=frozenset({O.TRANSPOSE_CONV_2D})).model
        main = model.main
        for op in main.operations:
            if op.type != O.TRANSPOSE_CONV_2D or len(op.inputs) != 9:
                continue
            out = main.operands[op.outputs[0]].dimensions
            if not out or 0 in out:  # output dims left to the driver
                continue
            requested = _transpose_conv_int32s(model, main.operands[op.inputs[3]])
            assert tuple(requested) == tuple(out)
            filt = main.operands[op.inputs[1]].dimensions
            strides = [
                int(_transpose_conv_int32s(model, main.operands[op.inputs[i]])[0]) for i in (5, 6)
            ]
            code = int(_transpose_conv_int32s(model, main.operands[op.inputs[4]])[0])
            seen.add((code, filt[2] < strides[0] or filt[1] < strides[1]))
    assert seen == {(1, False), (1, True), (2, False), (2, True)}


def _int32_constant(model, operand) -> int:
    assert operand.lifetime == L.CONSTANT_COPY
    off = operand.location.offset
    return int.from_bytes(model.operand_values[off : off + 4], "little", signed=True)


def test_lsh_projection_dense_always_has_its_weight():
    """Android's LSHProjection::Prepare wants all 4 inputs for DENSE
    (NN_CHECK_EQ(NumInputsWithValues, 4)); only the sparse kinds may omit the weight."""
    seen = set()
    for seed in range(300 * SCALE):
        model = generate(seed, "single", operations=frozenset({O.LSH_PROJECTION})).model
        main = model.main
        for op in main.operations:
            if op.type == O.LSH_PROJECTION:
                kind = _int32_constant(model, main.operands[op.inputs[3]])
                seen.add((kind, main.operands[op.inputs[2]].lifetime == L.NO_VALUE))
    assert (2, True) not in seen
    assert {(2, False), (1, True), (3, True)} <= seen


def test_rnn_activation_is_never_relu1():
    """Android's RNN::RNNStep (RNN and both sequence RNNs) applies ActivationFunctor,
    which aborts on kActivationRelu1; the other FuseCodes still come up."""
    rnns = (O.RNN, O.UNIDIRECTIONAL_SEQUENCE_RNN, O.BIDIRECTIONAL_SEQUENCE_RNN)
    position = {O.RNN: 5, O.UNIDIRECTIONAL_SEQUENCE_RNN: 5, O.BIDIRECTIONAL_SEQUENCE_RNN: 12}
    seen = {op: set() for op in rnns}
    for seed in range(300 * SCALE):
        model = generate(seed, "single", operations=frozenset(rnns)).model
        main = model.main
        for op in main.operations:
            if op.type in rnns:
                act = _int32_constant(model, main.operands[op.inputs[position[op.type]]])
                seen[op.type].add(act)
    for op in rnns:
        assert seen[op] == {0, 1, 3}, (op, seen[op])


@pytest.mark.parametrize(
    ("a", "b", "shape"),
    [
        ((2, 3), (3,), (2, 3)),
        ((4, 1, 3), (2, 1), (4, 2, 3)),
        ((1,), (5, 2), (5, 2)),
        ((2, 3), (2,), None),
    ],
)
def test_broadcast_lines_shapes_up_from_the_last_dim(a, b, shape):
    from randomgraph.generator.rules.base import broadcast

    assert broadcast(a, b) == shape


def test_fused_activations_take_every_fuse_code():
    """NONE, RELU, RELU1 and RELU6 (FULLY_CONNECTED's input 3)."""
    seen = set()
    for seed in range(60):
        model = generate(seed, "single", operations=frozenset({O.FULLY_CONNECTED})).model
        main = model.main
        for op in main.operations:
            if op.type == O.FULLY_CONNECTED:
                seen.add(_int32_constant(model, main.operands[op.inputs[3]]))
    assert seen == {0, 1, 2, 3}


def _unknown_size(operand) -> bool:
    """A tensor declared without its full shape (scalars always have a size)."""
    if is_scalar_type(operand.type):
        return False
    return not operand.dimensions or 0 in operand.dimensions


def test_control_flow_operands_are_fully_sized():
    """Android 11 rejects an IF/WHILE whose outer or inner inputs/outputs have unknown
    size in a driver's model (validateControlFlowOperandUnknownSize; ValidateHal allows
    them in RUNTIME mode only). Operands of unknown size still occur elsewhere."""
    cf_ops = 0
    unknown_elsewhere = False
    for seed in range(150 * SCALE):
        graph = generate(seed, "small", operations=frozenset({O.IF, O.WHILE}))
        model = graph.model
        for sg in (model.main, *model.referenced):
            cf_operands = set()
            for op in sg.operations:
                if op.type not in (O.IF, O.WHILE):
                    continue
                cf_ops += 1
                for i in (*op.inputs, *op.outputs):
                    o = sg.operands[i]
                    if o.type == T.SUBGRAPH:
                        # The referenced subgraph's own inputs and outputs.
                        ref = model.referenced[o.location.offset]
                        for j in (*ref.input_indexes, *ref.output_indexes):
                            assert not _unknown_size(ref.operands[j]), (graph.name, op.type)
                        continue
                    cf_operands.add(i)
                    assert not _unknown_size(o), (graph.name, op.type, o)
            for i, o in enumerate(sg.operands):
                if i not in cf_operands and o.lifetime == L.TEMPORARY_VARIABLE and _unknown_size(o):
                    unknown_elsewhere = True
    assert cf_ops > 100
    assert unknown_elsewhere


# --- execution and specs ------------------------------------------------------------------


@pytest.mark.parametrize("preset, count", [("single", 60), ("small", 40), ("large", 10)])
def test_generated_graphs_run_on_the_reference(preset, count):
    for seed in range(count * SCALE):
        graph = generate(seed, preset)
        outputs = Executor(graph.model).run(graph.inputs)
        assert len(outputs) == len(graph.model.main.output_indexes)
        for k, out in enumerate(outputs):
            operand = graph.model.main.operands[graph.model.main.output_indexes[k]]
            if (
                operand.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
                and k not in graph.ignored_outputs
            ):
                # Inputs are kept in range: no operation overflows or divides by zero.
                assert np.isfinite(np.asarray(out, dtype=np.float64)).all(), (
                    f"{graph.name}: output {k} not finite"
                )


def test_dumped_specs_load_back_identically(tmp_path: Path):
    def normalized(test):
        d = test.to_json()
        for sg in [d["main"], *d["referenced"]]:
            for o in sg["operands"]:
                o.pop("name")
        return d

    # Few, small graphs: loading a spec costs an inspect.stack() per operand. Control
    # flow too: its subgraphs' inputs and outputs are ordered as a spec lists them.
    control_flow = frozenset({O.IF, O.WHILE})
    for preset, seeds, operations in (
        ("single", range(12), None),
        ("small", range(6), None),
        ("large", range(1), None),
        ("single", range(12), control_flow),
    ):
        for seed in seeds:
            graph = generate(seed, preset, max_dim=6, max_elements=200, operations=operations)
            expected = graph.with_expected()
            path = tmp_path / f"{graph.name}.mod.py"
            path.write_text(graph.dump())
            (back,) = load_spec(path)
            assert back.name == graph.name
            assert normalized(back) == normalized(expected)


# --- coverage -------------------------------------------------------------------------------


def test_a_thousand_single_operation_seeds_cover_every_operation_and_data_type():
    cov = Coverage()
    for seed in range(1000):
        cov.add(generate(seed, "single"))
    assert cov.missing_operations() == []
    assert cov.missing_data_types() == {}
    table = cov.table()
    assert "NOT GENERATED" not in table
    assert "102/102 operations" in table


# --- forms: every parameter form a rule declares comes up -----------------------------------

FORM_SEEDS = 600
"""Single-operation seeds a form may take to come up: the slowest (a RESIZE_BILINEAR
signature among its 32) first came at seed 274."""


def _single_operations(op, seeds: int = FORM_SEEDS, **kw):
    """(test model, main subgraph, operation) of each ``op`` the single-operation sweep
    makes, seed after seed (the caller stops when it has seen enough)."""
    for seed in range(seeds):
        test = generate(seed, "single", operations=frozenset({op}), **kw).test_model
        for operation in test.main.operations:
            if operation.type == op:
                yield test, test.main, operation


def _signature_of(decl, types_in, types_out):
    for s in decl.signatures:
        if s.expand_inputs(len(types_in)) == types_in and (
            s.expand_outputs(len(types_out)) == types_out
        ):
            return (s.inputs, s.outputs)
    return None


@pytest.mark.parametrize(
    "op", [o for o in STANDARD_OPERATIONS if o not in (O.IF, O.WHILE)], ids=lambda o: o.name
)
def test_every_declared_form_is_generated(op):
    """Every signature of the declaration (explicit or implicit padding, with a layout,
    with dilation, with an axis, with state outputs, ...), every optional input both
    omitted and present, and every BOOL parameter (layout NCHW, keep_dims, time-major,
    align_corners, ...) both false and true: a rule that silently narrows fails here."""
    decl = REGISTRY[op]
    wanted = {("signature", (s.inputs, s.outputs)) for s in decl.signatures}
    for s in decl.signatures:
        wanted |= {("omitted", k, flag) for k in s.optional for flag in (False, True)}
        wanted |= {("bool", j, v) for j in range(s.inputs.count(T.BOOL)) for v in (False, True)}
    seen: set = set()
    for _, main, operation in _single_operations(op):
        inputs = [main.operands[i] for i in operation.inputs]
        outputs = [main.operands[i] for i in operation.outputs]
        seen.add(
            (
                "signature",
                _signature_of(decl, tuple(o.type for o in inputs), tuple(o.type for o in outputs)),
            )
        )
        seen |= {("omitted", k, o.lifetime == L.NO_VALUE) for k, o in enumerate(inputs)}
        flags = [bool(o.data[0]) for o in inputs if o.type == T.BOOL]
        seen |= {("bool", j, v) for j, v in enumerate(flags)}
        if wanted <= seen:
            break
    assert sorted(map(str, wanted - seen)) == []


def _ints(main, operation, k: int) -> list[int]:
    """The values of input ``k`` (a constant or an example input) as ints."""
    return [int(v) for v in main.operands[operation.inputs[k]].data]


def _int_params(main, operation) -> list[int]:
    """A convolution's INT32 scalars after its bias, up to the layout flag (padding,
    strides, multiplier or groups, activation)."""
    params = []
    for i in operation.inputs[3:]:
        o = main.operands[i]
        if o.type != T.INT32:
            break
        params.append(int(o.data[0]))
    return params


def _dims(main, operation, k: int, *, output: bool = False) -> list[int]:
    return main.operands[(operation.outputs if output else operation.inputs)[k]].dimensions


def _omitted(main, operation, *positions: int) -> bool:
    return all(main.operands[operation.inputs[k]].lifetime == L.NO_VALUE for k in positions)


def _referenced_ops(test, main, operation, k: int) -> set:
    """Operation types of the subgraph input ``k`` of an IF/WHILE names."""
    sub = test.referenced[int(main.operands[operation.inputs[k]].data[0])]
    return {o.type for o in sub.operations}


def _constants(test, main, operation, k: int) -> list:
    """The constant values of the subgraph input ``k`` of an IF/WHILE names."""
    sub = test.referenced[int(main.operands[operation.inputs[k]].data[0])]
    constant = (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
    return [o.data for o in sub.operands if o.lifetime in constant]


def _same_quantization(a, b) -> bool:
    return a.type == b.type == T.TENSOR_QUANT8_ASYMM and (a.scale, a.zero_point) == (
        b.scale,
        b.zero_point,
    )


def _on_the_quarter_grid(main, operation) -> bool:
    """Float inputs are multiples of 0.25 (STABLE's grid); other types pass."""
    inputs = [main.operands[i] for i in operation.inputs]
    floats = [o for o in inputs if o.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)]
    return all(
        np.array_equal(np.multiply(o.data, 4), np.round(np.multiply(o.data, 4))) for o in floats
    )


def _quant_conv_multiplier_at_most_1(main, operation) -> bool:
    x, w, out = (main.operands[i] for i in (*operation.inputs[:2], operation.outputs[0]))
    return w.type == T.TENSOR_QUANT8_ASYMM and out.scale <= x.scale * w.scale


FORMS = [
    # (operation, the form, whether an operation has it, generate() filters)
    # Implicit padding: [code, stride w, stride h, activation] (explicit: 4 pads first).
    (O.CONV_2D, "implicit SAME padding", lambda t, m, op: _int_params(m, op)[::4] == [1], {}),
    (
        O.CONV_2D,
        "dilation 2",
        lambda t, m, op: (
            m.operands[op.inputs[-3]].type == T.BOOL  # layout, then dilations
            and 2 in _ints(m, op, -1) + _ints(m, op, -2)
        ),
        {},
    ),
    (
        O.CONV_2D,
        "a quantized output multiplier >= 1 (HAL 1.2+)",
        lambda t, m, op: _quant_conv_multiplier_at_most_1(m, op),
        {"data_types": frozenset({T.TENSOR_QUANT8_ASYMM})},
    ),
    (O.DEPTHWISE_CONV_2D, "depth multiplier > 1", lambda t, m, op: _int_params(m, op)[-2] > 1, {}),
    (O.GROUPED_CONV_2D, "several groups", lambda t, m, op: _int_params(m, op)[-2] > 1, {}),
    (O.RESHAPE, "an inferred (-1) dim", lambda t, m, op: -1 in _ints(m, op, 1), {}),
    (O.SLICE, "a size of -1 (to the end)", lambda t, m, op: -1 in _ints(m, op, 2), {}),
    (O.STRIDED_SLICE, "a negative stride", lambda t, m, op: min(_ints(m, op, 3)) < 0, {}),
    (O.STRIDED_SLICE, "a begin mask", lambda t, m, op: _ints(m, op, 4) != [0], {}),
    (O.STRIDED_SLICE, "a shrink-axis mask", lambda t, m, op: _ints(m, op, 6) != [0], {}),
    (O.CONCATENATION, "three tensors", lambda t, m, op: len(op.inputs) == 4, {}),
    (
        O.EXPAND_DIMS,
        "a new last axis (axis = rank)",
        lambda t, m, op: _ints(m, op, 1) == [len(_dims(m, op, 0))],
        {},
    ),
    (O.GATHER, "a negative axis", lambda t, m, op: _ints(m, op, 1)[0] < 0, {}),
    (O.PAD, "nonzero padding", lambda t, m, op: max(_ints(m, op, 1)) > 0, {}),
    (O.SPLIT, "several outputs", lambda t, m, op: len(op.outputs) > 1, {}),
    (
        O.REDUCE_SUM,
        "a repeated axis (-k and k)",
        lambda t, m, op: (
            len({a % len(_dims(m, op, 0)) for a in _ints(m, op, 1)}) < len(_ints(m, op, 1))
        ),
        {},
    ),
    (O.TOPK_V2, "k > 1", lambda t, m, op: _ints(m, op, 1)[0] > 1, {}),
    (
        O.SOFTMAX,
        "a negative axis",
        lambda t, m, op: len(op.inputs) == 3 and _ints(m, op, 2)[0] < 0,
        {},
    ),
    (
        O.SOFTMAX,
        "rank 4 before HAL 1.2",
        lambda t, m, op: len(_dims(m, op, 0)) == 4,
        {"versions": (HalVersion.V1_0,)},
    ),
    (
        O.ADD,
        "the broadcast operand first",
        lambda t, m, op: np.prod(_dims(m, op, 0)) < np.prod(_dims(m, op, 1)),
        {},
    ),
    (
        O.LESS,
        "the broadcast operand first",
        lambda t, m, op: np.prod(_dims(m, op, 0)) < np.prod(_dims(m, op, 1)),
        {},
    ),
    (
        O.CAST,
        "values past 255 cast to QUANT8_ASYMM (saturation)",
        lambda t, m, op: (
            m.operands[op.outputs[0]].type == T.TENSOR_QUANT8_ASYMM
            and m.operands[op.inputs[0]].type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
            and max(m.operands[op.inputs[0]].data) > 255
        ),
        {},
    ),
    (
        O.QUANTIZE,
        "an output scale spanning the input's values (below the random scales' 0.1)",
        lambda t, m, op: m.operands[op.outputs[0]].scale < 0.1,
        {},
    ),
    (
        O.EQUAL,
        "two quantized inputs with the same scale and zero point (equality happens)",
        lambda t, m, op: _same_quantization(m.operands[op.inputs[0]], m.operands[op.inputs[1]]),
        {"data_types": frozenset({T.TENSOR_QUANT8_ASYMM})},
    ),
    (O.ABS, "a rank-5 input", lambda t, m, op: len(_dims(m, op, 0)) == 5, {}),
    (
        O.HASHTABLE_LOOKUP,
        "a key not in the table",
        lambda t, m, op: bool(set(_ints(m, op, 0)) - set(_ints(m, op, 1))),
        {},
    ),
    (
        O.FULLY_CONNECTED,
        "an input size other than the input's last dim",
        lambda t, m, op: _dims(m, op, 1)[1] != _dims(m, op, 0)[-1],
        {},
    ),
    (
        O.BIDIRECTIONAL_SEQUENCE_RNN,
        "a parallel auxiliary input (no aux weights)",
        lambda t, m, op: not _omitted(m, op, 9) and _omitted(m, op, 10, 11),
        {},
    ),
    (
        O.BIDIRECTIONAL_SEQUENCE_LSTM,
        "a parallel auxiliary input (no aux weights)",
        lambda t, m, op: not _omitted(m, op, 39) and _omitted(m, op, *range(40, 48)),
        {},
    ),
    (O.UNIDIRECTIONAL_SEQUENCE_RNN, "time-major", lambda t, m, op: _ints(m, op, 6) == [1], {}),
    (
        O.DEQUANTIZE,
        "a per-channel input quantized along an axis other than 0",
        lambda t, m, op: getattr(m.operands[op.inputs[0]].channel_quant, "channel_dim", 0) > 0,
        {},
    ),
    (O.IF, "several data inputs", lambda t, m, op: len(op.inputs) > 4, {}),
    (
        O.IF,
        "an IF in its then-branch (nesting)",
        lambda t, m, op: O.IF in _referenced_ops(t, m, op, 1),
        {},
    ),
    (
        O.IF,
        "an else-branch whose constants differ from the then-branch's",
        lambda t, m, op: _constants(t, m, op, 1) != _constants(t, m, op, 2),
        {},
    ),
    (O.WHILE, "two carried tensors", lambda t, m, op: len(op.outputs) == 3, {}),
    (O.WHILE, "no carried tensor (an input-only bound)", lambda t, m, op: len(op.outputs) == 1, {}),
    (O.WHILE, "an IF in its body", lambda t, m, op: O.IF in _referenced_ops(t, m, op, 1), {}),
    (
        O.WHILE,
        "a GREATER condition",
        lambda t, m, op: O.GREATER in _referenced_ops(t, m, op, 0),
        {},
    ),
    (
        O.WHILE,
        "a LESS_EQUAL condition",
        lambda t, m, op: O.LESS_EQUAL in _referenced_ops(t, m, op, 0),
        {},
    ),
]


@pytest.mark.parametrize(
    ("op", "form", "has_form", "filters"),
    FORMS,
    ids=[f"{op.name}: {form}" for op, form, _, _ in FORMS],
)
def test_rules_generate_each_form_they_draw(op, form, has_form, filters):
    """Forms no signature tells apart (a value of a parameter, an input count, a
    subgraph's contents) come up too."""
    assert any(has_form(*found) for found in _single_operations(op, **filters)), form


def _boxes_at_least_1(main, operation) -> bool:
    boxes = main.operands[operation.inputs[1]]
    real = np.reshape(boxes.data, (-1, 4)) * (boxes.scale or 1.0)
    return bool((real[:, 2] - real[:, 0] >= 1).all() and (real[:, 3] - real[:, 1] >= 1).all())


INVARIANTS = [
    # (operation, what every generated one keeps, whether an operation keeps it)
    (
        O.DIV,
        "divisors of magnitude 0.5 or more (no quotient blows up)",
        lambda t, m, op: min(map(abs, m.operands[op.inputs[1]].data)) >= 0.5,
    ),
    (O.SQRT, "nonnegative values", lambda t, m, op: min(m.operands[op.inputs[0]].data) >= 0),
    (
        O.GREATER_EQUAL,
        "float values on a grid of 0.25 (equal values happen, no rounding edge)",
        lambda t, m, op: _on_the_quarter_grid(m, op),
    ),
    (
        O.GATHER,
        "indices within the gathered axis",
        lambda t, m, op: set(_ints(m, op, 2)) <= set(range(_dims(m, op, 0)[_ints(m, op, 1)[0]])),
    ),
    (
        O.EMBEDDING_LOOKUP,
        "lookups within the table",
        lambda t, m, op: set(_ints(m, op, 0)) <= set(range(_dims(m, op, 1)[0])),
    ),
    (
        O.ROI_ALIGN,
        "batch indexes grouped (non-decreasing)",
        lambda t, m, op: _ints(m, op, 2) == sorted(_ints(m, op, 2)),
    ),
    (
        O.HEATMAP_MAX_KEYPOINT,
        "boxes at least one pixel wide and tall",
        lambda t, m, op: _boxes_at_least_1(m, op),
    ),
    (
        O.REDUCE_PROD,
        "factors within [-1.5, 1.5] (a product of thousands stays finite)",
        lambda t, m, op: max(map(abs, m.operands[op.inputs[0]].data)) <= 1.5,
    ),
    # NNAPI's doc reads a limit of 0 as unlimited, Android's hardNmsSingleClass keeps no
    # box: drivers may follow either, so no graph has one.
    (
        O.GENERATE_PROPOSALS,
        "pre- and post-NMS limits other than 0",
        lambda t, m, op: 0 not in _ints(m, op, 6) + _ints(m, op, 7),
    ),
]


@pytest.mark.parametrize(
    ("op", "fact", "holds"), INVARIANTS, ids=[f"{op.name}: {fact}" for op, fact, _ in INVARIANTS]
)
def test_every_generated_operation_keeps_its_rule_facts(op, fact, holds):
    found = list(_single_operations(op, 200))
    assert len(found) == 200
    assert all(holds(*f) for f in found), fact


# --- value domains and limits ----------------------------------------------------------------


def _opgen(op=O.DIV):
    from randomgraph.generator.core import Generator, Graph, OpGen

    return OpGen(Generator(resolve_config("single"), PrngSource(0)), Graph(), op)


def _tensor(lo, hi, *, exact=True, type_code=T.TENSOR_FLOAT32):
    from randomgraph.generator.core import Tensor

    return Tensor(type_code, (2,), lo=lo, hi=hi, exact=exact)


def test_inputs_accept_only_producers_whose_values_suit_them():
    from randomgraph.generator.values import DEFAULT, NONZERO, POSITIVE, SMALL, STABLE

    cases = [
        # (producer, the input's domain, accepted)
        (_tensor(0.5, 2.0), NONZERO, True),
        (_tensor(-2.0, -0.5), NONZERO, True),
        (_tensor(-1.0, 1.0), NONZERO, False),  # a divisor that may be 0
        (_tensor(0.0, 1.0), NONZERO, False),
        (_tensor(0.01, 2.0), POSITIVE, True),
        (_tensor(0.005, 2.0), POSITIVE, False),  # LOG, SQRT: too close to 0
        (_tensor(-6.0, 6.0), SMALL, True),
        (_tensor(-7.0, 1.0), SMALL, False),  # EXP would overflow
        (_tensor(-1.0, 1.0), STABLE, True),
        (_tensor(-1.0, 1.0, exact=False), STABLE, False),  # a comparison of rounded values
        (_tensor(0, 255, exact=False, type_code=T.TENSOR_QUANT8_ASYMM), STABLE, False),
        (_tensor(0, 255, exact=False, type_code=T.TENSOR_QUANT8_ASYMM), DEFAULT, True),
        (_tensor(-1.0, 1e6), DEFAULT, True),
        (_tensor(-1.0, 2e6), DEFAULT, False),  # float32 inputs accept bounds up to 1e6
        (_tensor(-1.0, 1e3, type_code=T.TENSOR_FLOAT16), DEFAULT, True),
        (_tensor(-1.0, 2e3, type_code=T.TENSOR_FLOAT16), DEFAULT, False),  # float16: 1e3
    ]
    g = _opgen()
    assert [g.accepts(t, domain) for t, domain, _ in cases] == [ok for _, _, ok in cases]


def test_an_output_that_could_overflow_is_not_generated():
    from randomgraph.generator.core import Reject

    g = _opgen(O.ADD)
    for lo, hi, type_code in [
        (-1.0, 1e31, T.TENSOR_FLOAT32),
        (-4e4, 1.0, T.TENSOR_FLOAT16),
        (-1.0, 2.0**31, T.TENSOR_INT32),
    ]:
        with pytest.raises(Reject, match="overflow"):
            g.gen.finish(g, [], [_tensor(lo, hi, type_code=type_code)])
    # Bounds it cannot know: the output may only be a model output.
    unknown = _tensor(-np.inf, np.inf)
    g.gen.finish(g, [], [unknown])
    assert not unknown.chainable
    fits = _tensor(-1e30, 1e30)
    g.gen.finish(g, [], [fits])
    assert fits.chainable


def _main_graph_and_values(seed: int, preset: str, **overrides):
    """The generator's main graph of ``generate(seed, preset, **overrides)`` (its tensors
    with the bounds it claims) and the reference's values of its results ({id(tensor):
    array}): the same graph, every result a model output."""
    from randomgraph.generator.assembly import build_model, choose_main_outputs, operand_order
    from randomgraph.generator.core import Generator, Graph, Kind

    config = resolve_config(preset, **overrides)
    source = PrngSource(seed)
    source.force(seed)
    gen = Generator(config, source)
    ops, first = gen.setup()
    main = Graph()
    gen.grow(main, ops, config.num_ops, first)
    choose_main_outputs(main, source, config.output_p)
    main.outputs = [t for t in operand_order(main) if t.kind == Kind.TEMP]
    model, inputs, _ = build_model(main, gen.relaxed)
    values = Executor(model).run(inputs)
    return main, {id(t): np.asarray(v) for t, v in zip(main.outputs, values)}


@pytest.mark.parametrize(
    ("preset", "seeds", "operations"),
    [
        ("small", 30, {O.MUL, O.LSTM, O.UNIDIRECTIONAL_SEQUENCE_LSTM}),  # mixed signs, cells
        ("small", 40, {O.IF, O.WHILE}),  # bounds through every trip a loop may run
        ("small", 40, {O.ROI_POOLING, O.EXP}),  # an empty bin gives 0 below EXP's bounds
    ],
    ids=["products and LSTM cells", "control flow", "ROI_POOLING of positive values"],
)
def test_results_keep_the_value_bounds_the_generator_claims(preset, seeds, operations):
    """An operation reads a producer only if its claimed bounds suit the input (no LOG of
    0, no division by 0, no float16 overflow): the values the reference computes must
    lie within them. (A result that feeds nothing, like REDUCE_PROD's, claims none.)"""
    checked = 0
    for seed in range(seeds):
        main, values = _main_graph_and_values(seed, preset, operations=frozenset(operations))
        for t in main.outputs:
            if t.ignored or not t.chainable or t.type not in (*FLOAT_TYPES, T.TENSOR_INT32):
                continue
            real = values[id(t)].astype(np.float64)
            # Bounds are real-valued; float16 rounding may step just past them.
            slack = 1e-3 * max(abs(t.lo), abs(t.hi), 1.0)
            assert t.lo - slack <= real.min() and real.max() <= t.hi + slack, (seed, t.type)
            checked += 1
    assert checked > seeds


def test_an_empty_roi_pooling_bin_never_reaches_log_or_rsqrt():
    """ROI_POOLING outputs 0 for a bin that holds no element, below the bounds of an
    input of positive values (EXP's): its output once fed RSQRT and LOG (seed 144)."""
    operations = frozenset({O.EXP, O.ROI_POOLING, O.LOG, O.RSQRT, O.DIV})
    for seed in range(140, 150):
        graph = generate(
            seed, "small", operations=operations, data_types=frozenset({T.TENSOR_FLOAT32})
        )
        for out in Executor(graph.model).run(graph.inputs):
            assert np.isfinite(np.asarray(out, dtype=np.float64)).all(), graph.name


def test_every_while_condition_runs_its_loop():
    """The counter starts in [0, 2] and a condition compares it with a bound above
    (counter < bound, bound > counter, counter <= bound - 1): some loops of each
    condition run, none past the bound."""
    from randomgraph.generator.core import Kind

    trips: dict = {O.LESS: set(), O.GREATER: set(), O.LESS_EQUAL: set()}
    for seed in range(40):
        main, values = _main_graph_and_values(seed, "single", operations=frozenset({O.WHILE}))
        (loop,) = main.ops
        condition = loop.inputs[0].subgraph.ops[0]
        start = loop.inputs[2]
        assert start.kind != Kind.TEMP  # the graph's first operation: a fresh counter
        final = int(values[id(loop.outputs[0])][0])
        assert final <= loop.outputs[0].hi  # the bound the generator claims
        trips[condition.type].add(final - int(start.value[0]))
    assert all(max(found, default=0) > 0 for found in trips.values()), trips


def test_fresh_symmetric_weights_avoid_minus_128():
    from randomgraph.generator.values import DEFAULT, fresh_values

    for type_code in (T.TENSOR_QUANT8_SYMM_PER_CHANNEL, T.TENSOR_QUANT8_SYMM):
        values, lo, _ = fresh_values(PrngSource(1), type_code, (4000,), DEFAULT, 0.5, 0)
        assert values.min() == -127 and values.max() == 127 and lo == -127 * 0.5
    signed, _, _ = fresh_values(
        PrngSource(1), T.TENSOR_QUANT8_ASYMM_SIGNED, (4000,), DEFAULT, 0.5, 0
    )
    assert signed.min() == -128


FRESH_DOMAINS = [
    # (type, domain, scale, zero point): fresh values lie in the domain, on its grid
    (T.TENSOR_FLOAT32, "ROUNDING", 0.0, 0),  # FLOOR, CAST: -3.75, -3.25, ..., 3.75
    (T.TENSOR_FLOAT16, "STABLE", 0.0, 0),
    (T.TENSOR_FLOAT32, "POSITIVE", 0.0, 0),
    (T.TENSOR_QUANT8_ASYMM, "POSITIVE", 0.1, 0),  # LOG, SQRT: nothing below 0.125
    (T.TENSOR_QUANT8_ASYMM_SIGNED, "POSITIVE", 0.3, -100),
    (T.TENSOR_QUANT8_ASYMM, "NONNEGATIVE", 0.7, 3),
    (T.TENSOR_INT32, "NONZERO", 0.0, 0),  # DIV: a magnitude in the domain, either sign
    (T.TENSOR_FLOAT32, "NONZERO", 0.0, 0),
]


@pytest.mark.parametrize(("type_code", "name", "scale", "zero_point"), FRESH_DOMAINS)
def test_fresh_values_lie_in_their_domain(type_code, name, scale, zero_point):
    from randomgraph.generator import values

    domain = getattr(values, name)
    stored, lo, hi = values.fresh_values(
        PrngSource(3), type_code, (4000,), domain, scale, zero_point
    )
    real = stored.astype(np.float64)
    if scale:
        real = (real - zero_point) * scale
    assert lo <= real.min() and real.max() <= hi  # the bounds rules propagate hold them
    if domain.nonzero:
        assert real.min() < 0 < real.max()
        real = np.abs(real)
    assert domain.lo <= real.min() and real.max() <= domain.hi, (real.min(), real.max())
    if domain.grid:
        steps = (real - domain.lo - domain.offset) / domain.grid
        assert np.array_equal(steps, np.round(steps))
        assert real.max() == domain.hi - domain.offset  # the top of the grid comes up


def test_quantization_parameters_follow_nnapi():
    from driver.hal.types import QUANT_RANGE
    from randomgraph.generator.values import quant_params

    for seed in range(50):
        for type_code, (qlo, qhi) in QUANT_RANGE.items():
            scale, zero_point = quant_params(PrngSource(seed), type_code)
            assert 0.1 <= scale < 2.0
            if type_code in (T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT16_SYMM):
                assert zero_point == 0, type_code
            else:
                assert qlo <= zero_point <= qhi


def test_relaxed_float32_inputs_accept_only_float16_sized_producers():
    # A relaxed model may compute in float16: one more operation's growth from 1e3 fits
    # below 65504, from 1e6 it does not.
    from randomgraph.generator.values import DEFAULT

    g = _opgen()
    assert g.accepts(_tensor(-1.0, 2e3), DEFAULT)
    g.relaxed = True
    assert not g.accepts(_tensor(-1.0, 2e3), DEFAULT)
    assert g.accepts(_tensor(-1.0, 1e3), DEFAULT)


def test_control_flow_subgraphs_hold_no_sampling_operation():
    """A RANDOM_MULTINOMIAL's samples are compared as class frequencies only when the
    main graph writes them (randomgraph.criteria.SAMPLING_OPERATIONS)."""
    from randomgraph.generator.core import Generator

    gen = Generator(resolve_config("small"), PrngSource(0))
    for depth in (1, 2):
        ops = gen.subgraph_operations(depth)
        assert O.RANDOM_MULTINOMIAL not in ops
        assert O.ADD in ops and O.RANDOM_MULTINOMIAL in gen.allowed_operations(HalVersion.V1_3)


def test_coverage_names_what_was_not_generated():
    cov = Coverage()
    for seed in range(3):
        cov.add(generate(seed, "single", operations=frozenset({O.ADD})))
    generated = cov.data_types(O.ADD)
    assert generated and cov.operations() == {O.ADD}
    missing = cov.missing_operations()
    assert O.ADD not in missing and O.CONV_2D in missing and len(missing) == 101
    gaps = cov.missing_data_types()
    assert sorted(gaps[O.ADD]) == sorted(allowed_data_types(O.ADD) - generated)
    assert gaps[O.CONV_2D] == sorted(allowed_data_types(O.CONV_2D))
    rows = {line.split()[0]: line for line in cov.table().splitlines()[2:-2]}
    assert rows["CONV_2D"].endswith("NOT GENERATED")
    assert "NOT GENERATED" not in rows["ADD"]
    assert "1/102 operations" in cov.table()
    # The pairs are those the seed sweep walks (IF and WHILE once each): only ADD's count
    # as generated.
    from randomgraph.generator.core import Generator

    summary = cov.summary()
    pairs = Generator(resolve_config("single"), PrngSource(0)).operation_pairs()
    assert summary["data_type_pairs_total"] == len(pairs) == 398
    assert summary["data_type_pairs_generated"] == len(generated)
    assert Coverage().summary()["data_type_pairs_generated"] == 0


def test_every_result_no_operation_reads_is_a_model_output():
    """So that the differential check compares it."""
    for seed in range(60):
        main = generate(seed, "small").model.main
        read = {i for op in main.operations for i in op.inputs}
        for op in main.operations:
            for i in op.outputs:
                assert i in read or i in main.output_indexes, (seed, i)


def test_a_relaxed_graph_has_no_minimum_version():
    """The spec format's convention: a relaxed model's minSupportedVersion is UNKNOWN."""
    relaxed = set()
    for seed in range(40):
        graph = generate(seed, "small")
        expected = None if graph.relaxed else graph.version
        assert graph.min_supported_version == expected
        assert graph.test_model.min_supported_version == expected
        relaxed.add(graph.relaxed)
    assert relaxed == {False, True}


def test_operation_records_include_control_flow_subgraphs():
    """Coverage counts the operations IF branches and WHILE bodies hold."""
    nested = 0
    for seed in range(20):
        graph = generate(seed, "small", operations=frozenset({O.IF, O.WHILE}))
        model = graph.model
        in_model = [op.type for sg in (model.main, *model.referenced) for op in sg.operations]
        assert sorted(graph.operation_types) == sorted(in_model)
        nested += len(in_model) > len(model.main.operations)
    assert nested == 20


# --- dims solver ----------------------------------------------------------------------------


def test_dim_solver_satisfies_its_constraints():
    for seed in range(200):
        s = DimSolver(PrngSource(seed), max_dim=50, max_elements=500)
        n, h, w, c = s.tensor(4)
        k = s.var(1, 5)
        out = s.var()
        s.le(k, h)
        s.mul(c, 4, s.var())
        s.eq(out, w)
        s.multiple(h, 2)
        values = s.solve()
        assert len(values) == len(s.variables)
        assert n.value * h.value * w.value * c.value <= 500
        assert k.value <= h.value and c.value % 4 == 0 and out.value == w.value
        assert h.value % 2 == 0


def test_dim_bounds_are_inclusive():
    """max_dim may be reached, a product may equal the element bound (and never exceeds
    it), le(a, b) accepts a == b, and multiple(a, k) keeps a within its own range."""
    reached = {max(draw_dims(PrngSource(seed), 2, max_dim=3, max_elements=9)) for seed in range(40)}
    assert reached == {1, 2, 3}
    for seed in range(40):
        dims = draw_dims(PrngSource(seed), 4, max_dim=10, max_elements=50, fixed={1: 2})
        assert dims[1] == 2 and np.prod(dims) <= 50
    # With a lower bound above 1, room is left for the dims still to draw, no more.
    assert draw_dims(PrngSource(0), 3, max_dim=10, max_elements=8, lo=2) == (2, 2, 2)
    s = DimSolver(PrngSource(0), max_dim=10, max_elements=12)
    rows, cols, a, b = s.var(3, 3), s.var(4, 4), s.var(5, 5), s.var(5, 5)
    s.prod_le([rows, cols])  # exactly 12 elements
    s.le(a, b)
    assert s.solve() == [3, 4, 5, 5]
    for seed in range(40):
        s = DimSolver(PrngSource(seed), max_dim=9)
        s.multiple(v := s.var(3, 9), 2)
        s.solve()
        assert v.value in (4, 6, 8)


def test_dim_solver_reports_impossible_problems_quickly():
    s = DimSolver(PrngSource(0), max_dim=10, max_elements=100)
    a, b = s.var(5, 10), s.var(1, 3)
    s.le(a, b)
    start = time.perf_counter()
    with pytest.raises(Unsatisfiable):
        s.solve()
    # No room for a shape: a fixed dim of 11 in 10 elements, two dims >= 2 in 3.
    for max_elements, fixed, lo in [(10, {0: 11}, 1), (3, {}, 2)]:
        with pytest.raises(Unsatisfiable):
            draw_dims(PrngSource(0), 2, max_dim=10, max_elements=max_elements, fixed=fixed, lo=lo)
    s2 = DimSolver(PrngSource(0), max_dim=10, max_elements=10)
    s2.prod_le([s2.var(4, 10), s2.var(4, 10)])
    with pytest.raises(Unsatisfiable):
        s2.solve()
    assert time.perf_counter() - start < 1.0


def test_generate_with_a_custom_source_and_config():
    config = resolve_config("small", num_ops=3, max_dim=8, max_elements=64)
    graph = generate_with(PrngSource(99), config, name="custom")
    _check_valid(graph)
    assert graph.name == "custom"
    for o in graph.model.main.operands:
        assert (int(np.prod(o.dimensions)) if o.dimensions else 1) <= 64


def test_generate_command_lists_dumps_and_reports_failed_seeds(tmp_path, capsys):
    from fuzz.cli import main as nnfuzz

    assert nnfuzz(["generate", "--seeds", "3:6", "--dump", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines()[:3]] == ["3", "4", "5"]
    assert "3 graphs generated, 0 failed" in out
    specs = sorted(tmp_path.glob("*.mod.py"))
    assert len(specs) == 3 and all(load_spec(p) for p in specs)
    # CONV_2D has no primary input of rank 1: each seed fails, on stderr, exit 1.
    assert (
        nnfuzz(["generate", "--seeds", "0:2", "--op", "CONV_2D", "--rank", "1", "--coverage"]) == 1
    )
    captured = capsys.readouterr()
    assert captured.err.count("no operation could be generated") == 2
    assert "0 graphs generated, 2 failed" in captured.err


@pytest.mark.parametrize(
    "act, lo, hi, bounds",
    [
        (0, -3.0, 8.0, (-3.0, 8.0)),  # none
        (1, -3.0, 8.0, (0.0, 8.0)),  # RELU
        (1, -3.0, -1.0, (0.0, 0.0)),
        (2, -3.0, 8.0, (-1.0, 1.0)),  # RELU1
        (2, -0.5, 0.25, (-0.5, 0.25)),
        (3, -3.0, 8.0, (0.0, 6.0)),  # RELU6
        (3, 7.0, 8.0, (6.0, 6.0)),
    ],
)
def test_fused_activations_bound_the_output_values(act, lo, hi, bounds):
    from randomgraph.generator.core import OpGen

    assert OpGen.activation_bounds(act, lo, hi) == bounds


def test_a_tensor_may_hold_max_elements_and_an_output_no_fewer_than_one():
    from randomgraph.generator.core import Reject, Tensor

    g = _opgen(O.ADD)
    limit = g.config.max_elements
    assert g.fresh(T.TENSOR_FLOAT32, (limit,)).elements == limit
    with pytest.raises(Reject, match="element bound"):
        g.fresh(T.TENSOR_FLOAT32, (limit + 1,))
    g.gen.finish(g, [], [Tensor(T.TENSOR_FLOAT32, (limit,), lo=0.0, hi=1.0)])
    for dims in [(limit + 1,), (0, 3)]:
        with pytest.raises(Reject, match="element bound"):
            g.gen.finish(g, [], [Tensor(T.TENSOR_FLOAT32, dims, lo=0.0, hi=1.0)])


@pytest.mark.parametrize("min_ops", [2, 3, 4])
def test_the_simplest_choices_give_the_newest_version_and_min_ops_operations(min_ops):
    # Versions are offered newest first, so choice 0 allows every operation; a variable
    # operation count stops at the first "no more" only once min_ops are made.
    assert generate_with(ReplaySource([]), resolve_config("small")).version == HalVersion.V1_3
    config = resolve_config("small", num_ops=5, min_ops=min_ops, sweep=False)
    graph = generate_with(ReplaySource([]), config)
    assert len(graph.test_model.main.operations) == min_ops


def test_each_operation_and_data_type_pair_is_filed_under_its_lowest_version():
    from randomgraph.generator.core import Generator, signature_key

    pairs = Generator(resolve_config("single"), PrngSource(0)).operation_pairs()
    for op, key, version in pairs:
        if key is None:  # IF/WHILE: one entry, HAL 1.3
            assert version == HalVersion.V1_3
            continue
        sigs = [s for s in REGISTRY[op].signatures if signature_key(s) == key]
        assert version == min(s.version for s in sigs), (O(op).name, key)
