"""``nnfuzz specs run|expand`` at the command line: machine-readable output, exit statuses
for nothing to do and missing paths, interrupts, specs that define no test."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from fuzz.cli import main as nnfuzz

SPECS = Path(__file__).resolve().parents[1] / "corpus" / "specs"

ABS_SPEC = """model = Model()
i = Input("i", "TENSOR_FLOAT32", "{2}")
o = Output("o", "TENSOR_FLOAT32", "{2}")
model.Operation("ABS", i).To(o)
Example({i: [1.0, -2.0], o: [1.0, 2.0]})
"""
"""Two tests (the spec and its all-inputs-as-internal variation), HAL 1.0."""

# Line 2 of each raises or signals while the spec's code runs.
RAISES_KEYBOARD_INTERRUPT = "model = Model()\nraise KeyboardInterrupt\n"
SENDS_SIGINT = "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nwhile True: pass\n"


def exit_status(argv: list[str]) -> int:
    try:
        return nnfuzz(argv)
    except SystemExit as e:  # argparse and usage errors
        return e.code


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_specs(**texts: str) -> str:
    """Spec files ``specs/V1_0/NAME.mod.py``; the directory."""
    folder = Path("specs", "V1_0")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / f"{name}.mod.py").write_text(text)
    return "specs"


# --- with --json -, standard output is the JSON document alone -----------------------


@pytest.mark.parametrize(
    "argv, summary",
    [
        # Skipped tests (HAL 1.0 driver) printed "skipped N: ..." lines before the JSON.
        (["specs", "run", str(SPECS), "--driver", "reference-1.0"], "8 passed, 0 failed"),
        (["specs", "run", str(SPECS), "--driver", "reference-1.0", "-k", "mul"], "passed"),
        (["specs", "run", str(SPECS / "V1_0"), "--no-dynamic", "-v"], "0 failed, 0 skipped"),
        (["specs", "expand", str(SPECS / "V1_0")], "test models from 2 spec files -> -"),
    ],
    ids=["run", "run -k", "run -v", "expand"],
)
def test_json_to_standard_output_is_the_whole_of_standard_output(here, capsys, argv, summary):
    assert exit_status([*argv, "--json", "-"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out)  # nothing before or after it
    assert document
    assert summary in err.splitlines()[-1]


def test_failures_go_to_standard_error_with_json_to_standard_output(here, capsys):
    specs = write_specs(a_ok=ABS_SPEC, b_wrong=ABS_SPEC.replace("o: [1.0, 2.0]", "o: [1, 3]"))
    assert exit_status(["specs", "run", specs, "--no-dynamic", "--json", "-"]) == 1
    out, err = capsys.readouterr()
    assert [r["outcome"] for r in json.loads(out)] == ["passed"] * 2 + ["failed"] * 2
    assert "FAILED b_wrong" in err and err.splitlines()[-1] == "2 passed, 2 failed, 0 skipped"


# --- nothing to do, a path that does not exist: usage errors (exit 2), as replay ------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["specs", "run", str(SPECS), "-k", "nomatch"], "matches -k 'nomatch'"),
        (["specs", "expand", str(SPECS), "-k", "nomatch"], "matches -k 'nomatch'"),
        (["replay", str(SPECS / "V1_0" / "mul_broadcast.mod.py"), "-k", "nomatch"], "-k"),
        (["specs", "run", "empty_dir"], "no test model in empty_dir"),
        (["specs", "expand", "empty_dir"], "no test model in empty_dir"),
        (["specs", "run", "/nonexistent"], "no such file or directory: /nonexistent"),
        (["specs", "expand", "/nonexistent"], "no such file or directory: /nonexistent"),
        (["specs", "run", str(SPECS), "missing.mod.py"], "no such file or directory: missing"),
    ],
)
def test_nothing_to_run_or_a_missing_path_is_a_usage_error(here, capsys, argv, message):
    Path("empty_dir").mkdir()
    extra = ["--json", "out.json"] if argv[0] == "specs" else []
    assert exit_status([*argv, *extra]) == 2
    out, err = capsys.readouterr()
    assert message in err.splitlines()[-1] and "Traceback" not in err
    assert not Path("out.json").exists(), "an empty result was written"


# --- a spec that defines no test is reported, not silently counted as nothing -----------


@pytest.mark.parametrize("text", ["", "model = Model()\n"], ids=["empty", "no Example"])
def test_a_spec_without_a_test_is_a_spec_error(here, capsys, text):
    specs = write_specs(a_ok=ABS_SPEC, b_none=text)
    assert exit_status(["specs", "run", specs, "--no-dynamic"]) == 1
    out = capsys.readouterr().out
    assert "FAILED b_none.mod.py: cannot load spec: " in out
    assert "b_none.mod.py: the spec defines no tests (no Example)" in out
    assert out.splitlines()[-1] == "2 passed, 1 failed, 0 skipped"
    assert exit_status(["specs", "expand", specs, "--json", "x.json"]) == 2
    assert "b_none.mod.py: the spec defines no tests (no Example)" in capsys.readouterr().err
    assert [Path(p).name for p in json.loads(Path("x.json").read_text())] == ["a_ok.mod.py"]


# --- interrupts: a spec raising KeyboardInterrupt is its error; a real Ctrl-C stops -------


def test_a_spec_raising_keyboard_interrupt_is_its_error_and_the_run_goes_on(here, capsys):
    specs = write_specs(a_ok=ABS_SPEC, b_raises=RAISES_KEYBOARD_INTERRUPT, c_ok=ABS_SPEC)
    assert exit_status(["specs", "run", specs, "--no-dynamic"]) == 1
    out, err = capsys.readouterr()
    assert "b_raises.mod.py:2: the spec raised KeyboardInterrupt" in out
    assert out.splitlines()[-1] == "4 passed, 1 failed, 0 skipped"
    assert "interrupted" not in err
    assert exit_status(["specs", "expand", specs, "--json", "x.json"]) == 2
    assert "b_raises.mod.py:2: the spec raised KeyboardInterrupt" in capsys.readouterr().err
    assert len(json.loads(Path("x.json").read_text())) == 2


def test_a_real_ctrl_c_while_a_spec_runs_still_stops_the_run(here, capsys):
    specs = write_specs(a_ok=ABS_SPEC, b_sigint=SENDS_SIGINT, c_ok=ABS_SPEC)
    assert exit_status(["specs", "run", specs, "--no-dynamic", "--json", "r.json"]) == 130
    out, err = capsys.readouterr()
    assert "interrupted" in err and out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"
    assert len(json.loads(Path("r.json").read_text())) == 2


@pytest.mark.parametrize("target", ["x.json", "-"])
def test_an_interrupted_expand_writes_what_was_expanded(here, capsys, monkeypatch, target):
    from randomgraph.spec import loader

    specs = write_specs(a_ok=ABS_SPEC, b_ok=ABS_SPEC, c_ok=ABS_SPEC)
    real = loader.load_spec

    def ctrl_c_at_the_third(path, **kwargs):
        if Path(path).name == "c_ok.mod.py":
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C
        return real(path, **kwargs)

    monkeypatch.setattr(loader, "load_spec", ctrl_c_at_the_third)
    assert exit_status(["specs", "expand", specs, "--json", target]) == 130
    out, err = capsys.readouterr()
    text = out if target == "-" else Path(target).read_text()
    assert [Path(p).name for p in json.loads(text)] == ["a_ok.mod.py", "b_ok.mod.py"]
    assert "interrupted" in err
    summary = (err if target == "-" else out).splitlines()[-1]
    assert summary == f"4 test models from 2 spec files -> {target}"


# --- replay shows the outputs ------------------------------------------------------------


@pytest.mark.parametrize("max_elements, shown", [(2, "[1, 2]"), (1, "[1, ...]")])
def test_replay_marks_an_output_cut_at_max_elements(here, capsys, max_elements, shown):
    specs = write_specs(a=ABS_SPEC)
    argv = ["replay", f"{specs}/V1_0/a.mod.py", "--max-elements", str(max_elements)]
    assert exit_status(argv) == 0
    assert f"expected {shown}\n" in capsys.readouterr().out


def test_replay_runs_the_dynamic_output_shape_variant_too(here, capsys):
    """A failure that specs run finds only with unspecified output dims replays too."""
    spec = f"{write_specs(a=ABS_SPEC)}/V1_0/a.mod.py"
    driver = ["--driver", "tests.drivers:wrong_dynamic_shapes"]
    assert exit_status(["specs", "run", spec, *driver]) == 1
    assert exit_status(["specs", "run", spec, *driver, "--no-dynamic"]) == 0
    capsys.readouterr()
    assert exit_status(["replay", spec, *driver]) == 1
    out = capsys.readouterr().out
    assert "== a [dynamic output shape]: FAILED" in out and "== a: PASSED" in out
    assert out.splitlines()[-1] == "2 passed, 2 failed, 0 skipped"
    assert exit_status(["replay", spec, *driver, "--no-dynamic"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


@pytest.mark.parametrize("command", [["specs", "run"], ["replay"]])
def test_timeout_is_the_hang_limit_of_the_driver_session(here, monkeypatch, command):
    # (A hang itself is tested in test_spec.py: this one needs no waiting.)
    from fuzz.commands import specs

    sessions = []
    opened = specs.open_session

    def open_session(spec, timeout):
        sessions.append(opened(spec, timeout))
        return sessions[-1]

    monkeypatch.setattr(specs, "open_session", open_session)
    spec = f"{write_specs(a=ABS_SPEC)}/V1_0/a.mod.py"
    assert exit_status([*command, spec, "--timeout", "0.25", "--no-dynamic"]) == 0
    assert [s.timeout for s in sessions] == [0.25]
