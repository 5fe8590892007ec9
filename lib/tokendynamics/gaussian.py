r"""Gaussian token distributions: the mean/covariance ODEs of paper 1, their closed forms, diagnostics.

For softmax, multi-head, L2, Sinkhorn and linear attention the field of :math:`N(\alpha,\Sigma)` is affine,
:math:`\Gamma(x)=b+Mx`, so the Transformer PDE keeps Gaussians Gaussian and reduces to

.. math:: \dot\alpha = b + M\alpha,\qquad \dot\Sigma = M\Sigma + \Sigma M^\top .

Per head (heads add; score :math:`\beta\langle x,Ay\rangle`, paper 1's :math:`A_1=A^\top`): softmax :math:`b=V\alpha`,
:math:`M=\beta V\Sigma A^\top`; linear :math:`b=0`, :math:`M=\beta V(\Sigma+\alpha\alpha^\top)A^\top`; L2, with
:math:`N=(I+2\beta\Sigma K^\top K)^{-1}`: :math:`b=VN\alpha`, :math:`M=2\beta VN\Sigma K^\top Q`; Sinkhorn
:math:`M=VC^\top\Sigma^+`, :math:`b=V\alpha-M\alpha`, :math:`C^\top` the cross-covariance of the entropic self-plan
(:mod:`tokendynamics.kinds`). Other kinds raise :class:`NotGaussianPreservingError`. The ODEs are solved by
:func:`solve_gaussian`, :func:`solve_covariance_batch` and the authors' scheme :func:`projected_euler`.

References: Castin et al., arXiv:2501.18322, Gaussian initial data; book: chapter 2, eq. (eq-gauss-odes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.linalg import expm

from .attention import Attention, LayerLike, layer_at
from .docstrings import fill_doc
from .errors import BlowUpError, CapabilityError, NonFiniteError
from .kinds import KINDS
from .odes import MAX_STEPS, Geometry, adaptive_solve, dormand_prince_batch, fixed_step
from .transport import psd_sqrt
from .validation import (
    SOLVERS,
    parse_span,
    real_array,
    require_memory,
    time_grid,
    validate_choice,
    validate_count,
    validate_covariance,
    validate_finite,
    validate_finite_array,
    validate_gaussian,
    validate_positive,
    validate_weights,
)

# fmt: off
__all__ = [
    "GAUSSIAN_KINDS", "NotGaussianPreservingError", "gaussian_velocity", "gaussian_rhs", "GaussianTrajectory",
    "solve_gaussian", "CovarianceBatch", "solve_covariance_batch", "EulerRuns", "projected_euler",
    "empirical_moments", "gauss_hermite", "isotropic_covariance", "blowup_time",
    "clustering_limit", "rank_one_velocity", "rank_one_stationary_angles",
    "one_dimensional_solution", "decoupled_mean", "growth_rate", "covariance_eigenvalues",
]
# fmt: on

#: Built-in kinds whose field is affine on Gaussians: those with the ``gaussian`` capability.
GAUSSIAN_KINDS = tuple(name for name, k in KINDS.items() if k.has("gaussian"))

_PAPER1 = "Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data"
_CH2 = "book: ``chapters/02_gaussian_preservation.md``"
_REFS = "References\n----------\n"  # the refs_* fragments are whole References sections

_DOC = {
    "gaussian_state": r"""
        mean : array (d,)
            The mean :math:`\alpha`.
        cov : array (d, d)
            The covariance :math:`\Sigma`, symmetric positive semi-definite (singular allowed).
        layer : Attention
            A non-causal layer whose kind belongs to :data:`GAUSSIAN_KINDS` (else a NotGaussianPreservingError).
    """,
    "cov0": r"""
        cov0 : array (d, d)
            The initial covariance :math:`\Sigma_0`, symmetric positive semi-definite (singular allowed).
    """,
    "layer_iso": r"""
        layer : Attention
            Single-head softmax layer with :math:`V=vI`.
    """,
    "refs_odes": _REFS + f"{_PAPER1}; {_CH2}, equation (eq-gauss-odes).",
    "refs_tstar": _REFS + f'{_PAPER1}; {_CH2}, section "Blow-up in finite time, or not", equation (eq-gauss-tstar).',
    "refs_rank": _REFS + f'{_PAPER1}; {_CH2}, section "Clustering: the rank of the limit", equation (eq-gauss-rank).',
    "refs_rank_one": _REFS + f'{_PAPER1}; {_CH2}, section "Five behaviours in the cone" (convergence to two lines).',
}

_NO_CLOSURE = "layer: the Gaussian ODEs (a kind whose field on N(alpha, Sigma) is not affine has none, chapter 2)"


class NotGaussianPreservingError(CapabilityError):
    """The attention variant does not map Gaussians to Gaussians (its field is not affine)."""


def _check_layer(layer: Attention) -> None:
    if not isinstance(layer, Attention):
        raise TypeError(f"layer must be an Attention, got {type(layer).__name__}")
    layer.kind.require("gaussian", _NO_CLOSURE, error=NotGaussianPreservingError)
    if layer.causal:
        raise NotGaussianPreservingError(
            "layer: masked (causal) attention preserves only position-independent Gaussians "
            "lambda x N(alpha, Sigma), on which the mask has no effect (Castin et al., arXiv:2501.18322): "
            "use the same layer with causal=False"
        )


def _sym(S):
    return 0.5 * (S + np.swapaxes(S, -1, -2))


def _affine_field(mean, cov, layer: Attention):
    """(b, M, M Sigma) summed over heads (M Sigma apart: Sinkhorn has it without a pseudo-inverse); batched."""
    closure = layer.kind.require("gaussian", "the Gaussian ODEs", error=NotGaussianPreservingError)
    b, M, MS = np.zeros(mean.shape), np.zeros(cov.shape), np.zeros(cov.shape)
    for h in range(layer.n_heads):
        bh, Mh, MSh = closure(mean, cov, layer.head(h))
        b, M, MS = b + bh, M + Mh, MS + MSh
    return b, M, MS


def _validate_state(mean, cov, layer: Attention, names=("mean", "cov")):
    _check_layer(layer)
    return validate_gaussian(mean, cov, layer.d, what="the layer has d", mean_name=names[0], name=names[1])


def _rhs(mean, cov, layer):
    b, M, MS = _affine_field(mean, cov, layer)
    return b + (M @ mean[..., :, None])[..., 0], MS + np.swapaxes(MS, -1, -2)


@fill_doc(_DOC)
def gaussian_velocity(mean, cov, layer: Attention):
    r"""The affine field :math:`\Gamma(x)=b+Mx` of ``layer`` on :math:`N(\mathrm{mean},\mathrm{cov})`.

    Summed over heads; for a singular :math:`\Sigma` only :math:`M` on :math:`\alpha+\mathrm{range}\,\Sigma` counts.

    Parameters
    ----------
    %(gaussian_state)s

    Returns
    -------
    b, M : arrays (d,) and (d, d)
        The constant and the linear part of the field.

    %(refs_odes)s
    """
    mean, cov = _validate_state(mean, cov, layer)
    b, M, _ = _affine_field(mean, cov, layer)
    return b, M


@fill_doc(_DOC)
def gaussian_rhs(mean, cov, layer: Attention):
    r"""Right-hand side :math:`(\dot\alpha,\dot\Sigma)=(b+M\alpha,\ M\Sigma+\Sigma M^\top)` of the Gaussian ODEs.

    Parameters
    ----------
    %(gaussian_state)s

    Returns
    -------
    dmean, dcov : arrays (d,) and (d, d)
        The velocities of the mean and of the covariance (exactly symmetric).

    %(refs_odes)s
    """
    mean, cov = _validate_state(mean, cov, layer)
    return _rhs(mean, cov, layer)


@dataclass(frozen=True, eq=False)
class GaussianTrajectory:
    r"""A solution :math:`t\mapsto N(\alpha_t,\Sigma_t)` of the Gaussian ODEs (:func:`solve_gaussian`).

    Attributes
    ----------
    t, mean, cov : arrays (m,), (m, d), (m, d, d)
        Stored times, means and (symmetric PSD) covariances.
    layer : Attention or callable
        The layer.
    status, exit_time : str, float or None
        What ended the run (``"completed"`` or ``"blowup"``), and when.
    info : dict
        Solver details (``nfev``, tolerances, ``blowup_time_extrapolated`` ...).
    """

    t: np.ndarray
    mean: np.ndarray
    cov: np.ndarray
    layer: LayerLike
    status: str = "completed"
    exit_time: float | None = None
    info: dict = field(default_factory=dict)

    @property
    def final_mean(self) -> np.ndarray:
        """Mean at the last stored time."""
        return self.mean[-1]

    @property
    def final_cov(self) -> np.ndarray:
        """Covariance at the last stored time."""
        return self.cov[-1]

    @property
    def blew_up(self) -> bool:
        """Whether the run ended at the blow-up threshold."""
        return self.status == "blowup"

    @property
    def blowup_time(self) -> float | None:
        """Time of the blow-up (None if there was none)."""
        return self.exit_time if self.status == "blowup" else None

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of the stored covariances (:func:`covariance_eigenvalues`).

        Returns
        -------
        array (m, d)
            Decreasing at each stored time.
        """
        return covariance_eigenvalues(self.cov)

    def trace(self) -> np.ndarray:
        r""":math:`\operatorname{tr}\Sigma_t` at the stored times.

        Returns
        -------
        array (m,)
        """
        return np.trace(self.cov, axis1=-2, axis2=-1)


def _layer_at(layer: LayerLike, t: float, d: int) -> Attention:
    lay = layer_at(layer, t, d)
    _check_layer(lay)
    return lay


#: The options of :func:`solve_gaussian`, with their defaults.
_SOLVE_OPTIONS: dict[str, Any] = {"method": "DOP853", "rtol": 1e-10, "atol": 1e-12, "blowup_trace": 1e8}


@fill_doc(_DOC)
def solve_gaussian(
    mean0,
    cov0,
    layer: LayerLike,
    t_span,
    *,
    t_eval=None,
    on_blowup: str = "stop",
    **options,
) -> GaussianTrajectory:
    r"""Solve the Gaussian ODEs :math:`\dot\alpha=b+M\alpha`, :math:`\dot\Sigma=M\Sigma+\Sigma M^\top`.

    :func:`~tokendynamics.odes.adaptive_solve` on :math:`(\alpha,\Phi)`, :math:`\Sigma=\Phi\Sigma_0\Phi^\top`,
    :math:`\dot\Phi=M\Phi` (PSD, rank kept), stopped where :math:`\operatorname{tr}\Sigma` reaches
    ``blowup_trace`` (``info["blowup_time_extrapolated"]`` adds :math:`\operatorname{tr}\Sigma/\frac{d}{dt}
    \operatorname{tr}\Sigma`, exact for a simple pole). The authors' own scheme, with their steps and stopping
    rules, is :func:`projected_euler`.

    Parameters
    ----------
    mean0 : array (d,)
        The initial mean (never modified).
    %(cov0)s
    layer : Attention or callable ``t -> Attention``
        Kind in :data:`GAUSSIAN_KINDS`; a callable gives depth-dependent parameters.
    t_span : float or (t0, T)
        The time span.
    t_eval : array, optional
        Output times (default every accepted step; at a blow-up its time is appended).
    on_blowup : {"stop", "raise"}
        Return the run up to the blow-up (``status="blowup"``), or raise a BlowUpError with its time.
    **options
        ``method`` (a ``scipy.integrate`` solver, ``"DOP853"``), ``rtol``, ``atol`` (``1e-10``, ``1e-12``),
        ``blowup_trace`` (``1e8``).

    Returns
    -------
    GaussianTrajectory

    %(refs_odes)s
    """
    on_blowup = validate_choice(on_blowup, "on_blowup", ("stop", "raise"))
    unknown = sorted(set(options) - set(_SOLVE_OPTIONS))
    if unknown:
        raise ValueError(f"solve_gaussian() got unknown option(s) {unknown}; its options are {sorted(_SOLVE_OPTIONS)}")
    o = {**_SOLVE_OPTIONS, **options}
    t0, T = parse_span(t_span)
    blowup_trace = validate_positive(o["blowup_trace"], "blowup_trace", allow_inf=True)
    method = validate_choice(o["method"], "method", SOLVERS)
    rtol, atol = validate_positive(o["rtol"], "rtol"), validate_positive(o["atol"], "atol")
    first = _layer_at(layer, t0, np.atleast_1d(real_array(mean0, "mean0")).shape[0])
    mean0, S0 = _validate_state(mean0, cov0, first, ("mean0", "cov0"))
    d = first.d
    if np.trace(S0) >= blowup_trace:
        raise ValueError(f"tr cov0 = {np.trace(S0):.3g} is already above blowup_trace = {blowup_trace:.3g}")
    at = (lambda t: layer) if isinstance(layer, Attention) else (lambda t: _layer_at(layer, t, d))

    def fun(t, y):
        m, Phi = y[:d], y[d:].reshape(d, d)
        b, M, _ = _affine_field(m, _sym(Phi @ S0 @ Phi.T), at(t))
        out = np.concatenate([b + M @ m, (M @ Phi).ravel()])
        if not np.all(np.isfinite(out)):
            raise NonFiniteError(f"the Gaussian ODE right-hand side became non-finite at t = {t:.6g}")
        return out

    trace = lambda y: float(np.einsum("ij,jk,ik->", y[d:].reshape(d, d), S0, y[d:].reshape(d, d)))
    y0 = np.concatenate([mean0, np.eye(d).ravel()])
    run = adaptive_solve(
        fun, (t0, T), y0, t_eval, solver=method, rtol=rtol, atol=atol, size=trace, threshold=blowup_trace
    )
    ts, ys, status = run.t, run.y, "completed"
    exit_time: float | None = None
    info = {"nfev": run.nfev, "method": method, "rtol": rtol, "atol": atol, "blowup_trace": blowup_trace}
    if run.status != "completed":  # the time the solver reached (never an output time)
        exit_time, y_ev = run.time, run.y_stop
        keep = ts < exit_time
        ts, ys = np.append(ts[keep], exit_time), np.vstack([ys[keep], y_ev[None]])
        m_ev, Phi_ev = y_ev[:d], y_ev[d:].reshape(d, d)
        S_ev = Phi_ev @ S0 @ Phi_ev.T
        with np.errstate(all="ignore"):
            tr_rate = float(np.trace(_rhs(m_ev, _sym(S_ev), at(exit_time))[1]))
        if tr_rate > 0 and np.isfinite(tr_rate):
            info["blowup_time_extrapolated"] = exit_time + float(np.trace(S_ev) / tr_rate)
        status = "blowup"
        what = info["blowup_reason"] = (
            f"tr Sigma reached blowup_trace = {blowup_trace:.3g}"
            if run.status == "threshold"
            else f"tr Sigma = {np.trace(S_ev):.3g} when {run.reason}"
        )
        if on_blowup == "raise":
            extra = info.get("blowup_time_extrapolated")
            pole = "" if extra is None else f" (extrapolated pole at t = {extra:.6g})"
            raise BlowUpError(exit_time, run.last_good, what + pole)
    Phis = ys[:, d:].reshape(-1, d, d)
    covs = _sym(Phis @ S0 @ np.swapaxes(Phis, -1, -2))
    return GaussianTrajectory(ts, ys[:, :d], covs, layer, status, exit_time, info=info)


@dataclass(frozen=True, eq=False)
class CovarianceBatch:
    r"""Result of :func:`solve_covariance_batch`: B covariance equations integrated together.

    Attributes
    ----------
    status : array (B,) of str
        ``"completed"`` (reached ``T``) or ``"blowup"`` (the trace reached ``blowup_trace``).
    blowup_time, pole_time : arrays (B,)
        When the trace reached ``blowup_trace``, and that time plus :math:`\operatorname{tr}\Sigma/\frac{d}{dt}
        \operatorname{tr}\Sigma` (the time of a simple pole); ``nan`` without a blow-up.
    crossing_times : array (B, L)
        First time the trace reached each of ``trace_levels`` (``nan`` if never), interpolated in log trace.
    cov_last, t_end, t_eval, cov, steps, trace_levels
        The last covariance and its time, the output times and covariances there (``nan`` after a stop), the
        accepted steps per member (with LSODA's for a stiff one), the levels.
    """

    status: np.ndarray
    blowup_time: np.ndarray
    pole_time: np.ndarray
    crossing_times: np.ndarray
    cov_last: np.ndarray
    t_end: np.ndarray
    t_eval: np.ndarray
    cov: np.ndarray
    steps: np.ndarray
    trace_levels: tuple

    @property
    def blew_up(self) -> np.ndarray:
        """Boolean mask of the members that blew up."""
        return self.status == "blowup"

    def __len__(self) -> int:
        return len(self.status)


def _cov_stack(cov0, d: int, B: int | None = None) -> np.ndarray:
    """``cov0`` (d, d) or (B, d, d) as a validated (B, d, d) copy (one matrix: B = 1, or shared by B members)."""
    C = np.array(real_array(cov0, "cov0"), dtype=float, copy=True)
    if C.shape == (d, d):
        C = np.repeat(C[None], B or 1, axis=0)
    if C.ndim != 3 or C.shape[1:] != (d, d) or B not in (None, len(C)):
        raise ValueError(f"cov0 must be ({d}, {d}) or ({B or 'B'}, {d}, {d}), got shape {np.shape(cov0)}")
    for k in range(len(C)):
        C[k] = validate_covariance(C[k], f"cov0[{k}]", d)
    return C


def _field_matrix_batch(cov, stack: Attention, idx) -> np.ndarray:
    r""":math:`M=\sum_hV_h(I+\Sigma G_h)^{-1}\Sigma C_h` for the members ``idx`` of a batch (the kind's factors)."""
    sub = stack.take(idx)
    factors = sub.kind.require("covariance", "the batched covariance solver")
    M = np.zeros(cov.shape)
    for h in range(sub.n_heads):
        head = sub.head(h)
        G, C = factors(head)
        M += head.V @ (cov @ C if G is None else np.linalg.solve(np.eye(cov.shape[-1]) + cov @ G, cov @ C))
    return M


def _log_crossing(level, t0, t1, tr0, tr1):
    """When the trace reaches ``level`` within a step, interpolated linearly in the log of the trace."""
    frac = np.log(level / tr0) / np.log(tr1 / tr0)
    return t0 + frac * (t1 - t0)


@fill_doc(_DOC)
def solve_covariance_batch(
    cov0,
    layers,
    T: float,
    *,
    t_eval=None,
    rtol: float = 1e-9,
    atol: float = 1e-12,
    blowup_trace: float = 1e8,
    trace_levels=(),
    max_steps: int = 3000,
) -> CovarianceBatch:
    r"""Accurate solutions of B covariance equations at once, each with its own layer, with blow-up times.

    Member :math:`b` solves :math:`\dot\Sigma=M_b\Sigma+\Sigma M_b^\top` through :math:`\Sigma_t=\Phi_t\Sigma_0
    \Phi_t^\top`, :math:`\dot\Phi=M_b(\Sigma_t)\Phi` (a kind whose :math:`M` ignores the mean: softmax, L2) by
    :func:`~tokendynamics.odes.dormand_prince_batch`, one step size per member, and stops where its trace
    reaches ``blowup_trace``.

    Parameters
    ----------
    cov0 : array (d, d) or (B, d, d)
        Initial covariances (one for all members, or one each). Never modified.
    layers : Attention (a batch of layers) or sequence of Attention
        One layer per member, of a kind with the ``covariance`` capability (softmax, L2), any heads.
    T : float
        Final time.
    t_eval : array (m,), optional
        Increasing times in :math:`[0,T]` at which to store the covariances.
    rtol, atol, blowup_trace : float
        Tolerances, and the trace at which a member counts as blown up and stops.
    trace_levels : sequence of float
        Traces whose first crossing times are recorded.
    max_steps : int
        Steps after which a member counts as stiff (e.g. a covariance collapsing onto rank one) and is
        finished by :func:`solve_gaussian` with ``method="LSODA"``.

    Returns
    -------
    CovarianceBatch

    %(refs_odes)s
    """
    stack = layers if isinstance(layers, Attention) and layers.batch_size is not None else Attention.stack(layers)
    stack.kind.require("covariance", "the batched covariance solver (use solve_gaussian member by member)")
    B, d = len(stack), stack.d
    T = validate_positive(T, "T")
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    blowup_trace = validate_positive(blowup_trace, "blowup_trace", allow_inf=True)
    max_steps = validate_count(max_steps, "max_steps")
    C0 = _cov_stack(cov0, d, B)
    tr0 = np.trace(C0, axis1=1, axis2=2)
    if np.any(tr0 >= blowup_trace):
        raise ValueError("some initial trace is already above blowup_trace")
    levels = tuple(
        validate_positive(x, "trace_levels") for x in np.atleast_1d(real_array(trace_levels, "trace_levels"))
    )
    t_eval = np.zeros(0) if t_eval is None else time_grid((0.0, T), t_eval)[2]

    covs = lambda Phi, idx: _sym(Phi @ C0[idx] @ np.swapaxes(Phi, -1, -2))
    blowup_time, pole_time = np.full(B, np.nan), np.full(B, np.nan)
    crossing = np.where(tr0[:, None] >= np.array(levels), 0.0, np.nan).reshape(B, len(levels))
    tr_prev = tr0.copy()

    def on_step(acc, t_old, t_new, Phi_new):
        """Trace crossings and blow-ups of the accepted systems."""
        S_new = covs(Phi_new, acc)
        tr_new = np.trace(S_new, axis1=1, axis2=2)
        for k, lev in enumerate(levels):
            hit = np.isnan(crossing[acc, k]) & (tr_new >= lev)
            crossing[acc[hit], k] = _log_crossing(lev, t_old[hit], t_new[hit], tr_prev[acc[hit]], tr_new[hit])
        blow = tr_new >= blowup_trace
        if np.any(blow):
            a = acc[blow]
            blowup_time[a] = _log_crossing(blowup_trace, t_old[blow], t_new[blow], tr_prev[a], tr_new[blow])
            dtr = 2.0 * np.einsum("bij,bji->b", _field_matrix_batch(S_new[blow], stack, a), S_new[blow])
            pole_time[a] = t_new[blow] + tr_new[blow] / dtr
        tr_prev[acc] = tr_new
        return blow

    f = lambda Phi, idx: _field_matrix_batch(covs(Phi, idx), stack, idx) @ Phi
    I = np.broadcast_to(np.eye(d), (B, d, d))
    opts = dict(rtol=rtol, atol=atol, t_eval=t_eval, max_steps=max_steps, on_step=on_step)
    run = dormand_prince_batch(f, I, T, **opts)
    status = np.where(run.status == "stopped", "blowup", "completed").astype(object)
    steps = np.array(run.reason, dtype=int)
    t_end, cov_last = run.time.copy(), covs(run.y_stop, np.arange(B))
    stored = np.full((B, t_eval.size, d, d), np.nan)
    Phis = np.swapaxes(run.y, 0, 1)  # (B, m, d, d)
    ok = np.isfinite(Phis[..., 0, 0])  # the stored states (NaN after a member stopped)
    stored[ok] = covs(Phis[ok], np.nonzero(ok)[0])
    kw: dict[str, Any] = dict(method="LSODA", rtol=rtol, atol=atol, blowup_trace=blowup_trace)
    for b in np.flatnonzero(run.status == "stiff"):  # e.g. a large covariance collapsing onto rank one
        S_b, lay, tb = cov_last[b], stack.member(int(b)), float(run.time[b])
        sol = solve_gaussian(np.zeros(d), S_b, lay, (tb, T), **kw)
        steps[b] += len(sol.t)
        trs, tts = np.concatenate([[tr_prev[b]], sol.trace()[1:]]), np.concatenate([[tb], sol.t[1:]])
        for k, lev in enumerate(levels):
            if np.isnan(crossing[b, k]) and np.any(trs >= lev):
                j = int(np.argmax(trs >= lev))
                crossing[b, k] = _log_crossing(lev, tts[j - 1], tts[j], trs[j - 1], trs[j])
        rest = t_eval[t_eval > tb]
        if rest.size:
            dense = solve_gaussian(np.zeros(d), S_b, lay, (tb, T), t_eval=rest, **kw)
            outs = dense.cov[:-1] if dense.status == "blowup" else dense.cov
            stored[b, t_eval.size - rest.size :][: len(outs)] = outs
        cov_last[b], t_end[b] = sol.cov[-1], sol.t[-1]
        if sol.status == "blowup":
            status[b], blowup_time[b] = "blowup", sol.exit_time
            pole_time[b] = sol.info.get("blowup_time_extrapolated", np.nan)
    return CovarianceBatch(
        status.astype(str), blowup_time, pole_time, crossing, cov_last, t_end, t_eval, stored, steps, levels
    )


@dataclass(frozen=True, eq=False)
class EulerRuns:
    r"""Result of :func:`projected_euler` for a batch of B initial covariances.

    Attributes
    ----------
    status, iterations, exit_time : arrays (B,)
        ``"converged"``, ``"blowup"``, ``"max_iter"`` or ``"completed"`` (``t_max``); the official loop index at
        the stop (``max_iter`` if the loop ran out); ``iterations * step``.
    cov_last : array (B, d, d)
        The last stored iterate (the official ``S_list[-1]``).
    saved_iterations, saved_cov, step : lists of arrays, float
        Per member, the stored iteration indices and covariances; the step.
    """

    status: np.ndarray
    iterations: np.ndarray
    exit_time: np.ndarray
    cov_last: np.ndarray
    saved_iterations: list
    saved_cov: list
    step: float

    def __len__(self) -> int:
        return len(self.status)


#: What the official projection puts in place of negative eigenvalues.
_PSD_FLOOR = 1e-14


def _project_psd(S):
    """Official projection: negative eigenvalues replaced by ``_PSD_FLOOR``, only where one is negative."""
    if S.shape[-1] == 2:
        a, b, c = S[:, 0, 0], S[:, 1, 1], 0.5 * (S[:, 0, 1] + S[:, 1, 0])
        lam_min = 0.5 * (a + b) - np.sqrt(0.25 * (a - b) ** 2 + c * c)
    else:
        lam_min = np.linalg.eigvalsh(S)[:, 0]
    bad = lam_min < 0
    if np.any(bad):
        lam, U = np.linalg.eigh(S[bad])
        S = S.copy()
        S[bad] = (U * np.where(lam < 0, _PSD_FLOOR, lam)[:, None, :]) @ np.swapaxes(U, -1, -2)
    return S


def _save_mask(save, max_iter: int) -> np.ndarray:
    """Boolean mask over the iterations 0..max_iter-1 of the iterates to store."""
    mask = np.zeros(max_iter, dtype=bool)
    if save == "all":
        mask[:] = True
    elif save == "log":
        mask[:50], x = True, 50.0
        while x < max_iter:
            mask[int(x)] = True
            x *= 1.02
    elif save != "final":
        if isinstance(save, str) or int(save) != save or save < 1:
            raise ValueError(f"save must be 'all', 'log', 'final' or a positive integer, got {save!r}")
        mask[:: int(save)] = True
    return mask


@fill_doc(_DOC)
def projected_euler(
    cov0,
    layer: Attention,
    *,
    step: float,
    mean0=None,
    tol_low: float = 1e-5,
    tol_high: float = 1e3,
    max_iter: int = 50_000,
    save="log",
    t_max: float | None = None,
    backend: str = "auto",
) -> EulerRuns:
    r"""The authors' projected Euler scheme for the covariance ODE, for a batch of initial covariances.

    Loop ``i = 0, ..., max_iter - 1``: store :math:`\Sigma_i`; :math:`R=\dot\Sigma(\Sigma_i)`; stop as *converged*
    if :math:`\|R\|_F<` ``tol_low``; :math:`\Sigma_{i+1}=\Pi_{\succeq0}(\Sigma_i+hR)` (negative eigenvalues set to
    :math:`10^{-14}`, as the authors do); stop as *blow-up* if :math:`\operatorname{tr}\Sigma_{i+1}>` ``tol_high``.
    ``mean0`` moves by plain Euler.

    Parameters
    ----------
    cov0 : array (d, d) or (B, d, d)
        One initial covariance or B of them (symmetric PSD), each its own member. Never modified.
    layer : Attention
        Kind in :data:`GAUSSIAN_KINDS` (official scalings: :func:`tokendynamics.book.gaussian_figures.official_layer`).
    step : float
        Euler step :math:`h`.
    mean0 : array (d,) or (B, d), optional
        Initial mean(s); ``None`` keeps every mean at zero, as the official code does.
    tol_low, tol_high, max_iter : float, float, int
        The stopping rules (official ``1e-5``, ``1e3``, 50000; ``tol_low=0`` or ``tol_high=inf`` disables one);
        a run that never stops ends with status ``"max_iter"``.
    save : {"log", "all", "final"} or int
        Iterates kept per member: all (the official ``S_list``), every k-th, ``"log"`` (0–49, then about 116
        per decade) or only the last stored one (always kept).
    t_max : float, optional
        Also stop (``status="completed"``) at iteration ``ceil(t_max / step)``.
    backend : {"auto", "numpy", "numba"}
        ``auto``: the compiled loop for softmax and single-head L2 when numba is there and no ``mean0``.

    Returns
    -------
    EulerRuns

    %(refs_odes)s
    The scheme and its stopping rules are those of the authors' code (vcastin/2025-transformers-PDEs).
    """
    _check_layer(layer)
    step = validate_positive(step, "step")
    max_iter = validate_count(max_iter, "max_iter")
    if max_iter > MAX_STEPS:
        raise ValueError(f"max_iter = {max_iter} is more than the budget MAX_STEPS = {MAX_STEPS} of one integration")
    tol_low = validate_positive(tol_low, "tol_low", allow_zero=True)
    tol_high = validate_positive(tol_high, "tol_high", allow_inf=True)
    if not tol_low < tol_high:
        raise ValueError(f"tol_low must be below tol_high, got {tol_low:g} and {tol_high:g}")
    validate_choice(backend, "backend", ("auto", "numpy", "numba"))
    d = layer.d
    C = _cov_stack(cov0, d)
    mask = _save_mask(save, max_iter)
    # t_max: the last iteration is i_stop = ceil(t_max / step); members still running there are "completed"
    i_stop = max_iter if t_max is None else int(math.ceil(validate_positive(t_max, "t_max") / step - 1e-9))
    limited = i_stop + 1 <= max_iter
    last_allowed = i_stop + 1 if limited else max_iter
    if mean0 is not None:
        mean0 = np.array(np.broadcast_to(np.asarray(mean0, dtype=float), (len(C), d)))
        if not np.all(np.isfinite(mean0)):
            raise ValueError("mean0 contains non-finite values")

    from . import _gaussian_kernels as kernels

    compiled_ok = kernels.HAVE_NUMBA and kernels.supports(layer) and mean0 is None
    if backend == "numba" and not compiled_ok:
        raise ValueError("backend='numba' needs numba, a softmax or single-head l2 layer, and no mean0")
    if backend == "numpy" or not compiled_ok:
        stops = (tol_low, tol_high, max_iter, mask, last_allowed, limited)
        status, its, saved_it, saved_S = _projected_euler_numpy(C, layer, step, mean0, *stops)
    else:
        args = (tol_low, tol_high, last_allowed, _PSD_FLOOR, mask[:last_allowed])
        status, its, saved_it, saved_S = kernels.euler_members(C, layer, step, *args)
        if limited:
            cut = status == "max_iter"
            status[cut], its[cut] = "completed", last_allowed - 1
    cov_last = np.array([S[-1] for S in saved_S]).reshape(C.shape)
    return EulerRuns(status.astype(str), its, its * step, cov_last, saved_it, saved_S, float(step))


def _projected_euler_numpy(C, layer, step, mean0, tol_low, tol_high, max_iter, mask, last_allowed, limited):
    """The official scheme on the stepping layer: Euler on the state (mean in row 0, covariance below) with the PSD
    projection as retraction; the field flags a converged member (code 3), the threshold a blow-up. Returns the
    status, iterations, stored iteration indices and covariances of the members."""
    B, d = C.shape[0], C.shape[1]
    m = np.zeros((B, d)) if mean0 is None else mean0

    def field(t, Y, active, t_step):
        dm, R = _rhs(Y[:, 0], Y[:, 1:], layer)
        nrm = np.sqrt(np.einsum("bij,bij->b", R, R))
        if not np.all(np.isfinite(nrm)):
            bad = active[~np.isfinite(nrm)].tolist()[:5]
            it = round(t / step)
            raise NonFiniteError(f"projected Euler: non-finite right-hand side at iteration {it} for member(s) {bad}")
        return np.concatenate([dm[:, None], R], axis=1), np.where(nrm < tol_low, 3, 0)

    psd = lambda Y: np.concatenate([Y[:, :1], _project_psd(Y[:, 1:])], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        run = fixed_step(
            field,
            np.concatenate([m[:, None], C], axis=1),
            0.0,
            last_allowed,
            step,
            scheme="euler",
            geometry=Geometry("psd", lambda y, v: v, psd, stages=False),
            saved=lambda k: k >= last_allowed - 1 or bool(mask[k]),
            threshold=tol_high,
            size=lambda Y: np.trace(Y[:, 1:], axis1=1, axis2=2),
        )
    stopped = run.status != "completed"
    # the official loop index of the stop: the step that stopped starts at iterate i; the others ran to the end
    iterations = np.where(stopped, np.rint(np.nan_to_num(run.last_good) / step).astype(int), last_allowed - 1)
    status = np.where(run.status == "flagged", "converged", "blowup").astype(object)
    status[~stopped] = "completed" if limited else "max_iter"
    frames = np.swapaxes(run.y, 0, 1)  # (B, saved, d + 1, d)
    saved_k = np.rint(run.t / step).astype(int)
    saved_it, saved_S = [], []
    for k in range(B):
        i = int(iterations[k])
        kept = (saved_k < last_allowed) & ((saved_k == i) | mask[np.minimum(saved_k, max_iter - 1)])
        keep = saved_k <= i if stopped[k] else kept
        its, states = saved_k[keep], frames[k, keep]
        if not (its.size and its[-1] == i):  # the stop iterate is always stored (frozen at it)
            its, states = np.append(its, i), np.concatenate([states, frames[k, -1:]])
        saved_it.append(its)
        saved_S.append(states[:, 1:])
    return status, np.where(stopped | limited, iterations, max_iter), saved_it, saved_S


@fill_doc(_DOC)
def empirical_moments(X, weights=None):
    r"""Mean :math:`\bar x=\sum_jw_jx_j` and covariance :math:`\sum_jw_j(x_j-\bar x)(x_j-\bar x)^\top` of tokens.

    The moments the Gaussian ODEs predict, of :math:`\mu=\sum_jw_j\delta_{x_j}` (:math:`w_j=1/n` by default,
    or quadrature weights, :func:`gauss_hermite`); leading axes are e.g. the times of a trajectory.

    Parameters
    ----------
    X : array (..., n, d)
        Tokens (at least one, of dimension at least one), possibly stacked along leading axes.
    weights : array (n,), optional
        Masses of the tokens, non-negative, summing to 1.

    Returns
    -------
    mean, cov : arrays (..., d) and (..., d, d)
        The weighted mean and covariance (normalised by the total mass, no :math:`n/(n-1)`).

    %(refs_odes)s
    """
    X = validate_finite_array(X, "X", min_ndim=2)
    n = X.shape[-2]
    if n == 0 or X.shape[-1] == 0:
        raise ValueError(f"X must hold at least one token of dimension >= 1, got shape {X.shape}")
    w = np.full(n, 1.0 / n) if weights is None else validate_weights(weights, n)
    m = np.einsum("j,...ja->...a", w, X)
    Y = X - m[..., None, :]
    return m, np.einsum("j,...ja,...jb->...ab", w, Y, Y)


@fill_doc(_DOC)
def gauss_hermite(mean, cov, k: int = 20):
    r"""Tensor Gauss–Hermite quadrature of :math:`N(\mathrm{mean},\mathrm{cov})`, d <= 3.

    :math:`\int f\,dN(\alpha,\Sigma)\approx\sum_jw_jf(x_j)`, :math:`x_j=\alpha+\Sigma^{1/2}z_j` (symmetric root:
    singular covariances allowed), :math:`(z_j,w_j)` the probabilists' Hermite rule. As token weights
    (``simulate(..., weights=w)``) this is the Transformer PDE started from the Gaussian itself.

    Parameters
    ----------
    mean : array (d,)
        The mean, d <= 3.
    cov : array (d, d)
        The covariance, symmetric positive semi-definite.
    k : int
        Nodes per coordinate (exact for polynomials of degree up to :math:`2k-1` in each coordinate).

    Returns
    -------
    nodes, weights : arrays (k**d, d) and (k**d,)
        The points and their masses (positive, summing to 1).

    %(refs_odes)s
    """
    from numpy.polynomial.hermite_e import hermegauss

    mean, cov = validate_gaussian(mean, cov)
    d = mean.shape[0]
    if d > 3:
        raise ValueError(f"a tensor quadrature has k^d nodes: use it for d <= 3, got d = {d}")
    k = validate_count(k, "k")
    require_memory(k * k + (d + 2) * k**d, f"a quadrature with k = {k} nodes per axis in d = {d}")
    z, w = hermegauss(k)
    w = w / w.sum()
    Z = np.stack(np.meshgrid(*([z] * d), indexing="ij"), -1).reshape(-1, d)
    W = np.prod(np.stack(np.meshgrid(*([w] * d), indexing="ij"), -1).reshape(-1, d), axis=1)
    return mean + Z @ psd_sqrt(cov).T, W


def _softmax_single(layer: Attention, what: str, single: bool = True) -> Attention:
    _check_layer(layer)
    layer.kind.require("quadratic_covariance", what)
    if single and layer.n_heads != 1:
        raise ValueError(f"{what} holds for single-head softmax attention, got {layer!r}")
    return layer


def _scalar_value(layer: Attention, what: str) -> float:
    V = layer.V[0]
    v = float(np.trace(V)) / layer.d
    if not np.allclose(V, v * np.eye(layer.d), rtol=0, atol=1e-12 * max(1.0, abs(v))):
        raise ValueError(f"{what} needs an isotropic value matrix V = v I, got V = {V.tolist()}")
    return v


def _isotropic(cov0, layer: Attention, what: str):
    """The checks of the V = vI closed forms: (layer, v, R, K, T*), R = cov0^{1/2}, K = R beta(A + A^T) R."""
    layer = _softmax_single(layer, what)
    v = _scalar_value(layer, what)
    R, A = psd_sqrt(validate_covariance(cov0, "cov0", layer.d)), layer.A[0]
    K = _sym(R @ (layer.beta * (A + A.T)) @ R)  # beta (A + A^T): the same in both conventions
    eig = np.linalg.eigvalsh(v * K)
    Tstar = 1.0 / eig[-1] if eig[-1] > 1e-14 * max(1e-300, float(np.abs(eig).max())) else math.inf
    return layer, v, R, K, float(Tstar)


def _before_blowup(t, Tstar: float, what: str) -> np.ndarray:
    """The times ``t`` as a finite 1-d array, all before ``Tstar``; else a BlowUpError."""
    ts = np.atleast_1d(validate_finite_array(t, "t"))
    if np.any(ts >= Tstar):
        last = float(ts[ts < Tstar].max()) if np.any(ts < Tstar) else 0.0
        raise BlowUpError(Tstar, last, f"{what} at T* = {Tstar:.6g}")
    return ts


@fill_doc(_DOC)
def isotropic_covariance(cov0, layer: Attention, t):
    r"""Closed-form covariance of softmax with :math:`V=vI`: :math:`\Sigma_t=R(I-vt\,RSR)^{-1}R`.

    :math:`\frac{d}{dt}\Sigma^{-1}=-vS`, :math:`S=\beta(A+A^\top)`, :math:`R=\Sigma_0^{1/2}`, for :math:`t<T^*`.

    Parameters
    ----------
    %(cov0)s
    %(layer_iso)s
    t : float or array (m,)
        Time(s), all before the blow-up time :math:`T^*` (:func:`blowup_time`); else a BlowUpError.

    Returns
    -------
    array (d, d) or (m, d, d)
        :math:`\Sigma_t`, one matrix for a number ``t``, a stack for an array.

    %(refs_tstar)s
    """
    layer, v, R, K, Tstar = _isotropic(cov0, layer, "the precision formula")
    ts = _before_blowup(t, Tstar, "the covariance blows up")
    out = np.array([_sym(R @ np.linalg.solve(np.eye(layer.d) - v * s * K, R)) for s in ts])
    return out[0] if np.ndim(t) == 0 else out


@fill_doc(_DOC)
def blowup_time(cov0, layer: Attention) -> float:
    r"""Blow-up time of softmax with :math:`V=vI`, ``inf`` if there is none.

    :math:`T^*=1/\lambda_{\max}(v\Sigma_0^{1/2}\beta(A+A^\top)\Sigma_0^{1/2})` if that eigenvalue is positive; for
    :math:`\Sigma_0\succ0` a blow-up happens iff :math:`v(A+A^\top)` has a positive eigenvalue.

    Parameters
    ----------
    %(cov0)s
    %(layer_iso)s

    Returns
    -------
    float
        :math:`T^*`, or ``math.inf`` when the largest eigenvalue is at most :math:`10^{-14}` times the largest
        in absolute value.

    %(refs_tstar)s
    """
    return _isotropic(cov0, layer, "the blow-up formula")[-1]


@fill_doc(_DOC)
def clustering_limit(cov0, layer: Attention, *, tol: float = 1e-10) -> np.ndarray:
    r"""Limit covariance of clustering: :math:`\Sigma_\infty=R\,P_{\ker(RSR)}R`, :math:`R=\Sigma_0^{1/2}`.

    Softmax with :math:`V=vI`, :math:`v>0`, :math:`S=\beta(A+A^\top)\preceq0`: the conditional covariance of
    :math:`x\sim N(\alpha_0,\Sigma_0)` given its component in :math:`\operatorname{range}(A+A^\top)`, reached at
    rate :math:`O(1/t)`. Single-head L2 with :math:`V=vI`, :math:`v>0`, :math:`K^\top Q` symmetric negative
    semi-definite and :math:`\ker K^\top Q=\ker K`: the same with :math:`S=K^\top Q+Q^\top K` (derived for this
    book). Eigenvalues below ``tol`` times the largest count as zero.

    Parameters
    ----------
    %(cov0)s
    layer : Attention
        Single head with :math:`V=vI`, :math:`v>0`: softmax or L2 as above (anything else: a ValueError).
    tol : float
        Relative threshold (> 0) of the zero eigenvalues.

    Returns
    -------
    array (d, d)
        :math:`\Sigma_\infty`, symmetric positive semi-definite.

    %(refs_rank)s
    """
    _check_layer(layer)
    clustering = layer.kind.require("clustering_matrix", "the clustering limit")
    if layer.n_heads != 1:
        raise ValueError(f"the clustering limit is known for single-head softmax and l2 attention, got {layer!r}")
    v = _scalar_value(layer, "the clustering limit")
    if not v > 0:
        raise ValueError(f"the clustering limit needs V = v I with v > 0, got v = {v:g}")
    S = clustering(layer.head(0))
    lamS = np.linalg.eigvalsh(S)
    if lamS[-1] > 1e-12 * max(1.0, np.abs(lamS).max()):
        raise ValueError(
            "the clustering limit needs a negative semi-definite symmetric part "
            f"(its largest eigenvalue is {lamS[-1]:.3g}): the covariance does not cluster"
        )
    R0 = psd_sqrt(validate_covariance(cov0, "cov0", layer.d))
    tol = validate_positive(tol, "tol")
    lam, U = np.linalg.eigh(_sym(R0 @ S @ R0))
    ker = U[:, np.abs(lam) <= tol * max(np.abs(lam).max(), 1e-300)]
    return _sym(R0 @ (ker @ ker.T) @ R0)


@fill_doc(_DOC)
def rank_one_velocity(z, layer: Attention) -> np.ndarray:
    r"""Velocity :math:`\dot z=\sum_h\beta(z^\top A_hz)V_hz` on the rank-one manifold :math:`\Sigma=zz^\top` of softmax.

    :math:`\Sigma_t=z_tz_t^\top` then solves the covariance ODE, for any :math:`V, A`.

    Parameters
    ----------
    z : array (..., d)
        A point of the manifold, or a stack of them.
    layer : Attention
        Softmax layer, any number of heads (not causal).

    Returns
    -------
    array (..., d)
        :math:`\dot z`.

    %(refs_rank_one)s
    """
    layer = _softmax_single(layer, "the rank-one reduction", single=False)
    z = validate_finite_array(z, "z", min_ndim=1)
    if z.shape[-1] != layer.d:
        raise ValueError(f"z must have dimension {layer.d}, got shape {z.shape}")
    q = np.einsum("...i,hij,...j->h...", z, layer.A, z)
    return layer.beta * sum(q[h][..., None] * (z @ layer.V[h].T) for h in range(layer.n_heads))


@fill_doc(_DOC)
def rank_one_stationary_angles(layer: Attention) -> np.ndarray:
    r"""Angles :math:`\theta\in(-\pi/2,\pi/2]` of the rank-one stationary lines of softmax attention in d = 2.

    For :math:`V` invertible they are :math:`s\,uu^\top` with :math:`u^\top Au=0`, :math:`u=(\cos\theta,\sin\theta)`:
    two lines when :math:`A+A^\top` is indefinite, none when it is definite.

    Parameters
    ----------
    layer : Attention
        Single-head softmax layer in d = 2; only its :math:`A` is used.

    Returns
    -------
    array (k,)
        The angles, increasing (a singular :math:`A+A^\top`: a double root, or :math:`\pi/2` once if
        :math:`A_{22}=0`).

    %(refs_rank_one)s
    """
    layer = _softmax_single(layer, "the stationary-line formula")
    if layer.d != 2:
        raise ValueError("stationary lines are computed in d = 2")
    A = layer.A[0]
    a, b, c = A[1, 1], A[0, 1] + A[1, 0], A[0, 0]  # a tan^2 + b tan + c = 0
    if abs(a) < 1e-15:
        return np.sort(np.array([np.pi / 2] + ([math.atan(-c / b)] if abs(b) > 1e-15 else [])))
    disc = b * b - 4 * a * c
    if disc < 0:
        return np.array([])
    return np.sort(np.arctan([(-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)]))


@fill_doc(_DOC)
def one_dimensional_solution(mean0: float, var0: float, layer: Attention, t):
    r"""Exact solution of softmax attention in d = 1 (:math:`a=\beta A`, :math:`v=V`).

    .. math:: \sigma_t^2=\frac{\sigma_0^2}{1-2va\sigma_0^2t},\qquad \alpha_t=\alpha_0e^{vt}(1-2va\sigma_0^2t)^{-1/2},

    blowing up at :math:`T^*=1/(2va\sigma_0^2)` iff :math:`va>0` (a BlowUpError for a time at or after it).

    Parameters
    ----------
    mean0, var0 : float
        The initial mean :math:`\alpha_0` and variance :math:`\sigma_0^2\ge0`.
    layer : Attention
        Single-head softmax layer in d = 1.
    t : float or array
        The time(s), all before :math:`T^*`.

    Returns
    -------
    mean_t, var_t : float or array
        :math:`\alpha_t` and :math:`\sigma_t^2`, of the shape of ``t``.

    %(refs_tstar)s
    """
    layer = _softmax_single(layer, "the one-dimensional solution")
    if layer.d != 1:
        raise ValueError(f"the one-dimensional solution needs d = 1, got d = {layer.d}")
    a, v = layer.beta * float(layer.A[0, 0, 0]), float(layer.V[0, 0, 0])
    mean0 = validate_finite(mean0, "mean0")
    var0 = validate_positive(var0, "var0", allow_zero=True)
    ts, rate = validate_finite_array(t, "t"), 2.0 * v * a * var0
    _before_blowup(ts, 1.0 / rate if rate > 0 else math.inf, "the variance blows up")
    den = 1.0 - rate * ts
    if np.any(den <= 0):  # a negative time beyond the backward pole 1/rate < 0
        raise ValueError(f"t = {ts.min():.6g} lies before the backward pole t = 1/(2 v a var0) = {1.0 / rate:.6g}")
    return mean0 * np.exp(v * ts) / np.sqrt(den), var0 / den


@fill_doc(_DOC)
def decoupled_mean(mean0, layer: Attention, t):
    r"""Sinkhorn mean :math:`\alpha_t=e^{t\sum_hV_h}\alpha_0`, independent of :math:`\Sigma`.

    Parameters
    ----------
    mean0 : array (d,)
        The initial mean :math:`\alpha_0`.
    layer : Attention
        Sinkhorn layer, any number of heads (their value matrices are summed).
    t : float or array (m,)
        A time, or m times.

    Returns
    -------
    array (d,) or (m, d)
        :math:`\alpha_t`, one row per time for an array ``t``.

    %(refs_odes)s
    """
    _check_layer(layer)
    layer.kind.require("mean_decouples", "the decoupled mean")
    mean0 = validate_finite_array(mean0, "mean0", ndim=1)
    if mean0.shape != (layer.d,):
        raise ValueError(f"mean0 must have shape ({layer.d},), got {mean0.shape}")
    V = layer.V.sum(axis=0)
    out = np.array([expm(s * V) @ mean0 for s in np.atleast_1d(validate_finite_array(t, "t"))])
    return out[0] if np.ndim(t) == 0 else out


@fill_doc(_DOC)
def growth_rate(layer: Attention) -> float:
    r"""Rate :math:`c` of the bound :math:`\|\Sigma_t\|\le\|\Sigma_0\|e^{2ct}` (no finite-time blow-up).

    L2: :math:`c=\sum_h\|V_h\|\,\|K_h^\top Q_h\|/\lambda_{\min}(K_h^\top K_h)` (``inf`` unless every
    :math:`K_h^\top K_h\succ0`); Sinkhorn: :math:`c=\sum_h\|V_h\|`, since :math:`\|C\|\le\|\Sigma\|` (spectral norms).

    Parameters
    ----------
    layer : Attention
        A layer whose kind has a growth bound (L2, Sinkhorn; softmax and linear can blow up: a CapabilityError).

    Returns
    -------
    float
        :math:`c\ge0`, independent of :math:`\beta` and :math:`\varepsilon`.

    %(refs_tstar)s
    """
    _check_layer(layer)
    rate = layer.kind.require("growth_rate", "a global growth bound (softmax and linear attention can blow up)")
    return sum(rate(layer.head(h)) for h in range(layer.n_heads))


@fill_doc(_DOC)
def covariance_eigenvalues(cov) -> np.ndarray:
    """Eigenvalues of a covariance or a stack of them, in decreasing order.

    Parameters
    ----------
    cov : array (d, d) or (..., d, d)
        Finite square matrices; their symmetric part is used (no PSD check: round-off negatives stay).

    Returns
    -------
    array (..., d)
        The eigenvalues of each matrix, largest first.

    %(refs_odes)s
    """
    cov = validate_finite_array(cov, "cov", min_ndim=2)
    if cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"cov must be a square matrix or a stack (..., d, d), got shape {cov.shape}")
    return np.linalg.eigvalsh(_sym(cov))[..., ::-1]
