"""Tests of ``tokendynamics.book.studies.gradient_flow``: the sign-rule survey, descent profiles, the energy curves
of the chapter's explorer, metastable plateaus and the curvature along the gradient flow.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import I2, M0, S0
from tokendynamics import Attention, sample_gaussian, sample_sphere, simulate, velocity
from tokendynamics.book.studies.gradient_flow import (
    bw_gradient_mismatch,
    circle_clusters,
    curvature_along_flow,
    descent_profile,
    energy_along,
    gaussian_descent_profile,
    gaussian_energy_curves,
    gaussian_softmax_efficiency,
    metastable_plateaus,
    sign_rule_survey,
    softmax_efficiency,
)
from tokendynamics.gaussian import gauss_hermite, solve_gaussian
from tokendynamics.gradient_flow import (
    energy_curve,
    first_variation_gradient,
    gaussian_interaction_energy,
    interaction_energy,
    linearize,
    sinkhorn_energy,
    sinkhorn_energy_gradient,
)


def sym(rng, d):
    B = rng.standard_normal((d, d))
    return (B + B.T) / 2


def spd(rng, d, floor=0.3):
    B = rng.standard_normal((d, d))
    return B @ B.T / d + floor * np.eye(d)


@pytest.mark.claim("energy-sign-rule")
def test_sign_rule_survey_agrees_everywhere_a_rule_applies():
    """Paper 1 (Castin et al., arXiv 2501.18322), the sign rule on random layers: the predicted sign wherever M +
    M^T is semi-definite, both signs where it is indefinite.
    """
    for kind in ("softmax", "unnormalized_softmax"):
        sv = sign_rule_survey(60, n=40, seed=33, kind=kind)
        assert np.all(sv.agree) and sv.agree.size > 10
        assert np.max(sv.relative_gap) < 1e-9
        undecided = sv.predicted == 0
        assert np.any(sv.rate[undecided] > 0) and np.any(sv.rate[undecided] < 0)  # no rule: both signs occur
        r = sv.normalized_rate
        assert np.all(r >= sv.lam_min - 1e-12) and np.all(r <= sv.lam_max + 1e-12)


@pytest.mark.claim("softmax-is-the-steepest-ascent-in-the-weighted-metric")
def test_softmax_efficiency_is_one_in_the_weighted_twisted_metric_and_less_in_W2():
    """Paper 1 (Castin et al., arXiv 2501.18322), softmax as a gradient flow for the Z_mu-weighted metric g_mu:
    on random clouds and Gaussians (symmetric A, V = M A, M definite of either sign) the softmax field is the
    steepest ascent/descent of E_A in g_mu (efficiency 1), not in W2; the unnormalised field is not (< 1).
    """
    rng = np.random.default_rng(23)
    for trial in range(12):
        d = 2 + trial % 3
        A, M = sym(rng, d), spd(rng, d) * (-1) ** trial
        layer = Attention("softmax", A=A, V=M @ A)
        X, w = rng.standard_normal((30, d)), rng.dirichlet(np.ones(30))
        assert softmax_efficiency(X, layer, w) == pytest.approx(1.0, abs=1e-10)
        assert softmax_efficiency(X, layer, w, twisted=False) < 0.9
        mean, S = 0.5 * rng.standard_normal(d), spd(rng, d, floor=0.2)
        S *= 0.5 / (np.linalg.norm(A, 2) * np.linalg.norm(S, 2))  # Sigma^-1 - 2 A Sigma A > 0: finite L2 norms
        assert gaussian_softmax_efficiency(mean, S, layer) == pytest.approx(1.0, abs=1e-10)
        assert gaussian_softmax_efficiency(mean, S, layer, twisted=False) < 0.99
    # the Gaussian closed form is the particle efficiency of a fine Gauss-Hermite quadrature of the Gaussian
    A = np.array([[0.8, 0.3], [0.3, -0.5]])
    layer = Attention("softmax", A=A, V=np.array([[1.0, 0.2], [0.2, 0.5]]) @ A)
    Xq, wq = gauss_hermite(M0, S0, 24)
    for twisted in (True, False):
        assert softmax_efficiency(Xq, layer, wq, twisted=twisted) == pytest.approx(
            gaussian_softmax_efficiency(M0, S0, layer, twisted=twisted), abs=1e-9
        )
    assert softmax_efficiency(Xq, layer.with_(kind="unnormalized_softmax"), wq) < 0.99  # the check can fail
    with pytest.raises(ValueError, match="definite"):
        softmax_efficiency(Xq, Attention("softmax", A=I2, V=np.diag([1.0, -1.0])), wq)


@pytest.mark.claim("twisted-wasserstein-distance")
def test_descent_profile_efficiency_is_one_in_the_twisted_metric_and_less_in_W2():
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted metric: along unnormalised attention with A = -I the
    efficiency (decrease over speed times slope) is 1 in d_V and below 0.9 in W2, layer by layer too.
    """
    V = np.diag([0.1, 1.0])
    X0 = sample_gaussian(60, M0, S0, rng=34)
    traj = simulate(X0, Attention("unnormalized_softmax", A=-I2, V=V), 0.5, dt=0.01)
    pM = descent_profile(traj, V, every=10)
    pW = descent_profile(traj, None, every=10)
    np.testing.assert_allclose(pM.efficiency, 1.0, atol=1e-12)
    assert np.all(pW.efficiency < 0.9)
    np.testing.assert_allclose(pM.layer_efficiency, 1.0, atol=0.02)  # one layer dt = 0.01: O(dt)
    assert np.all(pW.layer_efficiency < 0.9)
    np.testing.assert_allclose(pM.energy, energy_curve(traj.X, traj.layer), rtol=1e-13)


@pytest.mark.claim("sinkhorn-is-a-twisted-bw-gradient-flow")
def test_gaussian_descent_profile_and_mismatch_for_the_twisted_sinkhorn_flow():
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted metric on Gaussians: the V = M A Sinkhorn flow has
    efficiency 1 in d_M and less in W2, and it is the d_M Bures-Wasserstein gradient of F_eps along the whole
    run.
    """
    rng = np.random.default_rng(35)
    m, S, A, eps, M = rng.standard_normal(2), spd(rng, 2), sym(rng, 2), 0.4 + rng.random(), spd(rng, 2)
    layer = Attention("sinkhorn", A=A, V=M @ A, eps=eps)
    traj = solve_gaussian(m, S, layer, (0, 0.3), t_eval=np.linspace(0, 0.3, 61))  # Sigma grows ~ e^{2|V|t}
    energy = lambda a, s: sinkhorn_energy(a, s, layer)  # noqa: E731  (the energy of the cost A, eps: V plays no part)
    grad = lambda a, s: sinkhorn_energy_gradient(a, s, layer)  # noqa: E731
    pM = gaussian_descent_profile(traj, energy, grad, M)
    pW = gaussian_descent_profile(traj, energy, grad)
    np.testing.assert_allclose(pM.efficiency, 1.0, atol=1e-10)
    assert np.max(pW.efficiency) < 0.999
    np.testing.assert_allclose(pM.layer_efficiency, 1.0, atol=0.02)
    err, size = bw_gradient_mismatch(traj, energy, M)
    assert np.max(err / size) < 1e-7 and np.min(size) > 1e-2
    err_plain, _ = bw_gradient_mismatch(traj, energy)  # wrong metric: visibly off
    assert np.min(err_plain) > 1e-3


@pytest.mark.claim("metastable-plateaus", "metastable-plateaus-are-saddles")
def test_metastable_plateaus_sit_near_saddles_of_the_energy_which_grows_along_the_flow():
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity and metastability: 32 tokens on the circle, softmax
    with A = V = I, beta = 6. The energy E_beta never decreases along the flow; the run spends long plateaus with
    three and then two clusters, each near a configuration that barely moves and has growing directions (a saddle),
    the more clusters the faster the escape.
    """
    layer = Attention("softmax", A=I2, V=I2, beta=6.0)
    traj = simulate(sample_sphere(32, 2, rng=0), layer, 150.0, dt=0.1, sphere=True, save_every=10)
    E = energy_curve(traj.X, layer)
    assert np.all(np.diff(E) >= -1e-9 * E[-1])
    plateaus = metastable_plateaus(traj.t, traj.X, layer, min_fraction=0.05)
    assert [pl.clusters for pl in plateaus] == [3, 2], [(pl.clusters, pl.start, pl.stop) for pl in plateaus]
    for pl in plateaus:
        assert pl.state.unstable == pl.clusters - 1
        assert pl.state.speed < 0.01 and pl.masses.sum() == pytest.approx(1.0)
    assert plateaus[0].state.growth_rate > 100 * plateaus[1].state.growth_rate
    assert plateaus[1].length > 80 and plateaus[0].energy < plateaus[1].energy
    with pytest.raises(ValueError, match="min_fraction"):
        metastable_plateaus(traj.t, traj.X, layer, min_fraction=1.5)


@pytest.mark.claim("curvature-unbounded-at-blowup", "curvature-grows-along-the-blowup")
def test_curvature_along_the_gradient_flow_drives_the_speed_and_grows_without_bound_at_the_blowup():
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity and blow-up: along the W2 gradient ascent of E_I
    (unnormalised attention with V = A = I) the squared speed S obeys dS/dt = 2 H, H the second variation along the
    flow; the tokens blow up in finite time, and the curvature H / S grows without bound on the way.
    """
    rng = np.random.default_rng(41)
    X0 = 0.5 * rng.standard_normal((30, 2)) + np.array([0.3, 0.0])
    layer = Attention("unnormalized_softmax", A=I2, V=I2)
    traj = simulate(X0, layer, 5.0, method="adaptive", dt=0.005, on_blowup="stop", rtol=1e-10, atol=1e-12)
    assert traj.blew_up and traj.blowup_time < 1.0
    S, H, kappa = curvature_along_flow(traj.X, layer)
    assert np.all(np.diff(S) > 0) and np.all(np.diff(kappa) > 0)
    assert kappa[-1] > 10 * kappa[0]
    # dS/dt = 2 H at a state: move the tokens along their velocity
    X = traj.X[len(traj.t) // 2]
    g = first_variation_gradient(X, layer)
    np.testing.assert_allclose(g, velocity(X, layer), rtol=1e-12)
    eps = 1e-6
    Sp, Sm = (curvature_along_flow((X + e * g)[None], layer)[0][0] for e in (eps, -eps))
    i = len(traj.t) // 2
    assert (Sp - Sm) / (2 * eps) == pytest.approx(2 * H[i], rel=1e-6)
    with pytest.raises(ValueError, match="symmetric"):
        curvature_along_flow(traj.X[:2], layer.with_(A=np.array([[1.0, 0.5], [0.0, 1.0]])))


@pytest.mark.claim("energy-decreases-while-tokens-cluster")
def test_gaussian_energy_curves_follow_the_gaussian_energy_and_the_sign_rule():
    """Paper 1 (Castin et al., arXiv 2501.18322): along the softmax Gaussian flow with V = I, A = -I the curves of
    the chapter's explorer decrease with the closed-form energy (the sign rule says -1); M = V A^{-1} = -I, so
    d_{-M} is W2."""
    layer = Attention("softmax", A=-I2, V=I2)
    curves = gaussian_energy_curves(M0, S0, layer, 3.0, 61)
    traj = solve_gaussian(M0, S0, layer, (0, 3), t_eval=np.linspace(0, 3, 61))
    E = np.array([gaussian_interaction_energy(m, S, layer) for m, S in zip(traj.mean, traj.cov)])
    np.testing.assert_allclose(curves.energy, E, rtol=1e-6)  # two runs of the same ODE at rtol 1e-8
    assert np.all(np.diff(curves.log_energy) < 0) and curves.sign == -1 and curves.twisted is not None
    np.testing.assert_allclose(curves.twisted, curves.w2, rtol=1e-12)
    singular = gaussian_energy_curves(M0, S0, layer.with_(A=np.diag([-1.0, 0.0])), 1.0, 5)
    assert singular.M is None and singular.sign is None and singular.twisted is None
    with pytest.raises(ValueError, match="covariance"):  # needs softmax attention's quadratic covariance equation
        gaussian_energy_curves(M0, S0, Attention("linear", A=-I2, V=I2), 1.0, 5)


def test_circle_clusters_and_energy_along_build_the_configurations_of_the_chapter():
    """k equally spaced clusters are equilibria of softmax attention with A = V = I (speed 0), and the energy along
    a displacement is the interaction energy of the displaced tokens."""
    X, w = circle_clusters(3, phase=0.4)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)
    assert w is None and np.arctan2(X[0, 1], X[0, 0]) == pytest.approx(0.4)
    assert linearize(X, Attention("softmax", A=I2, V=I2, beta=3.0), w, sphere=True).speed < 1e-12
    layer = Attention("softmax", A=-I2, V=I2)
    U = np.ones_like(X)
    np.testing.assert_allclose(
        energy_along(X, U, layer, [0.0, 0.5]), [interaction_energy(X + s * U, layer) for s in (0, 0.5)]
    )
    with pytest.raises(ValueError, match="positive integer"):
        circle_clusters(0)
