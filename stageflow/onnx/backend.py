"""`stageflow.onnx.backend`: stageflow as an ONNX backend (`onnx.backend.base.Backend`), the
interface ONNX's own conformance suite (`onnx.backend.test.BackendTest`) drives.

`prepare` imports the model (`sf.onnx.load`) and returns a rep whose `run` calls the staged
function, compiled unless ``jit=False`` is passed; `run_node` wraps one node in a model of
its own, typed by the inputs given.

ONNX's node tests feed the values an import must know (Reshape's shape, Slice's starts, TopK's
k) as graph inputs. Where the import meets one (`UnknownAtImport`), the rep imports the model
again with that run's integer inputs as initializers, and with all of them if that is not
enough, one import per set of values: as a model that keeps them in initializers is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep

from stageflow.core.devices import device as device_scope
from stageflow.frontend.tensor import Tensor
from stageflow.onnx import dtypes
from stageflow.onnx.converters import UnknownAtImport
from stageflow.onnx.importer import Model, load
from stageflow.runtime.devices import list_devices

__all__ = ["StageflowBackend", "StageflowRep", "prepare", "run_model", "run_node",
           "supports_device"]


def _device_name(device: str) -> str:
    """ONNX's "CPU" / "CUDA:1" as stageflow's device name."""
    kind, _, index = device.partition(":")
    return f"/device:{'GPU' if kind.upper() == 'CUDA' else 'CPU'}:{index or 0}"


class StageflowRep(BackendRep):
    """A prepared model: `run` takes the inputs (a list in the graph's order, or a dict by
    name) and returns the outputs as NumPy arrays."""

    def __init__(self, model: Model, device: str, **kwargs: Any) -> None:
        self.model = model
        self.device = _device_name(device)
        self._kwargs = kwargs  # sf.onnx.load's, for the imports with inputs folded in
        self._folded: dict[tuple, Model] = {}
        # What the runs fold in: 0 nothing, 1 the integer inputs, 2 every input; raised
        # once for all at the first UnknownAtImport.
        self._folds = 0

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            inputs = [inputs[name] for name in self.model.input_names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        inputs = [np.asarray(x) for x in inputs]  # NumPy scalars too: tensors, not constants
        with device_scope(self.device):
            while True:
                try:
                    outputs = self.model(*inputs) if not self._folds else \
                        self._run_folded(inputs, integers_only=self._folds == 1)
                    break
                except UnknownAtImport:
                    if self._folds == 2:
                        raise
                    self._folds += 1
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return tuple(o.numpy() if isinstance(o, Tensor) else np.asarray(o) for o in outputs)

    def _run_folded(self, inputs: Sequence[Any], integers_only: bool) -> Any:
        """The model run with this run's (integer) inputs as initializers."""
        arrays = {name: np.asarray(x) for name, x in zip(self.model.input_names, inputs,
                                                           strict=True)}
        folded = {name: a for name, a in arrays.items()
                  if not integers_only or np.issubdtype(a.dtype, np.integer)}
        key = (integers_only, *((name, a.dtype.str, a.shape, a.tobytes())
                                for name, a in folded.items()))
        if key not in self._folded:
            proto = onnx.ModelProto()
            proto.CopyFrom(self.model.proto)
            proto.graph.initializer.extend(numpy_helper.from_array(a, name)
                                           for name, a in folded.items())
            self._folded[key] = load(proto, **self._kwargs)
        return self._folded[key](*(a for name, a in arrays.items() if name not in folded))


class StageflowBackend(Backend):
    """The backend the ONNX test suite runs; keyword arguments of `prepare` go to
    `sf.onnx.load` (``jit=False``: interpreted, ``weights="variables"``)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU",
                **kwargs: Any) -> StageflowRep:
        super().prepare(model, device, **kwargs)
        return StageflowRep(load(model, **kwargs), device, **kwargs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        super().run_node(node, inputs, device=device, outputs_info=outputs_info)
        arrays = [np.asarray(x) for x in inputs]
        names = [name for name in node.input if name]
        graph_inputs = [helper.make_tensor_value_info(name, dtypes.to_onnx(a.dtype), a.shape)
                        for name, a in zip(names, arrays, strict=True)]
        graph_outputs = [helper.make_empty_tensor_value_info(name) for name in node.output
                         if name]
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        graph = helper.make_graph([node], node.name or node.op_type, graph_inputs,
                                  graph_outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain,
                                                                             opset)])
        return StageflowRep(load(model, **kwargs), device, **kwargs).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return _device_name(device) in list_devices()


prepare = StageflowBackend.prepare
run_model = StageflowBackend.run_model
run_node = StageflowBackend.run_node
supports_device = StageflowBackend.supports_device
