r"""The attention variants of paper 1 (Castin et al., arXiv:2501.18322), built on the one attention core.

Each variant is an :class:`~tokendynamics.attention.Attention` layer (plus, for masked attention,
a sink and positions); this module adds the constructors the paper's conventions need and a small
:class:`Variant` object that pushes tokens with :func:`~tokendynamics.particles.simulate`:

* :func:`multihead_from_rows` — multi-head attention of paper 1, as in the authors' code: :math:`Q, K, V` split by
  row blocks into heads, :math:`A_h = Q_h^\top K_h` (library convention, i.e. the paper's
  :math:`K_h^\top Q_h`), output :math:`C_h = W_h^\top V_h` with :math:`W = I` split the same way;
* :func:`sigmoid_layer` — sigmoid attention of paper 1, either averaged over tokens (``normalization="mean"``:
  :math:`\frac1n\sum_j\sigma(s_{ij}+b)Vx_j`) or summed with the bias :math:`b=-\log n` of
  Ramapuram et al. (``normalization="sum"``, ``bias="-log n"``: :math:`\sum_j\sigma(s_{ij}-\log n)Vx_j`,
  which tends to unnormalised exponential attention as :math:`n\to\infty`);
* :func:`paper1_variants` — the eight variants of the chapter's gallery from one pair
  :math:`(A, V)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .attention import Attention
from .docstrings import fill_doc
from .kinds import KINDS, get_kind
from .masked import SinkSystem, with_sink
from .particles import Trajectory, simulate
from .validation import (
    real_array,
    validate_choice,
    validate_count,
    validate_finite,
    validate_positive,
    validate_square,
    validate_tokens,
)

__all__ = [
    "VARIANT_NAMES",
    "multihead_from_rows",
    "sigmoid_layer",
    "Variant",
    "paper1_variants",
]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    # the references of the variants' velocity fields
    "ref_variants": """
        Paper 1 (Castin et al., arXiv:2501.18322), the velocity fields of the attention variants; book:
        ``chapters/01_well_posedness.md``, section "Eight velocity fields" (the table of fields), integrated
        as equation (eq-p1-ips).
    """,
}

VARIANT_NAMES = ("softmax", "multihead", "l2", "sinkhorn", "sigmoid", "linear", "unnormalized_softmax", "masked")


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


@dataclass(frozen=True, eq=False)
class Variant:
    r"""A named attention variant of paper 1 (arXiv:2501.18322), ready to push tokens.

    ``layer`` is the core layer, or a callable ``t -> Attention`` for depth-dependent parameters
    :math:`(A_t, V_t)`; for masked attention ``sink_mass`` (:math:`m_0`) and ``sink_token`` say how
    :func:`~tokendynamics.masked.with_sink` extends the tokens to :math:`(s,x)` space (positions
    :math:`s_i=i/n` in row order, sink at :math:`s=0`).
    """

    name: str
    layer: Attention | Callable[[float], Attention]
    sink_mass: float | None = None
    sink_token: np.ndarray | None = None

    @property
    def masked(self) -> bool:
        """Whether this is masked attention with a sink (``sink_mass`` is set)."""
        return self.sink_mass is not None

    def layer_at(self, t: float = 0.0) -> Attention:
        """The layer at depth t.

        Parameters
        ----------
        t : float
            Depth (time).

        Returns
        -------
        Attention
            The variant's layer (the same at every depth unless the variant's layer is a function of t).
        """
        return self.layer if isinstance(self.layer, Attention) else self.layer(t)

    def system(self, X0) -> SinkSystem:
        """The measure the core integrates: tokens (with sink and positions if masked).

        Parameters
        ----------
        X0 : array (n, d)
            Initial tokens.

        Returns
        -------
        SinkSystem
            Uniform weights and positions ``i/n`` for an unmasked variant; the tokens after a sink of
            mass ``sink_mass`` (:func:`~tokendynamics.masked.with_sink`) for a masked one.
        """
        X0 = validate_tokens(X0, self.layer_at(0.0).d, name="X0")
        if not self.masked:
            n = X0.shape[0]
            causal = isinstance(self.layer, Attention) and self.layer.causal
            return SinkSystem(X0.copy(), np.full(n, 1.0 / n), np.arange(1, n + 1) / n, 0, 0.0, causal=causal)
        assert self.sink_mass is not None  # masked
        return with_sink(X0, self.sink_mass, sink=self.sink_token)

    def run(
        self, X0, T: float, *, dt: float, method: str = "rk4", save_every: int = 1, on_blowup: str = "stop", **kwargs
    ) -> tuple[Trajectory, SinkSystem]:
        r"""Integrate :math:`\dot x_i=\Gamma_{\mu_t}(x_i)` from ``X0`` up to ``T``.

        A blow-up stops the run (``trajectory.blowup_time`` is set) unless ``on_blowup="raise"``.

        Parameters
        ----------
        X0 : array (n, d)
            Initial tokens (without the sink: :meth:`system` adds it).
        T : float
            Final depth.
        dt, method, save_every, on_blowup
            As in :func:`~tokendynamics.particles.simulate`.
        **kwargs
            Further options of :func:`~tokendynamics.particles.simulate`.

        Returns
        -------
        trajectory : Trajectory
            The run of the whole system (sink rows included).
        system : SinkSystem
            The system integrated; ``system.tokens(trajectory.X)`` drops the sink rows.
        """
        sys_ = self.system(X0)
        extra = sys_.simulate_kwargs() if self.masked else {}
        traj = simulate(
            sys_.X, self.layer, T, dt=dt, method=method, save_every=save_every, on_blowup=on_blowup, **extra, **kwargs
        )
        return traj, sys_

    def __repr__(self) -> str:
        sink = f", m0={self.sink_mass:g}" if self.masked else ""
        lay = repr(self.layer) if isinstance(self.layer, Attention) else "depth-dependent"
        return f"Variant({self.name!r}, {lay}{sink})"


@fill_doc(_DOC)
def paper1_variants(
    A,
    V,
    *,
    beta: float = 1.0,
    eps: float = 1.0,
    bias: float = 0.0,
    n_heads: int | None = None,
    sink_mass: float = 0.1,
    sink_token=None,
    names=VARIANT_NAMES,
) -> dict[str, Variant]:
    r"""The gallery of paper 1's variants (arXiv:2501.18322; chapter 1 of the book) from one score matrix :math:`A` and
    value matrix :math:`V` (library convention).

    ========================  =====================================================================
    ``softmax``               :math:`\mathrm{Attention}(\text{softmax}, A, V, \beta)`
    ``multihead``             :func:`multihead_from_rows` with :math:`Q=I`, :math:`K=A`, :math:`V`,
                              :math:`H=d` heads by default (head :math:`h` scores with row :math:`h`
                              of :math:`A` and writes row :math:`h` of :math:`V`)
    ``l2``                    :math:`e^{-\beta|x-Ay|^2}` (:math:`Q=I`, :math:`K=A`, so :math:`Q^\top K=A`)
    ``sinkhorn``              entropic self-plan, cost :math:`-\beta\langle x,Ay\rangle`, :math:`\varepsilon` = ``eps``
    ``sigmoid``               :math:`\int\sigma(\beta\langle x,Ay\rangle+b)Vy\,d\mu` (mean normalisation)
    ``linear``                :math:`\int\beta\langle x,Ay\rangle Vy\,d\mu`
    ``unnormalized_softmax``  :math:`\int e^{\beta\langle x,Ay\rangle}Vy\,d\mu`
    ``masked``                causal softmax, positions :math:`i/n`, sink of mass ``sink_mass`` at
                              :math:`s=0` (default sink token: the origin)
    ========================  =====================================================================

    Parameters
    ----------
    A, V : array_like (d, d)
        Score and value matrices shared by every variant.
    beta : float
        Inverse temperature :math:`\beta` of every variant.
    eps : float
        Entropic regularisation :math:`\varepsilon` of the Sinkhorn variant.
    bias : float
        Bias :math:`b` of the sigmoid variant.
    n_heads : int, optional
        Number of heads of the multi-head variant (must divide d); None means d heads.
    sink_mass : float
        Sink mass :math:`m_0\in[0,1)` of the masked variant (0: plain causal attention, no sink).
    sink_token : array_like (d,) or (k, d), optional
        Sink token(s) of the masked variant (:func:`~tokendynamics.masked.with_sink`); None: the origin.
    names : sequence of str
        Which variants to build: among ``VARIANT_NAMES`` (default: all eight), or the name of any other
        registered attention kind (:data:`~tokendynamics.kinds.KINDS`, e.g. ``"relu"``, ``"hardmax"``), built as
        ``Attention(name, A=A, V=V, beta=beta)``.

    Returns
    -------
    dict of str to Variant
        The variants, keyed by name, in the order of ``names``.

    References
    ----------
    %(ref_variants)s
    """
    A = validate_square(A, "A")
    V = validate_square(V, "V", A.shape[0])
    d = A.shape[0]
    if isinstance(names, str):
        raise ValueError(f"names must be a list of variant names, got the string {names!r}")
    unknown = set(names) - set(VARIANT_NAMES) - set(KINDS)
    if unknown:
        raise ValueError(f"names lists unknown variant(s) {sorted(unknown)}; known: {VARIANT_NAMES + tuple(KINDS)}")
    H = d if n_heads is None else validate_count(n_heads, "n_heads")
    sink_mass = validate_finite(sink_mass, "sink_mass")
    if not 0 <= sink_mass < 1:
        raise ValueError(f"sink_mass must be in [0, 1), got {sink_mass!r}")
    build = {
        "softmax": lambda: Variant("softmax", Attention("softmax", A=A, V=V, beta=beta)),
        "multihead": lambda: Variant("multihead", multihead_from_rows(np.eye(d), A, V, H, beta=beta)),
        "l2": lambda: Variant("l2", Attention("l2", Q=np.eye(d), K=A, V=V, beta=beta)),
        "sinkhorn": lambda: Variant("sinkhorn", Attention("sinkhorn", A=A, V=V, beta=beta, eps=eps)),
        "sigmoid": lambda: Variant("sigmoid", sigmoid_layer(A, V, beta=beta, bias=bias)),
        "linear": lambda: Variant("linear", Attention("linear", A=A, V=V, beta=beta)),
        "unnormalized_softmax": lambda: Variant(
            "unnormalized_softmax", Attention("unnormalized_softmax", A=A, V=V, beta=beta)
        ),
        "masked": lambda: Variant(
            "masked",
            Attention("softmax", A=A, V=V, beta=beta, causal=True),
            sink_mass=float(sink_mass),
            sink_token=None if sink_token is None else np.asarray(sink_token, float),
        ),
    }
    # any other registered kind (e.g. relu, hardmax): one head with (A, V), as built by its name alone
    generic = lambda name: Variant(name, Attention(name, A=A, V=V, beta=beta))  # noqa: E731
    return {name: build[name]() if name in build else generic(name) for name in names}
