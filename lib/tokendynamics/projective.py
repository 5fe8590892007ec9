r"""The exact reduction of linear attention on the sphere, in any dimension, to a d x d matrix ODE.

Every token moved by linear attention feels the same linear field :math:`M(t)=\beta V\Sigma(t)A^\top`,
so the tokens are carried by one matrix: :math:`x_k(t)=\Phi(t)x_k(0)/|\Phi(t)x_k(0)|`. In d = 2
this is the Möbius action of the Watanabe–Strogatz reduction (:mod:`tokendynamics.watanabe_strogatz`).

References
----------
Paper 2 (Li et al., 2026), the exact low-dimensional form of linear attention. Book:
``chapters/06_high_dimensional.md``, equation (eq-hd-sigma); ``chapters/04_kuramoto_reduction.md``,
equation (eq-ws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .attention import Attention, require_layer
from .docstrings import fill_doc
from .metrics import order_parameters
from .odes import solve_ode
from .particles import Trajectory, normalize_rows
from .validation import (
    PARAMETER_DOCS,
    SOLVERS,
    parse_span,
    time_grid,
    validate_beta,
    validate_choice,
    validate_finite,
    validate_flag,
    validate_positive,
    validate_tokens,
)

__all__ = ["projective_flow", "ProjectiveSolution", "solve_projective"]


def _linear_layer(layer: Attention) -> tuple[np.ndarray, np.ndarray, float]:
    require_layer(layer)
    layer.kind.require("second_moment", "layer: the projective reduction (it holds for linear attention)")
    if layer.n_heads != 1 or layer.causal:
        raise ValueError("layer must have one non-causal head: the projective reduction is implemented for that case")
    return layer.A[0], layer.V[0], layer.beta


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

    Every token feels the same linear field :math:`M(t)=\beta V\Sigma(t)A^\top`, so
    :math:`x_k(t)=\Phi(t)x_k(0)/|\Phi(t)x_k(0)|` with

    .. math::
       \dot\Phi=\big(M(t)-\mu(t)I\big)\Phi,\qquad \Phi(0)=I,\qquad
       \Sigma(t)=\frac1n\sum_k x_k(t)x_k(t)^\top,

    a closed ODE for the d x d matrix :math:`\Phi` (cost :math:`O(nd^2+d^3)` per evaluation, no n x n
    matrix). Once the tokens have clustered, the directions of :math:`\Phi` that the clusters no
    longer use keep decaying exponentially, which makes the equation mildly stiff for explicit
    solvers (the particle system is at rest there): it is the fast solver up to clustering, and
    ``until`` stops it there. The scalar :math:`\mu=\langle M\Phi,\Phi\rangle_F/|\Phi|_F^2` only rescales
    :math:`\Phi` (tokens are invariant under :math:`\Phi\mapsto c\Phi`, :math:`c>0`) and keeps
    :math:`|\Phi|_F=\sqrt d`, so that :math:`\Phi` does not overflow when tokens cluster.

    Parameters
    ----------
    X0 : array (n, d)
        Initial unit tokens.
    layer : Attention
        A linear-attention layer (one head, not causal).
    t_span : float or (0, T)
        Integration interval.
    t_eval : array, optional
        Output times (default 201 points).
    solver, rtol, atol
        ``scipy.integrate.solve_ivp`` method and tolerances.
    until : float, optional
        Stop at the first time :math:`\hat R_2` (:func:`~tokendynamics.metrics.order_parameters`) reaches this level (a
        terminal event located by the solver); that time is ``info["event_time"]`` (``inf`` if the
        level is not reached by T) and the output stops there.
    return_phi : bool
        Also return :math:`\Phi` at the output times, shape (m, d, d).

    Returns
    -------
    Trajectory
        Tokens at the output times (``method="projective"``), or ``(Trajectory, Phi)``.

    This is the library's one implementation of the reduction;
    :func:`tokendynamics.projective.solve_projective` calls it with the matrices A, V.

    References
    ----------
    Paper 2 (Li et al., 2026), linear attention on the sphere and its exact low-dimensional form; book:
    ``chapters/06_high_dimensional.md``, equation (eq-hd-sigma); in d = 2, ``chapters/04_kuramoto_reduction.md``,
    equation (eq-ws).
    """
    A, V, beta = _linear_layer(layer)
    X0 = validate_tokens(X0, layer.d, name="X0")
    if np.max(np.abs(np.linalg.norm(X0, axis=1) - 1)) > 1e-6:
        raise ValueError("X0 must contain unit tokens (use normalize_rows)")
    X0 = normalize_rows(X0)
    n, d = X0.shape
    t0, T = parse_span(t_span)
    _, _, t_eval = time_grid((t0, T), t_eval, default=201)
    solver = validate_choice(solver, "solver", SOLVERS)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    return_phi = validate_flag(return_phi, "return_phi")
    AT = A.T

    def tokens(Phi):
        Y = X0 @ Phi.T
        r = np.linalg.norm(Y, axis=1, keepdims=True)
        return Y / r

    def rhs(t, y):
        Phi = y.reshape(d, d)
        X = tokens(Phi)
        Sigma = X.T @ X / n
        MPhi = (beta * (V @ Sigma)) @ (AT @ Phi)
        mu = np.vdot(MPhi, Phi) / np.vdot(Phi, Phi)
        return (MPhi - mu * Phi).ravel()

    events = None
    if until is not None:
        level = validate_finite(until, "until")

        def reached(t, y):
            X = tokens(y.reshape(d, d))
            return order_parameters(X)[1] - level

        reached.terminal = True  # type: ignore[attr-defined]  # solve_ivp's event attribute
        reached.direction = 1  # type: ignore[attr-defined]  # solve_ivp's event attribute
        events = reached
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
    Ys = X0 @ np.swapaxes(Phis, 1, 2)  # (m, n, d): rows Phi x_k(0)
    Xs = Ys / np.linalg.norm(Ys, axis=2, keepdims=True)
    traj = Trajectory(t=ts, X=Xs, layer=layer, method="projective", sphere=True, info=info)
    return (traj, Phis) if return_phi else traj


@dataclass(frozen=True, eq=False)
class ProjectiveSolution:
    r"""A run of :math:`\dot\Phi=\beta V\Sigma A^\top\Phi` and the tokens it carries.

    Attributes
    ----------
    t : array (m,)
        Output times.
    Phi : array (m, d, d)
        Normalised to :math:`|\Phi|_F=\sqrt d` (a scalar factor, which the tokens do not see; see
        :func:`tokendynamics.projective.projective_flow`).
    X : array (m, n, d)
        :math:`x_k(t)=\Phi(t)x_k(0)/|\Phi(t)x_k(0)|`.
    params : dict
        Parameters and solver details.

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/06_high_dimensional.md``, equation (eq-hd-sigma).
    """

    t: np.ndarray
    Phi: np.ndarray
    X: np.ndarray
    params: dict


@fill_doc(PARAMETER_DOCS)
def solve_projective(
    X0, A, V, beta=1.0, t_span=3.0, *, t_eval=None, method: str = "DOP853", rtol: float = 1e-11, atol: float = 1e-13
) -> ProjectiveSolution:
    r"""Exact reduction of linear attention on :math:`\mathbb S^{d-1}` to a matrix ODE of size :math:`d^2`.

    .. math:: x_k(t)=\frac{\Phi(t)x_k(0)}{|\Phi(t)x_k(0)|},\qquad \dot\Phi=\beta V\Sigma(t)A^\top\Phi
              \ (\text{up to a scalar factor}),\qquad \Sigma=\frac1n\sum_kx_kx_k^\top .

    Any n, any d; in d = 2 it is the Möbius (WS) action. A convenience form taking the matrices:
    the integration is :func:`tokendynamics.projective.projective_flow` (one implementation), called
    with ``Attention("linear", A=A, V=V, beta=beta)``.

    Parameters
    ----------
    X0 : array (n, d)
        Initial unit tokens.
    A, V : array (d, d)
        Score and value matrices.
    %(beta)s
    %(t_span)s
    t_eval : array or int, optional
        Output times (default 401 equally spaced times).
    %(solve_ivp)s

    Returns
    -------
    ProjectiveSolution

    References
    ----------
    Paper 2 (Li et al., 2026), linear attention on the sphere and its exact low-dimensional form; book:
    ``chapters/06_high_dimensional.md``, equation (eq-hd-sigma); in d = 2, ``chapters/04_kuramoto_reduction.md``,
    equation (eq-ws).
    """
    X0 = validate_tokens(X0, name="X0")
    layer = Attention("linear", A=A, V=V, beta=float(validate_beta(beta)))
    t0, T, t_eval = time_grid(t_span, t_eval)
    method = validate_choice(method, "method", SOLVERS)
    traj, Phi = projective_flow(X0, layer, (t0, T), t_eval=t_eval, solver=method, rtol=rtol, atol=atol, return_phi=True)
    n, d = X0.shape
    return ProjectiveSolution(
        t=traj.t,
        Phi=Phi,
        X=traj.X,
        params={
            "beta": layer.beta,
            "n": n,
            "d": d,
            "method": method,
            "rtol": rtol,
            "atol": atol,
            "nfev": traj.info["nfev"],
        },
    )
