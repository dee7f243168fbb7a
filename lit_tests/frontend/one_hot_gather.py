# RUN: python %s | filecheck %s
"""sf.one_hot is iota == indices, selecting on_value/off_value; sf.gather is one op."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def encode(labels, table):
    return sf.one_hot(labels, 5), sf.gather(table, labels), sf.gather(table, labels, axis=1)


print(encode.get_concrete_function(S([3], sf.int32), S([5, 6], sf.float32)).ir("traced"))

# CHECK-LABEL: func.func @encode
# CHECK-SAME: (%[[I:[0-9]+]]: tensor<3xi32> loc(unknown),
# CHECK-SAME: %[[T:[0-9]+]]: tensor<5x6xf32> loc(unknown))
# CHECK-SAME: -> (tensor<3x5xf32>, tensor<3x6xf32>, tensor<5x3xf32>)

# one_hot: a row of column numbers compared with the labels as a column (broadcast, so
# that the labels' dims may be unknown).
# CHECK-NEXT: %[[IOTA:[0-9]+]] = sf.iota {shape = [1, 5], dtype = i32, dimension = 1} :
# CHECK-SAME: () -> tensor<1x5xi32>
# CHECK-NEXT: %[[COL:[0-9]+]] = sf.reshape %[[I]] {shape = [3, 1]} :
# CHECK-SAME: (tensor<3xi32>) -> tensor<3x1xi32>
# CHECK-NEXT: %[[HIT:[0-9]+]] = sf.equal %[[COL]], %[[IOTA]] :
# CHECK-SAME: (tensor<3x1xi32>, tensor<1x5xi32>) -> tensor<3x5xi1>
# CHECK-NEXT: %[[ON:[0-9]+]] = sf.constant dense<1.000000e+00> : tensor<f32>
# CHECK-NEXT: %[[OFF:[0-9]+]] = sf.constant dense<0.000000e+00> : tensor<f32>
# CHECK-NEXT: %[[OH:[0-9]+]] = sf.select %[[HIT]], %[[ON]], %[[OFF]] :
# CHECK-SAME: (tensor<3x5xi1>, tensor<f32>, tensor<f32>) -> tensor<3x5xf32>

# gather: rows (axis 0) and columns (axis 1) of the table.
# CHECK-NEXT: %[[ROWS:[0-9]+]] = sf.gather %[[T]], %[[I]] {axis = 0} :
# CHECK-SAME: (tensor<5x6xf32>, tensor<3xi32>) -> tensor<3x6xf32>
# CHECK-NEXT: %[[COLS:[0-9]+]] = sf.gather %[[T]], %[[I]] {axis = 1} :
# CHECK-SAME: (tensor<5x6xf32>, tensor<3xi32>) -> tensor<5x3xf32>
# CHECK-NEXT: func.return %[[OH]], %[[ROWS]], %[[COLS]]
