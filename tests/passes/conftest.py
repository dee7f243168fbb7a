"""The pass tests' compiles verify the IR after every pass (``STAGEFLOW_VERIFY=each``, the
rest of the suite verifies the end of the pipeline, the default), so that a pass breaking an
invariant fails here under its own name, even where a later pass would have removed the
broken op, and the subprocesses these tests start do the same."""

from __future__ import annotations

import pytest

from stageflow.core import config


@pytest.fixture(autouse=True)
def verify_after_every_pass(monkeypatch):
    monkeypatch.setattr(config, "verify", "each")
    monkeypatch.setenv("STAGEFLOW_VERIFY", "each")
