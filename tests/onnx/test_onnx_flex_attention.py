"""sf.onnx's FlexAttention converter (`stageflow/onnx/ops/flex_attention.py`, domain
ai.onnx.preview) against ONNX's NumPy reference: its score_mod and prob_mod subgraphs run
on the traced scores, compiled."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

RNG = np.random.default_rng(13)


def _modifier(name: str, nodes: list[onnx.NodeProto],
              constants: dict[str, np.ndarray]) -> onnx.GraphProto:
    """A subgraph of float (B, H, L, S) `x` to `y`."""
    shape = ["B", "H", "L", "S"]
    return helper.make_graph(nodes, name,
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                             [numpy_helper.from_array(a, n) for n, a in constants.items()])


def test_grouped_heads_causal_score_mod_and_scaled_prob_mod() -> None:
    """4 query heads on 2 kv heads; a score_mod masking keys after the query (computed
    from the scores' shape) and a prob_mod scaling the probabilities."""
    causal = _modifier("causal", [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "two"], ["rows"]),
        helper.make_node("Gather", ["shape", "three"], ["cols"]),
        helper.make_node("Range", ["zero", "rows", "one"], ["i"]),
        helper.make_node("Range", ["zero", "cols", "one"], ["j"]),
        helper.make_node("Unsqueeze", ["i", "last"], ["column"]),
        helper.make_node("GreaterOrEqual", ["column", "j"], ["seen"]),
        helper.make_node("Where", ["seen", "x", "masked"], ["y"])],
        {"two": np.array(2, np.int64), "three": np.array(3, np.int64),
         "zero": np.array(0, np.int64), "one": np.array(1, np.int64),
         "last": np.array([1], np.int64), "masked": np.array(-np.inf, np.float32)})
    halve = _modifier("halve", [helper.make_node("Mul", ["x", "half"], ["y"])],
                      {"half": np.array(0.5, np.float32)})
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"],
                            domain="ai.onnx.preview", score_mod=causal, prob_mod=halve,
                            scale=0.3)
    feeds = {"q": RNG.standard_normal((2, 4, 5, 8)).astype(np.float32),
             "k": RNG.standard_normal((2, 2, 6, 8)).astype(np.float32),
             "v": RNG.standard_normal((2, 2, 6, 3)).astype(np.float32)}
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26),
                                                    helper.make_opsetid("ai.onnx.preview", 1)])
    expected, = ReferenceEvaluator(model).run(None, feeds)
    got = np.asarray(sf.onnx.load(model)(*feeds.values()))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
