# RUN: python %s | filecheck %s
"""Traced control flow: `sf.cond` becomes one `sf.cond` op with a region per branch, a
`sf.switch_case` one with a region per case, reading the traced values from above; a
`sf.while_loop` one `sf.while` whose regions take the loop variables, its body once; a
variable only read in a branch is read before the op, one the branch writes is used
through its handle inside; a py_func keeps its callable by name."""

import numpy as np

import stageflow as sf

S = sf.TensorSpec
v = sf.Variable(np.float32(1.0))


@sf.function
def branches(x, p):
    return sf.cond(p, lambda: sf.exp(x) * v.read_value(), lambda: x)


# CHECK-LABEL: func.func @branches
# CHECK-SAME:    (%[[X:[0-9]+]]: tensor<3xf32>, %[[P:[0-9]+]]: tensor<i1>,
# CHECK-SAME:    %[[V:[0-9]+]]: !sf.resource<tensor<f32>>)
# CHECK-NEXT:    %[[R:[0-9]+]] = sf.read_variable %[[V]]
# CHECK-NEXT:    %{{[0-9]+}} = sf.cond %[[P]] : (tensor<i1>) -> tensor<3xf32> ({
# CHECK-NEXT:      %[[E:[0-9]+]] = sf.exp %[[X]]
# CHECK-NEXT:      %[[M:[0-9]+]] = sf.multiply %[[E]], %[[R]]
# CHECK-NEXT:      sf.yield %[[M]] : tensor<3xf32>
# CHECK-NEXT:    }, {
# CHECK-NEXT:      sf.yield %[[X]] : tensor<3xf32>
# CHECK-NEXT:    })
print(branches.get_concrete_function(S([3]), S([], sf.bool)).ir("traced").replace(
    " loc(unknown)", ""))


@sf.function
def cases(i, x):
    return sf.switch_case(i, [lambda: x, lambda: -x, lambda: x * x])


# CHECK-LABEL: func.func @cases
# CHECK:         sf.cond %{{[0-9]+}} : (tensor<i32>) -> tensor<2xf32> ({
# CHECK:         }, {
# CHECK:         sf.negative
# CHECK:         }, {
# CHECK:         sf.multiply
# CHECK:         })
print(cases.get_concrete_function(S([], sf.int32), S([2])).ir("traced"))


@sf.function
def counter(x, n):
    def body(i, acc):
        v.assign_add(1.0)
        return i + 1, acc + x
    return sf.while_loop(lambda i, acc: i < n, body, (0, sf.zeros_like(x)))[1]


# CHECK-LABEL: func.func @counter
# CHECK-SAME:    (%[[X:[0-9]+]]: tensor<2xf32> loc(unknown),
# CHECK-SAME:    %[[N:[0-9]+]]: tensor<i32> loc(unknown),
# CHECK-SAME:    %[[V:[0-9]+]]: !sf.resource<tensor<f32>>
# CHECK:         sf.while %{{[0-9]+}}, %{{[0-9]+}} :
# CHECK-SAME:      (tensor<i32>, tensor<2xf32>) -> (tensor<i32>, tensor<2xf32>) ({
# CHECK-NEXT:    ^bb0(%[[I:[0-9]+]]: tensor<i32> loc(unknown),
# CHECK-SAME:      %{{[0-9]+}}: tensor<2xf32> loc(unknown)):
# CHECK-NEXT:      %[[C:[0-9]+]] = sf.less %[[I]], %[[N]]
# CHECK-NEXT:      sf.yield %[[C]] : tensor<i1>
# CHECK-NEXT:    }, {
# CHECK-NEXT:    ^bb0(%{{[0-9]+}}: tensor<i32> loc(unknown),
# CHECK-SAME:      %[[A:[0-9]+]]: tensor<2xf32> loc(unknown)):
# CHECK-NEXT:      %[[OLD:[0-9]+]] = sf.read_variable %[[V]]
# CHECK:           sf.assign_variable %[[V]]
# CHECK:           sf.add %[[A]], %[[X]]
# CHECK-COUNT-1:   sf.yield
# CHECK-NEXT:    })
print(counter.get_concrete_function(S([2]), S([], sf.int32)).ir("traced"))


def sort(a):
    return np.sort(a)


@sf.function
def sorted_(x):
    return sf.numpy_function(sort, [x], S([None]))


# CHECK-LABEL: func.func @sorted_
# CHECK-NEXT:    sf.py_func %{{[0-9]+}} {func = "sort#{{[0-9]+}}", shapes = {{\[\[}}none]],
# CHECK-SAME:    dtypes = [f32]} : (tensor<5xf32>) -> tensor<?xf32>
print(sorted_.get_concrete_function(S([5])).ir("traced").replace(" loc(unknown)", ""))
