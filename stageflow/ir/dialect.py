"""The `sf` dialect: one IRDL op per primitive, generated from the primitive registry.

The op set is defined once, in `stageflow.frontend.primitives`; this module derives each op
from its `Primitive` instead of restating it. The shape rule's signature gives the op's
shape: positional parameters become operands (``*xs`` a variadic operand), keyword-only
parameters become attributes (optional when they have a default), and
``multiple_results`` primitives get a variadic result. The family base class (elementwise
unary/binary/ternary, conversion, reduction, structural, linalg, random) is chosen from the
primitive's module and arity, so passes can match whole families with ``isinstance``.

Every op shares one verifier (`SfOp.verify_`): it decodes the attributes to params, turns
the operand types into `ShapedType`s, runs the primitive's own shape rule and checks that
the declared result types are compatible with what the rule infers. There is no second
copy of any shape logic here. Every op also shares one textual syntax::

    %2 = sf.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %3 = sf.reduce_sum %2 {axes = [0], keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
    %4 = sf.iota {shape = [4], dtype = i32, dimension = 0} : () -> tensor<4xi32>
    %5 = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>

Adding a primitive needs no change here: `sf_dialect()` picks up whatever is registered.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any, ClassVar, Self

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from stageflow.frontend.primitives.base import REGISTRY, Primitive, ShapedType
from stageflow.ir.attributes import decode, print_attr_dict
from stageflow.ir.types import compatible, dtype_of, shaped_type, tensor_type


def load_primitives() -> None:
    """Import every module of `stageflow.frontend.primitives`, so REGISTRY is complete."""
    package = importlib.import_module("stageflow.frontend.primitives")
    loader = getattr(package, "load_all", None)
    if callable(loader):
        loader()
        return
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")


class SfOp(IRDLOperation):
    """Base of the ops generated from primitives: the shared verifier and syntax.

    ``PRIMITIVE`` is the op's primitive, ``PARAMS`` the names of its keyword params (the
    attributes the shape rule reads), ``ANY_PARAMS`` whether the rule takes ``**params``
    (then every attribute is passed to it).
    """

    PRIMITIVE: ClassVar[Primitive]
    PARAMS: ClassVar[tuple[str, ...]] = ()
    ANY_PARAMS: ClassVar[bool] = False

    @property
    def primitive(self) -> Primitive:
        return type(self).PRIMITIVE

    def params(self) -> dict[str, Any]:
        """The op's attributes decoded to the primitive's params (``TypeError`` if invalid)."""
        names = self.attributes if type(self).ANY_PARAMS else type(self).PARAMS
        return {name: decode(self.attributes[name]) for name in names if name in self.attributes}

    def operand_avals(self) -> list[ShapedType]:
        return [shaped_type(operand.type) for operand in self.operands]

    def infer_result_types(self) -> tuple[ShapedType, ...]:
        """Run the primitive's shape rule on the operand types and attributes."""
        inferred = self.primitive.shape_rule(*self.operand_avals(), **self.params())
        return tuple(inferred) if isinstance(inferred, tuple) else (inferred,)

    def verify_(self) -> None:
        try:
            inferred = self.infer_result_types()
            declared = [shaped_type(result.type) for result in self.results]
        except (ValueError, TypeError, IndexError, KeyError) as error:
            raise VerifyException(f"'{self.name}' op {error}") from None
        if len(declared) != len(inferred):
            raise VerifyException(
                f"'{self.name}' op declares {len(declared)} results, "
                f"the shape rule gives {len(inferred)}"
            )
        for index, (have, want) in enumerate(zip(declared, inferred, strict=True)):
            if not compatible(have, want):
                raise VerifyException(
                    f"'{self.name}' op result #{index} has type {tensor_type(have)} but the "
                    f"operands and attributes give {tensor_type(want)}"
                )

    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        if self.attributes:
            printer.print_string(" ")
            print_attr_dict(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        position = parser.pos
        unresolved: list[UnresolvedOperand] = (
            parser.parse_optional_undelimited_comma_separated_list(
                parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
            )
            or []
        )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        function_type = parser.parse_function_type()
        operands = parser.resolve_operands(unresolved, function_type.inputs.data, position)
        return cls.create(
            operands=operands, result_types=function_type.outputs.data, attributes=attributes
        )


class ElementwiseOp(SfOp):
    """Applied element by element (binary and ternary ops broadcast like NumPy)."""


class UnaryElementwiseOp(ElementwiseOp):
    """One operand, same type out (negative, exp, ...)."""


class BinaryElementwiseOp(ElementwiseOp):
    """Two broadcasting operands of one dtype (arithmetic, logic, comparisons)."""


class TernaryElementwiseOp(ElementwiseOp):
    """Three broadcasting operands (select)."""


class ConversionOp(ElementwiseOp):
    """Elementwise with params, changing the dtype (cast)."""


class ReductionOp(SfOp):
    """Reduces over `axes` (or one `axis`)."""


class StructuralOp(SfOp):
    """Moves or replicates elements without arithmetic (reshape, slice, gather, ...)."""


class LinalgOp(SfOp):
    """Contractions (matmul, convolutions)."""


class RandomOp(SfOp):
    """Random number generation."""


# The family of a primitive's op, by the last component of the module defining its rule.
FAMILIES: dict[str, type[SfOp]] = {
    "reduction": ReductionOp,
    "structural": StructuralOp,
    "linalg": LinalgOp,
    "conv": LinalgOp,
    "random": RandomOp,
}
_ELEMENTWISE_BY_ARITY: dict[int, type[SfOp]] = {
    1: UnaryElementwiseOp,
    2: BinaryElementwiseOp,
    3: TernaryElementwiseOp,
}
_RESERVED = set(dir(IRDLOperation)) | {"name", "traits", "irdl_options", "assembly_format"}


def _family(primitive: Primitive, arity: int | None, has_params: bool) -> type[SfOp]:
    module = primitive.shape_rule.__module__.rsplit(".", 1)[-1]
    if module == "elementwise":
        if has_params and arity == 1:
            return ConversionOp
        return _ELEMENTWISE_BY_ARITY.get(arity or 0, ElementwiseOp)
    return FAMILIES.get(module, SfOp)


def _class_name(primitive_name: str) -> str:
    return "".join(part.capitalize() for part in primitive_name.split("_")) + "Op"


def _field(name: str) -> str:
    return f"{name}_" if name in _RESERVED else name


def define_op(primitive: Primitive) -> type[SfOp]:
    """Build the IRDL op class of a primitive from its shape rule's signature."""
    fields: dict[str, Any] = {"name": f"sf.{primitive.name}"}
    arity: int | None = 0
    params: list[str] = []
    any_params = False
    for parameter in inspect.signature(primitive.shape_rule).parameters.values():
        kind = parameter.kind
        if kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            fields[_field(parameter.name)] = operand_def(TensorType)
            arity = None if arity is None else arity + 1
        elif kind == parameter.VAR_POSITIONAL:
            fields[_field(parameter.name)] = var_operand_def(TensorType)
            arity = None
        elif kind == parameter.KEYWORD_ONLY:
            required = parameter.default is parameter.empty
            definition = attr_def if required else opt_attr_def
            fields[_field(parameter.name)] = definition(Attribute, attr_name=parameter.name)
            params.append(parameter.name)
        else:
            any_params = True
    if primitive.multiple_results:
        fields["outputs"] = var_result_def(TensorType)
    else:
        fields["result"] = result_def(TensorType)
    fields["traits"] = traits_def() if primitive.stateful else traits_def(Pure())
    fields["PRIMITIVE"] = primitive
    fields["PARAMS"] = tuple(params)
    fields["ANY_PARAMS"] = any_params
    fields["__annotations__"] = {
        "PRIMITIVE": "ClassVar[Primitive]",
        "PARAMS": "ClassVar[tuple[str, ...]]",
        "ANY_PARAMS": "ClassVar[bool]",
    }
    fields["__doc__"] = f"``sf.{primitive.name}``: {primitive.summary}."
    fields["__module__"] = __name__
    family = _family(primitive, arity, bool(params) or any_params)
    return irdl_op_definition(type(_class_name(primitive.name), (family,), fields))


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """``sf.constant``: a literal tensor, ``%0 = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>``.

    Meant for small tensors (the tracer's captured scalars and short literals); every
    element is printed.
    """

    name = "sf.constant"
    value = attr_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ConstantLike())
    assembly_format = "$value attr-dict"

    def __init__(self, value: DenseIntOrFPElementsAttr) -> None:
        super().__init__(result_types=[value.type], attributes={"value": value})

    def verify_(self) -> None:
        if self.value.type != self.result.type:
            raise VerifyException(
                f"'{self.name}' op value has type {self.value.type} but the result is "
                f"{self.result.type}"
            )
        try:
            dtype_of(self.value.get_element_type())
        except TypeError as error:
            raise VerifyException(f"'{self.name}' op {error}") from None


OPS: dict[str, type[SfOp]] = {}


def op_class(primitive: Primitive | str) -> type[SfOp]:
    """The op class of a primitive (or primitive name), defining it on first use."""
    if isinstance(primitive, str):
        if primitive not in REGISTRY:
            load_primitives()
        primitive = REGISTRY[primitive]
    cls = OPS.get(primitive.name)
    if cls is None or cls.PRIMITIVE is not primitive:
        cls = OPS[primitive.name] = define_op(primitive)
    return cls


_dialect_cache: tuple[int, Dialect] | None = None


def sf_dialect() -> Dialect:
    """The `sf` dialect with an op for every registered primitive, plus `sf.constant`."""
    global _dialect_cache
    load_primitives()
    if _dialect_cache is None or _dialect_cache[0] != len(REGISTRY):
        ops: list[type[Operation]] = [ConstantOp]
        ops += [op_class(primitive) for primitive in REGISTRY.values()]
        _dialect_cache = (len(REGISTRY), Dialect("sf", ops, []))
    return _dialect_cache[1]

