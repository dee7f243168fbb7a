# RUN: stageflow dump %s:f --arg "f32[4,8]" --stage lowered | filecheck %s
"""A program of static shapes passes its calls' dims and strides as constant globals, one
per distinct list of values, shared by the calls passing it: no stores of dims before a
call (`ProgramBuilder.i64_array`)."""

import stageflow as sf


def f(x):
    return sf.argmax(sf.tanh(x) * 2.0, axis=1) + sf.argmax(sf.exp(x), axis=1)


# CHECK-LABEL: define i32 @"f.program"(
# CHECK:       call i32 @"f.f_kernel0"(ptr %{{".[0-9]+"}}, [4 x i64]* @"f.program.dims0")
# CHECK-NOT:   store i64
# CHECK:       call i32 @"f.argmax0"(ptr %{{".[0-9]+"}}, [3 x i64]* @"f.program.dims1",
# CHECK-SAME:  [2 x i64]* @"f.program.dims2")
# CHECK:       call i32 @"f.f_kernel1"(ptr %{{".[0-9]+"}}, [4 x i64]* @"f.program.dims0")
# CHECK:       call i32 @"f.argmax0"(ptr %{{".[0-9]+"}}, [3 x i64]* @"f.program.dims1",
# CHECK-SAME:  [2 x i64]* @"f.program.dims2")
# CHECK:       @"f.program.dims0" = internal constant [4 x i64] [i64 4, i64 8, i64 4, i64 8]
# CHECK:       @"f.program.dims1" = internal constant [3 x i64] [i64 4, i64 8, i64 4]
# CHECK-NEXT:  @"f.program.dims2" = internal constant [2 x i64] [i64 8, i64 1]
