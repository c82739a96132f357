"""Meta-tests: every standard operation is declared completely, tested, and exemplified."""

import re
from pathlib import Path

import pytest

from driver.hal.types import STANDARD_OPERATIONS, HalVersion
from driver.operations import FAMILIES, REGISTRY
from driver.testing import assert_example
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
