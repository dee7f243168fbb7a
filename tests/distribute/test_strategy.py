"""`sf.distribute.MirroredStrategy` over this process's logical CPUs: N replicas train to
the same weights as one replica on the whole batch (eagerly, staged-interpreted and
staged-compiled), mirrored variables stay identical and checkpoint once, collectives have
gradients, and a step whose replicas disagree or fail stops with a clear error."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

import stageflow as sf

CPUS = ["CPU:0", "CPU:1", "CPU:2", "CPU:3"]  # tests/conftest.py makes four logical CPUs
WAYS = ["eager", "interpreted", "compiled"]
BATCH = 24


def data(rows: int = BATCH, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 6)).astype(np.float32)
    y = np.tanh(x[:, :3] - x[:, 3:]).astype(np.float32)
    return x, y


def staged(fn, way: str):
    return fn if way == "eager" else sf.function(fn, jit=way == "compiled")


def train_mlp(replica_devices: list[str], way: str, optimizer: str = "adam", steps: int = 3,
              global_batch: int = BATCH) -> tuple[list, list, float]:
    """A two-layer MLP trained by the custom-loop recipe of TensorFlow's distributed
    training guide; (final weights, the model's variables, the last loss)."""
    strategy = sf.distribute.MirroredStrategy(replica_devices)
    sf.random.set_seed(1)  # the same initial weights, however many replicas
    with strategy.scope():
        model = sf.keras.Sequential([sf.keras.layers.Dense(8, activation="tanh"),
                                     sf.keras.layers.Dense(3)])
        model.build((None, 6))
        opt = (sf.optimizers.Adam(0.05) if optimizer == "adam"
               else sf.optimizers.SGD(0.1, momentum=0.9))

    def step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum((model(x) - y) ** 2) / global_batch
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    train_step = staged(lambda batch: strategy.reduce(
        sf.distribute.ReduceOp.SUM, strategy.run(step, args=batch), axis=None), way)
    x, y = data(global_batch)
    dataset = sf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)
    loss = None
    for _ in range(steps):
        for batch in strategy.experimental_distribute_dataset(dataset):
            loss = float(train_step(batch))
    return [v.numpy() for v in model.trainable_variables], model.trainable_variables, loss


@pytest.fixture(scope="module")
def one_replica():
    return {name: train_mlp(["CPU:0"], "eager", name) for name in ("adam", "sgd")}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("replicas", [1, 2, 4])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_replicas_train_to_the_weights_of_one_replica_on_the_whole_batch(
        one_replica, replicas, way, optimizer):
    weights, variables, loss = train_mlp(CPUS[:replicas], way, optimizer)
    want, _, want_loss = one_replica[optimizer]
    for got, expected in zip(weights, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert loss == pytest.approx(want_loss, rel=1e-5)
    for variable in variables:
        copies = variable.values if replicas > 1 or hasattr(variable, "values") else ()
        assert len(copies) == replicas
        for index, copy in enumerate(copies):
            assert copy.device == sf.distribute.MirroredStrategy(
                CPUS[:replicas]).worker_devices[index]
            np.testing.assert_array_equal(copy.numpy(), copies[0].numpy())


def test_a_staged_step_is_one_graph_with_one_all_reduce_per_gradient():
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])
    with strategy.scope():
        w = sf.Variable(np.ones((3, 2), np.float32))
        b = sf.Variable(np.zeros(2, np.float32))
        opt = sf.optimizers.SGD(0.1)

    @sf.function
    def train_step(x):
        def step(x):
            with sf.GradientTape() as tape:
                loss = sf.reduce_sum(sf.matmul(x, w) + b)
            opt.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b], strict=True))
            return loss
        return strategy.run(step, args=(x,))

    x = sf.distribute.PerReplica([sf.constant(np.ones((2, 3), np.float32)),
                                  sf.constant(np.full((2, 3), 2.0, np.float32))])
    losses = train_step(x)
    assert [float(v) for v in losses.values] == [12.0, 24.0]
    text = train_step.get_concrete_function(x).ir()
    assert text.count("sf.all_reduce") == 2
    # Each replica's copy took the summed gradient: x summed over both replicas' rows.
    np.testing.assert_allclose(w.values[1].numpy(), 1.0 - 0.1 * 6.0)
    np.testing.assert_allclose(b.values[0].numpy(), -0.1 * 4.0)


def test_a_checkpoint_saves_a_mirrored_variable_once_and_restores_into_any_replicas(tmp_path):
    four = sf.distribute.MirroredStrategy(CPUS)
    with four.scope():
        v = sf.Variable([1.0, 2.0])
    path = sf.train.Checkpoint(v=v).save(str(tmp_path / "ckpt"))
    assert sf.train.list_variables(path) == [  # v once, the save counter, the object graph
        ("_CHECKPOINTABLE_OBJECT_GRAPH", []), ("save_counter/.ATTRIBUTES/VARIABLE_VALUE", []),
        ("v/.ATTRIBUTES/VARIABLE_VALUE", [2])]
    two = sf.distribute.MirroredStrategy(CPUS[:2])
    with two.scope():
        w = sf.Variable([0.0, 0.0])
    sf.train.Checkpoint(v=w).restore(path)
    for copy in w.values:
        np.testing.assert_array_equal(copy.numpy(), [1.0, 2.0])
    plain = sf.Variable([0.0, 0.0])
    sf.train.Checkpoint(v=plain).restore(path)
    np.testing.assert_array_equal(plain.numpy(), [1.0, 2.0])
    path = sf.train.Checkpoint(v=sf.Variable([5.0, 6.0])).save(str(tmp_path / "plain"))
    sf.train.Checkpoint(v=v).restore(path)
    assert [copy.numpy().tolist() for copy in v.values] == [[5.0, 6.0]] * 4


@pytest.mark.parametrize("way", WAYS)
def test_reduce_gather_and_local_results(way):
    strategy = sf.distribute.MirroredStrategy(CPUS[:3])
    parts = [np.arange(k * 4, k * 4 + 2 * (k + 1), dtype=np.float32).reshape(k + 1, 2)
             for k in range(3)]
    value = sf.distribute.PerReplica([sf.constant(p) for p in parts])
    whole = np.concatenate(parts)

    def summaries(value):
        return (strategy.reduce("MEAN", value, axis=0),
                strategy.reduce(sf.distribute.ReduceOp.SUM, value, axis=0),
                strategy.gather(value, axis=0))

    if way == "eager":
        got = summaries(value)
    else:
        got = staged(summaries, way)(value)
    with pytest.raises(ValueError, match="shapes"):
        strategy.reduce("SUM", value, axis=None)  # the replicas' shapes differ
    np.testing.assert_allclose(got[0], whole.mean(axis=0))
    np.testing.assert_allclose(got[1], whole.sum(axis=0))
    np.testing.assert_allclose(got[2], whole)
    assert strategy.experimental_local_results(value) == value.values


def test_reduce_of_equal_shapes_and_its_errors():
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])
    value = sf.distribute.PerReplica([sf.constant([1.0, 5.0]), sf.constant([3.0, 2.0])])
    np.testing.assert_allclose(strategy.reduce("SUM", value, axis=None), [4.0, 7.0])
    np.testing.assert_allclose(strategy.reduce("MEAN", value, axis=None), [2.0, 3.5])
    np.testing.assert_allclose(strategy.reduce("MAX", value, axis=None), [3.0, 5.0])
    with pytest.raises(ValueError, match="SUM of a value that is not per-replica"):
        strategy.reduce("SUM", sf.constant(1.0), axis=None)
    assert float(strategy.reduce("MEAN", sf.constant(2.0), axis=None)) == 2.0
    with pytest.raises(ValueError, match="unknown reduce op 'median'"):
        strategy.reduce("median", value, axis=None)


def test_run_gives_per_replica_results_and_one_replica_its_own():
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])

    def step(x):
        ctx = sf.distribute.get_replica_context()
        return {"x": x * 2.0, "id": ctx.replica_id_in_sync_group,
                "device": sf.constant(0.0).device}

    result = strategy.run(step, args=(sf.distribute.PerReplica([sf.constant(1.0),
                                                                sf.constant(2.0)]),))
    assert [float(v) for v in result["x"].values] == [2.0, 4.0]
    assert [int(v) for v in result["id"].values] == [0, 1]
    assert result["device"].values == ("/device:CPU:0", "/device:CPU:1")
    assert "PerReplica:{\n  0: sf.Tensor(2." in repr(result["x"])
    single = sf.distribute.MirroredStrategy(["CPU:1"])
    assert float(single.run(lambda x: x + 1.0, args=(sf.constant(1.0),))) == 2.0


def test_the_contexts_inside_and_outside_a_strategy():
    assert sf.distribute.get_strategy().num_replicas_in_sync == 1
    assert not sf.distribute.has_strategy()
    assert sf.distribute.get_replica_context() is not None
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])
    with strategy.scope():
        assert sf.distribute.get_strategy() is strategy
        assert sf.distribute.in_cross_replica_context()
        assert sf.distribute.get_replica_context() is None
        seen = strategy.run(lambda: (sf.distribute.get_replica_context().replica_index,
                                     sf.distribute.in_cross_replica_context(),
                                     sf.distribute.get_strategy() is strategy))
    assert seen[0].values == (0, 1)
    assert seen[1].values == (False, False)
    assert seen[2].values == (True, True)


def test_variables_made_inside_run_are_mirrored_once():
    strategy = sf.distribute.MirroredStrategy(CPUS)
    made = []

    def step():
        v = sf.Variable(np.float32(sf.distribute.get_replica_context().replica_index + 7))
        made.append(v)
        return v.read_value()

    values = strategy.run(step)
    assert len({id(v) for v in made}) == 1
    assert [float(v) for v in values.values] == [7.0] * 4  # replica 0's initial value
    assert len(made[0].values) == 4


@pytest.mark.parametrize("way", WAYS)
def test_all_reduce_all_gather_and_merge_call_in_a_replica(way):
    strategy = sf.distribute.MirroredStrategy(CPUS[:3])

    def step(x):
        ctx = sf.distribute.get_replica_context()
        with sf.GradientTape() as tape:
            tape.watch(x)
            total = ctx.all_reduce("SUM", x * x)
            loss = total * sf.cast(ctx.replica_id_in_sync_group + 1, "float32")
        return (total, ctx.all_reduce("MAX", x), ctx.all_gather(sf.reshape(x, [1]), axis=0),
                tape.gradient(loss, x),
                ctx.merge_call(lambda s, v: s.reduce("MEAN", v, axis=None), args=(x,)))

    inputs = sf.distribute.PerReplica([sf.constant(v) for v in (1.0, 2.0, 3.0)])
    total, biggest, gathered, grads, mean = staged(
        lambda v: strategy.run(step, args=(v,)), way)(inputs)
    assert [float(v) for v in total.values] == [14.0] * 3
    assert [float(v) for v in biggest.values] == [3.0] * 3
    assert [v.numpy().tolist() for v in gathered.values] == [[1.0, 2.0, 3.0]] * 3
    # d/dx_r of sum_j (j + 1) * sum_k x_k^2 = 2 x_r (1 + 2 + 3)
    assert [float(v) for v in grads.values] == [12.0, 24.0, 36.0]
    assert [float(v) for v in mean.values] == [2.0] * 3


def test_an_uneven_global_batch_gives_the_first_replicas_a_row_more():
    strategy = sf.distribute.MirroredStrategy(CPUS)
    dataset = sf.data.Dataset.from_tensor_slices(np.arange(10, dtype=np.float32)).batch(10)
    (batch,) = list(strategy.experimental_distribute_dataset(dataset))
    assert [v.numpy().tolist() for v in batch.values] == [
        [0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0], [8.0, 9.0]]
    assert [v.device for v in batch.values] == [f"/device:{c}" for c in CPUS]


def test_datasets_from_a_function_are_batched_per_replica():
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])

    def dataset_fn(input_context):
        size = input_context.get_per_replica_batch_size(4)
        return sf.data.Dataset.from_tensor_slices(np.arange(8, dtype=np.int32)).batch(size)

    batches = list(strategy.distribute_datasets_from_function(dataset_fn))
    assert [[v.numpy().tolist() for v in b.values] for b in batches] == [
        [[0, 1], [2, 3]], [[4, 5], [6, 7]]]


def test_replicas_that_make_different_collective_calls_stop_with_an_error():
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])

    def step():
        ctx = sf.distribute.get_replica_context()
        if ctx.replica_index == 0:
            return ctx.all_reduce("SUM", sf.constant(1.0))
        return sf.constant(0.0)

    before = threading.active_count()
    with pytest.raises(sf.distribute.ReplicaError,
                       match="replica 0 reached all_reduce.SUM., replica 1 reached the end"):
        strategy.run(step)
    assert threading.active_count() == before


def test_an_error_in_one_replica_reaches_the_caller_and_frees_the_others():
    strategy = sf.distribute.MirroredStrategy(CPUS[:3])

    def step():
        ctx = sf.distribute.get_replica_context()
        if ctx.replica_index == 1:
            sf.matmul(sf.ones([2, 3]), sf.ones([2, 3]))
        return ctx.all_reduce("SUM", sf.constant(1.0))

    before = threading.active_count()
    with pytest.raises(ValueError, match=r"(?s)matmul.*test_strategy.py"):
        strategy.run(step)
    assert threading.active_count() == before


def test_bad_device_lists_are_refused():
    with pytest.raises(ValueError, match="named twice"):
        sf.distribute.MirroredStrategy(["CPU:0", "/device:CPU:0"])
    with pytest.raises(ValueError):
        sf.distribute.MirroredStrategy(["CPU:9"])
    with pytest.raises(ValueError, match="at least one device"):
        sf.distribute.MirroredStrategy([])
    gpus = tuple(d.name for d in sf.config.list_logical_devices("GPU"))
    cpus = tuple(d.name for d in sf.config.list_logical_devices("CPU"))
    assert sf.distribute.MirroredStrategy().worker_devices == (gpus or cpus)


@pytest.mark.parametrize("way", WAYS)
def test_batch_norm_statistics_take_the_mean_of_the_replicas_updates(way):
    """Each replica normalises by its own batch (Keras' unsynchronised batch norm), and
    every copy of the moving statistics takes the mean of the replicas' updates."""
    x = data(8)[0]
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])
    with strategy.scope():
        bn = sf.keras.layers.BatchNormalization(momentum=0.5)
        bn.build((None, 6))
    assert bn.moving_mean.aggregation is sf.VariableAggregation.MEAN
    shards = sf.distribute.PerReplica([sf.constant(x[:4]), sf.constant(x[4:])])
    outputs = staged(lambda v: strategy.run(lambda s: bn(s, training=True), args=(v,)),
                     way)(shards)
    for half, output in zip((x[:4], x[4:]), outputs.values, strict=True):
        normalised = (half - half.mean(0)) / np.sqrt(half.var(0) + bn.epsilon)
        np.testing.assert_allclose(output, normalised, rtol=1e-4, atol=1e-5)
    for variable in (bn.moving_mean, bn.moving_variance):
        np.testing.assert_array_equal(variable.values[0].numpy(), variable.values[1].numpy())
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.5 * x.mean(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("replicas", [2, 4])
@pytest.mark.parametrize("run_eagerly", [False, True], ids=["staged", "eager"])
def test_fit_compiled_in_a_strategy_scope_trains_data_parallel(replicas, run_eagerly):
    """Keras' recipe: build and compile in the scope, then `fit` splits each batch over the
    replicas; weights, losses and metrics are those of one process (a last batch of 10
    rows splits unevenly over 4 replicas, weighted by each one's share)."""
    x, y = data(58)
    labels = (y[:, 0] > 0).astype(np.int32)

    def fitted(strategy):
        sf.random.set_seed(5)
        with strategy.scope():
            model = sf.keras.Sequential([sf.keras.layers.Dense(8, activation="relu"),
                                         sf.keras.layers.Dense(2)])
            model.compile(optimizer=sf.optimizers.Adam(0.02),
                          loss=sf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"], run_eagerly=run_eagerly)
        history = model.fit(x, labels, batch_size=16, epochs=2, shuffle=False, verbose=0)
        return [v.numpy() for v in model.trainable_variables], history.history

    want_weights, want_history = fitted(sf.distribute.get_strategy())
    weights, history = fitted(sf.distribute.MirroredStrategy(CPUS[:replicas]))
    for got, expected in zip(weights, want_weights, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    for key, values in want_history.items():
        np.testing.assert_allclose(history[key], values, rtol=1e-5)


@pytest.mark.parametrize("outer", [False, True], ids=["called-eagerly", "inside-sf.function"])
def test_a_staged_step_given_to_run_is_staged_with_the_replicas_as_one_graph(outer):
    """TensorFlow's other idiom, ``strategy.run(tf.function(step))``: the step is staged with
    the replicas around it (a trace per replica would put the all-reduce between graphs)."""
    def train(strategy):
        with strategy.scope():
            w = sf.Variable(np.ones((6, 3), np.float32))
            opt = sf.optimizers.SGD(0.1)

        @sf.function
        def step(x, y):
            with sf.GradientTape() as tape:
                loss = sf.reduce_sum((sf.matmul(x, w) - y) ** 2) / BATCH
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            return loss

        run = (sf.function(lambda b: strategy.run(step, args=b)) if outer
               else lambda b: strategy.run(step, args=b))
        x, y = data()
        dataset = sf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
        for _ in range(2):
            for batch in strategy.experimental_distribute_dataset(dataset):
                run(batch)
        return w, step

    want, _ = train(sf.distribute.MirroredStrategy(["CPU:0"]))
    got, step = train(sf.distribute.MirroredStrategy(CPUS[:2]))
    for copy in got.values:
        np.testing.assert_allclose(copy.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert step.tracing_count == 0  # its Python ran inside the replicas' one graph


def test_a_first_random_draw_inside_a_replica_makes_one_plain_generator(tmp_path):
    """A layer built inside `run` draws its initial weights: in a fresh process that
    creates the global generator's state, which belongs to the process, not the replicas
    (it once took the place of the layer's variables among those the replicas share)."""
    script = tmp_path / "first_draw.py"
    script.write_text(
        "import stageflow as sf\n"
        "sf.config.set_logical_device_count('CPU', 2)\n"
        "strategy = sf.distribute.MirroredStrategy(['CPU:0', 'CPU:1'])\n"
        "with strategy.scope():\n"
        "    model = sf.keras.Sequential([sf.keras.layers.Dense(4)])\n"
        "x = sf.distribute.PerReplica([sf.ones([2, 3]), sf.ones([2, 3])])\n"
        "out = strategy.run(model, args=(x,))\n"
        "print(sorted({type(v).__name__ for v in model.variables}), len(model.variables))\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "['MirroredVariable'] 2"


@pytest.mark.parametrize("way", ["eager", "compiled"])
def test_replicas_on_a_cpu_and_the_emulated_gpu_train_alike(one_replica, way):
    """A replica per kind of device (tests/conftest.py makes the emulated GPU): the GPU's
    copies of the variables live in its memory, and the numbers are one replica's."""
    weights, variables, _ = train_mlp(["CPU:0", "GPU:0"], way, "sgd")
    for got, expected in zip(weights, one_replica["sgd"][0], strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert [copy.device for copy in variables[0].values] == ["/device:CPU:0", "/device:GPU:0"]


def test_tensorflow_gpu_programs_run_here_with_soft_placement(one_replica):
    """TensorFlow's guides name GPUs and cross-device ops: missing GPUs are the host (a
    warning says so), two replicas there train as one, and the ops choices are taken."""
    with pytest.warns(RuntimeWarning, match="soft device placement"):
        strategy = sf.distribute.MirroredStrategy(
            devices=["/gpu:7", "/gpu:8"],
            cross_device_ops=sf.distribute.HierarchicalCopyAllReduce())
    assert strategy.worker_devices == ("/device:CPU:0", "/device:CPU:0")
    assert isinstance(strategy.cross_device_ops, sf.distribute.CrossDeviceOps)
    weights, _, _ = train_mlp(["/gpu:7", "/gpu:8"], "compiled", "sgd")
    for got, expected in zip(weights, one_replica["sgd"][0], strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    sf.config.set_soft_device_placement(False)
    try:
        with pytest.raises(ValueError, match="no device /device:GPU:7"):
            sf.distribute.MirroredStrategy(["/gpu:7"])
    finally:
        sf.config.set_soft_device_placement(True)
    options = sf.distribute.experimental.CommunicationOptions(
        implementation=sf.distribute.experimental.CommunicationImplementation.RING)
    assert options.implementation.name == "RING"


@pytest.mark.parametrize("way", ["eager", "compiled"])
def test_the_custom_training_tutorials_loss_scaling(way):
    """TensorFlow's custom-training recipe: a loss object with reduction NONE, then
    `sf.nn.compute_average_loss` (the global batch from the replicas by default) and the
    regularization scaled per replica: the weights of one process on the whole batch."""
    x, y = data()

    def train(strategy):
        with strategy.scope():
            w = sf.Variable(np.ones((6, 3), np.float32))
            opt = sf.optimizers.SGD(0.1)
        loss_object = sf.keras.losses.MeanSquaredError(reduction=sf.losses.Reduction.NONE)

        def step(xs, ys):
            with sf.GradientTape() as tape:
                loss = sf.nn.compute_average_loss(loss_object(ys, sf.matmul(xs, w)))
                loss += sf.nn.scale_regularization_loss(0.01 * sf.reduce_sum(w * w))
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            return loss

        run = staged(lambda b: strategy.reduce("SUM", strategy.run(step, args=b), axis=None),
                     way)
        dataset = sf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
        losses = [float(run(b)) for b in strategy.experimental_distribute_dataset(dataset)]
        return w.numpy(), losses

    want, want_losses = train(sf.distribute.MirroredStrategy(["CPU:0"]))
    got, losses = train(sf.distribute.MirroredStrategy(CPUS[:3]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)


@pytest.mark.parametrize("way", ["eager", "interpreted", "compiled"])
def test_central_storage_keeps_one_copy_that_one_replica_updates(one_replica, way):
    """`CentralStorageStrategy`: every variable once, on the host; the replicas read it and
    the first writes the update all of them compute: one replica's weights."""
    strategy = sf.distribute.experimental.CentralStorageStrategy(CPUS[:3])
    sf.random.set_seed(1)
    with strategy.scope():
        model = sf.keras.Sequential([sf.keras.layers.Dense(8, activation="tanh"),
                                     sf.keras.layers.Dense(3)])
        model.build((None, 6))
        opt = sf.optimizers.SGD(0.1, momentum=0.9)

    def step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum((model(x) - y) ** 2) / BATCH
        variables = model.trainable_variables
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    train_step = staged(lambda batch: strategy.reduce("SUM", strategy.run(step, args=batch),
                                                      axis=None), way)
    dataset = sf.data.Dataset.from_tensor_slices(data()).batch(BATCH)
    for _ in range(3):
        for batch in strategy.experimental_distribute_dataset(dataset):
            train_step(batch)
    for variable, want in zip(model.trainable_variables, one_replica["sgd"][0], strict=True):
        assert len(set(map(id, variable.values))) == 1
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-6)
    assert int(opt.iterations.numpy()) == 3  # one update a step, not one per replica


def test_a_distributed_datasets_element_spec_is_an_input_signature():
    """TensorFlow's input tutorial: ``@sf.function(input_signature=[dist.element_spec])``
    traces once for every batch, the smaller last one included."""
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])
    dataset = sf.data.Dataset.from_tensors(([1.0], [2.0])).repeat(36).batch(16)
    distributed = strategy.experimental_distribute_dataset(dataset)
    features_spec = distributed.element_spec[0]
    assert isinstance(features_spec, sf.distribute.PerReplicaSpec)
    assert features_spec == sf.distribute.PerReplicaSpec(*[sf.TensorSpec([None, 1])] * 2)

    @sf.function(input_signature=[distributed.element_spec])
    def train_step(per_replica_inputs):
        return strategy.run(lambda x, y: 2.0 * x + y, args=per_replica_inputs)

    rows = [[len(v.numpy()) for v in train_step(batch).values] for batch in distributed]
    assert rows == [[8, 8], [8, 8], [2, 2]]
    assert train_step.tracing_count == 1


def test_a_generator_made_in_a_scope_draws_a_stream_per_replica():
    """TensorFlow's rule (its numbers): made in a strategy's scope, a generator keys each
    replica's draws by the replica's index, every replica from the same counter; made
    outside, it is one stream that the replicas draw from in turn."""
    strategy = sf.distribute.MirroredStrategy(CPUS[:2])
    with strategy.scope():
        g = sf.random.Generator.from_seed(1)
        first = strategy.experimental_local_results(strategy.run(lambda: g.normal([])))
        second = strategy.experimental_local_results(strategy.run(lambda: g.normal([])))
    np.testing.assert_allclose([float(v) for v in first], [-0.87930447, 0.020661574],
                               rtol=1e-5)
    np.testing.assert_allclose([float(v) for v in second], [-1.5822568, 0.77539235],
                               rtol=1e-5)
    shared = sf.random.Generator.from_seed(1)
    with strategy.scope():
        drawn = strategy.experimental_local_results(strategy.run(lambda: shared.normal([])))
    np.testing.assert_allclose(sorted(float(v) for v in drawn), [0.43842274, 1.6272374],
                               rtol=1e-5)
