"""Book layer of the phase-diagram chapter: the runs of one setting (cached, on joblib) and its drawings.

:func:`phase_points` lists the batched runs a setting of ``experiments.settings("phase_diagrams")``
needs (one per kind and recipe, the resampled layers, the cluster counts at other n, the step
check, the planar check); :func:`run_phase` computes them through
:func:`tokendynamics.sweeps.sweep` (joblib, or Dask with ``client=``), each cached with its
parameters by :func:`tokendynamics.book.cache.cached` (:func:`cached_task`). The drawing helpers
keep the chapter's plotting cells short.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import attention, ensembles, metrics, phase
from ..docstrings import fill_doc
from ..kinds import KINDS
from ..sweeps import sweep
from .cache import cached
from .studies.phase import glpr_grid, planar_linear_check

__all__ = [
    "merge_betas",
    "KIND_LABELS",
    "KIND_COLORS",
    "RECIPE_LABELS",
    "RECIPE_COLORS",
    "phase_points",
    "cached_task",
    "run_phase",
    "log_edges",
    "draw_probability_map",
    "draw_probability_curve",
    "glpr_transition",
    "draw_glpr_grid",
]

#: one name per variant: the kinds' own labels (a kind added to the registry brings its own)
KIND_LABELS = {name: kind.label for name, kind in KINDS.items()}
KIND_COLORS = {
    "softmax": "#1f5fa8",
    "l2": "#6a3d9a",
    "sigmoid": "#1b9e77",
    "unnormalized_softmax": "#d95f02",
    "sinkhorn": "#a6761d",
    "linear": "#c51b7d",
    "relu": "#e7298a",
    "hardmax": "#444444",
}
RECIPE_LABELS = {
    "identity": "Q = K = V = I",
    "gaussian": "Gaussian Q, K; V = I",
    "goe": "GOE score; V = I",
    "minus_identity": "Q = K = I, V = -I",
}
RECIPE_COLORS = {"identity": "#1f5fa8", "gaussian": "#d95f02", "goe": "#1b9e77", "minus_identity": "#7a7a7a"}

# relative cost of one system-step of each kind (measured): orders the runs, heavy ones first
# the reference every run of the chapter cites (tokendynamics.docstrings.fill_doc)
_DOC = {
    "reference": "Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).",
    "grid": "G : dict\n    A result of :func:`~tokendynamics.book.studies.phase.glpr_grid`.",
}

# relative cost of a step per kind (measured; a kind not listed counts as softmax), to start the heaviest runs first
_COST = {"sinkhorn": 6.0, "unnormalized_softmax": 2.2, "l2": 1.2, "sigmoid": 1.1, "softmax": 1.0, "linear": 0.35}


@fill_doc(_DOC)
def phase_points(p: dict) -> list[dict]:
    """The runs of one setting ``p`` of ``settings("phase_diagrams")``, heaviest first.

    Each is a dict with a ``label`` (its name in :func:`run_phase`'s result), a ``task``
    ("statistics": :func:`tokendynamics.phase.cluster_statistics`; "planar":
    :func:`tokendynamics.book.studies.phase.planar_linear_check`) and the task's keyword arguments. Labels:
    ``kind/recipe`` (the maps), ``kind/identity/fine`` (a finer grid of beta around a transition,
    the same clouds), ``kind/recipe/every<tau>`` (resampled layers), ``softmax/identity/n<n>``
    (cluster counts at other n), ``check/kind`` (the same clouds with a step ``factor`` times
    smaller, at the largest beta or two), ``planar/recipe`` (linear attention in d = 2). A run has
    ``p["clouds"]`` clouds per beta, or ``p["kind_clouds"][kind]`` (optional) for the maps, finer grids and
    recipes of that kind: more clouds where the compiled batch kernel makes them cheap (layers fixed along
    the depth; the resampled runs keep ``p["clouds"]``).

    Parameters
    ----------
    p : dict
        One setting of ``settings("phase_diagrams")``.

    Returns
    -------
    list of dict

    References
    ----------
    %(reference)s
    """
    common = dict(d=p["d"], seed=p["seed"], layer_seed=p["layer_seed"], threshold=p["threshold"])
    kind_clouds = p.get("kind_clouds", {})
    unknown = sorted(set(kind_clouds) - set(p["kinds"]))
    if unknown:
        raise ValueError(f"kind_clouds names kinds that the setting does not run: {unknown}")

    def point(label, kind, recipe, *, clouds=None, n=None, depths=None, betas=None, dt_factor=1, **extra):
        spec = dict(p["kinds"][kind])
        grid = spec.pop("betas")
        if clouds is None:  # a kind's own number of clouds applies to its layers fixed along the depth
            clouds = p["clouds"] if "resample_every" in extra else kind_clouds.get(kind, p["clouds"])
        return dict(
            label=label,
            task="statistics",
            kind=kind,
            recipe=recipe,
            betas=grid if betas is None else betas,
            depths=p["depths"] if depths is None else depths,
            n=p["n"] if n is None else n,
            clouds=clouds,
            dt=spec.pop("dt") / dt_factor,
            **common,
            **spec,
            **extra,
        )

    pts = [point(f"{kind}/identity", kind, "identity") for kind in p["kinds"]]
    pts += [point(f"{kind}/identity/fine", kind, "identity", betas=b) for kind, b in p["critical"].items()]
    pts += [point(f"{k}/{r}", k, r) for k in p["recipe_kinds"] for r in p["recipes"] if r != "identity"]
    k, r = p["resample_kind"], p["resample_recipe"]
    pts += [point(f"{k}/{r}/every{tau:g}", k, r, resample_every=tau) for tau in p["resample_every"]]
    pts += [
        point(f"softmax/identity/n{n}", "softmax", "identity", n=n, clouds=p["count_clouds"], depths=[p["count_depth"]])
        for n in p["count_ns"]
        if n != p["n"]
    ]
    chk = p["step_check"]
    pts += [
        point(
            f"check/{kind}",
            kind,
            "identity",
            clouds=chk["clouds"],
            depths=[chk["depth"]],
            betas=p["kinds"][kind]["betas"][-chk["betas"] :],
            dt_factor=chk["factor"],
        )
        for kind in p["kinds"]
    ]
    pl = p["planar"]
    pts += [
        dict(
            label=f"planar/{r}",
            task="planar",
            recipe=r,
            n=p["n"],
            seed=p["seed"],
            layer_seed=p["layer_seed"],
            threshold=p["threshold"],
            **pl,
        )
        for r in p["recipes"]
    ]

    def cost(q):
        if q["task"] == "planar":
            return 0.1 * q["clouds"] * q["n"] * max(q["depths"]) / q["dt"]
        steps = max(q["depths"]) / q["dt"]
        return _COST.get(q["kind"], 1.0) * len(q["betas"]) * q["clouds"] * q["n"] ** 2 * steps

    return sorted(pts, key=cost, reverse=True)


@fill_doc(_DOC)
def cached_task(label: str, task: str, **params) -> dict:
    """One run of :func:`phase_points` (``task`` "statistics" or "planar") or the grid of
    :func:`tokendynamics.book.studies.phase.glpr_grid` (``task`` "glpr"), cached with its parameters
    and a fingerprint of the code that computes it (recomputed when either changes).

    Parameters
    ----------
    label : str
        Name of the run.
    task : {"statistics", "planar", "glpr"}
        What to compute.
    **params
        Keyword arguments of the task.

    Returns
    -------
    dict of arrays

    References
    ----------
    %(reference)s
    """
    tasks: dict[str, Callable[..., Any]] = {
        "statistics": phase.cluster_statistics,
        "planar": planar_linear_check,
        "glpr": glpr_grid,
    }
    fn = tasks[task]
    name = "phase_" + "".join(c if c.isalnum() else "_" for c in label) + f"_c{params['clouds']}"
    return cached(
        name,
        {"task": task, **params},
        lambda: fn(**params),
        code=[fn, phase.cluster_statistics, ensembles, attention, metrics.cluster_outcomes, metrics._count_from_gram],
    )


@fill_doc(_DOC)
def run_phase(points: list[dict], *, n_jobs: int = 1, client=None, progress: bool = True) -> dict:
    """Every run through :func:`cached_task`, on joblib (``n_jobs`` processes) or on Dask (``client``,
    see :func:`tokendynamics.sweeps.sweep`); returns ``{label: result}``.

    Parameters
    ----------
    points : list of dict
        From :func:`phase_points`.
    n_jobs : int
        joblib processes.
    client : dask.distributed.Client, optional
        Run on this Dask cluster.
    progress : bool
        Show a progress bar.

    Returns
    -------
    dict
        ``{label: result}``.

    References
    ----------
    %(reference)s
    """
    results = sweep(cached_task, points, n_jobs=n_jobs, client=client, progress=progress, desc="phase runs")
    return {q["label"]: r for q, r in zip(points, results)}


def merge_betas(*results) -> dict:
    """Results of :func:`tokendynamics.phase.cluster_statistics` on the same clouds and depths but
    different grids of beta, merged into one grid (sorted); outcome arrays joined along beta.

    Parameters
    ----------
    *results : dict
        Results of :func:`tokendynamics.phase.cluster_statistics`.

    Returns
    -------
    dict
    """
    betas = np.concatenate([r["betas"] for r in results])
    if len(np.unique(betas)) != betas.size:
        raise ValueError("the grids of beta overlap")
    order = np.argsort(betas)
    out = {"betas": betas[order], "depths": results[0]["depths"]}
    for key in ("single", "antipodal", "clusters"):
        out[key] = np.concatenate([r[key] for r in results], axis=1)[:, order]
    return out


# ---------------------------------------------------------------------------------------------
# drawing
# ---------------------------------------------------------------------------------------------


def log_edges(x) -> np.ndarray:
    """Cell edges around log-spaced centres x (geometric midpoints, extended at both ends).

    Parameters
    ----------
    x : array (m,)
        Positive, increasing centres.

    Returns
    -------
    array (m + 1,)

    Examples
    --------
    >>> log_edges([1.0, 100.0])
    array([1.e-01, 1.e+01, 1.e+03])
    """
    x = np.asarray(x, dtype=float)
    lx = np.log(x)
    mid = (lx[1:] + lx[:-1]) / 2
    return np.exp(np.concatenate([[lx[0] - (mid[0] - lx[0])], mid, [lx[-1] + (lx[-1] - mid[-1])]]))


def draw_probability_map(ax, betas, depths, P, *, contour: float | None = 0.5, cmap: str = "viridis"):
    """P (len(depths), len(betas)) as cells over log beta x depth, with the ``contour`` level drawn white.

    Returns the mesh (for a colour bar).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    betas : array (m,)
        Inverse temperatures (log-spaced).
    depths : array (k,)
        Depths.
    P : array (k, m)
        Probabilities.
    contour : float, optional
        Level drawn in white.
    cmap : str
        Colour map.

    Returns
    -------
    matplotlib.collections.QuadMesh
    """
    depths = np.asarray(depths, dtype=float)
    step = np.diff(depths).min() if depths.size > 1 else 1.0
    d_edges = np.concatenate([[depths[0] - step / 2], (depths[1:] + depths[:-1]) / 2, [depths[-1] + step / 2]])
    mesh = ax.pcolormesh(log_edges(betas), d_edges, P, vmin=0, vmax=1, cmap=cmap, shading="flat")
    if contour is not None and np.nanmin(P) < contour < np.nanmax(P):
        ax.contour(betas, depths, P, levels=[contour], colors="white", linewidths=1.4)
    ax.set_xscale("log")
    ax.set_xticks(betas, [f"{b:g}" for b in betas])
    ax.minorticks_off()
    ax.grid(False)
    return mesh


def draw_probability_curve(ax, x, k, n, *, color, label=None, marker="o", ls="-", confidence: float = 0.95):
    """Frequencies k/n against x with their Wilson band (:func:`tokendynamics.phase.wilson_interval`).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    x : array (m,)
        Abscissae.
    k : array (m,)
        Successes.
    n : int or array (m,)
        Trials.
    color : color
        Line and band colour.
    label : str, optional
        Legend label.
    marker, ls : str
        Marker and line style.
    confidence : float
        Level of the Wilson band.

    Returns
    -------
    matplotlib.axes.Axes
    """
    k = np.asarray(k, dtype=float)
    lo, hi = phase.wilson_interval(k, np.broadcast_to(n, k.shape), confidence)
    ax.fill_between(x, lo, hi, color=color, alpha=0.18, lw=0)
    ax.plot(x, k / n, marker=marker, ls=ls, color=color, label=label, ms=4)
    return ax


@fill_doc(_DOC)
def glpr_transition(G: dict, level: float = 0.5) -> np.ndarray:
    r"""The transition curve of a :func:`~tokendynamics.book.studies.phase.glpr_grid`: at each recorded time t,
    the :math:`\beta^*(t)` where the probability of one cluster crosses ``level`` (linear interpolation in
    :math:`\beta`, :func:`tokendynamics.phase.crossing`); NaN where it does not cross inside the grid.

    Parameters
    ----------
    %(grid)s
    level : float
        The level.

    Returns
    -------
    array (len(G["times"]),)
    """
    return np.asarray(phase.crossing(G["betas"], G["single"] / G["clouds"], level, log=False), dtype=float)


@fill_doc(_DOC)
def draw_glpr_grid(G: dict, *, cmap: str = "RdBu_r"):
    r"""The grid of :func:`~tokendynamics.book.studies.phase.glpr_grid` as two heat maps over (t, :math:`\beta`):
    the probability of one cluster (left, with its transition curve :func:`glpr_transition` in black) and the
    fraction of linked pairs (right, the quantity and the layout of the published figure: t across,
    :math:`\beta` up, a red-blue map); one colour bar for both (both lie in [0, 1]).

    Parameters
    ----------
    %(grid)s
    cmap : str
        Colour map.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    t, b = np.asarray(G["times"], float), np.asarray(G["betas"], float)

    def edges(x):
        mid = (x[1:] + x[:-1]) / 2
        return np.concatenate([[x[0] - (mid[0] - x[0])], mid, [x[-1] + (x[-1] - mid[-1])]])

    fig, axes = plt.subplots(1, 2, figsize=(7.7, 3.3), sharey=True, layout="constrained")
    panels = ((G["single"] / G["clouds"], "probability of one cluster"), (G["pairs"], "fraction of linked pairs"))
    for ax, (Z, title) in zip(axes, panels):
        mesh = ax.pcolormesh(edges(t), edges(b), np.asarray(Z, float).T, vmin=0, vmax=1, cmap=cmap, shading="flat")
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("time $t$")
        ax.grid(False)
    star = glpr_transition(G)
    ok = np.isfinite(star)
    axes[0].plot(t[ok], star[ok], color="k", lw=1.6, label=r"$\beta^*(t)$: probability $\frac{1}{2}$")
    axes[0].legend(loc="upper left", fontsize="small")
    axes[0].set_ylabel(r"$\beta$")
    fig.colorbar(mesh, ax=axes, shrink=0.9, pad=0.02, label="probability / fraction")
    return fig
