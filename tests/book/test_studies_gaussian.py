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
    disc_point,
)
from tokendynamics.gaussian import covariance_eigenvalues, decoupled_mean


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


def test_condition_matrix_readings_agree_for_isotropic_V_or_symmetric_A_and_differ_otherwise():
    rng = np.random.default_rng(2)
    A, V = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    assert np.allclose(condition_matrix(A, V, "book"), V @ A + A.T @ V.T)
    assert np.allclose(condition_matrix(A, V, "transposed"), V @ A.T + A @ V.T)
    assert not np.allclose(condition_matrix(A, V, "book"), condition_matrix(A, V, "transposed"))
    assert np.allclose(condition_matrix(A, 2 * np.eye(2), "book"), condition_matrix(A, 2 * np.eye(2), "transposed"))
    As = A + A.T
    assert np.allclose(condition_matrix(As, V, "book"), condition_matrix(As, V, "transposed"))
    with pytest.raises(ValueError, match="reading"):
        condition_matrix(A, V, "paper")


def test_clustering_condition_search_is_reproducible_from_its_seed():
    one = clustering_condition_search(12, value="positive", T=20.0, seed=4)
    two = clustering_condition_search(12, value="positive", T=20.0, seed=4)
    other = clustering_condition_search(12, value="positive", T=20.0, seed=5)
    assert np.array_equal(one.A, two.A) and np.array_equal(one.V, two.V) and np.array_equal(one.blew_up, two.blew_up)
    assert np.array_equal(one.blowup_time, two.blowup_time, equal_nan=True)
    assert not np.array_equal(one.A[:3], other.A[:3])
    for reading, (draws, blowups) in one.counts().items():
        assert draws == 12 and 0 <= blowups <= draws
        mask = one.drawn_for[reading]
        assert np.all(np.linalg.eigvalsh(condition_matrix(one.A[mask], one.V[mask], reading))[:, -1] < 0)
    assert np.all(np.linalg.eigvalsh(one.V + np.swapaxes(one.V, 1, 2))[:, 0] > 0)
    sym = clustering_condition_search(5, value="symmetric", start="random", T=5.0, seed=1)
    assert np.allclose(sym.V, np.swapaxes(sym.V, 1, 2)) and np.all(np.linalg.eigvalsh(sym.V)[:, 0] > 0)
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
    ],
)
def test_studies_refuse_bad_input_with_an_error_naming_the_argument(call, words):
    with pytest.raises(ValueError, match=words):
        call()
