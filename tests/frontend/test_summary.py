"""`sf.summary`: what is written, read back with TensorBoard's own reader, eagerly and from
staged functions, interpreted and compiled (one value per call, at that call's step);
scalars, histograms (TensorFlow 2's buckets, against NumPy), images (PNG bytes decoded back
to the pixels) and text; steps, `record_if`, default and no-op writers; graph traces; the
tensorboard package loaded only when summaries are written."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image  # tensorboard's dependency
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import config_pb2
from tensorboard.util import tensor_util

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def staged(way, f):
    """`f` as the way runs it: itself, or staged and interpreted or compiled."""
    return f if way == "eager" else sf.function(f, jit=way == "compiled")


def assert_one_program(function, *args):
    """A compiled function with summaries is one program calling back into Python, not
    Python steps."""
    concrete = function.get_concrete_function(*args)
    assert concrete.stats()["steps_reasons"] == {}
    assert concrete.program.program is not None


def read(logdir) -> dict[str, list[tuple[int, np.ndarray]]]:
    """Each tag's (step, value) pairs in the event files of `logdir`, as TensorBoard reads
    them."""
    accumulator = event_accumulator.EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    accumulator.Reload()
    return {tag: [(e.step, tensor_util.make_ndarray(e.tensor_proto))
                  for e in accumulator.Tensors(tag)]
            for tag in accumulator.Tags()["tensors"]}


def plugin(logdir, tag: str) -> str:
    accumulator = event_accumulator.EventAccumulator(str(logdir))
    accumulator.Reload()
    return accumulator.SummaryMetadata(tag).plugin_data.plugin_name


@pytest.fixture
def writer(tmp_path):
    writer = sf.summary.create_file_writer(tmp_path)
    yield writer
    writer.close()


@pytest.mark.parametrize("way", WAYS)
def test_a_scalar_per_call_at_the_step_of_the_call(way, writer, tmp_path):
    step = sf.Variable(0, dtype=sf.int64)

    def f(x):
        step.assign_add(1)
        sf.summary.scalar("loss", sf.reduce_mean(x * x), step=step)
        return x + 1.0

    function = staged(way, f)
    x = sf.constant([1.0, 2.0])
    with writer.as_default():
        for _ in range(3):
            x = function(x)
    got = read(tmp_path)["loss"]
    assert [s for s, _ in got] == [1, 2, 3]
    np.testing.assert_allclose([v for _, v in got], [2.5, 6.5, 12.5])
    assert all(v.dtype == np.float32 and v.shape == () for _, v in got)
    assert plugin(tmp_path, "loss") == "scalars"
    if way == "compiled":
        assert_one_program(function, x)


@pytest.mark.parametrize("way", WAYS)
def test_histograms_have_tensorflow_2s_buckets(way, writer, tmp_path):
    data = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)

    def f(x, step):
        sf.summary.histogram("default", x, step=step)
        sf.summary.histogram("five", x * 2.0, step=step, buckets=5)
        return x

    with writer.as_default():
        staged(way, f)(sf.constant(data), sf.constant(7, sf.int64))
    logged = read(tmp_path)
    for tag, values, count in [("default", data, 30), ("five", data * 2.0, 5)]:
        [(step, buckets)] = logged[tag]
        counts, edges = np.histogram(values.astype(np.float64), bins=count)
        assert step == 7 and buckets.shape == (count, 3)
        np.testing.assert_allclose(buckets[:, 0], edges[:-1], rtol=1e-6)
        np.testing.assert_allclose(buckets[:, 1], edges[1:], rtol=1e-6)
        np.testing.assert_array_equal(buckets[:, 2], counts)
        assert plugin(tmp_path, tag) == "histograms"


def decoded(blob: bytes) -> np.ndarray:
    image = np.asarray(Image.open(io.BytesIO(blob)))
    return image if image.ndim == 3 else image[..., None]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_images_are_pngs_of_their_pixels(way, channels, writer, tmp_path):
    rng = np.random.default_rng(channels)
    floats = rng.uniform(-0.1, 1.1, size=(5, 6, 7, channels)).astype(np.float32)
    bytes_ = rng.integers(0, 256, size=(2, 3, 4, channels), dtype=np.uint8)

    def f(a, b):
        sf.summary.image("floats", a, step=1)
        sf.summary.image("bytes", b, step=2, max_outputs=5)
        return a

    with writer.as_default():
        staged(way, f)(sf.constant(floats), sf.constant(bytes_))
    logged = read(tmp_path)
    [(_, strings)] = logged["floats"]
    assert list(strings[:2]) == [b"7", b"6"]  # width, height
    assert len(strings) == 2 + 3  # max_outputs=3 of the 5
    expected = np.clip(floats[:3].astype(np.float64) * 255.5, 0, 255).astype(np.uint8)
    for blob, pixels in zip(strings[2:], expected, strict=True):
        np.testing.assert_array_equal(decoded(blob), pixels)
    [(step, strings)] = logged["bytes"]
    assert step == 2 and list(strings[:2]) == [b"4", b"3"]
    for blob, pixels in zip(strings[2:], bytes_, strict=True):
        np.testing.assert_array_equal(decoded(blob), pixels)
    assert plugin(tmp_path, "floats") == "images"


@pytest.mark.parametrize("way", WAYS)
def test_text_is_written_at_each_call(way, writer, tmp_path):
    def f(step):
        sf.summary.text("notes", "learning rate *halved*", step=step)
        sf.summary.text("table", [["a", "b"], ["c", "d"]], step=step)
        return step

    function = staged(way, f)
    with writer.as_default():
        function(sf.constant(1, sf.int64))
        function(sf.constant(4, sf.int64))
    logged = read(tmp_path)
    assert [(s, v.item()) for s, v in logged["notes"]] == [(1, b"learning rate *halved*")] + [
        (4, b"learning rate *halved*")]
    np.testing.assert_array_equal(logged["table"][0][1], [[b"a", b"b"], [b"c", b"d"]])
    assert plugin(tmp_path, "notes") == "text"


def _regression():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    return sf.constant(x), sf.constant(y)


def _train(way, logdir) -> tuple[list, np.ndarray]:
    """Five steps of linear regression with SGD, the loss written at the optimizer's step
    (its `iterations`, the step after the update, read when the step runs)."""
    x, y = _regression()
    w = sf.Variable(np.zeros((3, 1), np.float32))
    optimizer = sf.optimizers.SGD(0.1)

    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(sf.matmul(x, w) - y))
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        sf.summary.scalar("loss", loss, step=optimizer.iterations)
        return loss

    step = staged(way, train_step)
    writer = sf.summary.create_file_writer(logdir)
    with writer.as_default():
        losses = [float(step(x, y).numpy()) for _ in range(5)]
    writer.close()
    if way == "compiled":
        assert_one_program(step, x, y)
    return read(logdir)["loss"], np.array(losses, np.float32)


def test_a_staged_training_loop_writes_each_steps_loss(tmp_path):
    logged = {way: _train(way, tmp_path / way) for way in WAYS}
    for way, (points, losses) in logged.items():
        assert [s for s, _ in points] == [1, 2, 3, 4, 5], way
        np.testing.assert_array_equal([v for _, v in points], losses)  # what the call returned
        np.testing.assert_allclose(losses, logged["eager"][1], rtol=1e-5)
    assert np.all(np.diff(logged["eager"][1]) < 0)  # it learns: each value is that step's


@pytest.mark.parametrize("way", ["interpreted", "compiled"])
def test_record_if_a_traced_condition_decides_at_each_call(way, writer, tmp_path):
    step = sf.Variable(0, dtype=sf.int64)

    def f(x):
        step.assign_add(1)
        with sf.summary.record_if(lambda: step % 2 == 0):
            written = sf.summary.scalar("x", x, step=step)
        with sf.summary.record_if(False):
            assert sf.summary.scalar("never", x, step=step) is False
        return written

    function = staged(way, f)
    with writer.as_default():
        written = [bool(function(sf.constant(float(i))).numpy()) for i in range(5)]
    assert written == [False, True, False, True, False]
    logged = read(tmp_path)
    assert [(s, float(v)) for s, v in logged["x"]] == [(2, 1.0), (4, 3.0)]
    assert "never" not in logged


def test_record_if_eagerly_takes_bools_tensors_and_callables(writer, tmp_path):
    with writer.as_default(step=3):
        with sf.summary.record_if(sf.constant(False)):
            assert sf.summary.scalar("a", 1.0) is False
        with sf.summary.record_if(lambda: sf.constant(True)):
            assert sf.summary.scalar("b", 2.0) is True
        with sf.summary.record_if(False):
            assert sf.summary.should_record_summaries() is False
        assert sf.summary.should_record_summaries() is True
    assert set(read(tmp_path)) == {"b"}


def test_steps_default_from_set_step_and_as_default(writer, tmp_path):
    iterations = sf.Variable(10, dtype=sf.int64)
    sf.summary.experimental.set_step(iterations)
    try:
        with writer.as_default():
            sf.summary.scalar("a", 1.0)
            iterations.assign(11)
            sf.summary.scalar("a", 2.0)
            with writer.as_default(step=40):
                assert sf.summary.experimental.get_step() == 40
                sf.summary.scalar("a", 3.0)
            assert sf.summary.experimental.get_step() is iterations
            sf.summary.scalar("a", 4.0, step=50)
    finally:
        sf.summary.experimental.set_step(None)
    assert [(s, float(v)) for s, v in read(tmp_path)["a"]] == [
        (10, 1.0), (11, 2.0), (40, 3.0), (50, 4.0)]


def test_a_missing_step_is_a_value_error_naming_the_line(writer):
    with writer.as_default(), pytest.raises(ValueError, match="sf.summary.scalar: no step") as e:
        sf.summary.scalar("a", 1.0)
    assert "test_summary.py" in str(e.value)

    @sf.function
    def f(x):
        sf.summary.histogram("x", x)
        return x

    with writer.as_default(), pytest.raises(ValueError, match="sf.summary.histogram: no step"):
        f(sf.constant([1.0]))


def test_without_a_default_writer_nothing_is_written(tmp_path):
    noop = sf.summary.create_noop_writer()
    assert sf.summary.scalar("a", 1.0, step=0) is False
    with noop.as_default():
        assert sf.summary.scalar("a", 1.0, step=0) is False
    noop.flush()
    noop.close()

    @sf.function
    def f(x):
        sf.summary.scalar("a", x, step=0)
        return x * 2.0

    f(sf.constant(1.0))
    assert "py_func" not in f.get_concrete_function(sf.constant(1.0)).ir("traced")
    assert not list(tmp_path.iterdir())


def test_a_staged_function_keeps_the_writer_it_was_traced_under(tmp_path):
    first = sf.summary.create_file_writer(tmp_path / "first")
    second = sf.summary.create_file_writer(tmp_path / "second")

    @sf.function
    def f(x):
        sf.summary.scalar("x", x, step=0)
        return x

    with first.as_default():
        f(sf.constant(1.0))
    with second.as_default():
        f(sf.constant(2.0))  # the same trace: TensorFlow's rule
    first.close()
    assert [float(v) for _, v in read(tmp_path / "first")["x"]] == [1.0, 2.0]
    assert read(tmp_path / "second") == {}
    with pytest.raises(RuntimeError, match="writer of .* is closed"):
        f(sf.constant(3.0))
    second.close()


def test_summaries_refuse_data_of_the_wrong_shape_or_type(writer):
    with writer.as_default(step=0):
        with pytest.raises(ValueError, match="'loss' must be a scalar, got shape \\[2\\]"):
            sf.summary.scalar("loss", [1.0, 2.0])
        with pytest.raises(ValueError, match="1, 3 or 4 channels, got shape \\[1, 2, 2, 2\\]"):
            sf.summary.image("im", np.zeros((1, 2, 2, 2), np.float32))
        with pytest.raises(TypeError, match="floats in \\[0, 1\\] or uint8, got int32"):
            sf.summary.image("im", np.zeros((1, 2, 2, 1), np.int32))
        with pytest.raises(ValueError, match="the step must be an integer scalar, got float32"):
            sf.summary.scalar("loss", 1.0, step=1.5)
        with pytest.raises(TypeError, match="must be a string"):
            sf.summary.text("t", 3)


def test_summaries_in_a_differentiated_function_leave_the_gradient_alone(writer, tmp_path):
    @sf.function(jit=True)
    def grad(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(x * x)
            sf.summary.scalar("y", y, step=0)
        return tape.gradient(y, x)

    with writer.as_default():
        np.testing.assert_allclose(grad(sf.constant([1.0, 3.0])).numpy(), [2.0, 6.0])
    assert [float(v) for _, v in read(tmp_path)["y"]] == [10.0]


def test_trace_export_writes_the_graphs_of_functions_traced_while_on(writer, tmp_path):
    w = sf.Variable(np.ones((2, 3), np.float32), name="dense_w")

    @sf.function
    def dense(x):
        return sf.nn.relu(sf.matmul(x, w))

    assert sf.summary.trace_export("none", step=0) is False  # tracing is off
    sf.summary.trace_on(graph=True, profiler=False)
    dense(sf.constant(np.ones((4, 2), np.float32)))
    with writer.as_default():
        assert sf.summary.trace_export("dense_graph", step=3) is True
        assert sf.summary.trace_export("again", step=4) is False  # export stopped it
    accumulator = event_accumulator.EventAccumulator(str(tmp_path))
    accumulator.Reload()
    [event] = accumulator.Tensors("dense_graph")
    assert event.step == 3
    plugin_data = accumulator.SummaryMetadata("dense_graph").plugin_data
    assert (plugin_data.plugin_name, plugin_data.content) == ("graph_run_metadata_graph", b"1")
    metadata = config_pb2.RunMetadata.FromString(event.tensor_proto.string_val[0])
    [function] = metadata.function_graphs
    nodes = {node.name: node for node in function.pre_optimization_graph.node}
    ops = {node.op: node for node in nodes.values()}
    assert {"argument", "variable", "read_variable", "matmul", "result"} <= set(ops)
    assert ops["variable"].attr["detail"].s == b"float32[2, 3]"
    matmul = ops["matmul"]
    assert [nodes[name].op for name in matmul.input] == ["argument", "read_variable"]
    assert all(name.startswith("dense/") for name in nodes)
    assert [d.size for d in matmul.attr["_output_shapes"].list.shape[0].dim] == [4, 3]
    assert matmul.attr["dtypes"].s == b"float32"
    with pytest.raises(ValueError, match=r"profiler=True .* sf.profiler.trace\(logdir\)"):
        sf.summary.trace_on(profiler=True)


def test_files_are_tensorflow_2s_and_flushed_on_leaving_as_default(tmp_path):
    writer = sf.summary.create_file_writer(tmp_path / "logs", max_queue=1000,
                                           flush_millis=10**7)
    with writer.as_default():
        sf.summary.scalar("a", 1.0, step=0)
    [name] = [p.name for p in (tmp_path / "logs").iterdir()]
    assert name.startswith("events.out.tfevents.") and name.endswith(".v2")
    assert read(tmp_path / "logs")["a"][0][0] == 0  # read before close: as_default flushed
    writer.close()


def test_import_stageflow_leaves_tensorboard_unloaded_and_says_how_to_install_it(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        import stageflow as sf
        sf.function(lambda x: x + 1.0)(sf.constant(1.0))
        assert sf.summary.scalar("a", 1.0, step=0) is False
        assert "tensorboard" not in sys.modules, "imported without a writer"
        sys.modules["tensorboard"] = None  # as where it is not installed
        try:
            sf.summary.create_file_writer({str(tmp_path)!r})
        except ImportError as error:
            print(error)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pip install 'stageflow[summary]'" in result.stdout
