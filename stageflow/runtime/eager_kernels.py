"""Eager convolutions on the compiled lowerings that staged functions run.

NumPy's convolution kernels are im2col copies and one matmul (and, for the input gradient,
a strided add per filter tap); the lowered ones (`codegen.lowered.conv`) block the copies
into the cache and split them over the cores. In the small ResNet's eager training step at
batch 32 the NumPy kernels took 90 of its 125 ms. So an eager op of these primitives runs
the compiled op of its params and dtypes: the lowerings are shape-generic
(`lowering(generic=True)`), so one compile serves every shape.

Compiling one costs about 100 ms (cached on disk after that, like every compiled op), more
than a small convolution takes: the ops compile on a background thread while NumPy's
kernel serves their first calls, so an eager step never waits for LLVM. Only a tiny op (fewer
than `MIN_MACS` multiply-adds, a few microseconds of work either way) stays on NumPy: at
batch 1 the small ResNet's convolutions (0.13 to 2.4 M multiply-adds each) took 7.0 ms of
a training step on NumPy's kernels and 2.3 ms compiled. Until a signature's op is ready its
results are NumPy's, which may differ from the compiled op's in the last bits (float sums
in another order); `settle()` waits for the compiles under way (for tests and benchmarks),
and ``sf.config.eager_compile = False`` keeps NumPy's kernels.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from stageflow.codegen.lowered.compile import CompiledOp, OpSpec, compile_ops
from stageflow.codegen.lowered.rule import generic_spec
from stageflow.core import config
from stageflow.core.primitive import Primitive, ShapedType

MIN_MACS = 1 << 16  # ~1 us of a convolution at 100 GFLOP/s
MAX_OPS = 256  # signatures kept (the oldest forgotten first)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _macs_conv(shapes: Sequence[tuple[int, ...]], out: tuple[int, ...]) -> int:
    return math.prod(out) * math.prod(shapes[1][:3])


def _macs_input_gradient(shapes: Sequence[tuple[int, ...]], out: tuple[int, ...]) -> int:
    return math.prod(shapes[0]) * math.prod(shapes[1][:3])


def _macs_filter_gradient(shapes: Sequence[tuple[int, ...]], out: tuple[int, ...]) -> int:
    return math.prod(shapes[1][:3]) * math.prod(out)


# Multiply-adds of a call, from the operands' shapes and the result's, per primitive.
MACS: dict[str, Callable[[Sequence[tuple[int, ...]], tuple[int, ...]], int]] = {
    "conv2d": _macs_conv,
    "conv2d_input_gradient": _macs_input_gradient,
    "conv2d_filter_gradient": _macs_filter_gradient,
}


class EagerKernels:
    """The compiled ops of eager calls, by signature; compiles in the background."""

    def __init__(self) -> None:
        self._ops: dict[tuple, CompiledOp | None] = {}
        self._pending: dict[tuple, Future[CompiledOp | None]] = {}  # by signature
        self._compiles: dict[tuple, Future[CompiledOp | None]] = {}  # by compiled spec
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def lookup(self, primitive: Primitive, values: Sequence[Any], params: dict[str, Any],
               key: tuple | None = None) -> CompiledOp | None:
        """The compiled op for these operands, or None while there is none (yet). `key` is
        the call's signature when the caller has built it (the eager executor's shape
        check has: the primitive, each operand's (dtype, shape), the params' items)."""
        if not config.eager_compile or any(type(v) is not np.ndarray or v.dtype not in _FLOATS
                                           for v in values):
            return None
        if key is None:
            key = (primitive, *[(v.dtype, v.shape) for v in values], *params.items())
        try:
            op = self._ops[key]
        except KeyError:
            return self._start(primitive, key, values, params)
        except TypeError:  # an unhashable param
            return None
        return op

    def _start(self, primitive: Primitive, key: tuple, values: Sequence[Any],
               params: dict[str, Any]) -> CompiledOp | None:
        with self._lock:
            pending = self._pending.get(key)
            if pending is not None:
                if not pending.done():
                    return None
                del self._pending[key]
                self._keep(key, pending.result())
                return self._ops[key]
            inputs = tuple(ShapedType(v.shape, v.dtype) for v in values)
            output = primitive.shape_rule(*inputs, **params)
            if MACS[primitive.name]([v.shape for v in values], output.shape) < MIN_MACS:
                self._keep(key, None)
                return None
            spec = generic_spec(OpSpec(primitive.name, inputs, (output,), dict(params)))
            compiling = self._compiles.get(spec.key)
            if compiling is None:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(1, thread_name_prefix="stageflow-eager")
                compiling = self._pool.submit(lambda: compile_ops([spec])[0])
                self._compiles[spec.key] = compiling
            self._pending[key] = compiling
            return None

    def _keep(self, key: tuple, op: CompiledOp | None) -> None:
        if len(self._ops) >= MAX_OPS:
            del self._ops[next(iter(self._ops))]
        self._ops[key] = op

    def settle(self) -> None:
        """Wait for the compiles under way."""
        with self._lock:
            pending = list(self._pending.values())
        for future in pending:
            future.result()


KERNELS = EagerKernels()
settle = KERNELS.settle
