"""ONNX's reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare) and scans (CumSum, CumProd).

The reduced axes are an attribute before opset 13 (ReduceSum) or 18 (the others) and an
optional input since; no axes reduce every axis, or none with `noop_with_empty_axes`. A
reduction over an empty set gives the operation's identity (ONNX's rule since opset 18:
-inf for a maximum, +inf for a minimum, 0 for the sums, 1 for a product).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import stageflow as sf
from stageflow.core import dtypes
from stageflow.onnx.converters import Node, Value, converts
from stageflow.onnx.ops.shape import axis_of, ints

# The opset from which each reduction takes its axes as an input rather than an attribute.
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_DEFAULT = 18


def _sum_of(transform: Callable[[Value], Value]) -> Callable[..., Value]:
    return lambda x, axes, keepdims: sf.reduce_sum(transform(x), axes, keepdims)


def _logsumexp(x: Value, axes: tuple[int, ...], keepdims: bool) -> Value:
    return sf.reduce_logsumexp(x, axes, keepdims)


def _log_sum(x: Value, axes: tuple[int, ...], keepdims: bool) -> Value:
    return sf.log(sf.reduce_sum(x, axes, keepdims))


def _l2(x: Value, axes: tuple[int, ...], keepdims: bool) -> Value:
    return sf.sqrt(sf.reduce_sum(sf.square(x), axes, keepdims))


def _extremum(numeric: Callable[..., Value], boolean: Callable[..., Value]
              ) -> Callable[..., Value]:
    """A maximum or minimum; on bool tensors (opset 20) `any` or `all`."""
    return lambda x, axes, keepdims: (boolean if x.dtype == np.bool_ else numeric)(
        x, axes, keepdims)


_REDUCTIONS: dict[str, Callable[..., Value]] = {
    "ReduceSum": sf.reduce_sum,
    "ReduceMean": sf.reduce_mean,
    "ReduceMax": _extremum(sf.reduce_max, sf.reduce_any),
    "ReduceMin": _extremum(sf.reduce_min, sf.reduce_all),
    "ReduceProd": sf.reduce_prod,
    "ReduceL1": _sum_of(sf.abs),
    "ReduceL2": _l2,
    "ReduceLogSum": _log_sum,
    "ReduceLogSumExp": _logsumexp,
    "ReduceSumSquare": _sum_of(sf.square),
}


# The reductions defined by log and exp, of float inputs only (ONNX's schema since opset 28).
_FLOAT_ONLY = ("ReduceLogSum", "ReduceLogSumExp")
# The reductions NumPy refuses over an empty set.
_NEEDS_ONE = ("ReduceMax", "ReduceMin", "ReduceLogSumExp")


def _empty_value(op_type: str, dtype: np.dtype) -> object:
    """The identity an empty reduction gives."""
    if op_type in ("ReduceMax", "ReduceLogSum", "ReduceLogSumExp", "ReduceMin"):
        low = op_type != "ReduceMin"
        if dtype == np.bool_:
            return not low
        if dtypes.is_integer(dtype):
            info = np.iinfo(dtype)
            return info.min if low else info.max
        return -np.inf if low else np.inf
    return 1 if op_type == "ReduceProd" else 0


@converts(*_REDUCTIONS)
def reduce(node: Node, data: Value, axes: Value | None = None) -> Value:
    rank = len(data.shape)
    if node.opset >= _AXES_INPUT_SINCE.get(node.op_type, _AXES_INPUT_DEFAULT):
        listed = [] if axes is None else ints(node, axes, "the axes input")
    else:
        listed = list(node.attr("axes", []))
    if not listed and node.attr("noop_with_empty_axes", 0):
        return data
    reduced = tuple(sorted({axis_of(node, a, rank) for a in listed} if listed
                           else range(rank)))
    keepdims = bool(node.attr("keepdims", 1))
    if any(data.shape[a] == 0 for a in reduced):
        shape = [1 if a in reduced else d for a, d in enumerate(data.shape)
                 if keepdims or a not in reduced]
        if None in shape:
            raise node.error(f"an empty reduction of {tuple(data.shape)} with unknown dims")
        return np.full(shape, _empty_value(node.op_type, data.dtype), data.dtype)
    if node.op_type in _NEEDS_ONE and any(data.shape[a] is None for a in reduced):
        # An unknown dim may be 0 at run time: one more element, the identity, keeps the
        # reduction defined and its value unchanged.
        pads = [(0, 1 if a in reduced and data.shape[a] is None else 0) for a in range(rank)]
        data = sf.pad(data, pads, constant_values=_empty_value(node.op_type, data.dtype))
    if node.op_type in _FLOAT_ONLY and not dtypes.is_inexact(data.dtype):
        raise node.error(f"a {data.dtype.name} input: {node.op_type} is defined by log and "
                         f"exp, of floats; cast the input to a float type first")
    if node.op_type == "ReduceL2" and dtypes.is_integer(data.dtype):
        # The root of an integer sum of squares, truncated back, as ONNX's reference does.
        result = _REDUCTIONS[node.op_type](sf.cast(data, sf.float64), reduced, keepdims)
        return sf.cast(result, data.dtype)
    return _REDUCTIONS[node.op_type](data, reduced, keepdims)


_SCANS = {"CumSum": sf.cumsum, "CumProd": sf.cumprod}


@converts(*_SCANS)
def scan(node: Node, x: Value, axis: Value) -> Value:
    """Running sums (products) along `axis`: `exclusive` starts from the identity, `reverse`
    runs from the end."""
    along = axis_of(node, ints(node, axis, "the axis input")[0], len(x.shape))
    return _SCANS[node.op_type](x, along, exclusive=bool(node.attr("exclusive", 0)),
                                reverse=bool(node.attr("reverse", 0)))
