"""Transposes moved across reshapes (`simplify_regroup`): random chains of transposes and
reshapes that split and merge axes give NumPy's result eagerly, interpreted and compiled,
and the optimized IR never holds more transposes than the traced one; a channel shuffle of a
channels-last model keeps one of its three."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.ir import parse_module
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.staging.compiler import Compilation

SIDES = (1, 2, 3, 4, 6)
DYNAMIC = 3  # the size given to the unknown dim when a function is run

Step = tuple[str, tuple[int, ...]]  # ("transpose", perm) or ("reshape", dims)


@st.composite
def factors(draw: st.DrawFn, n: int) -> list[int]:
    """`n` as an ordered product of factors, sometimes with 1s among them."""
    out: list[int] = []
    while n > 1 and len(out) < 3:
        factor = draw(st.sampled_from([d for d in range(2, n + 1) if n % d == 0]))
        out.append(factor)
        n //= factor
    if n > 1:
        out[-1] *= n
    if draw(st.booleans()):
        out.insert(draw(st.integers(0, len(out))), 1)
    return out or [1]


@st.composite
def regrouped(draw: st.DrawFn, dims: tuple[int, ...]) -> list[int]:
    """Static dims merged into runs, each run's product split again: any reshape that a
    mix of splits and merges can make."""
    if not dims:
        return []
    cuts = sorted(draw(st.sets(st.integers(1, len(dims) - 1))) if len(dims) > 1 else [])
    runs = [dims[a:b] for a, b in zip([0, *cuts], [*cuts, len(dims)], strict=True)]
    return [f for run in runs for f in draw(factors(math.prod(run)))]


@st.composite
def chains(draw: st.DrawFn, dynamic: bool) -> tuple[tuple[int | None, ...], list[Step]]:
    """An input shape (one unknown dim if `dynamic`) and transpose, reshape, transpose,
    ... steps; a reshape keeps the unknown dim as it is, the static dims on either side
    regrouped."""
    shape: tuple[int | None, ...] = tuple(draw(st.lists(st.sampled_from(SIDES), min_size=1,
                                                        max_size=4)))
    if dynamic:
        shape = (*shape, None)
        shape = tuple(draw(st.permutations(shape)))
    start, steps = shape, []
    for index in range(draw(st.integers(3, 5))):
        if index % 2 == 0:
            perm = tuple(draw(st.permutations(range(len(shape)))))
            steps.append(("transpose", perm))
            shape = tuple(shape[a] for a in perm)
        else:
            k = shape.index(None) if None in shape else len(shape)
            new = [*draw(regrouped(shape[:k])), *(
                [None, *draw(regrouped(shape[k + 1:]))] if None in shape else [])]
            steps.append(("reshape", tuple(new)))
            shape = tuple(new)
    return start, steps


def numpy_chain(x: np.ndarray, steps: list[Step]) -> np.ndarray:
    for kind, arg in steps:
        x = np.transpose(x, arg) if kind == "transpose" else np.reshape(x, [
            -1 if d is None else d for d in arg])
    return x


def staged_chain(steps: list[Step]):
    def chain(x):
        for kind, arg in steps:
            x = sf.transpose(x, arg) if kind == "transpose" else sf.reshape(x, arg)
        return x
    return chain


def _type(dims: tuple[int | None, ...]) -> str:
    return "tensor<" + "x".join("?" if d is None else str(d) for d in dims) + "xf32>"


def ir_text(shape: tuple[int | None, ...], steps: list[Step]) -> str:
    """The chain as sf IR, a reshape naming the unknown dim as its operand's (``-2 - k``)."""
    lines, value, start = [], "%x", shape
    for index, (kind, arg) in enumerate(steps):
        if kind == "transpose":
            out, attr = tuple(shape[a] for a in arg), f"perm = {list(arg)}"
        else:
            param = [-2 - shape.index(None) if d is None else d for d in arg]
            out, attr = arg, f"shape = {param}"
        lines.append(f"  %{index} = sf.{kind} {value} {{{attr}}} : "
                     f"({_type(shape)}) -> {_type(out)}")
        shape, value = out, f"%{index}"
    body = "\n".join(lines)
    return (f"func.func @f(%x: {_type(start)}) -> {_type(shape)} {{\n{body}\n"
            f"  func.return {value} : {_type(shape)}\n}}\n")


def transposes(text: str) -> int:
    return text.count("sf.transpose ")


@settings(max_examples=30, deadline=None)
@given(chains(dynamic=False))
def test_static_chains_match_numpy_with_no_more_transposes(chain) -> None:
    shape, steps = chain
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    expected = numpy_chain(x, steps)
    f = staged_chain(steps)
    compiled = sf.function(f)
    concrete = compiled.get_concrete_function(x)
    assert transposes(concrete.ir("optimized")) <= transposes(concrete.ir("traced"))
    for got in (f(sf.constant(x)), sf.function(f, jit=False)(x), compiled(x)):
        np.testing.assert_array_equal(got.numpy(), expected)


@settings(max_examples=15, deadline=None)
@given(chains(dynamic=True))
def test_chains_with_an_unknown_dim_match_numpy_with_no_more_transposes(chain) -> None:
    shape, steps = chain
    static = tuple(DYNAMIC if d is None else d for d in shape)
    x = np.arange(math.prod(static), dtype=np.float32).reshape(static)
    expected = numpy_chain(x, steps)
    text = ir_text(shape, steps)
    for jit in (True, False):
        compilation = Compilation.of_module("f", parse_module(text))
        compilation.run_passes(DEFAULT_PIPELINE)
        assert transposes(str(compilation.module)) <= transposes(text)
        [got] = compilation.executables(["f"], jit=jit)[0].run([x])
        np.testing.assert_array_equal(np.asarray(got), expected)
    eager = staged_chain([(k, tuple(DYNAMIC if d is None else d for d in a) if k == "reshape"
                           else a) for k, a in steps])(sf.constant(x))
    np.testing.assert_array_equal(eager.numpy(), expected)


def test_a_channel_shuffle_in_channels_last_is_one_transpose() -> None:
    """NHWC -> NCHW, channels split into 4 groups, the groups swapped, merged, back to
    NHWC: one transpose, of the last two axes, between two reshapes."""
    steps: list[Step] = [("transpose", (0, 3, 1, 2)), ("reshape", (2, 4, 6, 5, 3)),
                         ("transpose", (0, 2, 1, 3, 4)), ("reshape", (2, 24, 5, 3)),
                         ("transpose", (0, 2, 3, 1))]
    x = np.random.default_rng(0).standard_normal((2, 5, 3, 24)).astype(np.float32)
    compiled = sf.function(staged_chain(steps))
    optimized = compiled.get_concrete_function(x).ir("optimized")
    assert transposes(optimized) == 1
    assert "perm = [0, 1, 2, 4, 3]" in optimized
    np.testing.assert_array_equal(compiled(x).numpy(), numpy_chain(x, steps))
