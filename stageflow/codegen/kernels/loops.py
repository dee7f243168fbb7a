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

from llvmlite import ir

from stageflow.codegen.kernels import rules as ops
from stageflow.codegen.kernels.analysis import Arg, Kernel
from stageflow.codegen.kernels.layout import Address, Body, Layout, name_dims
from stageflow.codegen.kernels.reduce_loops import emit_reducing
from stageflow.codegen.llvm.emitter import I32, I64, Emitter, storage_type
from stageflow.codegen.llvm.loops import counted_loop, fold_mul, i64, strided_nest


class Driver:
    """How a target spreads iterations: sequential loops (this class, the CPU)."""

    def reducing(self, b: ir.IRBuilder, layout: Layout, body: Body, address: Address) -> None:
        """The loops of a kernel with reductions (`codegen.kernels.reduce_loops`)."""

        emit_reducing(b, layout, body, address)

    def flat(self, b: ir.IRBuilder, layout: Layout, body: Body) -> None:
        strides = [i64(s) for s in layout.flat_strides()]
        counted_loop(b, i64(0), layout.total, i64(1),
                     lambda i: body([fold_mul(b, i, s) for s in strides]), "i")

    def broadcast(self, b: ir.IRBuilder, layout: Layout, body: Body) -> None:
        strides = [layout.strides(index) for index in range(len(layout.kernel.args))]
        strided_nest(b, layout.space, strides, body)


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
                values[step.result] = ops.apply(e, step.primitive, node)
            first_output = len(kernel.inputs)
            for j, value_number in enumerate(kernel.results):
                index = first_output + j
                if value_number not in reduced:
                    e.store(values[value_number],
                            self._address(b, pointers, index, offsets[index]),
                            kernel.args[index].dtype)
            return values

        return body
