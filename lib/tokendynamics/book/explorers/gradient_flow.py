r"""Chapter 03's explorer: the interaction energy and two distances along the softmax Gaussian flow.

Controls: :math:`A=R_\theta\operatorname{diag}(a_1,a_2)R_\theta^\top` and
:math:`V=\operatorname{diag}(v_1,v_2)`. One update is :func:`energy_update`, i.e.
:func:`~tokendynamics.book.studies.gradient_flow.gaussian_energy_curves` from the chapter's
:math:`N(\alpha_0,\Sigma_0)`:
:math:`\log_{10}E_A(\mu_t)` (left), :math:`W_2(\mu_0,\mu_t)` and, when :math:`M=VA^{-1}` is
symmetric and definite, :math:`d_{\pm M}(\mu_0,\mu_t)` (right); the headline gives the sign rule.
"""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator

from ...attention import Attention
from ...docstrings import fill_doc
from ...particles import rotation_matrix
from ..experiments import settings
from ..studies.gradient_flow import EnergyCurves, gaussian_energy_curves
from ..widgets import EXPLORER_DOC, Explorer, live_explorer, slider, sticky_limits

__all__ = ["energy_update", "EnergyExplorer", "energy_explorer"]

SIGN_RULE = {1: "E non-decreasing", -1: "E non-increasing", 0: "no sign rule", None: "A singular: no sign rule"}


def energy_update(
    a1: float, a2: float, theta: float, v1: float, v2: float, *, mean0, cov0, T: float, n_times: int
) -> EnergyCurves:
    r"""One update of chapter 03's explorer: :func:`~tokendynamics.book.studies.gradient_flow.gaussian_energy_curves`
    of softmax attention with :math:`A=R_\theta\operatorname{diag}(a_1,a_2)R_\theta^\top`,
    :math:`V=\operatorname{diag}(v_1,v_2)`, from :math:`N(\text{mean0},\text{cov0})` up to ``T`` at
    ``n_times`` times.

    Parameters
    ----------
    a1, a2, theta : float
        Eigenvalues and angle of :math:`A`.
    v1, v2 : float
        Diagonal of :math:`V`.
    mean0, cov0 : array
        The initial Gaussian.
    T : float
        Horizon.
    n_times : int
        Stored times.

    Returns
    -------
    EnergyCurves

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the gradient-flow structure; book: ``chapters/03_gradient_flow.md``,
    equation (eq-gf-energy).
    """
    R = rotation_matrix(theta)
    layer = Attention("softmax", A=R @ np.diag([a1, a2]) @ R.T, V=np.diag([v1, v2]))
    return gaussian_energy_curves(mean0, cov0, layer, T, n_times)


def _range(*arrays) -> tuple[float, float]:
    values = np.concatenate([np.asarray(a, float).ravel() for a in arrays if a is not None])
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else (-1.0, 1.0)


@fill_doc(EXPLORER_DOC)
class EnergyExplorer(Explorer):
    """:math:`\\log_{10}E_A(\\mu_t)` and the distances from :math:`\\mu_0` against depth.

    Parameters
    ----------
    %(mode)s
    n_times : int, optional
        Stored times of a live update.
    %(values)s

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the gradient-flow structure; book:
    ``chapters/03_gradient_flow.md``, where the explorer runs :func:`energy_update`.
    """

    controls = (
        slider("a1", -1.0, -1.5, 1.0),
        slider("a2", -0.4, -1.5, 1.0),
        slider("theta", 0.0, 0.0, 3.14),
        slider("v1", 1.0, -1.0, 2.0),
        slider("v2", 0.4, -1.0, 2.0),
    )
    rows = (("a1", "a2", "theta"), ("v1", "v2"))
    figsize = (8.0, 3.3)

    def __init__(self, mode: str = "fast", *, n_times: int | None = None, **values):
        super().__init__(**values)
        energy, widget = settings("gradient_flow_energy", mode), settings("gradient_flow_widget", mode)
        self.mean0, self.cov0 = energy["mean0"], energy["cov0"]
        self.T = float(widget["T"])
        self.n_times = int(widget["live_n_times"] if n_times is None else n_times)

    def compute(self, state):
        return energy_update(
            state["a1"], state["a2"], state["theta"], state["v1"], state["v2"],
            mean0=self.mean0, cov0=self.cov0, T=self.T, n_times=self.n_times,
        )  # fmt: skip

    def setup(self, fig):
        e_ax = fig.add_axes((0.075, 0.17, 0.39, 0.66))
        d_ax = fig.add_axes((0.585, 0.17, 0.39, 0.66))
        self.energy = self.dynamic(e_ax.plot([], [], color="k")[0])
        self.w2 = self.dynamic(d_ax.plot([], [], color="C0", label="W₂(μ₀, μₜ)")[0])
        self.twisted = self.dynamic(d_ax.plot([], [], color="C1", label="d±M(μ₀, μₜ)")[0])
        self.legend = d_ax.legend(loc="upper left")
        self.dynamic(e_ax.set_title("log₁₀ E_A(μₜ)", y=1.01))  # a fixed y: no title layout per draw
        d_ax.set_title("distance from the input", y=1.01)
        ticks = np.linspace(0, self.T, 4)
        for ax in (e_ax, d_ax):
            ax.set_xlim(0, self.T)
            ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
            ax.yaxis.set_major_locator(MaxNLocator(nbins=3))
            ax.set_xlabel("depth t")
            ax.xaxis.set_label_coords(0.5, -0.13)  # fixed: no tick-label boxes computed per draw
        self.e_ax, self.d_ax = e_ax, d_ax
        self._drawn = False

    def draw(self, result: EnergyCurves, state):
        finite = np.isfinite(result.log_energy)
        log10 = np.where(finite, result.log_energy, np.nan) / np.log(10)
        self.energy.set_data(result.t, log10)
        self.e_ax.set_title("log₁₀ E_A(μₜ)" + ("" if finite.all() else ", infinite where not drawn"))
        self.w2.set_data(result.t, result.w2)
        twisted = result.twisted
        self.twisted.set_data(result.t, np.full_like(result.t, np.nan) if twisted is None else twisted)
        label = "d±M(μ₀, μₜ)" if twisted is not None else "d±M: M not definite"
        if self.legend.get_texts()[1].get_text() != label:  # rare: redraw the background once
            self.legend.get_texts()[1].set_text(label)
            self.invalidate()
        for ax, data in ((self.e_ax, (log10,)), (self.d_ax, (result.w2, twisted))):
            ax.set_ylim(*sticky_limits(ax.get_ylim() if self._drawn else None, *_range(*data), fill=0.25))
        self._drawn = True

    def describe(self, result: EnergyCurves, state):
        text = f"a₂ = {state['a2']:.2f}: sign rule, {SIGN_RULE[result.sign]}"
        if result.blowup_time is not None:
            text += f"; blow-up at t = {result.blowup_time:.2f}"
        return text


energy_explorer = live_explorer(EnergyExplorer, "energy_explorer", "Chapter 03")
