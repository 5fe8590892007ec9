r"""Phase diagrams of clustering: outcome frequencies over ensembles, with their uncertainty.

:func:`cluster_statistics` runs random clouds at every :math:`\beta` of a grid as one batch, the same clouds
and layers at every :math:`\beta` (common random numbers); frequencies come with Wilson intervals, and
:func:`crossing` finds where a probability crosses a level.

References
----------
E. B. Wilson, J. Amer. Statist. Assoc. 22 (1927); Geshkovski, Letrouit, Polyanskiy, Rigollet
(arXiv:2312.10794), the clustering model. Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.stats import norm

from .attention import Attention
from .ensembles import Schedule, recipe_matrices, sample_clouds, simulate_batch
from .metrics import cluster_outcomes
from .validation import real_array, validate_count, validate_finite

__all__ = ["wilson_interval", "crossing", "cluster_statistics"]


def wilson_interval(k, n, confidence: float = 0.95):
    r"""Wilson score interval of a binomial proportion, :math:`k` successes in :math:`n` trials:

    .. math:: \frac{\hat p+\frac{z^2}{2n}\pm z\sqrt{\frac{\hat p(1-\hat p)}{n}+\frac{z^2}{4n^2}}}{1+\frac{z^2}{n}},
              \qquad \hat p=k/n,\ z=\Phi^{-1}\big(\tfrac{1+\text{confidence}}2\big),

    which stays in [0, 1] and does not collapse at :math:`k=0` or :math:`k=n`.

    Parameters
    ----------
    k, n, confidence
        Successes and trials (ints or arrays, broadcast together), and the confidence level in (0, 1).

    Returns
    -------
    lo, hi : float or array

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
    r"""First :math:`x` at which the sampled curve :math:`p(x)` crosses ``level`` (either way): linear
    interpolation (in :math:`\log x` if ``log``) across the first sign change; NaN if there is none.

    Parameters
    ----------
    x, p : arrays (m,) and (m,) or (..., m)
        Increasing grid (positive if ``log``), and the sampled curves.
    level, log
        The level, and whether to interpolate in :math:`\log x`.

    Returns
    -------
    float or array

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
    s = p - validate_finite(level, "level")
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


_RUN = {"layer_seed": 1, "threshold": 0.999, "method": "rk4", "sphere": True, "resample_every": None}


def cluster_statistics(
    kind, recipe: str = "identity", betas=(1.0,), depths=(10.0,), *, n=32, d=3, clouds=64, seed=0, dt=0.5, **options
) -> dict[str, np.ndarray]:
    r"""Clustering outcomes of ``clouds`` random clouds at every :math:`\beta` and depth: one batched run.

    Each cloud (n tokens uniform on the sphere) has its own random layer from the recipe; the len(betas) x clouds
    systems run as one batch, examined at every depth of ``depths`` (multiples of ``dt``).

    Parameters
    ----------
    kind, recipe, betas, depths
        Attention kind (a name or an ``AttentionKind``), one of :data:`~tokendynamics.ensembles.RECIPES`, the
        inverse temperatures and the examined depths.
    n, d, clouds, seed, dt
        Tokens per cloud, dimension, clouds per :math:`\beta`, seed of the clouds, step.
    **options
        ``layer_seed`` (1), ``threshold`` (0.999, of :func:`~tokendynamics.metrics.cluster_outcomes`), ``method``
        ("rk4"), ``sphere`` (True), ``resample_every`` (None; else fresh layers every :math:`\tau` in depth); the
        rest goes to the layers (``eps``, ``bias``, ...).

    Returns
    -------
    dict
        Plain arrays: ``single``, ``antipodal`` (bool), ``clusters`` (int), of shape (len(depths), len(betas),
        clouds); ``blowup`` (len(betas), clouds); ``betas``, ``depths``, ``seconds`` and ``cpu_seconds``.

    References
    ----------
    Geshkovski et al. (arXiv:2312.10794), the clustering model; book: ``chapters/07_phase_diagrams.md``.
    """
    o = {key: options.pop(key, default) for key, default in _RUN.items()}  # the rest goes to the layers
    betas = np.atleast_1d(real_array(betas, "betas"))
    depths = np.atleast_1d(real_array(depths, "depths"))
    n, d, clouds = validate_count(n, "n", minimum=2), validate_count(d, "d"), validate_count(clouds, "clouds")
    nb = betas.size
    X0 = np.tile(sample_clouds(clouds, n, d, seed), (nb, 1, 1))

    def stack(rng):  # one layer per (beta, cloud): the clouds' drawn matrices, repeated at every beta
        M = {k: np.tile(v, (nb, 1, 1)) for k, v in recipe_matrices(recipe, d, clouds, rng).items()}
        return Attention(kind, **M, beta=np.repeat(betas, clouds), **options)

    if o["resample_every"] is None:
        layers = stack(o["layer_seed"])
    else:
        pieces = max(1, int(math.ceil(depths.max() / o["resample_every"] - 1e-9)))
        layers = Schedule(tuple(map(stack, np.random.SeedSequence(o["layer_seed"]).spawn(pieces))), o["resample_every"])
    start, cpu = time.perf_counter(), time.process_time()
    run = simulate_batch(X0, layers, float(depths.max()), dt=dt, method=o["method"], sphere=o["sphere"], save_at=depths)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    X = run.X.reshape(len(depths), nb, clouds, n, d)
    per_depth = [cluster_outcomes(Xt, o["threshold"]) for Xt in X]  # one depth at a time: Gram matrices stay small
    return {
        **{key: np.stack([r[key] for r in per_depth]) for key in ("single", "antipodal", "clusters")},
        "blowup": run.blew_up.reshape(nb, clouds),
        "betas": betas,
        "depths": run.t,
        "seconds": np.array(seconds),
        "cpu_seconds": np.array(cpu_seconds),
    }
