"""Budgets (how much the suite does) and Hypothesis profiles (how it searches).

``--nn-budget`` picks a :class:`Budget`: examples per property, stateful steps, stress
sizes and the per-call time limit. Each budget has a default Hypothesis profile, which
``--nn-profile`` overrides:

==========  ============================================================================
ci          deterministic (``derandomize``), no example database, bounded: the same
            examples every run, so a red CI run is reproducible and a green one stays
            green until the driver changes
dev         random search, Hypothesis's default example database (``.hypothesis/``):
            a failure found once is retried first next time
nightly     random search, thousands of examples, the example database kept in
            ``--nn-database`` (default ``.nnfuzz/hypothesis``): cache that directory
            between nightly runs and every failure found is replayed until fixed
==========  ============================================================================

The profiles are registered with Hypothesis as ``nnfuzz-ci``, ``nnfuzz-dev`` and
``nnfuzz-nightly`` (prefixed, so they never clash with a project's own ``ci`` profile);
they apply to the conformance properties and to tests that use :func:`property_settings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase


@dataclass(frozen=True)
class Budget:
    name: str
    examples: int  # max_examples of a property of weight 1
    stateful_steps: int  # rule steps per stateful run
    stress_models: int  # models (Hypothesis examples) per stress test
    stress_threads: int
    stress_executions: int  # executions per thread
    stress_seconds: float  # the long run's duration
    pressure_mib: int  # request memory held at once in the memory-pressure run
    timeout: float  # default time limit of one driver call (seconds)
    profile: str  # the default Hypothesis profile

    def examples_for(self, weight: float) -> int:
        return max(1, round(self.examples * weight))


BUDGETS = {
    "quick": Budget("quick", 10, 12, 1, 4, 8, 0.5, 16, 10.0, "dev"),
    "ci": Budget("ci", 100, 30, 3, 8, 40, 5.0, 128, 30.0, "ci"),
    "nightly": Budget("nightly", 2000, 60, 20, 16, 400, 300.0, 1024, 60.0, "nightly"),
}
PROFILES = ("ci", "dev", "nightly")
DEFAULT_DATABASE = os.path.join(".nnfuzz", "hypothesis")

_HEALTH = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]


def register_profiles(database: str | None = None) -> None:
    """Register ``nnfuzz-ci``, ``nnfuzz-dev`` and ``nnfuzz-nightly`` (idempotent)."""
    # No "explain" phase: it re-runs the shrunk example under tracing, costly for tests
    # whose every run drives a device, and the failure message already names the step.
    phases = [p for p in Phase if p != Phase.explain]
    # No blob: the properties live in the installed suite, where a @reproduce_failure
    # line cannot be added; the profiles with a database replay failures themselves.
    common = dict(deadline=None, print_blob=False, suppress_health_check=_HEALTH, phases=phases)
    settings.register_profile(
        "nnfuzz-ci", derandomize=True, database=None, max_examples=100, **common
    )
    settings.register_profile("nnfuzz-dev", max_examples=100, **common)
    settings.register_profile(
        "nnfuzz-nightly",
        max_examples=2000,
        database=DirectoryBasedExampleDatabase(database or DEFAULT_DATABASE),
        **common,
    )


def default_budget() -> str:
    """``ci`` when the CI environment variable is set, else ``quick``."""
    return "ci" if os.environ.get("CI") else "quick"


def property_settings(budget: Budget, profile: str, weight: float = 1.0) -> settings:
    """Hypothesis settings for a property of ``weight`` under a budget and profile."""
    return settings(
        settings.get_profile(f"nnfuzz-{profile}"), max_examples=budget.examples_for(weight)
    )


register_profiles()  # importable anywhere; the plugin re-registers with --nn-database
