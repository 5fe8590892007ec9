r"""Constructors of paper 1's attention variants that its conventions need (Castin et al., arXiv:2501.18322).

Every variant is an :class:`~tokendynamics.attention.Attention` layer; two need more than a kind name:

* :func:`multihead_from_rows` — multi-head attention as in the authors' code: :math:`Q, K, V` split by
  row blocks into heads, :math:`A_h = Q_h^\top K_h` (library convention, i.e. the paper's
  :math:`K_h^\top Q_h`), output :math:`C_h = W_h^\top V_h` with :math:`W = I` split the same way;
* :func:`sigmoid_layer` — sigmoid attention, averaged over tokens (``normalization="mean"``:
  :math:`\frac1n\sum_j\sigma(s_{ij}+b)Vx_j`) or summed with the bias :math:`b=-\log n` of Ramapuram et
  al. (``normalization="sum"``, ``bias="-log n"``), which tends to unnormalised exponential attention as
  :math:`n\to\infty`.

The chapter's gallery of the eight variants is :func:`tokendynamics.book.studies.variants.paper1_variants`.
"""

from __future__ import annotations

import math

import numpy as np

from .attention import Attention
from .docstrings import fill_doc
from .kinds import get_kind
from .validation import real_array, validate_choice, validate_count, validate_finite, validate_positive, validate_square

__all__ = ["multihead_from_rows", "sigmoid_layer"]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    # the references of the variants' velocity fields
    "ref_variants": """
        Paper 1 (Castin et al., arXiv:2501.18322), the velocity fields of the attention variants; book:
        ``chapters/01_well_posedness.md``, section "Eight velocity fields" (the table of fields), integrated
        as equation (eq-p1-ips).
    """,
}


@fill_doc(_DOC)
def multihead_from_rows(
    Q, K, V, n_heads: int, *, W=None, scale: float = 1.0, kind: str = "softmax", beta: float = 1.0, **layer_kwargs
) -> Attention:
    r"""Multi-head attention with :math:`Q, K, V` split into heads by row blocks (paper 1, arXiv:2501.18322; chapter 1
    of the book).

    Head :math:`h` uses rows :math:`hk,\dots,(h+1)k-1` (:math:`k=d/H`) of :math:`Q`, :math:`K`,
    :math:`V` and of the output matrix :math:`W` (default :math:`I_d`):

    .. math::

       \Gamma_\mu(x)=\sum_{h=1}^H C_h\,
       \frac{\int e^{\langle x,A_hy\rangle}y\,d\mu(y)}{\int e^{\langle x,A_hy\rangle}d\mu(y)},
       \qquad A_h=\text{scale}\cdot Q_h^\top K_h,\quad C_h=W_h^\top V_h .

    The authors' code uses ``scale = 1/sqrt(k)`` (pass it to reproduce their figures); the library
    keeps the scale out of the model. If :math:`Q, K` have fewer than :math:`Hk` rows, the heads
    without rows have :math:`A_h=0`: they add :math:`C_h\int y\,d\mu` (the mean), and nothing to
    the covariance equation — the situation of the paper's figure F2c.

    Parameters
    ----------
    Q, K : array_like (r, d), r <= H k
        Query and key matrices, cut into heads of :math:`k` consecutive rows (the last heads may have none).
    V : array_like (d, d)
        Value matrix, cut into heads the same way.
    n_heads : int
        Number :math:`H` of heads; must divide d.
    W : array_like (d, d), optional
        Output matrix, cut into heads like :math:`V`; None means :math:`I_d`.
    scale : float
        Positive factor of every :math:`A_h` (for ``l2``: :math:`Q_h` and :math:`K_h` are multiplied by its
        square root).
    kind : str
        Any row-wise kind of the core (``softmax`` by default; ``l2`` uses :math:`Q_h, K_h`
        directly and then needs every head to have rows).
    beta : float
        Inverse temperature :math:`\beta` of the layer.
    **layer_kwargs
        Further keyword arguments of :class:`~tokendynamics.attention.Attention` (e.g. ``causal=True``).

    Returns
    -------
    Attention
        A layer of :math:`H` heads with score matrices :math:`A_h` (or, for ``l2``, :math:`Q_h, K_h`) and
        value matrices :math:`C_h`, each (d, d).

    References
    ----------
    %(ref_variants)s
    The authors' code cuts the heads by row blocks (paper 1's official implementation).
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
        Qs = np.stack([math.sqrt(scale) * Q[b] for b in blocks])
        Ks = np.stack([math.sqrt(scale) * K[b] for b in blocks])
        return Attention(kind, Q=Qs, K=Ks, V=C, beta=beta, **layer_kwargs)
    A = np.stack([scale * (Q[b].T @ K[b]) if Q[b].shape[0] else np.zeros((d, d)) for b in blocks])
    return Attention(kind, A=A, V=C, beta=beta, **layer_kwargs)


@fill_doc(_DOC)
def sigmoid_layer(
    A, V, *, beta: float = 1.0, bias=0.0, normalization: str = "mean", n: int | None = None, causal: bool = False
) -> Attention:
    r"""Sigmoid attention (paper 1, arXiv:2501.18322), averaged over tokens or summed as in Ramapuram et al.

    * ``normalization="mean"``: :math:`\Gamma_\mu(x)=\int\sigma(\beta\langle x,Ay\rangle+b)\,Vy\,d\mu(y)`,
      i.e. :math:`\frac1n\sum_j\sigma(s_{ij}+b)Vx_j` for particles — linear in :math:`\mu`;
    * ``normalization="sum"``: :math:`\sum_j\sigma(s_{ij}+b)Vx_j` for :math:`n` tokens, i.e. the
      mean form with value matrix :math:`nV` (for weighted measures: :math:`n\int\sigma\,Vy\,d\mu`).

    ``bias="-log n"`` sets :math:`b=-\log n`. Since :math:`n\,\sigma(s-\log n)=e^s/(1+e^s/n)`, the
    summed form with this bias differs from unnormalised exponential attention
    :math:`\int e^{s}Vy\,d\mu` by :math:`\int\frac{e^{2s}}{n+e^s}Vy\,d\mu=O(e^{2\|A\|R^2}R\|V\|/n)`.

    Parameters
    ----------
    A, V : array_like (d, d)
        Score and value matrices (library convention: score :math:`\beta\langle x,Ay\rangle`).
    beta : float
        Inverse temperature :math:`\beta`.
    bias : float or ``"-log n"``
        The bias :math:`b` added to every score; ``"-log n"`` means :math:`b=-\log n` (needs ``n``).
    normalization : {"mean", "sum"}
        Average over the tokens, or sum over them (see above; needs ``n``).
    n : int, optional
        Number of tokens the layer is built for; required by ``normalization="sum"`` and ``bias="-log n"``.
    causal : bool
        Masked (causal) sigmoid attention: token :math:`i` sees the positions :math:`s_j\le s_i` only.

    Returns
    -------
    Attention
        A ``"sigmoid"`` layer with bias :math:`b` and value matrix :math:`V` (:math:`nV` for ``"sum"``).

    References
    ----------
    %(ref_variants)s
    J. Ramapuram et al., *Theory, Analysis, and Best Practices for Sigmoid Self-Attention*, arXiv:2409.04431 (2024).
    """
    normalization = validate_choice(normalization, "normalization", ("mean", "sum"))
    needs_n = normalization == "sum" or (isinstance(bias, str))
    if needs_n and n is None:
        raise ValueError(f"normalization={normalization!r} / bias={bias!r} needs the number of tokens n")
    if n is not None:
        n = validate_count(n, "n")
    if isinstance(bias, str):
        if bias.replace(" ", "") != "-logn":
            raise ValueError(f"bias must be a number or the string '-log n', got {bias!r}")
        assert n is not None  # checked above
        b = -math.log(n)
    else:
        b = validate_finite(bias, "bias")
    V = real_array(V, "V")
    if normalization == "sum":
        V = n * V
    return Attention("sigmoid", A=A, V=V, beta=beta, bias=b, causal=causal)
