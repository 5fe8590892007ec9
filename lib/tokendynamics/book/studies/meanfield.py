r"""The well-posedness chapter's mean-field studies and the rate fits that read them.

Paper 1 (Castin et al., arXiv:2501.18322), its mean-field limit theorem: the empirical measure of
:math:`n` particles solves the Transformer PDE, so :math:`W_p(\mu^n_t,\mu_t)\le C(t)\,W_p(\mu^n_0,\mu_0)`
and the :math:`n`-token error inherits the rate of the empirical measure (``chapters/01_well_posedness.md``,
section "The mean-field limit").

The studies draw an *independent* sample for every pair (seed, n) (:func:`sample_rng`), integrate the
seeds of one n as one batch (:func:`~tokendynamics.ensembles.simulate_batch`), and :func:`fit_rate`
fits the log–log slope of the mean error with its standard error. :func:`rate_shape` gives the rates
the theory predicts for the empirical measure — :math:`(\log\log n/n)^{1/2}` for a Gaussian on the line
(Bobkov–Ledoux), :math:`(\log n/n)^{1/2}` for the uniform measure of a square (Ajtai–Komlós–Tusnády) —
whose slope over the same n (:func:`curve_slope`) is the number a measured slope is compared with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from ...attention import Attention
from ...ensembles import simulate_batch
from ...masked import with_sink
from ...meanfield import gaussian_1d_flow_map, gaussian_1d_solution
from ...particles import sample_gaussian, simulate
from ...transport import conditional_wasserstein, wasserstein_gaussian_1d
from ...validation import validate_count, validate_finite_array, validate_positive

__all__ = [
    "sample_rng",
    "meanfield_study_1d",
    "meanfield_study_pairs",
    "masked_meanfield_study",
    "RateFit",
    "fit_rate",
    "curve_slope",
    "rate_shape",
]


def _counts(values, name: str, minimum: int = 1) -> list[int]:
    """A non-empty list of integers >= ``minimum`` (sample sizes, seeds)."""
    if isinstance(values, (str, bytes)) or np.ndim(values) != 1 or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list of integers, got {values!r:.60}")
    return [validate_count(v, f"{name}[{k}]", minimum=minimum) for k, v in enumerate(values)]


def sample_rng(seed: int, n: int, stream: int = 0) -> np.random.Generator:
    """The generator ``numpy.random.default_rng([seed, n, stream])`` of the sample of ``n`` tokens for ``seed``.

    Samples of different sizes, seeds or streams are independent, so the error at one n is not a part
    of the error at a larger n (a nested design would correlate the errors across n and mislead a
    standard error computed as if they were independent).

    Parameters
    ----------
    seed : int
        Seed of the run.
    n : int
        Number of tokens of the sample.
    stream : int
        Which of several independent samples of one (seed, n) (e.g. 1 for the second cloud of a pair).

    Returns
    -------
    numpy.random.Generator
    """
    return np.random.default_rng([int(seed), int(n), int(stream)])


def _final_states(X0, layer, T, dt, batch: bool) -> np.ndarray:
    """Tokens at time T of the systems X0 (B, n, d), RK4 with step dt: one batch or a loop over simulate."""
    if not batch:
        return np.stack([simulate(x, layer, T, dt=dt, method="rk4", save_every=10**9).final for x in X0])
    run = simulate_batch(X0, layer, T, dt=dt, method="rk4", save_every=10**9)
    if np.any(run.blew_up):
        b = int(np.flatnonzero(run.blew_up)[0])
        raise RuntimeError(f"system {b} of the mean-field study blew up: {run.reasons[b]}")
    return run.final


def meanfield_study_1d(ns, seeds, *, T, a, v, alpha0, sigma0, dt, beta=1.0, batch=True) -> dict[str, np.ndarray]:
    r"""W2 distance between the :math:`n`-particle solution and the exact mean field, d = 1, Gaussian data.

    For each :math:`n` and seed: :math:`x_i(0)\sim N(\alpha_0,\sigma_0^2)` i.i.d. (from
    ``sample_rng(seed, n)``), softmax attention with score :math:`\beta a` and value :math:`v` (RK4,
    step ``dt``) up to ``T``, the seeds of one :math:`n` as one batch (``batch=False``: a loop over
    :func:`~tokendynamics.particles.simulate`, the same numbers to round-off).

    Parameters
    ----------
    ns, seeds : sequences of int
        Numbers of tokens and seeds.
    T, dt : float
        Final time and RK4 step.
    a, v, beta : float
        Score :math:`a` (times :math:`\beta`) and value :math:`v` of the layer.
    alpha0, sigma0 : float
        Mean and standard deviation of the initial Gaussian.
    batch : bool
        Integrate the seeds of one n as one batch.

    Returns
    -------
    dict
        Arrays (len(ns), len(seeds)): ``w0`` and ``wT``, the exact :math:`W_2` to the Gaussian mean field at
        t = 0 and T (:func:`~tokendynamics.transport.wasserstein_gaussian_1d`), ``lagrangian``
        :math:`(\frac1n\sum_i|x_i(T)-\Phi_T(x_i(0))|^2)^{1/2}` (the dynamics error alone, along the
        characteristic flow :func:`~tokendynamics.meanfield.gaussian_1d_flow_map`); and ``n``.
    """
    ns, seeds = _counts(ns, "ns"), _counts(seeds, "seeds", minimum=0)
    alpha_T, sigma_T = gaussian_1d_solution(T, alpha0, sigma0, beta * a, v)
    layer = Attention("softmax", A=[[a]], V=[[v]], beta=beta)
    out = {k: np.zeros((len(ns), len(seeds))) for k in ("w0", "wT", "lagrangian")}
    for i, n in enumerate(ns):
        X0 = np.stack([sample_gaussian(n, [alpha0], [[sigma0**2]], rng=sample_rng(s, n)) for s in seeds])
        XT = _final_states(X0, layer, T, dt, batch)[:, :, 0]
        phi = gaussian_1d_flow_map(X0[:, :, 0], T, alpha0, sigma0, beta * a, v)
        for j in range(len(seeds)):
            out["w0"][i, j] = wasserstein_gaussian_1d(X0[j, :, 0], alpha0, sigma0)
            out["wT"][i, j] = wasserstein_gaussian_1d(XT[j], float(alpha_T), float(sigma_T))
        out["lagrangian"][i] = np.sqrt(np.mean((XT - phi) ** 2, axis=1))
    out["n"] = np.array(ns)
    return out


def _w2_equal_clouds(X: np.ndarray, Y: np.ndarray) -> float:
    """Exact W2 between two clouds of n equally weighted points: an assignment problem (Birkhoff)."""
    C = cdist(X, Y, "sqeuclidean")
    rows, cols = linear_sum_assignment(C)
    return float(math.sqrt(max(float(C[rows, cols].mean()), 0.0)))


def meanfield_study_pairs(layer, sample, ns, seeds, *, T: float, dt: float, batch: bool = True) -> dict:
    r"""W2 distance between two independent :math:`n`-particle solutions, at t = 0 and t = T.

    For each :math:`n` and seed two independent clouds (``sample(n, rng)`` with ``sample_rng(seed, n, 0)``
    and ``sample_rng(seed, n, 1)``) are pushed by ``layer`` (RK4, every cloud of one n in one batch), and
    their distance is computed exactly (an assignment problem). Since
    :math:`\mathbb E\,W_2^2(\mu^n_0,\mu_0)\le\mathbb E\,W_2^2(\mu^n_0,\nu^n_0)\le4\,\mathbb E\,W_2^2(\mu^n_0,\mu_0)`
    and :math:`W_2(\mu^n_t,\nu^n_t)\le W_2(\mu^n_t,\mu_t)+W_2(\nu^n_t,\mu_t)`, the distance between two
    samples decreases at the rate of the mean-field error, without the floor a finite reference run sets.

    Parameters
    ----------
    layer : Attention
        The layer.
    sample : callable ``(n, rng) -> (n, d) array``
        Draws n i.i.d. initial tokens.
    ns, seeds : sequences of int
        Numbers of tokens and seeds.
    T, dt : float
        Final time and RK4 step.
    batch : bool
        Integrate the clouds of one n as one batch (``False``: a loop over simulate, equal to round-off).

    Returns
    -------
    dict
        ``w0``, ``wT``: arrays (len(ns), len(seeds)) of :math:`W_2(\mu^n_t,\nu^n_t)` at t = 0 and T; ``n``.
    """
    ns, seeds = _counts(ns, "ns"), _counts(seeds, "seeds", minimum=0)
    out = {k: np.zeros((len(ns), len(seeds))) for k in ("w0", "wT")}
    for i, n in enumerate(ns):
        X0 = np.stack([np.asarray(sample(n, sample_rng(s, n, k)), float) for s in seeds for k in (0, 1)])
        XT = _final_states(X0, layer, T, dt, batch)
        for j in range(len(seeds)):
            out["w0"][i, j] = _w2_equal_clouds(X0[2 * j], X0[2 * j + 1])
            out["wT"][i, j] = _w2_equal_clouds(XT[2 * j], XT[2 * j + 1])
    out["n"] = np.array(ns)
    return out


def masked_meanfield_study(
    ns, seeds, sink_masses, *, T, a, v, alpha0, sigma0, dt, against=("unmasked",)
) -> dict[str, np.ndarray]:
    r"""Masked attention on product data :math:`\mu_0=\lambda\otimes N(\alpha_0,\sigma_0^2)`, d = 1: how far from
    the unmasked dynamics.

    For :math:`\mu_0=\lambda\otimes\nu_0` the masked solution is :math:`\lambda\otimes\nu_t` with
    :math:`\nu_t` the *unmasked* one [D]. For each sink mass :math:`m_0` (0: no sink), :math:`n` and seed:
    :math:`n` tokens i.i.d. :math:`N(\alpha_0,\sigma_0^2)` at :math:`s_i=i/n` (``default_rng(seed)``) and, if
    :math:`m_0>0`, a sink cloud of :math:`\max(1,\mathrm{round}(m_0n))` tokens from the same law at
    :math:`s=0` with total mass :math:`m_0`; causal softmax with :math:`A=[a]`, :math:`V=[v]`, RK4 up to
    ``T``. The masked particles are compared position by position
    (:func:`~tokendynamics.transport.conditional_wasserstein`) with ``"unmasked"``, the unmasked particle
    system from the same weighted tokens, and/or ``"meanfield"``, the exact mean-field flow
    :math:`\Phi_T` of the initial tokens.

    Parameters
    ----------
    ns, seeds : sequences of int
        Numbers of tokens (the profiles are taken at the last) and seeds.
    sink_masses : sequence of float
        Sink masses in [0, 1).
    T, dt : float
        Final time and RK4 step.
    a, v : float
        Score and value of the scalar layer.
    alpha0, sigma0 : float
        Mean and standard deviation of the token law.
    against : sequence of str
        The comparisons, ``"unmasked"`` and/or ``"meanfield"``.

    Returns
    -------
    dict
        For each comparison ``c``: ``c + "_mean"`` (:math:`W_{2,\lambda}`), ``c + "_sup"`` (the largest
        distance over positions) and ``c + "_first"`` (at :math:`s_1=1/n`), arrays (len(sink_masses),
        len(ns), len(seeds)); ``profile_s``, ``profile_err`` (len(sink_masses), ns[-1]): positions and
        per-position distances (first comparison, first seed, largest n); ``n``, ``sink_masses``.
    """
    ns, seeds = _counts(ns, "ns"), _counts(seeds, "seeds", minimum=0)
    masses = validate_finite_array(sink_masses, "sink_masses", ndim=1).tolist()
    if not masses or any(not 0 <= m < 1 for m in masses):
        raise ValueError(f"sink_masses must list masses in [0, 1), got {masses}")
    against = (against,) if isinstance(against, str) else tuple(against)
    if not against or set(against) - {"unmasked", "meanfield"}:
        raise ValueError(f"against must list 'unmasked' and/or 'meanfield', got {against!r}")
    out = {f"{c}_{r}": np.zeros((len(masses), len(ns), len(seeds))) for c in against for r in ("mean", "sup", "first")}
    layer = Attention("softmax", A=[[a]], V=[[v]], causal=True)
    law = ([alpha0], [[validate_positive(sigma0, "sigma0") ** 2]])
    prof_s, prof_e = [], []
    for im, m0 in enumerate(masses):
        for i, n in enumerate(ns):
            for j, seed in enumerate(seeds):
                rng = np.random.default_rng(seed)
                X = sample_gaussian(n, *law, rng=rng)
                sink = sample_gaussian(max(1, int(round(m0 * n))), *law, rng=rng) if m0 > 0 else None
                system = with_sink(X, m0, sink=sink)
                w = system.weights
                XT = simulate(system.X, layer, T, dt=dt, save_every=10**9, **system.simulate_kwargs()).final
                for c in against:
                    if c == "unmasked":
                        free = layer.with_(causal=False)
                        target = simulate(system.X, free, T, dt=dt, save_every=10**9, weights=w).final
                    else:
                        target = gaussian_1d_flow_map(system.X, T, alpha0, sigma0, a, v)
                    prof = conditional_wasserstein(XT, target, system.positions, return_profile=True, weights=(w, w))
                    out[f"{c}_mean"][im, i, j] = prof.value
                    out[f"{c}_sup"][im, i, j] = float(prof.distances.max())
                    out[f"{c}_first"][im, i, j] = float(prof.distances[np.argmax(prof.positions > 0)])
                    if c == against[0] and i == len(ns) - 1 and j == 0:
                        keep = prof.positions > 0
                        prof_s.append(prof.positions[keep])
                        prof_e.append(prof.distances[keep])
    out.update(profile_s=np.array(prof_s), profile_err=np.array(prof_e), n=np.array(ns), sink_masses=np.array(masses))
    return out


# ---------------------------------------------------------------------------------------------
# rate fits
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateFit:
    r"""A fitted power law :math:`\bar e(n)\approx e^{c}\,n^{\gamma}` of mean errors over independent seeds
    (:func:`fit_rate`).

    Attributes
    ----------
    slope, stderr, intercept : float
        :math:`\gamma`, its standard error (delta method) and :math:`c`.
    n : array
        The numbers of tokens.
    mean, sem : arrays
        Mean error at each n and its standard error.
    weights : array
        Weights of the least-squares fit, :math:`1/\mathrm{Var}(\log\bar e(n))` (or ones).
    """

    slope: float
    stderr: float
    intercept: float
    n: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    weights: np.ndarray

    def predict(self, n) -> np.ndarray:
        """The fitted curve :math:`e^{c}n^{\\gamma}` at ``n``.

        Parameters
        ----------
        n : float or array_like
            Numbers of tokens.

        Returns
        -------
        array
            The predicted error, shaped like ``n``.
        """
        return np.exp(self.intercept) * np.asarray(n, dtype=float) ** self.slope


def _slope(x, y, w) -> tuple[float, float, np.ndarray]:
    """Weighted least-squares slope of y on x, the weighted mean of x, and the slope's coefficients on y."""
    xm = np.sum(w * x) / np.sum(w)
    sxx = float(np.sum(w * (x - xm) ** 2))
    if sxx == 0:
        raise ValueError("the values of n must not all be equal")
    coef = w * (x - xm) / sxx
    return float(np.sum(coef * y)), float(xm), coef


def fit_rate(ns, errors, *, weighted: bool = True) -> RateFit:
    r"""Log–log slope of the mean error against :math:`n`, with its standard error, from independent seeds.

    With :math:`\bar e_k` the mean and :math:`s_k` the standard deviation of the :math:`S_k` errors at
    :math:`n_k`, the delta method gives :math:`\mathrm{Var}(\log\bar e_k)\approx s_k^2/(S_k\bar e_k^2)`;
    the slope is the weighted least-squares fit of :math:`\log\bar e_k=c+\gamma\log n_k` with weights
    :math:`w_k=1/\mathrm{Var}(\log\bar e_k)` (``weighted=False``: ordinary least squares), and, with
    :math:`x_k=\log n_k`,
    :math:`\mathrm{SE}(\gamma)^2=\sum_k\big(w_k(x_k-\bar x_w)/\sum_lw_l(x_l-\bar x_w)^2\big)^2
    \mathrm{Var}(\log\bar e_k)`. This assumes the means at different n are independent (:func:`sample_rng`).

    Parameters
    ----------
    ns : sequence of numbers
        At least two positive values.
    errors : array (len(ns), seeds) or list of 1-D arrays
        Positive errors, at least two per n.
    weighted : bool
        Weighted (default) or ordinary least squares.

    Returns
    -------
    RateFit
    """
    n = np.asarray(ns, dtype=float)
    rows = [np.asarray(e, dtype=float).reshape(-1) for e in errors]
    if n.ndim != 1 or n.size < 2 or len(rows) != n.size:
        raise ValueError("need at least two values of n and one array of errors per n")
    if any(r.size < 2 for r in rows):
        raise ValueError("need at least two errors (seeds) per n for a standard error")
    if np.any(n <= 0) or any(np.any(~np.isfinite(r)) or np.any(r <= 0) for r in rows):
        raise ValueError("errors and n must be positive (and finite) to fit a power law")
    mean = np.array([r.mean() for r in rows])
    sem = np.array([r.std(ddof=1) / math.sqrt(r.size) for r in rows])
    var = (sem / mean) ** 2
    w = 1.0 / var if weighted and np.all(var > 0) else np.ones_like(mean)
    x, y = np.log(n), np.log(mean)
    slope, xm, coef = _slope(x, y, w)
    intercept = float(np.sum(w * y) / np.sum(w) - slope * xm)
    return RateFit(slope, float(math.sqrt(np.sum(coef**2 * var))), intercept, n, mean, sem, w)


def curve_slope(ns, values, weights=None) -> float:
    r"""Least-squares slope of :math:`\log` ``values`` against :math:`\log n`, with optional weights.

    With the weights of a :class:`RateFit` this is the slope a measurement following ``values`` exactly
    would give over the same design: the fair number to compare a fitted slope with when the rate is a
    power law only up to logarithms (:func:`rate_shape`).

    Parameters
    ----------
    ns : array_like (k,)
        Positive numbers of tokens, at least two.
    values : array_like (k,)
        Positive values of the curve at ``ns``.
    weights : array_like (k,), optional
        Non-negative weights, not all zero; None gives equal weights.

    Returns
    -------
    float
    """
    n, values = np.asarray(ns, dtype=float), np.asarray(values, dtype=float)
    w = np.ones_like(n) if weights is None else np.asarray(weights, dtype=float)
    if n.shape != values.shape or n.shape != w.shape or n.ndim != 1 or n.size < 2:
        raise ValueError("ns, values and weights must be arrays of the same length, at least two")
    if np.any(n <= 0) or np.any(~(values > 0)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError("n and values must be positive, weights non-negative (not all zero)")
    return _slope(np.log(n), np.log(values), w)[0]


def rate_shape(n, law: str) -> np.ndarray:
    r"""The rate at which :math:`\mathbb E\,W_2(\mu^n,\mu)` tends to 0, up to a constant factor, for the empirical
    measure of :math:`n` i.i.d. samples.

    ``"gaussian-1d"``: :math:`(\log\log n/n)^{1/2}` (Bobkov and Ledoux, Mem. AMS 2019); ``"compact-1d"``:
    :math:`n^{-1/2}` (a density on an interval bounded away from 0); ``"uniform-2d"``:
    :math:`(\log n/n)^{1/2}`, the uniform measure of a square (Ajtai, Komlós and Tusnády, *On optimal
    matchings*, Combinatorica 1984; also for two independent samples).

    Parameters
    ----------
    n : array_like
        Numbers of samples (> e for ``"gaussian-1d"``, > 1 for ``"uniform-2d"``).
    law : {"gaussian-1d", "compact-1d", "uniform-2d"}
        The law sampled.

    Returns
    -------
    numpy.ndarray
        The rate at each ``n``, without its constant factor.
    """
    n = np.asarray(n, dtype=float)
    if law == "gaussian-1d":
        if np.any(n <= math.e):
            raise ValueError("the Gaussian rate needs n > e (log log n > 0)")
        return np.sqrt(np.log(np.log(n)) / n)
    if law == "compact-1d":
        return 1.0 / np.sqrt(n)
    if law == "uniform-2d":
        if np.any(n <= 1):
            raise ValueError("the uniform rate in the plane needs n > 1")
        return np.sqrt(np.log(n) / n)
    raise ValueError(f"law must be 'gaussian-1d', 'compact-1d' or 'uniform-2d', got {law!r}")
