# RUN: stageflow dump %s:loop --arg "f32[4]" --arg "i32[]" --stage lowered | filecheck %s
# RUN: stageflow dump %s:branch --arg "f32[4]" --arg "i1[]" --stage lowered \
# RUN:   | filecheck %s --check-prefix=COND
"""Control flow in the loop level: an `sf.while` is an LLVM loop inside the one program
(its condition region, a conditional branch out, its body, back to the condition); each
carried value lives in two buffers written in turn (`while.s*`, swapped by phis, never
copied); the first iteration reads the initial value where it is (a constant here, the
argument). An `sf.cond` is a `switch` over its regions, its result a phi of what the
taken region yields. The kernels inside are called like any others."""

import stageflow as sf


def loop(h, n):
    return sf.fori_loop(0, n, lambda i, h: sf.tanh(h) * 2.0, h)


def branch(x, p):
    return sf.cond(p, lambda: sf.exp(x), lambda: x * 3.0)


# CHECK-LABEL: define i32 @"loop.program"
# CHECK:       while.cond:
# CHECK-NEXT:    %"while.v0" = phi ptr [@"loop.program.const{{[0-9]+}}", %{{.*}}],
# CHECK-SAME:      [%"while.s0", %{{.*}}]
# CHECK-NEXT:    %"while.v1" = phi ptr [%"arg0", %{{.*}}], [%"while.s1", %{{.*}}]
# CHECK:         call i32 @"loop.loop_kernel0"
# CHECK:       while.body:
# CHECK:         call i32 @"loop.loop_kernel1"
# CHECK:       while.end:
# CHECK:         br i1 %{{.*}}, label %"while.body", label %"while.end"
# CHECK:         call i32 @"loop.loop_kernel2"
# CHECK:         br label %"while.cond"

# COND-LABEL: define i32 @"branch.program"
# COND:         switch i64 %{{.*}}, label %"cond.1" [i64 0, label %"cond.0"]
# COND-NEXT:  cond.end:
# COND-NEXT:    %"cond.r0" = phi ptr
# COND:       cond.0:
# COND:         call i32 @"branch.branch_kernel0"
# COND:       cond.1:
# COND:         call i32 @"branch.branch_kernel1"
# COND:         br label %"cond.end"
