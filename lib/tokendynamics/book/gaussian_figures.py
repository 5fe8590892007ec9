r"""The official figure protocols of paper 1's code (five cone figures, the rank histograms), regenerated.

The authors' code (``vcastin/2025-transformers-PDEs``) integrates the covariance ODEs
with a projected Euler scheme from grids of trace-one initial covariances, with matrices drawn
from NumPy's legacy global generator. This module rebuilds exactly those matrices
(:func:`legacy_rng` with the same seeds and call order), the layers with the code's scalings in the
library convention (:func:`official_layer`), the initial grids and the solver settings
(:func:`figure_setup`; numbers in :mod:`tokendynamics.book.experiments`), and runs them through
:func:`tokendynamics.gaussian.projected_euler` (:func:`run_figure`) or, for the histograms,
through the official sequential protocol (:func:`rank_histogram`).

The cone figures are named by their keys ``"F1"`` ... ``"F5"`` (convergence to zero, to a line,
to two lines, blow-up, two basins; chapter 2 of the book shows them), the histograms by ``"F6"``.
Corrections of the official scripts' known slips: the softmax panel of the two-lines figure is the
real softmax run (the script overwrote it with the L2 run), and the multi-head panel of the
two-basins figure uses two heads (the script omitted ``H=2``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..attention import Attention
from ..gaussian import clustering_limit, covariance_eigenvalues, projected_euler
from .cache import cached
from .experiments import settings
from .studies.gaussian import cone_coordinates, cone_grid

__all__ = [
    "legacy_rng",
    "official_layer",
    "FigureSetup",
    "figure_setup",
    "run_figure",
    "RankHistogram",
    "rank_histogram",
    "cached_rank_histograms",
]


def legacy_rng(seed: int) -> np.random.RandomState:
    """NumPy's legacy generator ``RandomState(seed)`` — used only to reproduce the official code's draws.

    The official scripts call ``np.random.seed(seed)`` and then ``rand``/``randn`` on the global
    generator; a ``RandomState(seed)`` fed the same calls in the same order returns the same
    numbers. This is the one place in the library where the legacy generator is legitimate:
    everything else uses ``np.random.default_rng``.

    Parameters
    ----------
    seed : int
        The seed the official script passes to ``np.random.seed`` (converted with ``int``); the
        figures' seeds are in ``experiments.toml`` (e.g. ``seed``, ``seed_V``, ``seed_Q``).

    Returns
    -------
    numpy.random.RandomState
        A new legacy generator in the state ``np.random.seed(seed)`` gives the global one; its
        ``rand``/``randn`` calls, made in the script's order, return the script's matrices.
    """
    return np.random.RandomState(int(seed))


def official_layer(kind: str, Q, K, V, *, H: int = 1) -> Attention:
    r"""The layer whose Gaussian ODE is the official code's right-hand side, in the library convention.

    The code writes paper 1's matrix :math:`A_1=K^\top Q/\sqrt d`; the library's score matrix is its
    transpose, :math:`A=A_1^\top=Q^\top K/\sqrt d` (chapter 2 of the book, "Convention").

    * ``"softmax"``: ``rhs_trad``, :math:`A=(K^\top Q/\sqrt d)^\top`.
    * ``"l2"``: ``rhs_L2`` uses :math:`K^\top Q/\sqrt d` but an unscaled :math:`K^\top K`; that is exactly
      the L2 kernel :math:`e^{-|Q'x-K'y|^2}` with :math:`Q'=Q/\sqrt d`, :math:`K'=K` (the term
      :math:`|Q'x|^2` cancels in the normalisation), so the layer is ``l2`` with ``(Q/sqrt(d), K)``.
    * ``"multihead"``: ``rhs_multihead``; :math:`k=d//H`, head :math:`h` takes rows
      :math:`hk..(h+1)k-1` of :math:`Q,K,V`, :math:`A_h=(K_h^\top Q_h/\sqrt k)^\top`, value
      :math:`C_h=W_h^\top V_h` with :math:`W=I` (the rows of :math:`V` of head :math:`h`); a head with no
      rows (fewer rows in :math:`Q` than :math:`Hk`) has :math:`A_h=0`.
    * ``"sinkhorn"``: ``rhs_sinkhorn``, :math:`\varepsilon=1`, :math:`A=(K^\top Q)^\top` without the
      :math:`1/\sqrt d`.

    Parameters
    ----------
    kind : {"softmax", "l2", "multihead", "sinkhorn"}
        Which right-hand side of the official code (``rhs_trad``, ``rhs_L2``, ``rhs_multihead``,
        ``rhs_sinkhorn``) the layer reproduces.
    Q, K : array_like (k, d)
        The query and key matrices as the official code draws them (a single row, shape (d,), is
        read as (1, d)); :math:`d` is the number of columns of ``Q``. For ``"multihead"``, rows
        :math:`hk..(h+1)k-1` belong to head :math:`h`.
    V : array_like (d, d)
        The value matrix (for ``"multihead"``, its rows are split between the heads like those of
        :math:`Q, K`).
    H : int
        Number of heads, used only by ``"multihead"`` (must divide :math:`d`); default 1.

    Returns
    -------
    Attention
        The library layer: kind ``"softmax"`` with score matrix ``A`` (``"softmax"``), kind ``"l2"``
        with ``(Q/sqrt(d), K)``, kind ``"sinkhorn"`` with :math:`\varepsilon = 1`, or for
        ``"multihead"`` a softmax layer with ``H`` heads, ``A`` and ``V`` of shape (H, d, d).

    Raises
    ------
    ValueError
        If ``kind`` is unknown, or for ``"multihead"`` if ``H < 1`` or ``H`` does not divide :math:`d`.
    """
    Q = np.atleast_2d(np.asarray(Q, dtype=float))
    K = np.atleast_2d(np.asarray(K, dtype=float))
    V = np.asarray(V, dtype=float)
    d = Q.shape[1]
    if kind == "softmax":
        return Attention("softmax", A=(np.dot(K.T, Q) / np.sqrt(d)).T, V=V)
    if kind == "l2":
        return Attention("l2", Q=Q / np.sqrt(d), K=K, V=V)
    if kind == "sinkhorn":
        return Attention("sinkhorn", A=np.dot(K.T, Q).T, V=V, eps=1.0)
    if kind == "multihead":
        if H < 1 or d % H:
            raise ValueError(f"the official multi-head layer needs d divisible by H, got d = {d}, H = {H}")
        k = d // H
        W = np.eye(d)
        As, Vs = [], []
        for h in range(H):
            rows = slice(k * h, k * (h + 1))
            As.append((np.dot(K[rows].T, Q[rows]) / np.sqrt(k)).T if Q[rows].shape[0] else np.zeros((d, d)))
            Vs.append(np.dot(W[rows].T, V[rows]))
        return Attention("softmax", A=np.stack(As), V=np.stack(Vs))
    raise ValueError(f"kind must be 'softmax', 'l2', 'multihead' or 'sinkhorn', got {kind!r}")


# ---------------------------------------------------------------------------------------------
# cone figures F1-F5
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class FigureSetup:
    """Everything needed to regenerate one cone figure of the official code.

    Attributes
    ----------
    name : str
        ``"F1"`` ... ``"F5"``.
    layers : dict
        Variant name -> :class:`~tokendynamics.attention.Attention` (official scalings).
    solver : dict
        Variant name -> keyword arguments of :func:`~tokendynamics.gaussian.projected_euler`.
    inits : array (m, 2, 2)
        Trace-one initial covariances (official grid order).
    view : (elev, azim)
        Camera of the 3-D cone plot.
    color : str
        ``"start"`` (colour by the initial :math:`2c`) or ``"end"`` (by the final trace).
    matrices : dict
        The drawn matrices (``Q``, ``K``, ``V``, ...) and derived quantities (e.g. the line of the
        convergence-to-a-line figure).
    """

    name: str
    layers: dict
    solver: dict
    inits: np.ndarray
    view: tuple
    color: str
    matrices: dict = field(default_factory=dict)


def _mixed_sign_QK(rs):
    """Draw (Q, K) until eig(A + A^T) has opposite signs (the official loop of the two-lines and
    two-basins figures)."""
    for _ in range(1000):
        Q = rs.randn(2, 2)
        K = rs.randn(2, 2)
        A = np.dot(K.T, Q)
        ev = np.linalg.eigh(A + A.T)[0]
        if ev[0] * ev[1] < 0:
            return Q, K
    raise RuntimeError("no mixed-sign draw in 1000 attempts")


def figure_setup(name: str, mode: str = "fast") -> FigureSetup:
    """Matrices, layers, initial grid and projected-Euler settings of one cone figure of the authors' code.

    Numbers live in the table ``tokendynamics/book/experiments.toml`` under ``gaussian_<name>``; the
    random matrices are redrawn with :func:`legacy_rng` in the official call order.

    Parameters
    ----------
    name : str
        Key of the cone figure, ``"F1"`` to ``"F5"``: convergence to zero, to a line, to two lines,
        blow-up, two basins.
    mode : {"fast", "full"}
        Which setting of the table ``gaussian_<name>`` gives the grid, its thinning (``every``), the
        seeds and the per-variant Euler settings (:func:`~tokendynamics.book.experiments.settings`).

    Returns
    -------
    FigureSetup
        The figure's variants (one :func:`official_layer` each, with its
        :func:`~tokendynamics.gaussian.projected_euler` keywords), its trace-one initial covariances
        (:func:`~tokendynamics.book.studies.gaussian.cone_grid`, every ``every``-th point), camera, colouring
        rule and the drawn matrices.

    Raises
    ------
    ValueError
        If ``name`` is not one of the five cone figures.
    """
    p = settings(f"gaussian_{name}", mode)
    nu, nw, *lim = p["grid"]
    inits = cone_grid(nu, nw, lim)[:: p["every"]]
    I2 = np.eye(2)
    mats: dict = {}
    if name == "F1":
        rs = legacy_rng(p["seed"])
        Q = rs.rand(2, 2)
        K = -Q
        V = rs.randn(2, 2)
        V = V @ V.T
        values = {"softmax": V, "l2": V, "multihead": V, "sinkhorn": V}
    elif name == "F2":
        rs = legacy_rng(p["seed"])
        q = rs.randn(1, 2)
        q = q / np.linalg.norm(q)
        Q, K = q, -q
        rs.randn(2, 2)  # drawn into V by the script, then V = I is used
        u = rs.randn(1, 2)
        u = u / np.linalg.norm(u)
        u = u - np.inner(u, q) * q
        u = (u / np.linalg.norm(u))[0]
        line = cone_coordinates(np.outer(u, u))
        mats.update(q=q[0], u=u, line=line / np.linalg.norm(line))
        values = {"softmax": I2, "l2": I2, "multihead": I2}
    elif name == "F3":
        Q, K = _mixed_sign_QK(legacy_rng(p["seed"]))
        V = legacy_rng(p["seed_V"]).randn(2, 2)
        values = {"softmax": V, "l2": V}
    elif name == "F4":
        rs = legacy_rng(p["seed"])
        for _ in range(1000):
            Q = rs.randn(2, 2)
            K = rs.randn(2, 2)
            A = np.dot(K.T, Q)
            if np.linalg.eigh(A + A.T)[0][0] > 0:
                break
        else:  # pragma: no cover
            raise RuntimeError("no positive-definite draw in 1000 attempts")
        values = dict.fromkeys(("softmax", "multihead", "l2", "sinkhorn"), I2)
    elif name == "F5":
        Q, K = _mixed_sign_QK(legacy_rng(p["seed"]))
        rs = legacy_rng(p["seed_V"])
        rs.randn(*p["discard"])
        V = rs.randn(2, 2)
        values = {"softmax": V, "l2": V, "multihead": V}
    else:
        raise ValueError(f"unknown cone figure {name!r}; known: F1, F2, F3, F4, F5")
    layers, solver = {}, {}
    for variant, opts in p["variants"].items():
        opts = dict(opts)
        H = opts.pop("H", 1)
        layers[variant] = official_layer(variant, Q, K, values[variant], H=H)
        solver[variant] = opts
    mats.update(Q=Q, K=K, V=dict(values))
    return FigureSetup(
        name=name, layers=layers, solver=solver, inits=inits, view=tuple(p["view"]), color=p["color"], matrices=mats
    )


def run_figure(setup: FigureSetup, variants=None, *, save="log") -> dict:
    """Run the projected Euler scheme of each variant of a :class:`FigureSetup` over its grid.

    Returns ``{variant: EulerRuns}`` (see :func:`tokendynamics.gaussian.projected_euler`).

    Parameters
    ----------
    setup : FigureSetup
        From :func:`figure_setup`: layers, solver settings and the batch of initial covariances.
    variants : iterable of str, optional
        The variants to run, keys of ``setup.layers``; ``None`` runs all of them, in the setup's order.
    save : {"log", "all", "final"} or int
        Which iterates each run keeps, passed to :func:`~tokendynamics.gaussian.projected_euler`
        (default ``"log"``: enough for the cone trajectories of the figures).

    Returns
    -------
    dict of str to EulerRuns
        Variant name -> its batch of runs, one member per initial covariance of ``setup.inits``
        (status, stopping iteration, stored iterates).
    """
    variants = list(setup.layers) if variants is None else list(variants)
    return {v: projected_euler(setup.inits, setup.layers[v], save=save, **setup.solver[v]) for v in variants}


# ---------------------------------------------------------------------------------------------
# rank histograms F6
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RankHistogram:
    r"""Result of the official rank-histogram protocol for one row of the rank histograms.

    Attributes
    ----------
    row : str
        ``"softmax-identity"``, ``"softmax-random"``, ``"l2-identity"`` or ``"l2-random"``.
    dims : tuple of int
    counts : dict
        d -> array (d + 1,): how many converged runs ended with numerical rank 0, 1, ..., d
        (eigenvalues of the last iterate above ``tol_rank``), exceptions excluded.
    attempts, exceptions : dict
        d -> number of integrations, and of converged runs dropped because their rank exceeded
        :math:`\lceil d/2\rceil` (the official code drops them silently).
    eigenvalues : dict
        d -> array (runs, d): eigenvalues (decreasing) of the last iterate of each converged run.
    limit_eigenvalues : dict
        d -> array (runs, d): eigenvalues of the exact limit :math:`\Sigma_\infty`
        (:func:`tokendynamics.gaussian.clustering_limit`) for the ``identity`` rows, else empty
        (no closed form for a general :math:`V`).
    """

    row: str
    dims: tuple
    counts: dict
    attempts: dict
    exceptions: dict
    eigenvalues: dict
    limit_eigenvalues: dict

    def to_arrays(self) -> dict:
        """Plain arrays (counts, attempts, exceptions, eigenvalues per dimension) for the cache.

        Returns
        -------
        dict
            Name -> array, keys suffixed by the dimension (``counts_3``, ``eig_3``, ...) and ``dims``.
        """
        out = {"dims": np.array(self.dims)}
        for d in self.dims:
            out[f"counts_{d}"] = self.counts[d]
            out[f"attempts_{d}"] = np.array(self.attempts[d])
            out[f"exceptions_{d}"] = np.array(self.exceptions[d])
            out[f"eig_{d}"] = self.eigenvalues[d]
            out[f"limit_{d}"] = self.limit_eigenvalues[d]
        return out

    @classmethod
    def from_arrays(cls, row: str, arrays: dict) -> RankHistogram:
        """Inverse of :meth:`to_arrays`.

        Parameters
        ----------
        row : str
            The row of the histogram figure the arrays belong to.
        arrays : dict
            What :meth:`to_arrays` returned (e.g. read back from the cache).

        Returns
        -------
        RankHistogram
        """
        dims = tuple(int(d) for d in arrays["dims"])
        return cls(
            row=row,
            dims=dims,
            counts={d: arrays[f"counts_{d}"] for d in dims},
            attempts={d: int(arrays[f"attempts_{d}"]) for d in dims},
            exceptions={d: int(arrays[f"exceptions_{d}"]) for d in dims},
            eigenvalues={d: arrays[f"eig_{d}"] for d in dims},
            limit_eigenvalues={d: arrays[f"limit_{d}"] for d in dims},
        )


def _histogram_parameters(row: str, mode: str, dims):
    p = settings("gaussian_F6", mode)
    if row not in p["rows"]:
        raise ValueError(f"unknown F6 row {row!r}; known: {sorted(p['rows'])}")
    r = p["rows"][row]
    all_dims = list(p["dims"])
    n = p["n_per_dim"]
    dims = all_dims if dims is None else list(dims)
    if not set(dims) <= set(all_dims):
        raise ValueError(f"dims must be among {all_dims}")
    rs = legacy_rng(p["seed_Q"])
    repeated = np.repeat(all_dims, n)
    Qs = [rs.randn(d // 2, d) for d in repeated]
    if r["value"] == "identity":
        Vs = [np.eye(d) for d in repeated]
    else:
        rv = legacy_rng(r["seed_V"])
        Vs = [rv.randn(d, d) for d in repeated]
        Vs = [np.dot(V.T, V) for V in Vs]
    return p, r, all_dims, dims, n, Qs, Vs


def rank_histogram(
    row: str, mode: str = "fast", *, dims=None, backend: str = "auto", max_attempts: int | None = None
) -> RankHistogram:
    r"""Run the official rank-histogram protocol (``histograms.py``) for one row of the rank histograms.

    For each dimension :math:`d` (index :math:`j`): reseed the legacy generator with
    ``seed_inits``; for each attempt draw :math:`L` = ``randn(d, d)``, :math:`\Sigma_0=LL^\top`,
    take the parameters number :math:`i` (= converged runs so far) of this dimension —
    :math:`Q_i` = ``randn(d//2, d)`` (seed ``seed_Q``, all 300 drawn up front), :math:`K_i=-Q_i`,
    :math:`V=I` or :math:`V=\tilde V^\top\tilde V` — and integrate with the official projected Euler
    (compiled with numba when available, ``tokendynamics._gaussian_kernels``). A converged run
    records the number of eigenvalues of its last iterate above ``tol_rank`` (dropped as an
    exception if above :math:`\lceil d/2\rceil`) and increments :math:`i`; stop at ``n_per_dim``
    converged runs or ``n_max`` attempts. ``max_attempts`` caps the attempts (a documented subset).

    Parameters
    ----------
    row : str
        One row of the settings ``gaussian_F6``: ``"softmax-identity"``, ``"softmax-random"``,
        ``"l2-identity"`` or ``"l2-random"`` (attention kind, value matrix, Euler steps and tolerances).
    mode : {"fast", "full"}
        Setting of ``gaussian_F6`` read (the two settings of the histograms are the same).
    dims : iterable of int, optional
        The dimensions to run, a subset of the setting's ``dims``; ``None`` runs them all. The
        parameters :math:`Q_i, V` are drawn for every dimension either way, so a subset reproduces
        the full run's draws.
    backend : {"auto", "numpy", "numba"}
        Passed to :func:`~tokendynamics.gaussian.projected_euler`.
    max_attempts : int, optional
        Upper bound on the integrations per dimension, on top of the row's ``n_max``; ``None``:
        ``n_max`` only.

    Returns
    -------
    RankHistogram
        Per dimension: the counts of final numerical ranks, the attempts and dropped exceptions, the
        final eigenvalues and, for the ``identity`` rows, those of the exact limit.

    Raises
    ------
    ValueError
        If ``row`` is not a row of the settings, or ``dims`` has a dimension outside them.
    """
    p, r, all_dims, dims, n, Qs, Vs = _histogram_parameters(row, mode, dims)
    counts, attempts, exceptions, eigs, limits = {}, {}, {}, {}, {}
    for d in dims:
        j = all_dims.index(d)
        rs = legacy_rng(p["seed_inits"])
        step = r["steps"][j]
        i = 0
        ranks, ev, lim = [], [], []
        n_exc = 0
        n_try = 0
        cap = r["n_max"] if max_attempts is None else min(r["n_max"], max_attempts)
        for _ in range(cap):
            index = n * j + i
            Q, V = Qs[index], Vs[index]
            L = rs.randn(d, d)
            S0 = L @ L.T
            layer = official_layer(r["kind"], Q, -Q, V)
            runs = projected_euler(
                S0, layer, step=step, tol_low=r["tol_low"], max_iter=r["max_iter"], save="final", backend=backend
            )
            last = runs.cov_last[0]
            n_try += 1
            if runs.status[0] == "converged":
                lam = covariance_eigenvalues(last)
                rank = int(np.sum(lam > p["tol_rank"]))
                if rank <= (d + 1) // 2:
                    ranks.append(rank)
                    ev.append(lam)
                    if r["value"] == "identity":
                        lim.append(covariance_eigenvalues(clustering_limit(S0, layer)))
                else:
                    n_exc += 1
                i += 1
            if i == n:
                break
        counts[d] = np.bincount(np.array(ranks, dtype=int), minlength=d + 1)
        attempts[d] = n_try
        exceptions[d] = n_exc
        eigs[d] = np.array(ev).reshape(-1, d)
        limits[d] = np.array(lim).reshape(-1, d)
    return RankHistogram(
        row=row,
        dims=tuple(dims),
        counts=counts,
        attempts=attempts,
        exceptions=exceptions,
        eigenvalues=eigs,
        limit_eigenvalues=limits,
    )


def cached_rank_histograms(mode: str = "fast", rows=None) -> dict:
    """The rank histograms of every row, through :func:`tokendynamics.book.cache.cached` (parameters + code
    fingerprint).

    Recomputed only when the rank-histogram settings or the code of the package change (the fingerprint
    covers every module of ``tokendynamics``); the cache files are ``data/gaussian_F6_<row>.npz``
    (see ``data/README.md``; the fast and full settings of the histograms are the same).

    Parameters
    ----------
    mode : {"fast", "full"}
        Setting of ``gaussian_F6`` used both to compute missing histograms and as the cache's
        parameters (together with each row's own table).
    rows : iterable of str, optional
        The rows to load or compute; ``None``: every row of the setting, in the table's order.

    Returns
    -------
    dict of str to RankHistogram
        Row name -> its histogram, read from ``data/gaussian_F6_<row>.npz`` when that file matches the
        parameters and the code fingerprint, else recomputed by :func:`rank_histogram` (all
        dimensions, default backend) and stored.
    """
    p = settings("gaussian_F6", mode)
    rows = list(p["rows"]) if rows is None else list(rows)
    out = {}
    for row in rows:
        params = {k: v for k, v in p.items() if k != "rows"}
        params["row"] = p["rows"][row]

        def compute(row: str = row) -> dict:
            return rank_histogram(row, mode).to_arrays()

        arrays = cached(f"gaussian_F6_{row}", params, compute)
        out[row] = RankHistogram.from_arrays(row, arrays)
    return out
