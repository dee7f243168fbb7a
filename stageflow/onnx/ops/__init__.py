"""The converters, one module per op family; each registers with `converters.converts`, and
importing this package imports every one of them (`core.registration`)."""

from stageflow.core.registration import import_modules

import_modules(__name__, __path__)
