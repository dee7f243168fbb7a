// RUN: stageflow opt %s | filecheck %s

// matmul: batched, broadcasting leading dims, optional transposes, dynamic dims allowed
// anywhere (the verifier only rejects contracting dims that are known and differ).

// CHECK-LABEL: func.func @dense
func.func @dense(%x: tensor<?x784xf32>, %w: tensor<784x128xf32>) -> tensor<?x128xf32> {
  // CHECK-NEXT: %0 = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x784xf32>, tensor<784x128xf32>) -> tensor<?x128xf32>
  %0 = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x784xf32>, tensor<784x128xf32>) -> tensor<?x128xf32>
  func.return %0 : tensor<?x128xf32>
}

// CHECK-LABEL: func.func @batched_transposed
func.func @batched_transposed(%a: tensor<?x3x?x5xf64>, %b: tensor<7x5xf64>) -> tensor<?x3x?x7xf64> {
  // CHECK-NEXT: %0 = sf.matmul %a, %b {transpose_a = false, transpose_b = true} : (tensor<?x3x?x5xf64>, tensor<7x5xf64>) -> tensor<?x3x?x7xf64>
  // CHECK-NEXT: %1 = sf.matmul %a, %a {transpose_a = true, transpose_b = false} : (tensor<?x3x?x5xf64>, tensor<?x3x?x5xf64>) -> tensor<?x3x5x5xf64>
  %0 = sf.matmul %a, %b {transpose_a = false, transpose_b = true} : (tensor<?x3x?x5xf64>, tensor<7x5xf64>) -> tensor<?x3x?x7xf64>
  %1 = sf.matmul %a, %a {transpose_a = true, transpose_b = false} : (tensor<?x3x?x5xf64>, tensor<?x3x?x5xf64>) -> tensor<?x3x5x5xf64>
  func.return %0 : tensor<?x3x?x7xf64>
}

// A result type that is more static than the inference (a ? where the rule knows 128) is
// accepted: declared and inferred dims only have to agree where both are known.
// CHECK-LABEL: func.func @refined
func.func @refined(%x: tensor<?x784xf32>, %w: tensor<784x?xf32>) -> tensor<32x128xf32> {
  // CHECK-NEXT: sf.matmul %x, %w {{.*}} -> tensor<32x128xf32>
  %0 = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x784xf32>, tensor<784x?xf32>) -> tensor<32x128xf32>
  func.return %0 : tensor<32x128xf32>
}
