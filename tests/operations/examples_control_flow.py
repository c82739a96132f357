"""Valid IF/WHILE examples (see examples.py), and the model builders the control-flow
tests and the executor benchmark share.

A control-flow operation needs referenced subgraphs, which :class:`OpExample`'s
one-operation models cannot express; :class:`SubgraphExample` is an ``OpExample`` whose
``model()`` comes from a builder function instead. Its ``op``/``outputs``/``expected``
mean what they mean for any example (``outputs`` describes the main outputs), so
:func:`driver.testing.assert_example`, the registry meta-tests and the seed corpora treat
it like the others. Branch and body subgraphs use ADD (elementwise) and LESS
(comparisons) only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from driver.builder import ModelBuilder, SubgraphBuilder
from driver.executor import Executor
from driver.hal.types import Model
from driver.hal.types import OperandType as T
from driver.hal.types import OperationType as O
from driver.operations.base import storage_dtype
from driver.testing import OpExample, OutputSpec, output

ModelAndFeeds = tuple[Model, list[np.ndarray]]


@dataclass(frozen=True)
class SubgraphExample(OpExample):
    """An example whose model (with referenced subgraphs) comes from ``build``."""

    build: Callable[[], ModelAndFeeds] | None = None

    def model(self) -> ModelAndFeeds:
        assert self.build is not None, f"{self.name}: no model builder"
        return self.build()

    def run(self) -> list[np.ndarray]:
        from driver.validation import validate_model

        model, feeds = self.model()
        validate_model(model)
        return Executor(model).run(feeds)


def subgraph_example(
    name: str,
    op: int,
    build: Callable[[], ModelAndFeeds],
    outputs: Sequence[OutputSpec],
    expected: Sequence | None = None,
) -> SubgraphExample:
    exp = None if expected is None else tuple(np.asarray(e) for e in expected)
    return SubgraphExample(name, op, (), tuple(outputs), exp, build=build)


# ---------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------


def add_const_subgraph(
    mb: ModelBuilder,
    type: int,
    dims: Sequence[int],
    const: Sequence,
    *,
    out_dims: Sequence[int] | None = None,
    scale: float = 0.0,
    zero_point: int = 0,
) -> SubgraphBuilder:
    """A subgraph ``in -> in + const`` (one ADD; ``const`` broadcasts)."""
    q = dict(scale=scale, zero_point=zero_point)
    sg = mb.new_subgraph()
    x = sg.add_input(type, dims, **q)
    c = sg.add_constant(type, (len(const),), const, **q)
    y = sg.add_output(type, dims if out_dims is None else out_dims, **q)
    sg.add_operation(O.ADD, [x, c, sg.add_scalar(T.INT32, 0)], [y])
    return sg


def if_model(
    type: int = T.TENSOR_FLOAT32,
    dims: Sequence[int] = (2,),
    then_const: Sequence = (1,),
    else_const: Sequence = (100,),
    *,
    branch_dims: Sequence[int] | None = None,
    out_dims: Sequence[int] | None = None,
    scale: float = 0.0,
    zero_point: int = 0,
) -> Model:
    """``y = IF(cond, x + then_const, x + else_const)`` with inputs (cond, x)."""
    q = dict(scale=scale, zero_point=zero_point)
    mb = ModelBuilder()
    cond = mb.add_input(T.TENSOR_BOOL8, (1,))
    x = mb.add_input(type, dims, **q)
    bdims = dims if branch_dims is None else branch_dims
    then_sg = add_const_subgraph(mb, type, bdims, then_const, **q)
    else_sg = add_const_subgraph(mb, type, bdims, else_const, **q)
    y = mb.add_output(type, dims if out_dims is None else out_dims, **q)
    mb.add_operation(
        O.IF,
        [cond, mb.add_subgraph_operand(then_sg), mb.add_subgraph_operand(else_sg), x],
        [y],
    )
    return mb.build()


def nested_if_model(depth: int, dims: Sequence[int] = (2,)) -> Model:
    """``depth`` IFs nested inside each other's branches (always true), the innermost
    branch adding 1: running it reaches nesting depth ``depth``."""
    mb = ModelBuilder()
    levels = [mb.new_subgraph() for _ in range(depth)]

    def add_if(sg: SubgraphBuilder, x: int, y: int, target: SubgraphBuilder) -> None:
        cond = sg.add_constant(T.TENSOR_BOOL8, (1,), [True])
        ref = sg.add_subgraph_operand(target)
        sg.add_operation(O.IF, [cond, ref, ref, x], [y])

    for k, sg in enumerate(levels):
        x = sg.add_input(T.TENSOR_FLOAT32, dims)
        y = sg.add_output(T.TENSOR_FLOAT32, dims)
        if k + 1 < depth:
            add_if(sg, x, y, levels[k + 1])
        else:
            one = sg.add_constant(T.TENSOR_FLOAT32, (1,), [1.0])
            sg.add_operation(O.ADD, [x, one, sg.add_scalar(T.INT32, 0)], [y])
    x = mb.add_input(T.TENSOR_FLOAT32, dims)
    y = mb.add_output(T.TENSOR_FLOAT32, dims)
    add_if(mb, x, y, levels[0])
    return mb.build()


def counting_while_model(
    dims: Sequence[int] = (2,),
    *,
    acc_dims: Sequence[int] | None = None,
    step: int = 1,
    nested_if: bool = False,
    initial_acc_dims: Sequence[int] | None = None,
    result_dims: Sequence[int] | None = None,
    type: int = T.TENSOR_FLOAT32,
    scale: float = 0.0,
    zero_point: int = 0,
) -> Model:
    """``acc += x`` while ``i < n``, ``i += step``; inputs ``(acc, i, n, x)``, output the
    final ``acc``.

    WHILE layout: ``acc`` is input-output (m = 1), ``i`` state-only (k = 1), the rest
    input-only. ``acc`` and ``x`` have ``type`` (and ``scale``/``zero_point``), the
    counters are TENSOR_INT32 [1]. ``step=0`` never ends. ``acc_dims`` declares the
    loop-carried accumulator in the subgraphs (``(0,)``: its shape may change between
    iterations); ``initial_acc_dims`` and ``result_dims`` declare the model's ``acc``
    input and its output (default: ``acc_dims``). With
    ``nested_if`` the inputs are ``(acc, i, n, x, half, y)`` and the body adds ``x`` while
    ``i < half`` and ``y`` after, through an IF on a LESS computed in the body."""
    adims = dims if acc_dims is None else acc_dims
    if initial_acc_dims is None:
        initial_acc_dims = adims
    i32 = T.TENSOR_INT32
    q = dict(scale=scale, zero_point=zero_point)
    mb = ModelBuilder()

    def loop_inputs(sg: SubgraphBuilder) -> list[int]:
        ins = [
            sg.add_input(type, initial_acc_dims if sg is mb else adims, **q),
            sg.add_input(i32, (1,)),
            sg.add_input(i32, (1,)),
            sg.add_input(type, dims, **q),
        ]
        if nested_if:
            ins += [sg.add_input(i32, (1,)), sg.add_input(type, dims, **q)]
        return ins

    cond = mb.new_subgraph()
    _, i, n, *_ = loop_inputs(cond)
    flag = cond.add_output(T.TENSOR_BOOL8, (1,))
    cond.add_operation(O.LESS, [i, n], [flag])

    body = mb.new_subgraph()
    acc, i, n, x, *extra = loop_inputs(body)
    none = body.add_scalar(T.INT32, 0)
    acc_next = body.add_output(type, adims, **q)
    i_next = body.add_output(i32, (1,))
    if nested_if:
        half, y = extra
        early = body.add_operand(T.TENSOR_BOOL8, (1,))
        body.add_operation(O.LESS, [i, half], [early])
        # Branches take (acc, x, y): the then-branch adds x, the else-branch y.
        branches = []
        for pick in (1, 2):
            sg = mb.new_subgraph()
            ins = [sg.add_input(type, d, **q) for d in (adims, dims, dims)]
            out = sg.add_output(type, adims, **q)
            sg.add_operation(O.ADD, [ins[0], ins[pick], sg.add_scalar(T.INT32, 0)], [out])
            branches.append(body.add_subgraph_operand(sg))
        body.add_operation(O.IF, [early, *branches, acc, x, y], [acc_next])
    else:
        body.add_operation(O.ADD, [acc, x, none], [acc_next])
    inc = body.add_constant(i32, (1,), [step])
    body.add_operation(O.ADD, [i, inc, none], [i_next])

    outer = loop_inputs(mb)
    result = mb.add_output(type, adims if result_dims is None else result_dims, **q)
    mb.add_operation(
        O.WHILE,
        [mb.add_subgraph_operand(cond), mb.add_subgraph_operand(body), *outer],
        [result],
    )
    return mb.build()


def while_feeds(
    acc, i: int, n: int, x, half: int | None = None, y=None, *, type: int = T.TENSOR_FLOAT32
) -> list[np.ndarray]:
    dtype = storage_dtype(type)
    feeds = [
        np.asarray(acc, dtype),
        np.array([i], np.int32),
        np.array([n], np.int32),
        np.asarray(x, dtype),
    ]
    if half is not None:
        feeds += [np.array([half], np.int32), np.asarray(y, dtype)]
    return feeds


# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------


def _if_case(cond: bool, type: int, x, then_const, else_const, **q) -> Callable[[], ModelAndFeeds]:
    def build() -> ModelAndFeeds:
        arr = np.asarray(x, storage_dtype(type))
        model = if_model(type, arr.shape, then_const, else_const, **q)
        return model, [np.array([cond]), arr]

    return build


EXAMPLES = [
    subgraph_example(
        "if_float32_true",
        O.IF,
        _if_case(True, T.TENSOR_FLOAT32, [1.0, 2.5], [1.0], [100.0]),
        [output(T.TENSOR_FLOAT32, (2,))],
        expected=[[2.0, 3.5]],
    ),
    subgraph_example(
        "if_float32_false",
        O.IF,
        _if_case(False, T.TENSOR_FLOAT32, [1.0, 2.5], [1.0], [100.0]),
        [output(T.TENSOR_FLOAT32, (2,))],
        expected=[[101.0, 102.5]],
    ),
    subgraph_example(
        "if_float16",
        O.IF,
        _if_case(True, T.TENSOR_FLOAT16, [0.5, -1.0], [0.25], [8.0]),
        [output(T.TENSOR_FLOAT16, (2,))],
        expected=[[0.75, -0.75]],
    ),
    subgraph_example(
        "if_int32",
        O.IF,
        _if_case(False, T.TENSOR_INT32, [3, -4], [1], [-7]),
        [output(T.TENSOR_INT32, (2,))],
        expected=[[-4, -11]],
    ),
    # scale 0.5, zero point 10: x = [5, 10], const 1 (q 12) or 3 (q 16): x + 1 = [6, 11].
    subgraph_example(
        "if_quant8_asymm",
        O.IF,
        _if_case(True, T.TENSOR_QUANT8_ASYMM, [20, 30], [12], [16], scale=0.5, zero_point=10),
        [output(T.TENSOR_QUANT8_ASYMM, (2,), scale=0.5, zero_point=10)],
        expected=[[22, 32]],
    ),
    # The same reals with zero point -118: x + 3 = [8, 13].
    subgraph_example(
        "if_quant8_asymm_signed",
        O.IF,
        _if_case(
            False,
            T.TENSOR_QUANT8_ASYMM_SIGNED,
            [-108, -98],
            [-116],
            [-112],
            scale=0.5,
            zero_point=-118,
        ),
        [output(T.TENSOR_QUANT8_ASYMM_SIGNED, (2,), scale=0.5, zero_point=-118)],
        expected=[[-102, -92]],
    ),
    subgraph_example(
        "while_float32_count",
        O.WHILE,
        lambda: (counting_while_model(), while_feeds([0.0, 1.0], 0, 3, [0.5, 2.0])),
        [output(T.TENSOR_FLOAT32, (2,))],
        expected=[[1.5, 7.0]],
    ),
    subgraph_example(
        "while_int32_count",
        O.WHILE,
        lambda: (
            counting_while_model(type=T.TENSOR_INT32),
            while_feeds([5, -5], 0, 4, [3, -1], type=T.TENSOR_INT32),
        ),
        [output(T.TENSOR_INT32, (2,))],
        expected=[[17, -9]],
    ),
    # scale 0.5, zero point 100: acc = [0, 5] + 3 * [1, 2] = [3, 11] -> q [106, 122].
    subgraph_example(
        "while_quant8_asymm_count",
        O.WHILE,
        lambda: (
            counting_while_model(type=T.TENSOR_QUANT8_ASYMM, scale=0.5, zero_point=100),
            while_feeds([100, 110], 0, 3, [102, 104], type=T.TENSOR_QUANT8_ASYMM),
        ),
        [output(T.TENSOR_QUANT8_ASYMM, (2,), scale=0.5, zero_point=100)],
        expected=[[106, 122]],
    ),
    # The same reals with zero point -28 (signed): q [-22, -6].
    subgraph_example(
        "while_quant8_asymm_signed_nested_if",
        O.WHILE,
        lambda: (
            counting_while_model(
                nested_if=True, type=T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zero_point=-28
            ),
            while_feeds(
                [-28, -18], 0, 3, [-26, -24], half=3, y=[0, 0], type=T.TENSOR_QUANT8_ASYMM_SIGNED
            ),
        ),
        [output(T.TENSOR_QUANT8_ASYMM_SIGNED, (2,), scale=0.5, zero_point=-28)],
        expected=[[-22, -6]],
    ),
    subgraph_example(
        "while_float16_zero_iterations",
        O.WHILE,
        lambda: (
            counting_while_model(type=T.TENSOR_FLOAT16),
            while_feeds([0.5, -2.0], 3, 3, [1.0, 1.0], type=T.TENSOR_FLOAT16),
        ),
        [output(T.TENSOR_FLOAT16, (2,))],
        expected=[[0.5, -2.0]],
    ),
    subgraph_example(
        "while_float32_growing_shape",
        O.WHILE,
        lambda: (
            counting_while_model((3,), acc_dims=(0,), initial_acc_dims=(1,), result_dims=(3,)),
            while_feeds([1.0], 0, 2, [1.0, 2.0, 3.0]),
        ),
        [output(T.TENSOR_FLOAT32, (3,))],
        expected=[[3.0, 5.0, 7.0]],
    ),
]
