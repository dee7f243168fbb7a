"""Ctrl-C during a compiled loop (`runtime.interrupts`, `codegen.program.interrupts`).

A compiled `while_loop` runs inside one foreign call, where Python cannot raise
``KeyboardInterrupt``; the program's loops check a flag that a SIGINT handler of the
process sets, and stop. Each test runs a child process, sends it SIGINT while an endless
loop runs, and checks that the child gets ``KeyboardInterrupt`` soon, exactly once, with
its variables as they were before the call: for a function that is one program (its
variables assigned around the loop), one with a py_func in the loop, and one that assigns
a variable inside the loop (which runs as Python steps, and is rolled back).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import stageflow as sf
from stageflow.runtime import interrupts

ROOT = Path(__file__).resolve().parents[2]
GRACE = 10.0  # seconds a child has to stop after the signal: it stops at once, if it does
STARTUP = 120.0  # seconds a child has to import stageflow and compile its function

CHILD = textwrap.dedent("""
    import signal
    import sys
    import time

    import numpy as np
    import stageflow as sf

    # Ctrl-C raises KeyboardInterrupt, as in a terminal, even where the suite was started
    # in the background (a shell starts background jobs with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    where = sys.argv[1]  # where the variable v is updated: "around" or "inside" the loop
    v = sf.Variable(np.float32(0.0))
    w = sf.Variable(np.int64(-5))


    def same(x):
        return x


    @sf.function
    def spin(n):
        if where != "inside":
            v.assign_add(1.0)

        def body(i, s):
            if where == "inside":
                v.assign_add(1.0)
            if where == "py_func":
                s = sf.py_func(same, [s], sf.TensorSpec([], sf.float32))
            return i + 1, s * 0.5 + 1.0

        i, s = sf.while_loop(lambda i, s: (i < n) | (n < 0), body,
                             (sf.constant(np.int64(0)), sf.constant(1.0)))
        w.assign(i)  # after the loop: a program writes it when the call ends
        return s


    spin(sf.constant(np.int64(2)))  # compiled, and run to its end once
    reasons = spin.get_concrete_function(sf.constant(np.int64(2))).stats()["steps_reasons"]
    print("steps" if reasons else "program")
    print("before", float(v.numpy()), int(w.numpy()))
    print("ready", flush=True)
    try:
        spin(sf.constant(np.int64(-1)))  # endless
        print("returned")
    except KeyboardInterrupt:
        print("after", float(v.numpy()), int(w.numpy()), flush=True)
    time.sleep(0.3)  # a second KeyboardInterrupt would end the child here
    spin(sf.constant(np.int64(1)))
    print("again", float(v.numpy()), int(w.numpy()))
""")


def _interrupt_child(where: str) -> tuple[list[str], float]:
    """Run the child until its endless call runs, send SIGINT, and wait for it: its output
    lines and the seconds from the signal to its exit."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, where], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "STAGEFLOW_PARALLEL_COMPILE": "0"})
    lines = []
    assert child.stdout is not None
    watchdog = threading.Timer(STARTUP, child.kill)  # a child stuck before its loop
    watchdog.start()
    while not lines or lines[-1] != "ready":
        line = child.stdout.readline()
        if not line:
            watchdog.cancel()
            child.wait(GRACE)
            pytest.fail(f"the child ended before its loop ran: {child.stderr.read()}")
        lines.append(line.strip())
    watchdog.cancel()
    time.sleep(0.5)  # the endless call is running now
    child.send_signal(signal.SIGINT)
    sent = time.perf_counter()
    try:
        out, err = child.communicate(timeout=GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"the compiled loop ignored SIGINT for {GRACE:.0f} s")
    assert child.returncode == 0, err
    return lines + out.splitlines(), time.perf_counter() - sent


@pytest.mark.exclusive  # a child process timed against a grace period
@pytest.mark.parametrize(("where", "runs_as"), [("around", "program"),
                                                ("py_func", "program"),
                                                ("inside", "steps")])
def test_ctrl_c_stops_an_endless_compiled_loop_and_leaves_its_variables(where, runs_as):
    lines, seconds = _interrupt_child(where)
    assert lines[0] == runs_as, lines
    _, v, w = lines[1].split()
    # v and w as before the call; the next call adds 1 to v, and its loop runs once
    assert lines[3:] == [f"after {v} {w}", f"again {float(v) + 1.0} 1"], lines
    assert seconds < 5.0  # stopped, then the short call and its exit: well under this


def _loops(x, n):
    """A loop with a branch and a nested loop inside: every part of the lowering the check
    is added to."""
    def body(i, y):
        y = sf.cond(i % 3 == 0, lambda: y * 0.5, lambda: y + 1.0)
        _, y = sf.while_loop(lambda j, z: j < 2, lambda j, z: (j + 1, sf.sin(z) + z),
                             (sf.constant(0), y))
        return i + 1, y

    return sf.while_loop(lambda i, y: i < n, body, (sf.constant(0), x))[1]


def test_a_compiled_loop_gives_what_the_interpreter_gives_and_checks_the_flag():
    x = np.linspace(-1.0, 1.0, 5).astype(np.float32)
    compiled = sf.function(_loops)
    interpreted = sf.function(_loops, jit=False)
    for n in (0, 1, 7):
        np.testing.assert_allclose(compiled(x, sf.constant(n)).numpy(),
                                   interpreted(x, sf.constant(n)).numpy(), rtol=1e-6)
    program = compiled.get_concrete_function(x, sf.constant(7))._program.program
    assert program is not None, "the function is one program"
    assert program.llvm_ir.count('@"sf.interrupt.flag" monotonic') == 2  # both loops


def test_a_library_loop_references_nothing_of_the_python_process():
    """Ahead of time, the loops carry no check (`aot.library`): the object code names no
    symbol of the interrupt machinery nor of Python's API."""
    library = sf.aot.compile(sf.function(_loops), sf.TensorSpec([5], sf.float32),
                             sf.TensorSpec([], sf.int32), name="loops")
    assert b"sf.interrupt" not in library.object_code
    assert b"PyErr_CheckSignals" not in library.object_code


@pytest.mark.skipif(not interrupts.SUPPORTED, reason="no handler on this platform")
def test_a_loop_on_another_thread_is_not_stopped_by_the_flag():
    """Python raises KeyboardInterrupt in the main thread only: a program running on
    another thread sees the flag set and carries on (here set by hand, as the handler would
    set it), and the main thread's calls clear it before they run."""
    flag = interrupts._FLAG
    counted = sf.function(lambda n: sf.while_loop(lambda i: i < n, lambda i: (i + 1,),
                                                  (sf.constant(np.int64(0)),))[0])
    n = sf.constant(np.int64(200_000))
    counted(n)
    flag.value = 1
    results = []
    worker = threading.Thread(target=lambda: results.append(int(counted(n).numpy())))
    worker.start()
    worker.join()
    assert results == [200_000] and flag.value == 1
    assert int(counted(n).numpy()) == 200_000 and flag.value == 0
