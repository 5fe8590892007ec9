r"""The particle system of attention, :math:`\dot x_i=\Gamma_{\mu_t}(x_i)`, :math:`\mu_t=\sum_j w_j\delta_{x_j(t)}`
(:func:`simulate`; projected by :math:`P^\perp_x y=y-\langle x,y\rangle x` on the sphere), and tokens on the sphere.

References: paper 1 (Castin et al., arXiv:2501.18322), equation (eq-p1-ips); paper 2 (Li et al., 2026).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .attention import BACKENDS, Attention, LayerLike, layer_at, velocity, velocity_unchecked
from .docstrings import fill_doc
from .errors import BlowUpError, NonFiniteError
from .odes import EUCLIDEAN, MAX_STEPS, SPHERE, adaptive_solve, fixed_step, step_count
from .transport import psd_sqrt
from .validation import (
    parse_span,
    require_memory,
    validate_choice,
    validate_count,
    validate_finite,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_positions,
    validate_positive,
    validate_rng,
    validate_tokens,
    validate_unit_rows,
    validate_weights,
)

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
    "rotation_matrix",
]

METHODS = ("rk4", "euler", "adaptive")
MAX_STORED_FLOATS = 200_000_000  # 1.6 GB: refuse to store more frames, ask for save_every (or save_at)
_DOC = {
    "sphere": "Paper 2 (Li et al., 2026), tokens on the sphere; book: ``chapters/index.md``, equation (eq-intro-sa).",
    "circle": "Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-la).",
    "ips": "Paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).",
}


@fill_doc(_DOC)
def normalize_rows(X) -> np.ndarray:
    r"""Rows divided by their norms, :math:`x_i\mapsto x_i/|x_i|` (the retraction to the sphere).

    Parameters
    ----------
    X : array (..., d)
        Tokens (a zero or non-finite row is a ValueError).

    Returns
    -------
    array (..., d)

    References
    ----------
    %(sphere)s
    """
    X = validate_finite_array(X, "X", min_ndim=1)
    r = np.linalg.norm(X, axis=-1, keepdims=True)
    if np.any(r == 0):
        raise ValueError("cannot normalise a zero token onto the sphere (X has a zero row)")
    return X / r


@fill_doc(_DOC)
def project_tangent(X, U) -> np.ndarray:
    r"""Tangent components :math:`P^\perp_{x_i}u_i = u_i - \langle x_i,u_i\rangle x_i` of the rows of U.

    Parameters
    ----------
    X, U : array (..., d)
        Unit tokens and vectors at them (same shape).

    Returns
    -------
    array (..., d)

    References
    ----------
    %(sphere)s
    """
    X = validate_finite_array(X, "X", min_ndim=1)
    U = validate_finite_array(U, "U", min_ndim=1)
    if U.shape != X.shape:
        raise ValueError(f"U must have the shape of X {X.shape}, got {U.shape}")
    return U - np.sum(U * X, axis=-1, keepdims=True) * X


@fill_doc(_DOC)
def sample_sphere(n: int, d: int, rng=None) -> np.ndarray:
    """n i.i.d. tokens uniform on the unit sphere of R^d (normalised Gaussians).

    Parameters
    ----------
    n, d, rng
        Number of tokens, dimension, and a seed or ``numpy.random.Generator`` (optional).

    Returns
    -------
    array (n, d)

    References
    ----------
    %(sphere)s
    """
    n, d = validate_count(n, "n"), validate_count(d, "d")
    gen = validate_rng(rng)
    require_memory(2 * n * d, f"sample_sphere(n = {n}, d = {d})")
    return normalize_rows(gen.standard_normal((n, d)))


def sample_gaussian(n: int, mean, cov, rng=None) -> np.ndarray:
    r"""n i.i.d. tokens :math:`x_i=\alpha+\Sigma^{1/2}z_i` from :math:`N(\alpha,\Sigma)` (Σ PSD, singular allowed).

    Parameters
    ----------
    n, mean, cov, rng
        Number of tokens, :math:`\alpha` (d,), :math:`\Sigma` (d, d), and a seed or generator (optional).

    Returns
    -------
    array (n, d)

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data; book: ``chapters/02_gaussian_preservation.md``.
    """
    n = validate_count(n, "n")
    mean, cov = validate_gaussian(mean, cov)
    gen = validate_rng(rng)
    require_memory(3 * n * mean.shape[0], f"sample_gaussian(n = {n}, d = {mean.shape[0]})")
    return mean + gen.standard_normal((n, mean.shape[0])) @ psd_sqrt(cov)


@fill_doc(_DOC)
def circle_tokens(theta) -> np.ndarray:
    r"""Tokens :math:`(\cos\theta_k, \sin\theta_k)` on the unit circle.

    Parameters
    ----------
    theta : array (...,)
        Angles.

    Returns
    -------
    array (..., 2)

    References
    ----------
    %(circle)s
    """
    theta = validate_finite_array(theta, "theta")
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def rotation_matrix(theta: float) -> np.ndarray:
    r"""The planar rotation :math:`R_\theta` by ``theta`` (radians, counter-clockwise).

    Parameters
    ----------
    theta : float
        Angle.

    Returns
    -------
    array (2, 2)

    References
    ----------
    Book: the value matrix :math:`V=sR_\theta` of the explorer of ``chapters/01_well_posedness.md``.
    """
    theta = validate_finite(theta, "theta")
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


@fill_doc(_DOC)
def angles(X) -> np.ndarray:
    r"""Angles :math:`\operatorname{atan2}(x_2, x_1)\in(-\pi,\pi]` of planar tokens (any leading shape).

    Parameters
    ----------
    X : array (..., 2)
        Planar tokens.

    Returns
    -------
    array (...,)

    References
    ----------
    %(circle)s
    """
    X = validate_finite_array(X, "X", min_ndim=1)
    if X.shape[-1] != 2:
        raise ValueError(f"X must hold planar tokens (d = 2) for angles, got d = {X.shape[-1]}")
    return np.arctan2(X[..., 1], X[..., 0])


@fill_doc(_DOC)
def particle_field(X, layer: LayerLike, t: float = 0.0, *, weights=None, positions=None, sphere: bool = False):
    r"""Right-hand side of the particle system at t: :math:`\Gamma_\mu(x_i)`, or :math:`P^\perp_{x_i}\Gamma_\mu(x_i)`.

    Parameters
    ----------
    X, layer, weights, positions, sphere
        As in :func:`simulate` (X normalised first when ``sphere``).
    t : float
        Time (depth).

    Returns
    -------
    array (n, d)

    References
    ----------
    %(ips)s
    """
    X = validate_tokens(X)
    lay = layer_at(layer, t, X.shape[1])
    if validate_flag(sphere, "sphere"):
        X = normalize_rows(X)
    U = velocity(X, lay, weights, positions=positions)
    return U - np.sum(U * X, axis=-1, keepdims=True) * X if sphere else U


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class Trajectory:
    """A computed run of one particle system, or of B systems together, and how it was made: stored times
    ``t``, tokens ``X`` (m, n, d) or (m, B, n, d), the ``layer``, ``method``, step ``dt`` (None: adaptive),
    ``sphere``, ``weights``, ``positions``, ``seed``, ``blowup_time`` (None; for B systems an array, NaN: none),
    ``reasons`` (why each system of a batch was frozen) and solver ``info``.

    References
    ----------
    %(ips)s
    """

    t: np.ndarray
    X: np.ndarray
    layer: Any
    method: str
    dt: float | None = None
    sphere: bool = False
    weights: np.ndarray | None = None
    positions: np.ndarray | None = None
    seed: Any = None
    blowup_time: Any = None
    reasons: tuple = ()
    info: dict = field(default_factory=dict)

    @property
    def final(self) -> np.ndarray:
        """Tokens at the last stored time, (n, d) or (B, n, d)."""
        return self.X[-1]

    @property
    def n(self) -> int:
        """Number of tokens (of each system)."""
        return self.X.shape[-2]

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.X.shape[-1]

    @property
    def size(self) -> int:
        """Number of systems B (1 for one system)."""
        return self.X.shape[1] if self.X.ndim == 4 else 1

    @property
    def blew_up(self):
        """Whether the run stopped at a blow-up; for B systems a boolean mask (B,)."""
        return np.isfinite(self.blowup_time) if self.X.ndim == 4 else self.blowup_time is not None

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
        time = validate_finite(time, "time")
        if not self.t[0] - 1e-9 <= time <= self.t[-1] + 1e-9:
            raise ValueError(f"time must be in the stored range [{self.t[0]:g}, {self.t[-1]:g}], got {time:g}")
        return self.X[int(np.argmin(np.abs(self.t - time)))]

    def system(self, b: int) -> Trajectory:
        """System b of a batch, as ``simulate(..., on_blowup="stop")`` returns it (frames up to its blow-up).

        Parameters
        ----------
        b : int
            Which system, from 0 to B - 1.

        Returns
        -------
        Trajectory
            One system, with its own layer when the batch ran a batch of layers.
        """
        b = validate_count(b, "b", minimum=0, maximum=len(self.blowup_time) - 1) if self.X.ndim == 4 else b
        tb = self.blowup_time[b]
        keep = self.t < tb - 0.5 * (self.dt or 0.0) if np.isfinite(tb) else slice(None)
        lay = self.layer.member(b) if isinstance(self.layer, Attention) and self.layer.batch_size else self.layer
        info = {**self.info, **({"blowup_reason": self.reasons[b]} if np.isfinite(tb) else {})}
        return replace(
            self,
            t=self.t[keep],
            X=self.X[keep, b],
            layer=lay,
            seed=None if self.seed is None else int(self.seed[b]),
            blowup_time=float(tb) if np.isfinite(tb) else None,
            reasons=(),
            info=info,
        )

    def angles(self) -> np.ndarray:
        """Angles of planar tokens (d = 2) at the stored times.

        Returns
        -------
        array (m, n) or (m, B, n)
        """
        return angles(self.X)

    def params(self) -> dict:
        """Plain-data description of how the run was made (for caches and captions).

        Returns
        -------
        dict
            The layer (``to_dict``, or its repr when depth-dependent), method, step, sphere, sizes, seed
            and the scalar solver details.
        """
        lay = self.layer.to_dict() if isinstance(self.layer, Attention) else repr(self.layer)
        seed = self.seed.tolist() if isinstance(self.seed, np.ndarray) else self.seed
        scalars = {k: v for k, v in self.info.items() if np.isscalar(v) or v is None}
        shape = {"n": self.n, "d": self.d, "t0": float(self.t[0]), "T": float(self.t[-1]), "seed": seed}
        return {"layer": lay, "method": self.method, "dt": self.dt, "sphere": self.sphere, **shape, **scalars}


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

    A blow-up is a non-finite state or field, a size above ``blowup_threshold`` or (fixed step) a step that
    multiplies the size by more than ``max_step_growth``; the adaptive method locates the crossing on the dense
    output, the fixed-step ones report the end of the offending step.

    Parameters
    ----------
    X0, layer, t_span
        Initial tokens (n, d) (unit rows if ``sphere``; never modified); an Attention, or a callable
        ``t -> Attention`` (depth-dependent :math:`(A_t, V_t)`); the interval T or (t0, T).
    dt : float
        Step of the fixed-step methods (adjusted down to reach T); for ``"adaptive"``, the output spacing.
    method : {"rk4", "euler", "adaptive"}
        Runge–Kutta, explicit Euler (a residual network of step dt), or the adaptive scipy ``solver``.
    sphere : bool
        Tangent projection of the field and retraction :math:`x\mapsto x/|x|` after each step.
    weights, positions : array (n,), optional
        Token masses (uniform by default) and positions (causal layers only).
    save_every : int
        Store every k-th step of the fixed-step methods (the last one always).
    **options
        Adaptive only: ``t_eval``, ``solver``, ``rtol``, ``atol``, ``stop_when`` (stop where ``g(X)`` crosses
        zero upwards); fixed step only: ``max_step_growth``; both: ``blowup_threshold`` (on :math:`\max|x_{i,a}|`),
        ``on_blowup`` (``"raise"`` or ``"stop"``), ``seed``, ``backend``, ``max_steps`` (defaults in ``_OPTIONS``).

    Returns
    -------
    Trajectory
        Times, tokens, the layer and the method; ``blowup_time`` on ``on_blowup="stop"``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), equation (eq-p1-ips); paper 2 (Li et al., 2026).
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
        for name in ("t_eval", "stop_when"):  # output times and events are the adaptive solver's
            if opt[name] is not None:
                raise ValueError(f"{name} needs method='adaptive'; method={method!r} would ignore it")
    opt["on_blowup"] = validate_choice(opt["on_blowup"], "on_blowup", ("raise", "stop"))
    opt["blowup_threshold"] = validate_positive(opt["blowup_threshold"], "blowup_threshold", allow_inf=True)
    opt["max_step_growth"] = validate_positive(opt["max_step_growth"], "max_step_growth")
    if opt["max_step_growth"] <= 1:
        raise ValueError(f"max_step_growth must be a factor > 1, got {opt['max_step_growth']!r}")
    validate_choice(opt["backend"], "backend", BACKENDS)
    if opt["seed"] is not None:
        opt["seed"] = validate_count(opt["seed"], "seed", minimum=0)
    if opt["stop_when"] is not None and not callable(opt["stop_when"]):
        raise ValueError("stop_when must be a function of the tokens X (n, d)")
    return opt  # max_steps, and the solver and tolerances, are checked by step_count and adaptive_solve


def _finish(t, X, method, dt, blowup, on_blowup, info, common) -> Trajectory:
    time = None
    if blowup is not None:
        time, last, reason = blowup
        if on_blowup == "raise":
            raise BlowUpError(time, last, reason)
        info = {**info, "blowup_reason": reason}
    return Trajectory(t=t, X=X, method=method, dt=dt, blowup_time=time, info=info, **common)


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

    geometry = SPHERE if sphere else EUCLIDEAN

    def rhs(t, y):
        X = geometry.retract(y.reshape(n, d))
        return geometry.project(X, field(t, X)).ravel()

    def event(y):  # stop_when of the tokens (retracted to the sphere), a function of the flat state
        g = stop_when(geometry.retract(y.reshape(n, d)))
        return g if isinstance(g, float) else validate_finite(g, "the value of stop_when(X)")

    run = adaptive_solve(
        rhs,
        (t0, T),
        X0.ravel(),
        t_eval,
        solver=solver,
        rtol=opt["rtol"],
        atol=opt["atol"],
        size=lambda y: float(np.max(np.abs(y))),
        threshold=threshold,
        event=None if stop_when is None else event,
        max_steps=opt["max_steps"],
    )
    t_out, Y = run.t, run.y.reshape(-1, n, d)
    if run.status == "event" and (t_out.size == 0 or run.time > t_out[-1]):  # the output ends at the event
        t_out, Y = np.append(t_out, run.time), np.concatenate([Y, run.y_stop.reshape(1, n, d)])
    if t_out.size == 0 or t_out[0] > t0:  # a trajectory starts at t0
        t_out, Y = np.concatenate([[t0], t_out]), np.concatenate([X0[None], Y])
    Y = geometry.retract(Y)
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
