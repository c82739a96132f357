"""Stateful: random driver lifecycles checked against a model of the expected state.

A Hypothesis ``RuleBasedStateMachine`` prepares models, executes them on random paths
(with random pool kinds, timing measured or not, and fences), allocates driver-managed
buffers for their inputs and outputs, copies into and out of them, executes from and
into them, frees buffers and prepared models, and prepares from the compilation cache,
in random order. The machine keeps what each object should hold (prepared models and
their expected outputs; each buffer's role, whether it is initialized and its bytes;
freed tokens) and checks every answer against it; the device's queries must answer the
same after every step. Failures print the shrunk sequence of steps.
"""

from __future__ import annotations

import gc
import itertools
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    precondition,
    rule,
)

from driver.builder import build_request
from driver.hal.types import (
    BufferDesc,
    BufferRole,
    ErrorStatus,
    HalVersion,
    is_scalar_type,
)
from driver.memory import allocate_shared_memory, pool_buffer
from driver.operations.base import array_to_bytes
from nnfuzz_pytest.checks import (
    assert_close,
    assert_failed_cleanly,
    assert_ok,
    assert_same_bits,
    execute_valid,
    query_answers,
    status_name,
)
from nnfuzz_pytest.harness import CacheFiles, Prepared, read_outputs, token_for, with_pool_token
from nnfuzz_pytest.session import active, current, execution_options, models

pytestmark = [pytest.mark.nnfuzz, pytest.mark.nn_stateful]
V = HalVersion
_ids = itertools.count(1)


@dataclass(eq=False)
class PreparedRef:
    """A handle the machine hands around (the real object stays in the machine, so that
    freeing it really drops the last reference)."""

    id: int
    case: object
    from_cache: bool = False

    def __repr__(self) -> str:
        return f"prepared{self.id}{' (from cache)' if self.from_cache else ''}"


@dataclass(eq=False)
class BufferRef:
    id: int
    owner: PreparedRef
    kind: str  # "input" or "output"
    io: int
    token: int
    initialized: bool = False
    data: bytes | None = None

    def __repr__(self) -> str:
        return f"buffer{self.id}({self.kind} {self.io} of {self.owner!r})"


def drop(objects: dict, key: Any) -> None:
    """Forget ``objects[key]`` (a driver's prepared model or buffer) so the driver sees
    it freed. Collect cycles only when dropping the last reference did not free it: a
    full ``gc.collect`` costs tens of milliseconds in a long run's heap, and freeing is
    a frequent step."""
    held = objects.pop(key, None)
    held = getattr(held, "handle", held)  # a Prepared: the driver's own object
    try:
        alive = weakref.ref(held)
    except TypeError:  # not weakly referenceable: cannot tell, so collect
        alive = None
    del held
    if alive is None or alive() is not None:
        gc.collect()


class DriverLifecycle(RuleBasedStateMachine):
    prepared = Bundle("prepared")
    buffers = Bundle("buffers")

    def __init__(self) -> None:
        super().__init__()
        session = active()
        session.runs["test_driver_lifecycle"] += 1
        self.driver = session.driver
        self.version = session.version
        self.live: dict[int, Prepared] = {}
        self.buffer_objects: dict[int, object] = {}
        self.freed_tokens: list[tuple[int, PreparedRef, str, int]] = []
        self.answers: dict | None = None  # the first answer of each device query
        self.cache_files = None

    def teardown(self) -> None:
        if self.cache_files is not None:
            self.cache_files.cleanup()

    def _domains(self) -> bool:
        return self.version >= V.V1_3 and active()._support.get("domains", True)

    # --- preparation ------------------------------------------------------------------
    @rule(target=prepared, case=models())
    def prepare(self, case):
        status, supported = self.driver.supported(case.model)
        assert status == ErrorStatus.NONE, f"getSupportedOperations: {status_name(status)}"
        if not all(supported):
            return multiple()
        ref = PreparedRef(next(_ids), case)
        self.live[ref.id] = self.driver.must_prepare(case.model)
        return ref

    @rule(target=prepared, p=prepared)
    def prepare_from_cache(self, p):
        if p.id not in self.live:
            return multiple()
        n_model, n_data = self.driver.cache_files_needed()
        dev = self.driver.device
        token = token_for(repr(p.case).encode() + bytes([p.id % 256]))
        if (n_model, n_data) == (0, 0):
            status, handle = self.driver.call(
                "prepareModelFromCache",
                lambda: dev.prepare_model_from_cache(None, [], [], token),
            )
            assert status == ErrorStatus.GENERAL_FAILURE and handle is None, (
                "prepareModelFromCache of a driver needing no cache files: "
                f"{status_name(status)}, expected GENERAL_FAILURE"
            )
            return multiple()
        files = CacheFiles(n_model, n_data)
        try:
            model_fds, data_fds = files.open()
            try:
                self.driver.must_prepare(
                    p.case.model, model_cache=model_fds, data_cache=data_fds, token=token
                )
            finally:
                files.close(model_fds, data_fds)
            model_fds, data_fds = files.open()
            try:
                status, handle = self.driver.call(
                    "prepareModelFromCache",
                    lambda: dev.prepare_model_from_cache(None, model_fds, data_fds, token),
                )
            finally:
                files.close(model_fds, data_fds)
        finally:
            files.cleanup()
        assert status == ErrorStatus.NONE and handle is not None, (
            f"prepareModelFromCache right after saving: {status_name(status)}"
        )
        ref = PreparedRef(next(_ids), p.case, from_cache=True)
        self.live[ref.id] = Prepared(p.case.model, handle)
        return ref

    @rule(p=consumes(prepared))
    def free_prepared(self, p):
        drop(self.live, p.id)

    # --- execution --------------------------------------------------------------------
    @rule(p=prepared, data=st.data())
    def execute(self, p, data):
        if p.id not in self.live:
            return
        path = data.draw(st.sampled_from(self.driver.paths), label="path")
        options = data.draw(execution_options(self.driver), label="options")
        outputs = execute_valid(self.driver, self.live[p.id], p.case, path, **options)
        if outputs is None:
            return  # executeFenced of a zero-sized output: refused, as it must be
        assert_close(
            p.case.model, outputs, p.case.expected(), f"{path} vs reference", ignored=p.case.ignored
        )

    # --- memory domains ---------------------------------------------------------------
    @precondition(lambda self: self._domains())
    @rule(target=buffers, p=prepared, data=st.data())
    def allocate(self, p, data):
        if p.id not in self.live:
            return multiple()
        main = p.case.model.main
        roles = [("output", j) for j in range(len(main.output_indexes))] + [
            ("input", k)
            for k, i in enumerate(main.input_indexes)
            if not is_scalar_type(main.operands[i].type) and p.case.inputs[k] is not None
        ]
        kind, io = data.draw(st.sampled_from(roles), label="role")
        role = [BufferRole(0, io, 1.0)]
        ins, outs = (role, []) if kind == "input" else ([], role)
        dev, pm = self.driver.device, self.live[p.id].handle
        status, buffer, token = self.driver.call(
            "allocate", lambda: dev.allocate(BufferDesc(), [pm], ins, outs)
        )
        if status == ErrorStatus.GENERAL_FAILURE and not self.buffer_objects:
            active()._support["domains"] = False  # memory domains are optional
            return multiple()
        assert status == ErrorStatus.NONE and buffer is not None and token > 0, (
            f"allocate ({kind} {io}): {status_name(status)}, token {token}"
        )
        ref = BufferRef(next(_ids), p, kind, io, token)
        self.buffer_objects[ref.id] = buffer
        return ref

    def _value_bytes(self, b: BufferRef) -> tuple[bytes, tuple[int, ...]]:
        main = b.owner.case.model.main
        if b.kind == "input":
            arr = np.asarray(b.owner.case.inputs[b.io])
            t = main.operands[main.input_indexes[b.io]].type
        else:
            arr = np.asarray(b.owner.case.expected()[b.io])
            t = main.operands[main.output_indexes[b.io]].type
        return array_to_bytes(arr, t), tuple(arr.shape)

    @rule(b=buffers)
    def copy_from(self, b):
        data, dims = self._value_bytes(b)
        src = allocate_shared_memory(max(1, len(data)))
        pool_buffer(src)[: len(data)] = data
        buf = self.buffer_objects[b.id]
        status = self.driver.call("copyFrom", lambda: buf.copy_from(src, dims))
        if 0 in dims:
            # A zero-sized value (e.g. no box kept): a dim of 0 means "unknown", so the
            # buffer's dims stay unspecified, which copyFrom must refuse.
            assert status == ErrorStatus.INVALID_ARGUMENT, (
                f"copyFrom into {b!r} with dims {list(dims)}: {status_name(status)}, "
                "expected INVALID_ARGUMENT (0 is an unknown dim)"
            )
            return
        assert status == ErrorStatus.NONE, f"copyFrom into {b!r}: {status_name(status)}"
        b.initialized, b.data = True, data

    @rule(b=buffers)
    def copy_to(self, b):
        size = len(self._value_bytes(b)[0])
        dst = allocate_shared_memory(size)  # exactly the buffer's size, even 0 bytes
        buf = self.buffer_objects[b.id]
        status = self.driver.call("copyTo", lambda: buf.copy_to(dst))
        if not b.initialized:
            assert status == ErrorStatus.GENERAL_FAILURE, (
                f"copyTo from uninitialized {b!r}: {status_name(status)}, expected GENERAL_FAILURE"
            )
            return
        assert status == ErrorStatus.NONE, f"copyTo from {b!r}: {status_name(status)}"
        assert bytes(pool_buffer(dst)[:size]) == b.data, f"{b!r} holds other bytes than written"

    @rule(b=buffers)
    def execute_with_buffer(self, b):
        if b.owner.id not in self.live:
            return
        prepared = self.live[b.owner.id]
        case = b.owner.case
        bundle = build_request(case.model, list(case.inputs))
        if b.kind == "input":
            request = with_pool_token(bundle.request, b.token, input=b.io)
        else:
            request = with_pool_token(bundle.request, b.token, output=b.io)
        execution = self.driver.execute(prepared, request, "sync")
        if b.kind == "input" and not b.initialized:
            assert_failed_cleanly(execution, ErrorStatus.GENERAL_FAILURE, f"{b!r} uninitialized")
            return
        assert execution.ok, f"execution with {b!r}: {execution.describe()}"
        direct = assert_ok(self.driver.run(prepared, case.inputs), "shared-memory execution")
        if b.kind == "input":
            got = read_outputs(case.model, bundle, execution.shapes)
            assert_same_bits(got, direct, f"input from {b!r} vs shared memory", case.ignored)
        else:
            main = case.model.main
            b.initialized = True
            b.data = array_to_bytes(direct[b.io], main.operands[main.output_indexes[b.io]].type)

    @rule(b=buffers, p=prepared)
    def use_buffer_elsewhere(self, b, p):
        """A buffer used by a prepared model it was not allocated for, or in the other
        role: INVALID_ARGUMENT."""
        if p.id not in self.live or (p is b.owner and b.kind == "output"):
            return
        case = p.case
        main = case.model.main
        bundle = build_request(case.model, list(case.inputs))
        if p is b.owner:  # an input buffer as the output
            request = with_pool_token(bundle.request, b.token, output=0)
        elif b.kind == "input" and main.input_indexes:
            request = with_pool_token(
                bundle.request, b.token, input=min(b.io, len(main.input_indexes) - 1)
            )
        else:
            request = with_pool_token(
                bundle.request, b.token, output=min(b.io, len(main.output_indexes) - 1)
            )
        execution = self.driver.execute(self.live[p.id], request, "sync")
        assert_failed_cleanly(execution, ErrorStatus.INVALID_ARGUMENT, f"{b!r} used by {p!r}")

    @rule(b=consumes(buffers))
    def free_buffer(self, b):
        drop(self.buffer_objects, b.id)
        self.freed_tokens.append((b.token, b.owner, b.kind, b.io))

    @precondition(lambda self: bool(self.freed_tokens))
    @rule(data=st.data())
    def use_freed_token(self, data):
        token, owner, kind, io = data.draw(st.sampled_from(self.freed_tokens), label="freed")
        if owner.id not in self.live:
            return
        case = owner.case
        bundle = build_request(case.model, list(case.inputs))
        request = with_pool_token(bundle.request, token, **{kind: io})
        execution = self.driver.execute(self.live[owner.id], request, "sync")
        assert_failed_cleanly(execution, ErrorStatus.INVALID_ARGUMENT, f"freed token {token}")

    # --- invariants -------------------------------------------------------------------
    @invariant()
    def queries_never_change(self):
        """getCapabilities, getVersionString, getType, getSupportedExtensions and
        getNumberOfCacheFilesNeeded answer the same whatever happened in between."""
        answers = query_answers(self.driver)
        if self.answers is None:
            self.answers = answers
        for query, answer in answers.items():
            assert answer == self.answers[query], (
                f"{query} changed during the lifecycle: {self.answers[query]!r}, now {answer!r}"
            )


def test_driver_lifecycle(nn_driver):
    """Random sequences of prepare / execute / allocate / copy / free / prepare from
    cache, checked against the expected state."""
    session = current()
    assert session is not None
    settings = session.settings(0.5)
    settings = type(settings)(settings, stateful_step_count=session.budget.stateful_steps)
    DriverLifecycle.TestCase.settings = settings
    run = DriverLifecycle.TestCase("runTest")
    run.runTest()
