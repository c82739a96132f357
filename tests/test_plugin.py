"""The pytest plugin (``nnfuzz_pytest``): the conformance suite passes on the reference at
every feature level, each planted bug makes its named property fail with a shrunk
example, the stress verdicts classify crashes and hangs, failures become regression
specs, and a run without ``--nn-driver`` is unchanged.

The suite runs are inner pytest runs (``pytester``) with small budgets and the
deterministic Hypothesis profile, so they are quick and always find the same examples.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from driver.builder import ModelBuilder
from driver.hal.types import HalVersion
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O

pytest_plugins = ("pytester",)

SMALL = ("-p", "no:cacheprovider", "--nn-budget", "quick", "--nn-profile", "ci")


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*SMALL, *args)


def outcomes(result: pytest.RunResult) -> dict[str, int]:
    return result.parseoutcomes()


# ---------------------------------------------------------------------------------------
# The suite passes on the reference and its feature levels
# ---------------------------------------------------------------------------------------

# Properties that need a newer HAL skip (with the reason) on older feature levels.
NEEDS = {
    "test_quant8_signed_is_unsigned_minus_128": HalVersion.V1_3,
    "test_past_deadline_is_missed_deadline_persistent": HalVersion.V1_3,
    "test_memory_domain_rules": HalVersion.V1_3,
    "test_nchw_is_transposed_nhwc": HalVersion.V1_2,
    "test_dynamic_output_shape_equals_static": HalVersion.V1_2,
    "test_output_insufficient_size_reports_the_shape": HalVersion.V1_2,
    "test_relaxed_is_within_relaxed_tolerance_of_float32": HalVersion.V1_1,
}


@pytest.mark.parametrize(
    "driver", ["reference", "reference-1.0", "reference-1.1", "reference-1.2", "reference-1.3"]
)
def test_suite_passes_on_the_reference_at_every_feature_level(pytester, driver):
    result = run_suite(pytester, "--nn-driver", driver, "-m", "not nn_stress", "-rs", "-v")
    counts = outcomes(result)
    assert counts.get("failed", 0) == 0 and counts.get("errors", 0) == 0, result.stdout.str()
    version = HalVersion.parse(driver.split("-")[1]) if "-" in driver else HalVersion.V1_3
    text = result.stdout.str()
    for name, needed in NEEDS.items():
        line = next(ln for ln in result.outlines if f"::{name} " in ln)
        if version < needed:
            assert "SKIPPED" in line, line
            assert f"needs HAL {needed.label}; the driver is HAL {version.label}" in text
        else:
            assert "PASSED" in line, line
    # The examples table: every property ran.
    assert "examples run per property" in text
    assert re.search(r"test_outputs_match_reference\s+\d+", text)
    assert counts["passed"] >= 9


def test_stress_group_passes_on_the_reference(pytester):
    result = run_suite(pytester, "--nn-driver", "reference", "-m", "nn_stress")
    result.assert_outcomes(passed=4)


# ---------------------------------------------------------------------------------------
# Each planted bug fails a named property, with a shrunk example
# ---------------------------------------------------------------------------------------

PLANTED = [
    # (bug, --nn-ops, the property that must fail, text the failure shows)
    ("rounding", "ADD", "test_outputs_match_reference", "TENSOR_QUANT8_ASYMM"),
    ("activation", "ADD,SUB,MUL", "test_outputs_match_reference", "elements differ"),
    ("padding", "CONV_2D", "test_outputs_match_reference", "CONV_2D("),
    ("broadcast", "ADD,MUL", "test_outputs_match_reference", "elements differ"),
    ("crash", "ADD", "test_outputs_match_reference", "CRASH: executeSynchronously raised"),
    ("status", "RESHAPE", "test_valid_model_is_accepted", "RESHAPE("),
]


@pytest.mark.parametrize("bug, ops, prop, shows", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_bug_fails_its_property_with_a_shrunk_example(
    pytester, tmp_path, bug, ops, prop, shows
):
    saved = tmp_path / "regressions"
    result = run_suite(
        pytester,
        "--nn-driver",
        f"planted-{bug}",
        "--nn-ops",
        ops,
        "--nn-budget",
        "ci",
        "-k",
        prop,
        "--nn-save-failures",
        str(saved),
    )
    text = result.stdout.str()
    assert outcomes(result).get("failed") == 1, text
    assert "FAILED " in text and f"::{prop}" in text
    assert shows_shrunk_example(text, prop), text
    assert shows in text, text
    if bug in ("rounding", "activation"):
        check_saved_failure_replays(pytester, saved, f"planted-{bug}")


def shows_shrunk_example(text: str, prop: str) -> bool:
    """Hypothesis printed the shrunk example of ``prop``: older releases head it
    "Falsifying example:", newer ones (6.170 here) "Failing test case:"."""
    return any(f"{head}: {prop}(" in text for head in ("Falsifying example", "Failing test case"))


def check_saved_failure_replays(pytester, saved: Path, driver: str) -> None:
    """``--nn-save-failures`` wrote the shrunk model as a spec, and ``--nn-corpus``
    replays it: it fails on the buggy driver and passes on the reference."""
    specs = sorted(saved.glob("*.mod.py"))
    assert len(specs) == 1, specs
    bad = run_suite(pytester, "--nn-driver", driver, "--nn-corpus", str(saved), "-k", "corpus")
    assert outcomes(bad).get("failed") == 1, bad.stdout.str()
    good = run_suite(
        pytester, "--nn-driver", "reference", "--nn-corpus", str(saved), "-k", "corpus"
    )
    assert outcomes(good).get("passed") == 1, good.stdout.str()


def test_planted_padding_also_breaks_nchw_equals_transposed_nhwc(pytester):
    result = run_suite(
        pytester, "--nn-driver", "planted-padding", "--nn-budget", "ci", "-k", "nchw"
    )
    assert outcomes(result).get("failed") == 1
    text = result.stdout.str()
    assert shows_shrunk_example(text, "test_nchw_is_transposed_nhwc"), text


def test_planted_hang_is_a_hang_and_the_run_still_ends(pytester):
    # A subprocess: the plugin ends the process after its report when a driver thread hung.
    result = pytester.runpytest_subprocess(
        *SMALL,
        "--nn-driver",
        "planted-hang",
        "--nn-ops",
        "MUL",
        "--nn-budget",
        "ci",
        "--nn-timeout",
        "0.5",
        "-k",
        "test_outputs_match_reference",
        timeout=150,
    )
    text = result.stdout.str()
    assert result.ret == 1, text
    assert "HANG: executeSynchronously did not return within 0.5 s" in text
    assert shows_shrunk_example(text, "test_outputs_match_reference"), text
    assert "driver call(s) hung" in text


# ---------------------------------------------------------------------------------------
# Stress verdicts
# ---------------------------------------------------------------------------------------


def _add_case(shape=(3,)):
    from nnfuzz_pytest.strategies import Case

    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, shape)
    y = b.add_input(T.TENSOR_FLOAT32, shape)
    out = b.add_output(T.TENSOR_FLOAT32, shape)
    b.add_operation(O.ADD, [x, y, b.add_scalar(T.INT32, 0)], [out])
    ones = np.ones(shape, np.float32)
    return Case(b.build(), (ones, ones))


def _mul_case():
    from nnfuzz_pytest.strategies import Case

    b = ModelBuilder()
    x = b.add_input(T.TENSOR_FLOAT32, (2, 3))
    y = b.add_input(T.TENSOR_FLOAT32, (2, 3))
    out = b.add_output(T.TENSOR_FLOAT32, (2, 3))
    b.add_operation(O.MUL, [x, y, b.add_scalar(T.INT32, 0)], [out])
    ones = np.ones((2, 3), np.float32)
    return Case(b.build(), (ones, ones))


@pytest.mark.parametrize(
    "spec, case, verdict",
    [
        ("reference@isolated:timeout=5", _add_case, "SUCCESS"),
        ("planted-crash@isolated:timeout=5", _add_case, "CRASH"),
        ("planted-hang@isolated:timeout=1", _mul_case, "HANG"),
        ("planted-rounding", lambda: _add_case((2,)), "SUCCESS"),  # float ADD is exact
        ("planted-crash", _add_case, "CRASH"),
    ],
)
def test_stress_verdicts_classify_success_crash_and_hang(spec, case, verdict):
    from driver.registry import load_device
    from nnfuzz_pytest.conformance.stress import Tally, _execute_once
    from nnfuzz_pytest.harness import DriverUnderTest, Verdict

    case = case()
    driver = DriverUnderTest(lambda: load_device(spec), name=spec, timeout=10)
    tally = Tally()
    for path in driver.paths:
        if path in ("async", "fenced") and verdict == "CRASH":
            # The exception escapes in a driver worker thread: the callback is never
            # notified, which is a hang to the caller (in process or not).
            continue
        prepared = driver.must_prepare(case.model)  # afresh: a crash takes it down
        tally.run(_execute_once, driver, prepared, case, case.expected(), path)
    assert set(tally.counts) == {Verdict[verdict]}, (tally.counts, tally.examples)


# ---------------------------------------------------------------------------------------
# Without --nn-driver nothing changes; fixtures for test authors
# ---------------------------------------------------------------------------------------

USER_TESTS = """
def test_one():
    assert 1 + 1 == 2

def test_two():
    pass
"""


def test_a_run_without_driver_is_unaffected(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    with_plugin = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-v")
    without = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:nnfuzz", "-v")
    with_plugin.assert_outcomes(passed=2)
    without.assert_outcomes(passed=2)
    ids = [ln.split()[0] for ln in with_plugin.outlines if "PASSED" in ln]
    assert ids == [ln.split()[0] for ln in without.outlines if "PASSED" in ln]
    # Nothing but the plugin list mentions nnfuzz: no header, no summary, no tests.
    lines = [ln for ln in with_plugin.outlines if not ln.startswith("plugins:")]
    assert not any("nnfuzz" in ln for ln in lines), lines


def test_the_suite_alone_needs_a_driver(pytester):
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--pyargs", "nnfuzz_pytest.conformance"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "needs a driver" in result.stderr.str()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--nn-driver", "no-such-driver"], "unknown driver 'no-such-driver'"),
        (["--nn-driver", "reference", "--nn-timeout", "-1"], "--nn-timeout: must be a finite"),
        (["--nn-driver", "reference", "--nn-hal-version", "9.9"], "unknown HAL version '9.9'"),
        (["--nn-driver", "reference", "--nn-ops", "NOPE"], "unknown operation 'NOPE'"),
    ],
)
def test_bad_option_is_a_usage_error(pytester, options, message):
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


FIXTURE_TESTS = """
from hypothesis import given, strategies as st
from driver.hal.types import ErrorStatus

@given(data=st.data())
def test_my_property(nn_driver, nn_strategies, data):
    case = data.draw(nn_strategies.models())
    prepared = nn_driver.must_prepare(case.model)
    execution = nn_driver.run(prepared, case.inputs)
    assert execution.ok

def test_prepare_fixture(nn_prepare, nn_version, nn_device):
    from nnfuzz_pytest.session import first_case
    from driver.hal.types import OperationType
    case = first_case(nn_version, OperationType.RELU)
    assert nn_prepare(case) is not None
"""


def test_fixtures_for_test_authors(pytester):
    pytester.makepyfile(test_mine=FIXTURE_TESTS)
    own = run_suite(pytester, "--nn-driver", "reference-1.2", "--nn-no-suite")
    own.assert_outcomes(passed=2)
    skipped = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    skipped.assert_outcomes(skipped=2)


def test_driver_from_module_callable(pytester):
    pytester.makepyfile(
        mydriver="""
from driver.device import DeviceConfig, ReferenceDevice
from driver.hal.types import HalVersion

def make_device():
    return ReferenceDevice(DeviceConfig(name="mine", version=HalVersion.V1_2))
"""
    )
    pytester.syspathinsert()
    result = run_suite(pytester, "--nn-driver", "mydriver:make_device", "-m", "nn_validation")
    result.assert_outcomes(passed=3)
    assert "driver mydriver:make_device (HAL 1.2)" in result.stdout.str()
