// RUN: stageflow opt %s | filecheck %s
// RUN: stageflow opt %s | stageflow opt - | filecheck %s
// RUN: stageflow opt --print-generic %s | stageflow opt - | filecheck %s
// RUN: stageflow opt --print-debuginfo %s | filecheck %s --check-prefix=LOC

// Region ops: `sf.cond` (one region per branch, no block arguments) and `sf.while` (a
// condition and a body region, both taking the loop variables), each region ending in
// `sf.yield`. Regions read values from above. Printed, parsed back and printed again
// (also through MLIR's generic form) the text is the same.

// A bool predicate selects between two regions; a branch may yield a value from above.
// CHECK-LABEL: func.func @cond
// CHECK-NEXT:    %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
// CHECK-NEXT:      %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      sf.yield %a : tensor<4xf32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %x : tensor<4xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %r : tensor<4xf32>
func.func @cond(%x: tensor<4xf32>, %p: tensor<i1>) -> tensor<4xf32> {
  %r = sf.cond %p : (tensor<i1>) -> tensor<4xf32> ({
    %a = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
    sf.yield %a : tensor<4xf32>
  }, {
    sf.yield %x : tensor<4xf32>
  })
  func.return %r : tensor<4xf32>
}

// An integer index selects among any number of regions (switch_case); branches of
// different sizes give a result with an unknown dim; several results; attributes print
// between the operands and the type.
// CHECK-LABEL: func.func @switch
// CHECK-NEXT:    %r, %s = sf.cond %i {sf.buffer = [0, 1]} : (tensor<i32>) -> (tensor<?xf32>, tensor<i32>) ({
// CHECK-NEXT:      sf.yield %x, %i : tensor<4xf32>, tensor<i32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield %y, %i : tensor<3xf32>, tensor<i32>
// CHECK-NEXT:    }, {
// CHECK-NEXT:      %c = sf.concat %x, %y {axis = 0} : (tensor<4xf32>, tensor<3xf32>) -> tensor<7xf32>
// CHECK-NEXT:      sf.yield %c, %i : tensor<7xf32>, tensor<i32>
// CHECK-NEXT:    })
func.func @switch(%x: tensor<4xf32>, %y: tensor<3xf32>, %i: tensor<i32>) -> tensor<?xf32> {
  %r, %s = sf.cond %i {sf.buffer = [0, 1]} : (tensor<i32>) -> (tensor<?xf32>, tensor<i32>) ({
    sf.yield %x, %i : tensor<4xf32>, tensor<i32>
  }, {
    sf.yield %y, %i : tensor<3xf32>, tensor<i32>
  }, {
    %c = sf.concat %x, %y {axis = 0} : (tensor<4xf32>, tensor<3xf32>) -> tensor<7xf32>
    sf.yield %c, %i : tensor<7xf32>, tensor<i32>
  })
  func.return %r : tensor<?xf32>
}

// A cond without results: only its effects matter.
// CHECK-LABEL: func.func @effects_only
// CHECK-NEXT:    sf.cond %p : (tensor<i1>) -> () ({
// CHECK-NEXT:      sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return
func.func @effects_only(%x: tensor<4xf32>, %p: tensor<i1>, %v: !sf.resource<tensor<4xf32>>) {
  sf.cond %p : (tensor<i1>) -> () ({
    sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
    sf.yield
  }, {
    sf.yield
  })
  func.return
}

// A loop: the operands are the initial loop variables (here more precise than the
// carried types, which leave the dim that changes unknown); both regions take them as
// block arguments. Nested: a cond in the body, reading a block argument and a value
// from two levels above.
// CHECK-LABEL: func.func @loop
// CHECK-NEXT:    %zero = sf.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %k, %acc = sf.while %zero, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<?xf32>) ({
// CHECK-NEXT:    ^bb0(%i: tensor<i64>, %a: tensor<?xf32>):
// CHECK-NEXT:      %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:      sf.yield %c : tensor<i1>
// CHECK-NEXT:    }, {
// CHECK-NEXT:    ^bb0(%i_1: tensor<i64>, %a_1: tensor<?xf32>):
// CHECK-NEXT:      %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:      %i1 = sf.add %i_1, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:      %even = sf.greater %i1, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:      %a1 = sf.cond %even : (tensor<i1>) -> tensor<?xf32> ({
// CHECK-NEXT:        %t = sf.tanh %a_1 : (tensor<?xf32>) -> tensor<?xf32>
// CHECK-NEXT:        sf.yield %t : tensor<?xf32>
// CHECK-NEXT:      }, {
// CHECK-NEXT:        %s = sf.slice %x {slices = [[1, none, none]]} : (tensor<4xf32>) -> tensor<3xf32>
// CHECK-NEXT:        sf.yield %s : tensor<3xf32>
// CHECK-NEXT:      })
// CHECK-NEXT:      sf.yield %i1, %a1 : tensor<i64>, tensor<?xf32>
// CHECK-NEXT:    })
// CHECK-NEXT:    func.return %acc, %k : tensor<?xf32>, tensor<i64>
// The regions' ops keep their source locations.
// LOC-LABEL: func.func @loop
// LOC:         %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1> loc("loop.py":3:7)
// LOC:         }) loc("loop.py":2:5)
func.func @loop(%x: tensor<4xf32>, %n: tensor<i64>) -> (tensor<?xf32>, tensor<i64>) {
  %zero = sf.constant dense<0> : tensor<i64>
  %k, %acc = sf.while %zero, %x : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<?xf32>) ({
  ^bb0(%i: tensor<i64>, %a: tensor<?xf32>):
    %c = sf.less %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1> loc("loop.py":3:7)
    sf.yield %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<?xf32>):
    %one = sf.constant dense<1> : tensor<i64>
    %i1 = sf.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %even = sf.greater %i1, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %a1 = sf.cond %even : (tensor<i1>) -> tensor<?xf32> ({
      %t = sf.tanh %a : (tensor<?xf32>) -> tensor<?xf32>
      sf.yield %t : tensor<?xf32>
    }, {
      %s = sf.slice %x {slices = [[1, none, none]]} : (tensor<4xf32>) -> tensor<3xf32>
      sf.yield %s : tensor<3xf32>
    })
    sf.yield %i1, %a1 : tensor<i64>, tensor<?xf32>
  }) loc("loop.py":2:5)
  func.return %acc, %k : tensor<?xf32>, tensor<i64>
}

// A loop inside a branch, carrying a variable handle's reads: no loop variables at all
// is fine too (a loop run for its effects).
// CHECK-LABEL: func.func @loop_in_branch
// CHECK-NEXT:    sf.cond %p : (tensor<i1>) -> () ({
// CHECK-NEXT:      sf.while : () -> () ({
// CHECK-NEXT:        %r = sf.read_variable %v : (!sf.resource<tensor<i64>>) -> tensor<i64>
// CHECK-NEXT:        %c = sf.less %r, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
// CHECK-NEXT:        sf.yield %c : tensor<i1>
// CHECK-NEXT:      }, {
// CHECK-NEXT:        %r_1 = sf.read_variable %v : (!sf.resource<tensor<i64>>) -> tensor<i64>
// CHECK-NEXT:        %one = sf.constant dense<1> : tensor<i64>
// CHECK-NEXT:        %r1 = sf.add %r_1, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK-NEXT:        sf.assign_variable %v, %r1 : (!sf.resource<tensor<i64>>, tensor<i64>) -> ()
// CHECK-NEXT:        sf.yield
// CHECK-NEXT:      })
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    }, {
// CHECK-NEXT:      sf.yield
// CHECK-NEXT:    })
func.func @loop_in_branch(%p: tensor<i1>, %n: tensor<i64>, %v: !sf.resource<tensor<i64>>) {
  sf.cond %p : (tensor<i1>) -> () ({
    sf.while : () -> () ({
      %r = sf.read_variable %v : (!sf.resource<tensor<i64>>) -> tensor<i64>
      %c = sf.less %r, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
      sf.yield %c : tensor<i1>
    }, {
      %r = sf.read_variable %v : (!sf.resource<tensor<i64>>) -> tensor<i64>
      %one = sf.constant dense<1> : tensor<i64>
      %r1 = sf.add %r, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
      sf.assign_variable %v, %r1 : (!sf.resource<tensor<i64>>, tensor<i64>) -> ()
      sf.yield
    })
    sf.yield
  }, {
    sf.yield
  })
  func.return
}
