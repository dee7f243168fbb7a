"""The `sf` dialect: one op per primitive, verified by the primitives' own shape rules, and
textual IR that round-trips exactly (ops, params, constants, locations)."""

from __future__ import annotations

import io
import threading
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

import stageflow as sf
from stageflow import cli
from stageflow.core import dtypes
from stageflow.core.op_facts import Family
from stageflow.core.primitive import REGISTRY, Primitive, ResourceType, ShapedType
from stageflow.core.source import SourceLocation
from stageflow.ir import (
    BinaryElementwiseOp,
    ConstantOp,
    IRError,
    ReductionOp,
    SfOp,
    StructuralOp,
    UnaryElementwiseOp,
    build_constant,
    build_function,
    build_op,
    constant_value,
    decode,
    encode,
    module_to_text,
    op_class,
    parse_module,
    sf_dialect,
    shaped_type,
    tensor_type,
)
from stageflow.ir.control import CondOp, ControlOp, WhileOp
from stageflow.primitives.elementwise import ElementwisePrimitive

F32, F64, I32, I64 = dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64
U32, BOOL, BF16 = dtypes.uint32, dtypes.bool_, dtypes.bfloat16


def T(*shape: int | None, dtype: np.dtype = F32) -> ShapedType:
    return ShapedType(tuple(shape), dtype)


def module_with(primitive: str, avals: list, params: dict, results: Any = None) -> ModuleOp:
    """A module with one function applying `primitive` to its arguments."""
    if results is None:
        results = REGISTRY[primitive].abstract_eval(*avals, **params)

    def body(args):
        op = build_op(primitive, args, params, results)
        return [op], list(op.results)

    return ModuleOp([build_function("f", avals, body)])


# One case per non-elementwise primitive (elementwise ones are generated below).
CASES: dict[str, tuple[list, dict]] = {
    "select": ([T(4, dtype=BOOL), T(4), T(1)], {}),
    "cast": ([T(2, None)], {"dtype": BF16}),
    "matmul": ([T(None, 3, 4), T(4, 5)], {"transpose_a": False, "transpose_b": False}),
    "reduce_sum": ([T(4, None, 8)], {"axes": (0, 2), "keepdims": False}),
    "reduce_prod": ([T(4, 8, dtype=I32)], {"axes": (1,), "keepdims": True}),
    "reduce_max": ([T(4, 8)], {"axes": (), "keepdims": False}),
    "reduce_min": ([T(4, 8)], {"axes": (0, 1), "keepdims": False}),
    "argmax": ([T(4, 8)], {"axis": 1}),
    "argmin": ([T(4, 8)], {"axis": -1}),
    "broadcast_to": ([T(3, 1)], {"shape": (2, 3, 5)}),
    "reshape": ([T(2, 3, 4)], {"shape": (-1, 4)}),
    "transpose": ([T(2, 3, 4)], {"perm": (2, 0, 1)}),
    "slice": ([T(8, None)], {"slices": ((1, None, 2), (None, -1, None))}),
    "concat": ([T(2, 3), T(4, 3), T(1, 3)], {"axis": 0}),
    "pad": ([T(2, 3)], {"pads": ((1, 0), (2, 2)), "value": 0.5}),
    "gather": ([T(10, 16), T(None, 3, dtype=I32)], {"axis": 0}),
    "iota": ([], {"shape": (2, 3), "dtype": I64, "dimension": 1}),
    "constant": ([], {"value": np.arange(6, dtype=np.float32).reshape(2, 3)}),
    "random_bits": ([T(4, dtype=U32)], {"shape": (2, 3)}),
    "read_variable": ([ResourceType(T(2, 3))], {}),
    "assign_variable": ([ResourceType(T(2, 3)), T(2, 3)], {}),
    "conv2d": (
        [T(None, 8, 8, 3), T(3, 3, 3, 4)],
        {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)},
    ),
    "reduce_window": (
        [T(None, 8, 8, 3)],
        {"kind": "max", "window": (2, 2), "strides": (2, 2), "padding": ((0, 0), (0, 0))},
    ),
}


def elementwise_case(primitive: ElementwisePrimitive) -> tuple[list, dict]:
    dtype = F32 if F32 in primitive.operand_dtypes else sorted(primitive.operand_dtypes)[0]
    arity = len(op_class(primitive).get_irdl_definition().operands)
    shapes = [(4, None), (None,), (1, 1)][:arity]
    return [ShapedType(shape, dtype) for shape in shapes], {}


def all_cases() -> dict[str, tuple[list, dict]]:
    cases = dict(CASES)
    for name, primitive in REGISTRY.items():
        if isinstance(primitive, ElementwisePrimitive):
            cases[name] = elementwise_case(primitive)
    return {name: case for name, case in cases.items() if name in REGISTRY}


def test_every_primitive_has_an_op() -> None:
    names = {op.name for op in sf_dialect().operations}
    for name, primitive in REGISTRY.items():
        assert f"sf.{name}" in names
        cls = op_class(primitive)
        assert issubclass(cls, SfOp | ControlOp) and cls.name == f"sf.{name}"
        assert cls in (ConstantOp, CondOp, WhileOp) or cls.PRIMITIVE is primitive


def classes_defined_by_threads(primitive: Primitive, count: int = 8) -> list[type]:
    """`op_class(primitive)` in `count` threads released at once."""
    barrier, classes = threading.Barrier(count), []

    def define() -> None:
        barrier.wait()
        classes.append(op_class(primitive))

    threads = [threading.Thread(target=define) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return classes


def test_threads_defining_an_op_at_once_all_get_the_dialects_one_class() -> None:
    """Ops are defined on first use, which can be in several tracing threads at once."""
    for attempt in range(3):
        primitive = Primitive(f"defined_by_threads{attempt}", shape_rule=lambda x: x,
                              kernel=lambda x: x, summary="x", family=Family.STRUCTURAL)
        try:
            classes = classes_defined_by_threads(primitive)
            assert len(set(classes)) == 1 and classes[0] in sf_dialect().operations
        finally:
            del REGISTRY[primitive.name]
    assert not any(op.name.startswith("sf.defined_by_threads")
                   for op in sf_dialect().operations)


def test_ops_are_grouped_in_families() -> None:
    assert issubclass(op_class("exp"), UnaryElementwiseOp)
    assert issubclass(op_class("add"), BinaryElementwiseOp)
    assert issubclass(op_class("less"), BinaryElementwiseOp)
    assert issubclass(op_class("reduce_sum"), ReductionOp)
    assert issubclass(op_class("slice"), StructuralOp)
    assert op_class("concat").get_irdl_definition().operands[0][0] == "xs"


@pytest.mark.parametrize("name", sorted(all_cases()))
def test_built_op_verifies_and_round_trips(name: str) -> None:
    avals, params = all_cases()[name]
    module = module_with(name, avals, params)
    module.verify()
    text = module_to_text(module)
    assert f"sf.{name}" in text
    assert module_to_text(parse_module(text)) == text


@pytest.mark.parametrize("name", sorted(all_cases()))
def test_op_params_decode_to_what_was_built(name: str) -> None:
    avals, params = all_cases()[name]
    op = build_op(name, [], params, T(1))
    decoded = op.params()
    assert decoded.keys() == params.keys()
    for key, value in params.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(decoded[key], value)
        else:
            assert decoded[key] == value


def test_wrong_result_type_names_the_op() -> None:
    module = module_with("add", [T(4), T(4)], {}, T(5))
    with pytest.raises(VerifyException, match=r"'sf.add' op result #0 has type tensor<5xf32>"):
        module.verify()
    params = {"axes": (0,), "keepdims": False}
    module = module_with("reduce_sum", [T(4, 8)], params, T(8, dtype=I32))
    with pytest.raises(VerifyException, match="'sf.reduce_sum' op .* tensor<8xi32>"):
        module.verify()


def test_shape_rule_errors_become_verify_errors() -> None:
    module = module_with("add", [T(3), T(4)], {}, T(4))
    with pytest.raises(IRError, match=r"'sf.add' op shapes \(3,\) and \(4,\) are incompatible"):
        parse_module(module_to_text(module))


def test_dynamic_dims_are_compatible_either_way() -> None:
    module_with("add", [T(None), T(4)], {}, T(4)).verify()
    module_with("add", [T(4), T(4)], {}, T(None)).verify()
    with pytest.raises(VerifyException, match="rank|result"):
        module_with("add", [T(4), T(4)], {}, T(4, 1)).verify()


DTYPE = st.sampled_from(dtypes.ALL)
DIM = st.one_of(st.none(), st.integers(0, 6))
SHAPE = st.lists(DIM, max_size=4).map(tuple)


@given(shape=SHAPE, dtype=DTYPE, data=st.data())
def test_elementwise_round_trip(shape: tuple, dtype: np.dtype, data: st.DataObject) -> None:
    candidates = [
        p for p in REGISTRY.values()
        if isinstance(p, ElementwisePrimitive) and dtype in p.operand_dtypes
    ]
    primitive = data.draw(st.sampled_from(sorted(candidates, key=lambda p: p.name)))
    arity = len(op_class(primitive).get_irdl_definition().operands)
    avals = [ShapedType(shape, dtype)] * arity
    module = module_with(primitive.name, avals, {})
    module.verify()
    text = module_to_text(module)
    assert module_to_text(parse_module(text)) == text
    assert shaped_type(tensor_type(ShapedType(shape, dtype))) == ShapedType(shape, dtype)


PARAM = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False),
        st.text(max_size=5),
        st.sampled_from(dtypes.ALL),
    ),
    lambda inner: st.lists(inner, max_size=3).map(tuple),
    max_leaves=8,
)


@given(value=PARAM)
def test_params_encode_decode(value: Any) -> None:
    assert decode(encode(value)) == value
    op = build_op("iota", [], {"dtype": I32, "shape": (2,), "dimension": 0, "extra": value},
                  T(2, dtype=I32))
    module = ModuleOp([build_function("f", [], lambda _: ([op], []))])
    text = module_to_text(module)
    assert module_to_text(parse_module(text)) == text


@pytest.mark.parametrize("dtype", dtypes.ALL, ids=lambda d: d.name)
def test_constants_round_trip(dtype: np.dtype) -> None:
    if dtype in dtypes.UNSIGNED:  # the largest value too: 2**64 - 1 prints as no int64 does
        array = np.array([[0, 1, 2], [3, 4, np.iinfo(dtype).max]], dtype)
    else:
        array = np.asarray([[0, 1.5, -2], [3, 0.1, 7]]).astype(dtype)
    op = build_constant(array)
    module = ModuleOp([build_function("f", [], lambda _: ([op], list(op.results)))])
    module.verify()
    text = module_to_text(module)
    parsed = parse_module(text)
    assert module_to_text(parsed) == text
    constant = next(o for o in parsed.walk() if isinstance(o, ConstantOp))
    assert constant.value == op.value  # bytes equal: built and parsed constants are CSE-able
    np.testing.assert_array_equal(constant_value(constant).view(np.uint8), array.view(np.uint8))


def test_constant_scalars_and_splats() -> None:
    assert str(build_constant(np.float32(2.5)).value) == "dense<2.500000e+00> : tensor<f32>"
    assert "dense<7>" in str(build_constant(np.full((2, 2), 7, np.int64)).value)
    assert constant_value(build_constant(True)).dtype == BOOL
    assert constant_value(build_constant(1.0, ml_dtypes.bfloat16)).dtype == BF16


def test_locations_print_and_parse_back() -> None:
    where = SourceLocation("/tmp/my model.py", 12, 5)
    op = build_op("exp", [], {}, T(4), location=where)
    module = module_with("exp", [T(4)], {})
    function = next(iter(module.body.block.ops))
    exp = next(iter(function.body.block.ops))
    exp.location = op.location
    text = module_to_text(module, debuginfo=True)
    assert 'loc("/tmp/my model.py":12:5)' in text
    reparsed = parse_module(text)
    assert module_to_text(reparsed, debuginfo=True) == text
    assert 'loc(' not in module_to_text(reparsed)


def run_cli(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        import sys

        saved, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(list(argv))
    finally:
        if stdin is not None:
            sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def test_cli_opt_round_trips(tmp_path) -> None:
    text = module_to_text(module_with("matmul", *CASES["matmul"]))
    source = tmp_path / "in.mlir"
    source.write_text(text)
    assert run_cli("opt", str(source)) == (0, text, "")
    assert run_cli("opt", "-", stdin=text) == (0, text, "")
    target = tmp_path / "out.mlir"
    assert run_cli("opt", str(source), "-o", str(target))[0] == 0
    assert target.read_text() == text


def test_cli_opt_errors_are_one_line(tmp_path) -> None:
    code, out, err = run_cli("opt", str(tmp_path / "missing.mlir"))
    assert code == 1 and out == ""
    assert err.startswith("stageflow opt: error: cannot read") and err.count("\n") == 1
    bad = tmp_path / "bad.mlir"
    bad.write_text(module_to_text(module_with("add", [T(3), T(4)], {}, T(4))))
    code, _, err = run_cli("opt", str(bad))
    assert code == 1 and err.count("\n") == 1
    assert f"{bad}:3:5: 'sf.add' op shapes (3,) and (4,)" in err
    bad.write_text("func.func @f() {\n  %0 = sf.add : (tensor<2xf32>\n}\n")
    code, _, err = run_cli("opt", str(bad))
    assert code == 1 and err.count("\n") == 1 and f"{bad}:3:1: ')' expected" in err


def test_graph_module_gives_each_trace_its_own_symbol() -> None:
    import stageflow as sf
    from stageflow.ir.from_graph import graph_module

    @sf.function
    def double(x):
        return sf.add(x, x)

    @sf.function
    def both(a, b):
        return sf.reduce_sum(double(a)) + sf.reduce_sum(double(b))

    a, b = np.ones(2, np.float32), np.ones((3, 3), np.float32)
    concrete = both.get_concrete_function(a, b)
    module = graph_module(concrete.graph, concrete.name)
    module.verify()
    text = module_to_text(module)
    assert "func.func @both" in text and "{callee = @double}" in text
    assert "{callee = @double_1}" in text and "func.func @double_1" in text
    assert module_to_text(parse_module(text)) == text


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16, dtypes.float32,
                                   dtypes.float64])
def test_nan_and_infinite_constants_round_trip_as_bit_patterns(dtype) -> None:
    """MLIR prints NaN and infinities as hexadecimal bit patterns, and a hexadecimal element
    of a float tensor is its bits, not the integer it spells (once parsed as 4286578688)."""
    values = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5], dtype=dtype)
    text = sf.function(lambda: sf.constant(values) * 1.0).get_concrete_function().ir()
    assert "0x" in text
    parsed = parse_module(text)
    constant = next(op for op in parsed.walk() if op.name == "sf.constant")
    got = np.asarray(decode(constant.attributes["value"]))
    assert got.dtype == values.dtype
    np.testing.assert_array_equal(got.astype(np.float64), values.astype(np.float64))
    assert np.signbit(got.astype(np.float64)[3])
    splat = parse_module("func.func @f() -> tensor<f32> {\n"
                         "  %0 = sf.constant dense<0xff800000> : tensor<f32>\n"
                         "  func.return %0 : tensor<f32>\n}")
    value = next(op for op in splat.walk() if op.name == "sf.constant").attributes["value"]
    assert decode(value) == -np.inf


@pytest.mark.parametrize("dim", [2**63, 10**20])
def test_a_dim_past_int64_is_refused_where_it_is_written(dim):
    text = (f"func.func @f(%x: tensor<2x{dim}xf32>) -> tensor<2x{dim}xf32> {{\n"
            f"  func.return %x : tensor<2x{dim}xf32>\n}}\n")
    with pytest.raises(IRError, match=rf"<input>:1:\d+: a dim of {dim}: dims are int64s"):
        parse_module(text)
    largest = (1 << 63) - 1
    parse_module(text.replace(str(dim), str(largest)))
