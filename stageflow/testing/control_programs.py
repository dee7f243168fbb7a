"""Random programs with nested `cond`, `switch_case` and `while_loop`.

They extend the random programs of `stageflow.testing.random_ops` (same pool of typed
values, same op set, same tolerances) with region ops whose bodies are random chains of ops
over a value and over values from above: a cond or switch on a predicate computed from an
exact value (so every implementation takes the same branch), and loops whose trip count, at
most 3, is computed the same way, their bodies holding branches or loops in turn.
`stageflow.testing.random_programs` draws them beside the straight-line programs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.testing.random_ops import (
    BINARY,
    BOOL,
    NUMERIC,
    OPS,
    UNARY,
    Program,
    Value,
    add_input,
    broadcast,
)

Chain = list[tuple[str, Callable[..., Any], int | None]]  # (name, function, partner)


def chain(draw: Any, p: Program, value: Value, depth: int) -> tuple[Chain, bool]:
    """A random chain of 1-3 ops turning a value of `value`'s type into another of the same
    type, binary ops taking partners from the pool that broadcast into it, and, while
    `depth` allows, a nested region op; whether every op is exact."""
    ops: Chain = []
    exact = True
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["unary", "binary", "nested"] if depth else
                                    ["unary", "binary"]))
        if kind == "nested":
            nested, nested_exact = region_op(draw, p, value, depth - 1)
            ops.append(("region", nested, None))
            exact &= nested_exact
            continue
        table = UNARY if kind == "unary" else BINARY
        names = [n for n, (_, dtypes, _) in table.items() if value.dtype in dtypes]
        if not names:
            continue
        name = draw(st.sampled_from(names))
        function, _, op_exact = table[name]
        partner = None
        if kind == "binary":
            found = p.picks(lambda w: w.dtype == value.dtype
                            and broadcast(w.shape, value.shape) == value.shape)
            partner = draw(st.sampled_from(found)) if found else None
            if partner is None:
                continue
            op_exact &= p.pool[partner].exact
        ops.append((name, function, partner))
        exact &= op_exact
    return ops, exact


def run_chain(ops: Chain, x: Any, pool: list[Any], counter: Any) -> Any:
    for name, function, partner in ops:
        if name == "region":
            x = function(x, pool, counter)
        else:
            x = function(x) if partner is None else function(x, pool[partner])
    return x


def predicate_source(draw: Any, p: Program) -> int:
    """An exact pool value: what predicates and trip counts are computed from."""
    return draw(st.sampled_from(p.picks(lambda v: v.exact)))


def count_positive(x: Any) -> Any:
    """How many elements of `x` are positive (true), an int32 scalar computed exactly."""
    return sf.reduce_sum(sf.cast(x if x.dtype == np.bool_ else x > 0, sf.int32))


def region_op(draw: Any, p: Program, value: Value, depth: int
              ) -> tuple[Callable[[Any, list[Any], Any], Any], bool]:
    """A cond, switch or loop over a value of type `value`, as a function of (the value,
    the pool's run-time values, the enclosing loop's counter or None)."""
    kind = draw(st.sampled_from(["cond", "switch", "while"]))
    source = predicate_source(draw, p)
    use_counter = draw(st.booleans())
    branches = [chain(draw, p, value, depth) for _ in range(3 if kind == "switch" else 2)]
    exact = all(e for _, e in branches)

    def key(pool: list[Any], counter: Any) -> Any:
        count = count_positive(pool[source])
        return count + counter if use_counter and counter is not None else count

    if kind == "cond":
        def apply(x: Any, pool: list[Any], counter: Any) -> Any:
            return sf.cond(key(pool, counter) % 2 == 0,
                           lambda: run_chain(branches[0][0], x, pool, counter),
                           lambda: run_chain(branches[1][0], x, pool, counter))
    elif kind == "switch":
        def apply(x: Any, pool: list[Any], counter: Any) -> Any:
            return sf.switch_case(key(pool, counter) % 4,
                                  [lambda ops=ops: run_chain(ops, x, pool, counter)
                                   for ops, _ in branches])
    else:
        body = branches[0][0]

        def apply(x: Any, pool: list[Any], counter: Any) -> Any:
            trips = sf.minimum(key(pool, counter), 3)
            return sf.while_loop(lambda i, y: i < trips,
                                 lambda i, y: (i + 1, run_chain(body, y, pool, i)),
                                 (sf.constant(0, dtype=sf.int32), x))[1]
        exact = branches[0][1]
    return apply, exact


def op_region(draw: Any, p: Program) -> int:
    """Push the result of a region op over a pool value (nested up to two deep); its
    index in the pool."""
    a = draw(st.sampled_from(p.picks(lambda v: v.dtype != BOOL)))
    value = p.pool[a]
    apply, exact = region_op(draw, p, value, depth=draw(st.integers(0, 1)))
    operands = tuple(range(len(p.pool)))
    return p.push("region", operands, lambda run, *pool: apply(pool[a], list(pool), None),
                  Value(value.shape, value.dtype, exact and value.exact))


@st.composite
def control_programs(draw: Any) -> Program:
    """1-2 inputs, a few ops of the whole op set, 1-3 region ops, a few ops after them."""
    p = Program(seed=draw(st.integers(0, 2**32 - 1)))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=draw(st.integers(1, 2)),
                                                    max_dims=2, max_side=3))
    for shape in shapes.input_shapes:
        add_input(draw, p, shape, draw(st.sampled_from(NUMERIC)))
    for _ in range(draw(st.integers(0, 2))):
        draw(st.sampled_from(OPS[:8]))(draw, p)
    regions = [op_region(draw, p) for _ in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(0, 2))):
        draw(st.sampled_from(OPS[:8]))(draw, p)
    p.outputs = tuple(dict.fromkeys([len(p.pool) - 1, *regions]))
    return p
