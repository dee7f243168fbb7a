"""Run-time dims (`codegen.program.runtime_dims`) against the shapes eager execution gives.

Each test traces a function with unknown dims, optionally runs the default pipeline (so
fused kernel calls appear), emits ``void dims(i64* in, i64* out)`` that loads every
argument dim from ``in``, calls `function_dims` and stores the dims of every returned value
to ``out``, JIT-compiles it and calls it for concrete input shapes.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from llvmlite import binding as llvm
from llvmlite import ir
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp

import stageflow as sf
from stageflow.codegen.llvm.dim_arith import LLVMDims
from stageflow.codegen.llvm.emitter import I64
from stageflow.codegen.lowered.rule import i64
from stageflow.codegen.program.runtime_dims import function_dims
from stageflow.core.primitive import REGISTRY
from stageflow.ir.from_graph import graph_module
from stageflow.ir.text import parse_module
from stageflow.passes import DEFAULT_PIPELINE, Pipeline
from stageflow.primitives.conv import window_output_size, window_positions
from stageflow.primitives.structural import slice_p

Shape = tuple[int, ...]
DimsFunction = Callable[[Sequence[Shape]], list[Shape]]


@pytest.fixture(scope="module")
def engine() -> llvm.ExecutionEngine:
    """One JIT for the module: each test adds its own LLVM module with a unique name."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine()
    return llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)


_names = itertools.count()


def emit_dims(module: ModuleOp, name: str) -> tuple[ir.Module, str]:
    """The LLVM module of ``void NAME(i64* in, i64* out)`` for function @name of `module`."""
    functions = {f.sym_name.data: f for f in module.ops if isinstance(f, FuncOp)}
    function = functions[name]
    symbol = f"dims{next(_names)}"
    llvm_module = ir.Module(name=symbol)
    llvm_module.triple = llvm.get_process_triple()
    pointer = I64.as_pointer()
    entry = ir.Function(llvm_module, ir.FunctionType(ir.VoidType(), [pointer, pointer]), symbol)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    inputs, outputs = entry.args
    slot = itertools.count()
    arg_dims = []
    for arg in function.body.block.args:
        rank = len(arg.type.get_shape()) if isinstance(arg.type, TensorType) else 0
        arg_dims.append([b.load(b.gep(inputs, [i64(next(slot))])) for _ in range(rank)])
    dims = function_dims(b, function, arg_dims, functions)
    position = itertools.count()
    for value in function.body.block.last_op.operands:
        for dim in dims[value]:
            b.store(dim, b.gep(outputs, [i64(next(position))]))
    b.ret_void()
    return llvm_module, symbol


def compile_dims(engine: llvm.ExecutionEngine, module: ModuleOp, name: str) -> DimsFunction:
    """A Python function: the shapes of every argument (captures included) -> the shapes of
    the returned values."""
    llvm_module, symbol = emit_dims(module, name)
    parsed = llvm.parse_assembly(str(llvm_module))
    parsed.verify()
    engine.add_module(parsed)
    engine.finalize_object()
    address = engine.get_function_address(symbol)
    c_function = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_int64),
                                  ctypes.POINTER(ctypes.c_int64))(address)
    function = next(f for f in module.ops if isinstance(f, FuncOp) and f.sym_name.data == name)
    ranks = [len(v.type.get_shape()) for v in function.body.block.last_op.operands]

    def run(shapes: Sequence[Shape]) -> list[Shape]:
        flat = [d for shape in shapes for d in shape]
        inputs = (ctypes.c_int64 * max(len(flat), 1))(*flat)
        outputs = (ctypes.c_int64 * max(sum(ranks), 1))()
        c_function(inputs, outputs)
        result, start = [], 0
        for rank in ranks:
            result.append(tuple(outputs[start:start + rank]))
            start += rank
        return result

    return run


def traced_module(fn: Callable, specs: list[sf.TensorSpec], optimise: bool) -> tuple[
        ModuleOp, str, list[Shape]]:
    """`fn` traced on `specs` as a module, with the static shapes of its captures (``()`` for
    a variable handle, which has no dims)."""
    concrete = sf.function(fn, input_signature=specs).get_concrete_function()
    module = graph_module(concrete.graph, concrete.name)
    if optimise:
        Pipeline.parse(DEFAULT_PIPELINE).run(module)
    function = next(f for f in module.ops if isinstance(f, FuncOp)
                    and f.sym_name.data == concrete.name)
    captures = [tuple(arg.type.get_shape()) if isinstance(arg.type, TensorType) else ()
                for arg in function.body.block.args[len(specs):]]
    return module, concrete.name, captures


def check(engine: llvm.ExecutionEngine, fn: Callable, specs: list[sf.TensorSpec],
          shape_sets: Sequence[Sequence[Shape]], optimise: bool = True,
          make: Callable[[Shape], np.ndarray] | None = None) -> None:
    """The compiled dims of `fn`'s results equal those of running it eagerly, for each set of
    argument shapes."""
    module, name, captures = traced_module(fn, specs, optimise)
    dims = compile_dims(engine, module, name)
    rng = np.random.default_rng(0)
    make = make or (lambda shape: rng.standard_normal(shape).astype(np.float32))
    for shapes in shape_sets:
        results = fn(*[sf.constant(make(shape)) for shape in shapes])
        results = results if isinstance(results, tuple | list) else (results,)
        expected = [tuple(r.shape) for r in results]
        assert dims([*shapes, *captures]) == expected, (shapes, name)


@pytest.mark.parametrize("optimise", [True, False])
def test_mlp_forward_with_unknown_batch(engine, optimise):
    rng = np.random.default_rng(1)
    w1 = sf.constant(rng.standard_normal((8, 16)).astype(np.float32))
    b1 = sf.constant(rng.standard_normal(16).astype(np.float32))
    w2 = sf.constant(rng.standard_normal((16, 4)).astype(np.float32))
    b2 = sf.constant(rng.standard_normal(4).astype(np.float32))

    def mlp(x):
        hidden = sf.nn.relu(sf.matmul(x, w1) + b1)
        return sf.nn.softmax(sf.matmul(hidden, w2) + b2)

    check(engine, mlp, [sf.TensorSpec([None, 8])], [[(n, 8)] for n in (0, 1, 3, 17)],
          optimise)


@pytest.mark.parametrize("optimise", [True, False])
def test_kernel_call_broadcasts_a_dim_of_one(engine, optimise):
    def f(x, y):
        return sf.tanh(x + y) * 2.0, x - 1.0

    specs = [sf.TensorSpec([None, None]), sf.TensorSpec([None, None])]
    shape_sets = [[(1, 5), (4, 1)], [(4, 1), (1, 5)], [(3, 5), (3, 5)], [(1, 1), (2, 7)],
                  [(6, 2), (1, 1)], [(0, 3), (1, 3)]]
    check(engine, f, specs, shape_sets, optimise)


@st.composite
def broadcast_case(draw: st.DrawFn) -> tuple[list[sf.TensorSpec], list[list[Shape]]]:
    """Two or three broadcast-compatible shapes, each dim known or not in the signature."""
    rank = draw(st.integers(0, 3))
    full = draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank))
    count = draw(st.integers(2, 3))
    specs, shapes = [], []
    for _ in range(count):
        own_rank = draw(st.integers(0, rank))
        shape = tuple(d if draw(st.booleans()) else 1 for d in full[rank - own_rank:])
        known = [draw(st.booleans()) for _ in shape]
        specs.append(sf.TensorSpec([d if k else None for d, k in zip(shape, known,
                                                                     strict=True)]))
        shapes.append(shape)
    return specs, [shapes]


@given(broadcast_case(), st.booleans())
def test_elementwise_broadcasting(engine, case, optimise):
    specs, shape_sets = case
    if len(specs) == 2:
        def fn(x, y):
            return sf.exp(x) * y
    else:
        def fn(x, y, z):
            return sf.where(sf.greater(x, 0.0), y, z)
    check(engine, fn, specs, shape_sets, optimise)


def test_reshape_with_an_unknown_dim(engine):
    def f(x):
        return sf.reshape(x, (-1, 3)), sf.reshape(x, (2, -1, 3)), sf.reshape(x, (-1,))

    check(engine, f, [sf.TensorSpec([None, 6])], [[(n, 6)] for n in (0, 1, 4)])


SLICES = st.tuples(st.none() | st.integers(-7, 7), st.none() | st.integers(-7, 7),
                   st.none() | st.integers(-3, 3).filter(bool))


@given(st.lists(st.tuples(SLICES, SLICES), min_size=1, max_size=4))
def test_slices_with_any_steps(engine, slices):
    def f(x):
        return tuple(slice_p.bind(x, slices=s) for s in slices)

    module, name, _ = traced_module(f, [sf.TensorSpec([None, None])], optimise=False)
    dims = compile_dims(engine, module, name)
    for shape in [(0, 0), (1, 5), (6, 2), (9, 9)]:
        x = np.zeros(shape)
        expected = [x[tuple(slice(*t) for t in s)].shape for s in slices]
        assert dims([shape]) == expected, (shape, slices)


def test_slices_with_negative_steps(engine):
    def f(x):
        return (slice_p.bind(x, slices=((None, None, -1), (1, None, None))),
                slice_p.bind(x, slices=((-2, None, -2), (None, -1, None))),
                slice_p.bind(x, slices=((5, 1, -1), (None, None, 3))),
                slice_p.bind(x, slices=((None, -1, 2), (-3, None, -1))))

    check(engine, f, [sf.TensorSpec([None, None])],
          [[(n, m)] for n in (0, 1, 2, 7) for m in (0, 1, 4, 9)])


@pytest.mark.parametrize("optimise", [True, False])
def test_concat(engine, optimise):
    def f(x, y):
        return sf.concat([x, y, x], axis=0), sf.concat([x, sf.exp(y)], axis=-1)

    check(engine, f, [sf.TensorSpec([None, 3]), sf.TensorSpec([None, None])],
          [[(2, 3), (2, 3)], [(0, 3), (0, 3)], [(5, 3), (5, 3)]], optimise)


def test_matmul_batches_broadcast_and_transposes(engine):
    def f(a, b):
        return (sf.matmul(a, b), sf.matmul(a, a, transpose_a=True),
                sf.matmul(b, a, transpose_a=True, transpose_b=True))

    specs = [sf.TensorSpec([None, None, 4]), sf.TensorSpec([None, 4, None])]
    check(engine, f, specs, [[(1, 3, 4), (2, 4, 3)], [(5, 3, 4), (1, 4, 3)],
                             [(2, 3, 4), (2, 4, 3)]])


def test_factorizations_and_solvers(engine):
    """k = min(m, n) of qr and svd is a run-time min; full matrices take m (and n)."""
    def f(a, s, b):
        q, r = sf.linalg.qr(a)
        full_q, full_r = sf.linalg.qr(a, full_matrices=True)
        sv, u, v = sf.linalg.svd(a)
        _, full_u, full_v = sf.linalg.svd(a, full_matrices=True)
        w, vectors = sf.linalg.eigh(s)
        sign, log_abs = sf.linalg.slogdet(s)
        return (q, r, full_q, full_r, sv, u, v, full_u, full_v, w, vectors, sign, log_abs,
                sf.linalg.inv(s), sf.linalg.cholesky(s), sf.linalg.solve(s, b),
                sf.linalg.triangular_solve(s, b))

    def make(shape: Shape) -> np.ndarray:
        if shape[-1] == shape[-2]:  # symmetric positive definite
            return np.broadcast_to(np.eye(shape[-1]), shape).astype(np.float32) * 2.0
        return np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    specs = [sf.TensorSpec([None, None, None]), sf.TensorSpec([None, None, None]),
             sf.TensorSpec([None, None, None])]
    check(engine, f, specs, [[(2, 5, 3), (2, 4, 4), (2, 4, 1)],
                             [(1, 2, 6), (3, 2, 2), (3, 2, 5)],
                             [(0, 3, 1), (0, 1, 1), (0, 1, 3)]], make=make)


def test_reductions_transpose_pad_and_gather(engine):
    def f(x, i):
        return (sf.reduce_sum(x, axis=1), sf.reduce_max(x, axis=(0, 2), keepdims=True),
                sf.argmax(x, axis=-1), sf.transpose(x, (2, 0, 1)),
                sf.pad(x, [(1, 2), (0, 0), (3, 0)]), sf.gather(x, i, axis=1))

    def make(shape: Shape) -> np.ndarray:
        return (np.zeros(shape, np.int32) if len(shape) == 2
                else np.ones(shape, np.float32))

    specs = [sf.TensorSpec([None, None, 2]), sf.TensorSpec([None, None], sf.int32)]
    check(engine, f, specs, [[(3, 4, 2), (5, 1)], [(1, 2, 2), (0, 3)]], make=make)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("strides", [1, 2])
def test_conv2d_and_pooling(engine, padding, strides):
    w = sf.constant(np.ones((3, 2, 2, 5), np.float32))
    spatial = None if (padding, strides) != ("SAME", 2) else 9

    def f(x):
        return (sf.nn.conv2d(x, w, strides, padding), sf.nn.max_pool2d(x, 2, strides, padding),
                sf.nn.conv2d(x, w, 1, padding, dilations=2))

    sizes = (5, 6, 9) if spatial is None else (9,)
    check(engine, f, [sf.TensorSpec([None, spatial, spatial, 2])],
          [[(n, h, h + 1 if spatial is None else h, 2)] for n in (1, 3) for h in sizes])


def test_call_of_another_function(engine):
    @sf.function
    def inner(x):
        return sf.reduce_sum(x * 2.0, axis=0), sf.transpose(x, (1, 0))

    def outer(x):
        total, flipped = inner(x)
        return flipped + 1.0, total

    check(engine, outer, [sf.TensorSpec([None, None])], [[(2, 3)], [(5, 1)]], optimise=False)


def test_kernel_call_with_partly_static_operands(engine):
    module = parse_module("""
    func.func @f(%x: tensor<4x?xf32>, %y: tensor<?x1xf32>) -> tensor<4x?xf32> {
      %z = sf.call %x, %y {callee = @k} : (tensor<4x?xf32>, tensor<?x1xf32>) -> tensor<4x?xf32>
      func.return %z : tensor<4x?xf32>
    }
    func.func @k(%a: tensor<4x?xf32>, %b: tensor<?x1xf32>) -> tensor<4x?xf32>
        attributes {sf.kernel} {
      %c = sf.add %a, %b : (tensor<4x?xf32>, tensor<?x1xf32>) -> tensor<4x?xf32>
      func.return %c : tensor<4x?xf32>
    }
    """)
    dims = compile_dims(engine, module, "f")
    assert dims([(4, 1), (1, 1)]) == [(4, 1)]
    assert dims([(4, 6), (4, 1)]) == [(4, 6)]


def test_static_types_emit_no_arithmetic():
    module, name, _ = traced_module(
        lambda x: sf.reduce_sum(sf.reshape(x, (-1,))[::-2], axis=0) + x[0, 0],
        [sf.TensorSpec([4, 6])], optimise=True)
    llvm_module, _ = emit_dims(module, name)
    opcodes = {i.opname for block in llvm_module.functions[0].blocks for i in block.instructions}
    assert opcodes <= {"load", "store", "getelementptr", "ret void"}


def test_resources_have_no_dims(engine):
    step = sf.Variable(np.zeros((3,), np.float32))

    def f(x):
        step.assign_add(sf.reduce_sum(x, axis=0))
        return x * step.read_value()

    module, name, _ = traced_module(f, [sf.TensorSpec([None, 3])], optimise=True)
    dims = compile_dims(engine, module, name)
    assert dims([(5, 3)]) == [(5, 3)]


def test_value_dependent_dims_raise():
    module = parse_module("""
    func.func @f(%v: !sf.resource<tensor<?xf32>>) -> tensor<?xf32> {
      %x = sf.read_variable %v : (!sf.resource<tensor<?xf32>>) -> tensor<?xf32>
      func.return %x : tensor<?xf32>
    }
    """)
    with pytest.raises(NotImplementedError, match="sf.read_variable"):
        emit_dims(module, "f")


def test_first_not_one_folds_constants():
    d = LLVMDims(ir.IRBuilder())
    assert d.first_not_one([i64(1), i64(5), i64(7)]).constant == 5
    assert d.first_not_one([i64(1), i64(1)]).constant == 1
    assert d.first_not_one([]).constant == 1


@st.composite
def reshape_case(draw: st.DrawFn) -> tuple[Shape, list[bool], tuple[int, ...]]:
    """An input shape, which of its dims the signature leaves unknown, and a target shape
    that regroups its dims with one group written -1."""
    dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    cuts = sorted(draw(st.sets(st.integers(1, len(dims) - 1), max_size=len(dims) - 1))
                  if len(dims) > 1 else [])
    bounds = [0, *cuts, len(dims)]
    inferred = draw(st.integers(0, len(bounds) - 2))
    if 0 in dims[:bounds[inferred]] + dims[bounds[inferred + 1]:]:
        dims = [max(d, 1) for d in dims]  # -1 cannot stand beside a 0 dim
    groups = [int(np.prod(dims[lo:hi])) for lo, hi in itertools.pairwise(bounds)]
    target = tuple(-1 if i == inferred else g for i, g in enumerate(groups))
    unknown = draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
    return tuple(dims), unknown, target


@given(reshape_case())
def test_reshape_regroupings(engine, case):
    shape, unknown, target = case

    def f(x):
        return sf.reshape(x, target)

    spec = sf.TensorSpec([None if u else d for d, u in zip(shape, unknown, strict=True)])
    check(engine, f, [spec], [[shape]], optimise=False)


@given(st.integers(0, 12), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
       st.integers(0, 2), st.integers(1, 2))
def test_window_positions_match_the_shape_rule(engine, size, window, stride, lo, hi,
                                                dilation):
    symbol = f"window{next(_names)}"
    llvm_module = ir.Module(name=symbol)
    llvm_module.triple = llvm.get_process_triple()
    function = ir.Function(llvm_module, ir.FunctionType(I64, [I64, I64]), symbol)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    b.ret(window_positions(LLVMDims(b), function.args[0], function.args[1], stride, (lo, hi),
                           dilation))
    engine.add_module(llvm.parse_assembly(str(llvm_module)))
    engine.finalize_object()
    positions = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address(symbol))
    try:
        expected = window_output_size(size, window, stride, (lo, hi), dilation)
    except ValueError:  # the window does not fit: the op fails, its dim is clamped at 0
        expected = 0
    assert positions(size, window) == max(expected, 0)


# Primitives without a dims function: a call is resolved through its callee; the others have
# results whose dims the types fix (from params, or 0-d), none, or a variable's value; or
# they only ever run on the host (their results' sizes depend on the values), so no
# program computes their dims.
WITHOUT_RULE = {"call", "constant", "random_bits", "dim_size", "read_variable",
                "assign_variable", "print", "cond", "while", "py_func", "nonzero", "unique"}


def test_every_primitive_is_covered():
    uncovered = {name for name, primitive in REGISTRY.items()
                 if primitive.dims is None and name not in WITHOUT_RULE}
    assert not uncovered
    assert not {name for name in WITHOUT_RULE if REGISTRY[name].dims is not None}
