#!/usr/bin/env python3
"""execute: bytes -> a valid random graph -> one mutation -> validate -> prepare -> execute.

Structure-aware: the input is a choice stream (:class:`randomgraph.choices.ByteSource`),
so every input, whatever its bytes, first becomes a *valid* model from the random-graph
generator (a few operations over small tensors, control flow included) with example
inputs. The same stream then picks one mutation — a single field or constraint — of
the model or of its request:

    none, operand type / dims / scale / zero point / lifetime / location /
    numberOfConsumers / extra params, an operation's type or operand indexes, the
    subgraph's input/output lists, constant values, input values, request pool sizes
    and argument lengths

and the result goes through ``validate_model`` -> ``prepare_model`` -> a synchronous
execution (10 ms loop timeout). Request pools are the harness's (64 KiB each), laid out
from the *generated* model before mutating, so no declared size is ever allocated.

Checked beyond "no exception": an unmutated generated model validates, prepares and
executes to NONE (or OUTPUT_INSUFFICIENT_SIZE when an output of unknown size outgrows
its 4 KiB, or MISSED_DEADLINE_TRANSIENT when a WHILE outlasts the loop timeout); a
mutated model that validation rejects is rejected by ``prepare_model`` too (unless the
reason is one Android defers to execution, ``HalError.deferrable``: another driver may
then prepare the model, and its execution is checked like any other); every execution
result follows the HAL's rules.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

from driver.hal.types import (
    DataLocation,
    ErrorStatus,
    HalError,
    HalVersion,
    Memory,
    Model,
    OperandLifeTime,
    Request,
    RequestArgument,
    is_scalar_type,
    non_extension_size_of_data,
)
from driver.operations.base import array_to_bytes
from driver.validation import validate_model
from fuzz import harness
from fuzz.fixtures import SharedPools
from fuzz.harness import ContractViolation, check_execution, check_status
from fuzz.mutators import (
    INTERESTING_F32,
    INTERESTING_U32,
    OPERAND_FIELDS,
    SourceRandom,
    mutate_operand,
    mutate_operation,
    mutate_subgraph,
)
from randomgraph.choices import ByteSource, ChoiceSource
from randomgraph.generator import GenerationError, GeneratorConfig, generate_with

MAX_LEN = 2048
LOOP_TIMEOUT_NS = 10_000_000
UNKNOWN_OUTPUT_BYTES = 4096

CONFIG = GeneratorConfig(
    num_ops=3,
    max_dim=8,
    max_elements=256,
    control_flow_depth=1,
    subgraph_ops=2,
    preset="fuzz",
)
"""Small graphs: cheap to run, so the fuzzer spends its time on variety, not on size."""

MUTATIONS = (
    "none",
    *(f"operand.{f}" for f in OPERAND_FIELDS),
    "operation",
    "subgraph",
    "constant_values",
    "input_values",
    "pool_size",
    "argument_length",
)

_POOLS = SharedPools(count=2)
_GENERATED_OUTCOMES = (
    ErrorStatus.NONE,
    ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,  # an output of unknown size outgrew its 4 KiB
    ErrorStatus.MISSED_DEADLINE_TRANSIENT,  # a WHILE ran past the loop timeout
)
_L = OperandLifeTime


def _request(model: Model, inputs) -> Request | None:
    """Inputs in harness pool 0, outputs in pool 1 (None if they do not fit)."""
    main = model.main
    data = bytearray()
    args = []
    for idx, value in zip(main.input_indexes, inputs):
        operand = main.operands[idx]
        if value is None:
            args.append(RequestArgument(has_no_value=True))
            continue
        raw = array_to_bytes(np.asarray(value), operand.type)
        unknown = not is_scalar_type(operand.type) and (
            not operand.dimensions or 0 in operand.dimensions
        )
        dims = tuple(int(d) for d in np.shape(value)) if unknown else ()
        args.append(RequestArgument(False, DataLocation(0, len(data), len(raw)), dims))
        data += raw
        data += b"\0" * (-len(data) % 8)
    outs = []
    offset = 0
    for idx in main.output_indexes:
        operand = main.operands[idx]
        size = non_extension_size_of_data(operand.type, operand.dimensions)
        size = size or UNKNOWN_OUTPUT_BYTES
        outs.append(RequestArgument(False, DataLocation(1, offset, size), ()))
        offset += size + (-size % 8)
    cap = _POOLS.capacity
    if len(data) > cap or offset > cap:
        return None
    _POOLS.handles[0].data[:] = bytes(data) + bytes(cap - len(data))
    _POOLS.handles[1].data[:] = bytes(cap)
    pools = (
        Memory("ashmem", len(data), _POOLS.handles[0]),
        Memory("ashmem", offset, _POOLS.handles[1]),
    )
    return Request(tuple(args), tuple(outs), pools)


def _extreme_bytes(rng: SourceRandom, n: int) -> bytes:
    """``n`` bytes of boundary values: NaN/inf/max floats, 0x80000000, 0xFF... patterns."""
    pick = rng.randrange(4)
    if pick == 0:
        word = np.float32(INTERESTING_F32[rng.randrange(len(INTERESTING_F32))]).tobytes()
    elif pick == 1:
        word = int(INTERESTING_U32[rng.randrange(len(INTERESTING_U32))]).to_bytes(4, "little")
    elif pick == 2:
        word = bytes([rng.getrandbits(8)])
    else:
        return bytes(rng.getrandbits(8) for _ in range(n))
    return (word * (n // len(word) + 1))[:n]


def mutate(model: Model, request: Request, rng: SourceRandom, kind: str) -> tuple[Model, Request]:
    """One mutation ``kind`` (one of :data:`MUTATIONS`) of the model or the request."""
    main = model.main
    if kind == "none":
        return model, request
    if kind.startswith("operand."):
        field = kind.split(".", 1)[1]
        i = rng.randrange(len(main.operands))
        o = mutate_operand(
            rng, main.operands[i], len(model.pools), len(model.operand_values), field
        )
        operands = (*main.operands[:i], o, *main.operands[i + 1 :])
        return replace(model, main=replace(main, operands=operands)), request
    if kind == "operation":
        i = rng.randrange(len(main.operations))
        op = mutate_operation(rng, main.operations[i], len(main.operands))
        ops = (*main.operations[:i], op, *main.operations[i + 1 :])
        return replace(model, main=replace(main, operations=ops)), request
    if kind == "subgraph":
        sg = mutate_subgraph(
            rng, main, len(model.pools), len(model.operand_values), len(model.referenced)
        )
        return replace(model, main=sg), request
    if kind == "constant_values":
        consts = [o for o in main.operands if o.lifetime == _L.CONSTANT_COPY]
        if not consts or not model.operand_values:
            return model, request
        loc = consts[rng.randrange(len(consts))].location
        values = bytearray(model.operand_values)
        end = min(len(values), loc.offset + loc.length)
        values[loc.offset : end] = _extreme_bytes(rng, end - loc.offset)
        return replace(model, operand_values=bytes(values)), request
    if kind == "input_values":
        given = [a for a in request.inputs if not a.has_no_value and a.location.length]
        if given:
            loc = given[rng.randrange(len(given))].location
            _POOLS.handles[0].data[loc.offset : loc.offset + loc.length] = _extreme_bytes(
                rng, loc.length
            )
        return model, request
    if kind == "pool_size":
        k = rng.randrange(len(request.pools))
        pool = request.pools[k]
        size = rng.choice((0, max(0, pool.size - 1), pool.size + 1, _POOLS.capacity + 1))
        pools = (*request.pools[:k], Memory(pool.name, size, pool.handle), *request.pools[k + 1 :])
        return model, replace(request, pools=pools)
    # argument_length: one argument's length shorter or longer than its data
    args = [*request.inputs, *request.outputs]
    if not args:
        return model, request
    k = rng.randrange(len(args))
    a = args[k]
    length = rng.choice((0, max(0, a.location.length - 1), a.location.length + 1, 1))
    args[k] = replace(a, location=replace(a.location, length=length))
    n_in = len(request.inputs)
    return model, replace(request, inputs=tuple(args[:n_in]), outputs=tuple(args[n_in:]))


def test_one_input(data: bytes) -> None:
    run(ByteSource(data))


def run(source: ChoiceSource) -> None:
    """One generate-mutate-execute round, every decision drawn from ``source``."""
    dev = harness.device()
    driver_version = HalVersion(getattr(dev, "version", HalVersion.V1_3))
    # Only models the driver's HAL version can express (a 1.2 driver given a 1.3 model
    # rightly refuses it: that is no finding).
    versions = tuple(v for v in CONFIG.versions if v <= driver_version)
    config = replace(CONFIG, num_ops=1 + source.draw(CONFIG.num_ops), versions=versions)
    try:
        graph = generate_with(source, config)
    except GenerationError:
        return
    request = _request(graph.model, graph.inputs)
    if request is None:
        return
    rng = SourceRandom(source)
    kind = MUTATIONS[source.draw(len(MUTATIONS))]
    model, request = mutate(graph.model, request, rng, kind)
    version = driver_version
    # A loop timeout is a HAL 1.3 argument (so are the WHILE loops it bounds).
    loop_timeout = LOOP_TIMEOUT_NS if driver_version >= HalVersion.V1_3 else None
    try:
        validate_model(model, version)
    except HalError as e:
        if kind == "none":
            raise ContractViolation(f"the generator made a model validation rejects: {e}") from e
        harness.rejected(e)
        status, prepared = dev.prepare_model(model)
        allowed = {ErrorStatus.INVALID_ARGUMENT}
        if e.deferrable and not harness.is_reference(dev):
            # Android's validation accepts this model and its execution fails instead.
            allowed |= {ErrorStatus.NONE, ErrorStatus.GENERAL_FAILURE}
        check_status(status, allowed, "prepare_model(invalid model)", dev, e)
        if prepared is not None:
            result = prepared.execute_synchronously(request, 0, None, loop_timeout)
            check_execution(
                result, len(model.main.output_indexes), "execution (rejected model)", version
            )
        return
    status, prepared = dev.prepare_model(model)
    allowed = {ErrorStatus.NONE}
    if kind != "none" or not harness.is_reference(dev):
        # Mutated pools or referenced-subgraph ops may name what the reference cannot map.
        allowed.add(ErrorStatus.GENERAL_FAILURE)
    check_status(status, allowed, f"prepare_model(valid model, mutation {kind})", dev)
    if prepared is None:
        return
    result = prepared.execute_synchronously(request, 0, None, loop_timeout)
    status = check_execution(
        result, len(model.main.output_indexes), f"execution ({kind})", driver_version
    )
    if kind == "none" and status not in _GENERATED_OUTCOMES:
        said = getattr(dev, "last_error", "")
        raise ContractViolation(
            f"a generated model with its own inputs failed to execute: {status.name} ({said})"
        )


def main(argv: list[str] | None = None) -> None:
    harness.fuzz_main(test_one_input, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
