"""The ``stageflow`` command."""

from stageflow.cli.main import main

__all__ = ["main"]
