"""Optimisation passes over the `sf` dialect, one per file, registered by name."""
