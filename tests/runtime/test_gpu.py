"""GPU devices: the suite's first GPU is a real one where the machine has one, else the
emulated GPU `conftest.py` asks for (host memory; kernels are the PTX kernels' LLVM IR
launched over an emulated grid). Either way the same tests run: listings 4 and 5, eager
elementwise ops as one kernel per op signature, other ops on the host with counted
transfers, staged functions as launch sequences, gradients and memory accounting.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.frontend.tensor import DeviceTensor
from stageflow.runtime import devices as runtime_devices
from stageflow.runtime.gpu import DeviceArray, GPUDevice

GPU = "/device:GPU:0"


def copies() -> int:
    return sf.config.statistics()["device_copies"]


def gpu() -> GPUDevice:
    return runtime_devices.get(GPU)


def test_the_gpu_is_listed_and_described():
    assert GPU in sf.list_devices()
    assert gpu().describe().startswith(f"{GPU}  GPU")


def test_listing_4():
    a = sf.constant(1.0)  # stored on CPU
    b = a.gpu()  # stored on GPU
    assert type(b) is DeviceTensor and b.device == GPU
    assert b.shape == () and b.dtype == np.float32 and float(b) == 1.0
    assert isinstance(b._buffer, DeviceArray)


def test_listing_5():
    # stored on CPU
    a = sf.constant(1.0)
    b = sf.constant(2.0)
    before = copies()
    with sf.device("/gpu:0"):
        c = sf.add(a, b)
    assert copies() - before == 2  # a and b, once each
    assert c.numpy() == 3.0
    assert c.device == GPU


UNARY = ["exp", "tanh", "negative", "abs", "sqrt", "logistic", "floor", "sin", "log1p"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "pow"]


@pytest.mark.parametrize("name", UNARY)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, max_side=40),
                    elements=st.floats(0.5, 4, width=32)))
def test_eager_unary_ops_run_as_kernels_and_match_the_host(name, x):
    op = {"logistic": sf.sigmoid}.get(name) or getattr(sf, name)
    host = op(sf.constant(x)).numpy()
    on_gpu = op(sf.constant(x).gpu())
    assert on_gpu.device == GPU and type(on_gpu) is DeviceTensor
    np.testing.assert_allclose(on_gpu.numpy(), host, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name", BINARY)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=6),
       seed=st.integers(0, 2**31))
def test_eager_binary_ops_broadcast_on_the_gpu(name, shapes, seed):
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes.input_shapes)
    op = getattr(sf, name)
    want = op(sf.constant(x), sf.constant(y)).numpy()
    with sf.device("gpu:0"):
        got = op(sf.constant(x), sf.constant(y))
    assert got.device == GPU and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6)


def test_one_kernel_per_op_signature():
    device = gpu()
    x = sf.constant(np.arange(6, dtype=np.float32)).gpu()
    y = sf.constant(np.ones((2, 3), np.float32)).gpu()
    before = len(device._kernels)
    for _ in range(3):
        sf.cos(x)
    assert len(device._kernels) == before + 1  # compiled once, launched three times
    sf.cos(y)  # another rank: another kernel
    sf.cos(sf.constant(np.ones(9, np.float32)).gpu())  # another size only: the same one
    assert len(device._kernels) == before + 2
    sf.cast(x, sf.int32)
    sf.cast(x, sf.float64)  # another param: another kernel
    assert len(device._kernels) == before + 4


def test_ops_without_a_kernel_run_on_the_host_with_counted_transfers():
    a = sf.constant(np.arange(12, dtype=np.float32).reshape(3, 4)).gpu()
    b = sf.constant(np.ones((4, 2), np.float32)).gpu()
    before = copies()
    product = sf.matmul(a, b)  # a, b fetched, the product put back
    assert copies() - before == 3 and product.device == GPU
    np.testing.assert_allclose(product.numpy(), np.arange(12).reshape(3, 4) @ np.ones((4, 2)))
    joined = sf.concat([a, a], axis=0)  # several operands: no index map either
    assert joined.device == GPU and joined.shape == (6, 4)


MOVES = {
    "transpose": lambda t: sf.transpose(t, tuple(reversed(range(t.ndim)))),
    "slice": lambda t: t[..., ::-2] if t.ndim else t,
    "reshape": lambda t: sf.reshape(t, (-1,)),
    "broadcast": lambda t: sf.broadcast_to(t, (2, *t.shape)),
}


@pytest.mark.parametrize("name", sorted(MOVES))
@given(x=hnp.arrays(st.sampled_from([np.float32, np.int64, np.bool_, np.float16]),
                    hnp.array_shapes(min_dims=0, max_dims=3, max_side=5)))
def test_moves_run_on_the_gpu_as_gathers(name, x):
    move = MOVES[name]
    want = move(sf.constant(x)).numpy()
    placed = sf.constant(x).gpu()
    before = copies()
    got = move(placed)
    assert got.device == GPU and type(got) is DeviceTensor
    assert copies() - before <= 1  # at most the index map, once per signature
    np.testing.assert_array_equal(got.numpy(), want)


REDUCTIONS = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"]


@pytest.mark.parametrize("name", REDUCTIONS)
@given(x=hnp.arrays(st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
                    hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.integers(-3, 3)),
       data=st.data(), keepdims=st.booleans())
def test_reductions_run_on_the_gpu(name, x, data, keepdims):
    axes = data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True, min_size=1))
    op = getattr(sf, name)
    want = op(sf.constant(x), axis=tuple(axes), keepdims=keepdims).numpy()
    got = op(sf.constant(x).gpu(), axis=tuple(axes), keepdims=keepdims)
    assert got.device == GPU and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_a_max_over_nothing_raises_as_numpy_does():
    with pytest.raises(ValueError):
        sf.reduce_max(sf.constant(np.ones((2, 0), np.float32)).gpu(), axis=1)


def test_a_gpu_tensor_reaches_the_host_once():
    t = sf.constant(np.arange(4, dtype=np.float32)).gpu()
    before = copies()
    assert np.array_equal(np.asarray(t), [0, 1, 2, 3])
    assert np.array_equal(t.numpy(), [0, 1, 2, 3])
    assert "sf.Tensor([0., 1., 2., 3.]" in repr(t)
    assert t.cpu().device == "/device:CPU:0"
    assert copies() - before == 1


def test_gpu_to_gpu_and_logical_device_copies():
    t = sf.constant(np.arange(3, dtype=np.float32)).gpu()
    on_cpu1 = t.to("cpu:1")
    assert on_cpu1.device == "/device:CPU:1"
    np.testing.assert_array_equal((on_cpu1 + t).numpy(), [0, 2, 4])  # t fetched to CPU:1


@pytest.mark.parametrize("jit", [True, False])
def test_a_graph_function_runs_as_launches_on_the_gpu(jit):
    def step(x, w):
        h = sf.tanh(sf.matmul(x, w) * 0.5 + 1.0)
        return sf.reduce_sum(h * h, axis=1), h

    f = sf.function(step, jit=jit)
    rng = np.random.default_rng(0)
    x = sf.constant(rng.standard_normal((8, 5)).astype(np.float32))
    w = sf.constant(rng.standard_normal((5, 3)).astype(np.float32))
    want = [t.numpy() for t in step(x, w)]
    counts = []
    for _ in range(3):
        before = copies()
        with sf.device("gpu:0"):
            got = f(x, w)
        counts.append(copies() - before)
    # x and w go to the GPU once, the constants when the plan is made; later calls copy
    # only what the host's steps (matmul, the row sums) fetch and put back.
    assert counts[1] == counts[2] <= counts[0] - 2
    assert all(t.device == GPU for t in got)
    for g, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-5, atol=1e-6)
    with sf.device("gpu:0"):
        concrete = f.get_concrete_function(x, w)
    program, _ = concrete._gpu_programs[GPU]
    assert program.stats.kernels >= 1  # the fused tanh chain is a launch



def test_variables_on_the_gpu():
    with sf.device("gpu:0"):
        v = sf.Variable(np.zeros(3, np.float32))
    assert v.device == GPU and v.read_value().device == GPU

    @sf.function
    def accumulate(delta):
        v.assign_add(delta * 2.0)
        return v.read_value()

    with sf.device("gpu:0"):
        accumulate(sf.constant([1.0, 2.0, 3.0]))
        result = accumulate(sf.constant([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(result.numpy(), [4.0, 6.0, 8.0])
    np.testing.assert_allclose(v.numpy(), [4.0, 6.0, 8.0])


def test_gradients_flow_back_from_the_gpu():
    x = sf.constant(np.array([1.0, -2.0, 3.0], np.float32))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(sf.exp(x.gpu()) * 2.0)
    gradient = tape.gradient(y, x)
    assert gradient.device == "/device:CPU:0"
    np.testing.assert_allclose(gradient.numpy(), 2.0 * np.exp(x.numpy()), rtol=1e-6)


def test_gpu_memory_is_counted_and_returned():
    gc.collect()
    before = sf.config.get_memory_info("gpu:0")["current"]
    t = sf.constant(np.ones(1000, np.float32)).gpu()
    u = sf.exp(t)
    assert sf.config.get_memory_info("gpu:0")["current"] - before == 8000
    del t, u
    gc.collect()
    assert sf.config.get_memory_info("gpu:0")["current"] == before


def test_empty_tensors_launch_nothing():
    t = sf.constant(np.ones((0, 3), np.float32)).gpu()
    assert sf.exp(t).shape == (0, 3) and sf.exp(t).numpy().shape == (0, 3)


def test_a_graph_function_follows_its_gpu_arguments():
    f = sf.function(lambda x: sf.exp(x) + 1.0)
    x = sf.constant(np.zeros(3, np.float32))
    result = f(x.gpu())
    assert result.device == GPU
    np.testing.assert_allclose(result.numpy(), 2.0)
