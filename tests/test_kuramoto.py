"""Tests of ``tokendynamics.kuramoto``: the second-harmonic Kuramoto-Daido form of planar linear attention.

Reference formulas are written here (or in ``tests/helpers.py``) independently of the library, so
a wrong library formula makes a test fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import I2, bc_from_w, linear_reference, random_layer
from tokendynamics import Attention, circle_tokens, particle_field
from tokendynamics.kuramoto import (
    J,
    cluster_velocity,
    coefficients,
    complex_parts,
    daido_coefficients,
    linear_layers,
    order_parameter,
    phase_velocity,
    solve_phases,
    transverse_exponent,
)
from tokendynamics.ott_antonsen import ott_antonsen_rhs


def vector_model_theta_dot(theta, A, V, beta):
    """Angle velocities of the direct O(n^2) vector model, <x_dot_k, J x_k>."""
    X = circle_tokens(theta)
    n = len(theta)
    S = X @ A @ X.T  # <x_k, A x_j>
    U = beta * (S / n) @ (X @ V.T)
    U = U - np.sum(U * X, 1, keepdims=True) * X
    return np.sum(U * (X @ J.T), 1)


@pytest.mark.claim("kuramoto-daido-form")
def test_phase_velocity_equals_the_vector_model_of_linear_attention():
    """Paper 2 (Li et al., 2026): in d = 2 linear attention is a second-harmonic Kuramoto-Daido model,
    theta_k' = omega(R2) + Im(H(R2) e^{-2 i theta_k}), equal to the O(n^2) vector model to 1e-12 (n = 37).
    """
    rng = np.random.default_rng(1)
    for _ in range(20):
        A, V, beta = random_layer(rng)
        theta = rng.uniform(0, 2 * np.pi, 37)
        ref = vector_model_theta_dot(theta, A, V, beta)
        R = order_parameter(theta, 2)
        coef = coefficients(linear_layers(A, V, beta))
        om, H = coef.omega(R), coef.forcing(R)
        assert np.max(np.abs(ref - (om + np.imag(H * np.exp(-2j * theta))))) < 1e-12
        assert np.max(np.abs(ref - phase_velocity(theta, linear_layers(A, V, beta)))) < 1e-12


@pytest.mark.claim("kuramoto-daido-form")
def test_daido_coefficients_w_b_c_table_gives_the_vector_model():
    """Paper 2 (Li et al., 2026): the same with theta' = beta [C(R) + 2 Re(B(R) e^{2 i theta})], B and C from the
    authors' w-table.
    """
    rng = np.random.default_rng(2)
    for _ in range(20):
        A, V, beta = random_layer(rng)
        theta = rng.uniform(0, 2 * np.pi, 37)
        R = np.mean(np.exp(2j * theta))
        k = bc_from_w(A, V)
        B = k["b1"] * R + k["b2"] * np.conj(R) + k["b3"]
        C = np.real(k["c1"] * R + np.conj(k["c1"]) * np.conj(R) + k["c2"])
        got = beta * (C + 2 * np.real(B * np.exp(2j * theta)))
        assert np.max(np.abs(vector_model_theta_dot(theta, A, V, beta) - got)) < 1e-12


@pytest.mark.claim("kuramoto-daido-form")
def test_phase_velocity_equals_the_core_linear_attention_field_on_the_circle():
    """Paper 2 (Li et al., 2026): the O(n) angle field equals <x', J x> of Attention("linear") through the shared
    core.
    """
    rng = np.random.default_rng(3)
    for n in (1, 2, 37, 500):
        A, V, beta = random_layer(rng)
        theta = rng.uniform(-10, 10, n)
        X = circle_tokens(theta)
        U = particle_field(X, Attention("linear", A=A, V=V, beta=beta), sphere=True)
        core = np.sum(U * (X @ J.T), axis=1)
        kd = phase_velocity(theta, linear_layers(A, V, beta))
        assert np.max(np.abs(core - kd)) < 1e-13 * max(1, np.abs(core).max())


@pytest.mark.claim("kuramoto-score-convention")
def test_phase_velocity_with_the_transposed_score_does_not_match_the_core():
    """Paper 2 (Li et al., 2026) scores <x_k, A x_j>: with <A x_k, x_j> (that is, A^T) the Kuramoto form must not
    match the core.
    """
    rng = np.random.default_rng(4)
    A = np.array([[0.3, 1.7], [-0.4, 0.9]])  # far from symmetric
    V = rng.standard_normal((2, 2))
    theta = rng.uniform(0, 2 * np.pi, 37)
    X = circle_tokens(theta)
    core = np.sum(particle_field(X, Attention("linear", A=A, V=V), sphere=True) * (X @ J.T), axis=1)
    assert np.max(np.abs(core - phase_velocity(theta, linear_layers(A, V)))) < 1e-13
    assert np.max(np.abs(core - phase_velocity(theta, linear_layers(A.T, V)))) > 1e-2


@pytest.mark.claim("daido-coefficients")
def test_daido_coefficients_equal_the_authors_w_formulas():
    """Paper 2 (Li et al., 2026), the authors' code: b1 = i/4 conj(a-) conj(v-), ..., c2 = Im(conj(a+) v+ +
    conj(a-) v-)/2 equal their w-table.
    """
    rng = np.random.default_rng(5)
    for _ in range(50):
        A, V, _ = random_layer(rng)
        ours, ref = daido_coefficients(linear_layers(A, V)), bc_from_w(A, V)
        for key in ref:
            assert abs(ours[key] - ref[key]) < 1e-14 * max(1, abs(ref[key]))


@pytest.mark.claim("daido-coefficients")
def test_complex_parts_give_the_determinant_and_the_operator_norm():
    """Paper 2 (Li et al., 2026): with M z = m+ z + m- conj(z), det M = |m+|^2 - |m-|^2 and |M|_op = |m+| + |m-|."""
    rng = np.random.default_rng(6)
    for _ in range(50):
        M = rng.standard_normal((2, 2)) * rng.uniform(0.1, 10)
        p, m = complex_parts(M)
        assert abs(np.linalg.det(M) - (abs(p) ** 2 - abs(m) ** 2)) < 1e-12 * max(1, np.abs(M).max() ** 2)
        assert abs(np.linalg.norm(M, 2) - (abs(p) + abs(m))) < 1e-12 * max(1, np.abs(M).max())
        x = rng.standard_normal(2)
        z = x[0] + 1j * x[1]
        Mz = M @ x
        assert abs((Mz[0] + 1j * Mz[1]) - (p * z + m * np.conj(z))) < 1e-12 * max(1, np.abs(M).max())


def test_complex_parts_rejects_bad_input():
    with pytest.raises(ValueError, match="2 x 2"):
        complex_parts(np.eye(3))
    with pytest.raises(ValueError, match="non-finite"):
        complex_parts([[1, np.nan], [0, 1]])
    with pytest.raises(ValueError, match="real"):
        complex_parts(np.eye(2) * 1j)
    with pytest.raises(ValueError, match="non-finite"):
        phase_velocity([0.1, np.inf], linear_layers(I2, I2))


def test_require_circle_layer_refuses_all_but_one_head_of_linear_attention_on_the_circle():
    """The reductions of paper 2 (Li et al., 2026) are those of one head of linear attention in d = 2: a kind without
    the second-moment field, another dimension, several heads, a causal layer or (for one-layer functions) a batch are
    refused by name, through the one check ``require_circle_layer``."""
    from tokendynamics.errors import CapabilityError

    theta = [0.1, 0.2]
    with pytest.raises(CapabilityError, match="softmax"):
        phase_velocity(theta, Attention("softmax", A=I2, V=I2))
    with pytest.raises(ValueError, match="d = 2"):
        solve_phases(theta, Attention("linear", A=np.eye(3), V=np.eye(3)))
    with pytest.raises(ValueError, match="one head"):
        coefficients(Attention("linear", A=np.stack([I2, I2]), V=np.stack([I2, I2])))
    with pytest.raises(ValueError, match="causal"):
        daido_coefficients(Attention("linear", A=I2, V=I2, causal=True))
    with pytest.raises(TypeError, match="batch"):
        phase_velocity(theta, linear_layers(np.stack([I2, I2]), I2))
    with pytest.raises(TypeError, match="Attention"):
        phase_velocity(theta, I2)
    batch = linear_layers(np.stack([I2, 2 * I2]), I2, np.array([1.0, 3.0]))  # a batch: a leading axis of the layer
    assert batch.batch_size == 2 and np.shape(coefficients(batch).a_plus) == (2,)
    assert coefficients(batch).beta.tolist() == [1.0, 3.0] and np.allclose(batch.V, I2)
    with pytest.raises(ValueError, match="one leading axis"):
        linear_layers(np.zeros((2, 3, 2, 2)), I2)


@pytest.mark.claim("kuramoto-daido-form")
def test_solve_phases_matches_the_core_simulate():
    """Paper 2 (Li et al., 2026): integrating the Kuramoto-Daido angles is integrating linear attention on the
    circle.
    """
    rng = np.random.default_rng(10)
    A, V, beta = random_layer(rng)
    theta0 = rng.uniform(0, 2 * np.pi, 30)
    t = np.linspace(0, 5, 51)
    ph = solve_phases(theta0, linear_layers(A, V, beta), 5.0, t_eval=t, rtol=1e-11, atol=1e-13)
    traj = linear_reference(circle_tokens(theta0), A, V, 5.0, t, beta=beta)
    assert np.max(np.abs(circle_tokens(ph.theta) - traj.X)) < 1e-8


@pytest.mark.claim("beta-only-rescales-time")
def test_solve_phases_beta_only_rescales_time():
    """Paper 2 (Li et al., 2026): for linear attention beta only rescales time, x^beta(t) = x^1(beta t)."""
    rng = np.random.default_rng(20)
    A, V, _ = random_layer(rng)
    theta0 = rng.uniform(0, 6, 15)
    t = np.linspace(0, 4, 21)
    fast = solve_phases(theta0, linear_layers(A, V, 2.5), 4.0, t_eval=t, rtol=1e-11, atol=1e-13)
    slow = solve_phases(theta0, linear_layers(A, V, 1.0), 10.0, t_eval=2.5 * t, rtol=1e-11, atol=1e-13)
    assert np.max(np.abs(fast.theta - slow.theta)) < 1e-8


@pytest.mark.claim("cluster-equation")
def test_cluster_velocity_and_transverse_exponent_match_the_cluster_equation():
    """Paper 2 (Li et al., 2026): on |z| = 1, Im(z' conj z)/2 = beta q_A s_V (the cluster velocity), and
    -2 Re(H e^{-2i theta}) is the transverse exponent.
    """
    rng = np.random.default_rng(14)
    for _ in range(20):
        A, V, beta = random_layer(rng)
        th = rng.uniform(0, np.pi, 30)
        z = np.exp(2j * th)
        layer = linear_layers(A, V, beta)
        lhs = 0.5 * np.imag(ott_antonsen_rhs(z, layer) * np.conj(z))
        x = circle_tokens(th)
        qA = np.einsum("ki,ij,kj->k", x, A, x)
        sV = np.einsum("ki,ki->k", x @ V.T, x @ J.T)
        assert np.max(np.abs(lhs - beta * qA * sV)) < 1e-12
        assert np.max(np.abs(cluster_velocity(th, layer) - beta * qA * sV)) < 1e-12
        lam = beta * (np.einsum("ki,ij,kj->k", x @ J.T, A, x) * sV - qA * np.einsum("ki,ij,kj->k", x, V, x))
        assert np.max(np.abs(transverse_exponent(th, layer) - lam)) < 1e-12
