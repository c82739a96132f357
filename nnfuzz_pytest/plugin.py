"""The pytest plugin (entry point ``pytest11: nnfuzz``): a driver conformance suite.

    pytest --nn-driver mypkg.nnapi:make_device              # your tests + the suite
    pytest --nn-driver reference-1.2 -m nn_validation       # one group
    pytest --nn-driver mypkg:make --nn-budget nightly       # thousands of examples

With ``--nn-driver`` the shipped conformance properties (``nnfuzz_pytest/conformance``)
are added to the collection, whatever else is collected; ``--nn-no-suite`` leaves them
out (to use only the fixtures in your own tests), ``-m 'not nnfuzz'`` deselects them.
Without ``--nn-driver`` the plugin only registers its options, markers and fixtures:
a normal pytest run is unchanged. See ``docs/ci.md``.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

SUITE_DIR = Path(__file__).resolve().parent / "conformance"
SUITE_PACKAGE = "nnfuzz_pytest.conformance"
MARKERS = {
    "nnfuzz": "an nnfuzz driver-conformance property (needs --nn-driver)",
    "nn_validation": "nnfuzz: invalid models and requests are rejected, valid ones accepted, "
    "device queries valid and constant",
    "nn_differential": "nnfuzz: outputs agree with the reference driver under the criteria "
    "(per operation and data type, and over generated graphs)",
    "nn_metamorphic": "nnfuzz: equivalent models/executions give equivalent outputs",
    "nn_qos": "nnfuzz: deadlines and priorities, timing, fences, memory domains, "
    "insufficient output buffers",
    "nn_stateful": "nnfuzz: random driver lifecycles checked against a model of its state",
    "nn_stress": "nnfuzz: concurrency, memory pressure and long runs (long with nightly)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    from fuzz.commands.arguments import duration
    from nnfuzz_pytest.budget import BUDGETS, PROFILES

    g = parser.getgroup("nnfuzz", "nnfuzz NNAPI driver conformance")
    g.addoption(
        "--nn-driver",
        metavar="NAME|module:callable",
        help="driver under test: a registered name (reference, reference-1.0..1.3, "
        "planted-*) or module:callable returning a device; runs the conformance suite",
    )
    g.addoption(
        "--nn-budget",
        choices=sorted(BUDGETS),
        help="how much to run: quick (default), ci (default when CI is set), nightly",
    )
    g.addoption(
        "--nn-profile",
        choices=PROFILES,
        help="Hypothesis profile (default: the budget's): ci deterministic, dev random "
        "with a database, nightly random with the database in --nn-database",
    )
    g.addoption(
        "--nn-hal-version",
        metavar="1.0|1.1|1.2|1.3",
        help="the driver's HAL version (default: its `version` attribute, else 1.3)",
    )
    g.addoption(
        "--nn-timeout",
        type=duration(),
        metavar="SECONDS",
        help="time limit of one driver call before it counts as a HANG (default: budget)",
    )
    g.addoption(
        "--nn-ops",
        action="append",
        metavar="ADD,CONV_2D,...",
        help="only generate models with these operations (repeatable)",
    )
    g.addoption(
        "--nn-no-suite",
        action="store_true",
        help="do not add the conformance suite (fixtures only)",
    )
    g.addoption(
        "--nn-save-failures",
        metavar="DIR",
        help="write each failing property's shrunk model as a .mod.py spec into DIR",
    )
    g.addoption(
        "--nn-corpus",
        action="append",
        default=[],
        metavar="DIR",
        help="spec files (.mod.py) every run replays as regression tests (repeatable)",
    )
    g.addoption(
        "--nn-database",
        metavar="DIR",
        help="Hypothesis example database of the nightly profile (default .nnfuzz/hypothesis)",
    )
    g.addoption(
        "--nn-isolate",
        choices=("auto", "always", "never"),
        default="auto",
        help="run the stress tests' driver out of process (NAME@isolated): auto = when available",
    )


def _mentions_suite(args: list[str]) -> bool:
    for a in args:
        path_part = a.split("::")[0]
        if path_part.startswith(SUITE_PACKAGE):
            return True
        try:
            p = Path(path_part).resolve()
        except OSError:
            continue
        # The suite's directory or a path in it; not a directory above it (a project
        # with nnfuzz installed in its own .venv is above the suite, and pytest would
        # not walk into .venv to find it).
        if p == SUITE_DIR or SUITE_DIR in p.parents:
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    spec = config.getoption("--nn-driver")
    if not spec:
        if _mentions_suite(list(config.args)):
            raise pytest.UsageError(
                "the nnfuzz conformance suite needs a driver: add --nn-driver NAME|module:callable"
            )
        return
    from driver.hal.types import HalVersion
    from driver.registry import DriverLoadError, load_device
    from nnfuzz_pytest.budget import BUDGETS, default_budget, register_profiles
    from nnfuzz_pytest.harness import DriverCrash, DriverHang, DriverUnderTest
    from nnfuzz_pytest.session import NNSession, activate, operation_names

    budget = BUDGETS[config.getoption("--nn-budget") or default_budget()]
    profile = config.getoption("--nn-profile") or budget.profile
    register_profiles(config.getoption("--nn-database"))
    timeout = config.getoption("--nn-timeout") or budget.timeout
    version = config.getoption("--nn-hal-version")
    ops_option = config.getoption("--nn-ops")
    try:
        hal = HalVersion.parse(version) if version else None
    except ValueError:
        raise pytest.UsageError(
            f"--nn-hal-version: unknown HAL version {version!r} (1.0, 1.1, 1.2 or 1.3)"
        ) from None
    try:
        ops = operation_names(",".join(ops_option)) if ops_option else None
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    corpus = [Path(p) for p in config.getoption("--nn-corpus")]
    for path in corpus:
        if not path.exists():
            raise pytest.UsageError(f"--nn-corpus: {path}: no such file or directory")
    try:
        driver = DriverUnderTest(lambda: load_device(spec), name=spec, version=hal, timeout=timeout)
    except (DriverCrash, DriverHang) as e:
        cause = e.__cause__
        if isinstance(cause, DriverLoadError):
            raise pytest.UsageError(f"--nn-driver: {cause}") from None
        raise pytest.UsageError(f"--nn-driver {spec}: {e}") from None
    _check_against_driver(driver, hal, ops)
    save = config.getoption("--nn-save-failures")
    activate(
        NNSession(
            spec=spec,
            driver=driver,
            budget=budget,
            profile=profile,
            operations=ops,
            save_failures=Path(save) if save else None,
            corpus=corpus,
            isolate=config.getoption("--nn-isolate"),
        )
    )
    config._nnfuzz_active = True  # type: ignore[attr-defined]
    from nnfuzz_pytest.harness import HUNG_CALLS

    config._nnfuzz_hangs_before = len(HUNG_CALLS)  # type: ignore[attr-defined]
    if not config.getoption("--nn-no-suite") and not _mentions_suite(list(config.args)):
        config.args.append(str(SUITE_DIR))


def _check_against_driver(driver: Any, hal: Any, ops: frozenset[int] | None) -> None:
    """Options the loaded driver contradicts are usage errors: a HAL version above the
    one it reports (every property would fail on what it does not have), operations it
    cannot have at its version, or none at all."""
    from driver import operations
    from driver.hal.types import HalVersion, OperationType

    reported = getattr(driver.device, "version", None)
    if hal is not None and reported is not None and hal > HalVersion(reported):
        raise pytest.UsageError(
            f"--nn-hal-version {hal.label}: the driver reports HAL "
            f"{HalVersion(reported).label}; test it at that version or below"
        )
    if ops is None:
        return
    if not ops:
        raise pytest.UsageError("--nn-ops: no operation named")
    newer = sorted(
        OperationType(op).name
        for op in ops
        if op in operations.REGISTRY and operations.REGISTRY[op].min_version > driver.version
    )
    if newer:
        raise pytest.UsageError(
            f"--nn-ops: {', '.join(newer)} not in HAL {driver.version.label} (the driver's "
            "version): leave them out"
        )


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    # The suite's modules are not named test_*.py (so that a project's own collection
    # never picks them up by accident); collect them here, only with --nn-driver.
    if (
        getattr(parent.config, "_nnfuzz_active", False)
        and file_path.suffix == ".py"
        and file_path.parent == SUITE_DIR
        and not file_path.name.startswith("_")
    ):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config, "_nnfuzz_active", False):
        return
    from nnfuzz_pytest.session import current

    session = current()
    if session is not None and not session.corpus:
        keep, drop = [], []
        for item in items:
            (drop if item.name.startswith("test_corpus_specs_pass") else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    from nnfuzz_pytest.session import current

    session = current()
    if session is None:
        return
    name = getattr(item, "originalname", item.name)
    path = session.save_failure(name)
    if path is not None:
        report.sections.append(
            (
                "nnfuzz",
                f"shrunk failing model saved as {path}\n"
                f"replay: nnfuzz replay {path} --driver {session.spec}",
            )
        )


def pytest_report_header(config: pytest.Config) -> str | None:
    from nnfuzz_pytest.session import current

    session = current()
    if session is None:
        return None
    return (
        f"nnfuzz: driver {session.spec} (HAL {session.version.label}), budget "
        f"{session.budget.name}, Hypothesis profile nnfuzz-{session.profile}, "
        f"call time limit {session.driver.timeout:g} s"
    )


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    from nnfuzz_pytest.harness import HUNG_CALLS
    from nnfuzz_pytest.session import current

    session = current()
    if session is None or not session.runs:
        return
    tr = terminalreporter
    tr.section("nnfuzz conformance")
    tr.write_line(
        f"driver {session.spec} (HAL {session.version.label}), budget {session.budget.name}"
    )
    tr.write_line("examples run per property (including shrinking):")
    for name, n in sorted(session.runs.items()):
        tr.write_line(f"  {name:<58} {n:>6}")
    if HUNG_CALLS:
        tr.write_line(
            f"{len(HUNG_CALLS)} driver call(s) hung; the process exits right after this "
            "report (hung in-process threads cannot be stopped)"
        )


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if not getattr(config, "_nnfuzz_active", False):
        return
    from nnfuzz_pytest.harness import HUNG_CALLS
    from nnfuzz_pytest.session import activate

    activate(None)
    hung_here = len(HUNG_CALLS) > getattr(config, "_nnfuzz_hangs_before", 0)
    stuck = [
        t
        for t in threading.enumerate()
        if t.is_alive() and not t.daemon and t is not threading.main_thread()
    ]
    if hung_here and stuck and not os.environ.get("NNFUZZ_NO_EXIT_ON_HANG"):
        # A driver thread that hung (the driver's own worker pool) would keep the
        # interpreter from exiting: leave now, with pytest's exit status.
        status = getattr(config, "_nnfuzz_exitstatus", 1)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(status))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._nnfuzz_exitstatus = exitstatus  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# Fixtures for test authors (all session-scoped: safe with Hypothesis @given)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def nn_session():
    """The run's :class:`~nnfuzz_pytest.session.NNSession` (skips without --nn-driver)."""
    from nnfuzz_pytest.session import active

    session = active()
    session.supported_operations()  # probe now, outside any Hypothesis test
    return session


@pytest.fixture(scope="session")
def nn_driver(nn_session):
    """The driver under test, wrapped: ``supported``, ``prepare``, ``must_prepare``,
    ``run``/``execute`` on any path, each call time-limited (HANG/CRASH)."""
    return nn_session.driver


@pytest.fixture(scope="session")
def nn_device(nn_driver):
    """The raw device object the ``--nn-driver`` factory returned."""
    return nn_driver.device


@pytest.fixture(scope="session")
def nn_version(nn_session):
    """The driver's HAL version (:class:`driver.hal.types.HalVersion`)."""
    return nn_session.version


@pytest.fixture(scope="session")
def nn_reference(nn_session):
    """The reference driver at the driver's HAL version (the oracle), wrapped."""
    from driver.device import DeviceConfig, ReferenceDevice
    from nnfuzz_pytest.harness import DriverUnderTest

    version = nn_session.version
    return DriverUnderTest(
        lambda: ReferenceDevice(DeviceConfig(name="oracle", version=version)),
        name="reference",
        version=version,
        timeout=nn_session.driver.timeout,
    )


@pytest.fixture(scope="session")
def nn_prepare(nn_driver):
    """``nn_prepare(model_or_case, **prepare_kwargs) -> Prepared``: prepares on the
    driver under test and fails the test unless the status is NONE."""

    def prepare(model, **kw):
        model = getattr(model, "model", model)
        return nn_driver.must_prepare(model, **kw)

    return prepare


@pytest.fixture(scope="session")
def nn_strategies(nn_session):
    """Hypothesis strategies bound to the driver (draw them with ``st.data()``):
    ``models(**kw)`` valid cases, ``requests(case)`` valid request bundles,
    ``model_mutations(case)`` invalid models, ``request_mutations(case)`` invalid
    requests."""
    from nnfuzz_pytest import strategies as S

    version = nn_session.version
    return SimpleNamespace(
        models=nn_session.models,
        requests=S.requests,
        model_mutations=lambda case: S.model_mutations(case, version),
        request_mutations=lambda case: S.request_mutations(case, version),
    )


@pytest.fixture(scope="session")
def nn_budget(nn_session):
    """The :class:`~nnfuzz_pytest.budget.Budget` of the run."""
    return nn_session.budget
