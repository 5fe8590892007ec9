r"""The Watanabe–Strogatz reduction: linear attention on the circle as three real ODEs, for every n.

The double angles :math:`\psi_k=2\theta_k` obey :math:`\dot\psi_k=\Omega+\operatorname{Im}(\mathcal He^{-i\psi_k})`
with the common :math:`\Omega=2\omega(R_2)`, :math:`\mathcal H=2H(R_2)` (:mod:`tokendynamics.kuramoto`). Hence,
for every n,

.. math:: e^{i\psi_k(t)}=\frac{\alpha(t)+e^{i(\eta(t)+c_k)}}{1+\bar\alpha(t)e^{i(\eta(t)+c_k)}},\qquad
          \dot\alpha=2i\omega\alpha+H-\bar H\alpha^2,\quad \dot\eta=2\omega+2\operatorname{Im}(H\bar\alpha),

with constants :math:`c_k` and :math:`R_2=\frac1n\sum_k e^{i\psi_k}` closing the system: three real ODEs
replace n (Watanabe and Strogatz 1994; Marvel, Mirollo and Strogatz 2009). Initialisation as in Gong and
Pikovsky: :math:`\alpha(0)=R_2(0)`, :math:`\eta(0)=0`. The same reduction in any dimension is the projective
flow of :mod:`tokendynamics.projective`.

References
----------
Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-ws).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .docstrings import fill_doc
from .kuramoto import CIRCLE_DOCS, KuramotoCoefficients, require_circle_layer
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

__all__ = ["ws_constants", "ws_order_parameter", "ws_reconstruct", "mobius", "WSSolution", "solve_watanabe_strogatz"]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **CIRCLE_DOCS,
    "refs_ws": """
        S. Watanabe, S. H. Strogatz, *Constants of motion for superconducting Josephson arrays*, Physica D 74
        (1994); paper 2 (Li et al., 2026), the Watanabe–Strogatz reduction; book:
        ``chapters/04_kuramoto_reduction.md``, equation (eq-ws).
    """,
    "variables": """
        alpha : complex or complex array (...)
            :math:`\\alpha`, inside the unit disc.
        eta : float or array (...)
            The rotation :math:`\\eta`.
        c : array (n,)
            The Watanabe–Strogatz constants.
    """,
}


def _mobius(alpha, eta, c):
    w = np.exp(1j * (np.asarray(eta)[..., None] + c))
    alpha = np.asarray(alpha)[..., None]
    return (alpha + w) / (1 + np.conj(alpha) * w)


@fill_doc(_DOC)
def mobius(alpha, eta, c):
    r"""The Möbius map of the reduction applied to the constants: :math:`e^{i\psi_k}=\frac{\alpha+w_k}{1+\bar\alpha
    w_k}`, :math:`w_k=e^{i(\eta+c_k)}`, :math:`|\alpha|<1`.

    Parameters
    ----------
    %(variables)s

    Returns
    -------
    array (..., n)
        The points :math:`e^{i\psi_k}` on the unit circle.

    References
    ----------
    %(refs_ws)s
    """
    return _mobius(validate_complex(alpha, "alpha"), validate_finite_array(eta, "eta"), validate_finite_array(c, "c"))


def _lifted_psi(alpha, eta, c):
    r"""A continuous lift of :math:`\psi_k`: :math:`\eta+c_k+2\arg(1+\alpha e^{-i(\eta+c_k)})` (:math:`|\alpha|<1`)."""
    phase = np.asarray(eta)[..., None] + c
    return phase + 2 * np.angle(1 + np.asarray(alpha)[..., None] * np.exp(-1j * phase))


def _constants(th, alpha0):
    if th.ndim != 1:
        raise ValueError(f"theta0 must be a 1-D array of n angles, got shape {th.shape}")
    if alpha0 is not None and np.ndim(alpha0) != 0:
        raise ValueError(f"alpha0 must be one complex number (or None), got shape {np.shape(alpha0)}")
    a = complex(np.exp(2j * th).mean()) if alpha0 is None else complex(validate_complex(alpha0, "alpha0"))
    if not abs(a) < 1 - 1e-10:
        raise ValueError(
            f"the WS gauge needs |alpha0| < 1, got {abs(a):.12g}: the tokens are (almost) one antipodal "
            "cluster pair; pass alpha0=0 to use another gauge"
        )
    return a, np.angle(_mobius(-a, 0.0, 2 * th))  # the inverse Moebius map of the gauge alpha0


@fill_doc(_DOC)
def ws_constants(theta0, alpha0=None):
    r"""The constants :math:`c_k`, :math:`e^{ic_k}=\frac{e^{i\psi_k(0)}-\alpha_0}{1-\bar\alpha_0e^{i\psi_k(0)}}`.

    ``alpha0`` defaults to :math:`R_2(0)` (Gong–Pikovsky); any point of the open disk is a valid gauge
    (``alpha0=0`` gives :math:`c_k=\psi_k(0)`).

    Parameters
    ----------
    theta0 : array (n,)
        Initial angles (:math:`\psi_k(0)=2\theta_k(0)`).
    alpha0 : complex, optional
        The gauge :math:`\alpha_0`, :math:`|\alpha_0|<1` (default :math:`R_2(0)`).

    Returns
    -------
    alpha0 : complex
        The gauge used.
    c : array (n,)
        The constants :math:`c_k`.

    References
    ----------
    %(refs_ws)s
    """
    return _constants(validate_angles(theta0, "theta0"), alpha0)


@fill_doc(_DOC)
def ws_order_parameter(alpha, eta, c):
    r"""The order parameter :math:`R_2=\frac1n\sum_k\frac{\alpha+e^{i(\eta+c_k)}}{1+\bar\alpha e^{i(\eta+c_k)}}`.

    Parameters
    ----------
    %(variables)s

    Returns
    -------
    complex or complex array (...)

    References
    ----------
    %(refs_ws)s
    """
    return mobius(alpha, eta, c).mean(axis=-1)


@fill_doc(_DOC)
def ws_reconstruct(alpha, eta, c, theta0):
    r"""Token angles :math:`\theta_k(t)` from the WS variables, each on the branch it had at t = 0.

    ``alpha`` and ``eta`` run over time from the initial gauge of ``theta0``. The double angle is lifted
    continuously, :math:`\psi_k=\eta+c_k+2\arg(1+\alpha e^{-i(\eta+c_k)})`, so
    :math:`\theta_k(t)=\theta_k(0)+\frac12(\psi_k(t)-\psi_k(0))` keeps :math:`\theta_k` apart from
    :math:`\theta_k+\pi` without any sampling condition.

    Parameters
    ----------
    %(variables)s
    theta0 : array (n,)
        Initial angles.

    Returns
    -------
    array (m, n)
        :math:`\theta_k(t)`.

    References
    ----------
    %(refs_ws)s
    """
    th0 = validate_angles(theta0, "theta0")
    alpha = np.atleast_1d(validate_complex(alpha, "alpha"))
    eta = np.atleast_1d(validate_finite_array(eta, "eta"))
    c = validate_finite_array(c, "c")
    if alpha.shape != eta.shape or alpha.ndim != 1:
        raise ValueError(
            f"alpha and eta must be 1-D arrays over time of the same length, got {alpha.shape}, {eta.shape}"
        )
    if c.shape != th0.shape:
        raise ValueError(f"c and theta0 must have the same shape, got {c.shape} and {th0.shape}")
    if np.any(np.abs(alpha) >= 1):
        raise ValueError("the WS variable alpha left the open unit disk")
    psi = _lifted_psi(alpha, eta, c)
    return th0 + 0.5 * (psi - psi[0])


@dataclass(frozen=True, eq=False)
class WSSolution:
    r"""A run of the Watanabe–Strogatz equations.

    Attributes
    ----------
    t : array (m,)
        Output times.
    alpha : complex array (m,)
        :math:`\alpha=\rho e^{i\Phi}`.
    eta : array (m,)
        The rotation :math:`\eta`.
    c : array (n,)
        The constants of motion (one per token).
    theta0 : array (n,)
        Initial angles (they fix each token's branch).
    params : dict
        beta, tolerances, solver and evaluation counts.

    References
    ----------
    S. Watanabe, S. H. Strogatz, Physica D 74 (1994); paper 2 (Li et al., 2026); book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-ws).
    """

    t: np.ndarray
    alpha: np.ndarray
    eta: np.ndarray
    c: np.ndarray
    theta0: np.ndarray
    params: dict

    @property
    def rho(self) -> np.ndarray:
        r"""Modulus :math:`\rho=|\alpha|` (equal to :math:`|R_2|` only on the Ott–Antonsen manifold)."""
        return np.abs(self.alpha)

    @property
    def Phi(self) -> np.ndarray:
        """Argument of alpha, unwrapped in time."""
        return np.unwrap(np.angle(self.alpha))

    def theta(self) -> np.ndarray:
        r"""Reconstructed token angles, continuous in time (:func:`ws_reconstruct`).

        Returns
        -------
        array (m, n)
        """
        return ws_reconstruct(self.alpha, self.eta, self.c, self.theta0)

    def order_parameter(self) -> np.ndarray:
        """:math:`R_2(t)` from the WS variables (:func:`ws_order_parameter`).

        Returns
        -------
        complex array (m,)
        """
        return ws_order_parameter(self.alpha, self.eta, self.c)


@fill_doc(_DOC)
def solve_watanabe_strogatz(
    theta0, layer, t_span=10.0, *, t_eval=None, alpha0=None, method="DOP853", rtol=1e-11, atol=1e-13
) -> WSSolution:
    r"""Reduce n token angles to :math:`(\alpha,\eta)` plus n constants, and integrate.

    State :math:`(\operatorname{Re}\alpha,\operatorname{Im}\alpha,\eta)` (the complex form avoids the polar
    singularity at :math:`\rho=0`), with :math:`R_2` from :func:`ws_order_parameter` (O(n) per evaluation).
    Reconstruct the tokens with :meth:`WSSolution.theta`.

    Parameters
    ----------
    theta0 : array (n,)
        Initial angles.
    %(layer)s
    %(t_span)s
    t_eval : array or int, optional
        Output times.
    alpha0 : complex, optional
        Initial gauge (default :math:`R_2(0)`, as in Gong and Pikovsky).
    %(solve_ivp)s

    Returns
    -------
    WSSolution

    References
    ----------
    %(refs_ws)s
    S. A. Marvel, R. E. Mirollo, S. H. Strogatz, Chaos 19 (2009).
    """
    th0 = validate_angles(theta0, "theta0")
    a0, c = _constants(th0, alpha0)
    coef = KuramotoCoefficients.of(require_circle_layer(layer, "solve_watanabe_strogatz"))
    t0, T, t_eval = time_grid(t_span, t_eval)
    method = validate_choice(method, "method", SOLVERS)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")

    def rhs(t, y):
        a = y[0] + 1j * y[1]
        R = np.mean(_mobius(a, y[2], c))
        om, H = coef.omega(R), coef.forcing(R)
        ad = 2j * om * a + H - np.conj(H) * a * a
        return [ad.real, ad.imag, 2 * om + 2 * np.imag(H * np.conj(a))]

    options = dict(t_eval=t_eval, method=method, rtol=rtol, atol=atol, what="the WS integration")
    sol = solve_ode(rhs, [a0.real, a0.imag, 0.0], (t0, T), **options)
    if sol.t[0] > t0:  # the first entry must be the initial gauge, as ws_reconstruct expects
        raise ValueError("t_eval must start at t0 so that the tokens can be reconstructed")
    params = dict(beta=float(coef.beta), n=int(th0.size), method=method, rtol=rtol, atol=atol, nfev=int(sol.nfev))
    params["alpha0"] = [a0.real, a0.imag]
    return WSSolution(t=sol.t, alpha=sol.y[0] + 1j * sol.y[1], eta=sol.y[2], c=c, theta0=th0, params=params)
