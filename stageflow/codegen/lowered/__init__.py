"""Single irregular ops (reductions, data movement, random bits, matmul) as LLVM functions
with a C ABI: one rule per primitive, and how they are compiled and called."""
