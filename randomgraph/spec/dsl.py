"""The names a ``.mod.py`` spec file sees: Android's test-generator DSL.

This mirrors Android 11's ``frameworks/ml/nn/tools/test_generator/test_generator.py``
closely enough that expansion gives the same test models (names, operands, operations,
values): the same operand naming (globally unique within a spec run, ``param``,
``param1``, ...), the same topological sort, the same variation semantics and the same
converters. Behaviour that differs on purpose is commented.

State that Android keeps in class attributes (models, examples, used names) lives in a
:class:`SpecContext`, one per loaded file, so loads do not leak into each other.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import sys
from typing import Any

import numpy as np

from driver.hal.types import ELEMENT_SIZE, OperandType
from driver.validation import MAX_OPERAND_BYTES, UINT32_MAX

# ---------------------------------------------------------------------------------------
# Per-load state
# ---------------------------------------------------------------------------------------


class SpecError(Exception):
    """A problem in a spec file, with the file and line it comes from."""

    def __init__(self, message: str, path: str = "", line: int | None = None):
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(where + message)
        self.path = path
        self.line = line
        self.message = message


class SkipVariation(Exception):
    """Raised by a converter that cannot apply; that combination is silently skipped."""


class SpecContext:
    def __init__(self, path: str = "", spec_name: str = "", version: str = "V1_3"):
        self.path = path
        self.spec_name = spec_name
        self.version = version
        self.models: list[Model] = []
        self.examples: list[Example] = []
        self.version_overrides: dict[str, str] = {}
        self.variable_names = UniqueNames()
        self.test_names = UniqueNames(sep="_", start=1)
        self.type_cache: dict[tuple, Type] = {}

    def caller_line(self) -> int | None:
        """The line of the spec file currently executing (for error messages). Walks raw
        frames: ``inspect.stack()`` reads source files and is far too slow per operand."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.path:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def error(self, message: str, line: int | None = None) -> SpecError:
        return SpecError(message, self.path, line if line is not None else self.caller_line())


_CTX: SpecContext | None = None


def ctx() -> SpecContext:
    if _CTX is None:
        raise RuntimeError("spec DSL used outside a spec load")
    return _CTX


def set_context(c: SpecContext | None) -> None:
    global _CTX
    _CTX = c


class UniqueNames:
    """Android's NamedObject renaming: ``name``, then ``name{sep}{start + 1}``, ... — the
    first of those not taken yet. Names are never given back, so the search for a base
    resumes at the suffix it last stopped at: naming n objects alike stays linear
    (Android rescans from the start every time)."""

    def __init__(self, sep: str = "", start: int = 0):
        self.sep = sep
        self.start = start
        self.taken: set[str] = set()
        self._last_suffix: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.taken

    def add(self, base: str) -> str:
        name, n = base, self._last_suffix.get(base)
        if n is None:
            n = self.start
        else:  # the base and its suffixes up to n are taken
            n += 1
            name = f"{base}{self.sep}{n}"
        while name in self.taken:
            n += 1
            name = f"{base}{self.sep}{n}"
        self._last_suffix[base] = n
        self.taken.add(name)
        return name


def joined(*parts) -> str:
    return "_".join(str(p) for p in parts if p is not None and p != "")


def short(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for a one-line message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------

FLOAT_TYPES = {"FLOAT32", "FLOAT16", "TENSOR_FLOAT32", "TENSOR_FLOAT16"}
BOOL_TYPES = {"BOOL", "TENSOR_BOOL8"}


def is_real(v) -> bool:
    """A real number a spec may write (bool, int, float or a numpy scalar of those)."""
    return isinstance(v, (int, float, np.integer, np.floating, np.bool_))


class SymmPerChannelQuantParams:
    def __init__(self, channelDim, scales, hide=False):
        if not isinstance(channelDim, (int, np.integer)) or isinstance(channelDim, bool):
            raise ctx().error(
                f"SymmPerChannelQuantParams: channelDim must be an integer, got {channelDim!r}"
            )
        if isinstance(scales, np.ndarray):
            scales = scales.reshape(-1).tolist()
        if not isinstance(scales, (list, tuple)) or not all(
            is_real(x) and math.isfinite(x) and x > 0 for x in scales
        ):
            raise ctx().error(
                f"SymmPerChannelQuantParams: scales must be a list of positive numbers, "
                f"got {short(scales)}"
            )
        self.channelDim = int(channelDim)
        self.scales = list(scales)
        self.hide = hide

    def GetScalesBroadcastArray(self, dims):
        bshape = [1] * len(dims)
        bshape[self.channelDim] = len(self.scales)
        return np.array(self.scales).reshape(bshape)

    def __eq__(self, other):
        return isinstance(other, SymmPerChannelQuantParams) and (
            self.channelDim,
            self.scales,
            self.hide,
        ) == (other.channelDim, other.scales, other.hide)

    def __hash__(self):
        return hash((self.channelDim, tuple(self.scales), self.hide))


class Type:
    def __init__(self, vt, shape, scale=None, zp=None, extraParams=None):
        self.type = vt
        self.dimensions = list(shape)
        self.scale = float(scale) if scale is not None else 0.0
        self.zeroPoint = int(zp) if zp is not None else 0
        self.extraParams = extraParams

    @staticmethod
    def GetType(vt, shape, scale=None, zp=None, extraParams=None):
        if not isinstance(shape, (list, tuple)):
            raise ctx().error(f"shape must be a list: {shape!r}")
        key = (vt, tuple(shape), scale, zp, extraParams)
        cache = ctx().type_cache
        if key not in cache:
            cache[key] = Type(vt, shape, scale, zp, extraParams)
        return cache[key]

    @staticmethod
    def GetParsedShape(shape: str):
        """``"{2, 3}, 0.5f, 127"`` → ([2, 3], "0.5", "127")."""
        if shape != "" and shape != "{}":
            _left, _, right = shape.partition("{")
            real_shape, _, right = right.partition("}")
            dims = [int(x) for x in real_shape.split(",") if x.strip()]
            scale, _, zero_point = right.rpartition(",")
            if scale == "":
                if zero_point == "":
                    return dims, "0", "0"
                # One number is the scale, which may end in 'f' too (Android's float()
                # of " 0.5f" refused it).
                return dims, zero_point.replace("f", "").strip(), "0"
            _left, _, scale = scale.partition(",")
            return dims, scale.replace("f", "").strip(), zero_point.strip()
        return [], "0", "0"

    @staticmethod
    def GetTypeFromString(vt, shape, extraParams=None):
        dims, scale, zp = Type.GetParsedShape(shape)
        return Type.GetType(vt, dims, float(scale), int(zp), extraParams)

    def GetNumberOfElements(self) -> int:
        return functools.reduce(lambda x, y: x * y, self.dimensions, 1)

    def IsFloat(self) -> bool:
        return self.type in FLOAT_TYPES

    def IsBool(self) -> bool:
        return self.type in BOOL_TYPES

    def IsScalar(self) -> bool:
        return not self.type.startswith("TENSOR_")

    def GetSignatureTuple(self):
        return (self.type, self.dimensions, self.scale, self.zeroPoint)


def Dequantize(v: np.ndarray, ty: Type) -> np.ndarray:
    v = v - ty.zeroPoint
    if ty.scale != 0:
        v = v * ty.scale
    if isinstance(ty.extraParams, SymmPerChannelQuantParams):
        v = v * ty.extraParams.GetScalesBroadcastArray(ty.dimensions)
    return v


_CLAMP = {
    "TENSOR_QUANT8_ASYMM": (0, 255),
    "TENSOR_QUANT8_ASYMM_SIGNED": (-128, 127),
    "TENSOR_QUANT8_SYMM": (-128, 127),
    "TENSOR_QUANT8_SYMM_PER_CHANNEL": (-128, 127),
    "TENSOR_QUANT16_ASYMM": (0, 65535),
    "TENSOR_QUANT16_SYMM": (-32768, 32767),
    "UINT32": (0, None),
}


def Quantize(v: np.ndarray, ty: Type) -> np.ndarray:
    """Android's converter quantization: numpy rounding (half to even), then clamping."""
    # Same dtypes as Android's in-place numpy arithmetic (float32 stays float32).
    v = np.array(v)
    if not np.issubdtype(v.dtype, np.floating):
        v = v.astype(np.float64)
    if ty.scale != 0:
        v = v / ty.scale
    if isinstance(ty.extraParams, SymmPerChannelQuantParams):
        v = v / ty.extraParams.GetScalesBroadcastArray(ty.dimensions)
    v = v + ty.zeroPoint
    if not ty.IsFloat():
        v = np.round(v)
        lo, hi = _CLAMP.get(ty.type, (None, None))
        if lo is not None:
            v = np.maximum(v, lo)
        if hi is not None:
            v = np.minimum(v, hi)
        v = v.astype(np.int64)
        if ty.IsBool():
            v = v != 0
    return v


# ---------------------------------------------------------------------------------------
# Operands
# ---------------------------------------------------------------------------------------


def _check_type(op: Operand) -> None:
    """Refuse, at the operand's declaration, a type the test model could not hold: an
    unknown type name, dims outside uint32, more bytes than an operand may have, or
    per-channel parameters that do not fit the dims."""
    t = op.type
    where = f"operand {op.name}"
    if not isinstance(t.type, str) or t.type not in OperandType.__members__:
        raise ctx().error(f"{where}: unknown type {short(t.type)}")
    dims = t.dimensions
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ctx().error(f"{where}: dimension {short(d)} of {short(dims)} is not an integer")
        if not 0 <= d <= UINT32_MAX:
            raise ctx().error(
                f"{where}: dimension {d} of {short(dims)} is out of range [0, {UINT32_MAX}]"
            )
    if not t.IsScalar():
        size = ELEMENT_SIZE[OperandType[t.type]]
        for d in dims:
            size *= int(d) or 1  # unknown (0) dims take no space yet
        if size > MAX_OPERAND_BYTES:
            raise ctx().error(
                f"{where}: {t.type} {short(dims)} is {size} bytes; an operand may have at "
                f"most {MAX_OPERAND_BYTES}"
            )
    ep = t.extraParams
    if isinstance(ep, SymmPerChannelQuantParams):
        if not 0 <= ep.channelDim < len(dims):
            raise ctx().error(
                f"{where}: channelDim {ep.channelDim} is not an axis of {t.type} {short(dims)}"
            )
        size = dims[ep.channelDim]
        if size and len(ep.scales) != size:
            raise ctx().error(
                f"{where}: {len(ep.scales)} per-channel scales for dimension {ep.channelDim} "
                f"of size {size}"
            )


class Operand:
    def __init__(self, name, opType, value, backward=None, skipRenaming=False, extraParams=None):
        c = ctx()
        if not isinstance(name, str):
            raise c.error(
                f"{type(self).__name__}: the operand name must be a string, got {short(name)}"
            )
        if extraParams is not None and not isinstance(extraParams, SymmPerChannelQuantParams):
            raise c.error(
                f"operand {name}: extraParams must be a SymmPerChannelQuantParams, "
                f"got {short(extraParams)}"
            )
        self.name = name if skipRenaming else c.variable_names.add(name)
        self.line = c.caller_line()
        try:
            if isinstance(opType, str):
                self.type = Type.GetTypeFromString(opType, value, extraParams)
                value = backward
            else:
                opType = tuple(opType)
                self.type = Type.GetType(*opType, extraParams=extraParams)
        except (TypeError, ValueError, AttributeError) as e:
            shape = f", {short(value)}" if isinstance(opType, str) else ""
            raise c.error(f"operand {self.name}: bad type {short(opType)}{shape}: {e}") from None
        _check_type(self)
        self.SetValue(value)
        self.lifetime = "TEMPORARY_VARIABLE"
        self.ins: list = []
        self.outs: list = []
        self.mayBeInternal = True

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"

    # Operands are identified by their (unique) names, as in Android: variations identify
    # operands of the spec's model and must find them again in deep copies of it.
    def __eq__(self, other):
        return isinstance(other, Operand) and self.name == other.name

    def __hash__(self):
        return hash(self.name)

    def __lt__(self, other):
        return self.name < other.name

    def SetValue(self, value):
        if value is None or isinstance(value, (list, tuple)):
            self.value = None if value is None else list(value)
        elif isinstance(value, np.ndarray):
            # Count before flattening: a broadcast view may stand for gigabytes.
            self._check_value_count(value.size)
            self.value = value.reshape(-1).tolist()
        else:
            self.value = [value]
        return self

    def _check_value_count(self, count: int) -> None:
        expected = 1 if self.type.IsScalar() else self.type.GetNumberOfElements()
        if count > max(expected, 1):
            raise ctx().error(
                f"operand {self.name} ({self.type.type} {self.type.dimensions}) needs "
                f"{expected} values, got {count}"
            )

    def SetValueFromNumpy(self, value):
        self.value = np.asarray(value).flatten().tolist()
        return self

    def GetValueAsNumpy(self):
        if self.type.IsFloat():
            dt = np.float32 if "16" not in self.type.type else np.float16
        elif self.type.IsBool():
            dt = bool
        else:
            dt = np.int64
        return np.array(self.value, dtype=dt).reshape(self.type.dimensions)

    def ConvertTo(self, DerivedClass, name=None):
        name = self.name if name is None else name
        if DerivedClass is Output and isinstance(self, IgnoredOutput):
            DerivedClass = IgnoredOutput  # still not compared
        newop = DerivedClass(
            name,
            self.type.GetSignatureTuple(),
            skipRenaming=True,
            extraParams=self.type.extraParams,
        )
        if not issubclass(DerivedClass, Internal):
            newop.SetValue(self.value)
        newop.mayBeInternal = self.mayBeInternal
        newop.line = self.line
        return newop

    def ShouldNeverBeInternal(self):
        self.mayBeInternal = False
        return self


class InOut(Operand):
    def __init__(self, name, opType, backward=None, skipRenaming=False, extraParams=None):
        Operand.__init__(
            self, name, opType, backward, None, skipRenaming=skipRenaming, extraParams=extraParams
        )
        self.lifetime = "SUBGRAPH_INPUT"
        self.index = 0

    def Feed(self, value):
        self.SetValue(value[self] if isinstance(value, dict) else value)
        return self


class Input(InOut):
    def __init__(self, name, opType, backward=None, skipRenaming=False, extraParams=None):
        InOut.__init__(
            self, name, opType, backward, skipRenaming=skipRenaming, extraParams=extraParams
        )
        self.lifetime = "SUBGRAPH_INPUT"


class Output(InOut):
    def __init__(self, name, opType, backward=None, skipRenaming=False, extraParams=None):
        InOut.__init__(
            self, name, opType, backward, skipRenaming=skipRenaming, extraParams=extraParams
        )
        self.lifetime = "SUBGRAPH_OUTPUT"


class IgnoredOutput(Output):
    def Feed(self, value):
        # Android stores zeros; nothing compares them, so none are made (the operand may
        # be hundreds of megabytes). The test model's data stays empty.
        self.value = None
        return self


class Parameter(Operand):
    def __init__(self, name, opType, value, backward=None, skipRenaming=False, extraParams=None):
        Operand.__init__(
            self, name, opType, value, backward, skipRenaming=skipRenaming, extraParams=extraParams
        )
        self.lifetime = "NO_VALUE" if self.value is None else "CONSTANT_COPY"


class Int32Scalar(Parameter):
    def __init__(self, name, value):
        Parameter.__init__(self, name, ("INT32", []), int(value))


class Float16Scalar(Parameter):
    def __init__(self, name, value):
        Parameter.__init__(self, name, ("FLOAT16", []), float(value))


class Float32Scalar(Parameter):
    def __init__(self, name, value):
        Parameter.__init__(self, name, ("FLOAT32", []), float(value))


class BoolScalar(Parameter):
    def __init__(self, name, value):
        Parameter.__init__(self, name, ("BOOL", []), bool(value))


class Int32Vector(Parameter):
    def __init__(self, name, value):
        Parameter.__init__(self, name, ("TENSOR_INT32", [len(value)]), [int(v) for v in value])


class Float32Vector(Parameter):
    def __init__(self, name, value):
        Parameter.__init__(self, name, ("TENSOR_FLOAT32", [len(value)]), [float(v) for v in value])


class SubgraphReference(Parameter):
    def __init__(self, name, model):
        Parameter.__init__(self, name, ("SUBGRAPH", []), model)
        self.lifetime = "SUBGRAPH"
        if model.name is None:
            model.name = name


class Internal(Operand):
    def __init__(self, name, opType, backward=None, skipRenaming=False, extraParams=None):
        Operand.__init__(
            self, name, opType, backward, None, skipRenaming=skipRenaming, extraParams=extraParams
        )
        self.lifetime = "TEMPORARY_VARIABLE"


def implicit_parameter(value):
    """Plain Python values in an operation's argument list (Android's ImplicitParameter)."""
    if isinstance(value, Operand):
        return value
    if type(value) is int:
        return Int32Scalar("param", value)
    if type(value) is float:
        return Float32Scalar("param", value)
    if type(value) is bool:
        return BoolScalar("param", value)
    if isinstance(value, (list, tuple)) and value and all(type(v) is int for v in value):
        return Int32Vector("param", value)
    if isinstance(value, (list, tuple)) and value and all(type(v) is float for v in value):
        return Float32Vector("param", value)
    if isinstance(value, Model):
        return SubgraphReference("param", value)
    raise ctx().error(f"{value!r} is not supported as an implicit operation parameter")


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------


def _operands(args, what: str) -> list[Operand]:
    """``args`` when every one is an operand; else a :class:`SpecError` naming ``what``."""
    for a in args:
        if not isinstance(a, Operand):
            raise ctx().error(f"{what}: {short(a)} is not an operand")
    return list(args)


def _different_operands(a: Operand, b: Operand) -> bool:
    """Two operands of one name that cannot be the same one. Android identifies operands
    by name, so a copy (same class and type) stands for the original."""
    return a is not b and (type(a) is not type(b) or a.type is not b.type)


class Operation:
    def __init__(self, optype, ins, outs):
        if not isinstance(optype, str):
            raise ctx().error(
                f"Operation: the operation must be named by a string like 'ADD', "
                f"got {short(optype)}"
            )
        self.optype = optype
        self.line = ctx().caller_line()
        self.ins = [implicit_parameter(i) for i in ins]
        self.outs = _operands(outs, "To()")

    def __repr__(self):
        return f"Operation({self.optype})"


class Model:
    def __init__(self, name=None):
        c = ctx()
        if name is not None and not isinstance(name, str):
            raise c.error(f"Model: the name must be a string, got {short(name)}")
        self.name = name
        self.operations: list[Operation] = []
        self.operands: list[Operand] = []
        # Position of each operand name in self.operands (operands are identified by
        # name): finding one by scanning the list made loading quadratic in graph size.
        self._positions: dict[str, int] = {}
        self._indexed: tuple[int, int] = (id(self.operands), 0)
        self.isRelaxed = False
        self.compiled = False
        self.version = c.version
        self.referenced_models: list[Model] | None = None
        self.line = c.caller_line()
        c.models.append(self)

    def _position(self, operand) -> int | None:
        """Index in self.operands of the operand named like ``operand``, or None."""
        if self._indexed != (id(self.operands), len(self.operands)):
            # The list was changed behind AddOperand's back (by spec code): index again.
            self._positions = {}
            for k, o in enumerate(self.operands):
                self._positions.setdefault(o.name, k)
            self._indexed = (id(self.operands), len(self.operands))
        k = self._positions.get(operand.name)
        if k is not None and self.operands[k].name != operand.name:
            self._indexed = (0, 0)  # an entry was replaced by another name
            return self._position(operand)
        return k

    def AddOperand(self, operand):
        _operands([operand], "AddOperand()")
        k = self._position(operand)
        if k is None:
            self._positions[operand.name] = len(self.operands)
            self.operands.append(operand)
            self._indexed = (id(self.operands), len(self.operands))
        elif _different_operands(self.operands[k], operand):
            other = self.operands[k]
            raise ctx().error(
                f"two operands are named {operand.name!r}: {type(other).__name__} (line "
                f"{other.line}) and {type(operand).__name__} (line {operand.line}); names "
                "must be unique (skipRenaming=True keeps a name as given)"
            )
        return self

    def IdentifyInputs(self, *args):
        _operands(args, "IdentifyInputs()")
        for a in args:
            self.AddOperand(a)
        if tuple(self.GetInputs()) != tuple(args):
            raise ctx().error(
                f"IdentifyInputs: model inputs are {self.GetInputs()}, not {list(args)}"
            )
        return self

    def IdentifyOutputs(self, *args):
        _operands(args, "IdentifyOutputs()")
        for a in args:
            self.AddOperand(a)
        if tuple(self.GetOutputs()) != tuple(args):
            raise ctx().error(
                f"IdentifyOutputs: model outputs are {self.GetOutputs()}, not {list(args)}"
            )
        return self

    def AddOperation(self, operation):
        self.operations.append(operation)
        for i in operation.ins:
            self.AddOperand(i)
        for o in operation.outs:
            self.AddOperand(o)
        return self

    def Operation(self, op_name, *args):
        return self.AddOperation(Operation(op_name, args, []))

    def To(self, *args):
        if not self.operations:
            raise ctx().error("To() without a preceding Operation()")
        outs = args[0] if args and isinstance(args[0], (list, tuple)) else args
        self.operations[-1].outs = _operands(outs, "To()")
        for o in outs:
            self.AddOperand(o)
        return self

    def RelaxedExecution(self, isRelaxed):
        self.isRelaxed = bool(isRelaxed)
        return self

    def IntroducedIn(self, ver):
        self.version = ver
        return self

    def GetInputs(self):
        return [i for i in self.operands if isinstance(i, Input)]

    def GetOutputs(self):
        return [o for o in self.operands if isinstance(o, Output)]

    def GetParameters(self):
        return [p for p in self.operands if isinstance(p, Parameter)]

    def _index_of(self, operand) -> int:
        k = self._position(operand) if isinstance(operand, Operand) else None
        if k is None:
            raise ctx().error(f"{short(operand)} is not an operand of the model")
        return k

    def GetEquivalentOperands(self, targets):
        return [self.operands[self._index_of(t)] for t in targets]

    def UpdateEquivalentOperands(self, targets):
        for t in targets:
            self.operands[self._index_of(t)] = t
        return self

    def Feed(self, feedDict):
        for i in self.GetInputs():
            i.Feed(feedDict[0])
        for o in self.GetOutputs():
            o.Feed(feedDict[1])
        return self

    # --- compile: topological order and referenced subgraphs ---------------------------
    def _set_ins_and_outs(self):
        for o in self.operands:
            o.ins, o.outs = [], []
        for op in self.operations:
            op.ins = self.GetEquivalentOperands(op.ins)
            op.outs = self.GetEquivalentOperands(op.outs)
            for i in op.ins:
                i.outs.append(op)
            for o in op.outs:
                o.ins.append(op)

    def _topological_sort(self):
        deps = {op: [] for op in self.operations}
        for operand in self.operands:
            for consumer in operand.outs:
                for producer in operand.ins:
                    deps[consumer].append(producer)
        order: list[Operation] = []
        visited: set = set()
        done: set = set()

        # Iterative DFS with the same visiting order as Android's recursive helper.
        for root in self.operations:
            if root in visited:
                if root not in done:
                    raise ctx().error("cycle in the graph", root.line)
                continue
            stack = [(root, iter(deps[root]))]
            visited.add(root)
            while stack:
                node, it = stack[-1]
                child = next(it, None)
                if child is None:
                    stack.pop()
                    order.append(node)
                    done.add(node)
                    continue
                if child in visited:
                    if child not in done:
                        raise ctx().error("cycle in the graph", child.line)
                    continue
                visited.add(child)
                stack.append((child, iter(deps[child])))
        self.operations = order

    def _subgraph_operands(self):
        return (o for o in self.operands if o.lifetime == "SUBGRAPH")

    def Compile(self):
        """Sort the operations and number the referenced models depth-first in operand
        order (their index in ``referenced_models``). An explicit stack, not recursion:
        IF/WHILE subgraphs may nest deeper than Python's recursion limit."""
        if self.compiled:
            return self
        referenced: list[Model] = []
        index_of: dict[int, int] = {}
        self.referenced_models = referenced
        stack = [self._compile_one()]
        while stack:
            operand = next(stack[-1], None)
            if operand is None:
                stack.pop()
                continue
            model = operand.value[0]
            if isinstance(model, Model):
                key = id(model)
                if key not in index_of:
                    index_of[key] = len(index_of)
                    referenced.append(model)
                    if not model.compiled:
                        stack.append(model._compile_one())
                operand.value = [index_of[key]]
        return self

    def _compile_one(self):
        """Sort this model; its SUBGRAPH operands, for the caller to number."""
        self.compiled = True  # before its subgraphs: a cycle back to it ends here
        self._set_ins_and_outs()
        self._topological_sort()
        return self._subgraph_operands()


def _models_innermost_first(model: Model) -> list[Model]:
    """``model`` and every model its SUBGRAPH operands reach, each after the models it
    references (a post-order walk with an explicit stack)."""
    order: list[Model] = []
    seen = {id(model)}
    stack = [(model, iter(model.operands))]
    while stack:
        m, operands = stack[-1]
        for o in operands:
            sub = o.value[0] if o.lifetime == "SUBGRAPH" and o.value else None
            if isinstance(sub, Model) and id(sub) not in seen:
                seen.add(id(sub))
                stack.append((sub, iter(sub.operands)))
                break
        else:
            stack.pop()
            order.append(m)
    return order


def copy_model(model: Model) -> Model:
    """``copy.deepcopy(model)`` that nested subgraphs do not drive into Python's
    recursion limit: the innermost models are copied first, so copying a model finds the
    models it references already in the memo."""
    memo: dict = {}
    for m in _models_innermost_first(model):
        copy.deepcopy(m, memo)
    return memo[id(model)]


# ---------------------------------------------------------------------------------------
# Variations
# ---------------------------------------------------------------------------------------


class ModelVariation:
    supportsSubgraphs = False

    def __init__(self, name=None):
        self.targetOperands: dict = {}
        self.name = name

    def __repr__(self):
        return f"{type(self).__name__}({self.name})"

    def IdentifyOperands(self, args=None):
        if args is None:
            return self
        if not isinstance(args, (dict, list, tuple)):
            raise ctx().error(
                f"{type(self).__name__}: identify operands with a list or a dict, got {short(args)}"
            )
        _operands(args, f"{type(self).__name__}.Identify()")
        self.targetOperands = args if isinstance(args, dict) else {i: None for i in args}
        return self

    def Identify(self, operandArgs=None, paramArgs=None):
        self.IdentifyOperands(operandArgs)
        return self

    def AutoIdentify(self, model):
        return self

    def SetToDefaultName(self):
        self.name = ""

    def TransformOperand(self, op, arg=None):
        return op

    def TransformModel(self, model):
        return model

    def ApplyTo(self, model):
        if not self.supportsSubgraphs and any(o.lifetime == "SUBGRAPH" for o in model.operands):
            raise ctx().error(f"variation {type(self).__name__} does not support subgraphs")
        if not self.targetOperands:
            self.AutoIdentify(model)
        targets = model.GetEquivalentOperands(sorted(self.targetOperands.keys()))
        model.UpdateEquivalentOperands(
            [self.TransformOperand(op, self.targetOperands[op]) for op in targets]
        )
        return self.TransformModel(model)


class DefaultVariation(ModelVariation):
    supportsSubgraphs = True

    def __init__(self, name=None):
        ModelVariation.__init__(self, name=name)


class DataTypeConverter(ModelVariation):
    supportsSubgraphs = True

    def __init__(self, targetType=None, name=None, scale=None, zeroPoint=None):
        ModelVariation.__init__(self, name=name)
        if targetType is not None and not DataTypeConverter.IsCompatible(targetType):
            raise ctx().error(f"DataTypeConverter: unknown target type {targetType!r}")
        self.targetType = targetType
        self.scale = scale
        self.zeroPoint = zeroPoint

    @staticmethod
    def IsCompatible(value):
        return isinstance(value, str) and value.lower() in (
            "float16",
            "int32",
            "quant8",
            "quant8_signed",
        )

    def SetToDefaultName(self):
        if self.targetType is not None:
            self.name = self.targetType.lower()
            return
        target_types = [
            (arg if isinstance(arg, (tuple, list)) else (arg,))[0]
            for arg in self.targetOperands.values()
            if not isinstance(arg, DataTypeConverter)
        ]
        if "TENSOR_QUANT8_SYMM_PER_CHANNEL" in target_types:
            self.name = "channelQuant8"
        elif "TENSOR_QUANT8_ASYMM" in target_types:
            self.name = "quant8"
        elif "TENSOR_QUANT8_ASYMM_SIGNED" in target_types:
            self.name = "quant8_signed"
        elif "TENSOR_INT32" in target_types:
            self.name = "int32"
        elif "TENSOR_FLOAT16" in target_types:
            self.name = "float16"
        else:
            self.name = "float32"

    def AutoIdentify(self, model):
        if self.targetType is None:
            return self
        tt = self.targetType.lower()
        scalar_type = None
        if tt in ("quant8", "quant8_signed"):
            if self.scale is None or self.zeroPoint is None:
                raise ctx().error(f"DataTypeConverter({tt!r}) needs scale and zeroPoint")
            base = "TENSOR_QUANT8_ASYMM" if tt == "quant8" else "TENSOR_QUANT8_ASYMM_SIGNED"
            tensor_type = (base, self.scale, self.zeroPoint)
        else:
            tensor_type = ("TENSOR_" + tt.upper(),)
            scalar_type = (tt.upper(),)
        targets: dict = {}
        targets.update(
            {
                op: DataTypeConverter(self.targetType, self.name, self.scale, self.zeroPoint)
                for op in model.operands
                if op.type.type == "SUBGRAPH"
            }
        )
        targets.update(
            {op: tensor_type for op in model.operands if op.type.type == "TENSOR_FLOAT32"}
        )
        if scalar_type is not None:
            targets.update({op: scalar_type for op in model.operands if op.type.type == "FLOAT32"})
        self.Identify(targets)
        return self

    def TransformOperand(self, op, arg=None):
        if isinstance(arg, DataTypeConverter):
            # A SUBGRAPH operand: convert the referenced model with a nested converter.
            sub = copy_model(op.value[0]) if isinstance(op.value[0], Model) else op.value[0]
            op.value = [arg.ApplyTo(sub)]
            return op
        if isinstance(arg, str):
            arg = (arg,)
        if not isinstance(arg, (tuple, list)) or not arg:
            raise ctx().error(
                f"DataTypeConverter: the target of {op.name} must be a type name or a "
                f"(type, scale, zeroPoint) tuple, got {short(arg)}"
            )
        arg = tuple(arg)
        type_tuple = (arg[0], op.type.dimensions, *arg[1:])
        if op.value is None or op.type.GetNumberOfElements() == 0:
            op.type = Type.GetType(*type_tuple)
        else:
            v = Dequantize(op.GetValueAsNumpy().astype(np.float32), op.type)
            op.type = Type.GetType(*type_tuple)
            v = Quantize(v, op.type)
            op.SetValueFromNumpy(v)
        return op


class DataLayoutConverter(ModelVariation):
    def __init__(self, targetLayout="nchw", name=None):
        ModelVariation.__init__(self, name=name)
        if not DataLayoutConverter.IsCompatible(targetLayout):
            raise ctx().error(
                f"DataLayoutConverter: unknown layout {short(targetLayout)} (nchw or nhwc)"
            )
        self.targetLayout = targetLayout.lower()
        self.perm = (0, 3, 1, 2) if self.targetLayout == "nchw" else (0, 1, 2, 3)
        self.param = self.targetLayout == "nchw"

    @staticmethod
    def IsCompatible(value):
        return isinstance(value, str) and value.lower() in ("nhwc", "nchw")

    def SetToDefaultName(self):
        self.name = self.targetLayout

    def TransformOperand(self, op, arg=None):
        if len(op.type.dimensions) == 4:
            if op.value is not None and op.type.GetNumberOfElements() != 0:
                op.SetValueFromNumpy(op.GetValueAsNumpy().transpose(self.perm))
            new_dims = [op.type.dimensions[i] for i in self.perm]
            op.type = Type.GetType(
                op.type.type, new_dims, op.type.scale, op.type.zeroPoint, op.type.extraParams
            )
        elif len(op.type.dimensions) == 1 and op.value is not None and len(op.value) == 4:
            op.SetValueFromNumpy(op.GetValueAsNumpy()[list(self.perm)])
        elif op.type.type == "BOOL":
            op.SetValue(self.param)
        else:
            raise ctx().error(f"{op.name} is not supported by DataLayoutConverter", op.line)
        return op


class RelaxedModeConverter(ModelVariation):
    supportsSubgraphs = True

    def __init__(self, isRelaxed=True, name=None):
        ModelVariation.__init__(self, name=name)
        if isinstance(isRelaxed, bool):
            self.isRelaxed = isRelaxed
        else:
            if not RelaxedModeConverter.IsCompatible(isRelaxed):
                raise ctx().error(
                    f"RelaxedModeConverter: isRelaxed must be a bool or 'relaxed', "
                    f"got {short(isRelaxed)}"
                )
            self.isRelaxed = True

    @staticmethod
    def IsCompatible(value):
        return isinstance(value, str) and value.lower() == "relaxed"

    def SetToDefaultName(self):
        self.name = "relaxed" if self.isRelaxed else "float"

    def TransformModel(self, model):
        model.RelaxedExecution(self.isRelaxed)
        return model


class ActivationConverter(ModelVariation):
    actMap = {  # noqa: RUF012 - Android's table
        "none": (0, None, None),
        "relu": (1, 0.0, None),
        "relu1": (2, -1.0, 1.0),
        "relu6": (3, 0.0, 6.0),
    }

    def __init__(self, act="relu", name=None):
        ModelVariation.__init__(self, name=name)
        if not ActivationConverter.IsCompatible(act):
            raise ctx().error(
                f"ActivationConverter: unknown activation {short(act)} (one of "
                f"{', '.join(ActivationConverter.actMap)})"
            )
        self.act = act.lower()
        self.enum, self.low, self.high = ActivationConverter.actMap[self.act]

    @staticmethod
    def IsCompatible(value):
        return isinstance(value, str) and value.lower() in ActivationConverter.actMap

    def SetToDefaultName(self):
        self.name = self.act

    def TransformOperand(self, op, arg=None):
        if op.type.type == "INT32":
            return op.SetValue(self.enum)
        if not isinstance(op, Output):
            raise ctx().error(
                f"ActivationConverter: {op.name} is neither INT32 nor an output", op.line
            )
        if isinstance(op, IgnoredOutput):
            return op  # nothing to clamp
        v = op.GetValueAsNumpy()
        if self.low is not None:
            v = np.maximum(v, Quantize(np.float64(self.low), op.type))
        if self.high is not None:
            v = np.minimum(v, Quantize(np.float64(self.high), op.type))
        return op.SetValueFromNumpy(v)


class AxisConverter(ModelVariation):
    def __init__(self, origin, target, dim, drop=(), name=None):
        ModelVariation.__init__(self, name=name)
        self.origin = origin
        self.target = target
        if not all(-dim <= i < dim for i in (origin, target)):
            raise ctx().error(f"AxisConverter: axis out of range for rank {dim}")
        self.dim = dim
        self.perm = list(range(dim))
        self.perm.insert(target if target >= 0 else target + dim, self.perm.pop(origin))
        drop = [drop] if isinstance(drop, int) else list(drop)
        self.drop = [i if i >= 0 else i + dim for i in drop]

    def SetToDefaultName(self):
        axis = self.target if self.target >= 0 else self.target + self.dim
        axis -= len([i for i in self.drop if i < axis])
        name = f"dim{self.dim - len(self.drop)}_axis{axis}"
        self.name = name if self.target >= 0 else name + "_neg"

    def _transpose(self, op):
        if op.type.type == "INT32":
            op.SetValue(self.target)
        elif len(op.type.dimensions) == self.dim:
            if op.value is not None:
                op.SetValueFromNumpy(op.GetValueAsNumpy().transpose(self.perm))
            new_dims = [op.type.dimensions[i] for i in self.perm]
            op.type = Type.GetType(op.type.type, new_dims, op.type.scale, op.type.zeroPoint)
        else:
            raise ctx().error(f"{op.name} is not supported by AxisConverter", op.line)
        return op

    def _remove(self, op):
        if op.type.type == "INT32":
            if op.value[0] >= 0:
                op.SetValue(op.value[0] - len([i for i in self.drop if i < op.value[0]]))
        elif len(op.type.dimensions) == self.dim:
            if op.value is not None:
                val = op.GetValueAsNumpy()
                for i in sorted(self.drop, reverse=True):
                    val = np.take(val, 0, axis=i)
                op.SetValueFromNumpy(val)
            new_dims = [op.type.dimensions[i] for i in range(self.dim) if i not in self.drop]
            op.type = Type.GetType(op.type.type, new_dims, op.type.scale, op.type.zeroPoint)
        return op

    def TransformOperand(self, op, arg=None):
        return self._remove(self._transpose(op))


def _compatible_with_add(op) -> bool:
    has_values = (
        op.type.GetNumberOfElements() > 0
        if isinstance(op, IgnoredOutput)  # its zeros are not materialized
        else op.value is not None and len(op.value) > 0
    )
    return (
        len(op.type.dimensions) <= 4
        and has_values
        and op.type.type
        in ("TENSOR_FLOAT32", "TENSOR_QUANT8_ASYMM", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM_SIGNED")
    )


class AllTensorsAsInputsConverter(ModelVariation):
    supportsSubgraphs = True

    def __init__(self, name="all_tensors_as_inputs"):
        ModelVariation.__init__(self, name=name)

    def TransformModel(self, model):
        if len(model.operations) != 1:
            raise SkipVariation
        params = [
            p
            for p in model.operands
            if type(p) is Parameter and not p.type.IsScalar() and p.value is not None
        ]
        if not params:
            raise SkipVariation
        model.UpdateEquivalentOperands([p.ConvertTo(Input) for p in params])
        return model


class AllInputsAsInternalCoverter(ModelVariation):  # (sic) Android's spelling
    supportsSubgraphs = True

    def __init__(self, name="all_inputs_as_internal"):
        ModelVariation.__init__(self, name=name)

    def TransformModel(self, model):
        if len(model.operations) != 1:
            raise SkipVariation
        inputs = [i for i in model.GetInputs() if _compatible_with_add(i) and i.mayBeInternal]
        if not inputs:
            raise SkipVariation
        for op in inputs:
            new_input = op.ConvertTo(Input, name=op.name + "_new")
            dummy = Parameter(
                "dummy", (op.type.type, [1], op.type.scale, op.type.zeroPoint), [op.type.zeroPoint]
            )
            model.Operation("ADD", new_input, dummy, 0).To(op)
        model.UpdateEquivalentOperands([op.ConvertTo(Internal) for op in inputs])
        return model


class AllOutputsAsInternalCoverter(ModelVariation):  # (sic)
    supportsSubgraphs = True

    def __init__(self, name="all_outputs_as_internal"):
        ModelVariation.__init__(self, name=name)

    def TransformModel(self, model):
        if len(model.operations) != 1:
            raise SkipVariation
        outputs = [o for o in model.GetOutputs() if _compatible_with_add(o)]
        if not outputs:
            raise SkipVariation
        for op in outputs:
            new_output = op.ConvertTo(Output, name=op.name + "_new")
            dummy = Parameter(
                "dummy", (op.type.type, [1], op.type.scale, op.type.zeroPoint), [op.type.zeroPoint]
            )
            model.Operation("ADD", op, dummy, 0).To(new_output)
        model.UpdateEquivalentOperands([op.ConvertTo(Internal) for op in outputs])
        return model


def implicit_variation(value) -> ModelVariation:
    """Variation shorthands: "float16", "relaxed", "nchw", ("relu", [ops]), ..."""
    if isinstance(value, ModelVariation):
        return value
    args = list(value) if isinstance(value, (tuple, list)) else [value]
    if not args:
        raise ctx().error(f"{value!r} is not a known variation")
    head = args[0]
    for cls in (DataTypeConverter, DataLayoutConverter, RelaxedModeConverter, ActivationConverter):
        if cls.IsCompatible(head):
            var = cls(head)
            if len(args) > 1:
                var.Identify(*args[1:])
            return var
    raise ctx().error(f"{head!r} is not a known variation")


# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------


class Example:
    def __init__(self, *args, model=None, name=None):
        c = ctx()
        if model is None and not c.models:
            raise c.error("Example() before any Model()")
        if model is not None and not isinstance(model, Model):
            raise c.error(f"Example: model= must be a Model, got {short(model)}")
        if name is not None and not isinstance(name, str):
            raise c.error(f"Example: the name must be a string, got {short(name)}")
        self.model = c.models[-1] if model is None else model
        self.name = name
        self.line = c.caller_line()
        self.expectedMultinomialDistributionTolerance = 0
        self.expectFailure = False
        self.testDynamicOutputShape = True
        self.testLifeTimeVariation = True
        self.feedDicts: list = []
        for feed in args:
            if isinstance(feed, (tuple, list)):
                if len(feed) != 2 or not all(isinstance(f, (dict, list, tuple)) for f in feed):
                    raise c.error(
                        "Example: a pair feed must be (inputs, outputs), each a dict or a "
                        f"list, got {short(feed)}"
                    )
                self.feedDicts.append(tuple(feed))
            elif isinstance(feed, dict):
                try:
                    self.feedDicts.append(
                        (
                            {i: feed[i] for i in self.model.GetInputs()},
                            {o: feed[o] for o in self.model.GetOutputs()},
                        )
                    )
                except KeyError as e:
                    raise c.error(f"Example: no value for operand {e.args[0]}") from None
            else:
                raise c.error(
                    f"Example: a feed must be a dict or an (inputs, outputs) pair, got {feed!r}"
                )
        self.variations: list[list[ModelVariation]] = []
        c.examples.append(self)

    @staticmethod
    def SetVersion(ver, *args):
        for name in args:
            ctx().version_overrides[name] = ver

    def AddVariations(self, *args, includeDefault=True, defaultName=None):
        group: list[ModelVariation] = [DefaultVariation(defaultName)] if includeDefault else []
        group.extend(implicit_variation(a) for a in args)
        self.variations.append(group)
        return self

    def AddNchw(self, *args, includeDefault=True, defaultName="nhwc"):
        return self.AddVariations(
            DataLayoutConverter("nchw").Identify(args),
            includeDefault=includeDefault,
            defaultName=defaultName,
        )

    def AddRelaxed(self, isRelaxed=True, includeDefault=True, defaultName=None):
        return self.AddVariations(
            RelaxedModeConverter(isRelaxed), includeDefault=includeDefault, defaultName=defaultName
        )

    def AddRelu(self, *args, includeDefault=True, defaultName=None):
        return self.AddVariations(
            ActivationConverter("relu").Identify(args),
            includeDefault=includeDefault,
            defaultName=defaultName,
        )

    def AddAllActivations(self, *args):
        var = [ActivationConverter(a).Identify(args) for a in sorted(ActivationConverter.actMap)]
        return self.AddVariations(*var, includeDefault=False)

    def GuessOriginalAxisAndDim(self, *args):
        origin = None
        dim = None
        for arg in args:
            if arg.type.type == "INT32":
                origin = arg.value[0]
            else:
                if dim is None:
                    dim = len(arg.type.dimensions)
                elif dim != len(arg.type.dimensions):
                    raise ctx().error("axis helpers need operands of equal rank")
        if dim is None:
            raise ctx().error("axis helpers need at least one tensor operand")
        origin = dim - 1 if origin is None else origin
        origin = origin + dim if origin < 0 else origin
        return origin, dim

    def AddAxis(self, axis, *args, includeDefault=True, defaultName=None):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        axis = [axis] if isinstance(axis, int) else list(axis)
        var = [AxisConverter(origin, a, dim).Identify(args) for a in axis]
        return self.AddVariations(*var, includeDefault=includeDefault, defaultName=defaultName)

    def AddAllPositiveAxis(self, *args):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        var = [AxisConverter(origin, a, dim).Identify(args) for a in range(dim)]
        return self.AddVariations(*var, includeDefault=False)

    def AddAllAxis(self, *args):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        var = [AxisConverter(origin, a, dim).Identify(args) for a in range(-dim, dim)]
        return self.AddVariations(*var, includeDefault=False)

    def AddDims(self, dims, *args, includeDefault=True, defaultName=None):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        dims = [dims] if isinstance(dims, int) else list(dims)
        drop = list(range(dim))
        drop.pop(origin)
        var = [AxisConverter(origin, origin, dim, drop[0 : (dim - i)]).Identify(args) for i in dims]
        return self.AddVariations(*var, includeDefault=includeDefault, defaultName=defaultName)

    def AddAllDims(self, *args):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        drop = list(range(dim))
        drop.pop(origin)
        var = [AxisConverter(origin, origin, dim, drop[0:i]).Identify(args) for i in range(dim)]
        return self.AddVariations(*var, includeDefault=False)

    def AddAllDimsAndPositiveAxis(self, *args):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        var = [
            AxisConverter(origin, j, dim, range(i)).Identify(args)
            for i in range(dim)
            for j in range(i, dim)
        ]
        return self.AddVariations(*var, includeDefault=False)

    def AddAllDimsAndAxis(self, *args):
        origin, dim = self.GuessOriginalAxisAndDim(*args)
        var = [
            AxisConverter(origin, k, dim, range(i)).Identify(args)
            for i in range(dim)
            for j in range(i, dim)
            for k in (j, j - dim)
        ]
        return self.AddVariations(*var, includeDefault=False)

    def Combine(self, other):
        self.feedDicts.extend(other.feedDicts)
        return self

    def WithMultinomialDistributionTolerance(self, expectedTolerance):
        t = expectedTolerance
        if isinstance(t, bool) or not is_real(t) or not 0 <= t < math.inf:
            raise ctx().error(
                f"WithMultinomialDistributionTolerance: the tolerance must be a finite "
                f"number >= 0, got {short(t)}"
            )
        self.expectedMultinomialDistributionTolerance = expectedTolerance
        return self

    ExpectMultinomialDistributionTolerance = WithMultinomialDistributionTolerance

    def ExpectFailure(self):
        self.expectFailure = True
        return self

    def DisableLifeTimeVariation(self):
        self.testLifeTimeVariation = False
        return self

    def DisableDynamicOutputShapeVariation(self):
        self.testDynamicOutputShape = False
        return self


def dsl_namespace() -> dict[str, Any]:
    """The names a spec file is executed with."""
    names = {
        n: globals()[n]
        for n in [
            "Type",
            "SymmPerChannelQuantParams",
            "Operand",
            "Input",
            "Output",
            "IgnoredOutput",
            "Parameter",
            "Internal",
            "Int32Scalar",
            "Float16Scalar",
            "Float32Scalar",
            "BoolScalar",
            "Int32Vector",
            "Float32Vector",
            "SubgraphReference",
            "Operation",
            "Model",
            "Example",
            "ModelVariation",
            "DefaultVariation",
            "DataTypeConverter",
            "DataLayoutConverter",
            "RelaxedModeConverter",
            "ActivationConverter",
            "AxisConverter",
            "AllTensorsAsInputsConverter",
            "AllInputsAsInternalCoverter",
            "AllOutputsAsInternalCoverter",
            "SkipVariation",
            "Quantize",
            "Dequantize",
        ]
    }
    names.update({"np": np, "numpy": np, "math": math, "copy": copy, "itertools": itertools})
    return names
