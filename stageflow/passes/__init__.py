"""Optimisation passes over the `sf` dialect, one per file, registered by name.

Each pass is an xDSL `ModulePass` with a kebab-case ``name`` and its options as dataclass
fields; `Pipeline` runs a sequence of them, verifying the IR after each, and
`DEFAULT_PIPELINE` is the compiler's. `available_passes()` lists them (and the error for an
unknown name in ``stageflow opt --passes``); each module's docstring says what its pass
does and why. Importing this package imports every pass module, which registers its pass.
"""

from stageflow.passes import (  # noqa: F401 - importing registers the passes
    cse,
    fold,
    fuse,
    inline,
    plan_buffers,
    prune,
    remat,
    simplify,
)
from stageflow.passes.pipeline import (
    DEFAULT_PIPELINE,
    IR_DUMP_HEADER,
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

__all__ = [
    "DEFAULT_PIPELINE",
    "PTX_PIPELINE",
    "IR_DUMP_HEADER",
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
