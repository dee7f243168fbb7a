"""Remote devices on Ray (the paper, section 4.5): a local cluster of two worker processes,
eager ops, graph functions and variables placed on them with the local syntax, tensors that
stay on their worker and move worker to worker, two threads driving two workers at once,
remote errors, and a killed worker."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
import ray

import stageflow as sf
from stageflow.cli import main
from stageflow.distribute import RemoteDeviceError

# One cluster for the file, in one process of the run. Its waits time out after minutes
# (`sf.distribute.TIMEOUT`), so only the test that needs its two workers to run at once has
# the cores to itself.
pytestmark = [pytest.mark.xdist_group("ray-cluster"), pytest.mark.slow]

W0, W1 = "/job:worker/task:0/device:CPU:0", "/job:worker/task:1/device:CPU:0"


@pytest.fixture(scope="module", autouse=True)
def cluster():
    names = sf.distribute.connect(jobs={"worker": 2})
    yield names
    sf.distribute.shutdown()


def stats(task: int) -> dict:
    return ray.get(sf.distribute.workers()[task].stats.remote(), timeout=60)


def test_the_workers_devices_are_listed(cluster):
    assert cluster == [W0, W1]
    assert sf.list_devices()[-2:] == [W0, W1]
    with pytest.raises(ValueError, match="no worker of that job and task is connected"):
        sf.constant(1.0).to("/job:worker/task:5/cpu:0")


def test_eager_ops_run_in_the_worker_and_their_results_stay_there():
    before = stats(0)
    a, b = sf.constant([1.0, 2.0]), sf.constant(3.0)
    with sf.device(W0):
        c = a * b + 1.0
    assert c.device == W0 and c.shape == (2,) and c.dtype == np.float32
    after = stats(0)
    assert after["pid"] != os.getpid() and after["ops"] - before["ops"] == 2
    np.testing.assert_allclose(c.numpy(), [4.0, 7.0])


def test_remote_tensors_move_worker_to_worker_not_through_the_coordinator():
    with sf.device(W0):
        c = sf.constant(np.arange(1000, dtype=np.float32)) * 2.0
    copies = sf.config.statistics()["device_copies"]
    with sf.device(W1):
        d = sf.reduce_sum(c)  # c's reference handed to worker 1
    assert d.device == W1
    assert sf.config.statistics()["device_copies"] == copies  # nothing came here
    assert float(d) == pytest.approx(999_000.0)


def test_a_graph_function_travels_as_ir_and_is_compiled_there_once():
    f = sf.function(lambda x, y: sf.reduce_sum(sf.tanh(x) * y, axis=0))
    x = sf.constant(np.ones((3, 2), np.float32))
    y = sf.constant([1.0, 2.0])
    want = f(x, y).numpy()
    before = stats(1)
    with sf.device(W1):
        results = [f(x, y) for _ in range(3)]
    assert all(r.device == W1 for r in results)
    for r in results:
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-6)
    assert stats(1)["calls"] - before["calls"] == 3


def test_unknown_dims_of_remote_results_are_read_from_the_worker():
    f = sf.function(lambda x: sf.concat([x, x], 0) * 2.0,
                    input_signature=[sf.TensorSpec([None], sf.float32)])
    with sf.device(W0):
        result = f(sf.constant(np.arange(3, dtype=np.float32)))
    assert result.shape == (6,)
    np.testing.assert_allclose(result.numpy(), [0.0, 2.0, 4.0, 0.0, 2.0, 4.0])


def test_variables_live_on_their_worker():
    with sf.device(W0):
        v = sf.Variable(np.zeros(3, np.float32))
    assert v.device == W0 and v.read_value().device == W0
    v.assign(sf.constant([1.0, 2.0, 3.0]))

    @sf.function
    def step(delta):
        v.assign_add(delta * 2.0)
        return v.read_value()

    with sf.device(W0):
        result = step(sf.constant([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(result.numpy(), [3.0, 4.0, 5.0])
    np.testing.assert_allclose(v.numpy(), [3.0, 4.0, 5.0])
    with sf.device(W1), pytest.raises(NotImplementedError, match="lives on /job:worker/task:0"):
        step(sf.constant([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"assign: variable .* is float32\(3,\), the value is "
                                         r"float32\(1,\)"):
        v.assign(sf.constant([1.0]))
    np.testing.assert_allclose(v.numpy(), [3.0, 4.0, 5.0])  # unchanged


def test_a_function_calling_python_stays_here_with_a_clear_error():
    f = sf.function(lambda x: sf.numpy_function(lambda a: a * 2, [x],
                                                sf.TensorSpec([3], sf.float32)))
    with sf.device(W0), pytest.raises(NotImplementedError, match="py_func at .*calls a Python"):
        f(sf.constant([1.0, 2.0, 3.0]))


@pytest.mark.exclusive
def test_two_threads_drive_two_workers_at_once():
    f = sf.function(lambda x: sf.reduce_sum(sf.matmul(x, x)))
    x = sf.constant(np.ones((700, 700), np.float32))
    barrier = threading.Barrier(2)

    def drive(name):
        with sf.device(name):
            f(x).numpy()  # loads the function
            barrier.wait()
            for _ in range(3):
                f(x).numpy()

    spans = [len(stats(t)["spans"]) for t in (0, 1)]
    threads = [threading.Thread(target=drive, args=(name,)) for name in (W0, W1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = stats(0)["spans"][spans[0] + 1:]
    second = stats(1)["spans"][spans[1] + 1:]
    assert any(a < d and c < b for a, b in first for c, d in second)  # some calls overlap


def test_a_remote_error_arrives_with_its_type_op_and_line():
    x = sf.constant(np.array([2, 3], np.int32))
    y = sf.constant(np.array([-1, 1], np.int32))
    with sf.device(W1):
        z = x ** y  # NumPy refuses negative integer powers: in the worker's kernel
    with pytest.raises(ValueError, match=r"(?s)pow on /job:worker/task:1: .*negative.*"
                                         r"test_distribute.py"):
        z.numpy()
    with sf.device(W1):
        assert float(sf.reduce_sum(x)) == 5.0  # the worker survives


def test_a_killed_worker_is_a_clear_error_and_connect_replaces_it():
    ray.kill(sf.distribute.workers()[1])
    time.sleep(0.5)
    start = time.perf_counter()
    with pytest.raises(RemoteDeviceError, match=f"{W1} cannot be used: its worker died"):
        with sf.device(W1):
            (sf.constant(1.0) + 1.0).numpy()
    with pytest.raises(RemoteDeviceError, match="connect\\(\\) again replaces it"):
        with sf.device(W1):
            sf.constant(1.0) + 1.0
    assert time.perf_counter() - start < sf.distribute.TIMEOUT
    with sf.device(W0):
        assert float(sf.constant(1.0) + 1.0) == 2.0  # the coordinator and worker 0 go on
    assert sf.distribute.connect(jobs={"worker": 2}) == [W0, W1]
    with sf.device(W1):
        assert float(sf.constant(2.0) * 2.0) == 4.0


def test_stageflow_devices_lists_a_clusters_devices(capsys):
    """(Last: the command joins the running cluster, then shuts it down.)"""
    assert main(["devices", "--address", "auto", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{W0}  CPU  a worker process" in out and f"{W1}  CPU" in out
