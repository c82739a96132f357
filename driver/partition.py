"""Partitioned execution: one model across several devices, as Android's runtime does it.

:class:`PartitionedDevice` implements the device protocol over a list of member devices
plus a fallback (the reference by default). Preparing a model:

1. **Support.** Each member is asked ``getSupportedOperations`` for the whole model. A
   member that calls the model invalid (an older feature level meeting a newer type) is
   asked again one operation at a time, with each operation's own step model — the
   counterpart of Android asking an old driver about the slice of the model its HAL
   version can express. A member older than HAL 1.2 is not given an operation whose
   outputs have unspecified dimensions (it could not report their shape).
2. **Assignment.** Each main-subgraph operation goes to the member that supports it with
   the best capabilities for the operation's first input type (``execTime``, or
   ``powerUsage`` for LOW_POWER; the relaxed figures for relaxed float32; the IF/WHILE
   figures for control flow), ties to the earlier member; operations no member supports go
   to the fallback. The fallback never competes: members are what is under test.
3. **Steps.** Android's ``partitionTheWork``: operations become ready once everything they
   read is available; a step takes every ready operation of one device, in topological
   order, until that device has none ready, then the next device with ready operations
   (members in order, the fallback last) starts the next step.
4. **Step models.** Each step is a model of its own (:func:`extract_submodel`): its
   inputs are the cut edges it reads (model inputs and other steps' outputs), its outputs
   what it produces that the model returns, that a later step reads, or that nothing reads;
   constants are copied (CONSTANT_REFERENCE stays in the model's pools); an IF or WHILE
   goes whole, with every subgraph it reaches.

Executing, the harness plays the runtime: model inputs and outputs are read and written
in the caller's pools directly; every other cut edge lives in shared memory the harness
allocates for the execution. An intermediate of unknown size is allocated from a guess and
the step re-run with the shape the device reports (OUTPUT_INSUFFICIENT_SIZE); a model
output too small for its result is redirected to harness memory so later steps can still
read it, and the execution reports OUTPUT_INSUFFICIENT_SIZE with every output's shape.

A failing step fails the execution with its status (``last_error`` names the step and its
device): nothing falls back on a failure, since a failure is what a fuzzing harness is
for. The one fallback is for what no request can express: a zero-sized tensor (a
data-dependent output with no element, e.g. no box kept by BOX_WITH_NMS_LIMIT) that a
later step reads, since a 0 dimension in a request means "unspecified". That execution
runs the whole model on the fallback, as Android's runtime falls back to the CPU
(``prepared.full_fallbacks`` counts them).
Priorities, deadlines and loop timeouts reach the members of HAL 1.3 only (Android drops
them for older drivers); the harness checks the deadline between steps itself.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from driver.hal.device import Device, ExecutionResult
from driver.hal.types import (
    NO_LOCATION,
    NO_TIMING,
    UINT64_MAX,
    BufferDesc,
    BufferRole,
    BufferToken,
    Capabilities,
    DataLocation,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Extension,
    HalError,
    HalVersion,
    MeasureTiming,
    Memory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    OperationType,
    OutputShape,
    PerformanceInfo,
    Priority,
    Request,
    RequestArgument,
    Subgraph,
    Timing,
    is_scalar_type,
    non_extension_size_of_data,
    operation_type_name,
    tensor_has_unspecified_dimensions,
)
from driver.launch import LaunchedExecutions, now_us
from driver.memory import allocate_shared_memory
from driver.validation import (
    validate_deadline,
    validate_execution_preference,
    validate_priority,
)

L = OperandLifeTime

_ALIGN = 8
_UNKNOWN_SIZE_GUESS = 1024
"""Bytes first allocated for an intermediate whose size is not known before it runs."""
_MAX_ATTEMPTS = 3
"""Runs of a step that keeps reporting OUTPUT_INSUFFICIENT_SIZE before it is a failure
(after one, every size is the reported one, so a second shortfall is a driver bug)."""
_NO_PERFORMANCE = PerformanceInfo(math.inf, math.inf)


def _as_status(status: Any) -> ErrorStatus:
    """A device's status as an :class:`ErrorStatus` (an unknown code is a failure)."""
    try:
        return ErrorStatus(status)
    except (ValueError, TypeError):
        return ErrorStatus.GENERAL_FAILURE


def _status_name(status: Any) -> str:
    try:
        return ErrorStatus(status).name
    except (ValueError, TypeError):
        return f"status {status!r}"


# ---------------------------------------------------------------------------------------
# Step models
# ---------------------------------------------------------------------------------------


def _referenced_closure(model: Model, operands: Sequence[Operand]) -> list[int]:
    """Referenced subgraphs reachable from SUBGRAPH operands, transitively, sorted."""
    seen: set[int] = set()
    todo = [o.location.offset for o in operands if o.lifetime == L.SUBGRAPH]
    while todo:
        k = todo.pop()
        if k in seen or not 0 <= k < len(model.referenced):
            continue
        seen.add(k)
        todo.extend(
            o.location.offset for o in model.referenced[k].operands if o.lifetime == L.SUBGRAPH
        )
    return sorted(seen)


class _Constants:
    """Copies constants into a new model: CONSTANT_COPY bytes into a fresh
    ``operandValues``, CONSTANT_REFERENCE pools renumbered, SUBGRAPH indexes renumbered."""

    def __init__(self, model: Model, subgraph_map: dict[int, int]):
        self.model = model
        self.values = bytearray()
        self.pools: list[Memory] = []
        self._pool_map: dict[int, int] = {}
        self.subgraph_map = subgraph_map

    def relocate(self, operand: Operand) -> Operand:
        loc = operand.location
        if operand.lifetime == L.CONSTANT_COPY:
            data = self.model.operand_values[loc.offset : loc.offset + loc.length]
            self.values += b"\0" * (-len(self.values) % _ALIGN)
            new = DataLocation(0, len(self.values), len(data))
            self.values += data
            return replace(operand, location=new)
        if operand.lifetime == L.CONSTANT_REFERENCE:
            index = self._pool_map.get(loc.pool_index)
            if index is None:
                index = self._pool_map[loc.pool_index] = len(self.pools)
                self.pools.append(self.model.pools[loc.pool_index])
            return replace(operand, location=replace(loc, pool_index=index))
        if operand.lifetime == L.SUBGRAPH:
            return replace(operand, location=replace(loc, offset=self.subgraph_map[loc.offset]))
        return operand


def extract_submodel(
    model: Model, operations: Sequence[int]
) -> tuple[Model, tuple[int, ...], tuple[int, ...]]:
    """The step model of ``operations`` (main-subgraph indexes of a valid model): returns
    ``(step model, inputs, outputs)`` where ``inputs``/``outputs`` are the main-subgraph
    operand indexes behind the step model's inputs/outputs, in order.

    Inputs are the non-constant operands the operations read but do not write; outputs
    are the operands they write that are model outputs, are read by another operation, or
    are read by none. Operands keep their order; constants are copied."""
    main = model.main
    ops = sorted(set(operations))
    inside = set(ops)
    produced: set[int] = set()
    consumed: list[int] = []
    for i in ops:
        produced.update(main.operations[i].outputs)
        consumed.extend(main.operations[i].inputs)
    consumed_outside: set[int] = set()
    for j, op in enumerate(main.operations):
        if j not in inside:
            consumed_outside.update(op.inputs)
    consumed_inside = set(consumed)
    model_outputs = set(main.output_indexes)
    flowing = (L.SUBGRAPH_INPUT, L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT)
    inputs = tuple(
        sorted(
            o for o in consumed_inside if o not in produced and main.operands[o].lifetime in flowing
        )
    )
    outputs = tuple(
        sorted(
            o
            for o in produced
            if o in model_outputs or o in consumed_outside or o not in consumed_inside
        )
    )
    used = sorted(consumed_inside | produced)
    index = {o: n for n, o in enumerate(used)}
    counts = dict.fromkeys(used, 0)
    for o in consumed:
        counts[o] += 1

    referenced = _referenced_closure(model, [main.operands[o] for o in used])
    constants = _Constants(model, {old: new for new, old in enumerate(referenced)})
    input_set, output_set = set(inputs), set(outputs)
    operands = []
    for o in used:
        operand = main.operands[o]
        if o in input_set:
            operand = replace(operand, lifetime=L.SUBGRAPH_INPUT, location=NO_LOCATION)
        elif o in output_set:
            operand = replace(operand, lifetime=L.SUBGRAPH_OUTPUT, location=NO_LOCATION)
        elif o in produced:
            operand = replace(operand, lifetime=L.TEMPORARY_VARIABLE, location=NO_LOCATION)
        else:
            operand = constants.relocate(operand)
        operands.append(replace(operand, number_of_consumers=counts[o]))
    operations = tuple(
        replace(
            main.operations[i],
            inputs=tuple(index[o] for o in main.operations[i].inputs),
            outputs=tuple(index[o] for o in main.operations[i].outputs),
        )
        for i in ops
    )
    subgraphs = tuple(
        replace(
            model.referenced[k],
            operands=tuple(constants.relocate(o) for o in model.referenced[k].operands),
        )
        for k in referenced
    )
    step = Model(
        main=Subgraph(
            tuple(operands),
            operations,
            tuple(index[o] for o in inputs),
            tuple(index[o] for o in outputs),
        ),
        referenced=subgraphs,
        operand_values=bytes(constants.values),
        pools=tuple(constants.pools),
        relax_computation_float32_to_float16=model.relax_computation_float32_to_float16,
        extension_name_to_prefix=model.extension_name_to_prefix,
    )
    return step, inputs, outputs


# ---------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One step of a plan: ``operations`` (main-subgraph indexes, in order) run as
    ``model`` on device ``device`` (an index into the plan's ``device_names``)."""

    device: int
    operations: tuple[int, ...]
    model: Model
    inputs: tuple[int, ...]  # main-subgraph operands behind the step model's inputs
    outputs: tuple[int, ...]  # ... and behind its outputs


@dataclass(frozen=True)
class Plan:
    """How a model is split: the device of each main-subgraph operation, and the steps."""

    device_names: tuple[str, ...]  # the members, then the fallback (if any)
    assignment: tuple[int, ...]
    steps: tuple[Step, ...]

    def describe(self) -> str:
        lines = []
        for k, step in enumerate(self.steps):
            names = ", ".join(
                f"{i}:{operation_type_name(step.model.main.operations[n].type)}"
                for n, i in enumerate(step.operations)
            )
            lines.append(f"step {k} on {self.device_names[step.device]}: {names}")
        return "\n".join(lines)


def _performance(caps: Capabilities, model: Model, index: int, preference: int) -> float:
    op = model.main.operations[index]
    if op.type == OperationType.IF:
        info = caps.if_performance
    elif op.type == OperationType.WHILE:
        info = caps.while_performance
    elif not op.inputs:
        info = _NO_PERFORMANCE
    else:
        t = model.main.operands[op.inputs[0]].type
        if model.relaxed and t == OperandType.TENSOR_FLOAT32:
            info = caps.relaxed_float32_to_float16_performance_tensor
        elif model.relaxed and t == OperandType.FLOAT32:
            info = caps.relaxed_float32_to_float16_performance_scalar
        else:
            info = next((p.info for p in caps.operand_performance if p.type == t), _NO_PERFORMANCE)
    value = info.power_usage if preference == ExecutionPreference.LOW_POWER else info.exec_time
    return value if isinstance(value, (int, float)) and not math.isnan(value) else math.inf


def assign_devices(
    model: Model,
    supported: Sequence[Sequence[bool]],
    performance: Sequence[Capabilities | None],
    *,
    has_fallback: bool,
    preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
) -> list[int | None]:
    """Per main-subgraph operation, the index of its device: the best supporting member
    (``supported[d][i]``, ``performance[d]``), else the fallback (index ``len(supported)``
    when ``has_fallback``), else None."""
    n = len(model.main.operations)
    fallback = len(supported) if has_fallback else None
    result: list[int | None] = []
    for i in range(n):
        best, best_perf = fallback, math.inf
        for d, flags in enumerate(supported):
            if not flags[i]:
                continue
            caps = performance[d]
            perf = _performance(caps, model, i, preference) if caps is not None else math.inf
            if best is fallback or perf < best_perf:
                best, best_perf = d, perf
        result.append(best)
    return result


def form_steps(model: Model, assignment: Sequence[int], n_devices: int) -> list[list[int]]:
    """Android's ``partitionTheWork``: ready operations queue per device; a step drains
    one device's queue (taking operations that become ready on the same device too),
    then the lowest-numbered device with work starts the next step."""
    import heapq

    main = model.main
    producer: dict[int, int] = {}
    for i, op in enumerate(main.operations):
        for o in op.outputs:
            producer[o] = i
    waiting = [sum(1 for o in op.inputs if o in producer) for op in main.operations]
    consumers: dict[int, list[int]] = {}
    for i, op in enumerate(main.operations):
        for o in op.inputs:
            if o in producer:
                consumers.setdefault(o, []).append(i)
    queues: list[list[int]] = [[] for _ in range(n_devices)]
    for i, count in enumerate(waiting):
        if count == 0:
            heapq.heappush(queues[assignment[i]], i)
    steps: list[list[int]] = []
    while True:
        device = next((d for d in range(n_devices) if queues[d]), None)
        if device is None:
            break
        step: list[int] = []
        queue = queues[device]
        while queue:
            i = heapq.heappop(queue)
            step.append(i)
            for o in main.operations[i].outputs:
                for c in consumers.get(o, ()):
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        heapq.heappush(queues[assignment[c]], c)
        steps.append(sorted(step))
    return steps


def _version_of(device: Any) -> HalVersion:
    try:
        return HalVersion(getattr(device, "version", HalVersion.V1_3))
    except (ValueError, TypeError):
        return HalVersion.V1_3


def _name_of(device: Any, fallback: str) -> str:
    name = getattr(device, "name", None)
    return name if isinstance(name, str) and name else fallback


def _outputs_unspecified(model: Model, index: int) -> bool:
    main = model.main
    return any(
        tensor_has_unspecified_dimensions(main.operands[o].type, main.operands[o].dimensions)
        for o in main.operations[index].outputs
    )


def query_support(device: Device, model: Model) -> list[bool]:
    """Which main-subgraph operations ``device`` can run, as a partitioner sees it (see
    the module docstring); never raises for a misbehaving device (its exceptions do)."""
    n = len(model.main.operations)
    status, supported = device.get_supported_operations(model)
    if status == ErrorStatus.NONE and len(supported) == n:
        flags = [bool(s) for s in supported]
    elif status == ErrorStatus.INVALID_ARGUMENT:
        flags = []
        for i in range(n):
            step_model, _, _ = extract_submodel(model, [i])
            st, ok = device.get_supported_operations(step_model)
            flags.append(st == ErrorStatus.NONE and len(ok) == 1 and bool(ok[0]))
    else:
        flags = [False] * n
    if _version_of(device) < HalVersion.V1_2:
        flags = [f and not _outputs_unspecified(model, i) for i, f in enumerate(flags)]
    return flags


# ---------------------------------------------------------------------------------------
# The device
# ---------------------------------------------------------------------------------------


class PartitionedDevice:
    """The device protocol over ``devices`` plus ``fallback`` (the reference unless
    given; ``None`` for none, like an NDK compilation for an explicit device list).

    Operations none of ``devices`` supports run on the fallback. Memory domains and
    compilation caching are not offered (GENERAL_FAILURE)."""

    def __init__(
        self,
        devices: Sequence[Device],
        fallback: Device | str | None = "reference",
        *,
        name: str | None = None,
    ):
        if fallback == "reference":
            from driver.device import DeviceConfig, ReferenceDevice

            fallback = ReferenceDevice(DeviceConfig(name="reference"))
        self.devices = list(devices)
        self.fallback = fallback
        self._all: list[Device] = [*self.devices, *([fallback] if fallback is not None else [])]
        self.device_names = tuple(_name_of(d, f"device{k}") for k, d in enumerate(self._all))
        members = ",".join(self.device_names[: len(self.devices)])
        self._name = name or f"partitioned:{members}"
        self._capabilities: list[Capabilities | None] | None = None
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.last_error = ""

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> HalVersion:
        return _version_of(self.fallback) if self.fallback is not None else HalVersion.V1_3

    def _fail(self, status: ErrorStatus, message: str) -> ErrorStatus:
        self.last_error = message
        return status

    def _workers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(8, thread_name_prefix="nnfuzz-partitioned")
            return self._pool

    def _member_capabilities(self) -> list[Capabilities | None]:
        with self._lock:
            if self._capabilities is None:
                caps: list[Capabilities | None] = []
                for d in self.devices:
                    status, c = d.get_capabilities()
                    caps.append(c if status == ErrorStatus.NONE else None)
                self._capabilities = caps
            return self._capabilities

    # --- queries --------------------------------------------------------------------
    def get_capabilities(self) -> tuple[ErrorStatus, Capabilities]:
        """The fallback's capabilities (the members' are used per operation)."""
        if self.fallback is not None:
            return self.fallback.get_capabilities()
        caps = self._member_capabilities()
        return ErrorStatus.NONE, next((c for c in caps if c is not None), Capabilities())

    def get_version_string(self) -> tuple[ErrorStatus, str]:
        return ErrorStatus.NONE, f"nnfuzz-{self._name}"

    def get_type(self) -> tuple[ErrorStatus, DeviceType]:
        return ErrorStatus.NONE, DeviceType.OTHER

    def get_supported_extensions(self) -> tuple[ErrorStatus, list[Extension]]:
        return ErrorStatus.NONE, []

    def get_number_of_cache_files_needed(self) -> tuple[ErrorStatus, int, int]:
        return ErrorStatus.NONE, 0, 0

    def _validate(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        """The model's validity (the fallback's verdict, or validation at 1.3) and which
        operations the fallback runs."""
        if self.fallback is not None:
            status, supported = self.fallback.get_supported_operations(model)
            if status != ErrorStatus.NONE:
                self.last_error = getattr(self.fallback, "last_error", "") or ""
            return status, [bool(s) for s in supported]
        from driver.validation import validate_model

        try:
            validate_model(model, HalVersion.V1_3)
        except HalError as e:
            return self._fail(e.status, str(e)), []
        return ErrorStatus.NONE, [False] * len(model.main.operations)

    def get_supported_operations(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        """An operation is supported if a member or the fallback runs it."""
        status, flags = self._validate(model)
        if status != ErrorStatus.NONE:
            return status, []
        for device in self.devices:
            flags = [a or b for a, b in zip(flags, query_support(device, model))]
        return ErrorStatus.NONE, flags

    def plan(
        self, model: Model, preference: int = ExecutionPreference.FAST_SINGLE_ANSWER
    ) -> tuple[ErrorStatus, Plan | None]:
        """Partition a model (see the module docstring); no device is prepared."""
        status, fallback_flags = self._validate(model)
        if status != ErrorStatus.NONE:
            return status, None
        supported = [query_support(d, model) for d in self.devices]
        assignment = assign_devices(
            model,
            supported,
            self._member_capabilities(),
            has_fallback=self.fallback is not None,
            preference=preference,
        )
        for i, d in enumerate(assignment):
            if d is None or (d == len(self.devices) and not fallback_flags[i]):
                op = operation_type_name(model.main.operations[i].type)
                return self._fail(
                    ErrorStatus.GENERAL_FAILURE,
                    f"operation {i} ({op}) is supported by no device of {self._name}",
                ), None
        final: list[int] = [d for d in assignment if d is not None]
        steps = []
        for ops in form_steps(model, final, len(self._all)):
            step_model, inputs, outputs = extract_submodel(model, ops)
            steps.append(Step(final[ops[0]], tuple(ops), step_model, inputs, outputs))
        return ErrorStatus.NONE, Plan(self.device_names, tuple(final), tuple(steps))

    # --- preparation ----------------------------------------------------------------
    def prepare_model(
        self,
        model: Model,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline: int | None = None,
        model_cache: Sequence[int] = (),
        data_cache: Sequence[int] = (),
        token: bytes | None = None,
    ) -> tuple[ErrorStatus, PartitionedPreparedModel | None]:
        """Plan, then prepare every step on its device (caching is not offered)."""
        # The shared option checks (bools and out-of-range codes rejected, a deadline
        # must be an int instant) rather than a local copy that lets a bad type raise.
        try:
            preference = validate_execution_preference(preference)
            priority = validate_priority(priority)
            deadline = validate_deadline(deadline)
        except HalError as e:
            return self._fail(e.status, e.message), None
        if deadline is not None and time.monotonic_ns() > deadline:
            return self._fail(
                ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline already passed"
            ), None
        status, plan = self.plan(model, preference)
        if status != ErrorStatus.NONE or plan is None:
            return status, None
        prepared = []
        for k, step in enumerate(plan.steps):
            device = self._all[step.device]
            modern = _version_of(device) >= HalVersion.V1_3
            status, pm = device.prepare_model(
                step.model,
                preference,
                priority if modern else Priority.MEDIUM,
                deadline if modern else None,
            )
            if status != ErrorStatus.NONE or pm is None:
                detail = getattr(device, "last_error", "") or ""
                return self._fail(
                    _as_status(status)
                    if status != ErrorStatus.NONE
                    else ErrorStatus.GENERAL_FAILURE,
                    f"step {k} on {plan.device_names[step.device]}: prepareModel returned "
                    f"{_status_name(status)}" + (f" ({detail})" if detail else ""),
                ), None
            prepared.append(pm)
        return ErrorStatus.NONE, PartitionedPreparedModel(self, model, plan, prepared)

    def prepare_model_from_cache(
        self,
        deadline: int | None,
        model_cache: Sequence[int],
        data_cache: Sequence[int],
        token: bytes,
    ) -> tuple[ErrorStatus, None]:
        return self._fail(ErrorStatus.GENERAL_FAILURE, "a partitioned device has no cache"), None

    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[Any],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[ErrorStatus, None, int]:
        return (
            self._fail(
                ErrorStatus.GENERAL_FAILURE, "a partitioned device offers no memory domains"
            ),
            None,
            0,
        )


# ---------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------


class _ZeroSizedBoundary(Exception):
    def __init__(self, step: int, operand: int, dims: tuple[int, ...]):
        super().__init__(
            f"step {step} produced operand {operand} with zero-sized dimensions {list(dims)}, "
            "which a later step reads"
        )


@dataclass
class _Place:
    """Where an operand's value is during an execution."""

    pool: Memory | None  # None: omitted (no value)
    offset: int
    length: int
    dims: tuple[int, ...]  # as a request argument gives them (may be () = the model's)


def _arena(sizes: Sequence[int]) -> tuple[Memory, list[int]]:
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += size + (-size % _ALIGN)
    return allocate_shared_memory(total), offsets


class PartitionedPreparedModel(LaunchedExecutions):
    """The prepared steps of a plan; every execution path runs them in order."""

    def __init__(self, device: PartitionedDevice, model: Model, plan: Plan, prepared: list[Any]):
        self.device = device
        self.model = model
        self.plan = plan
        self.prepared = prepared
        self._size_hints: dict[int, int] = {}  # operand -> bytes it took last time
        # Per step, its outputs that later steps read (the partition boundaries).
        read_later: set[int] = set()
        boundaries: list[frozenset[int]] = []
        for step in reversed(plan.steps):
            boundaries.append(frozenset(step.outputs) & read_later)
            read_later |= set(step.inputs)
        self._boundaries = boundaries[::-1]
        self._whole: Any = None  # the model prepared whole on the fallback, when needed
        self._lock = threading.Lock()
        self.full_fallbacks = 0

    # --- the core ---------------------------------------------------------------------
    def _run(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        *,
        fenced: bool = False,
        started_us: int | None = None,
    ) -> ExecutionResult:
        try:
            try:
                return self._execute(request, measure, deadline, loop_timeout, fenced, started_us)
            except _ZeroSizedBoundary as boundary:
                return self._run_whole(boundary, request, measure, deadline, loop_timeout)
        except HalError as e:
            self.device.last_error = e.message or str(e)
            return e.status, [], NO_TIMING

    def _run_whole(
        self,
        boundary: _ZeroSizedBoundary,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
    ) -> ExecutionResult:
        """A zero-sized tensor crosses a partition boundary, which no request can
        express (a 0 dimension means "unspecified"): run the whole model on the fallback,
        as Android's runtime falls back to the CPU."""
        fallback = self.device.fallback
        if fallback is None:
            raise HalError(ErrorStatus.GENERAL_FAILURE, str(boundary))
        with self._lock:
            if self._whole is None:
                status, whole = fallback.prepare_model(self.model)
                if status != ErrorStatus.NONE or whole is None:
                    raise HalError(
                        _as_status(status), f"{boundary}; the fallback could not prepare the model"
                    )
                self._whole = whole
            self.full_fallbacks += 1
        return self._whole.execute_synchronously(request, measure, deadline, loop_timeout)

    def _check(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        fenced: bool,
    ) -> None:
        from driver.validation import validate_execution

        validate_execution(
            self.model, request, HalVersion.V1_3, measure, deadline, loop_timeout, fenced=fenced
        )
        for k, pool in enumerate(request.pools):
            if isinstance(pool, BufferToken):
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"request pool {k}: buffer token {pool.token} was not allocated by this device",
                )

    def _execute(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        fenced: bool,
        started_us: int | None,
    ) -> ExecutionResult:
        start = now_us() if started_us is None else started_us
        self._check(request, measure, deadline, loop_timeout, fenced)
        if deadline is not None and time.monotonic_ns() > deadline:
            raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline already passed")
        main = self.model.main
        places: dict[int, _Place] = {}
        for k, o in enumerate(main.input_indexes):
            arg = request.inputs[k]
            if arg.has_no_value:
                places[o] = _Place(None, 0, 0, ())
            else:
                pool = request.pools[arg.location.pool_index]
                places[o] = _Place(pool, arg.location.offset, arg.location.length, arg.dimensions)
        caller_out = {o: k for k, o in enumerate(main.output_indexes)}
        insufficient: dict[int, tuple[int, ...]] = {}  # model output -> the shape it needs
        on_device = 0
        timed = measure == MeasureTiming.YES
        for k, step in enumerate(self.plan.steps):
            if k and deadline is not None and time.monotonic_ns() > deadline:
                raise HalError(
                    ErrorStatus.MISSED_DEADLINE_TRANSIENT, f"deadline passed at step {k}"
                )
            timing = self._run_step(
                k, step, request, places, caller_out, insufficient, measure, deadline, loop_timeout
            )
            if timing.time_on_device == UINT64_MAX:
                timed = False
            else:
                on_device += timing.time_on_device
        shapes = []
        for o in main.output_indexes:
            if o in insufficient:
                shapes.append(OutputShape(insufficient[o], False))
            else:
                shapes.append(OutputShape(self._full_dims(o, places[o].dims), True))
        if insufficient:
            self.device.last_error = "output buffer too small"
            return ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, shapes, NO_TIMING
        if not timed:
            return ErrorStatus.NONE, shapes, NO_TIMING
        total = now_us() - start
        return ErrorStatus.NONE, shapes, Timing(on_device, max(total, on_device))

    def _full_dims(self, operand: int, dims: tuple[int, ...]) -> tuple[int, ...]:
        op = self.model.main.operands[operand]
        if is_scalar_type(op.type):
            return ()
        return tuple(dims) if dims else tuple(op.dimensions)

    def _run_step(
        self,
        k: int,
        step: Step,
        request: Request,
        places: dict[int, _Place],
        caller_out: dict[int, int],
        insufficient: dict[int, tuple[int, ...]],
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
    ) -> Timing:
        main = self.model.main
        device = self.device._all[step.device]
        name = self.plan.device_names[step.device]
        modern = _version_of(device) >= HalVersion.V1_3
        pools: list[Memory] = []
        pool_index: dict[int, int] = {}

        def pool_of(memory: Memory) -> int:
            i = pool_index.get(id(memory))
            if i is None:
                i = pool_index[id(memory)] = len(pools)
                pools.append(memory)
            return i

        def argument(place: _Place) -> RequestArgument:
            if place.pool is None:
                return RequestArgument(has_no_value=True)
            return RequestArgument(
                False,
                DataLocation(pool_of(place.pool), place.offset, place.length),
                tuple(place.dims),
            )

        for o in step.inputs:
            if o not in places:  # the plan guarantees producers run first
                raise HalError(ErrorStatus.GENERAL_FAILURE, f"step {k}: operand {o} has no value")
        # Outputs: the caller's memory for model outputs, harness memory for the rest.
        targets: dict[int, _Place] = {}
        temps: list[int] = []
        for o in step.outputs:
            if o in caller_out and o not in insufficient:
                arg = request.outputs[caller_out[o]]
                pool = request.pools[arg.location.pool_index]
                targets[o] = _Place(pool, arg.location.offset, arg.location.length, arg.dimensions)
            else:
                temps.append(o)
        self._allocate(temps, targets, {})
        for attempt in range(_MAX_ATTEMPTS):
            step_request = Request(
                tuple(argument(places[o]) for o in step.inputs),
                tuple(argument(targets[o]) for o in step.outputs),
                (),
            )
            step_request = replace(step_request, pools=tuple(pools))
            status, shapes, timing = self.prepared[k].execute_synchronously(
                step_request,
                measure,
                deadline if modern else None,
                loop_timeout if modern else None,
            )
            if status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE or attempt == _MAX_ATTEMPTS - 1:
                break
            if len(shapes) != len(step.outputs):
                break
            grow: dict[int, tuple[int, ...]] = {}
            for o, shape in zip(step.outputs, shapes):
                if shape.is_sufficient:
                    continue
                dims = tuple(shape.dimensions)
                if o in caller_out and o not in insufficient:
                    insufficient[o] = dims
                grow[o] = dims
            if not grow:
                break
            self._allocate(list(grow), targets, grow)
        if status != ErrorStatus.NONE:
            detail = getattr(device, "last_error", "") or ""
            raise HalError(
                _as_status(status),
                f"step {k} on {name}: {_status_name(status)}" + (f" ({detail})" if detail else ""),
            )
        reported = len(shapes) == len(step.outputs)
        step_operands = step.model.main.operands
        for j, o in enumerate(step.outputs):
            place = targets[o]
            operand = main.operands[o]
            if is_scalar_type(operand.type):
                places[o] = _Place(place.pool, place.offset, place.length, ())
                continue
            dims = tuple(shapes[j].dimensions) if reported else ()
            measured = bool(dims)  # a reported shape may hold 0: a zero-sized tensor
            if not dims:
                declared = step_operands[step.model.main.output_indexes[j]]
                dims = tuple(place.dims or declared.dimensions)
            if not dims or (0 in dims and not measured):
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"step {k} on {name}: output {j} (operand {o}) has unspecified dimensions "
                    "and the device reported no shape",
                )
            if 0 in dims and o in self._boundaries[k]:
                raise _ZeroSizedBoundary(k, o, dims)
            size = non_extension_size_of_data(operand.type, dims)
            self._size_hints[o] = size
            places[o] = _Place(place.pool, place.offset, size, dims)
        return timing if isinstance(timing, Timing) else NO_TIMING

    def _allocate(
        self, operands: list[int], targets: dict[int, _Place], dims: dict[int, tuple[int, ...]]
    ) -> None:
        """Harness memory for ``operands`` (one arena), sized from ``dims`` (reported
        shapes), the declared dims, or the last size seen / a guess."""
        if not operands:
            return
        main = self.model.main
        sizes = []
        for o in operands:
            operand = main.operands[o]
            d = dims.get(o, operand.dimensions)
            if is_scalar_type(operand.type) or not tensor_has_unspecified_dimensions(
                operand.type, d
            ):
                size = non_extension_size_of_data(operand.type, d)
            else:
                size = self._size_hints.get(o, _UNKNOWN_SIZE_GUESS)
            sizes.append(max(size, 1))
        arena, offsets = _arena(sizes)
        for o, offset, size in zip(operands, offsets, sizes):
            targets[o] = _Place(arena, offset, size, ())

    # --- execution paths ------------------------------------------------------------
    def execute_synchronously(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        """``executeSynchronously_1_3``: the steps in order."""
        return self._run(request, measure, deadline, loop_timeout)

    def configure_execution_burst(self) -> tuple[ErrorStatus, PartitionedBurst]:
        return ErrorStatus.NONE, PartitionedBurst(self)


class PartitionedBurst:
    """A burst over a partitioned model: each execution runs the steps (step devices are
    called synchronously, so there is no slot cache to keep)."""

    def __init__(self, prepared: PartitionedPreparedModel):
        self.prepared = prepared

    def execute(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        return self.prepared._run(request, measure, deadline, loop_timeout)

    def free_memory(self, memory: Memory) -> None:
        pass


# ---------------------------------------------------------------------------------------
# One call
# ---------------------------------------------------------------------------------------


def execute_partitioned(
    model: Model,
    inputs: Sequence[np.ndarray | None],
    devices: Sequence[Device],
    *,
    fallback: Device | str | None = "reference",
) -> list[np.ndarray]:
    """Run ``model`` on ``inputs`` partitioned across ``devices`` (and ``fallback``);
    returns the outputs with their actual shapes. Raises :class:`HalError` (status and
    the device's message) if preparation or execution fails."""
    from driver.builder import build_request
    from driver.operations.base import array_from_bytes

    device = PartitionedDevice(devices, fallback)
    status, prepared = device.prepare_model(model)
    if status != ErrorStatus.NONE or prepared is None:
        raise HalError(status, device.last_error)
    bundle = build_request(model, inputs)
    status, shapes, _ = prepared.execute_synchronously(bundle.request)
    if status != ErrorStatus.NONE:
        raise HalError(status, device.last_error)
    main = model.main
    outputs = []
    for k, o in enumerate(main.output_indexes):
        operand = main.operands[o]
        dims = () if is_scalar_type(operand.type) else tuple(shapes[k].dimensions)
        size = non_extension_size_of_data(operand.type, dims)
        outputs.append(array_from_bytes(operand.type, dims, bundle.output_bytes(k)[:size]))
    return outputs
