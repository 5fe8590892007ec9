"""Tests of ``tokendynamics.transport``: distances against closed forms (always distances, never squares)."""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics.transport import (
    bures_wasserstein,
    circle_bounded_lipschitz,
    circle_wasserstein1,
    conditional_wasserstein,
    wasserstein,
    wasserstein_gaussian_1d,
)


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


def test_wasserstein_of_weighted_measures_and_its_sliced_estimate_below_it():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    Y = np.array([[0.0, 0.0]])
    # moving mass 1/4 a distance 1: W_2 = sqrt(1/4)
    assert wasserstein(X, Y, weights=([0.75, 0.25], None)) == pytest.approx(0.5)
    assert 0 < wasserstein(X, Y, weights=([0.75, 0.25], None), method="sliced", rng=0) <= 0.5 + 1e-12


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


@pytest.mark.claim("conditional-wasserstein-distance")
def test_conditional_wasserstein_equals_lp_over_couplings_that_keep_positions():
    """Paper 1 (Castin et al., arXiv 2501.18322): masked attention is compared in the conditional Wasserstein
    distance, the transport cost over couplings that keep positions (here against the linear program with a huge
    cross-position cost).
    """
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(9)
    pos = np.repeat([0.0, 0.3, 0.6, 1.0], [5, 3, 1, 4])
    X, Y = rng.standard_normal((13, 2)), rng.standard_normal((13, 2))
    a = rng.random(13) + 0.1
    # the same mass per position group in both measures
    b = a.copy()
    for s in np.unique(pos):
        g = pos == s
        b[g] = rng.random(g.sum()) + 0.1
        b[g] *= a[g].sum() / b[g].sum()
    a, b = a / a.sum(), b / b.sum()
    for p in (1, 2):
        cost = ot.dist(X, Y, metric="euclidean") ** p + 1e6 * (pos[:, None] != pos[None, :])
        ref = float(ot.emd2(a, b, cost)) ** (1 / p)
        got = conditional_wasserstein(X, Y, pos, p=p, weights=(a, b))
        assert got == pytest.approx(ref, rel=1e-9)
        assert got >= wasserstein(X, Y, p=p, weights=(a, b)) - 1e-12
    prof = conditional_wasserstein(X, Y, pos, weights=(a, b), return_profile=True)
    assert prof.distances.shape == (4,) and np.allclose(prof.positions, [0, 0.3, 0.6, 1.0])
    sup = conditional_wasserstein(X, Y, pos, weights=(a, b), reduce="sup")
    assert sup == pytest.approx(prof.distances.max()) and sup >= prof.value


@pytest.mark.claim("conditional-wasserstein-distance")
def test_conditional_wasserstein_with_one_group_or_bins_and_bad_marginals():
    """Paper 1 (Castin et al., arXiv 2501.18322): the conditional Wasserstein distance with one position group is
    W_p, with one token per position the identity coupling's gap; measures with different position marginals are
    refused.
    """
    rng = np.random.default_rng(10)
    X, Y = rng.standard_normal((30, 2)), rng.standard_normal((30, 2))
    assert conditional_wasserstein(X, Y, np.zeros(30)) == pytest.approx(wasserstein(X, Y), rel=1e-12)
    s = np.arange(1, 31) / 30
    # identical positions one token each: the identity coupling's L2 gap
    gap = np.sqrt(np.mean(np.sum((X - Y) ** 2, axis=1)))
    assert conditional_wasserstein(X, Y, s) == pytest.approx(gap, rel=1e-12)
    binned = conditional_wasserstein(X, Y, s, bins=3)  # three groups of ten
    manual = np.sqrt(np.mean([wasserstein(X[k : k + 10], Y[k : k + 10]) ** 2 for k in (0, 10, 20)]))
    assert binned == pytest.approx(manual, rel=1e-10) and binned <= gap + 1e-12
    with pytest.raises(ValueError, match="different position marginals"):
        conditional_wasserstein(X, Y, s, positions_Y=np.r_[s[:-1], 0.5])
    with pytest.raises(ValueError, match="one entry per token"):
        conditional_wasserstein(X, Y, s[:-1])


def test_wasserstein_to_a_gaussian_in_one_dimension_closed_forms():
    assert wasserstein_gaussian_1d([0.3], 0.3, 2.0) == pytest.approx(2.0, rel=1e-14)  # Dirac at the mean
    x = np.array([-1.0, 0.5, 2.0])
    assert wasserstein_gaussian_1d(x, 0.1, 0.0) == pytest.approx(np.sqrt(np.mean((x - 0.1) ** 2)), rel=1e-14)
    # against a fine quantile discretisation of the Gaussian (midpoint rule, 2e6 points)
    from scipy.special import ndtri

    rng = np.random.default_rng(1)
    x = rng.standard_normal(50) * 1.3 + 0.2
    u = (np.arange(2_000_000) + 0.5) / 2_000_000
    ref = np.sqrt(np.mean((np.sort(x)[(u * 50).astype(int)] - (0.5 + 1.1 * ndtri(u))) ** 2))
    assert wasserstein_gaussian_1d(x, 0.5, 1.1) == pytest.approx(ref, rel=1e-5)
    assert wasserstein_gaussian_1d(np.repeat(x[:3], 2), 0.0, 1.0) == pytest.approx(
        wasserstein_gaussian_1d(x[:3], 0.0, 1.0), rel=1e-12
    )
    # weights: integer masses are repeated points, and general masses follow the quantile discretisation
    counts = np.array([1, 2, 3, 1, 5])
    assert wasserstein_gaussian_1d(x[:5], 0.3, 0.9, weights=counts / counts.sum()) == pytest.approx(
        wasserstein_gaussian_1d(np.repeat(x[:5], counts), 0.3, 0.9), rel=1e-12
    )
    w = rng.random(50)
    w /= w.sum()
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    quantile = np.sort(x)[np.minimum(np.searchsorted(cum, u, side="right"), 49)]  # F^{-1}(u) of the weighted measure
    ref_w = np.sqrt(np.mean((quantile - (0.5 + 1.1 * ndtri(u))) ** 2))
    assert wasserstein_gaussian_1d(x, 0.5, 1.1, weights=w) == pytest.approx(ref_w, rel=1e-5)
    with pytest.raises(ValueError, match="std"):
        wasserstein_gaussian_1d(x, 0.0, -1.0)


# ---------------------------------------------------------------------------------------------
# distances on the circle
# ---------------------------------------------------------------------------------------------


def _circle_cost(x, y, period=2 * np.pi):
    diff = np.abs(np.mod(x, period)[:, None] - np.mod(y, period)[None, :])
    return np.minimum(diff, period - diff)


@pytest.mark.claim("structural-stability-for-all-time")
def test_circle_wasserstein1_equals_the_exact_transport_lp_with_the_arc_length_cost():
    """Paper 2 (Li et al., 2026) measures structural stability on the circle of double angles: the closed form of
    W1 there (distribution functions and a weighted median) equals the transport LP with the arc-length cost."""
    import ot

    rng = np.random.default_rng(3)
    for n, m, period in ((7, 5, 2 * np.pi), (40, 33, 2 * np.pi), (25, 25, 3.0)):
        x, y = rng.uniform(-10, 10, n), rng.vonmises(1.0, 1.5, m)
        a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
        exact = ot.emd2(a, b, _circle_cost(x, y, period))
        assert circle_wasserstein1(x, y, a, b, period=period) == pytest.approx(exact, rel=1e-10, abs=1e-13)
        assert circle_wasserstein1(y, x, b, a, period=period) == pytest.approx(exact, rel=1e-10, abs=1e-13)


def test_circle_distances_of_two_point_masses_are_the_short_arc_and_min_arc_2():
    for s in (0.3, 1.5, 2.5, 3.1):
        arc = min(s, 2 * np.pi - s)
        assert circle_wasserstein1([0.2], [0.2 + s]) == pytest.approx(arc, abs=1e-12)
        assert circle_wasserstein1([0.2], [0.2 - s]) == pytest.approx(arc, abs=1e-12)
        assert circle_bounded_lipschitz([0.2], [0.2 + s]) == pytest.approx(min(arc, 2.0), abs=1e-9)
    assert circle_wasserstein1([1.0, 2.0], [2.0, 1.0]) == pytest.approx(0.0, abs=1e-15)


def test_circle_bounded_lipschitz_equals_the_lp_with_every_pair_constrained():
    """Consecutive atoms suffice on a circle: the program with all n(n-1) Lipschitz constraints gives the same."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(5)
    x, y = rng.uniform(0, 2 * np.pi, 9), rng.uniform(0, 2 * np.pi, 6)
    a, b = rng.dirichlet(np.ones(9)), rng.dirichlet(np.ones(6))
    pts, mass = np.r_[x, y], np.r_[a, -b]
    C = _circle_cost(pts, pts)
    rows, rhs = [], []
    for i in range(pts.size):
        for j in range(pts.size):
            if i != j:
                r = np.zeros(pts.size)
                r[i], r[j] = 1.0, -1.0
                rows.append(r)
                rhs.append(C[i, j])
    full = -linprog(-mass, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(-1, 1), method="highs").fun
    assert circle_bounded_lipschitz(x, y, a, b) == pytest.approx(full, abs=1e-9)


@pytest.mark.claim("structural-stability-for-all-time")
def test_circle_bounded_lipschitz_lies_between_two_over_pi_w1_and_w1():
    """Paper 2 (Li et al., 2026) states structural stability in the bounded-Lipschitz distance: on the circle of
    length 2 pi (diameter pi), (2/pi) W1 <= d_BL <= W1, with equality for small, spread-out differences."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        x, y = rng.uniform(0, 2 * np.pi, 60), rng.vonmises(rng.uniform(0, 6), 3.0, 50)
        w, bl = circle_wasserstein1(x, y), circle_bounded_lipschitz(x, y)
        assert 2 / np.pi * w - 1e-9 <= bl <= w + 1e-9
    u = 2 * np.pi * (np.arange(200) + 0.5) / 200
    v = u + 0.01 * np.sin(u)
    assert circle_bounded_lipschitz(u, v) == pytest.approx(circle_wasserstein1(u, v), rel=1e-7)


def test_circle_distances_reject_bad_input():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        circle_wasserstein1([], [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        circle_bounded_lipschitz([np.nan], [1.0])
    with pytest.raises(ValueError, match="period"):
        circle_wasserstein1([0.0], [1.0], period=0.0)
    with pytest.raises(ValueError, match="x_weights"):
        circle_wasserstein1([0.0, 1.0], [1.0], x_weights=[0.5, 0.6])
