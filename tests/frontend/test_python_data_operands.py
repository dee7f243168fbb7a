"""Python numbers and lists beside a tensor take the tensor's dtype, as TensorFlow converts
them (`convert_to_tensor(value, dtype=tensor.dtype)`, and for ops taking a list of one
dtype, the first tensor's dtype); a conversion that would lose a fraction is a TypeError,
as TensorFlow's "Cannot convert 1.5 to EagerTensor of dtype int32". One rule for all ops:
the same calls give the same dtypes eagerly and staged."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def _float32(t, expected):
    assert t.dtype == sf.float32
    np.testing.assert_array_equal(t.numpy(), np.asarray(expected, np.float32))


def test_variable_updates_take_the_variable_dtype():
    v = sf.Variable([0.5, 0.5, 0.5])
    v.assign_add([1, 1, 1])
    _float32(v.read_value(), [1.5, 1.5, 1.5])
    v.assign_sub([1, 0, 1])
    _float32(v.read_value(), [0.5, 1.5, 0.5])


def test_binary_ops_convert_lists_with_the_tensor_dtype():
    x = sf.constant([1.0, 2.0])
    _float32(sf.add(x, [1, 2]), [2, 4])
    _float32(sf.add([1, 2], x), [2, 4])
    _float32(x + [1, 2], [2, 4])
    _float32(sf.maximum(0.0, [1, -1]), [1, 0])  # no tensor: the first value's dtype
    _float32(sf.where(x > 1.5, x, [0, 0]), [0, 2])


@pytest.mark.parametrize("build", [
    lambda x: sf.concat([x, [1, 2]], 0),
    lambda x: sf.concat([[1, 2], x], 0),
    lambda x: sf.stack([x, [1, 2]])[::-1][::-1],
    lambda x: sf.einsum("i,i->i", x, [1, 1]),
    lambda x: sf.nn.bias_add(sf.reshape(x, (1, 2)), [1, 2]),
    lambda x: sf.nn.conv2d(sf.reshape(x, (1, 1, 2, 1)), [[[[2]]]], 1, "VALID"),
    lambda x: sf.nn.depthwise_conv2d(sf.reshape(x, (1, 1, 2, 1)), [[[[2]]]], [1, 1, 1, 1],
                                     "VALID"),
    lambda x: sf.nn.conv1d(sf.reshape(x, (1, 2, 1)), [[[3]]], 1, "VALID"),
    lambda x: sf.linalg.solve(sf.eye(2) * x, [[2], [8]]),
    lambda x: sf.linalg.triangular_solve(sf.eye(2) * x, [[2], [8]]),
], ids=["concat", "concat_first_list", "stack", "einsum", "bias_add", "conv2d",
        "depthwise_conv2d", "conv1d", "solve", "triangular_solve"])
def test_ops_taking_several_operands_give_lists_the_first_tensor_dtype(build):
    x = sf.constant([1.0, 2.0])
    eager = build(x)
    assert eager.dtype == sf.float32
    staged = sf.function(build)(x)
    assert staged.dtype == sf.float32
    np.testing.assert_array_equal(staged.numpy(), eager.numpy())


def test_lists_first_then_tensor_concatenate_in_order():
    out = sf.concat([[7, 8], sf.constant([1.0, 2.0])], 0)
    _float32(out, [7, 8, 1, 2])


def test_fractions_beside_integer_tensors_are_refused_as_in_tensorflow():
    ints = sf.constant([1, 2])
    with pytest.raises(TypeError, match="Python float 1.5 with a int32 tensor"):
        ints + 1.5
    with pytest.raises(TypeError, match="list holding the Python float 1.5"):
        sf.add(ints, [1.5, 2])
    with pytest.raises(TypeError, match="list holding the Python float 0.5"):
        sf.concat([ints, [0.5, 1]], 0)
    with pytest.raises(TypeError, match="Python float"):
        sf.maximum([1, 2], 0.5)  # no tensor: [1, 2] is int32, then 0.5 beside it


def test_integer_tensors_take_python_ints_and_keep_their_dtype():
    out = sf.concat([sf.constant([1, 2], sf.int64), [3]], 0)
    assert out.dtype == sf.int64 and out.numpy().tolist() == [1, 2, 3]
