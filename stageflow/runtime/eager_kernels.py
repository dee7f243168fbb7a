"""Eager ops on the compiled code staged functions run: convolutions, and elementwise ops
where the compiled loop proves faster than NumPy's.

The eager executor asks `KERNELS.route` once per op signature (the primitive, each
operand's dtype and shape, the params) what runs it from then on: None for the
primitive's NumPy kernel, else a callable of the operand arrays. Compiling costs tens to
hundreds of milliseconds (cached on disk after that, like every compiled op), more than
an op takes: it runs on a background thread while NumPy's kernel serves the signature's
first calls, so an eager step never waits for LLVM. `settle()` waits for the compiles
under way (for tests and benchmarks), and ``sf.config.eager_compile = False`` keeps
NumPy's kernels.

Convolutions. NumPy's kernels are im2col copies and one matmul (and, for the input
gradient, a strided add per filter tap); the lowered ones (`codegen.lowered.conv`) block
the copies into the cache and split them over the cores. On NumPy's kernels the
convolutions take most of an eager convnet's training step, so a convolution runs the
compiled op of its params and dtypes (float32, float64, and bfloat16 where the CPU has
bfloat16 dot products, `codegen.lowered.conv.bfloat16`: NumPy's kernel computes bfloat16
on float32 copies): the lowerings are shape-generic (`lowering(generic=True)`), so one
compile serves every shape. Only a tiny one (fewer than `MIN_MACS` multiply-adds, a few
microseconds of work either way) stays on NumPy; even at batch 1 a small ResNet's
convolutions run several times faster compiled. Until its op is ready a signature's
results are NumPy's, which may differ from the compiled op's in the last bits (float sums
in another order; bfloat16's input gradient rounds each window's part before adding).

Matmuls. NumPy multiplies bfloat16 through float32 copies of the operands, at float32's
speed or below; where the CPU has bfloat16 dot products the compiled op
(`codegen.lowered.gemm_bf16`) runs several times faster, so a bfloat16 matmul of at least
`MIN_MACS` multiply-adds compiles it once for every shape (its code reads its dims at run
time) and runs it from then on. A float32 or float64 matmul large enough to be split over
the cores (`codegen.lowered.gemm_split`: OpenBLAS's own threads spin while they wait,
stalling each other beside other busy processes and stealing the cores from the compiled
code's tasks for a while after each call) runs its compiled op too: the same OpenBLAS
kernels, single-threaded on parts of the product, over the worker pool compiled code
uses. Until the op is ready NumPy's kernel serves; the two differ within the dtype's
rounding.

Elementwise ops. Some of NumPy's loops are far from the memory's speed: a ReLU
(``np.maximum(x, 0)``) takes several times as long as a copy of its result, and a relu's
gradient (a select) about as long, where a one-op compiled program (a fused kernel, its
rows split over the cores from `SPLIT_KERNEL_ELEMENTS` on) runs at the copy's speed. Others
are as fast as NumPy's, and a program call costs a few microseconds more than a ufunc call
(`benchmarks/eager_activations.py` times these routes). So an elementwise op of at least
`MIN_ELEMENTS` result elements compiles its one-op program, then times both on its
signature's next calls (`TRIAL_CALLS` each, in turns, the fastest call of each counted)
and keeps the faster for good. Only ops whose compiled loop computes NumPy's numbers bit for bit
take part (`exact`: the arithmetic ops, not the transcendental ones, on floats and
booleans), so which one runs never shows in a result.

Sums. NumPy's ``add.reduce`` over leading axes (batch norm's statistics of an NHWC image:
every axis but the channels) walks the array a few channels at a time, ten times slower
than a compiled kernel's rows split over the cores (`benchmarks/eager_activations.py`). A
float `reduce_sum` of at least `MIN_ELEMENTS` operand elements runs its one-op program once
compiled, whichever axes it sums: the route is fixed by the signature, not by a race, as
the sums differ from NumPy's in the last bits (another order of additions), as a
convolution's do.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from stageflow.core import config, dtypes, lazy
from stageflow.core.config_threading import SPLIT_MACS
from stageflow.core.op_facts import Cost, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.worker_thread import WorkerThread
from stageflow.primitives.conv import conv2d_filter_gradient_p, conv2d_input_gradient_p, conv2d_p
from stageflow.primitives.elementwise import maximum_p, minimum_p
from stageflow.primitives.linalg import matmul_add_p, matmul_p
from stageflow.primitives.reduction import reduce_sum_p

if TYPE_CHECKING:  # the compiler: loaded by the first op that compiles
    from stageflow.runtime import eager_compiles
else:
    eager_compiles = lazy.module("stageflow.runtime.eager_compiles")

MIN_MACS = 1 << 16  # about a microsecond of a convolution's arithmetic
# Smaller elementwise ops take a few microseconds either way: NumPy's and the compiled
# loop come out even around here, the compiled one ahead from twice as many elements on.
MIN_ELEMENTS = 1 << 12
TRIAL_CALLS = 3
MAX_COMPILES = 256  # compiles kept (the oldest forgotten first)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_CONVOLUTION_DTYPES = frozenset({*_FLOATS, dtypes.bfloat16})
_EXACT_DTYPES = frozenset({*_FLOATS, np.dtype(np.bool_)})

Route = Callable[..., Any] | None  # what runs a signature: None for NumPy's kernel
Routes = dict[tuple, Route]


Shapes = Sequence[tuple[int, ...]]


def _macs_conv(shapes: Shapes, out: tuple[int, ...], params: dict[str, Any]) -> int:
    return math.prod(out) * math.prod(shapes[1][:3])


def _macs_input_gradient(shapes: Shapes, out: tuple[int, ...], params: dict[str, Any]) -> int:
    return math.prod(shapes[0]) * math.prod(shapes[1][:3])


def _macs_filter_gradient(shapes: Shapes, out: tuple[int, ...], params: dict[str, Any]) -> int:
    return math.prod(shapes[1][:3]) * math.prod(out)


def _macs_matmul(shapes: Shapes, out: tuple[int, ...], params: dict[str, Any]) -> int:
    return math.prod(out) * shapes[0][-2 if params["transpose_a"] else -1]


# The ops that run their compiled op eagerly (one compile for every shape, every dim
# unknown) where all operands are of the given dtypes: their multiply-adds per call, from
# the operands' shapes, the result's and the params, decide whether the call is worth it:
# `MIN_MACS`, or for each dtype of `LARGE_ONLY` at least `SPLIT_MACS`. bfloat16
# convolutions and matmuls run on the CPU's bfloat16 dot products where it has them
# (`codegen.lowered.gemm_bf16`: NumPy computes bfloat16 on float32 copies), NumPy's kernel
# elsewhere (no op); float matmuls below the split keep NumPy's call of the same BLAS.
MACS: dict[Primitive, tuple[frozenset[np.dtype], Callable[[Shapes, tuple[int, ...],
                                                            dict[str, Any]], int]]] = {
    conv2d_p: (_CONVOLUTION_DTYPES, _macs_conv),
    conv2d_input_gradient_p: (_CONVOLUTION_DTYPES, _macs_input_gradient),
    conv2d_filter_gradient_p: (_CONVOLUTION_DTYPES, _macs_filter_gradient),
    matmul_p: (_CONVOLUTION_DTYPES, _macs_matmul),
    matmul_add_p: (_CONVOLUTION_DTYPES, _macs_matmul),
}
LARGE_ONLY: dict[Primitive, frozenset[np.dtype]] = {matmul_p: frozenset(_FLOATS),
                                                    matmul_add_p: frozenset(_FLOATS)}


# NumPy's SIMD maximum and minimum return the second operand of equal ones (+0 and -0),
# the compiled loops the first.
_SIGNED_ZEROS_DIFFER = frozenset({maximum_p, minimum_p})


def exact(primitive: Primitive) -> bool:
    """Whether `primitive`'s compiled loop computes its NumPy kernel's numbers bit for bit
    (on `_EXACT_DTYPES`: infinities, signed zeros and subnormals included, NaNs where NumPy's
    are, their sign and payload aside, which NumPy does not define): a fused
    elementwise op of plain arithmetic, comparison or selection; transcendental ones are
    polynomials of their own."""
    return (primitive.lowered_by is LoweredBy.ELEMENTWISE and primitive.cost is Cost.ELEMENTWISE
            and primitive not in _SIGNED_ZEROS_DIFFER)


class EagerKernels:
    """Compiles what eager ops run, in the background; `route` answers per signature."""

    def __init__(self) -> None:
        self._compiles: dict[Any, Future[Any]] = {}
        self._lock = threading.Lock()
        self._worker = WorkerThread("stageflow-eager")

    def route(self, primitive: Primitive, values: Sequence[Any], params: dict[str, Any],
              key: tuple, routes: Routes) -> Route:
        """What runs calls of signature `key` (these operands and params, whose shape rule
        passed): None for NumPy's kernel, or a callable of the operand arrays which may
        later put another route in `routes[key]` (a compile finished, a trial decided)."""
        if not config.eager_compile or any(type(v) is not np.ndarray for v in values):
            return None
        if primitive in MACS:
            return self._compiled_op(primitive, values, params, key, routes)
        if exact(primitive):
            return self._elementwise(primitive, values, params, key, routes)
        if primitive is reduce_sum_p:
            return self._sum(primitive, values, params, key, routes)
        return None

    def _compiled_op(self, primitive: Primitive, values: Sequence[Any], params: dict[str, Any],
                     key: tuple, routes: Routes) -> Route:
        accepted, macs = MACS[primitive]
        if any(v.dtype not in accepted for v in values):
            return None
        inputs = tuple(ShapedType(v.shape, v.dtype) for v in values)
        output = primitive.shape_rule(*inputs, **params)
        least = (SPLIT_MACS if values[0].dtype in LARGE_ONLY.get(primitive, frozenset())
                 else MIN_MACS)
        if macs([v.shape for v in values], output.shape, params) < least:
            return None
        spec = eager_compiles.generic_op(primitive, inputs, output, params)
        compiling = self._compile(spec.key, lambda: eager_compiles.compile_op(spec))
        return _Pending(primitive, params, compiling, routes, key)

    def _elementwise(self, primitive: Primitive, values: Sequence[Any], params: dict[str, Any],
                     key: tuple, routes: Routes) -> Route:
        inputs = tuple(ShapedType(v.shape, v.dtype) for v in values)
        output = primitive.shape_rule(*inputs, **params)
        if (math.prod(output.shape) < MIN_ELEMENTS or output.dtype not in _EXACT_DTYPES
                or any(v.dtype not in _EXACT_DTYPES for v in values)):
            return None
        compiling = self._compile(
            key, lambda: eager_compiles.one_op_program(primitive, inputs, params))
        return _Trial(primitive, params, compiling, routes, key)

    def _sum(self, primitive: Primitive, values: Sequence[Any], params: dict[str, Any],
             key: tuple, routes: Routes) -> Route:
        (value,) = values
        if value.size < MIN_ELEMENTS or value.dtype not in _FLOATS:
            return None
        inputs = (ShapedType(value.shape, value.dtype),)
        compiling = self._compile(
            key, lambda: eager_compiles.one_op_program(primitive, inputs, params))
        return _Pending(primitive, params, compiling, routes, key)

    def _compile(self, key: Any, make: Callable[[], Any]) -> Future[Any]:
        """The compile of `key` (one per key, shared by the signatures needing it)."""
        with self._lock:
            compiling = self._compiles.get(key)
            if compiling is None:
                if len(self._compiles) >= MAX_COMPILES:
                    del self._compiles[next(iter(self._compiles))]
                compiling = self._compiles[key] = self._worker.submit(make)
            return compiling

    def settle(self) -> None:
        """Wait for the compiles under way."""
        with self._lock:
            pending = list(self._compiles.values())
        for future in pending:
            future.result()


class _Pending:
    """A signature's route while its compiled op compiles: NumPy's kernel, then the op."""

    def __init__(self, primitive: Primitive, params: dict[str, Any], compiling: Future[Any],
                 routes: Routes, key: tuple) -> None:
        self.kernel, self.params = primitive.kernel, params
        self.compiling, self.routes, self.key = compiling, routes, key

    def __call__(self, *arrays: Any) -> Any:
        if not self.compiling.done():
            return self.kernel(*arrays, **self.params)
        compiled = self.routes[self.key] = self.compiling.result()
        return (self.kernel(*arrays, **self.params) if compiled is None
                else compiled(*arrays))


class _Trial(_Pending):
    """A signature's route while its one-op program compiles (NumPy's kernel runs), then
    races NumPy's kernel: the two take turns, `TRIAL_CALLS` calls each (timed only once the
    compile is done, so that it slows neither), and the faster call of each decides the
    route for good."""

    def __init__(self, primitive: Primitive, params: dict[str, Any], compiling: Future[Any],
                 routes: Routes, key: tuple) -> None:
        super().__init__(primitive, params, compiling, routes, key)
        self.seconds: list[list[float]] = [[], []]  # NumPy's calls, the program's

    def __call__(self, *arrays: Any) -> Any:
        if not self.compiling.done():
            return self.kernel(*arrays, **self.params)
        program = self.compiling.result()
        if program is None:  # (it could not be one program)
            self.routes[self.key] = None
            return self.kernel(*arrays, **self.params)
        numpy, compiled = self.seconds
        turn = compiled if len(compiled) < len(numpy) else numpy
        start = time.perf_counter()
        result = program(*arrays) if turn is compiled else self.kernel(*arrays, **self.params)
        turn.append(time.perf_counter() - start)
        if len(compiled) >= TRIAL_CALLS:
            self.routes[self.key] = program if min(compiled) < min(numpy) else None
        return result


KERNELS = EagerKernels()
settle = KERNELS.settle
