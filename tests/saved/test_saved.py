"""`sf.saved`: staged functions and modules saved to a directory and loaded without their
source, compiled from the saved IR, with their variables live."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stageflow as sf


def _batch(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3)).astype(np.float32)


class Net(sf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = sf.layers.Dense(4)
        self.scale = sf.Variable(2.0, trainable=False, name="scale")

    @sf.function(input_signature=[sf.TensorSpec((None, 3), sf.float32)])
    def call(self, x):
        return sf.nn.relu(self.dense(x)) * self.scale

    @sf.function
    def step(self, x, rate):
        loss = sf.reduce_mean(sf.nn.relu(self.dense(x)) * self.scale)
        self.scale.assign_sub(rate * loss)
        return {"loss": loss, "tag": "step"}


def test_function_with_unknown_batch_dim_round_trips(tmp_path):
    offset = sf.constant([1.0, 2.0, 3.0])

    @sf.function(input_signature=[sf.TensorSpec((None, 3), sf.float32, name="x")])
    def f(x):
        return sf.tanh(x * 2.0 + offset), sf.reduce_sum(x, axis=1)

    sf.saved.save(f, tmp_path)
    loaded = sf.saved.load(tmp_path)
    for n in (1, 5):
        x = _batch(n)
        for got, want in zip(loaded(x), f(x), strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json", "module.mlir", "variables.npz"]


def test_module_round_trip_and_assigning_loaded_variables(tmp_path):
    net = Net()
    x = _batch(4)
    expected = net(x).numpy()
    sf.saved.save(net, tmp_path)
    loaded = sf.saved.load(tmp_path)
    np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(loaded.call(_batch(7)).numpy(), net(_batch(7)).numpy(),
                               rtol=1e-6)
    assert [v.name for v in loaded.variables] == [v.name for v in net.variables]
    assert [v.trainable for v in loaded.variables] == [True, True, False]
    scale = next(v for v in loaded.variables if v.name == "scale")
    scale.assign(4.0)
    np.testing.assert_allclose(loaded(x).numpy(), 2 * expected, rtol=1e-6)
    np.testing.assert_allclose(net(x).numpy(), expected, rtol=1e-6)  # the original is apart


def test_every_traced_signature_is_saved_and_state_updates(tmp_path):
    net = Net()
    net.step(_batch(2), 0.5)
    net.step(_batch(3, seed=1), 0.25)
    sf.saved.save(net, tmp_path)
    loaded = sf.saved.load(tmp_path)
    before = float(net.scale.numpy())
    want = net.step(_batch(3, seed=2), 0.25)
    got = loaded.step(_batch(3, seed=2), rate=0.25)
    assert got["tag"] == "step"
    np.testing.assert_allclose(got["loss"].numpy(), want["loss"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(loaded.variables[-1].numpy(), net.scale.numpy(), rtol=1e-6)
    assert float(net.scale.numpy()) != before
    with pytest.raises(TypeError, match="argument 'rate' was 0.25 when the function was saved"):
        loaded.step(_batch(3), 0.75)


def test_wrong_inputs_raise_errors_naming_the_argument(tmp_path):
    net = Net()
    net(_batch(2))
    sf.saved.save(net, tmp_path)
    loaded = sf.saved.load(tmp_path)
    with pytest.raises(TypeError, match="argument 'x' has dtype float64.*float32"):
        loaded(_batch(2).astype(np.float64))
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(2, 3, 1\).*\(\?, 3\)"):
        loaded(_batch(2)[..., None])
    with pytest.raises(ValueError, match=r"argument 'x' has shape \(2, 4\)"):
        loaded(np.zeros((2, 4), np.float32))
    with pytest.raises(TypeError, match="argument 'x' must be a tensor"):
        loaded("not a tensor")
    with pytest.raises(TypeError, match="call: missing a required argument: 'x'"):
        loaded()


def test_nothing_traced_cannot_be_saved(tmp_path):
    @sf.function
    def f(x):
        return x + 1

    with pytest.raises(ValueError, match="no staged function to save: call a layer once"):
        sf.saved.save(f, tmp_path)
    with pytest.raises(ValueError, match="no staged function to save"):
        sf.saved.save(sf.layers.Dense(2), tmp_path)  # never called: no input shape known


def test_a_model_called_only_eagerly_saves_for_inputs_like_its_first(tmp_path):
    """A Keras model is called eagerly and then saved: its call is staged for inputs of
    the first call's shape, the batch dim free (it once said "call it once")."""
    model = sf.layers.Sequential([sf.layers.Dense(4, activation="relu"), sf.layers.Dense(2)])
    x = sf.constant(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32))
    want = model(x).numpy()
    sf.saved.save(model, tmp_path / "model")
    loaded = sf.saved.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded(x).numpy(), want)
    assert loaded(sf.ones([7, 5])).shape == (7, 2)


def test_interpreted_function_round_trips(tmp_path):
    @sf.function(jit=False)
    def f(x):
        return sf.exp(x) - 1.0

    x = _batch(2)
    want = f(x).numpy()
    sf.saved.save(f, tmp_path)
    np.testing.assert_allclose(sf.saved.load(tmp_path)(x).numpy(), want, rtol=1e-6)


DEFINING_MODULE = """
import stageflow as sf


class Model(sf.Module):
    def __init__(self):
        super().__init__()
        self.hidden = sf.layers.Dense(8, activation=sf.nn.relu)
        self.out = sf.layers.Dense(2)

    @sf.function(input_signature=[sf.TensorSpec((None, 3), sf.float32)])
    def call(self, x):
        return sf.nn.softmax(self.out(self.hidden(x)))
"""

SAVER = """
import sys, numpy as np, stageflow as sf
sys.path.insert(0, sys.argv[1])
import defining_module
model = defining_module.Model()
x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
np.save(sys.argv[3], model(x).numpy())
sf.saved.save(model, sys.argv[2])
"""

LOADER = """
import importlib.util, sys, numpy as np, stageflow as sf
sys.path.insert(0, sys.argv[1])
assert importlib.util.find_spec("defining_module") is None
loaded = sf.saved.load(sys.argv[2])
x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
np.testing.assert_allclose(loaded(x).numpy(), np.load(sys.argv[3]), rtol=1e-6)
print("loaded", loaded(x[:2]).shape)
"""


def test_loads_and_runs_in_a_fresh_process_without_the_defining_module(tmp_path):
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    source = source_dir / "defining_module.py"
    source.write_text(textwrap.dedent(DEFINING_MODULE))
    saved, expected = tmp_path / "saved", tmp_path / "expected.npy"
    arguments = [str(source_dir), str(saved), str(expected)]
    subprocess.run([sys.executable, "-c", SAVER, *arguments], check=True)
    source.unlink()
    for cached in source_dir.glob("__pycache__"):
        for file in cached.iterdir():
            file.unlink()
        cached.rmdir()
    result = subprocess.run([sys.executable, "-c", LOADER, *arguments], check=True,
                            capture_output=True, text=True)
    assert result.stdout.strip() == "loaded (2, 2)"


def test_callees_and_default_arguments_are_saved(tmp_path):
    @sf.function
    def inner(x):
        return sf.sigmoid(x) * 3.0

    @sf.function
    def outer(x, n=2):
        return inner(x) + inner(x * 2.0) + n

    x = _batch(2)
    want = outer(x).numpy()
    sf.saved.save(outer, tmp_path)
    assert "sf.call" in (tmp_path / "module.mlir").read_text()
    np.testing.assert_allclose(sf.saved.load(tmp_path)(x).numpy(), want, rtol=1e-6)


def test_infinite_and_nan_constants_survive_saving(tmp_path):
    """A -inf mask (softmax over masked positions) and NaN constants, saved and loaded:
    the IR prints them as bit patterns, which once came back as huge integers."""

    class Masked(sf.Module):
        @sf.function(input_signature=[sf.TensorSpec([3], sf.float32)])
        def f(self, x):
            scores = sf.nn.softmax(sf.where(x > 0, x, -np.inf))
            return scores + sf.constant([0.0, np.inf, np.nan])

    model = Masked()
    x = sf.constant([1.0, -1.0, 2.0])
    sf.saved.save(model, str(tmp_path / "masked"))
    loaded = sf.saved.load(str(tmp_path / "masked"))
    np.testing.assert_array_equal(loaded.f(x).numpy(), model.f(x).numpy())
    assert loaded.f(x).numpy()[0] > 0 and np.isinf(loaded.f(x).numpy()[1])


class _Scaled(sf.Module):
    def __init__(self):
        super().__init__()
        self.w = sf.Variable([1.0, 2.0, 3.0])

    @sf.function(input_signature=[sf.TensorSpec([3], sf.float32)])
    def f(self, x):
        return x * self.w


def test_broken_saved_directories_raise_naming_the_file(tmp_path):
    """Once raw KeyError/IndexError, or a variable of the wrong shape loaded silently."""
    import json

    def fresh(name):
        path = tmp_path / name
        sf.saved.save(_Scaled(), str(path))
        return path

    with pytest.raises(ValueError, match="cannot read .*manifest.json"):
        sf.saved.load(str(tmp_path / "absent"))
    broken = fresh("no_functions")
    manifest = json.loads((broken / "manifest.json").read_text())
    del manifest["functions"]
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest.json: field functions is missing"):
        sf.saved.load(str(broken))
    truncated = fresh("truncated_npz")
    (truncated / "variables.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="cannot read .*variables.npz"):
        sf.saved.load(str(truncated))
    reshaped = fresh("reshaped")
    np.savez(reshaped / "variables.npz", v0=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"variables.npz: v0 is float32\[4\], @f.* takes"):
        sf.saved.load(str(reshaped))
    emptied = fresh("emptied")
    np.savez(emptied / "variables.npz")
    with pytest.raises(ValueError, match=r"lacks the variables \['v0'\]"):
        sf.saved.load(str(emptied))
    loaded = sf.saved.load(str(fresh("intact")))
    np.testing.assert_array_equal(loaded.f(sf.ones((3,))).numpy(), [1.0, 2.0, 3.0])
