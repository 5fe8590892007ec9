"""Plots of the d = 2 reduction: the complex disk of :math:`R_2`, OA phase portraits, Hamiltonian level sets.

Thin drawing helpers used by the chapters on the Kuramoto reduction and its regimes (paper 2, Li et al.
2026; book: ``chapters/04_kuramoto_reduction.md`` and ``chapters/05_kuramoto_regimes.md``); every number
they draw is computed by :mod:`tokendynamics.kuramoto`, :mod:`tokendynamics.ott_antonsen` and
:mod:`tokendynamics.regimes`.
"""

from __future__ import annotations

import numpy as np

from ..kuramoto import order_parameter
from ..particles import circle_tokens
from ..regimes import TYPES, hamiltonian, hamiltonian_centre
from .plotting import plot_circle
from .studies.kuramoto import Portrait

__all__ = [
    "REGIME_COLORS",
    "matrix_tex",
    "plot_disk",
    "plot_portrait",
    "plot_hamiltonian_levels",
    "regime_label",
    "draw_explorer",
]

#: One colour per regime, used by every figure of the chapter.
REGIME_COLORS = {
    "static_clusters": "#1f5fa8",
    "rotating_clusters": "#d9822b",
    "oscillation": "#2a9d5c",
    "partial": "#b23a48",
}


def matrix_tex(M) -> str:
    r"""A real 2 x 2 matrix as TeX for a Markdown table: ``$\begin{pmatrix}a&b\\c&d\end{pmatrix}$``.

    Entries are printed with ``:g``; a diagonal matrix becomes ``\operatorname{diag}(a,d)``, the
    identity ``I``.

    Parameters
    ----------
    M : array_like (2, 2)
        A real matrix (a score or value matrix of the regime tables).

    Returns
    -------
    str
        Inline TeX, dollar signs included.

    Examples
    --------
    >>> matrix_tex([[1, 0], [0, 1]])
    '$I$'
    >>> matrix_tex([[2, 0], [0, -1]])
    '$\\operatorname{diag}(2,-1)$'
    """
    M = np.asarray(M, dtype=float)
    if M.shape != (2, 2):
        raise ValueError(f"a 2 x 2 matrix, please (got shape {M.shape})")
    if M[0, 1] == 0 and M[1, 0] == 0:
        if M[0, 0] == 1 and M[1, 1] == 1:
            return "$I$"
        return rf"$\operatorname{{diag}}({M[0, 0]:g},{M[1, 1]:g})$"
    return rf"$\begin{{pmatrix}}{M[0, 0]:g}&{M[0, 1]:g}\\{M[1, 0]:g}&{M[1, 1]:g}\end{{pmatrix}}$"


def regime_label(name: str) -> str:
    """``"static_clusters"`` -> ``"static clusters (Type 1)"``.

    Parameters
    ----------
    name : str
        One of :data:`~tokendynamics.regimes.REGIMES`.

    Returns
    -------
    str

    Examples
    --------
    >>> regime_label("static_clusters")
    'static clusters (Type 1)'
    """
    return f"{name.replace('_', ' ')} ({TYPES[name]})"


def plot_disk(ax, *, labels: bool = True):
    """The closed unit disk of :math:`R_2` (boundary = clustered states), equal aspect.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    labels : bool
        Label the axes.

    Returns
    -------
    matplotlib.axes.Axes
    """
    s = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(s), np.sin(s), color="0.3", lw=1.0, zorder=1)
    ax.set_aspect("equal")
    ax.set_xlim(-1.08, 1.08)
    ax.set_ylim(-1.08, 1.08)
    ax.grid(False)
    if labels:
        ax.set_xlabel(r"$\mathrm{Re}\,R_2$")
        ax.set_ylabel(r"$\mathrm{Im}\,R_2$")
    return ax


def plot_portrait(
    ax,
    portrait: Portrait,
    *,
    title: str | None = None,
    orbit: bool = True,
    style: str = "quiver",
    cmap: str = "viridis",
    norm=None,
):
    r"""The OA field of a portrait (:class:`~tokendynamics.book.studies.kuramoto.Portrait`) in the disk, and the OA
    orbit from ``z0``.

    ``style="quiver"``: unit arrows coloured by :math:`\log_{10}|\dot z|` (fast to draw, used by the
    widget); ``style="stream"``: streamlines coloured the same way. ``norm`` (a matplotlib
    ``Normalize``) fixes the colour scale, so that several panels can share one colour bar.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    portrait : Portrait
        From :func:`~tokendynamics.book.studies.kuramoto.regime_portrait`.
    title : str, optional
        Panel title.
    orbit : bool
        Draw the OA orbit.
    style : {"quiver", "stream"}
        How to draw the field.
    cmap : str
        Colour map.
    norm : matplotlib.colors.Normalize, optional
        Colour scale.

    Returns
    -------
    matplotlib artist
        The artist that carries the colours (``Quiver``, or the ``LineCollection`` of the streamlines):
        pass it to ``fig.colorbar``.

    References
    ----------
    Paper 2 (Li et al., 2026), the Ott–Antonsen reduction; book: ``chapters/04_kuramoto_reduction.md``,
    equation (eq-oa).
    """
    if style not in ("quiver", "stream"):
        raise ValueError(f"style must be 'quiver' or 'stream', got {style!r}")
    plot_disk(ax)
    f = portrait.field
    g = portrait.grid
    speed = np.ma.abs(f)
    colour = np.ma.log10(np.ma.maximum(speed, 1e-6))
    if style == "quiver":
        direction = f / np.ma.where(speed > 0, speed, 1.0)
        h = g.real[0, 1] - g.real[0, 0]
        art = ax.quiver(
            g.real,
            g.imag,
            direction.real,
            direction.imag,
            colour,
            cmap=cmap,
            angles="xy",
            scale_units="xy",
            scale=1.0 / (0.75 * h),
            width=0.006,
            headwidth=4,
            pivot="mid",
            zorder=2,
            norm=norm,
        )
    else:
        U = np.where(np.ma.getmaskarray(f), np.nan, np.ma.getdata(f).real)
        W = np.where(np.ma.getmaskarray(f), np.nan, np.ma.getdata(f).imag)
        C = np.where(np.ma.getmaskarray(f), np.nan, np.ma.getdata(colour))
        art = ax.streamplot(
            g.real[0],
            g.imag[:, 0],
            U,
            W,
            color=C,
            cmap=cmap,
            norm=norm,
            density=1.1,
            linewidth=0.8,
            arrowsize=0.8,
            zorder=2,
        ).lines
    if orbit:
        z = portrait.orbit
        ax.plot(z.real, z.imag, color="k", lw=1.3, zorder=3)
        ax.plot(z.real[0], z.imag[0], "o", color="k", ms=4, zorder=4)
        ax.plot(z.real[-1], z.imag[-1], "s", color="k", ms=4, zorder=4)
    if title is not None:
        ax.set_title(title)
    return art


def plot_hamiltonian_levels(ax, layer, *, n_levels: int = 14, resolution: int = 301, color="0.55"):
    r"""Level sets of :math:`\mathcal E` (:func:`~tokendynamics.regimes.hamiltonian`) in the disk.

    Levels are the values of :math:`\mathcal E` on points between the centre (if any) and the
    boundary, so closed orbits and orbits running into the circle both appear.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    layer : Attention
        Linear attention on the circle with :math:`A=I` and a traceless :math:`V`.
    n_levels : int
        Number of levels.
    resolution : int
        Grid points per side.
    color : color
        Line colour.

    Returns
    -------
    matplotlib.contour.QuadContourSet
        The contour lines of :math:`\mathcal E` drawn on ``ax`` (masked outside the radius 0.995). The
        centre returned by :func:`~tokendynamics.regimes.hamiltonian_centre`, when there is one,
        is marked by a separate black ``+`` that is not part of this set.

    References
    ----------
    Paper 2 (Li et al., 2026), the hidden Hamiltonian; book: ``chapters/05_kuramoto_regimes.md``, equation
    (eq-hamiltonian).
    """
    s = np.linspace(-0.995, 0.995, resolution)
    Z = s[None, :] + 1j * s[:, None]
    inside = np.abs(Z) < 0.995
    E = np.full(Z.shape, np.nan)
    E[inside] = hamiltonian(Z[inside], layer)
    zc = hamiltonian_centre(layer.V[0])
    start = 0j if zc is None else zc
    # sample E along rays from the centre towards the circle: levels cover the whole disk
    rays = start + np.outer(np.linspace(0.05, 0.97, n_levels), np.exp(1j * np.linspace(0, 2 * np.pi, 7)[:-1]))
    rays = rays[np.abs(rays) < 0.97]
    levels = np.unique(np.round(np.sort(hamiltonian(rays, layer)), 10))
    levels = levels[np.linspace(0, levels.size - 1, min(n_levels, levels.size)).round().astype(int)]
    cs = ax.contour(
        Z.real,
        Z.imag,
        np.ma.masked_invalid(E),
        levels=np.unique(levels),
        colors=color,
        linewidths=0.7,
        zorder=1,
        negative_linestyles="solid",
    )
    if zc is not None:
        ax.plot(zc.real, zc.imag, "+", color="k", ms=8, zorder=4)
    return cs


def draw_explorer(axes, portrait: Portrait, traj=None):
    """The explorer panel: OA portrait with its orbit (and the particles' :math:`R_2`), and the tokens.

    ``axes`` is a pair of matplotlib axes (cleared first); ``traj`` an optional planar run, a
    :class:`~tokendynamics.particles.Trajectory` or a :class:`~tokendynamics.kuramoto.PhaseSolution`
    (drawn as its :math:`R_2` path and its tokens at the first and last times). The disk has no
    ticks (its unit circle is the scale) and plain-text labels, which keeps a redraw cheap. Used by
    the live widget and by the static animation of the chapter
    (:func:`tokendynamics.book.explorers.regimes_update`).

    Parameters
    ----------
    axes : (Axes, Axes)
        The disk panel and the tokens panel.
    portrait : Portrait
        From :func:`~tokendynamics.book.studies.kuramoto.regime_portrait`.
    traj : Trajectory or PhaseSolution, optional
        A planar run. With ``None`` the disk panel shows only the portrait and the tokens panel is
        left empty (cleared).

    Returns
    -------
    (Axes, Axes)
        The same pair ``axes``, redrawn in place: the disk with the field, the OA orbit, a title naming
        the regime and the closed-form prediction (if any), and the particles' :math:`R_2` path; the
        tokens panel with the tokens at the last time (regime colour) and at ``t = 0`` (grey).
    """
    ax_disk, ax_tok = axes
    ax_disk.clear()
    ax_tok.clear()
    plot_portrait(ax_disk, portrait)
    ax_disk.set_xticks([])
    ax_disk.set_yticks([])
    ax_disk.set_xlabel("Re R\u2082")  # plain text: no mathtext parse on every redraw
    ax_disk.set_ylabel("Im R\u2082")
    pred = portrait.prediction
    title = f"OA: {regime_label(portrait.regime)}"
    if pred is not None:
        title += f"\nclosed form ({pred.case}): {pred.regime.replace('_', ' ')}"
        if pred.period is not None:
            title += f", P = {pred.period:.3f}"
    else:
        title += "\nno closed form applies"
    ax_disk.set_title(title, fontsize="small")
    if traj is not None:
        theta = traj.angles() if callable(getattr(traj, "angles", None)) else np.asarray(traj.theta)
        R2 = order_parameter(theta, 2)
        ax_disk.plot(
            R2.real,
            R2.imag,
            color=REGIME_COLORS[portrait.regime],
            lw=1.0,
            alpha=0.9,
            zorder=3,
            label=f"particles, n = {theta.shape[-1]}",
        )
        ax_disk.legend(loc="lower left", fontsize="x-small")
        first, last = circle_tokens(theta[0]), circle_tokens(theta[-1])
        plot_circle(ax_tok, last, color=REGIME_COLORS[portrait.regime], size=14, title="tokens")
        ax_tok.collections[-1].set_label(f"t = {traj.t[-1]:g}")
        ax_tok.scatter(first[:, 0], first[:, 1], s=8, color="0.7", zorder=1, label="t = 0")
        ax_tok.legend(loc="lower left", fontsize="x-small")
        ax_tok.title.set_fontsize("small")
    return axes
