"""Differential campaigns: many random graphs on a driver, every failure kept, minimized
and deduplicated, resumable after any interruption.

    settings = CampaignSettings(groups=preset_groups("single", Filters(operations=("ADD",))),
                                seeds=range(0, 50), driver="planted-rounding", out="out")
    summary = run_campaign(settings)

**Tests.** A campaign is a list of *groups* (a generator configuration and the criteria
set its tests use) and a range of seeds; test ``group#seed`` is the graph the generator
makes from :class:`~randomgraph.choices.PrngSource` ``(seed)`` under the group's
configuration, so it is the same graph on any machine. Tests run seed-major (every group
at seed 0, then at seed 1, ...) so a time-limited campaign covers every group early.
``--shard i/n`` keeps the tests whose position in that order is ``i`` modulo ``n``.

**Presets** (Android's TestRandomGraph matrix): ``single`` — one group per operation the
generator covers, one operation per graph, dims up to 1000, the operation's criteria set;
``small`` — 5-operation graphs, dims up to 1000, per primary data type and rank,
``small_graph`` criteria; ``large`` — 40-operation graphs, dims up to 10, per data type
and rank, ``large_graph`` criteria; ``android`` — all three. The graph presets use
Android's data types (float32, float16, int32, bool8) plus both quant8 types, which
Android's generator cannot connect into graphs but ours can.

**The journal** (``OUT/journal.jsonl``) is the campaign's memory: one JSON line per
event, appended, flushed and fsynced before anything else depends on it. A finished test
is written once; a new failure is written (spec file first, then its journal line) before
it is minimized, and the minimized result is a line of its own. A rerun with the same
``--out`` replays the journal: finished tests are not run again, failures waiting for
minimization are minimized, and counts, failures and timings carry on. A campaign killed
at any instant (Ctrl-C, ``kill -9``, a power cut short of losing the fsynced file) loses
nothing it recorded and repeats nothing it finished; a half-written last line is dropped.
One campaign runs in a directory at a time (:func:`campaign_lock`), and its state holds
counts, not tests, so its memory does not grow with the tests it runs.

**Workers.** ``jobs=0`` runs in this process. ``jobs=N`` runs N worker processes (each
with its own driver and checker); the parent alone writes the journal. A worker that dies
mid-task (a driver that kills its process, an external ``kill``) is replaced and the task
retried once; if it dies again the test is a crash. A worker that stops answering
(beyond the driver watchdog) is killed the same way and the test is a hang.

**Deduplication.** A failure's key is (outcome, operation set, data type, first diverging
operation) (:func:`randomgraph.differential.failure_key`). A failing test whose key was
seen before, or which contains the whole minimized graph of a known failure failing the
same way, is a *copy*: counted, not written again. Otherwise its spec is written and it
is minimized; a minimized failure whose key equals an earlier one's is the same bug. The
report lists distinct bugs with their number of copies.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from driver import SINGLE_THREADED_BLAS
from driver.hal.types import HalVersion, OperandType, OperationType
from randomgraph.differential import (
    CheckOptions,
    DifferentialChecker,
    DiffResult,
    Outcome,
    check_with_dynamic_variant,
    compute_golden,
    criteria_for,
    failure_key,
    operation_names,
    primary_type,
    same_failure,
    with_outputs,
)
from randomgraph.minimize import MinimizeOptions, minimize
from randomgraph.spec.dumper import dump_spec
from randomgraph.stopping import stop_signals_deferred
from randomgraph.testmodel import TestModel

JOURNAL = "journal.jsonl"
FAILURES = "failures"
SCHEMA = 1

NO_OPERATION = ("(none)", "-")
"""The (operation, data type) row of tests with no operation (the generator failed)."""

GRAPH_DATA_TYPES = (
    "TENSOR_FLOAT32",
    "TENSOR_FLOAT16",
    "TENSOR_INT32",
    "TENSOR_BOOL8",
    "TENSOR_QUANT8_ASYMM",
    "TENSOR_QUANT8_ASYMM_SIGNED",
)
GRAPH_RANKS = (1, 2, 3, 4)
ROUNDING_OPERATIONS = (
    "ADD",
    "SUB",
    "MUL",
    "MAXIMUM",
    "MINIMUM",
    "CONCATENATION",
    "QUANTIZE",
)
"""Operations whose quantized result is one requantization of exactly known values: a
correct driver is within one unit of the reference without bias, so the ``rounding``
preset holds them to the strict set against the exact reference (Android's medium set
lets a systematic half-unit rounding error through: its bias bound is 1.2 units).
Averaging operations are left out: their results sit on rounding ties so often that a
driver computing in float (legitimately, by Android's criteria) would show a bias."""
ROUNDING_TYPES = ("TENSOR_QUANT8_ASYMM", "TENSOR_QUANT8_ASYMM_SIGNED")
PRESET_NAMES = ("single", "small", "large", "android", "rounding", "all")
ANDROID_SEEDS = 50


class CampaignError(Exception):
    """A campaign that cannot start (bad settings, an --out of another campaign)."""


# ---------------------------------------------------------------------------------------
# Groups and presets
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """Generator filters (names; None: no filter)."""

    operations: tuple[str, ...] | None = None
    data_types: tuple[str, ...] | None = None
    ranks: tuple[int, ...] | None = None
    versions: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Group:
    """A generator configuration and the criteria its tests use."""

    name: str
    num_ops: int
    max_dim: int
    operations: tuple[str, ...] | None = None
    data_types: tuple[str, ...] | None = None
    ranks: tuple[int, ...] | None = None
    versions: tuple[str, ...] | None = None
    criteria: str = ""  # "": chosen per test (per operation, or by graph size)
    golden: str = ""  # "": the campaign's golden mode

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", self.name).strip("_")

    def config(self):
        from randomgraph.generator import GeneratorConfig

        return GeneratorConfig(
            num_ops=self.num_ops,
            max_dim=self.max_dim,
            operations=None
            if self.operations is None
            else frozenset(OperationType[o] for o in self.operations),
            data_types=None
            if self.data_types is None
            else frozenset(OperandType[t] for t in self.data_types),
            ranks=None if self.ranks is None else frozenset(self.ranks),
            versions=tuple(HalVersion[v] for v in self.versions)
            if self.versions
            else GeneratorConfig().versions,
            preset=self.slug,
        )

    def possible(self) -> bool:
        """Whether the generator can make anything under this group's filters."""
        from randomgraph.choices import PrngSource
        from randomgraph.generator import Generator

        config = self.config()
        gen = Generator(config, PrngSource(0))
        return any(gen.allowed_operations(v) for v in config.versions)

    def to_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Group:
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


def generator_operations() -> list[str]:
    """Every operation the generator has a rule for, in operation-code order."""
    from randomgraph.generator.rules import RULES

    return [OperationType(op).name for op in sorted(RULES)]


def preset_groups(
    preset: str,
    filters: Filters = Filters(),
    *,
    max_dim: int | None = None,
    num_ops: int | None = None,
) -> list[Group]:
    """The groups of a preset (``single``, ``small``, ``large``, ``android``) or, for
    ``custom``, one group of ``num_ops``-operation graphs; filters narrow every group
    and groups the generator cannot fill are left out."""
    f = filters
    groups: list[Group] = []
    if preset in ("single", "android", "all"):
        ops = [o for o in generator_operations() if f.operations is None or o in f.operations]
        groups += [
            Group(f"single/{op}", 1, max_dim or 1000, (op,), f.data_types, f.ranks, f.versions)
            for op in ops
        ]
    for name, ops_n, dim, criteria in (
        ("small", 5, 1000, "small_graph"),
        ("large", 40, 10, "large_graph"),
    ):
        if preset not in (name, "android", "all"):
            continue
        types = [t for t in GRAPH_DATA_TYPES if f.data_types is None or t in f.data_types]
        ranks = [r for r in GRAPH_RANKS if f.ranks is None or r in f.ranks]
        groups += [
            Group(
                f"{name}/{_short(t)}/rank{r}",
                ops_n,
                max_dim or dim,
                f.operations,
                (t,),
                (r,),
                f.versions,
                criteria,
            )
            for t in types
            for r in ranks
        ]
    if preset in ("rounding", "all"):
        ops = [o for o in ROUNDING_OPERATIONS if f.operations is None or o in f.operations]
        types = [t for t in ROUNDING_TYPES if f.data_types is None or t in f.data_types]
        groups += [
            Group(
                f"rounding/{op}/{_short(t)}",
                1,
                max_dim or 1000,
                (op,),
                (t,),
                f.ranks,
                f.versions,
                "strict",
                "exact",
            )
            for op in ops
            for t in types
        ]
    if preset == "custom":
        n = num_ops or 5
        groups.append(
            Group(
                f"custom/{n}op", n, max_dim or 1000, f.operations, f.data_types, f.ranks, f.versions
            )
        )
    elif preset not in PRESET_NAMES:
        raise CampaignError(f"unknown preset {preset!r}: one of {', '.join(PRESET_NAMES)}")
    possible = [g for g in groups if g.possible()]
    if not possible:
        raise CampaignError(f"no test fits the filters ({_describe_filters(f)})")
    return possible


def _describe_filters(f: Filters) -> str:
    parts = [f"{k}={','.join(map(str, v))}" for k, v in asdict(f).items() if v]
    return "; ".join(parts) or "none"


_SHORT = {
    "TENSOR_FLOAT32": "F32",
    "TENSOR_FLOAT16": "F16",
    "TENSOR_INT32": "I32",
    "TENSOR_BOOL8": "B8",
    "TENSOR_QUANT8_ASYMM": "Q8A",
    "TENSOR_QUANT8_ASYMM_SIGNED": "Q8AS",
    "TENSOR_QUANT8_SYMM": "Q8S",
    "TENSOR_QUANT8_SYMM_PER_CHANNEL": "Q8PC",
    "TENSOR_QUANT16_ASYMM": "Q16A",
    "TENSOR_QUANT16_SYMM": "Q16S",
    "FLOAT32": "f32",
    "FLOAT16": "f16",
    "INT32": "i32",
    "BOOL": "bool",
}


def _short(type_name: str) -> str:
    return _SHORT.get(type_name, type_name)


# ---------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------


@dataclass
class CampaignSettings:
    groups: list[Group]
    out: str | Path
    seeds: range | None = range(0, ANDROID_SEEDS)  # None: unbounded (use minutes)
    driver: str = "reference"
    minutes: float | None = None
    jobs: int = 0  # 0: in this process
    shard: tuple[int, int] = (0, 1)
    golden: str = "auto"
    timeout: float = 10.0
    metamorphic: tuple[str, ...] = ()
    minimize: bool = True
    minimize_seconds: float = 30.0
    max_tests: int | None = None  # stop after this many tests in this run (tests, CI)

    def check_options(self) -> CheckOptions:
        return CheckOptions(
            golden=self.golden, timeout=self.timeout, metamorphic=tuple(self.metamorphic)
        )

    def identity(self) -> dict[str, Any]:
        """What must match for a rerun to resume the campaign in ``out``."""
        return {
            "schema": SCHEMA,
            "driver": self.driver,
            "golden": self.golden,
            "metamorphic": list(self.metamorphic),
            "groups": [g.to_json() for g in self.groups],
            "shard": list(self.shard),
        }


UNBOUNDED_STOP = 2**63
"""The stop of the seed range ``A:`` (with A > 0): no end."""


def parse_seeds(text: str) -> range | None:
    """``A:B`` (B excluded), ``A:`` (unbounded: None from 0, else up to
    :data:`UNBOUNDED_STOP`) or ``N`` (just seed N)."""
    m = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*)?", text)
    if not m:
        raise ValueError(f"bad seed range {text!r}: use A:B, A: or N")
    if m.group(2) is None and ":" not in text:
        n = int(m.group(1))
        return range(n, n + 1)
    a = int(m.group(1) or 0)
    if not m.group(2):
        return None if a == 0 else range(a, UNBOUNDED_STOP)
    b = int(m.group(2))
    if b <= a:
        raise ValueError(f"empty seed range {text!r}")
    return range(a, b)


def unbounded(seeds: range | None) -> bool:
    """Whether ``seeds`` (as :func:`parse_seeds` returns it) has no end."""
    return seeds is None or seeds.stop == UNBOUNDED_STOP


def seeds_label(seeds: range | None) -> str:
    """``A:B``, or ``A: (unbounded)``."""
    if unbounded(seeds):
        return f"{seeds.start if seeds else 0}: (unbounded)"
    return f"{seeds.start}:{seeds.stop}"


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"bad shard {text!r}: use i/n with 0 <= i < n")
    return int(m.group(1)), int(m.group(2))


def enumerate_tests(
    groups: Sequence[Group], seeds: range | None, shard: tuple[int, int] = (0, 1)
) -> Iterator[tuple[int, Group, int]]:
    """(position, group, seed) in campaign order (seed-major), this shard's only."""
    i, n = shard
    seed_iter = iter(seeds) if seeds is not None else itertools.count()
    position = 0
    for seed in seed_iter:
        for g in groups:
            if position % n == i:
                yield position, g, seed
            position += 1


def case_id(group: Group, seed: int) -> str:
    return f"{group.name}#{seed}"


def case_name(group: Group, seed: int) -> str:
    return f"{group.slug}_{seed}"


# ---------------------------------------------------------------------------------------
# What workers compute
# ---------------------------------------------------------------------------------------


@dataclass
class FailurePayload:
    """Everything needed to write, minimize and replay one failing test."""

    test: dict  # TestModel JSON, expected outputs = golden
    choices: list[int]
    actual: list[np.ndarray] | None
    golden_mode: str
    criteria: str
    stage: str
    signature: str
    first_op: int | None


@dataclass
class TestRecord:
    __test__ = False  # not a pytest class

    id: str
    group: str
    seed: int
    outcome: str
    detail: str = ""
    seconds: float = 0.0
    ops: list[list[str]] = field(default_factory=list)  # distinct [operation, data type]
    n_ops: int = 0
    key: list[str] | None = None
    failure: FailurePayload | None = None
    coverage: list[list] = field(default_factory=list)  # generator (op, type, rank, HAL)


@dataclass
class MinimizeRecord:
    failure: str
    status: str  # minimized | flaky | error
    test: dict | None = None
    actual: list[np.ndarray] | None = None
    key: list[str] | None = None
    n_ops: int = 0
    checks: int = 0
    seconds: float = 0.0
    steps: list[str] = field(default_factory=list)
    detail: str = ""
    criteria: str = ""
    golden_mode: str = ""
    signature: str = ""


def _op_types(test: TestModel) -> list[list[str]]:
    seen: list[list[str]] = []
    for k, name in enumerate(operation_names(test)):
        pair = [name, primary_type(test, k)]
        if pair not in seen:
            seen.append(pair)
    return seen


class CampaignWorker:
    """Runs tests and minimizations (in a worker process, or in the campaign's own)."""

    def __init__(self, settings: CampaignSettings):
        self.settings = settings
        self.options = settings.check_options()
        self.checker = DifferentialChecker(settings.driver, self.options)
        self.groups = {g.name: g for g in settings.groups}

    def _use(self, group: Group | None) -> None:
        golden = group.golden if group is not None and group.golden else self.options.golden
        self.checker.options = replace(self.options, golden=golden)

    def handle(self, task: tuple) -> TestRecord | MinimizeRecord:
        kind = task[0]
        if kind == "test":
            return self.run_test(self.groups[task[1]], task[2])
        if kind == "minimize":
            return self.minimize(task[1], task[2])
        raise ValueError(f"unknown task {kind!r}")

    @staticmethod
    def make_test(group: Group, seed: int):
        """The test of ``group#seed``: the generator's graph of ``seed`` (its seed sweep
        spreads the first operation over the seeds) under the group's configuration.
        Returns (test, choices, coverage records)."""
        from randomgraph.generator import generate

        graph = generate(seed, group.config())
        test = graph.test_model
        test.name = case_name(group, seed)
        test.criteria = group.criteria
        coverage = [
            [OperationType(r.operation).name, r.data_type, int(r.rank), HalVersion(r.version).name]
            for r in graph.operations
        ]
        return test, graph.choices, coverage

    def run_test(self, group: Group, seed: int) -> TestRecord:
        from randomgraph.generator import GenerationError

        start = time.perf_counter()
        rid = case_id(group, seed)
        try:
            test, choices, coverage = self.make_test(group, seed)
        except GenerationError as e:
            return TestRecord(rid, group.name, seed, Outcome.SKIPPED.value, f"generator: {e}")
        except Exception as e:  # a generator bug: report it, carry on
            return TestRecord(
                rid,
                group.name,
                seed,
                Outcome.REFERENCE_ERROR.value,
                f"the generator raised {type(e).__name__}: {e}",
                time.perf_counter() - start,
            )
        self._use(group)
        result = self.checker.check(test)
        record = TestRecord(
            rid,
            group.name,
            seed,
            result.outcome.value,
            result.detail if result.outcome != Outcome.PASS else "",
            time.perf_counter() - start,
            _op_types(test),
            len(test.main.operations),
        )
        record.coverage = coverage
        if result.failed:
            record.key = list(failure_key(test, result))
            spec_test = with_outputs(test, result.expected) if result.expected else test
            record.failure = FailurePayload(
                spec_test.to_json(),
                list(choices),
                result.actual,
                result.golden_mode,
                result.criteria,
                result.stage,
                result.signature,
                result.first_op,
            )
        return record

    def minimize(self, failure_id: str, payload: dict) -> MinimizeRecord:
        """Re-check the failing test, then reduce it (see :mod:`randomgraph.minimize`)."""
        from randomgraph.choices import ReplaySource
        from randomgraph.generator import generate_with

        test = TestModel.from_json(payload["test"])
        test.criteria = payload.get("criteria", test.criteria)
        target = DiffResult(Outcome(payload["outcome"]), signature=payload.get("signature", ""))
        group = self.groups.get(payload.get("group", ""))
        self._use(group)
        # The payload holds outputs with their real shapes; a failure that needed
        # unspecified output dims shows again in the dynamic-output-shape variant.
        test, result = check_with_dynamic_variant(self.checker, test)
        if not same_failure(target, result):
            return MinimizeRecord(
                failure_id,
                "flaky",
                detail=f"did not fail the same way again ({result.outcome.label}: {result.detail})",
            )
        regen = None
        num_ops = None
        if group is not None and payload.get("choices"):
            config = group.config()
            num_ops = config.num_ops
            criteria = test.criteria

            def regen(choices, ops):
                cfg = replace(config, num_ops=ops) if ops else config
                g = generate_with(ReplaySource(choices), cfg, name=test.name)
                g.test_model.name = test.name
                g.test_model.criteria = criteria
                return g.test_model, g.choices

        m = minimize(
            self.checker,
            test,
            result,
            choices=payload.get("choices") if regen else None,
            regenerate=regen,
            num_ops=num_ops,
            options=MinimizeOptions(seconds=self.settings.minimize_seconds),
        )
        if m.interrupted:
            raise KeyboardInterrupt  # unfinished: the journal keeps it pending, to resume
        mt = m.test
        mt.name = f"{test.name}_min"
        spec_test = with_outputs(mt, m.result.expected) if m.result.expected else mt
        return MinimizeRecord(
            failure_id,
            "minimized",
            spec_test.to_json(),
            m.result.actual,
            list(failure_key(mt, m.result)),
            len(mt.main.operations),
            m.checks,
            m.seconds,
            m.steps,
            m.result.detail,
            m.result.criteria,
            m.result.golden_mode,
            m.result.signature,
        )


# ---------------------------------------------------------------------------------------
# The journal and the campaign's state
# ---------------------------------------------------------------------------------------


class Journal:
    """Append-only JSON lines, each flushed and fsynced before ``append`` returns."""

    MAX_LINE = 16 << 20
    """Longest line read (bytes): far beyond any record, it only bounds what a file
    that is not a journal (no newline in gigabytes) makes :meth:`records` allocate."""

    TORN_PREFIX = b'{"kind":'
    """How every record starts (``append`` writes ``kind`` first, ASCII-only JSON): a
    last line without its newline is a record cut short by a kill only if it starts so
    (or is shorter and a prefix of it); anything else is not ours to truncate."""

    def __init__(self, path: Path):
        self.path = path
        self._file = None

    def records(self) -> Iterator[tuple[int, dict]]:
        """(line number, record) for every line, read one at a time (a journal of a long
        campaign is large). A half-written last line is truncated away so the next append
        starts clean; any other line that is not a record is a :class:`CampaignError`
        naming the file and the line."""
        if not self.path.exists():
            return
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, before a truncation
        except OSError as e:
            raise CampaignError(f"{self.path}: cannot read: {e.strerror or e}") from None
        torn_at = None
        with f:
            offset = 0
            for number in itertools.count(1):
                line = f.readline(self.MAX_LINE + 1)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    if len(line) > self.MAX_LINE:
                        raise self.error(number, f"longer than {self.MAX_LINE} bytes")
                    if not self._torn(line):
                        raise self.error(number, "not a journal record, and no newline")
                    torn_at = offset
                    break
                offset += len(line)
                if line.strip():
                    yield number, self._parse(number, line)
        if torn_at is not None:
            with open(self.path, "r+b") as f:
                f.truncate(torn_at)
                f.flush()
                os.fsync(f.fileno())

    def load(self) -> list[dict]:
        return [record for _, record in self.records()]

    def _torn(self, line: bytes) -> bool:
        n = min(len(line), len(self.TORN_PREFIX))
        return line.isascii() and line[:n] == self.TORN_PREFIX[:n]

    def _parse(self, number: int, line: bytes) -> dict:
        try:
            record = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise self.error(number, "not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise self.error(number, f"not JSON: {e.msg} at column {e.colno}") from None
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            raise self.error(number, "a JSON value that is not a journal record")
        return record

    def error(self, number: int, why: str) -> CampaignError:
        """The error to raise for line ``number`` of a file that is not a journal."""
        return CampaignError(f"{self.path} is not a campaign journal (line {number}: {why})")

    def append(self, record: dict) -> None:
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class Failure:
    """One distinct failing test (copies only count)."""

    id: str
    test: str  # campaign test id
    name: str
    group: str
    outcome: str
    signature: str
    detail: str
    pre_key: list[str]
    spec: str  # relative to --out
    choices: list[int] = field(default_factory=list)
    n_ops: int = 0
    status: str = "found"  # found | minimized | flaky | error | not-minimized
    key: list[str] | None = None  # after minimization
    minimized: str = ""  # spec path
    min_ops: int = 0
    min_detail: str = ""
    duplicate_of: str = ""  # the first failure with the same minimized key
    copies: int = 1  # tests that failed this way (itself included)
    elapsed: float = 0.0

    @property
    def final_key(self) -> list[str]:
        return self.key or self.pre_key

    @property
    def ops(self) -> list[str]:
        return self.final_key[1].split("+") if self.final_key[1] else []


class Runs:
    """A set of integers as sorted runs ``[start, stop)``: the memory of the positions a
    campaign finished, which it finishes nearly in order, so a few runs however long it
    ran."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._stops: list[int] = []
        self._size = 0

    def __contains__(self, n: int) -> bool:
        i = bisect.bisect_right(self._starts, n) - 1
        return i >= 0 and n < self._stops[i]

    def __len__(self) -> int:
        return self._size

    @property
    def runs(self) -> int:
        return len(self._starts)

    def add(self, n: int) -> bool:
        """Add ``n``; False if it was there already."""
        i = bisect.bisect_right(self._starts, n) - 1
        if i >= 0 and n < self._stops[i]:
            return False
        joins_left = i >= 0 and self._stops[i] == n
        joins_right = i + 1 < len(self._starts) and self._starts[i + 1] == n + 1
        if joins_left and joins_right:
            self._stops[i] = self._stops.pop(i + 1)
            del self._starts[i + 1]
        elif joins_left:
            self._stops[i] = n + 1
        elif joins_right:
            self._starts[i + 1] = n
        else:
            self._starts.insert(i + 1, n)
            self._stops.insert(i + 1, n + 1)
        self._size += 1
        return True


class FinishedTests:
    """Which tests of a campaign finished, in memory that does not grow with their
    number. Test ``group#seed`` is at position ``seed × len(groups) + group index`` in
    the seed-major order, whatever the session's seed range; a shard of ``n`` runs every
    n-th position, so each residue modulo ``n`` keeps ``position // n`` in :class:`Runs`
    (consecutive, as the shard runs them)."""

    def __init__(self, groups: Sequence[str] = (), shards: int = 1):
        self._index = {name: i for i, name in enumerate(groups)}
        self._shards = max(1, shards)
        self._runs: dict[tuple[str, int], Runs] = {}

    def _position(self, group: str, seed: int) -> tuple[tuple[str, int], int]:
        """(which runs, number in them)."""
        index = self._index.get(group)
        if index is None:
            # A group the campaign's identity does not list (a state built from records
            # without a start line): its seeds on their own, exact but less compact.
            return (group, 0), seed
        quotient, residue = divmod(seed * len(self._index) + index, self._shards)
        return ("", residue), quotient

    def add(self, group: str, seed: int) -> bool:
        """Record a finished test; False if it had finished already."""
        which, n = self._position(group, seed)
        return self._runs.setdefault(which, Runs()).add(n)

    def __contains__(self, test: tuple[str, int]) -> bool:
        which, n = self._position(*test)
        runs = self._runs.get(which)
        return runs is not None and n in runs

    def __len__(self) -> int:
        return sum(len(r) for r in self._runs.values())

    @property
    def runs(self) -> int:
        return sum(r.runs for r in self._runs.values())


class Timeline:
    """Cumulative tests per outcome against campaign time, for the report's plot, in
    bounded memory: past :attr:`MAX_POINTS` points an outcome's series keeps every other
    one (and always its last), far finer than the plot's pixels still."""

    MAX_POINTS = 1024  # the plot is 560 pixels wide

    def __init__(self) -> None:
        self.series: dict[str, list[tuple[float, int]]] = {}
        self.counts: Counter[str] = Counter()
        self.end = 0.0

    def add(self, outcome: str, elapsed: float) -> None:
        # Journal order is time order; a clock that went back must not draw backwards.
        self.end = max(self.end, elapsed)
        self.counts[outcome] += 1
        points = self.series.setdefault(outcome, [(0.0, 0)])
        points.append((self.end, self.counts[outcome]))
        if len(points) > self.MAX_POINTS:
            points[:] = [*points[:-1:2], points[-1]]


@dataclass
class CampaignState:
    """What the journal says, aggregated as it is read: the report and the summary need
    counts per outcome, per operation and data type, coverage and a timeline, not the
    tests themselves, so the state does not grow with the number of tests run."""

    failures: dict[str, Failure] = field(default_factory=dict)
    identity: dict | None = None
    elapsed_offset: float = 0.0
    sessions: int = 0
    finished: FinishedTests = field(default_factory=FinishedTests)
    counts: Counter[str] = field(default_factory=Counter)  # tests per outcome
    per_operation: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    timeline: Timeline = field(default_factory=Timeline)
    generated: Any = None  # randomgraph.coverage.Coverage, made on first use

    @classmethod
    def from_records(cls, records: Sequence[dict]) -> CampaignState:
        st = cls()
        for r in records:
            st.apply(r)
        return st

    @classmethod
    def from_journal(cls, journal: Journal) -> CampaignState:
        """The state of the journal's campaign; a record it cannot use is a
        :class:`CampaignError` naming the journal and the line."""
        st = cls()
        for number, r in journal.records():
            try:
                st.apply(r)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                why = f"a bad {r['kind']!r} record: {type(e).__name__} {e}"
                raise journal.error(number, why) from None
        return st

    def apply(self, r: dict) -> None:
        kind = r.get("kind")
        if kind == "start":
            self.sessions += 1
            if self.identity is None and r.get("identity") is not None:
                self.adopt(r["identity"])
        elif kind == "test":
            self._apply_test(r)
        elif kind == "failure":
            f = Failure(**{k: v for k, v in r.items() if k in Failure.__dataclass_fields__})
            self.failures[f.id] = f
        elif kind == "minimized":
            f = self.failures.get(r["id"])
            if f is not None:
                f.status = r.get("status", "minimized")
                f.key = r.get("key")
                f.minimized = r.get("spec", "")
                f.min_ops = int(r.get("n_ops", 0))
                f.min_detail = r.get("detail", "")
                f.duplicate_of = r.get("duplicate_of", "")

    def adopt(self, identity: dict) -> None:
        """Take the campaign's identity (:meth:`CampaignSettings.identity`): its groups
        and shard count place the tests in :class:`FinishedTests`."""
        self.identity = identity
        if not len(self.finished):
            groups = [g["name"] for g in identity["groups"]]
            self.finished = FinishedTests(groups, int(identity["shard"][1]))

    def _apply_test(self, r: dict) -> None:
        outcome = Outcome(r["outcome"]).value  # an unknown outcome: a ValueError here
        elapsed = float(r.get("elapsed", 0.0))
        if not self.finished.add(r["group"], int(r["seed"])):
            return  # recorded twice (two runs in one --out, before the lock): once
        self.counts[outcome] += 1
        self.elapsed_offset = max(self.elapsed_offset, elapsed)
        self.timeline.add(outcome, elapsed)
        for op, dt in r.get("ops") or [NO_OPERATION]:
            self.per_operation.setdefault((op, dt), Counter())[outcome] += 1
        entries = r.get("cov") or []
        if entries:
            cov = self.coverage()
            cov.graphs += 1
            for op, dt, rank, version in entries:
                cov.counts[(OperationType[op], dt, int(rank), HalVersion[version])] += 1
        f = self.failures.get(r.get("copy_of") or "")
        if f is not None:
            f.copies += 1

    # --- queries ----------------------------------------------------------------------
    def is_finished(self, group: Group, seed: int) -> bool:
        return (group.name, seed) in self.finished

    @property
    def tests_run(self) -> int:
        return sum(self.counts.values())

    def next_failure_id(self) -> str:
        return f"F{len(self.failures) + 1:03d}"

    def pending_minimization(self) -> list[Failure]:
        return [f for f in self.failures.values() if f.status == "found"]

    def copy_of(
        self, key: Sequence[str], outcome: str, signature: str, ops: set[str]
    ) -> Failure | None:
        """The known failure a new failing test is a copy of, if any."""
        key = list(key)
        for f in self.failures.values():
            if key in (f.pre_key, f.key):
                return self.bug_of(f)
        for f in self.failures.values():
            if (
                f.key is not None
                and f.outcome == outcome
                and f.signature == signature
                and f.key[2] == key[2]
                and set(f.ops) <= ops
            ):
                return self.bug_of(f)
        return None

    def bug_of(self, f: Failure) -> Failure:
        seen = set()
        while f.duplicate_of and f.duplicate_of in self.failures and f.id not in seen:
            seen.add(f.id)
            f = self.failures[f.duplicate_of]
        return f

    def bugs(self) -> list[Failure]:
        """Distinct bugs, each with the copies of every failure merged into it."""
        out: dict[str, Failure] = {}
        extra: Counter[str] = Counter()
        for f in self.failures.values():
            b = self.bug_of(f)
            if b.id == f.id:
                out[f.id] = f
            else:
                extra[b.id] += f.copies
        return [replace(f, copies=f.copies + extra[f.id]) for f in out.values()]

    def coverage(self):
        """The generator coverage of every test so far (:class:`randomgraph.coverage.Coverage`)."""
        if self.generated is None:
            from randomgraph.coverage import Coverage

            self.generated = Coverage()
        return self.generated

    def outcome_counts(self) -> Counter[str]:
        return Counter(self.counts)

    @property
    def failed(self) -> bool:
        return any(Outcome(o).failed for o, n in self.counts.items() if n)


# ---------------------------------------------------------------------------------------
# Writing specs
# ---------------------------------------------------------------------------------------


def replay_driver(driver: str, outcome: str, timeout: float) -> str:
    """The ``--driver`` a replay should use: a hang or a crash replays isolated, so that
    it ends, and ends in a status (a driver may take its process down)."""
    if outcome in (Outcome.HANG.value, Outcome.CRASH.value) and "@isolated" not in driver:
        return f"{driver}@isolated:timeout={timeout:g}"
    return driver


def replay_command(spec: str | Path, driver: str, outcome: str, timeout: float) -> str:
    if outcome == Outcome.INCONSISTENT.value:
        return f"nnfuzz minimize {spec} --driver {driver} --check --metamorphic"
    if outcome == Outcome.REFERENCE_ERROR.value:
        return f"nnfuzz replay {spec} --driver reference"
    return f"nnfuzz replay {spec} --driver {replay_driver(driver, outcome, timeout)}"


def spec_text(
    test: TestModel,
    *,
    driver: str,
    actual: Sequence[np.ndarray] | None,
    lines: Sequence[str],
    criteria: str,
) -> str:
    """A failing test as the text of a ``.mod.py`` spec: ``lines`` as its header comment,
    the driver's ``actual`` outputs and the criteria it failed under."""
    header = (
        [*lines, f"nnfuzz-criteria: {criteria}"]
        if criteria and criteria != "generated"
        else list(lines)
    )
    return dump_spec(
        test, results={driver: list(actual)} if actual else None, header="\n".join(header)
    )


def write_spec(
    path: Path,
    test: TestModel,
    *,
    driver: str,
    actual: Sequence[np.ndarray] | None,
    lines: Sequence[str],
    criteria: str,
) -> None:
    """Write a failing test as a ``.mod.py`` spec (atomically: temp file, fsync, rename)."""
    text = spec_text(test, driver=driver, actual=actual, lines=lines, criteria=criteria)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------
# Running a campaign
# ---------------------------------------------------------------------------------------


@dataclass
class CampaignSummary:
    out: Path
    state: CampaignState
    ran: int  # tests run in this session
    interrupted: bool = False
    report: Path | None = None
    markdown: Path | None = None

    @property
    def failed(self) -> bool:
        return self.state.failed


Event = Callable[[str, dict], None]
"""``on_event(kind, info)``: "test", "failure" and "minimized" (journal entries), and from
worker processes "ready" (pid), "dispatched" (task, pid) and "lost" (task, why)."""


class _Runner:
    """The parent side: journal, dedup, spec files, scheduling."""

    def __init__(self, settings: CampaignSettings, progress, on_event: Event | None):
        self.s = settings
        self.out = Path(settings.out)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / FAILURES).mkdir(exist_ok=True)
        self.journal = Journal(self.out / JOURNAL)
        self.state = CampaignState.from_journal(self.journal)
        identity = settings.identity()
        if self.state.identity is not None and self.state.identity != identity:
            diff = [k for k in identity if self.state.identity.get(k) != identity[k]]
            raise CampaignError(
                f"{self.out} holds a campaign with other settings ({', '.join(diff)}); "
                "use another --out, or the same settings to resume it"
            )
        self.progress = progress
        self.on_event = on_event or (lambda kind, info: None)
        self.start = time.monotonic()
        self.base = self.state.elapsed_offset  # campaign time of the earlier sessions
        self.deadline = None if settings.minutes is None else self.start + settings.minutes * 60
        self.ran = 0
        self.journal.append(
            {
                "kind": "start",
                "identity": identity,
                "time": time.time(),
                "resumed": bool(self.state.tests_run),
            }
        )
        self.state.sessions += 1
        if self.state.identity is None:
            self.state.adopt(identity)
        if progress is not None:
            for outcome in self.state.counts:
                progress.counts[outcome] += 0  # show resumed outcomes' names

    def elapsed(self) -> float:
        return self.base + (time.monotonic() - self.start)

    # --- task sources -------------------------------------------------------------------
    def test_tasks(self) -> Iterator[tuple]:
        for _, group, seed in enumerate_tests(self.s.groups, self.s.seeds, self.s.shard):
            if self.state.is_finished(group, seed):
                continue
            yield ("test", group.name, seed)

    def stop_tests(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            return True
        return self.s.max_tests is not None and self.ran >= self.s.max_tests

    def minimize_task(self, f: Failure) -> tuple:
        spec_json = json.loads((self.out / FAILURES / f"{f.name}.json").read_text())
        payload = {
            "test": spec_json["test"],
            "criteria": spec_json.get("criteria", ""),
            "outcome": f.outcome,
            "signature": f.signature,
            "group": f.group,
            "choices": f.choices,
        }
        return ("minimize", f.id, payload)

    # --- results ----------------------------------------------------------------------
    def on_test(self, rec: TestRecord) -> Failure | None:
        """Record a finished test; returns a new failure to minimize, if any."""
        with stop_signals_deferred():
            return self._record_test(rec)

    def _record_test(self, rec: TestRecord) -> Failure | None:
        self.ran += 1
        entry: dict[str, Any] = {
            "kind": "test",
            "id": rec.id,
            "group": rec.group,
            "seed": rec.seed,
            "outcome": rec.outcome,
            "seconds": round(rec.seconds, 6),
            "elapsed": round(self.elapsed(), 3),
            "ops": rec.ops,
            "n_ops": rec.n_ops,
            "cov": rec.coverage,
        }
        if rec.detail:
            entry["detail"] = rec.detail[:500]
        new: Failure | None = None
        if Outcome(rec.outcome).failed and rec.key is not None:
            p = rec.failure
            signature = p.signature if p else ""
            known = self.state.copy_of(rec.key, rec.outcome, signature, {o for o, _ in rec.ops})
            if known is not None:
                entry["copy_of"] = known.id
            elif p is not None:
                new = self._new_failure(rec, p)
                entry["failure"] = new.id
        self.journal.append(entry)
        self.state.apply(entry)
        if self.progress is not None:
            self.progress.advance(rec.outcome)
        self.on_event("test", entry)
        return new

    def _new_failure(self, rec: TestRecord, p: FailurePayload) -> Failure:
        fid = self.state.next_failure_id()
        group = next(g for g in self.s.groups if g.name == rec.group)
        name = case_name(group, rec.seed)
        test = TestModel.from_json(p.test)
        spec = f"{FAILURES}/{name}.mod.py"
        outcome = Outcome(rec.outcome)
        first = rec.key[3] if rec.key and rec.key[3] != "-" else ""
        lines = [
            f"nnfuzz differential failure {fid}: {outcome.label}"
            + (f" (first diverging operation {first})" if first else ""),
            f"driver: {self.s.driver}; golden: {p.golden_mode or '-'}; criteria: {p.criteria}",
            f"detail: {_one_line(rec.detail)}",
            f"campaign test: {rec.id} (regenerate: {regenerate_command(group, rec.seed)})",
            # The path as stdout prints it: the command runs from where the campaign ran.
            f"replay: {replay_command(self.out / spec, self.s.driver, rec.outcome, self.s.timeout)}",
        ]
        write_spec(
            self.out / spec,
            test,
            driver=self.s.driver,
            actual=p.actual,
            lines=lines,
            criteria=p.criteria,
        )
        # The test JSON beside the spec: what minimization (perhaps after a restart) reads.
        _write_json(
            self.out / FAILURES / f"{name}.json",
            {"test": p.test, "criteria": p.criteria, "choices": p.choices},
        )
        record = {
            "kind": "failure",
            "id": fid,
            "test": rec.id,
            "name": name,
            "group": rec.group,
            "outcome": rec.outcome,
            "signature": p.signature,
            "detail": rec.detail[:500],
            "pre_key": rec.key,
            "spec": spec,
            "choices": p.choices,
            "n_ops": rec.n_ops,
            "status": "found" if self.s.minimize else "not-minimized",
            "elapsed": round(self.elapsed(), 3),
        }
        self.journal.append(record)
        self.state.apply(record)
        f = self.state.failures[fid]
        if self.progress is not None:
            self.progress.print(
                f"FAILED {fid} {rec.id}: {outcome.label}: {_one_line(rec.detail)[:160]}  -> {spec}"
            )
        self.on_event("failure", record)
        return f

    def on_minimized(self, mr: MinimizeRecord) -> None:
        with stop_signals_deferred():
            self._record_minimized(mr)

    def _record_minimized(self, mr: MinimizeRecord) -> None:
        f = self.state.failures[mr.failure]
        entry: dict[str, Any] = {
            "kind": "minimized",
            "id": f.id,
            "status": mr.status,
            "detail": mr.detail[:500],
        }
        if mr.status == "minimized" and mr.test is not None:
            test = TestModel.from_json(mr.test)
            spec = f"{FAILURES}/{test.name}.mod.py"
            outcome = Outcome(f.outcome)
            key = mr.key or f.pre_key
            lines = [
                f"nnfuzz differential failure {f.id}, minimized: {outcome.label}"
                + (f" (first diverging operation {key[3]})" if key[3] != "-" else ""),
                f"driver: {self.s.driver}; golden: {mr.golden_mode or '-'}; criteria: {mr.criteria}",
                f"detail: {_one_line(mr.detail)}",
                f"minimized from {f.spec} ({f.n_ops} -> {mr.n_ops} operations, {mr.checks} checks, {mr.seconds:.1f} s)",
                f"replay: {replay_command(self.out / spec, self.s.driver, f.outcome, self.s.timeout)}",
            ]
            write_spec(
                self.out / spec,
                test,
                driver=self.s.driver,
                actual=mr.actual,
                lines=lines,
                criteria=mr.criteria,
            )
            entry.update(
                spec=spec, key=key, n_ops=mr.n_ops, checks=mr.checks, seconds=round(mr.seconds, 3)
            )
            for other in self.state.failures.values():
                if other.id != f.id and other.key == key and other.status == "minimized":
                    entry["duplicate_of"] = self.state.bug_of(other).id
                    break
        self.journal.append(entry)
        self.state.apply(entry)
        if self.progress is not None:
            if mr.status == "minimized":
                dup = f" (same bug as {entry['duplicate_of']})" if entry.get("duplicate_of") else ""
                self.progress.print(
                    f"minimized {f.id}: {f.n_ops} -> {mr.n_ops} operations -> {entry['spec']}{dup}"
                )
            else:
                self.progress.print(f"not minimized {f.id}: {mr.status}: {mr.detail}")
        self.on_event("minimized", entry)

    def on_lost(self, task: tuple, why: str, outcome: Outcome) -> None:
        """A task whose worker died or stopped answering twice."""
        if task[0] == "test":
            group = next(g for g in self.s.groups if g.name == task[1])
            rec = TestRecord(case_id(group, task[2]), group.name, task[2], outcome.value, why)
            rec.key = [outcome.value, "", "-", "-"]
            try:
                # The test is regenerated here (no driver involved) so its spec is kept;
                # it is not minimized: candidates would take workers down with them.
                test, choices, coverage = CampaignWorker.make_test(group, task[2])
                golden, mode = compute_golden(test, group.golden or self.s.golden)
                result = DiffResult(outcome, signature="lost", expected=golden, golden_mode=mode)
                rec.key = list(failure_key(test, result))
                rec.ops, rec.n_ops, rec.coverage = (
                    _op_types(test),
                    len(test.main.operations),
                    coverage,
                )
                rec.failure = FailurePayload(
                    with_outputs(test, golden).to_json(),
                    list(choices),
                    None,
                    mode,
                    test.criteria or criteria_for(test),
                    "worker",
                    "lost",
                    None,
                )
            except Exception:  # the generator or reference failing here: keep the record
                rec.failure = None
            minimize = self.s.minimize
            self.s.minimize = False
            try:
                self.on_test(rec)
            finally:
                self.s.minimize = minimize
        else:
            self.on_minimized(MinimizeRecord(task[1], "error", detail=why))

    def close(self) -> None:
        self.journal.close()


def regenerate_command(group: Group, seed: int) -> str:
    parts = ["nnfuzz random", f"--ops {group.num_ops}", f"--dims {group.max_dim}"]
    for flag, values in (
        ("--op", group.operations),
        ("--type", group.data_types),
        ("--rank", group.ranks),
        ("--version", group.versions),
    ):
        if values:
            parts.append(f"{flag} {','.join(map(str, values))}")
    if group.criteria:
        parts.append(f"--criteria {group.criteria}")
    parts.append(f"--seeds {seed}:{seed + 1}")
    return " ".join(parts)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_campaign(
    settings: CampaignSettings,
    *,
    progress=None,
    on_event: Event | None = None,
    report: bool = True,
) -> CampaignSummary:
    """Run (or resume) a campaign; see the module docstring. KeyboardInterrupt stops it
    cleanly: everything finished so far is in the journal, and the report is written.
    A campaign already running in ``settings.out`` is a :class:`CampaignError`."""
    with campaign_lock(Path(settings.out)):
        runner = _Runner(settings, progress, on_event)
        interrupted = False
        try:
            if settings.jobs <= 0:
                _run_in_process(runner)
            else:
                _run_with_workers(runner, settings.jobs)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            runner.close()
            if progress is not None:
                progress.close()
        summary = CampaignSummary(runner.out, runner.state, runner.ran, interrupted)
        if report:
            from randomgraph.report import write_reports

            summary.report, summary.markdown = write_reports(
                runner.out, settings, state=runner.state
            )
    return summary


LOCK = ".lock"


@contextlib.contextmanager
def campaign_lock(out: Path, option: str = "--out") -> Iterator[None]:
    """Hold ``out/.lock`` while a campaign runs there: two at once numbered their failures
    over each other's in one journal. An flock, which the kernel drops when the process
    dies, so even a ``kill -9`` leaves no stale lock; the file holds the holder's pid.
    ``option`` names the command's option for the directory in the refusal (``nnfuzz
    fuzz`` locks its ``--work`` directory the same way)."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    # Close-on-exec: a driver's child process must not keep the lock after we end.
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise CampaignError(
                f"{out} is in use by another campaign{pid}: wait for it to end, or use "
                f"another {option}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _run_in_process(runner: _Runner) -> None:
    worker = CampaignWorker(runner.s)
    for f in runner.state.pending_minimization():
        runner.on_minimized(worker.handle(runner.minimize_task(f)))
    for task in runner.test_tasks():
        if runner.stop_tests():
            break
        runner.on_event("dispatched", {"task": task, "pid": os.getpid()})
        new = runner.on_test(worker.handle(task))
        if new is not None and runner.s.minimize:
            runner.on_minimized(worker.handle(runner.minimize_task(new)))


# --- worker processes ------------------------------------------------------------------


def _worker_main(conn, settings: CampaignSettings) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    worker = CampaignWorker(settings)
    try:
        conn.send(("ready", os.getpid()))
        while (task := conn.recv()) is not None:
            conn.send(("done", worker.handle(task)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent is gone (killed): its journal holds everything finished


class _Proc:
    def __init__(self, ctx, settings: CampaignSettings):
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, settings), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.task: tuple | None = None
        self.deadline = 0.0
        self.ready = False

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


JOBS_PER_CPU = 4
"""Worker processes per CPU at most: each runs a driver and the reference flat out (or
waits on an isolated driver's process), so more only cost memory (~12 MB each)."""


def max_jobs() -> int:
    """The most worker processes a campaign starts (``--jobs``' upper bound)."""
    return JOBS_PER_CPU * (os.cpu_count() or 1)


def _task_budget(settings: CampaignSettings, task: tuple) -> float:
    """Seconds a worker may take before the parent declares it hung: the driver
    watchdog and the minimization budget bound the real work; this is the backstop."""
    base = 4 * settings.timeout + 120.0
    if task[0] == "minimize":
        base += settings.minimize_seconds * 2
    return base


@contextlib.contextmanager
def _environ_defaults(defaults: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``defaults`` for the variables it does not set, restored after."""
    added = {k: v for k, v in defaults.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _run_with_workers(runner: _Runner, jobs: int) -> None:
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["numpy", "randomgraph.campaign"])
    s = runner.s
    queue: list[tuple] = [runner.minimize_task(f) for f in runner.state.pending_minimization()]
    tests = runner.test_tasks()
    # No more workers than tasks to start with (12 tests need no 50 processes), nor than
    # the CPUs can keep busy.
    first = list(itertools.islice(tests, max(0, jobs - len(queue))))
    tests = itertools.chain(first, tests)
    jobs = max(1, min(jobs, max_jobs(), len(queue) + len(first)))
    # The forkserver, started with the first worker, gives each worker its environment
    # (and numpy, preloaded): workers side by side get one BLAS thread each.
    with _environ_defaults(SINGLE_THREADED_BLAS if jobs > 1 else {}):
        procs = [_Proc(ctx, s) for _ in range(jobs)]
    tests_done = False
    attempts: Counter[tuple] = Counter()

    def next_task() -> tuple | None:
        nonlocal tests_done
        if queue:
            return queue.pop(0)
        if tests_done or runner.stop_tests():
            tests_done = True
            return None
        t = next(tests, None)
        if t is None:
            tests_done = True
        return t

    def replace_proc(i: int) -> None:
        procs[i].kill()
        procs[i] = _Proc(ctx, s)

    try:
        while True:
            for p in procs:
                if p.ready and p.task is None:
                    task = next_task()
                    if task is None:
                        break
                    try:
                        p.conn.send(task)
                    except OSError:
                        # It died idle (the OOM killer, a signal): no fault of the task's.
                        # The loop below finds it dead and replaces it.
                        queue.insert(0, task)
                        p.ready = False
                        continue
                    p.task = task
                    p.deadline = time.monotonic() + _task_budget(s, task)
                    runner.on_event("dispatched", {"task": task, "pid": p.proc.pid})
            busy = [p for p in procs if p.task is not None or not p.ready]
            if not any(p.task is not None for p in procs) and tests_done and not queue:
                break
            waitables = [p.conn for p in busy] + [p.proc.sentinel for p in busy]
            ready = set(wait(waitables, timeout=0.5)) if waitables else set()
            for i, p in enumerate(procs):
                message = None
                dead = False
                if p.conn in ready:
                    try:
                        message = p.conn.recv()
                    except (EOFError, OSError):
                        dead = True
                elif p.proc.sentinel in ready or not p.proc.is_alive():
                    dead = True
                if message is not None:
                    if message[0] == "ready":
                        p.ready = True
                        runner.on_event("ready", {"pid": p.proc.pid})
                        continue
                    task, p.task = p.task, None
                    result = message[1]
                    if isinstance(result, TestRecord):
                        new = runner.on_test(result)
                        if new is not None and s.minimize:
                            queue.append(runner.minimize_task(new))
                    else:
                        runner.on_minimized(result)
                    continue
                hung = p.task is not None and time.monotonic() > p.deadline
                if dead or hung:
                    task = p.task
                    code = p.proc.exitcode
                    replace_proc(i)
                    if task is None:
                        continue
                    attempts[task] += 1
                    why = (
                        f"the worker process stopped answering for {_task_budget(s, task):.0f} s"
                        if hung and not dead
                        else f"the worker process died ({_exit_text(code)})"
                    )
                    runner.on_event("lost", {"task": task, "why": why})
                    if attempts[task] >= 2:
                        runner.on_lost(
                            task, why, Outcome.HANG if hung and not dead else Outcome.CRASH
                        )
                    else:
                        queue.insert(0, task)  # once more, in a fresh worker
    finally:
        for p in procs:
            with contextlib.suppress(Exception):
                if p.proc.is_alive() and p.task is None and p.ready:
                    p.conn.send(None)
        for p in procs:
            p.proc.join(0.5)
            if p.proc.is_alive():
                p.kill()


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit status {code}"


# ---------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------

TABLE_OUTCOMES = [o.value for o in Outcome]


def outcome_table(state: CampaignState) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of outcomes per operation and data type. A test counts once for
    each distinct (operation, data type) it contains."""
    per = state.per_operation
    present = [o for o in TABLE_OUTCOMES if any(c[o] for c in per.values())]
    header = ["operation", "data type", "tests", *present]
    rows = []
    for (op, dt), c in sorted(per.items()):
        rows.append([op, dt, str(sum(c.values())), *(str(c[o]) if c[o] else "" for o in present)])
    return header, rows


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = (
        [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        if rows
        else [len(h) for h in header]
    )
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


__all__ = [
    "ANDROID_SEEDS",
    "PRESET_NAMES",
    "CampaignError",
    "CampaignSettings",
    "CampaignState",
    "CampaignSummary",
    "CampaignWorker",
    "Failure",
    "Filters",
    "Group",
    "Journal",
    "campaign_lock",
    "case_id",
    "case_name",
    "enumerate_tests",
    "format_table",
    "max_jobs",
    "outcome_table",
    "parse_seeds",
    "parse_shard",
    "preset_groups",
    "replay_command",
    "run_campaign",
]
