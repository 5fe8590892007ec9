r"""Masked (causal) attention in the extended space :math:`(s, x)`, with an attention sink.

Paper 1 (Castin et al., arXiv:2501.18322), masked attention; chapter 1 of the book. Tokens carry a position
:math:`s\in[0,1]`; the state is a measure
:math:`\mu\in\mathcal P([0,1]\times\mathbb R^d)` whose position marginal :math:`\lambda` does not
move, and token :math:`(s,x)` attends only to positions :math:`r\le s`:

.. math:: \Gamma_\mu(s,x)=\frac{\int_{[0,s]\times\mathbb R^d}e^{\langle x,Ay\rangle}\,Vy\,d\mu(r,y)}
          {\int_{[0,s]\times\mathbb R^d}e^{\langle x,Ay\rangle}\,d\mu(r,y)} .

The denominator is at least :math:`\lambda([0,s])\,e^{-\|A\|R^2}`, which degenerates as
:math:`s\to0`; an **attention sink** — an atom :math:`\lambda(\{0\})=m_0>0` of the position marginal
at :math:`s=0` — bounds it below by :math:`m_0e^{-\|A\|R^2}` for every position.

The library's core already evaluates this field: ``Attention(..., causal=True)`` with token
``weights`` (masses) and ``positions`` (ties see each other). :func:`with_sink` only builds the
discrete measure the book uses: sink token(s) at :math:`s=0` carrying mass :math:`m_0`, and
:math:`n` tokens at :math:`s_i=i/n` with mass :math:`(1-m_0)/n` each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .attention import Attention, attention_matrix, require_layer
from .docstrings import fill_doc
from .validation import (
    real_array,
    validate_count,
    validate_finite,
    validate_instance,
    validate_positions,
    validate_tokens,
    validate_weights,
)

__all__ = ["SinkSystem", "with_sink", "prefix_mass", "causal_log_partition", "sink_attention"]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    # the references of masked attention with a sink
    "ref_masked": """
        Paper 1 (Castin et al., arXiv:2501.18322), masked attention and the attention sink; book:
        ``chapters/01_well_posedness.md``, section "Masked attention and the attention sink", equation
        (eq-p1-masked).
    """,
}


@dataclass(frozen=True, eq=False)
class SinkSystem:
    r"""A weighted, positioned token measure :math:`\mu=\sum_j w_j\delta_{(s_j,x_j)}` with a sink at :math:`s=0`.

    Attributes
    ----------
    X : array (n_sink + n, d)
        Sink token(s) first, then the n tokens.
    weights : array (n_sink + n,)
        Masses: :math:`m_0/n_{\rm sink}` per sink token, :math:`(1-m_0)/n` per token.
    positions : array (n_sink + n,)
        0 for the sink, :math:`s_i` (default :math:`i/n`) for the tokens.
    n_sink : int
        Number of sink tokens (0 when :math:`m_0=0`).
    m0 : float
        Sink mass :math:`\lambda(\{0\})`.
    causal : bool
        Whether the system is meant for a causal layer (then :meth:`simulate_kwargs` passes the
        positions; a non-causal layer is given none, since it would ignore them).
    """

    X: np.ndarray
    weights: np.ndarray
    positions: np.ndarray
    n_sink: int
    m0: float
    causal: bool = True

    def tokens(self, X) -> np.ndarray:
        """The rows of X (or of each frame of a trajectory array) that are tokens, not sink.

        Parameters
        ----------
        X : array (..., n_sink + n, d)
            Points of this system (or frames of a run of it).

        Returns
        -------
        array (..., n, d)
            A view without the first ``n_sink`` rows.
        """
        return np.asarray(X)[..., self.n_sink :, :]

    def sink(self, X) -> np.ndarray:
        """The sink rows of X (or of each frame): what :meth:`tokens` leaves out.

        Parameters
        ----------
        X : array (..., n_sink + n, d)
            As in :meth:`tokens`.

        Returns
        -------
        array (..., n_sink, d)
            A view of the first ``n_sink`` rows.
        """
        return np.asarray(X)[..., : self.n_sink, :]

    @property
    def token_positions(self) -> np.ndarray:
        """Positions :math:`s_i` of the tokens (the sink rows left out)."""
        return self.positions[self.n_sink :]

    def simulate_kwargs(self) -> dict:
        """``weights`` (and, for a causal system, ``positions``) to pass to
        :func:`~tokendynamics.particles.simulate`.

        Returns
        -------
        dict
            Keyword arguments, e.g. ``simulate(system.X, layer, T, **system.simulate_kwargs())``.
        """
        if not self.causal:
            return {"weights": self.weights}
        return {"weights": self.weights, "positions": self.positions}


@fill_doc(_DOC)
def with_sink(X, m0: float, sink=None, positions=None) -> SinkSystem:
    r"""The discrete masked model (paper 1, arXiv:2501.18322; chapter 1 of the book) with an attention sink of mass
    :math:`m_0` at :math:`s=0`.

    Parameters
    ----------
    X : array (n, d)
        The tokens, in sequence order.
    m0 : float in [0, 1)
        Sink mass :math:`\lambda(\{0\})`. ``m0 = 0`` gives the plain causal model (no sink).
    sink : array (d,) or (k, d), optional
        The sink token (a "BOS" token), or a cloud of k sink tokens sharing the mass :math:`m_0`
        (e.g. drawn from the token law, to realise :math:`\mu_0=\lambda\otimes\nu_0`). Default: one
        sink token at the origin, whose value :math:`V\cdot0=0` makes attention to it a no-op.
    positions : array (n,), optional
        Positions of the tokens in :math:`(0,1]` (default :math:`s_i=i/n`, :math:`i=1..n`).

    Returns
    -------
    SinkSystem
        Pass ``system.X`` and ``**system.simulate_kwargs()`` to the core with a layer built with
        ``causal=True``. With one sink token :math:`x_0` the core's field is exactly

        .. math::

           \dot x_i=\frac{m_0e^{\langle x_i,Ax_0\rangle}Vx_0
           +\frac{1-m_0}n\sum_{j\le i}e^{\langle x_i,Ax_j\rangle}Vx_j}
           {m_0e^{\langle x_i,Ax_0\rangle}+\frac{1-m_0}n\sum_{j\le i}e^{\langle x_i,Ax_j\rangle}},
           \qquad \dot x_0=Vx_0 .

    References
    ----------
    %(ref_masked)s
    """
    X = validate_tokens(X)
    n, d = X.shape
    m0 = validate_finite(m0, "m0")
    if not (0.0 <= m0 < 1.0):
        raise ValueError(f"the sink mass m0 must be in [0, 1), got {m0!r}")
    if positions is None:
        s = np.arange(1, n + 1, dtype=float) / n
    else:
        s = real_array(positions, "positions")
        if s.shape != (n,) or not np.all(np.isfinite(s)):
            raise ValueError(f"positions must be {n} finite numbers, got shape {s.shape}")
        if np.any(s <= 0):
            raise ValueError("token positions must be > 0: position 0 is reserved for the sink")
    if m0 == 0.0:
        if sink is not None:
            raise ValueError("a sink token was given but m0 = 0 gives it no mass")
        return SinkSystem(X.copy(), np.full(n, 1.0 / n), s, 0, 0.0)
    S = np.zeros((1, d)) if sink is None else np.atleast_2d(real_array(sink, "sink"))
    S = validate_tokens(S, d, name="sink")
    k = S.shape[0]
    w = np.concatenate([np.full(k, m0 / k), np.full(n, (1.0 - m0) / n)])
    return SinkSystem(np.vstack([S, X]), w, np.concatenate([np.zeros(k), s]), k, m0)


@fill_doc(_DOC)
def prefix_mass(weights, positions) -> np.ndarray:
    r""":math:`\lambda([0,s_i])=\sum_{j:\,s_j\le s_i}w_j` for every token (ties included).

    Parameters
    ----------
    weights : array_like (n,)
        Masses :math:`w_j` of the tokens (required, e.g. ``SinkSystem.weights``).
    positions : array_like (n,)
        Positions :math:`s_j` of the tokens (finite numbers, in any order; equal positions count each other).

    Returns
    -------
    numpy.ndarray (n,)
        The mass of the prefix each token attends to, :math:`\lambda([0,s_i])`: the normalisation of its
        causal attention with :math:`A=0`.

    References
    ----------
    %(ref_masked)s
    """
    s = real_array(positions, "positions")
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"positions must be a non-empty 1-D array, got shape {s.shape}")
    s = validate_positions(s, s.size)
    if weights is None:
        raise ValueError("weights are required: the masses w_j of the tokens")
    w = validate_weights(weights, s.shape[0])
    assert w is not None  # weights were given
    order = np.argsort(s, kind="stable")
    cum = np.cumsum(w[order])
    last = np.searchsorted(s[order], s[order], side="right") - 1
    out = np.empty_like(cum)
    out[order] = cum[last]
    return out


@fill_doc(_DOC)
def causal_log_partition(X, layer: Attention, weights, positions, head: int = 0) -> np.ndarray:
    r"""Log of the causal softmax denominators :math:`Z_i=\sum_{j:\,s_j\le s_i}w_j\,e^{\beta\langle x_i,Ax_j\rangle}`.

    The quantity bounded below by :math:`m_0e^{-\beta\|A\|R^2}` when a sink of mass :math:`m_0`
    is present (paper 1, arXiv:2501.18322, masked attention; chapter 1 of the book). Dense :math:`n\times n`; for tests
    and figures.

    Parameters
    ----------
    X : array_like (n, d)
        The tokens, sink rows included.
    layer : Attention
        The layer whose score :math:`\beta\langle x,Ay\rangle` (of head ``head``) enters the softmax
        denominator, whatever the layer's kind.
    weights : array_like (n,), optional
        Masses :math:`w_j`; None gives :math:`1/n` each.
    positions : array_like (n,)
        Positions :math:`s_j` (required).
    head : int
        Index of the head whose :math:`A` is used.

    Returns
    -------
    numpy.ndarray (n,)
        :math:`\log Z_i` for every token.

    References
    ----------
    %(ref_masked)s
    """
    require_layer(layer)
    X = validate_tokens(X, layer.d)
    n = X.shape[0]
    w = validate_weights(weights, n)
    if w is None:
        w = np.full(n, 1.0 / n)
    if positions is None:
        raise ValueError("positions are required: the positions s_j of the tokens")
    s = validate_positions(positions, n)
    head = validate_count(head, "head", minimum=0)
    if head >= layer.n_heads:
        raise ValueError(f"head must be in [0, {layer.n_heads}), got {head}")
    S = layer.beta * (X @ layer.A[head]) @ X.T
    with np.errstate(divide="ignore"):
        S = S + np.log(w)[None, :]
    S[s[None, :] > s[:, None]] = -np.inf
    return logsumexp(S, axis=1)


@fill_doc(_DOC)
def sink_attention(X, layer: Attention, system: SinkSystem, head: int = 0) -> np.ndarray:
    r"""Attention mass each token puts on the sink: :math:`\sum_{j\in\text{sink}}P_{ij}`, one value per token.

    For a row-normalised causal layer this is the share of token :math:`i`'s update that comes
    from the sink; with :math:`A=0` it equals :math:`m_0/\lambda([0,s_i])`.

    Parameters
    ----------
    X : array_like (n_sink + n, d)
        Tokens of the system, sink rows first (``system.X``, or a frame of its trajectory).
    layer : Attention
        The causal layer.
    system : SinkSystem
        The measure (:func:`with_sink`): its masses, positions and number of sink rows.
    head : int
        Index of the head whose attention matrix is used.

    Returns
    -------
    numpy.ndarray (n,)
        The attention mass on the sink rows, for each token (the sink rows left out).

    References
    ----------
    %(ref_masked)s
    """

    validate_instance(system, SinkSystem, "system", "a SinkSystem (from with_sink)")
    P = attention_matrix(X, layer, system.weights, positions=system.positions, head=head)
    return P[system.n_sink :, : system.n_sink].sum(axis=1)
