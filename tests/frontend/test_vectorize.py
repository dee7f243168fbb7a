"""`sf.vectorized_map` against stacking per-example results, eagerly and staged: batching rules
for each op family, the while-loop fallback, nests, gradients, and the one batched graph."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

rng = np.random.default_rng(0)
W = rng.standard_normal((3, 4)).astype(np.float32)
B3 = rng.standard_normal((2, 3, 5)).astype(np.float32)

FUNCTIONS = {
    "elementwise": lambda x: sf.tanh(x) * 2.0 + sf.exp(-x * x),
    "broadcast_against_constants": lambda x: x[:, None] * sf.constant(W[:, :3]) + 1.0,
    "reductions": lambda x: sf.reduce_sum(x, axis=0) + sf.reduce_max(x) + sf.cast(
        sf.argmax(x), sf.float32),
    "matvec": lambda x: sf.matmul(x[None, :], sf.constant(W))[0],
    "batched_matmul_constant": lambda x: sf.matmul(sf.reshape(x, (1, 1, 3)),
                                                   sf.constant(B3)),
    "softmax_and_layernorm": lambda x: sf.nn.softmax(x) + sf.nn.layer_normalization(
        x, -1, 1e-3, None, None),
    "structural": lambda x: sf.concat([sf.transpose(sf.reshape(x, (3, 1))), x[None, ::-1]],
                                      axis=0),
    "padding_and_slices": lambda x: sf.pad(x, [[1, 2]])[1:4] * x[-1],
    "outer": lambda x: sf.matmul(x[:, None], x[None, :]),
    "sort_and_scans": lambda x: sf.sort(x) + sf.cumsum(x) * sf.math.cumprod(x, reverse=True),
    "gather_constant_indices": lambda x: sf.gather(x, [2, 0, 2]),
    "gather_example_indices": lambda x: sf.gather(sf.constant(np.arange(10.0, dtype=np.float32)),
                                                  sf.cast(sf.abs(x) * 3.0, sf.int32)),
    "control_flow": lambda x: sf.cond(sf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x),
}


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_matches_stacked_per_example_results(name, staged):
    fn = FUNCTIONS[name]
    xs = rng.standard_normal((6, 3)).astype(np.float32)
    run = sf.function(lambda v: sf.vectorized_map(fn, v)) if staged else (
        lambda v: sf.vectorized_map(fn, v))
    got = run(sf.constant(xs)).numpy()
    want = np.stack([fn(sf.constant(x)).numpy() for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_covered_ops_make_one_batched_graph_and_others_a_loop():
    covered = sf.function(lambda v: sf.vectorized_map(FUNCTIONS["softmax_and_layernorm"], v))
    looped = sf.function(lambda v: sf.vectorized_map(FUNCTIONS["gather_example_indices"], v))
    xs = sf.constant(rng.standard_normal((6, 3)).astype(np.float32))
    assert "sf.while" not in covered.get_concrete_function(xs).ir()
    assert "sf.while" in looped.get_concrete_function(xs).ir()
    with pytest.raises(NotImplementedError, match="no batching rule for sf.gather"):
        sf.vectorized_map(FUNCTIONS["gather_example_indices"], xs, fallback_to_while_loop=False)


def test_nests_in_and_out_and_results_independent_of_the_examples():
    xs = rng.standard_normal((4, 3)).astype(np.float32)
    ys = rng.standard_normal((4, 2)).astype(np.float32)
    out = sf.vectorized_map(lambda e: {"sum": sf.reduce_sum(e["x"]) + sf.reduce_sum(e["y"]),
                                       "fixed": sf.constant([1.0, 2.0])},
                            {"x": xs, "y": ys})
    np.testing.assert_allclose(out["sum"].numpy(), xs.sum(1) + ys.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(out["fixed"].numpy(), np.tile([1.0, 2.0], (4, 1)))


def test_gradients_flow_through():
    xs = rng.standard_normal((5, 3))
    weights = sf.Variable(rng.standard_normal((3,)))

    def loss(v):
        per_example = sf.vectorized_map(lambda x: sf.reduce_sum(sf.tanh(x * weights)), v)
        return sf.reduce_sum(per_example * per_example)

    with sf.GradientTape() as tape:
        value = loss(sf.constant(xs))
    got = tape.gradient(value, weights).numpy()
    eps, want = 1e-6, np.zeros(3)
    for i in range(3):
        step = np.zeros(3)
        step[i] = eps
        plus = np.sum(np.sum(np.tanh(xs * (weights.numpy() + step)), 1) ** 2)
        minus = np.sum(np.sum(np.tanh(xs * (weights.numpy() - step)), 1) ** 2)
        want[i] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_bad_elems_are_refused():
    with pytest.raises(ValueError, match="one leading dim"):
        sf.vectorized_map(lambda x: x, (sf.ones((3, 2)), sf.ones((4, 2))))
    with pytest.raises(ValueError, match="one leading dim"):
        sf.vectorized_map(lambda x: x, sf.constant(1.0))
