"""The loop nest of a kernel, in LLVM IR: shape checks, flat and broadcasting loops.

Both targets build the same two internal functions into their module:

``i32 NAME.check(i64 dims...)``
    ``dims`` are every argument's sizes, argument after argument (inputs, then outputs).
    Returns 0 if they are consistent with the kernel's types and with each other, else
    1 + the index of the first argument that is not. Static dims must equal the type's;
    the iteration space's size on an axis is the first input dim there that is not 1;
    every other input dim must be 1 or that size, every output dim exactly the broadcast
    of the input dims it is computed from; none may be negative. Nothing is read or
    written before this returns 0, so no call reaches memory outside the arrays.

``void NAME.run(ptr args..., i64 dims...)``
    Computes every element. If every argument is either full-size or a single element
    (known from the types and specs, else checked at run time from the sizes), one *flat*
    loop runs over the elements: each argument is read at the element index or at 0, a
    contiguous loop LLVM vectorises. Otherwise a *broadcasting* loop nest runs, each
    argument read at its own strides (stride 0 on its size-1 dims). Outputs are
    ``noalias``: they must not overlap inputs or each other.

How the elements are spread over iterations is the target's `Driver`: the CPU runs plain
nested loops; the GPU runs one grid-stride loop over the flat index per thread and
decomposes it into a multi-index where broadcasting needs one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from stageflow.codegen import ops
from stageflow.codegen.emitter import I32, I64, Emitter, storage_type
from stageflow.codegen.kernel import Arg, DimSpec, Kernel

# Emits one element, given per-argument offsets; returns the values computed there.
Body = Callable[[list[ir.Value]], dict[int, ir.Value] | None]
Address = Callable[[int, ir.Value], ir.Value]  # argument index, element offset -> pointer


def fold_loop(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: ir.Value,
              initial: Sequence[ir.Value],
              body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]],
              name: str) -> list[ir.Value]:
    """``for i in range(start, stop, step): values = body(i, values)``; the final values."""
    function = b.block.function
    header = function.append_basic_block(f"{name}.head")
    inside = function.append_basic_block(f"{name}.body")
    after = function.append_basic_block(f"{name}.end")
    entry = b.block
    b.branch(header)
    b.position_at_end(header)
    index = b.phi(I64, name=name)
    index.add_incoming(start, entry)
    carried = []
    for value in initial:
        phi = b.phi(value.type)
        phi.add_incoming(value, entry)
        carried.append(phi)
    b.cbranch(b.icmp_signed("<", index, stop), inside, after)
    b.position_at_end(inside)
    updated = body(index, list(carried))
    index.add_incoming(b.add(index, step, flags=("nsw",)), b.block)
    for phi, value in zip(carried, updated, strict=True):
        phi.add_incoming(value, b.block)
    b.branch(header)
    b.position_at_end(after)
    return carried


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
                 body: Callable[[ir.Value], None], name: str) -> None:
    """``for (i = start; i < stop; i += step) body(i)``; the builder ends after the loop."""

    def no_values(index: ir.Value, values: list[ir.Value]) -> list[ir.Value]:
        body(index)
        return values

    fold_loop(b, start, stop, step, [], no_values, name)


def _i64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def _is_const(value: ir.Value, number: int) -> bool:
    return isinstance(value, ir.Constant) and value.constant == number


def fold_mul(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x * y, folding constants so that the emitted IR stays readable."""
    if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
        return _i64(x.constant * y.constant)
    if _is_const(x, 0) or _is_const(y, 0):
        return _i64(0)
    if _is_const(x, 1):
        return y
    return x if _is_const(y, 1) else b.mul(x, y)


def fold_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    if _is_const(x, 0):
        return y
    return x if _is_const(y, 0) else b.add(x, y)


def _and(b: ir.IRBuilder, x: ir.Value | None, y: ir.Value) -> ir.Value:
    return y if x is None else b.and_(x, y)


def name_dims(kernel: Kernel, args: Sequence[ir.Argument]) -> None:
    """Name dim parameters ``argI.dJ`` so that the IR reads as the ABI says."""
    names = [f"arg{i}.d{a}" for i, arg in enumerate(kernel.args) for a in range(arg.ndim)]
    for value, name in zip(args, names, strict=True):
        value.name = name


class Layout:
    """Per-argument dims as IR values, the iteration space, strides and flatness tests.

    `given` holds the dims as passed; `dims` the same with the type's static sizes
    substituted (valid once `consistent` holds), so that LLVM folds what the types fix.
    """

    def __init__(self, b: ir.IRBuilder, kernel: Kernel, dims: Sequence[ir.Value]) -> None:
        self.b, self.kernel = b, kernel
        self._specs: dict[DimSpec, ir.Value] = {}
        self.given: list[list[ir.Value]] = []
        self.dims: list[list[ir.Value]] = []
        position = 0
        for arg in kernel.args:
            given = list(dims[position:position + arg.ndim])
            self.given.append(given)
            self.dims.append([v if d is None else _i64(d) for v, d in zip(given, arg.shape,
                                                                           strict=True)])
            position += arg.ndim
        self.space = [self._space_dim(axis) for axis in range(kernel.rank)]
        total: ir.Value = _i64(1)
        for d in self.space:
            total = fold_mul(b, total, d)
        self.total = total

    def live(self, index: int) -> bool:
        return self.kernel.is_live(index)

    def axes(self, index: int) -> list[tuple[int, int]]:
        """(iteration axis, argument axis) pairs of argument `index`, right-aligned."""
        offset = self.kernel.rank - self.kernel.args[index].ndim
        return [(offset + a, a) for a in range(self.kernel.args[index].ndim)]

    def _space_dim(self, axis: int) -> ir.Value:
        return self.spec_value(self.kernel.shape[axis])

    def spec_value(self, spec: DimSpec) -> ir.Value:
        """A dim spec's size: the first of its source input dims that is not 1 (nor
        negative, so that a negative dim is reported against its own argument only)."""
        if isinstance(spec, int):
            return _i64(spec)
        if spec not in self._specs:
            b, size = self.b, _i64(1)
            for index, axis in reversed(spec):
                d = self.given[index][axis]
                usable = b.and_(b.icmp_signed("!=", d, _i64(1)), b.icmp_signed(">=", d, _i64(0)))
                size = b.select(usable, d, size)
            self._specs[spec] = size
        return self._specs[spec]

    def arg_spec(self, index: int, arg_axis: int) -> DimSpec:
        """What decides a dim of argument `index`: its type, its own value, or for an
        output the inputs it is computed from."""
        arg = self.kernel.args[index]
        if arg.shape[arg_axis] is not None:
            return arg.shape[arg_axis]
        if arg.is_output:
            return self.kernel.output_shapes[index - len(self.kernel.inputs)][arg_axis]
        return ((index, arg_axis),)

    def consistent(self, index: int) -> ir.Value:
        """i1: argument `index`'s dims fit its type and the iteration space (inputs: each
        dim 1 or the space's; outputs: exactly the broadcast of their inputs' dims)."""
        b, arg = self.b, self.kernel.args[index]
        ok = None
        for space_axis, arg_axis in self.axes(index):
            d = self.given[index][arg_axis]
            static = arg.shape[arg_axis]
            if static is not None:
                fits = b.icmp_signed("==", d, _i64(static))
            elif arg.is_output:
                fits = b.icmp_signed("==", d, self.spec_value(self.arg_spec(index, arg_axis)))
            elif not self.live(index):
                fits = b.icmp_signed(">=", d, _i64(0))
            else:
                fits = b.and_(b.icmp_signed(">=", d, _i64(0)),
                              b.or_(b.icmp_signed("==", d, _i64(1)),
                                    b.icmp_signed("==", d, self.space[space_axis])))
            ok = _and(b, ok, fits)
        return ir.Constant(ir.IntType(1), 1) if ok is None else ok

    def structurally_full(self, index: int) -> bool:
        """Full-size whenever the checks pass: on every iteration axis its dim is decided
        exactly as the iteration space's (same static size, or the same sources)."""
        arg, kernel = self.kernel.args[index], self.kernel
        leading = kernel.shape[:kernel.rank - arg.ndim]
        return (all(d == 1 for d in leading)
                and all(self.arg_spec(index, a) == kernel.shape[k] for k, a in self.axes(index)))

    def size(self, index: int) -> ir.Value:
        size: ir.Value = _i64(1)
        for d in self.dims[index]:
            size = fold_mul(self.b, size, d)
        return size

    def flat_strides(self) -> list[int]:
        """Flat-loop strides: 0 for single-element arguments, 1 for full-size ones."""
        return [0 if arg.is_static_scalar else 1 for arg in self.kernel.args]

    def flat_ok(self) -> ir.Value | None:
        """i1: the flat loop is valid now; ``None`` if it always is."""
        ok = None
        for index, arg in enumerate(self.kernel.args):
            if self.live(index) and not arg.is_static_scalar and not self.structurally_full(index):
                ok = _and(self.b, ok, self.b.icmp_signed("==", self.size(index), self.total))
        return ok

    def strides(self, index: int) -> list[ir.Value]:
        """Element strides of argument `index` on every iteration axis (0 where broadcast)."""
        b = self.b
        result: list[ir.Value] = [_i64(0)] * self.kernel.rank
        contiguous: ir.Value = _i64(1)
        for space_axis, arg_axis in reversed(self.axes(index)):
            d = self.dims[index][arg_axis]
            if isinstance(d, ir.Constant):
                result[space_axis] = _i64(0) if d.constant == 1 else contiguous
            else:
                result[space_axis] = b.select(b.icmp_signed("==", d, _i64(1)), _i64(0),
                                              contiguous)
            contiguous = fold_mul(b, contiguous, d)
        return result


class Driver:
    """How a target spreads iterations: sequential loops (this class, the CPU)."""

    def reducing(self, b: ir.IRBuilder, layout: Layout, body: Body, address: Address) -> None:
        """The loops of a kernel with reductions (`codegen.reduce_loops`)."""
        from stageflow.codegen.reduce_loops import emit_reducing

        emit_reducing(b, layout, body, address)

    def flat(self, b: ir.IRBuilder, layout: Layout, body: Body) -> None:
        strides = [_i64(s) for s in layout.flat_strides()]
        counted_loop(b, _i64(0), layout.total, _i64(1),
                     lambda i: body([fold_mul(b, i, s) for s in strides]), "i")

    def broadcast(self, b: ir.IRBuilder, layout: Layout, body: Body) -> None:
        strides = [layout.strides(index) for index in range(len(layout.kernel.args))]
        strided_nest(b, layout.space, strides, body)


def strided_nest(b: ir.IRBuilder, sizes: Sequence[ir.Value],
                 strides: Sequence[Sequence[ir.Value]], body: Body) -> None:
    """Nested loops over `sizes` (outermost first) calling `body` with every argument's
    offset: the sum over the axes of the index times the argument's stride there
    (``strides[argument][axis]``)."""

    def nest(axis: int, bases: list[ir.Value]) -> None:
        if axis == len(sizes):
            body(bases)
            return

        def step(i: ir.Value) -> None:
            nest(axis + 1, [fold_add(b, base, fold_mul(b, i, s[axis])) for base, s in
                            zip(bases, strides, strict=True)])

        counted_loop(b, _i64(0), sizes[axis], _i64(1), step, f"i{axis}")

    nest(0, [_i64(0)] * len(strides))


class KernelBuilder:
    """Adds a kernel's ``.check`` and ``.run`` functions to an llvmlite module."""

    def __init__(self, kernel: Kernel, module: ir.Module, symbol: str,
                 libm: frozenset[str] = frozenset(), address_space: int = 0) -> None:
        self.kernel, self.module, self.symbol = kernel, module, symbol
        self.libm = libm
        self.pointer = ir.PointerType(addrspace=address_space)
        self.num_dims = sum(arg.ndim for arg in kernel.args)

    def _internal(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        function = ir.Function(self.module, ir.FunctionType(ret, args), f"{self.symbol}.{name}")
        function.linkage = "internal"
        function.attributes.add("alwaysinline")
        function.attributes.add("nounwind")
        return function

    def build_check(self) -> ir.Function:
        function = self._internal("check", I32, [I64] * self.num_dims)
        name_dims(self.kernel, function.args)
        b = ir.IRBuilder(function.append_basic_block("entry"))
        layout = Layout(b, self.kernel, list(function.args))
        code = ir.Constant(I32, 0)
        for index in reversed(range(len(self.kernel.args))):
            code = b.select(layout.consistent(index), code, ir.Constant(I32, index + 1))
        b.ret(code)
        return function

    def build_run(self, driver: Driver) -> ir.Function:
        args = self.kernel.args
        function = self._internal("run", ir.VoidType(),
                                  [self.pointer] * len(args) + [I64] * self.num_dims)
        for index, arg in enumerate(args):
            function.args[index].name = f"arg{index}"
            if arg.is_output:
                function.args[index].add_attribute("noalias")
        name_dims(self.kernel, function.args[len(args):])
        b = ir.IRBuilder(function.append_basic_block("entry"))
        pointers = list(function.args[:len(args)])
        layout = Layout(b, self.kernel, list(function.args[len(args):]))
        body = self._element_body(b, pointers)
        if self.kernel.reductions:
            driver.reducing(b, layout, body, lambda index, offset: self._address(
                b, pointers, index, offset))
            b.ret_void()
            return function
        flat_ok = layout.flat_ok()
        if flat_ok is None:
            driver.flat(b, layout, body)
            b.ret_void()
            return function
        flat_block = function.append_basic_block("flat")
        broadcast_block = function.append_basic_block("broadcast")
        b.cbranch(flat_ok, flat_block, broadcast_block)
        b.position_at_end(flat_block)
        driver.flat(b, layout, body)
        b.ret_void()
        b.position_at_end(broadcast_block)
        driver.broadcast(b, layout, body)
        b.ret_void()
        return function

    def _address(self, b: ir.IRBuilder, pointers: list[ir.Value], index: int,
                 offset: ir.Value) -> ir.Value:
        arg: Arg = self.kernel.args[index]
        return b.gep(pointers[index], [offset], inbounds=True,
                     source_etype=storage_type(arg.dtype))

    def _element_body(self, b: ir.IRBuilder, pointers: list[ir.Value]) -> Body:
        """Computes one element: reads the inputs, applies the steps, stores the results
        that are not reduced; returns every value (the reductions' operands among them)."""
        kernel = self.kernel
        e = Emitter(b, self.libm)
        reduced = {r.result for r in kernel.reductions}

        def body(offsets: list[ir.Value]) -> dict[int, ir.Value]:
            values: dict[int, ir.Value] = {}
            for index in sorted(kernel.used_inputs):
                values[index] = e.load(self._address(b, pointers, index, offsets[index]),
                                       kernel.args[index].dtype)
            for step in kernel.steps:
                node = ops.Node(tuple(values[i] for i in step.operands), step.dtypes,
                                step.result_dtype, step.params)
                values[step.result] = ops.apply(e, step.name, node)
            first_output = len(kernel.inputs)
            for j, value_number in enumerate(kernel.results):
                index = first_output + j
                if value_number not in reduced:
                    e.store(values[value_number],
                            self._address(b, pointers, index, offsets[index]),
                            kernel.args[index].dtype)
            return values

        return body
