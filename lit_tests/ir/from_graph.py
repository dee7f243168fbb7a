# RUN: python %s | filecheck %s
"""A traced function and its callee become one module: one func.func each, an sf.call
between them, and the user's lines as loc(...) (printed with debuginfo=True)."""

import numpy as np

import stageflow as sf
from stageflow.ir import module_to_text, parse_module
from stageflow.ir.from_graph import graph_module


@sf.function
def scale(x):
    return sf.exp(x) * 2.0


@sf.function
def model(x, w):
    return sf.reduce_sum(scale(sf.matmul(x, w)), axis=1)


x = np.ones((3, 4), np.float32)
w = np.ones((4, 5), np.float32)
concrete = model.get_concrete_function(x, w)
text = module_to_text(graph_module(concrete.graph, concrete.name), debuginfo=True)
assert module_to_text(parse_module(text), debuginfo=True) == text
print(text)

# CHECK-LABEL: func.func @model
# CHECK-NEXT: sf.matmul {{.*}} -> tensor<3x5xf32> loc("{{.*}}from_graph.py":19:
# CHECK-NEXT: sf.call %{{[0-9]+}} {callee = @scale} : (tensor<3x5xf32>) -> tensor<3x5xf32>
# CHECK-NEXT: sf.reduce_sum {{.*}} {axes = [1], keepdims = false}
# CHECK-NEXT: func.return
# CHECK-LABEL: func.func @scale
# CHECK-NEXT: sf.exp {{.*}} loc("{{.*}}from_graph.py":14:
# CHECK-NEXT: sf.constant dense<2.000000e+00> : tensor<f32>
# CHECK-NEXT: sf.multiply
