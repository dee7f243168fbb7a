# RUN: stageflow dump %s:f --arg "f32[?,8]" --stage lowered | filecheck %s
"""The loop level of a whole function (`ir("lowered")`): one program checks its argument
dims (and, when asked, the caller's output dims), sizes the temporary between its fused
kernel and its argmax from the run-time batch dim and places it in the workspace (taken
from the program's cache, replaced where it is too small), calls both through their C
entry points, turns a refusal into 1000 + the op's index, puts the workspace back, and
computes the output straight into the caller's buffer."""

import stageflow as sf


def f(x):
    return sf.argmax(sf.tanh(x) * 2.0, axis=1)


# CHECK-LABEL: define i32 @"f.program"(ptr %"inputs", ptr %"dims", ptr %"outputs", ptr %"out_dims")
# CHECK:         %"arg0.d0" = load i64
# CHECK:         icmp sge i64 %"arg0.d0", 0
# CHECK:         %"arg0.d1" = load i64
# CHECK:         icmp eq i64 %"arg0.d1", 8
# CHECK:       fail:
# CHECK-NEXT:    ret i32 1
# CHECK:       cleanup:
# CHECK-NEXT:    %[[HELD:".[0-9]+"]] = icmp ne ptr %[[WORKSPACE:".[0-9]+"]], null
# CHECK:       outputs_checked:
# CHECK:         %[[OUT:".[0-9]+"]] = load ptr
# CHECK:         %[[BYTES:".[0-9]+"]] = mul i64 4, %"arg0.d0"
# CHECK:         %[[CACHED:".[0-9]+"]] = atomicrmw xchg ptr @"f.program.workspace", ptr null
# CHECK:         %[[ROOM:".[0-9]+"]] = load i64, ptr %[[CACHED]]
# CHECK:         %[[BLOCK:".[0-9]+"]] = phi ptr [%[[CACHED]], {{.*}}], [%[[FRESH:".[0-9]+"]],
# CHECK:         %[[BUFFERS:".[0-9]+"]] = getelementptr i8, ptr %[[BLOCK]], i64 64
# CHECK-NEXT:    %[[WORKSPACE]] = select  i1 %{{".[0-9]+"}}, ptr null, ptr %[[BUFFERS]]
# CHECK:         call void @"free"(ptr %[[CACHED]])
# CHECK:         %[[FRESH]] = call ptr @"aligned_alloc"(i64 64,
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    store i32 999
# CHECK:         %[[TEMP:".[0-9]+"]] = getelementptr i8, ptr %[[WORKSPACE]], i64 0
# CHECK:         call i32 @"f.f_kernel0"
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    store i32 1000
# CHECK:         store ptr %[[TEMP]]
# CHECK-NEXT:    getelementptr
# CHECK-NEXT:    store ptr %[[OUT]]
# CHECK:         call i32 @"f.argmax0"
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    store i32 1001
# CHECK:         cmpxchg ptr @"f.program.workspace", ptr null, ptr %{{".[0-9]+"}} acq_rel monotonic
# CHECK:         call void @"free"
# CHECK:       define i32 @"f.f_kernel0"(ptr %"args", ptr %"dims")
# CHECK:       define i32 @"f.argmax0"(ptr %"data", ptr %"dims", ptr %"strides")
# CHECK:       define i32 @"f.program.shapes"
