// RUN: stageflow opt %s --passes schedule | filecheck %s

// `schedule`: a py_func marked "early" (it starts background work: a bucket's all-reduce)
// runs as soon as what it needs is computed, before ops that only later calls need; one
// marked "late" (it waits for that work) runs after everything that does not need it.

// Two buckets of a backward pass: the first bucket's start moves above the second
// bucket's gradient (its tanh and the concat packing it); the waits sink below the loss
// the step returns, which needs neither, and what needs the first wait runs before the
// second.
// CHECK-LABEL: func.func @buckets
// CHECK-NEXT:    %g1 = sf.exp %x
// CHECK-NEXT:    %t1 = sf.py_func %g1 {func = "start#1"
// CHECK-NEXT:    %g2 = sf.tanh %g1
// CHECK-NEXT:    %flat = sf.concat %g2, %g2
// CHECK-NEXT:    %t2 = sf.py_func %flat {func = "start#3"
// CHECK-NEXT:    %loss = sf.negative %x
// CHECK-NEXT:    %r1 = sf.py_func %t1 {func = "done#2"
// CHECK-NEXT:    %u = sf.add %r1, %x
// CHECK-NEXT:    %r2 = sf.py_func %t2 {func = "done#4"
// CHECK-NEXT:    func.return %u, %r2, %loss
func.func @buckets(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>) {
  %g1 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %g2 = sf.tanh %g1 : (tensor<4xf32>) -> tensor<4xf32>
  %flat = sf.concat %g2, %g2 {axis = 0} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %t1 = sf.py_func %g1 {func = "start#1", shapes = [[]], dtypes = ["int64"], schedule = "early"} : (tensor<4xf32>) -> tensor<i64>
  %r1 = sf.py_func %t1 {func = "done#2", shapes = [[4]], dtypes = ["float32"], schedule = "late"} : (tensor<i64>) -> tensor<4xf32>
  %u = sf.add %r1, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t2 = sf.py_func %flat {func = "start#3", shapes = [[]], dtypes = ["int64"], schedule = "early"} : (tensor<8xf32>) -> tensor<i64>
  %r2 = sf.py_func %t2 {func = "done#4", shapes = [[8]], dtypes = ["float32"], schedule = "late"} : (tensor<i64>) -> tensor<8xf32>
  %loss = sf.negative %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %u, %r2, %loss : tensor<4xf32>, tensor<8xf32>, tensor<4xf32>
}

// Effects keep their order: the variable's read stays before its write, and the write
// after the wait it needs; a plain py_func (no schedule) is an effect like the others.
// CHECK-LABEL: func.func @effects
// CHECK-NEXT:    %a = sf.read_variable %v
// CHECK-NEXT:    %t = sf.py_func %a {func = "start#5"
// CHECK-NEXT:    sf.py_func %a {func = "log#7"
// CHECK-NEXT:    %r = sf.py_func %t {func = "done#6"
// CHECK-NEXT:    sf.assign_variable %v, %r
// CHECK-NEXT:    %b = sf.read_variable %v
// CHECK-NEXT:    func.return %b
func.func @effects(%v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
  %a = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  sf.py_func %a {func = "log#7", shapes = [], dtypes = []} : (tensor<4xf32>) -> ()
  %t = sf.py_func %a {func = "start#5", shapes = [[]], dtypes = ["int64"], schedule = "early"} : (tensor<4xf32>) -> tensor<i64>
  %r = sf.py_func %t {func = "done#6", shapes = [[4]], dtypes = ["float32"], schedule = "late"} : (tensor<i64>) -> tensor<4xf32>
  sf.assign_variable %v, %r : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
  %b = sf.read_variable %v : (!sf.resource<tensor<4xf32>>) -> tensor<4xf32>
  func.return %b : tensor<4xf32>
}

// Without early or late calls a block keeps its order.
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT:    %b = sf.tanh %x
// CHECK-NEXT:    %a = sf.exp %x
func.func @untouched(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %b = sf.tanh %x : (tensor<4xf32>) -> tensor<4xf32>
  %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %a, %b : tensor<4xf32>, tensor<4xf32>
}
