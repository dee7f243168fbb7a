"""Object code from LLVM IR text: the optimisation pipelines and target machines of the CPU
JIT, in a module that imports nothing but llvmlite.

The JIT makes object code with these functions in its own process, and the compile server
(`compile_server`) in a process of its own, which loads this file by its path without
importing stageflow (a fraction of a second and most of the memory saved): one definition
makes the same bytes in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.binding as llvm

CODEGEN_LEVELS = (0, 3)


@dataclass(frozen=True)
class MachineSpec:
    """What identifies the code a JIT makes: the host's CPU name and features (as the JIT
    adjusts them), and the process triple."""

    cpu: str
    features: str
    triple: str


class Pipeline:
    """Target machines for optimising and for each code generation level."""

    def __init__(self, spec: MachineSpec) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.spec = spec
        self.target = llvm.Target.from_default_triple()
        self.machine = self.new_machine()  # optimisation and assembly only
        # Emit the object code the engine loads (and the disk cache keeps), one per code
        # generation level: JIT settings (LLVM's large code model on x86-64), but not the
        # engine's own machine.
        self.object_machines = {level: self.new_machine(jit=True, codegen=level)
                                for level in CODEGEN_LEVELS}

    def new_machine(self, jit: bool = False, codegen: int = 3) -> llvm.TargetMachine:
        return self.target.create_target_machine(
            cpu=self.spec.cpu, features=self.spec.features, opt=codegen,
            codemodel="jitdefault", jit=jit)

    def optimize(self, text: str, level: int) -> llvm.ModuleRef:
        """The module parsed and optimised at `level`: LLVM's O1-O3 pipelines, or at 0 a
        cleanup of the builders' code only (inlining the ``alwaysinline`` helpers, SROA,
        instcombine, simplifycfg), which took about a twentieth of O1's time on tiny
        kernels and left code of about O1's size."""
        module = llvm.parse_assembly(text)
        module.triple = self.spec.triple
        module.data_layout = str(self.machine.target_data)
        module.verify()
        if level == 0:
            manager = llvm.create_new_module_pass_manager()
            manager.add_always_inliner_pass()
            manager.add_sroa_pass()
            manager.add_instruction_combine_pass()
            manager.add_simplify_cfg_pass()
            manager.run(module, llvm.create_pass_builder(
                self.machine, llvm.create_pipeline_tuning_options(speed_level=0)))
            return module
        options = llvm.create_pipeline_tuning_options(speed_level=level)
        options.loop_vectorization = level >= 2
        options.slp_vectorization = level >= 2
        builder = llvm.create_pass_builder(self.machine, options)
        builder.getModulePassManager().run(module, builder)
        return module

    def object_code(self, text: str, level: int, codegen: int) -> bytes:
        """The module optimised at `level`, as object code generated at `codegen`."""
        return self.object_machines[codegen].emit_object(self.optimize(text, level))
