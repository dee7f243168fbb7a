"""conv2d float32 on the small CIFAR ResNet's shapes: compiled against NumPy's eager kernel.

    python -m benchmarks.conv [BATCH]

For each conv of the model (32x32x3 input; 3x3 convs of 16, 32 and 64 channels, strides 1
and 2, "SAME"; 1x1 stride-2 projections) at batch 8: GFLOP/s of the forward conv, and of
its input and filter gradients together (`conv2d_input_gradient` and
`conv2d_filter_gradient`), each as a staged function compiled into one program, against
the same computation run eagerly on the NumPy kernels (pad, a window view copied once, one
matmul; eager convolutions' compiled kernels switched off) in the same process,
interleaved round by round.

Interleaved with NumPy's rounds, the compiled convolutions measure below what they reach
timed alone, back to back: 16x16x32 3x3/1 -> 32 at batch 32 ran 100-125 GFLOP/s here and
165-210 alone, 8x8x64 -> 64 105-110 against 160-172. The cause is not pinned down: it
stays with OpenBLAS single-threaded (OPENBLAS_NUM_THREADS=1), so it is not only the BLAS
threads spinning after NumPy's gemms. Read the figures as lower bounds.

Then `depthwise_conv2d` float32 on ShuffleNet's and MobileNet's 3x3 shapes ("SAME"), the
compiled op against its NumPy kernel and against the sum over the taps of strided slices
times filter rows that it replaced, staged and compiled (fastest rounds: another process
may share the cores).

Then constant filters packed at compile time (the `prepack` pass) against the same
filters passed as an argument (whose panels the gemm copies on every call), on ResNet-50's
layers at batch 1 and a BERT-base dense layer of one sequence (128 x 768 @ 768 x 3072,
which `prepack` runs as a pointwise convolution), fastest rounds.

Then pointwise convolutions of few pixels whose filters come from memory, as a model's do
on every call: `COLD_COPIES` distinct constant filters of each shape in one staged function
(ResNet-50's batch-1 7x7 layers, SqueezeNet's last layer, a BERT-base dense layer of one
sequence), against NumPy's matmul of the same operands, as many products a round (its
filters as cold), fastest rounds, the compiled rounds before NumPy's. With few pixels and
many filters the compiled conv splits its filters' panels over the cores
(`COLUMN_SPLIT_ROWS`), each core reading only its part of them.

Then BERT-base's dense layers at batch 8 (1024 rows), weights constant, against NumPy's
matmul: a product whose C is past the L2 caches, so that a tile's sums wait for C's lines
in every k chunk after the first unless they were prefetched.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_best, interleaved_medians

# (input height and width, input channels, output channels, filter size, stride)
# (input height and width, channels, stride) of 3x3 depthwise convolutions
# (input height and width, input channels, output channels, filter size) at stride 1, batch 1
PREPACKED = [(7, 512, 2048, 1), (7, 512, 512, 3), (14, 256, 1024, 1), (14, 256, 256, 3),
             (28, 128, 128, 3)]
DEPTHWISE = [(56, 112, 2), (28, 136, 1), (28, 136, 2), (14, 272, 1), (112, 32, 1)]
LAYERS = [(32, 3, 16, 3, 1), (32, 16, 16, 3, 1), (32, 16, 32, 3, 2), (16, 32, 32, 3, 1),
          (32, 16, 32, 1, 2), (16, 32, 64, 3, 2), (8, 64, 64, 3, 1), (16, 32, 64, 1, 2)]


def forward(stride: int):
    def conv(x, w):
        return sf.nn.conv2d(x, w, stride, "SAME")

    return conv


def gradients(stride: int):
    def grads(x, w, g):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = sf.nn.conv2d(x, w, stride, "SAME")
        return tape.gradient(y, [x, w], output_gradients=g)

    return grads


def loop(f, *args):
    def run(k: int) -> None:
        for _ in range(k):
            f(*args)

    return run


def layer_flops(batch: int, size: int, cin: int, cout: int, k: int, stride: int) -> int:
    """Multiply-adds times 2 of the forward conv ("SAME": the output is size / stride)."""
    out = -(-size // stride)
    return 2 * batch * out * out * cout * k * k * cin


def measure(batch: int, size: int, cin: int, cout: int, k: int, stride: int) -> dict:
    """Seconds per call of the forward conv and of its two gradients, eager and compiled."""
    rng = np.random.default_rng(0)
    x = sf.constant(rng.standard_normal((batch, size, size, cin)).astype(np.float32))
    w = sf.constant(rng.standard_normal((k, k, cin, cout)).astype(np.float32))
    out = -(-size // stride)
    g = sf.constant(rng.standard_normal((batch, out, out, cout)).astype(np.float32))
    fwd, bwd = forward(stride), gradients(stride)
    staged_fwd, staged_bwd = sf.function(fwd), sf.function(bwd)
    for f, args in ((staged_fwd, (x, w)), (staged_bwd, (x, w, g))):
        assert f.get_concrete_function(*args).stats()["steps_reasons"] == {}
    return interleaved_medians({
        "eager forward": loop(fwd, x, w), "compiled forward": loop(staged_fwd, x, w),
        "eager gradients": loop(bwd, x, w, g), "compiled gradients": loop(staged_bwd, x, w, g),
    }, rounds=7, min_time=0.1)


def main(batch: int = 8) -> dict:
    print(f"conv2d float32, batch {batch} (GFLOP/s, medians; gradients: input + filters)")
    sf.config.eager_compile = False  # the eager side is the NumPy kernels' reference
    results: dict[str, dict[str, float]] = {}
    total_flops, total_seconds = 0, {"eager": 0.0, "compiled": 0.0}
    for layer in LAYERS:
        size, cin, cout, k, stride = layer
        flops = layer_flops(batch, *layer)
        seconds = measure(batch, *layer)
        rates = {name: (flops if "forward" in name else 2 * flops) / s / 1e9
                 for name, s in seconds.items()}
        name = f"{size}x{size}x{cin} {k}x{k}/{stride} -> {cout}"
        results[name] = rates
        print(f"  {name:22s} forward {rates['compiled forward']:6.1f} "
              f"(NumPy {rates['eager forward']:5.1f}, "
              f"{seconds['eager forward'] / seconds['compiled forward']:.2f}x)  "
              f"gradients {rates['compiled gradients']:6.1f} "
              f"(NumPy {rates['eager gradients']:5.1f}, "
              f"{seconds['eager gradients'] / seconds['compiled gradients']:.2f}x)")
        total_flops += 3 * flops
        for kind in total_seconds:
            total_seconds[kind] += seconds[f"{kind} forward"] + seconds[f"{kind} gradients"]
    whole = {kind: total_flops / s / 1e9 for kind, s in total_seconds.items()}
    results["all layers"] = whole
    print(f"  all layers, forward + gradients: compiled {whole['compiled']:.1f}, "
          f"NumPy {whole['eager']:.1f} GFLOP/s, {whole['compiled'] / whole['eager']:.2f}x "
          "(float32 peak ~256; torch.compile's whole model ~90)")
    return results


def taps_sum(x, w, stride: int):
    """The decomposition `depthwise_conv2d` replaced: pad, then per tap a strided slice of
    the padded input times the tap's filter row, summed ("SAME", 3x3, multiplier 1)."""
    size = x.shape[1]
    out = -(-size // stride)
    total = (out - 1) * stride + 3 - size
    before = total // 2
    padded = sf.pad(x, [(0, 0), (before, total - before), (before, total - before), (0, 0)])
    result = None
    for a in range(3):
        for b in range(3):
            tap = padded[:, a: a + (out - 1) * stride + 1: stride,
                         b: b + (out - 1) * stride + 1: stride] * w[a, b, :, 0]
            result = tap if result is None else result + tap
    return result


def depthwise(batch: int) -> dict:
    """GFLOP/s of 3x3 depthwise convolutions: compiled, NumPy's kernel, the old taps' sum."""
    print(f"depthwise_conv2d float32 3x3 \"SAME\", batch {batch} (GFLOP/s, fastest rounds)")
    sf.config.eager_compile = False
    results: dict[str, dict[str, float]] = {}
    rng = np.random.default_rng(0)
    for size, channels, stride in DEPTHWISE:
        x = sf.constant(rng.standard_normal((batch, size, size, channels)).astype(np.float32))
        w = sf.constant(rng.standard_normal((3, 3, channels, 1)).astype(np.float32))

        def conv(x, w, stride=stride):
            return sf.nn.depthwise_conv2d(x, w, stride, "SAME")

        slices = sf.function(lambda x, w, stride=stride: taps_sum(x, w, stride))
        seconds = interleaved_best({"compiled": loop(sf.function(conv), x, w),
                                    "NumPy": loop(conv, x, w), "taps": loop(slices, x, w)},
                                   rounds=5, min_time=0.1)
        out = -(-size // stride)
        flops = 2 * batch * out * out * channels * 9
        rates = {name: flops / s / 1e9 for name, s in seconds.items()}
        name = f"{size}x{size}x{channels} /{stride}"
        results[name] = rates
        print(f"  {name:16s} compiled {rates['compiled']:6.1f}  NumPy {rates['NumPy']:5.1f}  "
              f"taps' sum {rates['taps']:5.1f}  ({seconds['taps'] / seconds['compiled']:.1f}x "
              f"faster than the taps' sum, {seconds['compiled'] * 1e6:.0f} us)")
    return results


def closed_over(op, *ws):
    """``x -> op(x, *ws)`` with `ws` NumPy arrays the function closes over: constants of
    the staged function (an argument with a default would be an input)."""
    return lambda x: op(x, *ws)


def prepacked() -> dict:
    """GFLOP/s of compiled convolutions and a dense layer whose weights are a constant of
    the function (packed at compile time) against the same weights as an argument."""
    print("constant weights packed at compile time against weights as an argument, "
          "float32, batch 1 (GFLOP/s, fastest rounds)")
    rng = np.random.default_rng(0)
    cases = []
    for size, cin, cout, k in PREPACKED:
        x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
        w = rng.standard_normal((k, k, cin, cout)).astype(np.float32)
        cases.append((f"{size}x{size}x{cin} {k}x{k} -> {cout}", x, w,
                      lambda x, w: sf.nn.conv2d(x, w, 1, "SAME"), layer_flops(1, size, cin,
                                                                            cout, k, 1)))
    a = rng.standard_normal((128, 768)).astype(np.float32)
    w = rng.standard_normal((768, 3072)).astype(np.float32)
    cases.append(("dense 128x768 @ 768x3072", a, w, sf.matmul, 2 * 128 * 768 * 3072))
    results: dict[str, dict[str, float]] = {}
    for name, x, w, op, flops in cases:
        packed = sf.function(closed_over(op, w))
        passed = sf.function(op)
        assert "prepacked" in packed.get_concrete_function(x).ir("optimized")
        seconds = interleaved_best({"packed": loop(packed, x), "argument": loop(passed, x, w)},
                                   rounds=5, min_time=0.1)
        rates = {kind: flops / s / 1e9 for kind, s in seconds.items()}
        results[name] = rates
        print(f"  {name:26s} packed {rates['packed']:6.1f}  argument {rates['argument']:6.1f}"
              f"  ({seconds['argument'] / seconds['packed']:.2f}x)")
    return results


COLD = [(7, 512, 2048), (7, 2048, 512), (13, 512, 1000)]
WARM_UP_SECONDS = 1.0  # the compile server optimises a program further after a first call


def warm_up(f, *args) -> None:
    """Call `f` for `WARM_UP_SECONDS`, so that the rounds time the program's final code."""
    end = time.perf_counter() + WARM_UP_SECONDS
    while time.perf_counter() < end:
        f(*args)
COLD_COPIES = 8  # distinct filters of a shape in one call: 32-64 MB, past the L3


def cold_filters() -> dict:
    """GFLOP/s of pointwise convolutions of few pixels whose constant filters come from
    memory, against NumPy's matmul of the same operands."""
    print(f"pointwise, few pixels, {COLD_COPIES} distinct constant filters a call (from "
          "memory), float32, batch 1 (GFLOP/s, fastest rounds)")
    rng = np.random.default_rng(0)
    cases = [(f"{size}x{size}x{cin} 1x1 -> {cout}", (1, size, size, cin), cin, cout)
             for size, cin, cout in COLD]
    cases.append(("dense 128x768 @ 768x3072", (1, 1, 128, 768), 768, 3072))
    results: dict[str, dict[str, float]] = {}
    for name, shape, cin, cout in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        filters = [rng.standard_normal((1, 1, cin, cout)).astype(np.float32)
                   for _ in range(COLD_COPIES)]
        staged = sf.function(closed_over(lambda x, *ws: [sf.nn.conv2d(x, w, 1, "VALID")
                                                         for w in ws], *filters))
        rows, matrices = x.reshape(-1, cin), [w.reshape(cin, cout) for w in filters]
        warm_up(staged, x)

        def numpy(k: int, rows=rows, matrices=matrices) -> None:
            for _ in range(k):
                for w in matrices:
                    rows @ w

        # one after the other, not interleaved: OpenBLAS's threads spin on after its gemms
        # and would take the compiled rounds' second core (see above)
        seconds = {**interleaved_best({"compiled": loop(staged, x)}, rounds=5, min_time=0.1),
                   **interleaved_best({"numpy": numpy}, rounds=5, min_time=0.1)}
        flops = COLD_COPIES * 2 * rows.shape[0] * cin * cout
        rates = {kind: flops / s / 1e9 for kind, s in seconds.items()}
        results[name] = rates
        print(f"  {name:26s} compiled {rates['compiled']:6.1f}  NumPy {rates['numpy']:6.1f}"
              f"  ({seconds['numpy'] / seconds['compiled']:.2f}x)")
    return results


DENSE = [(768, 3072), (3072, 768), (768, 2304)]  # BERT-base's dense layers
DENSE_ROWS = 1024  # batch 8 of 128 tokens: C of 3-12 MB, past the L2 caches


def dense_rows() -> dict:
    """GFLOP/s of BERT-base's dense layers at batch 8 (`DENSE_ROWS` rows), weights constant
    (packed at compile time), against NumPy's matmul of the same operands, fastest rounds,
    the compiled rounds before NumPy's (OpenBLAS's threads spin on after its gemms).
    ``OMP_NUM_THREADS=1`` bounds both to one core."""
    print(f"dense layers, {DENSE_ROWS} rows, constant weights, float32 (GFLOP/s, fastest "
          "rounds)")
    rng = np.random.default_rng(0)
    results: dict[str, dict[str, float]] = {}
    for k, n in DENSE:
        a = rng.standard_normal((DENSE_ROWS, k)).astype(np.float32)
        w = (rng.standard_normal((k, n)) / 30).astype(np.float32)
        staged = sf.function(closed_over(sf.matmul, w))
        assert "prepacked" in staged.get_concrete_function(a).ir("optimized")
        warm_up(staged, a)
        seconds = {**interleaved_best({"compiled": loop(staged, a)}, rounds=5, min_time=0.1),
                   **interleaved_best({"numpy": loop(np.matmul, a, w)}, rounds=5,
                                      min_time=0.1)}
        rates = {kind: 2 * DENSE_ROWS * k * n / s / 1e9 for kind, s in seconds.items()}
        name = f"{DENSE_ROWS}x{k} @ {k}x{n}"
        results[name] = rates
        print(f"  {name:26s} compiled {rates['compiled']:6.1f}  NumPy {rates['numpy']:6.1f}"
              f"  ({seconds['numpy'] / seconds['compiled']:.2f}x)")
    return results


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:]]
    main(*arguments)
    depthwise(*arguments[:1] or [1])
    prepacked()
    cold_filters()
    dense_rows()
