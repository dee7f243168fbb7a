"""``stageflow onnx-ops``: the ONNX ops stageflow imports (onnx is an optional dependency:
the command says which package to install when it is missing)."""

from __future__ import annotations

import argparse

from stageflow.cli.staging import model_module


def run(args: argparse.Namespace) -> int:
    """One line per ONNX op stageflow imports, ``DOMAIN OP`` (the default domain written
    ai.onnx), after a line giving the opsets read."""
    importer = model_module("stageflow.onnx.importer")
    print(f"# ai.onnx opsets {importer.MIN_OPSET} to {importer.newest_opset()}; older models "
          f"are converted to opset {importer.MIN_OPSET} by onnx's version converter")
    for domain, op_type in model_module("stageflow.onnx").supported_ops():
        print(f"{domain or 'ai.onnx'} {op_type}")
    return 0
