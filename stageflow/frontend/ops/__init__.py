"""Public op functions, composed of primitives; `stageflow/__init__.py` re-exports them."""
