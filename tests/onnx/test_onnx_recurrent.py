"""sf.onnx's RNN, GRU and LSTM converters (`stageflow/onnx/ops/recurrent.py`) against
ONNX's NumPy reference and, where that reference ignores an attribute (`sequence_lens`,
`activations`, `clip`), against onnxruntime.

(Named test_onnx_recurrent: test file names are unique across the test folders.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(11)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _weights(op: str, directions: int, inputs: int, hidden: int) -> list[onnx.TensorProto]:
    size = GATES[op] * hidden
    shapes = {"W": (directions, size, inputs), "R": (directions, size, hidden),
              "B": (directions, 2 * size)}
    return [numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32) * 0.5,
                                    name) for name, shape in shapes.items()]


def _model(node: onnx.NodeProto, feeds: dict[str, np.ndarray], weights: list,
           opset: int = 22, symbolic: dict[int, str] | None = None) -> onnx.ModelProto:
    """A one-node model; `symbolic` names the dims of X left unknown."""
    def dims(name: str, array: np.ndarray) -> list:
        if name != "X" or not symbolic:
            return list(array.shape)
        return [symbolic.get(i, d) for i, d in enumerate(array.shape)]

    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            dims(name, a)) for name, a in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compare(model: onnx.ModelProto, feeds: dict[str, np.ndarray], expected: list,
             jits: tuple[bool, ...] = (True,)) -> None:
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*feeds.values())
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-5)


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_lstm_bidirectional_batch_first_with_peepholes_and_initial_states():
    batch, steps, inputs, hidden = 2, 4, 3, 5
    feeds = {"X": RNG.standard_normal((batch, steps, inputs)).astype(np.float32),
             "h0": RNG.standard_normal((batch, 2, hidden)).astype(np.float32),
             "c0": RNG.standard_normal((batch, 2, hidden)).astype(np.float32)}
    weights = _weights("LSTM", 2, inputs, hidden)
    weights.append(numpy_helper.from_array(
        RNG.standard_normal((2, 3 * hidden)).astype(np.float32), "P"))
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "h0", "c0", "P"],
                            ["Y", "Y_h", "Y_c"], hidden_size=hidden,
                            direction="bidirectional", layout=1)
    model = _model(node, feeds, weights)
    _compare(model, feeds, ReferenceEvaluator(model).run(None, feeds), jits=(True, False))


@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_reverse(linear_before_reset):
    feeds = {"X": RNG.standard_normal((5, 2, 3)).astype(np.float32)}
    node = helper.make_node("GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=4,
                            direction="reverse", linear_before_reset=linear_before_reset)
    model = _model(node, feeds, _weights("GRU", 1, 3, 4))
    _compare(model, feeds, ReferenceEvaluator(model).run(None, feeds))


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_sequence_lens_with_an_unknown_sequence_length(op):
    """Entries shorter than the sequence keep their state past their length (Y zero
    there), and the reverse direction starts at their last step; X's steps unknown."""
    batch, steps, inputs, hidden = 3, 6, 2, 4
    feeds = {"X": RNG.standard_normal((steps, batch, inputs)).astype(np.float32),
             "lens": np.array([6, 2, 4], np.int32)}
    node = helper.make_node(op, ["X", "W", "R", "B", "lens"], ["Y", "Y_h"],
                            hidden_size=hidden, direction="bidirectional")
    model = _model(node, feeds, _weights(op, 2, inputs, hidden), symbolic={0: "steps"})
    assert sf.onnx.load(model).input_signature[0].shape == (None, batch, inputs)
    _compare(model, feeds, _onnxruntime(model, feeds))


def test_rnn_activations_with_alpha_beta_and_clip():
    """Per-direction activations, alphas and betas consumed in order by those that take
    them, the clip bounding their inputs."""
    feeds = {"X": RNG.standard_normal((3, 2, 3)).astype(np.float32) * 3}
    node = helper.make_node("RNN", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=4,
                            direction="bidirectional", activations=["Affine", "LeakyRelu"],
                            activation_alpha=[0.5, 0.1], activation_beta=[0.25], clip=1.5)
    model = _model(node, feeds, _weights("RNN", 2, 3, 4))
    _compare(model, feeds, _onnxruntime(model, feeds), jits=(True, False))


def test_lstm_clip_bounds_the_gates_not_the_cell_state():
    """onnxruntime's reading of `clip`: the inputs of f and g, not h's cell state (which
    grows past the bound here, through softplus forget gates)."""
    feeds = {"X": RNG.standard_normal((4, 2, 3)).astype(np.float32) * 3}
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=3,
                            activations=["Softplus", "ThresholdedRelu", "Sigmoid"],
                            activation_alpha=[0.25], clip=0.5)
    model = _model(node, feeds, _weights("LSTM", 1, 3, 3))
    expected = _onnxruntime(model, feeds)
    assert np.abs(expected[2]).max() > 0.5
    _compare(model, feeds, expected)


def test_scaled_tanh_needs_its_alpha_and_beta():
    feeds = {"X": np.zeros((2, 1, 3), np.float32)}
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=4,
                            activations=["ScaledTanh"], activation_alpha=[0.5])
    model = _model(node, feeds, _weights("RNN", 1, 3, 4)[:2])
    with pytest.raises(OnnxError, match="ScaledTanh has no default"):
        sf.onnx.load(model)(feeds["X"])


def test_an_unknown_activation_is_named():
    feeds = {"X": np.zeros((2, 1, 3), np.float32)}
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=4,
                            activations=["Swish"])
    model = _model(node, feeds, _weights("RNN", 1, 3, 4)[:2])
    with pytest.raises(OnnxError, match="activation 'Swish'"):
        sf.onnx.load(model)(feeds["X"])


def test_wrong_direction_count_is_named():
    feeds = {"X": np.zeros((2, 1, 3), np.float32)}
    node = helper.make_node("GRU", ["X", "W", "R"], ["Y"], hidden_size=4,
                            direction="bidirectional")
    model = _model(node, feeds, _weights("GRU", 1, 3, 4)[:2])
    with pytest.raises(OnnxError, match="W has 1 directions"):
        sf.onnx.load(model)(feeds["X"])

