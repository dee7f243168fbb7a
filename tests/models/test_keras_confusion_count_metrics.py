"""Keras' `TruePositives`, `FalsePositives`, `TrueNegatives`, `FalseNegatives` and
`KLDivergence` metrics against values observed from Keras (hard-coded), weighted, over
several batches, by name, and inside `fit`."""

import numpy as np
import pytest

import stageflow as sf


def test_counts_match_keras():
    assert float(sf.metrics.TruePositives()([0, 1, 1, 1], [1, 0, 1, 1])) == 2.0
    np.testing.assert_array_equal(
        sf.metrics.FalseNegatives(thresholds=[0.3, 0.7])([1, 1], [0.5, 0.9]).numpy(), [0, 1])
    weighted = sf.metrics.TruePositives()
    weighted.update_state([1, 1, 0], [0.9, 0.2, 0.8], sample_weight=[2.0, 1.0, 1.0])
    assert float(weighted.result()) == 2.0  # Keras' value


@pytest.mark.parametrize(("name", "expected"), [("TruePositives", 2), ("FalsePositives", 1),
                                                ("TrueNegatives", 2), ("FalseNegatives", 1)])
def test_counts_over_batches_against_numpy(name, expected):
    metric = sf.metrics.get(name)
    assert metric.name == name[0].lower() + "".join(
        f"_{c.lower()}" if c.isupper() else c for c in name[1:])
    y_true, y_pred = np.array([1, 1, 1, 0, 0, 0]), np.array([0.9, 0.8, 0.1, 0.7, 0.2, 0.4])
    for rows in (slice(0, 3), slice(3, 6)):
        metric.update_state(y_true[rows], y_pred[rows])
    assert float(metric.result()) == expected
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_kl_divergence_metric_matches_keras():
    assert float(sf.metrics.KLDivergence()([[0.0, 1.0]], [[0.5, 0.5]])) == pytest.approx(
        0.69314563, rel=1e-5)


def test_counts_in_fit_logs():
    model = sf.keras.Sequential([sf.keras.layers.Dense(1, activation="sigmoid",
                                                       kernel_initializer="ones",
                                                       input_shape=(1,))])
    model.compile("sgd", "binary_crossentropy",
                  metrics=[sf.metrics.TruePositives(), sf.metrics.FalseNegatives(),
                           sf.metrics.KLDivergence()])
    x = np.array([[2.0], [-2.0], [3.0], [-3.0]], np.float32)
    y = np.array([[1.0], [1.0], [0.0], [0.0]], np.float32)
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    assert logs["true_positives"] == 1.0 and logs["false_negatives"] == 1.0
    history = model.fit(x, y, epochs=1, verbose=0)
    assert "true_positives" in history.history and "kl_divergence" in history.history
