r"""Mean-field limit of the particle system: the exact 1-D Gaussian oracle and convergence studies.

Paper 1 §3 (Theorem B) and §4.3 item 8. The empirical measure of :math:`n` particles solves the
Transformer PDE with empirical data, so :math:`W_p(\mu^n_t,\mu_t)\le C(t)\,W_p(\mu^n_0,\mu_0)`, and
for i.i.d. data :math:`W_p(\mu^n_0,\mu_0)\to0` at the rate of the empirical measure.

In :math:`d=1` softmax attention with scalars :math:`a` (score) and :math:`v` (value) preserves
Gaussians and is solved in closed form: for :math:`\mu_0=N(\alpha_0,\sigma_0^2)`,

.. math:: \sigma_t^2=\frac{\sigma_0^2}{1-2va\sigma_0^2t},\qquad
          \alpha_t=\alpha_0e^{vt}\,(1-2va\sigma_0^2t)^{-1/2},

up to the blow-up time :math:`T^*=1/(2va\sigma_0^2)` when :math:`va>0`. The field is affine,
:math:`\Gamma_{\mu_t}(x)=v(\alpha_t+a\sigma_t^2x)`, so the characteristic flow is the affine map
:math:`\Phi_t(x)=\alpha_t+\frac{\sigma_t}{\sigma_0}(x-\alpha_0)` (:func:`gaussian_1d_flow_map`).
"""

from __future__ import annotations

import math

import numpy as np

from .attention import Attention
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
    "meanfield_study_reference",
    "masked_meanfield_study",
    "fit_power_law",
]


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


def blowup_time_1d(sigma0: float, a: float, v: float) -> float:
    r"""Blow-up time :math:`T^*=1/(2va\sigma_0^2)` of the 1-D Gaussian solution if :math:`va>0`, else ``inf``.

    The d = 1 case of :func:`tokendynamics.gaussian.blowup_time` (paper 1 §4.3 items 3 and 8).
    """
    _, sigma0, a, v = _check_scalars(0.0, sigma0, a, v)
    return blowup_time([[sigma0**2]], _layer_1d(a, v))


def gaussian_1d_solution(t, alpha0: float, sigma0: float, a: float, v: float):
    r"""Mean :math:`\alpha_t` and standard deviation :math:`\sigma_t` of the exact 1-D solution (paper 1 §4.3 item 8).

    The closed form of :func:`tokendynamics.gaussian.one_dimensional_solution` (score :math:`a`,
    value :math:`v`), in terms of the standard deviation. ``t`` may be an array. Raises
    :class:`~tokendynamics.errors.BlowUpError` if some :math:`t\ge T^*`.
    """
    alpha0, sigma0, a, v = _check_scalars(alpha0, sigma0, a, v)
    alpha, var = one_dimensional_solution(alpha0, sigma0**2, _layer_1d(a, v), t)
    return alpha, np.sqrt(var)


def gaussian_1d_flow_map(x, t: float, alpha0: float, sigma0: float, a: float, v: float):
    r"""Characteristic flow :math:`\Phi_t(x)=\alpha_t+\frac{\sigma_t}{\sigma_0}(x-\alpha_0)` of the 1-D Gaussian solution.

    :math:`(\Phi_t)_\#N(\alpha_0,\sigma_0^2)=N(\alpha_t,\sigma_t^2)`, and :math:`\Phi_t(x_i(0))` is
    where the mean-field flow takes a token: :math:`|x_i(t)-\Phi_t(x_i(0))|` measures how far the
    :math:`n`-particle dynamics is from the mean-field one along each token.
    """
    alpha_t, sigma_t = gaussian_1d_solution(t, alpha0, sigma0, a, v)
    return alpha_t + (sigma_t / sigma0) * (np.asarray(x, dtype=float) - alpha0)


def meanfield_study_1d(
    ns, seeds, *, T: float, a: float, v: float, alpha0: float, sigma0: float, dt: float, beta: float = 1.0
) -> dict[str, np.ndarray]:
    r"""W2 distance between the :math:`n`-particle solution and the exact mean field, d = 1, Gaussian data.

    For each :math:`n` in ``ns`` and seed in ``seeds``: :math:`x_i(0)\sim N(\alpha_0,\sigma_0^2)`
    i.i.d., softmax attention with :math:`A=[a]`, :math:`V=[v]` (RK4, step ``dt``) up to ``T``;
    returns arrays of shape (len(ns), len(seeds)):

    * ``w0`` = :math:`W_2(\mu^n_0, N(\alpha_0,\sigma_0^2))`, ``wT`` = :math:`W_2(\mu^n_T, N(\alpha_T,\sigma_T^2))`
      (exact, :func:`~tokendynamics.transport.wasserstein_gaussian_1d`);
    * ``lagrangian`` = :math:`(\frac1n\sum_i|x_i(T)-\Phi_T(x_i(0))|^2)^{1/2}`, the dynamics error
      alone (the coupling that follows each token).

    Paper 1 §3.3, claim C21.
    """
    ns = _counts(ns, "ns")
    seeds = _counts(seeds, "seeds", minimum=0)
    T, dt = validate_positive(T, "T"), validate_positive(dt, "dt")
    alpha_T, sigma_T = gaussian_1d_solution(T, alpha0, sigma0, beta * a, v)
    layer = Attention("softmax", A=[[a]], V=[[v]], beta=beta)
    out = {k: np.zeros((len(ns), len(seeds))) for k in ("w0", "wT", "lagrangian")}
    for i, n in enumerate(ns):
        for j, seed in enumerate(seeds):
            x0 = sample_gaussian(n, [alpha0], [[sigma0**2]], rng=seed)
            xT = simulate(x0, layer, T, dt=dt, method="rk4", save_every=10**9).final[:, 0]
            out["w0"][i, j] = wasserstein_gaussian_1d(x0[:, 0], alpha0, sigma0)
            out["wT"][i, j] = wasserstein_gaussian_1d(xT, float(alpha_T), float(sigma_T))
            phi = gaussian_1d_flow_map(x0[:, 0], T, alpha0, sigma0, beta * a, v)
            out["lagrangian"][i, j] = float(np.sqrt(np.mean((xT - phi) ** 2)))
    out["n"] = np.array(ns)
    return out


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
    r"""Masked attention on product data :math:`\mu_0=\lambda\otimes N(\alpha_0,\sigma_0^2)`, d = 1: how far from unmasked dynamics.

    Paper 1 §2.6. Fact [D]: for :math:`\mu_0=\lambda\otimes\nu_0` the masked solution is
    :math:`\lambda\otimes\nu_t` with :math:`\nu_t` the *unmasked* solution (claim C22). For each sink mass
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


def fit_power_law(ns, errors, *, bootstrap: int = 0, rng=None) -> tuple[float, float, float]:
    r"""Least-squares fit :math:`\log\bar e(n)=c+\gamma\log n` of the mean error over seeds.

    ``errors`` has shape (len(ns), seeds) (or (len(ns),)). Returns ``(gamma, c, stderr)``. By default
    ``stderr`` is the standard error of the slope from the regression residuals; with
    ``bootstrap = B > 0`` (and several seeds) it is the standard deviation of the slope over ``B``
    resamplings of the seeds with replacement, which accounts for the seed-to-seed noise of the
    means (the residuals of a fit through three or four points can be deceptively small).
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
