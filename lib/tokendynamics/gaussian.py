r"""Gaussian token distributions: the mean/covariance ODEs of paper 1, their closed forms, diagnostics.

For softmax, multi-head, L2, Sinkhorn (any :math:`\varepsilon`) and linear attention the
in-context field of a Gaussian :math:`\mu = N(\alpha,\Sigma)` is affine,

.. math:: \Gamma_{N(\alpha,\Sigma)}(x) = b + Mx ,

so the Transformer PDE started from a Gaussian stays Gaussian and reduces to the ODEs
(Castin et al., arXiv:2501.18322, Gaussian initial data; chapter 2 of the book, eq. (2.1))

.. math:: \dot\alpha = b + M\alpha,\qquad \dot\Sigma = M\Sigma + \Sigma M^\top .

Library convention (chapter 2 of the book, "Convention"): the score of query :math:`x` on key :math:`y` is
:math:`\beta\langle x, Ay\rangle`; paper 1 writes :math:`\langle A_1x,y\rangle`, so :math:`A_1=A^\top`.
Per head :math:`h` with value :math:`V_h` (Castin et al., arXiv:2501.18322, in library terms):

* softmax: :math:`b = V\alpha`, :math:`M = \beta V\Sigma A^\top`
  (exponential tilting: :math:`e^{\beta\langle x,Ay\rangle}N(\alpha,\Sigma)(dy)\propto N(\alpha+\beta\Sigma A^\top
  x,\Sigma)`);
* linear: :math:`b = 0`, :math:`M = \beta V(\Sigma+\alpha\alpha^\top)A^\top`;
* L2 (kernel :math:`e^{-\beta|Qx-Ky|^2}`): with :math:`N = (I+2\beta\Sigma K^\top K)^{-1}`,
  :math:`b = VN\alpha`, :math:`M = 2\beta VN\Sigma K^\top Q`;
* Sinkhorn: with :math:`B = (\beta/\varepsilon)A^\top`, :math:`H = \Sigma^{1/2}B^\top\Sigma B\Sigma^{1/2}`,
  :math:`X = 2(I+(I+4H)^{1/2})^{-1}` and :math:`C^\top = \Sigma B\Sigma^{1/2}X\Sigma^{1/2}` (the
  cross-covariance of the entropic self-plan), :math:`\mathbb E_\pi[y|x] = \alpha + C^\top\Sigma^{+}(x-\alpha)`,
  so :math:`M = VC^\top\Sigma^+`, :math:`M\Sigma = VC^\top`, :math:`b + M\alpha = V\alpha`;
* several heads add their :math:`(b, M)`.

Unnormalised softmax and sigmoid attention do not preserve Gaussians (their field is not affine,
chapter 2 of the book); :func:`gaussian_velocity` refuses them with :class:`NotGaussianPreservingError`.

Two solvers (:func:`solve_gaussian`):

* ``mode="accurate"``: ``scipy.integrate.solve_ivp`` on :math:`(\alpha,\Phi)` with
  :math:`\Sigma_t=\Phi_t\Sigma_0\Phi_t^\top`, :math:`\dot\Phi = M\Phi`, :math:`\Phi_0 = I` — the
  covariance is symmetric PSD by construction and keeps the rank of :math:`\Sigma_0` — and a
  terminal event :math:`\operatorname{tr}\Sigma = ` ``blowup_trace`` that reports the blow-up time;
* ``mode="faithful"``: the official code's projected Euler scheme
  :math:`\Sigma\leftarrow\Pi_{\succeq0}(\Sigma+h\,\dot\Sigma)` with its stopping rules
  (:func:`projected_euler`, vectorised over a batch of initial covariances), to regenerate the
  paper's pictures.

Closed forms derived for chapter 2 of the book (:func:`isotropic_covariance`, :func:`blowup_time`,
:func:`rank_one_velocity`, :func:`clustering_limit`, :func:`one_dimensional_solution`, ...), the
moments and quadrature of a Gaussian (:func:`empirical_moments`, :func:`gauss_hermite`) and
diagnostics (eigenvalues, numerical rank) complete the module. The chapter's studies (particles
against the ODEs, the clustering-condition search, the cone picture) are in
:mod:`tokendynamics.book.studies.gaussian`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.linalg import expm, fractional_matrix_power

from .attention import Attention, LayerLike, layer_at
from .docstrings import fill_doc
from .errors import BlowUpError, CapabilityError, NonFiniteError
from .kinds import KINDS
from .odes import Geometry, adaptive_solve, dormand_prince_batch, fixed_step, solve_ode
from .transport import psd_sqrt
from .validation import (
    SOLVERS,
    parse_span,
    real_array,
    time_grid,
    validate_choice,
    validate_count,
    validate_covariance,
    validate_finite,
    validate_finite_array,
    validate_flag,
    validate_gaussian,
    validate_positive,
    validate_weights,
)

__all__ = [
    "GAUSSIAN_KINDS",
    "NotGaussianPreservingError",
    "gaussian_velocity",
    "gaussian_rhs",
    "GaussianTrajectory",
    "solve_gaussian",
    "BATCH_KINDS",
    "CovarianceBatch",
    "solve_covariance_batch",
    "EulerRuns",
    "projected_euler",
    "empirical_moments",
    "gauss_hermite",
    "isotropic_covariance",
    "blowup_time",
    "isotropic_mean",
    "clustering_limit",
    "rank_one_velocity",
    "solve_rank_one",
    "rank_one_stationary_angles",
    "one_dimensional_solution",
    "decoupled_mean",
    "growth_rate",
    "covariance_eigenvalues",
    "numerical_rank",
]

#: Built-in attention kinds whose field is affine on Gaussians (any number of heads): those with the
#: ``gaussian`` capability (:mod:`tokendynamics.kinds`).
GAUSSIAN_KINDS = tuple(name for name, k in KINDS.items() if k.has("gaussian"))

_PAPER1 = "Paper 1 (Castin et al., arXiv:2501.18322)"
_CHAPTER2 = "book: ``chapters/02_gaussian_preservation.md``"

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    # the Gaussian N(mean, cov) and the layer whose affine field acts on it
    "gaussian_state": r"""
        mean : array (d,)
            The mean :math:`\alpha` of the Gaussian.
        cov : array (d, d)
            Its covariance :math:`\Sigma`: symmetric positive semi-definite (singular allowed).
        layer : Attention
            The same layer object the particle core uses; its kind one of :data:`GAUSSIAN_KINDS`, not causal.
    """,
    # what the affine field refuses (gaussian_velocity, gaussian_rhs)
    "raises_state": """
        Raises
        ------
        NotGaussianPreservingError
            For unnormalised softmax, sigmoid and causal layers.
        ValueError
            Wrong shapes, non-finite or non-PSD covariance.
    """,
    # the stopping rules of the official projected Euler scheme (projected_euler, solve_gaussian's faithful mode)
    "euler_stops": r"""
        tol_low : float
            Projected Euler: a run stops as converged at the first iterate where
            :math:`\|\dot\Sigma\|_F <` ``tol_low`` (official value ``1e-5``; ``0`` never stops it).
        tol_high : float
            Projected Euler: a run stops as a blow-up when the trace of the next iterate exceeds
            ``tol_high`` (official value ``1e3``; ``inf`` disables the rule).
        max_iter : int
            Projected Euler: number of iterations after which a run that never stopped ends with
            status ``"max_iter"`` (official value 50000).
    """,
    # the initial covariance of the closed forms of softmax with V = v I
    "cov0_closed_form": r"""
        cov0 : array (d, d)
            The initial covariance :math:`\Sigma_0`: symmetric positive semi-definite (singular allowed).
    """,
    # the times at which a closed form valid before the blow-up is evaluated
    "t_before_blowup": r"""
        t : float or array (m,)
            A time, or m times, at which to evaluate the closed form; every one must lie before the
            blow-up time :math:`T^*` of :func:`blowup_time` (``inf`` when there is none).
    """,
    "refs_odes": f"{_PAPER1}, Gaussian initial data;\n{_CHAPTER2}, equation (eq-gauss-odes).",
    "refs_tstar": f"""
        {_PAPER1}, Gaussian initial data;
        {_CHAPTER2}, section "Blow-up in finite time, or not",
        equation (eq-gauss-tstar), where the closed form is derived.
    """,
    # the rank-one invariant manifold and its stationary lines
    "refs_rank_one": f"""
        {_PAPER1}, Gaussian initial data;
        {_CHAPTER2}, section "Five behaviours in the cone" (convergence to two lines).
    """,
}


class NotGaussianPreservingError(CapabilityError):
    """The attention variant does not map Gaussians to Gaussians (its field is not affine)."""


# ---------------------------------------------------------------------------------------------
# the affine field on Gaussians (batched over leading axes)
# ---------------------------------------------------------------------------------------------


def _check_layer(layer: Attention) -> None:
    if not isinstance(layer, Attention):
        raise TypeError(f"layer must be an Attention, got {type(layer).__name__}")
    layer.kind.require(
        "gaussian",
        "layer: the Gaussian ODEs (a kind whose field on N(alpha, Sigma) is not affine has none, chapter 2)",
        error=NotGaussianPreservingError,
    )
    if layer.causal:
        raise NotGaussianPreservingError(
            "layer: masked (causal) attention preserves Gaussians only for position-independent data "
            "mu_0 = lambda x N(alpha, Sigma), and then the mask has no effect "
            "(Castin et al., arXiv:2501.18322, masked attention): "
            "use the same layer with causal=False"
        )


def _sym(S):
    return 0.5 * (S + np.swapaxes(S, -1, -2))


def _affine_field(mean, cov, layer: Attention):
    r"""(b, M, M Sigma) of the field on N(mean, cov), summed over heads (the kind's closure); batched over leading axes.

    ``M Sigma`` is returned separately because for Sinkhorn it has a closed form (:math:`VC^\top`) that
    needs no pseudo-inverse.
    """
    closure = layer.kind.require("gaussian", "the Gaussian ODEs", error=NotGaussianPreservingError)
    b, M, MS = np.zeros(mean.shape), np.zeros(cov.shape), np.zeros(cov.shape)
    for h in range(layer.n_heads):
        bh, Mh, MSh = closure(mean, cov, layer.head(h))
        b, M, MS = b + bh, M + Mh, MS + MSh
    return b, M, MS


def _validate_state(mean, cov, layer: Attention, names=("mean", "cov")):
    """The layer checked (:func:`_check_layer`) and the Gaussian (mean, cov) validated in its dimension."""
    _check_layer(layer)
    return validate_gaussian(mean, cov, layer.d, what="the layer has d", mean_name=names[0], name=names[1])


@fill_doc(_DOC)
def gaussian_velocity(mean, cov, layer: Attention):
    r"""The affine field of ``layer`` on :math:`N(\mathrm{mean},\mathrm{cov})`: :math:`\Gamma(x) = b + Mx`.

    Formulas (library convention :math:`\beta\langle x,Ay\rangle`; Castin et al., arXiv:2501.18322, with
    :math:`A_1=A^\top`), summed over heads: softmax :math:`b=V\alpha`, :math:`M=\beta V\Sigma A^\top`;
    linear :math:`b=0`, :math:`M=\beta V(\Sigma+\alpha\alpha^\top)A^\top`; L2
    :math:`b=V(I+2\beta\Sigma K^\top K)^{-1}\alpha`, :math:`M=2\beta V(I+2\beta\Sigma K^\top K)^{-1}\Sigma K^\top Q`;
    Sinkhorn :math:`M=VC^\top\Sigma^+`, :math:`b=V\alpha-M\alpha` (see the module docstring). For a
    singular :math:`\Sigma` only the action of :math:`M` on :math:`\alpha+\operatorname{range}\Sigma`
    (the support of the Gaussian) is meaningful.

    Parameters
    ----------
    %(gaussian_state)s

    Returns
    -------
    b : array (d,)
        The constant part of the field, summed over heads.
    M : array (d, d)
        Its linear part, summed over heads (not symmetric in general).

    %(raises_state)s

    References
    ----------
    %(refs_odes)s
    """
    mean, cov = _validate_state(mean, cov, layer)
    b, M, _ = _affine_field(mean, cov, layer)
    return b, M


@fill_doc(_DOC)
def gaussian_rhs(mean, cov, layer: Attention):
    r"""Right-hand side of the mean/covariance ODEs (chapter 2 of the book, eq. (2.1)): :math:`(\dot\alpha,\dot\Sigma)`.

    .. math:: \dot\alpha = b + M\alpha,\qquad \dot\Sigma = M\Sigma+\Sigma M^\top,

    with :math:`(b, M)` from :func:`gaussian_velocity`. E.g. softmax, one head:
    :math:`\dot\alpha = V(I+\beta\Sigma A^\top)\alpha`,
    :math:`\dot\Sigma = \beta(V\Sigma A^\top\Sigma + \Sigma A\Sigma V^\top)`; Sinkhorn:
    :math:`\dot\alpha = V\alpha` (the mean decouples), :math:`\dot\Sigma = VC^\top + CV^\top`.

    Parameters
    ----------
    %(gaussian_state)s

    Returns
    -------
    dmean : array (d,)
        :math:`\dot\alpha=b+M\alpha`, the velocity of the mean.
    dcov : array (d, d)
        :math:`\dot\Sigma=M\Sigma+\Sigma M^\top`, the velocity of the covariance; exactly symmetric.

    %(raises_state)s

    References
    ----------
    %(refs_odes)s
    """
    mean, cov = _validate_state(mean, cov, layer)
    return _rhs(mean, cov, layer)


def _rhs(mean, cov, layer):
    b, M, MS = _affine_field(mean, cov, layer)
    dmean = b + (M @ mean[..., :, None])[..., 0]
    return dmean, MS + np.swapaxes(MS, -1, -2)


# ---------------------------------------------------------------------------------------------
# trajectories and the accurate solver
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GaussianTrajectory:
    r"""A solution :math:`t\mapsto N(\alpha_t,\Sigma_t)` of the Gaussian ODEs.

    Attributes
    ----------
    t : array (m,)
        Stored times.
    mean : array (m, d)
    cov : array (m, d, d)
        Symmetric PSD covariances.
    layer : Attention or callable
    mode : str
        ``"accurate"`` or ``"faithful"``.
    status : str
        ``"completed"`` (reached the final time), ``"blowup"`` (trace threshold crossed),
        ``"converged"`` (faithful: :math:`\|\dot\Sigma\|_F <` ``tol_low``) or ``"max_iter"``.
    exit_time : float or None
        Time at which a stopping rule fired (blow-up event time in accurate mode; in faithful mode
        ``iterations * step``, the time of the last stored iterate, as in the official code).
    iterations : int or None
        Faithful mode: the official loop index at which it stopped.
    info : dict
        Solver details (``nfev``, tolerances, thresholds, the extrapolated blow-up time ...).
    """

    t: np.ndarray
    mean: np.ndarray
    cov: np.ndarray
    layer: LayerLike
    mode: str
    status: str = "completed"
    exit_time: float | None = None
    iterations: int | None = None
    info: dict = field(default_factory=dict)

    @property
    def final_mean(self) -> np.ndarray:
        """Mean at the last stored time, shape (d,)."""
        return self.mean[-1]

    @property
    def final_cov(self) -> np.ndarray:
        """Covariance at the last stored time, shape (d, d)."""
        return self.cov[-1]

    @property
    def blew_up(self) -> bool:
        """Whether the run ended at the blow-up threshold (``status == "blowup"``)."""
        return self.status == "blowup"

    @property
    def blowup_time(self) -> float | None:
        """Time of the blow-up event (None if there was none)."""
        return self.exit_time if self.status == "blowup" else None

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of every stored covariance (:func:`covariance_eigenvalues`).

        Returns
        -------
        array (m, d)
            In decreasing order at each of the m stored times.
        """
        return covariance_eigenvalues(self.cov)

    def trace(self) -> np.ndarray:
        r""":math:`\operatorname{tr}\Sigma_t` at every stored time.

        Returns
        -------
        array (m,)
            The trace, which the blow-up criterion of :func:`solve_gaussian` watches.
        """
        return np.trace(self.cov, axis1=-2, axis2=-1)

    def at(self, time: float):
        """The Gaussian at the stored time closest to ``time`` (no interpolation).

        Parameters
        ----------
        time : float
            A time in the run.

        Returns
        -------
        tuple of arrays (d,) and (d, d)
            ``(mean, cov)``.
        """
        k = int(np.argmin(np.abs(self.t - time)))
        return self.mean[k], self.cov[k]


def _layer_at(layer: LayerLike, t: float, d: int) -> Attention:
    """The layer at time t (constant or ``t -> Attention``), checked like the particle core's, and
    Gaussian-preserving."""
    lay = layer_at(layer, t, d)
    _check_layer(lay)
    return lay


#: The options of :func:`solve_gaussian` in each mode, with their defaults.
_SOLVE_OPTIONS: dict[str, dict[str, Any]] = {
    "accurate": {"method": "DOP853", "rtol": 1e-10, "atol": 1e-12, "blowup_trace": 1e8},
    "faithful": {"step": None, "tol_low": 1e-5, "tol_high": 1e3, "max_iter": 50_000, "save": "all"},
}


@fill_doc(_DOC)
def solve_gaussian(
    mean0,
    cov0,
    layer: LayerLike,
    t_span=None,
    *,
    mode: str = "accurate",
    t_eval=None,
    on_blowup: str = "stop",
    **options,
) -> GaussianTrajectory:
    r"""Solve the mean/covariance ODEs :math:`\dot\alpha=b+M\alpha`, :math:`\dot\Sigma=M\Sigma+\Sigma M^\top` (Castin et
    al., arXiv:2501.18322, Gaussian initial data).

    Parameters
    ----------
    mean0 : array (d,)
        The initial mean :math:`\alpha_0`. Never modified.
    cov0 : array (d, d)
        Symmetric PSD (singular allowed; the rank is kept in accurate mode). Never modified.
    layer : Attention or callable ``t -> Attention``
        Kind in :data:`GAUSSIAN_KINDS`; a callable gives depth-dependent parameters (accurate mode).
    t_span : float or (t0, T)
        Integration interval. Required in accurate mode; optional in faithful mode (then the
        official stopping rules alone end the run).
    mode : {"accurate", "faithful"}
        ``accurate``: the scipy solver ``method`` (``"DOP853"``, ``"RK45"``, ...; tolerances
        ``rtol``, ``atol``) stepped by :func:`~tokendynamics.odes.adaptive_solve` on
        :math:`(\alpha,\Phi)` with :math:`\Sigma=\Phi\Sigma_0\Phi^\top`, :math:`\dot\Phi=M\Phi`
        (symmetric PSD by construction), stopped where :math:`\operatorname{tr}\Sigma` reaches
        ``blowup_trace``.
        ``faithful``: the official projected Euler scheme (:func:`projected_euler`) with ``step``,
        ``tol_low``, ``tol_high``, ``max_iter`` (the official defaults are ``step=0.01``,
        ``tol_low=1e-5``, ``tol_high=1e3``, ``max_iter=50000``).
    t_eval : array, optional
        Accurate mode: output times (default: every accepted solver step). The blow-up time is
        appended when the run stops at a blow-up.
    **options
        The options of the mode (the two sets do not overlap; an option of the other mode is refused):
        accurate ``method``, ``rtol``, ``atol``, ``blowup_trace``; faithful ``step``, ``tol_low``,
        ``tol_high``, ``max_iter``, ``save``. Each is described below.
    method : str
        Accurate mode: the ``scipy.integrate`` solver, one of ``"RK45", "RK23", "DOP853", "Radau",
        "BDF", "LSODA"`` (default ``"DOP853"``).
    rtol, atol : float
        Accurate mode: relative and absolute tolerances of that solver on the state :math:`(\alpha,\Phi)`.
    blowup_trace : float
        Accurate mode: trace at which the run stops as a blow-up. The reported ``exit_time`` is
        the time the solver reached, never an output time: the crossing of ``blowup_trace``
        located on the dense output of the step, or, if the solver cannot continue (near a
        singularity, with a huge ``blowup_trace``), its last accepted step;
        ``info["blowup_time_extrapolated"]`` adds :math:`\operatorname{tr}\Sigma/\frac{d}{dt}\operatorname{tr}\Sigma`,
        exact for a simple pole :math:`\Sigma\sim S/(T^*-t)` (softmax blow-up, chapter 2 of the book).
    on_blowup : {"stop", "raise"}
        Return the trajectory up to the blow-up (``status="blowup"``), or raise
        :class:`~tokendynamics.errors.BlowUpError` with the time.
    step : float, optional
        Faithful mode, where it is required: the Euler step :math:`h` (the official value is
        ``0.01``). The accurate mode refuses it (a ValueError) rather than ignore it.
    %(euler_stops)s
    save : {"all", "log", "final"} or int
        Faithful mode: which iterates to keep (see :func:`projected_euler`).

    Returns
    -------
    GaussianTrajectory
        Times, means and covariances (symmetric PSD) of the solution, the ``status`` that ended it
        (``"completed"``, ``"blowup"``, and in faithful mode ``"converged"`` or ``"max_iter"``), the
        exit time and the solver details in ``info``.

    References
    ----------
    %(refs_odes)s
    The faithful mode is the projected Euler scheme of the authors' code (vcastin/2025-transformers-PDEs).
    """
    mode = validate_choice(mode, "mode", ("accurate", "faithful"))
    on_blowup = validate_choice(on_blowup, "on_blowup", ("stop", "raise"))
    allowed = _SOLVE_OPTIONS[mode]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        other = "faithful" if mode == "accurate" else "accurate"
        hint = f" ({', '.join(k for k in unknown if k in _SOLVE_OPTIONS[other])} belong to mode={other!r})"
        raise ValueError(
            f"solve_gaussian(mode={mode!r}) got unknown option(s) {unknown}"
            + (hint if any(k in _SOLVE_OPTIONS[other] for k in unknown) else "")
            + f"; its options are {sorted(allowed)}"
        )
    o = {**allowed, **options}

    if mode == "faithful":
        if not isinstance(layer, Attention):
            raise TypeError("layer must be a constant Attention in faithful mode (the official scheme)")
        mean0, cov0 = _validate_state(mean0, cov0, layer, ("mean0", "cov0"))
        if o["step"] is None:
            raise ValueError("faithful mode needs the Euler step `step` (the official default is 0.01)")
        step = validate_positive(o["step"], "step")
        tol_low, tol_high, max_iter = o["tol_low"], o["tol_high"], o["max_iter"]
        if t_eval is not None:
            raise ValueError("t_eval is used by the accurate mode; faithful mode stores its iterates (see save)")
        t_max = None
        t0 = 0.0
        if t_span is not None:
            t0, T = parse_span(t_span)
            t_max = T - t0
        # a zero mean stays zero for every kind (b and M alpha vanish): then only Sigma is integrated
        runs = projected_euler(
            cov0,
            layer,
            step=step,
            mean0=mean0 if np.any(mean0) else None,
            tol_low=tol_low,
            tol_high=tol_high,
            max_iter=max_iter,
            save=o["save"],
            t_max=t_max,
        )
        it, covs, means = runs.trajectory(0)
        status = str(runs.status[0])
        if status == "blowup" and on_blowup == "raise":
            raise BlowUpError(
                runs.exit_time[0] + step,
                runs.exit_time[0],
                f"trace exceeded tol_high = {tol_high:g} (projected Euler, step {step:g})",
            )
        return GaussianTrajectory(
            t=t0 + it * step,
            mean=means,
            cov=covs,
            layer=layer,
            mode="faithful",
            status=status,
            exit_time=t0 + float(runs.exit_time[0]),
            iterations=int(runs.iterations[0]),
            info={
                "step": step,
                "tol_low": tol_low,
                "tol_high": tol_high,
                "max_iter": max_iter,
                "rhs_norm": float(runs.rhs_norm[0]),
                "cov_after": runs.cov_after[0],
            },
        )

    if t_span is None:
        raise ValueError("accurate mode needs t_span (T or (t0, T))")
    t0, T = parse_span(t_span)
    blowup_trace = validate_positive(o["blowup_trace"], "blowup_trace", allow_inf=True)
    method = validate_choice(o["method"], "method", SOLVERS)
    rtol, atol = validate_positive(o["rtol"], "rtol"), validate_positive(o["atol"], "atol")
    if t_eval is not None:
        _, _, t_eval = time_grid((t0, T), t_eval)
    first = _layer_at(layer, t0, np.atleast_1d(real_array(mean0, "mean0")).shape[0])
    mean0, cov0 = _validate_state(mean0, cov0, first, ("mean0", "cov0"))
    d = first.d
    if np.trace(cov0) >= blowup_trace:
        raise ValueError(f"tr cov0 = {np.trace(cov0):.3g} is already above blowup_trace = {blowup_trace:.3g}")
    S0 = cov0.copy()

    def unpack(y):
        return y[:d], y[d:].reshape(d, d)

    def fun(t, y):
        m, Phi = unpack(y)
        S = Phi @ S0 @ Phi.T
        b, M, _ = _affine_field(m, _sym(S), _layer_at(layer, t, d))
        out = np.concatenate([b + M @ m, (M @ Phi).ravel()])
        if not np.all(np.isfinite(out)):
            raise NonFiniteError(f"the Gaussian ODE right-hand side became non-finite at t = {t:.6g}")
        return out

    def trace(y):
        _, Phi = unpack(y)
        return float(np.einsum("ij,jk,ik->", Phi, S0, Phi))

    y0 = np.concatenate([mean0, np.eye(d).ravel()])
    run = adaptive_solve(
        fun, (t0, T), y0, t_eval, solver=method, rtol=rtol, atol=atol, size=trace, threshold=blowup_trace
    )
    ts, ys = run.t, run.y
    status, exit_time, info = (
        "completed",
        None,
        {"nfev": run.nfev, "method": method, "rtol": rtol, "atol": atol, "blowup_trace": blowup_trace},
    )
    if run.status != "completed":
        # the time the solver reached: the crossing of blowup_trace located on the dense output of
        # the step, or the last accepted step if the solver could not continue (never an output time)
        exit_time = run.time
        y_ev = run.y_stop
        keep = ts < exit_time
        ts = np.append(ts[keep], exit_time)
        ys = np.vstack([ys[keep], y_ev[None]])
        m_ev, Phi_ev = unpack(y_ev)
        S_ev = Phi_ev @ S0 @ Phi_ev.T
        with np.errstate(all="ignore"):
            _, dS = _rhs(m_ev, _sym(S_ev), _layer_at(layer, exit_time, d))
            tr_rate = float(np.trace(dS))
        if tr_rate > 0 and np.isfinite(tr_rate):
            info["blowup_time_extrapolated"] = exit_time + float(np.trace(S_ev) / tr_rate)
        status = "blowup"
        what = (
            f"tr Sigma reached blowup_trace = {blowup_trace:.3g}"
            if run.status == "threshold"
            else f"tr Sigma = {np.trace(S_ev):.3g} when {run.reason}"
        )
        info["blowup_reason"] = what
        if on_blowup == "raise":
            extra = info.get("blowup_time_extrapolated")
            raise BlowUpError(
                exit_time,
                run.last_good,
                what + ("" if extra is None else f" (extrapolated pole at t = {extra:.6g})"),
            )
    means = ys[:, :d]
    Phis = ys[:, d:].reshape(-1, d, d)
    covs = _sym(Phis @ S0 @ np.swapaxes(Phis, -1, -2))
    return GaussianTrajectory(
        t=ts, mean=means, cov=covs, layer=layer, mode="accurate", status=status, exit_time=exit_time, info=info
    )


# ---------------------------------------------------------------------------------------------
# the accurate solver for a batch of covariance equations (one layer per member)
# ---------------------------------------------------------------------------------------------

#: Built-in kinds whose covariance equation does not involve the mean (the ``covariance`` capability:
#: :math:`M=\sum_hV_h(I+\Sigma G_h)^{-1}\Sigma C_h`, no pseudo-inverse).
BATCH_KINDS = tuple(name for name, k in KINDS.items() if k.has("covariance"))


@dataclass(frozen=True, eq=False)
class CovarianceBatch:
    r"""Result of :func:`solve_covariance_batch`: B covariance equations integrated together.

    Attributes
    ----------
    status : array (B,) of str
        ``"completed"`` (reached ``T``) or ``"blowup"`` (the trace reached ``blowup_trace``).
    blowup_time : array (B,)
        Time at which :math:`\operatorname{tr}\Sigma_t` reached ``blowup_trace`` (``nan`` without a blow-up).
    pole_time : array (B,)
        For a blow-up, :math:`t+\operatorname{tr}\Sigma_t/\frac{d}{dt}\operatorname{tr}\Sigma_t` at the
        crossing: the exact blow-up time if :math:`\Sigma_t\sim S/(T^*-t)` (a simple pole); ``nan`` otherwise.
    crossing_times : array (B, L)
        First time at which the trace reached each of ``trace_levels`` (``nan`` if never),
        interpolated linearly in :math:`\log\operatorname{tr}\Sigma` within the step that crossed it
        (an error of order the step squared; exact for exponential growth).
    cov_last : array (B, d, d)
        The covariance at the end (at ``T``, or at the blow-up crossing).
    t_end : array (B,)
        Time of ``cov_last``.
    t_eval : array (m,)
    cov : array (B, m, d, d)
        The covariances at ``t_eval`` (``nan`` after a member stopped).
    steps : array (B,) of int
        Accepted steps per member (explicit steps plus, for a stiff member, the LSODA steps).
    trace_levels : tuple of float
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


def _as_stack(layers) -> Attention:
    stack = layers if isinstance(layers, Attention) and layers.batch_size is not None else Attention.stack(layers)
    stack.kind.require("covariance", "the batched covariance solver (use solve_gaussian member by member)")
    return stack


def _field_matrix_batch(cov, stack: Attention, idx) -> np.ndarray:
    r""":math:`M=\sum_hV_h(I+\Sigma G_h)^{-1}\Sigma C_h` of the affine field on :math:`N(\alpha,\Sigma_b)` for the
    members ``idx`` of a batch of layers (the kind's ``covariance`` factors), shape (b, d, d)."""
    sub = stack.take(idx)
    factors = sub.kind.require("covariance", "the batched covariance solver")
    M = np.zeros(cov.shape)
    for h in range(sub.n_heads):
        head = sub.head(h)
        G, C = factors(head)
        right = cov @ C if G is None else np.linalg.solve(np.eye(cov.shape[-1]) + cov @ G, cov @ C)
        M += head.V @ right
    return M


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
    first_step: float | None = None,
) -> CovarianceBatch:
    r"""Accurate solutions of B covariance equations at once, each with its own layer, with blow-up times.

    Member :math:`b` solves :math:`\dot\Sigma=M_b\Sigma+\Sigma M_b^\top` on :math:`[0,T]` through
    :math:`\Sigma_t=\Phi_t\Sigma_0\Phi_t^\top`, :math:`\dot\Phi=M_b(\Sigma_t)\Phi`, :math:`\Phi_0=I`
    (symmetric positive semi-definite by construction, as in :func:`solve_gaussian`), where
    :math:`M_b` is the matrix of the affine field of layer :math:`b` on a centred Gaussian:
    softmax :math:`M=\sum_h\beta V_h\Sigma A_h^\top`, L2
    :math:`M=\sum_h2\beta V_h(I+2\beta\Sigma K_h^\top K_h)^{-1}\Sigma K_h^\top Q_h`. For these kinds the
    covariance equation does not involve the mean, so the mean is not integrated.

    The integrator is the Dormand–Prince 5(4) pair of ``scipy.integrate.RK45`` with the same error
    norm (root mean square of the error over :math:`(1+\texttt{rtol}\,|y|/\texttt{atol})`-scaled
    entries of :math:`\Phi`) and step control, each member with its own step size: one call of the
    field per stage for the whole batch instead of a Python loop over :func:`solve_gaussian`, which
    it matches to the tolerance (tested). A member stops when its trace reaches ``blowup_trace``:
    the crossing time is interpolated in :math:`\log\operatorname{tr}\Sigma` within the last step, and
    ``pole_time`` adds :math:`\operatorname{tr}\Sigma/\frac{d}{dt}\operatorname{tr}\Sigma`, the remaining time of a
    simple pole :math:`\Sigma\sim S/(T^*-t)`. The first crossings of ``trace_levels`` tell a pole
    (the crossings of :math:`10^3, 10^6, 10^9` bunch up, the gaps shrinking by :math:`10^{-3}`) from
    exponential growth (evenly spaced crossings).

    Parameters
    ----------
    cov0 : array (d, d) or (B, d, d)
        Initial covariances (one for all members, or one each). Never modified.
    layers : Attention (a batch of layers) or sequence of Attention
        One layer per member, all of kind ``"softmax"`` or all ``"l2"`` (:data:`BATCH_KINDS`), any
        number of heads.
    T : float
        Final time.
    t_eval : array (m,), optional
        Increasing times in :math:`[0,T]` at which to store the covariances (steps land on them).
    rtol, atol : float
        Tolerances of the error control.
    blowup_trace : float
        Trace at which a member counts as blown up and stops.
    trace_levels : sequence of float
        Traces whose first crossing times are recorded (below ``blowup_trace``).
    max_steps : int
        Explicit steps after which a member counts as stiff (typically a large covariance
        collapsing onto rank one, whose fast transverse rate forces tiny explicit steps) and is
        finished alone by :func:`solve_gaussian` with ``method="LSODA"`` (same tolerances and event).
    first_step : float, optional
        Initial step (default :math:`10^{-2}/(1+\|\dot\Sigma_0\|_F)`, at most :math:`T/10`).

    Returns
    -------
    CovarianceBatch
        Per member: status, blow-up and pole times, trace-level crossing times, the last covariance
        and, if ``t_eval`` was given, the stored covariances.

    References
    ----------
    Castin, Ablin, Carrillo, Peyré, *A Unified Perspective on the Dynamics of Deep Transformers*,
    arXiv 2501.18322 (the Gaussian ODEs); the book's chapter "Gaussian tokens: clustering and blow-up".
    """
    stack = _as_stack(layers)
    B, d = len(stack), stack.d
    T = validate_positive(T, "T")
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    blowup_trace = validate_positive(blowup_trace, "blowup_trace", allow_inf=True)
    max_steps = validate_count(max_steps, "max_steps")
    if first_step is not None:
        first_step = validate_positive(first_step, "first_step")
    C0 = np.array(real_array(cov0, "cov0"), dtype=float, copy=True)
    if C0.shape == (d, d):
        C0 = np.broadcast_to(C0, (B, d, d)).copy()
    if C0.shape != (B, d, d):
        raise ValueError(f"cov0 must be ({d}, {d}) or ({B}, {d}, {d}) for {B} layers of dimension {d}, got {C0.shape}")
    for k in range(B):
        C0[k] = validate_covariance(C0[k], f"cov0[{k}]", d)
    tr0 = np.trace(C0, axis1=1, axis2=2)
    if np.any(tr0 >= blowup_trace):
        raise ValueError("some initial trace is already above blowup_trace")
    levels = tuple(
        validate_positive(x, "trace_levels") for x in np.atleast_1d(real_array(trace_levels, "trace_levels"))
    )
    t_eval = np.zeros(0) if t_eval is None else time_grid((0.0, T), t_eval)[2]

    def covs(Phi, idx):
        return _sym(Phi @ C0[idx] @ np.swapaxes(Phi, -1, -2))

    blowup_time = np.full(B, np.nan)
    pole_time = np.full(B, np.nan)
    crossing = np.full((B, len(levels)), np.nan)
    for k, lev in enumerate(levels):
        crossing[tr0 >= lev, k] = 0.0
    tr_prev = tr0.copy()

    def on_step(acc, t_old, t_new, Phi_new):
        """Trace crossings (interpolated in log trace within the step) and blow-ups of the accepted systems."""
        S_new = covs(Phi_new, acc)
        tr_new = np.trace(S_new, axis1=1, axis2=2)
        for k, lev in enumerate(levels):
            hit = np.isnan(crossing[acc, k]) & (tr_new >= lev)
            a = acc[hit]
            frac = np.log(lev / tr_prev[a]) / np.log(tr_new[hit] / tr_prev[a])
            crossing[a, k] = t_old[hit] + frac * (t_new[hit] - t_old[hit])
        blow = tr_new >= blowup_trace
        if np.any(blow):
            a = acc[blow]
            frac = np.log(blowup_trace / tr_prev[a]) / np.log(tr_new[blow] / tr_prev[a])
            blowup_time[a] = t_old[blow] + frac * (t_new[blow] - t_old[blow])
            dtr = 2.0 * np.einsum("bij,bji->b", _field_matrix_batch(S_new[blow], stack, a), S_new[blow])
            pole_time[a] = t_new[blow] + tr_new[blow] / dtr
        tr_prev[acc] = tr_new
        return blow

    run = dormand_prince_batch(
        lambda Phi, idx: _field_matrix_batch(covs(Phi, idx), stack, idx) @ Phi,
        np.broadcast_to(np.eye(d), (B, d, d)),
        T,
        rtol=rtol,
        atol=atol,
        t_eval=t_eval,
        first_step=first_step,
        max_steps=max_steps,
        on_step=on_step,
    )
    status = np.where(run.status == "stopped", "blowup", "completed").astype(object)
    steps = np.array(run.reason, dtype=int)
    t_end, cov_last = run.time.copy(), covs(run.y_stop, np.arange(B))
    stored = np.full((B, t_eval.size, d, d), np.nan)
    Phis = np.swapaxes(run.y, 0, 1)  # (B, m, d, d)
    ok = np.isfinite(Phis[..., 0, 0])  # the stored states (NaN after a member stopped)
    stored[ok] = covs(Phis[ok], np.nonzero(ok)[0])
    for b in np.flatnonzero(run.status == "stiff"):
        # stiff member (e.g. a large covariance collapsing onto rank one): finish it with LSODA
        S_b = cov_last[b]
        lay = stack.member(int(b))
        kw: dict[str, Any] = dict(method="LSODA", rtol=rtol, atol=atol, blowup_trace=blowup_trace)
        tb = float(run.time[b])
        sol = solve_gaussian(np.zeros(d), S_b, lay, (tb, T), **kw)
        steps[b] += len(sol.t)
        trs = np.concatenate([[tr_prev[b]], sol.trace()[1:]])
        tts = np.concatenate([[tb], sol.t[1:]])
        for k, lev in enumerate(levels):
            if np.isnan(crossing[b, k]) and np.any(trs >= lev):
                j = int(np.argmax(trs >= lev))
                frac = np.log(lev / trs[j - 1]) / np.log(trs[j] / trs[j - 1])
                crossing[b, k] = tts[j - 1] + frac * (tts[j] - tts[j - 1])
        rest = t_eval[t_eval > tb]
        if rest.size:
            dense = solve_gaussian(np.zeros(d), S_b, lay, (tb, T), t_eval=rest, **kw)
            outs = dense.cov[:-1] if dense.status == "blowup" else dense.cov
            first = t_eval.size - rest.size
            stored[b, first : first + len(outs)] = outs
        cov_last[b], t_end[b] = sol.cov[-1], sol.t[-1]
        if sol.status == "blowup":
            status[b] = "blowup"
            blowup_time[b] = sol.exit_time
            pole_time[b] = sol.info.get("blowup_time_extrapolated", np.nan)
    return CovarianceBatch(
        status=status.astype(str),
        blowup_time=blowup_time,
        pole_time=pole_time,
        crossing_times=crossing,
        cov_last=cov_last,
        t_end=t_end,
        t_eval=t_eval,
        cov=stored,
        steps=steps,
        trace_levels=levels,
    )


# ---------------------------------------------------------------------------------------------
# the official projected Euler scheme, vectorised over a batch of initial covariances
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EulerRuns:
    r"""Result of :func:`projected_euler` for a batch of B initial covariances.

    Attributes
    ----------
    status : array (B,) of str
        ``"converged"``, ``"blowup"``, ``"max_iter"`` or ``"completed"`` (``t_max`` reached).
    iterations : array (B,) of int
        Official loop index ``i`` at the stop (``max_iter`` if the loop ran out).
    exit_time : array (B,)
        ``iterations * step``.
    cov_last : array (B, d, d)
        The last stored iterate (the official ``S_list[-1]``, before the final update).
    cov_after : array (B, d, d)
        The iterate after the final update (for a blow-up: the one above ``tol_high``).
    mean_last : array (B, d)
    rhs_norm : array (B,)
        :math:`\|\dot\Sigma\|_F` at ``cov_last``.
    saved_iterations, saved_cov, saved_mean : lists of arrays
        Per member, the stored iteration indices and iterates.
    step : float
    """

    status: np.ndarray
    iterations: np.ndarray
    exit_time: np.ndarray
    cov_last: np.ndarray
    cov_after: np.ndarray
    mean_last: np.ndarray
    rhs_norm: np.ndarray
    saved_iterations: list
    saved_cov: list
    saved_mean: list
    step: float

    def trajectory(self, k: int):
        """The stored iterates of member k.

        Parameters
        ----------
        k : int
            Which initial condition (0 to ``len(self) - 1``).

        Returns
        -------
        tuple
            ``(iterations, covariances, means)``: the indices of the stored Euler iterations and the
            covariances and means there.
        """
        return self.saved_iterations[k], self.saved_cov[k], self.saved_mean[k]

    def __len__(self) -> int:
        return len(self.status)


def _project_psd(S, floor: float = 1e-14):
    """Official projection: negative eigenvalues replaced by ``floor``; only where one is negative."""
    d = S.shape[-1]
    if d == 2:
        a, b, c = S[:, 0, 0], S[:, 1, 1], 0.5 * (S[:, 0, 1] + S[:, 1, 0])
        lam_min = 0.5 * (a + b) - np.sqrt(0.25 * (a - b) ** 2 + c * c)
    else:
        lam_min = np.linalg.eigvalsh(S)[:, 0]
    bad = lam_min < 0
    if np.any(bad):
        lam, U = np.linalg.eigh(S[bad])
        lam = np.where(lam < 0, floor, lam)
        S = S.copy()
        S[bad] = (U * lam[:, None, :]) @ np.swapaxes(U, -1, -2)
    return S


def _save_mask(save, max_iter: int) -> np.ndarray:
    """Boolean mask over the iterations 0..max_iter-1 of the iterates to store."""
    mask = np.zeros(max_iter, dtype=bool)
    if isinstance(save, str):
        if save == "all":
            mask[:] = True
        elif save == "log":
            mask[:50] = True
            x = 50.0
            while x < max_iter:
                mask[int(x)] = True
                x *= 1.02
        elif save != "final":
            raise ValueError(f"save must be 'all', 'log', 'final' or a positive integer, got {save!r}")
        return mask
    if int(save) != save or save < 1:
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
    psd_floor: float = 1e-14,
    backend: str = "auto",
) -> EulerRuns:
    r"""The official code's projected Euler scheme for the covariance ODE, for a batch of initial covariances.

    Loop ``i = 0, 1, ..., max_iter - 1`` (the authors' code, vcastin/2025-transformers-PDEs): store :math:`\Sigma_i`;
    compute :math:`R=\dot\Sigma(\Sigma_i)` and :math:`r_i=\|R\|_F`; update
    :math:`\Sigma_{i+1}=\Pi_{\succeq0}(\Sigma_i+hR)`, where :math:`\Pi_{\succeq0}` replaces negative
    eigenvalues by ``psd_floor``; stop as *converged* if :math:`r_i<` ``tol_low``, else as *blow-up*
    if :math:`\operatorname{tr}\Sigma_{i+1}>` ``tol_high``. A member that never stops reports
    ``status="max_iter"``. The mean (never simulated by the official code; zero there) is moved by
    plain Euler when ``mean0`` is given, which matters only for linear attention.

    Differences from the official code that do not change the scheme: the input is never
    modified, the projection is skipped when no eigenvalue is negative (it is the identity there),
    and members are advanced together (numpy: einsum on stacks, batched ``eigh`` only where
    needed) or each by a compiled loop (numba, ``tokendynamics._gaussian_kernels``).

    Parameters
    ----------
    cov0 : array (d, d) or (B, d, d)
        One initial covariance, or a batch of B of them (each symmetric positive semi-definite),
        each integrated as its own member. Never modified.
    layer : Attention
        Kind in :data:`GAUSSIAN_KINDS` (the official scalings are built by
        :func:`tokendynamics.book.gaussian_figures.official_layer`).
    step : float
        Euler step :math:`h`.
    mean0 : array (d,) or (B, d), optional
        Initial mean (one for every member, or one each), moved by plain Euler alongside the
        covariance; ``None`` (default) keeps every mean at zero, as the official code does.
    %(euler_stops)s
    save : {"log", "all", "final"} or int
        Iterates to keep per member: ``"all"`` (the official ``S_list``), every k-th, ``"log"``
        (iterations 0–49 then about 116 per decade), or only the last; the last stored iterate
        is always kept.
    t_max : float, optional
        Also stop (``status="completed"``) at iteration ``ceil(t_max / step)``.
    psd_floor : float
        The value, at least 0, that the projection :math:`\Pi_{\succeq0}` puts in place of the
        negative eigenvalues (the official code's ``1e-14``).
    backend : {"auto", "numpy", "numba"}
        ``auto`` uses the compiled loop for softmax (any heads) and single-head L2 when numba is
        installed and no ``mean0`` is given; numpy otherwise.

    Returns
    -------
    EulerRuns
        Per member: the status and iteration at which it stopped, the last stored and the final
        iterates, :math:`\|\dot\Sigma\|_F` there, and the stored iteration indices, covariances and means.

    References
    ----------
    %(refs_odes)s
    The scheme, its steps and stopping rules are those of the authors' code (vcastin/2025-transformers-PDEs);
    the book's section "Five behaviours in the cone" regenerates the paper's cone figures with it.
    """
    _check_layer(layer)
    step = validate_positive(step, "step")
    max_iter = validate_count(max_iter, "max_iter")
    tol_low = validate_positive(tol_low, "tol_low", allow_zero=True)  # 0: never stop as converged
    tol_high = validate_positive(tol_high, "tol_high", allow_inf=True)  # inf: no blow-up threshold
    psd_floor = validate_positive(psd_floor, "psd_floor", allow_zero=True)
    validate_choice(backend, "backend", ("auto", "numpy", "numba"))
    d = layer.d
    C = np.array(real_array(cov0, "cov0"), copy=True)
    if C.ndim == 2:
        C = C[None]
    if C.ndim != 3 or C.shape[1:] != (d, d):
        raise ValueError(f"cov0 must be ({d}, {d}) or (B, {d}, {d}), got shape {np.shape(cov0)}")
    for k in range(C.shape[0]):
        C[k] = validate_covariance(C[k], f"cov0[{k}]", d)
    B = C.shape[0]
    mask = _save_mask(save, max_iter)

    from . import _gaussian_kernels as kernels

    # t_max: the last iteration is i_stop = ceil(t_max / step); members still running there are "completed"
    limited = False
    last_allowed = max_iter
    if t_max is not None:
        t_max = validate_positive(t_max, "t_max")
        i_stop = int(math.ceil(t_max / step - 1e-9))
        if i_stop + 1 <= max_iter:
            limited, last_allowed = True, i_stop + 1
    compiled_ok = kernels.HAVE_NUMBA and kernels.supports(layer) and mean0 is None
    if backend == "numba" and not compiled_ok:
        raise ValueError("backend='numba' needs numba, a softmax or single-head l2 layer, and no mean0")
    if backend != "numpy" and compiled_ok:
        res = kernels.euler_members(
            C,
            layer,
            step=step,
            tol_low=tol_low,
            tol_high=tol_high,
            max_iter=last_allowed,
            floor=psd_floor,
            save_mask=mask[:last_allowed],
        )
        status = np.array([r[0] for r in res], dtype=object)
        iterations = np.array([r[1] for r in res], dtype=int)
        if limited:
            cut = status == "max_iter"
            status[cut], iterations[cut] = "completed", last_allowed - 1
        return EulerRuns(
            status=status.astype(str),
            iterations=iterations,
            exit_time=iterations * step,
            cov_last=np.array([r[2] for r in res]),
            cov_after=np.array([r[3] for r in res]),
            mean_last=np.zeros((B, d)),
            rhs_norm=np.array([r[4] for r in res]),
            saved_iterations=[r[5].astype(int) for r in res],
            saved_cov=[r[6] for r in res],
            saved_mean=[np.zeros((len(r[5]), d)) for r in res],
            step=float(step),
        )
    return _projected_euler_numpy(
        C, layer, step, mean0, tol_low, tol_high, max_iter, mask, last_allowed, limited, psd_floor
    )


def _projected_euler_numpy(C, layer, step, mean0, tol_low, tol_high, max_iter, mask, last_allowed, limited, psd_floor):
    r"""The official scheme on the stepping layer: Euler on (mean, Sigma) with the PSD projection as retraction.

    The state of a member is (d + 1, d): the mean in row 0, the covariance below. Step k goes from
    iterate k to k + 1; a member stops as converged when the field reports :math:`\|\dot\Sigma\|_F<` tol_low
    at its iterate (code 3), as a blow-up when the trace of the next iterate exceeds tol_high (or is not finite).
    """
    B, d = C.shape[0], C.shape[1]
    m = np.zeros((B, d)) if mean0 is None else np.array(np.broadcast_to(np.asarray(mean0, dtype=float), (B, d)))
    if not np.all(np.isfinite(m)):
        raise ValueError("mean0 contains non-finite values")
    rhs_norm = np.full(B, np.nan)

    def field(t, Y, active, t_step):
        dm, R = _rhs(Y[:, 0], Y[:, 1:], layer)
        nrm = np.sqrt(np.einsum("bij,bij->b", R, R))
        if not np.all(np.isfinite(nrm)):
            bad = active[~np.isfinite(nrm)]
            raise NonFiniteError(
                f"projected Euler: non-finite right-hand side at iteration {round(t / step)} for member(s) "
                f"{bad.tolist()[:5]}"
            )
        rhs_norm[active] = nrm
        return np.concatenate([dm[:, None], R], axis=1), np.where(nrm < tol_low, 3, 0)

    def psd(Y):
        return np.concatenate([Y[:, :1], _project_psd(Y[:, 1:], psd_floor)], axis=1)

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
    cov_last, mean_last, saved_it, saved_S, saved_m = np.empty_like(C), np.empty((B, d)), [], [], []
    for k in range(B):
        i = int(iterations[k])
        keep = (
            saved_k <= i
            if stopped[k]
            else (saved_k < last_allowed) & ((saved_k == i) | mask[np.minimum(saved_k, max_iter - 1)])
        )
        its, states = saved_k[keep], frames[k, keep]
        if not (its.size and its[-1] == i):  # the stop iterate is always stored (frozen at it)
            its, states = np.append(its, i), np.concatenate([states, frames[k, -1:]])
        saved_it.append(its)
        saved_S.append(states[:, 1:])
        saved_m.append(states[:, 0])
        cov_last[k], mean_last[k] = states[-1, 1:], states[-1, 0]
    cov_after = np.where(stopped[:, None, None], run.y_stop[:, 1:], frames[:, -1, 1:])
    iterations = np.where(stopped | limited, iterations, max_iter)
    return EulerRuns(
        status=status.astype(str),
        iterations=iterations,
        exit_time=iterations * step,
        cov_last=cov_last,
        cov_after=cov_after,
        mean_last=mean_last,
        rhs_norm=rhs_norm,
        saved_iterations=saved_it,
        saved_cov=saved_S,
        saved_mean=saved_m,
        step=float(step),
    )


# ---------------------------------------------------------------------------------------------
# moments and quadrature of a Gaussian
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def empirical_moments(X, weights=None):
    r"""Mean and covariance of the measure :math:`\mu=\sum_jw_j\delta_{x_j}` of tokens ``X`` (..., n, d).

    .. math:: \bar x=\sum_jw_jx_j,\qquad \hat\Sigma=\sum_jw_j(x_j-\bar x)(x_j-\bar x)^\top

    with :math:`w_j=1/n` by default or the given masses (e.g. quadrature weights, :func:`gauss_hermite`);
    leading axes are e.g. the times of a trajectory. These are the moments the Gaussian ODEs predict.

    Parameters
    ----------
    X : array (..., n, d)
        Tokens: n points of dimension d (at least one of each), possibly stacked along leading axes.
    weights : array (n,), optional
        Masses of the n tokens, non-negative and summing to 1; ``None`` gives each token mass :math:`1/n`.

    Returns
    -------
    mean : array (..., d)
        The weighted mean :math:`\bar x`.
    cov : array (..., d, d)
        The weighted covariance :math:`\hat\Sigma` (normalised by the total mass 1, no :math:`n/(n-1)`).

    References
    ----------
    %(refs_odes)s
    Section "Particles against the ODEs" compares these moments with the ODEs.
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
    r"""Tensor Gauss–Hermite quadrature of :math:`N(\mathrm{mean},\mathrm{cov})`: nodes (k^d, d) and weights (k^d,).

    :math:`\int f\,dN(\alpha,\Sigma)\approx\sum_jw_jf(x_j)` with :math:`x_j=\alpha+\Sigma^{1/2}z_j` (symmetric
    root, so singular covariances are allowed) and :math:`(z_j,w_j)` the probabilists' Hermite rule. Fed to
    the particle core as weights (``simulate(..., weights=w)``) this is the mean-field Transformer PDE
    started from the Gaussian itself rather than from a sample (d <= 3).

    Parameters
    ----------
    mean : array (d,)
        The mean :math:`\alpha`, of dimension d <= 3.
    cov : array (d, d)
        The covariance :math:`\Sigma`, symmetric positive semi-definite.
    k : int
        Nodes per coordinate; the rule integrates polynomials of degree up to :math:`2k-1` in each
        coordinate of :math:`z` exactly.

    Returns
    -------
    nodes : array (k**d, d)
        The points :math:`x_j`.
    weights : array (k**d,)
        Their masses, positive and summing to 1.

    References
    ----------
    %(refs_odes)s
    Section "Particles against the ODEs" runs the Transformer PDE on these nodes.
    """
    from numpy.polynomial.hermite_e import hermegauss

    mean, cov = validate_gaussian(mean, cov)
    d = mean.shape[0]
    if d > 3:
        raise ValueError(f"a tensor quadrature has k^d nodes: use it for d <= 3, got d = {d}")
    z, w = hermegauss(validate_count(k, "k"))
    w = w / w.sum()
    Z = np.stack(np.meshgrid(*([z] * d), indexing="ij"), -1).reshape(-1, d)
    W = np.prod(np.stack(np.meshgrid(*([w] * d), indexing="ij"), -1).reshape(-1, d), axis=1)
    return mean + Z @ psd_sqrt(cov).T, W


# ---------------------------------------------------------------------------------------------
# closed forms (derived and checked in chapter 2 of the book)
# ---------------------------------------------------------------------------------------------


def _softmax_single(layer: Attention, what: str) -> Attention:
    _check_layer(layer)
    layer.kind.require("quadratic_covariance", what)
    if layer.n_heads != 1:
        raise ValueError(f"{what} holds for single-head softmax attention, got {layer!r}")
    return layer


def _scalar_value(layer: Attention, what: str) -> float:
    V = layer.V[0]
    v = float(np.trace(V)) / layer.d
    if not np.allclose(V, v * np.eye(layer.d), rtol=0, atol=1e-12 * max(1.0, abs(v))):
        raise ValueError(f"{what} needs an isotropic value matrix V = v I, got V = {V.tolist()}")
    return v


def _vector(x, name: str, d: int) -> np.ndarray:
    x = validate_finite_array(x, name, ndim=1)
    if x.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got {x.shape}")
    return x


def _isotropic(cov0, layer: Attention, what: str):
    """The checks of the V = vI closed forms: (layer, v, cov0, R, K, T*), R = cov0^{1/2}, K = R beta(A + A^T) R."""
    layer = _softmax_single(layer, what)
    v = _scalar_value(layer, what)
    cov0 = validate_covariance(cov0, "cov0", layer.d)
    R = psd_sqrt(cov0)
    A = layer.A[0]
    K = _sym(R @ (layer.beta * (A + A.T)) @ R)  # beta (A + A^T): the same in both conventions
    eig = np.linalg.eigvalsh(v * K)
    Tstar = 1.0 / eig[-1] if eig[-1] > 1e-14 * max(1e-300, float(np.abs(eig).max())) else math.inf
    return layer, v, cov0, R, K, float(Tstar)


def _before_blowup(t, Tstar: float, what: str) -> np.ndarray:
    """The times ``t`` as a finite 1-d array, all before ``Tstar``; else a BlowUpError."""
    ts = np.atleast_1d(validate_finite_array(t, "t"))
    if np.any(ts >= Tstar):
        last = float(ts[ts < Tstar].max()) if np.any(ts < Tstar) else 0.0
        raise BlowUpError(Tstar, last, f"{what} at T* = {Tstar:.6g}")
    return ts


@fill_doc(_DOC)
def isotropic_covariance(cov0, layer: Attention, t):
    r"""Closed-form covariance for softmax with :math:`V=vI`.

    The precision solves a linear equation, :math:`\frac{d}{dt}\Sigma^{-1}=-v\beta(A+A^\top)`, so with
    :math:`S=\beta(A+A^\top)` and :math:`R=\Sigma_0^{1/2}`

    .. math:: \Sigma_t = R\,(I - vt\,RSR)^{-1}R ,

    valid for singular :math:`\Sigma_0` and for :math:`t<T^*` (:func:`blowup_time`).

    Parameters
    ----------
    %(cov0_closed_form)s
    layer : Attention
        Single-head softmax layer with :math:`V=vI` (any real :math:`v`) and any :math:`A`.
    %(t_before_blowup)s

    Returns
    -------
    array (d, d) or (m, d, d)
        :math:`\Sigma_t`, one matrix for a number ``t``, a stack for an array.

    Raises
    ------
    BlowUpError
        If some requested time is at or beyond :math:`T^*`.

    References
    ----------
    %(refs_tstar)s
    """
    layer, v, _, R, K, Tstar = _isotropic(cov0, layer, "the precision formula")
    ts = _before_blowup(t, Tstar, "the covariance blows up")
    out = np.array([_sym(R @ np.linalg.solve(np.eye(layer.d) - v * s * K, R)) for s in ts])
    return out[0] if np.ndim(t) == 0 else out


@fill_doc(_DOC)
def blowup_time(cov0, layer: Attention) -> float:
    r"""Blow-up time of softmax with :math:`V=vI`, ``inf`` if there is none.

    .. math:: T^* = 1\big/\lambda_{\max}\big(v\,\Sigma_0^{1/2}\beta(A+A^\top)\Sigma_0^{1/2}\big)

    when that eigenvalue is positive; for :math:`\Sigma_0\succ0` a blow-up happens iff
    :math:`v(A+A^\top)` has a positive eigenvalue.

    Parameters
    ----------
    %(cov0_closed_form)s
    layer : Attention
        Single-head softmax layer with :math:`V=vI`; :math:`\beta` and :math:`A` enter through
        :math:`\beta(A+A^\top)`.

    Returns
    -------
    float
        :math:`T^*`, or ``math.inf`` when the largest eigenvalue is at most :math:`10^{-14}` times the
        largest in absolute value.

    References
    ----------
    %(refs_tstar)s
    """
    return _isotropic(cov0, layer, "the blow-up formula")[-1]


@fill_doc(_DOC)
def isotropic_mean(mean0, cov0, layer: Attention, t):
    r"""Closed-form mean for softmax with :math:`V=vI` and symmetric :math:`A`.

    .. math:: \alpha_t = e^{vt}\big(I-2vt\,\beta\Sigma_0A\big)^{-1/2}\alpha_0

    (principal matrix power; :math:`\Sigma_0A` has a real spectrum), for :math:`t<T^*` (:func:`blowup_time`).

    Parameters
    ----------
    mean0 : array (d,)
        The initial mean :math:`\alpha_0`.
    %(cov0_closed_form)s
    layer : Attention
        Single-head softmax layer with :math:`V=vI` and a symmetric :math:`A` (no closed form is known
        otherwise: a ValueError).
    %(t_before_blowup)s

    Returns
    -------
    array (d,) or (m, d)
        :math:`\alpha_t`, one vector for a number ``t``, one row per time for an array.

    Raises
    ------
    BlowUpError
        If some requested time is at or beyond :math:`T^*`.

    References
    ----------
    %(refs_odes)s
    Section "Blow-up in finite time, or not" has :math:`T^*`; section "The mean" the mean equation.
    """
    layer, v, cov0, _, _, Tstar = _isotropic(cov0, layer, "the mean formula")
    A = layer.A[0]
    if not np.allclose(A, A.T, rtol=0, atol=1e-12 * max(1.0, np.abs(A).max())):
        raise ValueError("the closed-form mean needs a symmetric A (no closed form is known otherwise)")
    mean0 = _vector(mean0, "mean0", layer.d)
    ts = _before_blowup(t, Tstar, "the mean and covariance blow up")
    powers = [fractional_matrix_power(np.eye(layer.d) - 2.0 * v * s * layer.beta * cov0 @ A, -0.5) for s in ts]
    means = np.array([np.exp(v * s) * np.real(P) @ mean0 for s, P in zip(ts, powers)])
    return means[0] if np.ndim(t) == 0 else means


@fill_doc(_DOC)
def clustering_limit(cov0, layer: Attention, *, tol: float = 1e-10) -> np.ndarray:
    r"""Limit covariance :math:`\Sigma_\infty` when the dynamics cluster onto a subspace.

    Softmax with :math:`V=vI`, :math:`v>0`, :math:`A+A^\top\preceq0`, :math:`S=\beta(A+A^\top)`:

    .. math:: \Sigma_\infty = \Sigma_0^{1/2}P_{\ker(\Sigma_0^{1/2}S\Sigma_0^{1/2})}\Sigma_0^{1/2}
              = \Sigma_0-\Sigma_0R^\top(R\Sigma_0R^\top)^{+}R\Sigma_0 ,

    the conditional covariance of :math:`x\sim N(\alpha_0,\Sigma_0)` given :math:`Rx`, the rows of :math:`R`
    spanning :math:`\operatorname{range}(A+A^\top)`; for :math:`\Sigma_0\succ0` of rank
    :math:`\dim\ker(A+A^\top)`, reached at rate :math:`O(1/t)`. Single-head L2 with :math:`V=vI`, :math:`v>0`,
    :math:`K^\top Q` symmetric negative semi-definite and :math:`\ker K^\top Q=\ker K`: the same limit with
    :math:`S=K^\top Q+Q^\top K` (derived for this book: the precision's block on :math:`\ker K^\top Q` is
    conserved). Eigenvalues of :math:`\Sigma_0^{1/2}S\Sigma_0^{1/2}` below ``tol`` times the largest count as zero.

    Parameters
    ----------
    %(cov0_closed_form)s
    layer : Attention
        Single head with :math:`V=vI`, :math:`v>0`: softmax with :math:`A+A^\top\preceq0`, or L2 as above
        (anything else raises a ValueError).
    tol : float
        Relative threshold (> 0) of the zero eigenvalues.

    Returns
    -------
    array (d, d)
        :math:`\Sigma_\infty`, symmetric positive semi-definite.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data; book:
    ``chapters/02_gaussian_preservation.md``, section "Clustering: the rank of the limit", equation
    (eq-gauss-rank), and section "Five behaviours in the cone" (convergence to a line).
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


def _rank_one(z, layer: Attention) -> np.ndarray:
    out = np.zeros(z.shape)
    for h in range(layer.n_heads):
        q = np.einsum("...i,ij,...j->...", z, layer.A[h], z)
        out = out + layer.beta * q[..., None] * (z @ layer.V[h].T)
    return out


def _rank_one_layer(layer: Attention) -> Attention:
    _check_layer(layer)
    layer.kind.require("quadratic_covariance", "the rank-one reduction")
    return layer


@fill_doc(_DOC)
def rank_one_velocity(z, layer: Attention) -> np.ndarray:
    r"""Velocity on the rank-one invariant manifold :math:`\Sigma=zz^\top` of softmax attention.

    .. math:: \dot z = \sum_h\beta\,(z^\top A_hz)\,V_hz

    (a scalar quadratic form: the convention :math:`A` vs :math:`A^\top` does not matter); then
    :math:`\Sigma_t=z_tz_t^\top` solves the covariance ODE for any :math:`V, A`.

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

    References
    ----------
    %(refs_rank_one)s
    """
    layer = _rank_one_layer(layer)
    z = validate_finite_array(z, "z", min_ndim=1)
    if z.shape[-1] != layer.d:
        raise ValueError(f"z must have dimension {layer.d}, got shape {z.shape}")
    return _rank_one(z, layer)


@fill_doc(_DOC)
def solve_rank_one(z0, layer: Attention, t_eval, *, rtol: float = 1e-12, atol: float = 1e-14) -> np.ndarray:
    r"""Integrate :math:`\dot z=(z^\top Az)Vz` (:func:`rank_one_velocity`) from time 0 to the times ``t_eval``.

    Parameters
    ----------
    z0 : array (d,)
        The initial point, :math:`\Sigma_0=z_0z_0^\top`.
    layer : Attention
        Softmax layer, any number of heads (not causal).
    t_eval : array (m,)
        Strictly increasing output times, none negative, the last one positive.
    rtol, atol : float
        Tolerances of the DOP853 solver (:func:`~tokendynamics.odes.solve_ode`).

    Returns
    -------
    array (m, d)
        :math:`z_t` at the times ``t_eval``.

    Raises
    ------
    BlowUpError
        If the solver fails before the last time (e.g. at a finite-time blow-up).

    References
    ----------
    %(refs_rank_one)s
    """
    layer = _rank_one_layer(layer)
    z0 = _vector(z0, "z0", layer.d)
    _, _, t_eval = time_grid((0.0, float(np.max(real_array(t_eval, "t_eval")))), t_eval)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    options = {"t_eval": t_eval, "method": "DOP853", "rtol": rtol, "atol": atol}
    sol = solve_ode(lambda t, z: _rank_one(z, layer), z0, (0.0, float(t_eval[-1])), blowup=True, **options)
    return sol.y.T


@fill_doc(_DOC)
def rank_one_stationary_angles(layer: Attention) -> np.ndarray:
    r"""Angles :math:`\theta\in(-\pi/2,\pi/2]` of the rank-one stationary lines of softmax attention in d = 2.

    For :math:`V` invertible the rank-one stationary points are :math:`s\,uu^\top` with :math:`u^\top Au=0`,
    :math:`u=(\cos\theta,\sin\theta)`: two lines when :math:`A+A^\top` is indefinite, none when it is definite.

    Parameters
    ----------
    layer : Attention
        Single-head softmax layer in d = 2; only its :math:`A` is used.

    Returns
    -------
    array (k,)
        The angles, increasing (a singular :math:`A+A^\top` gives a double root, twice if :math:`A_{22}\ne0`,
        once, :math:`\pi/2`, if :math:`A_{22}=0`).

    References
    ----------
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


def one_dimensional_solution(mean0: float, var0: float, layer: Attention, t):
    r"""Exact solution of softmax attention in d = 1, with :math:`a=\beta A`, :math:`v=V`.

    .. math:: \sigma_t^2=\frac{\sigma_0^2}{1-2va\sigma_0^2t},\qquad
              \alpha_t=\alpha_0e^{vt}(1-2va\sigma_0^2t)^{-1/2},

    blowing up at :math:`T^*=1/(2va\sigma_0^2)` iff :math:`va>0`.

    Parameters
    ----------
    mean0 : float
        The initial mean :math:`\alpha_0`.
    var0 : float
        The initial variance :math:`\sigma_0^2\ge0`.
    layer : Attention
        Single-head softmax layer in d = 1.
    t : float or array
        The time(s), all before :math:`T^*`.

    Returns
    -------
    mean_t, var_t : float or array
        :math:`\alpha_t` and :math:`\sigma_t^2`, of the shape of ``t``.

    Raises
    ------
    BlowUpError
        If some requested time is at or beyond :math:`T^*`.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data; book:
    ``chapters/02_gaussian_preservation.md``, equation (eq-gauss-tstar), whose d = 1 case is
    :math:`T^*=1/(2va\sigma_0^2)`.
    """
    layer = _softmax_single(layer, "the one-dimensional solution")
    if layer.d != 1:
        raise ValueError(f"the one-dimensional solution needs d = 1, got d = {layer.d}")
    a, v = layer.beta * float(layer.A[0, 0, 0]), float(layer.V[0, 0, 0])
    mean0 = validate_finite(mean0, "mean0")
    var0 = validate_positive(var0, "var0", allow_zero=True)
    ts = validate_finite_array(t, "t")
    den = 1.0 - 2.0 * v * a * var0 * ts
    if np.any(den <= 0):
        Tstar = 1.0 / (2.0 * v * a * var0)
        before = ts[ts < Tstar]
        raise BlowUpError(
            Tstar,
            float(before.max()) if before.size else 0.0,
            f"the variance blows up at T* = 1/(2 v a var0) = {Tstar:.6g}, before the requested "
            f"time {float(ts.max()):.6g}",
        )
    return mean0 * np.exp(v * ts) / np.sqrt(den), var0 / den


@fill_doc(_DOC)
def decoupled_mean(mean0, layer: Attention, t):
    r"""Sinkhorn mean: :math:`\alpha_t=e^{t\sum_hV_h}\alpha_0`, independent of :math:`\Sigma`.

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
        :math:`\alpha_t`, one vector for a number ``t``, one row per time for an array.

    References
    ----------
    %(refs_odes)s
    Section "The mean" compares it with the particles.
    """
    _check_layer(layer)
    layer.kind.require("mean_decouples", "the decoupled mean")
    mean0 = _vector(mean0, "mean0", layer.d)
    V = layer.V.sum(axis=0)
    out = np.array([expm(s * V) @ mean0 for s in np.atleast_1d(validate_finite_array(t, "t"))])
    return out[0] if np.ndim(t) == 0 else out


def growth_rate(layer: Attention) -> float:
    r"""Rate :math:`c` of the a-priori bound :math:`\|\Sigma_t\|\le\|\Sigma_0\|e^{2ct}` (no finite-time blow-up).

    L2: :math:`c=\sum_h\|V_h\|\,\|K_h^\top Q_h\|/\lambda_{\min}(K_h^\top K_h)` (``inf`` unless every
    :math:`K_h^\top K_h\succ0`), from :math:`\|M\|\le\|V\|\,\|(\Sigma^{-1}+2\beta K^\top K)^{-1}\|\,2\beta\|K^\top Q\|`;
    Sinkhorn: :math:`c=\sum_h\|V_h\|`, because :math:`\|C\|\le\|\Sigma\|` (spectral norms).

    Parameters
    ----------
    layer : Attention
        A layer whose kind has a global growth bound (L2, Sinkhorn; softmax and linear attention can blow
        up: a CapabilityError).

    Returns
    -------
    float
        :math:`c\ge0`, independent of :math:`\beta` and :math:`\varepsilon` (``inf`` for L2 with a numerically
        singular :math:`K_h^\top K_h`).

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data (L2 and Sinkhorn attention); book:
    ``chapters/02_gaussian_preservation.md``, section "Blow-up in finite time, or not", where the bound is derived.
    """
    _check_layer(layer)
    rate = layer.kind.require("growth_rate", "a global growth bound (softmax and linear attention can blow up)")
    return sum(rate(layer.head(h)) for h in range(layer.n_heads))


# ---------------------------------------------------------------------------------------------
# diagnostics
# ---------------------------------------------------------------------------------------------


def _eigenvalues(cov) -> np.ndarray:
    cov = validate_finite_array(cov, "cov", min_ndim=2)
    if cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"cov must be a square matrix or a stack (..., d, d), got shape {cov.shape}")
    return np.linalg.eigvalsh(_sym(cov))[..., ::-1]


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

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), Gaussian initial data; book:
    ``chapters/02_gaussian_preservation.md``, where the spectra show clustering (low rank) and the
    rank-one profile of a blow-up.
    """
    return _eigenvalues(cov)


def numerical_rank(cov, threshold: float = 0.1, *, relative: bool = False):
    r"""Numerical rank :math:`\#\{\lambda_i>\text{threshold}\}` and the eigenvalues themselves.

    The official histograms count eigenvalues above 0.1 (absolute); with ``relative=True`` the threshold
    is a fraction of the largest eigenvalue. Report both: a decaying eigenvalue can sit above a threshold
    when a stopping rule fires.

    Parameters
    ----------
    cov : array (d, d) or (..., d, d)
        A covariance or a stack of them (the symmetric part is used).
    threshold : float
        Eigenvalues strictly above it count.
    relative : bool
        The threshold is ``threshold`` times the largest eigenvalue of each matrix.

    Returns
    -------
    rank : int or array (...) of int
        The number of eigenvalues above the threshold, per matrix.
    eigenvalues : array (..., d)
        The eigenvalues, largest first.

    References
    ----------
    Paper 1 (Castin et al., arXiv:2501.18322), its rank histograms (the authors' code); book:
    ``chapters/02_gaussian_preservation.md``, section "Clustering: the rank of the limit", equation (eq-gauss-rank).
    """
    threshold = validate_finite(threshold, "threshold")
    lam = _eigenvalues(cov)
    cut = threshold * lam[..., :1] if validate_flag(relative, "relative") else threshold
    return np.sum(lam > cut, axis=-1), lam
