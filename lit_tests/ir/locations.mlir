// RUN: stageflow opt --print-debuginfo %s | filecheck %s
// RUN: stageflow opt --print-debuginfo %s | stageflow opt --print-debuginfo - | filecheck %s
// RUN: stageflow opt %s | filecheck %s --check-prefix=PLAIN

// Ops carry the user's Python line as `loc("file.py":line:col)`; printed with
// --print-debuginfo (ops without one print loc(unknown)) and parsed back.

// CHECK-LABEL: func.func @located
// CHECK-SAME: (%x: tensor<4xf32> loc(unknown)) -> tensor<4xf32> {
// CHECK-NEXT: %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":12:9)
// CHECK-NEXT: %1 = sf.constant dense<2.000000e+00> : tensor<4xf32> loc("/home/me/my model.py":3:1)
// CHECK-NEXT: %2 = sf.multiply %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc(unknown)
// CHECK-NEXT: func.return %2 : tensor<4xf32> loc("model.py":14:5)
// CHECK-NEXT: } loc(unknown)

// PLAIN-LABEL: func.func @located
// PLAIN-NOT: loc(
// PLAIN: func.return
func.func @located(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":12:9)
  %1 = sf.constant dense<2.0> : tensor<4xf32> loc("/home/me/my model.py":3:1)
  %2 = sf.multiply %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32> loc("model.py":14:5)
}

// An error in an op with a location is reported at that location (the user's line).
// RUN: not stageflow opt %S/Inputs/bad_located.mlir 2>&1 | filecheck %s --check-prefix=ERROR
// ERROR: stageflow opt: error: model.py:7:3: 'sf.add' op shapes (2,) and (3,) are incompatible for broadcasting
