r"""Chapter 08's explorer: a transformer of L blocks against the sphere model's ODE.

Controls: the number of blocks L, the normalisation (post-LN, pre-LN, the sphere retraction or
none), the strength and activation of a random MLP, and :math:`\beta`. One update is
:func:`transformer_update` (the network, :func:`~tokendynamics.book.transformer_figures.network`,
against the ODE, :func:`~tokendynamics.book.transformer_figures.sphere_ode`, which depends on
:math:`\beta` only and is kept between moves): the order parameter :math:`\hat R_1` (left) and the
number of clusters (right) against depth, drawn in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import metrics
from ...transformer import MLP
from ..experiments import settings
from ..transformer_figures import (
    NORM_COLORS,
    NORM_LABELS,
    centred_sphere,
    first_single,
    identity_layer,
    network,
    sphere_ode,
)
from ..widgets import Explorer, choice, live_explorer, slider

__all__ = ["transformer_update", "TransformerExplorer", "transformer_explorer"]


def transformer_update(
    L: int,
    norm: str,
    strength: float,
    beta: float,
    activation: str = "relu",
    *,
    n: int,
    d: int,
    T: float,
    seed: int,
    width: int,
    ode_dt: float,
    ode=None,
) -> dict[str, Any]:
    r"""One update of chapter 08's explorer: L blocks of the chosen kind against the sphere ODE.

    Why 12 parameters: one per control of the explorer (its widgets call it with their values).

    Parameters
    ----------
    L : int
        Number of blocks (step T/L).
    norm : {"post", "pre", "sphere", "none"}
        The normalisation.
    strength : float
        Strength of the random MLP (0: none).
    beta : float
        Inverse temperature of :math:`Q=K=V=I` softmax attention.
    activation : {"relu", "tanh"}
        The MLP's activation.
    n, d : int
        Tokens and dimension (tokens on the unit sphere of :math:`\mathbf 1^\perp`, seed ``seed``).
    T : float
        Depth.
    seed : int
        Seed of the tokens and of the MLP.
    width : int
        Hidden width of the MLP.
    ode_dt : float
        Step of the ODE.
    ode : Trajectory, optional
        The ODE for these tokens and this ``beta``, if already computed.

    Returns
    -------
    dict
        ``t``, ``R1``, ``clusters`` of the network (per block), the same with ``_ode`` for the ODE,
        ``distance`` (largest token distance at depth T), ``t_single`` and ``t_single_ode`` (first
        depth of one cluster).

    References
    ----------
    Book: ``chapters/08_transformer.md``, equation (eq-tf-block); paper 1 (Castin et al.,
    arXiv:2501.18322) and paper 2 (Li et al., 2026) for the ODE limit.
    """
    L = int(L)
    U0 = centred_sphere(n, d, seed)
    layer = identity_layer(d, beta)
    if ode is None:
        ode = sphere_ode(U0, layer, T, ode_dt)
    mlp = MLP(width, strength, activation) if strength > 0 else None
    Y = network(U0, layer, T, L, norm, mlp, seed if mlp else None)
    t = np.linspace(0.0, T, L + 1)
    return {
        "t": t,
        "R1": metrics.order_parameters(Y)[0],
        "clusters": metrics.count_clusters(Y),
        "t_ode": ode.t,
        "R1_ode": metrics.order_parameters(ode.X)[0],
        "clusters_ode": metrics.count_clusters(ode.X),
        "distance": float(np.max(np.linalg.norm(Y[-1] - ode.final, axis=-1))),
        "t_single": first_single(t, Y),
        "t_single_ode": first_single(ode.t, ode.X),
    }


class TransformerExplorer(Explorer):
    """The order parameter :math:`\\hat R_1` (left) and the number of clusters (right) against depth,
    for L blocks (markers) and the sphere model's ODE (black line).

    Parameters
    ----------
    mode : {"fast", "full"}
        Setting of the chapter's parameters (``tokendynamics.book.experiments``).
    **values
        Initial values of the controls.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322) and paper 2 (Li et al., 2026), the ODE limit of deep
    transformers; book: ``chapters/08_transformer.md``, where the explorer runs :func:`transformer_update`.
    """

    controls = (
        slider("L", 12, 1, 48, 1, label="blocks L"),
        choice("norm", ("post", "pre", "sphere", "none"), label="norm"),
        slider("strength", 0.0, 0.0, 4.0, 0.25, label="MLP strength"),
        choice("activation", ("relu", "tanh"), label="MLP activation"),
        slider("beta", 1.0, 0.25, 9.0, 0.25, label="β"),
    )
    rows = (("L", "norm", "beta"), ("strength", "activation"))
    figsize = (8.0, 3.2)

    def __init__(self, mode: str = "fast", **values):
        super().__init__(**values)
        p = settings("transformer", mode)
        self.p = {k: p[k] for k in ("n", "d", "T", "seed")} | {
            "width": p["mlp"]["width"],
            "ode_dt": p["widget"]["ode_dt"],
        }

    def uses(self, state):
        return [c.name for c in self.controls if c.name != "activation" or state["strength"] > 0]

    def compute(self, state):
        p = self.p
        ode = self.memo(
            "ode",
            state["beta"],
            lambda: sphere_ode(
                centred_sphere(p["n"], p["d"], p["seed"]), identity_layer(p["d"], state["beta"]), p["T"], p["ode_dt"]
            ),
        )
        return transformer_update(
            state["L"], state["norm"], state["strength"], state["beta"], state["activation"], ode=ode, **p
        )

    def setup(self, fig):
        from matplotlib.lines import Line2D

        T, n = self.p["T"], self.p["n"]
        ax1 = fig.add_axes((0.075, 0.16, 0.40, 0.66))
        ax2 = fig.add_axes((0.585, 0.16, 0.40, 0.66))
        for ax in (ax1, ax2):
            ax.set_xlim(0, T)
            ax.set_xlabel("depth t")
        ax1.set_ylim(-0.1, 1.05)
        ax1.set_ylabel("order parameter R1")
        ax2.set_yscale("log")
        ax2.set_ylim(0.8, 1.3 * n)
        ticks = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n]
        ax2.set_yticks(ticks, [str(k) for k in ticks])
        ax2.minorticks_off()
        ax2.set_ylabel("clusters")
        self.ode_lines = self.dynamic(
            ax1.plot([], [], color="black", lw=1.5)[0], ax2.step([], [], where="post", color="black", lw=1.5)[0]
        )
        self.net_lines = self.dynamic(
            ax1.plot([], [], "o-", ms=3, lw=1.0)[0], ax2.step([], [], "o-", where="post", ms=3, lw=1.0)[0]
        )
        handles = [Line2D([], [], color="black", lw=1.5), Line2D([], [], color="0.45", marker="o", ms=3, lw=1.0)]
        ax1.legend(handles, ["ODE", "L blocks"], loc="center right")

    def draw(self, result, state):
        (r1, c1), (r2, c2) = self.ode_lines, self.net_lines
        r1.set_data(result["t_ode"], result["R1_ode"])
        c1.set_data(result["t_ode"], result["clusters_ode"])
        r2.set_data(result["t"], result["R1"])
        c2.set_data(result["t"], result["clusters"])
        for line in (r2, c2):
            line.set_color(NORM_COLORS[state["norm"]])

    def describe(self, result, state):
        mlp = f", {state['activation']} MLP {state['strength']:g}" if state["strength"] > 0 else ""
        when = lambda t: "never" if np.isinf(t) else f"from t = {t:.3g}"  # noqa: E731
        return (
            f"L = {int(state['L'])}, {NORM_LABELS[state['norm']]}{mlp}, β = {state['beta']:g}: one cluster "
            f"{when(result['t_single'])} (ODE: {when(result['t_single_ode'])}); {int(result['clusters'][-1])} at "
            f"t = {self.p['T']:g} (ODE: {int(result['clusters_ode'][-1])}); distance {result['distance']:.2g}"
        )


transformer_explorer = live_explorer(TransformerExplorer, "transformer_explorer", "Chapter 08")
