r"""One adaptive ODE call for every reduction: ``scipy.integrate.solve_ivp`` with the library's failure checks.

The reductions of both papers — the angle equations and the Watanabe–Strogatz and Ott–Antonsen
ODEs of chapters 4 and 5, the projective flow of chapter 6, the rank-one covariance ODE of chapter 2 —
are integrated by :func:`solve_ode`. It calls ``solve_ivp`` once and refuses what ``solve_ivp``
itself lets through: a failed step (``status == -1``, e.g. a step size driven to zero at a
finite-time blow-up) or a non-finite value in the output. Either way the caller gets an
exception that names the integration and the last time reached, never an array with NaN in it.

When the time of a blow-up matters (the covariance ODEs of chapter 2, the particle systems of
:func:`~tokendynamics.particles.simulate` with an adaptive method), :func:`adaptive_solve` steps a
scipy solver by hand instead: it knows the time the solver reached, locates a threshold crossing or
an event on the dense output of the step, and reports how the run ended rather than raising.

The fixed-step integrators of the particle systems are in :mod:`tokendynamics.particles`
(:func:`~tokendynamics.particles.rk4_step`) and :mod:`tokendynamics.ensembles`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import integrate
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from .docstrings import fill_doc
from .errors import BlowUpError, NonFiniteError
from .validation import PARAMETER_DOCS, SOLVERS, parse_span, time_grid, validate_positive, validate_solver

__all__ = ["solve_ode", "adaptive_solve", "AdaptiveRun"]


def solve_ode(rhs: Callable, y0, t_span, *, what: str = "the integration", blowup: bool = False, **options):
    r"""Integrate :math:`\dot y=f(t,y)` on ``t_span`` with ``scipy.integrate.solve_ivp``; refuse failure and NaN.

    The solution is accepted when ``solve_ivp`` reached the end of ``t_span`` or stopped at a
    terminal event (``status`` 0 or 1) and every stored value is finite. Otherwise an exception
    names ``what`` failed and the last time reached: a :class:`~tokendynamics.errors.BlowUpError`
    (``blowup=True``: the ODE is known to blow up in finite time, e.g. covariance ODEs) or a
    :class:`~tokendynamics.errors.NonFiniteError`.

    Parameters
    ----------
    rhs : callable
        The right-hand side ``rhs(t, y)`` of the ODE, returning an array shaped like ``y``.
    y0 : array_like (k,)
        Initial state (real).
    t_span : (float, float)
        Initial and final times :math:`(t_0, T)`.
    what : str
        Name of the integration, used in the error message (e.g. ``"the WS integration"``).
    blowup : bool
        Raise a ``BlowUpError`` (True) rather than a ``NonFiniteError`` (False) on failure.
    **options
        Keyword arguments of ``solve_ivp``, passed as they are: ``method`` (``"DOP853"``,
        ``"RK45"``, ``"Radau"``, ...; ``"RK45"`` when absent), ``t_eval`` (output times),
        ``rtol``, ``atol``, ``events`` (functions ``g(t, y)`` with the ``terminal`` and
        ``direction`` attributes of ``solve_ivp``; their times are in ``t_events``), ``max_step``.
        The callers in this library always pass ``method``, ``rtol`` and ``atol``.

    Returns
    -------
    scipy.integrate.OdeResult
        The result of ``solve_ivp`` (``t``, ``y`` of shape (k, m), ``t_events``, ``y_events``,
        ``nfev``, ``status``, ``message``).

    Raises
    ------
    BlowUpError
        If ``blowup`` and the solver failed or produced non-finite values.
    NonFiniteError
        If not ``blowup`` and the solver failed or produced non-finite values.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, 2nd ed.,
    Springer, 1993, chapter II (embedded Runge–Kutta pairs; DOP853 is the Dormand–Prince pair of
    order 8); P. Virtanen et al., *SciPy 1.0*, Nature Methods 17 (2020), ``scipy.integrate.solve_ivp``.

    Examples
    --------
    >>> sol = solve_ode(lambda t, y: -y, [1.0], (0.0, 1.0), t_eval=[1.0], method="DOP853", rtol=1e-12, atol=1e-14)
    >>> round(float(sol.y[0, -1]), 10) == round(float(np.exp(-1.0)), 10)
    True
    """
    t0, T = float(t_span[0]), float(t_span[1])
    sol = solve_ivp(rhs, (t0, T), y0, **options)
    if sol.status == -1 or not np.all(np.isfinite(sol.y)):
        last = float(sol.t[-1]) if sol.t.size else t0
        if blowup:
            raise BlowUpError(last, last, f"{what} failed: {sol.message}")
        raise NonFiniteError(f"{what} failed at t = {last:.6g}: {sol.message}")
    return sol


#: scipy's solver classes, stepped directly by :func:`adaptive_solve`.
_SOLVER_CLASSES = {name: getattr(integrate, name) for name in SOLVERS}


@dataclass(frozen=True, eq=False)
class AdaptiveRun:
    """Result of :func:`adaptive_solve`.

    Attributes
    ----------
    t : array (m,)
        Output times reached (those of ``t_eval`` up to the stop, or every accepted step).
    y : array (m, k)
        States at the output times.
    status : str
        ``"completed"`` (reached T), ``"threshold"`` (``size`` crossed ``threshold``), ``"event"``
        (the ``event`` function crossed zero upwards) or ``"failed"`` (the solver could not continue).
    time : float
        Threshold or event: the crossing time (a root on the dense output of the step); failed: the
        time of the last accepted step; completed: T.
    last_good : float
        Start of the step in which the threshold was crossed, or the last accepted time.
    y_stop : array (k,)
        The state at ``time``.
    reason : str
        What stopped the run (empty if completed).
    nfev : int
        Number of evaluations of the right-hand side.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993).
    """

    t: np.ndarray
    y: np.ndarray
    status: str
    time: float
    last_good: float
    y_stop: np.ndarray
    reason: str
    nfev: int


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
) -> AdaptiveRun:
    r"""Integrate :math:`\dot y=f(t,y)` with a scipy solver stepped by hand, and stop where it blows up.

    Unlike ``solve_ivp(t_eval=...)``, which only reports output times, this knows the time the
    solver reached: it returns the time at which ``size(y)`` crosses ``threshold`` (located by
    root-finding on the dense output of the step, so independent of the output times), or the time
    of the last accepted step when the solver fails (step size below the spacing of
    floating-point numbers near a singularity, or a right-hand side that raises
    :class:`~tokendynamics.errors.NonFiniteError` at every trial step: such evaluations are turned
    into NaNs, which make the solver reject the step and try a smaller one).

    Parameters
    ----------
    fun : callable ``(t, y) -> array``
        The right-hand side :math:`f` (flat state).
    %(t_span)s
    y0 : array
        Initial state (flattened).
    t_eval : array, optional
        Increasing output times inside ``t_span``; None stores every accepted step.
    solver : str
        A ``scipy.integrate`` solver class name (e.g. ``"DOP853"``, ``"RK45"``, ``"Radau"``).
    rtol, atol : float
        Tolerances.
    size : callable, optional
        Maps a state to a number (e.g. its largest entry, or the trace of a covariance).
    threshold : float
        Stop when ``size(y)`` crosses it.
    event : callable, optional
        Maps a state to a number: the run stops (status ``"event"``) at the first time it crosses zero
        upwards, located on the dense output like the threshold.

    Returns
    -------
    AdaptiveRun
        Output times and states, how the run ended and when.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993)
    (embedded Runge–Kutta pairs and dense output).
    """
    t0, T = parse_span(t_span)
    solver = validate_solver(solver, "solver")
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
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

    ode = _SOLVER_CLASSES[solver](rhs, t0, y0.copy(), T, rtol=rtol, atol=atol)
    out_t, out_y = [], []
    k = 0
    if t_eval is None:
        out_t.append(t0)
        out_y.append(y0.copy())
    else:
        while k < t_eval.size and t_eval[k] <= t0:
            out_t.append(float(t_eval[k]))
            out_y.append(y0.copy())
            k += 1
    status, time, last_good, y_stop, reason = "completed", T, T, None, ""
    event_before = -1.0 if event is None else event(y0)
    if event is not None and not event_before < 0:  # reached at the start
        return AdaptiveRun(
            np.array(out_t),
            np.array(out_y).reshape(len(out_t), y0.size),
            "event",
            t0,
            t0,
            y0,
            "the event function is not negative at the start",
            0,
        )
    while ode.status == "running":
        message = ode.step()
        if ode.status == "failed":
            status, time, last_good, y_stop = "failed", float(ode.t), float(ode.t), ode.y.copy()
            why = failure[-1] if failure else message
            reason = f"the solver could not continue past t = {time:.6g} ({why})"
            break
        t_old, t_new = float(ode.t_old), float(ode.t)
        dense = None
        crossing = None
        if size is not None and not size(ode.y) <= threshold:
            dense = ode.dense_output()

            def excess(t, dense=dense):
                return size(dense(t)) - threshold

            if not excess(t_old) < 0:
                crossing = t_old
            else:
                crossing = brentq(excess, t_old, t_new, xtol=1e-15 * max(1.0, abs(t_new)), rtol=4 * np.finfo(float).eps)
        hit = None
        if event is not None and crossing is None and not event(ode.y) < 0 and event_before < 0:
            dense = dense or ode.dense_output()

            def rise(t, dense=dense):
                return event(dense(t))

            hit = brentq(rise, t_old, t_new, xtol=1e-15 * max(1.0, abs(t_new)), rtol=4 * np.finfo(float).eps)
        if event is not None:
            event_before = event(ode.y)
        stop = t_new if crossing is None and hit is None else (crossing if hit is None else hit)
        if t_eval is None:
            if crossing is None and hit is None:
                out_t.append(t_new)
                out_y.append(ode.y.copy())
        else:
            j = k
            while j < t_eval.size and t_eval[j] <= stop:
                j += 1
            if j > k:
                dense = dense or ode.dense_output()
                out_t.extend(float(tt) for tt in t_eval[k:j])
                out_y.extend(dense(tt) for tt in t_eval[k:j])
                k = j
        if crossing is not None:
            assert dense is not None  # made when the crossing was located
            status, time, last_good, y_stop = "threshold", crossing, t_old, dense(crossing)
            reason = f"the size of the state reached the threshold {threshold:.3g}"
            break
        if hit is not None:
            assert dense is not None
            status, time, last_good, y_stop = "event", hit, t_old, dense(hit)
            reason = "the event function crossed zero"
            break
    if y_stop is None:
        y_stop = ode.y.copy()
    return AdaptiveRun(
        t=np.array(out_t),
        y=np.array(out_y).reshape(len(out_t), y0.size),
        status=status,
        time=float(time),
        last_good=float(last_good),
        y_stop=y_stop,
        reason=reason,
        nfev=int(ode.nfev),
    )
