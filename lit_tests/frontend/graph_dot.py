# RUN: python %s | filecheck %s
"""graph_dot(): ops are boxes, variables double octagons (state), edges labelled with types."""

import stageflow as sf

counter = sf.Variable(0.0, name="counter")


@sf.function
def inner(x):
    return sf.exp(x)


@sf.function
def step(x, w):
    counter.assign_add(1.0)
    return inner(sf.matmul(x, w))


dot = step.get_concrete_function(sf.TensorSpec([None, 4], sf.float32),
                                 sf.TensorSpec([4, 2], sf.float32)).graph_dot()
print(dot)

# CHECK-LABEL: digraph "step" {
# CHECK: arg0 [shape=ellipse, label="arg 0: float32[?, 4]"];
# CHECK-NEXT: arg1 [shape=ellipse, label="arg 1: float32[4, 2]"];
# CHECK-NEXT: capture0 [shape=doubleoctagon, style=solid, label="counter\nfloat32[]"];

# assign_add: read the variable, add, assign; the resource edges carry the handle's type.
# CHECK-NEXT: op0 [shape=box, style=filled, fillcolor=lightgrey, label="read_variable"];
# CHECK-NEXT: capture0 -> op0 [label="resource<float32[]>"];
# CHECK-NEXT: op1 [shape=box, {{.*}}label="constant\nvalue=1.0"];
# CHECK-NEXT: op2 [shape=box, {{.*}}label="add"];
# CHECK-NEXT: op0 -> op2 [label="float32[]"];
# CHECK-NEXT: op1 -> op2 [label="float32[]"];
# CHECK-NEXT: op3 [shape=box, {{.*}}label="assign_variable"];
# CHECK-NEXT: capture0 -> op3 [label="resource<float32[]>"];
# CHECK-NEXT: op2 -> op3 [label="float32[]"];

# The matmul with its attributes, then one node for the call to inner's graph function.
# CHECK-NEXT: op4 [shape=box, {{.*}}label="matmul\ntranspose_a=False\ntranspose_b=False"];
# CHECK-NEXT: arg0 -> op4 [label="float32[?, 4]"];
# CHECK-NEXT: arg1 -> op4 [label="float32[4, 2]"];
# CHECK-NEXT: op5 [shape=box, {{.*}}label="call @inner"];
# CHECK-NEXT: op4 -> op5 [label="float32[?, 2]"];
# CHECK-NEXT: out0 [shape=ellipse, label="result 0"];
# CHECK-NEXT: op5 -> out0 [label="float32[?, 2]"];
# CHECK-NEXT: }
# CHECK-NOT: exp
