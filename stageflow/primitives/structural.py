"""Structural primitives with their gradients: broadcast, reshape, transpose, slice, concat, ...

The full set: broadcast_to, reshape, transpose, slice, concat, pad, gather, iota, constant,
dim_size, update_index.

They move or replicate elements without arithmetic. Their NumPy kernels return views where
NumPy can (tensors are immutable, so sharing memory is safe).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith, same_dims
from stageflow.core.errors import InvalidIndexError
from stageflow.core.op_facts import Cost, Family, LoweredBy, Memory
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape, normalize_axis, num_elements
from stageflow.primitives.autodiff import (
    constant,
    equal,
    floating_only,
    matmul,
    product,
    reshape,
    unbroadcast,
    where,
    zeros_like,
)
from stageflow.primitives.elementwise import add_p, cast_p
from stageflow.primitives.reduction import reduce_sum_p
from stageflow.primitives.scan import cumsum_p


def _shape_param_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                      shape: tuple[int | None, ...], **_: object) -> list[D]:
    """The dims the `shape` param gives (broadcast_to, iota)."""
    return [d.const(n) for n in shape]

STRUCTURAL = Family.STRUCTURAL


def _broadcast_rule(x: ShapedType, *, shape: tuple[int | None, ...]) -> ShapedType:
    if len(shape) < x.ndim:
        raise ValueError(f"cannot broadcast to the lower rank shape {format_shape(shape)}")
    # An unknown dim may broadcast to any size (it must then be 1 or that size at run time).
    target = shape[len(shape) - x.ndim:]
    if any(d is not None and d not in (1, t) for d, t in zip(x.shape, target, strict=True)):
        raise ValueError(f"cannot broadcast {format_shape(x.shape)} to {format_shape(shape)}")
    return ShapedType(tuple(_shape_param_dims(PYTHON, [x.shape], shape=shape)), x.dtype)


broadcast_to_p = Primitive(
    "broadcast_to",
    shape_rule=_broadcast_rule,
    kernel=lambda x, *, shape: np.broadcast_to(x, shape),
    dims=_shape_param_dims,
    summary="replicate x along new leading dims and dims of size 1",
    family=STRUCTURAL,
    memory=Memory.VIEW, cost=Cost.MOVEMENT, lowered_by=LoweredBy.OP_RULE,
    takes_strings=True,
)


def _reshape_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                  shape: tuple[int, ...]) -> list[D]:
    """The target dims: ``n >= 0`` as given, ``-2 - k`` the operand's dim k
    (`core.shapes.reshape_param`), and the -1 one the element count over the others'
    product (0 when that is 0, a reshape the op rejects)."""
    source = operands[0]
    dims = [source[-2 - n] if n <= -2 else d.const(n) for n in shape]
    if -1 not in shape:
        return dims
    known = math.prod(n for n in shape if n != -1)
    total = d.const(1)
    for dim in source:
        total = d.mul(total, dim)
    inferred = d.const(0) if known == 0 else d.floordiv(total, known)
    return [inferred if n == -1 else dim for n, dim in zip(shape, dims, strict=True)]


def _reshape_rule(x: ShapedType, *, shape: tuple[int, ...]) -> ShapedType:
    if sum(1 for d in shape if d == -1) > 1:
        raise ValueError(f"at most one -1 allowed in the new shape {shape}")
    references = [-2 - d for d in shape if d <= -2]
    if references and -1 in shape:
        raise ValueError(f"a -1 beside dims of the operand in the new shape {shape}")
    if any(k >= x.ndim for k in references):
        raise ValueError(f"the new shape {shape} names dim {max(references)} of a rank "
                         f"{x.ndim} operand")
    result = tuple(_reshape_dims(PYTHON, [x.shape], shape=shape))
    total = num_elements(x.shape)
    known = math.prod(d for d in shape if d >= 0)
    if -1 in shape and (known == 0 or total is not None and total % known):
        raise ValueError(f"cannot reshape {format_shape(x.shape)} into {shape}")
    size = num_elements(result)
    if -1 not in shape and None not in (total, size) and total != size:
        raise ValueError(
            f"cannot reshape {format_shape(x.shape)} ({total} elements) into "
            f"{format_shape(result)} ({size} elements)"
        )
    return ShapedType(result, x.dtype)


def _reshape_kernel(x: np.ndarray, *, shape: tuple[int, ...]) -> np.ndarray:
    return np.reshape(x, [x.shape[-2 - n] if n <= -2 else n for n in shape])


reshape_p = Primitive(
    "reshape",
    shape_rule=_reshape_rule,
    kernel=_reshape_kernel,
    dims=_reshape_dims,
    summary="the same elements in row-major order with a new shape (one dim may be -1; "
            "-2 - k is the operand's dim k)",
    family=STRUCTURAL,
    memory=Memory.ALIAS, cost=Cost.MOVEMENT, lowered_by=LoweredBy.PROGRAM,
    takes_strings=True,
)


def _transpose_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                    perm: tuple[int, ...]) -> list[D]:
    return [operands[0][p] for p in perm]


def _transpose_rule(x: ShapedType, *, perm: tuple[int, ...]) -> ShapedType:
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"perm {tuple(perm)} is not a permutation of the {x.ndim} axes")
    return ShapedType(tuple(_transpose_dims(PYTHON, [x.shape], perm=perm)), x.dtype)


transpose_p = Primitive(
    "transpose",
    shape_rule=_transpose_rule,
    kernel=lambda x, *, perm: np.transpose(x, perm),
    dims=_transpose_dims,
    summary="permute the axes: result dim i is operand dim perm[i]",
    family=STRUCTURAL,
    memory=Memory.VIEW, cost=Cost.MOVEMENT, lowered_by=LoweredBy.OP_RULE,
    takes_strings=True,
)

Slice = tuple[int | None, int | None, int | None]


def slice_indices(d: DimArith[D, Any], dim: D, start: int | None, stop: int | None,
                  step: int | None) -> tuple[D, D]:
    """(first index, length) of Python's ``slice(start, stop, step)`` over `dim` elements,
    clamped as ``slice.indices`` clamps: the slice's dims, and where its lowering starts."""
    step = 1 if step is None else step
    lower, upper = (d.const(0), dim) if step > 0 else (d.const(-1), d.sub(dim, d.const(1)))

    def clamp(bound: int | None, default: D) -> D:
        if bound is None:
            return default
        if bound < 0:
            return d.max(d.add(d.const(bound), dim), lower)
        return d.min(d.const(bound), upper)

    first = clamp(start, lower if step > 0 else upper)
    last = clamp(stop, upper if step > 0 else lower)
    span = d.sub(last, first) if step > 0 else d.sub(first, last)
    count = d.add(d.floordiv(d.sub(span, d.const(1)), abs(step)), d.const(1))
    return first, d.select(d.gt(span, d.const(0)), count, d.const(0))


def _slice_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                slices: tuple[Slice, ...]) -> list[D]:
    return [slice_indices(d, dim, *bounds)[1]
            for dim, bounds in zip(operands[0], slices, strict=True)]


def _slice_rule(x: ShapedType, *, slices: tuple[Slice, ...]) -> ShapedType:
    if len(slices) != x.ndim:
        raise ValueError(f"{len(slices)} slices for a rank-{x.ndim} operand")
    if any(step == 0 for _, _, step in slices):
        raise ValueError("slice step cannot be zero")
    return ShapedType(tuple(_slice_dims(PYTHON, [x.shape], slices=slices)), x.dtype)


slice_p = Primitive(
    "slice",
    shape_rule=_slice_rule,
    kernel=lambda x, *, slices: x[tuple(slice(*s) for s in slices)],
    dims=_slice_dims,
    summary="x[start:stop:step] along every axis, with Python's slice semantics",
    family=STRUCTURAL,
    memory=Memory.VIEW, cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
    takes_strings=True,
)


def _concat_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                 axis: int) -> list[D]:
    """The sum along `axis`; elsewhere the operands agree (the op checks), so any known dim
    of theirs is the result's."""
    axis = normalize_axis(axis, len(operands[0]))
    total = d.const(0)
    for dims in operands:
        total = d.add(total, dims[axis])
    return [total if i == axis else d.same([dims[i] for dims in operands])
            for i in range(len(operands[0]))]


def _concat_rule(*xs: ShapedType, axis: int) -> ShapedType:
    if not xs:
        raise ValueError("needs at least one operand")
    first = xs[0]
    if first.ndim == 0:
        raise ValueError("cannot concatenate 0-d tensors")
    axis = normalize_axis(axis, first.ndim)
    for x in xs:
        if x.dtype != first.dtype:
            raise TypeError(f"operands have different dtypes {first.dtype.name}, {x.dtype.name}")
        same_rank = x.ndim == first.ndim
        if not same_rank or any(
            a != b and None not in (a, b)
            for i, (a, b) in enumerate(zip(x.shape, first.shape, strict=True))
            if i != axis
        ):
            shapes = ", ".join(format_shape(y.shape) for y in xs)
            raise ValueError(f"shapes {shapes} differ outside axis {axis}")
    shape = _concat_dims(PYTHON, [x.shape for x in xs], axis=axis)
    return ShapedType(tuple(shape), first.dtype)


concat_p = Primitive(
    "concat",
    shape_rule=_concat_rule,
    kernel=lambda *xs, axis: np.concatenate(xs, axis=axis),
    dims=_concat_dims,
    summary="join operands along an existing axis",
    family=STRUCTURAL,
    cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
    takes_strings=True,
)


def _pad_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
              pads: tuple[tuple[int, int], ...], **_: object) -> list[D]:
    return [d.add(dim, d.const(lo + hi)) for dim, (lo, hi) in zip(operands[0], pads,
                                                                     strict=True)]


def _pad_rule(x: ShapedType, *, pads: tuple[tuple[int, int], ...], value: float) -> ShapedType:
    if len(pads) != x.ndim:
        raise ValueError(f"{len(pads)} pad pairs for a rank-{x.ndim} operand")
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise ValueError(f"negative padding {pads}")
    return ShapedType(tuple(_pad_dims(PYTHON, [x.shape], pads=pads)), x.dtype)


def _pad_kernel(x: np.ndarray, *, pads: tuple[tuple[int, int], ...], value: float
                ) -> np.ndarray:
    """`np.pad`, which rejects the empty pad list of a 0-d operand (nothing to pad)."""
    if not pads:
        return np.array(x, copy=True)
    return np.pad(x, pads, constant_values=value)


pad_p = Primitive(
    "pad",
    shape_rule=_pad_rule,
    kernel=_pad_kernel,
    dims=_pad_dims,
    summary="surround x with `value`: pads[i] = (before, after) along axis i",
    family=STRUCTURAL,
    cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
)


def _gather_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                 axis: int) -> list[D]:
    """The source's dims with the gathered one replaced by the indices' dims."""
    source, indices = operands
    axis = normalize_axis(axis, len(source))
    return [*source[:axis], *indices, *source[axis + 1:]]


def _gather_rule(params: ShapedType, indices: ShapedType, *, axis: int) -> ShapedType:
    if indices.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"indices must be int32 or int64, got {indices.dtype.name}")
    if params.ndim == 0:
        raise ValueError("cannot gather from a 0-d tensor")
    shape = _gather_dims(PYTHON, [params.shape, indices.shape], axis=axis)
    return ShapedType(tuple(shape), params.dtype)


def _gather(params, indices, *, axis):
    size = params.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise InvalidIndexError(f"an index is out of range [{-size}, {size}) for axis {axis}")
    return np.take(params, indices, axis=axis)


gather_p = Primitive(
    "gather",
    shape_rule=_gather_rule,
    kernel=_gather,
    dims=_gather_dims,
    summary="params indexed by `indices` along `axis` (negative indices count from the end)",
    family=STRUCTURAL,
    cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
    takes_strings=True,
)


def _iota_rule(*, shape: tuple[int, ...], dtype: np.dtype, dimension: int) -> ShapedType:
    if not 0 <= dimension < len(shape):
        raise ValueError(f"dimension {dimension} is out of range for shape {shape}")
    return ShapedType(tuple(_shape_param_dims(PYTHON, [], shape=shape)), dtypes.as_dtype(dtype))


def _iota(*, shape, dtype, dimension):
    line = np.arange(shape[dimension], dtype=dtype)
    line = line.reshape([-1 if i == dimension else 1 for i in range(len(shape))])
    return np.broadcast_to(line, shape)


iota_p = Primitive(
    "iota",
    shape_rule=_iota_rule,
    kernel=_iota,
    dims=_shape_param_dims,
    summary="0, 1, 2, ... counting along `dimension`, constant along the others",
    family=STRUCTURAL,
    cost=Cost.MOVEMENT, lowered_by=LoweredBy.OP_RULE,
)


def _constant_rule(*, value: np.ndarray) -> ShapedType:
    return ShapedType(value.shape, dtypes.as_dtype(value.dtype))


constant_p = Primitive(
    "constant",
    shape_rule=_constant_rule,
    kernel=lambda *, value: value,
    summary="a tensor value fixed at trace time",
    family=STRUCTURAL,
    memory=Memory.EXTERNAL, cost=Cost.FREE, lowered_by=LoweredBy.PROGRAM,
)

# --------------------------------------------------------------------------- gradients
# Structural ops move elements, so each rule moves the cotangent back: the inverse
# permutation, the inverse reshape, zeros around a slice, a slice out of a pad, and so on.


@broadcast_to_p.def_vjp
@floating_only
def _broadcast_to_vjp(cotangents, inputs, outputs, *, shape):
    return [unbroadcast(cotangents[0], inputs[0])]


@reshape_p.def_vjp
@floating_only
def _reshape_vjp(cotangents, inputs, outputs, *, shape):
    return [reshape(cotangents[0], inputs[0].shape)]


@transpose_p.def_vjp
@floating_only
def _transpose_vjp(cotangents, inputs, outputs, *, perm):
    return [transpose_p.bind(cotangents[0], perm=tuple(perm.index(i) for i in range(len(perm))))]


def unslice(g, shape: tuple[int | None, ...], slices: tuple[Slice, ...]):
    """The adjoint of `slice`: `g` placed at the sliced positions of zeros shaped `shape`.

    Unit steps are one `pad`. A step s > 1 along an axis, g's other dims known, spreads
    g's elements s apart (`_spread`: reshapes and pads, plain copies); any other
    step along an axis of size n is a `gather` of n elements from g padded with one zero:
    each position takes its element of g, or the zero. Along an unknown dim only
    `x[start:]` (start >= 0) and full slices are supported.
    """
    pads, strided = [], []
    for axis, (dim, (start, stop, step)) in enumerate(zip(shape, slices, strict=True)):
        if dim is None:
            if stop is not None or (start or 0) < 0 or step not in (None, 1):
                raise NotImplementedError(f"gradient of slice {start}:{stop}:{step} along an "
                                          f"axis of unknown size (axis {axis})")
            pads.append((start or 0, 0))
            continue
        positions = range(*slice(start, stop, step).indices(dim))
        if positions.step == 1 or len(positions) <= 1:
            lo = positions[0] if positions else 0
            pads.append((lo, dim - lo - len(positions)))
        else:
            pads.append((0, 0))
            strided.append((axis, dim, positions))
    if any(pair != (0, 0) for pair in pads):
        g = pad_p.bind(g, pads=tuple(pads), value=0)
    for axis, dim, positions in strided:
        if positions.step > 1 and None not in g.shape:
            g = _spread(g, axis, dim, positions)
            continue
        index = np.full(dim, len(positions), np.int32)  # len(positions): the padded zero
        index[list(positions)] = np.arange(len(positions))
        one_zero = tuple((0, 1) if i == axis else (0, 0) for i in range(g.ndim))
        padded = pad_p.bind(g, pads=one_zero, value=0)
        g = gather_p.bind(padded, constant(index, dtypes.int32), axis=axis)
    return g


def _spread(g, axis: int, dim: int, positions: range):
    """`g` along `axis` placed at `positions` (a step above 1) of `dim` zeros: each element
    followed by step - 1 zeros (a new axis padded, then merged), the run then padded to
    start at the first position and cropped or padded to `dim`. A max pool's gradient
    places one strided view per tap of its window so, each as large as the pool's input:
    as gathers they cost more than these copies."""
    step, count, shape = positions.step, len(positions), tuple(g.shape)
    g = reshape(g, (*shape[:axis + 1], 1, *shape[axis + 1:]))
    g = pad_p.bind(g, pads=tuple((0, step - 1) if i == axis + 1 else (0, 0)
                                 for i in range(g.ndim)), value=0)
    run = min(count * step, dim - positions.start)
    g = reshape(g, (*shape[:axis], count * step, *shape[axis + 1:]))
    if run < count * step:
        g = slice_p.bind(g, slices=tuple((0, run, 1) if i == axis else (None, None, None)
                                         for i in range(g.ndim)))
    return pad_p.bind(g, pads=tuple((positions.start, dim - positions.start - run)
                                    if i == axis else (0, 0) for i in range(g.ndim)), value=0)


@slice_p.def_vjp
@floating_only
def _slice_vjp(cotangents, inputs, outputs, *, slices):
    return [unslice(cotangents[0], inputs[0].shape, slices)]


@concat_p.def_vjp
@floating_only
def _concat_vjp(cotangents, inputs, outputs, *, axis):
    sizes = [x.shape[axis] for x in inputs]
    g, axis = cotangents[0], normalize_axis(axis, cotangents[0].ndim)
    if None in sizes:
        return _parts_gathered(g, inputs, axis)
    parts, start = [], 0
    for size in sizes:
        slices = tuple((start, start + size, 1) if i == axis else (None, None, None)
                       for i in range(g.ndim))
        parts.append(slice_p.bind(g, slices=slices))
        start += size
    return parts


def _parts_gathered(g: Any, inputs: Sequence[Any], axis: int) -> list[Any]:
    """Each operand's part of a concat's cotangent where sizes are known only when it runs
    (a ragged tensor's values): gathered at the operand's positions along `axis`, the
    earlier operands' sizes plus 0, 1, ... (a running sum of ones as long as the operand)."""
    parts, offset = [], constant(0, dtypes.int64)
    for x in inputs:
        others = tuple(i for i in range(x.ndim) if i != axis)
        along = reduce_sum_p.bind(cast_p.bind(zeros_like(x), dtype=dtypes.int64), axes=others,
                                  keepdims=False)  # zeros as long as the operand's axis
        ones = add_p.bind(along, constant(1, dtypes.int64))
        start = cumsum_p.bind(ones, axis=0, exclusive=True, reverse=False)
        parts.append(gather_p.bind(g, add_p.bind(start, offset), axis=axis))
        offset = add_p.bind(offset, dim_size_p.bind(x, axis=axis))
    return parts


@pad_p.def_vjp
@floating_only
def _pad_vjp(cotangents, inputs, outputs, *, pads, value):
    return [cotangents[0][tuple(slice(lo, -hi or None) for lo, hi in pads)]]


@gather_p.def_vjp
@floating_only
def _gather_vjp(cotangents, inputs, outputs, *, axis):
    # Scatter-add as a one-hot matmul: [n, m] one-hot of the m indices times the cotangent
    # rows, [pre, m, post] -> [pre, n, post]. Costs m * n * pre * post multiply-adds and an
    # m * n one-hot, cheap for embedding-sized n and few indices, not for huge both.
    (g,), (params, indices) = cotangents, inputs
    if axis == 0 and indices.shape == () and indices.dtype in (dtypes.int32, dtypes.int64):
        return [update_index_p.bind(zeros_like(params), g, indices), None]  # one row, any n
    n, m = params.shape[axis], product(indices.shape)
    if n is None or m is None:
        raise NotImplementedError("the gradient of gather needs a known size of the gathered "
                                  "axis and known index dims")
    pre, post = product(params.shape[:axis]), product(params.shape[axis + 1 :])
    if m == 0 or post == 0:  # nothing gathered (and no row count to infer beside a 0)
        return [zeros_like(params), None]
    flat = reshape(indices, (m,))
    columns = iota_p.bind(shape=(m, n), dtype=flat.dtype, dimension=1)
    hits = equal(reshape(where(flat < 0, flat + n, flat), (m, 1)), columns)
    hot = where(hits, constant(1, g.dtype), constant(0, g.dtype))  # [m, n] one-hot
    rows = reshape(g, (pre, m, post))
    return [reshape(matmul(hot, rows, transpose_a=True, transpose_b=False), params.shape), None]


for _primitive in (iota_p, constant_p):
    _primitive.def_nondifferentiable()


def _dim_size_rule(x: ShapedType, *, axis: int) -> ShapedType:
    normalize_axis(axis, x.ndim)
    return ShapedType((), dtypes.int64)


dim_size_p = Primitive(
    "dim_size",
    shape_rule=_dim_size_rule,
    kernel=lambda x, *, axis: np.asarray(x.shape[axis], dtype=np.int64),
    summary="the size of one dim as an int64 scalar (for dims unknown until run time)",
    family=STRUCTURAL, lowered_by=LoweredBy.OP_RULE,
    takes_strings=True,
)
dim_size_p.def_nondifferentiable()


def _update_index_rule(x: ShapedType, update: ShapedType, index: ShapedType) -> ShapedType:
    if x.ndim == 0:
        raise ValueError("cannot update a row of a 0-d tensor")
    if update.dtype != x.dtype:
        raise TypeError(f"the update is {update.dtype.name}, the tensor {x.dtype.name}")
    if len(update.shape) != x.ndim - 1 or any(
            a is not None and b is not None and a != b
            for a, b in zip(update.shape, x.shape[1:], strict=True)):
        raise ValueError(f"the update must have the shape of one row "
                         f"{format_shape(x.shape[1:])}, got {format_shape(update.shape)}")
    if index.shape != () or index.dtype not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"the index must be an int32 or int64 scalar, got {index}")
    return x


def row_position(index: Any, size: int) -> int:
    """The row an ``update_index`` writes, counted from the start: `index` may count from
    the end (negative); out of range it is an error, as NumPy's indexing."""
    position = int(index)
    if not -size <= position < size:
        raise InvalidIndexError(f"index {position} is out of range [{-size}, {size}) for axis 0")
    return position % size


def _update_index(x, update, index):
    out = np.array(x, copy=True)
    out[row_position(index, x.shape[0])] = update
    return out


update_index_p = Primitive(
    "update_index",
    shape_rule=_update_index_rule,
    kernel=_update_index,
    dims=same_dims,
    summary="x with its row `index` replaced by `update` (a loop's outputs, row by row)",
    family=STRUCTURAL,
    cost=Cost.COPY, lowered_by=LoweredBy.OP_RULE,
)


@update_index_p.def_vjp
@floating_only
def _update_index_vjp(cotangents, inputs, outputs):
    (g,), index = cotangents, inputs[2]
    row = gather_p.bind(g, index, axis=0)
    return [update_index_p.bind(g, where(equal(row, row), constant(0, g.dtype), row), index),
            row, None]
