"""Exceptions that are stageflow's own (shape and dtype errors are ValueError/TypeError)."""


class StagingError(Exception):
    """A symbolic tensor was asked for a concrete value while a function was being traced."""
