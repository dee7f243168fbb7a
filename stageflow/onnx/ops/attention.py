"""ONNX's attention ops: Attention (opsets 23 to 25), RotaryEmbedding (opset 23) and
LinearAttention (opset 27).

Attention is scaled dot-product attention over (batch, heads, sequence, head size) tensors,
or (batch, sequence, hidden) ones split into heads by `q_num_heads`/`kv_num_heads`, with a
key/value cache (`past_key`/`past_value` concatenated in front, the result the `present_*`
outputs) and an additive bias composed, as ONNX's reference does, of the mask (a bool mask
becomes 0 / -inf), the bottom-right causal frontier, the sliding window and the padding of
`nonpad_kv_seqlen`. Grouped-query heads share their key/value head through a broadcasting
matmul over (batch, kv heads, group, ...) rather than a copy of the keys per query head. A
query row whose bias masks every key gives zeros, not NaN, as the spec asks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import stageflow as sf
from stageflow.core.dtypes import is_floating
from stageflow.onnx import dtypes
from stageflow.onnx.converters import Node, Value, converts

_QK_MODES = (0, 1, 2, 3)


def _static(node: Node, dims: Sequence[int | None], what: str) -> tuple[int, ...]:
    """`dims` (a shape) where each is known; an error naming `what` otherwise."""
    if any(d is None for d in dims):
        raise node.error(f"{what} must be static, got shape {tuple(dims)}; give the model's "
                         f"inputs static shapes (sf.onnx.load(..., input_shapes={{name: "
                         f"shape}}))")
    return tuple(int(d) for d in dims)


def _reshape(node: Node, x: Value, dims: Sequence[int | None]) -> Value:
    """`x` reshaped to `dims`, where one unknown dim (the batch, mostly) is inferred."""
    if sum(d is None for d in dims) > 1:
        raise node.error(f"reshaping to {tuple(dims)} needs all but one of those dims "
                         f"static; give the model's inputs static shapes (sf.onnx.load(..., "
                         f"input_shapes={{name: shape}}))")
    return sf.reshape(x, tuple(-1 if d is None else d for d in dims))


def _split_heads(node: Node, x: Value, heads: int) -> Value:
    """(batch, sequence, heads * size) as (batch, heads, sequence, size)."""
    batch, length, hidden = x.shape
    hidden = _static(node, (hidden,), "the hidden size of a 3-D Q, K or V")[0]
    if hidden % heads:
        raise node.error(f"the hidden size {hidden} is not a multiple of the {heads} heads")
    return sf.transpose(_reshape(node, x, (batch, length, heads, hidden // heads)),
                        (0, 2, 1, 3))


def _grouped_matmul(node: Node, a: Value, b: Value, transpose_b: bool) -> Value:
    """a (batch, q heads, m, k) @ b (batch, kv heads, k, n) (or b^T), each kv head serving
    q heads / kv heads consecutive query heads (ONNX's repeat of the kv heads)."""
    batch, q_heads, rows, inner = a.shape
    kv_heads = b.shape[1]
    if q_heads == kv_heads:
        return sf.matmul(a, b, transpose_b=transpose_b)
    group = q_heads // kv_heads
    grouped = _reshape(node, a, (batch, kv_heads, group, rows, inner))
    product = sf.matmul(grouped, sf.expand_dims(b, 2), transpose_b=transpose_b)
    return _reshape(node, product, (batch, q_heads, rows, product.shape[-1]))


def _frontier(rows: int, cols: int, offset: int | Value, dtype: np.dtype, left: int,
              right: int) -> Value:
    """The additive bias (0 allowed, -inf masked) of query i seeing key j iff
    -right <= i + offset - j <= left, a bound of -1 leaving its side open (causal is
    left -1, right 0): (rows, cols) for a scalar offset, (batch, 1, rows, cols) for a
    per-batch one."""
    i = np.arange(rows, dtype=np.int64).reshape(rows, 1)
    j = np.arange(cols, dtype=np.int64).reshape(1, cols)
    if isinstance(offset, int):
        diff: Value = i + offset - j
    else:
        diff = sf.reshape(sf.cast(offset, sf.int64), (-1, 1, 1)) + (i - j)
    allowed = None
    if left >= 0:
        allowed = sf.less_equal(diff, np.int64(left))
    if right >= 0:
        within = sf.less_equal(-diff, np.int64(right))
        allowed = within if allowed is None else sf.logical_and(allowed, within)
    bias = sf.where(allowed, np.zeros((), dtype), np.full((), -np.inf, dtype))
    return bias if isinstance(offset, int) else sf.expand_dims(bias, 1)


def _add(a: Value | None, b: Value) -> Value:
    return b if a is None else a + b


def _masked_softmax(scores: Value, bias: Value | None) -> Value:
    """softmax over the last axis, zero on the rows `bias` masks wholly (their scores are
    all -inf, or NaN where a score was +inf)."""
    if bias is None:
        return sf.nn.softmax(scores, axis=-1)
    top = sf.reduce_max(scores, axis=-1, keepdims=True)
    zero = np.zeros((), np.dtype(scores.dtype))
    top = sf.where(sf.equal(top, -np.inf), zero, top)
    exp = sf.exp(scores - top)
    total = sf.reduce_sum(exp, axis=-1, keepdims=True)
    probs = exp / sf.where(sf.equal(total, zero), np.ones((), zero.dtype), total)
    masked_rows = sf.equal(sf.reduce_max(bias, axis=-1, keepdims=True), -np.inf)
    return sf.where(masked_rows, zero, probs)


@converts("Attention")
def attention(node: Node, query: Value, key: Value, value: Value,
              attn_mask: Value | None = None, past_key: Value | None = None,
              past_value: Value | None = None,
              nonpad_kv_seqlen: Value | None = None) -> list[Value | None]:
    """Y, present_key, present_value and qk_matmul_output (as the model asks)."""
    rank = len(query.shape)
    if rank not in (3, 4) or len(key.shape) != rank or len(value.shape) != rank:
        raise node.error(f"Q, K and V must all be 3-D or all 4-D, got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if (past_key is None) != (past_value is None):
        raise node.error("past_key and past_value must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise node.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    mode = node.attr("qk_matmul_output_mode", 0)
    if mode not in _QK_MODES:
        raise node.error(f"qk_matmul_output_mode must be one of {_QK_MODES}, got {mode}")
    dtype = np.dtype(query.dtype)
    if rank == 3:
        q_heads, kv_heads = node.attr("q_num_heads", None), node.attr("kv_num_heads", None)
        if q_heads is None or kv_heads is None:
            raise node.error("3-D Q, K and V need the q_num_heads and kv_num_heads "
                             "attributes")
        query = _split_heads(node, query, q_heads)
        key = _split_heads(node, key, kv_heads)
        value = _split_heads(node, value, kv_heads)
    elif node.opset >= 25 and ("q_num_heads" in node.attributes
                               or "kv_num_heads" in node.attributes):
        raise node.error("q_num_heads and kv_num_heads are for 3-D inputs only; leave them "
                         "out for 4-D Q, K and V")
    q_heads, kv_heads = _static(node, (query.shape[1], key.shape[1]), "the head counts")
    if q_heads % kv_heads or value.shape[1] != kv_heads:
        raise node.error(f"the query heads ({q_heads}) must be a multiple of the key/value "
                         f"heads ({kv_heads}, {value.shape[1]}), which must agree")
    head_size = _static(node, query.shape[3:], "the head size of Q")[0]
    scale = node.attr("scale", None)
    root = float(np.sqrt(1.0 / np.sqrt(head_size) if scale is None else scale))

    if past_key is not None:
        key = sf.concat([past_key, key], axis=2)
        value = sf.concat([past_value, value], axis=2)
    present_key, present_value = key, value
    rows, cols = _static(node, (query.shape[2], key.shape[2]),
                         "the query and key sequence lengths")

    bias = _bias(node, attn_mask, dtype, rows, cols,
                 past=0 if past_key is None else past_key.shape[2],
                 nonpad=nonpad_kv_seqlen)

    raw = _grouped_matmul(node, query * root, key * root, transpose_b=True)
    scores = raw
    softcap = node.attr("softcap", 0.0)
    if softcap > 0:
        scores = sf.tanh(scores / softcap) * softcap
    biased = scores if bias is None else scores + bias
    precision = node.attr("softmax_precision", None)
    if precision is not None:
        wide = dtypes.from_onnx(precision)
        if wide is None or not is_floating(wide):
            raise node.error(f"softmax_precision must name a floating type, got "
                             f"{dtypes.type_name(precision)}")
        biased = sf.cast(biased, wide)
    probs = _masked_softmax(biased, bias)
    qk_output = (raw, scores, biased, probs)[mode]
    probs = sf.cast(probs, dtype)
    output = _grouped_matmul(node, probs, value, transpose_b=False)
    if rank == 3:
        batch, heads, length, size = output.shape
        output = _reshape(node, sf.transpose(output, (0, 2, 1, 3)),
                          (batch, length, heads * size))
    results = [output, present_key, present_value, sf.cast(qk_output, dtype)]
    return [r if node.wants(i) else None for i, r in enumerate(results[:node.output_count])]


def _bias(node: Node, attn_mask: Value | None, dtype: np.dtype, rows: int, cols: int,
          past: int, nonpad: Value | None) -> Value | None:
    """The additive bias of the scores, broadcastable to (batch, heads, rows, cols): the
    mask padded to `cols` keys, the causal and window frontiers at the cache's offset (the
    past length, or per batch nonpad_kv_seqlen - rows), the padding past nonpad_kv_seqlen."""
    bias = None
    if attn_mask is not None:
        width = attn_mask.shape[-1]
        if width is None or width > cols:
            raise node.error(f"attn_mask's last dim ({width}) must be static and at most "
                             f"the total key length {cols}")
        boolean = np.dtype(attn_mask.dtype) == np.bool_
        if width < cols:
            paddings = [(0, 0)] * (len(attn_mask.shape) - 1) + [(0, cols - width)]
            attn_mask = sf.pad(attn_mask, paddings,
                               constant_values=False if boolean else -np.inf)
        if boolean:
            attn_mask = sf.where(attn_mask, np.zeros((), dtype), np.full((), -np.inf, dtype))
        elif np.dtype(attn_mask.dtype) != dtype:
            raise node.error(f"a float attn_mask must have Q's type {dtype}, got "
                             f"{np.dtype(attn_mask.dtype)}")
        bias = attn_mask
    offset: int | Value = past
    if nonpad is not None:
        offset = sf.cast(nonpad, sf.int64) - rows
    causal = node.attr("is_causal", 0)
    if causal:
        bias = _add(bias, _frontier(rows, cols, offset, dtype, -1, 0))
    left, right = node.attr("left_window_size", -1), node.attr("right_window_size", -1)
    if left < -1 or right < -1:
        raise node.error(f"left_window_size and right_window_size must be -1 or "
                         f"nonnegative, got {left} and {right}")
    if left >= 0 or right >= 0:
        bias = _add(bias, _frontier(rows, cols, offset, dtype, left, right))
    if nonpad is not None:
        kept = sf.less(np.arange(cols, dtype=np.int64),
                       sf.reshape(sf.cast(nonpad, sf.int64), (-1, 1, 1, 1)))
        bias = _add(bias, sf.where(kept, np.zeros((), dtype), np.full((), -np.inf, dtype)))
    return bias


@converts("RotaryEmbedding")
def rotary_embedding(node: Node, x: Value, cos_cache: Value, sin_cache: Value,
                     position_ids: Value | None = None) -> Value:
    """Rotates the first `rotary_embedding_dim` features of each head by the angles the
    caches hold per position: pairs (x1, x2) are the two halves, or the even and odd
    features when `interleaved`, and become (cos x1 - sin x2, sin x1 + cos x2).

    x is (batch, heads, sequence, head size) or (batch, sequence, hidden) with `num_heads`;
    the caches are (max position, rotary dim / 2) indexed by `position_ids` (batch,
    sequence), or already (batch, sequence, rotary dim / 2) without them."""
    rank = len(x.shape)
    if rank == 4:
        batch, heads, length, size = x.shape
        heads_axis = 1
    elif rank == 3:
        heads = node.attr("num_heads", 0)
        if heads <= 0:
            raise node.error("a 3-D input needs the num_heads attribute")
        batch, length, hidden = x.shape
        hidden = _static(node, (hidden,), "the hidden size of a 3-D input")[0]
        if hidden % heads:
            raise node.error(f"the hidden size {hidden} is not a multiple of the {heads} "
                             f"heads")
        size = hidden // heads
        x = _reshape(node, x, (batch, length, heads, size))
        heads_axis = 2
    else:
        raise node.error(f"the input must be 3-D or 4-D, got shape {tuple(x.shape)}")
    size = _static(node, (size,), "the head size")[0]
    rotary = node.attr("rotary_embedding_dim", 0) or size
    if rotary % 2 or rotary > size:
        raise node.error(f"rotary_embedding_dim {rotary} must be even and at most the head "
                         f"size {size}")
    if position_ids is not None:
        cos_cache = sf.gather(cos_cache, position_ids, axis=0)
        sin_cache = sf.gather(sin_cache, position_ids, axis=0)
    if cos_cache.shape[-1] != rotary // 2 or sin_cache.shape[-1] != rotary // 2:
        raise node.error(f"the caches' last dim ({cos_cache.shape[-1]}, "
                         f"{sin_cache.shape[-1]}) must be rotary_embedding_dim / 2 = "
                         f"{rotary // 2}")
    # (batch, sequence, half) against x's heads axis
    cos = sf.expand_dims(cos_cache, heads_axis)
    sin = sf.expand_dims(sin_cache, heads_axis)
    turned, kept = x[..., :rotary], x[..., rotary:]
    if node.attr("interleaved", 0):
        first, second = turned[..., 0::2], turned[..., 1::2]
    else:
        first, second = turned[..., :rotary // 2], turned[..., rotary // 2:]
    real = cos * first - sin * second
    imag = sin * first + cos * second
    if node.attr("interleaved", 0):
        pairs = sf.stack([real, imag], axis=-1)
        turned = _reshape(node, pairs, tuple(pairs.shape[:-2]) + (rotary,))
    else:
        turned = sf.concat([real, imag], axis=-1)
    result = sf.concat([turned, kept], axis=-1) if rotary < size else turned
    if rank == 3:
        result = _reshape(node, result, (batch, length, hidden))
    return result


_UPDATE_RULES = ("linear", "gated", "delta", "gated_delta")


def _time_major(node: Node, x: Value, heads: int) -> Value:
    """(batch, steps, heads * size) as float32 (steps, batch, heads, size)."""
    batch, steps, hidden = x.shape
    hidden = _static(node, (hidden,), "the last dim of a LinearAttention input")[0]
    if hidden % heads:
        raise node.error(f"the last dim {hidden} is not a multiple of the {heads} heads")
    split = _reshape(node, sf.cast(x, sf.float32), (batch, steps, heads, hidden // heads))
    return sf.transpose(split, (1, 0, 2, 3))


@converts("LinearAttention")
def linear_attention(node: Node, query: Value, key: Value, value: Value,
                     past_state: Value | None = None, decay: Value | None = None,
                     beta: Value | None = None) -> list[Value | None]:
    """The output and the present state of linear attention's recurrence, one
    `sf.while_loop` over the steps in float32 (as ONNX's reference accumulates):
    S = exp(g) S (gated), v = beta (v - S^T k) (delta), S += k v^T, o = scale q^T S, each
    kv head's state read by its group of query heads."""
    rule = node.attr("update_rule", "gated_delta")
    if rule not in _UPDATE_RULES:
        raise node.error(f"update_rule must be one of {', '.join(_UPDATE_RULES)}, got "
                         f"{rule!r}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        wants = f"{'a' if gated else 'no'} decay and {'a' if delta else 'no'} beta"
        raise node.error(f"update_rule {rule!r} takes {wants} input; the node gives "
                         f"{'a' if decay is not None else 'no'} decay and "
                         f"{'a' if beta is not None else 'no'} beta")
    q_heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise node.error(f"q_num_heads ({q_heads}) must be a positive multiple of "
                         f"kv_num_heads ({kv_heads})")
    if any(len(x.shape) != 3 for x in (query, key, value)):
        raise node.error("query, key and value must be 3-D (batch, steps, heads * size)")
    q, k, v = (_time_major(node, x, h) for x, h in ((query, q_heads), (key, kv_heads),
                                                     (value, kv_heads)))
    batch, key_size, value_size = query.shape[0], q.shape[-1], v.shape[-1]
    if decay is not None:
        width = decay.shape[-1]
        if width not in (kv_heads, kv_heads * key_size):
            raise node.error(f"decay's last dim {width} must be kv_num_heads ({kv_heads}) "
                             f"or kv_num_heads * d_k ({kv_heads * key_size})")
        decay = sf.exp(_time_major(node, decay, kv_heads))  # (steps, batch, heads, 1 or d_k)
    if beta is not None:
        width = beta.shape[-1]
        if width not in (kv_heads, 1):
            raise node.error(f"beta's last dim {width} must be kv_num_heads ({kv_heads}) "
                             f"or 1")
        beta = _time_major(node, beta, width)  # (steps, batch, heads or 1, 1)
    scale = node.attr("scale", 0.0) or 1.0 / np.sqrt(key_size)
    if past_state is not None:
        state = sf.cast(past_state, sf.float32)
    else:
        state = sf.zeros_like(sf.expand_dims(k[0], -1) * sf.expand_dims(v[0], -2))
    steps = q.shape[0]
    count: int | Value = steps if steps is not None else \
        sf.reduce_sum(sf.ones_like(q[:, 0, 0, 0], dtype=sf.int32))

    def cond(t: Value, *carried: Value) -> Value:
        return sf.less(t, count)

    def body(t: Value, state: Value, out: Value) -> tuple[Value, Value, Value]:
        k_t, v_t = sf.gather(k, t), sf.gather(v, t)  # (batch, kv heads, d)
        if decay is not None:
            state = state * sf.expand_dims(sf.gather(decay, t), -1)
        if beta is not None:
            retrieved = sf.squeeze(sf.matmul(sf.expand_dims(k_t, -2), state), -2)
            v_t = sf.gather(beta, t) * (v_t - retrieved)
        state = state + sf.expand_dims(k_t, -1) * sf.expand_dims(v_t, -2)
        grouped = _reshape(node, sf.gather(q, t), (batch, kv_heads, q_heads // kv_heads,
                                                   key_size))
        read = _reshape(node, sf.matmul(grouped, state), (batch, q_heads, value_size))
        return t + 1, state, sf.dynamic_update_index(out, read * float(scale), t)

    out = sf.zeros_like(q[..., :1] * v[:, :, :1, :])  # (steps, batch, q heads, d_v)
    _, state, out = sf.while_loop(cond, body, (sf.constant(0), state, out))
    output = _reshape(node, sf.transpose(out, (1, 0, 2, 3)),
                      (batch, steps, q_heads * value_size))
    present = sf.cast(state, (query if past_state is None else past_state).dtype)
    results = [sf.cast(output, query.dtype), present]
    return [r if node.wants(i) else None for i, r in enumerate(results[:node.output_count])]
