"""`sf.onnx`: models from elsewhere, as staged functions, and staged functions out as ONNX.

    model = sf.onnx.load("resnet50.onnx")      # a Model: call it, compile it, dump it
    probabilities = model(images)
    lib = sf.aot.compile(model)                # the AOT library of any staged function

Needs the `onnx` package (``pip install stageflow[onnx]``).
"""

from stageflow.core.exports import public_dir
from stageflow.onnx import ops as _ops  # noqa: F401 - registers the converters
from stageflow.onnx.converters import OnnxError, supported_ops
from stageflow.onnx.exporter import export
from stageflow.onnx.importer import Model, load

__all__ = ["Model", "OnnxError", "export", "load", "supported_ops"]
__dir__ = public_dir(globals())
