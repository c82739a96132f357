"""Control flow (HAL 1.3): IF and WHILE over referenced subgraphs.

Operand layout (``ControlFlow.h``):

IF
    input 0: the condition, TENSOR_BOOL8 of shape [1]; inputs 1 and 2: SUBGRAPH operands
    naming the then- and else-branch; inputs 3..: the branch inputs. Outputs: the branch
    outputs. Each branch has exactly the IF's data inputs as inputs and its outputs as
    outputs, operand by operand compatible.
WHILE
    input 0: the condition subgraph, input 1: the body subgraph; inputs 2..: m
    input-output operands, then k state-only operands, then n input-only operands.
    Outputs: the m input-output operands' final values. The condition takes the m+k+n
    values and has one TENSOR_BOOL8 [1] output; the body takes the m+k+n values and
    returns m+k (fed back as the next iteration's first m+k values).

Two operands are *compatible* when type, scale, zeroPoint and extra params are equal and
their dimensions agree where both are known (rank when both ranks are known, each dim
when both are non-zero), so subgraph operands of unknown shape take their shapes from
the values that flow in at run time.

Validation (``validateIfOperation`` / ``validateWhileOperation`` in Android 11's
``Utils.cpp``) lives in the validate hooks. A model whose referenced subgraphs form a
cycle is rejected once, model-wide, by ``driver.validation`` (``checkNoReferenceCycles``)
before any hook runs; should an unvalidated cyclic model reach the executor anyway, the
nesting bound ends it with GENERAL_FAILURE.

Execution calls back into the executor (``ctx.executor.run_subgraph``), which bounds the
nesting depth (``driver.executor.MAX_NESTING_DEPTH``). A WHILE loop whose condition is
still true after ``ctx.run_state.loop_timeout`` seconds (default 2 s, maximum 15 s,
settable per execution) fails with MISSED_DEADLINE_TRANSIENT, as Android's CpuExecutor
does; the execution deadline is checked on every iteration too.
"""

from __future__ import annotations

import numpy as np

from driver.hal.types import (
    ErrorStatus,
    HalError,
    HalVersion,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    OperationType,
    Subgraph,
    operand_type_name,
)
from driver.operations.base import OperationContext, OperationDeclaration, Shape, Unknown

L = OperandLifeTime

IF_CONDITION = 0
IF_THEN = 1
IF_ELSE = 2
IF_FIRST_INPUT = 3

WHILE_CONDITION = 0
WHILE_BODY = 1
WHILE_FIRST_INPUT = 2


# ---------------------------------------------------------------------------------------
# Operand compatibility and subgraph references
# ---------------------------------------------------------------------------------------


def describe_operand(operand: Operand) -> str:
    """``TENSOR_QUANT8_ASYMM [2, 0] scale=0.5 zeroPoint=3`` (for messages)."""
    text = f"{operand_type_name(operand.type)} {list(operand.dimensions)}"
    if operand.scale or operand.zero_point:
        text += f" scale={operand.scale:g} zeroPoint={operand.zero_point}"
    return text


def operand_incompatibility(a: Operand, b: Operand) -> str | None:
    """Why ``a`` and ``b`` may not stand for each other across a control-flow boundary,
    or None when they are compatible."""
    if a.type != b.type:
        return f"type {operand_type_name(a.type)} != {operand_type_name(b.type)}"
    da, db = a.dimensions, b.dimensions
    if da and db:
        if len(da) != len(db):
            return f"rank {len(da)} != {len(db)} ({list(da)} vs {list(db)})"
        for k, (x, y) in enumerate(zip(da, db)):
            if x and y and x != y:
                return f"dimension {k} is {x} != {y} ({list(da)} vs {list(db)})"
    if a.scale != b.scale:
        return f"scale {a.scale!r} != {b.scale!r}"
    if a.zero_point != b.zero_point:
        return f"zeroPoint {a.zero_point} != {b.zero_point}"
    if a.extra_params != b.extra_params:
        return f"extra params {a.extra_params!r} != {b.extra_params!r}"
    return None


def _model(ctx: OperationContext) -> Model:
    if ctx.model is None:
        # A caller without the whole model (e.g. a signature table walk) cannot check.
        raise Unknown("the model (control flow needs its referenced subgraphs)")
    return ctx.model


def _subgraph_ref(ctx: OperationContext, position: int, role: str) -> int:
    """The referenced-subgraph index named by input ``position`` (checked)."""
    operand = ctx.input_operand(position)
    ctx.check(
        operand.type == OperandType.SUBGRAPH and operand.lifetime == L.SUBGRAPH,
        f"input {position} ({role}) must be a SUBGRAPH operand, got "
        f"{describe_operand(operand)} with lifetime {L(operand.lifetime).name}",
    )
    index = operand.location.offset
    count = len(_model(ctx).referenced)
    ctx.check(
        0 <= index < count,
        f"input {position} ({role}) refers to subgraph {index}, but the model has "
        f"{count} referenced subgraphs",
    )
    return index


def _io_operand(ctx: OperationContext, sg: Subgraph, sg_index: int, kind: str, k: int) -> Operand:
    indexes = sg.input_indexes if kind == "input" else sg.output_indexes
    idx = indexes[k]
    ctx.check(
        0 <= idx < len(sg.operands),
        f"subgraph {sg_index} {kind} {k} is operand {idx}, out of range "
        f"({len(sg.operands)} operands)",
    )
    return sg.operands[idx]


def _check_compatible(ctx: OperationContext, inner: Operand, outer: Operand, what: str) -> None:
    reason = operand_incompatibility(inner, outer)
    if reason is not None:
        raise ctx.invalid(
            f"{what}: incompatible operands ({reason}): {describe_operand(inner)} vs "
            f"{describe_operand(outer)}"
        )


def _check_condition_operand(ctx: OperationContext, operand: Operand, what: str) -> None:
    ctx.check(
        operand.type == OperandType.TENSOR_BOOL8 and tuple(operand.dimensions) == (1,),
        f"{what} must be TENSOR_BOOL8 of shape [1], got {describe_operand(operand)}",
    )


# ---------------------------------------------------------------------------------------
# Run-time helpers
# ---------------------------------------------------------------------------------------


def _failure(ctx: OperationContext, message: str) -> HalError:
    where = f"{ctx.location}: " if ctx.location else ""
    return HalError(ErrorStatus.GENERAL_FAILURE, where + message)


def _condition_value(ctx: OperationContext, value: np.ndarray | None, what: str) -> bool:
    if value is None:
        raise _failure(ctx, f"{what} has no value")
    if value.size != 1:
        raise _failure(ctx, f"{what} must hold one element, got shape {list(value.shape)}")
    return bool(value.reshape(-1)[0])


def _infer_data_dependent(ctx: OperationContext) -> list[Shape | None]:
    # Which branch runs, or how often a body runs, is known only at run time; the
    # executor checks what the subgraphs produce against the declared output dims.
    return [None] * ctx.num_outputs


# ---------------------------------------------------------------------------------------
# IF
# ---------------------------------------------------------------------------------------


def _validate_if(ctx: OperationContext) -> None:
    ctx.check(
        ctx.num_inputs >= IF_FIRST_INPUT,
        f"IF needs at least 3 inputs (condition, then, else), got {ctx.num_inputs}",
    )
    ctx.check(ctx.num_outputs >= 1, "IF needs at least 1 output, got 0")
    _check_condition_operand(ctx, ctx.input_operand(IF_CONDITION), "input 0 (condition)")
    model = _model(ctx)
    n_data = ctx.num_inputs - IF_FIRST_INPUT
    for position, role in ((IF_THEN, "then branch"), (IF_ELSE, "else branch")):
        index = _subgraph_ref(ctx, position, role)
        sg = model.referenced[index]
        ctx.check(
            len(sg.input_indexes) == n_data,
            f"{role} subgraph {index} has {len(sg.input_indexes)} inputs, but the IF passes "
            f"{n_data} (inputs 3..{ctx.num_inputs - 1})",
        )
        ctx.check(
            len(sg.output_indexes) == ctx.num_outputs,
            f"{role} subgraph {index} has {len(sg.output_indexes)} outputs, but the IF has "
            f"{ctx.num_outputs}",
        )
        for i in range(n_data):
            _check_compatible(
                ctx,
                _io_operand(ctx, sg, index, "input", i),
                ctx.input_operand(IF_FIRST_INPUT + i),
                f"{role} subgraph {index} input {i} vs IF input {IF_FIRST_INPUT + i}",
            )
        for i in range(ctx.num_outputs):
            _check_compatible(
                ctx,
                _io_operand(ctx, sg, index, "output", i),
                ctx.output_operand(i),
                f"{role} subgraph {index} output {i} vs IF output {i}",
            )
    ctx.require_version(HalVersion.V1_3)


def _execute_if(ctx: OperationContext) -> list[np.ndarray]:
    cond = _condition_value(ctx, ctx.values[IF_CONDITION], "input 0 (condition)")
    branch = ctx.input_operand(IF_THEN if cond else IF_ELSE).location.offset
    return ctx.executor.run_subgraph(branch, list(ctx.values[IF_FIRST_INPUT:]), ctx.run_state)


IF = OperationDeclaration(
    OperationType.IF,
    (),
    infer_shapes=_infer_data_dependent,
    execute=_execute_if,
    validate=_validate_if,
    summary="Runs the then- or else-branch subgraph on the inputs, as a TENSOR_BOOL8 [1] "
    "condition says.",
    allows_unknown_rank=True,
    custom_signature_check=True,
    notes=("Operand types come from the branch subgraphs, not from a signature table.",),
)


# ---------------------------------------------------------------------------------------
# WHILE
# ---------------------------------------------------------------------------------------


def _validate_while(ctx: OperationContext) -> None:
    ctx.check(
        ctx.num_inputs >= WHILE_FIRST_INPUT + 1,
        f"WHILE needs at least 3 inputs (condition, body, one value), got {ctx.num_inputs}",
    )
    ctx.check(ctx.num_outputs >= 1, "WHILE needs at least 1 output, got 0")
    model = _model(ctx)
    n_values = ctx.num_inputs - WHILE_FIRST_INPUT
    m = ctx.num_outputs

    cond_index = _subgraph_ref(ctx, WHILE_CONDITION, "condition")
    cond = model.referenced[cond_index]
    ctx.check(
        len(cond.input_indexes) == n_values,
        f"condition subgraph {cond_index} has {len(cond.input_indexes)} inputs, but the "
        f"WHILE passes {n_values} (inputs 2..{ctx.num_inputs - 1})",
    )
    ctx.check(
        len(cond.output_indexes) == 1,
        f"condition subgraph {cond_index} must have exactly 1 output, has "
        f"{len(cond.output_indexes)}",
    )
    for i in range(n_values):
        _check_compatible(
            ctx,
            _io_operand(ctx, cond, cond_index, "input", i),
            ctx.input_operand(WHILE_FIRST_INPUT + i),
            f"condition subgraph {cond_index} input {i} vs WHILE input {WHILE_FIRST_INPUT + i}",
        )
    _check_condition_operand(
        ctx,
        _io_operand(ctx, cond, cond_index, "output", 0),
        f"condition subgraph {cond_index} output 0",
    )

    body_index = _subgraph_ref(ctx, WHILE_BODY, "body")
    body = model.referenced[body_index]
    n_body_in, n_body_out = len(body.input_indexes), len(body.output_indexes)
    ctx.check(
        n_body_in == n_values,
        f"body subgraph {body_index} has {n_body_in} inputs, but the WHILE passes {n_values}",
    )
    ctx.check(
        n_body_out >= m,
        f"body subgraph {body_index} has {n_body_out} outputs, fewer than the WHILE's {m}",
    )
    ctx.check(
        n_body_in >= n_body_out,
        f"body subgraph {body_index} has more outputs ({n_body_out}) than inputs ({n_body_in})",
    )
    for i in range(n_values):
        _check_compatible(
            ctx,
            _io_operand(ctx, body, body_index, "input", i),
            ctx.input_operand(WHILE_FIRST_INPUT + i),
            f"body subgraph {body_index} input {i} vs WHILE input {WHILE_FIRST_INPUT + i}",
        )
    for i in range(m):
        _check_compatible(
            ctx,
            _io_operand(ctx, body, body_index, "output", i),
            ctx.output_operand(i),
            f"body subgraph {body_index} output {i} vs WHILE output {i}",
        )
    for i in range(n_body_out):
        _check_compatible(
            ctx,
            _io_operand(ctx, body, body_index, "input", i),
            _io_operand(ctx, body, body_index, "output", i),
            f"body subgraph {body_index} input {i} vs its output {i} (fed back)",
        )
    ctx.require_version(HalVersion.V1_3)


def _execute_while(ctx: OperationContext) -> list[np.ndarray]:
    state = ctx.run_state
    executor = ctx.executor
    cond_index = ctx.input_operand(WHILE_CONDITION).location.offset
    body_index = ctx.input_operand(WHILE_BODY).location.offset
    n_fed_back = len(ctx.model.referenced[body_index].output_indexes)
    values = list(ctx.values[WHILE_FIRST_INPUT:])
    timeout = state.loop_timeout
    start = state.now()
    iterations = 0
    while True:
        state.check_deadline()
        (cond,) = executor.run_subgraph(cond_index, values, state)
        if not _condition_value(ctx, cond, f"condition subgraph {cond_index} output"):
            break
        elapsed = state.now() - start
        if elapsed > timeout:
            raise HalError(
                ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                f"{ctx.location}: loop condition still true after {iterations} iterations "
                f"and {elapsed:.3f} s, past the loop timeout of {timeout:g} s",
            )
        values[:n_fed_back] = executor.run_subgraph(body_index, values, state)
        iterations += 1
        state.stats.while_iterations += 1
    return values[: ctx.num_outputs]


WHILE = OperationDeclaration(
    OperationType.WHILE,
    (),
    infer_shapes=_infer_data_dependent,
    execute=_execute_while,
    validate=_validate_while,
    summary="Runs the body subgraph while the condition subgraph returns true, feeding the "
    "body's outputs back as its inputs; fails after the loop timeout.",
    allows_unknown_rank=True,
    custom_signature_check=True,
    notes=(
        "Operand types come from the condition and body subgraphs, not from a table.",
        "Loop timeout: default 2 s, maximum 15 s, per execution (MISSED_DEADLINE_TRANSIENT).",
    ),
)


DECLARATIONS: tuple[OperationDeclaration, ...] = (IF, WHILE)
