# RUN: python %s | filecheck %s
"""Indexing is sf.slice ([start, stop, step] per dim); an integer index adds an sf.reshape."""

import stageflow as sf


@sf.function
def pick(x):
    return x[1], x[:, 1:3], x[0, ::2], x[-1], x[1:, None]


print(pick.get_concrete_function(sf.TensorSpec([4, 5], sf.float32)).ir("traced"))

# CHECK-LABEL: func.func @pick
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<4x5xf32> loc(unknown))
# CHECK-SAME: -> (tensor<5xf32>, tensor<4x2xf32>, tensor<3xf32>, tensor<5xf32>, tensor<3x1x5xf32>)

# x[1]: the row as a 1x5 slice, then the indexed dim dropped.
# CHECK-NEXT: %[[R:[0-9]+]] = sf.slice %[[X]] {slices = {{\[}}[1, 2, none], [none, none, none]]}
# CHECK-SAME: : (tensor<4x5xf32>) -> tensor<1x5xf32>
# CHECK-NEXT: %[[ROW:[0-9]+]] = sf.reshape %[[R]] {shape = [5]}
# CHECK-SAME: : (tensor<1x5xf32>) -> tensor<5xf32>

# x[:, 1:3]: slices only, no reshape.
# CHECK-NEXT: %[[COLS:[0-9]+]] = sf.slice %[[X]] {slices = {{\[}}[none, none, none], [1, 3, none]]}
# CHECK-SAME: : (tensor<4x5xf32>) -> tensor<4x2xf32>

# x[0, ::2]: an index and a step.
# CHECK-NEXT: %[[E:[0-9]+]] = sf.slice %[[X]] {slices = {{\[}}[0, 1, none], [none, none, 2]]}
# CHECK-SAME: : (tensor<4x5xf32>) -> tensor<1x3xf32>
# CHECK-NEXT: %[[EVEN:[0-9]+]] = sf.reshape %[[E]] {shape = [3]}
# CHECK-SAME: : (tensor<1x3xf32>) -> tensor<3xf32>

# x[-1]: a negative index is kept as it is.
# CHECK-NEXT: %[[L:[0-9]+]] = sf.slice %[[X]] {slices = {{\[}}[-1, none, none], [none, none, none]]}
# CHECK-SAME: : (tensor<4x5xf32>) -> tensor<1x5xf32>
# CHECK-NEXT: %[[LAST:[0-9]+]] = sf.reshape %[[L]] {shape = [5]}

# x[1:, None]: None (sf.newaxis) inserts a dim with a reshape.
# CHECK-NEXT: %[[T:[0-9]+]] = sf.slice %[[X]] {slices = {{\[}}[1, none, none], [none, none, none]]}
# CHECK-SAME: : (tensor<4x5xf32>) -> tensor<3x5xf32>
# CHECK-NEXT: %[[TAIL:[0-9]+]] = sf.reshape %[[T]] {shape = [3, 1, 5]}
# CHECK-SAME: : (tensor<3x5xf32>) -> tensor<3x1x5xf32>
# CHECK-NEXT: func.return %[[ROW]], %[[COLS]], %[[EVEN]], %[[LAST]], %[[TAIL]]
