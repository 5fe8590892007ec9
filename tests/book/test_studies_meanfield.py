"""Tests of ``tokendynamics.book.studies.meanfield``: the mean-field rate in d = 1 and in the plane, the masked
mean-field study, and the rate fits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokendynamics import Attention
from tokendynamics.book.studies.meanfield import (
    RateFit,
    curve_slope,
    fit_rate,
    masked_meanfield_study,
    meanfield_study_1d,
    meanfield_study_pairs,
    rate_shape,
    sample_rng,
)
from tokendynamics.transport import wasserstein

# the chapter's layers: the score and value of the book's first mean-field runs with both signs flipped
# (the same covariance dynamics, a contracting mean; see chapter 1)
LAYER_2D = Attention("softmax", A=[[1.0, -0.5], [0.5, 0.5]], V=-np.eye(2))


def _uniform_square(n, rng):
    return rng.uniform(-1, 1, (n, 2))


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


@pytest.mark.claim("theorem-b-mean-field-limit")
@pytest.mark.slow
def test_meanfield_study_1d_rate_is_about_n_to_the_minus_one_half():
    """Paper 1 (Castin et al., arXiv 2501.18322), mean-field limit theorem: n i.i.d. tokens follow the Transformer PDE
    at the rate
    of the empirical measure, about n^{-1/2} on the line (up to sqrt(log log n) for Gaussian data, Bobkov and
    Ledoux).

    The chapter's layer (a = 0.25, v = -1: the shape clusters, the mean contracts), independent samples for every
    (seed, n), 20 seeds: the fitted slope of W2 at time T is within three standard errors of the theory's slopes
    over these n, between -1/2 and the slope of sqrt(log log n / n); so is the dynamics error along each token.
    """
    ns = [50, 200, 800]
    out = meanfield_study_1d(ns, range(20), T=2.0, a=0.25, v=-1.0, alpha0=0.5, sigma0=1.0, dt=0.5)
    fit = fit_rate(ns, out["wT"])
    loglog = curve_slope(ns, rate_shape(ns, "gaussian-1d"), fit.weights)
    assert -0.5 < loglog < -0.43
    assert fit.stderr < 0.04, fit
    assert -0.5 - 3 * fit.stderr <= fit.slope <= loglog + 3 * fit.stderr, fit
    lag = fit_rate(ns, out["lagrangian"])
    assert abs(lag.slope + 0.5) <= 3 * lag.stderr + 0.05, lag


def test_meanfield_study_1d_batch_equals_the_loop_and_samples_are_independent_across_n():
    """The batched study (one simulate_batch per n) gives the loop over simulate to round-off; the sample at n is
    not the head of the sample at a larger n (independent errors across n)."""
    kw = {"T": 1.0, "a": 0.25, "v": -1.0, "alpha0": 0.5, "sigma0": 1.0, "dt": 0.25}
    fast = meanfield_study_1d([10, 30], [0, 1, 2], **kw)
    slow = meanfield_study_1d([10, 30], [0, 1, 2], batch=False, **kw)
    for key in ("w0", "wT", "lagrangian"):
        np.testing.assert_allclose(fast[key], slow[key], rtol=1e-12, atol=1e-14)
    small = sample_rng(3, 10).standard_normal(10)
    large = sample_rng(3, 20).standard_normal(20)
    assert np.max(np.abs(small - large[:10])) > 0.1
    assert not np.array_equal(sample_rng(3, 10, 0).standard_normal(5), sample_rng(3, 10, 1).standard_normal(5))
    np.testing.assert_array_equal(sample_rng(3, 10).standard_normal(5), sample_rng(3, 10).standard_normal(5))


def test_meanfield_study_pairs_equals_the_loop_and_the_linear_program():
    """Two independent clouds per seed: the batch equals the loop, and the assignment distance is the exact W2."""
    fast = meanfield_study_pairs(LAYER_2D, _uniform_square, [12, 25], [0, 1], T=0.5, dt=0.1)
    slow = meanfield_study_pairs(LAYER_2D, _uniform_square, [12, 25], [0, 1], T=0.5, dt=0.1, batch=False)
    for key in ("w0", "wT"):
        np.testing.assert_allclose(fast[key], slow[key], rtol=1e-12)
    X = _uniform_square(25, sample_rng(1, 25, 0))
    Y = _uniform_square(25, sample_rng(1, 25, 1))
    assert fast["w0"][1, 1] == pytest.approx(wasserstein(X, Y, method="exact"), rel=1e-9)
    np.testing.assert_array_equal(fast["n"], [12, 25])


@pytest.mark.claim("mean-field-limit-in-the-plane")
def test_meanfield_study_pairs_rate_in_the_plane_follows_the_optimal_matching_rate():
    """Paper 1 (Castin et al., arXiv 2501.18322), mean-field limit theorem in d = 2: two independent clouds of n uniform
    tokens in
    the square, pushed by the same softmax layer, are W2-close at the rate of the optimal matching of Ajtai, Komlos
    and Tusnady, (log n / n)^{1/2}: the fitted slope at time T is within three standard errors of that rate's
    slope over the same n.
    """
    ns = [50, 200, 800]
    out = meanfield_study_pairs(LAYER_2D, _uniform_square, ns, range(4), T=1.0, dt=0.2)
    fit = fit_rate(ns, out["wT"])
    theory = curve_slope(ns, rate_shape(ns, "uniform-2d"), fit.weights)
    assert fit.stderr < 0.04, fit
    assert abs(fit.slope - theory) <= 3 * fit.stderr + 0.02, (fit, theory)
    assert np.all(out["wT"][-1] < out["wT"][0])


def test_fit_rate_recovers_the_slope_with_a_calibrated_standard_error():
    """fit_rate: an exact power law gives its slope; on noisy independent seeds the standard error is calibrated
    (the z-scores of 300 fits have unit spread), with different numbers of seeds per n; bad input is refused."""
    ns = np.array([50, 100, 200, 400, 800])
    exact = fit_rate(ns, np.outer(2.0 * ns**-0.5, np.ones(3)) * [0.9, 1.0, 1.1])
    assert isinstance(exact, RateFit) and exact.slope == pytest.approx(-0.5, abs=1e-12)
    assert exact.predict(100) == pytest.approx(exact.mean[1], rel=1e-12)
    rng = np.random.default_rng(5)
    z = []
    for _ in range(300):
        rows = [2.0 * n**-0.5 * rng.lognormal(0, 0.4, size=s) for n, s in zip(ns, (40, 30, 20, 15, 10))]
        fit = fit_rate(ns, rows)
        z.append((fit.slope + 0.5) / fit.stderr)
    assert abs(np.mean(z)) < 0.25 and 0.8 < np.std(z) < 1.25, (np.mean(z), np.std(z))
    assert fit_rate(ns, rows, weighted=False).stderr >= 0.9 * fit.stderr  # weights never hurt much
    with pytest.raises(ValueError, match="two errors"):
        fit_rate([1, 2], [[1.0], [2.0]])
    with pytest.raises(ValueError, match="positive"):
        fit_rate([1, 2], [[1.0, 0.0], [2.0, 1.0]])


def test_rate_shape_and_curve_slope_give_the_local_slopes_of_the_theory():
    """The theory's rates and their slopes over a design: n^{-1/2} exactly, and the logarithms flatten the others
    (d log r / d log n = -1/2 + 1/(2 log n) for sqrt(log n / n))."""
    ns = np.array([100.0, 400.0, 1600.0])
    assert curve_slope(ns, rate_shape(ns, "compact-1d")) == pytest.approx(-0.5, abs=1e-12)
    n0 = 400.0
    local = curve_slope([n0 / 1.01, n0 * 1.01], rate_shape([n0 / 1.01, n0 * 1.01], "uniform-2d"))
    assert local == pytest.approx(-0.5 + 0.5 / math.log(n0), abs=1e-4)
    local = curve_slope([n0 / 1.01, n0 * 1.01], rate_shape([n0 / 1.01, n0 * 1.01], "gaussian-1d"))
    assert local == pytest.approx(-0.5 + 0.5 / (math.log(n0) * math.log(math.log(n0))), abs=1e-4)
    assert -0.5 < curve_slope(ns, rate_shape(ns, "gaussian-1d")) < curve_slope(ns, rate_shape(ns, "uniform-2d"))
    with pytest.raises(ValueError, match="law"):
        rate_shape(ns, "cauchy")
    with pytest.raises(ValueError, match="n > e"):
        rate_shape([2.0], "gaussian-1d")
    with pytest.raises(ValueError, match="positive"):
        curve_slope([1, 2], [1.0, -1.0])


MF_1D = {"T": 1.0, "a": -0.5, "v": 1.0, "alpha0": 0.0, "sigma0": 1.0, "dt": 0.1}  # a valid 1-D study


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: meanfield_study_1d([0], [0], **MF_1D), "ns"),
        (lambda: meanfield_study_1d([10], [-1], **MF_1D), "seeds"),
        (lambda: masked_meanfield_study([5], [0], [1.5], **MF_1D), "sink_masses"),
        (lambda: masked_meanfield_study([5], [0], [0.1], **MF_1D, against=("x",)), "against"),
        (lambda: masked_meanfield_study([5], [0], [0.1], **{**MF_1D, "sigma0": -1.0}), "sigma0"),
        (lambda: fit_rate([10], [[1.0, 2.0]]), "two values of n"),
        (lambda: curve_slope([10, 20], [1.0, 0.5], [-1.0, 1.0]), "weights"),
    ],
)
def test_studies_refuse_bad_input_with_an_error_naming_the_argument(call, words):
    with pytest.raises(ValueError, match=words):
        call()


@pytest.mark.parametrize("mode", ["fast", "full"])
def test_the_chapters_plane_slope_rests_on_at_least_30_seeds_in_both_settings(mode):
    """The d = 2 mean-field slope of the well-posedness chapter is fitted over at least 30 independent seeds
    per n in both settings (a slope over a few seeds scatters by more than its standard error says)."""
    from tokendynamics.book.experiments import settings

    p = settings("p1_meanfield_2d", mode)
    assert p["seeds"] >= 30 and len(p["ns"]) >= 4
