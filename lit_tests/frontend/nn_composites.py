# RUN: python %s | filecheck %s
"""sf.nn functions are composites: the IR holds only the primitives they are written with."""

import stageflow as sf


@sf.function
def probabilities(logits):
    return sf.nn.softmax(logits)


print(probabilities.get_concrete_function(sf.TensorSpec([None, 10], sf.float32)).ir("traced"))

# Stable softmax along the last axis: exp(x - max) / sum(exp(x - max)).
# CHECK-LABEL: func.func @probabilities
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<?x10xf32> loc(unknown)) -> tensor<?x10xf32>
# CHECK-NEXT: %[[MAX:[0-9]+]] = sf.reduce_max %[[X]] {axes = [1], keepdims = true} :
# CHECK-SAME: (tensor<?x10xf32>) -> tensor<?x1xf32>
# CHECK-NEXT: %[[SHIFTED:[0-9]+]] = sf.subtract %[[X]], %[[MAX]] :
# CHECK-SAME: (tensor<?x10xf32>, tensor<?x1xf32>) -> tensor<?x10xf32>
# CHECK-NEXT: %[[E:[0-9]+]] = sf.exp %[[SHIFTED]] : (tensor<?x10xf32>) -> tensor<?x10xf32>
# CHECK-NEXT: %[[SUM:[0-9]+]] = sf.reduce_sum %[[E]] {axes = [1], keepdims = true} :
# CHECK-SAME: (tensor<?x10xf32>) -> tensor<?x1xf32>
# CHECK-NEXT: %[[P:[0-9]+]] = sf.divide %[[E]], %[[SUM]] :
# CHECK-SAME: (tensor<?x10xf32>, tensor<?x1xf32>) -> tensor<?x10xf32>
# CHECK-NEXT: func.return %[[P]] : tensor<?x10xf32>


@sf.function
def log_probabilities_and_relu(x):
    return sf.nn.log_softmax(x, axis=0), sf.nn.relu(x)


print(log_probabilities_and_relu.get_concrete_function(
    sf.TensorSpec([3, 10], sf.float32)).ir("traced"))

# log_softmax is shifted - log(sum(exp(shifted))) along axis 0; relu is one op.
# CHECK-LABEL: func.func @log_probabilities_and_relu
# CHECK-SAME: (%[[Y:[0-9]+]]: tensor<3x10xf32>
# CHECK-NEXT: %[[M:[0-9]+]] = sf.reduce_max %[[Y]] {axes = [0], keepdims = true} :
# CHECK-SAME: (tensor<3x10xf32>) -> tensor<1x10xf32>
# CHECK-NEXT: %[[S:[0-9]+]] = sf.subtract %[[Y]], %[[M]]
# CHECK-NEXT: %[[EX:[0-9]+]] = sf.exp %[[S]]
# CHECK-NEXT: %[[T:[0-9]+]] = sf.reduce_sum %[[EX]] {axes = [0], keepdims = true}
# CHECK-NEXT: %[[LOG:[0-9]+]] = sf.log %[[T]] : (tensor<1x10xf32>) -> tensor<1x10xf32>
# CHECK-NEXT: %[[LSM:[0-9]+]] = sf.subtract %[[S]], %[[LOG]] :
# CHECK-SAME: (tensor<3x10xf32>, tensor<1x10xf32>) -> tensor<3x10xf32>
# CHECK-NEXT: %[[RELU:[0-9]+]] = sf.relu %[[Y]] : (tensor<3x10xf32>) -> tensor<3x10xf32>
# CHECK-NEXT: func.return %[[LSM]], %[[RELU]] : tensor<3x10xf32>, tensor<3x10xf32>
