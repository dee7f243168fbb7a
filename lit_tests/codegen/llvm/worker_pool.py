# RUN: python %s | filecheck %s
"""The worker pool a split op runs its tasks on (`stageflow.codegen.lowered.worker_pool`): its
state is one process-wide block, declared (the JIT's symbol is Python's), so that every
module's split ops share the same workers. An idle worker watches the job's generation
(an atomic load) for a bounded number of time-stamp cycles, yielding the core at each
look, before it sleeps on the condition variable; the caller likewise watches the tasks
remaining before it waits for them. The words watched are stored atomically."""

from llvmlite import ir

from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.lowered.worker_pool import pool_run

module = ir.Module("pool")
pool_run(module, lambda b: i64(2))
print(module)

# CHECK: @"sf.pool.state" = external global [40 x i64]

# The last task to finish stores the count remaining atomically and wakes the caller.
# CHECK-LABEL: define internal void @"sf.pool.claim"()
# CHECK: store atomic i64 {{.*}}@"sf.pool.state", i64 0, i64 36) monotonic
# CHECK: call i32 @"pthread_cond_broadcast"

# CHECK-LABEL: define internal ptr @"sf.pool.worker"(
# CHECK: job:
# CHECK-NEXT: call i32 @"pthread_mutex_unlock"
# CHECK-NEXT: %[[NOW:".[0-9]+"]] = call i64 @"llvm.readcyclecounter"()
# CHECK-NEXT: %[[END:".[0-9]+"]] = add i64 %[[NOW]], 2097152
# CHECK: spin.head:
# CHECK-NEXT: load atomic i64, i64* getelementptr ({{.*}}@"sf.pool.state", i64 0, i64 33) monotonic
# CHECK: icmp ult i64 %{{".[0-9]+"}}, %[[END]]
# CHECK: spin.body:
# CHECK-NEXT: call i32 @"sched_yield"()
# CHECK: spin.end:
# CHECK-NEXT: call i32 @"pthread_mutex_lock"
# CHECK: wait.work.body:
# CHECK-NEXT: call i32 @"pthread_cond_wait"
# CHECK: call void @"sf.pool.claim"()

# The caller posts the job (its generation stored atomically), takes tasks itself, then
# watches and waits for the rest.
# CHECK-LABEL: define internal i1 @"sf.pool.run"(
# CHECK: call i32 @"pthread_mutex_trylock"
# CHECK: store atomic i64 {{.*}}@"sf.pool.state", i64 0, i64 33) monotonic
# CHECK-NEXT: call i32 @"pthread_cond_broadcast"
# CHECK-NEXT: call void @"sf.pool.claim"()
# CHECK: call i64 @"llvm.readcyclecounter"()
# CHECK: load atomic i64, i64* getelementptr ({{.*}}@"sf.pool.state", i64 0, i64 36) monotonic
# CHECK: call i32 @"sched_yield"()
# CHECK: wait.done.body:
# CHECK-NEXT: call i32 @"pthread_cond_wait"
