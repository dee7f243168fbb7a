# RUN: python %s | filecheck %s
"""An emulated launch: the PTX kernel's thread function compiled for the host, its special
registers globals of the module, set by a loop over every block and every thread of the
grid before each call; the thread function reads them where the PTX reads %ctaid.x etc."""

from stageflow.codegen.kernels.analysis import analyse
from stageflow.codegen.targets.emulated import EmulatedLaunch
from stageflow.ir import parse_module

kernel = parse_module("""
func.func @scale(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %0 = sf.multiply %x, %y : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  func.return %0 : tensor<?xf32>
}
""").ops.first

print(EmulatedLaunch().module(analyse(kernel), "scale.launch"))

# CHECK: @"scale.launch.tid.x" = internal global i32 0
# CHECK: @"scale.launch.ntid.x" = internal global i32 0
# CHECK: @"scale.launch.ctaid.x" = internal global i32 0
# CHECK: @"scale.launch.nctaid.x" = internal global i32 0

# The grid-stride loop of the PTX driver, its registers loaded from the globals:
# CHECK-LABEL: define internal void @"scale.launch.thread.run"
# CHECK: load i32, i32* @"scale.launch.ctaid.x"
# CHECK: load i32, i32* @"scale.launch.ntid.x"
# CHECK: load i32, i32* @"scale.launch.tid.x"
# CHECK: load i32, i32* @"scale.launch.nctaid.x"
# CHECK-NOT: llvm.nvvm

# The thread function checks the dims, as the PTX .entry does, then runs:
# CHECK-LABEL: define internal void @"scale.launch.thread"(ptr %"arg0", ptr %"arg1",
# CHECK-SAME: i64 %"arg0.d0", i64 %"arg1.d0", i64 %"arg2.d0")
# CHECK: call i32 @"scale.launch.thread.check"
# CHECK: call void @"scale.launch.thread.run"

# CHECK-LABEL: define void @"scale.launch"(ptr %"arg0", ptr %"arg1", ptr %"arg2",
# CHECK-SAME: i64 %"arg2.d0", i32 %"grid", i32 %"block")
# CHECK: store i32 %"grid", i32* @"scale.launch.nctaid.x"
# CHECK-NEXT: store i32 %"block", i32* @"scale.launch.ntid.x"
# CHECK: %"ctaid" = phi i64 [0, %"entry"]
# CHECK: store i32 %{{.*}}, i32* @"scale.launch.ctaid.x"
# CHECK: %"tid" = phi i64 [0, %"ctaid.body"]
# CHECK: store i32 %{{.*}}, i32* @"scale.launch.tid.x"
# CHECK-NEXT: call void @"scale.launch.thread"(ptr %"arg0", ptr %"arg1", ptr %"arg2",
# CHECK-SAME: i64 %"arg2.d0")
