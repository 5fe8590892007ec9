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

References
----------
Paper 1 (Castin et al., arXiv:2501.18322): stability and mean-field limit in :math:`W_p`, and the
twisted Wasserstein distance (book: ``chapters/01_well_posedness.md``, equations (eq-p1-stability) and
(eq-p1-conditional); ``chapters/03_gradient_flow.md``, equation (eq-gf-twisted)). G. Peyré, M. Cuturi,
*Computational Optimal Transport*, Found. Trends Mach. Learn. 11 (2019); POT (Flamary et al., JMLR 2021);
J. Rabin, J. Delon, Y. Gousseau, *Transportation distances on the circle*, J. Math. Imaging Vis. 41 (2011)
(:math:`W_1` on the circle); paper 2 (Li et al., 2026), structural stability in the bounded-Lipschitz
distance (book: ``chapters/04_kuramoto_reduction.md``, equation (eq-dbl)).
"""

from __future__ import annotations

import math
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
    "sinkhorn_potentials",
    "sinkhorn_spectrum",
    "SCALING_MAX_RANGE",
]

# Above this many pairs (n * m) the exact LP is slow (about 0.5 s at 1000 x 1000 here).
EXACT_MAX_PAIRS = 4_000_000


@dataclass(frozen=True)
class Distance:
    """A distance value and how it was obtained.

    Attributes
    ----------
    value : float
        The distance (not its square).
    method : str
        ``"exact"``, ``"quantile"`` or ``"sliced"``.
    p : float
        The order :math:`p`.

    References
    ----------
    G. Peyré, M. Cuturi, *Computational Optimal Transport* (2019).
    """

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
    r"""Wasserstein distance :math:`W_p(\mu,\nu)` between two weighted empirical measures.

    The measures are :math:`\mu=\sum_i a_i\delta_{x_i}` and :math:`\nu=\sum_j b_j\delta_{y_j}`:

    .. math:: W_p(\mu,\nu) = \Big(\min_{\pi\in\Pi(a,b)}\sum_{ij}\pi_{ij}|x_i-y_j|^p\Big)^{1/p}

    Parameters
    ----------
    X, Y : arrays (n, d) and (m, d)
        Atoms of the two measures.
    p : float >= 1
        Order.
    weights : None or (a, b)
        Masses of the two measures (uniform if None; either entry may be None).
    method : {"auto", "exact", "sliced"}
        ``exact``: POT's network simplex (``ot.emd2`` returns :math:`W_p^p`; its warnings are
        errors), or the exact quantile formula when d = 1; two clouds of the same number of
        equally weighted points are matched by ``scipy.optimize.linear_sum_assignment`` instead
        (an optimal plan is then a permutation, Birkhoff's theorem: the same value, faster). ``sliced``: the sliced
        Wasserstein
        distance (a *different*, smaller quantity; Monte Carlo over ``n_projections``
        directions). ``auto``: exact when n * m <= ``EXACT_MAX_PAIRS`` or d = 1, sliced otherwise,
        with a warning.
    n_projections : int
        Directions of the sliced estimate.
    rng : int or numpy.random.Generator, optional
        Seed of the sliced estimate's directions.
    return_method : bool
        Return a :class:`Distance` (value and method) instead of a float.

    Returns
    -------
    float or Distance
        :math:`W_p(\mu,\nu)` (not its p-th power).

    References
    ----------
    G. Peyré, M. Cuturi, *Computational Optimal Transport* (2019); POT (Flamary et al., JMLR 2021). Used
    for the stability estimate and the mean-field limit of paper 1 (Castin et al., arXiv:2501.18322); book:
    ``chapters/01_well_posedness.md``, equation (eq-p1-stability).

    Examples
    --------
    >>> round(wasserstein([[0.0, 0.0]], [[3.0, 4.0]]), 12)
    5.0
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
    elif X.shape[0] == Y.shape[0] and np.ptp(a) == 0 and np.ptp(b) == 0:
        from scipy.optimize import linear_sum_assignment

        M = ot.dist(X, Y, metric="euclidean") ** p if p != 2 else ot.dist(X, Y)
        rows, cols = linear_sum_assignment(M)
        value = max(float(M[rows, cols].mean()), 0.0) ** (1.0 / p)
        used = "exact"
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

    Parameters
    ----------
    S : array (..., d, d)
        Symmetric positive semi-definite matrix (or a stack).
    pinv_rtol : float, optional
        Relative cut-off of the pseudo-inverse; if given, the pseudo-inverse is returned too.

    Returns
    -------
    root : array (..., d, d)
        :math:`S^{1/2}`.
    pinv : array (..., d, d)
        :math:`(S^{1/2})^+` (only with ``pinv_rtol``).

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
    cut = pinv_rtol * np.max(r, axis=-1, keepdims=True)
    rinv = np.where(r > cut, 1.0 / np.where(r > cut, r, 1.0), 0.0)
    return root, (U * rinv[..., None, :]) @ Ut


def bures_wasserstein(m1, S1, m2, S2) -> float:
    r""":math:`W_2(N(m_1,\Sigma_1), N(m_2,\Sigma_2))` (the distance, not its square).

    .. math:: W_2^2 = |m_1-m_2|^2 + \operatorname{tr}\Sigma_1+\operatorname{tr}\Sigma_2
              - 2\operatorname{tr}\big(\Sigma_1^{1/2}\Sigma_2\Sigma_1^{1/2}\big)^{1/2}

    Degenerate (singular) covariances are allowed.

    Parameters
    ----------
    m1, m2 : array (d,)
        Means.
    S1, S2 : array (d, d)
        Covariances (symmetric positive semi-definite).

    Returns
    -------
    float
        The Bures–Wasserstein distance (not its square).

    Raises
    ------
    ValueError
        Non-PSD or ill-shaped input.

    References
    ----------
    R. Bhatia, T. Jain, Y. Lim, *On the Bures–Wasserstein distance between positive definite matrices*,
    Expo. Math. 37 (2019); used for paper 1's Gaussian solutions (Castin et al., arXiv:2501.18322); book:
    ``chapters/02_gaussian_preservation.md`` and ``chapters/03_gradient_flow.md``.

    Examples
    --------
    >>> import numpy as np
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
    r"""Exact :math:`W_2\big(\sum_i w_i\delta_{x_i},\,N(m,s^2)\big)` on the line (the distance, not its square).

    With the sorted points :math:`x_{(i)}`, cumulative masses :math:`c_i` and
    :math:`z_i=\Phi^{-1}(c_i)` (:math:`z_0=-\infty`, :math:`z_n=+\infty`), the quantile formula
    :math:`W_2^2=\int_0^1|F^{-1}(u)-m-s\Phi^{-1}(u)|^2du` integrates in closed form:

    .. math:: W_2^2=\sum_i w_i(x_{(i)}-m)^2-2s\sum_i(x_{(i)}-m)\big(\varphi(z_{i-1})-\varphi(z_i)\big)+s^2 .

    Used as the exact oracle of the mean-field limit in d = 1: for Gaussian data in one dimension the
    Transformer PDE of paper 1 stays Gaussian with a closed-form solution.

    Parameters
    ----------
    x : array (n,)
        Atoms.
    mean, std : float
        :math:`m` and :math:`s \ge 0`.
    weights : array (n,), optional
        Masses :math:`w_i` (uniform if omitted).

    Returns
    -------
    float
        :math:`W_2` (not its square).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), mean-field limit; book: ``chapters/01_well_posedness.md``,
    equation (eq-p1-gauss1d).
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

    Attributes
    ----------
    value : float
        The conditional distance.
    positions : array
        Group position or bin centre.
    masses : array
        :math:`\\lambda` of each group.
    distances : array
        :math:`W_p` of the two conditional measures of each group.
    p : float
        Order.
    reduce : str
        ``"mean"`` or ``"sup"``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), masked attention; book: ``chapters/01_well_posedness.md``,
    equation (eq-p1-conditional).
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
    r"""Conditional Wasserstein distance between two measures on :math:`[0,1]\times\mathbb R^d`.

    The two measures have the same position marginal :math:`\lambda` (masked attention of paper 1,
    Castin et al., arXiv:2501.18322). Disintegrating :math:`\mu=\int\mu^s\,d\lambda(s)` and
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
    p : float >= 1
        Order.
    positions_Y : array (m,), optional
        Positions of the rows of Y (default: ``positions``).
    reduce : {"mean", "sup"}
        Integrate the per-position distances against :math:`\lambda`, or take their supremum.
    return_profile : bool
        Return a :class:`ConditionalProfile` with the per-group distances.

    Returns
    -------
    float or ConditionalProfile
        :math:`W_{p,\lambda}(\mu,\nu)`.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), masked attention and conditional Wasserstein distances;
    book: ``chapters/01_well_posedness.md``, equation (eq-p1-conditional).

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
    for g in map(int, np.flatnonzero(~single & (mass_x > 0))):
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
    Vis. 41 (2011); paper 2 (Li et al., 2026), structural stability; book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-dbl).

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

    .. math:: \min(1, 4/L)\,W_1\le d_{BL}\le W_1,\qquad
              \text{i.e. }\ \tfrac2\pi W_1\le d_{BL}\le W_1\ \text{ for }L=2\pi,

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
    2026), structural stability in :math:`d_{BL}`; book: ``chapters/04_kuramoto_reduction.md``, equation
    (eq-dbl).

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


# ---------------------------------------------------------------------------------------------
# entropic self-transport: the Sinkhorn solve of Sinkhorn attention and its Gaussian spectrum
# ---------------------------------------------------------------------------------------------

#: Number of past iterates mixed by the Anderson acceleration of :func:`sinkhorn_potentials`.
SINKHORN_MEMORY = 5
#: Plain (batched) Sinkhorn iterations before a system not yet converged is accelerated alone.
SINKHORN_PLAIN_ITERS = 50


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    """log-sum-exp along one axis; same values as ``scipy.special.logsumexp`` at a fraction of its
    overhead on the small matrices of a Sinkhorn loop (about 6 x faster at n = 60)."""
    m = a.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)


#: Sinkhorn runs in the exponential (scaling) domain when the kernel of a system spans at most
#: e^SCALING_MAX_RANGE (max - min of logK): the same iterates, two matrix-vector products per
#: iteration instead of two log-sum-exps, and nothing can overflow; wider kernels use the log domain.
SCALING_MAX_RANGE = 30.0


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

    Solves for potentials :math:`f, g` such that the plan
    :math:`\pi_{ij} = w_i w_j \exp((f_i + g_j + c_{ij})/\varepsilon)`, with
    :math:`c_{ij} = \varepsilon\,\mathrm{logK}_{ij}` the (negative) cost, has both marginals
    equal to :math:`w`. Iterates :math:`f \leftarrow -\varepsilon\,\mathrm{LSE}_j((g_j+c_{ij})/\varepsilon+\log w_j)`
    and the same for :math:`g`, stopping when the column-marginal relative error is below ``tol``.

    The last update is the row update, so rows of :math:`P=\pi/w_i` sum to one (to round-off) and the
    column marginals are met to ``error``; one iteration from :math:`g=0` is exactly the
    row-softmax of :math:`c/\varepsilon`. ``g0`` warm-starts the column potential.

    The iteration is run in the log domain, or — when the kernel spans at most
    :math:`e^{30}` (:data:`SCALING_MAX_RANGE`), so that nothing can overflow — as the same
    iterates in the exponential domain, :math:`u=e^{f/\varepsilon}`, :math:`v=e^{g/\varepsilon}`
    (matrix scaling: two matrix-vector products per iteration instead of two log-sum-exps).

    ``logK`` may carry leading batch axes, (..., n, n), with ``logw`` of shape (n,) or (..., n): then
    every system is solved at once and each stops at its own iteration (a converged system is left
    as it is while the others go on), so a batch gives the potentials of a loop over it.

    **Anderson acceleration** (``memory`` > 0; ``memory=0`` is plain Sinkhorn). The first
    ``SINKHORN_PLAIN_ITERS`` iterations are plain (batched, as above); a system not converged by
    then goes on alone, accelerated, from where it is. The column update
    is a fixed-point map :math:`g\mapsto G(g)`; from the second iteration on, the next :math:`g`
    is the combination of the last ``memory + 1`` values of :math:`G` whose residuals
    :math:`G(g)-g` have the least-squares smallest combination (Anderson mixing, D. G. Anderson,
    J. ACM 12 (1965); for Sinkhorn e.g. Chizat 2020). Plain Sinkhorn stalls when the tokens form
    tight clusters whose mutual kernel entries are tiny (a contraction factor
    :math:`1-O(e^{-\Delta/\varepsilon})`, :math:`\Delta` the score gap): three clusters at
    :math:`\pm6` with :math:`\varepsilon=0.5` were still at error 7e-8 after 20 000 plain
    iterations, and reach 1e-12 in 14 accelerated ones. The fixed point is the same; a step that
    raises the error tenfold above the best one so far is discarded (history cleared, plain step
    from the best iterate), so the iteration never does worse than restarting plain Sinkhorn.

    Parameters
    ----------
    logK : array (..., n, n)
        :math:`c_{ij}/\varepsilon`, the scores divided by :math:`\varepsilon` (batch axes allowed).
    logw : array (n,) or (..., n)
        Logarithms of the masses :math:`w_j`.
    eps : float
        Entropic regularisation :math:`\varepsilon > 0`.
    max_iter : int
        Cap on the iterations.
    tol : float
        Stopping tolerance on :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j`.
    g0 : array (n,) or (..., n), optional
        Warm start of the column potential (default zero).
    memory : int
        Anderson memory (0: plain Sinkhorn).

    Returns
    -------
    f, g : array (..., n)
        Row and column potentials.
    iterations : int or array of int
        Iterations used (per system for a batch).
    error : float or array
        Column-marginal relative error reached.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Sinkhorn attention; M. E. Sander, P. Ablin, M. Blondel,
    G. Peyré, *Sinkformers: Transformers with Doubly Stochastic Attention*, AISTATS 2022; D. G. Anderson,
    *Iterative procedures for nonlinear integral equations*, J. ACM 12 (1965), and Chizat (2020) for its use
    with Sinkhorn. Book: ``chapters/03_gradient_flow.md``, equation (eq-gf-sinkhorn-energy).
    """
    n = logK.shape[-1]
    batch = logK.shape[:-2]
    m = math.prod(batch)
    K3 = logK.reshape(m, n, n)
    lw = np.broadcast_to(logw, batch + (n,)).reshape(m, n)
    g = np.zeros((m, n)) if g0 is None else np.array(np.broadcast_to(g0, batch + (n,)), dtype=float).reshape(m, n)
    f = np.zeros((m, n))
    err = np.full(m, np.inf)
    its = np.zeros(m, dtype=int)
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
    """The iteration loop of both Sinkhorn domains on m systems; each stops at its own iteration.

    ``step(active, every)`` does one iteration on the systems ``active`` (all m if ``every``) and
    returns their potentials f, their column-marginal errors and a function ``update(sel)`` giving
    the new ``state`` rows (g or v) of ``active[sel]``, the systems that go on; ``state`` is
    updated in place. Returns f (m, n), the iterations and the errors.
    """
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


def _sinkhorn_log(K3, lw, g, eps, max_iter, tol):
    """Log-domain iterations on m systems (m, n, n); each stops at its own iteration."""
    m, n, _ = K3.shape

    def step(active, every):
        Ka, ga, lwa = (K3, g, lw) if every else (K3[active], g[active], lw[active])
        # rows: sum_j w_j exp((f_i + g_j)/eps + logK_ij) = 1 exactly after this update
        fa = -eps * _lse(Ka + ga[:, None, :] / eps + lwa[:, None, :], axis=-1)
        # columns: sum_i w_i exp((f_i + g_j)/eps + logK_ij) should equal 1 as well
        lse_col = _lse(Ka + fa[:, :, None] / eps + lwa[:, :, None], axis=-2)
        ea = np.max(np.abs(np.expm1(lse_col + ga / eps)), axis=-1)
        return fa, ea, lambda sel: -eps * lse_col[sel]

    f, its, err = _active_set_loop(m, n, max_iter, tol, g, step)
    return f, g, its, err


def _sinkhorn_scaling(K3, lw, g, eps, max_iter, tol):
    """The same iterates in the exponential domain: u = exp(f/eps + c), v = exp(g/eps), with the
    kernel exp(logK - c) in [e^-30, 1] (c the largest entry of each system)."""
    m, n, _ = K3.shape
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

    f, its, err = _active_set_loop(m, n, max_iter, tol, v, step)
    return f, eps * np.log(v), its, err


def _sinkhorn_anderson(logK, logw, g, eps, max_iter, tol, memory):
    """Anderson-accelerated log-domain iterations on one system (n, n), from the column potential g."""
    f = np.zeros_like(g)
    err = np.inf
    it = 0
    best_err, best_G = np.inf, None
    hist_G: list[np.ndarray] = []
    hist_R: list[np.ndarray] = []
    for it in range(1, max_iter + 1):
        # rows: sum_j w_j exp((f_i + g_j)/eps + logK_ij) = 1 exactly after this update
        f = -eps * _lse(logK + g[None, :] / eps + logw[None, :], axis=1)
        # columns: sum_i w_i exp((f_i + g_j)/eps + logK_ij) should equal 1 as well
        lse_col = _lse(logK + f[:, None] / eps + logw[:, None], axis=0)
        err = float(np.max(np.abs(np.expm1(lse_col + g / eps))))
        if err < tol or it == max_iter:
            break
        G = -eps * lse_col  # the plain Sinkhorn update of g
        if memory <= 0:
            g = G
            continue
        if not err <= 10.0 * best_err:  # the extrapolation went astray (or overflowed): restart plainly
            hist_G.clear()
            hist_R.clear()
            g = best_G
            continue
        if err < best_err:
            best_err, best_G = err, G
        hist_G.append(G)
        hist_R.append(G - g)
        if len(hist_G) > memory + 1:
            del hist_G[0], hist_R[0]
        g = G
        if len(hist_G) >= 2:
            dR = np.diff(np.array(hist_R), axis=0).T  # (n, k)
            dG = np.diff(np.array(hist_G), axis=0).T
            gamma = np.linalg.lstsq(dR, hist_R[-1], rcond=None)[0]
            mixed = G - dG @ gamma
            if np.all(np.isfinite(mixed)):
                g = mixed
    return f, g, it, err


def _sym(S):
    return 0.5 * (S + np.swapaxes(S, -1, -2))


def sinkhorn_spectrum(root, cov, B):
    r"""Spectrum of the entropic self-plan of :math:`N(\alpha,\Sigma)` for the kernel :math:`e^{\langle Bx,y\rangle}`
    (batched).

    With ``root`` :math:`=\Sigma^{1/2}` and :math:`H=\Sigma^{1/2}B^\top\Sigma
    B\Sigma^{1/2}=W\operatorname{diag}(h)W^\top`,
    returns :math:`(\sqrt{1+4h},W)`. The plan's cross-covariance is
    :math:`C^\top=\Sigma B\Sigma^{1/2}X\Sigma^{1/2}` with :math:`X=W\operatorname{diag}(2/(1+\sqrt{1+4h}))W^\top`
    (chapter 2 of the book, :math:`B=A_1/\varepsilon`), and the Sinkhorn energy of
    :mod:`tokendynamics.gradient_flow` is a sum over the same :math:`\sqrt{1+4h}`.

    Parameters
    ----------
    root : array (..., d, d)
        The symmetric square root :math:`\Sigma^{1/2}` of ``cov`` (e.g. from
        :func:`~tokendynamics.transport.psd_sqrt`); not checked against ``cov``.
    cov : array (..., d, d)
        The covariance :math:`\Sigma`, symmetric positive semi-definite.
    B : array (d, d) or (..., d, d)
        Matrix of the kernel :math:`e^{\langle Bx,y\rangle}`; the Sinkhorn field of a head uses
        :math:`B=(\beta/\varepsilon)A^\top`.

    Returns
    -------
    sq : array (..., d)
        :math:`\sqrt{1+4h_i}` for the eigenvalues :math:`h_i` of :math:`H` in increasing order
        (round-off negatives clipped to 0), so every entry is at least 1.
    W : array (..., d, d)
        Orthonormal eigenvectors of :math:`H`, in the columns, in the same order.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Sinkhorn attention on Gaussian data; book:
    ``chapters/02_gaussian_preservation.md``.
    The same square roots make the closed-form Sinkhorn energy of ``chapters/03_gradient_flow.md``,
    equation (eq-gf-sinkhorn-energy).
    """
    lam, W = np.linalg.eigh(_sym(root @ np.swapaxes(B, -1, -2) @ cov @ B @ root))
    return np.sqrt(1.0 + 4.0 * np.clip(lam, 0.0, None)), W
