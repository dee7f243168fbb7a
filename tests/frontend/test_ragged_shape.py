"""`sf.shape` of a ragged tensor: a `DynamicRaggedShape` (TensorFlow's printing, indexing
and slicing), and ragged tensors made of one by `reshape`, `zeros`, `ones` and `fill`,
as TensorFlow's ragged tensor guide uses them."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.experimental import DynamicRaggedShape, RowPartition


def test_the_shape_of_a_ragged_tensor_prints_and_indexes_as_tensorflows():
    shape = sf.shape(sf.ragged.constant([[1], [2, 3, 4], [], [5, 6]]))
    assert repr(shape) == "<DynamicRaggedShape lengths=[4, (1, 3, 0, 2)] num_row_partitions=1>"
    assert shape.rank == 2 and shape.num_row_partitions == 1
    assert int(shape[0]) == 4 and shape[0].dtype == sf.int32
    with pytest.raises(ValueError, match="Index 1 is not uniform"):
        shape[1]
    assert repr(shape[:1]) == "<DynamicRaggedShape lengths=[4] num_row_partitions=0>"
    uniform = sf.shape(sf.RaggedTensor.from_uniform_row_length([1, 2, 3, 4, 5, 6], 3))
    assert repr(uniform) == "<DynamicRaggedShape lengths=[2, 3] num_row_partitions=1>"
    assert int(uniform[1]) == 3
    np.testing.assert_array_equal(sf.shape(sf.zeros((2, 3))).numpy(), [2, 3])  # dense


def test_shapes_from_partitions_and_from_lengths():
    made = DynamicRaggedShape(row_partitions=[RowPartition.from_row_lengths([5, 3, 2])],
                              inner_shape=[10, 8])
    assert repr(made) == "<DynamicRaggedShape lengths=[3, (5, 3, 2), 8] num_row_partitions=1>"
    assert made.inner_shape.numpy().tolist() == [10, 8]
    lengths = DynamicRaggedShape.from_lengths([4, (2, 1, 0, 8), 12])
    assert repr(lengths) == ("<DynamicRaggedShape lengths=[4, (2, 1, 0, 8), 12] "
                             "num_row_partitions=1>")
    nested = DynamicRaggedShape.from_lengths([2, 3, (1, 2, 0, 1, 1, 1), 4])
    assert nested.num_row_partitions == 2 and nested.rank == 4
    with pytest.raises(ValueError, match="3 row lengths for 4 rows"):
        DynamicRaggedShape.from_lengths([4, (1, 2, 3)])


def test_ragged_tensors_of_a_shape():
    shape = sf.shape(sf.ragged.constant([[1], [2, 3, 4], [], [5, 6]]))
    x = sf.constant([["a", "b"], ["c", "d"], ["e", "f"]])
    assert sf.reshape(x, shape).to_list() == [[b"a"], [b"b", b"c", b"d"], [], [b"e", b"f"]]
    assert sf.zeros(shape).to_list() == [[0.0], [0.0, 0.0, 0.0], [], [0.0, 0.0]]
    assert sf.ones(shape, sf.int32).to_list() == [[1], [1, 1, 1], [], [1, 1]]
    assert sf.fill(shape, "x").to_list() == [[b"x"], [b"x"] * 3, [], [b"x"] * 2]

    @sf.function
    def cut(rt, values):
        return sf.reshape(values, sf.shape(rt))

    rt = sf.ragged.constant([[1.0], [2.0, 3.0]])
    assert cut(rt, sf.constant([7, 8, 9])).to_list() == [[7], [8, 9]]

    @sf.function
    def zeros_like_it(rt):
        return sf.zeros(sf.shape(rt))

    with pytest.raises(ValueError, match="map_flat_values"):
        zeros_like_it(rt)
