# RUN: python %s | filecheck %s
"""An sf.function method: self is bound (not an argument), its variables are resources."""

import numpy as np

import stageflow as sf


class Dense:
    def __init__(self, units, relu):
        self.w = sf.Variable(np.ones((4, units), np.float32), name="w")
        self.b = sf.Variable(np.zeros(units, np.float32), name="b")
        self.relu = relu

    @sf.function
    def forward(self, x):
        y = sf.matmul(x, self.w) + self.b
        return sf.nn.relu(y) if self.relu else y


layer = Dense(3, relu=True)
print(layer.forward.get_concrete_function(sf.TensorSpec([None, 4], sf.float32)).ir("traced"))

# The real argument first, then the variables in the order the body reads them; the Python
# attribute self.relu is read at trace time.
# CHECK-LABEL: func.func @forward
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<?x4xf32> loc(unknown),
# CHECK-SAME: %[[W:[0-9]+]]: !sf.resource<tensor<4x3xf32>> loc(unknown),
# CHECK-SAME: %[[B:[0-9]+]]: !sf.resource<tensor<3xf32>> loc(unknown)) -> tensor<?x3xf32> {
# CHECK-NEXT: %[[RW:[0-9]+]] = sf.read_variable %[[W]] :
# CHECK-SAME: (!sf.resource<tensor<4x3xf32>>) -> tensor<4x3xf32>
# CHECK-NEXT: %[[XW:[0-9]+]] = sf.matmul %[[X]], %[[RW]] {{.*}} -> tensor<?x3xf32>
# CHECK-NEXT: %[[RB:[0-9]+]] = sf.read_variable %[[B]] :
# CHECK-SAME: (!sf.resource<tensor<3xf32>>) -> tensor<3xf32>
# CHECK-NEXT: %[[Y:[0-9]+]] = sf.add %[[XW]], %[[RB]] :
# CHECK-SAME: (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
# CHECK-NEXT: sf.relu %[[Y]]
# CHECK-NEXT: func.return

linear = Dense(2, relu=False)
print(linear.forward.get_concrete_function(sf.TensorSpec([8, 4], sf.float32)).ir("traced"))

# Another instance is another graph function, over its own variables.
# CHECK-LABEL: func.func @forward
# CHECK-SAME: (%{{[0-9]+}}: tensor<8x4xf32> loc(unknown),
# CHECK-SAME: %{{[0-9]+}}: !sf.resource<tensor<4x2xf32>> loc(unknown),
# CHECK-SAME: %{{[0-9]+}}: !sf.resource<tensor<2xf32>> loc(unknown)) -> tensor<8x2xf32> {
# CHECK-NEXT: sf.read_variable
# CHECK-NEXT: sf.matmul
# CHECK-NEXT: sf.read_variable
# CHECK-NEXT: %[[LIN:[0-9]+]] = sf.add
# CHECK-NEXT: func.return %[[LIN]] : tensor<8x2xf32>
