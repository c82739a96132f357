"""Validation agrees with the reference: valid models are accepted; every VTS-style
mutation of a valid model, and every broken request, is rejected with INVALID_ARGUMENT;
the device's own answers to queries are valid and constant."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from driver.hal.types import ErrorStatus
from nnfuzz_pytest.checks import (
    assert_failed_cleanly,
    query_answers,
    query_problems,
    status_name,
)
from nnfuzz_pytest.session import active, models, nn_property
from nnfuzz_pytest.strategies import model_mutations, request_mutations

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_validation]


def test_device_queries_are_valid_and_constant(nn_driver):
    """getCapabilities and (HAL 1.2+) getVersionString, getType, getSupportedExtensions
    and getNumberOfCacheFilesNeeded answer NONE, the same on every call, with valid
    content (VTS BasicTests): performance figures positive and finite, operand
    performance sorted by type without duplicates; a non-empty version string; a known
    device type; extension names in reverse-domain form, unique, their operand types
    with a byte size; at most 32 cache files of each kind."""
    first = query_answers(nn_driver)
    for call in (2, 3):
        again = query_answers(nn_driver)
        changed = [f"{q}: {first[q]!r}, then {again[q]!r}" for q in first if again[q] != first[q]]
        assert not changed, f"queries answered differently on call {call}: " + "; ".join(changed)
    problems = query_problems(first)
    assert not problems, "invalid query answers:\n" + "\n".join(problems)


@nn_property(1.0, case=models())
def test_valid_model_is_accepted(nn_driver, case):
    """getSupportedOperations answers NONE with one flag per operation for a valid model,
    and prepareModel accepts it when every operation is supported."""
    status, supported = nn_driver.supported(case.model)
    assert status == ErrorStatus.NONE, (
        f"getSupportedOperations rejected a valid model: {status_name(status)}"
    )
    operations = len(case.model.main.operations)
    assert len(supported) == operations, (
        f"getSupportedOperations gave {len(supported)} flags for {operations} operations"
    )
    if all(supported):
        status, prepared = nn_driver.prepare(case.model)
        assert status == ErrorStatus.NONE, (
            f"prepareModel rejected a valid model: {status_name(status)}"
        )
        assert prepared is not None and prepared.handle is not None


@nn_property(1.5, case=models(), data=st.data())
def test_model_mutation_is_rejected(nn_driver, case, data):
    """Each VTS mutation family (operand type, rank, scale, zero point, lifetime, role,
    consumers, writers, operation types and indexes, removed/added operands, operations,
    inputs and outputs, execution preference, priority): INVALID_ARGUMENT from
    getSupportedOperations (model mutations) and from prepareModel."""
    mutation = data.draw(model_mutations(case, active().version), label="mutation")
    model_is_bad = mutation.preference == 1 and mutation.priority == 1
    if model_is_bad:
        status, supported = nn_driver.supported(mutation.model)
        assert status == ErrorStatus.INVALID_ARGUMENT, (
            f"getSupportedOperations of an invalid model ({mutation!r}) returned "
            f"{status_name(status)}, expected INVALID_ARGUMENT"
        )
    status, prepared = nn_driver.prepare(
        mutation.model, preference=mutation.preference, priority=mutation.priority
    )
    assert status == ErrorStatus.INVALID_ARGUMENT, (
        f"prepareModel of {mutation!r} returned {status_name(status)}, expected INVALID_ARGUMENT"
    )
    assert prepared is None, f"prepareModel of {mutation!r} returned a prepared model"


@nn_property(1.0, case=models(), data=st.data())
def test_request_mutation_is_rejected_on_every_path(nn_driver, case, data):
    """A request with an input or output removed, wrong dimensions, or a location outside
    its pool: INVALID_ARGUMENT on every execution path of the driver's HAL version, with
    no output shapes and no timing."""
    from hypothesis import assume

    from nnfuzz_pytest.checks import prepare_supported

    mutation = data.draw(request_mutations(case, active().version), label="request")
    prepared = prepare_supported(nn_driver, case.model)
    assume(prepared is not None)
    for path in nn_driver.paths:
        execution = nn_driver.execute(prepared, mutation.request, path)
        assert_failed_cleanly(execution, ErrorStatus.INVALID_ARGUMENT, f"{path}, {mutation!r}")
