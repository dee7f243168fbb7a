"""A second process making object code, so that one compile uses two cores.

llvmlite serialises every LLVM call of a process behind one lock, so two modules optimise
and generate code at the same time only in two processes. The server is a fresh Python
process (this file run as a script) that loads `llvm_pipeline` by its path, without
importing stageflow, and builds the JIT's target machines from its `MachineSpec`, so it
makes the bytes the JIT would. It answers requests on a pipe, one module at a time (IR
text in, object code out), and exits when the pipe closes, that is when the process that
started it ends. Inductor compiles in worker processes for the same reason.

It is spawned (``posix_spawn``: no fork handlers run, no Python state is copied), so it is
safe to start from any thread while others run: a forked server once hung the process,
forked while the main thread ran an OpenBLAS gemm whose fork handler stopped the BLAS
threads. The JIT starts it at the first module it must compile; the server says it is
ready (a byte on its replies pipe) once it has imported llvmlite and made its machines,
and a request made before then is refused at once rather than waited for: the JIT
compiles that module itself, where a small module's code takes milliseconds and the
server's start took a third of a second of a cold first call.

Any failure (the server gone or never started, an error in LLVM) answers None: the JIT
then compiles in its own process, where the error is raised as usual.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import select
import struct
import sys
import threading
import weakref
from dataclasses import asdict
from typing import Any

# request: optimisation level, code generation level, length of the IR text;
# reply: 1 with object code, 0 with an error message, then the payload's length
_REQUEST = struct.Struct("<iiQ")
_REPLY = struct.Struct("<bQ")
_READY = b"R"  # the server's first byte on its replies pipe


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class CompileServer:
    """The spawned server and the pipes to it; `compile` is safe to call from any thread."""

    def __init__(self, spec: Any) -> None:
        """Start a server making the code of `spec` (a `llvm_pipeline.MachineSpec`)."""
        server_requests, requests = os.pipe()
        replies, server_replies = os.pipe()
        try:  # the server's ends inherited (pipes are made close-on-exec), ours not
            os.set_inheritable(server_requests, True)
            os.set_inheritable(server_replies, True)
            self.pid = os.posix_spawn(sys.executable, [
                sys.executable, __file__, json.dumps(asdict(spec)), str(server_requests),
                str(server_replies)], os.environ)
        except OSError:
            os.close(requests)
            os.close(replies)
            raise
        finally:
            os.close(server_requests)
            os.close(server_replies)
        self._requests, self._replies = requests, replies
        self._lock = threading.Lock()
        self.alive = True
        self.ready = False
        os.register_at_fork(after_in_child=functools.partial(_forget, weakref.ref(self)))

    def compile(self, text: str, level: int, codegen: int) -> bytes | None:
        """The module's object code made by the server, or None if it could not."""
        with self._lock:
            if not self.alive or not self._started():
                return None
            try:
                data = text.encode()
                _write_all(self._requests, _REQUEST.pack(level, codegen, len(data)) + data)
                ok, size = _REPLY.unpack(_read_exactly(self._replies, _REPLY.size))
                payload = _read_exactly(self._replies, size)
            except (OSError, EOFError):
                self.alive = False
                return None
        return payload if ok else None

    def _started(self) -> bool:
        """Whether the server said it is ready (not waiting for it; the lock held)."""
        if not self.ready and select.select([self._replies], [], [], 0)[0]:
            try:
                self.ready = _read_exactly(self._replies, len(_READY)) == _READY
            except (OSError, EOFError):
                pass
            self.alive = self.ready  # anything but the ready byte: the server is gone
        return self.ready


def _forget(server: weakref.ref[CompileServer]) -> None:
    """In a forked child: the parent's server is not the child's (their requests would
    interleave on one pipe, and a lock a parent's thread held stays held), so the child
    compiles in its own process."""
    found = server()
    if found is not None:
        found.alive = False
        found._lock = threading.Lock()


def can_serve() -> bool:
    """Whether a server is worth starting here: POSIX spawning and more than one core."""
    return hasattr(os, "posix_spawn") and (os.cpu_count() or 1) > 1


def _serve(spec: dict[str, str], requests: int, replies: int) -> None:
    """The server's loop: `llvm_pipeline`, loaded by its path, compiling each request."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llvm_pipeline.py")
    loader = importlib.util.spec_from_file_location("stageflow_llvm_pipeline", path)
    pipeline_module = importlib.util.module_from_spec(loader)
    sys.modules[loader.name] = pipeline_module  # (dataclasses look their module up)
    loader.loader.exec_module(pipeline_module)
    pipeline = pipeline_module.Pipeline(pipeline_module.MachineSpec(**spec))
    try:
        _write_all(replies, _READY)
        while True:
            level, codegen, size = _REQUEST.unpack(_read_exactly(requests, _REQUEST.size))
            text = _read_exactly(requests, size).decode()
            try:
                ok, payload = 1, pipeline.object_code(text, level, codegen)
            except Exception as error:  # reported to the JIT, which compiles itself
                ok, payload = 0, str(error).encode()
            _write_all(replies, _REPLY.pack(ok, len(payload)) + payload)
    except (EOFError, OSError, KeyboardInterrupt):  # the JIT's process ended
        pass


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
