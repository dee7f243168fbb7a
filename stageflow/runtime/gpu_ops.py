"""Ops a GPU runs with its index-map kernels and its gemm, beyond moves and reductions.

Each is built from what the device already has (`stageflow.runtime.gpu`, the kernels of
`stageflow.codegen.targets.indexed`), so that a convnet or a decoder placed on a GPU keeps
its tensors there instead of copying them to the host and back at every such op:

- ``conv2d``: im2col as a gather (the map lists, for each output position, the input
  elements of its window; a negative entry is the zero padding), then one gemm of the
  columns by the HWIO filters, which are already the (kh*kw*C, O) matrix it needs. A 1x1
  convolution of stride 1 without padding needs no columns: its input is the matrix;
- ``reduce_window`` (max and sum pooling): a reduction through a map of the windows, the
  padding contributing the reduction's identity;
- ``pad`` with zeros: a gather whose padding entries are negative;
- ``gather`` by run-time indices: the indices read on the host, where the op's own NumPy
  kernel turns them into the map (and raises its error for an index out of range);
- ``update_index``: a copy of the array, then the row written at the index the host reads.

A map that depends only on the signature is kept per GPU (`GPUDevice._remember`), so its
cost is paid once. Grouped convolutions, other pad values, empty operands and dtypes
without a gemm go on running on the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from stageflow.codegen.targets.indexed import put_entry
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.primitives.conv import conv2d_p, im2col, reduce_window_p
from stageflow.primitives.reduction import MAX, SUM
from stageflow.primitives.structural import gather_p, pad_p, row_position, update_index_p
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


def _signature(name: str, values: list[Any], params: dict[str, Any]) -> tuple:
    return (name, *[tuple(v.shape) for v in values], *sorted(params.items()))


def _padded_positions(shape: tuple[int, ...], padding: Padding) -> np.ndarray:
    """The flat index of every element of an array of `shape`, padded with -1 (no element)."""
    positions = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    return np.pad(positions, padding, constant_values=-1)


def _conv2d(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    x, w = values
    dtype = np.dtype(x.dtype)
    if (params.get("feature_group_count", 1) != 1 or dtype not in device.driver.gemm_dtypes()
            or 0 in x.shape or 0 in w.shape):
        return None
    shape = _result_shape(conv2d_p, values, params)
    kh, kw, channels, filters = w.shape
    rows, depth = math.prod(shape[:3]), kh * kw * channels
    if max(rows, depth, filters) > GEMM_MAX_SIZE:
        return None
    strides, padding, dilations = params["strides"], params["padding"], params["dilations"]
    x, w = device.on_device(x), device.on_device(w)
    columns = x
    if (kh, kw) != (1, 1) or tuple(strides) != (1, 1) or any(p for pair in padding for p in pair):
        key = _signature("conv2d", [x, w], params)
        found = device._maps.get(key)
        if found is None:
            positions = _padded_positions(x.shape, ((0, 0), *padding, (0, 0)))
            windows, _ = im2col(positions, (kh, kw), strides, ((0, 0), (0, 0)), dilations)
            found = device._remember(key, windows, windows.shape)
        columns = device.empty(found[1], dtype)
        device._gather(x, found[0], columns)
    out = device.empty(shape, dtype)
    with device._order:
        device.driver.gemm(columns.handle, w.handle, out.handle, dtype, 1, rows, filters, depth,
                           False, False, 0, 0, 1.0, 0.0)
    return out


def _reduce_window(device: GPUDevice, values: list[Any],
                   params: dict[str, Any]) -> DeviceArray | None:
    (x,) = values
    kind = MAX if params["kind"] == "max" else SUM
    if np.dtype(x.dtype) not in kind.native_dtypes or 0 in x.shape:
        return None
    key = _signature("reduce_window", values, params)
    found = device._maps.get(key)
    if found is None:
        (kh, kw), (sh, sw) = params["window"], params["strides"]
        positions = _padded_positions(tuple(x.shape), ((0, 0), *params["padding"], (0, 0)))
        windows = sliding_window_view(positions, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
        found = device._remember(key, windows.reshape(*windows.shape[:4], kh * kw),
                                 windows.shape[:4])
    x = device.on_device(x)
    out = device.empty(found[1], x.dtype)
    window = params["window"]
    device._reduce(kind, x, found[0], out, window[0] * window[1])
    return out


def _pad(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    (x,) = values
    if params["value"] != 0 or not params["pads"] or 0 in x.shape:
        return None
    key = _signature("pad", values, params)
    found = device._maps.get(key)
    if found is None:
        padded = _padded_positions(tuple(x.shape), params["pads"])
        found = device._remember(key, padded, padded.shape)
    x = device.on_device(x)
    out = device.empty(found[1], x.dtype)
    device._gather(x, found[0], out)
    return out


def _gather(device: GPUDevice, values: list[Any], params: dict[str, Any]) -> DeviceArray | None:
    x, indices = values
    if 0 in x.shape or np.dtype(x.dtype) == object:
        return None
    positions = np.arange(math.prod(x.shape), dtype=np.int64).reshape(x.shape)
    chosen = gather_p.kernel(positions, np.asarray(indices), **params)
    x = device.on_device(x)
    out = device.empty(chosen.shape, x.dtype)
    device._gather(x, device.copy_in(np.ascontiguousarray(chosen)), out)
    return out


def _update_index(device: GPUDevice, values: list[Any],
                  params: dict[str, Any]) -> DeviceArray | None:
    x, update, index = values
    position = row_position(np.asarray(index), x.shape[0])
    out = device.duplicate(device.on_device(x))
    update = device.on_device(update)
    count = math.prod(update.shape)
    bits = 8 * out.dtype.itemsize
    device._launch(device._entry(f"put_i{bits}", put_entry(bits), 2, 2),
                   [update.handle, out.handle], [count, position * count], count)
    return out


OPS: dict[Primitive, Op] = {conv2d_p: _conv2d, reduce_window_p: _reduce_window, pad_p: _pad,
                            gather_p: _gather, update_index_p: _update_index}
