r"""Interacting particle systems driven by an attention layer, and generic integrators.

The particle system of a (continuous-depth) attention-only transformer is

.. math:: \dot x_i(t) = \Gamma_{\mu_t}(x_i(t)),\qquad \mu_t = \sum_j w_j\,\delta_{x_j(t)},

(paper 1, Castin et al., arXiv:2501.18322; book: ``chapters/01_well_posedness.md``, equation
(eq-p1-ips)); on the sphere the field is projected on the tangent space,
:math:`\dot x_i = P^\perp_{x_i}\Gamma_{\mu_t}(x_i)` with :math:`P^\perp_x y = y - \langle x,y\rangle x`
(paper 2, Li et al. 2026; book: ``chapters/index.md``, equation (eq-intro-sa)). A residual network
with L layers of step T/L is the explicit Euler scheme of this ODE. The integrators below are
generic over the velocity: fixed-step Euler and RK4 and an adaptive path through
``scipy.integrate.solve_ivp``. On the sphere each step is followed by the
retraction :math:`x\mapsto x/|x|`; since the exact flow stays on the sphere, the retraction does
not lower the order of the step (Euler stays order 1, RK4 order 4; tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .attention import BACKENDS, Attention, LayerLike, layer_at, velocity, velocity_unchecked
from .docstrings import fill_doc
from .errors import BlowUpError, NonFiniteError
from .odes import adaptive_solve
from .transport import psd_sqrt
from .validation import (
    PARAMETER_DOCS,
    parse_span,
    time_grid,
    validate_choice,
    validate_count,
    validate_dimension,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_positions,
    validate_positive,
    validate_solver,
    validate_tokens,
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
    "rk4_step",
    "euler_step",
]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **PARAMETER_DOCS,
    # the Parameters and Returns sections of the one-step methods
    "step_params": """
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
    """,
}

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
    d = validate_dimension(d, "d", minimum=1)
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
    t_eval=None,
    solver: str = "DOP853",
    rtol: float = 1e-9,
    atol: float = 1e-11,
    blowup_threshold: float = 1e8,
    max_step_growth: float = 10.0,
    on_blowup: str = "raise",
    seed: int | None = None,
    backend: str = "auto",
    stop_when=None,
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
    on_blowup = validate_choice(on_blowup, "on_blowup", ("raise", "stop"))
    blowup_threshold = validate_positive(blowup_threshold, "blowup_threshold", allow_inf=True)
    max_step_growth = validate_positive(max_step_growth, "max_step_growth")
    if max_step_growth <= 1:
        raise ValueError(f"max_step_growth must be a factor > 1, got {max_step_growth!r}")
    sphere = validate_flag(sphere, "sphere")
    validate_choice(backend, "backend", BACKENDS)
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
    if seed is not None:
        seed = validate_count(seed, "seed", minimum=0)
    if sphere:
        norms = np.linalg.norm(X0, axis=1)
        if np.max(np.abs(norms - 1)) > 1e-6:
            raise ValueError("sphere=True needs unit-norm tokens in X0 (use normalize_rows)")
        X0 = X0 / norms[:, None]
    state: dict = {}  # Sinkhorn warm start along the trajectory
    s = np.arange(n, dtype=float) if positions is None else positions
    constant = first if isinstance(layer, Attention) else None

    def rhs(t, X):
        # validated once above: the per-step field skips input checks (its output is still checked)
        lay = constant if constant is not None else layer_at(layer, t, d)
        if sphere:
            X = X / np.linalg.norm(X, axis=1, keepdims=True)
        U = velocity_unchecked(X, lay, w, s, backend=backend, sinkhorn_state=state)
        return U - np.sum(U * X, axis=1, keepdims=True) * X if sphere else U

    common = dict(
        layer=layer,
        sphere=sphere,
        weights=w,
        positions=positions,
        seed=seed,
    )
    if stop_when is not None and method != "adaptive":
        raise ValueError("stop_when needs method='adaptive' (the solver locates the event)")
    if stop_when is not None and not callable(stop_when):
        raise ValueError("stop_when must be a function of the tokens X (n, d)")
    if method == "adaptive":
        solver = validate_solver(solver, "solver")
        rtol = validate_positive(rtol, "rtol")
        atol = validate_positive(atol, "atol")
        if dt is not None:
            dt = validate_positive(dt, "dt")
        if t_eval is None:
            count = 201 if dt is None else int(round((T - t0) / dt)) + 1
            if count * n * d > MAX_STORED_FLOATS:
                raise ValueError(f"storing {count} frames of {n} x {d} tokens is too much: raise dt or give t_eval")
            t_eval = np.linspace(t0, T, max(2, count))
        _, _, t_eval = time_grid((t0, T), t_eval)
        return _adaptive(
            rhs, X0, t0, T, t_eval, solver, rtol, atol, blowup_threshold, on_blowup, sphere, common, stop_when
        )
    if t_eval is not None:
        raise ValueError(
            f"t_eval gives the output times of method='adaptive'; method={method!r} would ignore it "
            "(it stores every save_every-th step)"
        )
    if dt is None:
        raise ValueError(f"method={method!r} needs a positive step dt, got None")
    dt = validate_positive(dt, "dt")
    save_every = validate_count(save_every, "save_every")
    steps = max(1, int(math.ceil((T - t0) / dt - 1e-9)))
    h = (T - t0) / steps
    n_saved = min(steps + 1, steps // save_every + 2)
    if n_saved * n * d > MAX_STORED_FLOATS:
        raise ValueError(f"storing {n_saved} frames of {n} x {d} tokens is too much: raise save_every")
    step = rk4_step if method == "rk4" else euler_step
    ts, Xs = [t0], [X0.copy()]
    X = X0.copy()
    size = _size(X)
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
            Xn = normalize_rows(Xn) if np.all(np.isfinite(Xn)) else Xn
        bad = _blowup_reason(Xn, blowup_threshold)
        new_size = _size(Xn) if bad is None else math.inf
        if bad is None and size > 0 and new_size > max_step_growth * size:
            bad = (
                f"max |x_i| grew by a factor {new_size / size:.3g} in one step of {h:.3g} (from {size:.3g} to "
                f"{new_size:.3g}), more than max_step_growth = {max_step_growth:g}: the solution blows up "
                "within the step or the step is too large for the scheme to follow the flow (lower dt)"
            )
        if bad:
            blowup = (t + h, t, bad)
            break
        X, size = Xn, new_size
        if k % save_every == 0 or k == steps:
            ts.append(t0 + k * h)
            Xs.append(X.copy())
    info = {
        "nfev": nfev,
        "steps": steps,
        "save_every": int(save_every),
        "blowup_threshold": blowup_threshold,
        "max_step_growth": max_step_growth,
    }
    return _finish(np.array(ts), np.array(Xs), method, h, blowup, on_blowup, info, common)


@fill_doc(_DOC)
def euler_step(rhs, t, X, h):
    r"""One explicit Euler step :math:`X + h\,f(t, X)` (a residual layer of step ``h``).

    %(step_params)s
        The new state and the number of evaluations of ``rhs`` (1).

    References
    ----------
    A residual layer :math:`x+h\,\Gamma(x)` is an explicit Euler step: paper 1 (Castin et al.,
    arXiv:2501.18322), depth as time; book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """
    return X + h * rhs(t, X), 1


@fill_doc(_DOC)
def rk4_step(rhs, t, X, h):
    r"""One step of the classical fourth-order Runge–Kutta method.

    .. math:: X_{k+1}=X_k+\tfrac h6(k_1+2k_2+2k_3+k_4),\quad k_1=f(t,X_k),\ k_2=f(t+\tfrac h2,X_k+\tfrac h2k_1),
              \ k_3=f(t+\tfrac h2,X_k+\tfrac h2k_2),\ k_4=f(t+h,X_k+hk_3).

    %(step_params)s
        The new state and the number of evaluations of ``rhs`` (4).

    References
    ----------
    E. Hairer, S. P. Nørsett, G. Wanner, *Solving Ordinary Differential Equations I*, Springer (1993), Section II.1.
    """
    k1 = rhs(t, X)
    k2 = rhs(t + h / 2, X + (h / 2) * k1)
    k3 = rhs(t + h / 2, X + (h / 2) * k2)
    k4 = rhs(t + h, X + h * k3)
    return X + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4), 4


def _size(X) -> float:
    """Size of a state: its largest coordinate in absolute value (what ``blowup_threshold`` bounds)."""
    return float(np.max(np.abs(X)))


def _blowup_reason(X, threshold) -> str | None:
    if not np.all(np.isfinite(X)):
        return "the tokens became non-finite"
    m = _size(X)
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


def _on_tokens(stop_when, n, d, sphere):
    """``stop_when`` of the tokens (projected on the sphere if ``sphere``) as a function of the flat state."""

    def event(y):
        X = y.reshape(n, d)
        return float(stop_when(X / np.linalg.norm(X, axis=1, keepdims=True) if sphere else X))

    return event


def _adaptive(rhs, X0, t0, T, t_eval, solver, rtol, atol, threshold, on_blowup, sphere, common, stop_when=None):
    n, d = X0.shape
    run = adaptive_solve(
        lambda t, y: rhs(t, y.reshape(n, d)).ravel(),
        (t0, T),
        X0.ravel(),
        t_eval,
        solver=solver,
        rtol=rtol,
        atol=atol,
        size=_size,
        threshold=threshold,
        event=None if stop_when is None else _on_tokens(stop_when, n, d, sphere),
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
        "rtol": rtol,
        "atol": atol,
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
    return _finish(t_out, Y, "adaptive", None, blowup, on_blowup, info, common)
