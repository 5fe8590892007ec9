r"""Studies of the gradient-flow chapter (``03_gradient_flow``) on the energies of :mod:`tokendynamics.gradient_flow`.

The survey of the sign rule on random layers (:func:`sign_rule_survey`), the energy decrease per unit length
of a flow in a metric (:func:`descent_profile`, :func:`gaussian_descent_profile`), the steepest-ascent check
of softmax in the weighted metric (:func:`softmax_efficiency`, :func:`gaussian_softmax_efficiency`), the energy and
distance curves of the softmax Gaussian flow behind the chapter's explorer (:func:`gaussian_energy_curves`), the check
of a Gaussian flow against a Bures–Wasserstein gradient (:func:`bw_gradient_mismatch`), the metastable
plateaus of a run (:func:`metastable_plateaus`), the curvature of the energy along its gradient flow
(:func:`curvature_along_flow`), the energy along a displacement (:func:`energy_along`) and clustered
configurations on the circle (:func:`circle_clusters`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...attention import Attention, velocity
from ...docstrings import fill_doc
from ...gaussian import GaussianTrajectory, gaussian_rhs, gaussian_velocity, solve_gaussian
from ...gradient_flow import (
    GF_DOCS,
    Equilibrium,
    bw_gradient_velocity,
    dissipation,
    energy_rate,
    energy_sign,
    finite_difference_gradient,
    first_variation,
    first_variation_gradient,
    gaussian_interaction_energy,
    gaussian_slope,
    interaction_energy,
    kinetic_norm,
    layer_matrices,
    linearize,
    second_variation,
    twisted_bures_wasserstein,
    twisted_matrix,
    twisted_wasserstein,
)
from ...metrics import detect_clusters
from ...particles import Trajectory
from ...transport import bures_wasserstein
from ...validation import (
    validate_choice,
    validate_count,
    validate_finite_array,
    validate_instance,
    validate_measure,
    validate_positive,
    validate_spd,
    validate_symmetric,
    validate_weights,
)

__all__ = [
    "SignRuleSurvey", "sign_rule_survey", "DescentProfile", "descent_profile", "gaussian_descent_profile",
    "softmax_efficiency", "gaussian_softmax_efficiency",
    "EnergyCurves", "gaussian_energy_curves", "bw_gradient_mismatch", "Plateau", "metastable_plateaus",
    "curvature_along_flow", "energy_along", "circle_clusters",
]  # fmt: skip

_DOC = {
    **GF_DOCS,
    "gaussian_traj": """traj : GaussianTrajectory
    Result of ``tokendynamics.gaussian.solve_gaussian`` for a constant Attention layer.""",
    "M": """M : array_like (d, d), optional
    Symmetric positive definite matrix of the metric :math:`d_M`; None: :math:`W_2` (Bures–Wasserstein).""",
}


def _symmetric(M, tol: float) -> bool:
    """Whether ``M`` passes the library's symmetry check at relative tolerance ``tol``."""
    try:
        validate_symmetric(M, tol=tol)
    except ValueError:
        return False
    return True


def _gaussian_layer(traj, what: str) -> Attention:
    validate_instance(traj, GaussianTrajectory, "traj", "a GaussianTrajectory (the result of solve_gaussian)")
    if not isinstance(traj.layer, Attention):
        raise TypeError(f"{what} needs a trajectory of a constant Attention layer")
    return traj.layer


# ---------------------------------------------------------------------------------------------
# the sign rule on random layers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SignRuleSurvey:
    r"""Random cases of the sign rule (:func:`sign_rule_survey`).

    Attributes
    ----------
    lam_min, lam_max : arrays (cases,)
        Smallest and largest eigenvalue of :math:`M+M^\top`, divided by its largest absolute eigenvalue.
    rate : array (cases,)
        :math:`\frac{d}{dt}E_A` from the core velocity (:func:`~tokendynamics.gradient_flow.energy_rate`).
    formula : array (cases,)
        :func:`~tokendynamics.gradient_flow.dissipation` (the sign-rule form of the same rate).
    predicted : array (cases,) of int
        :func:`~tokendynamics.gradient_flow.energy_sign` (+1, -1, or 0 = no rule).
    scale : array (cases,)
        :math:`\tfrac12\|M+M^\top\|\int|\nabla Z_\mu|^2Z_\mu^{-k}d\mu`: the rate divided by it,
        :attr:`normalized_rate`, lies in :math:`[\lambda_{\min},\lambda_{\max}]`.
    kind : str
    """

    lam_min: np.ndarray
    lam_max: np.ndarray
    rate: np.ndarray
    formula: np.ndarray
    predicted: np.ndarray
    scale: np.ndarray
    kind: str

    @property
    def normalized_rate(self) -> np.ndarray:
        """Rate divided by :attr:`scale`; in [lam_min, lam_max]."""
        return self.rate / self.scale

    @property
    def agree(self) -> np.ndarray:
        """Cases with a rule (predicted != 0) whose computed rate has the predicted sign."""
        ruled = self.predicted != 0
        return np.sign(self.rate[ruled]) == self.predicted[ruled]

    @property
    def relative_gap(self) -> np.ndarray:
        """:math:`|\text{rate}-\text{formula}|/|\text{formula}|` per case."""
        return np.abs(self.rate - self.formula) / np.maximum(np.abs(self.formula), 1e-300)


def sign_rule_survey(
    cases: int, *, n: int = 100, d: int = 2, scale: float = 0.7, spread: float = 0.7, seed=None, kind: str = "softmax"
) -> SignRuleSurvey:
    r"""Check the sign rule on random layers and token clouds.

    Each case draws a symmetric :math:`A=U\operatorname{diag}(a)U^\top` (:math:`a_i\sim N(0,\text{scale}^2)`,
    :math:`U` Haar), a Gaussian :math:`V` and n tokens from :math:`N(0,\text{spread}^2I_d)`, and records the
    rate of ``Attention(kind, A=A, V=V)``, the dissipation formula and the predicted sign.

    Parameters
    ----------
    cases : int
        Number of random cases.
    n : int
        Tokens per case (uniform masses).
    d : int
        Dimension.
    scale : float
        Standard deviation of the eigenvalues of :math:`A`.
    spread : float
        Standard deviation of each token coordinate.
    seed : int or numpy.random.Generator, optional
        Seed of ``numpy.random.default_rng``.
    kind : {"softmax", "unnormalized_softmax"}
        Attention of the random layers; the sign rule is stated for these two.

    Returns
    -------
    SignRuleSurvey
    """
    validate_choice(kind, "kind", ("softmax", "unnormalized_softmax"))
    cases = validate_count(cases, "cases")
    n, d = validate_count(n, "n"), validate_count(d, "d")
    scale, spread = validate_positive(scale, "scale"), validate_positive(spread, "spread")
    rng = np.random.default_rng(seed)
    lo, hi, rate, formula, pred, norm = (np.empty(int(cases)) for _ in range(6))
    for c in range(int(cases)):
        U, _ = np.linalg.qr(rng.standard_normal((d, d)))
        a = scale * rng.standard_normal(d)
        A = (U * a) @ U.T
        A = 0.5 * (A + A.T)
        V = rng.standard_normal((d, d))
        X = spread * rng.standard_normal((n, d))
        layer = Attention(kind, A=A, V=V)
        M = twisted_matrix(layer)
        lam = np.linalg.eigvalsh(M + M.T)
        lo[c], hi[c] = lam[0] / np.max(np.abs(lam)), lam[-1] / np.max(np.abs(lam))
        rate[c] = energy_rate(X, layer)
        formula[c] = dissipation(X, layer)
        pred[c] = energy_sign(layer)
        # V = A gives M = I: the dissipation is then int |grad Z|^2 Z^{-k} dmu
        norm[c] = 0.5 * np.max(np.abs(lam)) * dissipation(X, layer.with_(V=A))
    return SignRuleSurvey(lo, hi, rate, formula, pred.astype(int), norm, kind)


# ---------------------------------------------------------------------------------------------
# is the flow a steepest descent for this metric? (energy decrease per unit length)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DescentProfile:
    r"""Energy decrease per unit length along a flow, in one metric (:math:`d_M`, or :math:`W_2`).

    The energy can decrease at most at the rate slope × speed (Cauchy–Schwarz in :math:`L^2_{M^{-1}}(\mu)`);
    the *efficiency* :math:`-\frac{d}{dt}E/(\text{speed}\cdot\text{slope})\le1` is 1 exactly for the gradient
    flow of that metric. Layer by layer, :math:`(E(\mu_k)-E(\mu_{k+1}))/(d(\mu_k,\mu_{k+1})\,
    \overline{\text{slope}}_k)` uses the exact distance between a layer's input and output and the mean of
    their slopes (1 up to :math:`O(\text{step}^2)` for a gradient flow).

    Attributes
    ----------
    t, energy, rate, speed, slope, efficiency : arrays (m,)
        At every stored time.
    layer_t, layer_drop, layer_distance, layer_efficiency : arrays (k,)
        For the measured layers :math:`[t_k,t_{k+1}]`: start, energy decrease, distance, efficiency.
    metric : str
        ``"W2"`` or ``"d_M"``.
    """

    t: np.ndarray
    energy: np.ndarray
    rate: np.ndarray
    speed: np.ndarray
    slope: np.ndarray
    efficiency: np.ndarray
    layer_t: np.ndarray
    layer_drop: np.ndarray
    layer_distance: np.ndarray
    layer_efficiency: np.ndarray
    metric: str


def _descent_profile(t, energy, rate, speed, slope, ks, dist, w2: bool) -> DescentProfile:
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(speed * slope > 0, -rate / (speed * slope), 0.0)
        drop = energy[ks] - energy[ks + 1]
        mid = 0.5 * (slope[ks] + slope[ks + 1])  # slope at the layer's midpoint, to O(dt^2)
        leff = np.where(dist * mid > 0, drop / (dist * mid), 0.0)
    return DescentProfile(t, energy, rate, speed, slope, eff, t[ks], drop, dist, leff, "W2" if w2 else "d_M")


@fill_doc(_DOC)
def descent_profile(traj, M=None, *, every: int = 1) -> DescentProfile:
    r"""Energy decrease per unit length of a particle :class:`~tokendynamics.particles.Trajectory` (its layer's energy).

    The energy is :math:`E_{\beta A}` of the trajectory's single-head layer, lengths are measured in :math:`d_M`
    or :math:`W_2`. For unnormalised attention with :math:`A=-I`, :math:`V\succ0` the flow is the :math:`d_V`
    gradient descent of :math:`E_{-I}`: efficiency 1 in :math:`d_V`, below 1 in :math:`W_2`.

    Parameters
    ----------
    traj : Trajectory
        Result of ``simulate`` for a constant single-head layer; its stored times are the layers' boundaries.
    %(M)s
    every : int
        Measure the exact distance (one linear program) of every ``every``-th layer.

    Returns
    -------
    DescentProfile
    """
    validate_instance(traj, Trajectory, "traj", "a Trajectory (the result of simulate)")
    every = validate_count(every, "every")
    layer, w = traj.layer, traj.weights
    Ms = np.eye(traj.d) if M is None else validate_spd(M, "M", traj.d)
    m = len(traj.t)
    energy, rate, speed, slope = (np.empty(m) for _ in range(4))
    for k, X in enumerate(traj.X):
        U = velocity(X, layer, w)
        energy[k] = interaction_energy(X, layer, w)
        rate[k] = energy_rate(X, layer, w, field=U)
        speed[k] = kinetic_norm(U, w, M if M is None else Ms)
        slope[k] = kinetic_norm(first_variation_gradient(X, layer, w) @ Ms, w, M if M is None else Ms)
    ks = np.arange(0, m - 1, every)
    pair = None if w is None else (w, w)
    dist = np.array([twisted_wasserstein(traj.X[k], traj.X[k + 1], Ms, pair) for k in ks])
    return _descent_profile(traj.t, energy, rate, speed, slope, ks, dist, M is None)


@fill_doc(_DOC)
def gaussian_descent_profile(traj, energy: Callable, gradient: Callable, M=None) -> DescentProfile:
    r"""The same as :func:`descent_profile` for a Gaussian trajectory and an energy on Gaussians.

    The flow's field on :math:`N(\alpha,\Sigma)` is affine, :math:`\Gamma(x)=\Gamma(\alpha)+B(x-\alpha)`, so in
    closed form :math:`\frac{d}{dt}F=\langle g,\Gamma(\alpha)\rangle+2\operatorname{tr}(GB\Sigma)`,
    speed² :math:`=\Gamma(\alpha)^\top M^{-1}\Gamma(\alpha)+\operatorname{tr}(B^\top M^{-1}B\Sigma)`; the slope
    is :func:`~tokendynamics.gradient_flow.gaussian_slope`; each interval between stored times is a layer.

    Parameters
    ----------
    %(gaussian_traj)s
    energy : callable
        ``energy(mean, cov) -> float``.
    gradient : callable
        ``gradient(mean, cov) -> (g, G)``.
    %(M)s

    Returns
    -------
    DescentProfile
    """
    layer = _gaussian_layer(traj, "gaussian_descent_profile")
    if not (callable(energy) and callable(gradient)):
        raise TypeError("energy and gradient must be callables of (mean, cov)")
    d = traj.mean.shape[1]
    Ms = np.eye(d) if M is None else validate_spd(M, "M", d)
    Minv = np.linalg.inv(Ms)
    m = len(traj.t)
    E, rate, speed, slope = (np.empty(m) for _ in range(4))
    for k, (a, S) in enumerate(zip(traj.mean, traj.cov)):
        b, B = gaussian_velocity(a, S, layer)
        ga = b + B @ a  # Gamma(alpha)
        g, G = gradient(a, S)
        E[k] = energy(a, S)
        rate[k] = float(g @ ga) + 2.0 * float(np.trace(G @ B @ S))
        speed[k] = math.sqrt(max(0.0, float(ga @ Minv @ ga) + float(np.trace(B.T @ Minv @ B @ S))))
        slope[k] = gaussian_slope(g, G, S, None if M is None else Ms)
    ks = np.arange(m - 1)
    mean, cov = traj.mean, traj.cov
    dist = np.array([twisted_bures_wasserstein(mean[k], cov[k], mean[k + 1], cov[k + 1], Ms) for k in ks])
    return _descent_profile(traj.t, E, rate, speed, slope, ks, dist, M is None)


def _cosine(s: int, uv: float, uu: float, vv: float) -> float:
    return float(s * uv / math.sqrt(uu * vv)) if uu * vv > 0 else 0.0


def _sign_and_metric(layer, twisted: bool):
    s = energy_sign(layer)
    if s == 0:
        raise ValueError("the sign rule needs a definite M + M^T (energy_sign(layer) != 0)")
    return s, validate_spd(s * twisted_matrix(layer), "sM") if twisted else np.eye(layer.d)


@fill_doc(_DOC)
def softmax_efficiency(X, layer, weights=None, *, twisted: bool = True) -> float:
    r"""How close the attention field :math:`\Gamma_\mu` is to the steepest ascent (descent) of :math:`E_A`.

    :math:`s\langle\operatorname{grad}E,\Gamma_\mu\rangle/(\|\operatorname{grad}E\|\,\|\Gamma_\mu\|)\le1`,
    :math:`s` = :func:`~tokendynamics.gradient_flow.energy_sign`; twisted: the :math:`Z_\mu`-weighted metric
    :math:`g_\mu(u,v)=\int Z_\mu\langle(sM)^{-1}u,v\rangle d\mu`, gradient :math:`sM\nabla Z_\mu/Z_\mu` (1 for
    softmax, eq. ``eq-gf-softmax-gradient`` of the chapter); else :math:`L^2(\mu)` (:math:`W_2`), gradient
    :math:`\nabla Z_\mu`. Castin et al. (2025), the gradient-flow section.

    Parameters
    ----------
    %(X)s
    layer : Attention
        One head, symmetric invertible :math:`A`, symmetric definite :math:`M=V(\beta A)^{-1}`.
    %(weights)s
    twisted : bool
        The metric :math:`g_\mu` (True) or :math:`L^2(\mu)` (False).

    Returns
    -------
    float
    """
    X, w = validate_measure(X, weights, layer.d)
    s, K = _sign_and_metric(layer, twisted)
    Z, G, U = first_variation(X, layer, w), first_variation_gradient(X, layer, w), velocity(X, layer, w)
    q, D = (w * Z, G @ K / Z[:, None]) if twisted else (w, G)
    ip = lambda P, Q: float(np.sum(q * np.einsum("ij,ij->i", P, np.linalg.solve(K, Q.T).T)))  # noqa: E731
    return _cosine(s, ip(D, U), ip(D, D), ip(U, U))


def _tilt(mean, cov, A, k: int):
    r"""log c, m, C: :math:`Z^k N(\alpha,\Sigma)=c\,N(m,C)` for :math:`Z(x)=e^{x^\top A\alpha+x^\top A\Sigma Ax/2}`."""
    P = np.linalg.inv(cov) - k * A @ cov @ A
    h = np.linalg.solve(cov, mean) + k * A @ mean
    C = validate_spd(np.linalg.inv(P), "the tilted covariance (needs cov^-1 - k A cov A > 0)")
    logc = -0.5 * np.linalg.slogdet(cov @ P)[1] + 0.5 * h @ C @ h - 0.5 * mean @ np.linalg.solve(cov, mean)
    return float(logc), C @ h, C


def _affine_mean(p, P, q, Q, K, m, C) -> float:
    r""":math:`E\langle p+Px,K(q+Qx)\rangle` under :math:`N(m,C)`."""
    return float((p + P @ m) @ K @ (q + Q @ m) + np.trace(P.T @ K @ Q @ C))


@fill_doc(_DOC)
def gaussian_softmax_efficiency(mean, cov, layer, *, twisted: bool = True) -> float:
    r""":func:`softmax_efficiency` on :math:`\mu=N(\alpha,\Sigma)` in closed form, with the Gaussian-closure field.

    On a Gaussian :math:`\nabla Z_\mu/Z_\mu=u(x)=A\alpha+A\Sigma Ax` is affine and the field is
    :func:`~tokendynamics.gaussian.gaussian_velocity`; :math:`Z_\mu^k\mu` are Gaussians (:math:`k=1,2`), so the
    inner products are Gaussian moments. Castin et al. (2025), the gradient-flow section.

    Parameters
    ----------
    mean, cov : array_like (d,), (d, d)
        :math:`\alpha,\Sigma` (with :math:`\Sigma^{-1}-2A\Sigma A\succ0` for the :math:`L^2` case).
    layer : Attention
        As in :func:`softmax_efficiency`.
    twisted : bool
        The metric :math:`g_\mu` (True) or :math:`L^2(\mu)` (False).

    Returns
    -------
    float
    """
    A, _ = layer_matrices(layer)
    s, K = _sign_and_metric(layer, twisted)
    mean, cov = np.asarray(mean, float), validate_spd(cov, "cov", layer.d)
    b, B = gaussian_velocity(mean, cov, layer)
    u, Uq, Ki, I = A @ mean, A @ cov @ A, np.linalg.inv(K), np.eye(layer.d)
    if twisted:
        _, m, C = _tilt(mean, cov, A, 1)
        return _cosine(
            s,
            _affine_mean(u, Uq, b, B, I, m, C),
            _affine_mean(u, Uq, u, Uq, K, m, C),
            _affine_mean(b, B, b, B, Ki, m, C),
        )
    (c1, m1, C1), (c2, m2, C2) = _tilt(mean, cov, A, 1), _tilt(mean, cov, A, 2)
    uv, uu = math.exp(c1) * _affine_mean(u, Uq, b, B, I, m1, C1), math.exp(c2) * _affine_mean(u, Uq, u, Uq, I, m2, C2)
    return _cosine(s, uv, uu, _affine_mean(b, B, b, B, I, mean, cov))


@fill_doc(_DOC)
def bw_gradient_mismatch(traj, energy: Callable, M=None, *, h: float = 1e-5):
    r"""Distance between a Gaussian trajectory's ODE velocity and the (twisted) BW gradient of ``energy``.

    At each stored :math:`(\alpha_t,\Sigma_t)` the gradient of ``energy`` by
    :func:`~tokendynamics.gradient_flow.finite_difference_gradient` (step ``h``) is turned into a velocity by
    :func:`~tokendynamics.gradient_flow.bw_gradient_velocity` and compared with ``gaussian_rhs`` of the layer.

    Parameters
    ----------
    %(gaussian_traj)s
    energy : callable
        ``energy(mean, cov) -> float``.
    %(M)s
    h : float
        Finite-difference step; every stored covariance must exceed :math:`2hI`.

    Returns
    -------
    error : numpy.ndarray (m,)
        Largest absolute entry of the difference of the velocities at each stored time.
    size : numpy.ndarray (m,)
        Largest absolute entry of the ODE velocity, a scale for ``error``.
    """
    layer = _gaussian_layer(traj, "bw_gradient_mismatch")
    err, size = np.empty(len(traj.t)), np.empty(len(traj.t))
    for k, (a, S) in enumerate(zip(traj.mean, traj.cov)):
        dm, dS = gaussian_rhs(a, S, layer)
        grad_mean, grad_cov = finite_difference_gradient(energy, a, S, h)
        vm, vS = bw_gradient_velocity(grad_mean, grad_cov, S, M)
        err[k] = max(float(np.max(np.abs(dm - vm))), float(np.max(np.abs(dS - vS))))
        size[k] = max(float(np.max(np.abs(dm))), float(np.max(np.abs(dS))))
    return err, size


# ---------------------------------------------------------------------------------------------
# energy and distance curves along the softmax Gaussian flow (the chapter's explorer)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EnergyCurves:
    r"""Energy and distances along the softmax Gaussian flow :math:`N(\alpha_t,\Sigma_t)`.

    Attributes
    ----------
    t : array (m,)
        Times (the curves stop at a blow-up).
    log_energy : array (m,)
        :math:`\log E_{\beta A}(N(\alpha_t,\Sigma_t))` (``inf`` where the Gaussian integral diverges).
    w2 : array (m,)
        :math:`W_2(\mu_0,\mu_t)` (Bures–Wasserstein).
    twisted : array (m,) or None
        :math:`d_{\pm M}(\mu_0,\mu_t)` when :math:`M=V(\beta A)^{-1}` is symmetric definite, else None.
    M : array (d, d) or None
        :math:`V(\beta A)^{-1}` (None when :math:`A` is not symmetric invertible).
    sign : int or None
        The sign rule (+1 non-decreasing, -1 non-increasing, 0 no rule).
    mean, cov : arrays (m, d), (m, d, d)
    blowup_time : float or None
    """

    t: np.ndarray
    log_energy: np.ndarray
    w2: np.ndarray
    twisted: np.ndarray | None
    M: np.ndarray | None
    sign: int | None
    mean: np.ndarray
    cov: np.ndarray
    blowup_time: float | None

    @property
    def energy(self) -> np.ndarray:
        r""":math:`E_{\beta A}(N(\alpha_t,\Sigma_t))`; ``inf`` where it diverges or exceeds float64."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_energy)


def gaussian_energy_curves(
    mean0, cov0, layer, T: float, n_times: int = 101, *, rtol=1e-8, atol=1e-10, blowup_trace=1e6
) -> EnergyCurves:
    r"""Solve the softmax Gaussian ODE and evaluate the energy and two distances from the input along it.

    :math:`E_{\beta A}` (:func:`~tokendynamics.gradient_flow.gaussian_interaction_energy`),
    :math:`W_2(\mu_0,\mu_t)` and, when :math:`M=V(\beta A)^{-1}` is symmetric and definite,
    :math:`d_{\pm M}(\mu_0,\mu_t)`: a few tens of milliseconds in d = 2 (the chapter's explorer).

    Parameters
    ----------
    mean0, cov0 : array_like (d,), (d, d)
        The initial Gaussian.
    layer : Attention
        Single-head softmax layer.
    T : float
        Final time.
    n_times : int
        Equally spaced output times (at least 2).
    rtol, atol : float
        Tolerances of ``solve_gaussian``.
    blowup_trace : float
        Trace of :math:`\Sigma_t` at which the run stops as a blow-up.

    Returns
    -------
    EnergyCurves
    """
    A, V = layer_matrices(layer)
    layer.kind.require("quadratic_covariance", "the energy curves (they follow softmax attention)")
    T = validate_positive(T, "T")
    n_times = validate_count(n_times, "n_times", minimum=2)
    t_eval = np.linspace(0.0, float(T), int(n_times))
    traj = solve_gaussian(
        mean0, cov0, layer, (0.0, float(T)), t_eval=t_eval, rtol=rtol, atol=atol, blowup_trace=blowup_trace
    )
    pairs = list(zip(traj.mean, traj.cov))
    m0, S0 = pairs[0]
    log_energy = np.array([gaussian_interaction_energy(m, S, layer, log=True) for m, S in pairs])
    w2 = np.array([bures_wasserstein(m0, S0, m, S) for m, S in pairs])
    M = sign = twisted = None
    scale = max(1.0, float(np.max(np.abs(A))))
    if _symmetric(A, 1e-12) and np.min(np.abs(np.linalg.eigvalsh(A))) > 1e-12 * scale:
        M, sign = twisted_matrix(layer), energy_sign(layer)
        if _symmetric(M, 1e-10):
            lam = np.linalg.eigvalsh(0.5 * (M + M.T))
            if lam[0] > 0 or lam[-1] < 0:
                Mpos = 0.5 * (M + M.T) * (1.0 if lam[0] > 0 else -1.0)
                twisted = np.array([twisted_bures_wasserstein(m0, S0, m, S, Mpos) for m, S in pairs])
    return EnergyCurves(traj.t, log_energy, w2, twisted, M, sign, traj.mean, traj.cov, traj.blowup_time)


# ---------------------------------------------------------------------------------------------
# non-convexity: metastable plateaus, unbounded curvature, clustered configurations
# ---------------------------------------------------------------------------------------------


def circle_clusters(k: int, masses=None, *, phase: float = 0.0):
    r"""``k`` clusters at equally spaced points :math:`\theta_p=\text{phase}+2\pi p/k` of the unit circle.

    Each cluster is one token carrying its mass (default :math:`1/k`): with equal masses and a rotation-invariant
    layer (softmax with :math:`A=V=I`) every such configuration is an equilibrium by symmetry.

    Parameters
    ----------
    k : int
        Number of clusters (at least 1).
    masses : array (k,), optional
        Masses of the clusters (summing to 1); equal by default.
    phase : float
        Angle of the first cluster.

    Returns
    -------
    X : array (k, 2)
        The cluster positions.
    weights : array (k,) or None
        Their masses (None: equal).
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    theta = float(phase) + 2 * np.pi * np.arange(int(k)) / int(k)
    return np.stack([np.cos(theta), np.sin(theta)], axis=1), validate_weights(masses, int(k))


@dataclass(frozen=True)
class Plateau:
    r"""A stretch of a trajectory with a constant number of clusters (:func:`metastable_plateaus`).

    Attributes
    ----------
    clusters : int
        Number of clusters.
    start, stop : float
        First and last stored times of the stretch.
    energy : float
        :math:`E_{\beta A}(\mu_t)` at the middle of the stretch.
    centres : array (clusters, d)
        Cluster centres there (normalised means on the sphere).
    masses : array (clusters,)
        Their masses.
    state : Equilibrium
        :func:`~tokendynamics.gradient_flow.linearize` of the collapsed configuration: small speed and growing
        directions when the plateau is a metastable state near a saddle of the energy.
    """

    clusters: int
    start: float
    stop: float
    energy: float
    centres: np.ndarray
    masses: np.ndarray
    state: Equilibrium

    @property
    def length(self) -> float:
        """Duration ``stop - start``."""
        return self.stop - self.start


def metastable_plateaus(
    t, Xs, layer, *, sphere: bool = True, threshold: float = 0.999, min_fraction: float = 0.05
) -> list[Plateau]:
    r"""The long stretches of a trajectory with a constant number of clusters, and the state they sit near.

    Clusters are counted at every stored time by :func:`~tokendynamics.metrics.detect_clusters`; a stretch
    lasting at least ``min_fraction`` of the run is a plateau, and at its middle the tokens collapsed to their
    cluster centres (with the clusters' masses) are linearised. For softmax attention with :math:`A=V=I` on the
    circle at large :math:`\beta` the plateaus are metastable: near a saddle of the energy, left after a time of
    order :math:`1/\lambda`.

    Parameters
    ----------
    t : array (m,)
        Stored times.
    Xs : array (m, n, d)
        Tokens at those times.
    layer : Attention
        The layer that moved them (uniform token masses).
    sphere : bool
        Tokens on the unit sphere (centres are normalised).
    threshold : float
        Inner-product threshold of the cluster detection.
    min_fraction : float
        Shortest plateau, as a fraction of the run's duration.

    Returns
    -------
    list of Plateau, in time order
    """
    t, Xs = np.asarray(t, dtype=float), np.asarray(Xs, dtype=float)
    if Xs.ndim != 3 or t.shape != (Xs.shape[0],) or t.size < 2:
        raise ValueError(f"t (m,) and Xs (m, n, d) must match, got {t.shape} and {Xs.shape}")
    if not 0 < min_fraction < 1:
        raise ValueError(f"min_fraction must be in (0, 1), got {min_fraction!r}")
    counts = np.array([detect_clusters(X, threshold).n_clusters for X in Xs])
    edges = np.flatnonzero(np.diff(counts)) + 1
    out = []
    for a, b in zip(np.r_[0, edges], np.r_[edges - 1, len(t) - 1]):
        if t[b] - t[a] < min_fraction * (t[-1] - t[0]):
            continue
        X = Xs[(a + b) // 2]
        report = detect_clusters(X, threshold)
        masses = np.array(report.sizes, dtype=float) / Xs.shape[1]
        centres = np.array([X[report.labels == c].mean(axis=0) for c in range(report.n_clusters)])
        if sphere:
            centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        state = linearize(centres, layer, masses, sphere=sphere)
        out.append(
            Plateau(int(counts[a]), float(t[a]), float(t[b]), interaction_energy(X, layer), centres, masses, state)
        )
    return out


@fill_doc(_DOC)
def curvature_along_flow(Xs, layer, weights=None):
    r"""Squared slope, curvature and their ratio along the :math:`W_2` gradient ascent of :math:`E_A` (symmetric ``A``).

    With :math:`g_t=\nabla\frac{\delta E_A}{\delta\mu}` at the tokens of each cloud :math:`X_t`:
    :math:`S_t=\sum_iw_i|g_t(x_i)|^2`, :math:`H_t=\frac{d^2}{ds^2}E_A((\mathrm{Id}+s\,g_t)_\#\mu_t)|_{s=0}`,
    :math:`\kappa_t=H_t/S_t`. Along that flow :math:`\frac{d}{dt}S_t=2H_t` (tested): an upper bound on the
    second variation would bound the speed by :math:`e^{\kappa_{\max}t}`, so a finite-time blow-up forces
    :math:`\kappa_t\to\infty`.

    Parameters
    ----------
    Xs : array (times, n, d)
        Token clouds along a trajectory.
    layer : Attention
        One head with a symmetric score matrix (unnormalised attention with :math:`V=\beta A` is the flow).
    %(weights)s

    Returns
    -------
    S, H, kappa : arrays (times,)
    """
    A, _ = layer_matrices(layer)
    validate_symmetric(A, "A")  # the flow is the W2 gradient ascent of E_A for a symmetric A
    Xs = np.asarray(Xs, dtype=float)
    if Xs.ndim != 3:
        raise ValueError(f"Xs must have shape (times, n, d), got {Xs.shape}")
    S, H = np.empty(len(Xs)), np.empty(len(Xs))
    for k, X in enumerate(Xs):
        X, w = validate_measure(X, weights)
        g = first_variation_gradient(X, layer, w)
        S[k] = float(np.sum(w * np.einsum("ij,ij->i", g, g)))
        H[k] = second_variation(X, g, layer, w)
    return S, H, H / S


@fill_doc(_DOC)
def energy_along(X, U, layer, s, weights=None) -> np.ndarray:
    r""":math:`E_A\big((\mathrm{Id}+s\,u)_\#\mu\big)` for every ``s`` (translations: ``U`` constant; dilations:
    ``U = X - c``).

    Parameters
    ----------
    %(X)s
    U : array_like (n, d)
        The displacement of each token; the tokens at :math:`s` are ``X + s * U``.
    %(layer)s
    s : float or array_like (k,)
        The parameters :math:`s`.
    %(weights)s

    Returns
    -------
    numpy.ndarray (k,)
    """
    X, w = validate_measure(X, weights)
    U = validate_finite_array(U, "U")
    if U.shape != X.shape:
        raise ValueError(f"U must have the tokens' shape {X.shape}, got {U.shape}")
    return np.array([interaction_energy(X + si * U, layer, w) for si in np.atleast_1d(validate_finite_array(s, "s"))])
