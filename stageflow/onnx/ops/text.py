"""Text featurization: TfIdfVectorizer (opset 9 on) over integer token ids.

The pool of n-grams is an attribute, so it is read at import: per n-gram length, a
(n-grams, n) table of token ids and a (n-grams, outputs) matrix placing each n-gram's count
in its output column. An n-gram of length n with skip distance s starts at each position
i with i + (n - 1) s inside the row; its count is the number of positions where all n
tokens X[i + j s] match, one comparison per token of every window with every pooled
n-gram. Unigrams are counted once (ONNX counts them at skip distance 1 only). String pools
are refused: stageflow has no string tensors.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts

_MODES = ("TF", "IDF", "TFIDF")


def _pool(node: Node, tokens: list[int], counts: list[int], columns: list[int],
          lengths: range) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The pooled n-grams by length (within `lengths`): their token ids (k, n) and output
    column of each (k,). A repeated n-gram keeps its last column, as ONNX's reference
    does."""
    found: dict[int, dict[tuple[int, ...], int]] = defaultdict(dict)
    ngram = 0
    for position, start in enumerate(counts):
        size = position + 1
        end = counts[position + 1] if position + 1 < len(counts) else len(tokens)
        if end < start or (end - start) % size:
            raise node.error(f"ngram_counts {counts} does not split the {len(tokens)} "
                             f"pooled ids into whole {size}-grams")
        for first in range(start, end, size):
            if size in lengths:
                if ngram >= len(columns):
                    raise node.error(f"ngram_indexes has {len(columns)} entries, fewer than "
                                     f"the pooled n-grams")
                found[size][tuple(tokens[first:first + size])] = columns[ngram]
            ngram += 1
    return {size: (np.array(list(grams), np.int64).reshape(len(grams), size),
                   np.array(list(grams.values()), np.int64))
            for size, grams in found.items()}


@converts("TfIdfVectorizer")
def tfidf_vectorizer(node: Node, x: Value) -> Value:
    """(C) or (B, C) token ids to (outputs) or (B, outputs) float32 n-gram counts, weighted
    as `mode` says."""
    mode = node.attr("mode")
    if mode not in _MODES:
        raise node.error(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if node.attr("pool_strings", None) is not None:
        raise node.error("pool_strings needs string tensors, which stageflow does not have; "
                         "map the strings to integer ids and pool them with pool_int64s")
    tokens = [int(t) for t in node.attr("pool_int64s")]
    counts = [int(c) for c in node.attr("ngram_counts")]
    columns = [int(c) for c in node.attr("ngram_indexes")]
    shortest, longest = node.attr("min_gram_length"), node.attr("max_gram_length")
    skips = node.attr("max_skip_count")
    if not 1 <= shortest <= longest or skips < 0:
        raise node.error(f"need 1 <= min_gram_length ({shortest}) <= max_gram_length "
                         f"({longest}) and max_skip_count ({skips}) >= 0")
    if not columns or min(columns) < 0:
        raise node.error("ngram_indexes must be nonempty and nonnegative")
    outputs = max(columns) + 1
    weights = node.attr("weights", None)
    if weights is not None and len(weights) != outputs:
        raise node.error(f"weights has {len(weights)} entries for {outputs} outputs")
    if np.dtype(x.dtype) not in (np.int32, np.int64):
        raise node.error(f"X must be int32 or int64 token ids, got {np.dtype(x.dtype)}")
    if x.ndim not in (1, 2):
        raise node.error(f"X must be (C) or (B, C), got shape {tuple(x.shape)}")
    rows = sf.expand_dims(x, 0) if x.ndim == 1 else x
    length = rows.shape[1]
    if length is None:
        raise node.error("X's last dim must be static; give the model's inputs static "
                         "shapes (sf.onnx.load(..., input_shapes={name: shape}))")
    ids = sf.cast(rows, sf.int64)
    total = None
    for size, (grams, places) in _pool(node, tokens, counts, columns,
                                       range(shortest, longest + 1)).items():
        placement = np.zeros((len(grams), outputs), np.float32)
        placement[np.arange(len(grams)), places] = 1
        for skip in range(1, (skips + 1 if size > 1 else 1) + 1):
            windows = length - (size - 1) * skip
            if windows <= 0:
                break
            matched = None
            for j in range(size):
                token = ids[:, j * skip:j * skip + windows]  # (B, windows)
                equal = sf.equal(sf.expand_dims(token, -1), grams[:, j])  # (B, windows, k)
                matched = equal if matched is None else sf.logical_and(matched, equal)
            found = sf.reduce_sum(sf.cast(matched, sf.float32), axis=1)  # (B, k)
            counted = sf.matmul(found, placement)
            total = counted if total is None else total + counted
    frequencies = sf.zeros_like(sf.cast(ids[:, :1], sf.float32)) + \
        np.zeros(outputs, np.float32) if total is None else total
    if mode == "IDF":
        frequencies = sf.cast(sf.greater(frequencies, 0.0), sf.float32)
    if mode != "TF" and weights is not None:
        frequencies = frequencies * np.asarray(weights, np.float32)
    return frequencies[0] if x.ndim == 1 else frequencies
