"""Region ops: ``sf.cond``, ``sf.while`` and their terminator ``sf.yield``.

MLIR's ``scf.if``/``scf.index_switch`` and ``scf.while`` shapes: the regions read values of
the enclosing function directly (values from above), each region is one block ending in
``sf.yield``. ``sf.cond`` has one region per branch and runs the one its operand selects
(a bool picks the first region when true, the second otherwise; an integer picks that
region, the last when out of range). ``sf.while`` carries its operands through two
regions that take the loop variables as block arguments: the condition yields a bool
scalar, the body the next loop variables; the op's results are the last ones::

    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
      %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
      sf.yield %a : tensor<4xf32>
    }, {
      sf.yield %x : tensor<4xf32>
    })
    %n = sf.while %i : (tensor<i64>) -> tensor<i64> ({
    ^bb0(%k: tensor<i64>):
      %c = sf.less %k, %ten : (tensor<i64>, tensor<i64>) -> tensor<i1>
      sf.yield %c : tensor<i1>
    }, {
    ^bb0(%k: tensor<i64>):
      %k1 = sf.add %k, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
      sf.yield %k1 : tensor<i64>
    })

Their effects are their contents' (``RecursiveMemoryEffect``): a region op without
stateful ops inside is pure to `prune` and `cse`. A yielded value may have dims the op's
result leaves unknown (branches of different sizes, a loop variable whose dims change), and
so may a loop's operands, never the reverse: a declared dim is a promise the passes rely on
(`plan-buffers` sizes buffers by it), so what flows into it must keep it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Self

from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    traits_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from stageflow.ir.attributes import print_attr_dict
from stageflow.ir.types import ResourceTensorType, abstract_value
from stageflow.primitives.control import accepts

VALUE_TYPE = base(TensorType) | base(ResourceTensorType)


class ControlOp(IRDLOperation):
    """Base of the region ops: one syntax, ``sf.NAME operands {attrs} : type (regions)``."""

    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        if self.attributes:
            printer.print_string(" ")
            print_attr_dict(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.operand_types, self.result_types)
        printer.print_string(" ")
        with printer.in_parens():
            printer.print_list(self.regions, lambda r: printer.print_region(
                r, print_entry_block_args=True, print_empty_block=False))

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
        regions = parser.parse_region_list()
        return cls.create(operands=operands, result_types=function_type.outputs.data,
                          attributes=attributes, regions=regions)

    def yields(self, region: Region) -> YieldOp:
        """The terminator of `region`'s single block (checked by the verifier)."""
        block = region.block
        last = block.last_op
        assert isinstance(last, YieldOp)
        return last

    def _single_block(self, region: Region, what: str, args: Sequence[Attribute]) -> YieldOp:
        if len(region.blocks) != 1:
            raise VerifyException(f"'{self.name}' op {what} must have one block, "
                                  f"not {len(region.blocks)}")
        block = region.block
        if [a.type for a in block.args] != list(args):
            raise VerifyException(f"'{self.name}' op {what} takes ({_types(block.args)}), "
                                  f"expected ({_types(args)})")
        last = block.last_op
        if not isinstance(last, YieldOp):
            ending = f"ends in {last.name}" if last is not None else "is empty"
            raise VerifyException(f"'{self.name}' op {what} must end in sf.yield, but {ending}")
        return last

    def _check_yield(self, last: YieldOp, what: str, want: Sequence[Attribute]) -> None:
        have = list(last.operand_types)
        if not _fit(want, have):
            raise VerifyException(f"'{self.name}' op {what} yields ({_types(have)}), "
                                  f"expected ({_types(want)})")


def _types(values: Sequence[SSAValue | Attribute]) -> str:
    """Types as MLIR writes a list of them: ``tensor<i64>, tensor<4xf32>``."""
    return ", ".join(str(v.type if isinstance(v, SSAValue) else v) for v in values)


def _fit(declared: Sequence[Attribute], given: Sequence[Attribute]) -> bool:
    """Whether values of the `given` types may stand where `declared` ones are: as many,
    each of the same dtype and rank, with a dim wherever the declared type has one."""
    return len(declared) == len(given) and all(
        accepts(abstract_value(d), abstract_value(g))
        for d, g in zip(declared, given, strict=True))


@irdl_op_definition
class YieldOp(IRDLOperation):
    """``sf.yield``: the values a region of ``sf.cond`` or ``sf.while`` gives back."""

    name = "sf.yield"
    values = var_operand_def(VALUE_TYPE)
    traits = lazy_traits_def(lambda: (IsTerminator(), Pure(), HasParent(CondOp, WhileOp)))

    def __init__(self, *values: SSAValue) -> None:
        super().__init__(operands=[list(values)])

    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list(self.operand_types, printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        position = parser.pos
        unresolved = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand) or []
        types: list[Attribute] = []
        if unresolved:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                                      parser.parse_type)
        return cls(*parser.resolve_operands(unresolved, types, position))


@irdl_op_definition
class CondOp(ControlOp):
    """``sf.cond``: runs the region its operand selects (a bool: the first region when
    true; an integer: that region, the last when out of range) and returns what it yields."""

    name = "sf.cond"
    index = operand_def(base(TensorType))
    branches = var_region_def()
    outputs = var_result_def(VALUE_TYPE)
    traits = traits_def(RecursiveMemoryEffect())

    def verify_(self) -> None:
        ty = self.index.type
        assert isinstance(ty, TensorType)
        element = ty.element_type
        if ty.get_shape() != () or not isinstance(element, IntegerType):
            raise VerifyException(f"'{self.name}' op needs a bool or integer scalar, got {ty}")
        count = len(self.branches)
        if element.width.data == 1 and count != 2:
            raise VerifyException(f"'{self.name}' op with a bool predicate ({ty}) needs 2 "
                                  f"regions (true, false), not {count}")
        if count == 0:
            raise VerifyException(f"'{self.name}' op needs at least one region")
        for position, region in enumerate(self.branches):
            what = f"region #{position}"
            self._check_yield(self._single_block(region, what, []), what, self.result_types)


@irdl_op_definition
class WhileOp(ControlOp):
    """``sf.while``: loop variables through a condition region and a body region."""

    name = "sf.while"
    inits = var_operand_def(VALUE_TYPE)
    loop_regions = var_region_def()
    outputs = var_result_def(VALUE_TYPE)
    traits = traits_def(RecursiveMemoryEffect())

    @property
    def cond_region(self) -> Region:
        return self.loop_regions[0]

    @property
    def body_region(self) -> Region:
        return self.loop_regions[1]

    def verify_(self) -> None:
        carried = list(self.result_types)
        if len(self.loop_regions) != 2:
            raise VerifyException(f"'{self.name}' op needs 2 regions (condition, body), not "
                                  f"{len(self.loop_regions)}")
        if not _fit(carried, self.operand_types):
            raise VerifyException(f"'{self.name}' op carries ({_types(carried)}), its results' "
                                  f"types, but its operands are ({_types(self.operand_types)})")
        predicate = self._single_block(self.cond_region, "condition", carried)
        self._check_yield(predicate, "condition", [TensorType(IntegerType(1), [])])
        body = self._single_block(self.body_region, "body", carried)
        self._check_yield(body, "body", carried)


def nested_ops(region: Region) -> Iterator[Operation]:
    """Every op inside `region`, nested regions included."""
    for block in region.blocks:
        for op in block.ops:
            yield op
            for inner in op.regions:
                yield from nested_ops(inner)


def free_values(op: Operation) -> list[SSAValue]:
    """The values `op`'s regions read from above (defined outside `op`), each once, in
    the order they are first read: what a region op needs besides its operands."""
    inside: set[Block] = {block for region in op.regions for block in _blocks(region)}
    seen: dict[SSAValue, None] = {}
    for region in op.regions:
        for inner in nested_ops(region):
            for value in inner.operands:
                owner = value.owner
                block = owner if isinstance(owner, Block) else owner.parent_block()
                if block not in inside:
                    seen.setdefault(value, None)
    return list(seen)


def _blocks(region: Region) -> Iterator[Block]:
    for block in region.blocks:
        yield block
        for op in block.ops:
            for inner in op.regions:
                yield from _blocks(inner)
