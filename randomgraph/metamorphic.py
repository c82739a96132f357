"""Metamorphic relations: equivalent models must give the driver equivalent results.

The differential check compares a driver with the reference. These relations compare the
driver with *itself*: the model is transformed into an equivalent one, both run on the
driver, and the results must agree after the known mapping — no oracle needed, so they
catch bugs that sit in one code path of a driver only (a layout, a lifetime, an
execution path) even where its numbers are within the criteria of the reference.

==============  =========================================================================
relation        transformation (and how the results map)
==============  =========================================================================
signedness      every TENSOR_QUANT8_ASYMM operand becomes TENSOR_QUANT8_ASYMM_SIGNED (values
                and zero points − 128), or the reverse; outputs differ by exactly 128 —
                the HAL requires identical results (except CAST, HASHTABLE_LOOKUP,
                LSH_PROJECTION, PAD_V2, QUANTIZED_16BIT_LSTM), so this one is exact
layout          a single layout-aware operation (CONV_2D, pooling, resize, ...) with its
                NHWC/NCHW flag flipped, its data input and output transposed (and
                TRANSPOSE_CONV_2D's output-shape vector permuted)
constants       every constant tensor made a model input; every model input made a
                constant (two variants)
paths           the same model on the asynchronous, fenced and burst paths
dynamic-shapes  the model outputs' dims left unspecified: the driver must report the
                same shapes and compute the same values
cache           prepared with compilation-cache files and a token, then prepared again
                from the cache (drivers that ask for cache files only); a driver may
                refuse its cache, but a model it restores must compute the same
==============  =========================================================================

Except for signedness the driver's two results are compared with the test's criteria (a
driver may legitimately pick different kernels for different layouts or paths). A
variant the driver does not support, or that needs a newer HAL than the driver has, is
not checked; a variant the driver fails on (rejects, crashes, hangs) is a violation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    OperandLifeTime,
    OperandType,
    OperationType,
    is_scalar_type,
    tensor_has_unspecified_dimensions,
)
from driver.validation import validate_model
from randomgraph.differential import (
    DiffResult,
    DriverCrash,
    DriverHang,
    DriverRun,
    Outcome,
    compare_outputs,
    copy_test,
    execute_prepared,
    run_on_driver,
    with_unknown_output_dims,
)
from randomgraph.testmodel import TestModel

L = OperandLifeTime
Op = OperationType
T = OperandType

RELATIONS = ("signedness", "layout", "constants", "paths", "dynamic-shapes", "cache")

SIGNEDNESS_EXCEPTIONS = frozenset(
    {Op.CAST, Op.HASHTABLE_LOOKUP, Op.LSH_PROJECTION, Op.PAD_V2, Op.QUANTIZED_16BIT_LSTM}
)

# Operations with an NHWC/NCHW flag (their first BOOL input): which inputs and outputs
# hold the layout-dependent data.
LAYOUT_OPERATIONS: dict[OperationType, tuple[tuple[int, ...], tuple[int, ...]]] = {
    op: ((0,), (0,))
    for op in (
        Op.CONV_2D,
        Op.DEPTHWISE_CONV_2D,
        Op.GROUPED_CONV_2D,
        Op.TRANSPOSE_CONV_2D,
        Op.AVERAGE_POOL_2D,
        Op.MAX_POOL_2D,
        Op.L2_POOL_2D,
        Op.RESIZE_BILINEAR,
        Op.RESIZE_NEAREST_NEIGHBOR,
        Op.DEPTH_TO_SPACE,
        Op.SPACE_TO_DEPTH,
        Op.BATCH_TO_SPACE_ND,
        Op.SPACE_TO_BATCH_ND,
        Op.INSTANCE_NORMALIZATION,
        Op.ROI_ALIGN,
        Op.ROI_POOLING,
    )
}
LAYOUT_OPERATIONS[Op.HEATMAP_MAX_KEYPOINT] = ((0,), ())


def _layout_shape_vectors(op) -> tuple[int, ...]:
    """Inputs of ``op`` that hold a 4-D shape as a vector in its layout: TRANSPOSE_CONV_2D's
    output shape (input 3 of its 9-input implicit-padding form)."""
    if op.type == Op.TRANSPOSE_CONV_2D and len(op.inputs) == 9:
        return (3,)
    return ()


_TO_NCHW = (0, 3, 1, 2)
_TO_NHWC = (0, 2, 3, 1)


@dataclass
class Violation:
    relation: str
    detail: str


@dataclass
class Variant:
    """One transformed model and how the base results map onto its results."""

    relation: str
    name: str
    test: TestModel | None = None  # None: the base model itself (on another path)
    map_outputs: Callable[[list[np.ndarray]], list[np.ndarray]] = list
    exact: bool = False
    path: str = "sync"
    cache: bool = False
    min_version: HalVersion = HalVersion.V1_0  # the HAL version the relation needs


# ---------------------------------------------------------------------------------------
# Transformations
# ---------------------------------------------------------------------------------------


def signedness_variant(test: TestModel) -> Variant | None:
    ops = test.operation_types()
    if any(op in SIGNEDNESS_EXCEPTIONS for op in ops):
        return None
    operands = [o for sg in [test.main, *test.referenced] for o in sg.operands]
    unsigned = any(o.type == T.TENSOR_QUANT8_ASYMM for o in operands)
    signed = any(o.type == T.TENSOR_QUANT8_ASYMM_SIGNED for o in operands)
    if not unsigned and not signed:
        return None
    src, dst, shift = (
        (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, -128)
        if unsigned
        else (T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_ASYMM, 128)
    )
    t = copy_test(test)
    for sg in [t.main, *t.referenced]:
        for o in sg.operands:
            if o.type == src:
                o.type = dst
                o.zero_point += shift
                o.data = [int(v) + shift for v in o.data]
    converted = [
        k for k, i in enumerate(test.main.output_indexes) if test.main.operands[i].type == src
    ]
    dtype = np.int8 if dst == T.TENSOR_QUANT8_ASYMM_SIGNED else np.uint8

    def map_outputs(outs: list[np.ndarray]) -> list[np.ndarray]:
        return [
            (a.astype(np.int16) + shift).astype(dtype) if k in converted else a
            for k, a in enumerate(outs)
        ]

    return Variant("signedness", f"{src.name} -> {dst.name}", t, map_outputs, exact=True)


def _first_bool_input(test: TestModel, op) -> int | None:
    for k, i in enumerate(op.inputs):
        if test.main.operands[i].type == T.BOOL:
            return k
    return None


def layout_variant(test: TestModel) -> Variant | None:
    if len(test.main.operations) != 1 or test.referenced:
        return None
    op = test.main.operations[0]
    spec = LAYOUT_OPERATIONS.get(op.type)
    if spec is None:
        return None
    k = _first_bool_input(test, op)
    if k is None:
        return None
    flag = test.main.operands[op.inputs[k]]
    if flag.lifetime not in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE) or not flag.data:
        return None
    nchw = bool(flag.data[0])
    perm = _TO_NHWC if nchw else _TO_NCHW
    ins, outs = spec
    t = copy_test(test)
    t.main.operands[op.inputs[k]].data = [not nchw]
    for j in _layout_shape_vectors(op):
        o = t.main.operands[op.inputs[j]]
        if len(o.data or ()) != 4:
            return None  # a shape the test does not hold cannot be moved
        o.data = [o.data[p] for p in perm]
    for j in ins:
        o = t.main.operands[op.inputs[j]]
        if len(o.dimensions) != 4:
            return None
        if o.data:
            o.data = np.transpose(o.array(), perm).reshape(-1).tolist()
        o.dimensions = [o.dimensions[p] for p in perm]
    moved = []
    for j in outs:
        idx = op.outputs[j]
        o = t.main.operands[idx]
        if len(o.dimensions) != 4 or idx not in t.main.output_indexes:
            return None
        o.dimensions = [o.dimensions[p] for p in perm]
        o.data = []
        moved.append(t.main.output_indexes.index(idx))

    def map_outputs(base: list[np.ndarray]) -> list[np.ndarray]:
        return [np.transpose(a, perm) if k in moved else a for k, a in enumerate(base)]

    return Variant("layout", "NCHW -> NHWC" if nchw else "NHWC -> NCHW", t, map_outputs)


def constants_variants(test: TestModel) -> Iterator[Variant]:
    main = test.main
    consts = [
        i
        for i, o in enumerate(main.operands)
        if o.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
        and not is_scalar_type(o.type)
        and o.data
    ]
    if consts:
        t = copy_test(test)
        for i in consts:
            t.main.operands[i].lifetime = L.SUBGRAPH_INPUT
        t.main.input_indexes = [*t.main.input_indexes, *consts]
        yield Variant("constants", "constant tensors as inputs", t)
    feeds = [i for i in main.input_indexes if main.operands[i].data]
    if feeds and len(feeds) == len(main.input_indexes):
        t = copy_test(test)
        for i in feeds:
            o = t.main.operands[i]
            if tensor_has_unspecified_dimensions(o.type, o.dimensions):
                return  # a constant needs fully specified dims
            o.lifetime = L.CONSTANT_COPY
        t.main.input_indexes = []
        yield Variant("constants", "inputs as constants", t)


def dynamic_shapes_variant(test: TestModel) -> Variant | None:
    t = with_unknown_output_dims(test)
    if t is None:
        return None
    # A driver reports the shapes it computed only from HAL 1.2 (before, a request must
    # specify every output's dims): an older driver has no such relation to keep.
    return Variant("dynamic-shapes", "unspecified output dims", t, min_version=HalVersion.V1_2)


def variants(test: TestModel, relations: Sequence[str] = RELATIONS) -> Iterator[Variant]:
    """Every applicable variant of ``test``, relation by relation."""
    for relation in relations:
        if relation == "signedness":
            v = signedness_variant(test)
            if v is not None:
                yield v
        elif relation == "layout":
            v = layout_variant(test)
            if v is not None:
                yield v
        elif relation == "constants":
            yield from constants_variants(test)
        elif relation == "paths":
            for path in ("async", "fenced", "burst"):
                yield Variant("paths", f"{path} execution", path=path)
        elif relation == "dynamic-shapes":
            v = dynamic_shapes_variant(test)
            if v is not None:
                yield v
        elif relation == "cache":
            yield Variant("cache", "prepared from the compilation cache", cache=True)
        else:
            raise ValueError(f"unknown relation {relation!r}: one of {', '.join(RELATIONS)}")


# ---------------------------------------------------------------------------------------
# Running them
# ---------------------------------------------------------------------------------------


def check_relations(
    checker, test: TestModel, base: DiffResult, relations: Sequence[str] = RELATIONS
) -> Violation | None:
    """The first relation ``checker``'s driver breaks on ``test`` (whose differential
    result ``base`` passed, so ``base.actual`` holds the driver's outputs), or None."""
    if base.actual is None:
        return None
    for v in variants(test, relations):
        violation = check_variant(checker, test, base, v)
        if violation is not None:
            return violation
    return None


def check_variant(checker, test: TestModel, base: DiffResult, v: Variant) -> Violation | None:
    session = checker.session
    want = v.map_outputs(list(base.actual))
    target = v.test or test
    if v.test is None:
        model, inputs = test.to_hal_model()
        need = validate_model(model)
    else:
        try:
            model, inputs = v.test.to_hal_model()
            need = validate_model(model)
        except (HalError, ValueError, TypeError, OverflowError):
            return None  # not expressible: the relation does not apply
    need = max(need, v.min_version)
    if v.path == "fenced" and any(
        tensor_has_unspecified_dimensions(o.type, o.dimensions)
        for o in (target.main.operands[i] for i in target.main.output_indexes)
    ):
        return None  # executeFenced needs fully specified output dims
    if v.cache:
        run = run_from_cache(session, model, inputs, want, need=need)
        if run is None:
            return None
    else:
        run = run_on_driver(session, model, inputs, want, need=need, path=v.path)
    if run.outcome == Outcome.SKIPPED:
        return None
    if run.outcome != Outcome.PASS:
        return Violation(v.relation, f"{v.name}: {run.outcome.label}: {run.detail}")
    if v.exact:
        bad = [
            k
            for k, (a, e) in enumerate(zip(run.outputs, want))
            if a.shape != e.shape or not np.array_equal(a, e)
        ]
        if bad:
            k = bad[0]
            a, e = run.outputs[k], want[k]
            diff = int(np.count_nonzero(a != e)) if a.shape == e.shape else f"shape {list(a.shape)}"
            return Violation(
                v.relation,
                f"{v.name}: output {k} differs from the base model's result mapped "
                f"exactly ({diff} of {e.size} elements)",
            )
        return None
    mismatches = compare_outputs(target, base.criteria, run.outputs, want)
    if mismatches:
        return Violation(
            v.relation,
            f"{v.name}: results differ from the base model's: {mismatches[0]} "
            f"[criteria {base.criteria}]",
        )
    return None


def run_from_cache(
    session, model, inputs, expected: Sequence[np.ndarray], *, need: HalVersion
) -> DriverRun | None:
    """Prepare with cache files, prepare again from them, execute. None when the driver
    needs no cache files, or is too old, or declines to cache or restore (which the HAL
    allows)."""
    if session.version < max(need, HalVersion.V1_2):
        return None
    device = session.device

    def body(call) -> DriverRun | None:
        status, n_model, n_data = call(device.get_number_of_cache_files_needed)
        if status != ErrorStatus.NONE or n_model + n_data == 0:
            return None
        token = os.urandom(32)
        fds = [os.memfd_create(f"nnfuzz-cache-{k}") for k in range(n_model + n_data)]
        try:
            status, prepared = call(
                device.prepare_model,
                model,
                model_cache=fds[:n_model],
                data_cache=fds[n_model:],
                token=token,
            )
            if status != ErrorStatus.NONE or prepared is None:
                return None  # the differential run already judged plain preparation
            for fd in fds:
                os.lseek(fd, 0, os.SEEK_SET)  # as the runtime hands them over afresh
            status, restored = call(
                device.prepare_model_from_cache, None, fds[:n_model], fds[n_model:], token
            )
        finally:
            for fd in fds:
                os.close(fd)
        if status != ErrorStatus.NONE or restored is None:
            return None
        return execute_prepared(call, device, restored, model, inputs, expected)

    try:
        return session.run(body)
    except DriverHang as e:
        return DriverRun(Outcome.HANG, "cache", str(e), signature="hang")
    except DriverCrash as e:
        return DriverRun(Outcome.CRASH, "cache", str(e), signature=e.kind)


__all__ = [
    "LAYOUT_OPERATIONS",
    "RELATIONS",
    "SIGNEDNESS_EXCEPTIONS",
    "Variant",
    "Violation",
    "check_relations",
    "check_variant",
    "variants",
]
