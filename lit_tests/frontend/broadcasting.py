# RUN: python %s | filecheck %s
"""Binary ops broadcast NumPy-style: the result type is the broadcast of the operand types."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def outer_sum(x, y):
    return x + y


print(outer_sum.get_concrete_function(S([2, 1, 4], sf.float32), S([3, 1], sf.float32)).ir())
print(outer_sum.get_concrete_function(S([None, 1], sf.float32), S([3], sf.float32)).ir())

# CHECK-LABEL: func.func @outer_sum
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<2x1x4xf32> loc(unknown),
# CHECK-SAME: %[[Y:[0-9]+]]: tensor<3x1xf32> loc(unknown)) -> tensor<2x3x4xf32>
# CHECK-NEXT: sf.add %[[X]], %[[Y]] : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
# CHECK-NEXT: func.return

# An unknown dim broadcast against a known one stays unknown; the size-1 dim takes 3.
# CHECK-LABEL: func.func @outer_sum
# CHECK-SAME: -> tensor<?x3xf32>
# CHECK-NEXT: sf.add %{{[0-9]+}}, %{{[0-9]+}} : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>


@sf.function
def add_bias(x, b):
    return sf.add(x, b)


print(add_bias.get_concrete_function(S([None, 4], sf.float32), S([4], sf.float32)).ir())

# CHECK-LABEL: func.func @add_bias
# CHECK-NEXT: sf.add %{{[0-9]+}}, %{{[0-9]+}} : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
# CHECK-NEXT: func.return %{{[0-9]+}} : tensor<?x4xf32>
