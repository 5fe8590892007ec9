r"""Projected Euler for covariances, compiled with numba (optional accelerator).

The scheme, stopping rules and storage of :func:`tokendynamics.gaussian.projected_euler` (the authors' code),
for softmax attention with any number of heads and single-head L2 attention, one compiled loop per member (no
Python work per step): what the cone grids and the rank histograms need. Without numba the numpy path runs the
same scheme (tested to agree: same iteration counts, same matrices to rounding). Right-hand sides: softmax
:math:`R=\sum_hV_h\Sigma P_h\Sigma`, :math:`P_h=\beta A_h^\top`; L2 :math:`R=V(I+\Sigma G)^{-1}\Sigma C\Sigma`,
:math:`G=2\beta K^\top K`, :math:`C=2\beta K^\top Q`; :math:`\dot\Sigma=R+R^\top`.
"""

from __future__ import annotations

import numpy as np

from .errors import NonFiniteError

try:  # pragma: no cover - exercised on machines with and without numba
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    numba = None  # type: ignore[assignment]
    HAVE_NUMBA = False

STATUS = ("converged", "blowup", "max_iter", "nonfinite")


def _factors(layer):
    """The kind's covariance factors (G_h, C_h) of every head, or None if the kind has none."""
    if not layer.kind.has("covariance"):
        return None
    cov = layer.kind.require("covariance")
    return [cov(layer.head(h)) for h in range(layer.n_heads)]


def supports(layer) -> bool:
    """Whether the compiled scheme covers this layer: a mean-free covariance equation (the kind's
    ``covariance`` factors) with no saturation term and any number of heads (softmax), or one head (L2)."""
    factors = _factors(layer)
    return factors is not None and (all(G is None for G, _ in factors) or len(factors) == 1)


def _layer_factors(layer):
    """(code, V stack, P stack, G, C) of a layer the scheme :func:`supports`: code 0 for M = sum_h V_h Sigma P_h,
    code 1 for one head with M = V (I + Sigma G)^{-1} Sigma C."""
    d = layer.d
    factors = _factors(layer)
    if all(G is None for G, _ in factors):
        P = np.ascontiguousarray(np.stack([C for _, C in factors]))
        return 0, np.ascontiguousarray(layer.V), P, np.zeros((d, d)), np.zeros((d, d))
    G, C = factors[0]
    return 1, np.ascontiguousarray(layer.V), np.zeros((1, d, d)), np.ascontiguousarray(G), np.ascontiguousarray(C)


if HAVE_NUMBA:

    @numba.njit(cache=True)
    def _mm(A, B, out):  # pragma: no cover - compiled
        n, m = A.shape
        p = B.shape[1]
        for i in range(n):
            for j in range(p):
                s = 0.0
                for k in range(m):
                    s += A[i, k] * B[k, j]
                out[i, j] = s

    @numba.njit(cache=True)
    def _is_pd(S, L):  # pragma: no cover - compiled
        """Cholesky attempt: True if S is (numerically) positive definite."""
        d = S.shape[0]
        for j in range(d):
            s = S[j, j]
            for k in range(j):
                s -= L[j, k] * L[j, k]
            if not s > 0.0:
                return False
            L[j, j] = np.sqrt(s)
            for i in range(j + 1, d):
                t = S[i, j]
                for k in range(j):
                    t -= L[i, k] * L[j, k]
                L[i, j] = t / L[j, j]
        return True

    @numba.njit(cache=True)
    def _solve_small(M, B, X):  # pragma: no cover - compiled
        """X = M^{-1} B by Gaussian elimination with partial pivoting (M, B overwritten)."""
        d = M.shape[0]
        p = B.shape[1]
        for c in range(d):
            piv = c
            big = abs(M[c, c])
            for r in range(c + 1, d):
                if abs(M[r, c]) > big:
                    big = abs(M[r, c])
                    piv = r
            if piv != c:
                for k in range(d):
                    M[c, k], M[piv, k] = M[piv, k], M[c, k]
                for k in range(p):
                    B[c, k], B[piv, k] = B[piv, k], B[c, k]
            for r in range(c + 1, d):
                f = M[r, c] / M[c, c]
                for k in range(c, d):
                    M[r, k] -= f * M[c, k]
                for k in range(p):
                    B[r, k] -= f * B[c, k]
        for c in range(d - 1, -1, -1):
            for k in range(p):
                s = B[c, k]
                for j in range(c + 1, d):
                    s -= M[c, j] * X[j, k]
                X[c, k] = s / M[c, c]

    @numba.njit(cache=True)
    def _euler_numba(
        S0, Vs, Ps, G, C, code, h, tol_low, tol_high, max_iter, floor, save_mask, out_S, out_it
    ):  # pragma: no cover - compiled
        d = S0.shape[0]
        H = Vs.shape[0]
        S, L, W = S0.copy(), np.zeros((d, d)), np.empty((6, d, d))
        Sn, T1, T2, T3, R, lhs = W[0], W[1], W[2], W[3], W[4], W[5]
        status, it, n_saved = 2, max_iter, 0
        for i in range(max_iter):
            if save_mask[i]:
                out_S[n_saved] = S
                out_it[n_saved] = i
                n_saved += 1
            if code == 0:
                R[:, :] = 0.0
                for hh in range(H):
                    _mm(Vs[hh], S, T1)
                    _mm(T1, Ps[hh], T2)
                    _mm(T2, S, T3)
                    R += T3
            else:
                _mm(S, G, T1)
                lhs[:, :] = T1
                for a in range(d):
                    lhs[a, a] += 1.0
                _mm(S, C, T1)
                _mm(T1, S, T2)
                _solve_small(lhs, T2, T3)
                _mm(Vs[0], T3, R)
            nrm2 = 0.0
            for a in range(d):
                for b in range(d):
                    r = R[a, b] + R[b, a]
                    nrm2 += r * r
                    Sn[a, b] = S[a, b] + h * r
            nrm = np.sqrt(nrm2)
            if not np.isfinite(nrm):  # overflow: reported by the caller as a NonFiniteError
                status = 3
                it = i
                break
            if not _is_pd(Sn, L):
                lam, U = np.linalg.eigh(Sn)
                neg = False
                for k in range(d):
                    if lam[k] < 0.0:
                        lam[k] = floor
                        neg = True
                if neg:
                    for a in range(d):
                        for b in range(d):
                            s = 0.0
                            for k in range(d):
                                s += U[a, k] * lam[k] * U[b, k]
                            Sn[a, b] = s
            tr = 0.0
            for a in range(d):
                tr += Sn[a, a]
            status = 0 if nrm < tol_low else (2 if tr <= tol_high else 1)
            if status != 2 or i == max_iter - 1:
                it = i if status != 2 else max_iter
                if not save_mask[i]:
                    out_S[n_saved] = S
                    out_it[n_saved] = i
                    n_saved += 1
                break
            S, Sn = Sn, S
        return status, it, n_saved


def euler_members(C, layer, step, tol_low, tol_high, max_iter, floor, save_mask):
    """Integrate each covariance of the stack ``C`` (B, d, d) with the compiled loop (numba, a layer it
    :func:`supports`: the caller checked both).

    Returns ``status, iterations`` (arrays over the members) and the lists ``saved_it, saved_S``; a
    NonFiniteError (with the iteration) if a right-hand side overflows, like numpy.
    """
    form, Vs, Ps, G, Cm = _layer_factors(layer)
    mask = np.ascontiguousarray(save_mask, dtype=np.bool_)
    n_out, d = int(mask.sum()) + 1, C.shape[1]
    args = (float(step), float(tol_low), float(tol_high), int(max_iter), float(floor), mask)
    res = []
    for k in range(C.shape[0]):
        out_S, out_it = np.empty((n_out, d, d)), np.empty(n_out, dtype=np.int64)
        code, it, n = _euler_numba(np.ascontiguousarray(C[k]), Vs, Ps, G, Cm, form, *args, out_S, out_it)
        if STATUS[code] == "nonfinite":
            raise NonFiniteError(f"projected Euler: non-finite right-hand side at iteration {it} for member(s) [{k}]")
        res.append((STATUS[code], int(it), out_it[:n].astype(int), out_S[:n].copy()))
    status, its, saved_it, saved_S = (list(x) for x in zip(*res)) if res else ([],) * 4
    return np.array(status, dtype=object), np.array(its, dtype=int), saved_it, saved_S
