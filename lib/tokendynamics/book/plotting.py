"""One plotting style for the whole book, figure files, and animations that work without a kernel.

Every figure a chapter shows is also written as a PNG by :func:`savefig` into the folder named by
the environment variable ``TOKENDYNAMICS_FIGDIR`` (set by ``scripts/build_book.py`` to
``_build/figures/<chapter>``), or ``./figures`` when a reader runs a notebook by hand.
"""

from __future__ import annotations

import base64
import io
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from ..docstrings import fill_doc
from ..particles import angles
from .claims import CHAPTERS, TAGS, claims_for

__all__ = [
    "BOOK_STYLE",
    "palette_png",
    "palette_frames",
    "use_book_style",
    "figure_dir",
    "savefig",
    "unwrap_for_plot",
    "plot_circle",
    "plot_angle_paths",
    "animate_circle",
    "animate_clustering",
    "plot_token_paths",
    "animate_token_panels",
    "animation_html",
    "plot_claims_overview",
    "smallest_text",
    "COLUMN_PX",
    "live_widgets",
]

# Deliberately plain: float-friendly formatting, no usetex, no hard-coded fonts.
BOOK_STYLE: dict[str, Any] = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "figure.figsize": (7.0, 3.6),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": "medium",
    "axes.labelsize": "medium",
    "legend.frameon": False,
    "legend.fontsize": "small",
    "image.cmap": "viridis",
    "animation.embed_limit": 40.0,  # MB, for to_jshtml
}

TOKEN_COLOR = "#1f5fa8"

# numpydoc fragments of the animations (tokendynamics.docstrings.fill_doc)
_DOC = {
    "traj": """\
        traj : Trajectory
            A planar trajectory (d = 2), e.g. from :func:`tokendynamics.particles.simulate`.""",
    "frames": """\
        frames : int
            Number of frames, spread evenly over the stored times.""",
    "interval": """\
        interval : int
            Milliseconds between frames.""",
    "returns": """\
        Returns
        -------
        matplotlib.animation.FuncAnimation""",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (call once at the top of a chapter)."""
    mpl.rcParams.update(BOOK_STYLE)  # type: ignore[arg-type]  # keys checked by matplotlib at run time


def figure_dir() -> Path:
    """Folder where :func:`savefig` writes PNGs (``$TOKENDYNAMICS_FIGDIR`` or ``./figures``).

    Returns
    -------
    pathlib.Path
        ``Path($TOKENDYNAMICS_FIGDIR)`` when that environment variable is set, else the relative path
        ``figures`` (resolved against the current working directory when used). Not created here:
        :func:`savefig` creates it on first write.
    """
    return Path(os.environ.get("TOKENDYNAMICS_FIGDIR", "figures"))


def savefig(fig, name: str, *, dpi: int | None = None) -> Path:
    """Write ``fig`` as ``<figure_dir>/<name>.png`` and return the path.

    Refuses a figure whose axes are all empty, so that a figure that silently shows nothing
    cannot be shipped.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    name : str
        File stem (no folder, no extension), e.g. ``"intro-clustering"``.
    dpi : int, optional
        Resolution (default: the style's ``savefig.dpi``).

    Returns
    -------
    pathlib.Path
        The file written.
    """
    if not name or any(c in name for c in "/\\") or name.endswith(".png"):
        raise ValueError(f"name must be a plain file stem like 'intro-clustering', got {name!r}")
    if not any(ax.has_data() or ax.images or ax.collections for ax in fig.axes):
        raise ValueError(f"figure {name!r} has no data on any axes")
    folder = figure_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=dpi)
    return path


def unwrap_for_plot(theta, period: float = 2 * np.pi):
    r"""Wrap angles to :math:`[-\pi,\pi)` (or one period) and insert NaNs where a path jumps.

    ``theta`` has shape (m, n) (times x tokens); returns an array of the same shape, ready for
    ``plot(t, ...)``: wrapped angles, with NaN where consecutive values differ by more than half a
    period, so that the lines break there.

    Parameters
    ----------
    theta : array (m, n)
        Angles (times x tokens).
    period : float
        The period.

    Returns
    -------
    array (m, n)
    """
    theta = np.asarray(theta, dtype=float)
    wrapped = (theta + period / 2) % period - period / 2
    jumps = np.abs(np.diff(wrapped, axis=0)) > period / 2
    out = wrapped.copy()
    out[1:][jumps] = np.nan
    return out


def plot_circle(ax, X, *, color=TOKEN_COLOR, size: float = 18, alpha: float = 0.9, title: str | None = None):
    """Planar tokens as dots on the unit circle (drawn in grey).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    X : array (n, 2)
        Planar tokens.
    color : color
        Dot colour.
    size, alpha : float
        Dot size and opacity.
    title : str, optional
        Panel title.

    Returns
    -------
    matplotlib.axes.Axes
    """
    X = np.asarray(X, dtype=float)
    s = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(s), np.sin(s), color="0.75", lw=1, zorder=0)
    ax.scatter(X[:, 0], X[:, 1], s=size, color=color, alpha=alpha, zorder=2, edgecolor="none")
    ax.set_aspect("equal")
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.25, 1.25)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title)
    return ax


def plot_angle_paths(ax, t, X_or_theta, *, color=TOKEN_COLOR, lw: float = 0.8, alpha: float = 0.7):
    r"""Angle of each planar token against time, wrapped to :math:`[-\pi,\pi)` with broken lines at jumps.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    t : array (m,)
        Times.
    X_or_theta : array (m, n, 2) or (m, n)
        Planar tokens or their angles.
    color : color
        Line colour.
    lw, alpha : float
        Line width and opacity.

    Returns
    -------
    matplotlib.axes.Axes
    """
    arr = np.asarray(X_or_theta, dtype=float)
    theta = angles(arr) if arr.ndim == 3 else arr
    ax.plot(t, unwrap_for_plot(theta), color=color, lw=lw, alpha=alpha)
    ax.set_ylim(-np.pi, np.pi)
    ax.set_yticks([-np.pi, 0, np.pi], [r"$-\pi$", "0", r"$\pi$"])
    ax.set_xlabel("time (depth) $t$")
    ax.set_ylabel(r"angle $\theta_k$")
    return ax


def _frame_indices(traj, frames: int, who: str) -> np.ndarray:
    """Indices of ``frames`` stored times of the planar ``traj``, spread evenly; ``who`` refuses d != 2."""
    if traj.d != 2:
        raise ValueError(f"{who} shows planar tokens (d = 2)")
    return np.unique(np.linspace(0, len(traj.t) - 1, frames).round().astype(int))


@fill_doc(_DOC)
def animate_circle(traj, *, frames: int = 60, interval: int = 80, title: str = ""):
    """A matplotlib animation of planar tokens on the circle (render with ``.to_jshtml()``).

    Works in the static book without a kernel: the HTML carries every frame.

    Parameters
    ----------
    %(traj)s
    %(frames)s
    %(interval)s
    title : str
        Prefix of the frame title.

    %(returns)s
    """
    from matplotlib.animation import FuncAnimation

    idx = _frame_indices(traj, frames, "animate_circle")
    fig, ax = plt.subplots(figsize=(3.6, 3.6))
    plot_circle(ax, traj.X[0])
    scat = ax.collections[-1]
    label = ax.set_title(f"{title} t = {traj.t[0]:.2f}")

    def update(k):
        scat.set_offsets(traj.X[idx[k]])
        label.set_text(f"{title} t = {traj.t[idx[k]]:.2f}")
        return scat, label

    anim = FuncAnimation(fig, update, frames=len(idx), interval=interval, blit=False)
    plt.close(fig)
    return anim


@fill_doc(_DOC)
def animate_clustering(traj, *, frames: int = 60, interval: int = 80, width: float = 7.0):
    r"""Planar tokens on the circle (left) beside the order parameter :math:`|R_1(t)|` (right), animated.

    Sized for the book's column (``width`` inches, 7.0 = 770 px at the book's 110 dpi): the left
    panel shows the tokens at the frame's time, the right one the curve :math:`|R_1|` up to that
    time, where :math:`R_1=\frac1n\sum_j x_j` (1 exactly when all tokens sit at one point). Render
    with :func:`animation_html` (the HTML carries every frame: it plays without a kernel).

    Parameters
    ----------
    %(traj)s
    %(frames)s
    %(interval)s
    width : float
        Figure width in inches.

    %(returns)s
    """
    from matplotlib.animation import FuncAnimation

    idx = _frame_indices(traj, frames, "animate_clustering")
    R1 = np.linalg.norm(traj.X.mean(axis=1), axis=1)
    fig, (ax_c, ax_r) = plt.subplots(
        1, 2, figsize=(width, 0.46 * width), gridspec_kw={"width_ratios": [1, 1.35]}, layout="constrained"
    )
    plot_circle(ax_c, traj.X[0])
    scat = ax_c.collections[-1]
    stamp = ax_c.text(0.0, -1.2, f"t = {traj.t[0]:.1f}", ha="center", va="top")
    ax_r.plot(traj.t, R1, color="0.8", lw=1)
    (line,) = ax_r.plot(traj.t[:1], R1[:1], color="k", lw=1.6)
    (dot,) = ax_r.plot(traj.t[:1], R1[:1], "o", color=TOKEN_COLOR)
    ax_r.set_xlim(traj.t[0], traj.t[-1])
    ax_r.set_ylim(0, 1.05)
    ax_r.set_xlabel("time (depth) t")
    ax_r.set_ylabel("|R1(t)|")

    def update(k):
        j = idx[k]
        scat.set_offsets(traj.X[j])
        stamp.set_text(f"t = {traj.t[j]:.1f}")
        line.set_data(traj.t[: j + 1], R1[: j + 1])
        dot.set_data(traj.t[j : j + 1], R1[j : j + 1])
        return scat, stamp, line, dot

    anim = FuncAnimation(fig, update, frames=len(idx), interval=interval, blit=False)
    plt.close(fig)
    return anim


def _panel_limits(points, pad: float = 0.08, q: float = 0.0):
    """Square limits holding the q..(100-q) percentile box of all given planar points."""
    P = np.concatenate([np.asarray(p, float).reshape(-1, 2) for p in points])
    P = P[np.all(np.isfinite(P), axis=1)]
    lo, hi = np.percentile(P, q, axis=0), np.percentile(P, 100 - q, axis=0)
    c, r = (lo + hi) / 2, max(float(np.max(hi - lo)) / 2, 1e-3) * (1 + pad)
    return (c[0] - r, c[0] + r), (c[1] - r, c[1] + r)


def plot_token_paths(
    ax,
    X,
    *,
    colors=None,
    every: int = 1,
    size: float = 9,
    title: str | None = None,
    cmap: str = "twilight",
    lw: float = 0.4,
    ticks: bool = True,
):
    """Planar token paths ``X`` (times, n, 2): initial tokens in grey, paths, final tokens coloured.

    ``colors`` (n,) are values mapped through ``cmap`` (default: initial polar angle), so a reader can
    follow each token from its start to its end. ``ticks=False`` drops the axes' ticks (several
    times faster to draw, for widgets).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    X : array (m, n, 2)
        Planar token paths.
    colors : array (n,), optional
        Values mapped through ``cmap``.
    every : int
        Draw every k-th time of the paths.
    size : float
        Dot size.
    title : str, optional
        Panel title.
    cmap : str
        Colour map.
    lw : float
        Path line width.
    ticks : bool
        Draw the axes' ticks.

    Returns
    -------
    matplotlib.axes.Axes
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 3 or X.shape[2] != 2:
        raise ValueError(f"X must be (times, n, 2), got {X.shape}")
    from matplotlib.collections import LineCollection

    c = np.arctan2(X[0, :, 1], X[0, :, 0]) if colors is None else np.asarray(colors)
    ax.add_collection(
        LineCollection(list(np.transpose(X[:, ::every], (1, 0, 2))), colors="0.8", linewidths=lw, zorder=1)
    )
    ax.scatter(X[0, :, 0], X[0, :, 1], s=size * 0.6, color="0.65", zorder=2, edgecolor="none")
    ax.scatter(X[-1, :, 0], X[-1, :, 1], s=size, c=c, cmap=cmap, zorder=3, edgecolor="none")
    (x0, x1), (y0, y1) = _panel_limits([X[0], X[-1]])
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")
    if ticks:
        ax.tick_params(labelsize="x-small")
    else:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    if title:
        ax.set_title(title, fontsize="small")
    return ax


@fill_doc(_DOC)
def animate_token_panels(
    frames,
    titles,
    labels,
    *,
    colors=None,
    ncols: int = 4,
    interval: int = 120,
    panel_size: float = 2.1,
    cmap: str = "twilight",
    suptitle: str = "",
):
    """An animation over frames of several panels of planar tokens (render with ``.to_jshtml()``).

    ``frames[f][p]`` is an (n, 2) array: panel p at frame f (frames may be times or parameter
    values; ``labels[f]`` says which). Each panel keeps fixed limits over all frames. Works in the
    static book without a kernel.

    Parameters
    ----------
    frames : sequence of sequences of arrays (n, 2)
        ``frames[f][p]``.
    titles : sequence of str
        Panel titles.
    labels : sequence of str
        Frame labels.
    colors : array (n,), optional
        Values mapped through ``cmap``.
    ncols : int
        Panels per row.
    %(interval)s
    panel_size : float
        Panel size in inches.
    cmap : str
        Colour map.
    suptitle : str
        Prefix of the figure title.

    %(returns)s
    """
    from matplotlib.animation import FuncAnimation

    n_frames, n_panels = len(frames), len(titles)
    if n_frames == 0 or any(len(fr) != n_panels for fr in frames) or len(labels) != n_frames:
        raise ValueError("frames must be a list (frames) of lists (one (n, 2) array per panel), with a label per frame")
    nrows = int(np.ceil(n_panels / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size * ncols, panel_size * nrows + 0.3), squeeze=False)
    scats = []
    for p, ax in enumerate(axes.flat):
        if p >= n_panels:
            ax.axis("off")
            continue
        X = np.asarray(frames[0][p], float)
        c = np.arctan2(X[:, 1], X[:, 0]) if colors is None else colors
        scats.append(ax.scatter(X[:, 0], X[:, 1], s=7, c=c, cmap=cmap, edgecolor="none"))
        (x0, x1), (y0, y1) = _panel_limits([fr[p] for fr in frames], q=0.5)  # robust to a blow-up
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        ax.set_title(titles[p], fontsize="small")
    label = fig.suptitle(f"{suptitle}{labels[0]}", fontsize="small")
    fig.tight_layout()

    def update(f):
        for p, sc in enumerate(scats):
            sc.set_offsets(np.asarray(frames[f][p], float))
        label.set_text(f"{suptitle}{labels[f]}")
        return (*scats, label)

    anim = FuncAnimation(fig, update, frames=n_frames, interval=interval, blit=False)
    plt.close(fig)
    return anim


#: Width of the book's text column in CSS pixels (the theme at a desktop window): animations are
#: rendered at this width so that they are shown at their natural size, neither blurred nor shrunk.
COLUMN_PX = 770
#: Smallest legible text in a figure on screen, in CSS pixels (body text is 16 px).
MIN_TEXT_PX = 9.0


def smallest_text(fig) -> tuple[float, str]:
    """The smallest font size (points) among the visible, non-empty texts of ``fig``, and that text.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.

    Returns
    -------
    size : float
        Font size in points.
    text : str
        The text.
    """
    from matplotlib.text import Text

    texts = [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())
    ]
    if not texts:
        return float("inf"), ""
    smallest = min(texts, key=lambda t: t.get_fontsize())
    return float(smallest.get_fontsize()), smallest.get_text().strip()


_JSHTML_FRAME = re.compile(r'(frames\[\d+\] = "data:image/png;base64,)([^"]*)(")')


def palette_png(
    png: bytes, colors: int = 256, *, text: dict[str, str] | None = None, dpi: float | None = None
) -> bytes:
    """``png`` re-encoded with a palette of at most ``colors`` colours, its text chunks kept.

    A frame of a token animation (dots, lines and text on white) has a few hundred distinct
    colours, most of them antialiasing shades: a 256-colour palette (octree, no dithering) keeps
    it visually identical and makes the file about four times smaller (225 KB to 58 KB for a
    770 x 800 frame of chapter 1), so a page with two 60-frame animations weighs 5 MB, not 20.

    Parameters
    ----------
    png : bytes
        A PNG file.
    colors : int
        Size of the palette (at most 256).
    text : dict of str to str, optional
        More ``tEXt`` chunks (replacing the original's of the same key).
    dpi : float, optional
        Resolution to record (default: the original's, else 72).

    Returns
    -------
    bytes
        The palette PNG, with the original's ``tEXt`` chunks (matplotlib's ``Software``, the
        book's ``tokendynamics:text`` legibility record) and resolution.
    """
    from PIL import Image, PngImagePlugin

    source = Image.open(io.BytesIO(png))
    info = PngImagePlugin.PngInfo()
    for key, value in (source.text | (text or {})).items():  # type: ignore[attr-defined]
        info.add_text(key, value)
    image: Image.Image = source
    if image.mode == "RGBA" and image.getchannel("A").getextrema() == (255, 255):
        image = image.convert("RGB")  # opaque: no alpha in the palette
    quantized = image.quantize(colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    resolution = (dpi, dpi) if dpi else source.info.get("dpi", (72, 72))
    quantized.save(out, format="PNG", optimize=True, pnginfo=info, dpi=resolution)
    return out.getvalue()


def palette_frames(html: str, colors: int = 256) -> str:
    """The HTML of a ``to_jshtml`` animation with every PNG frame re-encoded by :func:`palette_png`.

    Parameters
    ----------
    html : str
        What matplotlib's ``Animation.to_jshtml`` returned.
    colors : int
        Size of the palette.

    Returns
    -------
    str
        The same player, lighter frames.
    """

    def replace(match: re.Match[str]) -> str:
        png = base64.b64decode(match[2].replace("\\\n", ""))
        return match[1] + base64.b64encode(palette_png(png, colors)).decode("ascii") + match[3]

    return _JSHTML_FRAME.sub(replace, html)


def animation_html(
    anim, *, width: int = COLUMN_PX, min_text_px: float = MIN_TEXT_PX, default_mode: str = "once"
) -> str:
    """The self-contained HTML of an animation (``to_jshtml``), its frames rendered ``width`` pixels wide.

    The dpi is chosen so that a frame is ``width`` pixels wide (the book's column: shown at its
    natural size), without a tight bounding box (every frame the same size). Raises ``ValueError`` if
    a text of the figure would be smaller than ``min_text_px`` pixels at that size, checked on the
    first frame and on the last. The frames are 256-colour PNGs (:func:`palette_frames`): a quarter
    of the weight of matplotlib's, for the same picture.

    Parameters
    ----------
    anim : matplotlib.animation.Animation
        The animation.
    width : int
        Width of a frame in pixels.
    min_text_px : float
        Smallest accepted text size in pixels.
    default_mode : str
        Loop mode of the player (``"once"``, ``"loop"``, ``"reflect"``).

    Returns
    -------
    str
        HTML.
    """
    fig = anim._fig
    dpi = float(width) / fig.get_figwidth()

    def check(when: str) -> None:
        fig.canvas.draw()  # tick labels exist once drawn
        pt, text = smallest_text(fig)
        if pt * dpi / 72 < min_text_px:
            raise ValueError(
                f"animation text {text!r} ({when}) is {pt:g} pt = {pt * dpi / 72:.1f} px at {width} px wide "
                f"(< {min_text_px:g} px): make it larger or the figure narrower"
            )

    check("first frame")
    with mpl.rc_context({"savefig.dpi": dpi, "savefig.bbox": "standard"}):
        html = anim.to_jshtml(default_mode=default_mode)
    check("last frame")
    return palette_frames(html)


#: colour of each provenance tag in the claims overview (S, R, D, I as on the claims page)
_TAG_COLOURS = {"S": "C0", "R": "C2", "D": "C1", "I": "C3"}


def plot_claims_overview(ax, *, wrap: int = 34):
    """The registered claims as stacked bars: one row per chapter with claims, labelled by its title.

    Each row stacks the chapter's claims by provenance tag (S, R, D, I; the legend gives the totals),
    and a hatched bar over it counts the claims whose value the chapter measures and glues. Rows are
    the chapters of ``CHAPTERS`` that show at least one claim, in book order, each at its own
    position (two chapters never share a row), labelled by the chapter's title.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    wrap : int
        Width (characters) at which the titles are wrapped onto several lines.

    Returns
    -------
    matplotlib.axes.Axes
    """
    stems = [s for s in CHAPTERS if claims_for(s)]
    rows = np.arange(len(stems))
    left = np.zeros(len(stems))
    for tag in TAGS:
        counts = np.array([sum(c.tag == tag for c in claims_for(s)) for s in stems])
        ax.barh(rows, counts, left=left, color=_TAG_COLOURS.get(tag), label=f"{tag} ({counts.sum()})")
        left += counts
    measured = np.array([sum(c.measured is not None for c in claims_for(s)) for s in stems])
    ax.barh(rows, measured, fill=False, hatch="//", edgecolor="0.25", lw=0, label=f"measured ({measured.sum()})")
    ax.set_yticks(rows, [textwrap.fill(CHAPTERS[s], wrap) for s in stems])
    ax.set_ylim(len(stems) - 0.5, -0.5)  # book order from the top
    ax.set_xlabel("claims")
    ax.grid(False, axis="y")
    ax.legend(ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return ax


def live_widgets() -> bool:
    """Whether a chapter should build its ipywidgets: True in a live Jupyter session, False when the
    chapter runs headless under the book build (``TOKENDYNAMICS_HEADLESS=1``, set by
    ``scripts/build_book.py``).

    The static book cannot run widgets anyway (their output is removed), and the notebook client
    papermill uses can wait for ever on a cell that creates output widgets (jupyter/nbclient#312;
    it happened here, in two builds out of about ten). The widgets' callbacks are still run during
    the build by the chapters' timing cells and by the tests.

    Returns
    -------
    bool
        False when the environment variable ``TOKENDYNAMICS_HEADLESS`` is ``"1"``, ``"true"`` or
        ``"yes"`` (headless book build); True otherwise, including when it is unset.
    """
    return os.environ.get("TOKENDYNAMICS_HEADLESS", "") not in ("1", "true", "yes")
