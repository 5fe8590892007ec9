r"""The phase-diagram chapter's statistics of a transition and its check of the planar theory.

For ``chapters/07_phase_diagrams.md``, on :mod:`tokendynamics.phase`: the value of :math:`\beta` where the
probability of an outcome crosses a level, with a paired bootstrap interval (:func:`bootstrap_crossing`)
and with the band of the inverted Wilson intervals (:func:`inversion_band`); and linear attention on the
circle against the regimes of paper 2's closed forms (:func:`planar_linear_check`); and the grid of Geshkovski,
Letrouit, Polyanskiy and Rigollet over :math:`(\beta, t)` for softmax with :math:`Q=K=V=I` on the circle
(:func:`glpr_grid`).

References: E. B. Wilson, J. Amer. Statist. Assoc. 22 (1927); B. Efron, R. Tibshirani, *An Introduction to
the Bootstrap* (1993); B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on
Transformers* (arXiv:2312.10794), and its code ``phase-diagrams.py`` (github.com/borjanG/2023-transformers-rotf).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...attention import Attention
from ...ensembles import recipe_matrices, recipe_stack, sample_clouds, simulate_batch
from ...particles import angles
from ...phase import cluster_statistics, crossing, wilson_interval
from ...regimes import predict_regime
from ...validation import real_array, validate_count, validate_positive

__all__ = ["bootstrap_crossing", "inversion_band", "planar_linear_check", "glpr_grid"]

#: Systems integrated per call of :func:`glpr_grid` (its grid of beta goes in chunks of about this many
#: systems: a few hundred MB of stored frames at n = 32, d = 2, 31 frames).
GLPR_CHUNK = 20480


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


def glpr_grid(
    betas,
    *,
    T=30.0,
    dt=0.1,
    n=32,
    d=2,
    clouds=2048,
    seed=0,
    save_every=10,
    threshold=0.999,
) -> dict[str, np.ndarray]:
    r"""The phase diagram of Geshkovski, Letrouit, Polyanskiy and Rigollet: softmax with Q = K = V = I over (beta, t).

    ``clouds`` clouds of n tokens uniform on the sphere of :math:`\mathbb R^d` (the same clouds at every
    :math:`\beta`: common random numbers) move by :math:`\dot x_i=P_{x_i}\big(\sum_j P_{ij}x_j\big)`,
    :math:`P_{ij}\propto e^{\beta\langle x_i,x_j\rangle}` (rows normalised), integrated by explicit Euler with
    step ``dt`` and renormalisation (:func:`~tokendynamics.ensembles.simulate_batch`, ``sphere=True``, the
    compiled kernel where ``backend="auto"`` picks it), in chunks of about ``GLPR_CHUNK`` systems. Every
    ``save_every`` steps two statistics are recorded per :math:`\beta`: how many clouds are one cluster
    (every :math:`\langle x_i,x_j\rangle>` threshold: the test of :func:`~tokendynamics.metrics.is_single_cluster`,
    read from the Gram matrix that also gives the second statistic), and the
    mean fraction of pairs :math:`i\neq j` with :math:`\langle x_i,x_j\rangle>` threshold (the quantity the
    published figure colours).

    Parameters
    ----------
    betas : sequence of float
        Inverse temperatures (the protocol: ``numpy.linspace(0.1, 9, 90)``).
    T, dt : float
        Final time (30) and Euler step (0.1).
    n, d, clouds : int
        Tokens per cloud (32), dimension (2: the circle), clouds per :math:`\beta` (2048).
    seed : int
        Seed of the clouds (:func:`~tokendynamics.ensembles.sample_clouds`).
    save_every : int
        Record every this many steps (and at ``t = 0``).
    threshold : float
        Link threshold on :math:`\langle x_i,x_j\rangle` (0.999, as in the published code).

    Returns
    -------
    dict
        ``betas`` (m,), ``times`` (k,), ``single`` (k, m) counts of one-cluster clouds, ``pairs`` (k, m) mean
        fraction of linked pairs, ``clouds``, ``blowup`` (flagged systems, 0 expected), ``seconds`` (wall
        time of the whole computation) and ``cpu_seconds``.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on Transformers*
    (arXiv:2312.10794), code ``phase-diagrams.py``; book: ``chapters/07_phase_diagrams.md`` [R].
    """
    betas = np.atleast_1d(real_array(betas, "betas"))
    if betas.ndim != 1 or np.any(betas <= 0):
        raise ValueError(f"betas must be a 1-d sequence of positive numbers, got {betas!r}")
    T, dt = validate_positive(T, "T"), validate_positive(dt, "dt")
    n, d, clouds = validate_count(n, "n", minimum=2), validate_count(d, "d"), validate_count(clouds, "clouds")
    save_every = validate_count(save_every, "save_every")
    start, cpu = time.perf_counter(), time.process_time()
    X0 = sample_clouds(clouds, n, d, seed)
    per_call = max(1, GLPR_CHUNK // clouds)
    single, pairs, times = [], [], None
    blowup = 0
    for k in range(0, betas.size, per_call):
        chunk = betas[k : k + per_call]
        layers = recipe_stack("softmax", "identity", d, np.repeat(chunk, clouds))
        run = simulate_batch(
            np.tile(X0, (chunk.size, 1, 1)), layers, T, dt=dt, method="euler", sphere=True, save_every=save_every
        )
        blowup += int(run.blew_up.sum())
        times = run.t
        X = run.X.reshape(len(run.t), chunk.size, clouds, n, d)
        # one Gram matrix per frame serves both statistics: linked entries, the diagonal included (unit rows);
        # a cloud is one cluster when all n^2 are linked, the test of metrics.is_single_cluster
        linked = np.stack([((Xt @ np.swapaxes(Xt, -1, -2)) > threshold).sum(axis=(-1, -2)) for Xt in X])
        single.append((linked == n * n).sum(axis=-1))
        pairs.append(((linked - n) / (n * (n - 1))).mean(axis=-1))
    return {
        "betas": betas,
        "times": np.asarray(times),
        "single": np.concatenate(single, axis=1),
        "pairs": np.concatenate(pairs, axis=1),
        "clouds": np.array(clouds),
        "blowup": np.array(blowup),
        "seconds": np.array(time.perf_counter() - start),
        "cpu_seconds": np.array(time.process_time() - cpu),
    }
