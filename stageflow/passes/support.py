"""Helpers the passes share: reading constants, asking which op an op is and what effects
it may have, finding callees, and checking that a rewrite keeps a value's type.

The last one matters most. The verifier accepts a declared type that is less precise than
the one the shape rule infers (``tensor<?xf32>`` where the rule knows ``4``), and binary ops
broadcast, so "the same value" is only the same if its type is unchanged, dims included:
every rewrite that replaces a value checks `same_type` before it touches the IR.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeGuard

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, SymbolRefAttr, TensorType
from xdsl.dialects.func import CallOp, FuncOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import Rewriter
from xdsl.traits import IsTerminator

from stageflow.core import dtypes
from stageflow.core.op_facts import Effect
from stageflow.core.primitive import Primitive
from stageflow.ir.attributes import SymbolRef
from stageflow.ir.builder import constant_value
from stageflow.ir.control import ControlOp
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import ir_type


def constant_array(value: SSAValue) -> np.ndarray | None:
    """The array `value` holds if an ``sf.constant`` defines it, else ``None``."""
    owner = value.owner
    return constant_value(owner) if isinstance(owner, ConstantOp) else None


def splat_value(array: np.ndarray) -> np.generic | None:
    """The one value every element of `array` has (bitwise, so -0.0 is not 0.0), or None."""
    if array.size == 0:
        return None
    first = array.reshape(-1)[:1]
    if dtypes.is_inexact(array.dtype):  # by bits: NaN equals itself, -0.0 is not 0.0
        bits = np.dtype(f"u{dtypes.real_dtype(array.dtype).itemsize}")  # complex: per part
        words = array.reshape(-1).view(bits).reshape(array.size, -1)
        same = bool(np.all(words == words[:1]))
    else:
        same = bool(np.all(array == first))
    return first[0] if same else None


def splat_of(value: SSAValue) -> np.generic | None:
    """The one value of a 0-d or splat ``sf.constant`` defining `value`, else None."""
    array = constant_array(value)
    return None if array is None else splat_value(array)


def is_op(op: object, primitive: Primitive) -> TypeGuard[SfOp]:
    """Whether `op` is an op of `primitive`."""
    return isinstance(op, SfOp) and op.primitive is primitive


def effects_of(op: Operation) -> Effect:
    """The effects `op` may have: its primitive's and those of the ops in its regions
    (``sf.cond``/``sf.while`` have their contents' effects); every effect for an op
    stageflow does not know (terminators aside), conservatively."""
    effects = Effect.PURE
    for inner in op.walk():
        if isinstance(inner, SfOp):
            effects |= inner.primitive.effects
        elif not isinstance(inner, ControlOp) and not inner.has_trait(IsTerminator):
            return ~Effect.PURE
    return effects


def is_stateful(op: Operation) -> bool:
    """Whether `op` may have an effect (`effects_of`): it is never removed or moved."""
    return bool(effects_of(op))


def only_user(value: SSAValue) -> Operation | None:
    """The one op that uses `value`, or None where it has no use or several."""
    uses = list(value.uses)
    return uses[0].operation if len(uses) == 1 else None


def same_type(a: SSAValue | Attribute, b: SSAValue | Attribute) -> bool:
    """Whether two values (or types) have exactly the same type, dims included."""
    ta = a.type if isinstance(a, SSAValue) else a
    tb = b.type if isinstance(b, SSAValue) else b
    return ta == tb


def inferred_types_match(op: SfOp) -> bool:
    """Whether `op`'s declared result types are exactly what its shape rule infers."""
    try:
        inferred = op.infer_result_types()
    except Exception:  # an op the rule rejects is not one to rewrite
        return False
    return len(inferred) == len(op.results) and all(
        ir_type(aval) == result.type for aval, result in zip(inferred, op.results, strict=True)
    )


def static_size(ty: Attribute) -> int | None:
    """The element count of a tensor type with static dims, else ``None``."""
    if not isinstance(ty, TensorType) or not ty.has_static_shape():
        return None
    return int(np.prod(ty.get_shape(), dtype=np.int64))


def callee_name(op: Operation) -> str | None:
    """The function an ``sf.call`` or ``func.call`` calls, by symbol name."""
    if isinstance(op, CallOp):
        return op.callee.root_reference.data
    if isinstance(op, SfOp):
        callees = [v for v in op.params().values() if isinstance(v, SymbolRef)]
        if len(callees) == 1:
            return callees[0].name
    return None


def functions(module: ModuleOp) -> dict[str, FuncOp]:
    """The module's functions by symbol name, in order."""
    return {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp)}


def _symbols_in(attr: Attribute) -> Iterator[str]:
    if isinstance(attr, SymbolRefAttr):
        yield attr.root_reference.data
    elif isinstance(attr, ArrayAttr):
        for item in attr.data:
            yield from _symbols_in(item)


def referenced_symbols(module: ModuleOp) -> set[str]:
    """Every symbol some op of the module refers to (in attributes or properties)."""
    names: set[str] = set()
    for op in module.walk():
        for attr in (*op.attributes.values(), *op.properties.values()):
            names.update(_symbols_in(attr))
    return names


def erase_dead_producers(
    values: Iterable[SSAValue], rewriter: PatternRewriter | None = None
) -> None:
    """Erase the pure ops defining `values` that a rewrite left unused, and theirs in turn.

    Only what the rewrite itself made dead is erased (the ops feeding the op it replaced);
    removing dead code in general is `prune`'s job. Inside a pattern pass the `rewriter`,
    so that the walker forgets the erased ops.
    """
    stack = list(values)
    while stack:
        owner = stack.pop().owner
        if (
            not isinstance(owner, SfOp)
            or owner.parent is None
            or owner.primitive.stateful
            or any(result.uses for result in owner.results)
        ):
            continue
        operands = list(owner.operands)
        if rewriter is not None:
            rewriter.erase(owner)
        else:
            Rewriter.erase_op(owner)
        stack.extend(operands)


def fresh_names(prefix: str, taken: set[str], *, bare: bool = False) -> Iterator[str]:
    """Symbols not in `taken` (each taken as it is given): `prefix` itself first where
    `bare`, then ``prefix0``, ``prefix1``, ... (from ``prefix1`` after a bare name)."""
    if bare and prefix not in taken:
        taken.add(prefix)
        yield prefix
    for number in itertools.count(1 if bare else 0):
        name = f"{prefix}{number}"
        if name not in taken:
            taken.add(name)
            yield name
