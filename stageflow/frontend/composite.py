"""Composites: functions of tensors that eager execution runs as one compiled function.

A layer's computation of many small ops costs, eagerly, one dispatch and one pass over
memory per op: batch normalisation in training is about 10 ops forward and 20 backward
(its statistics, the normalisation, their gradients), where staged the same ops fuse into
three or four loops. Measured on a batch norm of (32, 32, 32, 16) float32 under a tape,
forward and backward: 16.5 ms op by op, 1.0 ms as one staged call; at batch 1, 457 against
130 us. A `Composite` wraps such a function so that users' eager code gets the staged speed
without decorating anything:

- while tracing (`sf.function`), its ops are traced inline, so the outer function's passes
  fuse them with their neighbours, as if the composite were not there;
- eagerly, it runs as a staged function compiled once per input signature (dtypes and
  shapes), under a tape as one op whose gradient is the staged backward; nested tapes
  (higher-order gradients) replay its ops one by one, as for any staged function.

Compiling is the staging layer's work, above this one: it installs the runner
(`set_runner`). The runner compiles in the background and answers None meanwhile; then,
and where no runner is installed (or ``sf.config.eager_compile`` is False, or a tensor
lives on another device), the ops run one by one, with the same results to rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.core import config, context, devices
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace

__all__ = ["Composite", "set_runner"]

Runner = Callable[["Composite", tuple], Any]
_runner: Runner | None = None


def set_runner(run: Runner) -> None:
    """Install what runs a composite eagerly: ``run(composite, tensors)`` returns its
    results, or None while it cannot (the composite's ops then run one by one)."""
    global _runner
    _runner = run


class Composite:
    """A function of tensors, traced inline and run eagerly as one compiled function.

    `function` takes tensors or None (an optional operand left out) and returns a tensor or
    a tuple of them; every Python value it depends on must be fixed when the composite is
    made (a closure), since the compiled function is reused for every call with the same
    dtypes and shapes (and the same operands left out).
    """

    def __init__(self, function: Callable[..., Any], name: str) -> None:
        self.function = function
        self.name = name

    def __call__(self, *tensors: Tensor) -> Any:
        if (_runner is not None and config.eager_compile
                and not isinstance(context.current_trace(), GraphTrace)
                and devices.current() in (None, devices.HOST)
                and all(type(t) is Tensor or t is None for t in tensors)):
            results = _runner(self, tensors)
            if results is not None:
                return results
        return self.function(*tensors)

    def __repr__(self) -> str:
        return f"<composite {self.name}>"
