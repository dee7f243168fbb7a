"""Loops and index arithmetic in LLVM IR, shared by kernels, lowered ops and programs.

`fold_mul` and `fold_add` fold constants so that the emitted IR stays readable and LLVM has
less to clean up; loops are plain counted loops with phis (LLVM vectorises them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I64

MIN_UNROLLED_ROW = 4


def i64(value: int) -> ir.Constant:
    """An i64 constant (dims, strides, offsets)."""
    return ir.Constant(I64, value)


def fold_loop(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value,
              initial: Sequence[ir.Value],
              body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]],
              name: str, vectorize: bool = True) -> list[ir.Value]:
    """``for i in range(start, stop, step): values = body(i, values)``; the final values
    (`vectorize`: see `while_loop`)."""

    def advance(state: list[ir.Value]) -> list[ir.Value]:
        index, *values = state
        updated = body(index, values)
        return [b.add(index, step, flags=("nsw",)), *updated]

    _, *final = while_loop(b, [start, *initial], lambda state: b.icmp_signed(
        "<", state[0], stop), advance, name, index_name=name, vectorize=vectorize)
    return final


def while_loop(b: ir.IRBuilder, initial: Sequence[ir.Value],
               test: Callable[[list[ir.Value]], ir.Value],
               body: Callable[[list[ir.Value]], list[ir.Value]], name: str,
               index_name: str = "", vectorize: bool = True) -> list[ir.Value]:
    """``while test(values): values = body(values)``; the final values (the phis of the
    loop header; the first is named `index_name`, a counted loop's index). Unless
    `vectorize`, the loop tells LLVM's loop vectoriser to leave it scalar (`scalar_loop`)."""
    function = b.block.function
    header = function.append_basic_block(f"{name}.head")
    inside = function.append_basic_block(f"{name}.body")
    after = function.append_basic_block(f"{name}.end")
    entry = b.block
    b.branch(header)
    b.position_at_end(header)
    carried = []
    for position, value in enumerate(initial):
        phi = b.phi(value.type, name=index_name if position == 0 else "")
        phi.add_incoming(value, entry)
        carried.append(phi)
    b.cbranch(test(list(carried)), inside, after)
    b.position_at_end(inside)
    updated = body(list(carried))
    for phi, value in zip(carried, updated, strict=True):
        phi.add_incoming(value, b.block)
    back = b.branch(header)
    if not vectorize:
        back.set_metadata("llvm.loop", scalar_loop(b.module))
    b.position_at_end(after)
    return carried


def scalar_loop(module: ir.Module) -> ir.MDValue:
    """A new loop ID (``llvm.loop`` metadata, self-referential so that it is distinct)
    asking for vectorisation width 1: no loop vectorisation of that loop, its body may
    still be SLP-vectorised."""
    width = module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.width"),
                                 ir.Constant(ir.IntType(32), 1)])
    loop = ir.MDValue(module, [width], name=str(len(module.metadata)))
    loop.operands = (loop, width)
    return loop


def values_where(b: ir.IRBuilder, condition: ir.Value, values: list[ir.Value],
                 compute: Callable[[], list[ir.Value]]) -> list[ir.Value]:
    """`compute()`'s values where `condition` holds, else `values`: computed in a branch of
    its own (its loads run only where it holds), merged by one phi each."""
    before = b.block
    with b.if_then(condition):
        updated = compute()
        inside = b.block
    merged = []
    for old, new in zip(values, updated, strict=True):
        phi = b.phi(old.type)
        phi.add_incoming(old, before)
        phi.add_incoming(new, inside)
        merged.append(phi)
    return merged


def return_unless(b: ir.IRBuilder, ok: ir.Value, code: ir.Value) -> None:
    """Return `code` from the function unless `ok`; the builder continues on success."""
    if isinstance(ok, ir.Constant) and ok.constant:
        return
    function = b.block.function
    good = function.append_basic_block("ok")
    bad = function.append_basic_block("fail")
    b.cbranch(ok, good, bad)
    b.position_at_end(bad)
    b.ret(code)
    b.position_at_end(good)


def counted_loop(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value,
                 body: Callable[[ir.Value], None], name: str, vectorize: bool = True) -> None:
    """``for (i = start; i < stop; i += step) body(i)``; the builder ends after the loop
    (`vectorize`: see `while_loop`)."""

    def no_values(index: ir.Value, values: list[ir.Value]) -> list[ir.Value]:
        body(index)
        return values

    fold_loop(b, start, stop, step, [], no_values, name, vectorize)


def range_loop(b: ir.IRBuilder, stop: ir.Value, body: Callable[[ir.Value], None], name: str,
               start: ir.Value | None = None) -> None:
    """``for (i = start; i < stop; i++) body(i)``, from 0 unless `start` is given."""
    counted_loop(b, i64(0) if start is None else start, stop, i64(1), body, name)


def _is_const(value: ir.Value, number: int) -> bool:
    return isinstance(value, ir.Constant) and value.constant == number


def fold_mul(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x * y, folding constants so that the emitted IR stays readable."""
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return i64(x.constant * y.constant)
    if _is_const(x, 0) or _is_const(y, 0):
        return i64(0)
    if _is_const(x, 1):
        return y
    return x if _is_const(y, 1) else b.mul(x, y)


def fold_product(b: ir.IRBuilder, dims: Sequence[ir.Value]) -> ir.Value:
    """The product of `dims` (1 for none), constants folded: an array's or a run's size."""
    total: ir.Value = i64(1)
    for d in dims:
        total = fold_mul(b, total, d)
    return total


def fold_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    if _is_const(x, 0):
        return y
    return x if _is_const(y, 0) else b.add(x, y)


def strided_nest(b: ir.IRBuilder, sizes: Sequence[ir.Value],
                 strides: Sequence[Sequence[ir.Value]],
                 body: Callable[[list[ir.Value]], object]) -> None:
    """Nested loops over `sizes` (outermost first) calling `body` with every argument's
    offset: the sum over the axes of the index times the argument's stride there
    (``strides[argument][axis]``).

    Where the innermost size is a constant from `MIN_UNROLLED_ROW` on, the outer loops stay
    scalar (`scalar_loop`): LLVM unrolls the short inner loop whole and would vectorise
    the loop around it instead, with gathers and scatters across rows, several times slower
    than the unrolled rows SLP-vectorised (which run as fast as a copy). Below it (3 image
    channels) that outer vectorisation, by interleaved loads, is the faster."""
    last = sizes[-1] if sizes else None
    short_rows = isinstance(last, ir.Constant) and last.constant >= MIN_UNROLLED_ROW

    def nest(axis: int, bases: list[ir.Value]) -> None:
        if axis == len(sizes):
            body(bases)
            return

        def step(i: ir.Value) -> None:
            nest(axis + 1, [fold_add(b, base, fold_mul(b, i, s[axis])) for base, s in
                            zip(bases, strides, strict=True)])

        counted_loop(b, i64(0), sizes[axis], i64(1), step, f"i{axis}",
                     vectorize=axis == len(sizes) - 1 or not short_rows)

    nest(0, [i64(0)] * len(strides))
