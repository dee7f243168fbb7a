# RUN: python %s | filecheck %s
"""Lowered convolution, its gradients and pooling. The convolutions compile shape-generic
(every dim a run-time value, one function per params and dtype). A conv whose output
channels are a multiple of 8 floats up to 32 (at run time) runs the direct loops: tiles of
6 output pixels by 2 vectors of 8 output channels summed in registers with llvm.fma, each
pixel's input broadcast, taps outside the image read from calloc'd zeros. Otherwise a 3x3
conv is im2col:
blocks of output rows copied into malloc'd scratch, one filter row (kw * C elements) at a
time as vectors of 16 floats and one masked vector for the rest, then the BLAS gemm of
(rows, kh*kw*C) x (kh*kw*C, O) into the output; a 1x1 stride-1 unpadded conv is one gemm of
the input in place when its filters are 1x1 at run time; max pooling combines whole channel
rows with llvm.maximum, the window clipped to the input. The stride-2 conv's input gradient
zeroes its result, multiplies the cotangent's rows by the filters transposed into the
scratch and adds its rows back (col2im); its filter gradient copies the windows as the conv
does and multiplies the scratch transposed by the cotangent's rows. A stride-1 input
gradient of 8 channels is the direct loops over the cotangent, the filters flipped."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.ir import parse_module

X, OUT, G = "tensor<?x6x6x4xf32>", "tensor<?x6x6x8xf32>", "tensor<?x3x3x8xf32>"
W, U = "tensor<3x3x4x8xf32>", "tensor<3x3x8x8xf32>"
GEOMETRY = "strides = [2, 2], padding = [[0, 1], [0, 1]], dilations = [1, 1]"
CONV = ("sf.conv2d %x, %{w} {{strides = [1, 1], padding = {pads}, dilations = [1, 1]}}"
        " : ({x}, tensor<{k}x{k}x4x8xf32>) -> {out}")
module = parse_module(f"""
func.func @f(%x: {X}, %w: {W}, %v: tensor<1x1x4x8xf32>, %g: {G}, %u: {U})
    -> ({OUT}, {OUT}, tensor<?x3x3x4xf32>, {X}, {W}, {OUT}) {{
  %0 = {CONV.format(w="w", pads="[[1, 1], [1, 1]]", x=X, k=3, out=OUT)}
  %1 = {CONV.format(w="v", pads="[[0, 0], [0, 0]]", x=X, k=1, out=OUT)}
  %2 = sf.reduce_window %x {{kind = "max", window = [2, 2], strides = [2, 2],
      padding = [[0, 0], [0, 0]]}} : ({X}) -> tensor<?x3x3x4xf32>
  %3 = sf.conv2d_input_gradient %g, %w {{input_size = [6, 6], {GEOMETRY}}} : ({G}, {W}) -> {X}
  %4 = sf.conv2d_filter_gradient %x, %g {{filter_size = [3, 3], {GEOMETRY}}} : ({X}, {G}) -> {W}
  %5 = sf.conv2d_input_gradient %0, %u {{input_size = [6, 6], strides = [1, 1],
      padding = [[1, 1], [1, 1]], dilations = [1, 1]}} : ({OUT}, {U}) -> {OUT}
  func.return %0, %1, %2, %3, %4, %5 : {OUT}, {OUT}, tensor<?x3x3x4xf32>, {X}, {W}, {OUT}
}}
""")
for op in list(module.ops.first.body.block.ops)[:6]:
    print(module_text([op_spec(op)]))

# The 3x3 conv: the channels checked against the filters' (code 3), the input and filters
# refused unless C-contiguous, windows too large for the input refused (code 1). Then the
# selection rule: O a multiple of 8 and at most 32 picks the direct loops, their image rows
# split into a task per CPU (sched_getaffinity; no BLAS, so no guard). Else the image rows
# are split so for im2col: with OpenBLAS made single-threaded under the process-wide guard,
# a thread starts per task after the first, the first runs here, the others are joined (or
# run here where their thread did not start), and OpenBLAS's thread count is restored.
# CHECK-LABEL: define i32 @"conv2d"(
# CHECK: icmp eq i64 %"arg0.d3", %"arg1.d2"
# CHECK: ret i32 3
# CHECK: srem i64 %"arg1.d3", 8
# CHECK: icmp sle i64 %"arg1.d3", 32
# CHECK: call i32 @"sched_getaffinity"(i32 0, i64 128,
# CHECK: call i32 @"pthread_create"({{.*}}@"conv2d.direct.thread"
# CHECK: call void @"conv2d.direct"(
# CHECK: call i32 @"sched_getaffinity"(i32 0, i64 128,
# CHECK: bitcast [3 x i64]* @"sf.blas.threads"
# CHECK: blas.lock:
# CHECK-NEXT: atomicrmw xchg
# CHECK: call i32 @"scipy_openblas_get_num_threads64_"()
# CHECK: call void @"scipy_openblas_set_num_threads64_"(i32 1)
# CHECK: call i32 @"pthread_create"({{.*}}@"conv2d.rows.thread"
# CHECK: call void @"conv2d.rows"(
# CHECK: call i32 @"pthread_join"(
# CHECK: call void @"conv2d.rows"(
# CHECK: call void @"scipy_openblas_set_num_threads64_"(i32 %{{".[0-9]+"}})
# A direct task: C zeros (code 4 without them), freed after its rows; per tile, unclipped,
# one loop over a filter row's kw*C taps and channels: 2 vectors of filters, each of the 6
# pixels' inputs broadcast, 12 fmas; clipped, tap by tap, a pixel outside reading zeros.
# CHECK-LABEL: define internal i32 @"conv2d.direct.body"(
# CHECK: %[[ZEROS:".[0-9]+"]] = call ptr @"calloc"
# CHECK: ret i32 4
# CHECK: call void @"free"(ptr %[[ZEROS]])
# CHECK: k.body:
# CHECK: %[[W0:".[0-9]+"]] = load <8 x float>
# CHECK: %[[W1:".[0-9]+"]] = load <8 x float>
# CHECK: %[[X:".[0-9]+"]] = shufflevector <8 x float>
# CHECK-NEXT: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[X]], <8 x float> %[[W0]],
# CHECK-NEXT: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[X]], <8 x float> %[[W1]],
# CHECK-COUNT-5: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{".[0-9]+"}}, <8 x float> %[[W1]],
# CHECK: tap.body:
# CHECK: select i1 %{{".[0-9]+"}}, ptr %{{".[0-9]+"}}, ptr %[[ZEROS]]
# CHECK-LABEL: define internal ptr @"conv2d.direct.thread"(ptr %".1")

# A task loads the operands again from the entry's arguments, then its scratch (code 4
# without it), its blocks, the free; in each chunk of filter rows, one gemm of the scratch
# (lda = the chunk's depth) by the filters (O columns), beta 0 for the first chunk, 1 after.
# CHECK-LABEL: define internal i32 @"conv2d.rows.body"(ptr %"data", ptr %"dims",
# CHECK-SAME: ptr %"strides", i64 %"first", i64 %"last", i64 %"task", ptr %"private")
# CHECK: %[[SCRATCH:".[0-9]+"]] = call ptr @"malloc"
# CHECK: ret i32 4
# CHECK: call void @"free"(ptr %[[SCRATCH]])
# CHECK: call void @"scipy_cblas_sgemm64_"(i32 101, i32 111, i32 111, i64 %{{".[0-9]+"}},
# CHECK-SAME: i64 %"arg1.d3", i64 %[[DEPTH:".[0-9]+"]], float 0x3ff0000000000000,
# CHECK-SAME: ptr %[[SCRATCH]], i64 %[[DEPTH]], ptr %{{".[0-9]+"}}, i64 %"arg1.d3",
# A filter row's run of kw * C elements, inside the input: whole vectors, then a masked
# one; outside it, zeros.
# CHECK: move.body:
# CHECK: load <16 x float>, ptr %{{".[0-9]+"}}, align 4
# CHECK: store <16 x float>
# CHECK: call <16 x float> @"llvm.masked.load.v16f32.p0"(
# CHECK: call void @"llvm.masked.store.v16f32.p0"(
# CHECK-LABEL: define internal ptr @"conv2d.rows.thread"(ptr %".1")
# CHECK: call void @"conv2d.rows"(ptr %".1")

# The 1x1 stride-1 unpadded conv: when the filters are 1x1 at run time, one gemm of the
# input as a (rows, C) matrix, no scratch; else the windows as above.
# CHECK-LABEL: define i32 @"conv2d"(
# CHECK: icmp eq i64 %"arg1.d0", 1
# CHECK-NEXT: icmp eq i64 %"arg1.d1", 1
# CHECK: call void @"scipy_cblas_sgemm64_"(i32 101, i32 111, i32 111, i64 %{{".[0-9]+"}},
# CHECK-SAME: i64 %"arg1.d3", i64 %[[C:".[0-9]+"]], float 0x3ff0000000000000,
# CHECK-SAME: ptr %"arg0", i64 %[[C]], ptr %"arg1", i64 %"arg1.d3",
# CHECK: call i32 @"pthread_create"(

# Max pooling: the taps of each window clipped to the input, the channels innermost and
# contiguous (index + c), combined with llvm.maximum.
# CHECK-LABEL: define i32 @"reduce_window"(
# CHECK: tap_row.head:
# CHECK: tap.head:
# CHECK: c.body:
# CHECK-NEXT: %[[OUT:".[0-9]+"]] = add i64 %{{".[0-9]+"}}, %"c"
# CHECK-NEXT: %[[TO:".[0-9]+"]] = getelementptr float, ptr %"arg1", i64 %[[OUT]]
# CHECK-NEXT: %[[IN:".[0-9]+"]] = add i64 %{{".[0-9]+"}}, %"c"
# CHECK-NEXT: %[[FROM:".[0-9]+"]] = getelementptr float, ptr %"arg0", i64 %[[IN]]
# CHECK-NEXT: %[[X:".[0-9]+"]] = load float, ptr %[[FROM]]
# CHECK-NEXT: %[[ACC:".[0-9]+"]] = load float, ptr %[[TO]]
# CHECK-NEXT: %[[M:".[0-9]+"]] = call float @"llvm.maximum.f32"(float %[[ACC]], float %[[X]])
# CHECK-NEXT: store float %[[M]], ptr %[[TO]]

# The input gradient: whole images split into tasks (a result with no terms is zeroed
# whole); a task zeroes its images of the result (memset), then per chunk one gemm of the
# cotangent's rows (lda = O) by the filters transposed (111, 112) into the scratch, whose
# runs are added into the result, whole vectors then a masked one.
# CHECK-LABEL: define i32 @"conv2d_input_gradient"(
# CHECK: call void @"llvm.memset.p0.i64"(
# CHECK: call i32 @"pthread_create"({{.*}}@"conv2d_input_gradient.rows.thread"
# CHECK-LABEL: define internal i32 @"conv2d_input_gradient.rows.body"(
# CHECK: call void @"llvm.memset.p0.i64"(
# CHECK: %[[COLUMNS:".[0-9]+"]] = call ptr @"malloc"
# CHECK: call void @"free"(ptr %[[COLUMNS]])
# CHECK: call void @"scipy_cblas_sgemm64_"(i32 101, i32 111, i32 112, i64 %{{".[0-9]+"}},
# CHECK-SAME: i64 %[[CHUNK:".[0-9]+"]], i64 %"arg1.d3", float 0x3ff0000000000000,
# CHECK-SAME: ptr %{{".[0-9]+"}}, i64 %"arg1.d3", ptr %{{".[0-9]+"}}, i64 %"arg1.d3",
# CHECK-SAME: float {{ *}}0x0, ptr %[[COLUMNS]], i64 %[[CHUNK]])
# CHECK: move.body:
# CHECK: %[[PIXELS:".[0-9]+"]] = load <16 x float>
# CHECK-NEXT: %[[COLUMN:".[0-9]+"]] = load <16 x float>
# CHECK-NEXT: %[[SUM:".[0-9]+"]] = fadd <16 x float>
# CHECK: call <16 x float> @"llvm.masked.load.v16f32.p0"(
# CHECK: fadd <16 x float>
# CHECK: call void @"llvm.masked.store.v16f32.p0"(

# The filter gradient: each task after the first gets filters of its own (malloc'd before
# the threads start), added into the result and freed once all are joined. A task copies
# the windows as the conv copies them, then multiplies the scratch transposed (112, 111)
# by the cotangent's rows into the chunk's filter rows of its own filters (the result's
# for the first task), beta 1 after its first block.
# CHECK-LABEL: define i32 @"conv2d_filter_gradient"(
# CHECK: call ptr @"malloc"
# CHECK: call i32 @"pthread_create"({{.*}}@"conv2d_filter_gradient.rows.thread"
# CHECK: merge.body:
# CHECK: fadd float
# CHECK: call void @"free"
# CHECK-LABEL: define internal i32 @"conv2d_filter_gradient.rows.body"(
# CHECK: %[[OWN:".[0-9]+"]] = icmp eq ptr %"private", null
# CHECK: %[[WINDOWS:".[0-9]+"]] = call ptr @"malloc"
# CHECK: %[[START:".[0-9]+"]] = icmp eq i64 %"block", %"first"
# CHECK: call void @"scipy_cblas_sgemm64_"(i32 101, i32 112, i32 111, i64 %[[DEPTH:".[0-9]+"]],
# CHECK-SAME: i64 %"arg1.d3", i64 %{{".[0-9]+"}}, float 0x3ff0000000000000,
# CHECK-SAME: ptr %[[WINDOWS]], i64 %[[DEPTH]], ptr %{{".[0-9]+"}}, i64 %"arg1.d3",

# The stride-1 input gradient of 8 channels: the direct loops (C a multiple of 8, at most
# 32) over the result's rows; a task flips and transposes the filters into memory of its
# own (code 4 without it), then runs the forward conv's loops over the cotangent.
# CHECK-LABEL: define i32 @"conv2d_input_gradient"(
# CHECK: srem i64 %"arg1.d2", 8
# CHECK: icmp sle i64 %"arg1.d2", 32
# CHECK: call i32 @"pthread_create"({{.*}}@"conv2d_input_gradient.direct.thread"
# CHECK: call i32 @"pthread_create"({{.*}}@"conv2d_input_gradient.rows.thread"
# CHECK-LABEL: define internal i32 @"conv2d_input_gradient.direct.body"(
# CHECK: %[[FLIPPED:".[0-9]+"]] = call ptr @"malloc"
# CHECK: ret i32 4
# CHECK: call ptr @"calloc"
# CHECK: flip3.body:
# CHECK: call void @"free"(ptr %[[FLIPPED]])
# CHECK: k.body:
# CHECK: call <8 x float> @"llvm.fma.v8f32"(
