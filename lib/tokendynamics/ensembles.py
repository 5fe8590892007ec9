r"""Batched ensembles: B independent particle systems integrated together as one array (B, n, d).

:func:`simulate_batch` makes one batched field evaluation per stage and steps on
:func:`~tokendynamics.odes.fixed_step`, so system b equals ``simulate(X0[b], layer_b, ...)`` to round-off; a
failing system is frozen at its last good state. Random layers come from named recipes (:func:`recipe_matrices`).

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
from typing import Any

import numpy as np

from .attention import Attention, require_batch_layer, velocity_batch_unchecked
from .docstrings import fill_doc
from .odes import EUCLIDEAN, FIELD_REASONS, MAX_STEPS, SPHERE, fixed_step, step_count
from .particles import MAX_STORED_FLOATS, Trajectory, normalize_rows
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
    "Schedule",
    "simulate_batch",
    "sample_clouds",
    "RECIPES",
    "recipe_matrices",
    "recipe_stack",
]

_DOC = {
    **PARAMETER_DOCS,
    "rng": "rng : int or numpy.random.Generator, optional\n    Seed or generator.",
    "refs": "Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).",
}

#: Names of the random weight recipes of :func:`recipe_matrices`.
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

    ``identity``: :math:`Q=K=V=I`; ``gaussian``: :math:`Q_{ab},K_{ab}\sim N(0,1/d)` i.i.d., :math:`V=I`; ``goe``:
    :math:`Q=V=I`, :math:`K=(G+G^\top)/\sqrt{2d}` (GOE); ``minus_identity``: :math:`Q=K=I`, :math:`V=-I`.

    Parameters
    ----------
    recipe, d, size
        One of :data:`RECIPES`, the dimension and the number of layers.
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
def recipe_stack(kind, recipe: str, d: int, beta, size: int | None = None, rng=None, **shared) -> Attention:
    r"""A batch of ``size`` random layers of one kind from a named recipe (:func:`recipe_matrices`).

    Parameters
    ----------
    kind, beta, **shared
        The attention kind (a name or an AttentionKind), one :math:`\beta` or one per layer, the layers' options.
    recipe, d, size, rng
        As in :func:`recipe_matrices` (``size`` defaults to the length of ``beta``).

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
    matrices: dict[str, Any] = recipe_matrices(recipe, d, size, rng)
    return Attention(kind, **matrices, beta=np.broadcast_to(beta, (size,)), **shared)


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
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "every", validate_positive(self.every, "every"))

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
    dt, method, sphere
        As in :func:`~tokendynamics.particles.simulate` (``"rk4"`` or ``"euler"``).
    weights : array (n,), optional
        Token masses shared by the systems.
    save_every, save_at
        Store every k-th step (the last one always), or exactly the step times ``save_at``.
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
    steps, h = step_count(t0, T, dt, options.get("max_steps", MAX_STEPS))
    save_every = validate_count(save_every, "save_every")
    w = validate_weights(weights, n)
    seeds = options.get("seeds")
    lay0 = _as_batch_layer(layers)
    piecewise = isinstance(lay0, Schedule)
    fixed = isinstance(lay0, Attention)
    require_batch_layer(lay0 if fixed else lay0(t0), B, d, f"the layer at t = {t0:g}")
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
        n_saved = len(save_steps)
    else:
        saved = lambda k: k % save_every == 0 or k == steps  # noqa: E731
        n_saved = steps // save_every + 2
    if n_saved * B * n * d > MAX_STORED_FLOATS:
        raise ValueError(f"storing {n_saved} frames of {B} x {n} x {d} tokens is too much: raise save_every")

    info = {"steps": steps, "save_every": int(save_every), "blowup_threshold": threshold}
    common = dict(
        layer=lay0, method=method, dt=h, sphere=sphere, weights=w, seed=None if seeds is None else np.asarray(seeds)
    )
    kernel_path = fixed and backend != "numpy" and _kernel_fits(lay0, n, d, backend)
    if kernel_path:
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
        t, X, nfev = t0 + run_k.saved * h, run_k.frames, steps * (4 if method == "rk4" else 1)
        stopped = run_k.flagged_step >= 0
        stop_time = t0 + run_k.flagged_step * h
        why = [reasons.get(int(c), "max |x_i| exceeded blowup_threshold") for c in run_k.status]
    else:
        state: dict = {}  # Sinkhorn warm start of the active systems
        cache: dict = {}  # the layers of the active systems, and which systems the state holds

        def field(t, Y, active, t_step):
            lay = lay0 if fixed else (lay0(t_step) if piecewise else lay0(t))
            if not fixed:
                require_batch_layer(lay, B, d, f"the layer at t = {t:g}")
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

        geometry = SPHERE if sphere else EUCLIDEAN
        run = fixed_step(field, X0, t0, steps, h, scheme=method, geometry=geometry, saved=saved, threshold=threshold)
        t, X, nfev = run.t, run.y, run.nfev
        stopped, stop_time, why = run.status != "completed", run.time, run.reason
    return Trajectory(
        t=t,
        X=X,
        blowup_time=np.where(stopped, stop_time, np.nan),
        reasons=tuple(r if stop else None for r, stop in zip(why, stopped)),
        info={**info, "nfev": nfev, "backend": "numba" if kernel_path else "numpy"},
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
