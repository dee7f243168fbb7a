"""ONNX ops that create tensors: Constant, ConstantOfShape, Range, EyeLike, the window
functions, the random draws (RandomNormal, RandomUniform, their Like forms, Bernoulli) and
Det.

What a created tensor holds is fixed by attributes and known inputs, so these return arrays
known at import (folded into whatever uses them); the random ops are the exception,
registered with ``fold=False``: a staged function that draws returns fresh numbers on every
call, as `sf.random` does.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

import stageflow as sf
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.evaluate import dense
from stageflow.onnx.ops.shape import dims_in, expand_to, ints, static_shape


def element_type(node: Node, code: int) -> np.dtype:
    """The stageflow dtype of ONNX element type `code`; an error where stageflow has none."""
    dtype = dtypes.from_onnx(code)
    if dtype is None:
        raise node.error(f"element type {dtypes.type_name(code)} has no stageflow dtype")
    return dtype


def _tensor(node: Node, proto: onnx.TensorProto) -> np.ndarray:
    return numpy_helper.to_array(proto).astype(element_type(node, proto.data_type), copy=False)


def _sparse(node: Node, sparse: onnx.SparseTensorProto) -> np.ndarray:
    return dense(sparse).astype(element_type(node, sparse.values.data_type), copy=False)


@converts("Constant")
def constant(node: Node) -> Value:
    """Constant: exactly one of value, sparse_value, value_float(s), value_int(s)."""
    given = node.attributes
    if "value" in given:
        return _tensor(node, given["value"])
    if "sparse_value" in given:
        return _sparse(node, given["sparse_value"])
    if "value_float" in given or "value_floats" in given:
        return np.asarray(given.get("value_float", given.get("value_floats")), np.float32)
    if "value_int" in given or "value_ints" in given:
        return np.asarray(given.get("value_int", given.get("value_ints")), np.int64)
    if "value_string" in given or "value_strings" in given:
        raise node.error("stageflow has no string tensors")
    raise node.error("no value attribute")


@converts("ConstantOfShape")
def constant_of_shape(node: Node, shape: Value) -> Value:
    """The value attribute (float 0 by default) filling `shape`; where the shape names
    dims unknown at import, broadcast to them."""
    dims = dims_in(shape)
    if dims is None:
        dims = ints(node, shape, "the shape input")
    value = node.attributes.get("value")
    fill = np.zeros(1, np.float32) if value is None else _tensor(node, value)
    if all(isinstance(d, int) for d in dims):
        return np.full(dims, fill.reshape(-1)[0], fill.dtype)
    return expand_to(fill.reshape(()), dims)


@converts("Range")
def range_(node: Node, start: Value, limit: Value, delta: Value) -> Value:
    """start, start + delta, ... below limit: max(ceil((limit - start) / delta), 0) values
    of the inputs' dtype."""
    first = node.const(start, "the start input")
    end = node.const(limit, "the limit input").item()
    step = node.const(delta, "the delta input").item()
    if step == 0:
        raise node.error("delta is 0")
    if np.issubdtype(first.dtype, np.integer):
        count = max(-((first.item() - end) // step), 0)
    else:
        count = max(math.ceil((end - first.item()) / step), 0)
    return (first.item() + np.arange(count) * step).astype(first.dtype)


@converts("EyeLike")
def eye_like(node: Node, like: Value) -> Value:
    """Ones on diagonal `k` of a matrix of the input's (static) shape."""
    shape = static_shape(node, like, "EyeLike")
    if len(shape) != 2:
        raise node.error(f"the input must be 2-D, got shape {shape}")
    code = node.attr("dtype", None)
    dtype = like.dtype if code is None else element_type(node, code)
    return np.eye(*shape, k=node.attr("k", 0), dtype=dtype)


def _window(node: Node, size: Value, terms: tuple[float, ...]) -> np.ndarray:
    """sum_j terms[j] cos(2 pi j n / N), N the size (periodic) or the size - 1."""
    count = ints(node, size, "the size input")[0]
    span = count if node.attr("periodic", 1) else count - 1
    n = np.arange(count, dtype=np.float64)
    result = sum(c * np.cos(2 * np.pi * j * n / span) for j, c in enumerate(terms))
    return np.asarray(result).astype(element_type(node, node.attr("output_datatype", 1)))


_WINDOWS = {
    "HannWindow": (0.5, -0.5),
    "HammingWindow": (25 / 46, -21 / 46),
    "BlackmanWindow": (0.42, -0.5, 0.08),
}


@converts(*_WINDOWS)
def window(node: Node, size: Value) -> Value:
    return _window(node, size, _WINDOWS[node.op_type])


def _seed(node: Node) -> int | None:
    seed = node.attr("seed", None)
    return None if seed is None else int(seed)


def _draw(node: Node, shape: list[int], dtype: np.dtype) -> Value:
    if node.op_type.startswith("RandomNormal"):
        return sf.random.normal(shape, node.attr("mean", 0.0), node.attr("scale", 1.0), dtype,
                                seed=_seed(node))
    return sf.random.uniform(shape, node.attr("low", 0.0), node.attr("high", 1.0), dtype,
                             seed=_seed(node))


@converts("RandomNormal", "RandomUniform", fold=False)
def random(node: Node) -> Value:
    return _draw(node, list(node.attr("shape")),
                 element_type(node, node.attr("dtype", onnx.TensorProto.FLOAT)))


@converts("RandomNormalLike", "RandomUniformLike", fold=False)
def random_like(node: Node, like: Value) -> Value:
    code = node.attr("dtype", None)
    dtype = like.dtype if code is None else element_type(node, code)
    return _draw(node, list(static_shape(node, like, node.op_type)), dtype)


@converts("Bernoulli", fold=False)
def bernoulli(node: Node, probabilities: Value) -> Value:
    """1 with probability p, else 0, each element drawn on its own."""
    code = node.attr("dtype", None)
    dtype = probabilities.dtype if code is None else element_type(node, code)
    shape = static_shape(node, probabilities, "Bernoulli")
    draws = sf.random.uniform(list(shape), 0.0, 1.0, probabilities.dtype, seed=_seed(node))
    return sf.cast(sf.less(draws, probabilities), dtype)


@converts("Det")
def det(node: Node, x: Value) -> Value:
    return sf.linalg.det(x)
