# RUN: python %s | filecheck %s
"""The paper's listing 7: a variable closed over is captured by reference, as a resource."""

import stageflow as sf

v = sf.Variable(0.0)


@sf.function
def mutate():
    v.assign_add(1.0)
    return v.read_value()


print(mutate.get_concrete_function().ir("traced"))

# assign_add is read, add, assign on the handle; the value returned is a fresh read.
# CHECK-LABEL: func.func @mutate
# CHECK-SAME: (%[[V:[0-9]+]]: !sf.resource<tensor<f32>> loc(unknown)) -> tensor<f32> {
# CHECK-NEXT: %[[OLD:[0-9]+]] = sf.read_variable %[[V]] : (!sf.resource<tensor<f32>>) -> tensor<f32>
# CHECK-NEXT: %[[ONE:[0-9]+]] = sf.constant dense<1.000000e+00> : tensor<f32>
# CHECK-NEXT: %[[NEW:[0-9]+]] = sf.add %[[OLD]], %[[ONE]] :
# CHECK-SAME: (tensor<f32>, tensor<f32>) -> tensor<f32>
# CHECK-NEXT: sf.assign_variable %[[V]], %[[NEW]] : (!sf.resource<tensor<f32>>, tensor<f32>) -> ()
# CHECK-NEXT: %[[READ:[0-9]+]] = sf.read_variable %[[V]] :
# CHECK-SAME: (!sf.resource<tensor<f32>>) -> tensor<f32>
# CHECK-NEXT: func.return %[[READ]] : tensor<f32>

w = sf.Variable([[1.0, 2.0], [3.0, 4.0]])


@sf.function
def project(x):
    return sf.matmul(x, w)


print(project.get_concrete_function(sf.TensorSpec([None, 2], sf.float32)).ir("traced"))

# The resource comes after the real argument; reading it gives a tensor of its type.
# CHECK-LABEL: func.func @project
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<?x2xf32> loc(unknown),
# CHECK-SAME: %[[W:[0-9]+]]: !sf.resource<tensor<2x2xf32>> loc(unknown)) -> tensor<?x2xf32>
# CHECK-NEXT: %[[R:[0-9]+]] = sf.read_variable %[[W]] :
# CHECK-SAME: (!sf.resource<tensor<2x2xf32>>) -> tensor<2x2xf32>
# CHECK-NEXT: sf.matmul %[[X]], %[[R]]
# CHECK-NOT: sf.assign_variable
# CHECK: func.return
