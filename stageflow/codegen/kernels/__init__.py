"""Fused elementwise kernels: their analysis, the lowering table (one rule per elementwise
primitive), loop nests (plain and ending in reductions) and their Python call path."""
