"""``stageflow export FILE.py:FUNC --arg f32[?,784] -o OUT.onnx [--opset N]``: a user's
function, staged for the ``--arg`` specs (none: its own input_signature), written as an
ONNX model (`sf.onnx.export`).

A function the exporter cannot write (one that assigns variables, draws random numbers or
uses an op without an ONNX rule) is one error line naming the op and the user's line.
"""

from __future__ import annotations

import argparse
from typing import Any

from stageflow.cli.io import CommandError
from stageflow.cli.staging import load_function, parse_arg_spec
from stageflow.onnx.converters import OnnxError
from stageflow.onnx.exporter import DEFAULT_OPSET, MIN_OPSET, export


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


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("export", help="write a staged function as an ONNX model")
    parser.add_argument("target", metavar="FILE.py:FUNC")
    parser.add_argument("--arg", action="append", default=[], metavar="SPEC",
                        help="an argument's DTYPE[DIMS], e.g. f32[?,784]; repeat per argument")
    parser.add_argument("-o", "--output", metavar="OUT.onnx", required=True)
    parser.add_argument("--opset", type=int, default=None,
                        help=f"the ONNX opset to write, {MIN_OPSET} to {DEFAULT_OPSET} "
                             f"(default {DEFAULT_OPSET})")
    parser.set_defaults(handler=run_export)
