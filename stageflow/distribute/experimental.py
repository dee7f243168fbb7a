"""`sf.distribute.experimental`: what TensorFlow keeps there: `CentralStorageStrategy`,
and the options of the collectives between workers, taken by `MultiWorkerMirroredStrategy`
(``communication_options=``). The collectives are gloo's ring and tree all-reduce whatever
is asked; `bytes_per_pack` sizes the buckets of gradients each all-reduce carries, the
other options are kept for the programs that pass them.
"""

from __future__ import annotations

import enum

from stageflow.core.exports import public_dir
from stageflow.distribute.strategy import CentralStorageStrategy


class CommunicationImplementation(enum.Enum):
    """Which collective implementation to use (TensorFlow's names).

    >>> sf.distribute.experimental.CommunicationImplementation.RING
    <CommunicationImplementation.RING: 'RING'>
    """

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


class CommunicationOptions:
    """Options of the collectives between workers: how many bytes to pack into one
    all-reduce, a timeout, the implementation.

    >>> sf.distribute.experimental.CommunicationOptions(bytes_per_pack=50 * 1024 * 1024)
    CommunicationOptions(bytes_per_pack=52428800, timeout_seconds=None, implementation=AUTO)
    """

    def __init__(self, bytes_per_pack: int = 0, timeout_seconds: float | None = None,
                 implementation: CommunicationImplementation = CommunicationImplementation.AUTO
                 ) -> None:
        self.bytes_per_pack = int(bytes_per_pack)
        self.timeout_seconds = timeout_seconds
        self.implementation = CommunicationImplementation(getattr(implementation, "value",
                                                                  implementation))

    def __repr__(self) -> str:
        return (f"CommunicationOptions(bytes_per_pack={self.bytes_per_pack}, "
                f"timeout_seconds={self.timeout_seconds}, "
                f"implementation={self.implementation.name})")


__all__ = ["CentralStorageStrategy", "CommunicationImplementation", "CommunicationOptions"]
__dir__ = public_dir(globals())
