"""The runner of eager backward passes (`GradientTape.gradient`): a tape whose record
recurs has its backward pass compiled, in the background, as one staged function.

Eagerly, `gradient` walks the tape's records and applies each op's gradient rule, op by
op: a few ops per record, each a dispatch and a pass over memory. A model written with raw
ops (batch norm from `reduce_mean`, say) spends most of its eager step there, where the
layers' composites run their backward passes compiled (`models.composite`). But a
training loop records the same tape step after step: the same ops, on tensors of the same
dtypes and shapes, wired the same way. That structure is the key here. The second time a
tape of one structure asks for its gradients, a worker thread traces `backpropagate` over
placeholders standing for the tape's tensors (the recorded ops' operands and results, the
targets and seeds) and compiles it; from then on such a tape's gradients are one call of
that program, its rules' ops fused as a staged step's backward pass is. Until the compile
is done the rules run one by one, so an eager step never waits for LLVM.

Only what the trace can stand for is compiled: records of the registry's primitives with
plain params (numbers, strings, dtypes, tuples of them), on host tensors, under no other
recording tape (an outer tape would record the gradient's ops for higher orders) and no
op observer (`sf.debugging.enable_check_numerics` checks every op), with
``sf.config.eager_compile`` on, and at most `MAX_RECORDS` records (a backward pass within
`concrete.LARGE_TRACE_OPS`). Anything else (custom gradients, whose rules may close over
values of their own step; py_function; devices; staged functions that read variables) runs
op by op as before. A staged function called under the tape (a composite such as batch
norm, or any `sf.function` of its arguments) is one record: the trace replays its forward
graph for the residuals, then its backward graph (`staged_grad.ReplayedVJP`).
The compiled pass computes the same gradients to rounding (its sums may run in another
order, as a staged step's do); ``sf.config.eager_compile = False`` keeps eager
numbers independent of when a compile finished. `settle()` waits for the compiles under
way (tests and benchmarks).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stageflow.core import devices, lazy, nest, profiling
from stageflow.core.primitive import REGISTRY
from stageflow.frontend import tape as tapes
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor

if TYPE_CHECKING:  # the compiler: loaded by the first build
    from stageflow.frontend.tape import GradientTape
    from stageflow.staging import background, concrete, staged_grad
    from stageflow.staging import function as staged_function
else:
    background = lazy.module("stageflow.staging.background")
    concrete = lazy.module("stageflow.staging.concrete")
    staged_function = lazy.module("stageflow.staging.function")
    staged_grad = lazy.module("stageflow.staging.staged_grad")

__all__ = ["settle"]

SIGHTINGS = 2  # a structure's gradient calls before its compile starts
MAX_RECORDS = 2_000  # records of a tape compiled at most (its rules: a few ops each)
MAX_STRUCTURES = 64  # structures kept, compiled or counted (the oldest forgotten first)
_PLAIN = (bool, int, float, complex, str, bytes, type(None), np.dtype, enum.Enum, np.generic)


class _Ineligible(Exception):
    """A tape the trace cannot stand for (its rules run one by one)."""


@dataclass(frozen=True)
class _Structure:
    """A tape's backward pass by positions among its tensors (`leaves`): each record's
    primitive (a staged call's `ForwardBackward`, marked `staged`), params and operand and
    result positions; the targets' and seeds' positions
    (None: a seed of ones); which leaves the tape watches; per source, the positions of its
    variable's reads (`variable` True) or of the tensor itself (None: not watched)."""

    records: tuple[tuple[Any, tuple[int, ...], tuple[int, ...], tuple, bool], ...]
    targets: tuple[int, ...]
    seeds: tuple[int | None, ...]
    watched: tuple[bool, ...]
    sources: tuple[tuple[bool, tuple[int, ...]] | None, ...]

    def backward(self, values: Sequence[Any]) -> list[Any]:
        """The sources' gradients from the tape's tensors `values` (placeholders while
        tracing): `backpropagate` over the records rebuilt on them."""
        records = [tapes.Record(staged_grad.ReplayedVJP(primitive) if staged else primitive,
                                [values[i] for i in inputs], dict(params),
                                [values[i] for i in outputs])
                   for primitive, inputs, outputs, params, staged in self.records]
        watched = {id(values[i]): values[i] for i, w in enumerate(self.watched) if w}
        cotangents = tapes.backpropagate(
            records, [values[i] for i in self.targets],
            [None if i is None else values[i] for i in self.seeds], watched)
        gradients = []
        for source in self.sources:
            if source is None:
                gradients.append(None)
                continue
            variable, positions = source
            found = [cotangents.get(id(values[i])) for i in positions]
            found = [g for g in found if g is not None]
            gradients.append(tapes.sum_all(found) if variable else (found or [None])[0])
        return gradients


class BackwardRunner:
    """Counts tape structures; compiles the recurring ones on a worker thread."""

    def __init__(self) -> None:
        self._seen: dict[tuple, int] = {}
        self._ready: dict[tuple, concrete.ConcreteFunction] = {}
        self._pending: dict[tuple, Future[concrete.ConcreteFunction | None]] = {}
        self._plain_params: set[tuple] = set()
        self._builds: background.BackgroundBuilds | None = None  # made by the first build
        self._lock = threading.Lock()

    def __call__(self, tape: GradientTape, targets: list, seeds: Sequence[Any],
                 sources: list) -> list | None:
        """The sources' gradients by the compiled backward pass of this tape's structure,
        or None (the rules then run one by one): not compiled yet, or not compilable."""
        records = tape._records
        if not records or len(records) > MAX_RECORDS or devices.current() not in (
                None, devices.HOST):
            return None
        try:
            structure, leaves = self._structure(tape, targets, seeds, sources)
        except (_Ineligible, TypeError):  # (TypeError: an unhashable param)
            return None
        key = (structure, *[(t._value.dtype, t._value.shape) for t in leaves])
        compiled = self._ready.get(key)
        if compiled is None:
            self._sighted(key, structure, leaves)
            return None
        if profiling.state.session is not None:  # the call as a span of the recording
            return compiled.call_flat(leaves)
        return compiled.call_on_host(leaves)

    def _structure(self, tape: GradientTape, targets: list, seeds: Sequence[Any],
                   sources: list) -> tuple[_Structure, list[Tensor]]:
        """The tape's `_Structure` and its leaves (each tensor once, in order of first
        use); `_Ineligible` where a record or value cannot be traced for it. Run on every
        gradient call, so written for speed: one dictionary lookup per operand."""
        positions: dict[int, int] = {}
        leaves: list[Tensor] = []
        get = positions.get

        def at(tensor: Any) -> int:
            position = get(id(tensor))
            if position is None:
                if type(tensor) is not Tensor:
                    raise _Ineligible
                position = positions[id(tensor)] = len(leaves)
                leaves.append(tensor)
            return position

        plain = self._plain_params
        registry = REGISTRY
        records = []
        for record in tape._records:
            primitive = record.primitive
            staged = registry.get(primitive.name) is not primitive
            # a staged function's call (`staged_grad.StagedVJP`, asked without importing the
            # compiler), or a rule of its own (custom gradients)
            if staged:
                if not getattr(primitive, "replayable", False):
                    raise _Ineligible
                primitive = primitive.plan
            params = tuple(record.params.items()) if record.params else ()
            if params and params not in plain:
                if not all(_plain(value) for _, value in params):
                    raise _Ineligible
                plain.add(params)
            inputs = []
            for x in record.inputs:
                position = get(id(x))
                inputs.append(at(x) if position is None else position)
            outputs = []
            for y in record.outputs:
                position = get(id(y))
                outputs.append(at(y) if position is None else position)
            records.append((primitive, tuple(inputs), tuple(outputs), params, staged))
        target_positions = tuple([at(t) for t in targets])
        seed_positions = tuple([None if s is None else at(s) for s in seeds])
        source_plans: list[tuple[bool, tuple[int, ...]] | None] = []
        for source in sources:
            if hasattr(source, "_store"):
                reads = tape._variable_reads.get(id(source), [])
                source_plans.append((True, tuple([at(t) for t in reads])))
            elif type(source) is Tensor and id(source) in tape._watched:
                source_plans.append((False, (at(source),)))
            elif type(source) is Tensor:
                source_plans.append(None)
            else:
                raise _Ineligible  # (the rules' path names the wrong source)
        watched = tape._watched
        structure = _Structure(tuple(records), target_positions, seed_positions,
                               tuple([id(t) in watched for t in leaves]), tuple(source_plans))
        return structure, leaves

    def _sighted(self, key: tuple, structure: _Structure, leaves: list[Tensor]) -> None:
        """Count a sighting of `key`; at the `SIGHTINGS`-th submit its build, unless one is
        under way or failed (its rules then always run one by one)."""
        with self._lock:
            count = self._seen.pop(key, 0) + 1
            if len(self._seen) >= MAX_STRUCTURES:
                del self._seen[next(iter(self._seen))]
            self._seen[key] = count
            if count < SIGHTINGS or key in self._pending:
                return
            if len(self._pending) >= MAX_STRUCTURES:
                del self._pending[next(iter(self._pending))]
            specs = tuple(TensorSpec(t.shape, t.dtype) for t in leaves)
            if self._builds is None:
                self._builds = background.BackgroundBuilds("stageflow-backward")
            self._pending[key] = self._builds.submit(
                lambda: self._compile(key, structure, specs))

    def _compile(self, key: tuple, structure: _Structure, specs: tuple[TensorSpec, ...]
                 ) -> concrete.ConcreteFunction:
        function = staged_function.Function(structure.backward, name="tape_gradient",
                                            autograph=False)
        leaves, treedef = nest.flatten((specs,))
        compiled = concrete.trace_function(function, leaves, treedef, False)
        compiled.program  # noqa: B018 - compiles
        with self._lock:
            if len(self._ready) >= MAX_STRUCTURES:
                del self._ready[next(iter(self._ready))]
            self._ready[key] = compiled
        return compiled

    def settle(self) -> None:
        """Wait for the builds under way; the first error of a build that failed since the
        last `settle` is raised here (its structure keeps running its rules one by one)."""
        if self._builds is not None:
            self._builds.settle()


def _plain(value: Any) -> bool:
    """Whether a param is a plain value (or a tuple of them), fixed once traced: not a
    function, an array or anything else whose meaning may change between calls."""
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


RUNNER = BackwardRunner()
settle = RUNNER.settle
tapes.set_backward_runner(RUNNER)
