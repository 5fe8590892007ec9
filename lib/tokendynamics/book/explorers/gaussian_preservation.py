r"""Chapter 02's explorer: a Gaussian covariance in the PSD cone and in the normalised disc.

Controls: the variant, :math:`T`, the entries of :math:`A` and :math:`V`, and :math:`\Sigma_0` by its
point :math:`(u,w)` in the disc. One update is :func:`cone_update`: the accurate trajectory from
:math:`\Sigma_0` (red) and faint projected-Euler trajectories from a grid (grey). The grid's
trajectories do not depend on :math:`\Sigma_0`: moving :math:`(u,w)` recomputes only the red one.
The cone's surface is made once and rescaled.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection
from mpl_toolkits.mplot3d.art3d import Line3DCollection, Poly3DCollection

from ...docstrings import fill_doc
from ..gaussian_plots import EXPLORER_KINDS, explorer_grid_paths, explorer_trajectories
from ..studies.gaussian import cone_coordinates, disc_point
from ..widgets import EXPLORER_DOC, Explorer, choice, live_explorer, slider, sticky_limits

__all__ = ["cone_update", "ConeExplorer", "cone_explorer"]

#: Highest trace drawn in the cone (a blow-up runs to trace 1000: the cone shows its start).
MAX_HEIGHT = 10.0
_GREY = (0.55, 0.55, 0.55, 0.35)


@fill_doc(EXPLORER_DOC)
def cone_update(kind: str, A, V, u: float, w: float, T: float = 5.0, *, grid: int = 5):
    r"""One update of chapter 02's explorer: :func:`~tokendynamics.book.gaussian_plots.explorer_trajectories`.

    Returns ``(trajectory, grid_paths)``: the accurate Gaussian trajectory from the trace-one
    :math:`\Sigma_0` with disc point :math:`(u,w)` under the 2-D layer ``kind`` with :math:`A`,
    :math:`V` (:func:`~tokendynamics.book.gaussian_plots.explorer_layer`), and the projected-Euler
    paths of a ``grid x grid`` disc grid. Raises ``ValueError`` if :math:`u^2+w^2\ge1`.

    Parameters
    ----------
    kind : str
        Attention kind.
    %(AV)s
    u, w : float
        Point of the unit disc (the trace-one :math:`\Sigma_0`).
    T : float
        Horizon.
    grid : int
        Disc grid points per side.

    Returns
    -------
    trajectory : object
    grid_paths : list of arrays

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the Gaussian mean/covariance equations; book:
    ``chapters/02_gaussian_preservation.md``, equation (eq-gauss-odes).
    """
    return explorer_trajectories(kind, A, V, u, w, T=T, grid=grid)


def _cut(p: np.ndarray, top: float) -> np.ndarray:
    above = np.flatnonzero(p[:, 2] > top)
    return p[: max(above[0], 1)] if above.size else p


@fill_doc(EXPLORER_DOC)
class ConeExplorer(Explorer):
    """The cone (left, 3-D) and the disc of :math:`\\Sigma/\\operatorname{tr}\\Sigma` (right).

    Parameters
    ----------
    %(values)s

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the Gaussian mean/covariance equations; book:
    ``chapters/02_gaussian_preservation.md``, where the explorer runs :func:`cone_update`.
    """

    controls = (
        choice("kind", EXPLORER_KINDS, "softmax", label="variant"),
        slider("T", 5.0, 0.5, 20.0, 0.5),
        slider("a11", -1.0, -2.0, 2.0, label="A11"),
        slider("a12", 0.3, -2.0, 2.0, label="A12"),
        slider("a21", -0.3, -2.0, 2.0, label="A21"),
        slider("a22", 0.4, -2.0, 2.0, label="A22"),
        slider("v11", 1.0, -2.0, 2.0, label="V11"),
        slider("v12", 0.0, -2.0, 2.0, label="V12"),
        slider("v21", 0.0, -2.0, 2.0, label="V21"),
        slider("v22", 1.0, -2.0, 2.0, label="V22"),
        slider("u", 0.3, -0.95, 0.95, label="u of Σ0"),
        slider("w", -0.2, -0.95, 0.95, label="w of Σ0"),
    )
    rows = (("kind", "T"), ("a11", "a12", "a21", "a22"), ("v11", "v12", "v21", "v22"), ("u", "w"))
    figsize = (8.0, 3.7)
    grid = 5

    def compute(self, state):
        A = ((state["a11"], state["a12"]), (state["a21"], state["a22"]))
        V = ((state["v11"], state["v12"]), (state["v21"], state["v22"]))
        traj, _ = explorer_trajectories(state["kind"], A, V, state["u"], state["w"], T=state["T"], grid=0)
        paths = self.memo(
            "grid",
            (state["kind"], A, V, state["T"]),
            lambda: explorer_grid_paths(state["kind"], A, V, state["T"], grid=self.grid),
        )
        return traj, paths

    def setup(self, fig):
        ax3 = fig.add_axes((0.0, 0.0, 0.52, 0.86), projection="3d")
        ax3.view_init(elev=20, azim=-112)
        ax3.set_axis_off()
        a = np.linspace(0, 2 * np.pi, 37)
        self._cone = np.array(
            [[(0, 0, 0), (np.cos(s), np.sin(s), 1), (np.cos(e), np.sin(e), 1)] for s, e in zip(a[:-1], a[1:])]
        )
        self.surface = Poly3DCollection(self._cone, facecolor=(0, 0, 0, 0.07), edgecolor="none")
        self.grid3 = self.dynamic(Line3DCollection([], colors=[_GREY], linewidths=0.6))
        ax3.add_collection3d(self.surface, autolim=False)
        ax3.add_collection3d(self.grid3, autolim=False)
        self.red3 = self.dynamic(ax3.plot([], [], [], color="C3", lw=2)[0])
        self.end3 = self.dynamic(ax3.plot([], [], [], "o", color="C3", ms=4)[0])
        self.top = None
        ax3.set_title("the cone (a − b, 2c, a + b)", y=0.98)
        ax2 = fig.add_axes((0.58, 0.05, 0.38, 0.76))
        th = np.linspace(0, 2 * np.pi, 200)
        ax2.plot(np.cos(th), np.sin(th), color="k", alpha=0.5, lw=0.8)
        self.grid2 = self.dynamic(ax2.add_collection(LineCollection([], colors=[_GREY], linewidths=0.6)))
        self.ends2 = self.dynamic(ax2.scatter([], [], s=5, color=_GREY[:3], zorder=3))
        self.red2 = self.dynamic(ax2.plot([], [], color="C3", lw=2)[0])
        self.end2 = self.dynamic(ax2.plot([], [], "o", color="C3", ms=4)[0])
        ax2.set_aspect("equal")
        ax2.set_xlim(-1.08, 1.08)
        ax2.set_ylim(-1.08, 1.08)
        ax2.set_axis_off()
        ax2.set_title("Σ / tr Σ in the disc (circle: rank one)")
        self.ax3, self.ax2 = ax3, ax2

    def draw(self, result, state):
        traj, paths = result
        cone = [cone_coordinates(S) for S in paths]
        red = cone_coordinates(traj.cov)
        top = min(max([float(p[:, 2].max()) for p in cone] + [float(red[:, 2].max())]), MAX_HEIGHT)
        top = sticky_limits(None if self.top is None else (0.0, self.top), 0.0, top, pad=0.02)[1]
        if top != self.top:  # a new height: the cone's surface is rescaled (and the background redrawn)
            self.surface.set_verts(self._cone * top)
            self.top = top
        self.grid3.set_segments([_cut(p, top) for p in cone])
        red = _cut(red, top)
        self.red3.set_data_3d(red[:, 0], red[:, 1], red[:, 2])
        self.end3.set_data_3d(red[-1:, 0], red[-1:, 1], red[-1:, 2])
        self.ax3.set_xlim(-top, top)
        self.ax3.set_ylim(-top, top)
        self.ax3.set_zlim(0, top)
        disc = [disc_point(S) for S in paths]
        self.grid2.set_segments(disc)
        self.ends2.set_offsets(np.array([p[-1] for p in disc]).reshape(-1, 2))
        d = disc_point(traj.cov)
        self.red2.set_data(d[:, 0], d[:, 1])
        self.end2.set_data(d[-1:, 0], d[-1:, 1])

    def describe(self, result, state):
        traj, _ = result
        head = f"{state['kind']}, Σ0 at (u, w) = ({state['u']:.2f}, {state['w']:.2f})"
        if traj.blew_up:
            return f"{head}: blow-up at t = {traj.blowup_time:.3f} (red, drawn up to trace {MAX_HEIGHT:g})"
        return f"{head}: red to t = {traj.t[-1]:.3g}, trace {np.trace(traj.cov[-1]):.3g}; grey, from a grid"


cone_explorer = live_explorer(ConeExplorer, "cone_explorer", "Chapter 02")
