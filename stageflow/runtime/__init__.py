"""Execution: the eager executor now; compiled executables and devices later."""
