"""The C ABI of ahead-of-time libraries under AddressSanitizer: random good and bad calls.

`sf.aot.compile` libraries are called from C, where a bad argument is a crash or a silent
write out of bounds rather than an exception. The campaign builds a few libraries
(elementwise with two outputs, a matmul and reductions over unknown dims, a variable kept
as state, a frozen one), draws random calls for each (good dims, zero dims, a matmul's
inner dim 0, NULL pointers of every kind, a NULL state, negative dims, dims whose bytes
overflow an int64 such as 2^62+1, INT64_MAX or (2^32, 2^32), dims that disagree, the
``_output_dims`` entry, the state entries) and runs them from a C driver compiled with
``-fsanitize=address,undefined`` and linked to the library. The driver allocates every
buffer with a guard zone on each side, checks the zones and the inputs after each call,
and writes return codes and outputs to a file that is compared here with the documented
codes (the header's) and with NumPy. The library itself is not instrumented: ASan and
UBSan watch the driver, and the guard zones catch the library writing outside a buffer.

    python -m stageflow.testing.aot_abi --count 2000 [--seed N]

The test suite runs a slice (``tests/testing/test_aot_abi.py``). Needs a C compiler with
the sanitizers (gcc).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.codegen.program.abi import NULL_POINTER, OP_FAILED
from stageflow.testing.campaign import add_seed, seed_of

OUTCOMES = ["calls", "documented error", "correct result", "wrong result", "guard zone",
            "asan report", "crash"]
ENTRY, OUTPUT_DIMS, STATE_VARIABLE = 0, 1, 2
HUGE = [-1, -(2 ** 40), 2 ** 62 + 1, 2 ** 63 - 1, 2 ** 61, 2 ** 32]


@dataclass
class Library:
    """A function compiled ahead of time, and what a call of it must give."""

    name: str
    function: Callable[..., Any]
    specs: list[tuple[tuple[int | None, ...], Any]]
    reference: Callable[..., list[np.ndarray]]
    state: np.ndarray | None = None  # the initial value of the one variable kept as state
    update: Callable[[np.ndarray, list[np.ndarray]], np.ndarray] | None = None
    consistent: Callable[[list[tuple[int, ...]]], bool] = lambda shapes: True
    exact: bool = True
    shapes: Callable[..., list[tuple[int, ...]]] | None = None  # output dims of input dims

    @property
    def unknown(self) -> int:
        return sum(d is None for shape, _ in self.specs for d in shape)


def libraries() -> list[Library]:
    """The libraries a campaign calls (each function made fresh: variables of its own)."""
    f32, f64 = np.float32, np.float64

    def elementwise(x, y):
        return x * 2.0 + y, x - y

    def matmul(a, b):
        return sf.matmul(a, b)

    def reductions(x):
        return sf.reduce_sum(x, axis=0), sf.reduce_max(x + 0.0, axis=1, keepdims=True)

    v = sf.Variable(np.zeros(3, f64))

    def stateful(x):
        v.assign_add(sf.reduce_sum(x, axis=0))
        return sf.reduce_sum(x, axis=1) * 2.0

    w = sf.Variable(np.arange(6, dtype=f32).reshape(3, 2))

    def frozen(x):
        return sf.matmul(x, w) + 1.0

    return [
        Library("elementwise", elementwise, [((None, 4), f32), ((4,), f32)],
                lambda x, y: [x * 2 + y, x - y], shapes=lambda x, y: [x, x]),
        Library("matmul", matmul, [((None, None), f64), ((None, None), f64)],
                lambda a, b: [a @ b], consistent=lambda s: s[0][1] == s[1][0], exact=False,
                shapes=lambda a, b: [(a[0], b[1])]),
        Library("reductions", reductions, [((None, None), f64)],
                lambda x: [x.sum(axis=0), x.max(axis=1, keepdims=True)],
                consistent=lambda s: s[0][1] > 0, exact=False,
                shapes=lambda x: [(x[1],), (x[0], 1)]),
        Library("stateful", stateful, [((None, 3), f64)], lambda x: [x.sum(axis=1) * 2],
                state=np.zeros(3, f64), update=lambda s, args: s + args[0].sum(axis=0),
                exact=False, shapes=lambda x: [(x[0],)]),
        Library("frozen", frozen, [((None, 3), f32)],
                lambda x: [x @ np.arange(6, dtype=f32).reshape(3, 2) + 1],
                shapes=lambda x: [(x[0], 2)]),
    ]


# -- the C driver ---------------------------------------------------------------------------

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "@NAME@.h"

#define ZONE 64
#define N_IN @N_IN@
#define N_OUT @N_OUT@
#define STATEFUL @STATEFUL@

/* A buffer with a guard zone on each side, filled with a pattern checked after a call. */
static unsigned char *guarded(int64_t bytes) {
    unsigned char *base = malloc((size_t)bytes + 2 * ZONE);
    if (!base) { fprintf(stderr, "driver: out of memory\n"); exit(2); }
    memset(base, 0xA5, (size_t)bytes + 2 * ZONE);
    return base + ZONE;
}
static int intact(unsigned char *p, int64_t bytes) {
    for (int i = 0; i < ZONE; i++)
        if (p[-1 - i] != 0xA5 || p[bytes + i] != 0xA5) return 0;
    return 1;
}
static int64_t next(FILE *f) {
    long long v;
    if (fscanf(f, "%lld", &v) != 1) { fprintf(stderr, "driver: bad script\n"); exit(2); }
    return (int64_t)v;
}

int main(int argc, char **argv) {
    FILE *script = fopen(argv[1], "r"), *data = fopen(argv[2], "rb");
    FILE *out = fopen(argv[3], "wb");
    if (!script || !data || !out) { fprintf(stderr, "driver: cannot open files\n"); return 2; }
#if STATEFUL
    @NAME@_state *state = @NAME@_state_new();
#endif
    int64_t kind;
    while (fscanf(script, "%lld", (long long *)&kind) == 1) {
        int64_t nulls = next(script), n_dims = next(script);
        int64_t *dims = n_dims ? (int64_t *)guarded(8 * n_dims) : NULL;
        for (int64_t i = 0; i < n_dims; i++) dims[i] = next(script);
        int32_t code = 0, ok = 1;
        if (kind == 0) {
            unsigned char *in[N_IN + 1], *copy[N_IN + 1], *outs[N_OUT + 1];
            int64_t in_bytes[N_IN + 1], out_bytes[N_OUT + 1];
            for (int i = 0; i < N_IN; i++) {
                in_bytes[i] = next(script);
                int64_t offset = next(script);
                in[i] = guarded(in_bytes[i]);
                copy[i] = malloc((size_t)in_bytes[i] + 1);
                fseek(data, offset, SEEK_SET);
                if (in_bytes[i] && fread(in[i], 1, in_bytes[i], data) != (size_t)in_bytes[i])
                    return 2;
                memcpy(copy[i], in[i], (size_t)in_bytes[i]);
            }
            for (int i = 0; i < N_OUT; i++) {
                out_bytes[i] = next(script);
                outs[i] = guarded(out_bytes[i]);
            }
            const void *inputs[N_IN + 1];
            void *outputs[N_OUT + 1];
            for (int i = 0; i < N_IN; i++)
                inputs[i] = (nulls >> 8 & 255) == i + 1 ? NULL : in[i];
            for (int i = 0; i < N_OUT; i++)
                outputs[i] = (nulls >> 16 & 255) == i + 1 ? NULL : outs[i];
            const void *const *inputs_arg = nulls & 1 ? NULL : inputs;
            const int64_t *dims_arg = nulls & 2 ? NULL : dims;
            void *const *outputs_arg = nulls & 4 ? NULL : outputs;
#if STATEFUL
            code = @NAME@(nulls & 8 ? NULL : state, inputs_arg, dims_arg, outputs_arg);
#else
            code = @NAME@(inputs_arg, dims_arg, outputs_arg);
#endif
            for (int i = 0; i < N_IN; i++) {
                ok &= intact(in[i], in_bytes[i]) && !memcmp(copy[i], in[i], (size_t)in_bytes[i]);
                free(in[i] - ZONE); free(copy[i]);
            }
            for (int i = 0; i < N_OUT; i++) ok &= intact(outs[i], out_bytes[i]);
            fwrite(&code, 4, 1, out); fwrite(&ok, 4, 1, out);
            for (int i = 0; i < N_OUT; i++) {
                if (code == 0) fwrite(outs[i], 1, (size_t)out_bytes[i], out);
                free(outs[i] - ZONE);
            }
        } else if (kind == 1) {
            int64_t count = next(script);
            int64_t *shape = (int64_t *)guarded(8 * count);
            code = @NAME@_output_dims(nulls & 2 ? NULL : dims, nulls & 4 ? NULL : shape);
            ok = intact((unsigned char *)shape, 8 * count);
            fwrite(&code, 4, 1, out); fwrite(&ok, 4, 1, out);
            if (code == 0) fwrite(shape, 8, (size_t)count, out);
            free((unsigned char *)shape - ZONE);
        } else {
#if STATEFUL
            int64_t index = next(script), bytes = next(script);
            void *value = @NAME@_state_variable(nulls & 8 ? NULL : state, (int32_t)index);
            code = value == NULL;
            fwrite(&code, 4, 1, out); fwrite(&ok, 4, 1, out);
            if (value) fwrite(value, 1, (size_t)bytes, out);
#endif
        }
        if (dims) free((unsigned char *)dims - ZONE);
        fflush(out);
    }
#if STATEFUL
    @NAME@_state_free(NULL);
    @NAME@_state_free(state);
#endif
    @NAME@_release();
    fclose(script); fclose(data); fclose(out);
    return 0;
}
"""


def driver_source(library: Library) -> str:
    return (DRIVER.replace("@NAME@", library.name).replace("@N_IN@", str(len(library.specs)))
            .replace("@N_OUT@", str(_n_outputs(library)))
            .replace("@STATEFUL@", "1" if library.state is not None else "0"))


def _n_outputs(library: Library) -> int:
    return len(library.shapes(*[tuple(d or 1 for d in spec) for spec, _ in library.specs]))


def _outputs(library: Library, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(o) for o in library.reference(*args)]


# -- calls ----------------------------------------------------------------------------------


@dataclass
class Call:
    """One call of the script, and what it must give."""

    kind: int
    text: str
    expect: int | str  # the return code, or "op" for any OP_FAILED + k
    outputs: list[np.ndarray] = field(default_factory=list)
    output_bytes: list[int] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    exact: bool = True


def _fits(shapes: list[tuple[int, ...]], library: Library) -> int:
    """0, or 1 + the first input whose dims do not fit its type (the header's rule: a
    negative unknown dim, a static one given otherwise, or more than 2^62 bytes)."""
    for index, (shape, (spec, dtype)) in enumerate(zip(shapes, library.specs, strict=True)):
        room = (1 << 62) // np.dtype(dtype).itemsize
        for size, static in zip(shape, spec, strict=True):
            if size < 0 or (static is not None and size != static) or size > room:
                return index + 1
            room = room // size if size > 0 else room
    return 0


def draw_call(library: Library, rng: random.Random, data: bytearray,
              state: list[np.ndarray]) -> Call:
    """A random call of `library`; appends its input bytes to `data`; `state[0]` is the
    variable's value as the calls so far leave it."""
    shapes = []
    for spec, _ in library.specs:
        shapes.append(tuple(d if d is not None else rng.choice([0, 1, 2, 3, 5]) for d in spec))
    if library.name == "matmul" and rng.random() < 0.7:
        shapes[1] = (shapes[0][1], shapes[1][1])  # mostly consistent; inner dim 0 included
    bad = rng.random()
    if bad < 0.2 and library.unknown:  # dims that do not fit
        index = rng.randrange(len(shapes))
        axes = [a for a, d in enumerate(library.specs[index][0]) if d is None]
        if axes:
            shape = list(shapes[index])
            for axis in rng.sample(axes, rng.randint(1, len(axes))):
                shape[axis] = rng.choice(HUGE)
            shapes[index] = tuple(shape)
    unknown = [d for shape, (spec, _) in zip(shapes, library.specs, strict=True)
               for d, s in zip(shape, spec, strict=True) if s is None]
    kind = rng.choice([ENTRY, ENTRY, ENTRY, OUTPUT_DIMS] +
                      ([STATE_VARIABLE] if library.state is not None else []))
    nulls = 0
    if rng.random() < 0.2:
        choices = ([1, 2, 4] if kind == ENTRY else [2, 4]) if kind != STATE_VARIABLE else [8]
        choices = [c for c in choices if c != 2 or library.unknown]
        if kind == ENTRY:
            choices += [(i + 1) << 8 for i in range(len(shapes))]
            choices += [1 << 16, 2 << 16][:_n_outputs(library)]
            if library.state is not None:
                choices.append(8)
        nulls = rng.choice(choices) if choices else 0
    fits = _fits(shapes, library)
    code: int | str = NULL_POINTER if nulls else fits or (
        0 if library.consistent(shapes) else "op")
    head = f"{kind} {nulls} {len(unknown)} {' '.join(map(str, unknown))}"
    if kind == STATE_VARIABLE:
        index = rng.choice([0, 0, 0, -1, 1, 7])
        value = state[0]
        found = index == 0 and not nulls
        return Call(kind, f"{head} {index} {value.nbytes}", 0 if found else 1,
                    [value.copy()] if found else [], exact=True)
    if code == 0 and max(d for shape in shapes for d in shape + (0,)) > 64:
        # Dims that fit their inputs but too large to allocate: their output dims, or (all
        # inputs empty) a call, which must refuse outputs of more than 2^62 bytes.
        outs = library.shapes(*shapes)
        too_big = any(_fits([o], Library("", None, [((None,) * len(o), np.float64)], None))
                      for o in outs)
        n_out = len(outs)
        if kind == ENTRY and all(0 in shape for shape in shapes) and too_big:
            inputs = " ".join(f"16 {len(data)}" for _ in shapes)
            data += bytes(16)
            return Call(kind, f"{head} {inputs} {' '.join(['16'] * n_out)}", "refused",
                        output_bytes=[16] * n_out)
        count = sum(len(o) for o in outs)
        return Call(OUTPUT_DIMS, f"{OUTPUT_DIMS}{head[1:]} {count}",
                    "refused" if too_big else 0, shapes=outs)
    if code != 0:
        ranks = [len(o) for o in library.shapes(*[(1,) * len(s) for s in shapes])]
        if kind == OUTPUT_DIMS:  # (the header documents no check of agreement here)
            return Call(kind, f"{head} {sum(ranks)}", 0 if code == "op" else code,
                        shapes=[(-1,) * r for r in ranks])
        text = " ".join(f"16 {len(data)}" for _ in shapes)
        data += bytes(16)  # what each (unread) input points to
        sizes = [16] * len(ranks)
        if code == "op":  # room for what a call that does not refuse writes
            sizes = [max(16, 8 * int(np.prod(o))) if 8 * int(np.prod(o)) <= 1 << 20 else 16
                     for o in library.shapes(*shapes)]
        return Call(kind, f"{head} {text} {' '.join(map(str, sizes))}", code,
                    output_bytes=sizes)
    args = [np.asarray(rng.choice([-2, -1, 0, 1, 2, 3]) * np.ones(shape) +
                       np.random.default_rng(rng.getrandbits(32)).integers(-3, 4, shape),
                       dtype) for shape, (_, dtype) in zip(shapes, library.specs, strict=True)]
    want = _outputs(library, args)
    if kind == OUTPUT_DIMS:
        count = sum(o.ndim for o in want)
        return Call(kind, f"{head} {count}", 0, shapes=[o.shape for o in want])
    inputs = []
    for array in args:
        inputs.append(f"{array.nbytes} {len(data)}")
        data += array.tobytes()
    if library.update is not None:
        state[0] = library.update(state[0], args)
    return Call(kind, f"{head} {' '.join(inputs)} {' '.join(str(o.nbytes) for o in want)}",
                0, want, [o.nbytes for o in want], exact=library.exact)


# -- running --------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the calls of one library did."""

    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    first: list[str] = field(default_factory=list)

    def note(self, outcome: str, text: str) -> None:
        self.outcomes[outcome] += 1
        if len(self.first) < 3:
            self.first.append(f"{outcome}: {text}")


def build(library: Library, folder: str) -> str:
    """The library saved in `folder` and its driver compiled with the sanitizers: the
    driver's path."""
    function = sf.function(library.function)
    specs = [sf.TensorSpec(list(shape), dtype) for shape, dtype in library.specs]
    artefact = sf.aot.compile(function, *specs, name=library.name,
                              freeze=library.state is None)
    artefact.save(os.path.join(folder, f"{library.name}.so"))
    source = os.path.join(folder, f"{library.name}_driver.c")
    with open(source, "w", encoding="utf-8") as file:
        file.write(driver_source(library))
    driver = os.path.join(folder, f"{library.name}_driver")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise RuntimeError("the AOT ABI campaign needs a C compiler with the sanitizers (gcc)")
    result = subprocess.run(
        [cc, "-g", "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
         "-fno-sanitize-recover=undefined", "-I", folder, source, "-o", driver,
         os.path.join(folder, f"{library.name}.so"), "-Wl,-rpath," + folder],
        capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"compiling the driver failed: {result.stderr}")
    return driver


def run_calls(driver: str, calls: list[Call], data: bytes, folder: str, name: str,
              timeout: float, tally: Tally) -> None:
    """Run `calls` through `driver` and tally what each gave."""
    script, data_path, out_path = (os.path.join(folder, f"{name}.{s}")
                                   for s in ("script", "data", "out"))
    with open(script, "w", encoding="utf-8") as file:
        file.write("\n".join(c.text for c in calls) + "\n")
    with open(data_path, "wb") as file:
        file.write(data)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    try:
        result = subprocess.run([driver, script, data_path, out_path], capture_output=True,
                                text=True, timeout=timeout, env=env)
        status, stderr = result.returncode, result.stderr
    except subprocess.TimeoutExpired:
        status, stderr = -9, f"no result after {timeout} s"
    out = b""
    if os.path.exists(out_path):  # (a driver dying before it opens its files leaves none)
        with open(out_path, "rb") as file:
            out = file.read()
    at = 0
    for number, call in enumerate(calls):
        if at + 8 > len(out):  # the driver died during this call
            tally.outcomes["calls"] += 1
            report = "AddressSanitizer" in stderr or "runtime error" in stderr
            tally.note("asan report" if report else "crash",
                       f"call {number} `{call.text}`: status {status}: {stderr[-1500:]}")
            return
        code, ok = struct.unpack_from("<ii", out, at)
        at += 8
        tally.outcomes["calls"] += 1
        got: list[np.ndarray] = []
        if code == 0 and call.kind == ENTRY:
            offset = at
            for want in call.outputs:
                got.append(np.frombuffer(out, want.dtype, want.size, offset).reshape(want.shape))
                offset += want.nbytes
            at += sum(call.output_bytes)
        elif code == 0 and call.kind == OUTPUT_DIMS:
            count = sum(len(s) for s in call.shapes)
            got = [np.frombuffer(out, np.int64, count, at)]
            at += 8 * count
        elif code == 0 and call.kind == STATE_VARIABLE:
            got = [np.frombuffer(out, call.outputs[0].dtype, call.outputs[0].size, at)]
            at += call.outputs[0].nbytes
        text = f"call {number} `{call.text}`"
        if not ok:
            tally.note("guard zone", f"{text}: wrote outside a buffer or into an input")
        elif (call.expect == "op" and code >= OP_FAILED or code == call.expect != 0
              or call.expect == "refused" and code != 0):
            tally.note("documented error", f"{text}: {code}")
        elif code != call.expect:
            tally.note("wrong result", f"{text}: returned {code}, documented {call.expect}")
        elif call.kind == OUTPUT_DIMS:
            want = np.array([d for s in call.shapes for d in s], np.int64)
            right = np.array_equal(got[0], want) or (want == -1).all()
            tally.note("correct result" if right else "wrong result", f"{text}: dims {got[0]}")
        else:
            right = all(np.allclose(g, w, rtol=1e-12, atol=1e-12) if not call.exact else
                        np.array_equal(g, w) for g, w in zip(got, call.outputs, strict=True))
            tally.note("correct result" if right else "wrong result",
                       f"{text}: {[g.tolist() for g in got]} instead of "
                       f"{[w.tolist() for w in call.outputs]}")
    if status != 0:
        report = "AddressSanitizer" in stderr or "runtime error" in stderr
        tally.note("asan report" if report else "crash", f"after the calls: status {status}: "
                   f"{stderr[-1500:]}")


def run_campaign(count: int, campaign_seed: int, names: list[str] | None = None,
                 timeout: float = 300.0,
                 drivers: dict[str, Callable[[Library, str], str]] | None = None
                 ) -> dict[str, Tally]:
    """`count` random calls per library of `names` (default all), from `campaign_seed`;
    `drivers` replaces how a library's driver is built (default `build`)."""
    rng = random.Random(campaign_seed)
    chosen = [lib for lib in libraries() if names is None or lib.name in names]
    tallies = {lib.name: Tally() for lib in chosen}
    with tempfile.TemporaryDirectory(prefix="stageflow-aot-abi-") as folder:
        for library in chosen:
            driver = (drivers or {}).get(library.name, build)(library, folder)
            data = bytearray()
            state = [library.state.copy()] if library.state is not None else [np.zeros(0)]
            calls = [draw_call(library, rng, data, state) for _ in range(count)]
            run_calls(driver, calls, bytes(data), folder, library.name, timeout,
                      tallies[library.name])
    return tallies


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    print(title)
    print(f"  {'library':12} " + " ".join(f"{o:>16}" for o in OUTCOMES))
    for name, tally in tallies.items():
        print(f"  {name:12} " + " ".join(f"{tally.outcomes[o]:16d}" for o in OUTCOMES))
    for name, tally in tallies.items():
        for text in tally.first:
            if not text.startswith(("documented error", "correct result")):
                print(f"\n{name}: {text}")


def failures(tally: Tally) -> int:
    return sum(tally.outcomes[o] for o in OUTCOMES[3:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.aot_abi",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500, help="calls per library")
    add_seed(parser)
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()
    tallies = run_campaign(args.count, campaign_seed)
    print_table(f"AOT C ABI under ASan, seed {campaign_seed}, "
                f"{time.perf_counter() - start:.0f} s", tallies)
    return 0 if not any(failures(t) for t in tallies.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
