"""Tests of ``tokendynamics.meanfield``: the one-dimensional Gaussian oracle, the mean-field rate and
the masked mean-field study.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics import Attention, BlowUpError, simulate
from tokendynamics.meanfield import (
    blowup_time_1d,
    fit_power_law,
    gaussian_1d_flow_map,
    gaussian_1d_solution,
    masked_meanfield_study,
    meanfield_study_1d,
    meanfield_study_reference,
)


@pytest.mark.claim("masked-product-data-follow-the-unmasked-dynamics")
def test_masked_meanfield_study_product_data_follow_the_unmasked_dynamics_as_n_grows():
    """Paper 1 (Castin et al., arXiv 2501.18322): for product data mu_0 = lambda x nu_0 (sink atom m0 = 0.2 at s =
    0) the masked solution is lambda x nu_t with nu_t the unmasked one: masked particles approach both the
    unmasked particles and the mean field as n grows.
    """
    out = masked_meanfield_study(
        [100, 900],
        range(6),
        [0.2],
        T=1.0,
        a=-0.5,
        v=1.0,
        alpha0=0.5,
        sigma0=1.0,
        dt=0.25,
        against=("unmasked", "meanfield"),
    )
    unmasked, meanfield = out["unmasked_mean"][0].mean(axis=1), out["meanfield_mean"][0].mean(axis=1)
    assert unmasked[1] < 0.5 * unmasked[0], unmasked  # ~ n^{-1/2}: 9 x more tokens, about 3 x smaller
    assert meanfield[1] < meanfield[0] and meanfield[1] < 0.1, meanfield  # noisier: the common sampling error
    assert np.all(out["unmasked_sup"] >= out["unmasked_mean"]) and out["profile_s"].shape == (1, 900)


@pytest.mark.claim("sink-makes-the-first-positions-converge")
def test_without_a_sink_the_first_positions_stay_far_from_the_unmasked_dynamics():
    """Paper 1 (Castin et al., arXiv 2501.18322): without a sink the first token sees only itself (x' = v x) and
    its error does not shrink with n; a sink fixes that.
    """
    out = masked_meanfield_study([50, 800], range(6), [0.0, 0.2], T=1.0, a=-0.5, v=1.0, alpha0=0.5, sigma0=1.0, dt=0.5)
    err = out["profile_err"]
    assert np.max(err[0, :4]) > 3 * np.max(err[1, :4]), err[:, :4]
    first = out["unmasked_first"].mean(axis=2)
    assert first[0, 1] > 0.8 * first[0, 0] and first[1, 1] < 0.5 * first[1, 0], first  # stuck without sink only
    np.testing.assert_allclose(out["unmasked_first"][:, -1, 0], err[:, 0])
    with pytest.raises(ValueError, match="against"):
        masked_meanfield_study(
            [10], [0], [0.1], T=1.0, a=-0.5, v=1.0, alpha0=0.0, sigma0=1.0, dt=0.5, against=("exact",)
        )


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


@pytest.mark.claim("theorem-b-mean-field-limit")
def test_fit_power_law_recovers_an_exact_slope():
    """The fit behind the mean-field rate of Paper 1 (Castin et al., arXiv 2501.18322) (Theorem B): an exact power
    law gives its exponent, and the bootstrap over seeds gives a visible uncertainty only for noisy seeds.
    """
    ns = np.array([10, 100, 1000])
    gamma, c, se = fit_power_law(ns, 3.0 * ns**-0.5)
    assert gamma == pytest.approx(-0.5, abs=1e-12) and c == pytest.approx(math.log(3.0)) and se < 1e-10
    with pytest.raises(ValueError, match="positive"):
        fit_power_law(ns, [1.0, 0.0, 1.0])
    # bootstrap over seeds: noisy seeds give a visible uncertainty, identical seeds none
    noisy = 3.0 * ns[:, None] ** -0.5 * np.random.default_rng(0).lognormal(0, 0.5, (3, 20))
    g, _, se_boot = fit_power_law(ns, noisy, bootstrap=400, rng=1)
    assert 0.02 < se_boot < 0.2 and abs(g + 0.5) < 4 * se_boot
    assert fit_power_law(ns, np.repeat((ns**-0.5)[:, None], 5, axis=1), bootstrap=50, rng=1)[2] < 1e-12


@pytest.mark.claim("theorem-b-mean-field-limit")
@pytest.mark.slow
def test_meanfield_study_1d_rate_is_about_n_to_the_minus_one_half():
    """Paper 1 (Castin et al., arXiv 2501.18322), Theorem B: n i.i.d. tokens follow the Transformer PDE at the rate
    of the empirical measure, about n^{-1/2} on the line.

    a = -0.5 (see chapter 1: a^2 sigma0^4 < 1/2 keeps the importance weights of the Gaussian tails
    square-integrable; at a = -1 the measured slope is flatter); 30 seeds (a few seeds give slopes between -0.30
    and -0.39), n = 100..1600 (the chapter's full setting goes further).
    """
    out = meanfield_study_1d([100, 400, 1600], range(30), T=2.0, a=-0.5, v=1.0, alpha0=0.5, sigma0=1.0, dt=0.5)
    slope, _, _ = fit_power_law(out["n"], out["wT"])
    assert -0.65 <= slope <= -0.35, slope
    lag, _, _ = fit_power_law(out["n"], out["lagrangian"])
    assert -0.65 <= lag <= -0.35, lag


@pytest.mark.claim("mean-field-limit-in-the-plane")
def test_meanfield_study_reference_error_shrinks_with_n():
    """Paper 1 (Castin et al., arXiv 2501.18322), Theorem B in d = 2: with uniform (compactly supported) tokens the
    distance to a large reference run decreases with n.
    """
    layer = Attention("softmax", A=[[-1.0, 0.5], [-0.5, -0.5]], V=np.eye(2))
    sample = lambda n, rng: rng.uniform(-1, 1, (n, 2))  # noqa: E731
    out = meanfield_study_reference(layer, sample, [20, 320], range(3), N_ref=1000, ref_seed=99, T=1.0, dt=0.1)
    assert out["wT"].shape == (2, 3)
    assert out["wT"][1].mean() < 0.6 * out["wT"][0].mean()
    assert out["ref_self"].shape == (2,) and out["ref_self"][1] < out["wT"][1].mean()
    with pytest.raises(ValueError, match="reference seeds"):
        meanfield_study_reference(layer, sample, [20], [100], N_ref=50, ref_seed=99, T=1.0, dt=0.1)
