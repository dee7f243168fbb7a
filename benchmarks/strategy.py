"""MultiWorkerMirroredStrategy on a local Ray cluster: the workers' all-reduce, the
data-parallel step over two workers against one process, the coordinator's share of a
step, and a paper projection to 8 and 64 workers, in one run.

    python -m benchmarks.strategy [--quick]

1. All-reduce between two Ray workers, float32 buffers of 64 KiB, 1 MiB and 16 MiB: the
   callbacks a replica's staged step calls for a sum, its start and at once its wait
   (`worker_collectives.join` registers them; gloo through ``ray.util.collective``, on the
   group's collective thread), timed inside the workers, against a Ray
   object-store round trip of the same bytes between the same two workers (A puts, B
   gets, B's result comes back to A: the bytes each worker sends and receives in a
   two-worker ring all-reduce). Reported as seconds per call and algorithm bandwidth
   (buffer bytes / seconds).
2. One SGD step of an MLP 784-256-10 (ReLU, sparse softmax cross-entropy, float32, global
   batch 256): `MultiWorkerMirroredStrategy` over two workers, the step an `sf.function`
   compiled in each worker, against the same global batch in this process (a plain
   `sf.function` step, and the step under ``MirroredStrategy(["CPU:0"])``). Each worker's
   shard is placed there once, before timing: the figure is the steady-state step
   (compute, all-reduce, the coordinator's dispatch and the loss fetched each step), not
   the input pipeline. This model, not the examples' 64-128-10: its step (about 0.2
   GFLOP at batch 256) is large enough that the all-reduce of its 0.8 MB of gradients is
   not the whole step. Goal: at least 0.8x the single-process steps/s; here the two
   workers share the machine's cores with the coordinator (and BLAS's threads). Beside
   it, `STEPS_PER_CALL` steps unrolled into one staged call per worker (what `fit`'s
   ``steps_per_execution`` does): the coordinator's dispatch and fetch paid once for them;
   and the same in one process, for a like-for-like ratio.
3. The coordinator's cost per step: this process's CPU time (`time.process_time`, all of
   its threads: the replica threads of `run` and Ray's own) over a run of two-worker
   steps alone (after the interleaved rounds, so that no in-process contender's BLAS
   threads spin into it), divided by their count. CPU time, not wall time, because the
   coordinator's wall time is mostly waiting for the workers; on a machine whose cores
   the workers share, this CPU time is taken from them. Beside it, each worker's own time
   in its graph calls per step (`Worker.stats` spans): the rest of the step's wall time is
   dispatch, Ray's transport and the fetch of the loss.
4. A scaling model on paper, weak scaling (each worker keeps this run's per-worker batch
   of 128 rows, the global batch grows with the workers). Assumptions:
   - a step is the worker's compute, then one ring all-reduce of all the gradients (they
     fit one bucket, which starts when the backward pass ends: nothing overlaps):
     ``compute + 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency``;
   - compute: this run's single-process staged step at batch 128 (one process, which
     BLAS may run on every core: a worker with a machine of its own);
   - bandwidth: a 10 Gb/s link per worker, capped at the bandwidth gloo reached here
     between two local workers (software cannot go faster over a wire than over
     loopback); latency per ring step: the local fit's (gloo's and Ray's software cost)
     plus `NETWORK_LATENCY` for the wire and a switch;
   - the local fit: ``seconds = 2 * latency + bytes / bandwidth`` (the two-worker ring)
     through the three buffer sizes, least squares weighted by 1 / seconds;
   - the coordinator's CPU time grows with the workers (one dispatch each), from this
     run's per worker; when it exceeds a worker's step, the coordinator sets the pace;
   - efficiency: the compute's share of the step (1.0 = linear speedup); in brackets,
     without the coordinator's limit (what the all-reduce alone allows).
   The model leaves out stragglers, congestion and the input pipeline: an upper bound.
5. Overlap: a deeper MLP (`DEEP_LAYERS`, 11.6 MB of gradients) over the two workers, its
   step traced with buckets of `OVERLAP_PACK` bytes (``CommunicationOptions(
   bytes_per_pack=...)``; each bucket's all-reduce starts on the workers' collective
   threads as soon as its gradients are computed and runs while the backward pass goes
   on) against the same step with every gradient in one bucket (started once the
   backward pass is over, so nothing overlaps), and one process's step on the same
   global batch, in alternating rounds.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

import numpy as np
import ray

import stageflow as sf
from benchmarks.timing import interleaved_medians
from stageflow.distribute import worker_collectives
from stageflow.primitives.control import callback_of

BUFFER_BYTES = (64 << 10, 1 << 20, 16 << 20)
LAYERS = (784, 256, 10)
DEFAULT_BATCH = 256
GLOBAL_BATCH = DEFAULT_BATCH  # set from --batch
LR = 0.01
GOAL = 0.8
LINK_BYTES_PER_S = 10e9 / 8  # 10 Gb/s
NETWORK_LATENCY = 20e-6  # seconds added per ring step for the wire and one switch
PROJECTED = (2, 8, 64)
STEPS_PER_CALL = 8  # the grouped contender: steps unrolled into one staged call
DEEP_LAYERS = (784, 1024, 1024, 1024, 10)  # the overlap contenders' MLP: 11.6 MB of gradients
OVERLAP_PACK = 1 << 20  # bytes a bucket, where the all-reduce overlaps the backward pass


class Peer:
    """One worker of the all-reduce measurement: a Ray actor in the collective group the
    way a strategy's worker joins it, timing calls inside its own process."""

    def __init__(self, group: str, rank: int) -> None:
        worker_collectives.join(group, 2, rank)
        start = callback_of(worker_collectives.start_name(group, "sum"))
        wait = callback_of(worker_collectives.wait_name(group))
        self.all_reduce_sum = lambda value: wait(start(value))
        self.other = None

    def meet(self, other) -> None:
        self.other = other

    def all_reduce(self, elements: int, n: int) -> float:
        """Seconds for `n` sum all-reduces of `elements` float32, after one untimed call
        that also lines the two workers up."""
        value = np.ones(elements, np.float32)
        self.all_reduce_sum(value)
        start = time.perf_counter()
        for _ in range(n):
            self.all_reduce_sum(value)
        return time.perf_counter() - start

    def round_trip(self, elements: int, n: int) -> float:
        """Seconds for `n` object-store round trips of `elements` float32 to the other
        worker and back."""
        value = np.ones(elements, np.float32)
        ray.get(self.other.echo.remote([ray.put(value)]))
        start = time.perf_counter()
        for _ in range(n):
            ray.get(self.other.echo.remote([ray.put(value)]))
        return time.perf_counter() - start

    def echo(self, refs: list) -> np.ndarray:
        """The array behind `refs[0]` (fetched here), returned through the object store
        (a list keeps Ray from resolving the reference before the call)."""
        return ray.get(refs[0])


def worker_timed(a, b, rounds: int, min_time: float) -> dict[int, dict[str, float]]:
    """Median seconds per call of the all-reduce and the round trip for each buffer size,
    in alternating rounds, each timed inside the workers (a round's Ray call to start it
    is not in the figure)."""
    runs: dict[str, Callable[[int, int], float]] = {
        # both ranks make the collective; the later one to start waits least
        "all-reduce": lambda e, n: min(ray.get([a.all_reduce.remote(e, n),
                                               b.all_reduce.remote(e, n)])),
        "round trip": lambda e, n: ray.get(a.round_trip.remote(e, n)),
    }
    results = {}
    for size in BUFFER_BYTES:
        elements = size // 4
        counts = {}
        for name, run in runs.items():
            n = 1
            while run(elements, n) < min_time:
                n *= 2
            counts[name] = n
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                samples[name].append(run(elements, counts[name]) / counts[name])
        results[size] = {name: float(np.median(s)) for name, s in samples.items()}
    return results


def make_model(layers: tuple[int, ...] = LAYERS):
    """The MLP and its optimizer, with the same initial weights for every contender."""
    model = sf.keras.Sequential([sf.keras.layers.Dense(width, activation="relu")
                                 for width in layers[1:-1]] + [sf.keras.layers.Dense(layers[-1])])
    model.build((None, layers[0]))
    rng = np.random.default_rng(0)
    for variable in model.trainable_variables:
        shape = tuple(variable.shape)
        scale = np.sqrt(2.0 / shape[0]) if len(shape) == 2 else 0.0
        variable.assign((rng.standard_normal(shape) * scale).astype(np.float32))
    return model, sf.optimizers.SGD(LR)


def make_step(model, optimizer):
    @sf.function
    def step(x, y):
        with sf.GradientTape() as tape:
            logits = model(x)
            loss = sf.reduce_sum(sf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)) \
                / GLOBAL_BATCH
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    return step


def data(batch: int, layers: tuple[int, ...] = LAYERS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, layers[0])).astype(np.float32)
    return x, rng.integers(0, layers[-1], batch).astype(np.int32)


def strategy_step(strategy, layers: tuple[int, ...] = LAYERS
                  ) -> tuple[Callable[[], float], int]:
    """One training step of a fresh model under `strategy` on its first (placed) global
    batch, the loss fetched; and the gradients' bytes."""
    with strategy.scope():
        model, optimizer = make_model(layers)
    step = make_step(model, optimizer)
    dataset = sf.data.Dataset.from_tensor_slices(data(GLOBAL_BATCH, layers)).batch(GLOBAL_BATCH)
    [batch] = list(strategy.experimental_distribute_dataset(dataset))
    weights = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
    return lambda: float(strategy.reduce("SUM", strategy.run(step, args=batch), axis=None)), \
        weights


def strategy_steps(strategy, count: int) -> Callable[[], float]:
    """`count` training steps of a fresh model under `strategy` in one call of a staged
    function (the steps unrolled, as `fit`'s ``steps_per_execution`` unrolls them), on
    `count` copies of the first global batch; the last loss fetched."""
    with strategy.scope():
        model, optimizer = make_model()
    one = make_step(model, optimizer).python_callable()

    @sf.function
    def steps(xs, ys):
        for index in range(count):
            loss = one(xs[:, index], ys[:, index])
        return loss

    x, y = data(GLOBAL_BATCH)
    stacked = (np.repeat(x[:, None], count, axis=1), np.repeat(y[:, None], count, axis=1))
    dataset = sf.data.Dataset.from_tensor_slices(stacked).batch(GLOBAL_BATCH)
    [batch] = list(strategy.experimental_distribute_dataset(dataset))
    return lambda: float(strategy.reduce("SUM", strategy.run(steps, args=batch), axis=None))


def plain_step(batch: int, layers: tuple[int, ...] = LAYERS) -> Callable[[], float]:
    model, optimizer = make_model(layers)
    step = make_step(model, optimizer)
    x, y = (sf.constant(v) for v in data(batch, layers))
    return lambda: float(step(x, y))


def packed_steps(strategy) -> dict[str, Callable[[], float]]:
    """The deeper MLP's step over the strategy's workers, traced once with buckets of
    `OVERLAP_PACK` bytes (each all-reduce overlapping the backward pass of the layers
    before it) and once with all of its gradients in one bucket (started after the whole
    backward pass: nothing of it overlaps)."""
    steps = {}
    for name, pack in ((f"buckets of {OVERLAP_PACK >> 20} MiB", OVERLAP_PACK),
                       ("one bucket", 1 << 40)):
        strategy.communication_options = sf.distribute.experimental.CommunicationOptions(
            bytes_per_pack=pack)
        steps[name], _ = strategy_step(strategy, DEEP_LAYERS)
        steps[name]()  # traced now, with this pack
    strategy.communication_options = None
    return steps


def coordinator_share(step: Callable[[], float], steps: int) -> dict:
    """This process's CPU seconds and wall seconds per step over `steps` steps, and each
    worker's seconds inside its graph calls per step."""
    workers = sf.distribute.workers()
    before = [len(stats["spans"]) for stats in ray.get([w.stats.remote() for w in workers])]
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    spans = [stats["spans"][start:] for stats, start
             in zip(ray.get([w.stats.remote() for w in workers]), before, strict=True)]
    return {"steps": steps, "cpu_s": cpu / steps, "wall_s": wall / steps,
            "worker_s": [sum(end - begin for begin, end in s) / steps for s in spans]}


def fit_latency_bandwidth(seconds: dict[int, float]) -> tuple[float, float]:
    """(latency per ring step, bytes/s) of ``seconds = 2 * latency + bytes / bandwidth``,
    weighted least squares (relative error) through the measured sizes."""
    sizes = np.array(list(seconds), float)
    times = np.array(list(seconds.values()))
    slope, intercept = np.polyfit(sizes, times, 1, w=1.0 / times)
    return max(intercept, 0.0) / 2, 1.0 / slope


def ring_seconds(workers: int, size: float, latency: float, bandwidth: float) -> float:
    return 2 * (workers - 1) / workers * size / bandwidth + 2 * (workers - 1) * latency


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.strategy", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="fewer, shorter rounds (a noisy check that it runs)")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                        help=f"the global batch (default {DEFAULT_BATCH})")
    args = parser.parse_args(argv)
    global GLOBAL_BATCH
    GLOBAL_BATCH = args.batch  # read by the step builders above
    rounds, min_time = (3, 0.05) if args.quick else (9, 0.2)
    sf.random.set_seed(0)  # the layers' first draw (overwritten): made outside any scope

    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})
    try:
        group = f"bench{uuid.uuid4().hex[:8]}"
        a, b = (ray.remote(num_cpus=0)(Peer).remote(group, rank) for rank in range(2))
        ray.get([a.meet.remote(b), b.meet.remote(a)])
        collective = worker_timed(a, b, rounds, min_time)
        ray.kill(a)
        ray.kill(b)

        distributed, grad_bytes = strategy_step(strategy)
        grouped = strategy_steps(strategy, STEPS_PER_CALL)
        mirrored, _ = strategy_step(sf.distribute.MirroredStrategy(["CPU:0"]))
        mirrored_grouped = strategy_steps(sf.distribute.MirroredStrategy(["CPU:0"]),
                                          STEPS_PER_CALL)
        whole, half = plain_step(GLOBAL_BATCH), plain_step(GLOBAL_BATCH // 2)
        losses = [distributed(), mirrored(), whole()]
        np.testing.assert_allclose(losses, losses[2], rtol=1e-4)

        def loop(step: Callable[[], float]):
            def run(n: int) -> None:
                for _ in range(n):
                    step()
            return run

        medians = interleaved_medians({"2 workers": loop(distributed),
                                       f"2 workers, {STEPS_PER_CALL} steps a call":
                                       loop(grouped),
                                       "MirroredStrategy CPU:0": loop(mirrored),
                                       f"MirroredStrategy CPU:0, {STEPS_PER_CALL} steps a "
                                       "call": loop(mirrored_grouped),
                                       "sf.function": loop(whole),
                                       "sf.function half batch": loop(half)},
                                      rounds=rounds, min_time=min_time)
        share = coordinator_share(distributed, 20 if args.quick else 100)
        packed = packed_steps(strategy)
        packed["sf.function"] = plain_step(GLOBAL_BATCH, DEEP_LAYERS)
        overlap = interleaved_medians({name: loop(step) for name, step in packed.items()},
                                      rounds=rounds, min_time=min_time)
    finally:
        sf.distribute.shutdown()

    print("MultiWorkerMirroredStrategy, local Ray cluster, 2 workers"
          + (" (--quick: few short rounds, noisy)" if args.quick else ""))
    print("1. all-reduce between two workers (gloo, the strategy's callback) vs a Ray "
          "put/get round trip, float32, medians timed in the workers")
    print(f"   {'buffer':>8}  {'all-reduce':>12}  {'GB/s':>6}  {'round trip':>12}  "
          f"{'GB/s':>6}  all-reduce / round trip time")
    for size, t in collective.items():
        print(f"   {size / 1024:6.0f} KiB  {t['all-reduce'] * 1e3:9.3f} ms  "
              f"{size / t['all-reduce'] / 1e9:6.2f}  {t['round trip'] * 1e3:9.3f} ms  "
              f"{size / t['round trip'] / 1e9:6.2f}  {t['all-reduce'] / t['round trip']:.2f}x")

    rates = {name: (STEPS_PER_CALL if "steps a call" in name else 1.0) / s
             for name, s in medians.items()}
    ratio = rates["2 workers"] / rates["sf.function"]
    print(f"2. SGD step, MLP {'-'.join(map(str, LAYERS))}, global batch {GLOBAL_BATCH} "
          f"({grad_bytes / 1e6:.2f} MB of gradients), steps/s (medians)")
    for name, rate in rates.items():
        print(f"   {name:24s} {rate:8.1f}")
    print(f"   2 workers / one process's sf.function step: {ratio:.2f}x "
          f"(goal >= {GOAL}: {'met' if ratio >= GOAL else 'not met'}); / the "
          f"MirroredStrategy(['CPU:0']) step: "
          f"{rates['2 workers'] / rates['MirroredStrategy CPU:0']:.2f}x")
    grouped = rates[f"2 workers, {STEPS_PER_CALL} steps a call"]
    print(f"   {STEPS_PER_CALL} steps a call (one dispatch and one fetch per "
          f"{STEPS_PER_CALL} steps): {grouped / rates['sf.function']:.2f}x one process's step, "
          f"{grouped / rates[f'MirroredStrategy CPU:0, {STEPS_PER_CALL} steps a call']:.2f}x "
          f"one process's {STEPS_PER_CALL} steps a call")

    coordinator_s, step_s = share["cpu_s"], medians["2 workers"]
    print(f"3. coordinator CPU time per 2-worker step (process_time, all its threads, "
          f"{share['steps']} steps alone): {coordinator_s * 1e3:.2f} ms, "
          f"{coordinator_s / share['wall_s']:.0%} of their {share['wall_s'] * 1e3:.2f} ms wall "
          f"time a step; each worker's graph calls: "
          f"{' / '.join(f'{t * 1e3:.2f}' for t in share['worker_s'])} ms a step")

    local_latency, local_bandwidth = fit_latency_bandwidth(
        {size: t["all-reduce"] for size, t in collective.items()})
    latency = local_latency + NETWORK_LATENCY
    bandwidth = min(local_bandwidth, LINK_BYTES_PER_S)
    compute = medians["sf.function half batch"]
    per_worker = coordinator_s / 2
    modelled_here = compute + ring_seconds(2, grad_bytes, local_latency, local_bandwidth)
    print(f"4. projection (weak scaling, {GLOBAL_BATCH // 2} rows per worker; assumptions "
          f"in the module docstring)")
    print(f"   local all-reduce fit: {local_latency * 1e6:.0f} us per ring step, "
          f"{local_bandwidth / 1e9:.2f} GB/s; compute per step {compute * 1e3:.2f} ms; "
          f"coordinator {per_worker * 1e3:.2f} ms CPU per worker")
    print(f"   the model on this machine, 2 workers: {modelled_here * 1e3:.2f} ms a step "
          f"(measured {step_s * 1e3:.2f} ms, with the cores shared)")
    print(f"   10 Gb/s ring: {bandwidth / 1e9:.2f} GB/s, {latency * 1e6:.0f} us per ring "
          f"step (+{NETWORK_LATENCY * 1e6:.0f} us wire)")
    print(f"   {'workers':>7}  {'all-reduce':>10}  {'coordinator':>11}  {'step':>9}  "
          f"{'examples/s':>10}  efficiency  (all-reduce alone)")
    projection = {}
    for workers in PROJECTED:
        reduce_s = ring_seconds(workers, grad_bytes, latency, bandwidth)
        dispatch = per_worker * workers
        step = max(compute + reduce_s, dispatch)
        unbounded = compute / (compute + reduce_s)
        projection[workers] = {"all_reduce_s": reduce_s, "coordinator_s": dispatch,
                               "step_s": step, "efficiency": compute / step,
                               "efficiency_all_reduce_alone": unbounded}
        print(f"   {workers:7d}  {reduce_s * 1e3:7.2f} ms  {dispatch * 1e3:8.2f} ms  "
              f"{step * 1e3:6.2f} ms  {workers * (GLOBAL_BATCH // 2) / step:10.0f}  "
              f"{compute / step:10.0%}  ({unbounded:.0%})")

    buckets, one = (f"buckets of {OVERLAP_PACK >> 20} MiB", "one bucket")
    print(f"5. overlap: SGD step, MLP {'-'.join(map(str, DEEP_LAYERS))}, global batch "
          f"{GLOBAL_BATCH}, steps/s (medians)")
    for name, seconds in overlap.items():
        print(f"   {name:24s} {1 / seconds:8.1f}")
    print(f"   buckets / one bucket: {overlap[one] / overlap[buckets]:.2f}x; 2 workers "
          f"(buckets) / one process's sf.function step: "
          f"{overlap['sf.function'] / overlap[buckets]:.2f}x")

    return {"collective": {size: dict(t) for size, t in collective.items()},
            "overlap_steps_per_s": {name: 1 / s for name, s in overlap.items()},
            "steps_per_s": rates, "ratio": ratio, "goal_met": ratio >= GOAL,
            "grad_bytes": grad_bytes, "coordinator": share,
            "local_latency_s": local_latency, "local_bandwidth": local_bandwidth,
            "compute_s": compute, "projection": projection}


if __name__ == "__main__":
    main()
