r"""Masked (causal) attention in the extended space :math:`(s, x)`, with an attention sink.

Paper 1 (Castin et al., arXiv:2501.18322), masked attention: tokens carry a position :math:`s\in[0,1]` whose
marginal :math:`\lambda` does not move, and :math:`(s,x)` attends only to positions :math:`r\le s`:

.. math:: \Gamma_\mu(s,x)=\frac{\int_{[0,s]\times\mathbb R^d}e^{\langle x,Ay\rangle}\,Vy\,d\mu(r,y)}
          {\int_{[0,s]\times\mathbb R^d}e^{\langle x,Ay\rangle}\,d\mu(r,y)} .

The denominator is at least :math:`\lambda([0,s])e^{-\|A\|R^2}`, which degenerates as :math:`s\to0`; an
**attention sink**, an atom :math:`\lambda(\{0\})=m_0>0`, bounds it below by :math:`m_0e^{-\|A\|R^2}`. The core
evaluates this field (``Attention(..., causal=True)`` with token ``weights`` and ``positions``); :func:`with_sink`
builds the book's discrete measure: sink token(s) at :math:`s=0` of mass :math:`m_0`, and :math:`n` tokens at
:math:`s_i=i/n` of mass :math:`(1-m_0)/n`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import Attention, attention_matrix
from .docstrings import fill_doc
from .validation import real_array, validate_finite, validate_instance, validate_positions, validate_tokens

__all__ = ["SinkSystem", "with_sink", "sink_attention"]

_DOC = {
    "ref_masked": "References\n----------\n"
    "Paper 1 (Castin et al., arXiv:2501.18322), masked attention and the attention sink; book: "
    '``chapters/01_well_posedness.md``, section "Masked attention and the attention sink", equation (eq-p1-masked).',
}


@dataclass(frozen=True, eq=False)
class SinkSystem:
    r"""A weighted, positioned token measure :math:`\mu=\sum_j w_j\delta_{(s_j,x_j)}` with a sink at :math:`s=0`.

    Attributes
    ----------
    X, weights, positions : arrays (n_sink + n, d), (n_sink + n,), (n_sink + n,)
        Sink token(s) first, then the tokens; masses :math:`m_0/n_{\rm sink}` and :math:`(1-m_0)/n`; positions 0
        and :math:`s_i`.
    n_sink, m0, causal : int, float, bool
        Number of sink tokens (0 when :math:`m_0=0`), the sink mass :math:`\lambda(\{0\})`, and whether the system
        is for a causal layer (then :meth:`simulate_kwargs` passes the positions).
    """

    X: np.ndarray
    weights: np.ndarray
    positions: np.ndarray
    n_sink: int
    m0: float
    causal: bool = True

    def tokens(self, X) -> np.ndarray:
        """The rows of X (or of each frame of a trajectory) that are tokens, not sink.

        Parameters
        ----------
        X : array (..., n_sink + n, d)
            Points of this system, or frames of a run of it.

        Returns
        -------
        array (..., n, d)
            A view without the first ``n_sink`` rows.
        """
        return np.asarray(X)[..., self.n_sink :, :]

    def simulate_kwargs(self) -> dict:
        """``weights`` (and, for a causal system, ``positions``) for :func:`~tokendynamics.particles.simulate`.

        Returns
        -------
        dict
            E.g. ``simulate(system.X, layer, T, **system.simulate_kwargs())``.
        """
        return {"weights": self.weights, "positions": self.positions} if self.causal else {"weights": self.weights}


@fill_doc(_DOC)
def with_sink(X, m0: float, sink=None, positions=None) -> SinkSystem:
    r"""The discrete masked model with an attention sink of mass :math:`m_0` at :math:`s=0`.

    Sink token(s) at :math:`s=0` of total mass :math:`m_0`, and tokens at :math:`s_i` of mass :math:`(1-m_0)/n`.

    Parameters
    ----------
    X : array (n, d)
        The tokens, in sequence order.
    m0 : float in [0, 1)
        Sink mass :math:`\lambda(\{0\})`; 0 gives the plain causal model.
    sink : array (d,) or (k, d), optional
        The sink token, or k sink tokens sharing :math:`m_0` (e.g. drawn from the token law). Default: one at
        the origin, whose value :math:`V\cdot0=0` makes attention to it a no-op.
    positions : array (n,), optional
        Positions of the tokens in :math:`(0,1]` (default :math:`s_i=i/n`).

    Returns
    -------
    SinkSystem
        Pass ``system.X`` and ``**system.simulate_kwargs()`` to the core with a ``causal=True`` layer.

    %(ref_masked)s
    """
    X = validate_tokens(X)
    n, d = X.shape
    m0 = validate_finite(m0, "m0")
    if not (0.0 <= m0 < 1.0):
        raise ValueError(f"the sink mass m0 must be in [0, 1), got {m0!r}")
    s = np.arange(1, n + 1, dtype=float) / n if positions is None else validate_positions(positions, n)
    if np.any(s <= 0):
        raise ValueError("token positions must be > 0: position 0 is reserved for the sink")
    if m0 == 0.0:
        if sink is not None:
            raise ValueError("a sink token was given but m0 = 0 gives it no mass")
        return SinkSystem(X.copy(), np.full(n, 1.0 / n), s, 0, 0.0)
    S = validate_tokens(np.zeros((1, d)) if sink is None else np.atleast_2d(real_array(sink, "sink")), d, name="sink")
    k = S.shape[0]
    w = np.concatenate([np.full(k, m0 / k), np.full(n, (1.0 - m0) / n)])
    return SinkSystem(np.vstack([S, X]), w, np.concatenate([np.zeros(k), s]), k, m0)


@fill_doc(_DOC)
def sink_attention(X, layer: Attention, system: SinkSystem, head: int = 0) -> np.ndarray:
    r"""Attention mass :math:`\sum_{j\in\text{sink}}P_{ij}` each token puts on the sink.

    For a row-normalised causal layer, the share of a token's update that comes from the sink.

    Parameters
    ----------
    X : array_like (n_sink + n, d)
        Tokens of the system, sink rows first (``system.X``, or a frame of its run).
    layer : Attention
        The causal layer.
    system : SinkSystem
        The measure (:func:`with_sink`).
    head : int
        Index of the head.

    Returns
    -------
    numpy.ndarray (n,)
        The mass on the sink rows, per token.

    %(ref_masked)s
    """
    validate_instance(system, SinkSystem, "system", "a SinkSystem (from with_sink)")
    P = attention_matrix(X, layer, system.weights, positions=system.positions, head=head)
    return P[system.n_sink :, : system.n_sink].sum(axis=1)
