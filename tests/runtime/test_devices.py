"""Devices: names, placement, transparent copies, logical CPU devices, graph functions placed
by the scope they are called in, and the IR showing it (the paper, section 4.4).

The suite splits the CPU into four logical devices (`conftest.py`), so placement, copies and
concurrent execution are tested on any machine: ``/device:CPU:0`` is the host, ``CPU:1`` to
``CPU:3`` hold their own copies and run their work on worker threads of their own.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core import devices
from stageflow.frontend.tensor import PlacedTensor, Tensor
from stageflow.primitives import elementwise as ew
from stageflow.runtime import devices as runtime_devices
from stageflow.runtime.cpu_devices import LogicalCPU

CPU0, CPU1, CPU2, CPU3 = (f"/device:CPU:{i}" for i in range(4))
SCALAR = sf.TensorSpec([], sf.float32)


def copies() -> int:
    return sf.config.statistics()["device_copies"]


@pytest.mark.parametrize(("written", "full"), [
    ("cpu:1", CPU1), ("CPU:1", CPU1), ("/cpu:1", CPU1), ("/device:CPU:1", CPU1),
    ("cpu", CPU0), ("/gpu:0", "/device:GPU:0"), ("GPU:2", "/device:GPU:2"),
    ("/job:worker/task:1/device:CPU:0", "/job:worker/task:1/device:CPU:0"),
    ("/job:worker/task:1/cpu:0", "/job:worker/task:1/device:CPU:0"),
])
def test_names_in_every_form_are_canonical(written, full):
    assert devices.canonical(written) == full


@pytest.mark.parametrize("bad", ["tpu:0", "cpu:x", "/job:worker/device:CPU:0", "", "cpu:1:2"])
def test_a_bad_name_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="is not a device name"):
        devices.canonical(bad)


def test_the_runtime_lists_the_logical_devices_then_the_gpus():
    assert sf.list_devices()[:4] == [CPU0, CPU1, CPU2, CPU3]
    assert sf.list_devices()[4:] == [f"/device:GPU:{i}" for i in range(len(sf.list_devices()) - 4)]


def test_an_unknown_device_is_named_with_the_real_ones():
    with pytest.raises(ValueError, match=r"no device /device:CPU:9: .*the devices are "
                                         r"/device:CPU:0, /device:CPU:1"):
        with sf.device("cpu:9"):
            pass
    with pytest.raises(ValueError, match=r"no device /job:w/task:0/device:CPU:0"):
        sf.constant(1.0).to("/job:w/task:0/cpu:0")


def test_listing_4_without_a_gpu_says_why():
    """In a process without GPUs (the suite has an emulated one): a clear error."""
    code = ("import stageflow as sf\n"
            "a = sf.constant(1.0)  # stored on CPU\n"
            "try:\n"
            "    a.gpu()\n"
            "except ValueError as error:\n"
            "    print(error)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    if not out:
        pytest.skip("this machine has a GPU: a.gpu() works")
    assert out.startswith("no device /device:GPU:0: there is no GPU: ")
    assert "cuda-python" in out or "CUDA driver" in out
    assert out.rstrip().endswith("the devices are /device:CPU:0")


def test_listing_4_on_a_logical_device():
    a = sf.constant(1.0)
    b = a.cpu(1)
    assert type(b) is PlacedTensor and b.device == CPU1 and float(b) == 1.0
    assert a.device == CPU0 and b.cpu().device == CPU0 and type(b.cpu()) is Tensor


def test_listing_5_copies_cpu_inputs_to_the_device():
    a = sf.constant(1.0)
    b = sf.constant(2.0)
    before = copies()
    with sf.device("cpu:1"):
        c = sf.add(a, b)
    assert c.numpy() == 3.0
    assert c.device == CPU1
    assert copies() - before == 2


def test_a_tensor_is_copied_to_a_device_once_however_often_it_is_used_there():
    x = sf.constant(np.arange(6, dtype=np.float32))
    before = sf.config.statistics()
    with sf.device("cpu:2"):
        y = x * 2.0 + x
        z = sf.reduce_sum(x) + y
        w = x.to("cpu:2")
    after = sf.config.statistics()
    assert after["device_copies"] - before["device_copies"] == 1
    assert after["device_copy_bytes"] - before["device_copy_bytes"] == x.numpy().nbytes
    assert w.to("cpu:2")._value is w._value and x.to("cpu:0")._value is x._value
    assert sf.config.statistics()["device_copies"] == after["device_copies"]
    np.testing.assert_allclose(z.numpy(), 15.0 + 3 * np.arange(6))


def test_ops_without_a_scope_run_where_their_inputs_are():
    x = sf.constant([1.0, 2.0]).to("cpu:3")
    assert (x + 1.0).device == CPU3
    assert sf.exp(x).device == CPU3
    assert (sf.constant([1.0, 1.0]) + x).device == CPU3  # the placed input draws the op
    mixed = x.to("cpu:1") * x
    assert mixed.device == CPU1
    np.testing.assert_allclose(mixed.numpy(), [1.0, 4.0])


def test_the_innermost_scope_wins_and_none_clears_it():
    x = sf.constant(1.0)
    with sf.device("cpu:1"):
        with sf.device("cpu:2"):
            assert (x + 1.0).device == CPU2
        assert (x + 1.0).device == CPU1
        with sf.device(None):
            assert (x + 1.0).device == CPU0
        with sf.device("cpu:0"):
            assert type(x + 1.0) is Tensor


def test_device_scopes_are_per_thread():
    seen = []
    with sf.device("cpu:1"):
        worker = threading.Thread(target=lambda: seen.append((sf.constant(1.0) + 1.0).device))
        worker.start()
        worker.join()
    assert seen == [CPU0]


def test_work_on_a_logical_device_runs_on_its_worker_thread(monkeypatch):
    names = []
    kernel = ew.exp_p.kernel

    def exp(x):
        names.append(threading.current_thread().name)
        return kernel(x)

    def record(x):
        names.append(threading.current_thread().name)
        return x

    monkeypatch.setattr(ew.exp_p, "kernel", exp)
    x = sf.constant(1.0)
    with sf.device("cpu:2"):
        sf.exp(x)
    sf.exp(x.to("cpu:1"))
    staged = sf.function(lambda v: sf.numpy_function(record, [v], SCALAR))
    with sf.device("cpu:3"):
        staged(x)
    staged(x)
    assert names == ["stageflow /device:CPU:2", "stageflow /device:CPU:1",
                     "stageflow /device:CPU:3", threading.current_thread().name]


def _overlap(devices_used: tuple[str, str]) -> bool:
    """Whether two Python threads calling a graph function on these devices had work
    running at once."""
    inside = []
    lock = threading.Lock()
    active = [0]

    def hold(x):
        with lock:
            active[0] += 1
            inside.append(active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return x

    staged = sf.function(lambda v: sf.numpy_function(hold, [v], SCALAR))

    def drive(name):
        with sf.device(name):
            for _ in range(3):
                staged(sf.constant(1.0))

    threads = [threading.Thread(target=drive, args=(name,)) for name in devices_used]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return max(inside) > 1


def test_two_devices_run_at_once_and_one_device_runs_in_order():
    assert _overlap(("cpu:1", "cpu:2"))
    assert not _overlap(("cpu:3", "cpu:3"))


def test_an_error_on_a_device_reaches_the_caller_with_its_line():
    a = sf.constant(np.ones((2, 3), np.float32))
    b = sf.constant(np.ones((4, 5), np.float32))
    with sf.device("cpu:1"), pytest.raises(ValueError, match=r"(?s)matmul.*test_devices.py"):
        sf.matmul(a, b)
    failing = sf.function(lambda x: sf.numpy_function(lambda v: 1 / 0, [x], SCALAR))
    with sf.device("cpu:1"), pytest.raises(ZeroDivisionError):
        failing(sf.constant(1.0))
    with sf.device("cpu:1"):
        assert float(sf.reduce_sum(a)) == 6.0  # the device still works


def test_memory_of_a_device_counts_its_tensors_until_they_are_freed():
    gc.collect()
    before = sf.config.get_memory_info("cpu:3")["current"]
    x = sf.constant(np.ones((256, 256), np.float32))
    with sf.device("cpu:3"):
        y = x + 1.0  # x's copy, the scalar 1.0 made there, and y
    info = sf.config.get_memory_info("/device:CPU:3")
    grown = info["current"] - before  # (tensors of earlier tests may die meanwhile)
    assert 2 * x.numpy().nbytes - 64 <= grown <= 2 * x.numpy().nbytes + 4
    assert info["peak"] >= info["current"]
    del x, y
    gc.collect()
    assert sf.config.get_memory_info("cpu:3")["current"] <= before
    with pytest.raises(ValueError, match="memory of /device:CPU:0 is not counted"):
        sf.config.get_memory_info("cpu:0")


def test_the_count_is_fixed_once_the_devices_are_used():
    with pytest.raises(RuntimeError, match="before the devices are first used"):
        sf.config.set_logical_device_count("CPU", 2)
    sf.config.set_logical_device_count("CPU", 4)  # unchanged: fine
    with pytest.raises(ValueError, match="positive"):
        sf.config.set_logical_device_count("CPU", 0)
    with pytest.raises(ValueError, match="CPU only"):
        sf.config.set_logical_device_count("GPU", 2)


def test_a_fresh_process_gets_the_count_it_asks_for():
    code = ("import stageflow as sf; sf.config.set_logical_device_count('CPU', 2); "
            "print([d for d in sf.list_devices() if 'CPU' in d])")  # and any real GPU
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == str([CPU0, CPU1])


def test_gradients_flow_back_across_copies():
    x = sf.constant(np.array([1.0, 2.0, 3.0], np.float32))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(sf.square(x.to("cpu:2")))
        z = y.to("cpu:1") * 3.0
    gradient = tape.gradient(z, x)
    assert gradient.device == CPU0
    np.testing.assert_allclose(gradient.numpy(), 6.0 * x.numpy())


def test_variables_live_on_the_device_they_are_created_on():
    with sf.device("cpu:2"):
        v = sf.Variable(np.zeros(3, np.float32))
    assert v.device == CPU2 and v.read_value().device == CPU2
    before = copies()
    v.assign(sf.constant([1.0, 2.0, 3.0]))  # from the host: copied
    assert copies() - before == 1
    v.assign_add(sf.ones(3))
    np.testing.assert_allclose(v.numpy(), [2.0, 3.0, 4.0])

    @sf.function
    def step(delta):
        v.assign_add(delta)
        return v.read_value()

    result = step(sf.constant([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(result.numpy(), [3.0, 4.0, 5.0])
    np.testing.assert_allclose(v.numpy(), [3.0, 4.0, 5.0])


# -- graph functions ------------------------------------------------------------------------


def _placed_step(x, y):
    a = x * y
    with sf.device("cpu:3"):
        b = sf.exp(a) + 1.0
    return a, b, b * 2.0


@pytest.mark.parametrize("jit", [True, False])
def test_a_graph_function_runs_on_the_scope_it_is_called_in(jit):
    f = sf.function(_placed_step, jit=jit)
    x = sf.constant(np.linspace(-1, 1, 5, dtype=np.float32))
    y = sf.constant(0.5)
    expected = [t.numpy() for t in _placed_step(x, y)]
    results = f(x, y)
    assert [t.device for t in results] == [CPU0, CPU3, CPU3]  # b * 2.0 follows b
    with sf.device("cpu:1"):
        placed = f(x, y)
    # The inner scope wins over the outer one; the rest follows the call's device.
    assert [t.device for t in placed] == [CPU1, CPU3, CPU3]
    for got, want in zip(placed, expected, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    assert f.tracing_count == 2  # the device is part of the cache key
    with sf.device("cpu:1"):
        f(x, y)
    f(x, y)
    assert f.tracing_count == 2


def test_placement_is_visible_in_the_ir():
    f = sf.function(_placed_step)
    x, y = sf.constant(np.ones(4, np.float32)), sf.constant(2.0)
    with sf.device("cpu:1"):
        text = f.get_concrete_function(x, y).ir("traced")
    assert 'attributes {device = "/device:CPU:1"}' in text
    assert 'sf.exp %2 {device = "/device:CPU:3"}' in text
    assert 'sf.multiply %0, %1 :' in text  # placed by the function's device only
    host = f.get_concrete_function(x, y).ir("traced")
    assert "attributes {device" not in host and 'sf.exp %2 {device = "/device:CPU:3"}' in host


def test_a_copy_inside_a_function_is_an_op():
    @sf.function
    def f(x):
        return x.to("cpu:2") * 2.0

    x = sf.constant(np.ones(3, np.float32))
    result = f(x)
    assert result.device == CPU2  # the multiply follows its input, as it would eagerly
    text = f.get_concrete_function(x).ir("traced")
    assert 'sf.device_copy %0 {device = "/device:CPU:2"}' in text
    assert 'sf.multiply %1, %2 {device = "/device:CPU:2"}' in text
    np.testing.assert_allclose(result.numpy(), 2.0)


def test_arguments_of_a_placed_function_are_copied_once():
    f = sf.function(lambda x: x + 1.0)
    x = sf.constant(np.ones(100, np.float32))
    with sf.device("cpu:2"):
        f(x)
        before = copies()
        for _ in range(3):
            result = f(x)
    assert copies() == before and result.device == CPU2


def test_a_function_follows_its_placed_arguments_without_a_scope():
    f = sf.function(lambda x: sf.tanh(x))
    x = sf.constant(np.ones(3, np.float32)).to("cpu:1")
    assert f(x).device == CPU1
    assert f(x.cpu()).device == CPU0


def test_signature_functions_are_placed_too():
    f = sf.function(lambda x: x * 3.0, input_signature=[sf.TensorSpec([None], sf.float32)])
    x = sf.constant(np.ones(5, np.float32))
    with sf.device("cpu:3"):
        assert f(x).device == CPU3
    assert f(x).device == CPU0


@given(st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=8),
       st.sampled_from(["cpu:0", "cpu:1", "cpu:2"]))
def test_eager_placed_staged_and_interpreted_agree(values, name):
    def program(x):
        return sf.reduce_sum(sf.tanh(x) * x + sf.exp(-x * x), axis=0), sf.sigmoid(x)

    x = sf.constant(np.array(values, np.float32))
    expected = [t.numpy() for t in program(x)]
    with sf.device(name):
        runs = [program(x), sf.function(program)(x), sf.function(program, jit=False)(x)]
    for run in runs:
        for got, want in zip(run, expected, strict=True):
            assert got.device == devices.canonical(name)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_stageflow_devices_lists_them_with_memory(tmp_path):
    out = subprocess.run([sys.executable, "-m", "stageflow.cli", "devices", "--logical-cpus",
                          "2"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("/device:CPU:0  CPU  host memory ")
    assert lines[1].startswith("/device:CPU:1  CPU  host memory ")
    assert "shared by 2 logical devices" in lines[1]
    assert lines[2].startswith(("no GPU: ", "/device:GPU:0  GPU  memory "))


def test_the_runtime_devices_are_what_list_devices_names():
    assert [d.name for d in runtime_devices.all_devices()] == sf.list_devices()


def test_a_staged_function_under_a_tape_runs_on_its_device(monkeypatch):
    threads = []
    run = LogicalCPU.run

    def recording(device, work):
        threads.append(device.name)
        return run(device, work)

    monkeypatch.setattr(LogicalCPU, "run", recording)
    f = sf.function(lambda x: sf.reduce_sum(sf.exp(x) * x))
    x = sf.constant(np.array([0.5, -1.0, 2.0], np.float32))
    with sf.GradientTape() as tape:
        tape.watch(x)
        with sf.device("cpu:1"):
            loss = f(x)
    grad = tape.gradient(loss, x)
    assert loss.device == CPU1 and grad.device == CPU1
    assert threads.count(CPU1) >= 2  # the forward and the backward, on CPU:1's thread
    with sf.device("cpu:1"):
        assert CPU1 in f.get_concrete_function(x)._placed_forward_backward
    np.testing.assert_allclose(grad.numpy(), np.exp(x.numpy()) * (1 + x.numpy()), rtol=1e-6)


def test_a_function_placing_its_own_ops_is_replayed_under_a_tape():
    def loss_of(x):
        with sf.device("cpu:2"):
            y = sf.exp(x)
        return sf.reduce_sum(y * x)

    f = sf.function(loss_of)
    x = sf.constant(np.array([0.5, -1.0], np.float32))
    with sf.GradientTape() as tape:
        tape.watch(x)
        with sf.device("cpu:1"):
            loss = f(x)
    grad = tape.gradient(loss, x)
    with sf.device("cpu:1"):
        concrete = f.get_concrete_function(x)
    assert not concrete._placed_forward_backward  # op by op, each op where it is placed
    np.testing.assert_allclose(grad.numpy(), np.exp(x.numpy()) * (1 + x.numpy()), rtol=1e-6)
