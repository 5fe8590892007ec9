r"""The Gaussian chapter's studies: particles against the ODEs, the clustering-condition search, the cone picture.

For ``chapters/02_gaussian_preservation.md`` (paper 1, Castin et al., arXiv:2501.18322, Gaussian
initial data), on the mathematics of :mod:`tokendynamics.gaussian`:

* :func:`compare_with_particles` — n particles sampled from :math:`N(\alpha_0,\Sigma_0)` against the
  mean/covariance ODEs, by Bures–Wasserstein distances;
* :func:`covariance_outcomes` — blow-up, clustering or neither for a batch of softmax covariances, by a
  pole test on the trace-normalised flow (not a trace threshold);
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
from ...errors import NonFiniteError
from ...gaussian import GaussianTrajectory, empirical_moments, solve_gaussian
from ...odes import dormand_prince_batch
from ...particles import Trajectory, sample_gaussian, simulate
from ...transport import bures_wasserstein
from ...validation import validate_choice, validate_count, validate_finite_array, validate_positive

__all__ = [
    "ParticleComparison",
    "compare_with_particles",
    "CONDITION_READINGS",
    "SEARCH_VALUES",
    "condition_matrix",
    "ConditionSearch",
    "clustering_condition_search",
    "OUTCOMES",
    "CovarianceOutcomes",
    "covariance_outcomes",
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
# the outcome of a softmax covariance: a pole test on the trace-normalised flow
# ---------------------------------------------------------------------------------------------

#: The outcomes of :func:`covariance_outcomes`.
OUTCOMES = ("blowup", "clustering", "other")


@dataclass(frozen=True, eq=False)
class CovarianceOutcomes:
    r"""Result of :func:`covariance_outcomes`: what B softmax covariances do, decided on their normalised flow.

    Attributes
    ----------
    outcome : array (B,) of str
        ``"blowup"`` (a pole before ``T``), ``"clustering"`` (the covariance tends to a singular matrix: onto a
        subspace, or to zero) or ``"other"`` (neither is established by the end of the run).
    blowup_time : array (B,)
        The located pole :math:`T^*` (``nan`` unless ``outcome == "blowup"``).
    growth_rate : array (B,)
        :math:`\bar q`, the mean of :math:`q(N)=\frac{d}{ds}\log\operatorname{tr}\Sigma` over the last quarter
        of the run in the normalised time :math:`s`: positive at a pole, zero on a line of equilibria, negative
        when the covariance shrinks to zero.
    rank_ratio : array (B,)
        :math:`\lambda_{\min}/\lambda_{\max}` of :math:`N=\Sigma/\operatorname{tr}\Sigma` at the end.
    log10_trace : array (B,)
        :math:`\log_{10}\operatorname{tr}\Sigma` at the end (it can be huge without a blow-up).
    t_end, s_end : arrays (B,)
        Time and normalised time at which each run ended (``t_end = T`` unless ``s_max`` came first).
    steps : array (B,) of int
        Accepted steps of the integrator per member.
    T, s_max : float
        The horizons.
    """

    outcome: np.ndarray
    blowup_time: np.ndarray
    growth_rate: np.ndarray
    rank_ratio: np.ndarray
    log10_trace: np.ndarray
    t_end: np.ndarray
    s_end: np.ndarray
    steps: np.ndarray
    T: float
    s_max: float

    def __len__(self) -> int:
        return len(self.outcome)


def covariance_outcomes(
    cov0,
    layers,
    T: float,
    *,
    s_max: float = 200.0,
    rate_tol: float = 1e-3,
    settle_tol: float = 0.1,
    rank_tol: float = 1e-2,
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> CovarianceOutcomes:
    r"""Blow-up, clustering or neither, for B softmax covariance equations, by a pole test that is no trace threshold.

    The softmax covariance equation :math:`\dot\Sigma=M(\Sigma)\Sigma+\Sigma M(\Sigma)^\top`,
    :math:`M(\Sigma)=\sum_hV_h\Sigma C_h` (:math:`C_h=\beta A_h^\top`, the kind's ``quadratic_covariance``
    factors), is homogeneous of degree two. With :math:`r=\operatorname{tr}\Sigma`, :math:`N=\Sigma/r` and the
    normalised time :math:`ds=r\,dt`, it splits into a flow on the compact set of trace-one covariances and a
    scalar equation (derived for the book's Gaussian chapter, [D]):

    .. math::
       N=\Psi N_0\Psi^\top,\quad \frac{d\Psi}{ds}=\big(M(N)-\tfrac q2 I\big)\Psi,\quad
       \frac{d\log r}{ds}=q(N)=2\operatorname{tr}\big(M(N)N\big),\quad \frac{dt}{ds}=\frac1r ,

    all of whose rates are of order one, even where :math:`\Sigma` is huge or collapses onto a line (where the
    equation in :math:`t` is stiff). A pole is :math:`N` settling where :math:`q>0`: then :math:`\log r` grows
    linearly in :math:`s`, :math:`t(s)` converges, and its limit is the blow-up time
    :math:`T^*=t(s)+1/(r\bar q)` (the tail of :math:`\int ds/r`). Where :math:`N` settles on a rank-one
    equilibrium :math:`uu^\top`, :math:`u^\top Au=0`, :math:`q\to0` and :math:`r` converges, however large it is.
    Each run goes until :math:`t=T` or :math:`s=` ``s_max``; :math:`\bar q` and :math:`\bar q'` are the means of
    :math:`q` over the last and the third quarter of its :math:`s`-range. Outcome: ``"blowup"`` if
    :math:`\bar q>` ``rate_tol``, :math:`q` has settled (:math:`|\bar q-\bar q'|\le` ``settle_tol``
    :math:`\bar q`: a self-similar profile, not a transient) and :math:`T^*\le T`; otherwise ``"clustering"`` if
    the limit is singular — :math:`\lambda_{\min}/\lambda_{\max}(N)<` ``rank_tol`` (onto a subspace) or
    :math:`\bar q<-` ``rate_tol`` (:math:`\Sigma\to0`); otherwise ``"other"``. Integrated by
    :func:`~tokendynamics.odes.dormand_prince_batch`, all members at once.

    Parameters
    ----------
    cov0 : array (d, d) or (B, d, d)
        Initial covariances, positive definite (one for all members, or one each).
    layers : Attention (a batch of layers) or sequence of Attention
        Softmax layers (a kind with the ``quadratic_covariance`` capability), one per member, any number of heads.
    T : float
        Horizon in depth: a pole after ``T`` is not a blow-up by ``T``.
    s_max : float
        Horizon in the normalised time :math:`s`.
    rate_tol : float
        :math:`|\bar q|` below which the trace is taken as settled.
    settle_tol : float
        Relative change of :math:`\bar q` between the two quarters below which :math:`q` has settled.
    rank_tol : float
        :math:`\lambda_{\min}/\lambda_{\max}` of :math:`N` below which the limit is singular.
    rtol, atol : float
        Tolerances of the integrator (on :math:`\Psi`, :math:`\log r`, :math:`t`).

    Returns
    -------
    CovarianceOutcomes

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*, arXiv 2501.18322
    (the Gaussian ODEs, clustering and blow-up); the book's chapter "Gaussian tokens: clustering and blow-up",
    section "Which condition clusters? A random search".
    """
    stack = layers if isinstance(layers, Attention) and layers.batch_size is not None else Attention.stack(layers)
    stack.kind.require("quadratic_covariance", "the normalised covariance flow (it needs a quadratic equation)")
    B, d = len(stack), stack.d
    T = validate_positive(T, "T")
    s_max = validate_positive(s_max, "s_max")
    rate_tol = validate_positive(rate_tol, "rate_tol")
    rank_tol = validate_positive(rank_tol, "rank_tol")
    settle_tol = validate_positive(settle_tol, "settle_tol")
    C0 = np.array(validate_finite_array(cov0, "cov0", min_ndim=2), dtype=float)
    if C0.shape == (d, d):
        C0 = np.broadcast_to(C0, (B, d, d)).copy()
    if C0.shape != (B, d, d):
        raise ValueError(f"cov0 must be ({d}, {d}) or ({B}, {d}, {d}) for {B} layers of dimension {d}, got {C0.shape}")
    C0 = 0.5 * (C0 + np.swapaxes(C0, 1, 2))
    if np.any(np.linalg.eigvalsh(C0)[:, 0] <= 0):
        raise ValueError("cov0 must be positive definite (the outcome test starts from full rank)")
    r0 = np.trace(C0, axis1=1, axis2=2)
    N0 = C0 / r0[:, None, None]
    k = d * d

    factors = stack.kind.require("quadratic_covariance", "the normalised covariance flow")
    heads = [stack.head(h) for h in range(stack.n_heads)]
    Vs = np.stack([np.broadcast_to(hd.V, (B, d, d)) for hd in heads], axis=1)  # (B, H, d, d)
    Cs = np.stack([np.broadcast_to(factors(hd)[1], (B, d, d)) for hd in heads], axis=1)

    def parts(Y, idx):
        Psi = Y[:, :k].reshape(-1, d, d)
        N = Psi @ N0[idx] @ np.swapaxes(Psi, 1, 2)
        M = (Vs[idx] @ N[:, None] @ Cs[idx]).sum(axis=1)  # sum_h V_h N C_h
        q = 2.0 * np.einsum("bij,bji->b", M, N)
        return Psi, N, M, q

    def f(Y, idx):
        Psi, _, M, q = parts(Y, idx)
        dPsi = M @ Psi - 0.5 * q[:, None, None] * Psi
        return np.concatenate([dPsi.reshape(-1, k), q[:, None], np.exp(-Y[:, k : k + 1])], axis=1)

    Y0 = np.concatenate([np.broadcast_to(np.eye(d).ravel(), (B, k)), np.log(r0)[:, None], np.zeros((B, 1))], axis=1)
    prev = Y0.copy()
    s_prev = np.zeros(B)
    at_T = np.full((B, k + 2), np.nan)
    s_at_T = np.full(B, np.nan)

    def on_step(acc, s_old, s_new, Y_new):
        """Stop a run at t = T, keeping the state interpolated linearly to t = T within the step."""
        stop = Y_new[:, -1] >= T
        if np.any(stop):
            a = acc[stop]
            frac = ((T - prev[a, -1]) / (Y_new[stop, -1] - prev[a, -1]))[:, None]
            at_T[a] = prev[a] + frac * (Y_new[stop] - prev[a])
            s_at_T[a] = s_old[stop] + frac[:, 0] * (s_new[stop] - s_old[stop])
        prev[acc], s_prev[acc] = Y_new, s_new
        return stop

    grid = np.linspace(0.0, s_max, 401)
    run = dormand_prince_batch(f, Y0, s_max, rtol=rtol, atol=atol, t_eval=grid, max_steps=100_000, on_step=on_step)
    if np.any(run.status == "stiff"):
        bad = np.flatnonzero(run.status == "stiff")
        raise NonFiniteError(f"the normalised covariance flow stalled for members {bad.tolist()} (stiff or singular)")
    hit = np.isfinite(s_at_T)
    Y_end = np.where(hit[:, None], at_T, run.y_stop)
    s_end = np.where(hit, s_at_T, run.time)
    # q averaged over the third and the last quarter of each run's s-range, from the stored log trace
    log_r = run.y[:, :, k]  # (m, B), nan after a run stopped
    ell = np.empty((B, 3))
    for b in range(B):
        keep = np.isfinite(log_r[:, b]) & (grid < s_end[b])
        ss, ll = np.append(grid[keep], s_end[b]), np.append(log_r[keep, b], Y_end[b, k])
        ell[b] = np.interp(s_end[b] * np.array([0.5, 0.75, 1.0]), ss, ll)
    quarter = 0.25 * np.where(s_end > 0, s_end, np.nan)
    growth, earlier = (ell[:, 2] - ell[:, 1]) / quarter, (ell[:, 1] - ell[:, 0]) / quarter
    _, N_end, _, _ = parts(Y_end, np.arange(B))
    lam = np.linalg.eigvalsh(0.5 * (N_end + np.swapaxes(N_end, 1, 2)))
    rank_ratio = np.clip(lam[:, 0], 0.0, None) / lam[:, -1]
    t_end = Y_end[:, -1]
    with np.errstate(over="ignore"):
        tail = np.exp(-Y_end[:, k]) / np.where(growth > 0, growth, np.nan)
    t_star = t_end + tail
    settled = np.abs(growth - earlier) <= settle_tol * np.abs(growth)
    blow = (growth > rate_tol) & settled & (t_star <= T)
    clus = ~blow & ((rank_ratio < rank_tol) | (growth < -rate_tol))
    outcome = np.where(blow, "blowup", np.where(clus, "clustering", "other"))
    return CovarianceOutcomes(
        outcome=outcome,
        blowup_time=np.where(blow, t_star, np.nan),
        growth_rate=growth,
        rank_ratio=rank_ratio,
        log10_trace=Y_end[:, k] / np.log(10.0),
        t_end=t_end,
        s_end=s_end,
        steps=np.asarray(run.reason, dtype=int),
        T=float(T),
        s_max=float(s_max),
    )


# ---------------------------------------------------------------------------------------------
# the clustering condition of paper 1's summary: a random search in both readings of A
# ---------------------------------------------------------------------------------------------

#: The two readings of the condition "V A + A^T V^T negative semi-definite" of paper 1's summary, in the book's
#: convention: ``"summary"`` with the summary's own A (the book's A^T), ``"literal"`` with the book's A.
CONDITION_READINGS = ("summary", "literal")
#: The value-matrix families of :func:`clustering_condition_search`.
SEARCH_VALUES = ("symmetric", "positive", "general")


def condition_matrix(A, V, reading: str = "summary") -> np.ndarray:
    r"""The symmetric matrix of the clustering condition of paper 1's summary in one reading (batched).

    The summary writes the softmax covariance equation as :math:`\dot\Sigma=V\Sigma A\Sigma+\Sigma A^\top\Sigma V^\top`
    and the condition as :math:`VA+A^\top V^\top\preceq0`. The book's equation (score :math:`\langle x,Ay\rangle`) is
    :math:`\dot\Sigma=V\Sigma A^\top\Sigma+\Sigma A\Sigma V^\top`, so the summary's :math:`A` is the book's
    :math:`A^\top` and, in the book's convention, its condition is ``"summary"``: :math:`VA^\top+AV^\top` (the
    value of :math:`\dot\Sigma` at :math:`\Sigma=I`). The same letters with the book's :math:`A`, ``"literal"``:
    :math:`VA+A^\top V^\top`, are a different condition (for symmetric :math:`V` it is the sign of
    :math:`\frac{d}{dt}\log\det\Sigma`). The two agree when :math:`V=vI` or :math:`A` is symmetric.

    Parameters
    ----------
    A, V : arrays (..., d, d)
        Score and value matrices (the book's convention).
    reading : {"summary", "literal"}
        The reading.

    Returns
    -------
    array (..., d, d)
        The symmetric matrix whose negative semi-definiteness is the condition.

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*, arXiv 2501.18322;
    the book's chapter "Gaussian tokens: clustering and blow-up", section "Which condition clusters? A random search".
    """
    A, V = np.asarray(A, dtype=float), np.asarray(V, dtype=float)
    reading = validate_choice(reading, "reading", CONDITION_READINGS)
    P = V @ (np.swapaxes(A, -1, -2) if reading == "summary" else A)
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
        condition holds strictly).
    drawn_for : dict
        Reading -> boolean mask (N,) of the draws counted for that reading (a draw can count for both).
    outcomes : CovarianceOutcomes
        What each draw does (:func:`covariance_outcomes`): ``outcome``, located ``blowup_time``, ...
    candidates : int
        Number of candidate draws made (those satisfying neither condition, or one whose quota is full,
        are not integrated).
    value, start : str
        The value-matrix family and the initial covariances (``"identity"`` or ``"random"``).
    T : float
        Horizon of the integrations.
    """

    A: np.ndarray
    V: np.ndarray
    cov0: np.ndarray
    lam: dict
    drawn_for: dict
    outcomes: CovarianceOutcomes
    candidates: int
    value: str
    start: str
    T: float

    @property
    def blew_up(self) -> np.ndarray:
        """Boolean mask of the draws whose covariance blows up by ``T`` (a located pole)."""
        return self.outcomes.outcome == "blowup"

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
        return idx[np.argsort(self.outcomes.blowup_time[idx])]


def clustering_condition_search(
    draws: int,
    *,
    d: int = 2,
    value="symmetric",
    start="random",
    T=100.0,
    seed=0,
    s_max=200.0,
) -> ConditionSearch:
    r"""A seeded random search for softmax covariances that blow up although the clustering condition holds.

    Candidates come from one generator (``numpy.random.default_rng(seed)``): :math:`A` with i.i.d.
    :math:`N(0,1)` entries; :math:`V=BB^\top+0.1I` with :math:`B` Gaussian (``"symmetric"``), :math:`V=B`
    kept only if :math:`V+V^\top\succ0` (``"positive"``), or :math:`V=B` (``"general"``); :math:`\Sigma_0=I`
    (``start="identity"``) or :math:`LL^\top/d+0.05I` with :math:`L` Gaussian (``"random"``). A candidate counts
    for a reading of :func:`condition_matrix` when that matrix is negative definite, until ``draws``
    candidates count for each reading; the kept draws (each satisfies at least one reading) are classified by
    :func:`covariance_outcomes` (softmax; blow-up is a located pole before ``T``, never a trace threshold).

    Parameters
    ----------
    draws : int
        Draws per reading that satisfy its condition.
    d : int
        Dimension.
    value : {"symmetric", "positive", "general"}
        Family of the value matrix.
    start : {"random", "identity"}
        Initial covariance.
    T : float
        Horizon (a draw without a pole before ``T`` does not blow up by ``T``).
    seed : int or Generator
        Seed of the generator of every candidate.
    s_max : float
        Horizon in the normalised time of :func:`covariance_outcomes`.

    Returns
    -------
    ConditionSearch

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*, arXiv 2501.18322
    (the summary's clustering condition); the book's chapter "Gaussian tokens: clustering and blow-up".
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
        S = np.eye(d) if L is None else L @ L.T / d + 0.05 * np.eye(d)
        take = {r: have[r] < draws and np.linalg.eigvalsh(condition_matrix(A, V, r))[-1] < 0 for r in have}
        if any(take.values()):
            for r in CONDITION_READINGS:
                flags[r].append(take[r])
                have[r] += int(take[r])
            kept.append((A, V, S))
    A, V, S = (np.array(M) for M in zip(*kept))
    layers = Attention("softmax", A=A, V=V, beta=np.ones(len(A)))
    return ConditionSearch(
        A=A,
        V=V,
        cov0=S,
        lam={r: np.linalg.eigvalsh(condition_matrix(A, V, r))[:, -1] for r in CONDITION_READINGS},
        drawn_for={r: np.array(f, dtype=bool) for r, f in flags.items()},
        outcomes=covariance_outcomes(S, layers, T, s_max=s_max),
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
