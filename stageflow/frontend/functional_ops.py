"""`sf.map_fn`, `sf.scan`, `sf.foldl` and `sf.foldr`: a function applied along the first
dim of tensors, one element per iteration (TensorFlow's functional ops).

All four are one `sf.while_loop` reading the elements from `TensorArray`s and writing the
results into others, as TensorFlow builds them: eagerly a Python loop, staged one `while` op
whose body is traced once, and differentiable wherever the loop is.
`parallel_iterations` and `swap_memory` are accepted for TensorFlow's signatures and have
no effect (iterations run in order); ``back_prop=False`` stops gradients at the results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import dtypes, nest
from stageflow.core.primitive import ShapedType
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.ops.control import while_loop
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import zeros, zeros_like
from stageflow.frontend.ops.dispatch import for_composites
from stageflow.frontend.ops.elementwise import add, cast, less, subtract
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import expand_dims
from stageflow.frontend.ops.shape_of import shape
from stageflow.frontend.regions import trace_regions
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tape import stop_gradient
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tensor_array import TensorArray

__all__ = ["foldl", "foldr", "map_fn", "scan"]


class _Elements:
    """The elements of a nest of tensors along their first dim, as `TensorArray`s."""

    def __init__(self, elems: Any, op: str) -> None:
        leaves, self.treedef = nest.flatten(elems)
        leaves = [convert_to_tensor(leaf) for leaf in leaves]
        if not leaves or any(leaf.ndim == 0 for leaf in leaves):
            raise ValueError(f"{op}: elems must be tensors with a first dim to iterate over, "
                             f"got {_shapes(leaves)}{describe_location()}")
        known = {leaf.shape[0] for leaf in leaves} - {None}
        if len(known) > 1:
            raise ValueError(f"{op}: the tensors of elems must have the same first dim, got "
                             f"{_shapes(leaves)}{describe_location()}")
        self.size: int | None = known.pop() if known else None
        self.leaves = leaves
        self.count: Any = self.size if self.size is not None else shape(leaves[0])[0]
        self.arrays = [_array(leaf.dtype, self.size, leaf.shape[1:]).unstack(leaf)
                       for leaf in leaves]

    def at(self, index: Any) -> Any:
        return nest.unflatten(self.treedef, [array.read(index) for array in self.arrays])

    def types(self) -> list[TensorSpec]:
        return [TensorSpec(leaf.shape[1:], leaf.dtype) for leaf in self.leaves]


def _shapes(leaves: list[Tensor]) -> str:
    return ", ".join(f"{leaf.dtype.name}{format_shape(leaf.shape)}" for leaf in leaves)


def _array(dtype: Any, size: int | None, element_shape: Any = None,
           infer_shape: bool = True) -> TensorArray:
    """An array of `size` elements; of unknown size (a first dim unknown while tracing), one
    that grows as it is written."""
    return TensorArray(dtype, size=size or 0, dynamic_size=size is None,
                       element_shape=element_shape, infer_shape=infer_shape)


def _signature(signature: Any, default: list[TensorSpec], treedef: Any, op: str
               ) -> tuple[list[TensorSpec | np.dtype], Any]:
    """The declared dtype (and shape) of each result leaf, and the results' structure."""
    if signature is None:
        return [spec.dtype for spec in default], treedef
    leaves, structure = nest.flatten(signature)
    specs = []
    for leaf in leaves:
        if isinstance(leaf, TensorSpec):
            specs.append(leaf)
        else:
            try:
                specs.append(dtypes.as_dtype(leaf))
            except TypeError:
                raise TypeError(f"{op}: fn_output_signature must be dtypes or sf.TensorSpecs, "
                                f"got {leaf!r}{describe_location()}") from None
    return specs, structure


def _results(op: str, returned: Any, specs: list, treedef: Any) -> list:
    """What `fn` returned, checked against the output signature (traced aside: the types
    of its results)."""
    leaves, structure = nest.flatten(returned)
    if structure != treedef:
        raise TypeError(f"{op}: fn returned {_described(returned)}, whose structure differs "
                        f"from the output signature's {_described(nest.unflatten(treedef, specs))}"
                        f"; pass fn_output_signature{describe_location()}")
    out = []
    for position, (leaf, spec) in enumerate(zip(leaves, specs, strict=True)):
        dtype = spec.dtype if isinstance(spec, TensorSpec) else spec
        value = leaf if isinstance(leaf, Tensor | ShapedType) else convert_to_tensor(leaf, dtype)
        if value.dtype != dtype or (isinstance(spec, TensorSpec) and not
                                    TensorShape(value.shape).is_subtype_of(spec.shape)):
            raise TypeError(f"{op}: result {position} of fn is {value.dtype.name}"
                            f"{format_shape(value.shape)} but the output signature says "
                            f"{spec}; pass fn_output_signature{describe_location()}")
        out.append(value)
    return out


def _described(structure: Any) -> str:
    leaves, treedef = nest.flatten(structure)
    shown = [_Shown(f"{x.dtype.name}{format_shape(x.shape)}" if isinstance(x, Tensor | ShapedType)
                    else getattr(x, "name", repr(x))) for x in leaves]
    return repr(nest.unflatten(treedef, shown))


class _Shown(str):
    def __repr__(self) -> str:
        return str(self)


@for_composites(operand=1)
def map_fn(fn: Callable[[Any], Any], elems: Any, dtype: Any = None,
           parallel_iterations: int | None = None, back_prop: bool = True,
           swap_memory: bool = False, infer_shape: bool = True, name: str | None = None,
           fn_output_signature: Any = None) -> Any:
    """``fn`` applied to each element of `elems` along its first dim, the results stacked.

    `elems` is a tensor or a nest of tensors of one first dim; `fn` takes one element (the
    same nest, each leaf without the first dim). Its results must have the structure and
    dtypes of `fn_output_signature` (dtypes or `sf.TensorSpec`s; `dtype` is its old name),
    by default those of `elems`, as in TensorFlow.

    >>> sf.map_fn(lambda x: x * x, sf.constant([1.0, 2.0, 3.0]))
    sf.Tensor([1., 4., 9.], shape=(3,), dtype=float32)
    >>> sf.map_fn(lambda p: p[0] + p[1], (sf.constant([1, 2]), sf.constant([10, 20])),
    ...           fn_output_signature=sf.int32)
    sf.Tensor([11, 22], shape=(2,), dtype=int32)
    """
    elements = _Elements(elems, "map_fn")
    signature = fn_output_signature if fn_output_signature is not None else dtype
    specs, treedef = _signature(signature, elements.types(), elements.treedef, "map_fn")
    if elements.size == 0:
        return nest.unflatten(treedef, [zeros((0, *(d or 0 for d in r.shape)), r.dtype)
                                        for r in _result_types(fn, elements, specs, treedef)])
    if elements.size is None:  # rows of zeros as many as the elements, where fn's are known
        outputs = [_rows(elements.leaves[0], zeros(r.shape, r.dtype)) if None not in r.shape
                   else _array(r.dtype, None) for r in _result_types(fn, elements, specs,
                                                                     treedef)]
    else:
        outputs = [_array(spec.dtype if isinstance(spec, TensorSpec) else spec, elements.size,
                          spec.shape if isinstance(spec, TensorSpec) else None, infer_shape)
                   for spec in specs]

    def body(i: Any, arrays: list) -> tuple:
        results = _results("map_fn", fn(elements.at(i)), specs, treedef)
        return add(i, 1), [a.write(i, r) for a, r in zip(arrays, results, strict=True)]

    _, outputs = while_loop(lambda i, _: less(i, elements.count), body,
                            (convert_to_tensor(np.int32(0)), outputs),
                            maximum_iterations=elements.size, name="map_fn")
    stacked = [array.stack() for array in outputs]
    return nest.unflatten(treedef, stacked if back_prop else [stop_gradient(s) for s in stacked])


def _result_types(fn: Callable[[Any], Any], elements: _Elements, specs: list, treedef: Any
                  ) -> list[ShapedType]:
    """The types of `fn`'s results on one element, `fn` traced aside (checked against the
    output signature): for results of no elements, or of a number unknown while tracing."""
    types = elements.types()
    (region,) = trace_regions([fn], [s.shaped_type for s in types],
                              nest.flatten((nest.unflatten(elements.treedef, types),))[1],
                              ["map_fn_fn"], "map_fn")
    return _results("map_fn", region.structure([v.type for v in region.graph.outputs]),
                    specs, treedef)


def _rows(like: Tensor, element: Tensor) -> TensorArray:
    """An array holding a zero element shaped as `element` per row of `like`, whose first
    dim is unknown while tracing (so no `zeros` can be made of it): written in place by the
    loop, as an array of known size is, rather than grown."""
    column = zeros_like(like, dtypes.int32)
    if column.ndim > 1:
        column = reduce_sum(column, axis=tuple(range(1, column.ndim)))
    for _ in range(element.ndim):
        column = expand_dims(column, -1)
    blank = cast(add(column, zeros_like(element, dtypes.int32)), element.dtype)
    return TensorArray(element.dtype, element_shape=element.shape).unstack(blank)


def _accumulate(op: str, fn: Callable[[Any, Any], Any], elems: Any, initializer: Any,
                reverse: bool, keep: bool, back_prop: bool = True) -> Any:
    """The loop of `scan` (`keep`: every accumulator, stacked) and of the folds (the last)."""
    elements = _Elements(elems, op)
    count = elements.count
    start = 0
    if initializer is None:
        if elements.size == 0:
            raise ValueError(f"{op}: elems is empty and there is no initializer to start "
                             f"from{describe_location()}")
        first = elements.at(subtract(count, 1) if reverse else 0)
        initializer, start = first, 1
    init_leaves, treedef = nest.flatten(initializer)
    init_leaves = [convert_to_tensor(leaf) for leaf in init_leaves]
    specs = [TensorSpec([None] * leaf.ndim, leaf.dtype) for leaf in init_leaves]
    if elements.size is None:
        outputs = [_rows(elements.leaves[0], leaf) for leaf in init_leaves]
    else:
        outputs = [_array(leaf.dtype, elements.size, leaf.shape) for leaf in init_leaves]
    if keep and start:
        position = subtract(count, 1) if reverse else 0
        outputs = [a.write(position, x) for a, x in zip(outputs, init_leaves, strict=True)]

    def index(k: Any) -> Any:
        return subtract(subtract(count, 1), k) if reverse else k

    def body(k: Any, carry: list, arrays: list) -> tuple:
        i = index(k)
        returned = fn(nest.unflatten(treedef, carry), elements.at(i))
        carry = _results(op, returned, specs, treedef)
        if keep:
            arrays = [a.write(i, c) for a, c in zip(arrays, carry, strict=True)]
        return add(k, 1), carry, arrays

    bound = None if elements.size is None else max(elements.size - start, 0)
    _, final, outputs = while_loop(lambda k, *_: less(k, count), body,
                                   (convert_to_tensor(np.int32(start)), init_leaves,
                                    outputs if keep else []),
                                   maximum_iterations=bound, name=op)
    results = [a.stack() for a in outputs] if keep else final
    return nest.unflatten(treedef, results if back_prop else [stop_gradient(r) for r in results])


def scan(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
         parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
         infer_shape: bool = True, reverse: bool = False, name: str | None = None) -> Any:
    """Every accumulator of ``a = fn(a, x)`` over the elements `x` of `elems` (along its
    first dim), stacked: result[i] is the accumulator after element i.

    `a` starts as `initializer` (a nest; the results have its structure), or as the first
    element, which is then result[0]. With `reverse` the elements are taken from the last,
    and result[i] still belongs to element i.

    >>> sf.scan(lambda a, x: a + x, sf.constant([1, 2, 3, 4]))
    sf.Tensor([ 1,  3,  6, 10], shape=(4,), dtype=int32)
    >>> sf.scan(lambda a, x: a + x, sf.constant([1, 2, 3, 4]), reverse=True)
    sf.Tensor([10,  9,  7,  4], shape=(4,), dtype=int32)
    """
    return _accumulate("scan", fn, elems, initializer, reverse, keep=True, back_prop=back_prop)


def foldl(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
          parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
          name: str | None = None) -> Any:
    """``a = fn(a, x)`` over the elements of `elems` from the first; the last `a` (it
    starts as `initializer`, or as the first element).

    >>> sf.foldl(lambda a, x: a * 10 + x, sf.constant([1, 2, 3]))
    sf.Tensor(123, shape=(), dtype=int32)
    """
    return _accumulate("foldl", fn, elems, initializer, False, keep=False, back_prop=back_prop)


def foldr(fn: Callable[[Any, Any], Any], elems: Any, initializer: Any = None,
          parallel_iterations: int = 10, back_prop: bool = True, swap_memory: bool = False,
          name: str | None = None) -> Any:
    """``a = fn(a, x)`` over the elements of `elems` from the last; the last `a` (it
    starts as `initializer`, or as the last element).

    >>> sf.foldr(lambda a, x: a * 10 + x, sf.constant([1, 2, 3]))
    sf.Tensor(321, shape=(), dtype=int32)
    """
    return _accumulate("foldr", fn, elems, initializer, True, keep=False, back_prop=back_prop)
