r"""Order parameters and cluster detectors of a cloud of tokens in any dimension, batched over clouds (..., n, d).

References
----------
Paper 2 (Li et al., 2026), book ``chapters/06_high_dimensional.md``; B. Geshkovski, C. Letrouit, Y. Polyanskiy,
P. Rigollet, NeurIPS 2023 (arXiv:2305.05465), the link threshold 0.999.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.linalg import eigh
from scipy.sparse.csgraph import connected_components

from .particles import normalize_rows
from .validation import real_array, require_memory, validate_finite, validate_finite_array

__all__ = [
    "second_moment", "order_parameters", "top_direction", "pair_overlaps", "sorted_gram", "ClusterReport",
    "detect_clusters", "first_passage_times", "axis_speed", "count_clusters", "cluster_outcomes", "ward_clusters",
    "is_single_cluster", "coordinate_means", "plane_order_parameters", "window_ranges",
]  # fmt: skip


def _tokens(X, one_cloud: bool = False) -> np.ndarray:
    X = validate_finite_array(X, "X")
    if X.ndim < 2 or X.shape[-2] < 2 or X.shape[-1] < 1:
        raise ValueError(f"X must hold tokens of shape (..., n, d) with n >= 2, got {X.shape}")
    if one_cloud and X.ndim != 2:
        raise ValueError(f"X must be one cloud of tokens (n, d), got shape {X.shape}")
    return X


def _second_moment(X) -> np.ndarray:
    return np.matmul(np.swapaxes(X, -1, -2), X) / X.shape[-2]


def _increasing(t, name="t") -> np.ndarray:
    t = validate_finite_array(t, name)
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"{name} must be increasing")
    return t


def second_moment(X) -> np.ndarray:
    r"""Second moment :math:`\Sigma=\frac1n\sum_j x_jx_j^\top` of tokens, or of each frame of a stack.

    Parameters
    ----------
    X : array (n, d) or (m, n, d)

    Returns
    -------
    array (d, d) or (m, d, d)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md``, equation (eq-hd-sigma).
    """
    return _second_moment(_tokens(X))


def order_parameters(X):
    r"""The order parameters :math:`\hat R_1=\mathrm{mean}_{i<j}\langle x_i,x_j\rangle` and
    :math:`\hat R_2=\mathrm{mean}_{i<j}\langle x_i,x_j\rangle^2`, without the Gram matrix.

    .. math::
       \hat R_2=\frac{n^2\operatorname{tr}\Sigma^2-\sum_i|x_i|^4}{n(n-1)},\qquad
       \hat R_1=\frac{n^2|\bar x|^2-\sum_i|x_i|^2}{n(n-1)},

    :math:`O(n\min(n,d)^2)` per frame. One cluster: :math:`(1, 1)`; two antipodal ones: :math:`(\approx0, 1)`.

    Parameters
    ----------
    X : array (n, d) or (m, n, d)

    Returns
    -------
    R1, R2 : float or array (m,)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md``, equation (eq-hd-R).

    Examples
    --------
    >>> import numpy as np
    >>> R1, R2 = order_parameters(np.array([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]]))  # antipodal clusters
    >>> round(float(R1), 12), round(float(R2), 12)
    (-0.333333333333, 1.0)
    """
    X = _tokens(X)
    n, d = X.shape[-2], X.shape[-1]
    sq = np.einsum("...ja,...ja->...j", X, X)
    Xt = np.swapaxes(X, -1, -2)
    S = Xt @ X if d <= n else X @ Xt  # n Sigma, or the Gram matrix: same Frobenius norm
    tr2 = np.einsum("...ab,...ab->...", S, S)  # n^2 tr Sigma^2
    s = X.sum(axis=-2)
    R2 = (tr2 - np.sum(sq**2, axis=-1)) / (n * (n - 1))
    R1 = (np.einsum("...a,...a->...", s, s) - np.sum(sq, axis=-1)) / (n * (n - 1))
    return R1, R2


def top_direction(X):
    r"""Top eigenvalue :math:`\lambda_1(\Sigma)` and unit top eigenvector :math:`u_1` of the second moment
    (the cluster axis; its largest entry in absolute value is positive).

    Parameters
    ----------
    X : array (n, d) or (m, n, d)

    Returns
    -------
    lam1, u1 : float or array (m,), array (d,) or (m, d)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md``.
    """
    return _top_eigenpair(_second_moment(_tokens(X)))


def _top_eigenpair(S: np.ndarray):
    """Top eigenpair of symmetric matrices (d, d) or (m, d, d): one batched ``eigh`` for d <= 32, else
    LAPACK ``syevr`` for the top pair only (three times faster than a full ``eigh`` at d = 100)."""
    d = S.shape[-1]
    flat = S.reshape(-1, d, d)
    if d <= 32:
        w, V = np.linalg.eigh(flat)
        lam, U = w[:, -1].copy(), V[:, :, -1].copy()
    else:
        lam, U = np.empty(flat.shape[0]), np.empty((flat.shape[0], d))
        for k, M in enumerate(flat):
            w, v = eigh(M, subset_by_index=[d - 1, d - 1], check_finite=False)
            lam[k], U[k] = w[0], v[:, 0]
    U *= np.sign(U[np.arange(len(U)), np.argmax(np.abs(U), axis=1)])[:, None]
    return lam.reshape(S.shape[:-2]), U.reshape(S.shape[:-1])


def pair_overlaps(X) -> np.ndarray:
    r"""All :math:`\langle x_i,x_j\rangle`, :math:`i<j`, of tokens X (n, d), for histograms.

    Parameters
    ----------
    X : array (n, d)

    Returns
    -------
    array (n(n-1)/2,)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md``.
    """
    X = _tokens(X, one_cloud=True)
    require_memory(3 * X.shape[0] ** 2, f"pair_overlaps of n = {X.shape[0]} tokens")
    i, j = np.triu_indices(X.shape[0], k=1)
    return (X @ X.T)[i, j]


def sorted_gram(X, axis=None):
    r"""Gram matrix :math:`\langle x_i,x_j\rangle` with the tokens ordered by the sign of their projection on
    ``axis`` (default: the top eigenvector of :math:`\Sigma`), as in paper 2's high-dimensional figures.

    Parameters
    ----------
    X, axis : arrays (n, d) and (d,)
        Tokens and the direction of the split.

    Returns
    -------
    G, order, split
        The sorted Gram matrix (n, n), the permutation (to draw another state in the same order), and the
        number of tokens with a non-negative projection (the block border).

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md``.
    """
    X = _tokens(X, one_cloud=True)
    u = _top_eigenpair(_second_moment(X))[1] if axis is None else validate_finite_array(axis, "axis")
    if u.shape != (X.shape[1],):
        raise ValueError(f"axis must have shape ({X.shape[1]},), got {u.shape}")
    proj = X @ u
    order = np.lexsort((-np.abs(proj), proj < 0))  # positive side first, strongest first
    Xs = X[order]
    return Xs @ Xs.T, order, int(np.sum(proj >= 0))


@dataclass(frozen=True)
class ClusterReport:
    r"""Result of :func:`detect_clusters`: ``n_clusters`` (components of the graph
    :math:`\langle x_i,x_j\rangle >` threshold, singletons count), ``n_axes`` (components once :math:`x` is
    identified with :math:`-x`), ``antipodal`` (at least two clusters, each with an opposite one), ``sizes``
    (largest first), ``labels`` (the cluster of each token, by decreasing size), ``clustered_pairs`` (the
    fraction of pairs with :math:`\langle x_i,x_j\rangle^2 >` threshold) and ``threshold``."""

    n_clusters: int
    n_axes: int
    antipodal: bool
    sizes: tuple
    labels: np.ndarray = field(repr=False)
    clustered_pairs: float
    threshold: float

    @property
    def description(self) -> str:
        """'one cluster', 'two antipodal clusters', 'k clusters' or 'no clusters'."""
        if self.n_clusters == 1:
            return "one cluster"
        if self.antipodal and self.n_clusters == 2:
            return "two antipodal clusters"
        if self.n_clusters == len(self.labels):
            return "no clusters"
        return f"{self.n_clusters} clusters" + (" (antipodal pairs)" if self.antipodal else "")


def detect_clusters(X, threshold: float = 0.999) -> ClusterReport:
    r"""Clusters of one state: tokens joined by a chain of pairs with :math:`\langle x_i,x_j\rangle >`
    ``threshold`` (of the normalised tokens), from the n x n Gram matrix.

    Parameters
    ----------
    X, threshold
        Tokens (n, d), and the link threshold in (0, 1).

    Returns
    -------
    ClusterReport

    References
    ----------
    Geshkovski et al., NeurIPS 2023 (arXiv:2305.05465), the threshold; book: ``chapters/06_high_dimensional.md``.
    """
    X = _tokens(X, one_cloud=True)
    Xn = _unit(X, threshold)
    G = Xn @ Xn.T
    _, lab = connected_components(G > threshold, directed=False)
    n_axes, _ = connected_components(G * G > threshold**2, directed=False)
    sizes = np.bincount(lab)
    rank = np.argsort(-sizes, kind="stable")
    labels, sizes = np.argsort(rank)[lab], sizes[rank]  # clusters numbered by decreasing size
    centres = normalize_rows(np.array([Xn[labels == c].sum(0) for c in range(len(sizes))]))
    antipodal = len(sizes) >= 2 and bool(np.all(np.min(centres @ centres.T, axis=1) < -threshold))
    i, j = np.triu_indices(X.shape[0], k=1)
    frac = float(np.mean(G[i, j] ** 2 > threshold))
    return ClusterReport(len(sizes), int(n_axes), antipodal, tuple(map(int, sizes)), labels, frac, threshold)


def first_passage_times(t, R, levels=(0.1, 0.5, 0.99)) -> np.ndarray:
    r"""First times :math:`t_x=\inf\{t: R(t)>x\}` for each level x (clustering times), linearly
    interpolated between samples; ``inf`` where the level is never exceeded.

    Parameters
    ----------
    t, R, levels
        Increasing times (m,), the signal (m,) (e.g. :math:`\hat R_2(t)`), the levels x.

    Returns
    -------
    array (len(levels),)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md`` (clustering-time scaling).
    """
    t, R = _increasing(t), validate_finite_array(R, "R")
    x = np.atleast_1d(validate_finite_array(levels, "levels"))
    if t.ndim != 1 or R.shape != t.shape or t.size < 1:
        raise ValueError(f"t and R must be 1-D arrays of the same length, got {t.shape} and {R.shape}")
    above = R[None, :] > x[:, None]
    k = np.argmax(above, axis=1)
    km = np.maximum(k - 1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = t[km] + (x - R[km]) / (R[k] - R[km]) * (t[k] - t[km])
    return np.where(above.any(axis=1), np.where(k == 0, t[0], cross), math.inf)


def axis_speed(t, axis) -> np.ndarray:
    r"""Angular speed :math:`\arccos|\langle u_k,u_{k+1}\rangle|/(t_{k+1}-t_k)` of an axis :math:`\pm u`
    (e.g. the top eigenvector of :math:`\Sigma`, sign arbitrary) between stored times.

    Parameters
    ----------
    t, axis
        Increasing times (m,), and unit vectors (m, d).

    Returns
    -------
    array (m-1,)
        Radians per unit time (at most a quarter turn between samples is seen).

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md`` (rotating clusters).
    """
    t, U = _increasing(t), validate_finite_array(axis, "axis")
    if t.ndim != 1 or t.size < 2 or U.ndim != 2 or U.shape[0] != t.size:
        raise ValueError(f"need times t (m,) and axis (m, d) with m >= 2, got {t.shape} and {U.shape}")
    return np.arccos(np.clip(np.abs(np.sum(U[1:] * U[:-1], axis=1)), 0.0, 1.0)) / np.diff(t)


def _unit(X, threshold) -> np.ndarray:
    """The tokens (..., n, d) normalised, the link threshold checked (in (0, 1))."""
    if not 0 < validate_finite(threshold, "threshold") < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    return normalize_rows(_tokens(X))


def _unit_gram(X, threshold) -> np.ndarray:
    Xn = _unit(X, threshold)
    return Xn @ np.swapaxes(Xn, -1, -2)


def _count_from_gram(G, threshold, method):
    """Clusters of each Gram matrix (..., n, n): connected components of the link graph by min-label
    propagation vectorised over the batch (each token takes the smallest label among its linked tokens
    until nothing changes, then the distinct labels are counted), or the rank of the link matrix."""
    link = (G > threshold) | np.eye(G.shape[-1], dtype=bool)
    if method == "rank":
        return np.asarray(np.linalg.matrix_rank(link.astype(float)), dtype=int)
    if method != "components":
        raise ValueError(f"method must be 'components' or 'rank', got {method!r}")
    n = link.shape[-1]
    flat = link.reshape(-1, n, n)
    lab = np.broadcast_to(np.arange(n), (flat.shape[0], n)).copy()
    todo = np.arange(flat.shape[0])
    while todo.size:
        cur = lab[todo]
        new = np.where(flat[todo], cur[:, None, :], n).min(axis=-1)
        lab[todo] = new
        todo = todo[np.any(new != cur, axis=1)]
    lab.sort(axis=1)
    return (1 + np.count_nonzero(np.diff(lab, axis=1), axis=1)).reshape(link.shape[:-2])


def _scalar(out, kind=int):
    return kind(out) if out.ndim == 0 else out


def count_clusters(X, threshold: float = 0.999, *, method: str = "components"):
    r"""Number of clusters of each cloud: the connected components of the links
    :math:`\langle x_i,x_j\rangle >` ``threshold`` (a lone token is a cluster), or with ``method="rank"`` the
    rank of the 0/1 link matrix (the two differ when links chain).

    Parameters
    ----------
    X, threshold
        Unit tokens (n, d) or (..., n, d), and the link threshold in (0, 1).
    method : {"components", "rank"}

    Returns
    -------
    int or int array

    References
    ----------
    Geshkovski et al., NeurIPS 2023 (arXiv:2305.05465), the threshold; book: ``chapters/07_phase_diagrams.md``.

    Examples
    --------
    >>> import numpy as np
    >>> count_clusters(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    2
    """
    return _scalar(_count_from_gram(_unit_gram(X, threshold), threshold, method))


def cluster_outcomes(X, threshold: float = 0.999) -> dict:
    r"""Whether each cloud is one cluster (every pair linked) or two antipodal clusters (every
    :math:`|\langle x_i,x_j\rangle| >` threshold, some :math:`\langle x_i,x_j\rangle <` -threshold: the
    natural limit of linear attention, odd in each token), and its :func:`count_clusters`, from one Gram matrix.

    Parameters
    ----------
    X, threshold
        As in :func:`count_clusters`.

    Returns
    -------
    dict
        Arrays ``single``, ``antipodal``, ``clusters`` of the batch shape.

    References
    ----------
    Paper 2 (Li et al., 2026), antipodal clusters; book: ``chapters/07_phase_diagrams.md``.
    """
    G = _unit_gram(X, threshold)
    n = G.shape[-1]
    flat = G.reshape(-1, n, n)
    low = flat.min(axis=(1, 2))
    single = low > threshold
    antipodal = np.zeros_like(single)
    maybe = np.nonzero(low < -threshold)[0]  # only these can be antipodal
    antipodal[maybe] = np.abs(flat[maybe]).min(axis=(1, 2)) > threshold
    clusters = np.ones(flat.shape[0], dtype=int)
    rest = np.nonzero(~single)[0]
    clusters[rest] = _count_from_gram(flat[rest], threshold, "components")
    shape = G.shape[:-2]
    return {"single": single.reshape(shape), "antipodal": antipodal.reshape(shape), "clusters": clusters.reshape(shape)}


def ward_clusters(X, threshold: float = 0.999):
    r"""Number of clusters of each cloud by Ward linkage cut at the chord :math:`\sqrt{2(1-\text{threshold})}`
    (:func:`count_clusters` for tight, separated clusters; Ward does not chain).

    Parameters
    ----------
    X, threshold
        As in :func:`count_clusters`.

    Returns
    -------
    int or int array

    References
    ----------
    J. H. Ward, *Hierarchical grouping to optimize an objective function*, J. Amer. Statist. Assoc. 58 (1963).
    """
    Xn = _unit(X, threshold)
    delta = math.sqrt(2.0 * (1.0 - threshold))
    flat = Xn.reshape(-1, *Xn.shape[-2:])
    out = np.array([fcluster(linkage(Y, method="ward"), t=delta, criterion="distance").max() for Y in flat])
    return _scalar(out.astype(int).reshape(Xn.shape[:-2]))


def is_single_cluster(X, threshold: float = 0.999):
    r"""Whether every pair of a cloud has :math:`\langle x_i,x_j\rangle >` ``threshold`` (one cluster, no chaining).

    Parameters
    ----------
    X, threshold
        As in :func:`count_clusters`.

    Returns
    -------
    bool or bool array

    References
    ----------
    Geshkovski et al., NeurIPS 2023 (arXiv:2305.05465); book: ``chapters/07_phase_diagrams.md``.
    """
    return _scalar(_unit_gram(X, threshold).min(axis=(-1, -2)) > threshold, bool)


def coordinate_means(X) -> np.ndarray:
    r"""Per-coordinate mean :math:`m_l=\frac1n\sum_k x_k^{(l)}`, the authors' diagnostic of cyclic motion [R]:
    it settles when the tokens rest and moves on when clusters rotate.

    Parameters
    ----------
    X : array (n, d) or (m, n, d)

    Returns
    -------
    array (d,) or (m, d)

    References
    ----------
    Paper 2 (Li et al., 2026) and the authors' code; book: ``chapters/06_high_dimensional.md``.
    """
    return _tokens(X).mean(axis=-2)


def plane_order_parameters(X, planes=None) -> np.ndarray:
    r"""The order parameter :math:`R_2` of the tokens in coordinate planes, weighted by their length there.

    For the plane :math:`(i, j)` and :math:`w_k=x_k^{(i)}+\mathrm i\,x_k^{(j)}`,
    :math:`z_{ij}=\sum_k w_k^2/\sum_k|w_k|^2` (:math:`|z|\le1`; the planar :math:`R_2` for tokens in the plane).

    Parameters
    ----------
    X, planes
        Tokens (n, d) or (m, n, d), and pairs (i, j) (default :math:`(0,1),(2,3),\dots`, the rotation planes
        of the block recipes of chapter 6).

    Returns
    -------
    complex array (P,) or (m, P)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-r2).
    """
    X = _tokens(X)
    d = X.shape[-1]
    idx = real_array([(2 * p, 2 * p + 1) for p in range(d // 2)] if planes is None else planes, "planes")
    if idx.ndim != 2 or idx.shape[1] != 2 or idx.size == 0 or idx.min() < 0 or idx.max() >= d or np.any(idx % 1):
        raise ValueError(f"planes must be pairs of coordinates in [0, {d}), got {planes!r}")
    idx = idx.astype(int)
    if np.any(idx[:, 0] == idx[:, 1]):
        raise ValueError(f"planes must be pairs of two different coordinates, got {planes!r}")
    w = X[..., idx[:, 0]] + 1j * X[..., idx[:, 1]]  # (..., n, P)
    mass = np.sum(np.abs(w) ** 2, axis=-2)
    return np.sum(w**2, axis=-2) / np.where(mass > 0, mass, 1.0)


def window_ranges(t, y, window: float) -> tuple[np.ndarray, np.ndarray]:
    r"""The range :math:`\max-\min` of a signal over consecutive windows of length ``window`` (a damped
    oscillation has shrinking ranges, a persistent one keeps them).

    Parameters
    ----------
    t, y, window
        Increasing times (m,), the signal (m, ...) (one range per column), the window length.

    Returns
    -------
    starts, ranges : arrays (w,) and (w, ...)
        Start of each complete window, and the range over it.

    References
    ----------
    Book: ``chapters/06_high_dimensional.md`` (oscillations at d = 100).
    """
    t, y = np.asarray(t, dtype=float), np.asarray(y)
    if t.ndim != 1 or y.shape[0] != t.size or t.size < 2:
        raise ValueError("t must be 1-D with one entry per row of y")
    if not (window > 0):
        raise ValueError(f"window must be positive, got {window}")
    starts = np.arange(t[0], t[-1] - window + 1e-12 * max(1.0, abs(t[-1])), window)
    return starts, np.array([np.ptp(y[(t >= a) & (t <= a + window)], axis=0) for a in starts])
