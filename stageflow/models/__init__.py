"""The model layer, above the compiler: modules, layers (one module per kind), losses,
metrics, optimizers and their schedules, initializers, checkpoints (`train`) and composites,
the layers' computations that eager execution runs as one compiled call."""
