"""The passes on region ops (``sf.cond``, ``sf.while``): every control lit test keeps its
behaviour under its pass (a reference evaluator built on the eager kernels runs the regions
itself), and staged functions with control flow give the same numbers eagerly, interpreted
and compiled, their region ops optimised."""

from __future__ import annotations

import contextlib
import io
import pathlib
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block

import stageflow as sf
from stageflow.core import dtypes
from stageflow.core.primitive import REGISTRY
from stageflow.ir import ConstantOp, constant_value, module_to_text, parse_module
from stageflow.ir.control import CondOp, WhileOp, YieldOp
from stageflow.ir.types import ResourceTensorType, shaped_type
from stageflow.passes import DEFAULT_PIPELINE, Pipeline
from stageflow.passes.hoist import invariant_partner
from stageflow.passes.remat import FORWARD_ATTR, residual_count
from stageflow.passes.support import callee_name
from stageflow.primitives.control import branch_index

LIT_DIR = pathlib.Path(__file__).resolve().parents[2] / "lit_tests" / "passes"
MAX_ITERATIONS = 1000
PIPELINES = {
    "inline": "inline", "fold": "fold", "simplify": "simplify", "cse": "cse",
    "prune": "prune", "fuse": "fuse", "plan-buffers": "plan-buffers", "remat": "remat",
    "prepack": "prepack", "schedule": "schedule", "fuse-conv": "fuse-conv",
    "hoist-invariant": "hoist-invariant",
    "pipeline": DEFAULT_PIPELINE,
}


# --- A reference evaluator that runs regions ---------------------------------------------


class FakeVariable:
    """What the variable kernels need: a value to read and a way to store a new one."""

    def __init__(self, value: np.ndarray) -> None:
        self._value = value

    def _current(self) -> np.ndarray:
        return self._value

    def _store(self, value: np.ndarray) -> None:
        self._value = np.asarray(value)


def evaluate(module: ModuleOp, name: str, inputs: list[Any], depth: int = 0) -> list[Any]:
    """Run ``@name`` op by op with the eager kernels, regions as the runtime runs them."""
    if depth > 20:
        raise RecursionError(f"@{name} calls too deep")
    function = next(f for f in module.ops if isinstance(f, FuncOp) and f.sym_name.data == name)
    block = function.body.block
    return run_block(module, block, dict(zip(block.args, inputs, strict=True)), depth)


def run_block(module: ModuleOp, block: Block, env: dict[Any, Any], depth: int) -> list[Any]:
    """Run `block` in `env` (its arguments and every value from above); what it yields or
    returns."""
    for op in block.ops:
        args = [env[v] for v in op.operands]
        if isinstance(op, ReturnOp | YieldOp):
            return args
        if isinstance(op, CondOp):
            region = op.branches[branch_index(args[0], len(op.branches))]
            results = run_block(module, region.block, env, depth)
        elif isinstance(op, WhileOp):
            results = run_loop(module, op, args, env, depth)
        elif isinstance(op, ConstantOp):
            results = [constant_value(op)]
        elif (callee := callee_name(op)) is not None:
            results = evaluate(module, callee, args, depth + 1)
        elif op.name == "sf.py_func":  # a stand-in whose effect is visible: it prints
            print("py_func", *args)
            results = [-args[0]]
        else:
            primitive = REGISTRY[op.name.removeprefix("sf.")]
            with np.errstate(all="ignore"):
                out = primitive.kernel(*args, **op.params())
            results = list(out) if primitive.multiple_results else [out]
        env.update(zip(op.results, results, strict=True))
    raise AssertionError("a block without terminator")


def run_loop(module: ModuleOp, op: WhileOp, carried: list[Any], env: dict[Any, Any],
             depth: int) -> list[Any]:
    for _ in range(MAX_ITERATIONS):
        cond = op.cond_region.block
        env.update(zip(cond.args, carried, strict=True))
        if not bool(run_block(module, cond, env, depth)[0]):
            return carried
        body = op.body_region.block
        env.update(zip(body.args, carried, strict=True))
        carried = run_block(module, body, env, depth)
    raise RuntimeError(f"more than {MAX_ITERATIONS} iterations")


def sample(ty: Any, rng: np.random.Generator) -> Any:
    """A random value of an IR type (`?` dims are 4); variables for handles."""
    if isinstance(ty, ResourceTensorType):
        return FakeVariable(sample(ty.value, rng))
    aval = shaped_type(ty)
    shape = tuple(4 if d is None else d for d in aval.shape)
    if aval.dtype == dtypes.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(aval.dtype, np.integer):
        return rng.integers(-5, 6, shape).astype(aval.dtype)
    return rng.normal(size=shape).astype(aval.dtype)


def run_all(module: ModuleOp, seed: int) -> dict[str, Any]:
    """Every function's results, variables and printed text on seeded inputs (or the name
    of the error it raised). A backward function runs on its forward's residuals, and the
    forward's outcome leaves them out (`remat` chooses them anew)."""
    table = {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp)}
    forward_of = {name: f.attributes[FORWARD_ATTR].root_reference.data
                  for name, f in table.items() if FORWARD_ATTR in f.attributes}
    outcome: dict[str, Any] = {}
    residuals: dict[str, list[Any]] = {}
    for name in sorted(table, key=lambda n: n in forward_of):  # forwards first
        rng = np.random.default_rng(seed)
        types = list(table[name].function_type.inputs.data)
        saved = residuals.get(forward_of[name], []) if name in forward_of else []
        partner = invariant_partner(table[name])
        kept = len(table[partner[0]].function_type.outputs.data) if partner else 0
        inputs = saved + [sample(ty, rng) for ty in types[len(saved):len(types) - kept]]
        if partner:  # the values the runtime keeps: the partner's, on the same variables
            inputs += evaluate(module, partner[0], [inputs[i] for i in partner[1]])
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                results = evaluate(module, name, inputs)
        except Exception as error:
            outcome[name] = type(error).__name__
            continue
        count = residual_count(table[name])
        if count:
            results, residuals[name] = results[:-count], results[-count:]
        state = [v._value for v in inputs if isinstance(v, FakeVariable)]
        outcome[name] = ([np.asarray(r) for r in results], state, printed.getvalue())
    return outcome


def assert_same_behaviour(before: dict[str, Any], after: dict[str, Any]) -> None:
    for name, outcome in before.items():
        if name not in after:  # an inlined callee that was erased
            continue
        assert not isinstance(outcome, str), f"@{name} fails before the pass: {outcome}"
        assert not isinstance(after[name], str), f"@{name} fails after: {after[name]}"
        results, state, printed = outcome
        results2, state2, printed2 = after[name]
        assert printed == printed2, name
        for x, y in zip([*results, *state], [*results2, *state2], strict=True):
            x, y = np.asarray(x), np.asarray(y)
            assert (x.dtype, x.shape) == (y.dtype, y.shape), name
            np.testing.assert_array_equal(x, y, err_msg=name)
            if dtypes.is_floating(x.dtype):
                assert np.array_equal(np.signbit(x), np.signbit(y)), name


# --- The lit tests of region ops --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_pass_keeps_the_behaviour_of_its_control_lit_test(name: str) -> None:
    module = parse_module((LIT_DIR / f"control-{name}.mlir").read_text())
    optimized = module.clone()
    Pipeline.parse(PIPELINES[name]).run(optimized)
    assert module_to_text(optimized) != module_to_text(module), f"{name} changed nothing"
    for seed in range(4):
        assert_same_behaviour(run_all(module, seed), run_all(optimized, seed))


def test_every_pass_has_a_control_lit_test() -> None:
    names = {path.stem.removeprefix("control-") for path in LIT_DIR.glob("control-*.mlir")}
    assert names == set(PIPELINES)
    assert set(Pipeline.parse(DEFAULT_PIPELINE).names) <= names


# --- Staged functions with control flow ----------------------------------------------------


def test_in_place_kernels_never_overwrite_what_a_cond_returns():
    """The false branch returns %t itself; the kernel computing tanh(t), where %t dies,
    must not write into it while the cond's result still holds it."""

    def f(x, w, p):
        t = sf.matmul(x, w)
        r = sf.cond(p, lambda: t * 2.0, lambda: t)
        u = sf.matmul(sf.tanh(t), w)
        return r + u

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 4)).astype(np.float32)
    w = np.eye(4, dtype=np.float32)
    compiled = sf.function(f)
    for p in (True, False):
        t = x @ w
        want = (t * 2 if p else t) + np.tanh(t) @ w
        got = compiled(sf.constant(x), sf.constant(w), sf.constant(p)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_in_place_kernels_never_overwrite_what_a_loop_returns():
    """A loop running no iteration returns its initial value, %t."""

    def f(x, w, n):
        t = sf.matmul(x, w)
        _, r = sf.while_loop(lambda i, v: i < n, lambda i, v: [i + 1, v * 0.5], [0, t])
        u = sf.matmul(sf.exp(t), w)
        return r - u

    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 3)).astype(np.float32)
    w = rng.normal(size=(3, 3)).astype(np.float32)
    compiled = sf.function(f)
    for n in (0, 2):
        t = x @ w
        want = t * 0.5 ** n - np.exp(t) @ w
        got = compiled(sf.constant(x), sf.constant(w), sf.constant(n)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def nested_program(x, n, v):
    """A loop whose body holds a cond (with a loop in one branch) and a variable update."""

    def body(i, acc):
        big = sf.reduce_sum(acc * acc) > 4.0
        inner = sf.cond(
            big,
            lambda: acc * sf.tanh(x) * 0.5,
            lambda: sf.while_loop(lambda j, b: j < 3, lambda j, b: [j + 1, b - 0.25 * 1.0],
                                  [0, acc])[1])
        v.assign_add(inner * 0.0 + 1.0)
        unused = sf.exp(acc)  # noqa: F841 - dropped by prune
        return [i + 1, sf.exp(inner * 0.1) + sf.cond(sf.constant(2) > 1, lambda: acc * 1.0,
                                                       lambda: -acc)]

    _, out = sf.while_loop(lambda i, acc: i < n, body, [0, x])
    return out * 1.0 + 0.0


def test_nested_control_flow_agrees_eagerly_interpreted_and_compiled():
    x = np.linspace(-1.0, 1.0, 6).astype(np.float32)
    results = []
    variables = []
    for mode in ("eager", "interpreted", "compiled"):
        v = sf.Variable(np.zeros(6, np.float32))

        def f(x, n, v=v):
            return nested_program(x, n, v)

        run = f if mode == "eager" else sf.function(f, jit=mode == "compiled")
        results.append([run(sf.constant(x), sf.constant(n)).numpy() for n in (0, 1, 4)])
        variables.append(v.numpy())
    for other, state in zip(results[1:], variables[1:], strict=True):
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(state, variables[0])


def test_pipeline_optimises_the_regions_of_a_traced_function():
    v = sf.Variable(np.zeros(6, np.float32))

    @sf.function
    def f(x, n):
        return nested_program(x, n, v)

    concrete = f.get_concrete_function(sf.TensorSpec((6,), sf.float32),
                                       sf.TensorSpec((), sf.int32))
    traced, optimized = concrete.ir("traced"), concrete.ir("optimized")
    assert traced.count("sf.cond") == 2 and optimized.count("sf.cond") == 1  # folded
    assert traced.count("sf.while") == optimized.count("sf.while") == 2
    assert "sf.exp %" not in optimized.split("func.func @")[1]  # fused or pruned
    assert "sf.assign_variable" in optimized


def test_constant_control_flow_folds_away():
    @sf.function
    def f(x):
        y = sf.fori_loop(0, 0, lambda i, v: v * 2.0, x)
        z = sf.cond(sf.constant(3) > 2, lambda: y + 1.0, lambda: y - 1.0)
        return sf.switch_case(sf.constant(5), [lambda: z, lambda: z * 3.0])

    x = sf.constant(np.arange(4, dtype=np.float32))
    concrete = f.get_concrete_function(x)
    optimized = concrete.ir("optimized")
    assert "sf.cond" not in optimized and "sf.while" not in optimized, optimized
    np.testing.assert_array_equal(f(x).numpy(), (np.arange(4) + 1.0) * 3.0)


def test_loops_with_changing_dims_verify_and_run_optimised():
    """The loop variable grows each iteration: its carried type leaves the dim unknown
    while the initial value's is known (what the verifier accepts, and no pass breaks)."""

    def f(x, n):
        _, out = sf.while_loop(lambda i, v: i < n,
                               lambda i, v: [i + 1, sf.concat([v, v[:1] * 2.0], axis=0)],
                               [0, x])
        return out

    x = np.array([1.0, 2.0], np.float32)
    for n in (0, 3):
        want = f(sf.constant(x), sf.constant(n)).numpy()
        got = sf.function(f)(sf.constant(x), sf.constant(n)).numpy()
        np.testing.assert_array_equal(got, want)
    assert len(want) == 5
