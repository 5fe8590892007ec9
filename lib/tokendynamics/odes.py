r"""The library's stepping layer: every integrator of the particle systems and of the reductions.

* :func:`fixed_step` — Euler or RK4 (:data:`SCHEMES`) on a :class:`Geometry` (Euclidean, the sphere, the cone of
  covariances) for B systems at once, each frozen at its last good state when it blows up; it carries
  :func:`~tokendynamics.particles.simulate` (B = 1) and :func:`~tokendynamics.ensembles.simulate_batch`.
* :func:`dormand_prince_batch` — an adaptive pair for B systems with their own steps (batched covariances).
* :func:`adaptive_solve` — a scipy solver stepped by hand, so that blow-up and event times are located on
  the dense output; :func:`solve_ode` — one ``solve_ivp`` call that refuses failure and NaN.

Each returns a :class:`Run`, and refuses work beyond a budget (:data:`MAX_STEPS`) before or while it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import integrate
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from .docstrings import fill_doc
from .errors import BlowUpError, ConvergenceError, NonFiniteError
from .validation import (
    PARAMETER_DOCS,
    SOLVERS,
    parse_span,
    time_grid,
    validate_choice,
    validate_count,
    validate_finite_array,
    validate_instance,
    validate_positive,
)

__all__ = [
    "solve_ode",
    "adaptive_solve",
    "Run",
    "Geometry",
    "EUCLIDEAN",
    "SPHERE",
    "SCHEMES",
    "rk4_step",
    "step_count",
    "fixed_step",
    "dormand_prince_batch",
    "MAX_STEPS",
    "FIELD_REASONS",
    "MAX_EVALUATIONS",
]

#: Budget of right-hand-side evaluations of :func:`solve_ode` (about 40 000 DOP853 steps); override with ``max_nfev``.
MAX_EVALUATIONS = 500_000

#: Budget of one integration: the most steps a fixed-step run takes, or an adaptive solver accepts, before it
#: refuses (fixed step: up front, naming T, dt and the count) or stops with an error. Override per call.
MAX_STEPS = 10_000_000


def solve_ode(rhs: Callable, y0, t_span, *, what: str = "the integration", blowup: bool = False, **options):
    r"""Integrate :math:`\dot y=f(t,y)` with ``scipy.integrate.solve_ivp``, refusing a failed step or a NaN.

    A failure raises (naming ``what`` and the last time reached) BlowUpError if ``blowup``, NonFiniteError otherwise.

    Parameters
    ----------
    rhs, y0, t_span, what, blowup
        The right-hand side ``(t, y) -> array``, the initial state (k,), :math:`(t_0, T)`, the name of the
        integration in the message, and whether to raise BlowUpError rather than NonFiniteError.
    **options
        Passed to ``solve_ivp``, except ``max_nfev``: the budget of evaluations (:data:`MAX_EVALUATIONS`),
        past which a ConvergenceError names the time reached.

    Returns
    -------
    scipy.integrate.OdeResult

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993).

    Examples
    --------
    >>> sol = solve_ode(lambda t, y: -y, [1.0], (0.0, 1.0), t_eval=[1.0], method="DOP853", rtol=1e-12, atol=1e-14)
    >>> round(float(sol.y[0, -1]), 10) == round(float(np.exp(-1.0)), 10)
    True
    """
    t0, T = parse_span(t_span)
    validate_instance(rhs, Callable, "rhs", "a function rhs(t, y)")
    validate_finite_array(y0, "y0")
    for key in ("rtol", "atol"):
        if key in options:
            validate_positive(options[key], key)
    if options.get("t_eval") is not None:
        time_grid((t0, T), options["t_eval"])
    budget = validate_count(options.pop("max_nfev", MAX_EVALUATIONS), "max_nfev")
    calls = [0]

    def counted(t, y):
        calls[0] += 1
        if t != t:  # a non-finite right-hand side made the solver's time NaN: it would never get further
            raise NonFiniteError(f"{what} failed: its right-hand side is not finite (the solver's time became NaN)")
        if calls[0] > budget:
            raise ConvergenceError(
                f"{what} took max_nfev = {budget} evaluations of its right-hand side and reached only t = {t:.6g} "
                f"of T = {T:.6g}: shorten T, loosen rtol/atol, or pass a larger max_nfev"
            )
        return rhs(t, y)

    sol = solve_ivp(counted, (t0, T), y0, **options)
    if sol.status == -1 or not np.all(np.isfinite(sol.y)):
        last = float(sol.t[-1]) if sol.t.size else t0
        if blowup:
            raise BlowUpError(last, last, f"{what} failed: {sol.message}")
        raise NonFiniteError(f"{what} failed at t = {last:.6g}: {sol.message}")
    return sol


@dataclass(frozen=True, eq=False)
class Run:
    """What every integrator returns (per system for a batch): output times ``t``, states ``y`` (m, ...) or
    (m, B, ...), ``status`` (``"completed"``, ``"threshold"``, ``"event"``, ``"flagged"``, ``"failed"``;
    ``"stopped"``/``"stiff"``), when it stopped (``time``) and the start of that step (``last_good``), the state
    at ``time`` (``y_stop``), the ``reason``, and the evaluations ``nfev`` and ``steps`` taken."""

    t: np.ndarray
    y: np.ndarray
    status: Any
    time: Any
    last_good: Any
    y_stop: np.ndarray
    reason: Any
    nfev: int
    steps: int = 0


@fill_doc(PARAMETER_DOCS)
def adaptive_solve(
    fun,
    t_span,
    y0,
    t_eval=None,
    *,
    solver: str = "DOP853",
    rtol: float = 1e-9,
    atol: float = 1e-11,
    size=None,
    threshold: float = math.inf,
    event=None,
    max_steps: int = MAX_STEPS,
) -> Run:
    r"""Integrate :math:`\dot y=f(t,y)` with a scipy solver stepped by hand, and stop where a size or event crosses.

    A crossing of ``size(y) = threshold`` or of ``event(y) = 0`` (upwards) is located by root-finding on the
    step's dense output; a failure reports the last accepted step.

    Why 11 parameters: the one adaptive integrator of the library takes the problem, the solver and its
    tolerances, two stopping tests and the work budget, each used by some caller.

    Parameters
    ----------
    fun : callable ``(t, y) -> array``
        The right-hand side (flat state).
    %(t_span)s
    y0, t_eval
        Initial state (flattened), and output times (default: every accepted step).
    solver, rtol, atol
        A ``scipy.integrate`` solver class name, and its tolerances.
    size, threshold
        A number per state (its largest entry, a trace...), and the value whose crossing stops the run.
    event : callable, optional
        Stop where ``event(y)`` crosses zero upwards (it must return finite numbers).
    max_steps : int
        Cap on the accepted steps (:data:`MAX_STEPS`): beyond it a ConvergenceError names the time reached.

    Returns
    -------
    Run

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993) (dense output).
    """
    t0, T = parse_span(t_span)
    solver = validate_choice(solver, "solver", SOLVERS)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    max_steps = validate_count(max_steps, "max_steps")
    if t_eval is not None:
        _, _, t_eval = time_grid((t0, T), t_eval)
    y0 = np.array(y0, dtype=float).ravel()
    failure: list = []

    def rhs(t, y):
        if not np.all(np.isfinite(y)):  # a trial stage built on an overflowing one
            failure.append("the state became non-finite")
            return np.full(y.shape, np.nan)
        try:
            return np.asarray(fun(t, y), dtype=float)
        except NonFiniteError as exc:
            failure.append(str(exc))
            return np.full(y.shape, np.nan)

    ode = getattr(integrate, solver)(rhs, t0, y0.copy(), T, rtol=rtol, atol=atol)  # a scipy solver class
    k = 0 if t_eval is None else int(np.searchsorted(t_eval, t0, side="right"))  # the output times reached
    out_t = [t0] if t_eval is None else [float(tt) for tt in t_eval[:k]]
    out_y = [y0.copy() for _ in out_t]
    status, time, last_good, y_stop, reason = "completed", T, T, None, ""

    def event_value(y):
        value = float(event(y))
        if not math.isfinite(value):
            raise ValueError(f"the event function (stop_when) returned {value}: it must return a finite number")
        return value

    checks: list = []  # what stops the run where it crosses zero upwards: (status, function of the state, reason)
    if size is not None:
        checks.append(
            ("threshold", lambda y: size(y) - threshold, f"the size of the state reached the threshold {threshold:.3g}")
        )
    if event is not None:
        checks.append(("event", event_value, "the event function crossed zero"))
    if event is not None and not event_value(y0) < 0:  # reached at the start
        out = np.array(out_y).reshape(len(out_t), y0.size)
        return Run(np.array(out_t), out, "event", t0, t0, y0, "the event function is not negative at the start", 0)
    steps = 0
    while ode.status == "running":
        steps += 1
        if steps > max_steps:
            raise ConvergenceError(
                f"the adaptive solver took max_steps = {max_steps} steps and reached only t = {ode.t:.6g} of "
                f"T = {T:.6g} (the step fell to {ode.step_size:.3g}): raise max_steps, loosen rtol/atol or shorten T"
            )
        message = ode.step()
        if ode.status == "failed":
            status, time, last_good, y_stop = "failed", float(ode.t), float(ode.t), ode.y.copy()
            reason = f"the solver could not continue past t = {time:.6g} ({failure[-1] if failure else message})"
            break
        t_old, t_new = float(ode.t_old), float(ode.t)
        dense, found = None, None
        for what, g, why in checks:  # the first crossing in the step, located on its dense output
            if not g(ode.y) < 0:
                dense = dense or ode.dense_output()
                f = lambda t, g=g, dense=dense: g(dense(t))  # noqa: E731
                tc = (
                    t_old
                    if not f(t_old) < 0
                    else brentq(f, t_old, t_new, xtol=1e-15 * max(1.0, abs(t_new)), rtol=4 * np.finfo(float).eps)
                )
                found = (tc, what, why) if found is None or tc < found[0] else found
        stop = t_new if found is None else found[0]
        if t_eval is None:
            if found is None:
                out_t.append(t_new)
                out_y.append(ode.y.copy())
        else:
            j = int(np.searchsorted(t_eval, stop, side="right"))
            if j > k:
                dense = dense or ode.dense_output()
                out_t.extend(float(tt) for tt in t_eval[k:j])
                out_y.extend(dense(tt) for tt in t_eval[k:j])
                k = j
        if found is not None:
            assert dense is not None  # made when the crossing was located
            time, status, reason = found
            last_good, y_stop = t_old, dense(time)
            break
    if y_stop is None:
        y_stop = ode.y.copy()
    return Run(
        t=np.array(out_t),
        y=np.array(out_y).reshape(len(out_t), y0.size),
        status=status,
        time=float(time),
        last_good=float(last_good),
        y_stop=y_stop,
        reason=reason,
        nfev=int(ode.nfev),
    )


@dataclass(frozen=True, eq=False)
class Geometry:
    r"""Where a state lives: a tangent projection ``project(y, v)`` and a retraction ``retract(y)``.

    Parameters
    ----------
    name, project, retract
        Its name, the tangent projection and the retraction onto the set.
    stages : bool
        Also retract the stage states (the sphere), not only the new state (projected Euler of covariances).

    References
    ----------
    P.-A. Absil, R. Mahony, R. Sepulchre, *Optimization Algorithms on Matrix Manifolds*, Princeton (2008), ch. 4.
    """

    name: str
    project: Callable
    retract: Callable
    stages: bool = True


def _unit(Y):
    # a zero row becomes NaN: the integrator flags that system, never silently
    return Y / np.sqrt(np.einsum("...i,...i->...", Y, Y))[..., None]


def _tangent(y, v):
    return v - np.einsum("...i,...i->...", v, y)[..., None] * y


#: The Euclidean space (no projection, no retraction).
EUCLIDEAN = Geometry("euclidean", lambda y, v: v, lambda y: y)
#: The unit sphere, rows along the last axis: :math:`P^\perp_x v=v-\langle x,v\rangle x`, :math:`x\mapsto x/|x|`.
SPHERE = Geometry("sphere", _tangent, _unit)


def rk4_step(f, t, y, h):
    r"""One step of the classical fourth-order Runge–Kutta method.

    Parameters
    ----------
    f, t, y, h
        The right-hand side ``(t, y) -> array``, time, state (array or Python complex) and step.

    Returns
    -------
    (array, int)
        The new state and the evaluations of f (4).

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993), Section II.1.
    """
    k1 = f(t, y)
    k2 = f(t + h / 2, y + (h / 2) * k1)
    k3 = f(t + h / 2, y + (h / 2) * k2)
    k4 = f(t + h, y + h * k3)
    return y + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4), 4


#: The fixed-step schemes, by name: ``step(f, t, y, h) -> (new state, evaluations of f)``.
SCHEMES = {"euler": lambda f, t, y, h: (y + h * f(t, y), 1), "rk4": rk4_step}


def step_count(t0: float, T: float, dt: float, max_steps: int = MAX_STEPS) -> tuple[int, float]:
    """Steps and step of a fixed-step run on :math:`[t_0, T]` (the step adjusted down to reach T), within the budget.

    Parameters
    ----------
    t0, T, dt
        The span and the requested step.
    max_steps : int
        Budget (:data:`MAX_STEPS`): more steps is a ValueError naming the span, the step and the count.

    Returns
    -------
    (int, float)

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993).
    """
    dt = validate_positive(dt, "dt")
    max_steps = validate_count(max_steps, "max_steps")
    if not t0 < T:
        raise ValueError(f"T must be above t0, got t0 = {t0!r} and T = {T!r}")
    estimate = (T - t0) / dt
    if not estimate <= max_steps:
        raise ValueError(
            f"T - t0 = {T - t0:.6g} with dt = {dt:.3g} needs {estimate:.3g} steps, more than max_steps = "
            f"{max_steps}: raise dt, shorten T, or pass a larger max_steps"
        )
    steps = max(1, int(math.ceil(estimate - 1e-9)))
    return steps, (T - t0) / steps


#: Reasons of the codes a field of :func:`fixed_step` may report for a system.
FIELD_REASONS = {
    1: "non-finite velocity (overflow): the scores beta <x, A y> are too large for this variant at these tokens",
    2: "Sinkhorn did not reach its tolerance",
    3: "converged: the right-hand side fell below its tolerance",
}


def fixed_step(
    field,
    y0,
    t0: float,
    steps: int,
    h: float,
    *,
    scheme: str = "rk4",
    geometry: Geometry = EUCLIDEAN,
    saved=None,
    threshold: float = math.inf,
    max_growth: float | None = None,
    fill: bool = True,
    size=None,
):
    r"""Step B systems :math:`\dot y_b=f_b(t,y_b)` together with a fixed-step scheme on a geometry.

    A system stops, frozen at its last good state, when its field fails, its state is not finite, or its size
    exceeds ``threshold`` or grows by more than ``max_growth`` in one step; the others go on.

    Why 12 parameters: the one fixed-step loop of the library takes the problem, the scheme and geometry, what
    to store (``saved``, ``fill``) and three stopping tests, each used by some caller.

    Parameters
    ----------
    field : callable ``(t, Y, active, t_step) -> (U, codes)``
        The field of the systems ``active`` at stage time t; ``codes`` (None: all fine) of :data:`FIELD_REASONS`.
    y0, t0, steps, h, scheme, geometry
        Initial states (B, ...), initial time, number of steps (:func:`step_count`), step, a name of
        :data:`SCHEMES`, and a :class:`Geometry`.
    saved, fill
        ``k -> bool``: store the state after step k (default: every step); once all have stopped, keep storing
        their frozen states (True) or end the output (False).
    threshold, max_growth, size
        Size beyond which a system stops, largest growth of the size in one step (optional), and the size
        ``Y -> array (b,)`` (default: the largest entry in absolute value).

    Returns
    -------
    Run
        States with B on the second axis, and per system status, times and reason.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993).
    """
    step = SCHEMES[scheme]
    Y = np.array(y0, dtype=float, copy=True)
    B = Y.shape[0]
    axes = tuple(range(1, Y.ndim))
    status = np.full(B, "completed", dtype=object)
    time, last = np.full(B, np.nan), np.full(B, np.nan)
    reason: list = [""] * B
    y_stop = Y.copy()
    measure = size or (lambda Z: np.max(np.abs(Z), axis=axes))
    size = measure(Y) if Y.size else np.zeros(B)
    active = np.arange(B)
    saved = saved or (lambda k: True)
    ts, Ys = ([t0], [Y.copy()]) if saved(0) else ([], [])
    nfev = 0
    for k in range(1, steps + 1):
        t = t0 + (k - 1) * h
        if not active.size and not fill:
            break
        if active.size:
            failed = np.zeros(active.size, dtype=int)

            def f(te, Z, _t=t, _failed=failed, _active=active):
                if not np.isfinite(Z).all():  # a stage left the finite numbers: flag the system, evaluate it at 0
                    bad_in = ~np.all(np.isfinite(Z), axis=axes)
                    _failed[bad_in & (_failed == 0)] = 1
                    Z = np.where(np.expand_dims(bad_in, axes), 0.0, Z)
                Zr = geometry.retract(Z) if geometry.stages else Z
                U, codes = field(te, Zr, _active, _t)
                if codes is not None and codes.any():
                    new = (codes != 0) & (_failed == 0)
                    _failed[new] = codes[new]
                return geometry.project(Zr, U)

            with np.errstate(over="ignore", invalid="ignore"):
                Zn, ne = step(f, t, Y if active.size == B else Y[active], h)
                nfev += ne
                Zn = geometry.retract(Zn)
                finite = np.all(np.isfinite(Zn), axis=axes)
                big = measure(Zn if finite.all() else np.where(np.isfinite(Zn), Zn, 0.0))
            prev = size if active.size == B else size[active]
            bad = (failed != 0) | ~finite | (big > threshold)
            if max_growth is not None:
                bad |= (prev > 0) & (big > max_growth * prev)
            for j in np.flatnonzero(bad):
                b = int(active[j])
                time[b], last[b], y_stop[b] = t + h, t, Zn[j]
                if failed[j]:
                    status[b], reason[b] = "flagged", FIELD_REASONS.get(int(failed[j]), "the field failed")
                elif not finite[j]:
                    status[b], reason[b] = "failed", "the state became non-finite"
                elif big[j] > threshold:
                    status[b] = "threshold"
                    reason[b] = f"max |x_i| = {big[j]:.3g} exceeded blowup_threshold = {threshold:.3g}"
                else:
                    status[b] = "threshold"
                    reason[b] = (
                        f"max |x_i| grew by a factor {big[j] / size[b]:.3g} in one step of {h:.3g} (from "
                        f"{size[b]:.3g} to {big[j]:.3g}), more than max_step_growth = {max_growth:g}: the solution "
                        "blows up within the step or the step is too large for the scheme to follow the flow (lower dt)"
                    )
            if active.size == B and not bad.any():
                Y, size = Zn, big
            else:
                good = ~bad
                Y[active[good]] = Zn[good]
                size[active[good]] = big[good]
                active = active[good]
        if saved(k):
            ts.append(t0 + k * h)
            Ys.append(Y.copy() if active.size else Y)
    return Run(
        t=np.array(ts),
        y=np.array(Ys),
        status=status.astype(str),
        time=time,
        last_good=last,
        y_stop=y_stop,
        reason=tuple(reason),
        nfev=nfev,
        steps=steps,
    )


# Dormand-Prince 5(4) tableau (scipy's RK45): stages, 5th-order weights, error weights (5th minus 4th order)
_DP_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
)
_DP_B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
_DP_E = np.array([71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40])


def dormand_prince_batch(
    f,
    y0,
    T: float,
    *,
    rtol: float,
    atol: float,
    t_eval=None,
    first_step=None,
    max_steps: int = 3000,
    on_step=None,
) -> Run:
    r"""Dormand–Prince 5(4) on B systems :math:`\dot y_b=f(y_b)` at once, each with its own step size.

    The pair and step control of ``scipy.integrate.RK45``, one evaluation ``f(Y, idx)`` per stage for the active
    systems; a step below :math:`10^{-12}t` or ``max_steps`` steps stops a system as ``"stiff"``.

    Parameters
    ----------
    f, y0, T, rtol, atol
        Autonomous right-hand side ``(Y, idx) -> array``, states (B, ...) at t = 0, final time, tolerances.
    t_eval, first_step, max_steps
        Output times (m,) in [0, T] (NaN after a system stopped); initial steps, a float or (B,) (default
        :math:`10^{-2}/(1+\|f(y_0)\|)`, at most T/10); steps after which a system counts as stiff.
    on_step : callable ``(idx, t_old, t_new, y_new) -> mask``, optional
        Which of the systems just stepped to stop.

    Returns
    -------
    Run
        ``y`` at ``t_eval``, ``y_stop``/``time`` the last states and times, ``status`` (``"completed"``,
        ``"stopped"``, ``"stiff"``), ``reason`` the steps of each system.

    References
    ----------
    J. R. Dormand, P. J. Prince, J. Comput. Appl. Math. 6 (1980).
    """
    Y = np.array(y0, dtype=float, copy=True)
    B = Y.shape[0]
    bc = (slice(None),) + (None,) * (Y.ndim - 1)  # broadcast a per-system number over a state
    axes = tuple(range(1, Y.ndim))
    t_eval = np.zeros(0) if t_eval is None else np.asarray(t_eval, dtype=float)
    stored = np.full((t_eval.size,) + Y.shape, np.nan)
    status = np.full(B, "completed", dtype=object)
    steps = np.zeros(B, dtype=int)
    t = np.zeros(B)
    next_out = np.zeros(B, dtype=int)
    if t_eval.size and t_eval[0] == 0.0:
        stored[0] = Y
        next_out[:] = 1
    K1 = f(Y, np.arange(B))
    if first_step is None:
        h = np.minimum(1e-2 / (1.0 + np.sqrt(np.sum(K1**2, axis=axes))), T / 10)
    else:
        h = np.broadcast_to(np.asarray(first_step, dtype=float), (B,)).copy()
    active = np.ones(B, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        while np.any(active):
            idx = np.flatnonzero(active)
            ti, Yi, K0 = t[idx], Y[idx], K1[idx]
            target = np.full(idx.size, float(T))
            if t_eval.size:  # land on the next output time, then on T
                target = np.where(next_out[idx] < t_eval.size, t_eval[np.minimum(next_out[idx], t_eval.size - 1)], T)
            h_free = h[idx]
            hi = np.minimum(h_free, target - ti)
            clipped = hi < h_free
            hb = hi[bc]
            ks = [K0]
            for s in range(1, 6):
                ks.append(f(Yi + hb * sum(a * k for a, k in zip(_DP_A[s], ks)), idx))
            Ynew = Yi + hb * sum(b * k for b, k in zip(_DP_B, ks))
            ks.append(f(Ynew, idx))
            err = hb * sum(e * k for e, k in zip(_DP_E, ks))
            scale = atol + rtol * np.maximum(np.abs(Yi), np.abs(Ynew))
            enorm = np.sqrt(np.mean((err / scale) ** 2, axis=axes))
            finite = np.isfinite(enorm) & np.all(np.isfinite(Ynew), axis=axes)
            ok = finite & (enorm <= 1.0)
            factor = np.where(finite, np.clip(0.9 * np.where(enorm > 0, enorm, 1e-10) ** -0.2, 0.2, 10.0), 0.1)
            factor = np.where(ok, factor, np.minimum(factor, 1.0))
            acc = idx[ok]
            if acc.size:
                t_new = ti[ok] + hi[ok]
                stop = on_step(acc, t[acc], t_new, Ynew[ok]) if on_step is not None else None
                stop = np.zeros(acc.size, bool) if stop is None else np.asarray(stop, bool)
                t[acc], Y[acc], K1[acc] = t_new, Ynew[ok], ks[-1][ok]
                steps[acc] += 1
                landed = np.isclose(t_new, target[ok], rtol=0, atol=1e-12 * max(T, 1.0))
                out = landed & (next_out[acc] < t_eval.size) & ~stop
                stored[next_out[acc[out]], acc[out]] = Ynew[ok][out]
                next_out[acc[out]] += 1
                status[acc[stop]] = "stopped"
                active[acc[stop | (t_new >= T * (1 - 1e-15))]] = False
            h[idx] = np.where(clipped & ok, np.maximum(hi * factor, h_free), hi * factor)
            stiff = active & ((h < 1e-12 * np.maximum(1.0, t)) | (steps >= max_steps))
            status[stiff] = "stiff"
            active[stiff] = False
    return Run(
        t=t_eval,
        y=stored,
        status=status.astype(str),
        time=t,
        last_good=t,
        y_stop=Y,
        reason=tuple(int(s) for s in steps),
        nfev=0,
        steps=int(steps.max()) if B else 0,
    )
