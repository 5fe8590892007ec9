"""Issue #12 (reliability): blow-up times, the fixed-step blow-up criterion, Sinkhorn convergence.

The bad-input table is in ``test_bad_inputs.py``, the cache in ``test_cache.py``, the chapter
parameters and atomic chapter runs in ``test_chapter_parameters.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tokendynamics import Attention, BlowUpError, ConvergenceError, attention_matrix, simulate, velocity
from tokendynamics.attention import SINKHORN_ITERS, SINKHORN_TOL
from tokendynamics.gaussian import blowup_time, solve_gaussian
from tokendynamics.transport import sinkhorn_potentials

# ---------------------------------------------------------------------------------------------
# blow-up times: the time the solver reached, against closed forms
# ---------------------------------------------------------------------------------------------


def _tokens_of_norm_3(n=20, d=3, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return 3.0 * X / np.linalg.norm(X, axis=1, keepdims=True)


def test_linear_attention_second_moment_has_the_closed_form_used_below():
    r"""A = V = I, in R^d: x_i' = Sigma x_i, so Sigma' = 2 Sigma^2 and Sigma(t) = Sigma_0 (I - 2t Sigma_0)^{-1}.

    The tokens blow up at T* = 1 / (2 lambda_max(Sigma_0)) (Sigma the second moment (1/n) sum x x^T).
    """
    X0 = _tokens_of_norm_3()
    S0 = X0.T @ X0 / len(X0)
    layer = Attention("linear", A=np.eye(3), V=np.eye(3))
    Tstar = 1.0 / (2.0 * np.linalg.eigvalsh(S0)[-1])
    t = 0.8 * Tstar
    traj = simulate(X0, layer, t, dt=t / 2000)
    S = traj.final.T @ traj.final / len(X0)
    np.testing.assert_allclose(S, S0 @ np.linalg.inv(np.eye(3) - 2 * t * S0), rtol=1e-8)


@pytest.mark.parametrize("solver", ["DOP853", "RK45", "LSODA"])
@pytest.mark.parametrize("T", [1.0, 5.0])
def test_adaptive_blowup_time_is_the_time_the_solver_reached_not_an_output_time(solver, T):
    X0 = _tokens_of_norm_3()
    S0 = X0.T @ X0 / len(X0)
    Tstar = 1.0 / (2.0 * np.linalg.eigvalsh(S0)[-1])  # about 0.0996
    layer = Attention("linear", A=np.eye(3), V=np.eye(3))
    traj = simulate(X0, layer, T, method="adaptive", solver=solver, on_blowup="stop")
    assert traj.blew_up
    # before: the last output time before the failure (0.095 for T = 1, 0.075 for T = 5)
    assert abs(traj.blowup_time - Tstar) <= 1e-2 * Tstar
    assert abs(traj.blowup_time - Tstar) <= 1e-6 * Tstar  # in fact to round-off
    assert traj.t[-1] < traj.blowup_time and np.all(np.isfinite(traj.X))
    with pytest.raises(BlowUpError) as info:
        simulate(X0, layer, T, method="adaptive", solver=solver)
    assert info.value.time == pytest.approx(Tstar, rel=1e-6)


def test_adaptive_threshold_crossing_is_located_inside_the_step():
    """x' = x^3 (one token, linear attention, A = V = 1): |x| = 10 at t = (1 - 1/100) / 2 exactly."""
    layer = Attention("linear", A=[[1.0]], V=[[1.0]])
    traj = simulate(
        np.array([[1.0]]),
        layer,
        1.0,
        method="adaptive",
        blowup_threshold=10.0,
        on_blowup="stop",
        rtol=1e-12,
        atol=1e-12,
    )
    assert traj.blowup_time == pytest.approx(0.495, rel=1e-9)
    assert "blowup_threshold" in traj.info["blowup_reason"]


def test_adaptive_overflow_of_the_field_is_reported_where_the_solver_stopped():
    layer = Attention("unnormalized_softmax", A=[[1.0]], V=[[1.0]])
    traj = simulate(np.array([[2.0], [2.5]]), layer, 5.0, method="adaptive", on_blowup="stop")
    assert traj.blew_up and traj.blowup_time < 5.0
    assert traj.info["t_reached"] == traj.blowup_time and np.all(np.isfinite(traj.X))


def test_solve_gaussian_reports_the_time_reached_with_output_times_and_a_huge_threshold():
    """Softmax, A = V = I: T* = 1/lambda_max(2 Sigma_0). With coarse t_eval and a trace threshold
    the solution never reaches (the solver gives up first) the time was the last output time (0.4)."""
    S0 = np.array([[1.0, 0.3], [0.3, 0.5]])
    layer = Attention("softmax", A=np.eye(2), V=np.eye(2))
    Tstar = blowup_time(S0, layer)
    for blowup_trace in (1e8, 1e30):
        ode = solve_gaussian(np.zeros(2), S0, layer, 3.0, t_eval=np.linspace(0, 3, 31), blowup_trace=blowup_trace)
        assert ode.status == "blowup" and ode.exit_time == pytest.approx(Tstar, rel=1e-6)
        assert ode.t[-1] == ode.exit_time and np.all(np.isfinite(ode.cov))
    with pytest.raises(BlowUpError) as info:
        solve_gaussian(np.zeros(2), S0, layer, 3.0, t_eval=np.linspace(0, 3, 31), blowup_trace=1e30, on_blowup="raise")
    assert info.value.time == pytest.approx(Tstar, rel=1e-6)


# ---------------------------------------------------------------------------------------------
# fixed-step methods: a step that multiplies the size of the state by more than max_step_growth
# ---------------------------------------------------------------------------------------------


def test_explicit_euler_with_a_huge_step_is_flagged_instead_of_wandering_off():
    X0 = _tokens_of_norm_3()
    layer = Attention("softmax", A=np.eye(3), V=np.eye(3))
    with pytest.raises(BlowUpError, match="max_step_growth"):
        simulate(X0, layer, 100.0, method="euler", dt=50.0)  # was: |x| ~ 7e3, no flag
    traj = simulate(X0, layer, 100.0, method="euler", dt=50.0, on_blowup="stop")
    assert traj.blew_up and traj.blowup_time == 50.0 and traj.t[-1] == 0.0
    # the same run with an ordinary step is untouched (softmax grows at most like e^{|V| t})
    ok = simulate(X0, layer, 2.0, method="euler", dt=0.05)
    assert not ok.blew_up and ok.info["max_step_growth"] == 10.0
    # a factor the user accepts
    loose = simulate(X0, layer, 100.0, method="euler", dt=50.0, max_step_growth=1e3, on_blowup="stop")
    assert not loose.blew_up and np.abs(loose.final).max() > 1e3
    with pytest.raises(ValueError, match="max_step_growth"):
        simulate(X0, layer, 1.0, dt=0.1, max_step_growth=1.0)


def test_rk4_growth_criterion_fires_near_a_finite_time_singularity():
    """x' = x^3 from x = 1 (T* = 1/2) with a step that is fine away from T*."""
    layer = Attention("linear", A=[[1.0]], V=[[1.0]])
    traj = simulate(np.array([[1.0]]), layer, 1.0, dt=1e-3, on_blowup="stop")
    assert traj.blew_up and abs(traj.blowup_time - 0.5) < 2e-3
    assert "max_step_growth" in traj.info["blowup_reason"] or "blowup_threshold" in traj.info["blowup_reason"]


# ---------------------------------------------------------------------------------------------
# Sinkhorn attention: defaults that converge, and an error that says what to change
# ---------------------------------------------------------------------------------------------


def _clusters(sizes, radius=6.0**0.5, seed=0):
    """Tight clusters on a circle of radius sqrt(6): scores <x, y> near +-6."""
    k = len(sizes)
    angles = 2 * np.pi * np.arange(k) / k
    centres = radius * np.c_[np.cos(angles), np.sin(angles)]
    X = np.repeat(centres, sizes, axis=0)
    return X + 0.01 * np.random.default_rng(seed).standard_normal(X.shape)


@pytest.mark.parametrize("sizes", [(10, 90), (1, 99), (10, 30, 30), (10, 30, 30, 30)])
def test_sinkhorn_defaults_converge_on_tight_clusters_at_small_eps(sizes):
    """eps = 0.5, scores near +-6: plain Sinkhorn stalls (3 clusters: error 7e-8 after 20 000
    iterations, 4 clusters: 9e-6); the accelerated iteration meets the default tolerance."""
    X = _clusters(sizes)
    layer = Attention("sinkhorn", A=np.eye(2), V=np.eye(2), eps=0.5)
    assert layer.sinkhorn_tol == SINKHORN_TOL == 1e-12 and layer.sinkhorn_iters == SINKHORN_ITERS
    P, info = attention_matrix(X, layer, return_info=True)
    assert info["marginal_error"] < 1e-12 and info["iterations"] < 200
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(P.sum(axis=0), 1.0, atol=1e-11)
    velocity(X, layer)  # no ConvergenceError


def test_plain_sinkhorn_stalls_where_the_accelerated_one_converges():
    X = _clusters((10, 30, 30))
    n = len(X)
    logK = (X @ X.T) / 0.5
    logw = np.full(n, -np.log(n))
    *_, it_plain, err_plain = sinkhorn_potentials(logK, logw, eps=0.5, max_iter=2000, tol=1e-10, memory=0)
    *_, it_fast, err_fast = sinkhorn_potentials(logK, logw, eps=0.5, max_iter=2000, tol=1e-10)
    assert err_plain > 1e-8 and it_plain == 2000
    assert err_fast < 1e-10 and it_fast < 100


def test_sinkhorn_fixed_point_does_not_depend_on_the_acceleration():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 2))
    A = rng.standard_normal((2, 2))
    logK = (X @ A @ X.T) / 0.7
    logw = np.log(rng.dirichlet(np.ones(40)))
    f0, g0, _, _ = sinkhorn_potentials(logK, logw, eps=0.7, max_iter=100_000, tol=1e-13, memory=0)
    f1, g1, _, _ = sinkhorn_potentials(logK, logw, eps=0.7, max_iter=100_000, tol=1e-13)
    shift = np.mean(g1 - g0)  # potentials are defined up to (f + c, g - c)
    np.testing.assert_allclose(g1 - shift, g0, atol=1e-10)
    np.testing.assert_allclose(f1 + shift, f0, atol=1e-10)


def test_sinkhorn_convergence_error_says_what_was_reached_and_what_to_change():
    X = np.random.default_rng(0).standard_normal((30, 2))
    layer = Attention("sinkhorn", A=np.eye(2), V=np.eye(2), eps=0.01, sinkhorn_iters=3)
    with pytest.raises(ConvergenceError) as info:
        velocity(X, layer)
    msg = str(info.value)
    for words in (
        "sinkhorn_tol = 1e-12",
        "3 iterations",
        "error reached is",
        "sinkhorn_iters",
        "loosen sinkhorn_tol",
        "raise eps",
    ):
        assert words in msg, (words, msg)
