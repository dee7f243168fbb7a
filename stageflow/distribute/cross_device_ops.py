"""How a `MirroredStrategy` combines its replicas' values, as TensorFlow names the choices
(``tf.distribute.CrossDeviceOps``): a program written for TensorFlow passes one to the
strategy. In one process every choice is the same here, one `sf.all_reduce` op over the
replicas' values, fused with what reads it; the classes record what was asked for.
"""

from __future__ import annotations

from typing import Any


class CrossDeviceOps:
    """The base of the cross-device reductions a `MirroredStrategy` takes.

    >>> ops = sf.distribute.HierarchicalCopyAllReduce(num_packs=2)
    >>> sf.distribute.MirroredStrategy(["CPU:0"], cross_device_ops=ops).num_replicas_in_sync
    1
    """

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class ReductionToOneDevice(CrossDeviceOps):
    """Reduce on one device, then copy to the others (TensorFlow's default off GPUs).

    >>> sf.distribute.ReductionToOneDevice()
    ReductionToOneDevice(reduce_to_device=None, accumulation_fn=None)
    """

    def __init__(self, reduce_to_device: str | None = None, accumulation_fn: Any = None
                 ) -> None:
        self.reduce_to_device = reduce_to_device
        self.accumulation_fn = accumulation_fn


class HierarchicalCopyAllReduce(CrossDeviceOps):
    """TensorFlow's hierarchical copy between GPUs.

    >>> sf.distribute.HierarchicalCopyAllReduce()
    HierarchicalCopyAllReduce(num_packs=1)
    """

    def __init__(self, num_packs: int = 1) -> None:
        self.num_packs = num_packs


class NcclAllReduce(CrossDeviceOps):
    """TensorFlow's NCCL all-reduce between GPUs.

    >>> sf.distribute.NcclAllReduce(num_packs=1)
    NcclAllReduce(num_packs=1)
    """

    def __init__(self, num_packs: int = 1) -> None:
        self.num_packs = num_packs
