"""Meta-tests: every standard operation is declared completely, tested, and exemplified."""

import dataclasses
import itertools
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from driver.executor import Executor
from driver.hal.types import STANDARD_OPERATIONS, HalError, HalVersion
from driver.operations import FAMILIES, REGISTRY
from driver.testing import (
    EXTREME_SCALARS,
    OmittedArg,
    OutputSpec,
    ScalarArg,
    TensorArg,
    assert_example,
    single_op_model,
)
from driver.validation import validate_model
from tests.operations.examples import all_examples

OPS_TEST_DIR = Path(__file__).parent / "operations"


def _mentioned_operations() -> set[str]:
    text = "\n".join(p.read_text() for p in OPS_TEST_DIR.glob("*.py"))
    return set(re.findall(r"\b(?:O|OperationType)\.([A-Z0-9_]+)", text))


def test_all_102_operations_are_registered():
    missing = [op.name for op in STANDARD_OPERATIONS if op not in REGISTRY]
    assert not missing, f"operations without a declaration: {missing}"


@pytest.mark.parametrize("op", STANDARD_OPERATIONS, ids=lambda o: o.name)
def test_declaration_is_complete(op):
    decl = REGISTRY.get(op)
    if decl is None:
        pytest.fail(f"{op.name} is not declared")
    assert decl.type == op
    assert decl.signatures or decl.custom_signature_check, "no signatures"
    assert callable(decl.validate), "no validate hook"
    assert callable(decl.infer_shapes), "no shape inference"
    assert callable(decl.execute), "no kernel"
    assert decl.summary, "no summary (the docs read it)"
    for sig in decl.signatures:
        assert isinstance(sig.version, HalVersion)
        assert all(0 <= p < len(sig.inputs) for p in sig.optional)


def test_every_operation_has_tests_and_examples():
    mentioned = _mentioned_operations()
    exemplified = {e.op for e in all_examples()}
    untested = [op.name for op in STANDARD_OPERATIONS if op.name not in mentioned]
    unexampled = [op.name for op in STANDARD_OPERATIONS if op not in exemplified]
    assert not untested, f"operations no test mentions: {untested}"
    assert not unexampled, f"operations without an OpExample: {unexampled}"


def test_families_declare_disjoint_operations():
    seen = {}
    for fam in FAMILIES:
        for d in fam.DECLARATIONS:
            assert d.type not in seen, f"{d.type.name} in {fam.__name__} and {seen[d.type]}"
            seen[d.type] = fam.__name__


@pytest.mark.parametrize("ex", all_examples(), ids=lambda e: e.name)
def test_example_runs_and_matches(ex):
    assert_example(ex)


_TENSORS = (TensorArg, OutputSpec, OmittedArg)
_EXTREME_SCALES = (3.4e38, 1e-30, 1.4e-45)  # float32's largest, a tiny and its smallest
_MAX_PAIRS = 400


def _runs_to_a_status(ex, inputs: list, outputs: list, what: str) -> None:
    """Validate and run ``ex``'s operation on ``inputs``/``outputs``: a result or a
    HalError; any other exception fails the test, naming ``what`` was changed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # float overflow is the point
            model, feeds = single_op_model(ex.op, inputs, outputs, relaxed=ex.relaxed)
            validate_model(model, HalVersion.V1_3)
            Executor(model).run(feeds)
    except HalError:
        pass
    except Exception as e:
        raise AssertionError(f"{what}: {e!r}") from e


def _extreme_variants(ex) -> list[dict[int, object]]:
    """Changes to ``ex``'s arguments (inputs, then outputs; position -> new scale or
    scalar value): one scale or two at once at float32's extremes, one scalar at its
    type's extremes."""
    args = (*ex.inputs, *ex.outputs)
    scaled = [k for k, a in enumerate(args) if isinstance(a, _TENSORS) and a.scale]
    variants = [{k: s} for k in scaled for s in _EXTREME_SCALES]
    pairs = [
        {k1: s1, k2: s2}
        for k1, k2 in itertools.combinations(scaled, 2)
        for s1, s2 in itertools.product(_EXTREME_SCALES, repeat=2)
    ]
    variants += pairs[:: max(1, -(-len(pairs) // _MAX_PAIRS))]  # a spread (QLSTM has ~4000)
    for k, a in enumerate(args):
        if isinstance(a, ScalarArg):
            variants += [{k: v} for v in EXTREME_SCALARS.get(a.type, ())]
    return variants


@pytest.mark.parametrize("ex", all_examples(), ids=lambda e: e.name)
def test_extreme_argument_values_end_in_a_status(ex):
    """Any finite positive float32 scale is valid and scalars take any value of their
    type, so validation and every kernel must survive the extremes: scales whose product
    or quotient overflows float32, NaN and infinite float parameters, int32 limits. The
    model runs or gets a HAL status, never another exception (MAX_OUTPUT_BYTES and each
    kernel's work bound keep huge sizes from allocating)."""
    args = [*ex.inputs, *ex.outputs]
    for change in _extreme_variants(ex):
        new = list(args)
        for k, v in change.items():
            field = "value" if isinstance(args[k], ScalarArg) else "scale"
            new[k] = dataclasses.replace(args[k], **{field: v})
        inputs, outputs = new[: len(ex.inputs)], new[len(ex.inputs) :]
        _runs_to_a_status(ex, inputs, outputs, f"arguments changed to {change}")


@pytest.mark.parametrize("ex", all_examples(), ids=lambda e: e.name)
def test_zero_sized_inputs_end_in_a_status(ex):
    """Each tensor input with one of its dimensions 0 (outputs of unknown shape): the
    model runs or gets a HAL status, never another exception. (Softmax and local
    response normalization over an empty axis reduced with no identity.)"""
    outputs = [dataclasses.replace(o, dims=tuple(0 for _ in o.dims)) for o in ex.outputs]
    for k, arg in enumerate(ex.inputs):
        if not isinstance(arg, TensorArg):
            continue
        for axis in range(arg.values.ndim):
            shape = list(arg.values.shape)
            shape[axis] = 0
            inputs = list(ex.inputs)
            inputs[k] = dataclasses.replace(arg, values=np.zeros(shape, arg.values.dtype))
            _runs_to_a_status(ex, inputs, outputs, f"input {k} with dimension {axis} = 0")
