"""Devices stageflow can place tensors and graph functions on (the CPU, for now)."""

from __future__ import annotations

CPU = "/device:CPU:0"


def list_devices() -> list[str]:
    """Names of the available devices, as `sf.list_devices()` reports them."""
    return [CPU]
