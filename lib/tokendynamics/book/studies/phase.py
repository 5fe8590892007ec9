r"""The phase-diagram chapter's statistics of a transition and its check of the planar theory.

For ``chapters/07_phase_diagrams.md``, on :mod:`tokendynamics.phase`: the value of :math:`\beta` where the
probability of an outcome crosses a level, with a paired bootstrap interval (:func:`bootstrap_crossing`)
and with the band of the inverted Wilson intervals (:func:`inversion_band`); and linear attention on the
circle against the regimes of paper 2's closed forms (:func:`planar_linear_check`).

References: E. B. Wilson, J. Amer. Statist. Assoc. 22 (1927); B. Efron, R. Tibshirani, *An Introduction to
the Bootstrap* (1993).
"""

from __future__ import annotations

import math

import numpy as np

from ...attention import Attention
from ...ensembles import recipe_matrices, sample_clouds
from ...particles import angles
from ...phase import cluster_statistics, crossing, wilson_interval
from ...regimes import predict_regime
from ...validation import real_array, validate_count

__all__ = ["bootstrap_crossing", "inversion_band", "planar_linear_check"]


def bootstrap_crossing(x, outcomes, level: float = 0.5, *, reps: int = 1000, confidence: float = 0.95, rng=None):
    r"""Crossing of ``level`` by the frequency of an outcome, with a paired bootstrap interval.

    ``outcomes[i, j]`` is the outcome of cloud j at grid point i, the same N clouds at every grid point
    (common random numbers). Each replicate resamples the N clouds with replacement — the same resample
    at every :math:`x` — and recomputes the crossing (:func:`~tokendynamics.phase.crossing`).

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
    estimate, lo, hi : float
        The crossing of the observed frequencies and the percentile interval of the replicates.
    found : float
        The fraction of replicates that cross at all (below 1, the interval describes those only).
    """
    x = real_array(x, "x")
    Y = np.asarray(outcomes, dtype=bool)
    if Y.ndim != 2 or Y.shape[0] != x.size:
        raise ValueError(f"outcomes must have shape (len(x), N) = ({x.size}, N), got {Y.shape}")
    idx = np.random.default_rng(rng).integers(0, Y.shape[1], size=(validate_count(reps, "reps"), Y.shape[1]))
    boots = crossing(x, Y[:, idx].mean(axis=2).T, level)
    est, ok = crossing(x, Y.mean(axis=1), level), np.isfinite(boots)
    if not ok.any():
        return est, math.nan, math.nan, 0.0
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boots[ok], [a, 1 - a])
    return est, float(lo), float(hi), float(ok.mean())


def inversion_band(x, k, n, level: float = 0.5, confidence: float = 0.95):
    r"""The band of :math:`x` where ``level`` is inside the Wilson interval of :math:`k/n`.

    From the crossing of ``level`` by the lower end of the Wilson intervals
    (:func:`~tokendynamics.phase.wilson_interval`) to its crossing by the upper end (sorted): the values
    of :math:`x` at which the data cannot tell the probability from ``level``.

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
    """
    lo_p, hi_p = wilson_interval(k, n, confidence)
    a, b = crossing(x, lo_p, level), crossing(x, hi_p, level)
    return (a, b) if math.isnan(a) or math.isnan(b) or a <= b else (b, a)


def planar_linear_check(
    recipe: str,
    *,
    n=32,
    clouds=64,
    seed=0,
    layer_seed=1,
    beta=1.0,
    depths=(25.0, 50.0, 100.0, 200.0),
    dt=0.5,
    threshold=0.999,
) -> dict[str, np.ndarray]:
    r"""Linear attention on the circle (d = 2): the regime paper 2's closed forms predict, and what happens.

    In d = 2 linear attention is the second-harmonic Kuramoto model (``chapters/04_kuramoto_reduction.md``,
    equation (eq-kd)); :func:`~tokendynamics.regimes.predict_regime` gives its regime from
    :math:`(A, V, \beta)` and :math:`z_0=R_2(0)` of the cloud (the closed forms of the Ott–Antonsen flow; a
    finite cloud is not on that manifold, which is what this measures). Each of ``clouds`` clouds has its
    own layer from the recipe; one batched run (:func:`~tokendynamics.phase.cluster_statistics`).

    Parameters
    ----------
    recipe : str
        One of :data:`~tokendynamics.ensembles.RECIPES`.
    n, clouds : int
        Tokens per cloud, clouds.
    seed, layer_seed : int
        Seeds of the clouds and of the layers.
    beta : float
        Inverse temperature.
    depths : sequence of float
        Examined depths (near degenerate parameters the approach is algebraic: hence several).
    dt : float
        Step.
    threshold : float
        Cluster threshold.

    Returns
    -------
    dict
        ``predicted`` (regime names, "none" where no closed form applies), ``antipodal`` and ``single``
        (booleans (len(depths), clouds)), ``depths``, ``z0``, ``det`` (:math:`\det A` of each layer),
        ``seconds`` and ``cpu_seconds``.
    """
    kw = dict(n=n, d=2, clouds=clouds, seed=seed, layer_seed=layer_seed, dt=dt, threshold=threshold)
    stats = cluster_statistics("linear", recipe, [beta], depths, **kw)
    M = recipe_matrices(recipe, 2, clouds, layer_seed)
    A = np.einsum("bkd,bke->bde", M["Q"], M["K"])
    z0 = np.exp(2j * angles(sample_clouds(clouds, n, 2, seed))).mean(axis=1)
    predictions = [
        predict_regime(Attention("linear", A=A[b], V=M["V"][b], beta=beta), complex(z0[b])) for b in range(len(A))
    ]
    return {
        "predicted": np.array(["none" if p is None else p.regime for p in predictions]),
        "antipodal": stats["antipodal"][:, 0],
        "single": stats["single"][:, 0],
        "depths": stats["depths"],
        "z0": z0,
        "det": np.linalg.det(A),
        "seconds": stats["seconds"],
        "cpu_seconds": stats["cpu_seconds"],
    }
