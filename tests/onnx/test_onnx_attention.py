"""sf.onnx's Attention, RotaryEmbedding and LinearAttention converters
(`stageflow/onnx/ops/attention.py`) against ONNX's NumPy reference, compiled and
interpreted.

(Named test_onnx_attention: test file names are unique across the test folders.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(3)


def _normal(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int,
           symbolic_batch: bool = False) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(a.dtype),
        ("batch", *a.shape[1:]) if symbolic_batch and a.ndim >= 3 else a.shape)
        for name, a in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int,
           jits: tuple[bool, ...] = (True,), tolerance: float = 1e-5,
           symbolic_batch: bool = False) -> list[np.ndarray]:
    """The converter's outputs, after checking them against the reference's."""
    model = _model(node, feeds, opset, symbolic_batch)
    expected = ReferenceEvaluator(model).run(None, feeds)
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*feeds.values())
        got = [np.asarray(g) for g in (got if isinstance(got, tuple) else (got,))]
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape
            np.testing.assert_allclose(g.astype(np.float32), e.astype(np.float32),
                                       rtol=tolerance, atol=tolerance)
    return got


def test_3d_grouped_query_with_cache_causal_short_mask_and_biased_scores():
    """3-D inputs split into 6 query and 2 kv heads, a cache of 3 in front, a float mask
    one key short of the total (padded with -inf), the offset causal frontier, and
    qk_matmul_output after the bias."""
    feeds = {"q": _normal(2, 4, 6 * 4), "k": _normal(2, 4, 2 * 4), "v": _normal(2, 4, 2 * 5),
             "mask": _normal(4, 6), "past_k": _normal(2, 2, 3, 4),
             "past_v": _normal(2, 2, 3, 5)}
    node = helper.make_node("Attention", list(feeds),
                            ["y", "present_k", "present_v", "qk"], q_num_heads=6,
                            kv_num_heads=2, is_causal=1, qk_matmul_output_mode=2)
    y, present_k, _, qk = _check(node, feeds, 23, jits=(True, False))
    assert y.shape == (2, 4, 6 * 5) and present_k.shape == (2, 2, 7, 4)
    assert np.isneginf(qk[..., 0, -1]).all()  # the last key is past the first query


def test_3d_with_an_unknown_batch():
    feeds = {"q": _normal(3, 5, 8), "k": _normal(3, 5, 8), "v": _normal(3, 5, 8)}
    node = helper.make_node("Attention", list(feeds), ["y"], q_num_heads=2, kv_num_heads=2,
                            scale=0.3)
    _check(node, feeds, 23, symbolic_batch=True)


def test_a_fully_masked_row_is_zero_in_the_output_and_the_probabilities():
    mask = np.array([[True, False, True], [False, False, False]])
    feeds = {"q": _normal(1, 2, 2, 4), "k": _normal(1, 2, 3, 4), "v": _normal(1, 2, 3, 4),
             "mask": mask}
    node = helper.make_node("Attention", list(feeds), ["y", "", "", "probs"],
                            qk_matmul_output_mode=3)
    y, probs = _check(node, feeds, 24, jits=(True, False))
    assert not np.isnan(y).any()
    assert (y[:, :, 1] == 0).all() and (probs[:, :, 1] == 0).all()


def test_external_cache_lengths_with_causal_window_and_head_mask():
    """nonpad_kv_seqlen per batch entry (the causal and window frontiers offset by it, the
    padding masked), a rank-3 float mask (heads, queries, keys)."""
    feeds = {"q": _normal(2, 3, 4, 8), "k": _normal(2, 3, 8, 8), "v": _normal(2, 3, 8, 8),
             "mask": _normal(3, 4, 8), "lengths": np.array([6, 8], np.int64)}
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "", "", "lengths"], ["y"],
                            is_causal=1, left_window_size=2)
    _check(node, feeds, 25, jits=(True, False))


def test_half_precision_softcap_with_a_float32_softmax():
    feeds = {"q": _normal(1, 2, 3, 8, dtype=np.float16),
             "k": _normal(1, 2, 5, 8, dtype=np.float16),
             "v": _normal(1, 2, 5, 8, dtype=np.float16)}
    node = helper.make_node("Attention", list(feeds), ["y"], softcap=2.0,
                            softmax_precision=onnx.TensorProto.FLOAT)
    _check(node, feeds, 24, tolerance=2e-3)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_partial_3d(interleaved):
    """A 3-D input of 2 heads of 8 features, the first 4 of each rotated, the caches
    indexed by position ids."""
    feeds = {"x": _normal(2, 3, 16), "cos": _normal(10, 2), "sin": _normal(10, 2),
             "positions": np.array([[0, 1, 2], [5, 9, 3]], np.int64)}
    node = helper.make_node("RotaryEmbedding", list(feeds), ["y"], num_heads=2,
                            rotary_embedding_dim=4, interleaved=interleaved)
    _check(node, feeds, 23, jits=(True, False))


def test_rotary_embedding_4d_with_caches_per_position():
    feeds = {"x": _normal(2, 3, 5, 6), "cos": _normal(2, 5, 3), "sin": _normal(2, 5, 3)}
    _check(helper.make_node("RotaryEmbedding", list(feeds), ["y"]), feeds, 23)


@pytest.mark.parametrize("rule", ["gated_delta", "gated"])
def test_linear_attention_grouped_with_a_past_state(rule):
    """4 query heads reading 2 kv heads' states, per-head decay, the state carried in."""
    feeds = {"q": _normal(2, 3, 4 * 4), "k": _normal(2, 3, 2 * 4) * 0.5,
             "v": _normal(2, 3, 2 * 3), "past": _normal(2, 2, 4, 3),
             "decay": -RNG.random((2, 3, 2)).astype(np.float32)}
    inputs = ["q", "k", "v", "past", "decay"]
    if rule == "gated_delta":
        feeds["beta"] = RNG.random((2, 3, 1)).astype(np.float32)
        inputs.append("beta")
    node = helper.make_node("LinearAttention", inputs, ["y", "state"], q_num_heads=4,
                            kv_num_heads=2, update_rule=rule)
    _check(node, feeds, 27, jits=(True, False))


def test_linear_attention_rule_and_inputs_must_agree():
    feeds = {"q": _normal(1, 2, 8), "k": _normal(1, 2, 8), "v": _normal(1, 2, 8)}
    node = helper.make_node("LinearAttention", list(feeds), ["y"], q_num_heads=2,
                            kv_num_heads=2)
    with pytest.raises(OnnxError, match="takes a decay and a beta"):
        sf.onnx.load(_model(node, feeds, 27))(*feeds.values())


def test_3d_inputs_without_head_counts_are_refused():
    feeds = {"q": _normal(1, 2, 8), "k": _normal(1, 2, 8), "v": _normal(1, 2, 8)}
    model = _model(helper.make_node("Attention", list(feeds), ["y"]), feeds, 23)
    with pytest.raises(OnnxError, match="q_num_heads and kv_num_heads"):
        sf.onnx.load(model)(*feeds.values())
