r"""The Ott–Antonsen reduction of linear attention on the circle: one complex ODE (paper 2).

If the double angles :math:`\psi=2\theta` are distributed by a wrapped Cauchy (Poisson kernel)
law with centre :math:`z` (:math:`|z|<1`), they stay so, with :math:`R_2=z` and

.. math:: \dot z = 2i\,\omega(z)\,z + H(z) - \overline{H(z)}\,z^2
          \;=\;2i\beta\,(Bz^2+Cz+\bar B)

(:math:`\omega, H` of :mod:`tokendynamics.kuramoto`; book: ``chapters/04_kuramoto_reduction.md``, equation
(eq-oa)). The unit circle (clustered
states) is invariant, and so is the open disk. For a finite sample of n tokens the error
:math:`|R_2(t)-z(t)|` is :math:`O(n^{-1/2})` on bounded time intervals (paper 2's structural
stability; the exact constants of the paper: [I]).

For :math:`A=I` and :math:`\operatorname{tr}V=0` the flow is Hamiltonian up to a factor
(:func:`hamiltonian`; book: ``chapters/05_kuramoto_regimes.md``, equation (eq-hamiltonian)).

Structural stability over long times (:func:`oa_stability`): perturbations of the uniform law are
run with the particle system and compared, in :math:`W_1` on the circle of double angles
(:func:`~tokendynamics.transport.circle_wasserstein1`, which bounds the bounded-Lipschitz distance
from both sides), with the Poisson kernels of the OA solution (:func:`poisson_kernel_atoms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .docstrings import fill_doc
from .errors import NonFiniteError
from .kuramoto import KuramotoCoefficients, coefficients, complex_parts, order_parameter, solve_phases
from .odes import solve_ode
from .transport import circle_wasserstein1
from .validation import (
    PARAMETER_DOCS,
    SOLVERS,
    time_grid,
    validate_beta,
    validate_choice,
    validate_complex,
    validate_count,
    validate_flag,
    validate_matrix2,
    validate_positive,
    validate_tolerances,
)
from .watanabe_strogatz import mobius

__all__ = [
    "ott_antonsen_rhs",
    "oa_field",
    "OASolution",
    "solve_ott_antonsen",
    "sample_ott_antonsen",
    "hamiltonian",
    "hamiltonian_centre",
    "OAAccuracy",
    "oa_accuracy",
    "poisson_kernel_atoms",
    "perturbed_uniform",
    "OAStability",
    "oa_stability",
]

_REFS_OA = """\
E. Ott, T. M. Antonsen, *Low dimensional behavior of large systems of globally coupled oscillators*,
Chaos 18 (2008); paper 2 (Li et al., 2026), the Ott–Antonsen reduction; book:
``chapters/04_kuramoto_reduction.md``, equations (eq-poisson) and (eq-oa)."""

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    **PARAMETER_DOCS,
    "refs_oa": _REFS_OA,
    "refs_oa_short": """
        E. Ott, T. M. Antonsen, Chaos 18 (2008); paper 2 (Li et al., 2026); book:
        ``chapters/04_kuramoto_reduction.md``, equation (eq-oa).
    """,
    # what the two forms of the Ott-Antonsen field return, and their reference
    "zdot_sections": "Returns\n-------\ncomplex or complex array\n    :math:`\\dot z`.\n\nReferences\n----------\n"
    + _REFS_OA,
}


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class OAPolynomial:
    r"""The Ott–Antonsen field as a polynomial in :math:`z,\bar z` (expanded form).

    .. math:: \dot z=k_0+k_1z+k_2\bar z+k_3|z|^2+k_4z^2+k_5|z|^2z+k_6z^3,

    with :math:`\frac2\beta k_0=a_+v_-+a_-v_+`,
    :math:`\frac2\beta k_1=\bar a_+v_++2ia_+\operatorname{Im}v_++2i\operatorname{Im}(\bar a_-v_-)`,
    :math:`\frac2\beta k_2=a_-v_-`, :math:`\frac2\beta k_3=\bar a_+v_--a_-\bar v_+`,
    :math:`\frac2\beta k_4=2i\bar a_-\operatorname{Im}v_+-2\bar v_-\operatorname{Re}a_+`,
    :math:`\frac2\beta k_5=-\bar a_+\bar v_+`, :math:`\frac2\beta k_6=-\bar a_-\bar v_-`;
    identical to :math:`2i\omega(z)z+H(z)-\overline{H(z)}z^2`. Calling it evaluates the field on
    numpy arrays (coefficients broadcast) or, fast, on Python complex numbers.

    Attributes
    ----------
    k : tuple of complex
        :math:`(k_0,\dots,k_6)`; build it with :meth:`of`.

    References
    ----------
    %(refs_oa)s
    """

    k: tuple

    @classmethod
    def of(cls, coef: KuramotoCoefficients) -> OAPolynomial:
        """The polynomial of the Kuramoto–Daido coefficients ``coef``.

        Parameters
        ----------
        coef : KuramotoCoefficients
            From :func:`~tokendynamics.kuramoto.coefficients`.

        Returns
        -------
        OAPolynomial
        """
        ap, am, vp, vm, b = coef.a_plus, coef.a_minus, coef.v_plus, coef.v_minus, coef.beta
        c = np.conj
        ks = (
            ap * vm + am * vp,
            c(ap) * vp + 2j * ap * np.imag(vp) + 2j * np.imag(c(am) * vm),
            am * vm,
            c(ap) * vm - am * c(vp),
            2j * c(am) * np.imag(vp) - 2 * c(vm) * np.real(ap),
            -c(ap) * c(vp),
            -c(am) * c(vm),
        )
        ks = tuple(0.5 * b * k for k in ks)  # type: ignore[assignment]
        if all(np.ndim(k) == 0 for k in ks):
            ks = tuple(complex(k) for k in ks)  # type: ignore[assignment]
        return cls(ks)

    def __call__(self, z):
        k0, k1, k2, k3, k4, k5, k6 = self.k
        zc = z.conjugate()
        r2 = z * zc
        z2 = z * z
        return k0 + k1 * z + k2 * zc + k3 * r2 + k4 * z2 + k5 * r2 * z + k6 * z2 * z


@fill_doc(_DOC)
def oa_field(z, coef: KuramotoCoefficients):
    r"""The Ott–Antonsen field :math:`\dot z=2i\omega(z)z+H(z)-\overline{H(z)}z^2` for precomputed coefficients.

    Parameters
    ----------
    z : complex or complex array
        Centres (broadcast with the coefficients).
    coef : KuramotoCoefficients
        From :func:`~tokendynamics.kuramoto.coefficients`.

    %(zdot_sections)s
    """
    return OAPolynomial.of(coef)(validate_complex(z, "z"))


@fill_doc(_DOC)
def ott_antonsen_rhs(z, A, V, beta=1.0):
    r"""Velocity of the Ott–Antonsen centre :math:`z`, vectorised.

    .. math:: \dot z = 2i\,\omega(z)\,z + H(z) - \overline{H(z)}\,z^2 .

    ``z`` is a complex number or array; ``A`` and ``V`` are 2 x 2 matrices or stacks (..., 2, 2)
    whose batch shape broadcasts with ``z`` (many centres, or many layers, at once).

    Parameters
    ----------
    z : complex or complex array
        Centres in the closed unit disk.
    A, V : array (2, 2) or (..., 2, 2)
        Score and value matrices.
    %(beta)s

    %(zdot_sections)s

    Examples
    --------
    >>> import numpy as np
    >>> ott_antonsen_rhs(0.5, np.eye(2), np.eye(2))  # V = I: (beta/2)(1-|z|^2)(z + a_-) with a_- = 0
    (0.1875+0j)
    """
    z = validate_complex(z, "z")
    out = oa_field(z, coefficients(A, V, beta))
    return complex(out) if np.ndim(out) == 0 else out


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class OASolution:
    """A run of the Ott–Antonsen ODE.

    Attributes
    ----------
    t : array (m,)
        Output times.
    z : complex array (m, ...)
        The centre at the stored times (batch axes after the time axis).
    t_events : list of arrays
        Event times (when events were requested).
    params : dict
        beta, tolerances, solver, nfev.

    References
    ----------
    %(refs_oa_short)s
    """

    t: np.ndarray
    z: np.ndarray
    t_events: list
    params: dict

    @property
    def final(self) -> np.ndarray:
        """The centre at the last stored time."""
        return self.z[-1]


def _check_centre(z0):
    z0 = validate_complex(z0, "z0")
    if np.any(np.abs(z0) > 1 + 1e-12):
        raise ValueError(f"the OA centre must lie in the closed unit disk, got |z0| = {np.abs(z0).max():.6g}")
    return z0


@fill_doc(_DOC)
def solve_ott_antonsen(
    z0,
    A,
    V,
    beta=1.0,
    t_span=10.0,
    *,
    t_eval=None,
    method: str = "DOP853",
    rtol: float = 1e-10,
    atol: float = 1e-12,
    dt: float = 0.01,
    events=None,
    max_step: float = np.inf,
) -> OASolution:
    r"""Integrate the Ott–Antonsen ODE :func:`ott_antonsen_rhs` from ``z0``.

    ``z0`` (complex, :math:`|z_0|\le1`) and the stacks ``A``, ``V`` broadcast together, so one
    call integrates many centres or many layers at once.

    * ``method="DOP853"`` (or any ``solve_ivp`` method): adaptive, on the stacked real and
      imaginary parts (one step for the whole batch, error norm over all components).
      ``events`` are functions ``g(t, z)`` of the complex state, located by ``solve_ivp``;
      their times are returned in ``t_events``.
    * ``method="rk4"``: classical Runge–Kutta with the fixed step ``dt`` (adjusted so that an
      integer number of steps reaches T). Output at the grid times nearest to ``t_eval``
      (``OASolution.t`` holds the grid times used). For one centre the loop runs on Python
      complex numbers: a few microseconds per step (used by the live widget).

    Parameters
    ----------
    z0 : complex or complex array
        Initial centre(s), :math:`|z_0|\le1`.
    A, V : array (2, 2) or (..., 2, 2)
        Score and value matrices.
    %(beta)s
    %(t_span)s
    t_eval : array or int, optional
        Output times.
    method : str
        ``"rk4"`` or a ``solve_ivp`` method.
    rtol, atol : float
        Tolerances (adaptive methods).
    dt : float
        Step of ``"rk4"``.
    events : callable or list of callables, optional
        Functions ``g(t, z)`` (adaptive methods).
    max_step : float
        Largest step of the adaptive methods.

    Returns
    -------
    OASolution

    Raises
    ------
    NonFiniteError
        The integration failed.

    References
    ----------
    %(refs_oa)s
    """
    z0 = _check_centre(z0)
    coef = coefficients(A, V, beta)
    method = validate_choice(method, "method", ("rk4", *SOLVERS))
    rtol, atol = validate_tolerances(rtol, atol)
    max_step = validate_positive(max_step, "max_step", allow_inf=True)
    if events is not None:
        for g in events if isinstance(events, (list, tuple)) else [events]:
            if not callable(g):
                raise TypeError(f"events must be a callable g(t, z) or a list of them, got {type(g).__name__}")
    field = OAPolynomial.of(coef)
    shape = np.broadcast_shapes(z0.shape, *(np.shape(k) for k in field.k))
    t0, T, t_eval = time_grid(t_span, t_eval)
    beta_out = coef.beta if np.ndim(coef.beta) == 0 else np.asarray(coef.beta).tolist()
    if method == "rk4":
        if events is not None:
            raise ValueError("events need an adaptive method (e.g. DOP853), not rk4")
        return _solve_rk4(field, np.broadcast_to(z0, shape), t0, T, t_eval, dt, beta_out)
    z0 = np.broadcast_to(z0, shape).ravel()
    size = z0.size

    def as_z(y):
        return (y[:size] + 1j * y[size:]).reshape(shape)

    def rhs(t, y):
        zd = field(as_z(y)).ravel()
        return np.concatenate([zd.real, zd.imag])

    wrapped = None
    if events is not None:
        wrapped = []
        for g in events if isinstance(events, (list, tuple)) else [events]:

            def ev(t, y, g=g):
                return g(t, as_z(y))

            ev.terminal = getattr(g, "terminal", False)  # type: ignore[attr-defined]  # solve_ivp's event attribute
            ev.direction = getattr(g, "direction", 0)  # type: ignore[attr-defined]  # solve_ivp's event attribute
            wrapped.append(ev)
    options = {"t_eval": t_eval, "method": method, "rtol": rtol, "atol": atol, "events": wrapped, "max_step": max_step}
    sol = solve_ode(rhs, np.concatenate([z0.real, z0.imag]), (t0, T), what="the Ott-Antonsen integration", **options)
    z = (sol.y[:size] + 1j * sol.y[size:]).T.reshape((sol.t.size,) + shape)
    params = {"beta": beta_out, "method": method, "rtol": rtol, "atol": atol, "nfev": int(sol.nfev), "T": T, "t0": t0}
    return OASolution(t=sol.t, z=z, t_events=list(sol.t_events) if sol.t_events is not None else [], params=params)


def _solve_rk4(field: OAPolynomial, z0, t0, T, t_eval, dt, beta_out) -> OASolution:
    dt = validate_positive(dt, "dt")
    steps = max(1, int(math.ceil((T - t0) / dt - 1e-9)))
    h = (T - t0) / steps
    idx = np.unique(np.clip(np.rint((t_eval - t0) / h).astype(int), 0, steps))
    want = set(idx.tolist())
    scalar = z0.ndim == 0
    z = complex(z0) if scalar else np.array(z0, dtype=complex)
    out = []
    h2, h6 = h / 2, h / 6
    for k in range(steps + 1):
        if k in want:
            out.append(z if scalar else np.array(z, copy=True))
        if k == steps:
            break
        k1 = field(z)
        k2 = field(z + h2 * k1)
        k3 = field(z + h2 * k2)
        k4 = field(z + h * k3)
        z = z + h6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if scalar and not (abs(z) < 1e6):
            raise NonFiniteError(
                f"the Ott-Antonsen rk4 integration left every bounded set at t = {t0 + (k + 1) * h:.6g}"
            )
    zs = np.array(out, dtype=complex)
    if not np.all(np.isfinite(zs)):
        raise NonFiniteError("the Ott-Antonsen rk4 integration produced non-finite values: lower dt")
    params = {"beta": beta_out, "method": "rk4", "dt": h, "nfev": 4 * steps, "T": T, "t0": t0}
    return OASolution(t=t0 + idx * h, z=zs, t_events=[], params=params)


@fill_doc(_DOC)
def sample_ott_antonsen(z0, n: int, rng=None, *, equispaced: bool = False, branches: bool = True):
    r"""n token angles whose double angles :math:`\psi_k=2\theta_k` are wrapped Cauchy with centre ``z0``.

    :math:`c_k\sim U[0,2\pi)` i.i.d. (or :math:`c_k=2\pi k/n+c` with ``equispaced=True``, for
    which :math:`R_2=z_0+O(|z_0|^{n-1})`), :math:`\psi_k=\arg\frac{e^{ic_k}+z_0}{1+\bar z_0e^{ic_k}}`,
    :math:`\theta_k=\psi_k/2+\pi s_k` with :math:`s_k\sim` Bernoulli(1/2) (``branches=False``:
    :math:`s_k=0`). ``z0 = 0`` gives uniform angles. Tokens are ``circle_tokens(theta)``.

    Parameters
    ----------
    z0 : complex
        Centre, :math:`|z_0|<1`.
    n : int
        Number of tokens.
    rng : int or numpy.random.Generator, optional
        Seed or generator.
    equispaced : bool
        Equispaced constants :math:`c_k` instead of i.i.d. uniform ones.
    branches : bool
        Draw the branch :math:`s_k` of each token at random.

    Returns
    -------
    array (n,)
        Token angles :math:`\theta_k`.

    References
    ----------
    %(refs_oa)s
    """
    z0 = _check_centre(z0)
    if z0.ndim != 0:
        raise ValueError(f"z0 must be one complex number, got shape {z0.shape}")
    z0 = complex(z0)
    if abs(z0) >= 1:
        raise ValueError("sampling needs |z0| < 1 (|z0| = 1 is a point mass, not a density)")
    n = validate_count(n, "n")
    equispaced = validate_flag(equispaced, "equispaced")
    branches = validate_flag(branches, "branches")
    rng = np.random.default_rng(rng)
    if equispaced:
        c = 2 * np.pi * np.arange(n) / n + rng.uniform(0, 2 * np.pi)
    else:
        c = rng.uniform(0, 2 * np.pi, n)
    psi = np.angle(mobius(z0, 0.0, c))  # the WS map with alpha = z0 of uniform constants (OA = WS, uniform c_k)
    s = rng.integers(0, 2, n) if branches else np.zeros(n, dtype=int)
    return psi / 2 + np.pi * s


# ---------------------------------------------------------------------------------------------
# the hidden Hamiltonian (paper 2; book equation (eq-hamiltonian))
# ---------------------------------------------------------------------------------------------


def _traceless_parts(V):
    V = validate_matrix2(V, "V")
    if V.ndim != 2:
        raise ValueError("one 2 x 2 matrix V, please")
    scale = max(1.0, float(np.abs(V).max()))
    if abs(V[0, 0] + V[1, 1]) > 1e-12 * scale:
        raise ValueError(f"the Hamiltonian structure needs tr V = 0, got tr V = {V[0, 0] + V[1, 1]:.3g}")
    vp, vm = complex_parts(V, "V")
    return vp.imag, vm


@fill_doc(_DOC)
def hamiltonian(z, V, beta=1.0):
    r"""The conserved quantity of the OA flow for :math:`A=I`, :math:`\operatorname{tr}V=0`.

    .. math:: \mathcal E(z)=\frac\beta4\,\frac{-\kappa(1+|z|^2)+2\operatorname{Im}(\bar v_-z)}{(1-|z|^2)^2},
              \qquad \kappa=\tfrac12(v_{21}-v_{12}),

    and :math:`\dot z=-2i(1-|z|^2)^3\partial_{\bar z}\mathcal E`: the OA field divided by
    :math:`(1-|z|^2)^3` is divergence-free. Defined in the open disk. ``A = I`` is implied.

    Parameters
    ----------
    z : complex or complex array
        Points of the open unit disk.
    V : array (2, 2)
        Traceless value matrix.
    %(beta)s

    Returns
    -------
    float or array
        :math:`\mathcal E(z)`.

    References
    ----------
    Paper 2 (Li et al., 2026), the hidden Hamiltonian structure for :math:`A=I` and traceless :math:`V`;
    book: ``chapters/05_kuramoto_regimes.md``, equation (eq-hamiltonian).
    """
    kappa, vm = _traceless_parts(V)
    b = validate_beta(beta)
    z = validate_complex(z, "z")
    r2 = np.abs(z) ** 2
    if np.any(r2 >= 1):
        raise ValueError("the Hamiltonian is defined in the open unit disk |z| < 1")
    out = 0.25 * b * (-kappa * (1 + r2) + 2 * np.imag(np.conj(vm) * z)) / (1 - r2) ** 2
    return float(out) if out.ndim == 0 else out


def hamiltonian_centre(V, beta=1.0):
    r"""The interior centre :math:`z_c` of the Hamiltonian OA flow (:math:`A=I`, traceless :math:`V`, :math:`\det V>0`).

    For :math:`V=\begin{pmatrix}v_{11}&v_{12}\\-v_{12}&-v_{11}\end{pmatrix}`,
    :math:`z_c=iy_c` with :math:`\big(\frac{1+y_c}{1-y_c}\big)^3=\frac{v_{12}-v_{11}}{v_{12}+v_{11}}`;
    a general traceless :math:`V` is a rotation of this family (:math:`v_-=|v_-|e^{i\varphi}`,
    :math:`z_c\mapsto e^{i\varphi}z_c`). Returns None when :math:`\det V\le0` (no interior centre).
    ``beta`` does not move the centre.

    Parameters
    ----------
    V : array (2, 2)
        Traceless value matrix.
    beta : float
        Inverse temperature (checked, unused).

    Returns
    -------
    complex or None
        :math:`z_c`.

    References
    ----------
    Paper 2 (Li et al., 2026), the hidden Hamiltonian structure for :math:`A=I` and traceless :math:`V`;
    book: ``chapters/05_kuramoto_regimes.md``, equation (eq-hamiltonian).
    """
    kappa, vm = _traceless_parts(V)
    validate_beta(beta)
    if kappa**2 - abs(vm) ** 2 <= 0:
        return None
    v11, v12 = abs(vm), -kappa
    q = np.cbrt((v12 - v11) / (v12 + v11))
    y = (q - 1) / (q + 1)
    phase = vm / abs(vm) if abs(vm) > 0 else 1.0
    return complex(1j * y * phase)


# ---------------------------------------------------------------------------------------------
# accuracy of the reduction for finite n (paper 2; book chapter 04_kuramoto_reduction)
# ---------------------------------------------------------------------------------------------


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class OAAccuracy:
    r"""Distance between the particles' :math:`R_2` and the OA centre for several n and seeds.

    Attributes
    ----------
    ns : array (k,)
        Sample sizes.
    errors : array (k, seeds)
        :math:`\sup_{t\le T}|R_2(t)-z(t)|` per n and seed.
    slope, intercept : float
        Least-squares fit :math:`\log\text{error}=\text{slope}\log n+\text{intercept}` over all points.
    params : dict
        The parameters of the study.

    References
    ----------
    %(refs_oa_short)s
    """

    ns: np.ndarray
    errors: np.ndarray
    slope: float | None
    intercept: float | None
    params: dict


#: Default centre of the OA accuracy study: 0.3 e^{0.7i}.
_OA_ACCURACY_Z0 = 0.3 * complex(np.cos(0.7), np.sin(0.7))


@fill_doc(_DOC)
def oa_accuracy(
    A,
    V,
    beta=1.0,
    z0=_OA_ACCURACY_Z0,
    ns=(250, 1000, 4000),
    seeds=8,
    T: float = 10.0,
    *,
    rng=0,
    equispaced: bool = False,
    n_times: int = 201,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> OAAccuracy:
    r"""How far n particles sampled on the OA manifold drift from it: :math:`\sup_{t\le T}|R_2-z_{OA}|` vs n.

    For each n, ``seeds`` samples of :func:`sample_ott_antonsen` (centre ``z0``) are integrated
    together with the O(n) angle equations (:func:`~tokendynamics.kuramoto.solve_phases`), and
    compared with the OA solution on ``n_times`` equally spaced times. The expected law is
    :math:`C/\sqrt n` (slope :math:`-1/2`) from the initial sampling error, propagated by a
    Grönwall bound (paper 2's structural stability; constants [I]).

    Parameters
    ----------
    %(matrices2_beta)s
    z0 : complex
        Centre of the sampled Poisson kernel.
    ns : sequence of int
        Sample sizes n.
    seeds : int
        Samples per n.
    T : float
        Horizon.
    rng : int or numpy.random.Generator
        Seed or generator.
    equispaced : bool
        Equispaced constants (see :func:`sample_ott_antonsen`).
    n_times : int
        Comparison times.
    rtol, atol : float
        Tolerances.

    Returns
    -------
    OAAccuracy

    References
    ----------
    %(refs_oa)s
    """
    if np.ndim(ns) != 1 or len(ns) < 1:
        raise ValueError(f"ns must list positive sample sizes, got {ns!r}")
    ns = np.array([validate_count(n, "ns[k]") for n in ns], dtype=int)
    seeds = validate_count(seeds, "seeds")
    T = validate_positive(T, "T")
    n_times = validate_count(n_times, "n_times", minimum=2)
    rng = np.random.default_rng(rng)
    t_eval = np.linspace(0.0, T, n_times)
    oa = solve_ott_antonsen(z0, A, V, beta, T, t_eval=t_eval, rtol=1e-11, atol=1e-13)
    errors = np.empty((ns.size, int(seeds)))
    for i, n in enumerate(ns):
        theta0 = np.stack([sample_ott_antonsen(z0, int(n), rng, equispaced=equispaced) for _ in range(int(seeds))])
        sol = solve_phases(theta0, A, V, beta, T, t_eval=t_eval, rtol=rtol, atol=atol)
        errors[i] = np.max(np.abs(order_parameter(sol.theta, 2) - oa.z[:, None]), axis=0)
    slope = intercept = None
    if np.unique(ns).size >= 2:
        x = np.repeat(np.log(ns), errors.shape[1])
        slope, intercept = (float(v) for v in np.polyfit(x, np.log(errors).ravel(), 1))
    params = {
        "beta": float(validate_beta(beta)),
        "z0": [complex(z0).real, complex(z0).imag],
        "T": T,
        "seeds": int(seeds),
        "equispaced": equispaced,
        "rtol": rtol,
        "atol": atol,
    }
    return OAAccuracy(ns=ns, errors=errors, slope=slope, intercept=intercept, params=params)


# ---------------------------------------------------------------------------------------------
# structural stability over long times (paper 2; book equation (eq-dbl))
# ---------------------------------------------------------------------------------------------


def poisson_kernel_atoms(z, m: int = 4096) -> np.ndarray:
    r"""m equal-mass atoms standing for the Poisson kernel :math:`p_z` on the circle of double angles.

    The Möbius map :math:`e^{ic}\mapsto\frac{e^{ic}+z}{1+\bar ze^{ic}}` pushes the uniform law to
    :math:`p_z(\psi)=\frac1{2\pi}\frac{1-|z|^2}{|e^{i\psi}-z|^2}` and is increasing on the circle,
    so the images

    .. math:: \psi_k=\arg\frac{e^{ic_k}+z}{1+\bar ze^{ic_k}},\qquad c_k=\frac{2\pi(k+\frac12)}m,\quad k<m,

    are the medians of m arcs of mass :math:`1/m` each. Moving each arc's mass to its atom costs at
    most :math:`1/m` times the arc's length, hence :math:`W_1(p_z,\frac1m\sum_k\delta_{\psi_k})\le2\pi/m`
    (in practice far less: the error is of second order where :math:`p_z` is smooth). For
    :math:`|z|=1` every atom is at :math:`\arg z`: the point mass of a clustered state.

    Parameters
    ----------
    z : complex or complex array (...)
        Centres in the closed unit disk.
    m : int
        Number of atoms.

    Returns
    -------
    array (..., m)
        The double angles :math:`\psi_k\in(-\pi,\pi]`.

    References
    ----------
    E. Ott, T. M. Antonsen, Chaos 18 (2008); paper 2 (Li et al., 2026), the Ott–Antonsen manifold; book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-poisson).
    """
    z = np.asarray(z, dtype=complex)
    if not np.all(np.isfinite(z)) or np.any(np.abs(z) > 1 + 1e-9):
        raise ValueError("the centres must be finite and lie in the closed unit disk")
    z = z / np.maximum(1.0, np.abs(z))  # solver round-off just outside the circle
    if int(m) != m or m < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")
    c = 2 * np.pi * (np.arange(int(m)) + 0.5) / int(m)
    w = np.exp(1j * c)
    zz = z[..., None]
    out = np.angle((w + zz) / (1 + np.conj(zz) * w))
    on_circle = np.abs(z) >= 1 - 1e-15
    if np.any(on_circle):
        out = np.where(on_circle[..., None], np.angle(z)[..., None], out)
    return out


def perturbed_uniform(n: int, epsilon, *, modes: int = 3, rng=None) -> np.ndarray:
    r"""n token angles whose double angles are a smooth perturbation of size ``epsilon`` of the uniform law.

    The double angles are :math:`\psi_k=u_k+\varepsilon\,g(u_k)` with equispaced
    :math:`u_k=2\pi(k+\frac12)/n` and a random trigonometric polynomial
    :math:`g(\psi)=\sum_{j=1}^{\text{modes}}a_j\cos j\psi+b_j\sin j\psi` (Gaussian coefficients
    drawn from ``rng``), scaled so that :math:`\max|g'|=1`: for :math:`0\le\varepsilon<1` the map
    :math:`u\mapsto u+\varepsilon g(u)` is increasing, and the perturbed law is its image of the
    uniform law, at :math:`W_1` distance of order :math:`\varepsilon` from it (the mode
    :math:`j=1` moves :math:`R_2` away from 0, the others move the law off the Ott–Antonsen
    manifold). The equispaced grid itself is at :math:`W_1` distance :math:`\pi/(2n)` from uniform.
    Token angles are :math:`\theta_k=\psi_k/2` (linear attention does not see the branch
    :math:`\theta_k+\pi`).

    Parameters
    ----------
    n : int
        Number of tokens.
    epsilon : float or array (k,)
        Sizes of the perturbation, in :math:`[0, 1)`.
    modes : int
        Highest harmonic of g.
    rng : seed or Generator
        Draws the coefficients of g (one g for every epsilon).

    Returns
    -------
    array (n,) or (k, n)
        Token angles :math:`\theta_k`.

    References
    ----------
    Paper 2 (Li et al., 2026), structural stability for data close to uniform; book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-dbl).
    """
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    if int(modes) != modes or modes < 1:
        raise ValueError(f"modes must be a positive integer, got {modes!r}")
    eps = np.asarray(epsilon, dtype=float)
    if not np.all(np.isfinite(eps)) or np.any(eps < 0) or np.any(eps >= 1):
        raise ValueError("epsilon must lie in [0, 1) (the perturbed map must stay increasing)")
    rng = np.random.default_rng(rng)
    coef = rng.standard_normal((int(modes), 2))
    j = np.arange(1, int(modes) + 1)[:, None]
    u = 2 * np.pi * (np.arange(int(n)) + 0.5) / int(n)
    fine = np.linspace(0, 2 * np.pi, 4096, endpoint=False)
    slope = lambda s: np.sum(j * (-coef[:, :1] * np.sin(j * s) + coef[:, 1:] * np.cos(j * s)), axis=0)  # noqa: E731
    g = np.sum(coef[:, :1] * np.cos(j * u) + coef[:, 1:] * np.sin(j * u), axis=0)
    g = g / np.max(np.abs(slope(fine)))
    psi = u + eps[..., None] * g
    return psi / 2


@dataclass(frozen=True, eq=False)
class OAStability:
    r"""Long-time distances between perturbed data and the Ott–Antonsen solutions (:func:`oa_stability`).

    Attributes
    ----------
    t : array (m,)
        Comparison times.
    epsilon : array (k,)
        Sizes of the perturbations of the uniform law.
    distance : array (m, k)
        :math:`W_1(\mu_t,p_{z(t)})` on the circle of double angles, :math:`z` the OA solution from
        :math:`z(0)=R_2(\mu_0)` (the Poisson kernel with the data's second moment).
    distance_uniform : array (m, k)
        :math:`W_1(\mu_t,p_{z_u(t)})`, :math:`z_u` the OA solution from :math:`z_u(0)=0`: the
        solution of the uniform law itself.
    R2 : complex array (m, k)
        The particles' :math:`R_2(t)`.
    z : complex array (m, k)
        OA solutions from :math:`R_2(\mu_0)`.
    z_uniform : complex array (m,)
        OA solution from 0.
    theta_final : array (k, n)
        The token angles at the last time (for other distances, e.g.
        :func:`~tokendynamics.transport.circle_bounded_lipschitz`).
    params : dict
        The parameters of the run.

    References
    ----------
    Paper 2 (Li et al., 2026), structural stability; book: ``chapters/04_kuramoto_reduction.md``, equation
    (eq-dbl).
    """

    t: np.ndarray
    epsilon: np.ndarray
    distance: np.ndarray
    distance_uniform: np.ndarray
    R2: np.ndarray
    z: np.ndarray
    z_uniform: np.ndarray
    theta_final: np.ndarray
    params: dict

    def growth(self, uniform: bool = False) -> np.ndarray:
        r"""The growth ratio :math:`\sup_{s\le t}d(s)/d(0)` for every perturbation.

        It stays bounded in t iff the perturbed data stay within a constant times their initial
        distance for all time.

        Parameters
        ----------
        uniform : bool
            Use ``distance_uniform`` instead of ``distance``.

        Returns
        -------
        array (m, k)
        """
        d = self.distance_uniform if uniform else self.distance
        return np.maximum.accumulate(d, axis=0) / d[0]


@fill_doc(_DOC)
def oa_stability(
    A,
    V,
    beta=1.0,
    epsilon=(0.01, 0.03, 0.1),
    *,
    n: int = 2000,
    T: float = 200.0,
    n_times: int = 101,
    modes: int = 3,
    rng=0,
    atoms: int = 4096,
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> OAStability:
    r"""Do data close to the uniform law stay close to the Ott–Antonsen solution for all time?

    The perturbed data :math:`\mu_0` (:func:`perturbed_uniform`, one size per entry of ``epsilon``,
    n tokens) are run exactly, with the O(n) angle equations
    (:func:`~tokendynamics.kuramoto.solve_phases`: the particle system of linear attention for the
    empirical law :math:`\mu_0`, no sampling error beyond the data themselves), and compared at
    ``n_times`` times in :math:`[0,T]` with two Ott–Antonsen solutions :math:`\nu_t=p_{z(t)}`:

    * from :math:`z(0)=R_2(\mu_0)`, the Poisson kernel with the data's second moment
      (``distance``); :math:`W_1(\mu_0,\nu_0)=O(\varepsilon)`;
    * from :math:`z(0)=0`, the uniform law itself (``distance_uniform``).

    The distance is :math:`W_1` on the circle of double angles :math:`\psi=2\theta` (length
    :math:`2\pi`, arc length), computed exactly by
    :func:`~tokendynamics.transport.circle_wasserstein1` against ``atoms`` atoms of :math:`p_z`
    (:func:`poisson_kernel_atoms`, error at most :math:`2\pi/\text{atoms}`). It bounds the
    bounded-Lipschitz distance of the paper's statement from both sides,
    :math:`\frac2\pi W_1\le d_{BL}\le W_1` (:func:`~tokendynamics.transport.circle_bounded_lipschitz`).
    Over a bounded time the Grönwall bound gives :math:`d(\mu_t,\nu_t)\le e^{Lt}d(\mu_0,\nu_0)`;
    :meth:`OAStability.growth` measures whether the ratio stays bounded as t grows.

    Parameters
    ----------
    A, V : arrays (2, 2)
        Score and value matrices.
    %(beta)s
    epsilon : sequence of floats in (0, 1)
        Sizes of the perturbations.
    n : int
        Tokens per perturbed law (the equispaced grid is at distance :math:`\pi/(2n)` from uniform:
        keep it well below the smallest epsilon).
    T : float
        Horizon.
    n_times : int
        Comparison times.
    modes : int
        Harmonics of the perturbation.
    rng : seed or Generator
        Draws the perturbation.
    atoms : int
        Atoms of each Poisson kernel (:func:`poisson_kernel_atoms`).
    rtol, atol : float
        Tolerances of the particle integration (DOP853).

    Returns
    -------
    OAStability

    References
    ----------
    Paper 2 (Li et al., 2026), structural stability near the Ott–Antonsen manifold, stated for
    :math:`V=I`, :math:`\mathrm{sym}(A)\succ0` and for :math:`A=I`, :math:`\lambda_{\max}(V)>0`; book:
    ``chapters/04_kuramoto_reduction.md``, equation (eq-dbl).
    """
    eps = np.atleast_1d(np.asarray(epsilon, dtype=float))
    if eps.ndim != 1 or np.any(eps <= 0):
        raise ValueError("epsilon must list positive sizes")
    if not (T > 0):
        raise ValueError(f"T must be positive, got {T}")
    beta = validate_beta(beta)
    theta0 = perturbed_uniform(n, eps, modes=modes, rng=rng)
    t_eval = np.linspace(0.0, float(T), int(n_times))
    sol = solve_phases(theta0, A, V, beta, float(T), t_eval=t_eval, rtol=rtol, atol=atol)
    R2 = order_parameter(sol.theta, 2)  # (m, k)
    z = solve_ott_antonsen(R2[0], A, V, beta, float(T), t_eval=t_eval, rtol=1e-11, atol=1e-13).z
    zu = solve_ott_antonsen(0j, A, V, beta, float(T), t_eval=t_eval, rtol=1e-11, atol=1e-13).z
    ref = poisson_kernel_atoms(z, atoms)  # (m, k, atoms)
    ref_u = poisson_kernel_atoms(zu, atoms)  # (m, atoms)
    psi = 2 * sol.theta
    m, k = psi.shape[:2]
    d = np.empty((m, k))
    du = np.empty((m, k))
    for i in range(m):
        for j in range(k):
            d[i, j] = circle_wasserstein1(psi[i, j], ref[i, j])
            du[i, j] = circle_wasserstein1(psi[i, j], ref_u[i])
    params = {
        "A": np.asarray(A, dtype=float).tolist(),
        "V": np.asarray(V, dtype=float).tolist(),
        "beta": float(beta),
        "n": int(n),
        "T": float(T),
        "modes": int(modes),
        "atoms": int(atoms),
        "rtol": rtol,
        "atol": atol,
        "nfev": sol.params["nfev"],
    }
    return OAStability(
        t=t_eval,
        epsilon=eps,
        distance=d,
        distance_uniform=du,
        R2=R2,
        z=z,
        z_uniform=zu,
        theta_final=sol.theta[-1].copy(),
        params=params,
    )
