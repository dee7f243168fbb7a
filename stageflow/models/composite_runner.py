"""The runner of eager composites (`models.composite`): one staged function per composite
and input signature, compiled in the background.

A call whose signature is new starts its compile on a worker thread and returns None, so
the composite's ops run one by one meanwhile: an eager step never waits for LLVM (as for
the eager convolutions, `runtime.eager_kernels`). What is compiled is what the call needs:
the forward/backward pair when a tape records it, the plain program otherwise (a
composite reads no variables: they are its operands, so a tape watching none of them has
nothing to record). Nested tapes (higher-order gradients) get the ops one by one. Compiled
code is cached on disk like every staged function's, so a later process finds it there.
`settle()` waits for the compiles under way (tests and benchmarks).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from stageflow.core import context, nest
from stageflow.frontend import tape
from stageflow.frontend.spec import TensorSpec
from stageflow.staging.background import BackgroundBuilds
from stageflow.staging.concrete import ConcreteFunction, trace_function
from stageflow.staging.function import Function
from stageflow.staging.staged_grad import ForwardBackward, call_under_tape

if TYPE_CHECKING:
    from stageflow.models.composite import Composite

__all__ = ["settle"]

MAX_SIGNATURES = 256  # concrete functions kept (the oldest forgotten first)


class CompositeRunner:
    """Concrete functions of composites by signature; builds them on a worker thread."""

    def __init__(self) -> None:
        self._ready: dict[tuple, ConcreteFunction] = {}
        # builds by signature: one that answered None failed, and is never tried again
        # (its ops run one by one)
        self._pending: dict[tuple, Future[ConcreteFunction | None]] = {}
        self._functions: dict[Composite, Function] = {}
        self._builds = BackgroundBuilds("stageflow-composite")
        self._lock = threading.Lock()

    def __call__(self, composite: Composite, arguments: tuple) -> Any:
        key = (composite, *[None if a is None else (a._value.dtype, a._value.shape)
                            for a in arguments])
        tensors = [a for a in arguments if a is not None]
        taped = bool(context.state.tape_count) and tape.any_watching(tensors)
        if taped and tape.recording_tapes() != 1:
            return None  # nested tapes (higher order): the ops, one by one
        concrete = self._ready.get(key)
        built = None if concrete is None else (
            concrete._forward_backward if taped else concrete._program)
        if built is None:
            self._start(key, composite, arguments, taped)
            return None
        if taped:  # `call_flat`'s way under a tape, less the checks made here already
            results = call_under_tape(concrete, tensors)
            if results is not None:
                return concrete.structure_outputs(results)
        return concrete.call_flat(tensors)

    def _start(self, key: tuple, composite: Composite, arguments: tuple, taped: bool) -> None:
        """Submit the build this call needs, unless one is under way for its signature or
        one failed (its ops then always run one by one; `settle` raises the error)."""
        with self._lock:
            pending = self._pending.get(key)
            if pending is not None and (not pending.done() or pending.result() is None):
                return
            specs = [None if a is None else TensorSpec(a.shape, a.dtype) for a in arguments]
            self._pending[key] = self._builds.submit(
                lambda: self._compile(key, composite, specs, taped))

    def _compile(self, key: tuple, composite: Composite, specs: list[TensorSpec | None],
                 taped: bool) -> ConcreteFunction:
        concrete = self._ready.get(key)
        if concrete is None:
            function = self._functions.get(composite)
            if function is None:
                function = Function(composite.function, name=composite.name, autograph=False)
                self._functions[composite] = function
            leaves, treedef = nest.flatten(tuple(specs))
            concrete = trace_function(function, leaves, treedef, False)
        if taped:
            concrete._forward_backward = ForwardBackward(concrete)
        else:
            concrete.program  # noqa: B018 - compiles
        with self._lock:
            if len(self._ready) >= MAX_SIGNATURES:
                del self._ready[next(iter(self._ready))]
            self._ready[key] = concrete
        return concrete

    def settle(self) -> None:
        """Wait for the builds under way; the first error of a build that failed since the
        last `settle` is raised here (its composite keeps running its ops one by one)."""
        self._builds.settle()


RUNNER = CompositeRunner()
settle = RUNNER.settle
