"""The run's state: which driver, which budget, what ran and what failed.

The plugin creates one :class:`NNSession` per pytest run that has ``--nn-driver``; the
conformance properties and the fixtures read it through :func:`active`.
"""

from __future__ import annotations

import collections
import functools
import hashlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable, UnsatisfiedAssumption

from driver.hal.types import (
    ErrorStatus,
    HalVersion,
    MeasureTiming,
    OperandType,
    OperationType,
)
from nnfuzz_pytest.budget import BUDGETS, Budget, property_settings
from nnfuzz_pytest.harness import DriverCrash, DriverHang, DriverUnderTest, memory_names_for
from nnfuzz_pytest.strategies import (
    LAYOUT_OPERATIONS,
    OPERATIONS,
    Case,
    generated_models,
    one_operation_models,
    operation_types,
)

V = HalVersion


@dataclass
class NNSession:
    spec: str  # the --nn-driver value
    driver: DriverUnderTest
    budget: Budget
    profile: str
    operations: frozenset[int] | None = None  # --nn-ops
    save_failures: Path | None = None
    corpus: list[Path] = field(default_factory=list)
    isolate: str = "auto"
    runs: collections.Counter = field(default_factory=collections.Counter)
    last_failure: dict[str, Case] = field(default_factory=dict)
    _support: dict[tuple, bool] = field(default_factory=dict)
    _isolated: Any = None

    @property
    def version(self) -> HalVersion:
        return self.driver.version

    # --- what to generate -------------------------------------------------------------
    def supported_operations(self) -> frozenset[int]:
        """The generated operations (within ``--nn-ops``) the driver supports on at least
        one of their tensor types, so a partial driver is tested on what it claims to
        run. Asked on a small model of each: any type first, then each type the families
        make until one is supported (a quant8-only driver supports no float32 case)."""
        if "ops" not in self._support:
            ops = set()
            for op in sorted(OPERATIONS):
                if self.operations is not None and op not in self.operations:
                    continue
                if self._probe(op) or any(
                    self._signature_supported(op, t) for t in operation_types(op, self.version)
                ):
                    ops.add(op)
            self._support["ops"] = frozenset(ops)
        return self._support["ops"]

    def supports(self, op: int, type_code: int) -> bool:
        """Whether the driver supports ``op`` on tensors of ``type_code`` (asked once, on
        a small model; False when the families make no such model at its version, or
        ``--nn-ops`` leaves ``op`` out)."""
        if self.operations is not None and op not in self.operations:
            return False
        return self._signature_supported(op, type_code)

    def _signature_supported(self, op: int, type_code: int) -> bool:
        key = ("signature", op, type_code)
        if key not in self._support:
            self._support[key] = self._probe(op, {type_code})
        return self._support[key]

    def _probe(self, op: int, types: Collection[int] | None = None) -> bool:
        case = first_case(self.version, op, types)
        if case is None:
            return False  # nothing of this operation (and type) exists at this HAL version
        try:
            status, supported = self.driver.supported(case.model)
        except (DriverHang, DriverCrash):
            return True  # let the properties find (and shrink) the problem
        # A rejection of a valid model is itself a finding: keep the operation so that
        # the validation properties report it.
        return status != ErrorStatus.NONE or (bool(supported) and all(supported))

    def models(self, **kw) -> st.SearchStrategy[Case]:
        """Valid cases for the driver: its HAL version, ``--nn-ops``, what it supports.
        The generated one-operation families, plus the random-graph generator's graphs
        (restricted to ``--nn-ops`` and ``operations`` when given) unless ``graphs`` is
        False or ``types``/``layout`` narrow the request to what only the families
        produce. Skips the test (with the reason) when that leaves nothing to draw."""
        explicit = kw.pop("operations", None)
        with_graphs = kw.pop("graphs", True)
        ops = set(explicit or self.supported_operations())
        ops &= set(self.supported_operations())
        if kw.get("types") is not None:
            ops = {op for op in ops if any(self.supports(op, t) for t in kw["types"])}
        if kw.get("layout"):
            ops &= LAYOUT_OPERATIONS
        own = one_operation_models(self.version, operations=ops, **kw) if ops else None
        graphs = None
        if with_graphs and kw.get("types") is None and not kw.get("layout"):
            graph_ops = self.operations
            if explicit is not None:
                graph_ops = frozenset(explicit) & (self.operations or frozenset(explicit))
            if graph_ops is None or graph_ops:
                graphs = generated_models(self.version, operations=graph_ops)
        choices = [s for s in (own, graphs) if s is not None]
        if not choices:
            pytest.skip(self._nothing_to_draw(explicit, kw.get("types"), kw.get("layout")))
        return st.one_of(choices)

    def _nothing_to_draw(
        self, explicit: Collection[int] | None, types: Collection[int] | None, layout: Any
    ) -> str:
        what = []
        if explicit is not None:
            what.append("of " + ", ".join(sorted(OperationType(op).name for op in explicit)))
        if types is not None:
            what.append("on " + " or ".join(sorted(OperandType(t).name for t in types)))
        if layout:
            names = ", ".join(sorted(OperationType(op).name for op in LAYOUT_OPERATIONS))
            what.append(f"with a layout flag ({names})")
        if self.operations is not None:
            what.append("within --nn-ops")
        return (
            f"nothing to test: the driver (HAL {self.version.label}) supports no generated "
            f"one-operation model {' '.join(what)}"
        ).rstrip()

    def graph_models(self) -> st.SearchStrategy[Case]:
        """The random-graph generator's graphs for the driver (``--nn-ops`` applies)."""
        graphs = generated_models(self.version, operations=self.operations)
        return graphs if graphs is not None else st.nothing()

    def settings(self, weight: float = 1.0) -> settings:
        return property_settings(self.budget, self.profile, weight)

    # --- failures ---------------------------------------------------------------------
    def save_failure(self, name: str) -> Path | None:
        """Write the last failing case of property ``name`` as a spec file."""
        case = self.last_failure.get(name)
        if case is None or self.save_failures is None:
            return None
        from randomgraph.spec.dumper import dump_spec
        from randomgraph.testmodel import TestModel

        try:
            expected = case.expected()
        except Exception:
            return None  # no reference result (the failure is about validity)
        digest = hashlib.sha1(repr(case).encode()).hexdigest()[:10]
        test_name = f"{name.removeprefix('test_')}_{digest}"
        test = TestModel.from_hal(test_name, case.model, list(case.inputs), expected)
        test.min_supported_version = None if case.model.relaxed else V.V1_0
        from nnfuzz_pytest.checks import criteria_for

        # The pragma makes the spec runner judge it as the property did.
        header = (
            f"nnfuzz conformance: {name} failed on driver {self.spec}\n{case!r}\n"
            f"nnfuzz-criteria: {criteria_for(case.model).name}"
        )
        self.save_failures.mkdir(parents=True, exist_ok=True)
        path = self.save_failures / f"{test_name}.mod.py"
        path.write_text(dump_spec(test, header=header))
        return path


def first_case(version: HalVersion, op: int, types: Collection[int] | None = None) -> Case | None:
    """A deterministic small valid case with operation ``op`` (of a main tensor type in
    ``types`` when given); None if there is none at ``version``: one generated example,
    no shrinking."""
    from hypothesis import Phase

    found: list[Case] = []

    @settings(
        database=None, max_examples=1, derandomize=True, phases=[Phase.generate], deadline=None
    )
    @given(one_operation_models(version, operations={op}, types=types))
    def grab(case: Case) -> None:
        found.append(case)

    try:
        grab()
    except Exception:
        return None
    return found[0] if found else None


_ACTIVE: NNSession | None = None


def activate(session: NNSession | None) -> None:
    global _ACTIVE
    _ACTIVE = session


def current() -> NNSession | None:
    return _ACTIVE


def active() -> NNSession:
    """The run's session; skips the test when no ``--nn-driver`` was given."""
    if _ACTIVE is None:
        pytest.skip("no driver under test: run pytest with --nn-driver NAME|module:callable")
    return _ACTIVE


def require_version(minimum: HalVersion, what: str) -> None:
    """Skip (with the reason) when the driver's HAL version lacks ``what``."""
    version = active().version
    if version < minimum:
        pytest.skip(f"{what} needs HAL {minimum.label}; the driver is HAL {version.label}")


def models(**kw) -> st.SearchStrategy[Case]:
    """Valid cases for the active driver (resolved when first drawn)."""
    return st.deferred(lambda: active().models(**kw))


def execution_options(driver: DriverUnderTest) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments of :meth:`DriverUnderTest.run` for a valid execution on
    ``driver``: the request's pool kinds (every kind its HAL version must map), timing
    measured or not (HAL 1.2+), and for executeFenced (1.3) fences that signal before or
    after the launch. Shrinks to ashmem pools, measured, no fences."""
    version = driver.version
    names = st.sampled_from(memory_names_for(version))
    measures = [MeasureTiming.YES, MeasureTiming.NO] if version >= V.V1_2 else [MeasureTiming.NO]
    fences = st.just(())
    if "fenced" in driver.paths:
        fences = st.lists(st.sampled_from(("signalled", "later")), max_size=3).map(tuple)
    return st.fixed_dictionaries(
        {"pools": st.tuples(names, names), "measure": st.sampled_from(measures), "fences": fences}
    )


def _case_in(args: tuple, kwargs: dict) -> Case | None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, Case):
            return v
    return None


def nn_property(
    weight: float = 1.0, *, examples: str | None = None, shrink: bool = True, **strategies: Any
) -> Callable:
    """Make a conformance property: ``@given(**strategies)`` with the budget's settings
    for ``weight`` (or the budget field named by ``examples``, e.g. ``"stress_models"``);
    counts the examples run and remembers the last failing case. ``shrink=False`` for
    properties whose every run is expensive (stress): the failing example is reported as
    found."""

    def decorate(fn: Callable) -> Callable:
        name = fn.__name__

        @functools.wraps(fn)
        def body(*args, **kwargs):
            session = _ACTIVE
            rejected = False
            try:
                return fn(*args, **kwargs)
            except UnsatisfiedAssumption:
                rejected = True  # not a run: e.g. a model the driver does not support
                raise
            except (AssertionError, DriverHang, DriverCrash):
                case = _case_in(args, kwargs)
                if session is not None and case is not None:
                    session.last_failure[name] = case
                raise
            finally:
                if session is not None and not rejected:
                    session.runs[name] += 1

        given_test = given(**strategies)(body)

        session = _ACTIVE
        base = (
            session.settings(weight)
            if session
            else property_settings(BUDGETS["quick"], "dev", weight)
        )
        changes: dict[str, Any] = {}
        if examples is not None:
            budget = session.budget if session else BUDGETS["quick"]
            changes["max_examples"] = int(getattr(budget, examples))
        if not shrink:
            changes["phases"] = [p for p in base.phases if p != Phase.shrink]
        given_test = settings(base, **changes)(given_test)

        @functools.wraps(given_test)
        def test(*args, **kwargs):
            session = _ACTIVE
            ran_before = session.runs[name] if session is not None else 0
            try:
                return given_test(*args, **kwargs)
            except Unsatisfiable:
                if session is None or session.runs[name] > ran_before:
                    raise
                # Every example was rejected before it ran: the driver supports none
                # of the cases this property draws (e.g. no relaxed models). Nothing of
                # it can be tested, which is not a failure of the driver.
                pytest.skip(
                    "nothing to test: every case this property generated was one the "
                    "driver does not support (or the property cannot apply to)"
                )

        return test

    return decorate


def operation_names(text: str) -> frozenset[int]:
    names = [n.strip().upper() for n in text.split(",") if n.strip()]
    out = set()
    for n in names:
        try:
            out.add(OperationType[n])
        except KeyError:
            raise ValueError(f"unknown operation {n!r} in --nn-ops") from None
    return frozenset(out)


def restrict(ops: Collection[int] | None) -> frozenset[int] | None:
    return None if ops is None else frozenset(ops)
