"""`sf.summary`: TensorBoard's event files, written eagerly and from staged functions.

Exactly the public names (`__all__`) of `stageflow.frontend.summary`'s modules, where they
are defined and documented. Writing needs the `tensorboard` package
(``pip install 'stageflow[summary]'``), imported when a writer is first made.
"""

from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.summary import experimental
from stageflow.frontend.summary.ops import histogram, image, scalar, text
from stageflow.frontend.summary.trace import trace_export, trace_off, trace_on
from stageflow.frontend.summary.writers import (
    SummaryWriter,
    create_file_writer,
    create_noop_writer,
    flush,
    record_if,
    should_record_summaries,
)

__all__ = ["SummaryWriter", "create_file_writer", "create_noop_writer", "experimental", "flush",
           "histogram", "image", "record_if", "scalar", "should_record_summaries", "text",
           "trace_export", "trace_off", "trace_on"]
__dir__ = _public_dir(globals())
