#!/usr/bin/env python3
"""Generate the fuzz targets' seed corpora (``corpus/<target>/``) and ``fuzz/nnapi.dict``.

    python tools/make_corpus.py                 # every target, into corpus/
    python tools/make_corpus.py model request   # some targets
    python tools/make_corpus.py --spec DIR      # also seed from spec files (.mod.py)

Seeds come from valid models: the operation examples of the test suite
(``tests/operations/examples_*.py``; this tool imports them from the repo checkout, so it
is a developer tool, not part of the package), the fuzz fixtures, and spec files
(``corpus/specs/`` when present, plus ``--spec`` paths). For the ``model`` target every
operation is represented (up to two type signatures each) and variants move constants to
a pool (CONSTANT_REFERENCE), turn on relaxed computation, and express each model at the
lowest HAL version it needs. Seeds are small (a few KiB at most) and named after what
they hold; the tool replaces the ``seed-*`` files of each target it regenerates and
leaves every other file (inputs added by merges) alone.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import struct
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from driver import wire  # noqa: E402
from driver.hal.types import (  # noqa: E402
    DataLocation,
    HalError,
    Memory,
    Model,
    OperandLifeTime,
    OperandType,
    Request,
    RequestArgument,
)
from driver.validation import validate_model  # noqa: E402

L = OperandLifeTime
MAX_SEED_BYTES = 8192
PER_OPERATION = 2
PER_SPEC_FILE = 4


class _Slot:
    """A placeholder pool handle: encoding numbers distinct handles 0, 1, ... in order."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80]


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------


def example_models() -> Iterator[tuple[str, Model]]:
    """Up to PER_OPERATION examples per operation, with distinct operand types."""
    from tests.operations.examples import all_examples

    seen: dict[int, set] = defaultdict(set)
    for ex in sorted(all_examples(), key=lambda e: (e.op, e.name)):
        model, _ = ex.model()
        types = tuple(o.type for o in model.main.operands)
        if types in seen[ex.op] or len(seen[ex.op]) >= PER_OPERATION:
            continue
        seen[ex.op].add(types)
        yield ex.name, model


def spec_models(paths: list[Path]) -> Iterator[tuple[str, Model]]:
    from randomgraph.spec.loader import find_specs, load_spec

    for path in find_specs(paths):
        for test in load_spec(path)[:PER_SPEC_FILE]:
            model, _, _ = test.to_hal()
            yield f"spec-{test.name}", model


def fixture_models() -> Iterator[tuple[str, Model]]:
    from fuzz.fixtures import fixture_models as fixtures

    yield from ((f"fixture-{name}", model) for name, model in fixtures())


def as_reference(model: Model) -> Model | None:
    """Every CONSTANT_COPY operand moved to pool 0 at the same offset; the fuzz
    targets' pools hold ``operandValues`` repeated, so values stay the same."""
    if not model.operand_values:
        return None
    pool = Memory("ashmem", len(model.operand_values), _Slot())

    def move(sg):
        ops = tuple(
            replace(o, lifetime=L.CONSTANT_REFERENCE, location=replace(o.location, pool_index=0))
            if o.lifetime == L.CONSTANT_COPY
            else o
            for o in sg.operands
        )
        return replace(sg, operands=ops)

    return replace(
        model,
        main=move(model.main),
        referenced=tuple(move(sg) for sg in model.referenced),
        pools=(pool,),
    )


def as_relaxed(model: Model) -> Model | None:
    uses_float32 = any(o.type == OperandType.TENSOR_FLOAT32 for o in model.main.operands)
    if model.relaxed or not uses_float32:
        return None
    return replace(model, relax_computation_float32_to_float16=True)


def _with_placeholder_pools(model: Model) -> Model:
    """Real pools (builder-made) become placeholders so encoding numbers them 0, 1, ..."""
    if not model.pools:
        return model
    return replace(model, pools=tuple(Memory(p.name, p.size, _Slot()) for p in model.pools))


def model_seeds(spec_paths: list[Path]) -> Iterator[tuple[str, bytes]]:
    sources: list[Iterator[tuple[str, Model]]] = [example_models(), fixture_models()]
    if spec_paths:
        sources.append(spec_models(spec_paths))
    for source in sources:
        for n, (name, model) in enumerate(source):
            yield name, model
            # Variants on a subset keep the corpus small while covering every lifetime.
            if n % 6 == 0 and (ref := as_reference(model)) is not None:
                yield f"{name}-reference", ref
            if n % 10 == 0 and (relaxed := as_relaxed(model)) is not None:
                yield f"{name}-relaxed", relaxed


def encode_valid(items: Iterator[tuple[str, Model]]) -> Iterator[tuple[str, bytes]]:
    for name, model in items:
        model = _with_placeholder_pools(model)
        data = wire.encode_model(model).data
        if len(data) > MAX_SEED_BYTES:
            continue
        # Only valid models seed: the mutators make the invalid ones. (Pools are checked
        # by the targets; here a placeholder handle is not mappable.)
        try:
            validate_model(replace(model, pools=()) if model.pools else model)
        except HalError as e:
            if not model.pools or "pool" not in str(e):
                print(f"skipping invalid seed {name}: {e}", file=sys.stderr)
                continue
        yield name, data


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def _request_for(model: Model, rng_values: Callable[[int, int], bytes]):
    """A valid request for ``model`` (inputs in pool 0, outputs in pool 1) and the bytes
    of pool 0 (the request target's trailing pool bytes)."""
    from driver.hal.types import is_scalar_type, non_extension_size_of_data

    main = model.main
    data = bytearray()
    args = []
    for idx in main.input_indexes:
        o = main.operands[idx]
        dims = tuple(d or 2 for d in o.dimensions) if o.dimensions else (2, 3)
        if is_scalar_type(o.type):
            dims = ()
        size = non_extension_size_of_data(o.type, dims) if dims or is_scalar_type(o.type) else 0
        value = rng_values(o.type, size)
        offset = len(data)
        data += value
        data += b"\0" * (-len(data) % 8)
        given = () if is_scalar_type(o.type) or (o.dimensions and 0 not in o.dimensions) else dims
        args.append(RequestArgument(False, DataLocation(0, offset, size), given))
    outs = []
    offset = 0
    for idx in main.output_indexes:
        o = main.operands[idx]
        size = non_extension_size_of_data(o.type, o.dimensions) or 256
        outs.append(RequestArgument(False, DataLocation(1, offset, size), ()))
        offset += size + (-size % 8)
    pools = (Memory("ashmem", max(len(data), 1), _Slot()), Memory("ashmem", offset, _Slot()))
    return Request(tuple(args), tuple(outs), pools), bytes(data)


def _values(type_code: int, size: int) -> bytes:
    """Small, valid-looking input bytes (1.0-ish floats, small ints, true booleans)."""
    import numpy as np

    from driver.operations.base import array_to_bytes, storage_dtype

    if size == 0:
        return b""
    dt = storage_dtype(type_code)
    n = size // max(dt.itemsize, 1)
    if dt == np.bool_:
        arr = np.ones(n, dtype=np.bool_)
    elif np.issubdtype(dt, np.floating):
        arr = (np.arange(n, dtype=np.float32) % 5 - 2) * 0.5
    else:
        arr = np.arange(n) % 5 + 1
    return array_to_bytes(arr, type_code)


def request_seeds() -> Iterator[tuple[str, bytes]]:
    from fuzz.fixtures import FIXTURES, fixture_models
    from fuzz.targets.request import PATHS

    for f, (name, model) in enumerate(fixture_models()):
        assert FIXTURES[f][0] == name
        request, pool = _request_for(model, _values)
        message = wire.encode_request(request).data
        for p, path in enumerate(PATHS):
            yield f"{name}-{path}", bytes([f | p << 4]) + message + pool
        yield f"{name}-sync-measure", bytes([f | 1 << 6]) + message + pool
        # Variants: every output too small; one input omitted; an output in a
        # driver-managed buffer token (rejected: no such buffer).
        small = replace(
            request,
            outputs=tuple(
                replace(a, location=replace(a.location, length=1)) for a in request.outputs
            ),
        )
        yield f"{name}-small-outputs", bytes([f]) + wire.encode_request(small).data + pool
        if request.inputs:
            omitted = replace(request, inputs=(RequestArgument(True), *request.inputs[1:]))
            yield f"{name}-omitted", bytes([f]) + wire.encode_request(omitted).data + pool


# ---------------------------------------------------------------------------------------
# Compilation caches
# ---------------------------------------------------------------------------------------


def cache_seeds() -> Iterator[tuple[str, bytes]]:
    """Genuine caches of the fixture models (as the raw-mode input), their bodies (as the
    forged-mode input), and a few broken ones (wrong file counts, another token)."""
    import os

    from driver import cache as compilation_cache
    from driver.device import ReferenceDevice
    from fuzz.fixtures import fixture_models
    from fuzz.targets.cache import FORGED, build

    dev = ReferenceDevice()
    header = struct.calcsize("<4sHBB32sQ32s32sH") + len(dev.cache_identity.encode())
    for k, (name, model) in enumerate(fixture_models()):
        token = hashlib.sha256(name.encode()).digest()
        fds = [os.memfd_create("seed"), os.memfd_create("seed")]
        try:
            status, _ = dev.prepare_model(
                model, model_cache=[fds[0]], data_cache=[fds[1]], token=token
            )
            assert status == 0, dev.last_error
            files = [os.pread(fd, 1 << 20, 0) for fd in fds]
        finally:
            for fd in fds:
                os.close(fd)
        yield f"{name}", build(0, token, [files[0]], [files[1]])
        yield f"{name}-forged", build(FORGED, token, [files[0][header:]], [files[1][header:]])
        if k == 0:
            yield f"{name}-swapped", build(0, token, [files[1]], [files[0]])
            yield f"{name}-no-files", build(0, token, [], [])
            yield f"{name}-other-token", build(0, bytes(32), [files[0]], [files[1]])
            yield f"{name}-deadline", build(0x20, token, [files[0]], [files[1]])
    del compilation_cache


# ---------------------------------------------------------------------------------------
# Choice-stream targets (execute, memory)
# ---------------------------------------------------------------------------------------


def recorded_bytes(run: Callable[[object], None], seed: int) -> bytes:
    """The input that makes a choice-stream target take the decisions ``PrngSource(seed)``
    takes: every draw ``v`` in ``[0, n)`` as the big-endian bytes a ``ByteSource`` reads
    for ``n`` (draws with ``n == 1`` consume nothing)."""
    from randomgraph.choices import PrngSource

    class Recording(PrngSource):
        def __init__(self, seed: int) -> None:
            super().__init__(seed)
            self.out = bytearray()

        def _draw(self, n: int) -> int:
            v = super()._draw(n)
            self.out += v.to_bytes(((n - 1).bit_length() + 7) // 8, "big")
            return v

    source = Recording(seed)
    run(source)
    return bytes(source.out)


def execute_seeds() -> Iterator[tuple[str, bytes]]:
    """Streams whose generated graphs together use every operation the generator makes
    (searching PRNG seeds under the target's own configuration), mostly unmutated."""
    from driver.hal.types import OperationType
    from fuzz.targets import execute
    from randomgraph.choices import PrngSource
    from randomgraph.generator import GenerationError, generate_with

    wanted = set(range(len(OperationType) - 1))
    for seed in range(6000):
        if not wanted:
            break
        source = PrngSource(seed)
        config = replace(execute.CONFIG, num_ops=1 + source.draw(execute.CONFIG.num_ops))
        try:
            graph = generate_with(source, config)
        except GenerationError:
            continue
        ops = {int(t) for t in graph.operation_types} & wanted
        if not ops:
            continue
        wanted -= ops
        data = recorded_bytes(execute.run, seed)
        if len(data) <= MAX_SEED_BYTES:
            names = "_".join(sorted(OperationType(t).name.lower() for t in ops))
            yield f"{names}-{seed}", data
    if wanted:
        missing = ", ".join(OperationType(t).name for t in sorted(wanted))
        print(f"execute: no generated graph uses {missing}", file=sys.stderr)


def memory_seeds() -> Iterator[tuple[str, bytes]]:
    from fuzz.targets import memory

    for seed in range(48):
        yield f"session-{seed}", recorded_bytes(memory.run, seed)


# ---------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[list[Path]], Iterator[tuple[str, bytes]]]] = {
    "model": lambda specs: encode_valid(model_seeds(specs)),
    "request": lambda specs: request_seeds(),
    "execute": lambda specs: execute_seeds(),
    "cache": lambda specs: cache_seeds(),
    "memory": lambda specs: memory_seeds(),
}


def write_seeds(target: str, seeds: Iterator[tuple[str, bytes]], out: Path) -> int:
    directory = out / target
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("seed-*"):
        old.unlink()
    written: set[bytes] = set()
    for name, data in seeds:
        digest = hashlib.sha1(data).digest()
        if digest in written:
            continue
        written.add(digest)
        (directory / f"seed-{_slug(name)}").write_bytes(data)
    return len(written)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("targets", nargs="*", help=f"targets (default: {' '.join(GENERATORS)})")
    p.add_argument("--out", type=Path, default=ROOT / "corpus", help="corpus root")
    p.add_argument("--spec", type=Path, action="append", default=[], help="spec files/dirs")
    p.add_argument("--dict", type=Path, default=ROOT / "fuzz" / "nnapi.dict", help="dict path")
    args = p.parse_args(argv)
    targets = args.targets or list(GENERATORS)
    specs = list(args.spec)
    if (ROOT / "corpus" / "specs").is_dir():
        specs.append(ROOT / "corpus" / "specs")
    for t in targets:
        if t not in GENERATORS:
            p.error(f"unknown target {t!r}")
        n = write_seeds(t, GENERATORS[t](specs), args.out)
        print(f"{t}: {n} seeds in {args.out / t}")
    from fuzz.mutators import render_dictionary

    args.dict.write_text(render_dictionary())
    print(f"dictionary: {args.dict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
