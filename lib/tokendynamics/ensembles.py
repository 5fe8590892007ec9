r"""Batched ensembles: many independent particle systems integrated together as one array.

An ensemble is B independent systems :math:`\dot x^{(b)}_i = \Gamma^{(b)}_{\mu^{(b)}_t}(x^{(b)}_i)`
(projected on the sphere if asked), :math:`b=1,\dots,B`: different initial clouds, seeds,
temperatures :math:`\beta` or random layers, all of the same kind and shape. :func:`simulate_batch`
stores them as one array (B, n, d) and makes one call of
:func:`~tokendynamics.attention.velocity_batch` per stage for the whole batch, instead of a
Python loop over :func:`~tokendynamics.particles.simulate`. The formulas are those of
:func:`~tokendynamics.attention.velocity` (the same code, with the batch as leading axes), and the
stepping is the one of :func:`~tokendynamics.particles.simulate`: both run on
:func:`~tokendynamics.odes.fixed_step` (a single system is a batch of one), so system b of a batch equals
``simulate(X0[b], layer_b, ...)`` to round-off (tested for every kind).

A system whose field overflows, whose Sinkhorn solve misses its tolerance, or whose tokens leave
the ball of radius ``blowup_threshold`` is flagged with the time and the reason and frozen at its
last good state; the others go on (:class:`BatchTrajectory`).

Why a module of its own: the batch has its own trajectory object (per-system blow-up times),
depth schedules of layers and the random weight recipes of the phase diagrams (:data:`RECIPES`).

The recipes draw the matrices of random layers: ``identity`` (:math:`Q=K=V=I`, the model of
Geshkovski, Letrouit, Polyanskiy and Rigollet, arXiv:2312.10794), ``gaussian`` (:math:`Q, K` with
i.i.d. :math:`N(0,1/d)` entries, :math:`A=Q^\top K`, :math:`V=I`), ``goe`` (:math:`A` from the
Gaussian orthogonal ensemble scaled to spectrum :math:`[-2,2]`, :math:`V=I`), ``minus_identity``
(:math:`Q=K=I`, :math:`V=-I`: repulsion).

References
----------
Paper 1 (Castin et al., arXiv:2501.18322), the particle systems of the attention variants;
B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on Transformers*
(arXiv:2312.10794). Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .attention import Attention, require_batch_layer, velocity_batch_unchecked
from .docstrings import fill_doc
from .odes import EUCLIDEAN, MAX_STEPS, SPHERE, fixed_step, step_count
from .particles import Frames, Trajectory, normalize_rows
from .validation import (
    PARAMETER_DOCS,
    parse_span,
    real_array,
    validate_choice,
    validate_count,
    validate_flag,
    validate_positive,
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
    "resampled_schedule",
]

MAX_STORED_FLOATS = 200_000_000  # 1.6 GB: refuse to store more, ask for save_every or save_at


# ---------------------------------------------------------------------------------------------
# initial clouds and weight recipes
# ---------------------------------------------------------------------------------------------


#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **PARAMETER_DOCS,
    "kind": "kind : str\n    Attention kind.",
    "recipe_d": "recipe : str\n    One of :data:`RECIPES`.\nd : int\n    Dimension.",
    "rng": "rng : int or numpy.random.Generator, optional\n    Seed or generator.",
    # the last parameter of the stack builders, and what they return
    "shared_returns": (
        "**shared\n    Passed to the batch (``eps``, ``bias``, ...).\n\n"
        "Returns\n-------\nAttention\n    A batch of layers."
    ),
    "refs_recipes": """
        B. Geshkovski, C. Letrouit, Y. Polyanskiy, P. Rigollet, *A mathematical perspective on Transformers*
        (arXiv:2312.10794); book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
    """,
}


@fill_doc(_DOC)
def sample_clouds(size: int, n: int, d: int, rng=None) -> np.ndarray:
    """``size`` independent clouds of n tokens uniform on the unit sphere of R^d, shape (size, n, d).

    Normalised Gaussians from ``numpy.random.default_rng(rng)``; cloud b is the b-th block of the
    stream, so the first k clouds of a larger draw are the clouds of a draw of size k.

    Parameters
    ----------
    size, n, d : int
        Number of clouds, tokens per cloud, dimension.
    %(rng)s

    Returns
    -------
    array (size, n, d)

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
    """
    size = validate_count(size, "size")
    n = validate_count(n, "n")
    d = validate_count(d, "d")
    rng = np.random.default_rng(rng)
    return normalize_rows(rng.standard_normal((size, n, d)))


#: Names of the random weight recipes of :func:`recipe_matrices` (see the module docstring).
RECIPES = ("identity", "gaussian", "goe", "minus_identity")


@fill_doc(_DOC)
def recipe_matrices(recipe: str, d: int, size: int, rng=None) -> dict[str, np.ndarray]:
    r"""Stacked matrices of ``size`` layers drawn from a named recipe, seeded.

    Returns a dict with ``Q``, ``K`` (size, d, d) and ``V`` (size, d, d); the score matrix is
    :math:`A=Q^\top K`. ``identity``: :math:`Q=K=V=I`. ``gaussian``: :math:`Q_{ab},K_{ab}\sim
    N(0,1/d)` i.i.d., :math:`V=I`. ``goe``: :math:`A=(G+G^\top)/\sqrt{2d}` with :math:`G_{ab}\sim N(0,1)`
    (the Gaussian orthogonal ensemble, spectrum filling :math:`[-2,2]` as d grows), written as
    :math:`Q=I`, :math:`K=A`; :math:`V=I`. ``minus_identity``: :math:`Q=K=I`, :math:`V=-I`.
    Layers with a score matrix only (not L2 attention) use :math:`A=Q^\top K`.

    Parameters
    ----------
    %(recipe_d)s
    size : int
        Number of layers.
    %(rng)s

    Returns
    -------
    dict
        ``Q``, ``K``, ``V``, each of shape (size, d, d).

    References
    ----------
    %(refs_recipes)s
    """
    if recipe not in RECIPES:
        raise ValueError(f"recipe must be one of {RECIPES}, got {recipe!r}")
    d = validate_count(d, "d")
    size = validate_count(size, "size")
    rng = np.random.default_rng(rng)
    eye = np.broadcast_to(np.eye(d), (size, d, d)).copy()
    if recipe == "identity":
        return {"Q": eye, "K": eye.copy(), "V": eye.copy()}
    if recipe == "minus_identity":
        return {"Q": eye, "K": eye.copy(), "V": -eye}
    if recipe == "gaussian":
        Q = rng.standard_normal((size, d, d)) / math.sqrt(d)
        K = rng.standard_normal((size, d, d)) / math.sqrt(d)
        return {"Q": Q, "K": K, "V": eye}
    G = rng.standard_normal((size, d, d))
    A = (G + np.swapaxes(G, -1, -2)) / math.sqrt(2 * d)
    return {"Q": eye, "K": A, "V": eye.copy()}


@fill_doc(_DOC)
def stack_from_matrices(kind: str, M: dict, beta, **shared) -> Attention:
    r"""A batch of layers (an :class:`~tokendynamics.attention.Attention` with a leading axis) from stacked
    ``Q``, ``K``, ``V``.

    Parameters
    ----------
    %(kind)s
    M : dict
        ``Q``, ``K``, ``V`` stacks, as :func:`recipe_matrices` returns.
    beta : float or array
        One number or one per layer.
    %(shared_returns)s

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
    """
    beta = np.broadcast_to(np.atleast_1d(real_array(beta, "beta")), (len(M["V"]),))
    return Attention(kind, Q=M["Q"], K=M["K"], V=M["V"], beta=beta, **shared)


@fill_doc(_DOC)
def recipe_stack(kind: str, recipe: str, d: int, beta, size: int | None = None, rng=None, **shared) -> Attention:
    """A batch of ``size`` random layers of one kind from a named recipe (an :class:`~tokendynamics.attention.Attention`
    with a leading axis).

    Parameters
    ----------
    %(kind)s
    %(recipe_d)s
    beta : float or array
        One number or one per layer (then ``size`` defaults to its length).
    size : int, optional
        Number of layers.
    %(rng)s
    %(shared_returns)s

    References
    ----------
    %(refs_recipes)s
    """
    beta = np.atleast_1d(real_array(beta, "beta"))
    if size is None:
        size = beta.size
    if beta.size not in (1, size):
        raise ValueError(f"beta must be one number or {size} numbers, got {beta.size}")
    return stack_from_matrices(kind, recipe_matrices(recipe, d, size, rng), beta, **shared)


@dataclass(frozen=True, eq=False)
class Schedule:
    r"""Piecewise-constant layers in depth: ``layers[k]`` acts on :math:`[t_0+k\tau, t_0+(k+1)\tau)`.

    A residual network whose weights are resampled every :math:`\tau/\mathrm{d}t` layers.
    :func:`simulate_batch` picks the layer of a step from the step's start (every stage of an RK4
    step uses it), so a step never mixes two layers; the step must divide :math:`\tau`. After the
    last piece the last layer goes on.

    Attributes
    ----------
    layers : tuple of Attention
        One layer (or batch of layers) per piece.
    every : float
        Duration :math:`\tau` of a piece.
    t0 : float
        Start of the first piece.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), parameters depending on depth; book:
    ``chapters/07_phase_diagrams.md``.
    """

    layers: tuple
    every: float
    t0: float = 0.0

    def __post_init__(self):
        layers = tuple(self.layers)
        if not layers:
            raise ValueError("a Schedule needs at least one layer")
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
        k = int(math.floor((t - self.t0) / self.every + 1e-9))
        return min(max(k, 0), len(self.layers) - 1)

    def __call__(self, t: float):
        return self.layers[self.index(t)]


def resampled_schedule(kind: str, recipe: str, d: int, beta, size: int, every: float, T: float, rng=None, **shared):
    """A :class:`Schedule` of fresh random layers (:func:`recipe_stack`) every ``every`` in depth up to ``T``.

    Piece k draws its matrices from its own child seed (``numpy.random.SeedSequence.spawn``), so a
    schedule is reproducible from ``rng`` (an integer seed).

    Parameters
    ----------
    kind, recipe, d, beta, size
        As in :func:`recipe_stack`.
    every : float
        Duration of a piece.
    T : float
        Horizon.
    rng : int or numpy.random.SeedSequence, optional
        Seed.
    **shared
        Passed to the stacks.

    Returns
    -------
    Schedule
        ``ceil(T / every)`` pieces, each a stack of ``size`` layers.

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
    """
    pieces = max(1, int(math.ceil(T / every - 1e-9)))
    seq = rng if isinstance(rng, np.random.SeedSequence) else np.random.SeedSequence(rng)
    children = seq.spawn(pieces)
    return Schedule(tuple(recipe_stack(kind, recipe, d, beta, size, c, **shared) for c in children), every)


# ---------------------------------------------------------------------------------------------
# the batched trajectory
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BatchTrajectory(Frames):
    """B trajectories computed together (:func:`simulate_batch`).

    Attributes
    ----------
    t : array (m,)
        Stored times (shared).
    X : array (m, B, n, d)
        Tokens of every system at the stored times; a frozen system keeps its last good state.
    layer : Attention, Schedule or callable
        What drove the systems.
    method, dt, sphere, weights
        As in :class:`~tokendynamics.particles.Trajectory`.
    blowup_time : array (B,)
        Time at which system b was flagged (NaN if never): its field overflowed, its Sinkhorn solve
        failed, or its tokens became non-finite or left the ball of radius ``blowup_threshold``.
    reasons : tuple of str or None
        Why each flagged system was frozen (None for the others).
    seeds : array (B,) or None
        Seeds of the initial clouds, when the caller recorded them.
    info : dict
        ``steps``, ``nfev`` (batched evaluations), ``save_every``, ``blowup_threshold``.

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
    """

    # t, X, layer and method as in Frames
    dt: float
    sphere: bool = False
    weights: np.ndarray | None = None
    blowup_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    reasons: tuple = ()
    seeds: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Number of systems B."""
        return self.X.shape[1]

    @property
    def blew_up(self) -> np.ndarray:
        """Boolean mask (B,) of the systems that were flagged and frozen."""
        return np.isfinite(self.blowup_time)

    def system(self, b: int) -> Trajectory:
        """System b as a :class:`~tokendynamics.particles.Trajectory`, as ``simulate(..., on_blowup="stop")`` gives it.

        A flagged system's frames stop before its blow-up time, and ``blowup_time`` is set.

        Parameters
        ----------
        b : int
            Which system of the batch, from 0 to B - 1.

        Returns
        -------
        Trajectory
            Its times, frames and layer (one :class:`~tokendynamics.attention.Attention` when the
            batch ran a batch of layers).
        """
        b = int(b)
        tb = self.blowup_time[b]
        keep = self.t < tb - 0.5 * self.dt if np.isfinite(tb) else np.ones(len(self.t), bool)
        lay: Any = self.layer
        if isinstance(lay, Attention) and lay.batch_size is not None:
            lay = lay.member(b)
        info = dict(self.info)
        if np.isfinite(tb):
            info["blowup_reason"] = self.reasons[b]
        return Trajectory(
            t=self.t[keep],
            X=self.X[keep, b],
            layer=lay,
            method=self.method,
            dt=self.dt,
            sphere=self.sphere,
            weights=self.weights,
            seed=None if self.seeds is None else int(self.seeds[b]),
            blowup_time=float(tb) if np.isfinite(tb) else None,
            info=info,
        )


def _as_batch_layer(layers, B: int, d: int):
    """An Attention (shared, or a batch of B), a Schedule or a callable; a sequence is stacked."""
    if isinstance(layers, (Attention, Schedule)) or callable(layers):
        lay = layers
    elif isinstance(layers, Sequence) and layers and all(isinstance(x, Attention) for x in layers):
        lay = Attention.stack(layers)
    else:
        raise TypeError(
            "layers must be an Attention (one layer for every system, or a batch of B), or a sequence of B "
            f"Attention layers (one per system), a Schedule, or a callable t -> layer; got {type(layers).__name__}"
        )
    return lay


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
) -> BatchTrajectory:
    r"""Integrate B independent particle systems at once: one batched field evaluation per stage.

    Parameters
    ----------
    X0 : array (B, n, d)
        Initial clouds (unit rows if ``sphere=True``).
    layers : Attention, sequence of Attention, Schedule, or callable ``t -> layer``
        One layer for every system (an :class:`~tokendynamics.attention.Attention`), one per system
        (a batch of B layers, or a sequence of B layers of
        one kind and shape, stacked here), layers that change with depth (a callable returning
        either, evaluated at every stage time, or a :class:`Schedule`, piecewise constant and
        evaluated at the start of each step).
    %(t_span)s
    dt : float
        Step, adjusted down so that an integer number of steps reaches T exactly (as
        :func:`~tokendynamics.particles.simulate`).
    method : {"rk4", "euler"}
        Classical Runge–Kutta or explicit Euler (a residual network of step dt).
    sphere : bool
        Tangent projection of the field and retraction :math:`x\mapsto x/|x|` after every step.
    weights : array (n,), optional
        Token masses shared by the systems (uniform by default).
    save_every : int
        Store every k-th step (the last one always).
    save_at : array, optional
        Store exactly these times instead (each must be a step time, to 1e-9 relative).
    **options
        ``blowup_threshold`` (float, default 1e8): a system whose tokens become non-finite or exceed this
        size is flagged and frozen; ``seeds`` (array (B,)): seeds of the initial clouds, recorded for
        reproducibility; ``max_steps`` (default :data:`~tokendynamics.odes.MAX_STEPS`): the budget of steps,
        checked before the run starts.

    Returns
    -------
    BatchTrajectory
        ``system(b)`` is the trajectory ``simulate(X0[b], layer_b, ..., on_blowup="stop")`` returns.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the particle system of attention; book:
    ``chapters/01_well_posedness.md``, equation (eq-p1-ips), and ``chapters/07_phase_diagrams.md``,
    equation (eq-phase-model).
    """
    unknown = sorted(set(options) - {"blowup_threshold", "seeds", "max_steps"})
    if unknown:
        raise TypeError(
            f"simulate_batch() got unknown option(s) {unknown}; its options are blowup_threshold, seeds, max_steps"
        )
    method = validate_choice(method, "method", ("rk4", "euler"))
    threshold = validate_positive(options.get("blowup_threshold", 1e8), "blowup_threshold", allow_inf=True)
    sphere = validate_flag(sphere, "sphere")
    X0 = real_array(X0, "X0")
    if X0.ndim != 3 or 0 in X0.shape:
        raise ValueError(f"X0 must be a batch of token clouds (B, n, d), got shape {X0.shape}")
    if not np.all(np.isfinite(X0)):
        raise ValueError("X0 contains non-finite values (inf or NaN)")
    B, n, d = X0.shape
    t0, T = parse_span(t_span)
    if dt is None:
        raise ValueError("simulate_batch needs a positive step dt, got None")
    steps, h = step_count(t0, T, dt, options.get("max_steps", MAX_STEPS))
    save_every = validate_count(save_every, "save_every")
    w = validate_weights(weights, n)
    seeds = options.get("seeds")
    lay0 = _as_batch_layer(layers, B, d)
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
    info = {"steps": steps, "nfev": run.nfev, "save_every": int(save_every), "blowup_threshold": threshold}
    return BatchTrajectory(
        t=run.t,
        X=run.y,
        layer=lay0,
        method=method,
        dt=h,
        sphere=sphere,
        weights=w,
        blowup_time=np.where(stopped, run.time, np.nan),
        reasons=tuple(r if stop else None for r, stop in zip(run.reason, stopped)),
        seeds=None if seeds is None else np.asarray(seeds),
        info=info,
    )
