"""ONNX's tensor-manipulation ops: Reshape, Transpose, Concat, Split, Slice, Squeeze,
Unsqueeze, Flatten, Expand, Tile, Pad, Shape, Size, Trilu, ReverseSequence, CenterCropPad and
Compress.

Shapes are static where the model's are: the numbers a result's shape depends on (Reshape's
shape, Slice's starts, Pad's pads) are read with `node.const`, so the Shape -> Gather ->
Concat -> Reshape chains exporters write fold at import. Shape of a tensor with a dim unknown
until run time is an sf tensor (the unknown dims read with `dim_size`) whose entries are
remembered as the dims they are (`Dim`), through Gather, Slice, Concat, Squeeze and
Unsqueeze: Reshape, Expand and ConstantOfShape given such a shape name those dims (the
PyTorch exporter's ``x.view(x.size(0), -1)``). A shape computed otherwise (arithmetic on
dims) cannot be known at import, and the op that needs it says to give `input_shapes`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence

import numpy as np

import stageflow as sf
from stageflow.core.shapes import same_dim_reference
from stageflow.frontend.tensor import Tensor
from stageflow.onnx.converters import Node, Value, converts
from stageflow.primitives.structural import dim_size_p, reshape_p

__all__ = ["Dim", "axis_of", "dim_of", "dims_in", "element_coordinates", "expand_to", "ints",
           "shape_of", "shape_value", "static_shape"]

# An entry of a shape value: a size known at import, or (tensor, axis), that tensor's dim
# unknown until run time.
Dim = int | tuple[Value, int]
# The entries of the shape tensors built from unknown dims, by id (a Tensor is not
# hashable), dropped with the tensor.
_DIMS: dict[int, tuple[weakref.ref, tuple[Dim, ...]]] = {}


def ints(node: Node, value: Value | None, what: str) -> list[int]:
    """The known integer input `value` as a flat list."""
    return [int(v) for v in np.asarray(node.const(value, what)).reshape(-1)]


def axis_of(node: Node, axis: int, rank: int) -> int:
    """`axis` in [0, rank), negative counting from the end; an error outside [-rank, rank)."""
    if not -rank <= axis < rank:
        raise node.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def static_shape(node: Node, x: Value, what: str) -> tuple[int, ...]:
    """The shape of `x`, which must be known at import (`what` names the op's need)."""
    if None in x.shape:
        raise node.error(f"{what} needs the input's shape at import, but it is "
                         f"{tuple(x.shape)}; give the model's inputs static shapes "
                         f"(sf.onnx.load(..., input_shapes={{name: shape}}))")
    return tuple(int(d) for d in x.shape)


def dim_of(x: Value, axis: int) -> Value:
    """Dim `axis` of `x` as an int64 scalar: known, or read at run time."""
    size = x.shape[axis]
    if size is not None:
        return np.asarray(size, np.int64)
    return dim_size_p.bind(x, axis=axis)


def shape_value(dims: Sequence[Dim], compute: Callable[[], Tensor],
                scalar: bool = False) -> Value:
    """An int64 shape value of `dims` (1-D, or 0-d holding one): an array when all are
    known, else the tensor `compute` makes, its entries remembered. `compute` is called
    only then."""
    if all(isinstance(d, int) for d in dims):
        known = np.array(dims, np.int64)
        return known.reshape(()) if scalar else known
    value = compute()
    key = id(value)
    _DIMS[key] = (weakref.ref(value, lambda _, key=key: _DIMS.pop(key, None)), tuple(dims))
    return value


def dims_in(value: Value | None) -> list[Dim] | None:
    """The entries of an int shape value of rank 0 or 1: an array's numbers, a remembered
    tensor's dims; None for any other tensor."""
    if isinstance(value, np.ndarray):
        return [int(v) for v in value.reshape(-1)] if value.dtype == np.int64 else None
    found = _DIMS.get(id(value))
    return list(found[1]) if found is not None and found[0]() is value else None


def shape_of(x: Value, start: int = 0, end: int | None = None) -> Value:
    """``x.shape[start:end]`` as int64: an array when those dims are known, else an sf tensor
    whose unknown dims are read at run time (and remembered as x's)."""
    axes = range(len(x.shape))[start:end]
    return shape_value([x.shape[a] if x.shape[a] is not None else (x, a) for a in axes],
                       lambda: sf.concat([sf.reshape(dim_of(x, a), [1]) for a in axes], 0))


def _known_dims(node: Node, value: Value | None, what: str) -> list[Dim]:
    """The entries of a shape input, which must be known or remembered."""
    dims = dims_in(value)
    return ints(node, value, what) if dims is None else dims


@converts("Shape")
def shape(node: Node, data: Value) -> Value:
    rank = len(data.shape)
    start, end = node.attr("start", 0), node.attr("end", rank)
    return shape_of(data, *slice(start, end).indices(rank)[:2])


@converts("Size")
def size(node: Node, data: Value) -> Value:
    if None not in data.shape:
        return np.asarray(math.prod(data.shape), np.int64)
    total: Value = np.asarray(1, np.int64)
    for axis in range(len(data.shape)):
        total = sf.multiply(total, dim_of(data, axis))
    return total


@converts("Reshape")
def reshape(node: Node, data: Value, shape: Value) -> Value:
    """Reshape: 0 copies the input's dim (unless `allowzero`), one -1 is inferred. A dim
    of the input unknown at import stays its run-time dim; one other unknown dim is
    inferred as a -1 is, from the element count."""
    source = tuple(data.shape)
    allowzero = node.attr("allowzero", 0)
    param: list[int] = []
    free: list[int] = []  # the positions of a -1 or of another tensor's unknown dim
    for i, d in enumerate(_known_dims(node, shape, "the shape input")):
        if isinstance(d, int) and d == 0 and not allowzero:
            if i >= len(source):
                raise node.error(f"the shape copies (0) dim {i}, which the rank-"
                                 f"{len(source)} input does not have")
            d = (data, i)
        if isinstance(d, tuple):
            tensor, axis = d
            if tensor is data:
                param.append(source[axis] if source[axis] is not None
                             else same_dim_reference(axis))
                continue
            d = -1
        if d < -1:
            raise node.error(f"the shape has a dim below -1 ({d})")
        if d == -1:
            free.append(i)
        param.append(d)
    named = [-2 - d for d in param if d <= -2]
    if len(free) > 1 or (free and named):  # -1 beside named dims: infer it here
        rest = [d for k, d in enumerate(source) if k not in named]
        if len(free) > 1 or None in rest:
            raise node.error(f"cannot infer {len(free)} dims of the shape from the input "
                             f"shape {source} at import; give the model's inputs static "
                             f"shapes (sf.onnx.load(..., input_shapes={{name: shape}}))")
        known = math.prod(d for d in param if d >= 0)
        if known == 0 or math.prod(rest) % known:
            raise node.error(f"cannot reshape {source} into {param}")
        param[free[0]] = math.prod(rest) // known
    if not named:
        return sf.reshape(data, param)
    return reshape_p.bind(sf.convert_to_tensor(data), shape=tuple(param))


@converts("Transpose")
def transpose(node: Node, data: Value) -> Value:
    perm = node.attr("perm", None)
    return sf.transpose(data, None if perm is None else list(perm))


@converts("Concat")
def concat(node: Node, *inputs: Value) -> Value:
    rank = len(inputs[0].shape)
    axis = axis_of(node, node.attr("axis"), rank)
    parts = [dims_in(x) for x in inputs] if rank == 1 else [None]
    if all(p is not None for p in parts) and not all(isinstance(x, np.ndarray)
                                                     for x in inputs):  # shape values
        return shape_value([d for p in parts for d in p], lambda: sf.concat(list(inputs), 0))
    return sf.concat(list(inputs), axis)


@converts("Split")
def split(node: Node, data: Value, sizes: Value | None = None) -> list[Value]:
    """Split by the `split` input's sizes, else into `num_outputs` (opset 18) parts of
    ceil(dim / n) elements, the last smaller, else into as many equal parts as outputs."""
    axis = axis_of(node, node.attr("axis", 0), len(data.shape))
    parts = node.attr("num_outputs", None)
    if sizes is not None:
        counts = ints(node, sizes, "the split input")
    else:
        dim = data.shape[axis]
        if dim is None:
            raise node.error(f"splitting axis {axis} of unknown size needs the split input; "
                             f"give the model's inputs static shapes (sf.onnx.load(..., "
                             f"input_shapes={{name: shape}}))")
        if parts is None:
            parts = node.output_count
            if dim % parts:
                raise node.error(f"axis {axis} of size {dim} does not split into {parts} "
                                 f"equal parts")
        chunk = -(-dim // parts)
        counts = [min(chunk, max(dim - k * chunk, 0)) for k in range(parts)]
    return sf.split(data, counts, axis)


@converts("Slice")
def slice_(node: Node, data: Value, starts: Value, ends: Value, axes: Value | None = None,
           steps: Value | None = None) -> Value:
    """Slice: ONNX clamps its bounds as Python's slices do, negative steps included.
    Bounds computed at run time (a loop's counter) slice as `_slice_at_run_time` does."""
    rank = len(data.shape)
    if any(v is not None and not isinstance(v, np.ndarray) for v in (starts, ends, steps)):
        return _slice_at_run_time(node, sf.convert_to_tensor(data), starts, ends, axes, steps)
    first = ints(node, starts, "the starts input")
    last = ints(node, ends, "the ends input")
    listed = list(range(len(first))) if axes is None else ints(node, axes, "the axes input")
    stride = [1] * len(first) if steps is None else ints(node, steps, "the steps input")
    if not len(first) == len(last) == len(listed) == len(stride):
        raise node.error("starts, ends, axes and steps differ in length")
    if 0 in stride:
        raise node.error("a step is 0")
    dims = dims_in(data) if rank == 1 and len(first) == 1 else None
    if dims is not None and not isinstance(data, np.ndarray):  # a shape value
        picked = slice(first[0], last[0], stride[0])
        return shape_value(dims[picked], lambda: sf.convert_to_tensor(data)[picked])
    key = [slice(None)] * rank
    for start, end, axis, step in zip(first, last, listed, stride, strict=True):
        axis = axis_of(node, axis, rank)
        dim = data.shape[axis]
        if dim is not None:  # the clamped bounds, as small numbers
            start, end, step = slice(start, end, step).indices(dim)
            end = None if end < 0 else end
        key[axis] = slice(start, end, step)
    return sf.convert_to_tensor(data)[tuple(key)]


def _slice_at_run_time(node: Node, data: Tensor, starts: Value, ends: Value,
                       axes: Value | None, steps: Value | None) -> Tensor:
    """Slice whose starts, ends or steps are known only at run time: how many elements it
    keeps depends on them, so each sliced axis has an unknown dim. Per axis, the bounds
    are clamped as Python's `slice.indices` clamps them (ONNX's reference slices with
    Python's slices), and the kept elements gathered at ``start + step * k`` for the `k`
    that `sf.nonzero` finds below the count. `nonzero` has no compiled lowering, so a
    staged function holding such a Slice runs as Python steps. The axes must be known."""
    starts, ends, steps = (None if v is None else v.reshape(-1) if isinstance(v, np.ndarray)
                           else sf.reshape(v, [-1]) for v in (starts, ends, steps))
    length = starts.shape[0]
    if length is None or ends.shape[0] != length:
        raise node.error(f"starts and ends must be of one length known at import, got "
                         f"shapes {tuple(starts.shape)} and {tuple(ends.shape)}")
    rank = len(data.shape)
    listed = list(range(length)) if axes is None else ints(node, axes, "the axes input")
    if len(listed) != length or (steps is not None and steps.shape[0] != length):
        raise node.error("starts, ends, axes and steps differ in length")
    listed = [axis_of(node, axis, rank) for axis in listed]
    if len(set(listed)) != len(listed):
        raise node.error(f"repeated axis in {listed}")
    if steps is None:
        steps = np.ones(length, np.int64)
    elif isinstance(steps, np.ndarray):
        if 0 in steps:
            raise node.error("a step is 0")
    else:
        sf.debugging.assert_none_equal(steps, np.zeros(length, steps.dtype),
                                       message=f"ONNX node {node.name!r} (Slice): a step is 0")
    first, last, stride = (sf.cast(v, sf.int64) for v in (starts, ends, steps))
    result = data
    for position, axis in enumerate(listed):
        result = _take_at_run_time(result, data, axis, first[position], last[position],
                                   stride[position])
    return result


def _take_at_run_time(x: Tensor, data: Tensor, axis: int, start: Tensor, stop: Tensor,
                      step: Tensor) -> Tensor:
    """``x[start:stop:step]`` along `axis`, the int64 scalars' values known at run time;
    `data` is the sliced input, of the axis' full length."""
    dim = dim_of(data, axis)
    backwards = sf.less(step, np.int64(0))
    low = sf.where(backwards, np.int64(-1), np.int64(0))
    high = sf.where(backwards, dim - np.int64(1), dim)

    def clamped(bound: Tensor) -> Tensor:
        counted = sf.where(sf.less(bound, np.int64(0)), bound + dim, bound)
        return sf.minimum(sf.maximum(counted, low), high)

    first, last = clamped(start), clamped(stop)
    # A step of 0 fails the node's check; it divides by 1 meanwhile.
    step = sf.where(sf.equal(step, np.int64(0)), np.int64(1), step)
    count = -sf.floordiv(first - last, step)  # ceil((last - first) / step), <= 0 if none
    positions = (np.arange(data.shape[axis], dtype=np.int64) if data.shape[axis] is not None
                 else _positions(data, axis))
    kept = sf.reshape(sf.nonzero(sf.less(positions, count)), [-1])
    return sf.gather(x, first + step * kept, axis=axis)


def _axes_input(node: Node, axes: Value | None) -> list[int] | None:
    if axes is None:
        return None
    return ints(node, axes, "the axes input")


@converts("Squeeze")
def squeeze(node: Node, data: Value, axes: Value | None = None) -> Value:
    listed = _axes_input(node, axes)
    if listed is None:
        if None in data.shape:
            raise node.error(f"Squeeze without axes of {tuple(data.shape)}: which unknown "
                             f"dims are 1 is not known at import; name the axes, or give the "
                             f"model's inputs static shapes (sf.onnx.load(..., "
                             f"input_shapes={{name: shape}}))")
        return sf.squeeze(data)
    rank = len(data.shape)
    dims = dims_in(data)
    if dims is not None and len(dims) == 1 and rank == 1 and not isinstance(data, np.ndarray):
        return shape_value(dims, lambda: sf.squeeze(data, [0]), scalar=True)
    return sf.squeeze(data, [axis_of(node, a, rank) for a in listed])


@converts("Unsqueeze")
def unsqueeze(node: Node, data: Value, axes: Value) -> Value:
    listed = ints(node, axes, "the axes input")
    rank = len(data.shape) + len(listed)
    inserted = sorted(axis_of(node, a, rank) for a in listed)
    if len(set(inserted)) != len(inserted):
        raise node.error(f"repeated axis in {listed}")
    dims = dims_in(data)
    if rank == 1 and dims is not None and not isinstance(data, np.ndarray):  # a shape value
        return shape_value(dims, lambda: sf.reshape(data, [1]))
    result = sf.convert_to_tensor(data)
    for axis in inserted:
        result = sf.expand_dims(result, axis)
    return result


@converts("Flatten")
def flatten(node: Node, data: Value) -> Value:
    rank = len(data.shape)
    axis = node.attr("axis", 1)
    if not -rank <= axis <= rank:
        raise node.error(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    outer, inner = data.shape[:axis], data.shape[axis:]
    if None in outer and None in inner:
        raise node.error(f"flattening {tuple(data.shape)} at axis {axis} leaves two "
                         f"unknown dims; give the model's inputs static shapes "
                         f"(sf.onnx.load(..., input_shapes={{name: shape}}))")
    if None in outer:
        return sf.reshape(data, [-1, math.prod(inner)])
    return sf.reshape(data, [math.prod(outer), -1 if None in inner else math.prod(inner)])


def expand_to(x: Value, dims: Sequence[Dim]) -> Tensor:
    """`x` broadcast both ways against `dims` (Expand), their unknown entries other
    tensors' dims: each of those is broadcast in from a line of that tensor."""
    rank = max(len(dims), len(x.shape))
    result = sf.where(np.ones([d if isinstance(d, int) else 1 for d in dims], bool), x, x)
    for i, d in enumerate(dims):
        if isinstance(d, tuple):  # a mask of that dim (any values) selecting result itself
            line = _line(*d)
            at = i + rank - len(dims)
            line = sf.reshape(line, [-1 if a == at else 1 for a in range(rank)])
            result = sf.where(sf.equal(line, line), result, result)
    return result


@converts("Expand")
def expand(node: Node, data: Value, shape: Value) -> Value:
    """Expand: bidirectional broadcasting (a 1 in `shape` keeps the input's dim)."""
    target = _known_dims(node, shape, "the shape input")
    if None in data.shape or not all(isinstance(d, int) for d in target):
        return expand_to(data, target)  # broadcasting itself carries the unknown dims
    try:
        result = np.broadcast_shapes(tuple(data.shape), tuple(target))
    except ValueError:
        raise node.error(f"cannot broadcast {tuple(data.shape)} to {target}") from None
    return sf.broadcast_to(data, result)


@converts("Tile")
def tile(node: Node, data: Value, repeats: Value) -> Value:
    counts = ints(node, repeats, "the repeats input")
    if len(counts) != len(data.shape) or any(c < 0 for c in counts):
        raise node.error(f"repeats {counts} for a rank-{len(data.shape)} input")
    if None not in data.shape:
        return sf.tile(data, counts)
    result = sf.convert_to_tensor(data)
    for axis, count in enumerate(counts):
        if count == 0:
            result = _take(result, axis, 0, 0)
        elif count > 1:
            result = sf.concat([result] * count, axis)
    return result


def _crop(x: Tensor, axis: int, before: int, after: int) -> Tensor:
    """`x` with `before` elements cut from the start of `axis` and `after` from its end."""
    key = [slice(None)] * x.ndim
    key[axis] = slice(before, -after if after else None)
    return x[tuple(key)]


def _take(x: Tensor, axis: int, start: int | None, stop: int | None,
          step: int | None = None) -> Tensor:
    key = [slice(None)] * x.ndim
    key[axis] = slice(start, stop, step)
    return x[tuple(key)]


def _line(x: Tensor, axis: int) -> Tensor:
    """The elements of `x` along `axis`, at 0 on the other axes: 1-D, of the axis' length,
    known or not (zeros where another axis is empty: padded to one element first)."""
    key = tuple(slice(None) if a == axis else slice(0, 1) for a in range(x.ndim))
    line = x[key]
    if any(d != 1 for a, d in enumerate(line.shape) if a != axis):
        line = sf.pad(line, [(0, 0) if a == axis else (0, 1) for a in range(x.ndim)])[key]
    return reshape_p.bind(line, shape=(same_dim_reference(axis),))


def _positions(x: Tensor, axis: int) -> Tensor:
    """0, 1, ... along `axis` of `x` (int64), its length known or not."""
    return sf.cumsum(sf.ones_like(_line(x, axis), sf.int64), 0) - 1


def _pad_axis(node: Node, x: Tensor, axis: int, before: int, after: int, mode: str) -> Tensor:
    """`x` padded along one axis in `mode` (edge, reflect or wrap), as np.pad pads: the
    padded positions, mapped back into the axis, gathered."""
    dim = x.shape[axis]
    if dim is not None:
        if dim == 0:
            raise node.error(f"cannot pad an empty axis in mode {mode!r}")
        source: Value = np.pad(np.arange(dim, dtype=np.int64), (before, after), mode=mode)
        return sf.gather(x, source, axis)
    size = dim_of(x, axis)
    wanted = sf.concat([np.arange(-before, 0, dtype=np.int64), _positions(x, axis),
                        size + np.arange(after, dtype=np.int64)], 0)
    if mode == "edge":
        source = sf.minimum(sf.maximum(wanted, 0), size - 1)
    elif mode == "wrap":
        source = sf.mod(wanted, size)
    else:  # reflect: a period of 2 (dim - 1), the second half mirrored
        period = sf.maximum(2 * (size - 1), 1)
        folded = sf.mod(wanted, period)
        source = sf.where(sf.less(folded, size), folded, period - folded)
    return sf.gather(x, source, axis)


@converts("Pad")
def pad(node: Node, data: Value, pads: Value, constant_value: Value | None = None,
        axes: Value | None = None) -> Value:
    """Pad: negative pads crop; modes constant, reflect, edge and wrap."""
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise node.error(f"mode {mode!r} is not one of constant, reflect, edge, wrap")
    rank = len(data.shape)
    widths = ints(node, pads, "the pads input")
    listed = list(range(rank)) if axes is None else [
        axis_of(node, a, rank) for a in ints(node, axes, "the axes input")]
    if len(widths) != 2 * len(listed):
        raise node.error(f"{len(widths)} pads for {len(listed)} axes")
    before, after = [0] * rank, [0] * rank
    for k, axis in enumerate(listed):
        before[axis], after[axis] = widths[k], widths[k + len(listed)]
    x = sf.convert_to_tensor(data)
    for axis in range(rank):
        if before[axis] < 0 or after[axis] < 0:
            x = _crop(x, axis, max(-before[axis], 0), max(-after[axis], 0))
    before, after = [max(b, 0) for b in before], [max(a, 0) for a in after]
    if mode == "constant":
        widths = list(zip(before, after, strict=True))
        if isinstance(constant_value, Tensor):  # a value known at run time: where it pads
            inside = sf.pad(sf.ones_like(x, sf.bool), widths)
            return sf.where(inside, sf.pad(x, widths), sf.reshape(constant_value, []))
        value = np.zeros(1, x.dtype) if constant_value is None else constant_value
        value = np.asarray(value, x.dtype).reshape(-1)
        return sf.pad(x, widths, constant_values=value[0].item() if value.size else 0)
    for axis in range(rank):
        if before[axis] or after[axis]:
            x = _pad_axis(node, x, axis, before[axis], after[axis], mode)
    return x


@converts("Trilu")
def trilu(node: Node, data: Value, k: Value | None = None) -> Value:
    """The upper (or lower) triangle of the last two dims, from diagonal `k`."""
    diagonal = 0 if k is None else ints(node, k, "the k input")[0]
    if len(data.shape) < 2 or None in data.shape[-2:]:
        raise node.error(f"Trilu needs a matrix of known size in the last two dims, got "
                         f"{tuple(data.shape)}; give the model's inputs static shapes "
                         f"(sf.onnx.load(..., input_shapes={{name: shape}}))")
    rows, cols = data.shape[-2:]
    keep = np.ones((rows, cols), bool)
    keep = np.triu(keep, diagonal) if node.attr("upper", 1) else np.tril(keep, diagonal)
    return sf.where(keep, data, sf.zeros_like(data))


def element_coordinates(indices: Value, axis: int) -> Tensor:
    """For each element of `indices` (a static shape), its own coordinates with the one
    along `axis` replaced by its value: ``[*indices.shape, rank]`` int64, the index tuples
    of GatherElements and ScatterElements."""
    shape = tuple(indices.shape)
    coordinates = [sf.cast(indices, sf.int64) if a == axis else
                   np.broadcast_to(np.arange(shape[a], dtype=np.int64).reshape(
                       [-1 if b == a else 1 for b in range(len(shape))]), shape)
                   for a in range(len(shape))]
    return sf.stack(coordinates, -1)


@converts("ReverseSequence")
def reverse_sequence(node: Node, data: Value, lengths: Value) -> Value:
    """Each batch entry's first `lengths[b]` time steps reversed, the rest kept."""
    batch_axis, time_axis = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    shape = static_shape(node, data, "ReverseSequence")
    line = [1] * len(shape)
    line[time_axis] = shape[time_axis]
    steps = np.arange(shape[time_axis], dtype=np.int64).reshape(line)
    line = [1] * len(shape)
    line[batch_axis] = shape[batch_axis]
    length = sf.reshape(sf.cast(lengths, sf.int64), line)
    source = sf.where(sf.less(steps, length), length - 1 - steps, steps)
    return sf.gather_nd(data, element_coordinates(sf.broadcast_to(source, shape), time_axis))


@converts("CenterCropPad")
def center_crop_pad(node: Node, data: Value, shape: Value) -> Value:
    """Each listed axis cropped or zero-padded to the given size, centred (the odd element
    at the end)."""
    sizes = ints(node, shape, "the shape input")
    rank = len(data.shape)
    listed = [axis_of(node, a, rank) for a in node.attr("axes", range(rank))]
    if len(sizes) != len(listed):
        raise node.error(f"{len(sizes)} sizes for {len(listed)} axes")
    x = sf.convert_to_tensor(data)
    for axis, want in zip(listed, sizes, strict=True):
        dim = x.shape[axis]
        if dim is None:
            raise node.error(f"CenterCropPad needs axis {axis} known at import, but the "
                             f"input's shape is {tuple(x.shape)}; give the model's inputs "
                             f"static shapes (sf.onnx.load(..., input_shapes={{name: shape}}))")
        if want < dim:
            x = _take(x, axis, (dim - want) // 2, (dim - want) // 2 + want)
        elif want > dim:
            pads = [(0, 0)] * rank
            pads[axis] = ((want - dim) // 2, want - dim - (want - dim) // 2)
            x = sf.pad(x, pads)
    return x


@converts("Compress")
def compress(node: Node, data: Value, condition: Value) -> Value:
    """The slices along `axis` (of the flattened input without one) where `condition` is
    true; a shorter condition leaves the remaining slices out."""
    axis = node.attr("axis", None)
    x = sf.convert_to_tensor(data)
    if axis is None:
        x, axis = sf.reshape(x, [-1]), 0
    axis = axis_of(node, axis, x.ndim)
    count = condition.shape[0]
    if count is None or (x.shape[axis] is not None and count > x.shape[axis]):
        raise node.error(f"a condition of shape {tuple(condition.shape)} for axis {axis} "
                         f"of {tuple(x.shape)}")
    if x.shape[axis] is None or count < x.shape[axis]:
        x = _take(x, axis, 0, count)
    if isinstance(condition, np.ndarray):
        return sf.gather(x, np.flatnonzero(condition).astype(np.int64), axis)
    return sf.boolean_mask(x, sf.cast(condition, sf.bool), axis)

