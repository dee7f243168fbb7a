"""``stageflow export FILE.py:FUNC --arg f32[?,784] -o OUT.onnx [--opset N]``: a user's
function, staged for the ``--arg`` specs (none: its own input_signature), written as an
ONNX model (`sf.onnx.export`).

A function the exporter cannot write (one that assigns variables, draws random numbers or
uses an op without an ONNX rule) is one error line naming the op and the user's line.
"""

from __future__ import annotations

import argparse

from stageflow.cli.io import CommandError
from stageflow.cli.staging import load_function, parse_arg_spec
from stageflow.onnx.converters import OnnxError
from stageflow.onnx.exporter import export


def run_export(args: argparse.Namespace) -> int:
    if not args.output.endswith(".onnx"):
        raise CommandError(f"-o {args.output!r}: write OUT.onnx")
    staged = load_function(args.target)
    specs = [parse_arg_spec(text) for text in args.arg]
    if not specs and staged.input_signature is None:
        raise CommandError("give each argument's --arg DTYPE[DIMS] (the function has no "
                           "input_signature)")
    try:  # no --arg: the function's own input_signature
        export(staged, specs or None, args.output, opset=args.opset)
    except OSError as error:
        raise CommandError(f"cannot write {error.filename or args.output}: "
                           f"{error.strerror or error}") from None
    except (OnnxError, ValueError, TypeError, IndexError) as error:
        raise CommandError(" ".join(str(error).split())) from None
    return 0
