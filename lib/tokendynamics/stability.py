r"""Stability of the Transformer PDE in :math:`W_p`: explicit constants and the bound they give.

Paper 1 (Castin et al., arXiv:2501.18322), its stability theorem ([S]; its exact form [I]), with constants derived
for this book ([D], chapter 1): for data supported in :math:`B(0,R_0)`,

.. math:: W_p(\mu_t,\nu_t)\le\exp\Big(\int_0^tL_s\,ds\Big)W_p(\mu_0,\nu_0),\qquad
          L_s=\mathrm{Lip}_x(R_s)+\mathrm{Lip}_\mu(R_s),\qquad \dot R_s=\sup|\Gamma|(R_s),

with :math:`\mathrm{Lip}_x` the Lipschitz constant of :math:`x\mapsto\Gamma_\mu(x)` on :math:`B(0,R)` and
:math:`\mathrm{Lip}_\mu` that of :math:`\mu\mapsto\Gamma_\mu` from :math:`W_1` to the sup norm. With
:math:`a=\beta\|A\|`, :math:`v=\|V\|`, :math:`q=\|Q\|`, :math:`\kappa=\|K\|` (per head, summed), the bounds
:math:`(\sup|\Gamma|,\mathrm{Lip}_x,\mathrm{Lip}_\mu)` [D] are: softmax :math:`vR`, :math:`avR^2`,
:math:`v(1+2aR^2)e^{2aR^2}` (masked with a sink of mass :math:`m_0`: :math:`\mathrm{Lip}_\mu/m_0`, for
:math:`W_{1,\lambda}`); sigmoid :math:`vR`, :math:`avR^2/4`, :math:`v(1+aR^2/4)`; L2 :math:`vR`,
:math:`2\beta\|Q^\top K\|vR^2`, :math:`v(1+4\beta\kappa(q+\kappa)R^2)e^{\beta(q+\kappa)^2R^2}`; unnormalised
softmax :math:`vRe^{aR^2}`, :math:`avR^2e^{aR^2}`, :math:`v(1+aR^2)e^{aR^2}`; linear :math:`avR^3`,
:math:`avR^2`, :math:`2avR^2`. Sinkhorn attention has none (its dependence on the measure goes through the
Sinkhorn potentials). The chapter compares these pessimistic bounds with measured ratios
(:func:`tokendynamics.book.studies.variants.stability_study`).
"""

from __future__ import annotations

import math

import numpy as np

from .attention import Attention, LayerLike, require_layer, velocity_unchecked
from .docstrings import fill_doc
from .odes import rk4_step
from .validation import (
    validate_count,
    validate_finite,
    validate_finite_array,
    validate_positions,
    validate_positive,
    validate_weights,
)

__all__ = ["support_speed", "lipschitz_constants", "log_stability_bound", "log_trajectory_bound", "log_jacobian_bound"]


_DOC = {
    "R": r"""
        R : float
            Radius :math:`R\ge0` of the ball :math:`B(0,R)` holding the support of the measure(s) and :math:`x`.
    """,
    "ref_stability": "Paper 1 (Castin et al., arXiv:2501.18322), the stability theorem; the constants are derived for "
    "the book: ``chapters/01_well_posedness.md``, equations (eq-p1-stability) and (eq-p1-constant).",
}


def _heads(layer: Attention, capability: str, R: float):
    """The kind's bound ``capability`` at radius R for every head of the layer."""
    bound = layer.kind.require(capability, "the explicit stability bound")
    return [bound(layer.head(h), R) for h in range(layer.n_heads)]


def _speed(layer: Attention, R) -> float:
    return float(sum(_heads(layer, "speed", R)))


def _lipschitz(layer: Attention, R, m0: float | None) -> tuple[float, float]:
    normalised_causal = layer.causal and layer.kind.normalised
    if normalised_causal and not (m0 is not None and m0 > 0):
        raise ValueError("a causal softmax layer has no uniform constant without an attention sink: give m0 > 0")
    bounds = _heads(layer, "lipschitz", R)
    lip_mu = sum(lm / m0 if normalised_causal and m0 is not None else lm for _, lm in bounds)
    return float(sum(lx for lx, _ in bounds)), float(lip_mu)


def _layer_at(layer: LayerLike):
    """The map ``s -> Attention`` of a layer or of a depth-dependent callable."""
    if isinstance(layer, Attention):
        lay = require_layer(layer)
        return lambda s: lay
    if callable(layer):
        return lambda s: require_layer(layer(s), f"the layer at t = {s:g}")
    raise TypeError(f"layer must be an Attention or a callable t -> Attention, got {type(layer).__name__}")


@fill_doc(_DOC)
def support_speed(layer: Attention, R: float) -> float:
    r"""Bound on :math:`\sup_{|x|\le R}|\Gamma_\mu(x)|` for :math:`\operatorname{supp}\mu\subset B(0,R)` (so
    :math:`\dot R\le` it).

    Parameters
    ----------
    layer : Attention
        The layer; its kind gives the bound per head (the module's table), summed over heads.
    %(R)s

    Returns
    -------
    float
        The bound (``inf`` once an exponential overflows); a CapabilityError for a kind without one.

    References
    ----------
    %(ref_stability)s
    """
    R = np.float64(validate_positive(R, "R", allow_zero=True))  # numpy scalar: overflow gives inf, not an error
    return _speed(require_layer(layer), R)


@fill_doc(_DOC)
def lipschitz_constants(layer: Attention, R: float, *, m0: float | None = None) -> tuple[float, float]:
    r"""Explicit :math:`(\mathrm{Lip}_x,\mathrm{Lip}_\mu)` of the field on :math:`B(0,R)` (the module's table).

    A causal row-normalised layer needs the sink mass ``m0``; the constant is then for :math:`W_{1,\lambda}`.

    Parameters
    ----------
    layer : Attention
        The layer; its kind must have explicit constants (a CapabilityError otherwise), summed over heads.
    %(R)s
    m0 : float, optional
        Sink mass :math:`m_0=\lambda(\{0\})` of masked attention (a ValueError if a causal row-normalised
        layer has none).

    Returns
    -------
    (lip_x, lip_mu) : tuple of float
        The two constants (``inf`` where an exponential overflows); their sum is :math:`L` of the bound.

    References
    ----------
    %(ref_stability)s
    """
    R = np.float64(validate_positive(R, "R", allow_zero=True))
    return _lipschitz(require_layer(layer), R, None if m0 is None else validate_finite(m0, "m0"))


@fill_doc(_DOC)
def log_stability_bound(
    layer: LayerLike, t, R0: float, *, m0: float | None = None, substeps: int = 20
) -> tuple[np.ndarray, np.ndarray]:
    r"""Logarithm of the bound :math:`C(t)=\exp\int_0^tL_s\,ds` of the stability theorem, and the support radius.

    Integrates :math:`\dot R=\sup|\Gamma|(R)` (:func:`support_speed`) and :math:`\frac{d}{dt}\log C=L(R)`
    (:func:`lipschitz_constants`) by RK4, ``substeps`` steps per interval of ``t``. Both are ``inf`` once the
    support bound has blown up (linear and unnormalised attention).

    Parameters
    ----------
    layer : Attention or callable ``t -> Attention``
        The layer, or the layer at each depth :math:`t`.
    t : array_like (m,)
        Increasing times, starting at 0.
    R0 : float
        Radius :math:`R_0\ge0` of a ball holding the initial data.
    m0 : float, optional
        Sink mass, passed to :func:`lipschitz_constants`.
    substeps : int
        RK4 steps per interval of ``t`` (>= 1).

    Returns
    -------
    (log_C, R) : tuple of numpy.ndarray (m,)
        :math:`\log C(t)` and the support radius bound :math:`R_t` at the times ``t``.

    References
    ----------
    %(ref_stability)s
    """
    t = validate_finite_array(t, "t")
    if t.ndim != 1 or t.size == 0 or t[0] != 0 or np.any(np.diff(t) <= 0):
        raise ValueError("t must be an increasing array of times starting at 0")
    R0 = validate_positive(R0, "R0", allow_zero=True)
    substeps = validate_count(substeps, "substeps")
    m0 = None if m0 is None else validate_finite(m0, "m0")
    at = _layer_at(layer)

    def rhs(s, y):
        L, R = at(s), y[0]
        if not math.isfinite(R):
            return np.array([math.inf, math.inf])
        lx, lm = _lipschitz(L, R, m0)
        return np.array([_speed(L, R), lx + lm])

    y = np.array([float(R0), 0.0])
    logC, Rs = [0.0], [float(R0)]
    for k in range(1, t.size):
        h, s = (t[k] - t[k - 1]) / substeps, t[k - 1]
        for _ in range(substeps):
            if not np.all(np.isfinite(y)):
                break
            with np.errstate(over="ignore", invalid="ignore"):
                y, _ = rk4_step(rhs, s, y, h)
            if not np.all(np.isfinite(y)):
                y = np.array([math.inf, math.inf])
            s += h
        Rs.append(float(y[0]))
        logC.append(float(y[1]))
    return np.array(logC), np.array(Rs)


@fill_doc(_DOC)
def log_trajectory_bound(layer: LayerLike, t, R, *, m0: float | None = None) -> np.ndarray:
    r"""Logarithm of the stability bound along a measured trajectory: :math:`\log C(t)=\int_0^tL(R_s)\,ds`.

    The Grönwall argument of the stability theorem with the radius :math:`R_s` measured on the two runs
    (largest token norm of both) instead of the worst-case bound :math:`\dot R=\sup|\Gamma|(R)`. On each
    interval :math:`[t_{k-1},t_k]`, :math:`L` (:func:`lipschitz_constants`, the kind's constants) is taken at
    the larger of the two end radii and the larger of the two end layers.

    Parameters
    ----------
    layer : Attention or callable ``t -> Attention``
        The layer, or the layer at each depth :math:`t`.
    t : array_like (m,)
        Increasing times, starting at 0.
    R : array_like (m,)
        Measured support radius at the times ``t``.
    m0 : float, optional
        Sink mass, passed to :func:`lipschitz_constants`.

    Returns
    -------
    numpy.ndarray (m,)
        :math:`\log C(t)` at the times ``t`` (a CapabilityError for a kind without explicit constants).

    References
    ----------
    %(ref_stability)s
    """
    t, R = validate_finite_array(t, "t"), validate_finite_array(R, "R")
    if t.ndim != 1 or t.size == 0 or t[0] != 0 or np.any(np.diff(t) <= 0) or R.shape != t.shape or np.any(R < 0):
        raise ValueError("t must be increasing times starting at 0 and R a radius >= 0 at each of them")
    at, m0 = _layer_at(layer), None if m0 is None else validate_finite(m0, "m0")
    with np.errstate(over="ignore"):
        L = [
            max(sum(_lipschitz(at(s), np.float64(max(R[k - 1], R[k])), m0)) for s in t[k - 1 : k + 1])
            for k in range(1, t.size)
        ]
    return np.concatenate([[0.0], np.cumsum(np.diff(t) * np.array(L))])


def _log_norm(lay: Attention, X, w, s, h: float) -> float:
    """Largest eigenvalue of the symmetric part of the particle field's Jacobian at X in the norm of the masses
    ``w`` (forward differences: n d field evaluations, ten at a time)."""
    n, d = X.shape
    E = X[None] + h * np.eye(n * d).reshape(n * d, n, d)
    F = np.concatenate([velocity_unchecked(E[k : k + 10], lay, w, s) for k in range(0, n * d, 10)])
    J = ((F - velocity_unchecked(X, lay, w, s)) / h).reshape(n * d, n * d).T  # J[output, input]
    r = np.repeat(np.sqrt(w), d)
    M = r[:, None] * J / r[None, :]
    return float(np.linalg.eigvalsh(M + M.T)[-1] / 2)


def log_jacobian_bound(layer: LayerLike, t, runs, *, weights=None, positions=None, h: float = 1e-6) -> np.ndarray:
    r"""Grönwall bound along measured runs with the measured rate of the particle field:
    :math:`\log C(t)=\int_{t_0}^t\lambda_s\,ds`.

    :math:`F(X)=(\Gamma_{\mu_X}(x_i))_i` is the field of the whole system (any kind, through its velocity) and
    :math:`\lambda(X)` the largest eigenvalue of the symmetric part of its :math:`nd\times nd` Jacobian in the
    norm :math:`|X|_w^2=\sum_iw_i|x_i|^2` (the logarithmic norm). Since
    :math:`\frac{d}{dt}\tfrac12|X-Y|_w^2\le\sup_{[X,Y]}\lambda\,|X-Y|_w^2` and the field is
    permutation-equivariant, :math:`W_2(\mu_t,\nu_t)\le C(t)W_2(\mu_{t_0},\nu_{t_0})` for uniform masses (and
    for the conditional distance of masked attention, which couples tokens position by position) if
    :math:`\lambda_s` bounds :math:`\lambda` on the segment between the two systems. Here it is only sampled,
    not bounded: :math:`\lambda` is computed by forward differences at the saved times on each given run, and on
    :math:`[t_{k-1},t_k]` the largest of these values at both ends is taken — a measured bound, not a rigorous
    one.

    Parameters
    ----------
    layer : Attention or callable ``t -> Attention``
        The layer, or the layer at each depth :math:`t`.
    t : array_like (m,)
        Increasing times of the saved states.
    runs : array_like (r, m, n, d)
        The saved states of r runs of the same system (e.g. a base run and perturbed ones).
    weights, positions : array_like (n,), optional
        Masses :math:`w_i` (uniform if omitted) and positions of a causal layer, as for the velocity.
    h : float
        Forward-difference step.

    Returns
    -------
    numpy.ndarray (m,)
        :math:`\log C(t)`, 0 at ``t[0]``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the Grönwall argument of its stability theorem; book:
    ``chapters/01_well_posedness.md``, equation (eq-p1-stability).
    """
    t, runs = validate_finite_array(t, "t", ndim=1), validate_finite_array(runs, "runs", ndim=4)
    if t.size == 0 or np.any(np.diff(t) <= 0) or runs.shape[1] != t.size:
        raise ValueError(f"t must be increasing times and runs (r, m, n, d) with m = {t.size}, got {runs.shape}")
    n, at, h = runs.shape[2], _layer_at(layer), validate_positive(h, "h")
    w = validate_weights(weights, n)
    w, s = np.full(n, 1.0 / n) if w is None else w, validate_positions(positions, n)
    rate = np.array([[_log_norm(at(tk), X[k], w, s, h) for k, tk in enumerate(t)] for X in runs]).max(axis=0)
    return np.concatenate([[0.0], np.cumsum(np.diff(t) * np.maximum(rate[1:], rate[:-1]))])
