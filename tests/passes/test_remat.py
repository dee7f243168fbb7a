"""Rematerialisation: the minimum cut is minimal, the rewritten forward/backward pair
computes the same gradients with fewer saved bytes, and the budget bounds recomputation.

The pass itself is shown on IR in ``lit_tests/passes/remat.mlir``; here the same pass runs
behind staged functions differentiated under an eager tape, whose gradients are compared
with the pass turned off (`sf.config.remat`) and with plain eager execution.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core import config
from stageflow.ir.text import parse_module
from stageflow.passes.min_cut import INFINITY, FlowNetwork
from stageflow.passes.remat import MAX_DEPTH, choose_cut, residual_count
from stageflow.passes.support import functions


@st.composite
def networks(draw):
    size = draw(st.integers(2, 6))
    pairs = [(a, b) for a in range(size) for b in range(size) if a != b]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs)))
    capacities = draw(st.lists(st.integers(0, 9), min_size=len(chosen),
                               max_size=len(chosen)))
    return size, list(zip(chosen, capacities, strict=True))


@given(networks())
def test_max_flow_equals_the_brute_force_minimum_cut(network):
    size, edges = network
    graph = FlowNetwork(size)
    for (a, b), capacity in edges:
        graph.add_edge(a, b, capacity)
    flow = graph.max_flow(0, size - 1)
    best = min(
        sum(c for (a, b), c in edges if a in side and b not in side)
        for r in range(size - 1)
        for rest in itertools.combinations(range(1, size - 1), r)
        for side in [{0, *rest}]
    )
    assert flow == best
    sink_side = graph.reaches(size - 1)
    assert 0 not in sink_side
    assert sum(c for (a, b), c in edges if a not in sink_side and b in sink_side) == flow


def test_infinite_edges_are_never_cut():
    graph = FlowNetwork(4)
    graph.add_edge(0, 1, INFINITY)
    graph.add_edge(1, 2, 5)
    graph.add_edge(1, 3, 7)
    graph.add_edge(2, 3, INFINITY)
    assert graph.max_flow(0, 3) == 12
    assert graph.reaches(3) == {2, 3}


PAIR = """
func.func @f_forward(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
    attributes {sf.residuals = 2 : i64} {
  %a = sf.multiply %x, %x : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %b = sf.exp %a : (tensor<64xf32>) -> tensor<64xf32>
  %c = sf.add %b, %a : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %c, %a, %b : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}
"""


@pytest.mark.parametrize(("budget", "saved", "recomputed"), [
    (2.0, ["a"], ["exp"]),  # `%x` would cost as many bytes and redo the multiply
    (0.0, ["a", "b"], []),
])
def test_budget_bounds_the_recomputed_work(budget, saved, recomputed):
    forward = functions(parse_module(PAIR))["f_forward"]
    ret = forward.body.block.last_op
    cut = choose_cut(forward, list(ret.operands[1:]), budget)
    assert [v.name_hint for v in cut.saved] == saved
    assert [op.name.removeprefix("sf.") for op in cut.recomputed] == recomputed
    assert residual_count(forward) == 2


def test_long_recompute_chains_are_cut():
    """Saving the narrow input and recomputing a long chain of wide values from it would be
    the cheapest cut; a chain longer than MAX_DEPTH is cut by saving a value in it."""
    n = 40
    wide = "tensor<64x64xf32>"
    body = "\n".join(f"  %w{i + 1} = sf.exp %w{i} : ({wide}) -> {wide}" for i in range(n))
    forward = functions(parse_module(f"""
func.func @f_forward(%x: tensor<64xf32>) -> ({wide}, {wide})
    attributes {{sf.residuals = 1 : i64}} {{
  %w0 = sf.broadcast_to %x {{shape = [64, 64]}} : (tensor<64xf32>) -> {wide}
{body}
  func.return %w{n}, %w{n} : {wide}, {wide}
}}"""))["f_forward"]
    ret = forward.body.block.last_op
    cut = choose_cut(forward, [ret.operands[1]], budget=100.0)
    assert [v.name_hint for v in cut.saved] != ["x"]  # the whole chain is not redone
    assert len(cut.recomputed) <= MAX_DEPTH


def deep_net(depth: int, width: int, seed: int = 0, dtype=np.float64):
    """A residual tanh/gelu network and its variables (an elementwise-heavy stack)."""
    rng = np.random.default_rng(seed)
    weights = [sf.Variable((rng.standard_normal((width, width)) / width**0.5).astype(dtype))
               for _ in range(depth)]
    biases = [sf.Variable((rng.standard_normal(width) * 0.1).astype(dtype))
              for _ in range(depth)]

    def loss(x):
        h = x
        for w, b in zip(weights, biases, strict=True):
            z = sf.matmul(h, w) + b
            h = h + sf.nn.gelu(z, approximate=True) * sf.sigmoid(z) - 0.1 * sf.tanh(z)
        return sf.reduce_mean(h * h)

    return loss, weights + biases


def gradients(loss, variables, x, remat: bool, staged: bool = True):
    config.remat = remat
    try:
        f = sf.function(loss) if staged else loss
        with sf.GradientTape() as tape:
            tape.watch(x)
            value = f(x)
        grads = tape.gradient(value, [x, *variables])
        fb = f.get_concrete_function(x)._forward_backward if staged else None
        return value.numpy(), [g.numpy() for g in grads], fb
    finally:
        config.remat = True


def test_remat_keeps_gradients_and_saves_memory():
    loss, variables = deep_net(depth=6, width=32)
    x = sf.constant(np.random.default_rng(1).standard_normal((16, 32)))
    eager_value, eager_grads, _ = gradients(loss, variables, x, remat=True, staged=False)
    forward_backward = {}
    for remat in (True, False):
        value, grads, forward_backward[remat] = gradients(loss, variables, x, remat=remat)
        np.testing.assert_allclose(value, eager_value, rtol=1e-12)
        for g, e in zip(grads, eager_grads, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
    cut, kept = forward_backward[True], forward_backward[False]
    assert "sf.forward = @" in cut.module_text
    assert cut.residual_bytes <= 0.6 * kept.residual_bytes


@pytest.mark.slow
@settings(max_examples=6)  # each example compiles two functions
@given(st.integers(1, 4), st.integers(1, 5), st.sampled_from([np.float32, np.float64]))
def test_remat_matches_no_remat_on_random_shapes(depth, batch, dtype):
    loss, variables = deep_net(depth=depth, width=4, seed=depth, dtype=dtype)
    x = sf.constant(np.random.default_rng(batch).standard_normal((batch, 4)).astype(dtype))
    _, with_remat, _ = gradients(loss, variables, x, remat=True)
    _, without, _ = gradients(loss, variables, x, remat=False)
    tolerance = 1e-4 if dtype == np.float32 else 1e-10
    for a, b in zip(with_remat, without, strict=True):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)


def test_random_masks_are_saved_not_redrawn():
    """Dropout's random bits are never recomputed: the backward sees the forward's mask."""
    sf.random.set_seed(3)

    @sf.function
    def f(x):
        return sf.reduce_sum(sf.nn.dropout(sf.tanh(x), rate=0.5) * x)

    x = sf.constant(np.linspace(-1.0, 1.0, 64).reshape(8, 8))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    (g,) = tape.gradient(y, [x])
    mask = (g.numpy() != 0)
    t = np.tanh(x.numpy())
    expected = np.where(mask, 2 * ((1 - t**2) * x.numpy() + t), 0.0)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)
    assert 10 < mask.sum() < 54


def test_interpreted_functions_rematerialise_too():
    loss, variables = deep_net(depth=3, width=8)
    x = sf.constant(np.ones((2, 8)))
    config.remat = True
    f = sf.function(loss, jit=False)
    with sf.GradientTape() as tape:
        value = f(x)
    grads = tape.gradient(value, variables)
    _, expected, _ = gradients(loss, variables, x, remat=True, staged=False)
    for g, e in zip(grads, expected[1:], strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-10)
