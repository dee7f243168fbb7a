"""The `fuse` pass: fused programs compute what they computed (the reference evaluator of
`test_passes` runs a kernel call as a call of its function), every kernel compiles and
gives the evaluator's numbers, and the result is well formed: verified, every operand
defined before its use (xDSL's verifier does not check that within a block), deterministic,
printable and parsable, and a fixed point of the pass. On the lit test's functions, on a
traced MLP and on random programs mixing elementwise ops with reductions, matmul, reshapes
and effects."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_passes import DYNAMIC_DIM, check_pipeline, evaluate
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation

import stageflow as sf
from stageflow.codegen import PTXTarget, analyse, compile_kernel
from stageflow.codegen.kernels.rules import RULES
from stageflow.core import dtypes
from stageflow.core.primitive import REGISTRY, ResourceType, ShapedType
from stageflow.ir import (
    ConstantOp,
    ElementwiseOp,
    build_constant,
    build_function,
    build_op,
    module_to_text,
    op_class,
    parse_module,
    shaped_type,
    verify_module,
)
from stageflow.ir.from_graph import graph_module
from stageflow.passes import DEFAULT_PIPELINE, PassSpecError, Pipeline, parse_pipeline
from stageflow.passes.fuse import is_kernel
from stageflow.passes.fuse_groups import is_fusible, is_fusible_reduction
from stageflow.passes.support import callee_name

LIT = pathlib.Path(__file__).resolve().parents[2] / "lit_tests" / "passes" / "fuse.mlir"
F32 = dtypes.float32


def fused(module: ModuleOp, pipeline: str = "fuse") -> ModuleOp:
    copy = module.clone()
    Pipeline.parse(pipeline).run(copy)
    return copy


def kernels(module: ModuleOp) -> list[FuncOp]:
    return [f for f in module.ops if isinstance(f, FuncOp) and is_kernel(f)]


def assert_well_formed(module: ModuleOp, max_ops: int = 256) -> None:
    """Verified, operands dominate their uses, text round trip, kernels are kernels (with
    at most `max_ops` ops), callers keep only dead elementwise ops."""
    verify_module(module)
    position = {op: i for op in module.walk() for r in op.regions for b in r.blocks
                for i, op in enumerate(b.ops)}
    for op in module.walk():
        for value in op.operands:
            owner = value.owner
            if isinstance(owner, Block):
                assert owner.find_ancestor_op_in_block(op) is not None, op
            else:
                user = owner.parent.find_ancestor_op_in_block(op)
                assert user is not None and position[owner] < position[user], op
    text = module_to_text(module)
    assert module_to_text(parse_module(text)) == text
    names = {f.sym_name.data for f in kernels(module)}
    for function in (f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks):
        body = list(function.body.block.ops)
        if function.sym_name.data in names:
            assert all(isinstance(op, ElementwiseOp | ConstantOp | ReturnOp)
                       or is_fusible_reduction(op) for op in body)
            assert sum(isinstance(op, ElementwiseOp) for op in body) <= max_ops
            assert analyse(function).outputs  # codegen accepts it
        else:
            # What is left is dead: used by nothing but other elementwise ops left (a pow
            # of integers, which may refuse its values, is never fused).
            left = [op for op in body if is_fusible(op)]
            assert all(isinstance(use.operation, ElementwiseOp)
                       for op in left for use in op.result.uses)


def compiled_matches_evaluator(module: ModuleOp, kernel: FuncOp, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    inputs = []
    for ty in kernel.function_type.inputs.data:
        aval = shaped_type(ty)
        shape = tuple(DYNAMIC_DIM if d is None else d for d in aval.shape)
        value = rng.normal(size=shape) if dtypes.is_floating(aval.dtype) else rng.random(shape)
        inputs.append(np.asarray(value > 0.5 if aval.dtype == dtypes.bool_ else value,
                                 aval.dtype))
    want = evaluate(module, kernel.sym_name.data, inputs)
    got = compile_kernel(kernel)(*inputs)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)


# --- The lit test's functions --------------------------------------------------------------


@pytest.mark.parametrize("pipeline", ["fuse", "fuse{max-ops=1}", "fuse{max-ops=3}"])
def test_lit_functions_keep_their_behaviour(pipeline: str) -> None:
    module = parse_module(LIT.read_text())
    optimized = check_pipeline(module, pipeline)
    max_ops = int(pipeline.split("=")[1][:-1]) if "=" in pipeline else 256
    assert_well_formed(optimized, max_ops)
    assert module_to_text(fused(optimized, pipeline)) == module_to_text(optimized)  # fixed point
    assert module_to_text(check_pipeline(module, pipeline)) == module_to_text(optimized)


def test_matmul_epilogues_keep_their_behaviour() -> None:
    module = parse_module((LIT.parent / "fuse-matmul.mlir").read_text())
    optimized = check_pipeline(module, "fuse")
    names = [op.name for op in optimized.walk() if op.name.startswith("sf.matmul")]
    assert names.count("sf.matmul_add") == 2 and names.count("sf.matmul") == 4


def test_staged_matmul_epilogues_match_eager_and_the_interpreter() -> None:
    rng = np.random.default_rng(0)
    w = sf.Variable(rng.standard_normal((5, 7)).astype(np.float32))
    b = sf.constant(rng.standard_normal(7).astype(np.float32))

    def step(x, g):
        h = sf.nn.relu(sf.matmul(x, w) + b)
        w.assign(w - 0.1 * sf.matmul(x, g, transpose_a=True))
        return h

    spec = sf.TensorSpec([None, 5], sf.float32), sf.TensorSpec([None, 7], sf.float32)
    compiled = sf.function(step, input_signature=list(spec))
    assert compiled.get_concrete_function().ir("optimized").count("sf.matmul_add") == 2
    interpreted = sf.function(step, input_signature=list(spec), jit=False)
    start = w.numpy()
    results = []
    for run in (step, interpreted, compiled):
        w.assign(start)
        x, g = (sf.constant(rng.standard_normal((3, n)).astype(np.float32)) for n in (5, 7))
        results.append((run(x, g).numpy(), w.numpy(), x.numpy(), g.numpy()))
    for h, new_w, x, g in results:
        np.testing.assert_allclose(h, np.maximum(x @ start + b.numpy(), 0), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(new_w, start - 0.1 * x.T @ g, rtol=1e-5, atol=1e-6)


def test_every_lit_kernel_compiles_and_matches_the_evaluator() -> None:
    """For the CPU (run against the evaluator) and as PTX (emitted)."""
    module = fused(parse_module(LIT.read_text()))
    found = kernels(module)
    assert len(found) > 10
    for kernel in found:
        compiled_matches_evaluator(module, kernel)
        if not analyse(kernel).reductions:  # PTX kernels are elementwise
            assert ".entry" in PTXTarget().compile(kernel)


def test_every_elementwise_primitive_has_a_lowering() -> None:
    """`fuse` takes the elementwise family for what codegen compiles: they must agree."""
    elementwise = {p for p in REGISTRY.values() if issubclass(op_class(p), ElementwiseOp)}
    assert elementwise <= set(RULES)


def test_max_ops_must_be_positive() -> None:
    assert parse_pipeline("fuse{max-ops=7}")[0].max_ops == 7
    with pytest.raises(PassSpecError, match="max-ops must be >= 1"):
        parse_pipeline("fuse{max-ops=0}")


def test_default_pipeline_ends_with_fuse_schedule_then_plan_buffers() -> None:
    assert DEFAULT_PIPELINE.split(",")[-3:] == ["fuse", "schedule", "plan-buffers"]


# --- A traced function ---------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_batch_norm_scales_are_computed_once_per_channel(policy: str) -> None:
    """An inference batch norm's scale and shift (from its variables, each call) are a
    kernel of their own, over the channels, which the image's kernel reads: its loop over
    the pixels has no reciprocal square root. Eager, interpreted and compiled agree."""
    sf.keras.mixed_precision.set_global_policy(policy)
    try:
        norm = sf.layers.BatchNormalization()
        x = sf.constant(np.random.default_rng(1).standard_normal((2, 5, 5, 24))
                        .astype(np.float32))
        norm(x, training=True)  # builds it and moves the moving statistics off 0 and 1
        norm.moving_variance.assign(np.linspace(0.5, 2.0, 24).astype(np.float32))

        def infer(x):
            return sf.nn.relu(norm(x, training=False))

        compiled = sf.function(infer)
        text = compiled.get_concrete_function(x).ir("optimized")
        kernel_texts = text.split("func.func @")[2:]
        pixels = [k for k in kernel_texts if "5x5x24" in k.split("{", 1)[0]]
        channels = [k for k in kernel_texts if "5x5x24" not in k.split("{", 1)[0]]
        assert len(pixels) == 1 and "sf.rsqrt" not in pixels[0]
        assert any("sf.rsqrt" in k for k in channels)
        want = infer(x).numpy()
        for run in (compiled, sf.function(infer, jit=False)):
            np.testing.assert_array_equal(run(x).numpy(), want)
    finally:
        sf.keras.mixed_precision.set_global_policy(None)


def test_traced_mlp_ends_with_kernels_and_calls() -> None:
    rng = np.random.default_rng(0)
    w1 = sf.Variable(rng.normal(size=(4, 16)).astype(np.float32))
    b1 = sf.Variable(np.zeros(16, np.float32))
    w2 = sf.Variable(rng.normal(size=(16, 3)).astype(np.float32))

    @sf.function
    def mlp(x):
        h = sf.nn.gelu(sf.matmul(x, w1) + b1, approximate=True)
        return sf.nn.softmax(sf.matmul(h, w2) * 0.5)

    concrete = mlp.get_concrete_function(sf.TensorSpec((None, 4), sf.float32))
    text = concrete.ir("optimized")
    assert "attributes {sf.kernel}" in text and "{callee = @mlp_kernel0" in text
    module = graph_module(concrete.graph, concrete.name)
    optimized = check_pipeline(module, DEFAULT_PIPELINE)
    assert_well_formed(optimized)
    entry = next(iter(optimized.ops))
    assert isinstance(entry, FuncOp)
    assert not any(isinstance(op, ElementwiseOp) for op in entry.walk())
    calls = [callee_name(op) for op in entry.walk() if callee_name(op)]
    assert calls and all(name.startswith("mlp_kernel") for name in calls)
    # The bias add joins the matmul (`fuse_matmul`); gelu's nine ops are one kernel.
    assert [op.name for op in entry.walk() if op.name.startswith("sf.matmul")] == [
        "sf.matmul_add", "sf.matmul"]
    first = next(f for f in kernels(optimized) if f.sym_name.data == calls[0])
    assert sum(isinstance(op, ElementwiseOp) for op in first.walk()) == 9
    for kernel in kernels(optimized):
        compiled_matches_evaluator(optimized, kernel)


# --- Random programs -----------------------------------------------------------------------

UNARY = ("exp", "tanh", "negative", "abs", "logistic", "sqrt")
BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum")


@st.composite
def programs(draw: st.DrawFn) -> str:
    """A function over ``f32[R, 4]`` (R is 2 or ``?``), ``f32[4]``, ``f32[]`` and a
    variable: elementwise ops (broadcasting, comparisons, select, casts), constants (0-d,
    splat, distinct elements), reductions, matmul, reshapes, variable reads, writes and
    prints, in random order and wiring."""
    rows = draw(st.sampled_from([2, None]))
    arg_types = [ShapedType((rows, 4), F32), ShapedType((4,), F32), ShapedType((), F32),
                 ResourceType(ShapedType((4,), F32))]

    def body(args):
        ops: list[Operation] = []
        pool = list(args[:3])

        def add(op: Operation) -> Operation:
            ops.append(op)
            pool.extend(r for r in op.results if shaped_type(r.type).dtype == F32)
            return op

        def emit(name: str, operands: list, **params) -> Operation:
            """The op on `operands`, or with the last one for the others after the first if
            they do not broadcast (select's condition is first)."""
            try:
                result = REGISTRY[name].shape_rule(*(shaped_type(v.type) for v in operands),
                                                   **params)
            except ValueError:
                operands = [operands[0]] * (len(operands) - 2) + [operands[-2]] * 2
                result = REGISTRY[name].shape_rule(*(shaped_type(v.type) for v in operands),
                                                   **params)
            return add(build_op(name, operands, params, result))

        def pick(rank: int | None = None):
            choices = [v for v in pool if rank is None or len(shaped_type(v.type).shape) == rank]
            return draw(st.sampled_from(choices or pool))

        for _ in range(draw(st.integers(1, 16))):
            kind = draw(st.sampled_from(["unary", "binary", "binary", "binary", "constant",
                                         "select", "cast", "reduce", "matmul", "reshape",
                                         "state"]))
            x = pick()
            if kind == "unary":
                emit(draw(st.sampled_from(UNARY)), [x])
            elif kind == "binary":
                operands = draw(st.permutations([x, pick()]))
                emit(draw(st.sampled_from(BINARY)), operands)
            elif kind == "constant":
                shape = draw(st.sampled_from([(), (4,), (1, 4)]))
                value = draw(st.sampled_from([np.full(shape, 0.5), np.linspace(-1, 1, 4)]))
                constant = add(build_constant(value.astype(np.float32)))
                emit(draw(st.sampled_from(BINARY)), [x, constant.results[0]])
            elif kind == "select":
                condition = emit("greater", [x, pick()]).results[0]
                emit("select", [condition, x, pick()])
            elif kind == "cast":
                wide = emit("cast", [x], dtype=dtypes.float64).results[0]
                emit("cast", [wide], dtype=F32)
            elif kind == "reduce":
                name = draw(st.sampled_from(["reduce_sum", "reduce_max"]))
                rank = len(shaped_type(x.type).shape)
                axes = draw(st.sampled_from([(a,) for a in range(rank)] or [()]))
                emit(name, [x], axes=axes, keepdims=draw(st.booleans()))
            elif kind == "matmul":
                weights = add(build_constant(np.arange(16, dtype=np.float32).reshape(4, 4) / 8))
                matrices = [v for v in pool if len(shaped_type(v.type).shape) == 2
                        and shaped_type(v.type).shape[1] == 4]
                emit("matmul", [draw(st.sampled_from(matrices)), weights.results[0]],
                     transpose_a=False, transpose_b=draw(st.booleans()))
            elif kind == "reshape":
                vector = pick(1)
                if shaped_type(vector.type).shape == (4,):
                    emit("reshape", [vector], shape=(1, 4))
                else:
                    emit("transpose", [pick(2)], perm=(1, 0))
            else:
                vector = [v for v in pool if shaped_type(v.type).shape == (4,)]
                add(build_op("read_variable", [args[3]], {}, ShapedType((4,), F32)))
                if vector and draw(st.booleans()):
                    ops.append(build_op("assign_variable", [args[3], vector[-1]], {}, []))
                else:
                    ops.append(build_op("print", [x], {"pieces": ("v", None), "sep": " "}, []))
        count = draw(st.integers(1, 3))
        return ops, [pool[-1 - i] for i in range(min(count, len(pool)))]

    return module_to_text(ModuleOp([build_function("f", arg_types, body)]))


@settings(max_examples=40)
@given(programs(), st.sampled_from(["fuse", "fuse{max-ops=2}", "prune,fuse"]))
def test_random_programs_keep_their_behaviour(text: str, pipeline: str) -> None:
    module = parse_module(text)
    optimized = check_pipeline(module, pipeline, seeds=range(2))
    assert_well_formed(optimized, 2 if "max-ops" in pipeline else 256)
    text = module_to_text(optimized)
    assert module_to_text(fused(module, pipeline)) == text  # deterministic
    assert module_to_text(fused(optimized, "fuse")) == text  # a fixed point
    if pipeline == "prune,fuse":  # nothing dead is left: every elementwise op is in a kernel
        caller = optimized.ops.first
        assert not any(isinstance(op, ElementwiseOp) for op in caller.walk())


@settings(max_examples=10)
@given(programs())
def test_random_kernels_compile_and_match_the_evaluator(text: str) -> None:
    optimized = fused(parse_module(text), "prune,fuse")
    for kernel in kernels(optimized)[:3]:
        compiled_matches_evaluator(optimized, kernel)
