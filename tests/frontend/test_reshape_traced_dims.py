"""`sf.reshape` with dims known only when a staged function runs, as TensorFlow's
``tf.reshape(x, [tf.shape(x)[0], 2, 2])``: a list mixing ints and int scalar tensors, or a
shape tensor built with `sf.stack`, works eagerly, interpreted and compiled with the same
numbers; a traced dim that disagrees with the element count fails when the function runs;
None in a shape is a TypeError naming the op, the fix and the line."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

UNKNOWN_BATCH = [sf.TensorSpec([None, 4])]


def _runs(fn):
    """The function eagerly, staged and interpreted, and staged and compiled."""
    return [fn, sf.function(fn, input_signature=UNKNOWN_BATCH, jit=False),
            sf.function(fn, input_signature=UNKNOWN_BATCH)]


@pytest.mark.parametrize("build", [
    lambda y: sf.reshape(y, [sf.shape(y)[0], 2, 2]),
    lambda y: sf.reshape(y, sf.stack([sf.shape(y)[0], 2, 2])),
    lambda y: sf.reshape(y, [2, sf.shape(y)[0], 2]),
    lambda y: sf.reshape(y, [sf.shape(y, out_type=sf.int64)[0] * 2, 2]),
    lambda y: sf.reshape(y, sf.stack([sf.constant(2) * 2, 2, -1])),
], ids=["list", "stack", "middle", "int64_arithmetic", "constant_tensor_dims"])
def test_traced_dims_in_a_shape_give_eagers_numbers(build):
    x = sf.constant(np.arange(16, dtype=np.float32).reshape(4, 4))
    expected = build(x).numpy()
    for run in _runs(build)[1:]:
        out = run(x)
        np.testing.assert_array_equal(out.numpy(), expected)


def test_the_traced_dim_is_unknown_in_the_traced_shape_and_the_others_known():
    seen = []

    @sf.function(input_signature=UNKNOWN_BATCH)
    def split_rows(y):
        out = sf.reshape(y, [sf.shape(y)[0], 2, 2])
        seen.append(out.shape)
        return out

    assert split_rows(sf.ones([3, 4])).shape == (3, 2, 2)
    assert seen == [(None, 2, 2)]


def test_the_traced_dim_is_checked_when_the_function_runs():
    def wrong(y):
        return sf.reshape(y, [sf.shape(y)[0] + 1, 2, 2])  # 5 rows of 4 from 16 elements

    x = sf.ones([4, 4])
    for run in _runs(wrong)[1:]:
        with pytest.raises(sf.errors.InvalidArgumentError,
                           match="reshape: dim 0 of the new shape disagrees with the element "
                                 "count"):
            run(x)
    with pytest.raises(ValueError, match="reshape"):
        wrong(x)  # eagerly the dim is an int: the shape rule's own error


def test_two_dims_to_infer_are_refused_naming_them():
    @sf.function(input_signature=[sf.TensorSpec([None, None])])
    def both(y):
        return sf.reshape(y, [sf.shape(y)[0], sf.shape(y)[1]])

    with pytest.raises(TypeError, match=r"reshape: dims \[0, 1\] of the new shape are -1 or "
                                        r"known only at run time.*\n  at .*"
                                        r"test_reshape_traced_dims.py:\d+"):
        both(sf.ones([2, 3]))


def test_a_non_integer_traced_dim_is_refused():
    @sf.function(input_signature=UNKNOWN_BATCH)
    def floats(y):
        return sf.reshape(y, [sf.reduce_sum(y), 4])

    with pytest.raises(TypeError, match="dim 0 of the new shape is a float32 tensor of "
                                        r"shape \(\), not an integer scalar"):
        floats(sf.ones([1, 4]))


@pytest.mark.parametrize("staged", [False, True])
def test_none_in_a_shape_names_the_op_the_fix_and_the_line(staged):
    def reshape_with_none(y):
        return sf.reshape(y, [y.shape[0], 2, 2])

    run = sf.function(reshape_with_none, input_signature=UNKNOWN_BATCH) if staged else None
    x = sf.ones([4, 4])
    with pytest.raises(TypeError, match=r"reshape: the new shape \[None, 2, 2\] holds None, "
                                        r"not an int \(-1 alone infers one dim; "
                                        r"sf.shape\(x\)\[i\] gives a dim known at run time\)"
                                        r"\n  at .*test_reshape_traced_dims.py:\d+"):
        if staged:
            run(x)
        else:
            sf.reshape(x, [None, 2, 2])


def test_unknown_dims_read_none_from_x_shape():
    @sf.function(input_signature=UNKNOWN_BATCH)
    def first_dim(y):
        assert y.shape[0] is None and y.shape[1] == 4
        return sf.reshape(y, [-1, 2, 2])

    assert first_dim(sf.ones([3, 4])).shape == (3, 2, 2)
