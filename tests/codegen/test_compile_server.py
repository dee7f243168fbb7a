"""The compile server: a spawned process making object code beside the JIT's own thread."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen.targets import cpu
from stageflow.codegen.targets.compile_server import CompileServer, can_serve
from stageflow.core import config
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.passes.fuse import is_kernel
from stageflow.staging.compiler import Compilation

pytestmark = pytest.mark.skipif(not can_serve(), reason="needs posix_spawn and two cores")


def _kernel():
    """The fused kernel of ``tanh(x) * 2 + x`` (its ``func.func``)."""
    concrete = sf.function(lambda x: sf.tanh(x) * 2.0 + x).get_concrete_function(
        sf.TensorSpec([None, 8]))
    compilation = Compilation.of_graphs(concrete.name, [(concrete.graph, concrete.name)])
    compilation.run_passes(DEFAULT_PIPELINE)
    return next(f for f in compilation.functions.values() if is_kernel(f))


def _ready(server: CompileServer) -> bool:
    """Whether the server said it is ready within a minute (a request before then is
    refused at once)."""
    deadline = time.monotonic() + 60
    while not server._started() and server.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.ready


def test_a_request_before_the_server_is_ready_is_refused_at_once():
    server = CompileServer(cpu.process_jit().pipeline.spec)
    job = cpu.CPUTarget().prepare_many([_kernel()]).jobs[0]
    # still importing: refused, not waited for (waiting would have made it ready)
    assert server.compile(job.text, job.level, job.codegen) is None
    assert server.alive and not server.ready
    assert _ready(server) and server.compile(job.text, job.level, job.codegen)


def test_the_server_makes_the_bytes_this_process_makes(monkeypatch):
    monkeypatch.setattr(config, "parallel_compile", True)
    jit = cpu.JIT()  # a JIT of its own, with a server (the process's may have none)
    assert jit._server is None  # started at the first module to compile, not before
    assert jit._start_server() is jit._start_server() is not None
    prepared = cpu.CPUTarget().prepare_many([_kernel()])
    job = prepared.jobs[0]
    here = jit._compile_here(job.text, job.level, job.codegen)
    assert _ready(jit._server)
    assert jit._server.compile(job.text, job.level, job.codegen) == here
    held = jit._here.acquire()  # this process busy: the next module goes to the server
    try:
        assert jit._make(job) == here
    finally:
        if held:
            jit._here.release()
    assert jit._make(job) == here and not jit._here.locked()  # made here, and let go
    kernel = prepared.finish()[0]
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(3, 8)
    np.testing.assert_allclose(kernel(x)[0], np.tanh(x) * 2 + x, rtol=1e-6)


def test_errors_answer_none_and_the_server_keeps_serving():
    server = CompileServer(cpu.process_jit().pipeline.spec)
    job = cpu.CPUTarget().prepare_many([_kernel()]).jobs[0]
    assert _ready(server)
    assert server.compile("this is not LLVM IR", 2, 3) is None
    assert server.compile(job.text, job.level, job.codegen)
    assert server.alive


def test_a_dead_server_answers_none_and_stays_dead():
    server = CompileServer(cpu.process_jit().pipeline.spec)
    os.kill(server.pid, signal.SIGKILL)
    os.waitpid(server.pid, 0)
    assert server.compile("anything", 0, 3) is None
    assert not server.alive


def test_the_server_ends_with_its_process():
    server = CompileServer(cpu.process_jit().pipeline.spec)
    os.close(server._requests)  # what the process's exit does
    _, status = os.waitpid(server.pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_a_forked_child_compiles_in_its_own_process():
    server = CompileServer(cpu.process_jit().pipeline.spec)
    child = os.fork()
    if child == 0:
        os._exit(0 if server.compile("anything", 0, 3) is None and not server.alive else 1)
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == 0
    assert server.alive


def test_a_process_whose_modules_all_hit_the_disk_cache_starts_no_server(tmp_path,
                                                                        monkeypatch):
    """The server's start-up takes a core for about a second: a process that compiles
    nothing (every module from the disk cache) runs its first calls without it."""
    monkeypatch.setattr(config, "parallel_compile", True)
    prepared = cpu.CPUTarget().prepare_many([_kernel()])
    prepared.finish()  # the process's JIT done with it (and its cache entry written)
    job = prepared.jobs[0]
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))  # empty: a miss
    first = cpu.JIT()
    code = first._object_code(job)  # a miss: compiled, stored, and the server started
    assert first._server is not None
    second = cpu.JIT()
    assert second._object_code(job) == code and second._server is None
