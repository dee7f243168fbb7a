"""`sf.test`: TensorFlow's ``tf.test`` questions about accelerators, answered for stageflow
from its own device layer: whether a CUDA GPU is among the devices it can run on."""

from __future__ import annotations

from stageflow.runtime.devices import list_devices

__all__ = ["gpu_device_name", "is_built_with_cuda", "is_gpu_available"]


def _gpus() -> list[str]:
    return [name for name in list_devices() if ":GPU:" in name]


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability: object = None
                     ) -> bool:
    """Whether stageflow can run on a GPU here (TensorFlow's ``tf.test.is_gpu_available``):
    a GPU device is among `sf.list_devices()`.

    >>> sf.test.is_gpu_available() == any(":GPU:" in d for d in sf.list_devices())
    True
    """
    del cuda_only, min_cuda_compute_capability
    return bool(_gpus())


def gpu_device_name() -> str:
    """The name of the first GPU device, or "" when there is none (TensorFlow's
    ``tf.test.gpu_device_name``).

    >>> sf.test.gpu_device_name() == next(
    ...     (d for d in sf.list_devices() if ":GPU:" in d), "")
    True
    """
    gpus = _gpus()
    return gpus[0] if gpus else ""


def is_built_with_cuda() -> bool:
    """Whether stageflow can use CUDA here (TensorFlow's ``tf.test.is_built_with_cuda``):
    stageflow is one build for every machine, so the truthful answer is whether its device
    layer found a CUDA GPU.

    >>> sf.test.is_built_with_cuda() == sf.test.is_gpu_available()
    True
    """
    return is_gpu_available()
