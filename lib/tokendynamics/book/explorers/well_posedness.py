r"""Chapter 01's explorer: one attention variant of paper 1 pushing planar tokens.

Controls: the variant, :math:`\beta`, the four entries of :math:`A` and the value matrix
:math:`V=s\,R_\theta` (a scaled rotation). One update is :func:`variants_update`: the chosen
variant of :func:`~tokendynamics.book.studies.variants.paper1_variants` run from fixed tokens with the fixed-step
RK4 integrator (stopped at a blow-up); a Sinkhorn iteration that does not converge is reported in
the status line (and cached: it is the slowest state, up to seconds).
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from ...docstrings import fill_doc
from ...particles import Trajectory, rotation_matrix
from ..experiments import settings
from ..studies.variants import VARIANT_NAMES, paper1_variants
from ..widgets import EXPLORER_DOC, Explorer, choice, live_explorer, slider, sticky_limits

__all__ = ["variants_update", "VariantsExplorer", "variants_explorer", "VARIANT_LABELS"]

#: Plain-text names of the variants (no mathtext: cheaper to draw, same in the status line).
VARIANT_LABELS = {
    "softmax": "softmax",
    "multihead": "multi-head",
    "l2": "ℓ²",
    "sinkhorn": "Sinkhorn",
    "sigmoid": "sigmoid",
    "linear": "linear",
    "unnormalized_softmax": "unnormalised softmax",
    "masked": "masked (sink)",
}


@fill_doc(EXPLORER_DOC)
def variants_update(variant: str, A, V, beta: float, X0, T: float, dt: float) -> tuple[Trajectory, np.ndarray]:
    r"""One update of chapter 01's explorer: ``variant`` of :func:`~tokendynamics.book.studies.variants.paper1_variants`
    with score matrix ``A``, value matrix ``V`` and inverse temperature ``beta``, run from ``X0`` to
    ``T`` (RK4, step ``dt``, stopped at a blow-up: ``trajectory.blowup_time``).

    Returns ``(trajectory, paths)``, ``paths`` the tokens' positions (times, n, 2) without the sink
    of masked attention. Raises the library's errors (e.g.
    :class:`~tokendynamics.errors.ConvergenceError` when Sinkhorn does not converge).

    Parameters
    ----------
    variant : str
        Name of the variant.
    %(AV)s
    %(beta)s
    X0 : array (n, 2)
        Initial tokens.
    T, dt : float
        Horizon and step.

    Returns
    -------
    trajectory : Trajectory
    paths : array (times, n, 2)

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants; book: ``chapters/01_well_posedness.md``,
    equation (eq-p1-ips).
    """
    var = paper1_variants(np.asarray(A, float), np.asarray(V, float), beta=beta, names=[variant])[variant]
    traj, system = var.run(X0, T, dt=dt)
    return traj, system.tokens(traj.X)


@fill_doc(EXPLORER_DOC)
class VariantsExplorer(Explorer):
    """Token paths of one variant (grey: paths and start; coloured by initial angle: the end).

    Parameters
    ----------
    %(mode)s
    %(values)s

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants; book:
    ``chapters/01_well_posedness.md``, where the explorer runs :func:`variants_update`.
    """

    controls = (
        choice("variant", VARIANT_NAMES, "softmax"),
        slider("beta", 1.5, 0.1, 4.0, label="beta"),
        slider("a11", -1.0, -2.0, 2.0, label="A11"),
        slider("a12", 0.5, -2.0, 2.0, label="A12"),
        slider("a21", -0.5, -2.0, 2.0, label="A21"),
        slider("a22", -0.5, -2.0, 2.0, label="A22"),
        slider("v_scale", 1.0, -2.0, 2.0, label="V scale s"),
        slider("v_angle", 0.0, -3.14, 3.14, label="V angle θ"),
    )
    rows = (("variant", "beta"), ("a11", "a12", "a21", "a22"), ("v_scale", "v_angle"))
    figsize = (5.6, 4.6)

    def __init__(self, mode: str = "fast", **values):
        p = settings("p1_widget", mode)
        (a11, a12), (a21, a22) = p["A"]
        super().__init__(**({"beta": p["beta"], "a11": a11, "a12": a12, "a21": a21, "a22": a22} | values))
        self.X0 = np.random.default_rng(p["seed"]).uniform(-1, 1, (p["n"], 2))
        self.T, self.dt = float(p["T"]), float(p["dt"])

    def compute(self, state):
        A = np.array([[state["a11"], state["a12"]], [state["a21"], state["a22"]]])
        V = state["v_scale"] * rotation_matrix(state["v_angle"])
        return variants_update(state["variant"], A, V, state["beta"], self.X0, self.T, self.dt)

    def setup(self, fig):
        ax = fig.add_axes((0.03, 0.03, 0.94, 0.86))
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
        colours = np.arctan2(self.X0[:, 1], self.X0[:, 0])
        self.paths = self.dynamic(ax.add_collection(LineCollection([], colors="0.78", linewidths=0.5, zorder=1)))
        ax.scatter(self.X0[:, 0], self.X0[:, 1], s=6, color="0.62", zorder=2, edgecolor="none")
        self.end = self.dynamic(
            ax.scatter(self.X0[:, 0], self.X0[:, 1], s=12, c=colours, cmap="twilight", zorder=3, edgecolor="none")
        )
        self.ax = ax
        self._drawn = False

    def draw(self, result, state):
        traj, X = result
        X = X[np.all(np.isfinite(X), axis=(1, 2))]  # a blow-up: the finite part of the run
        self.paths.set_segments(np.transpose(X, (1, 0, 2)))
        self.end.set_offsets(X[-1])
        ends = np.concatenate([X[0], X[-1]])
        lo, hi = ends.min(axis=0), ends.max(axis=0)
        centre, half = (lo + hi) / 2, max(float(np.max(hi - lo)) / 2, 1e-3)
        x = sticky_limits(self.ax.get_xlim() if self._drawn else None, centre[0] - half, centre[0] + half, pad=0.05)
        y = sticky_limits(self.ax.get_ylim() if self._drawn else None, centre[1] - half, centre[1] + half, pad=0.05)
        half = max(x[1] - x[0], y[1] - y[0]) / 2  # square limits: the panel keeps its shape
        self.ax.set_xlim(sum(x) / 2 - half, sum(x) / 2 + half)
        self.ax.set_ylim(sum(y) / 2 - half, sum(y) / 2 + half)
        self._drawn = True

    def describe(self, result, state):
        traj, _ = result
        name = VARIANT_LABELS[state["variant"]]
        if traj.blew_up:
            return (
                f"{name}: blow-up at t = {traj.blowup_time:.2f}; the run stops there (tokens at t = {traj.t[-1]:.2f})"
            )
        return f"{name}: grey, the tokens at t = 0 and their paths; coloured, at t = {traj.t[-1]:.2f}"


variants_explorer = live_explorer(VariantsExplorer, "variants_explorer", "Chapter 01")
