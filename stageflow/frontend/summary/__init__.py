"""TensorBoard summaries (`sf.summary`): writers, the summary ops, graph traces.

`writers` holds the default writer, step and recording condition; `ops` the summaries,
each a `numpy_function` that writes; `trace` the graphs of traced functions; `events` the
records in TensorBoard's format (the optional `tensorboard` package, imported when first
used); `png` the images' encoding.
"""
