"""The `sf` op set: every primitive with its shape rule, eager kernel, gradient and op facts,
one module per family. Importing this package registers them all."""

from stageflow.primitives import (  # noqa: F401 - importing registers the primitives
    conv,
    elementwise,
    factorizations,
    functional,
    linalg,
    random,
    reduction,
    selection,
    sorting,
    special,
    state,
    structural,
)
