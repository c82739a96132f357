"""The reference executor: runs a validated model on numpy.

Prepare (``Executor(model)``) decodes constants once and plans each subgraph: the
operations in order (validation guarantees each input is available before use) and, per
operand, the step after which it is dead so temporaries are freed early. ``run`` feeds the
main subgraph's inputs, infers every operation's output shapes from the real input
shapes, runs its kernel, and checks the kernel produced what shape inference promised.

Control flow (IF/WHILE) kernels call back into :meth:`Executor.run_subgraph`; nesting
depth is bounded by :data:`MAX_NESTING_DEPTH`, not by Python's recursion limit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    Model,
    OperandLifeTime,
    OperandType,
    Subgraph,
    operation_type_name,
)
from driver.memory import pool_buffer
from driver.operations import declaration
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    array_from_bytes,
    storage_dtype,
)

L = OperandLifeTime

MAX_NESTING_DEPTH = 64
"""How deeply IF/WHILE may nest at run time before execution fails (GENERAL_FAILURE)."""

DEFAULT_LOOP_TIMEOUT_S = 2.0
MAX_LOOP_TIMEOUT_S = 15.0


@dataclass
class _Plan:
    subgraph: Subgraph
    decls: list[OperationDeclaration]
    constants: dict[int, np.ndarray | None]
    free_after: list[list[int]]  # operand indexes dead after step k
    locations: list[str]


class Executor:
    """Prepared, immutable state for running one model; ``run`` is thread-safe."""

    def __init__(
        self,
        model: Model,
        *,
        version: HalVersion = HalVersion.V1_3,
        emulate_relaxed_float16: bool = False,
    ):
        self.model = model
        self.version = version
        self.relaxed = model.relax_computation_float32_to_float16
        # Round float32 temporaries to float16 between operations when the model allows
        # relaxed computation (a stricter oracle than computing everything in float32).
        self.emulate_relaxed_float16 = emulate_relaxed_float16 and self.relaxed
        self._plans: dict[int | None, _Plan] = {None: self._plan(model.main, "main")}
        for k, sg in enumerate(model.referenced):
            self._plans[k] = self._plan(sg, f"subgraph {k}")

    # --- prepare --------------------------------------------------------------------
    def _plan(self, sg: Subgraph, name: str) -> _Plan:
        constants: dict[int, np.ndarray | None] = {}
        for idx, operand in enumerate(sg.operands):
            if operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                constants[idx] = self._read_constant(operand)
            elif operand.lifetime == L.NO_VALUE:
                constants[idx] = None
            elif operand.lifetime == L.SUBGRAPH:
                constants[idx] = np.array(operand.location.offset, dtype=np.int64)
        decls = []
        locations = []
        last_use: dict[int, int] = {}
        for step, op in enumerate(sg.operations):
            decl = declaration(op.type)
            if decl is None:
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"{name}, operation {step}: {operation_type_name(op.type)} has no kernel",
                )
            decls.append(decl)
            locations.append(f"{name}, operation {step} ({operation_type_name(op.type)})")
            for i in op.inputs:
                last_use[i] = step
        keep = set(sg.output_indexes)
        free_after: list[list[int]] = [[] for _ in sg.operations]
        for i, step in last_use.items():
            if i not in keep and sg.operands[i].lifetime == L.TEMPORARY_VARIABLE:
                free_after[step].append(i)
        return _Plan(sg, decls, constants, free_after, locations)

    def _read_constant(self, operand) -> np.ndarray:
        loc = operand.location
        if operand.lifetime == L.CONSTANT_COPY:
            data = memoryview(self.model.operand_values)[loc.offset : loc.offset + loc.length]
        else:
            data = pool_buffer(self.model.pools[loc.pool_index])[
                loc.offset : loc.offset + loc.length
            ]
        dims = operand.dimensions
        return array_from_bytes(operand.type, dims, bytes(data))

    # --- run ------------------------------------------------------------------------
    def run(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        deadline: float | None = None,
        loop_timeout: float = DEFAULT_LOOP_TIMEOUT_S,
    ) -> list[np.ndarray]:
        """Run the main subgraph. ``inputs`` in the model's input order, in storage dtypes
        (``None`` for an omitted optional input). ``deadline`` is a ``time.monotonic()``
        instant: passing it mid-run fails with MISSED_DEADLINE_TRANSIENT."""
        state = RunState(deadline=deadline, loop_timeout=min(loop_timeout, MAX_LOOP_TIMEOUT_S))
        return self.run_subgraph(None, inputs, state)

    def run_subgraph(
        self, index: int | None, inputs: Sequence[np.ndarray | None], state: RunState
    ) -> list[np.ndarray]:
        plan = self._plans[index]
        sg = plan.subgraph
        if len(inputs) != len(sg.input_indexes):
            raise HalError(
                ErrorStatus.INVALID_ARGUMENT,
                f"expected {len(sg.input_indexes)} inputs, got {len(inputs)}",
            )
        state.depth += 1
        try:
            if state.depth > MAX_NESTING_DEPTH:
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"control flow nested deeper than {MAX_NESTING_DEPTH} levels",
                )
            values: dict[int, np.ndarray | None] = dict(plan.constants)
            for idx, arr in zip(sg.input_indexes, inputs):
                values[idx] = None if arr is None else np.asarray(arr)
            for step, op in enumerate(sg.operations):
                state.check_deadline()
                outs = self._run_operation(plan, step, op, values, state)
                for idx, arr in zip(op.outputs, outs):
                    values[idx] = arr
                for idx in plan.free_after[step]:
                    values.pop(idx, None)
            result = []
            for idx in sg.output_indexes:
                if idx not in values or values[idx] is None:
                    raise HalError(
                        ErrorStatus.GENERAL_FAILURE, f"output operand {idx} was never written"
                    )
                result.append(values[idx])
            return result
        finally:
            state.depth -= 1

    def _run_operation(self, plan: _Plan, step, op, values, state) -> list[np.ndarray]:
        sg = plan.subgraph
        decl = plan.decls[step]
        in_ops = [sg.operands[i] for i in op.inputs]
        out_ops = [sg.operands[i] for i in op.outputs]
        vals = [values.get(i) for i in op.inputs]
        shapes = [None if v is None else tuple(v.shape) for v in vals]
        ctx = OperationContext(
            op.type,
            in_ops,
            out_ops,
            shapes,
            vals,
            version=self.version,
            relaxed=self.relaxed,
            location=plan.locations[step],
            executor=self,
            model=self.model,
        )
        ctx.run_state = state
        inferred = list(decl.infer_shapes(ctx))
        for k, (shape, operand) in enumerate(zip(inferred, out_ops)):
            if shape is not None and not _compatible(operand.dimensions, shape, operand.type):
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"{plan.locations[step]}: output {k} has shape {list(shape)} but the "
                    f"model declares {list(operand.dimensions)}",
                )
        ctx.output_shapes = inferred
        outs = list(decl.execute(ctx))
        if len(outs) != len(out_ops):
            raise AssertionError(f"{plan.locations[step]}: kernel returned {len(outs)} outputs")
        for k, (arr, operand) in enumerate(zip(outs, out_ops)):
            expected = storage_dtype(operand.type) if operand.type != OperandType.SUBGRAPH else None
            if expected is not None and arr.dtype != expected:
                raise AssertionError(
                    f"{plan.locations[step]}: kernel output {k} is {arr.dtype}, expected {expected}"
                )
            if inferred[k] is not None and tuple(arr.shape) != tuple(inferred[k]):
                raise AssertionError(
                    f"{plan.locations[step]}: kernel output {k} has shape {arr.shape}, "
                    f"shape inference said {inferred[k]}"
                )
            if self.emulate_relaxed_float16 and arr.dtype == np.float32:
                outs[k] = arr.astype(np.float16).astype(np.float32)
        return outs


class RunState:
    """Per-execution state shared by nested subgraph runs."""

    __slots__ = ("deadline", "depth", "loop_timeout")

    def __init__(self, deadline: float | None = None, loop_timeout: float = DEFAULT_LOOP_TIMEOUT_S):
        self.deadline = deadline
        self.loop_timeout = loop_timeout
        self.depth = 0

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise HalError(
                ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed during execution"
            )


def _compatible(declared: tuple[int, ...], actual: tuple[int, ...], type_code: int) -> bool:
    """Declared dims (0 = unknown, () = unknown rank for tensors) agree with actual."""
    if not declared:
        return True
    if len(declared) != len(actual):
        return False
    return all(d == 0 or d == a for d, a in zip(declared, actual))


def run_model(model: Model, inputs: Sequence[np.ndarray | None], **kwargs) -> list[np.ndarray]:
    """Validate ``model`` and run it once on the reference executor (a convenience for
    tests and tools; the device service is the full HAL path)."""
    from driver.validation import validate_model

    validate_model(model)
    return Executor(model).run(inputs, **kwargs)
