"""`sf.data.Dataset`: input pipelines of sources and transformations, as in `tf.data`.

A dataset is a description: each `iter(dataset)` makes a fresh pipeline of `sources`, one
per stage, and is one epoch (shuffles draw a new order per epoch unless seeded the same).
Elements stay NumPy arrays inside the pipeline and become eager tensors where they leave it,
so the stages cost no dispatch. A `map` function is staged with `sf.function` (traced for
the first element signature, once more with the dims that vary left unknown, run compiled),
unless it cannot be traced, when it runs eagerly; so are the functions of `filter`, `scan`,
`reduce` and `take_while`. Functions that return datasets (`flat_map`, `interleave`) run
eagerly: they build descriptions. A `window` element is a nest of datasets, which only
functions called eagerly receive.

An error computing an element is raised by the ``next()`` that would have returned it, and
the next ``next()`` goes on with the following element (as in `tf.data`), whether or not
stages compute ahead (`prefetch`, a parallel `map`): they keep the error in its element's
place, and a checkpoint saves it there.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from stageflow.core import context, nest
from stageflow.core.errors import InvalidArgumentError, OutOfRangeError, StagingError
from stageflow.core.source import describe_location
from stageflow.data import sources
from stageflow.data.composite_elements import (
    COMPOSITE_ARRAYS,
    batched_spec,
    leaf_spec,
    ragged_spec,
    row_spec,
    stack_composites,
    to_ragged,
)
from stageflow.data.elements import (
    DatasetSpec,
    Element,
    Window,
    describe,
    flat_leaves,
    spec_of,
    stack,
    to_arrays,
    to_tensors,
)
from stageflow.data.options import Options
from stageflow.frontend.ops.control import numpy_function
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.frontend.tracer import GraphTrace
from stageflow.frontend.variables import Variable
from stageflow.staging.function import function

AUTOTUNE = -1  # num_parallel_calls / buffer_size: as many as the machine has cores
INFINITE_CARDINALITY = -1  # `Dataset.cardinality` of a dataset without end
UNKNOWN_CARDINALITY = -2  # `Dataset.cardinality` where only iterating can tell


class Run:
    """What a pipeline is made for: its epoch (a path: the iterator's number, then one
    number per enclosing `repeat`) and the seed of each shuffle in it."""

    def __init__(self, epoch: tuple[int, ...], seeds: dict[int, list[int]]) -> None:
        self.epoch, self.seeds = epoch, seeds

    def repeated(self, number: int) -> Run:
        return Run((*self.epoch, number), self.seeds)


class Dataset:
    """A sequence of elements (nests of tensors), built from sources and transformed::

        ds = (sf.data.Dataset.from_tensor_slices((images, labels))
              .shuffle(1000, seed=0).batch(32).map(augment).prefetch(2))
        for images, labels in ds:           # one epoch
            ...

    Iterating gives an `Iterator`, which a checkpoint can save and restore.

    Elements keep the sources' dtypes; `batch` adds a leading dim, unknown (``?``) in
    `element_spec` when the last batch may be shorter:

    >>> features = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> labels = np.array([0, 1, 0, 1, 1, 0])
    >>> ds = sf.data.Dataset.from_tensor_slices((features, labels)).batch(4)
    >>> ds.element_spec
    (TensorSpec(shape=(?, 2), dtype=float32), TensorSpec(shape=(?,), dtype=int64))
    >>> for x, y in ds:                        # one epoch: eager tensors
    ...     print(x.shape, y.numpy())
    (4, 2) [0 1 0 1]
    (2, 2) [1 0]

    `map` stages its function once per element signature; `filter` too:

    >>> squares = sf.data.Dataset.range(6).map(lambda i: i * i).filter(lambda s: s % 2 == 0)
    >>> [int(s) for s in squares.as_numpy_iterator()]
    [0, 4, 16]
    """

    def __init__(self, inputs: tuple[Dataset, ...] = ()) -> None:
        self._inputs = inputs
        self._iterators = itertools.count()

    # -- sources ------------------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(tensors: Any) -> Dataset:
        """One element per row of `tensors` (a nest of arrays with one leading dim)."""
        return _Slices(to_arrays(tensors), "from_tensor_slices")

    @staticmethod
    def from_tensors(tensors: Any) -> Dataset:
        """One element: `tensors` (a nest of tensors) whole.

        >>> ds = sf.data.Dataset.from_tensors(([1, 2, 3], True))
        >>> ds.element_spec
        (TensorSpec(shape=(3,), dtype=int32), TensorSpec(shape=(), dtype=bool))
        >>> [(x.tolist(), bool(b)) for x, b in ds.as_numpy_iterator()]
        [([1, 2, 3], True)]
        """
        leaves, treedef = nest.flatten(to_arrays(tensors))
        return _Slices(nest.unflatten(treedef, [
            stack_composites([leaf]) if isinstance(leaf, COMPOSITE_ARRAYS)
            else leaf[np.newaxis] for leaf in leaves]), "from_tensors")

    @staticmethod
    def from_generator(generator: Callable[..., Iterable], output_types: Any = None,
                       output_shapes: Any = None, args: tuple | None = None,
                       output_signature: Any = None) -> Dataset:
        """The elements `generator(*args)` yields (a callable, so each epoch restarts it;
        tensors in `args` reach it as NumPy arrays). `output_signature` (a nest of
        `sf.TensorSpec`) fixes dtypes and is the element spec; TensorFlow's older form
        gives `output_types` (a nest of dtypes) and `output_shapes` (a nest of shapes,
        None dims any size; without it each leaf keeps the first element's rank, every dim
        any size). With neither, the first element gives the spec.

        >>> def pairs(n):
        ...     for i in range(n):
        ...         yield i, [i] * i
        >>> ds = sf.data.Dataset.from_generator(
        ...     pairs, output_types=(sf.int64, sf.float32), output_shapes=((), (None,)),
        ...     args=(3,))
        >>> ds.element_spec
        (TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(?,), dtype=float32))
        >>> [(int(i), v.tolist()) for i, v in ds.as_numpy_iterator()]
        [(0, []), (1, [1.0]), (2, [2.0, 2.0])]
        """
        signature = output_signature
        if output_types is not None or output_shapes is not None:
            if output_signature is not None:
                raise TypeError("Dataset.from_generator: give output_signature, or "
                                f"output_types and output_shapes, not both{describe_location()}")
            signature = _legacy_signature(output_types, output_shapes)
        arguments = tuple(a.numpy() if isinstance(a, Tensor | Variable) else a
                          for a in args or ())
        return _Generated(generator, signature, arguments)

    @staticmethod
    def range(*args: int, output_type: Any = np.int64) -> Dataset:
        """``range(start, stop, step)`` as scalars of `output_type` (int64 by default).

        >>> [int(x) for x in sf.data.Dataset.range(2, 11, 4)]
        [2, 6, 10]
        >>> sf.data.Dataset.range(3, output_type=sf.int32).element_spec
        TensorSpec(shape=(), dtype=int32)
        """
        return _Slices(np.arange(*args).astype(output_type), "range")

    # -- transformations --------------------------------------------------------------------

    def map(self, map_func: Callable[..., Any], num_parallel_calls: int | None = None,
            deterministic: bool = True) -> Dataset:
        """`map_func` of each element (a tuple element is passed as separate arguments).
        It is staged with `sf.function`; ``num_parallel_calls`` runs that many calls at
        once (`AUTOTUNE`: one per core), results in input order."""
        del deterministic  # results always come in input order
        return _Mapped(self, map_func, _count(num_parallel_calls, "num_parallel_calls", "map"))

    def shuffle(self, buffer_size: int, seed: int | None = None,
                reshuffle_each_iteration: bool = True) -> Dataset:
        """Elements in random order, drawn from a buffer of `buffer_size` (TensorFlow's
        semantics: a buffer as large as the dataset is a uniform shuffle)."""
        return _Shuffled(self, _count(buffer_size, "buffer_size", "shuffle"), seed,
                         reshuffle_each_iteration)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """`batch_size` consecutive elements stacked along a new leading axis; the last
        batch is shorter unless `drop_remainder`."""
        return _Batched(self, _positive(batch_size, "batch_size", "batch"), bool(drop_remainder))

    def ragged_batch(self, batch_size: int, drop_remainder: bool = False,
                     row_splits_dtype: Any = np.int64) -> Dataset:
        """`batch_size` consecutive elements as one: each leaf whose elements' shapes vary
        (an unknown dim in the element spec) as an `sf.RaggedTensor`, ragged up to its
        last unknown dim; other leaves stacked as `batch` stacks them.

        >>> ds = sf.data.Dataset.from_generator(
        ...     lambda: ([0], [0, 1, 2, 3, 4], [0, 1, 2]),
        ...     output_signature=sf.TensorSpec([None], sf.int32))
        >>> for rt in ds.ragged_batch(2):
        ...     print(rt)
        <sf.RaggedTensor [[0], [0, 1, 2, 3, 4]]>
        <sf.RaggedTensor [[0, 1, 2]]>
        """
        return _ToRagged(self).batch(batch_size, drop_remainder)

    def repeat(self, count: int | None = None) -> Dataset:
        """The dataset `count` times (None or -1: forever), reshuffled each time."""
        return _Repeated(self, None if count is None or count < 0 else int(count))

    def take(self, count: int) -> Dataset:
        """The first `count` elements (-1: all)."""
        return _Taken(self, None if count < 0 else int(count), 0)

    def skip(self, count: int) -> Dataset:
        """All but the first `count` elements (-1: none of them)."""
        return _Taken(self, 0, 0) if count < 0 else _Taken(self, None, int(count))

    def filter(self, predicate: Callable[..., Any]) -> Dataset:
        """The elements for which `predicate` (a tuple element passed as separate arguments,
        returning a bool scalar) is true; staged with `sf.function` like `map`'s function."""
        return _Filtered(self, predicate)

    @staticmethod
    def zip(datasets: tuple[Dataset, ...]) -> Dataset:
        """Tuples of one element of each dataset, until the shortest ends."""
        datasets = tuple(datasets)
        if not datasets or not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("Dataset.zip: give a tuple of datasets")
        return _Zipped(datasets)

    def enumerate(self, start: int = 0) -> Dataset:
        """``(index, element)`` pairs, the index an int64 counting from `start`."""
        return Dataset.zip((_Counted(int(start)), self))

    def concatenate(self, dataset: Dataset) -> Dataset:
        """This dataset's elements, then `dataset`'s (of the same structure)."""
        return _Concatenated(self, dataset)

    def with_options(self, options: Options) -> Dataset:
        """This dataset with `options` set (`sf.data.Options`); where options were set
        before in the pipeline, those `options` sets take their place."""
        if not isinstance(options, Options):
            raise TypeError(f"with_options: expected an sf.data.Options, got "
                            f"{type(options).__name__}{describe_location()}")
        return _WithOptions(self, options)

    def options(self) -> Options:
        """The options set on this pipeline (`with_options`), merged from its sources on.

        >>> sf.data.Dataset.range(3).options().deterministic is None
        True
        """
        merged = Options()
        for dataset in self._inputs:
            merged = merged.merge(dataset.options())
        return merged

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Dataset:
        """Elements prepared ahead by a background thread, up to `buffer_size` of them."""
        return _Prefetched(self, _count(buffer_size, "buffer_size", "prefetch"))

    def unbatch(self) -> Dataset:
        """Each element split along its leading dim into that many elements (every leaf
        must have the same leading dim): the inverse of `batch`.

        >>> ds = sf.data.Dataset.from_tensor_slices([[1, 2, 3], [4, 5, 6]]).unbatch()
        >>> [int(x) for x in ds.as_numpy_iterator()]
        [1, 2, 3, 4, 5, 6]
        """
        return _Unbatched(self)

    def rebatch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """The elements in batches of `batch_size` (TensorFlow's `rebatch` with one batch
        size): ``unbatch().batch(batch_size, drop_remainder)``.

        >>> ds = sf.data.Dataset.range(6).batch(4).rebatch(3)
        >>> [x.tolist() for x in ds.as_numpy_iterator()]
        [[0, 1, 2], [3, 4, 5]]
        """
        if np.ndim(batch_size) != 0:
            raise ValueError(f"Dataset.rebatch: batch_size is one size here, got {batch_size!r} "
                             f"(TensorFlow's cycling through a list of sizes is not supported)"
                             f"{describe_location()}")
        return self.unbatch().batch(batch_size, drop_remainder)

    def padded_batch(self, batch_size: int, padded_shapes: Any = None,
                     padding_values: Any = None, drop_remainder: bool = False) -> Dataset:
        """`batch_size` consecutive elements padded to one shape and stacked. Each leaf is
        padded to its shape in `padded_shapes` (a nest like the element's, of shapes;
        None or -1 dims, and every dim without `padded_shapes`, pad to the longest in the
        batch), with its value in `padding_values` (a nest like the element's, or one
        scalar for all leaves; 0 without it).

        >>> ds = sf.data.Dataset.from_generator(
        ...     lambda: ([x] * x for x in range(1, 5)),
        ...     output_signature=sf.TensorSpec([None], sf.int32))
        >>> for batch in ds.padded_batch(2).as_numpy_iterator():
        ...     print(batch.tolist())
        [[1, 0], [2, 2]]
        [[3, 3, 3, 0], [4, 4, 4, 4]]
        >>> for batch in ds.padded_batch(2, padded_shapes=5, padding_values=-1).as_numpy_iterator():
        ...     print(batch.tolist())
        [[1, -1, -1, -1, -1], [2, 2, -1, -1, -1]]
        [[3, 3, 3, -1, -1], [4, 4, 4, 4, -1]]
        """
        size = _positive(batch_size, "batch_size", "padded_batch")
        return _PaddedBatched(self, size, padded_shapes, padding_values, bool(drop_remainder))

    def bucket_by_sequence_length(
            self, element_length_func: Callable[..., Any], bucket_boundaries: list[int],
            bucket_batch_sizes: list[int], padded_shapes: Any = None,
            padding_values: Any = None, pad_to_bucket_boundary: bool = False,
            no_padding: bool = False, drop_remainder: bool = False) -> Dataset:
        """Batches of elements of similar length: ``element_length_func(element)`` (an int
        scalar, staged like `map`'s function) picks bucket ``i`` where
        ``bucket_boundaries[i-1] <= length < bucket_boundaries[i]``; a bucket holding
        ``bucket_batch_sizes[i]`` elements gives them as a `padded_batch` (`padded_shapes`,
        `padding_values` as there; unknown dims to the bucket's boundary - 1 with
        `pad_to_bucket_boundary`; a plain `batch` with `no_padding`). At the end the
        buckets give what they hold, in bucket order, unless `drop_remainder`.

        >>> elements = [[0], [1, 2, 3, 4], [5, 6, 7], [7, 8, 9, 10, 11],
        ...             [13, 14, 15, 16, 19, 20], [21, 22]]
        >>> ds = sf.data.Dataset.from_generator(lambda: elements, sf.int64, output_shapes=[None])
        >>> ds = ds.bucket_by_sequence_length(
        ...     element_length_func=lambda elem: sf.shape(elem)[0],
        ...     bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 2])
        >>> for batch in ds.as_numpy_iterator():
        ...     print(batch.tolist())
        [[1, 2, 3, 4], [5, 6, 7, 0]]
        [[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]]
        [[0, 0], [21, 22]]
        """
        where = describe_location()
        boundaries = [int(b) for b in bucket_boundaries]
        sizes = [_positive(b, "bucket_batch_sizes", "bucket_by_sequence_length")
                 for b in bucket_batch_sizes]
        if len(sizes) != len(boundaries) + 1:
            raise ValueError(f"Dataset.bucket_by_sequence_length: bucket_batch_sizes needs "
                             f"len(bucket_boundaries) + 1 = {len(boundaries) + 1} sizes, got "
                             f"{len(sizes)}{where}")
        if any(a >= b for a, b in itertools.pairwise(boundaries)):
            raise ValueError(f"Dataset.bucket_by_sequence_length: bucket_boundaries must "
                             f"increase, got {boundaries}{where}")
        if no_padding and (padded_shapes is not None or padding_values is not None
                           or pad_to_bucket_boundary):
            raise ValueError(f"Dataset.bucket_by_sequence_length: no_padding=True takes no "
                             f"padded_shapes, padding_values or pad_to_bucket_boundary{where}")
        padding = None if no_padding else _Padding(
            self.element_spec, padded_shapes, padding_values, "bucket_by_sequence_length",
            where)
        return _Bucketed(self, element_length_func, boundaries, sizes, padding,
                         bool(pad_to_bucket_boundary), bool(drop_remainder))

    def window(self, size: int, shift: int | None = None, stride: int = 1,
               drop_remainder: bool = False) -> Dataset:
        """Windows of `size` elements, `stride` apart, a window starting every `shift`
        elements (`size` without it). Each window is the element's structure with a dataset
        for each leaf (`flat_map` makes elements of them); the last windows are shorter
        unless `drop_remainder`.

        >>> windows = sf.data.Dataset.range(7).window(3, shift=2, drop_remainder=True)
        >>> for window in windows:
        ...     print([int(x) for x in window])
        [0, 1, 2]
        [2, 3, 4]
        [4, 5, 6]
        >>> flat = sf.data.Dataset.range(7).window(3, 1, 2, True).flat_map(lambda w: w.batch(3))
        >>> [x.tolist() for x in flat.as_numpy_iterator()]
        [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
        """
        size = _positive(size, "size", "window")
        return _Windowed(self, size, size if shift is None else _positive(shift, "shift", "window"),
                         _positive(stride, "stride", "window"), bool(drop_remainder))

    def flat_map(self, map_func: Callable[..., Dataset]) -> Dataset:
        """The elements of the dataset `map_func` makes of each element, one dataset after
        the other. `map_func` runs eagerly (it builds a dataset: a description), a tuple
        element passed as separate arguments.

        >>> ds = sf.data.Dataset.from_tensor_slices([[1, 2, 3], [4, 5, 6]])
        >>> [int(x) for x in ds.flat_map(sf.data.Dataset.from_tensor_slices).as_numpy_iterator()]
        [1, 2, 3, 4, 5, 6]
        """
        return _Interleaved(self, map_func, 1, 1, "flat_map")

    def interleave(self, map_func: Callable[..., Dataset], cycle_length: int | None = None,
                   block_length: int = 1, num_parallel_calls: int | None = None,
                   deterministic: bool | None = None) -> Dataset:
        """The elements of the datasets `map_func` makes of the elements, `cycle_length`
        of them open at once (one per core without it, as TensorFlow's default), taking
        `block_length` elements from each in turn; one that ends makes room for the next
        element's. The order is TensorFlow's deterministic one; `num_parallel_calls` and
        `deterministic` change nothing here (the elements come one by one). Give
        `cycle_length` for an order, and checkpoints, that do not depend on the machine.

        >>> ds = sf.data.Dataset.range(1, 6).interleave(
        ...     lambda x: sf.data.Dataset.from_tensors(x).repeat(6), cycle_length=2,
        ...     block_length=4)
        >>> [int(x) for x in ds.as_numpy_iterator()]  # doctest: +NORMALIZE_WHITESPACE
        [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4,
         5, 5, 5, 5, 5, 5]
        """
        del num_parallel_calls, deterministic  # one element at a time, in order
        if cycle_length is None or cycle_length == AUTOTUNE:
            cycle = os.cpu_count() or 1
        else:
            cycle = _positive(cycle_length, "cycle_length", "interleave")
        block = _positive(block_length, "block_length", "interleave")
        return _Interleaved(self, map_func, cycle, block, "interleave")

    def scan(self, initial_state: Any, scan_func: Callable[[Any, Any], tuple[Any, Any]]
             ) -> Dataset:
        """``scan_func(state, element)`` returns ``(new_state, output)``: the outputs, the
        state carried from `initial_state` (it keeps its structure and dtypes). Staged with
        `sf.function` like `map`'s function; an iterator's checkpoint saves the state.

        >>> ds = sf.data.Dataset.range(10).scan(
        ...     np.int64(0), lambda state, i: (state + i, state + i))
        >>> [int(x) for x in ds.as_numpy_iterator()]
        [0, 1, 3, 6, 10, 15, 21, 28, 36, 45]
        """
        return _Scanned(self, initial_state, scan_func)

    def take_while(self, predicate: Callable[..., Any]) -> Dataset:
        """The elements until the first for which `predicate` (a bool scalar, staged like
        `filter`'s) is false.

        >>> ds = sf.data.Dataset.range(10).take_while(lambda x: x < 5)
        >>> [int(x) for x in ds.as_numpy_iterator()]
        [0, 1, 2, 3, 4]
        """
        return _TakenWhile(self, predicate)

    def unique(self) -> Dataset:
        """Each element the first time it comes (elements: int32 or int64 scalars); the
        values seen are kept, and saved with the iterator.

        >>> ds = sf.data.Dataset.from_tensor_slices([1, 37, 2, 37, 2, 1]).unique()
        >>> [int(x) for x in ds.as_numpy_iterator()]
        [1, 37, 2]
        """
        return _Unique(self)

    def cache(self, filename: str = "") -> Dataset:
        """The elements, recorded in memory by the first pass that reaches the end and read
        from there by later passes (epochs of `repeat`, new iterators): stages before it
        run once (a shuffle before it keeps its first order). Only the in-memory cache
        exists here: `filename` must be empty.

        >>> calls = []
        >>> def noted(x):
        ...     calls.append(int(x))
        ...     return x
        >>> ds = sf.data.Dataset.range(3).map(
        ...     lambda x: sf.numpy_function(noted, [x], sf.TensorSpec((), sf.int64))).cache()
        >>> [int(x) for x in ds.repeat(2).as_numpy_iterator()], calls
        ([0, 1, 2, 0, 1, 2], [0, 1, 2])
        """
        if filename:
            raise ValueError(f"Dataset.cache: only the in-memory cache exists, give no "
                             f"filename (got {filename!r}){describe_location()}")
        return _Cached(self)

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Every `num_shards`th element, from the `index`th: one worker's part.

        >>> [int(x) for x in sf.data.Dataset.range(10).shard(3, 1).as_numpy_iterator()]
        [1, 4, 7]
        """
        count = _positive(num_shards, "num_shards", "shard")
        if not 0 <= int(index) < count:
            raise ValueError(f"Dataset.shard: index must be in [0, num_shards={count}), got "
                             f"{index}{describe_location()}")
        return _Sharded(self, count, int(index))

    def apply(self, transformation_func: Callable[[Dataset], Dataset]) -> Dataset:
        """``transformation_func(self)``, which must return a dataset: reusable chains.

        >>> def evens_doubled(ds):
        ...     return ds.filter(lambda x: x % 2 == 0).map(lambda x: x * 2)
        >>> [int(x) for x in sf.data.Dataset.range(6).apply(evens_doubled).as_numpy_iterator()]
        [0, 4, 8]
        """
        result = transformation_func(self)
        if not isinstance(result, Dataset):
            raise TypeError(f"Dataset.apply: transformation_func must return a Dataset, "
                            f"got {type(result).__name__}{describe_location()}")
        return result

    # -- results ----------------------------------------------------------------------------

    def reduce(self, initial_state: Any, reduce_func: Callable[[Any, Any], Any]) -> Any:
        """``reduce_func(state, element)`` over every element, from `initial_state`: the
        final state (eager tensors; it keeps its structure and dtypes). Staged with
        `sf.function` like `map`'s function. Inside a staged function it is an op that
        runs a pass over the dataset each time the graph runs (the state keeps its shapes
        there).

        >>> print(sf.data.Dataset.range(5).reduce(np.int64(0), lambda x, _: x + 1).numpy())
        5
        >>> print(sf.data.Dataset.range(5).reduce(np.int64(0), lambda x, y: x + y).numpy())
        10
        """
        leaves, treedef = nest.flatten(initial_state)
        if not isinstance(context.current_trace(), GraphTrace):
            step = _Step(self, reduce_func, to_arrays(initial_state), "reduce")
            return to_tensors(self._reduced(step, step.initial))
        tensors = [convert_to_tensor(leaf) for leaf in leaves]
        specs = [TensorSpec(t.shape, t.dtype) for t in tensors]
        step = _Step(self, reduce_func,
                     nest.unflatten(treedef, [np.zeros(s.shape, s.dtype) for s in specs]),
                     "reduce")

        def dataset_reduce(*state: np.ndarray) -> list[np.ndarray]:
            return flat_leaves(self._reduced(step, nest.unflatten(treedef, list(state))))

        return nest.unflatten(treedef, numpy_function(_named(dataset_reduce), tensors, specs))

    def _reduced(self, step: _Step, state: Element) -> Element:
        for element in self.as_numpy_iterator():
            state = step.checked(step.mapped._apply((state, element)))
        return state

    def get_single_element(self) -> Any:
        """The dataset's one element (eager tensors); an empty dataset, or one of more
        elements, raises `sf.errors.InvalidArgumentError`. Inside a staged function it is
        an op taking the element each time the graph runs.

        >>> sf.data.Dataset.from_tensors([1, 2]).get_single_element().numpy()
        array([1, 2], dtype=int32)
        >>> try:
        ...     sf.data.Dataset.range(2).get_single_element()
        ... except sf.errors.InvalidArgumentError as error:
        ...     print(str(error).splitlines()[0])
        Dataset.get_single_element: the dataset had more than one element
        """
        where = describe_location()
        if not isinstance(context.current_trace(), GraphTrace):
            return _user_view(self._single(where))
        specs, treedef = nest.flatten(self.element_spec)

        def dataset_single_element() -> list[np.ndarray]:
            return flat_leaves(self._single(where))

        return nest.unflatten(treedef, numpy_function(_named(dataset_single_element), [], specs))

    def _single(self, where: str) -> Element:
        elements = list(itertools.islice(self.as_numpy_iterator(), 2))
        if len(elements) != 1:
            count = "was empty" if not elements else "had more than one element"
            raise InvalidArgumentError(f"Dataset.get_single_element: the dataset {count}"
                                       f"{where}")
        return elements[0]

    def cardinality(self) -> Any:
        """The number of elements, an int64 scalar tensor: `sf.data.INFINITE_CARDINALITY`
        (-1) without end, `sf.data.UNKNOWN_CARDINALITY` (-2) where only iterating can tell
        (after `filter`, a generator, ...).

        >>> ds = sf.data.Dataset.range(42)
        >>> int(ds.cardinality()), int(ds.batch(5).cardinality())
        (42, 9)
        >>> int(ds.repeat().cardinality()) == sf.data.INFINITE_CARDINALITY
        True
        >>> int(ds.filter(lambda x: x > 10).cardinality()) == sf.data.UNKNOWN_CARDINALITY
        True
        """
        return wrap(np.int64(self._cardinality()))

    def _cardinality(self) -> int:
        """This stage's number of elements, from its inputs' (TensorFlow's rules)."""
        return UNKNOWN_CARDINALITY

    def __len__(self) -> int:
        """``len(dataset)``: the number of elements, where `cardinality` knows it (a
        TypeError for an infinite dataset or one of unknown length, as in TensorFlow).

        >>> len(sf.data.Dataset.range(10).batch(3))
        4
        >>> len(sf.data.Dataset.range(10).repeat())
        Traceback (most recent call last):
        ...
        TypeError: The dataset is infinite.
        """
        count = self._cardinality()
        if count == INFINITE_CARDINALITY:
            raise TypeError("The dataset is infinite.")
        if count == UNKNOWN_CARDINALITY:
            raise TypeError("The dataset length is unknown.")
        return count

    def __bool__(self) -> bool:
        """A dataset is true, whatever its length (`__len__` may raise)."""
        return True

    # -- iteration --------------------------------------------------------------------------

    def __iter__(self) -> Iterator:
        _not_unrolled("dataset")
        return Iterator(self)

    def _staged_iteration(self) -> Callable[[], tuple[Any, Any]]:
        """For ``for x in dataset`` in a staged function (AutoGraph): an op starting a new
        pass each time the graph runs, and the fetch of the pass's next element."""
        current: list[sources.Source] = []

        def dataset_start() -> np.ndarray:
            for source in current:
                source.close()
            current[:] = [self._make(Run((next(self._iterators),), self._seeds()))]
            return np.int32(0)

        started = numpy_function(_named(dataset_start), [], TensorSpec((), np.int32))
        return _fetcher(lambda: current[0], self.element_spec, [started])

    def as_numpy_iterator(self) -> Iterable[Any]:
        """The elements as nests of NumPy arrays (a `window`'s datasets as iterators of
        them)."""
        source = self._make(Run((next(self._iterators),), self._seeds()))
        try:
            while True:
                try:
                    element = source.next()
                except StopIteration:
                    return
                leaves, treedef = nest.flatten(element)
                yield nest.unflatten(treedef, [
                    _WindowRows(leaf).as_numpy_iterator() if isinstance(leaf, Window)
                    else _numpy_leaf(leaf) for leaf in leaves])
        finally:
            source.close()

    @property
    def element_spec(self) -> Any:
        """The nest of `sf.TensorSpec` each element matches (None for a dim that varies)."""
        raise NotImplementedError

    def _make(self, run: Run) -> sources.Source:
        raise NotImplementedError

    # A stage drawing random numbers has a seed (given, or drawn when it is made), saved
    # with each iterator's position: shuffles, and interleaves (for the unseeded shuffles
    # of the datasets their function makes).
    _seed: list[int] | None = None
    _seed_given = False

    def _shuffles(self) -> list[Dataset]:
        """The stages of the pipeline that have a seed, depth first (the order their seeds
        are saved in)."""
        found = [s for d in self._inputs for s in d._shuffles()]
        return [*found, self] if self._seed is not None else found

    def _seeds(self) -> dict[int, list[int]]:
        return {id(s): s._seed for s in self._shuffles()}

    def _stage(self) -> str:
        """What this stage does, in the words of the call that made it, with the arguments
        that change its elements (not `num_parallel_calls` or a prefetch's size: a
        position saved with other values restores to the same elements)."""
        raise NotImplementedError

    def _pipeline(self) -> list[str]:
        """The stages from the sources to this one, inputs first (so that no two pipelines
        of different shapes give the same list), each with its element spec: what an
        iterator's saved position is checked against before it is restored."""
        stages = [stage for d in self._inputs for stage in d._pipeline()]
        try:
            spec = describe(self.element_spec)
        except Exception as error:  # noqa: BLE001 - data-dependent: every element raised
            spec = f"unknown element spec ({type(error).__name__})"
        return [*stages, f"{self._stage()} -> {spec}"]

    def __repr__(self) -> str:
        name = type(self).__name__.lstrip("_")
        name += "" if name.endswith("Dataset") else "Dataset"
        return f"<sf.data.{name} element_spec={self.element_spec!r}>"


class Iterator:
    """The position in one pass over a dataset: ``next(it)`` gives the next element (eager
    tensors). Checkpoints save it (``sf.train.Checkpoint(data=it)``): a restored iterator
    yields exactly the elements (and element errors) the saved one would have yielded
    next. The position is saved with its pipeline's stages and their element specs, and a
    restore into an iterator of another pipeline is refused, naming the first stage that
    differs (`num_parallel_calls` and prefetch sizes may differ: they change no element).
    Inside an `sf.function`, ``next(it)`` is an op that takes the next element when the
    graph runs.

    Saving the position makes a resumed run see the same data as an uninterrupted one, the
    shuffle's order included:

    >>> import os, shutil, tempfile
    >>> it = iter(sf.data.Dataset.range(10).shuffle(10, seed=0).batch(3))
    >>> first = next(it)                       # an int64 tensor of shape (3,)
    >>> first.shape, first.dtype.name
    ((3,), 'int64')
    >>> directory = tempfile.mkdtemp()
    >>> ckpt = sf.train.Checkpoint(data=it)
    >>> path = ckpt.write(os.path.join(directory, "position"))
    >>> expected = next(it).numpy()
    >>> _ = ckpt.read(path)                    # back to where `write` saw it
    >>> bool((next(it).numpy() == expected).all())
    True
    >>> shutil.rmtree(directory)
    """

    def __init__(self, dataset: Dataset) -> None:
        self._dataset = dataset
        self._run = Run((next(dataset._iterators),), dataset._seeds())
        self._source = dataset._make(self._run)

    def __iter__(self) -> Iterator:
        _not_unrolled("iterator")
        return self

    def __next__(self) -> Any:
        if isinstance(context.current_trace(), GraphTrace):
            return self._staged_next()
        return _user_view(self._source.next())

    def _staged_next(self) -> Any:
        leaves, treedef = nest.flatten(_staged_spec(self.element_spec))

        def iterator_get_next() -> list[np.ndarray]:
            try:
                return flat_leaves(self._source.next())
            except StopIteration:
                raise OutOfRangeError("sf.data.Iterator: end of the dataset (the staged "
                                      "function asked for one more element)") from None

        values = numpy_function(_named(iterator_get_next), [], leaves)
        return nest.unflatten(treedef, values)

    def _staged_iteration(self) -> Callable[[], tuple[Any, Any]]:
        """For ``for x in iterator`` in a staged function: fetch the next element, if any."""
        return _fetcher(lambda: self._source, self.element_spec, [])

    def get_next(self) -> Any:
        return next(self)

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec

    def _checkpoint_state(self) -> dict[str, Any]:
        seeds = [self._run.seeds[id(s)] for s in self._dataset._shuffles()]
        return {"epoch": list(self._run.epoch), "seeds": seeds,
                "pipeline": self._dataset._pipeline(), "source": self._source.state()}

    def _checkpoint_prepare(self, saved: dict[str, Any], where: str) -> Callable[[], None]:
        if "pipeline" in saved:  # absent from checkpoints written before it was saved
            _check_pipeline(saved["pipeline"], self._dataset._pipeline(), where)
        try:
            shuffles = self._dataset._shuffles()
            if len(saved["seeds"]) != len(shuffles):
                raise ValueError(f"the saved pipeline has {len(saved['seeds'])} seeded stages "
                                 f"(shuffles, interleaves), this one {len(shuffles)}")
            run = Run(tuple(int(e) for e in saved["epoch"]),
                      {id(s): [int(w) for w in seed]
                       for s, seed in zip(shuffles, saved["seeds"], strict=True)})
            fresh = self._dataset._make(run)
            try:
                fresh.restore(saved["source"])
            except BaseException:
                fresh.close()
                raise
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"{where}: the saved dataset position does not fit this "
                             f"dataset's pipeline ({type(error).__name__}: {error})") from None

        def commit() -> None:
            old, self._source, self._run = self._source, fresh, run
            old.close()
        return commit

    def __del__(self) -> None:
        source = self.__dict__.get("_source")
        if source is not None:
            source.close()

    def __repr__(self) -> str:
        return f"<sf.data.Iterator element_spec={self.element_spec!r}>"


def _check_pipeline(saved: Any, here: list[str], where: str) -> None:
    """Refuse a position saved by an iterator of another pipeline, naming the first stage
    that differs: its elements could not be this one's (other dtypes, structure, batch)."""
    if saved == here:
        return
    if not isinstance(saved, list) or not all(isinstance(stage, str) for stage in saved):
        raise ValueError(f"{where}: the saved dataset position has a pipeline description "
                         f"that is not a list of stages: {saved!r}")
    differs = next((i for i, (a, b) in enumerate(zip(saved, here, strict=False)) if a != b),
                   min(len(saved), len(here)))
    if differs < min(len(saved), len(here)):
        what = (f"stage {differs + 1} is `{saved[differs]}` in the checkpoint, "
                f"`{here[differs]}` here")
    else:
        what = f"it has {len(saved)} stages, this one {len(here)}"
    raise ValueError(f"{where}: the saved dataset position does not fit this dataset's "
                     f"pipeline, it was saved by another one: {what} (saved pipeline: "
                     f"{' | '.join(saved)}; this pipeline: {' | '.join(here)})")


def _fetcher(source: Callable[[], sources.Source], spec: Any, after: list
             ) -> Callable[[], tuple[Any, Any]]:
    """A function emitting an op that takes `source()`'s next element when the graph runs:
    ``(has_element, element)``, zeros where there is none. Ops in `after` run first."""
    leaves, treedef = nest.flatten(_staged_spec(spec))
    empty = [np.zeros([0 if d is None else d for d in s.shape], s.dtype) for s in leaves]

    def dataset_get_next(*ordering: np.ndarray) -> list[np.ndarray]:
        del ordering
        try:
            return [np.True_, *flat_leaves(source().next())]
        except StopIteration:
            return [np.False_, *empty]

    def fetch() -> tuple[Any, Any]:
        values = numpy_function(_named(dataset_get_next), after,
                                [TensorSpec((), np.bool_), *leaves])
        return values[0], nest.unflatten(treedef, values[1:])
    return fetch


def _staged_spec(spec: Any) -> Any:
    """An element spec a staged function's op can return: tensors only."""
    if _holds_datasets(spec):
        raise TypeError(f"sf.data: elements holding datasets ({describe(spec)}, a window's) "
                        f"cannot enter a staged function: make elements of them with "
                        f"flat_map or interleave first{describe_location()}")
    return spec


def _not_unrolled(what: str) -> None:
    """A Python loop over a dataset while tracing would unroll forever (each element is an
    op, and ops never run out): only AutoGraph's loop or explicit `next` may stage it."""
    if isinstance(context.current_trace(), GraphTrace):
        raise TypeError(f"iterating over an sf.data {what} in Python while a function is "
                        "traced: let AutoGraph stage the loop (sf.function(..., autograph="
                        "True), the default, on a function whose source is available), or "
                        "take elements with next(iterator)")


def _named(func: Callable) -> Callable:
    """`func` named by its own name in the IR (``dataset_get_next#4``)."""
    func.__qualname__ = func.__name__
    return func


# -- the stages ------------------------------------------------------------------------------


class _Slices(Dataset):
    def __init__(self, tensors: Element, name: str) -> None:
        super().__init__()
        self._name = name
        leaves, self._treedef = nest.flatten(tensors)
        if not leaves:
            raise ValueError("Dataset.from_tensor_slices: no tensors given")
        counts = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
        if None in counts or len(counts) != 1:
            shapes = [leaf.shape for leaf in leaves]
            raise ValueError(f"Dataset.from_tensor_slices: every tensor needs the same leading "
                             f"dim (one element per row), got shapes {shapes}")
        self._columns = leaves
        self._count = counts.pop()

    @property
    def element_spec(self) -> Any:
        return nest.unflatten(self._treedef, [row_spec(leaf_spec(c)) for c in self._columns])

    def _stage(self) -> str:
        return self._name

    def _cardinality(self) -> int:
        return self._count

    def _make(self, run: Run) -> sources.Source:
        treedef = self._treedef
        return sources.Slices(self._columns, lambda rows: nest.unflatten(treedef, rows),
                              self._count)


class _Generated(Dataset):
    def __init__(self, generator: Callable[..., Iterable], signature: Any, args: tuple) -> None:
        super().__init__()
        if not callable(generator):
            raise TypeError("Dataset.from_generator: pass the generator function (called "
                            f"again for each epoch), not a {type(generator).__name__}"
                            f"{describe_location()}")
        self._generator, self._signature, self._args = generator, signature, args
        self._spec = None if isinstance(signature, _Unshaped) else signature

    def _convert(self, value: Any) -> Element:
        if self._signature is None:
            return to_arrays(value)
        unshaped = isinstance(self._signature, _Unshaped)
        wanted = self._signature.dtypes if unshaped else self._signature
        specs, treedef = nest.flatten(wanted)
        try:
            leaves = _up_to(treedef, value, "the generator's element", "")
        except ValueError:
            raise ValueError(f"Dataset.from_generator: the generator yielded {value!r}, "
                             f"the elements are {wanted!r}") from None
        arrays = []
        for leaf, spec in zip(leaves, specs, strict=True):
            dtype = spec if unshaped else spec.dtype
            array = np.asarray(leaf._value if hasattr(leaf, "_value") else leaf, dtype)
            if not unshaped and not spec.is_compatible_with(array):
                raise ValueError(f"Dataset.from_generator: the generator yielded shape "
                                 f"{array.shape} where output_signature says {spec}")
            arrays.append(array)
        return nest.unflatten(treedef, arrays)

    @property
    def element_spec(self) -> Any:
        if self._spec is None:
            # output_types alone: the shapes are unknown, the first element gives the rank
            first = _first_spec(self)
            self._spec = (_unknown_dims(first) if isinstance(self._signature, _Unshaped)
                          else first)
        return self._spec

    def _stage(self) -> str:
        return "from_generator"

    def _make(self, run: Run) -> sources.Source:
        return sources.Generated(lambda: iter(self._generator(*self._args)), self._convert)


class _Mapped(Dataset):
    def __init__(self, input_dataset: Dataset, map_func: Callable[..., Any],
                 parallel: int) -> None:
        super().__init__((input_dataset,))
        self._func = map_func
        # Elements of varying shapes (ragged rows, last batches) trace once more, with
        # those dims unknown, as tf.data traces with the element spec's unknown dims.
        self._staged = function(map_func, reduce_retracing=True)
        self._eager = False
        self._eager_lock = threading.Lock()
        self._first_calls = threading.Lock()
        self._signatures: set[tuple] = set()  # those the staged function was called with
        self._parallel = parallel
        self._spec: Any = None

    def _call(self, element: Any) -> Any:
        """The function of an element as the user sees it; one holding datasets (a
        `window`'s) is passed to the function itself: a dataset is no staged argument."""
        args = element if isinstance(element, tuple) else (element,)
        if not self._eager and not _holds_datasets(args) and not _holds_strings(args):
            try:
                return self._staged_call(args)
            except StagingError as error:
                self._run_eagerly(error)
        return self._func(*args)

    def _staged_call(self, args: tuple) -> Any:
        """The staged function's call, the first one of each element signature made alone:
        parallel first calls would each trace and compile it, where a map traces once per
        signature (as its sequential calls do)."""
        leaves = nest.flatten(args)[0]
        signature = tuple((leaf.dtype, leaf.shape) for leaf in leaves)
        if signature in self._signatures:
            return self._staged(*args)
        with self._first_calls:
            try:
                return self._staged(*args)
            finally:
                self._signatures.add(signature)

    def _run_eagerly(self, error: StagingError) -> None:
        """Call the function itself from now on, and say so once: parallel calls may all
        find at the same time that it cannot be staged."""
        with self._eager_lock:
            first, self._eager = not self._eager, True
        if first:
            warnings.warn(f"Dataset.map: {getattr(self._func, '__qualname__', self._func)} "
                          f"runs eagerly, it cannot be staged: {error}", stacklevel=3)

    def _apply(self, element: Element) -> Element:
        result = self._call(_user_view(element))
        if _holds_datasets(result):
            raise TypeError(f"Dataset.map: {getattr(self._func, '__qualname__', self._func)} "
                            f"returned a dataset, which elements here cannot hold: use "
                            f"flat_map or interleave to make elements of the datasets")
        return to_arrays(result)

    @property
    def element_spec(self) -> Any:
        if self._spec is None:
            spec = self._inputs[0].element_spec
            args = spec if isinstance(spec, tuple) else (spec,)
            if _holds_datasets(args) or _holds_strings(args):  # not staged: run eagerly
                self._spec = _first_spec(self)
                return self._spec
            try:
                concrete = self._staged.get_concrete_function(*args)
                self._spec = concrete.structure_outputs(concrete.outputs)
            except StagingError:
                # Run eagerly, the function's results may have any dims (``map(sf.range)``
                # makes vectors of each element's length): the first element's ranks and
                # dtypes, every dim unknown, as tracing would have left them.
                self._spec = _unknown_dims(_first_spec(self))
        return self._spec

    def _stage(self) -> str:
        return "map"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        return sources.Mapped(self._inputs[0]._make(run), self._apply, self._parallel,
                              lambda: self.element_spec)


class _Filtered(Dataset):
    def __init__(self, input_dataset: Dataset, predicate: Callable[..., Any]) -> None:
        super().__init__((input_dataset,))
        self._mapped = _Mapped(input_dataset, predicate, 1)  # its staging, reused

    def _keep(self, element: Element) -> bool:
        return _truth(self._mapped, element, "filter")

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return "filter"

    def _make(self, run: Run) -> sources.Source:
        return sources.Filtered(self._inputs[0]._make(run), self._keep)


class _Counted(Dataset):
    def __init__(self, start: int) -> None:
        super().__init__()
        self._start = start

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.int64)

    def _stage(self) -> str:
        return f"count from {self._start}"

    def _cardinality(self) -> int:
        return INFINITE_CARDINALITY

    def _make(self, run: Run) -> sources.Source:
        return sources.Counted(self._start)


class _Zipped(Dataset):
    @property
    def element_spec(self) -> Any:
        return tuple(d.element_spec for d in self._inputs)

    def _stage(self) -> str:
        return f"zip of {len(self._inputs)}"

    def _cardinality(self) -> int:
        counts = [d._cardinality() for d in self._inputs]
        if UNKNOWN_CARDINALITY in counts:
            return UNKNOWN_CARDINALITY
        finite = [n for n in counts if n != INFINITE_CARDINALITY]
        return min(finite) if finite else INFINITE_CARDINALITY

    def _make(self, run: Run) -> sources.Source:
        return sources.Zipped([d._make(run) for d in self._inputs])


class _Concatenated(Dataset):
    def __init__(self, first: Dataset, second: Dataset) -> None:
        super().__init__((first, second))
        specs = [nest.flatten(d.element_spec) for d in (first, second)]
        if specs[0][1] != specs[1][1] or any(
                a.dtype != b.dtype or len(a.shape) != len(b.shape)
                for a, b in zip(specs[0][0], specs[1][0], strict=True)):
            raise TypeError(f"Dataset.concatenate: elements {first.element_spec} and "
                            f"{second.element_spec} differ in structure, dtype or rank")

    @property
    def element_spec(self) -> Any:
        (first, treedef), (second, _) = (nest.flatten(d.element_spec) for d in self._inputs)
        return nest.unflatten(treedef, [TensorSpec(
            tuple(x if x == y else None for x, y in zip(a.shape, b.shape, strict=True)),
            a.dtype) for a, b in zip(first, second, strict=True)])

    def _stage(self) -> str:
        return "concatenate"

    def _cardinality(self) -> int:
        counts = [d._cardinality() for d in self._inputs]
        for special in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            if special in counts:
                return special
        return sum(counts)

    def _make(self, run: Run) -> sources.Source:
        return sources.Concatenated(*(d._make(run) for d in self._inputs))


class _Shuffled(Dataset):
    def __init__(self, input_dataset: Dataset, size: int, seed: int | None,
                 reshuffle: bool) -> None:
        super().__init__((input_dataset,))
        self._size = size
        # A seed per dataset: given, or drawn now (and saved with each iterator's state).
        self._seed = [int(seed)] if seed is not None else [secrets.randbits(64)]
        self._seed_given = seed is not None
        self._reshuffle = reshuffle

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        fixed = "" if self._reshuffle else ", reshuffle_each_iteration=False"
        return f"shuffle({self._size}{fixed})"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        seed = [*run.seeds.get(id(self), self._seed), *(run.epoch if self._reshuffle else ())]
        return sources.Shuffled(self._inputs[0]._make(run), self._size, seed,
                                lambda: self.element_spec)


class _Batched(Dataset):
    def __init__(self, input_dataset: Dataset, size: int, drop_remainder: bool) -> None:
        super().__init__((input_dataset,))
        self._size, self._drop = size, drop_remainder

    @property
    def element_spec(self) -> Any:
        leaves, treedef = nest.flatten(self._inputs[0].element_spec)
        dim = self._size if self._drop else None
        return nest.unflatten(treedef, [batched_spec(s, dim) for s in leaves])

    def _stage(self) -> str:
        return f"batch({self._size}{', drop_remainder=True' if self._drop else ''})"

    def _cardinality(self) -> int:
        return _batches(self._inputs[0]._cardinality(), self._size, self._drop)

    def _make(self, run: Run) -> sources.Source:
        return sources.Batched(self._inputs[0]._make(run), self._size, self._drop)


class _ToRagged(Dataset):
    """Each leaf of varying shape as a ragged leaf, for `ragged_batch` to batch."""

    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__((input_dataset,))

    @property
    def element_spec(self) -> Any:
        leaves, treedef = nest.flatten(self._inputs[0].element_spec)
        return nest.unflatten(treedef, [ragged_spec(s) for s in leaves])

    def _convert(self, element: Element) -> Element:
        specs = nest.flatten(self._inputs[0].element_spec)[0]
        leaves, treedef = nest.flatten(element)
        return nest.unflatten(treedef, [to_ragged(leaf, spec)
                                        for leaf, spec in zip(leaves, specs, strict=True)])

    def _stage(self) -> str:
        return "to ragged"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        return sources.Mapped(self._inputs[0]._make(run), self._convert, 0,
                              lambda: self.element_spec)


class _Repeated(Dataset):
    def __init__(self, input_dataset: Dataset, count: int | None) -> None:
        super().__init__((input_dataset,))
        self._count = count

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return f"repeat({'' if self._count is None else self._count})"

    def _cardinality(self) -> int:
        count = self._inputs[0]._cardinality()
        if self._count is None:
            return 0 if count == 0 else INFINITE_CARDINALITY
        if self._count == 0 or count < 0:
            return 0 if self._count == 0 else count
        return count * self._count

    def _make(self, run: Run) -> sources.Source:
        return sources.Repeated(lambda number: self._inputs[0]._make(run.repeated(number)),
                                self._count)


class _Taken(Dataset):
    def __init__(self, input_dataset: Dataset, count: int | None, skip: int) -> None:
        super().__init__((input_dataset,))
        self._count, self._skip = count, max(skip, 0)

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        if self._skip:
            return f"skip({self._skip})"
        return f"take({-1 if self._count is None else self._count})"

    def _cardinality(self) -> int:
        count = self._inputs[0]._cardinality()
        if count == UNKNOWN_CARDINALITY:
            return count
        if self._skip:
            return count if count < 0 else max(count - self._skip, 0)
        if self._count is None:
            return count
        return self._count if count == INFINITE_CARDINALITY else min(count, self._count)

    def _make(self, run: Run) -> sources.Source:
        return sources.Taken(self._inputs[0]._make(run), self._count, self._skip)


class _Prefetched(Dataset):
    def __init__(self, input_dataset: Dataset, size: int) -> None:
        super().__init__((input_dataset,))
        self._size = size

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return "prefetch"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        return sources.Prefetched(self._inputs[0]._make(run), self._size,
                                  lambda: self.element_spec)


class _WithOptions(Dataset):
    def __init__(self, input_dataset: Dataset, options: Options) -> None:
        super().__init__((input_dataset,))
        self._options = options

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def options(self) -> Options:
        return super().options().merge(self._options)

    def _stage(self) -> str:
        return "with_options"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        return self._inputs[0]._make(run)


class _WindowRows(Dataset):
    """One leaf of a `window` element, as the dataset the user receives: its rows."""

    def __init__(self, window: Window) -> None:
        super().__init__()
        self._window = window

    @property
    def element_spec(self) -> Any:
        return self._window.spec

    def _stage(self) -> str:
        return "window rows"

    def _cardinality(self) -> int:
        return len(self._window.rows)

    def _make(self, run: Run) -> sources.Source:
        return sources.Listed(self._window.rows)


class _Unbatched(Dataset):
    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__((input_dataset,))
        self._where = describe_location()
        leaves = nest.flatten(input_dataset.element_spec)[0]
        if any(isinstance(s, DatasetSpec) or not s.shape for s in leaves):
            raise ValueError(f"Dataset.unbatch: every leaf of the elements needs a leading "
                             f"dim to split, the elements are "
                             f"{describe(input_dataset.element_spec)}{self._where}")

    def _split(self, element: Element) -> list[Element]:
        leaves, treedef = nest.flatten(element)
        dims = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
        if len(dims) != 1 or None in dims:
            raise ValueError(f"Dataset.unbatch: the leaves of an element have shapes "
                             f"{[leaf.shape for leaf in leaves]}, not one leading dim"
                             f"{self._where}")
        return [nest.unflatten(treedef, [leaf[i] for leaf in leaves])
                for i in range(dims.pop())]

    @property
    def element_spec(self) -> Any:
        leaves, treedef = nest.flatten(self._inputs[0].element_spec)
        return nest.unflatten(treedef, [row_spec(s) for s in leaves])

    def _stage(self) -> str:
        return "unbatch"

    def _cardinality(self) -> int:
        count = self._inputs[0]._cardinality()
        dims = {s.shape[0] for s in nest.flatten(self._inputs[0].element_spec)[0]}
        if count < 0 or len(dims) != 1 or None in dims:
            return count if count == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY
        return count * dims.pop()

    def _make(self, run: Run) -> sources.Source:
        return sources.Unbatched(self._inputs[0]._make(run), self._split,
                                 lambda: self._inputs[0].element_spec)


class _Padding:
    """How `padded_batch` and `bucket_by_sequence_length` pad the elements of a batch: to
    a shape per leaf (None dims: the batch's longest), with a scalar value per leaf."""

    def __init__(self, spec: Any, padded_shapes: Any, padding_values: Any, op: str,
                 where: str) -> None:
        self.op, self.where = op, where
        if _holds_datasets(spec):
            raise TypeError(f"Dataset.{op}: the elements are datasets ({describe(spec)}, a "
                            f"window's): batch them with flat_map first{where}")
        specs, treedef = nest.flatten(spec)
        if padded_shapes is None:  # every dim to the batch's longest
            self.shapes = [(None,) * len(s.shape) for s in specs]
        else:
            self.shapes = [_shape(p, "padded_shapes", where)
                           for p in _up_to(treedef, padded_shapes, "padded_shapes", where)]
        for leaf, shape in zip(specs, self.shapes, strict=True):
            if len(leaf.shape) != len(shape) or any(
                    want is not None and have is not None and have > want
                    for have, want in zip(leaf.shape, shape, strict=True)):
                raise ValueError(f"Dataset.{op}: elements of shape {_dims(leaf.shape)} do not "
                                 f"fit padded shape {_dims(shape)}{where}")
        if padding_values is None:
            values = [0] * len(specs)
        elif nest.flatten(padding_values)[1] == (None,):  # one value for every leaf
            values = [padding_values] * len(specs)
        else:
            values = _up_to(treedef, padding_values, "padding_values", where)
        self.values = []
        for value, leaf in zip(values, specs, strict=True):
            array = np.asarray(to_arrays(value))
            if array.shape != ():
                raise ValueError(f"Dataset.{op}: padding values are scalars, got shape "
                                 f"{array.shape}{where}")
            self.values.append(array.astype(leaf.dtype))

    def pad(self, elements: list[Element], unknown: int | None = None) -> Element:
        """The elements padded and stacked; `unknown` (if given) is the size of the dims
        the shapes leave unknown, else the batch's longest."""
        rows = [flat_leaves(e) for e in elements]
        treedef = nest.flatten(elements[0])[1]
        columns = []
        for column, shape, value in zip(zip(*rows, strict=True), self.shapes, self.values,
                                        strict=True):
            if any(a.ndim != len(shape) for a in column):
                raise ValueError(f"Dataset.{self.op}: elements of shapes "
                                 f"{[a.shape for a in column]} do not have padded_shapes' "
                                 f"rank {len(shape)}{self.where}")
            target = [want if want is not None else unknown if unknown is not None
                      else max(a.shape[d] for a in column) for d, want in enumerate(shape)]
            batch = np.full((len(column), *target), value, column[0].dtype)
            for i, a in enumerate(column):
                if any(have > want for have, want in zip(a.shape, target, strict=True)):
                    raise ValueError(f"Dataset.{self.op}: an element of shape {a.shape} is "
                                     f"larger than the padded shape {_dims(tuple(target))}"
                                     f"{self.where}")
                batch[(i, *(slice(0, n) for n in a.shape))] = a
            columns.append(batch)
        return nest.unflatten(treedef, columns)

    def spec(self, spec: Any, batch: int | None) -> Any:
        specs, treedef = nest.flatten(spec)
        return nest.unflatten(treedef, [
            TensorSpec((batch, *(d if want is None else want
                                 for d, want in zip(leaf.shape, shape, strict=True))),
                       leaf.dtype)
            for leaf, shape in zip(specs, self.shapes, strict=True)])

    def __str__(self) -> str:
        return f"{[_dims(s) for s in self.shapes]}, {[v.item() for v in self.values]}"


class _PaddedBatched(Dataset):
    def __init__(self, input_dataset: Dataset, size: int, padded_shapes: Any,
                 padding_values: Any, drop_remainder: bool) -> None:
        super().__init__((input_dataset,))
        self._size, self._drop = size, drop_remainder
        self._padding = _Padding(input_dataset.element_spec, padded_shapes, padding_values,
                                 "padded_batch", describe_location())

    @property
    def element_spec(self) -> Any:
        return self._padding.spec(self._inputs[0].element_spec,
                                  self._size if self._drop else None)

    def _stage(self) -> str:
        drop = ", drop_remainder=True" if self._drop else ""
        return f"padded_batch({self._size}, {self._padding}{drop})"

    def _cardinality(self) -> int:
        return _batches(self._inputs[0]._cardinality(), self._size, self._drop)

    def _make(self, run: Run) -> sources.Source:
        return sources.Batched(self._inputs[0]._make(run), self._size, self._drop,
                               self._padding.pad)


class _Bucketed(Dataset):
    """`bucket_by_sequence_length`: each element goes to the bucket of its length; a bucket
    holding its batch size of elements gives them as a batch (padded unless `no_padding`),
    and at the end of the input the buckets left give theirs, in bucket order."""

    def __init__(self, input_dataset: Dataset, length_func: Callable[..., Any],
                 boundaries: list[int], sizes: list[int], padding: _Padding | None,
                 to_boundary: bool, drop_remainder: bool) -> None:
        super().__init__((input_dataset,))
        self._length = _Mapped(input_dataset, length_func, 1)
        self._boundaries, self._sizes, self._padding = boundaries, sizes, padding
        self._to_boundary, self._drop = to_boundary, drop_remainder
        self._where = describe_location()

    def _bucket(self, element: Element) -> int:
        length = np.asarray(to_arrays(self._length._call(_user_view(element))))
        if length.shape != () or length.dtype.kind not in "iu":
            raise TypeError(f"Dataset.bucket_by_sequence_length: element_length_func must "
                            f"return an integer scalar, got {length.dtype.name}"
                            f"{list(length.shape)}{self._where}")
        bucket = int(np.searchsorted(self._boundaries, int(length), side="right"))
        if self._to_boundary and bucket == len(self._boundaries):
            raise InvalidArgumentError(
                f"Dataset.bucket_by_sequence_length: with pad_to_bucket_boundary=True, "
                f"elements must have length < max(bucket_boundaries) = "
                f"{self._boundaries[-1]}, got {int(length)}{self._where}")
        return bucket

    def _combine(self, bucket: int, elements: list[Element]) -> Element:
        if self._padding is None:
            return stack(elements)
        unknown = self._boundaries[bucket] - 1 if self._to_boundary else None
        return self._padding.pad(elements, unknown)

    @property
    def element_spec(self) -> Any:
        spec = self._inputs[0].element_spec
        if self._padding is None:
            leaves, treedef = nest.flatten(spec)
            return nest.unflatten(treedef, [TensorSpec((None, *s.shape), s.dtype)
                                            for s in leaves])
        return self._padding.spec(spec, None)

    def _stage(self) -> str:
        how = "no_padding=True" if self._padding is None else \
            f"{self._padding}{', pad_to_bucket_boundary=True' if self._to_boundary else ''}"
        drop = ", drop_remainder=True" if self._drop else ""
        return f"bucket_by_sequence_length({self._boundaries}, {self._sizes}, {how}{drop})"

    def _make(self, run: Run) -> sources.Source:
        return sources.Bucketed(self._inputs[0]._make(run), self._bucket, self._sizes,
                                self._combine, self._drop, lambda: self._inputs[0].element_spec)


class _Windowed(Dataset):
    def __init__(self, input_dataset: Dataset, size: int, shift: int, stride: int,
                 drop_remainder: bool) -> None:
        super().__init__((input_dataset,))
        self._size, self._shift, self._stride, self._drop = size, shift, stride, drop_remainder

    @property
    def element_spec(self) -> Any:
        leaves, treedef = nest.flatten(self._inputs[0].element_spec)
        return nest.unflatten(treedef, [DatasetSpec(spec) for spec in leaves])

    def _stage(self) -> str:
        drop = ", drop_remainder=True" if self._drop else ""
        return f"window({self._size}, shift={self._shift}, stride={self._stride}{drop})"

    def _cardinality(self) -> int:
        count = self._inputs[0]._cardinality()
        if count < 0:
            return count
        if self._drop:
            rest = count - ((self._size - 1) * self._stride + 1)
            return 0 if rest < 0 else rest // self._shift + 1
        return -(-count // self._shift)

    def _make(self, run: Run) -> sources.Source:
        return sources.Windowed(self._inputs[0]._make(run), self._size, self._shift,
                                self._stride, self._drop, lambda: self._inputs[0].element_spec)


class _Interleaved(Dataset):
    """`flat_map` and `interleave`: `map_func` runs eagerly on each element (as the user
    sees it) and returns a dataset; the datasets are made of the pipeline's run, their
    epoch path extended by the element's number."""

    def __init__(self, input_dataset: Dataset, map_func: Callable[..., Dataset],
                 cycle_length: int, block_length: int, name: str) -> None:
        super().__init__((input_dataset,))
        if not callable(map_func):
            raise TypeError(f"Dataset.{name}: map_func must be callable, got "
                            f"{type(map_func).__name__}{describe_location()}")
        self._func, self._cycle, self._block, self._name = map_func, cycle_length, \
            block_length, name
        self._seed = [secrets.randbits(64)]
        self._where = describe_location()
        self._spec: Any = None

    def _dataset_of(self, element: Any) -> Dataset:
        args = element if isinstance(element, tuple) else (element,)
        dataset = self._func(*args)
        if not isinstance(dataset, Dataset):
            raise TypeError(f"Dataset.{self._name}: map_func must return a Dataset, got "
                            f"{type(dataset).__name__}{self._where}")
        return dataset

    def _open(self, run: Run, element: Element, number: int, saved: dict[str, Any] | None
              ) -> tuple[sources.Source, Callable[[], dict[str, Any]]]:
        """The dataset of the `number`th input element, its source made for this run: the
        unseeded shuffles in it seeded from this stage's seed, the element's number and
        their place, so that the dataset opened again on restore draws the same orders."""
        dataset = self._dataset_of(_user_view(element))
        if saved is not None:
            _check_pipeline(saved["pipeline"], dataset._pipeline(), f"Dataset.{self._name}")
        base = run.seeds.get(id(self), self._seed)
        seeds = {id(s): s._seed if s._seed_given else [*base, number, k]
                 for k, s in enumerate(dataset._shuffles())}
        source = dataset._make(Run((*run.epoch, number), seeds))
        if saved is not None:
            source.restore(saved["source"])
        return source, lambda: {"pipeline": dataset._pipeline()}

    @property
    def element_spec(self) -> Any:
        if self._spec is None:
            self._spec = self._probed_spec()
        return self._spec

    def _probed_spec(self) -> Any:
        """The spec of the datasets `map_func` makes of stand-in elements of the input's
        spec, its unknown dims once 0 and once 1: a dim that differs is unknown (the
        datasets' specs may follow the element's dims). If `map_func` cannot take the
        stand-ins, the first element's spec."""
        specs, treedef = nest.flatten(self._inputs[0].element_spec)
        found = []
        for fill in (0, 1):
            probe = nest.unflatten(treedef, [
                Window([], s.element_spec) if isinstance(s, DatasetSpec)
                else np.zeros([fill if d is None else d for d in s.shape], s.dtype)
                for s in specs])
            try:
                found.append(self._dataset_of(_user_view(probe)).element_spec)
            except Exception:  # noqa: BLE001 - a function that needs real elements
                return _first_spec(self)
        return _union(*found)

    def _stage(self) -> str:
        if self._name == "flat_map":
            return "flat_map"
        return f"interleave(cycle_length={self._cycle}, block_length={self._block})"

    def _make(self, run: Run) -> sources.Source:
        return sources.Interleaved(
            self._inputs[0]._make(run),
            lambda element, number, saved: self._open(run, element, number, saved),
            self._cycle, self._block, lambda: self._inputs[0].element_spec)


class _Step:
    """A `scan` or `reduce` function, staged as `map`'s are, called on ``(state,
    element)``; the state it returns must keep the initial state's structure and dtypes."""

    def __init__(self, dataset: Dataset, func: Callable[..., Any], initial: Element,
                 name: str) -> None:
        self.mapped = _Mapped(dataset, func, 1)
        self.initial, self.name = initial, name
        self.where = describe_location()

    def checked(self, state: Element) -> Element:
        (want, want_def), (got, got_def) = nest.flatten(self.initial), nest.flatten(state)
        if want_def != got_def or any(a.dtype != b.dtype for a, b in zip(want, got, strict=True)):
            raise TypeError(f"Dataset.{self.name}: the function returned the state "
                            f"{describe(spec_of(state))}, the initial state is "
                            f"{describe(spec_of(self.initial))} (structure and dtypes must "
                            f"stay){self.where}")
        return state


class _Scanned(Dataset):
    def __init__(self, input_dataset: Dataset, initial_state: Any,
                 scan_func: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        super().__init__((input_dataset,))
        self._step = _Step(input_dataset, scan_func, to_arrays(initial_state), "scan")
        self._spec: Any = None

    def _advance(self, state: Element, element: Element) -> tuple[Element, Element]:
        result = self._step.mapped._apply((state, element))
        if not isinstance(result, tuple) or len(result) != 2:
            raise TypeError(f"Dataset.scan: scan_func must return (new_state, output), got "
                            f"{describe(spec_of(result))}{self._step.where}")
        return self._step.checked(result[0]), result[1]

    @property
    def element_spec(self) -> Any:
        if self._spec is None:
            args = (spec_of(self._step.initial), self._inputs[0].element_spec)
            try:
                concrete = self._step.mapped._staged.get_concrete_function(*args)
                self._spec = concrete.structure_outputs(concrete.outputs)[1]
            except (StagingError, TypeError, IndexError):
                self._spec = _first_spec(self)
        return self._spec

    def _stage(self) -> str:
        return f"scan from {describe(spec_of(self._step.initial))}"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        return sources.Scanned(self._inputs[0]._make(run), self._advance, self._step.initial,
                               lambda: spec_of(self._step.initial))


class _TakenWhile(Dataset):
    def __init__(self, input_dataset: Dataset, predicate: Callable[..., Any]) -> None:
        super().__init__((input_dataset,))
        self._mapped = _Mapped(input_dataset, predicate, 1)

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return "take_while"

    def _make(self, run: Run) -> sources.Source:
        return sources.TakenWhile(self._inputs[0]._make(run),
                                  lambda element: _truth(self._mapped, element, "take_while"))


class _Unique(Dataset):
    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__((input_dataset,))
        spec = input_dataset.element_spec
        if not isinstance(spec, TensorSpec) or spec.shape != () or \
                spec.dtype not in (np.int32, np.int64):
            raise TypeError(f"Dataset.unique: elements must be int32 or int64 scalars, got "
                            f"{describe(spec)}{describe_location()}")

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return "unique()"

    def _make(self, run: Run) -> sources.Source:
        return sources.Unique(self._inputs[0]._make(run), self.element_spec.dtype)


class _Cached(Dataset):
    def __init__(self, input_dataset: Dataset) -> None:
        super().__init__((input_dataset,))
        self._store: list[list[Element]] = []  # the record, once a pass completed it

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return "cache"

    def _cardinality(self) -> int:
        return self._inputs[0]._cardinality()

    def _make(self, run: Run) -> sources.Source:
        return sources.Cached(lambda: self._inputs[0]._make(run), self._store,
                              lambda: self.element_spec)


class _Sharded(Dataset):
    def __init__(self, input_dataset: Dataset, count: int, index: int) -> None:
        super().__init__((input_dataset,))
        self._count, self._index = count, index

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return f"shard({self._count}, {self._index})"

    def _cardinality(self) -> int:
        count = self._inputs[0]._cardinality()
        if count < 0:
            return count
        return count // self._count + (self._index < count % self._count)

    def _make(self, run: Run) -> sources.Source:
        return sources.Sharded(self._inputs[0]._make(run), self._count, self._index)


def _user_view(element: Element) -> Any:
    """An element as the user receives it: eager tensors, and a dataset for each leaf of a
    `window` element."""
    leaves, treedef = nest.flatten(to_tensors(element))
    return nest.unflatten(treedef, [_WindowRows(leaf) if isinstance(leaf, Window) else leaf
                                    for leaf in leaves])


def _holds_datasets(structure: Any) -> bool:
    """Whether a nest holds datasets or their specs (`window` elements)."""
    return any(isinstance(leaf, Dataset | DatasetSpec) for leaf in nest.flatten(structure)[0])


def _numpy_leaf(leaf: Any) -> Any:
    """A leaf as `as_numpy_iterator` yields it: an array (a ragged row's values), a
    scalar (NumPy's, or ``bytes`` for a string, as TensorFlow gives them), or a ragged or
    sparse tensor."""
    if isinstance(leaf, COMPOSITE_ARRAYS):
        return leaf.flat if getattr(leaf, "splits", None) == () else leaf.tensor()
    if isinstance(leaf, np.ndarray) and leaf.ndim == 0:
        return leaf[()]
    return leaf


def _holds_strings(structure: Any) -> bool:
    """Whether a nest holds string tensors or their specs, which a staged function cannot
    take (a function of them runs eagerly)."""
    return any(getattr(getattr(leaf, "dtype", None), "kind", None) == "O"
               for leaf in nest.flatten(structure, expand_composites=True)[0])


def _truth(mapped: _Mapped, element: Element, name: str) -> bool:
    """A predicate's verdict on an element (`filter`, `take_while`): a bool scalar."""
    result = np.asarray(to_arrays(mapped._call(_user_view(element))))
    if result.shape != () or result.dtype != np.bool_:
        raise TypeError(f"Dataset.{name}: the predicate must return a bool scalar, got "
                        f"{result.dtype.name}{list(result.shape)}")
    return bool(result)


def _batches(count: int, size: int, drop_remainder: bool) -> int:
    if count < 0:
        return count
    return count // size if drop_remainder else -(-count // size)


def _union(first: Any, second: Any) -> Any:
    """The spec both specs match: dims that differ unknown (the first's where the
    structures or dtypes differ)."""
    (a, treedef), (b, other) = nest.flatten(first), nest.flatten(second)
    if treedef != other:
        return first
    leaves = []
    for x, y in zip(a, b, strict=True):
        if isinstance(x, TensorSpec) and isinstance(y, TensorSpec) and x.dtype == y.dtype \
                and len(x.shape) == len(y.shape):
            x = TensorSpec(tuple(p if p == q else None
                                 for p, q in zip(x.shape, y.shape, strict=True)), x.dtype)
        leaves.append(x)
    return nest.unflatten(treedef, leaves)


def _up_to(treedef: nest.TreeDef, value: Any, name: str, where: str) -> list[Any]:
    """`value`'s parts at the places of the leaves of a structure (`treedef`): a nest of
    shapes (themselves lists) or of values given for each leaf of an element."""
    kind = treedef[0]
    if kind is None:
        return [value]
    if kind is dict:
        keys, children = treedef[1], treedef[2]
        if not isinstance(value, dict) or sorted(value, key=repr) != list(keys):
            raise ValueError(f"Dataset: {name} must have the elements' structure (keys "
                             f"{list(keys)}), got {value!r}{where}")
        return [part for key, child in zip(keys, children, strict=True)
                for part in _up_to(child, value[key], name, where)]
    children = treedef[1]
    if not isinstance(value, tuple | list) or len(value) != len(children):
        raise ValueError(f"Dataset: {name} must have the elements' structure ("
                         f"{len(children)} parts), got {value!r}{where}")
    return [part for child, item in zip(children, value, strict=True)
            for part in _up_to(child, item, name, where)]


def _shape(value: Any, name: str, where: str) -> tuple[int | None, ...]:
    """A shape given as TensorFlow code gives one: a list or tuple of dims (None or -1
    unknown), an int for a vector's length, or an `sf.TensorSpec`-like `.shape`."""
    dims = getattr(value, "shape", value)
    if isinstance(dims, int | np.integer):
        dims = (dims,)
    try:
        return tuple(None if d is None or int(d) == -1 else int(d) for d in dims)
    except (TypeError, ValueError):
        raise ValueError(f"Dataset: {name} holds {value!r}, not a shape{where}") from None


def _dims(shape: tuple[int | None, ...]) -> str:
    return f"[{','.join('?' if d is None else str(d) for d in shape)}]"


def _legacy_signature(output_types: Any, output_shapes: Any) -> Any:
    """`output_signature` from TensorFlow's older `from_generator` arguments: dtypes, and
    shapes in the same structure (without them, leaves of unknown dims, the rank taken
    from the first element)."""
    where = describe_location()
    if output_types is None:
        raise TypeError(f"Dataset.from_generator: output_shapes needs output_types{where}")
    dtypes, treedef = nest.flatten(output_types)
    if any(isinstance(d, TensorSpec) for d in dtypes):
        raise TypeError(f"Dataset.from_generator: output_types holds dtypes; give "
                        f"sf.TensorSpecs as output_signature={output_types!r}{where}")
    if output_shapes is None:
        return _Unshaped(nest.unflatten(treedef, dtypes))
    shapes = [_shape(s, "output_shapes", where)
              for s in _up_to(treedef, output_shapes, "output_shapes", where)]
    return nest.unflatten(treedef, [TensorSpec(shape, dtype)
                                    for shape, dtype in zip(shapes, dtypes, strict=True)])


class _Unshaped:
    """`from_generator`'s `output_types` without `output_shapes`: dtypes only."""

    def __init__(self, dtypes: Any) -> None:
        self.dtypes = dtypes


def _unknown_dims(spec: Any) -> Any:
    """`spec` (a nest of `TensorSpec`) with every dim unknown."""
    leaves, treedef = nest.flatten(spec)
    return nest.unflatten(treedef, [
        TensorSpec((None,) * len(leaf.shape), leaf.dtype) if isinstance(leaf, TensorSpec)
        else leaf for leaf in leaves])


def _first_spec(dataset: Dataset) -> Any:
    """The spec of a dataset's first element (for stages that declare none: a generator
    without a signature, a map function that cannot be staged). Elements whose computation
    raises are passed over, as iteration goes on past them, so that the spec does not
    depend on which elements fail; if every one does, the first error is raised."""
    # A pass of its own, as the first iterator's epoch (a shuffle's seed takes no negative
    # number, and any epoch gives the same spec).
    source = dataset._make(Run((0,), dataset._seeds()))
    first_error: Exception | None = None
    try:
        while True:
            try:
                return spec_of(source.next())
            except StopIteration:
                break
            except Exception as error:  # noqa: BLE001 - the next element may compute
                first_error = first_error or error
    finally:
        source.close()
    if first_error is not None:
        raise first_error
    raise ValueError("Dataset: an empty dataset without an output_signature has no "
                     "element spec")


def _count(value: int | None, name: str, op: str) -> int:
    if value is None:
        return 1
    if value == AUTOTUNE:
        return os.cpu_count() or 1
    if int(value) < 1:
        raise ValueError(f"Dataset.{op}: {name} must be >= 1 (or sf.data.AUTOTUNE), got {value}"
                         f"{describe_location()}")
    return int(value)


def _positive(value: int, name: str, op: str) -> int:
    if int(value) < 1:
        raise ValueError(f"Dataset.{op}: {name} must be >= 1, got {value}{describe_location()}")
    return int(value)


__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "Dataset", "DatasetSpec",
           "Iterator"]
