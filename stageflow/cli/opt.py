"""``stageflow opt FILE.mlir``: parse, verify, transform and print textual `sf` IR (the
command's contract is `stageflow.cli.main`'s docstring)."""

from __future__ import annotations

import argparse
import sys
import time

from stageflow.cli.io import SPLIT_MARKER, CommandError, read_input, write_output
from stageflow.ir.text import IRError, module_to_text, parse_module
from stageflow.passes import (
    PassFailure,
    PassSpecError,
    PassTiming,
    Pipeline,
    format_timings,
    ir_printer,
)


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


def run(args: argparse.Namespace) -> int:
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
