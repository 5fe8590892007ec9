r"""Linear self-attention on the circle is a second-harmonic Kuramoto–Daido model (paper 2).

Tokens :math:`x_k=(\cos\theta_k,\sin\theta_k)` moved by linear attention on the circle,

.. math:: \dot x_k = P^\perp_{x_k}\Big(\frac\beta n\sum_j\langle x_k,Ax_j\rangle Vx_j\Big),

obey exactly (any n; paper 2, Li et al. 2026; book: ``chapters/04_kuramoto_reduction.md``, equations
(eq-la) and (eq-kd))

.. math:: \dot\theta_k=\omega(R_2)+\operatorname{Im}\big(H(R_2)\,e^{-2i\theta_k}\big),\qquad
          R_2=\frac1n\sum_j e^{2i\theta_j},

with :math:`\omega(R)=\frac\beta2\operatorname{Im}[\bar a_+v_++\bar a_-v_-+\bar a_-v_+R+\bar a_+v_-\bar R]`
and :math:`H(R)=\frac\beta2[a_+v_+R+a_-v_-\bar R+a_+v_-+a_-v_+]`, where a real 2 x 2 matrix acts
on :math:`z=e^{i\theta}` as :math:`Mz=m_+z+m_-\bar z` (:func:`complex_parts`). The right-hand side
costs O(n): it sees the other tokens only through :math:`R_2`.

This module holds the encoding, the coefficients, the angle equations and their O(n) integrator,
and the dynamics of clustered states. The reductions live in
:mod:`tokendynamics.watanabe_strogatz` (exact, any n) and :mod:`tokendynamics.ott_antonsen`
(Poisson-kernel manifold, one complex ODE); the regimes in :mod:`tokendynamics.regimes`.

Convention: the score is :math:`\langle x, Ay\rangle` with :math:`A=Q^\top K`, as everywhere in the library
(:class:`~tokendynamics.attention.Attention`).

References
----------
S. Li, T. J. Maranzatto, J. Peszek, T. Teolis, S. Akkoc, K. Riedl, S. Ulukus, N. García Trillos, *On the
Diverse Dynamical Behaviors Arising in Deep Linear Transformers* (2026) (paper 2); Y. Kuramoto (1975);
H. Daido, *Order function and macroscopic mutual entrainment in uniformly coupled limit-cycle oscillators*,
Prog. Theor. Phys. 88 (1992). Book: ``chapters/04_kuramoto_reduction.md``, equations (eq-la), (eq-r2), (eq-kd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .docstrings import fill_doc
from .odes import solve_ode
from .validation import (
    PARAMETER_DOCS,
    time_grid,
    validate_angles,
    validate_beta,
    validate_count,
    validate_finite_array,
    validate_matrix2,
    validate_solver,
    validate_tolerances,
)

__all__ = [
    "J",
    "complex_parts",
    "matrix_from_parts",
    "KuramotoCoefficients",
    "coefficients",
    "frequency_and_forcing",
    "daido_coefficients",
    "phase_velocity",
    "order_parameter",
    "PhaseSolution",
    "solve_phases",
    "cluster_velocity",
    "transverse_exponent",
]

#: Rotation by :math:`+\pi/2` (counter-clockwise); :math:`\dot\theta=\langle\dot x,Jx\rangle`.
J = np.array([[0.0, -1.0], [1.0, 0.0]])
J.flags.writeable = False

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **PARAMETER_DOCS,
    "R": "R : complex or complex array\n    Order parameter :math:`R_2`.",
    # the Parameters and Returns sections of the cluster-pair functions
    "cluster_sections": (
        "Parameters\n----------\ntheta : float or array\n    Angle :math:`\\theta` of the cluster.\n"
        + PARAMETER_DOCS["matrices2_beta"]
        + "\n\nReturns\n-------\nfloat or array"
    ),
}

# ---------------------------------------------------------------------------------------------
# complex encoding of 2 x 2 matrices (paper 2; book chapter 04_kuramoto_reduction)
# ---------------------------------------------------------------------------------------------


def complex_parts(M, name: str = "M") -> tuple[Any, Any]:
    r"""The pair :math:`(m_+, m_-)` with :math:`Mz=m_+z+m_-\bar z` for a real 2 x 2 matrix.

    .. math:: m_+=\tfrac12[(m_{11}+m_{22})+i(m_{21}-m_{12})],\qquad
              m_-=\tfrac12[(m_{11}-m_{22})+i(m_{21}+m_{12})].

    Identities: :math:`\operatorname{tr}M=2\operatorname{Re}m_+`, :math:`\det M=|m_+|^2-|m_-|^2`,
    singular values :math:`|m_+|\pm|m_-|`.

    Parameters
    ----------
    M : array (2, 2) or (..., 2, 2)
        Real matrix or stack.
    name : str
        Names ``M`` in error messages.

    Returns
    -------
    m_plus, m_minus : complex or complex array (...)
        The complex parts (complex scalars for one matrix).

    References
    ----------
    Paper 2 (Li et al., 2026), the complex encoding of 2 x 2 matrices; book:
    ``chapters/04_kuramoto_reduction.md`` (before equation (eq-kd)).

    Examples
    --------
    >>> complex_parts([[0.0, -1.0], [1.0, 0.0]])  # the rotation J acts as z -> i z
    (1j, 0j)
    """
    M = validate_matrix2(M, name)
    m11, m12, m21, m22 = M[..., 0, 0], M[..., 0, 1], M[..., 1, 0], M[..., 1, 1]
    plus = 0.5 * ((m11 + m22) + 1j * (m21 - m12))
    minus = 0.5 * ((m11 - m22) + 1j * (m21 + m12))
    if M.ndim == 2:
        return complex(plus), complex(minus)
    return plus, minus


def matrix_from_parts(m_plus, m_minus) -> np.ndarray:
    r"""The real 2 x 2 matrix with :math:`Mz=m_+z+m_-\bar z` (inverse of :func:`complex_parts`).

    .. math:: M=\begin{pmatrix}\operatorname{Re}(m_++m_-)&\operatorname{Im}(m_--m_+)\\
              \operatorname{Im}(m_++m_-)&\operatorname{Re}(m_+-m_-)\end{pmatrix}.

    Parameters
    ----------
    m_plus, m_minus : complex or complex array
        The complex parts (broadcast together).

    Returns
    -------
    array (..., 2, 2)

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``.
    """
    p = np.asarray(m_plus)
    q = np.asarray(m_minus)
    for arr, nm in ((p, "m_plus"), (q, "m_minus")):
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool) or not np.all(np.isfinite(arr)):
            raise ValueError(f"{nm} must be a finite complex number or array, got {arr!r:.60}")
    p, q = p.astype(complex), q.astype(complex)
    M = np.empty(np.broadcast_shapes(p.shape, q.shape) + (2, 2))
    M[..., 0, 0] = p.real + q.real
    M[..., 1, 1] = p.real - q.real
    M[..., 1, 0] = p.imag + q.imag
    M[..., 0, 1] = q.imag - p.imag
    return M


# ---------------------------------------------------------------------------------------------
# the Kuramoto–Daido coefficients (paper 2; book equation (eq-kd))
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class KuramotoCoefficients:
    r"""The complex parts of :math:`A` and :math:`V` and :math:`\beta`: everything the d = 2 dynamics need.

    Fields may be complex arrays of a common batch shape (stacks of layers). Methods evaluate
    :math:`\omega(R)` (:meth:`omega`), :math:`H(R)` (:meth:`forcing`) and the angle velocity
    (:meth:`phase_velocity`).

    Attributes
    ----------
    a_plus, a_minus : complex or complex array
        Complex parts of :math:`A` (:func:`complex_parts`).
    v_plus, v_minus : complex or complex array
        Complex parts of :math:`V`.
    beta : float or array
        Inverse temperature.

    References
    ----------
    Paper 2 (Li et al., 2026), the d = 2 reduction of linear attention to a second-harmonic Kuramoto–Daido model;
    book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """

    a_plus: complex | np.ndarray
    a_minus: complex | np.ndarray
    v_plus: complex | np.ndarray
    v_minus: complex | np.ndarray
    beta: float | np.ndarray = 1.0

    @fill_doc(_DOC)
    def omega(self, R):
        r"""The frequency :math:`\omega(R)` of the Kuramoto–Daido form.

        .. math:: \omega(R)=\frac\beta2\operatorname{Im}[\bar a_+v_++\bar a_-v_-+\bar a_-v_+R+\bar a_+v_-\bar R].

        Parameters
        ----------
        %(R)s

        Returns
        -------
        float or array
            :math:`\omega(R)` (real).
        """
        ap, am, vp, vm = self.a_plus, self.a_minus, self.v_plus, self.v_minus
        R = np.asarray(R)
        return (
            0.5
            * self.beta
            * np.imag(np.conj(ap) * vp + np.conj(am) * vm + np.conj(am) * vp * R + np.conj(ap) * vm * np.conj(R))
        )

    @fill_doc(_DOC)
    def forcing(self, R):
        r"""The forcing :math:`H(R)=\frac\beta2[a_+v_+R+a_-v_-\bar R+a_+v_-+a_-v_+]`.

        Parameters
        ----------
        %(R)s

        Returns
        -------
        complex or complex array
            :math:`H(R)`.
        """
        ap, am, vp, vm = self.a_plus, self.a_minus, self.v_plus, self.v_minus
        R = np.asarray(R)
        return 0.5 * self.beta * (ap * vp * R + am * vm * np.conj(R) + ap * vm + am * vp)

    def phase_velocity(self, theta, R=None):
        r"""Angle velocities :math:`\dot\theta_k=\omega(R_2)+\operatorname{Im}(H(R_2)e^{-2i\theta_k})`.

        Parameters
        ----------
        theta : array (..., n)
            Angles.
        R : complex or complex array, optional
            :math:`R_2` to use (default: the order parameter of ``theta``).

        Returns
        -------
        array (..., n)
        """
        e = np.exp(2j * theta)
        if R is None:
            R = e.mean(axis=-1)
        R = np.asarray(R)[..., None]
        return self.omega(R) + np.imag(self.forcing(R) * np.conj(e))


@fill_doc(_DOC)
def coefficients(A, V, beta=1.0) -> KuramotoCoefficients:
    r"""The :class:`KuramotoCoefficients` of linear attention with matrices ``A``, ``V`` (stacks allowed).

    ``A`` is the score matrix of the library convention :math:`\langle x, Ay\rangle`.

    Parameters
    ----------
    A, V : array (2, 2) or (..., 2, 2)
        Score and value matrices.
    %(beta)s

    Returns
    -------
    KuramotoCoefficients

    References
    ----------
    Paper 2 (Li et al., 2026), the d = 2 reduction of linear attention to a second-harmonic Kuramoto–Daido model;
    book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """
    ap, am = complex_parts(A, "A")
    vp, vm = complex_parts(V, "V")
    return KuramotoCoefficients(ap, am, vp, vm, validate_beta(beta))


@fill_doc(_DOC)
def frequency_and_forcing(A, V, beta=1.0, R=0.0):
    r"""The pair :math:`(\omega(R), H(R))` of the Kuramoto–Daido form.

    .. math:: \dot\theta_k=\omega(R_2)+\operatorname{Im}\big(H(R_2)e^{-2i\theta_k}\big).

    Use :func:`coefficients` to evaluate them repeatedly.

    Parameters
    ----------
    %(matrices2_beta)s
    R : complex or complex array
        Order parameter :math:`R_2` (vectorised).

    Returns
    -------
    omega : float or array
        :math:`\omega(R)`.
    H : complex or complex array
        :math:`H(R)`.

    References
    ----------
    Paper 2 (Li et al., 2026), the d = 2 reduction of linear attention to a second-harmonic Kuramoto–Daido model;
    book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """
    c = coefficients(A, V, beta)
    return c.omega(R), c.forcing(R)


@fill_doc(_DOC)
def daido_coefficients(A, V) -> dict[str, complex]:
    r"""The coefficients :math:`b_1,b_2,b_3,c_1,c_2` of the authors' code for paper 2, without :math:`\beta`.

    :math:`\dot\theta=\beta[C(R)+2\operatorname{Re}(B(R)e^{2i\theta})]`, :math:`B=b_1R+b_2\bar R+b_3`,
    :math:`C=c_1R+\bar c_1\bar R+c_2`, with :math:`b_1=\tfrac i4\bar a_-\bar v_-`,
    :math:`b_2=\tfrac i4\bar a_+\bar v_+`, :math:`b_3=\tfrac i4(\bar a_+\bar v_-+\bar a_-\bar v_+)`,
    :math:`c_1=-\tfrac i4(\bar a_-v_+-a_+\bar v_-)`, :math:`c_2=\tfrac12\operatorname{Im}(\bar a_+v_++\bar a_-v_-)`.
    So :math:`\omega=\beta C` and :math:`H=2i\beta\bar B`.

    Parameters
    ----------
    %(matrices2)s

    Returns
    -------
    dict
        ``{"b1", "b2", "b3", "c1", "c2"}`` (complex; ``c2`` real).

    References
    ----------
    Paper 2 (Li et al., 2026) and its authors' code, https://github.com/TMaranzatto/attention_dynamics
    (provenance [R]); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """
    ap, am = complex_parts(A, "A")
    vp, vm = complex_parts(V, "V")
    c = np.conj
    return {
        "b1": 0.25j * c(am) * c(vm),
        "b2": 0.25j * c(ap) * c(vp),
        "b3": 0.25j * (c(ap) * c(vm) + c(am) * c(vp)),
        "c1": -0.25j * (c(am) * vp - ap * c(vm)),
        "c2": 0.5 * np.imag(c(ap) * vp + c(am) * vm),
    }


# ---------------------------------------------------------------------------------------------
# the angle equations (any n), O(n)
# ---------------------------------------------------------------------------------------------


def order_parameter(theta, m: int = 2):
    r"""Kuramoto–Daido order parameter :math:`R_m=\frac1n\sum_j e^{im\theta_j}` over the last axis.

    :math:`m=2` is the natural one for linear attention (antipodal tokens count as one cluster;
    :math:`|R_2|=1` iff the tokens sit in one antipodal pair); :math:`m=1` is a diagnostic
    (:math:`|R_1|\approx 0` for two balanced antipodal clusters).

    Parameters
    ----------
    theta : array (..., n)
        Angles.
    m : int
        Harmonic (>= 1).

    Returns
    -------
    complex or complex array (...)
        :math:`R_m`.

    References
    ----------
    H. Daido (1992); paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-r2).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(abs(order_parameter(np.array([0.3, 0.3 + np.pi])))), 12)  # one antipodal pair
    1.0
    """
    m = validate_count(m, "m")
    th = validate_angles(theta)
    return np.exp(1j * m * th).mean(axis=-1)


@fill_doc(_DOC)
def phase_velocity(theta, A, V, beta=1.0):
    r"""Exact angle velocities of linear attention on the circle, O(n) through :math:`R_2`.

    .. math:: \dot\theta_k=\frac\beta n\sum_j\langle x_k,Ax_j\rangle\langle Vx_j,Jx_k\rangle
              =\omega(R_2)+\operatorname{Im}\big(H(R_2)e^{-2i\theta_k}\big).

    ``theta`` has shape (n,) or (..., n) (a batch of configurations sharing ``A``, ``V``).
    Equals the tangent field of ``Attention("linear", A=A, V=V, beta=beta)`` on the circle,
    :math:`\langle\dot x_k,Jx_k\rangle`, to round-off.

    Parameters
    ----------
    theta : array (n,) or (..., n)
        Angles.
    %(matrices2_beta)s

    Returns
    -------
    array like ``theta``
        :math:`\dot\theta_k`.

    References
    ----------
    Paper 2 (Li et al., 2026), the d = 2 reduction of linear attention to a second-harmonic Kuramoto–Daido model;
    book: ``chapters/04_kuramoto_reduction.md``, equations (eq-la) and (eq-kd).
    """
    th = validate_angles(theta)
    A = validate_matrix2(A, "A")
    V = validate_matrix2(V, "V")
    if A.ndim != 2 or V.ndim != 2:
        raise ValueError("phase_velocity takes one pair of 2 x 2 matrices A, V")
    return coefficients(A, V, beta).phase_velocity(th)


@dataclass(frozen=True, eq=False)
class PhaseSolution:
    """Angles of the tokens along a run of the angle equations.

    Attributes
    ----------
    t : array (m,)
        Output times.
    theta : array (m, n) or (m, ..., n)
        Angles, unwrapped in time (continuous), so each token keeps its branch.
    params : dict
        A, V, beta, tolerances, solver, nfev.

    References
    ----------
    Paper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """

    t: np.ndarray
    theta: np.ndarray
    params: dict

    def order_parameter(self, m: int = 2) -> np.ndarray:
        """:math:`R_m(t)` along the run.

        Parameters
        ----------
        m : int
            Harmonic.

        Returns
        -------
        complex array (m_times, ...)
        """
        return order_parameter(self.theta, m)

    def tokens(self) -> np.ndarray:
        r"""Planar tokens :math:`x_i(t)=(\cos\theta_i(t),\sin\theta_i(t))` at the stored times.

        Returns
        -------
        array (m, ..., n, 2)
            Unit vectors, one per angle of ``theta`` (m stored times).
        """
        return np.stack([np.cos(self.theta), np.sin(self.theta)], axis=-1)


@fill_doc(_DOC)
def solve_phases(
    theta0,
    A,
    V,
    beta=1.0,
    t_span=10.0,
    *,
    t_eval=None,
    method: str = "DOP853",
    rtol: float = 1e-10,
    atol: float = 1e-12,
) -> PhaseSolution:
    r"""Integrate the n angle equations :func:`phase_velocity` with ``scipy.integrate.solve_ivp``.

    The same particle system as ``simulate(circle_tokens(theta0), Attention("linear", A=A, V=V,
    beta=beta), ..., sphere=True)``, written in the O(n) Kuramoto–Daido form: use it for large n
    (e.g. the Ott–Antonsen accuracy study). Angles are integrated unwrapped. ``theta0`` of shape
    (..., n) integrates independent configurations (e.g. seeds) at once; ``theta`` then has shape
    (m, ..., n).

    Parameters
    ----------
    theta0 : array (n,) or (..., n)
        Initial angles.
    %(matrices2_beta)s
    %(t_span)s
    t_eval : array or int, optional
        Output times (or their number).
    %(solve_ivp)s

    Returns
    -------
    PhaseSolution

    Raises
    ------
    NonFiniteError
        The solver failed or the angles became non-finite.

    References
    ----------
    Paper 2 (Li et al., 2026), the d = 2 reduction of linear attention to a second-harmonic Kuramoto–Daido model;
    book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """
    th0 = validate_angles(theta0, "theta0")
    shape = th0.shape
    A = validate_matrix2(A, "A")
    V = validate_matrix2(V, "V")
    coef = coefficients(A, V, beta)
    t0, T, t_eval = time_grid(t_span, t_eval)
    method = validate_solver(method, "method")
    rtol, atol = validate_tolerances(rtol, atol)

    def rhs(t, th):
        return coef.phase_velocity(th.reshape(shape)).ravel()

    what = "the angle equations"
    sol = solve_ode(rhs, th0.ravel(), (t0, T), t_eval=t_eval, method=method, rtol=rtol, atol=atol, what=what)
    params = {
        "A": A.tolist(),
        "V": V.tolist(),
        "beta": float(coef.beta),
        "n": int(shape[-1]),
        "method": method,
        "rtol": rtol,
        "atol": atol,
        "nfev": int(sol.nfev),
    }
    return PhaseSolution(t=sol.t, theta=sol.y.T.reshape((sol.t.size,) + shape), params=params)


# ---------------------------------------------------------------------------------------------
# clustered states (paper 2; book chapter 04_kuramoto_reduction)
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
def cluster_velocity(theta, A, V, beta=1.0):
    r"""Angle velocity of one antipodal cluster pair at :math:`\pm x_\theta`.

    .. math:: \dot\theta_c=\beta\,q_A(\theta)\,s_V(\theta),\quad q_A=x_\theta^\top Ax_\theta,\quad
              s_V=\langle Vx_\theta,Jx_\theta\rangle .

    Zeros of :math:`q_A` are isotropic directions of :math:`A`, zeros of :math:`s_V` real
    eigenvectors of :math:`V`.

    %(cluster_sections)s
        :math:`\dot\theta_c`.

    References
    ----------
    Paper 2 (Li et al., 2026), cluster dynamics in d = 2 (provenance [D✓]); book:
    ``chapters/04_kuramoto_reduction.md``.
    """
    th = validate_finite_array(theta, "theta")
    ap, am = complex_parts(A, "A")
    vp, vm = complex_parts(V, "V")
    e = np.exp(-2j * th)
    q = ap.real + np.real(am * e)
    s = vp.imag + np.imag(vm * e)
    return validate_beta(beta) * q * s


@fill_doc(_DOC)
def transverse_exponent(theta, A, V, beta=1.0):
    r"""Growth rate of the width of a cluster pair at :math:`\pm x_\theta`.

    .. math:: \lambda_\perp(\theta)=\beta\big[\langle Jx,Ax\rangle s_V(\theta)-q_A(\theta)\,x^\top Vx\big]
              =-2\operatorname{Re}\big(H(e^{2i\theta})e^{-2i\theta}\big).

    A negative exponent means the cluster pair attracts nearby tokens (transverse stability).

    %(cluster_sections)s
        :math:`\lambda_\perp(\theta)`.

    References
    ----------
    Paper 2 (Li et al., 2026), cluster dynamics and transverse stability in d = 2 (provenance [D✓]); book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """
    th = validate_finite_array(theta, "theta")
    coef = coefficients(A, V, beta)
    return -2.0 * np.real(coef.forcing(np.exp(2j * th)) * np.exp(-2j * th))
