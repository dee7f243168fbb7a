# RUN: python %s | filecheck %s
"""The paper's listing 6: dropout is traced only into the training=True graph function."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def lossy_matmul(W, x, training=True):
    outputs = sf.matmul(W, x)
    if training:
        outputs = sf.nn.dropout(outputs, 0.2)
    return outputs


W, x = S([3, 5], sf.float32), S([5, 1], sf.float32)
print(lossy_matmul.get_concrete_function(W, x, training=True).ir("traced"))
print(lossy_matmul.get_concrete_function(W, x, training=False).ir("traced"))

# Training: a uniform mask from the random state (a resource argument), kept where
# noise >= rate, the rest scaled by 1 / (1 - 0.2) = 1.25.
# CHECK-LABEL: func.func @lossy_matmul
# CHECK-SAME: (%{{[0-9]+}}: tensor<3x5xf32> loc(unknown),
# CHECK-SAME: %{{[0-9]+}}: tensor<5x1xf32> loc(unknown),
# CHECK-SAME: %[[STATE:[0-9]+]]: !sf.resource<tensor<4xui32>> loc(unknown)) -> tensor<3x1xf32>
# CHECK-NEXT: %[[Y:[0-9]+]] = sf.matmul
# CHECK-NEXT: sf.read_variable %[[STATE]]
# CHECK-NEXT: sf.random_bits {{.*}} {shape = [3, 1]}
# CHECK: sf.assign_variable %[[STATE]]
# CHECK: %[[RATE:[0-9]+]] = sf.constant dense<2.000000e-01> : tensor<f32>
# CHECK-NEXT: %[[KEEP:[0-9]+]] = sf.greater_equal %{{[0-9]+}}, %[[RATE]] :
# CHECK-SAME: (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xi1>
# CHECK-NEXT: %[[SCALE:[0-9]+]] = sf.constant dense<1.250000e+00> : tensor<f32>
# CHECK-NEXT: %[[SCALED:[0-9]+]] = sf.multiply %[[Y]], %[[SCALE]]
# CHECK-NEXT: %[[ZERO:[0-9]+]] = sf.constant dense<0.000000e+00> : tensor<f32>
# CHECK-NEXT: %[[OUT:[0-9]+]] = sf.select %[[KEEP]], %[[SCALED]], %[[ZERO]] :
# CHECK-SAME: (tensor<3x1xi1>, tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
# CHECK-NEXT: func.return %[[OUT]] : tensor<3x1xf32>

# Inference: the matmul alone, no state argument.
# CHECK-LABEL: func.func @lossy_matmul
# CHECK-SAME: (%{{[0-9]+}}: tensor<3x5xf32> loc(unknown),
# CHECK-SAME: %{{[0-9]+}}: tensor<5x1xf32> loc(unknown)) -> tensor<3x1xf32>
# CHECK-NEXT: %[[Y2:[0-9]+]] = sf.matmul
# CHECK-NEXT: func.return %[[Y2]] : tensor<3x1xf32>
