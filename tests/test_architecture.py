"""The package's shape: the layer contract of `pyproject.toml` holds (`lint-imports`), no
modules of `stageflow` import each other in a cycle, and no function imports a `stageflow`
module in its body (a dependency the layer contract and readers should see at the top).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import deque
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "stageflow"


def test_layer_contract_is_kept():
    script = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(script), "--no-cache", "--no-logo"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def import_graph() -> tuple[dict[str, set[str]], grimp.ImportGraph]:
    """Who imports whom among the `stageflow` modules (a package counts as its
    `__init__`). grimp sees imports in function bodies as well as at the top; imports only
    made for type checking are left out, as they never run."""
    graph = grimp.build_graph("stageflow", exclude_type_checking_imports=True, cache_dir=None)
    modules = set(graph.modules)
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}, graph


def strongly_connected_components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; the components with a cycle in them (more than one
    module, or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in sorted(edges):
        if root in index:
            continue
        visit(root)
        work = [(root, iter(sorted(edges[root])))]
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    visit(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges[node]:
                        found.append(sorted(component))
    return found


def shortest_cycle(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module (breadth first)."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(edges[node] & members):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    raise AssertionError(f"no cycle through {start}")


def test_no_import_cycles():
    edges, graph = import_graph()
    reports = []
    for component in strongly_connected_components(edges):
        cycle = shortest_cycle(edges, component)
        steps = []
        for importer, imported in zip(cycle, cycle[1:], strict=False):
            details = graph.get_import_details(importer=importer, imported=imported)
            where = ", ".join(f"l.{d['line_number']}: {d['line_contents']}" for d in details)
            steps.append(f"    {importer} -> {imported} ({where})")
        reports.append(f"{len(component)} modules in a cycle: {', '.join(component)}\n"
                       "  for example\n" + "\n".join(steps))
    assert not reports, "import cycles in stageflow:\n" + "\n".join(reports)


def imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["." * node.level + (node.module or "")]


def is_stageflow(module: str) -> bool:
    return module.startswith(".") or module == "stageflow" or module.startswith("stageflow.")


def test_no_function_local_imports_of_stageflow():
    found: dict[tuple[str, int], tuple[str, str]] = {}  # the innermost function wins
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    modules = [m for m in imported_modules(node) if is_stageflow(m)]
                    if modules:
                        where = path.relative_to(ROOT).as_posix(), node.lineno
                        found[where] = function.name, ", ".join(modules)
    assert not found, "imports of stageflow modules inside functions (import at the top):\n" + \
        "\n".join(f"  {file}:{line} in {name}(): {modules}"
                  for (file, line), (name, modules) in sorted(found.items()))


COMPILER = ("xdsl", "llvmlite", "stageflow.ir", "stageflow.passes", "stageflow.codegen",
            "stageflow.staging")

_LOADED = """
import json
import sys
import numpy as np
import stageflow as sf
def loaded():
    return sorted(m for m in {compiler!r} if m in sys.modules)
after_import = loaded()
x = sf.constant(np.ones((8, 8), np.float32))
v = sf.Variable(np.zeros((8, 8), np.float32))
with sf.GradientTape() as tape:
    tape.watch(x)
    y = sf.reduce_sum(sf.nn.softmax(sf.matmul(x, x)) * v + sf.nn.conv2d(
        sf.reshape(x, (1, 8, 8, 1)), sf.ones((3, 3, 1, 2)), 1, "SAME")[0, :, :, 0])
tape.gradient(y, [x, v])
v.assign_add(x)
sf.Module()
after_eager = loaded()
f = sf.function(lambda a: a * 2.0)
f(x)
print(json.dumps([after_import, after_eager, loaded()]))
"""


def test_the_compiler_loads_on_first_use_not_with_the_package():
    """`import stageflow` and eager ops load neither xDSL nor LLVM nor the compiler's
    layers (`core.lazy`); the first `sf.function` loads them."""
    result = subprocess.run([sys.executable, "-c", _LOADED.format(compiler=COMPILER)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    after_import, after_eager, after_function = json.loads(result.stdout.splitlines()[-1])
    assert after_import == []
    assert after_eager == []
    assert after_function == sorted(COMPILER)
