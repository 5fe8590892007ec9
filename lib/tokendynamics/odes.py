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

The fixed-step schemes live here too (:func:`euler_step`, :func:`rk4_step`), with the geometry of
the state passed in as a projection/retraction pair (:class:`Geometry`: Euclidean space, the unit
sphere, the cone of covariances): :func:`fixed_step` steps B systems together, freezing each one
that blows up at its last good state, and carries :func:`~tokendynamics.particles.simulate`
(B = 1), :func:`~tokendynamics.ensembles.simulate_batch` and the fixed-step reductions. Every
integrator returns a :class:`Run` and refuses, before it starts, work beyond a budget (:data:`MAX_STEPS`).
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
    "euler_step",
    "rk4_step",
    "step_count",
    "fixed_step",
    "dormand_prince_batch",
    "MAX_STEPS",
    "FIELD_REASONS",
]

#: Budget of one integration: the most steps a fixed-step run takes, or an adaptive solver accepts, before it
#: refuses (fixed step: up front, naming T, dt and the count) or stops with an error. Override per call.
MAX_STEPS = 10_000_000


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
class Run:
    """What every integrator of the library returns: times, states, how the run ended and when.

    For one system (:func:`adaptive_solve`) the status fields are scalars; for B systems stepped
    together (:func:`fixed_step`) they are arrays over the systems and ``y`` has the systems on its
    second axis.

    Attributes
    ----------
    t : array (m,)
        Output times.
    y : array (m, ...) or (m, B, ...)
        States at the output times (a stopped system keeps its last good state).
    status : str or array of str (B,)
        ``"completed"`` (reached T), ``"threshold"`` (the size crossed the threshold, or a step grew it too
        much), ``"event"`` (the event function crossed zero upwards), ``"flagged"`` (the field reported a
        failure) or ``"failed"`` (the solver could not continue, or a non-finite state).
    time : float or array (B,)
        When the run stopped (threshold or event: the crossing; fixed step: the end of the offending step);
        T if completed.
    last_good : float or array (B,)
        Start of the step in which it stopped (the last accepted time).
    y_stop : array
        The state at ``time`` (fixed step: the rejected state of the offending step).
    reason : str or tuple of str
        What stopped the run (empty if completed).
    nfev : int
        Evaluations of the right-hand side (a batch: batched evaluations).
    steps : int
        Steps taken.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993).
    """

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
    max_steps : int
        Cap on the accepted steps (default :data:`MAX_STEPS`); beyond it a ConvergenceError names the time
        reached.

    Returns
    -------
    Run
        Output times and states, how the run ended and when.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993)
    (embedded Runge–Kutta pairs and dense output).
    """
    t0, T = parse_span(t_span)
    solver = validate_choice(solver, "solver", SOLVERS)
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

    def event_value(t, y):
        value = float(event(y))
        if not math.isfinite(value):
            raise ValueError(
                f"the event function (stop_when) returned {value} at t = {t:.6g}: it must return a finite number"
            )
        return value

    event_before = -1.0 if event is None else event_value(t0, y0)
    if event is not None and not event_before < 0:  # reached at the start
        return Run(
            np.array(out_t),
            np.array(out_y).reshape(len(out_t), y0.size),
            "event",
            t0,
            t0,
            y0,
            "the event function is not negative at the start",
            0,
        )
    max_steps = validate_count(max_steps, "max_steps")
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
        if event is not None and crossing is None and not event_value(t_new, ode.y) < 0 and event_before < 0:
            dense = dense or ode.dense_output()

            def rise(t, dense=dense):
                return event_value(t, dense(t))

            hit = brentq(rise, t_old, t_new, xtol=1e-15 * max(1.0, abs(t_new)), rtol=4 * np.finfo(float).eps)
        if event is not None:
            event_before = event_value(t_new, ode.y)
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


# ---------------------------------------------------------------------------------------------
# fixed-step schemes over a geometry
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Geometry:
    r"""Where a state lives: a projection of vectors onto the tangent space, and a retraction onto the set.

    A fixed-step scheme on the set evaluates the field at the retracted stage states, projects it,
    and retracts each new state (:func:`fixed_step`). On the sphere the retraction :math:`x\mapsto x/|x|`
    does not lower the order of the step, since the exact flow stays on the sphere.

    Parameters
    ----------
    name : str
        The geometry's name.
    project : callable ``(y, v) -> v``
        Tangent projection of a vector ``v`` at ``y``.
    retract : callable ``y -> y``
        Retraction onto the set (rows along the last axis for the sphere).
    stages : bool
        Also retract the stage states before the field is evaluated (the sphere: the field is defined on
        it); False where the retraction only corrects the new state (the official projected Euler of
        covariances, whose stage is the current iterate).

    References
    ----------
    P.-A. Absil, R. Mahony, R. Sepulchre, *Optimization Algorithms on Matrix Manifolds*, Princeton (2008),
    chapter 4 (retractions); paper 2 (Li et al., 2026), tokens on the sphere.
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


def euler_step(f, t, y, h):
    r"""One explicit Euler step :math:`y + h\,f(t, y)` (a residual layer of step ``h``).

    Parameters
    ----------
    f : callable ``(t, y) -> array``
        The right-hand side.
    t : float
        Current time.
    y : array
        Current state.
    h : float
        Step.

    Returns
    -------
    (array, int)
        The new state and the number of evaluations of ``f`` (1).

    References
    ----------
    A residual layer :math:`x+h\,\Gamma(x)` is an explicit Euler step: paper 1 (Castin et al.,
    arXiv:2501.18322), depth as time; book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """
    return y + h * f(t, y), 1


def rk4_step(f, t, y, h):
    r"""One step of the classical fourth-order Runge–Kutta method.

    .. math:: y_{k+1}=y_k+\tfrac h6(k_1+2k_2+2k_3+k_4),\quad k_1=f(t,y_k),\ k_2=f(t+\tfrac h2,y_k+\tfrac h2k_1),
              \ k_3=f(t+\tfrac h2,y_k+\tfrac h2k_2),\ k_4=f(t+h,y_k+hk_3).

    Parameters
    ----------
    f : callable ``(t, y) -> array``
        The right-hand side.
    t : float
        Current time.
    y : array
        Current state (or a Python complex number).
    h : float
        Step.

    Returns
    -------
    (array, int)
        The new state and the number of evaluations of ``f`` (4).

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993), Section II.1.
    """
    k1 = f(t, y)
    k2 = f(t + h / 2, y + (h / 2) * k1)
    k3 = f(t + h / 2, y + (h / 2) * k2)
    k4 = f(t + h, y + h * k3)
    return y + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4), 4


#: The fixed-step schemes, by name.
SCHEMES = {"euler": euler_step, "rk4": rk4_step}


def step_count(t0: float, T: float, dt: float, max_steps: int = MAX_STEPS) -> tuple[int, float]:
    """Number of steps and the step of a fixed-step run on ``[t0, T]``, refused beyond the budget.

    The step is adjusted down so that an integer number of steps reaches T exactly.

    Parameters
    ----------
    t0, T : float
        The span (validated by the caller).
    dt : float
        The requested step (positive, finite).
    max_steps : int
        Budget (default :data:`MAX_STEPS`).

    Returns
    -------
    (int, float)
        ``steps`` and ``h = (T - t0) / steps``.

    Raises
    ------
    ValueError
        A step that is not a positive finite number, or more steps than ``max_steps``.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993).
    """
    dt = validate_positive(dt, "dt")
    max_steps = validate_count(max_steps, "max_steps")
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

    ``field(t, Y, active, t_step)`` returns ``(U, codes)`` for the states ``Y`` of the systems
    ``active`` (indices into the batch) at the stage time ``t`` of the step that starts at ``t_step``;
    ``codes`` (or None: all fine) is 0 where the field is fine and a code of :data:`FIELD_REASONS` for a
    system whose field failed. The field is evaluated at the retracted stage states and projected
    (:class:`Geometry`); each new state is retracted. A system stops — frozen at its last good state, the
    others go on — when its field fails, its state becomes non-finite, its size
    :math:`\max|y|` exceeds ``threshold``, or a step multiplies its size by more than ``max_growth``.

    Parameters
    ----------
    field : callable
        As above.
    y0 : array (B, ...)
        Initial states.
    t0 : float
        Initial time.
    steps : int
        Number of steps (:func:`step_count`).
    h : float
        Step.
    scheme : {"euler", "rk4"}
        :data:`SCHEMES`.
    geometry : Geometry
        Projection and retraction.
    saved : callable ``k -> bool``, optional
        Whether the state after step k (0: the initial state) is stored; default every step.
    threshold : float
        Size above which a system counts as blown up.
    max_growth : float, optional
        A step that multiplies the size of a system by more than this factor counts as a blow-up.
    fill : bool
        Once every system has stopped, store their frozen states at the remaining output steps (True), or
        end the output there (False).
    size : callable ``Y -> array (b,)``, optional
        The size of each system compared with ``threshold`` (default: its largest entry in absolute value).

    Returns
    -------
    Run
        Stored times and states (B on the second axis), and per system the status (``"completed"``,
        ``"threshold"``, ``"flagged"`` or ``"failed"``), stop time (``nan`` if completed), last good time
        and reason; ``y_stop`` the rejected states.

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993);
    paper 1 (Castin et al., arXiv:2501.18322), the particle systems; book: ``chapters/07_phase_diagrams.md``.
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


# ---------------------------------------------------------------------------------------------
# an adaptive scheme for B systems at once, each with its own step
# ---------------------------------------------------------------------------------------------

# Dormand-Prince 5(4) tableau (the method of scipy's RK45): nodes, stages, 5th-order weights and
# the error weights (5th minus embedded 4th order)
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

    The pair, error norm (root mean square of the error over :math:`(\texttt{atol}+\texttt{rtol}\,|y|)`-scaled
    entries) and step control are those of ``scipy.integrate.RK45``; one evaluation ``f(Y, idx)`` per
    stage serves every active system (``idx``: their indices). Steps land on the output times and on T.
    After each accepted step ``on_step(idx, t_old, t_new, y_new)`` may stop systems (it returns a boolean
    mask over ``idx``, or None); a system whose step falls below :math:`10^{-12}t` or that took
    ``max_steps`` steps stops as ``"stiff"`` (the caller may finish it with an implicit solver).

    Parameters
    ----------
    f : callable ``(Y, idx) -> array``
        Autonomous right-hand side of the systems ``idx``, ``Y`` of shape (len(idx), ...).
    y0 : array (B, ...)
        Initial states at t = 0.
    T : float
        Final time.
    rtol, atol : float
        Tolerances.
    t_eval : array (m,), optional
        Increasing times in [0, T] at which states are stored (NaN after a system stopped).
    first_step : array (B,) or float, optional
        Initial steps (default :math:`10^{-2}/(1+\|f(y_0)\|)`, at most T/10).
    max_steps : int
        Steps after which a system counts as stiff.
    on_step : callable, optional
        As above.

    Returns
    -------
    Run
        ``y`` the states at ``t_eval`` (B on the second axis), ``y_stop`` the last states, ``time`` the
        times they were reached, ``status`` per system (``"completed"``, ``"stopped"`` or ``"stiff"``),
        ``steps`` the most steps taken by a system; ``reason`` holds the steps of each system.

    References
    ----------
    J. R. Dormand, P. J. Prince, *A family of embedded Runge–Kutta formulae*, J. Comput. Appl. Math. 6
    (1980); E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer
    (1993), chapter II.
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
