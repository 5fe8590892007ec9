r"""Pictures of Gaussian dynamics: the PSD cone of 2 x 2 covariances, the normalised disc, ellipses, explorer runs.

A 2 x 2 covariance :math:`\Sigma=\begin{pmatrix}a&c\\c&b\end{pmatrix}` is the point
:math:`(u,w,v)=(a-b,2c,a+b)` of the solid cone :math:`v\ge\sqrt{u^2+w^2}`; rank-one matrices form
its surface, zero is the apex (:func:`tokendynamics.book.studies.gaussian.cone_coordinates`). Dividing by the
trace maps the cone onto the unit disc, whose boundary circle is the set of rank-one trace-one
matrices (:func:`tokendynamics.book.studies.gaussian.disc_point`). Paper 1 draws every covariance trajectory
in one of these two pictures (the authors' code, vcastin/2025-transformers-PDEs).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colormaps

from ..attention import Attention
from ..gaussian import projected_euler, solve_gaussian
from ..transport import psd_sqrt
from .studies.gaussian import cone_coordinates, cone_grid, cov_from_cone, disc_point

__all__ = [
    "trajectory_colors",
    "plot_cone_surface",
    "plot_cone_trajectories",
    "plot_disc_trajectories",
    "plot_cone_explainer",
    "plot_covariance_ellipse",
    "cone_and_disc_figure",
    "explorer_layer",
    "explorer_grid_paths",
    "explorer_trajectories",
    "family_runs",
    "family_animation",
]


def trajectory_colors(covs, by: str = "start", cmap: str = "viridis"):
    r"""One colour per trajectory, as in the official plots.

    Viridis of the initial :math:`2c` (``by="start"``) or of the final trace (``by="end"``), min–max
    normalised.

    Parameters
    ----------
    covs : sequence of array (m_k, 2, 2)
        The covariance trajectories, each from its initial to its last stored iterate.
    by : {"start", "end"}
        Colour by the off-diagonal coordinate :math:`2c` of each trajectory's first matrix, or by the
        trace of its last one.
    cmap : str
        Name of a registered matplotlib colour map (default ``"viridis"``, as in the official plots).

    Returns
    -------
    numpy.ndarray (n, 4)
        RGBA colours, row k for trajectory k; the smallest value maps to the map's start and the
        largest to its end (all mid-map when every trajectory has the same value).

    Raises
    ------
    ValueError
        If ``by`` is neither ``"start"`` nor ``"end"``.
    """
    if by not in ("start", "end"):
        raise ValueError(f"by must be 'start' or 'end', got {by!r}")
    vals = np.array([cone_coordinates(S[0])[1] if by == "start" else np.trace(S[-1]) for S in covs])
    span = vals.max() - vals.min()
    x = (vals - vals.min()) / span if span > 0 else np.full(len(vals), 0.5)
    return colormaps[cmap](x)


def plot_cone_surface(ax, radius: float = 1.0, *, alpha: float = 0.07, color: str = "k"):
    r"""The PSD cone :math:`v=\sqrt{u^2+w^2}` up to height ``radius`` on a 3-D axis.

    Parameters
    ----------
    ax : mpl_toolkits.mplot3d.axes3d.Axes3D
        A 3-D axis (``projection="3d"``) whose coordinates are the cone coordinates :math:`(u, w, v)`.
    radius : float
        Height (trace :math:`v`) where the drawn surface stops; its rim is a circle of this radius.
    alpha : float
        Opacity of the surface (faint by default, so that trajectories inside stay visible).
    color : str
        Colour of the surface.

    Returns
    -------
    mpl_toolkits.mplot3d.axes3d.Axes3D
        ``ax``, with one translucent surface (60 x 20 polar mesh) added.
    """
    th, r = np.meshgrid(np.linspace(0, 2 * np.pi, 60), np.linspace(0, radius, 20))
    ax.plot_surface(r * np.cos(th), r * np.sin(th), r, alpha=alpha, color=color, linewidth=0)
    return ax


def _style_3d(ax, view):
    ax.view_init(elev=view[0], azim=view[1])
    ax.set_axis_off()


def plot_cone_trajectories(
    ax, covs, *, colors=None, view=(20, -112), line=None, max_height=None, lw: float = 1.0, alpha: float = 0.6
):
    r"""Covariance trajectories in the cone coordinates :math:`(a-b, 2c, a+b)`, each with a dot at its last point.

    ``covs`` is a list of arrays (m_k, 2, 2). ``line`` draws a black ray along a given unit
    direction of the cone (a rank-one line). The cone surface is drawn up to the largest trace
    (or ``max_height``); trajectories are cut where their trace first exceeds ``max_height``. All
    paths go into one line collection (fast with thousands of trajectories).

    Parameters
    ----------
    ax : mpl_toolkits.mplot3d.axes3d.Axes3D
        The 3-D axis drawn on; its view is set and its axes are hidden.
    covs : sequence of array (m_k, 2, 2)
        Covariance trajectories; one that is empty after the cut at ``max_height`` is skipped.
    colors : sequence of colours, optional
        One colour per trajectory; ``None``: :func:`trajectory_colors` of ``covs`` (by the initial
        :math:`2c`).
    view : (float, float)
        Camera elevation and azimuth in degrees (``Axes3D.view_init``).
    line : array_like (3,), optional
        Unit direction :math:`(u, w, v)` of the ray drawn in black from the apex.
    max_height : float, optional
        Trace above which each trajectory is cut (before its first point above it); ``None``: no cut.
    lw : float
        Width of the trajectory lines.
    alpha : float
        Opacity of the trajectory lines (the end dots are opaque).

    Returns
    -------
    mpl_toolkits.mplot3d.axes3d.Axes3D
        ``ax``, holding the line collection, the end dots, the cone surface and the optional ray, with
        limits :math:`[-h, h]^2 \times [0, h]` for the largest drawn trace :math:`h`.
    """
    from mpl_toolkits.mplot3d.art3d import Line3DCollection

    colors = trajectory_colors(covs) if colors is None else colors
    segs, cols, ends = [], [], []
    for S, c in zip(covs, colors):
        p = cone_coordinates(S)
        if max_height is not None:
            above = np.flatnonzero(p[:, 2] > max_height)
            p = p[: above[0]] if above.size else p
        if len(p) == 0:
            continue
        segs.append(p)
        cols.append(c)
        ends.append(p[-1])
    tips = np.array(ends).reshape(-1, 3)
    ax.add_collection3d(Line3DCollection(segs, colors=cols, linewidths=lw, alpha=alpha))
    ax.scatter(tips[:, 0], tips[:, 1], tips[:, 2], color=cols, s=5, depthshade=False)
    top = max((float(p[:, 2].max()) for p in segs), default=1.0)
    plot_cone_surface(ax, top)
    if line is not None:
        t = np.linspace(0, top * np.sqrt(2), 50)
        ax.plot(line[0] * t, line[1] * t, line[2] * t, color="k", alpha=0.5, lw=1)
    ax.set_xlim(-top, top)
    ax.set_ylim(-top, top)
    ax.set_zlim(0, top)
    _style_3d(ax, view)
    return ax


def plot_disc_trajectories(ax, covs, *, colors=None, lw: float = 1.0, alpha: float = 0.6):
    r"""Trace-normalised trajectories :math:`\Sigma/\operatorname{tr}\Sigma` in the unit disc.

    The circle is the set of rank-one covariances.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A 2-D axis; it gets an equal aspect, limits :math:`\pm 1.08` and no visible axes.
    covs : sequence of array (m_k, 2, 2)
        Covariance trajectories, each mapped point by point to the disc
        (:func:`~tokendynamics.book.studies.gaussian.disc_point`).
    colors : sequence of colours, optional
        Colour of each trajectory and of its end dot; ``None``: :func:`trajectory_colors` (by the
        initial :math:`2c`).
    lw : float
        Line width of the normalised paths.
    alpha : float
        Their opacity; the end dots and the unit circle have their own.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax``, with a line collection of the paths, a dot at each path's last point and the unit circle.
    """
    from matplotlib.collections import LineCollection

    colors = trajectory_colors(covs) if colors is None else colors
    segs = [disc_point(S) for S in covs]
    ax.add_collection(LineCollection(segs, colors=colors, linewidths=lw, alpha=alpha))
    ends = np.array([p[-1] for p in segs]).reshape(-1, 2)
    ax.scatter(ends[:, 0], ends[:, 1], color=colors, s=5, zorder=3)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), color="k", alpha=0.5, lw=0.8)
    ax.set_aspect("equal")
    ax.set_xlim(-1.08, 1.08)
    ax.set_ylim(-1.08, 1.08)
    ax.set_axis_off()
    return ax


def plot_cone_explainer(ax, *, view=(20, -112)):
    r"""The cone of 2 x 2 PSD matrices, the trace-one section (a disc, here at height 1/2) and landmarks.

    Marks the apex (:math:`\Sigma=0`), the isotropic matrix :math:`I/2` (centre of the trace-one disc)
    and two rank-one matrices :math:`uu^\top` on the surface.

    Parameters
    ----------
    ax : mpl_toolkits.mplot3d.axes3d.Axes3D
        The 3-D axis of the picture (its axes are hidden).
    view : (float, float)
        Camera elevation and azimuth in degrees.

    Returns
    -------
    mpl_toolkits.mplot3d.axes3d.Axes3D
        ``ax``, with the cone up to trace 1, the circles at heights 1/2 and 1, four labelled red
        points (:math:`0`, :math:`I/2`, :math:`e_1e_1^\top`, :math:`uu^\top`) and the rank-one ray
        of multiples of :math:`e_1e_1^\top`.
    """
    plot_cone_surface(ax, 1.0, alpha=0.08)
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(0.5 * np.cos(th), 0.5 * np.sin(th), 0.5 * np.ones_like(th), color="k", alpha=0.6, lw=0.9)
    ax.plot(np.cos(th), np.sin(th), np.ones_like(th), color="k", alpha=0.8, lw=1.2)
    pts = {
        r"$0$": np.zeros((2, 2)),
        r"$I/2$": np.eye(2) / 2,
        r"$e_1e_1^\top$": np.diag([1.0, 0.0]),
        r"$uu^\top$": 0.5 * np.array([[1.0, 1.0], [1.0, 1.0]]),
    }
    for label, S in pts.items():
        u, w, v = cone_coordinates(S)
        ax.scatter(u, w, v, color="C3", s=18)
        ax.text(u, w, v + 0.06, label, ha="center")
    s = np.linspace(0, 1, 20)
    ax.plot(s, 0 * s, s, color="C0", lw=1.5)  # the ray of multiples of e_1 e_1^T (rank one)
    _style_3d(ax, view)
    return ax


def plot_covariance_ellipse(ax, mean, cov, *, nsig: float = 2.0, **kw):
    r"""The ellipse :math:`\{x: (x-\alpha)^\top\Sigma^{-1}(x-\alpha)=\mathrm{nsig}^2\}` of a 2-D Gaussian.

    Drawn as the image of the unit circle by :math:`x=\alpha+\mathrm{nsig}\,\Sigma^{1/2}u` (120 points),
    so a singular :math:`\Sigma` gives a segment.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    mean : array_like (2,)
        The centre :math:`\alpha`.
    cov : array_like (2, 2)
        The covariance :math:`\Sigma` (symmetric positive semi-definite).
    nsig : float
        Number of standard deviations: the ellipse's half-axes are ``nsig`` times the square roots of
        the eigenvalues of :math:`\Sigma`.
    **kw
        Passed to ``ax.plot`` (colour, line width, label, ...).

    Returns
    -------
    list of matplotlib.lines.Line2D
        What ``ax.plot`` returns: one closed line.
    """
    th = np.linspace(0, 2 * np.pi, 120)
    circle = np.stack([np.cos(th), np.sin(th)])
    pts = np.asarray(mean, dtype=float)[:, None] + nsig * psd_sqrt(cov) @ circle  # x = alpha + nsig Sigma^{1/2} u
    return ax.plot(pts[0], pts[1], **kw)


def cone_and_disc_figure(
    panels: dict, *, view=(20, -112), color: str = "start", line=None, max_height=None, width: float = 7.0
):
    r"""Trajectories in the 3-D cone (top) and the normalised disc (below), one block per panel, with colour bars.

    ``panels`` maps a title to a list of covariance trajectories (arrays (m_k, 2, 2)). ``line`` may
    be a dict title -> unit cone direction. Colours follow :func:`trajectory_colors` (``color``);
    each block has a colour bar of its own range (initial :math:`2c`, or final trace). At most four
    blocks per row (one row up to four panels), ``width`` inches wide in all.

    Parameters
    ----------
    panels : dict of str to sequence of array (m_k, 2, 2)
        Panel title -> its covariance trajectories, drawn in the dict's order.
    view : (float, float)
        Camera elevation and azimuth of every cone.
    color : {"start", "end"}
        The ``by`` of :func:`trajectory_colors`, and the quantity of the colour bars.
    line : dict or array_like (3,), optional
        Rank-one ray drawn in the cones: a dict title -> direction (panels not in it get none) or one
        direction for every panel; ``None``: no ray.
    max_height : float, optional
        Trace where the cone trajectories are cut (:func:`plot_cone_trajectories`); the disc always
        shows the whole paths.
    width : float
        Figure width in inches; the height follows from the number of rows.

    Returns
    -------
    matplotlib.figure.Figure
        The new figure: for each panel a 3-D cone axis (titled), the disc axis below it and a
        horizontal colour bar axis.
    """
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    n = len(panels)
    ncol = min(n, 4)
    nrow = -(-n // ncol)
    w = width / ncol
    fig = plt.figure(figsize=(width, nrow * (2.0 * w + 0.8)))
    gs = fig.add_gridspec(4 * nrow, ncol, height_ratios=[w, w, 0.09 * w, 0.3] * nrow, hspace=0.12, wspace=0.2)
    label = "initial $2c$" if color == "start" else r"final tr $\Sigma$"
    for k, (title, covs) in enumerate(panels.items()):
        r, c = divmod(k, ncol)
        colors = trajectory_colors(covs, by=color)
        ax = fig.add_subplot(gs[4 * r, c], projection="3d")
        ln = line.get(title) if isinstance(line, dict) else line
        plot_cone_trajectories(ax, covs, colors=colors, view=view, line=ln, max_height=max_height)
        ax.set_title(title)
        plot_disc_trajectories(fig.add_subplot(gs[4 * r + 1, c]), covs, colors=colors)
        vals = np.array([cone_coordinates(S[0])[1] if color == "start" else np.trace(S[-1]) for S in covs])
        cax = fig.add_subplot(gs[4 * r + 2, c])
        cb = fig.colorbar(
            ScalarMappable(Normalize(vals.min(), vals.max()), "viridis"), cax=cax, orientation="horizontal"
        )
        cb.set_label(label)
        cb.ax.xaxis.set_major_locator(plt.MaxNLocator(3))
    fig.subplots_adjust(left=0.03, right=0.97, top=0.97, bottom=0.02)
    return fig


# ---------------------------------------------------------------------------------------------
# the explorer's library calls (its widget: tokendynamics.book.explorers.gaussian_preservation)
# ---------------------------------------------------------------------------------------------

EXPLORER_KINDS = ("softmax", "l2", "sinkhorn", "linear")


def explorer_layer(kind: str, A, V) -> Attention:
    r"""The 2-D layer of the explorer: score matrix :math:`A`, value :math:`V`.

    L2 uses :math:`K=I`, :math:`Q=A^\top/2`, so that its bilinear part :math:`2\langle Qx,Ky\rangle`
    is the same :math:`\langle x,Ay\rangle` as softmax's (the kernel adds :math:`-|y|^2`); Sinkhorn
    uses :math:`\varepsilon=1`.

    Parameters
    ----------
    kind : {"softmax", "l2", "sinkhorn", "linear"}
        The attention variant chosen in the explorer.
    A : array_like (2, 2)
        The score matrix set by the explorer's sliders.
    V : array_like (2, 2)
        The value matrix set by its sliders.

    Returns
    -------
    Attention
        A single-head 2-D layer of kind ``kind`` (for ``"l2"`` built from :math:`Q, K` as above).

    Raises
    ------
    ValueError
        If ``kind`` is not one of ``EXPLORER_KINDS``.
    """
    A = np.asarray(A, dtype=float)
    V = np.asarray(V, dtype=float)
    if kind == "l2":
        return Attention("l2", Q=A.T / 2, K=np.eye(2), V=V)
    if kind not in EXPLORER_KINDS:
        raise ValueError(f"kind must be one of {EXPLORER_KINDS}, got {kind!r}")
    return Attention(kind, A=A, V=V)


def explorer_grid_paths(
    kind: str, A, V, T: float = 5.0, *, trace: float = 1.0, grid: int = 5, step: float | None = None
):
    r"""The faint trajectories of the explorer: projected Euler from a ``grid x grid`` disc grid of trace ``trace``.

    Faithful mode (:func:`~tokendynamics.gaussian.projected_euler`) with ``step`` (by default
    ``max(0.01, T/250)``, so that an update stays fast), stopped at ``T`` or at trace :math:`10^3`.
    Returns the list of covariance paths (arrays (m_k, 2, 2)). They do not depend on :math:`\Sigma_0`:
    the explorer computes them once per variant, :math:`A`, :math:`V` and :math:`T`.

    Parameters
    ----------
    kind : str
        Variant, as in :func:`explorer_layer`.
    A, V : array_like (2, 2)
        Score and value matrices of the layer (:func:`explorer_layer`).
    T : float
        Final time of the faint runs.
    trace : float
        Trace of every initial covariance (the grid is :func:`~tokendynamics.book.studies.gaussian.cone_grid` on
        :math:`[-0.8, 0.8]^2`, points outside the unit disc dropped, scaled by ``trace``).
    grid : int
        Grid points per side of that square.
    step : float, optional
        Euler step; ``None``: ``max(0.01, T/250)``.

    Returns
    -------
    list of array (m_k, 2, 2)
        One path per grid point: every tenth Euler iterate and the last one stored
        (``EulerRuns.saved_cov``).
    """
    step = max(0.01, T / 250) if step is None else step
    runs = projected_euler(
        trace * cone_grid(grid, grid, (-0.8, 0.8, -0.8, 0.8)),
        explorer_layer(kind, A, V),
        step=step,
        tol_low=1e-7,
        tol_high=1e3,
        max_iter=int(np.ceil(T / step)) + 1,
        t_max=T,
        save=10,
    )
    return runs.saved_cov


def explorer_trajectories(
    kind: str, A, V, u: float, w: float, trace: float = 1.0, T: float = 5.0, *, grid: int = 5, step: float | None = None
):
    r"""What the explorer draws: the accurate trajectory from :math:`\Sigma_0` and faint faithful ones from a grid.

    :math:`\Sigma_0` is given by its disc point :math:`(u,w)` (:math:`u^2+w^2<1`) and its trace.
    Returns ``(trajectory, grid_covs)``: a :class:`~tokendynamics.gaussian.GaussianTrajectory`
    (accurate mode, blow-up event at trace :math:`10^3`) and the paths of
    :func:`explorer_grid_paths` (none if ``grid`` is 0).

    Parameters
    ----------
    kind : str
        Variant, as in :func:`explorer_layer`.
    A, V : array_like (2, 2)
        Score and value matrices of the layer.
    u, w : float
        Disc coordinates of :math:`\Sigma_0/\operatorname{tr}\Sigma_0`; :math:`u^2+w^2<1`.
    trace : float
        :math:`\operatorname{tr}\Sigma_0`, also the trace of the grid's initial covariances.
    T : float
        Final time of the accurate trajectory and of the grid runs.
    grid : int
        Grid points per side for :func:`explorer_grid_paths`; 0 skips the faint runs.
    step : float, optional
        Euler step of the faint runs (``None``: the default of :func:`explorer_grid_paths`).

    Returns
    -------
    trajectory : GaussianTrajectory
        :func:`~tokendynamics.gaussian.solve_gaussian` from mean zero and :math:`\Sigma_0`
        (``rtol=1e-7``, ``atol=1e-10``), stopped at ``T`` or when the trace reaches :math:`10^3`.
    grid_covs : list of array (m_k, 2, 2)
        The faint paths (an empty list when ``grid`` is 0).

    Raises
    ------
    ValueError
        If :math:`(u, w)` is not strictly inside the unit disc.
    """
    if u * u + w * w >= 1:
        raise ValueError("the disc point (u, w) must lie inside the unit disc")
    layer = explorer_layer(kind, A, V)
    cov0 = trace * cov_from_cone([u, w, 1.0])
    traj = solve_gaussian(np.zeros(2), cov0, layer, T, rtol=1e-7, atol=1e-10, blowup_trace=1e3)
    covs = explorer_grid_paths(kind, A, V, T, trace=trace, grid=grid, step=step) if grid else []
    return traj, covs


def family_runs(layers, inits, *, T: float, step: float, tol_high: float = 1e3):
    r"""Projected Euler runs (faithful scheme, stopped at ``T`` or at trace ``tol_high``) of ``inits`` for each layer of
    a family.

    Returns a list (one entry per layer) of lists of covariance paths, for :func:`family_animation`.

    Parameters
    ----------
    layers : iterable of Attention
        The family: one layer per frame of the animation.
    inits : array (B, 2, 2) or (2, 2)
        Initial covariances, the same for every layer (e.g. a :func:`~tokendynamics.book.studies.gaussian.cone_grid`).
    T : float
        Final time: each run has at most ``ceil(T/step) + 1`` iterations and stops at ``T``.
    step : float
        Euler step.
    tol_high : float
        Trace above which a run stops as a blow-up. There is no convergence stop (``tol_low = 0``).

    Returns
    -------
    list of list of array (m_k, 2, 2)
        Entry j: the stored paths (log-spaced iterates and the last, ``EulerRuns.saved_cov``) of the
        ``inits`` under ``layers[j]``.
    """
    max_iter = int(np.ceil(T / step)) + 1
    return [
        projected_euler(
            inits, layer, step=step, tol_low=0.0, tol_high=tol_high, max_iter=max_iter, t_max=T, save="log"
        ).saved_cov
        for layer in layers
    ]


def family_animation(paths, titles, *, view=(20, -112), interval: int = 200, dpi: int = 80):
    r"""Animation (``FuncAnimation``; render with ``.to_jshtml()``) over a family of runs: cone and disc per frame.

    ``paths`` comes from :func:`family_runs`; ``titles`` labels the frames. Works without a kernel
    in the static book; keep it under about 60 frames.

    Parameters
    ----------
    paths : list of list of array (m_k, 2, 2)
        Frame k shows the trajectories ``paths[k]``; the cones of all frames are cut at the same
        height, the largest final trace over all frames capped at 3.
    titles : sequence of str
        The figure's title at each frame, one per entry of ``paths``.
    view : (float, float)
        Camera elevation and azimuth of the cone panel.
    interval : int
        Delay between frames in milliseconds.
    dpi : int
        Resolution of the 6.4 x 3.0 inch figure (and of the rendered frames).

    Returns
    -------
    matplotlib.animation.FuncAnimation
        The animation, one frame per entry of ``paths`` (cone on the left, disc on the right,
        coloured by the initial :math:`2c`). Its figure is closed, so it is not shown as a still
        image as well.
    """
    from matplotlib.animation import FuncAnimation

    fig = plt.figure(figsize=(6.4, 3.0), dpi=dpi)
    ax3 = fig.add_subplot(1, 2, 1, projection="3d")
    ax2 = fig.add_subplot(1, 2, 2)
    height = max(min(float(np.trace(S[-1])), 3.0) for covs in paths for S in covs)

    def draw(k):
        ax3.cla()
        ax2.cla()
        colors = trajectory_colors(paths[k], by="start")
        plot_cone_trajectories(ax3, paths[k], colors=colors, view=view, max_height=height)
        plot_disc_trajectories(ax2, paths[k], colors=colors)
        fig.suptitle(titles[k])
        return []

    anim = FuncAnimation(fig, draw, frames=len(paths), interval=interval, blit=False)
    plt.close(fig)
    return anim
