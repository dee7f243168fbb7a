"""The traced form of a graph function: SSA values, equations, inputs, captures, outputs.

Tracing appends one `Equation` per op to a `Graph` (a few microseconds each, like a jaxpr);
the `sf` dialect module is built from it on demand (`stageflow.ir.from_graph`) for dumps,
passes and code generation, and the interpreter runs it directly with the eager kernels.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from stageflow.core.devices import HOST
from stageflow.core.errors import KERNEL_ERRORS, located_error
from stageflow.core.op_facts import Effect
from stageflow.core.primitive import Primitive, ResourceType, ShapedType
from stageflow.core.source import SourceLocation
from stageflow.primitives.control import is_named

Type = ShapedType | ResourceType

_ids = itertools.count()


@dataclass(eq=False)
class Value:
    """An SSA value of a graph; identity is equality."""

    type: Type
    id: int = field(default_factory=lambda: next(_ids))
    device: str | None = None  # set where a scope inside the trace placed its op

    def __repr__(self) -> str:
        return f"%{self.id}:{self.type}"


@dataclass(eq=False)
class Equation:
    """One op application: `outputs = primitive(*inputs, **params)` at `location`."""

    primitive: Primitive
    inputs: list[Value]
    params: dict[str, Any]
    outputs: list[Value]
    location: SourceLocation | None
    device: str | None = None  # the device a `sf.device` scope inside the trace named


@dataclass(eq=False)
class Capture:
    """A hidden input: an eager tensor (by value), a variable (by reference) or a value of
    an enclosing trace, passed to the graph function by the runtime at every call."""

    value: Value
    source: Any


@dataclass(eq=False)
class Graph:
    """A graph function: typed inputs (arguments, then captures), equations, outputs."""

    name: str
    device: str = HOST  # where the function runs: the caller's scope, else its inputs'
    inputs: list[Value] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    equations: list[Equation] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)

    @property
    def all_inputs(self) -> list[Value]:
        return self.inputs + [c.value for c in self.captures]

    def run(self, values: list[Any]) -> list[Any]:
        """Run the equations with their eager kernels on values for `all_inputs` (how a
        region of a control-flow op runs outside compiled code)."""
        env: dict[int, Any] = {id(v): x for v, x in zip(self.all_inputs, values, strict=True)}
        for eq in self.equations:
            results = run_equation(eq, [env[id(v)] for v in eq.inputs])
            env.update(zip(map(id, eq.outputs), results, strict=True))
        return [env[id(v)] for v in self.outputs]

    def all_equations(self) -> list[Equation]:
        """Every equation of the graph, of its regions and of the functions it calls."""
        found: list[Equation] = []
        for eq in self.equations:
            found.append(eq)
            for region in regions_of(eq):
                found.extend(region.all_equations())
        for callee in self.callees():
            found.extend(callee.graph.equations)
            for eq in callee.graph.equations:
                for region in regions_of(eq):
                    found.extend(region.all_equations())
        return found

    def python_callback(self, named_ok: bool = False) -> Equation | None:
        """The first equation anywhere in the graph that calls back into Python (a
        `py_func`): a call of a Python function of this process, which a saved or
        ahead-of-time compiled function cannot hold. With `named_ok`, callbacks registered
        by name are left out: a worker process that registered them runs them too."""
        return next((eq for eq in self.all_equations()
                     if Effect.CALLBACK in eq.primitive.effects
                     and not (named_ok and is_named(eq.params.get("func", "")))), None)

    def callees(self) -> list[Any]:
        """The concrete functions this graph calls, directly or indirectly, each once."""
        seen: dict[int, Any] = {}
        for eq in self.equations:
            callee = eq.params.get("callee")
            if callee is not None and id(callee) not in seen:
                seen[id(callee)] = callee
                for inner in callee.graph.callees():
                    seen.setdefault(id(inner), inner)
            for region in regions_of(eq):
                for inner in region.callees():
                    seen.setdefault(id(inner), inner)
        return list(seen.values())


def regions_of(eq: Equation) -> list[Graph]:
    """The graphs an equation holds as regions (a branch, a loop condition or body)."""
    found: list[Graph] = []
    for value in eq.params.values():
        if isinstance(value, Graph):
            found.append(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], Graph):
            found.extend(value)
    return found


def run_equation(eq: Equation, values: list[Any]) -> list[Any]:
    """Apply one equation's kernel; its results as a list."""
    try:
        result = eq.primitive.kernel(*values, **eq.params)
    except KERNEL_ERRORS as error:
        raise located_error(eq.primitive.name, eq.location, error) from None
    return list(result) if eq.primitive.multiple_results else [result]
