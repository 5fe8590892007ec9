"""The chapters' live explorers: one update function per explorer, computed by the library.

Each ``*_update`` function is what one move of a control recomputes; the chapters' widgets call
it, the tests and ``benchmarks/bench_explorers.py`` time it. Nothing here is mathematics: every
number comes from the core modules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..highdim import case_parameters, make_case, predict_for_case, run_variant
from ..kuramoto import solve_phases
from ..particles import sample_sphere
from ..regimes import regime_portrait

__all__ = ["regimes_update", "highdim_update"]


def regimes_update(
    A,
    V,
    beta=1.0,
    theta0=None,
    *,
    z0=0.3 + 0.2j,
    T: float = 20.0,
    n_grid: int = 15,
    n_times: int = 201,
    rtol: float = 1e-6,
    atol: float = 1e-8,
):
    r"""One update of the chapter's live explorer: :func:`~tokendynamics.regimes.regime_portrait` and a particle run.

    The particles start from the angles ``theta0`` (e.g. :func:`~tokendynamics.ott_antonsen.sample_ott_antonsen`
    around ``z0``) and are integrated to ``T`` by the exact O(n) angle equations
    :math:`\dot\theta_k=\omega(R_2)+\operatorname{Im}(H(R_2)e^{-2i\theta_k})`
    (:func:`~tokendynamics.kuramoto.solve_phases`, paper 2, spec §2.3), the same dynamics as the
    core's ``Attention("linear")`` on the circle, with loose tolerances (``rtol``, ``atol``: the
    path of :math:`R_2` is drawn, not measured) and ``n_times`` stored times. Returns
    ``(Portrait, PhaseSolution)``; draw them with :func:`tokendynamics.book.kuramoto_plots.draw_explorer`.
    """
    if theta0 is None:
        raise ValueError("explore needs the initial angles theta0 of the particles")
    portrait = regime_portrait(A, V, beta, z0, n_grid=n_grid)
    phases = solve_phases(theta0, A, V, beta, T, t_eval=np.linspace(0.0, float(T), int(n_times)), rtol=rtol, atol=atol)
    return portrait, phases


def highdim_update(
    case: str = "case4",
    *,
    d: int = 16,
    n: int = 64,
    T: float = 30.0,
    beta: float = 1.0,
    seed: int = 0,
    matrix_seed: int = 42,
    kinds=("linear", "unnormalized_softmax"),
    n_eval: int = 61,
    rtol: float = 1e-4,
    atol: float = 1e-6,
    **knobs,
) -> dict[str, Any]:
    r"""One update of the chapter's widget: the chosen case at a small size, every variant in ``kinds``.

    ``knobs`` are the flat widget controls (``spectrum, top, a, b, skew_scale, sigma``); the ones the
    case uses are picked by :func:`~tokendynamics.highdim.case_parameters`. Runs the particle system of every variant
    (LA through :math:`\Sigma`) with loose tolerances, which keeps an update well under 0.2 s at the
    default size (measured in the tests). Returns ``{"case": MatrixCase, "prediction": CasePrediction,
    kind: RunSummary, ...}``.
    """
    mc = make_case(case, d, matrix_seed, **case_parameters(case, **knobs))
    X0 = sample_sphere(n, d, seed)
    out: dict[str, Any] = {"case": mc, "prediction": predict_for_case(mc)}
    for k in kinds:
        out[k] = run_variant(mc, k, X0, T, beta=beta, n_eval=n_eval, rtol=rtol, atol=atol)
    return out
