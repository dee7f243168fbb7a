"""Running passes: a `Pipeline` applies passes in order, verifying the IR after each one.

xDSL's `PassPipeline` only calls a callback between passes; the compiler also needs what
`xdsl-opt` and `mlir-opt` give on the command line: the module verified after every pass,
so that a pass that breaks the IR is named at once rather than found much later in code
generation (`PassFailure` names it), the wall time of each pass and of its verification,
and a hook after each pass (``--print-ir-after-all``, dump directories, logging)::

    pipeline = Pipeline.parse("prune,fold,cse", after_pass=print_ir_after)
    timings = pipeline.run(module)
    print(format_timings(timings), file=sys.stderr)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from stageflow.core import profiling
from stageflow.ir.text import IRError, make_context, module_to_text, verify_module
from stageflow.passes.registry import parse_pipeline

# The compiler's optimisation pipeline. Inline first, so the other passes see through
# small calls; fold before simplify, so that constant subtrees are single constants whose
# values the algebraic rules can read; cse after both, as they create equal ops; prepack
# lays out constant filters, and those computed from variables the function never writes;
# hoist-invariant then moves what the weights alone determine (those layouts among it)
# into a function whose results the runtime keeps between calls; fuse-conv then makes each
# convolution's elementwise epilogue part of it (packed or not); prune then
# removes everything the others left unused; fuse comes at the very end, outlining the
# elementwise ops that remain into kernel functions for the code generator; schedule then
# orders the final ops (background calls started early, waited for late); plan-buffers
# last, as it annotates the final ops with their buffers in their final order.
DEFAULT_PIPELINE = ("inline,fold,simplify,cse,prepack{invariant=true},hoist-invariant,"
                    "fuse-conv,prune,fuse,schedule,plan-buffers")
# An ahead-of-time library's functions keep their signatures (the C ABI) and no runtime
# keeps values between its calls: the same pipeline without hoist-invariant, and so
# without the layouts of variables' filters that it would keep.
LIBRARY_PIPELINE = DEFAULT_PIPELINE.replace("prepack{invariant=true},hoist-invariant,",
                                            "prepack,")
# The same for PTX: its kernels are elementwise (a thread per element cannot fold a shared
# reduction), so reductions stay ops of their own; a launch costs more than computing a
# broadcast value again per element, so such values join their users (`recompute`).
PTX_PIPELINE = ("inline,fold,simplify,cse,prune,fuse{reductions=false recompute=true},"
                "plan-buffers")

# When a pipeline verifies the module (see `Pipeline`).
VERIFY_MODES = ("each", "end", "none")

# MLIR's header line before each ``--mlir-print-ir-after-all`` dump.
IR_DUMP_HEADER = "// -----// IR Dump After {name} //----- //"

AfterPass = Callable[[ModulePass, ModuleOp], None]


class PassFailure(Exception):
    """A pass raised, or left IR that does not verify; the message names the pass."""

    def __init__(self, pass_name: str, message: str, error: IRError | None = None) -> None:
        self.pass_name = pass_name
        self.error = error
        super().__init__(message)


@dataclass(frozen=True)
class PassTiming:
    """Wall time of one pass application and of the verification after it, in seconds."""

    name: str
    run_s: float
    verify_s: float


class Pipeline:
    """Passes applied in order to a module, each followed by `after_pass`.

    `verify` says when the module is verified: after every pass (``"each"``, the default:
    a broken invariant is reported naming the pass that broke it, as ``stageflow opt`` and
    the test suite run), once after the last pass (``"end"``, MLIR's ``-verify-each=0``:
    what compiles on the way to machine code do, since verifying a module costs about as
    much as a pass), or never (``"none"``).
    """

    def __init__(
        self,
        passes: Sequence[ModulePass],
        *,
        verify: str = "each",
        after_pass: AfterPass | None = None,
    ) -> None:
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, got {verify!r}")
        self.passes = tuple(passes)
        self.verify = verify
        self.after_pass = after_pass

    @classmethod
    def parse(
        cls, text: str, *, verify: str = "each", after_pass: AfterPass | None = None
    ) -> Pipeline:
        """A pipeline from its text, ``"prune,fold{max-elements=64},cse"`` (`PassSpecError`)."""
        return cls(parse_pipeline(text), verify=verify, after_pass=after_pass)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.passes)

    def __str__(self) -> str:
        """The pipeline's text, options that differ from their defaults included."""
        return ",".join(str(p) for p in self.passes)

    def run(self, module: ModuleOp, ctx: Context | None = None) -> list[PassTiming]:
        """Apply every pass to `module` in place; the time each took (`PassFailure`)."""
        ctx = ctx or make_context()
        timings: list[PassTiming] = []
        for module_pass in self.passes:
            start = time.perf_counter()
            try:
                module_pass.apply(ctx, module)
            except Exception as error:  # a bug in the pass: name it, keep the cause
                message = " ".join(str(error).split())
                raise PassFailure(
                    module_pass.name,
                    f"pass '{module_pass.name}' failed: {type(error).__name__}: {message}",
                ) from error
            ran = time.perf_counter()
            last = module_pass is self.passes[-1]
            verified = self.verify == "each" or (self.verify == "end" and last)
            if verified:
                _verify(module, module_pass.name, self if self.verify == "end" else None)
            end = time.perf_counter()
            timings.append(PassTiming(module_pass.name, ran - start, end - ran))
            if profiling.state.session is not None:
                profiling.complete(f"pass {module_pass.name}", "compile", start, ran)
                if verified:
                    profiling.complete("verify", "compile", ran, end)
            if self.after_pass is not None:
                self.after_pass(module_pass, module)
        return timings


def _verify(module: ModuleOp, pass_name: str, pipeline: Pipeline | None) -> None:
    """Verify `module` after `pass_name` (or after the whole `pipeline`, when only its end
    is verified: the message then says how to find the pass)."""
    try:
        verify_module(module)
    except IRError as error:
        where = (f"the pipeline '{pipeline}' (STAGEFLOW_VERIFY=each names the pass)"
                 if pipeline is not None else f"pass '{pass_name}'")
        raise PassFailure(pass_name, f"IR does not verify after {where}: {error}",
                          error) from None


def ir_printer(stream: TextIO, *, debuginfo: bool = False) -> AfterPass:
    """An `after_pass` hook writing MLIR's ``IR Dump After`` header and the module."""

    def print_ir(module_pass: ModulePass, module: ModuleOp) -> None:
        stream.write(IR_DUMP_HEADER.format(name=module_pass.name) + "\n")
        stream.write(module_to_text(module, debuginfo=debuginfo))
        stream.flush()

    return print_ir


def format_timings(timings: Sequence[PassTiming], extra: Sequence[tuple[str, float]] = ()) -> str:
    """A table of pass times in milliseconds, `extra` rows (parse, print, ...) first."""
    rows = [(name, seconds, None) for name, seconds in extra]
    rows += [(t.name, t.run_s, t.verify_s) for t in timings]
    total = sum(run + (verify or 0.0) for _, run, verify in rows)
    width = max([len("total"), *(len(name) for name, _, _ in rows)])
    lines = [f"{'pass':{width}}  {'wall ms':>9}  {'verify ms':>9}  {'%':>5}"]
    for name, run, verify in rows:
        share = 100.0 * (run + (verify or 0.0)) / total if total else 0.0
        checked = f"{1e3 * verify:9.2f}" if verify is not None else f"{'':9}"
        lines.append(f"{name:{width}}  {1e3 * run:9.2f}  {checked}  {share:5.1f}")
    lines.append(f"{'total':{width}}  {1e3 * total:9.2f}")
    return "\n".join(lines) + "\n"
