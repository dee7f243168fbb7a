"""AutoGraph: Python ``if``, ``while`` and ``for`` on tensors staged as `sf.cond` and
`sf.while_loop` (`transformer` rewrites the source, `operators` decide at run time,
`conversion` compiles and caches)."""

from stageflow.staging.autograph.conversion import AutographWarning, convert

__all__ = ["AutographWarning", "convert"]
