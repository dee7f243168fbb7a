"""sf.onnx's signal converters (`stageflow/onnx/ops/signal.py`): DFT (forward, inverse,
one-sided, padded and truncated lengths, opsets 17 and 20), STFT with a window known at
import or not, and MelWeightMatrix, against ONNX's NumPy reference (NumPy's FFT).

(Named test_onnx_signal: test file names are unique across the test folders.)"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf

RNG = np.random.default_rng(17)


def _model(nodes: Sequence[onnx.NodeProto], inputs: dict[str, np.ndarray],
           outputs: Sequence[str], weights: dict[str, np.ndarray] | None = None,
           opset: int = 20) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes), "g",
        [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for name, a in inputs.items()],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(a, name) for name, a in (weights or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, inputs: dict[str, np.ndarray],
           jits: Sequence[bool] = (True,)) -> None:
    expected = ReferenceEvaluator(model).run(None, inputs)
    for jit in jits:
        got = sf.onnx.load(model, jit=jit)(*inputs.values())
        got = got if isinstance(got, list | tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            assert np.asarray(g).shape == e.shape
            assert np.asarray(g).dtype == e.dtype
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-4, atol=1e-4)


def test_dft_variants_opset_20():
    real = RNG.normal(size=(2, 7, 3, 1)).astype(np.float32)
    spectrum = RNG.normal(size=(2, 7, 3, 2)).astype(np.float32)
    cases = {  # output: (input, dft_length, axis, attributes)
        "forward": ("real", "", "minus3", {}),
        "padded": ("spectrum", "n9", "one", {}),
        "truncated_onesided": ("real", "n5", "one", {"onesided": 1}),
        "inverse": ("spectrum", "", "two", {"inverse": 1}),
        "inverse_real_signal": ("spectrum", "n11", "one", {"inverse": 1, "onesided": 1}),
        "inverse_even": ("spectrum", "", "one", {"inverse": 1, "onesided": 1}),
    }
    nodes = [helper.make_node("DFT", [x, n, axis], [name], **attributes)
             for name, (x, n, axis, attributes) in cases.items()]
    weights = {"n9": np.array(9, np.int64), "n5": np.array(5, np.int32),
               "n11": np.array(11, np.int64), "one": np.array(1, np.int64),
               "two": np.array(2, np.int64), "minus3": np.array(-3, np.int64)}
    inputs = {"real": real, "spectrum": spectrum}
    _check(_model(nodes, inputs, list(cases), weights), inputs, jits=(True, False))


def test_dft_opset_17_axis_attribute():
    x = RNG.normal(size=(3, 8, 2)).astype(np.float32)
    node = helper.make_node("DFT", ["x"], ["y"], axis=0, inverse=1)
    _check(_model([node], {"x": x}, ["y"], opset=17), {"x": x})


def test_dft_refuses_the_complex_axis():
    x = np.ones((3, 2), np.float32)
    node = helper.make_node("DFT", ["x"], ["y"], axis=1)
    with pytest.raises(sf.onnx.OnnxError, match="real and imaginary parts"):
        sf.onnx.load(_model([node], {"x": x}, ["y"], opset=17))(x)


def test_stft_with_windows_known_and_unknown():
    signal = RNG.normal(size=(2, 40, 1)).astype(np.float32)
    complex_signal = RNG.normal(size=(1, 30, 2)).astype(np.float32)
    window = np.hanning(12).astype(np.float32)
    nodes = [helper.make_node("HannWindow", ["twelve"], ["hann"]),
             helper.make_node("STFT", ["signal", "step", "hann"], ["known"]),
             helper.make_node("STFT", ["signal", "step", "window"], ["given"]),
             helper.make_node("STFT", ["complex_signal", "step", "", "twelve"], ["two_sided"],
                              onesided=0)]
    weights = {"step": np.array(5, np.int64), "twelve": np.array(12, np.int64)}
    inputs = {"signal": signal, "window": window, "complex_signal": complex_signal}
    _check(_model(nodes, inputs, ["known", "given", "two_sided"], weights, opset=17), inputs)


def test_mel_weight_matrix_folds_at_import():
    nodes = [helper.make_node("MelWeightMatrix", ["bins", "n", "rate", "low", "high"], ["w"],
                              output_datatype=TensorProto.DOUBLE)]
    weights = {"bins": np.array(10, np.int64), "n": np.array(64, np.int64),
               "rate": np.array(16000, np.int64), "low": np.array(20, np.float32),
               "high": np.array(8000, np.float32)}
    model = _model(nodes, {}, ["w"], weights, opset=17)
    expected, = ReferenceEvaluator(model).run(None, {})
    got = sf.onnx.load(model)()
    np.testing.assert_array_equal(np.asarray(got), expected)
