"""The cores' arithmetic peak: float32 fma and bfloat16 dot-product (``vdpbf16ps``)
throughput with no memory traffic, one core and all of them, in GFLOP/s.

    python -m benchmarks.peak

The physical limit the matmul and model figures are read against (issue "real-size models
and bfloat16"): a loop of independent multiply-adds on vector registers (enough chains to
hide each instruction's latency: 12 vectors of float32 sums, 16 lanes each with AVX-512,
else 8, so that they stay in AVX2's 16 registers), generated through LLVM for this CPU, run
on one thread and on one thread per core at once. A float32 fma counts 2 FLOPs a lane; a
``vdpbf16ps`` of 16 lanes multiplies and adds 32 pairs, 64 FLOPs. The bfloat16 line is left
out where the CPU has no AVX-512 BF16.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

import llvmlite.binding as llvm

from stageflow.codegen.lowered import gemm_bf16
from stageflow.codegen.targets import platform

CHAINS = 12
STEPS = 1 << 22


def lanes() -> int:
    """float32 lanes of the host's widest vector registers (16 with AVX-512; else AVX2's 8,
    whose 12 chains of 16 lanes would be 24 registers of 16, spilled in every step)."""
    return 16 if platform.host().has("avx512f") else 8


def _module(bfloat16: bool, width: int = 16) -> str:
    """``void peak(i64 steps, ptr out)``: CHAINS independent accumulators of `width`
    float32 lanes (16 for bfloat16) updated `steps` times, their sum stored (so that
    nothing is dead)."""
    count = 16 if bfloat16 else width
    vector = f"<{count} x float>"
    if bfloat16:
        op = ("call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> {acc}, "
              "<32 x bfloat> %a, <32 x bfloat> %b)")
        declare = ("declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, "
                   "<32 x bfloat>, <32 x bfloat>)")
        operands = ("  %a = bitcast <16 x i32> <" + ", ".join(["i32 1065369472"] * 16)
                    + "> to <32 x bfloat>\n  %b = bitcast <16 x i32> %x to <32 x bfloat>\n")
    else:
        op = (f"call {vector} @llvm.fma.v{width}f32({vector} %a, {vector} %b, "
              f"{vector} {{acc}})")
        declare = f"declare {vector} @llvm.fma.v{width}f32({vector}, {vector}, {vector})"
        operands = (f"  %a = bitcast <{width} x i32> %x to {vector}\n"
                    f"  %b = bitcast <{width} x i32> %x to {vector}\n")
    lines = [declare, "define void @peak(i64 %steps, ptr %out) {", "entry:",
             f"  %x = insertelement <{count} x i32> zeroinitializer, i32 1, i32 0",
             operands, "  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    for c in range(CHAINS):
        lines.append(f"  %s{c} = phi {vector} [zeroinitializer, %entry], [%n{c}, %loop]")
    for c in range(CHAINS):
        lines.append(f"  %n{c} = " + op.format(acc=f"%s{c}"))
    lines += ["  %i1 = add i64 %i, 1", "  %more = icmp ult i64 %i1, %steps",
              "  br i1 %more, label %loop, label %done", "done:"]
    total = "%n0"
    for c in range(1, CHAINS):
        lines.append(f"  %t{c} = fadd {vector} {total}, %n{c}")
        total = f"%t{c}"
    lines += [f"  store {vector} {total}, ptr %out, align 4", "  ret void", "}"]
    return "\n".join(lines)


def _compile(text: str):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    module = llvm.parse_assembly(text)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    function = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(
        engine.get_function_address("peak"))
    return engine, function


def _rate(function, threads: int, flops_per_step: int) -> float:
    """GFLOP/s of `threads` threads running the loop at once (ctypes drops the GIL)."""
    out = [(ctypes.c_float * 16)() for _ in range(threads)]
    function(1 << 16, ctypes.addressof(out[0]))  # warm up the core's clocks

    def run(k: int) -> None:
        function(STEPS, ctypes.addressof(out[k]))

    best = 0.0
    for _ in range(3):
        workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        seconds = time.perf_counter() - start
        best = max(best, threads * STEPS * CHAINS * flops_per_step / seconds / 1e9)
    return best


def main(argv: list[str] | None = None) -> dict[str, dict[int, float]]:
    cores = len(os.sched_getaffinity(0))
    width = lanes()
    kinds = [("float32 fma", False, 2 * width)]
    if gemm_bf16.host_available():
        kinds.append(("bfloat16 vdpbf16ps", True, 64))
    results: dict[str, dict[int, float]] = {}
    print(f"arithmetic peak, GFLOP/s (best of 3; {CHAINS} chains of {width}-lane float32 "
          "vectors)")
    for name, bfloat16, flops in kinds:
        engine, function = _compile(_module(bfloat16, width))
        results[name] = {threads: _rate(function, threads, flops) for threads in (1, cores)}
        del engine
        print(f"  {name:20s} 1 core {results[name][1]:7.0f}   {cores} cores "
              f"{results[name][cores]:7.0f}")
    return results


if __name__ == "__main__":
    main()
