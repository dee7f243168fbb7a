"""Every table filled by its package's modules is complete once that package is imported,
and only then: nothing is registered by accident of what else was imported.

Each package (`stageflow.primitives`, `stageflow.passes`, `stageflow.codegen.lowered`)
imports every one of its modules (`core.registration`), and `sf.math` every module of
`stageflow.frontend.ops`, where its ops are marked. The test imports each of them alone, in
a process where `stageflow/__init__.py` has not run (so none of its imports can fill a
table), and reads the table; then, in another process, it imports `stageflow` and every
module file of it, and reads the tables again: they must be the same. The first process
also shows that every module file of the package was imported, and that registering the
primitives and the ops of `sf.math` loads no part of the compiler.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "stageflow"

# table -> (the module imported, the package whose modules fill the table, the expression
# reading the table once the module is imported), layer by layer from the bottom: the op
# set's tables are read before anything of the compiler is imported
TABLES = {
    "primitives": ("stageflow.primitives", "stageflow.primitives",
                   "sorted(sys.modules['stageflow.core.primitive'].REGISTRY)"),
    "math": ("stageflow.math", "stageflow.frontend.ops", "sys.modules['stageflow.math'].__all__"),
    "passes": ("stageflow.passes", "stageflow.passes",
               "sorted(sys.modules['stageflow.passes'].available_passes())"),
    "lowered": ("stageflow.codegen.lowered", "stageflow.codegen.lowered",
                "sorted(p.name for p in sys.modules['stageflow.codegen.lowered.rule'].RULES)"),
}
COMPILER = ("xdsl", "llvmlite", "stageflow.ir", "stageflow.passes", "stageflow.codegen")

_ALONE = """
import importlib, json, sys, types
package = types.ModuleType("stageflow")
package.__path__ = [{root!r}]
sys.modules["stageflow"] = package  # stageflow/__init__.py does not run
report = {{}}
for table, (name, package, read) in {tables!r}.items():
    importlib.import_module(name)
    report[table] = {{
        "entries": eval(read),
        "modules": sorted(m for m in sys.modules if m.startswith(package + ".")),
        "compiler": sorted(m for m in {compiler!r} if m in sys.modules),
    }}
print(json.dumps(report))
"""

_EVERYTHING = """
import importlib, json, sys
import stageflow
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps({{table: eval(read) for table, (_, _, read) in {tables!r}.items()}}))
"""


def module_names(directory: Path) -> list[str]:
    """The dotted name of every module file under `directory` (packages by their own)."""
    names = []
    for path in sorted(directory.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def run(script: str) -> dict:
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def alone() -> dict:
    return run(_ALONE.format(root=str(PACKAGE), tables=TABLES, compiler=COMPILER))


@pytest.fixture(scope="module")
def everything() -> dict:
    return run(_EVERYTHING.format(modules=module_names(PACKAGE), tables=TABLES))


@pytest.mark.parametrize("table", list(TABLES))
def test_a_package_alone_fills_its_table_completely(table: str, alone: dict,
                                                    everything: dict) -> None:
    assert alone[table]["entries"], f"importing {TABLES[table][0]} registered nothing"
    assert alone[table]["entries"] == everything[table]


@pytest.mark.parametrize("table", list(TABLES))
def test_every_module_file_of_the_package_is_imported(table: str, alone: dict) -> None:
    name, package, _ = TABLES[table]
    files = {m for m in module_names(ROOT.joinpath(*package.split("."))) if m != package}
    missing = sorted(files - set(alone[table]["modules"]))
    assert not missing, f"importing {name} did not import {missing}"


@pytest.mark.parametrize("table", ["primitives", "math"])
def test_registering_the_op_set_loads_no_part_of_the_compiler(table: str, alone: dict) -> None:
    assert alone[table]["compiler"] == []
