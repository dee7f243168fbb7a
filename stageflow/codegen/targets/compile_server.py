"""A second process making object code, so that one compile uses two cores.

llvmlite serialises every LLVM call of a process behind one lock, so two modules optimise
and generate code at the same time only in two processes. The server is forked once, by
the JIT as it is made (before any thread of stageflow calls LLVM): it inherits the
initialised LLVM and the JIT's target machines, so it makes the same bytes the process
would. It answers requests on a pipe, one module at a time (IR text in, object code out),
and exits when the pipe closes, that is when the process that forked it ends. Inductor
compiles in worker processes for the same reason.

Any failure (the server gone, an error in LLVM) answers None: the JIT then compiles in its
own process, where the error is raised as usual.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable

# request: optimisation level, code generation level, length of the IR text;
# reply: 1 with object code, 0 with an error message, then the payload's length
_REQUEST = struct.Struct("<iiQ")
_REPLY = struct.Struct("<bQ")

Compile = Callable[[str, int, int], bytes]


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


def _serve(requests: int, replies: int, compile: Compile) -> None:
    """The server's loop; it never returns into the forking process's Python stack."""
    try:
        while True:
            level, codegen, size = _REQUEST.unpack(_read_exactly(requests, _REQUEST.size))
            text = _read_exactly(requests, size).decode()
            try:
                ok, payload = 1, compile(text, level, codegen)
            except Exception as error:  # reported to the JIT, which compiles itself
                ok, payload = 0, str(error).encode()
            _write_all(replies, _REPLY.pack(ok, len(payload)) + payload)
    except BaseException:  # the pipe closed (the JIT's process ended) or a signal
        pass
    finally:
        os._exit(0)


class CompileServer:
    """The forked server and the pipes to it; `compile` is safe to call from any thread."""

    def __init__(self, compile: Compile) -> None:
        server_requests, requests = os.pipe()
        replies, server_replies = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(requests)
            os.close(replies)
            _serve(server_requests, server_replies, compile)
        os.close(server_requests)
        os.close(server_replies)
        self.pid = pid
        self._requests, self._replies = requests, replies
        self._lock = threading.Lock()
        self.alive = True

    def compile(self, text: str, level: int, codegen: int) -> bytes | None:
        """The module's object code made by the server, or None if it could not."""
        with self._lock:
            if not self.alive:
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


def can_fork() -> bool:
    """Whether a server is worth forking here: a POSIX fork and more than one core."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1
