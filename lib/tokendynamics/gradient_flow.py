r"""The gradient-flow structure of attention dynamics: interaction energies, twisted metrics, non-convexity.

Paper 1 (Castin, Ablin, Carrillo, Peyré, arXiv:2501.18322, second version) announces a gradient-flow view of
the Transformer PDE (Wasserstein and Bures–Wasserstein geometry, entropic optimal transport, a "twisted"
Wasserstein metric) and ties the non-convexity of the energy to several equilibria, metastable states and
blow-up. Its text was not available: the formulas here are the book's reconstruction, derived and checked
numerically; the *names* (:math:`d_M`, which energy) are ours [I]. The model is a one-head
:class:`~tokendynamics.attention.Attention` layer, whose energies are those of its score matrix :math:`\beta A`
(:func:`layer_matrices`; paper 1's :math:`A_1` is :math:`A^\top`): the interaction energy
:math:`E_A(\mu)=\tfrac12\iint e^{\langle x,Ay\rangle}d\mu\,d\mu`, its variations and rate, the twisted
distance :math:`d_M`, the Sinkhorn energy :math:`F_\varepsilon=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)`,
(twisted) Bures–Wasserstein flows, the second variation and the linearised flow. No function forms more than
one :math:`n\times n` matrix at a time.

References
----------
Paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/03_gradient_flow.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .attention import BLOCK_ENTRIES, Attention, velocity_unchecked
from .docstrings import fill_doc
from .errors import ConvergenceError, NonFiniteError
from .transport import bures_wasserstein, psd_sqrt, sinkhorn_potentials, sinkhorn_spectrum, wasserstein
from .validation import (
    real_array,
    validate_covariance,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_instance,
    validate_measure,
    validate_positive,
    validate_spd,
    validate_symmetric,
    validate_tokens,
    validate_weights,
)

__all__ = [
    "layer_matrices", "partition_function", "interaction_energy", "first_variation", "first_variation_gradient",
    "energy_rate", "dissipation", "energy_curve", "kinetic_norm", "gaussian_interaction_energy",
    "gaussian_partition_function", "gaussian_translation_hessian", "twisted_matrix", "energy_sign",
    "twisted_wasserstein", "twisted_bures_wasserstein", "sinkhorn_energy", "sinkhorn_energy_gradient",
    "sinkhorn_energy_empirical", "bw_gradient_velocity", "finite_difference_gradient", "gaussian_slope",
    "second_variation", "dirac_second_variation", "Equilibrium", "linearize",
]  # fmt: skip

_LOG_MAX = 700.0  # exp(700) ~ 1e304: above this a value is reported as an overflow

_PAPER1 = """\
Paper 1 (Castin et al., arXiv:2501.18322, second version): the gradient-flow viewpoint announced in its
summary, whose formulas are reconstructed in the book."""
_BOOK = "Book: ``chapters/03_gradient_flow.md``, "
_GAUSSIAN = r"""mean : array_like (d,)
    Mean :math:`\alpha` of the Gaussian :math:`N(\alpha,\Sigma)`.
cov : array_like (d, d)
    Its covariance :math:`\Sigma`, symmetric positive semi-definite (singular allowed)."""
_LAYER = r"""layer : Attention
    One head; the energy is that of its score matrix :math:`\beta A` (library convention, kernel
    :math:`e^{\beta\langle x,Ay\rangle}`); its kind does not matter."""

#: Numpydoc paragraphs shared by the gradient-flow docstrings (:func:`~tokendynamics.docstrings.fill_doc`).
GF_DOCS = {
    "paper1": _PAPER1,
    "X": r"""X : array_like (n, d)
    Tokens :math:`x_i`, the atoms of :math:`\mu=\sum_iw_i\delta_{x_i}`.""",
    "weights": r"""weights : array_like (n,), optional
    Token masses :math:`w_i` (non-negative, summing to 1); None gives every token the mass :math:`1/n`.""",
    "layer": _LAYER,
    "at": """at : array_like (m, d), optional
    Points :math:`x` of evaluation; None: the tokens (m = n).""",
    "gradient": r"""grad_mean : array_like (d,)
    :math:`g=\nabla_\alpha F` at the Gaussian.
grad_cov : array_like (d, d)
    :math:`G=\nabla_\Sigma F`, the symmetric gradient in the covariance.
cov : array_like (d, d)
    Covariance :math:`\Sigma` of the Gaussian (symmetric positive semi-definite).""",
    "gaussian": _GAUSSIAN,
    "sinkhorn_layer": r"""layer : Attention
    One head with a symmetric score matrix :math:`\beta A` (the transport cost is
    :math:`-\beta\langle x,Ay\rangle`) and the regularisation :math:`\varepsilon` = ``layer.eps`` (a
    Sinkhorn layer; its kind does not matter).""",
    "ref_energy": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-energy).",
    "ref_sign": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-sign-rule).",
    "ref_twisted": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-twisted).",
    "ref_hessian": _PAPER1 + "\n" + _BOOK + "equation (eq-gf-hessian).",
    "ref_sinkhorn": _PAPER1
    + """
M. E. Sander, P. Ablin, M. Blondel, G. Peyré, *Sinkformers: Transformers with Doubly Stochastic Attention*,
AISTATS 2022. Book: ``chapters/03_gradient_flow.md``, equation (eq-gf-sinkhorn-energy).""",
    "ref_bw": _PAPER1
    + """
R. Bhatia, T. Jain, Y. Lim, Expositiones Mathematicae 37 (2019). Book: ``chapters/03_gradient_flow.md``,
section *Sinkhorn attention is a Bures–Wasserstein gradient flow*, and equation (eq-gf-twisted).""",
}
_DOC = GF_DOCS


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
def layer_matrices(layer):
    r"""Score and value matrices :math:`(\beta A, V)` of a single-head layer, in library convention.

    The kernel of the layer is :math:`e^{\langle x,\beta Ay\rangle}`; paper 1's matrix is its transpose.

    Parameters
    ----------
    layer : Attention
        One layer with one head; its kind does not matter.

    Returns
    -------
    A : numpy.ndarray (d, d)
        ``layer.beta * layer.A[0]``.
    V : numpy.ndarray (d, d)
        ``layer.V[0]`` (not scaled by :math:`\beta`).

    Raises
    ------
    TypeError
        ``layer`` is not one :class:`~tokendynamics.attention.Attention`.
    ValueError
        The layer has more than one head (the gradient-flow statements are for one head).

    References
    ----------
    %(ref_energy)s
    """
    layer = validate_instance(layer, Attention, "layer", "an Attention (e.g. Attention('softmax', A=A, V=V))")
    if layer.batch_size is not None:
        raise TypeError(f"layer is a batch of {layer.batch_size} layers; the energies take one (layer.member(b))")
    if layer.n_heads != 1:
        raise ValueError(f"the gradient-flow statements are for one head, got {layer.n_heads}")
    return layer.beta * layer.A[0], layer.V[0]


def _measure(X, weights, layer):
    """The checked ``(X, w, A, V)`` of a measure and a layer."""
    A, V = layer_matrices(layer)
    X, w = validate_measure(X, weights, layer.d)
    return X, w, A, V


def _points(at, X):
    return X if at is None else validate_tokens(at, X.shape[1], "at")


# ---------------------------------------------------------------------------------------------
# the interaction energy of weighted empirical measures
# ---------------------------------------------------------------------------------------------


def _partition(X, A, w, P, gradient: bool, log: bool):
    n, d = X.shape
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
def partition_function(X, layer, weights=None, at=None, *, gradient: bool = False, log: bool = False):
    r"""Partition function :math:`Z_\mu(x)=\sum_j w_j e^{\langle x,Ax_j\rangle}` of the layer's score matrix
    :math:`A` (:math:`\beta` times the layer's).

    The normaliser of softmax attention. With ``gradient=True`` also :math:`\nabla Z_\mu(x)=\sum_j w_jAx_j\,
    e^{\langle x,Ax_j\rangle}`; with ``log=True`` :math:`\log Z` and :math:`\nabla\log Z` instead (never
    overflows). For invertible :math:`A` the softmax field is :math:`\Gamma_\mu=VA^{-1}\nabla\log Z_\mu`
    (tested; paper 1 writes :math:`VA_1^{-\top}`).

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    %(at)s
    gradient : bool
        Also return the gradient in :math:`x`.
    log : bool
        Return :math:`\log Z_\mu` (and :math:`\nabla\log Z_\mu`), by log-sum-exp.

    Returns
    -------
    Z : numpy.ndarray (m,)
        :math:`Z_\mu` (or :math:`\log Z_\mu`) at each point; alone when ``gradient`` is False.
    gradZ : numpy.ndarray (m, d)
        With ``gradient=True``: :math:`\nabla Z_\mu` (or :math:`\nabla\log Z_\mu`) at each point.

    Raises
    ------
    NonFiniteError
        :math:`Z_\mu` overflows float64 when ``log`` is False.

    References
    ----------
    %(paper1)s
    Book: ``chapters/03_gradient_flow.md``, equations (eq-gf-energy) and (eq-gf-softmax-gradient).
    """
    X, w, A, _ = _measure(X, weights, layer)
    gradient, log = validate_flag(gradient, "gradient"), validate_flag(log, "log")
    return _partition(X, A, w, _points(at, X), gradient, log)


def _energy(X, A, w, log: bool = False) -> float:
    n = X.shape[0]
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
def interaction_energy(X, layer, weights=None, *, log: bool = False) -> float:
    r"""Interaction energy :math:`E_A(\mu)=\tfrac12\sum_{i,j}w_iw_je^{\langle x_i,Ax_j\rangle}` of the layer's
    score matrix :math:`A` (:math:`\beta` times the layer's).

    For symmetric :math:`A`, unnormalised attention with :math:`V=A` is the :math:`W_2` gradient ascent of
    :math:`E_A`, and softmax attention a formal gradient flow of :math:`E_A` for a twisted,
    :math:`Z_\mu`-weighted metric. :math:`E_A=E_{A^\top}`. Log-sum-exp over blocks of rows.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    log : bool
        Return :math:`\log E_A(\mu)`, which never overflows.

    Returns
    -------
    float

    Raises
    ------
    NonFiniteError
        :math:`E_A` overflows float64 (use ``log=True``).

    References
    ----------
    %(ref_energy)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    return _energy(X, A, w, validate_flag(log, "log"))


def _symmetrised(X, A, w, P, gradient: bool):
    """Z (or grad Z) of A, or for a non-symmetric A the mean of those of A and A^T: the first variation of E_A."""
    out = _partition(X, A, w, P, gradient, False)
    if gradient:
        out = out[1]
    if _is_symmetric(A):
        return out
    other = _partition(X, A.T, w, P, gradient, False)
    return 0.5 * (out + (other[1] if gradient else other))


@fill_doc(_DOC)
def first_variation(X, layer, weights=None, at=None) -> np.ndarray:
    r"""First variation :math:`\frac{\delta E_A}{\delta\mu}(x)=\tfrac12\int\big(e^{\langle x,Ay\rangle}+e^{\langle
    y,Ax\rangle}\big)d\mu(y)` (:math:`Z_\mu` for symmetric :math:`A`).

    The derivative of the energy along mass perturbations:
    :math:`\frac{d}{dh}E_A(\mu+h\chi)|_{h=0}=\int\frac{\delta E_A}{\delta\mu}\,d\chi` for :math:`\chi` of zero mass.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    %(at)s

    Returns
    -------
    numpy.ndarray (m,)

    References
    ----------
    %(ref_energy)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    return _symmetrised(X, A, w, _points(at, X), False)


@fill_doc(_DOC)
def first_variation_gradient(X, layer, weights=None, at=None) -> np.ndarray:
    r"""Gradient :math:`\nabla_x\frac{\delta E_A}{\delta\mu}(x)=\tfrac12\int\big(Ay\,e^{\langle x,Ay\rangle}+A^\top
    y\,e^{\langle y,Ax\rangle}\big)d\mu(y)`.

    For symmetric :math:`A` the field of unnormalised attention with :math:`V=A`. Moving token :math:`i` changes
    the energy at the rate :math:`\partial E_A/\partial x_i=w_i\nabla\frac{\delta E_A}{\delta\mu}(x_i)`.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    %(at)s

    Returns
    -------
    numpy.ndarray (m, d)

    References
    ----------
    %(ref_energy)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    return _symmetrised(X, A, w, _points(at, X), True)


@fill_doc(_DOC)
def energy_rate(X, layer, weights=None, *, field=None) -> float:
    r"""Rate :math:`\frac{d}{dt}E_{\beta A}(\mu_t)=\int\langle\nabla\frac{\delta E}{\delta\mu},\Gamma_\mu\rangle\,d\mu`
    of the layer's own energy along its flow.

    :math:`\Gamma_\mu` is the core velocity of ``layer`` (or ``field``). For softmax attention with symmetric
    invertible :math:`A` it equals :func:`dissipation`, whose sign is the sign rule of :func:`energy_sign`.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    field : array_like (n, d), optional
        Velocity :math:`\Gamma_\mu(x_i)` at the tokens, instead of recomputing the layer's velocity.

    Returns
    -------
    float
        Positive if the flow raises the energy.

    References
    ----------
    %(ref_sign)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    if field is None:
        U = velocity_unchecked(X, layer, w, np.arange(X.shape[0], dtype=float))
    else:
        U = validate_finite_array(field, "field")
    if U.shape != X.shape:
        raise ValueError(f"field must have the shape of the tokens {X.shape}, got {U.shape}")
    g = _symmetrised(X, A, w, X, True)
    return float(np.sum(w * np.einsum("ij,ij->i", g, U)))


@fill_doc(_DOC)
def dissipation(X, layer, weights=None) -> float:
    r"""The sign-rule form :math:`\int\langle\nabla Z_\mu,M\nabla Z_\mu\rangle\,Z_\mu^{-k}\,d\mu`, :math:`M=VA^{-1}`,
    of :math:`\frac{d}{dt}E_A(\mu_t)`.

    :math:`k=1` for softmax attention (a normalised kind: ``layer.kind.normalised``), :math:`k=0` for
    unnormalised softmax attention: for those two it equals :func:`energy_rate` (symmetric invertible
    :math:`A`); since :math:`\langle g,Mg\rangle=\tfrac12\langle g,(M+M^\top)g\rangle` its sign follows
    :func:`energy_sign` whenever :math:`M+M^\top` is semi-definite.

    Parameters
    ----------
    %(X)s
    layer : Attention
        Softmax or unnormalised softmax attention, one head, symmetric invertible score matrix.
    %(weights)s

    Returns
    -------
    float

    References
    ----------
    %(ref_sign)s
    """
    X, w, A, V = _measure(X, weights, layer)
    M = _twisted(A, V)
    if layer.kind.normalised:
        _, g = _partition(X, A, w, X, True, True)
        Z = _partition(X, A, w, X, False, False)
        q = Z * np.einsum("ij,ij->i", g, g @ M.T)  # |grad Z|_M^2 / Z = Z |grad log Z|_M^2
    else:
        _, g = _partition(X, A, w, X, True, False)
        q = np.einsum("ij,ij->i", g, g @ M.T)
    return float(np.sum(w * q))


@fill_doc(_DOC)
def energy_curve(Xs, layer, weights=None) -> np.ndarray:
    r""":math:`E_{\beta A}(\mu_t)` for a stack of token clouds ``Xs`` (m, n, d), e.g. ``Trajectory.X``.

    Parameters
    ----------
    Xs : array_like (m, n, d)
        The clouds at m stored times.
    %(layer)s
    weights : array_like (n,), optional
        Masses of the tokens, the same at every time; None: uniform.

    Returns
    -------
    numpy.ndarray (m,)
        :func:`interaction_energy` of each cloud.

    References
    ----------
    %(ref_energy)s
    """
    A, _ = layer_matrices(layer)
    Xs = real_array(Xs, "Xs")
    if Xs.ndim != 3:
        raise ValueError(f"Xs must have shape (times, n, d), got {Xs.shape}")
    measures = (validate_measure(X, weights, layer.d) for X in Xs)
    return np.array([_energy(X, A, w) for X, w in measures])


@fill_doc(_DOC)
def kinetic_norm(U, weights=None, M=None) -> float:
    r"""Length element :math:`\big(\int\langle M^{-1}u,u\rangle d\mu\big)^{1/2}` of a velocity field in :math:`d_M`
    (:math:`M=I`: :math:`W_2`).

    A flow :math:`\dot x=u(x)` moves :math:`\mu` at metric speed at most ``kinetic_norm(U, w, M)`` in :math:`d_M`
    (Benamou–Brenier); the slope of an energy in :math:`d_M` is ``kinetic_norm(G @ M, w, M)``, ``G`` the
    gradient of its first variation.

    Parameters
    ----------
    U : array_like (n, d)
        The field :math:`u(x_i)` at the n tokens.
    %(weights)s
    M : array_like (d, d), optional
        Symmetric positive definite matrix of :math:`d_M`; None: the identity.

    Returns
    -------
    float

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


def _gaussian_layer(mean, cov, layer):
    A, V = layer_matrices(layer)
    mean, cov = _gaussian(mean, cov, layer.d)
    return mean, cov, A


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
def gaussian_interaction_energy(mean, cov, layer, *, log: bool = False) -> float:
    r"""Closed form of :math:`E_A(N(\alpha,\Sigma))=\tfrac12\,\mathbb E\,e^{\langle x,Ay\rangle}`, :math:`x,y` i.i.d.

    With :math:`R=\Sigma^{1/2}` and :math:`K=RA\Sigma A^\top R`,

    .. math:: E_A = \tfrac12\det(I-K)^{-1/2}\exp\big(\tfrac12\alpha^\top G\alpha\big),\quad
              G = A+A^\top+A\Sigma A^\top+(A+A\Sigma A^\top)^\top R(I-K)^{-1}R(A+A\Sigma A^\top),

    finite iff :math:`K\prec I` (``inf`` otherwise). For :math:`A=-I`:
    :math:`\tfrac12\det(I-\Sigma^2)^{-1/2}\exp(-\alpha^\top(I+\Sigma)^{-1}\alpha)`. Singular :math:`\Sigma` allowed.

    Parameters
    ----------
    %(gaussian)s
    %(layer)s
    log : bool
        Return :math:`\log E_A`.

    Returns
    -------
    float
        ``inf`` when the Gaussian integral diverges.

    References
    ----------
    %(ref_energy)s
    """
    mean, cov, A = _gaussian_layer(mean, cov, layer)
    logE, _, _, _ = _log_energy_pieces(mean, cov, A)
    if log or logE == math.inf:
        return logE
    return float(_exp_checked(logE, "the Gaussian interaction energy"))


@fill_doc(_DOC)
def gaussian_partition_function(mean, cov, layer, at, *, gradient: bool = False):
    r""":math:`Z_\mu(x)=\int e^{\langle x,Ay\rangle}dN(\alpha,\Sigma)(y)=\exp\big(\langle
    x,A\alpha\rangle+\tfrac12x^\top A\Sigma A^\top x\big)` at the points ``at``.

    With ``gradient=True`` also :math:`\nabla\log Z=A\alpha+A\Sigma A^\top x`; then
    :math:`VA^{-1}\nabla\log Z=V(\alpha+\Sigma A^\top x)` is the softmax field on Gaussians.

    Parameters
    ----------
    %(gaussian)s
    %(layer)s
    at : array_like (m, d)
        Points :math:`x` where :math:`Z_\mu` is evaluated.
    gradient : bool
        Also return :math:`\nabla\log Z_\mu` at those points.

    Returns
    -------
    Z : numpy.ndarray (m,)
        Alone when ``gradient`` is False.
    grad_log_Z : numpy.ndarray (m, d)
        With ``gradient=True``: :math:`A\alpha+A\Sigma A^\top x_k`.

    References
    ----------
    %(paper1)s
    Book: ``chapters/03_gradient_flow.md``, equations (eq-gf-energy) and (eq-gf-softmax-gradient);
    ``chapters/02_gaussian_preservation.md``, equation (eq-gauss-odes).
    """
    mean, cov, A = _gaussian_layer(mean, cov, layer)
    P = validate_tokens(at, mean.shape[0], "at")
    Qm = A @ cov @ A.T
    logZ = P @ (A @ mean) + 0.5 * np.einsum("ij,jk,ik->i", P, Qm, P)
    Z = _exp_checked(logZ, "the Gaussian partition function")
    return (Z, (A @ mean)[None, :] + P @ Qm.T) if validate_flag(gradient, "gradient") else Z


@fill_doc(_DOC)
def gaussian_translation_hessian(mean, cov, layer, w) -> float:
    r"""Closed-form :math:`\frac{d^2}{ds^2}E_A(N(\alpha+sw,\Sigma))|_{s=0}=E_A\,[(w^\top G\alpha)^2+w^\top Gw]`.

    :math:`\log E_A` is quadratic in the mean (:func:`gaussian_interaction_energy`). For :math:`A=-I`,
    :math:`G=-2(I+\Sigma)^{-1}`: negative along every :math:`w\perp G\alpha`, so in :math:`d\ge2` the energy is
    concave along some translation at every Gaussian.

    Parameters
    ----------
    %(gaussian)s
    %(layer)s
    w : array_like (d,)
        Direction of the translation (the covariance is kept).

    Returns
    -------
    float
        ``inf`` where the energy is infinite.

    References
    ----------
    %(ref_hessian)s
    """
    mean, cov, A = _gaussian_layer(mean, cov, layer)
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


def _twisted(A, V):
    A = validate_symmetric(A)
    lam = np.linalg.eigvalsh(A)
    if np.min(np.abs(lam)) <= 1e-12 * max(1.0, float(np.max(np.abs(lam)))):
        raise ValueError("A must be invertible to define M = V A^{-1}")
    return np.linalg.solve(A.T, V.T).T


@fill_doc(_DOC)
def twisted_matrix(layer) -> np.ndarray:
    r"""The matrix :math:`M=V(\beta A)^{-1}` that turns attention into a (twisted) gradient flow.

    Unnormalised attention is :math:`\Gamma_\mu=M\nabla\frac{\delta E_A}{\delta\mu}`, softmax attention
    :math:`M\nabla\frac{\delta E_A}{\delta\mu}/Z_\mu`, Sinkhorn attention :math:`-M\nabla\frac{\delta
    F_\varepsilon}{\delta\mu}`: gradient flows for :math:`d_{\pm M}` (:func:`twisted_wasserstein`) when
    :math:`M` is symmetric and definite. Needs a symmetric :math:`A`.

    Parameters
    ----------
    layer : Attention
        One head with a symmetric invertible score matrix.

    Returns
    -------
    numpy.ndarray (d, d)
        :math:`M`, by a linear solve.

    References
    ----------
    %(paper1)s
    Book: ``chapters/03_gradient_flow.md``, equations (eq-gf-softmax-gradient) and (eq-gf-twisted).
    """
    return _twisted(*layer_matrices(layer))


@fill_doc(_DOC)
def energy_sign(layer) -> int:
    r"""Sign rule: the sign of :math:`\frac{d}{dt}E_A(\mu_t)` along softmax or unnormalised attention.

    :math:`\frac{d}{dt}E_A=\int\langle\nabla Z,M\nabla Z\rangle Z^{-k}d\mu` (:func:`dissipation`),
    :math:`M=VA^{-1}`: ``+1`` if :math:`M+M^\top\succeq0`, ``-1`` if :math:`M+M^\top\preceq0`, ``0`` if it is
    indefinite (no rule); eigenvalues within :math:`10^{-12}\|M+M^\top\|` of 0 count as zero.

    Parameters
    ----------
    layer : Attention
        One head with a symmetric invertible score matrix.

    Returns
    -------
    int

    References
    ----------
    %(ref_sign)s
    """
    M = twisted_matrix(layer)
    lam = np.linalg.eigvalsh(M + M.T)
    tol = 1e-12 * max(1.0, float(np.max(np.abs(lam))))
    return 1 if lam[0] >= -tol else -1 if lam[-1] <= tol else 0


@fill_doc(_DOC)
def twisted_wasserstein(X, Y, M, weights=None, *, method: str = "exact") -> float:
    r"""Twisted Wasserstein distance :math:`d_M(\mu,\nu)` between weighted empirical measures (name [I]).

    .. math:: d_M(\mu,\nu)^2=\min_{\pi\in\Pi(\mu,\nu)}\int\langle M^{-1}(x-y),x-y\rangle d\pi
              =W_2\big((M^{-1/2})_\#\mu,(M^{-1/2})_\#\nu\big)^2,

    :math:`M` symmetric positive definite; computed as the second form by
    :func:`~tokendynamics.transport.wasserstein`. Gradient flows for :math:`d_M` have velocity
    :math:`-M\nabla\frac{\delta F}{\delta\mu}`.

    Parameters
    ----------
    X, Y : array_like (n, d), (m, d)
        Atoms of :math:`\mu` and :math:`\nu`.
    M : array_like (d, d)
        Symmetric positive definite matrix of the metric.
    weights : None or (a, b)
        Masses of the atoms (uniform if None; either entry may be None).
    method : {"exact", "auto", "sliced"}
        Solver of :func:`~tokendynamics.transport.wasserstein`.

    Returns
    -------
    float
        :math:`d_M(\mu,\nu)` (not its square).

    References
    ----------
    %(ref_twisted)s
    """
    X = validate_tokens(X, name="X")
    Y = validate_tokens(Y, X.shape[1], "Y")
    R = np.linalg.inv(psd_sqrt(validate_spd(M, "M", X.shape[1])))  # M^{-1/2}
    return wasserstein(X @ R, Y @ R, 2, weights, method=method)


@fill_doc(_DOC)
def twisted_bures_wasserstein(m1, S1, m2, S2, M) -> float:
    r""":math:`d_M` between Gaussians: the Bures–Wasserstein distance of the :math:`M^{-1/2}`-transformed Gaussians.

    Parameters
    ----------
    m1, S1 : array_like (d,) and (d, d)
        Mean and covariance of the first Gaussian.
    m2, S2 : array_like (d,) and (d, d)
        Mean and covariance of the second Gaussian.
    M : array_like (d, d)
        Symmetric positive definite matrix of the metric (the identity: Bures–Wasserstein).

    Returns
    -------
    float

    References
    ----------
    %(ref_twisted)s
    """
    m1, S1 = _gaussian(m1, S1, names=("m1", "S1"))
    m2, S2 = _gaussian(m2, S2, m1.shape[0], names=("m2", "S2"))
    R = np.linalg.inv(psd_sqrt(validate_spd(M, "M", m1.shape[0])))
    return bures_wasserstein(R @ m1, R @ S1 @ R, R @ m2, R @ S2 @ R)


# ---------------------------------------------------------------------------------------------
# the Sinkhorn entropic energy
# ---------------------------------------------------------------------------------------------


def _sinkhorn_spectrum(mean, cov, layer):
    """``(mean, A, eps, R, U, s)``: R = cov^{1/2}, s_i = sqrt(1 + 4 h_i / eps^2), (h, U) the eigen-decomposition
    of R A cov A R: the spectral computation of the Sinkhorn Gaussian ODE (kernel matrix A / eps)."""
    mean, cov, A = _gaussian_layer(mean, cov, layer)
    A = validate_symmetric(A, d=mean.shape[0])
    R = psd_sqrt(cov)
    s, U = sinkhorn_spectrum(R, cov, A / layer.eps)
    return mean, A, layer.eps, R, U, s


@fill_doc(_DOC)
def sinkhorn_energy(mean, cov, layer) -> float:
    r"""Closed form of the Sinkhorn energy :math:`F_\varepsilon(N(\alpha,\Sigma))=\tfrac12\mathrm{OT}_\varepsilon(\mu,
    \mu)`, cost :math:`-\langle x,Ay\rangle`.

    .. math:: F_\varepsilon=-\tfrac12\alpha^\top A\alpha-\frac\varepsilon4\sum_{i=1}^d\Big[s_i-1-\log\frac{1+s_i}
              {2}\Big],\quad s_i=\sqrt{1+4h_i/\varepsilon^2},\ h_i=\operatorname{eig}_i\big(\Sigma^{1/2}A\Sigma A
              \Sigma^{1/2}\big)

    (Sander et al. 2022). ``Attention("sinkhorn", A=A, V=V, eps=eps)`` is the :math:`W_2` gradient flow of
    this energy when :math:`V=\beta A`, and the :math:`d_M` gradient flow when :math:`V=M\beta A`.

    Parameters
    ----------
    %(gaussian)s
    %(sinkhorn_layer)s

    Returns
    -------
    float
        Finite for every Gaussian.

    References
    ----------
    %(ref_sinkhorn)s
    """
    mean, A, eps, _, _, s = _sinkhorn_spectrum(mean, cov, layer)
    return float(-0.5 * mean @ A @ mean - 0.25 * eps * np.sum(s - 1.0 - np.log((1.0 + s) / 2.0)))


@fill_doc(_DOC)
def sinkhorn_energy_gradient(mean, cov, layer):
    r"""Gradient :math:`(\nabla_\alpha F_\varepsilon,\nabla_\Sigma F_\varepsilon)` of :func:`sinkhorn_energy`.

    .. math:: \nabla_\alpha F_\varepsilon=-A\alpha,\qquad
              \nabla_\Sigma F_\varepsilon=-\frac1{2\varepsilon}\,A\Sigma^{1/2}X\Sigma^{1/2}A,\quad
              X=2\big(I+(I+4H/\varepsilon^2)^{1/2}\big)^{-1},\ H=\Sigma^{1/2}A\Sigma A\Sigma^{1/2},

    derived here (spectral calculus) and tested against finite differences; no inverse is needed.

    Parameters
    ----------
    %(gaussian)s
    %(sinkhorn_layer)s

    Returns
    -------
    grad_mean : numpy.ndarray (d,)
        :math:`-A\alpha`.
    grad_cov : numpy.ndarray (d, d)
        :math:`\nabla_\Sigma F_\varepsilon`, exactly symmetric.

    References
    ----------
    %(ref_sinkhorn)s
    """
    mean, A, eps, R, U, s = _sinkhorn_spectrum(mean, cov, layer)
    X = (U * (2.0 / (1.0 + s))) @ U.T
    G = -(0.5 / eps) * (A @ R @ X @ R @ A)
    return -A @ mean, 0.5 * (G + G.T)


@fill_doc(_DOC)
def sinkhorn_energy_empirical(X, layer, weights=None) -> float:
    r""":math:`F_\varepsilon(\mu)=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)=\tfrac12\big(\int f\,d\mu+\int g\,d\mu\big)`
    for :math:`\mu=\sum_iw_i\delta_{x_i}`.

    The dual value with the potentials of the core's log-domain Sinkhorn
    (:func:`~tokendynamics.transport.sinkhorn_potentials`, the solver of Sinkhorn attention, with the layer's
    ``sinkhorn_tol`` and ``sinkhorn_iters``). Its gradient in token :math:`i` is :math:`-w_i\Gamma_\mu(x_i)`
    for the Sinkhorn layer with :math:`V=\beta A` (Sander et al. 2022; tested).

    Parameters
    ----------
    %(X)s
    %(sinkhorn_layer)s
    %(weights)s

    Returns
    -------
    float

    References
    ----------
    %(ref_sinkhorn)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    A = validate_symmetric(A, d=X.shape[1])
    eps, tol = layer.eps, layer.sinkhorn_tol
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    f, g, it, err = sinkhorn_potentials((X @ A) @ X.T / eps, logw, eps=eps, max_iter=layer.sinkhorn_iters, tol=tol)
    if not err <= tol:
        raise ConvergenceError(
            f"Sinkhorn did not reach sinkhorn_tol = {tol:.3g} in {it} iterations: the column-marginal error reached "
            f"is {err:.3g} (eps = {eps:g}). Raise sinkhorn_iters, loosen sinkhorn_tol, or raise eps (convergence "
            "slows down like exp(-score range / eps))"
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
    r"""Velocity :math:`(\dot\alpha,\dot\Sigma)=(-Mg,\,-2(MG\Sigma+\Sigma GM))` of the (twisted)
    Bures–Wasserstein gradient flow of an energy on Gaussians.

    For :math:`F(\alpha,\Sigma)` with gradient :math:`(g,G)` the first variation restricted to Gaussians is
    :math:`\langle g,x\rangle+\langle x-\alpha,G(x-\alpha)\rangle`, so the :math:`d_M` gradient flow moves
    tokens with :math:`-M(g+2G(x-\alpha))`.

    Parameters
    ----------
    %(gradient)s
    M : array_like (d, d), optional
        Symmetric positive definite matrix of :math:`d_M`; None: :math:`M=I` (Bures–Wasserstein).

    Returns
    -------
    mean_dot : numpy.ndarray (d,)
    cov_dot : numpy.ndarray (d, d)
        Exactly symmetric.

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

    The symmetric gradient is taken in the coordinates :math:`\Sigma\mapsto\Sigma+t(E_{ij}+E_{ji})/2`, so that
    :math:`dF=\langle g,d\alpha\rangle+\operatorname{tr}(G\,d\Sigma)`: a check of a derived gradient that trusts
    none. Needs :math:`\Sigma\succ2hI`.

    Parameters
    ----------
    fun : callable
        ``fun(mean, cov) -> float``; called :math:`2d+d(d+1)` times.
    %(gaussian)s
    h : float
        Step (error :math:`O(h^2)`).

    Returns
    -------
    g : numpy.ndarray (d,)
    G : numpy.ndarray (d, d)
        Symmetric.

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
def gaussian_slope(grad_mean, grad_cov, cov, M=None) -> float:
    r"""Slope :math:`\big(g^\top Mg+4\operatorname{tr}(GMG\Sigma)\big)^{1/2}` of an energy at :math:`N(\alpha,\Sigma)`
    in :math:`d_M`.

    The :math:`L^2_M(\mu)` norm of :math:`M(g+2G(x-\alpha))`; along the :math:`d_M` gradient flow
    :math:`\frac{d}{dt}F=-\text{slope}^2`.

    Parameters
    ----------
    %(gradient)s
    M : array_like (d, d), optional
        Symmetric positive definite matrix of :math:`d_M`; None: :math:`M=I`.

    Returns
    -------
    float

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
def second_variation(X, U, layer, weights=None) -> float:
    r"""Second variation of :math:`E_A` along :math:`\mu_s=(\mathrm{Id}+s\,u)_\#\mu` at :math:`s=0`.

    .. math:: \frac{d^2}{ds^2}E_A(\mu_s)\Big|_{s=0}=\tfrac12\sum_{i,j}w_iw_je^{\langle x_i,Ax_j\rangle}
              \Big[\big(\langle u_i,Ax_j\rangle+\langle x_i,Au_j\rangle\big)^2+2\langle u_i,Au_j\rangle\Big]

    (the Hessian :math:`\mathrm{Hess}\,E_A(\mu)[u,u]` for symmetric :math:`A`). Blocks of at most a third of the
    rows keep the three kernel blocks alive at a time below one :math:`n\times n` matrix.

    Parameters
    ----------
    %(X)s
    U : array_like (n, d)
        Displacement :math:`u(x_i)` at the tokens.
    %(layer)s
    %(weights)s

    Returns
    -------
    float
        Negative where :math:`E_A` is concave along this displacement.

    References
    ----------
    %(ref_hessian)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    n = X.shape[0]
    U = real_array(U, "U")
    if U.shape != X.shape or not np.all(np.isfinite(U)):
        raise ValueError(f"U must be a finite array of the tokens' shape {X.shape}, got {U.shape}")
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
def dirac_second_variation(x0, w0, layer) -> float:
    r"""Closed form of the second variation at a Dirac mass :math:`\delta_{x_0}` along a displacement :math:`w_0`.

    .. math:: \tfrac12e^{\langle x_0,Ax_0\rangle}\big[(\langle w_0,Ax_0\rangle+\langle x_0,Aw_0\rangle)^2
              +2\langle w_0,Aw_0\rangle\big];

    at :math:`\delta_0` this is :math:`\langle w_0,Aw_0\rangle`, i.e. :math:`-|w_0|^2<0` for :math:`A=-I`:
    :math:`E_{-I}` is not displacement convex at the clustered state.

    Parameters
    ----------
    x0 : array_like (d,)
        Position of the Dirac mass.
    w0 : array_like (d,)
        Displacement of that point.
    %(layer)s

    Returns
    -------
    float

    References
    ----------
    %(ref_hessian)s
    """
    A, _ = layer_matrices(layer)
    x0 = np.atleast_1d(validate_finite_array(x0, "x0"))
    w0 = validate_finite_array(w0, "w0")
    if x0.shape != (layer.d,) or w0.shape != x0.shape:
        raise ValueError(f"x0 and w0 must have shape ({layer.d},) like the layer, got {x0.shape} and {w0.shape}")
    q = float(x0 @ A @ x0)
    lin = float(w0 @ A @ x0 + x0 @ A @ w0)
    return 0.5 * float(_exp_checked(q, "the energy at the Dirac mass")) * (lin**2 + 2.0 * float(w0 @ A @ w0))


@dataclass(frozen=True)
class Equilibrium:
    r"""The linearised flow of a particle system at one configuration (:func:`linearize`).

    Attributes
    ----------
    speed : float
        :math:`\max_i|\Gamma_\mu(x_i)|` (tangential part on the sphere): 0 at an equilibrium.
    energy : float
        :math:`E_{\beta A}(\mu)` (:func:`interaction_energy`).
    eigenvalues : array
        Eigenvalues of the Jacobian of the flow, by decreasing real part (a positive one: a growing direction).
    unstable : int
        Number of eigenvalues with real part above ``tol``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), non-convexity and several equilibria; book:
    ``chapters/03_gradient_flow.md``.
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


def linearize(X, layer, weights=None, *, sphere: bool = False, h: float = 1e-6, tol: float = 1e-9):
    r"""Speed, energy and spectrum of the linearised particle flow at the configuration ``X``.

    The flow is :math:`\dot x_i=\Gamma_\mu(x_i)` (the core velocity of ``layer``, projected on the tangent space
    when ``sphere=True``). Its Jacobian is taken by central differences of step ``h``: in the entries of the
    :math:`x_j` (an :math:`nd\times nd` matrix) or, on the sphere, in an orthonormal basis of each tangent
    space, moving along great circles (:math:`n(d-1)\times n(d-1)`; in :math:`d=2` the token angles). At an
    equilibrium the spectrum does not depend on these choices. For softmax attention on the circle with
    :math:`A=V=I` two antipodal clusters of mass :math:`\frac12` grow at the rate :math:`2/(1+e^{2\beta})`.

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
    Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322 (non-convexity, several equilibria and metastability, in
    the paper's summary); book: ``chapters/03_gradient_flow.md``.
    """
    if not isinstance(layer, Attention):
        raise TypeError(f"layer must be an Attention, got {type(layer).__name__}")
    X, w = validate_measure(X, weights, layer.d)
    n, d = X.shape
    if sphere and np.max(np.abs(np.linalg.norm(X, axis=1) - 1)) > 1e-9:
        raise ValueError("sphere=True needs unit-norm tokens")
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"h must be a positive step, got {h!r}")
    s = np.arange(n, dtype=float)

    def field(Y):
        U = velocity_unchecked(Y, layer, w, s)
        return U - np.sum(U * Y, axis=1, keepdims=True) * Y if sphere else U

    speed = float(np.max(np.linalg.norm(field(X), axis=1)))
    bases = [_tangent_basis(x) for x in X] if sphere else [np.eye(d)] * n
    m = bases[0].shape[1]
    J = np.zeros((n * m, n * m))
    for j in range(n):
        for k in range(m):
            cols = []
            for sign in (1.0, -1.0):  # along great circles on the sphere, straight lines in R^d
                Y = X.copy()
                e = bases[j][:, k]
                Y[j] = X[j] * math.cos(h) + sign * e * math.sin(h) if sphere else X[j] + (sign * h) * e
                cols.append(field(Y))
            dU = (cols[0] - cols[1]) / (2 * h)
            J[:, j * m + k] = np.concatenate([bases[i].T @ dU[i] if sphere else dU[i] for i in range(n)])
    lam = np.linalg.eigvals(J)
    lam = lam[np.argsort(-lam.real, kind="stable")]
    if np.max(np.abs(lam.imag)) <= 1e-7 * max(1e-12, float(np.max(np.abs(lam)))):
        lam = lam.real
    energy = _energy(X, layer.beta * layer.A[0], w) if layer.n_heads == 1 else float("nan")
    return Equilibrium(speed, energy, lam, int(np.sum(lam.real > tol)))
