"""lit configuration: FileCheck tests of the IR, run with the interpreter that runs lit.

``stageflow`` and ``python`` in RUN lines run with ``sys.executable`` (``-m stageflow.cli``
for the former) and ``filecheck`` is the one beside it, so the tests use the same virtualenv
as lit itself without PATH setup or an installed console script. Both start in a process
forked from a server that has imported stageflow already (``forkserver.py``, started here
and gone with lit), not in a new interpreter importing it again. Run: ``lit -v lit_tests``.
"""

import atexit
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import lit.formats

# `config` is provided by lit when it executes this file.
config = globals()["config"]

config.name = "stageflow"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["Output", "Inputs", "lit.cfg.py", "forkserver.py", "__pycache__"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.test_source_root, "Output")


def word(name: str) -> str:
    """A regex for `name` as a command word, not as part of a path or a longer name."""
    return rf"(?<![\w/.-]){name}(?![\w/.-])"


python = shlex.quote(sys.executable)
server = os.path.join(config.test_source_root, "forkserver.py")
client = f"{python} -S {shlex.quote(server)}"  # -S: the client needs no site-packages
config.substitutions.append(("%python", python))
config.substitutions.append((word("stageflow"), f"{client} stageflow"))
config.substitutions.append((word("python"), f"{client} python"))
filecheck = os.path.join(os.path.dirname(sys.executable), "filecheck")
if os.path.exists(filecheck):
    config.substitutions.append((word("filecheck"), shlex.quote(filecheck)))

root = os.path.dirname(config.test_source_root)
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in (root, os.environ.get("PYTHONPATH", "")) if p
)
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
# lit keeps the cores busy with a RUN line each: a command compiles in its own process,
# without starting a compile server of its own.
config.environment["STAGEFLOW_PARALLEL_COMPILE"] = "0"

# The server gets the environment the RUN lines get (children take their client's), and
# BLAS on one thread: a server with threads could not fork safely.
socket_folder = tempfile.mkdtemp(prefix="stageflow-lit-")
socket_path = os.path.join(socket_folder, "forkserver")
_server = subprocess.Popen(
    [sys.executable, server, "serve", socket_path], stdin=subprocess.DEVNULL,
    env={**config.environment, "OPENBLAS_NUM_THREADS": "1"})
atexit.register(shutil.rmtree, socket_folder, ignore_errors=True)
atexit.register(_server.kill)
config.environment["STAGEFLOW_LIT_FORKSERVER"] = socket_path
