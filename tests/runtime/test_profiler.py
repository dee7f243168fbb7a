"""`sf.profiler`: the trace holds what ran, where it ran, nested as it ran, in the Trace
Event Format that Perfetto and ``chrome://tracing`` read.

Each test records a computation, loads the written file as JSON, holds it to the format
(`assert_valid`: the keys and types of every event, per thread timestamps in order and
complete events nested, never overlapping) and then looks for the events it must hold.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

import stageflow as sf
from stageflow.core import context, profiling
from stageflow.primitives import elementwise as ew
from stageflow.primitives import linalg, reduction
from stageflow.runtime import eager

HERE = os.path.abspath(__file__)
CPU1 = "/device:CPU:1"
GPU = "/device:GPU:0"


def record(tmp_path: Path, run, level: int = 2) -> list[dict]:
    """The complete events of a trace of `run()`, after checking the whole file."""
    options = sf.profiler.experimental.ProfilerOptions(host_tracer_level=level)
    with sf.profiler.trace(str(tmp_path), options) as profile:
        run()
    assert profile.path is not None and profile.path.endswith(".trace.json")
    assert Path(profile.path).parent == tmp_path
    with open(profile.path, encoding="utf-8") as file:
        document = json.load(file)
    assert_valid(document)
    return [e for e in document["traceEvents"] if e["ph"] == "X"]


def record_path(tmp_path: Path, run) -> str:
    """The path of a trace of `run()`, after checking the whole file."""
    with sf.profiler.trace(str(tmp_path)) as profile:
        run()
    with open(profile.path, encoding="utf-8") as file:
        assert_valid(json.load(file))
    return profile.path


def ns(value: float) -> int:
    return round(value * 1000)


def assert_valid(document: dict) -> None:
    """The Trace Event Format's JSON object form, with the promises `Session.document`
    makes: metadata naming the process and every thread that has events; per thread,
    events in the order they began; complete events that nest (a span begun inside
    another ends inside it)."""
    assert set(document) == {"traceEvents", "displayTimeUnit"}
    assert document["displayTimeUnit"] == "ns"
    events = document["traceEvents"]
    assert isinstance(events, list)
    pid = os.getpid()
    named_threads = set()
    for event in events:
        assert event["ph"] in ("X", "M")
        assert event["pid"] == pid and isinstance(event["tid"], int)
        assert isinstance(event["name"], str) and isinstance(event["args"], dict)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name")
            assert isinstance(event["args"]["name"], str)
            if event["name"] == "thread_name":
                named_threads.add(event["tid"])
            continue
        assert isinstance(event["cat"], str) and event["cat"]
        assert isinstance(event["ts"], int | float) and isinstance(event["dur"], int | float)
        assert event["ts"] >= 0 and event["dur"] >= 0
    assert sum(1 for e in events if e["name"] == "process_name") == 1
    by_thread: dict[int, list[dict]] = {}
    for event in events:
        if event["ph"] == "X":
            by_thread.setdefault(event["tid"], []).append(event)
    assert set(by_thread) <= named_threads
    for spans in by_thread.values():
        starts = [ns(e["ts"]) for e in spans]
        assert starts == sorted(starts), "timestamps of a thread out of order"
        open_ends: list[int] = []
        for event in spans:
            begin, end = ns(event["ts"]), ns(event["ts"]) + ns(event["dur"])
            while open_ends and open_ends[-1] <= begin:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], f"{event['name']} overlaps its parent"
            open_ends.append(end)


@pytest.mark.parametrize(("spans", "fault"), [
    ([(0, 10), (5, 10)], "overlaps its parent"),  # a span ending after the one it began in
    ([(5, 1), (0, 1)], "out of order"),
])
def test_the_format_check_finds_what_it_forbids(spans, fault):
    events = [{"ph": "M", "name": "process_name", "pid": os.getpid(), "tid": 0,
               "args": {"name": "p"}},
              {"ph": "M", "name": "thread_name", "pid": os.getpid(), "tid": 1,
               "args": {"name": "t"}}]
    events += [{"ph": "X", "name": "s", "cat": "op", "pid": os.getpid(), "tid": 1, "ts": ts,
                "dur": dur, "args": {}} for ts, dur in spans]
    with pytest.raises(AssertionError, match=fault):
        assert_valid({"traceEvents": events, "displayTimeUnit": "ns"})


def inside(events: list[dict], parent: dict) -> list[dict]:
    """The events of `parent`'s thread within its span (itself left out)."""
    begin, end = ns(parent["ts"]), ns(parent["ts"]) + ns(parent["dur"])
    return [e for e in events if e is not parent and e["tid"] == parent["tid"]
            and begin <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= end]


def named(events: list[dict], name: str, category: str | None = None) -> list[dict]:
    return [e for e in events if e["name"] == name and (category is None or e["cat"] == category)]


def test_eager_ops_are_recorded_with_shapes_dtypes_device_and_line(tmp_path):
    x = sf.constant(np.ones((2, 3), np.float32))
    w = sf.constant(np.ones((3, 4), np.float32))

    def run():
        y = sf.exp(sf.matmul(x, w))
        sf.reduce_sum(y)

    events = record(tmp_path, run)
    ops = [e for e in events if e["cat"] == "op"]
    assert [e["name"] for e in ops] == [linalg.matmul_p.name, ew.exp_p.name,
                                        reduction.reduce_sum_p.name]
    product = ops[0]
    assert product["args"]["shapes"] == [[2, 3], [3, 4]]
    assert product["args"]["dtypes"] == ["float32", "float32"]
    assert product["args"]["device"] == "/device:CPU:0"
    assert product["args"]["source"].startswith(f"{HERE}:")
    assert "sf.exp(sf.matmul(x, w))" in product["args"]["source"]
    assert ops[0]["tid"] == threading.get_native_id()


def test_nothing_is_recorded_outside_the_block_and_eager_execution_is_restored(tmp_path):
    x = sf.constant([1.0, 2.0])
    sf.exp(x)
    options = sf.profiler.experimental.ProfilerOptions()
    with sf.profiler.trace(str(tmp_path), options) as profile:
        assert context.current_trace() is not eager.EAGER
        assert not context.state.eager_fast
        sf.negative(x)
    sf.sqrt(x)
    assert context.current_trace() is eager.EAGER and context.state.eager_fast
    assert profiling.state.session is None
    with open(profile.path, encoding="utf-8") as file:
        names = [e["name"] for e in json.load(file)["traceEvents"] if e["ph"] == "X"]
    assert names == [ew.negative_p.name]


def test_a_compiled_call_nests_its_trace_and_compile_stages_in_the_first_call(tmp_path):
    @sf.function
    def step(x, w):
        return sf.reduce_sum(sf.tanh(sf.matmul(x, w)) * 2.0 + 1.0)

    x, w = sf.ones((4, 8)), sf.ones((8, 3))
    results = []
    events = record(tmp_path, lambda: results.extend([step(x, w), step(x, w)]))
    np.testing.assert_allclose(results[0].numpy(), results[1].numpy())
    first, second = named(events, "step", "function")
    assert first["args"] == {"traced": True} and second["args"] == {"traced": False}
    assert ns(first["ts"]) + ns(first["dur"]) <= ns(second["ts"])
    within_first = inside(events, first)
    assert named(within_first, "trace step", "compile")
    program = named(within_first, "@step", "program")[0]
    assert program["args"]["signature"] == ["TensorSpec(shape=(4, 8), dtype=float32)",
                                            "TensorSpec(shape=(8, 3), dtype=float32)"]
    assert program["args"]["runs as"] == "one program"
    kernels = program["args"]["kernels"]
    assert kernels and all(ops for ops in kernels.values())
    assert "sf.tanh" in [op for ops in kernels.values() for op in ops]
    # the compile happens in the first call of the program, every stage inside it
    within_program = inside(events, program)
    compile_span = named(within_program, "compile step", "compile")[0]
    stages = {e["name"] for e in inside(events, compile_span)}
    assert {"build IR", "optimize", "pass fuse", "llvm", "llvm linking"} <= stages
    optimize = named(within_program, "optimize")[0]
    assert named(inside(events, optimize), "pass fuse")
    # nothing compiles in the second call; the stages' spans are the figures stats() keeps
    assert not [e for e in inside(events, second) if e["cat"] == "compile"]
    seconds = step.get_concrete_function(x, w).stats()["compile_seconds"]
    for stage in ("llvm", "llvm linking", "optimize", "build IR"):
        assert ns(named(events, stage)[0]["dur"]) == pytest.approx(seconds[stage] * 1e9,
                                                                   abs=1)


def test_level_3_times_each_kernel_of_a_compiled_call_inside_its_span(tmp_path):
    @sf.function
    def step(x, w):
        return sf.reduce_sum(sf.exp(sf.matmul(x, w)) - 1.0)

    x, w = sf.ones((4, 8)), sf.ones((8, 3)) * 0.1
    expected = np.sum(np.exp(np.ones((4, 8)) @ (np.ones((8, 3)) * 0.1)) - 1.0)
    result = []
    events = record(tmp_path, lambda: result.append(step(x, w)), level=3)
    np.testing.assert_allclose(result[0].numpy(), expected, rtol=1e-5)
    program = named(events, "@step", "program")[0]
    assert program["args"]["runs as"] == "steps"
    steps = [e for e in inside(events, program) if e["cat"] in ("kernel", "step")]
    kernels = [e for e in steps if e["cat"] == "kernel"]
    assert {e["name"] for e in kernels} == set(program["args"]["kernels"])
    for kernel in kernels:
        assert kernel["args"]["ops"] == program["args"]["kernels"][kernel["name"]]
        assert kernel["args"]["source"].startswith(f"{HERE}:")
    assert linalg.matmul_p.name in [e["name"] for e in steps if e["cat"] == "step"]
    # the compiled call runs as one program again once the trace ends
    assert step(x, w).numpy() == pytest.approx(expected, rel=1e-5)


def test_level_3_records_each_iteration_of_a_loop_inside_its_step(tmp_path):
    @sf.function
    def halve_exp(x):
        return sf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, sf.exp(v) * 0.5),
                             (sf.constant(0), x))[1]

    x = sf.constant([0.0, 1.0])
    expected = halve_exp(x).numpy()  # compiled, as one program
    results = []
    events = record(tmp_path, lambda: results.append(halve_exp(x).numpy()), level=3)
    np.testing.assert_array_equal(results[0], expected)
    loop = [e for e in inside(events, named(events, "@halve_exp", "program")[0])
            if e["cat"] == "step"]
    assert len(loop) == 1
    kernels = [e["args"]["ops"] for e in inside(events, loop[0]) if e["cat"] == "kernel"]
    bodies = [ops for ops in kernels if "sf.exp" in ops]
    conditions = [ops for ops in kernels if "sf.less" in ops]
    assert len(bodies) == 3 and len(conditions) == 4


def test_an_interpreted_call_records_each_op_of_the_graph(tmp_path):
    @sf.function(jit=False)
    def step(x):
        return sf.reduce_sum(sf.exp(x) * 2.0)

    x = sf.constant([0.0, 1.0])
    events = record(tmp_path, lambda: step(x))
    program = named(events, "@step", "program")[0]
    assert program["args"]["runs as"] == "interpreter" and "kernels" not in program["args"]
    ran = [e for e in inside(events, program) if e["cat"] == "interpreter"]
    graph = step.get_concrete_function(x).graph
    assert [e["name"] for e in ran] == [eq.primitive.name for eq in graph.equations]
    assert all(e["args"]["source"].startswith(f"{HERE}:") for e in ran)
    assert not [e for e in events if e["cat"] == "compile" and e["name"] != "trace step"]


def test_copies_to_a_logical_device_and_its_work_on_its_own_thread(tmp_path):
    x = sf.constant(np.arange(6, dtype=np.float32))

    def run():
        with sf.device("cpu:1"):
            y = x * 2.0
        assert y.device == CPU1

    with open(record_path(tmp_path, run), encoding="utf-8") as file:
        document = json.load(file)
    events = [e for e in document["traceEvents"] if e["ph"] == "X"]
    threads = {e["tid"]: e["args"]["name"] for e in document["traceEvents"]
               if e["name"] == "thread_name"}
    op = named(events, ew.multiply_p.name, "op")[0]
    assert op["args"]["device"] == CPU1 and op["tid"] == threading.get_native_id()
    copies = [e for e in inside(events, op) if e["cat"] == "copy"]
    assert [c["name"] for c in copies] == [f"copy to {CPU1}"] * len(copies)
    assert {c["args"]["bytes"] for c in copies} >= {x.numpy().nbytes}
    kernel = named(events, ew.multiply_p.name, "kernel")[0]
    assert threads[kernel["tid"]] == f"stageflow {CPU1}" and kernel["tid"] != op["tid"]
    assert ns(op["ts"]) <= ns(kernel["ts"]) <= ns(op["ts"]) + ns(op["dur"])


def test_copies_to_and_from_the_gpu(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    values = []

    def run():
        on_gpu = sf.constant(x).gpu()
        values.append((on_gpu + 1.0).numpy())

    events = record(tmp_path, run)
    np.testing.assert_array_equal(values[0], x + 1.0)
    uploads = named(events, f"copy to {GPU}", "copy")
    downloads = named(events, f"copy from {GPU}", "copy")
    assert uploads and downloads
    assert uploads[0]["args"] == {"bytes": x.nbytes, "shape": [3, 4], "dtype": "float32"}
    assert downloads[-1]["args"]["shape"] == [3, 4]
    add = [e for e in named(events, ew.add_p.name, "op") if e["args"]["device"] == GPU]
    assert add and add[0]["args"]["shapes"] == [[3, 4], []]


def test_a_staged_call_on_the_gpu_compiles_for_it_inside_the_call(tmp_path):
    f = sf.function(lambda x: sf.exp(x) + 1.0)
    x = sf.constant(np.zeros(3, np.float32))
    results = []
    events = record(tmp_path, lambda: results.append(f(x.gpu()).numpy()))
    np.testing.assert_allclose(results[0], 2.0)
    program = named(events, "@<lambda>", "program")[0]
    assert program["args"]["runs as"] == "GPU launches"
    within = inside(events, program)
    assert named(within, "compile <lambda> for /device:GPU:0", "compile")
    assert named(within, "pass fuse", "compile")
    upload = named(events, f"copy to {GPU}", "copy")[0]
    assert ns(upload["ts"]) + ns(upload["dur"]) <= ns(program["ts"])  # x.gpu(), before
    assert named(events, f"copy from {GPU}", "copy")  # .numpy(), after


def test_user_spans_and_steps_hold_what_ran_in_them(tmp_path):
    x = sf.constant([1.0, 2.0])

    def run():
        for step in range(2):
            with sf.profiler.experimental.Trace("train", step_num=step, batch=8):
                sf.exp(x)
        with sf.profiler.experimental.Trace("evaluate"):
            sf.negative(x)

    events = record(tmp_path, run)
    steps = named(events, "train", "user")
    assert [s["args"] for s in steps] == [{"step_num": 0, "batch": 8}, {"step_num": 1, "batch": 8}]
    for step in steps:
        assert [e["name"] for e in inside(events, step)] == [ew.exp_p.name]
    evaluate = named(events, "evaluate", "user")[0]
    assert [e["name"] for e in inside(events, evaluate)] == [ew.negative_p.name]


def test_a_user_span_outside_a_recording_records_nothing(tmp_path):
    with sf.profiler.experimental.Trace("alone"):
        sf.exp(sf.constant(1.0))
    events = record(tmp_path, lambda: sf.exp(sf.constant(1.0)))
    assert not named(events, "alone")


def test_ops_of_several_threads_go_into_one_trace_each_on_its_thread(tmp_path):
    x = sf.constant(np.ones(4, np.float32))
    barrier = threading.Barrier(3)
    ids = {}

    def work(name: str) -> None:
        ids[name] = threading.get_native_id()
        barrier.wait()
        for _ in range(20):
            sf.exp(x)

    def run():
        threads = [threading.Thread(target=work, args=(f"worker {i}",), name=f"worker {i}")
                   for i in range(2)]
        for thread in threads:
            thread.start()
        barrier.wait()
        for thread in threads:
            thread.join()

    with open(record_path(tmp_path, run), encoding="utf-8") as file:
        document = json.load(file)
    names = {e["tid"]: e["args"]["name"] for e in document["traceEvents"]
             if e["name"] == "thread_name"}
    for name, tid in ids.items():
        assert names[tid] == name
        assert len([e for e in document["traceEvents"]
                    if e["ph"] == "X" and e["tid"] == tid and e["name"] == ew.exp_p.name]) == 20


def test_start_stop_and_their_misuse(tmp_path):
    experimental = sf.profiler.experimental
    experimental.start(str(tmp_path / "logs"))
    try:
        with pytest.raises(RuntimeError, match="being recorded already"):
            experimental.start(str(tmp_path))
        sf.exp(sf.constant(1.0))
    finally:
        path = experimental.stop()
    assert Path(path).parent == tmp_path / "logs"
    with open(path, encoding="utf-8") as file:
        assert_valid(json.load(file))
    with pytest.raises(RuntimeError, match="no profiler trace is being recorded"):
        experimental.stop()
    with pytest.raises(ValueError, match="host_tracer_level is 2"):
        experimental.ProfilerOptions(host_tracer_level=1)


def test_two_recordings_write_two_files(tmp_path):
    first = record_path(tmp_path, lambda: sf.exp(sf.constant(1.0)))
    second = record_path(tmp_path, lambda: sf.exp(sf.constant(1.0)))
    assert first != second and sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(first), os.path.basename(second)])
