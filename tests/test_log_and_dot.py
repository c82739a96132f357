"""VLOG-style logging (driver/log.py) and the Graphviz dump (driver/graphdump.py, nnfuzz dot)."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from driver import log, wire
from driver.builder import ModelBuilder
from driver.device import ReferenceDevice
from driver.extensions import fibonacci as fib
from driver.graphdump import graph_dump
from driver.hal.types import OperandType, Operation, OperationType, make_extension_type
from fuzz import cli

T = OperandType
O = OperationType  # noqa: E741 - the project's spelling of operation references
F32 = T.TENSOR_FLOAT32
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def vlog_setting():
    """Set the VLOG mask for a test; restore the environment's afterwards."""
    yield log.set_vlog
    log.set_vlog(None)


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def records():
    handler = Records()
    log.logger.addHandler(handler)
    yield handler
    log.logger.removeHandler(handler)


class Exploding:
    """Counts (and fails) every attempt to format it."""

    formatted = 0

    def __str__(self) -> str:
        Exploding.formatted += 1
        raise AssertionError("formatted while logging is off")

    __repr__ = __str__
    __format__ = lambda self, spec: self.__str__()  # noqa: E731


# --- VLOG -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, tags",
    [
        ("", set()),
        (None, set()),
        ("1", set(log.TAGS)),
        ("all", set(log.TAGS)),
        ("execution", {"execution"}),
        ("compilation,execution", {"compilation", "execution"}),
        ("driver:model", {"driver", "model"}),
        ("cpuexe manager", {"cpuexe", "manager"}),
        ("model, ,:driver", {"model", "driver"}),  # empty words between separators
        ("execution all", set(log.TAGS)),
        ("ALL", set()),  # case matters, as on Android
    ],
)
def test_vlog_setting_syntax(setting, tags):
    got, _ = log.parse_vlog(setting)
    assert got == tags


def test_unknown_tags_are_reported_and_ignored(vlog_setting, capsys):
    assert log.parse_vlog("execution,bogus:cpuexe") == ({"execution", "cpuexe"}, ["bogus"])
    assert log.parse_vlog("bogus all") == (set(log.TAGS), ["bogus"])
    assert log.parse_vlog("model, ,:driver") == ({"model", "driver"}, [])  # no empty words
    assert vlog_setting("bogus,model") == {"model"}
    assert "unknown NNFUZZ_VLOG tag 'bogus'" in capsys.readouterr().err


def test_the_mask_has_one_attribute_per_tag(vlog_setting):
    vlog_setting("execution:model")
    assert log.VLOG.execution and log.VLOG.model
    assert not (log.VLOG.compilation or log.VLOG.cpuexe or log.VLOG.driver or log.VLOG.manager)
    assert log.vlog_is_on("model") and not log.vlog_is_on("driver")
    vlog_setting("")
    assert log.VLOG.enabled() == frozenset()


def test_disabled_logging_does_no_formatting(vlog_setting, records):
    vlog_setting("")
    Exploding.formatted = 0
    log.vlog("execution", "value %s %r", Exploding(), Exploding())
    if log.VLOG.execution:  # the guarded form call sites use
        log.vlog("execution", f"{Exploding()}")
    assert Exploding.formatted == 0 and records.messages == []
    vlog_setting("compilation")  # another tag on: still nothing for this one
    log.vlog("execution", "value %s", Exploding())
    assert Exploding.formatted == 0 and records.messages == []


def test_enabled_tags_are_logged(vlog_setting, records):
    vlog_setting("execution")
    log.vlog("execution", "ran %d operations", 3)
    log.vlog("execution", "100% literal, no arguments")
    log.vlog("model", "not this one %s", Exploding())
    assert records.messages == [
        "execution: ran 3 operations",
        "execution: 100% literal, no arguments",
    ]


def test_the_device_logs_prepare_execute_and_cache_events(vlog_setting, records):
    import numpy as np

    from driver.builder import build_request

    vlog_setting("compilation,execution")
    b = ModelBuilder()
    x = b.add_input(F32, (2,))
    act = b.add_scalar(T.INT32, 0)
    y = b.add_output(F32, (2,))
    b.add_operation(O.ADD, [x, x, act], [y])
    device = ReferenceDevice()
    mc, dc = os.memfd_create("m"), os.memfd_create("d")
    try:
        token = b"\x02" * 32
        status, prepared = device.prepare_model(
            b.build(), model_cache=[mc], data_cache=[dc], token=token
        )
        prepared.execute_synchronously(
            build_request(prepared.model, [np.ones(2, np.float32)]).request
        )
        device.prepare_model_from_cache(None, [mc], [dc], token)
        device.prepare_model_from_cache(None, [mc], [dc], b"\x03" * 32)
    finally:
        os.close(mc)
        os.close(dc)
    text = "\n".join(records.messages)
    for pattern in [
        r"compilation: reference: prepared 1 operations",
        r"compilation: reference: cached for token 0202",
        r"execution: reference: executed 1 operations",
        r"compilation: reference: cache hit, 1 operations restored",
        r"compilation: reference: cache miss: .*another token",
    ]:
        assert re.search(pattern, text), (pattern, text)


def test_the_environment_variable_sets_the_mask():
    code = "from driver.log import VLOG; print(sorted(VLOG.enabled()))"
    env = {**os.environ, "NNFUZZ_VLOG": "driver,cpuexe"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "['cpuexe', 'driver']"


# --- graph dump -------------------------------------------------------------------------


def small_model():
    """ADD(x, const, act=RELU) -> t; RELU(t) -> y."""
    b = ModelBuilder()
    x = b.add_input(F32, (1, 2))
    c = b.add_constant(F32, (1, 2), [1.0, 2.0])
    act = b.add_scalar(T.INT32, 1)
    t = b.add_operand(F32, (1, 2))
    b.add_operation(O.ADD, [x, c, act], [t])
    y = b.add_output(F32, (1, 0))
    b.add_operation(O.RELU, [t], [y])
    return b.build()


def edges(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\s*(\S+ -> \S+?)(?: \[.*\])?;$", text, re.M)}


def test_dot_of_a_small_model_has_the_nodes_and_edges():
    text = graph_dump(small_model(), "small")
    assert text.startswith('// nnfuzz graph dump: small\ndigraph "small" {')
    assert text.rstrip().endswith("}")
    assert "subgraph cluster_m {" in text
    nodes = dict(re.findall(r"^\s*(m_[dn]\d+) \[(.*)\];$", text, re.M))
    assert set(nodes) == {"m_d0", "m_d1", "m_d2", "m_d3", "m_d4", "m_n0", "m_n1"}
    assert "shape=box style=filled fillcolor=black" in nodes["m_d0"]  # model input
    assert 'label="0: input[0]\\nTF32(1x2)"' in nodes["m_d0"]
    assert 'label="1: COPY\\nTF32(1x2)"' in nodes["m_d1"]
    assert 'label="2: COPY\\nI32 = 1"' in nodes["m_d2"]
    assert 'label="3\\nTF32(1x2)"' in nodes["m_d3"] and "filled" not in nodes["m_d3"]
    assert 'label="4: output[0]\\nTF32(1x?)"' in nodes["m_d4"] and "filled" in nodes["m_d4"]
    assert 'shape=ellipse ordering=in label="0: ADD"' in nodes["m_n0"]
    assert 'shape=ellipse label="1: RELU"' in nodes["m_n1"]
    assert edges(text) == {
        "m_d0 -> m_n0",
        "m_d1 -> m_n0",
        "m_d2 -> m_n0",
        "m_n0 -> m_d3",
        "m_d3 -> m_n1",
        "m_n1 -> m_d4",
    }
    assert "m_d2 -> m_n0 [label=2];" in text and "m_d3 -> m_n1;" in text
    # A name with quotes, a backslash and a newline stays one quoted dot string, and its
    # comment one line.
    quoted = graph_dump(small_model(), 'say "hi"\\\nnext')
    head = 'say \\"hi\\"\\\\\\nnext'
    assert quoted.startswith(f'// nnfuzz graph dump: {head}\ndigraph "{head}" {{\n')


def test_dot_draws_subgraphs_as_clusters():
    b = ModelBuilder()
    branches = []
    for op in (O.ADD, O.MUL):
        sg = b.new_subgraph()
        x = sg.add_input(F32, (2,))
        act = sg.add_scalar(T.INT32, 0)
        y = sg.add_output(F32, (2,))
        sg.add_operation(op, [x, x, act], [y])
        branches.append(b.add_subgraph_operand(sg))
    cond = b.add_input(T.TENSOR_BOOL8, (1,))
    x = b.add_input(F32, (2,))
    y = b.add_output(F32, (2,))
    b.add_operation(O.IF, [cond, *branches, x], [y])
    text = graph_dump(b.build(), "if")
    for cluster in ("cluster_m", "cluster_s0", "cluster_s1"):
        assert f"subgraph {cluster} {{" in text
    assert 'label="0: SUBGRAPH 0\\nSUBGRAPH"' in text
    assert 'label="1: SUBGRAPH 1\\nSUBGRAPH"' in text
    assert "m_d0 -> s0_anchor [lhead=cluster_s0 style=dashed" in text
    assert "m_d1 -> s1_anchor [lhead=cluster_s1 style=dashed" in text
    assert 's1_n0 [shape=ellipse ordering=in label="0: MUL"]' in text
    assert "s1_d0 -> s1_n0 [label=1];" in text


def test_dot_names_extension_types_and_operations():
    p = 4
    b = ModelBuilder()
    b.use_extension(fib.NAME, p)
    n = b.add_input(make_extension_type(p, fib.EXAMPLE_INT64))
    y = b.add_output(
        make_extension_type(p, fib.EXAMPLE_TENSOR_QUANT64_ASYMM),
        (0,),
        extra_params=fib.pack_params(1.0, 0),
    )
    b.add_operation(make_extension_type(p, fib.EXAMPLE_FIBONACCI), [n], [y])
    text = graph_dump(b.build())
    assert "extension:com.example.fibonacci:EXAMPLE_INT64" in text
    assert "extension:com.example.fibonacci:EXAMPLE_TENSOR_QUANT64_ASYMM(?)" in text
    assert "extension data 16 bytes" in text
    assert 'label="0: com.example.fibonacci:EXAMPLE_FIBONACCI"' in text


def test_dot_dumps_invalid_models_too():
    model = small_model()
    bad = Operation(12345, (0, 99), (7,))
    model = dataclasses.replace(
        model, main=dataclasses.replace(model.main, operations=(*model.main.operations, bad))
    )
    text = graph_dump(model)
    assert 'm_n2 [shape=ellipse ordering=in label="2: UNKNOWN_OPERATION(12345)"];' in text
    assert "m_d99 -> m_n2 [label=1];" in text and "m_n2 -> m_d7;" in text


def test_nnfuzz_dot_on_a_wire_file_and_a_spec(tmp_path, capsys):
    assert "fuzz.commands.dot" in cli.COMMAND_MODULES
    path = tmp_path / "small.bin"
    path.write_bytes(wire.encode_model(small_model()).data)
    out = tmp_path / "small.dot"
    assert cli.main(["dot", str(path), "-o", str(out)]) == 0
    assert out.read_text() == graph_dump(wire.decode_model(path.read_bytes()), "small")

    spec = tmp_path / "add.mod.py"
    spec.write_text(
        "i1 = Input('op1', 'TENSOR_FLOAT32', '{2}')\n"
        "i2 = Input('op2', 'TENSOR_FLOAT32', '{2}')\n"
        "o = Output('op3', 'TENSOR_FLOAT32', '{2}')\n"
        "Model().Operation('ADD', i1, i2, 0).To(o)\n"
        "Example({i1: [1, 2], i2: [3, 4], o: [4, 6]})\n"
    )
    capsys.readouterr()
    assert cli.main(["dot", str(spec)]) == 2  # two variations: which one?
    assert "add_all_inputs_as_internal" in capsys.readouterr().err
    assert cli.main(["dot", str(spec), "-k", "add"]) == 0  # an exact name wins
    text = capsys.readouterr().out
    assert 'label="0: ADD"' in text and "m_d0 -> m_n0 [label=0];" in text
    assert cli.main(["dot", str(spec), "-k", "no_such_test"]) == 2
    assert "matches no test" in capsys.readouterr().err
    assert cli.main(["dot", str(tmp_path / "absent.bin")]) == 2
