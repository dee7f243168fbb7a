"""Lowerings of the windowed ops over NHWC images: `conv2d` and its two gradients (float32,
float64) through the BLAS gemm or, for few output channels, a generated direct
convolution; `reduce_window` (max and sum pooling) as direct loops.

conv2d picks its algorithm by shape:

- a 1x1 filter (at run time) with stride 1 and no padding is one gemm of the input, read
  in place as an (N*H*W, C) matrix, by the filters as a (C, O) matrix: no copy at all;
- else, with filter taps one column apart (dilation 1 along the width; any strides, padding
  and row dilation) and O a multiple of a vector's lanes (8 floats, 4 doubles) and at most
  `DIRECT_MAX_OUT_CHANNELS` (32) at run time, the *direct loops* (`_Windowed._direct_rows`);
- anything else is *im2col*: the windows of a block of output rows are copied into a
  scratch matrix, one row per output position (kh*kw*C elements: the filter taps in HWI
  order, padding as zeros), and one gemm per block multiplies it by the filters as a
  (kh*kw*C, O) matrix straight into those rows of the output. Blocks hold at least
  `MIN_BLOCK_ROWS` output positions (fewer rows made the gemm slower and repack the
  filters more often) and otherwise about `SCRATCH_BYTES`. Where that many rows of
  kh*kw*C elements exceed `SCRATCH_BYTES` (large filters of many channels), the filter
  rows are split into chunks, each a gemm accumulating (beta 1) onto the previous chunks'.
  128 KiB of scratch measured best: it stays in the L2 cache between the copy's writes and
  the gemm's reads, and below glibc's mmap threshold, so it is not page-faulted in again
  at every call (512 KiB made the 32x32x3 stem conv of a CIFAR ResNet 3-4x slower).

The gradients walk the same blocks and chunks of windows (`_Windowed`), but for the
input gradient at stride 1 under the direct loops' rule (C for O), a direct conv of the
cotangent by the filters flipped and transposed, padded by the filter's span less the
conv's padding: (kh-1)*dh - top above, kw-1 - left to the left. It ran the small ResNet's
3x3 stride-1 input gradients of 16 and 32 channels at 102-187 GFLOP/s against col2im's
83-148 (32x32x16 <- 16: 90 -> 157 at batch 8, 112 -> 187 at batch 32; 8x8x64 <- 64: 138
-> 123, hence the same limit). The rest:

- the filter gradient copies the input's windows in as the forward conv does and
  multiplies the scratch, transposed, by the block's cotangent rows into the chunk's
  filter rows, accumulating over the blocks: dw = im2col(x)^T @ g. Its blocks hold at least
  `FILTER_GRADIENT_MIN_BLOCK_ROWS` (256) positions, not 1024: the scratch of 1024 rows of
  3x3x32 taps (1.2 MB) left the L2 cache before the gemm read it (one core, GFLOP/s: 3x3
  into 32 channels 68 -> 90 at stride 2, 74 -> 97 at stride 1; into 64 the same);
- the input gradient zeroes its result (each task its own images), multiplies the block's
  cotangent rows by the chunk's filters transposed into the scratch, and adds each row's
  taps back where the windows read the input (col2im): dx = col2im(g @ w^T).

Expressed as convolutions instead (of the transposed input by the cotangent; of the
cotangent dilated by the strides with the filters flipped), the gradients of the small
ResNet's convs ran at 5-57 GFLOP/s against 34-103 this way (`benchmarks/conv.py`, batch 32):
the stride-2 input gradient multiplied three zeros in four, and the transposes cost copies
(those convolutions were im2col's; the direct loops need neither, hence the exception above).

All three split their blocks over the cores (`parallel`): the image rows of the result or
the cotangent (whole images for col2im, whose neighbouring rows add into the same input
rows) into one task per core, each with its own scratch, the filter gradient's
tasks after the first summing into filters of their own, added at the end. The tasks'
gemms run with OpenBLAS single-threaded (`matmul.single_threaded_blas`), and so do a
single task's: the small ResNet's staged step ran at 1,180 examples/s at batch 8 this way,
at 550-980 with OpenBLAS threading one task's block gemms, and at 500 with both. The direct
loops' tasks (image rows of the result, each with C zeros of its own) call no gemm and
leave OpenBLAS's threads alone.

The direct loops are oneDNN's micro-kernel for NHWC: per output row, tiles of
`DIRECT_TILE` (6) consecutive output pixels by a block of 2 vectors of output channels, 12
sums held in registers (with 2 vectors of filters and a broadcast) over the filter rows
inside the image and their kw*C taps and channels (one contiguous run in the image and in
the filters): per step the filters' vectors loaded, each pixel's input broadcast, one
llvm.fma per pixel and vector. Blocks of 32 output channels (2 AVX-512 vectors), then for
the rest one of 16 (2 AVX2 vectors), then one of 8 (`DIRECT_BLOCKS`: O = 32 ran 101 -> 105
GFLOP/s on one core with zmm, its stride-2 input 96 -> 101, the 1x1 projection 70 -> 80;
O = 16 keeps 2 ymm vectors: 12 sums hide the FMA latency, one zmm vector's 6 would not);
the last tile of a row moves back to end at its end; a tile
whose windows leave the image goes tap by tap, reading C zeros (calloc'd per task) for a
pixel's taps outside. No scratch and no copy: the gemm for O = 16 is (rows x 144) @ (144 x
16), too narrow for OpenBLAS's kernels. Measured against im2col in one process, round by
round, on 2 threads (GFLOP/s, the small ResNet's layers, batch 8 and 32): the 32x32x3 stem
into 16 34 -> 58 and 59 -> 99, 32x32x16 -> 16 75 -> 87 and 145 -> 183, its stride-2 conv
into 32 108 -> 134 and 129 -> 171, 16x16x32 -> 32 125 -> 127 and 153 -> 184, the 1x1
stride-2 projection into 32 43 -> 58 and 60 -> 80 (float64: 20-37 -> 31-46 at batch 8). Into
64 channels (four blocks, each reading the inputs again; the gemm's N as wide as its
kernels) im2col won: 16x16x32 stride 2 113 -> 81, 8x8x64 137 -> 104, the 1x1 projection
53 -> 46 at batch 8; hence at most 32. The small ResNet's staged step at batch 32 ran at
1,475-1,696 examples/s against 1,279-1,422 (torch.compile's 1,534-1,720 and 1,509-1,690 in
the same runs).

A module holds one copy of the code: an op's entry copies its operands' dims and its
geometry (strides, padding, dilations; the gradients' input or filter size) into one array
and calls its family's function (`_Windowed._shared`, one per family and dtype in an LLVM
module, internal), which reads them at run time; the direct loops are one function more
(`_Windowed._direct_function`), which conv2d's and the input gradient's tasks call. With a
copy of everything per op, the geometry constants, the small ResNet step's 13 distinct
convolutions at batch 32 made an op module of 970 kB of IR (78 functions; the input
gradients' entries alone 168 kB: one or two task splits each, every one with its own CPU
count, task records and thread code) taking 0.82-1.08 s of LLVM and 0.26-0.31 s of
building; shared, 273 kB (34 functions), 0.22-0.30 s and 0.06-0.10 s, measured on a loaded
machine, where the step's first call took 2.3-2.9 s against 2.9-3.8 s in alternating runs.
The constants bought little if any speed: the direct loops' inner loop compiles to the same
26 instructions (2 loads of filters, 6 broadcasts, 12 fmas) with the strides read at run
time, and the layers of `benchmarks/conv.py`, op by op against the per-op code in one
process, ran 1.5-2.5% slower in all (within this machine's noise between rounds; the filter
gradients, whose filter size was a constant too, leaning 2-5% slower).

Why im2col and a BLAS call elsewhere: the gemm runs at the BLAS's matmul speed for wide
enough O (110-180 GFLOP/s on one core for the CIFAR ResNet's shapes), and the copy, a
contiguous run of kw*C elements per filter row, costs a fraction of it.
The scratch is allocated by the lowered function (malloc and free around the blocks), so
a program's buffer plan does not see it.

reduce_window walks the output in NHWC order and, for each window tap inside the input,
combines an input pixel's channels into the output pixel's: the channel loop is innermost
and contiguous, so LLVM vectorises it. Taps in the padding are skipped, which is what
reading the pad value (the reduction's identity) would give.

Both check the input channels and window fit before they touch memory, and fail (an error
code, so the NumPy kernel runs and raises its error) where the window is larger than the
padded input, a cotangent is not of the conv's result's dims, or an operand is not
C-contiguous (programs pass only contiguous arrays; a strided view given to the op alone
runs NumPy's kernel); the convs return 1 + their argument count where malloc fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.dims import LLVMDims
from stageflow.codegen.llvm.emitter import F32, F64, I1, I32, I64, Emitter, storage_type
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_add,
    fold_loop,
    fold_mul,
    i64,
    return_unless,
)
from stageflow.codegen.llvm.reduce import combine, identity_of
from stageflow.codegen.lowered.matmul import (
    GEMM_SYMBOLS,
    NO_TRANS,
    ROW_MAJOR,
    TRANS,
    blas_available,
    gemm_function,
    single_threaded_blas,
)
from stageflow.codegen.lowered.parallel import Guard, TaskBody, cpu_count, run_tasks
from stageflow.codegen.lowered.rule import (
    OpBuilder,
    Operand,
    OpSpec,
    contiguous_strides,
    is_row_major,
    load_operands,
    lowering,
    nest,
    smaller,
)
from stageflow.core.op_facts import ReductionKind
from stageflow.core.primitive import ShapedType
from stageflow.primitives.conv import Padding, Pair
from stageflow.primitives.reduction import MAX, SUM

SCRATCH_BYTES = 128 * 1024
MIN_BLOCK_ROWS = 1024
# The filter gradient's blocks: its gemm (kh*kw*C x rows) @ (rows x O) ran 25-30% faster on
# 256 rows than on 1024 for O = 32 (the scratch, 144-295 KiB, stays in the L2 cache), the
# same for O = 64; the forward conv's and col2im's gemms were slower on fewer rows.
FILTER_GRADIENT_MIN_BLOCK_ROWS = 256
VECTOR_BYTES = 64  # one AVX-512 register: col2im's adds, written as vectors
# The direct loops (`_Windowed._direct_rows`): a tile of 6 output pixels by a block of
# output channels, (vectors, bytes per vector) widest first, each block half the previous
# one's channels: 2 AVX-512 vectors (32 floats), then 2 AVX2 vectors (16), then 1 (8).
# The 12 sums stay in registers, with the block's filter vectors and a broadcast input. O is
# walked in blocks of the widest, the rest (less than it) by the narrower ones in turn.
# Per core, 2 zmm vectors ran O = 32 at 105 GFLOP/s against 101 for 2 blocks of 2 ymm
# (zmm blocks of 16 with 6 sums, for O = 16, would leave the FMA latency unhidden); 4 zmm
# vectors (24 sums) for O = 64 ran 80 against im2col's 90.
DIRECT_BLOCKS = ((2, 64), (2, 32), (1, 32))
DIRECT_VECTOR_BYTES = DIRECT_BLOCKS[-1][1]  # the narrowest: O must be a multiple of it
DIRECT_TILE = 6
DIRECT_MAX_OUT_CHANNELS = 32
# A task gets at least this many multiply-adds (~5 us at 100 GFLOP/s): handing it to a
# watching worker of the pool costs a microsecond or two. (At 2^21, the threshold while
# waking a sleeping worker cost tens of microseconds, the small ResNet's staged step at
# batch 1 ran at 975 examples/s; at 2^18, 1,290; at 2^16, 1,320.)
MIN_TASK_MACS = 1 << 18
_NO_MEMORY = 4  # a conv's code where malloc or calloc fails: 1 + its argument count
_PTR = ir.PointerType()


def _row_major(ob: OpBuilder, index: int) -> Operand:
    """Input `index`, failing unless it is C-contiguous (any stride on a dim of 1), with
    the strides its dims imply: constants where the dims are static, so that the copy and
    reduction loops have constant steps (and trip counts) for LLVM to vectorise."""
    x = ob.inputs[index]
    ob.fail_unless(is_row_major(ob, x), index)
    return Operand(x.pointer, x.dims, contiguous_strides(ob.b, x.dims), x.dtype)


def _window_fits(ob: OpBuilder, size: ir.Value, window: ir.Value,
                 padding: tuple[ir.Value, ir.Value], dilation: ir.Value) -> ir.Value:
    """``size + lo + hi >= (window - 1) * dilation + 1`` and at least one tap (folded where
    the dims and params are constants)."""
    d = LLVMDims(ob.b)
    span = d.add(d.mul(d.sub(window, d.const(1)), dilation), d.const(1))
    too_small = [d.lt(d.add(size, d.add(*padding)), span), d.lt(window, d.const(1))]
    return ob.all_of([ob.b.not_(c) if isinstance(c, ir.Value) else ir.Constant(I1, not c)
                      for c in too_small])


def _positions(b: ir.IRBuilder, size: ir.Value, window: ir.Value, stride: ir.Value,
               padding: tuple[ir.Value, ir.Value], dilation: ir.Value) -> ir.Value:
    """`window_positions` with the stride, padding and dilation run-time values."""
    span = b.add(b.mul(b.sub(window, i64(1)), dilation), i64(1))
    free = b.sub(b.add(size, b.add(*padding)), span)
    return b.select(b.icmp_signed("<", free, i64(0)), i64(0),
                    b.add(b.sdiv(free, stride), i64(1)))


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _loop(b: ir.IRBuilder, stop: ir.Value, body: Callable[[ir.Value], None],
          name: str, start: ir.Value | None = None) -> None:
    counted_loop(b, i64(0) if start is None else start, stop, i64(1), body, name)


# The dims array a conv family's shared code reads (`_Windowed.emit`): the three operands'
# dims, then the op's geometry (`_Geometry`).
_OPERAND_DIMS = 12
_GEOMETRY = ("sh", "sw", "top", "bottom", "left", "right", "dh", "dw", "size0", "size1")


@dataclass(frozen=True)
class _Geometry:
    """One op's strides, padding ((top, bottom), (left, right)), dilations and `size` (the
    input gradient's input height and width, the filter gradient's filter height and
    width; zeros for conv2d) as the family's shared code reads them at run time, from its
    dims array after the operands' dims."""

    strides: tuple[ir.Value, ir.Value]
    padding: tuple[tuple[ir.Value, ir.Value], tuple[ir.Value, ir.Value]]
    dilations: tuple[ir.Value, ir.Value]
    size: tuple[ir.Value, ir.Value]

    @classmethod
    def read(cls, ob: OpBuilder) -> _Geometry:
        """The geometry loaded at `ob`'s position (once per function: the loops reuse it)."""
        b, dims = ob.b, ob.arguments[1]
        v = []
        for k, label in enumerate(_GEOMETRY):
            value = b.load(b.gep(dims, [i64(_OPERAND_DIMS + k)], source_etype=I64), typ=I64)
            value.name = label
            v.append(value)
        return cls((v[0], v[1]), ((v[2], v[3]), (v[4], v[5])), (v[6], v[7]), (v[8], v[9]))


@dataclass(frozen=True)
class _Windowed:
    """One conv2d-family op: its geometry (`_GEOMETRY`'s values) and dtype; and the blocks
    of windows all three families share.

    An op's entry only passes its dims and geometry to its family's code (`_shared`): one
    function per family and dtype in an LLVM module, which every op of the family there
    calls, with strides, padding and dilations read at run time (a copy per op made the
    small ResNet step's op module 3.5 times larger and its LLVM time 3.5-4 times longer,
    for little if any speed: see the module's docstring).

    The *image* is the NHWC array the windows lie in (the conv's input; the input gradient's
    result), the *positions* the (N, Ho, Wo) grid of windows (the conv's result; the
    cotangent), and the filters are kh x kw taps of C channels."""

    geometry: tuple[int, ...]
    dtype: np.dtype
    # Compiled at the cleanup level, shape-generic: the copies are written as vectors, the
    # work is in the gemms. A CIFAR ResNet step's convolutions compiled in 0.45 s instead
    # of 2.4 s (specialised to their shapes at O2), and ran 5% slower (80.5 against 85.8
    # GFLOP/s over its layers, within this machine's noise between runs).
    optimize_loops = False

    @property
    def _real(self) -> ir.Type:
        return F32 if self.dtype == np.float32 else F64

    def emit(self, ob: OpBuilder) -> None:
        """The op's entry: its operands' dims (copied as given: one memcpy, where a store
        per dim made each of the step's 13 entries cost ~1 ms more of LLVM) and its
        geometry in one array, passed with its data and strides to the family's code,
        whose status it returns."""
        b = ob.b
        data, given, strides = ob.arguments
        dims = entry_alloca(b, I64, _OPERAND_DIMS + len(self.geometry), "geometry")
        _memcpy(b, dims, given, _OPERAND_DIMS * 8)
        for k, value in enumerate(self.geometry):
            b.store(i64(value), b.gep(dims, [i64(_OPERAND_DIMS + k)], source_etype=I64))
        code = b.call(self._shared(ob), [data, dims, strides])
        return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)

    def _shared(self, ob: OpBuilder) -> ir.Function:
        """``i32 sf.NAME.DTYPE(ptr data, ptr dims, ptr strides)``: the family's code, every
        dim and the geometry read at run time (dims as `emit` stores them), built with the
        module's first op of the family and dtype. Internal, so that modules linked into
        one engine never clash."""
        module = ob.b.module
        symbol = f"sf.{ob.spec.name}.{self.dtype.name}"
        existing = module.globals.get(symbol)
        if isinstance(existing, ir.Function):
            return existing
        function = ir.Function(module, ir.FunctionType(I32, [_PTR] * 3), symbol)
        function.linkage = "internal"
        for argument, label in zip(function.args, ("data", "dims", "strides"), strict=True):
            argument.name = label
        unknown = ShapedType((None,) * 4, self.dtype)
        spec = OpSpec(ob.spec.name, (unknown, unknown), (unknown,), {})
        b = ir.IRBuilder(function.append_basic_block("entry"))
        operands, _ = load_operands(b, spec, *function.args)  # the entry checked the dims
        shared = OpBuilder(b, spec, operands[:2], operands[2:], tuple(function.args))
        self._body(shared, _Geometry.read(shared))
        shared.b.ret(ir.Constant(I32, 0))
        return function

    def _body(self, ob: OpBuilder, geo: _Geometry) -> None:
        """The family's code in its shared function."""
        raise NotImplementedError

    def _result_dims(self, ob: OpBuilder, geo: _Geometry) -> list[ir.Value]:
        """The dims of the op's result its operands and geometry imply."""
        raise NotImplementedError

    def _check(self, ob: OpBuilder, geo: _Geometry, image: Operand, kh: ir.Value,
               kw: ir.Value, positions: Operand | None, argument: int) -> None:
        """Fail (naming `argument`) unless the windows fit the image and, given the
        positions (a cotangent), their height and width are the windows' count; then
        unless the output has the dims the primitive computes."""
        b, window = ob.b, (kh, kw)
        ob.fail_unless(ob.all_of([
            _window_fits(ob, image.dims[1 + axis], window[axis], geo.padding[axis],
                         geo.dilations[axis]) for axis in (0, 1)]), argument)
        if positions is not None:
            ob.fail_unless(ob.all_of([
                ob.eq(positions.dims[1 + axis], _positions(
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

    def _blocks(self, ob: OpBuilder, image: Operand, kh: ir.Value, kw: ir.Value,
                positions: Operand, rows: tuple[ir.Value, ir.Value],
                chunk: Callable[[_Chunk], None], min_rows: int = MIN_BLOCK_ROWS) -> None:
        """Blocks of whole image rows [first, last) of the positions, split into chunks of
        filter rows where a block would exceed `SCRATCH_BYTES`: `chunk` runs per block and
        chunk with scratch for its windows (one row per position, the chunk's taps in HWI
        order)."""
        b = ob.b
        start, stop = rows
        run = fold_mul(b, kw, image.dims[3])
        depth = fold_mul(b, kh, run)
        width = positions.dims[2]
        elements = i64(SCRATCH_BYTES // self.dtype.itemsize)
        by_bytes = b.sdiv(elements, _max(b, i64(1), fold_mul(b, width, depth)))
        by_rows = b.sdiv(b.add(i64(min_rows - 1), width), _max(b, i64(1), width))
        block = _max(b, i64(1), smaller(b, b.sub(stop, start), _max(b, by_bytes, by_rows)))
        per_tap_row = b.mul(b.mul(block, width), run)
        tap_rows = _max(b, i64(1), smaller(b, kh, b.sdiv(elements, per_tap_row)))
        malloc = declare(b.module, "malloc", _PTR, [I64])
        free = declare(b.module, "free", ir.VoidType(), [_PTR])
        scratch = b.call(malloc, [_max(b, i64(1), b.mul(b.mul(per_tap_row, tap_rows),
                                                          i64(self.dtype.itemsize)))])
        return_unless(b, b.icmp_unsigned("!=", scratch, ir.Constant(_PTR, None)),
                      ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))

        def one_block(first: ir.Value) -> None:
            last = smaller(b, b.add(first, block), stop)

            def one_chunk(a0: ir.Value) -> None:
                a1 = smaller(b, b.add(a0, tap_rows), kh)
                chunk(_Chunk(first, last, b.mul(b.sub(last, first), width), a0, a1,
                             b.mul(b.sub(a1, a0), run), b.mul(b.mul(a0, run),
                                                              positions.dims[3]), scratch))

            counted_loop(b, i64(0), kh, tap_rows, one_chunk, "tap_rows")

        counted_loop(b, start, stop, block, one_block, "block")
        b.call(free, [scratch])

    def _split(self, ob: OpBuilder, units: ir.Value, macs: ir.Value, body: TaskBody,
               private: Callable[[ir.IRBuilder, ir.Value], ir.Value] | None = None,
               merge: Callable[[ir.IRBuilder, ir.Value], None] | None = None,
               name: str = "rows", guard: Guard | None = single_threaded_blas) -> None:
        """Run `body` over `units` as one task per core, fewer where a task would get under
        `MIN_TASK_MACS` multiply-adds (`macs` in all) or there are fewer units; the BLAS
        single-threaded around them unless `guard` says otherwise (tasks with no gemm)."""
        b = ob.b
        tasks = smaller(b, smaller(b, cpu_count(b), units), b.sdiv(macs, i64(MIN_TASK_MACS)))
        run_tasks(ob, name, units, tasks, body, private, merge, guard)

    def _lanes(self) -> int:
        """Elements per vector of the direct loops' narrowest block (the channels O must
        be a multiple of): 8 floats, 4 doubles."""
        return DIRECT_VECTOR_BYTES // self.dtype.itemsize

    def _direct_fits(self, ob: OpBuilder, geo: _Geometry, o: ir.Value) -> ir.Value:
        """The selection rule of the direct loops (at run time): taps along a row one image
        column apart (their channels one run; any strides, padding and filter-row
        dilation), O a multiple of the vector's lanes and at most
        `DIRECT_MAX_OUT_CHANNELS`."""
        b = ob.b
        return ob.all_of([ob.eq(geo.dilations[1], i64(1)),
                          ob.eq(b.srem(o, i64(self._lanes())), i64(0)),
                          b.icmp_signed("<=", o, i64(DIRECT_MAX_OUT_CHANNELS))])

    def _direct_call(self, ob: OpBuilder, x: Operand, w: Operand, out: Operand,
                     steps: tuple[ir.Value, ir.Value, ir.Value],
                     pads: tuple[ir.Value, ir.Value], rows: tuple[ir.Value, ir.Value]) -> ir.Value:
        """Output image rows `rows` (first, last) of ``conv2d(x, w)`` at `steps` (strides,
        filter-row dilation), padded `pads` above and to the left, by the module's one copy
        of the direct loops (`_direct_function`); their status (code 4 without memory)."""
        return ob.b.call(self._direct_function(ob.b.module), [
            x.pointer, w.pointer, out.pointer, *x.dims, *w.dims, *out.dims, *steps, *pads,
            *rows])

    def _direct_function(self, module: ir.Module) -> ir.Function:
        """``i32 sf.conv2d.direct.DTYPE(ptr x, ptr w, ptr out, i64 dims..., i64 sh, sw, dh,
        top, left, first, last)``: the direct loops (`_direct_rows`), internal, one per
        dtype in a module, which conv2d's and its input gradient's tasks call: the largest
        code of both (65 kB of IR; ~70 ms of the step's ~250 ms of LLVM for its convs)."""
        symbol = f"sf.conv2d.direct.{self.dtype.name}"
        existing = module.globals.get(symbol)
        if isinstance(existing, ir.Function):
            return existing
        labels = [f"{name}.d{axis}" for name in ("x", "w", "out") for axis in range(4)]
        labels += ["sh", "sw", "dh", "top", "left", "first", "last"]
        function = ir.Function(module, ir.FunctionType(I32, [_PTR] * 3 + [I64] * len(labels)),
                               symbol)
        function.linkage = "internal"
        for argument, label in zip(function.args, ["x", "w", "out", *labels], strict=True):
            argument.name = label
        b = ir.IRBuilder(function.append_basic_block("entry"))
        operands = []
        for k in range(3):
            dims = list(function.args[3 + 4 * k: 7 + 4 * k])
            operands.append(Operand(function.args[k], dims, contiguous_strides(b, dims),
                                    self.dtype))
        sh, sw, dh, top, left, first, last = function.args[15:]
        self._direct_rows(b, *operands, (sh, sw), dh, (top, left), (first, last))
        b.ret(ir.Constant(I32, 0))
        return function

    def _direct_rows(self, b: ir.IRBuilder, x: Operand, w: Operand, out: Operand,
                     strides: tuple[ir.Value, ir.Value], dh: ir.Value,
                     pads: tuple[ir.Value, ir.Value], rows: tuple[ir.Value, ir.Value]) -> None:
        """Output image rows `rows` (first, last) of ``conv2d(x, w)`` (padded `pads` above and to
        the left, the rest implied by the dims) by the direct loops: per row, per block of
        output channels (`DIRECT_BLOCKS`: the widest, then narrower for the rest), tiles of
        `DIRECT_TILE` output pixels (`_direct_tile`), the last one moved back to end at
        the row's end (recomputing a few pixels rather than clipping it), clipped where
        its windows leave the image (reading C zeros, calloc'd per task, there)."""
        height, width, channels = x.dims[1:]
        kh, kw, o = w.dims[0], w.dims[1], w.dims[3]
        ho, wo = out.dims[1:3]
        sh, sw = strides
        top, left = pads
        first, last = rows
        blocks = [(vectors, size // self.dtype.itemsize) for vectors, size in DIRECT_BLOCKS]
        calloc = declare(b.module, "calloc", _PTR, [I64, I64])
        zeros = b.call(calloc, [_max(b, i64(1), channels), i64(self.dtype.itemsize)])
        return_unless(b, b.icmp_unsigned("!=", zeros, ir.Constant(_PTR, None)),
                      ir.Constant(I32, _NO_MEMORY))
        # The tiles whose every window lies inside the image, and inside the row where the
        # padding is negative (the input gradient's): columns [inner_lo, inner_hi).
        inner_lo = b.select(b.icmp_signed(">", left, i64(0)),
                            b.sdiv(b.add(left, b.sub(sw, i64(1))), sw), i64(0))
        reach = b.sub(b.add(width, b.sub(left, i64(1))), b.sub(kw, i64(1)))
        inner_hi = smaller(b, wo, b.select(b.icmp_signed("<", reach, i64(0)), i64(0),
                                        b.add(b.sdiv(reach, sw), i64(1))))
        last_tile = _max(b, i64(0), b.sub(wo, i64(DIRECT_TILE)))
        widest = blocks[0][0] * blocks[0][1]
        whole = b.mul(b.sdiv(o, i64(widest)), i64(widest))
        rest = b.sub(o, whole)
        # Computed once here, not per tile: with the stride a constant, LLVM folded them
        # into each tile's addresses; at run time per tile they took 12 multiplies (7 so).
        shifts = [fold_mul(b, i64(p), sw) for p in range(DIRECT_TILE)]
        steps = _DirectSteps(sw, dh, shifts, [fold_mul(b, s, x.strides[2]) for s in shifts])

        def row(t: ir.Value) -> None:
            image = b.sdiv(t, ho)
            i = b.sub(t, b.mul(image, ho))
            h0 = b.sub(b.mul(i, sh), top)
            taps = _tap_range(b, h0, height, kh, dh)

            def tiles(vectors: int, lanes: int, c0: ir.Value) -> None:
                def tile(j: ir.Value) -> None:
                    j0 = smaller(b, j, last_tile)
                    inside = b.and_(b.icmp_signed(">=", j0, inner_lo),
                                    b.icmp_signed("<=", b.add(j0, i64(DIRECT_TILE)), inner_hi))
                    w0 = b.sub(b.mul(j0, sw), left)
                    at = _DirectTile(image, i, h0, j0, w0, c0, taps, vectors, lanes, zeros)
                    with b.if_else(inside) as (fast, clipped):
                        with fast:
                            self._direct_tile(b, x, w, out, steps, at, clipped=False)
                        with clipped:
                            self._direct_tile(b, x, w, out, steps, at, clipped=True)

                counted_loop(b, i64(0), wo, i64(DIRECT_TILE), tile, "tile")

            counted_loop(b, i64(0), whole, i64(widest), lambda c0: tiles(*blocks[0], c0),
                         "out_block")
            for vectors, lanes in blocks[1:]:
                width = vectors * lanes
                with b.if_then(b.icmp_signed("==", b.and_(rest, i64(width)), i64(width))):
                    tiles(vectors, lanes, b.add(whole, b.and_(rest, i64(-2 * width))))

        _loop(b, last, row, "direct_row", start=first)
        b.call(declare(b.module, "free", ir.VoidType(), [_PTR]), [zeros])

    def _direct_tile(self, b: ir.IRBuilder, x: Operand, w: Operand, out: Operand,
                     steps: _DirectSteps, at: _DirectTile, clipped: bool) -> None:
        """`DIRECT_TILE` output pixels times `at.vectors` vectors of output channels, summed
        in registers over the filter rows inside the image and, per filter row, its taps
        and input channels: per step a vector of filters per output vector, each pixel's
        input broadcast, one fma per pixel and vector. Unclipped, a filter row's taps and
        channels are one run of kw*C elements (for the image and the filters alike).
        Clipped, tap by tap over those inside for some pixel, a pixel reading the zeros
        where its tap is outside the image or it is past the row's end (an image row
        narrower than a tile; its sums are not stored)."""
        width, channels = x.dims[2:]
        kw, o = w.dims[1], w.dims[3]
        wo = out.dims[2]
        sw, dh = steps.sw, steps.dh
        lanes = at.lanes
        vector = ir.VectorType(x.element, lanes)
        fma = declare(b.module, f"llvm.fma.v{lanes}{'f32' if x.element == F32 else 'f64'}",
                      vector, [vector] * 3)
        pixels = range(DIRECT_TILE)
        w0 = at.w0
        undefined = ir.Constant(vector, None)
        splat = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
        exists = [b.icmp_signed("<", b.add(at.j0, i64(p)), wo) for p in pixels]

        def step(sources: list[ir.Value], k: ir.Value, filters: ir.Value,
                 sums: list[ir.Value]) -> list[ir.Value]:
            """One input channel of one tap: sources[p] + k is pixel p's."""
            weights = [b.load(w.address(b, fold_add(b, filters, i64(v * lanes))),
                              typ=vector, align=x.dtype.itemsize) for v in range(at.vectors)]
            updated = list(sums)
            for p in pixels:
                value = b.load(b.gep(sources[p], [k], source_etype=x.element), typ=x.element)
                broadcast = b.shuffle_vector(b.insert_element(undefined, value, i64(0)),
                                             undefined, splat)
                for v in range(at.vectors):
                    n = p * at.vectors + v
                    updated[n] = b.call(fma, [broadcast, weights[v], sums[n]])
            return updated

        def taps(sources: list[ir.Value], count: ir.Value, filters: ir.Value,
                 sums: list[ir.Value]) -> list[ir.Value]:
            return fold_loop(b, i64(0), count, i64(1), sums, lambda k, s: step(
                sources, k, b.add(filters, b.mul(k, o)), s), "k")

        def filter_row(a: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            h = b.add(at.h0, b.mul(a, dh))
            filters = w.offset(b, [a, i64(0), i64(0), at.c0])
            if not clipped:
                first = x.offset(b, [at.image, h, w0, i64(0)])
                return taps([x.address(b, fold_add(b, first, offset))
                             for offset in steps.offsets], fold_mul(b, kw, channels), filters,
                            sums)
            last = b.sub(smaller(b, b.add(at.j0, i64(DIRECT_TILE)), wo), i64(1))
            lo, _ = _tap_range(b, b.add(w0, b.mul(b.sub(last, at.j0), sw)), width, kw, i64(1))
            _, hi = _tap_range(b, w0, width, kw, i64(1))

            def tap(c: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                columns = [fold_add(b, b.add(w0, c), shift) for shift in steps.shifts]
                sources = [b.select(b.and_(exists[p], b.icmp_unsigned("<", columns[p], width)),
                                    x.address(b, x.offset(b, [at.image, h, columns[p],
                                                              i64(0)])), at.zeros)
                           for p in pixels]
                return taps(sources, channels, b.add(filters, b.mul(b.mul(c, channels), o)),
                            sums)

            return fold_loop(b, lo, hi, i64(1), sums, tap, "tap")

        zero = ir.Constant(vector, [0.0] * lanes)
        sums = fold_loop(b, at.rows[0], at.rows[1], i64(1),
                         [zero] * (DIRECT_TILE * at.vectors), filter_row, "filter_row")
        for p in pixels:
            def store(p: int = p) -> None:
                target = out.offset(b, [at.image, at.i, b.add(at.j0, i64(p)), at.c0])
                for v in range(at.vectors):
                    b.store(sums[p * at.vectors + v],
                            out.address(b, fold_add(b, target, i64(v * lanes))),
                            align=x.dtype.itemsize)

            if clipped:
                with b.if_then(exists[p]):
                    store()
            else:
                store()

    def _windows(self, ob: OpBuilder, geo: _Geometry, image: Operand, kw: ir.Value,
                 positions: Operand, c: _Chunk, accumulate: bool) -> None:
        """Between the chunk's scratch and the image: copy the windows in (im2col), or add
        the scratch's rows into the image where the windows read it (col2im)."""
        columns = Operand(c.scratch, [], [], self.dtype)
        _loop(ob.b, c.last, lambda t: self._image_row(ob, geo, image, kw, positions, columns,
                                                      t, c, accumulate), "t", start=c.first)

    def _image_row(self, ob: OpBuilder, geo: _Geometry, x: Operand, kw: ir.Value,
                   positions: Operand, columns: Operand, t: ir.Value, c: _Chunk,
                   accumulate: bool) -> None:
        """The windows of positions row `t` (image t // Ho, row t % Ho) over filter rows
        [a0, a1), one filter row (kw taps of C channels) at a time: outside the image, zeros
        (or nothing to add); inside with every tap inside and no dilation, one contiguous
        run of kw*C elements; else tap by tap."""
        b = ob.b
        height, width, channels = x.dims[1:]
        (sh, sw), (dh, dw) = geo.strides, geo.dilations
        top, left = geo.padding[0][0], geo.padding[1][0]
        ho, wo = positions.dims[1:3]
        image = b.sdiv(t, ho)
        row = b.sub(t, b.mul(image, ho))
        first_row = b.sub(b.mul(row, sh), top)
        base = b.mul(b.sub(t, c.first), wo)
        run = fold_mul(b, kw, channels)
        last_tap = b.mul(fold_add(b, kw, i64(-1)), dw)
        undilated = b.icmp_signed("==", dw, i64(1))

        def position(j: ir.Value) -> None:
            start = b.sub(b.mul(j, sw), left)
            contiguous = ob.all_of([undilated, b.icmp_signed(">=", start, i64(0)),
                                    b.icmp_signed("<", b.add(start, last_tap), width)])
            row_start = b.mul(b.add(base, j), c.depth)

            def filter_row(a: ir.Value) -> None:
                h = b.add(first_row, b.mul(a, dh))
                target = b.add(row_start, fold_mul(b, b.sub(a, c.a0), run))
                source = x.offset(b, [image, h, start, i64(0)])
                with b.if_else(b.icmp_unsigned("<", h, height)) as (inside, outside):
                    with inside, b.if_else(contiguous) as (run_, edge):
                        with run_:
                            _move(b, x, source, columns, target, run, accumulate)
                        with edge:
                            self._taps(b, x, kw, dw, columns, source, start, target,
                                       accumulate)
                    with outside:
                        if not accumulate:
                            _zero(b, columns, target, run)

            _loop(b, c.a1, filter_row, "filter_row", start=c.a0)

        _loop(b, wo, position, "j")

    def _taps(self, b: ir.IRBuilder, x: Operand, kw: ir.Value, dw: ir.Value, columns: Operand,
              source: ir.Value, start: ir.Value, target: ir.Value, accumulate: bool) -> None:
        """One filter row tap by tap (`dw` image columns apart): C channels moved, or zeros
        where the tap is outside."""
        width, channels = x.dims[2], x.dims[3]

        def tap(c: ir.Value) -> None:
            step = b.mul(c, dw)
            at = fold_add(b, target, fold_mul(b, c, channels))
            with b.if_else(b.icmp_unsigned("<", b.add(start, step), width)) as (inside, outside):
                with inside:
                    _move(b, x, fold_add(b, source, fold_mul(b, step, x.strides[2])), columns,
                          at, channels, accumulate)
                with outside:
                    if not accumulate:
                        _zero(b, columns, at, channels)

        _loop(b, kw, tap, "tap")


@dataclass(frozen=True)
class _Chunk:
    """One block of positions (image rows [first, last): `rows` positions) and one chunk of
    filter rows [a0, a1) (`depth` elements per window; the chunk's filters start at element
    `filters` of an HWIO array), with the scratch holding its windows."""

    first: ir.Value
    last: ir.Value
    rows: ir.Value
    a0: ir.Value
    a1: ir.Value
    depth: ir.Value
    filters: ir.Value
    scratch: ir.Value


@dataclass(frozen=True)
class _DirectTile:
    """One tile of the direct loops: output pixels [j0, j0 + `DIRECT_TILE`) of row `i` of
    `image` (input row `h0` under the first filter row, column `w0` under the first
    tap), output channels from `c0` in `vectors` vectors of `lanes` elements; `rows` the
    filter rows [lo, hi) inside the image; `zeros` C zeros, read for the taps outside it."""

    image: ir.Value
    i: ir.Value
    h0: ir.Value
    j0: ir.Value
    w0: ir.Value
    c0: ir.Value
    rows: tuple[ir.Value, ir.Value]
    vectors: int
    lanes: int
    zeros: ir.Value


@dataclass(frozen=True)
class _DirectSteps:
    """The direct loops' column stride `sw` and filter-row dilation `dh`; pixel p of a
    tile reads `shifts[p]` image columns (`offsets[p]` elements) right of its first one."""

    sw: ir.Value
    dh: ir.Value
    shifts: list[ir.Value]
    offsets: list[ir.Value]


def _tap_range(b: ir.IRBuilder, start: ir.Value, size: ir.Value, taps: ir.Value,
               dilation: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The taps [lo, hi) among `taps`, `dilation` apart from `start`, inside [0, size)."""
    lo = b.select(b.icmp_signed("<", start, i64(0)),
                  b.sdiv(b.sub(fold_add(b, dilation, i64(-1)), start), dilation), i64(0))
    room = b.sub(b.sub(size, i64(1)), start)
    hi = b.select(b.icmp_signed("<", room, i64(0)), i64(0),
                  smaller(b, taps, b.add(b.sdiv(room, dilation), i64(1))))
    return lo, hi


def _blas_unless(direct: ir.Value) -> Guard:
    """OpenBLAS single-threaded around the tasks unless they run the direct loops, which
    call no gemm and leave its threads alone."""

    def guard(b: ir.IRBuilder, region: Callable[[], None]) -> None:
        with b.if_else(direct) as (alone, gemms):
            with alone:
                region()
            with gemms:
                single_threaded_blas(b, region)

    return guard


def _contiguous(ob: OpBuilder) -> tuple[Operand, Operand, Operand]:
    """A task's two inputs and output, with the row-major strides their dims imply (the
    entry checked the inputs are so): constants where the dims are static."""
    b = ob.b
    x, w = (Operand(a.pointer, a.dims, contiguous_strides(b, a.dims), a.dtype)
            for a in ob.inputs)
    return x, w, ob.outputs[0]


class Conv2d(_Windowed):
    """``conv2d(x, w)``: per chunk, the windows copied in and one gemm by the chunk's filters
    into the block's output rows (accumulating after the first chunk); the output's image
    rows split over the cores."""

    def _result_dims(self, ob: OpBuilder, geo: _Geometry) -> list[ir.Value]:
        x, w = ob.inputs
        return [x.dims[0], *[_positions(ob.b, x.dims[1 + axis], w.dims[axis],
                                        geo.strides[axis], geo.padding[axis],
                                        geo.dilations[axis]) for axis in (0, 1)], w.dims[3]]

    def _body(self, ob: OpBuilder, geo: _Geometry) -> None:
        b = ob.b
        x, w, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        kh, kw, channels, _ = w.dims
        ob.fail_unless(ob.eq(x.dims[3], channels), 1)
        self._check(ob, geo, x, kh, kw, None, 0)
        x, w = _row_major(ob, 0), _row_major(ob, 1)
        image_rows = fold_mul(b, out.dims[0], out.dims[1])
        rows = fold_mul(b, image_rows, out.dims[2])
        depth = fold_mul(b, fold_mul(b, kh, kw), channels)
        o = w.dims[3]
        empty = b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0)))
        # A 1x1 filter at stride 1 with no padding reads the input as an (N*H*W, C) matrix.
        pointwise = ob.all_of([ob.eq(v, i64(1)) for v in (kh, kw, *geo.strides)]
                              + [ob.eq(v, i64(0)) for pair in geo.padding for v in pair])
        with b.if_then(b.not_(empty)):
            with b.if_else(ob.eq(depth, i64(0))) as (no_terms, terms):
                with no_terms:
                    _fill(b, out, rows)
                with terms, b.if_else(pointwise) as (one_gemm, windows):
                    with one_gemm:
                        self._gemm(ob, (False, False), rows, o, depth, (x.pointer, depth),
                                   (w.pointer, o), ir.Constant(self._real, 0.0),
                                   (out.pointer, o))
                    with windows:
                        self._split(ob, image_rows, b.mul(b.mul(rows, depth), o), self._task,
                                    guard=_blas_unless(self._direct_fits(ob, geo, o)))

    def _task(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Output image rows [first, last) by the direct loops where `_direct_fits`, else by
        im2col and the gemm."""
        b = ob.b
        geo = _Geometry.read(ob)
        x, w, out = _contiguous(ob)
        with b.if_else(self._direct_fits(ob, geo, w.dims[3])) as (direct, im2col):
            with direct:
                code = self._direct_call(ob, x, w, out, (*geo.strides, geo.dilations[0]),
                                         (geo.padding[0][0], geo.padding[1][0]), (first, last))
                return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)
            with im2col:
                self._blocks(ob, x, w.dims[0], w.dims[1], out, (first, last),
                             lambda c: self._chunk(ob, geo, x, w, c))

    def _chunk(self, ob: OpBuilder, geo: _Geometry, x: Operand, w: Operand, c: _Chunk) -> None:
        b, out = ob.b, ob.outputs[0]
        o = w.dims[3]
        self._windows(ob, geo, x, w.dims[1], out, c, accumulate=False)
        beta = b.select(ob.eq(c.a0, i64(0)), ir.Constant(self._real, 0.0),
                        ir.Constant(self._real, 1.0))
        target = out.address(b, b.mul(b.mul(c.first, out.dims[2]), o))
        self._gemm(ob, (False, False), c.rows, o, c.depth, (c.scratch, c.depth),
                   (w.address(b, c.filters), o), beta, (target, o))


class Conv2dFilterGradient(_Windowed):
    """``dw = im2col(x)^T @ g``: per chunk, the windows of the input copied in as the
    forward conv copies them and one gemm, the scratch transposed, by the block's cotangent
    rows into the chunk's filter rows (accumulating after a task's first block). The
    cotangent's image rows are split over the cores, each task after the first summing into
    filters of its own, added to the result at the end."""

    def _result_dims(self, ob: OpBuilder, geo: _Geometry) -> list[ir.Value]:
        x, g = ob.inputs
        return [*geo.size, x.dims[3], g.dims[3]]

    def _body(self, ob: OpBuilder, geo: _Geometry) -> None:
        b = ob.b
        x, g, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        kh, kw = geo.size
        ob.fail_unless(ob.eq(x.dims[0], g.dims[0]), 1)
        self._check(ob, geo, x, kh, kw, g, 1)
        x, g = _row_major(ob, 0), _row_major(ob, 1)
        image_rows = fold_mul(b, g.dims[0], g.dims[1])
        rows = fold_mul(b, image_rows, g.dims[2])
        size = out.size(b)
        bytes_ = b.mul(size, i64(self.dtype.itemsize))
        malloc = declare(b.module, "malloc", _PTR, [I64])

        def merge(b: ir.IRBuilder, partial: ir.Value) -> None:
            mine = Operand(partial, [], [], self.dtype)

            def add(i: ir.Value) -> None:
                target = out.address(b, i)
                b.store(b.fadd(b.load(target, typ=out.element),
                               b.load(mine.address(b, i), typ=out.element)), target)

            _loop(b, size, add, "merge")

        with b.if_then(b.not_(ob.eq(size, i64(0)))):
            with b.if_else(ob.eq(rows, i64(0))) as (no_terms, terms):
                with no_terms:
                    _fill(b, out, fold_mul(b, fold_mul(b, kh, kw), x.dims[3]))
                with terms:
                    self._split(ob, image_rows, b.mul(rows, size), self._task,
                                lambda b, t: b.call(malloc, [bytes_]), merge)

    def _task(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        b = ob.b
        geo = _Geometry.read(ob)
        x, g, out = _contiguous(ob)
        target = b.select(b.icmp_unsigned("==", memory, ir.Constant(_PTR, None)),
                          out.pointer, memory)
        kh, kw = geo.size
        self._blocks(ob, x, kh, kw, g, (first, last),
                     lambda c: self._chunk(ob, geo, x, g, Operand(target, [], [], self.dtype),
                                           first, c), FILTER_GRADIENT_MIN_BLOCK_ROWS)

    def _chunk(self, ob: OpBuilder, geo: _Geometry, x: Operand, g: Operand, out: Operand,
               start: ir.Value, c: _Chunk) -> None:
        b = ob.b
        o = g.dims[3]
        self._windows(ob, geo, x, geo.size[1], g, c, accumulate=False)
        beta = b.select(ob.eq(c.first, start), ir.Constant(self._real, 0.0),
                        ir.Constant(self._real, 1.0))
        rows = g.address(b, b.mul(b.mul(c.first, g.dims[2]), o))
        self._gemm(ob, (True, False), c.depth, o, c.rows, (c.scratch, c.depth), (rows, o),
                   beta, (out.address(b, c.filters), o))


class Conv2dInputGradient(_Windowed):
    """``dx = col2im(g @ w^T)``: per chunk one gemm of the block's cotangent rows by the
    chunk's filters transposed into scratch, whose rows are added into the result (zeroed
    first) where the windows read the input. Images are split over the cores (the windows
    of neighbouring rows of one image add into the same input rows); each task zeroes its
    own. At stride 1, where the direct loops' rule holds for C, the result's rows are
    split instead, each a direct conv of the cotangent (`_direct_rows_of`)."""

    def _result_dims(self, ob: OpBuilder, geo: _Geometry) -> list[ir.Value]:
        g, w = ob.inputs
        return [g.dims[0], *geo.size, w.dims[2]]

    def _body(self, ob: OpBuilder, geo: _Geometry) -> None:
        b = ob.b
        g, w, out = ob.inputs[0], ob.inputs[1], ob.outputs[0]
        kh, kw, _, o = w.dims
        ob.fail_unless(ob.eq(g.dims[3], o), 1)
        self._check(ob, geo, out, kh, kw, g, 0)
        g, w = _row_major(ob, 0), _row_major(ob, 1)
        size = out.size(b)
        rows = fold_mul(b, fold_mul(b, g.dims[0], g.dims[1]), g.dims[2])
        depth = fold_mul(b, fold_mul(b, kh, kw), w.dims[2])
        with b.if_then(b.not_(ob.eq(size, i64(0)))):
            with b.if_else(b.or_(ob.eq(rows, i64(0)), ob.eq(o, i64(0)))) as (no_terms, terms):
                with no_terms:
                    _fill(b, out, fold_mul(b, fold_mul(b, out.dims[0], out.dims[1]),
                                           out.dims[2]))
                with terms:
                    # The direct loops split the result's rows, col2im whole images.
                    direct = self._direct(ob, geo)
                    units = b.select(direct, fold_mul(b, out.dims[0], out.dims[1]), g.dims[0])
                    self._split(ob, units, b.mul(b.mul(rows, depth), o), self._task,
                                guard=_blas_unless(direct))

    def _direct(self, ob: OpBuilder, geo: _Geometry) -> ir.Value:
        """Whether the direct loops serve: at stride 1 where their rule holds for C."""
        return ob.all_of([*[ob.eq(s, i64(1)) for s in geo.strides],
                          self._direct_fits(ob, geo, ob.inputs[1].dims[2])])

    def _task(self, ob: OpBuilder, first: ir.Value, last: ir.Value, task: ir.Value,
              memory: ir.Value) -> None:
        """Result rows [first, last) by the direct loops (`_direct_rows_of`) where they
        serve, else images [first, last) zeroed (each task its own, in parallel) and
        their windows added in."""
        b = ob.b
        geo = _Geometry.read(ob)
        g, w, out = _contiguous(ob)
        with b.if_else(self._direct(ob, geo)) as (direct, windows):
            with direct:
                self._direct_rows_of(ob, geo, (first, last))
            with windows:
                image = fold_mul(b, fold_mul(b, out.dims[1], out.dims[2]), out.dims[3])
                _zero(b, out, b.mul(first, image), b.mul(b.sub(last, first), image))
                ho = g.dims[1]
                self._blocks(ob, out, w.dims[0], w.dims[1], g,
                             (b.mul(first, ho), b.mul(last, ho)),
                             lambda c: self._chunk(ob, geo, g, w, c))

    def _direct_rows_of(self, ob: OpBuilder, geo: _Geometry,
                        rows: tuple[ir.Value, ir.Value]) -> None:
        """Result rows `rows` as the stride-1 conv of the cotangent by the filters flipped
        in both taps and their channels transposed (copied per task, code 4 without
        memory), padded by the filter's span less the conv's padding: the direct loops."""
        b = ob.b
        g, w, out = _contiguous(ob)
        kh, kw, c, o = w.dims
        count = fold_mul(b, fold_mul(b, fold_mul(b, kh, kw), c), o)
        malloc = declare(b.module, "malloc", _PTR, [I64])
        memory = b.call(malloc, [_max(b, i64(1), b.mul(count, i64(self.dtype.itemsize)))])
        return_unless(b, b.icmp_unsigned("!=", memory, ir.Constant(_PTR, None)),
                      ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))
        flipped = Operand(memory, [kh, kw, o, c], contiguous_strides(b, [kh, kw, o, c]),
                          self.dtype)

        def element(index: list[ir.Value]) -> None:
            a, tap, k, channel = index
            source = w.offset(b, [b.sub(b.sub(kh, i64(1)), a), b.sub(b.sub(kw, i64(1)), tap),
                                  channel, k])
            b.store(b.load(w.address(b, source), typ=w.element),
                    flipped.address(b, flipped.offset(b, index)))

        nest(b, flipped.dims, element, "flip")
        (top, _), (left, _) = geo.padding
        pads = (b.sub(b.mul(b.sub(kh, i64(1)), geo.dilations[0]), top),
                b.sub(b.sub(kw, i64(1)), left))
        code = self._direct_call(ob, g, flipped, out, (*geo.strides, geo.dilations[0]), pads,
                                 rows)
        b.call(declare(b.module, "free", ir.VoidType(), [_PTR]), [memory])
        return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)

    def _chunk(self, ob: OpBuilder, geo: _Geometry, g: Operand, w: Operand, c: _Chunk) -> None:
        b, out = ob.b, ob.outputs[0]
        o = w.dims[3]
        rows = g.address(b, b.mul(b.mul(c.first, g.dims[2]), o))
        self._gemm(ob, (False, True), c.rows, c.depth, o, (rows, o), (w.address(b, c.filters), o),
                   ir.Constant(self._real, 0.0), (c.scratch, c.depth))
        self._windows(ob, geo, out, w.dims[1], g, c, accumulate=True)


def _move(b: ir.IRBuilder, image: Operand, at: ir.Value, columns: Operand, to: ir.Value,
          count: ir.Value, accumulate: bool) -> None:
    """``columns[to + k] = image[at + k]`` for k < count, or with `accumulate`
    ``image[at + k] += columns[to + k]``: whole vectors of `VECTOR_BYTES`, then one masked
    vector for the rest. Written as vectors because these ops compile without LLVM's loop
    vectoriser (shape-generic and at the cleanup level, so that a convnet's several dozen
    convolutions compile in a fraction of the time), and masked because the runs are
    short (kw * C: 9 elements for a 3x3 filter over RGB)."""
    lanes = VECTOR_BYTES // image.dtype.itemsize
    vector = ir.VectorType(image.element, lanes)
    align = image.dtype.itemsize
    whole = b.mul(b.sdiv(count, i64(lanes)), i64(lanes))

    def step(k: ir.Value, mask: ir.Value | None) -> None:
        pixel = image.address(b, b.add(at, k))
        column = columns.address(b, b.add(to, k))
        source, target = (column, pixel) if accumulate else (pixel, column)
        value = _load_vector(b, source, vector, align, mask)
        if accumulate:
            value = b.fadd(value, _load_vector(b, pixel, vector, align, mask))
        _store_vector(b, value, target, align, mask)

    counted_loop(b, i64(0), whole, i64(lanes), lambda k: step(k, None), "move")
    rest = b.sub(count, whole)
    with b.if_then(b.icmp_signed(">", rest, i64(0))):
        positions = ir.Constant(ir.VectorType(I64, lanes), list(range(lanes)))
        limit = b.insert_element(ir.Constant(ir.VectorType(I64, lanes), None), rest, i64(0))
        limit = b.shuffle_vector(limit, limit, ir.Constant(ir.VectorType(I32, lanes),
                                                           [0] * lanes))
        step(whole, b.icmp_signed("<", positions, limit))


def _masked(b: ir.IRBuilder, name: str, vector: ir.VectorType) -> ir.Function:
    """``llvm.masked.load`` or ``.store`` of `vector` (llvmlite does not mangle vectors)."""
    element = "f32" if vector.element == F32 else "f64"
    symbol = f"llvm.masked.{name}.v{vector.count}{element}.p0"
    mask = ir.VectorType(I1, vector.count)
    signature = (ir.FunctionType(vector, [_PTR, I32, mask, vector]) if name == "load" else
                 ir.FunctionType(ir.VoidType(), [vector, _PTR, I32, mask]))
    return declare(b.module, symbol, signature.return_type, list(signature.args))


def _load_vector(b: ir.IRBuilder, at: ir.Value, vector: ir.VectorType, align: int,
                 mask: ir.Value | None) -> ir.Value:
    if mask is None:
        return b.load(at, typ=vector, align=align)
    return b.call(_masked(b, "load", vector),
                  [at, ir.Constant(I32, align), mask, ir.Constant(vector, None)])


def _store_vector(b: ir.IRBuilder, value: ir.Value, at: ir.Value, align: int,
                  mask: ir.Value | None) -> None:
    if mask is None:
        b.store(value, at, align=align)
        return
    b.call(_masked(b, "store", value.type), [value, at, ir.Constant(I32, align), mask])


def _memcpy(b: ir.IRBuilder, target: ir.Value, source: ir.Value, size: int) -> None:
    copy = b.module.declare_intrinsic("llvm.memcpy", [_PTR, _PTR, I64])
    b.call(copy, [target, source, i64(size), ir.Constant(I1, 0)])


def _memset(b: ir.IRBuilder, target: ir.Value, size: ir.Value) -> None:
    zero = b.module.declare_intrinsic("llvm.memset", [_PTR, I64])
    b.call(zero, [target, ir.Constant(ir.IntType(8), 0), size, ir.Constant(I1, 0)])


def _zero(b: ir.IRBuilder, target: Operand, to: ir.Value, count: ir.Value) -> None:
    _memset(b, target.address(b, to), b.mul(count, i64(target.dtype.itemsize)))


def _fill(b: ir.IRBuilder, out: Operand, rows: ir.Value) -> None:
    """Zero every element of `out` (rows of its last dim)."""
    _zero(b, out, i64(0), fold_mul(b, rows, out.dims[-1]))


def _geometry(spec: OpSpec, size: Pair = (0, 0)) -> tuple[tuple[int, ...], np.dtype] | None:
    """The op's geometry as `_Geometry` reads it (`size` its input or filter size) and its
    dtype; None where the BLAS cannot serve."""
    dtype = spec.inputs[0].dtype
    if dtype not in GEMM_SYMBOLS or not blas_available():
        return None
    params = spec.params
    (top, bottom), (left, right) = params["padding"]
    return (*params["strides"], top, bottom, left, right, *params["dilations"], *size), dtype


@lowering("conv2d", generic=True)
def _conv2d(spec: OpSpec) -> Conv2d | None:
    geometry = _geometry(spec)
    return None if geometry is None else Conv2d(*geometry)


@lowering("conv2d_input_gradient", generic=True)
def _conv2d_input_gradient(spec: OpSpec) -> Conv2dInputGradient | None:
    geometry = _geometry(spec, tuple(spec.params["input_size"]))
    return None if geometry is None else Conv2dInputGradient(*geometry)


@lowering("conv2d_filter_gradient", generic=True)
def _conv2d_filter_gradient(spec: OpSpec) -> Conv2dFilterGradient | None:
    geometry = _geometry(spec, tuple(spec.params["filter_size"]))
    return None if geometry is None else Conv2dFilterGradient(*geometry)


@dataclass(frozen=True)
class ReduceWindow:
    kind: ReductionKind
    window: Pair
    strides: Pair
    padding: Padding
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        height, width, channels = x.dims[1:]
        ob.fail_unless(ob.all_of([
            _window_fits(ob, x.dims[1 + axis], i64(self.window[axis]),
                         (i64(self.padding[axis][0]), i64(self.padding[axis][1])), i64(1))
            for axis in (0, 1)]), 0)
        ob.expect_output(0, ob.spec.primitive.dims(
            LLVMDims(b), [x.dims], window=self.window, strides=self.strides,
            padding=self.padding))
        x = _row_major(ob, 0)
        e, ty = Emitter(b), storage_type(self.dtype)
        identity = identity_of(self.kind, self.dtype, ty)
        (sh, sw), (top, left) = self.strides, (self.padding[0][0], self.padding[1][0])

        def taps(start: ir.Value, size: ir.Value, window: int) -> tuple[ir.Value, ir.Value]:
            """The taps [lo, hi) of a window starting at `start` that fall inside [0, size)."""
            lo = _max(b, i64(0), b.sub(i64(0), start))
            hi = smaller(b, i64(window), b.sub(size, start))
            return lo, hi

        def pixel(n: ir.Value, i: ir.Value, j: ir.Value) -> None:
            target = out.offset(b, [n, i, j, i64(0)])
            _loop(b, channels, lambda k: b.store(identity, out.address(b, b.add(target, k))),
                  "init")
            h0 = b.sub(fold_mul(b, i, i64(sh)), i64(top))
            w0 = b.sub(fold_mul(b, j, i64(sw)), i64(left))
            a_lo, a_hi = taps(h0, height, self.window[0])
            c_lo, c_hi = taps(w0, width, self.window[1])

            def tap(a: ir.Value, c: ir.Value) -> None:
                source = x.offset(b, [n, b.add(h0, a), b.add(w0, c), i64(0)])

                def channel(k: ir.Value) -> None:
                    to = out.address(b, b.add(target, k))
                    value = b.load(x.address(b, fold_add(b, source, fold_mul(b, k, x.strides[3]))),
                                   typ=ty)
                    b.store(combine(e, self.kind, self.dtype, b.load(to, typ=ty), value), to)

                _loop(b, channels, channel, "c")

            _loop(b, a_hi, lambda a: _loop(b, c_hi, lambda c: tap(a, c), "tap", c_lo),
                  "tap_row", a_lo)

        _loop(b, out.dims[0], lambda n: _loop(
            b, out.dims[1], lambda i: _loop(b, out.dims[2], lambda j: pixel(n, i, j), "j"),
            "i"), "n")


@lowering("reduce_window")
def _reduce_window(spec: OpSpec) -> ReduceWindow | None:
    dtype, params = spec.inputs[0].dtype, spec.params
    kind = {"max": MAX, "sum": SUM}[params["kind"]]
    if dtype not in kind.native_dtypes:
        return None
    return ReduceWindow(kind, tuple(params["window"]), tuple(params["strides"]),
                        tuple(tuple(p) for p in params["padding"]), dtype)
