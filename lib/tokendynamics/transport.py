r"""Optimal-transport distances, with one convention: always the distance, never its square.

* :func:`wasserstein` — :math:`W_p(\mu,\nu)` between weighted empirical measures: exact linear
  program (POT's ``emd2``, which returns :math:`W_p^p`) or the exact quantile formula in one
  dimension; for very large clouds a sliced estimate, used only when asked for or when
  ``method="auto"`` falls back to it, and then labelled.
* :func:`bures_wasserstein` — :math:`W_2` between Gaussians,
  :math:`W_2^2 = |m_1-m_2|^2 + \operatorname{tr}\Sigma_1 + \operatorname{tr}\Sigma_2
  - 2\operatorname{tr}(\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2})^{1/2}`.
* :func:`wasserstein_gaussian_1d` — exact :math:`W_2` between a one-dimensional weighted empirical
  measure and a Gaussian (quantile formula with Gaussian partial moments).
* :func:`conditional_wasserstein` — the conditional (per position) distance
  :math:`W_{p,\lambda}` of masked attention between measures on :math:`[0,1]\times\mathbb R^d` with
  the same position marginal.
* :func:`circle_wasserstein1` and :func:`circle_bounded_lipschitz` — :math:`W_1` (closed form
  through the distribution functions) and the bounded-Lipschitz distance (an exact linear program)
  between weighted empirical measures on a circle with its arc-length metric; on the circle of
  length :math:`2\pi`, :math:`\tfrac2\pi W_1\le d_{BL}\le W_1`.

References: paper 1 §3 (stability and mean-field limit in :math:`W_p`) and §5.2; Peyré–Cuturi,
*Computational Optimal Transport*; POT (Flamary et al. 2021); J. Rabin, J. Delon, Y. Gousseau,
*Transportation distances on the circle*, J. Math. Imaging Vis. 41 (2011) (:math:`W_1` on the circle);
paper 2 (Li et al. 2026), structural stability in the bounded-Lipschitz distance (this book, chapter 4).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from .validation import (
    real_array,
    validate_choice,
    validate_count,
    validate_finite,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_pair,
    validate_positive,
    validate_tokens,
    validate_weights,
)

__all__ = [
    "Distance",
    "wasserstein",
    "bures_wasserstein",
    "wasserstein_gaussian_1d",
    "conditional_wasserstein",
    "ConditionalProfile",
    "psd_sqrt",
    "circle_wasserstein1",
    "circle_bounded_lipschitz",
]

# Above this many pairs (n * m) the exact LP is slow (about 0.5 s at 1000 x 1000 here).
EXACT_MAX_PAIRS = 4_000_000


@dataclass(frozen=True)
class Distance:
    """A distance value and how it was obtained (``method`` is "exact", "quantile" or "sliced")."""

    value: float
    method: str
    p: float

    def __float__(self) -> float:
        return self.value


def _as_cloud(X, name):
    """Points of a measure as an (n, d) array (a 1-D array is n points on the line), checked by the core."""
    X = real_array(X, name)
    return validate_tokens(X[:, None] if X.ndim == 1 else X, name=name)


def _as_weights(w, n, name):
    """Masses of a measure with n atoms (uniform if None), checked by the core's validator."""
    if w is None:
        return np.full(n, 1.0 / n)
    try:
        return validate_weights(w, n)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _two_measures(X, Y, p, weights):
    """Validated clouds and masses of two weighted empirical measures in the same dimension."""
    X = _as_cloud(X, "X")
    Y = _as_cloud(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y live in different dimensions ({X.shape[1]} and {Y.shape[1]})")
    p = validate_finite(p, "p")
    if not p >= 1:
        raise ValueError(f"p must be >= 1, got {p}")
    a_in, b_in = (
        (None, None) if weights is None else validate_pair(weights, "weights", "None or a pair (a, b) of masses")
    )
    return X, Y, _as_weights(a_in, X.shape[0], "weights[0]"), _as_weights(b_in, Y.shape[0], "weights[1]")


def wasserstein(
    X,
    Y,
    p: float = 2,
    weights=None,
    *,
    method: str = "auto",
    n_projections: int = 200,
    rng=None,
    return_method: bool = False,
):
    r"""Wasserstein distance :math:`W_p(\mu,\nu)` between :math:`\mu=\sum_i a_i\delta_{x_i}` and :math:`\nu=\sum_j b_j\delta_{y_j}`.

    .. math:: W_p(\mu,\nu) = \Big(\min_{\pi\in\Pi(a,b)}\sum_{ij}\pi_{ij}|x_i-y_j|^p\Big)^{1/p}

    Parameters
    ----------
    X, Y : arrays (n, d) and (m, d)
    p : float >= 1
    weights : None or (a, b)
        Masses of the two measures (uniform if None; either entry may be None).
    method : {"auto", "exact", "sliced"}
        ``exact``: POT's network simplex (``ot.emd2`` returns :math:`W_p^p`; its warnings are
        errors), or the exact quantile formula when d = 1. ``sliced``: the sliced Wasserstein
        distance (a *different*, smaller quantity; Monte Carlo over ``n_projections``
        directions). ``auto``: exact when n * m <= ``EXACT_MAX_PAIRS`` or d = 1, sliced otherwise,
        with a warning.
    return_method : bool
        Return a :class:`Distance` (value and method) instead of a float.
    """
    import ot

    X, Y, a, b = _two_measures(X, Y, p, weights)
    method = validate_choice(method, "method", ("auto", "exact", "sliced"))
    n_projections = validate_count(n_projections, "n_projections")
    return_method = validate_flag(return_method, "return_method")
    p = float(p)
    d = X.shape[1]
    if method == "auto":
        method = "exact" if (d == 1 or X.shape[0] * Y.shape[0] <= EXACT_MAX_PAIRS) else "sliced"
        if method == "sliced":
            warnings.warn(
                f"wasserstein: {X.shape[0]} x {Y.shape[0]} points is too many for the exact LP; "
                "returning the sliced Wasserstein distance instead",
                stacklevel=2,
            )
    if method == "sliced":
        rng = np.random.default_rng(rng)
        value = float(
            ot.sliced_wasserstein_distance(X, Y, a, b, n_projections=n_projections, p=p, seed=int(rng.integers(2**31)))
        )
        used = "sliced"
    elif d == 1:
        value = float(ot.wasserstein_1d(X[:, 0], Y[:, 0], a, b, p=p)) ** (1.0 / p)
        used = "quantile"
    else:
        M = ot.dist(X, Y, metric="euclidean") ** p if p != 2 else ot.dist(X, Y)  # sqeuclidean for p = 2
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # POT warns (and returns garbage) when it stops early
            cost = float(ot.emd2(a, b, M, numItermax=max(1_000_000, 50 * X.shape[0] * Y.shape[0])))
        value = max(cost, 0.0) ** (1.0 / p)
        used = "exact"
    return Distance(value, used, p) if return_method else value


def psd_sqrt(S, *, pinv_rtol: float | None = None):
    r"""Symmetric square root :math:`S^{1/2}=U\Lambda^{1/2}U^\top` of a PSD matrix or of a stack (..., d, d).

    ``S`` is symmetrised and its eigenvalues are clipped at 0 (no validation: use
    :func:`~tokendynamics.validation.validate_covariance` first on user input). With ``pinv_rtol`` also returns the
    pseudo-inverse :math:`(S^{1/2})^+` computed from the same eigen-decomposition, in which the
    eigenvalues of :math:`S^{1/2}` below ``pinv_rtol`` times the largest count as zero.
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
    cut = pinv_rtol * np.max(r, axis=-1, keepdims=True)
    rinv = np.where(r > cut, 1.0 / np.where(r > cut, r, 1.0), 0.0)
    return root, (U * rinv[..., None, :]) @ Ut


def bures_wasserstein(m1, S1, m2, S2) -> float:
    r""":math:`W_2(N(m_1,\Sigma_1), N(m_2,\Sigma_2))` (the distance, not its square).

    .. math:: W_2^2 = |m_1-m_2|^2 + \operatorname{tr}\Sigma_1+\operatorname{tr}\Sigma_2
              - 2\operatorname{tr}\big(\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2}\big)^{1/2}

    Degenerate (singular) covariances are allowed. Raises ValueError for non-PSD input.
    """
    m1, S1 = validate_gaussian(m1, S1, name="S1", mean_name="m1")
    m2, S2 = validate_gaussian(m2, S2, m1.shape[0], what="the first Gaussian has d", name="S2", mean_name="m2")
    r1 = psd_sqrt(S1)
    cross = np.linalg.eigvalsh(r1 @ S2 @ r1)
    b2 = np.trace(S1) + np.trace(S2) - 2.0 * np.sum(np.sqrt(np.clip(cross, 0.0, None)))
    return float(np.sqrt(np.sum((m1 - m2) ** 2) + max(b2, 0.0)))


def wasserstein_gaussian_1d(x, mean: float, std: float, weights=None) -> float:
    r"""Exact :math:`W_2\big(\sum_i w_i\delta_{x_i},\,N(m,s^2)\big)` on the line (the distance, not its square).

    With the sorted points :math:`x_{(i)}`, cumulative masses :math:`c_i` and
    :math:`z_i=\Phi^{-1}(c_i)` (:math:`z_0=-\infty`, :math:`z_n=+\infty`), the quantile formula
    :math:`W_2^2=\int_0^1|F^{-1}(u)-m-s\Phi^{-1}(u)|^2du` integrates in closed form:

    .. math:: W_2^2=\sum_i w_i(x_{(i)}-m)^2-2s\sum_i(x_{(i)}-m)\big(\varphi(z_{i-1})-\varphi(z_i)\big)+s^2 .

    Used as the exact oracle of the mean-field limit in d = 1 (paper 1 §3.3, §4.3 item 8).
    """
    from scipy.special import ndtri

    x = real_array(x, "x").reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("x must be a non-empty array of finite numbers")
    mean = validate_finite(mean, "mean")
    std = validate_positive(std, "std", allow_zero=True)
    w = _as_weights(weights, x.size, "weights")
    order = np.argsort(x, kind="stable")
    y = x[order] - mean
    w = w[order]
    c = np.cumsum(w)
    c[-1] = 1.0
    z = ndtri(np.clip(c[:-1], 0.0, 1.0))
    phi = np.zeros(x.size + 1)  # phi(z_0) = phi(z_n) = 0
    inner = np.isfinite(z)
    phi[1:-1][inner] = np.exp(-0.5 * z[inner] ** 2) / np.sqrt(2 * np.pi)
    w2 = float(np.sum(w * y * y) - 2.0 * std * np.sum(y * (phi[:-1] - phi[1:])) + std * std)
    return float(np.sqrt(max(w2, 0.0)))


@dataclass(frozen=True)
class ConditionalProfile:
    """Per-position detail of :func:`conditional_wasserstein`.

    ``positions`` (group position or bin centre), ``masses`` (:math:`\\lambda` of each group),
    ``distances`` (:math:`W_p` of the two conditional measures of each group) and ``value``.
    """

    value: float
    positions: np.ndarray
    masses: np.ndarray
    distances: np.ndarray
    p: float
    reduce: str


def conditional_wasserstein(
    X,
    Y,
    positions,
    p: float = 2,
    weights=None,
    *,
    positions_Y=None,
    bins=None,
    reduce: str = "mean",
    return_profile: bool = False,
):
    r"""Conditional Wasserstein distance between two measures on :math:`[0,1]\times\mathbb R^d` with the same position marginal.

    Paper 1 §2.6 (masked attention). Disintegrating :math:`\mu=\int\mu^s\,d\lambda(s)` and
    :math:`\nu=\int\nu^s\,d\lambda(s)`,

    .. math:: W_{p,\lambda}(\mu,\nu)=\Big(\int W_p(\mu^s,\nu^s)^p\,d\lambda(s)\Big)^{1/p}
              \quad(\texttt{reduce="mean"}),\qquad \sup_s W_p(\mu^s,\nu^s)\quad(\texttt{reduce="sup"}),

    the first being :math:`W_p` restricted to couplings that never move the position coordinate.
    Which of the two the paper uses is not known [I]; both are offered.

    Parameters
    ----------
    X, Y : arrays (n, d), (m, d)
        Token coordinates of the two measures.
    positions : array (n,)
        Positions :math:`s` of the rows of X (and of Y when ``positions_Y`` is None).
    weights : None or (a, b)
        Masses (uniform if None).
    bins : None, int or array of edges
        None: group tokens by exactly equal position (ties are one conditional measure). Otherwise
        group them by position bins (an int: that many equal bins over the range of positions), which
        estimates :math:`W_{p,\lambda}` for continuous :math:`\lambda`.
    reduce : {"mean", "sup"}
    return_profile : bool
        Return a :class:`ConditionalProfile` with the per-group distances.

    Raises
    ------
    ValueError
        If the two measures do not give the same mass to every group (different position marginals).
    """
    X, Y, a, b = _two_measures(X, Y, p, weights)
    p = float(p)
    reduce = validate_choice(reduce, "reduce", ("mean", "sup"))
    return_profile = validate_flag(return_profile, "return_profile")
    sx = real_array(positions, "positions")
    sy = sx if positions_Y is None else real_array(positions_Y, "positions_Y")
    if sx.shape != (X.shape[0],) or sy.shape != (Y.shape[0],):
        raise ValueError(
            f"positions must have one entry per token: got {sx.shape} for X {X.shape} and {sy.shape} for Y {Y.shape}"
        )
    if not (np.all(np.isfinite(sx)) and np.all(np.isfinite(sy))):
        raise ValueError("positions contain non-finite values")

    if bins is None:
        keys, inv = np.unique(np.concatenate([sx, sy]), return_inverse=True)
        centres = keys
    else:
        allpos = np.concatenate([sx, sy])
        edges = (
            np.linspace(allpos.min(), allpos.max(), validate_count(bins, "bins") + 1)
            if np.isscalar(bins)
            else real_array(bins, "bins")
        )
        if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise ValueError("bins must be a positive integer or increasing bin edges")
        if allpos.min() < edges[0] or allpos.max() > edges[-1]:
            raise ValueError("some positions fall outside the bin edges")
        inv = np.clip(np.searchsorted(edges, allpos, side="right") - 1, 0, edges.size - 2)
        centres = (edges[:-1] + edges[1:]) / 2
    gx, gy = inv[: X.shape[0]], inv[X.shape[0] :]
    G = centres.size
    mass_x = np.bincount(gx, weights=a, minlength=G)
    mass_y = np.bincount(gy, weights=b, minlength=G)
    if np.max(np.abs(mass_x - mass_y)) > 1e-9:
        g = int(np.argmax(np.abs(mass_x - mass_y)))
        raise ValueError(
            "the two measures have different position marginals: the group at position "
            f"{centres[g]:.4g} has mass {mass_x[g]:.6g} in the first and {mass_y[g]:.6g} in the second"
        )
    count_x = np.bincount(gx, minlength=G)
    count_y = np.bincount(gy, minlength=G)
    dist = np.zeros(G)
    single = (count_x == 1) & (count_y == 1)
    if np.any(single):
        ix = np.full(G, -1)
        iy = np.full(G, -1)
        ix[gx] = np.arange(X.shape[0])
        iy[gy] = np.arange(Y.shape[0])
        dist[single] = np.linalg.norm(X[ix[single]] - Y[iy[single]], axis=1)
    for g in np.flatnonzero(~single & (mass_x > 0)):
        mx, my = gx == g, gy == g
        dist[g] = wasserstein(X[mx], Y[my], p=p, weights=(a[mx] / mass_x[g], b[my] / mass_y[g]), method="exact")
    used = mass_x > 0
    if reduce == "mean":
        value = float(np.sum(mass_x[used] * dist[used] ** p) ** (1.0 / p))
    else:
        value = float(np.max(dist[used]))
    if return_profile:
        return ConditionalProfile(value, centres[used], mass_x[used], dist[used], p, reduce)
    return value


# ---------------------------------------------------------------------------------------------
# distances on a circle (paper 2: the double angles psi = 2 theta live on R / 2 pi Z)
# ---------------------------------------------------------------------------------------------


def _circle_measures(x, y, x_weights, y_weights, period):
    """Merged, sorted atoms of mu - nu on [0, period): positions, signed masses, gaps to the next atom."""
    period = float(period)
    if not (period > 0 and np.isfinite(period)):
        raise ValueError(f"period must be positive and finite, got {period}")
    pts = []
    for name, z in (("x", x), ("y", y)):
        z = np.asarray(z, dtype=float)
        if z.ndim != 1 or z.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D array of angles, got shape {z.shape}")
        if not np.all(np.isfinite(z)):
            raise ValueError(f"{name} contains non-finite values (inf or NaN)")
        pts.append(z)
    a = _as_weights(x_weights, pts[0].size, "x_weights")
    b = _as_weights(y_weights, pts[1].size, "y_weights")
    pos = np.mod(np.concatenate(pts), period)
    mass = np.concatenate([a, -b])
    order = np.argsort(pos, kind="stable")
    pos, mass = pos[order], mass[order]
    gaps = np.diff(pos, append=pos[0] + period)  # the last gap wraps around
    return pos, mass, gaps


def circle_wasserstein1(x, y, x_weights=None, y_weights=None, *, period: float = 2 * np.pi) -> float:
    r"""Exact :math:`W_1(\mu,\nu)` between two weighted empirical measures on a circle (arc-length metric).

    .. math:: W_1(\mu,\nu)=\min_{c\in\mathbb R}\int_0^{L}\big|F_\mu(s)-F_\nu(s)-c\big|\,ds,

    with :math:`F_\mu(s)=\mu([0,s))` and :math:`L` the length of the circle (``period``): the
    distribution functions of the two measures are cut open at an arbitrary point, and the optimal
    constant :math:`c` (a weighted median of :math:`F_\mu-F_\nu`, weights = lengths) accounts for
    the mass that travels across it (Rabin, Delon, Gousseau 2011). :math:`F_\mu-F_\nu` is constant
    between consecutive atoms, so the formula is exact; the cost is one sort, :math:`O(N\log N)` for
    :math:`N` atoms.

    Parameters
    ----------
    x, y : arrays (n,) and (m,)
        Positions of the atoms, any real numbers (read modulo ``period``).
    x_weights, y_weights : arrays, optional
        Masses (uniform if omitted; each must sum to 1).
    period : float
        Length of the circle; :math:`2\pi` for angles. For the double angles :math:`\psi=2\theta`
        of paper 2 use the default.

    Returns
    -------
    float
        The distance (not its square).

    References
    ----------
    J. Rabin, J. Delon, Y. Gousseau, *Transportation distances on the circle*, J. Math. Imaging
    Vis. 41 (2011); paper 2 (Li et al. 2026), structural stability (this book, chapter 4).

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
    r"""Exact bounded-Lipschitz distance between two weighted empirical measures on a circle.

    .. math:: d_{BL}(\mu,\nu)=\sup\Big\{\int f\,d(\mu-\nu):\ \|f\|_\infty\le1,\ \mathrm{Lip}(f)\le1\Big\},

    Lipschitz for the arc-length metric of the circle of length :math:`L` (``period``). Only the
    values :math:`f_i` of :math:`f` at the atoms matter, and on a circle it is enough to ask
    :math:`|f_{i+1}-f_i|\le s_{i+1}-s_i` for consecutive atoms (cyclically): the arc-length distance
    of two atoms is the shorter of the two arcs between them, and each arc is a sum of consecutive
    gaps. So :math:`d_{BL}` is a linear program with :math:`N` unknowns and :math:`2N` constraints
    besides :math:`|f_i|\le1`, solved exactly by HiGHS (``scipy.optimize.linprog``); about a second
    for :math:`N=10^4` atoms.

    The two distances compare: a 1-Lipschitz :math:`f` moved by a constant has
    :math:`\|f\|_\infty\le L/4` (half the diameter), so

    .. math:: \min(1, 4/L)\,W_1\le d_{BL}\le W_1,\qquad\text{i.e. }\ \tfrac2\pi W_1\le d_{BL}\le W_1\ \text{ for }L=2\pi,

    and :math:`d_{BL}=W_1` whenever an optimal Kantorovich potential has values in an interval of
    length 2 (small, spread-out differences).

    Parameters
    ----------
    x, y, x_weights, y_weights, period
        As in :func:`circle_wasserstein1`.

    Returns
    -------
    float

    References
    ----------
    R. M. Dudley, *Real Analysis and Probability* (bounded-Lipschitz metric); paper 2 (Li et al.
    2026), structural stability in :math:`d_{BL}` (this book, chapter 4).

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
    b_ub = np.concatenate([gaps, gaps])
    res = linprog(-mass, A_ub=A_ub, b_ub=b_ub, bounds=(-1.0, 1.0), method="highs")
    if res.status != 0:
        raise RuntimeError(f"the bounded-Lipschitz linear program failed: {res.message}")
    return float(max(-res.fun, 0.0))
