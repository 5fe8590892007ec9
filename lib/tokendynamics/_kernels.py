r"""Fused softmax kernel: attention without the n x n matrix (numba, optional).

For row-normalised kinds with scores :math:`S_{ij}=\ell_i\cdot r_j+c_j`, one pass over j with an online
log-sum-exp gives :math:`\Gamma_i=\sum_je^{S_{ij}}u_j/\sum_je^{S_{ij}}`, :math:`u_j=Vx_j`, in O(n k) memory.
Softmax: :math:`\ell=\beta XA`, :math:`r=X`, :math:`c_j=\log w_j`; L2: :math:`\ell=2\beta XQ^\top`,
:math:`r=XK^\top`, :math:`c_j=\log w_j-\beta|Kx_j|^2`. Without numba :func:`fused_head` uses numpy. On the
project's machine numpy's SIMD ``exp`` beat numba's scalar one at every size (``benchmarks/bench_core.py``),
so ``backend="auto"`` never picks the kernel (``FUSED_MIN_TOKENS = None``; set it to the crossover where
numba's ``exp`` is vectorised); ``backend="numba"`` forces it.
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

# backend="auto" takes the kernel for a score rank <= FUSED_MAX_RANK and >= FUSED_MIN_TOKENS tokens.
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
    with np.errstate(divide="ignore"):
        logw = np.full(n, -np.log(n)) if w is None else np.log(w)
    head = layer.head(h)
    left, right, col = layer.kind.factors(X, X, head)
    if col is not None:
        logw = logw + col[0]
    return tuple(np.ascontiguousarray(a) for a in (left, right, logw, X @ head.V.T))


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

    Computes :math:`\Gamma_i=\sum_j e^{S_{ij}}u_j/\sum_j e^{S_{ij}}` (module docstring) by an online log-sum-exp.

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
