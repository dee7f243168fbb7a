# RUN: python %s | filecheck %s
"""sf.print stays in the graph as an op (no results), with its text pieces, separator, end
and stream as attributes."""

import sys

import stageflow as sf

S = sf.TensorSpec


@sf.function
def report(x, y):
    sf.print("sum:", x + y, "y", y, sep=", ")
    sf.print("hello", output_stream=sys.stderr, end="!")
    return y


print(report.get_concrete_function(S([2], sf.float32), S([2], sf.float32)).ir("traced"))

# The sum is only printed, never returned, and still computed: sf.print uses it.
# CHECK-LABEL: func.func @report
# CHECK-SAME: (%[[X:[0-9]+]]: tensor<2xf32> loc(unknown),
# CHECK-SAME: %[[Y:[0-9]+]]: tensor<2xf32> loc(unknown)) -> tensor<2xf32> {
# CHECK-NEXT: %[[S:[0-9]+]] = sf.add %[[X]], %[[Y]]
# CHECK-NEXT: sf.print %[[S]], %[[Y]]
# CHECK-SAME: {pieces = ["sum:", none, "y", none], sep = ", ", end = "\0A", stream = "stdout"} :
# CHECK-SAME: (tensor<2xf32>, tensor<2xf32>) -> ()
# CHECK-NEXT: sf.print {pieces = ["hello"], sep = " ", end = "!", stream = "stderr"} : () -> ()
# CHECK-NEXT: func.return %[[Y]] : tensor<2xf32>
