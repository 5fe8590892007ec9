r"""One description of a self-attention layer, and the one velocity field every kind of attention shares.

Convention (library-wide): the score of query :math:`x` on key :math:`y` is :math:`\beta\langle Qx, Ky\rangle =
\beta\langle x, A y\rangle`, :math:`A = Q^\top K` (paper 1's code writes :math:`A_1 = A^\top`); values are
:math:`Vy`. For :math:`\mu = \sum_j w_j \delta_{x_j}`,

.. math::  \Gamma_\mu(x_i) = \sum_h \sum_j P^{(h)}_{ij}\, V_h x_j ,

and kinds differ only in the weights :math:`P^{(h)}` (:mod:`tokendynamics.kinds`): :func:`velocity` is one
code for all. A batch of B layers is the same :class:`Attention` with a leading axis (:func:`velocity_batch_unchecked`).

References
----------
Paper 1: V. Castin, P. Ablin, J. A. Carrillo, G. Peyré, arXiv:2501.18322; paper 2: S. Li et al. (2026).
Book: ``chapters/index.md``, equation (eq-intro-sa); ``chapters/01_well_posedness.md``, (eq-p1-ips), (eq-p1-tpde).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import ConvergenceError, NonFiniteError
from .kinds import AttentionKind, Head, get_kind
from .validation import (
    MAX_ITERATIONS,
    real_array,
    require_memory,
    validate_choice,
    validate_count,
    validate_finite,
    validate_finite_array,
    validate_flag,
    validate_instance,
    validate_positions,
    validate_positive,
    validate_tokens,
    validate_weights,
)

__all__ = [
    "BACKENDS",
    "Attention",
    "attention_matrix",
    "velocity",
    "LayerLike",
    "layer_at",
    "velocity_batch",
    "velocity_batch_unchecked",
    "FIELD_OK",
    "FIELD_NONFINITE",
    "FIELD_NOT_CONVERGED",
    "require_layer",
    "require_batch_layer",
    "velocity_unchecked",
    "SINKHORN_TOL",
    "SINKHORN_ITERS",
    "BLOCK_ENTRIES",
]

#: Default stopping tolerance of Sinkhorn attention: the relative column-marginal error
#: :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j` (see :class:`Attention`).
SINKHORN_TOL = 1e-12
#: Default cap on the Sinkhorn iterations of one attention evaluation.
SINKHORN_ITERS = 10_000

#: Backends of :func:`velocity`.
BACKENDS = ("auto", "numpy", "dense")

# Largest number of attention-matrix entries formed at once (64 MB); larger problems go in blocks of rows.
BLOCK_ENTRIES = 1 << 23


def _matrices(name: str, M, *, square: bool, batch: int | None) -> np.ndarray | None:
    """``M`` as a read-only float64 array (H, r, c), or (B, H, r, c) for a batch; None stays None."""
    if M is None:
        return None
    arr = np.array(validate_finite_array(M, name), copy=True)  # a complex matrix is refused, not cast
    lead = 0 if batch is None else 1
    if arr.ndim == 2 + lead:
        arr = np.expand_dims(arr, lead)
    shape = (
        "a matrix (2-D) or a stack of per-head matrices (3-D)"
        if batch is None
        else (f"a stack of {batch} matrices (B, r, c) or (B, H, r, c), one per layer of the batch (beta has B values)")
    )
    if arr.ndim != 3 + lead or (batch is not None and arr.shape[0] != batch):
        raise ValueError(f"{name} must be {shape}, got an array with shape {np.shape(M)}")
    if 0 in arr.shape:
        raise ValueError(f"{name} must not be empty, got shape {np.shape(M)}")
    if square and arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"{name} must be square (d x d), got shape {np.shape(M)}")
    arr.flags.writeable = False
    return arr


def _batch_size(beta, *matrices) -> int | None:
    """B for a batch (beta of shape (B,), or a 4-D matrix), None for one layer."""
    if np.ndim(beta) == 1:
        return int(np.shape(beta)[0])
    four = [np.shape(M)[0] for M in matrices if M is not None and np.ndim(M) == 4]
    return four[0] if four else None


@dataclass(frozen=True, eq=False)
class Attention:
    r"""A self-attention layer — its kind, matrices and temperature — or a batch of B such layers.

    Heads are stacked along the first axis and their fields add up (paper 1's multi-head attention; a 3-D
    matrix with a scalar ``beta`` means heads); all arrays are copied and made read-only.

    Parameters
    ----------
    kind : str or AttentionKind
        A name of :data:`~tokendynamics.kinds.KINDS` (``softmax``, ``unnormalized_softmax``, ``linear``,
        ``l2``, ``sinkhorn``, ``sigmoid``, ``relu``, ``hardmax``) or a kind of one's own; stored as the object.
    A, V : arrays (d, d) or (H, d, d)
        Score matrix :math:`A = Q^\top K` (or give ``Q`` and ``K``) and value matrix, per head.
    Q, K : array (k, d) or (H, k, d), optional
        Query and key matrices (L2 attention needs them); then :math:`A_h=Q_h^\top K_h`.
    beta : float or array (B,)
        Inverse temperature :math:`\beta>0`; an array makes a batch of B layers, every matrix then with a
        leading axis B ((B, d, d), or (B, H, d, d) with heads).
    causal : bool
        Masked attention: token i attends to the tokens j with position :math:`s_j\le s_i`.
    bias, eps : float
        Sigmoid bias (sigmoid only), entropic regularisation :math:`\varepsilon>0` (Sinkhorn only).
    sinkhorn_iters, sinkhorn_tol
        Cap on the Sinkhorn iterations, and tolerance on the column-marginal error
        :math:`\max_j|\sum_i\pi_{ij}-w_j|/w_j` (:data:`SINKHORN_ITERS`, :data:`SINKHORN_TOL`).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants; paper 2 (Li et al., 2026), linear
    attention; Sander et al., *Sinkformers* (AISTATS 2022); Kim, Papamakarios, Mnih (ICML 2021), L2 attention.
    Book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """

    kind: Any
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
    _d: int = field(init=False, repr=False, default=0)
    _B: Any = field(init=False, repr=False, default=None)

    def __post_init__(self):
        kind = get_kind(self.kind)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        B = _batch_size(self.beta, self.A, self.V, self.Q, self.K)
        Q = _matrices("Q", self.Q, square=False, batch=B)
        K = _matrices("K", self.K, square=False, batch=B)
        A = _matrices("A", self.A, square=True, batch=B)
        V = _matrices("V", self.V, square=True, batch=B)
        if V is None:
            raise ValueError("V (the value matrix) is required")
        if (Q is None) != (K is None):
            raise ValueError("Q and K must be given together")
        if Q is not None:
            if A is not None:
                raise ValueError("give either A or (Q, K), not both")
            if Q.shape != K.shape:
                raise ValueError(f"Q and K must have the same shape, got {Q.shape} and {K.shape}")
            A = np.einsum("...kd,...ke->...de", Q, K)
            A.flags.writeable = False
        if A is None:
            raise ValueError("the score matrix is required: give A or (Q, K)")
        if kind.factored and Q is None:
            raise ValueError(f"{kind.name} attention needs Q and K (its scores are not a function of A = Q^T K)")
        H, d = A.shape[-3], A.shape[-1]
        if V.shape[-1] != d:
            raise ValueError(f"V must be {d} x {d} like A, got shape {V.shape[-2:]}")
        if V.shape[-3] != H:
            raise ValueError(
                f"A has {H} head(s) but V has {V.shape[-3]}: give one value matrix per head "
                "(stack them along the first axis)"
            )
        if B is None:
            try:
                beta = validate_positive(self.beta, "beta")
            except ValueError:
                raise ValueError(f"beta must be a finite positive number, got {self.beta!r:.60}") from None
        else:
            beta = np.array(np.broadcast_to(real_array(self.beta, "beta"), (B,)), dtype=float)
            if not (np.all(np.isfinite(beta)) and np.all(beta > 0)):
                raise ValueError("beta must be finite and positive for every layer of the batch")
            beta.flags.writeable = False
        bias = validate_finite(self.bias, "bias")
        if bias != 0.0 and "bias" not in kind.parameters:
            raise ValueError(f"bias is a parameter of sigmoid attention only, not of {kind.name!r} attention")
        causal = validate_flag(self.causal, "causal")
        if causal and not kind.maskable:
            raise ValueError(f"causal masking is not defined for {kind.name} attention")
        for name, value in (("kind", kind), ("A", A), ("V", V), ("Q", Q), ("K", K), ("beta", beta)):
            set_(name, value)
        set_("bias", bias)
        set_("eps", validate_positive(self.eps, "eps"))
        set_("causal", causal)
        set_("sinkhorn_iters", validate_count(self.sinkhorn_iters, "sinkhorn_iters", maximum=MAX_ITERATIONS))
        set_("sinkhorn_tol", validate_positive(self.sinkhorn_tol, "sinkhorn_tol"))
        set_("_d", d)
        set_("_B", B)

    @property
    def d(self) -> int:
        """Token dimension."""
        return self._d

    @property
    def n_heads(self) -> int:
        """Number of heads H."""
        return self.A.shape[-3]

    @property
    def batch_size(self) -> int | None:
        """Number B of layers of a batch (None for one layer)."""
        return self._B

    def __len__(self) -> int:
        if self.batch_size is None:
            raise TypeError("one layer has no length; a batch of layers has (beta of shape (B,))")
        return self.batch_size

    def head(self, h: int) -> Head:
        """The matrices of head ``h``, shaped to broadcast against tokens (n, d) or (B, n, d).

        Parameters
        ----------
        h : int
            Which head.

        Returns
        -------
        Head
        """
        at = (h,) if self.batch_size is None else (slice(None), h)
        beta = self.beta if self.batch_size is None else self.beta[:, None, None]
        Q, K = (None, None) if self.Q is None else (self.Q[at], self.K[at])
        return Head(self.A[at], self.V[at], Q, K, beta, self)

    def _options(self) -> dict:
        return {k: getattr(self, k) for k in ("causal", "bias", "eps", "sinkhorn_iters", "sinkhorn_tol")}

    def _matrix_fields(self, pick) -> dict:
        if self.Q is not None:
            return dict(Q=pick(self.Q), K=pick(self.K), V=pick(self.V))
        return dict(A=pick(self.A), V=pick(self.V))

    def member(self, b: int) -> Attention:
        """Layer ``b`` of a batch, as one :class:`Attention`.

        Parameters
        ----------
        b : int
            Which layer (a negative index counts from the end).

        Returns
        -------
        Attention
        """
        len(self)
        return Attention(self.kind, beta=float(self.beta[b]), **self._matrix_fields(lambda M: M[b]), **self._options())

    def take(self, index) -> Attention:
        """The batch of the layers ``index`` (an integer array or a boolean mask over the B layers).

        Parameters
        ----------
        index : array of int or bool
            Which layers to keep.

        Returns
        -------
        Attention
            A batch of the chosen layers.
        """
        idx = np.arange(len(self))[index]
        return Attention(self.kind, beta=self.beta[idx], **self._matrix_fields(lambda M: M[idx]), **self._options())

    @classmethod
    def stack(cls, layers) -> Attention:
        """A batch of layers of one kind and shape (and equal options), stacked along a leading axis.

        Parameters
        ----------
        layers : sequence of Attention
            Non-empty; all of one kind, shape and options.

        Returns
        -------
        Attention
            The batch (``beta`` of shape (B,)).
        """
        layers = list(layers)
        if not layers or not all(isinstance(lay, Attention) and lay.batch_size is None for lay in layers):
            raise TypeError("Attention.stack needs a non-empty sequence of single Attention layers")
        first = layers[0]
        for b, lay in enumerate(layers):
            diff = [k for k, v in lay._options().items() if v != first._options()[k]]
            if lay.kind is not first.kind:
                diff.insert(0, "kind")
            if diff:
                raise ValueError(f"layer {b} differs from layer 0 in {diff}: a batch shares them")
            if (lay.A.shape, np.shape(lay.Q)) != (first.A.shape, np.shape(first.Q)):  # np.shape(None) is ()
                raise ValueError(f"layer {b} has another shape than layer 0 (heads, d, or Q/K given)")
        mats: dict[str, Any] = {k: np.stack([getattr(lay, k) for lay in layers]) for k in first._matrix_fields(id)}
        return cls(first.kind, beta=np.array([lay.beta for lay in layers]), **mats, **first._options())

    def with_(self, **changes) -> Attention:
        """A copy with some fields changed (validated again), e.g. ``layer.with_(beta=2.0)``.

        Parameters
        ----------
        **changes
            New field values; giving ``Q``/``K`` drops the old ``A`` and the reverse.

        Returns
        -------
        Attention
        """
        base = {"A": None, "Q": None, "K": None, **self._matrix_fields(lambda M: M)}
        if "Q" in changes or "K" in changes:
            base["A"] = None
        elif changes.get("A") is not None:
            base["Q"] = base["K"] = None
        return replace(self, **{**base, **changes})

    def to_dict(self) -> dict:
        """Plain description (lists and numbers) of the layer, for provenance records.

        Returns
        -------
        dict
            ``kind``, ``beta``, ``causal``, the matrices as nested lists and the kind's options (JSON-serialisable).
        """
        beta = self.beta if self.batch_size is None else self.beta.tolist()
        out: dict = {"kind": self.kind.name, "beta": beta, "causal": self.causal}
        for name in ("A", "V", "Q", "K"):
            M = getattr(self, name)
            if M is not None:
                out[name] = (M[..., 0, :, :] if M.shape[-3] == 1 else M).tolist()
        for name in self.kind.parameters:
            out[name] = getattr(self, name)
        return out

    def __repr__(self) -> str:
        heads = f", heads={self.n_heads}" if self.n_heads > 1 else ""
        extra = "".join(f", {k}={getattr(self, k):g}" for k in self.kind.parameters[:1])
        causal = ", causal=True" if self.causal else ""
        if self.batch_size is None:
            return f"Attention({self.kind.name!r}, d={self.d}{heads}, beta={self.beta:g}{extra}{causal})"
        betas = f"beta in [{self.beta.min():g}, {self.beta.max():g}]"
        return f"Attention({self.kind.name!r}, B={self.batch_size}, d={self.d}{heads}, {betas}{extra}{causal})"


#: A layer, or a function of depth returning one (depth-dependent parameters :math:`(A_t, V_t)`).
LayerLike = Attention | Callable[[float], Attention]


def require_layer(layer, name: str = "layer") -> Attention:
    """``layer`` itself if it is one :class:`Attention` (not a batch); a TypeError naming ``name`` otherwise.

    Parameters
    ----------
    layer, name
        The value to check, and its name in the message.

    Returns
    -------
    Attention

    References
    ----------
    Book: ``chapters/index.md``.
    """
    layer = validate_instance(layer, Attention, name, "an Attention (e.g. Attention('softmax', A=A, V=V))")
    if layer.batch_size is not None:
        raise TypeError(f"{name} is a batch of {layer.batch_size} layers; this needs one layer (use layer.member(b))")
    return layer


def layer_at(layer: LayerLike, t: float, d: int) -> Attention:
    r"""The layer at depth ``t``: ``layer``, or ``layer(t)`` for depth-dependent parameters :math:`(A_t, V_t)`.

    Parameters
    ----------
    layer, t, d
        A layer or ``t -> Attention``, the depth, the expected token dimension (a ValueError otherwise).

    Returns
    -------
    Attention

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the Transformer PDE with depth-dependent parameters.
    """
    lay = layer(t) if callable(layer) else layer  # an Attention is not callable
    if not isinstance(lay, Attention):
        raise TypeError(
            "layer must be an Attention or a callable t -> Attention (a time-dependent layer must return an "
            f"Attention), got {type(lay).__name__}"
        )
    if lay.d != d:
        raise ValueError(f"the layer at t = {t:g} has d = {lay.d}, the tokens have d = {d}")
    return lay


# scores, weights and the field


def _positions(positions, n: int, layer: Attention) -> np.ndarray:
    """Token positions of a causal layer; positions given to a non-causal layer are refused (they would be ignored)."""
    if positions is not None and not layer.causal:
        raise ValueError(
            "positions are used by causal (masked) layers only, and this layer has causal=False: "
            "drop positions or build the layer with causal=True"
        )
    return validate_positions(positions, n)


def _head_weights(X, layer: Attention, w, s, h, state=None, rows: slice = slice(None)):
    """Weights of head h, rows ``rows``, as ``(W, r, info)`` with :math:`P = W / r` row-wise (``r`` may be None)."""
    head = layer.head(h)
    left, right, col = layer.kind.factors(X[..., rows, :], X, head)
    S = left @ np.swapaxes(right, -1, -2)
    if col is not None:
        S += col
    if layer.causal:
        S[..., ~(s[None, :] <= s[rows, None])] = -np.inf
    return layer.kind.weigh(S, w, head, None if state is None else state.setdefault(h, {}))


def attention_matrix(X, layer: Attention, weights=None, *, positions=None, head: int = 0, return_info: bool = False):
    r"""The dense weights :math:`P^{(h)}` of one head (masses included, masked pairs zero), rows summing to one
    for normalised kinds; ``velocity(X, layer) = sum_h P^(h) @ X @ V_h.T``.

    Parameters
    ----------
    X, layer, weights, positions
        As in :func:`velocity`.
    head, return_info
        Which head; also return the solver information (Sinkhorn: iterations, marginal error).

    Returns
    -------
    P : array (n, n)
    info : dict
        Only with ``return_info``.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), the attention variants; book: ``chapters/index.md``, (eq-intro-sa).
    """
    layer = require_layer(layer)
    X = validate_tokens(X, layer.d)
    n = X.shape[0]
    w = validate_weights(weights, n)
    head = validate_count(head, "head", minimum=0)
    if head >= layer.n_heads:
        raise ValueError(f"head must be in [0, {layer.n_heads}), got {head}")
    W, r, info = _head_weights(X, layer, w, _positions(positions, n, layer), head)
    P = W if r is None else W / r[:, None]
    return (P, info) if validate_flag(return_info, "return_info") else P


def velocity(
    X, layer: Attention, weights=None, *, positions=None, backend: str = "auto", sinkhorn_state: dict | None = None
) -> np.ndarray:
    r"""The in-context field :math:`\Gamma_\mu(x_i)=\sum_h\sum_jP^{(h)}_{ij}V_hx_j` at the tokens of
    :math:`\mu=\sum_j w_j\delta_{x_j}` (particles: uniform masses; the mean-field PDE: quadrature weights).

    Parameters
    ----------
    X, layer
        Tokens (n, d), and one layer (a batch goes through :func:`velocity_batch`).
    weights, positions : arrays (n,), optional
        Masses :math:`w_j\ge0` summing to one (uniform if omitted); positions of a causal layer (default: the
        index order).
    backend : {"auto", "numpy", "dense"}
        ``auto`` (or ``numpy``): a closed form where the kind has one (linear attention's d x d second
        moment), the weights in blocks of rows otherwise (never the whole n x n matrix); ``dense``: the
        n x n matrix always.
    sinkhorn_state : dict, optional
        Sinkhorn potentials to warm-start from (the same dict along a trajectory).

    Returns
    -------
    array (n, d)

    Raises
    ------
    NonFiniteError, ConvergenceError
        The field overflowed; Sinkhorn missed ``sinkhorn_tol`` within ``sinkhorn_iters`` iterations.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); paper 2 (Li et al., 2026), linear attention. Book:
    ``chapters/01_well_posedness.md``, equations (eq-p1-ips) and (eq-p1-tpde).

    Examples
    --------
    >>> import numpy as np
    >>> from tokendynamics.attention import Attention, velocity
    >>> velocity(np.array([[1.0, 0.0], [0.0, 1.0]]), Attention("linear", A=np.eye(2), V=np.eye(2)))
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
    r""":func:`velocity` for inputs validated once by the caller (integrators); a non-finite result still raises.

    Parameters
    ----------
    X, layer, w, s, backend, sinkhorn_state
        As in :func:`velocity` (X float64), with ``w``, ``s`` the masses (None: uniform) and positions (n,).

    Returns
    -------
    array (n, d)

    References
    ----------
    Book: ``chapters/01_well_posedness.md``, equation (eq-p1-ips).
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = _velocity(X, layer, w, s, backend, sinkhorn_state)
    if not np.all(np.isfinite(out)):
        raise NonFiniteError(
            f"{layer!r} produced a non-finite velocity (overflow); the scores beta <x, A y> are too "
            "large for this variant at these tokens"
        )
    return out


#: Codes of :func:`velocity_batch_unchecked`'s status: the field of a system is fine, overflowed, or its
#: Sinkhorn solve missed the tolerance.
FIELD_OK, FIELD_NONFINITE, FIELD_NOT_CONVERGED = 0, 1, 2


def require_batch_layer(layer, B: int, d: int, what: str = "layer") -> Attention:
    """``layer`` if it can drive B systems of dimension d: one :class:`Attention`, or a batch of B layers.

    Parameters
    ----------
    layer, B, d, what
        The value to check, the number of systems and their dimension, its name in error messages.

    Returns
    -------
    Attention

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``.
    """
    if not isinstance(layer, Attention):
        raise TypeError(f"{what} must be an Attention (one layer or a batch of layers), got {type(layer).__name__}")
    if layer.d != d:
        raise ValueError(f"{what} has d = {layer.d}, the tokens have d = {d}")
    if layer.batch_size not in (None, B):
        raise ValueError(f"{what} has {layer.batch_size} layers for {B} systems")
    return layer


def velocity_batch(X, layer, weights=None, *, sinkhorn_state: dict | None = None):
    r"""The fields of B systems ``X[b]`` at once, each driven by ``layer`` (shared) or its layer b (a batch).

    The code of :func:`velocity` with the batch as leading axes; one bad system is flagged, not raised.
    Validates its inputs, then calls :func:`velocity_batch_unchecked`.

    Parameters
    ----------
    X, layer
        B clouds (B, n, d), and one layer or a batch of B.
    weights, sinkhorn_state
        As in :func:`velocity` (masses shared by the systems).

    Returns
    -------
    U : array (B, n, d)
        The fields (zero rows for a flagged system).
    status : array of int (B,)
        :data:`FIELD_OK`, :data:`FIELD_NONFINITE` or :data:`FIELD_NOT_CONVERGED` (Sinkhorn).

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``.
    """
    X = validate_finite_array(X, "X")
    if X.ndim != 3 or X.shape[1] == 0:
        raise ValueError(f"X must be a batch of token clouds (B, n, d), got shape {X.shape}")
    require_batch_layer(layer, X.shape[0], X.shape[2])
    return velocity_batch_unchecked(X, layer, validate_weights(weights, X.shape[1]), sinkhorn_state)


def velocity_batch_unchecked(X, layer: Attention, w, sinkhorn_state: dict | None = None):
    r""":func:`velocity_batch` for inputs the caller validated once.

    The caller is :func:`~tokendynamics.ensembles.simulate_batch`.

    Parameters
    ----------
    X, layer
        B clouds (B, n, d) (float64), and one layer or a batch of B.
    w, sinkhorn_state
        Masses (n,) shared by the systems (None: uniform), and as in :func:`velocity`.

    Returns
    -------
    U : array (B, n, d)
        The fields (zero rows for a flagged system).
    status : array of int (B,)
        :data:`FIELD_OK`, :data:`FIELD_NONFINITE` or :data:`FIELD_NOT_CONVERGED` (Sinkhorn).

    References
    ----------
    Book: ``chapters/07_phase_diagrams.md``.
    """
    missed = np.zeros(X.shape[0], dtype=bool)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = _velocity(X, layer, w, np.arange(X.shape[1], dtype=float), "numpy", sinkhorn_state, failed=missed)
    status = np.where(np.all(np.isfinite(out), axis=(1, 2)), FIELD_OK, FIELD_NONFINITE)
    status[missed] = FIELD_NOT_CONVERGED
    out[status != FIELD_OK] = 0.0
    return out, status


def _velocity(X, layer: Attention, w, s, backend, sinkhorn_state, failed=None):
    """The field of every head, summed, for X (..., n, d); a missed Sinkhorn tolerance raises ConvergenceError,
    or is marked in the boolean array ``failed`` (shape of the batch axes) when given."""
    kind: AttentionKind = layer.kind
    n = X.shape[-2]
    out = np.zeros_like(X)
    closed = kind.capabilities.get("second_moment") if backend != "dense" else None  # type: ignore[union-attr]
    for h in range(layer.n_heads):
        if closed is not None:
            out += closed(X, w, s, layer.head(h), layer.causal)
            continue
        values = X @ np.swapaxes(layer.head(h).V, -1, -2)
        if kind.has("solve"):  # the weights couple all rows: one solve for the whole matrix
            require_memory(4 * n * n * math.prod(X.shape[:-2]), f"{kind.name} attention at n = {n} (an n x n plan)")
            W, _, info = _head_weights(X, layer, w, s, h, {} if sinkhorn_state is None else sinkhorn_state)
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
            part = W @ values
            out[..., rows, :] += part if r is None else part / r[..., None]
    return out


def sinkhorn_failure(iterations: int, error: float, layer: Attention) -> str:
    """What a Sinkhorn ConvergenceError says: the tolerance missed, the error reached, and what to change."""
    return (
        f"Sinkhorn attention did not reach sinkhorn_tol = {layer.sinkhorn_tol:.3g} in {iterations} iterations: "
        f"the column-marginal error reached is {error:.3g} (eps = {layer.eps:g}). Raise sinkhorn_iters "
        f"(now {layer.sinkhorn_iters}), loosen sinkhorn_tol (e.g. sinkhorn_tol={max(10 * error, 1e-8):.0e} "
        "still fixes the field to about that relative accuracy), or raise eps (convergence slows down like "
        "exp(-score range / eps), e.g. for tight clusters of tokens with large scores)"
    )
