"""lit configuration: FileCheck tests of the IR, run with the interpreter that runs lit.

``stageflow`` and ``python`` in RUN lines resolve to ``sys.executable`` (``-m stageflow.cli``
for the former) and ``filecheck`` to the one beside it, so the tests use the same virtualenv
as lit itself without PATH setup or an installed console script. Run: ``lit -v lit_tests``.
"""

import os
import shlex
import sys

import lit.formats

# `config` is provided by lit when it executes this file.
config = globals()["config"]

config.name = "stageflow"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["Output", "Inputs", "lit.cfg.py", "__pycache__"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.test_source_root, "Output")


def word(name: str) -> str:
    """A regex for `name` as a command word, not as part of a path or a longer name."""
    return rf"(?<![\w/.-]){name}(?![\w/.-])"


python = shlex.quote(sys.executable)
config.substitutions.append(("%python", python))
config.substitutions.append((word("stageflow"), f"{python} -m stageflow.cli"))
config.substitutions.append((word("python"), python))
filecheck = os.path.join(os.path.dirname(sys.executable), "filecheck")
if os.path.exists(filecheck):
    config.substitutions.append((word("filecheck"), shlex.quote(filecheck)))

root = os.path.dirname(config.test_source_root)
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in (root, os.environ.get("PYTHONPATH", "")) if p
)
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
