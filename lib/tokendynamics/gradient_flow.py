r"""The gradient-flow structure of attention dynamics: interaction energies, twisted metrics, non-convexity.

Paper 1 announces a gradient-flow view of the Transformer PDE (Wasserstein and Bures–Wasserstein geometry, entropic
transport, a "twisted" metric) and ties the non-convexity of the energy to several equilibria and blow-up. Its text
was not available: the formulas are the book's reconstruction, derived and checked numerically; the names
(:math:`d_M`, which energy) are ours [I]. The energies of a one-head layer are those of its score matrix
:math:`\beta A` (paper 1's :math:`A_1` is :math:`A^\top`): :math:`E_A(\mu)=\tfrac12\iint e^{\langle x,Ay\rangle}
d\mu\,d\mu`, its variations, the twisted distance :math:`d_M`, the Sinkhorn energy
:math:`F_\varepsilon=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)`, Bures–Wasserstein flows and the linearised flow. No
function forms more than one :math:`n\times n` matrix at a time.

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

from .attention import BLOCK_ENTRIES, Attention, sinkhorn_failure, velocity_unchecked
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
)

__all__ = [
    "layer_matrices", "interaction_energy", "first_variation", "first_variation_gradient",
    "energy_rate", "dissipation", "energy_curve", "kinetic_norm", "gaussian_interaction_energy",
"gaussian_translation_hessian", "twisted_matrix", "energy_sign",
    "twisted_wasserstein", "twisted_bures_wasserstein", "sinkhorn_energy", "sinkhorn_energy_gradient",
    "sinkhorn_energy_empirical", "bw_gradient_velocity", "finite_difference_gradient", "gaussian_slope",
    "second_variation", "dirac_second_variation", "Equilibrium", "linearize",
]  # fmt: skip

_LOG_MAX = 700.0  # exp(700) ~ 1e304: above this a value is reported as an overflow

_REF = "References\n----------\nPaper 1 (Castin et al., arXiv:2501.18322), reconstructed in the book: "
_REF += "``chapters/03_gradient_flow.md``,\n"
GF_DOCS = {
    "X": "X : array_like (n, d)\n    Tokens :math:`x_i`, the atoms of :math:`\\mu=\\sum_iw_i\\delta_{x_i}`.",
    "weights": "weights : array_like (n,), optional\n    Token masses :math:`w_i` summing to 1 (None: :math:`1/n`).",
    "layer": "layer : Attention\n    One head; the energy is that of its score matrix :math:`\\beta A` (any kind).",
    "at": "at : array_like (m, d), optional\n    Points of evaluation (None: the tokens).",
    "gradient": "grad_mean, grad_cov, cov : array_like (d,), (d, d), (d, d)\n    The gradients :math:`g=\\nabla_\\alpha"
    " F`, :math:`G=\\nabla_\\Sigma F` (symmetric) at the Gaussian, and its covariance :math:`\\Sigma`.",
    "M": "M : array_like (d, d), optional\n    Symmetric positive definite matrix of :math:`d_M` (None: the identity).",
    "gaussian": "mean, cov : array_like (d,), (d, d)\n    The Gaussian :math:`N(\\alpha,\\Sigma)` (singular allowed).",
    "sinkhorn_layer": "layer : Attention\n    One head, symmetric :math:`\\beta A` (cost :math:`-\\beta\\langle x,Ay"
    "\\rangle`), regularisation :math:`\\varepsilon` = ``layer.eps``.",
    "ref_energy": _REF + "equation (eq-gf-energy).",
    "ref_sign": _REF + "equation (eq-gf-sign-rule).",
    "ref_twisted": _REF + "equation (eq-gf-twisted).",
    "ref_hessian": _REF + "equation (eq-gf-hessian).",
    "ref_sinkhorn": _REF + "equation (eq-gf-sinkhorn-energy); Sander et al., *Sinkformers*, AISTATS 2022.",
    "ref_bw": _REF + "equation (eq-gf-twisted); R. Bhatia, T. Jain, Y. Lim, Expo. Math. 37 (2019).",
}


def _row_blocks(n_rows: int, n_cols: int, matrices: int = 1) -> list[slice]:
    """Blocks of rows such that ``matrices`` blocks of (rows x n_cols) hold at most one n x n matrix."""
    cap = max(1, BLOCK_ENTRIES // max(1, matrices * n_cols))
    block = max(1, min(n_rows, cap, -(-n_rows // matrices)))
    return [slice(start, min(n_rows, start + block)) for start in range(0, n_rows, block)]


def _exp_checked(logv: np.ndarray | float, what: str):
    if np.any(np.asarray(logv) > _LOG_MAX):
        raise NonFiniteError(
            f"{what} overflows float64 (its logarithm is {float(np.max(logv)):.4g}); use log=True or smaller scores"
        )
    return np.exp(logv)


@fill_doc(GF_DOCS)
def layer_matrices(layer):
    r"""Score and value matrices :math:`(\beta A, V)` of one head (kernel :math:`e^{\langle x,\beta Ay\rangle}`).

    Parameters
    ----------
    layer : Attention
        One layer, one head.

    Returns
    -------
    A, V : numpy.ndarray (d, d)

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


def _partition(X, A, w, P, gradient: bool, log: bool = False):
    """(Z_mu, grad Z_mu or None) at the points P (``log``: log Z_mu, grad log Z_mu), by row blocks in log-sum-exp."""
    n, d = X.shape
    m = P.shape[0]
    logZ = np.empty(m)
    G = np.zeros((m, d)) if gradient else None
    AX = X @ A.T  # rows A x_j
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    for rows in _row_blocks(m, n):
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
        return logZ, G
    Z = _exp_checked(logZ, "the partition function Z_mu(x)")
    return Z, None if G is None else G * Z[:, None]


def _energy(X, A, w, log: bool = False) -> float:
    """E_A(mu) = 1/2 sum_i w_i Z_mu(x_i), summed in log-sum-exp."""
    with np.errstate(divide="ignore"):
        logE = math.log(0.5) + float(logsumexp(_partition(X, A, w, X, False, log=True)[0] + np.log(w)))
    return logE if log else float(_exp_checked(logE, "the interaction energy E_A"))


@fill_doc(GF_DOCS)
def interaction_energy(X, layer, weights=None, *, log: bool = False) -> float:
    r"""Interaction energy :math:`E_A(\mu)=\tfrac12\sum_{i,j}w_iw_je^{\langle x_i,Ax_j\rangle}` of the layer's
    :math:`\beta A` (:math:`E_A=E_{A^\top}`); for symmetric :math:`A` unnormalised attention with :math:`V=A` is its
    :math:`W_2` gradient ascent.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    log : bool
        Return :math:`\log E_A(\mu)` (never overflows; NonFiniteError otherwise).

    Returns
    -------
    float

    %(ref_energy)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    return _energy(X, A, w, validate_flag(log, "log"))


def _symmetrised(X, A, w, P, gradient: bool):
    """Z (or grad Z) of A, or for a non-symmetric A the mean of those of A and A^T: the first variation of E_A."""
    part = lambda B: _partition(X, B, w, P, gradient)[int(gradient)]
    if np.max(np.abs(A - A.T)) <= 1e-12 * max(1.0, float(np.max(np.abs(A)))):  # symmetric
        return part(A)
    return 0.5 * (part(A) + part(A.T))


@fill_doc(GF_DOCS)
def first_variation(X, layer, weights=None, at=None) -> np.ndarray:
    r"""First variation :math:`\frac{\delta E_A}{\delta\mu}(x)=\tfrac12\int(e^{\langle x,Ay\rangle}+e^{\langle y,Ax
    \rangle})d\mu(y)`: :math:`\frac{d}{dh}E_A(\mu+h\chi)=\int\frac{\delta E_A}{\delta\mu}d\chi`.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    %(at)s

    Returns
    -------
    numpy.ndarray (m,)

    %(ref_energy)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    return _symmetrised(X, A, w, X if at is None else validate_tokens(at, X.shape[1], "at"), False)


@fill_doc(GF_DOCS)
def first_variation_gradient(X, layer, weights=None, at=None) -> np.ndarray:
    r"""Gradient :math:`\nabla_x\frac{\delta E_A}{\delta\mu}(x)=\tfrac12\int(Ay\,e^{\langle x,Ay\rangle}+A^\top
    y\,e^{\langle y,Ax\rangle})d\mu(y)`; :math:`\partial E_A/\partial x_i=w_i\nabla\frac{\delta E_A}{\delta\mu}(x_i)`.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    %(at)s

    Returns
    -------
    numpy.ndarray (m, d)

    %(ref_energy)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    return _symmetrised(X, A, w, X if at is None else validate_tokens(at, X.shape[1], "at"), True)


@fill_doc(GF_DOCS)
def energy_rate(X, layer, weights=None, *, field=None) -> float:
    r"""Rate :math:`\frac{d}{dt}E_{\beta A}(\mu_t)=\int\langle\nabla\frac{\delta E}{\delta\mu},\Gamma_\mu\rangle\,d\mu`
    of the layer's energy along its own flow.

    Parameters
    ----------
    %(X)s
    %(layer)s
    %(weights)s
    field : array_like (n, d), optional
        Velocity :math:`\Gamma_\mu(x_i)` at the tokens (default: the layer's).

    Returns
    -------
    float

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


@fill_doc(GF_DOCS)
def dissipation(X, layer, weights=None) -> float:
    r"""The sign-rule form :math:`\int\langle\nabla Z_\mu,M\nabla Z_\mu\rangle Z_\mu^{-k}d\mu`, :math:`M=VA^{-1}`, of
    :math:`\frac{d}{dt}E_A(\mu_t)` (:func:`energy_rate`): :math:`k=1` for softmax, 0 for unnormalised softmax.

    Parameters
    ----------
    %(X)s
    layer : Attention
        Softmax or unnormalised softmax, one head, symmetric invertible score matrix.
    %(weights)s

    Returns
    -------
    float

    %(ref_sign)s
    """
    X, w, A, V = _measure(X, weights, layer)
    M = _twisted(A, V)
    Z, g = _partition(X, A, w, X, True)
    q = np.einsum("ij,ij->i", g, g @ M.T)  # |grad Z|_M^2, over Z for softmax
    return float(np.sum(w * (q / Z if layer.kind.normalised else q)))


@fill_doc(GF_DOCS)
def energy_curve(Xs, layer, weights=None) -> np.ndarray:
    r""":math:`E_{\beta A}(\mu_t)` (:func:`interaction_energy`) of each cloud of a stack, e.g. ``Trajectory.X``.

    Parameters
    ----------
    Xs : array_like (m, n, d)
        The clouds at m stored times.
    %(layer)s
    %(weights)s

    Returns
    -------
    numpy.ndarray (m,)

    %(ref_energy)s
    """
    A, _ = layer_matrices(layer)
    Xs = real_array(Xs, "Xs")
    if Xs.ndim != 3:
        raise ValueError(f"Xs must have shape (times, n, d), got {Xs.shape}")
    measures = (validate_measure(X, weights, layer.d, name="Xs") for X in Xs)
    return np.array([_energy(X, A, w) for X, w in measures])


@fill_doc(GF_DOCS)
def kinetic_norm(U, weights=None, M=None) -> float:
    r"""Length :math:`(\int\langle M^{-1}u,u\rangle d\mu)^{1/2}` of a velocity field in :math:`d_M` (:math:`W_2` for
    :math:`M=I`), a bound on the metric speed of :math:`\mu` under :math:`\dot x=u(x)`.

    Parameters
    ----------
    U : array_like (n, d)
        The field :math:`u(x_i)` at the tokens.
    %(weights)s
    %(M)s

    Returns
    -------
    float

    %(ref_twisted)s
    """
    U, w = validate_measure(U, weights, name="U")
    if M is None:
        q = np.einsum("ij,ij->i", U, U)
    else:
        q = np.einsum("ij,ij->i", U, np.linalg.solve(validate_spd(M, "M", U.shape[1]), U.T).T)
    return float(math.sqrt(max(0.0, float(np.sum(w * q)))))


def _gaussian_layer(mean, cov, layer):
    A, _ = layer_matrices(layer)
    return (*validate_gaussian(mean, cov, layer.d), A)


def _log_energy_pieces(mean, cov, A):
    """(log E or +inf, the quadratic form G of log E in the mean) for N(mean, cov)."""
    d = mean.shape[0]
    R = psd_sqrt(cov)
    Qm = A @ cov @ A.T
    K = R @ Qm @ R
    K = 0.5 * (K + K.T)
    IK = np.eye(d) - K
    lam = np.linalg.eigvalsh(IK)
    if lam[0] <= 1e-13:
        return math.inf, None
    B = A + Qm  # b + Q alpha = (A + Q) alpha
    G = A + A.T + Qm + B.T @ R @ np.linalg.inv(IK) @ R @ B
    G = 0.5 * (G + G.T)
    return math.log(0.5) - 0.5 * float(np.sum(np.log(lam))) + 0.5 * float(mean @ G @ mean), G


@fill_doc(GF_DOCS)
def gaussian_interaction_energy(mean, cov, layer, *, log: bool = False) -> float:
    r"""Closed form of :math:`E_A(N(\alpha,\Sigma))=\tfrac12\,\mathbb E\,e^{\langle x,Ay\rangle}` (``inf`` unless
    :math:`K\prec I`):

    .. math:: E_A=\tfrac12\det(I-K)^{-1/2}e^{\frac12\alpha^\top G\alpha},\ G=A+A^\top+Q+(A+Q)^\top R(I-K)^{-1}R(A+Q),

    :math:`R=\Sigma^{1/2}`, :math:`Q=A\Sigma A^\top`, :math:`K=RQR`.

    Parameters
    ----------
    %(gaussian)s
    %(layer)s
    log : bool
        Return :math:`\log E_A`.

    Returns
    -------
    float

    %(ref_energy)s
    """
    logE, _ = _log_energy_pieces(*_gaussian_layer(mean, cov, layer))
    if log or logE == math.inf:
        return logE
    return float(_exp_checked(logE, "the Gaussian interaction energy"))


@fill_doc(GF_DOCS)
def gaussian_translation_hessian(mean, cov, layer, w) -> float:
    r""":math:`\frac{d^2}{ds^2}E_A(N(\alpha+sw,\Sigma))|_{s=0}=E_A[(w^\top G\alpha)^2+w^\top Gw]` (:math:`G` of
    :func:`gaussian_interaction_energy`; for :math:`A=-I`, :math:`G=-2(I+\Sigma)^{-1}`: concave along some translation).

    Parameters
    ----------
    %(gaussian)s
    %(layer)s
    w : array_like (d,)
        Direction of the translation.

    Returns
    -------
    float

    %(ref_hessian)s
    """
    mean, cov, A = _gaussian_layer(mean, cov, layer)
    w = validate_finite_array(w, "w")
    if w.shape != mean.shape:
        raise ValueError(f"w must have shape {mean.shape}, got {w.shape}")
    logE, G = _log_energy_pieces(mean, cov, A)
    if logE == math.inf:
        return math.inf
    return float(_exp_checked(logE, "the Gaussian interaction energy")) * (float(w @ G @ mean) ** 2 + float(w @ G @ w))


def _twisted(A, V):
    A = validate_symmetric(A)
    lam = np.linalg.eigvalsh(A)
    if np.min(np.abs(lam)) <= 1e-12 * max(1.0, float(np.max(np.abs(lam)))):
        raise ValueError("A must be invertible to define M = V A^{-1}")
    return np.linalg.solve(A.T, V.T).T


@fill_doc(GF_DOCS)
def twisted_matrix(layer) -> np.ndarray:
    r"""The matrix :math:`M=V(\beta A)^{-1}` (symmetric invertible :math:`A`): unnormalised attention is
    :math:`M\nabla\frac{\delta E_A}{\delta\mu}`, softmax :math:`M\nabla\frac{\delta E_A}{\delta\mu}/Z_\mu`, Sinkhorn
    :math:`-M\nabla\frac{\delta F_\varepsilon}{\delta\mu}`: gradient flows for :math:`d_{\pm M}` (definite :math:`M`).

    Parameters
    ----------
    %(layer)s

    Returns
    -------
    numpy.ndarray (d, d)

    %(ref_twisted)s
    """
    return _twisted(*layer_matrices(layer))


@fill_doc(GF_DOCS)
def energy_sign(layer) -> int:
    r"""Sign rule of :math:`\frac{d}{dt}E_A` (:func:`dissipation`): ``+1`` if :math:`M+M^\top\succeq0`, ``-1`` if
    :math:`\preceq0`, ``0`` if indefinite (eigenvalues within :math:`10^{-12}\|M+M^\top\|` count as 0).

    Parameters
    ----------
    %(layer)s

    Returns
    -------
    int

    %(ref_sign)s
    """
    M = twisted_matrix(layer)
    lam = np.linalg.eigvalsh(M + M.T)
    tol = 1e-12 * max(1.0, float(np.max(np.abs(lam))))
    return 1 if lam[0] >= -tol else -1 if lam[-1] <= tol else 0


@fill_doc(GF_DOCS)
def twisted_wasserstein(X, Y, M, weights=None, *, method: str = "exact") -> float:
    r""":math:`d_M(\mu,\nu)^2=\min_\pi\int\langle M^{-1}(x-y),x-y\rangle d\pi=W_2((M^{-1/2})_\#\mu,(M^{-1/2})_\#\nu)^2`,
    the twisted Wasserstein distance (name [I]).

    Parameters
    ----------
    X, Y : array_like (n, d), (m, d)
        Atoms of :math:`\mu` and :math:`\nu`.
    M : array_like (d, d)
        Symmetric positive definite.
    weights : None or (a, b)
        Masses of the atoms (uniform if None).
    method : {"exact", "auto", "sliced"}
        Solver of :func:`~tokendynamics.transport.wasserstein`.

    Returns
    -------
    float
        :math:`d_M(\mu,\nu)` (not its square).

    %(ref_twisted)s
    """
    X = validate_tokens(X, name="X")
    Y = validate_tokens(Y, X.shape[1], "Y")
    R = np.linalg.inv(psd_sqrt(validate_spd(M, "M", X.shape[1])))  # M^{-1/2}
    return wasserstein(X @ R, Y @ R, 2, weights, method=method)


@fill_doc(GF_DOCS)
def twisted_bures_wasserstein(m1, S1, m2, S2, M) -> float:
    """:math:`d_M` between Gaussians: the Bures–Wasserstein distance of the :math:`M^{-1/2}`-transformed Gaussians.

    Parameters
    ----------
    m1, S1, m2, S2 : array_like (d,), (d, d)
        Means and covariances of the two Gaussians.
    M : array_like (d, d)
        Symmetric positive definite.

    Returns
    -------
    float

    %(ref_twisted)s
    """
    m1, S1 = validate_gaussian(m1, S1, mean_name="m1", name="S1")
    m2, S2 = validate_gaussian(m2, S2, m1.shape[0], mean_name="m2", name="S2")
    R = np.linalg.inv(psd_sqrt(validate_spd(M, "M", m1.shape[0])))
    return bures_wasserstein(R @ m1, R @ S1 @ R, R @ m2, R @ S2 @ R)


def _sinkhorn_spectrum(mean, cov, layer):
    """(mean, A, eps, R, U, s): R = cov^{1/2}, s_i = sqrt(1 + 4 h_i / eps^2), (h, U) the eigen-decomposition of
    R A cov A R (the spectral computation of the Sinkhorn Gaussian ODE, kernel A / eps)."""
    mean, cov, A = _gaussian_layer(mean, cov, layer)
    A = validate_symmetric(A, d=mean.shape[0])
    R = psd_sqrt(cov)
    s, U = sinkhorn_spectrum(R, cov, A / layer.eps)
    return mean, A, layer.eps, R, U, s


@fill_doc(GF_DOCS)
def sinkhorn_energy(mean, cov, layer) -> float:
    r"""Closed form of :math:`F_\varepsilon(N(\alpha,\Sigma))=\tfrac12\mathrm{OT}_\varepsilon(\mu,\mu)`, cost
    :math:`-\langle x,Ay\rangle`, of whose :math:`W_2` gradient flow Sinkhorn attention with :math:`V=\beta A` is:

    .. math:: F_\varepsilon=-\tfrac12\alpha^\top A\alpha-\frac\varepsilon4\sum_i\Big[s_i-1-\log\frac{1+s_i}2\Big],\quad
              s_i=\sqrt{1+4h_i/\varepsilon^2},\ h_i=\operatorname{eig}_i(\Sigma^{1/2}A\Sigma A\Sigma^{1/2}).

    Parameters
    ----------
    %(gaussian)s
    %(sinkhorn_layer)s

    Returns
    -------
    float

    %(ref_sinkhorn)s
    """
    mean, A, eps, _, _, s = _sinkhorn_spectrum(mean, cov, layer)
    return float(-0.5 * mean @ A @ mean - 0.25 * eps * np.sum(s - 1.0 - np.log((1.0 + s) / 2.0)))


@fill_doc(GF_DOCS)
def sinkhorn_energy_gradient(mean, cov, layer):
    r"""Gradient :math:`\nabla_\alpha F_\varepsilon=-A\alpha`, :math:`\nabla_\Sigma F_\varepsilon=-\frac1{2\varepsilon}
    A\Sigma^{1/2}X\Sigma^{1/2}A`, :math:`X=2(I+(I+4H/\varepsilon^2)^{1/2})^{-1}`,
    :math:`H=\Sigma^{1/2}A\Sigma A\Sigma^{1/2}`, of :func:`sinkhorn_energy` (derived here).

    Parameters
    ----------
    %(gaussian)s
    %(sinkhorn_layer)s

    Returns
    -------
    grad_mean, grad_cov : numpy.ndarray (d,), (d, d)

    %(ref_sinkhorn)s
    """
    mean, A, eps, R, U, s = _sinkhorn_spectrum(mean, cov, layer)
    X = (U * (2.0 / (1.0 + s))) @ U.T
    G = -(0.5 / eps) * (A @ R @ X @ R @ A)
    return -A @ mean, 0.5 * (G + G.T)


@fill_doc(GF_DOCS)
def sinkhorn_energy_empirical(X, layer, weights=None) -> float:
    r""":math:`F_\varepsilon(\mu)=\tfrac12(\int f\,d\mu+\int g\,d\mu)` of :math:`\mu=\sum_iw_i\delta_{x_i}` by the
    log-domain Sinkhorn of Sinkhorn attention; its gradient in token :math:`i` is :math:`-w_i\Gamma_\mu(x_i)` for
    :math:`V=\beta A`.

    Parameters
    ----------
    %(X)s
    %(sinkhorn_layer)s
    %(weights)s

    Returns
    -------
    float

    %(ref_sinkhorn)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    A = validate_symmetric(A, d=X.shape[1])
    eps, tol = layer.eps, layer.sinkhorn_tol
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    f, g, it, err = sinkhorn_potentials((X @ A) @ X.T / eps, logw, eps=eps, max_iter=layer.sinkhorn_iters, tol=tol)
    if not err <= tol:
        raise ConvergenceError(sinkhorn_failure(it, err, layer))
    return float(0.5 * (w @ f + w @ g))


def _gradient_data(grad_mean, grad_cov, cov, M):
    """Validated (g, G, Sigma, M) of a Bures–Wasserstein gradient: M = I when None."""
    g = validate_finite_array(grad_mean, "grad_mean", ndim=1)
    d = g.shape[0]
    G = validate_symmetric(grad_cov, "grad_cov", d)
    S = validate_covariance(cov, "cov", d)
    return g, G, S, np.eye(d) if M is None else validate_spd(M, "M", d)


@fill_doc(GF_DOCS)
def bw_gradient_velocity(grad_mean, grad_cov, cov, M=None):
    r"""Velocity :math:`(\dot\alpha,\dot\Sigma)=(-Mg,-2(MG\Sigma+\Sigma GM))` of the (twisted) Bures–Wasserstein
    gradient flow: tokens move with :math:`-M(g+2G(x-\alpha))`.

    Parameters
    ----------
    %(gradient)s
    %(M)s

    Returns
    -------
    mean_dot, cov_dot : numpy.ndarray (d,), (d, d)

    %(ref_bw)s
    """
    g, G, S, M = _gradient_data(grad_mean, grad_cov, cov, M)
    MGS = M @ G @ S
    return -M @ g, -2.0 * (MGS + MGS.T)


@fill_doc(GF_DOCS)
def finite_difference_gradient(fun: Callable, mean, cov, h: float = 1e-5):
    r"""Central differences :math:`(\nabla_\alpha F,\nabla_\Sigma F)` of ``fun(mean, cov)`` along
    :math:`\Sigma+t(E_{ij}+E_{ji})/2` (so :math:`dF=\langle g,d\alpha\rangle+\operatorname{tr}(G\,d\Sigma)`;
    :math:`\Sigma\succ2hI`).

    Parameters
    ----------
    fun : callable
        ``fun(mean, cov) -> float``.
    %(gaussian)s
    h : float
        Step (error :math:`O(h^2)`).

    Returns
    -------
    g, G : numpy.ndarray (d,), (d, d)

    %(ref_bw)s
    """
    if not callable(fun):
        raise TypeError(f"fun must be a callable fun(mean, cov), got {type(fun).__name__}")
    mean, cov = validate_gaussian(mean, cov)
    h, low = validate_positive(h, "h"), np.linalg.eigvalsh(cov)[0]
    if low <= 2 * h:
        raise ValueError(f"finite differences need cov > {2 * h:g} I; its smallest eigenvalue is {low:.3g}")
    d = mean.shape[0]
    g = validate_finite_array(
        [(fun(mean + e, cov) - fun(mean - e, cov)) / (2 * h) for e in h * np.eye(d)], "fun's values"
    )
    G = np.zeros((d, d))
    for i, j in zip(*np.triu_indices(d)):
        E = np.zeros((d, d))
        E[i, j] += 0.5 * h
        E[j, i] += 0.5 * h
        G[i, j] = G[j, i] = (fun(mean, cov + E) - fun(mean, cov - E)) / (2 * h)
    return g, G


@fill_doc(GF_DOCS)
def gaussian_slope(grad_mean, grad_cov, cov, M=None) -> float:
    r"""Slope :math:`(g^\top Mg+4\operatorname{tr}(GMG\Sigma))^{1/2}` of an energy at :math:`N(\alpha,\Sigma)` in
    :math:`d_M` (along its :math:`d_M` gradient flow :math:`\frac{d}{dt}F=-\text{slope}^2`).

    Parameters
    ----------
    %(gradient)s
    %(M)s

    Returns
    -------
    float

    %(ref_bw)s
    """
    g, G, S, M = _gradient_data(grad_mean, grad_cov, cov, M)
    return float(math.sqrt(max(0.0, float(g @ M @ g) + 4.0 * float(np.trace(G @ M @ G @ S)))))


@fill_doc(GF_DOCS)
def second_variation(X, U, layer, weights=None) -> float:
    r"""Second variation :math:`\frac{d^2}{ds^2}E_A((\mathrm{Id}+s\,u)_\#\mu)|_{s=0}` (the Hessian for symmetric
    :math:`A`; negative: concave along :math:`u`):

    .. math:: \tfrac12\sum_{i,j}w_iw_je^{\langle x_i,Ax_j\rangle}\big[(\langle u_i,Ax_j\rangle+\langle x_i,Au_j
              \rangle)^2+2\langle u_i,Au_j\rangle\big].

    Parameters
    ----------
    %(X)s
    U : array_like (n, d)
        Displacement :math:`u(x_i)`.
    %(layer)s
    %(weights)s

    Returns
    -------
    float

    %(ref_hessian)s
    """
    X, w, A, _ = _measure(X, weights, layer)
    n = X.shape[0]
    U = real_array(U, "U")
    if U.shape != X.shape or not np.all(np.isfinite(U)):
        raise ValueError(f"U must be a finite array of the tokens' shape {X.shape}, got {U.shape}")
    AX, AU = X @ A.T, U @ A.T  # rows A x_j, A u_j
    blocks = _row_blocks(n, n, matrices=3)  # three kernel blocks alive at a time
    top = max(float(np.max(X[rows] @ AX.T)) for rows in blocks)  # global shift of the exponent
    total = 0.0
    for rows in blocks:
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


@fill_doc(GF_DOCS)
def dirac_second_variation(x0, w0, layer) -> float:
    r"""Second variation at :math:`\delta_{x_0}` along :math:`w_0`, :math:`\tfrac12e^{\langle x_0,Ax_0\rangle}
    [(\langle w_0,Ax_0\rangle+\langle x_0,Aw_0\rangle)^2+2\langle w_0,Aw_0\rangle]` (:math:`-|w_0|^2` at
    :math:`\delta_0` for :math:`A=-I`: not displacement convex).

    Parameters
    ----------
    x0, w0 : array_like (d,)
        The Dirac mass and its displacement.
    %(layer)s

    Returns
    -------
    float

    %(ref_hessian)s
    """
    A, _ = layer_matrices(layer)
    x0 = np.atleast_1d(validate_finite_array(x0, "x0"))
    w0 = validate_finite_array(w0, "w0")
    if x0.shape != (layer.d,) or w0.shape != x0.shape:
        raise ValueError(f"x0 and w0 must have shape ({layer.d},) like the layer, got {x0.shape} and {w0.shape}")
    q, lin = float(x0 @ A @ x0), float(w0 @ A @ x0 + x0 @ A @ w0)
    return 0.5 * float(_exp_checked(q, "the energy at the Dirac mass")) * (lin**2 + 2.0 * float(w0 @ A @ w0))


@fill_doc(GF_DOCS)
@dataclass(frozen=True)
class Equilibrium:
    r"""The linearised flow at one configuration (:func:`linearize`).

    Attributes
    ----------
    speed : float
        :math:`\max_i|\Gamma_\mu(x_i)|` (tangential on the sphere): 0 at an equilibrium.
    energy : float
        :math:`E_{\beta A}(\mu)`.
    eigenvalues : array
        Of the Jacobian, by decreasing real part.
    unstable : int
        Eigenvalues with real part above ``tol``.

    %(ref_hessian)s
    """

    speed: float
    energy: float
    eigenvalues: np.ndarray
    unstable: int

    @property
    def growth_rate(self) -> float:
        """The largest real part of the eigenvalues."""
        return float(np.real(self.eigenvalues[0]))


def _tangent_basis(x: np.ndarray) -> np.ndarray:
    """An orthonormal basis (d, d - 1) of the tangent space x^perp of the unit sphere at x (d = 2: the angle)."""
    if x.shape[0] == 2:
        return np.array([[-x[1]], [x[0]]])
    return np.linalg.qr(np.column_stack([x, np.eye(x.shape[0])]))[0][:, 1:]


@fill_doc(GF_DOCS)
def linearize(X, layer, weights=None, *, sphere: bool = False, h: float = 1e-6, tol: float = 1e-9):
    r"""Speed, energy and spectrum of the linearised flow :math:`\dot x_i=\Gamma_\mu(x_i)` at ``X``, by central
    differences in the :math:`x_j` or, on the sphere, along great circles (:math:`n(d-1)` directions); on the circle
    with :math:`A=V=I` softmax's antipodal pair grows at :math:`2/(1+e^{2\beta})`.

    Parameters
    ----------
    %(X)s
    layer : Attention
        One layer (any kind).
    %(weights)s
    sphere : bool
        Tokens on the unit sphere (unit rows of ``X``).
    h, tol : float
        Finite-difference step; real parts above ``tol`` count as unstable.

    Returns
    -------
    Equilibrium

    %(ref_hessian)s
    """
    layer = validate_instance(layer, Attention, "layer", "an Attention")
    X, w = validate_measure(X, weights, layer.d)
    n, d = X.shape
    if sphere and np.max(np.abs(np.linalg.norm(X, axis=1) - 1)) > 1e-9:
        raise ValueError("sphere=True needs unit-norm tokens")
    h = validate_positive(h, "h")
    tol, sphere = validate_positive(tol, "tol", allow_zero=True), validate_flag(sphere, "sphere")
    s = np.arange(n, dtype=float)

    def field(Y):
        U = velocity_unchecked(Y, layer, w, s)
        return U - np.sum(U * Y, axis=1, keepdims=True) * Y if sphere else U

    speed = float(np.max(np.linalg.norm(field(X), axis=1)))
    bases = [_tangent_basis(x) for x in X] if sphere else [np.eye(d)] * n

    def moved(j, e, t):  # token j moved along a great circle on the sphere, a straight line in R^d
        Y = X.copy()
        Y[j] = X[j] * math.cos(t) + e * math.sin(t) if sphere else X[j] + t * e
        return field(Y)

    dUs = [(moved(j, e, h) - moved(j, e, -h)) / (2 * h) for j in range(n) for e in bases[j].T]
    lam = np.linalg.eigvals(np.column_stack([np.concatenate([B.T @ u for B, u in zip(bases, dU)]) for dU in dUs]))
    lam = lam[np.argsort(-lam.real, kind="stable")]
    if np.max(np.abs(lam.imag)) <= 1e-7 * max(1e-12, float(np.max(np.abs(lam)))):
        lam = lam.real
    energy = _energy(X, layer.beta * layer.A[0], w) if layer.n_heads == 1 else float("nan")
    return Equilibrium(speed, energy, lam, int(np.sum(lam.real > tol)))
