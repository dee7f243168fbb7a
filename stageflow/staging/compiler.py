"""The one compile driver: traced graphs or parsed IR -> `sf` module -> passes -> executables
or a library.

Every path that compiles goes through a `Compilation`: `sf.function`, the staged gradients
of a function under a tape, saved functions loaded from IR text, `sf.aot` and the
``stageflow`` command. It owns what makes a compile observable, so that every path is
observable the same way:

- ``STAGEFLOW_DUMP_DIR``: the module is written when it is built (stage ``traced``, or
  ``loaded`` for parsed IR), after every pass (``after.NAME``) and at any named stage a
  path adds (``remat``);
- ``STAGEFLOW_LOG``: one ``passes`` line per pass with its time and one ``compiles`` line
  per compile with what it produced and its total time;
- the seconds of every stage (``build IR``, ``pass NAME``, ``optimize``, ``llvm``, ...) that
  ``ConcreteFunction.stats()`` and ``--timing`` report, and, while `sf.profiler` records,
  the same stages as spans of its trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from stageflow.core import config, profiling
from stageflow.frontend.graph import Graph
from stageflow.ir.from_graph import graphs_module
from stageflow.ir.text import module_to_text
from stageflow.passes import PassTiming, Pipeline
from stageflow.passes.fuse import FusionNote, fusion_notes
from stageflow.runtime.executable import CompileStats, Executable
from stageflow.staging.report import render, residual_summary

AfterPass = Callable[[Any, ModuleOp], None]


class Compilation:
    """One module on its way to machine code, dumped, logged and timed at every stage."""

    def __init__(self, name: str, module: ModuleOp, first_stage: str,
                 build_seconds: float = 0.0, record: bool = False) -> None:
        self.name = name
        self.module = module
        self.stats = CompileStats()
        self.stats.seconds["build IR"] = build_seconds
        self.timings: list[PassTiming] = []
        self._start = time.perf_counter() - build_seconds
        # What a report shows (`stageflow.staging.report`): kept when asked for one, or
        # when every compile writes one (``STAGEFLOW_REPORT_DIR``).
        self.record = record or bool(config.report_dir)
        self.stages: list[tuple[str, str]] = []
        self.fusion_notes: list[FusionNote] = []
        self.residuals: dict[str, list] = {}
        self.history: list[tuple[str, str]] = []  # the sf.function's traces, when known
        self.traced_module = module.clone() if self.record else None
        if self.record:
            self.stages.append((first_stage, module_to_text(module, debuginfo=True)))
        self.dump(first_stage)

    @classmethod
    def of_graphs(cls, name: str, graphs: list[tuple[Graph, str]],
                  record: bool = False) -> Compilation:
        """The module of traced `graphs`, each a ``func.func`` of the given symbol."""
        start = time.perf_counter()
        module = graphs_module(graphs)
        end = time.perf_counter()
        profiling.complete("build IR", "compile", start, end)
        return cls(name, module, "traced", end - start, record)

    @classmethod
    def of_module(cls, name: str, module: ModuleOp) -> Compilation:
        """An already built module (parsed from a saved function's IR text)."""
        return cls(name, module, "loaded")

    @property
    def functions(self) -> dict[str, FuncOp]:
        return {f.sym_name.data: f for f in self.module.ops if isinstance(f, FuncOp)}

    def dump(self, stage: str) -> None:
        """Write the module as it is now into the dump directory, when one is set."""
        if config.dump_dir:
            config.dump(self.name, stage, module_to_text(self.module, debuginfo=True))

    def run_passes(self, spec: str, after_pass: AfterPass | None = None) -> list[PassTiming]:
        """Run the pipeline `spec` (dumping after each pass, then calling `after_pass`),
        verifying as `config.verify` says; each pass is logged and its seconds kept."""

        def observe(module_pass: Any, module: ModuleOp) -> None:
            self.dump(f"after.{module_pass.name}")
            if self.record:
                self.stages.append((module_pass.name, module_to_text(module, debuginfo=True)))
                residuals = (residual_summary(module)
                             if module_pass.name in ("inline", "remat") else None)
                if residuals:
                    self.residuals.setdefault(f"after {module_pass.name}", residuals)
            if after_pass is not None:
                after_pass(module_pass, module)

        start = time.perf_counter()
        pipeline = Pipeline.parse(spec, verify=config.verify, after_pass=observe)
        with fusion_notes() if self.record else nullcontext([]) as notes:
            timings = pipeline.run(self.module)
        self.fusion_notes.extend(notes)
        seconds = self.stats.seconds
        end = time.perf_counter()
        seconds["optimize"] = seconds.get("optimize", 0.0) + end - start
        profiling.complete("optimize", "compile", start, end)
        for timing in timings:
            spent = timing.run_s + timing.verify_s
            key = f"pass {timing.name}"
            seconds[key] = seconds.get(key, 0.0) + spent
            config.emit("passes", f"{self.name}: {timing.name} {spent * 1e3:.2f} ms")
        self.timings.extend(timings)
        return timings

    def executables(self, entries: list[str], jit: bool = True) -> list[Executable]:
        """Compile the optimised module: one executable per function of `entries`."""
        executables = Executable.build_entries(self.module, entries, self.stats, jit)
        self.finished(f"{self.stats.kernels} kernels, {self.stats.ops} steps")
        return executables

    def gpu_executables(self, entries: list[str], device: Any) -> list[Executable]:
        """The module (optimised by the PTX pipeline) as launches on a GPU device, the ops
        without kernels on the host (`Executable.build_gpu`)."""
        executables = Executable.build_gpu(self.module, entries, self.stats, device)
        self.finished(f"{self.stats.kernels} GPU kernels, {self.stats.ops} steps")
        return executables

    def finished(self, produced: str) -> None:
        """Log the ``compiles`` line: what the compile produced and its total time; write
        the report page when every compile writes one."""
        total = time.perf_counter() - self._start
        config.emit("compiles", f"{self.name}: compiled {produced} in {total * 1e3:.1f} ms")
        if config.report_dir and self.record:
            with open(config.report_path(self.name), "w", encoding="utf-8") as file:
                file.write(render(self))
