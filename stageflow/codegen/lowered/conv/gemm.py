"""The convolutions' own gemm: ``C = A @ B`` or ``C += A @ B`` (row-major, no transposes),
each element of C one chain of fmas over k in order, the same for every column.

Why not the BLAS's: a convolution's output channels are C's columns, and a channel's result
should not depend on where it sits among them. OpenBLAS's kernels sum the first and last
eight columns of a panel in two halves (even and odd k, added at the end) and the middle
ones in one chain, so channels with equal filters came out an ulp apart; a softmax over
logits near 1e9 (ONNX's light SqueezeNet) turns that ulp into a different answer, where
onnxruntime's kernels, whose sums are in one order, agree with the reference. Here a
column's sum is ``fma(a[k-1], b[k-1], ... fma(a[0], b[0], c))`` wherever it lies: in a
whole block of vectors, in a narrower one at the right edge, in the masked lanes of the
last vector, in a tile of rows or of the rows left; a K split into chunks (the caller
accumulating) continues each chain where the previous chunk left it. (WebAssembly has no
fused multiply-add: there each step is a multiply and an add, in the same order.)

The micro-kernel: a `Tile` of rows by vectors of columns keeps its sums in registers (on
x86, 6 rows by 2 AVX2 vectors: 12 sums; the shape is the target's, `TILES`), per k one
vector load of B per vector, one broadcast of A per row and an fma per row and vector.
Around it GotoBLAS's blocking: k in chunks of `DEPTH` (a tile's sums stored in C between
chunks, which rounds nothing), rows in blocks of about `Tile.block_rows` (A's block, rows x
DEPTH, stays in L2 while every block of columns passes over it), columns in blocks of the
tile's width, then one vector, then the rest. Each block of columns first copies its panel
of B (DEPTH x its width) onto the stack (16 KB at AVX2's width, 32 KB at AVX-512's), where
the tiles read it from L1: in place, B's rows often lie a power of two apart (512 filters:
2 KB), which maps a panel onto a few of L1's sets. The copy pads the last, partial vector
with zeros, so only its stores need a mask. Filters packed at compile time
(`primitives.prepacked`: panels 128 bytes wide, zero past the last column) need no copy:
the tiles read them in place (`packed_gemm_function`), a tile narrower than a panel
reading its part of each row.

A may also be read transposed, in place (`gemm_function`'s `transposed_a`): a tile's rows
are then one run of A's storage per k, its broadcasts as many loads as before. The
filter gradient's gemm reads its windows so (``im2col(x)^T @ g``), where a copy of them
transposed, element by element, cost about as much as the product.

One function per dtype (and layout of A) in a module (`gemm_function`,
`packed_gemm_function`), called by the convolution tasks, which split the rows over the
cores themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import F32, I1, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.lanes import lanes_below, transpose_square
from stageflow.codegen.llvm.loops import counted_loop, fold_loop, i64, values_where
from stageflow.codegen.lowered.conv import epilogue
from stageflow.codegen.lowered.conv.epilogue import Epilogue
from stageflow.codegen.targets import platform
from stageflow.primitives.prepacked import panel_width

DEPTH = 256  # k per chunk
PTR = ir.PointerType()


@dataclass(frozen=True)
class Tile:
    """A micro-kernel's shape: `rows` of C by `vectors` vectors of `vector_bytes`, its sums
    in registers; a block is 16 tiles' rows (96 KB of float32 A per chunk at 6 rows)."""

    rows: int
    vectors: int
    vector_bytes: int

    @property
    def block_rows(self) -> int:
        return 16 * self.rows


# x86: 12 sums of AVX-512's vectors where the CPU has them (twice the work per instruction
# of AVX2's), else of AVX2's (LLVM splits those in two where there is only SSE), hide the
# fma's latency. aarch64: NEON's 32
# registers hold 24 sums of 4 lanes, the panel's 4 vectors and A's broadcast. WebAssembly:
# SIMD128 in a runtime that maps it onto 16 SSE/AVX registers (V8 on x86-64): 8 sums, 2
# vectors of B and a broadcast leave room, where 12 sums of two registers each spilled.
TILES = {"aarch64": Tile(6, 4, 16), "wasm32": Tile(4, 2, 16)}
AVX512_TILE = Tile(6, 2, 64)
DEFAULT_TILE = Tile(6, 2, 32)


def tile() -> Tile:
    """The micro-kernel's shape for the platform being built for."""
    machine = platform.current()
    if machine.arch in TILES:
        return TILES[machine.arch]
    return AVX512_TILE if machine.has("avx512f") else DEFAULT_TILE


def gemm_function(module: ir.Module, dtype: np.dtype, transposed_a: bool = False,
                  fused: bool = True) -> ir.Function:
    """``void sf.gemm.DTYPE(i64 m, i64 n, i64 k, ptr a, i64 lda, ptr b, i64 ldb,
    i1 b_transposed, ptr c, i64 ldc, i1 accumulate, epilogue...)``: C[m, n] = A[m, k] @
    B[k, n], added to C's values where `accumulate`, then through the `epilogue` (its four
    values at C's first element: `conv.epilogue`; `epilogue.NONE` for none); leading dims
    in elements. B is stored (n, k), row-major, where `b_transposed` (only its panels'
    copy differs: `_pack_transposed`); with `transposed_a` (``sf.gemm.at.DTYPE``), A is:
    (k, m), which changes the tiles. Not `fused` (``sf.gemm.plain.DTYPE``, ``sf.gemm.at.
    plain.DTYPE``), it takes no epilogue: the CBLAS gemm's (`own_blas`), whose code is half
    the size (each of some thirty tile shapes carried the epilogue's steps) and compiles
    in half the time. Internal, one per dtype, layout of A and epilogue in a module."""
    return _function(module, dtype, False, transposed_a, fused)


def packed_gemm_function(module: ir.Module, dtype: np.dtype) -> ir.Function:
    """``void sf.gemm.packed.DTYPE(i64 m, i64 n, i64 k, ptr a, i64 lda, ptr panels,
    i64 depth, i64 offset, ptr c, i64 ldc, i1 accumulate, epilogue...)``: the same product
    with B rows
    [offset, offset + k) of a matrix of `depth` rows packed into panels
    (`primitives.prepacked`), which the tiles read in place. Internal, one per dtype."""
    return _function(module, dtype, True)


def _function(module: ir.Module, dtype: np.dtype, packed: bool, transposed_a: bool = False,
              fused: bool = True) -> ir.Function:
    symbol = (f"sf.gemm.{'packed.' if packed else ''}{'at.' if transposed_a else ''}"
              f"{'' if fused else 'plain.'}{dtype.name}")
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    b_names = ("panels", "depth", "offset") if packed else ("b", "ldb", "b_transposed")
    end_names, end_types = (epilogue.NAMES, epilogue.TYPES) if fused else ([], [])
    names = ("m", "n", "k", "a", "lda", *b_names, "c", "ldc", "accumulate", *end_names)
    b_types = [PTR, I64, I64] if packed else [PTR, I64, I1]
    types = [I64, I64, I64, PTR, I64, *b_types, PTR, I64, I1, *end_types]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), types), symbol)
    function.linkage = "internal"
    for argument, name in zip(function.args, names, strict=True):
        argument.name = name
    m, n, k, a, lda, *b_args, c, ldc, accumulate = function.args[:len(types) - len(end_types)]
    end = Epilogue.of(list(function.args[len(types) - len(end_types):])) if fused else None
    _Gemm(ir.IRBuilder(function.append_basic_block("entry")), dtype, (m, n, k), (a, lda),
          packed, b_args, (c, ldc), accumulate, end, transposed_a).emit()
    return function


def square_function(module: ir.Module, dtype: np.dtype, lanes: int) -> ir.Function:
    """``void sf.gemm.square.DTYPE(ptr src, i64 ld, i64 columns, i64 depth, ptr dst,
    i64 step)``: the square of `lanes` runs of `lanes` elements (run i at ``src + i *
    ld``), transposed: vector t (at ``dst + t * step`` vectors) holds element t of each run,
    zero for runs at or past `columns` and elements at or past `depth`, which are not
    read. One per dtype in a module, beside the gemms that copy B's panels from a B stored
    transposed: inlined into each of their copies, its shuffles took longer to compile
    than the rest of the gemm."""
    symbol = f"sf.gemm.square.{dtype.name}"
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    element = F32 if dtype == np.float32 else ir.DoubleType()
    vector = ir.VectorType(element, lanes)
    mask_type = ir.VectorType(I1, lanes)
    suffix = f"v{lanes}{'f32' if element == F32 else 'f64'}"
    masked_load = declare(module, f"llvm.masked.load.{suffix}.p0", vector,
                          [PTR, I32, mask_type, vector])
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, PTR,
                                                                    I64]), symbol)
    function.linkage = "internal"
    src, ld, columns, depth, dst, step = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    starts = [b.gep(src, [b.mul(i64(i), ld)], source_etype=element) for i in range(lanes)]
    size = dtype.itemsize

    def store(rows: list[ir.Value]) -> None:
        for t, row in enumerate(transpose_square(b, rows)):
            b.store(row, b.gep(dst, [b.mul(i64(t), step)], source_etype=vector))

    whole = b.and_(b.icmp_signed(">=", columns, i64(lanes)), b.icmp_signed(">=", depth,
                                                                         i64(lanes)))
    with b.if_else(whole) as (full, cut):
        with full:
            store([b.load(start, typ=vector, align=size) for start in starts])
        with cut:
            within = lanes_below(b, depth, lanes)
            none = ir.Constant(mask_type, [0] * lanes)
            zeros = ir.Constant(vector, [0.0] * lanes)
            store([b.call(masked_load, [start, ir.Constant(I32, size), b.select(
                b.icmp_signed("<", i64(i), columns), within, none), zeros])
                for i, start in enumerate(starts)])
    b.ret_void()
    return function


@dataclass(frozen=True)
class _Span:
    """The rows [start, stop) of a block and the k [start, stop) of a chunk; `onto` whether
    the sums start from C's values (a later chunk, or the caller accumulating)."""

    rows: tuple[ir.Value, ir.Value]
    depth: tuple[ir.Value, ir.Value]
    onto: ir.Value


class _Gemm:
    """The body of one gemm function: its arguments and the code that walks C's blocks."""

    def __init__(self, b: ir.IRBuilder, dtype: np.dtype, sizes: tuple[ir.Value, ...],
                 a: tuple[ir.Value, ir.Value], packed: bool, b_args: list[ir.Value],
                 c: tuple[ir.Value, ir.Value], accumulate: ir.Value,
                 epilogue: Epilogue | None, transposed_a: bool) -> None:
        self.b = b
        self.epilogue = epilogue
        self.transposed_a = transposed_a
        self.m, self.n, self.k = sizes
        self.a, self.lda = a
        self.c, self.ldc = c
        self.accumulate = accumulate
        # B as given (a pointer, its leading dim, whether it is stored transposed), or
        # packed (panels, depth, offset)
        self.packed = packed
        if self.packed:
            self.b_, self.depth, self.offset = b_args
        else:
            self.b_, self.ldb, self.b_transposed = b_args
        self.element = F32 if dtype == np.float32 else ir.DoubleType()
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.tile = tile()
        self.lanes = self.tile.vector_bytes // dtype.itemsize
        self.vector = ir.VectorType(self.element, self.lanes)
        suffix = f"v{self.lanes}{'f32' if self.element == F32 else 'f64'}"
        self.fma = declare(b.module, platform.current().fma(suffix), self.vector,
                           [self.vector] * 3)
        mask = ir.VectorType(I1, self.lanes)
        self.masked_load = declare(b.module, f"llvm.masked.load.{suffix}.p0", self.vector,
                                   [PTR, I32, mask, self.vector])
        self.masked_store = declare(b.module, f"llvm.masked.store.{suffix}.p0",
                                    ir.VoidType(), [self.vector, PTR, I32, mask])
        if not self.packed:
            self.panel = entry_alloca(b, self.vector, DEPTH * self.tile.vectors, "panel")
            b.position_at_end(b.block)  # after it: the entry block was empty

    def emit(self) -> None:
        """Chunks of k, blocks of rows, then the columns (`_columns`)."""
        b = self.b

        def chunk(k0: ir.Value) -> None:
            k1 = b.select(b.icmp_signed("<", b.add(k0, i64(DEPTH)), self.k),
                          b.add(k0, i64(DEPTH)), self.k)
            onto = b.or_(self.accumulate, b.icmp_signed(">", k0, i64(0)))

            def rows(m0: ir.Value) -> None:
                end = b.add(m0, block)
                m1 = b.select(b.icmp_signed("<", end, self.m), end, self.m)
                self._blocks(_Span((m0, m1), (k0, k1), onto))

            counted_loop(b, i64(0), self.m, block, rows, "rows")

        # Rows in blocks of about `block_rows`, as many as fit whole (at least one), the
        # rows shared out evenly in whole tiles: every block packs all of B's panels again,
        # so 98 rows (half a 14x14 image) run as one block, not as 96 and then 2.
        rows = self.tile.rows
        count = b.sdiv(self.m, i64(self.tile.block_rows))
        count = b.select(b.icmp_signed(">", count, i64(1)), count, i64(1))
        share = b.sdiv(b.sub(b.add(self.m, count), i64(1)), count)
        block = b.mul(b.sdiv(b.add(share, i64(rows - 1)), i64(rows)), i64(rows))
        block = b.select(b.icmp_signed(">", block, i64(0)), block, i64(rows))

        # One chunk when k is 0: C still gets its zeros (or keeps its values).
        chunks = b.select(b.icmp_signed(">", self.k, i64(0)), self.k, i64(1))
        counted_loop(b, i64(0), chunks, i64(DEPTH), chunk, "depth")
        b.ret_void()

    def _pack(self, span: _Span, n0: ir.Value, vectors: int, mask: ir.Value | None) -> None:
        """The chunk's rows of B's columns from n0, `vectors` vectors wide, copied into the
        panel one row after another (the masked lanes zero); from a B stored transposed,
        by `_pack_transposed`."""
        b, lanes = self.b, self.lanes
        k0, k1 = span.depth

        def row(kk: ir.Value) -> None:
            source = b.gep(self.b_, [b.add(b.mul(kk, self.ldb), n0)], source_etype=self.element)
            first = b.mul(b.sub(kk, k0), i64(vectors))
            for v in range(vectors):
                value = self._load(b.gep(source, [i64(v * lanes)], source_etype=self.element),
                                   mask, zeros=True)
                b.store(value, b.gep(self.panel, [b.add(first, i64(v))]))

        with b.if_else(self.b_transposed) as (flipped, as_is):
            with flipped:
                self._pack_transposed(span, n0, vectors)
            with as_is:
                counted_loop(b, k0, k1, i64(1), row, "pack")

    def _pack_transposed(self, span: _Span, n0: ir.Value, vectors: int) -> None:
        """`_pack` of a B stored transposed, whose columns are runs of its storage: squares
        of `lanes` columns by `lanes` k, each transposed in registers by the module's
        `square_function` (columns past n and k past the chunk read as zeros; a square's
        rows past the chunk land in the panel's rows after it, which no tile reads)."""
        b, lanes = self.b, self.lanes
        k0, k1 = span.depth
        square = square_function(b.module, self.dtype, lanes)

        def at(kk0: ir.Value) -> None:
            first = b.mul(b.sub(kk0, k0), i64(vectors))
            depth = b.sub(k1, kk0)
            for v in range(vectors):
                column = b.add(n0, i64(v * lanes))
                b.call(square, [b.gep(self.b_, [b.add(b.mul(column, self.ldb), kk0)],
                                      source_etype=self.element), self.ldb,
                                b.sub(self.n, column), depth,
                                b.gep(self.panel, [b.add(first, i64(v))]), i64(vectors)])

        counted_loop(b, k0, k1, i64(lanes), at, "pack.square")

    def _blocks(self, span: _Span) -> None:
        """Whole blocks of the tile's vectors, then single vectors, then the masked rest."""
        b, lanes, vectors = self.b, self.lanes, self.tile.vectors
        block = vectors * lanes
        whole = b.mul(b.sdiv(self.n, i64(block)), i64(block))
        counted_loop(b, i64(0), whole, i64(block),
                     lambda n0: self._columns(span, n0, vectors, None), "block")
        # One vector's columns at a time, the last one's lanes past n masked (every lane of
        # the others): one copy of the tiles for both, where two took half of the code.
        counted_loop(b, whole, self.n, i64(lanes), lambda n0: self._columns(
            span, n0, 1, lanes_below(b, b.sub(self.n, n0), lanes)), "vector")

    def _columns(self, span: _Span, n0: ir.Value, vectors: int, mask: ir.Value | None
                 ) -> None:
        """The span's rows by the columns from `n0`, `vectors` vectors wide (one masked by
        `mask`): tiles of the tile's rows, then one tile of the rows left. A row alone
        holds too few sums to hide the fma's latency (2, where two fma pipes of 4 cycles
        need 8 in flight), so the rows left after the last whole tile run together, in a
        tile of their number, rather than one at a time at a quarter of a tile's rate: a
        gemm of 28 rows (4 rows of a 7x7 image) has 4 left. For the same reason a tile one
        vector wide (16 filters with AVX-512, or the last 16 of 48) takes twice the rows:
        12 sums, not 6, where a convolution squeezes its channels to few. Without an
        epilogue (the CBLAS gemm, where such columns are a product's last few), the rows
        left beside them run in tiles of 8, 4, 2 and 1 as their count's bits say: a tile
        shape per count took a third of that gemm's code and compile time."""
        b = self.b
        panel = self._panel(span, n0, vectors, mask)
        m0, m1 = span.rows
        rows = self.tile.rows * (2 if vectors == 1 else 1)
        tiles = b.add(m0, b.mul(b.sdiv(b.sub(m1, m0), i64(rows)), i64(rows)))
        counted_loop(b, m0, tiles, i64(rows),
                     lambda r: self._tile(span, r, rows, n0, vectors, mask, panel), "tile")
        left = b.sub(m1, tiles)
        if vectors == 1 and self.epilogue is None:
            # tiles of 8, 4, 2 and 1 of the rows left, as their count's bits say
            at = tiles
            for size in (8, 4, 2, 1):
                if size < rows:
                    with b.if_then(b.icmp_unsigned("!=", b.and_(left, i64(size)), i64(0))):
                        self._tile(span, at, size, n0, vectors, mask, panel)
                    at = b.add(at, b.and_(left, i64(size)))
            return
        done = b.append_basic_block("rest.done")
        switch = b.switch(left, done)
        for count in range(1, rows):
            case = b.append_basic_block(f"rest.{count}")
            switch.add_case(i64(count), case)
            b.position_at_end(case)
            self._tile(span, tiles, count, n0, vectors, mask, panel)
            b.branch(done)
        b.position_at_end(done)

    def _panel(self, span: _Span, n0: ir.Value, vectors: int, mask: ir.Value | None
               ) -> tuple[ir.Value, int, int]:
        """Where the tiles read the chunk's rows of B's columns from n0: (the first row's
        first vector, vectors from one row to the next, the loads' alignment). A copy on
        the stack (`_pack`), or the packed panel in place: the panel holding n0, at the
        chunk's first row, n0's place in its width."""
        if not self.packed:
            self._pack(span, n0, vectors, mask)
            return self.panel, vectors, self.tile.vector_bytes
        b, width = self.b, panel_width(self.dtype)
        block, within = b.sdiv(n0, i64(width)), b.srem(n0, i64(width))
        row = b.add(b.add(b.mul(block, self.depth), self.offset), span.depth[0])
        start = b.gep(self.b_, [b.add(b.mul(row, i64(width)), within)],
                      source_etype=self.element)
        return start, width // self.lanes, self.itemsize

    def _load(self, pointer: ir.Value, mask: ir.Value | None, zeros: bool = False
              ) -> ir.Value:
        """A vector at `pointer`, its lanes outside `mask` not read (zero, or undefined)."""
        if mask is None:
            return self.b.load(pointer, typ=self.vector, align=self.itemsize)
        rest = ir.Constant(self.vector, [0.0] * self.lanes if zeros else None)
        return self.b.call(self.masked_load, [pointer, ir.Constant(I32, self.itemsize), mask,
                                              rest])

    def _store(self, value: ir.Value, pointer: ir.Value, mask: ir.Value | None) -> None:
        if mask is None:
            self.b.store(value, pointer, align=self.itemsize)
        else:
            self.b.call(self.masked_store, [value, pointer, ir.Constant(I32, self.itemsize),
                                            mask])

    def _tile(self, span: _Span, m0: ir.Value, rows: int, n0: ir.Value, vectors: int,
              mask: ir.Value | None, panel: tuple[ir.Value, int, int]) -> None:
        """Rows [m0, m0 + rows) by `vectors` vectors of columns from n0: their sums from C
        (`span.onto`) or zero, one fma per k of the span's chunk (B's vectors read from
        `panel`, `_panel`'s), stored back."""
        b, lanes = self.b, self.lanes
        start, stride, align = panel

        def at(base: ir.Value, row: ir.Value, ld: ir.Value, column: ir.Value) -> ir.Value:
            return b.gep(base, [b.add(b.mul(row, ld), column)], source_etype=self.element)

        targets = [at(self.c, b.add(m0, i64(r)), self.ldc, b.add(n0, i64(v * lanes)))
                   for r in range(rows) for v in range(vectors)]
        zero = ir.Constant(self.vector, [0.0] * lanes)
        sums = [b.select(span.onto, self._load(t, mask), zero) for t in targets]
        a_rows = [] if self.transposed_a else [at(self.a, b.add(m0, i64(r)), self.lda, i64(0))
                                               for r in range(rows)]
        undefined = ir.Constant(self.vector, None)
        splat = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)

        def a_values(kk: ir.Value) -> list[ir.Value]:
            """A's elements of the tile's rows at `kk`: along each row, or, A stored
            transposed, one run of its storage."""
            if not self.transposed_a:
                return [b.gep(a_rows[r], [kk], source_etype=self.element) for r in range(rows)]
            run = at(self.a, kk, self.lda, m0)
            return [b.gep(run, [i64(r)], source_etype=self.element) for r in range(rows)]

        def step(kk: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            first = b.mul(b.sub(kk, span.depth[0]), i64(stride))
            weights = [b.load(b.gep(start, [b.add(first, i64(v))], source_etype=self.vector),
                              typ=self.vector, align=align) for v in range(vectors)]
            updated = list(sums)
            for r, address in enumerate(a_values(kk)):
                value = b.load(address, typ=self.element)
                broadcast = b.shuffle_vector(b.insert_element(undefined, value, i64(0)),
                                             undefined, splat)
                for v in range(vectors):
                    updated[r * vectors + v] = b.call(
                        self.fma, [broadcast, weights[v], sums[r * vectors + v]])
            return updated

        def elements(first: ir.Value = m0) -> list[ir.Value]:
            return [b.add(b.mul(b.add(first, i64(r)), self.ldc), b.add(n0, i64(v * lanes)))
                    for r in range(rows) for v in range(vectors)]

        # The next tile's lines of C too: its sums start from them in every chunk after
        # the first, before its first fma.
        lines = elements() + elements(b.add(m0, i64(rows)))
        end = self.epilogue
        if end is None:  # C's own lines prefetched, as `Epilogue.prefetch` does without one
            epilogue.NONE.prefetch(b, ir.Constant(I1, 0), self.c, lines, self.element)
            sums = fold_loop(b, *span.depth, i64(1), sums, step, "k")
        else:
            # After the last chunk's terms, the epilogue, for C's elements of this tile.
            last = b.and_(b.icmp_signed("==", span.depth[1], self.k), end.any(b))
            end.prefetch(b, last, self.c, lines, self.element)
            sums = fold_loop(b, *span.depth, i64(1), sums, step, "k")
            sums = values_where(b, last, sums, lambda: end.apply(
                b, sums, [b.add(n0, i64(v * lanes)) for _ in range(rows)
                          for v in range(vectors)],
                elements(), lambda pointer: self._load(pointer, mask), self.element))
        for value, target in zip(sums, targets, strict=True):
            self._store(value, target, mask)
