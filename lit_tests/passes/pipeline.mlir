// RUN: stageflow opt %s --passes fold,cse,prune --print-ir-after-all | filecheck %s
// RUN: stageflow opt %s --passes 'fold{max-elements=0},prune' --timing 2>&1 >/dev/null | filecheck %s --check-prefix=TIMING
// RUN: not stageflow opt %s --passes fold,bogus 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not stageflow opt %s --passes 'fold{max-elements=many}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not stageflow opt %s --passes 'fold{limit=3}' 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not stageflow opt %s --passes 'fold,,cse' 2>&1 | filecheck %s --check-prefix=SYNTAX

// `stageflow opt --passes` runs a pipeline, verifying the IR after every pass;
// `--print-ir-after-all` dumps the module after each pass under MLIR's header line, then
// the result is printed as usual; `--timing` writes a table to stderr.

// CHECK:      // -----// IR Dump After fold //----- //
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @f
// CHECK-NEXT:     %0 = sf.constant dense<5.000000e+00> : tensor<f32>
// CHECK-NEXT:     %1 = sf.exp %x
// CHECK-NEXT:     %2 = sf.exp %x
// CHECK-NEXT:     %3 = sf.negative %x
// CHECK-NEXT:     %4 = sf.add %1, %2
// CHECK-NEXT:     %5 = sf.multiply %4, %0
// CHECK:      // -----// IR Dump After cse //----- //
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @f
// CHECK-NEXT:     %0 = sf.constant dense<5.000000e+00> : tensor<f32>
// CHECK-NEXT:     %1 = sf.exp %x
// CHECK-NEXT:     %2 = sf.add %1, %1
// CHECK:      // -----// IR Dump After prune //----- //
// CHECK:      builtin.module {
// CHECK-NEXT:   func.func @f
// CHECK-NEXT:     %0 = sf.constant dense<5.000000e+00> : tensor<f32>
// CHECK-NEXT:     %1 = sf.exp %x
// CHECK-NEXT:     %2 = sf.add %1, %1
// CHECK-NEXT:     %3 = sf.multiply %2, %0
// CHECK-NEXT:     func.return %3
// CHECK-NOT:  IR Dump

// TIMING:      pass {{ +}}wall ms  verify ms      %
// TIMING-NEXT: parse
// TIMING-NEXT: print
// TIMING-NEXT: fold
// TIMING-NEXT: prune
// TIMING-NEXT: total

// UNKNOWN: stageflow opt: error: unknown pass 'bogus' (available: {{.*}}cse, fold, fuse, {{.*}}inline, {{.*}}prune, {{.*}}simplify{{.*}})
// OPTION: stageflow opt: error: option 'max-elements' of pass 'fold' takes an integer, got 'many'
// NAME: stageflow opt: error: pass 'fold' has no option 'limit' (options: max-elements)
// SYNTAX: stageflow opt: error: bad pass pipeline 'fold,,cse' at column 6: expected pass name here

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = sf.constant dense<2.0> : tensor<f32>
  %b = sf.constant dense<3.0> : tensor<f32>
  %0 = sf.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %1 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %2 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %3 = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
  %4 = sf.add %1, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = sf.multiply %4, %0 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %5 : tensor<4xf32>
}
