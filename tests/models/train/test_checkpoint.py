"""sf.train checkpoints: the paper's listing 3, matching by the object graph (two copies in
either order, layers built and optimizer slots created after the restore), exact resumption
of Adam training, all-or-nothing restores, the file format, CheckpointManager, and staged
write/read ops."""

import gc
import json
import os
import warnings

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import stageflow as sf


class Net(sf.Module):
    """The paper's listing 3."""

    def __init__(self):
        super().__init__()
        self.v = sf.Variable(1.0)
        self.out = sf.layers.Dense(1)

    def call(self, x):
        return self.out(sf.nn.softplus(x * self.v))


X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
Y = np.array([[0.5], [-0.25], [1.0], [0.0]], np.float32)


def values(module):
    return [v.numpy().copy() for v in module.variables]


def scramble(module, seed):
    rng = np.random.default_rng(seed)
    for v in module.variables:
        v.assign(rng.standard_normal(v.shape).astype(v.dtype))


def test_listing3_restores_into_a_fresh_built_net(tmp_path):
    net = Net()
    net(X)
    scramble(net, 0)
    path = sf.train.Checkpoint(model=net).save(str(tmp_path / "ckpt"))
    assert path == str(tmp_path / "ckpt-1")
    assert os.path.exists(path + ".safetensors")

    fresh = Net()
    fresh(X)
    sf.train.Checkpoint(model=fresh).restore(path).assert_consumed()
    np.testing.assert_array_equal(fresh(X).numpy(), net(X).numpy())
    for a, b in zip(values(fresh), values(net), strict=True):
        np.testing.assert_array_equal(a, b)


def test_listing3_restores_into_a_net_built_after_the_restore(tmp_path):
    net = Net()
    net(X)
    scramble(net, 1)
    path = sf.train.Checkpoint(model=net).save(str(tmp_path / "ckpt"))

    fresh = Net()  # Dense(1) has no variables until its first call
    status = sf.train.Checkpoint(model=fresh).restore(path)
    assert float(fresh.v.numpy()) == float(net.v.numpy())  # existing: restored at once
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match="model.out.kernel"):
        status.assert_consumed()
    np.testing.assert_array_equal(fresh(X).numpy(), net(X).numpy())  # built: restored
    status.assert_consumed()


def test_layers_added_to_a_sequential_after_the_restore_get_their_values(tmp_path):
    model = sf.layers.Sequential([sf.layers.Dense(4, activation="relu"), sf.layers.Dense(2)])
    model(X)
    scramble(model, 4)
    path = sf.train.Checkpoint(model=model).write(str(tmp_path / "w"))

    fresh = sf.layers.Sequential()
    status = sf.train.Checkpoint(model=fresh).restore(path)
    fresh.add(sf.layers.Dense(4, activation="relu"))
    fresh.add(sf.layers.Dense(2))
    np.testing.assert_array_equal(fresh(X).numpy(), model(X).numpy())
    status.assert_consumed()


def test_two_copies_created_in_the_opposite_order_restore_independently(tmp_path):
    first, second = Net(), Net()
    first(X), second(X)
    scramble(first, 2)
    scramble(second, 3)
    path = sf.train.Checkpoint(a=first, b=second).save(str(tmp_path / "ckpt"))

    new_second = Net()  # created first this time: names and creation order differ
    new_second(X)
    new_first = Net()
    new_first(X)
    sf.train.Checkpoint(a=new_first, b=new_second).restore(path).assert_consumed()
    for new, old in ((new_first, first), (new_second, second)):
        for a, b in zip(values(new), values(old), strict=True):
            np.testing.assert_array_equal(a, b)


def train_steps(net, opt, steps, staged):
    def step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(net(x) - y))
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables, strict=True))
        return loss

    run = sf.function(step) if staged else step
    return [float(run(X, Y).numpy()) for _ in range(steps)]


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_adam_training_resumes_exactly(tmp_path, staged):
    net, opt = Net(), sf.optimizers.Adam(0.05)
    train_steps(net, opt, 5, staged)
    path = sf.train.Checkpoint(model=net, optimizer=opt).save(str(tmp_path / "ckpt"))
    expected = train_steps(net, opt, 5, staged)

    fresh, fresh_opt = Net(), sf.optimizers.Adam(0.05)  # no variables, no slots yet
    status = sf.train.Checkpoint(model=fresh, optimizer=fresh_opt).restore(path)
    assert train_steps(fresh, fresh_opt, 5, staged) == expected
    status.assert_consumed()
    assert int(fresh_opt.iterations.numpy()) == 10
    pairs = zip(fresh.trainable_variables, net.trainable_variables, strict=True)
    for new, old in pairs:  # slots were matched through their variables
        for slot in ("m", "v"):
            np.testing.assert_array_equal(fresh_opt.get_slot(new, slot).numpy(),
                                          opt.get_slot(old, slot).numpy())


def test_slots_follow_their_variables_not_creation_order(tmp_path):
    a, b = sf.Variable([1.0, 2.0]), sf.Variable([3.0, 4.0, 5.0])
    opt = sf.optimizers.SGD(0.1, momentum=0.9)
    opt.apply_gradients([(sf.constant([1.0, 1.0]), a), (sf.constant([1.0, 2.0, 3.0]), b)])
    path = sf.train.Checkpoint(a=a, b=b, opt=opt).write(str(tmp_path / "w"))

    new_a, new_b = sf.Variable([0.0, 0.0]), sf.Variable([0.0, 0.0, 0.0])
    new_opt = sf.optimizers.SGD(0.1, momentum=0.9)
    new_opt.add_slot(new_b, "momentum")  # slots created in the other order, before restore
    sf.train.Checkpoint(a=new_a, b=new_b, opt=new_opt).restore(path)
    new_opt.add_slot(new_a, "momentum")  # and after it
    np.testing.assert_array_equal(new_opt.get_slot(new_a, "momentum").numpy(),
                                  opt.get_slot(a, "momentum").numpy())
    np.testing.assert_array_equal(new_opt.get_slot(new_b, "momentum").numpy(),
                                  opt.get_slot(b, "momentum").numpy())


def test_containers_metrics_generators_and_numpy_state(tmp_path):
    state = sf.train.NumpyState()
    state.mean = np.arange(3.0)
    state.epoch = 7
    metric = sf.metrics.Mean()
    metric.update_state([1.0, 2.0, 3.0])
    generator = sf.random.Generator.from_seed(5)
    generator.normal((3,))
    objects = {"layers": [sf.Variable(1.0), {"w": sf.Variable([2.0, 3.0])}],
               "metric": metric, "rng": generator, "stats": state}
    path = sf.train.Checkpoint(**objects).write(str(tmp_path / "w"))
    expected_draw = generator.normal((3,)).numpy()

    state2 = sf.train.NumpyState()
    metric2 = sf.metrics.Mean()
    generator2 = sf.random.Generator.from_seed(99)
    objects2 = {"layers": [sf.Variable(0.0), {"w": sf.Variable([0.0, 0.0])}],
                "metric": metric2, "rng": generator2, "stats": state2}
    sf.train.Checkpoint(**objects2).restore(path).assert_consumed()
    assert float(objects2["layers"][0].numpy()) == 1.0
    np.testing.assert_array_equal(objects2["layers"][1]["w"].numpy(), [2.0, 3.0])
    assert float(metric2.result().numpy()) == 2.0
    np.testing.assert_array_equal(generator2.normal((3,)).numpy(), expected_draw)
    np.testing.assert_array_equal(state2.mean, np.arange(3.0))
    assert state2.epoch == 7


@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16, sf.float32, sf.float64, sf.int32,
                                   sf.int64, sf.uint16, sf.uint32, sf.uint64, np.bool_])
def test_every_dtype_round_trips(tmp_path, dtype):
    value = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    path = sf.train.Checkpoint(v=sf.Variable(value)).write(str(tmp_path / "w"))
    target = sf.Variable(np.zeros((2, 3), dtype))
    sf.train.Checkpoint(v=target).restore(path)
    assert target.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(target.numpy(), value)


def test_the_file_is_safetensors_named_by_object_paths(tmp_path):
    net, opt = Net(), sf.optimizers.Adam(0.1)
    train_steps(net, opt, 1, staged=False)
    path = sf.train.Checkpoint(model=net, optimizer=opt).write(str(tmp_path / "w"))
    with safetensors.safe_open(path + ".safetensors", framework="numpy") as f:
        keys = set(f.keys())
        graph = json.loads(f.metadata()["stageflow.object_graph"])
        np.testing.assert_array_equal(f.get_tensor("model.out.kernel"), net.out.kernel.numpy())
    assert {"model.v", "model.out.kernel", "model.out.bias", "optimizer.iterations",
            "optimizer.m.model.out.kernel", "optimizer.v.model.v", "save_counter"} <= keys
    assert graph["format"] == "stageflow.checkpoint/1"
    assert graph["nodes"][0]["children"][0][0] in {"model", "optimizer", "save_counter"}


def test_files_the_safetensors_package_writes_restore_too(tmp_path):
    """Our reader and writer against the format's reference implementation, both ways."""
    source = {"a": sf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3)),
              "b": sf.Variable(np.zeros((0, 4), np.int64)), "c": sf.Variable(True)}
    path = sf.train.Checkpoint(**source).write(str(tmp_path / "ours"))
    with safetensors.safe_open(path + ".safetensors", framework="numpy") as f:
        tensors = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118
        metadata = f.metadata()
    safetensors.numpy.save_file(tensors, str(tmp_path / "theirs.safetensors"), metadata)
    target = {"a": sf.Variable(np.ones((2, 3), np.float32)),
              "b": sf.Variable(np.ones((0, 4), np.int64)), "c": sf.Variable(False)}
    sf.train.Checkpoint(**target).restore(str(tmp_path / "theirs")).assert_consumed()
    for key in source:
        np.testing.assert_array_equal(target[key].numpy(), source[key].numpy())


def test_a_mismatched_restore_raises_and_changes_nothing(tmp_path):
    net = Net()
    net(X)
    path = sf.train.Checkpoint(model=net).write(str(tmp_path / "w"))

    class Wider(sf.Module):
        def __init__(self):
            super().__init__()
            self.v = sf.Variable(5.0)
            self.out = sf.layers.Dense(2)  # kernel (3, 2), not (3, 1)

    other = Wider()
    other.out(X)
    before = values(other)
    shapes = r"model\.out\.kernel.*float32\(3, 2\).*float32\(3, 1\)"
    with pytest.raises(ValueError, match=shapes):
        sf.train.Checkpoint(model=other).restore(path)
    for a, b in zip(values(other), before, strict=True):  # not even `v`, which would fit
        np.testing.assert_array_equal(a, b)


def test_missing_truncated_and_foreign_files_are_refused(tmp_path):
    target = sf.Variable([1.0, 2.0])
    ckpt = sf.train.Checkpoint(v=target)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        ckpt.restore(str(tmp_path / "absent"))
    path = sf.train.Checkpoint(v=sf.Variable([3.0, 4.0])).write(str(tmp_path / "w"))
    data = open(path + ".safetensors", "rb").read()
    for cut in (len(data) - 1, len(data) // 2, 12, 3):
        with open(str(tmp_path / "cut.safetensors"), "wb") as f:
            f.write(data[:cut])
        with pytest.raises(ValueError, match="not a complete checkpoint"):
            ckpt.restore(str(tmp_path / "cut"))
    safetensors.numpy.save_file({"v": np.zeros(2, np.float32)},
                                str(tmp_path / "foreign.safetensors"))
    with pytest.raises(ValueError, match="without a stageflow object graph"):
        ckpt.restore(str(tmp_path / "foreign"))
    np.testing.assert_array_equal(target.numpy(), [1.0, 2.0])


def test_a_kind_mismatch_names_the_object(tmp_path):
    path = sf.train.Checkpoint(thing=sf.Variable(1.0)).write(str(tmp_path / "w"))
    with pytest.raises(ValueError, match="thing is a variable"):
        sf.train.Checkpoint(thing=Net()).restore(path)


@pytest.fixture
def collect():
    """`gc.collect` over the objects made since the test began: those the process held
    before (the suite's other tests leave many behind) are frozen meanwhile, so that a
    collection does not walk them all."""
    gc.freeze()
    yield gc.collect
    gc.unfreeze()


def test_unused_values_are_reported_unless_partial_is_expected(tmp_path, collect):
    net = Net()
    net(X)
    path = sf.train.Checkpoint(model=net, extra=sf.Variable(3.0)).write(str(tmp_path / "w"))
    fresh = Net()
    fresh(X)
    status = sf.train.Checkpoint(model=fresh).restore(path)
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match="extra"):
        status.assert_consumed()
    with pytest.warns(UserWarning, match="never restored.*extra"):
        del status  # the restore ends with its status: `extra` never found its object
        collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sf.train.Checkpoint(model=fresh).restore(path).expect_partial()
        collect()


def test_values_wait_as_long_as_the_objects_they_wait_for(tmp_path, collect):
    net = Net()
    net(X)
    path = sf.train.Checkpoint(model=net).write(str(tmp_path / "w"))
    lazy = Net()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        status = sf.train.Checkpoint(model=lazy).restore(path)
        del status  # the values for `lazy.out` still wait for its first call
        collect()
    lazy(X)
    np.testing.assert_array_equal(lazy.out.kernel.numpy(), net.out.kernel.numpy())


def test_restore_of_none_restores_nothing():
    status = sf.train.Checkpoint(v=sf.Variable(1.0)).restore(None)
    with pytest.raises(AssertionError, match="no checkpoint"):
        status.assert_consumed()
    status.expect_partial()


def test_save_numbers_continue_after_a_restore_and_latest_checkpoint(tmp_path):
    prefix = str(tmp_path / "run" / "ckpt")
    ckpt = sf.train.Checkpoint(v=sf.Variable(1.0))
    assert sf.train.latest_checkpoint(str(tmp_path / "run")) is None
    first = ckpt.save(prefix)
    second = ckpt.save(prefix)
    assert (first, second) == (prefix + "-1", prefix + "-2")
    assert sf.train.latest_checkpoint(str(tmp_path / "run")) == second
    again = sf.train.Checkpoint(v=sf.Variable(0.0))
    again.restore(first)
    assert again.save(prefix) == prefix + "-2"  # save_counter was restored to 1
    assert sf.train.latest_checkpoint(str(tmp_path / "run")) == prefix + "-2"


def test_checkpoint_manager_keeps_the_newest_and_survives_the_process(tmp_path):
    v = sf.Variable(0.0)
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(v=v), str(tmp_path), max_to_keep=2)
    assert manager.latest_checkpoint is None and manager.checkpoints == []
    for step in range(4):
        v.assign(float(step))
        manager.save()
    names = [os.path.basename(p) for p in manager.checkpoints]
    assert names == ["ckpt-3", "ckpt-4"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-3.safetensors",
                                           "ckpt-4.safetensors"]
    assert sf.train.latest_checkpoint(str(tmp_path)) == manager.latest_checkpoint
    target = sf.Variable(-1.0)
    later = sf.train.CheckpointManager(sf.train.Checkpoint(v=target), str(tmp_path),
                                       max_to_keep=2)
    assert later.checkpoints == manager.checkpoints
    later._checkpoint.restore(later.latest_checkpoint)
    assert float(target.numpy()) == 3.0
    assert os.path.basename(later.save()) == "ckpt-5"
    assert [os.path.basename(p) for p in later.checkpoints] == ["ckpt-4", "ckpt-5"]
    with pytest.raises(ValueError, match="max_to_keep"):
        sf.train.CheckpointManager(sf.train.Checkpoint(v=v), str(tmp_path), max_to_keep=0)


def test_compiled_functions_see_restored_values_without_retracing(tmp_path):
    w = sf.Variable([1.0, 2.0])
    traces = []

    @sf.function
    def scaled(x):
        traces.append(1)
        return x * w

    path = sf.train.Checkpoint(w=w).write(str(tmp_path / "w"))
    np.testing.assert_array_equal(scaled(sf.constant([1.0, 1.0])).numpy(), [1.0, 2.0])
    w.assign([5.0, 6.0])
    np.testing.assert_array_equal(scaled(sf.constant([1.0, 1.0])).numpy(), [5.0, 6.0])
    sf.train.Checkpoint(w=w).restore(path)
    np.testing.assert_array_equal(scaled(sf.constant([1.0, 1.0])).numpy(), [1.0, 2.0])
    assert len(traces) == 1


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "interpreted"])
def test_staged_write_and_read_are_ops_of_the_graph(tmp_path, jit):
    w = sf.Variable([0.0, 0.0])
    step = sf.Variable(0, dtype=sf.int64)
    ckpt = sf.train.Checkpoint(w=w, step=step)
    path = str(tmp_path / "staged")

    @sf.function(jit=jit)
    def save(value):
        w.assign(value)
        step.assign_add(1)
        ckpt.write(path)  # sees the values assigned above, not the one below
        w.assign(value * 100.0)

    @sf.function(jit=jit)
    def load():
        ckpt.read(path)
        return w.read_value() + 1.0

    save(sf.constant([1.0, 2.0]))
    ir = save.get_concrete_function(sf.constant([1.0, 2.0])).ir()
    assert "checkpoint_write" in ir
    np.testing.assert_array_equal(w.numpy(), [100.0, 200.0])
    np.testing.assert_array_equal(load().numpy(), [2.0, 3.0])
    assert int(step.numpy()) == 1
    assert "checkpoint_read" in load.get_concrete_function().ir()
    save(sf.constant([3.0, 4.0]))
    np.testing.assert_array_equal(load().numpy(), [4.0, 5.0])  # each run writes and reads
    fresh = sf.Variable([9.0, 9.0])
    sf.train.Checkpoint(w=fresh, step=sf.Variable(0, dtype=sf.int64)).restore(path)
    np.testing.assert_array_equal(fresh.numpy(), [3.0, 4.0])


def test_staged_read_of_a_checkpoint_lacking_a_variable_raises(tmp_path):
    path = sf.train.Checkpoint(a=sf.Variable(1.0)).write(str(tmp_path / "w"))
    a, b = sf.Variable(0.0), sf.Variable(0.0)
    ckpt = sf.train.Checkpoint(a=a, b=b)

    @sf.function
    def load():
        ckpt.read(path)
        return a.read_value()

    with pytest.raises(ValueError, match="no value for the variable"):
        load()
    assert float(a.numpy()) == 0.0


def test_save_inside_a_staged_function_points_to_write(tmp_path):
    ckpt = sf.train.Checkpoint(v=sf.Variable(1.0))

    @sf.function
    def bad():
        ckpt.save(str(tmp_path / "x"))

    with pytest.raises(TypeError, match=r"use ckpt.write\(path\)"):
        bad()


def test_objects_without_state_are_refused():
    with pytest.raises(TypeError, match="holds no state"):
        sf.train.Checkpoint(number=3)
