"""Tests of ``tokendynamics.book.studies.kuramoto``: the accuracy and long-time stability of the Ott-Antonsen
reduction, the table of example regimes, the phase-portrait data and the period of a sampled signal.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import I2
from tokendynamics.book.studies.kuramoto import (
    REGIME_TABLE,
    oa_accuracy,
    oa_stability,
    perturbed_uniform,
    regime_portrait,
    sampled_period,
)
from tokendynamics.kuramoto import linear_layers
from tokendynamics.ott_antonsen import ott_antonsen_rhs, poisson_kernel_atoms, solve_ott_antonsen
from tokendynamics.regimes import REGIMES, classify_regime, predict_regime
from tokendynamics.transport import circle_wasserstein1

NON_ROTATING = {
    "V=I, random A": (np.array([[0.6, 1.3], [-0.2, -0.9]]), I2),
    "A=I, V=[[1,2],[-2,-1]] (Type 3)": (I2, np.array([[1.0, 2.0], [-2.0, -1.0]])),
    "random A, V": (np.array([[0.4, -1.1], [0.8, 0.3]]), np.array([[-0.5, 0.9], [1.2, 0.7]])),
}


@pytest.mark.claim("ott-antonsen-tracks-the-particles")
@pytest.mark.parametrize("name", list(NON_ROTATING))
def test_oa_accuracy_error_below_5_over_sqrt_n_at_n_2000(name):
    """Paper 2 (Li et al., 2026): tokens sampled wrapped-Cauchy from z0 = 0.3 e^{0.7i} follow the Ott-Antonsen solution,
    sup_t |R2 - z_OA| <= 5/sqrt(n) at n = 2000, T = 10.
    """
    A, V = NON_ROTATING[name]
    acc = oa_accuracy(linear_layers(A, V), 0.3 * np.exp(0.7j), ns=(2000,), seeds=2, T=10.0, rng=6)
    assert np.all(acc.errors <= 5 / math.sqrt(2000)), acc.errors


@pytest.mark.claim("structural-stability-near-the-oa-manifold")
def test_oa_accuracy_slope_vs_n_is_about_minus_one_half():
    """Paper 2 (Li et al., 2026), structural stability near the Ott-Antonsen manifold: the fitted slope of sup_t
    |R2 - z_OA| against n is in [-0.7, -0.3].

    n in {100, 400, 1600, 6400}, 8 seeds each, one least-squares fit of log(error) on log(n) over all 32 points.
    Particles: the O(n) angle equations. (A looser [-0.85, -0.3] with n in {500, 2000, 8000} would also pass;
    the wider n range makes the fit stable: over 6 seed batches we measured slopes -0.46 ... -0.56.)
    """
    A, V = NON_ROTATING["A=I, V=[[1,2],[-2,-1]] (Type 3)"]
    ns = (100, 400, 1600, 6400)
    acc = oa_accuracy(linear_layers(A, V), 0.3 * np.exp(0.7j), ns=ns, seeds=8, T=10.0, rng=2026, rtol=1e-6, atol=1e-8)
    assert -0.7 <= acc.slope <= -0.3, acc.slope


@pytest.mark.claim("equispaced-constants-make-oa-exact")
def test_oa_accuracy_equispaced_constants_make_the_reduction_exact():
    """Paper 2 (Li et al., 2026): with equispaced constants c_k (n = 200, |z| <= 0.9 along the run) the
    Ott-Antonsen solution is exact: sup_t |R2 - z_OA| < 1e-8.
    """
    for A, V in (NON_ROTATING["A=I, V=[[1,2],[-2,-1]] (Type 3)"], (np.diag([-1.0, -2.0]), I2)):
        layer = linear_layers(A, V)
        acc = oa_accuracy(
            layer, 0.3 * np.exp(0.7j), ns=(200,), seeds=1, T=10.0, rng=1, equispaced=True, rtol=1e-12, atol=1e-14
        )
        oa = solve_ott_antonsen(0.3 * np.exp(0.7j), layer, 10.0)
        assert np.abs(oa.z).max() <= 0.9
        assert np.all(acc.errors < 1e-8), acc.errors


def test_perturbed_uniform_is_an_increasing_image_of_the_grid_at_distance_proportional_to_epsilon():
    eps = np.array([0.0, 0.02, 0.04, 0.08])
    theta = perturbed_uniform(4000, eps, modes=3, rng=1)
    assert theta.shape == (4, 4000)
    assert np.all(np.diff(2 * theta, axis=1) > 0)  # the map u -> u + eps g(u) stays increasing
    uniform = poisson_kernel_atoms(0j, 64000)
    d = np.array([circle_wasserstein1(2 * th, uniform) for th in theta])
    assert d[0] == pytest.approx(np.pi / (2 * 4000), rel=0.1)  # the equispaced grid itself
    assert d[2] / d[1] == pytest.approx(2.0, rel=0.05) and d[3] / d[1] == pytest.approx(4.0, rel=0.05)
    with pytest.raises(ValueError, match="epsilon"):
        perturbed_uniform(10, 1.0)


@pytest.mark.claim("structural-stability-for-all-time")
def test_oa_stability_data_close_to_uniform_stay_close_for_all_time_in_the_summarys_regions():
    """Paper 2 (Li et al., 2026), structural stability: for V = I with sym(A) positive definite and for A = I
    with lambda_max(V) > 0, data close to the uniform law (in the bounded-Lipschitz distance) stay close to the
    Ott-Antonsen solution for all time.

    Measured in W1 on the circle of double angles (which bounds d_BL from both sides), for perturbations of size
    0.01 and 0.05 (n = 1000 tokens): the ratio sup_{s<=t} d(s)/d(0) of the distance to the OA solution from the
    data's R2 reaches its plateau by t = 100 (the same value at t = 200) and stays below 4; with V symmetric and a
    simple top eigenvalue the distance even tends to 0. Outside those regions the bound need not be uniform in
    time: for A = I and a traceless V with det V > 0 (closed orbits of the hidden Hamiltonian) the ratio keeps
    growing (more than doubling from t = 50 to t = 200, above 5). And "close to the uniform law" does not mean
    "close to the solution from the uniform law": for A = V = I that law is an equilibrium that repels, and the
    perturbed data end at distance pi/2 from it (a cluster pair) while staying close to their own OA solution.
    """
    kw = dict(epsilon=(0.01, 0.05), n=1000, T=200.0, n_times=41, rng=3, rtol=1e-8, atol=1e-10)
    at = lambda res, t: res.growth()[np.searchsorted(res.t, t)]  # noqa: E731
    for A, V in ((np.array([[1.0, 0.5], [-0.3, 2.0]]), I2), (I2, np.diag([2.0, -1.0]))):  # the summary's regions
        res = oa_stability(linear_layers(A, V), **kw)
        assert np.allclose(at(res, 100.0), at(res, 200.0)) and at(res, 200.0).max() <= 4.0, at(res, 200.0)
    assert res.distance[-1].max() < 1e-3  # A = I, V = diag(2, -1): both end on the top eigenvector
    hamiltonian_case = oa_stability(linear_layers(I2, [[0.5, 1.0], [-1.0, -0.5]]), **kw)  # outside: Type 3
    g50, g200 = at(hamiltonian_case, 50.0), at(hamiltonian_case, 200.0)
    assert g200[0] > 5.0 and g200[0] > 2 * g50[0], (g50, g200)
    kuramoto = oa_stability(linear_layers(I2, I2), **kw)  # A = V = I: uniform is a repelling equilibrium
    assert np.allclose(at(kuramoto, 100.0), at(kuramoto, 200.0)) and at(kuramoto, 200.0).max() <= 10.0
    assert np.allclose(kuramoto.distance_uniform[-1], np.pi / 2, atol=1e-3)


def test_oa_stability_rejects_bad_input_and_starts_at_the_perturbation_size():
    res = oa_stability(linear_layers(I2, np.diag([1.0, -1.0])), epsilon=(0.02,), n=400, T=2.0, n_times=5)
    assert res.distance.shape == res.distance_uniform.shape == (5, 1) and res.z_uniform.shape == (5,)
    assert res.theta_final.shape == (1, 400)
    ref = poisson_kernel_atoms(res.z[-1, 0], 4096)
    assert circle_wasserstein1(2 * res.theta_final[0], ref) == pytest.approx(res.distance[-1, 0], abs=1e-12)
    assert 0 < res.distance[0, 0] < 0.02 and np.all(res.growth() >= 1 - 1e-12)
    with pytest.raises(ValueError, match="epsilon"):
        oa_stability(linear_layers(I2, I2), epsilon=(0.0,), n=10, T=1.0)
    with pytest.raises(ValueError, match="T must be positive"):
        oa_stability(linear_layers(I2, I2), n=10, T=0.0)


@pytest.mark.claim("four-regimes", "regime-table", "partial-clustering-is-a-fourth-regime")
@pytest.mark.parametrize("example", REGIME_TABLE, ids=[e.label for e in REGIME_TABLE])
def test_classify_regime_reproduces_the_regime_table(example):
    """Paper 2 (Li et al., 2026): the four regimes (static and rotating clusters, oscillation, partial clustering)
    and the bistable case; the Ott-Antonsen classifier from z0 (0.3+0.2i unless listed), late window [0.8T, T],
    reproduces every row of the table of example regimes.

    T = 200, except the bistable rows that settle on the interior focus: its rate (1-|z*|^2)|tr A|/4 = 0.075
    needs T = 400 to be flat to 1e-6.
    """
    c = classify_regime(example.layer(), example.z0, T=example.T, details=True)
    assert c.regime == example.expected, (c.regime, c)
    assert c.prediction is not None and c.prediction.regime == example.expected
    if example.value_name == "|z*|":
        assert abs(abs(c.z_final) - example.value) < 1e-4
    elif example.value_name == "period":
        assert abs(c.prediction.period - example.value) < 1e-3
    elif example.value_name == "R2 limit":
        assert abs(c.z_final - example.value) < 1e-6


@pytest.mark.claim("regime-table")
def test_classify_regime_rk4_agrees_with_dop853_on_the_table():
    """Paper 2 (Li et al., 2026): the fixed-step classifier of the widget finds the same regimes as DOP853 on the
    table.
    """
    for ex in REGIME_TABLE:
        assert classify_regime(ex.layer(), ex.z0, T=ex.T, method="rk4", dt=0.02) == ex.expected, ex.label


def test_regime_portrait_holds_the_field_an_orbit_and_the_regime_of_its_layer():
    """The portrait of a layer is the OA field on the grid (masked outside the disk), the rk4 orbit from z0, the
    classified regime and the closed form; bad input is refused by name."""
    layer = linear_layers([[2.0, 0.0], [0.0, 1.0]], [[1.0, -1.0], [1.0, 1.0]])  # rotating clusters
    port = regime_portrait(layer, 0.3 + 0.2j, n_grid=7, T_orbit=5.0)
    inside = np.abs(port.grid) <= 1
    np.testing.assert_allclose(port.field[inside], ott_antonsen_rhs(port.grid[inside], layer), atol=1e-14)
    assert np.all(port.field.mask == ~inside)
    ref = solve_ott_antonsen(0.3 + 0.2j, layer, 5.0, t_eval=[5.0], rtol=1e-12, atol=1e-14).final
    assert abs(port.orbit[0] - (0.3 + 0.2j)) < 1e-15
    assert abs(port.orbit[-1] - ref) < 1e-3  # rk4 at dt = 0.5/L (drawn, not measured): 7e-5
    assert port.regime == "rotating_clusters" == port.prediction.regime and port.regime in REGIMES
    assert port.prediction == predict_regime(layer, 0.3 + 0.2j)
    with pytest.raises(ValueError, match="n_grid"):
        regime_portrait(layer, n_grid=1)
    with pytest.raises(ValueError, match="dt"):
        regime_portrait(layer, dt=0.0)


def test_sampled_period_of_a_sampled_rotation_is_its_period():
    """The mean time between upward zero crossings of Im R, interpolated linearly between samples."""
    t = np.linspace(0, 20, 2001)
    assert sampled_period(t, np.exp(2j * np.pi * t / 3.0)) == pytest.approx(3.0, rel=1e-6)
    assert sampled_period(t, 0.5 + 0.1 * np.exp(2j * np.pi * t / 2.0), centre=0.5, transient=5.0) == pytest.approx(2.0)
    assert sampled_period(t, np.ones_like(t, dtype=complex)) == math.inf
    with pytest.raises(ValueError, match="t and R"):
        sampled_period(t, np.zeros(3, complex))
