"""Load a ``.mod.py`` spec file and expand it into named test models, as Android's test
generator does.

Spec files are Python programs and are executed as such: **the loader runs trusted spec
files; it is not a sandbox.** Only load specs you would run as code.

    for test in load_spec("specs/V1_2/add_v1_2.mod.py"):
        model, inputs, expected = test.to_hal()
"""

from __future__ import annotations

import copy
import itertools
import re
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path

from driver.hal.types import (
    HalVersion,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
)
from randomgraph.criteria import CRITERIA_SETS
from randomgraph.spec import dsl
from randomgraph.spec.dsl import SpecContext, SpecError
from randomgraph.testmodel import TestModel, TestOperand, TestOperation, TestSubgraph

L = OperandLifeTime
_LOCK = threading.Lock()  # the DSL keeps per-load state in a module global

SPEC_SUFFIX = ".mod.py"


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


def _read_spec_text(path: Path) -> str:
    """The text of the spec file at ``path``; :class:`SpecError` when it cannot be read
    or is not UTF-8 (Python source, as Android's generator reads it)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror or e}", str(path)) from None
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
    with _LOCK:
        dsl.set_context(c)
        try:
            _execute(text, c)
            tests = list(_expand_all(c))
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
    namespace = dsl.dsl_namespace()
    namespace.update({"__name__": "__spec__", "__file__": c.path})
    try:
        exec(code, namespace)
    except SpecError:
        raise
    except Exception as e:
        raise SpecError(f"{type(e).__name__}: {e}", c.path, _spec_line(e, c.path)) from None


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


def _expand_all(c: SpecContext) -> Iterator[TestModel]:
    for ex in _combine_examples(c.examples):
        yield from _expand_example(c, ex)


def _expand_example(c: SpecContext, ex: dsl.Example) -> Iterator[TestModel]:
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
    for feed in ex.feedDicts:
        try:
            ex.model.Feed(feed)
        except KeyError as e:
            raise c.error(f"Example has no value for operand {e.args[0]}", ex.line) from None
        for combination in itertools.product(*ex.variations):
            model = copy.deepcopy(ex.model)
            try:
                for variation in combination:
                    model = variation.ApplyTo(model)
            except dsl.SkipVariation:
                continue
            except SpecError:
                raise
            except Exception as e:
                raise c.error(
                    f"applying variations {[v.name for v in combination]}: {type(e).__name__}: {e}",
                    ex.line,
                ) from None
            names = [v.name for v in combination]
            test_name = dsl.unique_name(
                dsl.joined(c.spec_name, model.name, ex.name, *names), c.test_names, sep="_", start=1
            )
            version = c.version_overrides.get(test_name, model.version)
            model.Compile()
            yield _to_test_model(c, ex, model, test_name, version)


def _to_test_model(
    c: SpecContext, ex: dsl.Example, model: dsl.Model, name: str, version: str
) -> TestModel:
    subgraphs = [_subgraph(c, model, main=True)]
    subgraphs += [_subgraph(c, m, main=False) for m in model.referenced_models or []]
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


def _subgraph(c: SpecContext, model: dsl.Model, *, main: bool) -> TestSubgraph:
    index = {id(o): k for k, o in enumerate(model.operands)}
    by_name = {o.name: k for k, o in enumerate(model.operands)}
    operands = []
    for o in model.operands:
        try:
            otype = OperandType[o.type.type]
        except KeyError:
            raise c.error(f"operand {o.name}: unknown type {o.type.type!r}", o.line) from None
        lifetime = _operand_lifetime(o)
        data = _operand_data(c, o, otype, lifetime, main)
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
    c, o: dsl.Operand, otype: OperandType, lifetime: OperandLifeTime, main: bool
) -> list:
    if lifetime == L.SUBGRAPH:
        return [int(o.value[0])]
    if lifetime in (L.TEMPORARY_VARIABLE, L.NO_VALUE):
        return []
    if o.value is None:
        if lifetime in (L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT) and not main:
            return []
        raise c.error(f"operand {o.name} has no value", o.line)
    values = list(o.value)
    expected = 1 if o.type.IsScalar() else o.type.GetNumberOfElements()
    if not values and lifetime == L.SUBGRAPH_INPUT:
        return []  # an omitted (optional) input, as in Android's CTS
    if len(values) != expected:
        raise c.error(
            f"operand {o.name} ({o.type.type} {o.type.dimensions}) needs {expected} values, got {len(values)}",
            o.line,
        )
    if otype in (OperandType.BOOL, OperandType.TENSOR_BOOL8):
        return [bool(v) for v in values]
    if o.type.IsFloat():
        # Keep the spec's values as written (Android's JSON does); the storage dtype
        # rounds them when a HAL model is built.
        return [float(v) for v in values]
    return [int(v) for v in values]


def load_specs(paths: Iterable[str | Path]) -> Iterator[tuple[Path, list[TestModel] | SpecError]]:
    """Each spec file with its test models, or the error that stopped it."""
    for p in find_specs(paths):
        try:
            yield p, load_spec(p)
        except SpecError as e:
            yield p, e


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - debugging aid
    import json

    for p, result in load_specs(argv or sys.argv[1:]):
        if isinstance(result, SpecError):
            print(result, file=sys.stderr)
            continue
        print(json.dumps({str(p): [t.to_json() for t in result]}, indent=1))
    return 0
