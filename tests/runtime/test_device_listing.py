"""`sf.config.list_physical_devices`, `list_logical_devices`, `get_visible_devices` and
`experimental.set_memory_growth`: TensorFlow's records and names, reflecting the suite's
configuration (the CPU split into 4 logical devices, 1 emulated GPU after any real ones)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import stageflow as sf


def test_logical_devices_are_the_devices_ops_are_placed_on():
    logical = sf.config.list_logical_devices()
    assert [d.name for d in logical] == sf.list_devices()[:len(logical)]
    cpus = sf.config.list_logical_devices("CPU")
    assert cpus == [sf.config.LogicalDevice(f"/device:CPU:{i}", "CPU") for i in range(4)]
    gpus = sf.config.list_logical_devices("GPU")
    assert gpus and gpus[-1].device_type == "GPU"
    assert [d.name for d in gpus] == [f"/device:GPU:{i}" for i in range(len(gpus))]
    with sf.device(gpus[-1].name):
        assert (sf.constant([1.0]) + 1.0).device == gpus[-1].name
    assert sf.config.list_logical_devices("gpu") == gpus  # the type in any case


def test_physical_devices_one_cpu_and_each_gpu():
    physical = sf.config.list_physical_devices()
    assert physical[0] == sf.config.PhysicalDevice("/physical_device:CPU:0", "CPU")
    assert sf.config.list_physical_devices("CPU") == physical[:1]
    gpus = sf.config.list_physical_devices("GPU")
    assert [d.name for d in gpus] == [f"/physical_device:GPU:{i}"
                                      for i in range(len(sf.config.list_logical_devices("GPU")))]
    assert physical == physical[:1] + gpus
    assert sf.config.list_physical_devices("TPU") == []
    assert sf.config.get_visible_devices() == physical
    assert sf.config.get_visible_devices("GPU") == gpus


def test_records_are_tensorflows_named_tuples():
    device = sf.config.list_physical_devices("CPU")[0]
    name, device_type = device
    assert (name, device_type) == (device.name, device.device_type)
    assert repr(device) == "PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')"
    assert repr(sf.config.list_logical_devices()[0]) == (
        "LogicalDevice(name='/device:CPU:0', device_type='CPU')")


def test_memory_growth_is_accepted_and_remembered():
    gpus = sf.config.list_physical_devices("GPU")
    for device in [*gpus, sf.config.list_physical_devices("CPU")[0]]:
        sf.config.experimental.set_memory_growth(device, True)
        assert sf.config.experimental.get_memory_growth(device) is True
        sf.config.experimental.set_memory_growth(device, False)
        assert sf.config.experimental.get_memory_growth(device) is False
    with pytest.raises(ValueError, match="unrecognized device.*physical_device:CPU:0"):
        sf.config.experimental.set_memory_growth(
            sf.config.PhysicalDevice("/physical_device:GPU:9", "GPU"), True)


def test_a_fresh_process_lists_its_own_configuration():
    code = ("import stageflow as sf\n"
            "print(len(sf.config.list_logical_devices('CPU')))\n"
            "sf.config.set_logical_device_count('CPU', 2)\n"
            "print(len(sf.config.list_physical_devices('CPU')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    # Listing found the devices: the split can no longer change, as after any first use.
    assert result.stdout.split() == ["1"], result.stdout + result.stderr
    assert "can only be set before the devices are first used" in result.stderr


def test_a_program_lists_the_physical_cpu_then_splits_it_as_tensorflow_programs_do():
    code = ("import stageflow as sf\n"
            "cpu = sf.config.list_physical_devices('CPU')[0]\n"
            "sf.config.experimental.set_virtual_device_configuration(\n"
            "    cpu, [sf.config.LogicalDeviceConfiguration()] * 3)\n"
            "print(len(sf.config.list_logical_devices('CPU')),\n"
            "      len(sf.config.get_logical_device_configuration(cpu)))\n"
            "with sf.device('CPU:2'):\n"
            "    print((sf.constant(1.0) + 1.0).device)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.split() == ["3", "3", "/device:CPU:2"], result.stdout + result.stderr
    gpu = sf.config.list_physical_devices("GPU")[0]  # the suite's emulated GPU
    with pytest.raises(ValueError, match="only the CPU is split"):
        sf.config.set_logical_device_configuration(gpu, [sf.config.LogicalDeviceConfiguration()])
