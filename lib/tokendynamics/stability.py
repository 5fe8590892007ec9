r"""Stability of the Transformer PDE in :math:`W_p`: explicit constants and measured growth factors.

Paper 1 (Castin et al., arXiv:2501.18322), its well-posedness and stability theorem ([S] for the statement, [I]
for its exact form), with explicit constants derived for this book ([D]; chapter 1 of the book). For two solutions with
data supported in :math:`B(0,R_0)`,

.. math:: W_p(\mu_t,\nu_t)\le\exp\Big(\int_0^tL_s\,ds\Big)\,W_p(\mu_0,\nu_0),\qquad
          L_s=\mathrm{Lip}_x(R_s)+\mathrm{Lip}_\mu(R_s),

where :math:`\mathrm{Lip}_x` bounds the Lipschitz constant of :math:`x\mapsto\Gamma_\mu(x)` on
:math:`B(0,R)`, :math:`\mathrm{Lip}_\mu` that of :math:`\mu\mapsto\Gamma_\mu` from :math:`W_1` to
the sup norm on :math:`B(0,R)`, and the support radius obeys :math:`\dot R_s=\sup|\Gamma|`. With
:math:`a=\beta\|A\|`, :math:`v=\|V\|` (operator norms; per head, summed over heads), the bounds
:math:`(\sup|\Gamma|,\ \mathrm{Lip}_x,\ \mathrm{Lip}_\mu)` are:

* softmax [D]: :math:`\sup|\Gamma|\le vR`, :math:`\mathrm{Lip}_x=avR^2`,
  :math:`\mathrm{Lip}_\mu=v(1+2aR^2)e^{2aR^2}`;
* masked softmax with a sink of mass :math:`m_0` [D]: the same with
  :math:`\mathrm{Lip}_\mu` divided by :math:`m_0`, for the conditional distance :math:`W_{1,\lambda}`;
* sigmoid [D]: :math:`vR`, :math:`avR^2/4`, :math:`v(1+aR^2/4)`;
* l2 [D, here]: :math:`vR`, :math:`2\beta\|Q^\top K\|vR^2`,
  :math:`v(1+4\beta\kappa(q+\kappa)R^2)e^{\beta(q+\kappa)^2R^2}`;
* unnormalised softmax [D, here]: :math:`vRe^{aR^2}`, :math:`avR^2e^{aR^2}`, :math:`v(1+aR^2)e^{aR^2}`;
* linear [D, here]: :math:`avR^3`, :math:`avR^2`, :math:`2avR^2`.

(:math:`q=\|Q\|`, :math:`\kappa=\|K\|`.) The L2 row follows the softmax argument with the kernel
:math:`e^{-\beta|Qx-Ky|^2}\in[e^{-\beta(q+\kappa)^2R^2},1]` on :math:`B(0,R)`. No explicit constant
is given for Sinkhorn attention (its dependence on the measure goes through the Sinkhorn
potentials); :func:`lipschitz_constants` says so. These bounds are very pessimistic: the
chapter shows them next to the measured ratio :math:`W_p(\mu_t,\nu_t)/W_p(\mu_0,\nu_0)`
(:func:`tokendynamics.book.studies.variants.stability_study`).
"""

from __future__ import annotations

import math

import numpy as np

from .attention import Attention, LayerLike, require_layer
from .docstrings import fill_doc
from .odes import rk4_step
from .validation import validate_count, validate_finite, validate_finite_array, validate_positive

__all__ = ["has_explicit_bound", "support_speed", "lipschitz_constants", "log_stability_bound"]


#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    # the radius at which the explicit bounds are evaluated
    "R": r"""
        R : float
            Radius :math:`R\ge0` of the ball :math:`B(0,R)` that holds the support of the measure(s) and the
            point :math:`x`.
    """,
    # the references of the stability theorem and its explicit constants
    "ref_stability": r"""
        Paper 1 (Castin et al., arXiv:2501.18322), the well-posedness and stability theorem; the explicit
        constants are derived for the book. Book: ``chapters/01_well_posedness.md``, equations
        (eq-p1-stability) and (eq-p1-constant).
    """,
}


@fill_doc(_DOC)
def has_explicit_bound(layer: Attention) -> bool:
    """Whether :func:`lipschitz_constants` knows an explicit constant for this layer (its kind has them).

    Parameters
    ----------
    layer : Attention
        The layer whose kind is asked (a TypeError if it is not an :class:`~tokendynamics.attention.Attention`).

    Returns
    -------
    bool
        False for a kind without explicit constants (Sinkhorn attention, whose dependence on the measure
        goes through the Sinkhorn potentials; hardmax, whose field is discontinuous; a kind of one's own);
        True otherwise (a causal row-normalised layer also needs a sink mass, see :func:`lipschitz_constants`).

    References
    ----------
    %(ref_stability)s
    """
    return require_layer(layer).kind.has("lipschitz")


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


@fill_doc(_DOC)
def support_speed(layer: Attention, R: float) -> float:
    r"""Bound on :math:`\sup_{|x|\le R}|\Gamma_\mu(x)|` for :math:`\operatorname{supp}\mu\subset B(0,R)`.

    So the support radius grows no faster than it: :math:`\dot R\le` this bound.

    Parameters
    ----------
    layer : Attention
        The layer; its kind gives the bound per head (the module's table, with :math:`a=\beta\|A_h\|`,
        :math:`v=\|V_h\|`), summed over heads.
    %(R)s

    Returns
    -------
    float
        The bound on the speed of the tokens (:math:`vR` for the normalised kinds and sigmoid,
        :math:`vRe^{aR^2}` unnormalised, :math:`avR^3` linear and ReLU); ``inf`` once the exponential overflows.

    Raises
    ------
    CapabilityError
        The kind has no speed bound (e.g. a kind of one's own).

    References
    ----------
    %(ref_stability)s
    """
    R = np.float64(validate_positive(R, "R", allow_zero=True))  # numpy scalar: overflow gives inf, not an error
    return _speed(require_layer(layer), R)


@fill_doc(_DOC)
def lipschitz_constants(layer: Attention, R: float, *, m0: float | None = None) -> tuple[float, float]:
    r"""Explicit :math:`(\mathrm{Lip}_x,\mathrm{Lip}_\mu)` of the field on :math:`B(0,R)` (derived for the book; table
    in the module docstring).

    ``m0`` is the sink mass, required for causal row-normalised layers (their denominators are
    only bounded below through it); the constant is then for the conditional distance
    :math:`W_{1,\lambda}`.

    Parameters
    ----------
    layer : Attention
        The layer (a kind with explicit constants); the constants are summed over its heads.
    %(R)s
    m0 : float, optional
        Sink mass :math:`m_0=\lambda(\{0\})` of masked attention; None for a layer that needs none (every
        non-causal layer, and the causal kinds that are not row-normalised).

    Returns
    -------
    (lip_x, lip_mu) : tuple of float
        :math:`\mathrm{Lip}_x(R)`, the Lipschitz bound of :math:`x\mapsto\Gamma_\mu(x)` on :math:`B(0,R)`, and
        :math:`\mathrm{Lip}_\mu(R)`, that of :math:`\mu\mapsto\Gamma_\mu` from :math:`W_1` (or
        :math:`W_{1,\lambda}`) to the sup norm; their sum is :math:`L` of the stability bound. Either may be
        ``inf`` when an exponential overflows.

    Raises
    ------
    CapabilityError
        For a kind without explicit constants (Sinkhorn, hardmax, a kind of one's own).
    ValueError
        A causal row-normalised layer without ``m0 > 0``.

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
    r"""Logarithm of the bound :math:`C(t)=\exp\int_0^tL_s\,ds` of paper 1's stability theorem, and the support radius
    :math:`R_t`.

    Integrates :math:`\dot R=\sup|\Gamma|(R)` (:func:`support_speed`) and
    :math:`\frac{d}{dt}\log C=L(R)=\mathrm{Lip}_x(R)+\mathrm{Lip}_\mu(R)` (:func:`lipschitz_constants`)
    with the classical RK4 step of :mod:`tokendynamics.particles` (``substeps`` per interval of ``t``,
    which starts at 0). ``layer`` may depend on
    time (a callable ``t -> Attention``). The logarithm is returned because :math:`C(t)` itself
    overflows quickly; it is ``inf`` once the support bound has blown up (linear and unnormalised
    attention).

    Parameters
    ----------
    layer : Attention or callable ``t -> Attention``
        The layer, or the layer at each depth :math:`t` (depth-dependent :math:`(A_t, V_t)`).
    t : array_like (m,)
        Increasing times, starting at 0, at which the bound is returned.
    R0 : float
        Radius :math:`R_0\ge0` of a ball :math:`B(0,R_0)` that holds the initial data.
    m0 : float, optional
        Sink mass, passed to :func:`lipschitz_constants` (required for causal softmax/L2 layers).
    substeps : int
        RK4 steps per interval of ``t`` (>= 1).

    Returns
    -------
    (log_C, R) : tuple of numpy.ndarray (m,)
        :math:`\log C(t)=\int_0^tL_s\,ds` and the support radius bound :math:`R_t` at the times ``t``;
        both ``inf`` from the time the integration overflows on.

    Raises
    ------
    ValueError
        Where :func:`lipschitz_constants` has no constant (Sinkhorn, causal without ``m0 > 0``).

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
    if isinstance(layer, Attention):
        lay = require_layer(layer)
        at = lambda s: lay  # noqa: E731
    elif callable(layer):
        at = lambda s: require_layer(layer(s), f"the layer at t = {s:g}")  # noqa: E731
    else:
        raise TypeError(f"layer must be an Attention or a callable t -> Attention, got {type(layer).__name__}")

    def rhs(s, y):
        L, R = at(s), y[0]
        if not math.isfinite(R):
            return np.array([math.inf, math.inf])
        lx, lm = _lipschitz(L, R, m0)
        return np.array([_speed(L, R), lx + lm])

    y = np.array([float(R0), 0.0])
    logC, Rs = [0.0], [float(R0)]
    for k in range(1, t.size):
        h = (t[k] - t[k - 1]) / substeps
        s = t[k - 1]
        for _ in range(substeps):
            if not np.all(np.isfinite(y)):
                break
            with np.errstate(over="ignore", invalid="ignore"):
                y, _ = rk4_step(rhs, s, y, h)  # the RK4 step of the stepping layer
            if not np.all(np.isfinite(y)):
                y = np.array([math.inf, math.inf])
            s += h
        Rs.append(float(y[0]))
        logC.append(float(y[1]))
    return np.array(logC), np.array(Rs)
