r"""The Ott–Antonsen reduction of linear attention on the circle: one complex ODE (paper 2).

If the double angles :math:`\psi=2\theta` are wrapped Cauchy (Poisson kernel) with centre :math:`z`
(:math:`|z|<1`), they stay so, with :math:`R_2=z` and

.. math:: \dot z = 2i\,\omega(z)\,z + H(z) - \overline{H(z)}\,z^2 \;=\;2i\beta\,(Bz^2+Cz+\bar B)

(:math:`\omega, H` of :mod:`tokendynamics.kuramoto`); the unit circle and the open disk are invariant. For n
sampled tokens :math:`|R_2(t)-z(t)|=O(n^{-1/2})` on bounded time intervals (its exact constants: [I]).

References
----------
E. Ott, T. M. Antonsen, Chaos 18 (2008); paper 2 (Li et al., 2026). Book: ``chapters/04_kuramoto_reduction.md``,
equations (eq-poisson), (eq-oa).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .docstrings import fill_doc
from .errors import NonFiniteError
from .kuramoto import CIRCLE_DOCS, KuramotoCoefficients, coefficients, mobius
from .odes import MAX_EVALUATIONS, MAX_STEPS, rk4_step, solve_ode, step_count
from .validation import (
    SOLVERS,
    require_memory,
    time_grid,
    validate_choice,
    validate_complex,
    validate_count,
    validate_finite,
    validate_flag,
    validate_positive,
    validate_rng,
)

__all__ = [
    "OAPolynomial", "ott_antonsen_rhs", "OASolution", "solve_ott_antonsen", "sample_ott_antonsen",
    "poisson_kernel_atoms",
]  # fmt: skip

_DOC = {
    **CIRCLE_DOCS,
    "refs_oa": "References\n----------\nE. Ott, T. M. Antonsen, Chaos 18 (2008); paper 2 (Li et al., 2026); book:\n"
    "``chapters/04_kuramoto_reduction.md``, equations (eq-poisson) and (eq-oa).",
}


def _check_centre(z0):
    z0 = validate_complex(z0, "z0")
    if np.any(np.abs(z0) > 1 + 1e-12):
        raise ValueError(f"the OA centre must lie in the closed unit disk, got |z0| = {np.abs(z0).max():.6g}")
    return z0


@fill_doc(_DOC)
@dataclass(frozen=True, eq=False)
class OAPolynomial:
    r"""The Ott–Antonsen field :math:`\dot z=k_0+k_1z+k_2\bar z+k_3|z|^2+k_4z^2+k_5|z|^2z+k_6z^3`, and its integrator.

    :math:`\frac2\beta(k_0,\dots,k_6)=(a_+v_-+a_-v_+,\ \bar a_+v_++2ia_+\operatorname{Im}v_++2i\operatorname{Im}(\bar
    a_-v_-),\ a_-v_-,\ \bar a_+v_--a_-\bar v_+,\ 2i\bar a_-\operatorname{Im}v_+-2\bar v_-\operatorname{Re}a_+,\
    -\bar a_+\bar v_+,\ -\bar a_-\bar v_-)`. Calling it evaluates the field (fast on Python complex numbers).

    Attributes
    ----------
    k : tuple of complex
        :math:`(k_0,\dots,k_6)`; build it with :meth:`of`.
    beta : float or list
        The inverse temperature(s), recorded in the solutions.

    %(refs_oa)s
    """

    k: tuple
    beta: Any = 1.0

    @classmethod
    def of(cls, coef: KuramotoCoefficients) -> OAPolynomial:
        """The polynomial of the coefficients ``coef`` (:func:`~tokendynamics.kuramoto.coefficients`).

        Parameters
        ----------
        coef : KuramotoCoefficients

        Returns
        -------
        OAPolynomial
        """
        ap, am, vp, vm, b, c = coef.a_plus, coef.a_minus, coef.v_plus, coef.v_minus, coef.beta, np.conj
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
        return cls(ks, b if np.ndim(b) == 0 else np.asarray(b).tolist())

    def __call__(self, z):
        k0, k1, k2, k3, k4, k5, k6 = self.k
        zc = z.conjugate()
        r2, z2 = z * zc, z * z
        return k0 + k1 * z + k2 * zc + k3 * r2 + k4 * z2 + k5 * r2 * z + k6 * z2 * z

    def rate(self):
        r""":math:`\sum_i|k_i|`, a bound on the rates of the field in the closed disk (per layer).

        Returns
        -------
        float or array
        """
        return sum(np.abs(k) for k in self.k)

    @fill_doc(_DOC)
    def solve(
        self,
        z0,
        t_span=10.0,
        *,
        t_eval=None,
        method: str = "DOP853",
        rtol: float = 1e-10,
        atol: float = 1e-12,
        dt: float = 0.01,
        events=None,
        max_step: float = np.inf,
        max_steps: int = MAX_STEPS,
        max_nfev: int = MAX_EVALUATIONS,
    ) -> OASolution:
        """Integrate :math:`\\dot z` from ``z0`` (see :func:`solve_ott_antonsen`).

        Why 11 parameters: the state and span, the two families of schemes (fixed step, adaptive) with their
        own step controls and events, and the work budget of each.

        Parameters
        ----------
        z0 : complex or complex array
            Initial centre(s), :math:`|z_0|\\le1`, broadcast with the coefficients.
        %(t_span)s
        t_eval : array or int, optional
            Output times.
        method : str
            ``"rk4"`` (fixed step ``dt``) or a ``solve_ivp`` method (tolerances ``rtol``, ``atol``, ``max_step``).
        rtol, atol, dt, max_step : float
            See ``method``.
        max_steps, max_nfev : int
            Work budgets: steps of rk4 (refused up front beyond it), right-hand-side evaluations of an adaptive
            method (it stops there with a ConvergenceError); defaults :data:`~tokendynamics.odes.MAX_STEPS` and
            :data:`~tokendynamics.odes.MAX_EVALUATIONS`.
        events : callable or list of callables, optional
            Functions ``g(t, z)`` of the complex state (adaptive methods; attributes as in ``solve_ivp``).

        Returns
        -------
        OASolution
        """
        z0 = _check_centre(z0)
        method = validate_choice(method, "method", ("rk4", *SOLVERS))
        rtol, atol = validate_positive(rtol, "rtol"), validate_positive(atol, "atol")
        max_step = validate_positive(max_step, "max_step", allow_inf=True)
        events = [] if events is None else list(events) if isinstance(events, (list, tuple)) else [events]
        if not all(callable(g) for g in events):
            raise TypeError("events must be a callable g(t, z) or a list of them")
        shape = np.broadcast_shapes(z0.shape, *(np.shape(k) for k in self.k))
        t0, T, t_eval = time_grid(t_span, t_eval)
        if method == "rk4":
            if events:
                raise ValueError("events need an adaptive method (e.g. DOP853), not rk4")
            return _solve_rk4(self, np.broadcast_to(z0, shape), t0, T, t_eval, (dt, max_steps), self.beta)
        z0 = np.broadcast_to(z0, shape).ravel()
        size = z0.size
        as_z = lambda y: (y[:size] + 1j * y[size:]).reshape(shape)  # noqa: E731

        def rhs(t, y):
            zd = self(as_z(y)).ravel()
            return np.concatenate([zd.real, zd.imag])

        def wrap(g):
            ev = lambda t, y: validate_finite(g(t, as_z(y)), "the value of events g(t, z)")  # noqa: E731
            ev.terminal, ev.direction = getattr(g, "terminal", False), getattr(g, "direction", 0)
            return ev

        options = dict(t_eval=t_eval, method=method, rtol=rtol, atol=atol, max_step=max_step, max_nfev=max_nfev)
        options.update(events=[wrap(g) for g in events] or None, what="the Ott-Antonsen integration")
        sol = solve_ode(rhs, np.concatenate([z0.real, z0.imag]), (t0, T), **options)
        z = (sol.y[:size] + 1j * sol.y[size:]).T.reshape((sol.t.size,) + shape)
        params = dict(beta=self.beta, method=method, rtol=rtol, atol=atol, nfev=int(sol.nfev), T=T, t0=t0)
        return OASolution(t=sol.t, z=z, t_events=list(sol.t_events) if sol.t_events is not None else [], params=params)


@fill_doc(_DOC)
def ott_antonsen_rhs(z, layer):
    r"""Velocity :math:`\dot z = 2i\,\omega(z)\,z + H(z) - \overline{H(z)}\,z^2` of the Ott–Antonsen centre.

    Parameters
    ----------
    z : complex or complex array
        Centres in the closed unit disk (broadcast with a batch of layers).
    %(layers)s

    Returns
    -------
    complex or complex array

    %(refs_oa)s

    Examples
    --------
    >>> import numpy as np
    >>> from tokendynamics import Attention
    >>> ott_antonsen_rhs(0.5, Attention("linear", A=np.eye(2), V=np.eye(2)))  # (beta/2)(1-|z|^2) z
    (0.1875+0j)
    """
    out = OAPolynomial.of(coefficients(layer))(validate_complex(z, "z"))
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
        beta, tolerances or step, solver, nfev.

    %(refs_oa)s
    """

    t: np.ndarray
    z: np.ndarray
    t_events: list
    params: dict

    @property
    def final(self) -> np.ndarray:
        """The centre at the last stored time."""
        return self.z[-1]


@fill_doc(_DOC)
def solve_ott_antonsen(z0, layer, t_span=10.0, **options) -> OASolution:
    r"""Integrate the Ott–Antonsen ODE :func:`ott_antonsen_rhs` from ``z0`` (centres and a batch of layers broadcast).

    ``method="DOP853"`` (any ``solve_ivp`` method): adaptive, event times in ``t_events``. ``method="rk4"``: fixed
    step ``dt`` (adjusted to reach T), output at the grid times nearest to ``t_eval``.

    Parameters
    ----------
    z0 : complex or complex array
        Initial centre(s), :math:`|z_0|\le1`.
    %(layers)s
    %(t_span)s
    **options
        The keywords of :meth:`OAPolynomial.solve`: ``t_eval``, ``method``, ``rtol``, ``atol``, ``dt``, ``events``...

    Returns
    -------
    OASolution

    %(refs_oa)s
    """
    return OAPolynomial.of(coefficients(layer)).solve(z0, t_span, **options)


def _solve_rk4(field: OAPolynomial, z0, t0, T, t_eval, step, beta_out) -> OASolution:
    steps, h = step_count(t0, T, *step)  # refuses, before the first step, a run beyond the budget
    idx = np.unique(np.clip(np.rint((t_eval - t0) / h).astype(int), 0, steps))
    want = set(idx.tolist())
    scalar = z0.ndim == 0
    z = complex(z0) if scalar else np.array(z0, dtype=complex)
    out = []
    f = lambda t, w: field(w)  # noqa: E731 (autonomous)
    for k in range(steps + 1):
        if k in want:
            out.append(z if scalar else np.array(z, copy=True))
        if k == steps:
            break
        z, _ = rk4_step(f, t0 + k * h, z, h)  # the stepping layer's scheme, on Python complex numbers for one centre
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
def sample_ott_antonsen(z0, n: int, rng=None, *, equispaced: bool = False):
    r"""n token angles whose double angles :math:`\psi_k=2\theta_k` are wrapped Cauchy with centre ``z0``.

    :math:`\psi_k=\arg\frac{e^{ic_k}+z_0}{1+\bar z_0e^{ic_k}}` with :math:`c_k\sim U[0,2\pi)` (or equispaced,
    :math:`R_2=z_0+O(|z_0|^{n-1})`), :math:`\theta_k=\psi_k/2+\pi s_k`, :math:`s_k\sim` Bernoulli(1/2).

    Parameters
    ----------
    z0 : complex
        Centre, :math:`|z_0|<1`.
    n : int
        Number of tokens.
    rng : int or numpy.random.Generator, optional
        Seed or generator.
    equispaced : bool
        Equispaced constants :math:`c_k=2\pi k/n+c` instead of i.i.d. uniform ones.

    Returns
    -------
    array (n,)
        Token angles :math:`\theta_k`.

    %(refs_oa)s
    """
    z0 = _check_centre(z0)
    if z0.ndim != 0 or abs(z0) >= 1:
        raise ValueError(f"sampling needs one z0 with |z0| < 1 (|z0| = 1 is a point mass, not a density), got {z0}")
    n = validate_count(n, "n")
    equispaced = validate_flag(equispaced, "equispaced")
    rng = validate_rng(rng)
    require_memory(4 * n, f"sample_ott_antonsen with n = {n}")
    c = 2 * np.pi * np.arange(n) / n + rng.uniform(0, 2 * np.pi) if equispaced else rng.uniform(0, 2 * np.pi, n)
    psi = np.angle(mobius(complex(z0), 0.0, c))  # the WS map of uniform constants, alpha = z0
    return psi / 2 + np.pi * rng.integers(0, 2, n)


@fill_doc(_DOC)
def poisson_kernel_atoms(z, m: int = 4096) -> np.ndarray:
    r"""m equal-mass atoms of the Poisson kernel :math:`p_z(\psi)=\frac1{2\pi}\frac{1-|z|^2}{|e^{i\psi}-z|^2}`.

    The images of :math:`c_k=2\pi(k+\frac12)/m` by the Möbius map (:func:`~tokendynamics.kuramoto.mobius`), which
    pushes the uniform law to :math:`p_z`: :math:`W_1\le2\pi/m`. For :math:`|z|=1` every atom is at :math:`\arg z`.

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

    %(refs_oa)s
    """
    z = np.asarray(z, dtype=complex)
    if not np.all(np.isfinite(z)) or np.any(np.abs(z) > 1 + 1e-9):
        raise ValueError("z must be finite and lie in the closed unit disk")
    z = z / np.maximum(1.0, np.abs(z))  # solver round-off just outside the circle
    m = validate_count(m, "m")
    require_memory(3 * m * z.size, f"poisson_kernel_atoms with m = {m}")
    out = np.angle(mobius(z, 0.0, 2 * np.pi * (np.arange(m) + 0.5) / m))
    on_circle = np.abs(z) >= 1 - 1e-15
    return np.where(on_circle[..., None], np.angle(z)[..., None], out) if np.any(on_circle) else out
