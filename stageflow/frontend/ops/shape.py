"""Public shape ops: reshape, transpose, expand_dims, squeeze, concat, stack, split, tile, ...

All are compositions of the structural primitives (reshape, transpose, slice, concat, pad,
gather, broadcast_to, iota), so tracing, autodiff and codegen see only those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stageflow.core import dtypes, lazy
from stageflow.core.errors import StagingError
from stageflow.core.shapes import format_shape, normalize_axis, reshape_param
from stageflow.core.source import describe_location
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor, matching_tensors
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import SymbolicTensor
from stageflow.primitives import structural as st

if TYPE_CHECKING:  # its checks are made with `identity`, from here
    from stageflow.frontend.ops import debugging
else:
    debugging = lazy.module("stageflow.frontend.ops.debugging")


def _fail(op: str, message: str, error: type[Exception] = ValueError) -> Exception:
    return error(f"{op}: {message}{describe_location()}")


def _ints(op: str, what: str, values: Sequence[Any], hint: str = "") -> tuple[int, ...]:
    """`values` as Python ints; a TypeError naming the op, the argument and the line for an
    element that is none (None, a string, a float with a fraction)."""
    out = []
    for value in values:
        try:
            if value is None or isinstance(value, str | bytes) or (
                    isinstance(value, float) and not value.is_integer()):
                raise TypeError
            out.append(int(value))
        except StagingError:
            raise _fail(op, f"{what} holds a traced tensor, {value!r}, whose value the trace "
                        f"does not have: dims are Python ints here{hint}", TypeError) from None
        except (TypeError, ValueError):
            raise _fail(op, f"{what} {list(values)!r} holds {value!r}, not an int{hint}",
                        TypeError) from None
    return tuple(out)


def _axis(op: str, axis: int, ndim: int) -> int:
    try:
        return normalize_axis(int(axis), ndim)
    except ValueError as error:
        raise _fail(op, str(error)) from None


def reshape_to(x: Tensor, shape: Sequence[int | None]) -> Tensor:
    """Reshape to `shape`, whose unknown dims (None) are `x`'s run-time dims
    (`core.shapes.reshape_param`)."""
    if tuple(shape) == tuple(x.shape):  # x[...], a squeeze of nothing: any unknown dims
        return x
    try:
        target = reshape_param(x.shape, shape)
    except ValueError as error:
        raise _fail("reshape", str(error)) from None
    if target == tuple(x.shape):
        return x
    return st.reshape_p.bind(x, shape=target)


@for_composites(operand=1)
def reshape(x: Any, shape: Sequence[int]) -> Tensor:
    """The elements of `x` in row-major order with a new shape; one dim may be -1.

    x: tensor of any dtype; returns `shape` of its dtype. shape: ints, a 1-D int tensor, or
    a list of ints and int scalar tensors, as in TensorFlow; in a staged function one of its
    dims may be known only at run time (``[sf.shape(x)[0], 2, 2]``), checked when the
    function runs. None is not a dim: -1 infers one, ``sf.shape(x)[i]`` reads one.

    >>> sf.reshape(sf.range(6), [2, 3])
    sf.Tensor([[0, 1, 2],
               [3, 4, 5]], shape=(2, 3), dtype=int32)
    >>> sf.reshape(sf.range(6), [-1, 2]).shape
    (3, 2)
    """
    x = convert_to_tensor(x)
    shape = _shape_dims(shape)
    traced = {i: d for i, d in enumerate(shape) if isinstance(d, SymbolicTensor)}
    known = [-1 if i in traced else d for i, d in enumerate(shape)]
    known = _ints("reshape", "the new shape", known, _RESHAPE_HINT)
    if any(d < -1 for d in known):
        raise _fail("reshape", f"negative dim in the new shape {known} (-1 alone infers one)")
    if not traced:
        return st.reshape_p.bind(x, shape=known)
    return _reshape_to_traced_dim(x, known, traced)


def _shape_dims(shape: Any) -> list:
    """The dims of a reshape's `shape`: ints, eager scalars, and traced scalars for the dims
    a staged function knows only at run time. A traced shape is taken apart as TensorFlow's
    ``constant_value_as_shape`` does: its value where constants alone give it, else the
    pieces of the concat (``sf.stack``) that made it, else its elements one by one."""
    if isinstance(shape, int):
        return [shape]
    if not isinstance(shape, SymbolicTensor):
        return [_traced_dim(d) if isinstance(d, SymbolicTensor) else d for d in shape]
    trace = shape._trace
    value = trace.static_value(shape)
    if value is not None:
        return list(np.reshape(value, -1))
    if shape.ndim != 1 or shape.shape[0] is None:
        raise _fail("reshape", f"the new shape is a traced tensor of shape "
                    f"{format_shape(shape.shape)}; give a 1-D one of known length, or a "
                    "list", TypeError)
    equation = trace.producer(shape)
    if equation is not None and equation.primitive is st.concat_p:
        return [d for piece in equation.inputs for d in _shape_dims(trace.symbolic(piece))]
    if (equation is not None and equation.primitive is st.reshape_p
            and equation.inputs[0].type.shape == ()):
        return [_traced_dim(trace.symbolic(equation.inputs[0]))]
    return [_traced_dim(shape[i]) for i in range(shape.shape[0])]


def _traced_dim(dim: SymbolicTensor) -> Any:
    """A traced dim's value where constants give it, else the traced scalar itself."""
    value = dim._trace.static_value(dim)
    return dim if value is None else value


_RESHAPE_HINT = " (-1 alone infers one dim; sf.shape(x)[i] gives a dim known at run time)"


def _reshape_to_traced_dim(x: Tensor, known: tuple[int, ...], traced: dict[int, Any]
                           ) -> Tensor:
    """Reshape to a shape with one dim that is a traced scalar (``sf.shape(x)[0]`` in a
    staged function): the element count gives that dim (a -1), and a check made each time
    the function runs raises, as TensorFlow's reshape does, where the scalar disagrees."""
    for position, dim in traced.items():
        if dim.shape != () or not dtypes.is_integer(dim.dtype):
            raise _fail("reshape", f"dim {position} of the new shape is a {dim.dtype.name} "
                        f"tensor of shape {dim.shape}, not an integer scalar", TypeError)
    inferred = [i for i, d in enumerate(known) if d == -1]
    if len(inferred) > 1:
        raise _fail("reshape", f"dims {inferred} of the new shape are -1 or known only at "
                    "run time; the element count gives one: make the others Python ints "
                    "(x.shape[i] where it is known)", TypeError)
    ((position, dim),) = traced.items()
    result = st.reshape_p.bind(x, shape=known)
    size = ew.cast(st.dim_size_p.bind(result, axis=position), dim.dtype)
    debugging.assert_equal(size, dim, message=f"reshape: dim {position} of the new shape "
                           "disagrees with the element count (x holds a different number "
                           "of elements)")
    return result


def transpose(x: Any, perm: Sequence[int] | None = None) -> Tensor:
    """Permute the axes; the default reverses them, as NumPy and TensorFlow do.

    >>> sf.transpose([[1, 2, 3]])
    sf.Tensor([[1],
               [2],
               [3]], shape=(3, 1), dtype=int32)
    >>> sf.transpose(sf.ones((2, 3, 4)), perm=[0, 2, 1]).shape
    (2, 4, 3)
    """
    x = convert_to_tensor(x)
    if perm is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(_axis("transpose", p, x.ndim) for p in perm)
    if perm == tuple(range(x.ndim)):
        return x
    return st.transpose_p.bind(x, perm=perm)


def expand_dims(x: Any, axis: int) -> Tensor:
    """Insert a dim of size 1 at `axis` (negative counts from the end of the result).

    x: tensor of any dtype; returns its shape with a 1 inserted, its dtype.

    >>> sf.expand_dims([1, 2], 0).shape
    (1, 2)
    >>> sf.expand_dims([1, 2], -1).shape
    (2, 1)
    """
    x = convert_to_tensor(x)
    axis = _axis("expand_dims", axis, x.ndim + 1)
    shape = list(x.shape)
    shape.insert(axis, 1)
    return reshape_to(x, shape)


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Tensor:
    """Remove dims of size 1 (only those in `axis` when given).

    >>> sf.squeeze(sf.ones((1, 2, 1))).shape
    (2,)
    >>> sf.squeeze(sf.ones((1, 2, 1)), axis=0).shape
    (2, 1)
    """
    x = convert_to_tensor(x)
    if axis is None:
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        listed = axis if isinstance(axis, Sequence) else [axis]
        axes = {_axis("squeeze", a, x.ndim) for a in listed}
        for a in axes:
            if x.shape[a] not in (1, None):
                raise _fail("squeeze", f"axis {a} has size {x.shape[a]} (shape {x.shape})")
    return reshape_to(x, [d for i, d in enumerate(x.shape) if i not in axes])


@for_composites
def concat(values: Sequence[Any], axis: int) -> Tensor:
    """Join tensors along an existing axis.

    values: tensors of one dtype whose shapes agree except along `axis` (Python lists among
    them take the dtype of the first tensor); returns that dtype.

    >>> sf.concat([[[1, 2]], [[3, 4]]], axis=0)
    sf.Tensor([[1, 2],
               [3, 4]], shape=(2, 2), dtype=int32)
    >>> sf.concat([sf.ones((2, 1)), sf.zeros((2, 2))], axis=1).shape
    (2, 3)
    """
    tensors = matching_tensors(list(values))
    if not tensors:
        raise _fail("concat", "needs at least one tensor")
    axis = _axis("concat", axis, max(tensors[0].ndim, 1))
    if len(tensors) == 1:
        return tensors[0]
    return st.concat_p.bind(*tensors, axis=axis)


def stack(values: Sequence[Any], axis: int = 0) -> Tensor:
    """Join tensors of the same shape along a new axis.

    values: tensors of one shape [...] and dtype; returns [..., len(values), ...] with the new
    axis at `axis`.

    >>> sf.stack([[1, 2], [3, 4]], axis=1)
    sf.Tensor([[1, 3],
               [2, 4]], shape=(2, 2), dtype=int32)
    """
    tensors = matching_tensors(list(values))
    if not tensors:
        raise _fail("stack", "needs at least one tensor")
    axis = _axis("stack", axis, tensors[0].ndim + 1)
    return concat([expand_dims(t, axis) for t in tensors], axis)


def split(x: Any, num_or_size_splits: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """Cut `x` along `axis` into equal parts (an int) or parts of the given sizes.

    x: tensor of any dtype; returns a list of tensors of its dtype.

    >>> a, b = sf.split(sf.range(6), 2)
    >>> a, b
    (sf.Tensor([0, 1, 2], shape=(3,), dtype=int32), sf.Tensor([3, 4, 5], shape=(3,), dtype=int32))
    >>> [t.shape for t in sf.split(sf.ones((2, 5)), [1, 4], axis=1)]
    [(2, 1), (2, 4)]
    """
    x = convert_to_tensor(x)
    axis = _axis("split", axis, x.ndim)
    size = x.shape[axis]
    if isinstance(num_or_size_splits, int):
        if num_or_size_splits < 1:
            raise _fail("split", f"cannot split into {num_or_size_splits} parts")
        if size is None or size % num_or_size_splits:
            raise _fail("split", f"axis {axis} of size {size} is not divisible into "
                        f"{num_or_size_splits} parts")
        sizes = [size // num_or_size_splits] * num_or_size_splits
    else:
        sizes = [int(s) for s in num_or_size_splits]
        if sizes.count(-1) == 1 and size is not None:
            sizes[sizes.index(-1)] = size - sum(s for s in sizes if s != -1)
        if any(s < 0 for s in sizes) or (size is not None and sum(sizes) != size):
            raise _fail("split", f"sizes {sizes} do not add up to {size}")
    parts, start = [], 0
    for part in sizes:
        slices = tuple(
            (start, start + part, 1) if i == axis else (None, None, None) for i in range(x.ndim)
        )
        parts.append(st.slice_p.bind(x, slices=slices))
        start += part
    return parts


def broadcast_to(x: Any, shape: Sequence[int]) -> Tensor:
    """Replicate `x` to `shape` by NumPy's broadcasting rules.

    x: tensor of any dtype whose shape broadcasts to `shape`; returns `shape` of its dtype.

    >>> sf.broadcast_to([1, 2, 3], [2, 3])
    sf.Tensor([[1, 2, 3],
               [1, 2, 3]], shape=(2, 3), dtype=int32)
    """
    x = convert_to_tensor(x)
    shape = tuple(int(d) for d in shape)
    if shape == tuple(x.shape):
        return x
    return st.broadcast_to_p.bind(x, shape=shape)


@for_composites
def tile(x: Any, multiples: Sequence[int]) -> Tensor:
    """Repeat `x` `multiples[i]` times along axis i.

    >>> sf.tile([[1, 2]], [2, 2])
    sf.Tensor([[1, 2, 1, 2],
               [1, 2, 1, 2]], shape=(2, 4), dtype=int32)
    """
    x = convert_to_tensor(x)
    multiples = list(_ints("tile", "multiples", multiples))
    if len(multiples) < x.ndim:
        raise _fail("tile", f"{len(multiples)} multiples for a rank-{x.ndim} tensor")
    x = reshape_to(x, [1] * (len(multiples) - x.ndim) + list(x.shape))
    interleaved = [d for dim in x.shape for d in (1, dim)]
    big = [d for m, dim in zip(multiples, x.shape, strict=True) for d in (m, dim)]
    repeated = broadcast_to(reshape_to(x, interleaved), big)
    return reshape_to(repeated, [m * d for m, d in zip(multiples, x.shape, strict=True)])


def pad(x: Any, paddings: Sequence[Sequence[int]], mode: str = "CONSTANT",
        constant_values: float = 0) -> Tensor:
    """Pad with `constant_values`: paddings[i] = (before, after) along axis i.

    x: [d0, ..., dk]; paddings: [[before, after], ...] per axis; returns [d0 + b0 + a0, ...] of
    x's dtype.

    >>> sf.pad([[1, 2]], [[1, 0], [0, 1]])
    sf.Tensor([[0, 0, 0],
               [1, 2, 0]], shape=(2, 3), dtype=int32)
    """
    x = convert_to_tensor(x)
    if mode.upper() != "CONSTANT":
        raise _fail("pad", f"mode {mode!r} is not supported (only 'CONSTANT')")
    pads = tuple((int(lo), int(hi)) for lo, hi in paddings)
    if isinstance(constant_values, float) and not dtypes.is_inexact(x.dtype):
        raise _fail("pad", f"the Python float {constant_values!r} cannot pad a "
                    f"{x.dtype.name} tensor", TypeError)
    if isinstance(constant_values, complex):  # a param is a real number (an IR attribute)
        raise _fail("pad", f"constant_values must be a real number, got {constant_values!r}",
                    TypeError)
    return st.pad_p.bind(x, pads=pads, value=constant_values)


def gather(params: Any, indices: Any, axis: int = 0) -> Tensor:
    """`params` indexed along `axis` by the integer tensor `indices`.

    params: tensor of any dtype; indices: int tensor; returns params.shape[:axis] +
    indices.shape + params.shape[axis + 1:] of params' dtype.

    >>> sf.gather([10, 20, 30], [2, 0])
    sf.Tensor([30, 10], shape=(2,), dtype=int32)
    >>> sf.gather([[1, 2], [3, 4]], [1, 1], axis=1)
    sf.Tensor([[2, 2],
               [4, 4]], shape=(2, 2), dtype=int32)
    """
    params = convert_to_tensor(params)
    indices = convert_to_tensor(indices)
    return st.gather_p.bind(params, indices, axis=_axis("gather", axis, max(params.ndim, 1)))


def dynamic_update_index(x: Any, update: Any, index: Any) -> Tensor:
    """`x` with row `index` (along axis 0, negative from the end) replaced by `update`
    (JAX's ``lax.dynamic_update_index_in_dim`` at axis 0): how a loop writes its outputs
    one row per iteration. Inside a compiled loop carrying `x`, the row is written in
    place.

    x: [n, ...]; update: x.shape[1:] of x's dtype; index: int scalar; returns x's shape and
    dtype.

    >>> sf.dynamic_update_index(sf.zeros((3, 2)), [1.0, 2.0], 1)
    sf.Tensor([[0., 0.],
               [1., 2.],
               [0., 0.]], shape=(3, 2), dtype=float32)
    """
    x = convert_to_tensor(x)
    update = convert_to_tensor(update, x.dtype)
    return st.update_index_p.bind(x, update, convert_to_tensor(index))


def one_hot(indices: Any, depth: int, on_value: float = 1.0, off_value: float = 0.0,
            axis: int = -1, dtype: Any = dtypes.float32) -> Tensor:
    """A new axis of length `depth` holding `on_value` at each index, `off_value` elsewhere.

    indices: int tensor [...]; returns [..., depth] (with axis=-1) of on_value's dtype
    (float32).

    >>> sf.one_hot([0, 2], depth=3)
    sf.Tensor([[1., 0., 0.],
               [0., 0., 1.]], shape=(2, 3), dtype=float32)
    """
    indices = convert_to_tensor(indices)
    dtype = dtypes.as_dtype(dtype)
    axis = _axis("one_hot", axis, indices.ndim + 1)
    # The positions along the new axis only, broadcast against the indices: their dims
    # may be unknown.
    shape = [1] * (indices.ndim + 1)
    shape[axis] = int(depth)
    positions = st.iota_p.bind(shape=tuple(shape), dtype=indices.dtype, dimension=axis)
    hits = ew.equal(expand_dims(indices, axis), positions)
    return ew.where(hits, convert_to_tensor(on_value, dtype), convert_to_tensor(off_value, dtype))


def identity(x: Any) -> Tensor:
    """`x` itself as a tensor (a variable is read).

    >>> sf.identity(sf.Variable([1.0, 2.0]))
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    return convert_to_tensor(x)
