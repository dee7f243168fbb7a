# RUN: python %s | filecheck %s
"""The paper's section 4.4: a graph function called in a device scope shows that device on
its func.func; ops a scope inside the function placed, and the ops that use their results,
show theirs (the inner scope wins); a copy to a device is an sf.device_copy op."""

import stageflow as sf

sf.config.set_logical_device_count("CPU", 3)
S = sf.TensorSpec


@sf.function
def step(x, w):
    h = sf.matmul(x, w)
    with sf.device("cpu:2"):
        g = sf.tanh(h)
    y = g * 2.0
    return y.to("cpu:1") + 1.0, h


with sf.device("/cpu:1"):
    print(step.get_concrete_function(S([2, 3], sf.float32), S([3, 3], sf.float32)).ir("traced"))

# CHECK-LABEL: func.func @step
# CHECK-SAME: attributes {device = "/device:CPU:1"} {
# CHECK-NEXT: %[[H:[0-9]+]] = sf.matmul %0, %1 {transpose_a = false, transpose_b = false} :
# CHECK-NEXT: %[[G:[0-9]+]] = sf.tanh %[[H]] {device = "/device:CPU:2"} :
# CHECK-NEXT: %[[TWO:[0-9]+]] = sf.constant dense<2.000000e+00>
# CHECK-NEXT: %[[Y:[0-9]+]] = sf.multiply %[[G]], %[[TWO]] {device = "/device:CPU:2"} :
# CHECK-NEXT: %[[C:[0-9]+]] = sf.device_copy %[[Y]] {device = "/device:CPU:1"} :
# CHECK-NEXT: %[[ONE:[0-9]+]] = sf.constant dense<1.000000e+00>
# CHECK-NEXT: %[[R:[0-9]+]] = sf.add %[[C]], %[[ONE]] :
# CHECK-NEXT: func.return %[[R]], %[[H]]

# The same function called on the host: no attribute on the function, the inner scope kept.
print(step.get_concrete_function(S([2, 3], sf.float32), S([3, 3], sf.float32)).ir("traced"))
# CHECK-LABEL: func.func @step
# CHECK-SAME: -> (tensor<2x3xf32>, tensor<2x3xf32>) {
# CHECK: sf.tanh %{{[0-9]+}} {device = "/device:CPU:2"}
# CHECK: sf.device_copy %{{[0-9]+}} {device = "/device:CPU:1"}
# CHECK: sf.add %{{[0-9]+}}, %{{[0-9]+}} {device = "/device:CPU:1"}
