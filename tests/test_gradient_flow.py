"""Tests of ``tokendynamics.gradient_flow``: interaction energies, the twisted metric, the Sinkhorn energy
and the second variation.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import ot
import pytest

import tokendynamics.attention as attention_module
from tests.helpers import I2, M0, S0
from tokendynamics import Attention, NonFiniteError, sample_gaussian, simulate, velocity
from tokendynamics.gaussian import gauss_hermite, gaussian_rhs, gaussian_velocity, solve_gaussian
from tokendynamics.gradient_flow import (
    Equilibrium,
    bw_gradient_velocity,
    dirac_second_variation,
    dissipation,
    energy_curve,
    energy_rate,
    energy_sign,
    finite_difference_gradient,
    first_variation,
    first_variation_gradient,
    gaussian_interaction_energy,
    gaussian_slope,
    gaussian_translation_hessian,
    interaction_energy,
    kinetic_norm,
    layer_matrices,
    linearize,
    second_variation,
    sinkhorn_energy,
    sinkhorn_energy_empirical,
    sinkhorn_energy_gradient,
    twisted_bures_wasserstein,
    twisted_matrix,
    twisted_wasserstein,
)
from tokendynamics.transport import psd_sqrt, wasserstein


def score(A, V=None, kind="softmax"):
    """A layer whose score matrix is ``A`` (beta = 1); the energies do not depend on ``V`` or the kind."""
    return Attention(kind, A=A, V=np.eye(np.shape(A)[0]) if V is None else V)


def sinkhorn(A, eps=1.0):
    """A Sinkhorn layer with cost matrix ``A`` and regularisation ``eps``: the model of the Sinkhorn energy."""
    return Attention("sinkhorn", A=A, V=np.eye(np.shape(A)[0]), eps=eps)


def circle_clusters(k):
    """k tokens equally spaced on the unit circle, from angle 0 (with equal masses)."""
    theta = 2 * np.pi * np.arange(k) / k
    return np.stack([np.cos(theta), np.sin(theta)], axis=1), None


def sym(rng, d, scale=1.0):
    B = rng.standard_normal((d, d))
    return scale * (B + B.T) / 2


def spd(rng, d, floor=0.3):
    B = rng.standard_normal((d, d))
    return B @ B.T / d + floor * np.eye(d)


def cloud(rng, n=40, d=2):
    X = 0.6 * rng.standard_normal((n, d))
    w = rng.random(n) + 0.2
    return X, w / w.sum()


def position_derivative(energy, X, i, a, h):
    """Central difference of ``energy`` in the coordinate ``a`` of token ``i``: (E(X + h e) - E(X - h e)) / 2h."""
    Xp, Xm = X.copy(), X.copy()
    Xp[i, a] += h
    Xm[i, a] -= h
    return (energy(Xp) - energy(Xm)) / (2 * h)


def _sinkhorn_case(seed, d=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(d), spd(rng, d), sym(rng, d), 0.4 + rng.random(), spd(rng, d)


@pytest.mark.parametrize("symmetric", [True, False])
def test_energy_equals_dense_double_sum_and_is_transpose_invariant(symmetric):
    rng = np.random.default_rng(0)
    X, w = cloud(rng)
    A = sym(rng, 2, 0.5) if symmetric else 0.5 * rng.standard_normal((2, 2))
    dense = 0.5 * w @ np.exp(X @ A @ X.T) @ w
    assert interaction_energy(X, score(A), w) == pytest.approx(dense, rel=1e-13)
    assert interaction_energy(X, score(A.T), w) == pytest.approx(dense, rel=1e-13)
    assert interaction_energy(X, score(A), w, log=True) == pytest.approx(math.log(dense), rel=1e-13)


def test_energy_blocks_agree_with_one_block(monkeypatch):
    rng = np.random.default_rng(1)
    X, w = cloud(rng, n=37)
    A = sym(rng, 2, 0.5)
    U = rng.standard_normal(X.shape)
    ref = (
        interaction_energy(X, score(A), w),
        first_variation_gradient(X, score(A), w),
        second_variation(X, U, score(A), w),
    )
    monkeypatch.setattr(attention_module, "BLOCK_ENTRIES", 50)
    import tokendynamics.gradient_flow as gf

    monkeypatch.setattr(gf, "BLOCK_ENTRIES", 50)  # blocks of one or two rows
    assert interaction_energy(X, score(A), w) == pytest.approx(ref[0], rel=1e-13)
    np.testing.assert_allclose(first_variation_gradient(X, score(A), w), ref[1], rtol=1e-12)
    assert second_variation(X, U, score(A), w) == pytest.approx(ref[2], rel=1e-12)


def test_energy_weights_equal_repeated_tokens():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((5, 2))
    A = sym(rng, 2, 0.4)
    counts = np.array([1, 3, 2, 1, 4])
    assert interaction_energy(X, score(A), counts / counts.sum()) == pytest.approx(
        interaction_energy(np.repeat(X, counts, axis=0), score(A)), rel=1e-13
    )


@pytest.mark.claim("unnormalised-attention-is-a-w2-gradient-flow")
@pytest.mark.parametrize("symmetric", [True, False])
def test_first_variation_matches_finite_differences_of_energy_in_the_weights(symmetric):
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading: the first variation of E_A is its
    derivative along a change of mass (Z_mu for symmetric A).
    """
    rng = np.random.default_rng(3)
    X, w = cloud(rng)
    A = sym(rng, 2, 0.6) if symmetric else 0.6 * rng.standard_normal((2, 2))
    chi = rng.standard_normal(len(w))
    chi -= chi.mean()  # zero total mass; w + h chi stays a probability vector for small h
    h = 1e-6
    fd = (interaction_energy(X, score(A), w + h * chi) - interaction_energy(X, score(A), w - h * chi)) / (2 * h)
    assert fd == pytest.approx(chi @ first_variation(X, score(A), w), rel=1e-7)
    if symmetric:  # delta E / delta mu = Z_mu for symmetric A
        Z = np.exp(X @ A @ X.T) @ w  # Z_mu(x_i) = sum_j w_j e^{<x_i, A x_j>}
        np.testing.assert_allclose(first_variation(X, score(A), w), Z, rtol=1e-13)


@pytest.mark.claim("unnormalised-attention-is-a-w2-gradient-flow")
@pytest.mark.parametrize("symmetric", [True, False])
def test_first_variation_gradient_matches_finite_differences_in_the_positions(symmetric):
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading: the gradient of the first variation is
    the derivative of E_A in the positions, per unit mass.
    """
    rng = np.random.default_rng(4)
    X, w = cloud(rng, n=25)
    A = sym(rng, 2, 0.6) if symmetric else 0.6 * rng.standard_normal((2, 2))
    g = first_variation_gradient(X, score(A), w)
    h = 1e-6
    for i in (0, 7, 19):
        for a in range(2):
            fd = position_derivative(lambda Y: interaction_energy(Y, score(A), w), X, i, a, h)
            assert fd == pytest.approx(w[i] * g[i, a], rel=1e-6, abs=1e-10)
    # and the gradient of the first variation at other points, by differences of first_variation
    P = rng.standard_normal((3, 2))
    gP = first_variation_gradient(X, score(A), w, at=P)
    for a in range(2):
        e = np.zeros(2)
        e[a] = h
        fd = (first_variation(X, score(A), w, at=P + e) - first_variation(X, score(A), w, at=P - e)) / (2 * h)
        np.testing.assert_allclose(fd, gP[:, a], rtol=1e-7)


@pytest.mark.claim("unnormalised-attention-is-a-w2-gradient-flow")
def test_unnormalised_attention_with_V_equal_A_is_the_gradient_of_the_first_variation():
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading: with V = A = A^T, unnormalised
    attention is the gradient of the first variation of E_A, i.e. the W2 gradient ascent of E_A.
    """
    rng = np.random.default_rng(5)
    X, w = cloud(rng)
    A = sym(rng, 2, 0.7)
    beta = 1.3
    layer = Attention("unnormalized_softmax", A=A, V=beta * A, beta=beta)
    np.testing.assert_allclose(velocity(X, layer, w), first_variation_gradient(X, layer, w), rtol=1e-12)
    np.testing.assert_allclose(layer_matrices(layer)[0], beta * A, rtol=1e-15)  # the energy of the layer is E_{beta A}


@pytest.mark.claim("score-convention", "softmax-is-a-twisted-gradient")
def test_softmax_field_is_VAinv_grad_log_Z_in_library_convention_not_transposed():
    """Paper 1 (Castin et al., arXiv 2501.18322): the softmax field is V A^{-1} grad log Z_mu in the book's
    convention (score <x, A y>); V A^{-T} (paper 1's A1 mistaken for A) fails. Also on Gaussians, against the
    Gaussian module.
    """
    rng = np.random.default_rng(6)
    X, w = cloud(rng)
    A = np.array([[0.5, 0.8], [-0.3, 0.4]])  # far from symmetric
    V = rng.standard_normal((2, 2))
    G = velocity(X, Attention("softmax", A=A, V=V), w)
    K = np.exp(X @ A @ X.T) * w[None, :]
    glog = (K @ X @ A.T) / K.sum(axis=1, keepdims=True)  # grad log Z_mu(x_i)
    np.testing.assert_allclose(G, glog @ (V @ np.linalg.inv(A)).T, atol=1e-12)
    assert np.max(np.abs(G - glog @ (V @ np.linalg.inv(A.T)).T)) > 0.1
    # the same on Gaussians, against the Gaussian module: grad log Z_mu(x) = A alpha + A Sigma A^T x for
    # mu = N(alpha, Sigma), so V A^{-1} grad log Z = V (alpha + Sigma A^T x)
    P = rng.standard_normal((4, 2))
    glogZ = (A @ M0)[None, :] + P @ (A @ S0 @ A.T).T
    b, Mg = gaussian_velocity(M0, S0, Attention("softmax", A=A, V=V))
    np.testing.assert_allclose(glogZ @ (V @ np.linalg.inv(A)).T, b + P @ Mg.T, atol=1e-12)


@pytest.mark.claim("gaussian-energy-closed-form")
def test_gaussian_interaction_energy_closed_form_matches_monte_carlo():
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading: E_{-I}(N(alpha, Sigma)) =
    1/2 det(I - Sigma^2)^{-1/2} exp(-alpha^T (I + Sigma)^{-1} alpha), against Monte Carlo.
    """
    rng = np.random.default_rng(8)
    n = 400_000
    x = sample_gaussian(n, M0, S0, rng)
    y = sample_gaussian(n, M0, S0, rng)
    vals = 0.5 * np.exp(-np.einsum("ij,ij->i", x, y))
    mc, err = vals.mean(), vals.std() / math.sqrt(n)
    E = gaussian_interaction_energy(M0, S0, score(-I2))
    assert abs(E - mc) < 4 * err
    formula = 0.5 * np.linalg.det(I2 - S0 @ S0) ** -0.5 * math.exp(-M0 @ np.linalg.solve(I2 + S0, M0))
    assert E == pytest.approx(formula, rel=1e-14)
    assert E == pytest.approx(0.558, abs=1e-3)  # the value at t = 0 of chapter 3's energy curve
    # a general non-symmetric A
    A = 0.3 * rng.standard_normal((2, 2))
    vals = 0.5 * np.exp(np.einsum("ij,jk,ik->i", x, A, y))
    assert abs(gaussian_interaction_energy(M0, S0, score(A)) - vals.mean()) < 4 * vals.std() / math.sqrt(n)


@pytest.mark.claim("gaussian-energy-closed-form")
def test_gaussian_energy_equals_energy_of_its_quadrature_and_is_infinite_beyond_the_threshold():
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading: the Gaussian energy is the energy of
    its quadrature (also for a singular covariance) and is infinite unless Sigma < I for A = -I.
    """
    rng = np.random.default_rng(9)
    A = sym(rng, 2, 0.5)
    Xq, wq = gauss_hermite(M0, S0, 30)
    assert gaussian_interaction_energy(M0, S0, score(A)) == pytest.approx(
        interaction_energy(Xq, score(A), wq), rel=1e-9
    )
    # singular covariance: a Gaussian on a line
    S1 = np.outer([1.0, 2.0], [1.0, 2.0]) * 0.1
    Xq, wq = gauss_hermite(M0, S1, 30)
    assert gaussian_interaction_energy(M0, S1, score(A)) == pytest.approx(
        interaction_energy(Xq, score(A), wq), rel=1e-9
    )
    # A = -I: finite iff Sigma < I
    assert gaussian_interaction_energy(M0, 1.01 * I2, score(-I2)) == math.inf
    assert math.isfinite(gaussian_interaction_energy(M0, 0.99 * I2, score(-I2)))


@pytest.mark.claim("energy-decreases-while-tokens-cluster", "covariance-converges-despite-non-convexity")
def test_gaussian_interaction_energy_decreases_while_covariance_vanishes_and_mean_escapes():
    """Paper 1 (Castin et al., arXiv 2501.18322): softmax attention with V = I, A = -I decreases E_{-I} (0.558 ->
    5e-8 over t in [0, 3]) while the covariance vanishes, Sigma_t^{-1} = Sigma_0^{-1} + 2 t I, and the mean
    escapes (|alpha_3| ~ 4.2).
    """
    layer = Attention("softmax", A=-I2, V=I2)
    t = np.linspace(0, 3, 61)
    traj = solve_gaussian(M0, S0, layer, (0, 3), t_eval=t)
    E = np.array([gaussian_interaction_energy(m, S, layer) for m, S in zip(traj.mean, traj.cov)])
    assert np.all(np.diff(E) < 0)
    assert E[0] == pytest.approx(0.5585, abs=1e-4) and E[-1] < 1e-7  # 0.558 -> 5e-8
    norms = np.linalg.norm(traj.mean, axis=1)
    assert np.all(np.diff(norms[10:]) > 0) and norms[-1] == pytest.approx(4.24, abs=0.02)  # |alpha_3| ~ 4.2
    tr = np.trace(traj.cov, axis1=1, axis2=2)
    assert np.all(np.diff(tr) < 0)
    # Sigma_t^{-1} = Sigma_0^{-1} + 2 t I (V = I, A = -I) -> 0 like 1/(2t)
    np.testing.assert_allclose(np.linalg.inv(traj.cov[-1]), np.linalg.inv(S0) + 6 * I2, rtol=1e-8)


@pytest.mark.claim("energy-decreases-while-tokens-cluster")
def test_energy_curve_decreases_along_the_softmax_particle_flow():
    """Paper 1 (Castin et al., arXiv 2501.18322): E_{-I} decreases along the softmax particle flow with V = I, A =
    -I.
    """
    X0 = sample_gaussian(300, M0, S0, rng=11)
    layer = Attention("softmax", A=-I2, V=I2)
    traj = simulate(X0, layer, 3.0, dt=0.05)
    E = energy_curve(traj.X, layer)
    assert np.all(np.diff(E) < 0)
    assert E[-1] / E[0] < 1e-6


@pytest.mark.claim("energy-sign-rule")
@pytest.mark.parametrize("kind", ["softmax", "unnormalized_softmax"])
def test_sign_rule_energy_rate_from_the_core_velocity_equals_the_dissipation_formula(kind):
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading (sign rule): dE/dt = int <grad Z, M
    grad Z> / Z^k dmu with M = V A^{-1}, of the sign of M + M^T when it is semi-definite; on random cases.
    """
    rng = np.random.default_rng(12)
    seen = {1: 0, -1: 0, 0: 0}
    for _ in range(60):
        A = sym(rng, 2, 0.5)
        V = rng.standard_normal((2, 2))
        X, w = cloud(rng, n=30)
        layer = Attention(kind, A=A, V=V)
        rate = energy_rate(X, layer, w)
        assert rate == pytest.approx(dissipation(X, layer, w), rel=1e-10, abs=1e-14)
        s = energy_sign(layer)
        seen[s] += 1
        if s != 0:
            assert np.sign(rate) == s
    assert seen[1] > 3 and seen[-1] > 3 and seen[0] > 3  # the random draws cover every case


@pytest.mark.claim("energy-sign-rule")
def test_energy_rate_matches_the_energy_change_along_a_short_simulation():
    """Paper 1 (Castin et al., arXiv 2501.18322), the sign rule: the energy rate from the core velocity is the
    change of E_A along a short run.
    """
    rng = np.random.default_rng(13)
    X, w = cloud(rng, n=50)
    A = sym(rng, 2, 0.5)
    layer = Attention("softmax", A=A, V=rng.standard_normal((2, 2)))
    h = 1e-4
    traj = simulate(X, layer, (0, h), dt=h / 4, weights=w)
    back = simulate(X, layer.with_(V=-layer.V[0]), (0, h), dt=h / 4, weights=w)  # time reversal
    fd = (interaction_energy(traj.final, layer, w) - interaction_energy(back.final, layer, w)) / (2 * h)
    assert fd == pytest.approx(energy_rate(X, layer, w), rel=1e-6)


@pytest.mark.claim("twisted-wasserstein-distance")
def test_energy_sign_and_twisted_matrix_need_a_symmetric_invertible_A():
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted metric: M = V A^{-1} needs a symmetric invertible A;
    V = M A gives back M.
    """
    with pytest.raises(ValueError, match="symmetric"):
        twisted_matrix(score([[1.0, 2.0], [0.0, 1.0]], I2))
    with pytest.raises(ValueError, match="invertible"):
        twisted_matrix(score([[1.0, 0.0], [0.0, 0.0]], I2))
    assert energy_sign(score(-I2, I2)) == -1 and energy_sign(score(I2, I2)) == 1
    assert energy_sign(score(np.diag([1.0, -1.0]), I2)) == 0
    A = np.diag([2.0, -0.5])
    Mt = np.array([[3.0, 0.5], [0.5, 4.0]])
    np.testing.assert_allclose(twisted_matrix(score(A, Mt @ A)), Mt, atol=1e-13)  # V = M A  ->  M


@pytest.mark.claim("twisted-wasserstein-distance")
def test_twisted_wasserstein_equals_W2_of_pushforwards_and_the_LP_with_the_twisted_cost():
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted Wasserstein metric (our reconstruction): d_M(mu, nu)
    is W2 of the pushforwards by M^{-1/2}, and the linear program with the cost <M^{-1}(x - y), x - y>.
    """
    rng = np.random.default_rng(14)
    X = rng.standard_normal((30, 2))
    Y = rng.standard_normal((25, 2)) + 1.0
    a = rng.random(30)
    a /= a.sum()
    M = spd(rng, 2)
    R = np.linalg.inv(psd_sqrt(M))
    d = twisted_wasserstein(X, Y, M, (a, None))
    assert d == pytest.approx(wasserstein(X @ R, Y @ R, 2, (a, None)), rel=1e-12)
    diff = X[:, None, :] - Y[None, :, :]
    C = np.einsum("ijk,kl,ijl->ij", diff, np.linalg.inv(M), diff)  # <M^{-1}(x-y), x-y>
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lp = ot.emd2(a, np.full(25, 1 / 25), C)
    assert d == pytest.approx(math.sqrt(lp), rel=1e-9)
    assert twisted_wasserstein(X, Y, I2, (a, None)) == pytest.approx(wasserstein(X, Y, 2, (a, None)), rel=1e-12)


@pytest.mark.claim("twisted-wasserstein-distance")
def test_twisted_bures_wasserstein_equals_POT_on_transformed_gaussians_and_the_quadrature_LP_limit():
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted metric on Gaussians: the Bures-Wasserstein distance
    of the transformed Gaussians.
    """
    rng = np.random.default_rng(15)
    M = spd(rng, 2)
    m1, m2 = rng.standard_normal(2), rng.standard_normal(2)
    S1, S2 = spd(rng, 2), spd(rng, 2)
    R = np.linalg.inv(psd_sqrt(M))
    pot = float(ot.gaussian.bures_wasserstein_distance(R @ m1, R @ m2, R @ S1 @ R, R @ S2 @ R))
    assert twisted_bures_wasserstein(m1, S1, m2, S2, M) == pytest.approx(pot, rel=1e-9)
    # commuting case in closed form: M, S1, S2 diagonal
    M, S1, S2 = np.diag([2.0, 0.5]), np.diag([0.3, 1.2]), np.diag([0.7, 0.1])
    ref = math.sqrt(
        np.sum((m1 - m2) ** 2 / np.diag(M)) + np.sum((np.sqrt(np.diag(S1)) - np.sqrt(np.diag(S2))) ** 2 / np.diag(M))
    )
    assert twisted_bures_wasserstein(m1, S1, m2, S2, M) == pytest.approx(ref, rel=1e-12)


def test_twisted_distances_reject_a_matrix_that_is_not_positive_definite():
    with pytest.raises(ValueError, match="positive definite"):
        twisted_wasserstein(np.zeros((3, 2)), np.ones((3, 2)), -I2)
    with pytest.raises(ValueError, match="positive definite"):
        twisted_bures_wasserstein(M0, S0, M0, S0, np.diag([1.0, 0.0]))


@pytest.mark.claim("twisted-wasserstein-distance")
def test_unnormalised_attention_is_the_d_M_steepest_descent_and_not_the_W2_one():
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted metric (our reconstruction): with A = -I and V > 0
    the field is -M grad(dE/dmu), M = V: its speed is the slope in d_M, not in W2.
    """
    rng = np.random.default_rng(16)
    X, w = cloud(rng, n=60)
    V = np.diag([0.1, 1.0])
    layer = Attention("unnormalized_softmax", A=-I2, V=V)
    M = -twisted_matrix(layer)
    G = velocity(X, layer, w)
    g = first_variation_gradient(X, layer, w)
    np.testing.assert_allclose(G, -g @ M.T, atol=1e-13)
    rate = energy_rate(X, layer, w)
    slope_M = kinetic_norm(g @ M, w, M)
    assert -rate == pytest.approx(slope_M**2, rel=1e-12)
    assert kinetic_norm(G, w, M) == pytest.approx(slope_M, rel=1e-12)
    cos_W2 = -rate / (kinetic_norm(G, w) * kinetic_norm(g, w))
    assert cos_W2 < 0.95


@pytest.mark.claim("sinkhorn-energy-is-entropic-ot")
def test_sinkhorn_energy_closed_form_equals_entropic_OT_of_a_gauss_hermite_quadrature():
    """Paper 1 (Castin et al., arXiv 2501.18322), Sinkhorn attention and entropic optimal transport: the
    closed-form F_eps(alpha, Sigma) is the entropic OT energy of a Gauss-Hermite quadrature of the Gaussian.
    """
    A = np.array([[0.6, 0.3], [0.3, -0.8]])
    for eps in (0.5, 1.0, 2.0):
        Xq, wq = gauss_hermite(M0, S0, 10)
        assert sinkhorn_energy_empirical(Xq, sinkhorn(A, eps), wq) == pytest.approx(
            sinkhorn_energy(M0, S0, sinkhorn(A, eps)), abs=1e-9
        )


@pytest.mark.claim("sinkhorn-energy-limits")
def test_sinkhorn_energy_limits():
    """Paper 1 (Castin et al., arXiv 2501.18322), the Sinkhorn energy: as eps -> 0, F_0 = -1/2 a^T A a - 1/2 tr
    (S^1/2 A S A S^1/2)^1/2; for large eps, F ~ -1/2 a^T A a - tr(S A S A) / (4 eps).
    """
    m, S, A, _, _ = _sinkhorn_case(17)
    # eps -> 0: F_0 = -1/2 a^T A a - 1/2 tr (S^1/2 A S A S^1/2)^1/2
    R = psd_sqrt(S)
    F0 = -0.5 * m @ A @ m - 0.5 * np.trace(psd_sqrt(R @ A @ S @ A @ R))
    assert sinkhorn_energy(m, S, sinkhorn(A, 1e-6)) == pytest.approx(F0, rel=1e-5)
    # eps large: F ~ -1/2 a^T A a - tr(S A S A) / (4 eps)
    eps = 1e4
    approx = -0.5 * m @ A @ m - np.trace(S @ A @ S @ A) / (4 * eps)
    assert sinkhorn_energy(m, S, sinkhorn(A, eps)) - approx == pytest.approx(0, abs=1e-9)


@pytest.mark.claim("sinkhorn-is-a-bw-gradient-flow")
@pytest.mark.parametrize("seed", [18, 19, 20])
def test_sinkhorn_energy_gradient_matches_finite_differences(seed):
    """Paper 1 (Castin et al., arXiv 2501.18322), the Sinkhorn energy: its closed-form gradient against finite
    differences.
    """
    m, S, A, eps, _ = _sinkhorn_case(seed)
    g, G = sinkhorn_energy_gradient(m, S, sinkhorn(A, eps))
    fg, fG = finite_difference_gradient(lambda a, s: sinkhorn_energy(a, s, sinkhorn(A, eps)), m, S)
    np.testing.assert_allclose(g, fg, atol=1e-8)
    np.testing.assert_allclose(G, fG, atol=1e-8)


@pytest.mark.claim("sinkhorn-is-a-bw-gradient-flow")
@pytest.mark.parametrize("seed", [21, 22, 23])
def test_bw_gradient_velocity_of_the_sinkhorn_energy_is_the_sinkhorn_gaussian_ode_with_V_equal_A(seed):
    """Paper 1 (Castin et al., arXiv 2501.18322): on Gaussians, Sinkhorn attention with V = A is the
    Bures-Wasserstein gradient flow of the closed-form F_eps (gradient by finite differences, not trusted from
    the closed form).
    """
    m, S, A, eps, _ = _sinkhorn_case(seed)
    fg, fG = finite_difference_gradient(lambda a, s: sinkhorn_energy(a, s, sinkhorn(A, eps)), m, S)
    dm, dS = gaussian_rhs(m, S, Attention("sinkhorn", A=A, V=A, eps=eps))
    vm, vS = bw_gradient_velocity(fg, fG, S)
    assert np.max(np.abs(dm - vm)) < 1e-7 and np.max(np.abs(dS - vS)) < 1e-7
    assert np.max(np.abs(dS)) > 1e-2  # not a trivial agreement


@pytest.mark.claim("sinkhorn-is-a-twisted-bw-gradient-flow")
@pytest.mark.parametrize("seed", [24, 25])
def test_bw_gradient_velocity_twisted_by_M_is_the_sinkhorn_gaussian_ode_with_V_equal_MA(seed):
    """Paper 1 (Castin et al., arXiv 2501.18322), the twisted metric: with V = M A, Sinkhorn attention is the d_M
    Bures-Wasserstein gradient flow of F_eps, and not the untwisted one.
    """
    m, S, A, eps, M = _sinkhorn_case(seed)
    fg, fG = finite_difference_gradient(lambda a, s: sinkhorn_energy(a, s, sinkhorn(A, eps)), m, S)
    dm, dS = gaussian_rhs(m, S, Attention("sinkhorn", A=A, V=M @ A, eps=eps))
    vm, vS = bw_gradient_velocity(fg, fG, S, M)
    assert np.max(np.abs(dm - vm)) < 1e-7 and np.max(np.abs(dS - vS)) < 1e-7
    # and it is not the untwisted flow
    um, uS = bw_gradient_velocity(fg, fG, S)
    assert np.max(np.abs(dS - uS)) > 1e-2


@pytest.mark.claim("sinkhorn-is-a-bw-gradient-flow")
def test_layer_matrices_beta_scales_the_sinkhorn_cost_matrix():
    """Paper 1 (Castin et al., arXiv 2501.18322): a Sinkhorn layer with inverse temperature beta and V = beta A is
    the gradient flow of F_eps for the cost matrix beta A.
    """
    m, S, A, eps, _ = _sinkhorn_case(26)
    beta = 1.7
    layer = Attention("sinkhorn", A=A, V=beta * A, eps=eps, beta=beta)
    np.testing.assert_allclose(layer_matrices(layer)[0], beta * A, rtol=1e-15)
    g, G = sinkhorn_energy_gradient(m, S, layer)
    dm, dS = gaussian_rhs(m, S, layer)
    vm, vS = bw_gradient_velocity(g, G, S)
    np.testing.assert_allclose(dm, vm, atol=1e-12)
    np.testing.assert_allclose(dS, vS, atol=1e-12)


@pytest.mark.claim("softmax-on-centred-gaussians-is-a-bw-gradient-flow")
def test_bw_gradient_velocity_of_the_softmax_energy_is_the_softmax_covariance_ode_on_centred_gaussians(rng):
    """Paper 1 (Castin et al., arXiv 2501.18322), the gradient-flow reading: softmax attention with V = A = A^T on
    centred Gaussians is the Bures-Wasserstein gradient flow of -tr(Sigma A Sigma A)/4 (the small-score limit of
    the Sinkhorn energy); the gradient is taken by finite differences.
    """
    for _ in range(2):
        S, A = spd(rng, 3), sym(rng, 3)
        zero = np.zeros(3)
        fg, fG = finite_difference_gradient(lambda a, s, A=A: -0.25 * np.trace(s @ A @ s @ A), zero, S)
        dm, dS = gaussian_rhs(zero, S, Attention("softmax", A=A, V=A))
        vm, vS = bw_gradient_velocity(fg, fG, S)
        assert np.max(np.abs(dm - vm)) < 1e-7 and np.max(np.abs(dS - vS)) < 1e-7
        assert np.max(np.abs(dS)) > 1e-2  # not a trivial agreement


@pytest.mark.claim("sinkhorn-is-a-w2-gradient-flow")
def test_sinkhorn_energy_empirical_gradient_is_minus_the_sinkhorn_field():
    """Paper 1 (Castin et al., arXiv 2501.18322), after Sander et al.: Sinkhorn attention with V = A is the W2
    gradient flow of F_eps = OT_eps(mu, mu) / 2; on tokens the gradient of the empirical energy is minus the
    field.
    """
    rng = np.random.default_rng(27)
    X, w = cloud(rng, n=40)
    A = sym(rng, 2, 0.8)
    eps = 0.7
    G = velocity(X, Attention("sinkhorn", A=A, V=A, eps=eps), w)
    h = 1e-5
    for i in (0, 13, 31):
        for a in range(2):
            fd = position_derivative(lambda Y: sinkhorn_energy_empirical(Y, sinkhorn(A, eps), w), X, i, a, h)
            assert fd == pytest.approx(-w[i] * G[i, a], rel=1e-5, abs=1e-10)


@pytest.mark.claim("sinkhorn-energy-decreases")
def test_sinkhorn_energy_strictly_decreases_along_the_flow_at_the_rate_minus_slope_squared():
    """Paper 1 (Castin et al., arXiv 2501.18322): F_eps decreases strictly along the Sinkhorn flow (V = A and V = M
    A), at the rate minus the squared slope in the flow's metric.
    """
    m, S, A, eps, M = _sinkhorn_case(28)
    for MM in (None, M):
        V = A if MM is None else MM @ A
        layer = Attention("sinkhorn", A=A, V=V, eps=eps)
        traj = solve_gaussian(m, S, layer, (0, 2.0), t_eval=np.linspace(0, 2.0, 41))
        F = np.array([sinkhorn_energy(a, s, sinkhorn(A, eps)) for a, s in zip(traj.mean, traj.cov)])
        assert np.all(np.diff(F) < 0)
        k = 20
        h = 1e-5
        dm, dS = gaussian_rhs(traj.mean[k], traj.cov[k], layer)
        dF = (
            sinkhorn_energy(traj.mean[k] + h * dm, traj.cov[k] + h * dS, sinkhorn(A, eps))
            - sinkhorn_energy(traj.mean[k] - h * dm, traj.cov[k] - h * dS, sinkhorn(A, eps))
        ) / (2 * h)
        g, G = sinkhorn_energy_gradient(traj.mean[k], traj.cov[k], sinkhorn(A, eps))
        assert dF == pytest.approx(-(gaussian_slope(g, G, traj.cov[k], MM) ** 2), rel=1e-6)


@pytest.mark.claim("sinkhorn-energy-is-entropic-ot")
def test_sinkhorn_energy_empirical_on_a_quadrature_follows_the_gaussian_value_along_the_flow():
    """Paper 1 (Castin et al., arXiv 2501.18322): weighted tokens on a Gauss-Hermite grid follow the Gaussian value
    of F_eps along the Sinkhorn flow, and it decreases.
    """
    A = np.array([[0.6, 0.3], [0.3, -0.8]])
    layer = Attention("sinkhorn", A=A, V=A)
    Xq, wq = gauss_hermite(M0, S0, 8)
    traj = simulate(Xq, layer, 1.0, dt=0.1, weights=wq)
    F = np.array([sinkhorn_energy_empirical(X, sinkhorn(A, 1.0), wq) for X in traj.X])
    ode = solve_gaussian(M0, S0, layer, (0, 1.0), t_eval=traj.t)
    Fg = np.array([sinkhorn_energy(a, s, sinkhorn(A, 1.0)) for a, s in zip(ode.mean, ode.cov)])
    assert np.all(np.diff(F) < 0)
    np.testing.assert_allclose(F, Fg, atol=1e-6)


@pytest.mark.claim("energy-is-not-displacement-convex")
@pytest.mark.parametrize("symmetric", [True, False])
def test_second_variation_formula_matches_finite_difference_second_derivative(symmetric):
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity: the second variation of E_A along (Id + s w)_# mu
    against a finite-difference second derivative.
    """
    rng = np.random.default_rng(29)
    X, w = cloud(rng, n=45)
    A = sym(rng, 2, 0.6) if symmetric else 0.6 * rng.standard_normal((2, 2))
    U = rng.standard_normal(X.shape)
    s = 1e-3
    E = [interaction_energy(X + t * U, score(A), w) for t in (-s, 0.0, s)]
    fd = (E[0] - 2 * E[1] + E[2]) / s**2
    assert second_variation(X, U, score(A), w) == pytest.approx(fd, rel=1e-5)


@pytest.mark.claim("energy-is-not-displacement-convex")
def test_second_variation_at_the_clustered_state_is_negative():
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity: at delta_0 the second variation of E_{-I} along w
    is -|w|^2, so E_{-I} is not displacement convex.
    """
    w0 = np.array([0.6, -0.8])
    assert dirac_second_variation(np.zeros(2), w0, score(-I2)) == pytest.approx(-1.0, rel=1e-14)
    assert second_variation(np.zeros((1, 2)), w0[None], score(-I2)) == pytest.approx(-1.0, rel=1e-14)
    # along translations of delta_0 the energy is 1/2 exp(-s^2 |w|^2), concave on |s| < 1/sqrt 2
    s = np.linspace(-0.5, 0.5, 11)
    E = [interaction_energy(t * w0[None], score(-I2)) for t in s]
    np.testing.assert_allclose(E, 0.5 * np.exp(-(s**2)), rtol=1e-14)
    # any Dirac mass and A: closed form against the empirical formula
    rng = np.random.default_rng(30)
    x0, w1, A = rng.standard_normal(2), rng.standard_normal(2), rng.standard_normal((2, 2))
    assert dirac_second_variation(x0, w1, score(A)) == pytest.approx(
        second_variation(x0[None], w1[None], score(A)), rel=1e-12
    )


@pytest.mark.claim("energy-is-not-displacement-convex")
def test_gaussian_translation_hessian_matches_finite_differences_and_is_negative_orthogonally_to_the_mean():
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity on Gaussians: E_{-I} is concave along translations
    orthogonal to (I + Sigma)^{-1} alpha.
    """
    rng = np.random.default_rng(31)
    A = 0.4 * rng.standard_normal((2, 2))
    w = rng.standard_normal(2)
    s = 1e-3
    E = [gaussian_interaction_energy(M0 + t * w, S0, score(A)) for t in (-s, 0, s)]
    assert gaussian_translation_hessian(M0, S0, score(A), w) == pytest.approx((E[0] - 2 * E[1] + E[2]) / s**2, rel=1e-5)
    # A = -I: G = -2 (I + Sigma)^{-1}; the direction w with w^T G alpha = 0 gives E * w^T G w < 0
    G = -2 * np.linalg.inv(I2 + S0)
    Ga = G @ M0
    w_perp = np.array([-Ga[1], Ga[0]])
    H = gaussian_translation_hessian(M0, S0, score(-I2), w_perp)
    assert H == pytest.approx(gaussian_interaction_energy(M0, S0, score(-I2)) * (w_perp @ G @ w_perp), rel=1e-12)
    assert H < 0
    # and the quadrature version of the second variation agrees
    Xq, wq = gauss_hermite(M0, S0, 24)
    assert second_variation(Xq, np.tile(w_perp, (len(wq), 1)), score(-I2), wq) == pytest.approx(H, rel=1e-8)


@pytest.mark.claim("sinkhorn-energy-is-concave-along-dilations")
def test_sinkhorn_energy_is_concave_along_dilations_for_A_minus_identity():
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity: for A = -I the Sinkhorn energy F_eps(alpha,
    (1+s)^2 Sigma) is concave in s.
    """
    s = np.linspace(-0.5, 1.0, 61)
    F = np.array([sinkhorn_energy(M0, (1 + t) ** 2 * S0, sinkhorn(-I2, 1.0)) for t in s])
    assert np.all(np.diff(F, 2) < 0) and np.all(np.diff(F) < 0)


@pytest.mark.claim("energy-has-several-equilibria", "equally-spaced-clusters-are-equilibria")
def test_equally_spaced_clusters_on_the_circle_are_equilibria_below_the_single_cluster_and_unstable():
    """Paper 1 (Castin et al., arXiv 2501.18322), non-convexity: the energy has several equilibria. Softmax attention
    on the circle with A = V = I, beta = 6: k equally spaced clusters of equal mass are equilibria for every k, at
    energies decreasing with k; only the single cluster is stable, the others have k - 1 growing directions (all but
    the rotation), the antipodal pair at the rate 2 / (1 + e^{2 beta}). Equilibria at several energy levels rule out
    an energy that is concave along the geodesics of any transport metric (each equilibrium would be a maximum).
    """
    beta = 6.0
    layer = Attention("softmax", A=I2, V=I2, beta=beta)
    states = [linearize(X, layer, w, sphere=True) for X, w in map(circle_clusters, range(1, 7))]
    assert all(isinstance(st, Equilibrium) and st.speed < 1e-12 for st in states)
    energies = np.array([st.energy for st in states])
    assert energies[0] == pytest.approx(0.5 * math.exp(beta), rel=1e-14)
    assert np.all(np.diff(energies) < 0)
    # E_k = 1/(2k) sum_q exp(beta cos(2 pi q / k))
    for k, E in enumerate(energies, start=1):
        assert E == pytest.approx(np.mean(np.exp(beta * np.cos(2 * np.pi * np.arange(k) / k))) / 2, rel=1e-13)
    assert [st.unstable for st in states] == [0, 1, 2, 3, 4, 5]
    assert states[1].growth_rate == pytest.approx(2 / (1 + math.exp(2 * beta)), rel=1e-5)
    assert np.all(np.diff([st.growth_rate for st in states[1:]]) > 0)  # more clusters, faster escape
    # each cluster as three coincident tokens: the same growing direction, and stable splitting modes
    X, _ = circle_clusters(2)
    split = linearize(np.repeat(X, 3, axis=0), layer, sphere=True)
    assert split.growth_rate == pytest.approx(states[1].growth_rate, rel=1e-5) and split.unstable == 1
    assert np.sum(split.eigenvalues < -0.5) == 4


def test_linearize_matches_the_analytic_jacobian_in_Rd_and_the_circle_on_a_great_circle_of_the_sphere():
    """linearize: one token under unnormalised attention, x' = V x e^{<x, A x>}, has the Jacobian
    e^{<x, A x>} (V + V x x^T (A + A^T)); two antipodal clusters on the sphere of R^3 grow at the circle's rate in
    both directions orthogonal to them; bad input is refused."""
    rng = np.random.default_rng(40)
    A, V = 0.4 * rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    x = 0.7 * rng.standard_normal(2)
    st = linearize(x[None], Attention("unnormalized_softmax", A=A, V=V))
    J = math.exp(x @ A @ x) * (V + V @ np.outer(x, x) @ (A + A.T))
    np.testing.assert_allclose(np.sort_complex(st.eigenvalues), np.sort_complex(np.linalg.eigvals(J)), rtol=1e-7)
    beta = 2.0
    X3 = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    sphere_st = linearize(X3, Attention("softmax", A=np.eye(3), V=np.eye(3), beta=beta), sphere=True)
    rate = 2 / (1 + math.exp(2 * beta))
    np.testing.assert_allclose(sphere_st.eigenvalues, [rate, rate, 0.0, 0.0], atol=1e-8)
    with pytest.raises(ValueError, match="unit-norm"):
        linearize(2 * X3, Attention("softmax", A=np.eye(3), V=np.eye(3)), sphere=True)
    with pytest.raises(TypeError, match="Attention"):
        linearize(X3, "softmax")


def test_bad_input_gives_clear_errors_not_nan():
    with pytest.raises(ValueError, match="non-finite"):
        interaction_energy(np.array([[np.nan, 0.0]]), score(I2))
    with pytest.raises(ValueError, match="square"):
        interaction_energy(np.zeros((3, 2)), score(np.ones((2, 3))))
    with pytest.raises(ValueError, match="sum to 1"):
        interaction_energy(np.zeros((3, 2)), score(I2), [0.5, 0.5, 0.5])
    with pytest.raises(NonFiniteError, match="overflows"):
        interaction_energy(np.array([[30.0, 0.0]]), score(I2))
    assert interaction_energy(np.array([[30.0, 0.0]]), score(I2), log=True) == pytest.approx(900 + math.log(0.5))
    with pytest.raises(ValueError, match="positive semi-definite"):
        gaussian_interaction_energy(M0, -S0, score(-I2))
    with pytest.raises(ValueError, match="symmetric"):
        sinkhorn_energy(M0, S0, sinkhorn([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="eps"):
        sinkhorn(-I2, 0.0)
    with pytest.raises(ValueError, match="finite differences"):
        finite_difference_gradient(lambda a, s: 0.0, M0, np.diag([1.0, 0.0]))
    with pytest.raises(ValueError, match="one head"):
        layer_matrices(Attention("softmax", A=np.stack([I2, I2]), V=np.stack([I2, I2])))
