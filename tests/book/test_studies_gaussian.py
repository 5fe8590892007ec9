"""Tests of ``tokendynamics.book.studies.gaussian``: particles against the Gaussian ODEs, the clustering-condition
search in both readings of A, and the cone picture of 2 x 2 covariances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import A_MILD, K_MILD, M0, Q_MILD, S0, V_MILD
from tokendynamics import Attention
from tokendynamics.book.studies.gaussian import (
    clustering_condition_search,
    compare_with_particles,
    condition_matrix,
    cone_coordinates,
    cone_grid,
    cov_from_cone,
    covariance_outcomes,
    disc_point,
)
from tokendynamics.gaussian import (
    blowup_time,
    covariance_eigenvalues,
    decoupled_mean,
    solve_covariance_batch,
    solve_gaussian,
)


@pytest.mark.claim("sinkhorn-mean-moves-by-v", "gaussian-ode-matches-sampled-particles")
@pytest.mark.parametrize("kind, n, tol", [("softmax", 1000, 5e-3), ("l2", 1000, 5e-3), ("sinkhorn", 300, 2e-3)])
def test_compare_with_particles_sample_follows_the_ode_from_its_moments_within_sampling_error(kind, n, tol):
    """Paper 1 (Castin et al., arXiv 2501.18322): n sampled tokens follow the ODEs started from their own moments,
    within a small error (the sample is not exactly Gaussian); under Sinkhorn attention their mean moves by V
    x_bar exactly.
    """
    layer = Attention("l2", Q=Q_MILD, K=K_MILD, V=V_MILD) if kind == "l2" else Attention(kind, A=A_MILD, V=V_MILD)
    comp = compare_with_particles(layer, M0, S0, n=n, T=0.5, dt=0.05, seed=1)
    assert comp.w2.max() < tol
    assert comp.mean_error.max() < tol and comp.cov_error.max() < tol
    if kind == "sinkhorn":
        # the particle mean follows xbar' = V xbar exactly: RK4 of a linear ODE is its Taylor polynomial
        h = comp.particles.dt
        R = sum(np.linalg.matrix_power(h * V_MILD, k) / math.factorial(k) for k in range(5))
        expected = [np.linalg.matrix_power(R, k) @ comp.particle_mean[0] for k in range(len(comp.t))]
        assert np.abs(comp.particle_mean - np.array(expected)).max() < 1e-12
        exact = decoupled_mean(comp.particle_mean[0], layer, comp.t)
        assert np.abs(comp.particle_mean - exact).max() < 1e-6  # RK4 error O(h^4)


@pytest.mark.claim("gaussian-ode-sampling-error")
def test_compare_with_particles_exact_moments_leave_a_sampling_error_that_shrinks_with_n():
    """Paper 1 (Castin et al., arXiv 2501.18322): started from the exact moments, the ODEs differ from n sampled
    tokens by the sampling error of the initial moments, about n^{-1/2}.
    """
    layer = Attention("softmax", A=A_MILD, V=V_MILD)
    comps = {
        n: [compare_with_particles(layer, M0, S0, n=n, T=0.5, dt=0.1, seed=s) for s in range(4)] for n in (100, 1600)
    }
    exact = {n: np.mean([c.w2_exact[-1] for c in comps[n]]) for n in comps}
    assert exact[1600] < 0.5 * exact[100]  # about n^{-1/2}: a factor 4 expected
    assert np.mean([c.w2[-1] for c in comps[1600]]) < 0.2 * exact[1600]


@pytest.mark.claim("linear-attention-moments-are-exact")
def test_compare_with_particles_linear_attention_moments_follow_the_ode_at_any_n():
    """Paper 1 (Castin et al., arXiv 2501.18322), linear attention: the field depends on the tokens only through
    their first two moments, so the moments of n particles follow the Gaussian ODEs exactly whatever n, up to
    the time-stepping error.
    """
    layer = Attention("linear", A=A_MILD, V=V_MILD)
    for n in (50, 1000):
        comp = compare_with_particles(layer, M0, S0, n=n, T=0.5, dt=0.05, seed=1)
        assert comp.mean_error.max() < 1e-9 and comp.cov_error.max() < 1e-9, n
        assert comp.w2.max() < 1e-6, n


def test_cone_coordinates_round_trip_and_rank_one_matrices_lie_on_the_cone_surface():
    rng = np.random.default_rng(0)
    L = rng.standard_normal((50, 2, 2))
    S = L @ np.swapaxes(L, 1, 2)
    uwv = cone_coordinates(S)
    assert np.allclose(cov_from_cone(uwv), S)
    assert np.all(uwv[:, 2] >= np.hypot(uwv[:, 0], uwv[:, 1]) - 1e-12)
    z = rng.standard_normal((20, 2))
    one = cone_coordinates(np.einsum("ni,nj->nij", z, z))
    assert np.allclose(one[:, 2], np.hypot(one[:, 0], one[:, 1]))
    assert np.allclose(np.hypot(*disc_point(np.einsum("ni,nj->nij", z, z)).T), 1.0)
    assert np.allclose(disc_point(np.eye(2)), 0.0)


@pytest.mark.claim("official-figure-parameters")
def test_cone_grid_has_the_official_counts_and_trace_one():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: the trace-one initial grids of the cone
    figures have 100, 276, 648 and 1184 points.
    """
    for args, count in [
        ((10, 10), 100),
        ((20, 20, (-1, 1, -1, 1)), 276),
        ((30, 30, (-1, 1, -1, 1)), 648),
        ((40, 40, (-1, 1, -1, 1)), 1184),
    ]:
        g = cone_grid(*args)
        assert len(g) == count
        assert np.allclose(np.trace(g, axis1=1, axis2=2), 1.0)
        assert covariance_eigenvalues(g).min() > 0


@pytest.mark.claim("official-figure-parameters")
def test_cone_grid_order_is_the_official_u_outer_w_inner():
    """Paper 1 (Castin et al., arXiv 2501.18322), the authors' code: the initial grid keeps meshgrid(U, C, V).T
    order, u outer loop, w inner.
    """
    g = cone_grid(10, 10)
    # the official init_grid keeps (u, w) in meshgrid(U, C, V).T order: u outer loop, w inner loop
    u = g[:, 0, 0] - g[:, 1, 1]
    w = 2 * g[:, 0, 1]
    assert np.all(np.diff(u) >= -1e-15)
    assert np.all(np.diff(w[u == u[0]]) > 0)


# a draw with random Sigma_0 whose trace passes 1e7 by t = 5.63 and then settles on a rank-one line of
# equilibria (u^T A u = 0): a trace threshold of 1e3 or 1e6 calls it a blow-up
A_LINE = np.array([[0.139, -1.197], [0.861, -0.644]])
V_LINE = np.array([[1.464, -0.461], [-0.461, 1.273]])
S_LINE = np.array([[0.325, 0.638], [0.638, 2.703]])
# symmetric V > 0 with V A^T + A V^T < 0 (the summary's condition, in its own convention): blows up at t = 9.658
A_SYM = np.array([[-1.183, 0.36], [-0.964, 0.064]])
V_SYM = np.array([[2.294, 1.351], [1.351, 2.623]])


def test_condition_matrix_readings_agree_for_isotropic_V_or_symmetric_A_and_differ_otherwise():
    rng = np.random.default_rng(2)
    A, V = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    assert np.allclose(condition_matrix(A, V, "summary"), V @ A.T + A @ V.T)
    assert np.allclose(condition_matrix(A, V, "literal"), V @ A + A.T @ V.T)
    assert not np.allclose(condition_matrix(A, V, "summary"), condition_matrix(A, V, "literal"))
    assert np.allclose(condition_matrix(A, 2 * np.eye(2), "summary"), condition_matrix(A, 2 * np.eye(2), "literal"))
    As = A + A.T
    assert np.allclose(condition_matrix(As, V, "summary"), condition_matrix(As, V, "literal"))
    with pytest.raises(ValueError, match="reading"):
        condition_matrix(A, V, "paper")


def test_condition_matrix_summary_reading_is_the_covariance_velocity_at_the_identity():
    """The summary's matrix, in the book's convention V A^T + A V^T, is the right-hand side of the book's softmax
    covariance equation at Sigma = I (so the summary's equation and condition use the same A)."""
    from tokendynamics.gaussian import gaussian_rhs

    rng = np.random.default_rng(3)
    A, V = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    _, dS = gaussian_rhs(np.zeros(2), np.eye(2), Attention("softmax", A=A, V=V))
    assert np.allclose(dS, condition_matrix(A, V, "summary"), atol=1e-13)


@pytest.mark.claim("blowup-pole-test")
def test_covariance_outcomes_tells_a_pole_from_a_huge_trace_that_settles_on_a_line():
    """Paper 1 (Castin et al., arXiv 2501.18322), blow-up of Gaussian covariances: a blow-up is a pole, not a
    large trace. The pole test on the trace-normalised flow classifies a draw whose
    trace passes 1e7 and settles on a rank-one line of equilibria as clustering (not a blow-up), and locates the
    blow-up of the symmetric-V counterexample at t = 9.658 (the accurate solver's pole, to 1e-4 relative) with
    a full-rank profile, and the closed-form pole of V = I (to 1e-4 relative); derived for the book's chapter 2.
    """
    iso = Attention("softmax", A=np.array([[1.0, 0.3], [0.0, 0.5]]), V=np.eye(2))
    layers = [
        Attention("softmax", A=A_LINE, V=V_LINE),
        Attention("softmax", A=A_SYM, V=V_SYM),
        iso,
        Attention("softmax", A=np.diag([-1.0, 0.0]), V=np.eye(2)),  # converges to a line like 1/t
        Attention("softmax", A=-np.eye(2), V=np.eye(2)),  # shrinks to zero
    ]
    S0 = np.stack([S_LINE, np.eye(2), S_LINE, np.eye(2), np.eye(2)])
    res = covariance_outcomes(S0, layers, 100.0)
    assert res.outcome.tolist() == ["clustering", "blowup", "blowup", "clustering", "clustering"]
    # the line draw: a trace threshold at 1e6 would call it a blow-up
    trip = solve_covariance_batch(S_LINE, [layers[0]], 6.0, blowup_trace=1e6)
    assert trip.status[0] == "blowup" and res.log10_trace[0] > 6.5 and res.rank_ratio[0] < 1e-10
    assert abs(res.growth_rate[0]) < 0.05 and np.isnan(res.blowup_time[0])
    pole = solve_gaussian(np.zeros(2), np.eye(2), layers[1], 20.0).info["blowup_time_extrapolated"]
    assert abs(res.blowup_time[1] - pole) < 1e-4 * pole and abs(pole - 9.658) < 1e-2
    assert res.rank_ratio[1] > 0.1  # full-rank, self-similar profile
    assert abs(res.blowup_time[2] - blowup_time(S_LINE, iso)) < 1e-4 * blowup_time(S_LINE, iso)
    assert res.rank_ratio[2] < 1e-10  # V = I: the rank-one profile
    assert res.growth_rate[4] < 0  # Sigma -> 0
    # a pole after the horizon is not a blow-up by it
    late = covariance_outcomes(np.eye(2), [layers[1]], 9.0)
    assert late.outcome[0] != "blowup" and late.t_end[0] == pytest.approx(9.0)


@pytest.mark.claim(
    "clustering-condition-summary", "clustering-condition-reading", "clustering-condition-in-the-books-convention"
)
def test_clustering_condition_search_summary_reading_fails_for_symmetric_V_the_literal_one_does_not():
    """Paper 1 (Castin et al., arXiv 2501.18322), summary: clustering e.g. when V A + A^T V^T <= 0, with its own A
    (the book's A^T). With symmetric V > 0 and random Sigma_0, 200 draws satisfying that condition (in the book's
    convention V A^T + A V^T < 0) include some that blow up (a located pole), while no draw of 200 satisfying
    the other reading V A + A^T V^T < 0 does.
    """
    s = clustering_condition_search(200, value="symmetric", seed=0)
    counts = s.counts()
    assert counts["summary"][0] == counts["literal"][0] == 200
    assert 1 <= counts["summary"][1] <= 20 and counts["literal"][1] == 0
    for i in s.counterexamples("summary"):
        assert s.lam["summary"][i] < 0 and s.outcomes.blowup_time[i] <= s.T


@pytest.mark.claim("clustering-condition-counterexample")
def test_clustering_condition_search_literal_reading_fails_for_non_symmetric_V():
    """Paper 1 (Castin et al., arXiv 2501.18322), summary's condition: the other reading, V A + A^T V^T < 0 with
    the book's A, does not prevent blow-up for a non-symmetric V with
    V + V^T > 0: a sizeable fraction of such draws blow up (derived for the book's chapter 2).
    """
    s = clustering_condition_search(60, value="positive", seed=1)
    draws, blowups = s.counts()["literal"]
    assert draws == 60 and 0.15 * draws <= blowups <= 0.6 * draws


def test_clustering_condition_search_is_reproducible_from_its_seed():
    one = clustering_condition_search(12, value="positive", T=20.0, seed=4, s_max=50.0)
    two = clustering_condition_search(12, value="positive", T=20.0, seed=4, s_max=50.0)
    other = clustering_condition_search(12, value="positive", T=20.0, seed=5, s_max=50.0)
    assert np.array_equal(one.A, two.A) and np.array_equal(one.V, two.V) and np.array_equal(one.blew_up, two.blew_up)
    assert np.array_equal(one.outcomes.blowup_time, two.outcomes.blowup_time, equal_nan=True)
    assert not np.array_equal(one.A[:3], other.A[:3])
    for reading, (draws, blowups) in one.counts().items():
        assert draws == 12 and 0 <= blowups <= draws
        mask = one.drawn_for[reading]
        assert np.all(np.linalg.eigvalsh(condition_matrix(one.A[mask], one.V[mask], reading))[:, -1] < 0)
    assert np.all(np.linalg.eigvalsh(one.V + np.swapaxes(one.V, 1, 2))[:, 0] > 0)
    assert not np.allclose(one.cov0, np.eye(2))  # random initial covariances by default
    sym = clustering_condition_search(5, value="symmetric", start="identity", T=5.0, seed=1)
    assert np.allclose(sym.V, np.swapaxes(sym.V, 1, 2)) and np.all(np.linalg.eigvalsh(sym.V)[:, 0] > 0)
    assert np.allclose(sym.cov0, np.eye(2))
    with pytest.raises(ValueError, match="value"):
        clustering_condition_search(3, value="diagonal")


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: cone_coordinates(np.eye(3)), "cov"),
        (lambda: disc_point(np.zeros((2, 2))), "cov"),
        (lambda: cov_from_cone([1.0, 2.0]), "uwv"),
        (lambda: cone_grid(0, 5), "n_u"),
        (lambda: cone_grid(5, 2.5), "n_w"),
        (lambda: cone_grid(5, 5, limits=(1, 0, 0, 1)), "limits"),
        (lambda: compare_with_particles(Attention("softmax", A=A_MILD, V=V_MILD), M0, S0, n=0, T=1.0, dt=0.1), "n"),
        (lambda: clustering_condition_search(0), "draws"),
        (lambda: clustering_condition_search(3, start="zero"), "start"),
        (lambda: covariance_outcomes(np.zeros((2, 2)), [Attention("softmax", A=A_MILD, V=V_MILD)], 1.0), "cov0"),
        (lambda: covariance_outcomes(np.eye(3), [Attention("softmax", A=A_MILD, V=V_MILD)], 1.0), "cov0"),
        (lambda: covariance_outcomes(np.eye(2), [Attention("softmax", A=A_MILD, V=V_MILD)], -1.0), "T"),
        (lambda: covariance_outcomes(np.eye(2), [Attention("l2", Q=Q_MILD, K=K_MILD, V=V_MILD)], 1.0), "quadratic"),
    ],
)
def test_studies_refuse_bad_input_with_an_error_naming_the_argument(call, words):
    with pytest.raises(ValueError, match=words):
        call()
