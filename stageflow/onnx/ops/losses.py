"""ONNX's classification losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both pick, for each sample (N, d1, ..., dk), the input's entry at the target class along
axis 1, weigh it by the class weight and reduce ("none", "sum", or "mean": the sum over the
sum of the weights taken, so an ignored target counts neither in the sum nor in the
divisor). The pick is a select against a class range rather than a gather along axis 1,
which is a broadcast compare and a row sum; a select, unlike a one-hot product, keeps a
-inf log-probability elsewhere in the row out of the sum.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts

_REDUCTIONS = ("none", "sum", "mean")


def _negative_log_likelihood(node: Node, log_prob: Value, target: Value,
                             weight: Value | None) -> Value:
    """The loss of `log_prob` (N, C, d1, ...) at `target` (N, d1, ...), reduced."""
    reduction = node.attr("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise node.error(f"reduction must be one of {', '.join(_REDUCTIONS)}, "
                         f"got {reduction!r}")
    rank = len(log_prob.shape)
    if rank < 2 or len(target.shape) != rank - 1:
        raise node.error(f"the input must be (N, C, d1, ...) and the target (N, d1, ...); "
                         f"got shapes {tuple(log_prob.shape)} and {tuple(target.shape)}")
    classes = log_prob.shape[1]
    if classes is None:
        raise node.error("the class dimension (axis 1 of the input) must be static; give "
                         "the model's inputs static shapes (sf.onnx.load(..., "
                         "input_shapes={name: shape}))")
    ignore_index = node.attr("ignore_index", None)
    ignored = None if ignore_index is None else sf.equal(target, ignore_index)
    # An ignored target may lie outside [0, C): class 0 stands in for it, then weighs 0.
    safe = target if ignored is None else sf.where(ignored, sf.zeros_like(target), target)
    class_ids = np.arange(classes, dtype=np.dtype(target.dtype)).reshape(
        (1, classes) + (1,) * (rank - 2))
    hit = sf.equal(sf.expand_dims(safe, 1), class_ids)
    loss = -sf.reduce_sum(sf.where(hit, log_prob, sf.zeros_like(log_prob)), axis=1)
    taken = None
    if weight is not None:
        taken = sf.gather(weight, safe)
    if ignored is not None:
        kept = sf.where(ignored, sf.zeros_like(loss), sf.ones_like(loss))
        taken = kept if taken is None else taken * kept
    if taken is not None:
        loss = loss * taken
    if reduction == "none":
        return loss
    total = sf.reduce_sum(loss)
    if reduction == "sum":
        return total
    return total / sf.reduce_sum(taken) if taken is not None else sf.reduce_mean(loss)


@converts("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(node: Node, log_prob: Value, target: Value,
                                 weight: Value | None = None) -> Value:
    """The loss of log-probabilities (N, C, d1, ...) at the target classes."""
    return _negative_log_likelihood(node, log_prob, target, weight)


@converts("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(node: Node, scores: Value, labels: Value,
                               weights: Value | None = None) -> list[Value]:
    """The loss and, when the model asks for it, the log-probabilities (log_softmax over
    the class axis 1)."""
    log_prob = sf.nn.log_softmax(scores, axis=1)
    loss = _negative_log_likelihood(node, log_prob, labels, weights)
    return [loss, log_prob] if node.wants(1) else [loss]
