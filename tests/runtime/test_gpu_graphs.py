"""Launch graphs: a staged function on a GPU is recorded on its second call of a signature
and replayed as one graph from the third (a loop's body: recorded on its second iteration,
replayed from the third), where it stays on the GPU, has no effects and the graph pays.
Replays must give what the plan gives for any arguments, return new arrays every call, and
keep alive what they read."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import stageflow as sf
from stageflow.runtime import devices as runtime_devices
from stageflow.runtime import gpu_graphs
from stageflow.runtime.executable import Segment, WhileRunner
from stageflow.runtime.gpu_graphs import LaunchGraph, pays

GPU = "/device:GPU:0"


def states(f, *args):
    with sf.device(GPU):
        concrete = f.get_concrete_function(*args)
    graphs, _ = concrete._gpu_programs[GPU]
    return list(graphs._states.values())


def chain(x, y):
    """About ten launches: kernels and the moves between them."""
    h = sf.tanh(x * y + 1.0)
    for _ in range(3):
        h = sf.transpose(h)[::-1] * 0.5 + h
    return h, sf.exp(-h)


@pytest.fixture
def counted(monkeypatch):
    """The number of graph launches and of launches outside them the GPU's driver makes
    (an emulated graph launches its kernels one by one)."""
    driver = runtime_devices.get(GPU).driver
    counts = {"graphs": 0, "launches": 0}
    replaying = []

    def counting(name, method):
        def run(*args, **kwargs):
            counts[name] += not replaying
            if name == "graphs":
                replaying.append(True)
            try:
                return method(*args, **kwargs)
            finally:
                if name == "graphs":
                    replaying.pop()
        return run

    monkeypatch.setattr(driver, "launch_graph", counting("graphs", driver.launch_graph))
    monkeypatch.setattr(driver, "launch", counting("launches", driver.launch))
    monkeypatch.setattr(driver, "call", counting("launches", driver.call))
    return counts


def test_the_third_call_replays_the_second_as_one_graph(counted):
    f = sf.function(chain)
    rng = np.random.default_rng(0)
    results = []
    for call in range(5):
        x, y = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
        launches = counted["launches"]
        with sf.device(GPU):
            got = f(sf.constant(x).gpu(), sf.constant(y).gpu())
        if call >= 2:  # one graph launch, no launch of its own
            assert counted["launches"] == launches and counted["graphs"] == call - 1
        want = chain(sf.constant(x), sf.constant(y))
        for g, w in zip(got, want, strict=True):
            assert g.device == GPU
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-7)
        results.append((got, [w.numpy() for w in want]))
    assert [type(s) for s in states(f, sf.constant(x).gpu(), sf.constant(y).gpu())] \
        == [LaunchGraph]
    for got, want in results:  # every call's results are its own arrays
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-6, atol=1e-7)


def test_a_graph_keeps_what_it_reads_alive():
    weights = sf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    f = sf.function(lambda x: sf.transpose(sf.tanh(x * weights))[::-1] + 1.0)
    x = sf.constant(np.ones((3, 4), np.float32)).gpu()
    with sf.device(GPU):
        for _ in range(3):
            got = f(x)
    [graph] = states(f, x)
    # x is copied in at every call; the captured weights and the transpose's index map are
    # read where they are, and kept alive by the graph however the device drops them
    assert isinstance(graph, LaunchGraph) and list(graph.arguments) == [0]
    runtime_devices.get(GPU)._maps.clear()
    gc.collect()
    noise = [sf.constant(np.full(12, 7, np.int64)).gpu() for _ in range(4)]
    with sf.device(GPU):
        again = f(x)
    want = np.tanh(weights.numpy()).T[::-1] + 1.0
    np.testing.assert_allclose(again.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    del noise


def test_host_work_keeps_the_plan():
    f = sf.function(lambda x: sf.sort(sf.exp(x)) * 2.0)  # sort: a host step
    x = sf.constant(np.array([3.0, 1.0, 2.0], np.float32)).gpu()
    with sf.device(GPU):
        for _ in range(3):
            got = f(x)
    assert states(f, x) == ["plan"]
    np.testing.assert_allclose(got.numpy(), 2 * np.sort(np.exp([3.0, 1.0, 2.0])), rtol=1e-6)


def test_effects_keep_the_plan():
    v = sf.Variable(np.zeros(3, np.float32))

    @sf.function
    def step(x):
        v.assign_add(x)
        return sf.exp(x) * 2.0 + 1.0

    x = sf.constant(np.ones(3, np.float32)).gpu()
    with sf.device(GPU):
        for _ in range(3):
            step(x)
    np.testing.assert_allclose(v.numpy(), [3.0, 3.0, 3.0])
    with sf.device(GPU):
        concrete = step.get_concrete_function(x)
    graphs, _ = concrete._gpu_programs[GPU]
    assert not graphs.replayable


def test_a_graph_reads_the_variables_of_the_gpu_and_records_again_after_a_write(counted):
    """A model's forward pass reads its weights: the graph reads each variable's array in
    place, and a write (which replaces the array) makes the next call record again, so a
    replay never reads a value the variable no longer holds."""
    with sf.device(GPU):
        w = sf.Variable(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4))
    f = sf.function(chain)
    x = sf.constant(np.ones((4, 4), np.float32)).gpu()
    graphs = []
    for call in range(7):
        if call == 4:
            with sf.device(GPU):
                w.assign(w * 2.0)
        with sf.device(GPU):
            got = f(x, w)
        graphs.append(counted["graphs"])
        want = chain(sf.constant(x.numpy()), sf.constant(w.numpy()))
        for g, expected in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    # planned, recorded, replayed twice; after the write: recorded again, then replayed
    assert graphs == [0, 0, 1, 2, 2, 3, 4]
    assert [type(s) for s in states(f, x, w)] == [LaunchGraph]


def test_a_graph_pays_for_many_small_launches_not_for_big_copies():
    assert pays(calls=8, copies=3, copy_bytes=3 * 4096)
    assert not pays(calls=1, copies=2, copy_bytes=8)  # one launch: nothing to save
    assert not pays(calls=4, copies=2, copy_bytes=2 * 64 << 20)  # copies cost more
    f = sf.function(lambda x: sf.exp(x) * 2.0)  # one fused kernel
    x = sf.constant(np.ones(5, np.float32)).gpu()
    with sf.device(GPU):
        for _ in range(3):
            f(x)
    assert states(f, x) == ["plan"]


def test_graphs_are_kept_per_signature(monkeypatch):
    monkeypatch.setattr(gpu_graphs, "MAX_SIGNATURES", 2)
    f = sf.function(chain, input_signature=[sf.TensorSpec([None, None], sf.float32)] * 2)
    for side in [1, 2, 3, 2]:
        x = sf.constant(np.linspace(0, 1, side * side, dtype=np.float32).reshape(side, side))
        want = [t.numpy() for t in chain(x, x)]
        with sf.device(GPU):
            for _ in range(3):
                got = f(x.gpu(), x.gpu())
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)
    found = states(f, x, x)
    assert len(found) == 2 and all(isinstance(state, LaunchGraph) for state in found)


def test_launch_graphs_can_be_turned_off(monkeypatch, counted):
    monkeypatch.setattr(sf.config, "launch_graphs", False)
    f = sf.function(chain)
    x = sf.constant(np.ones((4, 4), np.float32)).gpu()
    with sf.device(GPU):
        for _ in range(3):
            f(x, x)
    assert states(f, x, x) == [] and counted["graphs"] == 0


def test_an_argument_passed_again_is_not_copied_again(monkeypatch):
    f = sf.function(chain)
    rng = np.random.default_rng(1)
    weights = sf.constant(rng.standard_normal((4, 4)).astype(np.float32)).gpu()
    driver = runtime_devices.get(GPU).driver
    copied = []
    copy = driver.copy
    monkeypatch.setattr(driver, "copy", lambda *args: (copied.append(args[-1]), copy(*args)))
    for call in range(5):
        x = rng.standard_normal((4, 4)).astype(np.float32)
        before = len(copied)
        with sf.device(GPU):
            got = f(sf.constant(x).gpu(), weights)
        if call >= 3:  # x copied in, two results copied out; the weights stay
            assert len(copied) - before == 3
        want = chain(sf.constant(x), weights.cpu())
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-7)


def test_an_argument_passed_twice_is_another_signature():
    f = sf.function(chain)
    rng = np.random.default_rng(2)
    x = sf.constant(rng.standard_normal((4, 4)).astype(np.float32)).gpu()
    with sf.device(GPU):
        for _ in range(3):
            f(x, x)  # recorded and replayed with one array for both arguments
        for _ in range(3):
            y = sf.constant(rng.standard_normal((4, 4)).astype(np.float32)).gpu()
            got = f(x, y)
            want = chain(x.cpu(), y.cpu())
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-7)


def loop(x, y, v):
    """A while loop whose body launches about ten kernels and reads a value from above
    (`scale`, computed from the call's arguments) and a variable."""
    scale = sf.reduce_sum(y) * 0.01

    def body(i, h):
        for _ in range(3):
            h = sf.tanh(sf.transpose(h)[::-1] * scale + h * v)
        return i + 1, h

    return sf.while_loop(lambda i, h: i < 6, body, (sf.constant(0), x))[1]


def weights_on_the_gpu(seed: int) -> tuple[np.random.Generator, sf.Variable]:
    """A generator of `seed`, and a (4, 4) variable of the GPU drawn from it."""
    rng = np.random.default_rng(seed)
    with sf.device(GPU):
        return rng, sf.Variable(rng.standard_normal((4, 4)).astype(np.float32))


def test_a_loops_body_replays_as_a_graph_from_its_third_iteration(counted):
    """Six iterations: the first runs the body's plan, the second records it, the other
    four replay it; only the loop's condition launches on its own. A value from above that
    changes between calls (`scale`) is an argument of the body's graph, never a stale
    array of an earlier call."""
    f = sf.function(loop)
    rng, v = weights_on_the_gpu(3)
    results = []
    for call in range(3):
        x, y = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
        graphs, launches = counted["graphs"], counted["launches"]
        with sf.device(GPU):
            got = f(sf.constant(x).gpu(), sf.constant(y).gpu(), v)
        replays = counted["graphs"] - graphs
        assert replays == (4 if call == 0 else 6)
        body_launches = counted["launches"] - launches
        assert body_launches <= 20 * (6 - replays) + 3 * 7 + 5
        want = loop(sf.constant(x), sf.constant(y), sf.Variable(v.numpy()))
        assert got.device == GPU
        results.append((got, want.numpy()))
    for got, want in results:  # each call's result is its own, not a block of the graph
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=1e-6)


def test_a_loops_carried_values_stay_in_the_graphs_blocks(monkeypatch):
    """From the third iteration on, an iteration is one graph launch that leaves the
    carried values where the next one reads them: no copy per iteration, however many."""
    driver = runtime_devices.get(GPU).driver
    copied, replaying = [], []
    copy, launch_graph = driver.copy, driver.launch_graph

    def replay(graph):
        replaying.append(graph)
        launch_graph(graph)
        replaying.pop()

    monkeypatch.setattr(driver, "launch_graph", replay)
    monkeypatch.setattr(driver, "copy", lambda *args: (
        None if replaying else copied.append(args[-1]), copy(*args)))

    @sf.function
    def count(x, n):
        def body(i, h):
            for _ in range(3):
                h = sf.tanh(sf.transpose(h)[::-1] * 0.5 + h) + sf.exp(-h)
            return i + 1, h
        return sf.while_loop(lambda i, h: i < n, body, (sf.constant(0), x))

    x = sf.constant(np.full((4, 4), 0.25, np.float32)).gpu()
    for n in (3, 40):  # the first call's first two iterations run the body's plan
        before = len(copied)
        with sf.device(GPU):
            i, h = count(x, sf.constant(n).gpu())
        assert n == 3 or len(copied) - before <= 4  # x in; the results out
        want = np.full((4, 4), 0.25, np.float32)
        for _ in range(3 * n):
            want = np.tanh(want.T[::-1] * 0.5 + want) + np.exp(-want)
        assert int(i.numpy()) == n
        np.testing.assert_allclose(h.numpy(), want, rtol=2e-5, atol=1e-6)


def test_a_loops_body_reads_a_variables_new_value_after_a_write(counted):
    f = sf.function(loop)
    x = sf.constant(np.full((4, 4), 0.5, np.float32)).gpu()
    y = sf.constant(np.ones((4, 4), np.float32)).gpu()
    with sf.device(GPU):
        v = sf.Variable(np.ones((4, 4), np.float32))
        f(x, y, v)
        v.assign(np.full((4, 4), -2.0, np.float32))
        got = f(x, y, v)
    want = loop(x.cpu(), y.cpu(), sf.Variable(np.full((4, 4), -2.0, np.float32)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("called", [False, True])
def test_a_loops_body_with_effects_runs_its_plan(counted, called):
    """A write in the body, or in a function the body calls (one too large to inline),
    keeps the body's plan."""
    with sf.device(GPU):
        total = sf.Variable(np.zeros(3, np.float32))

    def add(h):
        return total.assign_add(sf.tanh(sf.exp(h) * 2.0 + 1.0) * sf.sin(h) * sf.cos(h) + h)

    @sf.function
    def accumulate(x):
        def body(i, h):
            (sf.function(add) if called else add)(h)
            return i + 1, sf.exp(h) * 0.5
        return sf.while_loop(lambda i, h: i < 5, body, (sf.constant(0), x))[1]

    x = np.array([0.1, 0.2, 0.3], np.float32)
    with sf.device(GPU):
        accumulate(sf.constant(x).gpu())
    h, want = x, np.zeros(3, np.float32)
    for _ in range(5):
        want += np.tanh(np.exp(h) * 2.0 + 1.0) * np.sin(h) * np.cos(h) + h
        h = np.exp(h) * 0.5
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-5)
    assert counted["graphs"] == 0
    with sf.device(GPU):
        concrete = accumulate.get_concrete_function(sf.constant(x).gpu())
    graphs, _ = concrete._gpu_programs[GPU]
    [loop_step] = [s for s in graphs.program.plan.steps if isinstance(s.kernel, WhileRunner)]
    assert not loop_step.kernel.body.replayable


def around_a_loop(x, v):
    """About ten launches before a loop and ten after it, reading a variable."""
    h = chain(x, v)[0]
    h = sf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, sf.tanh(h) * 0.5),
                      (sf.constant(0), h))[1]
    return chain(h, v)


def test_the_steps_around_a_loop_replay_as_graphs(counted):
    """A function with a loop is no graph of its own, but each run of steps between its
    control-flow ops is (a decoder's prompt step): from the third call on, only the loop's
    own steps (its condition, its small body) launch outside a graph."""
    f = sf.function(around_a_loop)
    rng, v = weights_on_the_gpu(4)
    results = []
    for call in range(4):
        x = rng.standard_normal((4, 4)).astype(np.float32)
        graphs, launches = counted["graphs"], counted["launches"]
        with sf.device(GPU):
            got = f(sf.constant(x).gpu(), v)
        if call >= 2:
            assert counted["graphs"] - graphs == 2
            assert counted["launches"] - launches <= 3 * 3
        want = around_a_loop(sf.constant(x), sf.Variable(v.numpy()))
        results.append((got, [w.numpy() for w in want]))
    for got, want in results:
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=2e-5, atol=1e-6)


def test_steps_with_effects_around_a_loop_stay_steps(counted):
    with sf.device(GPU):
        total = sf.Variable(np.zeros((4, 4), np.float32))

    @sf.function
    def accumulate(x):
        total.assign_add(chain(x, x)[0])
        return around_a_loop(x, total)[1]

    x = np.full((4, 4), 0.1, np.float32)
    with sf.device(GPU):
        for _ in range(3):
            got = accumulate(sf.constant(x).gpu())
    np.testing.assert_allclose(total.numpy(), 3 * chain(sf.constant(x), sf.constant(x))[0]
                               .numpy(), rtol=1e-5)
    want = around_a_loop(sf.constant(x), sf.Variable(total.numpy()))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)
    with sf.device(GPU):
        concrete = accumulate.get_concrete_function(sf.constant(x).gpu())
    graphs, _ = concrete._gpu_programs[GPU]
    steps = graphs.program.plan.steps  # the write is a step of the plan, in no segment
    assert any(step.name == "assign_variable" for step in steps)
    assert any(isinstance(step.kernel, Segment) for step in steps)  # the steps after it
