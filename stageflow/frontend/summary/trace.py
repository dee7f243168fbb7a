"""`sf.summary.trace_on`, `trace_export`, `trace_off`: the graphs of the functions traced
while tracing is on, for TensorBoard's graphs dashboard.

`sf.function` reports each graph function it traces to `collect` (the one it keeps, after
the extra trace that creates variables); while tracing is on, the graph is kept, and
`trace_export` writes the graphs kept as TensorFlow 2 does: one record of RunMetadata with
a GraphDef per function, whose nodes are those `graph_dot` draws (`frontend.dot`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from stageflow.core import lazy
from stageflow.core.source import describe_location
from stageflow.frontend.dot import graph_nodes
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.summary.writers import default_writer, resolve_step

if TYPE_CHECKING:
    from stageflow.frontend.summary import events
else:
    events = lazy.module("stageflow.frontend.summary.events")

__all__ = ["trace_export", "trace_off", "trace_on"]

_lock = threading.Lock()
_graphs: list[tuple[str, Any]] | None = None  # None: tracing is off


def collect(name: str, graph: Any) -> None:
    """Keep `graph`, the graph function `name` just traced, if tracing is on."""
    with _lock:
        if _graphs is not None:
            _graphs.append((name, graph))


def trace_on(graph: bool = True, profiler: bool = False) -> None:
    """Start keeping the graph of every function `sf.function` traces from now on (its
    first call for new argument types), for `trace_export`.

    TensorBoard's profile plugin is not written: ``profiler=True`` is refused; record a
    trace with `sf.profiler.trace` instead (Perfetto's format).

    >>> sf.summary.trace_on(graph=True)
    >>> sf.summary.trace_off()
    """
    global _graphs
    if profiler:
        raise ValueError(f"sf.summary.trace_on: profiler=True (TensorBoard's profile "
                         f"plugin) is not supported; record a trace with "
                         f"sf.profiler.trace(logdir) for Perfetto instead, and call "
                         f"trace_on(graph=True, profiler=False){describe_location()}")
    with _lock:
        _graphs = [] if graph else None


def trace_off() -> None:
    """Stop keeping graphs and drop those kept.

    >>> sf.summary.trace_off()
    """
    global _graphs
    with _lock:
        _graphs = None


def trace_export(name: str, step: Any = None, profiler_outdir: str | None = None) -> bool:
    """Write the graphs of the functions traced since `trace_on` under the tag `name` at
    `step` to the default writer, then stop tracing (as TensorFlow does). False where no
    writer is the default or tracing was not on.

    >>> import tempfile
    >>> sf.summary.trace_on()
    >>> f = sf.function(lambda x: x * 2.0)
    >>> _ = f(sf.constant(1.0))
    >>> with sf.summary.create_file_writer(tempfile.mkdtemp()).as_default():
    ...     sf.summary.trace_export("doubling", step=0)
    True
    """
    global _graphs
    del profiler_outdir
    writer = default_writer()
    with _lock:
        graphs, _graphs = _graphs, None
    if writer is None or graphs is None:
        return False
    step_value = convert_to_tensor(resolve_step(step, "sf.summary.trace_export")).numpy()
    writer.write(events.graph_summary(
        name, [(function, graph_nodes(graph)) for function, graph in graphs]), int(step_value))
    return True
