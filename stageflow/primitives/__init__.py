"""The `sf` op set: every primitive with its shape rule, eager kernel, gradient and op facts,
one module per family. Importing this package imports every module of it
(`core.registration`), so `core.primitive.REGISTRY` holds every primitive from then on."""

from stageflow.core.registration import import_modules

import_modules(__name__, __path__)
