r"""One description of a self-attention layer and the one velocity field all variants share.

Convention (both papers, library-wide): the score of query token :math:`x` on key token
:math:`y` is :math:`\langle Qx, Ky\rangle = \langle x, A y\rangle` with :math:`A = Q^\top K`,
multiplied by the inverse temperature :math:`\beta`; the value map sends :math:`y` to :math:`Vy`.
Paper 1's official code writes the score as :math:`\langle A_1 x, y\rangle`, i.e. :math:`A_1 = A^\top`
in the library's convention.

For a weighted empirical measure :math:`\mu = \sum_j w_j \delta_{x_j}` every variant has the form

.. math::  \Gamma_\mu(x_i) = \sum_h \sum_j P^{(h)}_{ij}\, V_h x_j ,

and the variants differ only in how the attention matrix :math:`P^{(h)}` is formed
(:func:`attention_matrix`): row-softmax of the scores (softmax, L2), the scores themselves
(linear), their exponential (unnormalised softmax), their sigmoid, or the entropic optimal-transport
plan of :math:`\mu` onto itself (Sinkhorn). :func:`velocity` then applies the values. Linear
attention never forms the :math:`n\times n` matrix: :math:`\sum_j w_j\langle x_i,Ax_j\rangle Vx_j
= V\,M_2\,A^\top x_i` with :math:`M_2=\sum_j w_j x_jx_j^\top`.

References
----------
Paper 1: V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, *A Unified Perspective on the Dynamics of Deep
Transformers*, arXiv:2501.18322 (the velocity fields of the attention variants and the Transformer PDE).
Paper 2: S. Li et al., *On the Diverse Dynamical Behaviors Arising in Deep Linear Transformers* (2026)
(linear self-attention). Book: ``chapters/index.md``, equation (eq-intro-sa); ``chapters/01_well_posedness.md``,
equations (eq-p1-ips) and (eq-p1-tpde).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from scipy.special import expit

from .errors import ConvergenceError, NonFiniteError
from .validation import (
    real_array,
    validate_beta,
    validate_choice,
    validate_count,
    validate_finite,
    validate_flag,
    validate_instance,
    validate_positions,
    validate_positive,
    validate_tokens,
    validate_weights,
)

__all__ = [
    "KINDS",
    "BACKENDS",
    "Attention",
    "attention_matrix",
    "velocity",
    "sinkhorn_potentials",
    "LayerLike",
    "layer_at",
    "LayerStack",
    "velocity_batch",
    "FIELD_OK",
    "FIELD_NONFINITE",
    "FIELD_NOT_CONVERGED",
    "require_layer",
    "require_batch_layer",
    "velocity_unchecked",
    "sinkhorn_failure",
    "SINKHORN_TOL",
    "SINKHORN_ITERS",
]

KINDS = ("softmax", "unnormalized_softmax", "linear", "l2", "sinkhorn", "sigmoid")
Kind = Literal["softmax", "unnormalized_softmax", "linear", "l2", "sinkhorn", "sigmoid"]

#: Default stopping tolerance of Sinkhorn attention: the relative column-marginal error
#: :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j` (see :class:`Attention`).
SINKHORN_TOL = 1e-12
#: Default cap on the Sinkhorn iterations of one attention evaluation.
SINKHORN_ITERS = 10_000
#: Number of past iterates mixed by the Anderson acceleration of :func:`sinkhorn_potentials`.
SINKHORN_MEMORY = 5
#: Plain (batched) Sinkhorn iterations before a system not yet converged is accelerated alone.
SINKHORN_PLAIN_ITERS = 50


# Kinds whose attention matrix rows are normalised to sum to one.
_ROW_NORMALISED = ("softmax", "l2", "sinkhorn")


def _finite_read_only(arr: np.ndarray, name: str) -> np.ndarray:
    """``arr`` made read-only, after checking that its entries are finite (the error names ``name``)."""
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (inf or NaN)")
    arr.flags.writeable = False
    return arr


def _as_matrix_stack(name: str, M, *, square: bool) -> np.ndarray | None:
    """Return ``M`` as a read-only float64 array of shape (H, r, c), or None."""
    if M is None:
        return None
    arr = np.array(real_array(M, name), copy=True)  # a complex matrix is refused, not cast
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(
            f"{name} must be a matrix (2-D) or a stack of per-head matrices (3-D), "
            f"got an array with shape {np.shape(M)}"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"{name} must not be empty, got shape {np.shape(M)}")
    if square and arr.shape[1] != arr.shape[2]:
        raise ValueError(f"{name} must be square (d x d), got shape {np.shape(M)}")
    return _finite_read_only(arr, name)


@dataclass(frozen=True, eq=False)
class _LayerParameters:
    """The fields of :class:`Attention` (one layer) and :class:`LayerStack` (B layers), in this order.

    The matrices are taken as array-likes and stored as read-only float arrays by the subclass's
    ``__post_init__``: typed Any; ``beta`` is one number for a layer, one per layer for a stack.
    """

    kind: str
    A: Any = None
    V: Any = None
    Q: Any = None
    K: Any = None
    beta: Any = 1.0
    causal: bool = False
    bias: float = 0.0
    eps: float = 1.0
    sinkhorn_iters: int = SINKHORN_ITERS
    sinkhorn_tol: float = SINKHORN_TOL


@dataclass(frozen=True, eq=False)
class Attention(_LayerParameters):
    r"""A self-attention layer: which variant, its matrices, its temperature.

    Parameters
    ----------
    kind : {"softmax", "unnormalized_softmax", "linear", "l2", "sinkhorn", "sigmoid"}
        How tokens are weighed (paper 1, arXiv:2501.18322, the attention variants; paper 2, Li et al. 2026,
        linear attention):

        * ``softmax``: :math:`P_{ij} \propto w_j e^{\beta\langle x_i, A x_j\rangle}`, rows sum to one;
        * ``unnormalized_softmax``: :math:`P_{ij} = w_j e^{\beta\langle x_i, A x_j\rangle}`;
        * ``linear``: :math:`P_{ij} = w_j\,\beta\langle x_i, A x_j\rangle`;
        * ``l2``: :math:`P_{ij} \propto w_j e^{-\beta|Qx_i - Kx_j|^2}`, rows sum to one
          (needs ``Q`` and ``K``);
        * ``sinkhorn``: :math:`P = \pi/w_i`, :math:`\pi` the entropic self-transport plan of
          :math:`\mu` with cost :math:`-\beta\langle x_i, A x_j\rangle` and regularisation
          ``eps`` (rows sum to one, and :math:`\sum_i w_i P_{ij} = w_j`);
        * ``sigmoid``: :math:`P_{ij} = w_j\,\sigma(\beta\langle x_i, A x_j\rangle + b)`.
    A : array (d, d) or (H, d, d), optional
        Score matrix :math:`A = Q^\top K` per head. Give either ``A`` or both ``Q`` and ``K``.
    V : array (d, d) or (H, d, d)
        Value (output) matrix per head; for paper 1's multi-head layer :math:`V_h = W_h^\top V_h`.
    Q, K : array (k, d) or (H, k, d), optional
        Query and key matrices; then ``A`` is computed as :math:`Q_h^\top K_h`.
    beta : float
        Inverse temperature :math:`\beta > 0`.
    causal : bool
        (``True`` or ``False`` only.) Masked attention: token ``i`` attends only to tokens ``j`` with position
        :math:`s_j \le s_i` (by default the index order, ``j <= i``).
    bias : float
        Sigmoid bias :math:`b` (sigmoid attention only).
    eps : float
        Entropic regularisation :math:`\varepsilon > 0` (Sinkhorn only).
    sinkhorn_iters : int
        Maximal number of Sinkhorn iterations (Sinkhorn only; default :data:`SINKHORN_ITERS`).
    sinkhorn_tol : float
        Stopping tolerance on the column-marginal error :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j`
        (default :data:`SINKHORN_TOL` = 1e-12). The rows of the plan are exact, so the field is
        off by about this relative amount, and the book's checks that rely on double
        stochasticity (the particle mean moving by exactly :math:`\dot{\bar x}=V\bar x`) hold to
        round-off. With the accelerated iteration (:func:`sinkhorn_potentials`) every Sinkhorn
        evaluation of the book's chapters and of the chapter-01 widget reaches it in at most a
        dozen iterations (measured on the fast and full settings; plain Sinkhorn needed up to 35,
        and 20 000 were not enough for tight clusters at small ``eps``). The cap is there for
        inputs that cannot converge (e.g. a tiny ``eps`` against a wide range of scores), which
        raise a :class:`~tokendynamics.errors.ConvergenceError` saying what to change.

    Notes
    -----
    Several heads are given by stacking matrices along a first axis; the field is the sum over
    heads of each head's field (paper 1's multi-head attention). All arrays are copied and made
    read-only.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the velocity fields of softmax, multi-head, L2, Sinkhorn,
    sigmoid and masked attention; paper 2 (Li et al., 2026), linear attention; Sander et al., *Sinkformers*
    (AISTATS 2022); Kim, Papamakarios, Mnih, *The Lipschitz constant of self-attention* (ICML 2021) for L2
    attention. Book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """

    # The fields of _LayerParameters, in its order; the matrices are stored as read-only float
    # arrays (H, d, d) by __post_init__ (A is None for an L2 layer given by Q and K, and the reverse).
    beta: float = 1.0
    _d: int = field(init=False, repr=False, default=0)

    def __post_init__(self):
        validate_choice(self.kind, "kind", KINDS)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)

        Q = _as_matrix_stack("Q", self.Q, square=False)
        K = _as_matrix_stack("K", self.K, square=False)
        A = _as_matrix_stack("A", self.A, square=True)
        V = _as_matrix_stack("V", self.V, square=True)
        if V is None:
            raise ValueError("V (the value matrix) is required")
        if (Q is None) != (K is None):
            raise ValueError("Q and K must be given together")
        if Q is not None:
            if A is not None:
                raise ValueError("give either A or (Q, K), not both")
            if Q.shape != K.shape:
                raise ValueError(f"Q and K must have the same shape, got {Q.shape} and {K.shape}")
            A = np.einsum("hkd,hke->hde", Q, K)
            A.flags.writeable = False
        if A is None:
            raise ValueError("the score matrix is required: give A or (Q, K)")
        if self.kind == "l2" and Q is None:
            raise ValueError("l2 attention exp(-beta |Qx - Ky|^2) needs Q and K, not only A = Q^T K")
        H, d = A.shape[0], A.shape[1]
        if V.shape[1] != d:
            raise ValueError(f"V must be {d} x {d} like A, got shape {V.shape[1:]}")
        if V.shape[0] != H:
            raise ValueError(
                f"A has {H} head(s) but V has {V.shape[0]}: give one value matrix per head "
                "(stack them along the first axis)"
            )
        if Q is not None and Q.shape[2] != d:
            raise ValueError(f"Q and K must have {d} columns, got shape {Q.shape[1:]}")

        beta = validate_beta(self.beta)
        if not isinstance(beta, float):
            raise ValueError(f"beta must be a finite positive number, got an array of shape {np.shape(self.beta)}")
        bias = validate_finite(self.bias, "bias")
        if bias != 0.0 and self.kind != "sigmoid":
            raise ValueError("bias is a parameter of sigmoid attention only")
        eps = validate_positive(self.eps, "eps")
        iters = validate_count(self.sinkhorn_iters, "sinkhorn_iters")
        tol = validate_positive(self.sinkhorn_tol, "sinkhorn_tol")
        causal = validate_flag(self.causal, "causal")
        if causal and self.kind == "sinkhorn":
            raise ValueError("causal masking is not defined for Sinkhorn attention")

        set_("A", A)
        set_("V", V)
        set_("Q", Q)
        set_("K", K)
        set_("beta", beta)
        set_("bias", bias)
        set_("eps", eps)
        set_("causal", causal)
        set_("sinkhorn_iters", iters)
        set_("sinkhorn_tol", tol)
        set_("_d", d)

    # -- convenience -----------------------------------------------------------------------
    @property
    def d(self) -> int:
        """Token dimension."""
        return self._d

    @property
    def n_heads(self) -> int:
        """Number of heads H."""
        return self.A.shape[0]

    def with_(self, **changes) -> Attention:
        """A copy with some fields changed (validated again), e.g. ``layer.with_(beta=2.0)``.

        Parameters
        ----------
        **changes
            New values of fields of :class:`Attention`. Giving ``Q``/``K`` drops the old ``A``,
            giving ``A`` drops the old ``Q``/``K``.

        Returns
        -------
        Attention
            The new layer (this one is unchanged).
        """
        if ("Q" in changes or "K" in changes) and "A" not in changes:
            changes["A"] = None
        if "A" in changes and changes["A"] is not None and "Q" not in changes:
            changes.setdefault("Q", None)
            changes.setdefault("K", None)
        base = {k: getattr(self, k) for k in ("A", "V", "Q", "K")}
        if self.Q is not None:
            base["A"] = None
        base.update(changes)
        return replace(self, **base)

    def to_dict(self) -> dict:
        """Plain description (lists and numbers) of the layer, for provenance records.

        Returns
        -------
        dict
            ``kind``, ``beta``, ``causal`` and the matrices ``A``, ``V`` (``Q``, ``K`` for a factored
            layer) as nested lists (one head unstacked), plus the options of the kind (sigmoid bias,
            Sinkhorn settings); JSON-serialisable.
        """
        out = {"kind": self.kind, "beta": self.beta, "causal": self.causal}
        for name in ("A", "V", "Q", "K"):
            M = getattr(self, name)
            if M is not None:
                out[name] = (M[0] if M.shape[0] == 1 else M).tolist()
        if self.kind == "sigmoid":
            out["bias"] = self.bias
        if self.kind == "sinkhorn":
            out.update(eps=self.eps, sinkhorn_iters=self.sinkhorn_iters, sinkhorn_tol=self.sinkhorn_tol)
        return out

    def __repr__(self) -> str:
        heads = f", heads={self.n_heads}" if self.n_heads > 1 else ""
        extra = ""
        if self.kind == "sigmoid":
            extra = f", bias={self.bias:g}"
        elif self.kind == "sinkhorn":
            extra = f", eps={self.eps:g}"
        causal = ", causal=True" if self.causal else ""
        return f"Attention({self.kind!r}, d={self.d}{heads}, beta={self.beta:g}{extra}{causal})"


#: A layer, or a function of depth returning one (depth-dependent parameters :math:`(A_t, V_t)`).
LayerLike = Attention | Callable[[float], Attention]


def require_layer(layer, name: str = "layer") -> Attention:
    """``layer`` itself if it is an :class:`Attention`; a TypeError naming ``name`` otherwise.

    Parameters
    ----------
    layer : object
        The value to check.
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    Attention
        ``layer`` unchanged.

    Raises
    ------
    TypeError
        ``layer`` is not an :class:`Attention`.

    References
    ----------
    An :class:`Attention` is the in-context velocity field of the tokens of paper 1 (Castin et al.,
    arXiv:2501.18322) and paper 2 (Li et al., 2026); book: ``chapters/index.md``, equation (eq-intro-sa).
    """
    return validate_instance(layer, Attention, name, "an Attention (e.g. Attention('softmax', A=A, V=V))")


def layer_at(layer: LayerLike, t: float, d: int) -> Attention:
    r"""The layer acting at depth ``t``: ``layer`` itself, or ``layer(t)`` for a depth-dependent one.

    Both papers allow depth-dependent parameters :math:`t\mapsto(A_t, V_t)`; all their figures use
    constant ones.

    Parameters
    ----------
    layer : Attention or callable
        A layer, or a function ``t -> Attention``.
    t : float
        Depth (time).
    d : int
        Expected token dimension.

    Returns
    -------
    Attention
        The layer at depth ``t``.

    Raises
    ------
    TypeError
        ``layer`` is neither, or the callable does not return an :class:`Attention`.
    ValueError
        The layer's dimension is not ``d``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the Transformer PDE with parameters depending on depth.
    """
    if isinstance(layer, Attention):
        lay = layer
    elif callable(layer):
        lay = layer(t)
    else:
        raise TypeError(f"layer must be an Attention or a callable t -> Attention, got {type(layer).__name__}")
    if not isinstance(lay, Attention):
        raise TypeError(f"a time-dependent layer must return an Attention, got {type(lay).__name__}")
    if lay.d != d:
        raise ValueError(f"the layer at t = {t:g} has d = {lay.d}, the tokens have d = {d}")
    return lay


def _stack_field(name: str, M, B: int, H: int, rows: int, d: int) -> np.ndarray | None:
    """``M`` as a read-only float64 array (B, H, rows, d) (a (B, rows, d) stack means one head)."""
    if M is None:
        return None
    arr = np.array(M, dtype=float, copy=True)
    if arr.ndim == 3:
        arr = arr[:, None]
    if arr.shape != (B, H, rows, d):
        raise ValueError(f"{name} must have shape ({B}, {rows}, {d}) or ({B}, {H}, {rows}, {d}), got {np.shape(M)}")
    return _finite_read_only(arr, name)


@dataclass(frozen=True, eq=False)
class LayerStack(_LayerParameters):
    r"""B attention layers of one kind and one shape, one per system of a batch.

    The matrices are stacked along a first axis, (B, H, d, d) (or (B, d, d) for one head), and
    every system has its own inverse temperature ``beta`` (shape (B,), or one number for all). The
    other parameters (``causal``, ``bias``, ``eps``, Sinkhorn settings) are shared and checked by
    :class:`Attention` itself. Build one with :meth:`of` from a list of layers, or directly from
    stacked arrays; :meth:`layer` gives system b's :class:`Attention` back.

    :func:`velocity_batch` evaluates the field of system b with layer b; every kind of
    :class:`Attention` is supported, with the same formulas (the same code) as :func:`velocity`.

    Parameters
    ----------
    kind : str
        One of the kinds of :class:`Attention` (``KINDS``), shared by every layer.
    A, V : array (B, d, d) or (B, H, d, d)
        Score and value matrices of the B layers (``A`` may be replaced by ``Q`` and ``K``).
    Q, K : array (B, k, d) or (B, H, k, d), optional
        Query and key matrices; then :math:`A_b = Q_b^\top K_b` per head.
    beta : float or array (B,)
        Inverse temperature of each layer (one number: the same for all).
    causal, bias, eps, sinkhorn_iters, sinkhorn_tol
        Shared parameters, as in :class:`Attention`.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants; book:
    ``chapters/07_phase_diagrams.md`` (many systems at once).
    """

    # the fields of _LayerParameters; read-only float arrays (B, H, d, d) and beta (B,) after __post_init__

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        V = np.asarray(self.V, dtype=float) if self.V is not None else None
        if V is None or V.ndim not in (3, 4):
            raise ValueError("V must be a stack of value matrices, (B, d, d) or (B, H, d, d)")
        B, d = V.shape[0], V.shape[-1]
        H = 1 if V.ndim == 3 else V.shape[1]
        if B == 0:
            raise ValueError("a LayerStack needs at least one layer")
        beta = np.array(np.broadcast_to(np.asarray(self.beta, dtype=float), (B,)), dtype=float)
        if not (np.all(np.isfinite(beta)) and np.all(beta > 0)):
            raise ValueError("beta must be finite and positive for every layer of the stack")
        beta.flags.writeable = False
        Vs = _stack_field("V", V, B, H, d, d)
        if (self.Q is None) != (self.K is None):
            raise ValueError("Q and K must be given together")
        if self.Q is not None:
            if self.A is not None:
                raise ValueError("give either A or (Q, K), not both")
            k = np.shape(self.Q)[-2]
            Qs, Ks = _stack_field("Q", self.Q, B, H, k, d), _stack_field("K", self.K, B, H, k, d)
            As = np.einsum("bhkd,bhke->bhde", Qs, Ks)
            As.flags.writeable = False
        else:
            if self.A is None:
                raise ValueError("the score matrix is required: give A or (Q, K)")
            Qs = Ks = None
            As = _stack_field("A", self.A, B, H, d, d)
        # the shared parameters (and the kind's own requirements) are checked by Attention itself
        first = Attention(
            self.kind,
            A=None if Qs is not None else As[0],
            V=Vs[0],
            Q=None if Qs is None else Qs[0],
            K=None if Ks is None else Ks[0],
            beta=float(beta[0]),
            causal=self.causal,
            bias=self.bias,
            eps=self.eps,
            sinkhorn_iters=self.sinkhorn_iters,
            sinkhorn_tol=self.sinkhorn_tol,
        )
        for name in ("causal", "bias", "eps", "sinkhorn_iters", "sinkhorn_tol"):
            set_(name, getattr(first, name))
        set_("A", As)
        set_("V", Vs)
        set_("Q", Qs)
        set_("K", Ks)
        set_("beta", beta)

    @classmethod
    def of(cls, layers) -> LayerStack:
        """Stack a sequence of :class:`Attention` layers of one kind and shape (and equal shared parameters).

        Parameters
        ----------
        layers : sequence of Attention
            Non-empty; all of one kind, shape and shared parameters.

        Returns
        -------
        LayerStack
        """
        layers = list(layers)
        if not layers or not all(isinstance(lay, Attention) for lay in layers):
            raise TypeError("LayerStack.of needs a non-empty sequence of Attention layers")
        first = layers[0]
        shared = ("kind", "causal", "bias", "eps", "sinkhorn_iters", "sinkhorn_tol")
        for b, lay in enumerate(layers):
            diff = [k for k in shared if getattr(lay, k) != getattr(first, k)]
            if diff:
                raise ValueError(f"layer {b} differs from layer 0 in {diff}: a stack shares them")
            if lay.A.shape != first.A.shape or (lay.Q is None) != (first.Q is None):
                raise ValueError(f"layer {b} has another shape than layer 0 (heads, d, or Q/K given)")
            if lay.Q is not None and lay.Q.shape != first.Q.shape:
                raise ValueError(f"layer {b} has Q of shape {lay.Q.shape}, layer 0 {first.Q.shape}")
        qk = first.Q is not None
        return cls(
            first.kind,
            A=None if qk else np.stack([lay.A for lay in layers]),
            V=np.stack([lay.V for lay in layers]),
            Q=np.stack([lay.Q for lay in layers]) if qk else None,
            K=np.stack([lay.K for lay in layers]) if qk else None,
            beta=np.array([lay.beta for lay in layers]),
            causal=first.causal,
            bias=first.bias,
            eps=first.eps,
            sinkhorn_iters=first.sinkhorn_iters,
            sinkhorn_tol=first.sinkhorn_tol,
        )

    @property
    def size(self) -> int:
        """Number of layers B."""
        return self.V.shape[0]

    def __len__(self) -> int:
        return self.size

    @property
    def d(self) -> int:
        """Token dimension."""
        return self.V.shape[-1]

    @property
    def n_heads(self) -> int:
        """Number of heads H (the same for every layer)."""
        return self.V.shape[1]

    def _shared(self) -> dict:
        return dict(
            causal=self.causal,
            bias=self.bias,
            eps=self.eps,
            sinkhorn_iters=self.sinkhorn_iters,
            sinkhorn_tol=self.sinkhorn_tol,
        )

    def layer(self, b: int) -> Attention:
        """The :class:`Attention` of system b.

        Parameters
        ----------
        b : int
            Which of the B layers (``0 <= b < B``; a negative index counts from the end).

        Returns
        -------
        Attention
            One layer: entry b of ``A`` (or of ``Q`` and ``K``), ``V`` and ``beta``, with the options
            the stack shares (mask, bias, Sinkhorn settings).
        """
        if self.Q is not None:
            return Attention(
                self.kind, V=self.V[b], Q=self.Q[b], K=self.K[b], beta=float(self.beta[b]), **self._shared()
            )
        return Attention(self.kind, A=self.A[b], V=self.V[b], beta=float(self.beta[b]), **self._shared())

    def take(self, index) -> LayerStack:
        """The stack of the layers ``index`` (an integer array or a boolean mask over the B layers).

        Parameters
        ----------
        index : array of int or bool
            Which layers to keep.

        Returns
        -------
        LayerStack
        """
        idx = np.arange(self.size)[index]
        qk = self.Q is not None
        return LayerStack(
            self.kind,
            A=None if qk else self.A[idx],
            V=self.V[idx],
            Q=self.Q[idx] if qk else None,
            K=self.K[idx] if qk else None,
            beta=self.beta[idx],
            **self._shared(),
        )

    def __repr__(self) -> str:
        heads = f", heads={self.n_heads}" if self.n_heads > 1 else ""
        betas = f"beta in [{self.beta.min():g}, {self.beta.max():g}]"
        return f"LayerStack({self.kind!r}, B={self.size}, d={self.d}{heads}, {betas})"


# ---------------------------------------------------------------------------------------------
# scores and attention matrices
# ---------------------------------------------------------------------------------------------


#: Backends of :func:`velocity`.
BACKENDS = ("auto", "numpy", "numba", "dense")


def _positions(positions, n: int, layer: Attention) -> np.ndarray:
    """Token positions of a causal layer; positions given to a non-causal layer are refused (they would be ignored)."""
    if positions is not None and not layer.causal:
        raise ValueError(
            "positions are used by causal (masked) layers only, and this layer has causal=False: "
            "drop positions or build the layer with causal=True"
        )
    return validate_positions(positions, n)


def _log_weights(w: np.ndarray | None, n: int) -> np.ndarray:
    if w is None:
        return np.full(n, -math.log(n))
    with np.errstate(divide="ignore"):
        return np.log(w)


def _causal_mask(s: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
    """Boolean mask (rows x n), True where token j is visible from token i (s_j <= s_i)."""
    return s[None, :] <= s[rows, None]


# Largest number of attention-matrix entries formed at once by the dense path (64 MB); larger
# problems are processed in blocks of rows (row-wise kinds) so memory stays O(n) per row.
BLOCK_ENTRIES = 1 << 23


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    """log-sum-exp along one axis; same values as ``scipy.special.logsumexp`` at a fraction of its
    overhead on the small matrices of a Sinkhorn loop (about 6 x faster at n = 60)."""
    m = a.max(axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)


#: Sinkhorn runs in the exponential (scaling) domain when the kernel of a system spans at most
#: e^SCALING_MAX_RANGE (max - min of logK): the same iterates, two matrix-vector products per
#: iteration instead of two log-sum-exps, and nothing can overflow; wider kernels use the log domain.
SCALING_MAX_RANGE = 30.0


def sinkhorn_potentials(
    logK: np.ndarray,
    logw: np.ndarray,
    *,
    eps: float,
    max_iter: int,
    tol: float,
    g0: np.ndarray | None = None,
    memory: int = SINKHORN_MEMORY,
):
    r"""Sinkhorn for the entropic self-transport of :math:`\mu=\sum_j w_j\delta_{x_j}`, in potentials.

    Solves for potentials :math:`f, g` such that the plan
    :math:`\pi_{ij} = w_i w_j \exp((f_i + g_j + c_{ij})/\varepsilon)`, with
    :math:`c_{ij} = \varepsilon\,\mathrm{logK}_{ij}` the (negative) cost, has both marginals
    equal to :math:`w`. Iterates :math:`f \leftarrow -\varepsilon\,\mathrm{LSE}_j((g_j+c_{ij})/\varepsilon+\log w_j)`
    and the same for :math:`g`, stopping when the column-marginal relative error is below ``tol``.

    The last update is the row update, so rows of :math:`P=\pi/w_i` sum to one (to round-off) and the
    column marginals are met to ``error``; one iteration from :math:`g=0` is exactly the
    row-softmax of :math:`c/\varepsilon`. ``g0`` warm-starts the column potential.

    The iteration is run in the log domain, or — when the kernel spans at most
    :math:`e^{30}` (:data:`SCALING_MAX_RANGE`), so that nothing can overflow — as the same
    iterates in the exponential domain, :math:`u=e^{f/\varepsilon}`, :math:`v=e^{g/\varepsilon}`
    (matrix scaling: two matrix-vector products per iteration instead of two log-sum-exps).

    ``logK`` may carry leading batch axes, (..., n, n), with ``logw`` of shape (n,) or (..., n): then
    every system is solved at once and each stops at its own iteration (a converged system is left
    as it is while the others go on), so a batch gives the potentials of a loop over it.

    **Anderson acceleration** (``memory`` > 0; ``memory=0`` is plain Sinkhorn). The first
    :data:`SINKHORN_PLAIN_ITERS` iterations are plain (batched, as above); a system not converged by
    then goes on alone, accelerated, from where it is. The column update
    is a fixed-point map :math:`g\mapsto G(g)`; from the second iteration on, the next :math:`g`
    is the combination of the last ``memory + 1`` values of :math:`G` whose residuals
    :math:`G(g)-g` have the least-squares smallest combination (Anderson mixing, D. G. Anderson,
    J. ACM 12 (1965); for Sinkhorn e.g. Chizat 2020). Plain Sinkhorn stalls when the tokens form
    tight clusters whose mutual kernel entries are tiny (a contraction factor
    :math:`1-O(e^{-\Delta/\varepsilon})`, :math:`\Delta` the score gap): three clusters at
    :math:`\pm6` with :math:`\varepsilon=0.5` were still at error 7e-8 after 20 000 plain
    iterations, and reach 1e-12 in 14 accelerated ones. The fixed point is the same; a step that
    raises the error tenfold above the best one so far is discarded (history cleared, plain step
    from the best iterate), so the iteration never does worse than restarting plain Sinkhorn.

    Parameters
    ----------
    logK : array (..., n, n)
        :math:`c_{ij}/\varepsilon`, the scores divided by :math:`\varepsilon` (batch axes allowed).
    logw : array (n,) or (..., n)
        Logarithms of the masses :math:`w_j`.
    eps : float
        Entropic regularisation :math:`\varepsilon > 0`.
    max_iter : int
        Cap on the iterations.
    tol : float
        Stopping tolerance on :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j`.
    g0 : array (n,) or (..., n), optional
        Warm start of the column potential (default zero).
    memory : int
        Anderson memory (0: plain Sinkhorn).

    Returns
    -------
    f, g : array (..., n)
        Row and column potentials.
    iterations : int or array of int
        Iterations used (per system for a batch).
    error : float or array
        Column-marginal relative error reached.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Sinkhorn attention; M. E. Sander, P. Ablin, M. Blondel,
    G. Peyré, *Sinkformers: Transformers with Doubly Stochastic Attention*, AISTATS 2022; D. G. Anderson,
    *Iterative procedures for nonlinear integral equations*, J. ACM 12 (1965), and Chizat (2020) for its use
    with Sinkhorn. Book: ``chapters/03_gradient_flow.md``, equation (eq-gf-sinkhorn-energy).
    """
    n = logK.shape[-1]
    batch = logK.shape[:-2]
    m = math.prod(batch)
    K3 = logK.reshape(m, n, n)
    lw = np.broadcast_to(logw, batch + (n,)).reshape(m, n)
    g = np.zeros((m, n)) if g0 is None else np.array(np.broadcast_to(g0, batch + (n,)), dtype=float).reshape(m, n)
    f = np.zeros((m, n))
    err = np.full(m, np.inf)
    its = np.zeros(m, dtype=int)
    with np.errstate(invalid="ignore"):
        spread = K3.max(axis=(1, 2)) - K3.min(axis=(1, 2))
    scaling = spread <= SCALING_MAX_RANGE  # False for non-finite kernels
    plain = max_iter if memory <= 0 else min(max_iter, SINKHORN_PLAIN_ITERS)
    for idx, solver in ((np.nonzero(scaling)[0], _sinkhorn_scaling), (np.nonzero(~scaling)[0], _sinkhorn_log)):
        if idx.size:
            f[idx], g[idx], its[idx], err[idx] = solver(K3[idx], lw[idx], g[idx], eps, plain, tol)
    if plain < max_iter:
        for b in np.nonzero(~(err < tol) & np.all(np.isfinite(g), axis=1))[0]:
            f[b], g[b], more, err[b] = _sinkhorn_anderson(K3[b], lw[b], g[b], eps, max_iter - plain, tol, memory)
            its[b] += more
    if not batch:
        return f[0], g[0], int(its[0]), float(err[0])
    return f.reshape(batch + (n,)), g.reshape(batch + (n,)), its.reshape(batch), err.reshape(batch)


def _active_set_loop(m: int, n: int, max_iter: int, tol: float, state: np.ndarray, step):
    """The iteration loop of both Sinkhorn domains on m systems; each stops at its own iteration.

    ``step(active, every)`` does one iteration on the systems ``active`` (all m if ``every``) and
    returns their potentials f, their column-marginal errors and a function ``update(sel)`` giving
    the new ``state`` rows (g or v) of ``active[sel]``, the systems that go on; ``state`` is
    updated in place. Returns f (m, n), the iterations and the errors.
    """
    f = np.zeros((m, n))
    err = np.full(m, np.inf)
    its = np.zeros(m, dtype=int)
    active = np.arange(m)
    for it in range(1, max_iter + 1):
        fa, ea, update = step(active, active.size == m)
        f[active], err[active], its[active] = fa, ea, it
        go_on = ~(ea < tol) if it < max_iter else np.zeros(active.size, bool)
        state[active[go_on]] = update(go_on)
        active = active[go_on]
        if active.size == 0:
            break
    return f, its, err


def _sinkhorn_log(K3, lw, g, eps, max_iter, tol):
    """Log-domain iterations on m systems (m, n, n); each stops at its own iteration."""
    m, n, _ = K3.shape

    def step(active, every):
        Ka, ga, lwa = (K3, g, lw) if every else (K3[active], g[active], lw[active])
        # rows: sum_j w_j exp((f_i + g_j)/eps + logK_ij) = 1 exactly after this update
        fa = -eps * _lse(Ka + ga[:, None, :] / eps + lwa[:, None, :], axis=-1)
        # columns: sum_i w_i exp((f_i + g_j)/eps + logK_ij) should equal 1 as well
        lse_col = _lse(Ka + fa[:, :, None] / eps + lwa[:, :, None], axis=-2)
        ea = np.max(np.abs(np.expm1(lse_col + ga / eps)), axis=-1)
        return fa, ea, lambda sel: -eps * lse_col[sel]

    f, its, err = _active_set_loop(m, n, max_iter, tol, g, step)
    return f, g, its, err


def _sinkhorn_scaling(K3, lw, g, eps, max_iter, tol):
    """The same iterates in the exponential domain: u = exp(f/eps + c), v = exp(g/eps), with the
    kernel exp(logK - c) in [e^-30, 1] (c the largest entry of each system)."""
    m, n, _ = K3.shape
    top = K3.max(axis=(1, 2))
    Kt = np.exp(K3 - top[:, None, None])
    w = np.exp(lw)
    v = np.exp(g / eps)

    def step(active, every):
        Ka, va, wa = (Kt, v, w) if every else (Kt[active], v[active], w[active])
        t = np.einsum("bij,bj->bi", Ka, va * wa)  # e^{-f_i/eps - c}
        col = np.einsum("bij,bi->bj", Ka, wa / t)  # e^{lse_col}
        ea = np.max(np.abs(col * va - 1.0), axis=-1)
        return -eps * (np.log(t) + top[active, None]), ea, lambda sel: 1.0 / col[sel]

    f, its, err = _active_set_loop(m, n, max_iter, tol, v, step)
    return f, eps * np.log(v), its, err


def _sinkhorn_anderson(logK, logw, g, eps, max_iter, tol, memory):
    """Anderson-accelerated log-domain iterations on one system (n, n), from the column potential g."""
    f = np.zeros_like(g)
    err = np.inf
    it = 0
    best_err, best_G = np.inf, None
    hist_G: list[np.ndarray] = []
    hist_R: list[np.ndarray] = []
    for it in range(1, max_iter + 1):
        # rows: sum_j w_j exp((f_i + g_j)/eps + logK_ij) = 1 exactly after this update
        f = -eps * _lse(logK + g[None, :] / eps + logw[None, :], axis=1)
        # columns: sum_i w_i exp((f_i + g_j)/eps + logK_ij) should equal 1 as well
        lse_col = _lse(logK + f[:, None] / eps + logw[:, None], axis=0)
        err = float(np.max(np.abs(np.expm1(lse_col + g / eps))))
        if err < tol or it == max_iter:
            break
        G = -eps * lse_col  # the plain Sinkhorn update of g
        if memory <= 0:
            g = G
            continue
        if not err <= 10.0 * best_err:  # the extrapolation went astray (or overflowed): restart plainly
            hist_G.clear()
            hist_R.clear()
            g = best_G
            continue
        if err < best_err:
            best_err, best_G = err, G
        hist_G.append(G)
        hist_R.append(G - g)
        if len(hist_G) > memory + 1:
            del hist_G[0], hist_R[0]
        g = G
        if len(hist_G) >= 2:
            dR = np.diff(np.array(hist_R), axis=0).T  # (n, k)
            dG = np.diff(np.array(hist_G), axis=0).T
            gamma = np.linalg.lstsq(dR, hist_R[-1], rcond=None)[0]
            mixed = G - dG @ gamma
            if np.all(np.isfinite(mixed)):
                g = mixed
    return f, g, it, err


def attention_matrix(X, layer: Attention, weights=None, *, positions=None, head: int = 0, return_info: bool = False):
    r"""The attention matrix :math:`P^{(h)}` of one head (dense n x n).

    ``velocity(X, layer) = sum_h P^(h) @ X @ V_h.T``. Masses :math:`w_j` are included
    (uniform by default), so for normalised kinds each row sums to one, and for linear,
    unnormalised and sigmoid attention :math:`P_{ij} = w_j\,h(S_{ij})`. With ``causal=True``
    entries with :math:`s_j > s_i` are zero. Use :func:`velocity` for the field: it avoids the
    n x n matrix where a closed form exists (linear attention).

    For head :math:`h`, with scores :math:`S_{ij}=\beta\langle x_i, A_h x_j\rangle`, softmax gives
    :math:`P_{ij}=w_je^{S_{ij}}/\sum_l w_le^{S_{il}}`; the other kinds are listed in :class:`Attention`.

    Parameters
    ----------
    X : array (n, d)
        Tokens (rows).
    layer : Attention
        The layer.
    weights : array (n,), optional
        Masses :math:`w_j` summing to one (uniform if omitted).
    positions : array (n,), optional
        Token positions :math:`s_j` of a causal layer (default: the index order).
    head : int
        Which head :math:`h`.
    return_info : bool
        Also return a dict of solver information (Sinkhorn: iterations and marginal error).

    Returns
    -------
    P : array (n, n)
        The attention matrix of head ``head``.
    info : dict
        Only with ``return_info=True``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants. Book: ``chapters/index.md``,
    equation (eq-intro-sa).
    """
    layer = require_layer(layer)
    X = validate_tokens(X, layer.d)
    n = X.shape[0]
    w = validate_weights(weights, n)
    head = validate_count(head, "head", minimum=0)
    if head >= layer.n_heads:
        raise ValueError(f"head must be in [0, {layer.n_heads}), got {head}")
    P, info = _attention_matrix(X, layer, w, _positions(positions, n, layer), head)
    return (P, info) if return_info else P


def _head(layer, h):
    """``(A, V, Q, K, beta)`` of head h: (d, d) matrices and a float for an :class:`Attention`;
    stacks (B, d, d) and beta of shape (B, 1, 1) for a :class:`LayerStack`, so that both broadcast
    against tokens (n, d) or batches (B, n, d)."""
    if isinstance(layer, LayerStack):
        pick = lambda M: None if M is None else M[:, h]  # noqa: E731
        return pick(layer.A), pick(layer.V), pick(layer.Q), pick(layer.K), layer.beta[:, None, None]
    pick = lambda M: None if M is None else M[h]  # noqa: E731
    return pick(layer.A), pick(layer.V), pick(layer.Q), pick(layer.K), layer.beta


def _mT(M):
    return np.swapaxes(M, -1, -2)


def _times(X, M):
    """``X @ M``; a matrix shared by a batch (M 2-D, X (..., n, d)) is applied as one product."""
    if M.ndim == 2 and X.ndim > 2:
        return (X.reshape(-1, X.shape[-1]) @ M).reshape(X.shape[:-1] + (M.shape[-1],))
    return X @ M


def _head_weights(X, layer, w, s, h, sinkhorn_state=None, rows: slice = slice(None)):
    """Attention weights of head h, rows ``rows``, as ``(W, r, info)`` with :math:`P = W / r` row-wise.

    ``r`` is None for the kinds without row normalisation. Keeping the normalisation apart lets
    :func:`velocity` divide the n x d product instead of the n x n matrix. ``X`` may carry leading
    batch axes, (..., n, d); ``layer`` is an :class:`Attention` (shared) or a :class:`LayerStack`.
    """
    n = X.shape[-2]
    kind = layer.kind
    A, _, Q, K, beta = _head(layer, h)
    Xr = X[..., rows, :]
    info: dict = {}
    if kind == "l2":
        # -beta |Qx_i - Kx_j|^2 = beta (2 <Qx_i, Kx_j> - |Kx_j|^2) - beta |Qx_i|^2; the last term
        # depends on i only and cancels in the row normalisation.
        qx = _times(Xr, _mT(Q))
        kx = _times(X, _mT(K))
        W = (2.0 * beta * qx) @ _mT(kx)
        W -= beta * (kx * kx).sum(-1)[..., None, :]
    else:
        W = (beta * _times(Xr, A)) @ _mT(X)  # S_ij = beta <x_i, A x_j>
    if kind in ("softmax", "l2"):
        if w is not None:
            with np.errstate(divide="ignore"):
                W += np.log(w)[..., None, :]
        if layer.causal:
            W[..., ~_causal_mask(s, rows)] = -np.inf
        W -= W.max(axis=-1, keepdims=True)
        np.exp(W, out=W)
        return W, W.sum(axis=-1), info
    if kind == "sinkhorn":
        if rows != slice(None):
            raise ValueError("Sinkhorn weights couple all rows: they cannot be formed by blocks")
        logw = _log_weights(w, n)
        W /= layer.eps
        g0 = None if sinkhorn_state is None else sinkhorn_state.get(h)
        f, g, it, err = sinkhorn_potentials(
            W, logw, eps=layer.eps, max_iter=layer.sinkhorn_iters, tol=layer.sinkhorn_tol, g0=g0
        )
        if sinkhorn_state is not None:
            sinkhorn_state[h] = g
        W += (f[..., :, None] + g[..., None, :]) / layer.eps + logw[..., None, :]
        np.exp(W, out=W)
        info = {"iterations": it, "marginal_error": err, "f": f, "g": g}
        return W, None, info
    if kind == "unnormalized_softmax":
        with np.errstate(over="ignore"):
            np.exp(W, out=W)
    elif kind == "sigmoid":
        W = expit(W + layer.bias)
    # linear: W = S as is
    W *= (1.0 / n) if w is None else w[..., None, :]
    if layer.causal:
        W[..., ~_causal_mask(s, rows)] = 0.0
    return W, None, info


def _attention_matrix(X, layer, w, s, h, sinkhorn_state=None):
    W, r, info = _head_weights(X, layer, w, s, h, sinkhorn_state)
    if r is not None:
        W /= r[:, None]
    return W, info


# ---------------------------------------------------------------------------------------------
# the velocity field
# ---------------------------------------------------------------------------------------------


def _linear_field(X, layer, w, s, h):
    r""":math:`\beta V M_2 A^\top x_i` with the (causal, if asked) second moment; no n x n matrix.

    ``X`` may carry leading batch axes (..., n, d)."""
    n = X.shape[-2]
    wx = X / n if w is None else X * w[..., :, None]
    A, V, _, _, beta = _head(layer, h)
    if not layer.causal:
        M2 = _mT(X) @ wx  # sum_j w_j x_j x_j^T
        return beta * _times(X, A) @ (M2 @ _mT(V))
    # causal: M2_i = sum_{j: s_j <= s_i} w_j x_j x_j^T (ties included), via sorted cumulative sums
    order = np.argsort(s, kind="stable")
    ss = s[order]
    last = np.searchsorted(ss, ss, side="right") - 1  # index of the last token with position <= s
    cum = np.cumsum(np.einsum("...ja,...jb->...jab", wx[..., order, :], X[..., order, :]), axis=-3)
    M2 = np.empty_like(cum)
    M2[..., order, :, :] = cum[..., last, :, :]
    return beta * np.einsum("...ia,...iab,...cb->...ic", _times(X, A), M2, V)


def velocity(
    X, layer: Attention, weights=None, *, positions=None, backend: str = "auto", sinkhorn_state: dict | None = None
) -> np.ndarray:
    r"""The in-context velocity field :math:`\Gamma_\mu` at the tokens, for :math:`\mu=\sum_j w_j\delta_{x_j}`.

    .. math:: \Gamma_\mu(x_i) = \sum_{h} \sum_j P^{(h)}_{ij} V_h x_j

    with :math:`P^{(h)}` given by :func:`attention_matrix` (softmax:
    :math:`P_{ij}=w_je^{\beta\langle x_i,Ax_j\rangle}/\sum_l w_le^{\beta\langle x_i,Ax_l\rangle}`,
    log-sum-exp stabilised). Particle systems use uniform weights; the mean-field (Transformer)
    PDE uses quadrature weights.

    Parameters
    ----------
    X : array (n, d)
        Token positions (rows).
    layer : Attention
    weights : array (n,), optional
        Masses :math:`w_j \ge 0` summing to one; uniform if omitted.
    positions : array (n,), optional
        Token positions for ``causal`` layers (default: index order).
    backend : {"auto", "numpy", "numba", "dense"}
        ``auto`` uses a fused numba kernel for softmax/L2 with small d and large n when numba is
        installed (module ``tokendynamics._kernels``), numpy otherwise; ``dense`` forces the
        n x n matrix also for linear attention (for tests and benchmarks).
    sinkhorn_state : dict, optional
        A dict in which Sinkhorn potentials are stored and from which they are warm-started
        (pass the same dict along a trajectory).

    Returns
    -------
    array (n, d)
        :math:`\Gamma_\mu(x_i)` for every token (row ``i``).

    Raises
    ------
    TypeError
        ``layer`` is not an :class:`Attention`.
    ValueError
        Wrong shapes, non-finite tokens or weights, ``positions`` given to a non-causal layer.
    NonFiniteError
        The field overflowed (e.g. unnormalised softmax with large scores).
    ConvergenceError
        Sinkhorn did not reach ``sinkhorn_tol`` within ``sinkhorn_iters`` iterations.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the in-context velocity field and the Transformer PDE;
    paper 2 (Li et al., 2026), linear attention. Book: ``chapters/01_well_posedness.md``, equations
    (eq-p1-ips) and (eq-p1-tpde).

    Examples
    --------
    >>> import numpy as np
    >>> from tokendynamics.attention import Attention, velocity
    >>> layer = Attention("linear", A=np.eye(2), V=np.eye(2))
    >>> velocity(np.array([[1.0, 0.0], [0.0, 1.0]]), layer)
    array([[0.5, 0. ],
           [0. , 0.5]])
    """
    layer = require_layer(layer)
    X = validate_tokens(X, layer.d)
    n = X.shape[0]
    w = validate_weights(weights, n)
    s = _positions(positions, n, layer)
    validate_choice(backend, "backend", BACKENDS)
    if sinkhorn_state is not None:
        validate_instance(sinkhorn_state, dict, "sinkhorn_state", "a dict (or None)")
    return velocity_unchecked(X, layer, w, s, backend=backend, sinkhorn_state=sinkhorn_state)


def velocity_unchecked(X, layer: Attention, w, s, *, backend: str = "auto", sinkhorn_state: dict | None = None):
    r"""The field of :func:`velocity` without validating its inputs, for integrators that validated them once.

    The result is still checked: a non-finite field (an overflow, or non-finite tokens) raises
    :class:`~tokendynamics.errors.NonFiniteError`.

    Parameters
    ----------
    X : array (n, d)
        float64 tokens.
    layer : Attention
        The layer.
    w : array (n,) or None
        Masses (None: uniform).
    s : array (n,)
        Token positions (causal layers; ``numpy.arange(n)`` otherwise).
    backend : str
        As in :func:`velocity`.
    sinkhorn_state : dict, optional
        As in :func:`velocity`.

    Returns
    -------
    array (n, d)
        :math:`\Gamma_\mu(x_i)`.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """
    # Overflow (e.g. unnormalised softmax at large scores) is not silenced: the result is checked
    # by _check_finite, which raises NonFiniteError, and integrators report it as a blow-up.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = _velocity(X, layer, w, s, backend, sinkhorn_state)
    return _check_finite(out, layer)


#: Codes of :func:`velocity_batch`'s status: the field of a system is fine, overflowed, or its
#: Sinkhorn solve missed the tolerance.
FIELD_OK, FIELD_NONFINITE, FIELD_NOT_CONVERGED = 0, 1, 2


def require_batch_layer(layer, B: int, d: int, what: str = "layer") -> Attention | LayerStack:
    """``layer`` itself if it can act on B systems of tokens of dimension d: an :class:`Attention`
    (the same layer for every system) or a :class:`LayerStack` of B layers.

    Parameters
    ----------
    layer : object
        The value to check.
    B, d : int
        Number of systems and dimension of their tokens.
    what : str
        The layer in error messages (e.g. ``"the layer at t = 0.5"``).

    Returns
    -------
    Attention or LayerStack
        ``layer`` unchanged.

    Raises
    ------
    TypeError
        ``layer`` is neither.
    ValueError
        Its dimension is not d, or a stack has not B layers.

    References
    ----------
    Each of the B systems is one particle system of paper 1 (Castin et al., arXiv:2501.18322) driven by its
    own layer; book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """
    if not isinstance(layer, (Attention, LayerStack)):
        raise TypeError(f"{what} must be an Attention or a LayerStack, got {type(layer).__name__}")
    if layer.d != d:
        raise ValueError(f"{what} has d = {layer.d}, the tokens have d = {d}")
    if isinstance(layer, LayerStack) and layer.size != B:
        raise ValueError(f"{what} has {layer.size} layers for {B} systems")
    return layer


def velocity_batch(X, layer, weights=None, *, sinkhorn_state: dict | None = None):
    r"""The velocity field :math:`\Gamma_{\mu_b}` of B independent systems at once, with their status.

    ``X`` has shape (B, n, d): system b is the cloud ``X[b]``, driven by ``layer`` (one
    :class:`Attention` for all systems) or by ``layer.layer(b)`` (a :class:`LayerStack` of B
    layers). The formulas and the code are those of :func:`velocity` (the attention weights of
    every kind are formed by the same function, with the batch as leading axes: one evaluation for
    the whole batch instead of a Python loop); linear attention goes through the second moment.

    Nothing is raised for one bad system: batched integrators flag and freeze it, and the others go on.

    Parameters
    ----------
    X : array (B, n, d)
        B token clouds.
    layer : Attention or LayerStack
        One layer for all systems, or B layers.
    weights : array (n,), optional
        Masses shared by all systems (uniform by default).
    sinkhorn_state : dict, optional
        Warm-start store of Sinkhorn potentials.

    Returns
    -------
    U : array (B, n, d)
        The fields :math:`\Gamma_{\mu_b}(x_{b,i})`.
    status : array of int (B,)
        :data:`FIELD_OK`, :data:`FIELD_NONFINITE` (the field of that system overflowed; its rows of ``U``
        are set to zero) or :data:`FIELD_NOT_CONVERGED` (Sinkhorn missed ``sinkhorn_tol``; rows set to zero).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips),
    and ``chapters/07_phase_diagrams.md``.
    """
    X = real_array(X, "X")
    if X.ndim != 3 or X.shape[1] == 0:
        raise ValueError(f"X must be a batch of token clouds (B, n, d), got shape {X.shape}")
    B, n, d = X.shape
    require_batch_layer(layer, B, d)
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains non-finite values (inf or NaN)")
    w = validate_weights(weights, n)
    s = validate_positions(None, n)
    missed = np.zeros(B, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = _velocity(X, layer, w, s, "numpy", sinkhorn_state, failed=missed)
    status = np.where(np.all(np.isfinite(out), axis=(1, 2)), FIELD_OK, FIELD_NONFINITE)
    status[missed] = FIELD_NOT_CONVERGED
    out[status != FIELD_OK] = 0.0
    return out, status


def _velocity(X, layer, w, s, backend, sinkhorn_state, failed=None):
    """The field of every head, summed. ``X`` may carry leading batch axes (..., n, d).

    A Sinkhorn solve that misses its tolerance raises ConvergenceError, or, when a boolean array
    ``failed`` (shape of the batch axes) is given, is marked there (batched integrators freeze those
    systems).
    """
    n = X.shape[-2]
    out = np.zeros_like(X)
    batched = X.ndim > 2 or isinstance(layer, LayerStack)
    if backend in ("auto", "numba") and layer.kind in ("softmax", "l2") and not layer.causal and not batched:
        from . import _kernels

        if backend == "numba" or _kernels.prefer_fused(n, layer):
            for h in range(layer.n_heads):
                out += _kernels.fused_head(X, layer, w, h, require_numba=(backend == "numba"))
            return out
    elif backend == "numba":
        raise ValueError(f"the numba backend covers non-causal softmax and l2 attention, not {layer.kind!r}")
    for h in range(layer.n_heads):
        if layer.kind == "linear" and backend != "dense":
            out += _linear_field(X, layer, w, s, h)
        else:
            values = _times(X, _mT(_head(layer, h)[1]))
            if layer.kind == "sinkhorn":
                W, _, info = _head_weights(X, layer, w, s, h, sinkhorn_state)
                missed = np.logical_not(np.asarray(info["marginal_error"]) <= layer.sinkhorn_tol)
                if failed is not None:
                    failed |= missed
                elif np.any(missed):
                    raise ConvergenceError(
                        sinkhorn_failure(int(np.max(info["iterations"])), float(np.max(info["marginal_error"])), layer)
                    )
                out += W @ values
                continue
            block = max(1, BLOCK_ENTRIES // (n * math.prod(X.shape[:-2])))
            for start in range(0, n, block):
                rows = slice(start, min(n, start + block))
                W, r, _ = _head_weights(X, layer, w, s, h, rows=rows)
                field = W @ values
                out[..., rows, :] += field if r is None else field / r[..., None]
    return out


def sinkhorn_failure(iterations: int, error: float, layer: Attention) -> str:
    """The message of a Sinkhorn :class:`~tokendynamics.errors.ConvergenceError`: what was reached, and what to change.

    Parameters
    ----------
    iterations : int
        Iterations done.
    error : float
        Column-marginal relative error reached.
    layer : Attention
        The Sinkhorn layer (its ``eps``, ``sinkhorn_tol`` and ``sinkhorn_iters`` are quoted).

    Returns
    -------
    str
        The message: the tolerance missed, the error reached, and the three settings to change.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Sinkhorn attention; M. E. Sander, P. Ablin, M. Blondel,
    G. Peyré, *Sinkformers*, AISTATS 2022. Book: ``chapters/01_well_posedness.md``, section
    "Eight velocity fields".
    """
    return (
        f"Sinkhorn attention did not reach sinkhorn_tol = {layer.sinkhorn_tol:.3g} in {iterations} iterations: "
        f"the column-marginal error reached is {error:.3g} (eps = {layer.eps:g}). Raise sinkhorn_iters "
        f"(now {layer.sinkhorn_iters}), loosen sinkhorn_tol (e.g. sinkhorn_tol={max(10 * error, 1e-8):.0e} "
        "still fixes the field to about that relative accuracy), or raise eps (convergence slows down like "
        "exp(-score range / eps), e.g. for tight clusters of tokens with large scores)"
    )


def _check_finite(out: np.ndarray, layer: Attention) -> np.ndarray:
    if not np.all(np.isfinite(out)):
        raise NonFiniteError(
            f"{layer!r} produced a non-finite velocity (overflow); the scores beta <x, A y> are too "
            "large for this variant at these tokens"
        )
    return out
