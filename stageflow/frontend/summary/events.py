"""TensorBoard's records: the summary of each kind as TensorFlow 2 writes it, and the file.

The protos, the plugins' metadata and the event file's framing (records with masked
CRC-32C, written by a thread) are the `tensorboard` package's own, so what TensorBoard
reads is what it was built to read. That package is an optional dependency: this module is
imported the first time a summary is written or a writer made (`stageflow.core.lazy`), and
says how to install it where it is missing.
"""

from __future__ import annotations

import time

import numpy as np

try:
    from tensorboard.compat.proto import (
        attr_value_pb2,
        config_pb2,
        event_pb2,
        graph_pb2,
        summary_pb2,
        tensor_shape_pb2,
    )
    from tensorboard.plugins.graph import metadata as graph_metadata
    from tensorboard.plugins.histogram.summary_v2 import histogram_pb
    from tensorboard.plugins.image import metadata as image_metadata
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util.tensor_util import make_tensor_proto
except ImportError as error:
    raise ImportError("sf.summary writes TensorBoard's event files with the tensorboard "
                      "package, which is not installed: pip install 'stageflow[summary]'"
                      ) from error

from stageflow.core.primitive import ShapedType
from stageflow.frontend.dot import Node
from stageflow.frontend.summary.png import encode_png

Summary = summary_pb2.Summary

__all__ = ["EventFileWriter", "Summary", "event", "graph_summary", "histogram_pb",
           "image_summary", "scalar_pb", "text_pb"]


def event(step: int, summary: Summary | None = None) -> event_pb2.Event:
    """An event at `step`, now, holding `summary`."""
    return event_pb2.Event(wall_time=time.time(), step=step, summary=summary)


def image_summary(tag: str, images: np.ndarray, description: str | None) -> Summary:
    """TensorFlow 2's image summary of uint8 `images` [k, h, w, c]: a string tensor of the
    width, the height and each image's PNG, for the images plugin."""
    _, height, width, _ = images.shape
    blobs = [str(width).encode(), str(height).encode(), *map(encode_png, images)]
    summary = Summary()
    summary.value.add(tag=tag, tensor=make_tensor_proto(np.array(blobs, dtype=object)),
                      metadata=image_metadata.create_summary_metadata(None, description))
    return summary


def graph_summary(tag: str, graphs: list[tuple[str, list[Node]]]) -> Summary:
    """TensorFlow 2's ``trace_export`` record: a RunMetadata holding one GraphDef per
    function (`graphs`: each function's name and nodes), which the graphs plugin shows
    under `tag`, each function a group of its own (its nodes' names start with it)."""
    run_metadata = config_pb2.RunMetadata()
    for name, nodes in graphs:
        graph = run_metadata.function_graphs.add().pre_optimization_graph
        graph.CopyFrom(_graph_def(name, nodes))
    plugin = summary_pb2.SummaryMetadata.PluginData(  # content: the version the plugin reads
        plugin_name=graph_metadata.PLUGIN_NAME_RUN_METADATA_WITH_GRAPH, content=b"1")
    summary = Summary()
    summary.value.add(tag=tag, metadata=summary_pb2.SummaryMetadata(plugin_data=plugin),
                      tensor=make_tensor_proto(np.array(run_metadata.SerializeToString(),
                                                        dtype=object)))
    return summary


def _graph_def(name: str, nodes: list[Node]) -> graph_pb2.GraphDef:
    """A GraphDef of a function's nodes: each named ``function/node``, its op the node's
    (an op's primitive, or argument, capture, variable, result), its inputs by name, and
    the type of what it produces as ``_output_shapes`` and ``dtypes``, which the graphs
    plugin labels its edges with; an op's parameters (a variable's type) are its
    ``detail`` attribute."""
    graph = graph_pb2.GraphDef()
    for node in nodes:
        definition = graph.node.add(name=f"{name}/{node.id}", op=node.op,
                                    input=[f"{name}/{source}" for source in node.inputs])
        types = [t.value if not isinstance(t, ShapedType) else t for t in node.outputs]
        if types:
            shapes = [tensor_shape_pb2.TensorShapeProto(dim=[
                tensor_shape_pb2.TensorShapeProto.Dim(size=-1 if d is None else d)
                for d in t.shape]) for t in types]
            definition.attr["_output_shapes"].list.shape.extend(shapes)
            definition.attr["dtypes"].s = ", ".join(t.dtype.name for t in types).encode()
        if node.detail:
            definition.attr["detail"].CopyFrom(attr_value_pb2.AttrValue(s=node.detail.encode()))
    return graph
