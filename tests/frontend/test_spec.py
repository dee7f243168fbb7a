"""`sf.TensorSpec`, against `tf.TensorSpec`'s documented behaviour: shapes with unknown dims
and of unknown rank, equality, repr and compatibility."""

from __future__ import annotations

import numpy as np

import stageflow as sf


def test_a_spec_of_unknown_rank_is_accepted_as_tensorflow_accepts_it():
    spec = sf.TensorSpec(shape=None, dtype=sf.float32)
    assert spec == sf.TensorSpec(None) and hash(spec) == hash(sf.TensorSpec(None))
    assert spec.shape.rank is None and isinstance(spec.shape, sf.TensorShape)
    assert spec != sf.TensorSpec([]) and spec != sf.TensorSpec(None, sf.int32)
    assert spec != sf.TensorSpec(None, name="x")
    # tf: "TensorSpec(shape=<unknown>, dtype=tf.float32, name=None)", in stageflow's format
    assert repr(spec) == "TensorSpec(shape=<unknown>, dtype=float32)"
    assert repr(sf.TensorSpec(None, sf.int32, "x")) == (
        "TensorSpec(shape=<unknown>, dtype=int32, name='x')")


def test_spec_shapes_are_tensor_shapes():
    spec = sf.TensorSpec([None, 3])
    assert type(spec.shape) is sf.TensorShape and spec.shape.as_list() == [None, 3]
    assert spec == sf.TensorSpec((None, 3)) and spec.shape == (None, 3)
    assert sf.TensorSpec(3).shape == (3,)  # tf.TensorSpec(3): one dim


def test_is_compatible_with_takes_a_spec_or_a_tensor_as_tensorflow_s_does():
    spec = sf.TensorSpec([None, 3])
    assert spec.is_compatible_with(sf.ones((5, 3)))
    assert spec.is_compatible_with(np.ones((5, 3), np.float32))
    assert spec.is_compatible_with(sf.TensorSpec([2, None]))  # both None dims agree
    assert not spec.is_compatible_with(sf.ones((5, 4)))
    assert not spec.is_compatible_with(sf.ones((5, 3), sf.int32))
    assert not spec.is_compatible_with(sf.ones((3,)))
    anything = sf.TensorSpec(None)
    assert anything.is_compatible_with(sf.ones((2, 3, 4))) and anything.is_compatible_with(
        sf.constant(1.0)) and anything.is_compatible_with(spec)
    assert spec.is_compatible_with(anything)
    assert not anything.is_compatible_with(sf.ones((2,), sf.int32))
