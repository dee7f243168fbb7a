# RUN: stageflow dump %s:loop --arg "f32[4]" --arg "i32[]" --stage lowered | filecheck %s
# RUN: stageflow dump %s:branch --arg "f32[4]" --arg "i1[]" --stage lowered \
# RUN:   | filecheck %s --check-prefix=COND
"""Control flow in the loop level: an `sf.while` is an LLVM loop inside the one program
(its condition region, a conditional branch out, its body, back to the condition); each
carried value lives in two buffers written in turn (`while.s*`, swapped by phis, never
copied); the first iteration reads the initial value where it is (a constant here, the
argument). Each iteration ends with the check for a Ctrl-C: an atomic load of the
process's interrupt flag, almost never set (`!prof`); where it is, and the program runs on
the main thread, the program returns 996 (`INTERRUPTED`) through its cleanup. An `sf.cond`
is a `switch` over its regions, its result a phi of what the taken region yields. The
kernels inside are called like any others."""

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
# CHECK:         %"interrupt.flag" = load atomic i32, {{.*}}@"sf.interrupt.flag" monotonic
# CHECK:         br i1 %{{.*}}, label %"loop.interrupt", label %"loop.latch", !prof
# CHECK:       loop.interrupt:
# CHECK-NEXT:    %[[SELF:.+]] = call i64 @"pthread_self"()
# CHECK-NEXT:    %[[MAIN:.+]] = load i64, {{.*}}@"sf.interrupt.main"
# CHECK-NEXT:    %[[ON_MAIN:.+]] = icmp eq i64 %[[SELF]], %[[MAIN]]
# CHECK-NEXT:    br i1 %[[ON_MAIN]], label %"[[STOP:fail.*]]", label
# CHECK:       loop.latch:
# CHECK:         br label %"while.cond"
# CHECK:       [[STOP]]:
# CHECK-NEXT:    store i32 996, {{.*}}%"status"
# CHECK-NEXT:    br label %"cleanup"

# COND-LABEL: define i32 @"branch.program"
# COND:         switch i64 %{{.*}}, label %"cond.1" [i64 0, label %"cond.0"]
# COND-NEXT:  cond.end:
# COND-NEXT:    %"cond.r0" = phi ptr
# COND:       cond.0:
# COND:         call i32 @"branch.branch_kernel0"
# COND:       cond.1:
# COND:         call i32 @"branch.branch_kernel1"
# COND:         br label %"cond.end"
