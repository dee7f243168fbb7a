"""A warm process for lit's RUN lines: a ``stageflow`` command or a ``python SCRIPT`` run
starts in a child forked from a process that has already imported stageflow, its compiler
and the CLI, instead of in a new interpreter importing them again, which was most of a
RUN line's time.

``lit.cfg.py`` starts the server (``python forkserver.py serve SOCKET``) and points the
``stageflow`` and ``python`` substitutions at this file run as a client (``python -S
forkserver.py stageflow ARGS...``). The client sends its standard streams (as file
descriptors), working directory, environment and arguments over the socket; the server
forks a child that takes them over, runs the command as ``python -m stageflow.cli`` or
``python SCRIPT`` would, and sends back its exit status, which the client exits with.
Where no server answers (none was started, or it ended before a child took the command
over), the client runs the command in a fresh interpreter instead, as the plain
substitutions would.

The server forks only while it is its process's one thread (OpenBLAS, started with one
thread, and stageflow's worker pools start none before first use), so a child never
inherits a lock held by a thread that does not exist in it.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import signal
import socket
import struct
import sys
import threading
import traceback

SOCKET_VARIABLE = "STAGEFLOW_LIT_FORKSERVER"
# Imported before the server forks: what the RUN lines' commands and scripts load.
PRELOAD = (
    "stageflow", "stageflow.cli.main", "stageflow.cli.opt", "stageflow.cli.staging",
    "stageflow.staging.function", "stageflow.codegen.lowered.compile",
    "stageflow.runtime.compiled_program", "stageflow.aot",
)
_HEADER = struct.Struct("<Q")
_STATUS = struct.Struct("<i")
_STARTED = b"+"  # the child's first word: the command is about to run


def _receive_exactly(connection: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = connection.recv(min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# -- client -----------------------------------------------------------------------------------

def _fresh(kind: str, args: list[str]) -> None:
    """Run the command in a new interpreter (replacing this process)."""
    command = ["-m", "stageflow.cli"] if kind == "stageflow" else []
    os.execv(sys.executable, [sys.executable, *command, *args])


def client(kind: str, args: list[str]) -> int:
    if kind == "python" and (not args or args[0].startswith("-")):
        _fresh(kind, args)  # interpreter options: not a script run
    connection = socket.socket(socket.AF_UNIX)
    try:
        connection.connect(os.environ[SOCKET_VARIABLE])
    except (KeyError, OSError):
        _fresh(kind, args)
    request = json.dumps({"kind": kind, "args": args, "cwd": os.getcwd(),
                          "env": dict(os.environ)}).encode()
    try:
        socket.send_fds(connection, [_HEADER.pack(len(request))], [0, 1, 2])
        connection.sendall(request)
        _receive_exactly(connection, len(_STARTED))
    except (OSError, EOFError):  # the server is gone (or never started): nothing ran
        _fresh(kind, args)
    try:
        return _STATUS.unpack(_receive_exactly(connection, _STATUS.size))[0]
    except EOFError:
        print(f"forkserver: '{kind} {' '.join(args)}' ended without an exit status",
              file=sys.stderr)
        return 1


# -- server -----------------------------------------------------------------------------------

def _run(kind: str, args: list[str]) -> int:
    """The command's exit status, as the interpreter would give it."""
    try:
        if kind == "stageflow":
            sys.argv = ["stageflow", *args]
            return sys.modules["stageflow.cli.main"].main(args)
        script = os.path.abspath(args[0])
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except BaseException as error:  # the traceback from the script's frames on, as Python's
        frames = error.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename in (
                __file__, "<frozen runpy>"):
            frames = frames.tb_next
        traceback.print_exception(type(error), error, frames)
        return 1


def _child(connection: socket.socket) -> None:
    """Take over the client's streams, directory and environment, run its command, send
    back its status and exit (never returns)."""
    status = 1
    try:
        header, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
        request = json.loads(_receive_exactly(connection, _HEADER.unpack(header)[0]))
        connection.sendall(_STARTED)
        for fd, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",
                          buffering=1, closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        status = _run(request["kind"], request["args"])
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        try:
            connection.sendall(_STATUS.pack(status))
        finally:
            os._exit(status & 0xFF)


def serve(path: str) -> None:
    """Preload, then fork a child per connection until the process that started the server
    (lit) is gone."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)  # clients wait here while the server imports
    for name in PRELOAD:
        importlib.import_module(name)
    tasks = "/proc/self/task"  # native threads too, where the system lists them
    threads = len(os.listdir(tasks)) if os.path.isdir(tasks) else threading.active_count()
    if threads != 1:  # clients then find the socket closed and run in fresh interpreters
        sys.exit(f"forkserver: {threads} threads after the preload; forking is unsafe")
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener.settimeout(1.0)
    while os.getppid() == parent:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        connection.settimeout(None)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _child(connection)
        connection.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(client(sys.argv[1], sys.argv[2:]))
