"""Shared test configuration: hypothesis profiles and the import path for `strategies`.

Profiles (pick one with ``HYPOTHESIS_PROFILE=name``):

- ``ci`` (the default): derandomized, no deadline, few examples, no example database, so the
  suite is reproducible and fast on a small machine.
- ``dev``: random, more examples, for hunting bugs locally.
"""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, settings

# `import strategies` from any test module, whether or not `tests` becomes a package.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=25,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
