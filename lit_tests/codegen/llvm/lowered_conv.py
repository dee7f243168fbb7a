# RUN: python %s | filecheck %s
"""Lowered convolution, its gradients and pooling. The convolutions compile shape-generic
(every dim a run-time value) and share their code: an op's entry copies its operands' dims
and its geometry (strides, padding, dilations; the gradients' input or filter size; the
feature groups) in one array and calls its family's code, one internal function per dtype
in a module, which reads them at run time. A conv of one group whose output channels are a
multiple of 8 floats up to 32 (at run time) runs the direct loops, one function shared with
the input gradient: tiles of 6 output pixels by 2 vectors of 8 output channels summed in
registers with llvm.fma, each pixel's input broadcast, taps outside the image read from
calloc'd zeros. Otherwise a 3x3 conv is im2col: blocks of output rows copied into malloc'd
scratch, one filter row (kw * C elements) at a time as vectors of 16 floats and one masked
vector for the rest, then the convolutions' own gemm of (rows, kh*kw*C) x (kh*kw*C, O) into
the output (every output channel one chain of fmas in order: a panel of B copied to the
stack, tiles of 6 rows by 2 vectors); a 1x1 stride-1 unpadded conv is that gemm of the
input in place, its rows split over the CPUs, when its filters are 1x1 at run time; max
pooling combines whole channel rows with llvm.maximum, the window clipped to the input. The
stride-2 conv's input gradient zeroes its result, multiplies the cotangent's rows by the
filters transposed into the scratch and adds its rows back (col2im); its filter gradient
copies the windows as the conv does and multiplies the scratch transposed by the
cotangent's rows. A stride-1 input gradient of 8 channels is the direct loops over the
cotangent, the filters flipped."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.codegen.targets.platform import building_for, for_target
from stageflow.ir import parse_module

X, OUT, G = "tensor<?x6x6x4xf32>", "tensor<?x6x6x8xf32>", "tensor<?x3x3x8xf32>"
W, U = "tensor<3x3x4x8xf32>", "tensor<3x3x8x8xf32>"
GEOMETRY = "strides = [2, 2], padding = [[0, 1], [0, 1]], dilations = [1, 1]"
CONV = ("sf.conv2d %x, %{w} {{strides = [1, 1], padding = {pads}, dilations = [1, 1]}}"
        " : ({x}, tensor<{k}x{k}x4x8xf32>) -> {out}")
module = parse_module(f"""
func.func @f(%x: {X}, %w: {W}, %v: tensor<1x1x4x8xf32>, %g: {G}, %u: {U},
             %h: tensor<?x6x6x4xbf16>)
    -> ({OUT}, {OUT}, tensor<?x3x3x4xf32>, {X}, {W}, {OUT}, tensor<?x3x3x4xbf16>) {{
  %0 = {CONV.format(w="w", pads="[[1, 1], [1, 1]]", x=X, k=3, out=OUT)}
  %1 = {CONV.format(w="v", pads="[[0, 0], [0, 0]]", x=X, k=1, out=OUT)}
  %2 = sf.reduce_window %x {{kind = "max", window = [2, 2], strides = [2, 2],
      padding = [[0, 0], [0, 0]]}} : ({X}) -> tensor<?x3x3x4xf32>
  %3 = sf.conv2d_input_gradient %g, %w {{input_size = [6, 6], {GEOMETRY}}} : ({G}, {W}) -> {X}
  %4 = sf.conv2d_filter_gradient %x, %g {{filter_size = [3, 3], {GEOMETRY}}} : ({X}, {G}) -> {W}
  %5 = sf.conv2d_input_gradient %0, %u {{input_size = [6, 6], strides = [1, 1],
      padding = [[1, 1], [1, 1]], dilations = [1, 1]}} : ({OUT}, {U}) -> {OUT}
  %6 = sf.reduce_window %h {{kind = "max", window = [2, 2], strides = [2, 2],
      padding = [[0, 0], [0, 0]]}} : (tensor<?x6x6x4xbf16>) -> tensor<?x3x3x4xbf16>
  func.return %0, %1, %2, %3, %4, %5, %6
      : {OUT}, {OUT}, tensor<?x3x3x4xf32>, {X}, {W}, {OUT}, tensor<?x3x3x4xbf16>
}}
""")
# Built for x86-64 with AVX2 and without AVX-512, whatever the host: the direct loops'
# blocks and tiles are the target's (`conv.direct`).
with building_for(for_target("x86_64-linux-gnu", cpu="x86-64-v3")):
    for op in list(module.ops.first.body.block.ops)[:7]:
        print(module_text([op_spec(op)]))

# The 3x3 conv's entry: its operands' dims copied as given (the input's and filters', then
# the output's), then its geometry (strides 1 1, padding 1 1 1 1, dilations 1 1, no size,
# one feature group, no ReLU) in one array, passed with the data and strides to the
# family's code, whose status it returns. The data it passes are the input's, filters' and
# output's pointers, then five nulls: a fused conv's epilogue operands (none here).
# CHECK-LABEL: define i32 @"conv2d"(
# CHECK: %"operands" = alloca ptr, i32 8
# CHECK-NEXT: %"geometry" = alloca i64, i32 24
# CHECK: call void @"llvm.memcpy.p0.p0.i64"(i64* %"geometry", ptr %"dims", i64 64, i1 0)
# CHECK: call void @"llvm.memcpy.p0.p0.i64"(i64* %{{".[0-9]+"}}, ptr %{{".[0-9]+"}}, i64 32,
# CHECK-NEXT: getelementptr i64, i64* %"geometry", i64 12
# CHECK-NEXT: store i64 1,
# CHECK: getelementptr i64, i64* %"geometry", i64 20
# CHECK-NEXT: store i64 0,
# CHECK: getelementptr i64, i64* %"geometry", i64 22
# CHECK-NEXT: store i64 1,
# CHECK-NEXT: getelementptr i64, i64* %"geometry", i64 23
# CHECK-NEXT: store i64 0,
# CHECK: store ptr %"arg0", ptr
# CHECK: store ptr %"arg1", ptr
# CHECK: store ptr %"arg2", ptr
# CHECK-COUNT-5: store ptr null, ptr
# CHECK: %[[CODE:".[0-9]+"]] = call i32 @"sf.conv2d.float32"(ptr %"operands",
# CHECK-SAME: i64* %"geometry", ptr %"strides")
# CHECK: ret i32 %[[CODE]]

# The family's code, internal: the geometry read after the operands' dims; the channels
# checked against the filters' times the groups, and the output channels for a multiple of
# the groups (code 2), windows too large for the input refused (code 1),
# the output's dims checked (code 3), the input and filters refused unless C-contiguous.
# A 1x1 filter at stride 1 and no padding (at run time) is a gemm of the input as a
# (pixels, C) matrix, no scratch: under 1536 pixels, into 8 panels of 32 filters or more,
# of one group, its panels split into a task per CPU (sched_getaffinity), else its pixels;
# any other filter splits its image rows likewise. The tasks run on the process's pool or a thread
# per task after the first (the first runs here, the others are joined or run here where
# their thread did not start). No task calls OpenBLAS: its threads are left alone.
# CHECK-LABEL: define internal i32 @"sf.conv2d.float32"(ptr %"data", ptr %"dims", ptr %"strides")
# CHECK: %"sh" = load i64
# CHECK: %"dw" = load i64
# CHECK: %"groups" = load i64
# CHECK: %"rectify" = load i64
# CHECK: %[[CHANNELS:".[0-9]+"]] = mul i64 %"arg1.d2", %"groups"
# CHECK-NEXT: icmp eq i64 %"arg0.d3", %[[CHANNELS]]
# CHECK-NEXT: srem i64 %"arg1.d3", %"groups"
# CHECK: ret i32 2
# CHECK: ret i32 1
# CHECK: ret i32 3
# CHECK: icmp eq i64 %"sh", 1
# CHECK-NEXT: icmp eq i64 %"sw", 1
# CHECK-NEXT: icmp eq i64 %"top", 0
# CHECK: icmp slt i64 %{{".[0-9]+"}}, 1536
# CHECK: icmp sge i64 %{{".[0-9]+"}}, 8
# CHECK: icmp eq i64 %"groups", 1
# CHECK: call i32 @"sched_getaffinity"(i32 0, i64 128,
# CHECK: call i1 @"sf.pool.run"({{.*}}@"sf.conv2d.float32.columns.thread"
# CHECK: call i32 @"sched_getaffinity"(i32 0, i64 128,
# CHECK: call i1 @"sf.pool.run"({{.*}}@"sf.conv2d.float32.pixels.thread"
# CHECK: call i32 @"sched_getaffinity"(i32 0, i64 128,
# CHECK: call i1 @"sf.pool.run"({{.*}}@"sf.conv2d.float32.rows.thread"
# CHECK: call i32 @"pthread_create"({{.*}}@"sf.conv2d.float32.rows.thread"
# CHECK: call void @"sf.conv2d.float32.rows"(
# CHECK: call i32 @"pthread_join"(
# CHECK-NOT: scipy_openblas
# With few output pixels and many filters of one group, a pointwise conv shares out its
# filters instead: a task multiplies every pixel's row of the input (lda = C) by its
# panels of filter columns, [first, last) * 32 clipped to the output's channels O
# (ldb = O), into the same columns of the output (ldc = O), the epilogue's pointers (data 3
# to 5) moved as far.
# CHECK-LABEL: define internal i32 @"sf.conv2d.float32.columns.body"(
# CHECK: %[[START:".[0-9]+"]] = mul i64 %"first", 32
# CHECK-NEXT: %[[END:".[0-9]+"]] = mul i64 %"last", 32
# CHECK-NEXT: %[[CLIPPED:".[0-9]+"]] = icmp slt i64 %[[END]], %"arg2.d3"
# CHECK-NEXT: %[[STOP:".[0-9]+"]] = select i1 %[[CLIPPED]], i64 %[[END]], i64 %"arg2.d3"
# CHECK-NEXT: %[[COUNT:".[0-9]+"]] = sub i64 %[[STOP]], %[[START]]
# CHECK-NEXT: %[[OUT:".[0-9]+"]] = getelementptr float, ptr %"arg2", i64 %[[START]]
# CHECK: getelementptr float, ptr %{{".[0-9]+"}}, i64 %[[START]]
# CHECK: %[[FILTERS:".[0-9]+"]] = getelementptr float, ptr %"arg1", i64 %[[START]]
# CHECK-NEXT: call void @"sf.gemm.float32"(i64 %{{".[0-9]+"}}, i64 %[[COUNT]], i64 %"arg0.d3",
# CHECK-SAME: ptr %"arg0", i64 %"arg0.d3", ptr %[[FILTERS]], i64 %"arg1.d3", i1 0,
# CHECK-SAME: ptr %[[OUT]], i64 %"arg1.d3", i1 0, ptr %{{".[0-9]+"}}, ptr %{{".[0-9]+"}},
# CHECK-SAME: ptr %{{".[0-9]+"}}, i1 %{{".[0-9]+"}})

# The convolutions' own gemm: k in chunks of 256 (summing onto C after the first, or when
# the caller accumulates), rows in blocks of about 96 (the rows shared out evenly), columns
# in blocks of two vectors (W lanes: AVX2's 8, or AVX-512's 16 where the host has it) whose
# panel of B is first copied to the stack (from a B stored transposed, by squares of W by
# W that `sf.gemm.square` transposes in registers; the filters are not); then tiles of 6
# rows, 12 sums in registers, per k the panel's 2 vectors, each row's A broadcast and 12
# fmas; then the rows left, 1 to 5, as one tile of their count; the last block's lanes
# past n read as zeros and stored under a mask. After the last chunk's terms, a tile's
# sums go through the epilogue its caller gives (`conv.epilogue`: nulls and no ReLU,
# here), whose residual the tile starts reading before its terms.
# CHECK-LABEL: define internal void @"sf.gemm.float32"(i64 %"m", i64 %"n", i64 %"k",
# CHECK-SAME: ptr %"a", i64 %"lda", ptr %"b", i64 %"ldb", i1 %"b_transposed",
# CHECK-SAME: ptr %"c", i64 %"ldc",
# CHECK-SAME: i1 %"accumulate", ptr %"scale", ptr %"shift", ptr %"second_scale",
# CHECK-SAME: ptr %"second_shift", ptr %"residual", i1 %"rectify")
# CHECK: %"panel" = alloca <[[W:8|16]] x float>, i32 512
# CHECK: depth.body:
# CHECK: add i64 %"depth", 256
# CHECK: or i1 %"accumulate",
# CHECK: rows.body:
# CHECK: add i64 %"rows", %{{".[0-9]+"}}
# CHECK: br i1 %"b_transposed"
# CHECK: pack.square.body:
# CHECK: call void @"sf.gemm.square.float32"(ptr
# CHECK: pack.body:
# CHECK: load <[[W]] x float>
# CHECK: store <[[W]] x float>
# CHECK: tile.body:
# CHECK: k.body:
# CHECK: %[[P0:".[0-9]+"]] = load <[[W]] x float>, <[[W]] x float>* %{{".[0-9]+"}}
# CHECK: %[[P1:".[0-9]+"]] = load <[[W]] x float>, <[[W]] x float>* %{{".[0-9]+"}}
# CHECK: %[[A:".[0-9]+"]] = shufflevector <[[W]] x float>
# CHECK-NEXT: call <[[W]] x float> @"llvm.fma.v[[W]]f32"(<[[W]] x float> %[[A]],
# CHECK-SAME: <[[W]] x float> %[[P0]],
# CHECK-NEXT: call <[[W]] x float> @"llvm.fma.v[[W]]f32"(<[[W]] x float> %[[A]],
# CHECK-SAME: <[[W]] x float> %[[P1]],
# CHECK-COUNT-5: call <[[W]] x float> @"llvm.fma.v[[W]]f32"({{.+}}, <[[W]] x float> %[[P1]],
# CHECK: switch i64 %{{".[0-9]+"}}, label %"rest.done{{.*}}" [i64 1, label %"rest.1{{.*}}" i64 2
# CHECK: rest.5{{.*}}:
# CHECK-COUNT-10: call <[[W]] x float> @"llvm.fma.v[[W]]f32"(
# CHECK: call <[[W]] x float> @"llvm.masked.load.v[[W]]f32.p0"(
# CHECK: call void @"llvm.masked.store.v[[W]]f32.p0"(

# CHECK-LABEL: define internal void @"sf.conv2d.float32.pixels"(

# A pointwise task, group by group: its pixels' rows of the input in place (lda = C), from
# the group's first channel (k = C/G), by the group's filter columns (O/G of them, from
# column g*O/G, ldb = O) into its rows of the output (from the same column, ldc = O), not
# accumulating; the epilogue's pointers moved to the same column and element.
# CHECK-LABEL: define internal i32 @"sf.conv2d.float32.pixels.body"(
# CHECK: group.body:
# CHECK-NEXT: %[[OUT_N:".[0-9]+"]] = sdiv i64 %"arg1.d3", %"groups"
# CHECK-NEXT: %[[OUT_COLUMN:".[0-9]+"]] = mul i64 %"group", %[[OUT_N]]
# CHECK: %[[FIRST:".[0-9]+"]] = mul i64 %"group", %"arg1.d2"
# CHECK-NEXT: %[[A:".[0-9]+"]] = getelementptr float, ptr %{{".[0-9]+"}}, i64 %[[FIRST]]
# CHECK-NEXT: %[[C:".[0-9]+"]] = getelementptr float, ptr %{{".[0-9]+"}}, i64 %[[OUT_COLUMN]]
# CHECK: %[[N:".[0-9]+"]] = sdiv i64 %"arg1.d3", %"groups"
# CHECK-NEXT: %[[COLUMN:".[0-9]+"]] = mul i64 %"group", %[[N]]
# CHECK-NEXT: %[[B:".[0-9]+"]] = getelementptr float, ptr %"arg1", i64 %[[COLUMN]]
# CHECK-NEXT: call void @"sf.gemm.float32"(i64 %{{".[0-9]+"}}, i64 %[[N]], i64 %"arg1.d2",
# CHECK-SAME: ptr %[[A]], i64 %"arg0.d3", ptr %[[B]], i64 %"arg1.d3",
# CHECK-SAME: ptr %[[C]], i64 %"arg1.d3", i1 0,

# A task loads the operands and the geometry again from the entry's arguments. Under the
# direct loops' rule, one call of the module's direct loops over its rows (their status
# returned). Else its scratch (code 4 without it), its blocks, the free; in each chunk of
# filter rows, group by group, the group's windows copied in and one gemm of the scratch
# (lda = the chunk's depth) by the group's filter columns (O/G of them, ldb = O) into its
# output columns (ldc = O), accumulating after the first chunk.
# CHECK-LABEL: define internal i32 @"sf.conv2d.float32.rows.body"(ptr %"data", ptr %"dims",
# CHECK-SAME: ptr %"strides", i64 %"first", i64 %"last", i64 %"task", ptr %"private")
# CHECK: %"sh" = load i64
# CHECK: icmp eq i64 %"dw", 1
# CHECK-NEXT: srem i64 %"arg1.d3", 8
# CHECK: %[[DIRECT:".[0-9]+"]] = call i32 @"sf.conv2d.direct.float32"(ptr %"arg0",
# CHECK-SAME: ptr %"arg1", ptr %"arg2", i64 %"arg0.d0",
# CHECK-SAME: i64 %"sh", i64 %"sw", i64 %"dh", i64 %"top", i64 %"left", i64 %"first",
# CHECK-SAME: i64 %"last", ptr %{{".[0-9]+"}}, ptr %{{".[0-9]+"}}, ptr %{{".[0-9]+"}},
# CHECK-SAME: i1 %{{".[0-9]+"}})
# CHECK: %[[SCRATCH:".[0-9]+"]] = call ptr @"malloc"
# CHECK: ret i32 %[[DIRECT]]
# CHECK: ret i32 4
# CHECK: call void @"free"(ptr %[[SCRATCH]])
# CHECK: group.body:
# CHECK: icmp sgt i64 %"tap_rows", 0
# CHECK: %[[COLUMNS:".[0-9]+"]] = sdiv i64 %"arg1.d3", %"groups"
# CHECK: call void @"sf.gemm.float32"(i64 %{{".[0-9]+"}}, i64 %[[COLUMNS]],
# CHECK-SAME: i64 %[[DEPTH:".[0-9]+"]], ptr %[[SCRATCH]], i64 %[[DEPTH]],
# CHECK-SAME: ptr %{{".[0-9]+"}}, i64 %"arg1.d3", i1 0, ptr %{{".[0-9]+"}}, i64 %"arg1.d3",
# CHECK-SAME: i1 %{{".[0-9]+"}}, ptr
# A filter row's run of kw * C elements, inside the input and undilated (at run time):
# whole vectors, then a masked one; outside it, zeros.
# CHECK: move.body:
# CHECK: load <16 x float>, ptr %{{".[0-9]+"}}, align 4
# CHECK: store <16 x float>
# CHECK: call <16 x float> @"llvm.masked.load.v16f32.p0"(
# CHECK: call void @"llvm.masked.store.v16f32.p0"(

# The direct loops, internal, one function per dtype in a module that conv2d's and its
# input gradient's tasks call, the strides, row dilation, padding and rows its arguments:
# C zeros (code 4 without them), freed after its rows; per tile, unclipped, one loop over a
# filter row's kw*C taps and channels: 2 vectors of filters, each of the 6 pixels' inputs
# broadcast, 12 fmas; clipped, tap by tap, a pixel outside reading zeros. Blocks of 16
# channels in AVX2 vectors, then of 8 (where the CPU has AVX-512, blocks of 64, 32 and 16
# in its vectors first, in tiles of 7 or 8 pixels: not this target's; the labels below
# match either numbering). Its last arguments are an epilogue
# (`conv.epilogue`), applied to a tile's sums before they are stored.
# CHECK-LABEL: define internal i32 @"sf.conv2d.direct.float32"(ptr %"x", ptr %"w", ptr %"out",
# CHECK-SAME: i64 %"sh", i64 %"sw", i64 %"dh", i64 %"top", i64 %"left", i64 %"first",
# CHECK-SAME: i64 %"last", ptr %"scale", ptr %"shift", ptr %"second_scale",
# CHECK-SAME: ptr %"second_shift", ptr %"residual", i1 %"rectify")
# CHECK: %[[ZEROS:".[0-9]+"]] = call ptr @"calloc"
# CHECK: ret i32 4
# CHECK: call void @"free"(ptr %[[ZEROS]])
# CHECK: k.body{{(\.[0-9]+)?}}:
# CHECK: %[[W0:".[0-9]+"]] = load <8 x float>
# CHECK: %[[W1:".[0-9]+"]] = load <8 x float>
# CHECK: %[[X:".[0-9]+"]] = shufflevector <8 x float>
# CHECK-NEXT: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[X]], <8 x float> %[[W0]],
# CHECK-NEXT: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[X]], <8 x float> %[[W1]],
# CHECK-COUNT-5: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %{{.+}}, <8 x float> %[[W1]],
# CHECK: tap.body{{(\.[0-9]+)?}}:
# CHECK: select i1 %{{".[0-9]+"}}, ptr %{{".[0-9]+"}}, ptr %[[ZEROS]]
# CHECK: %[[V0:".[0-9]+"]] = load <8 x float>
# CHECK: %[[V1:".[0-9]+"]] = load <8 x float>
# CHECK: %[[Y:".[0-9]+"]] = shufflevector <8 x float>
# CHECK-NEXT: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[Y]], <8 x float> %[[V0]],
# CHECK-NEXT: call <8 x float> @"llvm.fma.v8f32"(<8 x float> %[[Y]], <8 x float> %[[V1]],
# CHECK-LABEL: define internal ptr @"sf.conv2d.float32.rows.thread"(ptr %".1")
# CHECK: call void @"sf.conv2d.float32.rows"(ptr %".1")

# The 1x1 stride-1 unpadded conv: its entry passes no padding to the same code.
# CHECK-LABEL: define i32 @"conv2d"(
# CHECK: getelementptr i64, i64* %"geometry", i64 14
# CHECK-NEXT: store i64 0,
# CHECK: call i32 @"sf.conv2d.float32"(
# CHECK-LABEL: define internal i32 @"sf.conv2d.float32"(

# Max pooling: the output rows split over the cores; per pixel the taps of each window
# clipped to the input, each block of channels (here one vector of 4) combined in a
# register from -inf by a compare and select, beside a mask of the lanes that saw a NaN,
# which become NaN before the block is stored once.
# CHECK-LABEL: define i32 @"reduce_window"(
# CHECK: call i1 @"sf.pool.run"(ptr (ptr)* @"reduce_window.rows.thread"
# CHECK-LABEL: define internal i32 @"reduce_window.rows.body"(
# CHECK: block4.body:
# CHECK: %[[ACC:".[0-9]+"]] = phi <4 x float> [<float 0xfff0000000000000, {{.*}}>, %"block4.body"]
# CHECK-NEXT: %[[NANS:".[0-9]+"]] = phi <4 x i1> [<i1 0, i1 0, i1 0, i1 0>, %"block4.body"]
# CHECK: %[[OUT:".[0-9]+"]] = select <4 x i1> %[[NANS]],
# CHECK-SAME: <4 x float> <float 0x7ff8000000000000, {{.*}}>, <4 x float> %[[ACC]]
# CHECK: store <4 x float> %[[OUT]]
# CHECK: %[[X:".[0-9]+"]] = load <4 x float>, ptr
# CHECK-NEXT: %[[GT:".[0-9]+"]] = fcmp ogt <4 x float> %[[X]], %[[M:".[0-9]+"]]
# CHECK-NEXT: select <4 x i1> %[[GT]], <4 x float> %[[X]], <4 x float> %[[M]]
# CHECK-NEXT: %[[NAN:".[0-9]+"]] = fcmp uno <4 x float> %[[X]], %[[X]]
# CHECK-NEXT: or <4 x i1> %{{".[0-9]+"}}, %[[NAN]]

# The input gradient (strides 2 2, its input size 6 6 after the dilations in the geometry):
# where the direct loops' rule does not hold at run time (stride 1, one group and C a
# multiple of 8 up to 32), whole images split into tasks (a result with no terms is zeroed
# whole); a task zeroes its images of the result (memset), then per chunk and group one
# gemm of the cotangent's rows (lda = O; k = O/G, the group's columns) by the filters
# transposed (111, 112) into the scratch, whose runs are added into the result, whole
# vectors then a masked one.
# CHECK-LABEL: define i32 @"conv2d_input_gradient"(
# CHECK: getelementptr i64, i64* %"geometry", i64 12
# CHECK-NEXT: store i64 2,
# CHECK: getelementptr i64, i64* %"geometry", i64 21
# CHECK-NEXT: store i64 6,
# CHECK: call i32 @"sf.conv2d_input_gradient.float32"(
# CHECK-LABEL: define internal i32 @"sf.conv2d_input_gradient.float32"(
# CHECK: call void @"llvm.memset.p0.i64"(
# CHECK: icmp eq i64 %"sh", 1
# CHECK-NEXT: icmp eq i64 %"sw", 1
# CHECK-NEXT: icmp eq i64 %"groups", 1
# CHECK-NEXT: icmp eq i64 %"dw", 1
# CHECK-NEXT: srem i64 %"arg1.d2", 8
# (the bound on C is the target's: 64 float32 channels with AVX-512, 32 elsewhere)
# CHECK: icmp sle i64 %"arg1.d2", {{32|64}}
# CHECK: call i32 @"pthread_create"({{.*}}@"sf.conv2d_input_gradient.float32.rows.thread"
# CHECK-LABEL: define internal i32 @"sf.conv2d_input_gradient.float32.rows.body"(
# The direct loops' branch: the filters flipped and transposed into memory of the task's
# own (code 4 without it), the direct loops run over the cotangent by them, then freed.
# CHECK: %[[FLIPPED:".[0-9]+"]] = call ptr @"malloc"
# CHECK: call void @"llvm.memset.p0.i64"(
# CHECK: %[[COLUMNS:".[0-9]+"]] = call ptr @"malloc"
# CHECK: ret i32 4
# CHECK: %[[DIRECT:".[0-9]+"]] = call i32 @"sf.conv2d.direct.float32"(ptr %"arg0",
# CHECK-SAME: ptr %[[FLIPPED]], ptr %"arg2",
# CHECK-NEXT: call void @"free"(ptr %[[FLIPPED]])
# CHECK: flip3.body:
# CHECK: ret i32 %[[DIRECT]]
# CHECK: call void @"free"(ptr %[[COLUMNS]])
# CHECK: %[[PER_GROUP:".[0-9]+"]] = sdiv i64 %"arg1.d3", %"groups"
# CHECK: group.body:
# CHECK: call void @{{"(scipy_cblas_sgemm64_|sf.cblas.gemm.float32)"}}(i32 101,
# CHECK-SAME: i32 111, i32 112, i64 %{{".[0-9]+"}},
# CHECK-SAME: i64 %[[CHUNK:".[0-9]+"]], i64 %[[PER_GROUP]], float 0x3ff0000000000000,
# CHECK-SAME: ptr %{{".[0-9]+"}}, i64 %"arg1.d3", ptr %{{".[0-9]+"}}, i64 %"arg1.d3",
# CHECK-SAME: float {{ *}}0x0, ptr %[[COLUMNS]], i64 %[[CHUNK]])
# CHECK: move.body:
# CHECK: %[[PIXELS:".[0-9]+"]] = load <16 x float>
# CHECK-NEXT: %[[COLUMN:".[0-9]+"]] = load <16 x float>
# CHECK-NEXT: %[[SUM:".[0-9]+"]] = fadd <16 x float>
# CHECK: call <16 x float> @"llvm.masked.load.v16f32.p0"(
# CHECK: fadd <16 x float>
# CHECK: call void @"llvm.masked.store.v16f32.p0"(

# The filter gradient (its filter size 3 3 after the dilations in the geometry): each task
# after the first gets filters of its own (malloc'd before the threads start), added into
# the result and freed once all are joined. A task copies the windows as the conv copies
# them, then multiplies the scratch transposed (112, 111) by the cotangent's rows into the
# chunk's filter rows of its own filters (the result's for the first task), beta 1 after
# its first block; group by group, each the group's windows by its O/G columns.
# CHECK-LABEL: define i32 @"conv2d_filter_gradient"(
# CHECK: getelementptr i64, i64* %"geometry", i64 21
# CHECK-NEXT: store i64 3,
# CHECK: call i32 @"sf.conv2d_filter_gradient.float32"(
# CHECK-LABEL: define internal i32 @"sf.conv2d_filter_gradient.float32"(
# CHECK: call ptr @"malloc"
# CHECK: call i32 @"pthread_create"({{.*}}@"sf.conv2d_filter_gradient.float32.rows.thread"
# CHECK: merge.body:
# CHECK: fadd float
# CHECK: call void @"free"
# CHECK-LABEL: define internal i32 @"sf.conv2d_filter_gradient.float32.rows.body"(
# CHECK: %[[OWN:".[0-9]+"]] = icmp eq ptr %"private", null
# CHECK: %[[WINDOWS:".[0-9]+"]] = call ptr @"malloc"
# CHECK: %[[PER_GROUP:".[0-9]+"]] = sdiv i64 %"arg1.d3", %"groups"
# CHECK: %[[START:".[0-9]+"]] = icmp eq i64 %"block", %"first"
# CHECK: group.body:
# CHECK: call void @{{"(scipy_cblas_sgemm64_|sf.cblas.gemm.float32)"}}(i32 101, i32 112,
# CHECK-SAME: i32 111, i64 %[[DEPTH:".[0-9]+"]],
# CHECK-SAME: i64 %[[PER_GROUP]], i64 %{{".[0-9]+"}}, float 0x3ff0000000000000,
# CHECK-SAME: ptr %[[WINDOWS]], i64 %[[DEPTH]], ptr %{{".[0-9]+"}}, i64 %"arg1.d3",

# The stride-1 input gradient of 8 channels: the same code, its entry passing strides 1
# and padding 1, for the direct loops to serve at run time.
# CHECK-LABEL: define i32 @"conv2d_input_gradient"(
# CHECK: getelementptr i64, i64* %"geometry", i64 12
# CHECK-NEXT: store i64 1,
# CHECK: call i32 @"sf.conv2d_input_gradient.float32"(
# CHECK-LABEL: define internal i32 @"sf.conv2d_input_gradient.float32"(
# CHECK-LABEL: define internal i32 @"sf.conv2d.direct.float32"(
# CHECK: call <8 x float> @"llvm.fma.v8f32"(

# Max pooling of bfloat16: the same loops on float32 lanes, each block's bits widened
# (the high half of a float32) as loaded and its high halves stored back, exactly.
# CHECK-LABEL: define internal i32 @"reduce_window.rows.body"(
# CHECK: block4.body:
# CHECK: %[[MAX:".[0-9]+"]] = select <4 x i1> %{{".[0-9]+"}}, <4 x float> <float 0x7ff8000000000000
# CHECK-NEXT: %[[BITS:".[0-9]+"]] = bitcast <4 x float> %[[MAX]] to <4 x i32>
# CHECK-NEXT: %[[HIGH:".[0-9]+"]] = lshr <4 x i32> %[[BITS]], <i32 16, i32 16, i32 16, i32 16>
# CHECK-NEXT: %[[HALF:".[0-9]+"]] = trunc <4 x i32> %[[HIGH]] to <4 x i16>
# CHECK: store <4 x i16> %[[HALF]]
# CHECK: %[[RAW:".[0-9]+"]] = load <4 x i16>, ptr
# CHECK-NEXT: %[[WIDE:".[0-9]+"]] = zext <4 x i16> %[[RAW]] to <4 x i32>
# CHECK-NEXT: %[[SHIFTED:".[0-9]+"]] = shl <4 x i32> %[[WIDE]], <i32 16, i32 16, i32 16, i32 16>
# CHECK-NEXT: %[[X:".[0-9]+"]] = bitcast <4 x i32> %[[SHIFTED]] to <4 x float>
# CHECK-NEXT: fcmp ogt <4 x float> %[[X]]
