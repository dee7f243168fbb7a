"""`sf.distribute`: distribution strategies, and devices of other processes through Ray.

    strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        model = ...                                     # variables mirrored per replica
    losses = strategy.run(step, args=(batch,))          # step once per replica
    strategy.reduce("SUM", losses, axis=None)

    sf.distribute.connect(jobs={"worker": 2})          # a local Ray cluster, 2 workers
    with sf.device("/job:worker/task:1/device:CPU:0"):
        y = f(x)                                        # runs there; y stays there
    y.numpy()                                           # fetched
    sf.distribute.shutdown()
"""

from stageflow.core.exports import public_dir
from stageflow.distribute import experimental
from stageflow.distribute.cluster import connect, shutdown, workers
from stageflow.distribute.cross_device_ops import (
    CrossDeviceOps,
    HierarchicalCopyAllReduce,
    NcclAllReduce,
    ReductionToOneDevice,
)
from stageflow.distribute.multi_worker import MultiWorkerMirroredStrategy
from stageflow.distribute.remote import TIMEOUT, RemoteDeviceError
from stageflow.distribute.replicas import ReplicaError
from stageflow.distribute.strategy import (
    DistributedDataset,
    InputContext,
    MirroredStrategy,
    OneDeviceStrategy,
    ReduceOp,
    ReplicaContext,
    Strategy,
    ValueContext,
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from stageflow.distribute.values import MirroredVariable, PerReplica, PerReplicaSpec

__all__ = ["TIMEOUT", "CrossDeviceOps", "DistributedDataset", "HierarchicalCopyAllReduce",
           "InputContext", "MirroredStrategy", "NcclAllReduce", "ReductionToOneDevice",
           "experimental",
           "MirroredVariable", "MultiWorkerMirroredStrategy", "OneDeviceStrategy", "PerReplica",
           "PerReplicaSpec",
           "ReduceOp", "RemoteDeviceError", "ReplicaContext", "ReplicaError", "Strategy",
           "ValueContext", "connect",
           "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context",
           "shutdown", "workers"]
__dir__ = public_dir(globals())  # not the submodules
