"""Eager convolutions on compiled lowerings: large ones compile in the background and then
run compiled with NumPy's numbers (to rounding), gradients included; small ones, and all of
them with `sf.config.eager_compile` off, stay on NumPy's kernels. The eager executor asks
for a signature's route once."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.lowered.compile import CompiledOp
from stageflow.core import config
from stageflow.core.primitive import REGISTRY
from stageflow.runtime import eager_kernels
from stageflow.runtime.eager import EagerTrace
from stageflow.runtime.eager_kernels import KERNELS, MIN_MACS


def conv_step(x, w):
    with sf.GradientTape() as tape:
        tape.watch([x, w])
        loss = sf.reduce_sum(sf.square(sf.nn.conv2d(x, w, 2, "SAME")))
    return loss, *tape.gradient(loss, [x, w])


def compiled_of(name: str, *arrays: np.ndarray, **params) -> CompiledOp | None:
    """The compiled op a fresh eager executor's route for this signature leads to, once
    its compile (started by the call) is done; None where it stays on NumPy."""
    trace = EagerTrace()
    trace.process(REGISTRY[name], tuple(sf.constant(a) for a in arrays), params)
    eager_kernels.settle()
    trace.process(REGISTRY[name], tuple(sf.constant(a) for a in arrays), params)
    (route,) = trace._routes.values()
    return route


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_eager_conv_and_its_gradients_run_compiled(dtype, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32, 32, 8)).astype(dtype)
    w = rng.standard_normal((3, 3, 8, 16)).astype(dtype)
    with monkeypatch.context() as patch:
        patch.setattr(config, "eager_compile", False)
        want = [t.numpy() for t in conv_step(sf.constant(x), sf.constant(w))]
    conv_step(sf.constant(x), sf.constant(w))  # starts the compiles
    eager_kernels.settle()
    geometry = {"strides": (2, 2), "padding": ((0, 1), (0, 1)), "dilations": (1, 1)}
    assert isinstance(compiled_of("conv2d", x, w, **geometry), CompiledOp)
    y = REGISTRY["conv2d"].kernel(x, w, **geometry)
    assert isinstance(compiled_of("conv2d_filter_gradient", x, y, filter_size=(3, 3),
                                  **geometry), CompiledOp)
    assert isinstance(compiled_of("conv2d_input_gradient", y, w, input_size=(32, 32),
                                  **geometry), CompiledOp)
    got = [t.numpy() for t in conv_step(sf.constant(x), sf.constant(w))]
    tolerance = 1e-4 if dtype == np.float32 else 1e-10
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=tolerance, atol=tolerance * np.abs(e).max())


def test_small_convs_and_switched_off_compiles_stay_on_numpy(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 8, 2)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 2)).astype(np.float32)
    geometry = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    assert 8 * 8 * 2 * 18 < MIN_MACS
    assert compiled_of("conv2d", x, w, **geometry) is None
    eager_kernels.settle()
    assert compiled_of("conv2d", x, w, **geometry) is None
    big = rng.standard_normal((64, 32, 32, 16)).astype(np.float32)
    filters = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
    monkeypatch.setattr(config, "eager_compile", False)
    assert compiled_of("conv2d", big, filters, **geometry) is None
    eager_kernels.settle()
    assert compiled_of("conv2d", big, filters, **geometry) is None



def test_gradients_of_a_broadcast_seed_run_compiled(monkeypatch):
    """`tape.gradient(y, ...)` seeds y with a broadcast view of ones, which the compiled
    convolution gradients decline: they run on a contiguous copy, not on NumPy's kernels."""
    rng = np.random.default_rng(2)
    x = sf.constant(rng.standard_normal((8, 16, 16, 8)).astype(np.float32))
    w = sf.constant(rng.standard_normal((3, 3, 8, 8)).astype(np.float32))

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = sf.nn.conv2d(x, w, 1, "SAME")
        return tape.gradient(y, [x, w])

    want = [g.numpy() for g in gradients()]  # starts the compiles
    eager_kernels.settle()
    monkeypatch.setattr(CompiledOp, "_numpy", lambda self, values: pytest.fail("NumPy ran"))
    for g, e in zip(gradients(), want, strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-4 * np.abs(e).max())


def test_a_shape_generic_op_takes_the_fast_path_once_its_shapes_are_known(monkeypatch):
    """A shape-generic compiled op remembers its result shapes by operand shapes: a call
    with known shapes goes straight to the compiled entry, with `_slow`'s numbers; new
    shapes, other dtypes and wrong ranks still go through `_slow` (and wrong
    ranks on to NumPy's kernel, whose errors eager execution reports)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 16, 16, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    geometry = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    compiled_of("conv2d", x, w, **geometry)
    eager_kernels.settle()
    op = compiled_of("conv2d", x, w, **geometry)
    assert isinstance(op, CompiledOp) and op._static_shapes is None
    want = op._slow((x, w))  # remembers the shapes
    slow_calls = []
    slow = CompiledOp._slow
    monkeypatch.setattr(CompiledOp, "_slow",
                        lambda self, values: slow_calls.append(values) or slow(self, values))
    np.testing.assert_array_equal(op(x, w), want)
    assert slow_calls == []
    other = rng.standard_normal((2, 8, 8, 8)).astype(np.float32)  # shapes not seen yet
    np.testing.assert_allclose(op(other, w), REGISTRY["conv2d"].kernel(other, w, **geometry),
                               rtol=1e-4, atol=1e-4)
    assert len(slow_calls) == 1
    op(other, w)  # remembered now
    assert len(slow_calls) == 1
    np.testing.assert_allclose(op(x.astype(np.float64), w), want, rtol=1e-4, atol=1e-4)
    assert len(slow_calls) == 2
    np.testing.assert_allclose(op(np.asfortranarray(x), w), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        op(x[0], w)  # rank 3: NumPy's kernel refuses it
    with pytest.raises(ValueError, match="conv2d"):
        sf.nn.conv2d(sf.constant(x[0]), sf.constant(w), 1, "SAME")


def test_a_signature_asks_for_its_route_once(monkeypatch):
    """The eager executor builds an op's signature once a call: its first call runs the
    shape rule and asks `KERNELS.route` under that key, later calls find the route kept;
    an unhashable param skips the table (checked every time, NumPy's kernel) without an
    error."""
    trace = EagerTrace()
    seen = []
    monkeypatch.setattr(KERNELS, "route",
                        lambda p, v, params, key, routes: seen.append(key))
    x = sf.constant(np.ones((1, 4, 4, 2), np.float32))
    w = sf.constant(np.ones((3, 3, 2, 2), np.float32))
    conv = REGISTRY["conv2d"]
    params = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    trace.process(conv, (x, w), params)
    trace.process(conv, (x, w), params)
    assert seen == [(conv, (np.dtype(np.float32), (1, 4, 4, 2)),
                     (np.dtype(np.float32), (3, 3, 2, 2)), *params.items())]
    assert trace._routes == {seen[0]: None}
    unhashable = {"strides": [1, 1], "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    result = trace.process(conv, (x, w), unhashable)
    assert len(seen) == 1 and result.shape == (1, 4, 4, 2)
    with pytest.raises(ValueError, match="conv2d"):  # the shape rule still runs each time
        trace.process(conv, (x, sf.constant(np.ones((3, 3, 5, 2), np.float32))), unhashable)
