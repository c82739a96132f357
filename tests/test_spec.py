"""Spec files: expansion rules, loader errors, dump/load round trip, the runner and CLI."""

from __future__ import annotations

import json
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver.builder import ModelBuilder
from driver.device import ReferenceDevice
from driver.hal.types import HalVersion, OperandLifeTime, OperandType, OperationType, OutputShape
from driver.testing import traced_peak
from driver.validation import MAX_OPERAND_BYTES, UINT32_MAX
from fuzz.cli import main as cli_main
from randomgraph.spec import dsl
from randomgraph.spec.dsl import SpecError, UniqueNames
from randomgraph.spec.dumper import dump_spec
from randomgraph.spec.loader import MAX_TESTS_PER_SPEC, load_spec
from randomgraph.spec.runner import FAIL, PASS, SKIP, run_specs, run_test_model
from randomgraph.testmodel import TestModel, TestOperand, TestOperation, TestSubgraph
from tests.operations.examples import all_examples

L = OperandLifeTime
T = OperandType


def spec(tmp_path: Path, name: str, text: str, folder: str = "V1_2") -> Path:
    d = tmp_path / folder
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.mod.py"
    p.write_text(textwrap.dedent(text))
    return p


def by_name(tests):
    return {t.name: t for t in tests}


def operand(test, name, subgraph=None):
    sg = test.main if subgraph is None else test.referenced[subgraph]
    return next(o for o in sg.operands if o.name == name)


ADD_SPEC = """
    model = Model()
    a = Input("a", "TENSOR_FLOAT32", "{2}")
    b = Input("b", ("TENSOR_FLOAT32", [2]))
    out = Output("out", ("TENSOR_FLOAT32", [2]))
    model.Operation("ADD", a, b, 0).To(out)
    Example({a: [1.0, 2.0], b: [0.5, -4.0], out: [1.5, -2.0]})
"""


# --- naming and the automatic lifetime variations ---------------------------------------


def test_single_operation_gets_lifetime_variations_that_apply(tmp_path):
    tests = load_spec(spec(tmp_path, "plus", ADD_SPEC))
    # No constant tensor, so all_tensors_as_inputs cannot apply and is skipped silently.
    assert [t.name for t in tests] == ["plus", "plus_all_inputs_as_internal"]
    base, internal = tests
    assert [o.name for o in base.main.operands] == ["a", "b", "param", "out"]
    assert operand(base, "param").lifetime == L.CONSTANT_COPY and operand(base, "param").data == [0]
    assert base.main.input_indexes == [0, 1] and base.main.output_indexes == [3]
    # Each compatible input is fed through "x_new + dummy(zero point)" and becomes internal.
    assert [o.lifetime for o in internal.main.operands[:2]] == [L.TEMPORARY_VARIABLE] * 2
    names = [o.name for o in internal.main.operands]
    assert names[4:] == ["a_new", "dummy", "param1", "b_new", "dummy1", "param2"]
    assert [op.type for op in internal.main.operations] == [OperationType.ADD] * 3
    # Topological order: the two feeding ADDs come before the original one.
    assert internal.main.operations[2].inputs == [0, 1, 2]
    assert operand(internal, "a_new").data == [1.0, 2.0]


def test_constant_tensors_become_inputs_in_the_all_tensors_variation(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{2}")
        w = Parameter("w", "TENSOR_FLOAT32", "{2}", [3.0, 4.0])
        out = Output("out", "TENSOR_FLOAT32", "{2}")
        model.Operation("MUL", a, w, 0).To(out)
        Example({a: [1.0, 2.0], out: [3.0, 8.0]})
    """
    tests = by_name(load_spec(spec(tmp_path, "times", text)))
    assert set(tests) == {
        "times",
        "times_all_inputs_as_internal",
        "times_all_tensors_as_inputs",
        "times_all_tensors_as_inputs_all_inputs_as_internal",
    }
    t = tests["times_all_tensors_as_inputs"]
    assert operand(t, "w").lifetime == L.SUBGRAPH_INPUT and t.main.input_indexes == [0, 1]
    assert operand(t, "w").data == [3.0, 4.0]


def test_repeated_examples_get_numbered_names(tmp_path):
    text = (
        ADD_SPEC
        + """
    Example({a: [0.0, 0.0], b: [1.0, 1.0], out: [1.0, 1.0]})
    """
    )
    names = [t.name for t in load_spec(spec(tmp_path, "plus", text))]
    assert names == [
        "plus",
        "plus_all_inputs_as_internal",
        "plus_2",
        "plus_all_inputs_as_internal_2",
    ]


def test_model_and_example_names_join_the_test_name(tmp_path):
    text = """
        model = Model("small")
        a = Input("a", "TENSOR_FLOAT32", "{1}")
        out = Output("out", "TENSOR_FLOAT32", "{1}")
        model.Operation("RELU", a).To(out)
        Example({a: [-1.0], out: [0.0]}, name="neg").DisableLifeTimeVariation()
    """
    (t,) = load_spec(spec(tmp_path, "act", text))
    assert t.name == "act_small_neg" and t.main.name == "small"


def test_string_type_syntax_with_scale_and_zero_point(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_QUANT8_ASYMM", "{1, 2}, 0.5f, 127")
        out = Output("out", "TENSOR_QUANT8_ASYMM", "{1, 2}, 0.5f, 127")
        model.Operation("RELU", a).To(out)
        Example({a: [100, 200], out: [127, 200]}).DisableLifeTimeVariation()
    """
    (t,) = load_spec(spec(tmp_path, "q", text))
    a = operand(t, "a")
    assert (a.type, a.dimensions, a.scale, a.zero_point) == (
        T.TENSOR_QUANT8_ASYMM,
        [1, 2],
        0.5,
        127,
    )


@pytest.mark.parametrize(
    ("shape", "parsed"),
    [
        ("{1, 2}, 0.5f, 127", ([1, 2], "0.5", "127")),
        ("{2}, 0.5f", ([2], "0.5", "0")),  # one number: the scale, 'f' or not
        ("{2}, 0.25", ([2], "0.25", "0")),
        ("{2, 3}", ([2, 3], "0", "0")),
        ("{}", ([], "0", "0")),
    ],
)
def test_the_string_type_form_reads_dims_scale_and_zero_point(shape, parsed):
    assert dsl.Type.GetParsedShape(shape) == parsed


# --- variations ---------------------------------------------------------------------------


def test_relaxed_and_float16_variations(tmp_path):
    text = (
        ADD_SPEC
        + """
    Example.examples = None  # specs may poke at names; harmless
    """
    )
    text = ADD_SPEC.replace(
        "Example({a: [1.0, 2.0], b: [0.5, -4.0], out: [1.5, -2.0]})",
        'Example({a: [1.0, 2.0], b: [0.5, -4.0], out: [1.5, -2.0]}).AddVariations("relaxed", "float16").DisableLifeTimeVariation()',
    )
    tests = by_name(load_spec(spec(tmp_path, "plus", text)))
    assert list(tests) == ["plus", "plus_relaxed", "plus_float16"]
    assert not tests["plus"].is_relaxed and tests["plus_relaxed"].is_relaxed
    assert tests["plus"].min_supported_version == HalVersion.V1_2  # the folder's version
    assert tests["plus_relaxed"].min_supported_version is None  # relaxed: UNKNOWN
    f16 = tests["plus_float16"]
    assert [o.type for o in f16.main.operands] == [
        T.TENSOR_FLOAT16,
        T.TENSOR_FLOAT16,
        T.INT32,
        T.TENSOR_FLOAT16,
    ]
    assert operand(f16, "out").data == [1.5, -2.0]


def test_data_type_converter_quantizes_values_half_to_even(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{4}")
        out = Output("out", "TENSOR_FLOAT32", "{4}")
        model.Operation("RELU", a).To(out)
        quant8 = DataTypeConverter().Identify({
            a: ("TENSOR_QUANT8_ASYMM", 0.5, 128),
            out: ("TENSOR_QUANT8_ASYMM", 0.5, 128),
        })
        Example({a: [0.25, 0.75, -100.0, 100.0], out: [0.25, 0.75, 0.0, 100.0]}).AddVariations(quant8).DisableLifeTimeVariation()
    """
    tests = by_name(load_spec(spec(tmp_path, "r", text)))
    assert list(tests) == ["r", "r_quant8"]
    q = tests["r_quant8"]
    # 0.25/0.5 = 0.5 -> 0 (half to even) + 128; 0.75/0.5 = 1.5 -> 2; -200 + 128 saturates
    # at 0 and 200 + 128 at 255.
    assert operand(q, "a").data == [128, 130, 0, 255]
    assert operand(q, "a").type == T.TENSOR_QUANT8_ASYMM and operand(q, "a").scale == 0.5
    assert operand(q, "out").data == [128, 130, 128, 255]


def test_nchw_variation_transposes_operands_and_sets_the_layout(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{1, 2, 3, 2}")
        out = Output("out", "TENSOR_FLOAT32", "{1, 2, 3, 2}")
        layout = BoolScalar("layout", False)
        model.Operation("SPACE_TO_DEPTH", a, 1, layout).To(out)
        vals = list(range(12))
        Example({a: vals, out: vals}).AddNchw(a, out, layout).DisableLifeTimeVariation()
    """
    tests = by_name(load_spec(spec(tmp_path, "s2d", text)))
    assert list(tests) == ["s2d_nhwc", "s2d_nchw"]
    nchw = tests["s2d_nchw"]
    assert operand(nchw, "a").dimensions == [1, 2, 2, 3]
    expected = np.arange(12.0).reshape(1, 2, 3, 2).transpose(0, 3, 1, 2).reshape(-1).tolist()
    assert operand(nchw, "a").data == expected
    assert operand(nchw, "layout").data == [True]
    assert operand(tests["s2d_nhwc"], "layout").data == [False]


def test_activation_variations_clamp_expected_outputs(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{4}")
        b = Input("b", "TENSOR_FLOAT32", "{4}")
        act = Int32Scalar("act", 0)
        out = Output("out", "TENSOR_FLOAT32", "{4}")
        model.Operation("ADD", a, b, act).To(out)
        Example({a: [-3.0, -0.5, 0.5, 8.0], b: [0.0] * 4, out: [-3.0, -0.5, 0.5, 8.0]}).AddAllActivations(out, act).DisableLifeTimeVariation()
    """
    tests = by_name(load_spec(spec(tmp_path, "sum", text)))
    assert list(tests) == ["sum_none", "sum_relu", "sum_relu1", "sum_relu6"]
    assert operand(tests["sum_relu"], "out").data == [0.0, 0.0, 0.5, 8.0]
    assert operand(tests["sum_relu1"], "out").data == [-1.0, -0.5, 0.5, 1.0]
    assert operand(tests["sum_relu6"], "out").data == [0.0, 0.0, 0.5, 6.0]
    assert operand(tests["sum_relu6"], "act").data == [3]


def test_axis_variations_move_the_axis_and_name_it(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{2, 3}")
        out = Output("out", "TENSOR_FLOAT32", "{2, 3}")
        axis = Int32Scalar("axis", -1)
        model.Operation("SOFTMAX", a, 1.0, axis).To(out)
        Example({a: [0.0] * 6, out: [1 / 3] * 6}).AddAllAxis(a, out, axis).DisableLifeTimeVariation()
    """
    tests = by_name(load_spec(spec(tmp_path, "sm", text)))
    assert list(tests) == [
        "sm_dim2_axis0_neg",
        "sm_dim2_axis1_neg",
        "sm_dim2_axis0",
        "sm_dim2_axis1",
    ]
    t = tests["sm_dim2_axis0"]
    assert operand(t, "a").dimensions == [3, 2] and operand(t, "axis").data == [0]
    assert operand(tests["sm_dim2_axis1_neg"], "axis").data == [-1]


def test_dims_variations_drop_leading_axes(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{2, 2, 3}")
        out = Output("out", "TENSOR_FLOAT32", "{2, 2, 3}")
        axis = Int32Scalar("axis", 2)
        model.Operation("SOFTMAX", a, 1.0, axis).To(out)
        vals = [float(i) for i in range(12)]
        Example({a: vals, out: vals}).AddAllDims(a, out, axis).DisableLifeTimeVariation()
    """
    tests = by_name(load_spec(spec(tmp_path, "sm", text)))
    assert list(tests) == ["sm_dim3_axis2", "sm_dim2_axis1", "sm_dim1_axis0"]
    t = tests["sm_dim1_axis0"]
    assert operand(t, "a").dimensions == [3] and operand(t, "a").data == [0.0, 1.0, 2.0]
    assert operand(t, "axis").data == [0]


def test_expect_failure_multinomial_and_versions(tmp_path):
    text = """
        model = Model().IntroducedIn("V1_0")
        a = Input("a", "TENSOR_FLOAT32", "{1}")
        out = Output("out", "TENSOR_FLOAT32", "{1}")
        model.Operation("RELU", a).To(out)
        Example({a: [1.0], out: [1.0]}).ExpectFailure()
        Example({a: [2.0], out: [2.0]}, name="tol").WithMultinomialDistributionTolerance(0.1)
        Example.SetVersion("V1_3", "v_tol")
    """
    tests = by_name(load_spec(spec(tmp_path, "v", text, folder="V1_2")))
    assert tests["v"].expect_failure and tests["v"].min_supported_version == HalVersion.V1_0
    # A multinomial tolerance turns the lifetime variations off.
    assert "v_tol_all_inputs_as_internal" not in tests
    assert tests["v_tol"].multinomial_tolerance == 0.1
    assert tests["v_tol"].min_supported_version == HalVersion.V1_3


def test_should_never_be_internal_and_outputs_as_internal(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{2}").ShouldNeverBeInternal()
        b = Input("b", "TENSOR_FLOAT32", "{2}")
        out = Output("out", "TENSOR_FLOAT32", "{2}")
        model.Operation("ADD", a, b, 0).To(out)
        Example({a: [1.0, 2.0], b: [1.0, 1.0], out: [2.0, 3.0]}).AddVariations(AllOutputsAsInternalCoverter())
    """
    tests = by_name(load_spec(spec(tmp_path, "x", text)))
    internal = tests["x_all_inputs_as_internal"]
    assert operand(internal, "a").lifetime == L.SUBGRAPH_INPUT  # never internal
    assert operand(internal, "b").lifetime == L.TEMPORARY_VARIABLE
    outs = tests["x_all_outputs_as_internal"]
    assert operand(outs, "out").lifetime == L.TEMPORARY_VARIABLE
    assert operand(outs, "out_new").lifetime == L.SUBGRAPH_OUTPUT and operand(
        outs, "out_new"
    ).data == [2.0, 3.0]


IF_SPEC = """
    def branch(name, value):
        m = Model(name)
        x = Input("x", "TENSOR_FLOAT32", "{2}")
        y = Output("y", "TENSOR_FLOAT32", "{2}")
        m.Operation("ADD", x, [value, value], 0).To(y)
        return m

    then_model = branch("then", 1.0)
    else_model = branch("else", -1.0)
    cond = Input("cond", "TENSOR_BOOL8", "{1}")
    x = Input("x", "TENSOR_FLOAT32", "{2}")
    y = Output("y", "TENSOR_FLOAT32", "{2}")
    model = Model().Operation("IF", cond, then_model, else_model, x).To(y)
    Example({cond: [True], x: [1.0, 2.0], y: [2.0, 3.0]}, name="true")
    Example({cond: [False], x: [1.0, 2.0], y: [0.0, 1.0]}, name="false")
"""


def test_control_flow_spec_with_referenced_models(tmp_path):
    tests = by_name(load_spec(spec(tmp_path, "if_simple", IF_SPEC, folder="V1_3")))
    # One operation, so the lifetime variations apply (x is compatible with ADD; the
    # BOOL8 condition is not).
    assert list(tests) == [
        "if_simple_true",
        "if_simple_true_all_inputs_as_internal",
        "if_simple_false",
        "if_simple_false_all_inputs_as_internal",
    ]
    t = tests["if_simple_true"]
    assert [sg.name for sg in t.referenced] == ["then", "else"]
    subgraph_operands = [o for o in t.main.operands if o.lifetime == L.SUBGRAPH]
    assert [o.data for o in subgraph_operands] == [[0], [1]]
    # Operand names stay unique across the whole spec, as Android's generator keeps them.
    assert [o.name for o in t.main.operands] == ["cond", "param4", "param5", "x2", "y2"]
    assert t.referenced[0].input_indexes == [0] and t.referenced[0].output_indexes == [3]


# --- loader errors name file and line ---------------------------------------------------


def _abs_spec(
    example: str,
    type_text: str = '"TENSOR_FLOAT32", "{2}"',
    to: str = "o",
    op: str = '"ABS", i',
) -> str:
    """A one-operation spec: the model on lines 1-4, ``example`` on line 5."""
    return (
        f"model = Model()\ni = Input('i', {type_text})\no = Output('o', {type_text})\n"
        f"model.Operation({op}).To({to})\n{example}\n"
    )


OK_EXAMPLE = "Example({i: [1.0, 2.0], o: [1.0, 2.0]})"
INT32 = '"TENSOR_INT32", "{2}"'

# (spec text, line, what the message says). Every failure while loading or expanding a
# spec is a SpecError naming file and line: the Example's when its values are wrong.
LOADER_ERRORS = [
    ("model = Model()\nx = (\n", 2, "syntax error"),
    (_abs_spec(OK_EXAMPLE, op='"NO_SUCH_OP", i'), 4, "unknown operation 'NO_SUCH_OP'"),
    (
        _abs_spec("Example({i: [1.0, 2.0, 3.0], o: [1.0, 2.0]})"),
        5,  # the Example's line: the values are its fault, not the operand's
        "Example: operand i (TENSOR_FLOAT32 [2]) needs 2 values, got 3",
    ),
    (
        _abs_spec(f"{OK_EXAMPLE}\nExample({{i: [1.0], o: [1.0, 2.0]}}, name='short')"),
        6,
        "Example 'short': operand i (TENSOR_FLOAT32 [2]) needs 2 values, got 1",
    ),
    ("model = Model()\nundefined_name + 1\n", 2, "NameError"),
    (
        _abs_spec(OK_EXAMPLE, '"TENSOR_FLOAT33", "{2}"'),
        2,
        "operand i: unknown type 'TENSOR_FLOAT33'",
    ),
    # Example values that are not numbers of the operand's type.
    (
        _abs_spec("Example({i: ['a', 'b'], o: [1.0, 2.0]})"),
        5,
        "Example: operand i (TENSOR_FLOAT32): value 'a' is not a number",
    ),
    (_abs_spec("Example({i: [None, 1.0], o: [1.0, 2.0]})"), 5, "value None is not a number"),
    (_abs_spec("Example({i: 'ab', o: [1.0, 2.0]})"), 5, "value 'ab' is not a number"),
    (
        _abs_spec("Example({i: [[1.0, 2.0]], o: [1.0, 2.0]})"),
        5,
        "value [1.0, 2.0] is not a number",
    ),
    (
        _abs_spec("Example({i: [float('nan'), 1], o: [1, 2]})", INT32),
        5,
        "operand i (TENSOR_INT32): value nan is not an integer",
    ),
    (_abs_spec("Example({i: [1.5, 1], o: [1, 2]})", INT32), 5, "value 1.5 is not an integer"),
    (
        _abs_spec("Example({i: [2**31, 1], o: [1, 2]})", INT32),
        5,
        "value 2147483648 is out of range [-2147483648, 2147483647]",
    ),
    (_abs_spec("Example({i: [10**30, 1], o: [1, 2]})", INT32), 5, "is out of range"),
    (
        _abs_spec("Example({i: [300, 1], o: [1, 2]})", '"TENSOR_QUANT8_ASYMM", "{2}, 0.5f, 0"'),
        5,
        "operand i (TENSOR_QUANT8_ASYMM): value 300 is out of range [0, 255]",
    ),
    (
        _abs_spec("Example({i: ['False', 0], o: [True, True]})", '"TENSOR_BOOL8", "{2}"'),
        5,
        "operand i (TENSOR_BOOL8): value 'False' is not a bool or a number",
    ),
    (
        "model = Model()\ni = Input('i', 'TENSOR_FLOAT32', '{2}')\n"
        "p = Parameter('p', 'TENSOR_INT32', '{2}', [1, 2**40])\n"
        "o = Output('o', 'TENSOR_FLOAT32', '{2}')\nmodel.Operation('ADD', i, i, p).To(o)\n"
        "Example({i: [1.0, 2.0], o: [1.0, 2.0]})\n",
        3,  # a constant's value: the Parameter's line
        "operand p (TENSOR_INT32): value 1099511627776 is out of range",
    ),
    # Malformed Example calls and DSL calls: refused where they are made.
    (_abs_spec("Example(({i: [1.0, 2.0]},))"), 5, "a pair feed must be (inputs, outputs)"),
    (_abs_spec(OK_EXAMPLE[:-1] + ", name=['x'])"), 5, "Example: the name must be a string"),
    (_abs_spec(OK_EXAMPLE[:-1] + ", model=5)"), 5, "Example: model= must be a Model, got 5"),
    (
        _abs_spec(OK_EXAMPLE + ".WithMultinomialDistributionTolerance('x')"),
        5,
        "the tolerance must be a finite number >= 0, got 'x'",
    ),
    (_abs_spec(OK_EXAMPLE + ".AddVariations(())"), 5, "() is not a known variation"),
    (
        _abs_spec(OK_EXAMPLE + ".AddVariations(ActivationConverter(5))"),
        5,
        "ActivationConverter: unknown activation 5 (one of none, relu, relu1, relu6)",
    ),
    (
        _abs_spec(OK_EXAMPLE + ".AddVariations(RelaxedModeConverter(5))"),
        5,
        "RelaxedModeConverter: isRelaxed must be a bool or 'relaxed', got 5",
    ),
    (
        _abs_spec(OK_EXAMPLE + ".AddVariations(DataLayoutConverter(5))"),
        5,
        "DataLayoutConverter: unknown layout 5 (nchw or nhwc)",
    ),
    (
        _abs_spec(OK_EXAMPLE + ".AddVariations(DataTypeConverter().Identify({'i': 'float16'}))"),
        5,
        "DataTypeConverter.Identify(): 'i' is not an operand",
    ),
    (
        _abs_spec(OK_EXAMPLE + ".AddVariations(DataTypeConverter().Identify({o: 7}))"),
        5,
        "Example: applying variations ['float32', '', '']: DataTypeConverter: the target of o",
    ),
    (
        _abs_spec(
            "x = Input('x', 'TENSOR_FLOAT32', '{2}')\n"
            + OK_EXAMPLE
            + ".AddVariations(DataTypeConverter().Identify({x: 'TENSOR_FLOAT16'}))"
        ),
        6,
        "Example: applying variations ['float16', '', '']: Input(x) is not an operand of the",
    ),
    (_abs_spec(OK_EXAMPLE, to="5"), 4, "To(): 5 is not an operand"),
    (
        _abs_spec(OK_EXAMPLE, op="['ABS'], i"),
        4,
        "Operation: the operation must be named by a string like 'ADD', got ['ABS']",
    ),
    ("model = Model(5)\n", 1, "Model: the name must be a string, got 5"),
    (
        "model = Model()\ni = Input(5, 'TENSOR_FLOAT32', '{2}')\n",
        2,
        "Input: the operand name must be a string, got 5",
    ),
    (
        "model = Model()\ni = Input('i', 'TENSOR_FLOAT32', '{2}')\n"
        "o = Output('i', 'TENSOR_FLOAT32', '{2}', skipRenaming=True)\n"
        "model.Operation('ABS', i).To(o)\n",
        4,
        "two operands are named 'i': Input (line 2) and Output (line 3)",
    ),
    # Types the test model could not hold.
    (
        _abs_spec(OK_EXAMPLE, '"TENSOR_FLOAT32", "{-1, -1}"'),
        2,
        "operand i: dimension -1 of [-1, -1] is out of range [0, 4294967295]",
    ),
    (
        _abs_spec(OK_EXAMPLE, '"TENSOR_FLOAT32", "{0, 4611686018427387904}"'),
        2,
        "dimension 4611686018427387904 of [0, 4611686018427387904] is out of range",
    ),
    (
        _abs_spec(OK_EXAMPLE, '"TENSOR_FLOAT32", "{65536, 65536}"'),
        2,
        "TENSOR_FLOAT32 [65536, 65536] is 17179869184 bytes; an operand may have at most",
    ),
    (
        _abs_spec(OK_EXAMPLE, '"TENSOR_FLOAT32", "{1e9}"'),
        2,
        "operand i: bad type 'TENSOR_FLOAT32', '{1e9}': invalid literal for int()",
    ),
    (
        _abs_spec(OK_EXAMPLE, '("TENSOR_QUANT8_ASYMM", [2], "abc", 0)'),
        2,
        "operand i: bad type ('TENSOR_QUANT8_ASYMM', [2], 'abc', 0): could not convert",
    ),
    (
        _abs_spec(OK_EXAMPLE, '"TENSOR_FLOAT32", "{2}", extraParams=[1, 2]'),
        2,
        "operand i: extraParams must be a SymmPerChannelQuantParams, got [1, 2]",
    ),
    (
        "p = SymmPerChannelQuantParams(channelDim='a', scales='xy')\n",
        1,
        "SymmPerChannelQuantParams: channelDim must be an integer, got 'a'",
    ),
    (
        "p = SymmPerChannelQuantParams(channelDim=0, scales='xy')\n",
        1,
        "SymmPerChannelQuantParams: scales must be a list of positive numbers, got 'xy'",
    ),
    (
        "w = Parameter('w', 'TENSOR_QUANT8_SYMM_PER_CHANNEL', '{2, 2}', [1, 2, 3, 4],\n"
        "              extraParams=SymmPerChannelQuantParams(channelDim=9, scales=[0.5]))\n",
        1,
        "operand w: channelDim 9 is not an axis of TENSOR_QUANT8_SYMM_PER_CHANNEL [2, 2]",
    ),
    (
        "w = Parameter('w', 'TENSOR_QUANT8_SYMM_PER_CHANNEL', '{2, 2}', [1, 2, 3, 4],\n"
        "              extraParams=SymmPerChannelQuantParams(channelDim=2, scales=[0.5]))\n",
        1,
        "operand w: channelDim 2 is not an axis of TENSOR_QUANT8_SYMM_PER_CHANNEL [2, 2]",
    ),
    (
        "w = Parameter('w', 'TENSOR_QUANT8_SYMM_PER_CHANNEL', '{2, 2}', [1, 2, 3, 4],\n"
        "              extraParams=SymmPerChannelQuantParams(channelDim=0, scales=[0.5]))\n",
        1,
        "operand w: 1 per-channel scales for dimension 0 of size 2",
    ),
    # Graphs a model cannot have: named where the spec builds them.
    (
        "model = Model()\nt = Internal('t', 'TENSOR_FLOAT32', '{2}')\n"
        "u = Internal('u', 'TENSOR_FLOAT32', '{2}')\nmodel.Operation('ABS', u).To(t)\n"
        "model.Operation('ABS', t).To(u)\nExample({})\n",
        4,
        "cycle in the graph",
    ),
    (
        "m = Model('branch')\nx = Input('x', 'TENSOR_FLOAT32', '{2}')\n"
        "y = Input('y', 'TENSOR_FLOAT32', '{2}')\no = Output('o', 'TENSOR_FLOAT32', '{2}')\n"
        "m.Operation('ADD', x, y, 0).To(o)\nm.IdentifyInputs(y, x)\n",
        6,
        "IdentifyInputs: model inputs are [Input(x), Input(y)], not [Input(y), Input(x)]",
    ),
    (
        "model = Model()\ni = Input('i', 'TENSOR_FLOAT32', '{2}')\n"
        "o = Output('o', 'TENSOR_FLOAT32', '{2}')\nmodel.Operation('ABS', i).To(o)\n"
        "Example({i: [1.0, 2.0], o: [1.0, 2.0]}).AddVariations('quant8')\n",
        5,
        "DataTypeConverter('quant8') needs scale and zeroPoint",
    ),
    # Spec code that ends the process or breaks the compiler.
    ("import sys\nsys.exit(0)\n", 2, "the spec called sys.exit(0)"),
    ("raise SystemExit('bye')\n", 1, "the spec called sys.exit('bye')"),
    ("x = " + "+".join(["1"] * 5000) + "\n", 1, "too deeply nested for Python's compiler"),
    ("x = " + "-" * 20000 + "1\n", 1, "too deeply nested for Python's compiler"),
]


@pytest.mark.parametrize(("body", "line", "message"), LOADER_ERRORS)
def test_loader_errors_give_file_and_line(tmp_path, body, line, message):
    p = tmp_path / "bad.mod.py"
    p.write_text(body)
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert message in str(info.value)
    assert info.value.line == line and str(info.value).startswith(f"{p}:{line}:")
    assert "\n" not in str(info.value)


@pytest.mark.timeout(30)
def test_variation_groups_that_multiply_past_the_limit_are_refused(tmp_path):
    # 2**30 combinations used to be made one by one (a hang); the count is known upfront.
    p = tmp_path / "many.mod.py"
    p.write_text(_abs_spec("ex = " + OK_EXAMPLE + "\nfor _ in range(30):\n    ex.AddRelaxed()"))
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert info.value.line == 5 and "expands to up to 4294967296 test models" in str(info.value)
    assert f"more than the {MAX_TESTS_PER_SPEC} a spec may have" in str(info.value)
    assert 1000 <= MAX_TESTS_PER_SPEC <= 100_000  # "some thousands": Android's specs fit


def test_the_test_model_limit_counts_every_example_and_is_inclusive(tmp_path, monkeypatch):
    from randomgraph.spec import loader

    p = tmp_path / "two.mod.py"  # two Examples of two test models each
    twice = OK_EXAMPLE + ".AddRelaxed().DisableLifeTimeVariation()"
    p.write_text(_abs_spec(twice + "\n" + twice))
    monkeypatch.setattr(loader, "MAX_TESTS_PER_SPEC", 4)
    assert len(load_spec(p)) == 4
    monkeypatch.setattr(loader, "MAX_TESTS_PER_SPEC", 3)
    with pytest.raises(SpecError, match="expands to up to 4 test models, more than the 3"):
        load_spec(p)


def test_a_spec_of_exactly_the_largest_size_is_read(tmp_path, monkeypatch):
    from randomgraph.spec import loader

    p = tmp_path / "abs.mod.py"
    p.write_text(_abs_spec(OK_EXAMPLE))
    monkeypatch.setattr(loader, "MAX_SPEC_BYTES", p.stat().st_size)
    assert load_spec(p)
    monkeypatch.setattr(loader, "MAX_SPEC_BYTES", p.stat().st_size - 1)
    with pytest.raises(SpecError, match="larger than a spec file may be"):
        load_spec(p)


def test_the_largest_dimension_and_operand_are_declarable(tmp_path):
    # Both bounds are inclusive: a TENSOR_BOOL8 [UINT32_MAX] has 4294967295 bytes, as
    # many as an operand may have.
    assert MAX_OPERAND_BYTES == UINT32_MAX
    p = tmp_path / "big.mod.py"
    p.write_text(f"x = Input('x', ('TENSOR_BOOL8', [{UINT32_MAX}]))\n")
    assert load_spec(p) == []  # declared without an error (and no Example)


@pytest.mark.parametrize("hide", [False, True])
def test_hidden_per_channel_parameters_are_left_out_of_the_test_model(tmp_path, hide):
    # Android's hide=True: the operand keeps its scales in the spec, the test model has
    # none (validation specs check that a driver refuses such an operand).
    text = f"""
        model = Model()
        i = Input("i", "TENSOR_FLOAT32", "{{2}}")
        params = SymmPerChannelQuantParams(channelDim=0, scales=[0.5, 0.25], hide={hide})
        w = Parameter("w", "TENSOR_QUANT8_SYMM_PER_CHANNEL", "{{2}}", [1, 2], extraParams=params)
        o = Output("o", "TENSOR_FLOAT32", "{{2}}")
        model.Operation("ADD", i, w, 0).To(o)
        Example({{i: [1.0, 2.0], o: [1.0, 2.0]}}).DisableLifeTimeVariation()
    """
    (t,) = load_spec(spec(tmp_path, "hidden", text))
    w = operand(t, "w").channel_quant
    assert (None if w is None else (w.channel_dim, tuple(w.scales))) == (
        None if hide else (0, (0.5, 0.25))
    )


def test_variable_and_test_names_are_unique_in_linear_time():
    class CountingSet(set):
        lookups = 0

        def __contains__(self, item):
            CountingSet.lookups += 1
            return super().__contains__(item)

    names = UniqueNames()
    assert [names.add(b) for b in ["t", "t", "t1", "t", "a", "t"]] == [
        "t",
        "t1",
        "t11",
        "t2",
        "a",
        "t3",
    ]  # Android's NamedObject renaming
    names.taken = CountingSet(names.taken)
    for _ in range(5000):
        names.add("t")
    assert CountingSet.lookups < 3 * 5000  # was one lookup per earlier "t": quadratic
    tests = UniqueNames(sep="_", start=1)
    assert [tests.add(b) for b in ["x", "x", "x_2", "x"]] == ["x", "x_2", "x_2_2", "x_3"]


def test_a_long_chain_loads_in_linear_time(tmp_path, monkeypatch):
    # Operands are identified by name; finding one scanned the model's list (a chain of
    # 4000 operations compared operand names 32 million times).
    calls = []
    real_eq = dsl.Operand.__eq__
    monkeypatch.setattr(dsl.Operand, "__eq__", lambda a, b: calls.append(1) or real_eq(a, b))
    n = 2000
    p = tmp_path / "chain.mod.py"
    p.write_text(
        "model = Model()\nx = Input('x', 'TENSOR_FLOAT32', '{1}')\nprev = x\n"
        f"for k in range({n}):\n"
        f"    t = Internal('t', 'TENSOR_FLOAT32', '{{1}}') if k < {n - 1} "
        "else Output('y', 'TENSOR_FLOAT32', '{1}')\n"
        "    model.Operation('ABS', prev).To(t)\n    prev = t\n"
        "Example({x: [-1.0], prev: [1.0]})\n"
    )
    (test,) = load_spec(p)
    assert len(test.main.operations) == n
    assert len(calls) < 10 * n


def test_an_ignored_output_is_not_materialized(tmp_path):
    # Android feeds an ignored output zeros; 4096 x 4096 of them were a 128 MB list.
    p = tmp_path / "ignored.mod.py"
    p.write_text(
        "model = Model()\ni = Input('i', 'TENSOR_FLOAT32', '{2}')\n"
        "o = IgnoredOutput('o', 'TENSOR_FLOAT32', '{4096, 4096}')\n"
        "model.Operation('ABS', i).To(o)\nExample({i: [1.0, 2.0], o: []})\n"
    )
    tests, peak = traced_peak(lambda: load_spec(p))
    assert peak < 16 * 2**20
    out = operand(tests[0], "o")
    assert out.is_ignored and out.data == [] and out.array().shape == (4096, 4096)


def test_numpy_example_values_of_the_operand_size_load(tmp_path):
    # Specs compute their values with numpy (about 85% of Android's do some computing).
    p = tmp_path / "arrays.mod.py"
    p.write_text(_abs_spec("v = np.array([[1.0, 2.0]])\nExample({i: v, o: v})"))
    assert operand(load_spec(p)[0], "o").data == [1.0, 2.0]


def test_a_broadcast_example_value_is_counted_before_it_is_flattened(tmp_path):
    p = tmp_path / "bcast.mod.py"
    p.write_text(
        _abs_spec("z = np.broadcast_to(np.float32(0), (2048, 2048))\nExample({i: z, o: z})")
    )
    tracemalloc.start()
    try:
        with pytest.raises(SpecError) as info:
            load_spec(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.line == 6 and "needs 2 values, got 4194304" in str(info.value)
    assert peak < 16 * 2**20  # 4 M floats as a Python list: over 100 MB


def _nested_if_spec(depth: int) -> str:
    return (
        "cond = Input('cond', 'TENSOR_BOOL8', '{1}')\nm = Model('leaf')\n"
        "xx = Input('x', 'TENSOR_FLOAT32', '{1}')\nyy = Output('y', 'TENSOR_FLOAT32', '{1}')\n"
        "m.Operation('ABS', xx).To(yy)\n"
        f"for k in range({depth}):\n"
        "    n = Model('m%d' % k)\n"
        "    a = Input('x', 'TENSOR_FLOAT32', '{1}')\n"
        "    c = Input('c', 'TENSOR_BOOL8', '{1}')\n"
        "    b = Output('y', 'TENSOR_FLOAT32', '{1}')\n"
        "    n.Operation('IF', c, m, m, *([a] if k == 0 else [c, a])).To(b)\n"
        "    m = n\n"
        "x = Input('x', 'TENSOR_FLOAT32', '{1}')\ny = Output('y', 'TENSOR_FLOAT32', '{1}')\n"
        "model = Model().Operation('IF', cond, m, m, cond, x).To(y)\n"
        "Example({cond: [True], x: [-1.0], y: [1.0]})\n"
    )


def test_deeply_nested_subgraphs_are_copied_and_compiled_without_recursion(tmp_path):
    # copy.deepcopy and Model.Compile recursed once per level: 60 IFs deep was a
    # RecursionError (a traceback in every command). The reference runs up to 64.
    tests = load_spec(spec(tmp_path, "nested", _nested_if_spec(60), folder="V1_3"))
    assert len(tests[0].referenced) == 61
    assert run_test_model(ReferenceDevice(), tests[0]).outcome == PASS
    deeper = load_spec(spec(tmp_path, "deeper", _nested_if_spec(500), folder="V1_3"))
    assert len(deeper[0].referenced) == 501


# --- dump -> load round trip ----------------------------------------------------------------


def _normalized(test: TestModel) -> dict:
    d = test.to_json()
    for sg in [d["main"], *d["referenced"]]:
        for o in sg["operands"]:
            o.pop("name")
    return d


def _round_trip(tmp_path: Path, test: TestModel) -> TestModel:
    p = tmp_path / f"{test.name}.mod.py"
    p.write_text(dump_spec(test, results={"reference": [np.zeros(3)]}))
    (back,) = load_spec(p)
    return back


def _spec_expressible(ex) -> bool:
    """Spec examples give every main input and output its full dims (Android's format has
    no way to feed an input of unspecified shape)."""
    model, _ = ex.model()
    main = model.main
    return all(
        0 not in main.operands[i].dimensions for i in (*main.input_indexes, *main.output_indexes)
    )


@pytest.mark.parametrize(
    "ex", [e for e in all_examples() if _spec_expressible(e)], ids=lambda e: e.name
)
def test_dump_load_round_trip_of_every_example(tmp_path, ex):
    model, feeds = ex.model()
    version = None if ex.relaxed else HalVersion.V1_3  # relaxed tests have no minimum
    test = TestModel.from_hal(
        ex.name, model, feeds, ex.expected or (), min_supported_version=version
    )
    back = _round_trip(tmp_path, test)
    assert back.name == test.name
    assert _normalized(back) == _normalized(test)


def _scalar_data(t, draw):
    return [draw(st.integers(-5, 5)) if t == T.INT32 else draw(st.booleans())]


@st.composite
def plausible_test_models(draw):
    """Structurally plausible test models (not necessarily valid for a driver): random
    types, quantization, per-channel params, lifetimes, relaxed flag, control flow."""
    from driver.hal.types import SymmPerChannelQuantParams

    tensor_types = [
        T.TENSOR_FLOAT32,
        T.TENSOR_FLOAT16,
        T.TENSOR_QUANT8_ASYMM,
        T.TENSOR_QUANT8_ASYMM_SIGNED,
        T.TENSOR_INT32,
        T.TENSOR_BOOL8,
    ]

    def tensor(name, lifetime, with_data):
        t = draw(st.sampled_from([*tensor_types, T.TENSOR_QUANT8_SYMM_PER_CHANNEL]))
        dims = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
        n = int(np.prod(dims))
        scale, zp, cq = 0.0, 0, None
        if t in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED):
            scale = draw(st.sampled_from([0.5, 0.1, 1.0 / 3.0]))
            zp = draw(st.integers(0, 255) if t == T.TENSOR_QUANT8_ASYMM else st.integers(-128, 127))
        if t == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            cq = SymmPerChannelQuantParams(
                0, tuple(draw(st.lists(st.floats(0.01, 4.0), min_size=dims[0], max_size=dims[0])))
            )
        if not with_data:
            data = []
        elif t in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
            data = draw(st.lists(st.floats(-1e6, 1e6, width=32), min_size=n, max_size=n))
        elif t == T.TENSOR_BOOL8:
            data = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        else:
            lo, hi = {T.TENSOR_QUANT8_ASYMM: (0, 255), T.TENSOR_INT32: (-1000, 1000)}.get(
                t, (-128, 127)
            )
            data = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
        return TestOperand(name, t, dims, scale, zp, lifetime, channel_quant=cq, data=data)

    def subgraph(prefix, with_data, refs):
        operands = [tensor(f"{prefix}in0", L.SUBGRAPH_INPUT, with_data)]
        operations = []
        for k in range(draw(st.integers(1, 3))):
            ins = [draw(st.integers(0, len(operands) - 1))]
            if draw(st.booleans()):
                operands.append(tensor(f"{prefix}c{k}", L.CONSTANT_COPY, True))
                ins.append(len(operands) - 1)
            if draw(st.booleans()):
                operands.append(
                    TestOperand(
                        f"{prefix}p{k}",
                        T.INT32,
                        [],
                        lifetime=L.CONSTANT_COPY,
                        data=_scalar_data(T.INT32, draw),
                    )
                )
                ins.append(len(operands) - 1)
            if refs and (k == 0 or draw(st.booleans())):  # every referenced model is used
                operands.append(
                    TestOperand(
                        f"{prefix}g{k}",
                        T.SUBGRAPH,
                        [],
                        lifetime=L.SUBGRAPH,
                        data=[draw(st.integers(0, refs - 1))],
                    )
                )
                ins.append(len(operands) - 1)
            last = k == 0
            operands.append(
                tensor(
                    f"{prefix}t{k}",
                    L.SUBGRAPH_OUTPUT if last else L.TEMPORARY_VARIABLE,
                    with_data and last,
                )
            )
            operations.append(
                TestOperation(
                    draw(st.sampled_from(list(OperationType)[:102])), ins, [len(operands) - 1]
                )
            )
        sg = TestSubgraph(
            operands,
            operations,
            [i for i, o in enumerate(operands) if o.lifetime == L.SUBGRAPH_INPUT],
            [i for i, o in enumerate(operands) if o.lifetime == L.SUBGRAPH_OUTPUT],
        )
        sg.fill_consumers()
        return sg

    n_refs = draw(st.integers(0, 1))
    referenced = [subgraph(f"r{k}_", False, 0) for k in range(n_refs)]
    for k, sg in enumerate(referenced):
        sg.name = f"ref{k}"
    main = subgraph("m_", True, n_refs)
    relaxed = draw(st.booleans())
    return TestModel(
        name="rt",
        main=main,
        referenced=referenced,
        is_relaxed=relaxed,
        expect_failure=draw(st.booleans()),
        min_supported_version=None if relaxed else draw(st.sampled_from(list(HalVersion))),
    )


@settings(max_examples=60, deadline=None)
@given(test=plausible_test_models())
def test_dump_load_round_trip_property(tmp_path_factory, test):
    tmp = tmp_path_factory.mktemp("rt")
    back = _round_trip(tmp, test)
    assert _normalized(back) == _normalized(test)


@pytest.mark.parametrize("ignored, dynamic", [(False, True), (True, False)])
def test_dump_keeps_ignored_outputs_and_the_dynamic_shape_opt_out(tmp_path, ignored, dynamic):
    # A minimized failure replays what it was: an output whose values are unspecified is
    # not compared, and a test that opted out of the dynamic-shape variant stays out.
    m = ModelBuilder()
    x = m.add_input(OperandType.TENSOR_FLOAT32, (2,))
    y = m.add_output(OperandType.TENSOR_FLOAT32, (2,))
    m.add_operation(OperationType.RELU, [x], [y])
    fed = np.array([-1.0, 2.0], np.float32)
    test = TestModel.from_hal("flags", m.build(), [fed], [np.maximum(fed, 0)])
    test.main.operands[test.main.output_indexes[0]].is_ignored = ignored
    test.test_dynamic_output_shape = dynamic
    back = _round_trip(tmp_path, test)
    assert back.main.operands[back.main.output_indexes[0]].is_ignored == ignored
    assert back.test_dynamic_output_shape == dynamic


def test_dump_keeps_the_sign_of_negative_zero(tmp_path):
    # A minimized failure may hinge on -0.0 (1 / -0.0 is -inf); int() dropped its sign.
    m = ModelBuilder()
    x = m.add_input(OperandType.TENSOR_FLOAT32, (4,))
    c = m.add_constant(OperandType.TENSOR_FLOAT32, (4,), [-0.0, 0.0, -3.0, 1.5])
    y = m.add_output(OperandType.TENSOR_FLOAT32, (4,))
    m.add_operation(OperationType.ADD, [c, x, m.add_scalar(OperandType.INT32, 0)], [y])
    fed = np.array([-0.0, 1, 1, 1], np.float32)
    total = fed + np.array([-0.0, 0, -3, 1.5], np.float32)  # -0.0 + -0.0 is -0.0
    test = TestModel.from_hal("negzero", m.build(), [fed], [total])
    main = _round_trip(tmp_path, test).main
    (constant,) = [
        o
        for o in main.operands
        if o.lifetime == OperandLifeTime.CONSTANT_COPY and o.type == OperandType.TENSOR_FLOAT32
    ]
    signs = {
        "input": np.signbit(main.operands[main.input_indexes[0]].array()),
        "constant": np.signbit(constant.array()),
        "output": np.signbit(main.operands[main.output_indexes[0]].array()),
    }
    assert {k: v.tolist() for k, v in signs.items()} == {
        "input": [True, False, False, False],
        "constant": [True, False, True, False],
        "output": [True, False, True, False],
    }


def _add_test(x, c, y, *, constant: OperandLifeTime = L.CONSTANT_COPY, **fields) -> TestModel:
    """y = x + c (TENSOR_FLOAT32 [3]), built by hand: the property draws none of what the
    tests below need (pool constants, non-finite values, omitted inputs, ...)."""
    operands = [
        TestOperand("x", T.TENSOR_FLOAT32, [3], lifetime=L.SUBGRAPH_INPUT, data=list(x)),
        TestOperand("c", T.TENSOR_FLOAT32, [3], lifetime=constant, data=list(c)),
        TestOperand("act", T.INT32, [], lifetime=L.CONSTANT_COPY, data=[0]),
        TestOperand("y", T.TENSOR_FLOAT32, [3], lifetime=L.SUBGRAPH_OUTPUT, data=list(y)),
    ]
    inputs = fields.pop("inputs", [0, 1, 2])
    operands[1].name = fields.pop("name", "c")
    main = TestSubgraph(operands, [TestOperation(OperationType.ADD, inputs, [3])], [0], [3])
    main.fill_consumers()
    return TestModel("add", main, min_supported_version=HalVersion.V1_0, **fields)


INF = float("inf")
NAN = float("nan")


@pytest.mark.parametrize(
    "test",
    [
        # A driver bug in pool constants must replay as one, not as an inline constant.
        _add_test([1, 2, 3], [4, 5, 6], [5, 7, 9], constant=L.CONSTANT_REFERENCE),
        _add_test([INF, -INF, NAN], [1, 1, 1], [INF, -INF, NAN]),
        _add_test([1, 2, 3], [0, 0, 0], [1, 2, 3], multinomial_tolerance=0.025),
        _add_test([], [1, 2, 3], [1, 2, 3]),  # an omitted input: fed no values
        # The operation names c before x: the dump must keep x as operand 0.
        _add_test([1, 2, 3], [0, 0, 0], [1, 2, 3], inputs=[1, 0, 2]),
    ],
    ids=["constant-reference", "non-finite", "multinomial", "omitted-input", "operand-order"],
)
def test_dump_load_round_trip_of_what_the_property_does_not_draw(tmp_path, test):
    assert _normalized(_round_trip(tmp_path, test)) == _normalized(test)


@pytest.mark.parametrize(
    "test",
    [
        _add_test([1, 2, 3], [0.5, 0.5, 0.5], [1.5, 2.5, 3.5], name=name)
        for name in ["model", "Example", "float", "Parameter", "in", "None"]
    ],
    ids=lambda test: test.main.operands[1].name,
)
def test_dump_keeps_operand_names_that_are_python_or_dump_names(tmp_path, test):
    # The operands' variables were their names: "in = Input(...)" is a syntax error, and
    # "model = Parameter(...)" or "float = ..." broke the lines after it.
    assert _round_trip(tmp_path, test).to_json() == test.to_json()


# --- runner and CLI ---------------------------------------------------------------------------


def test_runner_passes_fails_and_skips(tmp_path):
    good = spec(tmp_path, "good", ADD_SPEC)
    wrong = spec(tmp_path, "wrong", ADD_SPEC.replace("out: [1.5, -2.0]", "out: [1.5, -2.5]"))
    device = ReferenceDevice()
    summary = run_specs([good, wrong], device)
    outcome = {(r.name, r.dynamic): r for r in summary.results}
    assert outcome[("good", False)].outcome == PASS
    assert outcome[("good", True)].outcome == PASS  # the dynamic-output-shape run
    bad = outcome[("wrong", False)]
    assert (
        bad.outcome == FAIL
        and "output 0: 1/2 elements differ" in bad.reason
        and "-2.5" in bad.reason
    )
    partial = ReferenceDevice(support_filter=lambda m, i: False)
    r = run_specs([good], partial).results[0]
    assert r.outcome == SKIP and "does not support ADD" in r.reason


class _ReportsShapes(ReferenceDevice):
    """The reference with its reported output shapes rewritten by ``rewrite``."""

    def __init__(self, rewrite, **kw):
        super().__init__(**kw)
        self.rewrite = rewrite

    def prepare_model(self, model, *args, **kw):
        status, prepared = super().prepare_model(model, *args, **kw)
        original = prepared.execute_synchronously

        def execute(*a, **k):
            st, shapes, timing = original(*a, **k)
            return st, self.rewrite(shapes), timing

        prepared.execute_synchronously = execute
        return status, prepared


@pytest.mark.parametrize(
    "rewrite, reason",
    [
        (lambda shapes: [], "the driver reports 0 output shapes for 1 outputs"),
        (
            lambda shapes: [OutputShape((1, 2), True) for _ in shapes],
            "output 0: reported shape [1, 2], expected [2]",
        ),
    ],
    ids=["none", "wrong"],
)
def test_a_driver_must_report_the_shape_of_static_outputs_too(tmp_path, rewrite, reason):
    # The bytes are right; only the reported shape is not. From HAL 1.2 on every output's
    # shape is reported, not only the unknown ones.
    good = spec(tmp_path, "good", ADD_SPEC)
    results = run_specs([good], _ReportsShapes(rewrite)).results
    assert len(results) >= 2  # every variant, the dynamic-output one included
    assert {(r.outcome, r.reason) for r in results} == {(FAIL, reason)}
    # HAL 1.2 is where reporting starts.
    at_1_2 = run_specs([good], _ReportsShapes(rewrite, version=HalVersion.V1_2)).results
    assert len(at_1_2) >= 2 and {(r.outcome, r.reason) for r in at_1_2} == {(FAIL, reason)}
    # Before 1.2 no shapes are reported, and none are expected.
    old = _ReportsShapes(lambda shapes: [], version=HalVersion.V1_1)
    v1_0 = spec(tmp_path, "good", ADD_SPEC, folder="V1_0")
    assert {r.outcome for r in run_specs([v1_0], old).results} == {PASS}


class _Recording(ReferenceDevice):
    """The reference, noting the output dims of every model it prepares."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.output_dims: list[list[tuple]] = []

    def prepare_model(self, model, *args, **kw):
        main = model.main
        self.output_dims.append([tuple(main.operands[i].dimensions) for i in main.output_indexes])
        return super().prepare_model(model, *args, **kw)


def test_the_dynamic_output_shape_run_from_hal_1_2_leaves_output_dims_unspecified(tmp_path):
    device = _Recording(version=HalVersion.V1_2)
    results = run_specs([spec(tmp_path, "good", ADD_SPEC)], device).results
    assert [(r.name, r.dynamic, r.outcome) for r in results] == [
        ("good", False, PASS),
        ("good", True, PASS),
        ("good_all_inputs_as_internal", False, PASS),
        ("good_all_inputs_as_internal", True, PASS),
    ]
    assert device.output_dims == [[(2,)], [(0,)], [(2,)], [(0,)]]


def test_an_ignored_output_is_not_compared(tmp_path):
    # Its values are unspecified (a dump writes zeros): comparing them would fail the
    # replay of every minimized failure that has one.
    text = _abs_spec("Example({i: [1.0, -2.0], o: [0.0, 0.0]})")
    ignored = spec(tmp_path, "ignored", text.replace("o = Output(", "o = IgnoredOutput("))
    results = run_specs([ignored], ReferenceDevice()).results
    assert results and {r.outcome for r in results} == {PASS}
    compared = run_specs([spec(tmp_path, "compared", text)], ReferenceDevice()).results
    assert {r.outcome for r in compared} == {FAIL}


def test_a_relaxed_test_is_checked_with_the_float16_tolerance(tmp_path):
    # A driver may compute a relaxed model in float16; 1.501 for 1.5 is within that
    # tolerance (5 x 2**-10), not within float32's.
    text = ADD_SPEC.replace("out: [1.5, -2.0]", "out: [1.501, -2.0]")
    relaxed = text.replace("model = Model()", "model = Model().RelaxedExecution(True)")
    results = run_specs([spec(tmp_path, "relaxed", relaxed)], ReferenceDevice()).results
    assert results and {r.outcome for r in results} == {PASS}
    plain = run_specs([spec(tmp_path, "plain", text)], ReferenceDevice()).results
    assert {r.outcome for r in plain} == {FAIL}


def test_a_relaxed_test_skips_an_older_driver_that_cannot_express_it(tmp_path):
    # A relaxed test has no minimum version: it runs where its model can be expressed
    # (ABS needs HAL 1.2), and is skipped, not failed, elsewhere.
    text = _abs_spec(OK_EXAMPLE).replace(
        "model = Model()", "model = Model().RelaxedExecution(True)"
    )
    path = spec(tmp_path, "relaxed_abs", text)
    results = run_specs([path], ReferenceDevice(version=HalVersion.V1_1)).results
    assert results and {(r.outcome, r.reason) for r in results} == {
        (SKIP, "the model needs a newer HAL than 1.1")
    }
    assert {r.outcome for r in run_specs([path], ReferenceDevice()).results} == {PASS}


def test_a_differential_spec_is_judged_with_the_criteria_its_header_names(tmp_path):
    # nnfuzz random writes the set a failure was found under in the header; a replay
    # under the generated-test criteria would pass what "strict" fails (5e-6 off).
    text = textwrap.dedent(ADD_SPEC.replace("out: [1.5, -2.0]", "out: [1.500005, -2.0]"))
    header = "# found by nnfuzz random\n# nnfuzz-criteria: strict\n"
    tests = load_spec(spec(tmp_path, "strict", header + text))
    assert tests and {t.criteria for t in tests} == {"strict"}
    assert {
        r.outcome
        for r in run_specs([spec(tmp_path, "strict", header + text)], ReferenceDevice()).results
    } == {FAIL}
    assert {
        r.outcome for r in run_specs([spec(tmp_path, "generated", text)], ReferenceDevice()).results
    } == {PASS}
    unknown = spec(tmp_path, "unknown", header.replace("strict", "nope") + text)
    with pytest.raises(SpecError, match="unknown criteria set 'nope' in '# nnfuzz-criteria:'"):
        load_spec(unknown)


def test_expect_failure_passes_only_when_rejected(tmp_path):
    p = spec(
        tmp_path,
        "bad_act",
        ADD_SPEC.replace("0).To(out)", "7).To(out)").replace("Example(", "Example(").rstrip()
        + ".ExpectFailure()\n",
    )
    results = run_specs([p], ReferenceDevice()).results
    assert results and all(r.outcome == PASS for r in results)
    ok = spec(tmp_path, "ok_but_expected_to_fail", ADD_SPEC.rstrip() + ".ExpectFailure()\n")
    results = run_specs([ok], ReferenceDevice()).results
    assert results and all(r.outcome == FAIL for r in results)


def test_feature_level_driver_skips_newer_tests(tmp_path):
    p = spec(tmp_path, "plus", ADD_SPEC, folder="V1_2")
    r = run_specs([p], ReferenceDevice(version=HalVersion.V1_1)).results[0]
    assert r.outcome == SKIP and "needs HAL 1.2" in r.reason


def test_a_driver_that_raises_is_reported_not_propagated(tmp_path):
    class Exploding(ReferenceDevice):
        def prepare_model(self, *a, **k):
            raise RuntimeError("boom")

    (test, *_) = load_spec(spec(tmp_path, "plus", ADD_SPEC))
    r = run_test_model(Exploding(), test)
    assert r.outcome == FAIL and "crash: RuntimeError: boom" in r.reason


IF_PARTS = (
    "cond = Input('cond', 'TENSOR_BOOL8', '{1}')\nx = Input('x', 'TENSOR_FLOAT32', '{2}')\n"
    "y = Output('y', 'TENSOR_FLOAT32', '{2}')\n"
)
IF_EXAMPLE = "Example({cond: [True], x: [1.0, 2.0], y: [1.0, 2.0]})\n"

# (spec, what the reference's validation says). Such specs loaded and were reported as
# driver failures ("getSupportedOperations returned INVALID_ARGUMENT").
INVALID_MODELS = [
    (
        _abs_spec(OK_EXAMPLE).replace(".To(o)", ""),
        "no signature of ABS takes inputs (TENSOR_FLOAT32) and outputs ()",
    ),
    (_abs_spec(OK_EXAMPLE, op='"ADD", i'), "no signature of ADD takes inputs (TENSOR_FLOAT32)"),
    (
        _abs_spec("model.Operation('ABS', i).To(o)\n" + OK_EXAMPLE),
        "has already been written (each operand has one writer)",
    ),
    (
        IF_PARTS
        + "model = Model()\nmodel.Operation('IF', cond, model, model, x).To(y)\n"
        + IF_EXAMPLE,
        "referenced subgraphs form a cycle: subgraph 0 -> subgraph 0",
    ),
    (
        IF_PARTS
        + "e = Model('e')\nmodel = Model().Operation('IF', cond, e, e, x).To(y)\n"
        + IF_EXAMPLE,
        "then branch subgraph 0 has 0 inputs, but the IF passes 1",
    ),
]


@pytest.mark.parametrize(
    ("text", "rule"),
    INVALID_MODELS,
    ids=["no-to", "arity", "two-writers", "self-branch", "empty-branch"],
)
def test_a_model_the_reference_rejects_is_a_spec_error_not_a_driver_failure(tmp_path, text, rule):
    results = run_specs([spec(tmp_path, "invalid", text, folder="V1_3")], ReferenceDevice()).results
    assert results and all(r.outcome == FAIL for r in results)
    for r in results:
        assert r.reason.startswith("spec error: the model is invalid: "), r.reason
        assert rule in r.reason and not r.dynamic  # no second, dynamic-shape failure
    # Expected to fail: the driver must reject it, and does.
    expected = spec(tmp_path, "expected", text.rstrip() + ".ExpectFailure()\n", folder="V1_3")
    assert {r.outcome for r in run_specs([expected], ReferenceDevice()).results} == {PASS}


def test_a_test_model_that_cannot_be_built_is_a_spec_error_not_a_crash():
    (test, *_) = load_spec_text(_abs_spec(OK_EXAMPLE, INT32).replace("1.0", "1"))
    operand(test, "i").data = [2**31, 1]  # past the loader's checks: to_hal fails
    r = run_test_model(ReferenceDevice(), test)
    assert r.outcome == FAIL
    assert r.reason.startswith("spec error: cannot build the test model: OverflowError")


def load_spec_text(text: str):
    return load_spec("inline.mod.py", source=text)


def test_cli_specs_run_counts_json_and_exit_status(tmp_path, capsys):
    good = spec(tmp_path, "good", ADD_SPEC)
    broken = tmp_path / "V1_2" / "broken.mod.py"
    broken.write_text("model = Model(\n")
    out_json = tmp_path / "results.json"
    status = cli_main(["specs", "run", str(tmp_path), "--json", str(out_json)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert status == 1
    assert lines[-1] == "4 passed, 1 failed, 0 skipped"
    assert any("broken.mod.py:1" in line for line in lines)
    results = json.loads(out_json.read_text())
    assert {r["test"] for r in results} >= {"good", "good_all_inputs_as_internal", "broken.mod.py"}
    assert cli_main(["specs", "run", str(good), "-k", "internal"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


def test_a_hanging_driver_fails_its_tests_and_the_run_goes_on(capsys):
    # planted-hang never returns from executions whose tensors have a dimension of 3:
    # every mul_broadcast test hangs; the conv_same_padding tests after them still pass.
    specs = Path(__file__).resolve().parents[1] / "corpus/specs/V1_0"
    hangs, passes = str(specs / "mul_broadcast.mod.py"), str(specs / "conv_same_padding.mod.py")
    options = ["--driver", "planted-hang", "--timeout", "0.5"]
    assert cli_main(["specs", "run", hangs, passes, *options, "--no-dynamic"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    hung = [line for line in lines if "hang: no return from the driver within 0.5 s" in line]
    assert len(hung) == 4 and lines[-1] == "4 passed, 4 failed, 0 skipped"
    assert cli_main(["replay", hangs, *options]) == 1
    assert "hang: no return from the driver within 0.5 s" in capsys.readouterr().out


def test_cli_specs_expand_and_replay(tmp_path, capsys):
    good = spec(tmp_path, "good", ADD_SPEC)
    out = tmp_path / "expanded.json"
    assert cli_main(["specs", "expand", str(good), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    (tests,) = data.values()
    assert [t["test"] for t in tests] == ["good", "good_all_inputs_as_internal"]
    assert tests[0]["main"]["operations"] == [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}]
    capsys.readouterr()
    wrong = spec(tmp_path, "wrong", ADD_SPEC.replace("out: [1.5, -2.0]", "out: [1.5, -2.5]"))
    assert cli_main(["replay", str(wrong), "-k", "wrong"]) == 1
    text = capsys.readouterr().out
    assert "expected [1.5, -2.5]" in text and "actual   [1.5, -2]" in text and "DIFFERS" in text


def test_data_type_converter_requantizes_a_quantized_operand(tmp_path):
    # 128 and 130 at zero point 128, scale 0.5 are 0.0 and 1.0: at scale 0.25, zero
    # point 100 they are 100 and 104.
    text = """
        model = Model()
        a = Input("a", "TENSOR_QUANT8_ASYMM", "{2}, 0.5f, 128")
        out = Output("out", "TENSOR_QUANT8_ASYMM", "{2}, 0.5f, 128")
        model.Operation("RELU", a).To(out)
        requantized = DataTypeConverter().Identify({a: ("TENSOR_QUANT8_ASYMM", 0.25, 100)})
        Example({a: [128, 130], out: [128, 130]}).AddVariations(requantized).DisableLifeTimeVariation()
    """
    q = by_name(load_spec(spec(tmp_path, "rq", text)))["rq_quant8"]
    assert operand(q, "a").data == [100, 104]


def test_the_float16_variation_converts_float_scalars_too(tmp_path):
    text = """
        model = Model()
        a = Input("a", "TENSOR_FLOAT32", "{2}")
        out = Output("out", "TENSOR_FLOAT32", "{2}")
        model.Operation("ELU", a, 1.5).To(out)
        Example({a: [1.0, -2.0], out: [1.0, -1.297]}).AddVariations("float16").DisableLifeTimeVariation()
    """
    f16 = by_name(load_spec(spec(tmp_path, "elu", text, folder="V1_3")))["elu_float16"]
    assert [o.type for o in f16.main.operands] == [T.TENSOR_FLOAT16, T.FLOAT16, T.TENSOR_FLOAT16]
    assert f16.main.operands[1].data == [1.5]


def test_an_ignored_output_stays_ignored_as_the_output_behind_an_added_operation(tmp_path):
    text = """
        model = Model()
        i = Input("i", "TENSOR_FLOAT32", "{2}")
        o = IgnoredOutput("o", "TENSOR_FLOAT32", "{2}")
        model.Operation("ABS", i).To(o)
        Example({i: [1.0, -2.0], o: [0.0, 0.0]}).AddVariations(
            AllOutputsAsInternalCoverter(), includeDefault=False
        ).DisableLifeTimeVariation()
    """
    (internal,) = load_spec(spec(tmp_path, "ign", text))
    assert [o.is_ignored for o in internal.main.operands if o.lifetime == L.SUBGRAPH_OUTPUT] == [
        True
    ]
