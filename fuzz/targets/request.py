#!/usr/bin/env python3
"""request: a prepared fixture model + wire request bytes -> validate -> execute.

Input layout: ``selector (1 byte) | REQUEST message | pool bytes (the rest)``.

- selector bits 0-3: the fixture model (:data:`fuzz.fixtures.FIXTURES`, modulo their
  number); bits 4-5: the execution path (0 synchronous, 1 asynchronous with a callback,
  2 burst, 3 fenced); bit 6: measure timing; bit 7: a deadline that has already passed.
- the REQUEST message is self-delimiting (its header holds the body length); its memory
  pools resolve to the harness's pools (handle indexes 0-3, 64 KiB each), which are
  refilled with the trailing bytes (repeated) before every execution, so the input data
  is fuzzed too. A pool declaring more than 64 KiB is left for validation to reject.

Loops get a 2 ms timeout, so a WHILE whose trip count comes from the data ends quickly.
A deadline and a loop timeout are HAL 1.3 arguments: a driver of an older version (its
``version``) gets neither, as the runtime would send it, so its validation is reached.

Allowed outcomes: a decode error; any status, provided the result follows the HAL's rules
for the driver's version (:func:`fuzz.harness.check_execution`; no output shapes before
HAL 1.2) and a request that ``validate_request`` rejects is rejected with
INVALID_ARGUMENT — or, on a path the driver's version does not have (bursts before 1.2,
``executeFenced`` before 1.3, :data:`driver.hal.device.EXECUTION_PATH_SINCE`), GENERAL_FAILURE: the method does not
exist, so the request never reaches validation (docs/drivers.md, "Feature levels").
"""

from __future__ import annotations

import struct
import sys
import time
from dataclasses import dataclass

from driver import wire
from driver.device import CollectingCallback
from driver.hal.device import EXECUTION_PATH_SINCE
from driver.hal.types import NO_TIMING, ErrorStatus, HalError, HalVersion, Model
from driver.validation import validate_request
from fuzz import harness
from fuzz.fixtures import SharedPools
from fuzz.harness import ContractViolation, check_execution, check_status
from fuzz.mutators import mutate_request_bytes

MAX_LEN = 4096
LOOP_TIMEOUT_NS = 2_000_000
PATHS = ("sync", "async", "burst", "fenced")
_POOLS = SharedPools()
_PREPARED: dict[str, list[tuple[Model, object | None]]] = {}


def prepared_fixtures() -> list[tuple[Model, object | None]]:
    """(model, prepared model or None if the device refused it), prepared once per
    driver (a replay in one process may switch ``NNFUZZ_DRIVER``)."""
    name = harness.driver_name()
    if name not in _PREPARED:
        from fuzz.fixtures import fixture_models

        dev = harness.device()
        prepared_models = []
        for _, model in fixture_models():
            status, prepared = dev.prepare_model(model)
            prepared_models.append((model, prepared if status == ErrorStatus.NONE else None))
        _PREPARED[name] = prepared_models
    return _PREPARED[name]


@dataclass(frozen=True)
class Selection:
    """What an input's selector byte chooses (see the module docstring)."""

    fixture: int  # index into fuzz.fixtures.FIXTURES
    path: str
    measure: bool
    past_deadline: bool

    @classmethod
    def of(cls, selector: int, fixtures: int) -> Selection:
        return cls(
            (selector & 0x0F) % fixtures,
            PATHS[(selector >> 4) & 3],
            bool(selector & 0x40),
            bool(selector & 0x80),
        )


def split_input(data: bytes) -> tuple[int, bytes, bytes] | None:
    """(selector, message, pool bytes), or None if the header cannot be read."""
    if len(data) < 1 + wire.HEADER_SIZE:
        return None
    body = struct.unpack_from("<I", data, 1 + 8)[0]
    end = 1 + wire.HEADER_SIZE + body
    if end > len(data):
        return None
    return data[0], data[1:end], data[end:]


def execute(
    prepared,
    request,
    path: str,
    measure: int,
    deadline: int | None,
    loop_timeout: int | None = LOOP_TIMEOUT_NS,
):
    """Run ``request`` on one execution path; the (status, shapes, timing) it ends in."""
    if path == "sync":
        return prepared.execute_synchronously(request, measure, deadline, loop_timeout)
    if path == "async":
        cb = CollectingCallback()
        launch = prepared.execute(request, measure, deadline, loop_timeout, cb)
        result = cb.wait(30)
        check_status(launch, harness.ALL_STATUSES, "execute (launch)")
        if launch != ErrorStatus.NONE and result[0] != launch:
            raise ContractViolation(
                f"execute launched with {launch.name} but notified {result[0].name}"
            )
        return result
    if path == "burst":
        status, burst = prepared.configure_execution_burst()
        check_status(status, harness.ALL_STATUSES, "configure_execution_burst")
        if burst is None:
            return status, [], NO_TIMING
        return burst.execute(request, measure, deadline, loop_timeout)
    status, fence, callback = prepared.execute_fenced(request, [], measure, deadline, loop_timeout)
    check_status(status, harness.ALL_STATUSES, "execute_fenced (launch)")
    if status != ErrorStatus.NONE:
        return status, [], NO_TIMING
    if fence is not None:
        fence.wait(30)
    status, launched, fenced = callback.get_execution_info()
    check_status(status, harness.ALL_STATUSES, "getExecutionInfo")
    if status != ErrorStatus.NONE and (launched != NO_TIMING or fenced != NO_TIMING):
        raise ContractViolation(f"fenced execution {status.name} reports timing")
    return status, [], NO_TIMING


def test_one_input(data: bytes) -> None:
    parts = split_input(data)
    if parts is None:
        return
    selector, message, pool_bytes = parts
    fixtures = prepared_fixtures()
    chosen = Selection.of(selector, len(fixtures))
    model, prepared = fixtures[chosen.fixture]
    if prepared is None:
        return
    try:
        request = wire.decode_request(message, _POOLS.resolve)
    except wire.WireDecodeError:
        return
    _POOLS.fill(pool_bytes)
    version = HalVersion(getattr(harness.device(), "version", HalVersion.V1_3))
    try:
        validate_request(model, request, version)
        valid = True
    except HalError as e:
        harness.rejected(e)
        valid = False
    path = chosen.path
    qos = version >= HalVersion.V1_3  # deadlines and loop timeouts are HAL 1.3 arguments
    deadline = time.monotonic_ns() - 1 if chosen.past_deadline and qos else None
    loop_timeout = LOOP_TIMEOUT_NS if qos else None
    result = execute(prepared, request, path, int(chosen.measure), deadline, loop_timeout)
    if path == "fenced":  # no output shapes on this path; status and timing are checked
        status = result[0]
    else:
        status = check_execution(
            result, len(model.main.output_indexes), f"{path} execution", version
        )
    allowed = {ErrorStatus.INVALID_ARGUMENT}
    if version < EXECUTION_PATH_SINCE[path]:
        allowed.add(ErrorStatus.GENERAL_FAILURE)  # the method does not exist at this version
    if not valid and status not in allowed:
        raise ContractViolation(
            f"validate_request rejects the request but the {path} execution returned "
            f"{status.name} (HAL {version.label} allows {', '.join(sorted(s.name for s in allowed))})"
        )


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    parts = split_input(data)
    if parts is None:
        return mutate_request_bytes(data, max_size, seed)
    selector, message, pool_bytes = parts
    if seed % 8 == 0:
        selector = (selector + 1 + seed % 255) & 0xFF
    elif seed % 8 == 1:
        pool_bytes = mutate_request_bytes(pool_bytes, 256, seed, bytewise_share=1.0)
    else:
        message = mutate_request_bytes(message, max(0, max_size - 1 - len(pool_bytes)), seed)
    return (bytes([selector]) + message + pool_bytes)[:max_size]


def main(argv: list[str] | None = None) -> None:
    # Decoding and validation compare few arrays: skip the leak plug, keep the speed.
    harness.fuzz_main(
        test_one_input, argv, custom_mutator=custom_mutator, arrays_past_the_hook=False
    )


if __name__ == "__main__":
    main(sys.argv[1:])
