# RUN: python %s | filecheck %s
"""None dims in input_signature / TensorSpec are ? dims, carried through matmul and reductions."""

import stageflow as sf

S = sf.TensorSpec


@sf.function(input_signature=[S([None, 784], sf.float32), S([784, 10], sf.float32)])
def logits(x, w):
    y = sf.matmul(x, w)
    return sf.reduce_max(y, axis=1), sf.reduce_sum(y, axis=0), sf.reduce_mean(y, axis=1)


print(logits.get_concrete_function().ir("traced"))

# CHECK-LABEL: func.func @logits
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<?x784xf32> loc(unknown),
# CHECK-SAME: %[[W:[0-9]+]]: tensor<784x10xf32> loc(unknown))
# CHECK-SAME: -> (tensor<?xf32>, tensor<10xf32>, tensor<?xf32>) {
# CHECK-NEXT: %[[Y:[0-9]+]] = sf.matmul %[[X]], %[[W]] {transpose_a = false, transpose_b = false} :
# CHECK-SAME: (tensor<?x784xf32>, tensor<784x10xf32>) -> tensor<?x10xf32>
# CHECK-NEXT: sf.reduce_max %[[Y]] {axes = [1], keepdims = false} :
# CHECK-SAME: (tensor<?x10xf32>) -> tensor<?xf32>
# CHECK-NEXT: sf.reduce_sum %[[Y]] {axes = [0], keepdims = false} :
# CHECK-SAME: (tensor<?x10xf32>) -> tensor<10xf32>
# The mean over the known axis divides by its size, a constant.
# CHECK-NEXT: %[[S:[0-9]+]] = sf.reduce_sum %[[Y]] {axes = [1], keepdims = false} :
# CHECK-SAME: (tensor<?x10xf32>) -> tensor<?xf32>
# CHECK-NEXT: %[[N:[0-9]+]] = sf.constant dense<1.000000e+01> : tensor<f32>
# CHECK-NEXT: sf.divide %[[S]], %[[N]] : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>


@sf.function
def gram(x):
    return sf.matmul(x, x, transpose_a=True), sf.reduce_sum(x)


print(gram.get_concrete_function(S([None, None], sf.float32)).ir("traced"))

# CHECK-LABEL: func.func @gram
# CHECK-SAME: tensor<?x?xf32>
# CHECK-NEXT: sf.matmul {{.*}} {transpose_a = true, transpose_b = false} :
# CHECK-SAME: (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
# CHECK-NEXT: sf.reduce_sum {{.*}} {axes = [0, 1], keepdims = false} :
# CHECK-SAME: (tensor<?x?xf32>) -> tensor<f32>
