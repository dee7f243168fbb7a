# RUN: python %s | filecheck %s
"""A summary stays in the graph through the default pass pipeline: a `py_func` without
results (a callback effect), reading the step variable and the loss, whose computation is
kept although the function returns something else."""

import tempfile

import stageflow as sf

writer = sf.summary.create_file_writer(tempfile.mkdtemp())
step = sf.Variable(0, dtype=sf.int64, name="step")


@sf.function
def train(x):
    with writer.as_default():
        sf.summary.scalar("loss", sf.reduce_mean(x * x), step=step)
    return x + 1.0


print(train.get_concrete_function(sf.TensorSpec([4], sf.float32)).ir("optimized"))
writer.close()

# CHECK-LABEL: func.func @train
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<4xf32> loc(unknown),
# CHECK-SAME: %[[STEP:[0-9]+]]: !sf.resource<tensor<i64>>
# CHECK-NEXT: %[[SUM:[0-9]+]] = sf.call %[[X]] {callee = @train_kernel0
# CHECK-NEXT: %[[LOSS:[0-9]+]] = sf.call %[[SUM]] {callee = @train_kernel1
# CHECK-NEXT: %[[S:[0-9]+]] = sf.read_variable %[[STEP]]
# CHECK-NEXT: sf.py_func %[[S]], %[[LOSS]]
# CHECK-SAME: {func = "sf.summary.scalar#{{[0-9]+}}", shapes = [], dtypes = []}
# CHECK-SAME: (tensor<i64>, tensor<f32>) -> () loc("{{.*}}summary_op.py":17:
# CHECK-NEXT: %[[Y:[0-9]+]] = sf.call %[[X]] {callee = @train_kernel2
# CHECK-NEXT: func.return %[[Y]]
# CHECK: func.func @train_kernel0
# CHECK: sf.multiply
# CHECK-NEXT: sf.reduce_sum
