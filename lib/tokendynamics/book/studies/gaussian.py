r"""The Gaussian chapter's studies: particles against the ODEs, the clustering-condition search, the cone picture.

For ``chapters/02_gaussian_preservation.md`` (paper 1, Castin et al., arXiv:2501.18322, Gaussian
initial data), on the mathematics of :mod:`tokendynamics.gaussian`:

* :func:`compare_with_particles` — n particles sampled from :math:`N(\alpha_0,\Sigma_0)` against the
  mean/covariance ODEs, by Bures–Wasserstein distances;
* :func:`clustering_condition_search` — a seeded random search for softmax covariances that blow up
  although the clustering condition of paper 1's summary holds, in both readings of :math:`A`
  (:func:`condition_matrix`);
* the cone picture of 2 x 2 covariances: :func:`cone_coordinates`, :func:`disc_point`,
  :func:`cov_from_cone` and the official grid of initial covariances :func:`cone_grid` (the authors'
  code, vcastin/2025-transformers-PDEs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...attention import Attention
from ...gaussian import GaussianTrajectory, empirical_moments, solve_covariance_batch, solve_gaussian
from ...particles import Trajectory, sample_gaussian, simulate
from ...transport import bures_wasserstein
from ...validation import validate_choice, validate_count, validate_finite_array

__all__ = [
    "ParticleComparison",
    "compare_with_particles",
    "CONDITION_READINGS",
    "SEARCH_VALUES",
    "condition_matrix",
    "ConditionSearch",
    "clustering_condition_search",
    "cone_coordinates",
    "disc_point",
    "cov_from_cone",
    "cone_grid",
]


# ---------------------------------------------------------------------------------------------
# particles against the ODEs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ParticleComparison:
    r"""Particles started from a sample of :math:`N(\alpha_0,\Sigma_0)` against the Gaussian ODEs.

    Attributes
    ----------
    t : array (m,)
        The stored times.
    w2, w2_exact : arrays (m,)
        Bures–Wasserstein distance between the Gaussian fitted to the particles and the ODE started
        from the sample's own moments (``w2``), or from :math:`(\alpha_0,\Sigma_0)` (``w2_exact``,
        which contains the :math:`O(n^{-1/2})` sampling error of the initial sample).
    mean_error, cov_error : arrays (m,)
        :math:`|\bar x_t-\alpha_t|` and :math:`\|\hat\Sigma_t-\Sigma_t\|_2` (ODE from the sample's moments).
    particle_mean, particle_cov : arrays (m, d), (m, d, d)
        The particles' moments.
    ode, ode_exact : GaussianTrajectory
        The ODE from the sample's moments and from the exact ones.
    particles : Trajectory
        The particle run.
    n : int
        Number of particles.
    """

    t: np.ndarray
    w2: np.ndarray
    w2_exact: np.ndarray
    mean_error: np.ndarray
    cov_error: np.ndarray
    particle_mean: np.ndarray
    particle_cov: np.ndarray
    ode: GaussianTrajectory
    ode_exact: GaussianTrajectory
    particles: Trajectory
    n: int


def compare_with_particles(
    layer: Attention,
    mean0,
    cov0,
    *,
    n: int,
    T: float,
    dt: float,
    seed=None,
    method="rk4",
    save_every=1,
    rtol=1e-10,
    atol=1e-12,
) -> ParticleComparison:
    r"""Run n particles from :math:`N(\alpha_0,\Sigma_0)` with :func:`~tokendynamics.particles.simulate` and compare
    them with the ODEs.

    Why 11 parameters: the Gaussian state and layer, the particle sample (n, seed) and the integrators' steps and
    tolerances on both sides of the comparison.

    The ODEs (:func:`~tokendynamics.gaussian.solve_gaussian`, accurate) are solved from
    :math:`(\alpha_0,\Sigma_0)` and from the sample's moments (which removes the sampling error of the
    initial condition); at every stored time the particle cloud is summarised by its fitted Gaussian
    and compared with both by :func:`~tokendynamics.transport.bures_wasserstein`. What remains from the
    sample's moments is the effect of the sample not being exactly Gaussian, which also decays with n.

    Parameters
    ----------
    layer : Attention
        A constant Gaussian-preserving layer (not causal): it moves the particles and defines the ODEs.
    mean0, cov0 : arrays (d,), (d, d)
        The Gaussian the tokens are drawn from.
    n : int
        Number of tokens sampled.
    T, dt : float
        Final time and step of the particle integrator (for ``"adaptive"``, the spacing of its outputs).
    seed : int, Generator or None
        Seed of the sample (an integer seed is also recorded in the particle trajectory).
    method : {"rk4", "euler", "adaptive"}
        Particle integrator.
    save_every : int
        Keep every k-th step of a fixed-step method: the times where particles and ODEs are compared.
    rtol, atol : float
        Tolerances of the two ODE solves.

    Returns
    -------
    ParticleComparison

    Raises
    ------
    BlowUpError
        If the particles or either ODE solution blow up before ``T``.
    """
    X0 = sample_gaussian(n, mean0, cov0, rng=seed)
    traj = simulate(
        X0, layer, T, dt=dt, method=method, save_every=save_every, seed=seed if isinstance(seed, int) else None
    )
    pm, pc = empirical_moments(traj.X)
    pc = 0.5 * (pc + np.swapaxes(pc, -1, -2))
    span, ode_kw = (traj.t[0], traj.t[-1]), dict(t_eval=traj.t, rtol=rtol, atol=atol, on_blowup="raise")
    ode = solve_gaussian(pm[0], pc[0], layer, span, **ode_kw)
    exact = solve_gaussian(mean0, cov0, layer, span, **ode_kw)

    def w2(o):
        return np.array([bures_wasserstein(pm[k], pc[k], o.mean[k], o.cov[k]) for k in range(len(traj.t))])

    return ParticleComparison(
        t=traj.t,
        w2=w2(ode),
        w2_exact=w2(exact),
        mean_error=np.linalg.norm(pm - ode.mean, axis=1),
        cov_error=np.linalg.norm(pc - ode.cov, ord=2, axis=(1, 2)),
        particle_mean=pm,
        particle_cov=pc,
        ode=ode,
        ode_exact=exact,
        particles=traj,
        n=traj.X.shape[1],
    )


# ---------------------------------------------------------------------------------------------
# the clustering condition of paper 1's summary: a random search in both readings of A
# ---------------------------------------------------------------------------------------------

#: The two readings of the matrix A in the condition "V A + A^T V^T negative definite".
CONDITION_READINGS = ("book", "transposed")
#: The value-matrix families of :func:`clustering_condition_search`.
SEARCH_VALUES = ("symmetric", "positive", "general")


def condition_matrix(A, V, reading: str = "book") -> np.ndarray:
    r"""The symmetric matrix of the clustering condition in one reading (batched over leading axes).

    Paper 1's summary states clustering when :math:`VA+A^\top V^\top\preceq0`. In the book's convention
    (score :math:`\langle x,Ay\rangle`) that is ``"book"``: :math:`VA+A^\top V^\top`; with paper 1's own
    matrix :math:`A_1=A^\top` substituted, ``"transposed"``: :math:`VA^\top+AV^\top`. The two agree when
    :math:`V=vI` or :math:`A` is symmetric.

    Parameters
    ----------
    A, V : arrays (..., d, d)
        Score and value matrices.
    reading : {"book", "transposed"}
        The reading of :math:`A`.

    Returns
    -------
    array (..., d, d)
        The symmetric matrix whose negative definiteness is the condition.
    """
    A, V = np.asarray(A, dtype=float), np.asarray(V, dtype=float)
    P = V @ (A if validate_choice(reading, "reading", CONDITION_READINGS) == "book" else np.swapaxes(A, -1, -2))
    return P + np.swapaxes(P, -1, -2)


@dataclass(frozen=True, eq=False)
class ConditionSearch:
    r"""Result of :func:`clustering_condition_search`.

    Attributes
    ----------
    A, V, cov0 : arrays (N, d, d)
        The integrated draws: score matrix, value matrix, initial covariance.
    lam : dict
        Reading -> array (N,): the largest eigenvalue of :func:`condition_matrix` (negative where the
        condition holds).
    lam_sym : array (N,)
        Largest eigenvalue of :math:`A+A^\top`.
    drawn_for : dict
        Reading -> boolean mask (N,) of the draws counted for that reading (a draw can count for both).
    blew_up : array (N,) of bool
        Which draws blew up by ``T``.
    blowup_time, pole_time : arrays (N,)
        From :func:`~tokendynamics.gaussian.solve_covariance_batch` (``nan`` without a blow-up).
    candidates : int
        Number of candidate draws made (most satisfy neither reading and are not integrated).
    value, start : str
        The value-matrix family and the initial covariances (``"identity"`` or ``"random"``).
    T : float
        Horizon of the integrations.
    """

    A: np.ndarray
    V: np.ndarray
    cov0: np.ndarray
    lam: dict
    lam_sym: np.ndarray
    drawn_for: dict
    blew_up: np.ndarray
    blowup_time: np.ndarray
    pole_time: np.ndarray
    candidates: int
    value: str
    start: str
    T: float

    def counts(self) -> dict:
        """Reading -> ``(draws, blow-ups)``: how many draws satisfy the condition, and how many of them blow up.

        Returns
        -------
        dict
            For each reading, a pair of integers.
        """
        return {r: (int(m.sum()), int((m & self.blew_up).sum())) for r, m in self.drawn_for.items()}

    def counterexamples(self, reading: str) -> np.ndarray:
        """Indices of the draws that satisfy the condition in ``reading`` and blow up, earliest blow-up first.

        Parameters
        ----------
        reading : str
            A key of ``drawn_for``.

        Returns
        -------
        array of int
            Indices into ``A``, ``V``, ``cov0``.
        """
        idx = np.flatnonzero(self.drawn_for[reading] & self.blew_up)
        return idx[np.argsort(self.blowup_time[idx])]


def clustering_condition_search(
    draws: int,
    *,
    d: int = 2,
    value="symmetric",
    start="identity",
    T=200.0,
    seed=0,
    blowup_trace=1e8,
    rtol=1e-9,
    atol=1e-12,
) -> ConditionSearch:
    r"""A seeded random search for softmax covariances that blow up although the clustering condition holds.

    Candidates come from one generator (``numpy.random.default_rng(seed)``): :math:`A` with i.i.d.
    :math:`N(0,1)` entries; :math:`V=BB^\top+0.1I` with :math:`B` Gaussian (``"symmetric"``), :math:`V=B`
    kept only if :math:`V+V^\top\succ0` (``"positive"``), or :math:`V=B` (``"general"``); :math:`\Sigma_0=I`
    (``start="identity"``) or :math:`LL^\top/d` with :math:`L` Gaussian (``"random"``). A candidate counts
    for a reading of :func:`condition_matrix` when that matrix is negative definite, until ``draws``
    candidates count for each reading; the kept draws are integrated on :math:`[0,T]` by
    :func:`~tokendynamics.gaussian.solve_covariance_batch` (softmax, blow-up when the trace reaches
    ``blowup_trace``).

    Parameters
    ----------
    draws : int
        Draws per reading that satisfy its condition.
    d : int
        Dimension.
    value : {"symmetric", "positive", "general"}
        Family of the value matrix.
    start : {"identity", "random"}
        Initial covariance.
    T : float
        Horizon (a draw that has not blown up by ``T`` counts as no blow-up).
    seed : int or Generator
        Seed of the generator of every candidate.
    blowup_trace, rtol, atol : float
        Passed to the solver.

    Returns
    -------
    ConditionSearch
    """
    validate_choice(value, "value", SEARCH_VALUES)
    validate_choice(start, "start", ("identity", "random"))
    draws = validate_count(draws, "draws")
    rng = np.random.default_rng(seed)
    kept: list = []
    flags: dict[str, list] = {r: [] for r in CONDITION_READINGS}
    have = dict.fromkeys(CONDITION_READINGS, 0)
    candidates = 0
    while min(have.values()) < draws:
        candidates += 1
        if candidates > 10_000 * draws:
            raise RuntimeError(f"fewer than {draws} of {candidates - 1} candidates satisfy the condition: {have}")
        A, B = rng.standard_normal((d, d)), rng.standard_normal((d, d))
        V = B @ B.T + 0.1 * np.eye(d) if value == "symmetric" else B
        if value == "positive" and np.linalg.eigvalsh(B + B.T)[0] <= 0:
            continue
        L = None if start == "identity" else rng.standard_normal((d, d))
        S = np.eye(d) if L is None else L @ L.T / d
        take = {r: have[r] < draws and np.linalg.eigvalsh(condition_matrix(A, V, r))[-1] < 0 for r in have}
        if any(take.values()):
            for r in CONDITION_READINGS:
                flags[r].append(take[r])
                have[r] += int(take[r])
            kept.append((A, V, S))
    A, V, S = (np.array(M) for M in zip(*kept))
    layers = Attention("softmax", A=A, V=V, beta=np.ones(len(A)))
    runs = solve_covariance_batch(S, layers, T, rtol=rtol, atol=atol, blowup_trace=blowup_trace)
    return ConditionSearch(
        A=A,
        V=V,
        cov0=S,
        lam={r: np.linalg.eigvalsh(condition_matrix(A, V, r))[:, -1] for r in CONDITION_READINGS},
        lam_sym=np.linalg.eigvalsh(A + np.swapaxes(A, -1, -2))[:, -1],
        drawn_for={r: np.array(f, dtype=bool) for r, f in flags.items()},
        blew_up=runs.blew_up,
        blowup_time=runs.blowup_time,
        pole_time=runs.pole_time,
        candidates=candidates,
        value=value,
        start=start,
        T=float(T),
    )


# ---------------------------------------------------------------------------------------------
# the cone of 2 x 2 covariances (the figures of paper 1's Gaussian experiments)
# ---------------------------------------------------------------------------------------------


def cone_coordinates(cov) -> np.ndarray:
    r"""Coordinates :math:`(u,w,v)=(a-b,\,2c,\,a+b)` of :math:`\Sigma=\begin{pmatrix}a&c\\c&b\end{pmatrix}`.

    :math:`\Sigma\succeq0\iff v\ge\sqrt{u^2+w^2}`: the PSD cone is a circular cone whose surface is the
    set of rank-one matrices.

    Parameters
    ----------
    cov : array (2, 2) or (..., 2, 2)
        A 2 x 2 matrix or a stack; the off-diagonal entries are averaged (not checked PSD).

    Returns
    -------
    array (..., 3)
        :math:`(u, w, v)` per matrix; :math:`v` is the trace.
    """
    S = validate_finite_array(cov, "cov", min_ndim=2)
    if S.shape[-2:] != (2, 2):
        raise ValueError(f"cov must be a 2 x 2 matrix or a stack (..., 2, 2) for cone coordinates, got shape {S.shape}")
    a, b, c = S[..., 0, 0], S[..., 1, 1], 0.5 * (S[..., 0, 1] + S[..., 1, 0])
    return np.stack([a - b, 2 * c, a + b], axis=-1)


def disc_point(cov) -> np.ndarray:
    r"""Point :math:`(a-b,\,2c)/(a+b)` of :math:`\Sigma/\operatorname{tr}\Sigma` in the unit disc (the circle:
    rank one; the centre: :math:`I/2`).

    Parameters
    ----------
    cov : array (2, 2) or (..., 2, 2)
        Covariances of positive trace.

    Returns
    -------
    array (..., 2)
        :math:`(u/v,\,w/v)` of :func:`cone_coordinates`.
    """
    uwv = cone_coordinates(cov)
    if np.any(uwv[..., 2] <= 0):
        raise ValueError("cov must have a positive trace for the disc point")
    return uwv[..., :2] / uwv[..., 2:]


def cov_from_cone(uwv) -> np.ndarray:
    r"""Inverse of :func:`cone_coordinates`: :math:`(u,w,v)\mapsto\frac12\begin{pmatrix}v+u&w\\w&v-u\end{pmatrix}`.

    Parameters
    ----------
    uwv : array (3,) or (..., 3)
        Cone coordinates.

    Returns
    -------
    array (..., 2, 2)
        The symmetric matrices (PSD exactly when :math:`v\ge\sqrt{u^2+w^2}`).
    """
    uwv = validate_finite_array(uwv, "uwv", min_ndim=1)
    if uwv.shape[-1] != 3:
        raise ValueError(f"uwv must hold cone coordinates (..., 3), got shape {uwv.shape}")
    u, w, v = uwv[..., 0], uwv[..., 1], uwv[..., 2]
    return 0.5 * np.stack([np.stack([v + u, w], -1), np.stack([w, v - u], -1)], -2)


def cone_grid(n_u: int, n_w: int, limits=(-0.5, 0.5, -0.5, 0.5)) -> np.ndarray:
    r"""Trace-one initial covariances on a grid of the disc (the official ``init_grid``), shape (m, 2, 2).

    :math:`u\in\mathrm{linspace}(l_0,l_1,n_u)` (outer loop), :math:`w\in\mathrm{linspace}(l_2,l_3,n_w)`
    (inner loop), kept if :math:`u^2+w^2<1`, :math:`\Sigma_0=\frac12\begin{pmatrix}1+u&w\\w&1-u\end{pmatrix}`.
    Counts: 10 x 10 on :math:`[-0.5,0.5]^2` gives 100, 20 x 20 on :math:`[-1,1]^2` 276, 30 x 30 648,
    40 x 40 1184.

    Parameters
    ----------
    n_u, n_w : int
        Numbers of grid values of :math:`u` and of :math:`w`.
    limits : (float, float, float, float)
        ``(u_min, u_max, w_min, w_max)``.

    Returns
    -------
    array (m, 2, 2)
        The initial covariances inside the open disc, in the loop order above.
    """
    n_u, n_w = validate_count(n_u, "n_u"), validate_count(n_w, "n_w")
    lim = validate_finite_array(limits, "limits", ndim=1)
    if lim.shape != (4,) or not (lim[0] <= lim[1] and lim[2] <= lim[3]):
        raise ValueError(f"limits must be (u_min, u_max, w_min, w_max) with min <= max, got {limits!r}")
    uu, ww = (
        g.ravel()
        for g in np.meshgrid(np.linspace(lim[0], lim[1], n_u), np.linspace(lim[2], lim[3], n_w), indexing="ij")
    )
    inside = 1.0 - uu**2 > ww**2
    return cov_from_cone(np.stack([uu[inside], ww[inside], np.ones(inside.sum())], axis=-1))
