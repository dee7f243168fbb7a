"""Ops about values rather than arithmetic: calls, gradient stops, device copies.

Graph functions compose by a call op rather than by inlining (the paper's figure 2), so a
function staged once is compiled once however many callers it has; an optimisation pass may
inline small callees. A device copy is an op too, so that a copy made inside a staged
function shows in its IR and a gradient flows back across it to the source device.
"""

from __future__ import annotations

from typing import Any

from stageflow.core.dims import same_dims
from stageflow.core.op_facts import Cost, Effect, Family, LoweredBy, Memory
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.primitives.autodiff import floating_only


def _accepts(expected: Any, given: Any) -> bool:
    """Whether a parameter of type `expected` takes an operand of type `given`: the same
    type, or a shaped one whose dims are known where the parameter's are unknown (an
    ``input_signature`` with None dims called on a tensor of static shape)."""
    if expected == given:
        return True
    if not (isinstance(expected, ShapedType) and isinstance(given, ShapedType)):
        return False
    return (expected.dtype == given.dtype and len(expected.shape) == len(given.shape)
            and all(e is None or e == g
                    for e, g in zip(expected.shape, given.shape, strict=True)))


def _call_rule(*types: ShapedType, callee: Any) -> tuple:
    expected = [v.type for v in callee.graph.all_inputs]
    if len(types) != len(expected) or not all(
        _accepts(e, t) for e, t in zip(expected, types, strict=True)
    ):
        raise TypeError(f"@{callee.name} takes {[str(t) for t in expected]}, "
                        f"got {[str(t) for t in types]}")
    return tuple(v.type for v in callee.graph.outputs)


def _call(*values: Any, callee: Any) -> list:
    return callee.program.run(list(values))


call_p = Primitive(
    "call",
    shape_rule=_call_rule,
    kernel=_call,
    summary="run another graph function on the operands (its arguments, then its captures)",
    multiple_results=True,
    effects=Effect.CALLS,  # the callee's, whatever they are
    family=Family.FUNCTIONAL, cost=Cost.STATE, lowered_by=LoweredBy.PROGRAM,
)


stop_gradient_p = Primitive(
    "stop_gradient",
    shape_rule=lambda x: x,
    kernel=lambda x: x,
    dims=same_dims,
    summary="x itself, as a constant to gradient tapes",
    family=Family.FUNCTIONAL, memory=Memory.ALIAS, cost=Cost.MOVEMENT,
    lowered_by=LoweredBy.PROGRAM,
)
stop_gradient_p.def_nondifferentiable()


device_copy_p = Primitive(
    "device_copy",
    shape_rule=lambda x, *, device: x,
    kernel=lambda x, *, device: x,
    dims=same_dims,
    summary="x on device `device`: a copy where that device's memory is another, the same "
            "bytes in a host program (logical CPU devices share the host's memory)",
    family=Family.FUNCTIONAL, memory=Memory.ALIAS, cost=Cost.MOVEMENT,
    lowered_by=LoweredBy.PROGRAM,
)


@device_copy_p.def_vjp
@floating_only
def _device_copy_vjp(cotangents, inputs, outputs, *, device):
    return [device_copy_p.bind(cotangents[0], device=inputs[0].device)]
