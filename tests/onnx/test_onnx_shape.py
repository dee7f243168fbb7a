"""sf.onnx's shape converters (`stageflow/onnx/ops/shape.py`) against ONNX's NumPy
reference, compiled and interpreted, on static shapes and on a batch dim unknown at import.

(Named test_onnx_shape: test file names are unique across the test folders.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from node_check import graph_model
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import stageflow as sf
from stageflow.onnx.converters import OnnxError

RNG = np.random.default_rng(11)




def _check(model: onnx.ModelProto, *feeds: dict[str, np.ndarray],
           jits: tuple[bool, ...] = (True, False)) -> None:
    """Each feed through the model, compiled and interpreted, against the reference."""
    for jit in jits:
        imported = sf.onnx.load(model, jit=jit)
        for feed in feeds:
            expected = ReferenceEvaluator(model).run(None, feed)
            got = imported(*feed.values())
            got = got if isinstance(got, tuple) else (got,)
            for g, e in zip(got, expected, strict=True):
                assert np.asarray(g).shape == e.shape
                np.testing.assert_array_equal(np.asarray(g), e)


FLOAT = TensorProto.FLOAT


def _batch(*sizes: int, tail: tuple[int, ...] = (3, 4)) -> list[dict[str, np.ndarray]]:
    return [{"x": RNG.standard_normal((n, *tail)).astype(np.float32)} for n in sizes]


@pytest.mark.parametrize(("shape", "allowzero"), [
    ([0, -1], 0), ([4, 0, 2], 0), ([-1, 0, 2, 2], 0), ([2, 12], 1)])
def test_reshape_copies_and_infers(shape, allowzero):
    node = helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=allowzero)
    model = graph_model([node], {"x": (FLOAT, [2, 3, 4])}, ["y"],
                   {"s": np.array(shape, np.int64)})
    _check(model, *_batch(2), jits=(True,))


def test_shape_arithmetic_folds_at_import():
    """Shape -> Gather -> Concat -> Reshape on a static input is one reshape in the IR."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
             helper.make_node("Concat", ["d", "m"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    model = graph_model(nodes, {"x": (FLOAT, [2, 3, 4])}, ["y"],
                   {"i": np.array([0], np.int64), "m": np.array([-1], np.int64)})
    traced = sf.onnx.load(model).get_concrete_function().ir("traced")
    assert "sf.reshape" in traced and "sf.gather" not in traced and "sf.concat" not in traced
    _check(model, *_batch(2), jits=(True,))


def test_unknown_batch_dim():
    """Reshape copying the unknown dim, Flatten, Slice with a negative step, Expand, Tile,
    Pad in every mode (pads wider than the run-time dim), Shape and Size, at two batch
    sizes."""
    pads = np.array([1, 0, 2, 3, 0, 1], np.int64)
    nodes = [helper.make_node("Reshape", ["x", "copy"], ["r1"]),
             helper.make_node("Reshape", ["x", "split"], ["r2"]),
             helper.make_node("Flatten", ["x"], ["f"], axis=1),
             helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["sl"]),
             helper.make_node("Expand", ["x", "e"], ["ex"]),
             helper.make_node("Tile", ["x", "t"], ["ti"]),
             helper.make_node("Pad", ["x", "p"], ["reflect"], mode="reflect"),
             helper.make_node("Pad", ["x", "p"], ["edge"], mode="edge"),
             helper.make_node("Pad", ["x", "p"], ["wrap"], mode="wrap"),
             helper.make_node("Shape", ["x"], ["shape"], start=-3, end=2),
             helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("Squeeze", ["x", "sq"], ["squeezed"])]
    constants = {"copy": np.array([0, -1], np.int64), "split": np.array([0, 2, 2], np.int64),
                 "st": np.array([-1, 3], np.int64), "en": np.array([-100, 0], np.int64),
                 "ax": np.array([0, 2], np.int64), "sp": np.array([-1, -2], np.int64),
                 "e": np.array([2, 1, 1, 1], np.int64), "t": np.array([2, 1, 2], np.int64),
                 "p": pads, "sq": np.array([1], np.int64)}
    outputs = [n.output[0] for n in nodes]
    model = graph_model(nodes, {"x": (FLOAT, ["N", 1, 4])}, outputs, constants)
    _check(model, *_batch(2, 5, tail=(1, 4)))


def test_shape_values_of_unknown_dims_name_them():
    """Shape of a tensor with an unknown dim, through Gather, Unsqueeze, Slice and Concat,
    still names that dim: x.view(x.size(0), -1), a shape sliced from Shape, ConstantOfShape
    and Expand to run-time dims; a known entry folds."""
    node = helper.make_node
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["b"], axis=0),
             node("Unsqueeze", ["b", "axis"], ["b1"]),
             node("Concat", ["b1", "minus"], ["view"], axis=0),
             node("Reshape", ["x", "view"], ["flat"]),
             node("Slice", ["s", "axis", "two"], ["head"]),
             node("Concat", ["head", "two2"], ["split"], axis=0),
             node("Relu", ["x"], ["r"]),
             node("Reshape", ["r", "split"], ["other"]),
             node("Gather", ["s", "one"], ["known"], axis=0),
             node("ConstantOfShape", ["s"], ["sevens"],
                  value=numpy_helper.from_array(np.array([7], np.int32))),
             node("Shape", ["y"], ["sy"]),
             node("Concat", ["b1", "sy"], ["both"], axis=0),
             node("Expand", ["one_by_one", "both"], ["expanded"])]
    constants = {"zero": np.array(0, np.int64), "axis": np.array([0], np.int64),
                 "minus": np.array([-1], np.int64), "two": np.array([2], np.int64),
                 "two2": np.array([2, 2], np.int64), "one": np.array(1, np.int64),
                 "one_by_one": np.ones((1, 1), np.float32)}
    outputs = ["flat", "other", "known", "sevens", "expanded"]
    model = graph_model(nodes, {"x": (FLOAT, ["N", 3, 4]), "y": (FLOAT, ["M"])}, outputs,
                   constants)
    feeds = [{"x": RNG.standard_normal((n, 3, 4)).astype(np.float32),
              "y": np.zeros(n + 2, np.float32)} for n in (2, 5)]
    _check(model, *feeds)


def test_arithmetic_on_run_time_dims_asks_for_input_shapes():
    """A shape computed from unknown dims (here a product) is not known at import: the
    error says what to do, and input_shapes= imports the model."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("ReduceProd", ["s"], ["n"], keepdims=1),
             helper.make_node("Concat", ["minus", "n"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    model = graph_model(nodes, {"x": (FLOAT, ["N", "H", 4])}, ["y"],
                   {"minus": np.array([-1], np.int64)})
    with pytest.raises(OnnxError, match=r"Reshape.*input_shapes="):
        sf.onnx.load(model)(np.zeros((2, 3, 4), np.float32))
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    y = sf.onnx.load(model, input_shapes={"x": (2, 3, 4)})(x)
    np.testing.assert_array_equal(y.numpy(), x.reshape(2, 12))


@pytest.mark.parametrize(("sizes", "count", "opset"), [
    (None, 3, 18), ([1, 4], 2, 13), (None, 2, 13)])
def test_split(sizes, count, opset):
    inputs = ["x"] if sizes is None else ["x", "s"]
    attributes = {"num_outputs": count} if opset >= 18 and sizes is None else {}
    node = helper.make_node("Split", inputs, [f"y{k}" for k in range(count)], axis=1,
                            **attributes)
    constants = {} if sizes is None else {"s": np.array(sizes, np.int64)}
    model = graph_model([node], {"x": (FLOAT, [2, 4 if opset == 13 and sizes is None else 5])},
                   node.output, constants, opset)
    feed = {"x": RNG.standard_normal((2, 4 if opset == 13 and sizes is None else 5))
            .astype(np.float32)}
    _check(model, feed, jits=(True,))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_axes_and_negative_pads(mode):
    """A negative pad crops (onnxruntime's reading; ONNX's reference refuses it)."""
    node = helper.make_node("Pad", ["x", "p", "v", "a"], ["y"], mode=mode)
    constants = {"p": np.array([2, -1, 1, 2], np.int64), "v": np.array(1.5, np.float32),
                 "a": np.array([-1, 0], np.int64)}
    model = graph_model([node], {"x": (FLOAT, [4, 5])}, ["y"], constants)
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    expected = onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_array_equal(sf.onnx.load(model)(x).numpy(), expected)


def test_trilu_reverse_sequence_center_crop_pad():
    nodes = [helper.make_node("Trilu", ["x", "k"], ["upper"]),
             helper.make_node("Trilu", ["x", "k"], ["lower"], upper=0),
             helper.make_node("ReverseSequence", ["x", "lengths"], ["reversed"],
                              batch_axis=0, time_axis=1),
             helper.make_node("CenterCropPad", ["x", "crop"], ["cropped"], axes=[-1, 0])]
    constants = {"k": np.array(-1, np.int64), "lengths": np.array([1, 4, 3], np.int64),
                 "crop": np.array([6, 2], np.int64)}
    model = graph_model(nodes, {"x": (FLOAT, [3, 5])}, [n.output[0] for n in nodes], constants)
    _check(model, {"x": RNG.standard_normal((3, 5)).astype(np.float32)})


def test_compress_by_a_run_time_condition():
    node = helper.make_node("Compress", ["x", "c"], ["y"], axis=1)
    model = graph_model([node], {"x": (FLOAT, [2, 4]), "c": (TensorProto.BOOL, [3])}, ["y"])
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    _check(model, {"x": x, "c": np.array([True, False, True])},
           {"x": x, "c": np.array([False, False, False])})


def test_transpose_concat_unsqueeze():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
             helper.make_node("Concat", ["x", "x"], ["c"], axis=-1)]
    model = graph_model(nodes, {"x": (FLOAT, ["N", 3, 4])}, ["t", "u", "c"],
                   {"axes": np.array([3, 0], np.int64)})
    _check(model, *_batch(1, 3))


def test_pad_by_a_run_time_value():
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"])
    model = graph_model([node], {"x": (FLOAT, ["N", 3]), "v": (FLOAT, [])}, ["y"],
                   {"p": np.array([1, 0, 0, 2], np.int64)})
    _check(model, {"x": RNG.standard_normal((2, 3)).astype(np.float32),
                   "v": np.array(-3.5, np.float32)})
