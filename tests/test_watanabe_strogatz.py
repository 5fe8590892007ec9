"""Tests of ``tokendynamics.watanabe_strogatz``: the exact reduction of planar linear attention."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import I2, linear_reference
from tokendynamics import circle_tokens
from tokendynamics.kuramoto import linear_layers, order_parameter
from tokendynamics.watanabe_strogatz import solve_watanabe_strogatz, ws_reconstruct


@pytest.mark.claim("watanabe-strogatz-is-exact")
@pytest.mark.parametrize("n", [3, 10, 50])
def test_solve_watanabe_strogatz_reconstructs_the_particle_tokens(n):
    """Paper 2 (Li et al., 2026): the Watanabe-Strogatz reduction is exact for every n: (alpha, eta, c_k)
    reconstruct the tokens of the core particle run to 1e-7 (T = 10).

    Compared are the tokens x_k themselves (not only e^{2 i theta_k}), so each token's branch theta vs theta +
    pi must also be right.
    """
    rng = np.random.default_rng(100 + n)
    A, V = rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    theta0 = rng.uniform(0, 2 * np.pi, n)
    t = np.linspace(0, 10, 101)
    ws = solve_watanabe_strogatz(theta0, linear_layers(A, V), 10.0, t_eval=t, rtol=1e-11, atol=1e-13)
    traj = linear_reference(circle_tokens(theta0), A, V, 10.0, t)
    err = np.max(np.abs(circle_tokens(ws.theta()) - traj.X))
    assert err < 1e-7, err
    assert np.max(np.abs(ws.order_parameter() - order_parameter(ws.theta(), 2))) < 1e-9
    # R1 needs the branches: it is the same as the particles'
    R1_particles = traj.X[..., 0].mean(1) + 1j * traj.X[..., 1].mean(1)
    assert np.max(np.abs(order_parameter(ws.theta(), 1) - R1_particles)) < 1e-7


@pytest.mark.claim("watanabe-strogatz-is-exact")
def test_ws_reconstruct_is_continuous_and_keeps_the_initial_angles():
    """Paper 2 (Li et al., 2026), Watanabe-Strogatz: the reconstructed angles are continuous lifts of the initial
    ones.
    """
    rng = np.random.default_rng(9)
    theta0 = rng.uniform(-20, 20, 12)  # arbitrary lifts
    ws = solve_watanabe_strogatz(theta0, linear_layers(I2, np.array([[0.5, 1.0], [-1.0, -0.5]])), 20.0)
    th = ws.theta()
    np.testing.assert_allclose(th[0], theta0, atol=1e-12)
    assert np.max(np.abs(np.diff(th, axis=0))) < 0.5  # no jumps of pi or 2 pi
    with pytest.raises(ValueError, match="alpha"):
        ws_reconstruct(np.array([0.1, 1.2]), np.array([0.0, 0.1]), ws.c, theta0)


@pytest.mark.claim("watanabe-strogatz-is-exact")
def test_solve_watanabe_strogatz_rejects_a_clustered_start_with_a_clear_message():
    """Paper 2 (Li et al., 2026), Watanabe-Strogatz: a start with |R2| = 1 has no Moebius coordinates (alpha0 = 0
    is the way out).
    """
    with pytest.raises(ValueError, match="antipodal"):
        solve_watanabe_strogatz(np.array([0.3, 0.3 + np.pi, 0.3]), linear_layers(I2, I2), 1.0)
    ws = solve_watanabe_strogatz(np.array([0.3, 0.3 + np.pi, 0.3]), linear_layers(I2, I2), 1.0, alpha0=0.0)
    np.testing.assert_allclose(np.abs(ws.order_parameter()), 1.0, atol=1e-12)
