"""ONNX's recurrent layers: RNN, GRU and LSTM (forward, reverse, bidirectional).

Each direction is one `sf.while_loop` over the time steps, not a Python loop unrolled at
import: the staged IR stays the same size whatever the sequence length, so a long sequence
compiles as fast as a short one, and a sequence length unknown at import runs too. The
input projection X W^T + biases of every step is one matmul ahead of the loop; the loop
body holds only the recurrent matmul and the gates, and writes its step's row of Y in
place (`sf.dynamic_update_index`).

`sequence_lens` (per batch entry) is honoured as the spec states: steps at or past an
entry's length leave its state unchanged and its Y rows zero, so Y_h/Y_c are the states at
its last valid step; the reverse direction starts at that step. `clip` bounds the inputs of
the gates' activations (not LSTM's h of the cell state, as onnxruntime reads the spec);
`activations`/`activation_alpha`/`activation_beta` take the spec's list, the alphas and
betas consumed in order by the activations that take them (onnxruntime's reading too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts

Activation = Callable[[Value], Value]
# A step: (this step's projected input, the states, the weights, the recurrent bias left
# to the step, the activations, the node) -> the new states, the hidden state first.
Step = Callable[..., list[Value]]


# ONNX's activation names: the function of (x, alpha, beta) and the default alpha and beta,
# those of the ONNX op of that name (None where the activation takes none, _GIVEN where the
# op has no default: ScaledTanh).
_GIVEN = float("nan")
_ACTIVATIONS: dict[str, tuple[Callable[[Value, float, float], Value], float | None,
                              float | None]] = {
    "Relu": (lambda x, a, b: sf.nn.relu(x), None, None),
    "Tanh": (lambda x, a, b: sf.tanh(x), None, None),
    "Sigmoid": (lambda x, a, b: sf.sigmoid(x), None, None),
    "Affine": (lambda x, a, b: x * a + b, 1.0, 0.0),
    "LeakyRelu": (lambda x, a, b: sf.nn.leaky_relu(x, a), 0.01, None),
    "ThresholdedRelu": (lambda x, a, b: sf.where(sf.greater(x, a), x, sf.zeros_like(x)),
                        1.0, None),
    "ScaledTanh": (lambda x, a, b: sf.tanh(x * b) * a, _GIVEN, _GIVEN),
    "HardSigmoid": (lambda x, a, b: sf.clip_by_value(x * a + b, 0.0, 1.0), 0.2, 0.5),
    "Elu": (lambda x, a, b: sf.where(sf.greater(x, 0.0), x, sf.expm1(x) * a), 1.0, None),
    "Softsign": (lambda x, a, b: x / (sf.abs(x) + 1.0), None, None),
    "Softplus": (lambda x, a, b: sf.nn.softplus(x), None, None),
}
_BY_LOWER_NAME = {name.lower(): name for name in _ACTIVATIONS}


def _activations(node: Node, kind: _Kind, directions: int) -> list[list[Activation]]:
    """The activation functions of each direction, clipped as `clip` asks."""
    names = node.attr("activations", list(kind.activations) * directions)
    count = len(kind.activations)
    if len(names) != count * directions:
        raise node.error(f"activations must list {count} per direction ({count * directions} "
                         f"in all), got {names}")
    alphas = list(node.attr("activation_alpha", []))
    betas = list(node.attr("activation_beta", []))
    clip = node.attr("clip", None)
    functions: list[Activation] = []
    for index, name in enumerate(names):
        canonical = _BY_LOWER_NAME.get(name.lower())
        if canonical is None:
            raise node.error(f"activation {name!r} is not one of ONNX's: "
                             f"{', '.join(_ACTIVATIONS)}")
        function, alpha, beta = _ACTIVATIONS[canonical]
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        if alpha is _GIVEN or beta is _GIVEN:
            raise node.error(f"{canonical} has no default alpha and beta: give them in "
                             f"activation_alpha and activation_beta (consumed in the order "
                             f"of the activations that take them)")
        clipped = clip if index % count not in kind.unclipped else None
        functions.append(_bound(function, alpha, beta, clipped))
    return [functions[d * count:(d + 1) * count] for d in range(directions)]


def _bound(function: Callable[[Value, float, float], Value], alpha: float | None,
           beta: float | None, clip: float | None) -> Activation:
    def apply(x: Value) -> Value:
        if clip is not None:
            x = sf.clip_by_value(x, -clip, clip)
        return function(x, alpha, beta)

    return apply


@dataclass
class _Direction:
    """One direction's weights, sliced out of the (directions, ...) inputs."""

    w: Value            # (gates * hidden, input)
    r: Value            # (gates * hidden, hidden)
    wb: Value | None    # (gates * hidden,)
    rb: Value | None
    peepholes: Value | None  # LSTM's (3 * hidden,): input, output, forget
    h0: Value | None    # (batch, hidden)
    c0: Value | None


def _layer(node: Node, kind: _Kind, x: Value, w: Value, r: Value, b: Value | None,
           sequence_lens: Value | None, initial_h: Value | None,
           initial_c: Value | None = None, p: Value | None = None) -> list[Value | None]:
    """Y, Y_h (and Y_c) of a recurrent node of `kind`."""
    direction = node.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise node.error(f"direction must be forward, reverse or bidirectional, got "
                         f"{direction!r}")
    directions = 2 if direction == "bidirectional" else 1
    if w.shape[0] != directions:
        raise node.error(f"W has {w.shape[0]} directions, direction {direction!r} needs "
                         f"{directions}")
    hidden = r.shape[-1]
    if node.attr("hidden_size", hidden) != hidden:
        raise node.error(f"hidden_size {node.attr('hidden_size')} disagrees with R's last "
                         f"dim {hidden}")
    batch_first = node.attr("layout", 0) == 1
    if batch_first:
        x = sf.transpose(x, (1, 0, 2))
        initial_h = None if initial_h is None else sf.transpose(initial_h, (1, 0, 2))
        initial_c = None if initial_c is None else sf.transpose(initial_c, (1, 0, 2))
    activations = _activations(node, kind, directions)
    lengths = None if sequence_lens is None else \
        sf.reshape(sf.cast(sequence_lens, sf.int32), (-1, 1))
    size = kind.gates * hidden
    results = []
    for d in range(directions):
        weights = _Direction(
            w[d], r[d],
            None if b is None else b[d, :size], None if b is None else b[d, size:],
            None if p is None else p[d],
            None if initial_h is None else initial_h[d],
            None if initial_c is None else initial_c[d])
        reverse = direction == "reverse" or d == 1
        results.append(_run(node, kind, x, weights, activations[d], lengths, reverse,
                            node.wants(0)))
    y = sf.stack([res[0] for res in results], axis=1) if node.wants(0) else None
    states = [sf.stack([res[i] for res in results], axis=0)
              for i in range(1, kind.states + 1)]
    if batch_first:
        y = None if y is None else sf.transpose(y, (2, 0, 1, 3))
        states = [sf.transpose(s, (1, 0, 2)) for s in states]
    outputs = [y, *states]
    return [o if node.wants(i) else None for i, o in enumerate(outputs[:node.output_count])]


def _run(node: Node, kind: _Kind, x: Value, weights: _Direction,
         activations: Sequence[Activation], lengths: Value | None, reverse: bool,
         keep_y: bool) -> tuple[Value | None, ...]:
    """Y (steps, batch, hidden; None unless `keep_y`), the last hidden state and (LSTM)
    cell state of one direction: the projection of every step, then the loop."""
    hidden = weights.r.shape[-1]
    projected = sf.matmul(x, weights.w, transpose_b=True)  # (steps, batch, gates * hidden)
    recurrent_bias = None
    if weights.wb is not None:
        projected = projected + weights.wb
        if kind.inner_bias:
            inner = (kind.gates - 1) * hidden
            recurrent_bias = weights.rb[inner:]
            projected = projected + sf.concat(
                [weights.rb[:inner], sf.zeros_like(recurrent_bias)], axis=0)
        else:
            projected = projected + weights.rb
    steps = x.shape[0]
    count: int | Value = steps if steps is not None else \
        sf.reduce_sum(sf.ones_like(projected[:, 0, 0], dtype=sf.int32))
    h0 = weights.h0 if weights.h0 is not None else sf.zeros_like(projected[0, :, :hidden])
    states = [h0]
    if kind.states == 2:
        states.append(weights.c0 if weights.c0 is not None else sf.zeros_like(h0))

    def cond(t: Value, *carried: Value) -> Value:
        return sf.less(t, count)

    def body(t: Value, *carried: Value) -> tuple[Value, ...]:
        time = count - 1 - t if reverse else t
        state = carried[1:] if keep_y else carried
        new = kind.step(sf.gather(projected, time), state, weights, recurrent_bias,
                        activations, node)
        if lengths is not None:
            valid = sf.less(time, lengths)  # (batch, 1)
            new = [sf.where(valid, n, s) for n, s in zip(new, state, strict=True)]
        if not keep_y:
            return (t + 1, *new)
        row = new[0] if lengths is None else sf.where(valid, new[0], sf.zeros_like(new[0]))
        return (t + 1, sf.dynamic_update_index(carried[0], row, time), *new)

    y0 = [sf.zeros_like(projected[:, :, :hidden])] if keep_y else []
    _, *final = sf.while_loop(cond, body, (sf.constant(0), *y0, *states))
    y = final.pop(0) if keep_y else None
    return (y, *final)


def _rnn_step(x: Value, state: Sequence[Value], weights: _Direction, bias: Value | None,
              f: Sequence[Activation], node: Node) -> list[Value]:
    """H = f(x W^T + Wb + H R^T + Rb), x's part precomputed."""
    (h,) = state
    return [f[0](x + sf.matmul(h, weights.r, transpose_b=True))]


def _gru_step(x: Value, state: Sequence[Value], weights: _Direction, bias: Value | None,
              f: Sequence[Activation], node: Node) -> list[Value]:
    """z, r = f(...); candidate g(x Wh + (r * H) Rh + Rbh), or with linear_before_reset
    g(x Wh + r * (H Rh + Rbh)); H = (1 - z) * candidate + z * H. `bias` is Rbh, the other
    biases are in x."""
    (h,) = state
    size = h.shape[-1]
    if node.attr("linear_before_reset", 0):
        recurrent = sf.matmul(h, weights.r, transpose_b=True)
        gates = x[:, :2 * size] + recurrent[:, :2 * size]
        inner = recurrent[:, 2 * size:]
        z, r = f[0](gates[:, :size]), f[0](gates[:, size:])
        candidate = x[:, 2 * size:] + r * (inner if bias is None else inner + bias)
    else:
        gates = x[:, :2 * size] + sf.matmul(h, weights.r[:2 * size], transpose_b=True)
        z, r = f[0](gates[:, :size]), f[0](gates[:, size:])
        candidate = x[:, 2 * size:] + sf.matmul(r * h, weights.r[2 * size:], transpose_b=True)
        candidate = candidate if bias is None else candidate + bias
    candidate = f[1](candidate)
    return [(1.0 - z) * candidate + z * h]


def _lstm_step(x: Value, state: Sequence[Value], weights: _Direction, bias: Value | None,
               f: Sequence[Activation], node: Node) -> list[Value]:
    """Gates i, o, f, c (that order); peepholes on the cell state; input_forget couples
    the forget gate to 1 - i."""
    h, c = state
    size = h.shape[-1]
    gates = x + sf.matmul(h, weights.r, transpose_b=True)
    pi = po = pf = None
    if weights.peepholes is not None:
        pi, po, pf = (weights.peepholes[k * size:(k + 1) * size] for k in range(3))
    i = gates[:, :size] if pi is None else gates[:, :size] + pi * c
    i = f[0](i)
    if node.attr("input_forget", 0):
        forget = 1.0 - i
    else:
        forget = gates[:, 2 * size:3 * size]
        forget = f[0](forget if pf is None else forget + pf * c)
    cell = forget * c + i * f[1](gates[:, 3 * size:])
    o = gates[:, size:2 * size]
    o = f[0](o if po is None else o + po * cell)
    return [o * f[2](cell), cell]


@dataclass(frozen=True)
class _Kind:
    """What sets the three layers apart: gate count, default activations, step function,
    how many states they carry (LSTM's cell besides the hidden state), whether the
    recurrent bias of the last gate stays inside the step (GRU's candidate), and the
    activations `clip` leaves alone (LSTM's h of the cell state: onnxruntime clips the
    gates' inputs only)."""

    gates: int
    activations: tuple[str, ...]
    step: Step
    states: int = 1
    inner_bias: bool = False
    unclipped: tuple[int, ...] = ()


_RNN = _Kind(1, ("Tanh",), _rnn_step)
_GRU = _Kind(3, ("Sigmoid", "Tanh"), _gru_step, inner_bias=True)
_LSTM = _Kind(4, ("Sigmoid", "Tanh", "Tanh"), _lstm_step, states=2, unclipped=(2,))


@converts("RNN")
def rnn(node: Node, x: Value, w: Value, r: Value, b: Value | None = None,
        sequence_lens: Value | None = None, initial_h: Value | None = None) -> list:
    """H = f(X W^T + H R^T + Wb + Rb) per step; Y and Y_h."""
    return _layer(node, _RNN, x, w, r, b, sequence_lens, initial_h)


@converts("GRU")
def gru(node: Node, x: Value, w: Value, r: Value, b: Value | None = None,
        sequence_lens: Value | None = None, initial_h: Value | None = None) -> list:
    """Update and reset gates z, r and a candidate per step; Y and Y_h."""
    return _layer(node, _GRU, x, w, r, b, sequence_lens, initial_h)


@converts("LSTM")
def lstm(node: Node, x: Value, w: Value, r: Value, b: Value | None = None,
         sequence_lens: Value | None = None, initial_h: Value | None = None,
         initial_c: Value | None = None, p: Value | None = None) -> list:
    """Input, output, forget gates and a cell state per step; Y, Y_h and Y_c."""
    return _layer(node, _LSTM, x, w, r, b, sequence_lens, initial_h, initial_c, p)


