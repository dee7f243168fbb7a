"""Ops a GPU runs with its index-map kernels and its gemm, beyond moves and reductions.

Each is built from what the device already has (`stageflow.runtime.gpu`, the kernels of
`stageflow.codegen.targets.indexed`), so that a convnet or a decoder placed on a GPU keeps
its tensors there instead of copying them to the host and back at every such op:

- ``conv2d``: im2col as a gather (the map lists, for each output position, the input
  elements of its window; a negative entry is the zero padding), then one gemm of the
  columns by the HWIO filters, which are already the (kh*kw*C, O) matrix it needs. A 1x1
  convolution of stride 1 without padding needs no columns: its input is the matrix.
  Grouped, each group's columns and filters are gathered apart and one batched gemm
  multiplies them. Its
  filter gradient is the same columns, transposed, times the cotangent (a gemm); its input
  gradient, col2im, a gemm giving each window's share, then a sum through the windows' map
  inverted (each input element's list of the shares that read it);
- ``reduce_window`` (max and sum pooling): a reduction through a map of the windows, the
  padding contributing the reduction's identity;
- ``pad`` with zeros: a gather whose padding entries are negative; ``depthwise_conv2d``: the
  grouped convolution of one group per channel;
- ``concat``: the operands put one after another into one buffer, then (unless they join
  along the leading axes) a gather arranging them;
- ``gather`` by run-time indices: the take kernel, which reads the indices on the GPU (an
  index out of range gathers zeros, as TensorFlow's gather on a GPU does: a kernel cannot
  raise);
- ``update_index``: a copy of the array, then the row written by the put_at kernel, which
  reads the index on the GPU (one out of range is clamped to the first or last row, as
  XLA's ``dynamic_update_slice`` does);
- ``max_pool_gradient``: each window's first tap equal to its maximum found by a
  min-reduction of the matching taps' indices, then each input element's sum, through the
  windows' map inverted, of the cotangents of the windows that chose it;
- ``stop_gradient``: its operand, as it is (on the host, each was a round trip);
- ``argmax`` and ``argmin``: the extremum along the axis (a reduction), then the least
  index where the operand equals it or is NaN (NumPy's first NaN wins, as NaN is the
  extremum there): elementwise kernels and a min-reduction of the indices.

A map that depends only on the signature is kept per GPU (`GPUDevice._remember`), so its
cost is paid once. The gradients of grouped convolutions, other pad values, empty operands
and dtypes without a gemm go on running on the host.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from stageflow.codegen.targets.indexed import put_at_entry, put_entry, take_entry
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.primitives.conv import (
    columns_by_group,
    conv2d_filter_gradient_p,
    conv2d_input_gradient_p,
    conv2d_p,
    filters_by_group,
    im2col,
    max_pool_gradient_p,
    reduce_window_p,
)
from stageflow.primitives.depthwise import depthwise_conv2d_p
from stageflow.primitives.elementwise import (
    equal_p,
    logical_and_p,
    logical_or_p,
    not_equal_p,
    select_p,
)
from stageflow.primitives.functional import stop_gradient_p
from stageflow.primitives.reduction import (
    MAX,
    SUM,
    argmax_p,
    argmin_p,
    reduce_max_p,
    reduce_min_p,
)
from stageflow.primitives.structural import (
    concat_p,
    gather_p,
    pad_p,
    reshape_p,
    update_index_p,
)
from stageflow.runtime.gpu_drivers import GEMM_MAX_SIZE

if TYPE_CHECKING:
    from stageflow.runtime.gpu import DeviceArray, GPUDevice

Padding = tuple[tuple[int, int], ...]
Op = Callable[["GPUDevice", list[Any], dict[str, Any]], "DeviceArray | None"]


def run(device: GPUDevice, primitive: Primitive, values: list[Any],
        params: dict[str, Any]) -> DeviceArray | None:
    """`primitive` on `values` done on `device`, or None where this module does not take
    it (the op then runs on the host)."""
    op = OPS.get(primitive)
    return None if op is None else op(device, values, params)


def _result_shape(primitive: Primitive, values: list[Any],
                  params: dict[str, Any]) -> tuple[int, ...]:
    types = [ShapedType(tuple(v.shape), np.dtype(v.dtype)) for v in values]
    return tuple(primitive.abstract_eval(*types, **params).shape)


def _signature(primitive: Primitive, values: list[Any], params: dict[str, Any]) -> tuple:
    return (primitive, *[tuple(v.shape) for v in values], *sorted(params.items()))


def _padded_positions(shape: tuple[int, ...], padding: Padding) -> np.ndarray:
    """The flat index of every element of an array of `shape`, padded with -1 (no element)."""
    positions = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    return np.pad(positions, padding, constant_values=-1)


def _is_pointwise(window: tuple[int, int], strides: tuple[int, int], padding: Padding) -> bool:
    """A 1x1 window at stride 1 without padding: the image is the columns' matrix itself."""
    return tuple(window) == (1, 1) and tuple(strides) == (1, 1) and not any(
        p for pair in padding for p in pair)


def _kept(device: GPUDevice, key: tuple, build: Callable[[], np.ndarray]) -> DeviceArray:
    """The array `build` makes, put on the GPU once and kept for `key` (a signature)."""
    found = device.kept_map(key)
    if found is None:
        array = build()
        found = device._remember(key, array, array.shape)
    return found[0]


def _window_map(shape: tuple[int, ...], window: tuple[int, int],
                params: dict[str, Any]) -> np.ndarray:
    """The index map of im2col's (N*Ho*Wo, kh*kw*C) matrix of an image of `shape`: the flat
    position each entry reads, -1 in the padding."""
    positions = _padded_positions(tuple(shape), ((0, 0), *params["padding"], (0, 0)))
    windows, _ = im2col(positions, window, params["strides"], ((0, 0), (0, 0)),
                        params["dilations"])
    return windows


def _geometry(name: str, shape: tuple[int, ...], window: tuple[int, int],
              params: dict[str, Any]) -> tuple:
    return (name, tuple(shape), tuple(window), params["strides"], params["padding"],
            params["dilations"])


def _inverse(windows: np.ndarray, size: int) -> np.ndarray:
    """For each of `size` positions, the flat indices of the entries of `windows` that read
    it, (size, the most any position has), padded with -1."""
    flat = windows.ravel()
    read = np.flatnonzero(flat >= 0)
    targets = flat[read]
    order = np.argsort(targets, kind="stable")
    counts = np.bincount(targets, minlength=size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sorted_targets = targets[order]
    inverse = np.full((size, max(int(counts.max(initial=0)), 1)), -1, np.int64)
    inverse[sorted_targets, np.arange(len(order)) - starts[sorted_targets]] = read[order]
    return inverse


def _columns(device: GPUDevice, x: DeviceArray, window: tuple[int, int],
             params: dict[str, Any]) -> DeviceArray:
    """im2col's matrix of `x` (on the GPU): `x` itself for a pointwise window, else a gather."""
    if _is_pointwise(window, params["strides"], params["padding"]):
        return x
    # kept per geometry: a convolution and its filter gradient share it
    indices = _kept(device, _geometry("windows", x.shape, window, params),
                    lambda: _window_map(tuple(x.shape), window, params))
    columns = device.empty(indices.shape, x.dtype)
    device._gather(x, indices, columns)
    return columns


def _takes(device: GPUDevice, values: list[Any], params: dict[str, Any],
           grouped: bool = False) -> bool:
    """Whether a convolution or its gradient runs here: ungrouped unless `grouped`, of a
    dtype the GPU's gemm has, nothing empty, every size within a gemm's."""
    return ((grouped or params.get("feature_group_count", 1) == 1)
            and np.dtype(values[0].dtype) in device.driver.gemm_dtypes()
            and all(0 not in v.shape and max(v.shape) <= GEMM_MAX_SIZE for v in values))


def _gemm(device: GPUDevice, a: DeviceArray, b: DeviceArray, out: DeviceArray, m: int, n: int,
          k: int, transpose_a: bool = False, transpose_b: bool = False) -> DeviceArray:
    """`out` = op(a) @ op(b), one gemm of row-major (m, k) by (k, n) matrices; `out`."""
    with device._order:
        device.driver.gemm(a.handle, b.handle, out.handle, out.dtype, 1, m, n, k, transpose_a,
                           transpose_b, 0, 0, 1.0, 0.0)
    return out


def _conv2d(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    if not _takes(device, values, params, grouped=True):
        return None
    x, w = (device.on_device(v) for v in values)
    kh, kw, channels, filters = w.shape
    shape = _result_shape(conv2d_p, values, params)
    rows, groups = math.prod(shape[:3]), params.get("feature_group_count", 1)
    if groups == 1:
        columns = _columns(device, x, (kh, kw), params)
        return _gemm(device, columns, w, device.empty(shape, x.dtype), rows, filters,
                     kh * kw * channels)
    return _grouped_conv2d(device, x, w, shape, params)


def _depthwise_conv2d(device: GPUDevice, values: list[Any],
                      params: dict[str, Any]) -> DeviceArray | None:
    """A convolution with one group per input channel: the [kh, kw, C, M] filter is the
    grouped convolution's [kh, kw, 1, C*M] (output channel c*M + m either way)."""
    x, w = values
    geometry = {**params, "feature_group_count": x.shape[3]}
    if not _takes(device, values, geometry, grouped=True):
        return None
    kh, kw, channels, multiplier = w.shape
    filters = device.execute(reshape_p, [device.on_device(w)],
                             {"shape": (kh, kw, 1, channels * multiplier)})
    shape = _result_shape(depthwise_conv2d_p, values, params)
    return _grouped_conv2d(device, device.on_device(x), filters, shape, geometry)


def _grouped_conv2d(device: GPUDevice, x: DeviceArray, w: DeviceArray, shape: tuple[int, ...],
                    params: dict[str, Any]) -> DeviceArray:
    """Each group's windows by its filters: the windows gathered group after group, (G,
    rows, kh*kw*C/G), the filters likewise, (G, kh*kw*C/G, O/G), one batched gemm, and
    its (G, rows, O/G) products gathered into the output's channels."""
    kh, kw, channels, filters = w.shape
    groups = params["feature_group_count"]
    rows, depth, outs = math.prod(shape[:3]), kh * kw * channels, filters // groups
    key = (*_geometry("grouped windows", x.shape, (kh, kw), params), filters, groups)
    windows = _kept(device, key, lambda: columns_by_group(
        _window_map(tuple(x.shape), (kh, kw), params), kh * kw, groups))
    taken = _kept(device, (*key, "filters"), lambda: filters_by_group(
        np.arange(math.prod(w.shape), dtype=np.int64).reshape(w.shape), groups))
    order = _kept(device, (*key, "order"), lambda: np.arange(
        groups * rows * outs, dtype=np.int64).reshape(groups, rows, outs).transpose(1, 0, 2))
    columns, by_group = device.empty(windows.shape, x.dtype), device.empty(taken.shape, w.dtype)
    device._gather(x, windows, columns)
    device._gather(w, taken, by_group)
    products = device.empty((groups, rows, outs), x.dtype)
    with device._order:
        device.driver.gemm(columns.handle, by_group.handle, products.handle, x.dtype, groups,
                           rows, outs, depth, False, False, rows * depth, depth * outs, 1.0,
                           0.0)
    out = device.empty(shape, x.dtype)
    device._gather(products, order, out)
    return out


def _filter_gradient(device: GPUDevice, values: list[Any],
                     params: dict[str, Any]) -> DeviceArray | None:
    """im2col's matrix of the input, transposed, times the cotangent's rows."""
    if not _takes(device, values, params):
        return None
    x, g = (device.on_device(v) for v in values)
    window, filters = tuple(params["filter_size"]), g.shape[3]
    columns = _columns(device, x, window, params)
    depth = math.prod(window) * x.shape[3]
    out = device.empty((*window, x.shape[3], filters), x.dtype)
    return _gemm(device, columns, g, out, depth, filters, math.prod(g.shape[:3]),
                 transpose_a=True)


def _input_gradient(device: GPUDevice, values: list[Any],
                    params: dict[str, Any]) -> DeviceArray | None:
    """col2im: the cotangent's rows times the filters' transpose give each window's share
    (N*Ho*Wo, kh*kw*C); each input element sums the shares of the windows that read it,
    a reduction through the windows' map inverted (padded with -1 to the most windows any
    element is in)."""
    if not _takes(device, values, params):
        return None
    g, w = (device.on_device(v) for v in values)
    kh, kw, channels, filters = w.shape
    rows, depth = math.prod(g.shape[:3]), kh * kw * channels
    shape = (g.shape[0], *params["input_size"], channels)
    if _is_pointwise((kh, kw), params["strides"], params["padding"]):
        return _gemm(device, g, w, device.empty(shape, g.dtype), rows, depth, filters,
                     transpose_b=True)
    shares = _gemm(device, g, w, device.empty((rows, depth), g.dtype), rows, depth, filters,
                   transpose_b=True)
    inverse = _kept(device, _geometry("col2im", shape, (kh, kw), params),
                    lambda: _inverse(_window_map(shape, (kh, kw), params), math.prod(shape)))
    out = device.empty(shape, g.dtype)
    device._reduce(SUM, shares, inverse, out, inverse.shape[1])
    return out


def _pooling_windows(shape: tuple[int, ...], params: dict[str, Any]) -> np.ndarray:
    """The flat positions each pooling window of an NHWC image of `shape` reads, (N, Ho,
    Wo, C, kh*kw), -1 in the padding."""
    (kh, kw), (sh, sw) = params["window"], params["strides"]
    positions = _padded_positions(shape, ((0, 0), *params["padding"], (0, 0)))
    windows = sliding_window_view(positions, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
    return windows.reshape(*windows.shape[:4], kh * kw)


def _pooling(device: GPUDevice, shape: tuple[int, ...], params: dict[str, Any]) -> DeviceArray:
    """`_pooling_windows` on the GPU, kept per geometry: a pooling and its gradient share
    it."""
    geometry = (params["window"], params["strides"], params["padding"])
    return _kept(device, ("pooling windows", shape, *geometry),
                 lambda: _pooling_windows(shape, params))


def _reduce_window(device: GPUDevice, values: list[Any],
                   params: dict[str, Any]) -> DeviceArray | None:
    (x,) = values
    kind = MAX if params["kind"] == "max" else SUM
    if np.dtype(x.dtype) not in kind.native_dtypes or 0 in x.shape:
        return None
    windows = _pooling(device, tuple(x.shape), params)
    x = device.on_device(x)
    out = device.empty(windows.shape[:4], x.dtype)
    device._reduce(kind, x, windows, out, windows.shape[4])
    return out


def _max_pool_gradient(device: GPUDevice, values: list[Any],
                       params: dict[str, Any]) -> DeviceArray | None:
    """Each window's cotangent to its first tap equal to the window's maximum: the taps'
    values gathered and compared with the maximum (padding never equal), the first equal
    tap of each window found by a min-reduction, then each input element sums, through
    the windows' map inverted, the cotangents of the windows whose chosen tap it is."""
    x, out, g = values
    if np.dtype(x.dtype) not in MAX.native_dtypes or 0 in x.shape or 0 in out.shape:
        return None
    shape = tuple(x.shape)
    key = ("max pool gradient", shape, *sorted(params.items()))
    windows = _pooling(device, shape, params)
    width = windows.shape[4]
    inverse = functools.cache(lambda: _inverse(_pooling_windows(shape, params),
                                               math.prod(shape)))
    of_window = _kept(device, (*key, "window of entry"),
                      lambda: np.where(inverse() >= 0, inverse() // width, -1))
    tap = _kept(device, (*key, "tap of entry"),
                lambda: np.where(inverse() >= 0, inverse() % width, -1))
    valid = _kept(device, (*key, "valid"), lambda: _pooling_windows(shape, params) >= 0)
    taps = _kept(device, (*key, "taps"), lambda: np.arange(width, dtype=np.int64))
    past = _kept(device, (*key, "past"), lambda: np.array(width, np.int64))
    zero = _kept(device, (*key, "zero"), lambda: np.zeros((), x.dtype))
    x, out, g = (device.on_device(v) for v in values)
    taken = device.empty(windows.shape, x.dtype)
    device._gather(x, windows, taken)
    maximum = device.execute(reshape_p, [out], {"shape": (*windows.shape[:4], 1)})
    hit = device.execute(logical_and_p, [device.execute(equal_p, [taken, maximum], {}),
                                         valid], {})
    first = device.execute(reduce_min_p, [device.execute(select_p, [hit, taps, past], {})],
                           {"axes": (4,), "keepdims": False})
    chosen = device.empty(of_window.shape, np.int64)
    device._gather(first, of_window, chosen)
    cotangents = device.empty(of_window.shape, g.dtype)
    device._gather(g, of_window, cotangents)
    shares = device.execute(select_p, [device.execute(equal_p, [chosen, tap], {}),
                                       cotangents, zero], {})
    grad = device.empty(shape, g.dtype)
    device._reduce(SUM, shares, None, grad, of_window.shape[1])
    return grad


def _pad(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    (x,) = values
    if params["value"] != 0 or not params["pads"] or 0 in x.shape:
        return None
    padded = _kept(device, _signature(pad_p, values, params),
                   lambda: _padded_positions(tuple(x.shape), params["pads"]))
    x = device.on_device(x)
    out = device.empty(padded.shape, x.dtype)
    device._gather(x, padded, out)
    return out


def _strings(values: list[Any]) -> bool:
    """Whether the op's operands are strings, which live on the host only."""
    return any(np.dtype(v.dtype) == object for v in values)


def _put(device: GPUDevice, source: DeviceArray, target: DeviceArray, offset: int) -> None:
    """`source`'s elements written into `target` from element `offset` on."""
    count, bits = math.prod(source.shape), 8 * target.dtype.itemsize
    device._launch(device._entry(f"put_i{bits}", put_entry(bits), 2, 2),
                   [source.handle, target.handle], [count, offset], count)


def _gather(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    x, indices = values
    if 0 in x.shape or _strings(values):
        return None
    axis = params["axis"] % len(x.shape)
    size = x.shape[axis]
    x, indices = device.on_device(x), device.on_device(indices)
    out = device.empty(_result_shape(gather_p, [x, indices], params), x.dtype)
    inner, count = math.prod(x.shape[axis + 1:]), math.prod(indices.shape)
    bits, index_bits = 8 * x.dtype.itemsize, 8 * indices.dtype.itemsize
    entry = device._entry(f"take_i{bits}_i{index_bits}", take_entry(bits, index_bits), 3, 4)
    total = math.prod(out.shape)
    device._launch(entry, [x.handle, indices.handle, out.handle], [total, inner, count, size],
                   total)
    return out


def _concat(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    """The operands put one after another into one buffer (the put kernel at each one's
    offset); along the leading axes that is the result, else a gather through a kept map
    arranges it."""
    if _strings(values):
        return None
    arrays = [device.on_device(v) for v in values]
    shape = _result_shape(concat_p, arrays, params)
    axis = params["axis"] % len(shape)
    staged = device.empty(shape, arrays[0].dtype)
    starts = np.cumsum([0] + [math.prod(a.shape) for a in arrays])
    for array, start in zip(arrays, starts[:-1], strict=True):
        _put(device, array, staged, int(start))
    if math.prod(shape[:axis]) == 1:  # the operands' blocks are the result's
        return staged

    def arrangement() -> np.ndarray:
        return np.concatenate([start + np.arange(math.prod(a.shape), dtype=np.int64).reshape(
            a.shape) for a, start in zip(arrays, starts[:-1], strict=True)], axis)

    out = device.empty(shape, staged.dtype)
    device._gather(staged, _kept(device, _signature(concat_p, arrays, params), arrangement),
                   out)
    return out


def _update_index(device: GPUDevice, values: list[Any],
                  params: dict[str, Any]) -> DeviceArray | None:
    x, update, index = values
    rows = x.shape[0]
    if not rows:
        return None  # NumPy's error, from the host
    out = device.duplicate(device.on_device(x))
    update, index = device.on_device(update), device.on_device(index)
    count = math.prod(update.shape)
    bits, index_bits = 8 * out.dtype.itemsize, 8 * index.dtype.itemsize
    entry = device._entry(f"put_at_i{bits}_i{index_bits}", put_at_entry(bits, index_bits),
                          3, 2)
    device._launch(entry, [update.handle, index.handle, out.handle], [count, rows], count)
    return out


def _arg_extremum(kind: Primitive) -> Op:
    """argmax (`kind` reduce_max) or argmin (reduce_min) on the GPU, as the module
    docstring says."""

    def run(device: GPUDevice, values: list[Any], params: dict[str, Any]
            ) -> DeviceArray | None:
        (x,) = values
        if np.dtype(x.dtype) not in kind.reduction.native_dtypes or 0 in x.shape:
            return None
        axis = params["axis"] % len(x.shape)
        x = device.on_device(x)
        extremum = device.execute(kind, [x], {"axes": (axis,), "keepdims": True})
        hit = device.execute(logical_or_p, [
            device.execute(equal_p, [x, extremum], {}),
            device.execute(not_equal_p, [x, x], {})], {})
        size, shape = x.shape[axis], [1] * len(x.shape)
        shape[axis] = size
        positions = _kept(device, ("positions along", tuple(shape)),
                          lambda: np.arange(size, dtype=np.int64).reshape(shape))
        past = _kept(device, ("past the positions", size), lambda: np.array(size, np.int64))
        chosen = device.execute(select_p, [hit, positions, past], {})
        return device.execute(reduce_min_p, [chosen], {"axes": (axis,), "keepdims": False})

    return run


def _stop_gradient(device: GPUDevice, values: list[Any],
                   params: dict[str, Any]) -> DeviceArray:
    """The operand itself: a `stop_gradient` only marks a value for tapes."""
    return device.on_device(values[0])


OPS: dict[Primitive, Op] = {stop_gradient_p: _stop_gradient, conv2d_p: _conv2d,
                            depthwise_conv2d_p: _depthwise_conv2d,
                            concat_p: _concat, conv2d_filter_gradient_p: _filter_gradient,
                            conv2d_input_gradient_p: _input_gradient,
                            reduce_window_p: _reduce_window, pad_p: _pad, gather_p: _gather,
                            update_index_p: _update_index,
                            argmax_p: _arg_extremum(reduce_max_p),
                            argmin_p: _arg_extremum(reduce_min_p),
                            max_pool_gradient_p: _max_pool_gradient}
