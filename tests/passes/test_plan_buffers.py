"""The `plan-buffers` pass and the runtime following its plan: live ranges, buffer reuse,
in-place kernel results, the peak and lower-bound figures, and the bytes really held."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.func import FuncOp

import stageflow as sf
from stageflow.ir.attributes import decode
from stageflow.ir.text import parse_module
from stageflow.passes import Pipeline
from stageflow.passes.plan_buffers import BUFFER_ATTR, IN_PLACE_ATTR
from stageflow.runtime.executable import InPlaceKernel

KERNELS = """
func.func @exp_kernel(%x: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {sf.kernel} {
  %e = sf.exp %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %e : tensor<4x4xf32>
}
func.func @add_kernel(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32>
    attributes {sf.kernel} {
  %e = sf.add %x, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return %e : tensor<4x4xf32>
}
func.func @scale_both(%x: tensor<4x4xf32>, %r: tensor<4x1xf32>)
    -> (tensor<4x4xf32>, tensor<4x1xf32>) attributes {sf.kernel} {
  %e = sf.exp %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = sf.negative %r : (tensor<4x1xf32>) -> tensor<4x1xf32>
  func.return %e, %n : tensor<4x4xf32>, tensor<4x1xf32>
}
func.func @row_kernel(%x: tensor<4x4xf32>, %y: tensor<4x1xf32>) -> tensor<4x4xf32>
    attributes {sf.kernel} {
  %e = sf.add %x, %y : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  func.return %e : tensor<4x4xf32>
}
"""
T = "tensor<4x4xf32>"


def planned(body: str, args: str = f"%x: {T}", results: str = T) -> FuncOp:
    """The function @f of `body` (plus the kernels above) after ``plan-buffers``."""
    module = parse_module(f"func.func @f({args}) -> ({results}) {{\n{body}\n}}\n{KERNELS}")
    Pipeline.parse("plan-buffers").run(module)
    function = next(op for op in module.ops if isinstance(op, FuncOp))
    return function


def attrs(function: FuncOp, name: str) -> dict[str, object]:
    """`name` (``sf.buffer``, ``sf.in_place``) of each op that has it, by result name."""
    block = function.body.blocks[0]
    return {op.results[0].name_hint: decode(op.attributes[name])
            for op in block.ops if name in op.attributes}


def figures(function: FuncOp) -> tuple[int, int]:
    return (decode(function.attributes["sf.peak_bytes"]),
            decode(function.attributes["sf.lower_bound_bytes"]))


# --- The pass ----------------------------------------------------------------------------


def test_a_chain_runs_in_one_buffer_in_place() -> None:
    function = planned(f"""
  %a = sf.call %x {{callee = @exp_kernel}} : ({T}) -> {T}
  %b = sf.call %a {{callee = @exp_kernel}} : ({T}) -> {T}
  %c = sf.call %b {{callee = @exp_kernel}} : ({T}) -> {T}
  %s = sf.reduce_sum %c {{axes = [0, 1], keepdims = false}} : ({T}) -> tensor<f32>
  func.return %s : tensor<f32>""", results="tensor<f32>")
    assert attrs(function, BUFFER_ATTR) == {"a": 0, "b": 0, "c": 0}
    assert attrs(function, IN_PLACE_ATTR) == {"b": (0,), "c": (0,)}  # in place, twice
    assert figures(function) == (64, 64)


def test_no_in_place_into_arguments_live_values_broadcasts_or_results() -> None:
    function = planned(f"""
  %a = sf.call %x {{callee = @exp_kernel}} : ({T}) -> {T}
  %b = sf.call %a {{callee = @exp_kernel}} : ({T}) -> {T}
  %c = sf.call %a, %b {{callee = @add_kernel}} : ({T}, {T}) -> {T}
  %r = sf.reduce_sum %c {{axes = [1], keepdims = true}} : ({T}) -> tensor<4x1xf32>
  %d = sf.call %c, %r {{callee = @row_kernel}} : ({T}, tensor<4x1xf32>) -> {T}
  %e = sf.call %d {{callee = @exp_kernel}} : ({T}) -> {T}
  func.return %e : {T}""")
    # %a is read again by the third call, where %c takes it (the first operand dying
    # there); %d overwrites %c, not the 4x1 %r; %e is returned, so it takes no buffer. %r
    # (16 bytes) takes a new buffer rather than the free 64 bytes of %b's.
    assert attrs(function, IN_PLACE_ATTR) == {"c": (0,), "d": (0,)}
    assert attrs(function, BUFFER_ATTR) == {"a": 0, "b": 1, "c": 0, "r": 2, "d": 0}
    assert figures(function) == (64 + 64 + 16, 128)


def test_no_in_place_for_a_result_smaller_than_the_iteration_space() -> None:
    """The 4x1 result is written once per column of the 4x4 iteration space: in place, its
    second write would read an operand the first already overwrote."""
    function = planned(f"""
  %a = sf.call %x {{callee = @exp_kernel}} : ({T}) -> {T}
  %r = sf.reduce_sum %a {{axes = [1], keepdims = true}} : ({T}) -> tensor<4x1xf32>
  %b, %n = sf.call %a, %r {{callee = @scale_both}} : ({T}, tensor<4x1xf32>)
      -> ({T}, tensor<4x1xf32>)
  %c = sf.call %b, %n {{callee = @row_kernel}} : ({T}, tensor<4x1xf32>) -> {T}
  func.return %c : {T}""")
    assert attrs(function, IN_PLACE_ATTR)["b"] == (0, -1)


def test_views_keep_their_buffer_live_and_reuse_is_best_fit() -> None:
    function = planned(f"""
  %a = sf.call %x {{callee = @exp_kernel}} : ({T}) -> {T}
  %v = sf.reshape %a {{shape = [16]}} : ({T}) -> tensor<16xf32>
  %b = sf.call %a {{callee = @exp_kernel}} : ({T}) -> {T}
  %r = sf.reduce_sum %b {{axes = [1], keepdims = false}} : ({T}) -> tensor<4xf32>
  %t = sf.reduce_sum %v {{axes = [0], keepdims = false}} : (tensor<16xf32>) -> tensor<f32>
  %c = sf.call %x {{callee = @exp_kernel}} : ({T}) -> {T}
  %o = sf.add %c, %t : ({T}, tensor<f32>) -> {T}
  %p = sf.add %o, %r : ({T}, tensor<4xf32>) -> {T}
  func.return %p : {T}""")
    assert attrs(function, IN_PLACE_ATTR) == {}  # the view %v still reads %a's memory
    buffers = attrs(function, BUFFER_ATTR)
    assert buffers["v"] == buffers["a"] == 0 and buffers["b"] == 1
    # %t (4 bytes) takes no 64-byte buffer but a new one: the free buffer 1 is left for %o
    assert (buffers["r"], buffers["t"]) == (2, 3) and {buffers["c"], buffers["o"]} == {0, 1}
    assert figures(function) == (64 + 64 + 16 + 4,) * 2  # live at %o: %c, %o, %r, %t


def test_variables_and_unknown_dims() -> None:
    function = planned(f"""
  %w = sf.read_variable %v : (!sf.resource<{T}>) -> {T}
  %a = sf.call %w {{callee = @exp_kernel}} : ({T}) -> {T}
  %n = sf.call %a {{callee = @exp_kernel}} : ({T}) -> {T}
  sf.assign_variable %v, %n : (!sf.resource<{T}>, {T}) -> ()
  %d = sf.exp %y : (tensor<?x4xf32>) -> tensor<?x4xf32>
  func.return %d : tensor<?x4xf32>""",
        args=f"%v: !sf.resource<{T}>, %y: tensor<?x4xf32>", results="tensor<?x4xf32>")
    # The variable's storage is no temporary and the value stored into it outlives the
    # call: neither is overwritten nor counted. %d is returned.
    assert attrs(function, BUFFER_ATTR) == {"a": 0}
    assert attrs(function, IN_PLACE_ATTR) == {}
    assert figures(function) == (64, 64)
    unsized = planned("""
  %d = sf.exp %y : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %s = sf.reduce_sum %d {axes = [0, 1], keepdims = false} : (tensor<?x4xf32>) -> tensor<f32>
  func.return %s : tensor<f32>""", args="%y: tensor<?x4xf32>", results="tensor<f32>")
    assert decode(unsized.attributes["sf.unsized_temporaries"]) == 1
    assert figures(unsized) == (0, 0)


# --- The runtime -------------------------------------------------------------------------


def kernel_steps(function, *args) -> list:
    return [s[0] for s in function.get_concrete_function(*args).program.plan.steps
            if s[5] == "kernel"]


def test_in_place_kernel_overwrites_only_arrays_it_may() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 8, 8)).astype(np.float32)

    @sf.function
    def reused(x, w):
        m = sf.matmul(x, w)
        return sf.reduce_sum(sf.exp(m)) + sf.reduce_sum(m)

    assert not isinstance(kernel_steps(reused, x, w)[0], InPlaceKernel)  # m is read later

    def model(x, w):
        return sf.matmul(sf.nn.relu(sf.matmul(x, w) + 1.0), w)

    staged = sf.function(model)
    kernel = kernel_steps(staged, x, w)[0]
    assert isinstance(kernel, InPlaceKernel)
    fresh = x @ w
    assert kernel(fresh)[0] is fresh  # the matmul's new array is overwritten
    view = np.ones((8, 16), np.float32)[:, :8]
    assert kernel(view)[0] is not view  # a view (of anybody's memory) is not
    before = x.copy()
    want = sf.function(model, jit=False)(x, w).numpy()
    np.testing.assert_allclose(staged(x, w).numpy(), want, rtol=1e-5)
    np.testing.assert_array_equal(x, before)


def test_compiled_with_the_plan_matches_the_interpreter() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 8)).astype(np.float32)
    w = rng.normal(size=(8, 8)).astype(np.float32)

    def model(x, w):
        h = sf.tanh(sf.matmul(x, w)) * 0.5
        h = sf.nn.relu(sf.matmul(h, w) - sf.reduce_mean(h, axis=1, keepdims=True))
        g = sf.exp(sf.matmul(h, w) - sf.reduce_max(h))
        return sf.reduce_sum(g, axis=0), h[:, :3]

    compiled, interpreted = sf.function(model), sf.function(model, jit=False)
    for _ in range(2):
        for got, want in zip(compiled(x, w), interpreted(x, w), strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_stats_report_the_plan_and_the_measured_peak() -> None:
    @sf.function
    def f(x):
        return sf.reduce_sum(sf.exp(sf.matmul(x, x)) + 1.0)

    x = np.ones((8, 8), np.float32)
    concrete = f.get_concrete_function(x)
    stats = concrete.stats()
    assert stats["peak_temporary_bytes"] == stats["lower_bound_bytes"] == 8 * 8 * 4
    assert stats["measured_peak_temporary_bytes"] is None
    concrete.program.track_memory()
    f(x)
    assert concrete.stats()["measured_peak_temporary_bytes"] == 8 * 8 * 4
    concrete.program.track_memory(False)
    assert concrete.stats()["measured_peak_temporary_bytes"] is None


def mlp_train_step(params: list[sf.Variable]):
    """The SGD step of ``benchmarks/mlp_train.py`` (784-256-256-10, ReLU, cross-entropy)."""

    def train_step(x, y):
        with sf.GradientTape() as tape:
            h = x
            for i in range(0, len(params) - 2, 2):
                h = sf.nn.relu(h @ params[i] + params[i + 1])
            logits = h @ params[-2] + params[-1]
            loss = sf.reduce_mean(sf.nn.softmax_cross_entropy_with_logits(y, logits))
        for p, g in zip(params, tape.gradient(loss, params), strict=True):
            p.assign_sub(0.01 * g)
        return loss

    return train_step


def test_mlp_training_step_peak_is_near_the_lower_bound() -> None:
    rng = np.random.default_rng(0)
    sizes = [784, 256, 256, 10]
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        params += [rng.normal(size=(n_in, n_out)) * np.sqrt(2.0 / n_in), np.zeros(n_out)]
    x = sf.constant(rng.normal(size=(64, 784)).astype(np.float32))
    y = sf.constant(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)])
    step = sf.function(mlp_train_step([sf.Variable(p.astype(np.float32)) for p in params]))
    eager = mlp_train_step([sf.Variable(p.astype(np.float32)) for p in params])
    concrete = step.get_concrete_function(x, y)
    concrete.program.track_memory()
    for _ in range(2):
        np.testing.assert_allclose(float(step(x, y)), float(eager(x, y)), rtol=1e-5)
    stats = concrete.stats()
    lower_bound = stats["lower_bound_bytes"]
    assert lower_bound > 0
    assert stats["peak_temporary_bytes"] <= 1.25 * lower_bound
    assert lower_bound <= stats["measured_peak_temporary_bytes"] <= 1.25 * lower_bound
