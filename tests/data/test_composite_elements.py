"""Datasets of ragged and sparse elements, and `ragged_batch`, as in `tf.data`."""

import numpy as np
import pytest

import stageflow as sf


def _features():
    colors = sf.ragged.constant([["red", "blue"], ["orange"], ["black", "yellow"], ["green"]])
    lengths = sf.ragged.constant([[7], [], [1, 3], [3, 5, 2]], dtype=sf.int64)
    return sf.data.Dataset.from_tensor_slices({"colors": colors, "lengths": lengths})


def test_slices_of_a_ragged_tensor_are_its_rows_and_batch_to_ragged():
    ds = _features()
    assert ds.element_spec["lengths"].ragged_rank == 0
    rows = [e["lengths"].numpy().tolist() for e in ds]
    assert rows == [[7], [], [1, 3], [3, 5, 2]]
    batches = list(ds.batch(2))
    assert isinstance(batches[0]["colors"], sf.RaggedTensor)
    assert batches[0]["colors"].to_list() == [[b"red", b"blue"], [b"orange"]]
    assert batches[1]["lengths"].to_list() == [[1, 3], [3, 5, 2]]
    assert ds.batch(2).element_spec["lengths"].ragged_rank == 1
    again = [e["colors"].numpy().tolist() for e in ds.batch(2).unbatch()]
    assert again == [[b"red", b"blue"], [b"orange"], [b"black", b"yellow"], [b"green"]]


def test_map_of_ragged_rows_returns_ragged_tensors():
    def transform(features):
        return {"mean": sf.reduce_sum(features["lengths"]),
                "ranges": sf.ragged.range(features["lengths"])}

    out = list(_features().map(transform))
    assert [e["ranges"].to_list() for e in out] == [
        [[0, 1, 2, 3, 4, 5, 6]], [], [[0], [0, 1, 2]], [[0, 1, 2], [0, 1, 2, 3, 4], [0, 1]]]


def test_ragged_rank_two_slices_are_ragged():
    rt = sf.ragged.constant([[[1, 2], [3]], [[4]], [[], [5, 6]]])
    ds = sf.data.Dataset.from_tensor_slices(rt)
    rows = list(ds)
    assert isinstance(rows[0], sf.RaggedTensor)
    assert [r.to_list() for r in rows] == [[[1, 2], [3]], [[4]], [[], [5, 6]]]
    assert [b.to_list() for b in ds.batch(2)] == [[[[1, 2], [3]], [[4]]], [[[], [5, 6]]]]


def test_sparse_elements_slice_batch_unbatch_and_map():
    st = sf.SparseTensor([[0, 0], [0, 1], [0, 2], [4, 3], [5, 0], [5, 1]], [1] * 6, [6, 4])
    ds = sf.data.Dataset.from_tensor_slices(st)
    assert list(ds.element_spec.shape) == [4]
    first = next(iter(ds))
    assert first.indices.numpy().tolist() == [[0], [1], [2]]
    batches = list(ds.batch(2))
    assert batches[2].indices.numpy().tolist() == [[0, 3], [1, 0], [1, 1]]
    assert batches[2].dense_shape.numpy().tolist() == [2, 4]
    assert len(list(ds.batch(2).unbatch())) == 6
    doubled = [sf.sparse.to_dense(x).numpy().tolist() for x in ds.map(lambda x: x * 2)]
    assert doubled[5] == [2, 2, 0, 0]
    single = sf.data.Dataset.from_tensors(sf.SparseTensor([[0, 0], [1, 2]], [1, 2], [3, 4]))
    assert list(single.element_spec.shape) == [3, 4]


@pytest.mark.parametrize("how", ["method", "experimental"])
def test_ragged_batch_of_dense_elements_of_varying_length(how):
    ds = sf.data.Dataset.from_generator(lambda: (list(range(n)) for n in [1, 5, 3, 2, 8]),
                                        output_signature=sf.TensorSpec([None], sf.int32))
    batched = (ds.ragged_batch(2) if how == "method"
               else ds.apply(sf.data.experimental.dense_to_ragged_batch(2)))
    assert [b.to_list() for b in batched] == [[[0], [0, 1, 2, 3, 4]], [[0, 1, 2], [0, 1]],
                                              [[0, 1, 2, 3, 4, 5, 6, 7]]]
    assert batched.element_spec.ragged_rank == 1
    values = [x.tolist() for x in batched.unbatch().as_numpy_iterator()]
    assert values[1] == [0, 1, 2, 3, 4]


def test_ragged_batch_keeps_known_inner_dims_uniform():
    ds = sf.data.Dataset.from_generator(lambda: (np.full((n, 2), n) for n in [1, 2]),
                                        output_signature=sf.TensorSpec([None, 2], sf.int64))
    (batch,) = list(ds.ragged_batch(2))
    assert batch.shape == (2, None, 2)
    assert batch.to_list() == [[[1, 1]], [[2, 2], [2, 2]]]


def test_a_map_that_cannot_be_staged_makes_elements_of_any_dims():
    """TensorFlow's ragged guide: ``map(sf.range)`` (the length is each element's value,
    which a trace does not know) runs eagerly, its vectors' dims unknown, and
    `dense_to_ragged_batch` batches them into ragged rows."""
    ranges = sf.data.Dataset.from_tensor_slices([1, 5, 3, 2, 8]).map(sf.range)
    with pytest.warns(UserWarning, match="runs eagerly, it cannot be staged"):
        assert ranges.element_spec == sf.TensorSpec((None,), sf.int32)
    batches = ranges.apply(sf.data.experimental.dense_to_ragged_batch(2))
    assert [b.to_list() for b in batches] == [[[0], [0, 1, 2, 3, 4]], [[0, 1, 2], [0, 1]],
                                              [list(range(8))]]
