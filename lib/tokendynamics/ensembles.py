r"""Batched ensembles: B independent particle systems integrated together as one array (B, n, d).

:func:`simulate_batch` makes one batched field evaluation per stage and steps on
:func:`~tokendynamics.odes.fixed_step`, so system b equals ``simulate(X0[b], layer_b, ...)`` to round-off; a
failing system is frozen at its last good state. The recipes (:data:`RECIPES`) draw random layers:
``identity`` (:math:`Q=K=V=I`), ``gaussian`` (:math:`Q,K` i.i.d. :math:`N(0,1/d)`, :math:`V=I`), ``goe``
(:math:`A` from the GOE, :math:`V=I`), ``minus_identity`` (:math:`Q=K=I`, :math:`V=-I`).

References
----------
Paper 1 (Castin et al., arXiv:2501.18322); B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A
mathematical perspective on Transformers* (arXiv:2312.10794). Book: ``chapters/07_phase_diagrams.md``,
equation (eq-phase-model).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .attention import Attention, require_batch_layer, velocity_batch_unchecked
from .docstrings import fill_doc
from .odes import EUCLIDEAN, FIELD_REASONS, MAX_STEPS, SPHERE, fixed_step, step_count
from .particles import Trajectory, normalize_rows
from .validation import (
    PARAMETER_DOCS,
    parse_span,
    real_array,
    require_memory,
    validate_choice,
    validate_count,
    validate_finite_array,
    validate_flag,
    validate_positive,
    validate_rng,
    validate_unit_rows,
    validate_weights,
)

__all__ = [
    "BatchTrajectory",
    "Schedule",
    "simulate_batch",
    "sample_clouds",
    "RECIPES",
    "recipe_matrices",
    "recipe_stack",
    "stack_from_matrices",
]

MAX_STORED_FLOATS = 200_000_000  # 1.6 GB: refuse to store more, ask for save_every or save_at

#: The result of :func:`simulate_batch`: a :class:`~tokendynamics.particles.Trajectory` of B systems
#: (``X`` of shape (m, B, n, d), ``blowup_time`` (B,), ``reasons``, ``system(b)``).
BatchTrajectory = Trajectory

_DOC = {
    **PARAMETER_DOCS,
    "rng": "rng : int or numpy.random.Generator, optional\n    Seed or generator.",
    "refs": "Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).",
}

#: Names of the random weight recipes of :func:`recipe_matrices` (see the module docstring).
RECIPES = ("identity", "gaussian", "goe", "minus_identity")


@fill_doc(_DOC)
def sample_clouds(size: int, n: int, d: int, rng=None) -> np.ndarray:
    """``size`` clouds of n tokens uniform on the sphere of R^d; the first k of a draw are the draw of size k.

    Parameters
    ----------
    size, n, d : int
        Clouds, tokens per cloud, dimension.
    %(rng)s

    Returns
    -------
    array (size, n, d)

    References
    ----------
    %(refs)s
    """
    size, n, d = validate_count(size, "size"), validate_count(n, "n"), validate_count(d, "d")
    gen = validate_rng(rng)
    require_memory(2 * size * n * d, f"sample_clouds(size = {size}, n = {n}, d = {d})")
    return normalize_rows(gen.standard_normal((size, n, d)))


@fill_doc(_DOC)
def recipe_matrices(recipe: str, d: int, size: int, rng=None) -> dict[str, np.ndarray]:
    r"""Stacked ``Q``, ``K``, ``V`` (size, d, d) of ``size`` layers drawn from a named recipe (:data:`RECIPES`).

    ``gaussian``: :math:`Q_{ab},K_{ab}\sim N(0,1/d)`; ``goe``: :math:`Q=I`, :math:`K=(G+G^\top)/\sqrt{2d}`.

    Parameters
    ----------
    recipe : str
        One of :data:`RECIPES`.
    d, size : int
        Dimension and number of layers.
    %(rng)s

    Returns
    -------
    dict
        ``Q``, ``K``, ``V``; the score matrix is :math:`A=Q^\top K`.

    References
    ----------
    %(refs)s
    """
    validate_choice(recipe, "recipe", RECIPES)
    d, size = validate_count(d, "d"), validate_count(size, "size")
    rng = validate_rng(rng)
    require_memory(4 * size * d * d, f"recipe_matrices with size = {size}")
    eye = np.broadcast_to(np.eye(d), (size, d, d)).copy()
    if recipe in ("identity", "minus_identity"):
        return {"Q": eye, "K": eye.copy(), "V": eye.copy() if recipe == "identity" else -eye}
    if recipe == "gaussian":
        return {
            "Q": rng.standard_normal((size, d, d)) / math.sqrt(d),
            "K": rng.standard_normal((size, d, d)) / math.sqrt(d),
            "V": eye,
        }
    G = rng.standard_normal((size, d, d))
    return {"Q": eye, "K": (G + np.swapaxes(G, -1, -2)) / math.sqrt(2 * d), "V": eye.copy()}


@fill_doc(_DOC)
def stack_from_matrices(kind, M: dict, beta, **shared) -> Attention:
    """A batch of layers of one kind from stacked ``Q``, ``K``, ``V`` (:func:`recipe_matrices`).

    Parameters
    ----------
    kind : str or AttentionKind
        The attention kind.
    M : dict
        ``Q``, ``K``, ``V`` stacks.
    beta : float or array
        One number or one per layer.
    **shared
        Options of the layers (``eps``, ``bias``, ...).

    Returns
    -------
    Attention
        A batch of layers.

    References
    ----------
    %(refs)s
    """
    if not isinstance(M, dict) or not {"Q", "K", "V"} <= set(M):
        raise ValueError(
            f"M must be a dict of stacks 'Q', 'K' and 'V', got {M if not isinstance(M, dict) else sorted(M)!r:.80}"
        )
    beta = np.broadcast_to(np.atleast_1d(real_array(beta, "beta")), (len(M["V"]),))
    return Attention(kind, Q=M["Q"], K=M["K"], V=M["V"], beta=beta, **shared)


@fill_doc(_DOC)
def recipe_stack(kind, recipe: str, d: int, beta, size: int | None = None, rng=None, **shared) -> Attention:
    """A batch of ``size`` random layers of one kind from a named recipe.

    Parameters
    ----------
    kind, beta, **shared
        As in :func:`stack_from_matrices` (``size`` defaults to the length of ``beta``).
    recipe, d, size, rng
        As in :func:`recipe_matrices`.

    Returns
    -------
    Attention
        A batch of layers.

    References
    ----------
    %(refs)s
    """
    beta = np.atleast_1d(real_array(beta, "beta"))
    size = beta.size if size is None else size
    if beta.size not in (1, size):
        raise ValueError(f"beta must be one number or {size} numbers, got {beta.size}")
    return stack_from_matrices(kind, recipe_matrices(recipe, d, size, rng), beta, **shared)


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class Schedule:
    r"""Piecewise-constant layers in depth: ``layers[k]`` acts on :math:`[t_0+k\tau, t_0+(k+1)\tau)`.

    A step takes the layer of its start (every RK4 stage) and must divide :math:`\tau` (``every``); after the
    last piece the last layer goes on. ``layers``: one layer (or batch) per piece; ``t0``: the first start.

    References
    ----------
    %(refs)s
    """

    layers: tuple
    every: float
    t0: float = 0.0

    def __post_init__(self):
        layers = tuple(self.layers)
        if not layers:
            raise ValueError("a Schedule needs at least one layer in layers")
        for lay in layers:
            if not isinstance(lay, Attention):
                raise TypeError(f"Schedule layers must be Attention layers (or batches), got {type(lay).__name__}")
        if not (self.every > 0 and math.isfinite(self.every)):
            raise ValueError(f"every must be a positive duration, got {self.every!r}")
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "every", float(self.every))

    def index(self, t: float) -> int:
        """Index of the piece that starts a step at time ``t``.

        Parameters
        ----------
        t : float
            Time.

        Returns
        -------
        int
        """
        return min(max(int(math.floor((t - self.t0) / self.every + 1e-9)), 0), len(self.layers) - 1)

    def __call__(self, t: float):
        return self.layers[self.index(t)]


def _as_batch_layer(layers):
    """An Attention (shared, or a batch of B), a Schedule or a callable; a sequence is stacked."""
    if isinstance(layers, (Attention, Schedule)) or callable(layers):
        return layers
    if isinstance(layers, Sequence) and layers and all(isinstance(x, Attention) for x in layers):
        return Attention.stack(layers)
    raise TypeError(
        "layers must be an Attention (one layer for every system, or a batch of B), or a sequence of B "
        f"Attention layers (one per system), a Schedule, or a callable t -> layer; got {type(layers).__name__}"
    )


def _check_layer(lay, B: int, d: int, t: float):
    return require_batch_layer(lay, B, d, f"the layer at t = {t:g}")


@fill_doc(_DOC)
def simulate_batch(
    X0,
    layers,
    t_span,
    *,
    dt: float,
    method: str = "rk4",
    sphere: bool = False,
    weights=None,
    save_every: int = 1,
    save_at=None,
    **options,
) -> Trajectory:
    r"""Integrate B independent particle systems at once: one batched field evaluation per stage.

    Parameters
    ----------
    X0 : array (B, n, d)
        Initial clouds (unit rows if ``sphere``).
    layers : Attention, sequence of Attention, Schedule, or callable ``t -> layer``
        One layer for all, a batch (or sequence) of B layers, or depth-dependent layers.
    %(t_span)s
    dt : float
        Step (adjusted down so that an integer number of steps reaches T).
    method : {"rk4", "euler"}
        Classical Runge–Kutta or explicit Euler.
    sphere : bool
        Tangent projection of the field and retraction :math:`x\mapsto x/|x|` after every step.
    weights : array (n,), optional
        Token masses shared by the systems.
    save_every : int
        Store every k-th step (the last one always).
    save_at : array, optional
        Store exactly these step times instead.
    **options
        ``blowup_threshold`` (1e8), ``seeds`` (recorded), ``max_steps`` (:data:`~tokendynamics.odes.MAX_STEPS`),
        ``backend``: ``"auto"`` (the compiled kernel for one-head softmax where it wins), ``"numba"``, ``"numpy"``.

    Returns
    -------
    Trajectory
        B systems: ``X`` (m, B, n, d), ``blowup_time`` (B,), ``reasons``; ``system(b)`` is what
        ``simulate(X0[b], layer_b, ..., on_blowup="stop")`` returns.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); %(refs)s
    """
    unknown = sorted(set(options) - {"blowup_threshold", "seeds", "max_steps", "backend"})
    if unknown:
        raise TypeError(
            f"simulate_batch() got unknown option(s) {unknown}; its options are blowup_threshold, seeds, "
            "max_steps, backend"
        )
    backend = validate_choice(options.get("backend", "auto"), "backend", ("auto", "numpy", "numba"))
    method = validate_choice(method, "method", ("rk4", "euler"))
    threshold = validate_positive(options.get("blowup_threshold", 1e8), "blowup_threshold", allow_inf=True)
    sphere = validate_flag(sphere, "sphere")
    X0 = validate_finite_array(X0, "X0")
    if X0.ndim != 3 or 0 in X0.shape:
        raise ValueError(f"X0 must be a batch of token clouds (B, n, d), got shape {X0.shape}")
    B, n, d = X0.shape
    t0, T = parse_span(t_span)
    if dt is None:
        raise ValueError("simulate_batch needs a positive step dt, got None")
    steps, h = step_count(t0, T, dt, options.get("max_steps", MAX_STEPS))
    save_every = validate_count(save_every, "save_every")
    w = validate_weights(weights, n)
    seeds = options.get("seeds")
    lay0 = _as_batch_layer(layers)
    piecewise = isinstance(lay0, Schedule)
    fixed = isinstance(lay0, Attention)
    _check_layer(lay0 if fixed else lay0(t0), B, d, t0)
    if sphere:
        X0 = validate_unit_rows(X0)
    if piecewise:
        ratio = lay0.every / h
        if abs(ratio - round(ratio)) > 1e-6 * max(1.0, ratio):
            raise ValueError(f"the step {h:g} must divide the Schedule's period {lay0.every:g}")
    if save_at is not None:
        save_at = np.atleast_1d(real_array(save_at, "save_at"))
        k_at = np.rint((save_at - t0) / h).astype(int)
        if np.any(np.abs(t0 + k_at * h - save_at) > 1e-9 * max(1.0, abs(T))) or np.any((k_at < 0) | (k_at > steps)):
            raise ValueError(f"save_at must hold step times t0 + k h (h = {h:g}) inside t_span")
        save_steps = set(k_at.tolist())
        saved: Callable[[int], bool] = save_steps.__contains__
    else:
        save_steps = None
        saved = lambda k: k % save_every == 0 or k == steps  # noqa: E731
    n_saved = len(save_steps) if save_steps is not None else steps // save_every + 2
    if n_saved * B * n * d > MAX_STORED_FLOATS:
        raise ValueError(f"storing {n_saved} frames of {B} x {n} x {d} tokens is too much: raise save_every")

    info = {"steps": steps, "save_every": int(save_every), "blowup_threshold": threshold}
    common = dict(
        layer=lay0, method=method, dt=h, sphere=sphere, weights=w, seed=None if seeds is None else np.asarray(seeds)
    )
    if fixed and backend != "numpy" and _kernel_fits(lay0, n, d, backend):
        from . import _batch_kernels as kernel  # numba, imported on first use

        reasons = {kernel.FIELD_OVERFLOW: FIELD_REASONS[1], kernel.TOKENS_NONFINITE: "the state became non-finite"}
        run_k = kernel.run_batch(
            X0,
            lay0.A[..., 0, :, :],
            lay0.V[..., 0, :, :],
            lay0.beta,
            h,
            steps,
            scheme=method,
            sphere=sphere,
            save_steps=[k for k in range(steps + 1) if saved(k)],
            weights=w,
            blowup_threshold=threshold,
        )
        flagged = run_k.flagged_step >= 0
        why = [reasons.get(int(c), "max |x_i| exceeded blowup_threshold") for c in run_k.status]
        return Trajectory(
            t=t0 + run_k.saved * h,
            X=run_k.frames,
            blowup_time=np.where(flagged, t0 + run_k.flagged_step * h, np.nan),
            reasons=tuple(r if stop else None for r, stop in zip(why, flagged)),
            info={**info, "nfev": steps * (4 if method == "rk4" else 1), "backend": "numba"},
            **common,
        )
    state: dict = {}  # Sinkhorn warm start of the active systems
    cache: dict = {}  # the layers of the active systems, and which systems the state holds

    def field(t, Y, active, t_step):
        lay = lay0 if fixed else (lay0(t_step) if piecewise else lay0(t))
        if not fixed:
            _check_layer(lay, B, d, t)
        held = cache.get("held")
        if held is not None and held.size != active.size:  # systems were frozen: drop their warm starts
            keep = np.isin(held, active)
            for sub in state.values():
                sub.update({key: value[keep] for key, value in sub.items()})
        cache["held"] = active
        if lay.batch_size is not None and active.size < B:
            key = (id(lay), active.size)
            if cache.get("key") != key:
                cache["key"], cache["sub"] = key, lay.take(active)
            lay = cache["sub"]
        return velocity_batch_unchecked(Y, lay, w, state)

    run = fixed_step(
        field,
        X0,
        t0,
        steps,
        h,
        scheme=method,
        geometry=SPHERE if sphere else EUCLIDEAN,
        saved=saved,
        threshold=threshold,
    )
    stopped = run.status != "completed"
    return Trajectory(
        t=run.t,
        X=run.y,
        blowup_time=np.where(stopped, run.time, np.nan),
        reasons=tuple(r if stop else None for r, stop in zip(run.reason, stopped)),
        info={**info, "nfev": run.nfev, "backend": "numpy"},
        **common,
    )


def _kernel_fits(layer: Attention, n: int, d: int, backend: str) -> bool:
    """Whether the compiled batch kernel runs this layer: exponential weights on bilinear scores with
    normalised rows (the kind says so: fused and not factored), one head, not masked; with ``backend="auto"``
    also where it was measured to win (:data:`tokendynamics._batch_kernels.CROSSOVER`)."""
    from . import _batch_kernels as kernel  # numba, imported on first use

    fits = layer.kind.fused and not layer.kind.factored and layer.n_heads == 1 and not layer.causal
    if backend == "numba":
        if not (fits and kernel.HAVE_NUMBA):
            raise ValueError(f"backend='numba' needs numba and a one-head, unmasked softmax-type layer, got {layer!r}")
        return True
    return fits and kernel.prefer_kernel(n, d)
