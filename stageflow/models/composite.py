"""Composites: functions of tensors that eager execution runs as one compiled function.

A layer's computation of many small ops costs, eagerly, one dispatch and one pass over
memory per op: batch normalisation in training is about 10 ops forward and 20 backward
(its statistics, the normalisation, their gradients), where staged the same ops fuse into
three or four loops, an order of magnitude faster at a convnet's sizes and several times
faster even at batch 1 (forward and backward under a tape). A `Composite` wraps such a
function so that users' eager code gets the staged speed without decorating anything:

- while tracing (`sf.function`), its ops are traced inline, so the outer function's passes
  fuse them with their neighbours, as if the composite were not there;
- eagerly, it runs as a staged function compiled once per input signature (dtypes and
  shapes), under a tape as one op whose gradient is the staged backward; nested tapes
  (higher-order gradients) replay its ops one by one, as for any staged function.

The runner (`composite_runner`) compiles in the background and answers None meanwhile;
then, and where ``sf.config.eager_compile`` is False or a tensor lives on another device,
the ops run one by one, with the same results to rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.core import config, context, devices
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace
from stageflow.models.composite_runner import RUNNER

__all__ = ["Composite"]


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
        if (config.eager_compile
                and not isinstance(context.current_trace(), GraphTrace)
                and devices.current() in (None, devices.HOST)
                and all(type(t) is Tensor or t is None for t in tensors)):
            results = RUNNER(self, tensors)
            if results is not None:
                return results
        return self.function(*tensors)

    def __repr__(self) -> str:
        return f"<composite {self.name}>"
