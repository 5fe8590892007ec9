"""Tests of ``tokendynamics.projective``: linear attention as an exact d x d flow."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics import (
    Attention,
    metrics,
    projective,
    sample_sphere,
    simulate,
)
from tokendynamics.book.studies import highdim as hd
from tokendynamics.projective import projective_flow


@pytest.mark.claim("projective-reduction")
def test_projective_flow_phi_carries_the_initial_tokens_to_the_trajectory():
    """Paper 2 (Li et al., 2026): linear attention is an exact d x d flow, x_k = Phi x_k(0)/|Phi x_k(0)|: the Phi
    returned by projective_flow carries X0 to its tokens, keeps |Phi|_F = sqrt(d), and swapping A and V changes it.
    """
    rng = np.random.default_rng(11)
    d, n = 5, 40
    X0 = sample_sphere(n, d, rng)
    A, V = rng.standard_normal((d, d)), rng.standard_normal((d, d))
    t = np.linspace(0, 3, 31)
    proj, Phi = projective_flow(X0, Attention("linear", A=A, V=V, beta=1.3), 3.0, t_eval=t, return_phi=True)
    np.testing.assert_array_equal(proj.t, t)
    Y = X0 @ np.swapaxes(Phi, 1, 2)
    assert np.max(np.abs(Y / np.linalg.norm(Y, axis=2, keepdims=True) - proj.X)) < 1e-14
    assert np.max(np.abs(np.linalg.norm(Phi, axis=(1, 2)) - math.sqrt(d))) < 1e-6  # rescaled, no overflow
    assert np.max(np.abs(proj.X[-1] - X0)) > 0.1
    swapped = projective_flow(X0, Attention("linear", A=V, V=A, beta=1.3), 3.0, t_eval=t)  # the order matters
    assert np.max(np.abs(swapped.X[-1] - proj.X[-1])) > 1e-2


@pytest.mark.claim("projective-reduction")
def test_projective_flow_matches_the_particle_system_in_d5():
    """Paper 2 (Li et al., 2026): linear attention is an exact d x d flow; d = 5, n = 40, random A, V, on [0, 3]:
    max token error below 1e-8.
    """
    rng = np.random.default_rng(5)
    d, n = 5, 40
    layer = Attention("linear", A=rng.standard_normal((d, d)), V=rng.standard_normal((d, d)), beta=1.3)
    X0 = sample_sphere(n, d, rng)
    t_eval = np.linspace(0, 3, 31)
    ref = simulate(X0, layer, 3.0, method="adaptive", sphere=True, rtol=1e-12, atol=1e-13, t_eval=t_eval)
    red = projective.projective_flow(X0, layer, 3.0, t_eval=t_eval, rtol=1e-12, atol=1e-13)
    err = np.max(np.abs(red.X - ref.X))
    assert err < 1e-8, err
    assert np.max(np.abs(red.X[-1] - X0)) > 0.1  # the tokens did move


@pytest.mark.claim("projective-reduction")
def test_projective_flow_agrees_with_particles_across_the_clustering_transition_at_d100():
    """Paper 2 (Li et al., 2026): the d x d flow and the particle system agree to 1e-6 across the clustering
    transition, d = 100.
    """
    mc = hd.case2(100, 2.0)
    X0 = sample_sphere(200, 100, 0)
    a = hd.run_variant(mc, "linear", X0, 30.0, engine="projective", solver="DOP853", rtol=1e-9, atol=1e-11, n_eval=31)
    b = hd.run_variant(mc, "linear", X0, 30.0, engine="particles", solver="DOP853", rtol=1e-9, atol=1e-11, n_eval=31)
    assert np.max(np.abs(a.XT - b.XT)) < 1e-6
    assert np.max(np.abs(a.R2 - b.R2)) < 1e-8
    assert a.R2[-1] > 0.99  # clustered by t = 30, so the comparison covers the whole transition


@pytest.mark.claim("authors-app-uses-the-transposed-score")
def test_projective_flow_uses_the_library_convention_score_x_dot_A_y():
    """Paper 2 (Li et al., 2026): the authors' high-dimensional app scores <A x_k, x_j> (that is, A^T); the library
    scores <x_k, A x_j>, and for a non-symmetric A the two runs differ.
    """
    mc = hd.case1(6, "positive", skew_scale=3.0, seed=3)
    X0 = sample_sphere(30, 6, 2)
    ours = projective.projective_flow(X0, mc.layer("linear"), 2.0, t_eval=[0, 2.0])
    parts = simulate(X0, mc.layer("linear"), 2.0, method="adaptive", sphere=True, t_eval=[0, 2.0])
    transposed = simulate(
        X0, Attention("linear", A=mc.A.T, V=mc.V), 2.0, method="adaptive", sphere=True, t_eval=[0, 2.0]
    )
    assert np.max(np.abs(ours.final - parts.final)) < 1e-7
    assert np.max(np.abs(ours.final - transposed.final)) > 1e-2


@pytest.mark.claim("beta-only-rescales-time")
def test_projective_flow_beta_only_rescales_time():
    """Paper 2 (Li et al., 2026): for linear attention beta only rescales time (through the d x d flow)."""
    mc = hd.case4(8, 1.0, 0.5)
    X0 = sample_sphere(50, 8, 1)
    slow = projective.projective_flow(X0, mc.layer("linear", 1.0), 6.0, t_eval=[0, 6.0], rtol=1e-11, atol=1e-12)
    fast = projective.projective_flow(X0, mc.layer("linear", 3.0), 2.0, t_eval=[0, 2.0], rtol=1e-11, atol=1e-12)
    assert np.max(np.abs(slow.final - fast.final)) < 1e-8


@pytest.mark.claim("projective-reduction")
def test_projective_flow_stops_at_the_clustering_level_found_by_the_particle_system():
    """Paper 2 (Li et al., 2026): the d x d flow stops where the particle system's R2 reaches the level."""
    mc = hd.case2(12, 2.0, seed=1)
    X0 = sample_sphere(60, 12, 3)
    stop = projective.projective_flow(
        X0, mc.layer("linear"), 50.0, t_eval=[0.0, 50.0], until=0.9, rtol=1e-10, atol=1e-12
    )
    ref = simulate(
        X0,
        mc.layer("linear"),
        20.0,
        method="adaptive",
        sphere=True,
        rtol=1e-10,
        atol=1e-12,
        t_eval=np.linspace(0, 20, 4001),
    )
    t_ref = metrics.first_passage_times(ref.t, metrics.order_parameters(ref.X)[1], [0.9])[0]
    assert abs(stop.info["event_time"] - t_ref) < 1e-4 and abs(stop.t[-1] - t_ref) < 1e-4
    assert abs(metrics.order_parameters(stop.final)[1] - 0.9) < 1e-8
    never = projective.projective_flow(X0, hd.case2(12, -0.5).layer("linear"), 5.0, until=0.9)
    assert never.info["event_time"] == math.inf and never.t[-1] == 5.0


def test_projective_flow_rejects_what_it_does_not_reduce():
    X0 = sample_sphere(10, 3, 0)
    with pytest.raises(ValueError, match="linear attention"):
        projective.projective_flow(X0, Attention("softmax", A=np.eye(3), V=np.eye(3)), 1.0)
    with pytest.raises(ValueError, match="unit tokens"):
        projective.projective_flow(2 * X0, Attention("linear", A=np.eye(3), V=np.eye(3)), 1.0)
    with pytest.raises(ValueError, match="non-finite"):
        projective.projective_flow(np.full((4, 3), np.nan), Attention("linear", A=np.eye(3), V=np.eye(3)), 1.0)
