# RUN: python %s | filecheck %s
"""sf.random.normal in a staged function reads, advances and writes the generator's state."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def add_noise(x):
    return x + sf.random.normal((2, 3))


print(add_noise.get_concrete_function(S([2, 3], sf.float32)).ir("traced"))

# The state is a uint32[4] variable captured by reference: each call draws fresh numbers.
# Box-Muller as TensorFlow's kernel computes it: four normals from each Philox block, two
# blocks for six; the counter then moves on by 256 blocks an element drawn (1536).
# CHECK-LABEL: func.func @add_noise
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<2x3xf32> loc(unknown),
# CHECK-SAME: %[[STATE:[0-9]+]]: !sf.resource<tensor<4xui32>> loc(unknown)) -> tensor<2x3xf32> {
# CHECK-NEXT: %[[OLD:[0-9]+]] = sf.read_variable %[[STATE]] :
# CHECK-SAME: (!sf.resource<tensor<4xui32>>) -> tensor<4xui32>
# CHECK-NEXT: %[[BITS:[0-9]+]], %{{[0-9]+}} = sf.random_bits %[[OLD]] {shape = [2, 4]} :
# CHECK-SAME: (tensor<4xui32>) -> (tensor<2x4xui32>, tensor<4xui32>)
# CHECK: sf.constant dense<1536> : tensor<ui32>
# CHECK: %[[NEW:[0-9]+]] = sf.concat
# CHECK-NEXT: sf.assign_variable %[[STATE]], %[[NEW]] :
# CHECK-SAME: (!sf.resource<tensor<4xui32>>, tensor<4xui32>) -> ()
# CHECK: sf.constant dense<8388608> : tensor<ui32>
# CHECK-NEXT: sf.mod
# CHECK: sf.log
# CHECK: sf.sqrt
# CHECK: sf.sin
# CHECK: sf.cos
# CHECK: sf.concat
# CHECK: %[[Z:[0-9]+]] = sf.reshape %{{[0-9]+}} {shape = [2, 3]} :
# CHECK-SAME: (tensor<6xf32>) -> tensor<2x3xf32>
# CHECK-NEXT: %[[R:[0-9]+]] = sf.add %[[X]], %[[Z]]
# CHECK-NEXT: func.return %[[R]] : tensor<2x3xf32>


@sf.function
def two_draws():
    return sf.random.uniform((4,)), sf.random.uniform((4,))


print(two_draws.get_concrete_function().ir("traced"))

# Two draws from one generator: one state argument, the second draw reads the first's state.
# CHECK-LABEL: func.func @two_draws
# CHECK-SAME: (%[[ST:[0-9]+]]: !sf.resource<tensor<4xui32>> loc(unknown))
# CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>)
# CHECK-NEXT: sf.read_variable %[[ST]]
# CHECK-NEXT: sf.random_bits {{.*}} {shape = [4]}
# CHECK: sf.assign_variable %[[ST]]
# CHECK: sf.read_variable %[[ST]]
# CHECK-NEXT: sf.random_bits {{.*}} {shape = [4]}
# CHECK: sf.assign_variable %[[ST]]
