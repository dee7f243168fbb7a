# RUN: stageflow dump %s:f --arg "f32[?,8]" --stage lowered | filecheck %s
"""The loop level of a whole function (`ir("lowered")`): one program checks its argument
dims (and, when asked, the caller's output dims), sizes and allocates the temporary between
its fused kernel and its argmax from the run-time batch dim, calls both through their C
entry points, turns a refusal into 1000 + the op's index, frees what it allocated, and
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
# CHECK-NEXT:    call void @"free"(ptr %[[TEMP:".[0-9]+"]])
# CHECK:       outputs_checked:
# CHECK:         %[[OUT:".[0-9]+"]] = load ptr
# CHECK:         %[[BYTES:".[0-9]+"]] = mul i64 4, %"arg0.d0"
# CHECK:         %[[TEMP]] = call ptr @"malloc"
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    ret i32 2
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    store i32 999
# CHECK:         call i32 @"f.f_kernel0"
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    store i32 1000
# CHECK:         store ptr %[[TEMP]]
# CHECK-NEXT:    getelementptr
# CHECK-NEXT:    store ptr %[[OUT]]
# CHECK:         call i32 @"f.argmax0"
# CHECK:       fail.{{[0-9]+}}:
# CHECK-NEXT:    store i32 1001
# CHECK:       define i32 @"f.f_kernel0"(ptr %"args", ptr %"dims")
# CHECK:       define i32 @"f.argmax0"(ptr %"data", ptr %"dims", ptr %"strides")
# CHECK:       define i32 @"f.program.shapes"
