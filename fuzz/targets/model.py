#!/usr/bin/env python3
"""model: wire bytes -> decode -> validate; valid models -> supported operations, prepare.

The input is one wire-format MODEL message (``docs/wire-format.md``). Pools resolve to
the harness's small pools (handle indexes 0-3; their bytes are the model's
``operandValues`` repeated, so a constant moved from operandValues to a pool at the same
offset keeps its value).

Allowed outcomes: ``WireDecodeError``; ``validate_model`` raising INVALID_ARGUMENT. Checked
beyond "no exception" (each a :class:`~fuzz.harness.ContractViolation`):

- the HAL version ``validate_model`` reports as the model's minimum validates, and the
  version below it rejects the model (on a quarter of the valid inputs, chosen by hash:
  it costs up to two more validations);
- for a valid model, ``get_supported_operations`` returns NONE with one flag per main
  operation and the reference's ``prepare_model`` returns NONE (GENERAL_FAILURE only if
  an operation is unsupported or a pool is of a memory type it does not map);
- with a driver other than the reference (``NNFUZZ_DRIVER``) every decoded model goes to
  the device too, and an invalid one must get INVALID_ARGUMENT from both calls, unless
  the reference's reason is one Android's own validation defers to execution
  (``HalError.deferrable``: an output shape, a parameter value or a quantization
  condition that Android checks in an operation's ``prepare()``): then the device may
  also accept the model, or fail to prepare it.
"""

from __future__ import annotations

import sys
import zlib

from driver import wire
from driver.hal.types import ErrorStatus, HalError, HalVersion, OperandLifeTime
from driver.memory import SUPPORTED_MEMORY_NAMES
from driver.operations import declaration
from driver.validation import validate_model
from fuzz import harness
from fuzz.fixtures import SharedPools
from fuzz.harness import ContractViolation, check_status
from fuzz.mutators import mutate_model_bytes

MAX_LEN = 8192
MINIMUM_VERSION_SHARE = 4
"""The minimum-version check (one or two more validations) runs on one valid input in
this many, picked by a hash of the input so that a finding reproduces."""

_POOLS = SharedPools()
_NONE = frozenset({ErrorStatus.NONE})
_INVALID = frozenset({ErrorStatus.INVALID_ARGUMENT})
_CANNOT_PREPARE = frozenset(
    {
        ErrorStatus.GENERAL_FAILURE,
        ErrorStatus.DEVICE_UNAVAILABLE,
        ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
        ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT,
    }
)


def test_one_input(data: bytes) -> None:
    try:
        model = wire.decode_model(data, _POOLS.resolve)
    except wire.WireDecodeError:
        return
    if model.pools:
        _POOLS.fill(model.operand_values)
    dev = harness.device()
    version = getattr(dev, "version", HalVersion.V1_3)
    try:
        need = validate_model(model, version)
    except HalError as e:
        harness.rejected(e)
        if not harness.is_reference(dev):
            _check_device_rejects(dev, model, e)
        return
    if zlib.crc32(data) % MINIMUM_VERSION_SHARE == 0:
        _check_minimum_version(model, need, version)
    n_ops = len(model.main.operations)
    status, supported = dev.get_supported_operations(model)
    check_status(status, _NONE, "get_supported_operations(valid model)", dev)
    if len(supported) != n_ops:
        raise ContractViolation(f"{len(supported)} support flags for {n_ops} operations")
    status, prepared = dev.prepare_model(model)
    check_status(
        status, _prepare_outcomes(dev, model, supported), "prepare_model(valid model)", dev
    )
    if (prepared is None) != (status != ErrorStatus.NONE):
        raise ContractViolation(f"prepare_model returned {status.name} with {prepared!r}")


def _prepare_outcomes(dev, model, supported: list[bool]) -> frozenset[ErrorStatus]:
    """What preparing a valid model may give. The reference prepares every valid model
    unless an operation is unsupported or a pool is of a memory type it does not map
    (GENERAL_FAILURE, as the HAL recommends); another driver may also run out of
    resources or be unavailable."""
    if not harness.is_reference(dev):
        return _NONE | _CANNOT_PREPARE
    if not all(supported):
        return frozenset({ErrorStatus.GENERAL_FAILURE})
    if any(p.name not in SUPPORTED_MEMORY_NAMES for p in model.pools):
        # Fails if a constant lives there; a pool nothing uses is never mapped.
        return _NONE | frozenset({ErrorStatus.GENERAL_FAILURE})
    # A referenced subgraph no operation uses is still prepared; the reference fails
    # if it holds an operation it has no kernel for. (One that is used must have made
    # get_supported_operations report its IF/WHILE unsupported.)
    used = _used_subgraphs(model)
    for k, sg in enumerate(model.referenced):
        if k not in used and any(declaration(op.type) is None for op in sg.operations):
            return _NONE | frozenset({ErrorStatus.GENERAL_FAILURE})
    return _NONE


def _used_subgraphs(model) -> set[int]:
    """Referenced subgraphs reachable from the main subgraph through SUBGRAPH operands."""
    used: set[int] = set()
    todo = [model.main]
    while todo:
        sg = todo.pop()
        for op in sg.operations:
            for i in op.inputs:
                o = sg.operands[i]
                if o.lifetime == OperandLifeTime.SUBGRAPH and o.location.offset not in used:
                    used.add(o.location.offset)
                    todo.append(model.referenced[o.location.offset])
    return used


def _check_minimum_version(model, need: HalVersion, validated_as: HalVersion) -> None:
    """The version validation reports must be the lowest one that accepts the model."""
    if need != validated_as:
        try:
            validate_model(model, need)
        except HalError as e:
            raise ContractViolation(
                f"the model's minimum version {need.name} rejects it: {e}"
            ) from e
    if need > HalVersion.V1_0:
        below = HalVersion(need - 1)
        try:
            validate_model(model, below)
        except HalError as e:
            harness.rejected(e)
        else:
            raise ContractViolation(
                f"validation reports minimum version {need.name} but {below.name} accepts it"
            )


def _check_device_rejects(dev, model, rejected: HalError) -> None:
    """The device's answers to a model the reference rejects: INVALID_ARGUMENT, or (for
    a deferrable reason) whatever Android's validation-then-execute driver may say."""
    query = prepare = _INVALID
    if rejected.deferrable:
        query, prepare = _INVALID | _NONE, _INVALID | _NONE | _CANNOT_PREPARE
    status, _ = dev.get_supported_operations(model)
    check_status(status, query, "get_supported_operations(invalid model)", dev, rejected)
    status, prepared = dev.prepare_model(model)
    check_status(status, prepare, "prepare_model(invalid model)", dev, rejected)
    if (prepared is None) != (status != ErrorStatus.NONE):
        raise ContractViolation(f"prepare_model returned {status.name} with {prepared!r}")


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    return mutate_model_bytes(data, max_size, seed)


def main(argv: list[str] | None = None) -> None:
    # Decoding and validation compare few arrays: skip the leak plug, keep the speed.
    harness.fuzz_main(
        test_one_input, argv, custom_mutator=custom_mutator, arrays_past_the_hook=False
    )


if __name__ == "__main__":
    main(sys.argv[1:])
