# RUN: python %s | filecheck %s
"""Lowered factorizations call LAPACK from NumPy's bundled OpenBLAS (`scipy_d*_64_`: every
argument by reference, 64-bit integers, a character's hidden length appended), the double
routine for float32 too, as ``numpy.linalg`` does. They compile shape-generic. `solve`
checks its dims, mallocs one workspace (the matrix, the right-hand sides, the pivots),
copies each matrix of the batch into it column-major (widened to double), calls dgesv, and
on ``info != 0`` (a singular matrix) frees the workspace and returns 1, so the NumPy kernel
runs and raises; then it copies the solution out rounded to float. `eigh` first asks dsyevd
for its work sizes (``lwork = liwork = -1``) as NumPy does."""

from stageflow.codegen.lowered.compile import module_text, op_spec
from stageflow.ir import parse_module

A, B = "tensor<?x4x4xf32>", "tensor<?x4x2xf32>"
module = parse_module(f"""
func.func @f(%a: {A}, %b: {B}) -> ({B}, tensor<?x4xf32>, {A}) {{
  %x = sf.solve %a, %b : ({A}, {B}) -> {B}
  %w, %v = sf.eigh %a : ({A}) -> (tensor<?x4xf32>, {A})
  func.return %x, %w, %v : {B}, tensor<?x4xf32>, {A}
}}
""")
for op in list(module.ops.first.body.block.ops)[:2]:
    print(module_text([op_spec(op)]))

# The matrices must be square (code 1) and the right-hand sides as tall (code 2); a's
# batch dims broadcast (1, or the right-hand sides'). A failed malloc returns 4.
# CHECK-LABEL: define i32 @"solve"(
# CHECK: %[[SQUARE:".[0-9]+"]] = icmp eq i64 %"arg0.d1", %"arg0.d2"
# CHECK-NEXT: br i1 %[[SQUARE]], label %"ok.{{[0-9]+}}", label %"[[NOT_SQUARE:fail.[0-9]+]]"
# CHECK: %[[ROWS:".[0-9]+"]] = icmp eq i64 %"arg1.d1", %"arg0.d1"
# CHECK-NEXT: br i1 %[[ROWS]], label %"ok.{{[0-9]+}}", label %"[[BAD_ROWS:fail.[0-9]+]]"
# CHECK: [[NOT_SQUARE]]:
# CHECK-NEXT: ret i32 1
# CHECK: [[BAD_ROWS]]:
# CHECK-NEXT: ret i32 2
# CHECK: icmp eq i64 %"arg0.d0", 1
# CHECK: %[[SPACE:".[0-9]+"]] = call ptr @"malloc"(
# CHECK: ret i32 4
# CHECK: batch0.head:
# CHECK: batch0.end:
# CHECK-NEXT: call void @"free"(ptr %[[SPACE]])
# CHECK-NEXT: ret i32 0
# a[i, j] read through its strides, widened, stored at column j * lda + i
# CHECK: in1.body:
# CHECK: mul i64 %"in1", %"arg0.s1"
# CHECK-NEXT: mul i64 %"in0", %"arg0.s2"
# CHECK: load float
# CHECK-NEXT: fpext float %{{".[0-9]+"}} to double
# CHECK: call void @"scipy_dgesv_64_"(i64* %{{".[0-9]+"}}, i64* %{{".[0-9]+"}},
# CHECK-SAME: ptr %{{".[0-9]+"}}, i64* %{{".[0-9]+"}}, ptr %{{".[0-9]+"}},
# CHECK-SAME: ptr %{{".[0-9]+"}}, i64* %{{".[0-9]+"}}, i64* %"dgesv.info")
# CHECK-NEXT: %[[INFO:".[0-9]+"]] = load i64, i64* %"dgesv.info"
# CHECK-NEXT: %[[OK:".[0-9]+"]] = icmp eq i64 %[[INFO]], 0
# CHECK-NEXT: br i1 %[[OK]], label %"lapack.ok", label %"lapack.fail"
# CHECK: lapack.fail:
# CHECK-NEXT: call void @"free"(ptr %[[SPACE]])
# CHECK-NEXT: ret i32 1
# CHECK: out1.body:
# CHECK: fptrunc double %{{".[0-9]+"}} to float
# CHECK: declare void @"scipy_dgesv_64_"(ptr %".1", ptr %".2", ptr %".3", ptr %".4",
# CHECK-SAME: ptr %".5", ptr %".6", ptr %".7", ptr %".8")

# eigh: the work size query ('V', 'L', lwork = liwork = -1, the two characters' lengths
# last), the workspace sized by its answers, then dsyevd per matrix.
# CHECK-LABEL: define i32 @"eigh"(
# CHECK: store i8 86, i8* %"dsyevd.V"
# CHECK-NEXT: store i8 76, i8* %"dsyevd.L"
# CHECK: store i64 -1, i64* %[[LWORK:".[0-9]+"]]
# CHECK: store i64 -1, i64* %[[LIWORK:".[0-9]+"]]
# CHECK: call void @"scipy_dsyevd_64_"(i8* %"dsyevd.V", i8* %"dsyevd.L", i64* %{{".[0-9]+"}},
# CHECK-SAME: double* %"unread", i64* %{{".[0-9]+"}}, double* %"unread",
# CHECK-SAME: double* %"dsyevd.lwork", i64* %[[LWORK]], i64* %"dsyevd.liwork",
# CHECK-SAME: i64* %[[LIWORK]], i64* %"dsyevd.info", i64 1, i64 1)
# CHECK: fptosi double %{{".[0-9]+"}} to i64
# CHECK: call ptr @"malloc"(
# CHECK: call void @"scipy_dsyevd_64_"(i8* %"dsyevd.V.1", i8* %"dsyevd.L.1",
# CHECK-SAME: i64* %"dsyevd.info.1", i64 1, i64 1)
