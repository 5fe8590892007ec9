"""Tests of ``tokendynamics.ott_antonsen``: the Ott-Antonsen equation, its samples and its Poisson kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers import I2, bc_from_w, random_layer
from tokendynamics.kuramoto import coefficients, complex_parts, linear_layers, order_parameter
from tokendynamics.ott_antonsen import (
    OAPolynomial,
    ott_antonsen_rhs,
    poisson_kernel_atoms,
    sample_ott_antonsen,
    solve_ott_antonsen,
)
from tokendynamics.transport import circle_wasserstein1


def oa_reference(z, A, V, beta):
    """The Ott-Antonsen equation z_dot = 2 i omega(z) z + H(z) - conj(H(z)) z^2, written out here."""

    def pm(M):
        return (
            0.5 * ((M[0, 0] + M[1, 1]) + 1j * (M[1, 0] - M[0, 1])),
            0.5 * ((M[0, 0] - M[1, 1]) + 1j * (M[1, 0] + M[0, 1])),
        )

    ap, am = pm(A)
    vp, vm = pm(V)
    c = np.conj
    omega = 0.5 * beta * np.imag(c(ap) * vp + c(am) * vm + c(am) * vp * z + c(ap) * vm * c(z))
    H = 0.5 * beta * (ap * vp * z + am * vm * c(z) + ap * vm + am * vp)
    return 2j * omega * z + H - c(H) * z**2


@pytest.mark.claim("ott-antonsen-forms-agree")
def test_ott_antonsen_rhs_complex_bc_polynomial_and_polar_forms_agree():
    """Paper 2 (Li et al., 2026): the Ott-Antonsen equation in complex, B/C, expanded-polynomial (the library's)
    and polar (the authors' code) forms coincide.
    """
    rng = np.random.default_rng(7)
    for _ in range(20):
        A, V, beta = random_layer(rng)
        rho = np.sqrt(rng.uniform(0.01, 0.98, 50))
        phi = rng.uniform(-np.pi, np.pi, 50)
        z = rho * np.exp(1j * phi)
        lib = ott_antonsen_rhs(z, linear_layers(A, V, beta))
        ref = oa_reference(z, A, V, beta)
        k = bc_from_w(A, V)
        B = k["b1"] * z + k["b2"] * np.conj(z) + k["b3"]
        C = k["c1"] * z + np.conj(k["c1"]) * np.conj(z) + k["c2"]
        bc = 2j * beta * (B * z**2 + C * z + np.conj(B))
        e1, e2 = np.exp(1j * phi), np.exp(2j * phi)
        rho_dot = 2 * beta * (1 - rho**2) * (rho * np.imag(k["b1"] * e2 + k["b2"]) + np.imag(k["b3"] * e1))
        phi_dot = (
            2
            * beta
            * (
                (1 + rho**2) * np.real(k["b1"] * e2 + k["b2"])
                + (1 + rho**2) / rho * np.real(k["b3"] * e1)
                + 2 * rho * np.real(k["c1"] * e1)
                + k["c2"]
            )
        )
        polar = (rho_dot + 1j * rho * phi_dot) * e1
        scale = max(1.0, np.abs(ref).max())
        for other in (lib, bc, polar):
            assert np.max(np.abs(other - ref)) < 1e-13 * scale


@pytest.mark.claim("ott-antonsen-forms-agree")
def test_ott_antonsen_rhs_is_vectorised_over_centres_and_layers():
    """Paper 2 (Li et al., 2026): the Ott-Antonsen equation, evaluated for stacks of centres and layers at once."""
    rng = np.random.default_rng(8)
    As = rng.standard_normal((4, 2, 2))
    Vs = rng.standard_normal((4, 2, 2))
    z = 0.5 * np.exp(1j * rng.uniform(0, 6, (3, 4)))
    out = ott_antonsen_rhs(z, linear_layers(As, Vs, 1.3))
    assert out.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert abs(out[i, j] - oa_reference(z[i, j], As[j], Vs[j], 1.3)) < 1e-14
    assert isinstance(ott_antonsen_rhs(0.2j, linear_layers(I2, I2)), complex)


@pytest.mark.claim("case1-closed-form")
def test_ott_antonsen_rhs_with_V_identity_is_the_case1_closed_form():
    """Paper 2 (Li et al., 2026), Case V = I: z' = beta/2 (1 - |z|^2)(conj(a+) z + a-)."""
    rng = np.random.default_rng(15)
    for _ in range(20):
        A = rng.standard_normal((2, 2))
        beta = rng.uniform(0.3, 2)
        z = np.sqrt(rng.uniform(0, 1, 40)) * np.exp(1j * rng.uniform(0, 7, 40))
        ap, am = complex_parts(A)
        closed = 0.5 * beta * (1 - np.abs(z) ** 2) * (np.conj(ap) * z + am)
        assert np.max(np.abs(ott_antonsen_rhs(z, linear_layers(A, I2, beta)) - closed)) < 1e-13


@pytest.mark.claim("ott-antonsen-invariance")
def test_solve_ott_antonsen_keeps_the_circle_and_the_disk():
    """Paper 2 (Li et al., 2026): |z(0)| = 1 gives |z(t)| = 1 (error below 1e-10), |z(0)| < 1 gives |z(t)| < 1."""
    rng = np.random.default_rng(12)
    for _ in range(10):
        A, V, beta = random_layer(rng)
        phis = rng.uniform(0, 2 * np.pi, 5)
        on = solve_ott_antonsen(np.exp(1j * phis), linear_layers(A, V, beta), 10.0, rtol=1e-12, atol=1e-14)
        assert np.max(np.abs(np.abs(on.z) - 1)) < 1e-10
        inside = solve_ott_antonsen(0.9 * np.exp(1j * phis), linear_layers(A, V, beta), 10.0)
        assert np.all(np.abs(inside.z) < 1 + 1e-12)  # data converge to the circle: up to round-off
    with pytest.raises(ValueError, match="disk"):
        solve_ott_antonsen(1.5, linear_layers(I2, I2), 1.0)


@pytest.mark.claim("ott-antonsen-tracks-the-particles")
def test_sample_ott_antonsen_has_the_wrapped_cauchy_moments():
    """Paper 2 (Li et al., 2026): tokens on the Ott-Antonsen manifold have wrapped-Cauchy double angles, R_2m = z0^m."""
    z0 = 0.6 * np.exp(-1.1j)
    theta = sample_ott_antonsen(z0, 200_000, 3)
    for m in (1, 2, 3):  # R_{2m} = z0^m
        assert abs(np.mean(np.exp(2j * m * theta)) - z0**m) < 5 / math.sqrt(200_000)
    assert abs(order_parameter(theta, 1)) < 5 / math.sqrt(200_000)  # random branches: R1 ~ 0
    with pytest.raises(ValueError, match="disk"):
        sample_ott_antonsen(1.2, 10)
    with pytest.raises(ValueError, match="point mass"):
        sample_ott_antonsen(1.0, 10)


def test_poisson_kernel_atoms_have_the_kernels_moments_and_converge_in_w1():
    z = 0.6 * np.exp(1.0j)
    psi = poisson_kernel_atoms(z, 512)
    for k in (1, 2, 3):  # R_k of the wrapped Cauchy law is z^k (up to O(|z|^m))
        assert np.mean(np.exp(1j * k * psi)) == pytest.approx(z**k, abs=1e-12)
    x = np.random.default_rng(0).uniform(-np.pi, np.pi, 500)
    fine = circle_wasserstein1(x, poisson_kernel_atoms(z, 65536))
    for m in (256, 4096):
        assert abs(circle_wasserstein1(x, poisson_kernel_atoms(z, m)) - fine) <= 2 * np.pi / m
    assert np.allclose(poisson_kernel_atoms(np.exp(0.4j), 16), 0.4)  # on the circle: the point mass
    assert poisson_kernel_atoms(np.array([0.1, 0.2j]), 8).shape == (2, 8)
    with pytest.raises(ValueError, match="closed unit disk"):
        poisson_kernel_atoms(1.1, 8)


@pytest.mark.claim("ott-antonsen-forms-agree")
def test_solve_ott_antonsen_of_a_batch_of_layers_equals_one_run_per_layer():
    """Paper 2 (Li et al., 2026): the Ott-Antonsen flow of a batch of layers (a leading axis of the layer) is the flow
    of each layer, by the adaptive and the fixed-step rk4 paths; the polynomial of the batch is the polynomial of
    each member."""
    rng = np.random.default_rng(19)
    As, Vs = rng.standard_normal((3, 2, 2)), rng.standard_normal((3, 2, 2))
    batch = linear_layers(As, Vs, np.array([0.5, 1.0, 1.5]))
    z0 = np.array([0.2, 0.3j, -0.1 + 0.4j])
    t = np.linspace(0, 3, 7)
    for method in ("DOP853", "rk4"):
        many = solve_ott_antonsen(z0, batch, 3.0, t_eval=t, method=method, rtol=1e-12, atol=1e-14, dt=0.01)
        for b in range(3):
            one = solve_ott_antonsen(z0[b], batch.member(b), 3.0, t_eval=t, method=method, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(many.z[:, b], one.z, atol=1e-10)
    poly = OAPolynomial.of(coefficients(batch))
    z = 0.3 * np.exp(1j * rng.uniform(0, 6, 3))
    np.testing.assert_allclose(poly(z), [ott_antonsen_rhs(z[b], batch.member(b)) for b in range(3)], atol=1e-15)
