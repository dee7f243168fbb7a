"""The `sf` dialect: one IRDL op per primitive, generated from the primitive registry.

The op set is defined once, in `stageflow.primitives`; this module derives each op
from its `Primitive` instead of restating it. The shape rule's signature gives the op's
shape: positional parameters become operands (``*xs`` a variadic operand), keyword-only
parameters become attributes (optional when they have a default), and
``multiple_results`` primitives get a variadic result. The family base class (elementwise
unary/binary/ternary, conversion, reduction, structural, linalg, random, state, functional)
is the primitive's declared `family`, refined by arity for elementwise ops, so passes can
match whole families with ``isinstance``. Stateful primitives' ops lack the ``Pure``
trait, so CSE and dead-code removal keep them.

Every op shares one verifier (`SfOp.verify_`): it decodes the attributes to params, turns
the operand types into `ShapedType`s, runs the primitive's own shape rule and checks that
the declared result types are compatible with what the rule infers (same dtype and rank,
dims equal or unknown on either side). There is no second copy of any shape logic here.
Every op also shares one textual syntax (MLIR's, with the params in the attr-dict)::

    %2 = sf.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %3 = sf.reduce_sum %2 {axes = [0], keepdims = false} : (tensor<4x8xf32>) -> tensor<8xf32>
    %4 = sf.iota {shape = [4], dtype = i32, dimension = 0} : () -> tensor<4xi32>
    %5 = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>

Adding a primitive needs no change here: `sf_dialect()` derives an op for each one
`stageflow.primitives` registers, every one of them once this module is imported.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, ClassVar, Self

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Dialect, Operation
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    ParamAttrConstraint,
    VarConstraint,
    attr_def,
    base,
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
from xdsl.traits import ConstantLike, Pure, SymbolTable
from xdsl.utils.exceptions import VerifyException

from stageflow import primitives as _primitives  # noqa: F401 - registers every primitive
from stageflow.core.op_facts import Family
from stageflow.core.primitive import REGISTRY, Primitive
from stageflow.ir.attributes import SymbolRef, decode, print_attr_dict
from stageflow.ir.control import CondOp, ControlOp, WhileOp, YieldOp
from stageflow.ir.types import (
    AbstractValue,
    ResourceTensorType,
    abstract_value,
    compatible,
    ir_type,
    shaped_type,
)

# Operands and results: tensors, or handles to variables.
VALUE_TYPE = base(TensorType) | base(ResourceTensorType)


# Signatures (name, operand and result types, attributes) whose shape rule has passed: the
# IR is verified after every pass, and most ops come out of a pass as they went in, so
# their rules need not run again (a third of the verification time of an MLP step).
_VERIFIED: set[tuple] = set()
_VERIFIED_MAX = 1 << 14


class SfOp(IRDLOperation):
    """Base of the ops generated from primitives: the shared verifier and syntax.

    ``PRIMITIVE`` is the op's primitive, ``PARAMS`` the names of its keyword params (the
    attributes the shape rule reads), ``ANY_PARAMS`` whether the rule takes ``**params``
    (then every attribute is passed to it).
    """

    PRIMITIVE: ClassVar[Primitive]
    PARAMS: ClassVar[tuple[str, ...]] = ()
    ANY_PARAMS: ClassVar[bool] = False
    FLAGS: ClassVar[tuple[str, ...]] = ()

    @property
    def primitive(self) -> Primitive:
        return type(self).PRIMITIVE

    def params(self) -> dict[str, Any]:
        """The op's attributes decoded to the primitive's params (``TypeError`` if invalid)."""
        names = self.attributes if type(self).ANY_PARAMS else type(self).PARAMS
        return {name: decode(self.attributes[name]) for name in names if name in self.attributes}

    def operand_avals(self) -> list[AbstractValue]:
        return [abstract_value(operand.type) for operand in self.operands]

    def infer_result_types(self) -> tuple[AbstractValue, ...]:
        """Run the primitive's shape rule on the operand types and attributes."""
        inferred = self.primitive.shape_rule(*self.operand_avals(), **self.params())
        return tuple(inferred) if isinstance(inferred, tuple) else (inferred,)

    def verify_(self) -> None:
        for name in type(self).FLAGS:  # a flag given as 7 would read as true: refuse it
            if name in self.attributes and not isinstance(_decoded(self.attributes[name]),
                                                          bool):
                raise VerifyException(f"'{self.name}' op attribute {name} must be true or "
                                      f"false, got {self.attributes[name]}")
        try:
            callees = [v for v in self.params().values() if isinstance(v, SymbolRef)]
            if callees:  # the rule needs the function itself: check against its signature
                self._verify_callees(callees)
                return
            # (ops without operands, constants among them, are cheap to check and may hold
            # large attributes, which the set would keep alive)
            signature = (self.name, tuple(self.operand_types), tuple(self.result_types),
                         tuple(sorted(self.attributes.items()))) if self.operands else None
            if signature in _VERIFIED:
                return
            declared = [abstract_value(result.type) for result in self.results]
            inferred = self.infer_result_types()
        except (ValueError, TypeError) as error:
            raise VerifyException(f"'{self.name}' op {error}") from None
        except Exception as error:  # malformed params can trip a rule anywhere
            message = f"invalid operands or params: {type(error).__name__}: {error}"
            raise VerifyException(f"'{self.name}' op {message}") from None
        if len(declared) != len(inferred):
            raise VerifyException(
                f"'{self.name}' op has {len(declared)} result(s) but the shape rule gives "
                f"{len(inferred)}"
            )
        for index, (have, want) in enumerate(zip(declared, inferred, strict=True)):
            if not compatible(have, want):
                raise VerifyException(
                    f"'{self.name}' op result #{index} has type {ir_type(have)} but the "
                    f"operands and attributes give {ir_type(want)}"
                )
        if signature is not None:
            if len(_VERIFIED) >= _VERIFIED_MAX:
                _VERIFIED.clear()
            _VERIFIED.add(signature)

    def _verify_callees(self, callees: list[SymbolRef]) -> None:
        """Results must match each referenced function's; operands the only one's inputs."""
        for callee in callees:
            function = SymbolTable.lookup_symbol(self, callee.name)
            if not isinstance(function, FuncOp):
                raise TypeError(f"@{callee.name} is not a function of this module")
            signature = function.function_type
            checks = [("results", self.result_types, signature.outputs.data)]
            if len(callees) == 1:
                checks.append(("operands", self.operand_types, signature.inputs.data))
            for what, have, want in checks:
                if list(have) != list(want):
                    raise TypeError(
                        f"{what} ({', '.join(map(str, have))}) do not match @{callee.name}'s "
                        f"({', '.join(map(str, want))})"
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
    """One operand, same type out (negative, exp, ...; abs, real and imag of a complex
    operand give its parts' type)."""


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


class StateOp(SfOp):
    """Reads and writes of variables and other effects (print); mostly stateful."""


class FunctionalOp(SfOp):
    """Ops that apply another function of the module, named by a symbol param (call)."""


# The base class of each family's ops (elementwise ones are chosen by arity).
FAMILIES: dict[Family, type[SfOp] | type[ControlOp]] = {
    Family.REDUCTION: ReductionOp,
    Family.STRUCTURAL: StructuralOp,
    Family.LINALG: LinalgOp,
    Family.RANDOM: RandomOp,
    Family.STATE: StateOp,
    Family.FUNCTIONAL: FunctionalOp,
    Family.CONTROL: ControlOp,
}
_ELEMENTWISE_BY_ARITY: dict[int, type[SfOp]] = {
    1: UnaryElementwiseOp,
    2: BinaryElementwiseOp,
    3: TernaryElementwiseOp,
}
_RESERVED = {"name", "traits", "irdl_options", "assembly_format"}


def _family(primitive: Primitive, arity: int | None, has_params: bool) -> type[SfOp]:
    """The op's base class: its family's (plain `SfOp` for a primitive declaring none)."""
    if primitive.family is Family.ELEMENTWISE:
        if has_params and arity == 1:
            return ConversionOp
        return _ELEMENTWISE_BY_ARITY.get(arity or 0, ElementwiseOp)
    return FAMILIES.get(primitive.family, SfOp)


def _class_name(primitive_name: str) -> str:
    return "".join(part.capitalize() for part in primitive_name.split("_")) + "Op"


def _field(name: str) -> str:
    """The Python field for an operand or attribute, clear of the op's own methods."""
    return f"{name}_" if name in _RESERVED or hasattr(SfOp, name) else name


def _decoded(attribute: Attribute) -> Any:
    """An attribute's param value, None where it is not one."""
    try:
        return decode(attribute)
    except TypeError:
        return None


def define_op(primitive: Primitive) -> type[SfOp]:
    """Build the IRDL op class of a primitive from its shape rule's signature."""
    fields: dict[str, Any] = {"name": f"sf.{primitive.name}"}
    arity: int | None = 0
    params: list[str] = []
    flags: list[str] = []  # params the rule declares bool: `true`/`false`, nothing else
    any_params = False
    for parameter in inspect.signature(primitive.shape_rule).parameters.values():
        kind = parameter.kind
        if kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            fields[_field(parameter.name)] = operand_def(VALUE_TYPE)
            arity = None if arity is None else arity + 1
        elif kind == parameter.VAR_POSITIONAL:
            fields[_field(parameter.name)] = var_operand_def(VALUE_TYPE)
            arity = None
        elif kind == parameter.KEYWORD_ONLY:
            required = parameter.default is parameter.empty
            definition = attr_def if required else opt_attr_def
            fields[_field(parameter.name)] = definition(Attribute, attr_name=parameter.name)
            params.append(parameter.name)
            if parameter.annotation in (bool, "bool"):
                flags.append(parameter.name)
        else:
            any_params = True
    if primitive.multiple_results:
        fields["outputs"] = var_result_def(VALUE_TYPE)
    else:
        fields["result"] = result_def(VALUE_TYPE)
    fields["traits"] = traits_def() if primitive.stateful else traits_def(Pure())
    fields["PRIMITIVE"] = primitive
    fields["PARAMS"] = tuple(params)
    fields["FLAGS"] = tuple(flags)
    fields["ANY_PARAMS"] = any_params
    fields["__annotations__"] = {
        "PRIMITIVE": "ClassVar[Primitive]",
        "PARAMS": "ClassVar[tuple[str, ...]]",
        "FLAGS": "ClassVar[tuple[str, ...]]",
        "ANY_PARAMS": "ClassVar[bool]",
    }
    fields["__doc__"] = f"``sf.{primitive.name}``: {primitive.summary}."
    fields["__module__"] = __name__
    family = _family(primitive, arity, bool(params) or any_params)
    return irdl_op_definition(type(_class_name(primitive.name), (family,), fields))


@irdl_op_definition
class ConstantOp(StructuralOp):
    """``sf.constant``: a literal tensor, ``%0 = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>``.

    The op of the `constant` primitive (its ``value`` param, an array, is the dense
    attribute), with MLIR's constant syntax instead of the generic one. Meant for small
    tensors (captured scalars, short literals): every element is printed.
    """

    name = "sf.constant"
    T: ClassVar = VarConstraint("T", base(TensorType))
    value = attr_def(ParamAttrConstraint(DenseIntOrFPElementsAttr, (T, AnyAttr())))
    result = result_def(T)
    traits = traits_def(Pure(), ConstantLike())
    PARAMS: ClassVar[tuple[str, ...]] = ("value",)

    def __init__(self, value: DenseIntOrFPElementsAttr) -> None:
        super().__init__(result_types=[value.type], attributes={"value": value})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        others = {k: v for k, v in self.attributes.items() if k != "value"}
        if others:
            printer.print_string(" ")
            print_attr_dict(printer, others)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        position = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("expected a dense<...> : tensor<...> value", position)
        attributes = {"value": value, **parser.parse_optional_attr_dict()}
        return cls.create(result_types=[value.type], attributes=attributes)

    @property
    def primitive(self) -> Primitive:
        return REGISTRY["constant"]

    def infer_result_types(self) -> tuple[AbstractValue, ...]:
        if "constant" not in REGISTRY:  # no such primitive: the value's type is the type
            return (shaped_type(self.value.type),)
        return super().infer_result_types()


OPS: dict[str, type[SfOp]] = {}
# Primitives whose op is written by hand rather than generated: their syntax or regions.
HAND_WRITTEN: dict[str, type[Operation]] = {"constant": ConstantOp, "cond": CondOp,
                                             "while": WhileOp}


# Defining an op class and the dialect: threads tracing at once must all get the one class
# of a primitive (two of them, each a valid op, would fail the other's isinstance checks and
# the dialect's membership).
_defining = threading.RLock()


def op_class(primitive: Primitive | str) -> type[SfOp] | type[ControlOp]:
    """The op class of a primitive (or primitive name), defining it on first use."""
    if isinstance(primitive, str):
        if primitive not in REGISTRY:
            raise KeyError(f"no primitive named {primitive!r}")
        primitive = REGISTRY[primitive]
    if primitive.name in HAND_WRITTEN:
        return HAND_WRITTEN[primitive.name]
    cls = OPS.get(primitive.name)
    if cls is None or cls.PRIMITIVE is not primitive:
        with _defining:
            cls = OPS.get(primitive.name)
            if cls is None or cls.PRIMITIVE is not primitive:
                cls = OPS[primitive.name] = define_op(primitive)
    return cls


_dialect_cache: tuple[tuple[Primitive, ...], Dialect] | None = None


def sf_dialect() -> Dialect:
    """The `sf` dialect: an op for every registered primitive and ``sf.yield``; made again
    whenever the registry has changed (a primitive added, removed or replaced)."""
    global _dialect_cache
    registered = tuple(REGISTRY.values())
    cached = _dialect_cache
    if cached is None or cached[0] != registered:
        with _defining:
            ops = {ConstantOp, YieldOp, *(op_class(primitive) for primitive in registered)}
            ordered: list[type[Operation]] = sorted(ops, key=lambda op: op.name)
            cached = _dialect_cache = (registered, Dialect("sf", ordered, [ResourceTensorType]))
    return cached[1]

