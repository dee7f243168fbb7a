"""Facts about an op that layers far from its definition need: data on the `Primitive`.

Passes and code generation used to keep their own lists of op names (the views, the cheap
ops to recompute, the reductions parsed out of ``reduce_<kind>``); adding an op meant
finding them all. Each fact below is declared once, where the primitive is defined, and
read by whoever needs it. They are plain data: the code that acts on a fact (a lowering, a
cost formula) stays in its own layer, keyed by the primitive.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # for annotations only: `core.primitive` imports this module
    from stageflow.core.primitive import Primitive


class Family(enum.Enum):
    """The op's family in the `sf` dialect: the base class passes match with ``isinstance``
    (the dialect refines elementwise ops by arity)."""

    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    STRUCTURAL = "structural"
    LINALG = "linalg"
    RANDOM = "random"
    STATE = "state"
    FUNCTIONAL = "functional"
    CONTROL = "control"  # region ops: branches and loops over nested blocks


class Memory(enum.Enum):
    """Where the op's result lives, for buffer planning and whole-function programs."""

    NEW = "new"  # memory the op allocates and owns
    VIEW = "view"  # may share its first operand's memory (a NumPy view); programs copy it
    ALIAS = "alias"  # exactly its first operand's bytes: no copy anywhere
    EXTERNAL = "external"  # storage the call does not own (a constant, a variable's value)


class Cost(enum.Enum):
    """What recomputing the op costs, as the `remat` pass weighs it.

    FREE, MOVEMENT, ELEMENTWISE and TRANSCENDENTAL ops may be recomputed in a backward
    pass; the others are always saved. MATMUL is weighed by its multiply-adds, the rest by
    their result's elements (TRANSCENDENTAL several times over, FREE not at all). OPAQUE,
    the default, is work remat does not model.
    """

    FREE = "free"  # folded into the kernels reading it (constants)
    MOVEMENT = "movement"  # shape ops cheap enough to redo (reshape, broadcast, transpose)
    ELEMENTWISE = "elementwise"
    TRANSCENDENTAL = "transcendental"  # elementwise through a polynomial or iteration
    MATMUL = "matrix_product"
    REDUCTION = "reduction"
    COPY = "copy"  # gathers elements into new memory (slice, concat, pad, gather)
    RANDOM = "random"
    STATE = "state"  # an op with effects (`Effect`): never recomputed
    OPAQUE = "opaque"


class Effect(enum.Flag):
    """What running the op does besides computing its results from its operands' values.

    An op with no effect (`PURE`) may be pruned when unused, merged with an equal op,
    folded, recomputed or reordered; `Primitive.stateful` is whether it has any. The
    flags say what passes and runners need to know beyond that: whether the op only reads
    (two reads of a variable with no write between them are the same value), whether it
    runs functions of its own (whose effects are theirs), whether it needs this process's
    Python when it runs (a saved or ahead-of-time compiled function cannot hold it).
    """

    PURE = 0
    READS = enum.auto()  # reads a variable's current value
    WRITES = enum.auto()  # replaces a variable's value
    OUTPUT = enum.auto()  # writes to the process's output when it runs (printing)
    CALLS = enum.auto()  # runs graph functions it holds as params: a callee, branches, a body
    CALLBACK = enum.auto()  # calls a Python function of this process when it runs


class LoweredBy(enum.Enum):
    """Which part of code generation lowers the op (codegen holds the lowering itself)."""

    ELEMENTWISE = "elementwise"  # a rule in the kernels' elementwise table (fused)
    OP_RULE = "op_rule"  # a lowered-op rule with a C entry point of its own
    PROGRAM = "program"  # the whole-function program handles it inline (variables, ...)


@dataclass(frozen=True)
class HostOnly:
    """The op has no compiled lowering: a function using it runs as Python steps, and
    `reason` says why when that happens."""

    reason: str


@dataclass(frozen=True)
class ReductionKind:
    """How a reduction combines elements, as data the kernels and lowerings read.

    `combine` is the binary elementwise primitive folding two partial results (the object
    itself, passed in where the reduction is defined: code generation compares it,
    ``kind.combine is add_p``);
    `identity` is what the reduction of no elements starts from (an infinity stands for an
    integer dtype's lowest or highest value); `needs_elements` says that reducing an empty
    axis is an error rather than the identity (NumPy's max and min raise).

    `native_dtypes` are the dtypes a compiled loop accumulates in, carrying a value of the
    operand's own dtype. This is a fact about code generation, but it sits here because the
    `fuse` pass must know which reductions may end a kernel and passes do not import
    codegen; codegen checks the same fact when it lowers, so the two never disagree. Values
    are combined in the dtype's compute type, so half floats are native to max and min
    (exact in float32) but not to sums and products (their NumPy kernels accumulate in
    float32 and round once); narrow integers are native to none: those reductions run their
    NumPy kernel.
    """

    name: str
    combine: Primitive
    identity: float
    native_dtypes: frozenset[np.dtype]
    needs_elements: bool = False


Lowering = LoweredBy | HostOnly
