# RUN: stageflow dump %s:clip --arg "f32[4]" | filecheck %s
# RUN: stageflow dump %s:clip --stage converted | filecheck %s --check-prefix=SOURCE
# RUN: stageflow dump %s:halve_until --arg "f32[]" | filecheck %s --check-prefix=LOOP
"""AutoGraph: a Python `if` on a tensor is traced as one `sf.cond` whose regions hold each
branch, a `while` on a tensor as one `sf.while`, at the user's lines; `--stage converted`
shows the generated source, the branches as nested functions passing their state."""

import stageflow as sf


def clip(x):
    if sf.reduce_sum(x) > 0.0:
        y = x * 2.0
    else:
        y = -x
    return y


def halve_until(x):
    while x > 1.0:
        x = x / 2.0
    return x


# CHECK-LABEL: func.func @clip
# CHECK:         %[[P:[0-9]+]] = sf.greater
# CHECK-SAME:      autograph.py":12:
# CHECK-NEXT:    %{{[0-9]+}} = sf.cond %[[P]] : (tensor<i1>) -> tensor<4xf32> ({
# CHECK:           sf.multiply
# CHECK-SAME:        autograph.py":13:
# CHECK:           sf.yield
# CHECK-NEXT:    }, {
# CHECK-NEXT:      sf.negative
# CHECK-SAME:        autograph.py":15:
# CHECK:         }) loc({{.*}}autograph.py":12:

# SOURCE-LABEL: def clip(x):
# SOURCE:         def ag__if_body_1():
# SOURCE-NEXT:        nonlocal y
# SOURCE-NEXT:        y = x * 2.0
# SOURCE:         y, = ag__.if_stmt(
# SOURCE-NEXT:    return y

# LOOP-LABEL: func.func @halve_until
# LOOP:         sf.while
# LOOP-COUNT-1: sf.divide
