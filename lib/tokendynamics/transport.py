r"""Optimal-transport distances (always the distance, never its square) and the Sinkhorn solve of
Sinkhorn attention.

References
----------
Paper 1 (Castin et al., arXiv:2501.18322); G. Peyré, M. Cuturi, *Computational Optimal Transport* (2019);
POT (Flamary et al., JMLR 2021); book: ``chapters/01_well_posedness.md``, equation (eq-p1-stability).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment, linprog
from scipy.sparse import coo_matrix

from .validation import (
    MAX_ITERATIONS,
    real_array,
    require_memory,
    validate_choice,
    validate_count,
    validate_finite,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_positive,
    validate_rng,
    validate_tokens,
    validate_weights,
)

__all__ = [
    "wasserstein",
    "bures_wasserstein",
    "wasserstein_gaussian_1d",
    "conditional_wasserstein",
    "ConditionalProfile",
    "psd_sqrt",
    "circle_wasserstein1",
    "circle_bounded_lipschitz",
    "sinkhorn_potentials",
    "sinkhorn_spectrum",
]

EXACT_MAX_PAIRS = 4_000_000  # above this many pairs n * m the exact LP is slow (0.5 s at 1000 x 1000)
SINKHORN_MEMORY = 5  # past iterates mixed by the Anderson acceleration of sinkhorn_potentials
SINKHORN_PLAIN_ITERS = 50  # plain batched iterations before a system not yet converged is accelerated alone
SCALING_MAX_RANGE = 30.0  # kernels spanning at most e^30 run in the exponential (scaling) domain


def _uniform(w, n, name):
    """Masses of a measure with n atoms (uniform if None), the error prefixed by ``name``."""
    if w is None:
        return np.full(n, 1.0 / n)
    try:
        return validate_weights(w, n)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _cloud(X, name):
    """Atoms of a measure as an (n, d) array (a 1-D array: n points on the line)."""
    X = real_array(X, name)
    return validate_tokens(X[:, None] if X.ndim == 1 else X, name=name)


def _two_measures(X, Y, p, weights):
    """Clouds (n, d), (m, d) in the same dimension, their masses and the order p >= 1, checked."""
    X, Y = _cloud(X, "X"), _cloud(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y live in different dimensions ({X.shape[1]} and {Y.shape[1]})")
    p = validate_finite(p, "p")
    if not p >= 1:
        raise ValueError(f"p must be >= 1, got {p}")
    if weights is None:
        weights = (None, None)
    elif not isinstance(weights, (tuple, list)) or len(weights) != 2:
        raise ValueError(f"weights must be None or a pair (a, b) of masses, got {type(weights).__name__}")
    return X, Y, _uniform(weights[0], X.shape[0], "weights[0]"), _uniform(weights[1], Y.shape[0], "weights[1]"), p


def wasserstein(X, Y, p: float = 2, weights=None, *, method: str = "auto", n_projections: int = 200, rng=None):
    r"""Wasserstein distance :math:`W_p(\mu,\nu) = \big(\min_{\pi\in\Pi(a,b)}\sum_{ij}\pi_{ij}|x_i-y_j|^p\big)^{1/p}`
    of two weighted empirical measures :math:`\mu=\sum_i a_i\delta_{x_i}`, :math:`\nu=\sum_j b_j\delta_{y_j}`.

    Parameters
    ----------
    X, Y, p : arrays (n, d) and (m, d), float >= 1
        Atoms of the two measures (a 1-D array: points on the line), and the order.
    weights : None or (a, b)
        Masses of the two measures (uniform if None; either entry may be None).
    method : {"auto", "exact", "sliced"}
        ``exact`` (quantiles in d = 1, an assignment, or POT's network simplex), ``sliced`` (a different,
        smaller quantity), ``auto`` (exact up to ``EXACT_MAX_PAIRS`` pairs, sliced with a warning beyond).
    n_projections, rng
        Directions of the sliced estimate, and their seed.

    Returns
    -------
    float

    References
    ----------
    Peyré and Cuturi (2019); paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/01_well_posedness.md``.

    Examples
    --------
    >>> round(wasserstein([[0.0, 0.0]], [[3.0, 4.0]]), 12)
    5.0
    """
    import ot

    X, Y, a, b, p = _two_measures(X, Y, p, weights)
    method = validate_choice(method, "method", ("auto", "exact", "sliced"))
    n_projections = validate_count(n_projections, "n_projections")
    if method == "auto":
        method = "exact" if (X.shape[1] == 1 or X.shape[0] * Y.shape[0] <= EXACT_MAX_PAIRS) else "sliced"
        if method == "sliced":
            warnings.warn(
                f"wasserstein: {X.shape[0]} x {Y.shape[0]} points is too many for the exact LP; "
                "returning the sliced Wasserstein distance instead",
                stacklevel=2,
            )
    if method == "sliced":  # a different, smaller quantity: asked for, or announced by the warning above
        require_memory(n_projections * (X.shape[0] + Y.shape[0] + X.shape[1]), f"n_projections = {n_projections}")
        seed = int(validate_rng(rng).integers(2**31))
        return float(ot.sliced_wasserstein_distance(X, Y, a, b, n_projections=n_projections, p=p, seed=seed))
    if X.shape[1] == 1:
        return float(ot.wasserstein_1d(X[:, 0], Y[:, 0], a, b, p=p)) ** (1.0 / p)
    require_memory(3 * X.shape[0] * Y.shape[0], f"the exact distance between n = {X.shape[0]} and {Y.shape[0]} points")
    M = ot.dist(X, Y, metric="euclidean") ** p if p != 2 else ot.dist(X, Y)  # sqeuclidean for p = 2
    if X.shape[0] == Y.shape[0] and np.ptp(a) == 0 and np.ptp(b) == 0:  # an optimal plan is a permutation
        rows, cols = linear_sum_assignment(M)
        cost = float(M[rows, cols].mean())
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # POT warns (and returns garbage) when it stops early
            cost = float(ot.emd2(a, b, M, numItermax=max(1_000_000, 50 * M.size)))
    return max(cost, 0.0) ** (1.0 / p)


def psd_sqrt(S, *, pinv_rtol: float | None = None):
    r"""Symmetric square root :math:`S^{1/2}=U\Lambda^{1/2}U^\top` of a PSD matrix or stack (..., d, d),
    symmetrised, its eigenvalues clipped at 0 (check user input with ``validate_covariance`` first).

    Parameters
    ----------
    S : array (..., d, d)
    pinv_rtol : float, optional
        If given, also return :math:`(S^{1/2})^+`, eigenvalues below ``pinv_rtol`` times the largest counting as 0.

    Returns
    -------
    root, pinv : arrays (..., d, d)
        :math:`S^{1/2}`, and :math:`(S^{1/2})^+` (only with ``pinv_rtol``).

    References
    ----------
    R. Bhatia, *Positive Definite Matrices*, Princeton University Press (2007).
    """
    S = validate_finite_array(S, "S", min_ndim=2)
    if S.shape[-1] != S.shape[-2]:
        raise ValueError(f"S must be a square matrix or a stack (..., d, d), got shape {S.shape}")
    lam, U = np.linalg.eigh(0.5 * (S + np.swapaxes(S, -1, -2)))
    r = np.sqrt(np.clip(lam, 0.0, None))
    Ut = np.swapaxes(U, -1, -2)
    root = (U * r[..., None, :]) @ Ut
    if pinv_rtol is None:
        return root
    cut = validate_positive(pinv_rtol, "pinv_rtol", allow_zero=True) * np.max(r, axis=-1, keepdims=True)
    rinv = np.where(r > cut, 1.0 / np.where(r > cut, r, 1.0), 0.0)
    return root, (U * rinv[..., None, :]) @ Ut


def bures_wasserstein(m1, S1, m2, S2) -> float:
    r""":math:`W_2(N(m_1,\Sigma_1), N(m_2,\Sigma_2))` (the distance, not its square; singular covariances allowed).

    .. math:: W_2^2 = |m_1-m_2|^2 + \operatorname{tr}\Sigma_1+\operatorname{tr}\Sigma_2
              - 2\operatorname{tr}\big(\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2}\big)^{1/2}

    Parameters
    ----------
    m1, S1, m2, S2 : arrays (d,), (d, d)
        Means and covariances (symmetric positive semi-definite).

    Returns
    -------
    float

    References
    ----------
    R. Bhatia, T. Jain, Y. Lim, Expo. Math. 37 (2019); book: ``chapters/02_gaussian_preservation.md``.

    Examples
    --------
    >>> round(bures_wasserstein([0.0], [[1.0]], [0.0], [[4.0]]), 12)
    1.0
    """
    m1, S1 = validate_gaussian(m1, S1, name="S1", mean_name="m1")
    m2, S2 = validate_gaussian(m2, S2, m1.shape[0], what="the first Gaussian has d", name="S2", mean_name="m2")
    r1 = psd_sqrt(S1)
    cross = np.linalg.eigvalsh(r1 @ S2 @ r1)
    b2 = np.trace(S1) + np.trace(S2) - 2.0 * np.sum(np.sqrt(np.clip(cross, 0.0, None)))
    return float(np.sqrt(np.sum((m1 - m2) ** 2) + max(b2, 0.0)))


def wasserstein_gaussian_1d(x, mean: float, std: float, weights=None) -> float:
    r"""Exact :math:`W_2\big(\sum_i w_i\delta_{x_i},\,N(m,s^2)\big)` on the line (the distance).

    With the sorted points :math:`x_{(i)}`, cumulative masses :math:`c_i`, :math:`z_i=\Phi^{-1}(c_i)`
    (:math:`z_0=-\infty`, :math:`z_n=+\infty`), the quantile formula integrates in closed form:

    .. math:: W_2^2=\sum_i w_i(x_{(i)}-m)^2-2s\sum_i(x_{(i)}-m)\big(\varphi(z_{i-1})-\varphi(z_i)\big)+s^2 .

    Parameters
    ----------
    x, mean, std, weights
        Atoms (n,), :math:`m`, :math:`s \ge 0`, masses :math:`w_i` (n,) (uniform if omitted).

    Returns
    -------
    float

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/01_well_posedness.md``, (eq-p1-gauss1d).
    """
    from scipy.special import ndtri

    x = validate_finite_array(x, "x").reshape(-1)
    if x.size == 0:
        raise ValueError("x must be a non-empty array of finite numbers")
    mean = validate_finite(mean, "mean")
    std = validate_positive(std, "std", allow_zero=True)
    w = _uniform(weights, x.size, "weights")
    order = np.argsort(x, kind="stable")
    y, w = x[order] - mean, w[order]
    c = np.cumsum(w)
    c[-1] = 1.0
    z = ndtri(np.clip(c[:-1], 0.0, 1.0))
    phi = np.concatenate([[0.0], np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi), [0.0]])  # phi(+-inf) = 0
    w2 = float(np.sum(w * y * y) - 2.0 * std * np.sum(y * (phi[:-1] - phi[1:])) + std * std)
    return float(np.sqrt(max(w2, 0.0)))


@dataclass(frozen=True)
class ConditionalProfile:
    r"""Per-position detail of :func:`conditional_wasserstein`: the ``value``, each group's ``positions``
    (or bin centre), ``masses`` :math:`\lambda` and ``distances`` :math:`W_p`, the order ``p`` and ``reduce``."""

    value: float
    positions: np.ndarray
    masses: np.ndarray
    distances: np.ndarray
    p: float
    reduce: str


def conditional_wasserstein(
    X, Y, positions, p: float = 2, weights=None, *, positions_Y=None, bins=None, reduce="mean", return_profile=False
):
    r"""Conditional Wasserstein distance of :math:`\mu=\int\mu^s\,d\lambda(s)` and :math:`\nu=\int\nu^s\,d\lambda(s)`
    on :math:`[0,1]\times\mathbb R^d` (masked attention; which form the paper uses is not known [I]):

    .. math:: W_{p,\lambda}(\mu,\nu)=\Big(\int W_p(\mu^s,\nu^s)^p\,d\lambda(s)\Big)^{1/p}
              \quad(\texttt{reduce="mean"}),\qquad \sup_s W_p(\mu^s,\nu^s)\quad(\texttt{reduce="sup"}).

    Parameters
    ----------
    X, Y, p, weights
        As in :func:`wasserstein`.
    positions, positions_Y : arrays (n,) and (m,)
        Positions of the rows of X, and of Y (default: ``positions``).
    bins : None, int or array of edges
        None: one group per distinct position; else position bins (an estimate for continuous :math:`\lambda`).
    reduce, return_profile
        "mean" (integrate against :math:`\lambda`) or "sup"; return a :class:`ConditionalProfile`.

    Returns
    -------
    float or ConditionalProfile
        Measures whose group masses differ raise a ``ValueError``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), masked attention; book: ``chapters/01_well_posedness.md``,
    equation (eq-p1-conditional).
    """
    X, Y, a, b, p = _two_measures(X, Y, p, weights)
    reduce = validate_choice(reduce, "reduce", ("mean", "sup"))
    return_profile = validate_flag(return_profile, "return_profile")
    sx = validate_finite_array(positions, "positions")
    sy = sx if positions_Y is None else validate_finite_array(positions_Y, "positions_Y")
    if sx.shape != (X.shape[0],) or sy.shape != (Y.shape[0],):
        raise ValueError(
            f"positions must have one entry per token: got {sx.shape} for X {X.shape} and {sy.shape} for Y {Y.shape}"
        )
    allpos = np.concatenate([sx, sy])
    if bins is None:
        centres, inv = np.unique(allpos, return_inverse=True)
    else:
        if np.isscalar(bins):
            edges = np.linspace(allpos.min(), allpos.max(), validate_count(bins, "bins") + 1)
        else:
            edges = real_array(bins, "bins")
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise ValueError("bins must be a positive integer or increasing bin edges")
        if allpos.min() < edges[0] or allpos.max() > edges[-1]:
            raise ValueError("some positions fall outside the bin edges")
        inv = np.clip(np.searchsorted(edges, allpos, side="right") - 1, 0, edges.size - 2)
        centres = (edges[:-1] + edges[1:]) / 2
    gx, gy = inv[: X.shape[0]], inv[X.shape[0] :]
    G = centres.size
    mass_x, mass_y = np.bincount(gx, weights=a, minlength=G), np.bincount(gy, weights=b, minlength=G)
    if np.max(np.abs(mass_x - mass_y)) > 1e-9:
        g = int(np.argmax(np.abs(mass_x - mass_y)))
        raise ValueError(
            "the two measures have different position marginals: the group at position "
            f"{centres[g]:.4g} has mass {mass_x[g]:.6g} in the first and {mass_y[g]:.6g} in the second"
        )
    dist = np.zeros(G)
    single = (np.bincount(gx, minlength=G) == 1) & (np.bincount(gy, minlength=G) == 1)
    if np.any(single):  # one token in each measure: the distance of two Diracs
        ix, iy = np.full(G, -1), np.full(G, -1)
        ix[gx], iy[gy] = np.arange(X.shape[0]), np.arange(Y.shape[0])
        dist[single] = np.linalg.norm(X[ix[single]] - Y[iy[single]], axis=1)
    for g in map(int, np.flatnonzero(~single & (mass_x > 0))):
        mx, my = gx == g, gy == g
        dist[g] = wasserstein(X[mx], Y[my], p=p, weights=(a[mx] / mass_x[g], b[my] / mass_y[g]), method="exact")
    used = mass_x > 0
    value = float(np.sum(mass_x[used] * dist[used] ** p) ** (1.0 / p) if reduce == "mean" else np.max(dist[used]))
    if return_profile:
        return ConditionalProfile(value, centres[used], mass_x[used], dist[used], p, reduce)
    return value


def _circle_measures(x, y, x_weights, y_weights, period):
    """Merged, sorted atoms of mu - nu on [0, period): positions, signed masses, gaps to the next atom."""
    period = validate_positive(period, "period")
    pts = [validate_finite_array(z, name) for name, z in (("x", x), ("y", y))]
    for name, z in zip("xy", pts):
        if z.ndim != 1 or z.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D array of angles, got shape {z.shape}")
    pos = np.mod(np.concatenate(pts), period)
    mass = np.concatenate(
        [_uniform(x_weights, pts[0].size, "x_weights"), -_uniform(y_weights, pts[1].size, "y_weights")]
    )
    order = np.argsort(pos, kind="stable")
    pos, mass = pos[order], mass[order]
    return pos, mass, np.diff(pos, append=pos[0] + period)  # the last gap wraps around


def circle_wasserstein1(x, y, x_weights=None, y_weights=None, *, period: float = 2 * np.pi) -> float:
    r"""Exact :math:`W_1(\mu,\nu)=\min_{c}\int_0^{L}|F_\mu(s)-F_\nu(s)-c|\,ds` of two weighted empirical measures
    on a circle of length :math:`L` (arc length; :math:`F_\mu(s)=\mu([0,s))`, :math:`c` a weighted median).

    Parameters
    ----------
    x, y, x_weights, y_weights, period
        Positions of the atoms (n,), (m,) (read modulo ``period``), their masses (uniform if omitted), and the
        length of the circle (:math:`2\pi` for the double angles of paper 2).

    Returns
    -------
    float

    References
    ----------
    J. Rabin, J. Delon, Y. Gousseau, J. Math. Imaging Vis. 41 (2011); paper 2 (Li et al., 2026), structural
    stability; book: ``chapters/04_kuramoto_reduction.md``, equation (eq-dbl).

    >>> round(circle_wasserstein1([0.1], [2 * np.pi - 0.1]), 12)  # the short way round
    0.2
    """
    _, mass, gaps = _circle_measures(x, y, x_weights, y_weights, period)
    D = np.cumsum(mass)  # F_mu - F_nu just after each atom, constant up to the next one
    order = np.argsort(D, kind="stable")
    cum = np.cumsum(gaps[order])
    c = D[order][min(np.searchsorted(cum, 0.5 * cum[-1]), D.size - 1)]
    return float(np.sum(gaps * np.abs(D - c)))


def circle_bounded_lipschitz(x, y, x_weights=None, y_weights=None, *, period: float = 2 * np.pi) -> float:
    r"""Exact :math:`d_{BL}(\mu,\nu)=\sup\{\int f\,d(\mu-\nu):\|f\|_\infty\le1,\mathrm{Lip}(f)\le1\}` on a circle of
    length :math:`L`: a linear program in the values at the atoms, consecutive atoms constrained (HiGHS).
    :math:`\min(1,4/L)\,W_1\le d_{BL}\le W_1`.

    Parameters
    ----------
    x, y, x_weights, y_weights, period
        As in :func:`circle_wasserstein1`.

    Returns
    -------
    float

    References
    ----------
    R. M. Dudley, *Real Analysis and Probability*; book: ``chapters/04_kuramoto_reduction.md``, (eq-dbl).

    >>> round(circle_bounded_lipschitz([0.0], [3.0]), 12)  # two point masses: min(distance, 2)
    2.0
    """
    _, mass, gaps = _circle_measures(x, y, x_weights, y_weights, period)
    N = mass.size
    if N == 2 and gaps.min() == 0:
        return 0.0
    i = np.arange(N)
    j = (i + 1) % N
    rows = np.concatenate([i, i, N + i, N + i])
    cols = np.concatenate([j, i, i, j])
    vals = np.concatenate([np.ones(N), -np.ones(N), np.ones(N), -np.ones(N)])
    A_ub = coo_matrix((vals, (rows, cols)), shape=(2 * N, N)).tocsr()  # f_{i+1} - f_i <= gap, f_i - f_{i+1} <= gap
    res = linprog(-mass, A_ub=A_ub, b_ub=np.concatenate([gaps, gaps]), bounds=(-1.0, 1.0), method="highs")
    if res.status != 0:
        raise RuntimeError(f"the bounded-Lipschitz linear program failed: {res.message}")
    return float(max(-res.fun, 0.0))


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    """log-sum-exp along one axis (scipy's values, about 6 x faster on the small matrices of a Sinkhorn loop)."""
    m = a.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)


def sinkhorn_potentials(
    logK: np.ndarray,
    logw: np.ndarray,
    *,
    eps: float,
    max_iter: int,
    tol: float,
    g0: np.ndarray | None = None,
    memory: int = SINKHORN_MEMORY,
):
    r"""Sinkhorn for the entropic self-transport of :math:`\mu=\sum_j w_j\delta_{x_j}`, in potentials.

    Finds :math:`f, g` such that :math:`\pi_{ij} = w_i w_j \exp((f_i + g_j)/\varepsilon + \mathrm{logK}_{ij})`
    has both marginals :math:`w`, alternating
    :math:`f_i \leftarrow -\varepsilon\,\mathrm{LSE}_j(g_j/\varepsilon+\mathrm{logK}_{ij}+\log w_j)` and the
    same for :math:`g` (row update last, so the rows of :math:`\pi/w_i` sum to one); kernels spanning at most
    :math:`e^{30}` iterate in the exponential domain; a system not converged after 50 iterations goes on with
    Anderson acceleration, restarted from the best iterate when a step raises the error tenfold.

    Parameters
    ----------
    logK, logw : arrays (..., n, n) and (n,) or (..., n)
        The scores divided by :math:`\varepsilon`, and the logarithms of the masses.
    eps, max_iter, tol
        :math:`\varepsilon > 0`, the cap on the iterations, the tolerance on :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j`.
    g0, memory
        Warm start of the column potential (n,) or (..., n) (default zero); Anderson memory (0: plain Sinkhorn).

    Returns
    -------
    f, g, iterations, error
        Row and column potentials (..., n), the iterations used and the column-marginal error reached
        (per system for a batch).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); M. E. Sander et al., *Sinkformers*, AISTATS 2022; D. G.
    Anderson, J. ACM 12 (1965); book: ``chapters/03_gradient_flow.md``, equation (eq-gf-sinkhorn-energy).
    """
    eps, tol = validate_positive(eps, "eps"), validate_positive(tol, "tol")
    max_iter = validate_count(max_iter, "max_iter", maximum=MAX_ITERATIONS)
    memory = validate_count(memory, "memory", minimum=0)
    n, batch = logK.shape[-1], logK.shape[:-2]
    g_shape = np.shape(logw) if g0 is None else np.shape(g0)
    if logK.shape[-2:] != (n, n) or np.shape(logw)[-1:] != (n,) or g_shape[-1:] != (n,):
        raise ValueError(
            f"logK must be (..., n, n), logw and g0 (..., n): got {logK.shape}, {np.shape(logw)}, {g_shape}"
        )
    if np.isnan(logK).any():
        raise ValueError("logK contains NaN")
    m = math.prod(batch)
    K3 = logK.reshape(m, n, n)
    lw = np.broadcast_to(logw, batch + (n,)).reshape(m, n)
    g = np.zeros((m, n)) if g0 is None else np.array(np.broadcast_to(g0, batch + (n,)), dtype=float).reshape(m, n)
    f, err, its = np.zeros((m, n)), np.full(m, np.inf), np.zeros(m, dtype=int)
    with np.errstate(invalid="ignore"):
        spread = K3.max(axis=(1, 2)) - K3.min(axis=(1, 2))
    scaling = spread <= SCALING_MAX_RANGE  # False for non-finite kernels
    plain = max_iter if memory <= 0 else min(max_iter, SINKHORN_PLAIN_ITERS)
    for idx, solver in ((np.nonzero(scaling)[0], _sinkhorn_scaling), (np.nonzero(~scaling)[0], _sinkhorn_log)):
        if idx.size:
            f[idx], g[idx], its[idx], err[idx] = solver(K3[idx], lw[idx], g[idx], eps, plain, tol)
    if plain < max_iter:
        for b in np.nonzero(~(err < tol) & np.all(np.isfinite(g), axis=1))[0]:
            f[b], g[b], more, err[b] = _sinkhorn_anderson(K3[b], lw[b], g[b], eps, max_iter - plain, tol, memory)
            its[b] += more
    if not batch:
        return f[0], g[0], int(its[0]), float(err[0])
    return f.reshape(batch + (n,)), g.reshape(batch + (n,)), its.reshape(batch), err.reshape(batch)


def _active_set_loop(m: int, n: int, max_iter: int, tol: float, state: np.ndarray, step):
    """The loop of both Sinkhorn domains on m systems, each stopping at its own iteration: ``step(active, every)``
    returns f, errors and ``update(sel)``, the new ``state`` rows of ``active[sel]``. Returns f, iterations, errors."""
    f = np.zeros((m, n))
    err = np.full(m, np.inf)
    its = np.zeros(m, dtype=int)
    active = np.arange(m)
    for it in range(1, max_iter + 1):
        fa, ea, update = step(active, active.size == m)
        f[active], err[active], its[active] = fa, ea, it
        go_on = ~(ea < tol) if it < max_iter else np.zeros(active.size, bool)
        state[active[go_on]] = update(go_on)
        active = active[go_on]
        if active.size == 0:
            break
    return f, its, err


def _log_step(K, g, lw, eps):
    """One log-domain iteration on (..., n, n): f (rows then sum to one exactly), the column
    log-sums (the plain update of g is -eps times them) and the column-marginal error."""
    f = -eps * _lse(K + g[..., None, :] / eps + lw[..., None, :], axis=-1)
    lse_col = _lse(K + f[..., :, None] / eps + lw[..., :, None], axis=-2)
    return f, lse_col, np.max(np.abs(np.expm1(lse_col + g / eps)), axis=-1)


def _sinkhorn_log(K3, lw, g, eps, max_iter, tol):
    """Log-domain iterations on m systems (m, n, n); each stops at its own iteration."""

    def step(active, every):
        fa, lse_col, ea = _log_step(K3, g, lw, eps) if every else _log_step(K3[active], g[active], lw[active], eps)
        return fa, ea, lambda sel: -eps * lse_col[sel]

    f, its, err = _active_set_loop(*K3.shape[:2], max_iter, tol, g, step)
    return f, g, its, err


def _sinkhorn_scaling(K3, lw, g, eps, max_iter, tol):
    """The same iterates in the exponential domain: u = exp(f/eps + c), v = exp(g/eps), with the
    kernel exp(logK - c) in [e^-30, 1] (c the largest entry of each system)."""
    top = K3.max(axis=(1, 2))
    Kt = np.exp(K3 - top[:, None, None])
    w = np.exp(lw)
    v = np.exp(g / eps)

    def step(active, every):
        Ka, va, wa = (Kt, v, w) if every else (Kt[active], v[active], w[active])
        t = np.einsum("bij,bj->bi", Ka, va * wa)  # e^{-f_i/eps - c}
        col = np.einsum("bij,bi->bj", Ka, wa / t)  # e^{lse_col}
        ea = np.max(np.abs(col * va - 1.0), axis=-1)
        return -eps * (np.log(t) + top[active, None]), ea, lambda sel: 1.0 / col[sel]

    f, its, err = _active_set_loop(*K3.shape[:2], max_iter, tol, v, step)
    return f, eps * np.log(v), its, err


def _sinkhorn_anderson(logK, logw, g, eps, max_iter, tol, memory):
    """Anderson-accelerated log-domain iterations on one system (n, n), from the column potential g."""
    f, err, it = np.zeros_like(g), np.inf, 0
    best_err, best_G = np.inf, None
    hist: list[tuple[np.ndarray, np.ndarray]] = []  # the last values of G and of the residual G - g
    for it in range(1, max_iter + 1):
        f, lse_col, err = _log_step(logK, g, logw, eps)
        err = float(err)
        if err < tol or it == max_iter:
            break
        G = -eps * lse_col  # the plain Sinkhorn update of g
        if not err <= 10.0 * best_err:  # the extrapolation went astray (or overflowed): restart plainly
            hist, g = [], best_G
            continue
        if err < best_err:
            best_err, best_G = err, G
        hist = [*hist, (G, G - g)][-(memory + 1) :]
        g = G
        if len(hist) >= 2:
            Gs, Rs = (np.array(h) for h in zip(*hist))
            mixed = G - np.diff(Gs, axis=0).T @ np.linalg.lstsq(np.diff(Rs, axis=0).T, Rs[-1], rcond=None)[0]
            if np.all(np.isfinite(mixed)):
                g = mixed
    return f, g, it, err


def sinkhorn_spectrum(root, cov, B):
    r"""Spectrum :math:`(\sqrt{1+4h},W)` of :math:`H=\Sigma^{1/2}B^\top\Sigma B\Sigma^{1/2}=W\,\mathrm{diag}(h)W^\top`
    (batched): the entropic self-plan of :math:`N(\alpha,\Sigma)` for the kernel :math:`e^{\langle Bx,y\rangle}` has
    the cross-covariance :math:`C^\top=\Sigma B\Sigma^{1/2}W\operatorname{diag}(2/(1+\sqrt{1+4h}))W^\top\Sigma^{1/2}`.

    Parameters
    ----------
    root, cov, B : arrays (..., d, d)
        :math:`\Sigma^{1/2}` (not checked against :math:`\Sigma`), :math:`\Sigma` (PSD), and the kernel's
        matrix (a Sinkhorn head uses :math:`B=(\beta/\varepsilon)A^\top`).

    Returns
    -------
    sq, W : arrays (..., d) and (..., d, d)
        :math:`\sqrt{1+4h_i}` for the eigenvalues of :math:`H` in increasing order (negatives clipped to 0),
        and the orthonormal eigenvectors (columns).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Sinkhorn attention; book: ``chapters/02_gaussian_preservation.md``.
    """
    H = root @ np.swapaxes(B, -1, -2) @ cov @ B @ root
    lam, W = np.linalg.eigh(0.5 * (H + np.swapaxes(H, -1, -2)))
    return np.sqrt(1.0 + 4.0 * np.clip(lam, 0.0, None)), W
