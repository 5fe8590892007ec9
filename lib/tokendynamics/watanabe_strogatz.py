r"""The Watanabe–Strogatz reduction: linear attention on the circle as three real ODEs, for every n.

The double angles :math:`\psi_k=2\theta_k` obey :math:`\dot\psi_k=2\omega+\operatorname{Im}(2He^{-i\psi_k})`
(:math:`\omega, H` of :mod:`tokendynamics.kuramoto` at :math:`R_2`). Hence

.. math:: e^{i\psi_k(t)}=\frac{\alpha(t)+e^{i(\eta(t)+c_k)}}{1+\bar\alpha(t)e^{i(\eta(t)+c_k)}},\qquad
          \dot\alpha=2i\omega\alpha+H-\bar H\alpha^2,\quad \dot\eta=2\omega+2\operatorname{Im}(H\bar\alpha),

with constants :math:`c_k`, :math:`R_2=\frac1n\sum_k e^{i\psi_k}` closing the system, and (Gong–Pikovsky)
:math:`\alpha(0)=R_2(0)`, :math:`\eta(0)=0`. In any dimension this is :mod:`tokendynamics.projective`.

References
----------
S. Watanabe, S. H. Strogatz, *Constants of motion for superconducting Josephson arrays*, Physica D 74 (1994);
S. A. Marvel, R. E. Mirollo, S. H. Strogatz, Chaos 19 (2009); paper 2 (Li et al., 2026). Book:
``chapters/04_kuramoto_reduction.md``, equation (eq-ws).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .docstrings import fill_doc
from .kuramoto import CIRCLE_DOCS, KuramotoCoefficients, mobius, require_circle_layer
from .odes import solve_ode
from .validation import (
    SOLVERS,
    time_grid,
    validate_angles,
    validate_choice,
    validate_complex,
    validate_finite_array,
    validate_positive,
)

__all__ = ["ws_reconstruct", "WSSolution", "solve_watanabe_strogatz"]

_DOC = {
    **CIRCLE_DOCS,
    "refs_ws": "References\n----------\nS. Watanabe, S. H. Strogatz, Physica D 74 (1994); paper 2 (Li et al., "
    "2026); book:\n``chapters/04_kuramoto_reduction.md``, equation (eq-ws).",
}


def _reconstruct(alpha, eta, c, theta0):
    """theta0 + (psi - psi[0])/2 with the continuous lift psi_k = eta + c_k + 2 arg(1 + alpha e^{-i(eta + c_k)})."""
    phase = np.asarray(eta)[..., None] + c
    psi = phase + 2 * np.angle(1 + np.asarray(alpha)[..., None] * np.exp(-1j * phase))
    return theta0 + 0.5 * (psi - psi[0])


@fill_doc(_DOC)
def ws_reconstruct(alpha, eta, c, theta0):
    r"""Token angles :math:`\theta_k(t)=\theta_k(0)+\frac12(\psi_k(t)-\psi_k(0))` from the WS variables.

    With the continuous lift :math:`\psi_k=\eta+c_k+2\arg(1+\alpha e^{-i(\eta+c_k)})` (each token keeps its branch).

    Parameters
    ----------
    alpha : complex array (m,)
        :math:`\alpha` in the open unit disk.
    eta : array (m,)
        The rotation :math:`\eta`.
    c : array (n,)
        The constants :math:`c_k`.
    theta0 : array (n,)
        Initial angles.

    Returns
    -------
    array (m, n)

    %(refs_ws)s
    """
    th0 = validate_angles(theta0, "theta0")
    alpha = np.atleast_1d(validate_complex(alpha, "alpha"))
    eta = np.atleast_1d(validate_finite_array(eta, "eta"))
    c = validate_finite_array(c, "c")
    if alpha.shape != eta.shape or alpha.ndim != 1:
        raise ValueError(f"alpha and eta must be 1-D arrays over time of one length, got {alpha.shape}, {eta.shape}")
    if c.shape != th0.shape:
        raise ValueError(f"c and theta0 must have the same shape, got {c.shape} and {th0.shape}")
    if np.any(np.abs(alpha) >= 1):
        raise ValueError("the WS variable alpha left the open unit disk")
    return _reconstruct(alpha, eta, c, th0)


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class WSSolution:
    r"""A run of :func:`solve_watanabe_strogatz`.

    Attributes
    ----------
    t : array (m,)
        Output times.
    alpha : complex array (m,)
        :math:`\alpha=\rho e^{i\Phi}`.
    eta : array (m,)
        The rotation :math:`\eta`.
    c, theta0 : array (n,)
        The constants of motion and the initial angles (which fix each token's branch).
    params : dict
        beta, n, tolerances, solver, nfev, alpha0.

    %(refs_ws)s
    """

    t: np.ndarray
    alpha: np.ndarray
    eta: np.ndarray
    c: np.ndarray
    theta0: np.ndarray
    params: dict

    @property
    def rho(self) -> np.ndarray:
        r""":math:`\rho=|\alpha|` (equal to :math:`|R_2|` only on the Ott–Antonsen manifold)."""
        return np.abs(self.alpha)

    @property
    def Phi(self) -> np.ndarray:
        """Argument of alpha, unwrapped in time."""
        return np.unwrap(np.angle(self.alpha))

    def theta(self) -> np.ndarray:
        """Token angles, continuous in time (:func:`ws_reconstruct`).

        Returns
        -------
        array (m, n)
        """
        return _reconstruct(self.alpha, self.eta, self.c, self.theta0)

    def order_parameter(self) -> np.ndarray:
        r""":math:`R_2(t)=\frac1n\sum_k\frac{\alpha+e^{i(\eta+c_k)}}{1+\bar\alpha e^{i(\eta+c_k)}}`.

        Returns
        -------
        complex array (m,)
        """
        return mobius(self.alpha, self.eta, self.c).mean(axis=-1)


@fill_doc(_DOC)
def solve_watanabe_strogatz(
    theta0, layer, t_span=10.0, *, t_eval=None, alpha0=None, method="DOP853", rtol=1e-11, atol=1e-13
) -> WSSolution:
    r"""Reduce n token angles to :math:`(\alpha,\eta)` and n constants, and integrate (O(n) per evaluation).

    Parameters
    ----------
    theta0 : array (n,)
        Initial angles.
    %(layer)s
    %(t_span)s
    t_eval : array or int, optional
        Output times, starting at t0.
    alpha0 : complex, optional
        Initial gauge (default :math:`R_2(0)`).
    %(solve_ivp)s

    Returns
    -------
    WSSolution

    %(refs_ws)s
    """
    th0 = validate_angles(theta0, "theta0")
    if th0.ndim != 1:
        raise ValueError(f"theta0 must be a 1-D array of n angles, got shape {th0.shape}")
    if alpha0 is not None and np.ndim(alpha0) != 0:
        raise ValueError(f"alpha0 must be one complex number (or None), got shape {np.shape(alpha0)}")
    a0 = complex(np.exp(2j * th0).mean()) if alpha0 is None else complex(validate_complex(alpha0, "alpha0"))
    if not abs(a0) < 1 - 1e-10:
        raise ValueError(
            f"the WS gauge needs |alpha0| < 1, got {abs(a0):.12g}: the tokens are (almost) one antipodal "
            "cluster pair; pass alpha0=0 to use another gauge"
        )
    # the constants: e^{ic_k} = (e^{i psi_k} - alpha0)/(1 - conj(alpha0) e^{i psi_k}), the inverse Moebius map
    c = np.angle(mobius(-a0, 0.0, 2 * th0))
    coef = KuramotoCoefficients.of(require_circle_layer(layer, "solve_watanabe_strogatz"))
    t0, T, t_eval = time_grid(t_span, t_eval)
    if t_eval[0] > t0:  # the first entry must be the initial gauge, as the reconstruction expects
        raise ValueError("t_eval must start at t0 so that the tokens can be reconstructed")
    method = validate_choice(method, "method", SOLVERS)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")

    def rhs(t, y):
        a = y[0] + 1j * y[1]
        R = np.mean(mobius(a, y[2], c))
        om, H = coef.omega(R), coef.forcing(R)
        ad = 2j * om * a + H - np.conj(H) * a * a
        return [ad.real, ad.imag, 2 * om + 2 * np.imag(H * np.conj(a))]

    options = dict(t_eval=t_eval, method=method, rtol=rtol, atol=atol, what="the WS integration")
    sol = solve_ode(rhs, [a0.real, a0.imag, 0.0], (t0, T), **options)
    params = dict(beta=float(coef.beta), n=int(th0.size), method=method, rtol=rtol, atol=atol, nfev=int(sol.nfev))
    params["alpha0"] = [a0.real, a0.imag]
    return WSSolution(t=sol.t, alpha=sol.y[0] + 1j * sol.y[1], eta=sol.y[2], c=c, theta0=th0, params=params)
