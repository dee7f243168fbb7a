# RUN: python %s | filecheck %s
"""The paper's listing 8: a staged call is one sf.call to the callee's own func.func."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def inner(a):
    return sf.nn.relu(a)


@sf.function
def outer(a, b):
    return inner(sf.matmul(a, b))


print(outer.get_concrete_function(S([3, 3], sf.float32), S([3, 3], sf.float32)).ir("traced"))

# The caller comes first, the callee after it in the same module; relu is not inlined.
# CHECK-LABEL: func.func @outer
# CHECK-SAME: -> tensor<3x3xf32> {
# CHECK-NEXT: %[[M:[0-9]+]] = sf.matmul
# CHECK-NEXT: %[[R:[0-9]+]] = sf.call %[[M]] {callee = @inner} :
# CHECK-SAME: (tensor<3x3xf32>) -> tensor<3x3xf32>
# CHECK-NEXT: func.return %[[R]] : tensor<3x3xf32>
# CHECK-LABEL: func.func @inner
# CHECK-SAME: (%[[A:[0-9]+]]: tensor<3x3xf32> loc(unknown)) -> tensor<3x3xf32> {
# CHECK-NEXT: %[[Y:[0-9]+]] = sf.relu %[[A]]
# CHECK-NEXT: func.return %[[Y]] : tensor<3x3xf32>

scale = sf.Variable(2.0)


@sf.function
def scaled(a):
    return a * scale


@sf.function
def twice(a):
    return scaled(a) + scaled(a + 1.0)


print(twice.get_concrete_function(S([3], sf.float32)).ir("traced"))

# The callee's captured variable becomes the caller's too, passed along at each call; two
# calls with one signature share one callee.
# CHECK-LABEL: func.func @twice
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<3xf32> loc(unknown),
# CHECK-SAME: %[[V:[0-9]+]]: !sf.resource<tensor<f32>> loc(unknown))
# CHECK-NEXT: %[[C1:[0-9]+]] = sf.call %[[X]], %[[V]] {callee = @scaled} :
# CHECK-SAME: (tensor<3xf32>, !sf.resource<tensor<f32>>) -> tensor<3xf32>
# CHECK-NEXT: sf.constant dense<1.000000e+00>
# CHECK-NEXT: %[[X1:[0-9]+]] = sf.add %[[X]]
# CHECK-NEXT: %[[C2:[0-9]+]] = sf.call %[[X1]], %[[V]] {callee = @scaled}
# CHECK-NEXT: sf.add %[[C1]], %[[C2]]
# CHECK-LABEL: func.func @scaled
# CHECK-SAME: (%{{[0-9]+}}: tensor<3xf32> loc(unknown),
# CHECK-SAME: %[[SV:[0-9]+]]: !sf.resource<tensor<f32>> loc(unknown))
# CHECK-NEXT: sf.read_variable %[[SV]]
# CHECK-NOT: func.func @scaled
