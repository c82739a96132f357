"""The fuzz targets: regression replay, mutators, smoke campaigns, a planted crash.

- Every target replays its seed corpus and its stored reproducers in-process (a fixed
  crash stays fixed; a seed that starts failing is a regression).
- The structure-aware mutators, run strictly, keep producing inputs the targets survive.
- A short atheris campaign per target (child processes, in parallel) ends without a crash.
- A deliberately fragile driver (it indexes operands without a bounds check) is found by
  the ``model`` target within a short budget, triaged, stored and then replayed by
  ``--regress``.
- A campaign stopped by SIGTERM keeps its summary, triage and corpus and exits 130.
- The ``request`` target holds each driver to its own HAL version's contract.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import ClassVar

import pytest

from fuzz import mutators
from fuzz.targets import TARGETS, load
from fuzz.triage import input_files

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"

atheris = pytest.importorskip("atheris")


def _inputs(target: str) -> list[Path]:
    return input_files([CORPUS / target, CORPUS / "crashes" / target])


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_and_reproducers_replay_cleanly(target):
    module = load(target)
    files = _inputs(target)
    assert len(input_files([CORPUS / target])) >= 10, f"corpus/{target} has too few seeds"
    for path in files:
        module.test_one_input(path.read_bytes())  # any exception is a regression


@pytest.mark.parametrize("target", TARGETS)
def test_seed_corpus_stays_small(target):
    files = input_files([CORPUS / target])
    assert len(files) <= 400
    assert max(p.stat().st_size for p in files) <= 16384


def test_dictionary_is_current():
    assert (ROOT / "fuzz" / "nnapi.dict").read_text() == mutators.render_dictionary()


@pytest.mark.parametrize("target", ["model", "request"])
def test_custom_mutators_feed_the_target(target, monkeypatch):
    """The structural mutators run strictly (an exception in them fails the test) and
    the inputs they make are handled by the target; mutated models still decode most of
    the time (the point of being structure-aware)."""
    monkeypatch.setattr(mutators, "STRICT", True)
    module = load(target)
    seeds = [p.read_bytes() for p in input_files([CORPUS / target])]
    rng = random.Random(1234)
    decoded = 0
    runs = 400
    for _ in range(runs):
        data = rng.choice(seeds)
        for _ in range(rng.randrange(1, 4)):
            data = module.custom_mutator(data, 8192, rng.getrandbits(32))
            assert isinstance(data, bytes) and len(data) <= 8192
        module.test_one_input(data)
        if target == "model":
            from driver import wire

            try:
                wire.decode_model(data)
                decoded += 1
            except wire.WireDecodeError:
                pass
    if target == "model":
        assert decoded > runs // 3


def test_model_mutator_changes_one_thing_at_a_time():
    from driver import wire

    seed = (CORPUS / "model").iterdir().__next__().read_bytes()
    original = wire.decode_model(seed, mutators._placeholder_resolver())
    changed = 0
    for s in range(50):
        m = mutators.mutate_model(original, random.Random(s), count=1)
        changed += m != original
    assert changed >= 35  # a few mutations are no-ops (same value drawn)


def test_most_model_mutations_still_decode():
    # Three mutations in four are structural (one field changed, re-encoded): about 90%
    # of the results decode, against 60% were most of them bytewise.
    from driver import wire

    seeds = [p.read_bytes() for p in input_files([CORPUS / "model"])]
    rng = random.Random(7)
    decoded = 0
    for _ in range(400):
        data = mutators.mutate_model_bytes(rng.choice(seeds), 8192, rng.getrandbits(32))
        try:
            wire.decode_model(data)
            decoded += 1
        except wire.WireDecodeError:
            pass
    assert decoded >= 320


@pytest.mark.parametrize("target", ["model", "request"])
def test_custom_mutators_stay_within_max_size(target):
    # libFuzzer hands the mutator a buffer of max_size bytes: a longer result overflows it.
    module = load(target)
    seeds = [p.read_bytes() for p in input_files([CORPUS / target])][:40]
    for k, data in enumerate(seeds * 5):
        for max_size in (len(data), len(data) + 8):
            assert len(module.custom_mutator(data, max_size, k)) <= max_size


def test_a_mutated_models_pools_keep_sharing_their_descriptors():
    from driver import wire
    from driver.hal.types import Memory, Model, Subgraph

    handle = object()
    pools = (Memory("ashmem", 64, handle), Memory("ashmem", 32, handle), Memory("ashmem", 8, 0))
    data = wire.encode_model(Model(Subgraph(), pools=pools)).data
    seen = []

    def record(handle_index: int, name: str, size: int) -> Memory:
        seen.append(handle_index)
        return Memory(name, size, None)

    decoded = wire.decode_model(data, mutators._placeholder_resolver())
    wire.decode_model(wire.encode_model(decoded).data, record)
    assert seen == [0, 0, 1]


def test_mutated_values_stay_in_the_wire_domain():
    # A value the wire cannot carry fails re-encoding, and the structural mutation falls
    # back to bytes: a rank stays <= MAX_RANK and a u32 near a boundary stays a u32.
    from driver import wire

    for s in range(300):
        rng = random.Random(s)
        assert len(mutators._mutate_dims(rng, (1,) * wire.MAX_RANK)) <= wire.MAX_RANK
        for dims in ((0,), (mutators.U32_MAX,)):  # a dimension stepped by one stays a u32
            assert all(0 <= d <= mutators.U32_MAX for d in mutators._mutate_dims(rng, dims))
        for near in (0, 1, mutators.U32_MAX - 1, mutators.U32_MAX):
            assert 0 <= mutators._u32(rng, near) <= mutators.U32_MAX


def test_mutate_model_makes_count_changes(monkeypatch):
    from driver.hal.types import Model, Subgraph

    calls = []
    monkeypatch.setattr(mutators, "_mutate_model_once", lambda m, rng: calls.append(m) or m)
    mutators.mutate_model(Model(Subgraph()), random.Random(0), count=3)
    assert len(calls) == 3


def test_bytewise_mutations_stay_within_max_size():
    for s in range(200):
        for size in (0, 1, 7, 63):
            data = bytes(size)
            assert len(mutators._bytewise(data, size + 1, random.Random(s))) <= size + 1


_OPERAND_FIELD_CHANGES = {
    "type": "type",
    "dimensions": "dimensions",
    "scale": "scale",
    "zero_point": "zero_point",
    "lifetime": "lifetime",
    "location": "location",
    "number_of_consumers": "number_of_consumers",
    "extra_params": "extra_params",
    "fresh_dims": "dimensions",
}


@pytest.mark.parametrize("field", mutators.OPERAND_FIELDS)
def test_mutate_operand_changes_only_the_field_asked_for(field):
    # The execute target's mutation kinds ("operand.scale", ...) name one field each.
    from dataclasses import fields

    from driver.hal.types import DataLocation, Operand

    operand = Operand(3, (2, 3), 1, 0.5, 1, 2, DataLocation(0, 8, 24))
    changed = set()
    for s in range(40):
        got = mutators.mutate_operand(random.Random(s), operand, 1, 64, field)
        changed |= {
            f.name for f in fields(Operand) if getattr(got, f.name) != getattr(operand, f.name)
        }
    assert changed == {_OPERAND_FIELD_CHANGES[field]}


@pytest.mark.parametrize("strict", [True, False])
def test_a_mutator_bug_fails_a_test_but_not_a_campaign(monkeypatch, strict):
    def broken(model, rng, count):
        raise RuntimeError("a mutator bug")

    monkeypatch.setattr(mutators, "mutate_model", broken)
    if strict:  # as the tests set it; a campaign keeps the default
        monkeypatch.setattr(mutators, "STRICT", True)
    seed = sorted((CORPUS / "model").iterdir())[0].read_bytes()
    if strict:
        with pytest.raises(RuntimeError, match="a mutator bug"):
            mutators.mutate_model_bytes(seed, 8192, 1, bytewise_share=0.0)
    else:  # the campaign goes on with a bytewise mutation
        assert isinstance(mutators.mutate_model_bytes(seed, 8192, 1, bytewise_share=0.0), bytes)


@pytest.mark.timeout(60)
def test_mutators_terminate_when_the_fuzzer_bytes_run_out():
    # An exhausted ByteSource draws only zeros. Random.sample, once used to pick two
    # positions to swap, redraws until the second differs from the first when the list
    # has more than 21 entries: forever.
    from driver.hal.types import Operation
    from randomgraph.choices import ByteSource

    op = Operation(0, tuple(range(30)), (30,))
    swapped = 0
    for first in range(256):
        rng = mutators.SourceRandom(ByteSource(bytes([first])))
        got = mutators.mutate_operation(rng, op, 31)
        swapped += sorted(got.inputs) == list(range(30)) and got.inputs != op.inputs
    assert swapped  # some first byte chose the swap, and it returned
    i, j = mutators._two_positions(mutators.SourceRandom(ByteSource(b"")), 30)
    assert i != j


@pytest.mark.parametrize("n", [2, 3, 5, 100, 255, 256])
def test_every_choice_of_an_operator_is_reachable_from_the_fuzzers_bytes(n):
    # A range of n draws k = n.bit_length() bits (redrawing values >= n): the top value
    # needs the top bit.
    from randomgraph.choices import ByteSource

    k = n.bit_length()
    inputs = [v.to_bytes((k + 7) // 8, "big") for v in range(1 << k)]
    picks = {mutators.SourceRandom(ByteSource(data)).randrange(n) for data in inputs}
    assert picks == set(range(n))


def test_a_mutated_index_is_in_range_three_times_in_four():
    in_range = sum(0 <= mutators._index(random.Random(s), 10) < 10 for s in range(1000))
    assert 650 <= in_range <= 850


def test_mutate_request_makes_count_changes(monkeypatch):
    from driver.hal.types import Request

    calls = []
    monkeypatch.setattr(mutators, "_mutate_request_once", lambda r, rng: calls.append(r) or r)
    mutators.mutate_request(Request((), ()), random.Random(0), count=3)
    assert len(calls) == 3


def test_three_structural_mutations_in_ten_make_several_changes(monkeypatch):
    counts = []
    monkeypatch.setattr(mutators, "mutate_model", lambda m, rng, count: counts.append(count) or m)
    seed = sorted((CORPUS / "model").iterdir())[0].read_bytes()
    for s in range(400):
        mutators.mutate_model_bytes(seed, 8192, s, bytewise_share=0.0)
    assert set(counts) == {1, 2, 3, 4}
    assert 240 <= counts.count(1) <= 320


@pytest.mark.parametrize("data", [b"", b"not a model", b"NNWF" + bytes(40)])
def test_an_input_the_decoder_refuses_gets_a_bytewise_mutation(monkeypatch, data):
    monkeypatch.setattr(mutators, "STRICT", True)
    for s in range(20):
        out = mutators.mutate_model_bytes(data, 64, s, bytewise_share=0.0)
        assert isinstance(out, bytes) and len(out) <= 64


def test_per_channel_scales_stay_few_whatever_the_dimensions():
    # The number of scales may come from a dimension: one of 2^32 - 1 hung the mutator.
    from driver.hal.types import DataLocation, Operand

    operand = Operand(11, (mutators.U32_MAX, 3), 1, 0.0, 0, 2, DataLocation(0, 0, 0))
    for s in range(100):
        got = mutators.mutate_operand(random.Random(s), operand, 1, 64, "extra_params")
        assert got.extra_params is None or len(getattr(got.extra_params, "scales", ())) <= 64


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def test_smoke_campaigns_end_without_a_crash(tmp_path):
    """Each target under atheris for a few seconds (all at once, in child processes),
    instrumenting the modules it exercises most so start-up stays short."""
    focus = {
        "model": "driver.wire,driver.validation",
        "request": "driver.validation,driver.device",
        "execute": "randomgraph.choices,driver.executor",
        "cache": "driver.cache",
        "memory": "driver.buffers",
    }
    procs = {}
    for target in TARGETS:
        work = tmp_path / target
        work.mkdir()
        cmd = [
            sys.executable,
            "-m",
            "fuzz.harness",
            target,
            "-max_total_time=4",
            "-timeout=5",
            "-rss_limit_mb=2048",
            f"-artifact_prefix={work}/",
            str(work),
            str(CORPUS / target),
        ]
        procs[target] = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=_env(NNFUZZ_INSTRUMENT=focus[target]),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for target, proc in procs.items():
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{target}:\n{out[-3000:]}"
        assert "Done" in out, f"{target}:\n{out[-3000:]}"
        assert not list((tmp_path / target).glob("crash-*")), out[-3000:]


PLANTED = textwrap.dedent(
    '''
    """A driver with a fragile validator: it reads every operation's operands before
    validating, without checking the indexes (the bug the model target must find)."""
    from driver.device import ReferenceDevice


    class FragileDevice(ReferenceDevice):
        def get_supported_operations(self, model):
            for op in model.main.operations:
                for i in op.inputs:
                    model.main.operands[i]  # no bounds check
            return super().get_supported_operations(model)


    def make():
        return FragileDevice()
    '''
)


def test_planted_validator_bug_is_found_triaged_and_replayed(tmp_path):
    (tmp_path / "planted_fragile.py").write_text(PLANTED)
    crashes = tmp_path / "crashes"
    env = _env(NNFUZZ_INSTRUMENT="driver.wire,driver.validation")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    nnfuzz = [sys.executable, "-m", "fuzz"]
    cmd = [
        *nnfuzz,
        "fuzz",
        "model",
        "--driver=planted_fragile:make",
        "--time=60",
        f"--work={tmp_path / 'work'}",
        f"--crash-dir={crashes}",
        "--minimize-time=8",
        "--seed=1",
    ]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "IndexError" in run.stdout
    stored = list(crashes.glob("crash-*.json"))
    assert len(stored) == 1, run.stdout
    assert '"exception": "IndexError"' in stored[0].read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    regress = [*nnfuzz, "fuzz", "model", "--regress", str(empty), f"--crash-dir={crashes}"]
    # With the fragile driver the stored reproducer still crashes ...
    still = subprocess.run(
        [*regress, "--driver=planted_fragile:make"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert still.returncode == 1, still.stdout
    assert "1 failed" in still.stdout
    # ... and on the (fixed) reference it replays cleanly.
    fixed = subprocess.run(regress, cwd=ROOT, env=env, capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stdout
    assert "1 passed, 0 failed" in fixed.stdout


@pytest.mark.parametrize("target", TARGETS)
def test_targets_are_executable_scripts(target):
    from fuzz.targets import script

    path = script(target)
    assert path.read_text().startswith("#!/usr/bin/env python3\n")
    assert os.access(path, os.X_OK)
    module = load(target)
    assert callable(module.main) and isinstance(module.MAX_LEN, int)


def test_a_libfuzzer_setup_failure_ends_the_child_at_once():
    """A flag libFuzzer cannot parse raises out of ``atheris.Fuzz()``; the child used to
    print the traceback and then hang in interpreter shutdown, holding a campaign with no
    --time (and so no watchdog) forever."""
    run = subprocess.run(
        [sys.executable, "-m", "fuzz.harness", "model", "-seed=abc", "-runs=1"],
        cwd=ROOT,
        env=_env(NNFUZZ_INSTRUMENT="driver.wire"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr[-2000:]
    assert "atheris.Fuzz()" in run.stderr and "ValueError" in run.stderr


def test_regress_command_replays_every_target():
    """``nnfuzz fuzz --regress``: every target's seeds and reproducers, in replay workers
    with the campaign limits, no fuzzing."""
    run = subprocess.run(
        [sys.executable, "-m", "fuzz", "fuzz", "--regress"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for target in TARGETS:
        assert f"{target}: " in run.stdout
    assert run.stdout.strip().splitlines()[-1].endswith(" 0 failed")


def test_signatures_ignore_line_numbers_values_and_runner_frames():
    from fuzz.triage import Outcome, frames_from_dump, project_frames

    frames = project_frames(
        [
            (str(ROOT / "fuzz" / "triage.py"), "_worker"),
            (str(ROOT / "fuzz" / "targets" / "model.py"), "test_one_input"),
            ("/usr/lib/python3/numpy/core.py", "pad"),
            (str(ROOT / "driver" / "validation.py"), "_check_graph"),
            (str(ROOT / "fuzz" / "harness.py"), "check_status"),
        ]
    )
    assert frames == ("fuzz.targets.model:test_one_input", "driver.validation:_check_graph")
    # The innermost frames name a bug: a deep stack keeps its last three.
    deep = [(str(ROOT / "driver" / "executor.py"), f"level_{k}") for k in range(6)]
    assert project_frames(deep) == tuple(f"driver.executor:level_{k}" for k in (3, 4, 5))
    a = Outcome("a", "crash", "ContractViolation", "operand 3 of [1, 2] returned 'X' (said: 7)")
    b = Outcome("b", "crash", "ContractViolation", "operand 12 of [4] returned 'Y' (said: 9)")
    assert a.signature() == b.signature()
    # Another broken contract is another bug, with the same frames or not.
    c = Outcome("c", "crash", "ContractViolation", "a valid model was rejected (said: 4)")
    assert c.signature() != a.signature()
    dump = (
        "Timeout (0:00:05)!\nThread 0x1 (most recent call first):\n"
        f'  File "{ROOT}/driver/operations/pooling.py", line 127 in _windows\n'
        f'  File "{ROOT}/fuzz/targets/execute.py", line 241 in test_one_input\n'
    )
    assert frames_from_dump(dump) == (
        "fuzz.targets.execute:test_one_input",
        "driver.operations.pooling:_windows",
    )


def _execution_cases():
    from driver.hal.types import NO_TIMING, OutputShape, Timing
    from driver.hal.types import ErrorStatus as S
    from driver.hal.types import HalVersion as V

    fits, short = OutputShape((2, 3)), OutputShape((2, 3), is_sufficient=False)
    timed = Timing(5, 7)
    # (status, shapes, timing, driver version, the rule broken or None)
    return [
        (S.NONE, [fits, fits], timed, V.V1_3, None),
        (S.NONE, [fits], timed, V.V1_3, "NONE with 1 output shapes for 2 outputs"),
        (S.NONE, [fits, short], timed, V.V1_3, "NONE but an output is marked insufficient"),
        (S.OUTPUT_INSUFFICIENT_SIZE, [fits, short], NO_TIMING, V.V1_3, None),
        (S.OUTPUT_INSUFFICIENT_SIZE, [fits, fits], NO_TIMING, V.V1_3, "mark one insufficient"),
        (S.OUTPUT_INSUFFICIENT_SIZE, [short], NO_TIMING, V.V1_3, "mark one insufficient"),
        (S.GENERAL_FAILURE, [], NO_TIMING, V.V1_3, None),
        (S.GENERAL_FAILURE, [fits, fits], NO_TIMING, V.V1_3, "GENERAL_FAILURE with output shapes"),
        (S.INVALID_ARGUMENT, [], timed, V.V1_3, "INVALID_ARGUMENT with timing"),
        (S.NONE, [fits, fits], timed, V.V1_2, None),  # shapes and timing exist from 1.2
        (0, [fits, fits], timed, V.V1_3, "returned 0, not an ErrorStatus"),
        (S.NONE, [], NO_TIMING, V.V1_1, None),
        (S.NONE, [fits, fits], NO_TIMING, V.V1_1, "a HAL 1.1 driver reports output shapes"),
        (S.NONE, [], timed, V.V1_0, "a HAL 1.0 driver reports timing"),
    ]


@pytest.mark.parametrize("status, shapes, timing, version, broken", _execution_cases())
def test_the_oracle_holds_execution_results_to_the_hal_rules(
    status, shapes, timing, version, broken
):
    """The execution rules the targets check (two outputs): shapes and timing exist from
    HAL 1.2; NONE reports every output's shape, all sufficient; OUTPUT_INSUFFICIENT_SIZE
    reports every shape and marks one insufficient; any other failure reports neither
    shapes nor timing. A status is an ErrorStatus (a bare 0 is not NONE)."""
    from fuzz.harness import ContractViolation, check_execution

    if broken is None:
        assert check_execution((status, shapes, timing), 2, "execute", version) == status
    else:
        with pytest.raises(ContractViolation, match=broken):
            check_execution((status, shapes, timing), 2, "execute", version)


def test_a_pool_past_the_harness_pools_is_a_bad_handle_and_a_hook_crash_is_itself():
    from driver.hal.types import ErrorStatus, HalError
    from driver.wire import DecodeFailure, WireDecodeError
    from fuzz.harness import ContractViolation, HarnessPools, rejected

    pools = HarnessPools(count=2, capacity=64)
    assert pools.resolve(1, "ashmem", 64).handle is pools.handles[1]
    with pytest.raises(WireDecodeError) as e:
        pools.resolve(2, "ashmem", 64)
    assert e.value.failure == DecodeFailure.BAD_HANDLE
    # Validation turns an exception in an operation hook into GENERAL_FAILURE: the crash
    # must point at the hook, not at the harness.
    rejected(HalError(ErrorStatus.INVALID_ARGUMENT, "bad model"))
    hidden = HalError(ErrorStatus.GENERAL_FAILURE, "hook raised")
    hidden.__cause__ = ZeroDivisionError("in the hook")
    with pytest.raises(ZeroDivisionError):
        rejected(hidden)
    with pytest.raises(ContractViolation):
        rejected(HalError(ErrorStatus.GENERAL_FAILURE, "no cause"))


def test_harness_pools_repeat_the_pattern_from_the_first_byte_of_pool_0():
    """Pool 0 holds the pattern from its first byte (a constant moved from operandValues
    to a pool at the same offset keeps its value); pool k is rotated by k bytes, so the
    pools differ; an empty pattern is zeros."""
    from fuzz.harness import HarnessPools

    pools = HarnessPools(count=3, capacity=8)
    pools.fill(b"abc")
    assert [bytes(h.data) for h in pools.handles] == [b"abcabcab", b"bcabcabc", b"cabcabca"]
    pools.fill(b"")
    assert all(bytes(h.data) == bytes(8) for h in pools.handles)


def test_a_kept_crash_is_saved_under_libfuzzers_name_and_still_raised(tmp_path):
    """The wrapper saves a crashing input (a process dying on the way out lost it) and
    re-raises: a swallowed exception is a crash libFuzzer never sees."""
    import hashlib

    from fuzz import harness

    def crashes(data: bytes) -> None:
        if data == b"bad":
            raise ValueError("bad input")

    run = harness._keeping_crashes(crashes, f"{tmp_path}/")
    run(b"good")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="bad input"):
        run(b"bad")
    saved = tmp_path / f"crash-{hashlib.sha1(b'bad').hexdigest()}"
    assert saved.read_bytes() == b"bad"


def test_only_the_reference_itself_is_held_to_the_references_outcomes():
    # A driver built on the reference (a subclass, like the planted fragile one) is a
    # driver under test: it gets the invalid models too, and other outcomes are allowed.
    from driver.device import ReferenceDevice
    from fuzz.harness import is_reference

    class Derived(ReferenceDevice):
        pass

    assert is_reference(ReferenceDevice())
    assert not is_reference(Derived())


def test_a_hang_is_signed_by_the_thread_running_the_target():
    from fuzz.triage import frames_from_dump

    target = (
        "Thread 0x1 (most recent call first):\n"
        f'  File "{ROOT}/driver/operations/pooling.py", line 127 in _windows\n'
        f'  File "{ROOT}/fuzz/targets/execute.py", line 241 in test_one_input\n'
    )
    reader = (
        "Thread 0x2 (most recent call first):\n"
        f'  File "{ROOT}/driver/isolated.py", line 80 in _read_replies\n'
    )
    expected = ("fuzz.targets.execute:test_one_input", "driver.operations.pooling:_windows")
    for threads in ([target, reader], [reader, target]):
        assert frames_from_dump("Timeout (0:00:05)!\n" + "\n".join(threads)) == expected


def test_array_comparisons_bypass_the_leaking_atheris_hook(monkeypatch):
    # atheris's comparison hook keeps a reference to a non-bool result: under the fuzzer
    # every array comparison in a kernel leaked (1 GB in a 15-minute execute campaign).
    import gc
    import operator
    import weakref

    import numpy as np
    from atheris.version_dependent import CMP_OP_SHIFT_AMOUNT

    from fuzz import harness

    monkeypatch.setattr(atheris, "_trace_cmp", atheris._trace_cmp)  # restored afterwards
    calls = []
    plugged = harness._plugging_comparison_leak(calls.append)
    plugged(b"x")
    plugged(b"y")
    assert calls == [b"x", b"y"]
    hook = atheris._trace_cmp
    assert getattr(hook, "plugs_array_leak", False)
    harness.plug_comparison_leak()
    assert atheris._trace_cmp is hook  # idempotent
    a, b = np.array([1, 2, 3]), np.array([3, 2, 1])
    ops = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)
    for k, op in enumerate(ops):
        code = k << CMP_OP_SHIFT_AMOUNT
        got = hook(a, b, code, 0, False)
        np.testing.assert_array_equal(got, op(a, b))
        assert hook(3, 2, code, 0, False) == op(3, 2)  # scalars still reach atheris
        watched = weakref.ref(got)
        del got
        gc.collect()
        assert watched() is None, "the array result was kept alive"


def test_a_campaign_stopped_by_sigterm_keeps_its_results_and_exits_130(tmp_path):
    """A CI timeout sends SIGTERM: the campaign stops as at its time limit (summary,
    triage, corpus), but the exit status says it did not run its course."""
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "fuzz", "fuzz", "model", "--time=120", f"--work={work}"]
    cmd += [f"--crash-dir={tmp_path / 'crashes'}", "--seed=1"]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_env(NNFUZZ_INSTRUMENT="driver.wire"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = work / "fuzz.log"
    deadline = time.monotonic() + 60
    # Stop it once libFuzzer reports progress (a status line), not during start-up.
    while time.monotonic() < deadline and proc.poll() is None:
        if log.is_file() and "cov:" in log.read_text(errors="replace"):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout[-2000:] + stderr[-2000:]
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1].startswith("interrupted: the corpus is kept")
    runs = next(ln for ln in stdout.splitlines() if ln.startswith("model: "))
    assert int(runs.split()[1]) > 0, runs  # libFuzzer's final stats were read
    assert "triage: nothing found" in stdout
    assert any((work / "corpus").iterdir())
    assert log.read_text().rstrip().endswith("(interrupted)")


# ---------------------------------------------------------------------------------------
# The request target and the driver's HAL version
# ---------------------------------------------------------------------------------------


class _Proxy:
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _invalid_as_general_failure(result: tuple) -> tuple:
    """A HAL result (status first) with INVALID_ARGUMENT answered as GENERAL_FAILURE."""
    from driver.hal.types import ErrorStatus

    status, *rest = result
    if status == ErrorStatus.INVALID_ARGUMENT:
        status = ErrorStatus.GENERAL_FAILURE
    return (status, *rest)


class _GeneralFailurePrepared(_Proxy):
    """The planted bug: a request the reference rejects as INVALID_ARGUMENT is answered
    with GENERAL_FAILURE on the synchronous path."""

    def execute_synchronously(self, *args, **kwargs):
        return _invalid_as_general_failure(self.inner.execute_synchronously(*args, **kwargs))


class _GeneralFailureBurst(_Proxy):
    def execute(self, *args, **kwargs):
        return _invalid_as_general_failure(self.inner.execute(*args, **kwargs))


class _GeneralFailureOnEveryPathPrepared(_GeneralFailurePrepared):
    """GENERAL_FAILURE for an invalid request on the burst and fenced paths too."""

    def configure_execution_burst(self, *args, **kwargs):
        status, burst = self.inner.configure_execution_burst(*args, **kwargs)
        return status, (_GeneralFailureBurst(burst) if burst is not None else None)

    def execute_fenced(self, *args, **kwargs):
        return _invalid_as_general_failure(self.inner.execute_fenced(*args, **kwargs))


class _GeneralFailureDevice(_Proxy):
    """The reference (``inner``) with ``prepared`` wrapping each prepared model."""

    def __init__(self, inner, prepared=_GeneralFailurePrepared):
        super().__init__(inner)
        self._prepared = prepared

    def prepare_model(self, *args, **kwargs):
        status, prepared = self.inner.prepare_model(*args, **kwargs)
        return status, (self._prepared(prepared) if prepared is not None else None)


def general_failure_1_2():
    from driver.registry import load_device

    return _GeneralFailureDevice(load_device("reference-1.2"))


def general_failure_everywhere_1_2():
    from driver.registry import load_device

    return _GeneralFailureDevice(load_device("reference-1.2"), _GeneralFailureOnEveryPathPrepared)


def general_failure_everywhere_1_3():
    from driver.registry import load_device

    return _GeneralFailureDevice(load_device("reference"), _GeneralFailureOnEveryPathPrepared)


def general_failure_1_3():
    from driver.registry import load_device

    return _GeneralFailureDevice(load_device("reference"))


def _replay_request_corpus(monkeypatch, driver: str) -> list[str]:
    """Every request seed and reproducer through the target in process on ``driver``;
    the contract violations it raises."""
    from fuzz.harness import ContractViolation

    monkeypatch.setenv("NNFUZZ_DRIVER", driver)
    module = load("request")
    violations = []
    for path in _inputs("request"):
        try:
            module.test_one_input(path.read_bytes())
        except ContractViolation as e:
            violations.append(f"{path.name}: {e}")
    return violations


@pytest.mark.parametrize("driver", ["reference-1.0", "reference-1.1", "reference-1.2"])
def test_request_corpus_replays_clean_on_older_hal_versions(monkeypatch, driver):
    # Before 1.3 there is no executeFenced, before 1.2 no burst: GENERAL_FAILURE there is
    # the method not existing, not a request validated wrongly.
    assert _replay_request_corpus(monkeypatch, driver) == []


@pytest.mark.parametrize("driver", ["general_failure_1_2", "general_failure_1_3"])
def test_request_target_still_catches_a_wrong_status(monkeypatch, driver):
    violations = _replay_request_corpus(monkeypatch, f"tests.test_fuzz_targets:{driver}")
    assert violations
    for v in violations:
        assert "but the sync execution returned GENERAL_FAILURE" in v, v


@pytest.mark.parametrize(
    "driver, path",
    [("general_failure_everywhere_1_2", "burst"), ("general_failure_everywhere_1_3", "fenced")],
)
def test_a_path_the_drivers_version_has_must_validate_the_request(monkeypatch, driver, path):
    # GENERAL_FAILURE is the answer of a method that does not exist (bursts before 1.2,
    # executeFenced before 1.3), not of one the driver's version has.
    violations = _replay_request_corpus(monkeypatch, f"tests.test_fuzz_targets:{driver}")
    assert any(f"but the {path} execution returned GENERAL_FAILURE" in v for v in violations)


class _Answers:
    """A prepared model whose asynchronous launch returns ``launch`` and notifies
    ``notified``, and whose fenced execution launches fine and then reports ``fenced``
    from getExecutionInfo."""

    def __init__(self, launch, notified, fenced=None):
        self.launch, self.notified, self.fenced = launch, notified, fenced

    def execute(self, request, measure, deadline, loop_timeout, callback):
        from driver.hal.types import NO_TIMING

        callback.notify(self.notified, [], NO_TIMING)
        return self.launch

    def execute_fenced(self, request, wait_for, measure, deadline, loop_timeout):
        from driver.hal.types import ErrorStatus

        return ErrorStatus.NONE, None, self  # no fence: signalled; the callback is self

    def get_execution_info(self):
        return self.fenced


def _paths_cases():
    from driver.hal.types import NO_TIMING, Timing
    from driver.hal.types import ErrorStatus as E

    bad, general = E.INVALID_ARGUMENT, E.GENERAL_FAILURE
    return [
        # A failed launch must be what the callback says too (NONE may still fail later).
        ("async", _Answers(bad, bad), None),
        ("async", _Answers(E.NONE, general), None),
        ("async", _Answers(bad, general), "execute launched with INVALID_ARGUMENT but notified"),
        # A fenced execution that failed reports no timing.
        ("fenced", _Answers(0, 0, (general, NO_TIMING, NO_TIMING)), None),
        ("fenced", _Answers(0, 0, (E.NONE, Timing(5, 5), Timing(9, 9))), None),
        ("fenced", _Answers(0, 0, (general, Timing(5, 5), NO_TIMING)), "reports timing"),
        ("fenced", _Answers(0, 0, (general, NO_TIMING, Timing(5, 5))), "reports timing"),
    ]


@pytest.mark.parametrize("path, prepared, violation", _paths_cases())
def test_the_request_target_holds_each_path_to_its_rule(path, prepared, violation):
    from fuzz.harness import ContractViolation
    from fuzz.targets.request import execute

    if violation is None:
        execute(prepared, None, path, 0, None)
        return
    with pytest.raises(ContractViolation, match=violation):
        execute(prepared, None, path, 0, None)


def test_request_selector_and_layout():
    """selector bits 0-3: the fixture (modulo their number), bits 4-5: the path, bit 6:
    measure timing, bit 7: a deadline already passed; then the REQUEST message, which
    says its length, and the pool bytes (none is fine)."""
    from driver import wire
    from driver.hal.types import Request
    from fuzz.targets.request import Selection, split_input

    cases = [
        (0x00, (0, "sync", False, False)),
        (0x13, (3, "async", False, False)),
        (0x2A, (2, "burst", False, False)),  # fixture 10 of 8
        (0x40, (0, "sync", True, False)),
        (0x80, (0, "sync", False, True)),
        (0xF7, (7, "fenced", True, True)),
    ]
    for selector, (fixture, path, measure, past_deadline) in cases:
        assert Selection.of(selector, 8) == Selection(fixture, path, measure, past_deadline)
    message = wire.encode_request(Request()).data
    assert split_input(b"\x05" + message) == (5, message, b"")
    assert split_input(b"\x05" + message + b"pool") == (5, message, b"pool")
    assert split_input(b"\x05" + message[:-1]) is None


ISOLATED_SEEDS = 60
"""Seeds per target replayed on ``reference@isolated`` (every ``k``-th, spread over the
corpus): each costs a few round trips to the child."""


@pytest.mark.parametrize("target", TARGETS)
def test_targets_give_an_isolated_driver_pools_it_can_map(monkeypatch, target):
    """A pool without a descriptor cannot cross to a driver in another process, which
    then rightly judges it invalid: the harness must not blame the driver for that
    (``get_supported_operations(valid model) returned INVALID_ARGUMENT (ashmem pool has
    no valid handle)`` within 90 runs of ``fuzz model --driver reference@isolated``)."""
    from fuzz import harness
    from fuzz.harness import ContractViolation

    module = load(target)
    pools = module._POOLS
    assert all(h.fd >= 0 for h in pools.handles), "a harness pool without a descriptor"
    monkeypatch.setenv("NNFUZZ_DRIVER", "reference@isolated")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    files = input_files([CORPUS / target])
    step = max(1, len(files) // ISOLATED_SEEDS)
    violations = []
    try:
        for path in files[::step]:
            try:
                module.test_one_input(path.read_bytes())
            except ContractViolation as e:
                violations.append(f"{path.name}: {e}")
    finally:
        for dev in harness._DEVICE_CACHE.values():
            dev.close()
    assert violations == []


# ---------------------------------------------------------------------------------------
# Rejections Android's validation defers to execution
# ---------------------------------------------------------------------------------------


class _AcceptsWhatAndroidDefers(_Proxy):
    """A driver with Android 11's split: its validation lacks the rules Android checks
    only at execution (``HalError.deferrable``), so it accepts such models, prepares them
    and fails when they run. ``strict_too`` also accepts what Android's validation
    rejects: the bug the targets must still report."""

    def __init__(self, inner, strict_too: bool = False):
        super().__init__(inner)
        self.strict_too = strict_too
        self.accepted = 0

    def _accepts_anyway(self, model) -> bool:
        from driver.hal.types import HalError
        from driver.validation import validate_model

        try:
            validate_model(model, self.inner.version)
        except HalError as e:
            self.accepted += 1
            return e.deferrable or self.strict_too
        return False

    def get_supported_operations(self, model):
        from driver.hal.types import ErrorStatus

        if self._accepts_anyway(model):
            return ErrorStatus.NONE, [True] * len(model.main.operations)
        return self.inner.get_supported_operations(model)

    def prepare_model(self, model, *args, **kwargs):
        from driver.hal.types import ErrorStatus

        if self._accepts_anyway(model):
            return ErrorStatus.NONE, _FailsWhenRun()
        return self.inner.prepare_model(model, *args, **kwargs)


class _FailsWhenRun:
    def execute_synchronously(self, *args, **kwargs):
        from driver.hal.types import NO_TIMING, ErrorStatus

        return ErrorStatus.GENERAL_FAILURE, [], NO_TIMING


class _MisreportsWhenRun:
    """Reports the time of a failed execution (timing belongs to successful ones)."""

    def execute_synchronously(self, *args, **kwargs):
        from driver.hal.types import ErrorStatus, Timing

        return ErrorStatus.GENERAL_FAILURE, [], Timing(1, 1)


class _MisreportsWhatAndroidDefers(_AcceptsWhatAndroidDefers):
    def prepare_model(self, model, *args, **kwargs):
        status, prepared = super().prepare_model(model, *args, **kwargs)
        return status, (_MisreportsWhenRun() if isinstance(prepared, _FailsWhenRun) else prepared)


def accepts_what_android_defers():
    from driver.registry import load_device

    return _AcceptsWhatAndroidDefers(load_device("reference"))


def misreports_what_android_defers():
    from driver.registry import load_device

    return _MisreportsWhatAndroidDefers(load_device("reference"))


def accepts_invalid_models():
    from driver.registry import load_device

    return _AcceptsWhatAndroidDefers(load_device("reference"), strict_too=True)


def _run_on(monkeypatch, target: str, driver: str, inputs: list[bytes]) -> tuple[list[str], int]:
    """``inputs`` through the target on ``driver`` (in process): the contract violations
    raised, and how many rejected models the device was asked about."""
    from fuzz import harness
    from fuzz.harness import ContractViolation

    monkeypatch.setenv("NNFUZZ_DRIVER", f"tests.test_fuzz_targets:{driver}")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    module = load(target)
    violations = []
    for data in inputs:
        try:
            module.test_one_input(data)
        except ContractViolation as e:
            violations.append(str(e))
    (device,) = harness._DEVICE_CACHE.values()
    return violations, device.accepted


def _add_model(declared_input: tuple[int, ...], declared_output: tuple[int, ...]) -> bytes:
    """ADD of a [1, 2] input and a constant, as a model target input (wire format)."""
    import numpy as np

    from driver import wire
    from driver.hal.types import OperandType as T
    from driver.hal.types import OperationType as O
    from driver.testing import output, scalar, single_op_model, tensor

    x = tensor(T.TENSOR_FLOAT32, np.ones((1, 2), np.float32), declared_dims=declared_input)
    y = tensor(T.TENSOR_FLOAT32, np.ones((1, 2), np.float32), const=True)
    act = scalar(T.INT32, 0)
    model, _ = single_op_model(O.ADD, [x, y, act], [output(T.TENSOR_FLOAT32, declared_output)])
    return wire.encode_model(model).data


def _execute_corpus() -> list[bytes]:
    return [path.read_bytes() for path in _inputs("execute")]


def _model_inputs() -> list[bytes]:
    """A declared output shape the inputs contradict (Android: OP_FAILED when it runs),
    then a rank-5 input (Android's ADD validate rejects it)."""
    return [_add_model((1, 2), (1, 3)), _add_model((0, 1, 1, 1, 2), (1, 2))]


@pytest.mark.parametrize("target, inputs", [("model", _model_inputs), ("execute", _execute_corpus)])
def test_a_driver_may_accept_what_android_checks_only_at_execution(monkeypatch, target, inputs):
    """A declared output shape the inputs contradict, or a quantization condition
    Android's kernels check, is INVALID_ARGUMENT from the reference; a driver built on
    Android's validation accepts the model and fails when it runs. The targets must not
    call that a contract violation (they did), and must still report a driver that
    accepts what Android's validation rejects."""
    violations, accepted = _run_on(monkeypatch, target, "accepts_what_android_defers", inputs())
    assert violations == []
    assert accepted > 0
    violations, _ = _run_on(monkeypatch, target, "accepts_invalid_models", inputs())
    # The report names the rule the driver missed (the reference's reason).
    missed = [v for v in violations if "(invalid model) returned NONE" in v]
    assert missed, violations[:3]
    assert all("the reference rejects it: main subgraph" in v for v in missed), missed[:3]


def test_the_reference_itself_must_refuse_what_android_defers(monkeypatch):
    # Another driver may accept a model whose rejection Android leaves to execution; the
    # reference (what ``is_reference`` names) rejects it, and must go on doing so.
    from fuzz import harness

    monkeypatch.setattr(harness, "is_reference", lambda dev: True)
    message = _first_violation(monkeypatch, "execute", "accepts_what_android_defers")
    assert "(invalid model) returned NONE" in message


def test_a_prepared_model_android_defers_is_executed_and_checked(monkeypatch):
    # A driver may prepare it; its execution is then held to the HAL's rules like any other.
    message = _first_violation(monkeypatch, "execute", "misreports_what_android_defers")
    assert message.startswith("execution (rejected model): GENERAL_FAILURE with timing"), message


class _FailsToPrepare(_Proxy):
    accepted = 0

    def prepare_model(self, *args, **kwargs):
        from driver.hal.types import ErrorStatus

        return ErrorStatus.GENERAL_FAILURE, None


def fails_to_prepare():
    from driver.registry import load_device

    return _FailsToPrepare(load_device("reference"))


@pytest.mark.parametrize("is_reference", [True, False])
def test_only_the_reference_must_prepare_every_generated_model(monkeypatch, is_reference):
    # GENERAL_FAILURE is a driver's right (out of memory, say); the reference has none.
    from fuzz import harness

    monkeypatch.setattr(harness, "is_reference", lambda dev: is_reference)
    violations, _ = _run_on(monkeypatch, "execute", "fails_to_prepare", _execute_corpus()[:30])
    refused = [v for v in violations if "prepare_model(valid model, mutation none)" in v]
    assert bool(refused) == is_reference, violations[:3]


# ---------------------------------------------------------------------------------------
# What the targets hold a driver to
# ---------------------------------------------------------------------------------------


class _BreaksTheHal(_Proxy):
    """A driver that answers a valid model wrongly, one way (``how``)."""

    def __init__(self, inner, how: str):
        super().__init__(inner)
        self.how = how

    def get_supported_operations(self, model):
        status, flags = self.inner.get_supported_operations(model)
        if self.how == "one flag too many":
            return status, [*flags, True]
        if self.how == "a bare 0 for NONE":
            return int(status), flags
        return status, flags

    def prepare_model(self, model, *args, **kwargs):
        from driver.hal.types import ErrorStatus

        status, prepared = self.inner.prepare_model(model, *args, **kwargs)
        if self.how == "NONE without a prepared model":
            return status, None
        if self.how == "GENERAL_FAILURE with a prepared model":
            return ErrorStatus.GENERAL_FAILURE, prepared
        return status, prepared


def breaks_the_hal(how: str):
    from driver.registry import load_device

    return lambda: _BreaksTheHal(load_device("reference"), how)


too_many_flags = breaks_the_hal("one flag too many")
bare_zero_status = breaks_the_hal("a bare 0 for NONE")
none_without_model = breaks_the_hal("NONE without a prepared model")
failure_with_model = breaks_the_hal("GENERAL_FAILURE with a prepared model")


@pytest.mark.parametrize(
    "driver, report",
    [
        ("too_many_flags", "2 support flags for 1 operations"),
        (
            "bare_zero_status",
            "get_supported_operations(valid model) returned 0, not an ErrorStatus",
        ),
        ("none_without_model", "prepare_model returned NONE with None"),
        ("failure_with_model", "prepare_model returned GENERAL_FAILURE with <"),
    ],
)
def test_the_model_target_reports_a_driver_that_answers_a_valid_model_wrongly(
    monkeypatch, driver, report
):
    from fuzz import harness
    from fuzz.harness import ContractViolation

    monkeypatch.setenv("NNFUZZ_DRIVER", f"tests.test_fuzz_targets:{driver}")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    with pytest.raises(ContractViolation) as e:
        load("model").test_one_input(_add_model((1, 2), (1, 2)))
    assert report in str(e.value)


def test_the_model_target_checks_that_the_reported_minimum_version_is_the_lowest():
    from driver import wire
    from driver.hal.types import HalVersion as V
    from fuzz.harness import ContractViolation
    from fuzz.targets import model as target

    add = wire.decode_model(_add_model((1, 2), (1, 2)))  # a HAL 1.0 model
    target._check_minimum_version(add, V.V1_0, V.V1_3)
    with pytest.raises(ContractViolation, match="minimum version V1_2 but V1_1 accepts it"):
        target._check_minimum_version(add, V.V1_2, V.V1_3)


def test_the_reference_prepares_a_valid_model_unless_an_operation_is_unsupported():
    from driver import wire
    from driver.hal.types import ErrorStatus as S
    from driver.registry import load_device
    from fuzz.targets import model as target

    add = wire.decode_model(_add_model((1, 2), (1, 2)))
    reference, other = load_device("reference"), _Proxy(load_device("reference"))
    cannot_prepare = {S.GENERAL_FAILURE, S.DEVICE_UNAVAILABLE}
    cannot_prepare |= {S.RESOURCE_EXHAUSTED_TRANSIENT, S.RESOURCE_EXHAUSTED_PERSISTENT}
    assert target._prepare_outcomes(reference, add, [True]) == {S.NONE}
    assert target._prepare_outcomes(reference, add, [False]) == {S.GENERAL_FAILURE}
    assert target._prepare_outcomes(other, add, [False]) == {S.NONE} | cannot_prepare


class _FailsEveryExecution(_Proxy):
    def prepare_model(self, *args, **kwargs):
        status, prepared = self.inner.prepare_model(*args, **kwargs)
        return status, (_FailsWhenRun() if prepared is not None else None)


def fails_every_execution():
    from driver.registry import load_device

    return _FailsEveryExecution(load_device("reference"))


def test_the_execute_target_reports_a_driver_that_fails_a_generated_model(monkeypatch):
    from fuzz import harness
    from fuzz.harness import ContractViolation

    monkeypatch.setenv("NNFUZZ_DRIVER", "tests.test_fuzz_targets:fails_every_execution")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    module = load("execute")
    violations = []
    for data in _execute_corpus()[:40]:
        try:
            module.test_one_input(data)
        except ContractViolation as e:
            violations.append(str(e))
    expected = "a generated model with its own inputs failed to execute: GENERAL_FAILURE"
    assert any(expected in v for v in violations), violations[:3]


@pytest.mark.parametrize("driver", ["reference-1.0", "reference-1.2"])
def test_the_execute_target_gives_an_older_driver_models_it_can_express(monkeypatch, driver):
    # A 1.2 driver given a 1.3 model (or a loop timeout) rightly refuses it: no finding.
    from fuzz import harness

    monkeypatch.setenv("NNFUZZ_DRIVER", driver)
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    module = load("execute")
    for data in _execute_corpus()[::3]:
        module.test_one_input(data)


class _ForgetfulBuffer(_Proxy):
    """copy_to says NONE and writes nothing."""

    def copy_to(self, dst):
        from driver.hal.types import ErrorStatus

        return ErrorStatus.NONE


class _ForgetfulBuffers(_Proxy):
    def allocate(self, *args, **kwargs):
        status, buffer, token = self.inner.allocate(*args, **kwargs)
        return status, (_ForgetfulBuffer(buffer) if buffer is not None else None), token


def forgetful_buffers():
    from driver.registry import load_device

    return _ForgetfulBuffers(load_device("reference"))


class _FirstCopyOnlyBuffer(_Proxy):
    """copy_from says NONE every time and copies only the first time."""

    def __init__(self, inner):
        super().__init__(inner)
        self.filled = False

    def copy_from(self, src, dims):
        from driver.hal.types import ErrorStatus

        if self.filled:
            return ErrorStatus.NONE
        status = self.inner.copy_from(src, dims)
        self.filled = status == ErrorStatus.NONE
        return status


class _FirstCopyToOnlyBuffer(_Proxy):
    """copy_to says NONE every time and writes only the first time."""

    def __init__(self, inner):
        super().__init__(inner)
        self.written = False

    def copy_to(self, dst):
        from driver.hal.types import ErrorStatus

        if self.written:
            return ErrorStatus.NONE
        status = self.inner.copy_to(dst)
        self.written = status == ErrorStatus.NONE
        return status


class _WrappedBuffers(_Proxy):
    def __init__(self, inner, wrap):
        super().__init__(inner)
        self.wrap = wrap

    def allocate(self, *args, **kwargs):
        status, buffer, token = self.inner.allocate(*args, **kwargs)
        return status, (self.wrap(buffer) if buffer is not None else None), token


def stuck_buffers():
    from driver.registry import load_device

    return _WrappedBuffers(load_device("reference"), _FirstCopyOnlyBuffer)


def lazy_copy_to_buffers():
    from driver.registry import load_device

    return _WrappedBuffers(load_device("reference"), _FirstCopyToOnlyBuffer)


class _HoardingBuffers(_Proxy):
    """Keeps every buffer it allocates, so a freed buffer's token goes on working."""

    def __init__(self, inner):
        super().__init__(inner)
        self.kept = []

    def allocate(self, *args, **kwargs):
        status, buffer, token = self.inner.allocate(*args, **kwargs)
        self.kept.append(buffer)
        return status, buffer, token


def hoarding_buffers():
    from driver.registry import load_device

    return _HoardingBuffers(load_device("reference"))


class _FailingCopyTo(_Proxy):
    """copy_to fails, whatever copy_from put there."""

    def copy_to(self, dst):
        from driver.hal.types import ErrorStatus

        return ErrorStatus.GENERAL_FAILURE


class _BadBuffers(_Proxy):
    def __init__(self, inner, how: str):
        super().__init__(inner)
        self.how = how

    def allocate(self, *args, **kwargs):
        status, buffer, token = self.inner.allocate(*args, **kwargs)
        if buffer is None:
            return status, buffer, token
        if self.how == "token 0":
            return status, buffer, 0
        return status, _FailingCopyTo(buffer), token


def _on_reference(wrapper, *args):
    """The reference driver behind ``wrapper`` (a broken-driver proxy of this module)."""
    from driver.registry import load_device

    return wrapper(load_device("reference"), *args)


def zero_tokens():
    return _on_reference(_BadBuffers, "token 0")


def failing_copy_to():
    return _on_reference(_BadBuffers, "failing copy_to")


def _first_violation(monkeypatch, target: str, driver: str) -> str:
    """The first contract violation that ``target``'s corpus (seeds and reproducers),
    replayed in process, finds in ``driver`` (a factory of this module)."""
    from fuzz import harness
    from fuzz.harness import ContractViolation
    from fuzz.targets import request

    monkeypatch.setenv("NNFUZZ_DRIVER", f"tests.test_fuzz_targets:{driver}")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    monkeypatch.setattr(request, "_PREPARED", {})
    module = load(target)
    for path in _inputs(target):
        try:
            module.test_one_input(path.read_bytes())
        except ContractViolation as e:
            return str(e)
    raise AssertionError(f"no {target} input caught {driver}")


def test_cache_inputs_count_model_files_then_data_files():
    """flags bits 0-1: model-cache files, bits 2-3: data-cache files; each file a u32
    length and its bytes (a length past the end takes what remains)."""
    from fuzz.targets.cache import FORGED, TOKEN_SIZE, build, parse

    token = bytes(range(TOKEN_SIZE))
    for model_files, data_files in [([b"m"], []), ([], [b"d1", b"d2"]), ([b"a", b""], [b"xyz"])]:
        data = build(FORGED, token, model_files, data_files)
        flags = FORGED | len(model_files) | len(data_files) << 2
        assert parse(data) == (flags, token, model_files, data_files)
    cut = bytes([1]) + token + (100).to_bytes(4, "little") + b"short"
    assert parse(cut) == (1, token, [b"short"], [])


class _BadCacheRestores(_Proxy):
    """prepare_model_from_cache answers a restore wrongly, one way (``how``)."""

    def __init__(self, inner, how: str):
        super().__init__(inner)
        self.how = how

    def prepare_model_from_cache(self, *args, **kwargs):
        from driver.hal.types import Model, Operation, Subgraph

        status, prepared = self.inner.prepare_model_from_cache(*args, **kwargs)
        if prepared is None:
            return status, None
        if self.how == "NONE without a model":
            return status, None
        never_written = _Proxy(prepared)  # an ADD of operands that do not exist
        never_written.model = Model(Subgraph((), (Operation(0, (5, 6, 7), (8,)),)))
        return status, never_written


def restores_nothing():
    return _on_reference(_BadCacheRestores, "NONE without a model")


def restores_a_model_never_written():
    return _on_reference(_BadCacheRestores, "a model never written")


@pytest.mark.parametrize(
    "target, driver, violation",
    [
        # copy_from copies non-zero bytes: from zeros, writing nothing gave "the same bytes".
        ("memory", "forgetful_buffers", "copy_to did not give back the bytes of copy_from"),
        ("memory", "hoarding_buffers", "an execution using a freed buffer's token succeeded"),
        # Each copy_from copies other bytes: a buffer keeping an older copy's shows.
        ("memory", "stuck_buffers", "copy_to did not give back the bytes of copy_from"),
        ("memory", "zero_tokens", "allocate returned NONE with buffer"),  # a token is > 0
        ("memory", "failing_copy_to", "copy_to of "),
        ("cache", "restores_nothing", "prepare_model_from_cache returned NONE and None"),
        ("cache", "restores_a_model_never_written", "a cache restored a model the driver never"),
    ],
)
def test_a_target_reports_the_rule_a_broken_driver_breaks(monkeypatch, target, driver, violation):
    """The target's corpus, replayed on a driver with a broken IBuffer or cache restore:
    the first contract violation is the one that driver commits."""
    message = _first_violation(monkeypatch, target, driver)
    assert message.startswith(violation), message


# The memory target's draws for one step each (see fuzz/targets/memory.py), on the
# mul_scalar_activation fixture (inputs x: 2x2, w: 2, act: INT32; output 2x2 float32):
_STEP_DRAWS = {
    # a 16-byte buffer for input x, or for the output
    "allocate input": (0, 1, 0, 0, 0, 0, 0, 0),
    "allocate output": (0, 1, 0, 1, 0, 0, 0, 0),
    # copy_from a pool of the right size (ashmem), or one byte larger
    "copy_from": (0, 1, 1),
    "copy_from 17 bytes": (3, 1, 1),
    # copy_to a pool of the right size (ashmem), one byte larger, or a hardware_buffer
    "copy_to": (0, 1),
    "copy_to 17 bytes": (3, 1),
    "copy_to hardware_buffer": (0, 0),
    # execute with the inputs in a pool and the output in the (live) buffer
    "execute into the buffer": (1, 1, 1, 1, 0, 0),
}


def _memory_session(monkeypatch, driver: str, steps: list[str]):
    """A memory-target session on ``driver`` that takes ``steps`` (keys of _STEP_DRAWS)
    when its steps are called in that order."""
    from fuzz import harness
    from fuzz.targets import memory, request
    from randomgraph.choices import ByteSource

    monkeypatch.setenv("NNFUZZ_DRIVER", driver)
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    monkeypatch.setattr(request, "_PREPARED", {})
    source = ByteSource(b"")
    source.force(*(v for step in steps for v in _STEP_DRAWS[step]))
    return memory._Session(source)


def _take(session, steps: list[str]) -> None:
    for step in steps:
        getattr(session, step.split()[0])()
    assert session.live and session.live[0].size == 16  # the steps took these draws


@pytest.mark.parametrize(
    "steps",
    [
        # An execution wrote the buffer: copy_from's bytes are no longer expected back.
        ["allocate output", "copy_from", "execute into the buffer", "copy_to"],
        # A copy_from that failed (wrong size) put nothing there to expect back.
        ["allocate input", "copy_from 17 bytes", "copy_to"],
        # copy_to may fail into a pool of another size or a memory the driver cannot map.
        ["allocate input", "copy_from", "copy_to 17 bytes"],
        ["allocate input", "copy_from", "copy_to hardware_buffer"],
    ],
)
def test_the_memory_target_holds_the_reference_to_no_rule_it_does_not_have(monkeypatch, steps):
    _take(_memory_session(monkeypatch, "reference", steps), steps)


@pytest.mark.parametrize(
    ("driver", "steps"),
    [
        # copy_to's destination is cleared first: the second copy_to writing nothing shows.
        ("lazy_copy_to_buffers", ["allocate input", "copy_from", "copy_to", "copy_to"]),
        # Each copy_from copies other bytes: a buffer keeping the first copy's shows.
        ("stuck_buffers", ["allocate input", "copy_from", "copy_to", "copy_from", "copy_to"]),
    ],
)
def test_the_memory_target_sees_a_copy_to_that_gives_older_bytes(monkeypatch, driver, steps):
    from fuzz.harness import ContractViolation

    _take(_memory_session(monkeypatch, "reference", steps), steps)
    broken = _memory_session(monkeypatch, f"tests.test_fuzz_targets:{driver}", steps)
    with pytest.raises(ContractViolation, match="did not give back the bytes of copy_from"):
        _take(broken, steps)


def test_a_memory_session_ends_when_the_fuzzers_bytes_run_out():
    from fuzz.targets import memory
    from randomgraph.choices import ByteSource

    source = ByteSource(bytes([len(memory.STEPS) - 1]))  # one step: free (nothing live)
    memory.run(source)
    assert source.record == [len(memory.STEPS) - 1]


class _RecordsCacheDeadlines(_Proxy):
    given: ClassVar[list] = []

    def prepare_model_from_cache(self, deadline, *args, **kwargs):
        _RecordsCacheDeadlines.given.append((deadline, time.monotonic_ns()))
        return self.inner.prepare_model_from_cache(deadline, *args, **kwargs)


def records_cache_deadlines():
    from driver.registry import load_device

    return _RecordsCacheDeadlines(load_device("reference"))


def test_cache_flag_bit_5_passes_a_deadline_already_passed(monkeypatch):
    from fuzz import harness
    from fuzz.targets.cache import DEADLINE_PASSED, build

    monkeypatch.setenv("NNFUZZ_DRIVER", "tests.test_fuzz_targets:records_cache_deadlines")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    monkeypatch.setattr(_RecordsCacheDeadlines, "given", [])
    module = load("cache")
    module.test_one_input(build(0, b"token", [b"m"], [b"d"]))
    module.test_one_input(build(DEADLINE_PASSED, b"token", [b"m"], [b"d"]))
    (no_deadline, _), (deadline, called_at) = _RecordsCacheDeadlines.given
    assert no_deadline is None and deadline is not None and deadline < called_at


@pytest.mark.parametrize("error", ["CacheError", "IndexError"])
def test_a_forged_cache_may_only_be_refused_with_a_cache_error(monkeypatch, error):
    from driver import cache
    from fuzz.targets.cache import FORGED, build

    def decode_cache(*args, **kwargs):
        raise getattr(cache, error, None) or IndexError("the parser read past its end")

    monkeypatch.setattr(cache, "decode_cache", decode_cache)
    data = build(FORGED, b"token", [b"model body"], [b"data body"])
    if error == "CacheError":
        load("cache").test_one_input(data)
    else:
        with pytest.raises(IndexError):
            load("cache").test_one_input(data)


class _RecordsHal13Arguments(_Proxy):
    """A 1.2 driver whose prepared models record the deadline and loop timeout given."""

    given: ClassVar[list[tuple]] = []

    def prepare_model(self, *args, **kwargs):
        status, prepared = self.inner.prepare_model(*args, **kwargs)
        return status, (_RecordingPrepared(prepared) if prepared is not None else None)


class _RecordingPrepared(_Proxy):
    def execute_synchronously(self, request, measure, deadline, loop_timeout):
        _RecordsHal13Arguments.given.append((deadline, loop_timeout))
        return self.inner.execute_synchronously(request, measure, deadline, loop_timeout)


def records_hal13_arguments():
    from driver.registry import load_device

    return _RecordsHal13Arguments(load_device("reference-1.2"))


@pytest.mark.parametrize("target", ["request", "execute"])
def test_an_older_driver_gets_no_deadline_nor_loop_timeout(monkeypatch, target):
    # Deadlines and loop timeouts are HAL 1.3 arguments: the runtime sends a 1.2 driver
    # neither, so its validation is reached.
    from fuzz import harness
    from fuzz.targets import request

    monkeypatch.setenv("NNFUZZ_DRIVER", "tests.test_fuzz_targets:records_hal13_arguments")
    monkeypatch.setattr(harness, "_DEVICE_CACHE", {})
    monkeypatch.setattr(request, "_PREPARED", {})
    monkeypatch.setattr(_RecordsHal13Arguments, "given", [])
    module = load(target)
    for path in _inputs(target)[::4]:
        module.test_one_input(path.read_bytes())
    assert _RecordsHal13Arguments.given
    assert set(_RecordsHal13Arguments.given) == {(None, None)}
