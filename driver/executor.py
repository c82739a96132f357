"""The reference executor: runs a validated model on numpy.

Prepare (``Executor(model)``)
    Decodes every constant once (read-only arrays, so a kernel that writes into its
    inputs fails loudly instead of corrupting later runs), resolves each operation's
    declaration and makes a static pass over every subgraph: each operation's validate
    hook and output-shape inference run on what is known before any input arrives
    (declared dims, constant values). An operation whose input shapes are all known
    keeps the inferred output shapes; the others are marked *dynamic* and are
    re-validated and re-inferred at run time with the real shapes. The plan also records,
    per step, the temporaries that are dead after it, so they are freed as soon as their
    last consumer has run.

Run (``Executor.run(inputs, deadline=..., loop_timeout=...)``)
    Checks the inputs against the main subgraph's operands, then runs the operations in
    order: deadline check, shape inference where dynamic, the kernel, then the kernel's
    outputs are checked against the inferred shapes (a kernel bug raises AssertionError)
    or, for data-dependent outputs, against the declared dims. IF/WHILE kernels call
    :meth:`Executor.run_subgraph`; nesting is bounded by :data:`MAX_NESTING_DEPTH`.

Statuses (Android 11 ``CpuExecutor`` semantics; the device service returns a raised
:class:`HalError`'s status):

- bad ``run`` arguments (count, dtype, shape against the declared dims, loop timeout):
  INVALID_ARGUMENT, as request validation would report them;
- the deadline passed before an operation (or a WHILE iteration): MISSED_DEADLINE_TRANSIENT.
  A deadline that has already passed at launch is the caller's to report
  (MISSED_DEADLINE_PERSISTENT) before calling ``run``;
- a WHILE loop still running after its loop timeout: MISSED_DEADLINE_TRANSIENT;
- an impossible runtime shape (inputs that cannot broadcast, a result that contradicts
  the declared dims, a rank a kernel does not take), a kernel rejecting its run-time
  values, an omitted input where none is allowed, an output larger than
  :data:`MAX_OUTPUT_BYTES`, nesting deeper than :data:`MAX_NESTING_DEPTH`:
  GENERAL_FAILURE. Android's operation ``prepare``/``execute`` returns false there, the
  executor reports ``ANEURALNETWORKS_OP_FAILED`` and the HAL maps that to
  GENERAL_FAILURE; an INVALID_ARGUMENT raised by a hook at run time is mapped the same.

Relaxed computation: with ``emulate_relaxed_float16`` and a model that allows it, every
TENSOR_FLOAT32 value (inputs, constants and each operation's outputs) is rounded to
float16 precision and range, as a driver that stores relaxed tensors in float16 would;
kernels still compute internally in float32, like Android's own float16 kernels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from driver.extensions import ModelTypes, types_for
from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    OutputShape,
    Subgraph,
    is_scalar_type,
    located,
    operand_type_name,
    operation_type_name,
)
from driver.memory import pool_buffer
from driver.operations.base import (
    OperationContext,
    OperationDeclaration,
    Shape,
    Unknown,
    storage_dtype,
)

L = OperandLifeTime

MAX_NESTING_DEPTH = 64
"""How many IF/WHILE levels may nest at run time (the main subgraph is level 0); one
more fails with GENERAL_FAILURE. Each level costs 4 Python frames (``_run_plan`` ->
``_run_step`` -> the IF/WHILE kernel -> ``run_subgraph``), so the bound uses about 260 of
Python's default 1000-frame recursion limit, leaving room for the caller's stack."""

DEFAULT_LOOP_TIMEOUT_S = 2.0
"""WHILE loop timeout when the execution sets none (``kTimeoutNsDefault``)."""
MAX_LOOP_TIMEOUT_S = 15.0
"""Longest WHILE loop timeout an execution may ask for (``kTimeoutNsMaximum``); longer
requests are clamped to it, as ``ANeuralNetworksExecution_setLoopTimeout`` does."""

MAX_OUTPUT_BYTES = 1 << 28
"""Largest operation output the reference allocates (256 MiB). Dynamic shapes can ask
for more (a FILL or TILE sized by run-time values); that fails with GENERAL_FAILURE, as
Android's failed allocation does, instead of exhausting the fuzzing machine."""

monotonic = time.monotonic
"""The clock deadlines and loop timeouts are measured on (tests substitute a fake)."""


# ---------------------------------------------------------------------------------------
# Per-execution state
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class RunStats:
    """Counters of one execution (for tests and benchmarks). Pass one to
    :meth:`Executor.run` to read them afterwards."""

    operations_run: int = 0
    while_iterations: int = 0
    max_depth: int = 0
    peak_live_temporaries: int = 0  # temporaries held at once (after each step's frees)
    peak_live_bytes: int = 0
    live_temporaries: int = 0
    live_bytes: int = 0


class RunState:
    """Per-execution state shared by nested subgraph runs: the deadline (a
    :func:`monotonic` instant or None), the WHILE loop timeout in seconds, the current
    nesting depth and the counters."""

    __slots__ = ("deadline", "depth", "loop_timeout", "stats")

    def __init__(
        self,
        deadline: float | None = None,
        loop_timeout: float = DEFAULT_LOOP_TIMEOUT_S,
        stats: RunStats | None = None,
    ):
        self.deadline = deadline
        self.loop_timeout = loop_timeout
        self.depth = 0
        self.stats = stats if stats is not None else RunStats()

    @staticmethod
    def now() -> float:
        return monotonic()

    def check_deadline(self) -> None:
        if self.deadline is not None and monotonic() > self.deadline:
            raise HalError(
                ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed during execution"
            )


# ---------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    op: Operation
    decl: OperationDeclaration
    location: str
    in_operands: tuple[Operand, ...]
    out_operands: tuple[Operand, ...]
    optional: frozenset[int]  # input positions that may be omitted at run time
    dynamic: bool  # output shapes must be inferred at run time
    revalidate: bool  # the validate hook could not finish statically
    static_shapes: tuple[Shape | None, ...]  # inferred outputs when not dynamic
    free_after: tuple[int, ...]  # temporaries dead once this step has run
    temporaries: tuple[bool, ...]  # which outputs are temporaries (freed later)
    round_fp16: tuple[bool, ...]  # which outputs relaxed emulation rounds


@dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    subgraph: Subgraph
    steps: tuple[_Step, ...]
    constants: dict[int, np.ndarray | None]
    inputs: tuple[tuple[int, Operand], ...]
    outputs: tuple[int, ...]
    shapes: dict[int, Shape | None]  # operand shapes known before running (None: unknown)


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What the static pass decided for one step: all a compilation cache needs to store
    so that a restored executor skips the pass (``Executor(..., facts=...)``)."""

    dynamic: bool
    revalidate: bool
    static_shapes: tuple[Shape | None, ...]
    optional: frozenset[int]


def _static_shape(operand: Operand, is_scalar=is_scalar_type) -> Shape | None:
    if is_scalar(operand.type):
        return ()
    dims = tuple(operand.dimensions)
    if not dims or 0 in dims:
        return None
    return dims


def _compatible(declared: tuple[int, ...], actual: tuple[int, ...]) -> bool:
    """Declared dims (0 = unknown, () = unknown rank for tensors) agree with actual."""
    if not declared:
        return True
    if len(declared) != len(actual):
        return False
    return all(d == 0 or d == a for d, a in zip(declared, actual))


def _nbytes(type_code: int, shape: Shape, dtype=storage_dtype) -> int:
    if type_code in (OperandType.SUBGRAPH, OperandType.OEM):
        return 0
    return math.prod(shape) * dtype(type_code).itemsize


def _round_fp16(arr: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # out of float16 range becomes inf, as on a device
        return arr.astype(np.float16).astype(np.float32)


def _readonly(arr: np.ndarray) -> np.ndarray:
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


class Executor:
    """Prepared, immutable state for running one model; ``run`` is thread-safe.

    ``version`` is the HAL version hooks see (``ctx.version``). ``emulate_relaxed_float16``
    rounds TENSOR_FLOAT32 values to float16 between operations when the model allows
    relaxed computation (a stricter oracle for relaxed drivers than float32 throughout);
    it has no effect on other models.

    ``types`` resolves the model's operand and operation types, extension ones included
    (:mod:`driver.extensions`); the default resolves every registered extension the
    model maps, a device passes the resolver restricted to the extensions it supports.
    ``facts`` (from :meth:`step_facts` of an executor of the same model, configuration
    and registry, e.g. restored from a compilation cache) replaces the static
    validate/infer pass; it is trusted as given."""

    def __init__(
        self,
        model: Model,
        *,
        version: HalVersion = HalVersion.V1_3,
        emulate_relaxed_float16: bool = False,
        overrides: Mapping[int, OperationDeclaration] | None = None,
        types: ModelTypes | None = None,
        facts: Mapping[int | None, Sequence[StepFacts]] | None = None,
    ):
        self.model = model
        self.version = version
        # Replacement declarations by operation type (planted-bug drivers use this to
        # swap a kernel; the reference itself never does).
        self._overrides = dict(overrides or {})
        self.relaxed = model.relax_computation_float32_to_float16
        self.emulate_relaxed_float16 = emulate_relaxed_float16 and self.relaxed
        self.types = types if types is not None else types_for(model)
        self._plans: dict[int | None, _Plan] = {
            None: self._plan(model.main, "main subgraph", _facts_of(facts, None, model.main))
        }
        for k, sg in enumerate(model.referenced):
            self._plans[k] = self._plan(sg, f"subgraph {k}", _facts_of(facts, k, sg))
        main = self._plans[None]
        self.input_operands: tuple[Operand, ...] = tuple(o for _, o in main.inputs)
        self.output_operands: tuple[Operand, ...] = tuple(
            main.subgraph.operands[i] for i in main.outputs
        )

    # --- prepare --------------------------------------------------------------------
    def _plan(self, sg: Subgraph, name: str, facts: Sequence[StepFacts] | None = None) -> _Plan:
        n = len(sg.operands)
        is_scalar = self.types.is_scalar

        def check_index(i: int, what: str) -> int:
            if not 0 <= i < n:
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"{name}: {what} refers to operand {i}, out of range ({n} operands)",
                )
            return i

        for i in (*sg.input_indexes, *sg.output_indexes):
            check_index(i, "an input/output index")
        constants: dict[int, np.ndarray | None] = {}
        shapes: dict[int, Shape | None] = {}
        for idx, operand in enumerate(sg.operands):
            if operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                arr = self._read_constant(operand, f"{name}, operand {idx}")
                constants[idx] = arr
                shapes[idx] = tuple(arr.shape)
            elif operand.lifetime == L.NO_VALUE:
                constants[idx] = None
                shapes[idx] = None
            elif operand.lifetime == L.SUBGRAPH:
                constants[idx] = _readonly(np.array(operand.location.offset, dtype=np.int64))
                shapes[idx] = ()
            else:
                shapes[idx] = _static_shape(operand, is_scalar)

        last_use: dict[int, int] = {}
        for step, op in enumerate(sg.operations):
            for i in (*op.inputs, *op.outputs):
                check_index(i, f"operation {step}")
            for i in op.inputs:
                last_use[i] = step
        keep = set(sg.output_indexes)
        free_after: list[list[int]] = [[] for _ in sg.operations]
        for step, op in enumerate(sg.operations):
            for i in op.outputs:
                # A temporary nobody reads is dropped right after it is written.
                if i not in keep and sg.operands[i].lifetime == L.TEMPORARY_VARIABLE:
                    free_after[last_use.get(i, step)].append(i)

        steps = []
        for step, op in enumerate(sg.operations):
            location = f"{name}, operation {step} ({operation_type_name(op.type)})"
            decl = self._overrides.get(op.type) or self.types.operation(op.type)
            if decl is None:
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"{location}: the reference driver has no kernel for this operation",
                )
            if facts is not None:
                steps.append(
                    self._restore_step(
                        op, decl, location, sg, shapes, keep, tuple(free_after[step]), facts[step]
                    )
                )
                continue
            steps.append(
                self._plan_step(
                    op, decl, location, sg, shapes, constants, keep, tuple(free_after[step])
                )
            )
        return _Plan(
            name,
            sg,
            tuple(steps),
            constants,
            tuple((i, sg.operands[i]) for i in sg.input_indexes),
            tuple(sg.output_indexes),
            shapes,
        )

    def _plan_step(self, op, decl, location, sg, shapes, constants, keep, free_after) -> _Step:
        """One step of the plan: the static validate/infer pass decides what must be
        redone at run time; ``shapes`` gets the step's output shapes."""
        in_ops = tuple(sg.operands[i] for i in op.inputs)
        out_ops = tuple(sg.operands[i] for i in op.outputs)
        in_shapes = [shapes[i] for i in op.inputs]
        known = all(s is not None or o.lifetime == L.NO_VALUE for s, o in zip(in_shapes, in_ops))
        ctx = OperationContext(
            op.type,
            in_ops,
            out_ops,
            in_shapes,
            [constants.get(i) for i in op.inputs],
            version=self.version,
            relaxed=self.relaxed,
            location=location,
            model=self.model,
        )
        revalidate = not known
        try:
            decl.run_validate(ctx)
        except Unknown:
            revalidate = True
        dynamic = not known
        inferred: list[Shape | None] = [None] * len(out_ops)
        try:
            got = list(decl.infer_shapes(ctx))
            if len(got) != len(out_ops):
                raise AssertionError(f"{location}: shape inference gave {len(got)} shapes")
            inferred = [None if s is None else tuple(int(d) for d in s) for s in got]
        except Unknown:
            dynamic = True
        dtype = self.types.dtype
        if not dynamic and any(
            s is not None and _nbytes(o.type, s, dtype) > MAX_OUTPUT_BYTES
            for s, o in zip(inferred, out_ops)
        ):
            dynamic = True  # so the run fails before allocating, like a dynamic shape
        for k, (oi, operand) in enumerate(zip(op.outputs, out_ops)):
            s = None if dynamic else inferred[k]
            if s is not None:
                if not _compatible(operand.dimensions, s):
                    raise HalError(
                        ErrorStatus.INVALID_ARGUMENT,
                        f"{location}: output {k} (operand {oi}) is declared "
                        f"{list(operand.dimensions)} but the inputs give {list(s)}",
                    )
                shapes[oi] = s
            else:
                shapes[oi] = _static_shape(operand, self.types.is_scalar)
        optional: set[int] = set()
        in_types = tuple(o.type for o in in_ops)
        for sig in decl.signatures:
            if sig.expand_inputs(len(in_types)) == in_types:
                optional |= sig.optional_positions(len(in_types))
        facts = StepFacts(dynamic, revalidate, tuple(inferred), frozenset(optional))
        return self._make_step(op, decl, location, in_ops, out_ops, keep, free_after, facts)

    def _restore_step(self, op, decl, location, sg, shapes, keep, free_after, facts) -> _Step:
        """A step from cached :class:`StepFacts`: no hook runs; ``shapes`` gets the
        step's output shapes exactly as :meth:`_plan_step` would have set them."""
        in_ops = tuple(sg.operands[i] for i in op.inputs)
        out_ops = tuple(sg.operands[i] for i in op.outputs)
        if len(facts.static_shapes) != len(out_ops):
            raise HalError(ErrorStatus.GENERAL_FAILURE, f"{location}: cached plan does not fit")
        for k, (oi, operand) in enumerate(zip(op.outputs, out_ops)):
            s = None if facts.dynamic else facts.static_shapes[k]
            shapes[oi] = s if s is not None else _static_shape(operand, self.types.is_scalar)
        return self._make_step(op, decl, location, in_ops, out_ops, keep, free_after, facts)

    def _make_step(self, op, decl, location, in_ops, out_ops, keep, free_after, facts) -> _Step:
        return _Step(
            op=op,
            decl=decl,
            location=location,
            in_operands=in_ops,
            out_operands=out_ops,
            optional=facts.optional,
            dynamic=facts.dynamic,
            revalidate=facts.revalidate,
            static_shapes=facts.static_shapes,
            free_after=free_after,
            temporaries=tuple(
                i not in keep and o.lifetime == L.TEMPORARY_VARIABLE
                for i, o in zip(op.outputs, out_ops)
            ),
            round_fp16=tuple(
                self.emulate_relaxed_float16 and o.type == OperandType.TENSOR_FLOAT32
                for o in out_ops
            ),
        )

    def _read_constant(self, operand: Operand, where: str) -> np.ndarray:
        loc = operand.location
        if operand.lifetime == L.CONSTANT_COPY:
            data = memoryview(self.model.operand_values)[loc.offset : loc.offset + loc.length]
        else:
            if not 0 <= loc.pool_index < len(self.model.pools):
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"{where}: pool {loc.pool_index} does not exist "
                    f"({len(self.model.pools)} pools)",
                )
            data = pool_buffer(self.model.pools[loc.pool_index])[
                loc.offset : loc.offset + loc.length
            ]
        dtype = self.types.dtype(operand.type)
        count = math.prod(operand.dimensions)
        if len(data) != loc.length or loc.length != count * dtype.itemsize:
            raise HalError(
                ErrorStatus.INVALID_ARGUMENT,
                f"{where}: constant of {operand_type_name(operand.type)} "
                f"{list(operand.dimensions)} needs {count * dtype.itemsize} bytes, its "
                f"location gives {len(data)}",
            )
        arr = self.types.decode(operand.type, tuple(operand.dimensions), bytes(data))
        if self.emulate_relaxed_float16 and operand.type == OperandType.TENSOR_FLOAT32:
            arr = _round_fp16(arr)
        arr.flags.writeable = False
        return arr

    def step_facts(self) -> dict[int | None, tuple[StepFacts, ...]]:
        """What the static pass decided, per subgraph (None: main) and step: what a
        compilation cache stores to rebuild this executor without the pass."""
        return {
            k: tuple(
                StepFacts(s.dynamic, s.revalidate, s.static_shapes, s.optional) for s in plan.steps
            )
            for k, plan in self._plans.items()
        }

    # --- what the device service needs ----------------------------------------------
    @property
    def prepared_output_shapes(self) -> list[tuple[int, ...]]:
        """Each main output's shape as known before running: inferred where the static
        pass could, else as declared (0 for an unknown dim, () for unknown rank)."""
        plan = self._plans[None]
        result = []
        for i in plan.outputs:
            s = plan.shapes.get(i)
            result.append(s if s is not None else tuple(plan.subgraph.operands[i].dimensions))
        return result

    @property
    def has_dynamic_output_shapes(self) -> bool:
        """True when some main output's shape is known only at run time."""
        plan = self._plans[None]
        return any(plan.shapes.get(i) is None for i in plan.outputs)

    def output_shapes(
        self, outputs: Sequence[np.ndarray], buffer_sizes: Sequence[int] | None = None
    ) -> list[OutputShape]:
        """HAL ``OutputShape`` per main output of a run: its dims, and whether a buffer
        of ``buffer_sizes[k]`` bytes holds it (always true without sizes)."""
        result = []
        for k, (arr, operand) in enumerate(zip(outputs, self.output_operands)):
            dims = tuple(int(d) for d in arr.shape)
            sufficient = True
            if buffer_sizes is not None:
                need = self.types.size_of(operand.type, dims)
                sufficient = need <= buffer_sizes[k]
            result.append(OutputShape(dims, sufficient))
        return result

    # --- run ------------------------------------------------------------------------
    def run(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        deadline: float | None = None,
        loop_timeout: float | None = None,
        stats: RunStats | None = None,
    ) -> list[np.ndarray]:
        """Run the main subgraph; returns its outputs (read-only arrays in the outputs'
        storage dtypes, with their run-time shapes).

        ``inputs`` follow the model's input order, in storage dtypes (other dtypes of the
        same kind are cast), ``None`` for an omitted input. ``deadline`` is a
        :func:`monotonic` instant; ``loop_timeout`` bounds each WHILE loop in seconds
        (None: 2 s; clamped to 15 s). Bad runtime input only ever raises
        :class:`HalError` (statuses in the module docstring)."""
        plan = self._plans[None]
        if len(inputs) != len(plan.inputs):
            raise HalError(
                ErrorStatus.INVALID_ARGUMENT,
                f"the model has {len(plan.inputs)} inputs, {len(inputs)} were given",
            )
        if deadline is not None:
            try:
                deadline = float(deadline)
            except (TypeError, ValueError):
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT, f"deadline {deadline!r} is not a number"
                ) from None
        state = RunState(deadline, _loop_timeout(loop_timeout), stats)
        feeds = [
            self._check_input(k, idx, o, a)
            for k, ((idx, o), a) in enumerate(zip(plan.inputs, inputs))
        ]
        try:
            return self._run_plan(plan, feeds, state)
        except RecursionError:
            # Only a caller whose own stack is nearly exhausted gets here: the nesting
            # bound keeps the executor's recursion well below the limit.
            raise HalError(
                ErrorStatus.GENERAL_FAILURE, "Python stack exhausted during execution"
            ) from None

    def _check_input(self, k: int, idx: int, operand: Operand, value) -> np.ndarray | None:
        if value is None:
            return None
        what = f"input {k} (operand {idx}, {operand_type_name(operand.type)} {list(operand.dimensions)})"
        dtype = self.types.dtype(operand.type)
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise HalError(ErrorStatus.INVALID_ARGUMENT, f"{what}: not an array ({e})") from None
        if arr.dtype != dtype:
            if arr.dtype.kind not in _CASTABLE_KINDS[dtype.kind]:
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"{what}: got {arr.dtype} values, expected {dtype}",
                )
            cast = arr.astype(dtype)
            if dtype.kind in "iub" and not np.array_equal(cast, arr):
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT, f"{what}: values out of range for {dtype}"
                )
            arr = cast
        shape = tuple(arr.shape)
        if self.types.is_scalar(operand.type):
            ok = shape == ()
        else:
            ok = len(shape) >= 1 and _compatible(tuple(operand.dimensions), shape)
        if not ok:
            raise HalError(ErrorStatus.INVALID_ARGUMENT, f"{what}: got shape {list(shape)}")
        if self.emulate_relaxed_float16 and operand.type == OperandType.TENSOR_FLOAT32:
            arr = _round_fp16(arr)
        return _readonly(arr)

    def run_subgraph(
        self, index: int, inputs: Sequence[np.ndarray | None], state: RunState
    ) -> list[np.ndarray]:
        """Run referenced subgraph ``index`` one nesting level below the caller (for the
        IF/WHILE kernels). Inputs that contradict the subgraph's declared input dims
        fail with GENERAL_FAILURE."""
        plan = self._plans.get(index)
        if plan is None or index is None:
            raise HalError(ErrorStatus.GENERAL_FAILURE, f"no referenced subgraph {index}")
        if state.depth >= MAX_NESTING_DEPTH:
            raise HalError(
                ErrorStatus.GENERAL_FAILURE,
                f"{plan.name}: control flow nested deeper than {MAX_NESTING_DEPTH} levels "
                "(the reference driver's bound)",
            )
        if len(inputs) != len(plan.inputs):
            raise HalError(
                ErrorStatus.GENERAL_FAILURE,
                f"{plan.name} has {len(plan.inputs)} inputs, {len(inputs)} were passed",
            )
        for k, ((idx, operand), arr) in enumerate(zip(plan.inputs, inputs)):
            if arr is not None and not _compatible(tuple(operand.dimensions), arr.shape):
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"{plan.name} input {k} (operand {idx}) is declared "
                    f"{list(operand.dimensions)} but receives shape {list(arr.shape)}",
                )
        state.depth += 1
        if state.depth > state.stats.max_depth:
            state.stats.max_depth = state.depth
        try:
            return self._run_plan(plan, inputs, state)
        finally:
            state.depth -= 1

    def _run_plan(
        self, plan: _Plan, inputs: Sequence[np.ndarray | None], state: RunState
    ) -> list[np.ndarray]:
        values: dict[int, np.ndarray | None] = dict(plan.constants)
        for (idx, _), arr in zip(plan.inputs, inputs):
            values[idx] = arr
        stats = state.stats
        deadline = state.deadline
        for step in plan.steps:
            if deadline is not None and monotonic() > deadline:
                raise HalError(
                    ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                    f"deadline passed during execution, before {step.location}",
                )
            outs = self._run_step(step, values, state)
            stats.operations_run += 1
            for idx, arr, temporary in zip(step.op.outputs, outs, step.temporaries):
                values[idx] = arr
                if temporary:
                    stats.live_temporaries += 1
                    stats.live_bytes += arr.nbytes
            for idx in step.free_after:
                arr = values.pop(idx, None)
                if arr is not None:
                    stats.live_temporaries -= 1
                    stats.live_bytes -= arr.nbytes
            if stats.live_temporaries > stats.peak_live_temporaries:
                stats.peak_live_temporaries = stats.live_temporaries
            if stats.live_bytes > stats.peak_live_bytes:
                stats.peak_live_bytes = stats.live_bytes
        result = []
        for idx in plan.outputs:
            arr = values.get(idx)
            if arr is None:
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"{plan.name}: output operand {idx} was never written",
                )
            result.append(arr)
        return result

    def _run_step(
        self, step: _Step, values: dict[int, np.ndarray | None], state: RunState
    ) -> list[np.ndarray]:
        op = step.op
        vals = [values.get(i) for i in op.inputs]
        in_ops = step.in_operands
        revalidate, dynamic = step.revalidate, step.dynamic
        if any(v is None for v in vals):
            in_ops = self._omitted_inputs(step, vals)
            if in_ops is not step.in_operands:
                # The plan assumed these inputs present; decide again with them omitted.
                revalidate = dynamic = True
        ctx = OperationContext(
            op.type,
            in_ops,
            step.out_operands,
            [None if v is None else tuple(v.shape) for v in vals],
            vals,
            version=self.version,
            relaxed=self.relaxed,
            location=step.location,
            executor=self,
            model=self.model,
        )
        ctx.run_state = state
        decl = step.decl
        try:
            if revalidate:
                decl.run_validate(ctx)
            if dynamic:
                inferred = self._infer(step, ctx)
            else:
                inferred = list(step.static_shapes)
            ctx.output_shapes = inferred
            outs = list(decl.execute(ctx))
        except Unknown as e:
            raise HalError(
                ErrorStatus.GENERAL_FAILURE, f"{step.location}: {e} is not available at run time"
            ) from None
        except HalError as e:
            message = located(step.location, e.message)
            if e.status == ErrorStatus.INVALID_ARGUMENT:
                raise HalError(ErrorStatus.GENERAL_FAILURE, message) from None
            if message is not e.message:  # raised by a helper that has no operation context
                raise HalError(e.status, message) from None
            raise
        return self._check_outputs(step, inferred, outs)

    def _omitted_inputs(self, step: _Step, vals: list) -> tuple[Operand, ...]:
        """Operands as the hooks should see them when some inputs have no value: an
        omitted request input at an optional position reads as NO_VALUE."""
        in_ops = list(step.in_operands)
        changed = False
        for k, (v, operand) in enumerate(zip(vals, in_ops)):
            if v is None and operand.lifetime != L.NO_VALUE:
                if k not in step.optional:
                    raise HalError(
                        ErrorStatus.GENERAL_FAILURE,
                        f"{step.location}: input {k} (operand {step.op.inputs[k]}) has no "
                        "value and is not optional",
                    )
                in_ops[k] = replace(operand, lifetime=L.NO_VALUE)
                changed = True
        return tuple(in_ops) if changed else step.in_operands

    def _infer(self, step: _Step, ctx: OperationContext) -> list[Shape | None]:
        got = list(step.decl.infer_shapes(ctx))
        if len(got) != len(step.out_operands):
            raise AssertionError(f"{step.location}: shape inference gave {len(got)} shapes")
        inferred: list[Shape | None] = []
        for k, (s, operand) in enumerate(zip(got, step.out_operands)):
            if s is not None:
                s = tuple(int(d) for d in s)
                self._check_declared(step, k, operand, s)
            inferred.append(s)
        return inferred

    def _check_declared(self, step: _Step, k: int, operand: Operand, shape: Shape) -> None:
        if not _compatible(tuple(operand.dimensions), shape):
            raise HalError(
                ErrorStatus.GENERAL_FAILURE,
                f"{step.location}: output {k} (operand {step.op.outputs[k]}) has shape "
                f"{list(shape)} at run time but the model declares {list(operand.dimensions)}",
            )
        size = _nbytes(operand.type, shape, self.types.dtype)
        if size > MAX_OUTPUT_BYTES:
            raise HalError(
                ErrorStatus.GENERAL_FAILURE,
                f"{step.location}: output {k} of shape {list(shape)} needs {size} bytes, "
                f"more than the reference driver allocates ({MAX_OUTPUT_BYTES})",
            )

    def _check_outputs(self, step: _Step, inferred: list, outs: list) -> list[np.ndarray]:
        if len(outs) != len(step.out_operands):
            raise AssertionError(f"{step.location}: kernel returned {len(outs)} outputs")
        for k, (arr, operand) in enumerate(zip(outs, step.out_operands)):
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            expected = self.types.dtype(operand.type)
            if arr.dtype != expected:
                raise AssertionError(
                    f"{step.location}: kernel output {k} is {arr.dtype}, expected {expected}"
                )
            shape = tuple(arr.shape)
            if inferred[k] is not None:
                if shape != inferred[k]:
                    raise AssertionError(
                        f"{step.location}: kernel output {k} has shape {list(shape)}, "
                        f"shape inference said {list(inferred[k])}"
                    )
            else:
                self._check_declared(step, k, operand, shape)
            if step.round_fp16[k]:
                arr = _round_fp16(arr)
            outs[k] = _readonly(arr)
        return outs


def _facts_of(
    facts: Mapping[int | None, Sequence[StepFacts]] | None, key: int | None, sg: Subgraph
) -> Sequence[StepFacts] | None:
    if facts is None:
        return None
    got = facts.get(key)
    if got is None or len(got) != len(sg.operations):
        raise HalError(ErrorStatus.GENERAL_FAILURE, "the cached plan does not fit the model")
    return got


# Source dtype kinds an input of a given storage kind may be cast from (integers are
# range-checked): floats from any real number, integers from integers, bools from bools.
_CASTABLE_KINDS = {"f": "fiub", "i": "iub", "u": "iub", "b": "b"}


def _loop_timeout(value: float | None) -> float:
    if value is None:
        return DEFAULT_LOOP_TIMEOUT_S
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise HalError(
            ErrorStatus.INVALID_ARGUMENT, f"loop timeout {value!r} is not a number"
        ) from None
    if not t >= 0:  # also rejects NaN
        raise HalError(ErrorStatus.INVALID_ARGUMENT, f"loop timeout {value!r} is negative")
    return min(t, MAX_LOOP_TIMEOUT_S)


def run_model(model: Model, inputs: Sequence[np.ndarray | None], **kwargs) -> list[np.ndarray]:
    """Validate ``model`` and run it once on the reference executor (a convenience for
    tests and tools; the device service is the full HAL path)."""
    from driver.validation import validate_model

    validate_model(model)
    return Executor(model).run(inputs, **kwargs)
