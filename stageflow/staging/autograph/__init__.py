"""AutoGraph: Python ``if``, ``while`` and ``for`` on tensors staged as `sf.cond` and
`sf.while_loop` (`transformer` rewrites the source, `operators` decide at run time,
`conversion` compiles and caches)."""

from stageflow.staging.autograph.conversion import (
    AutographWarning,
    convert,
    do_not_convert,
    to_code,
    to_graph,
)

__all__ = ["AutographWarning", "convert", "do_not_convert", "to_code", "to_graph"]
