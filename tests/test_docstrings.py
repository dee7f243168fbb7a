"""Every public callable documents itself with an example that runs.

The issue asks that ``help(sf.nn.conv2d)`` and every public function's docstring say shapes,
dtypes and an example; this test holds the examples to account: each public callable of the
namespaces below has at least one doctest, and each doctest prints what it says it prints.
"""

from __future__ import annotations

import doctest
import inspect
from types import ModuleType

import numpy as np
import pytest

import stageflow as sf

# Every public namespace, by the name users spell it (`sf.config` is the module
# `stageflow.core.config`, the schedules `stageflow.models.schedules`).
NAMESPACES: dict[str, ModuleType] = {
    "sf": sf, "sf.math": sf.math, "sf.nn": sf.nn, "sf.linalg": sf.linalg,
    "sf.random": sf.random, "sf.losses": sf.losses, "sf.optimizers": sf.optimizers,
    "sf.optimizers.schedules": sf.optimizers.schedules, "sf.metrics": sf.metrics,
    "sf.layers": sf.layers, "sf.data": sf.data,
    "sf.data.experimental": sf.data.experimental, "sf.train": sf.train, "sf.aot": sf.aot,
    "sf.saved": sf.saved, "sf.distribute": sf.distribute, "sf.config": sf.config,
    "sf.config.experimental": sf.config.experimental,
    "sf.errors": sf.errors, "sf.summary": sf.summary,
    "sf.summary.experimental": sf.summary.experimental, "sf.keras": sf.keras,
    "sf.keras.backend": sf.keras.backend, "sf.keras.callbacks": sf.keras.callbacks,
    "sf.keras.models": sf.keras.models,
    "sf.keras.mixed_precision": sf.keras.mixed_precision,
    "sf.keras.activations": sf.keras.activations,
    "sf.keras.initializers": sf.keras.initializers, "sf.keras.utils": sf.keras.utils,
    "sf.saved_model": sf.saved_model, "sf.debugging": sf.debugging,
    "sf.profiler": sf.profiler, "sf.profiler.experimental": sf.profiler.experimental,
    "sf.nest": sf.nest, "sf.strings": sf.strings, "sf.ragged": sf.ragged, "sf.sparse": sf.sparse,
    "sf.io": sf.io,
    "sf.signal": sf.signal, "sf.io.gfile": sf.io.gfile,
    "sf.random.experimental": sf.random.experimental,
    "sf.experimental.dlpack": sf.experimental.dlpack,
    "sf.dtypes": sf.dtypes, "sf.image": sf.image, "sf.autograph": sf.autograph,
    "sf.autograph.experimental": sf.autograph.experimental,
}


def _exported(module: ModuleType) -> list[str]:
    """A namespace's public names: its `__all__`, or (for `sf` itself) every name without a
    leading underscore."""
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else [n for n in dir(module) if n[0] != "_"]


def _public(prefix: str, module: ModuleType) -> list[tuple[str, object]]:
    """The functions and classes a namespace exports, modules, dtypes and settings left
    out."""
    found = []
    for name in _exported(module):
        value = getattr(module, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            found.append((f"{prefix}.{name}", value))
    return found


def _callables() -> list[tuple[str, object]]:
    """Each public callable once, named by the first namespace that exports it."""
    seen: dict[int, tuple[str, object]] = {}
    for prefix, namespace in NAMESPACES.items():
        for name, value in _public(prefix, namespace):
            seen.setdefault(id(value), (name, value))
    return sorted(seen.values(), key=lambda item: item[0])


CALLABLES = _callables()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _examples(name: str, value: object) -> list[doctest.DocTest]:
    """The doctests of `value`'s own docstring (its methods are not part of the contract)."""
    finder = doctest.DocTestFinder(recurse=False)
    return [test for test in finder.find(value, name, globs={"sf": sf, "np": np})
            if test.examples]


def test_the_namespaces_are_covered() -> None:
    assert len(CALLABLES) > 100, "the namespaces export their callables"


@pytest.mark.parametrize(("name", "value"), CALLABLES, ids=[name for name, _ in CALLABLES])
def test_docstring_has_an_example_that_runs(name: str, value: object) -> None:
    tests = _examples(name, value)
    assert tests, f"{name}: its docstring has no '>>> ' example"
    output: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    with np.printoptions(legacy=False):
        for test in tests:
            runner.run(test, out=output.append)
    assert runner.failures == 0, "".join(output)
