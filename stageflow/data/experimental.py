"""`sf.data.experimental`: TensorFlow's `tf.data.experimental` forms of `Dataset` methods.

TensorFlow code written before these transformations became `Dataset` methods passes them
to `Dataset.apply` (``ds.apply(tf.data.experimental.scan(0, f))``) or calls them on a
dataset (``tf.data.experimental.cardinality(ds)``); each name here is that form of the
method of the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.core.exports import public_dir as _public_dir
from stageflow.data.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
)
from stageflow.data.options import AutoShardPolicy
from stageflow.data.text import CsvDataset

Transformation = Callable[[Dataset], Dataset]


def cardinality(dataset: Dataset) -> Any:
    """``dataset.cardinality()``: the number of elements, an int64 scalar tensor
    (`INFINITE_CARDINALITY`, `UNKNOWN_CARDINALITY` where there is no count).

    >>> int(sf.data.experimental.cardinality(sf.data.Dataset.range(10).batch(4)))
    3
    """
    return dataset.cardinality()


def get_single_element(dataset: Dataset) -> Any:
    """``dataset.get_single_element()``: the dataset's one element.

    >>> sf.data.experimental.get_single_element(sf.data.Dataset.range(7).skip(6)).numpy()
    array(6)
    """
    return dataset.get_single_element()


def scan(initial_state: Any, scan_func: Callable[[Any, Any], tuple[Any, Any]]
         ) -> Transformation:
    """For `Dataset.apply`: ``dataset.scan(initial_state, scan_func)``.

    >>> ds = sf.data.Dataset.range(5).apply(
    ...     sf.data.experimental.scan(np.int64(0), lambda s, x: (s + x, s + x)))
    >>> [int(x) for x in ds]
    [0, 1, 3, 6, 10]
    """
    return lambda dataset: dataset.scan(initial_state, scan_func)


def dense_to_ragged_batch(batch_size: int, drop_remainder: bool = False,
                          row_splits_dtype: Any = None) -> Transformation:
    """For `Dataset.apply`: ``dataset.ragged_batch(batch_size, drop_remainder)``.

    >>> ds = sf.data.Dataset.from_generator(
    ...     lambda: ([0, 1], [0]), output_signature=sf.TensorSpec([None], sf.int32))
    >>> for rt in ds.apply(sf.data.experimental.dense_to_ragged_batch(2)):
    ...     print(rt)
    <sf.RaggedTensor [[0, 1], [0]]>
    """
    return lambda dataset: dataset.ragged_batch(batch_size, drop_remainder)


def unbatch() -> Transformation:
    """For `Dataset.apply`: ``dataset.unbatch()``.

    >>> ds = sf.data.Dataset.range(5).batch(2).apply(sf.data.experimental.unbatch())
    >>> [int(x) for x in ds]
    [0, 1, 2, 3, 4]
    """
    return lambda dataset: dataset.unbatch()


def unique() -> Transformation:
    """For `Dataset.apply`: ``dataset.unique()``.

    >>> ds = sf.data.Dataset.from_tensor_slices([2, 2, 1, 2]).apply(sf.data.experimental.unique())
    >>> [int(x) for x in ds]
    [2, 1]
    """
    return lambda dataset: dataset.unique()


def take_while(predicate: Callable[..., Any]) -> Transformation:
    """For `Dataset.apply`: ``dataset.take_while(predicate)``.

    >>> ds = sf.data.Dataset.range(9).apply(sf.data.experimental.take_while(lambda x: x < 3))
    >>> [int(x) for x in ds]
    [0, 1, 2]
    """
    return lambda dataset: dataset.take_while(predicate)


def bucket_by_sequence_length(
        element_length_func: Callable[..., Any], bucket_boundaries: list[int],
        bucket_batch_sizes: list[int], padded_shapes: Any = None, padding_values: Any = None,
        pad_to_bucket_boundary: bool = False, no_padding: bool = False,
        drop_remainder: bool = False) -> Transformation:
    """For `Dataset.apply`: ``dataset.bucket_by_sequence_length(...)`` with these arguments.

    >>> ds = sf.data.Dataset.from_generator(
    ...     lambda: [[1], [2, 2], [3, 3, 3], [4]], sf.int32, output_shapes=[None])
    >>> ds = ds.apply(sf.data.experimental.bucket_by_sequence_length(
    ...     lambda x: sf.shape(x)[0], bucket_boundaries=[2], bucket_batch_sizes=[2, 2]))
    >>> [b.tolist() for b in ds.as_numpy_iterator()]
    [[[2, 2, 0], [3, 3, 3]], [[1], [4]]]
    """
    return lambda dataset: dataset.bucket_by_sequence_length(
        element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes,
        padding_values, pad_to_bucket_boundary, no_padding, drop_remainder)


__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "AutoShardPolicy",
           "CsvDataset",
           "bucket_by_sequence_length", "dense_to_ragged_batch",
           "cardinality", "get_single_element", "scan", "take_while", "unbatch", "unique"]
__dir__ = _public_dir(globals())
