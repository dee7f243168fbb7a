"""Distribution strategies: one training step run as data-parallel replicas.

    strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():                      # variables: one copy per replica
        model, optimizer = make_model(), sf.optimizers.SGD(0.1)

    @sf.function
    def train_step(batch):                      # batch: one shard per replica
        def step(x, y):
            with sf.GradientTape() as tape:
                loss = sf.reduce_sum(loss_fn(y, model(x))) / GLOBAL_BATCH
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))  # all-reduced
            return loss
        losses = strategy.run(step, args=batch)
        return strategy.reduce(sf.distribute.ReduceOp.SUM, losses, axis=None)

    for batch in strategy.experimental_distribute_dataset(dataset):
        train_step(batch)

As in TensorFlow: `run` calls the step once per replica (`replicas`, lockstep threads), the
optimizer sums the replicas' gradients before it updates (so every replica's copy of a
variable takes the same update), `reduce` combines per-replica results. Eagerly each
replica's ops run on its device; staged, every replica's ops are one graph, each collective
one `all_reduce` op over the replicas' values.
"""

from __future__ import annotations

import enum
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from stageflow.core import context, devices, nest
from stageflow.distribute import replicas
from stageflow.distribute.collectives import all_reduce_values
from stageflow.distribute.values import MirroredVariable, PerReplica, PerReplicaSpec
from stageflow.frontend import replica
from stageflow.frontend.ops.convert import constant, convert_to_tensor
from stageflow.frontend.ops.reductions import reduce_sum
from stageflow.frontend.ops.shape import concat
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tape import custom_gradient
from stageflow.frontend.tracer import GraphTrace
from stageflow.frontend.variables import variable_creator_scope
from stageflow.staging.function import Function, function


class ReduceOp(enum.Enum):
    """How `Strategy.reduce` and `ReplicaContext.all_reduce` combine the replicas' values
    (TensorFlow's ``tf.distribute.ReduceOp``, with MAX and MIN besides).

    >>> sf.distribute.ReduceOp.SUM
    <ReduceOp.SUM: 'SUM'>
    """

    SUM = "SUM"
    MEAN = "MEAN"
    MAX = "MAX"
    MIN = "MIN"


def _reduce_op(value: Any) -> ReduceOp:
    try:
        return ReduceOp(value.upper() if isinstance(value, str) else value)
    except ValueError:
        raise ValueError(f"unknown reduce op {value!r}: one of "
                         f"{', '.join(op.name for op in ReduceOp)}") from None


class ReplicaContext:
    """The replica a step runs for inside `Strategy.run` (`get_replica_context`): which one
    it is, and the collectives between the replicas of the step.

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0"])
    >>> def step():
    ...     ctx = sf.distribute.get_replica_context()
    ...     return ctx.all_reduce("sum", sf.constant(2.0)), ctx.num_replicas_in_sync
    >>> strategy.run(step)
    (sf.Tensor(2., shape=(), dtype=float32), 1)
    """

    def __init__(self, strategy: Strategy, replica_index: int) -> None:
        self.strategy = strategy
        self.replica_index = replica_index
        self.variables_made: dict[tuple, int] = {}  # by place and name, in this run

    @property
    def num_replicas_in_sync(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self) -> Any:
        """This replica's index, an int32 tensor (as TensorFlow gives it)."""
        return constant(self.replica_index, "int32")

    def all_reduce(self, reduce_op: Any, value: Any) -> Any:
        """Every replica's `value` (a nest of tensors) combined by `reduce_op`; every
        replica gets the same result. A tape differentiates through it: the gradient of
        a sum is the sum of the replicas' gradients (an all-reduce in the backward pass)."""
        op = _reduce_op(reduce_op)
        leaves, tree = nest.flatten(value)
        if not leaves:
            return value
        reduced = _all_reduce_leaves(self.strategy._combine, op,
                                     *[convert_to_tensor(leaf) for leaf in leaves])
        return nest.unflatten(tree, list(reduced) if isinstance(reduced, tuple | list)
                              else [reduced])

    def all_gather(self, value: Any, axis: int) -> Any:
        """Every replica's `value` (a nest of tensors) concatenated along `axis`, in
        replica order; every replica gets the same result."""
        self._in_this_process("all_gather")
        leaves, tree = nest.flatten(value)
        gathered = replicas.sync(
            "all_gather", lambda payloads: [
                [concat(list(parts), axis) for parts in zip(*payloads, strict=True)]
            ] * len(payloads),
            [convert_to_tensor(leaf) for leaf in leaves])
        return nest.unflatten(tree, gathered)

    def _in_this_process(self, what: str) -> None:
        if self.strategy.stages_each_replica:
            raise NotImplementedError(
                f"{type(self.strategy).__name__}: {what} meets the replicas in this process, "
                "and this strategy's replicas run in worker processes; all_reduce is the "
                "collective they have")

    def merge_call(self, merge_fn: Callable[..., Any], args: tuple = (),
                   kwargs: dict | None = None) -> Any:
        """``merge_fn(strategy, *args, **kwargs)`` once for all replicas, each argument a
        `PerReplica` of the replicas' arguments; every replica gets its result."""
        self._in_this_process("merge_call")
        def merge(payloads: list[Any]) -> list[Any]:
            count = len(payloads)
            merged_args = tuple(PerReplica([p[0][i] for p in payloads]) if count > 1
                                else payloads[0][0][i] for i in range(len(args)))
            merged_kwargs = {key: PerReplica([p[1][key] for p in payloads]) if count > 1
                             else payloads[0][1][key] for key in (kwargs or {})}
            with replica.entered(None):
                result = merge_fn(self.strategy, *merged_args, **merged_kwargs)
            return [result] * count

        return replicas.sync("merge_call", merge, (args, kwargs or {}))


# How a strategy's replicas combine their values: ``combine(name, kind, values)`` gives this
# replica's results of the all-reduce `kind` ("sum", "mean", "max", "min") of `values`.
Combine = Callable[[str, str, list[Any]], list[Any]]


def _all_reduce_leaves(combine: Combine, op: ReduceOp, *leaves: Any) -> Any:
    """The replicas' all-reduce of `leaves`, with its gradient an all-reduce too."""

    @custom_gradient
    def reduced(*values: Any) -> Any:
        results = combine(f"all_reduce({op.name})", op.name.lower(), list(values))

        def gradient(*cotangents: Any) -> Any:
            # d/dx_r of sum_j y_j over every replica's use of the result: the sum of the
            # replicas' cotangents (their mean for MEAN); MAX and MIN pass it where this
            # replica's value is the extreme one.
            kind = "mean" if op is ReduceOp.MEAN else "sum"
            summed = combine(f"all_reduce({op.name}) gradient", kind,
                             [convert_to_tensor(c) for c in cotangents])
            if op in (ReduceOp.MAX, ReduceOp.MIN):
                summed = [g * (x == y) for g, x, y in
                          zip(summed, values, results, strict=True)]
            return summed if len(summed) > 1 else summed[0]

        return (results if len(results) > 1 else results[0]), gradient

    return reduced(*leaves)


class Strategy:
    """What every strategy offers (TensorFlow's ``tf.distribute.Strategy``). The default
    one (`get_strategy` outside any scope) has one replica, the caller itself.

    >>> strategy = sf.distribute.get_strategy()
    >>> isinstance(strategy, sf.distribute.Strategy), strategy.num_replicas_in_sync
    (True, 1)
    >>> strategy.run(lambda x: x * 2.0, args=(sf.constant(1.0),))
    sf.Tensor(2., shape=(), dtype=float32)
    """

    def __init__(self, replica_devices: list[str]) -> None:
        self._devices = replica_devices
        # Made by the run in progress, by place in the code, name and count there.
        self._created: dict[tuple, MirroredVariable] = {}
        self._creating = threading.RLock()

    @property
    def num_replicas_in_sync(self) -> int:
        return len(self._devices)

    @property
    def extended(self) -> Strategy:
        return self

    @property
    def worker_devices(self) -> tuple[str, ...]:
        """The replicas' devices, in replica order."""
        return tuple(self._devices)

    @contextmanager
    def scope(self) -> Iterator[Strategy]:
        """Inside the block, variables are made for this strategy's replicas."""
        with replica.strategy_scope(self), variable_creator_scope(self._create_variable):
            yield self

    def _create_variable(self, next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        return next_creator(**kwargs)

    # Whether the replicas run in other processes, their collectives met there: `run` is
    # then called from Python with a staged step, rather than staged itself inside an
    # `sf.function`, and the collectives that meet in this process (`all_gather`,
    # `merge_call`) are not theirs.
    stages_each_replica = False

    def _step(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """What each replica calls for `run(fn)`."""
        return fn

    def _schedule(self, step: Callable[..., Any]) -> str:
        """How `run` runs the replicas of `step` (`replicas.run_replicas`)."""
        return replicas.LOCKSTEP

    def _combine(self, name: str, kind: str, values: list[Any]) -> list[Any]:
        """This replica's results of an all-reduce: the replicas meet in lockstep and one
        `all_reduce` op over their values gives every replica the same results."""
        return replicas.sync(
            name, lambda payloads: [all_reduce_values(kind, payloads)] * len(payloads),
            values)

    def run(self, fn: Callable[..., Any], args: tuple | list = (),
            kwargs: dict | None = None) -> Any:
        """``fn(*args, **kwargs)`` once per replica (a `PerReplica` argument gives each its
        own value); a result per replica (`PerReplica`), or the result itself with one."""
        step = self._step(fn)
        count = self.num_replicas_in_sync
        kwargs = kwargs or {}
        args = tuple(args) if isinstance(args, list | tuple) else (args,)
        per_replica = [(_select(args, index), _select(kwargs, index))
                       for index in range(count)]
        contexts = [ReplicaContext(self, index) for index in range(count)]
        self._created = {}
        with self.scope():
            results = replicas.run_replicas(step, per_replica, self._devices, contexts,
                                            self._schedule(step))
        if count == 1:
            return results[0]
        flat = [nest.flatten(result) for result in results]
        tree = flat[0][1]
        for index, (_, other) in enumerate(flat[1:], start=1):
            if other != tree:
                raise ValueError(f"{self.__class__.__name__}.run: replica {index} returned a "
                                 "different structure than replica 0")
        leaves = [PerReplica(values) for values in
                  zip(*(leaves for leaves, _ in flat), strict=True)]
        return nest.unflatten(tree, leaves)

    def reduce(self, reduce_op: Any, value: Any, axis: int | None = None) -> Any:
        """One tensor on the host of a per-replica value (a nest of them): the replicas'
        values combined by `reduce_op`, each first reduced along `axis` when given (MEAN
        then divides by the elements along `axis` over all replicas, as TensorFlow does)."""
        op = _reduce_op(reduce_op)
        leaves, tree = nest.flatten(value)
        with devices.device(_HOST):  # the result is the caller's, on the host
            reduced = [self._reduce_leaf(op, leaf, axis) for leaf in leaves]
        return nest.unflatten(tree, reduced)

    def _reduce_leaf(self, op: ReduceOp, value: Any, axis: int | None) -> Any:
        if isinstance(value, PerReplica):
            values = [convert_to_tensor(v) for v in value.values]
        elif op is ReduceOp.SUM and self.num_replicas_in_sync > 1:
            raise ValueError(f"{self.__class__.__name__}.reduce: SUM of a value that is not "
                             "per-replica (a result of `run`) would count it once per "
                             "replica; reduce the per-replica value instead")
        else:
            values = [convert_to_tensor(value)]
        if axis is None:
            return all_reduce_values(op.name.lower(), [[v] for v in values])[0]
        if op in (ReduceOp.MAX, ReduceOp.MIN):
            raise ValueError(f"{self.__class__.__name__}.reduce: axis= is taken with SUM and "
                             f"MEAN, not {op.name}")
        total = all_reduce_values("sum", [[reduce_sum(v, axis)] for v in values])[0]
        if op is ReduceOp.MEAN:
            count = sum(int(v.shape[axis]) for v in values)
            total = total / convert_to_tensor(count, total.dtype)
        return total

    def experimental_split_batch(self, value: Any) -> Any:
        """A global batch (a nest of tensors) as per-replica shards, split along the first
        axis as `experimental_distribute_dataset` splits its elements (inside a staged step
        too, as slices); itself with one replica."""
        count = self.num_replicas_in_sync
        if count == 1:
            return value
        shards = _split_element(value, count)
        leaves = [nest.flatten(shard)[0] for shard in shards]
        return nest.unflatten(nest.flatten(value)[1],
                              [PerReplica(values) for values in zip(*leaves, strict=True)])

    def gather(self, value: Any, axis: int) -> Any:
        """The replicas' values (a nest of per-replica values) concatenated along `axis`."""
        leaves, tree = nest.flatten(value)
        return nest.unflatten(tree, [concat(list(self.experimental_local_results(leaf)), axis)
                                     for leaf in leaves])

    def experimental_local_results(self, value: Any) -> tuple[Any, ...]:
        """The replicas' values of a per-replica value, in replica order (a plain value:
        itself, once)."""
        return value.values if isinstance(value, PerReplica) else (value,)

    def experimental_distribute_values_from_function(
            self, value_fn: Callable[[ValueContext], Any]) -> Any:
        """``value_fn(ValueContext)`` once per replica, as a per-replica value."""
        values = []
        for index, device in enumerate(self._devices):
            with devices.device(device):
                values.append(value_fn(ValueContext(index, self.num_replicas_in_sync)))
        return values[0] if len(values) == 1 else PerReplica(values)

    def experimental_distribute_dataset(self, dataset: Any, options: Any = None
                                        ) -> DistributedDataset:
        """`dataset`'s elements (global batches) split along their first axis into one
        shard per replica, each on its replica's device."""
        return DistributedDataset(self, dataset, split=_splits(dataset))

    def distribute_datasets_from_function(self, dataset_fn: Callable[[InputContext], Any],
                                          options: Any = None) -> DistributedDataset:
        """``dataset_fn(InputContext)`` gives the dataset of one input pipeline, batched
        per replica (`InputContext.get_per_replica_batch_size`); here, in one process, each
        replica takes its shard of that pipeline's elements."""
        context_ = InputContext(1, 0, self.num_replicas_in_sync)
        return DistributedDataset(self, dataset_fn(context_), split=False)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(devices={list(self._devices)})"


class MirroredStrategy(Strategy):
    """Synchronous data parallelism over this process's devices: one replica per device,
    variables mirrored on each (TensorFlow's ``tf.distribute.MirroredStrategy``).

    `devices` are device names (``["CPU:0", "CPU:1"]``, logical CPUs made by
    `sf.config.set_logical_device_count`, GPUs); by default every GPU of this process,
    else every CPU (the logical ones included), as TensorFlow chooses.
    A GPU that does not exist is the host, as `sf.device` places it under soft placement.
    `cross_device_ops` (`sf.distribute.CrossDeviceOps`) is taken for TensorFlow programs:
    in one process every choice is the same `all_reduce` op.

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0"])
    >>> strategy.num_replicas_in_sync
    1
    >>> with strategy.scope():
    ...     v = sf.Variable(1.0)
    >>> v.values
    (sf.Variable(1., name='Variable:...', shape=(), dtype=float32),)
    """

    def __init__(self, devices: list[str] | tuple[str, ...] | None = None,
                 cross_device_ops: Any = None) -> None:
        if devices is None:
            local = [name for name in _listed_devices() if name.startswith("/device:")]
            devices = ([name for name in local if name.startswith("/device:GPU:")]
                       or [name for name in local if name.startswith("/device:CPU:")])
        if not devices:
            raise ValueError("MirroredStrategy: needs at least one device")
        named = [_resolve_missing_gpu_too(name) for name in devices]
        if len(set(named)) != len(named):
            raise ValueError(f"MirroredStrategy: a device is named twice in {list(devices)}")
        # As `sf.device` places ops: a GPU that does not exist is the host, with soft
        # placement on (TensorFlow's default), so GPU code runs here as a replica per name.
        resolved = [_placement(name) for name in devices]
        super().__init__(resolved)
        self.cross_device_ops = cross_device_ops  # every choice is one all_reduce op here
        self._whole_steps: weakref.WeakKeyDictionary[Function, Function] = \
            weakref.WeakKeyDictionary()
        self._mirroring = threading.local()  # set on a thread computing an initial value

    def run(self, fn: Callable[..., Any], args: tuple | list = (),
            kwargs: dict | None = None) -> Any:
        """As `Strategy.run`; a step that is an `sf.function` is staged with the replicas
        around it, as one graph (each replica tracing its own would put a collective
        between two graphs): the Python function inside a trace, else the whole `run`
        staged once per step function."""
        if not isinstance(fn, Function):
            return super().run(fn, args, kwargs)
        python = fn.python_callable()
        if isinstance(context.current_trace(), GraphTrace):
            return super().run(python, args, kwargs)
        whole = self._whole_steps.get(fn)
        if whole is None:
            whole = self._whole_steps[fn] = function(
                lambda a, k: Strategy.run(self, python, a, k), jit=fn.jit)
        args = tuple(args) if isinstance(args, list | tuple) else (args,)
        return whole(args, kwargs or {})

    def _create_variable(self, next_creator: Callable[..., Any], **kwargs: Any) -> Any:
        """In the scope, a variable per replica; inside `run`, where every replica creates
        the same variables, the first to reach a creation (the n-th of its name at one
        place of the code) makes it for all. Matched by place and name, not by count: a
        replica that finds a variable made already (an optimizer's slot another replica
        made) skips a creation the others make, so the slots made at the one line of
        `add_slot` come in a different order in each replica; their names (the variable's
        and the slot's) tell them apart."""
        if getattr(self._mirroring, "active", False):
            # Made while a mirrored variable's initial value is computed (the global random
            # generator's state, on its first draw): the process's own, not per replica.
            return next_creator(**kwargs)
        current = replica.current()
        if current is None or current.strategy is not self:
            return self._mirror(next_creator, kwargs)
        place = (_creation_site(), kwargs.get("name"))
        with self._creating:
            count = current.variables_made.get(place, 0)
            current.variables_made[place] = count + 1
            made = self._created.get((place, count))
            if made is None:
                made = self._created[(place, count)] = self._mirror(next_creator, kwargs)
            return made

    def _mirror(self, next_creator: Callable[..., Any], kwargs: dict) -> MirroredVariable:
        """One variable per replica device, each starting from the first's value."""
        first = self._first(next_creator, kwargs, self._devices[0])
        copies = [first]
        for index, device in enumerate(self._devices[1:], start=1):
            with devices.device(device):
                copies.append(next_creator(**{
                    **kwargs, "initial_value": first.numpy(), "dtype": first.dtype,
                    "name": f"{first.name}/replica_{index}"}))
        return MirroredVariable(self, copies)

    def _first(self, next_creator: Callable[..., Any], kwargs: dict, device: str) -> Any:
        """The variable `kwargs` make on `device`: its initial value computed there, the
        variables that computing makes left the process's own (`_create_variable`)."""
        self._mirroring.active = True
        try:
            with devices.device(device):
                return next_creator(**kwargs)
        finally:
            self._mirroring.active = False


class CentralStorageStrategy(MirroredStrategy):
    """Replicas on the compute devices, every variable once on the parameter device
    (TensorFlow's ``tf.distribute.experimental.CentralStorageStrategy``): each replica
    reads the one copy; inside a step the first replica writes it with the update every
    replica computes alike from the summed gradients.

    >>> strategy = sf.distribute.experimental.CentralStorageStrategy(["CPU:0", "CPU:1"])
    >>> with strategy.scope():
    ...     v = sf.Variable(1.0)
    >>> v.values[0] is v.values[1], v.device
    (True, '/device:CPU:0')
    """

    def __init__(self, compute_devices: list[str] | None = None,
                 parameter_device: str | None = None) -> None:
        super().__init__(compute_devices)
        self._parameter_device = _placement(parameter_device or _HOST)

    def _mirror(self, next_creator: Callable[..., Any], kwargs: dict) -> MirroredVariable:
        variable = self._first(next_creator, kwargs, self._parameter_device)
        return MirroredVariable(self, [variable] * self.num_replicas_in_sync, central=True)


class OneDeviceStrategy(MirroredStrategy):
    """Everything on one device, through the strategy API (TensorFlow's
    ``tf.distribute.OneDeviceStrategy``).

    >>> sf.distribute.OneDeviceStrategy("CPU:0").num_replicas_in_sync
    1
    """

    def __init__(self, device: str) -> None:
        super().__init__([device])


class _DefaultStrategy(Strategy):
    """The strategy outside any scope: one replica, this thread, plain variables."""

    def __init__(self) -> None:
        super().__init__([_HOST])

    def run(self, fn: Callable[..., Any], args: tuple | list = (),
            kwargs: dict | None = None) -> Any:
        args = tuple(args) if isinstance(args, list | tuple) else (args,)
        return fn(*args, **(kwargs or {}))


_HOST = devices.HOST
_DEFAULT = _DefaultStrategy()
_DEFAULT_REPLICA = ReplicaContext(_DEFAULT, 0)


def _listed_devices() -> list[str]:
    return devices.listed()


def _creation_site() -> tuple:
    """Where in the code a variable is being made: the instruction of every frame of this
    thread (the same for every replica, which runs the same code)."""
    frame = sys._getframe(2)
    site = []
    while frame is not None:
        site.append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(site)


def _placement(name: str) -> str:
    return devices.placement(name)


def _resolve_missing_gpu_too(name: str) -> str:
    """The canonical form of a device name, whether or not the device exists."""
    return str(devices.parse(devices.canonical(name)))


def _select(structure: Any, index: int) -> Any:
    """Replica `index`'s view of `structure`: each `PerReplica` in it replaced by its
    value for that replica."""
    leaves, tree = nest.flatten(structure)
    return nest.unflatten(tree, [leaf.values[index] if isinstance(leaf, PerReplica) else leaf
                                 for leaf in leaves])


class ValueContext:
    """What `experimental_distribute_values_from_function` tells its function.

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    >>> value = strategy.experimental_distribute_values_from_function(
    ...     lambda ctx: sf.constant(ctx.replica_id_in_sync_group * 10))
    >>> [int(v) for v in value.values]
    [0, 10]
    """

    def __init__(self, replica_id_in_sync_group: int, num_replicas_in_sync: int) -> None:
        self.replica_id_in_sync_group = replica_id_in_sync_group
        self.num_replicas_in_sync = num_replicas_in_sync


class InputContext:
    """What `distribute_datasets_from_function` tells its function: the input pipelines
    and the replicas, to size a per-replica batch.

    >>> sf.distribute.InputContext(1, 0, 2).get_per_replica_batch_size(64)
    32
    """

    def __init__(self, num_input_pipelines: int, input_pipeline_id: int,
                 num_replicas_in_sync: int) -> None:
        self.num_input_pipelines = num_input_pipelines
        self.input_pipeline_id = input_pipeline_id
        self.num_replicas_in_sync = num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(f"the global batch size {global_batch_size} is not divisible by "
                             f"the {self.num_replicas_in_sync} replicas")
        return global_batch_size // self.num_replicas_in_sync


class DistributedDataset:
    """A dataset whose elements are per-replica: each global batch split along its first
    axis into one shard per replica (the first replicas take one row more where it does
    not divide), each shard on its replica's device. With `split` False, consecutive
    elements go to the replicas in turn (a pipeline already batched per replica).

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    >>> dataset = sf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0, 4.0]).batch(4)
    >>> [[v.numpy().tolist() for v in batch.values]
    ...  for batch in strategy.experimental_distribute_dataset(dataset)]
    [[[1.0, 2.0], [3.0, 4.0]]]
    """

    def __init__(self, strategy: Strategy, dataset: Any, split: bool | None = True) -> None:
        self._strategy = strategy
        self._dataset = dataset
        self._split = split  # None: every replica takes each element whole

    @property
    def element_spec(self) -> Any:
        """The signature of each element: per leaf of the dataset's, a `PerReplicaSpec` of
        the shards' specs (the first dim unknown unless it splits evenly), or the dataset's
        own with one replica; for an `input_signature`."""
        spec = self._dataset.element_spec
        count = self._strategy.num_replicas_in_sync
        if count == 1:
            return spec
        leaves, tree = nest.flatten(spec)
        shards = []
        for leaf in leaves:
            rows = leaf.shape[0] if self._split and len(leaf.shape) else None
            rows = rows // count if rows is not None and rows % count == 0 else None
            shard = TensorSpec((rows, *leaf.shape[1:]) if self._split else leaf.shape,
                               leaf.dtype)
            shards.append(PerReplicaSpec(*[shard] * count))
        return nest.unflatten(tree, shards)

    def __iter__(self) -> Iterator[Any]:
        strategy = self._strategy
        count = strategy.num_replicas_in_sync
        iterator = iter(self._dataset)
        while True:
            if self._split is not False:
                try:
                    element = next(iterator)
                except StopIteration:
                    return
                shards = (_split_element(element, count) if self._split
                          else [element] * count)
            else:
                shards = []
                for _ in range(count):
                    try:
                        shards.append(next(iterator))
                    except StopIteration:
                        return
            placed = []
            for shard, device in zip(shards, strategy.worker_devices, strict=True):
                leaves, tree = nest.flatten(shard)
                placed.append(nest.unflatten(tree, [convert_to_tensor(leaf).to(device)
                                                    for leaf in leaves]))
            if count == 1:
                yield placed[0]
            else:
                leaves = [nest.flatten(shard)[0] for shard in placed]
                tree = nest.flatten(placed[0])[1]
                yield nest.unflatten(tree, [PerReplica(values)
                                            for values in zip(*leaves, strict=True)])


def _splits(dataset: Any) -> bool | None:
    """How a dataset's `auto_shard_policy` (`sf.data.Options`) has it distributed: each
    element split over the replicas (``AUTO``, ``DATA``), or whole to each (``OFF``)."""
    options = getattr(dataset, "options", None)
    policy = options().experimental_distribute.auto_shard_policy if options else None
    name = getattr(policy, "name", "AUTO")
    if name in ("AUTO", "DATA", "HINT"):
        return True
    if name == "OFF":
        return None
    raise NotImplementedError(f"experimental_distribute_dataset: auto_shard_policy {name} "
                              "shards by the files a pipeline reads, and stageflow's sources "
                              "are not files; DATA splits each global batch over the replicas")


def _split_element(element: Any, count: int) -> list[Any]:
    """One nest per replica, each leaf split along its first axis."""
    leaves, tree = nest.flatten(element)
    tensors = [convert_to_tensor(leaf) for leaf in leaves]
    if not tensors:
        return [element] * count
    rows = int(tensors[0].shape[0])
    bounds = [index * (rows // count) + min(index, rows % count) for index in range(count + 1)]
    return [nest.unflatten(tree, [t[bounds[i]:bounds[i + 1]] for t in tensors])
            for i in range(count)]


def get_strategy() -> Strategy:
    """The strategy of the innermost `scope` (or `run`) of this thread; the default one
    (one replica) outside any.

    >>> sf.distribute.get_strategy().num_replicas_in_sync
    1
    """
    return replica.scoped_strategy() or _DEFAULT


def has_strategy() -> bool:
    """Whether a strategy's scope is open on this thread.

    >>> sf.distribute.has_strategy()
    False
    """
    return replica.scoped_strategy() is not None


def get_replica_context() -> ReplicaContext | None:
    """The replica context inside `Strategy.run`; None in a strategy's scope outside it
    (the cross-replica context); the default one replica's outside any scope.

    >>> sf.distribute.get_replica_context().num_replicas_in_sync
    1
    """
    current = replica.current()
    if current is not None:
        return current
    return None if replica.scoped_strategy() is not None else _DEFAULT_REPLICA


def in_cross_replica_context() -> bool:
    """Whether this thread is in a strategy's scope but not inside its `run`.

    >>> sf.distribute.in_cross_replica_context()
    False
    """
    return replica.current() is None and replica.scoped_strategy() is not None


__all__ = ["CentralStorageStrategy", "DistributedDataset", "InputContext", "MirroredStrategy",
           "OneDeviceStrategy",
           "ReduceOp", "ReplicaContext", "Strategy", "ValueContext",
           "get_replica_context", "get_strategy", "has_strategy", "in_cross_replica_context"]
