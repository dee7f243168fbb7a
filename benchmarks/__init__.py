"""Reproducible speed and memory measurements; each script prints its figures and ratios."""
