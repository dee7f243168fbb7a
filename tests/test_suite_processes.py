"""The suite's own process layout holds: under pytest-xdist's ``--dist loadgroup`` (pyproject's
addopts), a test marked ``xdist_group`` carries its group in its node id, which is what keeps
a group's tests in one process (pytest 9.2's node ids silently undid it: the tests ran
spread over both processes, each filling its own cache and starting its own Ray cluster)."""

from __future__ import annotations

import os

import pytest


@pytest.mark.xdist_group("layout")
def test_a_grouped_test_carries_its_group(request):
    if "PYTEST_XDIST_WORKER" not in os.environ or not request.config.getvalue("loadgroup"):
        pytest.skip("runs under pytest-xdist's --dist loadgroup (the suite's default)")
    assert request.node.nodeid.endswith("@layout"), request.node.nodeid
