"""Lowering of fused kernels to LLVM IR (CPU) and PTX (NVIDIA GPUs)."""
