"""Lowering of fused kernels to LLVM IR (CPU) and PTX (NVIDIA GPUs).

A kernel is an elementwise ``func.func`` (see `kernel`); `compile_kernel` JIT-compiles one
for this CPU and returns a callable on NumPy arrays. The pieces, in pipeline order:

``kernel``   analysis: op list, iteration space, per-argument broadcasting
``ops``      the lowering table, one rule per primitive, shared by all targets
``mathlib``  exp, log, tanh, erf... expanded into instructions every backend lowers
``emitter``  the IR builder helpers and the dtype -> LLVM type tables
``loops``    shape checks and loop nests (flat and broadcasting)
``cpu``      `CPUTarget`: LLVM IR, O3 + vectorisation, the MCJIT engine, the kernel ABI
``wrapper``  the Python call path of a compiled kernel
``ptx``      `PTXTarget`: the same kernels as PTX ``.entry`` functions (grid-stride loops)
"""

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.wrapper import CompiledKernel
from stageflow.codegen.targets.cpu import CPUTarget, compile_kernel, compile_kernels
from stageflow.codegen.targets.ptx import PTXTarget

__all__ = ["CPUTarget", "CompiledKernel", "Kernel", "PTXTarget", "analyse", "compile_kernel",
           "compile_kernels"]
