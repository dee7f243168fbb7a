"""No module outside the op set and the dialect names an op by a string.

An op is known by its `Primitive`: code that needs one op compares the primitive object
(``op.primitive is call_p``), code that needs a property of ops reads a fact (`effects`,
`memory`, `cost`, ...). A string equal to an op's name elsewhere is how lists of op names
kept apart from the op's definition crept back in, so this test reads every module of
`stageflow` and fails on one.

The rule: a string constant of the source that equals a registered primitive's name, or
that name in the dialect (``"sf.call"``), is an op name. Docstrings are prose, and so are
the pieces of an f-string; the entries of ``__all__`` are Python names, and so is the
attribute named in ``getattr``/``hasattr``/``setattr``/``delattr``. `stageflow/primitives`
defines the ops and the dialect (`ir/dialect.py`, `ir/control.py`) defines an op class by
its name, so both are left out. Everything else is in `ALLOWED`, module by module, word by
word, with the reason, and `test_every_allowance_is_still_needed` keeps that list from
outliving what it allows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import stageflow.primitives  # noqa: F401 - registers every primitive
from stageflow.core.primitive import REGISTRY

PACKAGE = Path(__file__).resolve().parents[1] / "stageflow"
# The op set itself and the dialect's op classes, which are defined by their names.
DEFINITIONS = ("stageflow/primitives/", "stageflow/ir/dialect.py", "stageflow/ir/control.py")
ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "hasattr", "setattr", "delattr"})

# Words that name an op and, in these modules, something else.
_OTHER_MEANINGS: dict[str, tuple[str, ...]] = {
    # libm's functions and LLVM's intrinsics, called and declared by their symbols, and the
    # IRBuilder method an elementwise rule calls (``builder("add")``)
    "stageflow/codegen/kernels/rules.py": ("add", "ceil", "floor", "sqrt"),
    "stageflow/codegen/llvm/complex_math.py": ("sqrt",),
    "stageflow/codegen/llvm/mathlib.py": ("cos", "exp", "expm1", "floor", "log", "log1p",
                                          "log2", "pow", "sin", "sqrt", "tanh"),
    "stageflow/codegen/llvm/reduce.py": ("maximum", "minimum"),
    "stageflow/codegen/llvm/special.py": ("floor", "sqrt"),
    "stageflow/codegen/targets/cpu.py": ("cos", "expm1", "log1p", "pow", "sin"),
    # an LLVM atomicrmw operation (``atomic_rmw("add", ...)``)
    "stageflow/codegen/lowered/matmul.py": ("add",),
    # the names generated LLVM code gives its values and loops (``%sign``, ``slice0``)
    "stageflow/codegen/lowered/linalg.py": ("sign",),
    "stageflow/codegen/lowered/movement.py": ("slice",),
    "stageflow/codegen/lowered/sorting.py": ("gather",),
    # the public function a message names (``sf.reshape``), the Tensor methods and Python
    # operators (``__add__``) the frontend binds, a conversion's name (``complex(t)``)
    "stageflow/frontend/ops/nd_indexing.py": ("gather_nd",),
    "stageflow/frontend/ops/nn.py": ("conv2d", "depthwise_conv2d"),
    "stageflow/frontend/ops/operators.py": ("abs", "add", "argmax", "argmin", "floordiv",
                                            "matmul", "mod", "pow", "reshape", "transpose"),
    "stageflow/frontend/ops/shape.py": ("concat", "gather", "pad", "reshape", "transpose"),
    "stageflow/frontend/ops/sorting.py": ("sort",),
    "stageflow/frontend/tensor.py": ("complex",),
    # the `while` op's param holding its condition graph, and the default names of the
    # graphs of a `cond` and a `while_loop`
    "stageflow/frontend/ops/control.py": ("cond", "while"),
    "stageflow/frontend/replay.py": ("cond",),
    "stageflow/ir/from_graph.py": ("cond",),
    "stageflow/onnx/exporter.py": ("cond",),
    # ONNX's attribute values: ScatterND's reduction="add", Gelu's approximate="tanh"
    "stageflow/onnx/export_ops.py": ("add",),
    "stageflow/onnx/ops/activations.py": ("tanh",),
    # ScatterElements' and ScatterND's reduction="add", Pad's mode="constant"
    "stageflow/onnx/ops/indexing.py": ("add",),
    "stageflow/onnx/ops/shape.py": ("constant",),
    # Resize's and Upsample's nearest rounding, nearest_mode="floor"
    "stageflow/onnx/ops/spatial.py": ("floor",),
    # the activations a layer takes by name (Keras' names)
    "stageflow/models/activations.py": ("relu", "tanh"),
    "stageflow/models/layers/recurrent.py": ("tanh",),
    # Keras' merge_mode="concat" of `Bidirectional`
    "stageflow/models/layers/wrappers.py": ("concat",),
    # a saved manifest's key for a captured constant; a saved module's method
    "stageflow/saved/load.py": ("call", "constant"),
    "stageflow/saved/manifest.py": ("constant",),
    "stageflow/saved/save.py": ("constant",),
    # Python's print, a stage of the command line's timing table, a diff line's CSS class
    "stageflow/cli/opt.py": ("print",),
    "stageflow/staging/autograph/transformer.py": ("print",),
    "stageflow/staging/report.py": ("add",),
    # test programs' labels: the public functions a random program draws, an ABI test's
    # library, the kinds of a drawn change or control flow, a saved module's method
    "stageflow/testing/aot_abi.py": ("matmul",),
    "stageflow/testing/bad_inputs.py": ("add",),
    "stageflow/testing/control_programs.py": ("cond", "while"),
    # ONNX's kinds of backend test case ("real": its light models)
    "stageflow/testing/onnx_suite.py": ("real",),
    "stageflow/testing/random_ops.py": (
        "abs", "acos", "add", "asin", "atan", "ceil", "cos", "digamma", "divide", "equal",
        "erf", "erfinv", "exp", "expm1", "floor", "floordiv", "gather", "greater",
        "greater_equal", "imag", "less", "less_equal", "lgamma", "log", "log1p", "logical_and",
        "logical_not", "logical_or", "maximum", "minimum", "mod", "multiply", "negative",
        "not_equal", "pow", "real", "reciprocal", "reduce_max", "reduce_min", "reduce_prod",
        "reduce_sum", "relu", "round", "rsqrt", "sign", "sin", "sort", "sqrt", "subtract",
        "tanh"),
    "stageflow/testing/saved_dirs.py": ("call",),
}

ALLOWED = {module: frozenset(words) for module, words in _OTHER_MEANINGS.items()}


def _op_names() -> frozenset[str]:
    return frozenset(REGISTRY) | {f"sf.{name}" for name in REGISTRY}


def _not_names(tree: ast.Module) -> set[int]:
    """The ids of the string constants of `tree` that cannot be op names: docstrings,
    f-string pieces, ``__all__`` entries and the attribute of ``getattr`` and its kin."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        elif isinstance(node, ast.JoinedStr):
            found.update(id(piece) for piece in node.values)
        elif isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__"
                for target in node.targets):
            found.update(id(entry) for entry in ast.walk(node.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ATTRIBUTE_FUNCTIONS and len(node.args) >= 2):
            found.add(id(node.args[1]))
    return found


def op_names_in(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """(line, word) for each string constant of `source` that is one of `names`, in order."""
    tree = ast.parse(source)
    skipped = _not_names(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value in names and id(node) not in skipped)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).as_posix()
        if not name.startswith(DEFINITIONS):
            yield name, path


def _found() -> dict[str, list[tuple[int, str]]]:
    names = _op_names()
    return {module: op_names_in(path.read_text(), names) for module, path in _modules()}


def test_the_rule_finds_op_names_and_leaves_prose_alone() -> None:
    source = '''
"""A module about sf.call."""
__all__ = ["call"]
KIND = "call"
def f(op):
    """call"""
    if op.name == "sf.read_variable" or getattr(op, "call", None):
        return f"{op}call"
    return {"py_func": 1}
'''
    names = frozenset({"call", "py_func", "read_variable", "sf.read_variable"})
    assert op_names_in(source, names) == [(4, "call"), (7, "sf.read_variable"),
                                                (9, "py_func")]


def test_no_module_names_an_op_by_a_string() -> None:
    found = [f"{module}:{line}: {word!r}" for module, hits in _found().items()
             for line, word in hits if word not in ALLOWED.get(module, ())]
    assert not found, (
        "op names as strings (compare the primitive, `op.primitive is call_p`, or read a "
        "fact of `core.op_facts`):\n" + "\n".join(found))


def test_every_allowance_is_still_needed() -> None:
    """A word a module no longer uses leaves `ALLOWED`, so that the list only shrinks."""
    found = _found()
    unused = sorted(f"{module}: {word!r}" for module, words in ALLOWED.items() for word in words
                    if word not in {w for _, w in found.get(module, [])})
    assert not unused, "no longer in their modules: remove them from ALLOWED\n" + \
        "\n".join(unused)
