# RUN: python %s | filecheck %s
"""Eager tensors closed over are captured by value: extra arguments after the real ones."""

import stageflow as sf

bias = sf.constant([1.0, 2.0])
weights = sf.constant([[1.0, 2.0], [3.0, 4.0]])


@sf.function
def dense(x):
    return sf.matmul(x + bias, weights) + bias


concrete = dense.get_concrete_function(sf.TensorSpec([3, 2], sf.float32))
print(concrete.ir("traced"))
# Only the real argument is part of the signature; the captures are passed at each call.
print(f"inputs: {len(concrete.inputs)}")

# Each captured tensor is one argument, in order of first use, however often it is used.
# CHECK-LABEL: func.func @dense
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<3x2xf32> loc(unknown),
# CHECK-SAME: %[[B:[0-9]+]]: tensor<2xf32> loc(unknown),
# CHECK-SAME: %[[W:[0-9]+]]: tensor<2x2xf32> loc(unknown)) -> tensor<3x2xf32> {
# CHECK-NEXT: %[[A:[0-9]+]] = sf.add %[[X]], %[[B]] :
# CHECK-SAME: (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
# CHECK-NEXT: %[[M:[0-9]+]] = sf.matmul %[[A]], %[[W]] {transpose_a = false, transpose_b = false} :
# CHECK-SAME: (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
# CHECK-NEXT: %[[R:[0-9]+]] = sf.add %[[M]], %[[B]] :
# CHECK-SAME: (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
# CHECK-NEXT: func.return %[[R]] : tensor<3x2xf32>
# CHECK: inputs: 1
