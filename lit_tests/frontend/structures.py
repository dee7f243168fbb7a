# RUN: python %s | filecheck %s
"""Nested dicts/tuples of tensors are flattened into arguments and results (dict keys sorted)."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def combine(inputs, scale):
    a, b = inputs["pair"]
    return {"sum": a + b, "both": (a, inputs["c"] * scale)}


structure = {"pair": (S([2], sf.float32), S([2], sf.float32)), "c": S([3], sf.float32)}
concrete = combine.get_concrete_function(structure, 2.0)
print(concrete.ir("traced"))
print("inputs:", [spec.shape for spec in concrete.inputs])
print("outputs:", [spec.shape for spec in concrete.outputs])

# Arguments: inputs["c"], inputs["pair"][0], inputs["pair"][1] (the float is a constant).
# Results: both[0] (an argument returned as it is), both[1], then sum.
# CHECK-LABEL: func.func @combine
# CHECK-SAME: (%[[C:[0-9]+]]: tensor<3xf32> loc(unknown),
# CHECK-SAME: %[[A:[0-9]+]]: tensor<2xf32> loc(unknown),
# CHECK-SAME: %[[B:[0-9]+]]: tensor<2xf32> loc(unknown))
# CHECK-SAME: -> (tensor<2xf32>, tensor<3xf32>, tensor<2xf32>) {
# CHECK-NEXT: %[[SUM:[0-9]+]] = sf.add %[[A]], %[[B]] :
# CHECK-SAME: (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
# CHECK-NEXT: %[[TWO:[0-9]+]] = sf.constant dense<2.000000e+00> : tensor<f32>
# CHECK-NEXT: %[[SCALED:[0-9]+]] = sf.multiply %[[C]], %[[TWO]] :
# CHECK-SAME: (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
# CHECK-NEXT: func.return %[[A]], %[[SCALED]], %[[SUM]] :
# CHECK-SAME: tensor<2xf32>, tensor<3xf32>, tensor<2xf32>
# CHECK: inputs: [(3,), (2,), (2,)]
# CHECK-NEXT: outputs: [(2,), (3,), (2,)]
