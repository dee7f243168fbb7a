"""Random, well-typed programs over the whole op set: the pool they are built on, one
generator per op family, and the program as a Python function of its inputs.

A program is a list of steps over a pool of typed values: inputs, variable reads, random
draws and op results. Each step records the shape and dtype it produces, so the strategy
(`programs`, a hypothesis strategy) only builds programs that trace. Values are kept tame
(clipped before exp, products and matmuls; logs and divisions see positive operands), so
float results agree within a small tolerance. A value is *exact* when every step to it
rounds the same way in every implementation (movement, integer arithmetic, max/min,
comparisons, uniform draws); only exact values feed comparisons, argmax and float-to-int
casts, where an ulp of difference would change the answer, and exact results must match
bit for bit.

`stageflow.testing.random_programs` runs them every way and compares; needs the test extra
(hypothesis).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.testing.strategies import axes

F32, F64, I8, U8, I16, I32, I64, BOOL = (
    np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32,
                          np.int64, np.bool_))
FLOATS, INTS = (F32, F64), (I8, U8, I16, I32, I64)
INDICES = (I32, I64)  # what gather takes, as in TensorFlow
NUMERIC = FLOATS + INTS
TOLERANCES = {F32: 1e-5, F64: 1e-12}


@dataclass(frozen=True)
class Value:
    """What a pool entry holds at trace time, and whether it is computed exactly."""

    shape: tuple[int, ...]
    dtype: np.dtype
    exact: bool


@dataclass
class Run:
    """The state one execution of a program works on: its arguments, its own variables and
    its own random generator (so the three ways start from the same state)."""

    args: tuple[Any, ...]
    variables: list[sf.Variable]
    generator: sf.random.Generator


@dataclass(frozen=True)
class Step:
    """One line of a program: `apply(run, *pool[operands])`, pushing `result` if any."""

    text: str
    operands: tuple[int, ...]
    apply: Callable[..., Any] = field(repr=False)
    result: Value | None

    def __repr__(self) -> str:
        target = "" if self.result is None else f"{self.result.dtype}{list(self.result.shape)} = "
        return f"{target}{self.text}{list(self.operands)}"


@dataclass
class Program:
    """Inputs, initial variable values, steps and which pool values are returned."""

    inputs: list[np.ndarray] = field(default_factory=list)
    unknown: list[tuple[bool, ...]] = field(default_factory=list)
    variables: list[np.ndarray] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    pool: list[Value] = field(default_factory=list, repr=False)
    var_exact: list[bool] = field(default_factory=list, repr=False)
    outputs: tuple[int, ...] = ()
    seed: int = 0

    def push(self, text: str, operands: tuple[int, ...], apply: Callable[..., Any],
             result: Value | None) -> int:
        self.steps.append(Step(text, operands, apply, result))
        if result is None:
            return -1
        self.pool.append(result)
        return len(self.pool) - 1

    def picks(self, want: Callable[[Value], bool]) -> list[int]:
        return [i for i, v in enumerate(self.pool) if want(v)]

    def signature(self) -> list[sf.TensorSpec]:
        return [sf.TensorSpec([None if u else d for d, u in zip(x.shape, mask, strict=True)],
                              x.dtype) for x, mask in zip(self.inputs, self.unknown, strict=True)]

    def __call__(self, run: Run) -> list[Any]:
        pool: list[Any] = []
        for step in self.steps:
            value = step.apply(run, *(pool[i] for i in step.operands))
            if step.result is not None:
                pool.append(value)
        return [pool[i] for i in self.outputs]


def values(dtype: np.dtype) -> st.SearchStrategy[Any]:
    if dtype == BOOL:
        return st.booleans()
    if dtype.kind in "iu":
        return st.integers(0 if dtype.kind == "u" else -4, 4)
    return st.floats(-3, 3, width=dtype.itemsize * 8, allow_subnormal=False)


def small_shapes(min_dims: int = 0, max_dims: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=4)


def add_input(draw: Any, p: Program, shape: tuple[int, ...], dtype: np.dtype,
              elements: st.SearchStrategy[Any] | None = None, known: bool = False) -> int:
    """A new argument of the function, some of its dims unknown in the signature (none if
    `known`)."""
    elements = values(dtype) if elements is None else elements
    array = draw(hnp.arrays(dtype, shape, elements=elements))
    j = len(p.inputs)
    p.inputs.append(array)
    mask = draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    p.unknown.append(tuple(u and not known for u in mask))
    return p.push(f"arg{j}", (), lambda run: run.args[j], Value(shape, dtype, True))


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def tame(x: Any, limit: float) -> Any:
    """`x` clipped into [-limit, limit] (integer bounds for integer tensors)."""
    if x.dtype.kind in "iu":
        return sf.clip_by_value(x, 0 if x.dtype.kind == "u" else -int(limit), int(limit))
    return sf.clip_by_value(x, -limit, limit)


def partner(draw: Any, p: Program, a: int, exact: bool = False) -> int | None:
    """A pool value of a's dtype whose shape broadcasts with a's (a itself if none)."""
    v = p.pool[a]
    found = p.picks(lambda w: w.dtype == v.dtype and broadcast(w.shape, v.shape) is not None
                    and (w.exact or not exact))
    return draw(st.sampled_from(found)) if found else None


# Unary ops: (function, dtypes, exact when the operand is).
UNARY: dict[str, tuple[Callable[[Any], Any], tuple[np.dtype, ...], bool]] = {
    "exp": (lambda x: sf.exp(tame(x, 3.0)), FLOATS, False),
    "expm1": (lambda x: sf.expm1(tame(x, 3.0)), FLOATS, False),
    "log": (lambda x: sf.log(sf.abs(x) + 0.5), FLOATS, False),
    "log1p": (lambda x: sf.log1p(sf.abs(x)), FLOATS, False),
    "sqrt": (lambda x: sf.sqrt(sf.abs(x)), FLOATS, False),
    "rsqrt": (lambda x: sf.rsqrt(sf.abs(x) + 0.5), FLOATS, False),
    "reciprocal": (lambda x: sf.reciprocal(sf.abs(x) + 0.5), FLOATS, False),
    "tanh": (sf.tanh, FLOATS, False),
    "sigmoid": (sf.sigmoid, FLOATS, False),
    "sin": (lambda x: sf.sin(tame(x, 8.0)), FLOATS, False),
    "cos": (lambda x: sf.cos(tame(x, 8.0)), FLOATS, False),
    "erf": (sf.erf, FLOATS, False),
    "atan": (sf.atan, FLOATS, False),
    # 0.9 tanh(x) keeps the operands away from +-1, where asin's and acos's slopes are
    # unbounded: an ulp of tanh(9.2), 1 or its predecessor, made acos 0 or 3.5e-4.
    "asin": (lambda x: sf.asin(0.9 * sf.tanh(x)), FLOATS, False),
    "acos": (lambda x: sf.acos(0.9 * sf.tanh(x)), FLOATS, False),
    "erfinv": (lambda x: sf.math.erfinv(0.9 * sf.tanh(x)), FLOATS, False),
    "lgamma": (lambda x: sf.math.lgamma(sf.abs(x) + 0.5), FLOATS, False),
    "digamma": (lambda x: sf.math.digamma(sf.abs(x) + 0.5), FLOATS, False),
    "sort": (lambda x: sf.sort(x) if x.ndim else x, NUMERIC, True),
    "softplus": (lambda x: sf.nn.softplus(tame(x, 8.0)), FLOATS, False),
    "gelu": (lambda x: sf.nn.gelu(tame(x, 8.0)), FLOATS, False),
    "square": (lambda x: sf.square(tame(x, 4.0)), NUMERIC, True),
    "negative": (sf.negative, NUMERIC, True),
    "abs": (sf.abs, NUMERIC, True),
    "sign": (sf.sign, NUMERIC, True),
    "relu": (sf.nn.relu, NUMERIC, True),
    "floor": (sf.floor, FLOATS, True),
    "ceil": (sf.ceil, FLOATS, True),
    "round": (sf.round, FLOATS, True),
    "logical_not": (sf.logical_not, (BOOL,), True),
}

# Binary ops: (function, dtypes, exact when both operands are).
BINARY: dict[str, tuple[Callable[[Any, Any], Any], tuple[np.dtype, ...], bool]] = {
    "add": (sf.add, NUMERIC, False),
    "subtract": (sf.subtract, NUMERIC, False),
    "multiply": (lambda a, b: tame(a, 4.0) * tame(b, 4.0), NUMERIC, False),
    "maximum": (sf.maximum, NUMERIC, True),
    "minimum": (sf.minimum, NUMERIC, True),
    "divide": (lambda a, b: a / (sf.abs(b) + 0.5), FLOATS, False),
    "pow": (lambda a, b: sf.pow(sf.abs(a) + 0.5, tame(b, 2.0)), FLOATS, False),
    "floordiv": (lambda a, b: sf.floordiv(a, sf.maximum(sf.abs(b), 1)), INTS, True),
    "mod": (lambda a, b: sf.mod(a, sf.maximum(sf.abs(b), 1)), INTS, True),
    "logical_and": (sf.logical_and, (BOOL,), True),
    "logical_or": (sf.logical_or, (BOOL,), True),
}

COMPARISONS = {name: getattr(sf, name) for name in
               ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")}


def op_unary(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    names = [n for n, (_, kinds, _) in UNARY.items() if v.dtype in kinds]
    if not names:
        return
    name = draw(st.sampled_from(names))
    fn, _, exact = UNARY[name]
    exact = exact and (v.dtype.kind != "f" or name != "square")
    p.push(name, (a,), lambda run, x: fn(x), Value(v.shape, v.dtype, v.exact and exact))


def op_binary(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    b = partner(draw, p, a)
    names = [n for n, (_, kinds, _) in BINARY.items() if v.dtype in kinds]
    if b is None or not names:
        return
    name = draw(st.sampled_from(names))
    fn, _, exact = BINARY[name]
    w = p.pool[b]
    exact = v.exact and w.exact and (exact or v.dtype.kind in "iu")
    shape = broadcast(v.shape, w.shape)
    if draw(st.booleans()):
        p.push(name, (a, b), lambda run, x, y: fn(x, y), Value(shape, v.dtype, exact))
    else:
        p.push(name, (b, a), lambda run, y, x: fn(y, x), Value(shape, v.dtype, exact))


def op_compare(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.exact and v.dtype != BOOL)
    if not found:
        return
    a = draw(st.sampled_from(found))
    b = partner(draw, p, a, exact=True)
    name = draw(st.sampled_from(sorted(COMPARISONS)))
    shape = broadcast(p.pool[a].shape, p.pool[b].shape)
    p.push(name, (a, b), lambda run, x, y: COMPARISONS[name](x, y), Value(shape, BOOL, True))


def op_where(draw: Any, p: Program) -> None:
    conditions = p.picks(lambda v: v.dtype == BOOL)
    if not conditions:
        return
    c = draw(st.sampled_from(conditions))
    a = draw(st.sampled_from(range(len(p.pool))))
    b = partner(draw, p, a)
    shape = broadcast(p.pool[c].shape, p.pool[a].shape, p.pool[b].shape)
    if shape is None:
        return
    exact = p.pool[a].exact and p.pool[b].exact and p.pool[c].exact
    p.push("where", (c, a, b), lambda run, cond, x, y: sf.where(cond, x, y),
           Value(shape, p.pool[a].dtype, exact))


def op_cast(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    # A value known only within its float type's tolerance keeps that tolerance: widened to
    # float64, one float32 ulp of difference would fail float64's.
    targets = [d for d in NUMERIC + (BOOL,) if d != v.dtype and (
        v.exact or (d.kind == "f" and d.itemsize <= v.dtype.itemsize))]
    if v.dtype == BOOL:
        targets = [d for d in targets if d != BOOL]
    if not targets:
        return
    dtype = draw(st.sampled_from(targets))
    p.push(f"cast[{dtype}]", (a,), lambda run, x: sf.cast(x, dtype),
           Value(v.shape, dtype, v.exact))


def _reduced_shape(shape: tuple[int, ...], axis: Any, keepdims: bool) -> tuple[tuple[int, ...],
                                                                              set[int]]:
    ndim = len(shape)
    reduced = set(range(ndim)) if axis is None else {
        a % ndim for a in (axis if isinstance(axis, tuple) else (axis,))}
    out = tuple(1 if i in reduced else d for i, d in enumerate(shape)
                if keepdims or i not in reduced)
    return out, reduced


REDUCTIONS = {
    "reduce_sum": lambda x, axis, keep: sf.reduce_sum(x, axis, keep),
    "reduce_prod": lambda x, axis, keep: sf.reduce_prod(tame(x, 1.5), axis, keep),
    "reduce_mean": lambda x, axis, keep: sf.reduce_mean(x, axis, keep),
    "reduce_max": lambda x, axis, keep: sf.reduce_max(x, axis, keep),
    "reduce_min": lambda x, axis, keep: sf.reduce_min(x, axis, keep),
    "reduce_logsumexp": lambda x, axis, keep: sf.reduce_logsumexp(x, axis, keep),
}


def op_reduce(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.dtype != BOOL)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    axis = draw(axes(len(v.shape)))
    keepdims = draw(st.booleans())
    shape, reduced = _reduced_shape(v.shape, axis, keepdims)
    names = list(REDUCTIONS)
    if any(v.shape[i] == 0 for i in reduced):  # an empty max is an error, as in NumPy
        names = ["reduce_sum", "reduce_prod", "reduce_mean", "reduce_logsumexp"]
    if v.dtype.kind in "iu":
        names.remove("reduce_logsumexp")
    name = draw(st.sampled_from(names))
    exact = v.exact and (name in ("reduce_max", "reduce_min") or v.dtype.kind in "iu")
    fn = REDUCTIONS[name]
    p.push(f"{name}[axis={axis}, keepdims={keepdims}]", (a,),
           lambda run, x: fn(x, axis, keepdims), Value(shape, v.dtype, exact))


def op_arg_reduce(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.exact and v.dtype != BOOL and math.prod(v.shape) > 0)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    axis = draw(st.none() | st.integers(-len(v.shape), len(v.shape) - 1)) if v.shape else None
    shape = () if axis is None else tuple(d for i, d in enumerate(v.shape)
                                          if i != axis % len(v.shape))
    fn = draw(st.sampled_from([sf.argmax, sf.argmin]))
    p.push(f"{fn.__name__}[axis={axis}]", (a,), lambda run, x: fn(x, axis),
           Value(shape, I64, True))


def op_softmax(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.dtype.kind == "f" and v.shape)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    axis = draw(st.integers(-len(v.shape), len(v.shape) - 1))
    fn = draw(st.sampled_from([sf.nn.softmax, sf.nn.log_softmax]))
    p.push(f"{fn.__name__}[axis={axis}]", (a,), lambda run, x: fn(x, axis),
           Value(v.shape, v.dtype, False))


def op_matmul(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.dtype in (F32, F64) and v.shape)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    transpose_a = len(v.shape) >= 2 and draw(st.booleans())
    transpose_b = draw(st.booleans())
    if len(v.shape) >= 2 and draw(st.booleans()):  # a with itself: a a^T or a^T a
        rows = v.shape[-1] if transpose_a else v.shape[-2]
        shape = v.shape[:-2] + (rows, rows)
        p.push(f"matmul[self, transpose_a={transpose_a}]", (a,),
               lambda run, x: sf.matmul(tame(x, 4.0), tame(x, 4.0), transpose_a=transpose_a,
                                        transpose_b=not transpose_a),
               Value(shape, v.dtype, False))
        return
    k = v.shape[-2] if transpose_a else v.shape[-1]
    m = v.shape[-1] if transpose_a else (v.shape[-2] if len(v.shape) >= 2 else None)
    n = draw(st.integers(0, 4))
    batch = v.shape[:-2]
    # A vector operand's dim is dropped from the result by a reshape, which infers at most
    # one unknown dim: a matrix times a vector, and a vector times a known b.
    if len(v.shape) == 2 and draw(st.booleans()):
        b_shape: tuple[int, ...] = (k,)
        transpose_b = False
    else:
        b_batch = tuple(draw(st.sampled_from([d, 1])) for d in batch)[draw(st.integers(0, 2)):]
        if not batch and draw(st.booleans()):
            b_batch = (draw(st.integers(0, 3)),)
        b_shape = b_batch + ((n, k) if transpose_b else (k, n))
    b = add_input(draw, p, b_shape, v.dtype, known=len(v.shape) == 1)
    out_batch = broadcast(batch, b_shape[:-2]) if len(b_shape) >= 2 else batch
    shape = out_batch + ((m,) if m is not None else ()) + ((n,) if len(b_shape) >= 2 else ())
    p.push(f"matmul[transpose_a={transpose_a}, transpose_b={transpose_b}]", (a, b),
           lambda run, x, y: sf.matmul(tame(x, 4.0), tame(y, 4.0), transpose_a=transpose_a,
                                       transpose_b=transpose_b),
           Value(shape, v.dtype, False))


def op_transpose(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    perm = tuple(draw(st.permutations(range(len(v.shape)))))
    p.push(f"transpose[{perm}]", (a,), lambda run, x: sf.transpose(x, perm),
           Value(tuple(v.shape[i] for i in perm), v.dtype, v.exact))


def op_reshape(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    size = math.prod(v.shape)
    if size == 0:
        shape = list(draw(small_shapes(1, 3)))
        shape[draw(st.integers(0, len(shape) - 1))] = 0
    else:
        factors = [f for f in range(2, size + 1) for _ in range(_multiplicity(size, f))]
        rank = draw(st.integers(0 if size == 1 else 1, 4))
        shape = [1] * max(rank, 1)
        for f in draw(st.permutations(factors)):
            shape[draw(st.integers(0, len(shape) - 1))] *= f
        shape = shape[:rank] if rank else []
    target = list(shape)
    if size and target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    p.push(f"reshape[{target}]", (a,), lambda run, x: sf.reshape(x, target),
           Value(tuple(shape), v.dtype, v.exact))


def _multiplicity(n: int, f: int) -> int:
    """How often the prime `f` divides `n` (0 for composites)."""
    if any(f % q == 0 for q in range(2, f)):
        return 0
    count = 0
    while n % f == 0:
        n, count = n // f, count + 1
    return count


def op_slice(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    key: list[Any] = []
    for d in v.shape:
        if d and draw(st.integers(0, 3)) == 0:
            key.append(draw(st.integers(-d, d - 1)))
            continue
        bound = st.none() | st.integers(-6, 6)
        step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
        key.append(slice(draw(bound), draw(bound), step))
        if draw(st.integers(0, 5)) == 0:
            key.append(None)
    if key and draw(st.booleans()):  # the trailing axes through `...`
        key = key[:draw(st.integers(0, len(key)))] + [Ellipsis]
    index = tuple(key)
    shape = np.empty(v.shape)[index].shape
    p.push(f"getitem[{index}]", (a,), lambda run, x: x[index], Value(shape, v.dtype, v.exact))


def op_concat(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.shape)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    axis = draw(st.integers(-len(v.shape), len(v.shape) - 1))
    other_shape = list(v.shape)
    other_shape[axis] = draw(st.integers(0, 3))
    b = add_input(draw, p, tuple(other_shape), v.dtype)
    order = draw(st.sampled_from([(a, b), (b, a), (a, b, a)]))
    shape = list(v.shape)
    shape[axis] = sum(p.pool[i].shape[axis] for i in order)
    p.push(f"concat[axis={axis}]", order, lambda run, *xs: sf.concat(list(xs), axis),
           Value(tuple(shape), v.dtype, v.exact))


def op_pad(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.dtype != BOOL)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    pads = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in v.shape]
    fill = draw(st.sampled_from([0, 3])) if v.dtype.kind in "iu" else draw(
        st.sampled_from([0.0, 1.5]))
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(v.shape, pads, strict=True))
    p.push(f"pad[{pads}, {fill}]", (a,), lambda run, x: sf.pad(x, pads, constant_values=fill),
           Value(shape, v.dtype, v.exact))


def op_gather(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.shape)
    if not found:
        return
    a = draw(st.sampled_from(found))
    v = p.pool[a]
    axis = draw(st.integers(0, len(v.shape) - 1))
    dim = v.shape[axis]
    computed = p.picks(lambda w: w.dtype in INDICES and w.exact)
    if dim and computed and draw(st.booleans()):  # indices computed by the program
        i = draw(st.sampled_from(computed))
        index_shape = p.pool[i].shape

        def apply(run: Run, x: Any, indices: Any) -> Any:
            return sf.gather(x, sf.mod(sf.abs(indices), dim), axis=axis)
        text = "gather[abs(i) % dim]"
    else:
        index_shape = draw(small_shapes(0, 2)) if dim else (0,)
        dtype = draw(st.sampled_from(INDICES))
        i = add_input(draw, p, index_shape, dtype, st.integers(0, max(dim - 1, 0)))
        subscript = axis == 0 and len(index_shape) >= 1 and draw(st.booleans())

        def apply(run: Run, x: Any, indices: Any) -> Any:
            return x[indices] if subscript else sf.gather(x, indices, axis=axis)
        text = "getitem[indices]" if subscript else "gather"
    shape = v.shape[:axis] + index_shape + v.shape[axis + 1:]
    p.push(f"{text}[axis={axis}]", (a, i), apply, Value(shape, v.dtype, v.exact))


def op_broadcast_to(draw: Any, p: Program) -> None:
    a = draw(st.sampled_from(range(len(p.pool))))
    v = p.pool[a]
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    shape = lead + tuple(draw(st.integers(0, 3)) if d == 1 else d for d in v.shape)
    p.push(f"broadcast_to[{shape}]", (a,), lambda run, x: sf.broadcast_to(x, shape),
           Value(shape, v.dtype, v.exact))


def op_random(draw: Any, p: Program) -> None:
    shape = draw(small_shapes(0, 3))
    kind = draw(st.sampled_from(["uniform", "uniform_int", "normal", "global_uniform"]))
    dtype = I32 if kind == "uniform_int" else draw(st.sampled_from(FLOATS))
    if kind == "uniform":
        def apply(run: Run) -> Any:
            return run.generator.uniform(shape, -2.0, 2.0, dtype=dtype)
    elif kind == "uniform_int":
        def apply(run: Run) -> Any:
            return run.generator.uniform(shape, -3, 5, dtype=dtype)
    elif kind == "normal":
        def apply(run: Run) -> Any:
            return run.generator.normal(shape, dtype=dtype)
    else:
        def apply(run: Run) -> Any:
            return sf.random.uniform(shape, dtype=dtype)
    p.push(f"random.{kind}", (), apply, Value(shape, dtype, kind != "normal"))


def op_variable(draw: Any, p: Program) -> None:
    if not p.variables:
        return
    k = draw(st.integers(0, len(p.variables) - 1))
    initial = p.variables[k]
    shape, dtype = initial.shape, initial.dtype
    if draw(st.booleans()):
        p.push(f"read v{k}", (), lambda run: run.variables[k].read_value(),
               Value(shape, dtype, p.var_exact[k]))
        return
    found = p.picks(lambda v: v.dtype == dtype and broadcast(v.shape, shape) == shape)
    if not found:
        return
    a = draw(st.sampled_from(found))
    add = dtype.kind in "iu" and draw(st.booleans())
    p.var_exact[k] = p.var_exact[k] and p.pool[a].exact
    if add:
        p.push(f"v{k}.assign_add", (a,), lambda run, x: run.variables[k].assign_add(x), None)
    else:
        p.push(f"v{k}.assign", (a,),
               lambda run, x: run.variables[k].assign(sf.broadcast_to(x, shape)), None)


# Complex steps: two float values of one dtype become the parts of complex values, which a
# complex computation takes back to a real value (its modulus, real or imaginary part), so
# the pool stays real and every other step keeps its dtypes. Parts are tamed, and no
# computation crosses a branch cut (log's argument has a positive real part).
COMPLEX = {
    "z * w + z": lambda z, w: z * w + z,
    "conj(z) * w": lambda z, w: sf.math.conj(z) * w,
    "exp(z) - w": lambda z, w: sf.exp(z) - w,
    "z / (w conj(w) + 1)": lambda z, w: z / (w * sf.math.conj(w) + 1.0),
    "log(z conj(z) + 1) z": lambda z, w: sf.log(z * sf.math.conj(z) + 1.0) * z,
    "sum(z * w)": lambda z, w: sf.reduce_sum(z * w, axis=-1, keepdims=True),
}
PROJECTIONS = {"abs": sf.abs, "real": sf.math.real, "imag": sf.math.imag}


def op_complex(draw: Any, p: Program) -> None:
    found = p.picks(lambda v: v.dtype in FLOATS)
    if not found:
        return
    a = draw(st.sampled_from(found))
    b = partner(draw, p, a)
    if b is None:
        return
    shape = broadcast(p.pool[a].shape, p.pool[b].shape)
    name = draw(st.sampled_from([n for n in sorted(COMPLEX) if shape or not n.startswith("sum")]))
    if name.startswith("sum"):
        shape = (*shape[:-1], 1)
    projection = draw(st.sampled_from(sorted(PROJECTIONS)))
    compute, project = COMPLEX[name], PROJECTIONS[projection]

    def apply(run: Run, x: Any, y: Any) -> Any:
        x, y = tame(x, 2.0), tame(y, 2.0)
        return project(compute(sf.complex(x, y), sf.complex(y, x)))

    p.push(f"{projection}({name})", (a, b), apply, Value(shape, p.pool[a].dtype, False))


OPS = [op_unary, op_binary, op_compare, op_where, op_cast, op_reduce, op_arg_reduce,
       op_softmax, op_matmul, op_transpose, op_reshape, op_slice, op_concat, op_pad,
       op_gather, op_broadcast_to, op_random, op_variable, op_complex]


@st.composite
def programs(draw: Any, max_steps: int = 8) -> Program:
    """A random program: 1-3 inputs of broadcastable shapes, 0-2 variables, up to
    `max_steps` ops drawn from the whole op set, and a few of its values returned."""
    p = Program(seed=draw(st.integers(0, 2**32 - 1)))
    count = draw(st.integers(1, 3))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=count, max_dims=3, max_side=4))
    for shape in shapes.input_shapes:
        add_input(draw, p, shape, draw(st.sampled_from(NUMERIC + (BOOL,))))
    for _ in range(draw(st.integers(0, 2))):
        dtype = draw(st.sampled_from((F32, F64, I32)))
        p.variables.append(draw(hnp.arrays(dtype, small_shapes(0, 2), elements=values(dtype))))
        p.var_exact.append(True)
    for _ in range(draw(st.integers(1, max_steps))):
        draw(st.sampled_from(OPS))(draw, p)
    last = len(p.pool) - 1
    others = draw(st.lists(st.integers(0, last), max_size=3, unique=True))
    p.outputs = tuple(dict.fromkeys([last, *others]))
    return p



def eager(program: Program, variables: list[sf.Variable], generator: Any) -> Callable:
    """The program as a function of its inputs, over `variables` and `generator`."""
    return lambda *args: program(Run(args, variables, generator))


def staged(**options: Any) -> Callable[..., Callable]:
    """A way of running programs: staged with `sf.function(**options)`."""
    def make(program: Program, variables: list[sf.Variable], generator: Any) -> Callable:
        return sf.function(eager(program, variables, generator), **options)
    return make
