"""The bootstraps' ROC AUC and KS statistic give scikit-learn's and scipy's numbers to the last bit (ties,
constant scores, small and large samples), so meta-eval and fidelity report what they reported before."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ks_2samp
from sklearn.metrics import roc_auc_score

from usersimcrs.analysis.two_sample import ks_statistic, roc_auc


def _cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for trial in range(count):
        size = int(rng.integers(2, 250))
        labels = rng.integers(0, 2, size)
        labels[:2] = [0, 1]  # both classes
        scores = [
            rng.integers(1, 6, size).astype(float),  # a 1-5 scale: many ties
            rng.normal(size=size),
            rng.random(size).round(2),
            np.where(rng.random(size) < 0.7, 3.0, rng.integers(0, 3, size)),  # mostly one value
        ][trial % 4]
        yield labels, scores, rng.integers(0, 7, int(rng.integers(1, 60))).astype(float)


@pytest.mark.parametrize("seed", [0, 1])
def test_equal_to_the_last_bit_to_scikit_learn_and_scipy(seed):
    for labels, scores, other in _cases(seed, 400):
        assert roc_auc(labels, scores) == float(roc_auc_score(labels, scores)), (labels, scores)
        half = scores[: max(1, scores.size // 2)]
        assert ks_statistic(half, other) == float(ks_2samp(half, other, method="asymp").statistic), (half, other)


def test_known_values():
    labels = [0, 0, 0, 1, 1, 1]
    assert roc_auc(labels, [1, 2, 3, 4, 5, 6]) == 1.0 and roc_auc(labels, [6, 5, 4, 3, 2, 1]) == 0.0
    assert roc_auc(labels, [3, 3, 3, 3, 3, 3]) == 0.5 and roc_auc([0, 1, 0, 1], [1, 2, 2, 1]) == 0.5
    assert ks_statistic([1, 2, 3], [1, 2, 3]) == 0.0 and ks_statistic([1, 2], [5, 6, 7]) == 1.0
    assert ks_statistic([1.0, 2.0, 3.0, 4.0], [3.0, 4.0]) == 0.5
