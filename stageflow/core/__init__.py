"""The bottom layer: dtypes, shapes and types, source locations, nests, the `Primitive` with
its registry and `bind`, trace contexts, configuration and error types. It imports nothing
else from stageflow."""
