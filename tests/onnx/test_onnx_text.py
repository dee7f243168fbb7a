"""sf.onnx's TfIdfVectorizer converter (`stageflow/onnx/ops/text.py`) against ONNX's NumPy
reference (ONNX Runtime for IDF and TFIDF without weights, where the reference fails)."""

from __future__ import annotations

import numpy as np
import pytest
from node_check import check, one_node_model
from onnx import helper

import stageflow as sf
from stageflow.onnx.converters import OnnxError

# three unigrams, three bigrams, two trigrams; two n-grams share output column 1
_POOL = {"ngram_counts": [0, 3, 9], "pool_int64s": [4, 1, 5, 2, 1, 4, 3, 0, 0, 1, 1, 0, 0, 1, 0],
         "ngram_indexes": [0, 1, 2, 3, 4, 5, 1, 6]}
_TOKENS = np.array([[0, 1, 0, 0, 1, 0, 4, 2, 1, 4], [3, 0, 0, 1, 1, 0, 5, 5, 4, 1]],
                   np.int32)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_modes_with_skips_and_weights(mode: str) -> None:
    weights = [0.5, 1.5, 2.0, 1.0, 0.25, 3.0, 1.25]
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=1,
                            max_gram_length=3, max_skip_count=2, weights=weights, **_POOL)
    check(node, {"x": _TOKENS}, opset=13, jits=(True,) if mode == "TFIDF" else (False,))


def test_one_row_no_weights_and_lengths_left_out() -> None:
    """A 1-D input gives a 1-D output; bigrams only (the other lengths' n-grams still take
    their ids); IDF without weights is 1 where an n-gram occurs."""
    for mode in ("TF", "IDF"):
        node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode,
                                min_gram_length=2, max_gram_length=2, max_skip_count=1,
                                **_POOL)
        check(node, {"x": _TOKENS[0].astype(np.int64)}, opset=13, jits=(False,),
              runtime=mode == "IDF")


def test_string_pool_is_refused() -> None:
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1,
                            max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                            ngram_indexes=[0], pool_strings=["a"])
    model = one_node_model(node, {"x": _TOKENS}, opset=13)
    with pytest.raises(OnnxError, match="string tensors"):
        sf.onnx.load(model, jit=False)(_TOKENS)
