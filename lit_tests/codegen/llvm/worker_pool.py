# RUN: python %s | filecheck %s
"""The worker pool a split op runs its tasks on (`stageflow.codegen.lowered.worker_pool`): its
state is one process-wide block, declared (the JIT's symbol is Python's), so that every
module's split ops share the same workers. An idle worker watches the job's generation
(an atomic load) for a bounded number of time-stamp cycles, yielding the core at each
look, before it sleeps on the condition variable; the caller likewise watches the tasks
remaining before it waits for them. The words watched are stored atomically. Neither
watches during a back-off. The caller runs a job's tasks alone where it was switched out
for another thread lately (`getrusage`'s involuntary switches) or a back-off lasts; it
judges each job it split, doubling the back-off after a lost one, halving it otherwise."""

from llvmlite import ir

from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.lowered.worker_pool import pool_run

module = ir.Module("pool")
pool_run(module, lambda b: i64(2))
print(module)

# CHECK: @"sf.pool.state" = external global [48 x i64]

# The last task to finish stores the count remaining atomically and wakes the caller.
# CHECK-LABEL: define internal i64 @"sf.pool.claim"()
# CHECK: store atomic i64 {{.*}}@"sf.pool.state", i64 0, i64 36) monotonic
# CHECK: call i32 @"pthread_cond_broadcast"

# CHECK-LABEL: define internal ptr @"sf.pool.worker"(
# CHECK: job:
# CHECK-NEXT: call i32 @"pthread_mutex_unlock"
# CHECK-NEXT: %[[NOW:".[0-9]+"]] = call i64 @"llvm.readcyclecounter"()
# CHECK-NEXT: %[[END:".[0-9]+"]] = add i64 %[[NOW]], 2097152
# CHECK: spin.head:
# CHECK-NEXT: load atomic i64, i64* getelementptr ({{.*}}@"sf.pool.state", i64 0, i64 33) monotonic
# CHECK: load atomic i64, i64* getelementptr ({{.*}}@"sf.pool.state", i64 0, i64 42) monotonic
# CHECK: icmp ult i64 %{{".[0-9]+"}}, %[[END]]
# CHECK: spin.body:
# CHECK-NEXT: call i32 @"sched_yield"()
# CHECK: spin.end:
# CHECK-NEXT: call i32 @"pthread_mutex_lock"
# CHECK: wait.work.body:
# CHECK-NEXT: call i32 @"pthread_cond_wait"
# CHECK: call i64 @"sf.pool.claim"()

# Crowded (switched out twice within 2^26 cycles, the kernel asked at most every 2^20) or
# backing off: every task here, in turn.
# CHECK-LABEL: define internal i1 @"sf.pool.run"(
# CHECK: call i32 @"pthread_mutex_trylock"
# CHECK: %[[POSTED:".[0-9]+"]] = call i64 @"llvm.readcyclecounter"()
# CHECK-NEXT: %[[UNTIL:".[0-9]+"]] = load i64, {{.*}}@"sf.pool.state", i64 0, i64 41)
# CHECK-NEXT: %[[BACKING:".[0-9]+"]] = icmp ult i64 %[[POSTED]], %[[UNTIL]]
# CHECK: icmp uge i64 %{{".[0-9]+"}}, 1048576
# CHECK: call i32 @"getrusage"(i32 1,
# CHECK: icmp ult i64 %{{".[0-9]+"}}, 67108864
# CHECK: %[[ALONE:".[0-9]+"]] = or i1 %[[BACKING]],
# CHECK-NEXT: br i1 %[[ALONE]]

# The caller posts the job (its generation stored atomically), takes tasks itself, then
# watches and waits for the rest.
# CHECK: store atomic i64 {{.*}}@"sf.pool.state", i64 0, i64 33) monotonic
# CHECK-NEXT: call i32 @"pthread_cond_broadcast"
# CHECK-NEXT: call i64 @"sf.pool.claim"()
# CHECK: call i64 @"llvm.readcyclecounter"()
# CHECK: alone.body:
# CHECK: call ptr %{{".[0-9]+"}}(ptr
# CHECK: spin.head:
# CHECK: load atomic i64, i64* getelementptr ({{.*}}@"sf.pool.state", i64 0, i64 36) monotonic
# CHECK: call i32 @"sched_yield"()
# CHECK: wait.done.body:
# CHECK-NEXT: call i32 @"pthread_cond_wait"

# The job judged: lost where 2 took ran > 3 own count; the back-off doubles (from 2^21 up
# to 2^27) or halves, stored atomically, since the workers read it.
# CHECK: wait.done.end:
# CHECK: mul i64 %{{".[0-9]+"}}, 2
# CHECK: mul i64 %{{".[0-9]+"}}, 3
# CHECK: shl i64 %{{".[0-9]+"}}, 1
# CHECK: select  i1 %{{".[0-9]+"}}, i64 %{{".[0-9]+"}}, i64 134217728
# CHECK: select  i1 %{{".[0-9]+"}}, i64 2097152
# CHECK: lshr i64 %{{".[0-9]+"}}, 1
# CHECK: store atomic i64 {{.*}}@"sf.pool.state", i64 0, i64 42) monotonic
