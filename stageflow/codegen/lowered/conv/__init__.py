"""Lowerings of `conv2d` and its two gradients over NHWC images (float32, float64; bfloat16
where the CPU has AVX-512 BF16, `bfloat16`).

Each op picks its algorithm at run time, by shape:

- a 1x1 filter at stride 1 without padding is a gemm of the input, read in place as an
  (N*H*W, C) matrix: no copy at all;
- filter taps one image column apart and few output channels (a multiple of a vector's
  lanes, at most `DirectLoops.max_out_channels`: 64 float32s on x86, else 32) run
  the *direct loops* (`direct`): a micro-kernel holding a tile of outputs in registers,
  with no scratch and no copy, where a gemm that narrow would leave the BLAS's kernels
  half idle;
- anything else is *im2col* (`im2col`): the windows of a block of output rows copied into
  scratch and multiplied by the filters with one gemm per block, which runs at a gemm's
  speed while the copy, a contiguous run per filter row, costs a fraction of it.

A grouped conv2d (`feature_group_count` G) runs G gemms per block, group g's reading its
block of the input's channels (in place, or its windows copied) and writing its block of
the output's (in place); so do its gradients, group by group. The direct loops and
bfloat16 serve one group only (grouped bfloat16 ops run their NumPy kernels).

conv2d's gemms are the convolutions' own (`gemm`), because every output channel must sum in
the same order (OpenBLAS's kernels do not: `gemm` says why it matters); the gradients' gemms
are the BLAS's. `conv2d_prepacked` (constant filters the `prepack` pass laid out as the
gemm's panels) is conv2d whose gemm reads those panels in place.

The gradients walk the same blocks of windows: the filter gradient is ``im2col(x)^T @ g``,
the input gradient ``col2im(g @ w^T)`` or, at stride 1 under the direct loops' rule (C
for O), the direct conv of the cotangent by the filters flipped and transposed. Written as
convolutions instead (of the transposed input by the cotangent, of the cotangent dilated
by the strides), they would multiply zeros at strides above 1 and pay for transposes.

The modules: `windowed` what the families share (their geometry read at run time, one
copy of each family's code per module, the checks, the BLAS's gemm and the split over the
cores), `direct` and `im2col` the two algorithms, `gemm` conv2d's own gemm, `vectors` the
copies and adds of element runs, `families` the three ops and their lowering rules,
`bfloat16` the three ops in bfloat16 (windows copied around the bfloat16 gemm,
`codegen.lowered.gemm_bf16`, which splits itself over the cores). Pooling
(`reduce_window`) is `codegen.lowered.pooling`.
"""
