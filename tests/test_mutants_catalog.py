"""The mutation catalog (tools/mutants.toml) stays current, and tools/mutants.py tells a
killed mutant from a survivor. The whole catalog runs by hand: ``python3 tools/mutants.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests import load_tool

ROOT = Path(__file__).resolve().parents[1]
mutants = load_tool("mutants")


def test_every_mutant_applies_to_the_tree():
    catalog = mutants.load_catalog()
    assert catalog
    ids = [m.id for m in catalog]
    assert len(ids) == len(set(ids)), "duplicate mutant ids"
    stale = {m.id: mutants.stale_reason(m) for m in catalog}
    assert not {k: v for k, v in stale.items() if v}, stale
    assert all(m.guards.strip() and m.tests for m in catalog)


def _tree_for(tmp_path: Path) -> Path:
    """A tree with what one mutant's tests need: the packages and the tests folder."""
    for name in ("driver", "randomgraph", "fuzz", "nnfuzz_pytest", "tests", "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tmp_path / name)
    return tmp_path


def test_a_broken_fact_is_killed_and_a_harmless_change_survives(tmp_path):
    (killer,) = [m for m in mutants.load_catalog() if m.id == "criteria-fp32-atol"]
    tree = _tree_for(tmp_path)
    path = tree / killer.file
    before = path.read_text()
    verdict, detail = mutants.run_mutant(killer, tree, timeout=120)
    assert verdict == "killed", detail
    assert path.read_text() == before  # restored
    harmless = mutants.Mutant(
        "comment",
        "nothing",
        killer.file,
        "(atol, rtol) of the generated-test criteria for one output type.",
        "(atol, rtol) of the generated-test criteria of one output type.",
        killer.tests,
    )
    assert mutants.stale_reason(harmless, tree) is None
    verdict, detail = mutants.run_mutant(harmless, tree, timeout=120)
    assert verdict == "survived", detail
    moved = mutants.Mutant("moved", "nothing", killer.file, "no such text", "x", killer.tests)
    assert mutants.run_mutant(moved, tree, timeout=120)[0] == "stale"


def test_a_mutant_whose_tests_did_not_run_is_neither_killed_nor_a_survivor(tmp_path):
    # Without an optional package (atheris) a test module skips itself: its mutants were
    # not tested, whatever pytest's exit status says (0 when skipped, 4 or 5 otherwise).
    (killer,) = [m for m in mutants.load_catalog() if m.id == "criteria-fp32-atol"]
    tree = _tree_for(tmp_path)
    skipped = tree / "tests" / "test_skipped_here.py"
    skipped.write_text(
        "import pytest\n\npytest.skip('an optional package is missing', allow_module_level=True)\n"
    )
    for tests in (
        ("tests/test_skipped_here.py",),
        ("tests/test_skipped_here.py::test_gone",),
        (killer.tests[0] + "::no_such_test",),
    ):
        verdict, detail = mutants.run_mutant(
            mutants.Mutant("untested", "nothing", killer.file, killer.old, killer.new, tests),
            tree,
            timeout=120,
        )
        assert verdict == "not run", (tests, detail)


def test_tests_that_fail_unmutated_stop_the_check_before_they_kill_anything(tmp_path):
    (killer,) = [m for m in mutants.load_catalog() if m.id == "criteria-fp32-atol"]
    tree = _tree_for(tmp_path)
    (tree / "tests" / "test_fails_anyway.py").write_text("def test_broken():\n    assert False\n")
    broken = mutants.Mutant(
        "broken", "nothing", killer.file, killer.old, killer.new, ("tests/test_fails_anyway.py",)
    )
    assert mutants.run_mutant(broken, tree, timeout=120)[0] == "killed"  # what it prevents
    failure = mutants.baseline_failure([killer, broken], tree, timeout=120)
    assert failure is not None and "test_fails_anyway.py::test_broken" in failure, failure
    gone = mutants.Mutant("gone", "nothing", "no/such.py", "x", "y", ("tests/no_such_test.py",))
    assert mutants.baseline_failure([killer, gone], tree, timeout=120) is None
