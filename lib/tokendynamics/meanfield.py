r"""Mean-field limit of the particle system: the exact 1-D Gaussian oracle and convergence studies.

Paper 1 (Castin et al., arXiv:2501.18322): its mean-field limit theorem, and the Gaussian solutions of its section on
Gaussian data. The empirical measure of :math:`n` particles solves the
Transformer PDE with empirical data, so :math:`W_p(\mu^n_t,\mu_t)\le C(t)\,W_p(\mu^n_0,\mu_0)`, and
for i.i.d. data :math:`W_p(\mu^n_0,\mu_0)\to0` at the rate of the empirical measure.

In :math:`d=1` softmax attention with scalars :math:`a` (score) and :math:`v` (value) preserves
Gaussians and is solved in closed form: for :math:`\mu_0=N(\alpha_0,\sigma_0^2)`,

.. math:: \sigma_t^2=\frac{\sigma_0^2}{1-2va\sigma_0^2t},\qquad
          \alpha_t=\alpha_0e^{vt}\,(1-2va\sigma_0^2t)^{-1/2},

up to the blow-up time :math:`T^*=1/(2va\sigma_0^2)` when :math:`va>0`. The field is affine,
:math:`\Gamma_{\mu_t}(x)=v(\alpha_t+a\sigma_t^2x)`, so the characteristic flow is the affine map
:math:`\Phi_t(x)=\alpha_t+\frac{\sigma_t}{\sigma_0}(x-\alpha_0)` (:func:`gaussian_1d_flow_map`).

Rates. The studies draw an *independent* sample for every pair (seed, n) (never the first n
points of a larger sample), integrate all the seeds of one n as one batch
(:func:`~tokendynamics.ensembles.simulate_batch`), and :func:`fit_rate` fits the log–log slope of the
mean error with its standard error (weighted least squares, delta method). :func:`rate_shape` gives
the rates the theory predicts for the empirical measure — :math:`(\log\log n/n)^{1/2}` for a Gaussian
on the line (Bobkov–Ledoux), :math:`(\log n/n)^{1/2}` for the uniform measure of a square
(Ajtai–Komlós–Tusnády) — whose slope over the same n (:func:`curve_slope`) is the number a measured
slope is compared with. The book shows all this in its chapter on the Transformer PDE
(``chapters/01_well_posedness.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .attention import Attention
from .docstrings import fill_doc
from .ensembles import simulate_batch
from .gaussian import blowup_time, one_dimensional_solution
from .masked import with_sink
from .particles import sample_gaussian, simulate
from .transport import conditional_wasserstein, wasserstein, wasserstein_gaussian_1d
from .validation import validate_count, validate_finite, validate_finite_array, validate_positive

__all__ = [
    "blowup_time_1d",
    "gaussian_1d_solution",
    "gaussian_1d_flow_map",
    "meanfield_study_1d",
    "meanfield_study_pairs",
    "meanfield_study_reference",
    "masked_meanfield_study",
    "fit_power_law",
    "RateFit",
    "fit_rate",
    "rate_shape",
    "curve_slope",
    "sample_rng",
]


#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    # the scalar layer of the 1-D Gaussian oracle
    "a_v": r"""
        a, v : float
            Score :math:`a` and value :math:`v` of the scalar softmax layer :math:`A=[a]`, :math:`V=[v]`,
            :math:`\beta=1` (for another inverse temperature, pass :math:`a=\beta A`).
    """,
    # the initial Gaussian of the 1-D oracle
    "alpha0_sigma0": r"""
        alpha0 : float
            Mean :math:`\alpha_0` of the initial Gaussian :math:`N(\alpha_0,\sigma_0^2)`.
        sigma0 : float
            Its standard deviation :math:`\sigma_0>0` (not the variance).
    """,
    # the references of the exact 1-D Gaussian solution
    "ref_gauss1d": r"""
        Paper 1 (Castin et al., arXiv:2501.18322), the Gaussian solutions of softmax attention; book:
        ``chapters/01_well_posedness.md``, equation (eq-p1-gauss1d) (derived in
        ``chapters/02_gaussian_preservation.md``).
    """,
    # the references of the rate measurements
    "ref_rates": r"""
        Paper 1 (Castin et al., arXiv:2501.18322), the mean-field limit theorem: the :math:`n`-token error inherits
        the rate of the empirical measure through the stability bound. Book: ``chapters/01_well_posedness.md``,
        section "The mean-field limit" (how a slope is measured) and equation (eq-p1-stability).
    """,
}


def _check_scalars(alpha0, sigma0, a, v):
    return [
        validate_finite(alpha0, "alpha0"),
        validate_positive(sigma0, "sigma0"),
        validate_finite(a, "a"),
        validate_finite(v, "v"),
    ]


def _counts(values, name: str, minimum: int = 1) -> list[int]:
    """A non-empty list of integers >= ``minimum`` (sample sizes, seeds)."""
    if isinstance(values, (str, bytes)) or np.ndim(values) != 1 or len(values) == 0:
        raise ValueError(f"{name} must be a non-empty list of integers, got {values!r:.60}")
    return [validate_count(v, f"{name}[{k}]", minimum=minimum) for k, v in enumerate(values)]


def _layer_1d(a: float, v: float) -> Attention:
    return Attention("softmax", A=[[a]], V=[[v]])


@fill_doc(_DOC)
def blowup_time_1d(sigma0: float, a: float, v: float) -> float:
    r"""Blow-up time :math:`T^*=1/(2va\sigma_0^2)` of the 1-D Gaussian solution if :math:`va>0`, else ``inf``.

    The d = 1 case of :func:`tokendynamics.gaussian.blowup_time` (paper 1, Castin et al., arXiv:2501.18322, Gaussian
    data;
    chapter 2 of the book).

    Parameters
    ----------
    sigma0 : float
        Standard deviation :math:`\sigma_0>0` of the initial Gaussian (its mean does not affect :math:`T^*`).
    %(a_v)s

    Returns
    -------
    float
        :math:`T^*`, the time at which the variance :math:`\sigma_t^2` of the solution becomes infinite;
        ``math.inf`` when :math:`va\le0` (the solution exists for all :math:`t\ge0`).

    References
    ----------
    %(ref_gauss1d)s
    The same time in any dimension: ``chapters/02_gaussian_preservation.md``, equation (eq-gauss-tstar).
    """
    _, sigma0, a, v = _check_scalars(0.0, sigma0, a, v)
    return blowup_time([[sigma0**2]], _layer_1d(a, v))


@fill_doc(_DOC)
def gaussian_1d_solution(t, alpha0: float, sigma0: float, a: float, v: float):
    r"""Mean :math:`\alpha_t` and standard deviation :math:`\sigma_t` of the exact 1-D solution (paper 1,
    arXiv:2501.18322; chapter 2 of the book).

    The closed form of :func:`tokendynamics.gaussian.one_dimensional_solution` (score :math:`a`,
    value :math:`v`), in terms of the standard deviation. ``t`` may be an array. Raises
    :class:`~tokendynamics.errors.BlowUpError` if some :math:`t\ge T^*`.

    Parameters
    ----------
    t : float or array_like
        Time(s) at which the solution is evaluated, all before :math:`T^*` (:func:`blowup_time_1d`).
    %(alpha0_sigma0)s
    %(a_v)s

    Returns
    -------
    (alpha_t, sigma_t) : tuple of numpy.ndarray or of float
        Mean :math:`\alpha_t` and standard deviation :math:`\sigma_t` of the Gaussian :math:`\mu_t` at each
        time, both of the shape of ``t`` (numpy scalars for a scalar ``t``).

    References
    ----------
    %(ref_gauss1d)s
    """
    alpha0, sigma0, a, v = _check_scalars(alpha0, sigma0, a, v)
    alpha, var = one_dimensional_solution(alpha0, sigma0**2, _layer_1d(a, v), t)
    return alpha, np.sqrt(var)


@fill_doc(_DOC)
def gaussian_1d_flow_map(x, t: float, alpha0: float, sigma0: float, a: float, v: float):
    r"""Characteristic flow :math:`\Phi_t(x)=\alpha_t+\frac{\sigma_t}{\sigma_0}(x-\alpha_0)` of the 1-D Gaussian
    solution.

    :math:`(\Phi_t)_\#N(\alpha_0,\sigma_0^2)=N(\alpha_t,\sigma_t^2)`, and :math:`\Phi_t(x_i(0))` is
    where the mean-field flow takes a token: :math:`|x_i(t)-\Phi_t(x_i(0))|` measures how far the
    :math:`n`-particle dynamics is from the mean-field one along each token.

    Parameters
    ----------
    x : array_like
        Initial positions :math:`x` (e.g. the tokens :math:`x_i(0)`), any shape.
    t : float
        Time of the flow, before :math:`T^*` (:func:`blowup_time_1d`).
    %(alpha0_sigma0)s
    %(a_v)s

    Returns
    -------
    numpy.ndarray
        :math:`\Phi_t(x)`, elementwise, of the shape of ``x``: where the mean-field flow takes each point.

    References
    ----------
    %(ref_gauss1d)s
    """
    alpha_t, sigma_t = gaussian_1d_solution(t, alpha0, sigma0, a, v)
    return alpha_t + (sigma_t / sigma0) * (np.asarray(x, dtype=float) - alpha0)


@fill_doc(_DOC)
def sample_rng(seed: int, n: int, stream: int = 0) -> np.random.Generator:
    """The generator of the sample of ``n`` tokens for ``seed`` (and ``stream``, e.g. the second of a pair).

    ``numpy.random.default_rng([seed, n, stream])``: samples of different sizes, seeds or streams
    are independent, so the error at one n is not a part of the error at a larger n (a nested
    design, where the first n points of a larger sample are reused, correlates the errors across n
    and misleads a standard error computed as if they were independent).

    Parameters
    ----------
    seed : int
        Seed of the run (one of the study's ``seeds``).
    n : int
        Number of tokens of the sample; part of the seed, so each size gets its own stream.
    stream : int
        Which of several independent samples of one (seed, n) (0, or 1 for the second cloud of a pair).

    Returns
    -------
    numpy.random.Generator
        A fresh generator, seeded with the sequence ``[seed, n, stream]``.

    References
    ----------
    %(ref_rates)s
    """
    return np.random.default_rng([int(seed), int(n), int(stream)])


def _final_states(X0, layer, T, dt, batch: bool) -> np.ndarray:
    """Tokens at time T of the systems X0 (B, n, d), RK4 with step dt: one batch or a loop over simulate."""
    if batch:
        run = simulate_batch(X0, layer, T, dt=dt, method="rk4", save_every=10**9)
        if np.any(run.blew_up):
            b = int(np.flatnonzero(run.blew_up)[0])
            raise RuntimeError(f"system {b} of the mean-field study blew up: {run.reasons[b]}")
        return run.final
    return np.stack([simulate(x, layer, T, dt=dt, method="rk4", save_every=10**9).final for x in X0])


def meanfield_study_1d(
    ns,
    seeds,
    *,
    T: float,
    a: float,
    v: float,
    alpha0: float,
    sigma0: float,
    dt: float,
    beta: float = 1.0,
    batch: bool = True,
) -> dict[str, np.ndarray]:
    r"""W2 distance between the :math:`n`-particle solution and the exact mean field, d = 1, Gaussian data.

    For each :math:`n` in ``ns`` and seed in ``seeds``: :math:`x_i(0)\sim N(\alpha_0,\sigma_0^2)`
    i.i.d. (an independent sample for every pair, :func:`sample_rng`), softmax attention with
    score :math:`\beta a` and value :math:`v` (RK4, step ``dt``) up to ``T``, the seeds of one
    :math:`n` integrated together by :func:`~tokendynamics.ensembles.simulate_batch` (``batch=False``:
    a loop over :func:`~tokendynamics.particles.simulate`, the same numbers to round-off).

    Parameters
    ----------
    ns : sequence of int
        Numbers of tokens.
    seeds : sequence of int
        Seeds; the sample for (seed, n) comes from ``sample_rng(seed, n)``.
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
        Arrays of shape (len(ns), len(seeds)): ``w0`` = :math:`W_2(\mu^n_0,N(\alpha_0,\sigma_0^2))`, ``wT`` =
        :math:`W_2(\mu^n_T,N(\alpha_T,\sigma_T^2))` (exact, :func:`~tokendynamics.transport.wasserstein_gaussian_1d`),
        ``lagrangian`` = :math:`(\frac1n\sum_i|x_i(T)-\Phi_T(x_i(0))|^2)^{1/2}` (the dynamics error alone:
        the coupling that follows each token, :func:`gaussian_1d_flow_map`); and ``n``.

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*,
    arXiv 2501.18322 (the mean-field limit theorem); the book's chapter on the Transformer PDE.
    """
    ns = _counts(ns, "ns")
    seeds = _counts(seeds, "seeds", minimum=0)
    T, dt = validate_positive(T, "T"), validate_positive(dt, "dt")
    alpha_T, sigma_T = gaussian_1d_solution(T, alpha0, sigma0, beta * a, v)
    layer = Attention("softmax", A=[[a]], V=[[v]], beta=beta)
    out = {k: np.zeros((len(ns), len(seeds))) for k in ("w0", "wT", "lagrangian")}
    for i, n in enumerate(ns):
        X0 = np.stack([sample_gaussian(n, [alpha0], [[sigma0**2]], rng=sample_rng(s, n)) for s in seeds])
        XT = _final_states(X0, layer, T, dt, batch)[:, :, 0]
        for j in range(len(seeds)):
            x0, xT = X0[j, :, 0], XT[j]
            out["w0"][i, j] = wasserstein_gaussian_1d(x0, alpha0, sigma0)
            out["wT"][i, j] = wasserstein_gaussian_1d(xT, float(alpha_T), float(sigma_T))
            phi = gaussian_1d_flow_map(x0, T, alpha0, sigma0, beta * a, v)
            out["lagrangian"][i, j] = float(np.sqrt(np.mean((xT - phi) ** 2)))
    out["n"] = np.array(ns)
    return out


def _w2_equal_clouds(X: np.ndarray, Y: np.ndarray) -> float:
    """Exact W2 between two clouds of n equally weighted points: an assignment problem (Birkhoff)."""
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    C = cdist(X, Y, "sqeuclidean")
    rows, cols = linear_sum_assignment(C)
    return float(math.sqrt(max(float(C[rows, cols].mean()), 0.0)))


def meanfield_study_pairs(
    layer, sample, ns, seeds, *, T: float, dt: float, batch: bool = True
) -> dict[str, np.ndarray]:
    r"""W2 distance between two independent :math:`n`-particle solutions, at t = 0 and t = T.

    For each :math:`n` and seed, two independent clouds :math:`\mu^n_0,\nu^n_0` of :math:`n` i.i.d.
    tokens (``sample(n, rng)`` with ``sample_rng(seed, n, 0)`` and ``sample_rng(seed, n, 1)``) are
    pushed by ``layer`` (RK4, step ``dt``; every cloud of one :math:`n` in one batch of
    :func:`~tokendynamics.ensembles.simulate_batch`), and their distance is computed exactly (an
    assignment problem: two clouds of :math:`n` equal masses).

    Why two samples and no reference: the empirical measures converge to the mean field
    :math:`\mu_t`, and

    .. math:: W_2(\mu^n_t,\nu^n_t)\le W_2(\mu^n_t,\mu_t)+W_2(\nu^n_t,\mu_t),\qquad
              \mathbb E\,W_2^2(\mu^n_0,\mu_0)\le\mathbb E\,W_2^2(\mu^n_0,\nu^n_0)\le4\,\mathbb E\,W_2^2(\mu^n_0,\mu_0)

    (the second by convexity of :math:`W_2^2` in one argument, :math:`\mathbb E\,\nu^n_0=\mu_0`), so the
    distance between two samples decreases at the rate of the mean-field error, without the floor
    that a finite reference run sets. For the uniform measure of a square it is the optimal matching
    of Ajtai, Komlós and Tusnády, :math:`W_2\approx(\log n/n)^{1/2}`.

    Parameters
    ----------
    layer : Attention
        The layer (any kind :func:`~tokendynamics.ensembles.simulate_batch` integrates).
    sample : callable ``(n, rng) -> (n, d) array``
        Draws n i.i.d. initial tokens.
    ns, seeds : sequences of int
    T, dt : float
        Final time and RK4 step.
    batch : bool
        Integrate the clouds of one n as one batch (``False``: a loop over simulate, equal to round-off).

    Returns
    -------
    dict
        ``w0``, ``wT``: arrays (len(ns), len(seeds)) of :math:`W_2(\mu^n_t,\nu^n_t)` at t = 0 and T; ``n``.

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (the stability and mean-field limit theorems); Ajtai, Komlós,
    Tusnády, *On optimal matchings*, Combinatorica 4 (1984); the book's
    chapter on the Transformer PDE.
    """
    ns = [int(n) for n in ns]
    seeds = [int(s) for s in seeds]
    out = {k: np.zeros((len(ns), len(seeds))) for k in ("w0", "wT")}
    for i, n in enumerate(ns):
        X0 = np.stack([np.asarray(sample(n, sample_rng(s, n, k)), float) for s in seeds for k in (0, 1)])
        XT = _final_states(X0, layer, T, dt, batch)
        for j in range(len(seeds)):
            out["w0"][i, j] = _w2_equal_clouds(X0[2 * j], X0[2 * j + 1])
            out["wT"][i, j] = _w2_equal_clouds(XT[2 * j], XT[2 * j + 1])
    out["n"] = np.array(ns)
    return out


@fill_doc(_DOC)
def meanfield_study_reference(
    layer, sample, ns, seeds, *, N_ref: int, ref_seed: int, T: float, dt: float
) -> dict[str, np.ndarray]:
    r"""W2 distance at time T between n-particle solutions and one large-N reference solution.

    ``sample(n, rng)`` draws n i.i.d. initial tokens. The reference run uses ``N_ref`` tokens drawn
    with ``ref_seed`` (independent of ``seeds``). Returns arrays (len(ns), len(seeds)) ``w0`` and
    ``wT`` = :math:`W_2(\mu^n_t,\mu^{N}_t)` at t = 0 and T (exact LP,
    :func:`~tokendynamics.transport.wasserstein`), and ``ref_self`` = :math:`W_2` at t = 0 and T between the
    reference and a second, independent reference-size run (seed ``ref_seed + 1``): the floor the
    finite reference itself sets.

    Parameters
    ----------
    layer : Attention or callable ``t -> Attention``
        The layer pushing every run (:func:`~tokendynamics.particles.simulate`, RK4, one run at a time).
    sample : callable ``(n, rng) -> (n, d) array``
        Draws n i.i.d. initial tokens with the generator ``rng``.
    ns : sequence of int
        Numbers of tokens of the compared runs (each >= 1).
    seeds : sequence of int
        Seeds (>= 0) of the compared runs: the sample of (seed, n) is drawn with
        ``numpy.random.default_rng(seed)``, the same generator state for every n.
    N_ref : int
        Number of tokens of the reference run.
    ref_seed : int
        Seed of the reference sample; ``ref_seed + 1`` seeds the second reference-size run. Neither may be
        one of ``seeds``.
    T, dt : float
        Final time and RK4 step.

    Returns
    -------
    dict
        ``w0``, ``wT``: arrays (len(ns), len(seeds)) of :math:`W_2(\mu^n_t,\mu^{N}_t)` at t = 0 and T;
        ``ref_self``: array (2,), the distance between the two reference-size runs at t = 0 and T; ``n``:
        the numbers of tokens.

    References
    ----------
    %(ref_rates)s
    """
    ns = _counts(ns, "ns")
    seeds = _counts(seeds, "seeds", minimum=0)
    N_ref = validate_count(N_ref, "N_ref")
    ref_seed = validate_count(ref_seed, "ref_seed", minimum=0)
    if not callable(sample):
        raise TypeError(f"sample must be a callable sample(n, rng), got {type(sample).__name__}")
    if ref_seed in seeds or ref_seed + 1 in seeds:
        raise ValueError(
            "the reference seeds (ref_seed, ref_seed + 1) must differ from the seeds of the n-particle runs"
        )
    Y0 = sample(N_ref, np.random.default_rng(ref_seed))
    YT = simulate(Y0, layer, T, dt=dt, method="rk4", save_every=10**9).final
    out = {k: np.zeros((len(ns), len(seeds))) for k in ("w0", "wT")}
    for i, n in enumerate(ns):
        for j, seed in enumerate(seeds):
            X0 = sample(n, np.random.default_rng(seed))
            XT = simulate(X0, layer, T, dt=dt, method="rk4", save_every=10**9).final
            out["w0"][i, j] = wasserstein(X0, Y0, method="exact")
            out["wT"][i, j] = wasserstein(XT, YT, method="exact")
    Z0 = sample(N_ref, np.random.default_rng(ref_seed + 1))
    ZT = simulate(Z0, layer, T, dt=dt, method="rk4", save_every=10**9).final
    out["ref_self"] = np.array([wasserstein(Z0, Y0, method="exact"), wasserstein(ZT, YT, method="exact")])
    out["n"] = np.array(ns)
    return out


@fill_doc(_DOC)
def masked_meanfield_study(
    ns,
    seeds,
    sink_masses,
    *,
    T: float,
    a: float,
    v: float,
    alpha0: float,
    sigma0: float,
    dt: float,
    against=("unmasked",),
) -> dict[str, np.ndarray]:
    r"""Masked attention on product data :math:`\mu_0=\lambda\otimes N(\alpha_0,\sigma_0^2)`, d = 1: how far from
    unmasked dynamics.

    Paper 1 (Castin et al., arXiv:2501.18322), masked attention. Fact [D]: for :math:`\mu_0=\lambda\otimes\nu_0` the
    masked solution is
    :math:`\lambda\otimes\nu_t` with :math:`\nu_t` the *unmasked* solution (derived for the book, chapter 1). For each
    sink mass
    :math:`m_0` (0 = no sink), :math:`n` and seed: :math:`n` tokens i.i.d. :math:`N(\alpha_0,\sigma_0^2)` at
    :math:`s_i=i/n` and, if :math:`m_0>0`, a sink cloud of :math:`\max(1,\mathrm{round}(m_0n))` tokens drawn
    from the same law at :math:`s=0` with total mass :math:`m_0` (the atom :math:`\lambda(\{0\})=m_0`);
    causal softmax with :math:`A=[a]`, :math:`V=[v]`, RK4 up to ``T``. The masked particles are compared,
    position by position, with

    * ``"unmasked"``: the unmasked particle system started from the same weighted tokens (the
      finite-n counterpart of the Fact: the common sampling error cancels);
    * ``"meanfield"``: the exact mean-field flow :math:`\Phi_T` applied to the initial tokens
      (:func:`gaussian_1d_flow_map`).

    Returns, for each comparison ``c`` in ``against``, arrays ``c + "_mean"`` (:math:`W_{2,\lambda}`),
    ``c + "_sup"`` (:math:`\sup_sW_2` over the token positions) and ``c + "_first"`` (the distance at the
    first token's position :math:`s_1=1/n`) of shape (len(sink_masses), len(ns), len(seeds))
    (:func:`~tokendynamics.transport.conditional_wasserstein`), and ``profile_s``, ``profile_err``:
    positions and per-position distances (first comparison, first seed, largest n; tokens only,
    one row per sink mass).

    Parameters
    ----------
    ns : sequence of int
        Numbers of tokens :math:`n` (each >= 1); the profiles are taken at the last one.
    seeds : sequence of int
        Seeds (>= 0): ``numpy.random.default_rng(seed)`` draws the :math:`n` tokens, then (if
        :math:`m_0>0`) the sink cloud.
    sink_masses : sequence of float
        Sink masses :math:`m_0\in[0,1)` to compare; 0 runs the plain causal model, without a sink.
    T, dt : float
        Final time and RK4 step.
    %(a_v)s
    %(alpha0_sigma0)s
    against : str or sequence of str
        The comparisons, ``"unmasked"`` and/or ``"meanfield"`` (see above).

    Returns
    -------
    dict
        For each comparison ``c``: ``c + "_mean"``, ``c + "_sup"``, ``c + "_first"``, arrays
        (len(sink_masses), len(ns), len(seeds)) as above; ``profile_s``, ``profile_err``: arrays
        (len(sink_masses), ns[-1]), the token positions :math:`s_i=i/n` and the distance at each; ``n`` and
        ``sink_masses``: the values studied.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), masked attention and its conditional Wasserstein distance;
    book: ``chapters/01_well_posedness.md``, equations (eq-p1-masked) and (eq-p1-conditional).
    """
    ns = _counts(ns, "ns")
    seeds = _counts(seeds, "seeds", minimum=0)
    masses = validate_finite_array(sink_masses, "sink_masses", ndim=1).tolist()
    if not masses or any(not 0 <= m < 1 for m in masses):
        raise ValueError(f"sink_masses must list masses in [0, 1), got {masses}")
    alpha0, sigma0, a, v = _check_scalars(alpha0, sigma0, a, v)
    T, dt = validate_positive(T, "T"), validate_positive(dt, "dt")
    against = (against,) if isinstance(against, str) else tuple(against)
    if not against or set(against) - {"unmasked", "meanfield"}:
        raise ValueError(f"against must list 'unmasked' and/or 'meanfield', got {against!r}")
    shape = (len(masses), len(ns), len(seeds))
    out = {f"{c}_{r}": np.zeros(shape) for c in against for r in ("mean", "sup", "first")}
    layer = Attention("softmax", A=[[a]], V=[[v]], causal=True)
    prof_s, prof_e = [], []
    for im, m0 in enumerate(masses):
        for i, n in enumerate(ns):
            for j, seed in enumerate(seeds):
                rng = np.random.default_rng(seed)
                X = sample_gaussian(n, [alpha0], [[sigma0**2]], rng=rng)
                sink = sample_gaussian(max(1, int(round(m0 * n))), [alpha0], [[sigma0**2]], rng=rng) if m0 > 0 else None
                system = with_sink(X, m0, sink=sink)
                XT = simulate(system.X, layer, T, dt=dt, save_every=10**9, **system.simulate_kwargs()).final
                for c in against:
                    if c == "unmasked":
                        target = simulate(
                            system.X, layer.with_(causal=False), T, dt=dt, save_every=10**9, weights=system.weights
                        ).final
                    else:
                        target = gaussian_1d_flow_map(system.X, T, alpha0, sigma0, a, v)
                    prof = conditional_wasserstein(
                        XT, target, system.positions, return_profile=True, weights=(system.weights, system.weights)
                    )
                    out[f"{c}_mean"][im, i, j] = prof.value
                    out[f"{c}_sup"][im, i, j] = float(prof.distances.max())
                    out[f"{c}_first"][im, i, j] = float(prof.distances[np.argmax(prof.positions > 0)])
                    if c == against[0] and i == len(ns) - 1 and j == 0:
                        keep = prof.positions > 0
                        prof_s.append(prof.positions[keep])
                        prof_e.append(prof.distances[keep])
    out["profile_s"] = np.array(prof_s)
    out["profile_err"] = np.array(prof_e)
    out["n"] = np.array(ns)
    out["sink_masses"] = np.array(masses)
    return out


@fill_doc(_DOC)
def fit_power_law(ns, errors, *, bootstrap: int = 0, rng=None) -> tuple[float, float, float]:
    r"""Least-squares fit :math:`\log\bar e(n)=c+\gamma\log n` of the mean error over seeds.

    ``errors`` has shape (len(ns), seeds) (or (len(ns),)). Returns ``(gamma, c, stderr)``. By default
    ``stderr`` is the standard error of the slope from the regression residuals; with
    ``bootstrap = B > 0`` (and several seeds) it is the standard deviation of the slope over ``B``
    resamplings of the seeds with replacement, which accounts for the seed-to-seed noise of the
    means (the residuals of a fit through three or four points can be deceptively small).

    Parameters
    ----------
    ns : array_like (k,)
        Positive numbers of tokens, at least two.
    errors : array_like (k, seeds) or (k,)
        Positive errors: one row of seeds per n (or one error per n).
    bootstrap : int
        Number ``B`` of seed resamplings for the standard error; 0 (default) uses the regression residuals.
    rng : None, int or numpy.random.Generator
        Generator (or seed) of the resamplings; ignored without ``bootstrap``.

    Returns
    -------
    (gamma, c, stderr) : tuple of float
        Slope :math:`\gamma`, intercept :math:`c` and the standard error of :math:`\gamma` (NaN with two values
        of n and no bootstrap over several seeds).

    References
    ----------
    %(ref_rates)s
    B. Efron, R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall (1993), for the bootstrap
    standard error.
    """
    ns = validate_finite_array(ns, "ns")
    e = validate_finite_array(errors, "errors")
    bootstrap = validate_count(bootstrap, "bootstrap", minimum=0)
    e2 = e if e.ndim == 2 else e[:, None]
    mean = e2.mean(axis=1)
    if ns.shape != mean.shape or ns.size < 2:
        raise ValueError("ns and errors must give at least two values of n, one mean error per n")
    if np.any(mean <= 0) or np.any(ns <= 0):
        raise ValueError("errors and n must be positive to fit a power law")
    x, y = np.log(ns), np.log(mean)
    gamma, c = np.polyfit(x, y, 1)
    if bootstrap and e2.shape[1] > 1:
        rng = np.random.default_rng(rng)
        idx = rng.integers(0, e2.shape[1], size=(int(bootstrap), e2.shape[1]))
        means = e2[:, idx].mean(axis=2)  # (len(ns), B)
        slopes = np.polyfit(x, np.log(means), 1)[0]
        stderr = float(np.std(slopes, ddof=1))
    elif ns.size > 2:
        s2 = float(np.sum((y - (c + gamma * x)) ** 2)) / (ns.size - 2)
        stderr = math.sqrt(s2 / float(np.sum((x - x.mean()) ** 2)))
    else:
        stderr = float("nan")
    return float(gamma), float(c), stderr


@dataclass(frozen=True)
class RateFit:
    r"""A fitted power law :math:`\bar e(n)\approx e^{c}\,n^{\gamma}` of mean errors over independent seeds
    (:func:`fit_rate`).

    Attributes
    ----------
    slope : float
        :math:`\gamma`, the log–log slope.
    stderr : float
        Its standard error (delta method: from the seed-to-seed spread of each mean).
    intercept : float
        :math:`c`.
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


@fill_doc(_DOC)
def curve_slope(ns, values, weights=None) -> float:
    r"""Least-squares slope of :math:`\log` ``values`` against :math:`\log n`, with optional weights.

    With the weights of a :class:`RateFit` this is the slope a measurement following ``values``
    exactly would give over the same design: the fair number to compare a fitted slope with when
    the rate is a power law only up to logarithms (e.g. ``rate_shape``).

    Parameters
    ----------
    ns : array_like (k,)
        Positive numbers of tokens, at least two.
    values : array_like (k,)
        Positive values of the curve at ``ns`` (e.g. :func:`rate_shape`).
    weights : array_like (k,), optional
        Non-negative weights, not all zero (e.g. ``RateFit.weights``); None gives equal weights.

    Returns
    -------
    float
        The weighted least-squares slope of :math:`\log` ``values`` against :math:`\log n`.

    References
    ----------
    %(ref_rates)s
    """
    n = np.asarray(ns, dtype=float)
    values = np.asarray(values, dtype=float)
    w = np.ones_like(n) if weights is None else np.asarray(weights, dtype=float)
    if n.shape != values.shape or n.shape != w.shape or n.ndim != 1 or n.size < 2:
        raise ValueError("ns, values and weights must be arrays of the same length, at least two")
    if np.any(n <= 0) or np.any(~(values > 0)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError("n and values must be positive, weights non-negative (not all zero)")
    x, y = np.log(n), np.log(values)
    xm, ym = np.sum(w * x) / np.sum(w), np.sum(w * y) / np.sum(w)
    return float(np.sum(w * (x - xm) * (y - ym)) / np.sum(w * (x - xm) ** 2))


def fit_rate(ns, errors, *, weighted: bool = True) -> RateFit:
    r"""Log–log slope of the mean error against :math:`n`, with its standard error, from independent seeds.

    ``errors`` holds, for each :math:`n`, the errors of independent runs (an array (len(ns), seeds),
    or a list of 1-D arrays, one per n, of any lengths). With :math:`\bar e_k` the mean and
    :math:`s_k` the standard deviation of the :math:`S_k` errors at :math:`n_k`, the delta method gives
    :math:`\mathrm{Var}(\log\bar e_k)\approx s_k^2/(S_k\bar e_k^2)`; the slope is the weighted
    least-squares fit of :math:`\log\bar e_k=c+\gamma\log n_k` with weights
    :math:`w_k=1/\mathrm{Var}(\log\bar e_k)` (``weighted=False``: ordinary least squares), and

    .. math:: \mathrm{SE}(\gamma)^2=\sum_k\Big(\frac{w_k(x_k-\bar x_w)}{\sum_lw_l(x_l-\bar x_w)^2}\Big)^2
              \mathrm{Var}(\log\bar e_k),\qquad x_k=\log n_k .

    This assumes the means at different n are independent: draw a fresh sample for every (seed, n)
    (:func:`sample_rng`), as the studies of this module do.

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

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (the mean-field limit theorem); the book's chapter on the
    Transformer PDE, where the slopes are measured.
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
    if weighted and np.all(var > 0):
        w = 1.0 / var
    else:
        w = np.ones_like(mean)
    x, y = np.log(n), np.log(mean)
    xm = np.sum(w * x) / np.sum(w)
    sxx = float(np.sum(w * (x - xm) ** 2))
    if sxx == 0:
        raise ValueError("the values of n must not all be equal")
    slope = float(np.sum(w * (x - xm) * y) / sxx)
    intercept = float(np.sum(w * y) / np.sum(w) - slope * xm)
    c = w * (x - xm) / sxx
    stderr = float(math.sqrt(np.sum(c**2 * var)))
    return RateFit(slope, stderr, intercept, n, mean, sem, w)


@fill_doc(_DOC)
def rate_shape(n, law: str) -> np.ndarray:
    r"""The rate at which :math:`\mathbb E\,W_2(\mu^n,\mu)` tends to 0, up to a constant factor, for the empirical
    measure :math:`\mu^n` of :math:`n` i.i.d. samples.

    * ``"gaussian-1d"``: :math:`(\log\log n/n)^{1/2}`, a Gaussian on the line (Bobkov and Ledoux,
      *One-dimensional empirical measures, order statistics, and Kantorovich transport distances*,
      Mem. AMS 2019: :math:`\mathbb E\,W_2^2\asymp\log\log n/n`);
    * ``"compact-1d"``: :math:`n^{-1/2}`, a density on an interval bounded away from 0;
    * ``"uniform-2d"``: :math:`(\log n/n)^{1/2}`, the uniform measure of a square (Ajtai, Komlós and
      Tusnády, *On optimal matchings*, Combinatorica 1984; also for two independent samples).

    The factor only matters through :func:`curve_slope`: the slope of the theory over the
    :math:`n` of a measurement. Used in the book's chapter on the Transformer PDE (paper 1,
    Castin et al., arXiv 2501.18322, mean-field limit theorem: the mean-field error inherits this rate).

    Parameters
    ----------
    n : array_like
        Numbers of samples (> e for ``"gaussian-1d"``, > 1 for ``"uniform-2d"``).
    law : {"gaussian-1d", "compact-1d", "uniform-2d"}
        The law sampled (see above).

    Returns
    -------
    numpy.ndarray
        The rate at each ``n`` (same shape), without its constant factor.

    References
    ----------
    S. Bobkov, M. Ledoux, Mem. AMS (2019); M. Ajtai, J. Komlós, G. Tusnády, Combinatorica (1984).
    %(ref_rates)s
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
