// RUN: stageflow opt %s --passes inline | filecheck %s
// RUN: stageflow opt %s --passes 'inline{max-ops=12}' | filecheck %s --check-prefix=BIG

// `inline` copies callees of at most `max-ops` ops (8 by default) into their callers,
// block arguments mapped to the call's operands, and erases the callees left unreferenced,
// except the module's first function (the entry point).

// @main calls @affine (2 ops), which calls @scale (1 op): both are inlined, and both are
// erased. @big (10 ops) stays a call, unless the limit is raised. The order of the
// effects in @log_and_update is the order they had in the call.
// CHECK-LABEL: func.func @main
// CHECK-NEXT:    %c = sf.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT:    %0 = sf.multiply %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    %1 = sf.add %0, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %2 = sf.call %1 {callee = @big}
// CHECK-NEXT:    sf.print %2 {pieces = [none], sep = " "}
// CHECK-NEXT:    %3 = sf.read_variable %v
// CHECK-NEXT:    sf.assign_variable %v, %2
// CHECK-NEXT:    %4 = func.call @scale_f(%3)
// CHECK-NEXT:    func.return %4 : tensor<4xf32>
// BIG-LABEL: func.func @main
// BIG-NOT:     sf.call
// BIG:         %{{.*}} = sf.tanh
// BIG:         func.return
func.func @main(%x: tensor<4xf32>, %b: tensor<4xf32>, %v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %0 = sf.call %x, %b {callee = @affine} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.call %0 {callee = @big} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = sf.call %v, %1 {callee = @log_and_update} : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> tensor<4xf32>
  %3 = func.call @scale_f(%2) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %3 : tensor<4xf32>
}

// CHECK-NOT: func.func @affine
func.func @affine(%x: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.call %x {callee = @scale} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.add %0, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// CHECK-NOT: func.func @scale(
func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = sf.constant dense<3.0> : tensor<f32>
  %0 = sf.multiply %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @big
// BIG-NOT: func.func @big
func.func @big(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = sf.tanh %0 : (tensor<4xf32>) -> tensor<4xf32>
  %2 = sf.sin %1 : (tensor<4xf32>) -> tensor<4xf32>
  %3 = sf.cos %2 : (tensor<4xf32>) -> tensor<4xf32>
  %4 = sf.exp %3 : (tensor<4xf32>) -> tensor<4xf32>
  %5 = sf.tanh %4 : (tensor<4xf32>) -> tensor<4xf32>
  %6 = sf.sin %5 : (tensor<4xf32>) -> tensor<4xf32>
  %7 = sf.cos %6 : (tensor<4xf32>) -> tensor<4xf32>
  %8 = sf.exp %7 : (tensor<4xf32>) -> tensor<4xf32>
  %9 = sf.tanh %8 : (tensor<4xf32>) -> tensor<4xf32>
  func.return %9 : tensor<4xf32>
}

// CHECK-NOT: func.func @log_and_update
func.func @log_and_update(%v: !sf.resource<tensor<4xf32>>, %x: tensor<4xf32>) -> tensor<4xf32> {
  sf.print %x {pieces = [none], sep = " "} : (tensor<4xf32>) -> ()
  %0 = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
  func.return %0 : tensor<4xf32>
}

// `func.call` is a call too; here the callee is an external declaration: nothing to copy.
// CHECK-LABEL: func.func private @scale_f
func.func private @scale_f(tensor<4xf32>) -> tensor<4xf32>

// Functions on a call cycle are never inlined (tracing cannot produce them, text can).
// CHECK-LABEL: func.func @ping
// CHECK-NEXT:    sf.call %x {callee = @pong}
// CHECK-LABEL: func.func @pong
// CHECK-NEXT:    sf.call %x {callee = @ping}
func.func @ping(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.call %x {callee = @pong} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @pong(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = sf.call %x {callee = @ping} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// The entry point is inlined like any small function (it has 7 ops once its own calls
// are inlined) but stays, as it comes first: @main above is still there.
// CHECK-LABEL: func.func @caller
// CHECK-NEXT:    %c = sf.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NOT:     @main
// CHECK:         sf.call %{{.*}} {callee = @big}
// CHECK-NOT:     @main
// CHECK:         func.return
func.func @caller(%x: tensor<4xf32>, %b: tensor<4xf32>, %v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %0 = sf.call %x, %b, %v {callee = @main} : (tensor<4xf32>, tensor<4xf32>, !sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
