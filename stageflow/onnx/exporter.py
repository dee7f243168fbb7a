"""`sf.onnx.export`: a staged function written as an ONNX model.

The export reads the traced graph of the function's concrete function (the equations
tracing recorded, before stageflow's own passes): each equation becomes the ONNX nodes of
its primitive's rule (`stageflow.onnx.export_ops`), `sf.cond` and `sf.switch_case` become
``If`` (a switch: one ``If`` per branch but the last, which also takes an index out of
range, as stageflow does), `sf.while_loop` becomes ``Loop`` (its condition computed before
the loop and again at the end of the body), and a call to another staged function is
written inline. Constants and captured tensors become initializers, and so do the
variables the function reads, with their value at export time: an ONNX model holds no
state, so a function that assigns a variable or draws random numbers is refused, as is any
op without a rule, with the op's name and the user's source line. Complex values are
written as their parts (`onnx.export_complex`); an op on bfloat16 computes in float32,
rounded once, as stageflow's kernels do. Each node's doc_string is the user's line.

    model = sf.onnx.export(f, [sf.TensorSpec([None, 784], sf.float32)], "f.onnx")
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

import onnx
from onnx import helper

from stageflow.core import dtypes
from stageflow.core.primitive import Primitive, ResourceType, ShapedType
from stageflow.frontend.graph import Equation, Graph, Value
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.onnx.converters import OnnxError
from stageflow.onnx.export_builder import Builder, element_type
from stageflow.onnx.export_complex import COMPLEX_RULES, takes_complex
from stageflow.onnx.export_ops import RULES
from stageflow.primitives import (
    control,
    elementwise,
    factorizations,
    functional,
    random,
    state,
    structural,
)
from stageflow.staging.concrete import ConcreteFunction
from stageflow.staging.function import Function, function

__all__ = ["DEFAULT_OPSET", "MIN_OPSET", "export", "export_concrete", "refusal"]

DEFAULT_OPSET = 28  # the newest ONNX Runtime 1.32 runs
MIN_OPSET = 18  # the rules' forms: axes and pads as inputs

_STATE = ("an ONNX model holds no state: export a function that returns the new value "
          "instead of assigning it")
_REFUSALS: dict[Primitive, str] = {
    state.assign_variable_p: _STATE,
    random.random_bits_p: "random draws advance a generator's state, which an ONNX model "
                          "cannot hold: pass the random values in as an argument",
    state.print_p: "ONNX has no op that prints: remove the sf.print",
    control.py_func_p: "it calls back into Python, which an ONNX model cannot",
    **dict.fromkeys((factorizations.cholesky_p, factorizations.inv_p, factorizations.qr_p,
                     factorizations.eigh_p, factorizations.svd_p, factorizations.solve_p,
                     factorizations.slogdet_p, factorizations.triangular_solve_p),
                    "ONNX has no operator for this factorization"),
}


def refusal(primitive: Primitive) -> str | None:
    """Why `primitive` cannot be exported, or None where it has a rule."""
    if primitive in RULES or primitive in COMPLEX_RULES or primitive in (
            control.cond_p, control.while_p, functional.call_p, state.read_variable_p):
        return None
    return _REFUSALS.get(primitive, "it has no ONNX rule yet")


def export(staged: Any, input_signature: Sequence[TensorSpec] | None = None,
           path: str | os.PathLike | None = None, opset: int | None = None) -> onnx.ModelProto:
    """Write `staged` (an `sf.function`, or a plain function, which is wrapped in one)
    traced for `input_signature` (default: the function's own) as an ONNX model to `path`
    (when given); the model, which `onnx.checker.check_model(model, full_check=True)`
    accepts. Unknown dims (None) stay symbolic; the inputs are named by the specs' names,
    else by the function's parameters. `opset`: the ONNX opset to write, 18 or later
    (default 28)."""
    if not isinstance(staged, Function):
        if not callable(staged):
            raise TypeError(f"sf.onnx.export takes a staged function, got {staged!r}")
        staged = function(staged)
    if input_signature is None:
        input_signature = staged.input_signature
        if input_signature is None:
            raise TypeError("sf.onnx.export: give an input_signature (the function has none)")
    specs = list(input_signature)
    if not all(isinstance(spec, TensorSpec) for spec in specs):
        raise TypeError("sf.onnx.export: input_signature must be a list of sf.TensorSpec")
    names = _parameter_names(staged.python_function, len(specs))
    specs = [spec if spec.name or name is None else TensorSpec(spec.shape, spec.dtype, name)
             for spec, name in zip(specs, names, strict=True)]
    model = export_concrete(staged.get_concrete_function(*specs), specs, opset=opset)
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model


def export_concrete(concrete: ConcreteFunction, specs: Sequence[TensorSpec] = (), *,
                    opset: int | None = None) -> onnx.ModelProto:
    """The checked ONNX model of one concrete function; `specs` name its inputs."""
    opset = DEFAULT_OPSET if opset is None else opset
    if not MIN_OPSET <= opset <= DEFAULT_OPSET:
        raise ValueError(f"sf.onnx.export writes opsets {MIN_OPSET} to {DEFAULT_OPSET}, "
                         f"not {opset}")
    graph = _Writer(Builder(opset)).graph(concrete, list(specs))
    imports = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=imports, producer_name="stageflow",
                              ir_version=helper.find_min_ir_version_for(imports))
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        raise OnnxError(f"sf.onnx.export wrote a model ONNX's checker rejects (a bug of the "
                        f"exporter): {error}") from None
    return model


def _parameter_names(python_function: Any, count: int) -> list[str | None]:
    """The names of the first `count` positional parameters of `python_function`, where it
    has that many (None for each where it does not: a lambda taking *args)."""
    try:
        parameters = list(inspect.signature(python_function).parameters.values())
    except (TypeError, ValueError):
        return [None] * count
    positional = [p.name for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return positional[:count] if len(positional) >= count else [None] * count


def _value_info(name: str, type_: ShapedType) -> onnx.ValueInfoProto:
    """A complex value is its parts (`onnx.export_complex`)."""
    if dtypes.is_complex(type_.dtype):
        return helper.make_tensor_value_info(
            name, element_type(dtypes.real_dtype(type_.dtype)), [*type_.shape, 2])
    return helper.make_tensor_value_info(name, element_type(type_.dtype), list(type_.shape))


class _Writer:
    """Walks a graph function and its regions, writing their equations through `Builder`;
    `names` maps each value to its ONNX name, `variables` each variable handle to its
    variable."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.names: dict[Value, str] = {}
        self.variables: dict[Value, Variable] = {}

    def graph(self, concrete: ConcreteFunction, specs: list[TensorSpec]) -> onnx.GraphProto:
        graph = concrete.graph
        inputs = []
        for position, value in enumerate(graph.inputs):
            if isinstance(value.type, ResourceType):
                raise OnnxError("sf.onnx.export: a variable passed as an argument cannot be "
                                "an ONNX input; let the function read it from its scope")
            spec = specs[position] if position < len(specs) else None
            name = spec.name if spec is not None and spec.name else f"input_{position}"
            self.names[value] = name
            inputs.append(_value_info(name, value.type))
        for capture in graph.captures:
            source = capture.source
            if isinstance(source, Variable):
                self.variables[capture.value] = source
            elif isinstance(source, Tensor):
                self.names[capture.value] = self.b.const(source.numpy())
            else:
                raise OnnxError(f"sf.onnx.export: {concrete.name} captured {source!r}, "
                                f"which has no value outside the trace it came from")
        self.equations(graph.equations)
        outputs = []
        for position, value in enumerate(graph.outputs):
            name = f"output_{position}"
            self.b.scopes[-1].append(helper.make_node("Identity", [self.names[value]], [name],
                                                      name=self.b.fresh("Identity")))
            outputs.append(_value_info(name, value.type))
        used = _used_names(self.b.scopes[-1])
        initializers = [i for i in self.b.initializers if i.name in used]
        return helper.make_graph(self.b.scopes[-1], concrete.name, inputs, outputs,
                                 initializer=initializers)

    def equations(self, equations: list[Equation]) -> None:
        for eq in equations:
            self.locate(eq)
            try:
                results = self.equation(eq)
            except NotImplementedError as error:
                raise _error(eq, str(error)) from None
            self.names.update(zip(eq.outputs, results, strict=True))

    def equation(self, eq: Equation) -> list[str]:
        if eq.primitive is state.read_variable_p:
            return [self.b.const(self.variables[eq.inputs[0]].numpy())]
        if eq.primitive is control.cond_p:
            return self.cond(eq)
        if eq.primitive is control.while_p:
            return self.loop(eq)
        if eq.primitive is functional.call_p:
            callee = eq.params["callee"].graph
            count = len(callee.inputs)
            return self.inline(callee, [self.names[v] for v in eq.inputs[:count]],
                               eq.inputs[count:])
        rule = RULES.get(eq.primitive)
        if takes_complex(eq):
            rule = COMPLEX_RULES.get(eq.primitive)
            if rule is None:
                raise _error(eq, "it has no ONNX rule for complex values yet")
        if rule is None:
            raise _error(eq, refusal(eq.primitive) or "")
        names = [self.names[v] for v in eq.inputs]
        types = [getattr(v.type, "dtype", None) for v in (*eq.inputs, *eq.outputs)]
        if dtypes.bfloat16 in types and eq.primitive not in (elementwise.cast_p,
                                                              structural.constant_p):
            return self.in_float32(eq, rule, names)
        results = rule(self.b, eq, *names)
        return [results] if isinstance(results, str) else list(results)

    def in_float32(self, eq: Equation, rule: Callable[..., Any], names: list[str]
                   ) -> list[str]:
        """`eq` computed in float32 where it takes or gives bfloat16 (ONNX Runtime has no
        bfloat16 arithmetic): its bfloat16 operands widened (exactly), each such result
        rounded once, as stageflow's bfloat16 kernels round each op's float32 result."""
        def wide(value: Value) -> Value:
            return Value(ShapedType(value.type.shape, dtypes.float32)) \
                if value.type.dtype == dtypes.bfloat16 else value

        shadow = Equation(eq.primitive, [wide(v) for v in eq.inputs], eq.params,
                          [wide(v) for v in eq.outputs], eq.location)
        operands = [self.b.cast(name, v.type.dtype, w.type.dtype)
                    for name, v, w in zip(names, eq.inputs, shadow.inputs, strict=True)]
        results = rule(self.b, shadow, *operands)
        results = [results] if isinstance(results, str) else list(results)
        return [self.b.cast(name, w.type.dtype, v.type.dtype)
                for name, v, w in zip(results, eq.outputs, shadow.outputs, strict=True)]

    def locate(self, eq: Equation) -> None:
        """Mark the nodes written next with `eq`'s source line (again after a region's)."""
        self.b.location = "" if eq.location is None else str(eq.location)

    def bind(self, value: Value, outer: Value) -> None:
        """`value` (a region's capture) stands for `outer`, a value of the enclosing scope."""
        if outer in self.variables:
            self.variables[value] = self.variables[outer]
        else:
            self.names[value] = self.names[outer]

    def inline(self, graph: Graph, inputs: list[str], captured: Sequence[Value]) -> list[str]:
        """Write `graph`'s equations into the current scope: its inputs are `inputs`, its
        captures the enclosing scope's values `captured`; its outputs' names."""
        self.names.update(zip(graph.inputs, inputs, strict=True))
        for capture, outer in zip(graph.captures, captured, strict=True):
            self.bind(capture.value, outer)
        self.equations(graph.equations)
        return [self.names[v] for v in graph.outputs]

    def subgraph(self, name: str, inputs: list[onnx.ValueInfoProto],
                 body: Callable[[], list[str]], types: list[ShapedType]) -> onnx.GraphProto:
        """A subgraph (a branch, a loop body) whose nodes `body` writes; its results, each
        through an Identity, are the subgraph's outputs of `types`."""
        self.b.scopes.append([])
        results = body()
        outputs = []
        for result, type_ in zip(results, types, strict=True):
            output = self.b.op("Identity", result)
            outputs.append(_value_info(output, type_))
        return helper.make_graph(self.b.scopes.pop(), self.b.fresh(name), inputs, outputs)

    def cond(self, eq: Equation) -> list[str]:
        branches: tuple[Graph, ...] = eq.params["branches"]
        operands = eq.inputs[1:]
        types = [v.type for v in eq.outputs]

        def branch(graph: Graph) -> onnx.GraphProto:
            return self.subgraph("branch", [], lambda: self.inline(graph, [], operands), types)

        index = self.names[eq.inputs[0]]
        if eq.inputs[0].type.dtype == dtypes.bool_:
            then_branch, else_branch = branch(branches[0]), branch(branches[1])
            self.locate(eq)
            return self.b.node("If", [index], len(types), then_branch=then_branch,
                               else_branch=else_branch)
        position = self.b.cast(index, eq.inputs[0].type.dtype, dtypes.int64)
        return self.switch(position, branches, operands, types, branch)

    def switch(self, position: str, branches: Sequence[Graph], operands: Sequence[Value],
               types: list[ShapedType], branch: Callable[[Graph], onnx.GraphProto]
               ) -> list[str]:
        """Branch 0 where `position` is 0, else the switch over the other branches (with
        their positions one less); the last branch alone is taken for any position."""
        if len(branches) == 1:
            return self.inline(branches[0], [], operands)
        location = self.b.location  # the switch's line, for its own nodes
        is_first = self.b.op("Equal", position, self.b.const(0, dtypes.int64))
        rest = self.b.op("Sub", position, self.b.const(1, dtypes.int64))
        others = self.subgraph("switch", [], lambda: self.switch(rest, branches[1:], operands,
                                                                  types, branch), types)
        first = branch(branches[0])
        self.b.location = location
        return self.b.node("If", [is_first], len(types), then_branch=first, else_branch=others)

    def loop(self, eq: Equation) -> list[str]:
        """Loop with no trip count: the condition on the initial values decides the first
        iteration, the body ends by computing it on the new values."""
        condition: Graph = eq.params["cond"]
        body: Graph = eq.params["body"]
        count = len(body.inputs)
        carried, invariant = eq.inputs[:count], eq.inputs[count:]
        types = [v.type for v in body.inputs]
        first = self.inline(condition, [self.names[v] for v in carried], invariant)[0]
        step, keep_going = self.b.fresh("iteration"), self.b.fresh("condition")
        values = [self.b.fresh("carried") for _ in carried]
        inputs = [_value_info(step, ShapedType((), dtypes.int64)),
                  _value_info(keep_going, ShapedType((), dtypes.bool_)),
                  *(_value_info(name, t) for name, t in zip(values, types, strict=True))]

        def iteration() -> list[str]:
            new = self.inline(body, values, invariant)
            return [self.inline(condition, new, invariant)[0], *new]

        graph = self.subgraph("body", inputs, iteration,
                              [ShapedType((), dtypes.bool_), *types])
        self.locate(eq)
        return self.b.node("Loop", ["", first, *(self.names[v] for v in carried)], count,
                           body=graph)


def _used_names(nodes: Sequence[onnx.NodeProto]) -> set[str]:
    """The names `nodes` read, those of their subgraphs included (initializers a rule made
    and no node uses, a captured tensor the function never reads, are left out)."""
    used: set[str] = set()
    for node in nodes:
        used.update(node.input)
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                used |= _used_names(attribute.g.node)
    return used


def _error(eq: Equation, reason: str) -> OnnxError:
    where = f"\n  at {eq.location}" if eq.location is not None else ""
    return OnnxError(f"sf.onnx.export: cannot export {eq.primitive.name}: {reason}{where}")
