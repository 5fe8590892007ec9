"""Tests of ``tokendynamics.particles``: integrators, convergence orders, the sphere, symmetries and
blow-up reporting.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from tests.helpers import linear_reference, random_layer
from tokendynamics import (
    Attention,
    BlowUpError,
    metrics,
    normalize_rows,
    particle_field,
    project_tangent,
    sample_gaussian,
    sample_sphere,
    simulate,
    velocity,
)
from tokendynamics.book.studies import highdim as hd
from tokendynamics.kuramoto import linear_layers, phase_velocity


def fitted_order(dts, errors):
    return np.polyfit(np.log(dts), np.log(errors), 1)[0]


@pytest.fixture
def smooth_case():
    rng = np.random.default_rng(7)
    X0 = rng.standard_normal((6, 2))
    layer = Attention("softmax", A=0.5 * rng.standard_normal((2, 2)), V=rng.standard_normal((2, 2)) * 0.7)
    return X0, layer


def _errors(X0, layer, method, dts, sphere=False):
    ref = simulate(X0, layer, 1.0, method="adaptive", rtol=1e-13, atol=1e-14, t_eval=[0.0, 1.0], sphere=sphere).final
    return [np.max(np.abs(simulate(X0, layer, 1.0, dt=dt, method=method, sphere=sphere).final - ref)) for dt in dts]


def test_rk4_converges_at_order_four(smooth_case):
    X0, layer = smooth_case
    dts = [0.2, 0.1, 0.05, 0.025]
    order = fitted_order(dts, _errors(X0, layer, "rk4", dts))
    assert 3.7 < order < 4.4, order


def test_euler_converges_at_order_one(smooth_case):
    X0, layer = smooth_case
    dts = [0.02, 0.01, 0.005, 0.0025]
    order = fitted_order(dts, _errors(X0, layer, "euler", dts))
    assert 0.9 < order < 1.15, order


@pytest.mark.parametrize(
    "method, lo, hi, dts",
    [("rk4", 3.7, 4.4, [0.2, 0.1, 0.05, 0.025]), ("euler", 0.9, 1.15, [0.02, 0.01, 0.005, 0.0025])],
)
def test_retraction_to_the_sphere_keeps_the_order_of_the_step(method, lo, hi, dts):
    rng = np.random.default_rng(3)
    X0 = sample_sphere(8, 3, rng)
    layer = Attention("softmax", A=rng.standard_normal((3, 3)), V=rng.standard_normal((3, 3)), beta=1.5)
    order = fitted_order(dts, _errors(X0, layer, method, dts, sphere=True))
    assert lo < order < hi, order


@pytest.mark.claim("tokens-stay-on-the-sphere")
@pytest.mark.parametrize("method", ["rk4", "euler", "adaptive"])
@pytest.mark.parametrize("kind", ["softmax", "linear", "unnormalized_softmax"])
def test_tokens_stay_on_the_sphere(method, kind):
    """Paper 2 (Li et al., 2026): tokens on the sphere stay there under every integrator (retraction after each
    step).
    """
    rng = np.random.default_rng(11)
    X0 = sample_sphere(20, 4, rng)
    layer = Attention(kind, A=rng.standard_normal((4, 4)), V=rng.standard_normal((4, 4)))
    traj = simulate(X0, layer, 3.0, dt=0.05, method=method, sphere=True)
    assert np.max(np.abs(np.linalg.norm(traj.X, axis=2) - 1)) < 1e-12


@pytest.mark.claim("tokens-stay-on-the-sphere")
def test_sphere_field_is_tangent():
    """Paper 2 (Li et al., 2026): the projected field P_x(Gamma) is tangent to the sphere."""
    from tokendynamics import particle_field

    rng = np.random.default_rng(2)
    X = sample_sphere(10, 3, rng)
    U = particle_field(X, Attention("softmax", A=np.eye(3), V=rng.standard_normal((3, 3))), sphere=True)
    np.testing.assert_allclose(np.sum(U * X, axis=1), 0.0, atol=1e-14)


@pytest.mark.claim("antipodal-symmetry")
def test_linear_attention_trajectory_is_invariant_under_flipping_a_token_sign():
    """Paper 2 (Li et al., 2026): linear attention is odd in each token, flipping x_k flips only its trajectory (softmax
    has no such symmetry).
    """
    rng = np.random.default_rng(4)
    X0 = sample_sphere(12, 3, rng)
    layer = Attention("linear", A=rng.standard_normal((3, 3)), V=rng.standard_normal((3, 3)))
    flipped = X0.copy()
    flipped[3] *= -1
    a = simulate(X0, layer, 2.0, dt=0.01, sphere=True)
    b = simulate(flipped, layer, 2.0, dt=0.01, sphere=True)
    sign = np.ones(12)
    sign[3] = -1
    np.testing.assert_allclose(b.X, a.X * sign[None, :, None], atol=1e-13)
    # softmax has no such symmetry
    soft = Attention("softmax", A=layer.A[0], V=layer.V[0])
    c = simulate(X0, soft, 2.0, dt=0.01, sphere=True)
    e = simulate(flipped, soft, 2.0, dt=0.01, sphere=True)
    assert np.max(np.abs(e.X * sign[None, :, None] - c.X)) > 1e-3


@pytest.mark.claim("rotation-equivariance")
@pytest.mark.parametrize("kind", ["softmax", "linear", "sinkhorn", "sigmoid"])
def test_trajectories_are_rotation_equivariant(kind):
    """Paper 2 (Li et al., 2026): x -> Ux with A -> U A U^T, V -> U V U^T is a symmetry of the particle system in
    R^d.
    """
    rng = np.random.default_rng(9)
    d = 3
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    A, V = 0.3 * rng.standard_normal((d, d)), 0.3 * rng.standard_normal((d, d))
    X0 = rng.standard_normal((7, d))
    a = simulate(X0, Attention(kind, A=A, V=V), 0.5, dt=0.05)
    b = simulate(X0 @ U.T, Attention(kind, A=U @ A @ U.T, V=U @ V @ U.T), 0.5, dt=0.05)
    np.testing.assert_allclose(b.X, a.X @ U.T, atol=1e-10)


@pytest.mark.claim("beta-only-rescales-time")
def test_linear_attention_beta_only_rescales_time():
    """Paper 2 (Li et al., 2026): for linear attention beta only rescales time, x^beta(t) = x^1(beta t)."""
    rng = np.random.default_rng(6)
    X0 = sample_sphere(10, 3, rng)
    A, V = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    slow = linear_reference(X0, A, V, 2.0, [0, 1.0, 2.0], rtol=1e-12)
    fast = linear_reference(X0, A, V, 1.0, [0, 0.5, 1.0], beta=2.0, rtol=1e-12)
    np.testing.assert_allclose(fast.X, slow.X, atol=1e-9)


def test_blowup_is_reported_with_its_time():
    """One token under linear attention, A = V = 1: x' = x^3, x(t) = 1/sqrt(1 - 2t), T* = 1/2."""
    layer = Attention("linear", A=[[1.0]], V=[[1.0]])
    X0 = np.array([[1.0]])
    with pytest.raises(BlowUpError) as info:
        simulate(X0, layer, 1.0, dt=1e-4)
    assert abs(info.value.time - 0.5) < 2e-3
    assert "blow-up detected at t = 0.5" in str(info.value)
    traj = simulate(X0, layer, 1.0, dt=1e-4, on_blowup="stop")
    assert traj.blew_up and abs(traj.blowup_time - 0.5) < 2e-3
    assert traj.t[-1] < traj.blowup_time and np.all(np.isfinite(traj.X))
    ada = simulate(X0, layer, 1.0, method="adaptive", on_blowup="stop", rtol=1e-10, atol=1e-12)
    assert abs(ada.blowup_time - 0.5) < 1e-6
    with pytest.raises(BlowUpError):
        simulate(X0, layer, 1.0, method="adaptive")


def test_overflow_of_the_field_is_a_blowup_not_a_nan():
    layer = Attention("unnormalized_softmax", A=[[1.0]], V=[[1.0]])
    with pytest.raises(BlowUpError, match="non-finite velocity|exceeded"):
        simulate(np.array([[2.0], [2.5]]), layer, 5.0, dt=1e-3)


def test_depth_dependent_parameters():
    """A single token under softmax attention moves by V(t) x: x(T) = x0 exp(int_0^T v(t) dt)."""
    layer = lambda t: Attention("softmax", A=[[0.3]], V=[[np.cos(t)]])  # noqa: E731
    traj = simulate(np.array([[1.5]]), layer, 2.0, dt=0.01)
    assert abs(traj.final[0, 0] - 1.5 * np.exp(np.sin(2.0))) < 1e-8
    with pytest.raises(TypeError, match="must return an Attention"):
        simulate(np.array([[1.0]]), lambda t: None, 1.0, dt=0.1)


def test_trajectory_records_provenance_and_does_not_mutate_input():
    rng = np.random.default_rng(0)
    X0 = sample_gaussian(30, [0.0, 0.0], np.eye(2), rng)
    keep = X0.copy()
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    traj = simulate(X0, layer, 1.0, dt=0.1, save_every=3, seed=0)
    np.testing.assert_array_equal(X0, keep)
    assert traj.X.shape == (len(traj.t), 30, 2)
    np.testing.assert_allclose(traj.t, [0, 0.3, 0.6, 0.9, 1.0])
    p = traj.params()
    assert p["seed"] == 0 and p["method"] == "rk4" and p["layer"]["kind"] == "softmax" and p["n"] == 30


def test_step_is_adjusted_to_reach_the_final_time_exactly():
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    traj = simulate(np.eye(2), layer, 1.0, dt=0.3)
    assert traj.t[-1] == pytest.approx(1.0) and traj.dt == pytest.approx(0.25)


def test_bad_simulation_arguments_raise_clear_errors():
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    X0 = normalize_rows(np.array([[1.0, 1.0], [1.0, -2.0]]))
    with pytest.raises(ValueError, match="needs a positive step dt"):
        simulate(X0, layer, 1.0)
    with pytest.raises(ValueError, match="method must be"):
        simulate(X0, layer, 1.0, dt=0.1, method="rk45")
    with pytest.raises(ValueError, match="t0 < T"):
        simulate(X0, layer, (1.0, 0.5), dt=0.1)
    with pytest.raises(ValueError, match="unit-norm tokens"):
        simulate(2 * X0, layer, 1.0, dt=0.1, sphere=True)
    with pytest.raises(ValueError, match="dimension 3 but the layer has d = 2"):
        simulate(np.ones((2, 3)), layer, 1.0, dt=0.1)
    with pytest.raises(ValueError, match="on_blowup"):
        simulate(X0, layer, 1.0, dt=0.1, on_blowup="ignore")
    with pytest.raises(ValueError, match="positive semi-definite"):
        sample_gaussian(5, [0, 0], [[1.0, 0.0], [0.0, -1.0]])
    with pytest.raises(ValueError, match="symmetric"):
        sample_gaussian(5, [0, 0], [[1.0, 0.5], [0.0, 1.0]])


def test_sample_gaussian_has_the_requested_moments_and_a_singular_covariance_keeps_samples_on_its_support():
    mean, cov = np.array([0.3, -1.0]), np.array([[0.5, 0.2], [0.2, 0.3]])
    n = 200_000
    X = sample_gaussian(n, mean, cov, rng=5)
    # standard errors: sqrt(cov_ii / n) for the mean, about sqrt(2 / n) * |cov| for the covariance
    assert np.max(np.abs(X.mean(0) - mean)) < 4 * np.sqrt(0.5 / n)
    assert np.max(np.abs(np.cov(X.T) - cov)) < 4 * np.sqrt(2.0 / n) * 0.5
    np.testing.assert_array_equal(sample_gaussian(50, mean, cov, rng=5), X[:50])  # reproducible from the seed
    u = np.array([1.0, 2.0])
    line = sample_gaussian(1000, mean, np.outer(u, u), rng=6)
    np.testing.assert_allclose((line - mean) @ np.array([2.0, -1.0]), 0.0, atol=1e-12)  # on mean + R u
    assert np.std((line - mean) @ u / 5) == pytest.approx(1.0, rel=0.1)


@pytest.mark.claim("tokens-stay-on-the-sphere")
@pytest.mark.parametrize("kind", ["linear", "unnormalized_softmax"])
def test_velocity_tangent_field_keeps_tokens_on_the_sphere_without_renormalisation(kind):
    """Paper 2 (Li et al., 2026): tokens stay on the sphere; d = 100, n = 200, RK45 with rtol 1e-6 and no
    renormalisation: norm drift below 1e-6.
    """
    rng = np.random.default_rng(13)
    d, n = 100, 200
    X0 = sample_sphere(n, d, rng)
    layer = Attention(kind, A=rng.standard_normal((d, d)) / math.sqrt(d), V=rng.standard_normal((d, d)) / math.sqrt(d))

    def rhs(t, y):
        X = y.reshape(n, d)
        return project_tangent(X, velocity(X, layer)).ravel()

    sol = solve_ivp(rhs, (0, 5.0), X0.ravel(), method="RK45", rtol=1e-6, atol=1e-8)
    norms = np.linalg.norm(sol.y.T.reshape(-1, n, d), axis=2)
    assert np.max(np.abs(norms - 1)) < 1e-6


@pytest.mark.claim("linear-attention-energy-does-not-decrease")
def test_simulate_linear_attention_with_V_equal_A_symmetric_does_not_decrease_the_energy():
    """Paper 2 (Li et al., 2026): with V = A = A^T linear attention is a gradient ascent, tr(A Sigma A Sigma) does
    not decrease (solver noise -1e-8 allowed).
    """
    rng = np.random.default_rng(18)
    M = rng.standard_normal((4, 4))
    A = 0.5 * (M + M.T)
    traj = simulate(
        sample_sphere(50, 4, rng),
        Attention("linear", A=A, V=A),
        20.0,
        method="adaptive",
        t_eval=np.linspace(0, 20, 401),
        sphere=True,
    )
    Sig = np.einsum("tni,tnj->tij", traj.X, traj.X) / 50
    energy = np.einsum("ij,tjk,kl,tli->t", A, Sig, A, Sig)
    assert np.min(np.diff(energy)) > -1e-8
    assert energy[-1] > energy[0]


@pytest.mark.claim("antipodal-symmetry")
def test_simulate_linear_attention_flipping_one_token_flips_only_that_token():
    """Paper 2 (Li et al., 2026): linear attention trajectories of (.., x_k, ..) and (.., -x_k, ..) coincide up to
    that sign (d = 2 and d = 3), and the angle velocities do not see theta_k -> theta_k + pi.
    """
    rng = np.random.default_rng(19)
    for d in (2, 3):
        X0 = sample_sphere(9, d, rng)
        layer = Attention("linear", A=rng.standard_normal((d, d)), V=rng.standard_normal((d, d)))
        Y0 = X0.copy()
        Y0[4] *= -1
        a = simulate(X0, layer, 5.0, dt=0.01, sphere=True).X
        b = simulate(Y0, layer, 5.0, dt=0.01, sphere=True).X
        b[:, 4] *= -1
        assert np.max(np.abs(a - b)) < 1e-12
    theta = rng.uniform(0, 6, 9)
    flipped = theta.copy()
    flipped[3] += np.pi
    A, V, beta = random_layer(rng)
    layer = linear_layers(A, V, beta)
    np.testing.assert_allclose(phase_velocity(theta, layer), phase_velocity(flipped, layer), atol=1e-13)


@pytest.mark.claim("rotation-equivariance")
@pytest.mark.parametrize("kind", ["linear", "unnormalized_softmax", "softmax"])
def test_simulate_on_the_sphere_is_rotation_equivariant(kind):
    """Paper 2 (Li et al., 2026): x -> U x with A -> U A U^T, V -> U V U^T is a symmetry on the sphere (every
    variant).
    """
    rng = np.random.default_rng(21)
    d = 3
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    A, V = rng.standard_normal((d, d)), rng.standard_normal((d, d))
    X0 = sample_sphere(12, d, rng)
    a = simulate(X0, Attention(kind, A=A, V=V), 3.0, dt=0.01, sphere=True).X
    b = simulate(X0 @ U.T, Attention(kind, A=U @ A @ U.T, V=U @ V @ U.T), 3.0, dt=0.01, sphere=True).X
    assert np.max(np.abs(a @ U.T - b)) < 1e-10


@pytest.mark.claim("tokens-stay-on-the-sphere")
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["linear", "unnormalized_softmax"])
def test_particle_field_keeps_tokens_on_the_sphere_without_renormalisation_at_d100(kind):
    """Paper 2 (Li et al., 2026): tokens stay on the sphere; RK45 rtol 1e-6, atol 1e-8, max_step T/200 (the authors'
    high-dimensional setting), no retraction after the steps: norm drift below 1e-6 over a run that
    clusters.

    The right-hand side is the library's tangent field (which reads the tokens' directions); the
    integrator does not renormalise, so any drift of |x_k| is the solver's error.
    """
    mc = hd.case2(100, 2.0)
    layer = mc.layer(kind)
    X0 = sample_sphere(200, 100, 0)
    sol = solve_ivp(
        lambda t, y: particle_field(y.reshape(200, 100), layer, sphere=True).ravel(),
        (0, 30.0),
        X0.ravel(),
        method="RK45",
        rtol=1e-6,
        atol=1e-8,
        max_step=30.0 / 200,
        t_eval=np.linspace(0, 30, 31),
    )
    norms = np.linalg.norm(sol.y.T.reshape(-1, 200, 100), axis=2)
    drift = np.max(np.abs(norms - 1))
    print(f"{kind}: norm drift {drift:.1e}")
    assert drift < 1e-6
    assert metrics.order_parameters(sol.y[:, -1].reshape(200, 100))[1] > 0.5  # and they clustered meanwhile


def test_simulate_stop_when_ends_at_the_first_upward_crossing_located_by_the_solver():
    """An event on the tokens: the run stops where R2 first reaches a level, at the time a dense run finds."""
    mc = hd.case2(8, 2.0)
    X0 = sample_sphere(40, 8, 0)
    layer = mc.layer("linear")
    level = 0.9
    stopped = simulate(
        X0,
        layer,
        50.0,
        method="adaptive",
        sphere=True,
        rtol=1e-10,
        atol=1e-12,
        t_eval=[0.0, 50.0],
        stop_when=lambda X: metrics.order_parameters(X)[1] - level,
    )
    t_hit = stopped.info["event_time"]
    assert stopped.t[-1] == pytest.approx(t_hit) and metrics.order_parameters(stopped.X[-1])[1] == pytest.approx(level)
    dense = simulate(
        X0, layer, 50.0, method="adaptive", sphere=True, rtol=1e-10, atol=1e-12, t_eval=np.linspace(0, 50, 50001)
    )
    first = metrics.first_passage_times(dense.t, metrics.order_parameters(dense.X)[1], [level])[0]
    assert abs(first - t_hit) < 2e-3
    never = simulate(
        X0,
        layer,
        1.0,
        method="adaptive",
        sphere=True,
        t_eval=[0.0, 1.0],
        stop_when=lambda X: metrics.order_parameters(X)[1] - 2.0,
    )
    assert never.info["event_time"] == math.inf and never.t[-1] == 1.0
    with pytest.raises(ValueError, match="adaptive"):
        simulate(X0, layer, 1.0, dt=0.1, method="rk4", stop_when=lambda X: 0.0)
