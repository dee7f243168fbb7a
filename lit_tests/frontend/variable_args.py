# RUN: python %s | filecheck %s
"""A variable passed as an argument is a resource argument in its place in the signature."""

import stageflow as sf


@sf.function
def scale_in_place(var, factor):
    var.assign(var * factor)
    return var.read_value()


v = sf.Variable([1.0, 2.0, 3.0])
print(scale_in_place.get_concrete_function(v, sf.TensorSpec([3], sf.float32)).ir("traced"))

# CHECK-LABEL: func.func @scale_in_place
# CHECK-SAME: (%[[V:[0-9]+]]: !sf.resource<tensor<3xf32>> loc(unknown),
# CHECK-SAME: %[[F:[0-9]+]]: tensor<3xf32> loc(unknown)) -> tensor<3xf32> {
# CHECK-NEXT: %[[OLD:[0-9]+]] = sf.read_variable %[[V]] :
# CHECK-SAME: (!sf.resource<tensor<3xf32>>) -> tensor<3xf32>
# CHECK-NEXT: %[[NEW:[0-9]+]] = sf.multiply %[[OLD]], %[[F]] :
# CHECK-SAME: (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
# CHECK-NEXT: sf.assign_variable %[[V]], %[[NEW]] :
# CHECK-SAME: (!sf.resource<tensor<3xf32>>, tensor<3xf32>) -> ()
# CHECK-NEXT: %[[READ:[0-9]+]] = sf.read_variable %[[V]]
# CHECK-NEXT: func.return %[[READ]] : tensor<3xf32>


@sf.function
def total(a, b):
    return a + b


first = sf.Variable([1, 2], dtype=sf.int32)
second = sf.Variable([3, 4], dtype=sf.int32)
print(total.get_concrete_function(first, second).ir("traced"))

# Two variable arguments, each read where it is used.
# CHECK-LABEL: func.func @total
# CHECK-SAME: (%[[A:[0-9]+]]: !sf.resource<tensor<2xi32>> loc(unknown),
# CHECK-SAME: %[[B:[0-9]+]]: !sf.resource<tensor<2xi32>> loc(unknown)) -> tensor<2xi32>
# CHECK-NEXT: %[[RA:[0-9]+]] = sf.read_variable %[[A]]
# CHECK-NEXT: %[[RB:[0-9]+]] = sf.read_variable %[[B]]
# CHECK-NEXT: sf.add %[[RA]], %[[RB]] : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
