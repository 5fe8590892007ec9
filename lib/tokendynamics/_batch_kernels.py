r"""Batched softmax attention for many small systems: fused, compiled time stepping (numba, optional).

B independent systems of n tokens, single-head softmax attention with shared token masses,
:math:`\Gamma_b(x_i)=\sum_j w_je^{s_{ij}}V_bx_j/\sum_j w_je^{s_{ij}}`, :math:`s_{ij}=\beta_b\langle x_i,A_bx_j\rangle`,
integrated by Euler or RK4 (on the sphere: stages retracted and projected, steps retracted), the scheme of
``tokendynamics.ensembles.simulate_batch``, reproduced to round-off. Each system runs all its steps inside
the compiled loop on one of ``numba.get_num_threads()`` threads; scores, exp, normalisation and sums are
fused; a symmetric A shares :math:`e^{s_{ij}}=e^{s_{ji}}`; the max-shift is skipped when
:math:`|\beta|\,\|A\|_F\max_i|y_i|^2\le` :data:`EXP_SAFE`; :func:`_exp_inplace` is a vectorisable
:math:`e^x=2^ke^r` (Cody–Waite reduction, degree-13 Taylor, ≤ 4e-16 relative error). Timings:
``benchmarks/bench_phase.py``. A flagged system (status :data:`FIELD_OVERFLOW`, :data:`TOKENS_NONFINITE`,
:data:`THRESHOLD`) is frozen at its last good state.

References
----------
Paper 1 (Castin et al., arXiv:2501.18322); B. Geshkovski et al., *A mathematical perspective on
Transformers* (arXiv:2312.10794); W. J. Cody, W. Waite, *Software Manual for the Elementary Functions*
(1980). Book: ``chapters/07_phase_diagrams.md``, equation (eq-phase-model).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .validation import real_array, validate_choice, validate_count, validate_finite_array, validate_positive

try:  # pragma: no cover - exercised on machines with and without numba
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    numba = None  # type: ignore[assignment]
    HAVE_NUMBA = False

__all__ = [
    "BatchRun",
    "run_batch",
    "prefer_kernel",
    "OK",
    "FIELD_OVERFLOW",
    "TOKENS_NONFINITE",
    "THRESHOLD",
    "HAVE_NUMBA",
    "EXP_SAFE",
    "CROSSOVER",
]

#: Status of a system (the first two have the values of ``attention.FIELD_OK`` and ``attention.FIELD_NONFINITE``).
OK, FIELD_OVERFLOW, TOKENS_NONFINITE, THRESHOLD = 0, 1, 3, 4

#: Bound on :math:`|\beta|\,\|A\|_F\max_i|y_i|^2` under which no row-max shift is needed (e^±300 ~ 1e±130).
EXP_SAFE = 300.0

#: Exponentials a task keeps at once: 2^16 doubles = 512 KB (L2); up to n = 256 a whole system's.
BLOCK_ENTRIES = 1 << 16

#: d -> largest n at which the kernel beat ``simulate_batch``'s numpy path (``benchmarks/bench_phase.py``,
#: B = 256, 20 Euler steps, 2-core AVX2); other dimensions use the nearest listed one.
CROSSOVER: dict[int, int] = {2: 256, 3: 256, 8: 256}

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that k * _LN2_HI is exact for |k| < 2^21
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5 * 2**52: x + _ROUND - _ROUND rounds x to an integer
_EXP_MIN = -708.0  # below: e^x is taken as 0 (e^-708 = 3e-308, the smallest normal double is 2.2e-308)


class BatchRun(NamedTuple):
    """What :func:`run_batch` returns: ``frames`` (m, B, n, d), the step index of each frame ``saved`` (m,),
    ``status`` (B,) (:data:`OK` or the flag) and ``flagged_step`` (B,) (-1 if never)."""

    frames: np.ndarray
    saved: np.ndarray
    status: np.ndarray
    flagged_step: np.ndarray


def _matrices(M, name: str, B: int, d: int) -> np.ndarray:
    """A (d, d) matrix shared by the systems or B matrices (B, d, d), as a fresh C-contiguous (B, d, d) stack
    (one matrix per system: one compiled signature for every call)."""
    M = validate_finite_array(M, name)
    if M.shape not in ((d, d), (B, d, d)):
        raise ValueError(
            f"{name} must have shape ({d}, {d}) (shared) or ({B}, {d}, {d}) (one per system), got {M.shape}"
        )
    return np.array(np.broadcast_to(M, (B, d, d)), order="C")


def _prepare(X, A, V, beta, weights):
    """The inputs of :func:`run_batch`, checked, as the C-contiguous per-system arrays the kernel takes."""
    X = validate_finite_array(X, "X0", ndim=3)
    if 0 in X.shape:
        raise ValueError(f"X0 must be a batch of token clouds (B, n, d) with B, n, d >= 1, got shape {X.shape}")
    B, n, d = X.shape
    A = _matrices(A, "A", B, d)
    V = _matrices(V, "V", B, d)
    beta = validate_finite_array(beta, "beta")
    if beta.ndim > 1 or beta.size not in (1, B):
        raise ValueError(f"beta must be one number or {B} numbers (one per system), got shape {beta.shape}")
    beta = np.array(np.broadcast_to(beta.reshape(-1), (B,)), order="C")
    if weights is None:
        w = np.ones(n)
    else:
        w = real_array(weights, "weights")
        if w.shape != (n,):
            raise ValueError(f"weights must have shape ({n},), got {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
    sym = np.array([np.array_equal(a, a.T) for a in A])
    return np.array(X, order="C"), A, V, beta, np.array(w, order="C"), sym


def _save_steps(steps: int, save_every, save_steps) -> np.ndarray:
    """Frame index of every step 0..steps (-1: not stored)."""
    if save_steps is not None:
        if save_every != 1:
            raise ValueError("give save_every or save_steps, not both")
        ks = np.unique(np.asarray(save_steps))
        if not np.issubdtype(ks.dtype, np.integer) or ks.size == 0 or ks[0] < 0 or ks[-1] > steps:
            raise ValueError(f"save_steps must be step indices between 0 and steps = {steps}")
    else:
        save_every = validate_count(save_every, "save_every")
        k = np.arange(steps + 1)
        ks = k[(k % save_every == 0) | (k == steps)]
    index = np.full(steps + 1, -1, dtype=np.int64)
    index[ks] = np.arange(ks.size)
    return index


if HAVE_NUMBA:
    # FMA only: reassociation would fold away the rounding trick x + c - c of _exp_inplace.
    _jit = numba.njit(fastmath={"contract"}, cache=True)

    @_jit
    def _exp_inplace(buf, m, bits):  # pragma: no cover - compiled
        """buf[:m] <- exp(buf[:m]) for x <= 700 (x < -708 gives 0, NaN stays NaN); bits: scratch of size >= m."""
        ib = bits.view(np.int64)
        for i in range(m):
            x = buf[i]
            xc = _EXP_MIN if x < _EXP_MIN else x
            t = xc * _LOG2E + _ROUND
            k = t - _ROUND
            r = (xc - k * _LN2_HI) - k * _LN2_LO
            p = 1.0 / 6227020800.0
            p = p * r + 1.0 / 479001600.0
            p = p * r + 1.0 / 39916800.0
            p = p * r + 1.0 / 3628800.0
            p = p * r + 1.0 / 362880.0
            p = p * r + 1.0 / 40320.0
            p = p * r + 1.0 / 5040.0
            p = p * r + 1.0 / 720.0
            p = p * r + 1.0 / 120.0
            p = p * r + 1.0 / 24.0
            p = p * r + 1.0 / 6.0
            p = p * r + 0.5
            p = p * r + 1.0
            p = p * r + 1.0
            buf[i] = 0.0 if x < _EXP_MIN else p
            bits[i] = t
        for i in range(m):  # the low bits of t hold k: 2^k = (k + 1023) << 52
            ib[i] = (ib[i] + 1023) << 52
        for i in range(m):
            buf[i] *= bits[i]

    @_jit
    def _scores_packed(Y, Lt, E):  # pragma: no cover - compiled
        """E[p_j + i] = s_ij for i <= j (column j after column j - 1, p_j = j (j + 1) / 2); returns the count."""
        n, d = Y.shape
        p = 0
        for j in range(n):
            if d == 2:  # one pass over the column (the common cases, written out: twice as fast)
                y0, y1 = Y[j, 0], Y[j, 1]
                for i in range(j + 1):
                    E[p + i] = y0 * Lt[0, i] + y1 * Lt[1, i]
            elif d == 3:
                y0, y1, y2 = Y[j, 0], Y[j, 1], Y[j, 2]
                for i in range(j + 1):
                    E[p + i] = y0 * Lt[0, i] + y1 * Lt[1, i] + y2 * Lt[2, i]
            else:
                y0 = Y[j, 0]
                for i in range(j + 1):
                    E[p + i] = y0 * Lt[0, i]
                for c in range(1, d):
                    yc = Y[j, c]
                    for i in range(j + 1):
                        E[p + i] += yc * Lt[c, i]
            p += j + 1
        return p

    @_jit
    def _scores_rows(Lt, Yt, E, i0, m):  # pragma: no cover - compiled
        """E[r n + j] = s_{i0 + r, j} for r < m (rows i0 .. i0 + m - 1, every column)."""
        d, n = Yt.shape
        for r in range(m):
            base = r * n
            i = i0 + r
            if d == 2:
                l0, l1 = Lt[0, i], Lt[1, i]
                for j in range(n):
                    E[base + j] = l0 * Yt[0, j] + l1 * Yt[1, j]
            elif d == 3:
                l0, l1, l2 = Lt[0, i], Lt[1, i], Lt[2, i]
                for j in range(n):
                    E[base + j] = l0 * Yt[0, j] + l1 * Yt[1, j] + l2 * Yt[2, j]
            else:
                l0 = Lt[0, i]
                for j in range(n):
                    E[base + j] = l0 * Yt[0, j]
                for c in range(1, d):
                    lc = Lt[c, i]
                    for j in range(n):
                        E[base + j] += lc * Yt[c, j]

    # The sums over j may be reassociated (vectorised reductions), as in any blocked product.
    @numba.njit(fastmath={"contract", "reassoc"}, cache=True)
    def _accumulate_rows(E, m, i0, Ut, Ft):  # pragma: no cover - compiled
        """Ft[c, i0 + r] = sum_j Ut[c, j] E[r n + j] for r < m: weighted sums (c < d) and masses (c = d)."""
        rows, n = Ut.shape
        for r in range(m):
            base = r * n
            i = i0 + r
            if rows == 3:
                s0 = s1 = s2 = 0.0
                for j in range(n):
                    e = E[base + j]
                    s0 += Ut[0, j] * e
                    s1 += Ut[1, j] * e
                    s2 += Ut[2, j] * e
                Ft[0, i], Ft[1, i], Ft[2, i] = s0, s1, s2
            elif rows == 4:
                s0 = s1 = s2 = s3 = 0.0
                for j in range(n):
                    e = E[base + j]
                    s0 += Ut[0, j] * e
                    s1 += Ut[1, j] * e
                    s2 += Ut[2, j] * e
                    s3 += Ut[3, j] * e
                Ft[0, i], Ft[1, i], Ft[2, i], Ft[3, i] = s0, s1, s2, s3
            else:
                for c in range(rows):
                    s = 0.0
                    for j in range(n):
                        s += Ut[c, j] * E[base + j]
                    Ft[c, i] = s

    @_jit
    def _field_system(Y, A, V, beta, w, sym, sphere, W, F):  # pragma: no cover - compiled
        """Field of one system at Y (n, d) into F (projected if sphere); True if finite. Scratch W (token axis
        last): Lt[c, i] = beta (y_i^T A)_c, Ut = [w_j V y_j; w_j], Yt = Y^T, Ft the row sums, E[r n + j] = e^{s}."""
        Lt, Ut, Ft, Yt, E, bits, M = W
        n, d = Y.shape
        cap = E.size
        r2 = 0.0
        for i in range(n):
            s = 0.0
            for c in range(d):
                s += Y[i, c] * Y[i, c]
            r2 = max(r2, s)
        a2 = 0.0
        for a in range(d):
            for c in range(d):
                a2 += A[a, c] * A[a, c]
        safe = abs(beta) * math.sqrt(a2) * r2 <= EXP_SAFE
        for i in range(n):
            for c in range(d):
                lv = 0.0
                uv = 0.0
                for a in range(d):
                    lv += Y[i, a] * A[a, c]
                    uv += V[c, a] * Y[i, a]
                Lt[c, i] = beta * lv
                Ut[c, i] = w[i] * uv  # the column mass rides with the value
                Yt[c, i] = Y[i, c]
            Ut[d, i] = w[i]
        if safe and sym and n * n <= cap:
            # e^{s_ij} once for i <= j, then mirrored into the full matrix M (row-major)
            p = _scores_packed(Y, Lt, E)
            _exp_inplace(E, p, bits)
            p = 0
            for j in range(n):
                for i in range(j + 1):
                    M[j * n + i] = E[p + i]
                for i in range(j + 1):
                    M[i * n + j] = E[p + i]
                p += j + 1
            _accumulate_rows(M, n, 0, Ut, Ft)
        else:
            rows = max(1, cap // n)
            for i0 in range(0, n, rows):
                m = min(n, i0 + rows) - i0
                _scores_rows(Lt, Yt, E, i0, m)
                if not safe:  # the log-sum-exp shift, by the row max over the columns with mass
                    for r in range(m):
                        mx = -np.inf
                        for j in range(n):
                            e = E[r * n + j]
                            if e > mx and w[j] > 0:
                                mx = e
                        if not mx > -np.inf:  # no finite score: NaN, flagged below
                            mx = np.nan
                        for j in range(n):
                            E[r * n + j] -= mx
                _exp_inplace(E, m * n, bits)
                _accumulate_rows(E, m, i0, Ut, Ft)
        for i in range(n):
            inv = 1.0 / Ft[d, i]
            dot = 0.0
            for c in range(d):
                F[i, c] = Ft[c, i] * inv
                dot += F[i, c] * Y[i, c]
            if sphere:
                for c in range(d):
                    F[i, c] -= dot * Y[i, c]
        return _finite(F)

    @_jit
    def _scratch(n, d):  # pragma: no cover - compiled
        """Work arrays of :func:`_field_system` for one system (a few kilobytes for small n)."""
        cap = max(n, min(n * n, BLOCK_ENTRIES))
        return (
            np.empty((d, n)),
            np.empty((d + 1, n)),
            np.empty((d + 1, n)),
            np.empty((d, n)),
            np.empty(cap),
            np.empty(cap),
            np.empty(cap),
        )

    @_jit
    def _finite(Y):  # pragma: no cover - compiled
        """True if every entry of Y is finite (0 * x is NaN for x = inf or NaN: one branch, not n d)."""
        acc = 0.0
        for i in range(Y.shape[0]):
            for c in range(Y.shape[1]):
                acc += 0.0 * Y[i, c]
        return acc == 0.0

    @_jit
    def _retract(Y):  # pragma: no cover - compiled
        """Rows divided by their norms (a zero row stays zero)."""
        n, d = Y.shape
        for i in range(n):
            s = 0.0
            for c in range(d):
                s += Y[i, c] * Y[i, c]
            inv = 1.0 / math.sqrt(s) if s > 0.0 else 1.0
            for c in range(d):
                Y[i, c] *= inv

    @_jit
    def _stage(Y, A, V, beta, w, sym, sphere, W, F):  # pragma: no cover - compiled
        """The rhs of a stage at Y (overwritten by its retraction): False if Y or the field is not finite."""
        if not _finite(Y):
            return False
        if sphere:
            _retract(Y)
        return _field_system(Y, A, V, beta, w, sym, sphere, W, F)

    @_jit
    def _check_step(Xn, sphere, threshold):  # pragma: no cover - compiled
        """Retract the new tokens (on the sphere) and return their status code."""
        if sphere:
            _retract(Xn)
        if not _finite(Xn):
            return TOKENS_NONFINITE
        big = 0.0
        for i in range(Xn.shape[0]):
            for c in range(Xn.shape[1]):
                big = max(big, abs(Xn[i, c]))
        return THRESHOLD if big > threshold else OK

    @_jit
    def _run_system(
        b, X0, A, V, beta, w, sym, h, steps, rk4, sphere, index, threshold, frames, status, flagged
    ):  # pragma: no cover
        """System b of :func:`run_batch`, every step (the first stage at the current, finite and retracted, tokens)."""
        n, d = X0.shape[1:]
        X = X0[b].copy()
        Xn = np.empty((n, d))
        Y = np.empty((n, d))
        K = np.empty((4, n, d))
        W = _scratch(n, d)
        Ab, Vb, bb, sb = A[b], V[b], beta[b], sym[b]
        if index[0] >= 0:
            frames[index[0], b] = X
        alive = True
        for k in range(1, steps + 1):
            if alive:
                ok = _field_system(X, Ab, Vb, bb, w, sb, sphere, W, K[0])
                if rk4:
                    for q in range(1, 4):
                        c = h if q == 3 else 0.5 * h
                        if ok:
                            for i in range(n):
                                for a in range(d):
                                    Y[i, a] = X[i, a] + c * K[q - 1, i, a]
                            ok = _stage(Y, Ab, Vb, bb, w, sb, sphere, W, K[q])
                    for i in range(n):
                        for a in range(d):
                            Xn[i, a] = X[i, a] + (h / 6) * (K[0, i, a] + 2 * K[1, i, a] + 2 * K[2, i, a] + K[3, i, a])
                else:
                    for i in range(n):
                        for a in range(d):
                            Xn[i, a] = X[i, a] + h * K[0, i, a]
                code = _check_step(Xn, sphere, threshold) if ok else FIELD_OVERFLOW
                if code == OK:
                    X, Xn = Xn, X
                else:
                    status[b] = code
                    flagged[b] = k
                    alive = False
            if index[k] >= 0:
                frames[index[k], b] = X

    @numba.njit(cache=True, nogil=True)
    def _run_range(
        lo, hi, X0, A, V, beta, w, sym, h, steps, rk4, sphere, index, threshold, frames, status, flagged
    ):  # pragma: no cover
        for b in range(lo, hi):
            _run_system(b, X0, A, V, beta, w, sym, h, steps, rk4, sphere, index, threshold, frames, status, flagged)


_POOLS: dict = {}  # thread pools of the process, by size, made on first use


def _in_threads(kernel, B: int, *args) -> None:
    """``kernel(lo, hi, *args)`` over chunks of the B systems on ``numba.get_num_threads()`` threads (nogil;
    not ``prange``, whose parallel target compiles the kernel a second time)."""
    threads = min(numba.get_num_threads(), B)
    if threads <= 1:
        kernel(0, B, *args)
        return
    if threads not in _POOLS:
        from concurrent.futures import ThreadPoolExecutor

        _POOLS[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="batch_kernels")
    edges = np.linspace(0, B, min(B, 4 * threads) + 1).astype(int)
    futures = [_POOLS[threads].submit(kernel, lo, hi, *args) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
    for f in futures:
        f.result()


def run_batch(
    X0,
    A,
    V,
    beta,
    h: float,
    steps: int,
    *,
    scheme: str = "euler",
    sphere: bool = True,
    save_every: int = 1,
    save_steps=None,
    weights=None,
    blowup_threshold: float = 1e8,
) -> BatchRun:
    r"""Integrate B systems of single-head softmax attention with a fixed step, all steps compiled.

    System b follows :math:`\dot x_i=\Gamma_b(x_i)` with the field of the module docstring (projected and
    retracted if ``sphere``); equals ``simulate_batch(..., method=scheme)`` with softmax layers to round-off.

    Why 12 parameters: a compiled kernel takes the layer's arrays (``A``, ``V``, ``beta``, ``weights``),
    beside the scheme, the geometry, what to store and the blow-up threshold.

    Parameters
    ----------
    X0 : array (B, n, d)
        Initial clouds (if ``sphere``: rows of norm 1 to 1e-6).
    A, V, beta : arrays (d, d) or (B, d, d), float or (B,)
        Score matrix :math:`A=Q^\top K`, value matrix and inverse temperature, shared or one per system.
    h, steps, scheme, sphere
        Step, number of steps, ``"euler"`` or ``"rk4"``, and whether to project and retract.
    save_every, save_steps
        Store steps 0, k, 2k, ... and the last; or exactly the step indices ``save_steps``.
    weights, blowup_threshold
        Token masses :math:`w_j\ge 0` (n,) shared by the systems (uniform by default; only ratios matter); a
        system with a coordinate above the threshold is flagged.

    Returns
    -------
    BatchRun
        ``frames`` (m, B, n, d), ``saved`` (m,) step indices, ``status`` (B,), ``flagged_step`` (B,).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322); book: ``chapters/07_phase_diagrams.md``.
    """
    X0, A, V, beta, w, sym = _prepare(X0, A, V, beta, weights)
    h = validate_positive(h, "h")
    steps = validate_count(steps, "steps")
    validate_choice(scheme, "scheme", ("euler", "rk4"))
    threshold = validate_positive(blowup_threshold, "blowup_threshold", allow_inf=True)
    if not HAVE_NUMBA:
        raise ImportError("the batch kernel needs numba, which is not installed; simulate_batch runs without it")
    index = _save_steps(steps, save_every, save_steps)
    if sphere:
        norms = np.sqrt(np.einsum("bnd,bnd->bn", X0, X0))
        if np.max(np.abs(norms - 1)) > 1e-6:
            raise ValueError("sphere=True needs unit-norm tokens in X0 (rows of norm 1 to 1e-6)")
        X0 = X0 / norms[..., None]
    B, n, d = X0.shape
    saved = np.nonzero(index >= 0)[0]
    frames = np.empty((saved.size, B, n, d))
    status = np.zeros(B, dtype=np.int8)
    flagged = np.full(B, -1, dtype=np.int64)
    args = (X0, A, V, beta, w, sym, h, steps, scheme == "rk4", bool(sphere), index, threshold, frames, status, flagged)
    _in_threads(_run_range, B, *args)
    return BatchRun(frames, saved, status, flagged)


def prefer_kernel(n: int, d: int) -> bool:
    """Whether ``simulate_batch(backend="auto")`` should use :func:`run_batch`, from :data:`CROSSOVER`.

    Parameters
    ----------
    n, d : int
        Tokens per system and dimension.

    Returns
    -------
    bool
        Numba is installed, d is at most the largest measured dimension (above it, e.g. d = 100, the
        numpy path won: ``benchmarks/bench_ensembles.py``) and n is at most the crossover of the
        nearest measured dimension.

    References
    ----------
    Measured by ``benchmarks/bench_phase.py`` (see :data:`CROSSOVER`).
    """
    if not HAVE_NUMBA or not CROSSOVER or d > max(CROSSOVER):
        return False
    nearest = min(CROSSOVER, key=lambda k: (abs(k - d), k))
    return n <= CROSSOVER[nearest]
