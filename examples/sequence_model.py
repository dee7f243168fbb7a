"""A sequence model with data-dependent control flow, staged.

An Embedding and an LSTM (one compiled loop over the time steps, not unrolled) learn to
read the sum of a sequence of digits; AdamW with a warm-up and a cosine decay trains it in
an `sf.function`. Then plain Python control flow on tensors, converted by AutoGraph: how
many leading digits fit under a budget (a `for` over the sequence with a `break`, one
`sf.while_loop` in the IR), and Newton's method with a tensor `while`. A `py_func` reports
from inside the staged training step.

    python examples/sequence_model.py
"""

import numpy as np

import stageflow as sf

LENGTH, DIGITS, BATCH, STEPS = 12, 10, 32, 150


def batch(rng: np.random.Generator) -> tuple[sf.Tensor, sf.Tensor]:
    digits = rng.integers(0, DIGITS, (BATCH, LENGTH)).astype(np.int32)
    target = digits.sum(axis=1, keepdims=True).astype(np.float32) / (LENGTH * DIGITS / 2)
    return sf.constant(digits), sf.constant(target)


class SumReader(sf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = sf.layers.Embedding(DIGITS, 8)
        self.lstm = sf.layers.LSTM(32)
        self.head = sf.layers.Dense(1)

    def __call__(self, digits: sf.Tensor) -> sf.Tensor:
        return self.head(self.lstm(self.embed(digits)))


model = SumReader()
schedule = sf.optimizers.schedules.CosineDecay(0.0, decay_steps=STEPS, alpha=0.1,
                                               warmup_target=0.02, warmup_steps=15)
optimizer = sf.optimizers.AdamW(schedule, weight_decay=1e-4)
losses = sf.losses.MeanSquaredError()
reports = []


@sf.function
def train_step(digits, target):
    with sf.GradientTape() as tape:
        loss = losses(target, model(digits))
    variables = model.trainable_variables
    grads, norm = sf.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
    optimizer.apply_gradients(zip(grads, variables, strict=True))
    sf.numpy_function(lambda value: reports.append(float(value)) or [], [loss], [])
    return loss


rng = np.random.default_rng(0)
for _ in range(STEPS):
    train_step(*batch(rng))
print(f"loss {reports[0]:.3g} -> {reports[-1]:.3g} after {STEPS} staged steps "
      f"({train_step.tracing_count} traces; learning rate now "
      f"{float(optimizer.learning_rate):.4f})")
assert reports[-1] < 0.25 * reports[0], reports[-10:]
steps = train_step.get_concrete_function(*batch(rng)).ir()
print(f"the training step's IR holds {steps.count('sf.while')} loops (the LSTM's forward and "
      "its gradient's two), each with its cell once")


@sf.function
def digits_within(digits, budget):
    """How many leading digits of a sequence sum to at most `budget` (AutoGraph)."""
    total = 0
    count = 0
    for digit in digits:
        if total + digit > budget:
            break
        total += digit
        count += 1
    return count


sequence = sf.constant(np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32))
for budget in (0, 9, 14, 100):
    print(f"digits within {budget:3d}: {int(digits_within(sequence, sf.constant(budget)))}")
print(f"traced {digits_within.tracing_count} time(s); converted source:")
print(digits_within.converted_source().splitlines()[0], "...")


@sf.function
def newton_sqrt(a):
    x = a
    while sf.abs(x * x - a) > 1e-6 * a:
        x = 0.5 * (x + a / x)
    return x


print("sqrt:", [round(float(newton_sqrt(sf.constant(v))), 5) for v in (2.0, 10.0, 1e6)])
