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
returning the exit status.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from stageflow import distribute
from stageflow.cli import export, staging
from stageflow.cli.io import CommandError, read_input, write_output
from stageflow.ir.text import IRError, module_to_text, parse_module
from stageflow.passes import (
    PassFailure,
    PassSpecError,
    PassTiming,
    Pipeline,
    format_timings,
    ir_printer,
)
from stageflow.runtime.devices import all_devices, gpu_unavailable_reason

SPLIT_MARKER = "// -----"


def _split_chunks(text: str, split: bool) -> list[tuple[str, int]]:
    """The input's chunks and the line each starts on (for messages that name lines)."""
    if not split:
        return [(text, 0)]
    chunks: list[tuple[str, int]] = []
    lines: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if line.strip() == SPLIT_MARKER:
            chunks.append(("".join(lines), start))
            lines, start = [], number + 1
        else:
            lines.append(line)
    chunks.append(("".join(lines), start))
    return chunks


def run_opt(args: argparse.Namespace) -> int:
    """Parse, verify, transform and print each input chunk; report every failing chunk."""


    dump = ir_printer(sys.stdout, debuginfo=args.print_debuginfo)
    try:
        pipeline = Pipeline.parse(args.passes, after_pass=dump if args.print_ir_after_all else None)
    except PassSpecError as error:
        raise CommandError(str(error)) from None
    name = "<stdin>" if args.file == "-" else args.file
    text = read_input(args.file)
    outputs: list[str] = []
    failed = False
    stages: dict[str, float] = {"parse": 0.0, "print": 0.0}
    timings: list[PassTiming] = []
    for chunk, first_line in _split_chunks(text, args.split_input_file):
        start = time.perf_counter()
        try:
            # Pad with newlines so that positions are those of the whole file.
            module = parse_module("\n" * first_line + chunk, name)
            stages["parse"] += time.perf_counter() - start
            timings += pipeline.run(module)
        except (IRError, PassFailure) as error:
            print(f"stageflow opt: error: {error}", file=sys.stderr)
            failed = True
            continue
        start = time.perf_counter()
        outputs.append(
            module_to_text(module, debuginfo=args.print_debuginfo, generic=args.print_generic)
        )
        stages["print"] += time.perf_counter() - start
    write_output(args.output, (SPLIT_MARKER + "\n").join(outputs))
    if args.timing:
        print(format_timings(timings, list(stages.items())), end="", file=sys.stderr)
    return 1 if failed else 0


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
    opt.set_defaults(handler=run_opt)

    staging.add_parsers(commands)
    export.add_parser(commands)

    devices = commands.add_parser("devices", help="list the devices stageflow can run on")
    staging.add_logical_cpus(devices)
    devices.add_argument("--address", metavar="ADDRESS",
                         help="also the devices of a Ray cluster's workers ('auto' or "
                              "'ray://host:port'), one worker per --workers")
    devices.add_argument("--workers", type=int, default=1, metavar="N",
                         help="workers to start on the cluster for --address (default 1)")
    devices.set_defaults(handler=run_devices)

    onnx_ops = commands.add_parser("onnx-ops", help="list the ONNX ops stageflow imports")
    onnx_ops.set_defaults(handler=run_onnx_ops)
    return parser


def run_onnx_ops(args: argparse.Namespace) -> int:
    """One line per ONNX op stageflow imports, ``DOMAIN OP`` (the default domain written
    ai.onnx), after a line giving the opsets read."""
    importer = staging.model_module("stageflow.onnx.importer")
    print(f"# ai.onnx opsets {importer.MIN_OPSET} to {importer.newest_opset()}; older models "
          f"are converted to opset {importer.MIN_OPSET} by onnx's version converter")
    for domain, op_type in staging.model_module("stageflow.onnx").supported_ops():
        print(f"{domain or 'ai.onnx'} {op_type}")
    return 0


def run_devices(args: argparse.Namespace) -> int:
    """One line per device (name, kind, memory), then why there is no GPU if there is none."""
    staging.set_logical_cpus(args)
    if args.address:
        distribute.connect(jobs={"worker": args.workers}, address=args.address)
    try:
        found = all_devices()
        for device in found:
            print(device.describe())
        if not any(device.kind == "GPU" for device in found):
            print(f"no GPU: {gpu_unavailable_reason()}")
    except RuntimeError as error:  # e.g. no thread left for one more logical CPU
        raise CommandError(f"cannot start the devices: {error}") from None
    finally:
        if args.address:
            distribute.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
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


