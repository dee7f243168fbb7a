"""`sf.train.list_variables` / `load_variable`: a checkpoint read without its objects, the
way TensorFlow programs inspect theirs."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def test_a_models_checkpoint_lists_and_loads_every_tensor(tmp_path):
    model = sf.keras.Sequential([sf.keras.layers.Dense(3), sf.keras.layers.Dense(2)])
    model.build((None, 4))
    optimizer = sf.optimizers.Adam(0.1)
    with sf.GradientTape() as tape:
        loss = sf.reduce_sum(model(sf.ones((2, 4))))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables, strict=True))
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(model=model, optimizer=optimizer),
                                         str(tmp_path), max_to_keep=1)
    manager.save()
    listed = dict(sf.train.list_variables(str(tmp_path)))  # a directory: its latest
    kernels = sorted(name for name in listed if name.startswith("model/")
                     and name.endswith("kernel/.ATTRIBUTES/VARIABLE_VALUE"))
    assert [listed[name] for name in kernels] == [[4, 3], [3, 2]]
    slot = kernels[1].replace("/.ATTRIBUTES/", "/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/")
    assert listed[slot] == [3, 2]  # Adam's slot of that kernel
    assert all(name.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for name in listed
               if name != "_CHECKPOINTABLE_OBJECT_GRAPH")
    assert len(listed) > len(model.variables)  # the optimizer's slots and step too
    first = model.layers[0].kernel.numpy()
    np.testing.assert_array_equal(sf.train.load_variable(manager.latest_checkpoint,
                                                         kernels[0]), first)
    short = kernels[0].removesuffix("/.ATTRIBUTES/VARIABLE_VALUE")
    np.testing.assert_array_equal(sf.train.load_variable(str(tmp_path), short), first)


def test_missing_names_and_directories_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="no checkpoint in directory"):
        sf.train.list_variables(str(tmp_path))
    path = sf.train.Checkpoint(w=sf.Variable(1.0)).save(str(tmp_path / "c"))
    with pytest.raises(ValueError, match=r"has no tensor 'v'; it has \[._CHECKPOINTABLE_OBJECT"):
        sf.train.load_variable(path, "v")
