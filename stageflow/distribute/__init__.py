"""`sf.distribute`: devices of other processes through Ray, with the local syntax.

    sf.distribute.connect(jobs={"worker": 2})          # a local Ray cluster, 2 workers
    with sf.device("/job:worker/task:1/device:CPU:0"):
        y = f(x)                                        # runs there; y stays there
    y.numpy()                                           # fetched
    sf.distribute.shutdown()
"""

from stageflow.core.exports import public_dir
from stageflow.distribute.cluster import connect, shutdown, workers
from stageflow.distribute.remote import TIMEOUT, RemoteDeviceError

__all__ = ["TIMEOUT", "RemoteDeviceError", "connect", "shutdown", "workers"]
__dir__ = public_dir(globals())  # not the submodules `cluster`, `remote`, `worker`
