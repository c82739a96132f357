"""The reference device: validation + executor behind the NN HAL 1.3 device protocol.

:class:`ReferenceDevice` implements :class:`driver.hal.device.Device`; the prepared models
it returns implement every execution path (synchronous, asynchronous with a callback,
fenced, burst), timing, output shapes and OUTPUT_INSUFFICIENT_SIZE, request pools in real
shared memory and driver-managed buffers (memory domains), priorities, deadlines and
resource budgets. Every public method returns a HAL status; internal failures are raised
as :class:`HalError` and converted at the boundary.

A feature-level variant (``ReferenceDevice(version=HalVersion.V1_1)``) validates models,
requests and options as that HAL version would; the interface of that version (methods it
lacks, the 1.3 statuses reported as GENERAL_FAILURE) is
:class:`driver.drivers.feature_level.FeatureLevelDevice`'s part, and the registered
``reference-1.x`` drivers combine the two — use those as a driver of that version.

Priorities order the executions of the whole device (one scheduler), not per client as
Android orders a caller's models by UID: this device has no notion of callers.

Compilation caching (HAL 1.2+): one model-cache and one data-cache file
(:mod:`driver.cache`); ``prepare_model`` with cache descriptors and a token saves the
compilation (best effort: a compilation that cannot be saved is still prepared) and
``prepare_model_from_cache`` restores it or returns GENERAL_FAILURE.

Vendor extensions (:mod:`driver.extensions`): the device supports the registered
extensions named in ``DeviceConfig.extensions`` (``driver.extensions.extension_device()``
configures every registered one); it validates their operands and operations and runs
them. OEM operations are valid in models but have no kernel here: they are reported
unsupported, and ``prepare_model`` fails with GENERAL_FAILURE.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from driver import cache as compilation_cache
from driver.buffers import BufferRegistry, DriverBuffer
from driver.executor import MAX_NESTING_DEPTH, Executor
from driver.extensions import EXTENSIONS, ModelTypes, types_for, validate_extension_use
from driver.hal.device import (
    DEFAULT_LOOP_TIMEOUT_NS,
    MAX_LOOP_TIMEOUT_NS,
    ExecutionResult,
)
from driver.hal.types import (
    NO_TIMING,
    BufferDesc,
    BufferRole,
    BufferToken,
    Capabilities,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Extension,
    HalError,
    HalVersion,
    MeasureTiming,
    Memory,
    Model,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    OutputShape,
    PerformanceInfo,
    Priority,
    Request,
    Timing,
)
from driver.launch import LaunchedExecutions, now_us
from driver.log import VLOG, vlog
from driver.memory import SUPPORTED_MEMORY_NAMES, pool_buffer
from driver.operations import declaration
from driver.operations.base import OperationDeclaration
from driver.scheduler import Budget, PriorityScheduler
from driver.validation import (
    nesting_depth,
    reachable_subgraphs,
    validate_deadline,
    validate_execution,
    validate_execution_preference,
    validate_model,
    validate_priority,
)

SupportFilter = Callable[[Model, int], bool]
"""``(model, main-subgraph operation index) -> supported`` for partial drivers."""


@dataclass(frozen=True)
class DeviceConfig:
    name: str = "reference"
    version: HalVersion = HalVersion.V1_3
    device_type: DeviceType = DeviceType.CPU
    version_string: str = "nnfuzz-reference-1"
    budget: Budget = field(default_factory=Budget)
    support_filter: SupportFilter | None = None
    extensions: tuple[Extension, ...] = ()
    emulate_relaxed_float16: bool = False
    supports_memory_domains: bool = True
    # Replacement operation declarations (planted-bug drivers swap kernels with these).
    operation_overrides: Mapping[int, OperationDeclaration] = field(default_factory=dict)
    # Key material of compilation-cache checksums; None: the public default (caches are
    # integrity-checked but forgeable by whoever knows it; see driver/cache.py).
    cache_secret: bytes | None = None


def _status_of(e: HalError) -> ErrorStatus:
    return e.status


class ReferenceDevice:
    """``IDevice`` on numpy. Thread-safe; queries always report the same values."""

    def __init__(self, config: DeviceConfig | None = None, **overrides):
        cfg = config or DeviceConfig()
        if overrides:
            cfg = replace(cfg, **overrides)
        self.config = cfg
        self.scheduler = PriorityScheduler(cfg.budget)
        self.buffers = BufferRegistry()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._capabilities = _reference_capabilities(cfg.version)
        self.last_error: str = ""  # message of the last non-NONE status (diagnostics)
        # Extensions this device supports: configured and registered.
        self.extension_names = frozenset(e.name for e in cfg.extensions) & frozenset(EXTENSIONS)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def version(self) -> HalVersion:
        return self.config.version

    def _workers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    # Enough threads that queued executions wait in the priority
                    # scheduler (which orders them), not in this pool's FIFO.
                    max_workers=min(
                        64, self.config.budget.max_concurrent + self.config.budget.max_queued
                    ),
                    thread_name_prefix=f"nnfuzz-{self.config.name}",
                )
            return self._pool

    def _fail(self, e: HalError) -> ErrorStatus:
        self.last_error = str(e)
        return e.status

    # --- queries --------------------------------------------------------------------
    def get_capabilities(self) -> tuple[ErrorStatus, Capabilities]:
        """``getCapabilities_1_3``."""
        return ErrorStatus.NONE, self._capabilities

    def get_version_string(self) -> tuple[ErrorStatus, str]:
        """``getVersionString``."""
        return ErrorStatus.NONE, self.config.version_string

    def get_type(self) -> tuple[ErrorStatus, DeviceType]:
        """``getType``."""
        return ErrorStatus.NONE, self.config.device_type

    def get_supported_extensions(self) -> tuple[ErrorStatus, list[Extension]]:
        """``getSupportedExtensions``."""
        return ErrorStatus.NONE, list(self.config.extensions)

    def get_number_of_cache_files_needed(self) -> tuple[ErrorStatus, int, int]:
        """``getNumberOfCacheFilesNeeded``: one model-cache and one data-cache file from
        HAL 1.2 (none before: there is no caching there)."""
        if self.config.version < HalVersion.V1_2:
            return ErrorStatus.NONE, 0, 0
        return (
            ErrorStatus.NONE,
            compilation_cache.NUM_MODEL_CACHE_FILES,
            compilation_cache.NUM_DATA_CACHE_FILES,
        )

    def types_for(self, model: Model) -> ModelTypes:
        """``model``'s type codes resolved through the extensions this device supports."""
        return types_for(model, self.extension_names)

    @property
    def cache_identity(self) -> str:
        """What a compilation cache is bound to besides the token: the version string
        and the configuration that changes what a prepared model computes."""
        cfg = self.config
        return (
            f"{cfg.version_string} ({cfg.name}; HAL {cfg.version.label}; relaxed-fp16 "
            f"{int(cfg.emulate_relaxed_float16)}; extensions [{','.join(sorted(self.extension_names))}])"
        )

    def get_supported_operations(self, model: Model) -> tuple[ErrorStatus, list[bool]]:
        """``getSupportedOperations_1_3``."""
        try:
            validate_model(model, self.config.version)
            validate_extension_use(model, self.extension_names, self.config.version)
        except HalError as e:
            if VLOG.model:
                vlog("model", "%s: getSupportedOperations: %s", self.config.name, e)
            return self._fail(e), []
        return ErrorStatus.NONE, [
            self._supports(model, i) for i in range(len(model.main.operations))
        ]

    def _supports(self, model: Model, index: int) -> bool:
        op = model.main.operations[index]
        if not _runnable(model, model.main, op, self.types_for(model).operation):
            return False
        if self.config.support_filter is not None:
            return bool(self.config.support_filter(model, index))
        return True

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
    ) -> tuple[ErrorStatus, ReferencePreparedModel | None]:
        """``prepareModel_1_3``."""
        try:
            preference = validate_execution_preference(preference)
            priority = validate_priority(priority)
            deadline = validate_deadline(deadline)
            if self.config.version < HalVersion.V1_3 and (
                priority != Priority.MEDIUM or deadline is not None
            ):
                raise HalError(ErrorStatus.INVALID_ARGUMENT, "priority and deadline need HAL 1.3")
            validate_model(model, self.config.version)
            validate_extension_use(model, self.extension_names, self.config.version)
            if deadline is not None and time.monotonic_ns() > deadline:
                raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline already passed")
            unsupported = [
                i for i in range(len(model.main.operations)) if not self._supports(model, i)
            ]
            if unsupported:
                raise HalError(
                    ErrorStatus.GENERAL_FAILURE,
                    f"operations {unsupported} of the main subgraph are not supported",
                )
            prepared = ReferencePreparedModel(
                self, model, Priority(priority), preference=ExecutionPreference(preference)
            )
        except HalError as e:
            if VLOG.compilation:
                vlog("compilation", "%s: prepare_model failed: %s", self.config.name, e)
            return self._fail(e), None
        if VLOG.compilation:
            vlog(
                "compilation",
                "%s: prepared %d operations (%d subgraphs)",
                self.config.name,
                len(model.main.operations),
                1 + len(model.referenced),
            )
        if token is not None or model_cache or data_cache:
            self._save_to_cache(prepared, model_cache, data_cache, token)
        return ErrorStatus.NONE, prepared

    def _save_to_cache(
        self,
        prepared: ReferencePreparedModel,
        model_cache: Sequence[int],
        data_cache: Sequence[int],
        token: bytes | None,
    ) -> bool:
        """Best effort, as the HAL allows: a compilation that cannot be saved (no
        caching before 1.2, wrong number of files, a bad token, a descriptor that is not
        writable) is still prepared, and restoring it later fails cleanly."""
        try:
            if self.config.version < HalVersion.V1_2:
                raise compilation_cache.CacheError("compilation caching needs HAL 1.2")
            if not isinstance(token, bytes) or len(token) != compilation_cache.TOKEN_SIZE:
                raise compilation_cache.CacheError(
                    f"the token must be {compilation_cache.TOKEN_SIZE} bytes"
                )
            entry = compilation_cache.CacheEntry(
                prepared.model,
                prepared.executor.step_facts(),
                int(prepared.preference),
                int(prepared.priority),
            )
            compilation_cache.save(
                entry,
                model_cache,
                data_cache,
                token=token,
                identity=self.cache_identity,
                secret=self._cache_secret,
            )
        except Exception as e:  # never fails the preparation
            if VLOG.compilation:
                vlog("compilation", "%s: not cached: %s: %s", self.config.name, type(e).__name__, e)
            return False
        if VLOG.compilation:
            vlog("compilation", "%s: cached for token %s", self.config.name, token.hex()[:16])
        return True

    @property
    def _cache_secret(self) -> bytes:
        secret = self.config.cache_secret
        return compilation_cache.DEFAULT_SECRET if secret is None else secret

    def prepare_model_from_cache(
        self,
        deadline: int | None,
        model_cache: Sequence[int],
        data_cache: Sequence[int],
        token: bytes,
    ) -> tuple[ErrorStatus, ReferencePreparedModel | None]:
        """``prepareModelFromCache_1_3``: the prepared model ``prepare_model`` saved for
        ``token``, without validating or planning again (the cache's checksum vouches for
        what the first preparation proved; see :mod:`driver.cache`). Any file that is not
        exactly what this driver wrote for this token — missing, truncated, corrupted,
        swapped, another token's, another driver version's — gives GENERAL_FAILURE, as
        does a device without caching (below HAL 1.2). A malformed deadline is
        INVALID_ARGUMENT; one already passed, MISSED_DEADLINE_PERSISTENT."""
        started = time.perf_counter_ns()
        try:
            if self.config.version < HalVersion.V1_2:
                raise HalError(ErrorStatus.GENERAL_FAILURE, "compilation caching needs HAL 1.2")
            if deadline is not None:
                if self.config.version < HalVersion.V1_3:
                    raise HalError(ErrorStatus.INVALID_ARGUMENT, "a deadline needs HAL 1.3")
                validate_deadline(deadline)
                if time.monotonic_ns() > deadline:
                    raise HalError(
                        ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline already passed"
                    )
            prepared = self._restore(model_cache, data_cache, token)
        except HalError as e:
            if VLOG.compilation:
                vlog("compilation", "%s: cache miss: %s", self.config.name, e)
            return self._fail(e), None
        if VLOG.compilation:
            vlog(
                "compilation",
                "%s: cache hit, %d operations restored in %d us",
                self.config.name,
                len(prepared.model.main.operations),
                (time.perf_counter_ns() - started) // 1000,
            )
        return ErrorStatus.NONE, prepared

    def _restore(
        self, model_cache: Sequence[int], data_cache: Sequence[int], token: bytes
    ) -> ReferencePreparedModel:
        failure = ErrorStatus.GENERAL_FAILURE
        try:
            entry = compilation_cache.load(
                model_cache,
                data_cache,
                token=token,
                identity=self.cache_identity,
                secret=self._cache_secret,
            )
            model = entry.model
            executor = Executor(
                model,
                version=self.config.version,
                emulate_relaxed_float16=self.config.emulate_relaxed_float16,
                overrides=self.config.operation_overrides,
                types=self.types_for(model),
                facts=entry.facts,
            )
            return ReferencePreparedModel(
                self,
                model,
                Priority(entry.priority),
                executor=executor,
                preference=ExecutionPreference(entry.preference),
            )
        except compilation_cache.CacheError as e:
            raise HalError(failure, f"compilation cache: {e}") from None
        except HalError as e:
            raise HalError(failure, f"compilation cache: {e.message}") from None
        except Exception as e:  # defense in depth: verified bytes never get here
            raise HalError(failure, f"compilation cache: {type(e).__name__}: {e}") from e

    # --- memory domains -------------------------------------------------------------
    def allocate(
        self,
        desc: BufferDesc,
        prepared_models: Sequence[object],
        input_roles: Sequence[BufferRole],
        output_roles: Sequence[BufferRole],
    ) -> tuple[ErrorStatus, DriverBuffer | None, int]:
        """``allocate``."""
        if not self.config.supports_memory_domains or self.config.version < HalVersion.V1_3:
            self.last_error = "memory domains are not supported"
            return ErrorStatus.GENERAL_FAILURE, None, 0
        try:
            buffer, token = self.buffers.allocate(
                self, desc, prepared_models, input_roles, output_roles
            )
        except HalError as e:
            return self._fail(e), None, 0
        return ErrorStatus.NONE, buffer, token


def _runnable(model: Model, sg, op, resolve=declaration) -> bool:
    """The reference has a kernel for ``op``, can map the pools its constant inputs live
    in and, for IF/WHILE, the same holds for every operation of the subgraphs it
    reaches, which nest at most :data:`driver.executor.MAX_NESTING_DEPTH` levels deep
    (``model`` is valid, so indexes are in range). ``resolve`` maps an operation type to
    its declaration (extensions included)."""
    reachable = reachable_subgraphs(model, sg, op) or []
    if reachable and nesting_depth(model, sg, op) > MAX_NESTING_DEPTH:
        return False  # execution would fail with GENERAL_FAILURE
    places = [(sg, op)]
    places += [
        (model.referenced[k], inner) for k in reachable for inner in model.referenced[k].operations
    ]
    for body, inner in places:
        if resolve(inner.type) is None:
            return False
        for i in inner.inputs:
            operand = body.operands[i]
            if (
                operand.lifetime == OperandLifeTime.CONSTANT_REFERENCE
                and model.pools[operand.location.pool_index].name not in SUPPORTED_MEMORY_NAMES
            ):
                return False  # e.g. a non-BLOB hardware_buffer: preparing would fail
    return True


def _reference_capabilities(version: HalVersion) -> Capabilities:
    one = PerformanceInfo(1.0, 1.0)
    # HAL 1.3: performance does not apply to SUBGRAPH and a driver must not report it
    # (Android's nonExtensionOperandPerformance skips it; VTS checks).
    no_performance = (OperandType.OEM, OperandType.TENSOR_OEM_BYTE, OperandType.SUBGRAPH)
    types = [t for t in OperandType if t not in no_performance]
    if version < HalVersion.V1_3:
        types = [t for t in types if t <= OperandType.TENSOR_QUANT8_SYMM]
    if version < HalVersion.V1_2:
        types = [t for t in types if t <= OperandType.TENSOR_QUANT8_ASYMM]
    return Capabilities(
        relaxed_float32_to_float16_performance_scalar=one,
        relaxed_float32_to_float16_performance_tensor=one,
        operand_performance=tuple(OperandPerformance(t, one) for t in sorted(types)),
        if_performance=one,
        while_performance=one,
    )


# ---------------------------------------------------------------------------------------
# Prepared model
# ---------------------------------------------------------------------------------------


class ReferencePreparedModel(LaunchedExecutions):
    """``IPreparedModel``: executions on one prepared model may run in parallel."""

    def __init__(
        self,
        device: ReferenceDevice,
        model: Model,
        priority: Priority,
        *,
        executor: Executor | None = None,
        preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
    ):
        self.device = device
        self.model = model
        self.priority = priority
        self.preference = preference
        if executor is None:
            executor = Executor(
                model,
                version=device.config.version,
                emulate_relaxed_float16=device.config.emulate_relaxed_float16,
                overrides=device.config.operation_overrides,
                types=device.types_for(model),
            )
        self.executor = executor
        self.types = executor.types
        main = model.main
        self._input_operands = [main.operands[i] for i in main.input_indexes]
        self._output_operands = [main.operands[i] for i in main.output_indexes]

    # --- the execution core shared by every path ------------------------------------
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
        start_us = started_us if started_us is not None else now_us()
        dev = self.device
        out_buffers: list[DriverBuffer] = []
        try:
            measure, deadline, loop_timeout = self._check(
                request, measure, deadline, loop_timeout, fenced
            )
            loop_ns = DEFAULT_LOOP_TIMEOUT_NS if loop_timeout is None else loop_timeout
            loop_ns = min(loop_ns, MAX_LOOP_TIMEOUT_NS)
            if deadline is not None and time.monotonic_ns() > deadline:
                raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline already passed")
            out_buffers = self._check_buffer_uses(request)
            inputs = self._read_inputs(request)
            memory = sum(a.nbytes for a in inputs if a is not None) + sum(
                arg.location.length for arg in request.outputs
            )
            with dev.scheduler.slot(self.priority, deadline, memory):
                device_start = now_us()
                outputs = self.executor.run(
                    inputs,
                    deadline=None if deadline is None else deadline / 1e9,
                    loop_timeout=loop_ns / 1e9,
                )
                device_end = now_us()
            shapes = self._write_outputs(request, outputs)
        except HalError as e:
            dev._fail(e)
            if VLOG.execution:
                vlog("execution", "%s: execution failed: %s", dev.config.name, e)
            # A failed execution leaves its driver-managed outputs uninitialized. (Not
            # ``locals()``: its snapshot would hold ``e``, whose traceback holds this frame,
            # keeping the caller's frames, pools and buffers alive until a GC cycle.)
            for buf in out_buffers:
                buf.invalidate()
            return e.status, [], NO_TIMING
        if VLOG.execution:
            vlog(
                "execution",
                "%s: executed %d operations in %d us, output shapes %s",
                dev.config.name,
                len(self.model.main.operations),
                device_end - device_start,
                [list(s.dimensions) for s in shapes],
            )
        if not all(s.is_sufficient for s in shapes):
            dev.last_error = "output buffer too small"
            return ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, shapes, NO_TIMING
        timing = NO_TIMING
        if measure == MeasureTiming.YES:
            end = now_us()
            on_device = device_end - device_start
            timing = Timing(time_on_device=on_device, time_in_driver=max(end - start_us, on_device))
        return ErrorStatus.NONE, shapes, timing

    def _check(
        self,
        request: Request,
        measure: int,
        deadline: int | None,
        loop_timeout: int | None,
        fenced: bool,
    ) -> tuple[MeasureTiming, int | None, int | None]:
        """Validates an execution's arguments (raises INVALID_ARGUMENT)."""
        return validate_execution(
            self.model,
            request,
            self.device.config.version,
            measure,
            deadline,
            loop_timeout,
            fenced=fenced,
        )

    def _check_buffer_uses(self, request: Request) -> list[DriverBuffer]:
        """Memory-domain rules: a buffer may be read by several inputs, but not written
        twice nor read and written by the same execution. Returns the output buffers."""

        def token_of(arg):
            if arg.has_no_value or not 0 <= arg.location.pool_index < len(request.pools):
                return None
            pool = request.pools[arg.location.pool_index]
            return pool.token if isinstance(pool, BufferToken) else None

        in_tokens = {t for t in map(token_of, request.inputs) if t is not None}
        out_tokens: list[int] = []
        for k, arg in enumerate(request.outputs):
            t = token_of(arg)
            if t is None:
                continue
            if t in in_tokens or t in out_tokens:
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"output {k}: buffer token {t} is used twice in one execution",
                )
            out_tokens.append(t)
        return [
            self.device.buffers.lookup(t, self, k, is_output=True)
            for k, t in ((k, token_of(a)) for k, a in enumerate(request.outputs))
            if t is not None
        ]

    def _read_inputs(self, request: Request) -> list[np.ndarray | None]:
        inputs: list[np.ndarray | None] = []
        for k, arg in enumerate(request.inputs):
            operand = self._input_operands[k]
            if arg.has_no_value:
                inputs.append(None)
                continue
            dims = tuple(arg.dimensions) or operand.dimensions
            pool = request.pools[arg.location.pool_index]
            if isinstance(pool, BufferToken):
                buf = self.device.buffers.lookup(pool.token, self, k, is_output=False)
                inputs.append(buf.read(operand.type, tuple(arg.dimensions)))
                continue
            need = self.types.size_of(operand.type, dims)
            if arg.location.length < need:
                raise HalError(
                    ErrorStatus.INVALID_ARGUMENT,
                    f"input {k}: {arg.location.length} bytes given, dims {list(dims)} need {need}",
                )
            data = pool_buffer(pool)[arg.location.offset : arg.location.offset + need]
            inputs.append(self.types.decode(operand.type, dims, data))
        return inputs

    def _write_outputs(self, request: Request, outputs: list[np.ndarray]) -> list[OutputShape]:
        shapes: list[OutputShape] = []
        writes = []
        for k, (arg, arr) in enumerate(zip(request.outputs, outputs)):
            operand = self._output_operands[k]
            pool = request.pools[arg.location.pool_index]
            if isinstance(pool, BufferToken):
                buf = self.device.buffers.lookup(pool.token, self, k, is_output=True)
                ok = buf.fits(arr.shape)
                shapes.append(OutputShape(tuple(arr.shape), ok))
                if ok:
                    writes.append((buf, arr, operand.type))
                continue
            data = self.types.encode(arr, operand.type)
            ok = len(data) <= arg.location.length
            shapes.append(OutputShape(tuple(int(d) for d in arr.shape), ok))
            if ok:
                writes.append((pool, arg.location.offset, data))
        if all(s.is_sufficient for s in shapes):
            for w in writes:
                if isinstance(w[0], DriverBuffer):
                    w[0].write(w[1], w[2])
                else:
                    pool, offset, data = w
                    mapped = pool_buffer(pool)
                    if mapped.readonly:
                        raise HalError(
                            ErrorStatus.INVALID_ARGUMENT,
                            f"an output pool ({pool.name}, {pool.size} bytes) is read-only",
                        )
                    mapped[offset : offset + len(data)] = data
        return shapes

    # --- execution paths ------------------------------------------------------------
    def execute_synchronously(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        """``executeSynchronously_1_3``."""
        return self._run(request, measure, deadline, loop_timeout)

    def configure_execution_burst(self) -> tuple[ErrorStatus, ReferenceBurst]:
        """``configureExecutionBurst``."""
        return ErrorStatus.NONE, ReferenceBurst(self)


class ReferenceBurst:
    """``IBurstContext`` plus the client controller: pools are cached by slot, so a burst
    of executions on the same memory does not re-map it. As Android's burst controller
    frees a slot when its memory object is destroyed, a slot lasts until ``free_memory``
    or until the caller drops the pool (the cache holds it weakly: a long burst over
    fresh pools must not keep every one of them mapped)."""

    def __init__(self, prepared: ReferencePreparedModel):
        self.prepared = prepared
        self._lock = threading.Lock()
        self._slots: dict[int, weakref.ref[Memory]] = {}  # slot -> memory (driver side)
        self._slot_of: dict[int, int] = {}  # id(memory) -> slot (client side)

    def _cached(self, memory: Memory) -> Memory:
        """The memory in ``memory``'s slot, given a slot first if it has none."""
        with self._lock:
            slot = self._slot_of.get(id(memory))
            if slot is None or self._slots[slot]() is not memory:  # new, or an id reused
                slot = len(self._slots)
                while slot in self._slots:
                    slot += 1
                self._slots[slot] = weakref.ref(memory, self._dropped(slot, id(memory)))
                self._slot_of[id(memory)] = slot
            return memory

    def _dropped(self, slot: int, key: int) -> Callable[[weakref.ref], None]:
        """The weakref callback freeing ``slot`` when its memory is collected (holding
        the burst weakly: a collected burst has nothing left to free)."""
        burst = weakref.ref(self)

        def free(ref: weakref.ref) -> None:
            owner = burst()
            if owner is not None:
                with owner._lock:
                    if owner._slots.get(slot) is ref:
                        del owner._slots[slot]
                        if owner._slot_of.get(key) == slot:
                            del owner._slot_of[key]

        return free

    @property
    def cached_slots(self) -> int:
        return len(self._slots)

    def execute(
        self,
        request: Request,
        measure: int = MeasureTiming.NO,
        deadline: int | None = None,
        loop_timeout: int | None = None,
    ) -> ExecutionResult:
        """One burst execution: pools go through the slot cache, then run."""
        if isinstance(request, Request):
            pools = [self._cached(p) if isinstance(p, Memory) else p for p in request.pools]
            request = replace(request, pools=tuple(pools))
        return self.prepared._run(request, measure, deadline, loop_timeout)

    def free_memory(self, memory: Memory) -> None:
        """``freeMemory``: drop the slot caching ``memory``."""
        with self._lock:
            slot = self._slot_of.pop(id(memory), None)
            if slot is not None:
                self._slots.pop(slot, None)


class CollectingCallback:
    """An :class:`ExecutionCallback` that stores the result and lets you wait for it."""

    def __init__(self):
        self._event = threading.Event()
        self.result: ExecutionResult | None = None

    def notify(self, status: ErrorStatus, output_shapes: list[OutputShape], timing: Timing) -> None:
        self.result = (status, list(output_shapes), timing)
        self._event.set()

    def wait(self, timeout: float | None = None) -> ExecutionResult:
        if not self._event.wait(timeout):
            raise TimeoutError("the execution callback was not notified in time")
        assert self.result is not None
        return self.result
