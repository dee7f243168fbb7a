"""sf.onnx's reduction and scan converters (`stageflow/onnx/ops/reductions.py`) against
ONNX's NumPy reference, compiled and interpreted.

(Named test_onnx_reductions: test file names are unique across the test folders.)"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(3)
FLOAT = TensorProto.FLOAT
REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def _model(nodes: Sequence[onnx.NodeProto], shape: Sequence, outputs: Sequence[str],
           constants: dict[str, np.ndarray] | None = None, opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes), "g", [helper.make_tensor_value_info("x", FLOAT, shape)],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(a, name) for name, a in (constants or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, *xs: np.ndarray,
           jits: tuple[bool, ...] = (True, False)) -> None:
    for jit in jits:
        imported = sf.onnx.load(model, jit=jit)
        for x in xs:
            expected = ReferenceEvaluator(model).run(None, {"x": x})
            got = imported(x)
            got = got if isinstance(got, tuple) else (got,)
            for g, e in zip(got, expected, strict=True):
                assert np.asarray(g).shape == e.shape
                np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-6)


def test_every_reduction_axes_as_input_and_as_attribute():
    """Opset 18 takes the axes as an input, opset 13 (ReduceSum aside) as an attribute."""
    x = RNG.random((2, 3, 4)).astype(np.float32) + 0.5
    late = [helper.make_node(op, ["x", "axes"], [op], keepdims=k % 2)
            for k, op in enumerate(REDUCTIONS)]
    _check(_model(late, ["N", 3, 4], REDUCTIONS, {"axes": np.array([-1, 0], np.int64)}),
           x, x[:1])
    early = [helper.make_node(op, ["x", "axes"] if op == "ReduceSum" else ["x"], [op],
                              **({} if op == "ReduceSum" else {"axes": [1]}))
             for op in REDUCTIONS]
    _check(_model(early, [2, 3, 4], REDUCTIONS, {"axes": np.array([1], np.int64)}, 13), x,
           jits=(True,))


@pytest.mark.parametrize("noop", [0, 1])
def test_empty_axes(noop):
    nodes = [helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=noop),
             helper.make_node("ReduceSum", ["x", "none"], ["z"], noop_with_empty_axes=noop,
                              keepdims=0)]
    model = _model(nodes, [2, 3], ["y", "z"], {"none": np.zeros(0, np.int64)})
    _check(model, RNG.standard_normal((2, 3)).astype(np.float32), jits=(True,))


def test_empty_sets_give_the_identity_even_at_run_time():
    """A dim of 0, known at import or only at run time, reduces to each op's identity."""
    nodes = [helper.make_node(op, ["x", "axes"], [op]) for op in REDUCTIONS]
    x = np.zeros((2, 0, 3), np.float32)
    constants = {"axes": np.array([1], np.int64)}
    _check(_model(nodes, [2, 0, 3], REDUCTIONS, constants), x, jits=(True,))
    _check(_model(nodes, [2, "M", 3], REDUCTIONS, constants), x, RNG.random((2, 2, 3))
           .astype(np.float32))


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 1)])
def test_scans(op, exclusive, reverse):
    node = helper.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = _model([node], ["N", 4], ["y"], {"axis": np.array(-1, np.int32)},
                   26 if op == "CumProd" else 18)
    _check(model, RNG.standard_normal((3, 4)).astype(np.float32), jits=(True,))


def test_integer_inputs():
    """An integer L2 norm is truncated back to the input's type, as ONNX's reference does;
    LogSum of integers is refused (the schema has floats only)."""
    x = np.array([[1, 2, 3], [4, 5, -7]], np.int32)
    for op in ("ReduceL2", "ReduceMean", "ReduceL1"):
        node = helper.make_node(op, ["x"], ["y"], keepdims=0)
        graph = helper.make_graph([node], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.INT32,
                                                                 [2, 3])],
                                  [helper.make_empty_tensor_value_info("y")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
        got = sf.onnx.load(model)(x).numpy()
        assert got.dtype == expected.dtype and got == expected
    model.graph.node[0].op_type = "ReduceLogSum"
    with pytest.raises(OnnxError, match="cast the input to a float type"):
        sf.onnx.load(model)(x)
