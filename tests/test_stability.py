"""Tests of ``tokendynamics.stability``: the explicit stability constants and the bound they give."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics import Attention
from tokendynamics.errors import CapabilityError
from tokendynamics.stability import (
    lipschitz_constants,
    log_jacobian_bound,
    log_stability_bound,
    log_trajectory_bound,
    support_speed,
)


@pytest.mark.claim("stability-constants")
def test_log_stability_bound_integrates_the_support_radius_and_the_constant():
    """Paper 1 (Castin et al., arXiv 2501.18322), the stability theorem with the book's explicit constants: R' = |V| R
    and
    L = a v R^2 + v (1 + 2 a R^2) e^{2 a R^2} for softmax, also for depth-dependent parameters.
    """
    layer = Attention("softmax", A=[[0.5, 0.2], [-0.1, -0.3]], V=1.3 * np.eye(2))
    t = np.linspace(0, 1, 11)
    logC, R = log_stability_bound(layer, t, 1.5)
    np.testing.assert_allclose(R, 1.5 * np.exp(1.3 * t), rtol=1e-9)  # R' = |V| R
    lx, lm = lipschitz_constants(layer, 1.5)
    a, v = np.linalg.norm(layer.A[0], 2), 1.3
    assert lx == pytest.approx(a * v * 1.5**2) and lm == pytest.approx(v * (1 + 2 * a * 2.25) * math.exp(4.5 * a))
    start, _ = log_stability_bound(layer, [0.0, 1e-5], 1.5)
    assert start[1] / 1e-5 == pytest.approx(lx + lm, rel=1e-3)  # d/dt log C = L(R_0) at t = 0
    # time-dependent parameters: a constant callable gives the same bound, V(t) = cos(t) V shrinks it
    same, _ = log_stability_bound(lambda s: layer, t, 1.5)
    np.testing.assert_allclose(same, logC, rtol=1e-12)
    slower, R2 = log_stability_bound(lambda s: layer.with_(V=math.cos(s) * 1.3 * np.eye(2)), t, 1.5)
    np.testing.assert_allclose(R2, 1.5 * np.exp(1.3 * np.sin(t)), rtol=1e-8)
    assert np.all(slower[1:] < logC[1:])
    # linear attention: R' = a v R^3 blows up in finite time, and so does the bound
    lin = Attention("linear", A=np.eye(2), V=np.eye(2))
    logC_lin, R_lin = log_stability_bound(lin, np.linspace(0, 1, 11), 1.0)
    assert R_lin[4] == pytest.approx(1 / math.sqrt(1 - 2 * 0.4), rel=1e-6) and np.isinf(logC_lin[-1])


@pytest.mark.claim("stability-constants")
def test_lipschitz_constants_refuse_sinkhorn_and_a_causal_layer_without_sink():
    """Paper 1 (Castin et al., arXiv 2501.18322), the stability theorem's constants: none is known for Sinkhorn; masked
    attention needs a sink of mass m0, which divides the measure term by m0.
    """
    with pytest.raises(CapabilityError, match="'sinkhorn' attention does not have"):
        lipschitz_constants(Attention("sinkhorn", A=np.eye(2), V=np.eye(2)), 1.0)
    causal = Attention("softmax", A=np.eye(2), V=np.eye(2), causal=True)
    with pytest.raises(ValueError, match="sink"):
        lipschitz_constants(causal, 1.0)
    free = lipschitz_constants(causal.with_(causal=False), 1.0)
    sunk = lipschitz_constants(causal, 1.0, m0=0.25)
    assert sunk[0] == free[0] and sunk[1] == pytest.approx(4 * free[1])
    assert support_speed(Attention("linear", A=2 * np.eye(2), V=np.eye(2)), 2.0) == pytest.approx(16.0)


@pytest.mark.claim("stability-along-trajectory")
def test_log_trajectory_bound_integrates_the_kind_constants_on_the_measured_radius():
    """Paper 1 (Castin et al., arXiv 2501.18322), the stability theorem's Grönwall argument on a measured radius:
    log C(t) = int_0^t L(R_s) ds, L at the larger end radius of each interval; a kind without constants refuses.
    """
    layer = Attention("sigmoid", A=[[0.5, 0.2], [-0.1, -0.3]], V=1.3 * np.eye(2))
    t = np.linspace(0, 1, 5)
    np.testing.assert_allclose(
        log_trajectory_bound(layer, t, np.full(5, 1.5)), t * sum(lipschitz_constants(layer, 1.5))
    )
    R = np.array([1.0, 2.0, 1.5, 1.5, 1.0])
    steps = [sum(lipschitz_constants(layer, r)) / 4 for r in (2.0, 2.0, 1.5, 1.5)]
    np.testing.assert_allclose(log_trajectory_bound(lambda s: layer, t, R), np.cumsum([0.0, *steps]))
    with pytest.raises(CapabilityError, match="'sinkhorn' attention does not have"):
        log_trajectory_bound(Attention("sinkhorn", A=np.eye(2), V=np.eye(2)), t, R)


@pytest.mark.claim("stability-measured-jacobian")
def test_log_jacobian_bound_integrates_the_log_norm_of_the_particle_field():
    """Paper 1 (Castin et al., arXiv 2501.18322), the Grönwall argument with the measured Jacobian: one token moves
    by x' = V x under softmax attention, whose logarithmic norm is the top eigenvalue of (V + V^T)/2 (here sqrt 2)
    at every state; with a depth-dependent V the rate at the larger end of each interval is integrated.
    """
    V = np.array([[1.0, 2.0], [0.0, -1.0]])
    layer, t = Attention("softmax", A=np.eye(2), V=V), np.linspace(0, 1, 4)
    runs = np.random.default_rng(0).normal(size=(2, 4, 1, 2))
    np.testing.assert_allclose(log_jacobian_bound(layer, t, runs), math.sqrt(2) * t, rtol=1e-5)
    depth = log_jacobian_bound(lambda s: layer.with_(V=(1 + s) * V), t, runs)  # rate sqrt 2 (1 + s), larger end
    np.testing.assert_allclose(depth, math.sqrt(2) * np.cumsum([0.0, *(1 + t[1:]) / 3]), rtol=1e-5)
    with pytest.raises(ValueError, match="runs"):
        log_jacobian_bound(layer, t, runs[:, :3])
