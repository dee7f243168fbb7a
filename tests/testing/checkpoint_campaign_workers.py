"""A worker for the checkpoints campaign's classifier test, in a module of its own that
imports nothing of stageflow: a child of the campaign imports it to unpickle its worker, so
that the child starts in about a second and the hang's timeout can be a few seconds."""

from __future__ import annotations

import os
import time


def dies_hangs_or_is_unclear(item: tuple[str, int, str]) -> tuple[str, str]:
    """Crashes on the first case, hangs on the fourth (the last), is unclear on the second."""
    _, _, directory = item
    if directory.endswith("case0"):
        os.abort()
    if directory.endswith("case3"):
        time.sleep(600)
    if directory.endswith("case1"):
        return "unclear error", "raw builtins.KeyError: 'dtype'"
    return "restored correctly", ""
