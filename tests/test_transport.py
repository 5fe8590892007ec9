"""Transport distances against closed forms (always distances, never squares)."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics.transport import bures_wasserstein, wasserstein


def test_wasserstein_of_a_translation_is_the_shift_length():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    shift = np.array([0.3, -0.4, 1.2])
    for p in (1, 2, 3):
        assert wasserstein(X, X + shift, p=p) == pytest.approx(np.linalg.norm(shift), rel=1e-9)


def test_wasserstein_in_one_dimension_matches_sorted_quantiles():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(200), rng.exponential(size=200)
    for p in (1, 2):
        expected = np.mean(np.abs(np.sort(x) - np.sort(y)) ** p) ** (1 / p)
        assert wasserstein(x, y, p=p) == pytest.approx(expected, rel=1e-10)
        # the exact LP in "2-D" with a zero second coordinate gives the same number
        X2, Y2 = np.c_[x, 0 * x], np.c_[y, 0 * y]
        assert wasserstein(X2, Y2, p=p, method="exact") == pytest.approx(expected, rel=1e-8)


def test_weighted_measures_and_method_labels():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    Y = np.array([[0.0, 0.0]])
    # moving mass 1/4 a distance 1: W_2 = sqrt(1/4)
    d = wasserstein(X, Y, weights=([0.75, 0.25], None), return_method=True)
    assert d.value == pytest.approx(0.5) and d.method == "exact"
    s = wasserstein(X, Y, weights=([0.75, 0.25], None), method="sliced", rng=0, return_method=True)
    assert s.method == "sliced" and 0 < s.value <= 0.5 + 1e-12


def test_bures_wasserstein_commuting_covariances_closed_form():
    m1, m2 = np.array([1.0, 0.0]), np.array([0.0, 2.0])
    S1, S2 = np.diag([4.0, 1.0]), np.diag([1.0, 9.0])
    expected = np.sqrt(1 + 4 + (2 - 1) ** 2 + (1 - 3) ** 2)
    assert bures_wasserstein(m1, S1, m2, S2) == pytest.approx(expected, rel=1e-12)
    assert bures_wasserstein(m1, S1, m1, S1) == pytest.approx(0.0, abs=1e-7)


def test_bures_wasserstein_agrees_with_pot_and_is_symmetric():
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(2)
    L1, L2 = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    S1, S2 = L1 @ L1.T, L2 @ L2.T
    m1, m2 = rng.standard_normal(3), rng.standard_normal(3)
    ours = bures_wasserstein(m1, S1, m2, S2)
    theirs = float(ot.gaussian.bures_wasserstein_distance(m1, m2, S1, S2))
    assert ours == pytest.approx(theirs, rel=1e-8)
    assert bures_wasserstein(m2, S2, m1, S1) == pytest.approx(ours, rel=1e-10)


def test_bures_wasserstein_allows_singular_and_rejects_non_psd():
    u = np.array([[1.0], [2.0]])
    S = u @ u.T  # rank one
    assert bures_wasserstein([0, 0], S, [0, 0], 4 * S) == pytest.approx(np.sqrt(5.0), rel=1e-9)
    with pytest.raises(ValueError, match="positive semi-definite"):
        bures_wasserstein([0, 0], np.diag([1.0, -1.0]), [0, 0], np.eye(2))
    with pytest.raises(ValueError, match="symmetric"):
        bures_wasserstein([0, 0], [[1.0, 0.5], [0.0, 1.0]], [0, 0], np.eye(2))


def test_bad_clouds_raise():
    with pytest.raises(ValueError, match="different dimensions"):
        wasserstein(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        wasserstein(np.array([[np.nan, 0.0]]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="p must be"):
        wasserstein(np.zeros((3, 2)), np.zeros((3, 2)), p=0.5)
