"""A whole optimised function as one LLVM function: run-time dims of every value, buffers
from the buffer plan, calls into the kernels and lowered ops."""
