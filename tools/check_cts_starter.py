#!/usr/bin/env python3
"""Check the reference driver's numerics against Android's expanded CTS test models.

    python tools/check_cts_starter.py [DIR] [-k SUBSTRING] [-v]

DIR defaults to ../shared/cts-starter (a local folder, never part of the project or CI).
Each test model is rebuilt as a HAL model, validated, run on the reference executor and
compared with the generated-test criteria (float32 atol 1e-5 + rtol 5*2^-23; relaxed or
fp16 models 5*2^-10; quantized/int atol 1, 3 for mobilenet_quantized; bool exact).
Prints one line per failure and a final ``N passed, N failed, N skipped`` line; a test
is skipped only when one of its operations has no registered kernel yet.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driver.builder import ModelBuilder
from driver.executor import Executor
from driver.hal.types import (
    HalError,
    HalVersion,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
)
from driver.operations import declaration
from driver.operations.base import storage_dtype
from driver.validation import validate_model

L = OperandLifeTime


def build(test: dict):
    b = ModelBuilder(relaxed=test["isRelaxed"])
    subs = [b] + [b.new_subgraph() for _ in test["referenced"]]
    feeds, expected, ignored = [], [], []
    for sb, sg in zip(subs, [test["main"], *test["referenced"]]):
        idx_map = []
        for od in sg["operands"]:
            t = OperandType[od["type"]]
            cq = od.get("channelQuant")
            kw = dict(scale=od["scale"], zero_point=od["zeroPoint"])
            if cq:
                kw["channel_quant"] = SymmPerChannelQuantParams(
                    cq["channelDim"], tuple(cq["scales"])
                )
            lt = od["lifetime"]
            dims = tuple(od["dimensions"])
            i = sb.add_operand(t, dims, **kw)
            if lt in ("CONSTANT_COPY", "CONSTANT_REFERENCE"):
                sb.set_value(
                    i,
                    np.asarray(od["data"], dtype=storage_dtype(t)).reshape(
                        dims
                        if t
                        not in (
                            OperandType.INT32,
                            OperandType.FLOAT32,
                            OperandType.BOOL,
                            OperandType.FLOAT16,
                        )
                        else ()
                    ),
                    by_reference=lt == "CONSTANT_REFERENCE",
                )
            elif lt == "NO_VALUE":
                sb.operands[i].lifetime = L.NO_VALUE
            elif lt == "SUBGRAPH":
                sb.operands[i].lifetime = L.SUBGRAPH
                sb.operands[i].subgraph_index = od["data"][0]
            idx_map.append(i)
        for op in sg["operations"]:
            sb.add_operation(OperationType[op["type"]], op["inputs"], op["outputs"])
        sb.identify_inputs_and_outputs(sg["inputIndexes"], sg["outputIndexes"])
    main = test["main"]
    for i in main["inputIndexes"]:
        od = main["operands"][i]
        feeds.append(
            np.asarray(od["data"], dtype=storage_dtype(OperandType[od["type"]])).reshape(
                od["dimensions"]
            )
        )
    for i in main["outputIndexes"]:
        od = main["operands"][i]
        expected.append(od)
        ignored.append(od["isIgnored"])
    return b.build(), feeds, expected


def tolerance(test: dict, od: dict):
    t = OperandType[od["type"]]
    fp16 = test["isRelaxed"] or any(
        o["type"] == "TENSOR_FLOAT16"
        for sg in [test["main"], *test["referenced"]]
        for o in sg["operands"]
    )
    if t in (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16, OperandType.FLOAT32):
        if fp16:
            return 5.0 * 0.0009765625, 5.0 * 0.0009765625
        return 1e-5, 5.0 * 1.1920928955078125e-7
    if t in (OperandType.TENSOR_BOOL8, OperandType.BOOL):
        return 0, 0
    return (3 if "mobilenet_quantized" in test["test"] else 1), 0


def check(test: dict) -> tuple[str, str]:
    ops = [op["type"] for sg in [test["main"], *test["referenced"]] for op in sg["operations"]]
    missing = [o for o in ops if declaration(OperationType[o]) is None]
    if missing:
        return "skip", f"no kernel for {sorted(set(missing))}"
    try:
        model, feeds, expected = build(test)
        validate_model(model, HalVersion.V1_3)
        outs = Executor(model).run(feeds)
    except HalError as e:
        if test["expectFailure"]:
            return "pass", ""
        return "fail", f"rejected: {e}"
    except Exception:
        return "fail", "crash:\n" + traceback.format_exc(limit=4)
    if test["expectFailure"]:
        return "fail", "expected failure but it ran"
    for k, (od, out) in enumerate(zip(expected, outs)):
        if od["isIgnored"]:
            continue
        exp = np.asarray(od["data"], dtype=np.float64).reshape(-1)
        act = np.asarray(out, dtype=np.float64).reshape(-1)
        if exp.shape != act.shape:
            return (
                "fail",
                f"output {k}: {act.size} elements, expected {exp.size} (shape {out.shape})",
            )
        atol, rtol = tolerance(test, od)
        bad = np.abs(act - exp) > atol + rtol * np.abs(exp)
        if bad.any():
            i = int(np.argmax(bad))
            return "fail", (
                f"output {k}: {int(bad.sum())}/{bad.size} mismatches; first at {i}: "
                f"got {act[i]!r}, expected {exp[i]!r} (atol {atol}, rtol {rtol})"
            )
    return "pass", ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "dir",
        nargs="?",
        default=str(Path(__file__).resolve().parents[2] / "shared" / "cts-starter"),
    )
    p.add_argument("-k", default="", help="only files/tests whose name contains this")
    p.add_argument("-v", action="store_true", help="print passing tests too")
    a = p.parse_args(argv)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    per_op: dict[str, list[int]] = {}
    for f in sorted(Path(a.dir).glob("*.json.gz")):
        with gzip.open(f) as fh:
            tests = json.load(fh)
        for test in tests:
            if a.k and a.k not in f.name and a.k not in test["test"]:
                continue
            status, why = check(test)
            counts[status] += 1
            for op in {op["type"] for op in test["main"]["operations"]}:
                per_op.setdefault(op, [0, 0, 0])[["pass", "fail", "skip"].index(status)] += 1
            if status == "fail" or a.v or (status == "skip" and a.k):
                print(f"{status.upper():5} {f.name[:-8]}::{test['test']}  {why}")
    print("\nper operation (pass/fail/skip):")
    for op, (ps, fl, sk) in sorted(per_op.items()):
        print(f"  {op:32} {ps:4} {fl:4} {sk:4}")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
