"""The passes: registry and pipelines, and every pass checked by running the IR before and
after it with a reference evaluator built on the eager kernels (bitwise-equal results,
the same variable updates and the same printed text), on the lit tests' own functions, on
traced functions and on random programs."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import pathlib
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.passes import ModulePass
from xdsl.traits import Pure

import stageflow as sf
from stageflow.core import dtypes
from stageflow.core.primitive import REGISTRY, ResourceType, ShapedType
from stageflow.ir import (
    ConstantOp,
    IRError,
    build_constant,
    build_function,
    build_op,
    constant_value,
    module_to_text,
    op_class,
    parse_module,
    shaped_type,
)
from stageflow.ir.from_graph import graph_module
from stageflow.ir.types import ResourceTensorType, ir_type
from stageflow.passes import (
    DEFAULT_PIPELINE,
    IR_DUMP_HEADER,
    PassFailure,
    PassSpecError,
    Pipeline,
    available_passes,
    format_timings,
    get_pass,
    parse_pipeline,
)
from stageflow.passes.hoist import invariant_partner
from stageflow.passes.remat import FORWARD_ATTR, residual_count
from stageflow.passes.support import callee_name

LIT_DIR = pathlib.Path(__file__).resolve().parents[2] / "lit_tests" / "passes"
DYNAMIC_DIM = 4  # the size given to every `?` dim when a function is run
SPECIAL = (0.0, -0.0, 1.0, 2.0, np.inf, -np.inf, np.nan)


# --- The reference evaluator -------------------------------------------------------------


class FakeVariable:
    """What the variable kernels need: a value to read and a way to store a new one."""

    def __init__(self, value: np.ndarray) -> None:
        self._value = value

    def _current(self) -> np.ndarray:
        return self._value

    def _store(self, value: np.ndarray) -> None:
        self._value = np.asarray(value)


def evaluate(module: ModuleOp, name: str, inputs: list[Any], depth: int = 0) -> list[Any]:
    """Run ``@name`` op by op with the primitives' eager kernels."""
    if depth > 20:
        raise RecursionError(f"@{name} calls too deep")
    function = next(f for f in module.ops if isinstance(f, FuncOp) and f.sym_name.data == name)
    if not function.body.blocks:  # a declaration: stand in with a fixed function
        return [-inputs[0] for _ in function.function_type.outputs.data]
    env: dict[Any, Any] = dict(zip(function.body.block.args, inputs, strict=True))
    for op in function.body.block.ops:
        args = [env[v] for v in op.operands]
        if isinstance(op, ReturnOp):
            return args
        if isinstance(op, ConstantOp):
            results: Any = [constant_value(op)]
        elif (callee := callee_name(op)) is not None:
            results = evaluate(module, callee, args, depth + 1)
        else:
            primitive = REGISTRY[op.name.removeprefix("sf.")]
            with np.errstate(all="ignore"):
                out = primitive.kernel(*args, **op.params())
            results = list(out) if primitive.multiple_results else [out]
        for value, result in zip(op.results, results, strict=True):
            env[value] = np.asarray(result) if not isinstance(op, CallOp) else result
    raise AssertionError(f"@{name} has no return")


def sample(ty: Any, rng: np.random.Generator) -> Any:
    """A random value of an IR type (`?` dims are `DYNAMIC_DIM`); variables for handles."""
    if isinstance(ty, ResourceTensorType):
        return FakeVariable(sample(ty.value, rng))
    aval = shaped_type(ty)
    shape = tuple(DYNAMIC_DIM if d is None else d for d in aval.shape)
    if aval.dtype == dtypes.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(aval.dtype, np.integer):
        return rng.integers(-5, 6, shape).astype(aval.dtype)
    values = rng.normal(size=shape)
    special = rng.random(shape) < 0.3  # where IEEE rules bite: signed zeros, inf, NaN
    values[special] = rng.choice(SPECIAL, size=int(special.sum()))
    return values.astype(aval.dtype)


def run_all(module: ModuleOp, seed: int) -> dict[str, Any]:
    """Every function's results, variables and printed text on seeded inputs (or the
    error it raised: a function that fails must fail the same way afterwards).

    A forward/backward pair (`remat`) is one computation: the backward runs on the
    residuals its forward returned and seeded cotangents, and the forward's outcome is its
    own outputs, without the residuals (which the pair may choose differently)."""
    outcome: dict[str, Any] = {}
    table = {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks}
    residuals: dict[str, list[Any]] = {}
    forward_of = {name: f.attributes[FORWARD_ATTR].root_reference.data
                  for name, f in table.items() if FORWARD_ATTR in f.attributes}
    order = sorted(table, key=lambda name: name in forward_of)  # forwards first
    for name in order:
        function = table[name]
        rng = np.random.default_rng(seed)
        types = list(function.function_type.inputs.data)
        if name in forward_of:
            saved = residuals.get(forward_of[name])
            if saved is None:
                outcome[name] = "its forward failed"
                continue
            inputs = saved + [sample(ty, rng) for ty in types[len(saved):]]
        else:
            partner = invariant_partner(function)
            kept = len(table[partner[0]].function_type.outputs.data) if partner else 0
            inputs = [sample(ty, rng) for ty in types[:len(types) - kept]]
            if partner:  # the values the runtime keeps: the partner's, on the same variables
                inputs += evaluate(module, partner[0], [inputs[i] for i in partner[1]])
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                results = evaluate(module, name, inputs)
        except Exception as error:
            outcome[name] = type(error).__name__
            continue
        count = residual_count(function)
        if count is not None:
            results, residuals[name] = results[:len(results) - count], results[len(results)
                                                                               - count:]
        state = [v._value for v in inputs if isinstance(v, FakeVariable)]
        outcome[name] = (results, state, printed.getvalue())
    return outcome


def assert_identical(a: Any, b: Any, where: str) -> None:
    """Equal dtype, shape and values, NaN where NaN, and the same sign of every zero."""
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), where
    if dtypes.is_floating(a.dtype):
        assert np.array_equal(a, b, equal_nan=True), where
        assert np.array_equal(np.signbit(a), np.signbit(b)), where
    else:
        assert np.array_equal(a, b), where


def assert_same_behaviour(before: dict[str, Any], after: dict[str, Any]) -> None:
    for name, outcome in before.items():
        if name not in after:  # an inlined callee that was erased
            continue
        if isinstance(outcome, str):
            continue  # it failed before (a call cycle, an out-of-range gather): no claim
        results, state, printed = outcome
        assert not isinstance(after[name], str), f"@{name} fails after: {after[name]}"
        results2, state2, printed2 = after[name]
        assert printed == printed2, name
        for index, (x, y) in enumerate(zip([*results, *state], [*results2, *state2],
                                           strict=True)):
            assert_identical(x, y, f"@{name} value {index}")


def check_pipeline(module: ModuleOp, pipeline: str, seeds: range = range(3)) -> ModuleOp:
    """Run `pipeline` on a copy of `module`; assert both behave alike; the copy."""
    optimized = module.clone()
    Pipeline.parse(pipeline).run(optimized)
    for seed in seeds:
        assert_same_behaviour(run_all(module, seed), run_all(optimized, seed))
    return optimized


# --- Registry, pipelines, command line -----------------------------------------------------


def test_every_pass_is_documented_and_has_a_lit_test() -> None:
    passes = available_passes()
    assert {"prune", "fold", "cse", "simplify", "inline"} <= set(passes)
    for name, cls in passes.items():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", name), name
        assert issubclass(cls, ModulePass) and get_pass(name) is cls
        assert cls.__doc__ and "Before::" in cls.__doc__, f"{name} needs a summary and example"
        lit = LIT_DIR / f"{name}.mlir"
        assert lit.exists(), f"pass {name!r} has no lit test {lit}"
        assert f"--passes {name}" in lit.read_text().splitlines()[0]


def test_default_pipeline_names_registered_passes() -> None:
    pipeline = Pipeline.parse(DEFAULT_PIPELINE)
    assert set(pipeline.names) <= set(available_passes())
    assert str(pipeline) == DEFAULT_PIPELINE


def test_options_are_parsed_into_dataclass_fields() -> None:
    fold, simplify, inline = parse_pipeline(
        "fold{max-elements=7},simplify{no_signed_zeros=true},inline{max-ops=0}"
    )
    assert (fold.max_elements, simplify.no_signed_zeros, inline.max_ops) == (7, True, 0)
    assert str(fold) == "fold{max_elements=7}" and parse_pipeline("") == ()


@pytest.mark.parametrize("text, message", [
    ("fold,nope", "unknown pass 'nope' (available: "),
    ("fold{max-elements=x}", "option 'max-elements' of pass 'fold' takes an integer, got 'x'"),
    ("fold{max-elements=-1}", "max-elements must be >= 0"),
    ("simplify{no-signed-zeros=1}", "takes true or false, got '1'"),
    ("cse{x=1}", "pass 'cse' has no option 'x' (options: none)"),
    ("fold{", "bad pass pipeline 'fold{' at column 6: expected argument name here"),
])
def test_bad_pipelines_give_one_line(text: str, message: str) -> None:
    with pytest.raises(PassSpecError) as error:
        parse_pipeline(text)
    assert message in str(error.value) and "\n" not in str(error.value)


@dataclasses.dataclass(frozen=True)
class BreakTypes(ModulePass):
    """Declares every sf.exp result one element longer: IR that does not verify."""

    name = "break-types"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for exp in [o for o in op.walk() if o.name == "sf.exp"]:
            ty = exp.results[0].type
            assert isinstance(ty, TensorType)
            bigger = TensorType(ty.element_type, [ty.get_shape()[0] + 1])
            exp.results[0]._type = bigger  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True)
class Crash(ModulePass):
    name = "crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise KeyError("boom")


EXP = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}"""


def test_pipeline_names_the_pass_that_breaks_the_ir() -> None:
    with pytest.raises(PassFailure) as error:
        Pipeline([get_pass("cse")(), BreakTypes()]).run(parse_module(EXP))
    assert error.value.pass_name == "break-types" and isinstance(error.value.error, IRError)
    assert "IR does not verify after pass 'break-types'" in str(error.value)
    with pytest.raises(PassFailure, match="pass 'crash' failed: KeyError: 'boom'"):
        Pipeline([Crash()]).run(parse_module(EXP))


def test_verifying_only_the_end_still_catches_a_broken_pass_and_says_how_to_find_it() -> None:
    with pytest.raises(PassFailure) as error:
        Pipeline([BreakTypes(), get_pass("cse")()], verify="end").run(parse_module(EXP))
    message = str(error.value)
    assert "IR does not verify after the pipeline 'break-types,cse'" in message
    assert "STAGEFLOW_VERIFY=each names the pass" in message
    Pipeline([BreakTypes()], verify="none").run(parse_module(EXP))  # nothing checks
    with pytest.raises(ValueError, match="verify must be one of"):
        Pipeline([BreakTypes()], verify="sometimes")


def test_pipeline_times_passes_and_calls_back_after_each() -> None:
    seen: list[tuple[str, str]] = []
    pipeline = Pipeline.parse(
        "cse,prune", after_pass=lambda p, m: seen.append((p.name, module_to_text(m)))
    )
    timings = pipeline.run(parse_module(EXP))
    assert [t.name for t in timings] == [name for name, _ in seen] == ["cse", "prune"]
    assert all(t.run_s >= 0 and t.verify_s >= 0 for t in timings)
    table = format_timings(timings, [("parse", 0.5)])
    assert table.splitlines()[1].startswith("parse") and "total" in table


def test_opt_prints_ir_after_each_pass(tmp_path: pathlib.Path, capsys) -> None:
    from stageflow import cli

    path = tmp_path / "f.mlir"
    path.write_text(EXP)
    assert cli.main(["opt", str(path), "--passes", "cse,prune", "--print-ir-after-all"]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("// -----//")]
    assert headers == [IR_DUMP_HEADER.format(name=n) for n in ("cse", "prune")]
    assert headers[0] == "// -----// IR Dump After cse //----- //"
    assert cli.main(["opt", str(path), "--passes", "nope"]) == 1
    assert capsys.readouterr().err.startswith("stageflow opt: error: unknown pass 'nope'")


# --- Each pass, on the lit tests' functions ------------------------------------------------


@pytest.mark.parametrize("name", sorted(available_passes()))
def test_pass_keeps_the_behaviour_of_its_lit_test(name: str) -> None:
    module = parse_module((LIT_DIR / f"{name}.mlir").read_text())
    optimized = check_pipeline(module, name)
    assert module_to_text(optimized) != module_to_text(module), f"{name} changed nothing"


def test_stateful_primitives_are_not_pure() -> None:
    """`prune` and `cse` rely on it: they read effects from the ``Pure`` trait."""
    for primitive in REGISTRY.values():
        assert op_class(primitive).has_trait(Pure) == (not primitive.stateful), primitive


def test_fold_keeps_types_and_respects_the_limit() -> None:
    def body(args):
        iota = build_op("iota", [], {"shape": (2, 3), "dtype": dtypes.int32, "dimension": 1},
                        ShapedType((2, 3), dtypes.int32))
        cast = build_op("cast", [iota.result], {"dtype": dtypes.bfloat16},
                        ShapedType((2, 3), dtypes.bfloat16))
        return [iota, cast], [cast.result]

    module = ModuleOp([build_function("f", [], body)])
    assert module_to_text(check_pipeline(module, "fold{max-elements=5}")).count("sf.iota") == 1
    folded = check_pipeline(module, "fold{max-elements=6}")
    (constant,) = [op for op in folded.walk() if isinstance(op, ConstantOp)]
    assert constant.result.type == ir_type(ShapedType((2, 3), dtypes.bfloat16))
    np.testing.assert_array_equal(constant_value(constant), [[0, 1, 2]] * 2)


# --- Traced functions --------------------------------------------------------------------


def test_default_pipeline_on_a_traced_function() -> None:
    w = sf.Variable(np.ones((4, 3), np.float32))
    step = sf.Variable(0.0)

    @sf.function
    def scaled(x):
        return x * 1.0 + 0.0 - 0.0

    @sf.function
    def model(x):
        h = sf.transpose(sf.transpose(scaled(x)))
        y = sf.matmul(h, w) * sf.constant(2.0) + sf.reshape(sf.reshape(h, (-1,)), (8, 4))[0, :3]
        unused = sf.exp(y) * 3.0  # noqa: F841 - dropped by prune
        step.assign_add(1.0)
        return sf.nn.relu(y) + sf.nn.relu(y)

    function = model.get_concrete_function(sf.TensorSpec((8, 4), sf.float32))
    module = graph_module(function.graph, function.name)
    optimized = check_pipeline(module, DEFAULT_PIPELINE.removesuffix(",fuse,schedule,plan-buffers"))
    text = module_to_text(optimized)
    assert "sf.call" not in text and "sf.transpose" not in text and "sf.exp" not in text
    assert "sf.assign_variable" in text
    ops = sum(1 for _ in optimized.walk()) / sum(1 for _ in module.walk())
    assert ops < 0.8, module_to_text(module) + text


# --- Random programs ---------------------------------------------------------------------

F32 = dtypes.float32
UNARY = ("negative", "abs", "tanh", "exp", "logical_not")
BINARY = ("add", "subtract", "multiply", "divide", "maximum")


@st.composite
def programs(draw: st.DrawFn) -> str:
    """A function of random elementwise and data-movement ops over f32[2, 4] and i32[4]
    values, with splat and special constants, variable reads and writes, and prints."""
    arg_types = [ShapedType((2, 4), F32), ShapedType((4,), F32), ShapedType((4,), dtypes.int32),
                 ResourceType(ShapedType((4,), F32))]

    def body(args):
        ops: list = []
        pool = list(args[:3])

        def add(op):
            ops.append(op)
            pool.extend(r for r in op.results if isinstance(r.type, TensorType))
            return op

        def pick(dtype=None):
            choices = [v for v in pool if dtype is None or shaped_type(v.type).dtype == dtype]
            return draw(st.sampled_from(choices))

        def constant_like(value):
            aval = shaped_type(value.type)
            shape = draw(st.sampled_from([(), aval.shape, aval.shape[-1:]]))
            if aval.dtype == dtypes.int32:
                fill = draw(st.sampled_from([0, 1, 3]))
            else:
                fill = draw(st.sampled_from(SPECIAL))
            return add(build_constant(np.full(shape, fill, aval.dtype))).result

        for _ in range(draw(st.integers(1, 12))):
            kind = draw(st.sampled_from(["unary", "binary", "binary", "move", "state"]))
            x = pick()
            aval = shaped_type(x.type)
            if kind == "unary":
                name = draw(st.sampled_from(UNARY))
                name = "logical_not" if aval.dtype == dtypes.bool_ else name
                if name == "logical_not" and aval.dtype != dtypes.bool_ or (
                    name in ("tanh", "exp") and aval.dtype != F32
                ):
                    name = "negative"
                add(build_op(name, [x], {}, aval))
            elif kind == "binary" and aval.dtype != dtypes.bool_:
                name = draw(st.sampled_from(BINARY))
                if name == "divide" and aval.dtype != F32:
                    name = "multiply"
                y = draw(st.one_of(st.just(None), st.sampled_from(pool)))
                try:
                    result = REGISTRY[name].shape_rule(aval, shaped_type(y.type))
                except (AttributeError, TypeError, ValueError):  # none, or does not fit
                    y = constant_like(x)
                    result = REGISTRY[name].shape_rule(aval, shaped_type(y.type))
                add(build_op(name, draw(st.permutations([x, y])), {}, result))
            elif kind == "move" and aval.shape == (2, 4):
                if draw(st.booleans()):
                    y = add(build_op("transpose", [x], {"perm": (1, 0)}, ShapedType((4, 2), F32)))
                    add(build_op("transpose", [y.result], {"perm": (1, 0)}, aval))
                else:
                    y = add(build_op("reshape", [x], {"shape": (8,)}, ShapedType((8,), F32)))
                    add(build_op("reshape", [y.result], {"shape": (2, -1)}, aval))
            elif kind == "state" and aval.shape == (4,) and aval.dtype == F32:
                add(build_op("read_variable", [args[3]], {}, aval))
                if draw(st.booleans()):
                    add(build_op("assign_variable", [args[3], x], {}, []))
                else:
                    add(build_op("print", [x], {"pieces": ("v", None), "sep": " "}, []))
        count = draw(st.integers(1, 3))
        return ops, [pool[-1 - i] for i in range(min(count, len(pool)))]

    return module_to_text(ModuleOp([build_function("f", arg_types, body)]))


@settings(max_examples=60)
@given(programs(), st.sampled_from([DEFAULT_PIPELINE, *available_passes()]))
def test_passes_keep_the_behaviour_of_random_programs(text: str, pipeline: str) -> None:
    check_pipeline(parse_module(text), pipeline, seeds=range(2))
