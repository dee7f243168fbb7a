"""Checkpoint behaviour of TensorFlow's checkpoint guide: what a restore status requires of
nested checkpoints, lists and dicts that get their elements after `restore`, and reading a
checkpoint with `sf.train.load_checkpoint`."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def test_nested_checkpoints_need_no_save_counter_of_their_own(tmp_path):
    net = sf.train.Checkpoint(l1=sf.train.Checkpoint(bias=sf.Variable([1.0, 2.0])))
    path = sf.train.Checkpoint(net=net).save(str(tmp_path / "c"))
    to_restore = sf.Variable([0.0, 0.0])
    root = sf.train.Checkpoint(net=sf.train.Checkpoint(l1=sf.train.Checkpoint(bias=to_restore)))
    status = root.restore(path)
    assert status.assert_existing_objects_matched() is status
    np.testing.assert_array_equal(to_restore.numpy(), [1.0, 2.0])


def test_the_roots_save_counter_is_still_required(tmp_path):
    path = sf.train.Checkpoint(w=sf.Variable(1.0)).write(str(tmp_path / "c"))
    root = sf.train.Checkpoint(w=sf.Variable(0.0))
    root.save_counter = sf.Variable(0, dtype=sf.int64)  # a fresh counter the file lacks
    status = root.restore(path)
    del status  # the file has one: it matched
    bare = sf.train.Checkpoint(w=sf.Variable(0.0), extra=sf.Variable(3.0))
    with pytest.raises(AssertionError, match="extra"):
        bare.restore(path).expect_partial().assert_existing_objects_matched()


def test_list_elements_appended_after_restore_are_restored(tmp_path):
    save = sf.train.Checkpoint()
    save.listed = [sf.Variable(1.0)]
    save.listed.append(sf.Variable(2.0))
    save.mapped = {"one": save.listed[0]}
    save.mapped["two"] = save.listed[1]
    save.mapped["three"] = sf.Variable(3.0)
    path = save.save(str(tmp_path / "list"))

    restore = sf.train.Checkpoint()
    v2 = sf.Variable(0.0)
    restore.mapped = {"two": v2}
    restore.restore(path)
    assert float(v2.numpy()) == 2.0
    restore.listed = []
    assert repr(restore.listed) == "ListWrapper([])"
    assert restore.listed == []
    v1 = sf.Variable(0.0)
    restore.listed.append(v1)
    assert float(v1.numpy()) == 1.0
    later = sf.Variable(0.0)
    restore.mapped["three"] = later  # a key set after the restore
    assert float(later.numpy()) == 3.0


def test_load_checkpoint_reads_tensorflow_names(tmp_path):
    net = sf.keras.Sequential([sf.keras.layers.Dense(3)])
    net.build((None, 2))
    optimizer = sf.optimizers.Adam(0.1)
    with sf.GradientTape() as tape:
        loss = sf.reduce_sum(net(sf.ones((1, 2))))
    optimizer.apply_gradients(zip(tape.gradient(loss, net.trainable_variables),
                                  net.trainable_variables, strict=True))
    iterator = iter(sf.data.Dataset.range(5))
    next(iterator)
    ckpt = sf.train.Checkpoint(step=sf.Variable(1), net=net, optimizer=optimizer,
                               iterator=iterator, mapped={"a.b/c": sf.Variable(2.0)})
    sf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=1).save()
    reader = sf.train.load_checkpoint(str(tmp_path))
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    kernel = next(name for name in shapes if name.startswith("net/")
                  and name.endswith("/kernel/.ATTRIBUTES/VARIABLE_VALUE"))
    assert shapes[kernel] == [2, 3] and dtypes[kernel].name == "float32"
    np.testing.assert_array_equal(reader.get_tensor(kernel), net.layers[0].kernel.numpy())
    slot = kernel.replace("/.ATTRIBUTES/", "/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/")
    assert shapes[slot] == [2, 3]
    assert reader.has_tensor("_CHECKPOINTABLE_OBJECT_GRAPH")
    assert reader.has_tensor("iterator/.ATTRIBUTES/ITERATOR_STATE")
    assert int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == 1
    assert reader.get_tensor("mapped/a..b.Sc/.ATTRIBUTES/VARIABLE_VALUE") == 2.0
    assert isinstance(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"), bytes)
    assert not reader.has_tensor("net/kernel")
    with pytest.raises(ValueError, match="not found"):
        reader.get_tensor("net/kernel")
    assert sf.train.list_variables(str(tmp_path)) == sorted(shapes.items())


def test_a_directory_of_tensorflow_checkpoints_is_named_as_such(tmp_path):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n'
                                         'all_model_checkpoint_paths: "ckpt-1"\n')
    ckpt = sf.train.Checkpoint(step=sf.Variable(0))
    with pytest.raises(ValueError, match="TensorFlow's checkpoint state file"):
        sf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=3).save()

