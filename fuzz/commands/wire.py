"""``nnfuzz decode``: decode a wire-format message (``driver.wire``) and show what it holds.

For triage: a fuzz reproducer, a corpus seed or a message captured between the harness
and an out-of-process driver is printed as a readable summary, or as the decode error
with its byte offset; ``--validate`` then runs the driver's validation and prints the HAL
status it returns.
"""

from __future__ import annotations

import argparse
import struct
import sys
import traceback
from collections.abc import Iterable, Sequence
from typing import BinaryIO

from driver import wire
from driver.hal.types import (
    BufferToken,
    Capabilities,
    ErrorStatus,
    HalError,
    HalVersion,
    Memory,
    Model,
    OperandLifeTime,
    OperandType,
    Request,
    RequestArgument,
    Subgraph,
    SymmPerChannelQuantParams,
    is_scalar_type,
    operand_type_name,
    operation_type_name,
)
from fuzz.commands.arguments import hal_version

EXIT_OK = 0
EXIT_DECODE_ERROR = 1
EXIT_USAGE = 2
EXIT_INVALID = 3
EXIT_CRASH = 4

EPILOG = f"""\
The file holds one message: a 12-byte header (magic "NNFW", format version, kind, body
length) and a MODEL, REQUEST, CAPABILITIES, EXECUTION_RESULT or BUFFER_ALLOCATION body
(layout: docs/wire-format.md). Pools decode without handles, as in the fuzz targets, so
a model whose constants live in a pool (CONSTANT_REFERENCE) does not validate here.

--validate runs driver.validation on the decoded object (a REQUEST needs --model FILE,
the model it is meant for) and prints the HAL status and message.

An input of the `request` fuzz target (a selector byte, the REQUEST, pool bytes) is
recognized: the selector is explained and --validate uses the fixture model it selects.

exit status:
  {EXIT_OK}  decoded (and, with --validate, the status is NONE)
  {EXIT_DECODE_ERROR}  the bytes are not a valid message (the error names the byte offset)
  {EXIT_USAGE}  bad arguments or unreadable file
  {EXIT_INVALID}  --validate returned a status other than NONE
  {EXIT_CRASH}  validation raised an exception instead of returning a status (a driver bug)

examples:
  nnfuzz decode corpus/crashes/model/crash-cb8425a2faa4
  nnfuzz decode corpus/crashes/model/crash-6c9004a192ce --validate
  nnfuzz decode corpus/model/seed-abs_float32 --validate --version V1_2
  nnfuzz decode corpus/request/seed-add_dynamic-sync --validate"""


def register(sub) -> None:
    p = sub.add_parser(
        "decode",
        help="decode a wire-format message (model, request, ...) and summarize it",
        description="Decode a binary wire-format message (driver/wire.py) and print a "
        "readable summary of the model, request or result it holds, or the decode error "
        "and the byte offset where decoding failed.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="the message file ('-' reads standard input)")
    p.add_argument(
        "--validate",
        action="store_true",
        help="also validate the decoded model (or request, with --model) and print the "
        "HAL status and message",
    )
    p.add_argument(
        "--version",
        type=hal_version,
        default=HalVersion.V1_3,
        metavar="V1_x",
        help="HAL version to validate against: V1_0, V1_1, V1_2 or V1_3 (default V1_3)",
    )
    p.add_argument(
        "--model",
        metavar="FILE",
        help="with --validate on a REQUEST: the MODEL message the request is validated against",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=64,
        metavar="N",
        help="list at most N operands, operations or arguments per table (0: all; default 64)",
    )
    p.set_defaults(func=run)


def _read(path: str) -> bytes:
    """The message in ``path`` ('-': standard input), or a ``request`` fuzz input
    (selector byte, message, pool bytes), read only as far as it declares: a device, a
    FIFO or an endless pipe cannot fill memory."""
    if path == "-":
        return _read_input(sys.stdin.buffer)
    with open(path, "rb") as f:
        return _read_input(f)


def _read_input(stream: BinaryIO) -> bytes:
    from fuzz.targets.request import MAX_LEN

    data = wire.read_message(stream)
    if data[:4] != wire.MAGIC and data[1:5] == wire.MAGIC:
        # After the message, the pool bytes: no more than the fuzz target ever reads.
        data = data[:1] + wire.read_message(stream, already=data[1:], then=MAX_LEN)
    return data


def _hex_context(data: bytes, offset: int, width: int = 8) -> str:
    """The bytes around ``offset``, the offending one in brackets."""
    lo, hi = max(0, offset - width), min(len(data), offset + width)
    cells = [f"[{b:02x}]" if lo + k == offset else f"{b:02x}" for k, b in enumerate(data[lo:hi])]
    if offset >= len(data):
        cells.append("[end]")
    return f"bytes {lo}..{hi}: " + " ".join(cells)


def request_fuzz_input(data: bytes) -> tuple[bytes, str, Model] | None:
    """A ``request`` fuzz-target input (selector byte, REQUEST message, pool bytes) as
    (the message, what the selector chose, the fixture model it runs on); None for other
    data."""
    from fuzz.fixtures import FIXTURES
    from fuzz.targets.request import Selection, split_input

    parts = split_input(data) if data[1:5] == wire.MAGIC else None
    if parts is None:
        return None
    selector, message, pool_bytes = parts
    chosen = Selection.of(selector, len(FIXTURES))
    name, build = FIXTURES[chosen.fixture]
    note = (
        f"request fuzz-target input: selector 0x{selector:02x} (fixture {name}, "
        f"path {chosen.path}, measure {'on' if chosen.measure else 'off'}, "
        f"{'a deadline already passed' if chosen.past_deadline else 'no deadline'}), "
        f"{len(pool_bytes)} pool bytes after the message"
    )
    return message, note, build()


def run(args: argparse.Namespace) -> int:
    try:
        data = _read(args.file)
    except OSError as e:
        print(f"nnfuzz decode: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    fixture = None
    if data[:4] != wire.MAGIC and (found := request_fuzz_input(data)) is not None:
        data, note, fixture = found
        print(note)
    try:
        version, kind, _ = wire.read_header(data)
        if fixture is None:
            obj = wire.decode(data)
        else:  # its pools resolve to the target's, as when it ran
            from fuzz.harness import HarnessPools

            obj = wire.decode_request(data, HarnessPools().resolve)
    except wire.WireDecodeError as e:
        print(f"decode error at byte {e.offset} ({e.failure.value}): {e.reason}")
        print(_hex_context(data, e.offset))
        return EXIT_DECODE_ERROR
    print(f"{kind.name} message, wire format {version}, {len(data)} bytes")
    for line in describe(obj, limit=args.limit):
        print(line)
    if not args.validate:
        return EXIT_OK
    return _validate(obj, args, fixture)


def _validate(obj: object, args: argparse.Namespace, fixture: Model | None = None) -> int:
    """``fixture``: the model a request fuzz input runs on (used unless --model is given)."""
    from driver import validation

    version: HalVersion = args.version
    if isinstance(obj, Model):
        check = lambda: validation.validate_model(obj, version)  # noqa: E731
    elif isinstance(obj, Request) and fixture is not None and not args.model:
        check = lambda: validation.validate_request(fixture, obj, version)  # noqa: E731
    elif isinstance(obj, Request):
        if not args.model:
            print("--validate on a REQUEST needs --model FILE (the model it is for)")
            return EXIT_USAGE
        try:
            model = wire.decode_model(_read(args.model))
        except OSError as e:
            print(f"nnfuzz decode: cannot read {args.model}: {e.strerror or e}", file=sys.stderr)
            return EXIT_USAGE
        except wire.WireDecodeError as e:
            print(f"--model {args.model}: {e}")
            return EXIT_DECODE_ERROR
        check = lambda: validation.validate_request(model, obj, version)  # noqa: E731
    else:
        print(f"validation: nothing to validate in a {type(obj).__name__}")
        return EXIT_OK
    try:
        needs = check()
    except HalError as e:
        print(f"validation (HAL {version.label}): status {e.status.name}")
        print(f"message: {e.message}")
        if e.deferrable:
            print(
                "deferrable: Android's own validation leaves this rule to execution; "
                "a driver may also accept the model and fail when it runs"
            )
        return EXIT_INVALID
    except Exception:
        print(f"validation (HAL {version.label}) raised instead of returning a status (a bug):")
        traceback.print_exc(file=sys.stdout)
        return EXIT_CRASH
    lowest = f" (expressible from HAL {needs.label})" if isinstance(needs, HalVersion) else ""
    print(f"validation (HAL {version.label}): status NONE{lowest}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------
# Readable summaries
# ---------------------------------------------------------------------------------------


def _name(enum_type, code) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return f"UNKNOWN({code})"


def _limited(items: Sequence, limit: int) -> Iterable[tuple[int, object]]:
    shown = len(items) if limit <= 0 else min(limit, len(items))
    yield from enumerate(items[:shown])
    if shown < len(items):
        yield -1, f"... {len(items) - shown} more"


_SCALAR_FORMATS = {
    OperandType.FLOAT32: "<f",
    OperandType.INT32: "<i",
    OperandType.UINT32: "<I",
    OperandType.BOOL: "<?",
    OperandType.FLOAT16: "<e",
}


def _constant_value(model: Model, operand) -> str:
    """`` = value`` for a CONSTANT_COPY scalar whose bytes are all there, else ''."""
    fmt = _SCALAR_FORMATS.get(operand.type)
    loc = operand.location
    if fmt is None or operand.lifetime != OperandLifeTime.CONSTANT_COPY:
        return ""
    size = struct.calcsize(fmt)
    if loc.length != size or loc.offset + size > len(model.operand_values):
        return ""
    value = struct.unpack_from(fmt, model.operand_values, loc.offset)[0]
    return f" = {value!r}"


def _operand_line(model: Model, k: int, o) -> str:
    parts = [f"    {k:>4}  {operand_type_name(o.type)}"]
    if o.dimensions or not is_scalar_type(o.type):
        parts.append(str(list(o.dimensions)))
    parts.append(_name(OperandLifeTime, o.lifetime))
    loc = o.location
    if loc.pool_index or loc.offset or loc.length:
        where = (
            "values" if o.lifetime == OperandLifeTime.CONSTANT_COPY else f"pool {loc.pool_index}"
        )
        parts.append(f"{where} @{loc.offset}+{loc.length}{_constant_value(model, o)}")
    if o.scale or o.zero_point:
        parts.append(f"scale={o.scale!r} zeroPoint={o.zero_point}")
    extra = o.extra_params
    if isinstance(extra, SymmPerChannelQuantParams):
        shown = ", ".join(repr(s) for s in extra.scales[:8])
        more = ", ..." if len(extra.scales) > 8 else ""
        parts.append(f"channelDim={extra.channel_dim} scales=[{shown}{more}]")
    elif extra is not None:
        parts.append(f"extension params {len(extra)} bytes")
    parts.append(f"consumers={o.number_of_consumers}")
    return "  ".join(parts)


def _subgraph_lines(model: Model, sg: Subgraph, title: str, limit: int) -> list[str]:
    lines = [
        f"{title}: {len(sg.operands)} operands, {len(sg.operations)} operations, "
        f"inputs {list(sg.input_indexes)}, outputs {list(sg.output_indexes)}"
    ]
    if sg.operands:
        lines.append("  operands:")
        for k, o in _limited(sg.operands, limit):
            lines.append(f"    {o}" if k < 0 else _operand_line(model, k, o))
    if sg.operations:
        lines.append("  operations:")
        for k, op in _limited(sg.operations, limit):
            if k < 0:
                lines.append(f"    {op}")
                continue
            ins = ", ".join(map(str, op.inputs))
            outs = ", ".join(map(str, op.outputs))
            lines.append(f"    {k:>4}  {operation_type_name(op.type)}({ins}) -> ({outs})")
    return lines


def _pool_line(k: int, pool) -> str:
    if isinstance(pool, BufferToken):
        return f"    {k:>4}  driver buffer token {pool.token}"
    if isinstance(pool, Memory):
        handle = "no handle" if pool.handle is None else type(pool.handle).__name__
        return f"    {k:>4}  {pool.name!r} {pool.size} bytes ({handle})"
    return f"    {k:>4}  {pool!r}"


def _argument_line(role: str, k: int, a: RequestArgument) -> str:
    if a.has_no_value:
        text = "no value"
    else:
        loc = a.location
        text = f"pool {loc.pool_index} @{loc.offset}+{loc.length}"
    if a.dimensions:
        text += f"  dims {list(a.dimensions)}"
    return f"    {role} {k}: {text}"


def describe(obj: object, *, limit: int = 64) -> list[str]:
    """Readable lines describing a decoded wire message."""
    if isinstance(obj, Model):
        lines = _subgraph_lines(obj, obj.main, "main subgraph", limit)
        for k, sg in enumerate(obj.referenced):
            lines += _subgraph_lines(obj, sg, f"referenced subgraph {k}", limit)
        lines.append(f"operandValues: {len(obj.operand_values)} bytes")
        lines.append(f"pools: {len(obj.pools)}")
        lines += [f"    {p}" if k < 0 else _pool_line(k, p) for k, p in _limited(obj.pools, limit)]
        if obj.extension_name_to_prefix:
            names = ", ".join(f"{e.name!r} -> {e.prefix}" for e in obj.extension_name_to_prefix)
            lines.append(f"extensions: {names}")
        lines.append(
            f"relaxComputationFloat32toFloat16: {obj.relax_computation_float32_to_float16}"
        )
        return lines
    if isinstance(obj, Request):
        lines = [
            f"request: {len(obj.inputs)} inputs, {len(obj.outputs)} outputs, {len(obj.pools)} pools"
        ]
        for role, args in (("input", obj.inputs), ("output", obj.outputs)):
            for k, a in _limited(args, limit):
                lines.append(f"    {a}" if k < 0 else _argument_line(role, k, a))
        lines.append("  pools:")
        lines += [f"    {p}" if k < 0 else _pool_line(k, p) for k, p in _limited(obj.pools, limit)]
        return lines
    if isinstance(obj, Capabilities):

        def perf(p) -> str:
            return f"execTime={p.exec_time!r} powerUsage={p.power_usage!r}"

        lines = [
            f"relaxed scalar: {perf(obj.relaxed_float32_to_float16_performance_scalar)}",
            f"relaxed tensor: {perf(obj.relaxed_float32_to_float16_performance_tensor)}",
            f"IF: {perf(obj.if_performance)}",
            f"WHILE: {perf(obj.while_performance)}",
            f"operand performance: {len(obj.operand_performance)} entries",
        ]
        for k, p in _limited(obj.operand_performance, limit):
            lines.append(
                f"    {p}" if k < 0 else f"    {operand_type_name(p.type)}: {perf(p.info)}"
            )
        return lines
    if isinstance(obj, wire.ExecutionResultMessage):
        lines = [
            f"status: {_name(ErrorStatus, obj.status)}",
            f"timing: onDevice={obj.timing.time_on_device} inDriver={obj.timing.time_in_driver}",
            f"output shapes: {len(obj.output_shapes)}",
        ]
        for k, s in _limited(obj.output_shapes, limit):
            if k < 0:
                lines.append(f"    {s}")
            else:
                ok = "sufficient" if s.is_sufficient else "INSUFFICIENT"
                lines.append(f"    {k:>4}  {list(s.dimensions)} {ok}")
        if obj.message:
            lines.append(f"message: {obj.message}")
        return lines
    if isinstance(obj, wire.BufferAllocationMessage):
        lines = [f"buffer descriptor dims: {list(obj.desc.dimensions)}"]
        for role, roles in (("input", obj.input_roles), ("output", obj.output_roles)):
            lines.append(f"{role} roles: {len(roles)}")
            for k, r in _limited(roles, limit):
                lines.append(
                    f"    {r}"
                    if k < 0
                    else f"    model {r.model_index} {role} {r.io_index} frequency={r.frequency!r}"
                )
        return lines
    return [repr(obj)]
