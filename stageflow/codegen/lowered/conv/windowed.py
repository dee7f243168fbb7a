"""What the three convolution families share: the op's geometry read at run time, one copy
of each family's code per LLVM module, the operands' checks, the gemm call and the split
of the work over the cores.

An op's entry copies its operands' dims and its geometry (strides, padding, dilations; the
gradients' input or filter size) into one array and calls its family's function
(`Windowed._shared`, one per family and dtype in a module), which reads them at run time.
With a copy of the code per op, the geometry folded into constants, a network's dozen
distinct convolutions made an op module several times larger and its compile time as
much longer, for no speed: the direct loops' inner loop compiles to the same instructions
with the strides read at run time.

The split: the image rows of the result or of the cotangent (whole images for col2im,
whose neighbouring rows add into the same input rows) become one task per core
(`codegen.lowered.tasks`), each with scratch of its own. The tasks' gemms run with
OpenBLAS single-threaded (`matmul.single_threaded_blas`), and so do a single task's:
OpenBLAS threading the small block gemms as well made the tasks slower and their timing
bimodal, depending on where its threads slept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, F64, I32, I64
from stageflow.codegen.llvm.functions import entry_alloca, memcpy
from stageflow.codegen.llvm.loops import fold_mul, i64, return_unless
from stageflow.codegen.lowered.matmul import (
    NO_TRANS,
    ROW_MAJOR,
    TRANS,
    gemm_function,
    single_threaded_blas,
)
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    OpSpec,
    contiguous_strides,
    load_operands,
    row_major,
)
from stageflow.codegen.lowered.tasks import Guard, TaskBody, run_tasks, task_count
from stageflow.codegen.lowered.windows import window_count, window_fits
from stageflow.codegen.targets import cpu
from stageflow.core.primitive import ShapedType

# A task gets at least this many multiply-adds: several times what handing it to a
# watching worker of the pool costs, and few enough that the small convolutions of a batch
# of one still split (a threshold sized for waking a sleeping worker left them on one core).
MIN_TASK_MACS = 1 << 18
NO_MEMORY = 4  # a conv's code where malloc or calloc fails: 1 + its argument count
PTR = ir.PointerType()

# The dims array a family's shared code reads (`Windowed.emit`): the three operands' dims,
# then the op's geometry (`Geometry`).
_OPERAND_DIMS = 12
_GEOMETRY = ("sh", "sw", "top", "bottom", "left", "right", "dh", "dw", "size0", "size1",
             "groups", "rectify")


@dataclass(frozen=True)
class Geometry:
    """One op's strides, padding ((top, bottom), (left, right)), dilations, `size` (the
    input gradient's input height and width, the filter gradient's filter height and
    width; zeros for conv2d), feature groups (`feature_group_count`) and whether a fused
    conv's epilogue ends in a ReLU (1, else 0) as the family's shared code reads them at
    run time, from its dims array after the operands' dims."""

    strides: tuple[ir.Value, ir.Value]
    padding: tuple[tuple[ir.Value, ir.Value], tuple[ir.Value, ir.Value]]
    dilations: tuple[ir.Value, ir.Value]
    size: tuple[ir.Value, ir.Value]
    groups: ir.Value
    relu: ir.Value

    @classmethod
    def read(cls, ob: OpBuilder) -> Geometry:
        """The geometry loaded at `ob`'s position (once per function: the loops reuse it)."""
        b, dims = ob.b, ob.arguments[1]
        v = []
        for k, label in enumerate(_GEOMETRY):
            value = b.load(b.gep(dims, [i64(_OPERAND_DIMS + k)], source_etype=I64), typ=I64)
            value.name = label
            v.append(value)
        return cls((v[0], v[1]), ((v[2], v[3]), (v[4], v[5])), (v[6], v[7]), (v[8], v[9]),
                   v[10], b.icmp_signed("!=", v[11], i64(0)))


@dataclass(frozen=True)
class Windowed:
    """One conv2d-family op: its geometry (`_GEOMETRY`'s values) and dtype, the entry that
    passes them to its family's shared code, and what that code's families share.

    The *image* is the NHWC array the windows lie in (the conv's input; the input gradient's
    result), the *positions* the (N, Ho, Wo) grid of windows (the conv's result; the
    cotangent), and the filters are kh x kw taps of C channels."""

    geometry: tuple[int, ...]
    dtype: np.dtype
    # Compiled at the cleanup level, shape-generic: the copies are written as vectors and
    # the work is in the gemms and the direct loops' explicit FMAs, so specialising each
    # shape at O2 cost several times the compile time for no measurable speed.
    optimize_loops = False

    @property
    def _real(self) -> ir.Type:
        return F32 if self.dtype == np.float32 else F64

    def emit(self, ob: OpBuilder) -> None:
        """The op's entry: its operands' dims (copied as given: one memcpy, cheaper for LLVM
        than a store per dim) and its geometry in one array, passed with its data and
        strides to the family's code, whose status it returns."""
        b = ob.b
        data, given, strides = ob.arguments
        dims = entry_alloca(b, I64, _OPERAND_DIMS + len(self.geometry), "geometry")
        strides = self._operand_dims(ob, dims, given, strides)
        for k, value in enumerate(self.geometry):
            b.store(i64(value), b.gep(dims, [i64(_OPERAND_DIMS + k)], source_etype=I64))
        code = b.call(self._shared(ob), [self._data(ob, data), dims, strides])
        return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)

    def _operand_dims(self, ob: OpBuilder, dims: ir.Value, given: ir.Value,
                      strides: ir.Value) -> ir.Value:
        """Fill the first `_OPERAND_DIMS` of `dims` with the three operands' dims as the
        shared code reads them (those given); the inputs' strides it reads (those given)."""
        memcpy(ob.b, dims, given, i64(_OPERAND_DIMS * 8))
        return strides

    def _data(self, ob: OpBuilder, data: ir.Value) -> ir.Value:
        """The data pointers the shared code reads: the op's own, by default."""
        return data

    def _family(self, ob: OpBuilder) -> str:
        """The name the family's shared code is known by in a module: the op's, by
        default (ops that share code name one family)."""
        return ob.spec.name

    def _shared(self, ob: OpBuilder) -> ir.Function:
        """``i32 sf.NAME.DTYPE(ptr data, ptr dims, ptr strides)``: the family's code, every
        dim and the geometry read at run time (dims as `emit` stores them). For the JIT it is
        compiled once in the process and cached by the sources that build it
        (`cpu.shared_function`): it is the same for every shape, so a convolution of a new
        shape compiles only its entry. Elsewhere (an ahead-of-time library, an IR dump) the
        module's first op of the family and dtype builds an internal copy."""
        module = ob.b.module
        family = self._family(ob)
        symbol = f"sf.{family}.{self.dtype.name}"
        existing = module.globals.get(symbol)
        if isinstance(existing, ir.Function):
            return existing
        signature = ir.FunctionType(I32, [PTR] * 3)
        if cpu.shares_code():
            return cpu.shared_function(module, symbol, signature,
                                       lambda library: self._define(library, symbol, family))
        function = self._define(module, symbol, family)
        function.linkage = "internal"
        return function

    def _define(self, module: ir.Module, symbol: str, family: str) -> ir.Function:
        """The family's code as `symbol` of `module`."""
        function = ir.Function(module, ir.FunctionType(I32, [PTR] * 3), symbol)
        for argument, label in zip(function.args, ("data", "dims", "strides"), strict=True):
            argument.name = label
        unknown = ShapedType((None,) * 4, self.dtype)
        spec = OpSpec(family, (unknown, unknown), (unknown,), {})
        b = ir.IRBuilder(function.append_basic_block("entry"))
        operands, _ = load_operands(b, spec, *function.args)  # the entry checked the dims
        shared = OpBuilder(b, spec, operands[:2], operands[2:], tuple(function.args))
        self._body(shared, Geometry.read(shared))
        shared.b.ret(ir.Constant(I32, 0))
        return function

    def _body(self, ob: OpBuilder, geo: Geometry) -> None:
        """The family's code in its shared function."""
        raise NotImplementedError

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        """The dims of the op's result its operands and geometry imply."""
        raise NotImplementedError

    def _check(self, ob: OpBuilder, geo: Geometry, image: Operand, kh: ir.Value,
               kw: ir.Value, positions: Operand | None, argument: int) -> None:
        """Fail (naming `argument`) unless the windows fit the image and, given the
        positions (a cotangent), their height and width are the windows' count; then
        unless the output has the dims the primitive computes."""
        b, window = ob.b, (kh, kw)
        ob.fail_unless(ob.all_of([
            window_fits(ob, image.dims[1 + axis], window[axis], geo.padding[axis],
                        geo.dilations[axis]) for axis in (0, 1)]), argument)
        if positions is not None:
            ob.fail_unless(ob.all_of([
                ob.eq(positions.dims[1 + axis], window_count(
                    b, image.dims[1 + axis], window[axis], geo.strides[axis],
                    geo.padding[axis], geo.dilations[axis])) for axis in (0, 1)]), argument)
        ob.expect_output(0, self._result_dims(ob, geo))

    def _gemm(self, ob: OpBuilder, transposed: tuple[bool, bool], m: ir.Value, n: ir.Value,
              k: ir.Value, a: tuple[ir.Value, ir.Value], b_: tuple[ir.Value, ir.Value],
              beta: ir.Value, c: tuple[ir.Value, ir.Value]) -> None:
        """``C[m, n] = beta * C + op(A) @ op(B)`` (row-major; each matrix a pointer and its
        leading dimension; op transposes where `transposed` says)."""
        flags = [ir.Constant(I32, TRANS if t else NO_TRANS) for t in transposed]
        ob.b.call(gemm_function(ob.b.module, self.dtype), [
            ir.Constant(I32, ROW_MAJOR), *flags, m, n, k, ir.Constant(self._real, 1.0),
            *a, *b_, beta, *c])

    def _split(self, ob: OpBuilder, units: ir.Value, macs: ir.Value, body: TaskBody,
               private: Callable[[ir.IRBuilder, ir.Value], ir.Value] | None = None,
               merge: Callable[[ir.IRBuilder, ir.Value], None] | None = None,
               name: str = "rows", guard: Guard | None = single_threaded_blas) -> None:
        """Run `body` over `units` as one task per core, fewer where a task would get under
        `MIN_TASK_MACS` multiply-adds (`macs` in all) or there are fewer units; the BLAS
        single-threaded around them unless `guard` says otherwise (tasks with no gemm)."""
        b = ob.b
        run_tasks(ob, name, units, task_count(b, units, macs, MIN_TASK_MACS), body, private,
                  merge, guard)


class ConvolutionShape:
    """conv2d's operands checked (the channels agree, the window fits, row-major) and its
    result dims (the images, the windows along each spatial axis, the filters): shared by
    the convolutions of every dtype, whose `Windowed` body calls `_checked` first."""

    def _checked(self, ob: OpBuilder, geo: Geometry) -> tuple[Operand, Operand]:
        """The operands row-major, once the input's channels are the filters' times the
        groups and the output channels a multiple of the groups (else argument 1's code)."""
        x, w = ob.inputs
        kh, kw, channels, o = w.dims
        ob.fail_unless(ob.all_of([ob.eq(x.dims[3], fold_mul(ob.b, channels, geo.groups)),
                                  ob.eq(ob.b.srem(o, geo.groups), i64(0))]), 1)
        self._check(ob, geo, x, kh, kw, None, 0)
        return row_major(ob, 0), row_major(ob, 1)

    def _gemm_sizes(self, ob: OpBuilder, geo: Geometry, w: Operand
                    ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """The output's image rows and pixels (a gemm's rows), a window's elements (its
        depth), and whether the conv is pointwise: a 1x1 filter at stride 1 without
        padding, which reads the input as an (N*H*W, C) matrix."""
        b, out = ob.b, ob.outputs[0]
        kh, kw, channels, _ = w.dims
        image_rows = fold_mul(b, out.dims[0], out.dims[1])
        depth = fold_mul(b, fold_mul(b, kh, kw), channels)
        pointwise = ob.all_of([ob.eq(v, i64(1)) for v in (kh, kw, *geo.strides)]
                              + [ob.eq(v, i64(0)) for pair in geo.padding for v in pair])
        return image_rows, fold_mul(b, image_rows, out.dims[2]), depth, pointwise

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        x, w = ob.inputs
        return [x.dims[0], *[window_count(ob.b, x.dims[1 + axis], w.dims[axis],
                                          geo.strides[axis], geo.padding[axis],
                                          geo.dilations[axis]) for axis in (0, 1)], w.dims[3]]


def _divides(ob: OpBuilder, groups: ir.Value, size: ir.Value) -> ir.Value:
    return ob.eq(ob.b.srem(size, groups), i64(0))


class FilterGradientShape:
    """conv2d_filter_gradient's operands checked (the images agree, the input's and the
    cotangent's channels divide into the groups, the window fits the input and the
    cotangent, row-major) and its result dims (the filter size, the input's channels per
    group, the cotangent's)."""

    def _checked(self, ob: OpBuilder, geo: Geometry) -> tuple[Operand, Operand]:
        x, g = ob.inputs
        ob.fail_unless(ob.all_of([ob.eq(x.dims[0], g.dims[0]),
                                  _divides(ob, geo.groups, x.dims[3]),
                                  _divides(ob, geo.groups, g.dims[3])]), 1)
        self._check(ob, geo, x, *geo.size, g, 1)
        return row_major(ob, 0), row_major(ob, 1)

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        x, g = ob.inputs
        return [*geo.size, ob.b.sdiv(x.dims[3], geo.groups), g.dims[3]]


class InputGradientShape:
    """conv2d_input_gradient's operands checked (the filters agree with the cotangent, their
    output channels divide into the groups, the window fits the result, row-major) and its
    result dims (the images, the input size, the filters' input channels times the
    groups)."""

    def _checked(self, ob: OpBuilder, geo: Geometry) -> tuple[Operand, Operand]:
        g, w = ob.inputs
        kh, kw, _, o = w.dims
        ob.fail_unless(ob.all_of([ob.eq(g.dims[3], o), _divides(ob, geo.groups, o)]), 1)
        self._check(ob, geo, ob.outputs[0], kh, kw, g, 0)
        return row_major(ob, 0), row_major(ob, 1)

    def _result_dims(self, ob: OpBuilder, geo: Geometry) -> list[ir.Value]:
        g, w = ob.inputs
        return [g.dims[0], *geo.size, fold_mul(ob.b, w.dims[2], geo.groups)]

def blas_unless(direct: ir.Value) -> Guard:
    """OpenBLAS single-threaded around the tasks unless they run the direct loops, which
    call no gemm and leave its threads alone."""

    def guard(b: ir.IRBuilder, region: Callable[[], None]) -> None:
        with b.if_else(direct) as (alone, gemms):
            with alone:
                region()
            with gemms:
                single_threaded_blas(b, region)

    return guard


def contiguous_operands(ob: OpBuilder) -> tuple[Operand, Operand, Operand]:
    """A task's two inputs and output, with the row-major strides their dims imply (the
    entry checked the inputs are so): constants where the dims are static."""
    b = ob.b
    x, w = (Operand(a.pointer, a.dims, contiguous_strides(b, a.dims), a.dtype)
            for a in ob.inputs)
    return x, w, ob.outputs[0]
