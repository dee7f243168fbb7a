"""One-node ONNX models checked against ONNX's NumPy reference (`ReferenceEvaluator`), or
ONNX Runtime where that reference fails a case (some grouped and 3-D transposed
convolutions, integer pooling with pads, GlobalLpPool): shared by the converter tests of
this folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf


def graph_model(nodes: Sequence[onnx.NodeProto], inputs: dict[str, tuple[int, Sequence]],
                outputs: Sequence[str], constants: dict[str, np.ndarray] | None = None,
                opset: int = 18) -> onnx.ModelProto:
    """A graph of `nodes`: inputs by name as (element type, shape with names for unknown
    dims), `constants` as initializers."""
    graph = helper.make_graph(
        list(nodes), "g",
        [helper.make_tensor_value_info(name, kind, shape) for name, (kind, shape)
         in inputs.items()],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(a, name) for name, a in (constants or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def one_node_model(node: onnx.NodeProto, inputs: Mapping[str, np.ndarray],
                   weights: Mapping[str, np.ndarray] | None = None, opset: int = 18,
                   shapes: Mapping[str, Sequence[int | str | None]] | None = None
                   ) -> onnx.ModelProto:
    """A model of `node` alone: `inputs` are graph inputs (of their arrays' shapes unless
    `shapes` gives one, symbolic dims as strings), `weights` initializers."""
    shapes = shapes or {}
    values = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            shapes.get(name, a.shape))
              for name, a in inputs.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    initializers = [numpy_helper.from_array(a, name) for name, a in (weights or {}).items()]
    graph = helper.make_graph([node], "g", values, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(node: onnx.NodeProto, inputs: Mapping[str, np.ndarray],
          weights: Mapping[str, np.ndarray] | None = None, opset: int = 18,
          jits: Sequence[bool] = (True,), rtol: float = 1e-5, atol: float = 1e-5,
          shapes: Mapping[str, Sequence[int | str | None]] | None = None,
          runtime: bool = False) -> None:
    """`node`'s outputs imported by sf.onnx.load (compiled, or interpreted for jit False)
    equal the NumPy reference's, or ONNX Runtime's with `runtime`."""
    model = one_node_model(node, inputs, weights, opset, shapes)
    if runtime:
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        expected = session.run(None, dict(inputs))
    else:
        expected = ReferenceEvaluator(model).run(None, {**inputs, **(weights or {})})
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*inputs.values())
        got = got if isinstance(got, list | tuple) else (got,)
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).dtype == e.dtype
            np.testing.assert_allclose(np.asarray(g), e, rtol=rtol, atol=atol)
