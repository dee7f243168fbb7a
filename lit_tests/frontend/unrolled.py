# RUN: python %s | filecheck %s
"""Python control flow runs at trace time: loops unroll, an if on a Python value picks a branch."""

import stageflow as sf

S = sf.TensorSpec


@sf.function
def squash(x):
    for _ in range(3):
        x = sf.tanh(x)
    return x


print(squash.get_concrete_function(S([2], sf.float32)).ir("traced"))

# Three iterations, three chained ops, no loop op.
# CHECK-LABEL: func.func @squash
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<2xf32>
# CHECK-NEXT: %[[T1:[0-9]+]] = sf.tanh %[[X]] : (tensor<2xf32>) -> tensor<2xf32>
# CHECK-NEXT: %[[T2:[0-9]+]] = sf.tanh %[[T1]] : (tensor<2xf32>) -> tensor<2xf32>
# CHECK-NEXT: %[[T3:[0-9]+]] = sf.tanh %[[T2]] : (tensor<2xf32>) -> tensor<2xf32>
# CHECK-NEXT: func.return %[[T3]] : tensor<2xf32>


@sf.function
def rectify(x, mirror):
    if mirror:
        return sf.abs(x)
    return sf.negative(x)


print(rectify.get_concrete_function(S([2], sf.float32), True).ir("traced"))
print(rectify.get_concrete_function(S([2], sf.float32), False).ir("traced"))

# The Python bool is not an argument of the graph function: one function per value.
# CHECK-LABEL: func.func @rectify
# CHECK-SAME: (%[[A:[0-9]+]]: tensor<2xf32> loc(unknown)) -> tensor<2xf32> {
# CHECK-NEXT: sf.abs %[[A]]
# CHECK-NEXT: func.return
# CHECK-LABEL: func.func @rectify
# CHECK-SAME: (%[[B:[0-9]+]]: tensor<2xf32> loc(unknown)) -> tensor<2xf32> {
# CHECK-NEXT: sf.negative %[[B]]
# CHECK-NEXT: func.return
