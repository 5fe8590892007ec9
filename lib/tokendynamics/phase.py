r"""Phase diagrams of clustering: outcome frequencies over ensembles, with their uncertainty.

:func:`cluster_statistics` integrates ``clouds`` random initial clouds for each inverse temperature
:math:`\beta` of a grid, as one batch (:func:`~tokendynamics.ensembles.simulate_batch`), and
records at each requested depth whether each cloud is one cluster, two antipodal clusters, and how
many clusters it has (:mod:`tokendynamics.metrics`). The same clouds (and, for random recipes,
the same layers) are used at every :math:`\beta` — common random numbers: differences between
:math:`\beta` values are then not blurred by different draws, and a bootstrap resamples whole
clouds across the grid.

Statistics: a frequency :math:`k/N` is reported with the Wilson score interval
(:func:`wilson_interval`), and the value of :math:`\beta` where a probability crosses a level by
:func:`crossing` (linear interpolation in :math:`\log\beta`); the chapter's bootstrap and inversion
bands of a crossing are in :mod:`tokendynamics.book.studies.phase`.

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

from .ensembles import Schedule, recipe_matrices, sample_clouds, simulate_batch, stack_from_matrices
from .metrics import cluster_outcomes
from .validation import real_array, validate_count

__all__ = ["wilson_interval", "crossing", "cluster_statistics"]


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


def _tiled_stack(kind, M, betas, clouds, shared):
    """One layer per (beta, cloud): the ``clouds`` drawn matrices, repeated at every beta."""
    nb = len(betas)
    tiled = {k: np.tile(v, (nb, 1, 1)) for k, v in M.items()}
    return stack_from_matrices(kind, tiled, np.repeat(betas, clouds), **shared)


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
    seed, layer_seed : int
        Seeds of the clouds and of the layers.
    dt : float
        Step.
    method : {"rk4", "euler"}
        Integrator.
    threshold : float
        Cluster threshold.
    resample_every : float, optional
        Depth between fresh layers.
    sphere : bool
        Tokens on the unit sphere.
    **shared
        Passed to the layer stacks (``eps``, ``bias``, ...).

    Returns
    -------
    dict
        As above (also ``cpu_seconds``).

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
