"""Load a ``.mod.py`` spec file and expand it into named test models, as Android's test
generator does.

Spec files are Python programs and are executed as such: **the loader runs trusted spec
files; it is not a sandbox.** Only load specs you would run as code.

    for test in load_spec("specs/V1_2/add_v1_2.mod.py"):
        model, inputs, expected = test.to_hal()
"""

from __future__ import annotations

import itertools
import math
import re
import signal
import stat
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from driver.hal.types import (
    HalError,
    HalVersion,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
)
from driver.operations.base import storage_dtype
from randomgraph.criteria import CRITERIA_SETS
from randomgraph.spec import dsl
from randomgraph.spec.dsl import SpecContext, SpecError
from randomgraph.testmodel import TestModel, TestOperand, TestOperation, TestSubgraph

L = OperandLifeTime
_LOCK = threading.Lock()  # the DSL keeps per-load state in a module global

SPEC_SUFFIX = ".mod.py"


class _SigintWatch:
    """Notes whether a real SIGINT (Ctrl-C) arrived while a spec ran, so that a
    KeyboardInterrupt the spec's own code raised is that spec's error, while a real
    Ctrl-C still stops the caller. Active only in the main thread and when SIGINT has a
    Python handler (which it then calls, so the interrupt behaves as before)."""

    def __init__(self) -> None:
        self.received = False
        self.active = False
        self._old = None

    def _handler(self, signum, frame) -> None:
        self.received = True
        self._old(signum, frame)

    def __enter__(self) -> _SigintWatch:
        if threading.current_thread() is threading.main_thread():
            old = signal.getsignal(signal.SIGINT)
            if callable(old):
                self._old = old
                signal.signal(signal.SIGINT, self._handler)
                self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            signal.signal(signal.SIGINT, self._old)

    def real_interrupt(self) -> bool:
        """A KeyboardInterrupt now is a Ctrl-C (or cannot be told from one)."""
        return self.received or not self.active


_WATCH = _SigintWatch()  # the one of the load in progress (loads hold _LOCK)


def _spec_interrupt(e: KeyboardInterrupt, path: str, line: int | None = None) -> SpecError:
    """A KeyboardInterrupt the spec's code raised: the spec's error. A real Ctrl-C is
    re-raised."""
    if _WATCH.real_interrupt():
        raise e
    return SpecError("the spec raised KeyboardInterrupt", path, _spec_line(e, path) or line)


def spec_name_of(path: Path) -> str:
    name = path.name
    return name[: -len(SPEC_SUFFIX)] if name.endswith(SPEC_SUFFIX) else path.stem


def version_of(path: Path, default: str = "V1_3") -> str:
    """The spec's folder name (``V1_0`` ... ``V1_3``) is its default version."""
    for part in reversed(path.parent.parts):
        if re.fullmatch(r"V1_[0-3]", part):
            return part
    return default


def find_specs(paths: Iterable[str | Path]) -> list[Path]:
    """Spec files named by ``paths`` (files, or directories searched recursively)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(q for q in p.rglob(f"*{SPEC_SUFFIX}")))
        else:
            found.append(p)
    return found


MAX_SPEC_BYTES = 64 << 20
"""Largest spec file read: 64 MiB. A spec is source code; even a dumped random graph at
the generator's element limits is far smaller. Reading stops there, so a huge file or
a link to a device cannot fill memory."""


def _read_spec_text(path: Path) -> str:
    """The text of the spec file at ``path``; :class:`SpecError` when it cannot be read,
    is not a regular file (a device or FIFO: endless, or a hang on open), is larger than
    :data:`MAX_SPEC_BYTES` or is not UTF-8 (Python source, as Android's generator reads
    it)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise SpecError("not a regular file (a spec file is Python source)", str(path))
        data = bytearray()
        with path.open("rb") as f:
            # In chunks: read(MAX_SPEC_BYTES + 1) would allocate all of it up front.
            while len(data) <= MAX_SPEC_BYTES and (chunk := f.read(1 << 20)):
                data += chunk
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror or e}", str(path)) from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"larger than a spec file may be ({MAX_SPEC_BYTES >> 20} MiB)", str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(
            f"not a spec file: byte {e.start} is not UTF-8 text ({e.reason})", str(path)
        ) from None


def load_spec(
    path: str | Path, *, source: str | None = None, version: str | None = None
) -> list[TestModel]:
    """Execute and expand one spec file. Raises :class:`SpecError` (with file and line),
    also for a file that cannot be read or is not UTF-8 text."""
    path = Path(path)
    text = source if source is not None else _read_spec_text(path)
    c = SpecContext(str(path), spec_name_of(path), version or version_of(path))
    global _WATCH
    with _LOCK, _SigintWatch() as watch:
        _WATCH = watch
        dsl.set_context(c)
        try:
            _execute(text, c)
            tests = _expand_all(c)
        finally:
            dsl.set_context(None)
    criteria = criteria_pragma(text)
    if criteria and criteria not in CRITERIA_SETS:
        raise SpecError(
            f"unknown criteria set {criteria!r} in '# nnfuzz-criteria:' "
            f"(one of {', '.join(CRITERIA_SETS)})",
            c.path,
            None,
        )
    if criteria:
        for t in tests:
            t.criteria = criteria
    return tests


_CRITERIA_PRAGMA = re.compile(r"^# nnfuzz-criteria: *([A-Za-z0-9_]+) *$", re.MULTILINE)


def criteria_pragma(text: str) -> str:
    """The random-graph criteria set a spec names with a ``# nnfuzz-criteria: NAME``
    comment line (differential specs written by ``nnfuzz random``), or "". A comment, so
    Android's generator reads the spec unchanged."""
    m = _CRITERIA_PRAGMA.search(text)
    return m.group(1) if m else ""


def _execute(text: str, c: SpecContext) -> None:
    try:
        code = compile(text, c.path, "exec")
    except SyntaxError as e:
        raise SpecError(f"syntax error: {e.msg}", c.path, e.lineno) from None
    except (RecursionError, MemoryError) as e:
        # CPython's parser gives up on deep nesting (1+1+...+1, - - - 1) without a line.
        raise SpecError(
            f"too deeply nested for Python's compiler ({type(e).__name__}); split this expression",
            c.path,
            _longest_line(text),
        ) from None
    except Exception as e:  # e.g. ValueError for a null byte on older Pythons
        raise SpecError(f"cannot compile: {_described(e)}", c.path) from None
    namespace = dsl.dsl_namespace()
    namespace.update({"__name__": "__spec__", "__file__": c.path})
    try:
        exec(code, namespace)
    except SpecError:
        raise
    except KeyboardInterrupt as e:
        raise _spec_interrupt(e, c.path) from None
    except BaseException as e:  # SystemExit too: a spec must not end nnfuzz silently
        raise SpecError(_described(e), c.path, _spec_line(e, c.path)) from None


def _described(e: BaseException) -> str:
    """What went wrong, in one line."""
    if isinstance(e, SystemExit):
        return f"the spec called sys.exit({e.code!r})"
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _longest_line(text: str) -> int | None:
    """The line with the most characters: where a compiler that ran out of stack most
    likely choked (it tells no line)."""
    lines = text.splitlines()
    return max(range(len(lines)), key=lambda k: len(lines[k])) + 1 if lines else None


def _spec_line(e: BaseException, path: str) -> int | None:
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename == path:
            line = frame.lineno
    return line


# ---------------------------------------------------------------------------------------
# Expansion (Android's Example.DumpAllExamples)
# ---------------------------------------------------------------------------------------


def _combine_examples(examples: list[dsl.Example]) -> list[dsl.Example]:
    by_key: dict = {}
    out = []
    for ex in examples:
        key = (id(ex.model), ex.name, tuple(tuple(id(v) for v in g) for g in ex.variations))
        if key in by_key:
            by_key[key].Combine(ex)
        else:
            by_key[key] = ex
            out.append(ex)
    return out


MAX_TESTS_PER_SPEC = 10_000
"""Test models one spec may expand to. Android's largest specs have a few thousand;
variation groups multiply, so a loop of ``AddRelaxed()`` calls would otherwise make
billions (and never finish)."""


def _example_label(ex: dsl.Example) -> str:
    return "Example" + (f" {ex.name!r}" if ex.name else "")


def _expand_all(c: SpecContext) -> list[TestModel]:
    """Every test model of the spec. Any failure (also in spec code a variation calls)
    becomes a :class:`SpecError`, at the Example being expanded when no better line is
    known."""
    ex = None
    try:
        examples = _combine_examples(c.examples)
        for ex in examples:
            _prepare_variations(ex)
        _check_test_count(c, examples)
        tests: list[TestModel] = []
        for ex in examples:
            tests.extend(_expand_example(c, ex))
        return tests
    except KeyboardInterrupt as e:
        raise _spec_interrupt(e, c.path, ex.line if ex is not None else None) from None
    except SpecError as e:
        if e.line is not None or ex is None:
            raise
        raise c.error(f"{_example_label(ex)}: {e.message}", ex.line) from None
    except BaseException as e:
        line = _spec_line(e, c.path) or (ex.line if ex is not None else None)
        where = f"{_example_label(ex)}: " if ex is not None else ""
        raise SpecError(where + _described(e), c.path, line) from None


def _prepare_variations(ex: dsl.Example) -> None:
    """Add the automatic lifetime variations and name the unnamed ones."""
    if (
        ex.testLifeTimeVariation
        and len(ex.model.operations) == 1
        and ex.expectedMultinomialDistributionTolerance == 0
    ):
        ex.AddVariations(dsl.AllTensorsAsInputsConverter())
        ex.AddVariations(dsl.AllInputsAsInternalCoverter())
    for group in ex.variations:
        for v in group:
            if v.name is None:
                v.SetToDefaultName()


def _check_test_count(c: SpecContext, examples: list[dsl.Example]) -> None:
    """Refuse, before making any, more test models than :data:`MAX_TESTS_PER_SPEC`
    (counting every combination; converters that cannot apply skip some later)."""
    counts = []
    for ex in examples:
        n = len(ex.feedDicts)
        for group in ex.variations:
            n *= len(group)
        counts.append(n)
    total = sum(counts)
    if total > MAX_TESTS_PER_SPEC:
        biggest = max(range(len(examples)), key=counts.__getitem__)
        ex = examples[biggest]
        feeds = len(ex.feedDicts)
        raise c.error(
            f"the spec expands to up to {total} test models, more than the "
            f"{MAX_TESTS_PER_SPEC} a spec may have ({_example_label(ex)}: {feeds} "
            f"feed{'s' if feeds != 1 else ''} x {len(ex.variations)} variation groups = "
            f"{counts[biggest]}); use fewer variations or split the spec",
            ex.line,
        )


def _expand_example(c: SpecContext, ex: dsl.Example) -> Iterator[TestModel]:
    for feed in ex.feedDicts:
        try:
            ex.model.Feed(feed)
        except KeyError as e:
            name = getattr(e.args[0], "name", e.args[0]) if e.args else "?"
            raise c.error(
                f"{_example_label(ex)} has no value for operand {name}", ex.line
            ) from None
        for combination in itertools.product(*ex.variations):
            model = dsl.copy_model(ex.model)
            names = [v.name for v in combination]
            try:
                for variation in combination:
                    model = variation.ApplyTo(model)
            except dsl.SkipVariation:
                continue
            except SpecError as e:
                if e.line is not None:
                    raise
                raise c.error(
                    f"{_example_label(ex)}: applying variations {names}: {e.message}", ex.line
                ) from None
            except Exception as e:
                raise SpecError(
                    f"{_example_label(ex)}: applying variations {names}: {_described(e)}",
                    c.path,
                    _spec_line(e, c.path) or ex.line,
                ) from None
            test_name = c.test_names.add(dsl.joined(c.spec_name, model.name, ex.name, *names))
            version = c.version_overrides.get(test_name, model.version)
            model.Compile()
            yield _to_test_model(c, ex, model, test_name, version)


def _to_test_model(
    c: SpecContext, ex: dsl.Example, model: dsl.Model, name: str, version: str
) -> TestModel:
    subgraphs = [_subgraph(c, ex, model, main=True)]
    subgraphs += [_subgraph(c, ex, m, main=False) for m in model.referenced_models or []]
    try:
        hal_version = HalVersion[version] if isinstance(version, str) else HalVersion(version)
    except (KeyError, ValueError):
        raise c.error(f"unknown version {version!r}", ex.line) from None
    if model.isRelaxed:
        # Android does not check HAL compliance of relaxed models: their minimum version
        # is UNKNOWN (they run on every device).
        hal_version = None
    return TestModel(
        name=name,
        main=subgraphs[0],
        referenced=subgraphs[1:],
        is_relaxed=model.isRelaxed,
        expect_failure=ex.expectFailure,
        multinomial_tolerance=float(ex.expectedMultinomialDistributionTolerance),
        min_supported_version=hal_version,
        test_dynamic_output_shape=ex.testDynamicOutputShape,
        source=f"{c.path}:{ex.line}" if ex.line else c.path,
    )


_LIFETIME = {
    "SUBGRAPH_INPUT": L.SUBGRAPH_INPUT,
    "SUBGRAPH_OUTPUT": L.SUBGRAPH_OUTPUT,
    "TEMPORARY_VARIABLE": L.TEMPORARY_VARIABLE,
    "CONSTANT_COPY": L.CONSTANT_COPY,
    "CONSTANT_REFERENCE": L.CONSTANT_REFERENCE,
    "NO_VALUE": L.NO_VALUE,
    "SUBGRAPH": L.SUBGRAPH,
}


def _operand_lifetime(op: dsl.Operand) -> OperandLifeTime:
    if isinstance(op, dsl.Input):
        return L.SUBGRAPH_INPUT
    if isinstance(op, dsl.Output):
        return L.SUBGRAPH_OUTPUT
    if isinstance(op, dsl.Internal):
        return L.TEMPORARY_VARIABLE
    return _LIFETIME[op.lifetime]


def _subgraph(c: SpecContext, ex: dsl.Example, model: dsl.Model, *, main: bool) -> TestSubgraph:
    index = {id(o): k for k, o in enumerate(model.operands)}
    by_name = {o.name: k for k, o in enumerate(model.operands)}
    operands = []
    for o in model.operands:
        try:
            otype = OperandType[o.type.type]
        except KeyError:
            raise c.error(f"operand {o.name}: unknown type {o.type.type!r}", o.line) from None
        lifetime = _operand_lifetime(o)
        data = _operand_data(c, ex, o, otype, lifetime, main)
        extra = o.type.extraParams
        cq = None
        if isinstance(extra, dsl.SymmPerChannelQuantParams) and not extra.hide:
            cq = SymmPerChannelQuantParams(
                int(extra.channelDim), tuple(float(s) for s in extra.scales)
            )
        operands.append(
            TestOperand(
                name=o.name,
                type=otype,
                dimensions=[int(d) for d in o.type.dimensions],
                scale=float(o.type.scale),
                zero_point=int(o.type.zeroPoint),
                lifetime=lifetime,
                channel_quant=cq,
                is_ignored=isinstance(o, dsl.IgnoredOutput),
                data=data,
            )
        )
    operations = []
    for op in model.operations:
        try:
            optype = OperationType[op.optype]
        except KeyError:
            raise c.error(f"unknown operation {op.optype!r}", op.line) from None
        ins = [index.get(id(i), by_name.get(i.name)) for i in op.ins]
        outs = [index.get(id(o), by_name.get(o.name)) for o in op.outs]
        operations.append(TestOperation(optype, ins, outs))
    sg = TestSubgraph(
        operands,
        operations,
        [k for k, o in enumerate(model.operands) if isinstance(o, dsl.Input)],
        [k for k, o in enumerate(model.operands) if isinstance(o, dsl.Output)],
    )
    sg.name = str(model.name)
    sg.fill_consumers()
    return sg


def _operand_data(
    c: SpecContext,
    ex: dsl.Example,
    o: dsl.Operand,
    otype: OperandType,
    lifetime: OperandLifeTime,
    main: bool,
) -> list:
    if lifetime == L.SUBGRAPH:
        return [int(o.value[0])]
    if lifetime in (L.TEMPORARY_VARIABLE, L.NO_VALUE) or isinstance(o, dsl.IgnoredOutput):
        return []
    fed = main and lifetime in (L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT)
    # Wrong example values are the Example's fault; a constant's, its declaration's.
    line, where = (ex.line, f"{_example_label(ex)}: ") if fed else (o.line, "")
    if o.value is None:
        if lifetime in (L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT) and not main:
            return []
        raise c.error(f"{where}operand {o.name} has no value", line)
    values = o.value
    expected = 1 if o.type.IsScalar() else o.type.GetNumberOfElements()
    if not values and lifetime == L.SUBGRAPH_INPUT:
        return []  # an omitted (optional) input, as in Android's CTS
    try:
        data = _typed_values(values, otype)
    except ValueError as e:
        raise c.error(f"{where}operand {o.name} ({otype.name}): {e}", line) from None
    if len(data) != expected:
        raise c.error(
            f"{where}operand {o.name} ({o.type.type} {o.type.dimensions}) needs {expected} "
            f"values, got {len(data)}",
            line,
        )
    return data


def _typed_values(values: list, otype: OperandType) -> list:
    """``values`` as the Python numbers of ``otype`` (bool, float or int). Raises
    ValueError naming the first value that is not a number, or for an integer type not
    an integer in the type's range (an INT32 of 2**31 or a QUANT8 of 300 would fail
    only when the model is built)."""
    fast = _plain_typed_values(values, otype)
    if fast is not None:
        return fast
    for v in values:  # find the culprit
        if not dsl.is_real(v):
            what = "a bool or a number" if otype in _BOOL_TYPES else "a number"
            raise ValueError(f"value {dsl.short(v)} is not {what}")
        if otype in _BOOL_TYPES or _is_float_type(otype):
            continue
        if isinstance(v, (float, np.floating)) and not (math.isfinite(v) and v == int(v)):
            raise ValueError(f"value {v!r} is not an integer")
        lo, hi = _int_range(otype)
        if not lo <= int(v) <= hi:
            raise ValueError(f"value {dsl.short(v)} is out of range [{lo}, {hi}]")
    if otype in _BOOL_TYPES:
        return [bool(v) for v in values]
    if _is_float_type(otype):
        # Keep the spec's values as written (Android's JSON does); the storage dtype
        # rounds them when a HAL model is built.
        return [float(v) for v in values]
    return [int(v) for v in values]


def _plain_typed_values(values: list, otype: OperandType) -> list | None:
    """:func:`_typed_values` checked with numpy for a flat list of plain numbers (large
    constants load fast); None when some value needs a closer look."""
    arr = np.asarray(values) if values else np.zeros(0)
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        return None
    if otype in _BOOL_TYPES:
        return arr.astype(bool).tolist()
    if _is_float_type(otype):
        return [float(v) for v in values]
    if arr.dtype.kind == "f" and not (np.isfinite(arr).all() and (arr == np.trunc(arr)).all()):
        return None
    lo, hi = _int_range(otype)
    if arr.size and not (lo <= arr.min() and arr.max() <= hi):
        return None
    return [int(v) for v in values]


_BOOL_TYPES = (OperandType.BOOL, OperandType.TENSOR_BOOL8)


def _is_float_type(otype: OperandType) -> bool:
    return otype.name in dsl.FLOAT_TYPES


def _int_range(otype: OperandType) -> tuple[int, int]:
    try:
        info = np.iinfo(storage_dtype(otype))
    except HalError:  # OEM: no storage type, any int64
        info = np.iinfo(np.int64)
    return int(info.min), int(info.max)


def load_specs(paths: Iterable[str | Path]) -> Iterator[tuple[Path, list[TestModel] | SpecError]]:
    """Each spec file with its test models, or the error that stopped it (also for a
    spec that defines no test: an empty file adds nothing and must not pass unnoticed)."""
    for p in find_specs(paths):
        try:
            tests = load_spec(p)
            if not tests:
                raise SpecError("the spec defines no tests (no Example)", str(p))
            yield p, tests
        except SpecError as e:
            yield p, e
        except Exception as e:  # a loader bug must not cost the other specs their run
            yield p, SpecError(f"cannot load: {_described(e)}", str(p))


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - debugging aid
    import json

    for p, result in load_specs(argv or sys.argv[1:]):
        if isinstance(result, SpecError):
            print(result, file=sys.stderr)
            continue
        print(json.dumps({str(p): [t.to_json() for t in result]}, indent=1))
    return 0
