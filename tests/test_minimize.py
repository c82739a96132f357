"""Test-case reduction: choice sequences, graph cuts, dims and values; ``nnfuzz minimize``."""

from __future__ import annotations

import numpy as np
import pytest

from driver.builder import ModelBuilder
from driver.device import ReferenceDevice
from driver.hal.types import OperandLifeTime as L
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType, SymmPerChannelQuantParams
from driver.memory import pool_buffer
from fuzz.cli import main as nnfuzz
from randomgraph.choices import PrngSource, ReplaySource
from randomgraph.differential import (
    CheckOptions,
    DifferentialChecker,
    DiffResult,
    Outcome,
    check_with_dynamic_variant,
    compute_golden,
    reference_values,
    with_outputs,
    with_unknown_output_dims,
)
from randomgraph.generator import GeneratorConfig, generate_with
from randomgraph.minimize import (
    MinimizeOptions,
    Minimizer,
    _dim_candidates,
    fingerprint,
    minimize,
    resized,
    sub_test,
)
from randomgraph.spec.dumper import dump_spec
from randomgraph.testmodel import TestModel

O = OperationType  # noqa: E741 - the project's spelling of operation references


def graph(act: int = 1, dims=(4, 3)) -> TestModel:
    """x -> TANH -> ADD(., c, act) -> MUL(., x) -> output; plus x -> NEG -> output."""
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, dims)
    t1 = m.add_operand(T.TENSOR_FLOAT32, dims)
    m.add_operation(O.TANH, [x], [t1])
    c = m.add_constant(T.TENSOR_FLOAT32, dims, np.linspace(-1.5, 1.0, int(np.prod(dims))))
    t2 = m.add_operand(T.TENSOR_FLOAT32, dims)
    m.add_operation(O.ADD, [t1, c, m.add_scalar(T.INT32, act)], [t2])
    y = m.add_output(T.TENSOR_FLOAT32, dims)
    m.add_operation(O.MUL, [t2, x, m.add_scalar(T.INT32, 0)], [y])
    z = m.add_output(T.TENSOR_FLOAT32, dims)
    m.add_operation(O.NEG, [x], [z])
    values = np.linspace(-2.0, 2.0, int(np.prod(dims)), dtype=np.float32).reshape(dims)
    return TestModel.from_hal("g", m.build(), [values])


def checker(driver: str) -> DifferentialChecker:
    return DifferentialChecker(driver, CheckOptions(timeout=5))


def test_sub_test_feeds_cut_edges_with_reference_values():
    t = graph()
    values = reference_values(t)
    sub = sub_test(t, [1], values)  # the ADD alone
    assert [op.type for op in sub.main.operations] == [O.ADD]
    ins = [sub.main.operands[i] for i in sub.main.input_indexes]
    assert len(ins) == 1 and ins[0].lifetime == L.SUBGRAPH_INPUT
    t1 = values[t.main.operations[0].outputs[0]]
    np.testing.assert_array_equal(ins[0].array(), t1)
    # What the ADD computes alone is exactly what it computed inside the graph.
    golden, _ = compute_golden(sub)
    np.testing.assert_array_equal(golden[0], values[t.main.operations[1].outputs[0]])


def test_sub_test_turns_dropped_readers_into_outputs():
    t = graph()
    sub = sub_test(t, [0, 3], reference_values(t))  # TANH and NEG
    outs = [sub.main.operands[i] for i in sub.main.output_indexes]
    assert len(outs) == 2  # NEG's output and TANH's output (read only by the dropped ADD)
    assert compute_golden(sub)[0]  # the reference runs it


def test_sub_test_makes_a_kept_output_that_nothing_reads_a_model_output():
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (3,))
    unread = m.add_operand(T.TENSOR_FLOAT32, (3,))
    m.add_operation(O.TANH, [x], [unread])  # a temporary no operation reads
    m.add_operation(O.NEG, [x], [m.add_output(T.TENSOR_FLOAT32, (3,))])
    t = TestModel.from_hal("unread", m.build(), [np.array([1, 2, 3], np.float32)])
    sub = sub_test(t, [0], reference_values(t))  # the TANH alone
    assert [sub.main.operands[i].lifetime for i in sub.main.output_indexes] == [L.SUBGRAPH_OUTPUT]
    np.testing.assert_allclose(compute_golden(sub)[0][0], np.tanh([1, 2, 3]), rtol=1e-6)


def test_graph_reduction_keeps_the_failing_operation_only():
    t = graph(act=1)
    c = checker("planted-activation")
    r = c.check(t)
    assert r.outcome == Outcome.WRONG and r.signature == "ADD"
    m = minimize(c, t, r, options=MinimizeOptions(seconds=20))
    assert [op.type for op in m.test.main.operations] == [O.ADD]
    assert m.result.outcome == Outcome.WRONG and m.result.signature == "ADD"
    # Dims shrank and values became simpler while the failure stayed.
    assert np.prod(m.test.main.operands[m.test.main.output_indexes[0]].dimensions) <= 2
    assert any(s.startswith("dims") for s in m.steps), m.steps
    assert c.check(m.test).outcome == Outcome.WRONG


def test_a_candidate_failing_at_another_operation_is_another_bug():
    # planted-activation ignores the activation of ADD and of MUL: from the ADD failure, a
    # candidate that fails only at a MUL is another bug, not a reduction of this one.
    c = checker("planted-activation")
    t = graph(act=1)
    target = c.check(t)
    assert target.outcome == Outcome.WRONG and target.signature == "ADD"
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_FLOAT32, (4,))
    y = m.add_output(T.TENSOR_FLOAT32, (4,))
    m.add_operation(O.MUL, [x, x, m.add_scalar(T.INT32, 3)], [y])  # RELU6 of x * x
    mul_only = TestModel.from_hal("mul", m.build(), [np.array([1, 2, 3, 4], np.float32)])
    other = c.check(mul_only)
    assert other.outcome == Outcome.WRONG and other.signature == "MUL"
    reducer = Minimizer(c, target)
    assert reducer.reproduces(mul_only) is None
    assert reducer.reproduces(t) is not None


class InterruptedAfter:
    """A checker that is interrupted (Ctrl-C) during its ``n``-th check."""

    def __init__(self, inner: DifferentialChecker, n: int):
        self.inner, self.n, self.calls = inner, n, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __setattr__(self, name, value):
        if name == "options":
            self.inner.options = value
        else:
            super().__setattr__(name, value)

    def check(self, test):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.inner.check(test)


def test_an_interrupted_minimization_returns_the_smallest_failure_so_far():
    t = graph(act=1)
    c = checker("planted-activation")
    r = c.check(t)
    full = minimize(c, t, r, options=MinimizeOptions(seconds=20))
    stopped = InterruptedAfter(checker("planted-activation"), n=full.checks // 2)
    m = minimize(stopped, t, r, options=MinimizeOptions(seconds=20))
    assert m.interrupted and not full.interrupted
    assert stopped.calls == full.checks // 2  # no check after the interrupt
    assert 0 < len(m.steps) < len(full.steps)  # the reductions accepted before it stay
    assert len(m.test.main.operations) < len(t.main.operations)
    assert c.check(m.test).outcome == Outcome.WRONG  # what it returns still fails


def test_an_interrupted_minimize_command_writes_what_it_has(tmp_path, capsys, monkeypatch):
    t = graph(act=1)
    spec = tmp_path / "graph.mod.py"
    spec.write_text(dump_spec(with_outputs(t, compute_golden(t)[0])))
    real, calls = DifferentialChecker.check, []

    def check(self, test, **kw):
        calls.append(1)
        if len(calls) == 4:  # the spec passed its check; the reduction has begun
            raise KeyboardInterrupt
        return real(self, test, **kw)

    monkeypatch.setattr(DifferentialChecker, "check", check)
    assert nnfuzz(["minimize", str(spec), "--driver", "planted-activation"]) == 130
    assert "smallest failing graph found so far" in capsys.readouterr().err
    text = (tmp_path / "graph_min.mod.py").read_text()
    assert ", interrupted)" in text and 'model.Operation("ADD"' in text


def test_progress_hears_every_check_and_every_reduction_as_it_happens():
    t = graph(act=1)
    c = checker("planted-activation")
    heard: list[str | None] = []
    m = minimize(c, t, c.check(t), options=MinimizeOptions(seconds=20), on_progress=heard.append)
    assert [h for h in heard if h is not None] == m.steps and m.steps
    assert heard.count(None) == m.checks
    # Each reduction is heard right after the check that found it.
    assert all(heard[i - 1] is None for i, h in enumerate(heard) if h is not None)


def test_minimizing_spends_at_most_its_checks_and_gives_the_checker_back_as_it_was():
    t = graph(act=1)
    c = DifferentialChecker("planted-activation", CheckOptions(timeout=5, metamorphic=("layout",)))
    r = c.check(t)
    assert r.outcome == Outcome.WRONG
    m = minimize(c, t, r, options=MinimizeOptions(seconds=20, max_checks=4))
    assert m.checks == 4 and m.steps
    # The campaign checks its next tests with this checker: the relations stay on.
    assert c.options.metamorphic == ("layout",)


def test_a_graph_reduced_after_the_choice_phase_claims_no_choices():
    t = graph(act=1)
    c = checker("planted-activation")
    m = minimize(
        c,
        t,
        c.check(t),
        choices=(3, 1, 4),
        regenerate=lambda choices, num_ops: None,  # no candidate from the choices
        num_ops=4,
        options=MinimizeOptions(seconds=20, dims=False, values=False),
    )
    assert m.steps and all(s.startswith("graph") for s in m.steps)
    assert m.choices is None and m.num_ops is None  # (3, 1, 4) no longer makes m.test


def test_the_choice_phase_keeps_only_simpler_choice_sequences():
    # Every candidate regenerates the failing graph but records a longer sequence than
    # the one it started from: none is simpler, so the (stripped) original stays.
    t = graph(act=1)
    c = checker("planted-activation")
    m = minimize(
        c,
        t,
        c.check(t),
        choices=(3, 4, 1, 0, 0),
        regenerate=lambda choices, num_ops: (t, (3, 4, 1, 0, 7)),
        num_ops=None,
        options=MinimizeOptions(seconds=20, graph=False, dims=False, values=False),
    )
    assert not any(s.startswith("choices") for s in m.steps), m.steps
    assert m.choices == (3, 4, 1)  # trailing zeros only: a replay past the end draws 0


def test_resized_reinfers_shapes():
    t = graph(dims=(4, 3))
    x = t.main.input_indexes[0]
    const = next(
        i for i, o in enumerate(t.main.operands) if o.lifetime == L.CONSTANT_COPY and o.dimensions
    )
    small = resized(t, {(x, 0): 2, (const, 0): 2})
    assert small is not None
    for i in small.main.output_indexes:
        assert small.main.operands[i].dimensions == [2, 3]
    # Inconsistent sizes (a constant that no longer broadcasts) are refused.
    assert resized(t, {(x, 1): 2}) is None
    # Outputs the test leaves unspecified stay so (a dynamic-shape failure stays one).
    dynamic = with_unknown_output_dims(with_outputs(t, compute_golden(t)[0]))
    small = resized(dynamic, {(x, 0): 2, (const, 0): 2})
    assert small is not None
    for i in small.main.output_indexes:
        assert small.main.operands[i].dimensions == [0, 0]


def test_resized_cuts_the_per_channel_scales_with_their_axis():
    m = ModelBuilder()
    x = m.add_input(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=0.5, zero_point=0)
    scales = SymmPerChannelQuantParams(0, (0.5, 0.25, 0.125))
    weights = np.array([1, 2, 3], np.int8).reshape(3, 1, 1, 1)
    f = m.add_constant(
        T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (3, 1, 1, 1), weights, channel_quant=scales
    )
    b = m.add_constant(T.TENSOR_INT32, (3,), np.array([0, 1, 2], np.int32))
    y = m.add_output(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 3), scale=1.0, zero_point=0)
    pad_stride_act = [m.add_scalar(T.INT32, v) for v in (0, 0, 0, 0, 1, 1, 0)]
    m.add_operation(O.CONV_2D, [x, f, b, *pad_stride_act], [y])
    inputs = [np.array([2, 4, 6, 8], np.uint8).reshape(1, 2, 2, 1)]
    t = TestModel.from_hal("conv", m.build(), inputs)
    small = resized(t, {(f, 0): 2, (b, 0): 2})  # two output channels of three
    assert small is not None
    assert small.main.operands[f].channel_quant == SymmPerChannelQuantParams(0, (0.5, 0.25))
    assert small.main.operands[y].dimensions == [1, 2, 2, 2]
    np.testing.assert_array_equal(compute_golden(small)[0][0], compute_golden(t)[0][0][..., :2])


def test_choice_sequence_shrinks_and_stays_valid():
    config = GeneratorConfig(num_ops=5, max_dim=50, operations=frozenset({O.ADD, O.MUL, O.TANH}))
    c = checker("planted-activation")
    for seed in range(60):
        g = generate_with(PrngSource(seed), config, name="t")
        r = c.check(g.test_model)
        if r.outcome == Outcome.WRONG:
            break
    else:
        raise AssertionError("no failing graph in 60 seeds")

    def regen(choices, ops):
        cfg = GeneratorConfig(**{**config.__dict__, "num_ops": ops or config.num_ops})
        made = generate_with(ReplaySource(choices), cfg, name="t")
        return made.test_model, made.choices

    m = minimize(
        c,
        g.test_model,
        r,
        choices=g.choices,
        regenerate=regen,
        num_ops=5,
        options=MinimizeOptions(seconds=5, graph=False, dims=False, values=False),
    )
    assert m.choices is not None and len(m.choices) < len(g.choices)
    assert any(s.startswith("choices") for s in m.steps)
    again = regen(m.choices, m.num_ops)[0]
    assert fingerprint(again) == fingerprint(m.test)  # the record regenerates the graph
    assert c.check(again).outcome == Outcome.WRONG


def test_minimize_command_writes_a_spec_that_replays(tmp_path, capsys):
    t = graph(act=1)
    golden, _ = compute_golden(t)
    spec = tmp_path / "graph.mod.py"
    spec.write_text(dump_spec(with_outputs(t, golden)))
    assert nnfuzz(["minimize", str(spec), "--driver", "planted-activation", "--seconds", "15"]) == 0
    out = tmp_path / "graph_min.mod.py"
    assert out.exists()
    text = out.read_text()
    assert 'model.Operation("ADD"' in text and "MUL" not in text
    assert nnfuzz(["replay", str(out), "--driver", "planted-activation"]) == 1
    assert nnfuzz(["replay", str(out), "--driver", "reference"]) == 0
    # A passing spec has nothing to minimize.
    assert nnfuzz(["minimize", str(spec), "--driver", "reference"]) == 2
    assert nnfuzz(["minimize", str(spec), "--driver", "planted-activation", "--check"]) == 1
    capsys.readouterr()


class UnknownDimsBug(ReferenceDevice):
    """Zeroes every output of a model that leaves an output's dims unspecified: a bug a
    spec (whose outputs have their real shapes) shows only in its dynamic variant."""

    def prepare_model(self, model, *args, **kw):
        status, prepared = super().prepare_model(model, *args, **kw)
        main = model.main
        if prepared is not None and any(
            0 in main.operands[i].dimensions for i in main.output_indexes
        ):
            original = prepared.execute_synchronously

            def execute(request, *a, **k):
                status, shapes, timing = original(request, *a, **k)
                for arg in request.outputs:
                    loc = arg.location
                    buf = pool_buffer(request.pools[loc.pool_index])
                    buf[loc.offset : loc.offset + loc.length] = bytes(loc.length)
                return status, shapes, timing

            prepared.execute_synchronously = execute
        return status, prepared


def test_a_failure_of_unspecified_output_dims_is_found_from_the_spec(tmp_path, capsys):
    t = graph(act=1)
    golden, _ = compute_golden(t)
    spec_test = with_outputs(t, golden)
    dynamic = with_unknown_output_dims(spec_test)
    assert dynamic is not None
    assert all(set(dynamic.main.operands[i].dimensions) == {0} for i in dynamic.main.output_indexes)
    c = DifferentialChecker(UnknownDimsBug, CheckOptions())
    assert c.check(spec_test).outcome == Outcome.PASS  # the real shapes hide the bug
    form, result = check_with_dynamic_variant(c, spec_test)
    assert form is not spec_test and result.outcome == Outcome.WRONG, result.detail
    # ... and so `nnfuzz minimize --check` reports it, and minimizing reproduces it.
    spec = tmp_path / "graph.mod.py"
    spec.write_text(dump_spec(spec_test))
    driver = "tests.test_minimize:UnknownDimsBug"
    assert nnfuzz(["minimize", str(spec), "--driver", driver, "--check"]) == 1
    assert "(output dims unspecified): wrong" in capsys.readouterr().out
    assert nnfuzz(["minimize", str(spec), "--driver", "reference", "--check"]) == 0
    # A test that opts out of the variant has none.
    spec_test.test_dynamic_output_shape = False
    assert with_unknown_output_dims(spec_test) is None
    assert check_with_dynamic_variant(c, spec_test)[1].outcome == Outcome.PASS


def _failing_spec(tmp_path):
    t = graph(act=1)
    spec = tmp_path / "graph.mod.py"
    spec.write_text(dump_spec(with_outputs(t, compute_golden(t)[0])))
    return spec


MINIMIZE = ["--driver", "planted-activation", "--seconds", "5"]


def test_minimize_out_writes_through_a_link_and_into_a_directory_ending_in_slash(tmp_path):
    # --out LINK replaced the link with a file (its target untouched); --out nodir/sub/
    # created a FILE named sub.
    import os

    spec = _failing_spec(tmp_path)
    target = tmp_path / "target.mod.py"
    target.write_text("# old\n")
    os.symlink(target, tmp_path / "link.mod.py")
    assert nnfuzz(["minimize", str(spec), *MINIMIZE, "--out", str(tmp_path / "link.mod.py")]) == 0
    assert os.path.islink(tmp_path / "link.mod.py")
    assert 'model.Operation("ADD"' in target.read_text()
    assert nnfuzz(["minimize", str(spec), *MINIMIZE, "--out", f"{tmp_path}/nodir/sub/"]) == 0
    assert 'model.Operation("ADD"' in (tmp_path / "nodir/sub/graph_min.mod.py").read_text()


def test_a_minimized_spec_that_cannot_be_written_is_saved_elsewhere(tmp_path, capsys, monkeypatch):
    # The write failing at the end lost the minimized graph, and the message named the
    # internal .tmp file.
    import errno
    import os
    from pathlib import Path

    spec = _failing_spec(tmp_path)
    saved_in = tmp_path / "saved"
    saved_in.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(saved_in))
    real_fsync = os.fsync

    def full(fd):
        real_fsync(fd)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "out.mod.py"
    argv = ["minimize", str(spec), *MINIMIZE, "--out", str(out)]
    monkeypatch.setattr(os, "fsync", full)
    assert nnfuzz(argv) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"nnfuzz: {out}: No space left on device; the output is saved in ")
    assert ".tmp" not in last and not out.exists()
    saved = Path(last.rsplit(" ", 1)[1])
    assert saved.parent == saved_in and 'model.Operation("ADD"' in saved.read_text()


def test_minimize_refuses_an_output_before_minimizing(tmp_path, capsys, monkeypatch):
    import os

    spec = _failing_spec(tmp_path)
    os.mkfifo(tmp_path / "fifo")

    def must_not_run(self, test, **kw):
        raise AssertionError("checked the spec before refusing --out")

    monkeypatch.setattr(DifferentialChecker, "check", must_not_run)
    for out in [tmp_path / "fifo", "/proc/x.mod.py"]:
        try:
            status = nnfuzz(["minimize", str(spec), *MINIMIZE, "--out", str(out)])
        except SystemExit as e:
            status = e.code
        assert status == 2
        assert not (tmp_path / "fifo").is_file()
    # Without --out, next to the spec: that directory is checked too (faked: root may
    # write into a read-only directory).
    monkeypatch.setattr("fuzz.commands.outputs._cannot_create_in", lambda d: "Read-only")
    try:
        status = nnfuzz(["minimize", str(spec), *MINIMIZE])
    except SystemExit as e:
        status = e.code
    assert status == 2 and "(choose another with --out)" in capsys.readouterr().err


def test_minimize_skips_an_expect_failure_test(tmp_path, capsys):
    # Such a test passes when the driver rejects it: a differential check means nothing.
    spec = tmp_path / "rejected.mod.py"
    spec.write_text(
        "i = Input('i', 'TENSOR_FLOAT32', '{2}')\n"
        "o = Output('o', 'TENSOR_FLOAT32', '{2}')\n"
        "Model().Operation('ABS', i).To(o)\n"
        "Example({i: [1.0, -2.0], o: [1.0, 2.0]}).ExpectFailure()\n"
    )
    assert nnfuzz(["minimize", str(spec), "--check"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "== rejected: skipped (an ExpectFailure test)"


def test_a_one_test_spec_minimizes_to_stem_min_judged_by_the_spec_file_criteria(tmp_path, capsys):
    # The test is named graph_wrong; the file is named after the spec, whatever its test.
    spec = _failing_spec(tmp_path)
    spec.write_text(spec.read_text().replace("model=model)", "model=model, name='wrong')"))
    assert nnfuzz(["minimize", str(spec), *MINIMIZE]) == 0
    assert "== graph_wrong: wrong" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.mod.py", "graph_min.mod.py"]
    # Without a criteria line, a spec is judged like any spec file: 'generated'.
    text = (tmp_path / "graph_min.mod.py").read_text()
    assert "criteria: generated" in text


class InconsistentOnlyWithRelations:
    """A checker whose tests are metamorphically inconsistent while its relations are on
    (and pass without them), as a driver whose NCHW layout is wrong."""

    def __init__(self):
        self.options = CheckOptions(metamorphic=("layout",))
        self.relations_seen: list[tuple] = []

    def check(self, test):
        self.relations_seen.append(self.options.metamorphic)
        if self.options.metamorphic:
            return DiffResult(Outcome.INCONSISTENT, signature="layout")
        return DiffResult(Outcome.PASS)


def test_an_inconsistency_is_minimized_with_the_relations_that_find_it():
    c = InconsistentOnlyWithRelations()
    t = graph(act=1)
    m = minimize(c, t, c.check(t), options=MinimizeOptions(seconds=5, dims=False, values=False))
    assert set(c.relations_seen) == {("layout",)}
    assert m.result.outcome == Outcome.INCONSISTENT and m.operations == 1


def test_graph_reduction_tries_the_first_diverging_operation_alone_first():
    t = graph(act=1)
    c = checker("planted-activation")
    r = c.check(t)
    assert r.first_op == 1
    m = minimize(c, t, r, options=MinimizeOptions(seconds=20, dims=False, values=False))
    assert m.steps == ["graph: keep only operation 1 (1 operations)"] and m.checks == 1


def test_dims_shrink_to_one_and_to_half_of_each_size():
    names = [what for what, _ in _dim_candidates(graph(dims=(4, 3)))]
    assert names[:3] == ["every size 4 -> 1", "every size 4 -> 2", "every size 3 -> 1"]


QUANT = T.TENSOR_QUANT8_ASYMM


@pytest.mark.parametrize(
    ("type_", "zero_point", "data", "simpler"),
    [
        (QUANT, 128, [3, 200], [[128] * 2, [129] * 2, [0] * 2, [1] * 2]),
        # The zero point + 1 of 255 is no quant8 value.
        (QUANT, 255, [3, 200], [[255] * 2, [0] * 2, [1] * 2]),
        (T.TENSOR_QUANT8_ASYMM_SIGNED, 127, [1, 1], [[127] * 2, [0] * 2]),
    ],
)
def test_simpler_values_stay_in_the_type_range(type_, zero_point, data, simpler):
    from randomgraph.minimize import _simpler_values
    from randomgraph.testmodel import TestOperand

    o = TestOperand("q", type_, [2], 0.5, zero_point, L.SUBGRAPH_INPUT, data=data)
    assert [values for _, values in _simpler_values(o)] == simpler
