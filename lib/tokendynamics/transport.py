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

References: paper 1 §3 (stability and mean-field limit in :math:`W_p`) and §5.2; Peyré–Cuturi,
*Computational Optimal Transport*; POT (Flamary et al. 2021).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .validation import validate_gaussian, validate_tokens, validate_weights

__all__ = [
    "Distance",
    "wasserstein",
    "bures_wasserstein",
    "wasserstein_gaussian_1d",
    "conditional_wasserstein",
    "ConditionalProfile",
    "psd_sqrt",
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
    X = np.asarray(X, dtype=float)
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
    if not p >= 1:
        raise ValueError(f"p must be >= 1, got {p}")
    a_in, b_in = (None, None) if weights is None else weights
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
        errors), or the exact quantile formula when d = 1; two clouds of the same number of
        equally weighted points are matched by ``scipy.optimize.linear_sum_assignment`` instead
        (an optimal plan is then a permutation, Birkhoff's theorem: the same value, faster). ``sliced``: the sliced Wasserstein
        distance (a *different*, smaller quantity; Monte Carlo over ``n_projections``
        directions). ``auto``: exact when n * m <= ``EXACT_MAX_PAIRS`` or d = 1, sliced otherwise,
        with a warning.
    return_method : bool
        Return a :class:`Distance` (value and method) instead of a float.
    """
    import ot

    X, Y, a, b = _two_measures(X, Y, p, weights)
    if method not in ("auto", "exact", "sliced"):
        raise ValueError(f"method must be 'auto', 'exact' or 'sliced', got {method!r}")
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
    """
    S = np.asarray(S, dtype=float)
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
    m1, S1 = validate_gaussian(m1, S1, name="S1")
    m2, S2 = validate_gaussian(m2, S2, m1.shape[0], what="the first Gaussian has d", name="S2")
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

    x = np.asarray(x, dtype=float).reshape(-1)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("x must be a non-empty array of finite numbers")
    mean, std = float(mean), float(std)
    if not (np.isfinite(mean) and np.isfinite(std) and std >= 0):
        raise ValueError(f"mean must be finite and std finite and >= 0, got {mean!r}, {std!r}")
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
    if reduce not in ("mean", "sup"):
        raise ValueError(f"reduce must be 'mean' or 'sup', got {reduce!r}")
    sx = np.asarray(positions, dtype=float)
    sy = sx if positions_Y is None else np.asarray(positions_Y, dtype=float)
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
            np.linspace(allpos.min(), allpos.max(), int(bins) + 1)
            if np.isscalar(bins)
            else np.asarray(bins, dtype=float)
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
