r"""Linear self-attention on the circle is a second-harmonic Kuramoto–Daido model (paper 2).

Tokens :math:`x_k=(\cos\theta_k,\sin\theta_k)` moved by linear attention on the circle obey exactly (any n)

.. math:: \dot\theta_k=\omega(R_2)+\operatorname{Im}\big(H(R_2)\,e^{-2i\theta_k}\big),\qquad
          R_2=\frac1n\sum_j e^{2i\theta_j},

with :math:`\omega(R)=\frac\beta2\operatorname{Im}[\bar a_+v_++\bar a_-v_-+\bar a_-v_+R+\bar a_+v_-\bar R]`,
:math:`H(R)=\frac\beta2[a_+v_+R+a_-v_-\bar R+a_+v_-+a_-v_+]`, where a real 2 x 2 matrix acts on :math:`z=e^{i\theta}`
as :math:`Mz=m_+z+m_-\bar z` (:func:`complex_parts`). The d = 2 modules (this one, ``watanabe_strogatz``,
``ott_antonsen``, ``regimes``) take the model as an :class:`~tokendynamics.attention.Attention` layer, checked once
by :func:`require_circle_layer`.

References
----------
S. Li, T. J. Maranzatto, J. Peszek, T. Teolis, S. Akkoc, K. Riedl, S. Ulukus, N. García Trillos, *On the
Diverse Dynamical Behaviors Arising in Deep Linear Transformers* (2026) (paper 2); H. Daido, Prog. Theor.
Phys. 88 (1992). Book: ``chapters/04_kuramoto_reduction.md``, equations (eq-la), (eq-r2), (eq-kd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import Attention
from .docstrings import fill_doc
from .odes import solve_ode
from .validation import (
    PARAMETER_DOCS,
    SOLVERS,
    real_array,
    time_grid,
    validate_angles,
    validate_choice,
    validate_count,
    validate_finite_array,
    validate_matrix2,
    validate_positive,
)  # fmt: skip

__all__ = [
    "J", "complex_parts", "require_circle_layer", "linear_layers", "KuramotoCoefficients", "coefficients",
    "daido_coefficients", "mobius", "phase_velocity", "order_parameter", "PhaseSolution", "solve_phases",
    "cluster_velocity", "transverse_exponent",
]  # fmt: skip

#: Rotation by :math:`+\pi/2` (counter-clockwise); :math:`\dot\theta=\langle\dot x,Jx\rangle`.
J = np.array([[0.0, -1.0], [1.0, 0.0]])
J.flags.writeable = False

#: Numpydoc paragraphs shared by the d = 2 modules (:func:`~tokendynamics.docstrings.fill_doc`); ``refs_*``
#: fragments are whole References sections.
CIRCLE_DOCS = {
    **PARAMETER_DOCS,
    "layer": "layer : Attention\n    Linear attention on the circle: one head, d = 2\n"
    "    (:func:`~tokendynamics.kuramoto.require_circle_layer`).",
    "layers": "layer : Attention\n    Linear attention on the circle (one head, d = 2), or a batch of such layers.",
    "refs_kd": "References\n----------\nPaper 2 (Li et al., 2026); book: ``chapters/04_kuramoto_reduction.md``, "
    "equation (eq-kd).",
}
_DOC = {**CIRCLE_DOCS, "theta": "theta : float or array\n    Angle :math:`\\theta` of the cluster pair."}
_DOC["R"] = "Parameters\n----------\nR : complex or complex array\n    Order parameter :math:`R_2`."


@fill_doc(_DOC)
def require_circle_layer(layer, what: str = "the d = 2 reductions of paper 2", *, batch: bool = False) -> Attention:
    """``layer`` itself if it is linear attention (the second-moment capability) with one head, d = 2, not causal.

    Parameters
    ----------
    layer : Attention
        The layer (a batch only with ``batch=True``).
    what : str
        What needs it (quoted in errors).
    batch : bool
        Accept a batch of layers (a leading axis).

    Returns
    -------
    Attention
        ``layer``; TypeError, CapabilityError or ValueError otherwise.

    %(refs_kd)s
    """
    if not isinstance(layer, Attention):
        raise TypeError(f"layer must be an Attention('linear', A=A, V=V, beta=beta), got {type(layer).__name__}")
    if layer.batch_size is not None and not batch:
        raise TypeError(f"{what} takes one layer, got a batch of {layer.batch_size} (use layer.member(b))")
    layer.kind.require("second_moment", what)
    if layer.d != 2 or layer.n_heads != 1 or layer.causal:
        raise ValueError(f"{what} needs one head of linear attention on the circle (d = 2, not causal), got {layer!r}")
    return layer


@fill_doc(_DOC)
def linear_layers(A, V, beta=1.0) -> Attention:
    """Linear attention with the matrices ``A``, ``V``: one layer, or a batch (leading axis) for stacks (B, d, d).

    Parameters
    ----------
    A, V : array (d, d) or (B, d, d)
        Score and value matrices (broadcast together).
    beta : float or array (B,)
        Inverse temperature(s).

    Returns
    -------
    Attention

    %(refs_kd)s
    """
    A, V = real_array(A, "A"), real_array(V, "V")
    if A.ndim == 2 and V.ndim == 2 and np.ndim(beta) == 0:
        return Attention("linear", A=A, V=V, beta=beta)
    B = np.broadcast_shapes(A.shape[:-2], V.shape[:-2], np.shape(beta))
    if len(B) != 1:
        raise ValueError(f"a batch of layers has one leading axis, got A {A.shape}, V {V.shape}, beta {np.shape(beta)}")
    pick = lambda M: np.broadcast_to(M, B + M.shape[-2:])  # noqa: E731
    return Attention("linear", A=pick(A), V=pick(V), beta=np.broadcast_to(np.asarray(beta, dtype=float), B))


def _parts(M) -> tuple[Any, Any]:
    m11, m12, m21, m22 = M[..., 0, 0], M[..., 0, 1], M[..., 1, 0], M[..., 1, 1]
    plus, minus = 0.5 * ((m11 + m22) + 1j * (m21 - m12)), 0.5 * ((m11 - m22) + 1j * (m21 + m12))
    return (complex(plus), complex(minus)) if M.ndim == 2 else (plus, minus)


@fill_doc(_DOC)
def complex_parts(M, name: str = "M") -> tuple[Any, Any]:
    r"""The pair :math:`m_\pm=\tfrac12[(m_{11}\pm m_{22})+i(m_{21}\mp m_{12})]` with :math:`Mz=m_+z+m_-\bar z`
    (:math:`\det M=|m_+|^2-|m_-|^2`, singular values :math:`|m_+|\pm|m_-|`).

    Parameters
    ----------
    M : array (2, 2) or (..., 2, 2)
        Real matrix or stack.
    name : str
        Names ``M`` in error messages.

    Returns
    -------
    m_plus, m_minus : complex or complex array (...)

    %(refs_kd)s

    Examples
    --------
    >>> complex_parts([[0.0, -1.0], [1.0, 0.0]])  # the rotation J acts as z -> i z
    (1j, 0j)
    """
    return _parts(validate_matrix2(M, name))


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class KuramotoCoefficients:
    r"""The complex parts of :math:`A`, :math:`V` and :math:`\beta` (arrays (B,) for a batch): all the dynamics need.

    Attributes
    ----------
    a_plus, a_minus, v_plus, v_minus : complex or complex array
        Complex parts of :math:`A` and :math:`V` (:func:`complex_parts`).
    beta : float or array
        Inverse temperature.

    %(refs_kd)s
    """

    a_plus: complex | np.ndarray
    a_minus: complex | np.ndarray
    v_plus: complex | np.ndarray
    v_minus: complex | np.ndarray
    beta: float | np.ndarray = 1.0

    @classmethod
    def of(cls, layer: Attention) -> KuramotoCoefficients:
        """The coefficients of a checked circle layer (:func:`~tokendynamics.kuramoto.require_circle_layer`; not again).

        Parameters
        ----------
        layer : Attention

        Returns
        -------
        KuramotoCoefficients
        """
        return cls(*_parts(layer.A[..., 0, :, :]), *_parts(layer.V[..., 0, :, :]), layer.beta)

    @fill_doc(_DOC)
    def omega(self, R):
        r""":math:`\omega(R)=\frac\beta2\operatorname{Im}[\bar a_+v_++\bar a_-v_-+\bar a_-v_+R+\bar a_+v_-\bar R]`.

        %(R)s

        Returns
        -------
        float or array
        """
        ap, am, vp, vm, c = self.a_plus, self.a_minus, self.v_plus, self.v_minus, np.conj
        R = np.asarray(R)
        return 0.5 * self.beta * np.imag(c(ap) * vp + c(am) * vm + c(am) * vp * R + c(ap) * vm * c(R))

    @fill_doc(_DOC)
    def forcing(self, R):
        r"""The forcing :math:`H(R)=\frac\beta2[a_+v_+R+a_-v_-\bar R+a_+v_-+a_-v_+]`.

        %(R)s

        Returns
        -------
        complex or complex array
        """
        ap, am, vp, vm = self.a_plus, self.a_minus, self.v_plus, self.v_minus
        R = np.asarray(R)
        return 0.5 * self.beta * (ap * vp * R + am * vm * np.conj(R) + ap * vm + am * vp)

    @fill_doc(_DOC)
    def cluster_velocity(self, theta):
        r"""Angle velocity :math:`\beta\,q_A(\theta)\,s_V(\theta)` of a cluster pair (:func:`cluster_velocity`).

        Parameters
        ----------
        %(theta)s

        Returns
        -------
        float or array
        """
        e = np.exp(-2j * theta)
        q, s = self.a_plus.real + np.real(self.a_minus * e), self.v_plus.imag + np.imag(self.v_minus * e)
        return self.beta * q * s


@fill_doc(_DOC)
def mobius(alpha, eta, c):
    r"""The Möbius images :math:`\frac{\alpha+w_k}{1+\bar\alpha w_k}`, :math:`w_k=e^{i(\eta+c_k)}`: the
    Watanabe–Strogatz map (the Ott–Antonsen one for uniform :math:`c_k`, :math:`\eta=0`).

    Parameters
    ----------
    alpha, eta : complex and float, or arrays (...)
        Points of the closed unit disk and rotations.
    c : array (n,)
        The constants :math:`c_k`.

    Returns
    -------
    complex array (..., n)

    %(refs_kd)s
    Equation (eq-ws).
    """
    w = np.exp(1j * (np.asarray(eta)[..., None] + c))
    alpha = np.asarray(alpha)[..., None]
    return (alpha + w) / (1 + np.conj(alpha) * w)


def _phase_velocity(coef: KuramotoCoefficients, theta):
    e = np.exp(2j * theta)
    R = np.asarray(e.mean(axis=-1))[..., None]
    return coef.omega(R) + np.imag(coef.forcing(R) * np.conj(e))


@fill_doc(_DOC)
def coefficients(layer) -> KuramotoCoefficients:
    r"""The :class:`KuramotoCoefficients` of linear attention on the circle (one layer or a batch).

    Parameters
    ----------
    %(layers)s

    Returns
    -------
    KuramotoCoefficients

    %(refs_kd)s
    """
    return KuramotoCoefficients.of(require_circle_layer(layer, "coefficients", batch=True))


@fill_doc(_DOC)
def daido_coefficients(layer) -> dict[str, complex]:
    r"""The coefficients :math:`b_1,b_2,b_3,c_1,c_2` of the authors' code, without :math:`\beta`.

    :math:`\dot\theta=\beta[C(R)+2\operatorname{Re}(B(R)e^{2i\theta})]`, :math:`B=b_1R+b_2\bar R+b_3`,
    :math:`C=c_1R+\bar c_1\bar R+c_2`: :math:`b_1=\tfrac i4\bar a_-\bar v_-`, :math:`b_2=\tfrac i4\bar a_+\bar v_+`,
    :math:`b_3=\tfrac i4(\bar a_+\bar v_-+\bar a_-\bar v_+)`, :math:`c_1=-\tfrac i4(\bar a_-v_+-a_+\bar v_-)`,
    :math:`c_2=\tfrac12\operatorname{Im}(\bar a_+v_++\bar a_-v_-)`; so :math:`\omega=\beta C`, :math:`H=2i\beta\bar B`.

    Parameters
    ----------
    %(layer)s

    Returns
    -------
    dict
        ``{"b1", "b2", "b3", "c1", "c2"}`` (complex; ``c2`` real).

    References
    ----------
    Paper 2 (Li et al., 2026) and its authors' code, https://github.com/TMaranzatto/attention_dynamics
    (provenance [R]); book: ``chapters/04_kuramoto_reduction.md``, equation (eq-kd).
    """
    k = KuramotoCoefficients.of(require_circle_layer(layer, "daido_coefficients"))
    ap, am, vp, vm, c = k.a_plus, k.a_minus, k.v_plus, k.v_minus, np.conj
    b1, b2, b3 = 0.25j * c(am) * c(vm), 0.25j * c(ap) * c(vp), 0.25j * (c(ap) * c(vm) + c(am) * c(vp))
    c1, c2 = -0.25j * (c(am) * vp - ap * c(vm)), 0.5 * np.imag(c(ap) * vp + c(am) * vm)
    return {"b1": b1, "b2": b2, "b3": b3, "c1": c1, "c2": c2}


def order_parameter(theta, m: int = 2):
    r"""Kuramoto–Daido order parameter :math:`R_m=\frac1n\sum_j e^{im\theta_j}` over the last axis
    (:math:`|R_2|=1` iff the tokens sit in one antipodal pair).

    Parameters
    ----------
    theta : array (..., n)
        Angles.
    m : int
        Harmonic (>= 1).

    Returns
    -------
    complex or complex array (...)

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
    return np.exp(1j * m * validate_angles(theta)).mean(axis=-1)


@fill_doc(_DOC)
def phase_velocity(theta, layer):
    r"""Exact angle velocities :math:`\dot\theta_k=\frac\beta n\sum_j\langle x_k,Ax_j\rangle\langle Vx_j,Jx_k\rangle
    =\omega(R_2)+\operatorname{Im}(H(R_2)e^{-2i\theta_k})` of linear attention on the circle, O(n).

    Parameters
    ----------
    theta : array (n,) or (..., n)
        Angles (several configurations on the leading axes).
    %(layer)s

    Returns
    -------
    array like ``theta``

    %(refs_kd)s
    """
    th = validate_angles(theta)
    return _phase_velocity(KuramotoCoefficients.of(require_circle_layer(layer, "phase_velocity")), th)


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class PhaseSolution:
    """Angles of the tokens along a run of :func:`solve_phases`.

    Attributes
    ----------
    t : array (m,)
        Output times.
    theta : array (m, n) or (m, ..., n)
        Angles, unwrapped in time (each token keeps its branch).
    params : dict
        beta, n, tolerances, solver, nfev.

    %(refs_kd)s
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


@fill_doc(_DOC)
def solve_phases(
    theta0, layer, t_span=10.0, *, t_eval=None, method: str = "DOP853", rtol: float = 1e-10, atol: float = 1e-12
) -> PhaseSolution:
    r"""Integrate the n angle equations :func:`phase_velocity` (``solve_ivp``): the particle system in O(n) form.

    Parameters
    ----------
    theta0 : array (n,) or (..., n)
        Initial angles (independent configurations on the leading axes).
    %(layer)s
    %(t_span)s
    t_eval : array or int, optional
        Output times.
    %(solve_ivp)s

    Returns
    -------
    PhaseSolution

    %(refs_kd)s
    """
    th0 = validate_angles(theta0, "theta0")
    coef = KuramotoCoefficients.of(require_circle_layer(layer, "solve_phases"))
    t0, T, t_eval = time_grid(t_span, t_eval)
    method = validate_choice(method, "method", SOLVERS)
    rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
    shape = th0.shape
    rhs = lambda t, th: _phase_velocity(coef, th.reshape(shape)).ravel()  # noqa: E731
    options = dict(t_eval=t_eval, method=method, rtol=rtol, atol=atol, what="the angle equations")
    sol = solve_ode(rhs, th0.ravel(), (t0, T), **options)
    params = dict(beta=float(coef.beta), n=int(shape[-1]), method=method, rtol=rtol, atol=atol, nfev=int(sol.nfev))
    return PhaseSolution(t=sol.t, theta=sol.y.T.reshape((sol.t.size,) + shape), params=params)


@fill_doc(_DOC)
def cluster_velocity(theta, layer):
    r"""Angle velocity :math:`\dot\theta_c=\beta\,q_A(\theta)\,s_V(\theta)` of one antipodal cluster pair at
    :math:`\pm x_\theta`, :math:`q_A=x_\theta^\top Ax_\theta`, :math:`s_V=\langle Vx_\theta,Jx_\theta\rangle`.

    Parameters
    ----------
    %(theta)s
    %(layers)s

    Returns
    -------
    float or array

    %(refs_kd)s
    """
    return coefficients(layer).cluster_velocity(validate_finite_array(theta, "theta"))


@fill_doc(_DOC)
def transverse_exponent(theta, layer):
    r"""Growth rate :math:`\lambda_\perp=\beta[\langle Jx,Ax\rangle s_V-q_A\,x^\top Vx]=-2\operatorname{Re}(H(e^{2i
    \theta})e^{-2i\theta})` of the width of a cluster pair at :math:`\pm x_\theta` (negative: transversally stable).

    Parameters
    ----------
    %(theta)s
    %(layers)s

    Returns
    -------
    float or array

    %(refs_kd)s
    """
    th = validate_finite_array(theta, "theta")
    return -2.0 * np.real(coefficients(layer).forcing(np.exp(2j * th)) * np.exp(-2j * th))
