"""Dimensions as random variables, and a solver that never hangs.

A rule that creates tensors with related dimensions (a filter no larger than its padded
input, a depth that is a multiple of a block size squared, a product of dims under the
element bound) declares :class:`DimVar` variables with ranges and constraints, then
:meth:`DimSolver.solve` fixes them. Dims that come from tensors already in the graph are
variables with a single value.

Solving is Android's scheme: propagate ranges to a fixpoint (bounded passes), then
freeze the free variables one at a time (value drawn from the choice source, biased to
small values), propagating after each. A contradiction restarts the freezing (a bounded
number of attempts); the last attempt freezes every variable at its lowest value. If
that fails too the problem is reported unsatisfiable (:class:`Unsatisfiable`) and the
caller tries something else: nothing loops without a bound.

Constraints: ``eq(a, b)``, ``le(a, b, offset)`` (a <= b + offset), ``mul(a, k, b)``
(a == k * b), ``multiple(a, k)`` (a % k == 0), ``prod_le(vars, bound)``. Derived
variables (the left side of ``mul`` and ``eq``) are never chosen directly; they follow
from the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from randomgraph.choices import ChoiceSource


class Unsatisfiable(Exception):
    """The constraints have no solution the solver could find."""


@dataclass(eq=False, slots=True)
class DimVar:
    lo: int
    hi: int
    name: str = ""
    derived: bool = False

    @property
    def fixed(self) -> bool:
        return self.lo == self.hi

    @property
    def value(self) -> int:
        if self.lo != self.hi:
            raise ValueError(f"dimension {self.name or '?'} is not solved ({self.lo}..{self.hi})")
        return self.lo


@dataclass
class DimSolver:
    src: ChoiceSource
    max_dim: int = 1000
    max_elements: int = 10000
    attempts: int = 4
    variables: list[DimVar] = field(default_factory=list)
    _eq: list[tuple[DimVar, DimVar]] = field(default_factory=list)
    _le: list[tuple[DimVar, DimVar, int]] = field(default_factory=list)
    _mul: list[tuple[DimVar, int, DimVar]] = field(default_factory=list)
    _multiple: list[tuple[DimVar, int]] = field(default_factory=list)
    _prod: list[tuple[tuple[DimVar, ...], int]] = field(default_factory=list)

    # --- declaring ----------------------------------------------------------------
    def var(self, lo: int = 1, hi: int | None = None, name: str = "") -> DimVar:
        v = DimVar(lo, self.max_dim if hi is None else hi, name)
        self.variables.append(v)
        return v

    def const(self, value: int, name: str = "") -> DimVar:
        return self.var(value, value, name)

    def eq(self, a: DimVar, b: DimVar) -> None:
        a.derived = True
        self._eq.append((a, b))

    def le(self, a: DimVar, b: DimVar, offset: int = 0) -> None:
        self._le.append((a, b, offset))

    def mul(self, a: DimVar, k: int, b: DimVar) -> None:
        a.derived = True
        self._mul.append((a, k, b))

    def multiple(self, a: DimVar, k: int) -> None:
        self._multiple.append((a, k))

    def prod_le(self, vs: Sequence[DimVar], bound: int | None = None) -> None:
        self._prod.append((tuple(vs), self.max_elements if bound is None else bound))

    def tensor(self, rank: int, *, lo: int = 1, hi: int | None = None) -> list[DimVar]:
        """``rank`` fresh dims whose product is within the element bound."""
        vs = [self.var(lo, hi) for _ in range(rank)]
        self.prod_le(vs)
        return vs

    # --- solving ------------------------------------------------------------------
    def _propagate(self) -> bool:
        """Narrow ranges to a fixpoint (at most 20 passes); False on a contradiction."""
        for _ in range(20):
            changed = False
            for a, b in self._eq:
                lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
                if (a.lo, a.hi) != (lo, hi) or (b.lo, b.hi) != (lo, hi):
                    a.lo = b.lo = lo
                    a.hi = b.hi = hi
                    changed = True
            for a, b, off in self._le:
                if a.hi > b.hi + off:
                    a.hi = b.hi + off
                    changed = True
                if b.lo < a.lo - off:
                    b.lo = a.lo - off
                    changed = True
            for a, k, b in self._mul:
                lo, hi = max(a.lo, k * b.lo), min(a.hi, k * b.hi)
                if (lo, hi) != (a.lo, a.hi):
                    a.lo, a.hi = lo, hi
                    changed = True
                blo, bhi = max(b.lo, -(-a.lo // k)), min(b.hi, a.hi // k)
                if (blo, bhi) != (b.lo, b.hi):
                    b.lo, b.hi = blo, bhi
                    changed = True
            for a, k in self._multiple:
                lo = -(-a.lo // k) * k
                hi = (a.hi // k) * k
                if (lo, hi) != (a.lo, a.hi):
                    a.lo, a.hi = lo, hi
                    changed = True
            for vs, bound in self._prod:
                total = 1
                for v in vs:
                    total *= max(v.lo, 1)
                if total > bound:
                    return False
                for v in vs:
                    others = total // max(v.lo, 1)
                    hi = bound // max(others, 1)
                    if v.hi > hi:
                        v.hi = hi
                        changed = True
            if any(v.lo > v.hi for v in self.variables):
                return False
            if not changed:
                return True
        return all(v.lo <= v.hi for v in self.variables)

    def _snapshot(self) -> list[tuple[int, int]]:
        return [(v.lo, v.hi) for v in self.variables]

    def _restore(self, snap: list[tuple[int, int]]) -> None:
        for v, (lo, hi) in zip(self.variables, snap):
            v.lo, v.hi = lo, hi

    def _check(self) -> bool:
        return (
            all(v.fixed for v in self.variables)
            and all(a.lo == b.lo for a, b in self._eq)
            and all(a.lo <= b.lo + off for a, b, off in self._le)
            and all(a.lo == k * b.lo for a, k, b in self._mul)
            and all(a.lo % k == 0 for a, k in self._multiple)
            and all(_prod(vs) <= bound for vs, bound in self._prod)
        )

    def solve(self) -> list[int]:
        """Fix every variable; returns their values in declaration order."""
        if not self._propagate():
            raise Unsatisfiable("the dimension constraints contradict each other")
        start = self._snapshot()
        for attempt in range(self.attempts + 1):
            self._restore(start)
            lowest = attempt == self.attempts
            ok = True
            # Free variables in declaration order (rules declare them roughly from the
            # most constrained down), then whatever is left.
            for v in [v for v in self.variables if not v.derived] + self.variables:
                if v.fixed:
                    continue
                value = v.lo if lowest else self.src.small(v.lo, v.hi)
                v.lo = v.hi = value
                if not self._propagate():
                    ok = False
                    break
            if ok and self._check():
                return [v.lo for v in self.variables]
        raise Unsatisfiable("no assignment found within the attempt bound")


def _prod(vs: Sequence[DimVar]) -> int:
    total = 1
    for v in vs:
        total *= v.lo
    return total


def draw_dims(
    src: ChoiceSource,
    rank: int,
    *,
    max_dim: int,
    max_elements: int,
    fixed: dict[int, int] | None = None,
    lo: int = 1,
) -> tuple[int, ...]:
    """A shape of ``rank`` dims in [lo, max_dim] with product <= ``max_elements``; the
    positions in ``fixed`` take the given values. (The common case of the solver, done
    directly: each free dim is drawn within the budget the others leave.)"""
    fixed = fixed or {}
    budget = max_elements
    for d in fixed.values():
        budget //= max(d, 1)
    free = [k for k in range(rank) if k not in fixed]
    dims = [0] * rank
    for k, d in fixed.items():
        dims[k] = d
    for n, k in enumerate(free):
        left = len(free) - n - 1
        cap = min(max_dim, budget // max(lo**left, 1))
        if cap < lo:
            raise Unsatisfiable(f"no room for a {rank}-D shape within {max_elements} elements")
        d = src.small(lo, cap)
        dims[k] = d
        budget //= d
    return tuple(dims)
