r"""Interacting particle systems driven by an attention layer, and generic integrators.

The particle system of a (continuous-depth) attention-only transformer is

.. math:: \dot x_i(t) = \Gamma_{\mu_t}(x_i(t)),\qquad \mu_t = \sum_j w_j\,\delta_{x_j(t)},

(paper 1, Castin et al., arXiv:2501.18322; book: ``chapters/01_well_posedness.md``, equation
(eq-p1-ips)); on the sphere the field is projected on the tangent space,
:math:`\dot x_i = P^\perp_{x_i}\Gamma_{\mu_t}(x_i)` with :math:`P^\perp_x y = y - \langle x,y\rangle x`
(paper 2, Li et al. 2026; book: ``chapters/index.md``, equation (eq-intro-sa)). A residual network
with L layers of step T/L is the explicit Euler scheme of this ODE. :func:`simulate` integrates
it with the library's one stepping layer (:mod:`tokendynamics.odes`): fixed-step Euler and RK4 on
a geometry (Euclidean, or the sphere with the retraction :math:`x\mapsto x/|x|` after each step,
which does not lower the order: tested), or an adaptive scipy solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .attention import BACKENDS, Attention, LayerLike, layer_at, velocity, velocity_unchecked
from .errors import BlowUpError, NonFiniteError
from .odes import EUCLIDEAN, MAX_STEPS, SPHERE, adaptive_solve, fixed_step, step_count
from .transport import psd_sqrt
from .validation import (
    SOLVERS,
    parse_span,
    time_grid,
    validate_choice,
    validate_count,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_positions,
    validate_positive,
    validate_tokens,
    validate_unit_rows,
    validate_weights,
)

__all__ = [
    "Frames",
    "Trajectory",
    "simulate",
    "particle_field",
    "project_tangent",
    "normalize_rows",
    "sample_sphere",
    "sample_gaussian",
    "circle_tokens",
    "angles",
    "rotation_matrix",
]

METHODS = ("rk4", "euler", "adaptive")
MAX_STORED_FLOATS = 200_000_000  # 1.6 GB: refuse to store more, ask for save_every


# ---------------------------------------------------------------------------------------------
# tokens
# ---------------------------------------------------------------------------------------------


def normalize_rows(X) -> np.ndarray:
    r"""Rows of X divided by their Euclidean norms: :math:`x_i\mapsto x_i/|x_i|` (the retraction to the sphere).

    Parameters
    ----------
    X : array (..., d)
        Tokens (rows along the last axis).

    Returns
    -------
    array (..., d)
        Unit rows.

    Raises
    ------
    ValueError
        A zero or non-finite row.

    References
    ----------
    The retraction to the sphere of paper 2 (Li et al., 2026); book: ``chapters/index.md``, equation
    (eq-intro-sa).
    """
    X = validate_finite_array(X, "X", min_ndim=1)
    r = np.linalg.norm(X, axis=-1, keepdims=True)
    if np.any(r == 0):
        raise ValueError("cannot normalise a zero token onto the sphere (X has a zero row)")
    return X / r


def project_tangent(X, U) -> np.ndarray:
    r"""Project each row :math:`u_i` of U on the tangent space of the sphere at :math:`x_i`.

    .. math:: P^\perp_{x_i}u_i = u_i - \langle x_i,u_i\rangle x_i .

    Parameters
    ----------
    X : array (..., d)
        Unit tokens.
    U : array (..., d)
        Vectors at the tokens (same shape as ``X``).

    Returns
    -------
    array (..., d)
        The tangent components.

    References
    ----------
    Paper 2 (Li et al., 2026), tokens on the sphere; book: ``chapters/index.md``, equation (eq-intro-sa).
    """
    X = validate_finite_array(X, "X", min_ndim=1)
    U = validate_finite_array(U, "U", min_ndim=1)
    if U.shape != X.shape:
        raise ValueError(f"U must have the shape of X {X.shape}, got {U.shape}")
    return U - np.sum(U * X, axis=-1, keepdims=True) * X


def sample_sphere(n: int, d: int, rng=None) -> np.ndarray:
    """n i.i.d. tokens uniform on the unit sphere of R^d (normalised Gaussians).

    Parameters
    ----------
    n : int
        Number of tokens (>= 1).
    d : int
        Dimension (>= 1).
    rng : int or numpy.random.Generator, optional
        Seed or generator.

    Returns
    -------
    array (n, d)
        Unit rows.

    References
    ----------
    Book: ``chapters/index.md``, equation (eq-intro-sa) (tokens on the sphere).
    """
    n = validate_count(n, "n")
    d = validate_count(d, "d")
    rng = np.random.default_rng(rng)
    return normalize_rows(rng.standard_normal((n, d)))


def sample_gaussian(n: int, mean, cov, rng=None) -> np.ndarray:
    r"""n i.i.d. tokens from :math:`N(\alpha,\Sigma)`: :math:`x_i=\alpha+\Sigma^{1/2}z_i`, :math:`z_i` standard normal.

    ``n`` is an integer >= 1 (2.7 or -1 are refused). ``cov`` must be symmetric positive
    semi-definite (singular allowed; checked by :func:`~tokendynamics.validation.validate_gaussian`);
    :math:`\Sigma^{1/2}` is the symmetric root (:func:`~tokendynamics.transport.psd_sqrt`).

    Parameters
    ----------
    n : int
        Number of tokens.
    mean : array (d,)
        :math:`\alpha`.
    cov : array (d, d)
        :math:`\Sigma`, symmetric positive semi-definite.
    rng : int or numpy.random.Generator, optional
        Seed or generator.

    Returns
    -------
    array (n, d)
        The samples.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data; book: ``chapters/02_gaussian_preservation.md``.
    """
    n = validate_count(n, "n")
    mean, cov = validate_gaussian(mean, cov)
    rng = np.random.default_rng(rng)
    return mean + rng.standard_normal((n, mean.shape[0])) @ psd_sqrt(cov)


def circle_tokens(theta) -> np.ndarray:
    r"""Tokens :math:`x_{\theta_k}=(\cos\theta_k, \sin\theta_k)` on the unit circle.

    Parameters
    ----------
    theta : array (...,)
        Angles.

    Returns
    -------
    array (..., 2)
        The tokens.

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-la).
    """
    theta = validate_finite_array(theta, "theta")
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def rotation_matrix(theta: float) -> np.ndarray:
    r"""The planar rotation by ``theta``,
    :math:`R_\theta=\begin{pmatrix}\cos\theta&-\sin\theta\\\sin\theta&\cos\theta\end{pmatrix}`.

    Parameters
    ----------
    theta : float
        Angle, in radians (counter-clockwise).

    Returns
    -------
    array (2, 2)
        The matrix :math:`R_\theta`.

    References
    ----------
    The book builds layer matrices with it: the value matrix :math:`V=s\,R_\theta` of the explorer of
    ``chapters/01_well_posedness.md`` (paper 1, Castin et al., arXiv:2501.18322) and the score matrices
    :math:`R_\theta\operatorname{diag}(a_1,a_2)R_\theta^\top` of ``chapters/03_gradient_flow.md``.
    """
    c, s = math.cos(float(theta)), math.sin(float(theta))
    return np.array([[c, -s], [s, c]])


def angles(X) -> np.ndarray:
    r"""Angles :math:`\theta = \operatorname{atan2}(x_2, x_1)` of planar tokens (any leading shape).

    Parameters
    ----------
    X : array (..., 2)
        Planar tokens.

    Returns
    -------
    array (...,)
        Angles in :math:`(-\pi, \pi]`.

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-la).
    """
    X = validate_finite_array(X, "X", min_ndim=1)
    if X.shape[-1] != 2:
        raise ValueError(f"X must hold planar tokens (d = 2) for angles, got d = {X.shape[-1]}")
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
    r"""Right-hand side of the particle system at time t: :math:`\Gamma_{\mu}(x_i)`, or its tangent projection.

    On the sphere the field is evaluated at the normalised tokens and projected:
    :math:`P^\perp_{x_i}\Gamma_\mu(x_i)`.

    Parameters
    ----------
    X : array (n, d)
        Tokens.
    layer : Attention or callable
        A layer, or a callable ``t -> Attention`` (depth-dependent parameters :math:`(A_t, V_t)`).
    t : float
        Time (depth).
    weights, positions : array (n,), optional
        Token masses (uniform by default) and positions (causal layers).
    sphere : bool
        Project on the tangent space of the unit sphere.
    sinkhorn_state : dict, optional
        Warm-start store of Sinkhorn potentials.
    backend : str
        Passed to :func:`~tokendynamics.attention.velocity`.

    Returns
    -------
    array (n, d)
        The velocities of the tokens.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the particle system; paper 2 (Li et al., 2026), tokens on
    the sphere. Book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips); ``chapters/index.md``,
    equation (eq-intro-sa).
    """
    X = validate_tokens(X)
    lay = layer_at(layer, t, X.shape[1])
    if validate_flag(sphere, "sphere"):
        X = normalize_rows(X)
    U = velocity(X, lay, weights, positions=positions, sinkhorn_state=sinkhorn_state, backend=backend)
    return project_tangent(X, U) if sphere else U


# ---------------------------------------------------------------------------------------------
# trajectories
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Frames:
    """Tokens stored along a run: what :class:`Trajectory` (one system, X of shape (m, n, d)) and
    :class:`~tokendynamics.ensembles.BatchTrajectory` (B systems, X of shape (m, B, n, d)) share.

    Attributes
    ----------
    t : array (m,)
        Stored times.
    X : array (m, n, d) or (m, B, n, d)
        Tokens at the stored times.
    layer : object
        What drove the tokens.
    method : str
        Integration method.
    """

    t: np.ndarray
    X: np.ndarray
    layer: object
    method: str

    @property
    def final(self) -> np.ndarray:
        """Tokens at the last stored time, shape (n, d) (or (B, n, d) for B systems)."""
        return self.X[-1]

    @property
    def n(self) -> int:
        """Number of tokens (of each system)."""
        return self.X.shape[-2]

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.X.shape[-1]

    def at(self, time: float) -> np.ndarray:
        """Tokens at the stored time closest to ``time``.

        Parameters
        ----------
        time : float
            A time in the stored range.

        Returns
        -------
        array (n, d) or (B, n, d)
        """
        return self.X[int(np.argmin(np.abs(self.t - time)))]


@dataclass(frozen=True, eq=False)
class Trajectory(Frames):
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

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the particle system of attention; book:
    ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """

    # t, X and method as in Frames
    layer: LayerLike
    dt: float | None = None
    sphere: bool = False
    weights: np.ndarray | None = None
    positions: np.ndarray | None = None
    seed: int | None = None
    blowup_time: float | None = None
    info: dict = field(default_factory=dict)

    @property
    def blew_up(self) -> bool:
        """Whether the run stopped at a blow-up (``blowup_time`` is set)."""
        return self.blowup_time is not None

    def angles(self) -> np.ndarray:
        """Angles of planar tokens (d = 2 only).

        Returns
        -------
        array (m, n)
            :math:`\\theta_i(t)` in :math:`(-\\pi,\\pi]` at the stored times.

        References
        ----------
        Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-la).
        """
        return angles(self.X)

    def params(self) -> dict:
        """Plain-data description of how the trajectory was made (for caches and captions).

        Returns
        -------
        dict
            The layer (:meth:`~tokendynamics.attention.Attention.to_dict`, or its repr for a
            depth-dependent layer), the method, step, sphere flag and sizes.
        """
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
    **options,
) -> Trajectory:
    r"""Integrate the particle system :math:`\dot x_i = \Gamma_{\mu_t}(x_i)` (projected on the sphere if asked).

    Parameters
    ----------
    X0 : array (n, d)
        Initial tokens (unit rows if ``sphere=True``). Never modified.
    layer : Attention or callable ``t -> Attention``
        The layer; a callable gives depth-dependent parameters :math:`(A_t, V_t)`.
    t_span : float or (t0, T)
        Integration interval (a single number means ``(0, T)``).
    dt : float
        Step of the fixed-step methods (adjusted down so that an integer number of steps reaches
        T exactly; the step used is stored). For ``"adaptive"``, the spacing of output times.
    method : {"rk4", "euler", "adaptive"}
        Classical fourth-order Runge–Kutta, explicit Euler (a residual network with step dt), or
        the adaptive scipy method ``solver`` (one of ``"RK45", "RK23", "DOP853", "Radau", "BDF",
        "LSODA"``) with tolerances ``rtol``, ``atol`` (positive numbers).
    sphere : bool
        Constrain tokens to the unit sphere: tangent projection of the field and retraction
        :math:`x \mapsto x/|x|` after each step.
    weights, positions : array (n,), optional
        Token masses (uniform by default) and positions (causal layers only).
    save_every : int
        Store every k-th step of the fixed-step methods (the last step is always stored).
    **options
        The options of the integrator (POT-style: one ``method`` and its keyword options; an unknown
        name is refused), described below: ``t_eval``, ``solver``, ``rtol``, ``atol``, ``stop_when``
        (adaptive method only), ``blowup_threshold``, ``max_step_growth`` (fixed-step only),
        ``on_blowup``, ``seed``, ``backend``, ``max_steps``.
    t_eval : array, optional
        Output times of the adaptive method (default: spacing ``dt`` or 201 points).
    solver : str
        ``method="adaptive"`` only: the ``scipy.integrate`` solver class stepped by
        :func:`~tokendynamics.odes.adaptive_solve` (default ``"DOP853"``, an explicit Runge–Kutta pair of order 8(5,3)).
    rtol, atol : float
        ``method="adaptive"`` only: relative and absolute error tolerances of each step, per coordinate
        of the flattened tokens (defaults :math:`10^{-9}` and :math:`10^{-11}`).
    blowup_threshold : float
        Size above which the state counts as blown up, the size of a state being
        :math:`\max_{i,a}|x_{i,a}|` (its largest coordinate in absolute value).
    max_step_growth : float
        Fixed-step methods only: a single step that multiplies the size of the state by more than
        this factor (> 1) counts as a blow-up (see below).
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
    max_steps : int
        Budget of the run (default :data:`~tokendynamics.odes.MAX_STEPS`): a fixed-step run needing more
        steps is refused before it starts; an adaptive one stops with an error at that many accepted steps.

    Returns
    -------
    Trajectory
        Times, tokens, the layer, the method and, on ``on_blowup="stop"``, the blow-up time.

    Notes
    -----
    **What counts as a blow-up.** For every method: a non-finite state or velocity (e.g. an
    overflowing unnormalised softmax), or a state whose size exceeds ``blowup_threshold``.

    * Adaptive method: the solver is stepped directly (``scipy.integrate`` solver classes), and the
      reported time is where the blow-up happened, not an output time: the time at which the
      dense output of the last accepted step crosses ``blowup_threshold`` (root-finding), or, if
      the solver cannot continue (step size below the spacing of floating-point numbers, or a
      field that overflows at every trial step), the time of its last accepted step. For a
      finite-time singularity :math:`|x|\sim(T^*-t)^{-p}` both are within round-off of
      :math:`T^*` (tested against the closed form of linear attention,
      :math:`T^*=1/(2\lambda_{\max}(\Sigma_0))`).
    * Fixed-step methods (Euler, RK4): also **a step that multiplies the size of the state by more
      than** ``max_step_growth`` (default 10). The exact flow of every variant grows at a finite
      rate, so one step of length ``dt`` multiplies the size by :math:`e^{L\,dt}` at most, with
      :math:`L` the local growth rate; a factor above 10 means either that the solution blows up
      within that step, or that ``dt`` is far too large for the scheme to follow the flow
      (explicit Euler with ``dt = 50`` on softmax attention multiplies the tokens by about 50 per
      step and wanders off to :math:`|x|\approx7\cdot10^3` without ever crossing the absolute
      threshold). The reported time is the end of the offending step, the last good time its
      start; lower ``dt`` (or raise ``max_step_growth``) if the growth is genuine.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the interacting particle system of attention; paper 2
    (Li et al., 2026), tokens on the sphere. Book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips);
    ``chapters/index.md``, equation (eq-intro-sa). E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary
    Differential Equations I*, Springer (1993), for the Runge–Kutta methods.
    """
    method = validate_choice(method, "method", METHODS)
    opt = _options(options, method)
    sphere = validate_flag(sphere, "sphere")
    X0 = validate_tokens(X0, name="X0")
    n, d = X0.shape
    t0, T = parse_span(t_span)
    if isinstance(layer, Attention) and layer.d != d:
        raise ValueError(f"X0 has tokens of dimension {d} but the layer has d = {layer.d}")
    first = layer_at(layer, t0, d)  # a time-dependent layer is checked once before integrating
    w = validate_weights(weights, n)
    if positions is not None:
        if isinstance(layer, Attention) and not first.causal:
            raise ValueError(
                "positions are used by causal (masked) layers only, and this layer has causal=False: "
                "drop positions or build the layer with causal=True"
            )
        positions = validate_positions(positions, n)
    if sphere:
        X0 = validate_unit_rows(X0)
    state: dict = {}  # Sinkhorn warm start along the trajectory
    s = np.arange(n, dtype=float) if positions is None else positions
    constant = first if isinstance(layer, Attention) else None
    backend = opt["backend"]

    def field(t, X):
        # validated once above: the per-step field skips input checks (its output is still checked)
        lay = constant if constant is not None else layer_at(layer, t, d)
        return velocity_unchecked(X, lay, w, s, backend=backend, sinkhorn_state=state)

    common = dict(layer=layer, sphere=sphere, weights=w, positions=positions, seed=opt["seed"])
    if method == "adaptive":
        return _adaptive(field, X0, t0, T, dt, opt, sphere, common)
    if dt is None:
        raise ValueError(f"method={method!r} needs a positive step dt, got None")
    save_every = validate_count(save_every, "save_every")
    steps, h = step_count(t0, T, dt, opt["max_steps"])
    n_saved = min(steps + 1, steps // save_every + 2)
    if n_saved * n * d > MAX_STORED_FLOATS:
        raise ValueError(f"storing {n_saved} frames of {n} x {d} tokens is too much: raise save_every")

    def batch_field(t, Y, active, t_step):
        try:
            return field(t, Y[0])[None], None
        except NonFiniteError:
            return np.zeros_like(Y), np.ones(1, dtype=int)

    run = fixed_step(
        batch_field,
        X0[None],
        t0,
        steps,
        h,
        scheme=method,
        geometry=SPHERE if sphere else EUCLIDEAN,
        saved=lambda k: k % save_every == 0 or k == steps,
        threshold=opt["blowup_threshold"],
        max_growth=opt["max_step_growth"],
        fill=False,
    )
    info = {
        "nfev": run.nfev,
        "steps": steps,
        "save_every": int(save_every),
        "blowup_threshold": opt["blowup_threshold"],
        "max_step_growth": opt["max_step_growth"],
    }
    stopped = run.status[0] != "completed"
    blowup = (float(run.time[0]), float(run.last_good[0]), run.reason[0]) if stopped else None
    keep = run.t < run.time[0] - 0.5 * h if stopped else slice(None)
    return _finish(run.t[keep], run.y[keep, 0], method, h, blowup, opt["on_blowup"], info, common)


#: The options of :func:`simulate` and their defaults.
_OPTIONS = {
    "t_eval": None,
    "solver": "DOP853",
    "rtol": 1e-9,
    "atol": 1e-11,
    "stop_when": None,
    "blowup_threshold": 1e8,
    "max_step_growth": 10.0,
    "on_blowup": "raise",
    "seed": None,
    "backend": "auto",
    "max_steps": MAX_STEPS,
}


def _options(options: dict, method: str) -> dict:
    """The options of :func:`simulate`, checked once: unknown names refused, values validated."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"simulate() got unknown option(s) {unknown}; its options are {sorted(_OPTIONS)}")
    opt = {**_OPTIONS, **options}
    if method != "adaptive":
        if opt["t_eval"] is not None:
            raise ValueError(
                f"t_eval gives the output times of method='adaptive'; method={method!r} would ignore it "
                "(it stores every save_every-th step)"
            )
        if opt["stop_when"] is not None:
            raise ValueError("stop_when needs method='adaptive' (the solver locates the event)")
    opt["on_blowup"] = validate_choice(opt["on_blowup"], "on_blowup", ("raise", "stop"))
    opt["blowup_threshold"] = validate_positive(opt["blowup_threshold"], "blowup_threshold", allow_inf=True)
    opt["max_step_growth"] = validate_positive(opt["max_step_growth"], "max_step_growth")
    if opt["max_step_growth"] <= 1:
        raise ValueError(f"max_step_growth must be a factor > 1, got {opt['max_step_growth']!r}")
    validate_choice(opt["backend"], "backend", BACKENDS)
    if opt["seed"] is not None:
        opt["seed"] = validate_count(opt["seed"], "seed", minimum=0)
    opt["max_steps"] = validate_count(opt["max_steps"], "max_steps")
    if opt["stop_when"] is not None and not callable(opt["stop_when"]):
        raise ValueError("stop_when must be a function of the tokens X (n, d)")
    if method == "adaptive":
        opt["solver"] = validate_choice(opt["solver"], "solver", SOLVERS)
        opt["rtol"] = validate_positive(opt["rtol"], "rtol")
        opt["atol"] = validate_positive(opt["atol"], "atol")
    return opt


def _size(X) -> float:
    """Size of a state: its largest coordinate in absolute value (what ``blowup_threshold`` bounds)."""
    return float(np.max(np.abs(X)))


def _finish(t, X, method, dt, blowup, on_blowup, info, common) -> Trajectory:
    if blowup is not None:
        time, last, reason = blowup
        if on_blowup == "raise":
            raise BlowUpError(time, last, reason)
        info = {**info, "blowup_reason": reason}
        return Trajectory(t=t, X=X, method=method, dt=dt, blowup_time=time, info=info, **common)
    return Trajectory(t=t, X=X, method=method, dt=dt, info=info, **common)


def _on_tokens(stop_when, n, d, sphere):
    """``stop_when`` of the tokens (projected on the sphere if ``sphere``) as a function of the flat state."""

    def event(y):
        X = y.reshape(n, d)
        return float(stop_when(X / np.linalg.norm(X, axis=1, keepdims=True) if sphere else X))

    return event


def _adaptive(field, X0, t0, T, dt, opt, sphere, common):
    """The adaptive method: ``adaptive_solve`` on the flattened tokens, blow-up times located by the solver."""
    n, d = X0.shape
    solver, threshold, stop_when, t_eval = opt["solver"], opt["blowup_threshold"], opt["stop_when"], opt["t_eval"]
    if dt is not None:
        dt = validate_positive(dt, "dt")
    if t_eval is None:
        count = 201 if dt is None else int(round((T - t0) / dt)) + 1
        if count * n * d > MAX_STORED_FLOATS:
            raise ValueError(f"storing {count} frames of {n} x {d} tokens is too much: raise dt or give t_eval")
        t_eval = np.linspace(t0, T, max(2, count))
    _, _, t_eval = time_grid((t0, T), t_eval)

    def rhs(t, y):
        X = y.reshape(n, d)
        if not sphere:
            return field(t, X).ravel()
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        return SPHERE.project(X, field(t, X)).ravel()

    run = adaptive_solve(
        rhs,
        (t0, T),
        X0.ravel(),
        t_eval,
        solver=solver,
        rtol=opt["rtol"],
        atol=opt["atol"],
        size=_size,
        threshold=threshold,
        event=None if stop_when is None else _on_tokens(stop_when, n, d, sphere),
        max_steps=opt["max_steps"],
    )
    t_out, Y = run.t, run.y.reshape(-1, n, d)
    if run.status == "event" and (t_out.size == 0 or run.time > t_out[-1]):  # the output ends at the event
        t_out, Y = np.append(t_out, run.time), np.concatenate([Y, run.y_stop.reshape(1, n, d)])
    if t_out.size == 0 or t_out[0] > t0:  # a trajectory starts at t0
        t_out, Y = np.concatenate([[t0], t_out]), np.concatenate([X0[None], Y])
    if sphere:
        Y = Y / np.linalg.norm(Y, axis=2, keepdims=True)
    info = {
        "nfev": run.nfev,
        "solver": solver,
        "rtol": opt["rtol"],
        "atol": opt["atol"],
        "blowup_threshold": threshold,
        "t_reached": run.time,
    }
    if stop_when is not None:
        info["event_time"] = run.time if run.status == "event" else math.inf
    blowup = None
    if run.status == "threshold":
        blowup = (run.time, run.last_good, f"max |x_i| reached blowup_threshold = {threshold:.3g}")
    elif run.status == "failed":
        blowup = (run.time, run.last_good, run.reason)
    return _finish(t_out, Y, "adaptive", None, blowup, opt["on_blowup"], info, common)
