# RUN: python %s | filecheck %s
"""Python scalars become constants of the tensor's dtype, one per value in a function."""

import stageflow as sf


@sf.function
def affine(x):
    return 2 * x + 2.0 - x / 2


print(affine.get_concrete_function(sf.TensorSpec([4], sf.float32)).ir("traced"))

# The int 2 and the float 2.0 are the same f32 constant, emitted once.
# CHECK-LABEL: func.func @affine
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<4xf32> loc(unknown)) -> tensor<4xf32> {
# CHECK-NEXT: %[[TWO:[0-9]+]] = sf.constant dense<2.000000e+00> : tensor<f32>
# CHECK-NEXT: %[[A:[0-9]+]] = sf.multiply %[[TWO]], %[[X]] :
# CHECK-SAME: (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
# CHECK-NEXT: %[[B:[0-9]+]] = sf.add %[[A]], %[[TWO]] :
# CHECK-SAME: (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
# CHECK-NEXT: %[[C:[0-9]+]] = sf.divide %[[X]], %[[TWO]] :
# CHECK-SAME: (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
# CHECK-NEXT: %[[D:[0-9]+]] = sf.subtract %[[B]], %[[C]] :
# CHECK-SAME: (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
# CHECK-NEXT: func.return %[[D]] : tensor<4xf32>


@sf.function
def count(n):
    return n * 3 + 3


print(count.get_concrete_function(sf.TensorSpec([5], sf.int32)).ir("traced"))

# CHECK-LABEL: func.func @count
# CHECK-SAME: (%[[N:[0-9]+]]: tensor<5xi32> loc(unknown)) -> tensor<5xi32> {
# CHECK-NEXT: %[[THREE:[0-9]+]] = sf.constant dense<3> : tensor<i32>
# CHECK-NEXT: %[[M:[0-9]+]] = sf.multiply %[[N]], %[[THREE]] :
# CHECK-SAME: (tensor<5xi32>, tensor<i32>) -> tensor<5xi32>
# CHECK-NEXT: sf.add %[[M]], %[[THREE]] : (tensor<5xi32>, tensor<i32>) -> tensor<5xi32>
# CHECK-NOT: sf.constant
# CHECK: func.return


@sf.function
def half(x):
    return x * 0.5


print(half.get_concrete_function(sf.TensorSpec([4], sf.float64)).ir("traced"))
print(half.get_concrete_function(sf.TensorSpec([4], sf.float16)).ir("traced"))

# CHECK-LABEL: func.func @half
# CHECK-SAME: tensor<4xf64>
# CHECK-NEXT: sf.constant dense<5.000000e-01> : tensor<f64>
# CHECK-NEXT: sf.multiply {{.*}} : (tensor<4xf64>, tensor<f64>) -> tensor<4xf64>
# CHECK-LABEL: func.func @half
# CHECK-SAME: tensor<4xf16>
# CHECK-NEXT: sf.constant dense<5.000000e-01> : tensor<f16>
# CHECK-NEXT: sf.multiply {{.*}} : (tensor<4xf16>, tensor<f16>) -> tensor<4xf16>
