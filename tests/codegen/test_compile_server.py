"""The compile server: a forked process making object code beside the JIT's own thread."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.targets import cpu
from stageflow.codegen.targets.compile_server import CompileServer, can_fork
from stageflow.core import config
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.passes.fuse import is_kernel
from stageflow.staging.compiler import Compilation

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs fork and two cores")


def _shout(text: str, level: int, codegen: int) -> bytes:
    if text == "fail":
        raise ValueError("no such module")
    return f"{text.upper()} {level} {codegen}".encode()


def test_requests_are_answered_in_order_and_errors_answer_none():
    server = CompileServer(_shout)
    assert server.compile("abc", 0, 3) == b"ABC 0 3"
    assert server.compile("x" * 300_000, 2, 0) == ("X" * 300_000 + " 2 0").encode()
    assert server.compile("fail", 0, 3) is None
    assert server.compile("still here", 1, 1) == b"STILL HERE 1 1"
    assert server.alive


def test_a_dead_server_answers_none_and_stays_dead():
    server = CompileServer(_shout)
    os.kill(server.pid, signal.SIGKILL)
    os.waitpid(server.pid, 0)
    assert server.compile("abc", 0, 3) is None
    assert not server.alive


def _kernel():
    """The fused kernel of ``tanh(x) * 2 + x`` (its ``func.func``)."""
    concrete = sf.function(lambda x: sf.tanh(x) * 2.0 + x).get_concrete_function(
        sf.TensorSpec([None, 8]))
    compilation = Compilation.of_graphs(concrete.name, [(concrete.graph, concrete.name)])
    compilation.run_passes(DEFAULT_PIPELINE)
    return next(f for f in compilation.functions.values() if is_kernel(f))


def test_the_server_makes_the_bytes_this_process_makes(monkeypatch):
    monkeypatch.setattr(config, "parallel_compile", True)
    jit = cpu.JIT()  # a JIT of its own, with a server (the process's may have none)
    assert jit._server is not None
    prepared = cpu.CPUTarget().prepare_many([_kernel()])
    job = prepared.jobs[0]
    assert jit._server.compile(job.text, job.level, job.codegen) == jit._compile_here(
        job.text, job.level, job.codegen)
    held = jit._here.acquire()  # this process busy: the next module goes to the server
    try:
        assert jit._make(job) == jit._compile_here(job.text, job.level, job.codegen)
    finally:
        if held:
            jit._here.release()
    kernel = prepared.finish()[0]
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
    np.testing.assert_allclose(kernel(x)[0], np.tanh(x) * 2 + x, rtol=1e-6)
