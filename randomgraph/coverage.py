"""Coverage accounting: which (operation, data type, rank, HAL version) tuples a run of
the generator produced, against what the operation declarations allow.

A *data type* is the label of an operation's tensor types, distinct and in order
(:func:`randomgraph.generator.core.dtype_key`): ``F32``, ``Q8A/Q8PC/I32`` (a per-channel
convolution), ``F32/I32`` (a CAST to int32). The labels an operation allows are those
of its declared signatures (``driver.operations.REGISTRY``); IF and WHILE have no
signature table (their types come from their subgraphs), so they count as covered once
generated and their label is the type of their first data operand.

    cov = Coverage()
    for seed in range(1000):
        cov.add(generate(seed, "single"))
    print(cov.table())
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from driver.hal.types import STANDARD_OPERATIONS, HalVersion, OperationType
from driver.operations import REGISTRY
from randomgraph.generator.core import signature_key


def allowed_data_types(op: int) -> set[str]:
    """The data-type labels the declaration of ``op`` allows (empty for IF/WHILE)."""
    decl = REGISTRY.get(op)
    if decl is None:
        return set()
    return {signature_key(s) for s in decl.signatures}


class Coverage:
    """Counts of generated (operation, data type, rank, HAL version) tuples."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[OperationType, str, int, HalVersion]] = Counter()
        self.graphs = 0

    def add(self, graph) -> None:
        """Count the operations of a :class:`randomgraph.generator.GeneratedGraph`."""
        self.graphs += 1
        for r in graph.operations:
            self.counts[(r.operation, r.data_type, r.rank, r.version)] += 1

    def extend(self, graphs: Iterable) -> None:
        for g in graphs:
            self.add(g)

    def merge(self, other: Coverage) -> None:
        self.counts.update(other.counts)
        self.graphs += other.graphs

    # --- views ----------------------------------------------------------------------
    def operations(self) -> set[OperationType]:
        return {k[0] for k in self.counts}

    def data_types(self, op: int) -> set[str]:
        return {k[1] for k in self.counts if k[0] == op}

    def missing_operations(self) -> list[OperationType]:
        seen = self.operations()
        return [op for op in STANDARD_OPERATIONS if op not in seen]

    def missing_data_types(self) -> dict[OperationType, list[str]]:
        """Per operation, the declared data types no generated operation had."""
        per_op: dict[OperationType, set[str]] = defaultdict(set)
        for op, dt, _, _ in self.counts:
            per_op[op].add(dt)
        missing = {}
        for op in STANDARD_OPERATIONS:
            gap = sorted(allowed_data_types(op) - per_op.get(op, set()))
            if gap:
                missing[op] = gap
        return missing

    def summary(self) -> dict[str, int]:
        allowed = sum(len(allowed_data_types(op)) or 1 for op in STANDARD_OPERATIONS)
        missing = self.missing_data_types()
        covered_pairs = allowed - sum(len(v) for v in missing.values())
        covered_pairs -= sum(
            1
            for op in STANDARD_OPERATIONS
            if not allowed_data_types(op) and op not in self.operations()
        )
        return {
            "graphs": self.graphs,
            "operations_generated": len(self.operations()),
            "operations_total": len(STANDARD_OPERATIONS),
            "data_type_pairs_generated": covered_pairs,
            "data_type_pairs_total": allowed,
            "tuples": len(self.counts),
            "operation_instances": sum(self.counts.values()),
        }

    def table(self) -> str:
        """One row per standard operation: instances, data types generated / allowed,
        ranks and HAL versions seen, and the declared data types never generated."""
        per_op: dict[OperationType, Counter] = defaultdict(Counter)
        types: dict[OperationType, set[str]] = defaultdict(set)
        ranks: dict[OperationType, set[int]] = defaultdict(set)
        versions: dict[OperationType, set[HalVersion]] = defaultdict(set)
        for (op, dt, rank, version), n in self.counts.items():
            per_op[op]["n"] += n
            types[op].add(dt)
            ranks[op].add(rank)
            versions[op].add(version)
        missing = self.missing_data_types()
        lines = [
            f"{'operation':32} {'count':>7} {'types':>7}  {'ranks':11} {'HAL':15} missing data types",
            "-" * 100,
        ]
        for op in STANDARD_OPERATIONS:
            allowed = allowed_data_types(op)
            n = per_op[op]["n"]
            got = len(types[op] & allowed) if allowed else len(types[op])
            total = len(allowed) if allowed else len(types[op])
            rank_text = ",".join(str(r) for r in sorted(ranks[op])) or "-"
            ver_text = ",".join(v.label for v in sorted(versions[op])) or "-"
            gap = " ".join(missing.get(op, [])) if n else "NOT GENERATED"
            lines.append(
                f"{op.name:32} {n:7} {f'{got}/{total}':>7}  {rank_text:11} {ver_text:15} {gap}"
            )
        s = self.summary()
        lines.append("-" * 100)
        lines.append(
            f"{s['graphs']} graphs, {s['operation_instances']} operations: "
            f"{s['operations_generated']}/{s['operations_total']} operations, "
            f"{s['data_type_pairs_generated']}/{s['data_type_pairs_total']} (operation, data type) "
            f"pairs, {s['tuples']} (operation, data type, rank, HAL version) tuples"
        )
        return "\n".join(lines)
