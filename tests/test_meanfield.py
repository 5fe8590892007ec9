"""Tests of ``tokendynamics.meanfield``: the one-dimensional Gaussian oracle of the mean-field limit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics import Attention, BlowUpError, simulate
from tokendynamics.meanfield import blowup_time_1d, gaussian_1d_flow_map, gaussian_1d_solution


@pytest.mark.claim("gaussian-1d-exact-solution")
def test_gaussian_1d_solution_solves_the_moment_odes_and_its_flow_map_pushes_gaussians():
    """Paper 1 (Castin et al., arXiv 2501.18322): in d = 1, sigma_t^2 = sigma_0^2 / (1 - 2 v a sigma_0^2 t) and
    alpha_t = alpha_0 e^{vt} (1 - 2 v a sigma_0^2 t)^{-1/2}, blowing up at T* = 1/(2 v a sigma_0^2) iff v a > 0.
    """
    alpha0, sigma0, a, v = 0.5, 0.8, -0.7, 0.9
    t = np.linspace(0, 2, 2001)
    alpha, sigma = gaussian_1d_solution(t, alpha0, sigma0, a, v)
    h = t[1] - t[0]
    # alpha' = v (1 + a sigma^2) alpha, (sigma^2)' = 2 v a sigma^4 (paper 1's Gaussian ODEs in d = 1)
    np.testing.assert_allclose(
        np.gradient(alpha, h)[1:-1], (v * (1 + a * sigma**2) * alpha)[1:-1], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(np.gradient(sigma**2, h)[1:-1], (2 * v * a * sigma**4)[1:-1], rtol=1e-5, atol=1e-6)
    # one particle-system step of the mean field: a large sample follows the flow map
    x0 = alpha0 + sigma0 * np.random.default_rng(0).standard_normal((1000, 1))
    traj = simulate(x0, Attention("softmax", A=[[a]], V=[[v]]), 0.5, dt=0.25)
    err = np.sqrt(np.mean((traj.final[:, 0] - gaussian_1d_flow_map(x0[:, 0], 0.5, alpha0, sigma0, a, v)) ** 2))
    assert err < 0.06
    assert blowup_time_1d(1.0, 0.5, 1.0) == pytest.approx(1.0)
    assert blowup_time_1d(1.0, -0.5, 1.0) == math.inf
    with pytest.raises(BlowUpError, match="blows up"):
        gaussian_1d_solution(1.5, 0.0, 1.0, 0.5, 1.0)
