"""Test programs and campaigns runnable outside the test suite (they need the test extra):
``python -m stageflow.testing.random_programs``."""
