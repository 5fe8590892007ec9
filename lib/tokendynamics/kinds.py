r"""Attention kinds: how each variant weighs the tokens, and what else it knows about itself.

Every variant has the field :math:`\Gamma_\mu(x_i) = \sum_h \sum_j P^{(h)}_{ij} V_h x_j`; variants differ only in
the weights formed from the scaled scores :math:`s_{ij} = \beta\langle x_i, A x_j\rangle`. An
:class:`AttentionKind` is that weight rule plus optional capabilities (:data:`CAPABILITIES`), asked for by
name: a missing one raises a :class:`~tokendynamics.errors.CapabilityError`, never a default number. Built-in
(:data:`KINDS`): softmax, unnormalized_softmax :math:`e^{s_{ij}}/n`, linear :math:`s_{ij}/n`, l2 (row-softmax
of :math:`-\beta|Qx_i-Kx_j|^2`), sinkhorn (entropic plan for the cost :math:`-s_{ij}`), sigmoid
:math:`\sigma(s_{ij}+b)/n`, relu :math:`\max(s_{ij},0)/n`, hardmax (uniform on each row's argmax set).

References
----------
Paper 1 (Castin et al., arXiv:2501.18322); paper 2 (Li et al., 2026); M. Wortsman et al., arXiv:2309.08586
(ReLU); A. Alcalde, B. Geshkovski, D. Ruiz-Balet, arXiv:2508.09628 (hardmax). CONTRIBUTING, "Add an attention
variant".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np
from scipy.special import expit

from .errors import CapabilityError
from .transport import psd_sqrt, sinkhorn_potentials, sinkhorn_spectrum

__all__ = ["AttentionKind", "Head", "KINDS", "register", "get_kind", "CAPABILITIES"]

#: What a kind may know besides its weights, and what each capability is (quoted in errors).
CAPABILITIES = {
    "masses": "a weight rule for token masses w_j (weighted measures, mean-field quadrature)",
    "second_moment": "a field Gamma(x) = beta V M_2 A^T x that sees the tokens only through their second moment M_2",
    "gaussian": "the affine field (b, M) on Gaussian measures (Gaussian preservation)",
    "covariance": "a covariance equation free of the mean, M = sum_h V_h (I + Sigma G_h)^-1 Sigma C_h",
    "quadratic_covariance": "the quadratic covariance equation of softmax, M = beta V Sigma A^T",
    "clustering_matrix": "the symmetric matrix whose sign decides the clustering limit of the covariance",
    "growth_rate": "a global bound ||Sigma_t|| <= ||Sigma_0|| exp(2ct) (no finite-time blow-up)",
    "mean_decouples": "a mean that moves by d alpha/dt = V alpha whatever the covariance",
    "speed": "a bound on the speed of tokens in a ball, for the stability estimate",
    "lipschitz": "explicit Lipschitz constants of the field, for the stability estimate",
    "solve": "weights that couple all rows (a Sinkhorn-type solve, with a warm start)",
}


class Head(NamedTuple):
    """The matrices of one head, (d, d) or (B, d, d) for a batch; ``beta`` a float or (B, 1, 1); the ``layer``."""

    A: np.ndarray
    V: np.ndarray
    Q: np.ndarray | None
    K: np.ndarray | None
    beta: Any
    layer: Any


def _mT(M):
    return np.swapaxes(M, -1, -2)


def _times(X, M):
    """``X @ M``; a matrix shared by a batch (M 2-D, X (..., n, d)) is applied as one product."""
    if M.ndim == 2 and X.ndim > 2:
        return (X.reshape(-1, X.shape[-1]) @ M).reshape(X.shape[:-1] + (M.shape[-1],))
    return X @ M


def _bilinear_factors(rows, X, head: Head):
    """Scores s_ij = beta <x_i, A x_j> as ``left @ right^T`` (no column term)."""
    return head.beta * _times(rows, head.A), X, None


@dataclass(frozen=True, eq=False)
class AttentionKind:
    r"""One attention kind: its weight rule and its optional capabilities.

    Parameters
    ----------
    name : str
        Its name (by which ``Attention(name, ...)`` finds a kind added by :func:`register`).
    weights, masses : callable ``weights(scores)``, optional ``masses(scores, w)``
        ``scores`` (..., n, n) (a masked pair at :math:`-\infty`) to the weights :math:`w_{ij}` of
        :math:`\Gamma(x_i)=\sum_jw_{ij}Vx_j` for equal masses (include the :math:`1/n`); the rule for token
        masses ``w`` (n,) (without it a kind refuses weighted measures).
    normalised, factored, maskable, fused : bool
        Rows sum to one; the scores need ``Q`` and ``K``, not only :math:`A=Q^\top K`; the kind has a causal
        version; it fits the compiled batch kernel (exponential weights, normalised rows).
    parameters : tuple of str
        The layer options the kind uses (``"bias"``, ``"eps"`` ...); others are refused.
    capabilities, label
        Optional knowledge, by name (:data:`CAPABILITIES`); the name readers see (default: ``name``).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants; CONTRIBUTING, "Add an attention variant".

    Examples
    --------
    >>> import numpy as np
    >>> relu2 = AttentionKind("relu2", lambda s: np.maximum(s, 0.0) ** 2 / s.shape[-1])
    >>> relu2.has("gaussian")
    False
    """

    name: str
    weights: Callable
    masses: Callable | None = None
    normalised: bool = False
    parameters: tuple = ()
    factored: bool = False
    maskable: bool = True
    fused: bool = False
    capabilities: dict | None = None
    label: str = ""
    # fast paths of the built-in kinds: scores as low-rank factors, weights with their row sums apart
    factors: Callable | None = None
    kernel: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"an AttentionKind needs a non-empty name (a str), got {self.name!r}")
        if not callable(self.weights):
            raise TypeError(
                f"the weight rule of kind {self.name!r} must be callable weights(scores), got {self.weights!r}"
            )
        if self.masses is not None and not callable(self.masses):
            raise TypeError(f"masses of kind {self.name!r} must be callable masses(scores, w)")
        caps = dict(self.capabilities or {})
        unknown = sorted(set(caps) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"kind {self.name!r}: unknown capabilities {unknown}; known: {sorted(CAPABILITIES)}")
        if self.masses is not None:
            caps["masses"] = self.masses
        object.__setattr__(self, "capabilities", caps)
        if self.factors is None:
            object.__setattr__(self, "factors", _bilinear_factors)
        if not self.label:
            object.__setattr__(self, "label", self.name)

    def has(self, capability: str) -> bool:
        """Whether the kind has ``capability`` (a name of :data:`CAPABILITIES`).

        Parameters
        ----------
        capability : str
            A capability name.

        Returns
        -------
        bool
        """
        return capability in self.capabilities  # type: ignore[operator]

    def require(self, capability: str, what: str = "this computation", error: type = CapabilityError):
        """The capability ``capability`` of the kind, or an error naming the kind, what is missing and who has it.

        Parameters
        ----------
        capability, what, error
            A name of :data:`CAPABILITIES`, what needs it (in the message), the exception raised.

        Returns
        -------
        object
            The capability (usually a function of a :class:`Head`).
        """
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; known: {sorted(CAPABILITIES)}")
        if not self.has(capability):
            owners = [k for k, kind in KINDS.items() if kind.has(capability)]
            raise error(
                f"{what} needs {CAPABILITIES[capability]} ('{capability}'), which {self.name!r} attention "
                f"does not have; the kinds that have it: {owners}"
            )
        return self.capabilities[capability]  # type: ignore[index]

    def weigh(self, S, w, head: Head, state=None):
        """Weights of the scores ``S`` (modified in place) as ``(W, r, info)``, :math:`P=W/r` row-wise (``r`` None:
        :math:`P=W`), for masses ``w`` (None: uniform).

        Parameters
        ----------
        S, w, head, state
            Scores (..., m, n), masses (n,) or None, the :class:`Head`, a warm-start store (kinds that solve).

        Returns
        -------
        (W, r, info)
        """
        if self.kernel is not None:
            return self.kernel(S, w, head, state)
        if w is None:
            return np.asarray(self.weights(S), dtype=float), None, {}
        return np.asarray(self.require("masses", "a weighted measure (token masses)")(S, w), dtype=float), None, {}

    def __repr__(self) -> str:
        return f"AttentionKind({self.name!r})"


# the built-in weight rules


def _exp_rows(S, w, head, state):
    """exp(S + log w - max) with its row sums: softmax and L2."""
    if w is not None:
        S += _log(w)
    S -= S.max(axis=-1, keepdims=True)
    np.exp(S, out=S)
    return S, S.sum(axis=-1), {}


def _elementwise(h):
    """Kernel of a rule P_ij = w_j h(s_ij) (1/n for equal masses)."""

    def kernel(S, w, head, state):
        W = h(S, head)
        W *= (1.0 / S.shape[-1]) if w is None else w
        return W, None, {}

    return kernel


def _hardmax(S, w, head, state):
    top = S.max(axis=-1, keepdims=True)
    W = (S == top).astype(float)
    if w is not None:
        W *= w
    return W, W.sum(axis=-1), {}


def _sinkhorn(S, w, head, state):
    layer = head.layer
    n = S.shape[-1]
    logw = np.full(n, -math.log(n)) if w is None else _log(w)
    S /= layer.eps
    g0 = None if state is None else state.get("g")
    f, g, it, err = sinkhorn_potentials(
        S, logw, eps=layer.eps, max_iter=layer.sinkhorn_iters, tol=layer.sinkhorn_tol, g0=g0
    )
    if state is not None:
        state["g"] = g
    S += (f[..., :, None] + g[..., None, :]) / layer.eps + logw
    np.exp(S, out=S)
    return S, None, {"iterations": it, "marginal_error": err, "f": f, "g": g}


def _log(w):
    with np.errstate(divide="ignore"):
        return np.log(w)


def _l2_factors(rows, X, head: Head):
    # -beta |Qx_i - Kx_j|^2 = 2 beta <Qx_i, Kx_j> - beta |Kx_j|^2 - beta |Qx_i|^2 (the last cancels in the rows)
    kx = _times(X, _mT(head.K))
    return 2.0 * head.beta * _times(rows, _mT(head.Q)), kx, -head.beta * (kx * kx).sum(-1)[..., None, :]


def _second_moment_field(X, w, s, head: Head, causal: bool):
    r""":math:`\beta V M_2 A^\top x_i` with the (causal, if asked) second moment; no n x n matrix."""
    wx = X / X.shape[-2] if w is None else X * w[..., :, None]
    if not causal:
        return head.beta * _times(X, head.A) @ ((_mT(X) @ wx) @ _mT(head.V))
    # causal: M2_i = sum_{j: s_j <= s_i} w_j x_j x_j^T (ties included), via sorted cumulative sums
    order = np.argsort(s, kind="stable")
    last = np.searchsorted(s[order], s[order], side="right") - 1
    cum = np.cumsum(np.einsum("...ja,...jb->...jab", wx[..., order, :], X[..., order, :]), axis=-3)
    M2 = np.empty_like(cum)
    M2[..., order, :, :] = cum[..., last, :, :]
    return head.beta * np.einsum("...ia,...iab,...cb->...ic", _times(X, head.A), M2, head.V)


# Gaussian closures: the affine field b + Mx on N(alpha, Sigma), per head (batched over leading axes)

# eigenvalues of Sigma^{1/2} below this fraction of the largest (of Sigma: 1e-14) count as zero (Sinkhorn)
_PINV_RTOL = 1e-7


def _tilted(G_C):
    r"""Closure of the exponential kinds: :math:`M=V(I+\Sigma G)^{-1}\Sigma C`, :math:`b=V(I+\Sigma G)^{-1}\alpha`."""

    def closure(mean, cov, head):
        G, C = G_C(head)
        V = head.V
        if G is None:  # softmax: exponential tilting N(alpha + Sigma C x, Sigma)
            M = V @ cov @ C
            return mean @ _mT(V), M, M @ cov
        lhs = np.eye(cov.shape[-1]) + cov @ G  # invertible: cov G has a non-negative real spectrum
        sol = np.linalg.solve(lhs, np.concatenate([mean[..., :, None], cov @ C], axis=-1))
        M = V @ sol[..., :, 1:]
        return (V @ sol[..., :, :1])[..., 0], M, M @ cov

    return closure


def _softmax_cov(head):
    return None, head.beta * _mT(head.A)


def _l2_cov(head):
    KT = _mT(head.K)
    return 2.0 * head.beta * (KT @ head.K), 2.0 * head.beta * (KT @ head.Q)


def _linear_gaussian(mean, cov, head):
    M = (head.V @ (cov + mean[..., :, None] * mean[..., None, :])) @ (head.beta * _mT(head.A))
    return np.zeros(mean.shape), M, M @ cov


def _sinkhorn_gaussian(mean, cov, head):
    r"""With :math:`B=(\beta/\varepsilon)A^\top`: :math:`M\Sigma=VC^\top`,
    :math:`C^\top=\Sigma B\Sigma^{1/2}X\Sigma^{1/2}`."""
    root, root_pinv = psd_sqrt(cov, pinv_rtol=_PINV_RTOL)
    B = (head.beta / head.layer.eps) * _mT(head.A)  # paper 1's A_1 / eps
    sq, W = sinkhorn_spectrum(root, cov, B)
    X = (W * (2.0 / (1.0 + sq))[..., None, :]) @ _mT(W)
    left = cov @ B @ root @ X  # C^T = left @ root
    M = head.V @ (left @ root_pinv)
    return mean @ _mT(head.V) - (M @ mean[..., :, None])[..., 0], M, head.V @ (left @ root)


def _softmax_clustering(head):
    return head.beta * (head.A + _mT(head.A))


def _l2_clustering(head):
    KQ = _mT(head.K) @ head.Q
    scale = max(1.0, float(np.abs(KQ).max()))
    if not np.allclose(KQ, _mT(KQ), rtol=0, atol=1e-12 * scale):
        raise ValueError("the L2 clustering limit needs K^T Q symmetric")
    S = KQ + _mT(KQ)
    KK = _mT(head.K) @ head.K
    if np.sum(np.abs(np.linalg.eigvalsh(S)) > 1e-10 * scale) != np.sum(
        np.linalg.eigvalsh(KK) > 1e-10 * max(1.0, np.abs(KK).max())
    ):
        raise ValueError("the L2 clustering limit needs ker K^T Q = ker K")
    return S


def _l2_growth(head):
    K, Q = head.K, head.Q
    lam = float(np.linalg.eigvalsh(K.T @ K)[0])
    if lam <= 1e-14 * max(1.0, float(np.linalg.norm(K)) ** 2):
        return math.inf
    return float(np.linalg.norm(head.V, 2)) * float(np.linalg.norm(K.T @ Q, 2)) / lam


# stability constants (derived for the book): per head, with a = beta ||A||, v = ||V||, on B(0, R)


def _e(x):
    return math.exp(x) if x < 700 else math.inf


def _norms(head):
    return head.beta * float(np.linalg.norm(head.A, 2)), float(np.linalg.norm(head.V, 2))


def _bounded_speed(head, R):
    return _norms(head)[1] * R


def _softmax_lip(head, R):
    a, v = _norms(head)
    return a * v * R * R, v * (1 + 2 * a * R * R) * _e(2 * a * R * R)


def _l2_lip(head, R):
    a, v = _norms(head)
    q = math.sqrt(head.beta) * float(np.linalg.norm(head.Q, 2))
    k = math.sqrt(head.beta) * float(np.linalg.norm(head.K, 2))
    return 2 * a * v * R * R, v * (1 + 4 * k * (q + k) * R * R) * _e((q + k) ** 2 * R * R)


def _sigmoid_lip(head, R):
    a, v = _norms(head)
    return a * v * R * R / 4, v * (1 + a * R * R / 4)


def _unnormalised_speed(head, R):
    a, v = _norms(head)
    return v * R * _e(a * R * R)


def _unnormalised_lip(head, R):
    a, v = _norms(head)
    return a * v * R * R * _e(a * R * R), v * (1 + a * R * R) * _e(a * R * R)


def _cubic_speed(head, R):
    a, v = _norms(head)
    return a * v * R**3


def _linear_lip(head, R):
    # |max(s, 0)| <= |s| and max(., 0) is 1-Lipschitz: the linear constants hold for ReLU too
    a, v = _norms(head)
    return a * v * R * R, 2 * a * v * R * R


# the registry


_LABELS = {"unnormalized_softmax": "unnormalised softmax", "l2": "L2", "sinkhorn": "Sinkhorn", "relu": "ReLU"}


def _kind(name, kernel, **options) -> AttentionKind:
    """A built-in kind: its kernel, and the public rule ``weights(scores, w=None)`` made from it (the layer's
    default options), which is also its rule for token masses."""

    def rule(S, w=None):
        W, r, _ = kernel(np.array(S, dtype=float), w, _DEFAULT_HEAD, None)
        return W if r is None else W / r[..., None]

    return AttentionKind(name, rule, masses=rule, kernel=kernel, label=_LABELS.get(name, name), **options)


_NORMALISED = {"speed": _bounded_speed}

#: The built-in kinds, by name (the registry: :func:`register` adds to it).
KINDS: dict[str, AttentionKind] = {}


def register(kind: AttentionKind) -> AttentionKind:
    """Add ``kind`` to :data:`KINDS` so that ``Attention(kind.name, ...)`` finds it.

    Parameters
    ----------
    kind : AttentionKind
        A kind whose name is not taken.

    Returns
    -------
    AttentionKind

    References
    ----------
    CONTRIBUTING, "Add an attention variant".
    """
    if not isinstance(kind, AttentionKind):
        raise TypeError(f"register needs an AttentionKind, got {type(kind).__name__}")
    if kind.name in KINDS and KINDS[kind.name] is not kind:
        raise ValueError(f"an attention kind named {kind.name!r} is already registered")
    KINDS[kind.name] = kind
    return kind


def get_kind(kind) -> AttentionKind:
    """The :class:`AttentionKind` named ``kind``, or ``kind`` itself (an unknown name is a ValueError listing them).

    Parameters
    ----------
    kind : str or AttentionKind
        A registered name or a kind.

    Returns
    -------
    AttentionKind

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants.
    """
    if isinstance(kind, AttentionKind):
        return kind
    if isinstance(kind, str) and kind in KINDS:
        return KINDS[kind]
    raise ValueError(f"kind must be one of {tuple(KINDS)} or an AttentionKind, got {kind!r}")


for _k in (
    _kind(
        "softmax",
        _exp_rows,
        normalised=True,
        fused=True,
        capabilities={
            "gaussian": _tilted(_softmax_cov),
            "covariance": _softmax_cov,
            "quadratic_covariance": _softmax_cov,
            "clustering_matrix": _softmax_clustering,
            "lipschitz": _softmax_lip,
            **_NORMALISED,
        },
    ),
    _kind(
        "unnormalized_softmax",
        _elementwise(lambda S, head: np.exp(S, out=S)),
        capabilities={"speed": _unnormalised_speed, "lipschitz": _unnormalised_lip},
    ),
    _kind(
        "linear",
        _elementwise(lambda S, head: np.where(np.isneginf(S), 0.0, S)),
        capabilities={
            "second_moment": _second_moment_field,
            "gaussian": _linear_gaussian,
            "speed": _cubic_speed,
            "lipschitz": _linear_lip,
        },
    ),
    _kind(
        "l2",
        _exp_rows,
        normalised=True,
        factored=True,
        fused=True,
        factors=_l2_factors,
        capabilities={
            "gaussian": _tilted(_l2_cov),
            "covariance": _l2_cov,
            "clustering_matrix": _l2_clustering,
            "growth_rate": _l2_growth,
            "lipschitz": _l2_lip,
            **_NORMALISED,
        },
    ),
    _kind(
        "sinkhorn",
        _sinkhorn,
        normalised=True,
        maskable=False,
        parameters=("eps", "sinkhorn_iters", "sinkhorn_tol"),
        capabilities={
            "solve": sinkhorn_potentials,
            "gaussian": _sinkhorn_gaussian,
            "growth_rate": lambda head: float(np.linalg.norm(head.V, 2)),
            "mean_decouples": True,
            **_NORMALISED,
        },
    ),
    _kind(
        "sigmoid",
        _elementwise(lambda S, head: expit(S + head.layer.bias)),
        parameters=("bias",),
        capabilities={"lipschitz": _sigmoid_lip, **_NORMALISED},
    ),
    _kind(
        "relu",
        _elementwise(lambda S, head: np.maximum(S, 0.0, out=S)),
        capabilities={"speed": _cubic_speed, "lipschitz": _linear_lip},
    ),
    _kind("hardmax", _hardmax, normalised=True, capabilities=dict(_NORMALISED)),
):
    register(_k)


# the default options of a layer (what ``weights(scores)`` of a built-in kind uses)
_DEFAULTS = SimpleNamespace(bias=0.0, eps=1.0, sinkhorn_iters=10_000, sinkhorn_tol=1e-12)
_DEFAULT_HEAD = Head(np.zeros((0, 0)), np.zeros((0, 0)), None, None, 1.0, _DEFAULTS)
