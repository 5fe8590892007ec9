r"""Constructors of paper 1's attention variants that need more than a kind name (Castin et al., arXiv:2501.18322).

:func:`multihead_from_rows` cuts :math:`Q, K, V` into heads by row blocks, as the authors' code does;
:func:`sigmoid_layer` builds sigmoid attention averaged over tokens, or summed with the bias :math:`-\log n` of
Ramapuram et al. The chapter's gallery of variants is :func:`tokendynamics.book.studies.variants.paper1_variants`.
"""

from __future__ import annotations

import math

import numpy as np

from .attention import Attention
from .docstrings import fill_doc
from .kinds import get_kind
from .validation import real_array, validate_choice, validate_count, validate_finite, validate_positive, validate_square

__all__ = ["multihead_from_rows", "sigmoid_layer"]

_REF = (
    "References\n----------\nPaper 1 (Castin et al., arXiv:2501.18322), the fields of the attention variants; book: "
    '``chapters/01_well_posedness.md``, section "Eight velocity fields", equation (eq-p1-ips).'
)


@fill_doc({"ref_variants": _REF})
def multihead_from_rows(
    Q, K, V, n_heads: int, *, W=None, scale: float = 1.0, kind: str = "softmax", beta: float = 1.0, **layer_kwargs
) -> Attention:
    r"""Multi-head attention with :math:`Q, K, V` split into heads by row blocks, as in the authors' code.

    Head :math:`h` uses rows :math:`hk,\dots,(h+1)k-1` (:math:`k=d/H`) of :math:`Q`, :math:`K`, :math:`V` and of
    the output matrix :math:`W` (default :math:`I_d`):

    .. math:: \Gamma_\mu(x)=\sum_{h=1}^H C_h\frac{\int e^{\langle x,A_hy\rangle}y\,d\mu(y)}
              {\int e^{\langle x,A_hy\rangle}d\mu(y)},\qquad A_h=\text{scale}\cdot Q_h^\top K_h,\quad C_h=W_h^\top V_h .

    The authors use ``scale = 1/sqrt(k)``; a head without rows of :math:`Q, K` has :math:`A_h=0`.

    Parameters
    ----------
    Q, K : array_like (r, d), r <= H k
        Query and key matrices, cut into heads of :math:`k` consecutive rows (the last heads may have none).
    V : array_like (d, d)
        Value matrix, cut the same way.
    n_heads : int
        Number :math:`H` of heads; must divide d.
    W : array_like (d, d), optional
        Output matrix, cut like :math:`V`; None means :math:`I_d`.
    scale : float
        Positive factor of every :math:`A_h` (``l2``: :math:`Q_h` and :math:`K_h` are multiplied by its root).
    kind : str
        A row-wise kind (``softmax``; ``l2`` uses :math:`Q_h, K_h` and needs rows for every head).
    beta : float
        Inverse temperature.
    **layer_kwargs
        Further arguments of :class:`~tokendynamics.attention.Attention` (e.g. ``causal=True``).

    Returns
    -------
    Attention
        A layer of :math:`H` heads with matrices :math:`A_h` (or :math:`Q_h, K_h`) and values :math:`C_h`.

    %(ref_variants)s
    """
    Q = np.atleast_2d(real_array(Q, "Q"))
    K = np.atleast_2d(real_array(K, "K"))
    V = validate_square(V, "V")
    d = V.shape[0]
    H = validate_count(n_heads, "n_heads")
    factored = get_kind(kind).factored
    if d % H:
        raise ValueError(f"n_heads = {H} must divide d = {d} (head size k = d / n_heads)")
    if Q.shape != K.shape or Q.ndim != 2 or Q.shape[1] != d:
        raise ValueError(f"Q and K must both be (r, {d}) with the same r, got {Q.shape} and {K.shape}")
    k = d // H
    if Q.shape[0] > H * k:
        raise ValueError(f"Q and K have {Q.shape[0]} rows, more than H k = {H * k}")
    W = np.eye(d) if W is None else validate_square(W, "W", d)
    scale = validate_positive(scale, "scale")
    blocks = [slice(h * k, (h + 1) * k) for h in range(H)]
    C = np.stack([W[b].T @ V[b] for b in blocks])
    if factored:  # the scores need Q and K themselves (L2)
        if Q.shape[0] < H * k:
            raise ValueError(f"{kind} multi-head attention needs k rows of Q and K for every head")
        Qs, Ks = (math.sqrt(scale) * M.reshape(H, k, d) for M in (Q, K))  # head h: rows hk, ..., (h + 1)k - 1
        return Attention(kind, Q=Qs, K=Ks, V=C, beta=beta, **layer_kwargs)
    A = np.stack([scale * (Q[b].T @ K[b]) if Q[b].shape[0] else np.zeros((d, d)) for b in blocks])
    return Attention(kind, A=A, V=C, beta=beta, **layer_kwargs)


@fill_doc({"ref_variants": _REF})
def sigmoid_layer(
    A, V, *, beta: float = 1.0, bias=0.0, normalization: str = "mean", n: int | None = None, causal: bool = False
) -> Attention:
    r"""Sigmoid attention, averaged over tokens or summed as in Ramapuram et al.

    ``"mean"``: :math:`\Gamma_\mu(x)=\int\sigma(\beta\langle x,Ay\rangle+b)\,Vy\,d\mu(y)`; ``"sum"``: the same
    with value matrix :math:`nV`, i.e. :math:`\sum_j\sigma(s_{ij}+b)Vx_j` for :math:`n` tokens; with
    :math:`b=-\log n` it is unnormalised attention up to :math:`O(e^{2\|A\|R^2}R\|V\|/n)`.

    Parameters
    ----------
    A, V : array_like (d, d)
        Score and value matrices.
    beta : float
        Inverse temperature.
    bias : float or ``"-log n"``
        The bias :math:`b` added to every score (``"-log n"`` needs ``n``).
    normalization : {"mean", "sum"}
        Average or sum over the tokens (``"sum"`` needs ``n``).
    n : int, optional
        Number of tokens the layer is built for.
    causal : bool
        Masked (causal) sigmoid attention.

    Returns
    -------
    Attention
        A ``"sigmoid"`` layer with bias :math:`b` and value matrix :math:`V` (:math:`nV` for ``"sum"``).

    %(ref_variants)s
    J. Ramapuram et al., *Theory, Analysis, and Best Practices for Sigmoid Self-Attention*, arXiv:2409.04431 (2024).
    """
    normalization = validate_choice(normalization, "normalization", ("mean", "sum"))
    if (normalization == "sum" or isinstance(bias, str)) and n is None:
        raise ValueError(f"normalization={normalization!r} / bias={bias!r} needs the number of tokens n")
    n = None if n is None else validate_count(n, "n")
    if isinstance(bias, str):
        if bias.replace(" ", "") != "-logn":
            raise ValueError(f"bias must be a number or the string '-log n', got {bias!r}")
        assert n is not None  # checked above
        b = -math.log(n)
    else:
        b = validate_finite(bias, "bias")
    V = real_array(V, "V")
    return Attention("sigmoid", A=A, V=n * V if normalization == "sum" else V, beta=beta, bias=b, causal=causal)
