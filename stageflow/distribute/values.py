"""Distributed values: one value per replica (`PerReplica`) and mirrored variables.

A `MirroredVariable` keeps one `sf.Variable` per replica device, kept identical by applying
the same updates on every replica. Inside a replica's step it is that replica's copy
(reads, assigns, the tape's record of a read); elsewhere it reads the first copy and writes
all of them, so a checkpoint saves it once and restores it into every copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import context
from stageflow.frontend import replica, tape
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable, VariableAggregation


class PerReplica:
    """The values of one result on each replica (`Strategy.run`'s result, a distributed
    dataset's element); `values` holds them in replica order. A staged function takes and
    returns it as its values.

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0"])
    >>> sf.distribute.PerReplica((sf.constant(1.0), sf.constant(2.0)))
    PerReplica:{
      0: sf.Tensor(1., shape=(), dtype=float32),
      1: sf.Tensor(2., shape=(), dtype=float32)
    }
    """

    def __init__(self, values: tuple[Any, ...] | list[Any]) -> None:
        self.values = tuple(values)

    def _nest_components(self) -> tuple[tuple[Any, ...], int]:
        return self.values, len(self.values)

    @classmethod
    def _nest_rebuild(cls, _: int, components: tuple[Any, ...]) -> PerReplica:
        return cls(components)

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        body = ",\n".join(f"  {index}: {value!r}" for index, value in enumerate(self.values))
        return f"PerReplica:{{\n{body}\n}}"


class PerReplicaSpec:
    """The signature of a `PerReplica` argument: one `sf.TensorSpec` per replica (what a
    distributed dataset's `element_spec` holds, for an `input_signature`).

    >>> sf.distribute.PerReplicaSpec(sf.TensorSpec([2]), sf.TensorSpec([2]))
    PerReplicaSpec(TensorSpec(shape=(2,), dtype=float32), TensorSpec(shape=(2,), dtype=float32))
    """

    def __init__(self, *value_specs: Any) -> None:
        self._value_specs = tuple(value_specs)

    def _nest_components(self) -> tuple[tuple[Any, ...], int]:
        return self._value_specs, len(self._value_specs)

    _nest_rebuild = PerReplica._nest_rebuild

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PerReplicaSpec) and other._value_specs == self._value_specs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PerReplicaSpec({', '.join(map(repr, self._value_specs))})"


class MirroredVariable(Variable):
    """One variable per replica of `strategy`, made by ``sf.Variable`` in its scope.

    `values` are the copies, one on each replica's device, in replica order.

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    >>> with strategy.scope():
    ...     v = sf.Variable([1.0, 2.0])
    >>> [copy.device for copy in v.values]
    ['/device:CPU:0', '/device:CPU:1']
    >>> _ = v.assign([3.0, 4.0])                 # outside a step: every copy
    >>> v.values[1]
    sf.Variable([3., 4.], name='Variable:.../replica_1', shape=(2,), dtype=float32)
    """

    def __init__(self, strategy: Any, values: list[Variable], central: bool = False
                 ) -> None:  # noqa: D107
        self._strategy = strategy
        self.values = tuple(values)
        # One variable that every replica reads (`CentralStorageStrategy`): inside a step
        # only the first replica writes it, with what every replica computes alike.
        self._central = central
        self.name = values[0].name
        self.trainable = values[0].trainable
        self.aggregation = values[0].aggregation

    def _here(self) -> Variable:
        """The copy of the replica this thread computes for, else the first."""
        current = replica.current()
        if current is not None and current.strategy is self._strategy:
            return self.values[current.replica_index]
        return self.values[0]

    def _aggregated(self, value: Any) -> Any:
        """What this replica writes: its own value, or with SUM or MEAN aggregation every
        replica's combined (the replicas write at the same point of the step)."""
        if self.aggregation is VariableAggregation.NONE:
            return value
        current = replica.current()
        return current.all_reduce(self.aggregation.value,
                                  convert_to_tensor(value, self.dtype))

    @property
    def _value(self) -> Any:
        return self._here()._current()

    @property
    def _device(self) -> str:
        return self._here()._device

    @property
    def _lock(self) -> Any:
        return self._here()._lock

    @property
    def _fetch(self) -> Any:
        return self._here()._fetch

    def read_value(self) -> Tensor:
        """The replica's copy (the first outside a replica's step); a tape watching the
        variable records the read as this variable's."""
        value = context.current_trace().read_variable(self._here())
        if context.state.tape_count:
            tape.variable_read(self, value)
        return value

    value = read_value

    def assign(self, value: Any) -> MirroredVariable:
        """Write the replica's copy inside a replica's step, else every copy."""
        return self._write("assign", value)

    def assign_add(self, delta: Any) -> MirroredVariable:
        return self._write("assign_add", delta)

    def assign_sub(self, delta: Any) -> MirroredVariable:
        return self._write("assign_sub", delta)

    def _write(self, method: str, value: Any) -> MirroredVariable:
        """`method` of the replica's copy inside a step (the replicas' values combined as
        the aggregation says), else of every copy."""
        current = replica.current()
        if current is not None and current.strategy is self._strategy:
            value = self._aggregated(value)  # every replica meets in the collective
            if not (self._central and current.replica_index):
                getattr(self.values[current.replica_index], method)(value)
        else:
            value = convert_to_tensor(value, self.dtype)
            for copy in self._distinct():
                getattr(copy, method)(value)
        return self

    def _distinct(self) -> list[Variable]:
        return list(dict.fromkeys(self.values))

    def _store(self, array: Any) -> None:
        """Write every copy (a checkpoint's restore), in this process or a worker's."""
        array = np.asarray(array)
        for copy in self._distinct():
            if copy._fetch is None:
                copy._store(array)
            else:
                with context.init_scope():
                    copy.assign(array)

    def __repr__(self) -> str:
        body = ",\n".join(f"  {index}: {copy!r}" for index, copy in enumerate(self.values))
        return f"MirroredVariable:{{\n{body}\n}}"
