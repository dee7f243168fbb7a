"""`sf.data.Options` through `with_options`: set, merged down a pipeline, refused where
misspelt, and read by a distribution strategy (`auto_shard_policy`)."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

POLICY = sf.data.experimental.AutoShardPolicy


def test_options_are_set_merged_and_leave_the_elements_alone():
    first = sf.data.Options()
    first.deterministic = False
    first.threading.private_threadpool_size = 4
    second = sf.data.Options()
    second.experimental_distribute.auto_shard_policy = POLICY.DATA
    second.threading.private_threadpool_size = 2
    ds = sf.data.Dataset.range(6).with_options(first).map(lambda x: x * 2).with_options(second)
    options = ds.options()
    assert options.deterministic is False
    assert options.threading.private_threadpool_size == 2  # the later one wins
    assert options.experimental_distribute.auto_shard_policy is POLICY.DATA
    assert [int(v) for v in ds] == [0, 2, 4, 6, 8, 10]
    assert ds.element_spec == sf.data.Dataset.range(6).map(lambda x: x * 2).element_spec
    assert sf.data.Dataset.range(2).options().deterministic is None


def test_misspelt_options_and_wrong_arguments_are_errors():
    options = sf.data.Options()
    with pytest.raises(AttributeError, match="has no option 'auto_shard'"):
        options.experimental_distribute.auto_shard = POLICY.OFF
    with pytest.raises(TypeError, match="expected an sf.data.Options, got dict"):
        sf.data.Dataset.range(2).with_options({"deterministic": False})


def test_a_strategy_splits_or_hands_over_whole_elements_as_the_policy_says():
    strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    dataset = sf.data.Dataset.from_tensor_slices(np.arange(4.0, dtype=np.float32)).batch(4)

    def distributed(policy):
        options = sf.data.Options()
        options.experimental_distribute.auto_shard_policy = policy
        dist = strategy.experimental_distribute_dataset(dataset.with_options(options))
        return [[v.numpy().tolist() for v in batch.values] for batch in dist]

    assert distributed(POLICY.DATA) == [[[0.0, 1.0], [2.0, 3.0]]]
    assert distributed(POLICY.AUTO) == [[[0.0, 1.0], [2.0, 3.0]]]
    assert distributed(POLICY.OFF) == [[[0.0, 1.0, 2.0, 3.0]] * 2]
    with pytest.raises(NotImplementedError, match="auto_shard_policy FILE"):
        distributed(POLICY.FILE)
