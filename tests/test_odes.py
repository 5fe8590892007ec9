"""Tests of tokendynamics.odes: the adaptive integrators (one solve_ivp call; a solver stepped by hand)."""

import math

import numpy as np
import pytest

from tokendynamics.errors import BlowUpError, ConvergenceError, NonFiniteError
from tokendynamics.odes import EUCLIDEAN, SPHERE, adaptive_solve, fixed_step, solve_ode, step_count

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


# -- the fixed-step layer --------------------------------------------------------------------------------


def _decay(t, Y, active, t_step):
    return -Y, np.zeros(len(Y), dtype=int)


@pytest.mark.parametrize("scheme, order", [("euler", 1), ("rk4", 4)])
def test_fixed_step_schemes_have_their_order_on_linear_decay(scheme, order):
    errs = []
    for steps in (20, 40, 80):
        run = fixed_step(_decay, np.ones((1, 1)), 0.0, steps, 1.0 / steps, scheme=scheme)
        errs.append(abs(run.y[-1, 0, 0] - np.exp(-1.0)))
    slopes = np.diff(np.log(errs)) / np.log(0.5)
    assert np.all(np.abs(slopes - order) < 0.15)


def test_fixed_step_on_the_sphere_follows_a_rotation_with_the_retraction():
    """On the circle the field y -> J y (a rotation) is tangent; RK4 with the retraction stays on the circle and
    reaches the rotated point with the scheme's error."""
    J = np.array([[0.0, -1.0], [1.0, 0.0]])

    def rot(t, Y, active, t_step):
        return Y @ J.T, np.zeros(len(Y), dtype=int)

    run = fixed_step(rot, np.array([[[1.0, 0.0]]]), 0.0, 100, 0.01, geometry=SPHERE)
    np.testing.assert_allclose(np.linalg.norm(run.y[:, 0, 0], axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(run.y[-1, 0, 0], [np.cos(1.0), np.sin(1.0)], atol=1e-10)
    assert EUCLIDEAN.retract(run.y) is run.y


def test_fixed_step_freezes_a_system_at_its_blowup_and_the_others_go_on():
    """y' = y^2 blows up at t = 1/y0: the system with y0 = 2 stops at t ~ 0.5, the one with y0 = 0.1 reaches T = 1."""

    def square(t, Y, active, t_step):
        return Y**2, np.zeros(len(Y), dtype=int)

    run = fixed_step(square, np.array([[2.0], [0.1]]), 0.0, 1000, 1e-3, threshold=1e6, max_growth=10.0)
    assert list(run.status) == ["threshold", "completed"]
    assert 0.49 < run.time[0] <= 0.5 + 2e-3 and np.isnan(run.time[1])  # the end of the step that crossed
    assert run.y[-1, 0, 0] == run.y[-2, 0, 0]  # frozen at its last good state
    np.testing.assert_allclose(run.y[-1, 1, 0], 0.1 / (1 - 0.1), rtol=1e-9)


def test_fixed_step_reports_a_field_failure_per_system():
    def field(t, Y, active, t_step):
        codes = np.where(Y[:, 0] > 1.5, 1, 0)
        return 0.0 * Y, codes

    run = fixed_step(field, np.array([[1.0], [2.0]]), 0.0, 5, 0.1)
    assert list(run.status) == ["completed", "flagged"] and "non-finite velocity" in run.reason[1]


def test_step_count_refuses_work_beyond_the_budget_naming_span_step_and_count():
    assert step_count(0.0, 1.0, 0.3) == (4, 0.25)
    with pytest.raises(ValueError, match=r"T - t0 = 1e\+09 with dt = 0.001 needs 1e\+12 steps, more than max_steps"):
        step_count(0.0, 1e9, 1e-3)
    with pytest.raises(ValueError, match="dt"):
        step_count(0.0, 1.0, float("nan"))


def test_adaptive_solve_stops_at_its_step_cap_with_a_clear_error():
    with pytest.raises(ConvergenceError, match="max_steps = 5"):
        adaptive_solve(lambda t, y: -y, (0.0, 1e3), [1.0], max_steps=5)
