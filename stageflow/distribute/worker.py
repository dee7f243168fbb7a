"""What runs in each worker process: a stageflow runtime serving one task of a job.

`connect` makes `Worker` a Ray actor, one per task. Its methods are the remote half of the
coordinator's `RemoteDevice`: run one op's kernel on arrays (Ray hands it the arrays of
the object store, whichever worker put them there), compile a graph function from its
`sf` IR text once and call it by fingerprint, and report what it ran. Results go back to
Ray's object store and stay there until the coordinator fetches them. A Ray actor runs
its calls one at a time, in the order one caller made them: the paper's rule that calls
to one device run in order.
"""

from __future__ import annotations

import os
import time
from typing import Any

from stageflow.core.errors import KERNEL_ERRORS
from stageflow.core.primitive import REGISTRY
from stageflow.distribute import worker_collectives
from stageflow.frontend.variables import Variable
from stageflow.ir.text import parse_module
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.runtime.devices import list_devices
from stageflow.staging.compiler import Compilation


class Worker:
    """One task of one job (``/job:JOB/task:TASK``): its ops and graph functions."""

    def __init__(self, job: str, task: int) -> None:
        self.prefix = f"/job:{job}/task:{task}"
        self.programs: dict[str, Any] = {}
        self.variables: dict[str, Variable] = {}
        self.ops = 0
        self.calls = 0
        self.spans: list[tuple[float, float]] = []

    def devices(self) -> list[str]:
        """This process's devices, named as the coordinator lists them."""
        return [f"{self.prefix}{name}" for name in list_devices()]

    def stats(self) -> dict[str, Any]:
        """The process, how much it ran, and when each graph function call ran (tests
        prove work runs here, and two workers at once)."""
        return {"pid": os.getpid(), "ops": self.ops, "calls": self.calls,
                "spans": list(self.spans)}

    def execute(self, name: str, params: dict[str, Any], location: str, *arrays: Any) -> Any:
        """Apply primitive `name`'s kernel; a kernel's error names the op, this device and
        the coordinator's line."""
        primitive = REGISTRY[name]
        self.ops += 1
        try:
            result = primitive.kernel(*arrays, **params)
        except KERNEL_ERRORS as error:
            raise type(error)(f"{name} on {self.prefix}: {error}{location}") from None
        if not primitive.multiple_results:
            return result
        # One object per result; Ray stores a single return value as it is, not in a tuple.
        return tuple(result) if len(result) != 1 else result[0]

    def load(self, fingerprint: str, text: str, entry: str) -> None:
        """Compile the graph function of `text` (once per fingerprint)."""
        if fingerprint not in self.programs:
            compilation = Compilation.of_module(entry, parse_module(text))
            compilation.run_passes(DEFAULT_PIPELINE)
            self.programs[fingerprint] = compilation.executables([entry])[0]

    def call(self, fingerprint: str, with_shapes: bool, keys: list[str | None],
             *arrays: Any) -> Any:
        """Run a loaded graph function: its results (one, or a tuple), then their shapes
        if asked (results with unknown dims). Where `keys` has a key, the argument is the
        variable this worker keeps under it."""
        self.calls += 1
        start = time.time()
        values = [a if key is None else self.variables[key]
                  for key, a in zip(keys, arrays, strict=True)]
        results = self.programs[fingerprint].run(values)
        self.spans.append((start, time.time()))
        if with_shapes:
            return (*results, [getattr(r, "shape", ()) for r in results])
        return results[0] if len(results) == 1 else tuple(results)

    def join_collective(self, group: str, world_size: int, rank: int) -> None:
        """Join a `MultiWorkerMirroredStrategy`'s collective group as `rank`."""
        worker_collectives.join(group, world_size, rank)

    def leave_collective(self, group: str) -> None:
        worker_collectives.leave(group)

    def create_variable(self, key: str, value: Any, trainable: bool, name: str) -> None:
        self.variables[key] = Variable(value, trainable=trainable, name=name)

    def read_variable(self, key: str) -> Any:
        return self.variables[key].numpy()

    def assign_variable(self, key: str, value: Any) -> None:
        self.variables[key].assign(value)
