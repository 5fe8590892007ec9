r"""The gradient-flow structure of attention dynamics: interaction energies, twisted metrics, non-convexity.

Paper 1 (Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322, second version) announces a gradient-flow
view of the Transformer PDE, relating it to Wasserstein and Bures–Wasserstein geometry, entropic
optimal transport and a "twisted" Wasserstein metric; its summary ties the non-convexity of the
energy to several equilibria and metastable states and to blow-up (no upper bound on the second
variation), and leaves geodesic convexity in the twisted metric open. Its text was not available; the formulas below are
the
book's reconstruction (chapter 3 of the book, *The gradient-flow structure*), derived and checked
numerically here. The *names* (:math:`d_M`, which energy, which example) are our reconstruction [I].

Convention (the book's notation, introduction page). Every matrix ``A`` passed to this module is the
library's *score matrix*: the kernel is :math:`e^{\langle x, Ay\rangle}` (an
:class:`~tokendynamics.attention.Attention` layer with inverse temperature :math:`\beta` has score
matrix :math:`\beta A`, see :func:`layer_matrices`). Paper 1 writes :math:`\langle A_1x,y\rangle`,
so :math:`A_1=A^\top`; for the symmetric matrices of the gradient-flow statements the two coincide.

Contents

* **Interaction energy** (chapter 3 of the book, eq. (3.1)):
  :math:`E_A(\mu)=\tfrac12\iint e^{\langle x,Ay\rangle}\,d\mu(x)\,d\mu(y)` for weighted empirical
  measures (:func:`interaction_energy`), its first variation and gradient
  (:func:`first_variation`, :func:`first_variation_gradient`), the partition function
  :math:`Z_\mu(x)=\int e^{\langle x,Ay\rangle}d\mu(y)` (:func:`partition_function`), the rate
  :math:`\frac{d}{dt}E_A(\mu_t)` along an attention flow (:func:`energy_rate`) and the closed forms on
  Gaussians (:func:`gaussian_interaction_energy`, :func:`gaussian_partition_function`).
* **Twisted Wasserstein distance** (chapter 3 of the book, eq. (3.5)):
  :math:`d_M(\mu,\nu)=W_2\big((M^{-1/2})_\#\mu,(M^{-1/2})_\#\nu\big)` for empirical measures
  (:func:`twisted_wasserstein`) and Gaussians (:func:`twisted_bures_wasserstein`), the matrix
  :math:`M=VA^{-1}` of a layer (:func:`twisted_matrix`) and the sign rule of the book's eq. (3.3)
  (:func:`energy_sign`).
* **Sinkhorn entropic energy** (Sander et al. 2022; chapter 3 of the book, eq. (3.4)):
  :math:`F_\varepsilon(\mu)=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)`
  with cost :math:`-\langle x,Ay\rangle`, closed form on Gaussians (:func:`sinkhorn_energy`), its
  gradient (:func:`sinkhorn_energy_gradient`), the empirical value through the core's log-domain
  Sinkhorn (:func:`sinkhorn_energy_empirical`), and (twisted) Bures–Wasserstein gradient flows
  (:func:`bw_gradient_velocity`, :func:`finite_difference_gradient`, :func:`gaussian_slope`).
* **Second variation** along :math:`\mu_s=(\mathrm{Id}+s\,w)_\#\mu` (chapter 3 of the book, eq. (3.6)):
  :func:`second_variation`, :func:`energy_along`, and closed forms :func:`dirac_second_variation`,
  :func:`gaussian_translation_hessian`.
* **Non-convexity: several equilibria, metastability, blow-up.** Configurations of clusters on the
  circle (:func:`circle_clusters`), the linearised flow at a configuration and its energy
  (:func:`linearize`, :class:`Equilibrium`): several critical points at different energies, all
  but one unstable; the plateaus of a run near such states (:func:`metastable_plateaus`); and the curvature of the
  energy along its own gradient flow
  (:func:`curvature_along_flow`), which a finite-time blow-up forces to be unbounded.

No function forms more than one :math:`n\times n` matrix at a time: kernels are evaluated in
blocks of rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .attention import BLOCK_ENTRIES, SINKHORN_ITERS, SINKHORN_TOL, Attention, velocity
from .docstrings import fill_doc
from .errors import ConvergenceError, NonFiniteError
from .gaussian import GaussianTrajectory, gaussian_rhs, gaussian_velocity, solve_gaussian
from .metrics import detect_clusters
from .particles import Trajectory
from .transport import bures_wasserstein, psd_sqrt, sinkhorn_potentials, sinkhorn_spectrum, wasserstein
from .validation import (
    real_array,
    validate_choice,
    validate_count,
    validate_covariance,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_instance,
    validate_measure,
    validate_positive,
    validate_spd,
    validate_square,
    validate_symmetric,
    validate_tokens,
    validate_weights,
)

__all__ = [
    "layer_matrices",
    "partition_function",
    "interaction_energy",
    "first_variation",
    "first_variation_gradient",
    "energy_rate",
    "dissipation",
    "energy_curve",
    "kinetic_norm",
    "gaussian_interaction_energy",
    "gaussian_partition_function",
    "twisted_matrix",
    "energy_sign",
    "SignRuleSurvey",
    "sign_rule_survey",
    "twisted_wasserstein",
    "twisted_bures_wasserstein",
    "sinkhorn_energy",
    "sinkhorn_energy_gradient",
    "sinkhorn_energy_empirical",
    "bw_gradient_velocity",
    "finite_difference_gradient",
    "bw_gradient_mismatch",
    "gaussian_slope",
    "second_variation",
    "energy_along",
    "dirac_second_variation",
    "gaussian_translation_hessian",
    "circle_clusters",
    "Equilibrium",
    "linearize",
    "Plateau",
    "metastable_plateaus",
    "curvature_along_flow",
    "DescentProfile",
    "descent_profile",
    "gaussian_descent_profile",
    "EnergyCurves",
    "gaussian_energy_curves",
]

_LOG_MAX = 700.0  # exp(700) ~ 1e304: above this a value is reported as an overflow

_PAPER1 = """\
Paper 1 (Castin et al., arXiv:2501.18322, second version): the gradient-flow viewpoint announced in its
summary, whose formulas are reconstructed in the book."""
_BOOK = "Book: ``chapters/03_gradient_flow.md``, "
_GAUSSIAN = r"""mean : array_like (d,)
    Mean :math:`\alpha` of the Gaussian :math:`N(\alpha,\Sigma)`.
cov : array_like (d, d)
    Its covariance :math:`\Sigma`, symmetric positive semi-definite (singular allowed)."""
_A_SINKHORN = r"""A : array_like (d, d)
    Symmetric score matrix: the transport cost is :math:`-\langle x,Ay\rangle`."""
_EPS = r"""eps : float
    Entropic regularisation :math:`\varepsilon>0` (default 1)."""

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    "paper1": _PAPER1,
    # the empirical measure mu = sum_i w_i delta_{x_i}
    "X": r"""X : array_like (n, d)
    Tokens :math:`x_i`, the atoms of :math:`\mu=\sum_iw_i\delta_{x_i}`.""",
    "weights": r"""weights : array_like (n,), optional
    Token masses :math:`w_i` (non-negative, summing to 1); None gives every token the mass :math:`1/n`.""",
    # a score matrix that need not be symmetric
    "A": r"""A : array_like (d, d)
    Score matrix in library convention, kernel :math:`e^{\langle x,Ay\rangle}` (a layer's ``beta * A``,
    see :func:`layer_matrices`); any square matrix.""",
    # the arguments of first_variation and first_variation_gradient
    "first_variation_args": r"""X : array_like (n, d)
    Tokens :math:`x_i` of :math:`\mu=\sum_iw_i\delta_{x_i}`.
A : array_like (d, d)
    Score matrix (library convention), symmetric or not: a non-symmetric ``A`` enters through
    :math:`\tfrac12(e^{\langle x,Ay\rangle}+e^{\langle y,Ax\rangle})`.
weights : array_like (n,), optional
    Token masses :math:`w_i` (summing to 1); None: uniform.
at : array_like (m, d), optional
    Points :math:`x` of evaluation; None: the tokens (m = n).""",
    # the gradient (g, G) of an energy at a Gaussian
    "gradient": r"""grad_mean : array_like (d,)
    :math:`g=\nabla_\alpha F` at the Gaussian.
grad_cov : array_like (d, d)
    :math:`G=\nabla_\Sigma F`, the symmetric gradient in the covariance.
cov : array_like (d, d)
    Covariance :math:`\Sigma` of the Gaussian (symmetric positive semi-definite).""",
    # a Gaussian N(mean, cov)
    "gaussian": _GAUSSIAN,
    # the symmetric score matrix and the regularisation of the Sinkhorn energy
    "A_sinkhorn": _A_SINKHORN,
    "eps": _EPS,
    # the arguments of sinkhorn_energy and sinkhorn_energy_gradient
    "sinkhorn_gaussian": "\n".join((_GAUSSIAN, _A_SINKHORN, _EPS)),
    "ref_energy": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-energy).",
    "ref_sign": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-sign-rule).",
    "ref_twisted": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-twisted).",
    "ref_hessian": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-hessian).",
    "ref_sinkhorn": _PAPER1
    + """
M. E. Sander, P. Ablin, M. Blondel, G. Peyré, *Sinkformers: Transformers with Doubly Stochastic Attention*,
AISTATS 2022. Book: ``chapters/03_gradient_flow.md``, section *Sinkhorn attention is a Bures–Wasserstein
gradient flow*, equation (eq-gf-sinkhorn-energy).""",
    "ref_bw": _PAPER1
    + """
R. Bhatia, T. Jain, Y. Lim, *On the Bures–Wasserstein distance between positive definite matrices*,
Expositiones Mathematicae 37 (2019). Book: ``chapters/03_gradient_flow.md``, section *Sinkhorn attention is
a Bures–Wasserstein gradient flow*, and equation (eq-gf-twisted).""",
}


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------


def _is_symmetric(A, tol: float = 1e-12) -> bool:
    return bool(np.max(np.abs(A - A.T)) <= tol * max(1.0, float(np.max(np.abs(A)))))


def _block_rows(n_rows: int, n_cols: int, matrices: int = 1) -> int:
    """Rows per block so that ``matrices`` blocks of (rows x n_cols) hold at most one n x n matrix."""
    cap = max(1, BLOCK_ENTRIES // max(1, matrices * n_cols))
    return max(1, min(n_rows, cap, -(-n_rows // matrices)))


def _exp_checked(logv: np.ndarray | float, what: str):
    if np.any(np.asarray(logv) > _LOG_MAX):
        raise NonFiniteError(
            f"{what} overflows float64 (its logarithm is {float(np.max(logv)):.4g}); use log=True or smaller scores"
        )
    return np.exp(logv)


@fill_doc(_DOC)
def layer_matrices(layer: Attention):
    r"""Score and value matrices :math:`(\beta A, V)` of a single-head layer, in library convention.

    The kernel of the layer is :math:`e^{\langle x,\beta Ay\rangle}`, so the energies of this module
    take ``A = layer.beta * layer.A``; paper 1's matrix is its transpose (equal when symmetric).

    Parameters
    ----------
    layer : Attention
        A layer with one head (``layer.n_heads == 1``); its kind does not matter.

    Returns
    -------
    A : numpy.ndarray (d, d)
        The score matrix ``layer.beta * layer.A[0]`` that the energies of this module take.
    V : numpy.ndarray (d, d)
        The value matrix ``layer.V[0]`` (not scaled by :math:`\beta`).

    Raises
    ------
    TypeError
        If ``layer`` is not an :class:`~tokendynamics.attention.Attention`.
    ValueError
        If the layer has more than one head (the gradient-flow statements are for one head).

    References
    ----------
    %(ref_energy)s
    """
    if not isinstance(layer, Attention):
        raise TypeError(f"layer must be an Attention, got {type(layer).__name__}")
    if layer.n_heads != 1:
        raise ValueError(f"the gradient-flow statements are for one head, got {layer.n_heads}")
    return layer.beta * layer.A[0], layer.V[0]


# ---------------------------------------------------------------------------------------------
# the interaction energy of weighted empirical measures
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def partition_function(X, A, weights=None, at=None, *, gradient: bool = False, log: bool = False):
    r"""Partition function :math:`Z_\mu(x)=\sum_j w_j e^{\langle x,Ax_j\rangle}` at the points ``at`` (default: the
    tokens).

    It is the normaliser of softmax attention (Castin et al., arXiv:2501.18322, softmax self-attention; library
    convention). With
    ``gradient=True`` also returns :math:`\nabla Z_\mu(x)=\sum_j w_jAx_j\,e^{\langle x,Ax_j\rangle}`;
    with ``log=True`` returns :math:`\log Z` and :math:`\nabla\log Z=\nabla Z/Z` instead (never
    overflows). For invertible :math:`A` the softmax field is
    :math:`\Gamma_\mu=VA^{-1}\nabla\log Z_\mu` (tested; paper 1 writes :math:`VA_1^{-\top}`).

    Parameters
    ----------
    %(X)s
    %(A)s
    %(weights)s
    at : array_like (m, d), optional
        Points :math:`x` where :math:`Z_\mu` is evaluated; None: at the tokens themselves (m = n).
    gradient : bool
        Also return the gradient in :math:`x` (default False).
    log : bool
        Return :math:`\log Z_\mu` (and :math:`\nabla\log Z_\mu`) instead of :math:`Z_\mu` (and
        :math:`\nabla Z_\mu`); computed by log-sum-exp, it does not overflow (default False).

    Returns
    -------
    Z : numpy.ndarray (m,)
        :math:`Z_\mu` at each point of ``at``, or :math:`\log Z_\mu` if ``log``. Returned alone when
        ``gradient`` is False.
    gradZ : numpy.ndarray (m, d)
        Only with ``gradient=True``, as the second item of the pair ``(Z, gradZ)``: row :math:`k` is
        :math:`\nabla Z_\mu` at the k-th point, or :math:`\nabla\log Z_\mu=\nabla Z_\mu/Z_\mu` if ``log``.

    Raises
    ------
    NonFiniteError
        If :math:`Z_\mu` overflows float64 when ``log`` is False.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), softmax self-attention and its normaliser; its second
    version's gradient-flow viewpoint, reconstructed in the book. Book: ``chapters/03_gradient_flow.md``,
    equations (eq-gf-energy) and (eq-gf-softmax-gradient).
    """
    X, w = validate_measure(X, weights)
    n, d = X.shape
    A = validate_square(A, "A", d)
    gradient, log = validate_flag(gradient, "gradient"), validate_flag(log, "log")
    P = X if at is None else validate_tokens(at, d, "at")
    m = P.shape[0]
    logZ = np.empty(m)
    G = np.zeros((m, d)) if gradient else None
    AX = X @ A.T  # rows A x_j
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    block = _block_rows(m, n)
    for start in range(0, m, block):
        rows = slice(start, min(m, start + block))
        S = P[rows] @ AX.T  # <x_i, A x_j>
        S += logw[None, :]
        top = S.max(axis=1, keepdims=True)
        S -= top
        np.exp(S, out=S)
        s = S.sum(axis=1)
        logZ[rows] = top[:, 0] + np.log(s)
        if G is not None:
            G[rows] = (S @ AX) / s[:, None]  # grad log Z
    if log:
        return (logZ, G) if gradient else logZ
    Z = _exp_checked(logZ, "the partition function Z_mu(x)")
    return (Z, G * Z[:, None]) if gradient else Z


@fill_doc(_DOC)
def interaction_energy(X, A, weights=None, *, log: bool = False) -> float:
    r"""Interaction energy :math:`E_A(\mu)=\tfrac12\sum_{i,j}w_iw_je^{\langle x_i,Ax_j\rangle}` of
    :math:`\mu=\sum_iw_i\delta_{x_i}`.

    Chapter 3 of the book, eq. (3.1): for symmetric :math:`A`, unnormalised attention with :math:`V=A` is the
    :math:`W_2` gradient ascent of :math:`E_A`, and softmax attention is a formal gradient flow of
    :math:`E_A` for a twisted, :math:`Z_\mu`-weighted metric (the book's eq. (3.2)). :math:`E_A=E_{A^\top}`.
    Computed by log-sum-exp over blocks of rows; ``log=True`` returns :math:`\log E_A`.

    Parameters
    ----------
    %(X)s
    %(A)s
    %(weights)s
    log : bool
        Return :math:`\log E_A(\mu)`, which never overflows, instead of :math:`E_A(\mu)` (default False).

    Returns
    -------
    float
        The energy :math:`E_A(\mu)`, or its logarithm if ``log``.

    Raises
    ------
    NonFiniteError
        If :math:`E_A` overflows float64 (use ``log=True``).

    References
    ----------
    %(ref_energy)s
    """
    X, w = validate_measure(X, weights)
    n, d = X.shape
    A = validate_square(A, "A", d)
    log = validate_flag(log, "log")
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    AX = X @ A.T
    parts = []
    block = _block_rows(n, n, matrices=2)  # logsumexp makes one temporary block
    for start in range(0, n, block):
        rows = slice(start, min(n, start + block))
        S = X[rows] @ AX.T
        S += logw[None, :]
        S += logw[rows, None]
        parts.append(logsumexp(S))
    logE = math.log(0.5) + float(logsumexp(parts))
    return logE if log else float(_exp_checked(logE, "the interaction energy E_A"))


@fill_doc(_DOC)
def first_variation(X, A, weights=None, at=None) -> np.ndarray:
    r"""First variation :math:`\frac{\delta E_A}{\delta\mu}(x)=\tfrac12\int\big(e^{\langle x,Ay\rangle}+e^{\langle
    y,Ax\rangle}\big)d\mu(y)`.

    For symmetric :math:`A` this is :math:`Z_\mu(x)` (chapter 3 of the book, eq. (3.1)). It is the derivative of
    the energy along mass perturbations:
    :math:`\frac{d}{dh}E_A(\mu+h\chi)|_{h=0}=\int\frac{\delta E_A}{\delta\mu}\,d\chi` for signed
    :math:`\chi` of zero mass (tested by finite differences on the weights).

    Parameters
    ----------
    %(first_variation_args)s

    Returns
    -------
    numpy.ndarray (m,)
        :math:`\frac{\delta E_A}{\delta\mu}` at each point of ``at`` (at the tokens, m = n, by default).

    Raises
    ------
    NonFiniteError
        If :math:`Z_\mu` (or, for a non-symmetric ``A``, the partition function of :math:`A^\top`) overflows
        float64 at one of the points.

    References
    ----------
    %(ref_energy)s
    """
    X, w = validate_measure(X, weights)
    A = validate_square(A, "A", X.shape[1])
    if _is_symmetric(A):
        return partition_function(X, A, w, at)
    return 0.5 * (partition_function(X, A, w, at) + partition_function(X, A.T, w, at))


@fill_doc(_DOC)
def first_variation_gradient(X, A, weights=None, at=None) -> np.ndarray:
    r"""Gradient :math:`\nabla_x\frac{\delta E_A}{\delta\mu}(x)=\tfrac12\int\big(Ay\,e^{\langle x,Ay\rangle}+A^\top
    y\,e^{\langle y,Ax\rangle}\big)d\mu(y)`, shape (m, d).

    For symmetric :math:`A`: :math:`\nabla Z_\mu(x)=\int Ay\,e^{\langle x,Ay\rangle}d\mu(y)`, the
    field of unnormalised attention with :math:`V=A` (chapter 3 of the book, eq. (3.1)). Moving token :math:`i`
    changes the energy at the rate :math:`\partial E_A/\partial x_i=w_i\nabla\frac{\delta E_A}{\delta\mu}(x_i)`
    (tested).

    Parameters
    ----------
    %(first_variation_args)s

    Returns
    -------
    numpy.ndarray (m, d)
        Row :math:`k` is the gradient :math:`\nabla_x\frac{\delta E_A}{\delta\mu}` at the k-th point of ``at``
        (of the tokens by default).

    Raises
    ------
    NonFiniteError
        If :math:`Z_\mu` overflows float64 at one of the points: the gradient is computed as
        :math:`Z_\mu\nabla\log Z_\mu` with the :math:`Z_\mu` of :func:`partition_function`.

    References
    ----------
    %(ref_energy)s
    """
    X, w = validate_measure(X, weights)
    A = validate_square(A, "A", X.shape[1])
    _, g = partition_function(X, A, w, at, gradient=True)
    if _is_symmetric(A):
        return g
    _, gt = partition_function(X, A.T, w, at, gradient=True)
    return 0.5 * (g + gt)


@fill_doc(_DOC)
def energy_rate(X, layer: Attention, weights=None, *, field=None) -> float:
    r"""Rate :math:`\frac{d}{dt}E_{\beta A}(\mu_t)=\int\langle\nabla\frac{\delta E}{\delta\mu},\Gamma_\mu\rangle\,d\mu`
    of the layer's own energy along its flow.

    :math:`\Gamma_\mu` is the core :func:`~tokendynamics.attention.velocity` of ``layer`` (or
    ``field``, an (n, d) array, if given). For softmax attention with symmetric invertible
    :math:`A` and :math:`M=VA^{-1}` this equals
    :math:`\int\langle\nabla Z_\mu,M\nabla Z_\mu\rangle/Z_\mu\,d\mu` (the sign rule, chapter 3 of the book, eq. (3.3)),
    whose
    sign is the sign rule of :func:`energy_sign`.

    Parameters
    ----------
    %(X)s
    layer : Attention
        Single-head layer (:func:`layer_matrices`) whose energy :math:`E_{\beta A}` is differentiated and, unless
        ``field`` is given, whose velocity moves the tokens.
    %(weights)s
    field : array_like (n, d), optional
        Velocity :math:`\Gamma_\mu(x_i)` at the tokens, used instead of recomputing the layer's velocity (e.g. one
        already computed); None: :func:`~tokendynamics.attention.velocity` of ``layer``.

    Returns
    -------
    float
        The rate :math:`\sum_iw_i\langle\nabla\frac{\delta E}{\delta\mu}(x_i),\Gamma_\mu(x_i)\rangle` at this
        configuration: positive if the flow raises the energy.

    References
    ----------
    %(ref_sign)s
    """
    A, _ = layer_matrices(layer)
    X, w = validate_measure(X, weights, layer.d)
    U = velocity(X, layer, w) if field is None else validate_finite_array(field, "field")
    if U.shape != X.shape:
        raise ValueError(f"field must have the shape of the tokens {X.shape}, got {U.shape}")
    g = first_variation_gradient(X, A, w)
    return float(np.sum(w * np.einsum("ij,ij->i", g, U)))


@fill_doc(_DOC)
def dissipation(X, A, V, weights=None, *, normalized: bool = True) -> float:
    r"""The sign-rule form of :math:`\frac{d}{dt}E_A(\mu_t)`: :math:`\int\langle\nabla Z_\mu,M\nabla
    Z_\mu\rangle\,Z_\mu^{-k}\,d\mu`, :math:`M=VA^{-1}`.

    :math:`k=1` for softmax (``normalized=True``), :math:`k=0` for unnormalised attention (chapter 3
    of the book, eq. (3.3)). Equals :func:`energy_rate` of the corresponding layer with score matrix ``A``
    (symmetric, invertible) and value ``V``; since
    :math:`\langle g,Mg\rangle=\tfrac12\langle g,(M+M^\top)g\rangle`, its sign follows
    :func:`energy_sign` whenever :math:`M+M^\top` is semi-definite.

    Parameters
    ----------
    %(X)s
    A : array_like (d, d)
        Symmetric invertible score matrix (library convention), as :func:`twisted_matrix` requires.
    V : array_like (d, d)
        Value matrix of the layer; with ``A`` it fixes :math:`M=VA^{-1}`.
    %(weights)s
    normalized : bool
        True (default): softmax attention, :math:`k=1`; False: unnormalised attention, :math:`k=0`.

    Returns
    -------
    float
        :math:`\sum_iw_i\langle\nabla Z_\mu(x_i),M\nabla Z_\mu(x_i)\rangle\,Z_\mu(x_i)^{-k}`, the rate
        :math:`\frac{d}{dt}E_A(\mu_t)` written in the form of the sign rule.

    Raises
    ------
    ValueError
        If ``A`` is not symmetric or not invertible.

    References
    ----------
    %(ref_sign)s
    """
    X, w = validate_measure(X, weights)
    A = validate_square(A, "A", X.shape[1])
    M = twisted_matrix(A, V)
    if validate_flag(normalized, "normalized"):
        _, g = partition_function(X, A, w, gradient=True, log=True)
        Z = partition_function(X, A, w)
        q = Z * np.einsum("ij,ij->i", g, g @ M.T)  # |grad Z|_M^2 / Z = Z |grad log Z|_M^2
    else:
        _, g = partition_function(X, A, w, gradient=True)
        q = np.einsum("ij,ij->i", g, g @ M.T)
    return float(np.sum(w * q))


@fill_doc(_DOC)
def energy_curve(Xs, A, weights=None) -> np.ndarray:
    r""":math:`E_A(\mu_t)` for a stack of token clouds ``Xs`` (m, n, d), e.g. ``Trajectory.X``.

    Parameters
    ----------
    Xs : array_like (m, n, d)
        The clouds :math:`X_t` at m stored times, each a set of n tokens.
    %(A)s
    weights : array_like (n,), optional
        Masses of the tokens, the same at every time (summing to 1); None: uniform.

    Returns
    -------
    numpy.ndarray (m,)
        :func:`interaction_energy` of each cloud, in the order of ``Xs``.

    Raises
    ------
    NonFiniteError
        If :math:`E_A(\mu_t)` of one of the clouds overflows float64 (:func:`interaction_energy` with
        ``log=True`` gives its logarithm).

    References
    ----------
    %(ref_energy)s
    """
    Xs = real_array(Xs, "Xs")
    if Xs.ndim != 3:
        raise ValueError(f"Xs must have shape (times, n, d), got {Xs.shape}")
    return np.array([interaction_energy(X, A, weights) for X in Xs])


@fill_doc(_DOC)
def kinetic_norm(U, weights=None, M=None) -> float:
    r"""Length element :math:`\big(\int\langle M^{-1}u,u\rangle d\mu\big)^{1/2}` of a velocity field in :math:`d_M`
    (:math:`M=I`: :math:`W_2`).

    ``U`` (n, d) holds the field at the tokens of :math:`\mu=\sum_iw_i\delta_{x_i}`. A flow
    :math:`\dot x=u(x)` moves :math:`\mu` at metric speed at most ``kinetic_norm(U, w, M)`` in
    :math:`d_M` (chapter 3 of the book, eq. (3.5), Benamou–Brenier form). The slope of an energy in :math:`d_M` is
    ``kinetic_norm(G @ M, w, M)`` with ``G`` the gradient of its first variation.

    Parameters
    ----------
    U : array_like (n, d)
        The velocity field :math:`u(x_i)` at the n tokens.
    weights : array_like (n,), optional
        Masses :math:`w_i` of the tokens (summing to 1); None: uniform.
    M : array_like (d, d), optional
        Symmetric positive definite matrix of :math:`d_M`; None: the identity, i.e. the :math:`W_2` norm.

    Returns
    -------
    float
        :math:`\big(\sum_iw_i\langle M^{-1}u_i,u_i\rangle\big)^{1/2}\ge0`, the metric speed of the field.

    References
    ----------
    %(ref_twisted)s
    """
    U = validate_finite_array(U, "U", ndim=2)
    w = validate_weights(weights, U.shape[0])
    w = np.full(U.shape[0], 1.0 / U.shape[0]) if w is None else w
    if M is None:
        q = np.einsum("ij,ij->i", U, U)
    else:
        M = validate_spd(M, "M", U.shape[1])
        q = np.einsum("ij,ij->i", U, np.linalg.solve(M, U.T).T)
    return float(math.sqrt(max(0.0, float(np.sum(w * q)))))


# ---------------------------------------------------------------------------------------------
# closed forms on Gaussians
# ---------------------------------------------------------------------------------------------


def _gaussian(mean, cov, d=None, names=("mean", "cov")):
    return validate_gaussian(mean, cov, d, mean_name=names[0], name=names[1])


def _log_energy_pieces(mean, cov, A):
    """(log E or +inf, the quadratic form G of log E in the mean, R, (I-K)^{-1}) for N(mean, cov)."""
    d = mean.shape[0]
    R = psd_sqrt(cov)
    Qm = A @ cov @ A.T
    K = R @ Qm @ R
    K = 0.5 * (K + K.T)
    IK = np.eye(d) - K
    lam = np.linalg.eigvalsh(IK)
    if lam[0] <= 1e-13:
        return math.inf, None, R, None
    IKinv = np.linalg.inv(IK)
    IKinv = 0.5 * (IKinv + IKinv.T)
    B = A + Qm  # b + Q alpha = (A + Q) alpha
    G = A + A.T + Qm + B.T @ R @ IKinv @ R @ B
    G = 0.5 * (G + G.T)
    logE = math.log(0.5) - 0.5 * float(np.sum(np.log(lam))) + 0.5 * float(mean @ G @ mean)
    return logE, G, R, IKinv


@fill_doc(_DOC)
def gaussian_interaction_energy(mean, cov, A, *, log: bool = False) -> float:
    r"""Closed form of :math:`E_A(N(\alpha,\Sigma))=\tfrac12\,\mathbb E\,e^{\langle x,Ay\rangle}`, :math:`x,y` i.i.d.
    :math:`N(\alpha,\Sigma)`.

    Integrating :math:`y` first, :math:`E_A=\tfrac12\mathbb E_x\exp(x^\top A\alpha+\tfrac12x^\top A\Sigma A^\top x)`,
    a Gaussian integral: with :math:`R=\Sigma^{1/2}` and :math:`K=RA\Sigma A^\top R`,

    .. math:: E_A = \tfrac12\det(I-K)^{-1/2}\exp\big(\tfrac12\alpha^\top G\alpha\big),\quad
              G = A+A^\top+A\Sigma A^\top+(A+A\Sigma A^\top)^\top R(I-K)^{-1}R(A+A\Sigma A^\top),

    finite iff :math:`K\prec I`; returns ``inf`` otherwise. For :math:`A=-I` this is
    :math:`\tfrac12\det(I-\Sigma^2)^{-1/2}\exp(-\alpha^\top(I+\Sigma)^{-1}\alpha)` (derived in
    chapter 3 of the book; tested against Monte Carlo). Singular :math:`\Sigma` allowed.

    Parameters
    ----------
    %(gaussian)s
    %(A)s
    log : bool
        Return :math:`\log E_A` instead of :math:`E_A` (default False).

    Returns
    -------
    float
        :math:`E_A(N(\alpha,\Sigma))`, or its logarithm if ``log``; ``inf`` in both cases when the Gaussian
        integral diverges (:math:`K\not\prec I`).

    Raises
    ------
    NonFiniteError
        If ``log`` is False and :math:`\log E_A>700`: the energy is finite but does not fit in float64.

    References
    ----------
    %(ref_energy)s
    """
    mean, cov = _gaussian(mean, cov)
    A = validate_square(A, "A", mean.shape[0])
    logE, _, _, _ = _log_energy_pieces(mean, cov, A)
    if log or logE == math.inf:
        return logE
    return float(_exp_checked(logE, "the Gaussian interaction energy"))


@fill_doc(_DOC)
def gaussian_partition_function(mean, cov, A, at, *, gradient: bool = False):
    r""":math:`Z_\mu(x)=\int e^{\langle x,Ay\rangle}dN(\alpha,\Sigma)(y)=\exp\big(\langle
    x,A\alpha\rangle+\tfrac12x^\top A\Sigma A^\top x\big)` at the points ``at`` (m, d).

    With ``gradient=True`` also returns :math:`\nabla\log Z=A\alpha+A\Sigma A^\top x`; then
    :math:`VA^{-1}\nabla\log Z=V(\alpha+\Sigma A^\top x)` is the softmax field of
    ``tokendynamics.gaussian.gaussian_velocity`` (the Gaussian ODE of chapter 2 of the book, library convention).

    Parameters
    ----------
    %(gaussian)s
    %(A)s
    at : array_like (m, d)
        Points :math:`x` where :math:`Z_\mu` is evaluated (required, unlike :func:`partition_function`).
    gradient : bool
        Also return :math:`\nabla\log Z_\mu` at those points (default False).

    Returns
    -------
    Z : numpy.ndarray (m,)
        :math:`Z_\mu` at each point of ``at``. Returned alone when ``gradient`` is False.
    grad_log_Z : numpy.ndarray (m, d)
        Only with ``gradient=True``, as the second item of ``(Z, grad_log_Z)``: row :math:`k` is
        :math:`A\alpha+A\Sigma A^\top x_k`, the gradient of :math:`\log Z_\mu` (not of :math:`Z_\mu`, unlike
        :func:`partition_function`).

    Raises
    ------
    NonFiniteError
        If :math:`\log Z_\mu(x_k)>700` at one of the points (the value does not fit in float64).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the Gaussian closure of softmax attention; its second version's
    gradient-flow viewpoint, reconstructed in the book. Book: ``chapters/03_gradient_flow.md``, equations
    (eq-gf-energy) and (eq-gf-softmax-gradient); ``chapters/02_gaussian_preservation.md``, equation (eq-gauss-odes).
    """
    mean, cov = _gaussian(mean, cov)
    d = mean.shape[0]
    A = validate_square(A, "A", d)
    P = validate_tokens(at, d, "at")
    Qm = A @ cov @ A.T
    logZ = P @ (A @ mean) + 0.5 * np.einsum("ij,jk,ik->i", P, Qm, P)
    Z = _exp_checked(logZ, "the Gaussian partition function")
    if not gradient:
        return Z
    return Z, (A @ mean)[None, :] + P @ Qm.T


@fill_doc(_DOC)
def gaussian_translation_hessian(mean, cov, A, w) -> float:
    r"""Closed-form second derivative :math:`\frac{d^2}{ds^2}E_A(N(\alpha+sw,\Sigma))|_{s=0}` (translations).

    :math:`\log E_A(N(\alpha,\Sigma))=c(\Sigma)+\tfrac12\alpha^\top G\alpha` is quadratic in the mean
    (see :func:`gaussian_interaction_energy`), so

    .. math:: \frac{d^2}{ds^2}E_A(N(\alpha+sw,\Sigma))\Big|_{s=0}=E_A\,\big[(w^\top G\alpha)^2+w^\top Gw\big].

    For :math:`A=-I`, :math:`G=-2(I+\Sigma)^{-1}`: negative along every :math:`w\perp G\alpha`, so in
    :math:`d\ge2` the energy is concave along some translation at every Gaussian (chapter 3 of the book, eq. (3.6)).

    Parameters
    ----------
    %(gaussian)s
    %(A)s
    w : array_like (d,)
        Direction :math:`w` of the translation :math:`\alpha\mapsto\alpha+sw` (the covariance is kept).

    Returns
    -------
    float
        :math:`E_A\,[(w^\top G\alpha)^2+w^\top Gw]`, the second derivative in :math:`s` at :math:`s=0`; negative
        where the energy is concave along :math:`w`. ``inf`` where the energy is infinite.

    Raises
    ------
    NonFiniteError
        If :math:`E_A(N(\alpha,\Sigma))` is finite but overflows float64.

    References
    ----------
    %(ref_hessian)s
    """
    mean, cov = _gaussian(mean, cov)
    A = validate_square(A, "A", mean.shape[0])
    w = validate_finite_array(w, "w")
    if w.shape != mean.shape:
        raise ValueError(f"w must have shape {mean.shape}, got {w.shape}")
    logE, G, _, _ = _log_energy_pieces(mean, cov, A)
    if logE == math.inf:
        return math.inf
    E = float(_exp_checked(logE, "the Gaussian interaction energy"))
    return E * (float(w @ G @ mean) ** 2 + float(w @ G @ w))


# ---------------------------------------------------------------------------------------------
# the twisted metric
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def twisted_matrix(A, V) -> np.ndarray:
    r"""The matrix :math:`M=VA^{-1}` that turns attention into a (twisted) gradient flow (chapter 3 of the book, eqs.
    (3.2)–(3.5)).

    ``A`` is the symmetric invertible score matrix (library convention, :math:`\beta A` for a
    layer), ``V`` the value matrix. Unnormalised attention is
    :math:`\Gamma_\mu=M\nabla\frac{\delta E_A}{\delta\mu}`, softmax attention
    :math:`\Gamma_\mu=M\nabla\frac{\delta E_A}{\delta\mu}/Z_\mu`, Sinkhorn attention
    :math:`\Gamma_\mu=-M\nabla\frac{\delta F_\varepsilon}{\delta\mu}`. When :math:`M` is symmetric
    and definite these are gradient flows for :math:`d_{\pm M}` (:func:`twisted_wasserstein`).
    For a non-symmetric :math:`A` in library convention the identity
    :math:`\Gamma^{\rm softmax}_\mu=VA^{-1}\nabla\log Z_\mu` still holds (paper 1: :math:`VA_1^{-\top}`),
    but there is no energy; this function requires :math:`A=A^\top`.

    Parameters
    ----------
    A : array_like (d, d)
        Symmetric invertible score matrix (library convention: :math:`\beta A` of a layer).
    V : array_like (d, d)
        Value matrix of the layer.

    Returns
    -------
    numpy.ndarray (d, d)
        :math:`M=VA^{-1}`, obtained by a linear solve (no explicit inverse).

    Raises
    ------
    ValueError
        If ``A`` is not symmetric, or is singular: smallest absolute eigenvalue at most
        :math:`10^{-12}\max(1,\|A\|_2)`.

    References
    ----------
    %(paper1)s
    Book: ``chapters/03_gradient_flow.md``, equations (eq-gf-softmax-gradient) and (eq-gf-twisted).
    """
    A = validate_symmetric(A)
    V = validate_square(V, "V", A.shape[0])
    lam = np.linalg.eigvalsh(A)
    if np.min(np.abs(lam)) <= 1e-12 * max(1.0, float(np.max(np.abs(lam)))):
        raise ValueError("A must be invertible to define M = V A^{-1}")
    return np.linalg.solve(A.T, V.T).T


@fill_doc(_DOC)
def energy_sign(A, V) -> int:
    r"""Sign rule (chapter 3 of the book, eq. (3.3)): the sign of :math:`\frac{d}{dt}E_A(\mu_t)` along softmax or
    unnormalised attention.

    :math:`\frac{d}{dt}E_A=\int\langle\nabla Z,M\nabla Z\rangle Z^{-k}d\mu` (:math:`k=1` softmax,
    :math:`k=0` unnormalised), :math:`M=VA^{-1}` (:func:`twisted_matrix`). Returns ``+1`` if
    :math:`M+M^\top\succeq0` (non-decreasing energy), ``-1`` if :math:`M+M^\top\preceq0`
    (non-increasing), ``0`` if :math:`M+M^\top` is indefinite (no rule).

    Parameters
    ----------
    A : array_like (d, d)
        Symmetric invertible score matrix of the energy :math:`E_A`.
    V : array_like (d, d)
        Value matrix of the attention layer whose flow moves the tokens.

    Returns
    -------
    int
        The predicted sign: ``+1``, ``-1`` or ``0``. Eigenvalues :math:`\lambda` of :math:`M+M^\top` with
        :math:`|\lambda|\le10^{-12}\max(1,\|M+M^\top\|_2)` count as zero, so :math:`M+M^\top=0` gives ``+1``.

    Raises
    ------
    ValueError
        If ``A`` is not symmetric or not invertible (from :func:`twisted_matrix`).

    References
    ----------
    %(ref_sign)s
    """
    M = twisted_matrix(A, V)
    lam = np.linalg.eigvalsh(M + M.T)
    tol = 1e-12 * max(1.0, float(np.max(np.abs(lam))))
    if lam[0] >= -tol:
        return 1
    if lam[-1] <= tol:
        return -1
    return 0


@dataclass(frozen=True, eq=False)
class SignRuleSurvey:
    r"""Random cases of the sign rule (:func:`sign_rule_survey`).

    Attributes
    ----------
    lam_min, lam_max : arrays (cases,)
        Smallest and largest eigenvalue of :math:`M+M^\top`, divided by its largest absolute eigenvalue.
    rate : array (cases,)
        :math:`\frac{d}{dt}E_A` from the core velocity (:func:`energy_rate`).
    formula : array (cases,)
        :func:`dissipation` (the sign-rule form of the same rate).
    predicted : array (cases,) of int
        :func:`energy_sign` (+1, -1, or 0 = no rule).
    scale : array (cases,)
        :math:`\tfrac12\|M+M^\top\|\int|\nabla Z_\mu|^2Z_\mu^{-k}d\mu`: the rate divided by it,
        :attr:`normalized_rate`, lies in :math:`[\lambda_{\min},\lambda_{\max}]` (normalised
        eigenvalues of :math:`M+M^\top`) — the quantitative form of the sign rule.
    kind : str
    """

    lam_min: np.ndarray
    lam_max: np.ndarray
    rate: np.ndarray
    formula: np.ndarray
    predicted: np.ndarray
    scale: np.ndarray
    kind: str

    @property
    def normalized_rate(self) -> np.ndarray:
        """Rate divided by :attr:`scale`; in [lam_min, lam_max]."""
        return self.rate / self.scale

    @property
    def agree(self) -> np.ndarray:
        """Cases with a rule (predicted != 0) whose computed rate has the predicted sign."""
        ruled = self.predicted != 0
        return np.sign(self.rate[ruled]) == self.predicted[ruled]

    @property
    def relative_gap(self) -> np.ndarray:
        """:math:`|\text{rate}-\text{formula}|/|\text{formula}|` per case."""
        return np.abs(self.rate - self.formula) / np.maximum(np.abs(self.formula), 1e-300)


@fill_doc(_DOC)
def sign_rule_survey(
    cases: int, *, n: int = 100, d: int = 2, scale: float = 0.7, spread: float = 0.7, seed=None, kind: str = "softmax"
) -> SignRuleSurvey:
    r"""Check the sign rule (the book's eq. (3.3)) on random layers and token clouds.

    Each case draws a symmetric :math:`A=U\operatorname{diag}(a)U^\top` (:math:`a_i\sim N(0,\text{scale}^2)`,
    :math:`U` Haar), a Gaussian :math:`V`, and :math:`n` tokens from :math:`N(0,\text{spread}^2I_d)`;
    it records :math:`\frac{d}{dt}E_A` computed with the core velocity of
    ``Attention(kind, A=A, V=V)`` (:func:`energy_rate`), the dissipation formula
    (:func:`dissipation`) and the predicted sign (:func:`energy_sign`).

    Parameters
    ----------
    cases : int
        Number of random cases (layers and clouds) to draw.
    n : int
        Tokens per case (default 100), with uniform masses.
    d : int
        Dimension of the tokens and matrices (default 2).
    scale : float
        Standard deviation of the eigenvalues :math:`a_i` of :math:`A` (default 0.7).
    spread : float
        Standard deviation of each token coordinate (default 0.7).
    seed : int or numpy.random.Generator, optional
        Seed of ``numpy.random.default_rng``; None draws fresh entropy (a different survey each call).
    kind : {"softmax", "unnormalized_softmax"}
        Attention of the random layers; the sign rule is stated for these two.

    Returns
    -------
    SignRuleSurvey
        One entry per case: normalised extreme eigenvalues of :math:`M+M^\top`, the computed rate, the formula,
        the predicted sign and the normalising scale.

    References
    ----------
    %(ref_sign)s
    """
    validate_choice(kind, "kind", ("softmax", "unnormalized_softmax"))  # the sign rule is stated for these two
    cases = validate_count(cases, "cases")
    n, d = validate_count(n, "n"), validate_count(d, "d")
    scale, spread = validate_positive(scale, "scale"), validate_positive(spread, "spread")
    rng = np.random.default_rng(seed)
    lo, hi, rate, formula, pred, norm = (np.empty(int(cases)) for _ in range(6))
    for c in range(int(cases)):
        U, _ = np.linalg.qr(rng.standard_normal((d, d)))
        a = scale * rng.standard_normal(d)
        A = (U * a) @ U.T
        A = 0.5 * (A + A.T)
        V = rng.standard_normal((d, d))
        X = spread * rng.standard_normal((n, d))
        M = twisted_matrix(A, V)
        lam = np.linalg.eigvalsh(M + M.T)
        lo[c], hi[c] = lam[0] / np.max(np.abs(lam)), lam[-1] / np.max(np.abs(lam))
        layer = Attention(kind, A=A, V=V)
        rate[c] = energy_rate(X, layer)
        formula[c] = dissipation(X, A, V, normalized=layer.kind.normalised)
        pred[c] = energy_sign(A, V)
        # V = A gives M = I: the dissipation is then int |grad Z|^2 Z^{-k} dmu
        norm[c] = 0.5 * np.max(np.abs(lam)) * dissipation(X, A, A, normalized=layer.kind.normalised)
    return SignRuleSurvey(
        lam_min=lo, lam_max=hi, rate=rate, formula=formula, predicted=pred.astype(int), scale=norm, kind=kind
    )


@fill_doc(_DOC)
def twisted_wasserstein(X, Y, M, weights=None, *, method: str = "exact") -> float:
    r"""Twisted Wasserstein distance :math:`d_M(\mu,\nu)` between weighted empirical measures (the book's eq. (3.5); the
    name is our reconstruction [I]).

    .. math:: d_M(\mu,\nu)^2=\min_{\pi\in\Pi(\mu,\nu)}\int\langle M^{-1}(x-y),x-y\rangle d\pi
              =W_2\big((M^{-1/2})_\#\mu,(M^{-1/2})_\#\nu\big)^2,

    :math:`M` symmetric positive definite. Computed as the second form with
    :func:`~tokendynamics.transport.wasserstein` (exact LP). Gradient flows for :math:`d_M` have
    velocity :math:`-M\nabla\frac{\delta F}{\delta\mu}`. ``weights`` is ``None`` or a pair.

    Parameters
    ----------
    X : array_like (n, d)
        Atoms of :math:`\mu`.
    Y : array_like (m, d)
        Atoms of :math:`\nu`, in the same dimension.
    M : array_like (d, d)
        Symmetric positive definite matrix of the metric.
    weights : None or (a, b)
        Masses of the atoms of :math:`\mu` and :math:`\nu` (uniform if None; either entry may be None), as in
        :func:`~tokendynamics.transport.wasserstein`.
    method : {"exact", "auto", "sliced"}
        Solver of :func:`~tokendynamics.transport.wasserstein` (default ``"exact"``, the linear program;
        ``"sliced"`` gives a different, smaller quantity).

    Returns
    -------
    float
        The distance :math:`d_M(\mu,\nu)` (not its square).

    References
    ----------
    %(ref_twisted)s
    """
    X = validate_tokens(X, name="X")
    Y = validate_tokens(Y, X.shape[1], "Y")
    M = validate_spd(M, "M", X.shape[1])
    R = np.linalg.inv(psd_sqrt(M))  # M^{-1/2}
    return wasserstein(X @ R, Y @ R, 2, weights, method=method)


@fill_doc(_DOC)
def twisted_bures_wasserstein(m1, S1, m2, S2, M) -> float:
    r""":math:`d_M` between Gaussians: the Bures–Wasserstein distance of the :math:`M^{-1/2}`-transformed Gaussians.

    .. math:: d_M\big(N(m_1,\Sigma_1),N(m_2,\Sigma_2)\big)
              =W_2\big(N(M^{-1/2}m_1,M^{-1/2}\Sigma_1M^{-1/2}),N(M^{-1/2}m_2,M^{-1/2}\Sigma_2M^{-1/2})\big)

    (the book's eq. (3.5)), through :func:`~tokendynamics.transport.bures_wasserstein`.

    Parameters
    ----------
    m1, S1 : array_like (d,) and (d, d)
        Mean and covariance (symmetric positive semi-definite) of the first Gaussian.
    m2, S2 : array_like (d,) and (d, d)
        Mean and covariance of the second Gaussian, in the same dimension.
    M : array_like (d, d)
        Symmetric positive definite matrix of the metric (the identity gives Bures–Wasserstein).

    Returns
    -------
    float
        The distance :math:`d_M` between the two Gaussians (not its square).

    References
    ----------
    %(ref_twisted)s
    """
    m1, S1 = _gaussian(m1, S1, names=("m1", "S1"))
    m2, S2 = _gaussian(m2, S2, m1.shape[0], names=("m2", "S2"))
    M = validate_spd(M, "M", m1.shape[0])
    R = np.linalg.inv(psd_sqrt(M))
    return bures_wasserstein(R @ m1, R @ S1 @ R, R @ m2, R @ S2 @ R)


# ---------------------------------------------------------------------------------------------
# the Sinkhorn entropic energy
# ---------------------------------------------------------------------------------------------


def _sinkhorn_spectrum(mean, cov, A, eps):
    """The Gaussian and (A, eps) validated, and the spectrum of the Sinkhorn energy on N(mean, cov).

    Returns (mean, A, eps, R, U, s): R = cov^{1/2}, s_i = sqrt(1 + 4 h_i / eps^2) with h_i, U the
    eigen-decomposition of H = R A cov A R. The same spectral computation as the Sinkhorn Gaussian ODE
    (:func:`tokendynamics.gaussian.sinkhorn_spectrum` with the kernel matrix A / eps).
    """
    mean, cov = _gaussian(mean, cov)
    A = validate_symmetric(A, d=mean.shape[0])
    eps = _check_eps(eps)
    R = psd_sqrt(cov)
    s, U = sinkhorn_spectrum(R, cov, A / eps)
    return mean, A, eps, R, U, s


def _check_eps(eps) -> float:
    return validate_positive(eps, "eps")


@fill_doc(_DOC)
def sinkhorn_energy(mean, cov, A, eps: float = 1.0) -> float:
    r"""Closed form of the Sinkhorn energy
    :math:`F_\varepsilon(N(\alpha,\Sigma))=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)`, cost :math:`-\langle
    x,Ay\rangle`.

    .. math:: F_\varepsilon(\alpha,\Sigma)=-\tfrac12\alpha^\top A\alpha-\frac\varepsilon4\sum_{i=1}^d
              \Big[s_i-1-\log\frac{1+s_i}{2}\Big],\quad s_i=\sqrt{1+4h_i/\varepsilon^2},\
              h_i=\operatorname{eig}_i\big(\Sigma^{1/2}A\Sigma A\Sigma^{1/2}\big)

    (Sander et al. 2022; the book's eq. (3.4); :math:`A` symmetric). Mapping to the library: the layer
    ``Attention("sinkhorn", A=A, V=V, eps=eps)`` (``beta=1``; in general the cost matrix is
    ``beta * A``) is the :math:`W_2` gradient flow of this :math:`F_\varepsilon` when :math:`V=A`,
    and the :math:`d_M` gradient flow when :math:`V=MA` (chapter 3 of the book).

    Parameters
    ----------
    %(sinkhorn_gaussian)s

    Returns
    -------
    float
        :math:`F_\varepsilon(N(\alpha,\Sigma))`, finite for every Gaussian (unlike
        :func:`gaussian_interaction_energy`, which can be ``inf``).

    Raises
    ------
    ValueError
        If ``A`` is not symmetric or ``eps`` is not positive.

    References
    ----------
    %(ref_sinkhorn)s
    """
    mean, A, eps, _, _, s = _sinkhorn_spectrum(mean, cov, A, eps)
    return float(-0.5 * mean @ A @ mean - 0.25 * eps * np.sum(s - 1.0 - np.log((1.0 + s) / 2.0)))


@fill_doc(_DOC)
def sinkhorn_energy_gradient(mean, cov, A, eps: float = 1.0):
    r"""Gradient :math:`(\nabla_\alpha F_\varepsilon,\nabla_\Sigma F_\varepsilon)` of :func:`sinkhorn_energy` (symmetric
    :math:`\nabla_\Sigma`).

    .. math:: \nabla_\alpha F_\varepsilon=-A\alpha,\qquad
              \nabla_\Sigma F_\varepsilon=-\frac1{2\varepsilon}\,A\Sigma^{1/2}X\Sigma^{1/2}A,\quad
              X=2\big(I+(I+4H/\varepsilon^2)^{1/2}\big)^{-1},\ H=\Sigma^{1/2}A\Sigma A\Sigma^{1/2},

    derived here (spectral calculus; :math:`-2\nabla_\Sigma F\,\Sigma=AC^\top` with :math:`C` the
    cross-covariance of the entropic self-plan, the Sinkhorn Gaussian ODE of chapter 2 of the book) and tested against
    finite
    differences. No inverse of :math:`\Sigma` or :math:`A` is needed.

    Parameters
    ----------
    %(sinkhorn_gaussian)s

    Returns
    -------
    grad_mean : numpy.ndarray (d,)
        :math:`\nabla_\alpha F_\varepsilon=-A\alpha`.
    grad_cov : numpy.ndarray (d, d)
        :math:`\nabla_\Sigma F_\varepsilon`, exactly symmetric: with :math:`g,G` the two items,
        :math:`dF_\varepsilon=\langle g,d\alpha\rangle+\operatorname{tr}(G\,d\Sigma)`.

    References
    ----------
    %(ref_sinkhorn)s
    """
    mean, A, eps, R, U, s = _sinkhorn_spectrum(mean, cov, A, eps)
    X = (U * (2.0 / (1.0 + s))) @ U.T
    G = -(0.5 / eps) * (A @ R @ X @ R @ A)
    return -A @ mean, 0.5 * (G + G.T)


@fill_doc(_DOC)
def sinkhorn_energy_empirical(
    X, A, eps: float = 1.0, weights=None, *, max_iter: int = SINKHORN_ITERS, tol: float = SINKHORN_TOL
) -> float:
    r""":math:`F_\varepsilon(\mu)=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)=\tfrac12\big(\int f\,d\mu+\int g\,d\mu\big)`
    for :math:`\mu=\sum_iw_i\delta_{x_i}`.

    :math:`\mathrm{OT}_\varepsilon(\mu,\mu)=\min_\pi\int-\langle x,Ay\rangle
    d\pi+\varepsilon\,\mathrm{KL}(\pi|\mu\otimes\mu)`;
    at the optimum the dual value is :math:`\int f+\int g` with the potentials of the core's log-domain
    Sinkhorn (:func:`~tokendynamics.transport.sinkhorn_potentials`, the same solver as Sinkhorn
    attention). Its gradient in token :math:`i` is :math:`-w_i\Gamma_\mu(x_i)` for the Sinkhorn layer
    with :math:`V=A` (Sander et al. 2022; tested).

    ``tol`` and ``max_iter`` default to those of Sinkhorn attention
    (:data:`~tokendynamics.attention.SINKHORN_TOL`, :data:`~tokendynamics.attention.SINKHORN_ITERS`).

    Parameters
    ----------
    %(X)s
    %(A_sinkhorn)s
    %(eps)s
    %(weights)s
    max_iter : int
        Largest number of Sinkhorn iterations.
    tol : float
        Tolerance on the column-marginal error of the plan at which Sinkhorn stops.

    Returns
    -------
    float
        :math:`\tfrac12\sum_iw_i\big(f(x_i)+g(x_i)\big)`, the value of :math:`F_\varepsilon(\mu)` from the dual
        potentials.

    Raises
    ------
    ConvergenceError
        If Sinkhorn does not reach ``tol`` within ``max_iter`` iterations (the message gives the
        error reached and what to change).

    References
    ----------
    %(paper1)s
    M. E. Sander, P. Ablin, M. Blondel, G. Peyré, *Sinkformers: Transformers with Doubly Stochastic Attention*,
    AISTATS 2022. Book: ``chapters/03_gradient_flow.md``, section *Sinkhorn attention is a Bures–Wasserstein
    gradient flow* (on Gaussians this energy is equation (eq-gf-sinkhorn-energy)).
    """
    X, w = validate_measure(X, weights)
    A = validate_symmetric(A, d=X.shape[1])
    eps = _check_eps(eps)
    max_iter = validate_count(max_iter, "max_iter")
    tol = validate_positive(tol, "tol")
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    logK = (X @ A) @ X.T / eps
    f, g, it, err = sinkhorn_potentials(logK, logw, eps=eps, max_iter=max_iter, tol=tol)
    if not err <= tol:
        raise ConvergenceError(
            f"Sinkhorn did not reach tol = {tol:.3g} in {it} iterations: the column-marginal error reached is "
            f"{err:.3g} (eps = {eps:g}). Raise max_iter, loosen tol, or raise eps (convergence slows down like "
            "exp(-score range / eps))"
        )
    return float(0.5 * (w @ f + w @ g))


def _gradient_data(grad_mean, grad_cov, cov, M):
    """Validated (g, G, Sigma, M) of a Bures–Wasserstein gradient: M = I when None."""
    g = validate_finite_array(grad_mean, "grad_mean", ndim=1)
    d = g.shape[0]
    G = validate_symmetric(grad_cov, "grad_cov", d)
    S = validate_covariance(cov, "cov", d)
    return g, G, S, np.eye(d) if M is None else validate_spd(M, "M", d)


@fill_doc(_DOC)
def bw_gradient_velocity(grad_mean, grad_cov, cov, M=None):
    r"""Velocity :math:`(\dot\alpha,\dot\Sigma)` of the (twisted) Bures–Wasserstein gradient flow of an energy on
    Gaussians.

    For :math:`F(\alpha,\Sigma)` with gradient :math:`(g,G)` (``G`` symmetric) the first variation
    restricted to Gaussians is :math:`\langle g,x\rangle+\langle x-\alpha,G(x-\alpha)\rangle`, so the
    :math:`d_M` gradient flow moves tokens with :math:`-M(g+2G(x-\alpha))` and

    .. math:: \dot\alpha=-Mg,\qquad\dot\Sigma=-2\big(MG\Sigma+\Sigma GM\big)

    (chapter 3 of the book; :math:`M=I` by default: the Bures–Wasserstein flow).

    Parameters
    ----------
    %(gradient)s
    M : array_like (d, d), optional
        Symmetric positive definite matrix of the metric :math:`d_M` whose gradient flow is returned; None:
        :math:`M=I`, the Bures–Wasserstein flow.

    Returns
    -------
    mean_dot : numpy.ndarray (d,)
        :math:`\dot\alpha=-Mg`.
    cov_dot : numpy.ndarray (d, d)
        :math:`\dot\Sigma=-2(MG\Sigma+\Sigma GM)`, exactly symmetric.

    References
    ----------
    %(ref_bw)s
    """
    g, G, S, M = _gradient_data(grad_mean, grad_cov, cov, M)
    MGS = M @ G @ S
    return -M @ g, -2.0 * (MGS + MGS.T)


@fill_doc(_DOC)
def finite_difference_gradient(fun: Callable, mean, cov, h: float = 1e-5):
    r"""Central finite-difference gradient :math:`(\nabla_\alpha F,\nabla_\Sigma F)` of ``fun(mean, cov)``.

    The symmetric gradient is taken in the coordinates :math:`\Sigma\mapsto\Sigma+t(E_{ij}+E_{ji})/2`
    (:math:`t\,E_{ii}` on the diagonal), so that :math:`dF=\langle g,d\alpha\rangle+\operatorname{tr}(G\,d\Sigma)`.
    Needs :math:`\Sigma\succ hI` (the perturbed matrices must stay PSD). Used to check the
    Sinkhorn ODE against the gradient of :math:`F_\varepsilon` without trusting any derived gradient.

    Parameters
    ----------
    fun : callable
        ``fun(mean, cov) -> float``, the energy :math:`F` on Gaussians; called :math:`2d+d(d+1)` times.
    mean : array_like (d,)
        Mean :math:`\alpha` of the Gaussian where the gradient is taken.
    cov : array_like (d, d)
        Its covariance :math:`\Sigma`, symmetric with eigenvalues above :math:`2h` (the perturbed matrices must
        stay positive semi-definite).
    h : float
        Step of the central differences (default :math:`10^{-5}`); the error is :math:`O(h^2)`.

    Returns
    -------
    g : numpy.ndarray (d,)
        :math:`\nabla_\alpha F` at ``(mean, cov)``.
    G : numpy.ndarray (d, d)
        The symmetric gradient :math:`\nabla_\Sigma F`.

    Raises
    ------
    TypeError
        If ``fun`` is not callable.
    ValueError
        If the smallest eigenvalue of ``cov`` is at most :math:`2h`.

    References
    ----------
    %(ref_bw)s
    """
    if not callable(fun):
        raise TypeError(f"fun must be a callable fun(mean, cov), got {type(fun).__name__}")
    mean, cov = _gaussian(mean, cov)
    h = validate_positive(h, "h")
    if np.linalg.eigvalsh(cov)[0] <= 2 * h:
        raise ValueError(
            f"finite differences need cov > {2 * h:g} I; its smallest eigenvalue is {np.linalg.eigvalsh(cov)[0]:.3g}"
        )
    d = mean.shape[0]
    g = np.zeros(d)
    G = np.zeros((d, d))
    for i in range(d):
        e = np.zeros(d)
        e[i] = h
        g[i] = (fun(mean + e, cov) - fun(mean - e, cov)) / (2 * h)
    for i in range(d):
        for j in range(i, d):
            E = np.zeros((d, d))
            E[i, j] += 0.5 * h
            E[j, i] += 0.5 * h
            G[i, j] = G[j, i] = (fun(mean, cov + E) - fun(mean, cov - E)) / (2 * h)
    return g, G


@fill_doc(_DOC)
def bw_gradient_mismatch(traj, energy: Callable, M=None, *, h: float = 1e-5):
    r"""Distance between a Gaussian trajectory's ODE velocity and the (twisted) BW gradient of ``energy``, at every
    stored time.

    At each :math:`(\alpha_t,\Sigma_t)` of the ``tokendynamics.gaussian.GaussianTrajectory``,
    the gradient of ``energy(mean, cov)`` is taken by :func:`finite_difference_gradient` (step ``h``)
    and turned into :math:`(\dot\alpha,\dot\Sigma)` by :func:`bw_gradient_velocity`; it is compared
    with ``tokendynamics.gaussian.gaussian_rhs`` of the trajectory's layer.

    Parameters
    ----------
    traj : GaussianTrajectory
        Result of ``tokendynamics.gaussian.solve_gaussian`` for a constant
        :class:`~tokendynamics.attention.Attention` layer (e.g. Sinkhorn with :math:`V=MA`).
    energy : callable
        ``energy(mean, cov) -> float``, e.g. :func:`sinkhorn_energy` with :math:`A,\varepsilon` fixed.
    M : array_like (d, d), optional
        Symmetric positive definite matrix of the twisted metric :math:`d_M`; None: Bures–Wasserstein.
    h : float
        Finite-difference step of :func:`finite_difference_gradient` (default :math:`10^{-5}`); every stored
        covariance must exceed :math:`2hI`.

    Returns
    -------
    error : numpy.ndarray (m,)
        At each of the m stored times, the largest absolute entry of the difference between the ODE velocity
        :math:`(\dot\alpha,\dot\Sigma)` and the gradient-flow velocity.
    size : numpy.ndarray (m,)
        At the same times, the largest absolute entry of the ODE velocity, a scale for ``error``.

    Raises
    ------
    TypeError
        If ``traj`` is not a ``GaussianTrajectory`` of a constant Attention layer.

    References
    ----------
    %(ref_bw)s
    """

    validate_instance(traj, GaussianTrajectory, "traj", "a GaussianTrajectory (the result of solve_gaussian)")
    layer = traj.layer
    if not isinstance(layer, Attention):
        raise TypeError("bw_gradient_mismatch needs a trajectory of a constant Attention layer")
    err, size = np.empty(len(traj.t)), np.empty(len(traj.t))
    for k, (a, S) in enumerate(zip(traj.mean, traj.cov)):
        dm, dS = gaussian_rhs(a, S, layer)
        grad_mean, grad_cov = finite_difference_gradient(energy, a, S, h)
        vm, vS = bw_gradient_velocity(grad_mean, grad_cov, S, M)
        err[k] = max(float(np.max(np.abs(dm - vm))), float(np.max(np.abs(dS - vS))))
        size[k] = max(float(np.max(np.abs(dm))), float(np.max(np.abs(dS))))
    return err, size


@fill_doc(_DOC)
def gaussian_slope(grad_mean, grad_cov, cov, M=None) -> float:
    r"""Slope of an energy at :math:`N(\alpha,\Sigma)` in :math:`d_M`: :math:`\big(g^\top
    Mg+4\operatorname{tr}(GMG\Sigma)\big)^{1/2}`.

    The :math:`L^2_M(\mu)` norm of :math:`M\nabla\frac{\delta F}{\delta\mu}=M(g+2G(x-\alpha))`; along
    the :math:`d_M` gradient flow :math:`\frac{d}{dt}F=-\text{slope}^2` and the metric speed equals
    the slope. :math:`M=I`: Bures–Wasserstein.

    Parameters
    ----------
    %(gradient)s
    M : array_like (d, d), optional
        Symmetric positive definite matrix of the metric :math:`d_M` in which the slope is measured; None:
        :math:`M=I`, the Bures–Wasserstein slope.

    Returns
    -------
    float
        The slope :math:`\big(g^\top Mg+4\operatorname{tr}(GMG\Sigma)\big)^{1/2}\ge0`: the largest rate of
        decrease of :math:`F` per unit :math:`d_M`-speed.

    References
    ----------
    %(ref_bw)s
    """
    g, G, S, M = _gradient_data(grad_mean, grad_cov, cov, M)
    return float(math.sqrt(max(0.0, float(g @ M @ g) + 4.0 * float(np.trace(G @ M @ G @ S)))))


# ---------------------------------------------------------------------------------------------
# second variation and non-convexity
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def second_variation(X, U, A, weights=None) -> float:
    r"""Second variation of :math:`E_A` along :math:`\mu_s=(\mathrm{Id}+s\,u)_\#\mu` at :math:`s=0`,
    :math:`\mu=\sum_iw_i\delta_{x_i}`.

    .. math:: \frac{d^2}{ds^2}E_A(\mu_s)\Big|_{s=0}=\tfrac12\sum_{i,j}w_iw_je^{\langle x_i,Ax_j\rangle}
              \Big[\big(\langle u_i,Ax_j\rangle+\langle x_i,Au_j\rangle\big)^2+2\langle u_i,Au_j\rangle\Big]

    (chapter 3 of the book, eq. (3.6), written for any :math:`A` in library convention; for symmetric :math:`A`
    it is the Hessian :math:`\mathrm{Hess}\,E_A(\mu)[w,w]`). ``U`` (n, d) is the displacement
    :math:`u(x_i)`. Tested against a finite-difference second derivative of :func:`energy_along`.
    Blocks of at most a third of the rows keep the three kernel blocks alive at a time below one
    :math:`n\times n` matrix.

    Parameters
    ----------
    %(X)s
    U : array_like (n, d)
        Displacement field :math:`u(x_i)` at the tokens: the direction of the perturbation.
    %(A)s
    %(weights)s

    Returns
    -------
    float
        :math:`\frac{d^2}{ds^2}E_A(\mu_s)` at :math:`s=0`; a negative value means :math:`E_A` is concave along
        this displacement.

    Raises
    ------
    NonFiniteError
        If a score :math:`\langle x_i,Ax_j\rangle` exceeds 700 (the result would overflow float64).

    References
    ----------
    %(ref_hessian)s
    """
    X, w = validate_measure(X, weights)
    n, d = X.shape
    U = real_array(U, "U")
    if U.shape != X.shape or not np.all(np.isfinite(U)):
        raise ValueError(f"U must be a finite array of the tokens' shape {X.shape}, got {U.shape}")
    A = validate_square(A, "A", d)
    AX, AU = X @ A.T, U @ A.T  # rows A x_j, A u_j
    block = _block_rows(n, n, matrices=3)
    top = -np.inf
    for start in range(0, n, block):  # global shift of the exponent
        rows = slice(start, min(n, start + block))
        top = max(top, float(np.max(X[rows] @ AX.T)))
    total = 0.0
    for start in range(0, n, block):
        rows = slice(start, min(n, start + block))
        Kb = X[rows] @ AX.T
        Kb -= top
        np.exp(Kb, out=Kb)
        Kb *= w[rows, None]
        Kb *= w[None, :]
        Pb = U[rows] @ AX.T  # <u_i, A x_j>
        Pb += X[rows] @ AU.T  # <x_i, A u_j> (third block, temporary)
        np.square(Pb, out=Pb)
        Tb = U[rows] @ AU.T  # <u_i, A u_j>
        Tb *= 2.0
        Pb += Tb
        del Tb
        total += float(np.einsum("ij,ij->", Kb, Pb))
    if top > _LOG_MAX:
        raise NonFiniteError(f"the second variation overflows float64 (largest score {top:.4g})")
    return 0.5 * total * math.exp(top)


@fill_doc(_DOC)
def energy_along(X, U, A, s, weights=None) -> np.ndarray:
    r""":math:`E_A\big((\mathrm{Id}+s\,u)_\#\mu\big)` for every ``s`` in the array ``s``.

    Translations: ``U`` constant; dilations: ``U = X - c``.

    Parameters
    ----------
    %(X)s
    U : array_like (n, d)
        The displacement :math:`u(x_i)` of each token; the tokens at parameter :math:`s` are ``X + s * U``.
    %(A)s
    s : float or array_like (k,)
        The parameters :math:`s` at which the energy is evaluated (a scalar counts as one).
    %(weights)s

    Returns
    -------
    numpy.ndarray (k,)
        :func:`interaction_energy` of the displaced tokens, one value per entry of ``s``.

    Raises
    ------
    NonFiniteError
        If :math:`E_A` of the displaced tokens overflows float64 for one of the ``s``.

    References
    ----------
    %(ref_hessian)s
    """
    X, w = validate_measure(X, weights)
    U = validate_finite_array(U, "U")
    if U.shape != X.shape:
        raise ValueError(f"U must have the tokens' shape {X.shape}, got {U.shape}")
    return np.array([interaction_energy(X + si * U, A, w) for si in np.atleast_1d(validate_finite_array(s, "s"))])


@fill_doc(_DOC)
def dirac_second_variation(x0, w0, A) -> float:
    r"""Closed form of the second variation at a Dirac mass :math:`\delta_{x_0}` along :math:`(\mathrm{Id}+s\,w)_\#`,
    :math:`w(x_0)=w_0`.

    .. math::

       \tfrac12e^{\langle x_0,Ax_0\rangle}\big[(\langle w_0,Ax_0\rangle+\langle x_0,Aw_0\rangle)^2
       +2\langle w_0,Aw_0\rangle\big];

    at :math:`\delta_0` this is :math:`\langle w_0,Aw_0\rangle`, i.e. :math:`-|w_0|^2<0` for
    :math:`A=-I` (chapter 3 of the book: :math:`E_{-I}` is not displacement convex at the clustered state).

    Parameters
    ----------
    x0 : array_like (d,)
        Position of the Dirac mass; a scalar is read as a point of :math:`\mathbb R^1`.
    w0 : array_like (d,)
        Displacement :math:`w(x_0)` of that single point: an array of shape (d,), also when :math:`d=1`.
    %(A)s

    Returns
    -------
    float
        The second derivative of :math:`s\mapsto E_A(\delta_{x_0+sw_0})=\tfrac12e^{\langle x_0+sw_0,A(x_0+sw_0)\rangle}`
        at :math:`s=0`.

    Raises
    ------
    NonFiniteError
        If :math:`e^{\langle x_0,Ax_0\rangle}` overflows float64.

    References
    ----------
    %(ref_hessian)s
    """
    x0 = np.atleast_1d(validate_finite_array(x0, "x0"))
    w0 = validate_finite_array(w0, "w0")
    A = validate_square(A, "A", x0.shape[0])
    if w0.shape != x0.shape:
        raise ValueError(f"w0 must have shape {x0.shape}, got {w0.shape}")
    q = float(x0 @ A @ x0)
    lin = float(w0 @ A @ x0 + x0 @ A @ w0)
    return 0.5 * float(_exp_checked(q, "the energy at the Dirac mass")) * (lin**2 + 2.0 * float(w0 @ A @ w0))


# ---------------------------------------------------------------------------------------------
# non-convexity: several equilibria, metastability, unbounded curvature
# ---------------------------------------------------------------------------------------------


def circle_clusters(k: int, masses=None, *, phase: float = 0.0):
    r"""``k`` clusters at equally spaced points of the unit circle: tokens :math:`x_p=(\cos\theta_p,\sin\theta_p)`,
    :math:`\theta_p=\text{phase}+2\pi p/k`.

    Each cluster is one token carrying the cluster's mass (default :math:`1/k` each), i.e. the
    measure :math:`\mu=\sum_pm_p\delta_{x_p}`. With equal masses and a layer invariant under
    rotations (softmax with :math:`A=V=I`), every such configuration is an equilibrium by symmetry:
    the field at each cluster points along the cluster itself, and its tangential part vanishes.

    Parameters
    ----------
    k : int
        Number of clusters (at least 1).
    masses : array (k,), optional
        Masses of the clusters (positive, summing to 1); equal by default.
    phase : float
        Angle of the first cluster.

    Returns
    -------
    X : array (k, 2)
        The cluster positions.
    weights : array (k,)
        Their masses.

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (the summary's link between non-convexity,
    several equilibria and metastability); Geshkovski, Letrouit, Polyanskiy, Rigollet, arXiv
    2312.10794 (clusters on the sphere); the book's chapter on the gradient-flow structure.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    k = int(k)
    theta = float(phase) + 2 * np.pi * np.arange(k) / k
    X = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    w = validate_weights(masses, k)
    return X, w


@dataclass(frozen=True)
class Equilibrium:
    r"""The linearised flow of a particle system at one configuration (:func:`linearize`).

    Attributes
    ----------
    speed : float
        :math:`\max_i|\Gamma_\mu(x_i)|` (tangential part on the sphere): 0 at an equilibrium.
    energy : float
        :math:`E_{\beta A}(\mu)=\frac12\sum_{i,j}w_iw_je^{\beta\langle x_i,Ax_j\rangle}` (:func:`interaction_energy`).
    eigenvalues : array
        Eigenvalues of the Jacobian of the flow, by decreasing real part. At an equilibrium a
        positive one is a direction along which perturbations grow (like :math:`e^{\lambda t}`).
    unstable : int
        Number of eigenvalues with real part above ``tol``.
    """

    speed: float
    energy: float
    eigenvalues: np.ndarray
    unstable: int

    @property
    def growth_rate(self) -> float:
        """The largest real part of the eigenvalues (the rate at which the fastest perturbation grows)."""
        return float(np.real(self.eigenvalues[0]))


def _tangent_basis(x: np.ndarray) -> np.ndarray:
    """An orthonormal basis (d, d - 1) of the tangent space x^perp of the unit sphere at x."""
    d = x.shape[0]
    if d == 2:
        return np.array([[-x[1]], [x[0]]])
    Q, _ = np.linalg.qr(np.column_stack([x, np.eye(d)]))
    return Q[:, 1:d]


def linearize(X, layer: Attention, weights=None, *, sphere: bool = False, h: float = 1e-6, tol: float = 1e-9):
    r"""Speed, energy and spectrum of the linearised particle flow at the configuration ``X``.

    The flow is :math:`\dot x_i=\Gamma_\mu(x_i)` (the core :func:`~tokendynamics.attention.velocity` of
    ``layer``, projected on the tangent space when ``sphere=True``), :math:`\mu=\sum_jw_j\delta_{x_j}`.
    Its Jacobian is taken by central differences of step ``h`` in local coordinates: the entries of
    the :math:`x_j` in :math:`\mathbb R^d` (an :math:`nd\times nd` matrix), or, on the sphere, the
    coordinates of each token in an orthonormal basis :math:`E_j` of its tangent space, moved along
    the great circles :math:`x_j\cos h\pm e\sin h` (an :math:`n(d-1)\times n(d-1)` matrix; in
    :math:`d=2` the token angles). At an equilibrium the spectrum does not depend on these choices.

    For softmax attention on the circle with :math:`A=V=I` the flow is a gradient ascent of
    :math:`E_\beta` (for a modified metric), so the eigenvalues are real, a positive one marks a saddle
    of the energy, and an equilibrium with a positive eigenvalue is unstable; for two antipodal
    clusters of mass :math:`\frac12` the positive eigenvalue is :math:`2/(1+e^{2\beta})` (tested).

    Parameters
    ----------
    X : array (n, d)
        Tokens (unit rows if ``sphere``).
    layer : Attention
        One layer (any kind the core velocity supports).
    weights : array (n,), optional
        Token masses (a cluster is one token carrying its mass).
    sphere : bool
        Tokens on the unit sphere.
    h : float
        Finite-difference step (error :math:`O(h^2)`).
    tol : float
        Eigenvalues with real part above ``tol`` count as unstable.

    Returns
    -------
    Equilibrium

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (non-convexity, several equilibria and
    metastability, in the paper's summary); the book's chapter on the gradient-flow structure.
    """
    if not isinstance(layer, Attention):
        raise TypeError(f"layer must be an Attention, got {type(layer).__name__}")
    X, w = validate_measure(X, weights, layer.d)
    n, d = X.shape
    if sphere and np.max(np.abs(np.linalg.norm(X, axis=1) - 1)) > 1e-9:
        raise ValueError("sphere=True needs unit-norm tokens")
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"h must be a positive step, got {h!r}")

    def field(Y):
        U = velocity(Y, layer, w)
        if sphere:
            U = U - np.sum(U * Y, axis=1, keepdims=True) * Y
        return U

    U0 = field(X)
    speed = float(np.max(np.linalg.norm(U0, axis=1)))
    if sphere:
        bases = [_tangent_basis(x) for x in X]
        m = d - 1
        J = np.zeros((n * m, n * m))
        for j in range(n):
            for k in range(m):
                e = bases[j][:, k]
                cols = []
                for sign in (1.0, -1.0):
                    Y = X.copy()
                    Y[j] = X[j] * math.cos(h) + sign * e * math.sin(h)
                    cols.append(field(Y))
                dU = (cols[0] - cols[1]) / (2 * h)
                J[:, j * m + k] = np.concatenate([bases[i].T @ dU[i] for i in range(n)])
    else:
        J = np.zeros((n * d, n * d))
        for j in range(n):
            for k in range(d):
                Yp, Ym = X.copy(), X.copy()
                Yp[j, k] += h
                Ym[j, k] -= h
                J[:, j * d + k] = ((field(Yp) - field(Ym)) / (2 * h)).reshape(-1)
    lam = np.linalg.eigvals(J)
    lam = lam[np.argsort(-lam.real, kind="stable")]
    if np.max(np.abs(lam.imag)) <= 1e-7 * max(1e-12, float(np.max(np.abs(lam)))):
        lam = lam.real
    energy = interaction_energy(X, layer.beta * layer.A[0], w) if layer.n_heads == 1 else float("nan")
    return Equilibrium(speed, energy, lam, int(np.sum(lam.real > tol)))


@dataclass(frozen=True)
class Plateau:
    r"""A stretch of a trajectory during which the number of clusters does not change (:func:`metastable_plateaus`).

    Attributes
    ----------
    clusters : int
        Number of clusters.
    start, stop : float
        First and last stored times of the stretch.
    energy : float
        Energy :math:`E_{\beta A}(\mu_t)` of the tokens at the middle of the stretch.
    centres : array (clusters, d)
        Cluster centres there (normalised means on the sphere, means in :math:`\mathbb R^d`).
    masses : array (clusters,)
        Their masses.
    state : Equilibrium
        :func:`linearize` of the collapsed configuration (each cluster one token carrying its mass):
        its speed is small and it has unstable directions when the plateau is a metastable state near
        a saddle of the energy.
    """

    clusters: int
    start: float
    stop: float
    energy: float
    centres: np.ndarray
    masses: np.ndarray
    state: Equilibrium

    @property
    def length(self) -> float:
        """Duration ``stop - start``."""
        return self.stop - self.start


def metastable_plateaus(
    t, Xs, layer: Attention, *, sphere: bool = True, threshold: float = 0.999, min_fraction: float = 0.05
) -> list[Plateau]:
    r"""The long stretches of a trajectory with a constant number of clusters, and the state they sit near.

    Clusters are counted at every stored time by :func:`~tokendynamics.metrics.detect_clusters` (tokens
    joined by chains of inner products above ``threshold``). A stretch lasting at least
    ``min_fraction`` of the run is a plateau; at its middle the tokens are collapsed to their
    cluster centres with the clusters' masses, and that configuration is linearised
    (:func:`linearize`). For softmax attention with :math:`A=V=I` on the circle at large :math:`\beta`
    the plateaus are metastable: near a configuration of a few clusters whose speed is tiny and
    which has unstable directions (a saddle of the energy), left only after a time of order
    :math:`1/\lambda` for its growth rate :math:`\lambda`.

    Parameters
    ----------
    t : array (m,)
        Stored times.
    Xs : array (m, n, d)
        Tokens at those times (e.g. ``Trajectory.t``, ``Trajectory.X``).
    layer : Attention
        The layer that moved them (uniform token masses).
    sphere : bool
        Tokens on the unit sphere (centres are normalised).
    threshold : float
        Inner-product threshold of the cluster detection (on the sphere).
    min_fraction : float
        Shortest plateau, as a fraction of the run's duration.

    Returns
    -------
    list of Plateau, in time order

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (non-convexity and metastability in the
    paper's summary); Geshkovski, Letrouit, Polyanskiy, Rigollet, arXiv 2312.10794 (metastable
    clusters); the book's chapter on the gradient-flow structure.
    """
    t = np.asarray(t, dtype=float)
    Xs = np.asarray(Xs, dtype=float)
    if Xs.ndim != 3 or t.shape != (Xs.shape[0],) or t.size < 2:
        raise ValueError(f"t (m,) and Xs (m, n, d) must match, got {t.shape} and {Xs.shape}")
    if not 0 < min_fraction < 1:
        raise ValueError(f"min_fraction must be in (0, 1), got {min_fraction!r}")
    counts = np.array([detect_clusters(X, threshold).n_clusters for X in Xs])
    edges = np.flatnonzero(np.diff(counts)) + 1
    starts, stops = np.r_[0, edges], np.r_[edges - 1, len(t) - 1]
    out = []
    n = Xs.shape[1]
    for a, b in zip(starts, stops):
        if t[b] - t[a] < min_fraction * (t[-1] - t[0]):
            continue
        mid = (a + b) // 2
        X = Xs[mid]
        report = detect_clusters(X, threshold)
        masses = np.array(report.sizes, dtype=float) / n
        centres = np.array([X[report.labels == c].mean(axis=0) for c in range(report.n_clusters)])
        if sphere:
            centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        energy = interaction_energy(X, layer.beta * layer.A[0])
        state = linearize(centres, layer, masses, sphere=sphere)
        out.append(Plateau(int(counts[a]), float(t[a]), float(t[b]), energy, centres, masses, state))
    return out


def curvature_along_flow(Xs, A, weights=None):
    r"""Squared slope, curvature and their ratio along the :math:`W_2` gradient ascent of :math:`E_A` (symmetric ``A``).

    For each cloud :math:`X_t` of ``Xs`` (times, n, d), with
    :math:`g_t=\nabla\frac{\delta E_A}{\delta\mu}` at the tokens (the field of unnormalised attention
    with :math:`V=A`, :func:`first_variation_gradient`):

    .. math:: S_t=\sum_iw_i|g_t(x_i)|^2,\qquad H_t=\frac{d^2}{ds^2}E_A\big((\mathrm{Id}+s\,g_t)_\#\mu_t\big)\Big|_{s=0},
              \qquad\kappa_t=H_t/S_t

    (:func:`second_variation`). Along that flow :math:`\frac{d}{dt}S_t=2H_t` exactly (tested): if the
    second variation had an upper bound, :math:`H\le\kappa_{\max}S`, the speed could grow at most
    like :math:`e^{\kappa_{\max}t}` and the tokens could not reach infinity in finite time. A
    finite-time blow-up of this flow therefore comes with :math:`\kappa_t\to\infty`: the energy has
    no upper bound on its curvature.

    Parameters
    ----------
    Xs : array (times, n, d)
        Token clouds along a trajectory (e.g. ``Trajectory.X``).
    A : array (d, d)
        Symmetric score matrix.
    weights : array (n,), optional
        Token masses.

    Returns
    -------
    S, H, kappa : arrays (times,)

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (the summary ties non-convexity to blow-up);
    the book's chapter on the gradient-flow structure.
    """
    Xs = np.asarray(Xs, dtype=float)
    if Xs.ndim != 3:
        raise ValueError(f"Xs must have shape (times, n, d), got {Xs.shape}")
    A = validate_symmetric(A, "A", Xs.shape[2])
    S, H = np.empty(len(Xs)), np.empty(len(Xs))
    for k, X in enumerate(Xs):
        X, w = validate_measure(X, weights)
        g = first_variation_gradient(X, A, w)
        S[k] = float(np.sum(w * np.einsum("ij,ij->i", g, g)))
        H[k] = second_variation(X, g, A, w)
    return S, H, H / S


# ---------------------------------------------------------------------------------------------
# is the flow a steepest descent for this metric? (energy decrease per unit length)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DescentProfile:
    r"""Energy decrease per unit length along a flow, measured in one metric (:math:`d_M`, or :math:`W_2` if ``M`` is
    None).

    Along a curve :math:`\mu_t` the energy can decrease at most at the rate
    :math:`\text{slope}(\mu_t)\times\text{speed}` (Cauchy–Schwarz in :math:`L^2_{M^{-1}}(\mu)`); the
    *efficiency* :math:`-\frac{d}{dt}E/(\text{speed}\cdot\text{slope})\le1` equals 1 exactly when
    the velocity is the steepest-descent direction of that metric, i.e. the flow is its gradient
    flow. Layer by layer, :math:`(E(\mu_k)-E(\mu_{k+1}))/(d(\mu_k,\mu_{k+1})\,\overline{\text{slope}}_k)`
    uses the exact distance between a layer's input and output measures and the mean of the input
    and output slopes (so that it is 1 up to :math:`O(\text{layer step}^2)` for a gradient flow).

    Attributes
    ----------
    t, energy, rate, speed, slope, efficiency : arrays (m,)
        At every stored time: the energy, its rate :math:`\frac{d}{dt}E`, the metric speed of the
        velocity field, the slope of the energy, and the instantaneous efficiency.
    layer_t, layer_drop, layer_distance, layer_efficiency : arrays (k,)
        For the layers :math:`[t_k,t_{k+1}]` that were measured: start time, energy decrease,
        distance between input and output, and the discrete efficiency.
    metric : str
        ``"W2"`` or ``"d_M"``.
    """

    t: np.ndarray
    energy: np.ndarray
    rate: np.ndarray
    speed: np.ndarray
    slope: np.ndarray
    efficiency: np.ndarray
    layer_t: np.ndarray
    layer_drop: np.ndarray
    layer_distance: np.ndarray
    layer_efficiency: np.ndarray
    metric: str


def _descent_profile(t, energy, rate, speed, slope, ks, dist, w2: bool) -> DescentProfile:
    """The profile of a flow from its energy, rate, speed and slope at the stored times and the
    distances between the stored times ``ks`` and ``ks + 1`` (its layers); ``w2``: measured in W2."""
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(speed * slope > 0, -rate / (speed * slope), 0.0)
    drop = energy[ks] - energy[ks + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = 0.5 * (slope[ks] + slope[ks + 1])  # slope at the layer's midpoint, to O(dt^2)
        leff = np.where(dist * mid > 0, drop / (dist * mid), 0.0)
    return DescentProfile(
        t=t,
        energy=energy,
        rate=rate,
        speed=speed,
        slope=slope,
        efficiency=eff,
        layer_t=t[ks],
        layer_drop=drop,
        layer_distance=dist,
        layer_efficiency=leff,
        metric="W2" if w2 else "d_M",
    )


@fill_doc(_DOC)
def descent_profile(traj, M=None, *, every: int = 1) -> DescentProfile:
    r"""Energy decrease per unit length of a particle :class:`~tokendynamics.particles.Trajectory`, for the layer's own
    energy.

    The energy is :math:`E_{\beta A}` (:func:`interaction_energy`) of the trajectory's single-head
    layer; the velocity is the core :func:`~tokendynamics.attention.velocity`; lengths are measured in
    :math:`d_M` (:func:`twisted_wasserstein`, :func:`kinetic_norm`) or :math:`W_2` (``M=None``). For
    unnormalised attention with :math:`A=-I` and value :math:`V\succ0` the flow is the
    :math:`d_V` gradient descent of :math:`E_{-I}` (the book's eq. (3.5)): efficiency 1 in :math:`d_V`, below 1
    in :math:`W_2`. ``every``: measure the distance of every k-th layer (one exact LP each).

    Parameters
    ----------
    traj : Trajectory
        Result of ``tokendynamics.particles.simulate`` for a constant single-head
        :class:`~tokendynamics.attention.Attention` layer; its stored times are the layers' boundaries.
    M : array_like (d, d), optional
        Symmetric positive definite matrix of the metric :math:`d_M`; None: :math:`W_2`.
    every : int
        Measure the exact distance of the layers :math:`[t_k,t_{k+1}]` with k a multiple of ``every``
        (default 1: all of them); the instantaneous quantities are computed at every stored time.

    Returns
    -------
    DescentProfile
        Energy, rate, speed, slope and efficiency at every stored time, and the layer-by-layer efficiency of the
        measured layers, in :math:`d_M` (``metric="d_M"``) or :math:`W_2` (``metric="W2"``).

    Raises
    ------
    TypeError
        If ``traj`` is not a :class:`~tokendynamics.particles.Trajectory`.

    References
    ----------
    %(paper1)s
    Book: ``chapters/03_gradient_flow.md``, section *The twisted Wasserstein distance*, equation (eq-gf-twisted).
    """
    validate_instance(traj, Trajectory, "traj", "a Trajectory (the result of simulate)")
    every = validate_count(every, "every")
    layer = traj.layer
    A, _ = layer_matrices(layer)
    w = traj.weights
    if M is not None:
        M = validate_spd(M, "M", traj.d)
    Ms = np.eye(traj.d) if M is None else M
    m = len(traj.t)
    energy, rate, speed, slope = (np.empty(m) for _ in range(4))
    for k, X in enumerate(traj.X):
        U = velocity(X, layer, w)
        g = first_variation_gradient(X, A, w)
        energy[k] = interaction_energy(X, A, w)
        rate[k] = energy_rate(X, layer, w, field=U)
        speed[k] = kinetic_norm(U, w, M)
        slope[k] = kinetic_norm(g @ Ms, w, M)
    ks = np.arange(0, m - 1, max(1, int(every)))
    pair = None if w is None else (w, w)
    dist = np.array([twisted_wasserstein(traj.X[k], traj.X[k + 1], Ms, pair) for k in ks])
    return _descent_profile(traj.t, energy, rate, speed, slope, ks, dist, M is None)


@fill_doc(_DOC)
def gaussian_descent_profile(traj, energy: Callable, gradient: Callable, M=None) -> DescentProfile:
    r"""The same as :func:`descent_profile` for a ``tokendynamics.gaussian.GaussianTrajectory`` and an energy on
    Gaussians.

    ``energy(mean, cov)`` and ``gradient(mean, cov) -> (g, G)`` (e.g. :func:`sinkhorn_energy` and
    :func:`sinkhorn_energy_gradient` with :math:`A,\varepsilon` fixed). The flow's field on
    :math:`N(\alpha,\Sigma)` is affine, :math:`\Gamma(x)=\Gamma(\alpha)+B(x-\alpha)`
    (``tokendynamics.gaussian.gaussian_velocity``), so in closed form
    :math:`\frac{d}{dt}F=\langle g,\Gamma(\alpha)\rangle+2\operatorname{tr}(GB\Sigma)`, speed
    :math:`^2=\Gamma(\alpha)^\top M^{-1}\Gamma(\alpha)+\operatorname{tr}(B^\top M^{-1}B\Sigma)` and the
    slope is :func:`gaussian_slope`. Each interval between stored times is a layer whose
    input/output distance is :func:`twisted_bures_wasserstein` (:math:`M=I`: Bures–Wasserstein).

    Parameters
    ----------
    traj : GaussianTrajectory
        Result of ``tokendynamics.gaussian.solve_gaussian`` for a constant
        :class:`~tokendynamics.attention.Attention` layer.
    energy : callable
        ``energy(mean, cov) -> float``, the energy :math:`F` whose descent is measured.
    gradient : callable
        ``gradient(mean, cov) -> (g, G)``: :math:`\nabla_\alpha F` (d,) and the symmetric
        :math:`\nabla_\Sigma F` (d, d).
    M : array_like (d, d), optional
        Symmetric positive definite matrix of the metric :math:`d_M`; None: Bures–Wasserstein (:math:`M=I`).

    Returns
    -------
    DescentProfile
        The closed-form rate, speed, slope and efficiency at every stored time, and every interval between
        stored times as a measured layer.

    Raises
    ------
    TypeError
        If ``traj`` is not a ``GaussianTrajectory`` of a constant Attention layer, or ``energy`` or
        ``gradient`` is not callable.

    References
    ----------
    %(ref_bw)s
    """

    validate_instance(traj, GaussianTrajectory, "traj", "a GaussianTrajectory (the result of solve_gaussian)")
    if not (callable(energy) and callable(gradient)):
        raise TypeError("energy and gradient must be callables of (mean, cov)")
    layer = traj.layer
    if not isinstance(layer, Attention):
        raise TypeError("gaussian_descent_profile needs a trajectory of a constant Attention layer")
    d = traj.mean.shape[1]
    Ms = np.eye(d) if M is None else validate_spd(M, "M", d)
    Minv = np.linalg.inv(Ms)
    m = len(traj.t)
    E, rate, speed, slope = (np.empty(m) for _ in range(4))
    for k, (a, S) in enumerate(zip(traj.mean, traj.cov)):
        b, B = gaussian_velocity(a, S, layer)
        ga = b + B @ a  # Gamma(alpha)
        g, G = gradient(a, S)
        E[k] = energy(a, S)
        rate[k] = float(g @ ga) + 2.0 * float(np.trace(G @ B @ S))
        speed[k] = math.sqrt(max(0.0, float(ga @ Minv @ ga) + float(np.trace(B.T @ Minv @ B @ S))))
        slope[k] = gaussian_slope(g, G, S, None if M is None else Ms)
    ks = np.arange(m - 1)
    dist = np.array(
        [twisted_bures_wasserstein(traj.mean[k], traj.cov[k], traj.mean[k + 1], traj.cov[k + 1], Ms) for k in ks]
    )
    return _descent_profile(traj.t, E, rate, speed, slope, ks, dist, M is None)


# ---------------------------------------------------------------------------------------------
# energy and distance curves along the Gaussian flow (chapter figures and the widget)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EnergyCurves:
    r"""Energy and distances along the softmax Gaussian flow :math:`N(\alpha_t,\Sigma_t)`.

    Attributes
    ----------
    t : array (m,)
        Times (the curves stop at a blow-up).
    log_energy : array (m,)
        :math:`\log E_{\beta A}(N(\alpha_t,\Sigma_t))` (``inf`` where the Gaussian integral diverges).
    w2 : array (m,)
        :math:`W_2(\mu_0,\mu_t)` (Bures–Wasserstein).
    twisted : array (m,) or None
        :math:`d_{\pm M}(\mu_0,\mu_t)` when :math:`M=V(\beta A)^{-1}` is symmetric definite, else None.
    M : array (d, d) or None
        :math:`V(\beta A)^{-1}` (None when :math:`A` is not symmetric invertible).
    sign : int or None
        :func:`energy_sign` (+1 non-decreasing, -1 non-increasing, 0 no rule).
    mean, cov : arrays (m, d), (m, d, d)
    blowup_time : float or None
    """

    t: np.ndarray
    log_energy: np.ndarray
    w2: np.ndarray
    twisted: np.ndarray | None
    M: np.ndarray | None
    sign: int | None
    mean: np.ndarray
    cov: np.ndarray
    blowup_time: float | None

    @property
    def energy(self) -> np.ndarray:
        r""":math:`E_{\beta A}(N(\alpha_t,\Sigma_t))`; ``inf`` where it diverges or exceeds float64."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_energy)


@fill_doc(_DOC)
def gaussian_energy_curves(
    mean0,
    cov0,
    layer: Attention,
    T: float,
    n_times: int = 101,
    *,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    blowup_trace: float = 1e6,
) -> EnergyCurves:
    r"""Solve the softmax Gaussian ODE (``tokendynamics.gaussian.solve_gaussian``) and evaluate energy and distances.

    :math:`E_{\beta A}` along :math:`N(\alpha_t,\Sigma_t)` (:func:`gaussian_interaction_energy`),
    :math:`W_2(\mu_0,\mu_t)` and, when :math:`M=V(\beta A)^{-1}` is symmetric and definite,
    :math:`d_{\pm M}(\mu_0,\mu_t)` (:func:`twisted_bures_wasserstein`). Used by the chapter's
    widget: one call takes a few tens of milliseconds in d = 2.

    Parameters
    ----------
    mean0 : array_like (d,)
        Mean :math:`\alpha_0` of the initial Gaussian.
    cov0 : array_like (d, d)
        Its covariance :math:`\Sigma_0` (symmetric positive semi-definite).
    layer : Attention
        Single-head softmax layer (:func:`layer_matrices`); the energy is :math:`E_{\beta A}`.
    T : float
        Final time (depth) of the run, positive.
    n_times : int
        Number of equally spaced output times in :math:`[0,T]` (at least 2; default 101).
    rtol, atol : float
        Relative and absolute tolerances of the adaptive solver of ``solve_gaussian`` (defaults
        :math:`10^{-8}`, :math:`10^{-10}`).
    blowup_trace : float
        Trace of :math:`\Sigma_t` at which the run stops as a blow-up (default :math:`10^6`).

    Returns
    -------
    EnergyCurves
        The output times up to :math:`T` or the blow-up, :math:`\log E_{\beta A}`, :math:`W_2(\mu_0,\mu_t)`,
        :math:`d_{\pm M}(\mu_0,\mu_t)` when defined, :math:`M`, the sign rule, the moments and the blow-up time.

    Raises
    ------
    TypeError
        If ``layer`` is not an :class:`~tokendynamics.attention.Attention`.
    ValueError
        If the layer is not softmax attention with one head.

    References
    ----------
    %(paper1)s
    Book: ``chapters/03_gradient_flow.md``, equations (eq-gf-energy), (eq-gf-sign-rule) and (eq-gf-twisted).
    """

    A, V = layer_matrices(layer)
    layer.kind.require("quadratic_covariance", "the energy curves (they follow softmax attention)")
    T = validate_positive(T, "T")
    n_times = validate_count(n_times, "n_times", minimum=2)
    traj = solve_gaussian(
        mean0,
        cov0,
        layer,
        (0.0, float(T)),
        t_eval=np.linspace(0.0, float(T), int(n_times)),
        rtol=rtol,
        atol=atol,
        blowup_trace=blowup_trace,
    )
    m0, S0 = traj.mean[0], traj.cov[0]
    log_energy = np.array([gaussian_interaction_energy(m, S, A, log=True) for m, S in zip(traj.mean, traj.cov)])
    w2 = np.array([bures_wasserstein(m0, S0, m, S) for m, S in zip(traj.mean, traj.cov)])
    M = sign = twisted = None
    if _is_symmetric(A) and np.min(np.abs(np.linalg.eigvalsh(A))) > 1e-12 * max(1.0, float(np.max(np.abs(A)))):
        M = twisted_matrix(A, V)
        sign = energy_sign(A, V)
        if _is_symmetric(M, 1e-10):
            lam = np.linalg.eigvalsh(0.5 * (M + M.T))
            if lam[0] > 0 or lam[-1] < 0:
                Mpos = 0.5 * (M + M.T) * (1.0 if lam[0] > 0 else -1.0)
                twisted = np.array([twisted_bures_wasserstein(m0, S0, m, S, Mpos) for m, S in zip(traj.mean, traj.cov)])
    return EnergyCurves(
        t=traj.t,
        log_energy=log_energy,
        w2=w2,
        twisted=twisted,
        M=M,
        sign=sign,
        mean=traj.mean,
        cov=traj.cov,
        blowup_time=traj.blowup_time,
    )
