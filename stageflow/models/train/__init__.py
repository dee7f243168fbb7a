"""Object-graph checkpoints (`sf.train`, the paper's section 4.3).

Kept empty: `module.py` and the optimizers import `deferred` from here, and the checkpoint
modules import them, so the package itself must not import its submodules.
"""
