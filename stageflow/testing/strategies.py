"""Hypothesis strategies shared by the campaigns and the test suite."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def axes(draw, ndim: int, allow_none: bool = True):
    """An `axis` argument for a rank-`ndim` tensor: None, an int or a tuple (negatives too)."""
    choices = ["tuple"]
    if allow_none:
        choices.append("none")
    if ndim:
        choices.append("int")
    kind = draw(st.sampled_from(choices))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if draw(st.booleans()) else a for a in chosen)
