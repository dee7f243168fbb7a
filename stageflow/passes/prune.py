"""`prune`: remove ops whose results nobody uses, transitively; effects are kept.

Tracing records every op the Python code ran, including values it computed and dropped
(a debugging ``y = f(x)`` never returned, the unused half of ``random_bits``). Pruning is
xDSL's liveness-based dead-code elimination (`region_dce`): an op is live if it may have an
effect or one of its results feeds a live op. Which ops may have an effect is read from
their traits, and the dialect gives the ``Pure`` trait to exactly the primitives that are not
``stateful``, so ``sf.assign_variable``, ``sf.print``, ``sf.read_variable`` and ``sf.call``
(whose callee may have effects) are always kept, as are terminators and functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.transforms.dead_code_elimination import region_dce

from stageflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class Prune(ModulePass):
    """Remove ops whose results are unused, transitively, unless they are stateful.

    Before::

        func.func @f(%x: tensor<4xf32>, %v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
          %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
          %1 = sf.negative %0 : (tensor<4xf32>) -> tensor<4xf32>
          sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
          func.return %x : tensor<4xf32>
        }

    After: ``sf.exp`` and ``sf.negative`` are gone, ``sf.assign_variable`` stays.
    It does not remove unused functions or block arguments (the signature is an ABI).
    """

    name = "prune"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        region_dce(op.body)
