# RUN: python %s | filecheck %s
"""Each op carries loc("file.py":LINE:COL) of the user's line that made it, never stageflow's."""

import stageflow as sf

# Arguments, results and the module have no location.
# CHECK-LABEL: func.func @located
# CHECK-SAME: (%{{[0-9]+}}: tensor<2x3xf32> loc(unknown), %{{[0-9]+}}: tensor<3x4xf32> loc(unknown))


@sf.function
def located(x, w):
    y = sf.matmul(x, w)
    # CHECK-NEXT: sf.matmul {{.*}} loc("{{.*}}lit_tests/frontend/locations.py":[[# @LINE - 1]]:9)
    z = helper(y) * 2.0
    # The op made in `helper` is at its line in `helper`, below.
    # CHECK-NEXT: sf.exp {{.*}} loc("{{.*}}lit_tests/frontend/locations.py":[[# @LINE + 16]]:12)
    # CHECK-NEXT: sf.constant dense<2.000000e+00> {{.*}} loc("{{.*}}locations.py":[[# @LINE - 3]]:9)
    # CHECK-NEXT: sf.multiply {{.*}} loc("{{.*}}locations.py":[[# @LINE - 4]]:9)
    return sf.nn.softmax(z)
    # Every op of the sf.nn.softmax composite is at the line that called it.
    # CHECK-NEXT: sf.reduce_max {{.*}} loc("{{.*}}locations.py":[[# @LINE - 2]]:12)
    # CHECK-NEXT: sf.subtract {{.*}} loc("{{.*}}locations.py":[[# @LINE - 3]]:12)
    # CHECK-NEXT: sf.exp {{.*}} loc("{{.*}}locations.py":[[# @LINE - 4]]:12)
    # CHECK-NEXT: sf.reduce_sum {{.*}} loc("{{.*}}locations.py":[[# @LINE - 5]]:12)
    # CHECK-NEXT: sf.divide {{.*}} loc("{{.*}}locations.py":[[# @LINE - 6]]:12)
    # CHECK-NEXT: func.return {{.*}} loc(unknown)
    # CHECK-NEXT: } loc(unknown)
    # CHECK-NEXT: } loc(unknown)


def helper(t):
    return sf.exp(t)


print(located.get_concrete_function(sf.TensorSpec([2, 3], sf.float32),
                                    sf.TensorSpec([3, 4], sf.float32)).ir("traced"))
