"""`sf.distribute.MultiWorkerMirroredStrategy`: one replica per Ray worker process, gradients
all-reduced worker to worker (Ray's collectives, gloo). Two and three workers train to the
weights of one process on the whole batch, eagerly and staged; the gradients never pass
through the coordinator; a killed worker stops the step with an error naming it, and a
new strategy restored from the last checkpoint ends with the uninterrupted run's weights."""

from __future__ import annotations

import numpy as np
import pytest
import ray

import stageflow as sf
from stageflow.core import devices
from stageflow.distribute import RemoteDeviceError

# Ray clusters: in the one process of the run that holds them (tests/distribute), slow.
pytestmark = [pytest.mark.xdist_group("ray-cluster"), pytest.mark.slow]

BATCH = 30  # 15 or 10 rows a worker


@pytest.fixture(scope="module", autouse=True)
def shut_down_at_the_end():
    yield
    sf.distribute.shutdown()


def data(seed: int = 0) -> sf.data.Dataset:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH * 2, 6)).astype(np.float32)
    y = np.tanh(x[:, :2] - x[:, 4:]).astype(np.float32)
    return sf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)


class Trainer:
    """An MLP, Adam and a checkpoint of both, made in a strategy's scope."""

    def __init__(self, strategy, staged: bool) -> None:
        self.strategy = strategy
        sf.random.set_seed(3)  # the same initial weights for every strategy
        with strategy.scope():
            self.model = sf.keras.Sequential([sf.keras.layers.Dense(8, activation="tanh"),
                                              sf.keras.layers.Dense(2)])
            self.model.build((None, 6))
            self.optimizer = sf.optimizers.Adam(0.05)
        self.checkpoint = sf.train.Checkpoint(model=self.model, optimizer=self.optimizer)
        self.step = sf.function(self._step) if staged else self._step

    def _step(self, x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum((self.model(x) - y) ** 2) / BATCH
        variables = self.model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables,
                                           strict=True))
        return loss

    def train(self, epochs: int, after_step=None) -> float:
        loss = None
        for _ in range(epochs):
            for batch in self.strategy.experimental_distribute_dataset(data()):
                per_replica = self.strategy.run(self.step, args=batch)
                loss = float(self.strategy.reduce("SUM", per_replica, axis=None))
                if after_step is not None:
                    after_step()
        return loss

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]


@pytest.fixture(scope="module")
def one_process():
    trainer = Trainer(sf.distribute.MirroredStrategy(["CPU:0"]), staged=False)
    loss = trainer.train(epochs=2)
    return trainer.weights(), loss


@pytest.mark.parametrize(("workers", "bytes_per_pack"), [(2, 0), (3, 64)])
def test_workers_train_to_the_weights_of_one_process_eagerly_and_staged(one_process,
                                                                        workers,
                                                                        bytes_per_pack):
    # 64 bytes a pack: a bucket for each variable, each all-reduce started while the
    # backward pass computes the next one's gradients
    options = sf.distribute.experimental.CommunicationOptions(bytes_per_pack=bytes_per_pack)
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": workers},
                                                         communication_options=options)
    assert strategy.num_replicas_in_sync == workers
    assert strategy.worker_devices == tuple(f"/job:worker/task:{t}/device:CPU:0"
                                            for t in range(workers))
    want, want_loss = one_process
    for staged in (False, True):
        trainer = Trainer(strategy, staged)
        loss = trainer.train(epochs=2)
        assert loss == pytest.approx(want_loss, rel=1e-5)
        for got, expected in zip(trainer.weights(), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        for variable in trainer.model.trainable_variables:
            copies = [copy.numpy() for copy in variable.values]  # fetched from each worker
            assert [copy.device for copy in variable.values] == list(strategy.worker_devices)
            for copy in copies[1:]:
                np.testing.assert_array_equal(copy, copies[0])


def test_the_gradients_never_pass_through_the_coordinator():
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})
    trainer = Trainer(strategy, staged=True)
    trainer.train(epochs=1)  # traced, sent and compiled: what follows is the steady state
    batches = list(strategy.experimental_distribute_dataset(data()))
    before = devices.COUNTERS.copy_bytes
    for batch in batches:
        strategy.reduce("SUM", strategy.run(trainer.step, args=batch), axis=None).numpy()
    copied = devices.COUNTERS.copy_bytes - before
    weights = sum(v.numpy().nbytes for v in trainer.model.trainable_variables)
    # Only the two losses came back (the shards went out before): no gradient, no weight.
    assert copied < weights // 4, copied


def test_run_inside_an_sf_function_says_to_stage_the_step_instead():
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})

    @sf.function
    def outer(x):
        return strategy.run(lambda v: v + 1.0, args=(x,))

    with pytest.raises(RuntimeError, match="decorate the step given to run"):
        outer(sf.constant(1.0))


def test_a_killed_worker_stops_the_step_and_the_last_checkpoint_resumes(tmp_path,
                                                                       one_process):
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})
    trainer = Trainer(strategy, staged=True)
    manager = sf.train.CheckpointManager(trainer.checkpoint, str(tmp_path), max_to_keep=2)
    steps = []

    def save_then_kill_after_the_third():
        steps.append(manager.save())
        if len(steps) == 3:
            ray.kill(sf.distribute.workers()[1])

    with pytest.raises(RemoteDeviceError, match="/job:worker/task:1/device:CPU:0"):
        trainer.train(epochs=2, after_step=save_then_kill_after_the_third)
    assert len(steps) == 3
    # New workers, the model and optimizer made again, the last checkpoint restored: the
    # fourth step runs as if nothing had happened.
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})
    resumed = Trainer(strategy, staged=True)
    resumed.checkpoint.restore(manager.latest_checkpoint)
    batches = list(strategy.experimental_distribute_dataset(data()))
    per_replica = strategy.run(resumed.step, args=batches[1])
    loss = float(strategy.reduce("SUM", per_replica, axis=None))
    want, want_loss = one_process
    assert loss == pytest.approx(want_loss, rel=1e-5)
    for got, expected in zip(resumed.weights(), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_fit_compiled_in_the_scope_trains_on_the_workers(steps_per_execution):
    """Each group of `steps_per_execution` batches is one call of a staged step on each
    worker (with a smaller group at the end of an epoch of 5 batches)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    labels = (x[:, 0] > x[:, 1]).astype(np.int32)

    def fitted(strategy):
        sf.random.set_seed(5)
        with strategy.scope():
            model = sf.keras.Sequential([sf.keras.layers.Dense(8, activation="relu"),
                                         sf.keras.layers.Dense(2)])
            model.compile(optimizer="adam", metrics=["accuracy"],
                          loss=sf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          steps_per_execution=steps_per_execution)
        history = model.fit(x, labels, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return [v.numpy() for v in model.trainable_variables], history.history

    want_weights, want_history = fitted(sf.distribute.get_strategy())
    weights, history = fitted(sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2}))
    for got, expected in zip(weights, want_weights, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    for key, values in want_history.items():
        np.testing.assert_allclose(history[key], values, rtol=1e-5)
