"""The values a compiled function computes from variables it never writes, kept between
calls while those variables keep their values (the `hoist-invariant` pass made them the
results of a partner function).

A variable's value is an array that no one writes in place: eager assignments, compiled
calls and restores all replace it with a new one (`Variable._store`, `CompiledProgram`).
So "the variables hold what they held at the last call" is "each holds the same array
object", one identity test per variable, and the kept arrays (with the values they were
computed from, so that no id is reused meanwhile) are a pair swapped in one assignment:
threads calling at once see the old pair or the new one, never half of each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Run = Callable[[list[Any]], list[Any]]


class InvariantValues:
    """``values(inputs)``: the partner's results for the variables at `reads` in a call's
    `inputs`, computed again only when one of them holds a new array."""

    def __init__(self, run: Run, reads: Sequence[int]) -> None:
        self._run = run
        self._reads = tuple(reads)
        self._kept: tuple[tuple[Any, ...], list[Any]] = ((None,) * len(self._reads), [])
        self.computed = 0  # how many calls computed the values (the others reused them)

    def values(self, inputs: Sequence[Any]) -> list[Any]:
        sources, kept = self._kept
        arrays = tuple([inputs[i]._value for i in self._reads])
        if all(a is s for a, s in zip(arrays, sources, strict=True)):
            return kept
        # The partner reads the arrays just compared, not the variables, which another
        # thread may write meanwhile.
        kept = self._run([_Held(a) for a in arrays])
        self._kept = (arrays, kept)
        self.computed += 1
        return kept

    @property
    def kept_bytes(self) -> int:
        """The bytes of the values kept now (memory a call's temporaries do not count)."""
        return sum(int(getattr(value, "nbytes", 0)) for value in self._kept[1])

    def calling(self, run: Run) -> Run:
        """`run` (the function's own: arguments, captures, then the kept values) as a run
        taking a call's arguments and captures only."""

        def run_with(inputs: list[Any]) -> list[Any]:
            return run([*inputs, *self.values(inputs)])

        return run_with


class _Held:
    """A variable's value as the partner's read takes it (`_value` for a compiled program,
    `_current()` for the step plan's read): one array, fixed."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def _current(self) -> Any:
        return self._value
