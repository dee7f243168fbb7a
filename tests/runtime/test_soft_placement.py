"""Soft device placement: a scope naming a GPU that does not exist runs on the host CPU, as
TensorFlow's default (`tf.config.set_soft_device_placement(True)`), saying so once per
name; turned off, the scope is the error that says why there is no such GPU.

The suite emulates one GPU (conftest), so the missing GPU here is ``GPU:7``; a child
process without the emulated GPU checks ``sf.device("GPU:n")`` past the last real one."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import stageflow as sf
from stageflow.core import devices as core_devices


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Each test sees the first-time warning afresh, and leaves soft placement as it was."""
    monkeypatch.setattr(core_devices, "_softly_placed", set())
    before = sf.config.get_soft_device_placement()
    yield
    sf.config.set_soft_device_placement(before)


def test_soft_placement_is_on_by_default():
    assert sf.config.get_soft_device_placement() is True


def test_a_missing_gpu_runs_the_block_on_the_cpu_warning_once(fresh_warnings):
    x = sf.constant([1.0, 2.0])
    with pytest.warns(RuntimeWarning, match=r"no device /device:GPU:7.*soft device placement "
                                            r"runs the ops of sf.device\('GPU:7'\) on "
                                            r"/device:CPU:0") as caught:
        with sf.device("GPU:7") as placed:
            y = x * 2.0 + 1.0
    assert caught[0].filename == __file__  # the warning points at the user's `with`
    assert placed == "/device:CPU:0" and y.device == "/device:CPU:0"
    np.testing.assert_array_equal(y.numpy(), [3.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second scope of the same GPU says nothing
        with sf.device("/gpu:7"):
            z = sf.reduce_sum(x)
    assert float(z) == 3.0


def test_staged_functions_called_in_the_block_run_on_the_cpu(fresh_warnings):
    double = sf.function(lambda t: t * 2.0)
    with pytest.warns(RuntimeWarning), sf.device("GPU:7"):
        y = double(sf.constant([1.5]))
    assert y.device == "/device:CPU:0" and y.numpy().tolist() == [3.0]


def test_without_soft_placement_a_missing_gpu_is_the_clear_error(fresh_warnings):
    sf.config.set_soft_device_placement(False)
    assert sf.config.get_soft_device_placement() is False
    with pytest.raises(ValueError, match=r"no device /device:GPU:7: there are \d+ GPU\(s\); "
                                         r"the devices are /device:CPU:0, .*/device:GPU:0"):
        with sf.device("GPU:7"):
            pass


def test_a_missing_cpu_is_an_error_even_with_soft_placement(fresh_warnings):
    with pytest.raises(ValueError, match="no device /device:CPU:5: the CPU is split"):
        with sf.device("CPU:5"):
            pass


def test_a_process_without_gpus_places_gpu_scopes_on_the_cpu():
    code = (
        "import warnings\n"
        "import stageflow as sf\n"
        "gpus = [d for d in sf.list_devices() if 'GPU' in d]\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    with sf.device(f'GPU:{len(gpus)}'):\n"
        "        y = sf.constant([1.0, 2.0]) * 3.0\n"
        "print(y.device, y.numpy().tolist(), len(caught))\n"
        "sf.config.set_soft_device_placement(False)\n"
        "try:\n"
        "    with sf.device(f'GPU:{len(gpus)}'):\n"
        "        pass\n"
        "except ValueError as error:\n"
        "    print('error:', error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=True)
    lines = result.stdout.splitlines()
    assert lines[0] == "/device:CPU:0 [3.0, 6.0] 1", result.stdout + result.stderr
    assert lines[1].startswith("error: no device /device:GPU:"), lines
