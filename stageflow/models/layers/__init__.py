"""Keras-style layers, one module per kind; `sf.layers` re-exports their public names."""
