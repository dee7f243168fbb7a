"""`sf.data.Dataset`: input pipelines of sources and transformations, as in `tf.data`.

A dataset is a description: each `iter(dataset)` makes a fresh pipeline of `sources`, one
per stage, and is one epoch (shuffles draw a new order per epoch unless seeded the same).
Elements stay NumPy arrays inside the pipeline and become eager tensors where they leave it,
so the stages cost no dispatch. A `map` function is staged with `sf.function` (traced once
per element signature, run compiled), unless it cannot be traced, when it runs eagerly.

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
from stageflow.core.errors import OutOfRangeError, StagingError
from stageflow.data import sources
from stageflow.data.elements import (
    Element,
    describe,
    flat_leaves,
    spec_of,
    to_arrays,
    to_tensors,
)
from stageflow.frontend.ops.control import numpy_function
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tracer import GraphTrace
from stageflow.staging.function import function

AUTOTUNE = -1  # num_parallel_calls / buffer_size: as many as the machine has cores


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
    def from_generator(generator: Callable[..., Iterable], output_signature: Any = None,
                       args: tuple = ()) -> Dataset:
        """The elements `generator(*args)` yields (a callable, so each epoch restarts it).
        `output_signature` (a nest of `sf.TensorSpec`) fixes dtypes and is the element spec;
        without it the first element gives them."""
        return _Generated(generator, output_signature, tuple(args))

    @staticmethod
    def range(*args: int) -> Dataset:
        """``range(start, stop, step)`` as int64 scalars."""
        return _Slices(np.arange(*args, dtype=np.int64), "range")

    # -- transformations --------------------------------------------------------------------

    def map(self, map_func: Callable[..., Any], num_parallel_calls: int | None = None,
            deterministic: bool = True) -> Dataset:
        """`map_func` of each element (a tuple element is passed as separate arguments).
        It is staged with `sf.function`; ``num_parallel_calls`` runs that many calls at
        once (`AUTOTUNE`: one per core), results in input order."""
        del deterministic  # results always come in input order
        return _Mapped(self, map_func, _count(num_parallel_calls, "num_parallel_calls"))

    def shuffle(self, buffer_size: int, seed: int | None = None,
                reshuffle_each_iteration: bool = True) -> Dataset:
        """Elements in random order, drawn from a buffer of `buffer_size` (TensorFlow's
        semantics: a buffer as large as the dataset is a uniform shuffle)."""
        return _Shuffled(self, _count(buffer_size, "buffer_size"), seed,
                         reshuffle_each_iteration)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """`batch_size` consecutive elements stacked along a new leading axis; the last
        batch is shorter unless `drop_remainder`."""
        return _Batched(self, _positive(batch_size, "batch_size"), bool(drop_remainder))

    def repeat(self, count: int | None = None) -> Dataset:
        """The dataset `count` times (None or -1: forever), reshuffled each time."""
        return _Repeated(self, None if count is None or count < 0 else int(count))

    def take(self, count: int) -> Dataset:
        """The first `count` elements (-1: all)."""
        return _Taken(self, None if count < 0 else int(count), 0)

    def skip(self, count: int) -> Dataset:
        """All but the first `count` elements."""
        return _Taken(self, None, int(count))

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

    def prefetch(self, buffer_size: int = AUTOTUNE) -> Dataset:
        """Elements prepared ahead by a background thread, up to `buffer_size` of them."""
        return _Prefetched(self, _count(buffer_size, "buffer_size"))

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
        """The elements as nests of NumPy arrays."""
        source = self._make(Run((next(self._iterators),), self._seeds()))
        try:
            while True:
                try:
                    yield source.next()
                except StopIteration:
                    return
        finally:
            source.close()

    @property
    def element_spec(self) -> Any:
        """The nest of `sf.TensorSpec` each element matches (None for a dim that varies)."""
        raise NotImplementedError

    def _make(self, run: Run) -> sources.Source:
        raise NotImplementedError

    def _shuffles(self) -> list[_Shuffled]:
        """The shuffles of the pipeline, depth first (the order their seeds are saved in)."""
        found = [s for d in self._inputs for s in d._shuffles()]
        return [*found, self] if isinstance(self, _Shuffled) else found

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
        return f"<sf.data.{type(self).__name__.lstrip('_')}Dataset element_spec=" \
               f"{self.element_spec!r}>"


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
        return to_tensors(self._source.next())

    def _staged_next(self) -> Any:
        leaves, treedef = nest.flatten(self.element_spec)

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
                raise ValueError(f"the saved pipeline has {len(saved['seeds'])} shuffles, "
                                 f"this one {len(shuffles)}")
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
    leaves, treedef = nest.flatten(spec)
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
        return nest.unflatten(self._treedef, [TensorSpec(c.shape[1:], c.dtype)
                                              for c in self._columns])

    def _stage(self) -> str:
        return self._name

    def _make(self, run: Run) -> sources.Source:
        treedef = self._treedef
        return sources.Slices(self._columns, lambda rows: nest.unflatten(treedef, rows),
                              self._count)


class _Generated(Dataset):
    def __init__(self, generator: Callable[..., Iterable], signature: Any, args: tuple) -> None:
        super().__init__()
        if not callable(generator):
            raise TypeError("Dataset.from_generator: pass the generator function (called "
                            f"again for each epoch), not a {type(generator).__name__}")
        self._generator, self._signature, self._args = generator, signature, args
        self._spec = signature

    def _convert(self, value: Any) -> Element:
        if self._signature is None:
            return to_arrays(value)
        specs, treedef = nest.flatten(self._signature)
        leaves, given = nest.flatten(value)
        if given != treedef:
            raise ValueError(f"Dataset.from_generator: the generator yielded {value!r}, "
                             f"output_signature is {self._signature!r}")
        arrays = []
        for leaf, spec in zip(leaves, specs, strict=True):
            array = np.asarray(leaf._value if hasattr(leaf, "_value") else leaf, spec.dtype)
            if not spec.is_compatible_with(array.shape, array.dtype):
                raise ValueError(f"Dataset.from_generator: the generator yielded shape "
                                 f"{array.shape} where output_signature says {spec}")
            arrays.append(array)
        return nest.unflatten(treedef, arrays)

    @property
    def element_spec(self) -> Any:
        if self._spec is None:
            self._spec = _first_spec(self)
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
        self._staged = function(map_func)
        self._eager = False
        self._eager_lock = threading.Lock()
        self._first_calls = threading.Lock()
        self._signatures: set[tuple] = set()  # those the staged function was called with
        self._parallel = parallel
        self._spec: Any = None

    def _call(self, element: Any) -> Any:
        args = element if isinstance(element, tuple) else (element,)
        if not self._eager:
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
        return to_arrays(self._call(to_tensors(element)))

    @property
    def element_spec(self) -> Any:
        if self._spec is None:
            spec = self._inputs[0].element_spec
            args = spec if isinstance(spec, tuple) else (spec,)
            try:
                concrete = self._staged.get_concrete_function(*args)
                self._spec = concrete.structure_outputs(concrete.outputs)
            except StagingError:
                self._spec = _first_spec(self)
        return self._spec

    def _stage(self) -> str:
        return "map"

    def _make(self, run: Run) -> sources.Source:
        return sources.Mapped(self._inputs[0]._make(run), self._apply, self._parallel,
                              lambda: self.element_spec)


class _Filtered(Dataset):
    def __init__(self, input_dataset: Dataset, predicate: Callable[..., Any]) -> None:
        super().__init__((input_dataset,))
        self._mapped = _Mapped(input_dataset, predicate, 1)  # its staging, reused

    def _keep(self, element: Element) -> bool:
        result = np.asarray(to_arrays(self._mapped._call(to_tensors(element))))
        if result.shape != () or result.dtype != np.bool_:
            raise TypeError(f"Dataset.filter: the predicate must return a bool scalar, got "
                            f"{result.dtype.name}{list(result.shape)}")
        return bool(result)

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

    def _make(self, run: Run) -> sources.Source:
        return sources.Counted(self._start)


class _Zipped(Dataset):
    @property
    def element_spec(self) -> Any:
        return tuple(d.element_spec for d in self._inputs)

    def _stage(self) -> str:
        return f"zip of {len(self._inputs)}"

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

    def _make(self, run: Run) -> sources.Source:
        return sources.Concatenated(*(d._make(run) for d in self._inputs))


class _Shuffled(Dataset):
    def __init__(self, input_dataset: Dataset, size: int, seed: int | None,
                 reshuffle: bool) -> None:
        super().__init__((input_dataset,))
        self._size = size
        # A seed per dataset: given, or drawn now (and saved with each iterator's state).
        self._seed = [int(seed)] if seed is not None else [secrets.randbits(64)]
        self._reshuffle = reshuffle

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        fixed = "" if self._reshuffle else ", reshuffle_each_iteration=False"
        return f"shuffle({self._size}{fixed})"

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
        return nest.unflatten(treedef, [TensorSpec((dim, *s.shape), s.dtype) for s in leaves])

    def _stage(self) -> str:
        return f"batch({self._size}{', drop_remainder=True' if self._drop else ''})"

    def _make(self, run: Run) -> sources.Source:
        return sources.Batched(self._inputs[0]._make(run), self._size, self._drop)


class _Repeated(Dataset):
    def __init__(self, input_dataset: Dataset, count: int | None) -> None:
        super().__init__((input_dataset,))
        self._count = count

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def _stage(self) -> str:
        return f"repeat({'' if self._count is None else self._count})"

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

    def _make(self, run: Run) -> sources.Source:
        return sources.Prefetched(self._inputs[0]._make(run), self._size,
                                  lambda: self.element_spec)


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


def _count(value: int | None, name: str) -> int:
    if value is None:
        return 1
    if value == AUTOTUNE:
        return os.cpu_count() or 1
    return _positive(value, name)


def _positive(value: int, name: str) -> int:
    if int(value) < 1:
        raise ValueError(f"Dataset: {name} must be >= 1 (or sf.data.AUTOTUNE), got {value}")
    return int(value)


__all__ = ["AUTOTUNE", "Dataset", "Iterator"]
