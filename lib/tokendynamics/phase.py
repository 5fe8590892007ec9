r"""Phase diagrams of clustering: outcome frequencies over ensembles, with their uncertainty.

:func:`cluster_statistics` integrates ``clouds`` random initial clouds for each inverse temperature
:math:`\beta` of a grid, as one batch (:func:`~tokendynamics.ensembles.simulate_batch`), and
records at each requested depth whether each cloud is one cluster, two antipodal clusters, and how
many clusters it has (:mod:`tokendynamics.metrics`). The same clouds (and, for random recipes,
the same layers) are used at every :math:`\beta` — common random numbers: differences between
:math:`\beta` values are then not blurred by different draws, and a bootstrap resamples whole
clouds across the grid.

Statistics: a frequency :math:`k/N` is reported with the Wilson score interval
(:func:`wilson_interval`); the value of :math:`\beta` where a probability crosses a level
(:func:`crossing`, linear interpolation in :math:`\log\beta`) with a paired bootstrap interval
(:func:`bootstrap_crossing`) and with the band obtained by inverting the Wilson intervals
(:func:`inversion_band`: the :math:`\beta` at which :math:`\tfrac12` is still inside the interval).

References
----------
E. B. Wilson, *Probable inference, the law of succession, and statistical inference*, J. Amer. Statist.
Assoc. 22 (1927); B. Efron, R. Tibshirani, *An Introduction to the Bootstrap* (1993). The clustering
model: Geshkovski, Letrouit, Polyanskiy, Rigollet (arXiv:2312.10794). Book: ``chapters/07_phase_diagrams.md``,
equation (eq-phase-model).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.stats import norm

from .attention import Attention
from .docstrings import fill_doc
from .ensembles import Schedule, recipe_matrices, sample_clouds, simulate_batch, stack_from_matrices
from .metrics import cluster_outcomes
from .particles import angles
from .regimes import predict_regime
from .validation import PARAMETER_DOCS, real_array, validate_count

__all__ = [
    "wilson_interval",
    "crossing",
    "bootstrap_crossing",
    "inversion_band",
    "cluster_statistics",
    "planar_linear_check",
]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **PARAMETER_DOCS,
    "seeds": "seed, layer_seed : int\n    Seeds of the clouds and of the layers.",
    "threshold": "threshold : float\n    Cluster threshold.",
    "returns_dict": "Returns\n-------\ndict\n    As above (also ``cpu_seconds``).",
}


def wilson_interval(k, n, confidence: float = 0.95):
    r"""Wilson score interval of a binomial proportion: :math:`k` successes out of :math:`n` trials.

    .. math:: \frac{\hat p+\frac{z^2}{2n}\pm z\sqrt{\frac{\hat p(1-\hat p)}{n}+\frac{z^2}{4n^2}}}{1+\frac{z^2}{n}},
              \qquad \hat p=k/n,\ z=\Phi^{-1}\big(\tfrac{1+\text{confidence}}2\big).

    Unlike :math:`\hat p\pm z\sqrt{\hat p(1-\hat p)/n}`, it never leaves [0, 1] and does not
    collapse to a point at :math:`k=0` or :math:`k=n` (at :math:`k=0`, the upper end is about
    :math:`z^2/n`).

    Parameters
    ----------
    k, n : int or array
        Successes and trials (vectorised, broadcast together).
    confidence : float
        Confidence level in (0, 1).

    Returns
    -------
    lo, hi : float or array
        The interval's ends.

    References
    ----------
    E. B. Wilson, J. Amer. Statist. Assoc. 22 (1927).

    Examples
    --------
    >>> lo, hi = wilson_interval(0, 10)
    >>> float(lo), round(float(hi), 4)
    (0.0, 0.2775)
    """
    k = real_array(k, "k")
    n = real_array(n, "n")
    if np.any(n <= 0) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= k <= n and n > 0")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    z = norm.ppf(0.5 + confidence / 2)
    p = k / n
    den = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / den
    lo, hi = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def crossing(x, p, level: float = 0.5, *, log: bool = True):
    r"""First :math:`x` at which the sampled curve :math:`p(x)` crosses ``level`` (either way).

    Linear interpolation between the two grid points that bracket the first sign change of
    :math:`p-\text{level}` (in :math:`\log x` when ``log``); a grid point exactly at the level is
    returned as is. NaN if :math:`p` stays on one side.

    Parameters
    ----------
    x : array (m,)
        Increasing grid (positive if ``log``).
    p : array (m,) or (..., m)
        One or several sampled curves.
    level : float
        The level.
    log : bool
        Interpolate in :math:`\log x`.

    Returns
    -------
    float or array
        The crossing(s).

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md`` (transition points).

    Examples
    --------
    >>> float(crossing([1.0, 2.0], [0.0, 1.0], log=False))
    1.5
    """
    x = real_array(x, "x")
    p = real_array(p, "p")
    if x.ndim != 1 or p.shape[-1:] != x.shape or x.size < 2 or np.any(np.diff(x) <= 0):
        raise ValueError("x must be increasing and p sampled on it (last axis of the same length >= 2)")
    if log and np.any(x <= 0):
        raise ValueError("log interpolation needs x > 0")
    u = np.log(x) if log else x
    s = p - level
    sign = np.zeros(s.shape, dtype=bool)
    sign[..., :-1] = s[..., :-1] * s[..., 1:] < 0
    event = (s == 0) | sign
    k = np.argmax(event, axis=-1)
    found = np.take_along_axis(event, k[..., None], axis=-1)[..., 0]
    kk = np.minimum(k + 1, x.size - 1)
    sk = np.take_along_axis(s, k[..., None], axis=-1)[..., 0]
    sk1 = np.take_along_axis(s, kk[..., None], axis=-1)[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(sk == 0, 0.0, sk / (sk - sk1))
    v = u[k] + f * (u[kk] - u[k])
    out = np.where(found, np.exp(v) if log else v, np.nan)
    return float(out) if out.ndim == 0 else out


def bootstrap_crossing(x, outcomes, level: float = 0.5, *, reps: int = 1000, confidence: float = 0.95, rng=None):
    r"""Crossing of ``level`` by the frequency of an outcome, with a paired bootstrap interval.

    ``outcomes`` is a boolean array (len(x), N): outcome of cloud j at grid point i, the same N
    clouds at every grid point (common random numbers). Each replicate resamples the N clouds with
    replacement — the same resample at every :math:`x` — and recomputes the crossing
    (:func:`crossing`).

    Parameters
    ----------
    x : array (m,)
        Increasing grid.
    outcomes : bool array (m, N)
        Outcome of cloud j at grid point i.
    level : float
        The level.
    reps : int
        Bootstrap replicates.
    confidence : float
        Level of the percentile interval.
    rng : int or numpy.random.Generator, optional
        Seed or generator.

    Returns
    -------
    estimate : float
        The crossing of the observed frequencies.
    lo, hi : float
        The percentile interval of the replicates.
    found : float
        The fraction of replicates that cross at all (below 1, the interval only describes those that do).

    References
    ----------
    B. Efron, R. Tibshirani, *An Introduction to the Bootstrap* (1993).
    """
    x = real_array(x, "x")
    Y = np.asarray(outcomes, dtype=bool)
    if Y.ndim != 2 or Y.shape[0] != x.size:
        raise ValueError(f"outcomes must have shape (len(x), N) = ({x.size}, N), got {Y.shape}")
    reps = validate_count(reps, "reps")
    rng = np.random.default_rng(rng)
    N = Y.shape[1]
    est = crossing(x, Y.mean(axis=1), level)
    idx = rng.integers(0, N, size=(reps, N))
    freq = Y[:, idx].mean(axis=2)  # (len(x), reps)
    boots = crossing(x, freq.T, level)
    ok = np.isfinite(boots)
    if not ok.any():
        return est, math.nan, math.nan, 0.0
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boots[ok], [a, 1 - a])
    return est, float(lo), float(hi), float(ok.mean())


def inversion_band(x, k, n, level: float = 0.5, confidence: float = 0.95):
    r"""The band of :math:`x` where ``level`` is inside the Wilson interval of :math:`k/n`, from its edges.

    With :math:`[\ell(x), u(x)]` the Wilson intervals (:func:`wilson_interval`), the band runs
    from the crossing of ``level`` by :math:`\ell` to its crossing by :math:`u` (:func:`crossing`,
    sorted): the values of :math:`x` at which the data cannot tell the probability from ``level``.
    Parameters
    ----------
    x : array (m,)
        Increasing grid.
    k, n : array (m,)
        Successes and trials at each grid point.
    level : float
        The level.
    confidence : float
        Level of the Wilson intervals.

    Returns
    -------
    lo, hi : float
        The band; an edge is NaN when that bound never crosses inside the grid.

    References
    ----------
    E. B. Wilson, J. Amer. Statist. Assoc. 22 (1927).
    """
    lo_p, hi_p = wilson_interval(k, n, confidence)
    a, b = crossing(x, lo_p, level), crossing(x, hi_p, level)
    if math.isnan(a) or math.isnan(b):
        return a, b
    return (a, b) if a <= b else (b, a)


def _tiled_stack(kind, M, betas, clouds, shared):
    """One layer per (beta, cloud): the ``clouds`` drawn matrices, repeated at every beta."""
    nb = len(betas)
    tiled = {k: np.tile(v, (nb, 1, 1)) for k, v in M.items()}
    return stack_from_matrices(kind, tiled, np.repeat(betas, clouds), **shared)


@fill_doc(_DOC)
def cluster_statistics(
    kind: str,
    recipe: str = "identity",
    betas=(1.0,),
    depths=(10.0,),
    *,
    n: int = 32,
    d: int = 3,
    clouds: int = 64,
    seed: int = 0,
    layer_seed: int = 1,
    dt: float = 0.5,
    method: str = "rk4",
    threshold: float = 0.999,
    resample_every: float | None = None,
    sphere: bool = True,
    **shared,
) -> dict[str, np.ndarray]:
    r"""Clustering outcomes of ``clouds`` random clouds at every :math:`\beta` and depth: one batched run.

    The clouds are n tokens uniform on the sphere of :math:`\mathbb R^d` (seed ``seed``); the
    layers come from the named recipe (:func:`~tokendynamics.ensembles.recipe_matrices`, seed
    ``layer_seed``), one random layer per cloud, the same clouds and layers at every
    :math:`\beta`. With ``resample_every`` = :math:`\tau`, fresh layers are drawn every
    :math:`\tau` in depth (a residual network whose weights change every :math:`\tau/\mathrm{d}t`
    layers) instead of fixed ones. The :math:`B=\text{len(betas)}\times\text{clouds}` systems run
    as one batch with fixed step ``dt`` (``method`` "rk4" or "euler"), and every depth of
    ``depths`` (multiples of ``dt``) is examined.

    Returns a dict of arrays (plain data, for caches and sweeps): ``single``, ``antipodal``
    (booleans (len(depths), len(betas), clouds): one cluster, two antipodal clusters, at the
    threshold ``threshold`` of :func:`~tokendynamics.metrics.is_single_cluster`), ``clusters``
    (ints, :func:`~tokendynamics.metrics.count_clusters`), ``blowup`` (booleans (len(betas),
    clouds): the system was frozen), ``betas``, ``depths``, ``seconds`` (wall time of the run).

    Parameters
    ----------
    kind : str
        Attention kind.
    recipe : str
        One of :data:`~tokendynamics.ensembles.RECIPES`.
    betas, depths : sequence of float
        Inverse temperatures and examined depths.
    n, d, clouds : int
        Tokens per cloud, dimension, clouds per :math:`\beta`.
    %(seeds)s
    dt : float
        Step.
    method : {"rk4", "euler"}
        Integrator.
    %(threshold)s
    resample_every : float, optional
        Depth between fresh layers.
    sphere : bool
        Tokens on the unit sphere.
    **shared
        Passed to the layer stacks (``eps``, ``bias``, ...).

    %(returns_dict)s

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on Transformers*
    (arXiv:2312.10794), the clustering model; book: ``chapters/07_phase_diagrams.md``, equation
    (eq-phase-model).
    """
    betas = np.atleast_1d(real_array(betas, "betas"))
    depths = np.atleast_1d(real_array(depths, "depths"))
    n, d, clouds = validate_count(n, "n", minimum=2), validate_count(d, "d"), validate_count(clouds, "clouds")
    nb = betas.size
    X0 = np.tile(sample_clouds(clouds, n, d, seed), (nb, 1, 1))
    if resample_every is None:
        layers = _tiled_stack(kind, recipe_matrices(recipe, d, clouds, layer_seed), betas, clouds, shared)
    else:
        pieces = max(1, int(math.ceil(depths.max() / resample_every - 1e-9)))
        seqs = np.random.SeedSequence(layer_seed).spawn(pieces)
        layers = Schedule(
            tuple(_tiled_stack(kind, recipe_matrices(recipe, d, clouds, s), betas, clouds, shared) for s in seqs),
            resample_every,
        )
    start, cpu = time.perf_counter(), time.process_time()
    run = simulate_batch(X0, layers, float(depths.max()), dt=dt, method=method, sphere=sphere, save_at=depths)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    X = run.X.reshape(len(depths), nb, clouds, n, d)
    per_depth = [cluster_outcomes(Xt, threshold) for Xt in X]  # one depth at a time: Gram matrices stay small
    return {
        **{key: np.stack([o[key] for o in per_depth]) for key in ("single", "antipodal", "clusters")},
        "blowup": run.blew_up.reshape(nb, clouds),
        "betas": betas,
        "depths": run.t,
        "seconds": np.array(seconds),
        "cpu_seconds": np.array(cpu_seconds),
    }


@fill_doc(_DOC)
def planar_linear_check(
    recipe: str,
    *,
    n: int = 32,
    clouds: int = 64,
    seed: int = 0,
    layer_seed: int = 1,
    beta: float = 1.0,
    depths=(25.0, 50.0, 100.0, 200.0),
    dt: float = 0.5,
    threshold: float = 0.999,
) -> dict[str, np.ndarray]:
    r"""Linear attention on the circle (d = 2): the regime paper 2's closed forms predict, and what happens.

    In d = 2 linear attention is the second-harmonic Kuramoto model (book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-kd)), and
    :func:`~tokendynamics.regimes.predict_regime` gives its regime from :math:`(A, V, \beta)` and the
    order parameter :math:`z_0=R_2(0)=\frac1n\sum_j e^{2i\theta_j(0)}` of the cloud (the closed
    forms are those of the Ott–Antonsen flow; a finite cloud is not on that manifold, which is
    what this check measures). For each of ``clouds`` clouds with its own layer from the recipe,
    returns ``predicted`` (the regime name, or "none" where no closed form applies), ``antipodal``
    and ``single`` (booleans (len(depths), clouds), one batched run, :func:`cluster_statistics`),
    ``depths``, ``z0``, ``det`` (:math:`\det A` of each layer) and ``seconds``. (Near degenerate
    parameters, e.g. :math:`\det A=0`, the approach to the clusters is algebraic, not exponential:
    hence several depths.)

    Parameters
    ----------
    recipe : str
        One of :data:`~tokendynamics.ensembles.RECIPES`.
    n, clouds : int
        Tokens per cloud, clouds.
    %(seeds)s
    %(beta)s
    depths : sequence of float
        Examined depths.
    dt : float
        Step.
    %(threshold)s

    %(returns_dict)s

    References
    ----------
    Paper 2 (Li et al., 2026), the regimes in d = 2; book: ``chapters/05_kuramoto_regimes.md`` and
    ``chapters/07_phase_diagrams.md``.
    """
    clouds = validate_count(clouds, "clouds")
    stats = cluster_statistics(
        "linear",
        recipe,
        [beta],
        depths,
        n=n,
        d=2,
        clouds=clouds,
        seed=seed,
        layer_seed=layer_seed,
        dt=dt,
        threshold=threshold,
    )
    M = recipe_matrices(recipe, 2, clouds, layer_seed)
    A = np.einsum("bkd,bke->bde", M["Q"], M["K"])
    z0 = np.exp(2j * angles(sample_clouds(clouds, n, 2, seed))).mean(axis=1)
    predicted = []
    for b in range(clouds):
        pred = predict_regime(Attention("linear", A=A[b], V=M["V"][b], beta=beta), complex(z0[b]))
        predicted.append("none" if pred is None else pred.regime)
    return {
        "predicted": np.array(predicted),
        "antipodal": stats["antipodal"][:, 0],
        "single": stats["single"][:, 0],
        "depths": stats["depths"],
        "z0": z0,
        "det": np.linalg.det(A),
        "seconds": stats["seconds"],
        "cpu_seconds": stats["cpu_seconds"],
    }
