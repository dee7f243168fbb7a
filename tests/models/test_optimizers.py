"""sf.optimizers against hand-computed NumPy updates, staged training, and sf.metrics."""

import numpy as np
import pytest

import stageflow as sf

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([-0.25, 0.5, 1.0]), np.array([1.0, 1.0, -3.0]),
         np.array([0.0, -2.0, 0.5])]
START = np.array([1.0, -2.0, 0.5])


def ids(objects):
    return [id(o) for o in objects]


def sgd_reference(lr, momentum=0.0, nesterov=False):
    w, m, out = START.copy(), np.zeros(3), []
    for g in GRADS:
        if momentum:
            m = momentum * m - lr * g
            w = w + (momentum * m - lr * g if nesterov else m)
        else:
            w = w - lr * g
        out.append(w.copy())
    return out


def adam_reference(lr, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    w, m, v, out = START.copy(), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, 1):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        m_hat, v_hat = m / (1 - beta_1**t), v / (1 - beta_2**t)
        # Keras adds epsilon to sqrt(v), not to sqrt(v_hat): in bias-corrected terms it
        # is epsilon / sqrt(1 - beta_2**t) (the paper's "epsilon hat").
        w = w - lr * m_hat / (np.sqrt(v_hat) + epsilon / np.sqrt(1 - beta_2**t))
        out.append(w.copy())
    return out


def adamw_reference(lr, weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    w, m, v, out = START.copy(), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, 1):
        w = w - lr * weight_decay * w
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g * g
        alpha = lr * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
        w = w - alpha * m / (np.sqrt(v) + epsilon)
        out.append(w.copy())
    return out


def rmsprop_reference(lr, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False):
    w, v, mom, mg, out = START.copy(), np.zeros(3), np.zeros(3), np.zeros(3), []
    for g in GRADS:
        v = rho * v + (1 - rho) * g * g
        denominator = v
        if centered:
            mg = rho * mg + (1 - rho) * g
            denominator = v - mg * mg
        step = lr * g / np.sqrt(denominator + epsilon)
        if momentum:
            mom = momentum * mom + step
            step = mom
        w = w - step
        out.append(w.copy())
    return out


def adagrad_reference(lr, initial=0.1, epsilon=1e-7):
    w, a, out = START.copy(), np.full(3, initial), []
    for g in GRADS:
        a = a + g * g
        w = w - lr * g / np.sqrt(a + epsilon)
        out.append(w.copy())
    return out


def lion_reference(lr, beta_1=0.9, beta_2=0.99):
    w, m, out = START.copy(), np.zeros(3), []
    for g in GRADS:
        w = w - lr * np.sign(beta_1 * m + (1 - beta_1) * g)
        m = beta_2 * m + (1 - beta_2) * g
        out.append(w.copy())
    return out


OPTIMIZERS = {
    "sgd": (lambda: sf.optimizers.SGD(0.1), lambda: sgd_reference(0.1)),
    "momentum": (lambda: sf.optimizers.SGD(0.1, momentum=0.9),
                 lambda: sgd_reference(0.1, 0.9)),
    "nesterov": (lambda: sf.optimizers.SGD(0.05, momentum=0.8, nesterov=True),
                 lambda: sgd_reference(0.05, 0.8, nesterov=True)),
    "adam": (lambda: sf.optimizers.Adam(0.01), lambda: adam_reference(0.01)),
    "adam_eps": (lambda: sf.optimizers.Adam(0.1, beta_1=0.5, beta_2=0.9, epsilon=0.5),
                 lambda: adam_reference(0.1, 0.5, 0.9, 0.5)),
    "adamw": (lambda: sf.optimizers.AdamW(0.01, weight_decay=0.1),
              lambda: adamw_reference(0.01, 0.1)),
    "rmsprop": (lambda: sf.optimizers.RMSprop(0.01), lambda: rmsprop_reference(0.01)),
    "rmsprop_centered_momentum": (
        lambda: sf.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
        lambda: rmsprop_reference(0.01, momentum=0.5, centered=True)),
    "adagrad": (lambda: sf.optimizers.Adagrad(0.1), lambda: adagrad_reference(0.1)),
    "lion": (lambda: sf.optimizers.Lion(0.01), lambda: lion_reference(0.01)),
}


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_updates_match_numpy(name, dtype, staged):
    make, reference = OPTIMIZERS[name]
    opt = make()
    var = sf.Variable(START.astype(dtype))

    def step(g):
        opt.apply_gradients([(g, var)])

    if staged:
        step = sf.function(step)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for g, expected in zip(GRADS, reference(), strict=True):
        step(sf.constant(g.astype(dtype)))
        np.testing.assert_allclose(var.numpy(), expected, rtol=rtol, atol=rtol)
    assert int(opt.iterations) == len(GRADS)
    if staged:
        # Slots were created on the first call, which was then traced once more.
        assert step.tracing_count == (2 if opt._slot_variables else 1)


def test_keras_adam_form():
    """One step of the form Keras writes, literally."""
    opt = sf.optimizers.Adam(0.2, epsilon=1e-3)
    var = sf.Variable([1.0, 2.0])
    g = np.array([0.3, -4.0])
    opt.apply_gradients([(sf.constant(g, sf.float32), var)])
    m = (g - 0) * 0.1
    v = (g * g) * 0.001
    alpha = 0.2 * np.sqrt(1 - 0.999) / (1 - 0.9)
    np.testing.assert_allclose(var.numpy(), [1.0, 2.0] - m * alpha / (np.sqrt(v) + 1e-3),
                               rtol=1e-5)
    np.testing.assert_allclose(opt.get_slot(var, "m").numpy(), m, rtol=1e-6)
    np.testing.assert_allclose(opt.get_slot(var, "v").numpy(), v, rtol=1e-6)


def test_slots_iterations_and_none_gradients():
    opt = sf.optimizers.SGD(0.5, momentum=0.5)
    a, b = sf.Variable([1.0, 1.0]), sf.Variable(3.0)
    opt.apply_gradients(zip([sf.constant([1.0, 2.0]), None], [a, b], strict=True))
    np.testing.assert_allclose(a.numpy(), [0.5, 0.0])
    assert float(b) == 3.0  # a None gradient is skipped, and makes no slot
    with pytest.raises(KeyError, match="no slot 'momentum'"):
        opt.get_slot(b, "momentum")
    assert opt.get_slot(a, "momentum").shape == (2,)
    assert not opt.get_slot(a, "momentum").trainable
    assert ids(opt.variables) == ids([opt.learning_rate, opt.iterations,
                                      opt.get_slot(a, "momentum")])
    assert all(v is not a for v in opt.variables)  # the model's variables are not its own
    with pytest.raises(ValueError, match="no gradients provided"):
        opt.apply_gradients([(None, a)])
    with pytest.raises(ValueError, match="the gradient for"):
        opt.apply_gradients([(sf.constant([1.0, 2.0, 3.0]), a)])
    with pytest.raises(TypeError, match="pairs"):
        opt.apply_gradients([(sf.constant(1.0), sf.constant(2.0))])
    assert int(opt.iterations) == 1


def test_learning_rate_is_state_seen_by_traced_steps():
    opt = sf.optimizers.SGD(1.0)
    var = sf.Variable(0.0)

    @sf.function
    def step():
        opt.apply_gradients([(sf.constant(1.0), var)])

    step()
    assert float(var) == -1.0
    opt.learning_rate = 0.25
    step()
    assert float(var) == -1.25 and step.tracing_count == 1
    schedule = sf.optimizers.SGD(lambda step: 1.0 / (sf.cast(step, sf.float32) + 1.0))
    w = sf.Variable(0.0)
    for _ in range(3):
        schedule.apply_gradients([(sf.constant(1.0), w)])
    np.testing.assert_allclose(float(w), -(1 + 1 / 2 + 1 / 3), rtol=1e-6)


def test_minimize():
    opt = sf.optimizers.SGD(0.1)
    w = sf.Variable([3.0, -1.0])
    for _ in range(100):
        loss = opt.minimize(lambda: sf.reduce_sum(sf.square(w - 1.0)), [w])
    np.testing.assert_allclose(w.numpy(), [1.0, 1.0], atol=1e-6)
    assert float(loss) < 1e-10
    model = sf.layers.Dense(1)
    x, y = sf.constant([[1.0], [2.0]]), sf.constant([[2.0], [4.0]])
    adam = sf.optimizers.Adam(0.1)
    adam.minimize(lambda: sf.reduce_mean(sf.square(model(x) - y)), model)  # builds on call
    assert int(adam.iterations) == 1 and len(adam.variables) == 2 + 4


def test_staged_linear_regression_converges_without_retracing():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    true_w = np.array([[2.0], [-3.0], [0.5]], np.float32)
    y = x @ true_w + 1.5
    model = sf.layers.Dense(1)
    opt = sf.optimizers.SGD(0.1, momentum=0.5)
    loss_metric = sf.metrics.Mean()

    @sf.function
    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        loss_metric.update_state(loss)
        return loss

    xs, ys = sf.constant(x), sf.constant(y)
    losses = [float(train_step(xs, ys)) for _ in range(150)]
    assert train_step.tracing_count <= 2
    assert losses[-1] < 1e-6 < losses[0]
    np.testing.assert_allclose(model.kernel.numpy(), true_w, atol=1e-3)
    np.testing.assert_allclose(model.bias.numpy(), [1.5], atol=1e-3)
    assert int(opt.iterations) == 150
    np.testing.assert_allclose(float(loss_metric.result()), np.mean(losses), rtol=1e-4)
    for _ in range(3):
        train_step(xs, ys)
    assert train_step.tracing_count <= 2


def test_adam_training_step_traces_twice_then_reuses():
    model = sf.layers.Sequential([sf.layers.Dense(4, "tanh"), sf.layers.Dense(1)])
    opt = sf.optimizers.Adam(0.05)

    @sf.function
    def train_step(x, y):
        return opt.minimize(lambda: sf.reduce_mean(sf.square(model(x) - y)),
                            lambda: model.trainable_variables)

    x = sf.random.normal((16, 2))
    y = sf.reduce_sum(x, axis=1, keepdims=True)
    first = float(train_step(x, y))
    for _ in range(60):
        last = float(train_step(x, y))
    assert train_step.tracing_count == 2  # state created on the first call, then one trace
    assert last < first / 10
    assert len(opt.variables) == 2 + 2 * 4 and int(opt.iterations) == 61


# --------------------------------------------------------------------------- metrics


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_mean_metric(staged):
    mean = sf.metrics.Mean()
    assert float(mean.result()) == 0.0  # nothing seen yet

    def update(values, weights):
        mean.update_state(values)
        mean.update_state(values, sample_weight=weights)
        return mean.result()

    if staged:
        update = sf.function(update)
    values = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    weights = np.array([1.0, 0.0], np.float32)  # per sample: the second row counts 0
    result = update(sf.constant(values), sf.constant(weights))
    np.testing.assert_allclose(float(result), (10.0 + 3.0) / (4 + 2), rtol=1e-6)
    np.testing.assert_allclose(float(mean.result()), float(result))
    mean.reset_state()
    assert float(mean.result()) == 0.0
    mean.update_state(sf.constant([1, 2], sf.int32))  # cast to the metric's dtype
    assert float(mean(5.0)) == pytest.approx(8.0 / 3)


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_accuracy_metrics(staged):
    accuracy = sf.metrics.Accuracy()
    sparse = sf.metrics.SparseCategoricalAccuracy()
    categorical = sf.metrics.CategoricalAccuracy()

    def update(labels, predictions, logits, one_hot):
        accuracy.update_state(labels, predictions)
        sparse.update_state(labels, logits)
        categorical.update_state(one_hot, logits)
        return accuracy.result(), sparse.result(), categorical.result()

    if staged:
        update = sf.function(update, input_signature=[
            sf.TensorSpec([None], sf.int32), sf.TensorSpec([None], sf.float32),
            sf.TensorSpec([None, 3], sf.float32), sf.TensorSpec([None, 3], sf.float32)])
    labels = np.array([0, 2, 1, 1], np.int32)
    predictions = np.array([0.0, 2.0, 2.0, 1.0], np.float32)
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 1.0, 2.0], [5.0, 0.0, 0.0], [0.0, 1.0, 0.5]],
                      np.float32)
    one_hot = np.eye(3, dtype=np.float32)[labels]
    results = update(*map(sf.constant, (labels, predictions, logits, one_hot)))
    assert [float(r) for r in results] == [0.75, 0.75, 0.75]
    results = update(*map(sf.constant, (labels[:2], predictions[:2], logits[:2], one_hot[:2])))
    assert [float(r) for r in results] == pytest.approx([5 / 6] * 3)
    for metric in (accuracy, sparse, categorical):
        metric.reset_state()
        assert float(metric.result()) == 0.0
    sparse.update_state(labels[:, None], logits)  # [batch, 1] labels are accepted too
    assert float(sparse.result()) == 0.75


def test_schedules_match_their_formulas_and_show_in_learning_rate():
    schedules = sf.optimizers.schedules
    exponential = schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    staircase = schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5, staircase=True)
    cosine = schedules.CosineDecay(0.0, decay_steps=4, alpha=0.1, warmup_target=0.2,
                                   warmup_steps=2)
    piecewise = schedules.PiecewiseConstantDecay([1, 3], [1.0, 0.5, 0.1])
    for step in range(8):
        assert float(exponential(step)) == pytest.approx(0.1 * 0.5 ** (step / 2))
        assert float(staircase(step)) == pytest.approx(0.1 * 0.5 ** (step // 2))
        if step < 2:
            want = 0.2 * step / 2
        else:
            into = min(step - 2, 4)
            want = 0.2 * (0.9 * 0.5 * (1 + np.cos(np.pi * into / 4)) + 0.1)
        assert float(cosine(step)) == pytest.approx(want)
        assert float(piecewise(step)) == (1.0 if step <= 1 else 0.5 if step <= 3 else 0.1)

    opt = sf.optimizers.SGD(staircase)
    var = sf.Variable(np.zeros(3))
    step = sf.function(lambda g: opt.apply_gradients([(g, var)]))
    assert float(opt.learning_rate) == pytest.approx(0.1)
    for n in range(5):
        step(sf.constant(np.ones(3)))  # step n used 0.1 * 0.5 ** (n // 2)
        # Keras shows the rate of the next step, the schedule at `iterations`
        assert float(opt.learning_rate) == pytest.approx(0.1 * 0.5 ** ((n + 1) // 2))
    np.testing.assert_allclose(var.numpy(), -0.1 * (1 + 1 + 0.5 + 0.5 + 0.25))
    assert step.tracing_count == 1
    with pytest.raises(TypeError, match="cannot be set"):
        opt.learning_rate = 0.5


@pytest.mark.parametrize("staged", [False, True])
def test_mse_precision_recall_and_auc(staged):
    rng = np.random.default_rng(0)
    y_true = (rng.uniform(size=200) > 0.4).astype(np.float32)
    y_pred = np.clip(y_true * 0.3 + rng.uniform(size=200) * 0.7, 0, 1).astype(np.float32)
    metrics = {"mse": sf.metrics.MeanSquaredError(), "precision": sf.metrics.Precision(),
               "recall": sf.metrics.Recall(0.6), "auc": sf.metrics.AUC()}

    def update(t, p):
        for metric in metrics.values():
            metric.update_state(t, p)

    if staged:
        update = sf.function(update)
    for chunk in range(4):  # streamed in four batches
        part = slice(50 * chunk, 50 * (chunk + 1))
        update(sf.constant(y_true[part]), sf.constant(y_pred[part]))
    predicted = y_pred > 0.5
    assert float(metrics["mse"].result()) == pytest.approx(np.mean((y_true - y_pred) ** 2),
                                                             rel=1e-5)
    assert float(metrics["precision"].result()) == pytest.approx(
        (predicted & (y_true > 0.5)).sum() / predicted.sum(), rel=1e-6)
    assert float(metrics["recall"].result()) == pytest.approx(
        ((y_pred > 0.6) & (y_true > 0.5)).sum() / (y_true > 0.5).sum(), rel=1e-6)
    # the exact ROC AUC (ties aside) for continuous scores, within the thresholds' step
    positives, negatives = y_pred[y_true > 0.5], y_pred[y_true < 0.5]
    exact = (positives[:, None] > negatives[None, :]).mean()
    assert float(metrics["auc"].result()) == pytest.approx(exact, abs=0.01)
    metrics["auc"].reset_state()
    assert float(metrics["auc"].result()) == 0.0


class _CountingLock:
    """A reentrant lock that counts how often it is taken."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.RLock()
        self.taken = 0

    def __enter__(self):
        self.taken += 1
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)

    def acquire(self, *args):
        self.taken += 1
        return self._lock.acquire(*args)

    def release(self):
        self._lock.release()


def test_an_update_converts_once_takes_the_lock_once_and_recomputes_on_a_race():
    v = sf.Variable([1.0, 2.0])
    lock = v._lock = _CountingLock()
    v.assign_sub(sf.constant([0.5, 0.5]))
    np.testing.assert_array_equal(v.numpy(), [0.5, 1.5])
    assert lock.taken == 1
    races = []

    def racing_change(value):  # another thread writes between the read and the write
        if not races:
            races.append(value)
            v._store(np.array([10.0, 20.0], np.float32))
        return value + 1.0

    assert v._update(racing_change) is v
    np.testing.assert_array_equal(v.numpy(), [11.0, 21.0])  # computed again from the new
    with pytest.raises(ValueError, match=r"assign: variable .* is float32\(2,\), the value is "
                                         r"float32\(3,\)"):
        v._update(lambda value: sf.constant([1.0, 1.0, 1.0]))
    with pytest.raises(TypeError, match="expected a float32 tensor, got float64"):
        v._update(lambda value: sf.constant([1.0, 2.0], sf.float64))
    np.testing.assert_array_equal(v.numpy(), [11.0, 21.0])


def test_sgd_steps_under_a_tape_and_inside_a_function_write_each_variable_once():
    w = sf.Variable([1.0, -2.0])
    opt = sf.optimizers.SGD(0.5)
    lock = w._lock = _CountingLock()
    with sf.GradientTape() as tape:  # updates recorded by an outer tape read the variable
        opt.apply_gradients([(sf.constant([1.0, 1.0]), w)])
        y = sf.reduce_sum(w * w)
    np.testing.assert_allclose(w.numpy(), [0.5, -2.5])
    assert lock.taken == 1
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), [1.0, -5.0])
    step = sf.function(lambda g: opt.apply_gradients([(g, w)]))
    step(sf.constant([1.0, 1.0]))
    step(sf.constant([1.0, 1.0]))
    np.testing.assert_allclose(w.numpy(), [-0.5, -3.5])
