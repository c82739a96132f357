"""Test-case reduction: a failing test made as small as it can be while it fails the same way.

    m = minimize(checker, test, result, choices=graph.choices, regenerate=regen)
    m.test, m.result      # the smallest failing test found, and how it fails

"The same way" (:func:`randomgraph.differential.same_failure`): the same outcome class
and the same signature — the type of the first diverging operation for a wrong result,
the status for a rejection or failed preparation/execution, the exception type for a
crash, the relation for a metamorphic inconsistency. Holding the signature keeps the
reducer from sliding from one bug onto another.

Two phases, each a greedy fixpoint under one budget (time and number of checks):

1. **Choice sequence** (when the test came from the generator with its recorded choices
   and a way to regenerate): cut the tail, fewer operations (the same choices under a
   smaller ``num_ops``: the graph's first operations are unchanged), delete blocks of
   choices, zero blocks, lower single values. Every candidate is *regenerated* by the
   generator from the edited sequence, so it is a valid graph by construction; a smaller
   sequence means fewer, simpler decisions (the simplest choice is always 0).
2. **Graph** (any test, also a spec from elsewhere — ``nnfuzz minimize``):
   drop operations — a kept operation that read a dropped one's output now reads a new
   model input fed with the reference's value of that edge, so what remains computes
   exactly what it did inside the big graph, and outputs left without a reader become
   model outputs; shrink dimensions (a size shared by the inputs and constants, or one
   axis of one input) with every other shape re-inferred by the reference; simplify
   values (zeros, ones, integers). A candidate the reference cannot run is discarded.

Every check recomputes the golden results, so the minimized test carries its own.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from driver.hal.types import QUANT_RANGE, OperandLifeTime, OperandType, is_scalar_type
from randomgraph.differential import (
    DifferentialChecker,
    DiffResult,
    Outcome,
    ReferenceError_,
    copy_operand,
    copy_test,
    expose_intermediates,
    producers,
    reference_values,
    run_reference,
    same_failure,
)
from randomgraph.testmodel import TestModel, TestOperand, TestOperation, TestSubgraph

L = OperandLifeTime
T = OperandType

ProgressCallback = Callable[[str | None], None]
"""Told of each check (None) and each accepted reduction (its step, as in
:attr:`Minimized.steps`), for a live display."""

Regenerate = Callable[[Sequence[int], int | None], "tuple[TestModel, Sequence[int]] | None"]
"""``(choices, num_ops or None for the original) -> (test, the choices it recorded)``, or
None if the generator cannot make a graph from them."""


@dataclass
class MinimizeOptions:
    seconds: float = 30.0  # whole budget for one failure
    max_checks: int = 3000
    choices: bool = True  # phase 1, when choices and regenerate are given
    graph: bool = True  # phase 2: drop operations
    dims: bool = True
    values: bool = True
    choice_share: float = 0.4  # part of the budget phase 1 may use


@dataclass
class Minimized:
    test: TestModel
    result: DiffResult
    choices: tuple[int, ...] | None = None
    num_ops: int | None = None  # the generator size the minimized choices use
    checks: int = 0
    seconds: float = 0.0
    steps: list[str] = field(default_factory=list)  # accepted reductions, in order
    interrupted: bool = False  # stopped by KeyboardInterrupt: the smallest failing test so far

    @property
    def operations(self) -> int:
        return len(self.test.main.operations)


class _Budget:
    def __init__(self, options: MinimizeOptions):
        self.start = time.monotonic()
        self.deadline = self.start + options.seconds
        self.max_checks = options.max_checks
        self.checks = 0
        self.interrupted = False

    def exhausted(self, deadline: float | None = None) -> bool:
        return (
            self.interrupted
            or self.checks >= self.max_checks
            or time.monotonic() > min(self.deadline, deadline or self.deadline)
        )


def fingerprint(test: TestModel) -> str:
    """A digest of everything that makes a test (not its name)."""
    d = test.to_json()
    d.pop("test", None)
    return hashlib.blake2b(json.dumps(d, sort_keys=True).encode(), digest_size=16).hexdigest()


class Minimizer:
    """Reduces one failure. ``target`` is how the original test fails."""

    def __init__(
        self,
        checker: DifferentialChecker,
        target: DiffResult,
        options: MinimizeOptions | None = None,
        on_progress: ProgressCallback | None = None,
    ):
        self.checker = checker
        self.target = target
        self.options = options or MinimizeOptions()
        self.budget = _Budget(self.options)
        self._seen: dict[str, DiffResult | None] = {}
        self.steps: list[str] = []
        self.on_progress = on_progress

    def _accept(self, step: str) -> None:
        self.steps.append(step)
        if self.on_progress is not None:
            self.on_progress(step)

    # --- the predicate -------------------------------------------------------------
    def reproduces(self, test: TestModel | None) -> DiffResult | None:
        """The candidate's result if it fails like the target, else None."""
        if test is None or not test.main.operations:
            return None
        key = fingerprint(test)
        if key in self._seen:
            return self._seen[key]
        self.budget.checks += 1
        try:
            result = self.checker.check(test)
        except KeyboardInterrupt:
            # Every phase now sees a spent budget and returns the smallest failing test
            # it has: an interrupted minimization keeps its progress.
            self.budget.interrupted = True
            return None
        ok = result if same_failure(self.target, result) else None
        self._seen[key] = ok
        if self.on_progress is not None:
            self.on_progress(None)
        return ok

    # --- phase 1: the choice sequence ------------------------------------------------
    def shrink_choices(
        self,
        test: TestModel,
        result: DiffResult,
        choices: Sequence[int],
        regenerate: Regenerate,
        num_ops: int | None,
    ) -> tuple[TestModel, DiffResult, tuple[int, ...], int | None]:
        deadline = self.budget.start + self.options.seconds * self.options.choice_share
        best = _strip(choices)
        best_ops = num_ops

        def attempt(cand: Sequence[int], ops: int | None, what: str) -> bool:
            nonlocal best, best_ops, test, result
            if self.budget.exhausted(deadline):
                return False
            try:
                made = regenerate(cand, ops)
            except Exception:  # a generator failure is not a candidate
                return False
            if made is None:
                return False
            t, recorded_choices = made
            r = self.reproduces(t)
            if r is None:
                return False
            recorded = _strip(recorded_choices)
            if not _simpler(recorded, best) and (ops or 0) >= (best_ops or 0):
                return False
            best, best_ops, test, result = recorded, ops, t, r
            self._accept(f"choices: {what} ({len(best)} choices)")
            return True

        improved = True
        rounds = 0
        # Each round runs every pass; a few rounds reach a fixpoint in practice, and the
        # cap keeps big words (bulk-value seeds) from being halved one round at a time.
        while improved and rounds < 6 and not self.budget.exhausted(deadline):
            improved = False
            rounds += 1
            n = len(best)
            # Fewer operations: the same choices make the same first operations.
            if best_ops is not None and best_ops > 1:
                for k in sorted({1, 2, best_ops // 4, best_ops // 2} - {0}):
                    if k < best_ops and attempt(best, k, f"{k} operations"):
                        improved = True
                        break
            for frac in (0.0, 0.25, 0.5, 0.75):
                k = int(n * frac)
                if k < n and attempt(best[:k], best_ops, f"cut at {k}"):
                    improved = True
                    break
            if improved:
                continue
            for size in (32, 16, 8, 4, 2, 1):
                i = len(best) - size
                while i >= 0 and not self.budget.exhausted(deadline):
                    if attempt((*best[:i], *best[i + size :]), best_ops, f"delete {size} at {i}"):
                        improved = True
                        i = min(i, len(best) - size)
                    else:
                        i -= size
            for size in (8, 2, 1):
                i = 0
                while i < len(best) and not self.budget.exhausted(deadline):
                    block = best[i : i + size]
                    if any(block) and attempt(
                        (*best[:i], *(0,) * len(block), *best[i + size :]),
                        best_ops,
                        f"zero {size} at {i}",
                    ):
                        improved = True
                    i += size
            for i in range(len(best)):
                if self.budget.exhausted(deadline):
                    break
                v = best[i] if i < len(best) else 0
                for lower in _lower_values(v):
                    if i < len(best) and attempt(
                        (*best[:i], lower, *best[i + 1 :]), best_ops, f"lower choice {i}"
                    ):
                        improved = True
                        break
        return test, result, best, best_ops

    # --- phase 2: the graph -------------------------------------------------------------
    def reduce_operations(
        self, test: TestModel, result: DiffResult
    ) -> tuple[TestModel, DiffResult]:
        while len(test.main.operations) > 1 and not self.budget.exhausted():
            try:
                values = reference_values(test)
            except ReferenceError_:
                break
            except KeyboardInterrupt:
                self.budget.interrupted = True
                break
            accepted = False
            for what, keep in _keep_sets(test, result.first_op):
                if self.budget.exhausted():
                    break
                cand = sub_test(test, keep, values)
                r = self.reproduces(cand)
                if r is not None:
                    test, result = cand, r
                    self._accept(f"graph: {what} ({len(test.main.operations)} operations)")
                    accepted = True
                    break
            if not accepted:
                break
        return test, result

    def shrink_dims(self, test: TestModel, result: DiffResult) -> tuple[TestModel, DiffResult]:
        improved = True
        while improved and not self.budget.exhausted():
            improved = False
            for what, make in _dim_candidates(test):
                if self.budget.exhausted():
                    break
                cand = make()
                r = self.reproduces(cand)
                if r is not None:
                    test, result = cand, r
                    self._accept(f"dims: {what}")
                    improved = True
                    break
        return test, result

    def simplify_values(self, test: TestModel, result: DiffResult) -> tuple[TestModel, DiffResult]:
        for i in _value_operands(test):
            for what, values in _simpler_values(test.main.operands[i]):
                if self.budget.exhausted():
                    return test, result
                cand = copy_test(test)
                cand.main.operands[i].data = values
                r = self.reproduces(cand)
                if r is not None:
                    test, result = cand, r
                    self._accept(f"values: operand {i} {what}")
                    break
        return test, result


def minimize(
    checker: DifferentialChecker,
    test: TestModel,
    result: DiffResult,
    *,
    choices: Sequence[int] | None = None,
    regenerate: Regenerate | None = None,
    num_ops: int | None = None,
    options: MinimizeOptions | None = None,
    on_progress: ProgressCallback | None = None,
) -> Minimized:
    """The smallest test found that fails like ``result`` (``test`` itself if nothing
    smaller does). ``choices``/``regenerate`` enable phase 1 (see the module docstring).
    ``on_progress`` hears of every check (None) and every accepted reduction (its step)."""
    saved = checker.options
    if result.outcome != Outcome.INCONSISTENT and saved.metamorphic:
        # A candidate that passes the differential check does not reproduce anyway.
        checker.options = replace(saved, metamorphic=())
    try:
        return _minimize(checker, test, result, choices, regenerate, num_ops, options, on_progress)
    finally:
        checker.options = saved


def _minimize(
    checker, test, result, choices, regenerate, num_ops, options, on_progress
) -> Minimized:
    m = Minimizer(checker, result, options, on_progress)
    opts = m.options
    min_choices: tuple[int, ...] | None = tuple(choices) if choices is not None else None
    min_ops = num_ops
    if opts.choices and choices is not None and regenerate is not None:
        test, result, min_choices, min_ops = m.shrink_choices(
            test, result, choices, regenerate, num_ops
        )
    graph_changed = False
    if opts.graph:
        before = len(test.main.operations)
        test, result = m.reduce_operations(test, result)
        graph_changed = len(test.main.operations) != before
    if opts.dims:
        n = len(m.steps)
        test, result = m.shrink_dims(test, result)
        graph_changed |= len(m.steps) != n
    if opts.values:
        n = len(m.steps)
        test, result = m.simplify_values(test, result)
        graph_changed |= len(m.steps) != n
    if graph_changed:
        min_choices = None  # the graph no longer comes from a choice sequence
    return Minimized(
        test,
        result,
        min_choices,
        min_ops if min_choices is not None else None,
        m.budget.checks,
        time.monotonic() - m.budget.start,
        m.steps,
        m.budget.interrupted,
    )


# ---------------------------------------------------------------------------------------
# Choice-sequence helpers
# ---------------------------------------------------------------------------------------


def _strip(choices: Iterable[int]) -> tuple[int, ...]:
    """Trailing zeros say nothing (a replay past the end draws 0)."""
    c = list(choices)
    while c and c[-1] == 0:
        c.pop()
    return tuple(c)


def _simpler(a: Sequence[int], b: Sequence[int]) -> bool:
    """Shortlex order: shorter, then lexicographically smaller."""
    return (len(a), tuple(a)) < (len(b), tuple(b))


def _lower_values(v: int) -> list[int]:
    if v <= 0:
        return []
    out = [0]
    x = v
    for _ in range(6):  # a few halvings: big words (bulk-value seeds) are not searched
        x //= 2
        if x <= 0:
            break
        out.append(x)
    if v - 1 not in out and v - 1 > 0:
        out.append(v - 1)
    return out


# ---------------------------------------------------------------------------------------
# Graph reduction helpers
# ---------------------------------------------------------------------------------------


def _keep_sets(test: TestModel, first_op: int | None) -> Iterator[tuple[str, list[int]]]:
    """Candidate sets of operations to keep, most aggressive first."""
    n = len(test.main.operations)
    order = list(range(n))
    if first_op is not None and 0 <= first_op < n:
        yield f"keep only operation {first_op}", [first_op]
        if first_op + 1 < n:
            yield f"drop operations after {first_op}", list(range(first_op + 1))
        order.remove(first_op)
        order.insert(0, first_op)
    if n <= 64:
        for k in order:
            if k != first_op:
                yield f"keep only operation {k}", [k]
    size = n // 2
    while size >= 1:
        for start in range(n - size, -1, -size):
            keep = [k for k in range(n) if not start <= k < start + size]
            if keep:
                yield f"drop operations {start}..{start + size - 1}", keep
        size //= 2


def sub_test(
    test: TestModel, keep: Sequence[int], values: dict[int, np.ndarray]
) -> TestModel | None:
    """The test made of the main-subgraph operations ``keep`` only. A kept operation's
    input written by a dropped operation becomes a model input holding ``values[i]``; a
    kept operation's output that a dropped operation read, or that nothing reads, becomes
    a model output. Expected outputs are left empty (the checker computes them)."""
    main = test.main
    keep_set = set(keep)
    kept = [op for k, op in enumerate(main.operations) if k in keep_set]
    if not kept:
        return None
    writer = producers(test)
    read_by_kept = Counter(i for op in kept for i in op.inputs)
    read_by_dropped = {
        i for k, op in enumerate(main.operations) if k not in keep_set for i in op.inputs
    }
    used = sorted({i for op in kept for i in (*op.inputs, *op.outputs)})
    remap = {old: new for new, old in enumerate(used)}
    operands: list[TestOperand] = []
    new_inputs: list[int] = []
    new_outputs: list[int] = []
    for old in used:
        o = copy_operand(main.operands[old])
        if old in writer and writer[old] not in keep_set:
            if old not in values:
                return None
            arr = np.asarray(values[old])
            o.lifetime = L.SUBGRAPH_INPUT
            o.data = arr.reshape(-1).tolist()
            if not is_scalar_type(o.type):
                o.dimensions = list(arr.shape)
            new_inputs.append(remap[old])
        elif old in writer:
            if o.lifetime == L.SUBGRAPH_OUTPUT or old in read_by_dropped or read_by_kept[old] == 0:
                if o.lifetime != L.SUBGRAPH_OUTPUT:
                    new_outputs.append(remap[old])
                o.lifetime = L.SUBGRAPH_OUTPUT
            o.data = []
        operands.append(o)
    inputs = [remap[i] for i in main.input_indexes if i in remap] + new_inputs
    outputs = [remap[i] for i in main.output_indexes if i in remap] + new_outputs
    sub = TestSubgraph(
        operands,
        [
            TestOperation(op.type, [remap[i] for i in op.inputs], [remap[i] for i in op.outputs])
            for op in kept
        ],
        inputs,
        outputs,
        main.name,
    )
    sub.fill_consumers()
    t = copy_test(test)
    t.main = sub
    if not any(o.lifetime == L.SUBGRAPH for o in operands):
        t.referenced = []
    return t


def _is_data_tensor(o: TestOperand) -> bool:
    return (
        not is_scalar_type(o.type)
        and bool(o.data)
        and o.lifetime in (L.SUBGRAPH_INPUT, L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
    )


def _dim_candidates(test: TestModel) -> Iterator[tuple[str, Callable[[], TestModel | None]]]:
    ops = test.main.operands
    sizes = sorted(
        {d for o in ops if _is_data_tensor(o) for d in o.dimensions if d > 1}, reverse=True
    )
    for v in sizes:
        for target in sorted({1, v // 2}):
            if 0 < target < v:
                yield (
                    f"every size {v} -> {target}",
                    lambda v=v, target=target: resized(
                        test, {(i, a): target for i, a in _where(test, v)}
                    ),
                )
    for i, o in enumerate(ops):
        if o.lifetime != L.SUBGRAPH_INPUT or not _is_data_tensor(o):
            continue
        for a, d in enumerate(o.dimensions):
            for target in sorted({1, d // 2}):
                if 0 < target < d:
                    yield (
                        f"operand {i} axis {a}: {d} -> {target}",
                        lambda i=i, a=a, target=target: resized(test, {(i, a): target}),
                    )


def _where(test: TestModel, size: int) -> list[tuple[int, int]]:
    return [
        (i, a)
        for i, o in enumerate(test.main.operands)
        if _is_data_tensor(o)
        for a, d in enumerate(o.dimensions)
        if d == size
    ]


def resized(test: TestModel, changes: dict[tuple[int, int], int]) -> TestModel | None:
    """``test`` with input/constant tensors cut to new sizes (``{(operand, axis): size}``,
    keeping the leading elements); every other operand's dims are re-inferred by running
    the reference. None if the reference rejects the result."""
    t = copy_test(test)
    main = t.main
    for i, o in enumerate(main.operands):
        axes = {a: s for (j, a), s in changes.items() if j == i}
        if not axes:
            continue
        arr = o.array()
        index = tuple(slice(0, axes.get(a, d)) for a, d in enumerate(arr.shape))
        arr = arr[index]
        o.dimensions = list(arr.shape)
        o.data = arr.reshape(-1).tolist()
        cq = o.channel_quant
        if cq is not None and cq.channel_dim in axes:
            o.channel_quant = type(cq)(cq.channel_dim, tuple(cq.scales[: axes[cq.channel_dim]]))
    written = set(producers(t))
    keep_unknown = {
        i for i in written if 0 in main.operands[i].dimensions or not main.operands[i].dimensions
    }
    for i in written:
        o = main.operands[i]
        if not is_scalar_type(o.type):
            o.dimensions = [0] * len(o.dimensions)
            o.data = []
    try:
        exposed, out_idx = expose_intermediates(t)
        model, inputs = exposed.to_hal_model()
        outs, _ = run_reference(model, inputs)
    except (ReferenceError_, ValueError, TypeError):
        return None
    for i, arr in zip(out_idx, outs):
        o = main.operands[i]
        if i not in keep_unknown and not is_scalar_type(o.type):
            o.dimensions = list(np.shape(arr))
    return t


def _value_operands(test: TestModel) -> list[int]:
    """Inputs first, then constant tensors (their values are often parameters, which
    the reference then rejects; those candidates simply fail)."""
    ops = test.main.operands
    inputs = [i for i in test.main.input_indexes if _is_data_tensor(ops[i])]
    consts = [i for i, o in enumerate(ops) if o.lifetime != L.SUBGRAPH_INPUT and _is_data_tensor(o)]
    return inputs + consts


def _simpler_values(o: TestOperand) -> Iterator[tuple[str, list]]:
    arr = o.array()
    n = arr.size
    if o.type in (T.TENSOR_BOOL8,):
        for v in (False, True):
            if not (arr == v).all():
                yield f"all {v}", [v] * n
        return
    if o.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        flat = arr.astype(np.float64).reshape(-1)
        for what, new in (
            ("zeros", np.zeros(n)),
            ("ones", np.ones(n)),
            ("rounded to integers", np.round(flat)),
            ("rounded to halves", np.round(flat * 2) / 2),
        ):
            if not np.array_equal(new, flat):
                yield what, new.tolist()
        return
    base = o.zero_point
    lo, hi = QUANT_RANGE.get(o.type, (-(2**31), 2**31 - 1))
    flat = arr.astype(np.int64).reshape(-1)
    for what, v in (("zero point", base), ("zero point + 1", base + 1), ("zeros", 0), ("ones", 1)):
        if lo <= v <= hi and not (flat == v).all():
            yield f"all {what}", [int(v)] * n


__all__ = [
    "MinimizeOptions",
    "Minimized",
    "Minimizer",
    "fingerprint",
    "minimize",
    "resized",
    "sub_test",
]
