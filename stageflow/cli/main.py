"""The ``stageflow`` command: one sub-command per tool, like ``git`` or ``xdsl-opt``.

``stageflow opt FILE.mlir [--passes prune,fold,cse] [-o OUT]`` parses textual `sf` IR,
verifies it, runs the pass pipeline (verifying after every pass) and prints the result;
with no passes it round-trips the IR. ``--print-ir-after-all`` writes the module after each
pass to stdout under MLIR's ``// -----// IR Dump After NAME //----- //`` line, ``--timing``
a table of parse, pass and print times to stderr. Errors are reported as one line on
stderr, ``stageflow opt: error: FILE:LINE:COL: message``, and exit status 1, never a
traceback: the command is driven by lit tests and scripts, which match on that line.

``stageflow dump``, ``graph``, ``compile`` and ``report`` stage a user's function or an ONNX
model (`stageflow.cli.staging`); ``stageflow onnx-ops`` lists the ONNX ops stageflow imports;
``stageflow devices [--logical-cpus N] [--address A]`` lists the devices with their
memory (with an address, a Ray cluster's workers' too). Each
sub-command is a parser with a ``handler`` default taking the parsed arguments and
returning the exit status, named ``MODULE:FUNCTION`` and imported when its command runs:
parsing the command line loads nothing else, and each command loads only what it uses (``opt``
the IR and the passes, not the code generators; no command but the ONNX ones imports onnx).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from stageflow.cli.io import SPLIT_MARKER, CommandError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stageflow", description="stageflow: tools for the sf IR and its compiler"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    opt = commands.add_parser("opt", help="parse, verify, transform and print sf IR")
    opt.add_argument("file", metavar="FILE", help="input .mlir file, '-' for stdin")
    opt.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    opt.add_argument(
        "--print-debuginfo",
        "--mlir-print-debuginfo",
        action="store_true",
        help="print the loc(...) source location of every op",
    )
    opt.add_argument(
        "--print-generic",
        "--mlir-print-op-generic",
        action="store_true",
        help="print ops in MLIR's generic form",
    )
    opt.add_argument(
        "--passes",
        "-p",
        metavar="PIPELINE",
        default="",
        help="passes to run in order, e.g. 'prune,fold{max-elements=64},cse' (default: none)",
    )
    opt.add_argument(
        "--print-ir-after-all",
        "--mlir-print-ir-after-all",
        action="store_true",
        help="print the IR after every pass to stdout, headed by MLIR's 'IR Dump After' line",
    )
    opt.add_argument(
        "--timing",
        "--mlir-timing",
        action="store_true",
        help="print the wall time of parsing, of each pass and of printing to stderr",
    )
    opt.add_argument(
        "--split-input-file",
        action="store_true",
        help=f"treat each part between '{SPLIT_MARKER}' lines as a separate module",
    )
    opt.set_defaults(handler="stageflow.cli.opt:run")

    _add_staging_parsers(commands)
    _add_export_parser(commands)

    devices = commands.add_parser("devices", help="list the devices stageflow can run on")
    _add_logical_cpus(devices)
    devices.add_argument("--address", metavar="ADDRESS",
                         help="also the devices of a Ray cluster's workers ('auto' or "
                              "'ray://host:port'), one worker per --workers")
    devices.add_argument("--workers", type=int, default=1, metavar="N",
                         help="workers to start on the cluster for --address (default 1)")
    devices.set_defaults(handler="stageflow.cli.devices:run")

    onnx_ops = commands.add_parser("onnx-ops", help="list the ONNX ops stageflow imports")
    onnx_ops.set_defaults(handler="stageflow.cli.onnx_ops:run")
    return parser


def _add_staging_parsers(commands: Any) -> None:
    for name, summary in (("dump", "print a staged function's IR"),
                          ("graph", "draw a staged function's graph"),
                          ("compile", "compile a staged function to a library or PTX"),
                          ("report", "write an HTML page explaining a staged function's compile")):
        parser = commands.add_parser(name, help=summary)
        parser.add_argument("target", metavar="FILE.py:FUNC|MODEL.onnx")
        parser.add_argument("--arg", action="append", default=[], metavar="SPEC",
                            help="an argument's DTYPE[DIMS], e.g. f32[?,784]; repeat per "
                                 "argument (a model file's inputs by default)")
        if name == "dump":
            parser.add_argument("--stage", default="traced",
                                help="converted|traced|optimized|lowered|llvm|ptx|asm")
            parser.add_argument("--print-ir-after-all", action="store_true")
            parser.add_argument("--timing", action="store_true")
            parser.add_argument("-o", "--output", metavar="OUT")
            parser.add_argument("--device", metavar="NAME",
                                help="trace the call placed on this device, e.g. cpu:1")
            _add_logical_cpus(parser)
        elif name == "graph":
            parser.add_argument("-o", "--output", metavar="OUT.dot|OUT.svg", required=True)
        elif name == "report":
            parser.add_argument("-o", "--output", metavar="OUT.html", required=True)
        else:
            parser.add_argument("-o", "--output", metavar="OUT.so|OUT.o|OUT.wasm|OUT.ptx",
                                required=True)
            parser.add_argument("--target", dest="machine", metavar="MACHINE",
                                help="the machine the library runs on: x86_64-linux-gnu, "
                                     "aarch64-linux-gnu or wasm32 (default: this one; for "
                                     "OUT.wasm, wasm32)")
            parser.add_argument("--cpu", metavar="NAME",
                                help="LLVM's CPU to optimise for, e.g. neoverse-v1 (default: "
                                     "this one, or the target's baseline)")
            parser.add_argument("--self-contained", action="store_true",
                                help="link no OpenBLAS: matmuls and convolutions use "
                                     "stageflow's own gemm (always so for other machines)")
            parser.add_argument("--header", metavar="OUT.h",
                                help="where the C header goes (default: beside the library)")
            parser.add_argument("--name", help="the C symbol (default: the function's name)")
            parser.add_argument("--no-freeze", action="store_true",
                                help="keep variables as state instead of constants")
            parser.add_argument("--arch", default="sm_80", help="PTX target: sm_80 or sm_90")
        parser.set_defaults(handler=f"stageflow.cli.staging:run_{name}")


def _add_logical_cpus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logical-cpus", type=int, metavar="N",
                        help="split the CPU into N devices first (as "
                             "sf.config.set_logical_device_count)")


def _add_export_parser(commands: Any) -> None:
    parser = commands.add_parser("export", help="write a staged function as an ONNX model")
    parser.add_argument("target", metavar="FILE.py:FUNC")
    parser.add_argument("--arg", action="append", default=[], metavar="SPEC",
                        help="an argument's DTYPE[DIMS], e.g. f32[?,784]; repeat per argument")
    parser.add_argument("-o", "--output", metavar="OUT.onnx", required=True)
    parser.add_argument("--opset", type=int, default=None,
                        help="the ONNX opset to write (default: the newest stageflow writes)")
    parser.set_defaults(handler="stageflow.cli.export:run_export")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module, _, name = args.handler.partition(":")
    try:
        handler = getattr(importlib.import_module(module), name)
    except ImportError as error:  # an optional dependency of the command (onnx for export)
        print(f"stageflow {args.command}: error: this command needs the {error.name} package, "
              "which is not installed", file=sys.stderr)
        return 1
    try:
        return handler(args)
    except CommandError as error:
        print(f"stageflow {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug, still reported as one line (scripts parse stderr)
        message = " ".join(str(error).split())
        print(
            f"stageflow {args.command}: internal error: {type(error).__name__}: {message}",
            file=sys.stderr,
        )
        return 1


