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
    with pytest.raises(ValueError, match=r"weights\[0\]: .*sum to 1"):
        wasserstein(np.zeros((3, 2)), np.ones((2, 2)), weights=([0.5, 0.5, 0.5], None))
    with pytest.raises(ValueError, match=r"weights\[1\]: .*non-negative"):
        wasserstein(np.zeros((3, 2)), np.ones((2, 2)), weights=(None, [1.5, -0.5]))


def test_psd_sqrt_squares_back_on_stacks_and_its_pseudo_inverse_inverts_the_range():
    from tokendynamics.transport import psd_sqrt

    rng = np.random.default_rng(3)
    L = rng.standard_normal((5, 3, 2))
    S = L @ np.swapaxes(L, 1, 2)  # a stack of rank-two 3 x 3 matrices
    R, Rp = psd_sqrt(S, pinv_rtol=1e-7)
    np.testing.assert_allclose(R @ R, S, atol=1e-12)
    np.testing.assert_allclose(R, np.swapaxes(R, 1, 2), atol=0)
    np.testing.assert_allclose(np.array([psd_sqrt(s) for s in S]), R, atol=1e-13)  # one matrix at a time
    np.testing.assert_allclose(Rp, np.linalg.pinv(R, rcond=1e-7, hermitian=True), atol=1e-9)
    P = R @ Rp  # the orthogonal projector on the range of S
    np.testing.assert_allclose(P @ S, S, atol=1e-12)
    assert np.allclose(np.trace(P, axis1=1, axis2=2), 2.0)


def test_validate_gaussian_names_what_is_wrong():
    from tokendynamics.validation import validate_gaussian

    m, S = validate_gaussian(0.5, 2.0)
    assert m.shape == (1,) and S.shape == (1, 1) and S[0, 0] == 2.0
    with pytest.raises(ValueError, match="mean has dimension 2 but the layer has d = 3"):
        validate_gaussian([0, 0], np.eye(2), 3, what="the layer has d")
    with pytest.raises(ValueError, match="mean contains non-finite"):
        validate_gaussian([np.nan, 0], np.eye(2))
    with pytest.raises(ValueError, match="S2 must be positive semi-definite"):
        validate_gaussian([0, 0], np.diag([1.0, -1.0]), name="S2")
    with pytest.raises(ValueError, match="cov must be 2 x 2"):
        validate_gaussian([0, 0], np.eye(3))
