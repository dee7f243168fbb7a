"""Lowering to LLVM IR (CPU) and PTX (NVIDIA GPUs): fused kernels, single irregular ops and
whole functions.

A kernel is an elementwise ``func.func`` (see `kernels.analysis`); `compile_kernel`
JIT-compiles one for this CPU and returns a callable on NumPy arrays. The subpackages, in
pipeline order:

``llvm``      what every lowering uses: the emitter and its dtype tables (`llvm.emitter`),
              math expansions every backend lowers (`llvm.mathlib`), loops, reduction
              combines, dim arithmetic as LLVM IR (`llvm.dim_arith`), NumPy's array struct
``kernels``   fused elementwise kernels: analysis (op list, iteration space, per-argument
              broadcasting), the lowering table shared by all targets (`kernels.rules`),
              loop nests (`kernels.loops`, `kernels.reduce_loops`), the Python call path
              (`kernels.wrapper`)
``lowered``   single irregular ops (reductions, data movement, matmul, convolutions,
              pooling, LAPACK calls...), one rule per primitive, with a C ABI
              (`lowered.compile`)
``program``   a whole function as one LLVM function calling the kernels and lowered ops
``targets``   `CPUTarget` (`targets.cpu`: O2 + vectorisation, the MCJIT engine, the on-disk
              cache) and `PTXTarget` (`targets.ptx`: the same kernels as PTX ``.entry``
              functions with grid-stride loops)
"""

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.wrapper import CompiledKernel
from stageflow.codegen.targets.cpu import CPUTarget, compile_kernel, compile_kernels
from stageflow.codegen.targets.ptx import PTXTarget

__all__ = ["CPUTarget", "CompiledKernel", "Kernel", "PTXTarget", "analyse", "compile_kernel",
           "compile_kernels"]
