r"""Interacting particle systems driven by an attention layer, and generic integrators.

The particle system of a (continuous-depth) attention-only transformer is

.. math:: \dot x_i(t) = \Gamma_{\mu_t}(x_i(t)),\qquad \mu_t = \sum_j w_j\,\delta_{x_j(t)},

(paper 1 §1.1, eq. (IPS)); on the sphere the field is projected on the tangent space,
:math:`\dot x_i = P^\perp_{x_i}\Gamma_{\mu_t}(x_i)` with :math:`P^\perp_x y = y - \langle x,y\rangle x`
(paper 2 §1). A residual network with L layers of step T/L is the explicit Euler scheme of this
ODE. The integrators below are generic over the velocity: fixed-step Euler and RK4 and an adaptive
path through ``scipy.integrate.solve_ivp``. On the sphere each step is followed by the
retraction :math:`x\mapsto x/|x|`; since the exact flow stays on the sphere, the retraction does
not lower the order of the step (Euler stays order 1, RK4 order 4; tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

from .attention import Attention, LayerLike, layer_at, velocity
from .errors import BlowUpError, NonFiniteError
from .transport import psd_sqrt
from .validation import parse_span, validate_gaussian, validate_tokens, validate_weights

__all__ = [
    "Trajectory",
    "simulate",
    "particle_field",
    "project_tangent",
    "normalize_rows",
    "sample_sphere",
    "sample_gaussian",
    "circle_tokens",
    "angles",
    "rk4_step",
    "euler_step",
]

METHODS = ("rk4", "euler", "adaptive")
MAX_STORED_FLOATS = 200_000_000  # 1.6 GB: refuse to store more, ask for save_every


# ---------------------------------------------------------------------------------------------
# tokens
# ---------------------------------------------------------------------------------------------


def normalize_rows(X) -> np.ndarray:
    """Rows of X divided by their Euclidean norms (raises on a zero row)."""
    X = np.asarray(X, dtype=float)
    r = np.linalg.norm(X, axis=-1, keepdims=True)
    if np.any(r == 0):
        raise ValueError("cannot normalise a zero token onto the sphere")
    return X / r


def project_tangent(X, U) -> np.ndarray:
    r"""Project each row :math:`u_i` of U on the tangent space of the sphere at :math:`x_i`: :math:`u_i - \langle x_i,u_i\rangle x_i`."""
    return U - np.sum(U * X, axis=-1, keepdims=True) * X


def sample_sphere(n: int, d: int, rng=None) -> np.ndarray:
    """n i.i.d. tokens uniform on the unit sphere of R^d (normalised Gaussians); ``rng``: seed or Generator."""
    rng = np.random.default_rng(rng)
    return normalize_rows(rng.standard_normal((n, d)))


def sample_gaussian(n: int, mean, cov, rng=None) -> np.ndarray:
    r"""n i.i.d. tokens from :math:`N(\alpha,\Sigma)`: :math:`x_i=\alpha+\Sigma^{1/2}z_i`, :math:`z_i` standard normal.

    ``cov`` must be symmetric positive semi-definite (singular allowed; checked by
    :func:`~tokendynamics.validation.validate_gaussian`); :math:`\Sigma^{1/2}` is the symmetric root
    (:func:`~tokendynamics.transport.psd_sqrt`). ``rng``: a seed or a ``numpy.random.Generator``.
    """
    rng = np.random.default_rng(rng)
    mean, cov = validate_gaussian(mean, cov)
    return mean + rng.standard_normal((int(n), mean.shape[0])) @ psd_sqrt(cov)


def circle_tokens(theta) -> np.ndarray:
    r"""Tokens :math:`(\cos\theta_k, \sin\theta_k)` on the unit circle, shape (n, 2)."""
    theta = np.asarray(theta, dtype=float)
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def angles(X) -> np.ndarray:
    r"""Angles :math:`\theta = \operatorname{atan2}(x_2, x_1)` of planar tokens (any leading shape)."""
    X = np.asarray(X, dtype=float)
    if X.shape[-1] != 2:
        raise ValueError(f"angles are defined for planar tokens (d = 2), got d = {X.shape[-1]}")
    return np.arctan2(X[..., 1], X[..., 0])


# ---------------------------------------------------------------------------------------------
# the right-hand side
# ---------------------------------------------------------------------------------------------


def particle_field(
    X,
    layer: LayerLike,
    t: float = 0.0,
    *,
    weights=None,
    positions=None,
    sphere: bool = False,
    sinkhorn_state: dict | None = None,
    backend: str = "auto",
) -> np.ndarray:
    r"""Right-hand side of the particle system at time t: :math:`\Gamma_{\mu}(x_i)`, or its tangent projection on the sphere.

    ``layer`` is an :class:`~tokendynamics.attention.Attention` or a callable ``t -> Attention``
    (depth-dependent parameters, paper 1 §0.3). On the sphere the field is evaluated at the
    normalised tokens and projected: :math:`P^\perp_{x_i}\Gamma_\mu(x_i)` (paper 2 §1).
    """
    X = np.asarray(X, dtype=float)
    lay = layer_at(layer, t, X.shape[1])
    if sphere:
        X = normalize_rows(X)
    U = velocity(X, lay, weights, positions=positions, sinkhorn_state=sinkhorn_state, backend=backend)
    return project_tangent(X, U) if sphere else U


# ---------------------------------------------------------------------------------------------
# trajectories
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Trajectory:
    """A computed particle trajectory and everything needed to reproduce it.

    Attributes
    ----------
    t : array (m,)
        Stored times.
    X : array (m, n, d)
        Tokens at the stored times.
    layer : Attention or callable
        The layer that drove the tokens.
    method : str
        ``"rk4"``, ``"euler"`` or ``"adaptive"`` (then ``solver`` says which scipy method).
    dt : float or None
        Fixed step (fixed-step methods) or None.
    sphere : bool
        Whether tokens were constrained to the unit sphere.
    weights, positions : array or None
        Token masses and (causal) positions used.
    seed : int or None
        Seed of the initial tokens, when the caller recorded it.
    blowup_time : float or None
        Time at which a blow-up was detected (``on_blowup="stop"``); the trajectory ends there.
    info : dict
        Solver details (``nfev``, tolerances, solver name, thresholds).
    """

    t: np.ndarray
    X: np.ndarray
    layer: LayerLike
    method: str
    dt: float | None = None
    sphere: bool = False
    weights: np.ndarray | None = None
    positions: np.ndarray | None = None
    seed: int | None = None
    blowup_time: float | None = None
    info: dict = field(default_factory=dict)

    @property
    def final(self) -> np.ndarray:
        """Tokens at the last stored time, shape (n, d)."""
        return self.X[-1]

    @property
    def n(self) -> int:
        """Number of tokens."""
        return self.X.shape[1]

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.X.shape[2]

    @property
    def blew_up(self) -> bool:
        """Whether the run stopped at a blow-up (``blowup_time`` is set)."""
        return self.blowup_time is not None

    def at(self, time: float) -> np.ndarray:
        """Tokens at the stored time closest to ``time``."""
        return self.X[int(np.argmin(np.abs(self.t - time)))]

    def angles(self) -> np.ndarray:
        """Angles of planar tokens, shape (m, n) (d = 2 only)."""
        return angles(self.X)

    def params(self) -> dict:
        """Plain-data description of how the trajectory was made (for caches and captions)."""
        lay = self.layer.to_dict() if isinstance(self.layer, Attention) else repr(self.layer)
        return {
            "layer": lay,
            "method": self.method,
            "dt": self.dt,
            "sphere": self.sphere,
            "n": self.n,
            "d": self.d,
            "t0": float(self.t[0]),
            "T": float(self.t[-1]),
            "seed": self.seed,
            **{k: v for k, v in self.info.items() if np.isscalar(v) or v is None},
        }


def simulate(
    X0,
    layer: LayerLike,
    t_span,
    *,
    dt: float | None = None,
    method: str = "rk4",
    sphere: bool = False,
    weights=None,
    positions=None,
    save_every: int = 1,
    t_eval=None,
    solver: str = "DOP853",
    rtol: float = 1e-9,
    atol: float = 1e-11,
    blowup_threshold: float = 1e8,
    on_blowup: str = "raise",
    seed: int | None = None,
    backend: str = "auto",
    stop_when=None,
) -> Trajectory:
    r"""Integrate the particle system :math:`\dot x_i = \Gamma_{\mu_t}(x_i)` (projected on the sphere if asked).

    Parameters
    ----------
    X0 : array (n, d)
        Initial tokens (unit rows if ``sphere=True``).
    layer : Attention or callable ``t -> Attention``
        The layer; a callable gives depth-dependent parameters :math:`(A_t, V_t)`.
    t_span : float or (t0, T)
        Integration interval (a single number means ``(0, T)``).
    dt : float
        Step of the fixed-step methods (adjusted down so that an integer number of steps reaches
        T exactly; the step used is stored). For ``"adaptive"``, the spacing of output times.
    method : {"rk4", "euler", "adaptive"}
        Classical fourth-order Runge–Kutta, explicit Euler (a residual network with step dt), or
        ``solve_ivp(method=solver, rtol, atol)``.
    sphere : bool
        Constrain tokens to the unit sphere: tangent projection of the field and retraction
        :math:`x \mapsto x/|x|` after each step.
    weights, positions : array (n,), optional
        Token masses (uniform by default) and positions for causal layers.
    save_every : int
        Store every k-th step of the fixed-step methods (the last step is always stored).
    t_eval : array, optional
        Output times of the adaptive method (default: spacing ``dt`` or 201 points).
    blowup_threshold : float
        A state with :math:`\max_i|x_i| >` threshold, or non-finite, counts as a blow-up.
    on_blowup : {"raise", "stop"}
        Raise :class:`~tokendynamics.errors.BlowUpError` (reporting the time), or return the
        trajectory up to the blow-up with ``blowup_time`` set.
    seed : int, optional
        Seed that generated ``X0``, recorded in the trajectory for reproducibility.
    backend : str
        Passed to :func:`~tokendynamics.attention.velocity`.
    stop_when : callable, optional
        ``method="adaptive"`` only: a function ``g(X)`` of the tokens (n, d); the integration stops
        at the first time :math:`g` crosses zero upwards (a terminal event located by the solver,
        e.g. ``lambda X: order_parameters(X)[1] - 0.99`` for a clustering level). The time is
        ``info["event_time"]`` (``inf`` if never reached) and the output ends there, with the
        state at the event as last frame. It spares a run the steps after what it measures (the
        clustered state is mildly stiff for explicit solvers).

    Returns
    -------
    Trajectory
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if on_blowup not in ("raise", "stop"):
        raise ValueError(f"on_blowup must be 'raise' or 'stop', got {on_blowup!r}")
    if not (blowup_threshold > 0):
        raise ValueError("blowup_threshold must be positive")
    X0 = validate_tokens(X0, name="X0")
    n, d = X0.shape
    t0, T = parse_span(t_span)
    if isinstance(layer, Attention) and layer.d != d:
        raise ValueError(f"X0 has tokens of dimension {d} but the layer has d = {layer.d}")
    layer_at(layer, t0, d)  # a time-dependent layer is checked once before integrating
    w = validate_weights(weights, n)
    if sphere:
        norms = np.linalg.norm(X0, axis=1)
        if np.max(np.abs(norms - 1)) > 1e-6:
            raise ValueError("sphere=True needs unit-norm tokens in X0 (use normalize_rows)")
        X0 = X0 / norms[:, None]
    state: dict = {}  # Sinkhorn warm start along the trajectory

    def rhs(t, X):
        return particle_field(
            X, layer, t, weights=w, positions=positions, sphere=sphere, sinkhorn_state=state, backend=backend
        )

    common = dict(
        layer=layer,
        sphere=sphere,
        weights=w,
        positions=None if positions is None else np.asarray(positions, float),
        seed=seed,
    )
    if stop_when is not None and method != "adaptive":
        raise ValueError("stop_when needs method='adaptive' (the solver locates the event)")
    if stop_when is not None and not callable(stop_when):
        raise ValueError("stop_when must be a function of the tokens X (n, d)")
    if method == "adaptive":
        return _adaptive(
            rhs, X0, t0, T, dt, t_eval, solver, rtol, atol, blowup_threshold, on_blowup, sphere, common, stop_when
        )
    if dt is None or not (dt > 0 and math.isfinite(dt)):
        raise ValueError(f"method={method!r} needs a positive step dt, got {dt!r}")
    if int(save_every) != save_every or save_every < 1:
        raise ValueError("save_every must be a positive integer")
    steps = max(1, int(math.ceil((T - t0) / dt - 1e-9)))
    h = (T - t0) / steps
    n_saved = steps // save_every + 2
    if n_saved * n * d > MAX_STORED_FLOATS:
        raise ValueError(f"storing {n_saved} frames of {n} x {d} tokens is too much: raise save_every")
    step = rk4_step if method == "rk4" else euler_step
    ts, Xs = [t0], [X0.copy()]
    X = X0.copy()
    nfev = 0
    blowup = None
    for k in range(1, steps + 1):
        t = t0 + (k - 1) * h
        try:
            Xn, ne = step(rhs, t, X, h)
            nfev += ne
        except NonFiniteError as exc:
            blowup = (t + h, t, str(exc))
            break
        if sphere:
            Xn = normalize_rows(Xn)
        bad = _blowup_reason(Xn, blowup_threshold)
        if bad:
            blowup = (t + h, t, bad)
            break
        X = Xn
        if k % save_every == 0 or k == steps:
            ts.append(t0 + k * h)
            Xs.append(X.copy())
    info = {"nfev": nfev, "steps": steps, "save_every": int(save_every), "blowup_threshold": blowup_threshold}
    return _finish(np.array(ts), np.array(Xs), method, h, blowup, on_blowup, info, common)


def euler_step(rhs, t, X, h):
    r"""One explicit Euler step :math:`X + h\,f(t, X)` (a residual layer of step ``h``).

    Parameters
    ----------
    rhs : callable ``(t, X) -> array``
        The right-hand side :math:`f`.
    t : float
        Current time.
    X : array
        Current state.
    h : float
        Step.

    Returns
    -------
    (array, int)
        The new state and the number of evaluations of ``rhs`` (1).
    """
    return X + h * rhs(t, X), 1


def rk4_step(rhs, t, X, h):
    r"""One step of the classical fourth-order Runge–Kutta method.

    .. math:: X_{k+1}=X_k+\tfrac h6(k_1+2k_2+2k_3+k_4),\quad k_1=f(t,X_k),\ k_2=f(t+\tfrac h2,X_k+\tfrac h2k_1),
              \ k_3=f(t+\tfrac h2,X_k+\tfrac h2k_2),\ k_4=f(t+h,X_k+hk_3).

    Parameters
    ----------
    rhs : callable ``(t, X) -> array``
        The right-hand side :math:`f`.
    t : float
        Current time.
    X : array
        Current state.
    h : float
        Step.

    Returns
    -------
    (array, int)
        The new state and the number of evaluations of ``rhs`` (4).

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993), §II.1.
    """
    k1 = rhs(t, X)
    k2 = rhs(t + h / 2, X + (h / 2) * k1)
    k3 = rhs(t + h / 2, X + (h / 2) * k2)
    k4 = rhs(t + h, X + h * k3)
    return X + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4), 4


def _blowup_reason(X, threshold) -> str | None:
    if not np.all(np.isfinite(X)):
        return "the tokens became non-finite"
    m = float(np.max(np.abs(X)))
    if m > threshold:
        return f"max |x_i| = {m:.3g} exceeded blowup_threshold = {threshold:.3g}"
    return None


def _finish(t, X, method, dt, blowup, on_blowup, info, common) -> Trajectory:
    if blowup is not None:
        time, last, reason = blowup
        if on_blowup == "raise":
            raise BlowUpError(time, last, reason)
        info = {**info, "blowup_reason": reason}
        return Trajectory(t=t, X=X, method=method, dt=dt, blowup_time=time, info=info, **common)
    return Trajectory(t=t, X=X, method=method, dt=dt, info=info, **common)


def _adaptive(rhs, X0, t0, T, dt, t_eval, solver, rtol, atol, threshold, on_blowup, sphere, common, stop_when=None):
    n, d = X0.shape
    if t_eval is None:
        t_eval = np.linspace(t0, T, 201) if dt is None else np.linspace(t0, T, int(round((T - t0) / dt)) + 1)
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval[0] < t0 or t_eval[-1] > T or np.any(np.diff(t_eval) <= 0):
        raise ValueError("t_eval must be increasing and inside t_span")
    failure: list = []

    def fun(t, y):
        try:
            return rhs(t, y.reshape(n, d)).ravel()
        except NonFiniteError as exc:
            failure.append((t, str(exc)))
            return np.full(y.shape, np.nan)

    def escape(t, y):
        return threshold - np.max(np.abs(y))

    escape.terminal = True
    events = [escape]
    if stop_when is not None:

        def reached(t, y):
            X = y.reshape(n, d)
            return float(stop_when(X / np.linalg.norm(X, axis=1, keepdims=True) if sphere else X))

        reached.terminal = True
        reached.direction = 1
        events.append(reached)
    sol = solve_ivp(fun, (t0, T), X0.ravel(), method=solver, t_eval=t_eval, rtol=rtol, atol=atol, events=events)
    Y = sol.y.T.reshape(-1, n, d)
    t_sol = sol.t
    if stop_when is not None:
        hit = sol.t_events[1]
        if hit.size and (t_sol.size == 0 or hit[0] > t_sol[-1]):  # end the output at the event
            t_sol = np.append(t_sol, hit[0])
            Y = np.concatenate([Y, sol.y_events[1][:1].reshape(1, n, d)])
    if sphere and len(Y):
        Y = Y / np.linalg.norm(Y, axis=2, keepdims=True)
    info = {"nfev": int(sol.nfev), "solver": solver, "rtol": rtol, "atol": atol, "blowup_threshold": threshold}
    if stop_when is not None:
        info["event_time"] = float(sol.t_events[1][0]) if sol.t_events[1].size else math.inf
    blowup = None
    if sol.status == 1 and len(sol.t_events[0]):
        te = float(sol.t_events[0][0])
        blowup = (te, float(sol.t[-1]) if len(sol.t) else t0, f"max |x_i| reached blowup_threshold = {threshold:.3g}")
    elif failure or sol.status == -1 or (len(Y) and not np.all(np.isfinite(Y))):
        tf = failure[0][0] if failure else float(sol.t[-1]) if len(sol.t) else t0
        reason = failure[0][1] if failure else f"the solver failed: {sol.message}"
        good = np.all(np.isfinite(Y.reshape(len(Y), -1)), axis=1) if len(Y) else np.zeros(0, bool)
        Y, tt = Y[good], t_sol[good]
        blowup = (tf, float(tt[-1]) if len(tt) else t0, reason)
        return _finish(tt, Y, "adaptive", None, blowup, on_blowup, info, common)
    t_out = t_sol
    if t_out.size == 0 or t_out[0] > t0:
        t_out = np.concatenate([[t0], t_out])
        Y = np.concatenate([X0[None], Y])
    return _finish(t_out, Y, "adaptive", None, blowup, on_blowup, info, common)
