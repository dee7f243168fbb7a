"""The user-facing layer: tensors, the op set and its public functions."""
