r"""Fused softmax kernel: attention without the n x n matrix (numba, optional).

For row-normalised kinds whose score is bilinear plus a column term,

.. math:: S_{ij} = \ell_i\cdot r_j + c_j ,\qquad
          \Gamma_i = \frac{\sum_j e^{S_{ij}}\, u_j}{\sum_j e^{S_{ij}}},\quad u_j = V x_j ,

one pass over j with an online (running-max) log-sum-exp gives the field in O(n^2 k) time and
O(n k) memory. Softmax: :math:`\ell = \beta XA`, :math:`r = X`, :math:`c_j = \log w_j`. L2:
:math:`-\beta|Qx_i-Kx_j|^2 = \beta(2\langle Qx_i,Kx_j\rangle-|Kx_j|^2) - \beta|Qx_i|^2`; the last
term does not depend on j and cancels, so :math:`\ell = 2\beta XQ^\top`, :math:`r = XK^\top`,
:math:`c_j = \log w_j-\beta|Kx_j|^2`.

numba is an accelerator, not a requirement: without it :func:`fused_head` computes the same
quantity with numpy, and :func:`prefer_fused` answers False. The thresholds below were measured
with ``benchmarks/bench_core.py`` on a 2-core machine: numba's scalar ``exp`` is not vectorised,
so numpy's SIMD ``exp`` over a block of the score matrix is faster at every size we tried
(d = 2..64, n = 16..16384; e.g. d = 2, n = 4000: numpy 0.09 s, fused numba 0.14 s on 2 threads).
The dense path already works in blocks of rows, so memory is no argument either. Hence
``backend="auto"`` does not choose the kernel on such machines (``FUSED_MIN_TOKENS = None``);
``backend="numba"`` forces it, and the benchmark prints the ratio on the reader's machine (where
numba's ``exp`` is vectorised, e.g. with Intel SVML, set ``FUSED_MIN_TOKENS`` to the crossover).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

try:  # pragma: no cover - exercised on machines with and without numba
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    numba = None  # type: ignore[assignment]
    HAVE_NUMBA = False

# The fused kernel is used automatically when the score rank k is at most FUSED_MAX_RANK and
# there are at least FUSED_MIN_TOKENS tokens (see the module docstring and benchmarks/).
FUSED_MAX_RANK = 8
FUSED_MIN_TOKENS: int | None = None


def prefer_fused(n: int, layer) -> bool:
    """Whether ``velocity(backend="auto")`` should use the fused numba kernel.

    Parameters
    ----------
    n : int
        Number of tokens.
    layer : Attention
        The layer (its score rank is compared with ``FUSED_MAX_RANK``).

    Returns
    -------
    bool
    """
    if not HAVE_NUMBA or FUSED_MIN_TOKENS is None:
        return False
    k = layer.d if layer.Q is None else layer.Q.shape[1]
    return n >= FUSED_MIN_TOKENS and k <= FUSED_MAX_RANK


def _factors(X, layer, w, h):
    n = X.shape[0]
    logw = np.full(n, -np.log(n)) if w is None else _safe_log(w)
    head = layer.head(h)
    left, right, col = layer.kind.factors(X, X, head)
    if col is not None:
        logw = logw + col[0]
    values = X @ head.V.T
    return (
        np.ascontiguousarray(left),
        np.ascontiguousarray(right),
        np.ascontiguousarray(logw),
        np.ascontiguousarray(values),
    )


def _safe_log(w):
    with np.errstate(divide="ignore"):
        return np.log(w)


def _fused_numpy(left, right, col, values):
    """Reference implementation (dense, numpy) of the fused kernel."""
    S = left @ right.T + col[None, :]
    P = np.exp(S - logsumexp(S, axis=1, keepdims=True))
    return P @ values


if HAVE_NUMBA:

    @numba.njit(parallel=True, cache=True)
    def _fused_numba(left, right, col, values):  # pragma: no cover - compiled
        n, k = left.shape
        m = right.shape[0]
        dv = values.shape[1]
        out = np.zeros((n, dv))
        for i in numba.prange(n):
            mx = -np.inf
            den = 0.0
            for j in range(m):
                s = col[j]
                for a in range(k):
                    s += left[i, a] * right[j, a]
                if s == -np.inf:
                    continue
                if s > mx:
                    scale = np.exp(mx - s)
                    den *= scale
                    for c in range(dv):
                        out[i, c] *= scale
                    mx = s
                    e = 1.0
                else:
                    e = np.exp(s - mx)
                den += e
                for c in range(dv):
                    out[i, c] += e * values[j, c]
            for c in range(dv):
                out[i, c] /= den
        return out


def fused_head(X, layer, w, h, *, require_numba: bool = False) -> np.ndarray:
    r"""Field of head h of a softmax or L2 layer without forming the n x n matrix (if numba is present).

    Computes :math:`\Gamma_i=\sum_j e^{S_{ij}}u_j/\sum_j e^{S_{ij}}` with the factors of the module
    docstring, by an online log-sum-exp over j.

    Parameters
    ----------
    X : array (n, d)
        Tokens.
    layer : Attention
        A softmax or L2 layer.
    w : array (n,) or None
        Masses (None: uniform).
    h : int
        Head.
    require_numba : bool
        Raise ImportError instead of falling back to numpy when numba is missing.

    Returns
    -------
    array (n, d)
        The field of head h.

    References
    ----------
    M. Milakov, N. Gimelshein, *Online normalizer calculation for softmax* (arXiv:1805.02867).
    """
    left, right, col, values = _factors(X, layer, w, h)
    if HAVE_NUMBA:
        return _fused_numba(left, right, col, values)
    if require_numba:
        raise ImportError("backend='numba' needs numba, which is not installed; use backend='numpy'")
    return _fused_numpy(left, right, col, values)
