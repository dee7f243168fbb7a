"""`sf.TensorShape`, against `tf.TensorShape`'s documented behaviour, the shape of unknown
rank (``TensorShape(None)``) included."""

from __future__ import annotations

import copy
import pickle

import pytest

import stageflow as sf


def test_a_shape_of_unknown_rank_answers_as_tensorflow_s():
    shape = sf.TensorShape(None)
    assert isinstance(shape, sf.TensorShape)
    assert shape.rank is None and shape.ndims is None and shape.dims is None
    assert not shape.is_fully_defined() and shape.num_elements() is None
    assert repr(shape) == str(shape) == "<unknown>"
    with pytest.raises(ValueError, match="as_list.. is not defined on an unknown TensorShape"):
        shape.as_list()
    with pytest.raises(ValueError, match="Cannot take the length of shape with unknown rank"):
        len(shape)
    with pytest.raises(ValueError, match="Cannot iterate over a shape with unknown rank"):
        tuple(shape)
    with pytest.raises(ValueError, match="Shape <unknown> is not fully defined"):
        shape.assert_is_fully_defined()
    assert shape[0] is None and shape[1:] == shape  # TensorFlow: an unknown dim, a shape


def test_unknown_rank_is_not_the_scalar_shape():
    """It is an empty tuple underneath; it must never pass for ``()``."""
    unknown = sf.TensorShape(None)
    assert unknown == sf.TensorShape(None) and hash(unknown) == hash(sf.TensorShape(None))
    assert unknown != () and () != unknown and sf.TensorShape([]) != unknown
    assert not (unknown == ()) and not (sf.TensorShape([]) == unknown)
    assert hash(unknown) != hash(())
    assert not unknown  # TensorFlow's __bool__: False for an unknown rank
    assert (1,) + unknown == unknown and unknown + (1,) == unknown
    assert pickle.loads(pickle.dumps(unknown)) == unknown and copy.deepcopy(unknown) == unknown
    assert sf.TensorShape(unknown) == unknown


def test_unknown_rank_is_compatible_with_every_shape_and_merges_to_the_other():
    unknown, known = sf.TensorShape(None), sf.TensorShape([2, None])
    assert unknown.is_compatible_with([2, 3]) and unknown.is_compatible_with(())
    assert known.is_compatible_with(unknown) and unknown.is_compatible_with(unknown)
    assert unknown.merge_with([2, 3]) == (2, 3) and known.merge_with(unknown) == (2, None)
    assert known.concatenate(unknown) == unknown and unknown.concatenate(known) == unknown
    assert unknown.with_rank(2) == (None, None)
    unknown.assert_has_rank(3)  # any rank may be it


def test_is_subtype_of_says_whether_the_other_shape_describes_every_tensor_of_this_one():
    assert sf.TensorShape([2, 3]).is_subtype_of([None, 3])
    assert not sf.TensorShape([None, 3]).is_subtype_of([2, 3])
    assert not sf.TensorShape([2]).is_subtype_of([2, 1])
    assert sf.TensorShape([2, 3]).is_subtype_of(sf.TensorShape(None))
    assert not sf.TensorShape(None).is_subtype_of([None, None])
    assert sf.TensorShape(None).is_subtype_of(sf.TensorShape(None))
