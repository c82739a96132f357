"""Bad command lines and bad files get a one-line message and exit status 2 (usage) from
every ``nnfuzz`` command — never a traceback; a run that found nothing to do says so."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from fuzz.cli import main as nnfuzz

CORPUS_SPEC = (
    Path(__file__).resolve().parents[1] / "corpus" / "specs" / "V1_0" / "mul_broadcast.mod.py"
)

CORPUS_MODEL = CORPUS_SPEC.parents[2] / "model" / "seed-abs_float32"


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Bad inputs in the working directory: binary, empty and broken specs."""
    monkeypatch.chdir(tmp_path)
    Path("binary.mod.py").write_bytes(b"\x7b\xd4\x70\x52\x00\xff")
    Path("empty.mod.py").write_text("# no model, no example\n")
    Path("broken.mod.py").write_text("model = Model(\n")
    Path("exits.mod.py").write_text("import sys\nsys.exit(0)\n")
    Path("badvalue.mod.py").write_text(ABS_SPEC.format(example="{i: ['a', 'b'], o: [1.0, 2.0]}"))
    Path("invalid.mod.py").write_text(ABS_SPEC.format(example=GOOD_EXAMPLE).replace("ABS", "ADD"))
    Path("corrupt.bin").write_bytes(b"NNFX\x00\x01\x00\x00")
    # Output paths that are no regular file (never run with a device node: a test that
    # went wrong could replace it).
    Path("adir").mkdir()
    os.mkfifo("fifo")
    os.symlink("nowhere", "dangling")
    return tmp_path


# One ABS operation (so ADD in its place lacks inputs); the Example is on line 5.
ABS_SPEC = """model = Model()
i = Input("i", "TENSOR_FLOAT32", "{{2}}")
o = Output("o", "TENSOR_FLOAT32", "{{2}}")
model.Operation("ABS", i).To(o)
Example({example})
"""
GOOD_EXAMPLE = "{i: [1.0, -2.0], o: [1.0, 2.0]}"


def exit_status(argv: list[str]) -> int:
    try:
        return nnfuzz(argv)
    except SystemExit as e:  # argparse usage errors
        return e.code


def interrupt_call(monkeypatch, owner, name: str, call: int) -> None:
    """Call number ``call`` of ``owner.name`` raises KeyboardInterrupt, as Ctrl-C there
    would; the calls before it run as usual."""
    real = getattr(owner, name)
    calls = itertools.count(1)

    def interrupting(*args, **kwargs):
        if next(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupting)


USAGE_ERRORS = [
    # (command line, what the message must say)
    (["replay", "missing.mod.py"], "missing.mod.py: cannot read: No such file"),
    (["replay", "binary.mod.py"], "binary.mod.py: not a spec file: byte 1 is not UTF-8"),
    (["replay", "broken.mod.py"], "broken.mod.py:1: syntax error"),
    (["replay", "empty.mod.py"], "no test model in empty.mod.py"),
    (["replay", str(CORPUS_SPEC), "-k", "zzz"], "matches -k 'zzz'"),
    (["replay", str(CORPUS_SPEC), "--max-elements", "-1"], "--max-elements: must be >= 1"),
    (["dot", "binary.mod.py"], "not a spec file"),
    # A spec that cannot be loaded: one line naming file, line and problem, exit 2 —
    # also when it calls sys.exit (that ended nnfuzz with status 0) or its Example values
    # are wrong (a traceback after the spec had run).
    *[
        (argv, message)
        for spec, message in [
            ("exits.mod.py", "exits.mod.py:2: the spec called sys.exit(0)"),
            (
                "badvalue.mod.py",
                "badvalue.mod.py:5: Example: operand i (TENSOR_FLOAT32): value 'a'",
            ),
        ]
        for argv in [
            ["replay", spec],
            ["dot", spec],
            ["minimize", spec],
            ["specs", "expand", spec, "--json", "-"],
        ]
    ],
    (["specs", "expand", "broken.mod.py", "--json", "x.json"], "broken.mod.py:1: syntax error"),
    # dot runs only *.mod.py as a spec: another file must be a wire model.
    (["dot", "corrupt.bin"], "corrupt.bin: not a wire model (bad magic b'NNFX', expected"),
    (["dot", "empty.mod.py"], "empty.mod.py: the spec defines no tests (no Example)"),
    # The reference rejects the spec's model: the spec's fault, nothing to minimize.
    (["minimize", "invalid.mod.py"], "2 tests of invalid.mod.py are invalid models"),
    (["minimize", "binary.mod.py"], "not a spec file"),
    (["minimize", "missing.mod.py"], "cannot read: No such file"),
    (["minimize", str(CORPUS_SPEC), "--seconds", "0"], "--seconds: must be a finite number > 0"),
    (["random", "--minutes", "-1"], "--minutes: must be a finite number > 0, got -1"),
    (["random", "--minutes", "inf"], "--minutes: must be a finite number > 0"),
    (["random", "--timeout", "nan"], "--timeout: must be a finite number > 0"),
    (["random", "--ops", "0"], "--ops: must be >= 1, got 0"),
    (["random", "--dims", "-2"], "--dims: must be >= 1"),
    (["random", "--jobs", "-1"], "--jobs: must be >= 0"),
    (["random", "--jobs", "two"], "--jobs: not an integer: 'two'"),
    (["random", "--seeds", "5:3"], "empty seed range '5:3'"),
    # Unknown names in the filters: exit 2 (1 would mean a test failed), naming the option.
    (["random", "--op", "NOPE"], "argument --op: unknown operation 'NOPE'"),
    (["random", "--op", "ADD,nope"], "argument --op: unknown operation 'NOPE'"),
    (["random", "--op", ","], "argument --op: expected a comma-separated list, got ','"),
    (["random", "--type", "NOPE"], "argument --type: unknown data type 'NOPE'"),
    (["random", "--version", "V9"], "argument --version: unknown HAL version 'V9'"),
    (["random", "--rank", "x"], "argument --rank: not a comma-separated list of integers"),
    (["decode", "x", "--version", "V9"], "argument --version: unknown HAL version 'V9'"),
    # A module:callable driver whose module name importlib cannot take (empty or
    # relative): it raised ValueError/TypeError, a traceback with exit status 1.
    *[
        ([*command, "--driver", driver], f"bad driver module name {module!r}")
        for driver, module in [(":make", ""), (".x:make", ".x"), ("..:make", "..")]
        for command in [
            ["replay", str(CORPUS_SPEC)],
            ["minimize", str(CORPUS_SPEC)],
            ["random", "--max-tests", "1"],
        ]
    ],
    # generate takes A:B or N; its message offered 'A:' (unbounded), which it refuses.
    (["generate", "--seeds", "abc"], "--seeds 'abc': use A:B (A < B, B excluded) or N"),
    (["generate", "--seeds", "5:"], "--seeds '5:': use A:B (A < B, B excluded) or N"),
    (["generate", "--seeds", "0:"], "--seeds '0:': use A:B (A < B, B excluded) or N"),
    (["generate", "--seeds", "5:3"], "--seeds '5:3': use A:B (A < B, B excluded) or N"),
    # Sizes: each has a limit (a 173 GiB allocation, a run of hours, before).
    (["generate", "--ops", "201"], "argument --ops: must be <= 200, got 201"),
    (["generate", "--dims", "1000000000"], "argument --dims: must be <= 100000"),
    (["generate", "--elements", "1000000000000"], "argument --elements: must be <= 100000"),
    (["generate", "--ops", "40", "--elements", "100000"], "--ops x --elements must be <= 2000000"),
    (["generate", "--op", "ADD,nope"], "unknown operation 'nope'"),
    (["generate", "--op", "ADD,"], "--op: expected a comma-separated list, got 'ADD,'"),
    (["generate", "--type", "FLOAT32,nope"], "unknown type 'nope'"),
    (["generate", "--version", "1.2,9"], "unknown HAL version '9'"),
    (["generate", "--ops", "-3"], "--ops: must be >= 1, got -3"),
    (["generate", "--seed", "-1"], "--seed: must be >= 0"),
    (["fuzz", "model", "--time", "-5"], "--time: must be a finite number >= 0"),
    (["fuzz", "model", "--jobs", "0"], "--jobs: must be >= 1"),
    (["fuzz", "model", "--regress", "no-such-dir"], "no such file or directory: no-such-dir"),
    (["fuzz", "model", "--merge", "binary.mod.py"], "not a corpus directory: binary.mod.py"),
    (["ops", "NOPE", "ADD"], "unknown operation NOPE"),
    # An output file whose directory does not exist: refused before the run.
    (["specs", "run", str(CORPUS_SPEC), "--json", "no-dir/r.json"], "no-dir is not a directory"),
    (["specs", "expand", str(CORPUS_SPEC), "--json", "no-dir/x.json"], "no-dir is not a directory"),
    (["generate", "--json", "no-dir/g.json"], "no-dir is not a directory"),
    (["dot", str(CORPUS_SPEC), "-o", "no-dir/g.dot"], "no-dir is not a directory"),
    # An output path that exists and is no regular file, or that cannot be created, or
    # is empty: refused before the run, naming the option (the run's work was lost).
    *[
        ([*command, option, path], f"argument {shown}: {message}")
        for command, option, shown in [
            (["generate", "--seeds", "0:3"], "--json", "--json"),
            (["dot", str(CORPUS_SPEC)], "-o", "-o/--output"),
        ]
        for path, message in [
            ("adir", "adir is a directory"),
            ("fifo", "fifo is not a regular file"),
            ("dangling", "dangling is a symbolic link to nothing"),
            ("adir/", "adir/ ends in '/' (a directory): name a file"),
            ("/proc/x.json", "cannot write /proc/x.json: "),
            ("", "an empty path names no file"),
        ]
    ],
    (["generate", "--dump", ""], "argument --dump: an empty path names no directory"),
    # minimize --out: never replaces what is no regular file (a device node, a FIFO), and
    # finds out before minimizing that it cannot write there.
    *[
        (["minimize", str(CORPUS_SPEC), "--out", path], f"argument --out: {message}")
        for path, message in [
            ("fifo", "fifo is not a regular file"),
            ("dangling", "dangling is a symbolic link to nothing"),
            ("/proc/x.mod.py", "cannot write /proc/x.mod.py: "),
            ("/proc/x/", "cannot write into /proc/x: "),
            ("empty.mod.py/sub/", "empty.mod.py is not a directory (to write into"),
            ("", "an empty path names no file or directory"),
        ]
    ],
    (
        ["minimize", str(CORPUS_SPEC), "--out", "empty.mod.py"],
        "has 4 tests, so --out must be a directory",
    ),
    # Nothing to minimize is exit 2, as replay's "no test model".
    (["minimize", "empty.mod.py"], "nothing to minimize: no test of empty.mod.py fails"),
    (["minimize", str(CORPUS_SPEC), "-k", "zzz"], "nothing to minimize"),
    *[
        (["specs", action, str(CORPUS_SPEC), "--json", path], f"argument --json: {message}")
        for action in ["run", "expand"]
        for path, message in [
            ("", "an empty path names no file"),
            ("adir", "adir is a directory"),
            ("fifo", "fifo is not a regular file"),
        ]
    ],
    (["generate", "--dump", "/proc/x"], "argument --dump: cannot write into /proc/x: "),
    # Output directories that cannot be created (under a file): the path and the reason.
    (
        ["generate", "--dump", "empty.mod.py/specs"],
        "--dump: empty.mod.py is not a directory (to write into empty.mod.py/specs)",
    ),
    (
        ["random", "--out", "empty.mod.py/c", "--max-tests", "1"],
        "--out: empty.mod.py is not a directory (to write into empty.mod.py/c)",
    ),
    (["fuzz", "model", "--work", "empty.mod.py/w"], "empty.mod.py/w/corpus: Not a directory"),
]


@pytest.mark.parametrize(
    ("argv", "message"), USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS]
)
def test_bad_command_line_is_a_usage_error_naming_the_problem(files, capsys, argv, message):
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    assert message in err.splitlines()[-1]  # after argparse's usage block, if any
    assert "Traceback" not in err
    assert not list(Path.cwd().glob("nnfuzz-random-*")), "a rejected campaign left a directory"


def test_specs_run_reports_when_no_test_model_is_found(files, capsys):
    # A spec without a test is that spec's error (a failed test); a -k that matches
    # nothing is a usage error, as replay's (tests/test_specs_cli.py has the table).
    assert exit_status(["specs", "run", "empty.mod.py"]) == 1
    out = capsys.readouterr().out
    assert "empty.mod.py: the spec defines no tests (no Example)" in out
    assert out.splitlines()[-1] == "0 passed, 1 failed, 0 skipped"
    assert exit_status(["specs", "run", str(CORPUS_SPEC), "-k", "zzz"]) == 2
    assert "no test model in" in capsys.readouterr().err


def test_specs_run_counts_an_unreadable_spec_as_a_failed_test(files, capsys):
    assert exit_status(["specs", "run", "binary.mod.py", "broken.mod.py"]) == 1
    out = capsys.readouterr().out
    assert "FAILED binary.mod.py: cannot load spec" in out
    assert "0 passed, 2 failed, 0 skipped" in out


def test_specs_run_goes_on_past_specs_that_cannot_be_loaded(files, capsys):
    # A spec calling sys.exit ended the whole run with status 0; one with bad example
    # values stopped it with a traceback. Now each is one failed test with its reason,
    # and the later specs run, the summary is printed and --json written.
    Path("specs").mkdir()
    for name, text in [
        ("a_ok", ABS_SPEC.format(example=GOOD_EXAMPLE)),
        ("b_exit", Path("exits.mod.py").read_text()),
        ("c_bad", Path("badvalue.mod.py").read_text()),
        ("d_invalid", Path("invalid.mod.py").read_text()),
        ("e_ok", ABS_SPEC.format(example=GOOD_EXAMPLE)),
    ]:
        Path("specs", f"{name}.mod.py").write_text(text)
    assert exit_status(["specs", "run", "specs", "--json", "results.json"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "8 passed, 4 failed, 0 skipped"
    failed = [line for line in out if line.startswith("FAILED")]
    assert any(
        "b_exit.mod.py: cannot load spec: " in f and ":2: the spec called" in f for f in failed
    )
    assert any("c_bad.mod.py: cannot load spec: " in f and "value 'a' is not" in f for f in failed)
    invalid = [f for f in failed if f.startswith("FAILED d_invalid")]
    assert len(invalid) == 2 and all(
        "spec error: the model is invalid: main subgraph, operation" in f
        and "no signature of ADD takes inputs (TENSOR_FLOAT32)" in f
        for f in invalid
    )  # not "getSupportedOperations returned INVALID_ARGUMENT": not the driver's fault
    results = json.loads(Path("results.json").read_text())
    assert [r["outcome"] for r in results].count("passed") == 8 and len(results) == 12


def test_specs_expand_writes_nothing_when_no_spec_loads(files, capsys):
    assert exit_status(["specs", "expand", "broken.mod.py", "--json", "x.json"]) == 2
    assert not Path("x.json").exists()
    assert "test models" not in capsys.readouterr().out
    # With one spec that loads, it is written, and the status still says one failed.
    argv = ["specs", "expand", "broken.mod.py", str(CORPUS_SPEC), "--json", "x.json"]
    assert exit_status(argv) == 2
    assert list(json.loads(Path("x.json").read_text())) == [str(CORPUS_SPEC)]
    assert "(1 spec files could not be loaded)" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["dot", "replay", "minimize"])
def test_help_says_spec_files_are_executed(capsys, command):
    assert exit_status([command, "--help"]) == 0
    assert "trusted Python: it is executed" in " ".join(capsys.readouterr().out.split())


def test_regress_replays_a_file_named_relative_to_the_callers_directory(files, capsys):
    # The replay workers run in the project root: a relative path must still be found.
    Path("input.bin").write_bytes(b"NNFW not really a model")
    assert exit_status(["fuzz", "model", "--regress", "input.bin", "--crash-dir", "adir"]) == 0
    assert "model: 1 inputs replayed, 0 failed" in capsys.readouterr().out


def test_an_interrupted_specs_run_keeps_the_results_that_finished(files, capsys, monkeypatch):
    from randomgraph.spec import runner

    interrupt_call(monkeypatch, runner, "run_test_model", 3)
    argv = ["specs", "run", str(CORPUS_SPEC), "--no-dynamic", "--json", "results.json"]
    assert exit_status(argv) == 130
    out, err = capsys.readouterr()
    assert "interrupted" in err and out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"
    assert [r["outcome"] for r in json.loads(Path("results.json").read_text())] == ["passed"] * 2


def _parsers(parser=None, prog="nnfuzz"):
    """(prog, parser) for nnfuzz and every subcommand, nested ones too."""
    import argparse

    from fuzz.cli import build_parser

    parser = parser or build_parser()
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prog} {name}")


def _example_paths(text: str) -> list[str]:
    import re

    examples = text.split("examples:", 1)[1] if "examples:" in text else ""
    return re.findall(r"(?<![\w/.-])((?:corpus|docs|benchmarks)/[\w./-]+)", examples)


def test_every_file_a_help_example_names_exists():
    # A copied example must work: placeholders like crash-1234 do not.
    root = Path(__file__).resolve().parents[1]
    checked = 0
    for prog, parser in _parsers():
        for path in _example_paths(parser.epilog or ""):
            assert (root / path).exists(), f"`{prog} --help` names {path}, which does not exist"
            checked += 1
    assert checked >= 6  # the dot, decode and fuzz examples


# ---------------------------------------------------------------------------------------
# Input files are read only as far as they can matter: a device, a FIFO or an endless
# pipe must not fill memory.


def _feed_fifo(path: Path, data: bytes, total: int) -> dict:
    """A FIFO at ``path`` fed ``data`` then zeros, ``total`` bytes at most, in a thread;
    the returned dict's "written" says how many bytes the reader took before closing."""
    import os
    import threading

    os.mkfifo(path)
    fed = {"written": 0}

    def feed():
        with open(path, "wb", buffering=0) as f:
            chunk = data + bytes(65536 - len(data))
            try:
                while fed["written"] < total:
                    fed["written"] += f.write(chunk)
                    chunk = bytes(65536)
            except BrokenPipeError:
                pass  # the reader had enough

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    fed["thread"] = thread
    return fed


@pytest.mark.parametrize("command", ["decode", "dot"])
def test_a_wire_message_is_read_no_further_than_its_header_says(files, capsys, command):
    # A MODEL header declaring a 4-byte body, then 64 MiB of zeros: nnfuzz read them all.
    header = b"NNFW\x01\x00\x01\x00\x04\x00\x00\x00"
    fed = _feed_fifo(Path("message.bin"), header, 64 << 20)
    assert exit_status([command, "message.bin"]) in (1, 2)  # a decode error
    fed["thread"].join(30)
    assert fed["written"] < 4 << 20, "read past the declared message"
    assert "Traceback" not in capsys.readouterr().err


def test_decode_reads_a_bounded_part_of_endless_standard_input(files, capsys, monkeypatch):
    import io
    import sys

    class Zeros(io.RawIOBase):
        def readinto(self, buffer):
            buffer[:] = bytes(len(buffer))
            return len(buffer)

        def read(self, size=-1):
            assert size is not None and size >= 0, "read to the end of an endless stream"
            return super().read(size)

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(Zeros()))
    assert exit_status(["decode", "-"]) == 1
    assert "bad magic" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["replay"], ["minimize"], ["dot"], ["specs", "expand"]])
def test_a_spec_that_is_no_regular_file_or_too_large_is_refused(
    files, capsys, monkeypatch, command
):
    import os

    from randomgraph.spec import loader

    os.symlink(os.devnull, "device.mod.py")  # as a link to /dev/zero, but harmless
    extra = ["--json", "-"] if command == ["specs", "expand"] else []
    assert exit_status([*command, "device.mod.py", *extra]) == 2
    assert "device.mod.py: not a regular file" in capsys.readouterr().err
    monkeypatch.setattr(loader, "MAX_SPEC_BYTES", 100)
    Path("long.mod.py").write_text(ABS_SPEC.format(example=GOOD_EXAMPLE))
    assert exit_status([*command, "long.mod.py", *extra]) == 2
    assert "long.mod.py: larger than a spec file may be" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Outputs: checked before the work, written whole, never lost.


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--seeds", "0:3", "--json", "adir"],
        ["generate", "--seeds", "0:3", "--json", "/proc/x.json"],
        ["generate", "--seeds", "0:3", "--dump", "empty.mod.py/specs"],
    ],
    ids=["json directory", "json unwritable", "dump under a file"],
)
def test_generate_refuses_an_output_path_before_generating(files, capsys, monkeypatch, argv):
    import randomgraph.generator

    def must_not_run(*args, **kwargs):
        raise AssertionError("generated before the output path was checked")

    monkeypatch.setattr(randomgraph.generator, "generate", must_not_run)
    assert exit_status(argv) == 2
    assert "Traceback" not in capsys.readouterr().err


def _disk_full(monkeypatch):
    """Every fsync fails as on a full disk (no device node is ever written)."""
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)


@pytest.mark.parametrize(
    ("argv", "output"),
    [
        (["generate", "--seeds", "0:2", "--json", "g.json"], "g.json"),
        (["dot", str(CORPUS_MODEL), "-o", "g.dot"], "g.dot"),
    ],
    ids=["generate --json", "dot -o"],
)
def test_a_failed_write_names_the_path_and_keeps_the_output(
    files, capsys, monkeypatch, tmp_path, argv, output
):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "saved"))
    (tmp_path / "saved").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read TMPDIR
    _disk_full(monkeypatch)
    assert exit_status(argv) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"nnfuzz: {output}: No space left on device; the output is saved in ")
    saved = Path(last.rsplit(" ", 1)[1])
    assert saved.parent == tmp_path / "saved" and saved.read_text()
    assert not Path(output).exists() and not list(Path.cwd().glob(f".{output}*"))  # no .tmp


@pytest.mark.parametrize("argv", [["ops"], ["dot", str(CORPUS_MODEL)]], ids=["ops", "dot"])
def test_a_failed_write_to_standard_output_is_one_line(files, capsys, monkeypatch, argv):
    import errno
    import io
    import sys

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sys, "stdout", Full())
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "nnfuzz: standard output: No space left on device"
    assert "Traceback" not in err


STANDARD_OUTPUT_FAILURES = [
    # Ctrl-C while a command prints: one word, the shell's status for SIGINT.
    ("write", KeyboardInterrupt(), 130, "interrupted"),
    # The reader went away (nnfuzz ops | head): no error, and nothing said.
    ("write", BrokenPipeError(32, "Broken pipe"), 0, None),
    # A full disk seen only when the last buffered lines are flushed: still one line,
    # while the command runs (at exit it was Python's 'Exception ignored', status 120).
    ("flush", OSError(28, "No space left on device"), 2, "nnfuzz: standard output: No space"),
]


@pytest.mark.parametrize(("method", "error", "status", "message"), STANDARD_OUTPUT_FAILURES)
def test_a_standard_output_that_fails_ends_the_command_with_its_status(
    capsys, monkeypatch, method, error, status, message
):
    import io
    import sys

    class Failing(io.StringIO):
        def write(self, text):
            if method == "write":
                raise error
            return super().write(text)

        def flush(self):
            if method == "flush":
                raise error

    monkeypatch.setattr(sys, "stdout", Failing())
    assert exit_status(["ops"]) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message is None:
        assert err == ""
    else:
        assert err.splitlines()[-1].startswith(message)


def test_no_command_prints_the_help_and_is_a_usage_error(capsys):
    assert exit_status([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: nnfuzz") and "nnfuzz COMMAND --help" in out


def test_an_output_link_is_written_through(files, capsys):
    Path("target.json").write_text("old")
    os.symlink("target.json", "link.json")
    assert exit_status(["generate", "--seeds", "0:2", "-q", "--json", "link.json"]) == 0
    assert os.path.islink("link.json")
    assert len(json.loads(Path("target.json").read_text())["graphs"]) == 2


def test_a_replaced_output_keeps_its_permissions(files, capsys):
    Path("g.json").write_text("old")
    os.chmod("g.json", 0o600)
    assert exit_status(["generate", "--seeds", "0:1", "-q", "--json", "g.json"]) == 0
    assert os.stat("g.json").st_mode & 0o777 == 0o600
    assert json.loads(Path("g.json").read_text())["graphs"]


@pytest.mark.parametrize("ops, elements, allowed", [(20, 100000, True), (20, 100001, False)])
def test_generate_allows_a_graph_of_max_graph_elements(ops, elements, allowed):
    from types import SimpleNamespace

    from fuzz.commands.generate import _check_graph_size
    from randomgraph.generator.core import MAX_GRAPH_ELEMENTS

    assert MAX_GRAPH_ELEMENTS == 20 * 100000
    config = SimpleNamespace(num_ops=ops, max_elements=elements)
    if allowed:
        _check_graph_size(config)
    else:
        with pytest.raises(SystemExit):
            _check_graph_size(config)


def test_ops_lists_and_counts_the_declared_operations(capsys):
    assert exit_status(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "102/102 operations declared"
    assert exit_status(["ops", "add", "-s"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("   0 ADD") and "HAL 1.0" in out and "declared" not in out


def test_generate_takes_comma_lists_like_random(files, capsys):
    argv = ["generate", "--seeds", "0:4", "--op", "ADD,MUL", "--json", "g.json", "-q"]
    assert exit_status(argv) == 0
    ops = {op for g in json.loads(Path("g.json").read_text())["graphs"] for op in g["operations"]}
    assert ops == {"ADD", "MUL"}


def generated(argv: list[str]) -> list[dict]:
    """The graphs ``nnfuzz generate ARGV`` summarizes (it must exit 0)."""
    assert exit_status(["generate", *argv, "-q", "--json", "g.json"]) == 0
    return json.loads(Path("g.json").read_text())["graphs"]


def test_generate_makes_the_graphs_of_the_seeds_it_is_given(files, capsys):
    assert [g["seed"] for g in generated(["--seed", "5"])] == [5]
    assert [g["seed"] for g in generated(["--seeds", "3"])] == [3]
    assert [g["seed"] for g in generated(["--seeds", "2:4"])] == [2, 3]


def test_generate_takes_a_type_without_its_tensor_prefix(files, capsys):
    # float32 is TENSOR_FLOAT32 (the scalar FLOAT32 is no data type a graph is made of).
    graphs = generated(["--seeds", "0:3", "--op", "ADD", "--type", "float32"])
    assert len(graphs) == 3
    spec = generated(["--seed", "0", "--op", "ADD", "--type", "float32", "--dump", "d"])[0]
    assert "TENSOR_FLOAT32" in Path(spec["spec"]).read_text()


def test_a_seed_that_cannot_be_generated_fails_generate_and_the_others_go_on(
    files, capsys, monkeypatch
):
    import randomgraph.generator
    from randomgraph.generator import GenerationError

    real = randomgraph.generator.generate

    def generate(seed, config):
        if seed == 1:
            raise GenerationError("no signature fits")
        return real(seed, config)

    monkeypatch.setattr(randomgraph.generator, "generate", generate)
    assert exit_status(["generate", "--seeds", "0:3", "-q", "--json", "g.json"]) == 1
    assert "seed 1: no signature fits" in capsys.readouterr().err
    assert [g["seed"] for g in json.loads(Path("g.json").read_text())["graphs"]] == [0, 2]


def test_an_interrupted_generate_keeps_the_graphs_that_finished(files, capsys, monkeypatch):
    import randomgraph.generator

    interrupt_call(monkeypatch, randomgraph.generator, "generate", 4)
    argv = ["generate", "--seeds", "0:100", "--coverage", "--json", "g.json", "--dump", "d"]
    assert exit_status(argv) == 130
    out, err = capsys.readouterr()
    assert "3 graphs generated, 0 failed" in err and "(interrupted)" in err
    assert out.strip(), "no coverage table"
    assert [g["seed"] for g in json.loads(Path("g.json").read_text())["graphs"]] == [0, 1, 2]
    assert len(list(Path("d").glob("*.mod.py"))) == 3


def test_an_interrupted_replay_prints_the_counts_of_what_ran(files, capsys, monkeypatch):
    from randomgraph.spec import runner

    interrupt_call(monkeypatch, runner, "run_test_model", 3)  # a test and its dynamic run
    assert exit_status(["replay", str(CORPUS_SPEC)]) == 130
    out, err = capsys.readouterr()
    assert "interrupted" in err and out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


def test_specs_run_json_dash_is_standard_output(files, capsys):
    # '-' wrote a file named '-'.
    argv = ["specs", "run", str(CORPUS_SPEC), "--no-dynamic", "--json", "-"]
    assert exit_status(argv) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[-1] == "4 passed, 0 failed, 0 skipped" and not Path("-").exists()
    assert [r["outcome"] for r in json.loads(out)] == ["passed"] * 4  # the JSON alone
