"""Tests of tokendynamics.odes: the adaptive integrators (one solve_ivp call; a solver stepped by hand)."""

import math

import numpy as np
import pytest

from tokendynamics.errors import BlowUpError, NonFiniteError
from tokendynamics.odes import adaptive_solve, solve_ode

TIGHT = {"method": "DOP853", "rtol": 1e-11, "atol": 1e-13}


def test_solve_ode_matches_a_closed_form_to_its_tolerance():
    """y' = A y with a rotation-and-decay A: the solution is expm(tA) y0."""
    A = np.array([[-0.1, 1.0], [-1.0, -0.1]])
    t = np.linspace(0.0, 5.0, 11)
    sol = solve_ode(lambda s, y: A @ y, [1.0, 0.0], (0.0, 5.0), t_eval=t, **TIGHT)
    exact = np.exp(-0.1 * t) * np.array([np.cos(t), -np.sin(t)])
    np.testing.assert_allclose(sol.y, exact, atol=1e-9)
    assert sol.status == 0 and sol.t.tolist() == t.tolist()


def test_solve_ode_reports_a_finite_time_blowup_near_its_time():
    """y' = y^2, y(0) = 1 blows up at t = 1: the error carries the last time the solver reached, 1 to 1e-8."""
    with pytest.raises(BlowUpError, match="the test ODE failed") as info:
        solve_ode(lambda t, y: y**2, [1.0], (0.0, 2.0), blowup=True, what="the test ODE", **TIGHT)
    assert info.value.time == pytest.approx(1.0, abs=1e-8)


def test_solve_ode_without_blowup_flag_raises_nonfinite_with_the_time():
    with pytest.raises(NonFiniteError, match=r"the test ODE failed at t = 1: "):
        solve_ode(lambda t, y: y**2, [1.0], (0.0, 2.0), what="the test ODE", **TIGHT)


def test_solve_ode_refuses_a_right_hand_side_that_turns_nan():
    """A NaN in the output is an error, not a result (solve_ivp itself reports success here)."""

    def rhs(t, y):
        return np.array([math.nan]) if t > 0.5 else -y

    with pytest.raises(NonFiniteError, match="failed at t ="):
        solve_ode(rhs, [1.0], (0.0, 1.0), method="RK45", rtol=1e-6, atol=1e-9)


def test_solve_ode_accepts_a_terminal_event_and_stops_there():
    """y' = 1 from 0, stopped at y = 0.25: status 1 is success, the event time is 0.25."""

    def hit(t, y):
        return y[0] - 0.25

    hit.terminal = True  # type: ignore[attr-defined]
    sol = solve_ode(lambda t, y: np.ones(1), [0.0], (0.0, 1.0), events=hit, **TIGHT)
    assert sol.status == 1
    assert sol.t_events[0][0] == pytest.approx(0.25, abs=1e-12)
    assert sol.t[-1] == pytest.approx(0.25, abs=1e-12)


def test_adaptive_solve_outputs_every_step_or_the_requested_times():
    def decay(t, y):
        return -y

    every = adaptive_solve(decay, 2.0, [1.0], rtol=1e-10, atol=1e-12)
    fixed = adaptive_solve(decay, 2.0, [1.0], [0.0, 0.5, 2.0], rtol=1e-10, atol=1e-12)
    assert every.status == fixed.status == "completed" and every.t.size > 3
    np.testing.assert_allclose(fixed.y[:, 0], np.exp(-fixed.t), rtol=1e-9)
    np.testing.assert_allclose(every.y[:, 0], np.exp(-every.t), rtol=1e-9)
