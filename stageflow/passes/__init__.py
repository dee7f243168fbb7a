"""Optimisation passes over the `sf` dialect, one per file, registered by name.

Each pass is an xDSL `ModulePass` with a kebab-case ``name`` and its options as dataclass
fields; `Pipeline` runs a sequence of them, verifying the IR after each, and
`DEFAULT_PIPELINE` is the compiler's. `available_passes()` lists them (and the error for an
unknown name in ``stageflow opt --passes``); each module's docstring says what its pass
does and why. Importing this package imports every module of it (`core.registration`), so
every pass is registered from then on.
"""

from stageflow.core.registration import import_modules
from stageflow.passes.pipeline import (
    DEFAULT_PIPELINE,
    IR_DUMP_HEADER,
    LIBRARY_PIPELINE,
    PTX_PIPELINE,
    PassFailure,
    PassTiming,
    Pipeline,
    format_timings,
    ir_printer,
)
from stageflow.passes.registry import (
    PassSpecError,
    available_passes,
    get_pass,
    parse_pipeline,
    register_pass,
)

import_modules(__name__, __path__)

__all__ = [
    "DEFAULT_PIPELINE",
    "PTX_PIPELINE",
    "IR_DUMP_HEADER",
    "LIBRARY_PIPELINE",
    "PassFailure",
    "PassSpecError",
    "PassTiming",
    "Pipeline",
    "available_passes",
    "format_timings",
    "get_pass",
    "ir_printer",
    "parse_pipeline",
    "register_pass",
]
