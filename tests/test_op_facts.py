"""Every primitive declares every fact each layer reads about it, consistently.

`missing_facts` is the checker: a shape rule; a gradient rule, or none needed; an IR op of
its family in the dialect; a lowering in the table its `lowered_by` fact names (or a
host-only reason); for reductions, a reduction kind that agrees with the eager kernel;
effects that agree with its cost and family. A primitive added without one of them fails
`test_every_primitive_declares_its_facts`, and `test_the_checker_reports_a_bare_primitive`
shows that the checker does report them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.kernels.rules import RULES as ELEMENTWISE_RULES
from stageflow.codegen.lowered.compile import RULES as OP_RULES
from stageflow.codegen.program.legality import emits_itself
from stageflow.core import config
from stageflow.core.op_facts import Cost, Effect, Family, HostOnly, LoweredBy, ReductionKind
from stageflow.core.primitive import REGISTRY, Primitive, ShapedType
from stageflow.ir.dialect import (
    FAMILIES,
    OPS,
    ElementwiseOp,
    op_class,
    sf_dialect,
)
from stageflow.primitives.autodiff import HANDLED_BY_TAPE


def _gradient(primitive: Primitive) -> list[str]:
    if primitive.vjp or not primitive.differentiable or primitive.name in HANDLED_BY_TAPE:
        return []
    return ["no gradient rule (def_vjp), def_nondifferentiable or tape handling"]


def _ir_op(primitive: Primitive) -> list[str]:
    if primitive.family is None:
        return ["no IR family"]
    op = op_class(primitive)
    problems = []
    if op.name != f"sf.{primitive.name}" or op not in set(sf_dialect().operations):
        problems.append("no op in the sf dialect")
    base = ElementwiseOp if primitive.family is Family.ELEMENTWISE else FAMILIES[primitive.family]
    if not issubclass(op, base):
        problems.append(f"its IR op is not a {base.__name__}")
    return problems


def _lowering(primitive: Primitive) -> list[str]:
    lowering = primitive.lowered_by
    if lowering is None:
        return ["no lowering status (lowered_by)"]
    if isinstance(lowering, HostOnly):
        return [] if lowering.reason.strip() else ["host-only without a reason"]
    tables = {
        LoweredBy.ELEMENTWISE: (primitive in ELEMENTWISE_RULES, "the elementwise rules table"),
        LoweredBy.OP_RULE: (primitive in OP_RULES, "the lowered-op rules"),
        LoweredBy.PROGRAM: (emits_itself(primitive), "the ops a program emits itself"),
    }
    present, table = tables[lowering]
    return [] if present else [f"lowered_by={lowering.name} but not in {table}"]


def _reduction(primitive: Primitive) -> list[str]:
    kind = primitive.reduction
    if kind is None:
        reduces_axes = "axes" in getattr(op_class(primitive), "PARAMS", ())
        if primitive.family is Family.REDUCTION and reduces_axes:
            return ["a reduction over axes without its reduction kind"]
        return []
    if primitive.family is not Family.REDUCTION:
        return ["a reduction kind on an op outside the reduction family"]
    return _reduction_agrees_with_kernel(primitive, kind)


def _reduction_agrees_with_kernel(primitive: Primitive, kind: ReductionKind) -> list[str]:
    """The kind's combine and identity are what the eager kernels compute."""
    combine = kind.combine
    if REGISTRY.get(combine.name) is not combine or combine.family is not Family.ELEMENTWISE:
        return [f"combine {combine!r} is not a registered elementwise primitive"]
    x = np.array([-2.5, 0.0, 3.0])
    if not np.array_equal(combine.kernel(np.full_like(x, kind.identity), x), x):
        return [f"identity {kind.identity} is not neutral for {combine.name}"]
    pair = np.stack([x, x[::-1]])
    if not np.array_equal(primitive.kernel(pair, axes=(0,), keepdims=False),
                          combine.kernel(x, x[::-1])):
        return [f"the kernel does not combine by {combine.name}"]
    return _empty_reduction(primitive, kind)


def _empty_reduction(primitive: Primitive, kind: ReductionKind) -> list[str]:
    empty = np.zeros((0, 2))
    try:
        result = primitive.kernel(empty, axes=(0,), keepdims=False)
    except ValueError:
        return [] if kind.needs_elements else ["the kernel rejects an empty axis"]
    if kind.needs_elements:
        return ["needs_elements, but the kernel reduces an empty axis"]
    return [] if np.all(result == kind.identity) else ["an empty reduction is not the identity"]


def _effects(primitive: Primitive) -> list[str]:
    """An op has effects exactly where it costs `Cost.STATE` (remat never recomputes it),
    and every op of the state family has one."""
    effects, cost = primitive.effects, primitive.cost
    problems = []
    if primitive.stateful and cost is not Cost.STATE:
        problems.append(f"effects {effects.name} but cost {cost.name}: an op with effects "
                        "costs STATE")
    if not primitive.stateful and cost is Cost.STATE:
        problems.append("cost STATE but no effects")
    if primitive.family is Family.STATE and not primitive.stateful:
        problems.append("a state-family op without effects")
    return problems


def missing_facts(primitive: Primitive) -> list[str]:
    """What `primitive` lacks or declares inconsistently ([] when every fact is there)."""
    shape_rule = [] if callable(primitive.shape_rule) else ["no shape rule"]
    return [*shape_rule, *_gradient(primitive), *_ir_op(primitive), *_lowering(primitive),
            *_reduction(primitive), *_effects(primitive)]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_primitive_declares_its_facts(name: str) -> None:
    assert missing_facts(REGISTRY[name]) == []


@pytest.fixture
def bare_primitive() -> Iterator[Primitive]:
    """A primitive with a shape rule and a kernel only, removed from the registry after."""
    primitive = Primitive("bare_for_facts_test", shape_rule=lambda x: x, kernel=lambda x: x,
                          summary="x")
    try:
        yield primitive
    finally:
        del REGISTRY[primitive.name]
        OPS.pop(primitive.name, None)


def test_the_checker_reports_a_bare_primitive(bare_primitive: Primitive) -> None:
    assert missing_facts(bare_primitive) == [
        "no gradient rule (def_vjp), def_nondifferentiable or tape handling",
        "no IR family",
        "no lowering status (lowered_by)",
    ]


def test_the_checker_reports_a_missing_lowering_and_reduction_kind(
        bare_primitive: Primitive) -> None:
    def reduce_rule(x: ShapedType, *, axes: tuple[int, ...], keepdims: bool) -> ShapedType:
        return x

    bare_primitive.shape_rule = reduce_rule
    bare_primitive.family = Family.REDUCTION
    bare_primitive.lowered_by = LoweredBy.OP_RULE
    bare_primitive.def_nondifferentiable()
    assert missing_facts(bare_primitive) == [
        "lowered_by=OP_RULE but not in the lowered-op rules",
        "a reduction over axes without its reduction kind",
    ]


def test_the_checker_reports_effects_that_disagree_with_cost_and_family(
        bare_primitive: Primitive) -> None:
    bare_primitive.effects = Effect.WRITES
    assert _effects(bare_primitive) == [
        "effects WRITES but cost OPAQUE: an op with effects costs STATE"]
    bare_primitive.effects, bare_primitive.cost = Effect.PURE, Cost.STATE
    bare_primitive.family = Family.STATE
    assert _effects(bare_primitive) == [
        "cost STATE but no effects", "a state-family op without effects"]


def test_a_host_only_op_is_named_once_with_its_reason_and_line(capsys, monkeypatch) -> None:
    monkeypatch.setattr(config, "log", {"compiles"})

    @sf.function(input_signature=[sf.TensorSpec([None, 2], sf.float32)])
    def mean(x):
        average = sf.reduce_mean(x, axis=0)
        sf.print(average)  # the host-only op
        return average * 2.0

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_allclose(mean(x).numpy(), [6.0, 8.0])
    mean(x)
    lines = [line for line in capsys.readouterr().err.splitlines() if "Python steps" in line]
    assert len(lines) == 1
    assert "sf.print runs on the host only: it prints from Python" in lines[0]
    assert "# the host-only op" in lines[0]
    reasons = mean.get_concrete_function().stats()["steps_reasons"]
    assert list(reasons.values()) == [lines[0].split("runs as Python steps: ", 1)[1]]


def test_a_mean_over_unknown_rows_is_one_program() -> None:
    @sf.function(input_signature=[sf.TensorSpec([None, 2], sf.float32)])
    def mean(x):
        return sf.reduce_mean(x, axis=0) * 2.0  # counts the rows with dim_size

    for rows in (1, 4, 7):
        x = np.arange(2 * rows, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_allclose(mean(x).numpy(), x.mean(axis=0) * 2.0, rtol=1e-6)
    stats = mean.get_concrete_function().stats()
    assert stats["steps_reasons"] == {}
    assert mean.get_concrete_function().program.program is not None
