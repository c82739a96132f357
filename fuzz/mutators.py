"""Structure-aware mutation of wire-format models and requests (libFuzzer custom mutators).

libFuzzer's byte mutations almost never get past the wire decoder's counts and lengths,
so most of them test the decoder and nothing behind it. A custom mutator decodes the
input, changes the *structure* — one operand field, an operation's type or operand list,
the input/output lists, a constant's bytes, a pool's size or name, the extension map, a
referenced subgraph — and re-encodes it, so the mutated input reaches validation and the
device with exactly one thing wrong (or, as often, with something valid but unusual).
Some mutations stay bytewise (``atheris.Mutate``), which keeps the decoder itself under
test and lets the fuzzer escape the encoder's domain.

The same operators serve the ``execute`` target, which applies one of them to a valid
model (:func:`mutate_model` with ``count=1``), and the tests.

Values are drawn from "interesting" sets (boundaries of each field's HIDL type, codes
just past the last defined enum value, NaN/inf/denormal scales) and kept inside the
wire encoding's domain (uint32 indexes and dims, int32 zero points, float32 scales,
rank ≤ 32), so re-encoding only fails on limits; then the mutator falls back to bytes.
"""

from __future__ import annotations

import math
import random
import struct
import sys
from collections.abc import Callable
from dataclasses import replace

from driver import wire
from driver.hal.types import (
    BufferToken,
    ExtensionNameAndPrefix,
    Memory,
    Model,
    Operand,
    Operation,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
)

U32_MAX = 0xFFFFFFFF

OPERAND_TYPE_CODES = (*range(16), 16, 17, 10000, 10001, 10002, 0xFFFF, 0x10000, 0x10003, U32_MAX)
OPERATION_TYPE_CODES = (*range(102), 102, 10000, 10001, 0x10000, 0x10001, U32_MAX)
LIFETIME_CODES = (*range(7), 7, 8, U32_MAX)
INTERESTING_U32 = (0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 64, 127, 128, 255, 256, 1023, 1024,
                   4095, 4096, 65535, 65536, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, U32_MAX)  # fmt: skip
INTERESTING_DIMS = (0, 1, 2, 3, 4, 5, 8, 16, 255, 256, 1000, 65535, 65536, 0x7FFFFFFF, U32_MAX)
INTERESTING_I32 = (0, 1, -1, 2, 127, 128, 129, 255, 256, -127, -128, -129, 32767, 32768,
                   -32768, 65535, 65536, 0x7FFFFFFF, -0x80000000)  # fmt: skip
INTERESTING_F32 = (0.0, -0.0, 1.0, -1.0, 0.5, 0.25, 2.0, 1e-45, 1.17549435e-38, 1e-8, 1e-3,
                   3.4028234663852886e38, math.inf, -math.inf, math.nan, 255.0, 1 / 128)  # fmt: skip
MEMORY_NAMES = ("ashmem", "mmap_fd", "hardware_buffer_blob", "hardware_buffer", "", "ashmem\0")
EXTENSION_NAMES = ("com.example.ext", "com.example.other", "", "a" * 40)


class _Handle:
    """A stand-in for a pool handle while a message is decoded for mutation: encoding
    gives one handle index per distinct object, so pools keep sharing what they shared."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _placeholder_resolver() -> wire.Resolver:
    made: dict[int, _Handle] = {}

    def resolve(handle_index: int, name: str, size: int) -> Memory:
        h = made.get(handle_index)
        if h is None:
            h = made[handle_index] = _Handle(handle_index)
        return Memory(name, size, h)

    return resolve


class SourceRandom(random.Random):
    """A :class:`random.Random` whose every draw comes from a choice source
    (:mod:`randomgraph.choices`): the operators here then take their decisions from a
    fuzzer's bytes (``ByteSource``), deterministically, 0 bytes meaning the simplest."""

    def __init__(self, source) -> None:
        self._source = source
        super().__init__(0)

    def seed(self, *args, **kwargs) -> None:  # the source is the only state
        pass

    def random(self) -> float:
        return self._source.draw(1 << 53) / (1 << 53)

    def getrandbits(self, k: int) -> int:
        return self._source.draw(1 << k) if k > 0 else 0


def _pick(rng: random.Random, seq):
    return seq[rng.randrange(len(seq))]


def _u32(rng: random.Random, near: int | None = None) -> int:
    r = rng.random()
    if near is not None and r < 0.4:
        return max(0, min(U32_MAX, near + rng.choice((-2, -1, 1, 2))))
    if r < 0.8:
        return _pick(rng, INTERESTING_U32)
    return rng.getrandbits(32)


def _pool_size(rng: random.Random, size: int) -> int:
    """A pool size: near the old one, a boundary, or beyond 32 bits (the field is u64)."""
    if rng.random() < 0.05:
        return _pick(rng, (1 << 32, 1 << 40, 2**64 - 1))
    return _u32(rng, size)


def _two_positions(rng: random.Random, n: int) -> tuple[int, int]:
    """Two different positions in range(n), n >= 2. (``Random.sample`` redraws until the
    second differs from the first: forever once an exhausted source only gives zeros.)"""
    i = rng.randrange(n)
    return i, (i + 1 + rng.randrange(n - 1)) % n


def _index(rng: random.Random, n: int) -> int:
    """An index, in range most of the time."""
    if n and rng.random() < 0.75:
        return rng.randrange(n)
    return _pick(rng, (n, n + 1, U32_MAX, 0x7FFFFFFF, 0))


def _f32(rng: random.Random) -> float:
    if rng.random() < 0.7:
        return _pick(rng, INTERESTING_F32)
    return struct.unpack("<f", struct.pack("<f", rng.uniform(-4.0, 4.0)))[0]


def _bytes_mutation(rng: random.Random, data: bytes, max_len: int = 4096) -> bytes:
    b = bytearray(data)
    op = rng.randrange(5)
    if op == 0 and b:  # flip a bit
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif op == 1 and b:  # an interesting 4-byte value at a 4-aligned offset
        i = rng.randrange(0, max(1, len(b) - 3), 4) if len(b) >= 4 else 0
        v = _pick(rng, (*INTERESTING_U32, *(struct.unpack("<I", struct.pack("<f", f))[0]
                                             for f in (math.nan, math.inf, -1.0, 0.0))))  # fmt: skip
        b[i : i + 4] = struct.pack("<I", v)[: len(b) - i]
    elif op == 2:  # shrink
        del b[rng.randrange(len(b) + 1) :]
    elif op == 3 and len(b) < max_len:  # grow
        b += bytes(rng.getrandbits(8) for _ in range(rng.choice((1, 2, 4, 8, 16))))
    elif b:  # random byte
        b[rng.randrange(len(b))] = rng.getrandbits(8)
    return bytes(b)


# ---------------------------------------------------------------------------------------
# Operand, operation and subgraph operators
# ---------------------------------------------------------------------------------------


def _mutate_dims(rng: random.Random, dims: tuple[int, ...]) -> tuple[int, ...]:
    d = list(dims)
    op = rng.randrange(6)
    if op <= 1 and d:
        d[rng.randrange(len(d))] = _pick(rng, INTERESTING_DIMS)
    elif op == 2 and d:
        i = rng.randrange(len(d))
        d[i] = max(0, min(U32_MAX, d[i] + rng.choice((-1, 1))))
    elif op == 3 and len(d) < wire.MAX_RANK:
        d.insert(rng.randrange(len(d) + 1), _pick(rng, (1, 2, 0, 3)))
    elif op == 4 and d:
        del d[rng.randrange(len(d))]
    else:
        d = [] if d else [_pick(rng, (1, 2, 0))]
    return tuple(d)


OPERAND_FIELDS = (
    "type",
    "dimensions",
    "scale",
    "zero_point",
    "lifetime",
    "location",
    "number_of_consumers",
    "extra_params",
    "fresh_dims",
)


def mutate_operand(
    rng: random.Random, o: Operand, n_pools: int, n_values: int, field: str | None = None
) -> Operand:
    """One field of ``o`` changed (``field`` names it, one of :data:`OPERAND_FIELDS`;
    by default ``rng`` picks)."""
    if field is None:
        field = _pick(rng, OPERAND_FIELDS)
    if field == "type":
        return replace(o, type=_pick(rng, OPERAND_TYPE_CODES))
    if field == "dimensions":
        return replace(o, dimensions=_mutate_dims(rng, o.dimensions))
    if field == "scale":
        return replace(o, scale=_f32(rng))
    if field == "zero_point":
        return replace(o, zero_point=_pick(rng, INTERESTING_I32))
    if field == "lifetime":
        return replace(o, lifetime=_pick(rng, LIFETIME_CODES))
    if field == "location":
        loc = o.location
        which = rng.randrange(3)
        if which == 0:
            loc = replace(loc, pool_index=_index(rng, max(n_pools, 1)))
        elif which == 1:
            loc = replace(loc, offset=_u32(rng, loc.offset if rng.random() < 0.5 else n_values))
        else:
            loc = replace(loc, length=_u32(rng, loc.length))
        return replace(o, location=loc)
    if field == "number_of_consumers":
        return replace(o, number_of_consumers=_u32(rng, o.number_of_consumers))
    if field == "extra_params":
        r = rng.randrange(3)
        if r == 0:
            return replace(o, extra_params=None)
        if r == 1:
            n = rng.choice((0, 1, 2, 3, 4)) if rng.random() < 0.5 else max(o.dimensions or (1,))
            n = min(n, 64)
            scales = tuple(_f32(rng) if rng.random() < 0.2 else 0.5 for _ in range(n))
            ch = rng.randrange(max(1, len(o.dimensions) + 1)) if rng.random() < 0.8 else _u32(rng)
            return replace(o, extra_params=SymmPerChannelQuantParams(ch, scales))
        return replace(o, extra_params=bytes(rng.getrandbits(8) for _ in range(rng.randrange(9))))
    if field == "fresh_dims":  # a plausible shape from nothing
        return replace(
            o, dimensions=tuple(rng.choice((1, 2, 3, 4)) for _ in range(rng.randrange(5)))
        )
    raise ValueError(f"unknown operand field {field!r}")


def mutate_operation(rng: random.Random, op: Operation, n_operands: int) -> Operation:
    what = rng.randrange(7)
    if what == 0:
        return replace(op, type=_pick(rng, OPERATION_TYPE_CODES))
    lists = [list(op.inputs), list(op.outputs)]
    lst = lists[rng.randrange(2)]
    if what <= 2 and lst:  # replace one index
        lst[rng.randrange(len(lst))] = _index(rng, n_operands)
    elif what == 3 and len(lst) < 64:  # add an operand
        lst.insert(rng.randrange(len(lst) + 1), _index(rng, n_operands))
    elif what == 4 and lst:  # remove one
        del lst[rng.randrange(len(lst))]
    elif what == 5 and len(lst) > 1:  # swap two
        i, j = _two_positions(rng, len(lst))
        lst[i], lst[j] = lst[j], lst[i]
    elif lst:  # duplicate one
        lst.append(lst[rng.randrange(len(lst))])
    return replace(op, inputs=tuple(lists[0]), outputs=tuple(lists[1]))


def mutate_subgraph(
    rng: random.Random, sg: Subgraph, n_pools: int, n_values: int, n_subgraphs: int
) -> Subgraph:
    """One change to a subgraph: an operand field, an operation, the operation order or
    the input/output lists."""
    operands, operations = list(sg.operands), list(sg.operations)
    ins, outs = list(sg.input_indexes), list(sg.output_indexes)
    r = rng.random()
    if r < 0.45 and operands:
        i = rng.randrange(len(operands))
        o = operands[i]
        if o.lifetime == 6 and rng.random() < 0.3:  # SUBGRAPH: point elsewhere
            o = replace(o, location=replace(o.location, offset=_index(rng, n_subgraphs)))
        else:
            o = mutate_operand(rng, o, n_pools, n_values)
        operands[i] = o
    elif r < 0.75 and operations:
        i = rng.randrange(len(operations))
        operations[i] = mutate_operation(rng, operations[i], len(operands))
    elif r < 0.82 and operations:
        what = rng.randrange(3)
        if what == 0 and len(operations) > 1:  # execution order
            i, j = _two_positions(rng, len(operations))
            operations[i], operations[j] = operations[j], operations[i]
        elif what == 1:  # remove an operation
            del operations[rng.randrange(len(operations))]
        else:  # a second writer
            operations.append(operations[rng.randrange(len(operations))])
    elif r < 0.92:
        lst = ins if rng.random() < 0.5 else outs
        what = rng.randrange(4)
        if what == 0 and lst:
            del lst[rng.randrange(len(lst))]
        elif what == 1:
            lst.append(_index(rng, len(operands)))
        elif what == 2 and lst:
            lst[rng.randrange(len(lst))] = _index(rng, len(operands))
        elif len(lst) > 1:
            i, j = _two_positions(rng, len(lst))
            lst[i], lst[j] = lst[j], lst[i]
    elif operands:
        if rng.random() < 0.5:  # drop the last operand (dangling references)
            operands.pop()
        else:  # a copy of an operand, referenced by nobody yet
            operands.append(operands[rng.randrange(len(operands))])
    return Subgraph(tuple(operands), tuple(operations), tuple(ins), tuple(outs))


def mutate_model(model: Model, rng: random.Random, count: int = 1) -> Model:
    """``model`` with ``count`` structural changes."""
    for _ in range(count):
        model = _mutate_model_once(model, rng)
    return model


def _mutate_model_once(model: Model, rng: random.Random) -> Model:
    r = rng.random()
    subgraphs = [model.main, *model.referenced]
    if r < 0.72:
        k = 0 if not model.referenced or rng.random() < 0.6 else rng.randrange(len(subgraphs))
        sg = mutate_subgraph(
            rng, subgraphs[k], len(model.pools), len(model.operand_values), len(model.referenced)
        )
        if k == 0:
            return replace(model, main=sg)
        refs = list(model.referenced)
        refs[k - 1] = sg
        return replace(model, referenced=tuple(refs))
    if r < 0.82:
        return replace(model, operand_values=_bytes_mutation(rng, model.operand_values))
    if r < 0.90:
        pools = list(model.pools)
        what = rng.randrange(4)
        if what == 0 and pools:
            i = rng.randrange(len(pools))
            p = pools[i]
            pools[i] = Memory(p.name, _pool_size(rng, p.size), p.handle)
        elif what == 1 and pools:
            i = rng.randrange(len(pools))
            pools[i] = Memory(_pick(rng, MEMORY_NAMES), pools[i].size, pools[i].handle)
        elif what == 2:
            handle = pools[0].handle if pools and rng.random() < 0.5 else _Handle(len(pools))
            pools.append(Memory("ashmem", rng.choice((0, 4, 16, 64, 1 << 16, 1 << 17)), handle))
        elif pools:
            del pools[rng.randrange(len(pools))]
        return replace(model, pools=tuple(pools))
    if r < 0.93:
        return replace(model, relax_computation_float32_to_float16=not model.relaxed)
    if r < 0.96:
        ext = list(model.extension_name_to_prefix)
        if ext and rng.random() < 0.5:
            i = rng.randrange(len(ext))
            if rng.random() < 0.5:
                del ext[i]
            else:
                ext[i] = ExtensionNameAndPrefix(ext[i].name, rng.choice((0, 1, 2, 0xFFFF)))
        else:
            ext.append(ExtensionNameAndPrefix(_pick(rng, EXTENSION_NAMES), rng.choice((1, 2, 0))))
        return replace(model, extension_name_to_prefix=tuple(ext))
    refs = list(model.referenced)
    if refs and rng.random() < 0.5:
        del refs[rng.randrange(len(refs))]
    else:
        refs.append(_pick(rng, subgraphs))
    return replace(model, referenced=tuple(refs))


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def _mutate_argument(rng: random.Random, a: RequestArgument, n_pools: int) -> RequestArgument:
    what = rng.randrange(6)
    loc = a.location
    if what == 0:
        return replace(a, has_no_value=not a.has_no_value)
    if what == 1:
        return replace(a, location=replace(loc, pool_index=_index(rng, max(n_pools, 1))))
    if what == 2:
        return replace(a, location=replace(loc, offset=_u32(rng, loc.offset)))
    if what == 3:
        return replace(a, location=replace(loc, length=_u32(rng, loc.length)))
    if what == 4:
        return replace(a, dimensions=_mutate_dims(rng, a.dimensions))
    return RequestArgument()


def mutate_request(request: Request, rng: random.Random, count: int = 1) -> Request:
    for _ in range(count):
        request = _mutate_request_once(request, rng)
    return request


def _mutate_request_once(request: Request, rng: random.Random) -> Request:
    ins, outs, pools = list(request.inputs), list(request.outputs), list(request.pools)
    r = rng.random()
    lst = ins if rng.random() < 0.5 else outs
    if r < 0.6 and lst:
        i = rng.randrange(len(lst))
        lst[i] = _mutate_argument(rng, lst[i], len(pools))
    elif r < 0.7:
        if lst and rng.random() < 0.5:
            del lst[rng.randrange(len(lst))]
        else:
            lst.append(lst[-1] if lst else RequestArgument())
    elif r < 0.95:
        what = rng.randrange(5)
        if what == 0 and pools:
            i = rng.randrange(len(pools))
            p = pools[i]
            if isinstance(p, Memory):
                pools[i] = Memory(p.name, _pool_size(rng, p.size), p.handle)
            else:
                pools[i] = BufferToken(_u32(rng, p.token))
        elif what == 1 and pools:
            i = rng.randrange(len(pools))
            p = pools[i]
            if isinstance(p, Memory):
                pools[i] = Memory(_pick(rng, MEMORY_NAMES), p.size, p.handle)
        elif what == 2:
            pools.append(BufferToken(rng.choice((0, 1, 2, 3, U32_MAX))))
        elif what == 3:
            pools.append(Memory("ashmem", rng.choice((0, 16, 64, 1 << 16)), _Handle(len(pools))))
        elif pools:
            del pools[rng.randrange(len(pools))]
    elif ins and outs:  # swap an input for an output
        i, j = rng.randrange(len(ins)), rng.randrange(len(outs))
        ins[i], outs[j] = outs[j], ins[i]
    return Request(tuple(ins), tuple(outs), tuple(pools))


# ---------------------------------------------------------------------------------------
# libFuzzer custom mutators
# ---------------------------------------------------------------------------------------


STRICT = False
"""Let mutator exceptions propagate (tests) instead of falling back to bytes."""

_ATHERIS = None  # the atheris module, once a fuzzing process has started libFuzzer


def use_libfuzzer_mutate() -> None:
    """Called by :func:`fuzz.harness.fuzz_main`: bytewise mutations go to libFuzzer's own
    mutator (``atheris.Mutate``, usable only inside ``atheris.Fuzz``)."""
    global _ATHERIS
    import atheris

    _ATHERIS = atheris


def _bytewise(data: bytes, max_size: int, rng: random.Random) -> bytes:
    if _ATHERIS is None:  # outside a fuzzing process (tests, tools)
        return _bytes_mutation(rng, data, max_size)[:max_size]
    # Looked up per call: atheris binds ``Mutate`` to libFuzzer only inside ``Fuzz``.
    return _ATHERIS.Mutate(data, max_size)


_CODEC = None


def codec():
    """The wire codec the mutators use: ``driver/wire.py`` loaded a second time under a
    private module name. Fuzzing instruments ``driver.*`` only, so the mutators' decoding
    and encoding (half their cost) run at uninstrumented speed and add no coverage
    noise of their own; outside fuzzing this is the same code."""
    global _CODEC
    if _CODEC is None:
        import importlib.util

        name = "fuzz._mutator_wire"
        try:
            spec = importlib.util.spec_from_file_location(name, wire.__file__)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[name] = module  # dataclasses look their module up there
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except (OSError, ImportError, AttributeError, TypeError):
            sys.modules.pop(name, None)
            module = wire  # e.g. a frozen (pyinstaller) build without source files
        _CODEC = module
    return _CODEC


def _structural(
    data: bytes,
    max_size: int,
    seed: int,
    kind: str,
    mutate: Callable[[object, random.Random, int], object],
    bytewise_share: float,
) -> bytes:
    rng = random.Random(seed)
    if rng.random() < bytewise_share:
        return _bytewise(data, max_size, rng)
    c = codec()
    try:
        obj = getattr(c, f"decode_{kind}")(data, _placeholder_resolver())
    except c.WireDecodeError:
        return _bytewise(data, max_size, rng)
    count = 1 if rng.random() < 0.7 else rng.randrange(2, 5)
    try:
        out = getattr(c, f"encode_{kind}")(mutate(obj, rng, count)).data
    except c.WireEncodeError:
        return _bytewise(data, max_size, rng)
    except Exception:
        # An exception escaping a custom mutator kills libFuzzer without a report; a
        # mutator bug must not end a campaign (the tests run the mutators strictly).
        if STRICT:
            raise
        return _bytewise(data, max_size, rng)
    if len(out) > max_size:
        return _bytewise(data, max_size, rng)
    return out


def mutate_model_bytes(
    data: bytes, max_size: int, seed: int, *, bytewise_share: float = 0.25
) -> bytes:
    """libFuzzer custom mutator for wire-format models."""
    return _structural(data, max_size, seed, "model", mutate_model, bytewise_share)


def mutate_request_bytes(
    data: bytes, max_size: int, seed: int, *, bytewise_share: float = 0.25
) -> bytes:
    """libFuzzer custom mutator for wire-format requests."""
    return _structural(data, max_size, seed, "request", mutate_request, bytewise_share)


# ---------------------------------------------------------------------------------------
# libFuzzer dictionary
# ---------------------------------------------------------------------------------------


def _entry(name: str, raw: bytes) -> str:
    return f'{name}="' + "".join(f"\\x{b:02x}" for b in raw) + '"'


def render_dictionary() -> str:
    """The text of ``fuzz/nnapi.dict``: wire magic and header, the codes of every operand
    type, operation, lifetime and status as little-endian u32 (how the wire carries
    them), memory names, and boundary values. ``tools/make_corpus.py`` writes it; a test
    checks the checked-in file is current."""
    from driver.hal.types import ErrorStatus, OperandLifeTime, OperandType, OperationType

    lines = [
        "# libFuzzer dictionary for the nnfuzz targets (generated by tools/make_corpus.py;",
        "# do not edit). Codes are little-endian u32, as the wire format carries them.",
        "",
        _entry("magic", wire.MAGIC),
        _entry("header_model", wire.MAGIC + struct.pack("<HH", wire.FORMAT_VERSION, 1)),
        _entry("header_request", wire.MAGIC + struct.pack("<HH", wire.FORMAT_VERSION, 2)),
    ]
    lines += [_entry(f"kind_{k.name.lower()}", struct.pack("<H", k)) for k in wire.MessageKind]
    lines += [_entry(f"type_{t.name.lower()}", struct.pack("<I", t)) for t in OperandType]
    lines += [_entry(f"op_{t.name.lower()}", struct.pack("<I", t)) for t in OperationType]
    lines += [_entry(f"lifetime_{t.name.lower()}", struct.pack("<I", t)) for t in OperandLifeTime]
    lines += [_entry(f"status_{s.name.lower()}", struct.pack("<I", s)) for s in ErrorStatus]
    lines += [_entry("type_extension", struct.pack("<I", 0x10000))]
    for name in MEMORY_NAMES[:4]:
        lines.append(_entry(f"memory_{name}", struct.pack("<I", len(name)) + name.encode()))
    lines += [_entry(f"u32_{v:x}", struct.pack("<I", v)) for v in INTERESTING_U32 if v > 4]
    lines += [_entry("no_handle", struct.pack("<I", wire.NO_HANDLE))]
    lines += [_entry("u64_max", b"\xff" * 8)]
    floats = {"one": 1.0, "half": 0.5, "minus_one": -1.0, "nan": math.nan, "inf": math.inf,
              "minus_zero": -0.0, "denormal": 1e-45, "f32_max": 3.4028234663852886e38}  # fmt: skip
    lines += [_entry(f"f32_{k}", struct.pack("<f", v)) for k, v in floats.items()]
    lines += [_entry(f"i32_{v & 0xFFFFFFFF:x}", struct.pack("<i", v)) for v in (-1, -128, -129)]
    return "\n".join(lines) + "\n"


__all__ = [
    "OPERAND_FIELDS",
    "STRICT",
    "SourceRandom",
    "codec",
    "mutate_model",
    "mutate_model_bytes",
    "mutate_operand",
    "mutate_operation",
    "mutate_request",
    "mutate_request_bytes",
    "mutate_subgraph",
    "render_dictionary",
    "use_libfuzzer_mutate",
]
