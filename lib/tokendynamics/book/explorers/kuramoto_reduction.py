r"""Chapter 04's explorer: the Ott–Antonsen phase portrait of :math:`R_2`, its regime, and the tokens.

Controls: the entries of :math:`A` and :math:`V` and :math:`\beta`. One update is
:func:`regimes_update`: :func:`~tokendynamics.book.studies.kuramoto.regime_portrait` (the OA field on a grid of
the disk, an OA orbit, the classified regime and the closed form where one applies) and a particle
run by the exact :math:`O(n)` angle equations (:func:`~tokendynamics.kuramoto.solve_phases`). The
arrows, the orbit, the particles' :math:`R_2` path and the tokens are updated in place.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from ...attention import Attention
from ...docstrings import fill_doc
from ...kuramoto import PhaseSolution, solve_phases
from ...ott_antonsen import sample_ott_antonsen
from ...particles import circle_tokens
from ..experiments import settings
from ..kuramoto_plots import REGIME_COLORS, regime_label
from ..studies.kuramoto import Portrait, regime_portrait
from ..widgets import EXPLORER_DOC, Explorer, live_explorer, slider

__all__ = ["regimes_update", "RegimesExplorer", "regimes_explorer"]


@fill_doc(EXPLORER_DOC)
def regimes_update(
    layer,
    theta0=None,
    *,
    z0=0.3 + 0.2j,
    T: float = 20.0,
    n_grid: int = 15,
    n_times: int = 201,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> tuple[Portrait, PhaseSolution]:
    r"""One update of chapter 04's explorer: the portrait of the layer
    (:func:`~tokendynamics.book.studies.kuramoto.regime_portrait`) and a particle run.

    The particles start from the angles ``theta0`` (e.g. :func:`~tokendynamics.ott_antonsen.sample_ott_antonsen`
    around ``z0``) and are integrated to ``T`` by the exact O(n) angle equations
    :math:`\dot\theta_k=\omega(R_2)+\operatorname{Im}(H(R_2)e^{-2i\theta_k})`
    (:func:`~tokendynamics.kuramoto.solve_phases`, paper 2), the dynamics of the linear-attention layer on the
    circle, with loose tolerances (``rtol``, ``atol``: the
    path of :math:`R_2` is drawn, not measured) and ``n_times`` stored times. Returns
    ``(Portrait, PhaseSolution)``.

    Parameters
    ----------
    layer : Attention
        Linear attention on the circle (one head, d = 2).
    theta0 : array (n,)
        Initial angles of the particles.
    z0 : complex
        Start of the OA orbit.
    T : float
        Horizon.
    n_grid : int
        Grid of the portrait.
    n_times : int
        Stored times of the particle run.
    rtol, atol : float
        Tolerances of the particle run.

    Returns
    -------
    portrait : Portrait
    phases : PhaseSolution

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equations (eq-kd) and (eq-oa).
    """
    if theta0 is None:
        raise ValueError("explore needs the initial angles theta0 of the particles")
    portrait = regime_portrait(layer, z0, n_grid=n_grid)
    phases = solve_phases(theta0, layer, T, t_eval=np.linspace(0.0, float(T), int(n_times)), rtol=rtol, atol=atol)
    return portrait, phases


@fill_doc(EXPLORER_DOC)
class RegimesExplorer(Explorer):
    """The disk of :math:`R_2` (left: OA arrows coloured by speed, OA orbit in black from the dot to the
    square, the particles' :math:`R_2` in the regime's colour) and the tokens on the circle (right).

    Parameters
    ----------
    %(mode)s
    seed : int
        Offset of the particles' seed.
    n_grid : int, optional
        Grid of a live portrait.
    %(values)s

    References
    ----------
    Paper 2 (Li et al., 2026), the regimes of linear attention on the circle; book:
    ``chapters/05_kuramoto_regimes.md``, where the explorer runs :func:`regimes_update`.
    """

    controls = (
        *(slider(name, value, -2.0, 2.0) for name, value in (("a11", 1.0), ("a12", 0.0), ("a21", 0.0), ("a22", 1.0))),
        *(slider(name, value, -2.0, 2.0) for name, value in (("v11", 0.8), ("v12", 1.0), ("v21", -1.0), ("v22", -0.2))),
        slider("beta", 1.0, 0.1, 3.0, 0.1),
    )
    rows = (("a11", "a12", "a21", "a22"), ("v11", "v12", "v21", "v22"), ("beta",))
    figsize = (8.0, 4.0)

    def __init__(self, mode: str = "fast", seed: int = 0, *, n_grid: int | None = None, **values):
        super().__init__(**values)
        p = settings("kuramoto_explorer", mode)
        self.z0 = p["z0_abs"] * np.exp(1j * p["z0_arg"])
        self.theta0 = sample_ott_antonsen(self.z0, p["n"], rng=p["seed"] + seed)
        self.T = float(p["T"])
        self.n_grid = int(p["live_n_grid"] if n_grid is None else n_grid)

    def compute(self, state):
        A = np.array([[state["a11"], state["a12"]], [state["a21"], state["a22"]]])
        V = np.array([[state["v11"], state["v12"]], [state["v21"], state["v22"]]])
        layer = Attention("linear", A=A, V=V, beta=state["beta"])
        return regimes_update(layer, self.theta0, z0=self.z0, T=self.T, n_grid=self.n_grid)

    def setup(self, fig):
        disk = fig.add_axes((0.05, 0.17, 0.42, 0.7))
        tok = fig.add_axes((0.55, 0.17, 0.42, 0.7))
        s = np.linspace(0, 2 * np.pi, 361)
        for ax in (disk, tok):
            ax.plot(np.cos(s), np.sin(s), color="0.3" if ax is disk else "0.75", lw=1.0, zorder=1)
            ax.set_aspect("equal")
            ax.set_xlim(-1.1, 1.1)
            ax.set_ylim(-1.1, 1.1)
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ("left", "bottom"):
                ax.spines[side].set_visible(ax is not tok)
        g = np.linspace(-1, 1, self.n_grid)
        gx, gy = np.meshgrid(g, g)
        h = g[1] - g[0]
        zero = np.zeros_like(gx)
        self.arrows = disk.quiver(
            gx, gy, zero, zero, zero, cmap="viridis", angles="xy", scale_units="xy", scale=1.0 / (0.75 * h),
            width=0.006, headwidth=4, pivot="mid", zorder=2,
        )  # fmt: skip
        self.dynamic(self.arrows)
        self.orbit = self.dynamic(disk.plot([], [], color="k", lw=1.3, zorder=3)[0])
        self.orbit_start = self.dynamic(disk.plot([], [], "o", color="k", ms=4, zorder=4)[0])
        self.orbit_end = self.dynamic(disk.plot([], [], "s", color="k", ms=4, zorder=4)[0])
        self.r2 = self.dynamic(disk.plot([], [], lw=1.0, alpha=0.9, zorder=3)[0])
        disk.legend(
            [Line2D([], [], color="k", lw=1.3), Line2D([], [], color="0.45", lw=1.0)],
            ["OA orbit", f"particles' R₂, n = {self.theta0.size}"],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.06),
            ncol=2,
        )
        disk.set_xlabel("Re R₂", labelpad=1)
        disk.set_ylabel("Im R₂", labelpad=1)
        disk.set_title("OA phase portrait of R₂", y=1.01)
        first = circle_tokens(self.theta0)
        tok.scatter(first[:, 0], first[:, 1], s=8, color="0.7", zorder=1)
        self.tokens = self.dynamic(tok.scatter(first[:, 0], first[:, 1], s=14, zorder=2, edgecolor="none"))
        dot = lambda size, colour: Line2D([], [], ls="", marker="o", ms=size, color=colour)
        tok.legend(
            [dot(3, "0.7"), dot(4, "0.45")],
            ["t = 0", f"t = {self.T:g} (colour: the regime)"],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.06),
            ncol=2,
        )
        tok.set_title("tokens", y=1.01)
        self.disk, self.tok = disk, tok

    def draw(self, result, state):
        portrait, phases = result
        f = portrait.field
        speed = np.ma.abs(f)
        direction = f / np.ma.where(speed > 0, speed, 1.0)
        colour = np.ma.log10(np.ma.maximum(speed, 1e-6))
        self.arrows.set_UVC(direction.real, direction.imag, colour)
        self.arrows.set_clim(float(colour.min()), float(colour.max()) + 1e-12)
        z = portrait.orbit
        self.orbit.set_data(z.real, z.imag)
        self.orbit_start.set_data(z.real[:1], z.imag[:1])
        self.orbit_end.set_data(z.real[-1:], z.imag[-1:])
        colour = REGIME_COLORS[portrait.regime]
        R2 = phases.order_parameter(2)
        self.r2.set_data(R2.real, R2.imag)
        self.r2.set_color(colour)
        self.tokens.set_offsets(circle_tokens(phases.theta[-1]))
        self.tokens.set_color(colour)

    def describe(self, result, state):
        portrait, _ = result
        text = f"OA: {regime_label(portrait.regime)}"
        pred = portrait.prediction
        if pred is None:
            return text + "; no closed form applies"
        text += f"; closed form ({pred.case.replace('_', ' ')}): {pred.regime.replace('_', ' ')}"
        return text + (f", period {pred.period:.3f}" if pred.period is not None else "")


regimes_explorer = live_explorer(RegimesExplorer, "regimes_explorer", "Chapter 04")
