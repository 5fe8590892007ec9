r"""The exact reduction of linear attention on the sphere, in any dimension, to a d x d matrix ODE.

Every token feels the same linear field :math:`M(t)=\beta V\Sigma(t)A^\top`, so the tokens are carried by one
matrix: :math:`x_k(t)=\Phi(t)x_k(0)/|\Phi(t)x_k(0)|`. In d = 2 this is the Möbius action of the
Watanabe–Strogatz reduction (:mod:`tokendynamics.watanabe_strogatz`).

References
----------
Paper 2 (Li et al., 2026), the exact low-dimensional form of linear attention. Book:
``chapters/06_high_dimensional.md``, equation (eq-hd-sigma); ``chapters/04_kuramoto_reduction.md``, equation (eq-ws).
"""

from __future__ import annotations

import math

import numpy as np

from .attention import Attention, require_layer
from .metrics import order_parameters
from .odes import solve_ode
from .particles import Trajectory, normalize_rows
from .validation import (
    SOLVERS,
    time_grid,
    validate_choice,
    validate_finite,
    validate_flag,
    validate_positive,
    validate_tokens,
)

__all__ = ["projective_flow"]


def projective_flow(
    X0,
    layer: Attention,
    t_span,
    *,
    t_eval=None,
    solver: str = "DOP853",
    rtol: float = 1e-9,
    atol: float = 1e-11,
    until: float | None = None,
    return_phi: bool = False,
):
    r"""Linear attention on the sphere in any d through its exact projective reduction.

    .. math:: x_k(t)=\frac{\Phi(t)x_k(0)}{|\Phi(t)x_k(0)|},\qquad \dot\Phi=\big(\beta V\Sigma(t)A^\top-\mu(t)I\big)\Phi,
              \qquad \Phi(0)=I,\qquad \Sigma=\frac1n\sum_kx_kx_k^\top,

    :math:`\mu=\langle M\Phi,\Phi\rangle_F/|\Phi|_F^2` keeping :math:`|\Phi|_F=\sqrt d`: :math:`O(nd^2+d^3)` per
    evaluation. Once the tokens have clustered the equation turns mildly stiff: ``until`` stops it there.

    Parameters
    ----------
    X0 : array (n, d)
        Initial unit tokens.
    layer : Attention
        Linear attention, one head, not causal.
    t_span : float or (0, T)
        Integration interval.
    t_eval : array, optional
        Output times (default 201 points).
    solver, rtol, atol
        ``scipy.integrate.solve_ivp`` method and tolerances.
    until : float, optional
        Stop where :math:`\hat R_2` (:func:`~tokendynamics.metrics.order_parameters`) reaches this level; that
        time is ``info["event_time"]`` (``inf`` if not reached).
    return_phi : bool
        Also return :math:`\Phi` at the output times, shape (m, d, d).

    Returns
    -------
    Trajectory
        Tokens at the output times (``method="projective"``), or ``(Trajectory, Phi)``.

    References
    ----------
    Paper 2 (Li et al., 2026), linear attention on the sphere and its exact low-dimensional form; book:
    ``chapters/06_high_dimensional.md``, equation (eq-hd-sigma).
    """
    require_layer(layer)
    layer.kind.require("second_moment", "layer: the projective reduction (it holds for linear attention)")
    if layer.n_heads != 1 or layer.causal:
        raise ValueError("layer must have one non-causal head: the projective reduction is implemented for that case")
    A, V, beta = layer.A[0], layer.V[0], layer.beta
    X0 = validate_tokens(X0, layer.d, name="X0")
    if np.max(np.abs(np.linalg.norm(X0, axis=1) - 1)) > 1e-6:
        raise ValueError("X0 must contain unit tokens (use normalize_rows)")
    X0 = normalize_rows(X0)
    n, d = X0.shape
    t0, T, t_eval = time_grid(t_span, t_eval, default=201)
    solver = validate_choice(solver, "solver", SOLVERS)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    return_phi = validate_flag(return_phi, "return_phi")

    def tokens(Phi):
        Y = X0 @ np.swapaxes(Phi, -1, -2)
        return Y / np.linalg.norm(Y, axis=-1, keepdims=True)

    def rhs(t, y):
        Phi = y.reshape(d, d)
        X = tokens(Phi)
        MPhi = (beta * (V @ (X.T @ X / n))) @ (A.T @ Phi)
        return (MPhi - np.vdot(MPhi, Phi) / np.vdot(Phi, Phi) * Phi).ravel()

    events = None
    if until is not None:
        level = validate_finite(until, "until")

        def events(t, y):
            return order_parameters(tokens(y.reshape(d, d)))[1] - level

        events.terminal, events.direction = True, 1  # type: ignore[attr-defined]  # solve_ivp's event attributes
    options = {"t_eval": t_eval, "method": solver, "rtol": rtol, "atol": atol, "events": events}
    sol = solve_ode(rhs, np.eye(d).ravel(), (t0, T), what="the projective reduction", blowup=True, **options)
    ts, Y = sol.t, sol.y.T
    info = {"nfev": int(sol.nfev), "solver": solver, "rtol": rtol, "atol": atol}
    if until is not None:
        hit = sol.t_events[0]
        info["event_time"] = float(hit[0]) if hit.size else math.inf
        if hit.size:  # end the output at the event
            ts, Y = np.append(ts, hit[0]), np.vstack([Y, sol.y_events[0][:1]])
    if ts.size == 0 or ts[0] > t0:
        ts, Y = np.concatenate([[t0], ts]), np.vstack([np.eye(d).ravel()[None], Y])
    Phis = Y.reshape(-1, d, d)
    traj = Trajectory(t=ts, X=tokens(Phis), layer=layer, method="projective", sphere=True, info=info)
    return (traj, Phis) if return_phi else traj
