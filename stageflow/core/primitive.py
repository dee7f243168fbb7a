"""The primitive: one definition per op, shared by every layer.

A `Primitive` holds an op's name, its shape/dtype rule, its eager NumPy kernel and the facts
other layers need about it (`stageflow.core.op_facts`: its IR family, its effects, whether
its result views an operand, its recomputation cost, its reduction kind, which part of code
generation lowers it); the gradient rule is attached beside its definition, so adding an
op touches one place per layer. `Primitive.bind` is the single dispatch point: it hands
the op to the current trace (the eager trace runs the kernel; a staging trace runs the
shape rule and appends an IR op).

A primitive's result dims are written once, as a ``dims`` function over a `DimArith`
(`stageflow.core.dims`): its shape rule interprets it on Python ints while tracing, and the
whole-function program on LLVM integers at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stageflow.core import context
from stageflow.core.dims import DimsRule
from stageflow.core.op_facts import Cost, Effect, Family, Lowering, Memory, ReductionKind
from stageflow.core.source import describe_location

Shape = tuple[int | None, ...]

STRINGS_REFUSED = (
    "this op cannot take string tensors (host-only values): work on them with sf.strings "
    "(sf.strings.to_number and sf.strings.length give numbers), compare them with == or "
    "sf.equal, index and reshape them"
)


@dataclass(frozen=True, slots=True)
class ShapedType:
    """The abstract value of a tensor: its shape (``None`` for an unknown dim) and dtype."""

    shape: Shape
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{'string' if self.dtype.kind == 'O' else self.dtype.name}[{dims}]"


@dataclass(frozen=True, slots=True)
class ResourceType:
    """The type of a variable handle: a reference to mutable state of `value`'s type."""

    value: ShapedType

    def __str__(self) -> str:
        return f"resource<{self.value}>"


ShapeRule = Callable[..., ShapedType | tuple[ShapedType, ...]]

REGISTRY: dict[str, Primitive] = {}


class Primitive:
    """An operation of the `sf` op set.

    ``shape_rule(*avals, **params)`` returns the result type(s) or raises ``ValueError`` /
    ``TypeError`` with a message about the operands; ``kernel(*arrays, **params)`` computes
    the result eagerly with NumPy and is the reference every compiled path is tested
    against. `effects` say what else running it does (`Effect`); an op with any is
    ``stateful``, and is never pruned or folded.

    The gradient rule, set with `def_vjp` beside the primitive's definition, is
    ``vjp(cotangents, inputs, outputs, **params) -> [input cotangent or None, ...]``: given
    one cotangent per result (None where the result is unused) it returns one per operand
    (None where the operand gets no gradient). It is written with primitives, bound directly
    (`stageflow.primitives.autodiff`), so gradients trace into IR and differentiate again.
    `def_nondifferentiable` marks ops whose results carry no gradient (comparisons, integer
    ops, random bits, ...).

    ``dims(d, operand_dims, **params)`` gives the single result's dims from the operands'
    through the dim arithmetic `d` (see `stageflow.core.dims`), or a list of dims per
    result for a primitive with several; the shape rule gets its shape from it, and
    compiled code its run-time dims. None where the dims are not arithmetic on the
    operands' (dims that depend on values).

    The facts (see `stageflow.core.op_facts`) are set by each family's factory functions:
    `family`, `effects`, `memory`, `cost`, `reduction` (for reductions), and `lowered_by`,
    which part of code generation lowers the op or a `HostOnly` reason. None means
    undeclared: the op-facts test reports it. `refuses` are the operand dtypes for which
    some values are an error (NumPy raises: integers to negative powers): a kernel cannot
    refuse one element of many, so such an op is never fused and runs by a lowering of its
    own that can. `takes_strings`: the op only moves elements (reshape, slice, gather,
    concat, ...) or prints them, so string tensors (host-only values) may be its operands
    eagerly; every other op refuses them by name.
    """

    def __init__(
        self,
        name: str,
        *,
        shape_rule: ShapeRule,
        kernel: Callable[..., Any],
        summary: str,
        dims: DimsRule | None = None,
        multiple_results: bool = False,
        effects: Effect = Effect.PURE,
        family: Family | None = None,
        memory: Memory = Memory.NEW,
        cost: Cost = Cost.OPAQUE,
        reduction: ReductionKind | None = None,
        lowered_by: Lowering | None = None,
        refuses: tuple[np.dtype, ...] = (),
        takes_strings: bool = False,
    ) -> None:
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} is defined twice")
        self.name = name
        self.shape_rule = shape_rule
        self.kernel = kernel
        self.summary = summary
        self.dims = dims
        self.multiple_results = multiple_results
        self.effects = effects
        self.family = family
        self.memory = memory
        self.cost = cost
        self.reduction = reduction
        self.lowered_by = lowered_by
        self.refuses = frozenset(refuses)
        self.takes_strings = takes_strings
        self.vjp: Callable[..., list] | None = None
        self.differentiable = True
        REGISTRY[name] = self

    @property
    def stateful(self) -> bool:
        """Whether the op has any effect: never pruned, merged, folded or recomputed."""
        return bool(self.effects)

    @property
    def view(self) -> bool:
        """Whether the result may share its first operand's memory (a view or an alias)."""
        return self.memory in (Memory.VIEW, Memory.ALIAS)

    @property
    def aliases(self) -> bool:
        """Whether the result is always its first operand's bytes, unchanged."""
        return self.memory is Memory.ALIAS

    def def_vjp(self, rule: Callable[..., list]) -> Callable[..., list]:
        """Set the gradient rule (usable as a decorator)."""
        self.vjp = rule
        return rule

    def def_nondifferentiable(self) -> None:
        """Declare that no gradient flows through this op (its results are constants)."""
        self.differentiable = False

    def __repr__(self) -> str:
        return f"Primitive({self.name})"

    def bind(self, *args: Any, **params: Any) -> Any:
        """Apply the op to tensors in whatever context is current (eager or staging), and
        offer it to the active gradient tapes."""
        result = context.current_trace().process(self, args, params)
        if context.state.tape_count:
            context.record_on_tapes(self, args, params, result)
        observer = context.state.op_observer
        if observer is not None:
            observer(self, result)
        return result

    def abstract_eval(self, *avals: ShapedType, **params: Any):
        """Run the shape rule; its errors are re-raised naming the op and the user's line."""
        try:
            if not self.takes_strings and any(
                    isinstance(a, ShapedType) and a.dtype.kind == "O" for a in avals):
                raise TypeError(STRINGS_REFUSED)
            return self.shape_rule(*avals, **params)
        except (ValueError, TypeError) as error:
            operands = ", ".join(str(a) for a in avals)
            message = f"{self.name}({operands}): {error}{describe_location()}"
            raise type(error)(message) from None
