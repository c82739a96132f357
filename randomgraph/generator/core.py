"""The generator's core: tensors, graphs, the per-operation context rules work with, and
the loop that grows a graph operation by operation.

How one operation is made (:meth:`Generator.try_operation`):

1. the operation's rule (``rules/<family>.py``) picks a signature from the operation's
   declaration (``driver.operations.REGISTRY``; only those the graph's HAL version and the
   data-type filter allow), then asks its :class:`OpGen` for each input: a tensor already
   in the graph that fits (type, rank, dims, quantization, value bounds) or a fresh one
   (a model input or a constant, by copy or by reference), and describes its outputs;
2. the core runs the declaration's own hooks on what the rule built — signature
   matching, ``validate`` (whose HAL version must not exceed the graph's) and
   ``infer_shapes`` (which sizes the outputs) — with the real dims and constant values,
   so the generator never restates what the declaration knows and a rule that gets a
   detail wrong costs a retry, not an invalid graph;
3. element-count and value-bound limits are checked, then the operation is committed.

A rejected attempt (:class:`Reject`, a hook's ``HalError``, an unsolvable dims problem)
is retried a bounded number of times with new choices; an operation that cannot be made
is skipped. Every loop is bounded, so generation never hangs.
"""

from __future__ import annotations

import contextlib
import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from driver.hal.types import (
    HalError,
    HalVersion,
    Operand,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
    is_scalar_type,
)
from driver.operations import REGISTRY
from driver.operations.base import OperationContext, Signature, Unknown, storage_dtype
from driver.validation import match_signature
from randomgraph.choices import ChoiceSource
from randomgraph.criteria import SAMPLING_OPERATIONS
from randomgraph.generator.dims import DimSolver, Unsatisfiable, draw_dims
from randomgraph.generator.values import (
    DEFAULT,
    FLOAT_TENSORS,
    QUANT_TENSORS,
    Domain,
    fresh_values,
    quant_bounds,
    quant_params,
    type_accept_limit,
    type_output_limit,
)

T = OperandType
L = OperandLifeTime
INF = math.inf

SHORT_TYPE_NAMES = {
    T.TENSOR_FLOAT32: "F32",
    T.TENSOR_FLOAT16: "F16",
    T.TENSOR_INT32: "I32",
    T.TENSOR_QUANT8_ASYMM: "Q8A",
    T.TENSOR_QUANT8_ASYMM_SIGNED: "Q8AS",
    T.TENSOR_QUANT8_SYMM: "Q8S",
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL: "Q8PC",
    T.TENSOR_QUANT16_SYMM: "Q16S",
    T.TENSOR_QUANT16_ASYMM: "Q16A",
    T.TENSOR_BOOL8: "B8",
}


class Reject(Exception):
    """A rule cannot make this operation with the choices drawn (retry)."""


class GenerationError(Exception):
    """No graph could be made with these parameters (e.g. a filter nothing satisfies)."""


class Kind(enum.IntEnum):
    INPUT = 0  # model input (main) or subgraph input
    CONST = 1
    TEMP = 2  # an operation's output
    OMITTED = 3
    SUBGRAPH = 4


@dataclass(eq=False, slots=True)
class Tensor:
    """One operand of a generated (sub)graph, with what the generator knows about it."""

    type: int
    dims: tuple[int, ...] | None  # true dims (None: only known at run time)
    kind: Kind = Kind.TEMP
    scale: float = 0.0
    zero_point: int = 0
    channel_quant: SymmPerChannelQuantParams | None = None
    value: np.ndarray | None = None  # constants; example value of main inputs
    by_reference: bool = False
    declared: tuple[int, ...] | None = None  # declared dims when not the true dims
    lo: float = -INF  # real-valued bounds of the values
    hi: float = INF
    chainable: bool = True  # may feed another operation
    exact: bool = True  # bit-identical on every correct driver
    subgraph: Graph | None = None  # SUBGRAPH operands
    consumers: int = 0
    output: bool = False  # a (sub)graph output
    ignored: bool = False  # an output whose value is unspecified (not compared)
    drawn: bool = False  # values drawn at random (a clone may permute them)

    @property
    def declared_dims(self) -> tuple[int, ...]:
        if self.declared is not None:
            return self.declared
        return self.dims or ()

    @property
    def rank(self) -> int:
        return len(self.dims) if self.dims is not None else -1

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims or ():
            n *= d
        return n

    @property
    def quant(self) -> tuple[float, int]:
        return self.scale, self.zero_point

    def spec(self) -> tuple:
        """What control-flow compatibility compares."""
        return (self.type, self.declared_dims, self.scale, self.zero_point, self.channel_quant)


@dataclass(eq=False, slots=True)
class GenOp:
    type: int
    inputs: list[Tensor]
    outputs: list[Tensor]
    dtype_key: str
    rank: int


class Graph:
    """A (sub)graph under construction: committed tensors and operations in order."""

    def __init__(self, *, depth: int = 0, inputs: Sequence[Tensor] = ()):
        self.depth = depth  # 0: main; control-flow nesting below
        self.inputs: list[Tensor] = list(inputs)
        self.outputs: list[Tensor] = []  # fixed by the caller for subgraphs
        self.ops: list[GenOp] = []
        self.main_inputs: list[Tensor] = []  # fresh model inputs (main graph)
        self._by_type: dict[int, list[Tensor]] = {}
        for t in self.inputs:
            self._add_candidate(t)

    @property
    def is_subgraph(self) -> bool:
        return self.depth > 0

    def _add_candidate(self, t: Tensor) -> None:
        if t.chainable and t.dims is not None:
            self._by_type.setdefault(t.type, []).append(t)

    def candidates(self, type_code: int) -> list[Tensor]:
        return self._by_type.get(type_code, [])

    def commit(self, op: GenOp, fresh: Sequence[Tensor]) -> None:
        for t in op.inputs:
            t.consumers += 1
        for t in fresh:
            if t.kind == Kind.INPUT:
                self.main_inputs.append(t)
                self._add_candidate(t)
        for t in op.outputs:
            self._add_candidate(t)
        self.ops.append(op)

    def produced(self) -> list[Tensor]:
        return [t for op in self.ops for t in op.outputs]


def dtype_key(types: Sequence[int]) -> str:
    """The data-type label of a signature or an operation instance: its tensor types,
    distinct, in order of appearance (``F32``, ``Q8A/Q8PC/I32``, ...)."""
    seen: list[str] = []
    for t in types:
        name = SHORT_TYPE_NAMES.get(t)
        if name is not None and name not in seen:
            seen.append(name)
    return "/".join(seen) if seen else "-"


def signature_key(sig: Signature) -> str:
    return dtype_key(sig.inputs + sig.outputs)


# ---------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------

ALL_VERSIONS = (HalVersion.V1_0, HalVersion.V1_1, HalVersion.V1_2, HalVersion.V1_3)
MAX_OPS = 200
"""Most operations per graph a command lets a user ask for: five times the largest preset
('large', 40); generation time grows faster than linearly with it."""
MAX_ELEMENTS = 100_000
"""Most elements per operand (and largest dimension) a command lets a user ask for: ten
times the presets' 10000."""
MAX_GRAPH_ELEMENTS = 2_000_000
"""Most operations x elements per operand: what bounds a graph's memory (~200 MB) and its
spec dump (~30 MB); five times the 'large' preset's 40 x 10000."""

PRIMARY_RANKS = range(1, 6)
"""The ranks rules give their primary input, which ``GeneratorConfig.ranks`` filters: 1..4,
and 5 where the operation takes it (``ranks=(1, 5)`` in the rules). Any other rank in the
filter matches nothing, and only operations without a primary input would be generated."""


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. ``operations``/``data_types``/``ranks``/``versions`` filter
    (``None``: everything); the rest sets sizes and probabilities."""

    num_ops: int = 5
    min_ops: int | None = None  # when set, between min_ops and num_ops operations
    max_dim: int = 1000
    max_elements: int = 10000
    operations: frozenset[int] | None = None
    data_types: frozenset[int] | None = None
    ranks: frozenset[int] | None = None
    versions: tuple[HalVersion, ...] = ALL_VERSIONS
    connect_p: float = 0.7
    unknown_dims_p: float = 0.1
    relaxed_p: float = 0.15
    output_p: float = 0.1  # a consumed tensor is also a model output
    control_flow_depth: int = 2
    subgraph_ops: int = 3
    sweep: bool = True  # seed N's first operation is pair N mod #pairs (generate())
    preset: str = "custom"

    def describe(self) -> dict:
        return {
            "preset": self.preset,
            "num_ops": self.num_ops,
            "max_dim": self.max_dim,
            "max_elements": self.max_elements,
            "operations": None
            if self.operations is None
            else sorted(OperationType(o).name for o in self.operations),
            "data_types": None
            if self.data_types is None
            else sorted(OperandType(t).name for t in self.data_types),
            "ranks": None if self.ranks is None else sorted(self.ranks),
            "versions": [v.name for v in self.versions],
        }


PRESETS: dict[str, GeneratorConfig] = {
    # Android's three sizes (RandomGraphGenerator tests), then a free middle size.
    "single": GeneratorConfig(num_ops=1, max_dim=1000, preset="single"),
    "small": GeneratorConfig(num_ops=5, max_dim=1000, preset="small"),
    "large": GeneratorConfig(num_ops=40, max_dim=10, preset="large"),
    "medium": GeneratorConfig(num_ops=10, max_dim=100, preset="medium"),
}


# ---------------------------------------------------------------------------------------
# The per-operation context
# ---------------------------------------------------------------------------------------

Rule = Callable[["OpGen"], tuple[Sequence[Tensor], Sequence[Tensor]] | None]
"""A rule returns its operation's (inputs, outputs), or None when it committed the
operation itself (control flow, which checks its subgraphs by construction)."""


class OpGen:
    """What a rule works with while it makes one operation. Fresh tensors it creates
    are pending until the operation is committed (a rejected attempt leaves no trace)."""

    def __init__(self, gen: Generator, graph: Graph, op_type: int):
        self.gen = gen
        self.graph = graph
        self.op = op_type
        self.src: ChoiceSource = gen.src
        self.version: HalVersion = gen.version
        self.relaxed: bool = gen.relaxed
        self.config: GeneratorConfig = gen.config
        self.decl = REGISTRY.get(op_type)
        self.fresh_tensors: list[Tensor] = []
        self.primary_rank: int | None = None
        self.primary_type: int | None = None  # data type label of control flow
        self.forced_key: str | None = None  # only signatures with this data type

    # --- signatures ---------------------------------------------------------------
    def signatures(self, pred: Callable[[Signature], bool] | None = None) -> list[Signature]:
        sigs = self.gen.signatures_for(self.op)
        if self.forced_key is not None:
            sigs = [s for s in sigs if signature_key(s) == self.forced_key] or sigs
        if pred is not None:
            sigs = [s for s in sigs if pred(s)]
        return sigs

    def signature(self, pred: Callable[[Signature], bool] | None = None) -> Signature:
        """A signature the graph's version and filters allow, preferring the graph's
        preferred data type (so that operations chain)."""
        sigs = self.signatures(pred)
        if not sigs:
            raise Reject("no signature fits")
        pref = self.gen.preferred_type
        if pref is not None and len(sigs) > 1:
            liked = [s for s in sigs if pref in s.inputs[:1] or pref in s.inputs[1:2]]
            if liked and len(liked) < len(sigs) and self.src.boolean(0.75):
                sigs = liked
        return self.src.choice(sigs)

    # --- sizes --------------------------------------------------------------------
    @property
    def max_dim(self) -> int:
        return self.config.max_dim

    @property
    def max_elements(self) -> int:
        return self.config.max_elements

    def solver(self) -> DimSolver:
        return DimSolver(self.src, self.config.max_dim, self.config.max_elements)

    def rank(self, lo: int, hi: int, *, primary: bool = True) -> int:
        """A rank in [lo, hi]; for the primary input (or output, as FILL's) it is within
        the rank filter and is the rank the coverage table counts."""
        allowed = [r for r in range(lo, hi + 1)]
        if primary and self.config.ranks is not None:
            allowed = [r for r in allowed if r in self.config.ranks]
        if not allowed:
            raise Reject("rank filter")
        chosen = self.src.choice(allowed)
        if primary:
            self.primary_rank = chosen
        return chosen

    def primary(self, rank: int) -> None:
        """Declare the rank coverage counts for a rule without a primary data input
        (fresh structured tensors); the rank filter applies."""
        if self.config.ranks is not None and rank not in self.config.ranks:
            raise Reject("rank filter")
        self.primary_rank = rank

    def dims(self, rank: int, fixed: dict[int, int] | None = None, lo: int = 1) -> tuple[int, ...]:
        try:
            return draw_dims(
                self.src,
                rank,
                max_dim=self.config.max_dim,
                max_elements=self.config.max_elements,
                fixed=fixed,
                lo=lo,
            )
        except Unsatisfiable as e:
            raise Reject(str(e)) from None

    # --- inputs -------------------------------------------------------------------
    def accepts(self, t: Tensor, domain: Domain) -> bool:
        """Whether a producer's values suit an input with ``domain``."""
        if t.type in QUANT_TENSORS or t.type == T.TENSOR_BOOL8:
            return not domain.stable or t.exact
        if domain.stable and not t.exact:
            return False
        limit = type_accept_limit(t.type, self.relaxed)
        lo = max(domain.accept_lo, -limit)
        hi = min(domain.accept_hi, limit)
        if not (lo <= t.lo and t.hi <= hi):
            return False
        return not (domain.nonzero and t.lo <= 0.0 <= t.hi)

    def data(
        self,
        type_code: int,
        *,
        rank: int | None = None,
        ranks: tuple[int, int] | None = None,
        dims: Sequence[int | None] | None = None,
        accept: Callable[[Tensor], bool] | None = None,
        domain: Domain = DEFAULT,
        quant: tuple[float, int] | None = None,
        const: bool | None = None,
        connect: bool = True,
        primary: bool = False,
        min_dim: int = 1,
        make: Callable[[], Sequence[int]] | None = None,
    ) -> Tensor:
        """A data input: an existing tensor that fits or a fresh one.

        ``rank``/``ranks`` bound its rank (``ranks`` is an inclusive range); ``dims`` is a
        pattern (``None`` = free) of the required rank; ``accept`` filters candidates
        further; ``quant`` pins the quantization; ``const`` True/False forces a constant /
        a non-constant; ``primary`` marks the input whose rank the rank filter and the
        coverage table count; ``make`` draws the dims of a fresh tensor when the plain
        pattern cannot express the rule (it must satisfy ``accept``)."""
        if dims is not None:
            rank = len(dims)
        lo_r, hi_r = (rank, rank) if rank is not None else (ranks or (1, 4))
        rank_filter = self.config.ranks if primary else None
        if (
            connect
            and const is not True
            and self.config.connect_p > 0
            and self.src.boolean(self.config.connect_p)
        ):
            found = []
            for t in self.graph.candidates(type_code):
                r = len(t.dims)
                if not lo_r <= r <= hi_r:
                    continue
                if rank_filter is not None and r not in rank_filter:
                    continue
                if dims is not None and any(d is not None and d != a for d, a in zip(dims, t.dims)):
                    continue
                if min(t.dims, default=1) < min_dim:
                    continue
                if t.elements == 0:
                    continue
                if quant is not None and (t.scale, t.zero_point) != (
                    float(np.float32(quant[0])),
                    quant[1],
                ):
                    continue
                if not self.accepts(t, domain):
                    continue
                if accept is not None and not accept(t):
                    continue
                found.append(t)
            if found:
                t = self.src.choice(found)
                if primary:
                    self.primary_rank = len(t.dims)
                return t
        if make is not None:
            shape = tuple(make())
            if primary and self.config.ranks is not None and len(shape) not in self.config.ranks:
                raise Reject("rank filter")
        elif dims is None:
            r = self.rank(lo_r, hi_r, primary=primary) if primary else self.src.integer(lo_r, hi_r)
            shape = self.dims(r, lo=min_dim)
        else:
            fixed = {k: d for k, d in enumerate(dims) if d is not None}
            if primary and self.config.ranks is not None and len(dims) not in self.config.ranks:
                raise Reject("rank filter")
            shape = self.dims(len(dims), fixed, lo=min_dim)
        if primary:
            self.primary_rank = len(shape)
        return self.fresh(type_code, shape, domain=domain, quant=quant, const=const)

    def fresh(
        self,
        type_code: int,
        dims: Sequence[int],
        *,
        domain: Domain = DEFAULT,
        quant: tuple[float, int] | None = None,
        const: bool | None = None,
        values: np.ndarray | Sequence | None = None,
        channel_quant: SymmPerChannelQuantParams | None = None,
    ) -> Tensor:
        """A new tensor: a model input or a constant (by copy or by reference)."""
        dims = tuple(int(d) for d in dims)
        n = 1
        for d in dims:
            n *= d
        if n > self.config.max_elements:
            raise Reject(f"tensor {list(dims)} is over the element bound")
        if type_code == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
            quant = (0.0, 0)
            if channel_quant is None:
                axis = self.src.integer(0, len(dims) - 1) if dims else 0
                channel_quant = self.channel_quant(dims, axis)
        if quant is None:
            quant = quant_params(self.src, type_code)
        scale, zp = float(np.float32(quant[0])), int(quant[1])
        if values is None:
            arr, lo, hi = fresh_values(self.src, type_code, dims, domain, scale, zp)
        else:
            arr = np.asarray(values, dtype=storage_dtype(type_code)).reshape(dims)
            lo, hi = _array_bounds(arr, type_code, scale, zp)
        if const is None:
            # Subgraph inputs are fixed by the control-flow operation: new tensors there
            # are constants.
            const = self.graph.is_subgraph or self.src.boolean(0.5)
        elif not const and self.graph.is_subgraph:
            const = True
        kind = Kind.CONST if const else Kind.INPUT
        t = Tensor(
            type_code,
            dims,
            kind,
            scale,
            zp,
            channel_quant,
            arr,
            by_reference=bool(const and self.src.boolean(0.3)),
            lo=lo,
            hi=hi,
            drawn=values is None,
        )
        self.fresh_tensors.append(t)
        return t

    def const(
        self,
        type_code: int,
        dims: Sequence[int],
        values,
        *,
        quant: tuple[float, int] = (0.0, 0),
        channel_quant: SymmPerChannelQuantParams | None = None,
    ) -> Tensor:
        """A constant parameter tensor with the given values."""
        return self.fresh(
            type_code, dims, values=values, quant=quant, const=True, channel_quant=channel_quant
        )

    def scalar(self, type_code: int, value) -> Tensor:
        arr = np.asarray(value, dtype=storage_dtype(type_code))
        f = float(arr) if type_code != T.BOOL else float(bool(arr))
        t = Tensor(type_code, (), Kind.CONST, value=arr, lo=f, hi=f)
        self.fresh_tensors.append(t)
        return t

    def subgraph(self, graph: Graph) -> Tensor:
        """A SUBGRAPH operand naming ``graph`` (IF branches, WHILE condition and body)."""
        t = Tensor(T.SUBGRAPH, (), Kind.SUBGRAPH, subgraph=graph, chainable=False)
        self.fresh_tensors.append(t)
        return t

    def omitted(self, type_code: int, *, quant: tuple[float, int] | None = None) -> Tensor:
        """An omitted optional input (lifetime NO_VALUE). Quantized types still carry
        valid quantization parameters, as validation wants."""
        if quant is None:
            quant = (1.0, 0) if type_code in QUANT_TENSORS else (0.0, 0)
            if type_code == T.TENSOR_QUANT8_ASYMM or type_code == T.TENSOR_QUANT16_ASYMM:
                quant = (1.0, 0)
        dims = () if is_scalar_type(type_code) else (1,)
        t = Tensor(type_code, dims, Kind.OMITTED, float(np.float32(quant[0])), quant[1])
        t.chainable = False
        self.fresh_tensors.append(t)
        return t

    # --- outputs ------------------------------------------------------------------
    def output(
        self,
        type_code: int,
        *,
        dims: Sequence[int] | None = None,
        quant: tuple[float, int] | None = None,
        lo: float = -INF,
        hi: float = INF,
        chainable: bool = True,
        exact: bool = False,
        unknown_shape: Sequence[int] | None = None,
        channel_quant: SymmPerChannelQuantParams | None = None,
    ) -> Tensor:
        """An output. ``dims`` default to what the declaration infers; ``unknown_shape``
        (declared dims with 0s) marks an output only the kernel can size. ``exact``:
        bit-exact whenever the operation's data inputs are (data movement, integer
        arithmetic)."""
        if quant is None:
            quant = quant_params(self.src, type_code)
        scale, zp = float(np.float32(quant[0])), int(quant[1])
        if type_code in QUANT_TENSORS:
            lo, hi = quant_bounds(type_code, scale, zp)
        elif type_code in (T.TENSOR_BOOL8, T.BOOL):
            lo, hi = 0.0, 1.0
        t = Tensor(
            type_code,
            None if dims is None else tuple(int(d) for d in dims),
            Kind.TEMP,
            scale,
            zp,
            channel_quant,
            lo=lo,
            hi=hi,
            chainable=chainable,
            exact=exact,
        )
        if unknown_shape is not None:
            t.declared = tuple(unknown_shape)
            t.chainable = False
            t.dims = None
            t.exact = False
        return t

    # --- helpers ------------------------------------------------------------------
    def channel_quant(
        self, dims: Sequence[int], axis: int, base: float | None = None
    ) -> SymmPerChannelQuantParams:
        """Per-channel scales along ``axis`` (around ``base`` when given)."""
        scales = []
        for _ in range(dims[axis]):
            if base is None:
                scales.append(float(np.float32(self.src.real(0.01, 0.5))))
            else:
                scales.append(float(np.float32(base * self.src.real(0.5, 2.0))))
        return SymmPerChannelQuantParams(axis, tuple(scales))

    def qparams(self, type_code: int) -> tuple[float, int]:
        return quant_params(self.src, type_code)

    def activation(self) -> int:
        return self.src.integer(0, 3)

    @staticmethod
    def activation_bounds(act: int, lo: float, hi: float) -> tuple[float, float]:
        if act == 1:
            return max(lo, 0.0), max(hi, 0.0)
        if act == 2:
            return min(max(lo, -1.0), 1.0), max(min(hi, 1.0), -1.0)
        if act == 3:
            return min(max(lo, 0.0), 6.0), max(min(hi, 6.0), 0.0)
        return lo, hi

    @staticmethod
    def bounds(*ts: Tensor) -> tuple[float, float]:
        return min(t.lo for t in ts), max(t.hi for t in ts)

    @staticmethod
    def magnitude(t: Tensor) -> float:
        return max(abs(t.lo), abs(t.hi))

    @staticmethod
    def all_exact(*ts: Tensor) -> bool:
        return all(t.exact for t in ts)


def _array_bounds(arr: np.ndarray, type_code: int, scale: float, zp: int) -> tuple[float, float]:
    if arr.size == 0:
        return 0.0, 0.0
    if type_code in QUANT_TENSORS:
        a = arr.astype(np.float64)
        return (float(a.min()) - zp) * scale, (float(a.max()) - zp) * scale
    a = arr.astype(np.float64)
    return float(a.min()), float(a.max())


# ---------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------

MAX_ATTEMPTS_PER_OP = 6

_CACHE: dict[tuple, list] = {}
"""Per-filter tables (signatures per version, allowed operations, pairs): they depend
only on the registry and the configuration's filters, so every graph shares them."""


class Generator:
    """Grows graphs from a choice source under a configuration."""

    def __init__(self, config: GeneratorConfig, src: ChoiceSource):
        from randomgraph.generator.rules import RULES

        self.config = config
        self.src = src
        self.rules = RULES
        self.version = HalVersion.V1_3
        self.relaxed = False
        self.preferred_type: int | None = None
        self._sig_cache: dict[int, list[Signature]] = {}

    # --- what is allowed ----------------------------------------------------------
    def signatures_for(self, op: int) -> list[Signature]:
        sigs = self._sig_cache.get(op)
        if sigs is None:
            key = ("sigs", op, self.version, self.config.data_types)
            sigs = _CACHE.get(key)
        if sigs is None:
            decl = REGISTRY.get(op)
            sigs = [s for s in (decl.signatures if decl else ()) if s.version <= self.version]
            if self.config.data_types is not None:
                dt = self.config.data_types
                sigs = [s for s in sigs if any(t in dt for t in s.inputs + s.outputs)]
            _CACHE[("sigs", op, self.version, self.config.data_types)] = sigs
        self._sig_cache[op] = sigs
        return sigs

    def operation_allowed(self, op: int, version: HalVersion) -> bool:
        if op not in self.rules:
            return False
        if self.config.operations is not None and op not in self.config.operations:
            return False
        decl = REGISTRY.get(op)
        if decl is None:
            return False
        if decl.custom_signature_check:  # IF/WHILE
            return version >= HalVersion.V1_3
        return any(
            s.version <= version
            and (
                self.config.data_types is None
                or any(t in self.config.data_types for t in s.inputs + s.outputs)
            )
            for s in decl.signatures
        )

    def allowed_operations(self, version: HalVersion) -> list[int]:
        key = ("ops", version, self._filter_key())
        ops = _CACHE.get(key)
        if ops is None:
            ops = _CACHE[key] = sorted(
                op for op in self.rules if self.operation_allowed(op, version)
            )
        return ops

    def subgraph_operations(self, depth: int) -> list[int]:
        """Operations a control-flow subgraph at ``depth`` may use: every operation with
        a rule (the operation filter applies to the main graph), control flow only while
        the nesting bound allows; no sampling operation (its samples are compared as
        frequencies only when a main-graph operation writes them)."""
        ops = []
        for op in sorted(self.rules):
            decl = REGISTRY.get(op)
            if decl is None or op in SAMPLING_OPERATIONS:
                continue
            if decl.custom_signature_check:
                if depth < self.config.control_flow_depth:
                    ops.append(op)
            elif self.signatures_for(op):
                ops.append(op)
        return ops

    # --- generation ---------------------------------------------------------------
    def _filter_key(self) -> tuple:
        c = self.config
        return (c.operations, c.data_types, c.versions, c.control_flow_depth)

    def operation_pairs(self) -> list[tuple[int, str | None, HalVersion]]:
        """Every (operation, data type) the filters allow, with the lowest HAL version
        that has it (IF/WHILE: one entry, data type None), in operation-code order."""
        key = ("pairs", self._filter_key())
        cached = _CACHE.get(key)
        if cached is None:
            cached = _CACHE[key] = self._operation_pairs()
        return cached

    def _operation_pairs(self) -> list[tuple[int, str | None, HalVersion]]:
        pairs: dict[tuple[int, str | None], HalVersion] = {}
        for op in sorted(self.rules):
            decl = REGISTRY.get(op)
            if decl is None or (
                self.config.operations is not None and op not in self.config.operations
            ):
                continue
            if decl.custom_signature_check:
                if any(v >= HalVersion.V1_3 for v in self.config.versions):
                    pairs[(op, None)] = HalVersion.V1_3
                continue
            for s in decl.signatures:
                if not any(v >= s.version for v in self.config.versions):
                    continue
                dt = self.config.data_types
                if dt is not None and not any(t in dt for t in s.inputs + s.outputs):
                    continue
                key = (op, signature_key(s))
                pairs[key] = min(pairs.get(key, s.version), s.version)
        return [(op, k, v) for (op, k), v in pairs.items()]

    def setup(self) -> tuple[list[int], tuple[int, str | None] | None]:
        """Choose (with ``sweep``) the first operation and its data type as one choice,
        so that a sweep over seeds spreads evenly over every (operation, data type)
        pair; then a HAL version (that has it), the relaxed flag and a preferred type.
        Returns the operations the main graph may use and the first (operation, data
        type) or None."""
        pairs = self.operation_pairs()
        if not pairs:
            raise GenerationError("no operation fits the filters")
        first: tuple[int, str | None] | None = None
        if self.config.sweep:
            first_op, first_key, first_version = self.src.choice(pairs)
            first = (first_op, first_key)
            versions = [
                v
                for v in self.config.versions
                if v >= first_version and self.operation_allowed(first_op, v)
            ]
        else:
            versions = [v for v in self.config.versions if self.allowed_operations(v)]
        # Newest first: the simplest choice (0) then allows every operation.
        versions.sort(reverse=True)
        self.version = self.src.choice(versions)
        self._sig_cache.clear()
        ops = self.allowed_operations(self.version)
        self.relaxed = self.version >= HalVersion.V1_1 and self.src.boolean(self.config.relaxed_p)
        key = ("types", self.version, self._filter_key())
        types = _CACHE.get(key)
        if types is None:
            types = _CACHE[key] = sorted(
                {
                    s.inputs[0]
                    for op in ops
                    for s in self.signatures_for(op)
                    if s.inputs and not is_scalar_type(s.inputs[0])
                }
            )
        self.preferred_type = None
        if types and self.src.boolean(0.7):
            self.preferred_type = self.src.choice(types)
        return ops, first

    def grow(
        self,
        graph: Graph,
        ops: Sequence[int],
        count: int,
        first: tuple[int, str | None] | None = None,
    ) -> None:
        """Add up to ``count`` operations (each drawn from ``ops``; the first one
        ``first`` when given) to ``graph``."""
        budget = count * 4 + 4
        made = 0
        if self.config.min_ops is not None and graph.depth == 0:
            # A variable count: each operation is one unit of choices ("another one?",
            # then the operation), so deleting a unit deletes an operation and the
            # following units keep their meaning (what makes Hypothesis shrink well).
            minimum = self.config.min_ops

            def unit(made: int) -> bool | None:
                more = self.src.boolean(0.75)
                if made >= minimum and not more:
                    return None
                return self.try_operation(graph, self.src.choice(ops))

            while made < count and budget > 0:
                result = self.src.span(lambda m=made: unit(m))
                if result is None:
                    return
                budget -= 1
                made += bool(result)
            return
        if first is not None and count > 0:
            budget -= 1
            if self.try_operation(graph, first[0], first[1]):
                made += 1
        while made < count and budget > 0:
            budget -= 1
            op = self.src.choice(ops)
            if self.try_operation(graph, op):
                made += 1

    def try_operation(self, graph: Graph, op: int, key: str | None = None) -> bool:
        rule = self.rules[op]
        for _ in range(MAX_ATTEMPTS_PER_OP):
            g = OpGen(self, graph, op)
            g.forced_key = key
            try:
                made = rule(g)
                if made is not None:  # None: the rule committed itself (control flow)
                    ins, outs = made
                    self.commit(g, list(ins), list(outs))
                return True
            except (Reject, Unknown, Unsatisfiable):
                continue
            except HalError:
                continue
        return False

    # --- checking and committing ----------------------------------------------------
    def check(self, g: OpGen, ins: list[Tensor], outs: list[Tensor]) -> HalVersion:
        """Run the declaration's hooks on the operation; fills in output dims."""
        decl = g.decl
        in_ops = [_gate_operand(t) for t in ins]
        out_ops = [_gate_operand(t) for t in outs]
        where = f"generated {OperationType(g.op).name}"
        need = HalVersion.V1_0
        if not decl.custom_signature_check:
            need = match_signature(decl, in_ops, out_ops, where)
        shapes = [None if t.kind == Kind.OMITTED else t.dims for t in ins]
        values = [
            t.value if t.kind in (Kind.CONST, Kind.INPUT) and t.value is not None else None
            for t in ins
        ]
        ctx = OperationContext(
            g.op,
            in_ops,
            out_ops,
            shapes,
            values,
            version=self.version,
            relaxed=self.relaxed,
            location=where,
        )
        with contextlib.suppress(Unknown):
            decl.run_validate(ctx)
        if ctx.required_version is not None and ctx.required_version > need:
            need = ctx.required_version
        if need > self.version:
            raise Reject(f"needs HAL {need.label}")
        inferred = list(decl.infer_shapes(ctx))
        for k, t in enumerate(outs):
            s = inferred[k] if k < len(inferred) else None
            if t.declared is not None and t.dims is None:
                continue  # data-dependent: the rule declared what it knows
            if s is None:
                if t.dims is None:
                    raise Reject(f"output {k} cannot be sized")
                continue
            s = tuple(int(d) for d in s)
            if t.dims is not None and t.dims != s:
                raise Reject(f"output {k}: rule says {t.dims}, declaration infers {s}")
            t.dims = s
        return need

    def commit(self, g: OpGen, ins: list[Tensor], outs: list[Tensor]) -> None:
        self.check(g, ins, outs)
        self.finish(g, ins, outs)

    def finish(self, g: OpGen, ins: list[Tensor], outs: list[Tensor]) -> None:
        """Limits, declared dims, then the operation joins the graph."""
        limit = self.config.max_elements
        for t in outs:
            if t.dims is not None:
                n = 1
                for d in t.dims:
                    n *= d
                if n > limit or n == 0:
                    raise Reject(f"output {list(t.dims)} is outside the element bound")
            if t.type in FLOAT_TENSORS or t.type == T.TENSOR_INT32:
                out_limit = type_output_limit(t.type, self.relaxed)
                if max(abs(t.lo), abs(t.hi)) > out_limit:
                    if math.isinf(t.lo) or math.isinf(t.hi):
                        t.chainable = False  # unknown bounds: a model output only
                    else:
                        raise Reject("output values could overflow")
        for t in outs:
            # A BOOL8 [1] may become an IF/WHILE condition, which must be declared [1].
            if (
                t.declared is None
                and t.dims
                and not (t.type == T.TENSOR_BOOL8 and t.dims == (1,))
                and self.version >= HalVersion.V1_2
                and self.config.unknown_dims_p > 0
                and self.src.boolean(self.config.unknown_dims_p)
            ):
                t.declared = self._unknown_dims(t.dims)
        graph = g.graph
        rank = g.primary_rank
        if rank is None:
            rank = next((len(t.dims) for t in ins if t.dims and t.kind != Kind.OMITTED), 0)
        if g.primary_type is not None:
            key = dtype_key([g.primary_type])
        else:
            key = dtype_key([t.type for t in ins + outs if not is_scalar_type(t.type)])
        op = GenOp(g.op, ins, outs, key, rank)
        graph.commit(op, g.fresh_tensors)

    def _unknown_dims(self, dims: tuple[int, ...]) -> tuple[int, ...]:
        if self.src.boolean(0.2):
            return ()  # unknown rank
        if self.src.boolean(0.5):
            return (0,) * len(dims)
        return tuple(0 if self.src.boolean(0.5) else d for d in dims)


def _gate_operand(t: Tensor) -> Operand:
    """The operand the hooks see while generating: the true dims, constants as
    constants, model inputs as temporaries (their values are passed along)."""
    if t.kind == Kind.CONST:
        lifetime = L.CONSTANT_COPY
    elif t.kind == Kind.OMITTED:
        lifetime = L.NO_VALUE
    elif t.kind == Kind.SUBGRAPH:
        lifetime = L.SUBGRAPH
    else:
        lifetime = L.TEMPORARY_VARIABLE
    dims = t.dims if t.dims is not None else t.declared_dims
    return Operand(
        type=t.type,
        dimensions=() if is_scalar_type(t.type) else tuple(dims),
        scale=t.scale,
        zero_point=t.zero_point,
        lifetime=lifetime,
        extra_params=t.channel_quant,
    )


__all__ = [
    "ALL_VERSIONS",
    "PRESETS",
    "GenOp",
    "GenerationError",
    "Generator",
    "GeneratorConfig",
    "Graph",
    "Kind",
    "OpGen",
    "Reject",
    "Rule",
    "Tensor",
    "dtype_key",
    "signature_key",
]
