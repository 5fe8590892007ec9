r"""Order parameters and cluster detectors of a cloud of tokens, in any dimension.

Through the second moment :math:`\Sigma=\frac1n\sum_j x_jx_j^\top`, without Gram matrices:
:func:`~tokendynamics.metrics.order_parameters` (:math:`\hat R_1,\hat R_2`), :func:`top_direction` (top eigenpair of
:math:`\Sigma`), :func:`first_passage_times`, :func:`axis_speed`. From the Gram matrix of one
state: :func:`detect_clusters`, :func:`sorted_gram`, :func:`pair_overlaps`. Batched over clouds
(..., n, d), for ensembles: :func:`count_clusters` (connected components, or the rank, of the
thresholded Gram matrix), :func:`ward_clusters` (Ward linkage, the independent check),
:func:`is_single_cluster`, :func:`is_two_antipodal_clusters`.

Oscillations in high dimension: :func:`coordinate_means` (the authors' diagnostic of cyclic motion),
:func:`plane_order_parameters` (the order parameter :math:`R_2` of each coordinate plane) and
:func:`window_ranges` (how much a signal still moves, window by window).

References
----------
Paper 2 (Li et al., 2026), its high-dimensional experiments (book: ``chapters/06_high_dimensional.md``,
equation (eq-hd-R)); B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *The emergence of clusters
in self-attention dynamics*, NeurIPS 2023 (arXiv:2305.05465), for the 0.999 threshold of
:func:`detect_clusters`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.linalg import eigh
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .docstrings import fill_doc
from .particles import normalize_rows
from .validation import validate_finite, validate_finite_array

__all__ = [
    "second_moment",
    "order_parameters",
    "top_direction",
    "pair_overlaps",
    "sorted_gram",
    "ClusterReport",
    "detect_clusters",
    "first_passage_times",
    "axis_speed",
    "count_clusters",
    "cluster_outcomes",
    "ward_clusters",
    "is_single_cluster",
    "is_two_antipodal_clusters",
    "coordinate_means",
    "plane_order_parameters",
    "window_ranges",
]


_UNIT_TOKENS_THRESHOLD = r"""X : array (n, d) or (..., n, d)
    Unit tokens.
threshold : float
    Link threshold on :math:`\langle x_i,x_j\rangle`, in (0, 1)."""

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    "tokens": """
        X : array (n, d) or (m, n, d)
            Tokens.
    """,
    "unit_tokens_threshold": _UNIT_TOKENS_THRESHOLD,
    # the Parameters and Returns sections of the cluster predicates
    "predicate_sections": "Parameters\n----------\n"
    + _UNIT_TOKENS_THRESHOLD
    + "\n\nReturns\n-------\nbool or bool array",
    "refs_hd": """
        Paper 2 (Li et al., 2026), its high-dimensional experiments; book:
        ``chapters/06_high_dimensional.md``.
    """,
    "refs_threshold": """
        B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *The emergence of clusters in self-attention
        dynamics*, NeurIPS 2023 (arXiv:2305.05465), for the threshold 0.999; book: ``chapters/07_phase_diagrams.md``.
    """,
}


def _tokens(X) -> np.ndarray:
    X = validate_finite_array(X, "X")
    if X.ndim < 2 or X.shape[-2] < 2 or X.shape[-1] < 1:
        raise ValueError(f"X must hold tokens of shape (..., n, d) with n >= 2, got {X.shape}")
    return X


def _cloud(X) -> np.ndarray:
    """One cloud of tokens (n, d), n >= 2."""
    X = _tokens(X)
    if X.ndim != 2:
        raise ValueError(f"X must be one cloud of tokens (n, d), got shape {X.shape}")
    return X


def _second_moment(X) -> np.ndarray:
    return np.matmul(np.swapaxes(X, -1, -2), X) / X.shape[-2]


@fill_doc(_DOC)
def second_moment(X) -> np.ndarray:
    r"""Second moment :math:`\Sigma=\frac1n\sum_j x_jx_j^\top` of tokens, or of each frame of a stack.

    Parameters
    ----------
    %(tokens)s

    Returns
    -------
    array (d, d) or (m, d, d)

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book:
    ``chapters/06_high_dimensional.md``, equation (eq-hd-sigma).
    """
    return _second_moment(_tokens(X))


def order_parameters(X):
    r"""The order parameters :math:`\hat R_1,\hat R_2` of a cloud of tokens, without the Gram matrix.

    :math:`\hat R_1=\mathrm{mean}_{i<j}\langle x_i,x_j\rangle` and
    :math:`\hat R_2=\mathrm{mean}_{i<j}\langle x_i,x_j\rangle^2` (the pair averages of paper 2's
    high-dimensional experiments).

    Closed forms: :math:`\sum_{i,j}\langle x_i,x_j\rangle^2=n^2\operatorname{tr}\Sigma^2` and
    :math:`\sum_{i,j}\langle x_i,x_j\rangle=n^2|\bar x|^2`; removing the diagonal,

    .. math::
       \hat R_2=\frac{n^2\operatorname{tr}\Sigma^2-\sum_i|x_i|^4}{n(n-1)},\qquad
       \hat R_1=\frac{n^2|\bar x|^2-\sum_i|x_i|^2}{n(n-1)},

    i.e. :math:`(n\operatorname{tr}\Sigma^2-1)/(n-1)` and :math:`(n|\bar x|^2-1)/(n-1)` for unit tokens.
    Cost :math:`O(n\min(n,d)^2)` per frame instead of :math:`O(n^2d)`. Uniform tokens give
    :math:`\hat R_2\approx1/d`, :math:`\hat R_1\approx0`; two antipodal clusters
    :math:`\hat R_2=1,\ \hat R_1\approx0`; one cluster both 1.

    Parameters
    ----------
    X : array (n, d) or (m, n, d)
        Tokens (one cloud or m frames).

    Returns
    -------
    R1, R2 : float or array (m,)

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book:
    ``chapters/06_high_dimensional.md``, equation (eq-hd-R).

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


@fill_doc(_DOC)
def top_direction(X):
    r"""Top eigenvalue :math:`\lambda_1(\Sigma)` and a unit top eigenvector :math:`u_1` of the second
    moment, for tokens (n, d) or a stack (m, n, d).

    :math:`\lambda_1\to1` for one cluster or two antipodal clusters, and :math:`u_1` is the cluster
    axis (the top right-singular vector of X). The sign of :math:`u_1` is fixed so that its largest
    entry in absolute value is positive.

    Parameters
    ----------
    %(tokens)s

    Returns
    -------
    lam1 : float or array (m,)
        :math:`\lambda_1(\Sigma)`.
    u1 : array (d,) or (m, d)
        Unit top eigenvector.

    References
    ----------
    %(refs_hd)s
    """
    return _top_eigenpair(_second_moment(_tokens(X)))


def _top_eigenpair(S: np.ndarray):
    """Top eigenpair of symmetric matrices (d, d) or (m, d, d); only the top pair is computed (LAPACK
    ``syevr`` with an index range, about three times faster than a full batched ``eigh`` at d = 100)."""
    d = S.shape[-1]
    flat = S.reshape(-1, d, d)
    if d <= 32:  # small matrices: one batched call beats a Python loop
        w, V = np.linalg.eigh(flat)
        lam, U = w[:, -1].copy(), V[:, :, -1].copy()
    else:
        lam = np.empty(flat.shape[0])
        U = np.empty((flat.shape[0], d))
        for k, M in enumerate(flat):
            w, v = eigh(M, subset_by_index=[d - 1, d - 1], check_finite=False)
            lam[k], U[k] = w[0], v[:, 0]
    j = np.argmax(np.abs(U), axis=1)
    U *= np.sign(U[np.arange(len(U)), j])[:, None]
    return lam.reshape(S.shape[:-2]), U.reshape(S.shape[:-1])


@fill_doc(_DOC)
def pair_overlaps(X) -> np.ndarray:
    r"""All :math:`\langle x_i,x_j\rangle` for :math:`i<j`, for histograms.

    Parameters
    ----------
    X : array (n, d)
        Tokens.

    Returns
    -------
    array (n(n-1)/2,)

    References
    ----------
    %(refs_hd)s
    """
    X = _cloud(X)
    i, j = np.triu_indices(X.shape[0], k=1)
    return (X @ X.T)[i, j]


@fill_doc(_DOC)
def sorted_gram(X, axis=None):
    r"""Gram matrix :math:`\langle x_i,x_j\rangle` with tokens ordered by the sign of their projection
    on ``axis`` (default: the top eigenvector of :math:`\Sigma` of X), as in paper 2's high-dimensional
    figures.

    Two antipodal clusters give two diagonal blocks of +1 and off-diagonal blocks of -1; one
    cluster gives all ones. To draw an earlier state in the order of the final one, index it
    with the returned ``order``.

    Parameters
    ----------
    X : array (n, d)
        Tokens.
    axis : array (d,), optional
        Direction of the split.

    Returns
    -------
    G : array (n, n)
        The sorted Gram matrix.
    order : array of int (n,)
        The permutation.
    split : int
        Number of tokens with a non-negative projection (the block border).

    References
    ----------
    %(refs_hd)s
    """
    X = _cloud(X)
    u = _top_eigenpair(_second_moment(X))[1] if axis is None else validate_finite_array(axis, "axis")
    if u.shape != (X.shape[1],):
        raise ValueError(f"axis must have shape ({X.shape[1]},), got {u.shape}")
    proj = X @ u
    order = np.lexsort((-np.abs(proj), proj < 0))  # positive side first, strongest first
    Xs = X[order]
    return Xs @ Xs.T, order, int(np.sum(proj >= 0))


@dataclass(frozen=True)
class ClusterReport:
    """Result of :func:`detect_clusters`.

    Attributes
    ----------
    n_clusters : int
        Number of groups of tokens with pairwise :math:`\\langle x_i,x_j\\rangle >` threshold
        (connected components of the thresholded Gram matrix; singletons count).
    n_axes : int
        Number of groups after identifying :math:`x` with :math:`-x` (components of
        :math:`\\langle x_i,x_j\\rangle^2 >` threshold²).
    antipodal : bool
        True if there are at least two clusters and each cluster has an antipodal partner
        (a cluster whose mean direction is opposite to within the threshold).
    sizes : tuple of int
        Cluster sizes, largest first.
    labels : array (n,)
        Cluster index of every token (clusters numbered by decreasing size).
    clustered_pairs : float
        Fraction of pairs with :math:`\\langle x_i,x_j\\rangle^2 >` threshold (the bar at 1 of the
        histograms of :math:`\\langle x_i,x_j\\rangle^2` in paper 2's high-dimensional figures).
    threshold : float
        The threshold used.

    References
    ----------
    B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, NeurIPS 2023 (arXiv:2305.05465), for the
    threshold 0.999; paper 2 (Li et al., 2026), antipodal clusters.
    """

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


@fill_doc(_DOC)
def detect_clusters(X, threshold: float = 0.999) -> ClusterReport:
    r"""Clusters of tokens by thresholding the Gram matrix (Geshkovski et al. use entries > 0.999).

    Two tokens are in the same cluster if they are joined by a chain of pairs with
    :math:`\langle x_i,x_j\rangle >` ``threshold``. Forms the n x n Gram matrix once (this is a
    diagnostic of one state, not a step of a trajectory).

    Parameters
    ----------
    X : array (n, d)
        Tokens.
    threshold : float
        Link threshold on :math:`\langle x_i,x_j\rangle`, in (0, 1).

    Returns
    -------
    ClusterReport

    References
    ----------
    %(refs_threshold)s
    """
    X = _cloud(X)
    threshold = validate_finite(threshold, "threshold")
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    n = X.shape[0]
    Xn = normalize_rows(X)
    G = Xn @ Xn.T
    _, lab = connected_components(G > threshold, directed=False)
    n_axes, _ = connected_components(G * G > threshold**2, directed=False)
    sizes = np.bincount(lab)
    rank = np.argsort(-sizes, kind="stable")
    relabel = np.empty_like(rank)
    relabel[rank] = np.arange(len(rank))
    labels = relabel[lab]
    sizes = sizes[rank]
    centres = normalize_rows(np.array([Xn[labels == c].sum(0) for c in range(len(sizes))]))
    C = centres @ centres.T
    antipodal = len(sizes) >= 2 and bool(np.all(np.min(C, axis=1) < -threshold))
    i, j = np.triu_indices(n, k=1)
    frac = float(np.mean(G[i, j] ** 2 > threshold))
    return ClusterReport(
        int(len(sizes)), int(n_axes), antipodal, tuple(int(s) for s in sizes), labels, frac, float(threshold)
    )


def first_passage_times(t, R, levels=(0.1, 0.5, 0.99)) -> np.ndarray:
    r"""First times :math:`t_x=\inf\{t: R(t)>x\}` for each level x (clustering times).

    Linear interpolation between the stored samples; ``inf`` where the level is never exceeded in the run.

    Parameters
    ----------
    t : array (m,)
        Increasing times.
    R : array (m,)
        The signal (e.g. :math:`\hat R_2(t)`).
    levels : sequence of float
        Levels x.

    Returns
    -------
    array (len(levels),)

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book:
    ``chapters/06_high_dimensional.md`` (clustering-time scaling).
    """
    t = validate_finite_array(t, "t")
    R = validate_finite_array(R, "R")
    levels = validate_finite_array(levels, "levels")
    if t.ndim != 1 or R.shape != t.shape or t.size < 1:
        raise ValueError(f"t and R must be 1-D arrays of the same length, got {t.shape} and {R.shape}")
    if np.any(np.diff(t) <= 0):
        raise ValueError("t must be increasing")
    out = []
    for x in np.atleast_1d(levels):
        above = np.nonzero(R > x)[0]
        if above.size == 0:
            out.append(math.inf)
            continue
        k = above[0]
        if k == 0:
            out.append(float(t[0]))
        else:
            f = (x - R[k - 1]) / (R[k] - R[k - 1])
            out.append(float(t[k - 1] + f * (t[k] - t[k - 1])))
    return np.array(out)


def axis_speed(t, axis) -> np.ndarray:
    r"""Angular speed of a line through the origin (an axis :math:`\pm u`) between stored times.

    For unit vectors :math:`u_k` at times :math:`t_k` (e.g. the cluster axis, the top eigenvector
    of :math:`\Sigma`, whose sign is arbitrary), returns
    :math:`\arccos|\langle u_k,u_{k+1}\rangle|/(t_{k+1}-t_k)`, shape (m-1,): radians per unit time,
    at least as fine as the sampling (it cannot see more than a quarter turn between samples).

    Parameters
    ----------
    t : array (m,)
        Increasing times.
    axis : array (m, d)
        Unit vectors (sign arbitrary).

    Returns
    -------
    array (m-1,)
        Radians per unit time.

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional experiments; book:
    ``chapters/06_high_dimensional.md`` (rotating clusters).
    """
    t = validate_finite_array(t, "t")
    U = validate_finite_array(axis, "axis")
    if t.ndim != 1 or t.size < 2 or U.ndim != 2 or U.shape[0] != t.size:
        raise ValueError(f"need times (m,) and axes (m, d) with m >= 2, got {t.shape} and {U.shape}")
    if np.any(np.diff(t) <= 0):
        raise ValueError("t must be increasing")
    cos = np.clip(np.abs(np.sum(U[1:] * U[:-1], axis=1)), 0.0, 1.0)
    return np.arccos(cos) / np.diff(t)


# ---------------------------------------------------------------------------------------------
# counting clusters of many clouds at once (ensembles, phase diagrams)
# ---------------------------------------------------------------------------------------------


def _unit_gram(X, threshold) -> np.ndarray:
    X = _tokens(X)
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    r = np.linalg.norm(X, axis=-1, keepdims=True)
    if np.any(r == 0):
        raise ValueError("cannot count clusters of a zero token")
    Xn = X / r
    return Xn @ np.swapaxes(Xn, -1, -2)


def _components_from_links(link: np.ndarray) -> np.ndarray:
    """Number of connected components of each link graph (..., n, n) (symmetric, diagonal set).

    Min-label propagation, vectorised over the batch: every token takes the smallest label among
    its linked tokens until nothing changes (after at most the graph's diameter of rounds, on the
    clouds that still change), then the distinct labels of each cloud are counted. Equal to
    ``scipy.sparse.csgraph.connected_components`` (tested), without a sparse graph of every cloud.
    """
    n = link.shape[-1]
    flat = link.reshape(-1, n, n)
    lab = np.broadcast_to(np.arange(n), (flat.shape[0], n)).copy()
    todo = np.arange(flat.shape[0])
    while todo.size:
        cur = lab[todo]
        new = np.where(flat[todo], cur[:, None, :], n).min(axis=-1)
        changed = np.any(new != cur, axis=1)
        lab[todo] = new
        todo = todo[changed]
    lab.sort(axis=1)
    return (1 + np.count_nonzero(np.diff(lab, axis=1), axis=1)).reshape(link.shape[:-2])


@fill_doc(_DOC)
def count_clusters(X, threshold: float = 0.999, *, method: str = "components"):
    r"""Number of clusters of each cloud of unit tokens, X of shape (n, d) or (..., n, d).

    Two tokens are *linked* when :math:`\langle x_i,x_j\rangle >` ``threshold`` (strictly: a pair
    exactly at the threshold is not linked), i.e. their angle is below
    :math:`\arccos(\text{threshold})` (2.56° at 0.999, the threshold of Geshkovski, Letrouit,
    Polyanskiy and Rigollet).

    * ``method="components"``: connected components of the link graph (chains of links join
      clusters; a lone token is a cluster of its own), vectorised over the batch (min-label
      propagation; no Python loop over the clouds).
    * ``method="graph"``: the same count by ``scipy.sparse.csgraph.connected_components`` on one
      sparse graph that holds every cloud as a diagonal block (the reference for the above).
    * ``method="rank"``: rank of the 0/1 link matrix (diagonal included). For well-separated
      clusters the matrix is block diagonal with all-ones blocks and its rank is their number; the
      two methods differ exactly when links do not close into cliques (chains), which is a sign
      that the threshold cuts through a spread cloud.

    Tested on two separated clusters, antipodal pairs, a uniform spread and ties at the threshold;
    compare with :func:`ward_clusters`.

    Parameters
    ----------
    %(unit_tokens_threshold)s
    method : {"components", "graph", "rank"}
        How to count.

    Returns
    -------
    int or int array
        One count per cloud (batch shape).

    References
    ----------
    %(refs_threshold)s

    Examples
    --------
    >>> import numpy as np
    >>> count_clusters(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    2
    """
    G = _unit_gram(X, threshold)
    out = _count_from_gram(G, threshold, method)
    return int(out) if out.ndim == 0 else out


def _count_from_gram(G, threshold, method):
    link = G > threshold
    n = link.shape[-1]
    link |= np.eye(n, dtype=bool)
    batch = link.shape[:-2]
    if method == "rank":
        out = np.linalg.matrix_rank(link.astype(float))
    elif method == "components":
        out = _components_from_links(link)
    elif method == "graph":
        m = math.prod(batch)
        b, i, j = np.nonzero(link.reshape(m, n, n))
        graph = coo_matrix((np.ones(b.size, dtype=np.int8), (b * n + i, b * n + j)), shape=(m * n, m * n))
        _, lab = connected_components(graph, directed=False)
        lab = np.sort(lab.reshape(m, n), axis=1)
        out = 1 + np.count_nonzero(np.diff(lab, axis=1), axis=1)
    else:
        raise ValueError(f"method must be 'components', 'graph' or 'rank', got {method!r}")
    return np.asarray(out, dtype=int).reshape(batch)


def cluster_outcomes(X, threshold: float = 0.999) -> dict:
    """:func:`is_single_cluster`, :func:`is_two_antipodal_clusters` and :func:`count_clusters` at once.

    From one Gram matrix per cloud. (Clouds that are one cluster are counted without a graph; only
    clouds with a pair below ``-threshold`` can be antipodal.)

    Parameters
    ----------
    X : array (..., n, d)
        Unit tokens.
    threshold : float
        Link threshold, in (0, 1).

    Returns
    -------
    dict
        Arrays ``single``, ``antipodal``, ``clusters`` of the batch shape.

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``.
    """
    G = _unit_gram(X, threshold)
    n = G.shape[-1]
    flat = G.reshape(-1, n, n)
    low = flat.min(axis=(1, 2))
    single = low > threshold
    antipodal = np.zeros_like(single)
    maybe = np.nonzero(low < -threshold)[0]
    if maybe.size:
        antipodal[maybe] = np.abs(flat[maybe]).min(axis=(1, 2)) > threshold
    clusters = np.ones(flat.shape[0], dtype=int)
    rest = np.nonzero(~single)[0]
    if rest.size:
        clusters[rest] = _count_from_gram(flat[rest], threshold, "components")
    shape = G.shape[:-2]
    return {"single": single.reshape(shape), "antipodal": antipodal.reshape(shape), "clusters": clusters.reshape(shape)}


@fill_doc(_DOC)
def ward_clusters(X, threshold: float = 0.999):
    r"""Number of clusters of each cloud by Ward linkage (``scipy.cluster.hierarchy``), cut at the chord
    length :math:`\delta=\sqrt{2(1-\text{threshold})}` of the angle of :func:`count_clusters`.

    Ward merges the two groups whose union increases the within-group sum of squares least; the
    merge height of two groups of sizes :math:`a, b` with centres :math:`c_a, c_b` is
    :math:`\sqrt{2ab/(a+b)}\,|c_a-c_b|` (the distance for two tokens). Cutting at
    :math:`\delta` keeps apart groups that are farther than the link length, so tight clusters
    that are well separated get the same count as :func:`count_clusters`; a spread cloud does not
    (Ward does not chain). An independent check of the counting, one linkage per cloud (a Python
    loop: use it on samples, not on a whole ensemble).

    Parameters
    ----------
    %(unit_tokens_threshold)s

    Returns
    -------
    int or int array

    References
    ----------
    J. H. Ward, *Hierarchical grouping to optimize an objective function*, J. Amer. Statist. Assoc. 58 (1963).
    """
    G = _unit_gram(X, threshold)  # validates the threshold and the tokens
    X = np.asarray(X, dtype=float)
    Xn = X / np.linalg.norm(X, axis=-1, keepdims=True)
    delta = math.sqrt(2.0 * (1.0 - threshold))
    flat = Xn.reshape(-1, *Xn.shape[-2:])
    out = np.empty(flat.shape[0], dtype=int)
    for k, Y in enumerate(flat):
        Z = linkage(Y, method="ward")
        out[k] = int(fcluster(Z, t=delta, criterion="distance").max())
    out = out.reshape(G.shape[:-2])
    return int(out) if out.ndim == 0 else out


@fill_doc(_DOC)
def is_single_cluster(X, threshold: float = 0.999):
    r"""Whether every pair of tokens of a cloud has :math:`\langle x_i,x_j\rangle >` ``threshold``.

    One cluster, without chaining.

    %(predicate_sections)s

    References
    ----------
    %(refs_threshold)s
    """
    G = _unit_gram(X, threshold)
    out = G.min(axis=(-1, -2)) > threshold
    return bool(out) if out.ndim == 0 else out


@fill_doc(_DOC)
def is_two_antipodal_clusters(X, threshold: float = 0.999):
    r"""Whether a cloud is two antipodal clusters: every pair has :math:`|\langle x_i,x_j\rangle| >`
    ``threshold`` and some pair has :math:`\langle x_i,x_j\rangle <` ``-threshold`` (so both groups
    are occupied). The natural limit of linear attention, which is odd in each token.

    %(predicate_sections)s

    References
    ----------
    Paper 2 (Li et al., 2026), antipodal clusters of linear attention; book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-r2).
    """
    G = _unit_gram(X, threshold)
    out = (np.abs(G).min(axis=(-1, -2)) > threshold) & (G.min(axis=(-1, -2)) < -threshold)
    return bool(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------------------------
# oscillations in high dimension
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def coordinate_means(X) -> np.ndarray:
    r"""Per-coordinate mean token value :math:`m_l=\frac1n\sum_k x_k^{(l)}`, :math:`l=1,\dots,d`.

    The authors' diagnostic of cyclic motion [R]: :math:`m(t)` converges when the tokens come to
    rest (clustered or not) and keeps moving when clusters rotate or the cloud oscillates, even
    where :math:`\hat R_2` has settled. For uniform tokens :math:`|m|\approx n^{-1/2}`.

    Parameters
    ----------
    %(tokens)s

    Returns
    -------
    array (d,) or (m, d)

    References
    ----------
    Paper 2 (Li et al., 2026), its high-dimensional diagnostics and the authors' code; book:
    ``chapters/06_high_dimensional.md``.
    """
    return _tokens(X).mean(axis=-2)


@fill_doc(_DOC)
def plane_order_parameters(X, planes=None) -> np.ndarray:
    r"""The order parameter :math:`R_2` of the tokens seen in coordinate planes, weighted by their length there.

    For the plane of coordinates :math:`(i, j)` and :math:`w_k=x_k^{(i)}+\mathrm i\,x_k^{(j)}`,

    .. math:: z_{ij}=\frac{\sum_k w_k^2}{\sum_k|w_k|^2},\qquad |z_{ij}|\le1,

    the :math:`R_2=\frac1n\sum_ke^{2\mathrm i\theta_k}` of the planar theory when the tokens lie in the
    plane, and, in general, the :math:`R_2` of their projections counted with the mass
    :math:`|w_k|^2` they have there (its modulus is the anisotropy of the plane's block of
    :math:`\Sigma`: :math:`|z|=(\lambda_1-\lambda_2)/(\lambda_1+\lambda_2)`). For the block recipes of
    chapter 6 the rotation planes of V are the coordinate planes :math:`(2p, 2p+1)`, the default.

    Parameters
    ----------
    %(tokens)s
    planes : sequence of pairs (i, j), optional
        Default: :math:`(0,1),(2,3),\dots`, the :math:`\lfloor d/2\rfloor` consecutive pairs.

    Returns
    -------
    complex array (P,) or (m, P)

    References
    ----------
    Paper 2 (Li et al., 2026), the order parameter :math:`R_2`; book: ``chapters/04_kuramoto_reduction.md``,
    equation (eq-r2), and ``chapters/06_high_dimensional.md``.
    """
    X = _tokens(X)
    d = X.shape[-1]
    if planes is None:
        planes = [(2 * p, 2 * p + 1) for p in range(d // 2)]
    idx = np.asarray(planes, dtype=int)
    if idx.ndim != 2 or idx.shape[1] != 2 or idx.size == 0 or idx.min() < 0 or idx.max() >= d:
        raise ValueError(f"planes must be pairs of coordinates in [0, {d}), got {planes!r}")
    w = X[..., idx[:, 0]] + 1j * X[..., idx[:, 1]]  # (..., n, P)
    mass = np.sum(np.abs(w) ** 2, axis=-2)
    return np.sum(w**2, axis=-2) / np.where(mass > 0, mass, 1.0)


def window_ranges(t, y, window: float) -> tuple[np.ndarray, np.ndarray]:
    r"""The range :math:`\max-\min` of a signal over consecutive windows of length ``window``.

    A damped oscillation has shrinking ranges, a persistent one keeps them. ``y`` may carry extra
    axes after time (one range per column).

    Parameters
    ----------
    t : array (m,)
        Increasing times.
    y : array (m, ...)
        The signal.
    window : float
        Window length.

    Returns
    -------
    starts : array (w,)
        Start of each complete window.
    ranges : array (w, ...)
        :math:`\max-\min` over each window.

    References
    ----------
    Book: ``chapters/06_high_dimensional.md`` (oscillations at d = 100).
    """
    t = np.asarray(t, dtype=float)
    y = np.asarray(y)
    if t.ndim != 1 or y.shape[0] != t.size or t.size < 2:
        raise ValueError("t must be 1-D with one entry per row of y")
    if not (window > 0):
        raise ValueError(f"window must be positive, got {window}")
    starts = np.arange(t[0], t[-1] - window + 1e-12 * max(1.0, abs(t[-1])), window)
    ranges = []
    for a in starts:
        sel = (t >= a) & (t <= a + window)
        ranges.append(np.ptp(y[sel], axis=0))
    return starts, np.array(ranges)
